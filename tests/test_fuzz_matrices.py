"""Property and fuzz tests of the response-matrix and true-score readers (issue 8), the
known-defect reproductions of every fuzzed reader, and the check of the documented case count.

The properties, case counts and shared machinery are in ``fuzz_support``.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fuzz_support
import numpy as np
import pandas as pd
import pytest
from fuzz_support import (
    CASES,
    DEEP_LEVELS,
    N_MATRIX_BYTES,
    N_MATRIX_CELLS,
    N_MATRIX_PARQUET_META,
    N_MATRIX_REORDER,
    N_MATRIX_ROUNDTRIP,
    N_SCORES_BYTES,
    N_SCORES_REORDER,
    N_SCORES_ROUNDTRIP,
    TS,
    aligned,
    bundle_template,
    byte_ops,
    case_dir,
    dump_json,
    fuzz_settings,
    json_ops,
    matrices,
    mutate_bytes,
    mutate_fields,
    mutate_json,
    read_clean,
    safe_ids,
    same_numbers,
    targeted_ops,
    tricky_ids,
    valid_id,
)
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz_bundles import (
    _mutate_bundle_files,
    copy_bundle,
    joint_numbers,
    joint_template,
    write_bundle_document,
)
from test_fuzz_runs import (
    HOOK_MODELS,
    hook_results,
    reconstruct_numbers,
    sample_lines,
    write_hook_runs,
)

from lmeval_microbench.bundle import load_bundle, load_items
from lmeval_microbench.collect import (
    SamplesRun,
    read_samples_file,
    write_matrix,
)
from lmeval_microbench.hook import load_joint
from lmeval_microbench.reconstruct import bundle_estimator
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.truth import read_scores

__all__ = ["bundle_template", "joint_template"]  # fixtures, used by name


PARQUET_META_FIELDS = (
    "format_version",
    "items",
    "models",
    "items.0",
    "items.0.item_id",
    "items.0.content_hash",
    "items.0.stratum",
    "models.0",
    "models.0.model",
)


# ============================================================================ matrices
@fuzz_settings(N_MATRIX_ROUNDTRIP)
@given(matrix=matrices(tricky_ids), suffix=st.sampled_from([".csv", ".parquet"]))
def test_matrix_roundtrip(matrix: ResponseMatrix, suffix: str) -> None:
    """Property 3: a valid matrix written by ``write_matrix`` reads back unchanged."""
    with case_dir() as tmp:
        path = tmp / f"fuzzmatrix{suffix}"
        written, _ = read_clean(
            lambda: write_matrix(matrix, path), path.name, case=(matrix.model_ids, matrix.item_ids)
        )
        if not written:
            return  # the writer refused the ids with a clear error: acceptable
        ok, read = read_clean(
            lambda: ResponseMatrix.read(path), path.name, case=(matrix.model_ids, matrix.item_ids)
        )
        ids = f"models {matrix.model_ids!r}, items {matrix.item_ids!r}"
        assert ok, f"valid matrix ({ids}) did not read back: {read}"
        assert read.model_ids == matrix.model_ids, ids
        assert read.item_ids == matrix.item_ids, ids
        assert same_numbers(read.values, matrix.values), ids


@fuzz_settings(N_MATRIX_REORDER)
@given(matrix=matrices(), rnd=st.randoms(use_true_random=False))
def test_matrix_reorder(matrix: ResponseMatrix, rnd: random.Random) -> None:
    """Property 2: rows and columns in another order give the same score for every (model, item)."""
    rows = list(matrix.model_ids)
    cols = list(matrix.item_ids)
    rnd.shuffle(rows)
    rnd.shuffle(cols)
    shuffled = matrix.select_models(rows).select_items(cols)
    with case_dir() as tmp:
        for suffix in (".csv", ".parquet"):
            path = tmp / f"fuzzmatrix{suffix}"
            write_matrix(shuffled, path)
            ok, read = read_clean(lambda path=path: ResponseMatrix.read(path), path.name)
            assert ok, read
            assert same_numbers(aligned(read, matrix), matrix.values)
        # a CSV whose model column is not first, with columns in any order
        frame = shuffled.to_frame().reset_index()
        columns = list(frame.columns)
        rnd.shuffle(columns)
        path = tmp / "fuzzmatrix-cols.csv"
        frame[columns].to_csv(path, index=False)
        ok, read = read_clean(lambda: ResponseMatrix.read(path), path.name)
        assert ok, read
        assert same_numbers(aligned(read, matrix), matrix.values)


@fuzz_settings(N_MATRIX_BYTES)
@given(matrix=matrices(), suffix=st.sampled_from([".csv", ".parquet"]), ops=byte_ops)
def test_matrix_byte_mutations(matrix: ResponseMatrix, suffix: str, ops: list) -> None:
    """Property 1 for ``ResponseMatrix.read`` on byte-mutated CSV and parquet files."""
    with case_dir() as tmp:
        path = tmp / f"fuzzmatrix{suffix}"
        write_matrix(matrix, path)
        path.write_bytes(mutate_bytes(path.read_bytes(), ops))
        read_clean(lambda: ResponseMatrix.read(path), path.name, case=(suffix, ops))


CSV_CELLS = (
    "",
    "nan",
    "abc",
    "1e999",
    "-0.5",
    "2",
    "True",
    '"',
    "0x1",
    " 1",
    "1,5",
    "inf",
    "NA",
    "model",
    "\\ud800",
    "1" * 400,
)


@fuzz_settings(N_MATRIX_CELLS)
@given(
    matrix=matrices(),
    edits=st.lists(
        st.tuples(st.integers(0, 2**16), st.integers(0, 2**16), st.sampled_from(CSV_CELLS)),
        min_size=1,
        max_size=3,
    ),
)
def test_matrix_csv_cell_mutations(matrix: ResponseMatrix, edits: list) -> None:
    """Property 1 for CSV matrices whose cells (header included) hold odd text.

    A read that succeeds must not invent ids: every item id read is a header cell.
    """
    frame = matrix.to_frame().reset_index().astype(object)
    table = [list(frame.columns), *frame.to_numpy().tolist()]
    for row, col, text in edits:
        r = row % len(table)
        table[r][col % len(table[r])] = text
    with case_dir() as tmp:
        path = tmp / "fuzzmatrix.csv"
        pd.DataFrame(table[1:], columns=None).to_csv(path, index=False, header=table[0])
        ok, read = read_clean(lambda: ResponseMatrix.read(path), path.name, case=edits)
        if ok:
            header = [str(c) for c in table[0]]
            invented = [i for i in read.item_ids if i not in header]
            assert not invented, f"item ids not in the file: {invented} (header {header})"


@fuzz_settings(N_MATRIX_PARQUET_META)
@given(matrix=matrices(), ops=json_ops, fields=targeted_ops(PARQUET_META_FIELDS))
def test_matrix_parquet_metadata_mutations(matrix: ResponseMatrix, ops: list, fields: list) -> None:
    """Property 1 for parquet matrices whose ``lmeval_microbench`` schema metadata is mutated."""
    import pyarrow.parquet as pq

    with case_dir() as tmp:
        path = tmp / "fuzzmatrix.parquet"
        matrix.to_parquet(path)
        table = pq.read_table(path)
        meta = dict(table.schema.metadata)
        tree = json.loads(meta[b"lmeval_microbench"])
        meta[b"lmeval_microbench"] = dump_json(
            mutate_fields(mutate_json(tree, ops), fields)
        ).encode()
        pq.write_table(table.replace_schema_metadata(meta), path)
        read_clean(lambda: ResponseMatrix.read(path), path.name, case=(ops, fields))


# ============================================================================ true scores
@st.composite
def score_tables(draw: st.DrawFn, ids: st.SearchStrategy[str] = safe_ids) -> pd.DataFrame:
    models = draw(st.lists(ids.filter(valid_id), min_size=1, max_size=8, unique=True))
    scores = draw(
        st.lists(
            st.floats(0.0, 1.0, allow_nan=False).map(lambda x: round(x, 6)),
            min_size=len(models),
            max_size=len(models),
        )
    )
    return pd.DataFrame({"model": models, "score": scores, "split": "train"})


def write_scores(frame: pd.DataFrame, path: Path) -> None:
    if path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False, sep="\t" if path.suffix == ".tsv" else ",")


@fuzz_settings(N_SCORES_ROUNDTRIP)
@given(
    frame=score_tables(tricky_ids),
    suffix=st.sampled_from([".csv", ".tsv", ".parquet"]),
    scale=st.sampled_from(["fraction", "percent"]),
)
def test_scores_roundtrip(frame: pd.DataFrame, suffix: str, scale: str) -> None:
    """Property 3: every model's score reads back, by model id, on the declared scale."""
    written = frame.assign(score=frame["score"] * (100 if scale == "percent" else 1))
    with case_dir() as tmp:
        path = tmp / f"fuzzscores{suffix}"
        write_scores(written, path)
        ok, read = read_clean(
            lambda: read_scores(path, "score", scale=scale),
            path.name,
            case=(suffix, scale, frame.to_dict("list")),
        )
        assert ok, read
        expected = pd.Series(frame["score"].to_numpy(), index=frame["model"].astype(str))
        assert sorted(read.index) == sorted(expected.index)
        np.testing.assert_allclose(read.loc[expected.index].to_numpy(), expected.to_numpy())


