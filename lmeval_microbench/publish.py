"""Publish a bundle folder as a Hugging Face dataset repository (the package's only upload).

The bundle is validated by loading it (versions, checksums, schema) before anything is sent.
What is uploaded is ``bundle.json``, the side files its checksums list, and a generated
dataset card ``README.md``; other files lying in the folder are not. The card is written
into a staging folder, so publishing never modifies the local bundle folder.
``huggingface_hub`` is imported only when an upload really happens.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, overload

import yaml

from .bundle import BUNDLE_FILE, ITEMS_FILE, SCHEMA_VERSION, Bundle, load_bundle
from .errors import InputError

CARD_FILE = "README.md"
CARD_TAGS = ("lm-eval", "micro-benchmark")
HUB_URL = "https://huggingface.co"

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")

USAGE = """\
```bash
pip install lmeval-microbench
# the subset's item ids, one per line: score these items of {benchmark} with your evaluation
python -c "from lmeval_microbench.bundle import load_bundle; \\
print(*load_bundle('hf://{repo_id}').item_ids, sep='\\n')" > items.txt
# scores.csv: a column 'model', then one column per item id, each score in [0, 1]
microbench estimate hf://{repo_id} --responses scores.csv
```
"""
"""Command-line usage shown on the card (run as written by ``tests/test_publish.py``).

