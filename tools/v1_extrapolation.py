"""Why some v1 benchmarks miss 1.5 points beyond the sources: bench/v1_extrapolation.*.

Issue 19 sets a target of at most 1.5 points MAE at 50 items when the strongest fifth of the
leaderboard is estimated from the rest, and asks, where a benchmark cannot get there, to show
why with numbers. This sets side by side, per v1 benchmark, from committed results (nothing
rerun but one closed-form number):

- the peer suite (``bench/peers.json``; full score = the mean over the matrix items, at most
  1,000 source models, seeds 0 and 1): the default's MAE at 50 and at 100 items, the best
  benchpred method's at 50, and random items with their plain mean;
- ``bench/choice_rules.json`` (the same cells): the best of every candidate ``--method auto``
  scored, picked *after* seeing the held-out models' errors, a bound no choice reaches;
- the sampling error of 50 uniformly random items, in closed form from the held-out models'
  own answers: ``sqrt(2/pi) * sqrt(p (1 - p) / n * (N - n) / (N - 1))`` per model (the mean
  absolute error of a simple random sample's mean, normal approximation), averaged. It is what
  a model's own 50 answers pin down without borrowing from the source models;
- the share of matrix items every held-out model answered right: metabench kept items that
  tell the leaderboard apart, and the strongest fifth is near their ceiling, so on the matrix
  scale their scores are easy to estimate (the true score is not);
- the reliability benchmark (``bench/reliability.json``; the true full-benchmark score, all
  3,000-4,400 models, fixed recipes): the best recipe at 50 items and the best with every
  matrix item, on its own strongest-fifth split;
- the default build against the true full score on the same splits (``bench/v1_default.json``,
  :mod:`bench_v1_default`), the strongest and the weakest fifth;
- how far the matrix mean's map to the true score bends beyond the sources, computed from the
  data: a least-squares line ``truth ~ matrix mean`` (every matrix item answered) fitted on
  the other models, and its mean signed error on the strongest and on the weakest fifth.
  Every estimator learns that map from the sources; where the line is off by points with
  every item known, no choice of 50 items can recover it.

A benchmark where nothing reaches 1.5 at 50 items, neither ours nor any candidate nor any
benchpred method, is limited by its data at that budget, not by the choice.

    python tools/v1_extrapolation.py        # -> bench/v1_extrapolation.{json,md}
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
from bench_peers import PEERS
from bench_v1_default import split_of
from cell_scoring import points
from peer_cells import DATA, V1, Cell, split_cell

from lmeval_microbench._io import write_json_atomic, write_text_if_changed

REPO = Path(__file__).resolve().parents[1]
BUDGET = 50
GOAL = 1.5


def sampling_error(values: np.ndarray, n_items: int) -> float:
    """Mean absolute error, in points, of the mean of ``n_items`` uniformly random items of the
    matrix for these models (rows of 0/1 answers): finite-population, normal approximation."""
    n_total = values.shape[1]
    p = values.mean(axis=1)
    correction = (n_total - n_items) / (n_total - 1)
    sd = np.sqrt(p * (1.0 - p) / n_items * correction)
    return 100 * math.sqrt(2.0 / math.pi) * float(sd.mean())


def peer_case(cells: list[dict[str, Any]], matrix: str, budget: int) -> dict[str, Any] | None:
    """Means over seeds of the peer suite's strongest-fifth case (all sources, ``budget``)."""
    found = [
        c
        for c in cells
        if c["matrix"] == matrix
        and c["population"] == "all"
        and c["protocol"] == "extrapolation"
        and c["budget"] == budget
    ]
    if not found or any("ours" not in c["methods"] for c in found):
        return None
    peers = [n for n in PEERS if all(c["methods"].get(n, {}).get("mae") is not None for c in found)]
    means = {n: float(np.mean([c["methods"][n]["mae"] for c in found])) for n in ("ours", *peers)}
    best = min(peers, key=lambda n: means[n])
    return {
        "seeds": sorted(c["seed"] for c in found),
        "ours": means["ours"],
        "best_peer": best,
        "best_peer_mae": means[best],
        "random_sampling": means.get("random_sampling"),
    }


