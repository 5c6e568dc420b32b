"""Wall time of ``microbench build`` with its defaults on whole current benchmarks.

Runs the command a user runs (``microbench build --responses M --budget B --benchmark NAME
--out DIR``: method and estimator chosen by ``--method auto``, then every estimator fitted)
on the Open LLM Leaderboard v2 matrices (IFEval 348 x 541, MuSR 348 x 756) in a fresh
process each, ``--repeats`` times, and records wall and CPU seconds with the machine's load
average before and after (other processes on a shared machine slow every number), and the
build's peak memory. Writes ``bench/build_speed.json`` and ``.md``.

Whole current benchmarks run to thousands of items (MMLU-Pro 12,032, BBH 5,761). ``--wide K``
(a comma list: one build per K) adds a build on MuSR's answers repeated K times side by side,
8 % of each copy's answers flipped at random so that no two items are the same (348 x 756 K;
real answers, not a real benchmark), to show how the time and memory grow with the items.
``--v1 NAME`` adds an Open LLM Leaderboard v1 matrix with every model it holds (GSM8K: 4,054 x
249), for the growth with the models.

    python tools/bench_build_speed.py --repeats 1 --wide 8,16 --v1 gsm8k
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "openllm_v2" / "responses"
V1 = REPO.parent / "shared" / "data" / "openllm_v1" / "responses"
TARGET_SECONDS = 60
FLIP_SHARE = 0.08


def wide_matrix(source: Path, copies: int, out: Path) -> Path:
    """``source``'s answers ``copies`` times side by side, :data:`FLIP_SHARE` of each copy's
    answers flipped (seeded), as a parquet file in ``out``."""
    frame = pd.read_parquet(source)
    rng = np.random.default_rng(0)
    values = frame.to_numpy(dtype=np.int8)
    blocks = []
    for copy in range(copies):
        flipped = np.where(rng.random(values.shape) < FLIP_SHARE, 1 - values, values)
        columns = [f"{c}.copy{copy}" for c in frame.columns]
        blocks.append(pd.DataFrame(flipped.astype(np.int8), index=frame.index, columns=columns))
    path = out / f"{source.stem}_x{copies}.parquet"
    pd.concat(blocks, axis=1).to_parquet(path)
    return path


def time_build(matrix: Path, budget: int) -> dict:
    """One fresh ``microbench build`` of ``matrix``: wall and CPU seconds, peak memory."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "lmeval_microbench.cli.app", "build", "--responses",
                   str(matrix), "--budget", str(budget), "--benchmark", matrix.stem,
                   "--out", str(Path(tmp) / "bundle")]  # fmt: skip
        load = os.getloadavg()[0]
        started = time.perf_counter()
        with open(Path(tmp) / "log", "w+", encoding="utf-8") as log:
            child = subprocess.Popen(command, stdout=log, stderr=log)
            _, status, usage = os.wait4(child.pid, 0)
            seconds = time.perf_counter() - started
            if status != 0:
                log.seek(0)
                raise SystemExit(f"{matrix}: build failed: {log.read()[-2000:]}")
        built = json.loads((Path(tmp) / "bundle" / "bundle.json").read_text(encoding="utf-8"))
    return {
        "matrix": matrix.stem,
        "budget": budget,
        "seconds": round(seconds, 1),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_mib": round(usage.ru_maxrss / 1024),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "choice": f"{built['subset']['method']} + {built['default_estimator']}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--wide", default="", help="also MuSR repeated K times, for each K of a comma list"
    )
    parser.add_argument(
        "--v1", default="", help="also these v1 matrices with all their models (comma list)"
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    args = parser.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        matrices = [args.data / f"{name}.parquet" for name in ("ifeval", "musr")]
        for copies in (int(k) for k in args.wide.split(",") if k):
            matrices.append(wide_matrix(args.data / "musr.parquet", copies, Path(tmp)))
        matrices += [V1 / f"{name}_B.parquet" for name in args.v1.split(",") if name]
        for matrix in matrices:
            rows, items = pd.read_parquet(matrix).shape
            for _ in range(args.repeats):
                runs.append({**time_build(matrix, args.budget), "shape": f"{rows} x {items}"})
                print(json.dumps(runs[-1]), flush=True)
    lines = [
        "## Build speed: `microbench build` with its defaults",
        "",
        f"Generated by `tools/bench_build_speed.py`; command: `python tools/bench_build_speed.py "
        f"{shlex.join(argv or sys.argv[1:])}`. Each row is one fresh process running `microbench "
        f"build --responses M --budget {args.budget} --benchmark NAME --out DIR` (`--method "
        "auto`: the choice by cross-validation, then every estimator fitted, progress bars "
        f"throughout); target: under {TARGET_SECONDS} s for a 350 x 750 matrix on 2 idle cores. "
        "Load average: the machine's 1-minute load when the build started and ended (2 cores; "
        "above 2, other processes shared them). `musr_xK`: MuSR's answers K times side by "
        f"side, {FLIP_SHARE:.0%} of each copy's answers flipped (the size of a whole current "
        "benchmark such as BBH or MMLU-Pro; real answers, not a real benchmark). `NAME_B`: an Open "
        "LLM Leaderboard v1 matrix with all its models (metabench's items).",
        "",
        "| matrix | models x items | wall (s) | CPU (s) | peak memory (MiB) | load before / after "
        "| choice |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r['matrix']} | {r['shape']} | {r['seconds']:.0f} | {r['cpu_seconds']:.0f} | "
            f"{r['peak_mib']} | {r['load_before']:.1f} / {r['load_after']:.1f} | {r['choice']} |"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "build_speed.md").write_text("\n".join(lines) + "\n")
    (args.out / "build_speed.json").write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    print(f"wrote {args.out / 'build_speed.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
