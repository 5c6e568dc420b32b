"""Property and fuzz tests of the lm-eval samples and results readers (issue 8).

The properties, case counts and shared machinery are in ``fuzz_support`` and
``fuzz_runs_support``; the run reader of the post-run reconstruction is fuzzed in
``test_fuzz_runs``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from fuzz_runs_support import (
    REAL_FILES,
    SAMPLE_FIELDS,
    real_samples,
    results_fields,
    results_json,
    sample_lines,
)
from fuzz_support import (
    N_REAL_SAMPLES_MUTATIONS,
    N_REAL_SAMPLES_REORDER,
    N_RESULTS_JSON,
    N_SAMPLES_BYTES,
    N_SAMPLES_JSON,
    N_SAMPLES_REORDER,
    N_SAMPLES_ROUNDTRIP,
    SHARED_DATA,
    TS,
    byte_ops,
    case_dir,
    dump_json,
    fuzz_settings,
    json_ops,
    mutate_bytes,
    mutate_fields,
    mutate_json,
    quiet,
    read_clean,
    safe_ids,
    same_numbers,
    shuffle_keys,
    targeted_ops,
)
from hypothesis import given
from hypothesis import strategies as st

from lmeval_microbench.collect import (
    SamplesRun,
    collect_samples,
    read_samples_file,
)

__all__ = ["real_samples"]  # fixtures, used by name


# ============================================================================ samples files
@st.composite
def sample_runs(draw: st.DrawFn) -> dict[str, Any]:
    """A synthetic lm-eval run: item id -> score, in the new (``filter``/``metrics`` keys) or
    the old format, with an optional results json naming the model."""
    ids = draw(st.lists(safe_ids, min_size=1, max_size=8, unique=True))
    scores = draw(
        st.lists(
            st.sampled_from([0.0, 1.0, 0.5, 0.25, 1.0 / 3.0]), min_size=len(ids), max_size=len(ids)
        )
    )
    return {
        "scores": dict(zip(ids, scores, strict=True)),
        "new_format": draw(st.booleans()),
        "results": draw(st.booleans()),
        "model": draw(st.sampled_from(["org/model-a", "EleutherAI/pythia-14m"])),
    }


def write_run(
    folder: Path,
    run: dict[str, Any],
    lines: list[dict[str, Any]] | None = None,
    task: str = "fuzztask",
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"samples_{task}_{TS}.jsonl"
    lines = sample_lines(run) if lines is None else lines
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    if run["results"]:
        (folder / f"results_{TS}.json").write_text(
            json.dumps(results_json(task, run["model"]), indent=2), encoding="utf-8"
        )
    return path


@fuzz_settings(N_SAMPLES_ROUNDTRIP)
@given(run=sample_runs())
def test_samples_roundtrip(run: dict[str, Any]) -> None:
    """Property 3: every logged score reads back under its item id, and collect_samples puts
    it in the model's row."""
    with case_dir() as tmp:
        path = write_run(tmp / "fuzzrun", run)
        ok, read = read_clean(lambda: read_samples_file(path, metric="acc"), path.name)
        assert ok, read
        assert read.scores == run["scores"]
        ok, matrix = read_clean(
            lambda: collect_samples(tmp, metric="acc", progress=False), path.name
        )
        assert ok, matrix
        model = run["model"] if run["results"] else "fuzzrun"
        assert matrix.model_ids == (model,)
        assert matrix.row(model) == run["scores"]


@fuzz_settings(N_SAMPLES_REORDER)
@given(runs=st.lists(sample_runs(), min_size=1, max_size=3), rnd=st.randoms(use_true_random=False))
def test_samples_reorder(runs: list[dict[str, Any]], rnd: random.Random) -> None:
    """Property 2: lines in another order and keys of every line in another order give the
    same score per item, and the same matrix per (model, item)."""
    with case_dir() as tmp:
        first, second = tmp / "first", tmp / "second"
        for k, run in enumerate(runs):
            run = {**run, "results": False}  # one model per folder
            lines = sample_lines(run)
            write_run(first / f"model{k}", run, lines)
            shuffled = [shuffle_keys(line, rnd) for line in lines]
            rnd.shuffle(shuffled)
            path = write_run(second / f"model{k}", run, shuffled)
            ok, read = read_clean(
                lambda path=path: read_samples_file(path, metric="acc"), path.name
            )
            assert ok, read
            assert read.scores == run["scores"]
        a = quiet(lambda: collect_samples(first, metric="acc", progress=False))
        b = quiet(lambda: collect_samples(second, metric="acc", progress=False))
        assert a.model_ids == b.model_ids and a.item_ids == b.item_ids
        assert same_numbers(a.values, b.values)


@fuzz_settings(N_SAMPLES_BYTES)
@given(run=sample_runs(), ops=byte_ops)
def test_samples_byte_mutations(run: dict[str, Any], ops: list) -> None:
    """Property 1 for ``read_samples_file`` and ``collect_samples`` on byte-mutated samples."""
    with case_dir() as tmp:
        path = write_run(tmp / "fuzzrun", run)
        path.write_bytes(mutate_bytes(path.read_bytes(), ops))
        read_clean(lambda: read_samples_file(path, metric="acc"), path.name, case=(run, ops))
        read_clean(
            lambda: collect_samples(tmp, metric="acc", progress=False), path.name, case=(run, ops)
        )


