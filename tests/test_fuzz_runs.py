"""Property and fuzz tests of the run reader of the post-run reconstruction
(``runs.reconstruct_runs``) (issue 8).

The properties, case counts and shared machinery are in ``fuzz_support`` and
``fuzz_runs_support``; the samples and results readers are fuzzed in ``test_fuzz_samples``.
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
from fuzz_runs_support import (
    SAMPLE_FIELDS,
    real_samples,
    results_fields,
    results_json,
)
from fuzz_support import (
    N_HOOK_MUTATIONS,
    N_HOOK_REAL_MUTATIONS,
    N_HOOK_REAL_REORDER,
    N_HOOK_REORDER,
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
    shuffle_keys,
    targeted_ops,
)
from hypothesis import given
from hypothesis import strategies as st

from lmeval_microbench.build import build_bundle
from lmeval_microbench.bundle import save_bundle
from lmeval_microbench.personfit import check_estimate
from lmeval_microbench.reconstruct import bundle_estimator
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.runs import reconstruct_runs
from lmeval_microbench.synthetic import random_item_params, simulate_responses
from lmeval_microbench.truth import align_target

__all__ = ["bundle_template", "real_samples"]  # fixtures, used by name


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
