"""Loading an lm-eval task's dataset without a network: fail in seconds, in one line.

``microbench build --task arc_easy`` (and ``adaptive build``) loads the original task, which
downloads its dataset from the Hugging Face Hub. Without a network that ended, after 30-100 s
of retries by ``datasets``/``huggingface_hub``, in a Python traceback; with
``HF_DATASETS_OFFLINE=1`` in a traceback too. Here:

- with ``HF_DATASETS_OFFLINE`` / ``HF_HUB_OFFLINE`` set, a dataset missing from the local
  cache is one ``InputError`` line naming the task, the dataset and the variable;
- without them, the Hub is probed first (one TCP connection, :data:`PROBE_SECONDS`, DNS
  included); unreachable, the task is loaded in offline mode, so a cached dataset still loads
  at once and a missing one is the same single line, saying there is no network. Behind a
  proxy (``HTTPS_PROXY`` ...) a direct connection says nothing, so no probe is made.

Only the Hub is guarded: a dataset that is a local path or a packaged builder (``json``,
``csv``, ...) needs no network and is loaded as is.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..errors import InputError

PROBE_SECONDS = 3.0
"""How long the Hub may take to accept a connection (name lookup included)."""
OFFLINE_VARIABLES = ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
LOCAL_BUILDERS = frozenset(
    {"json", "csv", "parquet", "text", "arrow", "pandas", "webdataset", "imagefolder"}
)
"""``datasets`` builders that read local files: no Hub involved."""
TRUE_VALUES = frozenset({"1", "ON", "YES", "TRUE"})


def offline_variable() -> str | None:
    """The offline variable that is set (as ``datasets`` reads it), else None."""
    for name in OFFLINE_VARIABLES:
        if os.environ.get(name, "").upper() in TRUE_VALUES:
            return name
    return None


def dataset_of(manager: Any, task: str) -> str | None:
    """``dataset_path`` of ``task`` in a ``TaskManager``'s index (includes resolved), if known.

    lm-eval 0.4.13 indexes each task's config; older releases do not, and None then means
    "not known": the load is still guarded by the exceptions it raises.
    """
    index = getattr(manager, "task_index", None)
    entry = index.get(task) if isinstance(index, dict) else None
    config = getattr(entry, "cfg", None)
    path = config.get("dataset_path") if isinstance(config, dict) else None
    return path if isinstance(path, str) and path else None


def needs_hub(dataset: str | None) -> bool:
    """Whether loading ``dataset`` goes to the Hub (not a local folder or file builder)."""
    if dataset is None:
        return True  # unknown: guard it
    return dataset not in LOCAL_BUILDERS and not Path(dataset).expanduser().exists()


def hub_address() -> tuple[str, int]:
    """Host and port of the Hub (``HF_ENDPOINT``, else huggingface.co:443)."""
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    return url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)


def hub_reachable(timeout: float = PROBE_SECONDS) -> bool:
    """Whether the Hub accepts a TCP connection within ``timeout`` seconds.

    The probe runs in a daemon thread so that a name lookup that hangs (no resolver) counts
    against the same timeout; ``socket.create_connection``'s own timeout does not cover it.
    """
    host, port = hub_address()
    reached: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                reached.append(True)
        except OSError:
            pass

    thread = threading.Thread(target=probe, name="microbench-hub-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(reached)


@contextmanager
def forced_offline() -> Iterator[None]:
    """``datasets`` and ``huggingface_hub`` in offline mode for the block (cache only).

    Both read their flag at call time from these module attributes; setting the environment
    variables now would be too late, as they are read at import.
    """
    import datasets.config
    import huggingface_hub.constants as hub_constants

    saved = (datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE)
    datasets.config.HF_HUB_OFFLINE = hub_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE = saved


@contextmanager
def dataset_access(task: str, dataset: str | None) -> Iterator[None]:
    """Load ``task`` (whose dataset is ``dataset``) in the block; no network is one line.

    Raises :class:`InputError` naming the task, the dataset and why (an offline variable, or
    the Hub unreachable) when the load fails for want of the network or of a cached copy.
    """
    variable = offline_variable()
    reason = f"{variable} is set" if variable else None
    guard: Any = None
    if (
        reason is None
        and needs_hub(dataset)
        and not any(os.environ.get(name) for name in PROXY_VARIABLES)
        and not hub_reachable()
    ):
        host, _ = hub_address()
        reason = f"no network: {host} cannot be reached"
        guard = forced_offline()
    try:
        if guard is None:
            yield
        else:
            with guard:
                yield
    except OSError as exc:  # ConnectionError, OfflineModeIsEnabled, LocalEntryNotFoundError
        if reason is None and not isinstance(exc, (ConnectionError, TimeoutError)):
            raise  # online and not a connection failure (a missing dataset, ...): as it was
        raise InputError(_message(task, dataset, reason, exc)) from exc


def _message(task: str, dataset: str | None, reason: str | None, exc: BaseException) -> str:
    what = f"task {task!r}: its dataset {dataset!r}" if dataset else f"task {task!r}: its dataset"
    cause = " ".join(str(exc).split())[:200] or type(exc).__name__
    if reason is None:  # online, and still a connection error: the Hub or a proxy failed
        reason = "the Hugging Face Hub could not be reached"
    return (
        f"{what} is not in the local Hugging Face cache and cannot be downloaded ({reason}; "
        f"{cause}): run once with network access to cache it (then HF_DATASETS_OFFLINE=1 "
        "works), or pass --task a YAML whose dataset is on disk"
    )
