"""``microbench eval``: run lm-eval on the shipped tasks, then reconstruct the estimates.

Every argument goes to ``lm-eval run`` unchanged (run as ``python -m lm_eval`` in a child
process, so lm-eval's own CLI parses them); this command only adds what the shipped tasks
need when it is absent: ``--include_path`` (the shipped task folder), ``--tasks
microbench_openllm``, and ``--log_samples`` when ``--output_path`` is given, so that the
estimates can be recomputed from the logged documents afterwards.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TASKS = "microbench_openllm"

FLAG_NAMES = {
    "tasks": ("--tasks", "-t"),
    "include_path": ("--include_path",),
    "output_path": ("--output_path", "-o"),
    "log_samples": ("--log_samples", "-s"),
    "config": ("--config", "-C"),
    "help": ("--help", "-h"),
}
"""lm-eval ``run`` options this command looks at (long and short spellings)."""

DESCRIPTION = """\
Run lm-eval with every argument passed through, adding --include_path "$(microbench
tasks-dir)" (unless given), --tasks microbench_openllm (unless --tasks or --config is given)
and --log_samples (when --output_path is given). With --output_path the estimates of this
run are then recomputed from the logged samples and printed (as `microbench reconstruct`).

examples:
  microbench eval --model hf --model_args pretrained=EleutherAI/pythia-160m --output_path out/
  microbench eval --model hf --model_args pretrained=MODEL --tasks microbench_mmlu,microbench_arc
  microbench eval --model vllm --model_args pretrained=MODEL --batch_size auto -o out/

lm-eval's own options follow.
"""


def add_parser(commands: argparse._SubParsersAction) -> None:
    # '+' prefix: options such as --model reach the REMAINDER untouched, for lm-eval to parse
    parser = commands.add_parser(
        "eval",
        help="run lm-eval on the shipped micro-benchmarks (arguments pass through), "
        "then print the estimates",
        description=DESCRIPTION,
        prefix_chars="+",
        add_help=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("lm_eval_args", nargs=argparse.REMAINDER, metavar="LM_EVAL_ARGS")
    parser.set_defaults(run=run)


# ---------------------------------------------------------------------------- arguments
def _find(args: Sequence[str], names: Sequence[str]) -> tuple[bool, str | None]:
    """Whether an option is present and its value (``--x v``, ``--x=v``; last one wins)."""
    present, value = False, None
    for k, arg in enumerate(args):
        for name in names:
            if arg == name:
                present = True
                following = args[k + 1] if k + 1 < len(args) else None
                value = (
                    following if following is not None and not following.startswith("-") else None
                )
            elif arg.startswith(name + "="):
                present, value = True, arg.split("=", 1)[1]
    return present, value


@dataclass(frozen=True)
class LmEvalCall:
    """The ``lm-eval run`` argument list and what this command added to it."""

    args: tuple[str, ...]
    added: tuple[str, ...]
    output_path: Path | None

    @property
    def command(self) -> list[str]:
        return [sys.executable, "-m", "lm_eval", "run", *self.args]


def lm_eval_call(args: Sequence[str], include_path: str) -> LmEvalCall:
    """The user's arguments plus the defaults the shipped tasks need (see module doc)."""
    args = list(args)
    if args[:1] == ["run"]:
        args = args[1:]
    added: list[str] = []
    if not _find(args, FLAG_NAMES["include_path"])[0]:
        added += ["--include_path", include_path]
    if not _find(args, FLAG_NAMES["tasks"])[0] and not _find(args, FLAG_NAMES["config"])[0]:
        added += ["--tasks", DEFAULT_TASKS]
    has_output, output = _find(args, FLAG_NAMES["output_path"])
    if has_output and not _find(args, FLAG_NAMES["log_samples"])[0]:
        added.append("--log_samples")
    output_path = None
    if output:
        output_path = Path(output)
        output_path = output_path.parent if output_path.suffix == ".json" else output_path
    return LmEvalCall(tuple(args + added), tuple(added), output_path)


# ---------------------------------------------------------------------------- running
def _new_samples(folder: Path, since: float) -> list[Path]:
    from ..collect import find_samples_files

    if not folder.is_dir():
        return []
    return [p for p in find_samples_files(folder) if p.stat().st_mtime >= since]


def run(args: argparse.Namespace) -> int:
    from ..harness import include_path

    user_args = list(args.lm_eval_args)
    if any(a in FLAG_NAMES["help"] for a in user_args):
        print(DESCRIPTION)
        return subprocess.call([sys.executable, "-m", "lm_eval", "run", "--help"])
    call = lm_eval_call(user_args, str(include_path()))
    if call.added:
        print(f"microbench eval: adding {' '.join(call.added)}", file=sys.stderr)
    started = time.time()
    code = subprocess.call(call.command)
    if code != 0:
        print(f"microbench eval: {exit_note(code)}", file=sys.stderr)
        return code if code > 0 else 128 - code  # as a shell reports a killed program
    if call.output_path is None:
        print(
            "microbench eval: no --output_path, so the estimates above (lm-eval's table: "
            "estimate, estimate_lower, estimate_upper) are all there is",
            file=sys.stderr,
        )
        return 0
    return _print_estimates(call.output_path, started)


def exit_note(code: int) -> str:
    """What lm-eval's exit status means; a kill by the system (-9) is most often memory."""
    if code == -signal.SIGKILL:
        return (
            "lm-eval was killed (signal 9), most often because the machine ran out of memory: "
            "try a smaller --batch_size (auto picks the largest batch that fits the GPU, and "
            "on a CPU it can take more memory than there is) or a smaller model"
        )
    if code < 0:
        names = {int(s): s.name for s in signal.Signals}
        return f"lm-eval was ended by signal {-code} ({names.get(-code, 'unknown')})"
    return f"lm-eval exited with status {code}"


def _print_estimates(output_path: Path, started: float) -> int:
    import warnings

    from ..runs import ReconstructionWarning, reconstruct_runs
    from .reconstruct import print_notes

    files = _new_samples(output_path, started - 1.0)
    if not files:
        print(f"microbench eval: lm-eval wrote no samples under {output_path}", file=sys.stderr)
        return 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReconstructionWarning)
        result = reconstruct_runs(files, progress=False)
    print_notes(result.notes)
    print("\nmicro-benchmark estimates (recomputed from the logged samples):\n")
    print(result.to_markdown(), end="")
    print(f"\n(again later: microbench reconstruct {output_path})")
    return 0
