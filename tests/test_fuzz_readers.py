"""Property and fuzz tests over every reader (issue 8, "Beyond the list").

Readers: response matrices (``ResponseMatrix.read``, parquet and CSV), true scores
(``truth.read_scores``), bundle folders (``bundle.load_bundle`` / ``load_items``), joint
estimator files (``hook.load_joint``), lm-eval samples and results files
(``collect.read_samples_file`` / ``collect_samples`` / ``SamplesRun``) and the run reader of
the post-run reconstruction (``hook.reconstruct_runs``).

Properties:

1. *clean failure*: any mutation of a valid file (truncated, bytes flipped or inserted, lines
   dropped or repeated, JSON fields deleted, retyped, renamed, nested deeply, NaN/Infinity,
   files missing or extra) gives either a successful read or a
   :class:`~lmeval_microbench.errors.MicrobenchError` whose message names the file; never
   another exception type;
2. *order invariance*: reordering the lines of a samples file, the rows/columns of a matrix or
   score table, or the keys of a JSON object never changes the numbers read (compared by item
   id and model id);
3. *round trip*: a valid input reads back to what was written.

Every hypothesis test runs with ``derandomize=True`` (the same cases on every run) and a
bounded ``max_examples``; shrinking is off so that a failing property costs no more time than
a passing one. :data:`CASES` counts the cases of each test (hypothesis examples, or the
parameters of a plain test): 1412 generated cases in all (``TOTAL_CASES``).

Tests listed in :data:`FAILING_TODAY` are strict xfails (``reason="issue 8: ..."``): they fail
today because of reader defects being fixed (reproductions in ``out/fuzz_findings.md``, one
minimal case each in ``test_known_defect``). Delete a line there once its fix lands; a strict
xfail that passes fails the run, as a reminder. ``MICROBENCH_FUZZ_LOG=FILE`` records every
property-1 violation in FILE (JSON lines) instead of stopping at the first one.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import random
import shutil
import tempfile
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from lmeval_microbench._io import seal_json
from lmeval_microbench.build import build_bundle
from lmeval_microbench.bundle import ITEMS_FILE, load_bundle, load_items, save_bundle
from lmeval_microbench.collect import (
    SamplesRun,
    collect_samples,
    content_hash,
    read_samples_file,
    write_matrix,
)
from lmeval_microbench.errors import MicrobenchError
from lmeval_microbench.hook import load_joint, reconstruct_runs
from lmeval_microbench.joint import JointEstimator
from lmeval_microbench.reconstruct import bundle_estimator
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection.base import Subset
from lmeval_microbench.synthetic import random_item_params, simulate_responses
from lmeval_microbench.truth import align_target, read_scores

try:  # the checksum rules moved to bundle.integrity (schema 1.1)
    from lmeval_microbench.bundle.integrity import seal
except ImportError:  # pragma: no cover - older layout
    from lmeval_microbench.bundle.schema import seal  # type: ignore[attr-defined,no-redef]

# ---------------------------------------------------------------------------- case counts
N_MATRIX_ROUNDTRIP = 60
N_MATRIX_REORDER = 40
N_MATRIX_BYTES = 80
N_MATRIX_CELLS = 60
N_MATRIX_PARQUET_META = 60
N_SCORES_ROUNDTRIP = 40
N_SCORES_REORDER = 30
N_SCORES_BYTES = 80
N_BUNDLE_JSON = 100
N_BUNDLE_BYTES = 60
N_BUNDLE_ESTIMATE = 60
N_BUNDLE_REORDER = 20
N_JOINT_JSON = 80
N_JOINT_BYTES = 40
N_JOINT_ESTIMATE = 60
N_JOINT_REORDER = 15
N_SAMPLES_ROUNDTRIP = 50
N_SAMPLES_REORDER = 40
N_SAMPLES_BYTES = 80
N_SAMPLES_JSON = 80
N_RESULTS_JSON = 80
N_REAL_SAMPLES_REORDER = 10
N_REAL_SAMPLES_MUTATIONS = 40
N_HOOK_REORDER = 15
N_HOOK_MUTATIONS = 60
N_HOOK_REAL_REORDER = 5
N_HOOK_REAL_MUTATIONS = 20

BUNDLE_FILE_MUTATIONS = (
    "no bundle.json",
    "no items.parquet",
    "extra file",
    "bundle.json is a folder",
    "items.parquet is a folder",
    "empty bundle.json",
    "items without item_id column (resealed)",
    "items lacking a subset item (resealed)",
    "items with a duplicate row (resealed)",
    "items not parquet (resealed)",
    "checksums lists a missing file",
    "checksums lists a path outside the folder",
)

CASES = {
    "test_matrix_roundtrip": N_MATRIX_ROUNDTRIP,
    "test_matrix_reorder": N_MATRIX_REORDER,
    "test_matrix_byte_mutations": N_MATRIX_BYTES,
    "test_matrix_csv_cell_mutations": N_MATRIX_CELLS,
    "test_matrix_parquet_metadata_mutations": N_MATRIX_PARQUET_META,
    "test_scores_roundtrip": N_SCORES_ROUNDTRIP,
    "test_scores_reorder": N_SCORES_REORDER,
    "test_scores_byte_mutations": N_SCORES_BYTES,
    "test_bundle_roundtrip": 1,
    "test_bundle_json_mutations": N_BUNDLE_JSON,
    "test_bundle_byte_mutations": N_BUNDLE_BYTES,
    "test_bundle_file_mutations": len(BUNDLE_FILE_MUTATIONS),
    "test_bundle_estimator_after_load": N_BUNDLE_ESTIMATE,
    "test_bundle_reorder": N_BUNDLE_REORDER,
    "test_joint_roundtrip": 1,
    "test_joint_json_mutations": N_JOINT_JSON,
    "test_joint_byte_mutations": N_JOINT_BYTES,
    "test_joint_estimate_after_load": N_JOINT_ESTIMATE,
    "test_joint_reorder": N_JOINT_REORDER,
    "test_samples_roundtrip": N_SAMPLES_ROUNDTRIP,
    "test_samples_reorder": N_SAMPLES_REORDER,
    "test_samples_byte_mutations": N_SAMPLES_BYTES,
    "test_samples_json_mutations": N_SAMPLES_JSON,
    "test_results_json_mutations": N_RESULTS_JSON,
    "test_real_samples_roundtrip_and_reorder": N_REAL_SAMPLES_REORDER,
    "test_real_samples_mutations": N_REAL_SAMPLES_MUTATIONS,
    "test_hook_roundtrip": 1,
    "test_hook_reorder": N_HOOK_REORDER,
    "test_hook_mutations": N_HOOK_MUTATIONS,
    "test_hook_real_reorder": N_HOOK_REAL_REORDER,
    "test_hook_real_mutations": N_HOOK_REAL_MUTATIONS,
}
"""Cases per test; ``test_known_defect`` is added below, with its table."""

TS = "2024-01-01T00-00-00.000000"
SHARED_DATA = Path(
    os.environ.get(
        "MICROBENCH_SHARED_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    )
).resolve()


FAILING_TODAY: dict[str, str] = {
    # Test id -> what fails (reproductions in out/fuzz_findings.md). Each listed test is a
    # strict xfail: delete its line once the reader is fixed (a fixed one fails as XPASS).
}


def failing_today(test: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``test`` as a strict xfail while :data:`FAILING_TODAY` lists it."""
    reason = FAILING_TODAY.get(test.__name__)
    if reason is None:
        return test
    return pytest.mark.xfail(strict=True, reason=f"issue 8: {reason}")(test)