def best_candidate(cells: list[dict[str, Any]], matrix: str) -> float | None:
    """Mean over seeds of the least held-out error among the candidates the choice scored."""
    prefix = f"{matrix}/all/extrapolation/{BUDGET}/"
    errors = [
        min(e["mae"] for e in c["held_out"].values())
        for c in cells
        if c["key"].startswith(prefix) and c.get("held_out")
    ]
    return float(np.mean(errors)) if errors else None


def reliability_case(summary: list[dict[str, Any]], matrix: str) -> dict[str, Any] | None:
    for row in summary:
        if row["dataset"] == matrix and row["protocol"] == "extrapolation":
            best, every = row["best50"], row["best_all"]
            return {
                "best50": f"{best['method']} + {best['estimator']}",
                "best50_mae": best["mae"],
                "all_items": every["items"],
                "all_mae": every["mae"],
            }
    return None


def line_bias(matrix: str, data: Path) -> dict[str, float]:
    """Mean signed error, in points, of ``truth ~ matrix mean`` fitted on the other models,
    on the strongest and on the weakest fifth by true score (the reliability splits)."""
    out = {}
    for side, protocol in (("strongest", "extrapolation"), ("weakest", "weak")):
        split = split_of(matrix, protocol, 0, data)
        rest, held = (np.nanmean(m.values, axis=1) for m in (split.source, split.target))
        slope, intercept = np.polyfit(rest, split.source_truth, 1)
        out[side] = 100 * float(np.mean(intercept + slope * held - split.target_truth))
    return out


def default_case(cases: list[dict[str, Any]], matrix: str, protocol: str) -> dict | None:
    """The default build's case of ``bench/v1_default.json`` at 50 items."""
    for case in cases:
        if (case["matrix"], case["protocol"], case["budget"]) == (matrix, protocol, BUDGET):
            return case
    return None


def held_out_answers(matrix: str, data: Path, seed: int) -> np.ndarray:
    """0/1 answers of the peer suite's strongest fifth (the same models for every seed)."""
    cell = Cell(matrix, "all", "extrapolation", BUDGET, seed)
    return split_cell(cell, data).target.values


def rows_of(loaded: dict[str, dict[str, Any]], data: Path) -> list[dict[str, Any]]:
    peers, choice, reliability = loaded["peers"], loaded["choice_rules"], loaded["reliability"]
    defaults = loaded.get("v1_default", {}).get("cases", [])
    rows = []
    for matrix in V1:
        at50 = peer_case(peers["cells"], matrix, BUDGET)
        if at50 is None:
            continue
        at100 = peer_case(peers["cells"], matrix, 100)
        row = {"matrix": matrix, **at50}
        row["ours_100"] = at100["ours"] if at100 else None
        row["best_candidate"] = best_candidate(choice["cells"], matrix)
        answers = held_out_answers(matrix, data, at50["seeds"][0])
        row["sampling_error"] = sampling_error(answers, BUDGET)
        row["all_right_share"] = float(np.mean(answers.min(axis=0) == 1))
        row["reliability"] = reliability_case(reliability["summary"], matrix)
        row["default_true"] = {
            side: default_case(defaults, matrix, side) for side in ("extrapolation", "weak")
        }
        row["line_bias"] = line_bias(matrix, data)
        reached = [row["ours"], row["best_peer_mae"], row["best_candidate"]]
        row["anything_reaches_goal"] = any(v is not None and v <= GOAL for v in reached)
        rows.append(row)
    return rows


def _default(case: dict[str, Any] | None) -> str:
    if case is None:
        return "-"
    return f"{case['mae']:.2f} ({case['bias']:+.2f}, cov {case['coverage']:.2f})"


