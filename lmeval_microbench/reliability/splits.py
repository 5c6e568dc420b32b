"""Protocols: how the models are divided into source and target models, split by split.

Also the input checks that come before any split: truths must be fractions for every model
(models with a missing response are left out before, by ``truth.complete_models``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .._rng import SeedLike, spawn
from ..errors import InputError
from ..responses import ResponseMatrix

PROTOCOLS = ("random", "extrapolation", "holdout", "loo")
TARGET_SHARE = 0.2


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
    return _fixed_target_splits(matrix, truth, target_rows, "extrapolation", repeats, seed)


def weakest_splits(
    matrix: ResponseMatrix,
    truth: np.ndarray,
    *,
    repeats: int,
    seed: SeedLike,
    share: float = TARGET_SHARE,
) -> Iterator[Split]:
    """The weakest ``share`` of models as targets, the rest as sources (near-random models
    below every source: the case the guard's downward folds are for)."""
    target_rows = top_rows(-np.asarray(truth), n_targets(matrix.n_models, share))
    return _fixed_target_splits(matrix, truth, target_rows, "weak", repeats, seed)


def _fixed_target_splits(
    matrix: ResponseMatrix,
    truth: np.ndarray,
    target_rows: np.ndarray,
    protocol: str,
    repeats: int,
    seed: SeedLike,
) -> Iterator[Split]:
    """The same targets ``repeats`` times; the repeats vary the selection seed only."""
    seeds = _seed_pairs(seed, repeats)
    for repeat, (selection_seed, _) in enumerate(seeds):
        yield _make_split(
            matrix,
            truth,
            target_rows,
            protocol=protocol,
            repeat=repeat,
            key=protocol,
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


class SplitPlan(Protocol):
    """What :func:`protocol_splits` reads of a plan (:class:`.plan.Plan` is one).

    A protocol, not that class: the plan module checks plans against :data:`PROTOCOLS` and
    :func:`split_sizes` here, so naming the class here would make the two import each other.
    """

    @property
    def repeats(self) -> int: ...

    @property
    def seed(self) -> int: ...


def protocol_splits(
    protocol: str,
    matrix: ResponseMatrix,
    truth: np.ndarray,
    plan: SplitPlan,
    holdout: ResponseMatrix | None,
    holdout_truth: np.ndarray | None,
) -> Iterator[Split]:
    """The splits of one protocol, in the order that lets consecutive splits share an IRT fit."""
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


def n_splits(protocol: str, n_models: int, repeats: int) -> int:
    """How many splits :func:`protocol_splits` yields: the length of the progress bar."""
    return repeats * (n_models if protocol == "loo" else 1)


def check_truth(truth: np.ndarray, matrix: ResponseMatrix, what: str) -> np.ndarray:
    """``truth`` as one fraction in [0, 1] per model of ``matrix``; anything else is refused."""
    truth = np.asarray(truth, dtype=np.float64).reshape(-1)
    if truth.shape != (matrix.n_models,):
        raise InputError(
            f"{what} has {truth.size} values, {matrix.source} has {matrix.n_models} models"
        )
    if not np.all(np.isfinite(truth) & (truth >= 0) & (truth <= 1)):
        raise InputError(f"{what} must be fractions in [0, 1] for every model of {matrix.source}")
    return truth
