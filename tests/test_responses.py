"""ResponseMatrix: validation, id-based access, metadata, I/O and fingerprints."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lmeval_microbench.errors import InputError, ItemMismatchError
from lmeval_microbench.responses import ResponseMatrix, infer_item_metadata

BENCHMARKS = ("arc", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande")


@pytest.fixture
def small() -> ResponseMatrix:
    values = np.array([[1.0, 0.0, np.nan, 0.5], [0.0, 1.0, 1.0, 0.25], [1.0, 1.0, 0.0, 0.75]])
    items = pd.DataFrame(
        {"stratum": ["anatomy", "anatomy", "law", "law"], "content_hash": ["h1", "h2", "h3", "h4"]},
        index=["mmlu.anatomy.1", "mmlu.anatomy.2", "mmlu.law.7", "mmlu.law.8"],
    )
    models = pd.DataFrame({"size": [7.0, 13.0, 70.0]}, index=["m/a", "m/b", "m/c"])
    return ResponseMatrix(
        values, ["m/a", "m/b", "m/c"], list(items.index), items=items, models=models
    )


# ---------------------------------------------------------------------------- construction
def test_shape_mismatch_is_named():
    with pytest.raises(
        InputError, match=r"values have shape \(2, 3\), expected \(2 models, 2 items\)"
    ):
        ResponseMatrix(np.zeros((2, 3)), ["a", "b"], ["x", "y"])


@pytest.mark.parametrize(
    ("models", "items", "message"),
    [
        (["a", "a"], ["x", "y"], r"duplicate model ids: 'a'"),
        (["a", "b"], ["x", "x"], r"duplicate item ids: 'x'"),
        (["a", " "], ["x", "y"], r"model at positions 1 has no id"),
        (["a", "b"], ["x", "nan"], r"item at positions 1 has no id"),
    ],
)
def test_bad_ids(models, items, message):
    with pytest.raises(InputError, match=message):
        ResponseMatrix(np.zeros((2, 2)), models, items)


def test_range_and_infinity_name_model_and_item():
    values = np.array([[0.0, 1.2], [np.nan, 0.5]])
    with pytest.raises(
        InputError, match=r"score 1\.2 outside \[0, 1\] for model 'a', item 'y' \(1 such"
    ):
        ResponseMatrix(values, ["a", "b"], ["x", "y"])
    values = np.array([[0.0, 0.2], [np.inf, 0.5]])
    with pytest.raises(InputError, match=r"infinite score for model 'b', item 'x'"):
        ResponseMatrix(values, ["a", "b"], ["x", "y"])


def test_nan_marks_missing_and_values_are_read_only(small):
    assert small.observed.sum() == 11
    assert small.row("m/a") == {"mmlu.anatomy.1": 1.0, "mmlu.anatomy.2": 0.0, "mmlu.law.8": 0.5}
    np.testing.assert_allclose(small.mean_scores(), [1.5 / 3, 2.25 / 4, 2.75 / 4])
    with pytest.raises(ValueError, match="read-only"):
        small.values[0, 0] = 0.0


def test_constructor_copies_input():
    values = np.array([[0.0, 1.0]])
    matrix = ResponseMatrix(values, ["a"], ["x", "y"])
    values[0, 0] = 1.0
    assert matrix.values[0, 0] == 0.0


def test_item_metadata_is_inferred_and_completed(small):
    inferred = infer_item_metadata(["mmlu.anatomy.12", "arc.17", "plain"])
    assert inferred["benchmark"].tolist() == ["mmlu", "arc", None]
    assert inferred["stratum"].tolist() == ["anatomy", None, None]
    assert small.items["benchmark"].tolist() == ["mmlu"] * 4
    assert small.items["content_hash"].tolist() == ["h1", "h2", "h3", "h4"]
    assert small.strata().tolist() == ["anatomy", "anatomy", "law", "law"]
    with pytest.raises(InputError, match=r"item metadata lacks items 'y'"):
        ResponseMatrix(
            np.zeros((1, 2)), ["a"], ["x", "y"], items=pd.DataFrame({"stratum": ["s"]}, index=["x"])
        )


def test_strata_fall_back_to_benchmark():
    matrix = ResponseMatrix(np.zeros((1, 2)), ["a"], ["arc.1", "mmlu.law.2"])
    assert matrix.strata().tolist() == ["arc", "law"]


# ---------------------------------------------------------------------------- access by id
def test_select_items_follows_the_requested_order(small):
    picked = small.select_items(["mmlu.law.8", "mmlu.anatomy.1"])
    assert picked.item_ids == ("mmlu.law.8", "mmlu.anatomy.1")
    np.testing.assert_array_equal(picked.values, small.values[:, [3, 0]])
    assert picked.items["content_hash"].tolist() == ["h4", "h1"]
    assert picked.models["size"].tolist() == [7.0, 13.0, 70.0]


def test_unknown_ids_are_named(small):
    with pytest.raises(ItemMismatchError, match=r"lacks items 'mmlu.law.99' \(1 of the 2 asked"):
        small.select_items(["mmlu.law.7", "mmlu.law.99"])
    with pytest.raises(InputError, match=r"unknown models 'm/z'"):
        small.select_models(["m/z"])


def test_select_models_and_drop_items(small):
    picked = small.select_models(["m/c", "m/a"])
    assert picked.model_ids == ("m/c", "m/a")
    np.testing.assert_array_equal(picked.values, small.values[[2, 0]], strict=True)
    assert picked.models["size"].tolist() == [70.0, 7.0]
    dropped = small.drop_items(["mmlu.anatomy.2"])
    assert dropped.item_ids == ("mmlu.anatomy.1", "mmlu.law.7", "mmlu.law.8")


def test_selected_rows_equal_a_matrix_built_from_them(small):
    """select_models skips re-checking the items: the result must still be the matrix a full
    construction gives, its own copy, read-only, and refuse a model asked for twice."""
    picked = small.select_models(["m/c", "m/a"])
    built = ResponseMatrix(
        small.values[[2, 0]], ["m/c", "m/a"], small.item_ids, items=small.items,
        models=small.models.loc[["m/c", "m/a"]], source=small.source,
    )  # fmt: skip
    pd.testing.assert_frame_equal(picked.items, built.items)
    pd.testing.assert_frame_equal(picked.models, built.models)
    assert picked.row("m/a") == small.row("m/a")
    assert picked.item_positions(["mmlu.law.8"]).tolist() == [3]
    assert picked.items is not small.items and not picked.values.flags.writeable
    picked.items.loc["mmlu.law.8", "content_hash"] = "changed"
    assert small.items.loc["mmlu.law.8", "content_hash"] == "h4"
    with pytest.raises(InputError, match="duplicate model ids"):
        small.select_models(["m/a", "m/a"])


def test_alignment_by_id_survives_reordering(small):
    """Two matrices with the same content in different column order agree item by item."""
    reordered = small.select_items(list(reversed(small.item_ids))).select_models(
        ["m/b", "m/c", "m/a"]
    )
    for model in small.model_ids:
        assert reordered.row(model) == small.row(model)
    back = reordered.select_items(small.item_ids).select_models(small.model_ids)
    np.testing.assert_array_equal(back.values, small.values)


def test_check_fittable_and_constant_items():
    values = np.array([[1.0, 0.0, np.nan], [1.0, 1.0, np.nan]])
    matrix = ResponseMatrix(values, ["a", "b"], ["x", "y", "z"])
    with pytest.raises(InputError, match=r"items no model was evaluated on: 'z'"):
        matrix.check_fittable()
    trimmed = matrix.drop_items(["z"])
    assert trimmed.constant_items() == ["x"]
    with pytest.raises(InputError, match=r"same score for every model.*'x'"):
        trimmed.check_fittable()
    trimmed.check_fittable(allow_constant=True)
    empty_row = ResponseMatrix(np.array([[np.nan], [1.0]]), ["a", "b"], ["x"])
    with pytest.raises(InputError, match=r"models with no observed item: 'a'"):
        empty_row.check_fittable(allow_constant=True)


def test_concat_items_joins_on_model_id():
    left = ResponseMatrix(np.array([[1.0], [0.0]]), ["a", "b"], ["arc.1"])
    right = ResponseMatrix(np.array([[0.5], [1.0]]), ["c", "a"], ["gsm8k.1"])
    joined = ResponseMatrix.concat_items([left, right])
    assert joined.item_ids == ("arc.1", "gsm8k.1")
    assert joined.row("a") == {"arc.1": 1.0, "gsm8k.1": 1.0}
    assert joined.row("c") == {"gsm8k.1": 0.5}
    with pytest.raises(InputError, match=r"items appear in several matrices: 'arc.1'"):
        ResponseMatrix.concat_items([left, left])


# ---------------------------------------------------------------------------- fingerprint
def test_fingerprint_is_stable_and_sensitive(small):
    same = ResponseMatrix(small.values, small.model_ids, small.item_ids)
    assert same.fingerprint() == small.fingerprint()
    assert len(small.fingerprint()) == 64
    changed = small.values.copy()
    changed[1, 1] = 0.0
    assert (
        ResponseMatrix(changed, small.model_ids, small.item_ids).fingerprint()
        != small.fingerprint()
    )
    missing = small.values.copy()
    missing[0, 0] = np.nan
    assert (
        ResponseMatrix(missing, small.model_ids, small.item_ids).fingerprint()
        != small.fingerprint()
    )
    renamed = ResponseMatrix(small.values, ["m/x", "m/b", "m/c"], small.item_ids)
    assert renamed.fingerprint() != small.fingerprint()


# ---------------------------------------------------------------------------- I/O
def test_parquet_round_trip_keeps_metadata(small, tmp_path):
    path = tmp_path / "sub" / "m.parquet"
    small.to_parquet(path)
    again = ResponseMatrix.read(path)
    assert again.model_ids == small.model_ids
    assert again.item_ids == small.item_ids
    np.testing.assert_array_equal(again.values, small.values)
    pd.testing.assert_frame_equal(again.items, small.items)
    assert again.models["size"].tolist() == [7.0, 13.0, 70.0]
    assert again.fingerprint() == small.fingerprint()
    assert [p.name for p in path.parent.iterdir()] == ["m.parquet"]


def test_csv_round_trip_keeps_values(small, tmp_path):
    path = tmp_path / "m.csv"
    small.to_frame().to_csv(path)
    again = ResponseMatrix.read(path)
    assert again.fingerprint() == small.fingerprint()
    assert again.items["stratum"].tolist() == ["anatomy", "anatomy", "law", "law"]


def test_csv_with_model_column_anywhere(tmp_path):
    path = tmp_path / "m.csv"
    pd.DataFrame({"x": [1, 0], "model": ["a", "b"], "y": [0.5, np.nan]}).to_csv(path, index=False)
    matrix = ResponseMatrix.read(path)
    assert matrix.model_ids == ("a", "b")
    assert matrix.row("b") == {"x": 0.0}


def test_read_errors(tmp_path):
    with pytest.raises(InputError, match=r"unknown matrix file type '\.xlsx'"):
        ResponseMatrix.read(tmp_path / "m.xlsx")
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match=r"broken\.parquet: not a readable parquet file"):
        ResponseMatrix.read(broken)
    numeric_first = tmp_path / "numbers.csv"
    pd.DataFrame({"x": [1, 0], "y": [0, 1]}).to_csv(numeric_first, index=False)
    with pytest.raises(InputError, match="cannot find model ids"):
        ResponseMatrix.read(numeric_first)
    text = tmp_path / "text.csv"
    pd.DataFrame({"model": ["a", "b"], "x": ["1", "yes"]}).to_csv(text, index=False)
    with pytest.raises(InputError, match=r"columns 'x' \(model 'b', item 'x': 'yes'\)"):
        ResponseMatrix.read(text)


def test_unknown_format_version_is_rejected(small, tmp_path):
    path = tmp_path / "m.parquet"
    small.to_parquet(path)
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    payload = json.loads(meta[b"lmeval_microbench"])
    payload["format_version"] = 99
    meta[b"lmeval_microbench"] = json.dumps(payload).encode()
    pq.write_table(table.replace_schema_metadata(meta), path)
    with pytest.raises(InputError, match="unknown matrix format version 99"):
        ResponseMatrix.read(path)


def test_failed_write_leaves_nothing(small, tmp_path, monkeypatch):
    path = tmp_path / "m.parquet"
    small.to_parquet(path)
    before = path.read_bytes()

    def broken(table, where, *args, **kwargs):
        Path(where).write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        small.select_models(["m/a"]).to_parquet(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.parquet"]


def test_plain_wide_parquet_without_our_metadata(tmp_path):
    path = tmp_path / "plain.parquet"
    frame = pd.DataFrame(
        {"arc.1": [1, 0], "arc.2": [0, 1]}, index=pd.Index(["a", "b"], name="model")
    )
    pq.write_table(pa.Table.from_pandas(frame.astype("int8")), path)
    matrix = ResponseMatrix.read(path)
    assert matrix.row("a") == {"arc.1": 1.0, "arc.2": 0.0}
    assert matrix.items["benchmark"].tolist() == ["arc", "arc"]


# ---------------------------------------------------------------------------- real data
@pytest.mark.parametrize("bm", BENCHMARKS)
def test_reads_real_leaderboard_matrices(shared_data, bm):
    path = shared_data / "openllm_v1" / "responses" / f"{bm}_B.parquet"
    raw = pq.read_table(path).to_pandas()
    matrix = ResponseMatrix.read(path)
    assert matrix.shape == raw.shape
    assert matrix.model_ids == tuple(raw.index)
    finite = matrix.values[matrix.observed]
    assert set(np.unique(finite)) <= {0.0, 1.0}
    assert set(matrix.items["benchmark"]) == {bm}
    if bm == "mmlu":
        assert matrix.items["stratum"].notna().all()
        assert matrix.items["stratum"].nunique() > 10
    else:
        assert matrix.items["stratum"].isna().all()
    # values are those of the file, column by column (ids, not positions)
    column = raw.columns[len(raw.columns) // 2]
    np.testing.assert_array_equal(
        matrix.values[:, matrix.item_positions([column])[0]], raw[column].to_numpy(dtype=float)
    )


def test_real_matrix_round_trip_is_stable(shared_data, tmp_path):
    matrix = ResponseMatrix.read(shared_data / "openllm_v1" / "responses" / "arc_B.parquet")
    first = matrix.fingerprint()
    assert (
        ResponseMatrix.read(
            shared_data / "openllm_v1" / "responses" / "arc_B.parquet"
        ).fingerprint()
        == first
    )
    matrix.to_parquet(tmp_path / "arc.parquet")
    assert ResponseMatrix.read(tmp_path / "arc.parquet").fingerprint() == first


def test_with_content_hashes_replaces_only_the_hashes(small):
    hashed = small.with_content_hashes(["a", "b", "c", "d"])
    assert hashed.items["content_hash"].tolist() == ["a", "b", "c", "d"]
    assert small.items["content_hash"].tolist() == ["h1", "h2", "h3", "h4"]  # unchanged
    np.testing.assert_array_equal(hashed.values, small.values)
    assert hashed.strata().tolist() == small.strata().tolist()
    with pytest.raises(InputError, match="3 content hashes for 4 items"):
        small.with_content_hashes(["a", "b", "c"])


# ---------------------------------------------------------------------------- issue 8
def _with_meta(path: Path, raw: bytes) -> None:
    """Rewrite the parquet at ``path`` with ``raw`` as its lmeval_microbench metadata."""
    table = pq.read_table(path)
    meta = {**dict(table.schema.metadata or {}), b"lmeval_microbench": raw}
    pq.write_table(table.replace_schema_metadata(meta), path)


def test_csv_with_a_duplicated_item_column_is_refused_by_name(tmp_path):
    # pandas would rename the copy to 'arc.914.1', a new item of stratum '914'
    path = tmp_path / "dup.csv"
    path.write_text("model,arc.914,arc.2,arc.914\na,1,0,1\nb,0,1,0\n")
    with pytest.raises(InputError, match=r"dup\.csv: duplicate item ids: 'arc\.914'"):
        ResponseMatrix.read(path)


def test_csv_whose_ids_look_like_pandas_renames_is_fine(tmp_path):
    path = tmp_path / "ok.csv"
    path.write_text("model,arc.914,arc.914.1\na,1,0\nb,0,1\n")
    assert ResponseMatrix.read(path).item_ids == ("arc.914", "arc.914.1")


def test_csv_with_a_duplicated_model_row_is_refused_by_name(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("model,arc.1,arc.2\na,1,0\nb,0,1\na,1,1\n")
    with pytest.raises(InputError, match=r"dup\.csv: duplicate model ids: 'a'"):
        ResponseMatrix.read(path)


def test_parquet_with_a_duplicated_item_column_is_refused_by_name(tmp_path):
    path = tmp_path / "dup.parquet"
    table = pa.table({"model": ["a", "b"], "x": [1.0, 0.0], "y": [0.0, 1.0]})
    pq.write_table(table.rename_columns(["model", "arc.1", "arc.1"]), path)
    with pytest.raises(InputError, match=r"dup\.parquet: duplicate item ids: 'arc\.1'"):
        ResponseMatrix.read(path)


def test_parquet_metadata_listing_an_item_twice_is_refused(small, tmp_path):
    path = tmp_path / "m.parquet"
    small.to_parquet(path)
    meta = json.loads(pq.read_table(path).schema.metadata[b"lmeval_microbench"])
    meta["items"].append(meta["items"][0])
    _with_meta(path, json.dumps(meta).encode())
    with pytest.raises(InputError, match=r"m\.parquet: .*duplicate item ids: 'mmlu\.anatomy\.1'"):
        ResponseMatrix.read(path)


def test_header_only_matrices_are_refused(tmp_path):
    path = tmp_path / "header.csv"
    path.write_text("model,arc.1,arc.2\n")
    with pytest.raises(InputError, match=r"header\.csv: the matrix has no models"):
        ResponseMatrix.read(path)
    empty = tmp_path / "empty.parquet"
    pq.write_table(
        pa.table({"model": pa.array([], pa.string()), "arc.1": pa.array([], "f8")}), empty
    )
    with pytest.raises(InputError, match=r"empty\.parquet: the matrix has no models"):
        ResponseMatrix.read(empty)
    no_items = tmp_path / "models.csv"
    no_items.write_text("model\na\nb\n")
    with pytest.raises(InputError, match=r"models\.csv: the matrix has no items"):
        ResponseMatrix.read(no_items)


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b"[1, 2]", b'{"format_version": 1, "items": [{"id": "x"}], "models": []}'],
)
def test_parquet_metadata_that_is_not_ours_is_named(small, tmp_path, raw):
    path = tmp_path / "m.parquet"
    small.to_parquet(path)
    _with_meta(path, raw)
    with pytest.raises(InputError, match=r"m\.parquet: unreadable 'lmeval_microbench' metadata"):
        ResponseMatrix.read(path)


def test_csv_model_ids_are_kept_as_written(tmp_path):
    path = tmp_path / "ids.csv"
    ResponseMatrix(
        np.array([[1.0, np.nan], [0.0, 1.0]]), ["007", "NA"], ["arc.1", "arc.2"]
    ).to_frame().to_csv(path)
    matrix = ResponseMatrix.read(path)
    assert matrix.model_ids == ("007", "NA")
    assert matrix.row("007") == {"arc.1": 1.0}  # an empty cell is still a missing score


def test_csv_column_without_a_name_is_refused(tmp_path):
    path = tmp_path / "blank.csv"
    path.write_text("model,arc.1,\nm1,1,0\nm2,0,1\n")
    with pytest.raises(InputError, match=r"blank\.csv: columns 3 have no name"):
        ResponseMatrix.read(path)


def test_deeply_nested_parquet_metadata_is_named(small, tmp_path):
    path = tmp_path / "m.parquet"
    small.to_parquet(path)
    _with_meta(path, b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(InputError, match=r"m\.parquet: unreadable 'lmeval_microbench' metadata"):
        ResponseMatrix.read(path)


def test_an_item_called_model_survives_a_parquet_round_trip(tmp_path):
    matrix = ResponseMatrix(np.array([[1.0, 0.0], [0.0, 1.0]]), ["a", "b"], ["arc.1", "model"])
    matrix.to_parquet(tmp_path / "m.parquet")
    again = ResponseMatrix.read(tmp_path / "m.parquet")
    assert again.model_ids == ("a", "b") and again.item_ids == ("arc.1", "model")


def test_a_number_too_large_for_a_float_is_named(tmp_path):
    path = tmp_path / "huge.csv"
    path.write_text("model,arc.1\na," + "1" * 401 + "\n")
    with pytest.raises(InputError, match=r"huge\.csv: non-numeric scores in columns 'arc\.1'"):
        ResponseMatrix.read(path)