@fuzz_settings(N_SCORES_REORDER)
@given(
    frame=score_tables(),
    suffix=st.sampled_from([".csv", ".parquet"]),
    rnd=st.randoms(use_true_random=False),
)
def test_scores_reorder(frame: pd.DataFrame, suffix: str, rnd: random.Random) -> None:
    """Property 2: rows and columns in another order give the same score per model."""
    rows = list(range(len(frame)))
    cols = list(frame.columns)
    rnd.shuffle(rows)
    rnd.shuffle(cols)
    with case_dir() as tmp:
        first, second = tmp / f"a{suffix}", tmp / f"b{suffix}"
        write_scores(frame, first)
        write_scores(frame.iloc[rows][cols], second)
        ok_a, a = read_clean(lambda: read_scores(first, "score"), first.name)
        ok_b, b = read_clean(lambda: read_scores(second, "score"), second.name)
        assert ok_a and ok_b, (a, b)
        pd.testing.assert_series_equal(a.sort_index(), b.sort_index(), check_names=False)


@fuzz_settings(N_SCORES_BYTES)
@given(frame=score_tables(), suffix=st.sampled_from([".csv", ".tsv", ".parquet"]), ops=byte_ops)
def test_scores_byte_mutations(frame: pd.DataFrame, suffix: str, ops: list) -> None:
    """Property 1 for ``truth.read_scores``."""
    with case_dir() as tmp:
        path = tmp / f"fuzzscores{suffix}"
        write_scores(frame.assign(score=frame["score"] * 100), path)
        path.write_bytes(mutate_bytes(path.read_bytes(), ops))
        read_clean(lambda: read_scores(path, "score"), path.name, case=(suffix, ops))


