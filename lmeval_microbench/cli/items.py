"""``microbench items``: the items a bundle (or an adaptive pool) chose, with their weights.

A user who wants to know what a micro task asks, or to score its items with their own
evaluation, needs the item ids without reading ``bundle.json``. Shipped bundles and pools are
found by name, so nobody has to know where the package is installed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ._options import add_format, print_json, print_table

EPILOG = """\
examples:
  microbench items mmlu                       # the shipped micro MMLU task's items
  microbench items microbench_pool_mmlu       # the adaptive pool of MMLU (every item)
  microbench items bundles/mmlu-30 --format json
"""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "items",
        help="list the items a bundle or adaptive pool holds (ids, weights, content hashes)",
        description=(
            "Print the item ids of BUNDLE in the bundle's order with their weights and content "
            "hashes. BUNDLE is a bundle folder, or the name of a shipped one: a benchmark "
            "(mmlu, ifeval), a task (microbench_mmlu, microbench_pool_mmlu) or a bundle name."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("bundle", metavar="BUNDLE", help="bundle folder or shipped name")
    add_format(parser)
    parser.set_defaults(run=run)


def _shipped_folders() -> list[tuple[str, Path]]:
    """(task name, folder) of every shipped bundle: static tasks, then adaptive pools."""
    from ..adaptive.pool_task import POOL_TASK_PREFIX, SHIPPED_POOLS
    from ..bundle import BUNDLE_FILE
    from ..harness import include_path

    static = sorted(p.parent for p in include_path().rglob(BUNDLE_FILE))
    pools = sorted(p.parent for p in SHIPPED_POOLS.rglob(BUNDLE_FILE))
    return [(f"microbench_{folder.name}", folder) for folder in static] + [
        (f"{POOL_TASK_PREFIX}{folder.name}", folder) for folder in pools
    ]


def resolve_bundle(name: str) -> Path:
    """The folder of ``name``: a path that exists, else a shipped task, benchmark or bundle."""
    from ..bundle import BUNDLE_FILE, load_bundle
    from ..errors import InputError

    path = Path(name)
    if path.exists():
        return path.parent if path.name == BUNDLE_FILE else path
    shipped = _shipped_folders()
    by_name = [folder for task, folder in shipped if name in (task, folder.name)]
    if by_name:  # a task or benchmark name: no bundle needs reading
        return by_name[0]
    for _, folder in shipped:
        if load_bundle(folder).name == name:
            return folder
    known = ", ".join(sorted({task for task, _ in shipped}))
    raise InputError(f"{name}: no such bundle folder, and no shipped bundle of that name ({known})")


def run(args: argparse.Namespace) -> int:
    from ..bundle import load_bundle

    folder = resolve_bundle(args.bundle)
    bundle = load_bundle(folder)
    weights = bundle.weights
    rows = [
        {"item_id": item, "weight": weights[item], "content_hash": bundle.content_hashes[item]}
        for item in bundle.item_ids
    ]
    if args.format == "json":
        print_json({"bundle": bundle.name, "folder": str(folder), "items": rows})
        return 0
    print(f"{bundle.name} ({folder}): {len(rows)} items of {bundle.benchmark}")
    for row in rows:
        row["content_hash"] = (row["content_hash"] or "unknown")[:12]
    print_table(rows, ["item_id", "weight", "content_hash"])
    return 0
