"""collect: lm-eval samples files -> ResponseMatrix: real runs, many models, bad input."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from collect_support import (
    ARC,
    GSM8K,
    PYTHIA_TASKS,
    TS,
    line,
    pythia,
    read_lines,
    run_file,
    toy,
    write_lines,
)

from lmeval_microbench.collect import (
    collect_samples,
    combine_models,
    content_hash,
    find_samples_files,
    read_samples_file,
)
from lmeval_microbench.errors import InputError
from lmeval_microbench.responses import ResponseMatrix

__all__ = ["pythia", "toy"]  # fixtures, used by name


# ---------------------------------------------------------------------------- real lm-eval output
@pytest.mark.parametrize(("task", "id_field", "prefix", "metric", "bm"), PYTHIA_TASKS)
def test_pythia_matches_leaderboard_ids_and_jsonl_values(
    pythia, shared_data, task, id_field, prefix, metric, bm
):
    matrix = collect_samples(
        pythia, metric=metric, tasks=[task], id_field=id_field, id_prefix=prefix, progress=False
    )
    reference = ResponseMatrix.read(shared_data / "openllm_v1" / "responses" / f"{bm}_B.parquet")
    assert matrix.model_ids == ("pythia-14m",)
    assert set(matrix.item_ids) == set(reference.item_ids)
    lines = read_lines(next(pythia.glob(f"samples_{task}_*.jsonl")))
    expected = {f"{prefix}{rec['doc'][id_field]}": float(rec[metric]) for rec in lines}
    assert matrix.row("pythia-14m") == expected
    # the default id strategy finds the same field (mb_sub_idx before metabench_idx)
    default = collect_samples(pythia, metric=metric, tasks=[task], id_prefix=prefix, progress=False)
    assert default.item_ids == matrix.item_ids


def test_pythia_items_can_be_selected_from_leaderboard_matrix(pythia, shared_data):
    matrix = collect_samples(
        pythia,
        metric="acc",
        tasks=["metabench_mmlu_secondary"],
        id_prefix="mmlu.",
        stratum_field="subject",
        benchmark="mmlu",
        progress=False,
    )
    reference = ResponseMatrix.read(shared_data / "openllm_v1" / "responses" / "mmlu_B.parquet")
    aligned = reference.select_items(matrix.item_ids)
    assert list(aligned.items["stratum"]) == list(matrix.items["stratum"])
    assert set(matrix.items["benchmark"]) == {"mmlu"}
    combined = combine_models([reference, matrix])
    assert combined.shape == (reference.n_models + 1, reference.n_items)
    assert combined.row("pythia-14m") == matrix.row("pythia-14m")


def test_pythia_gsm8k_old_format_filter_by_position(pythia):
    path = pythia / GSM8K
    lines = read_lines(path)
    n_docs = len({rec["doc_id"] for rec in lines})
    with pytest.raises(InputError, match=r"several filters.*by position"):
        read_samples_file(path, metric="exact_match", id_prefix="gsm8k.")
    with pytest.raises(InputError, match=r"unknown filter 'strict-match'.*by position"):
        read_samples_file(path, metric="exact_match", filter="strict-match")
    for position in (0, 1):
        run = read_samples_file(
            path, metric="exact_match", filter=str(position), id_prefix="gsm8k."
        )
        assert len(run.scores) == n_docs
        numbers = [int(w.rsplit(":", 1)[1]) for w in run.where.values()]
        assert all(position * n_docs < k <= (position + 1) * n_docs for k in numbers)
        for item_id, where in run.where.items():
            rec = lines[int(where.rsplit(":", 1)[1]) - 1]
            assert item_id == f"gsm8k.{rec['doc']['metabench_idx']}"
            assert run.scores[item_id] == rec["exact_match"]


def test_old_format_filter_names_from_results_json(pythia, tmp_path):
    """Second occurrences get a changed score so that choosing the filter is observable."""
    lines = read_lines(pythia / GSM8K)
    seen: set[int] = set()
    flipped = []
    for rec in lines:
        if rec["doc_id"] in seen and rec["doc_id"] % 3 == 0:
            rec["exact_match"] = 1.0
            flipped.append(f"gsm8k.{rec['doc']['metabench_idx']}")
        seen.add(rec["doc_id"])
    path = write_lines(tmp_path / GSM8K, lines)
    results = {
        "configs": {
            "metabench_gsm8k_secondary": {
                "filter_list": [
                    {"name": "strict-match", "filter": []},
                    {"name": "flexible-extract", "filter": []},
                ]
            }
        },
        "config": {"model_args": "pretrained=EleutherAI/pythia-14m,dtype=float"},
    }
    (tmp_path / f"results_{TS}.json").write_text(json.dumps(results))
    strict = read_samples_file(
        path, metric="exact_match", filter="strict-match", id_prefix="gsm8k."
    )
    flexible = read_samples_file(
        path, metric="exact_match", filter="flexible-extract", id_prefix="gsm8k."
    )
    assert (
        flexible.scores
        == read_samples_file(path, metric="exact_match", filter="1", id_prefix="gsm8k.").scores
    )
    assert sorted(i for i, v in flexible.scores.items() if v == 1.0) == sorted(flipped)
    assert sum(strict.scores.values()) == sum(
        rec["exact_match"] for rec in lines[: len(strict.scores)]
    )
    with pytest.raises(
        InputError, match=r"'strict-match' \(position 0\), 'flexible-extract' \(position 1\)"
    ):
        read_samples_file(path, metric="exact_match", filter="loose")
    matrix = collect_samples(
        tmp_path,
        metric="exact_match",
        filter="flexible-extract",
        id_prefix="gsm8k.",
        progress=False,
    )
    assert matrix.model_ids == ("EleutherAI/pythia-14m",)


GSM8K_FILTERS = [
    {
        "name": "strict-match",
        "filter": [
            {"function": "regex", "regex_pattern": "#### (\\-?[0-9\\.\\,]+)"},
            {"function": "take_first"},
        ],
    },
    {
        "name": "flexible-extract",
        "filter": [
            {
                "function": "regex",
                "group_select": -1,
                "regex_pattern": "(-?[$0-9.,]{2,})|(-?[0-9]+)",
            },
            {"function": "take_first"},
        ],
    },
]
"""lm-eval's gsm8k filters (``configs[task].filter_list`` of a results json)."""


