"""Bundle schema and folders: round trips, atomic writes, and every validation error."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from lmeval_microbench import __version__
from lmeval_microbench._io import canonical_json, sha256_bytes, sha256_file
from lmeval_microbench.bundle import (
    BUNDLE_FILE,
    ITEMS_FILE,
    SCHEMA_VERSION,
    Bundle,
    BundleVersionWarning,
    DatasetCoordinates,
    MetricSpec,
    load_bundle,
    load_items,
    parse_hf_location,
    save_bundle,
    verify_items,
)
from lmeval_microbench.bundle import io as bundle_io
from lmeval_microbench.bundle.integrity import seal
from lmeval_microbench.errors import BundleError, InputError, ItemMismatchError
from lmeval_microbench.irt.params import ItemParams
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection.base import Subset

N_MODELS, N_ITEMS, BUDGET = 30, 40, 8
CREATED = "2025-01-02T03:04:05Z"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _question(item: str) -> str:
    return f"What is the answer to question {item}?"


@pytest.fixture
def source() -> ResponseMatrix:
    rng = np.random.default_rng(7)
    item_ids = [f"bench.topic{k % 3}.{k}" for k in range(N_ITEMS)]
    values = (rng.random((N_MODELS, N_ITEMS)) < rng.uniform(0.2, 0.9, N_ITEMS)).astype(float)
    items = pd.DataFrame(
        {"content_hash": [_sha(_question(i)) for i in item_ids]},
        index=pd.Index(item_ids, name="item_id"),
    )
    return ResponseMatrix(
        values, [f"org/model-{m}" for m in range(N_MODELS)], item_ids, items=items
    )


@pytest.fixture
def subset(source: ResponseMatrix) -> Subset:
    rng = np.random.default_rng(3)
    chosen = rng.choice(N_ITEMS, size=BUDGET, replace=False)
    weights = rng.uniform(0.5, 2.0, BUDGET)
    ids = tuple(source.item_ids[k] for k in chosen)
    return Subset(ids, weights / weights.sum(), "random", seed=3, info={"strata": ["topic0"]})


@pytest.fixture
def irt(source: ResponseMatrix) -> ItemParams:
    rng = np.random.default_rng(11)
    n = source.n_items
    return ItemParams(
        source.item_ids, rng.uniform(0.5, 2, n), rng.normal(size=n), np.zeros(n), np.ones(n)
    )


def make_bundle(
    source: ResponseMatrix, subset: Subset, irt: ItemParams | None, **extra: Any
) -> Bundle:
    parts: dict[str, Any] = {
        "name": "bench-8-random",
        "benchmark": "bench",
        "subset": subset,
        "source": source,
        "irt": irt,
        "estimators": [
            {"name": "weighted", "state": {}},
            {"name": "pirt", "state": {"lambda": 0.25, "theta_grid": [-1.0, 0.0, 1.0]}},
        ],
        "default_estimator": "pirt",
        "metric": MetricSpec("acc_norm", scale="percent"),
        "dataset": DatasetCoordinates("allenai/ai2_arc", "ARC-Challenge", "test", "abc123"),
        "reliability": {"mae": 0.0123, "coverage": {"90": 0.91}},
        "created": CREATED,
    }
    parts.update(extra)
    return Bundle.from_parts(**parts)


@pytest.fixture
def bundle(source: ResponseMatrix, subset: Subset, irt: ItemParams) -> Bundle:
    return make_bundle(source, subset, irt)


@pytest.fixture
def items_frame(subset: Subset) -> pd.DataFrame:
    ids = list(subset.item_ids)
    return pd.DataFrame(
        {
            "item_id": ids[::-1],  # rows in another order than the subset: matched by id
            "question": [_question(i) for i in ids[::-1]],
            "choices": [["yes", "no", i] for i in ids[::-1]],
        }
    )


@pytest.fixture
def saved(tmp_path: Path, bundle: Bundle, items_frame: pd.DataFrame) -> Path:
    return save_bundle(bundle, tmp_path / "bundle", items=items_frame)


def rewrite(
    folder: Path,
    edit: Callable[[dict[str, Any]], None],
    *,
    reseal: bool = True,
    files: dict[str, str] | None = None,
) -> None:
    """Edit bundle.json in place; with ``reseal`` its checksum is recomputed (schema tests).

    ``files`` replaces the side-file hashes the new seal lists.
    """
    path = folder / BUNDLE_FILE
    document = json.loads(path.read_text())
    listed = document.pop("checksums")["files"]
    edit(document)
    if reseal:
        document = seal(document, listed if files is None else files)
    else:
        document["checksums"] = json.loads(path.read_text())["checksums"]
    path.write_text(json.dumps(document, indent=2))


# ---------------------------------------------------------------------------- round trips
def test_save_load_round_trip_is_equal(saved: Path, bundle: Bundle) -> None:
    loaded = load_bundle(saved)
    assert loaded == bundle
    assert loaded.item_ids == bundle.item_ids
    np.testing.assert_array_equal(loaded.subset.weights, bundle.subset.weights)
    np.testing.assert_array_equal(loaded.irt.a, bundle.irt.a)
    assert loaded.weights == bundle.weights
    assert loaded.estimator_state() == {"lambda": 0.25, "theta_grid": [-1.0, 0.0, 1.0]}
    assert loaded.dataset == bundle.dataset and loaded.metric == bundle.metric
    assert load_bundle(saved / BUNDLE_FILE) == bundle


def test_equality_sees_a_changed_weight(bundle: Bundle) -> None:
    payload = bundle.to_dict()
    items = payload["subset"]["items"]
    items[0]["weight"], items[1]["weight"] = items[1]["weight"], items[0]["weight"]
    assert Bundle.from_dict(payload) != bundle
    assert Bundle.from_dict(bundle.to_dict()) == bundle


def test_items_parquet_round_trip_in_subset_order(saved: Path, bundle: Bundle) -> None:
    frame = load_items(saved)
    assert list(frame.index) == list(bundle.item_ids)
    first = bundle.item_ids[0]
    assert frame.loc[first, "question"] == _question(first)
    assert list(frame.loc[first, "choices"]) == ["yes", "no", first]
    assert frame.loc[first, "content_hash"] == bundle.content_hashes[first]


def test_bundle_without_items_has_no_parquet(tmp_path: Path, bundle: Bundle) -> None:
    folder = save_bundle(bundle, tmp_path / "b")
    assert sorted(p.name for p in folder.iterdir()) == [BUNDLE_FILE]
    assert load_items(folder) is None
    assert load_bundle(folder) == bundle


def test_from_parts_records_provenance_and_hashes(
    bundle: Bundle, source: ResponseMatrix, subset: Subset
) -> None:
    prov = bundle.provenance
    assert prov.source_sha256 == source.fingerprint()
    assert (prov.n_source_models, prov.n_source_items) == (N_MODELS, N_ITEMS)
    assert prov.package_version == __version__ and prov.created == CREATED
    assert (bundle.budget, bundle.method, bundle.subset.seed) == (BUDGET, "random", 3)
    for item in subset.item_ids:
        assert bundle.content_hashes[item] == _sha(_question(item))
    payload = bundle.to_dict()
    assert payload["schema_version"] == SCHEMA_VERSION
    assert len(payload["irt"]["item_ids"]) == N_ITEMS  # all source items, not only the subset


def test_from_parts_without_hashes_or_irt(
    source: ResponseMatrix, subset: Subset, tmp_path: Path
) -> None:
    bare = ResponseMatrix(source.values, source.model_ids, source.item_ids)
    plain = make_bundle(bare, subset, None)
    assert set(plain.content_hashes.values()) == {None}
    assert plain.irt is None
    assert load_bundle(save_bundle(plain, tmp_path / "plain")) == plain


def test_from_parts_rejects_subset_items_outside_the_source(
    source: ResponseMatrix, subset: Subset, irt: ItemParams
) -> None:
    other = Subset(("bench.nowhere.1", *subset.item_ids[1:]), subset.weights, "random")
    with pytest.raises(ItemMismatchError, match=r"bench\.nowhere\.1"):
        make_bundle(source, other, irt)


# ---------------------------------------------------------------------------- atomic writes
def test_refuses_to_overwrite_unless_asked(
    saved: Path, bundle: Bundle, source, subset, irt
) -> None:
    with pytest.raises(BundleError, match="already exists; pass overwrite=True"):
        save_bundle(bundle, saved)
    renamed = make_bundle(source, subset, irt, name="renamed")
    save_bundle(renamed, saved, overwrite=True)
    assert load_bundle(saved).name == "renamed"
    assert not (saved / ITEMS_FILE).exists()  # the old side file went with the old bundle


def test_refuses_to_overwrite_a_folder_that_is_not_a_bundle(tmp_path: Path, bundle: Bundle) -> None:
    folder = tmp_path / "home"
    folder.mkdir()
    (folder / "thesis.tex").write_text("precious")
    with pytest.raises(BundleError, match=r"non-empty folder that holds no bundle\.json"):
        save_bundle(bundle, folder, overwrite=True)
    assert (folder / "thesis.tex").read_text() == "precious"


def _explode(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("disk full")


def test_failed_save_leaves_nothing_behind(
    tmp_path: Path, bundle: Bundle, items_frame: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundle_io, "_write_document", _explode)  # after items.parquet was written
    with pytest.raises(RuntimeError, match="disk full"):
        save_bundle(bundle, tmp_path / "new", items=items_frame)
    assert list(tmp_path.iterdir()) == []


def test_failed_overwrite_keeps_the_old_bundle(
    saved: Path, source, subset, irt, items_frame: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = sorted(p.name for p in saved.parent.iterdir())
    old = load_bundle(saved)
    monkeypatch.setattr(bundle_io, "_write_document", _explode)
    with pytest.raises(RuntimeError, match="disk full"):
        save_bundle(make_bundle(source, subset, irt, name="new"), saved, overwrite=True)
    assert sorted(p.name for p in saved.parent.iterdir()) == before
    assert load_bundle(saved) == old
    assert load_items(saved) is not None


def test_a_failed_move_in_keeps_the_old_bundle_and_the_next_save_finishes_it(
    saved: Path, source, subset, irt, items_frame, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = load_bundle(saved)

    def failing_replace(src: Any, dst: Any) -> None:
        raise OSError("rename failed")

    monkeypatch.setattr(bundle_io.os, "replace", failing_replace)
    new = make_bundle(source, subset, irt, name="new")
    with pytest.raises(BundleError, match=r"cannot write the bundle \(rename failed\)"):
        save_bundle(new, saved, items=items_frame.assign(question="reworded"), overwrite=True)
    monkeypatch.undo()
    assert load_bundle(saved) == old  # the switch to the new bundle.json never happened
    save_bundle(make_bundle(source, subset, irt, name="third"), saved, overwrite=True)
    assert load_bundle(saved).name == "third"
    assert sorted(p.name for p in saved.iterdir()) == [BUNDLE_FILE]


# ---------------------------------------------------------------------------- versions
def test_unknown_major_version_is_refused(saved: Path) -> None:
    rewrite(saved, lambda d: d.update(schema_version="2.0"))
    with pytest.raises(
        BundleError, match=r"schema version 2\.0 is not supported.*reads schema 1\.x"
    ):
        load_bundle(saved)


def test_older_major_version_is_refused(saved: Path) -> None:
    rewrite(saved, lambda d: d.update(schema_version="0.9"))
    with pytest.raises(BundleError, match=r"schema version 0\.9 is not supported"):
        load_bundle(saved)


def test_malformed_version_is_refused(saved: Path) -> None:
    rewrite(saved, lambda d: d.update(schema_version="one"))
    with pytest.raises(
        BundleError, match=r"schema_version must be a 'major\.minor' string, got 'one'"
    ):
        load_bundle(saved)


def test_newer_minor_version_loads_with_a_warning(saved: Path, bundle: Bundle) -> None:
    def from_the_future(document: dict[str, Any]) -> None:
        document["schema_version"] = "1.7"
        document["future_field"] = {"anything": 1}
        document["metric"]["calibration"] = "isotonic"

    rewrite(saved, from_the_future)
    with pytest.warns(BundleVersionWarning, match=rf"1\.7 is newer than {SCHEMA_VERSION}"):
        loaded = load_bundle(saved)
    assert loaded == bundle


def test_unknown_field_in_current_version_is_a_typo(saved: Path) -> None:
    rewrite(saved, lambda d: d["metric"].update(higher_is_beter=True))
    with pytest.raises(BundleError, match=r"metric: unknown fields \['higher_is_beter'\]"):
        load_bundle(saved)


# ---------------------------------------------------------------------------- checksums
def test_hand_edited_weight_fails_the_checksum(saved: Path) -> None:
    path = saved / BUNDLE_FILE
    document = json.loads(path.read_text())
    weights = [record["weight"] for record in document["subset"]["items"]]
    text = path.read_text()
    assert text.count(json.dumps(weights[0])) == 1
    path.write_text(text.replace(json.dumps(weights[0]), json.dumps(weights[0] + 0.001)))
    with pytest.raises(BundleError, match=r"bundle\.json: checksum mismatch"):
        load_bundle(saved)


def test_tampered_items_parquet_is_named(saved: Path) -> None:
    frame = pd.read_parquet(saved / ITEMS_FILE)
    frame.loc[0, "question"] = "A different question?"
    frame.to_parquet(saved / ITEMS_FILE, index=False)
    with pytest.raises(BundleError, match=r"items\.parquet: checksum mismatch"):
        load_bundle(saved)
    with pytest.raises(BundleError, match=r"items\.parquet: checksum mismatch"):
        load_items(saved)


def test_missing_items_parquet_is_named(saved: Path) -> None:
    (saved / ITEMS_FILE).unlink()
    with pytest.raises(BundleError, match=r"items\.parquet: missing"):
        load_bundle(saved)


def test_missing_checksums_section(saved: Path) -> None:
    path = saved / BUNDLE_FILE
    document = json.loads(path.read_text())
    del document["checksums"]
    path.write_text(json.dumps(document))
    with pytest.raises(BundleError, match="missing checksums section"):
        load_bundle(saved)


def test_nan_in_file_is_not_json(saved: Path) -> None:
    path = saved / BUNDLE_FILE
    text = path.read_text()
    first = json.loads(text)["subset"]["items"][0]["weight"]
    path.write_text(text.replace(json.dumps(first), "NaN", 1))
    with pytest.raises(BundleError, match="NaN is not valid JSON"):
        load_bundle(saved)


def test_not_a_bundle(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="no bundle found"):
        load_bundle(tmp_path / "nowhere")
    (tmp_path / BUNDLE_FILE).write_text("{not json")
    with pytest.raises(BundleError, match="not a readable bundle file"):
        load_bundle(tmp_path)


# ---------------------------------------------------------------------------- schema errors
def _items(document: dict[str, Any]) -> list[dict[str, Any]]:
    return document["subset"]["items"]


def test_duplicate_item_ids(saved: Path, bundle: Bundle) -> None:
    twice = bundle.item_ids[0]
    rewrite(saved, lambda d: _items(d)[1].update(item_id=twice))
    with pytest.raises(BundleError, match=rf"subset\.items\[1\]: duplicate item id '{twice}'"):
        load_bundle(saved)


def test_weights_must_sum_to_one(saved: Path) -> None:
    rewrite(saved, lambda d: _items(d)[0].update(weight=_items(d)[0]["weight"] + 0.01))
    with pytest.raises(BundleError, match=r"subset\.items: weights sum to 1\.01.*not 1"):
        load_bundle(saved)


def test_nan_weight_names_the_item(bundle: Bundle) -> None:
    payload = bundle.to_dict()
    _items(payload)[2]["weight"] = float("nan")
    item = bundle.item_ids[2]
    with pytest.raises(
        BundleError, match=rf"weight of item '{item}' must be finite and non-negative"
    ):
        Bundle.from_dict(payload)


def test_negative_weight_names_the_item(bundle: Bundle) -> None:
    payload = bundle.to_dict()
    _items(payload)[0]["weight"] = -0.5
    with pytest.raises(BundleError, match=rf"weight of item '{bundle.item_ids[0]}'.*got -0\.5"):
        Bundle.from_dict(payload)


def test_missing_irt_parameters_name_the_item(saved: Path, bundle: Bundle) -> None:
    dropped = bundle.item_ids[4]

    def drop_item(document: dict[str, Any]) -> None:
        irt = document["irt"]
        k = irt["item_ids"].index(dropped)
        for key in ("item_ids", "a", "d", "g", "u"):
            del irt[key][k]

    rewrite(saved, drop_item)
    with pytest.raises(BundleError, match=rf"no IRT parameters for subset items '{dropped}'"):
        load_bundle(saved)


def test_irt_for_more_items_than_the_source_is_refused(bundle: Bundle) -> None:
    payload = bundle.to_dict()
    payload["provenance"]["n_source_items"] = BUDGET
    with pytest.raises(
        BundleError, match=f"parameters for {N_ITEMS} items, more than the {BUDGET}"
    ):
        Bundle.from_dict(payload)


def test_missing_required_field(saved: Path) -> None:
    rewrite(saved, lambda d: d["metric"].pop("aggregation"))
    with pytest.raises(
        BundleError, match=r"bundle\.json: metric: missing required field 'aggregation'"
    ):
        load_bundle(saved)


def test_wrongly_typed_field(bundle: Bundle) -> None:
    payload = bundle.to_dict()
    payload["metric"]["higher_is_better"] = "yes"
    with pytest.raises(BundleError, match=r"metric\.higher_is_better: expected boolean, got 'yes'"):
        Bundle.from_dict(payload)
    payload = bundle.to_dict()
    payload["provenance"]["n_source_models"] = True
    with pytest.raises(BundleError, match=r"provenance\.n_source_models: expected integer"):
        Bundle.from_dict(payload)


def test_content_hash_must_be_hex(bundle: Bundle) -> None:
    payload = bundle.to_dict()
    _items(payload)[3]["content_hash"] = "not-a-hash"
    with pytest.raises(BundleError, match=rf"content_hash of item '{bundle.item_ids[3]}'"):
        Bundle.from_dict(payload)


def test_unknown_score_scale(bundle: Bundle) -> None:
    payload = bundle.to_dict()
    payload["metric"]["scale"] = "permille"
    with pytest.raises(BundleError, match=r"metric\.scale: 'permille' is not one of"):
        Bundle.from_dict(payload)


def test_default_estimator_must_be_stored(source, subset, irt) -> None:
    with pytest.raises(BundleError, match=r"default_estimator: 'irt' is not one of .*'weighted'"):
        make_bundle(source, subset, irt, default_estimator="irt")


def test_estimator_state_must_be_json(source, subset, irt) -> None:
    bad = [{"name": "weighted", "state": {"se": float("nan")}}]
    with pytest.raises(
        BundleError, match=r"estimators\['weighted'\]\.state\.se: non-finite number nan"
    ):
        make_bundle(source, subset, irt, estimators=bad, default_estimator="weighted")
    odd = [{"name": "weighted", "state": {"fn": print}}]
    with pytest.raises(
        BundleError, match=r"state\.fn: builtin_function_or_method is not a JSON value"
    ):
        make_bundle(source, subset, irt, estimators=odd, default_estimator="weighted")


def test_numpy_values_in_state_become_plain_json(source, subset, irt, tmp_path: Path) -> None:
    state = {"theta": np.array([0.5, 1.5]), "n": np.int64(3), "flag": np.bool_(True)}
    made = make_bundle(
        source, subset, irt, estimators=[{"name": "w", "state": state}], default_estimator="w"
    )
    assert made.estimator_state() == {"theta": [0.5, 1.5], "n": 3, "flag": True}
    assert load_bundle(save_bundle(made, tmp_path / "np")) == made


def test_duplicate_estimator_names(source, subset, irt) -> None:
    twice = [{"name": "w", "state": {}}, {"name": "w", "state": {"x": 1}}]
    with pytest.raises(BundleError, match=r"duplicate estimator names \['w'\]"):
        make_bundle(source, subset, irt, estimators=twice, default_estimator="w")


def test_bad_timestamp_and_source_hash(bundle: Bundle) -> None:
    payload = bundle.to_dict()
    payload["provenance"]["created"] = "yesterday"
    with pytest.raises(BundleError, match=r"provenance\.created: expected an ISO 8601 timestamp"):
        Bundle.from_dict(payload)
    payload = bundle.to_dict()
    payload["provenance"]["source_sha256"] = "abc"
    with pytest.raises(BundleError, match=r"provenance\.source_sha256: expected 64 lowercase hex"):
        Bundle.from_dict(payload)


# ---------------------------------------------------------------------------- item documents
def test_items_frame_must_match_the_subset(tmp_path: Path, bundle: Bundle, items_frame) -> None:
    short = items_frame.iloc[1:]
    with pytest.raises(
        BundleError, match=rf"lacks subset items \['{items_frame.item_id.iloc[0]}'\]"
    ):
        save_bundle(bundle, tmp_path / "b", items=short)
    wrong = items_frame.assign(content_hash=_sha("something else"))
    with pytest.raises(BundleError, match="content_hash disagrees with the bundle"):
        save_bundle(bundle, tmp_path / "b", items=wrong)
    assert not (tmp_path / "b").exists()


def test_verify_items_names_missing_and_changed_items(bundle: Bundle) -> None:
    docs = {item: bundle.content_hashes[item] for item in bundle.item_ids}
    docs["bench.extra.999"] = _sha("not in the bundle")  # extra documents are fine
    assert verify_items(bundle, docs) == ()
    gone, edited = bundle.item_ids[1], bundle.item_ids[5]
    del docs[gone]
    docs[edited] = _sha("edited question")
    with pytest.raises(ItemMismatchError, match="1 subset items are missing") as info:
        verify_items(bundle, docs)
    message = str(info.value)
    assert repr(gone) in message and repr(edited) in message
    assert "changed content" in message and _sha("edited question") in message


def test_verify_items_skips_unknown_hashes_with_a_warning(source, subset, irt) -> None:
    bare = ResponseMatrix(source.values, source.model_ids, source.item_ids)
    plain = make_bundle(bare, subset, irt)
    docs = {item: _sha("anything") for item in subset.item_ids}
    with pytest.warns(UserWarning, match=f"{BUDGET} of {BUDGET} items have no content hash"):
        unchecked = verify_items(plain, docs)
    assert unchecked == subset.item_ids
    with warnings.catch_warnings(), pytest.raises(ItemMismatchError, match="missing"):
        warnings.simplefilter("ignore")
        verify_items(plain, {})


# ---------------------------------------------------------------------------- hub locations
def test_hf_locations_parse() -> None:
    assert parse_hf_location("hf://me/bench-8") == ("me/bench-8", None)
    assert parse_hf_location("hf://me/bench-8@v1.0") == ("me/bench-8", "v1.0")
    with pytest.raises(BundleError, match="expected hf://owner/name"):
        parse_hf_location("hf://just-a-name")


def test_hf_location_offline_without_cache_is_a_bundle_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    constants = pytest.importorskip("huggingface_hub.constants")
    if not constants.HF_HUB_OFFLINE:
        pytest.skip("HF_HUB_OFFLINE was not set before huggingface_hub was imported")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(BundleError, match="hf://nobody/no-such-bundle: cannot download"):
        load_bundle("hf://nobody/no-such-bundle")


# ---------------------------------------------------------------------------- real data
def test_real_arc_bundle_round_trip_and_item_check(shared_data: Path, tmp_path: Path) -> None:
    """Open LLM Leaderboard ARC matrix, metabench IRT parameters and the real item texts."""
    root = shared_data / "openllm_v1"
    matrix = ResponseMatrix.read_parquet(root / "responses" / "arc_B.parquet")
    docs = pd.read_parquet(
        root / "items" / "arc-secondary.parquet",
        columns=["metabench_idx", "question", "choices", "answerKey"],
    )
    docs["item_id"] = "arc." + docs["metabench_idx"].astype(str)
    docs["content_hash"] = [_sha(q) for q in docs["question"]]
    hashed = ResponseMatrix(
        matrix.values,
        matrix.model_ids,
        matrix.item_ids,
        items=docs.set_index("item_id")[["content_hash"]],
        source=matrix.source,
    )
    params = pd.read_csv(root / "irt" / "arc_B_item_params.csv")
    model = "2pl" if (params["g.x"] == 0).all() and (params["u.x"] == 1).all() else "4pl"
    real_irt = ItemParams(
        params["item"], params["a1.x"], params["d.x"], params["g.x"], params["u.x"], model
    )
    rng = np.random.default_rng(0)
    chosen = tuple(rng.choice(hashed.item_ids, size=20, replace=False))
    real_subset = Subset(chosen, np.full(20, 1 / 20), "random", seed=0)
    real = make_bundle(hashed, real_subset, real_irt, name="arc-20-random", benchmark="arc")
    frame = docs[docs["item_id"].isin(chosen)].drop(columns=["metabench_idx"])
    folder = save_bundle(real, tmp_path / "arc", items=frame)
    assert load_bundle(folder) == real
    stored = load_items(folder)
    assert list(stored.index) == list(chosen)
    run = {item: _sha(question) for item, question in stored["question"].items()}
    assert verify_items(real, run) == ()
    run[chosen[0]] = _sha(stored.loc[chosen[0], "question"] + " (reworded)")
    with pytest.raises(ItemMismatchError, match=rf"'{chosen[0]}' \(bundle"):
        verify_items(real, run)


# ---------------------------------------------------------------------------- issue 8
def test_overwrite_replaces_only_the_bundle_files(saved: Path, source, subset, irt) -> None:
    (saved / "README.md").write_text("my notes")
    (saved / ".git").mkdir()
    (saved / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (saved / "notes").mkdir()
    (saved / "notes" / "todo.txt").write_text("keep me")
    save_bundle(make_bundle(source, subset, irt, name="renamed"), saved, overwrite=True)
    assert load_bundle(saved).name == "renamed"
    assert (saved / "README.md").read_text() == "my notes"
    assert (saved / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert (saved / "notes" / "todo.txt").read_text() == "keep me"
    # the old items.parquet went with the old bundle, and nothing was left behind
    assert sorted(p.name for p in saved.iterdir()) == [".git", "README.md", BUNDLE_FILE, "notes"]
    assert sorted(p.name for p in saved.parent.iterdir()) == [saved.name]


def test_a_save_that_loses_the_race_for_a_new_folder_is_refused(
    tmp_path: Path, bundle: Bundle, source, subset, irt, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "new"
    winner = make_bundle(source, subset, irt, name="winner")
    real_write = bundle_io._write_document

    def another_process_finishes_first(document: Any, path: Path) -> None:
        monkeypatch.setattr(bundle_io, "_write_document", real_write)
        save_bundle(winner, target)
        real_write(document, path)

    monkeypatch.setattr(bundle_io, "_write_document", another_process_finishes_first)
    with pytest.raises(BundleError, match=r"new: created by another process"):
        save_bundle(bundle, target)
    assert load_bundle(target).name == "winner"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new"]


def test_an_overwrite_waits_for_no_one_but_refuses_a_live_writer(saved: Path, bundle: Bundle):
    pending = saved / ".microbench-pending"
    pending.mkdir()
    writer = {"pid": os.getpid(), "host": socket.gethostname()}
    (pending / "writer.json").write_text(json.dumps(writer))
    with pytest.raises(BundleError, match=rf"another process \(pid {os.getpid()}\) is writing"):
        save_bundle(bundle, saved, overwrite=True)
    assert load_bundle(saved) == bundle


_KILLED_SAVE = """
import os, sys
from lmeval_microbench.bundle import load_bundle, load_items, save_bundle

