"""Per-cell metrics of the peer suite (:mod:`bench_peers`): a cached record scored against the
held-out models' truth."""

from __future__ import annotations

from typing import Any

import numpy as np


def cell_metrics(record: dict[str, Any], truth: np.ndarray) -> dict[str, Any]:
    from scipy.stats import kendalltau

    if "error" in record:
        return {"error": record["error"]}
    pred = np.asarray(record["pred"], dtype=float)
    out = {
        "mae": 100 * float(np.mean(np.abs(pred - truth))),
        "bias": 100 * float(np.mean(pred - truth)),
        "tau": float(kendalltau(pred, truth).statistic) if truth.size > 2 else None,
        "seconds": float(record.get("seconds", np.nan)),
        "items": record.get("items"),
    }
    if "lower" in record:
        lower, upper = np.asarray(record["lower"]), np.asarray(record["upper"])
        out["coverage"] = float(np.mean((lower <= truth) & (truth <= upper)))
        out["width"] = 100 * float(np.mean(upper - lower))
        out["recipe"] = record.get("recipe")
        out["widen"] = record.get("widen")
    if out["tau"] is not None and not np.isfinite(out["tau"]):
        out["tau"] = None
    return out
