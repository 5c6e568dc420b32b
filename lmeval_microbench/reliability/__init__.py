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

Work is shared so that a benchmark takes seconds to minutes: IRT is fitted once per source set
(not per estimator, and once in all for ``extrapolation``/``holdout``), items are selected once
per method x budget x repeat and every estimator is fitted on that same subset.

The package follows the data flow: :mod:`.splits` (protocols: models -> source/target
splits), :mod:`.plan` (what to evaluate, its defaults and checks), :mod:`.evaluate` (per split:
selection, fits, estimates; the shared IRT fit), :mod:`.metrics` (pooled estimates -> the
metrics below) and :mod:`.report` (strict JSON, markdown). The leaderboard benchmark of
``tools/bench_reliability.py`` (its matrices and truths, the ridge and metabench anchors, the
choice of each benchmark's shipped recipe) lives beside it in ``tools/leaderboard_*.py``: only
the tools use it.

Metrics, per method x estimator x budget x protocol, pooled over repeats (score points =
percent of the full benchmark):

``mae``, ``rmse``, ``max_error``, ``bias``  of estimate - truth over all target estimates;
``kendall_tau``  Kendall's tau-b between estimates and truths of the targets of one repeat,
                 averaged over repeats;
``mdad``         minimum detectable accuracy difference, see :func:`mdad_from_counts`;
``coverage90``   share of targets whose truth lies in the estimator's 90 % interval;
``width90``      mean width of that interval;
``cov90_low``, ``cov90_mid``, ``cov90_high``  coverage among the targets whose *estimate* lies in
                 the lower, middle or upper third of the score range (equal-width thirds of the
                 targets' true scores, min to max): what a user, who sees only the estimate,
                 can rely on; ``cov90_min_third`` the worst of them (NaN thirds skipped) and
                 ``cov90_min_third_truth`` the worst third when targets are grouped by their
                 true score instead (see :func:`coverage_by_thirds`);
``seconds``      estimator fits and estimates, summed over repeats (``selection_seconds``: the
                 method's item selection, shared by all estimators of that method).

Records also carry ``n_sources`` (source models per split), ``n_targets`` (target models per
repeat; for ``loo`` every model), ``items`` (items estimated from), ``repeats``, ``bias``,
``mae_sd`` (spread of the per-repeat MAE) and ``mdad_status``.
"""

from __future__ import annotations

from ..estimators import needs_irt
from ..truth import complete_models
from .evaluate import (
    BLAS_THREADS,
    LEVEL,
    IRTCache,
    ReliabilityResult,
    all_items_subset,
    blas_limit,
    checked_inputs,
    evaluate_plan,
    evaluate_split,
    run_info,
    run_reliability,
    select_items,
    sort_records,
)
from .metrics import (
    MDAD_AGREEMENT,
    MDAD_BIN_WIDTH,
    MDAD_MIN_PAIRS,
    MIN_PER_THIRD,
    SUMMARY_METRICS,
    THIRD_FIELDS,
    ResultPool,
    coverage_by_thirds,
    error_metrics,
    gap_agreement_counts,
    interval_coverage,
    interval_metrics,
    kendall_tau,
    mdad,
    mdad_from_counts,
    mdad_status,
    pool_facts,
    pooled_mdad,
    ranking_metrics,
    spread_metrics,
    summarise,
)
from .plan import (
    ALL,
    DEFAULT_BUDGETS,
    DEFAULT_REPEATS,
    LOO_BELOW,
    LOO_MAX_MODELS,
    LOO_REPEATS,
    Budget,
    Plan,
    budget_sort_key,
    check_budgets,
    check_plan,
    default_protocols,
    default_repeats,
    parse_budgets,
)
from .report import (
    MARKDOWN_COLUMNS,
    NOT_APPLICABLE,
    json_ready,
    markdown_report,
    markdown_table,
    table_notes,
)
from .splits import (
    PROTOCOLS,
    TARGET_SHARE,
    Split,
    check_holdout,
    check_truth,
    extrapolation_splits,
    holdout_splits,
    loo_splits,
    n_splits,
    n_targets,
    protocol_splits,
    random_splits,
    split_sizes,
    top_rows,
    weakest_splits,
)

__all__ = [
    "ALL",
    "BLAS_THREADS",
    "DEFAULT_BUDGETS",
    "DEFAULT_REPEATS",
    "LEVEL",
    "LOO_BELOW",
    "LOO_MAX_MODELS",
    "LOO_REPEATS",
    "MARKDOWN_COLUMNS",
    "MDAD_AGREEMENT",
    "MDAD_BIN_WIDTH",
    "MDAD_MIN_PAIRS",
    "MIN_PER_THIRD",
    "NOT_APPLICABLE",
    "PROTOCOLS",
    "SUMMARY_METRICS",
    "TARGET_SHARE",
    "THIRD_FIELDS",
    "Budget",
    "IRTCache",
    "Plan",
    "ReliabilityResult",
    "ResultPool",
    "Split",
    "all_items_subset",
    "blas_limit",
    "budget_sort_key",
    "check_budgets",
    "check_holdout",
    "check_plan",
    "check_truth",
    "checked_inputs",
    "complete_models",
    "coverage_by_thirds",
    "default_protocols",
    "default_repeats",
    "error_metrics",
    "evaluate_plan",
    "evaluate_split",
    "extrapolation_splits",
    "gap_agreement_counts",
    "holdout_splits",
    "interval_coverage",
    "interval_metrics",
    "json_ready",
    "kendall_tau",
    "loo_splits",
    "markdown_report",
    "markdown_table",
    "mdad",
    "mdad_from_counts",
    "mdad_status",
    "n_splits",
    "n_targets",
    "needs_irt",
    "parse_budgets",
    "pool_facts",
    "pooled_mdad",
    "protocol_splits",
    "random_splits",
    "ranking_metrics",
    "run_info",
    "run_reliability",
    "select_items",
    "sort_records",
    "split_sizes",
    "spread_metrics",
    "summarise",
    "table_notes",
    "top_rows",
    "weakest_splits",
]
