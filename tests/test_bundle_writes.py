"""Bundle folders written atomically: refused overwrites, failed and killed saves, races,
and a Ctrl-C during the renames."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from bundle_support import (
    bundle,
    irt,
    items_frame,
    make_bundle,
    question,
    saved,
    source,
    subset,
)

from lmeval_microbench.bundle import (
    BUNDLE_FILE,
    ITEMS_FILE,
    Bundle,
    load_bundle,
    load_items,
    save_bundle,
)
from lmeval_microbench.bundle import io as bundle_io
from lmeval_microbench.errors import BundleError

__all__ = ["bundle", "irt", "items_frame", "saved", "source", "subset"]  # fixtures, used by name


# ---------------------------------------------------------------------------- atomic writes
def test_refuses_to_overwrite_unless_asked(
    saved: Path, bundle: Bundle, source, subset, irt
) -> None:
    with pytest.raises(BundleError, match="already exists; pass overwrite=True"):
        save_bundle(bundle, saved)
    renamed = make_bundle(source, subset, irt, name="renamed")
    save_bundle(renamed, saved, overwrite=True)
    assert load_bundle(saved).name == "renamed"
    assert not (saved / ITEMS_FILE).exists()  # the old side file went with the old bundle


def test_refuses_to_overwrite_a_folder_that_is_not_a_bundle(tmp_path: Path, bundle: Bundle) -> None:
    folder = tmp_path / "home"
    folder.mkdir()
    (folder / "thesis.tex").write_text("precious")
    with pytest.raises(BundleError, match=r"non-empty folder that holds no bundle\.json"):
        save_bundle(bundle, folder, overwrite=True)
    assert (folder / "thesis.tex").read_text() == "precious"


def _explode(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("disk full")


def test_failed_save_leaves_nothing_behind(
    tmp_path: Path, bundle: Bundle, items_frame: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundle_io, "_write_document", _explode)  # after items.parquet was written
    with pytest.raises(RuntimeError, match="disk full"):
        save_bundle(bundle, tmp_path / "new", items=items_frame)
    assert list(tmp_path.iterdir()) == []


def test_failed_overwrite_keeps_the_old_bundle(
    saved: Path, source, subset, irt, items_frame: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = sorted(p.name for p in saved.parent.iterdir())
    old = load_bundle(saved)
    monkeypatch.setattr(bundle_io, "_write_document", _explode)
    with pytest.raises(RuntimeError, match="disk full"):
        save_bundle(make_bundle(source, subset, irt, name="new"), saved, overwrite=True)
    assert sorted(p.name for p in saved.parent.iterdir()) == before
    assert load_bundle(saved) == old
    assert load_items(saved) is not None


def test_a_failed_move_in_keeps_the_old_bundle_and_the_next_save_finishes_it(
    saved: Path, source, subset, irt, items_frame, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = load_bundle(saved)

    def failing_replace(src: Any, dst: Any) -> None:
        raise OSError("rename failed")

    monkeypatch.setattr(bundle_io.os, "replace", failing_replace)
    new = make_bundle(source, subset, irt, name="new")
    with pytest.raises(BundleError, match=r"cannot write the bundle \(rename failed\)"):
        save_bundle(new, saved, items=items_frame.assign(question="reworded"), overwrite=True)
    monkeypatch.undo()
    assert load_bundle(saved) == old  # the switch to the new bundle.json never happened
    save_bundle(make_bundle(source, subset, irt, name="third"), saved, overwrite=True)
    assert load_bundle(saved).name == "third"
    assert sorted(p.name for p in saved.iterdir()) == [BUNDLE_FILE]


# ---------------------------------------------------------------------------- issue 8
def test_overwrite_replaces_only_the_bundle_files(saved: Path, source, subset, irt) -> None:
    (saved / "README.md").write_text("my notes")
    (saved / ".git").mkdir()
    (saved / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (saved / "notes").mkdir()
    (saved / "notes" / "todo.txt").write_text("keep me")
    save_bundle(make_bundle(source, subset, irt, name="renamed"), saved, overwrite=True)
    assert load_bundle(saved).name == "renamed"
    assert (saved / "README.md").read_text() == "my notes"
    assert (saved / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert (saved / "notes" / "todo.txt").read_text() == "keep me"
    # the old items.parquet went with the old bundle, and nothing was left behind
    assert sorted(p.name for p in saved.iterdir()) == [".git", "README.md", BUNDLE_FILE, "notes"]
    assert sorted(p.name for p in saved.parent.iterdir()) == [saved.name]


def test_a_save_that_loses_the_race_for_a_new_folder_is_refused(
    tmp_path: Path, bundle: Bundle, source, subset, irt, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "new"
    winner = make_bundle(source, subset, irt, name="winner")
    real_write = bundle_io._write_document

    def another_process_finishes_first(document: Any, path: Path) -> None:
        monkeypatch.setattr(bundle_io, "_write_document", real_write)
        save_bundle(winner, target)
        real_write(document, path)

    monkeypatch.setattr(bundle_io, "_write_document", another_process_finishes_first)
    with pytest.raises(BundleError, match=r"new: created by another process"):
        save_bundle(bundle, target)
    assert load_bundle(target).name == "winner"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new"]


def test_an_overwrite_waits_for_no_one_but_refuses_a_live_writer(saved: Path, bundle: Bundle):
    pending = saved / ".microbench-pending"
    pending.mkdir()
    writer = {"pid": os.getpid(), "host": socket.gethostname()}
    (pending / "writer.json").write_text(json.dumps(writer))
    with pytest.raises(BundleError, match=rf"another process \(pid {os.getpid()}\) is writing"):
        save_bundle(bundle, saved, overwrite=True)
    assert load_bundle(saved) == bundle


_KILLED_SAVE = """
import os, sys
from lmeval_microbench.bundle import load_bundle, load_items, save_bundle

