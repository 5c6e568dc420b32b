"""What to evaluate: methods x estimators x budgets x protocols, its defaults and checks.

Every check runs before the first split, so a bad plan fails in milliseconds, not after an
hour of fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InputError
from ..estimators import make_estimator
from ..estimators._fitting import MIN_SOURCE_MODELS
from ..selection import make_selector
from .splits import PROTOCOLS, split_sizes

ALL = "all"
"""Budget keyword (and method name) for "every item of the matrix"."""
ADAPTIVE = "adaptive"
"""Method (and estimator) name of adaptive testing: a pool fitted on the source models replays
every target model, picking its own items (:mod:`lmeval_microbench.adaptive.evaluate`)."""
DEFAULT_BUDGETS: tuple[int | str, ...] = (10, 25, 50, 100, ALL)
DEFAULT_REPEATS = 5
LOO_REPEATS = 1
"""Default repeats when ``loo`` runs: one cycle is already a split per model (see
:func:`default_repeats`)."""
LOO_BELOW = 30
"""Matrices with fewer models than this get ``loo`` instead of ``random``/``extrapolation``."""
LOO_MAX_MODELS = 200
"""``loo`` fits IRT once per model; above this many models use ``random``."""

Budget = int | str


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


def default_repeats(protocols: Sequence[str]) -> int:
    """Repeats when none are asked for: one ``loo`` cycle, else :data:`DEFAULT_REPEATS`.

    A ``loo`` cycle is already one split per model, every model a target once, each split
    with its own IRT fit; further cycles only redraw the selection seeds, at the full cost of
    a cycle each. On a 22 x 2,854 matrix a cycle of every method, estimator and budget takes
    minutes, five cycles took over an hour (issue 13). ``loo`` only runs by default on
    matrices of fewer than :data:`LOO_BELOW` models, where random 80/20 splits and their five
    repeats would leave too few targets to rank.
    """
    return LOO_REPEATS if "loo" in protocols else DEFAULT_REPEATS


def check_plan(plan: Plan, n_models: int, n_items: int, source: str, n_holdout: int) -> None:
    """Reject unknown names and protocols the matrix is too small (or too large) for."""
    for method in plan.methods:
        if method != ADAPTIVE:
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
