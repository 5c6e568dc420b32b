"""Post-run reconstruction: joint and averaged estimates, the CLI's files, and the real
pythia-14m ``--log_samples`` output of metabench's tasks through ``microbench reconstruct``,
checked against an independent recomputation (``collect_samples`` + ``estimate_models``)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reconstruct_support import (
    BUDGET,
    N_ITEMS,
    SEEDS,
    reconstruct,
    run_of,
    suite,
    toy_source,
    toys,
)

from lmeval_microbench._io import seal_json
from lmeval_microbench._types import Estimate
from lmeval_microbench.bundle import load_bundle
from lmeval_microbench.cli.app import main
from lmeval_microbench.collect import collect_samples
from lmeval_microbench.errors import BundleError, InputError
from lmeval_microbench.harness import include_path
from lmeval_microbench.reconstruct import estimate_models
from lmeval_microbench.runs import (
    BenchmarkEstimate,
    ReconstructionWarning,
    average_estimate,
    natural_key,
    reconstruct_runs,
    write_reconstruction,
)

__all__ = ["suite", "toys"]  # fixtures, used by name


# ---------------------------------------------------------------------------- joint
@pytest.fixture(scope="module")
def joint_state(toys) -> dict[str, Any]:
    """A joint estimator fitted on the toy bundles' subsets and source models."""
    from lmeval_microbench.estimators.joint import JointEstimator

    sources = {bm: toy_source(bm, seed, "x")[0] for bm, seed in SEEDS.items()}
    estimator = JointEstimator(n_folds=3).fit(
        sources,
        {bm: toys[bm][0].subset for bm in SEEDS},
        {bm: sources[bm].mean_scores() for bm in SEEDS},
    )
    return estimator.state_dict()


def test_joint_average_comes_from_the_suites_joint_estimator(tmp_path, suite, toys, joint_state):
    from lmeval_microbench.estimators.joint import JointEstimator

    (suite / "joint.json").write_text(json.dumps(seal_json(joint_state)))
    out = tmp_path / "out"
    union: dict[str, float] = {}
    for k, bm in enumerate(("toya", "toyb")):
        union.update(run_of(out, "full", toys[bm], seed=20 + k))
    run_of(out, "half", toys["toya"], seed=30)
    with warnings.catch_warnings(record=True) as caught:  # found beside the bundles: quiet
        warnings.simplefilter("always")
        result = reconstruct_runs(out, bundles=[suite], progress=False)
    assert not [w for w in caught if "no joint estimate" in str(w.message)]
    with pytest.warns(ReconstructionWarning, match=r"'half': no joint estimate \(benchmarks"):
        named = reconstruct_runs(out, bundles=[suite], joint=suite / "joint.json", progress=False)
    assert set(named.joint) == {"full"}
    expected = JointEstimator.from_state(joint_state).estimate(union)
    assert set(result.joint) == {"full"}
    for output in ("toya", "toyb", "average"):
        assert result.joint["full"][output].value == pytest.approx(expected[output].value)
    assert "average (joint)" in result.to_markdown()
    assert result.to_dict()["models"][0]["joint"]["average"]["level"] == 0.9
    fitted = joint_state["subsets"]["toya"]
    outside = next(f"toya.{k}" for k in range(N_ITEMS) if f"toya.{k}" not in fitted["item_ids"])
    shifted = {**fitted, "item_ids": [outside, *fitted["item_ids"][1:]]}
    state = {**joint_state, "subsets": {**joint_state["subsets"], "toya": shifted}}
    (suite / "joint.json").write_text(json.dumps(seal_json(state)))
    with pytest.raises(InputError, match=r"joint.json: joint: estimator state is unusable"):
        reconstruct(out, bundles=[suite])


# ---------------------------------------------------------------------------- averages
def test_average_interval_is_the_mean_of_bonferroni_intervals():
    def record(bm: str, value: float) -> BenchmarkEstimate:
        estimate = Estimate(value, value - 0.05, value + 0.05, 0.9)
        return BenchmarkEstimate("m", bm, bm, bm, "irt", "acc", 6, 6, None, value, estimate)

    found = {"arc": record("arc", 0.4), "mmlu": record("mmlu", 0.6)}
    wide = {"arc": Estimate(0.4, 0.3, 0.52, 0.95), "mmlu": Estimate(0.6, 0.5, 0.66, 0.95)}
    average = average_estimate("m", found, wide, 0.9)
    assert (average.value, average.lower, average.upper) == pytest.approx((0.5, 0.4, 0.59))
    assert "0.9500" in average.method
    missing = average_estimate("m", found, {**wide, "mmlu": None}, 0.9)
    assert math.isnan(missing.lower) and missing.value == pytest.approx(0.5)


def test_natural_key_orders_checkpoints():
    names = ["step-100", "step-20", "step-3", "base"]
    assert sorted(names, key=natural_key) == ["base", "step-3", "step-20", "step-100"]


