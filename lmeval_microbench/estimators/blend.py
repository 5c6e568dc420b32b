"""``blend``: the mean of estimators read on the same items, where nothing can choose one.

With 10 source models whose mean over the matrix items is the score, no fold leaves enough
models to cross-validate a choice (:data:`lmeval_microbench.auto.FALLBACK`). Two estimators
that stay honest outside the sources are left there: ``guarded`` (a regression on the sources,
moved to a reading of the model's own answers beyond them) and ``similar`` (the model's
answers predicted from the sources' answers to the same items, corrected by its own
residuals). They err about equally with so few sources, but not on the same models, so their
mean errs less than either: on the peer suite's matrices cut to 10 sources, stratified random
items, the blend erred 3.71 points on the strongest fifth and 3.53 on random splits where
``guarded`` alone erred 3.86 and 3.57 (psn's 10 sources: 2.76 and 4.61 against 2.82 and 4.94;
``bench/small_sources.md``). Where the score is not the matrix mean, ``similar``'s map to it
is a line fitted on the sources and its interval does not carry that line's error, so the
fallback keeps ``guarded`` alone there (:data:`..auto.choice.FALLBACK_CALIBRATED`).

The interval is the mean of the members' lower ends and the mean of their upper ends. It
holds wherever both members' intervals hold (both ends are then on the right side of the
truth), and it keeps what each member knows beyond the sources: guarded's floor and reach,
similar's studentized width, each at half weight.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InputError
from ..irt.params import ItemParams
from ..responses import ResponseMatrix
from ..subset import Subset
from ._own import OwnStagesEstimator, state_errors
from .base import ScoreEstimator
from .similar import SimilarEstimator

MEMBERS = ("guarded", "similar")
"""The estimators the default blend averages."""


class BlendEstimator(OwnStagesEstimator):
    """The mean of ``members``' estimates and of their interval ends.

    Parameters
    ----------
    members
        Registered estimators to average (two or more, distinct, not ``blend``).

    ``calibration``, ``interval``, ``n_folds`` and ``random_state`` are passed to every
    member.
    """

    name = "blend"
    min_items = SimilarEstimator.min_items
    """Its default members' largest."""

    def __init__(
        self,
        *,
        members: Sequence[str] = MEMBERS,
        calibration: str = "linear",
        interval: str = "binned",
        n_folds: int = 5,
        random_state: int | None = 0,
    ) -> None:
        super().__init__(
            calibration=calibration,
            interval=interval,
            n_folds=n_folds,
            random_state=random_state,
        )
        self.members = tuple(members) if isinstance(members, (list, tuple)) else members

    def _validate_params(self) -> None:
        super()._validate_params()
        from . import ESTIMATORS

        names = self.members
        known = sorted(set(ESTIMATORS) - {self.name})
        if (
            not isinstance(names, tuple)
            or len(names) < 2
            or len(set(names)) != len(names)
            or any(n not in known for n in names)
        ):
            raise InputError(
                f"blend: members must be two or more distinct estimators of {known}, got {names!r}"
            )

    # ------------------------------------------------------------------ fit
    def fit(
        self,
        source: ResponseMatrix,
        subset: Subset,
        target: np.ndarray,
        *,
        irt: ItemParams | None = None,
        cross_fit: np.ndarray | None = None,
    ) -> BlendEstimator:
        """Fit every member on the same models and items; returns ``self``.

        ``cross_fit``, the blend's own estimates where every fold re-selected the items
        (:mod:`lmeval_microbench.crossfit`), is passed to every member: each calibrates
        its interval on the errors of the procedure the bundle runs, as it would on its own.
        """
        target, _ = self._begin_fit(source, subset, target)
        self.members_ = [
            self._sibling(name).fit(source, subset, target, irt=irt, cross_fit=cross_fit)
            for name in self.members
        ]
        self.band_ = self.members_[0].band_
        self.head_: dict[str, Any] = {}
        self.n_source_ = min(m.n_source_ for m in self.members_)
        self.cv_mae_ = float(np.mean([m.cv_mae_ for m in self.members_]))
        return self

    def with_floor(self, floor: float) -> BlendEstimator:
        """Pass the lowest score a model can have to every member; ``self``."""
        self._check_fitted()
        for member in self.members_:
            member.with_floor(floor)
        return self

    def widen_intervals(self, factor: float) -> BlendEstimator:
        """Widen every member's interval by ``factor`` (:mod:`..auto.widen`); ``self``."""
        self._check_fitted()
        for member in self.members_:
            member.widen_intervals(factor)
        self.band_ = self.members_[0].band_
        return self

    # ------------------------------------------------------------------ estimate
    def _predict(
        self, values: np.ndarray, level: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        found = [member.predict_rows(values, level)[:3] for member in self.members_]
        value, lower, upper = (np.mean([f[k] for f in found], axis=0) for k in range(3))
        se = np.full(value.shape, np.nan)
        return value, np.minimum(lower, value), np.maximum(upper, value), se

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        self._check_fitted()
        return {
            **self._state_header(),
            "members": [member.state_dict() for member in self.members_],
        }

    @classmethod
    def _from_own_state(cls, state: Mapping[str, Any]) -> BlendEstimator:
        with state_errors(cls.name):
            estimator = cls._from_header(state)
            estimator._validate_params()
            members = [ScoreEstimator.from_state(s) for s in state["members"]]
        names = tuple(m.name for m in members)
        if names != estimator.members:
            raise InputError(f"blend: saved members {names} differ from its parameters")
        if any(m.item_ids_ != estimator.item_ids_ for m in members):
            raise InputError("blend: a member was fitted on other items")
        estimator.members_ = members
        estimator.band_ = members[0].band_
        return estimator
