"""Reliability benchmark: how well each selection method x estimator recovers held-out scores.

A *split* divides the models into source models (which the item selection, the IRT fit and
the estimator fits see) and target models (which are only estimated, from their scores on the
selected items, and compared with their true full-benchmark score). Protocols:

``random``         ``repeats`` random splits, 80 % source / 20 % target.
``extrapolation``  targets = the best 20 % of models by true score, sources = the rest: can a
                   subset chosen on weaker models rank and score stronger ones? The split is
                   the same every repeat; repeats vary only the selection seed.
``holdout``        sources = every model of the main matrix, targets = the models of a second
                   (held-out) matrix; repeats vary the selection seed.
``loo``            leave-one-model-out for small matrices: each model in turn is the target of
                   a split with every other model as source; one repeat is a full cycle.

Work is shared so that a benchmark takes seconds: IRT is fitted once per source set (not
per estimator, and once in all for ``extrapolation``/``holdout``), items are selected once per
method x budget x repeat and every estimator is fitted on that same subset.

Metrics, per method x estimator x budget x protocol, pooled over repeats (score points =
percent of the full benchmark):

``mae``, ``rmse``, ``max_error``, ``bias``  of estimate - truth over all target estimates;
``kendall_tau``  Kendall's tau-b between estimates and truths of the targets of one repeat,
                 averaged over repeats;
``mdad``         minimum detectable accuracy difference, see :func:`mdad_from_counts`;
``coverage90``   share of targets whose truth lies in the estimator's 90 % interval;
``width90``      mean width of that interval;
``seconds``      estimator fits and estimates, summed over repeats (``selection_seconds``: the
                 method's item selection, shared by all estimators of that method).

Records also carry ``n_sources`` (source models per split), ``n_targets`` (target models per
repeat; for ``loo`` every model), ``items`` (items estimated from), ``repeats``, ``bias``,
``mae_sd`` (spread of the per-repeat MAE) and ``mdad_status``.
"""

from __future__ import annotations

import inspect
import math
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import kendalltau
from tqdm.auto import tqdm

from ._rng import SeedLike, spawn
from .build import fit_source_irt
from .errors import ConvergenceWarning, InputError
from .estimators import ESTIMATORS, make_estimator
from .estimators.base import MIN_SOURCE_MODELS
from .irt.params import ItemParams
from .responses import ResponseMatrix
from .selection import SELECTORS, make_selector
from .selection.base import Selector, Subset

PROTOCOLS = ("random", "extrapolation", "holdout", "loo")
ALL = "all"
"""Budget keyword (and method name) for "every item of the matrix"."""
DEFAULT_BUDGETS: tuple[int | str, ...] = (10, 25, 50, 100, ALL)
DEFAULT_REPEATS = 5
TARGET_SHARE = 0.2
LOO_BELOW = 30
"""Matrices with fewer models than this get ``loo`` instead of ``random``/``extrapolation``."""
LOO_MAX_MODELS = 200
"""``loo`` fits IRT once per model; above this many models use ``random``."""
LEVEL = 0.9
MDAD_BIN_WIDTH = 0.5
MDAD_AGREEMENT = 0.8
MDAD_MIN_PAIRS = 10
_ZERO_GAP = 1e-9
_PAIR_BLOCK = 512

Budget = int | str


