"""True full-benchmark scores of source models: the target every estimator is calibrated on."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import InputError
from .responses import ResponseMatrix

SCALES = ("auto", "fraction", "percent")


def read_scores(
    path: str | os.PathLike[str],
    column: str,
    *,
    model_column: str = "model",
    scale: str = "auto",
) -> pd.Series:
    """Scores per model from a CSV/TSV/parquet file, as fractions in [0, 1].

    ``scale="auto"`` treats the column as percent when any value exceeds 1. Duplicate model
    rows and non-numeric scores are errors naming the model.
    """
    if scale not in SCALES:
        raise InputError(f"score scale must be one of {SCALES}, got {scale!r}")
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        frame = pd.read_parquet(path)
    else:
        frame = pd.read_csv(path, sep="\t" if path.suffix.lower() == ".tsv" else ",")
    for needed in (model_column, column):
        if needed not in frame.columns:
            raise InputError(f"{path}: no column {needed!r}; columns are {list(frame.columns)}")
    dups = frame[model_column][frame[model_column].duplicated()].unique().tolist()
    if dups:
        raise InputError(f"{path}: models listed more than once: {dups[:5]}")
    scores = pd.to_numeric(frame[column], errors="coerce")
    bad = frame[model_column][scores.isna() & frame[column].notna()].tolist()
    if bad:
        raise InputError(f"{path}: non-numeric {column!r} for models {bad[:5]}")
    scores.index = frame[model_column].astype(str)
    scores = scores.dropna()
    if scale == "percent" or (scale == "auto" and scores.max() > 1.0):
        scores = scores / 100.0
    out_of_range = scores[(scores < 0) | (scores > 1)]
    if not out_of_range.empty:
        raise InputError(
            f"{path}: {column!r} outside the score range for {out_of_range.index[:5].tolist()}"
        )
    return scores


def align_target(
    matrix: ResponseMatrix, scores: pd.Series | None
) -> tuple[ResponseMatrix, np.ndarray]:
    """Keep the models that have a true score; without scores the row mean is the truth.

    Models of the matrix that have no score are dropped with a warning that counts them.
    """
    if scores is None:
        return matrix, matrix.mean_scores()
    known = [m for m in matrix.model_ids if m in scores.index]
    if not known:
        raise InputError(f"{matrix.source}: no model of the matrix has a true score")
    dropped = matrix.n_models - len(known)
    if dropped:
        warnings.warn(
            f"{matrix.source}: {dropped} of {matrix.n_models} models have no true score "
            "and are left out",
            stacklevel=2,
        )
    matrix = matrix.select_models(known)
    return matrix, scores.loc[list(matrix.model_ids)].to_numpy(dtype=np.float64)
