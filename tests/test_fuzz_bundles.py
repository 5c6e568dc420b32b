"""Property and fuzz tests of the bundle-folder and joint-estimator-file readers (issue 8).

The properties, case counts and shared machinery are in ``fuzz_support``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import random
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lmeval_microbench._io import seal_json
from lmeval_microbench.bundle import ITEMS_FILE, load_bundle, load_items
from lmeval_microbench.estimators.joint import JointEstimator
from lmeval_microbench.reconstruct import bundle_estimator
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.runs import load_joint
from lmeval_microbench.selection.base import Subset

try:  # the checksum rules moved to bundle.integrity (schema 1.1)
    from lmeval_microbench.bundle.integrity import seal
except ImportError:  # pragma: no cover - older layout
    from lmeval_microbench.bundle.schema import seal  # type: ignore[attr-defined,no-redef]

from fuzz_support import (
    BUNDLE_FILE_MUTATIONS,
    N_BUNDLE_BYTES,
    N_BUNDLE_ESTIMATE,
    N_BUNDLE_JSON,
    N_BUNDLE_REORDER,
    N_JOINT_BYTES,
    N_JOINT_ESTIMATE,
    N_JOINT_JSON,
    N_JOINT_REORDER,
    bundle_template,
    byte_ops,
    case_dir,
    dump_json,
    fuzz_settings,
    json_ops,
    materialise,
    mutate_bytes,
    mutate_fields,
    mutate_json,
    quiet,
    read_clean,
    shuffle_keys,
    targeted_ops,
)

__all__ = ["bundle_template"]  # fixtures, used by name


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


# ============================================================================ bundles
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
    BUNDLE_FILE_MUTATIONS,
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
def test_joint_json_mutations(joint_template: dict[str, Any], ops: list, fields: list) -> None:
    """Property 1 for ``runs.load_joint`` on field-level mutations of joint.json."""
    with case_dir() as tmp:
        path = tmp / "fuzzjoint.json"
        tree = resealed(mutate_fields(mutate_json(joint_template["state"], ops), fields))
        path.write_text(dump_json(tree), encoding="utf-8")
        read_clean(lambda: load_joint(path), path.name, case=(ops, fields))


@fuzz_settings(N_JOINT_BYTES)
@given(ops=byte_ops)
def test_joint_byte_mutations(joint_template: dict[str, Any], ops: list) -> None:
    """Property 1 for ``runs.load_joint`` on byte-level mutations of joint.json."""
    with case_dir() as tmp:
        path = tmp / "fuzzjoint.json"
        data = json.dumps(joint_template["state"], indent=1).encode()
        path.write_bytes(mutate_bytes(data, ops))
        read_clean(lambda: load_joint(path), path.name, case=ops)


@fuzz_settings(N_JOINT_ESTIMATE)
@given(ops=json_ops, fields=targeted_ops(JOINT_FIELDS))
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
