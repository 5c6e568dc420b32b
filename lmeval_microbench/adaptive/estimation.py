"""Ability after each answer: an EAP posterior on a fixed grid, updated one item at a time.

Why a grid kept between steps instead of calling :func:`~lmeval_microbench.irt.estimate_abilities`
after every answer: an adaptive run re-estimates the ability after each item, and a simulation
does that for thousands of models at once. Adding one item's log-likelihood column to a kept
(models x nodes) log-posterior costs O(m Q) per step instead of O(m Q n); the grid and prior
are exactly those of the package's 1-D EAP, so the numbers agree with it (tested).

The posterior also gives what the score map needs: the expected probability of a right answer
on every item not asked yet, averaged over the ability's posterior (not plugged in at the
mean), so few answers give honest, shrunk expectations. :func:`impute` then calibrates those
expectations to the answers actually given (see there for why).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, logit

from ..errors import InputError
from ..irt import _math
from ..irt.ability import EAP_STEP
from ..irt.params import ItemParams

IMPUTATIONS = ("shifted", "posterior")
"""How unasked items are filled in: see :func:`impute` (``posterior`` is the version-1 rule)."""
PSEUDO_ANSWERS = 1.0
"""Weight, in answers, of the posterior's own expectation in the shifted imputation's target."""
_SHIFT_BOUND = 15.0
_BISECTIONS = 50


class GridPosterior:
    """Posterior of the abilities of ``n_models`` models over a grid of the 1-D ability.

    Parameters
    ----------
    params
        1-D item parameters of the pool (positions index its ``item_ids``).
    n_models
        Rows estimated together (a simulation replays many; a live run has one).
    prior_mean, prior_sd
        Normal prior of the ability.
    """

    def __init__(
        self, params: ItemParams, n_models: int, *, prior_mean: float = 0.0, prior_sd: float = 1.0
    ) -> None:
        if params.n_dims != 1:
            raise InputError(f"adaptive testing needs 1-D item parameters, got {params.n_dims}-D")
        if not (np.isfinite(prior_sd) and prior_sd > 0 and np.isfinite(prior_mean)):
            raise InputError(
                f"prior needs a finite mean and positive sd, got {prior_mean}, {prior_sd}"
            )
        n_nodes = round(2 * _math.GRID_BOUND / EAP_STEP) + 1
        std_nodes, log_w = _math.equispaced_normal_grid(n_nodes)
        self.nodes = prior_mean + prior_sd * std_nodes[:, 0]
        self.resolution = EAP_STEP * prior_sd / np.sqrt(12.0)
        z = self.nodes[:, None] * params.a[:, 0][None, :] + params.d[None, :]
        self.log_p, self.log_q = _math.log_response_probabilities(z, params.g, params.u)
        self.prob = np.exp(self.log_p)
        self.log_post = np.tile(log_w, (n_models, 1))

    @property
    def n_models(self) -> int:
        return self.log_post.shape[0]

    def update(self, rows: np.ndarray, items: np.ndarray, scores: np.ndarray) -> None:
        """Add the answers ``scores`` (in [0, 1]) of ``rows`` to ``items`` (positions)."""
        rows = np.asarray(rows, dtype=np.intp)
        items = np.asarray(items, dtype=np.intp)
        scores = np.asarray(scores, dtype=np.float64)
        if np.any((scores < 0) | (scores > 1)) or not np.all(np.isfinite(scores)):
            bad = scores[~((scores >= 0) & (scores <= 1))][:3]
            raise InputError(f"item scores must lie in [0, 1], got {bad}")
        contribution = scores[:, None] * self.log_p[:, items].T
        contribution += (1.0 - scores)[:, None] * self.log_q[:, items].T
        np.add.at(self.log_post, rows, contribution)

    def weights(self) -> np.ndarray:
        """Normalised posterior weights (m, Q)."""
        shifted = self.log_post - self.log_post.max(axis=1, keepdims=True)
        weights = np.exp(shifted)
        return weights / weights.sum(axis=1, keepdims=True)

    def mean_se(self) -> tuple[np.ndarray, np.ndarray]:
        """EAP ability and posterior sd of every model (floored at the grid's resolution)."""
        weights = self.weights()
        mean = weights @ self.nodes
        variance = weights @ self.nodes**2 - mean**2
        return mean, np.sqrt(np.maximum(variance, self.resolution**2))

    def expected_scores(self) -> np.ndarray:
        """Posterior expected P(right) of every model on every pool item, (m, n)."""
        return self.weights() @ self.prob


def impute(
    expected: np.ndarray,
    asked: np.ndarray,
    scores: np.ndarray,
    mode: str = "shifted",
    pseudo: float = PSEUDO_ANSWERS,
) -> np.ndarray:
    """Answers where asked, calibrated expected scores elsewhere, (m, n).

    ``posterior``: the posterior expected P(right) of every unasked item, as is.

    ``shifted`` (default): the expectations of a row are moved by one common shift ``c`` on the
    logit scale, chosen so that their mean over the items the row *was* asked equals its
    observed mean there (plus ``pseudo`` answers at the posterior's own expectation, which keeps
    a run of one or two answers from jumping to 0 or 1). Why: the 2PL ability update weights
    items by slope, so a model whose answers do not follow the 1-D model fitted on the source
    models (the strongest models: on the leaderboard's best fifth, with a 2PL fitted on the
    rest, the posterior predicts 55 % on the asked MMLU items where the models score 74 %)
    gets expectations that are too low on every item it was not asked, and a full-score
    estimate biased by several points. The shift makes the imputed items agree with the
    model's own hit rate on items of known difficulty; for a model the 2PL describes, ``c`` is
    near 0 and nothing changes (``bench/adaptive.md``).
    """
    if mode not in IMPUTATIONS:
        raise InputError(f"unknown imputation {mode!r}; expected one of {IMPUTATIONS}")
    expected = np.asarray(expected, dtype=np.float64)
    asked = np.asarray(asked, dtype=bool)
    observed = np.where(asked, np.nan_to_num(np.asarray(scores, dtype=np.float64)), 0.0)
    if mode == "shifted":
        expected = _shifted(expected, asked, observed, pseudo)
    return np.where(asked, observed, expected)


def impute_from_rates(
    rates: np.ndarray, asked: np.ndarray, scores: np.ndarray, pseudo: float = PSEUDO_ANSWERS
) -> np.ndarray:
    """Answers where asked, the source models' (smoothed) success rates elsewhere, shifted (as in
    ``shifted``) to the run's own hit rate on the items it was asked.

    No IRT enters: an item is as hard for the run as it was for the sources, up to one common
    logit shift. Why it is kept beside the posterior: beyond the sources the 2PL fitted on
    them reads a model wrong in a consistent direction (with every pool item answered, its
    expected score sat 6-8 points under the true mean of the strongest fifth of IFEval and
    MuSR, and the posterior of a 50-item run 5-9 points under it), and this reading erred the
    other way (10-13 points over); the two bracket such a model (see
    :meth:`.scoring.ScoreMap.predict_run`).
    """
    asked = np.asarray(asked, dtype=bool)
    expected = np.broadcast_to(np.asarray(rates, dtype=np.float64), asked.shape)
    return impute(expected, asked, scores, "shifted", pseudo)


def rates_raised(rates: np.ndarray, asked: np.ndarray, scores: np.ndarray, z: float) -> np.ndarray:
    """The source models' (smoothed) success rates on every pool item, shifted to the run's hit
    count raised by ``z`` binomial standard deviations: the IRT-free reading of the strongest model
    the run's answers allow, given how few items it was asked (a negative ``z``: the weakest).

    The deviation is the binomial one of the asked items at the run's own shifted rates,
    ``sqrt(sum p (1 - p))``: a few answers after 10 items, a far smaller share after 50. The
    asked items are read at the raised rate too, and without pseudo answers: the bound is on
    the model's propensity, of which its answers are one noisy draw. Kept as answered, or with
    the pseudo answers' pull towards the sources, the bound fell short of the strongest fifth
    of MMLU's leaderboard models held out (25 items: 90 % intervals covering 0.75-0.81 of
    them, against 0.93). A run that answered every item right is raised to the shift's bound:
    nothing it answered says how far up it lies.
    """
    asked = np.asarray(asked, dtype=bool)
    expected = np.broadcast_to(np.asarray(rates, dtype=np.float64), asked.shape)
    observed = np.where(asked, np.nan_to_num(np.asarray(scores, dtype=np.float64)), 0.0)
    own = _shifted(expected, asked, observed, 0.0)
    spread = np.sqrt(np.where(asked, own * (1.0 - own), 0.0).sum(axis=1))
    return _shifted(expected, asked, observed, 0.0, extra=z * spread)


def _shifted(
    expected: np.ndarray,
    asked: np.ndarray,
    observed: np.ndarray,
    pseudo: float,
    extra: np.ndarray | float = 0.0,
) -> np.ndarray:
    """Every row's expectations moved by the logit shift that matches its asked items (with
    ``extra`` hits added to each row's own).

    The mean over asked items of ``sigmoid(logit p + c)`` increases in ``c``, so a vectorised
    bisection over all rows at once finds each row's ``c``; rows with nothing asked keep ``c = 0``.
    """
    n_asked = asked.sum(axis=1)
    logits = logit(np.clip(expected, 1e-6, 1.0 - 1e-6))
    own = np.where(asked, expected, 0.0).sum(axis=1)
    hits = observed.sum(axis=1) + extra
    target = (hits + pseudo * own / np.maximum(n_asked, 1)) / np.maximum(n_asked + pseudo, 1e-12)
    low = np.full(len(expected), -_SHIFT_BOUND)
    high = np.full(len(expected), _SHIFT_BOUND)
    for _ in range(_BISECTIONS):
        mid = (low + high) / 2.0
        mean = np.where(asked, expit(logits + mid[:, None]), 0.0).sum(axis=1)
        above = mean > target * n_asked
        high = np.where(above, mid, high)
        low = np.where(above, low, mid)
    shift = np.where(n_asked > 0, (low + high) / 2.0, 0.0)
    return expit(logits + shift[:, None])
