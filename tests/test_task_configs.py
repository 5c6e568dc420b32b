"""The shipped task folder: files, bundles, documents, and what lm-eval makes of them.

The prompt tests load the shipped tasks with lm-eval itself and compare every request it
builds with the prompt the Open LLM Leaderboard rendered for that item
(``../shared/data/openllm_v1/prompts``): the context must be equal character for character.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from lmeval_microbench.bundle import load_bundle
from lmeval_microbench.errors import InputError
from lmeval_microbench.harness import OPENLLM_V1_GROUP, OPENLLM_V1_TASKS, include_path
from lmeval_microbench.harness.docs import ITEMS_JSONL, check_docs_match_bundle, read_docs
from lmeval_microbench.harness.export import HOOKS_MODULE, hooks_module
from lmeval_microbench.harness.hooks import ESTIMATE_METRICS, PROCESSORS
from lmeval_microbench.personfit import BELOW_CHANCE, lowest_score
from lmeval_microbench.runs import JOINT_FILE, load_joint

REPO = Path(__file__).resolve().parents[1]
SUITE = include_path() / "openllm_v1"
BENCHMARKS = [task.removeprefix("microbench_") for task in OPENLLM_V1_TASKS]
MULTIPLE_CHOICE = [bm for bm in BENCHMARKS if bm != "gsm8k"]
GSM8K_STOP = [":", "Question:", "Question"]


class _TaggedLoader(yaml.SafeLoader):
    """Reads ``!function x.y`` as the string ``x.y`` (lm-eval resolves it; we only look)."""


_TaggedLoader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def task_config(bm: str) -> dict[str, Any]:
    return yaml.load((SUITE / f"microbench_{bm}.yaml").read_text(), Loader=_TaggedLoader)


# ---------------------------------------------------------------------------- files
def test_the_suite_ships_inside_the_package_with_its_notice():
    assert SUITE.is_dir() and SUITE.is_relative_to(REPO / "lmeval_microbench")
    for task in (*OPENLLM_V1_TASKS, OPENLLM_V1_GROUP):
        assert (SUITE / f"{task}.yaml").is_file(), task
    assert "CC BY-NC-SA 4.0" in (SUITE / "NOTICE.md").read_text()
    assert (SUITE / f"{HOOKS_MODULE}.py").read_text() == hooks_module()  # generated, unedited
    group = yaml.safe_load((SUITE / f"{OPENLLM_V1_GROUP}.yaml").read_text())
    assert group["task"] == list(OPENLLM_V1_TASKS)
    assert group["aggregate_metric_list"] == [
        {"metric": "estimate", "aggregation": "mean", "weight_by_size": False}
    ]


@pytest.mark.parametrize("bm", BENCHMARKS)
def test_shipped_bundle_documents_and_yaml_agree(bm):
    bundle = load_bundle(SUITE / bm)  # checksums verified
    docs = read_docs(SUITE / bm / ITEMS_JSONL)
    check_docs_match_bundle(bundle, docs, where=bm)  # ids and content hashes
    assert [doc["item_id"] for doc in docs] == list(bundle.item_ids)
    assert all(doc["benchmark"] == bm for doc in docs)
    assert None not in bundle.content_hashes.values()
    assert bundle.benchmark == bm and bundle.license == "cc-by-nc-sa-4.0"
    assert bundle.dataset is not None and bundle.dataset.split is not None
    config = task_config(bm)
    hook = config["process_results"].removeprefix(f"{HOOKS_MODULE}.")
    metrics, estimated = PROCESSORS[hook]
    assert bundle.metric.name == estimated == config["metadata"]["estimated_metric"]
    assert [m["metric"] for m in config["metric_list"]] == [*metrics, *ESTIMATE_METRICS]
    assert config["metadata"]["bundle"] == bundle.name
    assert config["dataset_kwargs"] == {"microbench_items": bm}
    assert config["num_fewshot"] == 0


# ---------------------------------------------------------------------------- lm-eval
@pytest.fixture(scope="module")
def task_manager():
    pytest.importorskip("lm_eval")
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(include_path()), include_defaults=False)


@pytest.fixture(scope="module")
def shipped(task_manager) -> dict[str, Any]:
    return task_manager.load([OPENLLM_V1_GROUP])


def test_lm_eval_loads_the_group_and_its_six_tasks_offline(shipped, task_manager):
    assert set(shipped["tasks"]) == set(OPENLLM_V1_TASKS)
    assert shipped["group_map"][OPENLLM_V1_GROUP] == list(OPENLLM_V1_TASKS)
    assert "microbench" in task_manager.all_tags
    for task in shipped["tasks"].values():
        assert (
            len(task.eval_docs)
            == load_bundle(SUITE / task.config.dataset_kwargs["microbench_items"]).budget
        )


def leaderboard_prompts(shared_data: Path, bm: str) -> pd.Series:
    path = shared_data / "openllm_v1" / "prompts" / f"items-{bm}-B.csv"
    return pd.read_csv(path, keep_default_na=False).set_index("item")["prompt"]


def requests_by_item(task) -> dict[str, list]:
    task.build_all_requests(limit=None, rank=0, world_size=1)
    grouped: dict[str, list] = {}
    for instance in task.instances:
        grouped.setdefault(instance.doc["item_id"], []).append(instance)
    return {item: sorted(found, key=lambda i: i.idx) for item, found in grouped.items()}


@pytest.mark.parametrize("bm", BENCHMARKS)
def test_lm_eval_requests_carry_the_leaderboard_prompt(shared_data, shipped, bm):
    task = shipped["tasks"][f"microbench_{bm}"]
    prompts = leaderboard_prompts(shared_data, bm)
    docs = {doc["item_id"]: doc for doc in task.eval_docs}
    requests = requests_by_item(task)
    assert set(requests) == set(docs)
    equal = 0
    for item, found in requests.items():
        doc, expected = docs[item], prompts[item]
        contexts = [instance.arguments[0] for instance in found]
        if bm == "gsm8k":
            (instance,) = found
            assert instance.arguments[1]["until"] == GSM8K_STOP
            equal += contexts[0] == expected
        elif bm == "winogrande":  # one context per option, the same continuation
            assert contexts == doc["contexts"]
            assert {i.arguments[1] for i in found} == {" " + doc["continuation"]}
            equal += contexts[doc["gold"]] == expected
        else:
            assert [i.arguments[1] for i in found] == [" " + o for o in doc["options"]]
            equal += all(context == expected for context in contexts)
    assert equal == len(docs) == len(requests)


@pytest.mark.parametrize("bm", BENCHMARKS)
def test_shipped_gold_answers_match_the_leaderboard_items(shared_data, bm):
    items = pd.read_parquet(shared_data / "openllm_v1" / "items" / f"{bm}-secondary.parquet")
    key = "mb_sub_idx" if bm == "mmlu" else "metabench_idx"
    rows = {
        f"{bm}.{value}": row for value, (_, row) in zip(items[key], items.iterrows(), strict=True)
    }
    for doc in read_docs(SUITE / bm / ITEMS_JSONL):
        row = rows[doc["item_id"]]
        if bm == "arc":
            gold_text = row["choices"]["text"][
                list(row["choices"]["label"]).index(row["answerKey"])
            ]
            assert doc["options"][doc["gold"]] == gold_text
        elif bm == "hellaswag":
            assert doc["gold"] == int(row["label"]) and len(doc["options"]) == 4
        elif bm == "mmlu":
            assert doc["gold"] == int(row["answer"])
        elif bm == "truthfulqa":
            assert (
                doc["options"][doc["gold"]]
                == row["mc1_targets"]["choices"][int(np.argmax(row["mc1_targets"]["labels"]))]
            )
        elif bm == "winogrande":
            correct = row["option" + row["answer"]]
            assert doc["contexts"][doc["gold"]].endswith(
                row["sentence"][: row["sentence"].index("_")] + correct
            )
        else:
            assert doc["answer"] == row["answer"]


def lm_eval_default_scorer(task_manager, task_name: str, metrics: list[str]):
    """The same task, scored by lm-eval's own multiple-choice code instead of our hook."""
    task = task_manager.load([task_name])["tasks"][task_name]
    task.config.process_results = None
    task._metric_fn_list = dict.fromkeys(metrics)  # what lm-eval's scorer reads
    return task


