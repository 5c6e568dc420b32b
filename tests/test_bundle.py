"""Bundle schema and folders: round trips, versions, and every validation error."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from bundle_support import (
    BUDGET,
    CREATED,
    N_ITEMS,
    N_MODELS,
    bundle,
    irt,
    items_frame,
    make_bundle,
    question,
    rewrite,
    saved,
    sha,
    source,
    subset,
)

from lmeval_microbench import __version__
from lmeval_microbench._io import canonical_json, sha256_bytes, sha256_file
from lmeval_microbench.bundle import (
    BUNDLE_FILE,
    ITEMS_FILE,
    SCHEMA_VERSION,
    Bundle,
    BundleVersionWarning,
    load_bundle,
    load_items,
    parse_hf_location,
    save_bundle,
    verify_items,
)
from lmeval_microbench.errors import BundleError, InputError, ItemMismatchError
from lmeval_microbench.irt.params import ItemParams
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection.base import Subset

__all__ = ["bundle", "irt", "items_frame", "saved", "source", "subset"]  # fixtures, used by name


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
    assert frame.loc[first, "question"] == question(first)
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
        assert bundle.content_hashes[item] == sha(question(item))
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
    wrong = items_frame.assign(content_hash=sha("something else"))
    with pytest.raises(BundleError, match="content_hash disagrees with the bundle"):
        save_bundle(bundle, tmp_path / "b", items=wrong)
    assert not (tmp_path / "b").exists()


def test_verify_items_names_missing_and_changed_items(bundle: Bundle) -> None:
    docs = {item: bundle.content_hashes[item] for item in bundle.item_ids}
    docs["bench.extra.999"] = sha("not in the bundle")  # extra documents are fine
    assert verify_items(bundle, docs) == ()
    gone, edited = bundle.item_ids[1], bundle.item_ids[5]
    del docs[gone]
    docs[edited] = sha("edited question")
    with pytest.raises(ItemMismatchError, match="1 subset items are missing") as info:
        verify_items(bundle, docs)
    message = str(info.value)
    assert repr(gone) in message and repr(edited) in message
    assert "changed content" in message and sha("edited question") in message


def test_verify_items_skips_unknown_hashes_with_a_warning(source, subset, irt) -> None:
    bare = ResponseMatrix(source.values, source.model_ids, source.item_ids)
    plain = make_bundle(bare, subset, irt)
    docs = {item: sha("anything") for item in subset.item_ids}
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
    docs["content_hash"] = [sha(q) for q in docs["question"]]
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
    run = {item: sha(question) for item, question in stored["question"].items()}
    assert verify_items(real, run) == ()
    run[chosen[0]] = sha(stored.loc[chosen[0], "question"] + " (reworded)")
    with pytest.raises(ItemMismatchError, match=rf"'{chosen[0]}' \(bundle"):
        verify_items(real, run)


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


def test_text_that_is_not_unicode_is_a_bundle_error(saved: Path) -> None:
    path = saved / BUNDLE_FILE
    path.write_text(path.read_text().replace('"bench-8-random"', '"bench\\ud800"', 1))
    with pytest.raises(BundleError, match=r"bundle\.json: text that is not valid Unicode"):
        load_bundle(saved)


def test_an_estimator_state_named_by_an_object_is_a_bundle_error(saved: Path) -> None:
    rewrite(saved, lambda d: d["estimators"][0]["state"].update(estimator={"x": "mean"}))
    with pytest.raises(BundleError, match=r"estimator 'weighted': state field 'estimator'"):
        load_bundle(saved)
