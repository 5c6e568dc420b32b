"""Wires the subcommands together; each lives in its own module with ``add_parser``/``run``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import MicrobenchError
from . import build, collect, demo, estimate, fit, publish, reconstruct, reliability, tasks_dir
from . import eval as eval_command

SUBCOMMANDS = (
    collect,
    fit,
    build,
    estimate,
    reconstruct,
    eval_command,
    tasks_dir,
    publish,
    demo,
    reliability,
)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="microbench",
        description=(
            "Build small item subsets of lm-eval benchmarks and estimate full scores from them."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: one-line errors for expected failures, tracebacks with MICROBENCH_DEBUG=1.

    Ctrl-C is one line and exit status 130; outputs are written atomically, so an
    interrupted command leaves nothing half-written.
    """
    args = make_parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print(f"microbench {args.command}: interrupted", file=sys.stderr)
        return 130
    except (MicrobenchError, FileNotFoundError) as exc:
        if os.environ.get("MICROBENCH_DEBUG"):
            raise
        print(f"microbench {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