A published bundle holds the item subset and the fitted estimators, not an lm-eval task: the
card must not send readers to the shipped ``microbench_*`` tasks, which apply other bundles.
"""


@dataclass(frozen=True)
class PublishPlan:
    """What :func:`publish_bundle` would upload (returned by a dry run)."""

    repo_id: str
    bundle_name: str
    url: str
    files: tuple[str, ...]
    card: str


def _check_repo_id(repo_id: str) -> None:
    if not isinstance(repo_id, str) or not _REPO_ID.match(repo_id) or ".." in repo_id:
        raise InputError(
            f"repo id {repo_id!r}: expected 'owner/name' (letters, digits, '-', '_', '.')"
        )


def repo_url(repo_id: str, revision: str | None = None) -> str:
    """Browser URL of the dataset repository (of its branch ``revision`` if given)."""
    url = f"{HUB_URL}/datasets/{repo_id}"
    return url if revision is None else f"{url}/tree/{revision}"


def upload_files(folder: Path) -> tuple[str, ...]:
    """Files of a bundle folder that belong to the bundle: bundle.json and its side files."""
    document = json.loads((folder / BUNDLE_FILE).read_text(encoding="utf-8"))
    side_files = sorted(document.get("checksums", {}).get("files", {}))
    return (BUNDLE_FILE, *side_files)


# ---------------------------------------------------------------------------- the card
def _format_number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _flatten(values: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            rows.extend(_flatten(value, f"{name}."))
        else:
            rows.append((name, value))
    return rows


def _front_matter(bundle: Bundle, has_items: bool) -> str:
    meta: dict[str, Any] = {
        "license": bundle.license or "other",
        "pretty_name": bundle.name,
        "tags": list(CARD_TAGS),
    }
    if has_items:
        meta["configs"] = [
            {"config_name": "default", "data_files": [{"split": "train", "path": ITEMS_FILE}]}
        ]
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n"


def _reliability_section(bundle: Bundle) -> str:
    rows = _flatten(bundle.reliability)
    if not rows:
        return "No reliability measurement is stored in this bundle.\n"
    lines = ["| measure | value |", "| --- | --- |"]
    lines += [f"| {name} | {_format_number(value)} |" for name, value in rows]
    return "\n".join(lines) + "\n"


def _source_section(bundle: Bundle) -> str:
    prov = bundle.provenance
    irt = "none" if bundle.irt is None else f"{bundle.irt.model}, {bundle.irt.n_items} items"
    lines = [
        f"- benchmark: `{bundle.benchmark}`",
        f"- budget: {bundle.budget} items out of the {prov.n_source_items} items of the source "
        f"response matrix ({prov.n_source_models} models, sha256 `{prov.source_sha256[:16]}...`)",
        f"- selection method: `{bundle.method}` (seed {bundle.subset.seed})",
        f"- metric: `{bundle.metric.name}` (filter `{bundle.metric.filter}`, aggregation "
        f"`{bundle.metric.aggregation}`, reported as a {bundle.metric.scale})",
        f"- estimators: {', '.join(f'`{s.name}`' for s in bundle.estimators)} "
        f"(default `{bundle.default_estimator}`)",
        f"- IRT parameters: {irt}",
        f"- built by lmeval-microbench {prov.package_version} on {prov.created}",
    ]
    if bundle.dataset is not None:
        ds = bundle.dataset
        lines.insert(
            1,
            f"- documents: `{ds.path}` config `{ds.name}`, split `{ds.split}`, "
            f"revision `{ds.revision}`",
        )
    return "\n".join(lines) + "\n"


def render_card(bundle: Bundle, repo_id: str, *, has_items: bool = False) -> str:
    """The dataset card: YAML front matter, what the subset is, reliability, usage."""
    description = f"{bundle.description}\n\n" if bundle.description else ""
    return (
        _front_matter(bundle, has_items)
        + f"\n# {bundle.name}\n\n"
        + description
        + f"A micro-benchmark of **{bundle.benchmark}**: {bundle.budget} items chosen so that a "
        "model's score on them, passed through the stored estimator, estimates its score on the "
        "whole benchmark, with an interval. Made with "
        "[lmeval-microbench](https://pypi.org/project/lmeval-microbench/) for "
        "EleutherAI lm-evaluation-harness.\n\n"
        "## Contents\n\n"
        + _source_section(bundle)
        + "\n## Measured reliability\n\n"
        + _reliability_section(bundle)
        + "\n## Usage\n\nFrom the command line:\n\n"
        + USAGE.format(repo_id=repo_id, benchmark=bundle.benchmark)
        + "\nIn Python:\n\n```python\nfrom lmeval_microbench.bundle import load_bundle\n\n"
        + f'bundle = load_bundle("hf://{repo_id}")\n'
        + "print(bundle.item_ids[:5], bundle.default_estimator)\n```\n\n"
        + "## Files\n\n"
        + f"- `{BUNDLE_FILE}`: the versioned bundle (schema {SCHEMA_VERSION}), with sha256 "
        "checksums of its content and side files.\n"
        + (
            f"- `{ITEMS_FILE}`: the selected items' documents and content hashes.\n"
            if has_items
            else ""
        )
    )


# ---------------------------------------------------------------------------- publishing
def plan_publication(
    folder: str | os.PathLike[str], repo_id: str, *, revision: str | None = None
) -> PublishPlan:
    """Validate the bundle in ``folder`` and return what would be uploaded, offline."""
    _check_repo_id(repo_id)
    folder = Path(folder)
    bundle = load_bundle(folder)
    files = upload_files(folder)
    card = render_card(bundle, repo_id, has_items=ITEMS_FILE in files)
    return PublishPlan(
        repo_id=repo_id,
        bundle_name=bundle.name,
        url=repo_url(repo_id, revision),
        files=(*files, CARD_FILE),
        card=card,
    )


@overload
def publish_bundle(
    folder: str | os.PathLike[str],
    repo_id: str,
    *,
    token: str | None = ...,
    private: bool = ...,
    revision: str | None = ...,
    commit_message: str | None = ...,
    dry_run: Literal[False] = ...,
) -> str: ...


@overload
def publish_bundle(
    folder: str | os.PathLike[str],
    repo_id: str,
    *,
    token: str | None = ...,
    private: bool = ...,
    revision: str | None = ...,
    commit_message: str | None = ...,
    dry_run: Literal[True],
) -> PublishPlan: ...


def publish_bundle(
    folder: str | os.PathLike[str],
    repo_id: str,
    *,
    token: str | None = None,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
    dry_run: bool = False,
) -> str | PublishPlan:
    """Upload the bundle in ``folder`` to the dataset repo ``repo_id``; return its URL.

    The repository is created if needed (``private`` applies only then); ``revision`` names a
    branch, created from main if absent. ``dry_run=True`` touches no network and returns the
    :class:`PublishPlan` (files and card text) instead.
    """
    plan = plan_publication(folder, repo_id, revision=revision)
    if dry_run:
        return plan
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    created = api.create_repo(repo_id, repo_type="dataset", exist_ok=True, private=private)
    if revision is not None:
        api.create_branch(repo_id, branch=revision, repo_type="dataset", exist_ok=True)
    message = commit_message or f"Upload micro-benchmark bundle {plan.bundle_name}"
    with tempfile.TemporaryDirectory(prefix="microbench-publish-") as staging:
        stage = Path(staging)
        for name in plan.files:
            if name != CARD_FILE:
                shutil.copy2(Path(folder) / name, stage / name)
        load_bundle(stage)  # what goes up is exactly what was validated
        (stage / CARD_FILE).write_text(plan.card, encoding="utf-8")
        api.upload_folder(
            repo_id=repo_id,
            folder_path=stage,
            repo_type="dataset",
            revision=revision,
            commit_message=message,
        )
    base = str(created) if created else repo_url(repo_id)
    return base if revision is None else f"{base.rstrip('/')}/tree/{revision}"
