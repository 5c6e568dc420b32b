"""Property and fuzz tests of the response-matrix and true-score readers (issue 8), the
known-defect reproductions of every fuzzed reader, and the check of the documented case count.

The properties, case counts and shared machinery are in ``fuzz_support``.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import fuzz_support
import numpy as np
import pandas as pd
import pytest
from fuzz_runs_support import sample_lines
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
    resealed,
    write_bundle_document,
)
from test_fuzz_runs import (
    HOOK_MODELS,
    hook_results,
    reconstruct_numbers,
    write_hook_runs,
)

from lmeval_microbench.bundle import load_bundle, load_items
from lmeval_microbench.collect import SamplesRun, read_samples_file, write_matrix
from lmeval_microbench.errors import BundleError, InputError, MicrobenchError
from lmeval_microbench.reconstruct import bundle_estimator
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.runs import load_joint
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
# fuzzed reader (the helpers come from the other fuzz test modules). A case builds its input and
# returns the reads to judge; its expectation says what each read must give: a refusal (the
# error class, and a pattern its message must match: the file, and the line, field or item at
# fault where there is one) or values (compared by model id and item id).

Read = tuple[Callable[[], Any], tuple[str, ...]]
"""A read to judge: the call, and the file names one of which its error must name."""


@dataclass(frozen=True)
class Refused:
    """The read raises ``kind`` (a MicrobenchError) whose message matches ``pattern``."""

    kind: type[MicrobenchError]
    pattern: str


@dataclass(frozen=True)
class Reads:
    """The read succeeds, and ``check`` holds for what it returns (described by ``wanted``)."""

    check: Callable[[Any], bool]
    wanted: str


def _write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def _scores(tmp: Path, name: str, data: str | bytes | None, **kwargs: Any) -> list[Read]:
    """``truth.read_scores`` on ``data`` (None: no file at all)."""
    path = tmp / name if data is None else _write(tmp / name, data)
    return [(lambda: read_scores(path, "score", **kwargs), (path.name,))]


def _matrix(tmp: Path, name: str, text: str) -> list[Read]:
    path = _write(tmp / name, text)
    return [(lambda: ResponseMatrix.read(path), (path.name,))]


def _matrix_text_model_ids(tmp: Path) -> list[Read]:
    path = tmp / "ids-matrix.csv"
    write_matrix(ResponseMatrix(np.array([[1.0], [0.0]]), ["007", "NA"], ["arc.1"]), path)
    return [(lambda: ResponseMatrix.read(path), (path.name,))]


def _parquet_meta(tmp: Path, name: str, meta: bytes) -> list[Read]:
    import pyarrow.parquet as pq

    path = tmp / name
    ResponseMatrix(np.array([[1.0, 0.0]]), ["m1"], ["arc.1", "arc.2"]).to_parquet(path)
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({b"lmeval_microbench": meta}), path)
    return [(lambda: ResponseMatrix.read(path), (path.name,))]


def _bundle_text(template: dict[str, Any], tmp: Path, text: Callable[[str], str]) -> list[Read]:
    """``load_bundle`` on bundle.json's text (as ``json.dumps`` writes it) rewritten."""
    folder = copy_bundle(template, tmp)
    _write(folder / "bundle.json", text(json.dumps(template["document"])))
    return [(lambda: load_bundle(folder), (folder.name,))]


def _bundle_items(template: dict[str, Any], tmp: Path, kind: str) -> list[Read]:
    folder = copy_bundle(template, tmp)
    _mutate_bundle_files(folder, kind, template["items"])
    return [(lambda: load_items(folder), (folder.name,))]


def _bundle_state(template: dict[str, Any], tmp: Path, name: str, field: str) -> list[Read]:
    """Estimator ``name``'s state with ``field`` damaged, re-sealed: the read loads the bundle
    and estimates with that estimator."""
    document = copy.deepcopy(template["document"])
    state = next(e for e in document["estimators"] if e["name"] == name)["state"]
    if field == "estimator":
        state["estimator"] = {"fuzz": state["estimator"]}
    else:  # one IRT discrimination too few
        state["features"]["params"]["a"] = state["features"]["params"]["a"][1:]
    folder = copy_bundle(template, tmp)
    write_bundle_document(folder, document, reseal=True)
    scores = template["scores"]
    return [(lambda: bundle_estimator(load_bundle(folder), name).estimate(scores), (folder.name,))]


