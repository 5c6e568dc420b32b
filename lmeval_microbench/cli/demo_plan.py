"""How long the demo will take, said before it starts: a cost model timed on this machine.

A user who starts ``microbench demo`` on a busy laptop should learn at once whether it takes 4
minutes or 50, and how to make it shorter. The demo's time is almost all forward passes of
SmolLM2 over the tasks' prompts, whose token counts are known before anything runs (each
document of a shipped task holds its whole few-shot prompt). So the plan:

1. counts the forward passes lm-eval will make and their lengths: one per distinct
   ``context + continuation[:-1]`` (lm-eval scores single-token options of one context in one
   pass), plus one step per generated token for generation tasks;
2. times two forward passes on this machine, now (after a warm-up), and fits the time of a
   pass as ``overhead + seconds_per_flop * flops(length)``, with the transformer's FLOPs
   (``2 * parameters * length + 4 * layers * hidden * length ** 2``), so that a loaded
   machine's slowness is in the estimate.

``tools/bench_demo_time.py`` checks the printed estimate against the real time on an idle and
a loaded machine (``bench/demo_time.md``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GENERATED_TOKENS = 64
"""Tokens assumed per generation (gsm8k stops at the first ':', rarely past this; its true
length is unknown before the run, so generation tasks' estimates are the roughest)."""

CALIBRATION_LENGTHS = (64, 512)
"""Prompt lengths (tokens) of the two timed forward passes."""


@dataclass(frozen=True)
class TaskCost:
    """Forward passes of one task: prompt lengths and generated tokens."""

    name: str
    items: int
    lengths: tuple[int, ...]
    generated: int = 0


@dataclass(frozen=True)
class SpeedModel:
    """Seconds of one forward pass of ``length`` tokens on this machine, now."""

    overhead: float
    seconds_per_flop: float
    parameters: int
    layers: int
    hidden: int

    def flops(self, length: int) -> float:
        return 2.0 * self.parameters * length + 4.0 * self.layers * self.hidden * length**2

    def seconds(self, cost: TaskCost) -> float:
        prompts = sum(self.overhead + self.seconds_per_flop * self.flops(n) for n in cost.lengths)
        # a generated token is one cached step: the parameters once, attention over the prompt
        mean_prompt = sum(cost.lengths) / max(len(cost.lengths), 1)
        step = self.overhead + self.seconds_per_flop * (
            2.0 * self.parameters + 4.0 * self.layers * self.hidden * mean_prompt
        )
        return prompts + cost.generated * step


# ---------------------------------------------------------------------------- counting
def _passes_of_doc(doc: dict[str, Any], encode: Any) -> list[int]:
    """Lengths (tokens) of the forward passes lm-eval makes for one shipped document."""
    if "contexts" in doc:  # winogrande: one context per option, a shared continuation
        continuation = encode(" " + doc["continuation"])
        requests = [(encode(c), continuation) for c in doc["contexts"]]
    elif "options" in doc:
        context = encode(doc["context"])
        requests = [(context, encode(" " + o)) for o in doc["options"]]
    else:  # generation: the prompt once
        return [len(encode(doc["context"]))]
    distinct = {tuple(ctx + cont[:-1]): len(ctx) + len(cont) for ctx, cont in requests}
    return list(distinct.values())


def task_cost(name: str, folder: Path, encode: Any, max_length: int) -> TaskCost:
    """The forward passes of the shipped task in ``folder`` (its ``items.jsonl``)."""
    lines = (folder / "items.jsonl").read_text(encoding="utf-8").splitlines()
    docs = [json.loads(line) for line in lines if line.strip()]
    lengths = [min(n, max_length) for doc in docs for n in _passes_of_doc(doc, encode)]
    generates = any("options" not in d and "contexts" not in d for d in docs)
    return TaskCost(name, len(docs), tuple(lengths), GENERATED_TOKENS * len(docs) * generates)


# ---------------------------------------------------------------------------- timing
def _timed_forward(model: Any, length: int) -> float:
    import torch

    tokens = torch.ones((1, length), dtype=torch.long)
    started = time.perf_counter()
    with torch.no_grad():
        model(tokens)
    return time.perf_counter() - started


def measure_speed(model: Any) -> SpeedModel:
    """Time forward passes of :data:`CALIBRATION_LENGTHS` tokens (after a warm-up) and fit."""
    config = model.config
    parameters = sum(p.numel() for p in model.parameters())
    embedding = model.get_input_embeddings().weight.numel()
    _timed_forward(model, CALIBRATION_LENGTHS[0])  # warm-up: first-call allocations
    short, long = (_timed_forward(model, n) for n in CALIBRATION_LENGTHS)
    speed = SpeedModel(
        0.0, 0.0, parameters - embedding, config.num_hidden_layers, config.hidden_size
    )
    flops_short, flops_long = (speed.flops(n) for n in CALIBRATION_LENGTHS)
    per_flop = max((long - short) / (flops_long - flops_short), 1e-15)
    overhead = max(short - per_flop * flops_short, 0.0)
    return SpeedModel(overhead, per_flop, speed.parameters, speed.layers, speed.hidden)


# ---------------------------------------------------------------------------- the plan
def plan_lines(costs: list[TaskCost], speed: SpeedModel) -> tuple[list[str], dict[str, float]]:
    """The lines the demo prints before it starts, and the expected seconds per task."""
    expected = {c.name: speed.seconds(c) for c in costs}
    total = sum(expected.values())
    lines = [
        f"plan: {c.name} {c.items} items, {len(c.lengths)} forward passes of "
        f"{sum(c.lengths) / max(len(c.lengths), 1):,.0f} tokens on average"
        + (f" + about {c.generated:,} generated tokens" if c.generated else "")
        + f": about {minutes(expected[c.name])}"
        for c in costs
    ]
    lines.append(
        f"expected evaluation time: about {minutes(total)} (timed on this machine just now; "
        "generation lengths are guessed)"
    )
    if len(costs) > 1:
        slowest = max(costs, key=lambda c: expected[c.name])
        rest = [c.name for c in costs if c is not slowest]
        lines.append(
            f"shorter: --tasks {','.join(rest)} (about {minutes(total - expected[slowest.name])})"
            ", or --toolkit (no model, under a minute)"
        )
    return lines, expected


def minutes(seconds: float) -> str:
    """Seconds for people: '45 s' below a minute and a half, else '2.5 min'."""
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"
