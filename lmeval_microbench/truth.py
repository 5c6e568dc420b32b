"""True full-benchmark scores of source models: the target every estimator is calibrated on."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ._text import preview as _preview
from .errors import InputError
from .responses import ResponseMatrix, csv_header, read_csv_keeping_ids

SCALES = ("auto", "fraction", "percent")
SCALE_TOLERANCE = 10**0.75
"""How far (a factor, about 5.6) the targets may average from the row means, or from 100
times them, for ``scale="auto"`` to call them fractions, or percent."""
_UNDECIDED = "microbench_scale_undecided"
"""``Series.attrs`` key of scores whose scale :func:`align_target` must decide (their source)."""


MEAN_TOLERANCE = 1e-9
"""How close (in a fraction) every target must lie to its row mean for :func:`is_matrix_mean`."""


def is_matrix_mean(values: np.ndarray, target: np.ndarray) -> bool:
    """Whether ``target`` is each row's mean over its scored matrix items (``values``: the
    rows' scores on every matrix item, NaN where not scored): the matrix is the benchmark.

    The estimators, the outside readings, the recipe choice and the gap filling all ask this
    one question (a whole benchmark needs no map from the matrix mean to the target), so it is
    answered here, below all of them."""
    with np.errstate(invalid="ignore"):
        matrix_mean = np.nanmean(np.asarray(values, dtype=np.float64), axis=1)
    return bool(np.allclose(target, matrix_mean, rtol=0.0, atol=MEAN_TOLERANCE))


def read_scores(
    path: str | os.PathLike[str],
    column: str,
    *,
    model_column: str = "model",
    scale: str = "auto",
) -> pd.Series:
    """Scores per model from a CSV/TSV/parquet file, as fractions in [0, 1].

    ``scale="auto"`` treats the column as percent when any value exceeds 1. When none does,
    the values may still be percent (weak models: 0.5 meaning 0.5%), so they are returned
    as read and marked undecided: :func:`align_target` decides with the matrix row means.
    Duplicate model rows and non-numeric scores are errors naming the model.
    """
    if scale not in SCALES:
        raise InputError(f"score scale must be one of {SCALES}, got {scale!r}")
    path = Path(path)
    frame = _read_table(path, model_column)
    for needed in (model_column, column):
        if needed not in frame.columns:
            raise InputError(f"{path}: no column {needed!r}; columns are {list(frame.columns)}")
    nameless = frame.index[frame[model_column].isna() | (frame[model_column].astype(str) == "")]
    if len(nameless):
        raise InputError(f"{path}: rows {_preview([k + 1 for k in nameless])} have no model id")
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
    if scale == "auto" and scores.max() <= 1.0:
        scores.attrs[_UNDECIDED] = f"{path}: {column!r}"
    return scores


def _read_table(path: Path, model_column: str) -> pd.DataFrame:
    """The scores table with model ids as written; an unreadable file names itself."""
    try:
        if path.suffix.lower() == ".parquet":
            return pd.read_parquet(path)
        sep = "\t" if path.suffix.lower() == ".tsv" else ","
        return read_csv_keeping_ids(path, csv_header(path, sep), model_column, sep=sep)
    except (OSError, ValueError) as exc:  # missing, empty, ragged, not UTF-8, not parquet
        raise InputError(f"{path}: not a readable scores file ({exc})") from exc


def align_target(
    matrix: ResponseMatrix, scores: pd.Series | None
) -> tuple[ResponseMatrix, np.ndarray]:
    """Keep the models that have a true score; without scores the row mean is the truth.

    Models of the matrix that have no score are dropped with a warning that counts them; so
    are models that answered no item (no estimator can read them, and without scores their
    row mean, the truth, does not exist), and items no model answered (nothing to select or
    fit them on; a row mean skips them).
    """
    matrix = _answered_items(_answered_models(matrix))
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
    target = scores.loc[list(matrix.model_ids)].to_numpy(dtype=np.float64)
    undecided = scores.attrs.get(_UNDECIDED)
    if undecided is not None:
        target = _resolve_scale(target, matrix.mean_scores(), undecided)
    return matrix, target


def _answered_items(matrix: ResponseMatrix) -> ResponseMatrix:
    """The items of ``matrix`` that at least one model answered, the others named."""
    answered = matrix.observed.any(axis=0)
    if not answered.all():
        unanswered = [i for i, k in zip(matrix.item_ids, answered, strict=True) if not k]
        kept = [i for i, k in zip(matrix.item_ids, answered, strict=True) if k]
        warnings.warn(
            f"{matrix.source}: {len(unanswered)} of {matrix.n_items} items have no answer "
            f"from any model and are left out ({', '.join(map(repr, unanswered[:5]))}"
            f"{', ...' if len(unanswered) > 5 else ''})",
            stacklevel=3,
        )
        matrix = matrix.select_items(kept)
    return matrix


def _answered_models(matrix: ResponseMatrix) -> ResponseMatrix:
    """The models of ``matrix`` with at least one answer."""
    answered = matrix.observed.any(axis=1)
    if not answered.any():
        raise InputError(f"{matrix.source}: no model answered any item")
    if not answered.all():
        warnings.warn(
            f"{matrix.source}: {int((~answered).sum())} of {matrix.n_models} models answered "
            "no item and are left out",
            stacklevel=3,
        )
        matrix = matrix.select_models(np.asarray(matrix.model_ids)[answered].tolist())
    return matrix


def _resolve_scale(target: np.ndarray, row_means: np.ndarray, where: str) -> np.ndarray:
    """Fractions or percent, whichever agrees with the row means; refuse when unclear.

    A model's full score and its mean over the matrix items differ (the matrix may hold an
    easier or harder part of the benchmark), but not by a factor of 100: targets that
    average about as much as the row means are fractions, about 100 times as much percent.
    Within a factor of :data:`SCALE_TOLERANCE` of either is a decision; anything else is not.
    """
    if not np.any(target > 0):
        return target  # all zero: the same on either scale
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.mean(target) / np.nanmean(row_means))
    if np.isfinite(ratio) and ratio > 0:
        if abs(np.log10(ratio)) < np.log10(SCALE_TOLERANCE):
            return target
        if abs(np.log10(ratio / 100.0)) < np.log10(SCALE_TOLERANCE):
            return target / 100.0
    raise InputError(
        f"{where}: cannot tell whether the scores are fractions or percent: all are at most 1 "
        f"and they average {ratio:.3g} times the matrix row means (about 1 for fractions, 100 "
        "for percent); pass --score-scale fraction or --score-scale percent (scale= in Python)"
    )


def complete_models(matrix: ResponseMatrix, truth: np.ndarray) -> tuple[ResponseMatrix, np.ndarray]:
    """Drop models with a missing response (estimators need every subset score), with a warning.

    Here, with the truths it keeps aligned, not in ``reliability/``: ranking replays
    (``rank/replay.py``) need it too, and ``rank/`` must not import ``reliability/``.
    """
    complete = ~np.isnan(matrix.values).any(axis=1)
    if complete.all():
        return matrix, truth
    if not complete.any():
        raise InputError(f"{matrix.source}: every model has missing responses")
    warnings.warn(
        f"{matrix.source}: {int((~complete).sum())} of {matrix.n_models} models have missing "
        "responses and are left out",
        stacklevel=3,
    )
    keep = [m for m, ok in zip(matrix.model_ids, complete, strict=True) if ok]
    return matrix.select_models(keep), np.asarray(truth)[complete]