def markdown(rows: list[dict[str, Any]], command: str) -> str:
    lines = [
        "# Open LLM Leaderboard v1, strongest fifth at 50 items: where 1.5 points is out of reach",
        "",
        f"Generated by `{command}` from `bench/peers.json`, `bench/choice_rules.json` and "
        "`bench/reliability.json` (nothing rerun; the sampling error is computed from the "
        "held-out models' answers). MAE in points. Peer suite: full score = the mean over the "
        "matrix items, at most 1,000 source models, mean of seeds "
        f"{', '.join(map(str, rows[0]['seeds'])) if rows else '-'}. `best candidate`: the least "
        "held-out error among the candidates `--method auto` scored, known only after the "
        "fact. `50 random items, expected`: the mean absolute error of the plain mean of 50 "
        "uniformly random matrix items for these models, what their own answers pin down. "
        "`items all of them got right`: the share of matrix items every held-out model "
        "answered right, which no estimate of theirs can get wrong (on the matrix scale the "
        "strongest fifth is near the ceiling). "
        "Reliability benchmark: the true full-benchmark score, all source models, fixed "
        "recipes, its own strongest-fifth split.",
        "",
        "| benchmark | ours, 50 | ours, 100 | best candidate, 50 | best benchpred, 50 | random "
        "items + mean, 50 | 50 random items, expected | items all of them got right | true "
        "score: best at 50 | true score: every matrix item | anything <= 1.5 at 50 |",
        "|---|---:|---:|---:|---|---:|---:|---:|---|---|---|",
    ]
    for r in rows:
        rel = r["reliability"]
        rel50 = f"{rel['best50']} {rel['best50_mae']:.2f}" if rel else "-"
        rel_all = f"{rel['all_mae']:.2f} ({rel['all_items']} items)" if rel else "-"
        lines.append(
            f"| {r['matrix']} | {r['ours']:.2f} | {points(r['ours_100'])} | "
            f"{points(r['best_candidate'])} | {r['best_peer']} {r['best_peer_mae']:.2f} | "
            f"{points(r['random_sampling'])} | {r['sampling_error']:.2f} | "
            f"{100 * r['all_right_share']:.0f} % | {rel50} | "
            f"{rel_all} | {'yes' if r['anything_reaches_goal'] else 'no'} |"
        )
    out_of_reach = [r["matrix"] for r in rows if not r["anything_reaches_goal"]]
    lines += [
        "",
        f"Out of reach at {BUDGET} items on these splits (no method of ours or benchpred's "
        f"at or under {GOAL}): {', '.join(out_of_reach) if out_of_reach else 'none'}.",
    ]
    lines += [
        "",
        "Against the true full score (the reliability benchmark's splits, every other model a "
        "source): the default build at 50 items (`bench/v1_default.md`: MAE, bias, coverage "
        "of its 90 % interval; mean of its seeds), and a line `truth ~ matrix mean` fitted on "
        "the other models with every matrix item answered: its mean signed error on the held-"
        "out fifth, how far the map the sources teach bends beyond them.",
        "",
        "| benchmark | default, strongest fifth | line, strongest fifth | default, weakest fifth "
        "| line, weakest fifth |",
        "|---|---|---:|---|---:|",
    ]
    for r in rows:
        top, bottom = r["default_true"]["extrapolation"], r["default_true"]["weak"]
        lines.append(
            f"| {r['matrix']} | {_default(top)} | {r['line_bias']['strongest']:+.2f} | "
            f"{_default(bottom)} | {r['line_bias']['weakest']:+.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--bench", type=Path, default=REPO / "bench", help="committed results")
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    args = parser.parse_args(argv)
    loaded = {
        name: json.loads((args.bench / f"{name}.json").read_text())
        for name in ("peers", "choice_rules", "reliability")
    }
    optional = args.bench / "v1_default.json"
    if optional.exists():
        loaded["v1_default"] = json.loads(optional.read_text())
    rows = rows_of(loaded, args.data)
    command = "python tools/v1_extrapolation.py"
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "v1_extrapolation.json", {"command": command, "rows": rows})
    write_text_if_changed(args.out / "v1_extrapolation.md", markdown(rows, command))
    print(markdown(rows, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
