"""Shared by the bundle tests: a small source matrix, its subset and IRT parameters, a
bundle made of them and saved with its item texts, and a way to edit a saved bundle.json."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from lmeval_microbench.bundle import (
    BUNDLE_FILE,
    Bundle,
    DatasetCoordinates,
    MetricSpec,
    save_bundle,
)
from lmeval_microbench.bundle.integrity import seal
from lmeval_microbench.irt.params import ItemParams
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection.base import Subset

N_MODELS, N_ITEMS, BUDGET = 30, 40, 8
CREATED = "2025-01-02T03:04:05Z"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def question(item: str) -> str:
    return f"What is the answer to question {item}?"


@pytest.fixture
def source() -> ResponseMatrix:
    rng = np.random.default_rng(7)
    item_ids = [f"bench.topic{k % 3}.{k}" for k in range(N_ITEMS)]
    values = (rng.random((N_MODELS, N_ITEMS)) < rng.uniform(0.2, 0.9, N_ITEMS)).astype(float)
    items = pd.DataFrame(
        {"content_hash": [sha(question(i)) for i in item_ids]},
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
            "question": [question(i) for i in ids[::-1]],
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
