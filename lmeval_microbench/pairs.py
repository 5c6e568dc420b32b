"""A markdown table and the JSON it shows, written as a pair that a reader can check.

``reconstruct --out``, ``estimate --out`` and ``curve --out`` write the numbers as JSON and a
table of them as markdown. Each file is replaced atomically, but two files cannot be replaced
in one step: a kill between the two moves leaves a new table beside the old JSON. So the table
ends with a footer naming its JSON and the JSON's sha256 (:func:`pair_footer`), and
:func:`check_pair` (``microbench verify``) tells a matching pair from a mismatched one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ._io import atomic_path, sha256_bytes, sha256_file
from .errors import InputError

_FOOTER = re.compile(
    r"^(?P<label>[A-Za-z ]+): `(?P<name>[^`/\\]+)`, sha256 (?P<sha>[0-9a-f]{64})\.$"
)


def pair_footer(label: str, json_name: str, data: bytes) -> str:
    """The table's last line: what it shows (``label``), the JSON file and its sha256."""
    return f"{label}: `{json_name}`, sha256 {sha256_bytes(data)}.\n"


def write_pair(json_path: Path, table_path: Path, data: bytes, table: str, label: str) -> None:
    """Write the JSON ``data`` and ``table`` (with its footer), each atomically.

    The table goes into place first: a kill before the JSON's move leaves a table whose
    footer names a checksum the (old) JSON does not have, which :func:`check_pair` reports.
    """
    text = table.rstrip("\n") + "\n\n" + pair_footer(label, json_path.name, data)
    with atomic_path(json_path) as json_tmp, atomic_path(table_path) as table_tmp:
        json_tmp.write_bytes(data)
        table_tmp.write_text(text, encoding="utf-8")


def table_of(path: str | os.PathLike[str]) -> Path:
    """The markdown table of a pair, from either file (``x.json`` -> ``x.md``)."""
    path = Path(path)
    return path if path.suffix == ".md" else path.with_suffix(".md")


def check_pair(path: str | os.PathLike[str]) -> Path:
    """The JSON of the pair ``path`` belongs to, after checking that its table shows it.

    Raises :class:`InputError` naming both files when the table is missing or has no footer,
    the JSON it names is missing, or the JSON is not the one the table was written from.
    """
    table = table_of(path)
    if not table.is_file():
        raise InputError(f"{table}: no such table (the markdown written beside {path})")
    try:
        lines = table.read_text(encoding="utf-8").rstrip("\n").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{table}: not readable as text ({exc})") from exc
    found = _FOOTER.match(lines[-1]) if lines else None
    if found is None:
        raise InputError(
            f"{table}: its last line names no JSON file and checksum; it was not written by "
            "microbench (or was edited), so it cannot be checked"
        )
    data = table.parent / found["name"]
    if not data.is_file():
        raise InputError(f"{table} shows {data}, which is missing")
    if sha256_file(data) != found["sha"]:
        raise InputError(
            f"{table} and {data} do not match: the table was written from another version "
            "of the JSON (a run cut short between the two writes, or an edit); rerun the "
            "command with --overwrite to write both again"
        )
    return data
