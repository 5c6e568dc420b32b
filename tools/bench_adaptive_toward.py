"""Can a pool's own folds choose how far a run above the sources moves to the IRT-free reading?
Writes bench/adaptive_toward.{md,json}.

On a whole-benchmark matrix (``ifeval``, ``musr``: the target is each model's mean over the
pool), the strongest fifth of the models is held out (``extrapolation_splits``, seed 0) and a
pool is fitted on the rest (:func:`lmeval_microbench.adaptive.pool.fit_adaptive_state`). Each
share of :data:`lmeval_microbench.adaptive.beyond.TOWARD_CANDIDATES` moves an estimate that
far from the score map's value to the IRT-free reading where that reading lies above every
source (:meth:`~lmeval_microbench.adaptive.scoring.ScoreMap.above_reading`), times the
posterior probability that the run's ability lies above the edge of the models the map was
fitted on (:func:`lmeval_microbench.adaptive.pool.ability_edges`), as pools do. Its MAE is
measured after 10, 25 and 50 max-information items on:

- ``target``: the held-out strongest fifth (what a new strong model meets);
- the pool's upward folds (the strongest fifth of the sources, the map fitted on the other
  four fifths, ``up 0.8``, or on the weakest half, ``up 0.5``), replayed either on the item
  parameters of all sources (``shared IRT``, as every fold of a pool was before) or on item
  parameters refitted on the fold's training models (``refitted IRT``).

The share a pool would choose is the one with the least mean fold error; the question is
whether the folds' choice is also good for the target.

    python tools/bench_adaptive_toward.py --shared ../shared/data
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_adaptive import load_benchmark

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.adaptive.bands import ABOVE
from lmeval_microbench.adaptive.beyond import TOWARD_CANDIDATES, share_errors
from lmeval_microbench.adaptive.calibrate import fold_params, fold_run
from lmeval_microbench.adaptive.pool import ability_edges, fit_adaptive_state
from lmeval_microbench.adaptive.selection import MaxInfoSelector
from lmeval_microbench.adaptive.simulate import replay
from lmeval_microbench.outside.folds import UP, directed_folds
from lmeval_microbench.reliability import extrapolation_splits

REPO = Path(__file__).resolve().parents[1]
MARKS = (10, 25, 50)
SHARES = np.array(TOWARD_CANDIDATES)


def errors_in_points(
    score_map: Any,
    params: Any,
    answers: np.ndarray,
    order: np.ndarray,
    truth: np.ndarray,
    edge: float,
) -> dict[str, list[float]]:
    """Every share's MAE (points) after each of :data:`MARKS` items (``beyond.share_errors``)."""
    found = share_errors(score_map, params, answers, order, truth, MARKS, edge)
    return {str(n): (100 * errors).tolist() for n, errors in found.items()}


def measure(shared: Path, bm: str, max_targets: int) -> dict[str, Any]:
    matrix, truth, _ = load_benchmark(shared, bm)
    split = next(extrapolation_splits(matrix, truth, repeats=1, seed=0))
    source, source_truth = split.source, split.source_truth
    params, state = fit_adaptive_state(source, source_truth, seed=0)
    smap = replace(state.score_map, toward=0.0)
    edge = next(side.ability_edge for side in smap.sides if side.side == ABOVE)
    rows = np.random.default_rng(0).permutation(split.target.n_models)[:max_targets]
    answers, target_truth = split.target.values[rows], split.target_truth[rows]
    order = replay(params, answers, selector=MaxInfoSelector(), max_items=max(MARKS)).order
    found: dict[str, Any] = {
        "chosen_by_pool": state.calibration.get("toward_reading"),
        "pseudo": smap.pseudo,
        "rows": {"target": errors_in_points(smap, params, answers, order, target_truth, edge)},
    }
    for train, test, direction in directed_folds(source_truth):
        if direction != UP:
            continue
        held, fit_on = (np.isin(np.arange(source.n_models), r) for r in (test, train))
        share = round(train.size / source.n_models, 1)
        for irt in ("shared IRT", "refitted IRT"):
            fold_irt = (
                params if irt == "shared IRT" else fold_params(source, fit_on, 0, params.item_ids)
            )
            run = fold_run(source, source_truth, source.values, fold_irt, held, "kridge", fit_on)
            fold_map = replace(run.score_map, pseudo=smap.pseudo)
            fold_edge = ability_edges(fold_irt, source.values[fit_on])[ABOVE]
            found["rows"][f"up {share}, {irt}"] = errors_in_points(
                fold_map, fold_irt, run.answers, run.order, source_truth[run.rows], fold_edge
            )
    return found


def best_share(errors: dict[str, list[float]]) -> float:
    """The share with the least error averaged over the run lengths."""
    return float(SHARES[int(np.argmin(np.mean([errors[str(n)] for n in MARKS], axis=0)))])


def markdown(results: dict[str, Any], command: str, seconds: float) -> str:
    lines = [
        "## Adaptive runs above the sources: how far to move to the IRT-free reading",
        "",
        f"Generated by `{command}` in {seconds:.0f} s (see the script's docstring). MAE in "
        "points after 10 / 25 / 50 max-information items, for the estimate moved by each "
        "share of the way to the reading (0: the score map's value, as before). `best`: the "
        "share with the least error over the three lengths.",
        "",
    ]
    for bm, found in results.items():
        lines += [
            f"### {bm} (the pool chose {found['chosen_by_pool']}, imputation "
            f"{found['pseudo']:g} pseudo answers)",
            "",
            "| rows | " + " | ".join(f"{s:g}" for s in SHARES) + " | best |",
            "|---|" + "---:|" * (len(SHARES) + 1),
        ]
        for name, errors in found["rows"].items():
            cells = [
                " / ".join(f"{errors[str(n)][k]:.1f}" for n in MARKS) for k in range(len(SHARES))
            ]
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {best_share(errors):g} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--benchmarks", default="ifeval,musr")
    parser.add_argument("--max-targets", type=int, default=200)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    results = {bm: measure(args.shared, bm, args.max_targets) for bm in args.benchmarks.split(",")}
    seconds = time.perf_counter() - start
    command = "python tools/bench_adaptive_toward.py " + " ".join(argv or sys.argv[1:])
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "adaptive_toward.json", {"command": command, "results": results})
    write_text_if_changed(args.out / "adaptive_toward.md", markdown(results, command, seconds))
    print(markdown(results, command, seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
