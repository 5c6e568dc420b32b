"""Wires the subcommands together; each lives in its own module with ``add_parser``/``run``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import MicrobenchError
from . import adaptive as adaptive_command
from . import (
    build,
    collect,
    demo,
    estimate,
    fit,
    items,
    publish,
    reconstruct,
    reliability,
    tasks_dir,
    verify,
)
from . import curve as curve_command
from . import eval as eval_command
from . import rank as rank_command
from ._options import CommandParser, UsageError
from ._warnings import one_line_warnings

SUBCOMMANDS = (
    collect,
    fit,
    build,
    estimate,
    reconstruct,
    curve_command,
    eval_command,
    tasks_dir,
    items,
    verify,
    publish,
    demo,
    reliability,
    adaptive_command,
    rank_command,
)


def make_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="microbench",
        description=(
            "Build small item subsets of lm-eval benchmarks and estimate full scores from them."
        ),
        epilog="`microbench COMMAND --help` shows a command's options and examples.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # not required by argparse: a bare `microbench` gets the command list, not just "required"
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.add_parser(commands)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse; an unknown argument is refused naming the subcommand it was given to (argparse
    would name only ``microbench``, and point at the top-level help)."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        prog = f"microbench {args.command}" if args.command else "microbench"
        raise UsageError(
            prog, f"unrecognized arguments: {' '.join(unknown)} (`{prog} --help` lists the options)"
        )
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: one-line errors for expected failures, tracebacks with MICROBENCH_DEBUG=1.

    Our warnings print as ``warning: MESSAGE`` lines (:func:`one_line_warnings`), the same in
    every command. Ctrl-C is one line and exit status 130; a closed pipe (``| head``) ends
    quietly with 141; outputs are written atomically, so an interrupted command leaves nothing
    half-written. A command line argparse refuses is one
    line too; no command at all prints the help (the command list) on stderr, status 2.
    """
    parser = make_parser()
    try:
        args = _parse(parser, argv)
    except UsageError as exc:
        print(f"{exc.prog}: error: {exc}", file=sys.stderr)
        return 2
    if args.command is None:  # a usage error, as git's: the command list on stderr, status 2
        parser.print_help(sys.stderr)
        return 2
    try:
        with one_line_warnings():
            return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print(f"microbench {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `microbench items mmlu | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 141  # as a shell reports a program ended by SIGPIPE
    except (MicrobenchError, FileNotFoundError) as exc:
        if os.environ.get("MICROBENCH_DEBUG"):
            raise
        print(f"microbench {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
