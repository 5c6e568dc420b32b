"""How often an exact 90 % conformal interval covers under 0.85 of a cell: bench/coverage_floor.*.

Issue 19 asks for 90 % intervals covering 0.85-0.95 of the held-out models in every cell of the
peer suite, also with 25 source models. A conformal interval fitted on n source models covers
a new model *like them* with probability exactly 0.9 on average over draws of the sources,
but the coverage of one fitted interval is a random variable: with the interval at the k-th
smallest of n scaled residuals, ``k = ceil((n + 1) 0.9)``, it is Beta(k, n + 1 - k)
distributed (Vovk 2012), and a cell measures it on m held-out models, adding binomial noise.
So even a perfect interval leaves some cells under 0.85, more with few sources and few
held-out models.

This reads the peer suite's committed results (``bench/peers.json``, nothing rerun) and sets,
for the default's random-split cells (where the held-out models are like the sources), the
number of cells under 0.85 and over 0.95 beside the number an exact conformal interval would
give in expectation (the sum over cells of that probability). The excess is what our
intervals add. A second table counts the cells beyond the sources (strongest and weakest
fifth held out), where no such reference exists, with their widths. Source counts: the
population size, or, for population ``all``, four times the held-out models (the suite holds
out a fifth) capped at the v1 limit the suite's report records, and 10 on psn.

    python tools/coverage_floor.py              # bench/peers.json -> bench/coverage_floor.*
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from peer_cells import PSN, V1, V1_ALL, V2
from scipy.stats import beta, binom

from lmeval_microbench._io import write_json_atomic, write_text_if_changed

REPO = Path(__file__).resolve().parents[1]
LEVEL = 0.9
LOW, HIGH = 0.85, 0.95
PSN_SOURCES = 10
"""The psn blocks have 12 models; a split holds out 2."""
GRID = np.linspace(0.0, 1.0, 4001)[1:-1]


def sources_of(cell: dict[str, Any], v1_all: int) -> int:
    """Source models the cell's bundle was fitted on (``v1_all``: the suite's v1 cap)."""
    if cell["population"] != "all":
        return int(cell["population"])
    if cell["matrix"] in PSN:
        return PSN_SOURCES
    n = 4 * int(cell["n_targets"])
    return min(n, v1_all) if cell["matrix"] in V1 else n


def outside_probability(n_sources: int, n_targets: int) -> tuple[float, float]:
    """P(measured coverage < LOW) and P(> HIGH) for an exact conformal interval."""
    k = math.ceil((n_sources + 1) * LEVEL)
    if k > n_sources:
        return 0.0, 1.0  # an infinite interval covers everything
    density = beta.pdf(GRID, k, n_sources + 1 - k)
    density /= density.sum()
    below = binom.cdf(math.ceil(LOW * n_targets) - 1, n_targets, GRID)
    above = binom.sf(math.floor(HIGH * n_targets), n_targets, GRID)
    return float(density @ below), float(density @ above)


def group_of(cell: dict[str, Any]) -> str:
    family = "v2" if cell["matrix"] in V2 else "v1" if cell["matrix"] in V1 else "psn"
    sources = "all sources" if cell["population"] == "all" else f"{cell['population']} sources"
    return f"{family}, {sources}"


def tally(cells: list[dict[str, Any]], v1_all: int = V1_ALL) -> list[dict[str, Any]]:
    """Per family x population: random-split cells of ``ours``, observed and expected counts
    outside [LOW, HIGH]."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for cell in cells:
        ours = cell["methods"].get("ours") or {}
        if cell["protocol"] != "random" or ours.get("coverage") is None:
            continue
        below, above = outside_probability(sources_of(cell, v1_all), int(cell["n_targets"]))
        coverage = float(ours["coverage"])
        groups[group_of(cell)].append(
            {"coverage": coverage, "expected_below": below, "expected_above": above}
        )
    out = []
    for name, members in sorted(groups.items()):
        out.append(
            {
                "group": name,
                "cells": len(members),
                "below": sum(m["coverage"] < LOW for m in members),
                "expected_below": float(sum(m["expected_below"] for m in members)),
                "above": sum(m["coverage"] > HIGH for m in members),
                "expected_above": float(sum(m["expected_above"] for m in members)),
                "mean_coverage": float(np.mean([m["coverage"] for m in members])),
            }
        )
    return out