def gsm8k_flexible_hits(pythia: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """pythia's gsm8k lines where the records a number was extracted from score 1.

    Only flexible-extract finds a number in pythia's answers (3 documents), so after this
    change the two filters' records of those documents differ in their score.
    """
    lines = read_lines(pythia / GSM8K)
    hits = []
    for rec in lines:
        if rec["filtered_resps"] != ["[invalid]"]:
            rec["exact_match"] = 1.0
            hits.append(f"gsm8k.{rec['doc']['metabench_idx']}")
    assert len(hits) == 3
    return lines, hits


def test_old_format_filters_come_from_content_not_line_order(pythia, tmp_path):
    lines, hits = gsm8k_flexible_hits(pythia)
    random.Random(1).shuffle(lines)
    path = write_lines(tmp_path / "pythia-14m" / GSM8K, lines)
    results = {"configs": {"metabench_gsm8k_secondary": {"filter_list": GSM8K_FILTERS}}}
    (path.parent / f"results_{TS}.json").write_text(json.dumps(results))
    read = {
        name: read_samples_file(path, metric="exact_match", filter=name, id_prefix="gsm8k.")
        for name in ("strict-match", "flexible-extract")
    }
    assert sum(read["strict-match"].scores.values()) == 0  # the leaderboard's rule: 0.0%
    assert sorted(i for i, v in read["flexible-extract"].scores.items() if v) == sorted(hits)
    for name, run in read.items():
        assert len(run.scores) == 249
        for item, where in run.where.items():
            rec = lines[int(where.rsplit(":", 1)[1]) - 1]
            assert f"gsm8k.{rec['doc']['metabench_idx']}" == item
            if item in hits:  # the line read is the one its filter wrote
                assert (rec["filtered_resps"] == ["[invalid]"]) == (name == "strict-match")


def test_old_format_file_in_an_order_lm_eval_does_not_write_is_refused(pythia, tmp_path):
    lines, _ = gsm8k_flexible_hits(pythia)
    kept = write_lines(tmp_path / "kept" / GSM8K, lines)
    assert sum(read_samples_file(kept, metric="exact_match", filter="1").scores.values()) == 3
    random.Random(1).shuffle(lines)
    path = write_lines(tmp_path / "shuffled" / GSM8K, lines)
    with pytest.raises(InputError, match=rf"{GSM8K}: .*not in the order lm-eval writes"):
        read_samples_file(path, metric="exact_match", filter="0")
    # documents whose records agree on every metric need no filter: the real file shuffled
    plain = read_lines(pythia / GSM8K)
    random.Random(1).shuffle(plain)
    path = write_lines(tmp_path / "plain" / GSM8K, plain)
    assert sum(read_samples_file(path, metric="exact_match", filter="0").scores.values()) == 0


def test_smollm2_new_format_run(shared_data):
    folder = shared_data / "lm_eval_samples" / "smollm2-135m"
    results = json.loads(next(folder.glob("results_*.json")).read_text())
    matrix = collect_samples(
        folder, metric="acc", id_prefix="mmlu.", stratum_field="subject", progress=False
    )
    assert matrix.model_ids == (results["config"]["model_args"]["pretrained"],)
    task = next(iter(results["results"]))
    assert matrix.mean_scores()[0] == pytest.approx(results["results"][task]["acc,none"])
    lines = read_lines(next(folder.glob("samples_*.jsonl")))
    assert set(matrix.item_ids) == {f"mmlu.{rec['doc']['mb_sub_idx']}" for rec in lines}
    assert set(matrix.items["stratum"]) == {rec["doc"]["subject"] for rec in lines}
    assert set(matrix.items["content_hash"]) == {content_hash(rec["doc"]) for rec in lines}
    with pytest.raises(InputError, match=r"unknown filter 'strict-match'.*'none' \(position 0\)"):
        collect_samples(folder, metric="acc", filter="strict-match", progress=False)


def test_shuffled_file_gives_the_same_matrix(pythia, tmp_path):
    lines = read_lines(pythia / ARC)
    random.Random(3).shuffle(lines)
    shuffled = write_lines(tmp_path / "pythia-14m" / ARC, lines)
    a = collect_samples(
        pythia,
        metric="acc_norm",
        tasks=["metabench_arc_secondary"],
        id_prefix="arc.",
        progress=False,
    )
    b = collect_samples(shuffled, metric="acc_norm", id_prefix="arc.", progress=False)
    assert a.item_ids == b.item_ids
    np.testing.assert_array_equal(a.values, b.values)
    assert a.fingerprint() == b.fingerprint()


# ---------------------------------------------------------------------------- many models
def test_multi_model_tree(pythia, tmp_path):
    lines = read_lines(pythia / ARC)
    out = tmp_path / "out"
    write_lines(out / "plain-folder" / ARC, lines)
    changed = [dict(rec, acc_norm=1.0 - rec["acc_norm"]) for rec in lines[10:]]
    random.Random(0).shuffle(changed)
    write_lines(out / "org__model-b" / ARC, changed)
    (out / "org__model-b" / f"results_{TS}.json").write_text(
        json.dumps({"config": {"model_args": {"pretrained": "org/model-b", "dtype": "float32"}}})
    )
    matrix = collect_samples(out, metric="acc_norm", id_prefix="arc.", progress=False)
    assert matrix.model_ids == ("org/model-b", "plain-folder")
    original = {f"arc.{rec['doc']['metabench_idx']}": rec["acc_norm"] for rec in lines}
    dropped = {f"arc.{rec['doc']['metabench_idx']}" for rec in lines[:10]}
    assert matrix.row("plain-folder") == original
    row_b = matrix.row("org/model-b")
    assert set(row_b) == set(original) - dropped
    assert all(row_b[i] == 1.0 - original[i] for i in row_b)
    assert np.isnan(matrix.values[0, matrix.item_positions(sorted(dropped))]).all()


def test_several_runs_of_a_task_use_the_newest(toy, tmp_path):
    older = write_lines(run_file(toy.parent, ts="2024-01-01T00-00-00.000001"), [line(0, 10, 1.0)])
    with pytest.warns(UserWarning, match=r"2 runs found; using the newest .*" + TS):
        matrix = collect_samples(toy.parent, metric="acc", progress=False)
    assert matrix.n_items == 6
    with pytest.raises(InputError, match=str(older.name)):
        collect_samples(toy.parent, metric="acc", on_duplicate="error", progress=False)


def test_tasks_and_prefix_per_task(toy, tmp_path):
    other = write_lines(
        run_file(toy.parent, task="other"), [line(k, 10 + k, 1.0) for k in range(3)]
    )
    with pytest.raises(
        InputError, match=r"'toy\.10'.*appear both in .*samples_(toy|other).*samples_(toy|other)"
    ):
        collect_samples(toy.parent, metric="acc", id_prefix="toy.", progress=False)
    matrix = collect_samples(toy.parent, metric="acc", id_prefix="{task}.", progress=False)
    assert matrix.n_items == 9
    assert set(matrix.items["benchmark"]) == {"toy", "other"}
    only = collect_samples(toy.parent, metric="acc", tasks=["other"], progress=False)
    assert only.item_ids == ("10", "11", "12")
    with pytest.raises(InputError, match=r"tasks not found: nope; found: other, toy"):
        collect_samples([toy, other], metric="acc", tasks=["nope"], progress=False)
    empty = write_lines(tmp_path / "empty" / "notes.txt", []).parent
    with pytest.raises(InputError, match=r"no samples_\*\.jsonl files"):
        collect_samples(empty, metric="acc", progress=False)


def test_same_id_different_content_across_models(toy, tmp_path):
    write_lines(
        run_file(tmp_path / "other-model"), [line(0, 10, 1.0, question="a different question")]
    )
    with pytest.raises(
        InputError, match=r"item '10' has different content in .*other-model.*:1 and .*run.*:1"
    ):
        collect_samples(tmp_path, metric="acc", progress=False)
    matrix = collect_samples(tmp_path, metric="acc", check_content=False, progress=False)
    assert matrix.shape == (2, 6)


def test_model_id_override_needs_one_folder(toy, tmp_path):
    assert collect_samples(toy, metric="acc", model_id="me/model", progress=False).model_ids == (
        "me/model",
    )
    write_lines(run_file(tmp_path / "second"), [line(0, 10, 0.0)])
    with pytest.raises(InputError, match="several folders"):
        collect_samples(tmp_path, metric="acc", model_id="me/model", progress=False)


def test_model_id_never_comes_from_another_runs_results(toy, tmp_path):
    other = {"config": {"model_args": "pretrained=some-other/model-7b"}, "configs": {"toy": {}}}
    (toy.parent / "results_2025-01-01T00-00-00.000001.json").write_text(json.dumps(other))
    with pytest.raises(
        InputError,
        match=rf"{toy.name}: no results_{TS}\.json .*other runs.*"
        r"results_2025-01-01T00-00-00\.000001\.json.*model_id",
    ):
        collect_samples(toy.parent, metric="acc", progress=False)
    given = collect_samples(toy.parent, metric="acc", model_id="me/model", progress=False)
    assert given.model_ids == ("me/model",)
    alone = write_lines(run_file(tmp_path / "folder-model"), read_lines(toy))
    with pytest.warns(UserWarning, match=r"model id 'folder-model' is the name of the folder"):
        named = collect_samples(alone, metric="acc", progress=False)
    assert named.model_ids == ("folder-model",)


def test_file_cut_at_a_line_boundary_is_refused(shared_data, tmp_path):
    source = shared_data / "lm_eval_samples" / "smollm2-135m"
    folder = shutil.copytree(source, tmp_path / "copy")
    samples = next(folder.glob("samples_*.jsonl"))
    lines = samples.read_text(encoding="utf-8").splitlines(keepends=True)
    samples.write_text("".join(lines[:90]), encoding="utf-8")
    results = next(folder.glob("results_*.json")).name
    with pytest.raises(
        InputError, match=rf"{samples.name}: 90 documents, but {results} reports n-samples 96"
    ):
        collect_samples(folder, metric="acc", progress=False)


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        ({"configs": ["toy"]}, r"'configs' is a list, expected an object"),
        ({"configs": {"toy": {"filter_list": "strict"}}}, r"configs\.toy\.filter_list"),
        ({"config": "pretrained=x"}, r"'config' is a str, expected an object"),
        ({"n-samples": {"toy": {"effective": "many"}}}, r"n-samples\.toy"),
    ],
)
def test_errors_from_a_results_file_name_it(toy, payload, match):
    results = toy.parent / f"results_{TS}.json"
    results.write_text(json.dumps(payload))
    with pytest.raises(InputError, match=rf"{results.name}: .*{match}"):
        collect_samples(toy.parent, metric="acc", progress=False)


