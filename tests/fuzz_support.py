"""Shared machinery of the property and fuzz tests over every reader (issue 8, "Beyond the list").

The tests are split by reader: ``test_fuzz_matrices.py`` (response matrices and true scores,
plus the known-defect reproductions and the case-count check), ``test_fuzz_bundles.py`` (bundle
folders, joint estimator files), ``test_fuzz_runs.py`` (lm-eval samples and results files,
the run reader of the post-run reconstruction), ``test_fuzz_logs.py`` (adaptive step logs
read for ``--resume``) and ``test_fuzz_rank_curve.py`` (``microbench rank``'s model list,
score table and report; ``microbench curve``'s checkpoint folders and report). This module
holds what they share: case counts, settings, helpers, mutations, strategies and the
``bundle_template`` fixture.

Readers: response matrices (``ResponseMatrix.read``, parquet and CSV), true scores
(``truth.read_scores``), bundle folders (``bundle.load_bundle`` / ``load_items``), joint
estimator files (``runs.load_joint``), lm-eval samples and results files
(``collect.read_samples_file`` / ``collect_samples`` / ``SamplesRun``), the run reader of
the post-run reconstruction (``runs.reconstruct_runs``), the ``--model-args-file`` of
``microbench rank`` (``cli.rank.read_model_args``), the checkpoint runs of ``microbench curve``
(``curve.reader.read_runs`` via ``curve.trace_runs``) and the reports both write
(``ranking.json``, ``curve.json``: strict JSON, read back with :func:`strict_load`).

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
parameters of a plain test): 2028 generated cases in all (``TOTAL_CASES``, summed in
``test_fuzz_matrices.py``, whose ``test_case_count_is_documented`` checks this sentence).

A property-1 violation always fails its test, with the input that broke it in the message.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
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
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from lmeval_microbench.build import build_bundle
from lmeval_microbench.bundle import save_bundle
from lmeval_microbench.collect import (
    content_hash,
)
from lmeval_microbench.errors import MicrobenchError
from lmeval_microbench.reconstruct import bundle_estimator
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.synthetic import random_item_params, simulate_responses
from lmeval_microbench.truth import align_target

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
N_LOG_BYTES = 60
N_LOG_JSON = 80
N_MODEL_ARGS_ROUNDTRIP = 60
N_MODEL_ARGS_BYTES = 80
N_MODEL_ARGS_FILES = 16  # the table of test_fuzz_rank_curve.py, checked there
N_RANK_SCORES = 60
N_RANK_SCORES_REORDER = 15
N_RANK_OUTPUTS = 30
N_CURVE_REORDER = 20
N_CURVE_BYTES = 60
N_CURVE_JSON = 80
N_CURVE_FOLDERS = 18  # the table of test_fuzz_rank_curve.py, checked there
N_CURVE_STEPS = 30

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

RANK_CURVE_REGRESSIONS = (
    "test_model_args_file_errors_name_the_file_and_lines",
    "test_ranking_json_is_strict_when_every_model_scores_the_same",
    "test_rank_number_lists_are_one_line_errors",
    "test_curve_step_that_is_not_finite_names_the_run",
)
"""The plain regression tests of ``test_fuzz_rank_curve.py`` (one case each)."""

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
    "test_a_valid_log_resumes_to_its_answers": 1,
    "test_an_impossible_score_names_the_log_and_the_step": 1,
    "test_log_byte_mutations": N_LOG_BYTES,
    "test_log_json_mutations": N_LOG_JSON,
    "test_model_args_roundtrip_and_reorder": N_MODEL_ARGS_ROUNDTRIP,
    "test_model_args_byte_mutations": N_MODEL_ARGS_BYTES,
    "test_model_args_file_mutations": N_MODEL_ARGS_FILES,
    "test_rank_score_mutations": N_RANK_SCORES,
    "test_rank_scores_reorder": N_RANK_SCORES_REORDER,
    "test_rank_outputs": N_RANK_OUTPUTS,
    "test_curve_roundtrip": 1,
    "test_curve_reorder": N_CURVE_REORDER,
    "test_curve_byte_mutations": N_CURVE_BYTES,
    "test_curve_json_mutations": N_CURVE_JSON,
    "test_curve_folder_mutations": N_CURVE_FOLDERS,
    "test_curve_step_rules": N_CURVE_STEPS,
    **dict.fromkeys(RANK_CURVE_REGRESSIONS, 1),
}
"""Cases per test; ``test_known_defect`` is added in ``test_fuzz_matrices.py``, with its table."""

TS = "2024-01-01T00-00-00.000000"
SHARED_DATA = Path(
    os.environ.get(
        "MICROBENCH_SHARED_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    )
).resolve()


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
    raise AssertionError(
        f"{problem} ({' or '.join(names)}) at {_origin(error)}: {str(error)[:300]}\ncase: {case!r}"[
            :2000
        ]
    ) from error


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"not strict JSON: {name}")


def strict_load(path: Path) -> Any:
    """A written JSON file read as strict readers do: NaN and Infinity refused."""
    return json.loads(path.read_text(encoding="utf-8"), parse_constant=_refuse_constant)


def quiet(call: Callable[[], Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call()


def same_numbers(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


# ---------------------------------------------------------------------------- byte mutations
BYTE_OPS = ("truncate", "flip", "insert", "delete", "replace", "drop_line", "dup_line",
            "swap_lines", "empty")  # fmt: skip
TOKENS = (b'"', b"{", b"}", b"[", b"]", b",", b":", b"\n", b"\r\n", b"\x00", b"\xff", b"\xc3",
          b"NaN", b"Infinity", b"-", b"1e999", b"123456789012345678901234567890", b"\\ud800",
          b"null", b"true", b"PAR1")  # fmt: skip
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
REPLACEMENTS: tuple[Any, ...] = (None, True, False, 0, -1, 2, 0.5, -0.0, 1e308, 10**400, "",
                                 " ", "x", "1", [], {}, [None], {"": None}, [1, 2], math.nan,
                                 math.inf, -math.inf, DEEP, SURROGATE)  # fmt: skip
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