@pytest.mark.parametrize("bm", MULTIPLE_CHOICE)
def test_choice_scores_equal_lm_evals_own(task_manager, shipped, bm):
    ours = shipped["tasks"][f"microbench_{bm}"]
    theirs = lm_eval_default_scorer(task_manager, f"microbench_{bm}", ["acc", "acc_norm"])
    rng = np.random.default_rng(11)
    disagreements = 0
    for doc in ours.eval_docs:
        n = len(doc["contexts"] if "contexts" in doc else doc["options"])
        results = [(float(ll), False) for ll in rng.normal(-20.0, 8.0, n)]
        mine, reference = ours.process_results(doc, results), theirs.process_results(doc, results)
        for metric in ("acc", "acc_norm", "mc1"):
            if metric in mine:
                key = "acc" if metric == "mc1" else metric
                assert mine[metric] == reference[key], (doc["item_id"], metric)
        disagreements += reference["acc"] != reference.get("acc_norm", reference["acc"])
    if bm in ("arc", "hellaswag"):  # the check can tell acc from acc_norm
        assert disagreements > 0


# ---------------------------------------------------------------------------- rebuild
def load_tool():
    spec = importlib.util.spec_from_file_location(
        "build_openllm_v1", REPO / "tools" / "build_openllm_v1.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


def comparable_payload(folder: Path) -> dict[str, Any]:
    payload = json.loads((folder / "bundle.json").read_text())
    payload.pop("checksums")
    payload["provenance"].pop("created")
    return payload


BAND_TOLERANCE = 2e-2
"""Relative tolerance of the conformal bands' residuals. They come from estimators refitted
fold by fold, whose iterative fits carry the last-bit differences between CPUs and BLAS
builds into the residuals: rebuilt on an AMD EPYC with numpy 2.4.6 / scipy 1.17.1, MMLU's
differed from the shipped ones by up to 1.4 % (every other number by less than 1e-6)."""


def assert_same_up_to_rounding(rebuilt: Any, shipped: Any, where: str = "") -> None:
    """Equal structure and strings; floats may differ in the last bits between CPUs and BLAS
    (the bands' residuals by :data:`BAND_TOLERANCE`)."""
    if isinstance(shipped, float) or isinstance(rebuilt, float):
        rel = BAND_TOLERANCE if ".band." in where else 1e-6
        assert rebuilt == pytest.approx(shipped, rel=rel, abs=1e-9), where
    elif isinstance(shipped, dict):
        assert isinstance(rebuilt, dict) and rebuilt.keys() == shipped.keys(), where
        for key in shipped:
            assert_same_up_to_rounding(rebuilt[key], shipped[key], f"{where}.{key}")
    elif isinstance(shipped, list):
        assert isinstance(rebuilt, list) and len(rebuilt) == len(shipped), where
        for i, (a, b) in enumerate(zip(rebuilt, shipped, strict=True)):
            assert_same_up_to_rounding(a, b, f"{where}[{i}]")
    else:
        assert rebuilt == shipped, where


@pytest.mark.slow
def test_rebuilding_gives_the_shipped_files(shared_data, tmp_path):
    """The shipped folder is what the tool writes from the data (no hand edits, no drift)."""
    tool = load_tool()
    out = tmp_path / "suite"
    assert tool.main(["--data", str(shared_data / "openllm_v1"), "--out", str(out)]) == 0
    shipped_files = sorted(p.relative_to(SUITE) for p in SUITE.rglob("*") if p.is_file())
    rebuilt_files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert rebuilt_files == shipped_files
    for bm in BENCHMARKS:
        assert (out / bm / ITEMS_JSONL).read_bytes() == (SUITE / bm / ITEMS_JSONL).read_bytes()
        rebuilt, shipped = comparable_payload(out / bm), comparable_payload(SUITE / bm)
        assert_same_up_to_rounding(rebuilt, shipped, bm)
    joint = [json.loads((folder / JOINT_FILE).read_text()) for folder in (out, SUITE)]
    for state in joint:
        state.pop("checksums", None)  # a digest of floats that may differ in the last bits
    assert_same_up_to_rounding(*joint, JOINT_FILE)
    for name in shipped_files:
        if name.suffix in (".yaml", ".md", ".py"):
            assert (out / name).read_text() == (SUITE / name).read_text(), name


def test_tool_budget_argument():
    tool = load_tool()
    defaults = {"arc": 50, "mmlu": 25, "gsm8k": 249}
    assert tool.parse_budgets(None, defaults) == defaults
    assert tool.parse_budgets("mmlu=60", defaults) == {"arc": 50, "mmlu": 60, "gsm8k": 249}
    assert tool.parse_budgets("30, mmlu=60", defaults) == {"arc": 30, "mmlu": 60, "gsm8k": 30}
    with pytest.raises(InputError, match="unknown benchmark 'bbh'"):
        tool.parse_budgets("bbh=3", defaults)
    with pytest.raises(InputError, match="must be positive"):
        tool.parse_budgets("0", defaults)


def write_choices(folder: Path) -> Path:
    """A defaults.json + shipped_guard.json pair of the shapes tools/bench_reliability.py and
    tools/bench_shipped_guard.py write."""
    folder.mkdir()
    choice = {"method": "greedy", "estimator": "kridge", "budget": 50, "all_items": False}
    metrics = {
        "mae": 1.3, "bias": 0.04, "max_error": 20.0, "kendall_tau": 0.89,
        "coverage90": 0.89, "width90": 6.0, "seconds": 1.0,
    }  # fmt: skip
    per = {
        "recipe": choice,
        "random": {"mean": {"kridge": {**metrics, "mae": 1.2}, "guarded": metrics}},
        "extrapolation": {"mean": {"kridge": metrics, "guarded": {**metrics, "mae": 1.5}}},
        "weak": {"mean": {"kridge": metrics, "guarded": {**metrics, "coverage90": 0.5}}},
    }
    report = {"info": {"repeats": {"random": 3, "fixed": 2}}, "results": {"arc": per}}
    (folder / "defaults.json").write_text(json.dumps({"benchmarks": {"arc": choice}}))
    (folder / "shipped_guard.json").write_text(json.dumps(report))
    return folder / "defaults.json"


def test_tool_takes_each_benchmarks_recipe_and_its_measured_error(tmp_path):
    tool = load_tool()
    recipes = tool.read_recipes(write_choices(tmp_path / "bench"), ["arc"])
    arc = recipes["arc"]
    assert (arc.method, arc.budget, arc.estimator, arc.regression) == (
        "greedy",
        50,
        "guarded",
        "kridge",
    )
    # the regression stays beside the default, and one that skips missing items
    assert arc.estimators == ["guarded", "kridge", tool.FALLBACK_ESTIMATOR]
    assert arc.held_out["random"]["mae"] == 1.3 and arc.held_out["extrapolation"]["mae"] == 1.5
    assert arc.held_out["weak"]["coverage90"] == 0.5 and arc.held_out["weak"]["repeats"] == 2
    with pytest.raises(InputError, match="no default recipe for benchmark 'mmlu'"):
        tool.read_recipes(tmp_path / "bench" / "defaults.json", ["arc", "mmlu"])
    with pytest.raises(InputError, match="cannot read"):
        tool.read_recipes(tmp_path / "missing.json", ["arc"])


def test_tool_reports_no_error_measured_for_another_recipe(tmp_path):
    tool = load_tool()
    path = write_choices(tmp_path / "bench")
    chosen = json.loads(path.read_text())
    chosen["benchmarks"]["arc"]["budget"] = 25  # the report measured 50 items
    path.write_text(json.dumps(chosen))
    assert tool.read_recipes(path, ["arc"])["arc"].held_out == {}


def test_tool_overrides_drop_the_measured_error(tmp_path):
    tool = load_tool()
    recipes = tool.read_recipes(write_choices(tmp_path / "bench"), ["arc"])
    same = tool.override_recipes(recipes, argparse_namespace(budget="50"))
    assert same == recipes  # an override equal to the recipe keeps what was measured
    other = tool.override_recipes(recipes, argparse_namespace(method="random"))["arc"]
    assert (other.method, other.budget, other.held_out) == ("random", 50, {})


def argparse_namespace(**given: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"method": None, "budget": None, "estimator": None, **given})


