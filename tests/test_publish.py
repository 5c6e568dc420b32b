"""Publishing bundles: dry runs offline, and the real upload path against a fake Hub.

The fake ``HfApi`` copies uploads into a local "remote" folder (deleting what the upload's
``delete_patterns`` remove) and the fake ``snapshot_download`` serves them back, into
``local_dir`` when given, so ``publish_bundle`` -> ``load_bundle("hf://...")`` and the card's
download command run the same code users run online, without a network.
"""

from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from huggingface_hub.utils import filter_repo_objects

from lmeval_microbench.bundle import (
    BUNDLE_FILE,
    ITEMS_FILE,
    Bundle,
    load_bundle,
    load_items,
    save_bundle,
)
from lmeval_microbench.errors import BundleError, InputError
from lmeval_microbench.publish import (
    CARD_FILE,
    CARD_TAGS,
    DATA_FILE,
    PublishPlan,
    publish_bundle,
)
from lmeval_microbench.publish.upload import STALE_PATTERNS

huggingface_hub = pytest.importorskip("huggingface_hub")

from bundle_support import (  # noqa: E402  (fixtures shared with the bundle tests)
    bundle,
    irt,
    items_frame,
    make_bundle,
    saved,
    source,
    subset,
)

__all__ = ["bundle", "irt", "items_frame", "saved", "source", "subset"]  # fixtures, used by name