def test_find_samples_files_and_missing_path(toy, tmp_path):
    (toy.parent / "results_x.json").write_text("{}")
    assert find_samples_files(tmp_path) == [toy]
    with pytest.raises(InputError, match="no such file or folder"):
        find_samples_files(tmp_path / "absent")


def test_a_folder_named_like_a_samples_file_is_not_read_as_one(toy, tmp_path):
    odd = tmp_path / "samples_odd_2025-01-01T00-00-00.jsonl"
    odd.mkdir()
    inside = odd / "samples_inner.jsonl"
    inside.write_bytes(toy.read_bytes())
    assert find_samples_files(tmp_path) == sorted([toy, inside])


def test_json_array_file_of_lm_eval_040(tmp_path):
    path = tmp_path / "samples_toy.jsonl"
    path.write_text(json.dumps([line(k, k, 1.0, new=False) for k in range(3)]))
    run = read_samples_file(path, metric="acc")
    assert run.scores == {"0": 1.0, "1": 1.0, "2": 1.0}
    assert run.task == "toy"


# ---------------------------------------------------------------------------- bad input
def test_malformed_json_line_names_file_and_line(toy):
    text = toy.read_text().splitlines()
    text[2] = text[2][:40] + "}"
    toy.write_text("\n".join(text) + "\n")
    with pytest.raises(InputError, match=rf"{toy.name}:3: malformed JSON"):
        read_samples_file(toy, metric="acc")