# ============================================================================ known defects
# One minimal reproduction per defect the fuzz tests found (out/fuzz_findings.md), for every
# fuzzed reader (the helpers come from the other fuzz test modules). Each asserts the property.


def _write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def _scores_missing_file(tmp: Path) -> None:
    path = tmp / "missing-scores.csv"
    read_clean(lambda: read_scores(path, "score"), path.name)


def _scores_empty_csv(tmp: Path) -> None:
    path = _write(tmp / "empty-scores.csv", "")
    read_clean(lambda: read_scores(path, "score"), path.name)


def _scores_not_utf8(tmp: Path) -> None:
    path = _write(tmp / "latin1-scores.csv", b"model,score\n\xe9t\xe9,50\n")
    read_clean(lambda: read_scores(path, "score"), path.name)


def _scores_ragged_csv(tmp: Path) -> None:
    path = _write(tmp / "ragged-scores.csv", "model,score\na,50\nb,60,70,80\n")
    read_clean(lambda: read_scores(path, "score"), path.name)


def _scores_not_parquet(tmp: Path) -> None:
    path = _write(tmp / "broken-scores.parquet", b"model,score\na,50\n")
    read_clean(lambda: read_scores(path, "score"), path.name)


def _scores_text_ids(tmp: Path) -> None:
    path = _write(tmp / "ids-scores.csv", "model,score\n007,0.5\nNA,0.25\n")
    ok, read = read_clean(lambda: read_scores(path, "score", scale="fraction"), path.name)
    assert ok and set(read.index) == {"007", "NA"}, read


