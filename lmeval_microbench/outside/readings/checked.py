"""Checked reading: the de-shrunk reading, trusted as far as the own-level reading allows.

The de-shrunk reading (:mod:`.deshrunk`) is precise but assumes that the inner estimate keeps
rising along its line beyond the sources; where items that every strong model answers right
make it bend, it falls short of a model far beyond them, and the sources' own
extrapolation folds, which cannot reach that far, do not show it. The own-level reading
(:mod:`.own`) assumes much less (one difficulty order of the items) and is noisier.

Read together, the two are weighted as an unbiased and a possibly biased estimate of the
same score: the squared bias of the de-shrunk reading is estimated from their disagreement,
``b^2 = max(0, (own - deshrunk)^2 - se_own^2 - se_deshrunk^2)``, and each gets the weight
that minimises the mean squared error, ``w_deshrunk = se_own^2 / (se_own^2 + se_deshrunk^2 +
b^2)``. Where they agree the precise reading dominates; where they disagree by more than
their noise the own reading takes over. (On IFEval's strongest fifth, estimated from the
rest with 50 greedy items, the de-shrunk reading alone erred by 7-9 points and the own
reading by 4; on MuSR the de-shrunk reading erred by 2.4 and the own one by 5.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .base import Reading, SourceView, se_floor
from .deshrunk import DeshrunkReading
from .own import OwnLevelReading


class CheckedReading(Reading):
    """De-shrunk and own-level readings weighted by their noise and estimated bias."""

    name = "checked"

    @classmethod
    def available(cls, view: SourceView) -> str | None:
        return DeshrunkReading.available(view)

    def fit(self, view: SourceView) -> CheckedReading:
        self.own_ = OwnLevelReading().fit(view)
        self.deshrunk_ = DeshrunkReading().fit(view)
        return self

    def read(self, values: np.ndarray, inner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        own, own_se = self.own_.read(values, inner)
        desh, desh_se = self.deshrunk_.read(values, inner)
        own_var, desh_var = se_floor(own_se) ** 2, se_floor(desh_se) ** 2
        bias_sq = np.maximum((own - desh) ** 2 - own_var - desh_var, 0.0)
        weight = own_var / (own_var + desh_var + bias_sq)
        value = weight * desh + (1.0 - weight) * own
        se = np.sqrt(weight**2 * (desh_var + bias_sq) + (1.0 - weight) ** 2 * own_var)
        return value, se

    def locate(self, values: np.ndarray, inner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The de-shrunk reading: precise enough not to place models of the sources outside
        them (the noisier own reading would, and move their estimates for nothing)."""
        return self.deshrunk_.read(values, inner)

    def state(self) -> dict[str, Any]:
        return {"own": self.own_.state(), "deshrunk": self.deshrunk_.state()}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> CheckedReading:
        reading = cls()
        reading.own_ = OwnLevelReading.from_state(state["own"])
        reading.deshrunk_ = DeshrunkReading.from_state(state["deshrunk"])
        return reading
