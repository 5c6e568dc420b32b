"""``microbench verify``: check that written outputs are whole and belong together.

A table and its JSON (``reconstruct``/``estimate --out``, ``curve --out``) are two files; a
kill between their writes, or a hand edit, leaves a table that shows other numbers than its
JSON. A bundle folder carries checksums of its files. This command checks both kinds before a
user trusts (or publishes) them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """\
examples:
  microbench verify estimates.json            # or estimates.md: the pair is checked
  microbench verify curve/ bundles/mmlu-30/   # a curve report folder, a bundle folder
"""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "verify",
        help="check that an estimates/curve table matches its JSON, and bundle checksums",
        description=(
            "For each PATH: a table or JSON written by reconstruct, estimate or curve (or a "
            "curve report folder) is checked against the other file of its pair (the table's "
            "last line names the JSON's sha256); a bundle folder is loaded, which checks its "
            "version, schema and file checksums. Exit status 2 if any check fails."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="file or folder to check")
    parser.set_defaults(run=run)


def verify_path(path: Path) -> str:
    """What ``path`` was found to be, or :class:`InputError` saying what is wrong."""
    from ..bundle import BUNDLE_FILE, load_bundle
    from ..curve.report import TABLE_NAME
    from ..errors import InputError
    from ..pairs import check_pair

    if path.is_dir() and (path / BUNDLE_FILE).is_file():
        bundle = load_bundle(path)
        return f"bundle {bundle.name!r}: {len(bundle.item_ids)} items, checksums match"
    if path.is_dir():
        if not (path / TABLE_NAME).is_file():
            raise InputError(f"{path}: holds neither {BUNDLE_FILE} nor a curve report")
        path = path / TABLE_NAME
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    data = check_pair(path)
    return f"{data.with_suffix('.md')} shows {data}"


def run(args: argparse.Namespace) -> int:
    from ..errors import MicrobenchError

    failed = 0
    for text in args.paths:
        try:
            print(f"ok: {verify_path(Path(text))}")
        except MicrobenchError as exc:
            failed += 1
            print(f"microbench verify: error: {exc}", file=sys.stderr)
    return 2 if failed else 0