def _matrix_duplicate_header(tmp: Path) -> None:
    path = _write(tmp / "dup-matrix.csv", "model,arc.1,arc.1\nm1,1,0\nm2,0,1\n")
    ok, read = read_clean(lambda: ResponseMatrix.read(path), path.name)
    assert not ok, f"duplicate item column read as items {read.item_ids}"


def _matrix_empty_header(tmp: Path) -> None:
    path = _write(tmp / "blank-matrix.csv", "model,arc.1,\nm1,1,0\nm2,0,1\n")
    ok, read = read_clean(lambda: ResponseMatrix.read(path), path.name)
    assert not ok, f"blank item header read as items {read.item_ids}"


def _matrix_text_model_ids(tmp: Path) -> None:
    matrix = ResponseMatrix(np.array([[1.0], [0.0]]), ["007", "NA"], ["arc.1"])
    path = tmp / "ids-matrix.csv"
    write_matrix(matrix, path)
    ok, read = read_clean(lambda: ResponseMatrix.read(path), path.name)
    assert ok and read.model_ids == ("007", "NA"), read


def _parquet_meta(tmp: Path, meta: bytes, name: str) -> None:
    import pyarrow.parquet as pq

    path = tmp / name
    ResponseMatrix(np.array([[1.0, 0.0]]), ["m1"], ["arc.1", "arc.2"]).to_parquet(path)
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({b"lmeval_microbench": meta}), path)
    read_clean(lambda: ResponseMatrix.read(path), path.name)


def _matrix_parquet_meta_no_items(tmp: Path) -> None:
    _parquet_meta(tmp, b'{"format_version": 1, "models": []}', "noitems.parquet")


def _matrix_parquet_meta_deep(tmp: Path) -> None:
    _parquet_meta(tmp, b"[" * DEEP_LEVELS, "deepmeta.parquet")


def _bundle_document(template: dict[str, Any], tmp: Path, text: str) -> Path:
    folder = copy_bundle(template, tmp)
    _write(folder / "bundle.json", text)
    return folder


def _bundle_deep(template: dict[str, Any], tmp: Path) -> None:
    folder = _bundle_document(template, tmp, '{"name": ' + "[" * DEEP_LEVELS + "}")
    read_clean(lambda: load_bundle(folder), folder.name)


def _bundle_surrogate(template: dict[str, Any], tmp: Path) -> None:
    text = json.dumps(template["document"]).replace('"toy-own"', '"toy-own\\ud800"', 1)
    folder = _bundle_document(template, tmp, text)
    read_clean(lambda: load_bundle(folder), folder.name)


def _bundle_items_not_parquet(template: dict[str, Any], tmp: Path) -> None:
    folder = copy_bundle(template, tmp)
    _mutate_bundle_files(folder, "items not parquet (resealed)", template["items"])
    read_clean(lambda: load_items(folder), folder.name)


def _bundle_items_duplicate_row(template: dict[str, Any], tmp: Path) -> None:
    folder = copy_bundle(template, tmp)
    _mutate_bundle_files(folder, "items with a duplicate row (resealed)", template["items"])
    ok, items = read_clean(lambda: load_items(folder), folder.name)
    assert not ok or not items.index.has_duplicates, "duplicate item row returned silently"


def _bundle_state_name_object(template: dict[str, Any], tmp: Path) -> None:
    document = copy.deepcopy(template["document"])
    state = document["estimators"][0]["state"]
    state["estimator"] = {"fuzz": state["estimator"]}
    folder = copy_bundle(template, tmp)
    write_bundle_document(folder, document, reseal=True)
    ok, bundle = read_clean(lambda: load_bundle(folder), folder.name)
    if ok:
        name = document["estimators"][0]["name"]
        read_clean(lambda: bundle_estimator(bundle, name).estimate(template["scores"]))


def _bundle_state_bad_irt(template: dict[str, Any], tmp: Path) -> None:
    document = copy.deepcopy(template["document"])
    spec = next(e for e in document["estimators"] if e["name"] == "calibrated")
    spec["state"]["features"]["params"]["a"] = spec["state"]["features"]["params"]["a"][1:]
    folder = copy_bundle(template, tmp)
    write_bundle_document(folder, document, reseal=True)
    ok, bundle = read_clean(lambda: load_bundle(folder), folder.name)
    if ok:
        read_clean(lambda: bundle_estimator(bundle, "calibrated").estimate(template["scores"]))