target, source, at = sys.argv[1], sys.argv[2], int(sys.argv[3])
new, items = load_bundle(source), load_items(source)
calls = 0


def dies_at_call(real):
    def call(*args, **kwargs):
        global calls
        calls += 1
        if calls == at:
            os._exit(9)  # a kill: no cleanup, no finally
        return real(*args, **kwargs)

    return call


os.rename, os.replace = dies_at_call(os.rename), dies_at_call(os.replace)
save_bundle(new, target, items=items, overwrite=True)
"""


@pytest.mark.slow  # 11-25 s: the default run stays under 15 minutes
def test_a_killed_overwrite_leaves_a_bundle_or_an_explained_recoverable_state(
    tmp_path: Path, bundle: Bundle, items_frame: pd.DataFrame, source, subset, irt
) -> None:
    target = save_bundle(bundle, tmp_path / "target", items=items_frame)
    changed = items_frame.assign(question="reworded")  # another items.parquet
    new = save_bundle(make_bundle(source, subset, irt, name="new"), tmp_path / "new", items=changed)
    script = tmp_path / "killed_save.py"
    script.write_text(_KILLED_SAVE)
    outcomes = []
    for at in range(1, 20):
        run = subprocess.run(
            [sys.executable, str(script), str(target), str(new), str(at)],
            capture_output=True,
            text=True,
        )
        assert run.returncode in (0, 9), run.stderr
        try:
            found = load_bundle(target)
            assert found.name in ("bench-8-random", "new")
            assert load_items(target)["question"].iloc[0] in (
                _question(found.item_ids[0]),
                "reworded",
            )
            outcomes.append(found.name)
        except BundleError as exc:  # a mix: explained, and the next save repairs it
            assert "interrupted" in str(exc), str(exc)
            outcomes.append("explained")
        if run.returncode == 0:
            break
        save_bundle(bundle, target, items=items_frame, overwrite=True)
        assert load_bundle(target) == bundle
    assert outcomes[-1] == "new" and len(outcomes) >= 3  # killed at every rename on the way
    assert sorted(p.name for p in target.iterdir()) == [BUNDLE_FILE, ITEMS_FILE]


def test_an_items_parquet_the_checksums_do_not_list_is_refused(
    tmp_path: Path, bundle: Bundle, items_frame: pd.DataFrame
) -> None:
    folder = save_bundle(bundle, tmp_path / "b")
    other = save_bundle(bundle, tmp_path / "other", items=items_frame)
    shutil.copy(other / ITEMS_FILE, folder / ITEMS_FILE)
    with pytest.raises(BundleError, match=r"items\.parquet: present but not listed"):
        load_items(folder)
    with pytest.raises(BundleError, match=r"items\.parquet: present but not listed"):
        load_bundle(folder)


def test_the_checksum_covers_the_list_of_side_files(saved: Path) -> None:
    path = saved / BUNDLE_FILE
    document = json.loads(path.read_text())
    del document["checksums"]["files"][ITEMS_FILE]
    path.write_text(json.dumps(document, indent=2))
    frame = pd.read_parquet(saved / ITEMS_FILE)
    frame.loc[0, "question"] = "A different question?"
    frame.to_parquet(saved / ITEMS_FILE, index=False)
    with pytest.raises(BundleError, match=r"bundle\.json: checksum mismatch"):
        load_bundle(saved)
    with pytest.raises(BundleError, match=r"bundle\.json: checksum mismatch"):
        load_items(saved)
    document["checksums"]["files"][ITEMS_FILE] = sha256_file(saved / ITEMS_FILE)
    path.write_text(json.dumps(document, indent=2))  # the edited file's hash, listed by hand
    with pytest.raises(BundleError, match=r"bundle\.json: checksum mismatch"):
        load_bundle(saved)


def _as_schema_1_0(folder: Path, *, drop_files: bool = False) -> None:
    """Rewrite bundle.json as version 1.0 wrote it: the payload hash alone, files map unsealed."""
    path = folder / BUNDLE_FILE
    document = json.loads(path.read_text())
    files = {} if drop_files else document.pop("checksums")["files"]
    document.pop("checksums", None)
    document["schema_version"] = "1.0"
    payload = sha256_bytes(canonical_json(document))
    document["checksums"] = {"algorithm": "sha256", "payload": payload, "files": files}
    path.write_text(json.dumps(document, indent=2))


def test_bundles_of_schema_1_0_still_load(saved: Path, bundle: Bundle) -> None:
    _as_schema_1_0(saved)
    assert load_bundle(saved) == bundle
    assert list(load_items(saved).index) == list(bundle.item_ids)


def test_a_schema_1_0_bundle_cannot_drop_its_items_from_the_list(saved: Path) -> None:
    _as_schema_1_0(saved, drop_files=True)  # 1.0 did not seal the list: the file is the tell
    with pytest.raises(BundleError, match=r"items\.parquet: present but not listed"):
        load_bundle(saved)


def test_deeply_nested_bundle_json_is_a_bundle_error(saved: Path) -> None:
    depth = 100_000
    (saved / BUNDLE_FILE).write_text('{"reliability": ' + "[" * depth + "]" * depth + "}")
    with pytest.raises(BundleError, match=r"bundle\.json: .*nested more than"):
        load_bundle(saved)


def test_nesting_the_parser_accepts_is_refused_too(saved: Path) -> None:
    nested: list[Any] = []
    for _ in range(600):
        nested = [nested]
    rewrite(saved, lambda d: d["reliability"].update(deep=nested))
    with pytest.raises(BundleError, match=r"bundle\.json: .*nested more than"):
        load_bundle(saved)


def test_items_parquet_without_item_ids_is_named(saved: Path, bundle: Bundle) -> None:
    path = saved / ITEMS_FILE
    frame = pd.read_parquet(path)
    frame.drop(columns=["item_id"]).to_parquet(path, index=False)
    rewrite(saved, lambda d: None, files={ITEMS_FILE: sha256_file(path)})
    with pytest.raises(BundleError, match=r"items\.parquet: no 'item_id' column"):
        load_items(saved)
    frame.iloc[1:].to_parquet(path, index=False)
    rewrite(saved, lambda d: None, files={ITEMS_FILE: sha256_file(path)})
    with pytest.raises(
        BundleError, match=rf"items\.parquet: lacks subset items .*{bundle.item_ids[0]}"
    ):
        load_items(saved)


def test_creation_time_honours_source_date_epoch(
    source, subset, irt, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert make_bundle(source, subset, irt, created=None).provenance.created == (
        "2023-11-14T22:13:20Z"
    )
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(InputError, match="SOURCE_DATE_EPOCH"):
        make_bundle(source, subset, irt, created=None)


def test_ctrl_c_during_the_renames_takes_effect_after_them() -> None:
    import signal

    from lmeval_microbench.bundle._commit import deferred_signals

    # A process started in the background by a non-interactive shell inherits SIGINT ignored;
    # the test is about Python's usual Ctrl-C handler, so it installs that one for itself.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        done = []
        with pytest.raises(KeyboardInterrupt):
            with deferred_signals():
                signal.raise_signal(signal.SIGINT)
                done.append("the renames finished")
        assert done == ["the renames finished"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, inherited)


def test_text_that_is_not_unicode_is_a_bundle_error(saved: Path) -> None:
    path = saved / BUNDLE_FILE
    path.write_text(path.read_text().replace('"bench-8-random"', '"bench\\ud800"', 1))
    with pytest.raises(BundleError, match=r"bundle\.json: text that is not valid Unicode"):
        load_bundle(saved)


def test_an_estimator_state_named_by_an_object_is_a_bundle_error(saved: Path) -> None:
    rewrite(saved, lambda d: d["estimators"][0]["state"].update(estimator={"x": "mean"}))
    with pytest.raises(BundleError, match=r"estimator 'weighted': state field 'estimator'"):
        load_bundle(saved)