def _joint(template: dict[str, Any], tmp: Path, field: str, change: Callable) -> list[Read]:
    """The joint state with ``field`` (a dotted path) changed, re-sealed so that the change
    reaches the checks behind the checksum: the read loads the file and estimates with it."""
    state = copy.deepcopy(template["state"])
    *parents, last = field.split(".")
    node = state
    for part in parents:
        node = node[part]
    node[last] = change(node[last])
    path = _write(tmp / "fuzzjoint.json", dump_json(resealed(state)))
    return [(lambda: joint_numbers(load_joint(path), template["scores"]), (path.name,))]


def _joint_deep(template: dict[str, Any], tmp: Path) -> list[Read]:
    path = _write(tmp / "deepjoint.json", "[" * DEEP_LEVELS)
    return [(lambda: load_joint(path), (path.name,))]


def _samples(tmp: Path, line: str, name: str = "samples_fuzztask_" + TS + ".jsonl") -> Path:
    return _write(tmp / "run" / name, line + "\n")


def _samples_lines(tmp: Path, lines: tuple[str, ...]) -> list[Read]:
    """``read_samples_file`` on a one-line samples file per line given (each in its own run)."""
    paths = [_samples(tmp / str(k), line) for k, line in enumerate(lines)]
    return [(partial(read_samples_file, path, metric="acc"), (path.name,)) for path in paths]


def _results(tmp: Path, payload: str, model_id: bool = False) -> list[Read]:
    """A valid samples file beside a results file holding ``payload``: the read collects the
    samples (``model_id``: asks the run for its model instead)."""
    line = json.dumps(sample_lines({"scores": {"q0": 1.0}, "new_format": True})[0])
    samples = _samples(tmp, line)
    results = _write(samples.parent / f"results_{TS}.json", payload)
    names = (results.name, samples.name)
    if model_id:
        return [(lambda: SamplesRun(samples).model_id, names)]
    return [(lambda: read_samples_file(samples, metric="acc"), names)]


def _hook_results_versions_bool(template: dict[str, Any], tmp: Path) -> list[Read]:
    paths = write_hook_runs(template, tmp / "runs")
    results = paths[0].parent / f"results_{TS}.json"
    payload = hook_results(HOOK_MODELS[0])
    payload["versions"] = True
    results.write_text(json.dumps(payload), encoding="utf-8")
    names = (f"run0/{results.name}", f"run0/{paths[0].name}")
    return [(lambda: reconstruct_numbers(tmp / "runs", [template["folder"]]), names)]


def _hook_unknown_bundle(template: dict[str, Any], tmp: Path) -> list[Read]:
    def renamed(m: int, lines: list[dict[str, Any]]) -> list[str]:
        if m == 0:
            for line in lines:
                line["doc"] = {**line["doc"], "bundle": "no-such-bundle"}
        return [json.dumps(x) for x in lines]

    paths = write_hook_runs(template, tmp / "runs", renamed)
    names = (f"run0/{paths[0].name}",)
    return [(lambda: reconstruct_numbers(tmp / "runs", [template["folder"]]), names)]


def _by_id(read: ResponseMatrix) -> dict[str, dict[str, float]]:
    """The scores of a matrix by model id, then item id."""
    rows = zip(read.model_ids, read.values.tolist(), strict=True)
    return {model: dict(zip(read.item_ids, row, strict=True)) for model, row in rows}


def _scores_are(expected: dict[str, float]) -> Reads:
    """A score series equal to ``expected``, compared by model id."""
    return Reads(lambda read: dict(read.items()) == expected, f"scores {expected}")


