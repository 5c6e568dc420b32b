"""``microbench tasks-dir``: the folder of the shipped lm-eval tasks, for ``--include_path``.

Since the install registers that folder with lm-eval by itself (``_lmeval_tasks``), plain
``lm-eval --tasks microbench_mmlu`` needs no include path; this command stays for scripts that
pass one, for ``python -S`` and for tools that read the YAML files directly. Passing it together
with the automatic registration indexes nothing twice.
"""

from __future__ import annotations

import argparse


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "tasks-dir",
        help="print the folder of the shipped lm-eval tasks (for --include_path)",
        description=(
            "Print the folder holding the shipped micro-benchmark tasks (microbench_arc, ..., "
            "group microbench_openllm), to pass to lm-eval's --include_path. Installing "
            "lmeval-microbench already makes lm-eval find these tasks without it; passing it "
            "as well is harmless."
        ),
        epilog=(
            "example: lm-eval run --model hf --model_args pretrained=MODEL --include_path "
            '"$(microbench tasks-dir)" --tasks microbench_mmlu  (the same as without '
            "--include_path once lmeval-microbench is installed)"
        ),
    )
    parser.add_argument(
        "--pools",
        action="store_true",
        help="print the folder of the shipped adaptive pools instead (microbench_pool_* tasks)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..adaptive.pool_task import SHIPPED_POOLS
    from ..harness import include_path

    print(SHIPPED_POOLS if args.pools else include_path())
    return 0
