"""``microbench tasks-dir``: the folder of the shipped lm-eval tasks, for ``--include_path``."""

from __future__ import annotations

import argparse


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "tasks-dir",
        help="print the folder of the shipped lm-eval tasks (for --include_path)",
        description=(
            "Print the folder holding the shipped micro-benchmark tasks (microbench_arc, ..., "
            "group microbench_openllm), to pass to lm-eval's --include_path."
        ),
        epilog=(
            "example: lm-eval run --model hf --model_args pretrained=MODEL --include_path "
            '"$(microbench tasks-dir)" --tasks microbench_mmlu'
        ),
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..harness import include_path

    print(include_path())
    return 0