P = partial
DOC = '{"doc_id": 0, "doc": {"id": "q0"}'
SAMPLES = r"samples_fuzztask_[^/]*\.jsonl:1: "
RESULTS = r"results_[^/]*\.json: "
BUNDLE_JSON = r"fuzzbundle/bundle\.json: "
JOINT = r"fuzzjoint\.json: joint: estimator state "
NOT_SCORES = r": not a readable scores file"
NESTED = "JSON nested more than the parser allows"
BUNDLE, JOINT_FILE = "bundle_template", "joint_template"
Case = tuple[str, str | None, Callable[..., list[Read]], Refused | Reads]
"""A known defect: its name, the fixture its builder takes first, the builder, the outcome."""
KNOWN_DEFECTS_TABLE: tuple[Case, ...] = (
    ("scores-missing-file", None, P(_scores, name="missing-scores.csv", data=None),
     Refused(InputError, r"missing-scores\.csv" + NOT_SCORES + r" .*No such file")),
    ("scores-empty-csv", None, P(_scores, name="empty-scores.csv", data=""),
     Refused(InputError, r"empty-scores\.csv" + NOT_SCORES)),
    ("scores-not-utf8", None, P(_scores, name="latin1.csv", data=b"model,score\n\xe9t\xe9,50\n"),
     Refused(InputError, r"latin1\.csv" + NOT_SCORES + r" .*utf-8")),
    ("scores-ragged-csv", None, P(_scores, name="ragged.csv", data="model,score\na,5\nb,6,7,8\n"),
     Refused(InputError, r"ragged\.csv" + NOT_SCORES + r" .*line 3")),
    ("scores-not-parquet", None, P(_scores, name="broken.parquet", data=b"model,score\na,50\n"),
     Refused(InputError, r"broken\.parquet" + NOT_SCORES)),
    ("scores-text-ids", None,
     P(_scores, name="ids.csv", data="model,score\n007,0.5\nNA,0.25\n", scale="fraction"),
     _scores_are({"007": 0.5, "NA": 0.25})),
    ("matrix-duplicate-header", None,
     P(_matrix, name="dup.csv", text="model,arc.1,arc.1\nm1,1,0\nm2,0,1\n"),
     Refused(InputError, r"dup\.csv: .*duplicate item ids: 'arc\.1'")),
    ("matrix-empty-header", None,
     P(_matrix, name="blank.csv", text="model,arc.1,\nm1,1,0\nm2,0,1\n"),
     Refused(InputError, r"blank\.csv: .*column.? 3 ha(s|ve) no name")),
    ("matrix-text-model-ids", None, _matrix_text_model_ids,
     Reads(lambda read: _by_id(read) == {"007": {"arc.1": 1.0}, "NA": {"arc.1": 0.0}},
           "models 007 and NA scoring 1 and 0 on arc.1")),
    ("matrix-parquet-meta-no-items", None,
     P(_parquet_meta, name="noitems.parquet", meta=b'{"format_version": 1, "models": []}'),
     Refused(InputError, r"noitems\.parquet: unreadable 'lmeval_microbench' metadata .*'items'")),
    ("matrix-parquet-meta-deep", None,
     P(_parquet_meta, name="deepmeta.parquet", meta=b"[" * DEEP_LEVELS),
     Refused(InputError, r"deepmeta\.parquet: unreadable 'lmeval_microbench' metadata: " + NESTED)),
    ("bundle-deep", BUNDLE, P(_bundle_text, text=lambda _: '{"name": ' + "[" * DEEP_LEVELS + "}"),
     Refused(BundleError, BUNDLE_JSON + NESTED)),
    ("bundle-surrogate", BUNDLE,
     P(_bundle_text, text=lambda doc: doc.replace('"toy-own"', '"toy-own\\ud800"', 1)),
     Refused(BundleError, BUNDLE_JSON + "text that is not valid Unicode")),
    ("bundle-items-not-parquet", BUNDLE, P(_bundle_items, kind="items not parquet (resealed)"),
     Refused(BundleError, r"fuzzbundle/items\.parquet: not a readable parquet file")),
    ("bundle-items-duplicate-row", BUNDLE,
     P(_bundle_items, kind="items with a duplicate row (resealed)"),
     Refused(BundleError, r"fuzzbundle/items\.parquet: duplicate item ids 'toy\.0'")),
    ("bundle-state-name-object", BUNDLE, P(_bundle_state, name="mean", field="estimator"),
     Refused(BundleError, BUNDLE_JSON + "estimator 'mean': state field 'estimator' must be a "
                                        "name, got {'fuzz': 'mean'}")),
    ("bundle-state-bad-irt", BUNDLE, P(_bundle_state, name="calibrated", field="a"),
     Refused(BundleError, BUNDLE_JSON + "estimator 'calibrated' has an unusable state")),
    ("joint-deep", JOINT_FILE, _joint_deep,
     Refused(InputError, r"deepjoint\.json: cannot read the joint estimator state \(" + NESTED)),
    ("joint-cv-mae-list", JOINT_FILE, P(_joint, field="cv_mae", change=lambda _: [0.1]),
     Refused(InputError, JOINT + "is malformed")),
    ("joint-huge-int", JOINT_FILE, P(_joint, field="bands.alpha.knots", change=lambda _: [10**400]),
     Refused(InputError, r"fuzzjoint\.json: cannot read the joint estimator state \(integer "
                         r"1000+\.* is too large for a number\)")),
    ("joint-text-weights", JOINT_FILE,
     P(_joint, field="subsets.alpha.weights", change=lambda w: ["x"] * len(w)),
     Refused(InputError, JOINT + r"is malformed \(could not convert string to float: 'x'\)")),
    ("joint-estimate-after-load", JOINT_FILE, P(_joint, field="head.coef", change=lambda c: c[:1]),
     Refused(InputError, JOINT + r"head\.coef has shape \(1, 3\), expected \(10, 3\)")),
    ("samples-huge-score", None, P(_samples_lines, lines=(DOC + ', "acc": 1' + "0" * 400 + "}",)),
     Refused(InputError, SAMPLES + r"integer 1000+\.* is too large for a number")),
    ("samples-deep", None,
     P(_samples_lines, lines=('{"doc_id": 0, "doc": ' + "[" * DEEP_LEVELS + "}",)),
     Refused(InputError, SAMPLES + NESTED)),
    ("samples-unhashable-doc-id", None,
     P(_samples_lines, lines=('{"doc_id": [0], "doc": {"id": "q0"}, "acc": 1}',)),
     Reads(lambda read: read.scores == {"q0": 1.0}, "scores {'q0': 1.0}")),
    ("samples-surrogate", None,
     P(_samples_lines, lines=('{"doc_id": 0, "doc": {"id": "q0", "text": "\\ud800"}, "acc": 1}',)),
     Refused(InputError, SAMPLES + "text that is not valid Unicode")),
    # both orders refused: a reader keeping the first or the last key would read them apart
    ("samples-duplicate-keys", None,
     P(_samples_lines, lines=(DOC + ', "acc": 1, "acc": 0}', DOC + ', "acc": 0, "acc": 1}')),
     Refused(InputError, SAMPLES + "key 'acc' appears twice in one JSON object")),
    ("results-deep", None, P(_results, payload="[" * DEEP_LEVELS),
     Refused(InputError, RESULTS + NESTED)),
    ("results-configs-text", None, P(_results, payload='{"configs": "fuzztask"}'),
     Refused(InputError, RESULTS + "'configs' is a str, expected an object")),
    ("results-config-bool", None, P(_results, payload='{"config": true}', model_id=True),
     Refused(InputError, RESULTS + "'config' is a bool, expected an object")),
    ("hook-results-versions-bool", BUNDLE, _hook_results_versions_bool,
     Refused(InputError, "run0/" + RESULTS + "'versions' is a bool, expected an object")),
    ("hook-unknown-bundle", BUNDLE, _hook_unknown_bundle,
     Refused(BundleError, r"run0/samples_microbench_toy_[^/]*\.jsonl: task 'microbench_toy': "
                          r"its documents belong to bundle 'no-such-bundle'")),
)  # fmt: skip
KNOWN_DEFECTS = len(KNOWN_DEFECTS_TABLE)
CASES["test_known_defect"] = KNOWN_DEFECTS
TOTAL_CASES = sum(CASES.values())


