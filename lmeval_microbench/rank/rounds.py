"""Coarse-to-fine rounds: every model on few items, more items only where the ranking needs them.

Round 0 scores every model at the first *level* (a number of items); after each round the
rank intervals are recomputed and a model moves up one level when its interval is wider
than the resolution of the finest tier it reaches and it is below that tier's level cap
(see :mod:`.tiers`; ``level_caps=False``: no caps). Rounds stop when every model is
resolved or at its cap, or when the item budget cannot pay for the next promotion. Levels
are nested (each holds the items of the one before), so a promotion costs only the new
items. Who scores the items is an :class:`Evaluator`: a replay over a
response matrix (:mod:`.replay`), lm-eval runs (:mod:`.live`), or lm-eval commands that a
scheduler runs between two invocations (:mod:`.cluster`, told each round whole by
:func:`announce_round`).

Which tiers judge the rank intervals depends on the population (:func:`.tiers.tiers_for`):
up to 10 models under the default tiers the models are ranked pairwise (resolved only at a
single rank), because Flash-HELM's first tier would otherwise call 2-4 models resolved at
rank interval 1-4 after the first round. Every row of the result says why its model stopped
(``status``: resolved, all items, level cap, budget or failed), so an unresolved rank is
never passed off as a resolved one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Protocol

import numpy as np

from .._types import duplicate_ids
from ..errors import InputError
from .intervals import RankIntervals, rank_intervals
from .tiers import Tier, check_covers, level_cap, resolved, tier_index, tiers_for

LEVEL = 0.9


@dataclass(frozen=True)
class Scored:
    """Estimate of one model at one level: value and ``LEVEL`` interval (fractions)."""

    value: float
    lower: float
    upper: float


@dataclass
class Evaluated:
    """What an evaluator returns for one round: estimates, and failures by model with why."""

    scores: dict[str, Scored] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)


class Evaluator(Protocol):
    """Scores models on the items of a level; ``levels`` are increasing nested item counts."""

    levels: tuple[int, ...]

    def evaluate(self, models: Sequence[str], level: int) -> Evaluated: ...


def announce_round(evaluator: Evaluator, batches: Mapping[int, Sequence[str]]) -> None:
    """Tell the evaluator a whole round (``target level -> models``) before any batch of it.

    An evaluator whose models run elsewhere (:mod:`.cluster`: one lm-eval command per model,
    on any scheduler) needs every run of a round at once, and stops the rounds there by
    raising; the other evaluators have no ``start_round`` and are not asked.
    """
    start_round = getattr(evaluator, "start_round", None)
    if start_round is not None:
        start_round({level: list(models) for level, models in batches.items()})


@dataclass(frozen=True)
class RoundOptions:
    """How rounds run: tiers, level caps, item budget (None: no cap) and rank intervals.

    ``tiers`` None: Flash-HELM's tiers, or pairwise ranking for 10 models or fewer
    (:func:`.tiers.tiers_for`, which also turns tiers that cannot promote anyone pairwise).
    """

    tiers: tuple[Tier, ...] | None = None
    max_items: int | None = None
    level_caps: bool = True
    interval_method: str = "simulate"
    rank_level: float = 0.9
    seed: int = 0


@dataclass
class Ranking:
    """Final ranking (best first) and the rounds that led to it."""

    models: list[dict[str, Any]]
    failures: dict[str, str]
    rounds: list[dict[str, Any]]
    levels: tuple[int, ...]
    stop_reason: str
    tiers: tuple[Tier, ...] = ()
    tier_rule: str = ""

    @property
    def items_spent(self) -> int:
        return int(sum(m["items"] for m in self.models))


def check_models(models: Sequence[str]) -> list[str]:
    """Model names as a list; duplicates are an error (one model would be ranked twice)."""
    models = [str(m) for m in models]
    dupes = duplicate_ids(models)
    if dupes:
        raise InputError(f"duplicate model names: {', '.join(map(repr, dupes[:5]))}")
    if len(models) < 2:
        raise InputError(f"ranking needs at least 2 models, got {len(models)}")
    return models


def check_levels(levels: Sequence[int]) -> tuple[int, ...]:
    levels = tuple(int(n) for n in levels)
    if not levels or levels[0] < 1 or any(b <= a for a, b in pairwise(levels)):
        raise InputError(f"levels must be increasing positive item counts, got {list(levels)}")
    return levels


def intervals_of(scores: Mapping[str, Scored], names: Sequence[str], options: RoundOptions):
    value, lower, upper = (
        np.array([getattr(scores[m], key) for m in names]) for key in ("value", "lower", "upper")
    )
    return rank_intervals(
        value,
        lower,
        upper,
        score_level=LEVEL,
        rank_level=options.rank_level,
        method=options.interval_method,
        seed=options.seed,
    )


def unresolved(names: Sequence[str], ranks: RankIntervals, tiers: Sequence[Tier]) -> list[str]:
    """Models whose rank interval is too wide for the finest tier it reaches, finest first."""
    needy = [
        (tier_index(tiers, int(lo)), -(int(hi) - int(lo)), name)
        for name, lo, hi in zip(names, ranks.low, ranks.high, strict=True)
        if not resolved(tiers, int(lo), int(hi))
    ]
    return [name for *_, name in sorted(needy)]


def caps_of(
    names: Sequence[str], ranks: RankIntervals, tiers: Sequence[Tier], n_levels: int, capped: bool
) -> dict[str, int]:
    """Highest level each model may reach: its finest reachable tier's cap, or the last."""
    if not capped:
        return dict.fromkeys(names, n_levels - 1)
    return {
        name: level_cap(tier_index(tiers, int(lo)), n_levels)
        for name, lo in zip(names, ranks.low, strict=True)
    }


