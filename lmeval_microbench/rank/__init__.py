"""Ranking many models cheaply: coarse-to-fine rounds (Flash-HELM) and DIoR.

Roles, one module each: ``tiers`` (which ranks need which resolution), ``intervals`` (rank
intervals from score intervals), ``rounds`` (the round engine over any evaluator),
``replay`` and ``live`` (evaluators over a response matrix and over lm-eval), ``cluster``
(live rounds whose lm-eval commands a scheduler runs; ``cluster_runs`` writes them and reads
their outputs back), ``dior``
(reliability of a design decision; the package's one Kendall tau, ``kendall_tau``) and
``report`` (outputs). ``live`` imports lm-eval
lazily, so importing this package does not.
"""

from .dior import DIoR, decision_impact, dior, kendall_tau, ranking_tau, top_k_agreement
from .intervals import RankIntervals, rank_intervals
from .rounds import Evaluated, Evaluator, Ranking, RoundOptions, Scored, run_rounds
from .tiers import FLASH_HELM_TIERS, Tier, parse_tiers

__all__ = [
    "FLASH_HELM_TIERS",
    "DIoR",
    "Evaluated",
    "Evaluator",
    "RankIntervals",
    "Ranking",
    "RoundOptions",
    "Scored",
    "Tier",
    "decision_impact",
    "dior",
    "kendall_tau",
    "parse_tiers",
    "rank_intervals",
    "ranking_tau",
    "run_rounds",
    "top_k_agreement",
]
