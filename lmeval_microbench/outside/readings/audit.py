"""Audit reading (AIPW): a prediction corrected by the model's own answers on random items.

A bundle may reserve part of its budget for *audit* items: a simple random sample of the
benchmark items the selection did not choose (``Subset.info["audit_items"]``). The model's
level is fitted on the informative items only (the Rasch shift of :mod:`.own`), which
predicts every other item; the audit items' residuals ``answer - prediction`` then estimate
the mean residual over all non-informative items without bias, whatever the predictor and
however unlike the sources the model is (augmented inverse-probability weighting, the
prediction-powered estimate of Angelopoulos et al. with a finite population):

    score = (sum of informative answers + sum of predictions over the rest
             + N_out * mean audit residual) / N

with ``N_out`` the non-informative items. Its standard error is the residual spread over the
square root of the audit size, with the finite-population correction ``1 - n_A / N_out``.
That is the price of the guarantee: with a residual spread of about 0.4 an audit of 25 items
costs some 8 points of standard error, so the reading is worth its items only where
everything else fails (far outside the sources) or the budget is large.

The estimate is ppi_py's prediction-powered mean with ``lam=1`` to within 1e-15
(``tools/bench_ppi.py``, ``bench/ppi.md``). Its interval differs by the finite-population
correction, which ppi_py has not: the rest of a benchmark is not a sample of an endless
population. PPI++'s power-tuned weight, estimated from one model's few audit items, erred
more than ``lam=1`` in 11 of that report's 24 cases and less in 4.

That noise must not also decide *whether* a model lies outside the sources: read by the AIPW
estimate itself, a model in the middle of the sources sat beyond them by chance often
enough that the guard moved it to this noisy reading (MuSR's random splits, 50 lasso items of
which 15 audited: guarded 3.51 points where its inner estimate erred 1.59, a mean guard
weight of 0.41 on models of the sources' own population). The model is placed by the
de-shrunk reading (:mod:`.deshrunk`) instead, as the checked reading does; states saved
before that placement keep placing by the AIPW estimate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.special import expit

from ...errors import InputError
from .base import Reading, ScaleMap, SourceView, floats, number
from .deshrunk import DeshrunkReading
from .own import SHIFT_STEPS, level_posterior, logistic_sums, shift_grid

MIN_AUDIT = 2
"""Fewest audit items: the residual spread needs two."""
FEW_AUDIT = 15
"""Fewer audit items and a build whose guard reads this reading says so (:mod:`...build`).
Lasso items in a budget of 50 on IFEval and MuSR, the strongest fifth held out (all sources,
three seeds, ``bench/audit_counts.md``): without an audit 9.99 and 5.05 points; 5 audit items
10.89 and 7.29, 10 items 9.21 and 6.92, 15 items 6.55 and 5.38, 25 items 8.26 and 4.35. On
random splits every audit size erred a little more than none (MuSR 1.56 -> 1.63-1.92)."""
MIN_RESIDUAL_VARIANCE = 0.01
"""Floor of the residual variance (an audit whose residuals happen to agree is not exact)."""


class AuditReading(Reading):
    """Own-level prediction from the informative items plus the mean audit residual."""

    name = "audit"

    @classmethod
    def available(cls, view: SourceView) -> str | None:
        n_audit = int(view.audit.sum())
        if n_audit < MIN_AUDIT:
            return f"the subset has {n_audit} audit items; the audit reading needs {MIN_AUDIT}"
        return None

    def fit(self, view: SourceView) -> AuditReading:
        reason = self.available(view)
        if reason is not None:
            raise InputError(f"outside reading 'audit': {reason}")
        rates = view.rates
        logits = np.log(rates) - np.log1p(-rates)
        rest = np.ones(rates.size, dtype=bool)
        rest[view.positions] = False
        grid = shift_grid()
        self.audit_ = view.audit.copy()
        self.logits_ = logits[view.positions]
        self.rest_sum_ = logistic_sums(grid, logits[rest])
        self.n_items_ = view.n_items
        self.scale_ = view.scale_map()
        precise = DeshrunkReading.available(view) is None
        self.locator_ = DeshrunkReading().fit(view) if precise else None
        return self

    def read(self, values: np.ndarray, inner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        informative, audit = values[:, ~self.audit_], values[:, self.audit_]
        grid = shift_grid()
        if informative.shape[1]:
            weights = level_posterior(informative, self.logits_[~self.audit_], grid)
        else:  # no informative items: the sources' own level (shift 0) predicts
            weights = np.zeros((values.shape[0], grid.size))
            weights[:, grid.size // 2] = 1.0
        predicted = weights @ expit(grid[:, None] + self.logits_[None, self.audit_])
        residual = audit - predicted
        n_audit = audit.shape[1]
        n_out = self.n_items_ - informative.shape[1]
        out_sum = weights @ self.rest_sum_ + predicted.sum(axis=1) + n_out * residual.mean(axis=1)
        mean = (informative.sum(axis=1) + out_sum) / self.n_items_
        spread = np.maximum(residual.var(axis=1, ddof=1), MIN_RESIDUAL_VARIANCE)
        correction = max(1.0 - n_audit / n_out, 0.0)
        se = (n_out / self.n_items_) * np.sqrt(spread / n_audit * correction)
        return self.scale_(mean, se)

    def locate(self, values: np.ndarray, inner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The de-shrunk reading where the sources allow one (see the module), else this one."""
        if self.locator_ is None:
            return super().locate(values, inner)
        return self.locator_.read(values, inner)

    def state(self) -> dict[str, Any]:
        state = {
            "audit": self.audit_.astype(int).tolist(),
            "logits": self.logits_.tolist(),
            "rest_sum": self.rest_sum_.tolist(),
            "n_items": self.n_items_,
            "scale": self.scale_.to_dict(),
        }
        if self.locator_ is not None:
            state["locator"] = self.locator_.state()
        return state

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> AuditReading:
        where = "outside reading 'audit'"
        reading = cls()
        reading.audit_ = floats(state, "audit", where).astype(bool)
        reading.logits_ = floats(state, "logits", where)
        reading.rest_sum_ = floats(state, "rest_sum", where)
        if reading.audit_.size != reading.logits_.size or reading.rest_sum_.size != SHIFT_STEPS:
            raise InputError(f"{where}: fields 'audit', 'logits' and 'rest_sum' do not fit")
        reading.n_items_ = int(number(state, "n_items", where))
        reading.scale_ = ScaleMap.from_dict(state["scale"])
        locator = state.get("locator")
        if locator is not None and not isinstance(locator, Mapping):
            raise InputError(f"{where}: field 'locator' is not a saved reading")
        reading.locator_ = None if locator is None else DeshrunkReading.from_state(locator)
        return reading