# ---------------------------------------------------------------------------- CLI
def test_cli_writes_json_and_markdown(tmp_path, suite, toys, capsys):
    run_of(tmp_path / "out", "m", toys["toya"], seed=1)
    target = tmp_path / "est.json"
    code = main(
        [
            *("reconstruct", str(tmp_path / "out"), "--bundle", str(suite), "--quiet"),
            *("--out", str(target), "--format", "json"),
        ]
    )
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(target.read_text())
    assert printed["models"][0]["benchmarks"]["toya"]["items_scored"] == BUDGET
    assert "| m |" in target.with_suffix(".md").read_text()
    assert main(["reconstruct", str(tmp_path / "nowhere"), "--quiet"]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_cli_out_replaces_files_only_with_overwrite(tmp_path, suite, toys, capsys):
    run_of(tmp_path / "out", "m", toys["toya"], seed=1)
    argv = ["reconstruct", str(tmp_path / "out"), "--bundle", str(suite), "--quiet", "--out"]
    matrix = tmp_path / "m.parquet"
    matrix.write_bytes(b"PAR1 a matrix")
    assert main([*argv, str(matrix)]) == 2
    assert f"{matrix} exists; pass --overwrite" in capsys.readouterr().err
    assert matrix.read_bytes() == b"PAR1 a matrix"
    (tmp_path / "est.md").write_text("an older table")
    assert main([*argv, str(tmp_path / "est.json")]) == 2
    assert f"{tmp_path / 'est.md'} exists; pass --overwrite" in capsys.readouterr().err
    assert not (tmp_path / "est.json").exists()
    assert main([*argv, str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path} is a folder" in err and "Traceback" not in err
    assert main([*argv, str(tmp_path / "est.json"), "--overwrite"]) == 0
    assert "| m |" in (tmp_path / "est.md").read_text()


def test_markdown_names_the_json_it_was_written_with(tmp_path, suite, toys, monkeypatch, capsys):
    """A kill between the two renames leaves a table whose named checksum is not the JSON's."""
    run_of(tmp_path / "a", "first", toys["toya"], seed=1)
    run_of(tmp_path / "b", "second", toys["toya"], seed=2)
    target = tmp_path / "est.json"
    write_reconstruction(reconstruct(tmp_path / "a", bundles=[suite]), target)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    assert f"sha256 {digest}" in target.with_suffix(".md").read_text()
    replace = os.replace

    def killed_before_the_json(src, dst):
        if Path(dst) == target:
            raise KeyboardInterrupt
        replace(src, dst)

    monkeypatch.setattr(os, "replace", killed_before_the_json)
    with pytest.raises(KeyboardInterrupt):
        write_reconstruction(reconstruct(tmp_path / "b", bundles=[suite]), target, overwrite=True)
    table = target.with_suffix(".md").read_text()
    assert "| second |" in table and f"sha256 {digest}" not in table
    assert hashlib.sha256(target.read_bytes()).hexdigest() == digest  # the old JSON, whole
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    monkeypatch.setattr(os, "replace", replace)
    # the reader of the pair says so, naming both files; either file of the pair is checked
    for given in (target, target.with_suffix(".md")):
        assert main(["verify", str(given)]) == 2
        err = capsys.readouterr().err
        assert f"{target.with_suffix('.md')} and {target} do not match" in err
    write_reconstruction(reconstruct(tmp_path / "b", bundles=[suite]), target, overwrite=True)
    assert main(["verify", str(target)]) == 0
    assert capsys.readouterr().out == f"ok: {target.with_suffix('.md')} shows {target}\n"


# ---------------------------------------------------------------------------- real data
PYTHIA = "lm_eval_samples/pythia-14m"
ID_FIELDS = {"mmlu": "mb_sub_idx"}
METRICS = {"arc": "acc_norm", "hellaswag": "acc_norm", "truthfulqa": "acc", "gsm8k": "exact_match"}


def test_pythia_14m_metabench_run_reconstructs_through_the_cli(shared_data, capsys):
    folder = shared_data / PYTHIA
    assert main(["reconstruct", str(folder), "--format", "json", "--quiet"]) == 0
    payload = json.loads(capsys.readouterr().out)
    (model,) = payload["models"]
    assert model["model"] == "pythia-14m"
    assert list(model["benchmarks"]) == [
        "arc",
        "hellaswag",
        "mmlu",
        "truthfulqa",
        "winogrande",
        "gsm8k",
    ]
    assert any("metabench_mmlu_permute" in s for s in payload["skipped"])  # other items
    for bm, found in model["benchmarks"].items():
        bundle = load_bundle(include_path() / "openllm_v1" / bm)
        assert found["items_scored"] == bundle.budget and found["missing_items"] == []
        assert found["lower"] <= found["estimate"] <= found["upper"]
        # independent recomputation: collect the matrix by metabench index, estimate
        samples = next(folder.glob(f"samples_metabench_{bm}_secondary_*.jsonl"))
        matrix = collect_samples(
            samples,
            metric=METRICS.get(bm, "acc"),
            filter="0",
            id_field=ID_FIELDS.get(bm, "metabench_idx"),
            id_prefix=f"{bm}.",
            model_id="pythia-14m",
            progress=False,
        )
        (record,) = estimate_models(bundle, matrix)
        assert found["estimate"] == pytest.approx(record["estimate_value"], abs=1e-12)
        assert found["upper"] == pytest.approx(record["estimate_upper"], abs=1e-12)
    average = model["average"]
    assert average["complete"] and average["suite"] == "openllm_v1"
    assert average["lower"] <= average["estimate"]
    values = [found["estimate"] for found in model["benchmarks"].values()]
    assert average["estimate"] == pytest.approx(np.mean(values))


def test_pythia_14m_task_map_gives_the_same_estimates(shared_data):
    folder = shared_data / PYTHIA
    mapping = {f"metabench_{bm}_secondary": bm for bm in ("arc", "mmlu", "gsm8k")}
    mapped = reconstruct(folder, task_map=mapping)
    detected = reconstruct(folder)
    for bm in ("arc", "mmlu", "gsm8k"):
        assert mapped.get("pythia-14m", bm).value == detected.get("pythia-14m", bm).value
    with pytest.raises(BundleError, match="no bundle or benchmark named 'arcc'"):
        reconstruct(folder, task_map={"metabench_arc_secondary": "arcc"})