class FakeHub:
    """A local stand-in for the Hub: records API calls, stores uploads per repo and branch."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.real: dict[str, Any] = {}

    def folder(self, repo_id: str, revision: str | None) -> Path:
        return self.root / repo_id / (revision or "main")

    def api_class(self) -> type:
        hub = self

        class FakeHfApi:
            def __init__(self, token: str | None = None, **kwargs: Any) -> None:
                hub.calls.append(("__init__", (), {"token": token, **kwargs}))

            def create_repo(self, repo_id: str, **kwargs: Any) -> str:
                hub.calls.append(("create_repo", (repo_id,), kwargs))
                hub.folder(repo_id, None).mkdir(parents=True, exist_ok=True)
                return f"https://huggingface.co/datasets/{repo_id}"

            def create_branch(self, repo_id: str, **kwargs: Any) -> None:
                hub.calls.append(("create_branch", (repo_id,), kwargs))
                hub.folder(repo_id, kwargs["branch"]).mkdir(parents=True, exist_ok=True)

            def upload_folder(self, **kwargs: Any) -> str:
                hub.calls.append(("upload_folder", (), kwargs))
                target = hub.folder(kwargs["repo_id"], kwargs.get("revision"))
                assert target.is_dir(), "upload to a repo or branch that was never created"
                remote = [str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()]
                patterns = kwargs.get("delete_patterns")  # matched as the real client does
                for name in (
                    filter_repo_objects(remote, allow_patterns=patterns) if patterns else ()
                ):
                    if name != ".gitattributes":  # the Hub never deletes it
                        (target / name).unlink()
                shutil.copytree(kwargs["folder_path"], target, dirs_exist_ok=True)
                return f"https://huggingface.co/datasets/{kwargs['repo_id']}/commit/0"

        return FakeHfApi

    def snapshot_download(
        self,
        repo_id: str,
        *,
        repo_type: str | None = None,
        revision: str | None = None,
        local_dir: str | None = None,
        **kwargs: Any,
    ) -> str:
        where = {} if local_dir is None else {"local_dir": local_dir}
        self.calls.append(
            (
                "snapshot_download",
                (repo_id,),
                {"repo_type": repo_type, "revision": revision, **where},
            )
        )
        folder = self.folder(repo_id, revision)
        if repo_type != "dataset" or not (folder / BUNDLE_FILE).exists():
            raise FileNotFoundError(f"{repo_id}@{revision}: not on the fake hub")
        if local_dir is None:
            return str(folder)
        shutil.copytree(folder, local_dir, dirs_exist_ok=True)
        return str(Path(local_dir).resolve())

    def names(self) -> list[str]:
        return [name for name, _, _ in self.calls]


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    fake = FakeHub(tmp_path / "remote")
    fake.real = {
        "HfApi": huggingface_hub.HfApi,
        "snapshot_download": huggingface_hub.snapshot_download,
    }
    monkeypatch.setattr(huggingface_hub, "HfApi", fake.api_class())
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake.snapshot_download)
    return fake


def _front_matter(card: str) -> dict[str, Any]:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


# ---------------------------------------------------------------------------- dry run
def test_dry_run_lists_files_and_card_without_network(
    saved: Path, bundle: Bundle, hub: FakeHub
) -> None:
    (saved / "notes.txt").write_text("local scratch, not part of the bundle")
    before = sorted(p.name for p in saved.iterdir())
    plan = publish_bundle(saved, "me/bench-8", dry_run=True)
    assert isinstance(plan, PublishPlan)
    assert plan.files == (BUNDLE_FILE, ITEMS_FILE, DATA_FILE, CARD_FILE)
    assert plan.task is None
    assert plan.url == "https://huggingface.co/datasets/me/bench-8"
    assert hub.calls == []  # not even HfApi() was created
    assert sorted(p.name for p in saved.iterdir()) == before  # the card is not written locally
    meta = _front_matter(plan.card)
    assert meta["license"] == "other"
    assert meta["tags"] == list(CARD_TAGS)
    assert meta["pretty_name"] == bundle.name
    assert meta["configs"] == [
        {"config_name": "default", "data_files": [{"split": "test", "path": DATA_FILE}]}
    ]


def test_card_describes_the_subset_and_its_use(saved: Path, bundle: Bundle) -> None:
    card = publish_bundle(saved, "me/bench-8", dry_run=True).card
    assert f"**{bundle.benchmark}**: {bundle.budget} items" in card
    assert f"`{bundle.method}`" in card and "acc_norm" in card
    assert "| mae | 0.0123 |" in card and "| coverage.90 | 0.91 |" in card
    assert 'load_bundle("hf://me/bench-8")' in card
    assert "microbench estimate hf://me/bench-8 --responses scores.csv" in card
    assert "microbench_" not in card  # the shipped tasks apply other bundles
    assert "There is no lm-eval task in this repository" in card
    assert "lm-eval run" not in card and "- lm-eval task: none" in card
    assert "allenai/ai2_arc" in card and "ARC-Challenge" in card
    assert f"- `{ITEMS_FILE}`: the bundle's item documents" in card
    assert "`weight` and the documents' fields (`question`" in card


def test_card_uses_the_bundle_licence_and_says_when_reliability_is_unknown(
    tmp_path: Path, source, subset, irt
) -> None:
    licensed = make_bundle(source, subset, irt, license="cc-by-nc-sa-4.0", reliability={})
    folder = save_bundle(licensed, tmp_path / "licensed")
    card = publish_bundle(folder, "me/licensed", dry_run=True).card
    assert _front_matter(card)["license"] == "cc-by-nc-sa-4.0"
    assert "(the bundle stores no documents)" in card and f"`{ITEMS_FILE}`" not in card
    assert "a response matrix alone" in card
    assert "No reliability measurement is stored" in card


def test_invalid_bundle_is_refused_before_any_upload(saved: Path, hub: FakeHub) -> None:
    path = saved / BUNDLE_FILE
    path.write_text(path.read_text().replace('"acc_norm"', '"acc"'))
    with pytest.raises(BundleError, match="checksum mismatch"):
        publish_bundle(saved, "me/bench-8")
    assert hub.calls == []


@pytest.mark.parametrize("repo_id", ["no-owner", "a/b/c", "me/", "me/../x", "me/has space"])
def test_bad_repo_id(saved: Path, repo_id: str) -> None:
    with pytest.raises(InputError, match="expected 'owner/name'"):
        publish_bundle(saved, repo_id, dry_run=True)


# ---------------------------------------------------------------------------- upload path
def test_publish_then_load_from_hub_round_trips(
    saved: Path, bundle: Bundle, items_frame: pd.DataFrame, hub: FakeHub
) -> None:
    (saved / "notes.txt").write_text("scratch")
    url = publish_bundle(saved, "me/bench-8", token="hf_secret", private=True)
    assert url == "https://huggingface.co/datasets/me/bench-8"
    assert hub.names() == ["__init__", "create_repo", "upload_folder"]
    _, _, init = hub.calls[0]
    _, _, create = hub.calls[1]
    _, _, upload = hub.calls[2]
    assert init["token"] == "hf_secret"
    assert create == {"repo_type": "dataset", "exist_ok": True, "private": True}
    assert upload["repo_type"] == "dataset" and bundle.name in upload["commit_message"]
    assert upload["delete_patterns"] == list(STALE_PATTERNS)
    assert not Path(upload["folder_path"]).exists()  # the staging folder is cleaned up
    remote = hub.folder("me/bench-8", None)
    files = sorted(str(p.relative_to(remote)) for p in remote.rglob("*") if p.is_file())
    assert files == sorted([BUNDLE_FILE, ITEMS_FILE, DATA_FILE, CARD_FILE])
    assert (remote / BUNDLE_FILE).read_bytes() == (saved / BUNDLE_FILE).read_bytes()
    assert load_bundle("hf://me/bench-8") == bundle
    frame = load_items("hf://me/bench-8")
    assert list(frame.index) == list(bundle.item_ids)
    assert set(frame["question"]) == set(items_frame["question"])
    assert hub.calls[-1][2] == {"repo_type": "dataset", "revision": None}


def test_publish_to_a_branch(saved: Path, bundle: Bundle, hub: FakeHub) -> None:
    url = publish_bundle(saved, "me/bench-8", revision="v1", commit_message="first cut")
    assert url == "https://huggingface.co/datasets/me/bench-8/tree/v1"
    assert hub.names() == ["__init__", "create_repo", "create_branch", "upload_folder"]
    assert hub.calls[2][2] == {"branch": "v1", "repo_type": "dataset", "exist_ok": True}
    assert hub.calls[3][2]["revision"] == "v1" and hub.calls[3][2]["commit_message"] == "first cut"
    assert load_bundle("hf://me/bench-8@v1") == bundle
    with pytest.raises(BundleError, match="hf://me/bench-8: cannot download"):
        load_bundle("hf://me/bench-8")  # nothing was pushed to main


def test_tampering_on_the_hub_is_caught_when_loading(saved: Path, hub: FakeHub) -> None:
    publish_bundle(saved, "me/bench-8")
    remote = hub.folder("me/bench-8", None) / BUNDLE_FILE
    document = json.loads(remote.read_text())
    document["default_estimator"] = "weighted"
    remote.write_text(json.dumps(document))
    with pytest.raises(BundleError, match="checksum mismatch"):
        load_bundle("hf://me/bench-8")


def test_the_fake_is_called_like_the_real_hfapi(saved: Path, hub: FakeHub) -> None:
    """Every call publish makes binds to the real huggingface_hub signatures."""
    publish_bundle(saved, "me/bench-8", revision="dev")
    load_bundle("hf://me/bench-8@dev")
    assert hub.names() == [
        "__init__",
        "create_repo",
        "create_branch",
        "upload_folder",
        "snapshot_download",
    ]
    for name, args, kwargs in hub.calls:
        if name == "snapshot_download":
            inspect.signature(hub.real["snapshot_download"]).bind(*args, **kwargs)
        else:
            inspect.signature(getattr(hub.real["HfApi"], name)).bind(None, *args, **kwargs)


# ---------------------------------------------------------------------------- the card runs
def _card_commands(card: str) -> list[str]:
    """The shell commands of the card's bash block, continuation lines joined, comments out."""
    block = card.split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.replace("\\\n", "").splitlines() if line.strip()]
    return [line for line in lines if not line.lstrip().startswith("#")]