def beyond_tally(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per protocol beyond the sources x family x population: cells of ``ours`` under LOW and
    over HIGH, mean coverage and width, and the mean width of the same group's random cells.

    No exact reference exists here: a conformal interval fitted on the sources promises
    nothing for models outside them, and the guard widens on purpose (the interval is the part
    that must not fail). Over HIGH is the price of that, shown so that a reader sees it."""
    random_widths: dict[str, list[float]] = defaultdict(list)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for cell in cells:
        ours = cell["methods"].get("ours") or {}
        if ours.get("coverage") is None or ours.get("width") is None:
            continue
        if cell["protocol"] == "random":
            random_widths[group_of(cell)].append(float(ours["width"]))
        else:
            groups[(cell["protocol"], group_of(cell))].append(ours)
    out = []
    for (protocol, name), members in sorted(groups.items()):
        coverage = np.array([float(m["coverage"]) for m in members])
        widths = random_widths.get(name)
        out.append(
            {
                "protocol": protocol,
                "group": name,
                "cells": len(members),
                "below": int(np.sum(coverage < LOW)),
                "above": int(np.sum(coverage > HIGH)),
                "mean_coverage": float(np.mean(coverage)),
                "mean_width": float(np.mean([float(m["width"]) for m in members])),
                "random_width": float(np.mean(widths)) if widths else None,
            }
        )
    return out


def markdown(groups: list[dict[str, Any]], source: str, beyond: list[dict[str, Any]]) -> str:
    lines = [
        "# Coverage of single cells against an exact conformal interval",
        "",
        f"Generated by `python tools/coverage_floor.py` from `{source}` (nothing rerun). The "
        f"default's 90 % interval on the peer suite's random splits (one cell per seed): how "
        f"many cells covered under {LOW} or over {HIGH} of their held-out models, beside the "
        "number an exact conformal interval fitted on the same number of sources and measured "
        "on the same number of held-out models would give in expectation. The psn cells hold "
        "out 2 models each, so their coverage is 0, 0.5 or 1.",
        "",
        f"| cells | n | mean coverage | under {LOW} | expected (exact conformal) | "
        f"over {HIGH} | expected (exact conformal) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for g in groups:
        lines.append(
            f"| {g['group']} | {g['cells']} | {g['mean_coverage']:.3f} | {g['below']} | "
            f"{g['expected_below']:.1f} | {g['above']} | {g['expected_above']:.1f} |"
        )
    lines += [
        "",
        "## Beyond the sources",
        "",
        "The strongest fifth (`extrapolation`) and the weakest fifth (`weak`) held out. No exact "
        "reference exists here: an interval fitted on the sources promises nothing for models "
        "outside them, and the guard widens on purpose. Issue 19 asks for 0.85-0.95 here too; "
        f"the cells over {HIGH} are intervals wider than the error needed, and the width "
        "beside the same group's random cells is what that costs.",
        "",
        f"| protocol | family, sources | cells | mean coverage | under {LOW} | over {HIGH} | "
        "mean width | "
        "random cells' mean width |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for g in beyond:
        random_width = "-" if g["random_width"] is None else f"{g['random_width']:.1f}"
        lines.append(
            f"| {g['protocol']} | {g['group']} | {g['cells']} | {g['mean_coverage']:.3f} | "
            f"{g['below']} | {g['above']} | {g['mean_width']:.1f} | {random_width} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers", type=Path, default=REPO / "bench" / "peers.json")
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    args = parser.parse_args(argv)
    peers = json.loads(args.peers.read_text())
    groups = tally(peers["cells"], peers.get("info", {}).get("v1_all", V1_ALL))
    beyond = beyond_tally(peers["cells"])
    write_json_atomic(
        args.out / "coverage_floor.json",
        {"source": args.peers.name, "groups": groups, "beyond": beyond},
    )
    write_text_if_changed(args.out / "coverage_floor.md", markdown(groups, args.peers.name, beyond))
    print(f"wrote {args.out / 'coverage_floor.md'} ({sum(g['cells'] for g in groups)} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
