"""Property and fuzz tests of the lm-eval samples and results readers and of the run reader
of the post-run reconstruction (``runs.reconstruct_runs``) (issue 8).

The properties, case counts and shared machinery are in ``fuzz_support``.
"""

from __future__ import annotations

import hashlib
import json
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fuzz_support import (
    N_HOOK_MUTATIONS,
    N_HOOK_REAL_MUTATIONS,
    N_HOOK_REAL_REORDER,
    N_HOOK_REORDER,
    N_REAL_SAMPLES_MUTATIONS,
    N_REAL_SAMPLES_REORDER,
    N_RESULTS_JSON,
    N_SAMPLES_BYTES,
    N_SAMPLES_JSON,
    N_SAMPLES_REORDER,
    N_SAMPLES_ROUNDTRIP,
    SHARED_DATA,
    TS,
    bundle_template,
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

from lmeval_microbench.build import build_bundle
from lmeval_microbench.bundle import save_bundle
from lmeval_microbench.collect import (
    SamplesRun,
    collect_samples,
    read_samples_file,
)
from lmeval_microbench.personfit import check_estimate
from lmeval_microbench.reconstruct import bundle_estimator
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.runs import reconstruct_runs
from lmeval_microbench.synthetic import random_item_params, simulate_responses
from lmeval_microbench.truth import align_target

__all__ = ["bundle_template"]  # fixtures, used by name


SAMPLE_FIELDS = (
    "doc_id",
    "doc",
    "doc.id",
    "doc.item_id",
    "doc.bundle",
    "doc.metabench_idx",
    "doc.mb_sub_idx",
    "filter",
    "metrics",
    "metrics.0",
    "acc",
    "doc_hash",
)


def results_fields(task: str) -> tuple[str, ...]:
    return (
        "results",
        f"results.{task}",
        f"results.{task}.estimate,none",
        "configs",
        f"configs.{task}",
        f"configs.{task}.filter_list",
        f"configs.{task}.metric_list",
        f"configs.{task}.metadata",
        f"configs.{task}.metadata.bundle",
        f"configs.{task}.metadata.microbench_level",
        "config",
        "config.model_args",
        "config.model_args.pretrained",
        "model_name",
        "versions",
        f"versions.{task}",
    )


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


def sample_lines(run: dict[str, Any]) -> list[dict[str, Any]]:
    lines = []
    for k, (item, score) in enumerate(run["scores"].items()):
        line: dict[str, Any] = {
            "doc_id": k,
            "doc": {"id": item, "question": f"Q {item}?", "choices": ["a", "b"], "answer": 0},
            "target": "a",
            "arguments": [["Q?", " a"], ["Q?", " b"]],
            "resps": [[["-1.0", "False"]], [["-2.0", "False"]]],
            "filtered_resps": [["-1.0", "False"], ["-2.0", "False"]],
            "doc_hash": hashlib.sha256(item.encode()).hexdigest(),
        }
        if run["new_format"]:
            line.update({"filter": "none", "metrics": ["acc"]})
        line["acc"] = score
        lines.append(line)
    return lines


def results_json(task: str, model: str) -> dict[str, Any]:
    return {
        "results": {task: {"alias": task, "acc,none": 0.5, "acc_stderr,none": 0.1}},
        "configs": {
            task: {
                "task": task,
                "metric_list": [{"metric": "acc", "aggregation": "mean"}],
                "metadata": {"version": 1.0},
            }
        },
        "versions": {task: 1.0},
        "config": {"model": "hf", "model_args": {"pretrained": model}},
        "model_name": model,
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
REAL_FILES = {
    "smollm2": (
        "smollm2-135m",
        "samples_mb_mmlu_local_2026-11-21T04-46-29.870854.jsonl",
        "mb_sub_idx",
    ),
    "pythia-winogrande": (
        "pythia-14m",
        "samples_metabench_winogrande_secondary_2024-11-26T10-50-23.349203.jsonl",
        "metabench_idx",
    ),
    "pythia-arc": (
        "pythia-14m",
        "samples_metabench_arc_secondary_2024-11-26T10-50-23.349203.jsonl",
        "metabench_idx",
    ),
}


def real_lines(shared: Path, which: str) -> tuple[str, list[str], str]:
    folder, name, field = REAL_FILES[which]
    path = shared / "lm_eval_samples" / folder / name
    if not path.is_file():
        pytest.skip(f"real samples file {path} not found: real-data test")
    return name, path.read_text(encoding="utf-8").splitlines(), field


@pytest.fixture(scope="module")
def real_samples(shared_data: Path) -> dict[str, tuple[str, list[str], str]]:
    return {which: real_lines(shared_data, which) for which in REAL_FILES}


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


# ============================================================================ run reader (hook)
HOOK_TASK = "microbench_toy"
HOOK_MODELS = ("org/alpha", "org/beta", "org/gamma")


def hook_lines(template: dict[str, Any], m: int) -> list[dict[str, Any]]:
    bundle, docs = template["bundle"], template["docs"]
    lines = []
    for k, item in enumerate(bundle.item_ids):
        lines.append(
            {
                "doc_id": k,
                "doc": docs[item],
                "target": 0,
                "arguments": [["Q", " a"]],
                "resps": [[["-1.0", "False"]]],
                "filtered_resps": [["-1.0", "False"]],
                "filter": "none",
                "metrics": ["acc"],
                "doc_hash": hashlib.sha256(item.encode()).hexdigest(),
                "acc": float((k + m) % 3 == 0),
            }
        )
    return lines


def hook_results(model: str) -> dict[str, Any]:
    results = results_json(HOOK_TASK, model)
    results["configs"][HOOK_TASK]["metadata"] = {"version": 1.0, "bundle": "toy-own"}
    return results


def write_hook_runs(
    template: dict[str, Any],
    root: Path,
    transform: Callable[[int, list[dict[str, Any]]], list[str]] | None = None,
) -> list[Path]:
    paths = []
    for m, model in enumerate(HOOK_MODELS):
        folder = root / f"run{m}"
        folder.mkdir(parents=True)
        lines = hook_lines(template, m)
        texts = [json.dumps(x) for x in lines] if transform is None else transform(m, lines)
        path = folder / f"samples_{HOOK_TASK}_{TS}.jsonl"
        path.write_text("\n".join(texts) + "\n", encoding="utf-8")
        (folder / f"results_{TS}.json").write_text(
            json.dumps(hook_results(model)), encoding="utf-8"
        )
        paths.append(path)
    return paths


def reconstruct_numbers(root: Path, bundles: list[Path], **kwargs: Any) -> dict[Any, Any]:
    found = reconstruct_runs([root], bundles=bundles, shipped=False, progress=False, **kwargs)
    numbers: dict[Any, Any] = {}
    for record in found.estimates:
        est = record.estimate
        numbers[(record.model, record.benchmark)] = (
            record.items_scored,
            record.subset_mean,
            None if est is None else (est.value, est.lower, est.upper),
        )
    return numbers


@pytest.fixture(scope="module")
def hook_expected(bundle_template: dict[str, Any]) -> dict[Any, Any]:
    with tempfile.TemporaryDirectory(prefix="fuzz-") as name:
        root = Path(name)
        write_hook_runs(bundle_template, root / "runs")
        return quiet(lambda: reconstruct_numbers(root / "runs", [bundle_template["folder"]]))


def test_hook_roundtrip(bundle_template: dict[str, Any], hook_expected: dict[Any, Any]) -> None:
    """Property 3: the reconstruction reads every logged score (subset mean, item count) and
    gives the bundle's own estimate for it."""
    bundle = bundle_template["bundle"]
    assert set(hook_expected) == {(m, "toy") for m in HOOK_MODELS}
    for m, model in enumerate(HOOK_MODELS):
        scores = {line["doc"]["item_id"]: line["acc"] for line in hook_lines(bundle_template, m)}
        items_scored, subset_mean, numbers = hook_expected[(model, "toy")]
        assert items_scored == bundle.budget
        assert subset_mean == pytest.approx(np.mean(list(scores.values())))
        direct = quiet(lambda scores=scores: bundle_estimator(bundle).estimate(scores))
        direct = check_estimate(bundle, scores, direct)[0]  # widened where person fit says so
        assert numbers == pytest.approx((direct.value, direct.lower, direct.upper))


@fuzz_settings(N_HOOK_REORDER)
@given(rnd=st.randoms(use_true_random=False))
def test_hook_reorder(
    bundle_template: dict[str, Any], hook_expected: dict[Any, Any], rnd: random.Random
) -> None:
    """Property 2: lines (and the keys of every line) in another order give the same
    reconstructed estimates for every model."""

    def shuffled(m: int, lines: list[dict[str, Any]]) -> list[str]:
        texts = [json.dumps(shuffle_keys(x, rnd)) for x in lines]
        rnd.shuffle(texts)
        return texts

    with case_dir() as tmp:
        write_hook_runs(bundle_template, tmp / "runs", shuffled)
        found = quiet(lambda: reconstruct_numbers(tmp / "runs", [bundle_template["folder"]]))
        assert found == hook_expected


@fuzz_settings(N_HOOK_MUTATIONS)
@given(
    victim=st.integers(0, len(HOOK_MODELS) - 1),
    line=st.integers(0, 2**16),
    ops=json_ops,
    fields=targeted_ops(SAMPLE_FIELDS),
    result_fields=targeted_ops(results_fields(HOOK_TASK)),
    raw=byte_ops,
    kind=st.sampled_from(["json", "bytes", "results"]),
)
def test_hook_mutations(
    bundle_template: dict[str, Any],
    victim: int,
    line: int,
    ops: list,
    fields: list,
    result_fields: list,
    raw: list,
    kind: str,
) -> None:
    """Property 1 for ``reconstruct_runs`` when one model's samples file (a line's fields, or
    its bytes) or results json is mutated: the error names that file."""

    def mutated(m: int, lines: list[dict[str, Any]]) -> list[str]:
        texts = [json.dumps(x) for x in lines]
        if m == victim and kind == "json":
            k = line % len(lines)
            texts[k] = dump_json(mutate_fields(mutate_json(lines[k], ops), fields))
        return texts

    with case_dir() as tmp:
        paths = write_hook_runs(bundle_template, tmp / "runs", mutated)
        samples = paths[victim]
        results = samples.parent / f"results_{TS}.json"
        if kind == "bytes":
            samples.write_bytes(mutate_bytes(samples.read_bytes(), raw))
        elif kind == "results":
            tree = mutate_fields(mutate_json(hook_results(HOOK_MODELS[victim]), ops), result_fields)
            results.write_text(dump_json(tree), encoding="utf-8")
        read_clean(
            lambda: reconstruct_numbers(tmp / "runs", [bundle_template["folder"]]),
            f"{samples.parent.name}/{samples.name}",
            f"{results.parent.name}/{results.name}",
            case=(victim, kind, line, raw if kind == "bytes" else (ops, fields, result_fields)),
        )


# ---------------------------------------------------------------------------- hook, real data
@pytest.fixture(scope="module")
def real_hook(real_samples: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A foreign-task bundle over the real pythia-14m winogrande run's items."""
    name, lines, field = real_samples["pythia-winogrande"]
    ids = [f"winogrande.{json.loads(line)['doc'][field]}" for line in lines]
    params = random_item_params(len(ids), seed=5)
    matrix, _ = simulate_responses(params, 60, seed=6)
    matrix = ResponseMatrix(matrix.values, matrix.model_ids, ids, source="synthetic")
    source, target = align_target(matrix, None)
    bundle = quiet(
        lambda: build_bundle(
            source,
            target,
            name="wino-fuzz",
            benchmark="winogrande",
            method="random",
            budget=10,
            estimators=["mean"],
            default_estimator="mean",
        )
    )
    folder = save_bundle(bundle, tmp_path_factory.mktemp("real-bundle") / "wino-fuzz")
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        run = Path(tmp) / "pythia-14m"
        run.mkdir()
        (run / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        expected = quiet(lambda: reconstruct_numbers(Path(tmp), [folder]))
    assert list(expected) == [("pythia-14m", "winogrande")]
    return {"folder": folder, "name": name, "lines": lines, "expected": expected}


@fuzz_settings(N_HOOK_REAL_REORDER)
@given(rnd=st.randoms(use_true_random=False))
def test_hook_real_reorder(real_hook: dict[str, Any], rnd: random.Random) -> None:
    """Property 2 on the real pythia-14m winogrande run read as a foreign task: shuffled
    lines give the same estimate."""
    lines = list(real_hook["lines"])
    rnd.shuffle(lines)
    with case_dir() as tmp:
        run = tmp / "pythia-14m"
        run.mkdir()
        (run / real_hook["name"]).write_text("\n".join(lines) + "\n", encoding="utf-8")
        found = quiet(lambda: reconstruct_numbers(tmp, [real_hook["folder"]]))
        assert found == real_hook["expected"]


@fuzz_settings(N_HOOK_REAL_MUTATIONS)
@given(
    line=st.integers(0, 2**16),
    ops=json_ops,
    fields=targeted_ops(SAMPLE_FIELDS),
    raw=byte_ops,
    kind=st.sampled_from(["json", "bytes"]),
)
def test_hook_real_mutations(
    real_hook: dict[str, Any], line: int, ops: list, fields: list, raw: list, kind: str
) -> None:
    """Property 1 for ``reconstruct_runs`` on mutations of the real winogrande run."""
    lines = list(real_hook["lines"])
    with case_dir() as tmp:
        run = tmp / "pythia-14m"
        run.mkdir()
        path = run / real_hook["name"]
        if kind == "json":
            k = line % len(lines)
            lines[k] = dump_json(mutate_fields(mutate_json(json.loads(lines[k]), ops), fields))
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        else:
            path.write_bytes(mutate_bytes(("\n".join(lines) + "\n").encode(), raw))
        read_clean(
            lambda: reconstruct_numbers(tmp, [real_hook["folder"]]),
            path.name,
            case=(kind, line, (ops, fields) if kind == "json" else raw),
        )