def test_card_commands_run_as_written(hub: FakeHub, tmp_path: Path, monkeypatch, capsys) -> None:
    """Each command of the published card, in order, against the fake Hub (pip install aside)."""
    import contextlib
    import io
    import shlex

    from lmeval_microbench.build import build_bundle
    from lmeval_microbench.cli.app import main
    from lmeval_microbench.synthetic import random_item_params, simulate_responses

    source, _ = simulate_responses(random_item_params(40, seed=3), 120, seed=4)
    bundle = build_bundle(
        source,
        source.mean_scores(),
        name="card",
        benchmark="toy",
        method="random",
        budget=10,
        estimators=["mean"],
        default_estimator="mean",
    )
    folder = save_bundle(bundle, tmp_path / "card")
    publish_bundle(folder, "me/bench-8")
    monkeypatch.chdir(tmp_path)
    commands = _card_commands((hub.folder("me/bench-8", None) / CARD_FILE).read_text())
    assert commands[0] == "pip install lmeval-microbench"
    python_line, estimate_line = commands[1], commands[2]
    argv = shlex.split(python_line)
    assert argv[:2] == ["python", "-c"] and argv[-2] == ">"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(argv[2], {})
    Path(argv[-1]).write_text(out.getvalue())
    items = Path("items.txt").read_text().split()
    assert items == list(bundle.item_ids)
    # the reader scores those items (two made-up models) as the card's comment says
    rows = [["model", *items], ["m1", *["1"] * len(items)], ["m2", *["0"] * len(items)]]
    Path("scores.csv").write_text("\n".join(",".join(row) for row in rows) + "\n")
    capsys.readouterr()
    assert main(shlex.split(estimate_line)[1:]) == 0
    printed = capsys.readouterr().out
    assert "m1" in printed and "m2" in printed and bundle.name in printed


