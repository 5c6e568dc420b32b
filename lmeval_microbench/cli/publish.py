"""``microbench publish``: upload a bundle folder as a Hugging Face Hub dataset repo."""

from __future__ import annotations

import argparse

from ._options import print_json


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "publish",
        help="upload a bundle folder to the Hugging Face Hub as a dataset repo",
        description=(
            "Validate FOLDER, write a dataset card and upload it to REPO_ID (a dataset repo)."
        ),
        epilog="example: microbench publish bundles/mmlu-50 my-org/microbench-mmlu --dry-run",
    )
    parser.add_argument("folder", help="bundle folder")
    parser.add_argument("repo_id", help="Hub dataset repo, owner/name")
    parser.add_argument("--private", action="store_true", help="create the repo private")
    parser.add_argument("--revision", help="branch to upload to (created if missing)")
    parser.add_argument("--token", help="Hub token (default: the logged-in one)")
    parser.add_argument("--message", help="commit message")
    parser.add_argument(
        "--dry-run", action="store_true", help="show files and card, upload nothing"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..publish import publish_bundle

    result = publish_bundle(
        args.folder,
        args.repo_id,
        token=args.token,
        private=args.private,
        revision=args.revision,
        commit_message=args.message,
        dry_run=args.dry_run,
    )
    if args.dry_run:
        print_json({"repo_id": result.repo_id, "url": result.url, "files": list(result.files)})
        print(result.card)
    else:
        print(f"published {args.folder} to {result}")
    return 0
