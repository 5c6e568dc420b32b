"""Rank tiers of decreasing resolution (Flash-HELM): the top of a ranking must be the sharpest.

A tier is a range of ranks and a *resolution*: the widest rank interval a model reaching
that tier may keep. Flash-HELM ranks 1-4, 5-9, 10-19, 20-50 and the rest with decreasing
effort; here the default resolution of a closed tier is its width (a model that may be in
the top 4 must be placed within 4 ranks) and the open last tier needs none.

Effort is capped per tier as in Flash-HELM (:func:`level_cap`): a model that may reach the
top tier may get every level, one whose best possible rank is in the second tier one level
fewer, and so on. Without the caps every model whose interval misses its resolution climbs
to the last level: on the leaderboard matrices no top-50 model is ever placed within its
tier's width, so the rounds spent 50-76 % of every model on every item for the top-10 that
a third of that buys (``bench/rank.md``).

Small populations (:func:`tiers_for`): up to ``SMALL_POPULATION`` models under the default
tiers, or under tiers whose first tier holds every model at any rank, the models are ranked
pairwise: one tier whose resolution is a single rank.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InputError

FLASH_HELM_TIERS = "1-4,5-9,10-19,20-50,51-"
"""Tier boundaries of Flash-HELM (Perlitz et al.), the default of ``--tiers``."""

_TIER = re.compile(r"^(\d+)-(\d*)(?::(\d+))?$")


@dataclass(frozen=True)
class Tier:
    """Ranks ``first..last`` (``last`` None: open) whose models need ``resolution`` ranks."""

    first: int
    last: int | None
    resolution: float

    def contains(self, rank: int) -> bool:
        return rank >= self.first and (self.last is None or rank <= self.last)

    @property
    def label(self) -> str:
        return f"{self.first}-{'' if self.last is None else self.last}"


def _parse_one(text: str) -> Tier:
    match = _TIER.match(text.strip())
    if not match:
        raise InputError(
            f"tier {text!r} is not FIRST-LAST, FIRST- or FIRST-LAST:RESOLUTION (e.g. 1-4:2)"
        )
    first = int(match[1])
    last = int(match[2]) if match[2] else None
    if first < 1 or (last is not None and last < first):
        raise InputError(f"tier {text!r}: ranks start at 1 and a tier's last rank >= its first")
    if match[3] is not None:
        resolution = float(match[3])
        if resolution < 1:
            raise InputError(f"tier {text!r}: the resolution must be at least 1 rank")
    else:
        resolution = math.inf if last is None else float(last - first + 1)
    return Tier(first, last, resolution)


def parse_tiers(text: str = FLASH_HELM_TIERS) -> tuple[Tier, ...]:
    """Tiers from ``"1-4,5-9,10-19,20-50,51-"``: contiguous from rank 1, finest first."""
    tiers = tuple(_parse_one(part) for part in text.split(",") if part.strip())
    if not tiers:
        raise InputError("--tiers is empty; e.g. " + FLASH_HELM_TIERS)
    expected = 1
    for tier in tiers:
        if tier.first != expected:
            raise InputError(
                f"tiers must be contiguous from rank 1: tier {tier.label} starts at "
                f"{tier.first}, expected {expected}"
            )
        if tier.last is None and tier is not tiers[-1]:
            raise InputError(f"only the last tier may be open, not {tier.label}")
        expected = (tier.last or 0) + 1
    return tiers


def check_covers(tiers: Sequence[Tier], n_models: int) -> None:
    """Refuse tiers that leave ranks of ``n_models`` models without a tier."""
    last = tiers[-1].last
    if last is not None and last < n_models:
        raise InputError(
            f"tiers cover ranks 1-{last} but {n_models} models are ranked; end them with an "
            f"open tier such as {last + 1}-"
        )


def tier_index(tiers: Sequence[Tier], rank: int) -> int:
    """Index of the tier holding ``rank`` (1 = best)."""
    for k, tier in enumerate(tiers):
        if tier.contains(rank):
            return k
    raise InputError(f"rank {rank} is in no tier (last tier {tiers[-1].label})")


def level_cap(tier: int, n_levels: int) -> int:
    """Highest level index for a model whose interval reaches tier ``tier`` (0 = finest)."""
    return max(0, n_levels - 1 - tier)


def resolved(tiers: Sequence[Tier], rank_low: int, rank_high: int) -> bool:
    """Whether a rank interval meets the resolution of the finest tier it reaches.

    A model whose interval reaches into a finer tier than its estimate's is judged by that
    tier: it may belong there, so it must be placed as sharply as the models there.
    """
    finest = tiers[tier_index(tiers, rank_low)]
    return rank_high - rank_low + 1 <= finest.resolution


SMALL_POPULATION = 10
"""Up to this many models the default tiers give way to a pairwise ranking (:func:`tiers_for`)."""


def pairwise_tiers(n_models: int) -> tuple[Tier, ...]:
    """One tier over every rank that needs a single rank: each model placed among the others."""
    return (Tier(1, n_models, 1.0),)


def vacuous(tiers: Sequence[Tier], n_models: int) -> bool:
    """Whether ``tiers`` can never call a model unresolved among ``n_models``: their first
    tier holds every rank and allows a rank interval as wide as the whole population."""
    first = tiers[0]
    return (first.last is None or first.last >= n_models) and first.resolution >= n_models


def tiers_for(n_models: int, tiers: Sequence[Tier] | None = None) -> tuple[tuple[Tier, ...], str]:
    """The tiers that rank ``n_models`` and a sentence saying which rule chose them.

    Flash-HELM's tiers are built for leaderboards of hundreds: with 2-10 models the first
    tier (1-4) holds most or all of them, so a first round on a few items "resolves" every
    model at rank interval 1-3 and stops, having ranked nothing. A small population is
    ranked pairwise instead (:func:`pairwise_tiers`): a model is resolved only when its rank
    interval is a single rank, so it keeps climbing until it is told apart from every
    other model or has no next level (all items used) or the budget cannot pay for one;
    for 10 models even every item is a few thousand items at most. The rule applies with
    the default tiers (``tiers`` None) when ``n_models <= SMALL_POPULATION``, and with any
    tiers that are :func:`vacuous` for ``n_models`` (they could never promote anyone).
    Tiers given for a larger population, or ones that still mean something (``1-1,2-`` on
    3 models), are used as given.
    """
    if tiers is None:
        if n_models <= SMALL_POPULATION:
            return pairwise_tiers(n_models), (
                f"pairwise: {n_models} models (at most {SMALL_POPULATION}) with the default "
                "tiers; a model is resolved only at a single rank"
            )
        tiers = parse_tiers(FLASH_HELM_TIERS)
    given = ",".join(tier.label for tier in tiers)
    if vacuous(tiers, n_models):
        return pairwise_tiers(n_models), (
            f"pairwise: tier {tiers[0].label} of tiers {given} holds all {n_models} models "
            "at any rank; a model is resolved only at a single rank"
        )
    return tuple(tiers), f"tiers {given}"