def test_republishing_replaces_what_a_publication_wrote_and_keeps_the_rest(
    saved: Path, hub: FakeHub
) -> None:
    """A file of an earlier upload (a renamed task's YAML) would still be downloaded; a
    licence someone added by hand is theirs."""
    publish_bundle(saved, "me/bench-8")
    remote = hub.folder("me/bench-8", None)
    (remote / "micro_old.yaml").write_text("task: micro_old\n")
    (remote / "old_task").mkdir()
    (remote / "old_task" / "items.jsonl").write_text("{}\n")
    (remote / ".gitattributes").write_text("*.parquet filter=lfs\n")
    (remote / "LICENSE").write_text("CC-BY-4.0\n")
    publish_bundle(saved, "me/bench-8")
    assert not (remote / "micro_old.yaml").exists()
    assert not (remote / "old_task" / "items.jsonl").exists()
    assert (remote / ".gitattributes").exists()  # the Hub never deletes it
    assert (remote / "LICENSE").read_text() == "CC-BY-4.0\n"
    assert load_bundle("hf://me/bench-8") == load_bundle(saved)


# ---------------------------------------------------------------------------- --to-folder
def test_to_folder_writes_the_repository_the_upload_sends(
    saved: Path, hub: FakeHub, tmp_path: Path, capsys
) -> None:
    from lmeval_microbench.cli.app import main

    out = tmp_path / "repo"
    assert main(["publish", str(saved), "me/bench-8", "--to-folder", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    assert hub.calls == []  # nothing uploaded
    publish_bundle(saved, "me/bench-8")
    remote = hub.folder("me/bench-8", None)
    local = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    sent = {str(p.relative_to(remote)): p.read_bytes() for p in remote.rglob("*") if p.is_file()}
    assert local == sent
    assert load_bundle(out) == load_bundle(saved)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging


def test_to_folder_refuses_a_non_empty_folder_unless_overwrite(
    saved: Path, tmp_path: Path, capsys
) -> None:
    from lmeval_microbench.cli.app import main

    out = tmp_path / "repo"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    argv = ["publish", str(saved), "me/bench-8", "--to-folder", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(out) in err and "--overwrite" in err
    assert main([*argv, "--overwrite"]) == 2  # not an earlier publication: not replaced
    assert "not an earlier publication" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    (out / "notes.txt").unlink()
    assert main(argv) == 0  # an empty folder is fine
    assert main(argv) == 2
    assert main([*argv, "--overwrite"]) == 0  # an earlier publication is replaced
    assert load_bundle(out) == load_bundle(saved)


def test_a_failed_write_leaves_the_folder_as_it_was(
    saved: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lmeval_microbench.publish import repo

    out = Path(publish_bundle(saved, "me/bench-8", to_folder=tmp_path / "pub" / "repo"))
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def broken(rows: list, path: Path) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(repo, "_write_items", broken)
    with pytest.raises(OSError, match="disk full"):
        publish_bundle(saved, "me/other", to_folder=out, overwrite=True)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert [p.name for p in out.parent.iterdir()] == ["repo"]  # no staging folder left
