"""Publish a bundle as a Hugging Face dataset repository that a Hub user can run.

The repository (:mod:`.repo`) holds the bundle unchanged (``load_bundle("hf://o/n")``), the
items as a parquet dataset (``datasets.load_dataset("o/n")``), the lm-eval task with its hooks
and documents where the bundle has one (``lm-eval --include_path <download>``), and a card
(:mod:`.card`) whose commands run as written. It is assembled and checked in a staging folder,
which is then uploaded (:mod:`.upload`) or, with ``to_folder``, moved into place locally; the
local bundle folder is never modified.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload

from ..errors import InputError
from .card import CARD_TAGS, render_card
from .repo import (
    CARD_FILE,
    DATA_FILE,
    DATA_SPLIT,
    Source,
    read_source,
    write_repository,
    write_to_folder,
)
from .upload import HUB_URL, repo_url, upload_staged

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")

Location = str | os.PathLike[str]


@dataclass(frozen=True)
class PublishPlan:
    """What :func:`publish_bundle` would write (returned by a dry run)."""

    repo_id: str
    bundle_name: str
    task: str | None
    url: str
    files: tuple[str, ...]
    card: str


def _check_repo_id(repo_id: str) -> None:
    if not isinstance(repo_id, str) or not _REPO_ID.match(repo_id) or ".." in repo_id:
        raise InputError(
            f"repo id {repo_id!r}: expected 'owner/name' (letters, digits, '-', '_', '.')"
        )


def _prepare(
    folder: Location, repo_id: str, revision: str | None, task: str | None
) -> tuple[Source, PublishPlan]:
    _check_repo_id(repo_id)
    source = read_source(folder, task)
    plan = PublishPlan(
        repo_id=repo_id,
        bundle_name=source.bundle.name,
        task=None if source.task is None else source.task.name,
        url=repo_url(repo_id, revision),
        files=source.files(),
        card=render_card(source, repo_id, revision),
    )
    return source, plan


def plan_publication(
    folder: Location, repo_id: str, *, revision: str | None = None, task: str | None = None
) -> PublishPlan:
    """Validate the bundle (and task) in ``folder``; return what would be written, offline."""
    return _prepare(folder, repo_id, revision, task)[1]


@overload
def publish_bundle(
    folder: Location,
    repo_id: str,
    *,
    token: str | None = ...,
    private: bool = ...,
    revision: str | None = ...,
    commit_message: str | None = ...,
    task: str | None = ...,
    dry_run: Literal[True],
) -> PublishPlan: ...


@overload
def publish_bundle(
    folder: Location,
    repo_id: str,
    *,
    token: str | None = ...,
    private: bool = ...,
    revision: str | None = ...,
    commit_message: str | None = ...,
    task: str | None = ...,
    dry_run: Literal[False] = ...,
    to_folder: Location | None = ...,
    overwrite: bool = ...,
) -> str: ...


def publish_bundle(
    folder: Location,
    repo_id: str,
    *,
    token: str | None = None,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
    task: str | None = None,
    dry_run: bool = False,
    to_folder: Location | None = None,
    overwrite: bool = False,
) -> str | PublishPlan:
    """Publish the bundle in ``folder`` as the dataset repo ``repo_id``; return its URL.

    ``folder`` is a bundle folder, a task folder of ``microbench build --task`` (``task``
    picks one where it holds several) or a shipped task's data folder. The repository is
    created if needed (``private`` applies only then); ``revision`` names a branch, created
    from main if absent. ``to_folder`` writes the same repository there instead of uploading
    and returns its path (an existing non-empty folder only with ``overwrite``, and only an
    earlier publication). ``dry_run=True`` writes nothing and returns the
    :class:`PublishPlan` (files and card text).
    """
    source, plan = _prepare(folder, repo_id, revision, task)
    if dry_run:
        return plan
    if to_folder is not None:
        return str(write_to_folder(source, plan.card, to_folder, overwrite=overwrite))
    message = commit_message or f"Upload micro-benchmark bundle {plan.bundle_name}"
    with tempfile.TemporaryDirectory(prefix="microbench-publish-") as staging:
        write_repository(source, plan.card, Path(staging))
        return upload_staged(
            Path(staging),
            repo_id,
            token=token,
            private=private,
            revision=revision,
            commit_message=message,
        )


__all__ = [
    "CARD_FILE",
    "CARD_TAGS",
    "DATA_FILE",
    "DATA_SPLIT",
    "HUB_URL",
    "PublishPlan",
    "plan_publication",
    "publish_bundle",
    "render_card",
    "repo_url",
]