def test_shipped_joint_estimator_fits_the_shipped_subsets():
    joint = load_joint(SUITE / JOINT_FILE)
    assert list(joint.benchmarks_) == BENCHMARKS
    bundles = {bm: load_bundle(SUITE / bm) for bm in BENCHMARKS}
    for bm, bundle in bundles.items():
        assert set(joint.subsets_[bm].item_ids) == set(bundle.item_ids), bm
    everything_right = {item: 1.0 for b in bundles.values() for item in b.item_ids}
    nothing_right = dict.fromkeys(everything_right, 0.0)
    best, worst = joint.estimate(everything_right), joint.estimate(nothing_right)
    assert best.method["average"] == "joint"
    for output in (*BENCHMARKS, "average"):
        assert best[output].lower <= best[output].value <= best[output].upper
        assert best[output].value > worst[output].value + 0.3, output


def test_shipped_bundles_read_with_guarded_and_keep_their_regression_beside():
    """Each shipped v1 bundle defaults to ``guarded``, stores the regression
    ``bench/defaults.json`` chose for it, and records guarded's held-out errors for models
    like the leaderboard's, stronger and weaker than all of them. Below the leaderboard its
    interval reaches the bundle's lowest score (chance less 5 points; GSM8K: 0)."""
    chosen = json.loads((REPO / "bench" / "defaults.json").read_text())["benchmarks"]
    for bm in BENCHMARKS:
        bundle = load_bundle(SUITE / bm)
        names = [spec.name for spec in bundle.estimators]
        assert bundle.default_estimator == "guarded" and chosen[bm]["estimator"] in names, bm
        guarded = next(spec.state for spec in bundle.estimators if spec.name == "guarded")
        assert guarded["floor"] == pytest.approx(lowest_score(bundle.person_fit)), bm
        assert guarded["floor"] <= bundle.person_fit.chance_score - BELOW_CHANCE + 1e-12 or (
            bundle.person_fit.stand_in and guarded["floor"] == 0.0
        ), bm
        held_out = bundle.reliability["held_out"]
        assert held_out["estimator"] == "guarded"
        assert set(held_out["by_protocol"]) == {"random", "extrapolation", "weak"}, bm
        assert all(0 < m["coverage90"] <= 1 for m in held_out["by_protocol"].values()), bm