# ---------------------------------------------------------------------- pairwise metrics
def gap_agreement_counts(
    estimate: np.ndarray, truth: np.ndarray, *, bin_width: float = MDAD_BIN_WIDTH
) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of models per true-gap bin, and how many of them the estimates order correctly.

    ``estimate`` and ``truth`` are in score points. Bin ``k`` holds the pairs with true gap
    ``|truth_i - truth_j|`` in ``[k w, (k + 1) w)``; pairs with no true gap are left out. A
    pair agrees when ``sign(est_i - est_j) == sign(truth_i - truth_j)``, so tied estimates of
    models with different truths count as disagreement. Pairs are enumerated in row blocks so
    that a few thousand models stay within memory.
    """
    estimate = np.asarray(estimate, dtype=np.float64).reshape(-1)
    truth = np.asarray(truth, dtype=np.float64).reshape(-1)
    if estimate.shape != truth.shape:
        raise InputError(f"estimate has {estimate.size} values, truth has {truth.size}")
    if bin_width <= 0:
        raise InputError(f"bin width must be positive, got {bin_width!r}")
    n = truth.size
    pairs = np.zeros(0, dtype=np.int64)
    agreeing = np.zeros(0, dtype=np.int64)
    for start in range(0, max(n - 1, 0), _PAIR_BLOCK):
        rows = np.arange(start, min(start + _PAIR_BLOCK, n - 1))
        upper = np.arange(n)[None, :] > rows[:, None]
        true_diff = truth[rows, None] - truth[None, :]
        est_diff = estimate[rows, None] - estimate[None, :]
        gap = np.abs(true_diff)
        keep = upper & (gap > _ZERO_GAP)
        bins = np.floor(gap[keep] / bin_width + 1e-9).astype(np.int64)
        agree = (np.sign(est_diff) == np.sign(true_diff))[keep]
        block_pairs = np.bincount(bins)
        block_agree = np.bincount(bins, weights=agree).astype(np.int64)
        pairs = _add_padded(pairs, block_pairs)
        agreeing = _add_padded(agreeing, block_agree)
    return pairs, agreeing


def _add_padded(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros(max(a.size, b.size), dtype=np.int64)
    out[: a.size] += a
    out[: b.size] += b
    return out


def mdad_from_counts(
    pairs: np.ndarray,
    agreeing: np.ndarray,
    *,
    bin_width: float = MDAD_BIN_WIDTH,
    threshold: float = MDAD_AGREEMENT,
    min_pairs: int = MDAD_MIN_PAIRS,
) -> float:
    """Minimum detectable accuracy difference (MDAD) from per-bin pair counts, in points.

    Following Yauney et al., "How reliable is LM micro-benchmarking?": the smallest true gap
    between two models that the estimates still order correctly with probability at least
    ``threshold``. Concretely:

    1. pairs are binned by true gap (bins of ``bin_width`` points, see
       :func:`gap_agreement_counts`; empty bins are skipped);
    2. bins with fewer than ``min_pairs`` pairs are merged upward: consecutive non-empty bins,
       from the smallest gap up, are pooled into one group until it holds ``min_pairs`` pairs;
       a last group still short of ``min_pairs`` (the sparse large-gap tail) joins the group
       below it. A group's lower edge is the lower edge of its first bin;
    3. MDAD is the lowest group lower edge from which every group upward has an agreement rate
       of at least ``threshold``.

    Returns ``inf`` when even the largest-gap group is ordered worse than ``threshold`` and NaN
    when there are fewer than ``min_pairs`` pairs in all.
    """
    pairs = np.asarray(pairs, dtype=np.int64)
    agreeing = np.asarray(agreeing, dtype=np.int64)
    starts, group_pairs, group_agree = _merge_sparse_bins(pairs, agreeing, min_pairs)
    if not starts:
        return math.nan
    ok = np.asarray(group_agree) >= threshold * np.asarray(group_pairs)
    failing = np.flatnonzero(~ok)
    if failing.size == 0:
        return starts[0] * bin_width
    if failing[-1] == len(starts) - 1:
        return math.inf
    return starts[failing[-1] + 1] * bin_width


def _merge_sparse_bins(
    pairs: np.ndarray, agreeing: np.ndarray, min_pairs: int
) -> tuple[list[int], list[int], list[int]]:
    """Groups of consecutive non-empty bins with at least ``min_pairs`` pairs each."""
    starts: list[int] = []
    group_pairs: list[int] = []
    group_agree: list[int] = []
    open_start, open_pairs, open_agree = -1, 0, 0
    for k in np.flatnonzero(pairs > 0):
        if open_pairs == 0:
            open_start = int(k)
        open_pairs += int(pairs[k])
        open_agree += int(agreeing[k])
        if open_pairs >= min_pairs:
            starts.append(open_start)
            group_pairs.append(open_pairs)
            group_agree.append(open_agree)
            open_pairs, open_agree = 0, 0
    if open_pairs and starts:  # sparse tail: join the group below
        group_pairs[-1] += open_pairs
        group_agree[-1] += open_agree
    return starts, group_pairs, group_agree


def mdad(
    estimate: np.ndarray,
    truth: np.ndarray,
    *,
    bin_width: float = MDAD_BIN_WIDTH,
    threshold: float = MDAD_AGREEMENT,
    min_pairs: int = MDAD_MIN_PAIRS,
) -> float:
    """MDAD of one set of models (estimates and truths in points); see :func:`mdad_from_counts`."""
    pairs, agreeing = gap_agreement_counts(estimate, truth, bin_width=bin_width)
    return mdad_from_counts(
        pairs, agreeing, bin_width=bin_width, threshold=threshold, min_pairs=min_pairs
    )


def pooled_mdad(
    groups: Iterable[tuple[np.ndarray, np.ndarray]],
    *,
    bin_width: float = MDAD_BIN_WIDTH,
    threshold: float = MDAD_AGREEMENT,
    min_pairs: int = MDAD_MIN_PAIRS,
) -> float:
    """MDAD over the pairs within each ``(estimate, truth)`` group (one group per repeat).

    Pairs are only formed inside a group: models of different repeats were estimated from
    different subsets, and a pair's ordering is what one subset gets right or wrong.
    """
    pairs = np.zeros(0, dtype=np.int64)
    agreeing = np.zeros(0, dtype=np.int64)
    for estimate, truth in groups:
        p, a = gap_agreement_counts(estimate, truth, bin_width=bin_width)
        pairs, agreeing = _add_padded(pairs, p), _add_padded(agreeing, a)
    return mdad_from_counts(
        pairs, agreeing, bin_width=bin_width, threshold=threshold, min_pairs=min_pairs
    )


def mdad_status(value: float) -> str:
    """``ok``, ``never`` (inf: no gap is ordered reliably) or ``too_few_pairs`` (NaN)."""
    if math.isfinite(value):
        return "ok"
    return "never" if value > 0 else "too_few_pairs"


def kendall_tau(estimate: np.ndarray, truth: np.ndarray) -> float:
    """Kendall's tau-b of estimates vs truths; NaN for fewer than 2 models or constant input."""
    estimate = np.asarray(estimate, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    if estimate.size < 2 or np.ptp(estimate) == 0 or np.ptp(truth) == 0:
        return math.nan
    return float(kendalltau(estimate, truth).statistic)


def interval_coverage(truth: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> float:
    """Share of ``truth`` values inside ``[lower, upper]`` (ends included)."""
    truth = np.asarray(truth, dtype=np.float64)
    inside = (np.asarray(lower) <= truth) & (truth <= np.asarray(upper))
    return float(np.mean(inside)) if truth.size else math.nan


# ---------------------------------------------------------------------- splits
@dataclass(frozen=True)
class Split:
    """Source and target models of one repeat of one protocol.

    ``key`` names the source set: splits with the same key have the same source models, so
    their IRT fit is shared. Truths are fractions in [0, 1] aligned with the matrices' rows.
    """

    protocol: str
    repeat: int
    key: str
    source: ResponseMatrix
    source_truth: np.ndarray
    target: ResponseMatrix
    target_truth: np.ndarray
    selection_seed: int
    irt_seed: int


def _seed_pairs(seed: SeedLike, repeats: int) -> list[tuple[int, int]]:
    """(selection seed, IRT seed) per repeat, from independent streams of ``seed``."""
    return [(int(rng.integers(2**31)), int(rng.integers(2**31))) for rng in spawn(seed, repeats)]


def _make_split(
    matrix: ResponseMatrix,
    truth: np.ndarray,
    target_rows: np.ndarray,
    *,
    protocol: str,
    repeat: int,
    key: str,
    seeds: tuple[int, int],
) -> Split:
    is_target = np.zeros(matrix.n_models, dtype=bool)
    is_target[target_rows] = True
    source_ids = [m for m, t in zip(matrix.model_ids, is_target, strict=True) if not t]
    target_ids = [m for m, t in zip(matrix.model_ids, is_target, strict=True) if t]
    return Split(
        protocol,
        repeat,
        key,
        matrix.select_models(source_ids),
        truth[~is_target],
        matrix.select_models(target_ids),
        truth[is_target],
        seeds[0],
        seeds[1],
    )


def n_targets(n_models: int, share: float = TARGET_SHARE) -> int:
    """Targets of a ``random``/``extrapolation`` split: ``share`` of the models, rounded."""
    return round(share * n_models)


def random_splits(
    matrix: ResponseMatrix,
    truth: np.ndarray,
    *,
    repeats: int,
    seed: SeedLike,
    share: float = TARGET_SHARE,
) -> Iterator[Split]:
    """``repeats`` independent random splits with ``share`` of the models as targets."""
    count = n_targets(matrix.n_models, share)
    for repeat, rng in enumerate(spawn(seed, repeats)):
        target_rows = rng.permutation(matrix.n_models)[:count]
        seeds = (int(rng.integers(2**31)), int(rng.integers(2**31)))
        yield _make_split(
            matrix,
            truth,
            target_rows,
            protocol="random",
            repeat=repeat,
            key=f"random/{repeat}",
            seeds=seeds,
        )


def top_rows(truth: np.ndarray, count: int) -> np.ndarray:
    """Rows of the ``count`` highest truths (ties broken by row order, so it is reproducible)."""
    return np.argsort(-np.asarray(truth), kind="stable")[:count]


def extrapolation_splits(
    matrix: ResponseMatrix,
    truth: np.ndarray,
    *,
    repeats: int,
    seed: SeedLike,
    share: float = TARGET_SHARE,
) -> Iterator[Split]:
    """The best ``share`` of models as targets, the rest as sources; repeats vary the selection."""
    target_rows = top_rows(truth, n_targets(matrix.n_models, share))
    seeds = _seed_pairs(seed, repeats)
    for repeat, (selection_seed, _) in enumerate(seeds):
        yield _make_split(
            matrix,
            truth,
            target_rows,
            protocol="extrapolation",
            repeat=repeat,
            key="extrapolation",
            seeds=(selection_seed, seeds[0][1]),
        )


def holdout_splits(
    matrix: ResponseMatrix,
    truth: np.ndarray,
    holdout: ResponseMatrix,
    holdout_truth: np.ndarray,
    *,
    repeats: int,
    seed: SeedLike,
) -> Iterator[Split]:
    """Every model of ``matrix`` as source, every model of ``holdout`` as target."""
    holdout = check_holdout(matrix, holdout)
    seeds = _seed_pairs(seed, repeats)
    for repeat, (selection_seed, _) in enumerate(seeds):
        yield Split(
            "holdout",
            repeat,
            "holdout",
            matrix,
            np.asarray(truth, dtype=np.float64),
            holdout,
            np.asarray(holdout_truth, dtype=np.float64),
            selection_seed,
            seeds[0][1],
        )


def check_holdout(matrix: ResponseMatrix, holdout: ResponseMatrix) -> ResponseMatrix:
    """The holdout matrix on the items of ``matrix`` (same order); shared models are an error."""
    missing = [i for i in matrix.item_ids if i not in set(holdout.item_ids)]
    if missing:
        shown = ", ".join(repr(i) for i in missing[:5])
        raise InputError(
            f"{holdout.source}: holdout matrix lacks {len(missing)} items of {matrix.source}: "
            f"{shown}"
        )
    shared = sorted(set(matrix.model_ids) & set(holdout.model_ids))
    if shared:
        raise InputError(
            f"{holdout.source}: {len(shared)} holdout models are also source models of "
            f"{matrix.source} (e.g. {shared[0]!r}); holdout targets must be unseen"
        )
    return holdout.select_items(matrix.item_ids)


def loo_splits(
    matrix: ResponseMatrix, truth: np.ndarray, *, repeats: int, seed: SeedLike
) -> Iterator[Split]:
    """Each model in turn as the only target; one repeat is a full cycle over the models.

    Splits come model by model (repeats inner) so that each source set's IRT fit is shared by
    its repeats.
    """
    seeds = _seed_pairs(seed, repeats)
    for row, model in enumerate(matrix.model_ids):
        for repeat, (selection_seed, _) in enumerate(seeds):
            yield _make_split(
                matrix,
                truth,
                np.array([row]),
                protocol="loo",
                repeat=repeat,
                key=f"loo/{model}",
                seeds=(selection_seed, seeds[0][1]),
            )


def split_sizes(protocol: str, n_models: int, n_holdout: int = 0) -> tuple[int, int]:
    """(source models, target models) of one split of ``protocol``."""
    if protocol in ("random", "extrapolation"):
        count = n_targets(n_models)
        return n_models - count, count
    if protocol == "loo":
        return n_models - 1, 1
    return n_models, n_holdout


# ---------------------------------------------------------------------- plan and checks
@dataclass(frozen=True)
class Plan:
    """What to evaluate: selection methods x estimators x budgets x protocols."""

    methods: tuple[str, ...]
    estimators: tuple[str, ...]
    budgets: tuple[Budget, ...]
    protocols: tuple[str, ...]
    repeats: int = DEFAULT_REPEATS
    seed: int = 0
    irt_model: str = "2pl"

    def selections(self) -> list[tuple[str, Budget]]:
        """(method, budget) pairs: every method at every numeric budget, then ``all`` once."""
        pairs: list[tuple[str, Budget]] = [
            (method, budget) for budget in self.budgets if budget != ALL for method in self.methods
        ]
        if ALL in self.budgets:
            pairs.append((ALL, ALL))
        return pairs


def parse_budgets(text: str) -> tuple[Budget, ...]:
    """``"10,25,all"`` -> ``(10, 25, "all")``: positive integers and ``all``, duplicates dropped."""
    budgets: list[Budget] = []
    for part in (p.strip() for p in text.split(",")):
        if part.lower() == ALL:
            value: Budget = ALL
        else:
            try:
                value = int(part)
            except ValueError:
                raise InputError(
                    f"budget {part!r} in {text!r} is neither a positive integer nor 'all'"
                ) from None
            if value < 1:
                raise InputError(f"budget {part!r} in {text!r} must be a positive integer")
        if value not in budgets:
            budgets.append(value)
    return tuple(budgets)


def budget_sort_key(budget: Budget) -> float:
    return math.inf if budget == ALL else float(budget)


def check_budgets(budgets: Sequence[Budget], n_items: int, source: str) -> None:
    too_big = [b for b in budgets if b != ALL and int(b) > n_items]
    if too_big:
        raise InputError(
            f"budget {too_big[0]} exceeds the {n_items} items of {source} "
            "(use 'all' for every item)"
        )


def default_protocols(n_models: int, *, holdout: bool) -> tuple[str, ...]:
    """``loo`` below ``LOO_BELOW`` models, else ``random`` + ``extrapolation``; plus ``holdout``."""
    base = ("loo",) if n_models < LOO_BELOW else ("random", "extrapolation")
    return (*base, "holdout") if holdout else base


def check_plan(plan: Plan, n_models: int, n_items: int, source: str, n_holdout: int) -> None:
    """Reject unknown names and protocols the matrix is too small (or too large) for."""
    for method in plan.methods:
        make_selector(method)
    for name in plan.estimators:
        make_estimator(name)
    if not plan.methods and any(b != ALL for b in plan.budgets):
        raise InputError("numeric budgets need at least one selection method")
    if not plan.estimators:
        raise InputError("no estimator to evaluate")
    if not plan.budgets:
        raise InputError("no budget to evaluate")
    if plan.repeats < 1:
        raise InputError(f"repeats must be a positive integer, got {plan.repeats!r}")
    check_budgets(plan.budgets, n_items, source)
    unknown = [p for p in plan.protocols if p not in PROTOCOLS]
    if unknown:
        raise InputError(f"unknown protocol {unknown[0]!r}; choose from {', '.join(PROTOCOLS)}")
    if not plan.protocols:
        raise InputError(f"no protocol to run; choose from {', '.join(PROTOCOLS)}")
    if "holdout" in plan.protocols and n_holdout == 0:
        raise InputError("protocol 'holdout' needs a holdout matrix (--holdout-responses)")
    if "loo" in plan.protocols and n_models > LOO_MAX_MODELS:
        raise InputError(
            f"protocol 'loo' fits IRT once per model; {source} has {n_models} models "
            f"(at most {LOO_MAX_MODELS}): use 'random'"
        )
    for protocol in plan.protocols:
        n_source, n_target = split_sizes(protocol, n_models, n_holdout)
        if n_source < MIN_SOURCE_MODELS:
            raise InputError(
                f"protocol {protocol!r} leaves {n_source} source models of {source}; the "
                f"estimators need at least {MIN_SOURCE_MODELS}"
            )
        if n_target < 1 or (protocol != "loo" and n_target < 2):
            raise InputError(
                f"protocol {protocol!r} gives {n_target} target models of {source}: too few "
                "to rank (use 'loo' for small matrices)"
            )


# ---------------------------------------------------------------------- evaluation
@dataclass
class ResultPool:
    """Target truths and estimates of one configuration, grouped by repeat."""

    groups: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]] = field(
        default_factory=dict
    )
    seconds: float = 0.0
    selection_seconds: float = 0.0
    n_items: int = 0
    n_source: int = 0

    def add(
        self,
        repeat: int,
        truth: np.ndarray,
        value: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
    ) -> None:
        self.groups.setdefault(repeat, []).append((truth, value, lower, upper))

    def by_repeat(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        return [
            tuple(np.concatenate([part[k] for part in parts]) for k in range(4))  # type: ignore[misc]
            for _, parts in sorted(self.groups.items())
        ]


def summarise(pool: ResultPool) -> dict[str, Any]:
    """Metrics of one configuration in score points (see the module docstring)."""
    repeats = pool.by_repeat()
    truth, value, lower, upper = (np.concatenate([r[k] for r in repeats]) * 100.0 for k in range(4))
    error = value - truth
    per_repeat_mae = [float(np.mean(np.abs(r[1] - r[0]))) * 100.0 for r in repeats]
    taus = [kendall_tau(r[1], r[0]) for r in repeats]
    finite_taus = [t for t in taus if np.isfinite(t)]
    result = pooled_mdad((r[1] * 100.0, r[0] * 100.0) for r in repeats)
    return {
        "mae": float(np.mean(np.abs(error))),
        "rmse": float(np.sqrt(np.mean(error**2))),
        "max_error": float(np.max(np.abs(error))),
        "bias": float(np.mean(error)),
        "kendall_tau": float(np.mean(finite_taus)) if finite_taus else math.nan,
        "mdad": result,
        "mdad_status": mdad_status(result),
        "coverage90": interval_coverage(truth, lower, upper),
        "width90": float(np.mean(upper - lower)),
        "mae_sd": float(np.std(per_repeat_mae, ddof=1)) if len(repeats) > 1 else math.nan,
        "n_targets": round(float(np.mean([r[0].size for r in repeats]))),
        "n_sources": pool.n_source,
        "items": pool.n_items,
        "repeats": len(repeats),
        "seconds": round(pool.seconds, 3),
        "selection_seconds": round(pool.selection_seconds, 3),
    }


def all_items_subset(source: ResponseMatrix) -> Subset:
    """Every matrix item with equal weight: the ``all`` budget."""
    return Subset(source.item_ids, np.full(source.n_items, 1.0 / source.n_items), ALL)


def select_items(selector: Selector, split: Split, budget: int) -> Subset:
    """Run a selector on the split's source models only (with their truths where it takes them)."""
    if "target" in inspect.signature(selector.select).parameters:
        return selector.select(
            split.source, budget, seed=split.selection_seed, target=split.source_truth
        )
    return selector.select(split.source, budget, seed=split.selection_seed)


def needs_irt(estimator: str) -> bool:
    """Whether an estimator uses item parameters (then the shared IRT fit is passed to it)."""
    return "irt_model" in make_estimator(estimator).get_params()


@dataclass
class ReliabilityResult:
    """Rows of the benchmark (one per method x estimator x budget x protocol) and run facts."""

    records: list[dict[str, Any]]
    info: dict[str, Any]


class IRTCache:
    """IRT parameters of the last source set: splits of one key arrive one after another."""

    def __init__(self, irt_model: str) -> None:
        self.irt_model = irt_model
        self.key: str | None = None
        self.params: ItemParams | None = None
        self.fits = 0
        self.unconverged = 0
        self.seconds = 0.0

    def get(self, split: Split) -> ItemParams:
        if split.key != self.key or self.params is None:
            start = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                self.params = fit_source_irt(
                    split.source, model=self.irt_model, seed=split.irt_seed
                )
            self.unconverged += sum(issubclass(w.category, ConvergenceWarning) for w in caught)
            self.key = split.key
            self.fits += 1
            self.seconds += time.perf_counter() - start
        return self.params


def evaluate_split(
    split: Split,
    plan: Plan,
    pools: dict[tuple[str, str, str, Budget], ResultPool],
    irt_cache: IRTCache,
    bar: Any = None,
) -> None:
    """Select once per method x budget, fit every estimator on that subset, estimate targets."""
    irt = irt_cache.get(split) if any(needs_irt(e) for e in plan.estimators) else None
    for method, budget in plan.selections():
        start = time.perf_counter()
        if budget == ALL:
            subset = all_items_subset(split.source)
        else:
            subset = select_items(make_selector(method), split, int(budget))
        selection_seconds = time.perf_counter() - start
        for name in plan.estimators:
            start = time.perf_counter()
            estimator = make_estimator(name).fit(split.source, subset, split.source_truth, irt=irt)
            value, lower, upper = estimator.estimate_matrix(split.target, level=LEVEL)
            pool = pools.setdefault((split.protocol, method, name, budget), ResultPool())
            pool.add(split.repeat, split.target_truth, value, lower, upper)
            pool.seconds += time.perf_counter() - start
            pool.selection_seconds += selection_seconds
            pool.n_items = subset.budget
            pool.n_source = split.source.n_models
        if bar is not None:
            bar.update(1)


def protocol_splits(
    protocol: str,
    matrix: ResponseMatrix,
    truth: np.ndarray,
    plan: Plan,
    holdout: ResponseMatrix | None,
    holdout_truth: np.ndarray | None,
) -> Iterator[Split]:
    if protocol == "random":
        return random_splits(matrix, truth, repeats=plan.repeats, seed=plan.seed)
    if protocol == "extrapolation":
        return extrapolation_splits(matrix, truth, repeats=plan.repeats, seed=plan.seed)
    if protocol == "loo":
        return loo_splits(matrix, truth, repeats=plan.repeats, seed=plan.seed)
    assert holdout is not None and holdout_truth is not None
    return holdout_splits(
        matrix, truth, holdout, holdout_truth, repeats=plan.repeats, seed=plan.seed
    )


def _n_splits(protocol: str, n_models: int, repeats: int) -> int:
    return repeats * (n_models if protocol == "loo" else 1)


def complete_models(matrix: ResponseMatrix, truth: np.ndarray) -> tuple[ResponseMatrix, np.ndarray]:
    """Drop models with a missing response (estimators need every subset score), with a warning."""
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


def _check_truth(truth: np.ndarray, matrix: ResponseMatrix, what: str) -> np.ndarray:
    truth = np.asarray(truth, dtype=np.float64).reshape(-1)
    if truth.shape != (matrix.n_models,):
        raise InputError(
            f"{what} has {truth.size} values, {matrix.source} has {matrix.n_models} models"
        )
    if not np.all(np.isfinite(truth) & (truth >= 0) & (truth <= 1)):
        raise InputError(f"{what} must be fractions in [0, 1] for every model of {matrix.source}")
    return truth


def run_reliability(
    matrix: ResponseMatrix,
    truth: np.ndarray,
    *,
    methods: Sequence[str] | None = None,
    estimators: Sequence[str] | None = None,
    budgets: Sequence[Budget] = DEFAULT_BUDGETS,
    protocols: Sequence[str] | None = None,
    repeats: int = DEFAULT_REPEATS,
    seed: int = 0,
    holdout: ResponseMatrix | None = None,
    holdout_truth: np.ndarray | None = None,
    irt_model: str = "2pl",
    progress: bool = True,
) -> ReliabilityResult:
    """Evaluate every method x estimator x budget x protocol; one record per combination.

    Parameters
    ----------
    matrix, truth
        Responses of the models and their true full-benchmark scores (fractions, one per row).
    methods, estimators
        Registry names; None means every registered one.
    budgets
        Item counts and/or ``"all"`` (every matrix item; evaluated once, with method ``all``).
    protocols
        Any of :data:`PROTOCOLS`; None gives :func:`default_protocols`.
    holdout, holdout_truth
        Target models of the ``holdout`` protocol and their true scores.
    """
    truth = _check_truth(truth, matrix, "truth")
    matrix, truth = complete_models(matrix, truth)
    if (holdout is None) != (holdout_truth is None):
        raise InputError("a holdout matrix needs holdout truths, and the other way round")
    if holdout is not None:
        holdout_truth = _check_truth(holdout_truth, holdout, "holdout truth")
        holdout = check_holdout(matrix, holdout)
        holdout, holdout_truth = complete_models(holdout, holdout_truth)
    plan = Plan(
        tuple(methods) if methods is not None else tuple(SELECTORS),
        tuple(estimators) if estimators is not None else tuple(ESTIMATORS),
        tuple(sorted(dict.fromkeys(budgets), key=budget_sort_key)),
        tuple(protocols)
        if protocols is not None
        else default_protocols(matrix.n_models, holdout=holdout is not None),
        int(repeats),
        int(seed),
        irt_model,
    )
    n_holdout = holdout.n_models if holdout is not None else 0
    check_plan(plan, matrix.n_models, matrix.n_items, matrix.source, n_holdout)
    started = time.perf_counter()
    pools: dict[tuple[str, str, str, Budget], ResultPool] = {}
    irt_cache = IRTCache(irt_model)
    total = sum(_n_splits(p, matrix.n_models, plan.repeats) for p in plan.protocols)
    with tqdm(
        total=total * len(plan.selections()),
        desc="reliability",
        unit="subset",
        disable=not progress,
    ) as bar:
        for protocol in plan.protocols:
            bar.set_postfix_str(protocol)
            for split in protocol_splits(protocol, matrix, truth, plan, holdout, holdout_truth):
                evaluate_split(split, plan, pools, irt_cache, bar)
    records = [
        {"method": method, "estimator": name, "budget": budget, "protocol": protocol}
        | summarise(pool)
        for (protocol, method, name, budget), pool in pools.items()
    ]
    sort_records(records, plan.protocols)
    info = {
        "source": matrix.source,
        "n_models": matrix.n_models,
        "n_items": matrix.n_items,
        "n_holdout": n_holdout,
        "protocols": list(plan.protocols),
        "methods": list(plan.methods),
        "estimators": list(plan.estimators),
        "budgets": list(plan.budgets),
        "repeats": plan.repeats,
        "seed": plan.seed,
        "irt_model": irt_model,
        "irt_fits": irt_cache.fits,
        "irt_unconverged": irt_cache.unconverged,
        "irt_seconds": round(irt_cache.seconds, 2),
        "seconds": round(time.perf_counter() - started, 2),
    }
    return ReliabilityResult(records, info)


def sort_records(records: list[dict[str, Any]], protocols: Sequence[str]) -> None:
    """Order records in place: by protocol (as listed), budget, method, estimator."""
    order = {p: k for k, p in enumerate(protocols)}
    records.sort(
        key=lambda r: (
            order[r["protocol"]],
            budget_sort_key(r["budget"]),
            r["method"],
            r["estimator"],
        )
    )


# ---------------------------------------------------------------------- reports
def json_ready(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records with NaN and infinite floats as ``null`` (strict JSON; see ``mdad_status``)."""
    return [
        {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in record.items()
        }
        for record in records
    ]


MARKDOWN_COLUMNS = (
    ("method", "method", None),
    ("estimator", "estimator", None),
    ("budget", "budget", None),
    ("MAE", "mae", ".2f"),
    ("RMSE", "rmse", ".2f"),
    ("max err", "max_error", ".1f"),
    ("tau", "kendall_tau", ".3f"),
    ("MDAD", "mdad", ".1f"),
    ("cov90", "coverage90", ".3f"),
    ("width90", "width90", ".1f"),
    ("s", "seconds", ".2f"),
)


def _cell(value: Any, fmt: str | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isinf(value):
            return "never" if value > 0 else "-"
        if math.isnan(value):
            return "-"
        return format(value, fmt or ".4g")
    return str(value)


def markdown_table(records: Sequence[dict[str, Any]]) -> list[str]:
    lines = [
        "| " + " | ".join(title for title, _, _ in MARKDOWN_COLUMNS) + " |",
        "|" + "|".join("---" if fmt is None else "---:" for _, _, fmt in MARKDOWN_COLUMNS) + "|",
    ]
    for record in records:
        cells = [_cell(record.get(key), fmt) for _, key, fmt in MARKDOWN_COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown_report(result: ReliabilityResult, *, truth_note: str) -> str:
    """A readable report: what was run, the definitions, one table per protocol."""
    info = result.info
    lines = [
        f"# Reliability of micro-benchmarks: {info['source']}",
        "",
        f"{info['n_models']} models x {info['n_items']} items; truth: {truth_note}. "
        f"{info['repeats']} repeats, seed {info['seed']}; {info['irt_fits']} {info['irt_model']} "
        f"IRT fits ({info['irt_unconverged']} hit the iteration limit, "
        f"{info['irt_seconds']:.0f} s); total {info['seconds']:.0f} s.",
        "",
        f"Methods: {', '.join(info['methods']) or '-'}; estimators: "
        f"{', '.join(info['estimators'])}; budgets: {', '.join(map(str, info['budgets']))}; "
        f"protocols: {', '.join(info['protocols'])}.",
        "",
        "Errors in score points (percent of the full benchmark), pooled over repeats. `tau`: "
        "Kendall's tau-b of estimates vs truths among the targets, mean over repeats. `MDAD`: "
        f"smallest true gap (bins of {MDAD_BIN_WIDTH} points, bins of fewer than "
        f"{MDAD_MIN_PAIRS} pairs merged upward) from which every larger gap is ordered "
        f"correctly in at least {MDAD_AGREEMENT:.0%} of target pairs; `never`: not even the "
        "largest gaps. `cov90`: share of targets inside the 90 % interval; `width90`: its mean "
        "width. `s`: seconds of estimator fits and estimates (selection and IRT are shared).",
        "",
    ]
    for protocol in info["protocols"]:
        rows = [r for r in result.records if r["protocol"] == protocol]
        if not rows:
            continue
        lines += [
            f"## {protocol}: {rows[0]['n_sources']} source models per split, "
            f"{rows[0]['n_targets']} target models per repeat",
            "",
            *markdown_table(rows),
            "",
        ]
    return "\n".join(lines)