def judge(read: Read, expect: Refused | Reads) -> None:
    """Property 1 on one read (a clean failure naming the file), then the case's expectation."""
    call, names = read
    ok, found = read_clean(call, *names)
    if isinstance(expect, Reads):
        assert ok, f"refused a valid input ({expect.wanted} expected): {found}"
        assert expect.check(found), f"read {found!r}, expected {expect.wanted}"
        return
    assert not ok, f"accepted silently (expected {expect.kind.__name__}): read {found!r}"
    assert isinstance(found, expect.kind), f"{type(found).__name__}, not {expect.kind.__name__}"
    assert re.search(expect.pattern, str(found)), f"{str(found)!r} !~ {expect.pattern!r}"


@pytest.mark.parametrize(
    ("fixture", "build", "expect"),
    [pytest.param(*case, id=name) for name, *case in KNOWN_DEFECTS_TABLE],
)
def test_known_defect(
    fixture: str | None,
    build: Callable[..., list[Read]],
    expect: Refused | Reads,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    """Minimal reproductions of the fuzz findings: every read gives the expected refusal (class
    and message) or the expected values; never a silent read, a wrong value or a traceback."""
    reads = build(request.getfixturevalue(fixture), tmp_path) if fixture else build(tmp_path)
    assert reads
    for read in reads:
        judge(read, expect)


def test_case_count_is_documented() -> None:
    """fuzz_support's docstring and the README state TOTAL_CASES (keep them in sync)."""
    assert f"{TOTAL_CASES} generated cases" in (fuzz_support.__doc__ or "")
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert f"{TOTAL_CASES:,} generated and mutated inputs" in readme