def failing_param(value: Any, test_id: str, param_id: str | None = None) -> Any:
    """``pytest.param`` of a parametrized test, a strict xfail while FAILING_TODAY lists it."""
    reason = FAILING_TODAY.get(test_id)
    marks = () if reason is None else pytest.mark.xfail(strict=True, reason=f"issue 8: {reason}")
    return pytest.param(value, id=param_id, marks=marks)


def fuzz_settings(n: int) -> settings:
    return settings(
        max_examples=n,
        derandomize=True,
        database=None,
        deadline=None,
        phases=(Phase.explicit, Phase.generate),
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )


# ---------------------------------------------------------------------------- helpers
@contextmanager
def case_dir() -> Iterator[Path]:
    """A fresh folder per generated case (hypothesis cannot use the function-scoped tmp_path)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-") as name:
        yield Path(name)


FUZZ_LOG = os.environ.get("MICROBENCH_FUZZ_LOG")
"""When set (a file path), property-1 violations are appended there as JSON lines instead of
failing the test, so that one run lists every distinct failure (exploration mode)."""


def _origin(exc: BaseException) -> str:
    """The innermost frame of the package that raised ``exc`` (else the innermost frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    inside = [f for f in frames if "lmeval_microbench" in f.filename] or frames
    frame = inside[-1]
    return f"{Path(frame.filename).name}:{frame.lineno} in {frame.name}"


def read_clean(call: Callable[[], Any], *names: str, case: Any = None) -> tuple[bool, Any]:
    """Property 1: ``(True, result)``, or ``(False, error)`` for a MicrobenchError naming a file.

    ``names`` are the acceptable file names (or paths): one must be in the message (no names:
    any message will do). Any other exception type fails the property; ``case`` describes the
    input in the failure message.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return True, call()
    except MicrobenchError as exc:
        if not names or any(name in str(exc) for name in names):
            return False, exc
        problem, error = f"{type(exc).__name__} does not name the file", exc
    except Exception as exc:
        problem, error = f"{type(exc).__name__} escaped instead of a MicrobenchError", exc
    if FUZZ_LOG:
        record = {
            "test": os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0],
            "problem": problem,
            "origin": _origin(error),
            "message": str(error)[:400],
            "case": repr(case)[:600],
        }
        with open(FUZZ_LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")
        return False, error
    raise AssertionError(
        f"{problem} ({' or '.join(names)}) at {_origin(error)}: {str(error)[:300]}\ncase: {case!r}"[
            :2000
        ]
    ) from error


def quiet(call: Callable[[], Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call()


def same_numbers(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


# ---------------------------------------------------------------------------- byte mutations
BYTE_OPS = (
    "truncate",
    "flip",
    "insert",
    "delete",
    "replace",
    "drop_line",
    "dup_line",
    "swap_lines",
    "empty",
)
TOKENS = (
    b'"',
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\n",
    b"\r\n",
    b"\x00",
    b"\xff",
    b"\xc3",
    b"NaN",
    b"Infinity",
    b"-",
    b"1e999",
    b"123456789012345678901234567890",
    b"\\ud800",
    b"null",
    b"true",
    b"PAR1",
)
byte_ops = st.lists(
    st.tuples(
        st.sampled_from(BYTE_OPS),
        st.integers(0, 2**32 - 1),
        st.one_of(st.sampled_from(TOKENS), st.binary(min_size=1, max_size=4)),
    ),
    min_size=1,
    max_size=3,
)


def mutate_bytes(data: bytes, ops: list[tuple[str, int, bytes]]) -> bytes:
    """Apply byte-level mutations; positions wrap around the current length."""
    for op, pos, blob in ops:
        n = len(data)
        at = pos % (n + 1)
        if op == "truncate":
            data = data[:at]
        elif op == "flip" and n:
            k = pos % n
            data = data[:k] + bytes([data[k] ^ (blob[0] or 0x80)]) + data[k + 1 :]
        elif op == "insert":
            data = data[:at] + blob + data[at:]
        elif op == "delete":
            data = data[:at] + data[at + 1 + blob[0] % 64 :]
        elif op == "replace":
            data = data[:at] + blob + data[at + len(blob) :]
        elif op == "empty":
            data = b""
        elif op in ("drop_line", "dup_line", "swap_lines"):
            lines = data.split(b"\n")
            k = pos % len(lines)
            if op == "drop_line":
                del lines[k]
            elif op == "dup_line":
                lines.insert(k, lines[k])
            else:
                j = (pos // 7) % len(lines)
                lines[k], lines[j] = lines[j], lines[k]
            data = b"\n".join(lines)
    return data


# ---------------------------------------------------------------------------- JSON mutations
DEEP = "\x00fuzz-deep\x00"
SURROGATE = "\x00fuzz-surrogate\x00"
DEEP_LEVELS = 100_000
SEALED_DEEP_LEVELS = 300
REPLACEMENTS: tuple[Any, ...] = (
    None,
    True,
    False,
    0,
    -1,
    2,
    0.5,
    -0.0,
    1e308,
    10**400,
    "",
    " ",
    "x",
    "1",
    [],
    {},
    [None],
    {"": None},
    [1, 2],
    math.nan,
    math.inf,
    -math.inf,
    DEEP,
    SURROGATE,
)
JSON_OPS = ("delete", "retype", "nest", "add_key", "rename_key")
json_ops = st.lists(
    st.tuples(
        st.sampled_from(JSON_OPS),
        st.integers(0, 2**32 - 1),
        st.integers(0, len(REPLACEMENTS) - 1),
    ),
    min_size=1,
    max_size=3,
)


def node_paths(tree: Any, path: tuple = ()) -> Iterator[tuple]:
    yield path
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from node_paths(value, (*path, key))
    elif isinstance(tree, list):
        for k, value in enumerate(tree):
            yield from node_paths(value, (*path, k))


def get_at(tree: Any, path: tuple) -> Any:
    for part in path:
        tree = tree[part]
    return tree


def set_at(tree: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    get_at(tree, path[:-1])[path[-1]] = value
    return tree


def _pick(paths: list[tuple], tree: Any, pos: int) -> tuple | None:
    """Every other draw picks a field of an object (structure), the others any node."""
    if pos % 2 == 0:
        keyed = [p for p in paths if p and isinstance(get_at(tree, p[:-1]), dict)]
        if keyed:
            return keyed[(pos // 2) % len(keyed)]
    return paths[(pos // 2) % len(paths)] if paths else None


def mutate_json(tree: Any, ops: list[tuple[str, int, int]]) -> Any:
    """Apply field-level mutations to a parsed JSON document (a deep copy)."""
    tree = copy.deepcopy(tree)
    for op, pos, r in ops:
        value = copy.deepcopy(REPLACEMENTS[r])
        paths = list(node_paths(tree))
        if op == "delete":
            path = _pick([p for p in paths if p], tree, pos)
            if path is not None:
                del get_at(tree, path[:-1])[path[-1]]
        elif op == "retype":
            tree = set_at(tree, _pick(paths, tree, pos), value)
        elif op == "nest":
            path = _pick(paths, tree, pos)
            node = get_at(tree, path)
            for _ in range(1 + r % 4):
                node = [node] if r % 2 else {"fuzz": node}
            tree = set_at(tree, path, node)
        elif op == "add_key":
            objects = [p for p in paths if isinstance(get_at(tree, p), dict)]
            if objects:
                get_at(tree, objects[pos % len(objects)])[f"fuzz_{r}"] = value
        elif op == "rename_key":
            keyed = [p for p in paths if p and isinstance(get_at(tree, p[:-1]), dict)]
            if keyed:
                path = keyed[pos % len(keyed)]
                parent = get_at(tree, path[:-1])
                parent[f"{path[-1]}_fuzz"] = parent.pop(path[-1])
    return tree


def targeted_ops(fields: tuple[str, ...]) -> st.SearchStrategy[list[tuple[str, str, int]]]:
    """Mutations aimed at the fields a reader uses (dotted paths; numbers index arrays), so
    that a bounded number of cases reaches them; applied after the generic ones."""
    return st.lists(
        st.tuples(
            st.sampled_from(("retype", "retype", "delete")),
            st.sampled_from(fields),
            st.integers(0, len(REPLACEMENTS) - 1),
        ),
        max_size=2,
    )


def mutate_fields(tree: Any, ops: list[tuple[str, str, int]]) -> Any:
    """Apply :func:`targeted_ops` mutations (a deep copy); paths that do not exist are skipped."""
    tree = copy.deepcopy(tree)
    for op, dotted, r in ops:
        path = tuple(int(p) if p.isdigit() else p for p in dotted.split("."))
        try:
            parent = get_at(tree, path[:-1])
            parent[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue
        if op == "delete":
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(REPLACEMENTS[r])
    return tree


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
BUNDLE_FIELDS = (
    "schema_version",
    "name",
    "benchmark",
    "dataset",
    "metric",
    "metric.name",
    "metric.scale",
    "subset",
    "subset.method",
    "subset.seed",
    "subset.info",
    "subset.items",
    "subset.items.0",
    "subset.items.0.item_id",
    "subset.items.0.weight",
    "subset.items.0.content_hash",
    "irt",
    "irt.item_ids",
    "irt.a",
    "irt.d",
    "irt.model",
    "estimators",
    "estimators.0",
    "estimators.0.name",
    "estimators.0.state",
    "default_estimator",
    "provenance",
    "provenance.n_source_items",
    "provenance.source_sha256",
    "provenance.created",
    "reliability",
    "checksums",
    "checksums.files",
    "checksums.algorithm",
    "checksums.payload",
)
STATE_FIELDS = (
    "estimator",
    "state_version",
    "params",
    "params.calibration",
    "params.interval",
    "params.n_folds",
    "params.irt_model",
    "item_ids",
    "item_ids.0",
    "weights",
    "weights.0",
    "features",
    "features.params",
    "features.params.a",
    "features.params.item_ids",
    "features.params.model",
    "head",
    "head.slope",
    "head.intercept",
    "band",
    "band.mode",
    "band.knots",
    "band.scales",
    "band.residuals",
    "n_source",
    "cv_mae",
)
JOINT_FIELDS = (
    "estimator",
    "state_version",
    "params",
    "params.features",
    "params.base_estimator",
    "params.n_folds",
    "params.interval",
    "benchmarks",
    "benchmarks.0",
    "subsets",
    "subsets.alpha",
    "subsets.alpha.item_ids",
    "subsets.alpha.weights",
    "base",
    "base.alpha",
    "base.alpha.head",
    "base.alpha.weights",
    "base.alpha.item_ids",
    "base.alpha.band",
    "mirt",
    "head",
    "head.coef",
    "head.center",
    "head.scale",
    "head.intercept",
    "bands",
    "bands.average",
    "bands.alpha.knots",
    "bands.alpha.mode",
    "n_source",
    "cv_mae",
)
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


def dump_json(tree: Any, *, indent: int | None = None) -> str:
    """JSON text of a mutated tree: NaN/Infinity as Python writes them, placeholders expanded."""
    text = json.dumps(tree, ensure_ascii=False, allow_nan=True, indent=indent)
    text = text.replace(json.dumps(DEEP), "[" * DEEP_LEVELS + "]" * DEEP_LEVELS)
    return text.replace(json.dumps(SURROGATE), '"\\ud800"')


def materialise(tree: Any) -> Any:
    """Placeholders as real values (a moderately deep list, a lone surrogate)."""
    if tree == DEEP:
        node: Any = []
        for _ in range(SEALED_DEEP_LEVELS):
            node = [node]
        return node
    if tree == SURROGATE:
        return "\ud800"
    if isinstance(tree, dict):
        return {k: materialise(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [materialise(v) for v in tree]
    return tree


def shuffle_keys(tree: Any, rnd: random.Random) -> Any:
    """The same document with the keys of every object in another order."""
    if isinstance(tree, dict):
        keys = list(tree)
        rnd.shuffle(keys)
        return {k: shuffle_keys(tree[k], rnd) for k in keys}
    if isinstance(tree, list):
        return [shuffle_keys(v, rnd) for v in tree]
    return tree


# ---------------------------------------------------------------------------- id strategies
safe_ids = st.from_regex(r"[a-z][a-z0-9_/-]{0,7}(\.[0-9]{1,3})?", fullmatch=True)
"""Ids every format can hold unchanged (for the reorder properties)."""

tricky_ids = st.one_of(
    safe_ids,
    st.from_regex(r"[0-9]{1,4}", fullmatch=True),
    st.from_regex(r"[0-9]\.[0-9]{1,2}", fullmatch=True),
    st.sampled_from(["NA", "None", "null", "N/A", "TRUE", "model", "1e3", "0x1f", "-1", "+1"]),
    st.text(
        alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
        min_size=1,
        max_size=6,
    ),
)
"""Ids a ``ResponseMatrix`` accepts (no blank, no "nan") that text formats may misread."""


def valid_id(text: str) -> bool:
    return text.strip() != "" and text != "nan"


score_values = st.sampled_from([0.0, 1.0, 0.5, 0.25, 1.0 / 3.0, 0.1, math.nan])


@st.composite
def matrices(draw: st.DrawFn, ids: st.SearchStrategy[str] = safe_ids) -> ResponseMatrix:
    ok_ids = ids.filter(valid_id)
    models = draw(st.lists(ok_ids, min_size=1, max_size=5, unique=True))
    items = draw(st.lists(ok_ids, min_size=1, max_size=6, unique=True))
    values = draw(
        st.lists(
            st.lists(score_values, min_size=len(items), max_size=len(items)),
            min_size=len(models),
            max_size=len(models),
        )
    )
    return ResponseMatrix(np.array(values, dtype=np.float64), models, items, source="fuzz")


def aligned(read: ResponseMatrix, original: ResponseMatrix) -> np.ndarray:
    """The values of ``read`` in the row and column order of ``original`` (joined by id)."""
    assert sorted(read.model_ids) == sorted(original.model_ids), (
        read.model_ids,
        original.model_ids,
    )
    assert sorted(read.item_ids) == sorted(original.item_ids), (read.item_ids, original.item_ids)
    return read.select_models(original.model_ids).select_items(original.item_ids).values


# ============================================================================ matrices
@fuzz_settings(N_MATRIX_ROUNDTRIP)
@given(matrix=matrices(tricky_ids), suffix=st.sampled_from([".csv", ".parquet"]))
@failing_today
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
@failing_today
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
@failing_today
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
@failing_today
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
@failing_today
def test_scores_byte_mutations(frame: pd.DataFrame, suffix: str, ops: list) -> None:
    """Property 1 for ``truth.read_scores``."""
    with case_dir() as tmp:
        path = tmp / f"fuzzscores{suffix}"
        write_scores(frame.assign(score=frame["score"] * 100), path)
        path.write_bytes(mutate_bytes(path.read_bytes(), ops))
        read_clean(lambda: read_scores(path, "score"), path.name, case=(suffix, ops))


# ============================================================================ bundles
def _docs_for(item_ids: list[str], bundle_name: str) -> dict[str, dict[str, Any]]:
    return {
        item: {"item_id": item, "bundle": bundle_name, "question": f"What is {item}?"}
        for item in item_ids
    }


@pytest.fixture(scope="module")
def bundle_template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A valid bundle folder (bundle.json + items.parquet) built on a small synthetic matrix."""
    params = random_item_params(20, seed=3)
    matrix, _ = simulate_responses(params, 60, seed=4)
    ids = [f"toy.{k}" for k in range(matrix.n_items)]
    matrix = ResponseMatrix(matrix.values, matrix.model_ids, ids, source="synthetic")
    docs = _docs_for(ids, "toy-own")
    matrix = matrix.with_content_hashes([content_hash(docs[i]) for i in ids])
    source, target = align_target(matrix, None)
    bundle = quiet(
        lambda: build_bundle(
            source,
            target,
            name="toy-own",
            benchmark="toy",
            method="random",
            budget=6,
            estimators=["mean", "calibrated"],
            default_estimator="calibrated",
        )
    )
    items = pd.DataFrame(
        {
            "item_id": list(bundle.item_ids),
            "question": [docs[i]["question"] for i in bundle.item_ids],
            "choices": [["a", "b"] for _ in bundle.item_ids],
        }
    )
    folder = save_bundle(bundle, tmp_path_factory.mktemp("template") / "toy-own", items=items)
    scores = {item: float(k % 2) for k, item in enumerate(bundle.item_ids)}
    estimate = bundle_estimator(bundle).estimate(scores)
    return {
        "bundle": bundle,
        "folder": folder,
        "docs": docs,
        "items": items,
        "scores": scores,
        "estimate": estimate,
        "document": json.loads((folder / "bundle.json").read_text(encoding="utf-8")),
    }


def copy_bundle(template: dict[str, Any], tmp: Path) -> Path:
    folder = tmp / "fuzzbundle"
    shutil.copytree(template["folder"], folder)
    return folder


def write_bundle_document(folder: Path, document: Any, *, reseal: bool) -> None:
    """Write a (mutated) bundle.json; ``reseal`` recomputes its checksums so the schema checks
    are reached instead of the checksum check."""
    path = folder / "bundle.json"
    if reseal and isinstance(document, dict):
        payload = materialise({k: v for k, v in document.items() if k != "checksums"})
        files = (document.get("checksums") or {}) if isinstance(document, dict) else {}
        files = files.get("files", {}) if isinstance(files, dict) else {}
        try:
            sealed = seal(payload, files if isinstance(files, dict) else {})
        except (ValueError, TypeError, RecursionError):
            sealed = {**payload, "checksums": document.get("checksums")}
        path.write_text(
            json.dumps(sealed, ensure_ascii=True, allow_nan=True, indent=1), encoding="utf-8"
        )
    else:
        path.write_text(dump_json(document, indent=1), encoding="utf-8")


def reseal_files(folder: Path) -> None:
    """Recompute bundle.json's checksums after a side file changed (a deliberate re-seal)."""
    path = folder / "bundle.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    files = {}
    for name in document["checksums"]["files"]:
        side = folder / name
        if side.is_file():
            files[name] = hashlib.sha256(side.read_bytes()).hexdigest()
        else:
            files[name] = document["checksums"]["files"][name]
    payload = {k: v for k, v in document.items() if k != "checksums"}
    path.write_text(json.dumps(seal(payload, files), indent=1), encoding="utf-8")


def load_bundle_and_items(folder: Path) -> tuple[Any, Any]:
    return load_bundle(folder), load_items(folder)


def test_bundle_roundtrip(bundle_template: dict[str, Any]) -> None:
    """Property 3: a saved bundle and its items load back equal."""
    folder = bundle_template["folder"]
    ok, (bundle, items) = read_clean(lambda: load_bundle_and_items(folder), folder.name)
    assert ok
    assert bundle == bundle_template["bundle"]
    expected = bundle_template["items"].set_index("item_id")
    assert list(items.index) == list(expected.index)
    assert items["question"].tolist() == expected["question"].tolist()


@fuzz_settings(N_BUNDLE_JSON)
@given(
    ops=json_ops,
    fields=targeted_ops(BUNDLE_FIELDS),
    reseal=st.sampled_from([True, True, True, False]),
)
@failing_today
def test_bundle_json_mutations(
    bundle_template: dict[str, Any], ops: list, fields: list, reseal: bool
) -> None:
    """Property 1 for ``load_bundle``/``load_items`` on field-level mutations of bundle.json
    (mostly re-sealed, so that the schema checks rather than the checksum are exercised)."""
    with case_dir() as tmp:
        folder = copy_bundle(bundle_template, tmp)
        document = mutate_fields(mutate_json(bundle_template["document"], ops), fields)
        write_bundle_document(folder, document, reseal=reseal)
        read_clean(lambda: load_bundle_and_items(folder), folder.name, case=(ops, fields, reseal))


@fuzz_settings(N_BUNDLE_BYTES)
@given(
    ops=byte_ops,
    target=st.sampled_from(["bundle.json", ITEMS_FILE]),
    reseal=st.booleans(),
)
@failing_today
def test_bundle_byte_mutations(
    bundle_template: dict[str, Any], ops: list, target: str, reseal: bool
) -> None:
    """Property 1 for byte-level mutations of bundle.json or of items.parquet (the latter
    optionally re-sealed: a checksum that matches a damaged file)."""
    with case_dir() as tmp:
        folder = copy_bundle(bundle_template, tmp)
        path = folder / target
        path.write_bytes(mutate_bytes(path.read_bytes(), ops))
        if reseal and target == ITEMS_FILE:
            reseal_files(folder)
        read_clean(lambda: load_bundle_and_items(folder), folder.name, case=(target, reseal, ops))


def _mutate_bundle_files(folder: Path, kind: str, items: pd.DataFrame) -> None:
    bundle_json, items_path = folder / "bundle.json", folder / ITEMS_FILE
    if kind == "no bundle.json":
        bundle_json.unlink()
    elif kind == "no items.parquet":
        items_path.unlink()
    elif kind == "extra file":
        (folder / "README.md").write_text("# extra\n")
        (folder / "stray.parquet").write_bytes(b"PAR1")
    elif kind == "bundle.json is a folder":
        bundle_json.unlink()
        bundle_json.mkdir()
    elif kind == "items.parquet is a folder":
        items_path.unlink()
        items_path.mkdir()
    elif kind == "empty bundle.json":
        bundle_json.write_bytes(b"")
    elif kind.startswith("items without item_id"):
        items.drop(columns=["item_id"]).to_parquet(items_path, index=False)
        reseal_files(folder)
    elif kind.startswith("items lacking"):
        items.iloc[1:].to_parquet(items_path, index=False)
        reseal_files(folder)
    elif kind.startswith("items with a duplicate"):
        pd.concat([items, items.iloc[:1]]).to_parquet(items_path, index=False)
        reseal_files(folder)
    elif kind.startswith("items not parquet"):
        items_path.write_bytes(b"item_id,question\ntoy.1,q\n")
        reseal_files(folder)
    elif kind == "checksums lists a missing file":
        document = json.loads(bundle_json.read_text(encoding="utf-8"))
        document["checksums"]["files"]["gone.parquet"] = "0" * 64
        bundle_json.write_text(json.dumps(document), encoding="utf-8")
    elif kind == "checksums lists a path outside the folder":
        document = json.loads(bundle_json.read_text(encoding="utf-8"))
        document["checksums"]["files"]["../escape.parquet"] = "0" * 64
        bundle_json.write_text(json.dumps(document), encoding="utf-8")


@pytest.mark.parametrize(
    "kind",
    [failing_param(kind, f"test_bundle_file_mutations[{kind}]") for kind in BUNDLE_FILE_MUTATIONS],
)
def test_bundle_file_mutations(bundle_template: dict[str, Any], tmp_path: Path, kind: str) -> None:
    """Property 1 for missing, extra, mistyped and re-sealed side files of a bundle folder."""
    folder = copy_bundle(bundle_template, tmp_path)
    _mutate_bundle_files(folder, kind, bundle_template["items"])
    ok, found = read_clean(lambda: load_bundle_and_items(folder), folder.name, case=kind)
    if ok and kind == "items with a duplicate row (resealed)":
        assert not found[1].index.has_duplicates, "a duplicate item row was returned silently"


@fuzz_settings(N_BUNDLE_ESTIMATE)
@given(ops=json_ops, fields=targeted_ops(STATE_FIELDS))
@failing_today
def test_bundle_estimator_after_load(
    bundle_template: dict[str, Any], ops: list, fields: list
) -> None:
    """A re-sealed bundle whose default estimator's state is mutated: loading it and estimating
    gives a MicrobenchError or an estimate in [0, 1] (the state is opaque to ``load_bundle``,
    so errors from the estimator need not name the file)."""
    document = copy.deepcopy(bundle_template["document"])
    spec = next(e for e in document["estimators"] if e["name"] == document["default_estimator"])
    spec["state"] = mutate_fields(mutate_json(spec["state"], ops), fields)
    with case_dir() as tmp:
        folder = copy_bundle(bundle_template, tmp)
        write_bundle_document(folder, document, reseal=True)
        ok, bundle = read_clean(lambda: load_bundle(folder), folder.name, case=(ops, fields))
        if not ok:
            return
        ok, estimate = read_clean(
            lambda: bundle_estimator(bundle).estimate(bundle_template["scores"]),
            case=("estimate after load", ops, fields),
        )
        if ok:
            assert 0.0 <= estimate.value <= 1.0 or math.isnan(estimate.value), estimate


@fuzz_settings(N_BUNDLE_REORDER)
@given(rnd=st.randoms(use_true_random=False))
def test_bundle_reorder(bundle_template: dict[str, Any], rnd: random.Random) -> None:
    """Property 2: bundle.json with its object keys in another order (no re-seal needed: the
    checksum is over canonical JSON) and items.parquet with its rows shuffled (re-sealed) load
    the same bundle, the same items by id and the same estimate."""
    with case_dir() as tmp:
        folder = copy_bundle(bundle_template, tmp)
        document = shuffle_keys(bundle_template["document"], rnd)
        (folder / "bundle.json").write_text(json.dumps(document, indent=1), encoding="utf-8")
        items = bundle_template["items"]
        rows = list(range(len(items)))
        rnd.shuffle(rows)
        items.iloc[rows].to_parquet(folder / ITEMS_FILE, index=False)
        reseal_files(folder)
        ok, (bundle, loaded_items) = read_clean(lambda: load_bundle_and_items(folder), folder.name)
        assert ok
        assert bundle == bundle_template["bundle"]
        assert list(loaded_items.index) == list(bundle.item_ids)
        expected = items.set_index("item_id").loc[list(bundle.item_ids), "question"]
        assert loaded_items["question"].tolist() == expected.tolist()
        estimate = quiet(lambda: bundle_estimator(bundle).estimate(bundle_template["scores"]))
        expected = bundle_template["estimate"]
        assert (estimate.value, estimate.lower, estimate.upper) == (
            expected.value,
            expected.lower,
            expected.upper,
        )


# ============================================================================ joint files
@pytest.fixture(scope="module")
def joint_template() -> dict[str, Any]:
    """A fitted two-benchmark joint estimator, its JSON state and a model's scores."""
    rng = np.random.default_rng(0)
    n = 60
    models = [f"org/m{k}" for k in range(n)]
    general = rng.normal(size=n)
    sources, targets, subsets = {}, {}, {}
    for b in ("alpha", "beta"):
        ids = [f"{b}.{k}" for k in range(12)]
        theta = 0.8 * general + 0.6 * rng.normal(size=n)
        p = 1 / (1 + np.exp(-(theta[:, None] - rng.normal(size=12)[None])))
        values = (rng.random(p.shape) < p).astype(float)
        sources[b] = ResponseMatrix(values, models, ids, source=f"<{b}>")
        targets[b] = p.mean(axis=1)
        subsets[b] = Subset(tuple(ids[:4]), np.full(4, 0.25), "random")
    joint = quiet(lambda: JointEstimator(base_estimator="ridge").fit(sources, subsets, targets))
    scores = {i: float(k % 2) for k, i in enumerate(joint.subset_item_ids)}
    state = json.loads(json.dumps(seal_json(joint.state_dict())))
    return {
        "joint": joint,
        "state": state,
        "scores": scores,
        "expected": joint_numbers(joint, scores),
    }


def resealed(tree: Any) -> Any:
    """A mutated joint state sealed again, so that the mutation reaches the checks behind the
    checksum (an unsealed or stale one is refused before them)."""
    if not isinstance(tree, dict):
        return tree
    try:
        return seal_json(tree)
    except (TypeError, ValueError, UnicodeEncodeError):
        return tree


def joint_numbers(joint: Any, scores: dict[str, float]) -> dict[str, tuple[float, float, float]]:
    found = quiet(lambda: joint.estimate(scores))
    return {out: (e.value, e.lower, e.upper) for out, e in found.items()}


def test_joint_roundtrip(joint_template: dict[str, Any], tmp_path: Path) -> None:
    """Property 3: a joint state written as JSON loads back to the same estimates."""
    path = tmp_path / "joint.json"
    path.write_text(json.dumps(joint_template["state"], indent=2), encoding="utf-8")
    ok, joint = read_clean(lambda: load_joint(path), path.name)
    assert ok, joint
    assert joint_numbers(joint, joint_template["scores"]) == joint_template["expected"]


@fuzz_settings(N_JOINT_JSON)
@given(ops=json_ops, fields=targeted_ops(JOINT_FIELDS))
@failing_today
def test_joint_json_mutations(joint_template: dict[str, Any], ops: list, fields: list) -> None:
    """Property 1 for ``hook.load_joint`` on field-level mutations of joint.json."""
    with case_dir() as tmp:
        path = tmp / "fuzzjoint.json"
        tree = resealed(mutate_fields(mutate_json(joint_template["state"], ops), fields))
        path.write_text(dump_json(tree), encoding="utf-8")
        read_clean(lambda: load_joint(path), path.name, case=(ops, fields))


@fuzz_settings(N_JOINT_BYTES)
@given(ops=byte_ops)
def test_joint_byte_mutations(joint_template: dict[str, Any], ops: list) -> None:
    """Property 1 for ``hook.load_joint`` on byte-level mutations of joint.json."""
    with case_dir() as tmp:
        path = tmp / "fuzzjoint.json"
        data = json.dumps(joint_template["state"], indent=1).encode()
        path.write_bytes(mutate_bytes(data, ops))
        read_clean(lambda: load_joint(path), path.name, case=ops)


@fuzz_settings(N_JOINT_ESTIMATE)
@given(ops=json_ops, fields=targeted_ops(JOINT_FIELDS))
@failing_today
def test_joint_estimate_after_load(joint_template: dict[str, Any], ops: list, fields: list) -> None:
    """A mutated joint.json that loads must estimate cleanly: a MicrobenchError, or numbers
    with lower <= value <= upper in [0, 1]. A state that loads but crashes later is a reader
    that did not check what it read."""
    with case_dir() as tmp:
        path = tmp / "fuzzjoint.json"
        tree = resealed(mutate_fields(mutate_json(joint_template["state"], ops), fields))
        path.write_text(dump_json(tree), encoding="utf-8")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                joint = load_joint(path)
        except Exception:
            return  # test_joint_json_mutations judges the load itself
        ok, numbers = read_clean(
            lambda: joint_numbers(joint, joint_template["scores"]),
            case=("estimate after load", ops, fields),
        )
        for out, (value, lower, upper) in (numbers if ok else {}).items():
            assert 0.0 <= lower <= value <= upper <= 1.0, (out, value, lower, upper)


@fuzz_settings(N_JOINT_REORDER)
@given(rnd=st.randoms(use_true_random=False))
def test_joint_reorder(joint_template: dict[str, Any], rnd: random.Random) -> None:
    """Property 2: joint.json with the keys of every object in another order (and the scores
    mapping in another order) gives the same estimates."""
    with case_dir() as tmp:
        path = tmp / "joint.json"
        shuffled = shuffle_keys(joint_template["state"], rnd)
        path.write_text(json.dumps(shuffled), encoding="utf-8")
        ok, joint = read_clean(lambda: load_joint(path), path.name)
        assert ok, joint
        scores = shuffle_keys(joint_template["scores"], rnd)
        assert joint_numbers(joint, scores) == joint_template["expected"]


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
@failing_today
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
@failing_today
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
@failing_today
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
@failing_today
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
@failing_today
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
@failing_today
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


# ============================================================================ known defects
# One minimal reproduction per defect the fuzz tests found (out/fuzz_findings.md). Each
# asserts the property; those that fail today carry a strict xfail naming the issue.


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
    [
        failing_param(check, f"test_known_defect[{name}]", name)
        for name, check in KNOWN_DEFECTS_TABLE
    ],
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
    """The module docstring states TOTAL_CASES (keep it in sync when a count changes)."""
    assert f"{TOTAL_CASES} generated cases" in (__doc__ or "")
