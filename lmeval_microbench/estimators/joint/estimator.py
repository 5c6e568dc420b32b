"""Joint estimation across benchmarks: all of a model's subset answers inform every score.

Why: a model's scores on the benchmarks of a leaderboard are strongly correlated (a model that
does well on ARC usually does well on HellaSwag and MMLU), so its answers on five subsets say
something about the sixth, and a 25-item subset alone leaves several points of sampling error.
The leaderboard average, the number most users read, is estimated directly as its own output.

Method (stacked regression), every learned step on the source models only:

1. per benchmark, a *base* estimator (``calibrated`` by default) fitted on that benchmark's
   source models; it is also the per-benchmark fallback when a model lacks a benchmark;
2. the base estimates of the *joint* source models (those with a score on every benchmark) are
   cross-fitted: K folds, each predicted by base estimators refitted without it, so the head
   never learns from an estimate that has seen its own target;
3. features: the B base estimates (``"estimates"``), the subset item scores of every benchmark
   (``"items"``) and, on request, EAP abilities under a D-dimensional 2PL fitted on all subset
   items (``"mirt"``);
4. head: one ridge regression per output (each benchmark and ``"average"``, the mean of the B
   scores) on standardised features, in closed form from one SVD per grid point; the penalty
   and the relative scale of the item columns (many and noisy, while the few estimate columns
   are strong) are chosen per output by generalised cross-validation;
5. intervals: cross-conformal per output (``_conformal``) from K-fold predictions
   of the head on the cross-fitted features.

IRT parameters (unsupervised) are fitted once on all source models, not once per fold, as in
``estimators.base``; ``tools/eval_joint.py`` measures accuracy and coverage on held-out models.
The checks and joins of the fit inputs live in :mod:`.inputs`, the head in :mod:`.head`,
what :meth:`JointEstimator.estimate` returns in :mod:`.results` and the reading of a
``joint.json`` in :mod:`.state`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..._conformal import SCALE_MODES, ConformalBand, check_level, fit_band
from ..._io import seal_holds
from ..._text import preview as _preview
from ..._types import Estimate, ItemId
from ...errors import InputError, ItemMismatchError, MicrobenchError
from ...irt import IRTModel, estimate_abilities, fit_source_irt
from ...irt.params import ItemParams
from ...outside.ceiling import saturated
from ...responses import ResponseMatrix
from ...subset import Subset
from .. import ESTIMATORS, ScoreEstimator, estimator_from_state, make_estimator
from .._fitting import checked_score, fold_labels
from .head import RidgeHead, cross_fit_head, fit_ridge_head
from .inputs import AVERAGE, check_benchmarks, joint_source, usable_source
from .results import JointEstimates, JointFallbackWarning

FEATURE_SETS = ("estimates", "items", "mirt")
STATE_VERSION = 1


# ---------------------------------------------------------------------- estimator
class JointEstimator:
    """Estimate every benchmark's full score and their average from all of a model's answers.

    Parameters
    ----------
    features
        Any of ``FEATURE_SETS``: ``"estimates"`` (cross-fitted base estimates),
        ``"items"`` (subset item scores of every benchmark), ``"mirt"`` (abilities under a
        ``mirt_dims``-dimensional 2PL over all subset items).
    base_estimator, base_options
        Per-benchmark estimator (registry name and keyword arguments, JSON-ready).
    mirt_dims, mirt_options
        Dimensions of the multidimensional 2PL and extra ``IRTModel`` arguments.
    interval
        Residual scale of the conformal intervals (see ``_conformal``).
    n_folds, random_state
        Cross-fitting folds of the joint source models and the seed of everything random.

    Attributes
    ----------
    benchmarks_, outputs_ : the benchmarks, and the benchmarks plus ``"average"``.
    subsets_, base_ : per benchmark, the subset and the fitted base estimator.
    head_, bands_ : the ridge head and the conformal band of each output.
    model_ids_ : the joint source models (sorted ids), the rows of ``cv_base_`` and
        ``cv_targets_``: their cross-fitted base estimates and targets (evaluation only; not
        part of the state).
    n_source_, cv_mae_ : number of joint source models and cross-validated MAE per output.
    """

    name = "joint"

    def __init__(
        self,
        *,
        features: Sequence[str] = ("estimates", "items"),
        base_estimator: str = "calibrated",
        base_options: dict[str, Any] | None = None,
        mirt_dims: int = 2,
        mirt_options: dict[str, Any] | None = None,
        interval: str = "binned",
        n_folds: int = 5,
        random_state: int | None = 0,
    ) -> None:
        self.features = tuple(features)
        self.base_estimator = base_estimator
        self.base_options = base_options
        self.mirt_dims = mirt_dims
        self.mirt_options = mirt_options
        self.interval = interval
        self.n_folds = n_folds
        self.random_state = random_state

    def get_params(self) -> dict[str, Any]:
        """Constructor arguments as given, JSON-ready."""
        return {
            "features": list(self.features),
            "base_estimator": self.base_estimator,
            "base_options": self.base_options,
            "mirt_dims": self.mirt_dims,
            "mirt_options": self.mirt_options,
            "interval": self.interval,
            "n_folds": self.n_folds,
            "random_state": self.random_state,
        }

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"JointEstimator({args})"

    def _validate_params(self) -> None:
        unknown = [f for f in self.features if f not in FEATURE_SETS]
        if unknown or not self.features:
            raise InputError(
                f"joint: features must be a non-empty list of {FEATURE_SETS}, "
                f"got {list(self.features)!r}"
            )
        if self.base_estimator not in ESTIMATORS:
            raise InputError(
                f"joint: unknown base estimator {self.base_estimator!r}; "
                f"known: {sorted(ESTIMATORS)}"
            )
        for name in ("base_options", "mirt_options"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, dict):
                raise InputError(f"joint: {name} must be a dict or None, got {value!r}")
        if not isinstance(self.mirt_dims, (int, np.integer)) or self.mirt_dims < 1:
            raise InputError(f"joint: mirt_dims must be a positive integer, got {self.mirt_dims!r}")
        if self.interval not in SCALE_MODES:
            raise InputError(f"joint: interval must be one of {SCALE_MODES}, got {self.interval!r}")
        if not isinstance(self.n_folds, (int, np.integer)) or self.n_folds < 2:
            raise InputError(f"joint: n_folds must be an integer >= 2, got {self.n_folds!r}")
        if self.random_state is not None and not isinstance(self.random_state, (int, np.integer)):
            raise InputError(
                "joint: random_state must be an int or None, "
                f"got {type(self.random_state).__name__}"
            )

    # ------------------------------------------------------------------ fit
    def fit(
        self,
        sources: Mapping[str, ResponseMatrix],
        subsets: Mapping[str, Subset],
        targets: Mapping[str, np.ndarray | pd.Series],
        *,
        irt: Mapping[str, ItemParams] | None = None,
    ) -> JointEstimator:
        """Learn base estimators and the joint head from the source models only; returns self.

        Parameters
        ----------
        sources
            Per benchmark, the responses of its source models (all its matrix items; rows of
            different benchmarks are joined by model id).
        subsets
            Per benchmark, the items new models are scored on; ids must differ across
            benchmarks.
        targets
            Per benchmark, the true full score (fractions) of each source model: an array
            aligned with ``sources[b].model_ids`` or a Series indexed by model id. NaN (or a
            model absent from the Series) leaves that model out of that benchmark.
        irt
            Optional item parameters per benchmark (fitted on the source models if absent).
        """
        self._validate_params()
        benchmarks = check_benchmarks(sources, subsets, targets)
        unknown = sorted(set(irt or {}) - set(benchmarks))
        if unknown:
            raise InputError(f"joint: irt parameters given for unknown benchmarks {unknown}")
        per_benchmark = {b: usable_source(b, sources[b], targets[b]) for b in benchmarks}
        irt_params = {
            b: self._source_irt(per_benchmark[b][0], (irt or {}).get(b)) for b in benchmarks
        }
        self.benchmarks_: tuple[str, ...] = benchmarks
        self.outputs_: tuple[str, ...] = (*benchmarks, AVERAGE)
        self.subsets_: dict[str, Subset] = {b: subsets[b] for b in benchmarks}
        joint, joint_target = joint_source(per_benchmark, benchmarks, self.subsets_, self.n_folds)
        self.model_ids_: tuple[str, ...] = joint.model_ids
        folds = fold_labels(joint.n_models, self.n_folds, self.random_state)
        self.cv_base_: dict[str, np.ndarray] = {
            b: self._cross_fit_base(b, per_benchmark[b], irt_params[b], joint, folds)
            for b in benchmarks
        }
        self.base_: dict[str, ScoreEstimator] = {
            b: self._new_base().fit(
                per_benchmark[b][0], self.subsets_[b], per_benchmark[b][1], irt=irt_params[b]
            )
            for b in benchmarks
        }
        self.mirt_: ItemParams | None = self._fit_mirt(joint) if "mirt" in self.features else None
        cv_x, item_columns = self._design(joint, np.column_stack(list(self.cv_base_.values())))
        self.cv_targets_: np.ndarray = joint_target
        cv_prediction = cross_fit_head(cv_x, joint_target, item_columns, folds, self.n_folds)
        self.head_: RidgeHead = fit_ridge_head(cv_x, joint_target, item_columns)
        self.bands_: dict[str, ConformalBand] = {
            out: fit_band(cv_prediction[:, k], joint_target[:, k], self.interval)
            for k, out in enumerate(self.outputs_)
        }
        self.n_source_: int = joint.n_models
        self.cv_mae_: dict[str, float] = {
            out: float(np.mean(np.abs(cv_prediction[:, k] - joint_target[:, k])))
            for k, out in enumerate(self.outputs_)
        }
        return self

    def _source_irt(self, source: ResponseMatrix, given: ItemParams | None) -> ItemParams | None:
        """Item parameters for IRT-based base estimators (fitted once, shared by all folds)."""
        if given is not None:
            return given
        base = self._new_base()
        if not hasattr(base, "irt_model"):  # not an IRT-based estimator
            return None
        return fit_source_irt(source, model=base.irt_model, seed=self.random_state)

    def _new_base(self) -> ScoreEstimator:
        options = {"random_state": self.random_state, **dict(self.base_options or {})}
        return make_estimator(self.base_estimator, **options)

    def _cross_fit_base(
        self,
        benchmark: str,
        usable: tuple[ResponseMatrix, np.ndarray],
        irt: ItemParams | None,
        joint: ResponseMatrix,
        folds: np.ndarray,
    ) -> np.ndarray:
        """Out-of-fold base estimates of the joint models: each fold by a fit without it."""
        source, target = usable
        prediction = np.empty(joint.n_models)
        for fold in range(self.n_folds):
            held = {joint.model_ids[k] for k in np.flatnonzero(folds == fold)}
            keep = np.array([m not in held for m in source.model_ids])
            train = source.select_models([source.model_ids[k] for k in np.flatnonzero(keep)])
            base = self._new_base().fit(train, self.subsets_[benchmark], target[keep], irt=irt)
            rows = joint.select_models([joint.model_ids[k] for k in np.flatnonzero(folds == fold)])
            prediction[folds == fold] = base.estimate_matrix(rows)[0]
        return prediction

    def _fit_mirt(self, joint: ResponseMatrix) -> ItemParams:
        """Multidimensional 2PL over the subset items of every benchmark (unsupervised)."""
        varying = joint.drop_items(joint.constant_items())
        model = IRTModel(
            "2pl",
            n_dims=int(self.mirt_dims),
            random_state=self.random_state,
            **dict(self.mirt_options or {}),
        )
        return model.fit(varying).params_

    def _design(
        self, joint: ResponseMatrix, estimates: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Feature columns of the rows of ``joint`` given their base estimates (m, B).

        Returns the matrix and a mask of the item columns (the second penalty group).
        """
        blocks: list[np.ndarray] = []
        is_item: list[np.ndarray] = []
        if "estimates" in self.features:
            blocks.append(estimates)
            is_item.append(np.zeros(estimates.shape[1], dtype=bool))
        if "mirt" in self.features:
            assert self.mirt_ is not None
            ids = list(self.mirt_.item_ids)
            theta, _ = estimate_abilities(
                self.mirt_, joint.values[:, joint.item_positions(ids)], ids
            )
            blocks.append(theta)
            is_item.append(np.zeros(theta.shape[1], dtype=bool))
        if "items" in self.features:
            items = joint.values[:, joint.item_positions(self.subset_item_ids)]
            blocks.append(items)
            is_item.append(np.ones(items.shape[1], dtype=bool))
        return np.column_stack(blocks), np.concatenate(is_item)

    # ------------------------------------------------------------------ estimate
    @property
    def subset_item_ids(self) -> tuple[ItemId, ...]:
        """Every subset item of every benchmark, benchmark by benchmark."""
        if not hasattr(self, "subsets_"):
            self._check_fitted()
        return tuple(i for b in self.benchmarks_ for i in self.subsets_[b].item_ids)

    def _check_fitted(self) -> None:
        if not hasattr(self, "head_"):
            raise InputError("joint: estimator is not fitted; call fit() or from_state() first")

    def _predict(self, joint: ResponseMatrix, level: float) -> dict[str, tuple[np.ndarray, ...]]:
        """Joint estimates of complete rows: output -> (value, lower, upper)."""
        estimates = np.column_stack(
            [self.base_[b].estimate_matrix(joint)[0] for b in self.benchmarks_]
        )
        x, _ = self._design(joint, estimates)
        prediction = np.clip(self.head_.predict(x), 0.0, 1.0)
        result = {}
        for k, out in enumerate(self.outputs_):
            value = prediction[:, k]
            half = self.bands_[out].half_width(value, level)
            result[out] = (value, np.clip(value - half, 0.0, 1.0), np.clip(value + half, 0.0, 1.0))
        return self._opened_above(joint, result)

    def _opened_above(
        self, joint: ResponseMatrix, result: dict[str, tuple[np.ndarray, ...]]
    ) -> dict[str, tuple[np.ndarray, ...]]:
        """Rows with every item of a benchmark's subset right: that benchmark's upper end at
        1 (:mod:`...outside.ceiling`), and the average's raised by what that adds to it."""
        raise_average = np.zeros(joint.n_models)
        for b in self.benchmarks_:
            full = saturated(joint.select_items(list(self.subsets_[b].item_ids)).values)
            value, lower, upper = result[b]
            raise_average += np.where(full, 1.0 - upper, 0.0) / len(self.benchmarks_)
            result[b] = (value, lower, np.where(full, 1.0, upper))
        value, lower, upper = result[AVERAGE]
        result[AVERAGE] = (value, lower, np.minimum(upper + raise_average, 1.0))
        return result

    def estimate_matrix(
        self, matrix: ResponseMatrix | Mapping[str, ResponseMatrix], *, level: float = 0.9
    ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Joint estimates of every row: output -> ``(value, lower, upper)`` arrays.

        ``matrix`` holds the subset items of every benchmark: one joined matrix (arrays follow
        its rows), or one matrix per benchmark, joined here on model id (arrays follow the
        rows of the first). Every model needs a score on every subset item; use
        :meth:`estimate` for models with missing benchmarks.
        """
        self._check_fitted()
        level = check_level(level)
        if isinstance(matrix, Mapping):
            parts = list(matrix.values())
            if not parts:
                raise InputError("joint: estimate_matrix got no matrices")
            matrix = ResponseMatrix.concat_items(parts).select_models(parts[0].model_ids)
        joint = matrix.select_items(self.subset_item_ids)
        gaps = np.isnan(joint.values)
        if gaps.any():
            rows, cols = np.nonzero(gaps)
            raise InputError(
                f"joint: {matrix.source}: model {joint.model_ids[rows[0]]!r} has no score for "
                f"subset item {joint.item_ids[cols[0]]!r} ({gaps.sum()} such entries)"
            )
        return self._predict(joint, level)

    def estimate(self, scores: Mapping[ItemId, float], *, level: float = 0.9) -> JointEstimates:
        """Estimates of one model from its scores keyed by item id (other ids are ignored).

        With every benchmark scored: joint estimates of each benchmark and ``"average"``.
        A benchmark with none of its subset items scored is *missing*: the others get their
        per-benchmark estimates, there is no average, and a :class:`JointFallbackWarning`
        says so. A benchmark with only part of its subset scored raises
        :class:`ItemMismatchError` naming the missing items.
        """
        self._check_fitted()
        level = check_level(level)
        if not isinstance(scores, Mapping):
            raise InputError(
                f"joint: scores must be a mapping item id -> score, got {type(scores).__name__}"
            )
        present, missing = self._coverage(scores)
        if not present:
            raise ItemMismatchError(
                f"joint: no subset item of any benchmark ({list(self.benchmarks_)}) was scored"
            )
        ids = [i for b in present for i in self.subsets_[b].item_ids]
        row = np.array([[checked_score(i, scores[i], owner="joint") for i in ids]])
        matrix = ResponseMatrix(row, ["model"], ids, source="joint.estimate")
        if not missing:
            joint = self._predict(matrix, level)
            result = {out: _single(joint[out], level) for out in self.outputs_}
            return JointEstimates(result, dict.fromkeys(self.outputs_, "joint"))
        warnings.warn(
            f"joint: no scores for benchmarks {missing}: returning per-benchmark estimates for "
            f"{present} and no {AVERAGE!r}",
            JointFallbackWarning,
            stacklevel=2,
        )
        result = {
            b: _single(self.base_[b].estimate_matrix(matrix, level=level), level) for b in present
        }
        return JointEstimates(result, dict.fromkeys(present, "per-benchmark"), missing)

    def _coverage(self, scores: Mapping[ItemId, float]) -> tuple[list[str], list[str]]:
        """Benchmarks fully scored and benchmarks not scored at all; partial ones raise."""
        present, missing = [], []
        for b in self.benchmarks_:
            items = self.subsets_[b].item_ids
            lacking = [i for i in items if i not in scores]
            if not lacking:
                present.append(b)
            elif len(lacking) == len(items):
                missing.append(b)
            else:
                raise ItemMismatchError(
                    f"joint: {b}: no score for subset items {_preview(lacking)} (a benchmark "
                    "must be scored on all of its subset items or none)"
                )
        return present, missing

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable fitted state (no pickles); :meth:`from_state` rebuilds it."""
        self._check_fitted()
        state = {
            "estimator": self.name,
            "state_version": STATE_VERSION,
            "params": self.get_params(),
            "benchmarks": list(self.benchmarks_),
            "subsets": {b: self.subsets_[b].to_dict() for b in self.benchmarks_},
            "base": {b: self.base_[b].state_dict() for b in self.benchmarks_},
            "mirt": None if self.mirt_ is None else self.mirt_.to_dict(),
            "head": self.head_.to_dict(),
            "bands": {out: band.to_dict() for out, band in self.bands_.items()},
            "n_source": self.n_source_,
            "cv_mae": self.cv_mae_,
        }
        json.dumps(state, allow_nan=False)  # fail here, not in the bundle writer
        return state

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> JointEstimator:
        """Rebuild a fitted estimator from :meth:`state_dict`."""
        if not isinstance(state, Mapping) or state.get("estimator") != cls.name:
            found = state.get("estimator") if isinstance(state, Mapping) else type(state).__name__
            raise InputError(f"joint: state is not a joint estimator state (found {found!r})")
        if seal_holds(state) is False:
            raise InputError(
                "joint: checksum mismatch: the estimator state was edited or corrupted after "
                "it was written"
            )
        if state.get("state_version") != STATE_VERSION:
            raise InputError(
                f"joint: state version {state.get('state_version')!r} is not supported "
                f"(expected {STATE_VERSION})"
            )
        try:
            estimator = cls(**state["params"])
            benchmarks = tuple(state["benchmarks"])
            estimator.benchmarks_ = benchmarks
            estimator.outputs_ = (*benchmarks, AVERAGE)
            estimator.subsets_ = {b: Subset.from_dict(state["subsets"][b]) for b in benchmarks}
            estimator.base_ = {b: estimator_from_state(state["base"][b]) for b in benchmarks}
            mirt = state["mirt"]
            estimator.mirt_ = None if mirt is None else ItemParams.from_dict(mirt)
            estimator.head_ = RidgeHead.from_dict(state["head"])
            estimator.bands_ = {
                out: ConformalBand.from_dict(state["bands"][out]) for out in estimator.outputs_
            }
            estimator.n_source_ = int(state["n_source"])
            estimator.cv_mae_ = {k: float(v) for k, v in state["cv_mae"].items()}
        except KeyError as exc:
            raise InputError(f"joint: estimator state lacks field {exc.args[0]!r}") from exc
        except TypeError as exc:
            raise InputError(f"joint: estimator state has unknown parameters ({exc})") from exc
        except (ValueError, AttributeError, OverflowError) as exc:  # wrong types, ragged arrays
            raise InputError(f"joint: estimator state is malformed ({exc})") from exc
        estimator._check_head_shapes()
        estimator._probe()
        return estimator

    def _probe(self) -> None:
        """Estimate one model (every other subset item right): a state whose parts do not fit
        together (a base state short of a field, a vector one entry short) fails here, when
        it is loaded, and not in the middle of a reconstruction."""
        scores = {item: float(k % 2) for k, item in enumerate(self.subset_item_ids)}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.estimate(scores)
        except (
            MicrobenchError,
            ValueError,
            TypeError,
            IndexError,
            KeyError,
            ArithmeticError,
        ) as exc:
            raise InputError(
                f"joint: estimator state is unusable ({type(exc).__name__}: {exc})"
            ) from exc

    def _check_head_shapes(self) -> None:
        """The head's arrays must fit the features and outputs (else estimates fail later)."""
        p, n_out = 0, len(self.outputs_)
        if "estimates" in self.features:
            p += len(self.benchmarks_)
        if "items" in self.features:
            p += len(self.subset_item_ids)
        if "mirt" in self.features and self.mirt_ is not None:
            p += self.mirt_.n_dims
        expected = {"center": (p,), "scale": (p,), "coef": (p, n_out)}
        expected |= dict.fromkeys(("intercept", "alpha", "item_scale"), (n_out,))
        for name, shape in expected.items():
            found = getattr(self.head_, name).shape
            if found != shape:
                raise InputError(
                    f"joint: estimator state head.{name} has shape {found}, expected {shape} "
                    f"({p} features, {n_out} outputs)"
                )


def _single(arrays: tuple[np.ndarray, ...], level: float) -> Estimate:
    value, lower, upper = (float(np.asarray(a)[0]) for a in arrays[:3])
    return Estimate(value, lower, upper, level)