def test_truncated_file_is_reported(toy):
    toy.write_bytes(toy.read_bytes()[:-25])
    with pytest.raises(InputError, match=rf"{toy.name}:6: malformed JSON.*truncated"):
        collect_samples(toy, metric="acc", progress=False)


def test_truncated_old_format_file_with_filters(tmp_path):
    records = [line(k, k, 0.0, new=False) for k in range(4)] + [
        line(k, k, 1.0, new=False) for k in range(2)
    ]
    path = write_lines(tmp_path / "samples_gsm.jsonl", records)
    with pytest.raises(InputError, match=r"different number of times.*truncated"):
        read_samples_file(path, metric="acc", filter="1")


def test_non_object_line(toy):
    toy.write_text(toy.read_text() + "[1, 2]\n")
    with pytest.raises(InputError, match=rf"{toy.name}:7: expected a JSON object"):
        read_samples_file(toy, metric="acc")


def test_missing_id_field_names_line_and_fields(toy):
    records = read_lines(toy)
    del records[4]["doc"]["metabench_idx"]
    write_lines(toy, records)
    with pytest.raises(
        InputError,
        match=rf"{toy.name}:5: id field 'metabench_idx' not found; "
        r"available fields: .*doc\.question.*doc_hash",
    ):
        read_samples_file(toy, metric="acc", id_field="metabench_idx")
    with pytest.raises(InputError, match=r"id field 'orig_idx' not found"):
        read_samples_file(toy, metric="acc", id_field="orig_idx")