@fuzz_settings(N_SAMPLES_JSON)
@given(run=sample_runs(), line=st.integers(0, 7), ops=json_ops, fields=targeted_ops(SAMPLE_FIELDS))
def test_samples_json_mutations(run: dict[str, Any], line: int, ops: list, fields: list) -> None:
    """Property 1 for field-level mutations of one line of a samples file."""
    lines = sample_lines(run)
    k = line % len(lines)
    with case_dir() as tmp:
        path = write_run(tmp / "fuzzrun", run)
        texts = [json.dumps(x) for x in lines]
        texts[k] = dump_json(mutate_fields(mutate_json(lines[k], ops), fields))
        path.write_text("\n".join(texts) + "\n", encoding="utf-8")
        case = (run, k, ops, fields)
        read_clean(lambda: read_samples_file(path, metric="acc"), path.name, case=case)
        read_clean(lambda: collect_samples(tmp, metric="acc", progress=False), path.name, case=case)


def _real_results() -> dict[str, Any] | None:
    path = (
        SHARED_DATA / "lm_eval_samples" / "smollm2-135m" / "results_2026-11-21T04-46-29.870854.json"
    )
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    return None


REAL_RESULTS = _real_results()


@fuzz_settings(N_RESULTS_JSON)
@given(
    run=sample_runs(),
    ops=json_ops,
    fields=targeted_ops(results_fields("fuzztask")),
    real=st.booleans(),
)
def test_results_json_mutations(run: dict[str, Any], ops: list, fields: list, real: bool) -> None:
    """Property 1 for the results json beside a samples file (read for the model id and the
    filter names): mutations of a synthetic one, or of the real smollm2 results json (its task
    renamed to this run's) when ../shared/data is present."""
    run = {**run, "results": True}
    with case_dir() as tmp:
        samples = write_run(tmp / "fuzzrun", run)
        base = results_json("fuzztask", run["model"])
        if real and REAL_RESULTS is not None:
            text = json.dumps(REAL_RESULTS).replace('"mb_mmlu_local"', '"fuzztask"')
            base = json.loads(text)
        results = tmp / "fuzzrun" / f"results_{TS}.json"
        results.write_text(dump_json(mutate_fields(mutate_json(base, ops), fields)), "utf-8")
        names, case = (results.name, samples.name), (real, ops, fields)
        read_clean(lambda: read_samples_file(samples, metric="acc"), *names, case=case)
        read_clean(lambda: SamplesRun(samples).model_id, *names, case=case)
        read_clean(lambda: collect_samples(tmp, metric="acc", progress=False), *names, case=case)


# ---------------------------------------------------------------------------- real samples
@fuzz_settings(N_REAL_SAMPLES_REORDER)
@given(which=st.sampled_from(sorted(REAL_FILES)), rnd=st.randoms(use_true_random=False))
def test_real_samples_roundtrip_and_reorder(
    real_samples: dict[str, Any], which: str, rnd: random.Random
) -> None:
    """Properties 2 and 3 on the real samples files (copied to a temporary folder): the scores
    read are those of the lines (by the doc's id field), whatever the line order."""
    name, lines, field = real_samples[which]
    parsed = [json.loads(line) for line in lines]
    expected = {str(p["doc"][field]): float(p["acc"]) for p in parsed}
    shuffled = list(lines)
    rnd.shuffle(shuffled)
    with case_dir() as tmp:
        (tmp / "run").mkdir()
        path = tmp / "run" / name
        path.write_text("\n".join(shuffled) + "\n", encoding="utf-8")
        ok, read = read_clean(lambda: read_samples_file(path, metric="acc"), path.name)
        assert ok, read
        assert read.scores == expected


@fuzz_settings(N_REAL_SAMPLES_MUTATIONS)
@given(
    which=st.sampled_from(sorted(REAL_FILES)),
    line=st.integers(0, 2**16),
    ops=json_ops,
    fields=targeted_ops(SAMPLE_FIELDS),
    raw=byte_ops,
    kind=st.sampled_from(["json", "bytes"]),
)
def test_real_samples_mutations(
    real_samples: dict[str, Any],
    which: str,
    line: int,
    ops: list,
    fields: list,
    raw: list,
    kind: str,
) -> None:
    """Property 1 on mutations of the first 20 lines of the real samples files."""
    name, lines, _ = real_samples[which]
    lines = list(lines[:20])
    k = line % len(lines)
    with case_dir() as tmp:
        (tmp / "run").mkdir()
        path = tmp / "run" / name
        if kind == "json":
            lines[k] = dump_json(mutate_fields(mutate_json(json.loads(lines[k]), ops), fields))
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        else:
            path.write_bytes(mutate_bytes(("\n".join(lines) + "\n").encode(), raw))
        read_clean(
            lambda: read_samples_file(path, metric="acc"),
            path.name,
            case=(which, kind, k, (ops, fields) if kind == "json" else raw),
        )
