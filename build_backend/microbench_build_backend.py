"""PEP 517 backend of lmeval-microbench: setuptools, plus one ``.pth`` file in every wheel.

The ``.pth`` (see ``_lmeval_microbench_hook``) is what makes ``lm-eval --tasks microbench_mmlu``
work without ``--include_path``. It has to sit at the root of site-packages, which setuptools
has no setting for, and setuptools' editable wheels leave out anything a build step adds to the
build folder. So this thin wrapper lets setuptools build the regular or the editable wheel as
usual, then adds the ``.pth`` to the archive and to its ``RECORD``: pip installs it like any
other file of the distribution and ``pip uninstall`` removes it. Everything else (sdists,
metadata, requirements) is setuptools unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

from setuptools import build_meta
from setuptools.build_meta import (
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

PTH_NAME = "lmeval_microbench_tasks.pth"
# One import line (run by ``site`` at start-up): a ~0.5 ms module that only waits for lm-eval.
PTH_TEXT = "import _lmeval_microbench_hook; _lmeval_microbench_hook.install()\n"


def _record_line(name: str, data: bytes) -> str:
    """A wheel ``RECORD`` row: path, urlsafe-base64 sha256 without padding, size."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def add_pth(wheel: Path, name: str = PTH_NAME, text: str = PTH_TEXT) -> None:
    """Rewrite ``wheel`` with ``name`` at its root and listed in its ``RECORD`` (idempotent)."""
    data = text.encode()
    rebuilt = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(rebuilt, "w") as target:
        infos = [i for i in source.infolist() if i.filename != name]
        record = next(i for i in infos if i.filename.endswith(".dist-info/RECORD"))
        for info in infos:
            if info is not record:
                target.writestr(info, source.read(info), compress_type=info.compress_type)
        target.writestr(zipfile.ZipInfo(name, date_time=record.date_time), data)
        rows = source.read(record).decode().splitlines(keepends=True)
        rows = [r for r in rows if not r.startswith(f"{name},")]
        own = [i for i, r in enumerate(rows) if r.startswith(f"{record.filename},")]
        rows.insert(own[0] if own else len(rows), _record_line(name, data))
        target.writestr(record, "".join(rows).encode(), compress_type=record.compress_type)
    rebuilt.replace(wheel)


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, object] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """setuptools' wheel with the ``.pth`` added."""
    name = build_meta.build_wheel(wheel_directory, config_settings, metadata_directory)
    add_pth(Path(wheel_directory) / name)
    return name


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, object] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """setuptools' editable wheel with the ``.pth`` added."""
    name = build_meta.build_editable(wheel_directory, config_settings, metadata_directory)
    add_pth(Path(wheel_directory) / name)
    return name


__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "prepare_metadata_for_build_wheel",
]