def test_id_field_choices(toy):
    by_hash = read_samples_file(toy, metric="acc", id_field="doc_hash")
    assert set(by_hash.scores) == {rec["doc_hash"] for rec in read_lines(toy)}
    by_content = read_samples_file(toy, metric="acc", id_field="content_hash")
    assert set(by_content.scores) == {content_hash(rec["doc"]) for rec in read_lines(toy)}
    by_path = read_samples_file(toy, metric="acc", id_field="doc.metabench_idx", id_prefix="x.")
    assert set(by_path.scores) == {f"x.{10 + k}" for k in range(6)}
    records = [
        dict(rec, doc={k: v for k, v in rec["doc"].items() if k != "metabench_idx"})
        for rec in read_lines(toy)
    ]
    write_lines(toy, records)
    fallback = read_samples_file(toy, metric="acc")
    assert fallback.id_field == "doc_hash"


def test_duplicate_item_ids_are_named(toy):
    records = read_lines(toy)
    records[5]["doc"]["metabench_idx"] = 12
    write_lines(toy, records)
    with pytest.raises(
        InputError,
        match=rf"duplicate item ids in one run: '12' \(at .*{toy.name}:3 and .*{toy.name}:6\)",
    ):
        read_samples_file(toy, metric="acc")


def test_unknown_metric_lists_available(toy):
    with pytest.raises(InputError, match=r"unknown metric 'acc_norm'.*available metrics: acc"):
        read_samples_file(toy, metric="acc_norm")


