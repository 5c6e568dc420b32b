"""Post-run reconstruction: lm-eval output folders -> estimates joined by id and checked, for
own and foreign tasks.

The tests write lm-eval-shaped output folders (``results_<ts>.json`` +
``samples_<task>_<ts>.jsonl``) for toy bundles (``reconstruct_support``); joint and averaged
estimates, the CLI and the real pythia-14m run are in ``test_reconstruct_cli``.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from reconstruct_support import (
    BUDGET,
    TS,
    pattern,
    reconstruct,
    run_of,
    suite,
    toys,
    write_run,
)

from lmeval_microbench.cli.app import main
from lmeval_microbench.errors import BundleError, InputError, ItemMismatchError
from lmeval_microbench.personfit import check_estimate
from lmeval_microbench.reconstruct import bundle_estimator
from lmeval_microbench.runs import (
    ReconstructionWarning,
    parse_task_map,
    reconstruct_runs,
)

__all__ = ["suite", "toys"]  # fixtures, used by name


# ---------------------------------------------------------------------------- own tasks
def test_estimates_join_logged_documents_by_id(tmp_path, suite, toys):
    bundle, _ = toys["toya"]
    scores = run_of(tmp_path / "out", "org/model", toys["toya"], seed=1)
    result = reconstruct(tmp_path / "out", bundles=[suite])
    (found,) = result.estimates
    expected = bundle_estimator(bundle).estimate(scores)
    assert (found.value, found.lower, found.upper) == pytest.approx(
        (expected.value, expected.lower, expected.upper), abs=1e-12
    )
    # the test can fail: the samples file is shuffled, a join by position gives another value
    shuffled = [json.loads(line) for line in next((tmp_path / "out").rglob("samples_*")).open()]
    by_position = dict(zip(bundle.item_ids, [line["acc"] for line in shuffled], strict=True))
    assert bundle_estimator(bundle).estimate(by_position).value != pytest.approx(expected.value)
    assert found.model == "org/model" and found.items_scored == BUDGET
    assert found.subset_mean == pytest.approx(np.mean(list(scores.values())))
    assert found.full_size is None  # not an Open LLM Leaderboard bundle


def test_checkpoints_sort_naturally_and_average_two_benchmarks(tmp_path, suite, toys):
    out = tmp_path / "out"
    for step in (10, 2, 1):
        for k, bm in enumerate(("toya", "toyb")):
            run_of(out, f"ckpt-{step}", toys[bm], seed=step * 7 + k)
    result = reconstruct(out, bundles=[suite])
    assert result.models == ["ckpt-1", "ckpt-2", "ckpt-10"]
    table = result.to_markdown()
    rows = [line.split(" | ")[0].strip("| ") for line in table.splitlines()[2:5]]
    assert rows == ["ckpt-1", "ckpt-2", "ckpt-10"]
    for model in result.models:
        average = result.average(model)
        pair = [result.get(model, bm) for bm in ("toya", "toyb")]
        assert average.value == pytest.approx(np.mean([e.value for e in pair]))
        # Bonferroni: each interval is taken at level 0.95, so the average's is wider
        assert average.lower <= np.mean([e.lower for e in pair]) + 1e-12
        assert average.upper >= np.mean([e.upper for e in pair]) - 1e-12
        assert not average.complete
    payload = result.to_dict()
    assert [m["model"] for m in payload["models"]] == result.models
    assert set(payload["models"][0]["benchmarks"]) == {"toya", "toyb"}


def test_changed_document_is_an_error_naming_the_item(tmp_path, suite, toys):
    bundle, docs = toys["toya"]
    edited = {**docs, bundle.item_ids[2]: {**docs[bundle.item_ids[2]], "gold": 1}}
    write_run(
        tmp_path / "out",
        "m",
        "microbench_toya",
        [edited[i] for i in bundle.item_ids],
        [1.0] * BUDGET,
    )
    with pytest.raises(ItemMismatchError, match=f"hash differs\\): {bundle.item_ids[2]!r}"):
        reconstruct(tmp_path / "out", bundles=[suite])


def test_missing_items_warn_and_give_nan_unless_allowed(tmp_path, suite, toys):
    bundle, docs = toys["toya"]
    kept = list(bundle.item_ids)[:4]
    write_run(tmp_path / "out", "m", "microbench_toya", [docs[i] for i in kept], [1.0, 0, 1, 0])
    with pytest.warns(ReconstructionWarning, match=f"2 of {BUDGET} items .*{bundle.item_ids[4]}"):
        result = reconstruct_runs(tmp_path / "out", bundles=[suite], progress=False)
    (found,) = result.estimates
    assert math.isnan(found.value) and found.missing == tuple(bundle.item_ids[4:])
    (hint,) = [note for note in result.notes if "estimate is NaN" in note]
    # both spellings a user can type: the command's flag and lm-eval's --metadata
    assert "--allow-missing" in hint
    assert """--metadata '{"microbench_allow_missing": true}'""" in hint
    allowed = reconstruct(tmp_path / "out", bundles=[suite], allow_missing=True)
    expected = bundle_estimator(bundle).estimate(
        dict(zip(kept, [1.0, 0, 1, 0], strict=True)), allow_missing=True
    )
    assert allowed.estimates[0].value == pytest.approx(expected.value, abs=1e-12)
    imputed = reconstruct(tmp_path / "out", bundles=[suite], allow_missing=True, estimator="mean")
    assert math.isfinite(imputed.estimates[0].value)


def test_run_options_from_metadata_are_followed(tmp_path, suite, toys):
    bundle, _ = toys["toya"]
    scores = run_of(
        tmp_path / "out",
        "m",
        toys["toya"],
        seed=2,
        metadata={"microbench_estimator": "mean", "microbench_level": 0.5},
    )
    (found,) = reconstruct(tmp_path / "out", bundles=[suite]).estimates
    expected = bundle_estimator(bundle, "mean").estimate(scores, level=0.5)
    assert found.estimator == "mean" and found.estimate.level == 0.5
    assert (found.lower, found.upper) == pytest.approx((expected.lower, expected.upper))


def test_metric_mismatch_is_an_error_and_version_mismatch_a_warning(tmp_path, suite, toys):
    run_of(tmp_path / "a", "m", toys["toya"], seed=1, metadata={"estimated_metric": "acc_norm"})
    with pytest.raises(ItemMismatchError, match=r"estimated metric 'acc_norm'.*estimates 'acc'"):
        reconstruct(tmp_path / "a", bundles=[suite])
    run_of(tmp_path / "b", "m", toys["toya"], seed=1, version=2.0)
    with pytest.warns(ReconstructionWarning, match=r"version 2.0, the installed task is .*1.0"):
        reconstruct_runs(tmp_path / "b", bundles=[suite], progress=False)


def test_in_run_estimate_is_compared(tmp_path, suite, toys):
    bundle, _ = toys["toya"]
    scores = run_of(tmp_path / "a", "m", toys["toya"], seed=4, in_run=0.123)
    with pytest.warns(ReconstructionWarning, match="reported estimate 0.123000"):
        reconstruct_runs(tmp_path / "a", bundles=[suite], progress=False)
    value = bundle_estimator(bundle).estimate(scores).value
    run_of(tmp_path / "b", "m", toys["toya"], seed=4, in_run=value)
    result = reconstruct(tmp_path / "b", bundles=[suite])
    assert not [n for n in result.notes if "reported estimate" in n]
    assert result.estimates[0].in_run["value"] == value


def test_unknown_bundle_and_duplicate_benchmark_are_errors(tmp_path, suite, toys):
    run_of(tmp_path / "a", "m", toys["toya"], seed=1)
    with pytest.raises(BundleError, match="neither shipped nor given with --bundle"):
        reconstruct(tmp_path / "a")
    run_of(tmp_path / "a", "m", toys["toya"], seed=1, ts="2025-01-02T00-00-00.000001")
    bundle, docs = toys["toya"]
    items = list(bundle.item_ids)
    write_run(tmp_path / "a", "m", "microbench_toya_copy", [docs[i] for i in items], [1.0] * 6)
    with pytest.raises(InputError, match="two runs of benchmark 'toya'"):
        reconstruct(tmp_path / "a", bundles=[suite])


# ---------------------------------------------------------------------------- foreign tasks
def foreign_docs(docs: dict[str, dict]) -> list[dict]:
    """The same items as another task logs them: no item_id/bundle, a metabench index."""
    return [
        {"question": d["source"]["question"], "metabench_idx": d["source"]["metabench_idx"]}
        for d in docs.values()
    ]


def test_foreign_task_is_matched_by_ids_or_by_the_task_map(tmp_path, suite, toys):
    bundle, docs = toys["toyb"]
    scores = pattern(bundle, 9)
    extra = {"question": "not in the bundle", "metabench_idx": 999}
    logged = [*foreign_docs(docs), extra]
    write_run(tmp_path / "a", "m", "other_toyb_task", logged, [*scores.values(), 1.0])
    result = reconstruct(tmp_path / "a", bundles=[suite], shipped=False)
    (found,) = result.estimates
    assert found.bundle == bundle.name and found.in_run is None
    checked, _, _ = check_estimate(bundle, scores, bundle_estimator(bundle).estimate(scores))
    assert found.value == pytest.approx(checked.value)  # after person fit, as every estimate
    mapped = reconstruct(
        tmp_path / "a", bundles=[suite], shipped=False, task_map={"other_toyb_task": "toyb"}
    )
    assert mapped.estimates[0].value == found.value


def test_foreign_task_with_other_questions_is_an_error(tmp_path, suite, toys):
    bundle, docs = toys["toyb"]
    logged = foreign_docs(docs)
    logged[1]["question"] = "a different question"
    write_run(tmp_path / "a", "m", "other_task", logged, [1.0] * BUDGET)
    with pytest.raises(ItemMismatchError, match=f"{bundle.item_ids[1]!r} \\(fields \\['question'"):
        reconstruct(tmp_path / "a", bundles=[suite], task_map={"other_task": "toyb"})


def test_unrelated_tasks_are_skipped_and_nothing_found_is_an_error(tmp_path, suite, toys):
    _, docs = toys["toyb"]
    logged = foreign_docs(docs)[:3]  # the bundle's ids, other questions: another task
    for k, doc in enumerate(logged):
        doc["question"] = f"an unrelated question {k}"
    write_run(tmp_path / "a", "m", "some_task", logged, [1.0] * 3)
    with pytest.raises(InputError, match="no micro-benchmark runs"):
        reconstruct(tmp_path / "a", bundles=[suite])
    run_of(tmp_path / "a", "m", toys["toya"], seed=1)
    result = reconstruct(tmp_path / "a", bundles=[suite])
    assert len(result.estimates) == 1 and "some_task" in result.skipped[0]


def test_partial_foreign_run_is_matched_and_reported_nan(tmp_path, suite, toys):
    """A metabench run cut short (or --limit) stays in the table, NaN, its missing items named."""
    bundle, docs = toys["toyb"]
    out = tmp_path / "out"
    run_of(out, "m", toys["toya"], seed=1)
    write_run(out, "m", "metabench_toyb_secondary", foreign_docs(docs)[:4], [1.0, 0, 1, 1])
    with pytest.warns(ReconstructionWarning, match=rf"2 of {BUDGET} items .*{bundle.item_ids[4]}"):
        result = reconstruct_runs(out, bundles=[suite], progress=False)
    found = result.get("m", "toyb")
    assert found is not None and found.task == "metabench_toyb_secondary"
    assert math.isnan(found.value) and found.items_scored == 4
    assert found.missing == tuple(bundle.item_ids[4:])
    assert result.average("m").benchmarks == ("toya", "toyb")
    assert math.isnan(result.average("m").value)
    row = next(line for line in result.to_markdown().splitlines() if line.startswith("| m |"))
    assert row.count("NaN") == 2  # toyb and the average


def test_document_sharing_only_its_id_is_not_verified(tmp_path, suite, toys):
    """Another benchmark's documents under the bundle's ids: the id alone proves nothing."""
    _, docs = toys["toyb"]
    logged = [
        {"query": f"another benchmark's text {k}", "metabench_idx": d["metabench_idx"]}
        for k, d in enumerate(foreign_docs(docs))
    ]
    write_run(tmp_path / "a", "m", "other_task", logged, [1.0] * BUDGET)
    with pytest.raises(ItemMismatchError, match=r"other_task.*share no field but the id"):
        reconstruct(tmp_path / "a", bundles=[suite], task_map={"other_task": "toyb"})
    with pytest.raises(InputError, match="no micro-benchmark runs"):  # not taken for toyb's
        reconstruct(tmp_path / "a", bundles=[suite])


def test_foreign_prompts_are_compared_with_the_bundles(tmp_path, suite, toys):
    bundle, docs = toys["toyb"]
    prompts = [doc["context"] for doc in docs.values()]
    write_run(
        tmp_path / "a", "m", "other_task", foreign_docs(docs), [1.0] * BUDGET, prompts=prompts
    )
    assert not [n for n in reconstruct(tmp_path / "a", bundles=[suite]).notes if "prompt" in n]
    prompts[2] = "Other few-shot examples\n\n" + prompts[2]
    write_run(
        tmp_path / "b", "m", "other_task", foreign_docs(docs), [1.0] * BUDGET, prompts=prompts
    )
    with pytest.warns(
        ReconstructionWarning,
        match=rf"1 of {BUDGET} documents were prompted otherwise than the bundle's items "
        rf".*{bundle.item_ids[2]!r}",
    ):
        reconstruct_runs(tmp_path / "b", bundles=[suite], progress=False)


def test_task_named_after_another_benchmark_is_noted(tmp_path, suite, toys):
    bundle, docs = toys["toyb"]
    write_run(tmp_path / "a", "m", "metabench_toya_secondary", foreign_docs(docs), [1.0] * BUDGET)
    with pytest.warns(
        ReconstructionWarning,
        match=rf"task 'metabench_toya_secondary' is named after toya, but its documents are the "
        rf"items of bundle '{bundle.name}': reported under toyb",
    ):
        result = reconstruct_runs(tmp_path / "a", bundles=[suite], progress=False)
    assert [e.benchmark for e in result.estimates] == ["toyb"]


def test_edited_bundle_documents_are_refused(tmp_path, suite, toys):
    """items.jsonl is checked against the bundle's hashes before it judges any run."""
    items = suite / "toyb" / "items.jsonl"
    edited = [json.loads(line) for line in items.read_text().splitlines()]
    edited[1]["source"]["question"] = "a drifted question"
    items.write_text("".join(json.dumps(doc) + "\n" for doc in edited))
    drifted = foreign_docs({doc["item_id"]: doc for doc in edited})
    write_run(tmp_path / "a", "m", "other_task", drifted, [1.0] * BUDGET)
    with pytest.raises(ItemMismatchError, match=rf"{items}: .*{edited[1]['item_id']!r}"):
        reconstruct(tmp_path / "a", bundles=[suite], task_map={"other_task": "toyb"})


