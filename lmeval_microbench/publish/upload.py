"""Sending a staged repository folder to the Hugging Face Hub (the package's only upload).

``huggingface_hub`` is imported only here, when an upload really happens.
"""

from __future__ import annotations

from pathlib import Path

HUB_URL = "https://huggingface.co"
STALE_PATTERNS = ("*.yaml", "*.yml", "*.py", "*.json", "*.jsonl", "*.parquet")
"""Remote files a publication replaces: what lm-eval, ``datasets`` or ``load_bundle`` read."""


def repo_url(repo_id: str, revision: str | None = None) -> str:
    """Browser URL of the dataset repository (of its branch ``revision`` if given)."""
    url = f"{HUB_URL}/datasets/{repo_id}"
    return url if revision is None else f"{url}/tree/{revision}"


def upload_staged(
    stage: Path,
    repo_id: str,
    *,
    token: str | None,
    private: bool,
    revision: str | None,
    commit_message: str,
) -> str:
    """Make the dataset repo (branch) ``repo_id`` hold exactly the files of ``stage``.

    The repository is created if needed (``private`` applies only then); ``revision`` names a
    branch, created from main if absent. Remote files of the kinds a publication writes
    (:data:`STALE_PATTERNS`) that the stage lacks are deleted in the same commit: a file left
    by an earlier publication, such as a renamed task's YAML, would otherwise still be
    downloaded and indexed by ``lm-eval --include_path``. Other files someone added to the
    repository (a licence, notes) stay.
    """
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    created = api.create_repo(repo_id, repo_type="dataset", exist_ok=True, private=private)
    if revision is not None:
        api.create_branch(repo_id, branch=revision, repo_type="dataset", exist_ok=True)
    api.upload_folder(
        repo_id=repo_id,
        folder_path=stage,
        repo_type="dataset",
        revision=revision,
        commit_message=commit_message,
        delete_patterns=list(STALE_PATTERNS),
    )
    base = str(created) if created else repo_url(repo_id)
    return base if revision is None else f"{base.rstrip('/')}/tree/{revision}"
