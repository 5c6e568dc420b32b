"""``microbench publish``: a bundle (and its lm-eval task) as a runnable Hub dataset repo."""

from __future__ import annotations

import argparse

from ._options import print_json


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "publish",
        help="upload a bundle folder (and its lm-eval task) to the Hugging Face Hub as a "
        "dataset repo, or write that repo to a folder",
        description=(
            "Validate FOLDER (a bundle folder, or a task folder written by build --task) and "
            "publish it as the dataset repo REPO_ID: the bundle, its items as a parquet "
            "dataset, the lm-eval task with its hooks and documents where there is one, and a "
            "card. The repo is made to hold exactly these files (files of an earlier upload "
            "that are not among them are deleted)."
        ),
        epilog=(
            "examples:\n"
            "  microbench publish bundles/mmlu-50 my-org/microbench-mmlu --dry-run\n"
            "  microbench publish my_tasks/ my-org/micro-arc --to-folder micro-arc"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("folder", help="bundle folder, or task folder of build --task")
    parser.add_argument("repo_id", help="Hub dataset repo, owner/name")
    parser.add_argument("--task", help="the task to publish, where FOLDER holds several")
    parser.add_argument("--private", action="store_true", help="create the repo private")
    parser.add_argument("--revision", help="branch to upload to (created if missing)")
    parser.add_argument("--token", help="Hub token (default: the logged-in one)")
    parser.add_argument("--message", help="commit message")
    parser.add_argument(
        "--to-folder",
        "--out",
        dest="to_folder",
        metavar="DIR",
        help="write the repository to DIR instead of uploading it (refuses to replace it "
        "without --overwrite)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="with --to-folder: replace DIR when it holds an earlier publication",
    )
    parser.add_argument("--dry-run", action="store_true", help="show files and card, write nothing")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..publish import publish_bundle

    if args.dry_run:
        plan = publish_bundle(
            args.folder, args.repo_id, revision=args.revision, task=args.task, dry_run=True
        )
        print_json(
            {
                "repo_id": plan.repo_id,
                "task": plan.task,
                "url": plan.url,
                "files": list(plan.files),
            }
        )
        print(plan.card)
        return 0
    result = publish_bundle(
        args.folder,
        args.repo_id,
        token=args.token,
        private=args.private,
        revision=args.revision,
        commit_message=args.message,
        task=args.task,
        to_folder=args.to_folder,
        overwrite=args.overwrite,
    )
    where = "wrote the repository of" if args.to_folder else "published"
    print(f"{where} {args.folder} ({args.repo_id}) to {result}")
    return 0
