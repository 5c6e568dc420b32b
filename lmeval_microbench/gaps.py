"""Gaps in a response matrix (responses missing here and there, as on HELM).

Estimators need every subset score of a model they fit on, and the recipe choice fits many of
them on subsets it draws itself. Dropping every model with a gap refused a matrix whose gaps
are scattered (66 models with 2 % of their cells missing at random: every model lacked an
item), though nearly all of it was there. Two ways round it, for two uses:

* :func:`filled` fills each gap with what the model's and the item's rates predict, for the
  recipe choice: it ranks recipes by their errors on folds of the sources, and the complete
  part of a wide matrix with scattered gaps is small (MuSR's 756 items with 5 % missing, 66
  models: 44 models and 113 items), too small for the readings of the floor's estimator, which
  failed there;
* :func:`complete_core` keeps the part without gaps, for drawing the bundle's items: every
  model of it can then be fitted on them.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import expit, logit

from .errors import InputError
from .responses import ResponseMatrix
from .truth import is_matrix_mean

RATE_CLIP = 0.02
"""Rates are clipped to [RATE_CLIP, 1 - RATE_CLIP] before their logits are added."""


def filled(matrix: ResponseMatrix, truth: np.ndarray) -> tuple[ResponseMatrix, np.ndarray]:
    """``matrix`` with every gap filled, and the truths to choose on, with a warning.

    A gap of model ``i`` at item ``j`` becomes ``expit(logit r_i + logit c_j - logit r)``: the
    model's rate ``r_i`` over the items it answered, moved by how much easier item ``j`` was
    (its rate ``c_j`` among the models that answered it) than the matrix's rate ``r``; a
    fraction, as a partial-credit score is. Items nobody answered are left out. Where the truths
    are the models' means over the items they answered (no ``--scores``), the truths to choose
    on are the filled matrix's row means, so that the target stays the matrix mean there too;
    other truths are kept.
    """
    values = np.asarray(matrix.values, dtype=np.float64)
    gaps = np.isnan(values)
    if not gaps.any():
        return matrix, truth
    answered = ~gaps.all(axis=0)
    if not answered.all():
        matrix = matrix.select_items(
            [i for i, k in zip(matrix.item_ids, answered, strict=True) if k]
        )
        values = np.asarray(matrix.values, dtype=np.float64)
        gaps = np.isnan(values)
    with np.errstate(invalid="ignore"):
        row_rate = np.nanmean(values, axis=1)
    col_rate = np.nanmean(values, axis=0)
    overall = float(np.nanmean(values))
    odds = lambda p: logit(np.clip(p, RATE_CLIP, 1 - RATE_CLIP))  # noqa: E731
    guess = expit(odds(row_rate)[:, None] + odds(col_rate)[None, :] - odds(overall))
    full = np.where(gaps, guess, values)
    warnings.warn(
        f"{matrix.source}: {int(gaps.sum())} missing responses ({gaps.mean():.1%} of the "
        "matrix) filled from each model's and item's rates for the recipe choice",
        stacklevel=3,
    )
    is_mean = is_matrix_mean(values, truth)
    out = ResponseMatrix(
        full,
        matrix.model_ids,
        matrix.item_ids,
        items=matrix.items,
        models=matrix.models,
        source=matrix.source,
    )
    return out, (full.mean(axis=1) if is_mean else np.asarray(truth))


def complete_core(
    matrix: ResponseMatrix, truth: np.ndarray, min_items: int
) -> tuple[ResponseMatrix, np.ndarray]:
    """The models and items of ``matrix`` with no missing response, found by dropping the
    model or item with the largest share of gaps until none is left. It does not warn: its
    caller says what the part is used for (:func:`..build.selection_pool`).

    Dropping the line with the largest share of gaps keeps a model that lacks a few items and
    an item that a few models lack, and drops whichever is mostly empty; a matrix without gaps
    comes back unchanged. Items are dropped only while at least ``min_items`` remain; the
    truths stay those of the whole matrix, as the models' targets.
    """
    gaps = np.isnan(matrix.values)
    if not gaps.any():
        return matrix, truth
    rows, cols = _gapless(gaps, min_items)
    if not rows.any():
        raise InputError(
            f"{matrix.source}: no model answered every one of {min_items} or more items; "
            "score the models on more of the items, or drop the items few of them answered"
        )
    core = matrix.select_models([m for m, k in zip(matrix.model_ids, rows, strict=True) if k])
    core = core.select_items([i for i, k in zip(matrix.item_ids, cols, strict=True) if k])
    return core, np.asarray(truth)[rows]


def _gapless(gaps: np.ndarray, min_items: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column masks of a gap-free part of ``gaps`` (see :func:`complete_core`)."""
    rows = np.ones(gaps.shape[0], dtype=bool)
    cols = np.ones(gaps.shape[1], dtype=bool)
    row_gaps = gaps.sum(axis=1)
    col_gaps = gaps.sum(axis=0)
    while rows.any() and row_gaps[rows].any():
        row_share = np.where(rows, row_gaps, -1) / cols.sum()
        col_share = np.where(cols, col_gaps, -1) / rows.sum()
        row, col = int(np.argmax(row_share)), int(np.argmax(col_share))
        if cols.sum() > min_items and col_share[col] >= row_share[row]:
            cols[col] = False
            row_gaps -= gaps[:, col]
        else:
            rows[row] = False
            col_gaps -= gaps[row]
    return rows, cols