def promotions(
    candidates: Sequence[str],
    level_of: Mapping[str, int],
    levels: Sequence[int],
    left: float,
    cap_of: Mapping[str, int],
) -> list[str]:
    """Candidates below their level cap whose next level the budget ``left`` still pays for."""
    chosen = []
    for name in candidates:
        current = level_of[name]
        if current + 1 > cap_of[name]:
            continue
        cost = levels[current + 1] - levels[current]
        if cost <= left:
            chosen.append(name)
            left -= cost
    return chosen


def _first_round(evaluator: Evaluator, models: list[str], options: RoundOptions) -> Evaluated:
    first_cost = evaluator.levels[0] * len(models)
    if options.max_items is not None and first_cost > options.max_items:
        raise InputError(
            f"the first round alone needs {first_cost} items ({len(models)} models x "
            f"{evaluator.levels[0]}); --max-items is {options.max_items}"
        )
    announce_round(evaluator, {0: models})
    return evaluator.evaluate(models, 0)


STATUS_TEXT = {
    "resolved": "yes",
    "all items": "no: all items used",
    "level cap": "no: at its tier's level cap",
    "budget": "no: item budget spent",
    "failed": "no: its next round failed",
}
"""How each ``status`` of a ranked model reads in ``ranking.md``'s ``resolved`` column."""


def row_status(
    name: str, is_resolved: bool, level: int, cap: int, n_levels: int, failures: Mapping
) -> str:
    """Why a model's rounds stopped: so a reader tells a settled rank from a cut-off one."""
    if is_resolved:
        return "resolved"
    if name in failures:
        return "failed"
    if level >= n_levels - 1:
        return "all items"
    return "level cap" if level >= cap else "budget"