def test_model_id_is_never_taken_from_another_runs_results(tmp_path, suite, toys, capsys):
    out = tmp_path / "out"
    run_of(out, "org/model", toys["toya"], seed=1)
    folder = out / "org__model"
    results = json.loads((folder / f"results_{TS}.json").read_text())
    results["config"]["model_args"] = "pretrained=some-other/model-7b"
    (folder / f"results_{TS}.json").unlink()
    other = folder / "results_2025-02-01T00-00-00.000001.json"
    other.write_text(json.dumps(results))
    with pytest.raises(InputError, match=rf"no results_{TS}\.json .*{other.name}.*--model-id"):
        reconstruct(out, bundles=[suite])
    argv = ["reconstruct", str(out), "--bundle", str(suite), "--quiet", "--format", "json"]
    assert main([*argv, "--model-id", "org/model"]) == 0
    assert [m["model"] for m in json.loads(capsys.readouterr().out)["models"]] == ["org/model"]
    other.unlink()
    with pytest.warns(ReconstructionWarning, match=r"model id 'org__model' is the name of"):
        result = reconstruct_runs(out, bundles=[suite], progress=False)
    assert result.models == ["org__model"]


def test_file_cut_at_a_line_boundary_and_bad_run_options_name_the_files(tmp_path, suite, toys):
    run_of(tmp_path / "a", "m", toys["toya"], seed=1)
    samples = next((tmp_path / "a").rglob("samples_*.jsonl"))
    samples.write_text("".join(samples.read_text().splitlines(keepends=True)[:5]))
    with pytest.raises(InputError, match=rf"{samples.name}: 5 documents, but results_{TS}"):
        reconstruct(tmp_path / "a", bundles=[suite])
    run_of(tmp_path / "b", "m", toys["toya"], seed=1, metadata={"microbench_level": "high"})
    with pytest.raises(InputError, match=rf"results_{TS}\.json: .*microbench_level.*'high'"):
        reconstruct(tmp_path / "b", bundles=[suite])


def test_legend_counts_the_items_scored(tmp_path, suite, toys):
    bundle, docs = toys["toya"]
    kept = list(bundle.item_ids)[:4]
    write_run(tmp_path / "out", "m", "microbench_toya", [docs[i] for i in kept], [1.0, 0, 1, 0])
    legend = reconstruct(tmp_path / "out", bundles=[suite]).to_markdown()
    assert f"toya 4 (2 of its {BUDGET} subset items unscored)" in legend


def test_parse_task_map():
    assert parse_task_map(["a=arc,b = mmlu", "c=x"]) == {"a": "arc", "b": "mmlu", "c": "x"}
    for bad in ("a", "=arc", "a="):
        with pytest.raises(InputError, match="TASK=BENCHMARK"):
            parse_task_map(bad)
    with pytest.raises(InputError, match="mapped twice"):
        parse_task_map("a=arc,a=mmlu")