def test_unknown_filter_lists_available(tmp_path):
    records = [
        dict(line(k, k, 1.0), filter=f)
        for f in ("strict-match", "flexible-extract")
        for k in range(3)
    ]
    path = write_lines(run_file(tmp_path), records)
    with pytest.raises(
        InputError, match=r"several filters.*'strict-match' \(position 0\), 'flexible-extract'"
    ):
        read_samples_file(path, metric="acc")
    with pytest.raises(
        InputError, match=r"unknown filter 'none'; available filters: 'strict-match'"
    ):
        read_samples_file(path, metric="acc", filter="none")
    assert (
        read_samples_file(path, metric="acc", filter="flexible-extract").filter
        == "flexible-extract"
    )


@pytest.mark.parametrize("bad", [None, float("nan")])
def test_missing_metric_values_are_named(toy, bad):
    records = read_lines(toy)
    records[3]["acc"] = bad
    write_lines(toy, records)
    with pytest.raises(InputError, match=rf"None/NaN for 1 items: '13' \(.*{toy.name}:4\)"):
        read_samples_file(toy, metric="acc")


def test_out_of_range_values_are_named(toy):
    records = read_lines(toy)
    records[1]["acc"] = 1.5
    records[4]["acc"] = -0.25
    write_lines(toy, records)
    with pytest.raises(
        InputError, match=r"outside \[0, 1\] for 2 items: '11' = 1\.5 .*'14' = -0\.25"
    ):
        collect_samples(toy, metric="acc", progress=False)


def test_non_scalar_metric_is_an_error(toy):
    records = read_lines(toy)
    records[0]["acc"] = [True, False]
    write_lines(toy, records)
    with pytest.raises(InputError, match=rf"{toy.name}:1: metric 'acc' holds \[True, False\]"):
        read_samples_file(toy, metric="acc")


def test_empty_and_absent_files(tmp_path):
    empty = run_file(tmp_path)
    empty.write_text("\n")
    with pytest.raises(InputError, match="no sample records"):
        read_samples_file(empty, metric="acc")
    with pytest.raises(InputError, match="not found"):
        read_samples_file(tmp_path / "nope.jsonl", metric="acc")


def test_bad_id_values(toy):
    records = read_lines(toy)
    records[2]["doc"]["metabench_idx"] = 2.5
    write_lines(toy, records)
    with pytest.raises(InputError, match=rf"{toy.name}:3: id field 'metabench_idx' holds 2\.5"):
        read_samples_file(toy, metric="acc")
