"""All-or-nothing writes of a bundle into its folder, which may hold other files too.

A bundle is ``bundle.json`` plus the side files it lists; anything else in the folder (a
README, ``.git/``, notes, a task's ``items.jsonl``) is not the bundle's and is never touched.

* A new folder is assembled beside the target and renamed onto it. ``rename`` fails when the
  target exists and is not empty, so of two writers racing for the same new folder one wins
  and the other is told; neither silently replaces the other.
* An existing folder is updated in place. The new files are written to a staging folder
  inside it, which is then renamed to :data:`PENDING`: from that moment the new bundle is
  committed. Its side files move in, then ``bundle.json`` (that rename is the switch), then
  :data:`PENDING` is removed. A reader sees the old bundle, the new one, or a mix that fails
  its checksums while :data:`PENDING` holds the complete new bundle; a writer killed there
  leaves exactly that, which a load explains and the next save finishes before its own.
  :data:`PENDING` is also the lock: it names its writer, and another writer refuses while
  that process lives.

SIGINT and SIGTERM are held back during the renames (they take effect right after), so only
a SIGKILL or a crash of the machine can stop a write between them.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._io import staging_folder
from ..errors import BundleError
from .integrity import BUNDLE_FILE, SIDE_FILES

PENDING = ".microbench-pending"
"""Folder, inside a bundle folder, holding a committed bundle while it moves in."""

_STAGING_PREFIX = ".microbench-staging-"
_WRITER_FILE = "writer.json"
_TAKEN = (errno.EEXIST, errno.ENOTEMPTY)

Writer = Callable[[Path], None]
"""Writes the bundle's files into the folder it is given."""


def write_folder(target: Path, write: Writer) -> None:
    """Put the bundle ``write`` produces into ``target``, new or existing (see module doc)."""
    if target.is_dir():
        _update(target, write)
    else:
        _create(target, write)


def interrupted_hint(folder: Path) -> str:
    """What to say about a bundle that fails its checks while a write is pending, or ''."""
    if not (folder / PENDING).is_dir():
        return ""
    return (
        f"; a write of this bundle was interrupted: {folder / PENDING} holds the complete new "
        "bundle, and saving the bundle again (microbench build --overwrite) moves it in first"
    )


# ---------------------------------------------------------------------------- new folders
def _create(target: Path, write: Writer) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with _staging(target.parent, f".{target.name}.", write) as staging, deferred_signals():
        try:
            os.rename(staging, target)
        except OSError as exc:
            if exc.errno not in (*_TAKEN, errno.ENOTDIR):
                raise
            raise BundleError(
                f"{target}: created by another process while this bundle was being written; "
                "it was left as it is (overwrite=True, or --overwrite, replaces it)"
            ) from exc


# ---------------------------------------------------------------------------- existing folders
def _update(target: Path, write: Writer) -> None:
    finish_interrupted(target)
    _remove_stale_staging(target)
    with _staging(target, _STAGING_PREFIX, write, owned=True) as staging, deferred_signals():
        try:
            os.rename(staging, target / PENDING)
        except OSError as exc:
            if exc.errno not in _TAKEN:
                raise
            raise BundleError(
                f"{target}: another process started writing this bundle meanwhile; "
                "try again when it has finished"
            ) from exc
        try:
            _move_in(target)
        except BaseException:
            # nobody writes it any more: disown it, so that the next save finishes it
            (target / PENDING / _WRITER_FILE).unlink(missing_ok=True)
            raise


def finish_interrupted(target: Path) -> None:
    """Move in the bundle an interrupted write committed, unless its writer still runs."""
    pending = target / PENDING
    if not pending.is_dir():
        return
    writer = _writer(pending)
    if _alive(writer):
        raise BundleError(
            f"{target}: another process (pid {writer.get('pid')}) is writing this bundle; "
            f"try again when it has finished (if no process is, delete {pending})"
        )
    with deferred_signals():
        _move_in(target)


def _move_in(target: Path) -> None:
    """Move the bundle in :data:`PENDING` into ``target``, ``bundle.json`` last; idempotent."""
    pending = target / PENDING
    listed = _listed_files(pending / BUNDLE_FILE)
    if listed is not None:  # bundle.json still waits: the switch has not happened
        for name in SIDE_FILES:  # the only files a save writes: nothing else is touched
            if name not in listed:
                (target / name).unlink(missing_ok=True)  # the old bundle's, not the new one's
            elif (pending / name).exists():  # absent: moved in before an interruption
                os.replace(pending / name, target / name)
        os.replace(pending / BUNDLE_FILE, target / BUNDLE_FILE)
    shutil.rmtree(pending)


def _listed_files(path: Path) -> set[str] | None:
    """Side files a pending ``bundle.json`` lists; None when it has been moved in already."""
    if not path.is_file():
        return None
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["checksums"]["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BundleError(f"{path}: unreadable bundle of an interrupted write ({exc})") from exc
    return set(files)


# ---------------------------------------------------------------------------- staging
@contextmanager
def _staging(parent: Path, prefix: str, write: Writer, *, owned: bool = False) -> Iterator[Path]:
    """A hidden folder in ``parent`` holding what ``write`` wrote; removed unless moved away."""
    with staging_folder(parent, prefix) as staging:
        if owned:  # first, so that a later writer can tell a dead one's leftovers
            (staging / _WRITER_FILE).write_text(
                json.dumps({"pid": os.getpid(), "host": socket.gethostname()}), encoding="utf-8"
            )
        write(staging)
        yield staging


def _remove_stale_staging(target: Path) -> None:
    """Staging folders of killed writers (live ones are left alone)."""
    for leftover in target.glob(f"{_STAGING_PREFIX}*"):
        if leftover.is_dir() and not _alive(_writer(leftover)):
            shutil.rmtree(leftover, ignore_errors=True)


def _writer(folder: Path) -> dict[str, Any]:
    try:
        found = json.loads((folder / _WRITER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _alive(writer: dict[str, Any]) -> bool:
    """Whether the process that wrote ``writer`` may still run (another host: assume so)."""
    pid = writer.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return False
    if writer.get("host") != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


# ---------------------------------------------------------------------------- signals
@contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back during the block; the first one received acts after it.

    Only the main thread may set handlers; elsewhere the block runs unprotected.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    wanted = [signal.SIGINT, signal.SIGTERM]
    previous = {
        sig: signal.signal(sig, lambda number, _: received.append(number)) for sig in wanted
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        if received:
            signal.raise_signal(received[0])