def _joint_file(template: dict[str, Any], tmp: Path, state: Any) -> Path:
    return _write(tmp / "fuzzjoint.json", dump_json(state))


def _joint_deep(template: dict[str, Any], tmp: Path) -> None:
    path = _write(tmp / "deepjoint.json", "[" * DEEP_LEVELS)
    read_clean(lambda: load_joint(path), path.name)


def _joint_cv_mae_list(template: dict[str, Any], tmp: Path) -> None:
    path = _joint_file(template, tmp, {**template["state"], "cv_mae": [0.1]})
    read_clean(lambda: load_joint(path), path.name)


def _joint_huge_int(template: dict[str, Any], tmp: Path) -> None:
    state = copy.deepcopy(template["state"])
    state["bands"]["alpha"]["knots"] = [10**400]
    path = _joint_file(template, tmp, state)
    read_clean(lambda: load_joint(path), path.name)


def _joint_text_weights(template: dict[str, Any], tmp: Path) -> None:
    state = copy.deepcopy(template["state"])
    state["subsets"]["alpha"]["weights"] = ["x", "x", "x", "x"]
    path = _joint_file(template, tmp, state)
    read_clean(lambda: load_joint(path), path.name)


def _joint_estimate_after_load(template: dict[str, Any], tmp: Path) -> None:
    state = copy.deepcopy(template["state"])
    state["head"]["coef"] = state["head"]["coef"][:1]
    path = _joint_file(template, tmp, state)
    ok, joint = read_clean(lambda: load_joint(path), path.name)
    if ok:
        read_clean(lambda: joint_numbers(joint, template["scores"]))


def _samples(tmp: Path, line: str, name: str = "samples_fuzztask_" + TS + ".jsonl") -> Path:
    return _write(tmp / "run" / name, line + "\n")


def _samples_huge_score(tmp: Path) -> None:
    path = _samples(
        tmp, '{"doc_id": 0, "doc": {"id": "q0"}, "filter": "none", "acc": 1' + "0" * 400 + "}"
    )
    read_clean(lambda: read_samples_file(path, metric="acc"), path.name)


def _samples_deep(tmp: Path) -> None:
    path = _samples(tmp, '{"doc_id": 0, "doc": ' + "[" * DEEP_LEVELS + "}")
    read_clean(lambda: read_samples_file(path, metric="acc"), path.name)


def _samples_unhashable_doc_id(tmp: Path) -> None:
    path = _samples(tmp, '{"doc_id": [0], "doc": {"id": "q0"}, "acc": 1}')
    read_clean(lambda: read_samples_file(path, metric="acc"), path.name)


def _samples_surrogate(tmp: Path) -> None:
    path = _samples(tmp, '{"doc_id": 0, "doc": {"id": "q0", "text": "\\ud800"}, "acc": 1}')
    read_clean(lambda: read_samples_file(path, metric="acc"), path.name)


def _samples_duplicate_keys(tmp: Path) -> None:
    first = _samples(tmp / "a", '{"doc_id": 0, "doc": {"id": "q0"}, "acc": 1, "acc": 0}')
    second = _samples(tmp / "b", '{"doc_id": 0, "doc": {"id": "q0"}, "acc": 0, "acc": 1}')
    ok_a, a = read_clean(lambda: read_samples_file(first, metric="acc"), first.name)
    ok_b, b = read_clean(lambda: read_samples_file(second, metric="acc"), second.name)
    assert not (ok_a and ok_b and a.scores != b.scores), (
        f"reordered duplicate keys read as {a.scores} and {b.scores}"
    )


def _results(tmp: Path, payload: str) -> tuple[Path, Path]:
    samples = _samples(
        tmp, json.dumps(sample_lines({"scores": {"q0": 1.0}, "new_format": True})[0])
    )
    results = _write(samples.parent / f"results_{TS}.json", payload)
    return samples, results


def _results_deep(tmp: Path) -> None:
    samples, results = _results(tmp, "[" * DEEP_LEVELS)
    read_clean(lambda: read_samples_file(samples, metric="acc"), results.name, samples.name)


def _results_configs_text(tmp: Path) -> None:
    samples, results = _results(tmp, '{"configs": "fuzztask"}')
    read_clean(lambda: read_samples_file(samples, metric="acc"), results.name, samples.name)