def _rank_rows(
    names: list[str],
    ranks: RankIntervals,
    scores: Mapping[str, Scored],
    level_of: Mapping[str, int],
    tiers: Sequence[Tier],
    levels: Sequence[int],
    cap_of: Mapping[str, int],
    failures: Mapping[str, str],
) -> list[dict[str, Any]]:
    rows = []
    for k, name in enumerate(names):
        low, high = int(ranks.low[k]), int(ranks.high[k])
        is_resolved = resolved(tiers, low, high)
        rows.append(
            {
                "model": name,
                "rank": int(ranks.rank[k]),
                "estimate": scores[name].value,
                "lower": scores[name].lower,
                "upper": scores[name].upper,
                "rank_low": low,
                "rank_high": high,
                "tier": tiers[tier_index(tiers, int(ranks.rank[k]))].label,
                "resolved": is_resolved,
                "status": row_status(
                    name, is_resolved, level_of[name], cap_of[name], len(levels), failures
                ),
                "items": levels[level_of[name]],
            }
        )
    return sorted(rows, key=lambda row: row["rank"])


def run_rounds(evaluator: Evaluator, models: Sequence[str], options: RoundOptions) -> Ranking:
    """Rank ``models`` coarse to fine; failed models are reported and the rest ranked.

    The tiers are chosen once the first round says how many models can be ranked
    (:func:`.tiers.tiers_for`): a population of 10 or fewer is ranked pairwise.
    """
    models = check_models(models)
    levels = check_levels(evaluator.levels)
    first = _first_round(evaluator, models, options)
    scores, failures = dict(first.scores), dict(first.failures)
    level_of = dict.fromkeys(scores, 0)
    spent = levels[0] * len(models)
    rounds: list[dict[str, Any]] = []
    names = [m for m in models if m in scores]
    if len(names) < 2:
        raise InputError(f"fewer than 2 models could be scored; failures: {failures}")
    if options.tiers is not None:
        check_covers(options.tiers, len(names))
    tiers, rule = tiers_for(len(names), options.tiers)
    pairwise = rule.startswith("pairwise")
    while True:
        ranks = intervals_of(scores, names, options)
        needy = unresolved(names, ranks, tiers)
        cap_of = caps_of(names, ranks, tiers, len(levels), options.level_caps)
        left = np.inf if options.max_items is None else options.max_items - spent
        open_ = [m for m in needy if m not in failures]
        chosen = promotions(open_, level_of, levels, left, cap_of)
        rounds.append({"round": len(rounds), "unresolved": len(needy), "promoted": len(chosen)})
        if not chosen:
            reason = _stop_reason(open_, level_of, cap_of, pairwise)
            break
        batches = {
            target: [m for m in chosen if level_of[m] + 1 == target]
            for target in sorted({level_of[m] + 1 for m in chosen})
        }
        announce_round(evaluator, batches)
        for target, batch in batches.items():
            spent += sum(levels[target] - levels[level_of[m]] for m in batch)
            _merge(evaluator.evaluate(batch, target), batch, target, scores, level_of, failures)
    rows = _rank_rows(names, ranks, scores, level_of, tiers, levels, cap_of, failures)
    return Ranking(rows, failures, rounds, levels, reason, tiers, rule)


def _merge(
    result: Evaluated,
    batch: Sequence[str],
    target: int,
    scores: dict[str, Scored],
    level_of: dict[str, int],
    failures: dict[str, str],
) -> None:
    """Take a round's estimates; a model that fails keeps its earlier estimate and level."""
    for name in batch:
        if name in result.scores:
            scores[name], level_of[name] = result.scores[name], target
        else:
            failures[name] = result.failures.get(name, "no estimate returned")


def _stop_reason(
    needy: Sequence[str], level_of: Mapping[str, int], cap_of: Mapping[str, int], pairwise: bool
) -> str:
    if not needy:
        if pairwise:
            return "every model is placed at a single rank"
        return "every rank interval meets its tier's resolution"
    if all(level_of[m] >= cap_of[m] for m in needy):
        if pairwise:
            return "unresolved models have used every item"
        return "unresolved models are at their tier's last level"
    return "item budget spent"
