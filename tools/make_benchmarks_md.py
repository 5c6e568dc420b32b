"""Assemble BENCHMARKS.md from the reports the benchmark scripts wrote into bench/.

Every number in BENCHMARKS.md comes from a generated report; this script only concatenates
them in a fixed order (so nothing is typed in by hand), after a one-page headline whose tables
are copied from the reports named in :data:`HEADLINE` (the first table of each, or the table
after a given heading), each with a link to the whole report. Rerun after any benchmark script:

    python tools/make_benchmarks_md.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = [
    ("peers.md", "tools/bench_peers.py"),
    ("peers_noise.md", "tools/peers_noise.py"),
    ("peers_penalty.md", "tools/peers_compare.py"),
    ("peers_reach_below.md", "tools/peers_compare.py"),
    ("coverage_floor.md", "tools/coverage_floor.py"),
    ("placement.md", "tools/bench_placement.py"),
    ("adaptive_placement.md", "tools/bench_adaptive_placement.py"),
    ("ceiling.md", "tools/bench_ceiling.py"),
    ("peers_ifeval_rerun.md", "tools/peers_compare.py"),
    ("guard_cost.md", "tools/bench_guard_cost.py"),
    ("guard_cost_before_own_reach.md", "tools/bench_guard_cost.py"),
    ("peers_own_reach.md", "tools/peers_compare.py"),
    ("peers_medoid_ties.md", "tools/peers_compare.py"),
    ("peers_blend.md", "tools/peers_compare.py"),
    ("audit_split.md", "tools/bench_audit_split.py"),
    ("audit_counts.md", "tools/bench_audit_split.py"),
    ("ppi.md", "tools/bench_ppi.py"),
    ("peers_audit_locate.md", "tools/peers_compare.py"),
    ("peers_inside_lasso.md", "tools/peers_compare.py"),
    ("shipped_v2_change.md", "tools/shipped_v2_change.py"),
    ("guard_variants.md", "tools/bench_guard_variants.py"),
    ("outside_estimates.md", "tools/bench_outside_estimates.py"),
    ("peers_minq_above.md", "tools/peers_compare.py"),
    ("gaps.md", "tools/bench_gaps.py"),
    ("item_pools.md", "tools/bench_item_pools.py"),
    ("small_sources.md", "tools/bench_small_sources.py"),
    ("psn_held_out.md", "tools/bench_psn_held_out.py"),
    ("musr_tasks.md", "tools/bench_musr_tasks.py"),
    ("small_sources_before_penalty.md", "tools/bench_small_sources.py"),
    ("small_sources_before_min_choice.md", "tools/bench_small_sources.py"),
    ("small_sources_before_margin.md", "tools/bench_small_sources.py"),
    ("peers_fallback.md", "tools/peers_compare.py"),
    ("v1_default.md", "tools/bench_v1_default.py"),
    ("v1_default_before_floor.md", "tools/bench_v1_default.py"),
    ("v1_balanced_kridge.md", "tools/bench_v1_default.py"),
    ("v1_balanced_guarded.md", "tools/bench_v1_default.py"),
    ("v1_extrapolation.md", "tools/v1_extrapolation.py"),
    ("peers_widen.md", "tools/peers_compare.py"),
    ("peers_reselect_all_folds.md", "tools/peers_compare.py"),
    ("peers_crossfit.md", "tools/peers_compare.py"),
    ("peers_crossfit_fixed_view.md", "tools/peers_compare.py"),
    ("peers_inside_methods.md", "tools/peers_compare.py"),
    ("peers_guarded_only.md", "tools/peers_compare.py"),
    ("peers_balanced.md", "tools/peers_compare.py"),
    ("balanced.md", "tools/bench_balanced.py"),
    ("balanced_guarded.md", "tools/bench_balanced_guarded.py"),
    ("peers_no_margin.md", "tools/peers_compare.py"),
    ("choice_rules.md", "tools/bench_choice_rules.py"),
    ("choice_rules_before_seed2.md", "tools/bench_choice_rules.py"),
    ("choice_rules_repeats6.md", "tools/bench_choice_rules.py"),
    ("similar.md", "tools/bench_similar.py"),
    ("similar_penalty.md", "tools/bench_similar_penalty.py"),
    ("similar_before_penalty.md", "tools/bench_similar.py"),
    ("choice_rules_similar.md", "tools/bench_choice_rules.py"),
    ("choice_rules_lasso.md", "tools/bench_choice_rules.py"),
    ("choice_rules_sim_blend.md", "tools/bench_choice_rules.py"),
    ("peers_before_penalty.md", "tools/bench_peers.py"),
    ("peers_before_pam.md", "tools/bench_peers.py"),
    ("peers_before_downward.md", "tools/bench_peers.py"),
    ("supervised.md", "tools/bench_supervised.py"),
    ("v2_cost.md", "tools/bench_v2_cost.py"),
    ("build_speed.md", "tools/bench_build_speed.py"),
    ("irt_speed.md", "tools/bench_irt.py"),
    ("estimators.md", "tools/eval_estimators.py"),
    ("reliability.md", "tools/bench_reliability.py"),
    ("reliability_speed.md", "tools/bench_reliability_speed.py"),
    ("populations.md", "tools/bench_populations.py"),
    ("conformal_ties.md", "tools/bench_conformal_ties.py"),
    ("ours.md", "tools/eval_ours.py"),
    ("shipped_guard.md", "tools/bench_shipped_guard.py"),
    ("shipped_guard_before_inner_band.md", "tools/bench_shipped_guard.py"),
    ("shipped_guard_before_floor.md", "tools/bench_shipped_guard.py"),
    ("shipped_guard_before_reselect.md", "tools/bench_shipped_guard.py"),
    ("joint.md", "tools/eval_joint.py"),
    ("joint_shipped.md", "tools/eval_joint.py"),
    ("missing.md", "tools/bench_missing.py"),
    ("irt_small.md", "tools/bench_irt_small.py"),
    ("random_models.md", "tools/bench_random_models.py"),
    ("random_weights.md", "tools/bench_random_weights.py"),
    ("personfit.md", "tools/bench_personfit.py"),
    ("personfit_sources.md", "tools/bench_personfit_sources.py"),
    ("fit_effect.md", "tools/bench_fit_effect.py"),
    ("fit_effect_before_sd3.md", "tools/bench_fit_effect.py"),
    ("fractional_fit.md", "tools/bench_fractional_fit.py"),
    ("wall_time.md", "tools/bench_wall_time.py"),
    ("demo_time.md", "tools/bench_demo_time.py"),
    ("auto.md", "tools/bench_auto.py"),
    ("curves.md", "tools/bench_curves.py"),
    ("rank.md", "tools/bench_rank.py"),
    ("rank_few.md", "tools/bench_rank.py"),
    ("adaptive.md", "tools/bench_adaptive.py"),
    ("adaptive_fit.md", "tools/bench_adaptive_fit.py"),
    ("guess_weight.md", "tools/bench_guess_weight.py"),
    ("guess_weight_before_sd3.md", "tools/bench_guess_weight.py"),
    ("floor_rule.md", "tools/bench_floor_rule.py"),
    ("adaptive_before_calibrate.md", "tools/bench_adaptive.py"),
    ("adaptive_before_downfold.md", "tools/bench_adaptive.py"),
    ("adaptive_before_ability_edge.md", "tools/bench_adaptive.py"),
    ("adaptive_edge_at_weakest.md", "tools/bench_adaptive.py"),
    ("adaptive_before_rates.md", "tools/bench_adaptive.py"),
    ("adaptive_rates_in_bands.md", "tools/bench_adaptive.py"),
    ("adaptive_before_toward.md", "tools/bench_adaptive.py"),
    ("adaptive_before_reach.md", "tools/bench_adaptive.py"),
    ("adaptive_reach_on_whole.md", "tools/bench_adaptive.py"),
    ("adaptive_before_top.md", "tools/bench_adaptive.py"),
    ("adaptive_before_upper_only.md", "tools/bench_adaptive.py"),
    ("adaptive_equal.md", "tools/bench_adaptive_equal.py"),
    ("adaptive_equal_before_reselect.md", "tools/bench_adaptive_equal.py"),
    ("adaptive_toward.md", "tools/bench_adaptive_toward.py"),
    ("adaptive_peer.md", "tools/bench_adaptive_peer.py"),
    ("adaptive_sources.md", "tools/bench_adaptive_sources.py"),
    ("adaptive_sources_weak.md", "tools/bench_adaptive_sources.py"),
    ("adaptive_sources_weak_checked.md", "tools/bench_adaptive_sources.py"),
    ("adaptive_sources_weak_checked_before_lower_reach.md", "tools/bench_adaptive_sources.py"),
    ("adaptive_sources_before_smoothed_rates.md", "tools/bench_adaptive_sources.py"),
    ("adaptive_v2_rates_after.md", "tools/bench_adaptive.py"),
    ("adaptive_v2_rates_before.md", "tools/bench_adaptive.py"),
    ("adaptive_sources_before_unchosen_move.md", "tools/bench_adaptive_sources.py"),
    ("adaptive_sources_fold_irt_only.md", "tools/bench_adaptive_sources.py"),
    ("adaptive_sources_before_fold_irt.md", "tools/bench_adaptive_sources.py"),
    ("demo_adaptive.md", "tools/bench_demo_adaptive.py"),
    ("inloop.md", "tools/bench_inloop.py"),
    ("inloop_gpu.md", "tools/bench_inloop.py"),
    ("gpu.md", "tools/bench_gpu.py"),
]
HEADLINE = [
    ("Accuracy against the published methods (benchpred), on the same splits", "peers.md", None),
    ("Cost against whole-benchmark runs (Open LLM Leaderboard v2)", "v2_cost.md", None),
    ("Build time of the default recipe choice", "build_speed.md", None),
    ("Person fit: random-weights models through lm-eval", "random_weights.md", None),
    (
        "Held-out accuracy and coverage of the shipped v1 micro tasks (`guarded`, the default)",
        "shipped_guard.md",
        None,
    ),
    (
        "Joint estimation against the shipped per-benchmark estimator",
        "joint_shipped.md",
        "## Joint",
    ),
    ("The demo's announced and real time", "demo_time.md", None),
    ("Adaptive runs on a GPU: one call per step for every benchmark", "gpu.md", None),
]
"""(title, report, heading before the table or None for the report's first table)."""
HEADER = """# Benchmarks

Generated by `python tools/make_benchmarks_md.py` from the reports in `bench/` (each with its
JSON beside it). Each section names the script that produced it and the exact command; rerun
that script to reproduce the numbers. Machine: 2 CPU cores, 24 GiB, no GPU; except
`bench/gpu.md`, measured on an NVIDIA H100 lent for one session.
"""


def demote_headings(text: str) -> str:
    """Turn each report's headings one level down so they nest under this file's title."""
    return "\n".join("#" + line if line.startswith("#") else line for line in text.splitlines())


def first_table(text: str, after: str | None = None) -> str | None:
    """The first markdown table of ``text`` (after the line starting with ``after``)."""
    lines = text.splitlines()
    start = 0
    if after is not None:
        start = next((k for k, line in enumerate(lines) if line.startswith(after)), len(lines))
    table: list[str] = []
    for line in lines[start:]:
        if line.startswith("|"):
            table.append(line)
        elif table:
            break
    return "\n".join(table) if table else None


def headline(bench: Path) -> str:
    """The one-page summary: a table of each headline report, with a link to the report."""
    parts = [
        "## Headline",
        "",
        "One table from each of the main reports (copied by `tools/make_benchmarks_md.py`); "
        "the whole reports, with their commands, follow.",
    ]
    for title, name, after in HEADLINE:
        report = bench / name
        table = first_table(report.read_text(encoding="utf-8"), after) if report.exists() else None
        parts += ["", f"**{title}** ([`bench/{name}`](bench/{name})):", ""]
        parts.append(table or f"Not generated yet: the report `bench/{name}` has no table.")
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", type=Path, default=ROOT / "bench")
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    args = parser.parse_args()
    parts = [HEADER, headline(args.bench)]
    for name, script in SECTIONS:
        report = args.bench / name
        if report.exists():
            parts.append(demote_headings(report.read_text(encoding="utf-8").strip()))
        else:
            parts.append(f"## {name}\n\nNot generated yet: run `python {script}`.")
    args.out.write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