def _results_config_bool(tmp: Path) -> None:
    samples, results = _results(tmp, '{"config": true}')
    read_clean(lambda: SamplesRun(samples).model_id, results.name, samples.name)


def _hook_results_versions_bool(template: dict[str, Any], tmp: Path) -> None:
    paths = write_hook_runs(template, tmp / "runs")
    results = paths[0].parent / f"results_{TS}.json"
    payload = hook_results(HOOK_MODELS[0])
    payload["versions"] = True
    results.write_text(json.dumps(payload), encoding="utf-8")
    read_clean(
        lambda: reconstruct_numbers(tmp / "runs", [template["folder"]]),
        f"run0/{results.name}",
        f"run0/{paths[0].name}",
    )


def _hook_unknown_bundle(template: dict[str, Any], tmp: Path) -> None:
    def renamed(m: int, lines: list[dict[str, Any]]) -> list[str]:
        if m == 0:
            for line in lines:
                line["doc"] = {**line["doc"], "bundle": "no-such-bundle"}
        return [json.dumps(x) for x in lines]

    paths = write_hook_runs(template, tmp / "runs", renamed)
    read_clean(
        lambda: reconstruct_numbers(tmp / "runs", [template["folder"]]), f"run0/{paths[0].name}"
    )


KNOWN_DEFECTS_TABLE: tuple[tuple[str, Callable[..., None]], ...] = (
    ("scores-missing-file", _scores_missing_file),
    ("scores-empty-csv", _scores_empty_csv),
    ("scores-not-utf8", _scores_not_utf8),
    ("scores-ragged-csv", _scores_ragged_csv),
    ("scores-not-parquet", _scores_not_parquet),
    ("scores-text-ids", _scores_text_ids),
    ("matrix-duplicate-header", _matrix_duplicate_header),
    ("matrix-empty-header", _matrix_empty_header),
    ("matrix-text-model-ids", _matrix_text_model_ids),
    ("matrix-parquet-meta-no-items", _matrix_parquet_meta_no_items),
    ("matrix-parquet-meta-deep", _matrix_parquet_meta_deep),
    ("bundle-deep", _bundle_deep),
    ("bundle-surrogate", _bundle_surrogate),
    ("bundle-items-not-parquet", _bundle_items_not_parquet),
    ("bundle-items-duplicate-row", _bundle_items_duplicate_row),
    ("bundle-state-name-object", _bundle_state_name_object),
    ("bundle-state-bad-irt", _bundle_state_bad_irt),
    ("joint-deep", _joint_deep),
    ("joint-cv-mae-list", _joint_cv_mae_list),
    ("joint-huge-int", _joint_huge_int),
    ("joint-text-weights", _joint_text_weights),
    ("joint-estimate-after-load", _joint_estimate_after_load),
    ("samples-huge-score", _samples_huge_score),
    ("samples-deep", _samples_deep),
    ("samples-unhashable-doc-id", _samples_unhashable_doc_id),
    ("samples-surrogate", _samples_surrogate),
    ("samples-duplicate-keys", _samples_duplicate_keys),
    ("results-deep", _results_deep),
    ("results-configs-text", _results_configs_text),
    ("results-config-bool", _results_config_bool),
    ("hook-results-versions-bool", _hook_results_versions_bool),
    ("hook-unknown-bundle", _hook_unknown_bundle),
)
KNOWN_DEFECTS = len(KNOWN_DEFECTS_TABLE)
CASES["test_known_defect"] = KNOWN_DEFECTS
TOTAL_CASES = sum(CASES.values())


@pytest.mark.parametrize(
    "check",
    [pytest.param(check, id=name) for name, check in KNOWN_DEFECTS_TABLE],
)
def test_known_defect(
    check: Callable[..., None],
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    """Minimal reproductions of the fuzz findings (properties 1-3 on one input each)."""
    if check.__name__.startswith(("_bundle_", "_hook_")):
        check(request.getfixturevalue("bundle_template"), tmp_path)
    elif check.__name__.startswith("_joint_"):
        check(request.getfixturevalue("joint_template"), tmp_path)
    else:
        check(tmp_path)


def test_case_count_is_documented() -> None:
    """fuzz_support's docstring states TOTAL_CASES (keep it in sync when a count changes)."""
    assert f"{TOTAL_CASES} generated cases" in (fuzz_support.__doc__ or "")