target, source, at = sys.argv[1], sys.argv[2], int(sys.argv[3])
new, items = load_bundle(source), load_items(source)
calls = 0


def dies_at_call(real):
    def call(*args, **kwargs):
        global calls
        calls += 1
        if calls == at:
            os._exit(9)  # a kill: no cleanup, no finally
        return real(*args, **kwargs)

    return call


os.rename, os.replace = dies_at_call(os.rename), dies_at_call(os.replace)
save_bundle(new, target, items=items, overwrite=True)
"""


@pytest.mark.slow  # 11-25 s: the default run stays under 15 minutes
def test_a_killed_overwrite_leaves_a_bundle_or_an_explained_recoverable_state(
    tmp_path: Path, bundle: Bundle, items_frame: pd.DataFrame, source, subset, irt
) -> None:
    target = save_bundle(bundle, tmp_path / "target", items=items_frame)
    changed = items_frame.assign(question="reworded")  # another items.parquet
    new = save_bundle(make_bundle(source, subset, irt, name="new"), tmp_path / "new", items=changed)
    script = tmp_path / "killed_save.py"
    script.write_text(_KILLED_SAVE)
    outcomes = []
    for at in range(1, 20):
        run = subprocess.run(
            [sys.executable, str(script), str(target), str(new), str(at)],
            capture_output=True,
            text=True,
        )
        assert run.returncode in (0, 9), run.stderr
        try:
            found = load_bundle(target)
            assert found.name in ("bench-8-random", "new")
            assert load_items(target)["question"].iloc[0] in (
                question(found.item_ids[0]),
                "reworded",
            )
            outcomes.append(found.name)
        except BundleError as exc:  # a mix: explained, and the next save repairs it
            assert "interrupted" in str(exc), str(exc)
            outcomes.append("explained")
        if run.returncode == 0:
            break
        save_bundle(bundle, target, items=items_frame, overwrite=True)
        assert load_bundle(target) == bundle
    assert outcomes[-1] == "new" and len(outcomes) >= 3  # killed at every rename on the way
    assert sorted(p.name for p in target.iterdir()) == [BUNDLE_FILE, ITEMS_FILE]


def test_ctrl_c_during_the_renames_takes_effect_after_them() -> None:
    import signal

    from lmeval_microbench.bundle._commit import deferred_signals

    # A process started in the background by a non-interactive shell inherits SIGINT ignored;
    # the test is about Python's usual Ctrl-C handler, so it installs that one for itself.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        done = []
        with pytest.raises(KeyboardInterrupt):
            with deferred_signals():
                signal.raise_signal(signal.SIGINT)
                done.append("the renames finished")
        assert done == ["the renames finished"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, inherited)
