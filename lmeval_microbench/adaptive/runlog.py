"""What an adaptive run keeps: a step log written as it goes, then lm-eval-shaped files.

``adaptive_<task>.jsonl`` gets one line per step (the items asked, their scores and lm-eval
sample records, the ability after it), appended and flushed to disk before the next step, so a
run that dies keeps every finished step and ``--resume`` replays them and goes on.
At the end ``samples_<task>_<stamp>.jsonl`` (one lm-eval sample per asked item, in order of
administration, with an ``adaptive`` block) and ``results_<stamp>.json`` are written atomically.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .._io import atomic_path
from .._json import parse_json
from ..errors import InputError

LOG_PREFIX = "adaptive_"


def log_path(folder: Path, task: str) -> Path:
    return folder / f"{LOG_PREFIX}{task}.jsonl"


def append_step(path: Path, record: dict[str, Any]) -> None:
    """Append one step and force it to disk (a crash afterwards cannot lose it)."""
    line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def read_steps(path: Path) -> list[dict[str, Any]]:
    """Logged steps; a last line cut off by a crash is dropped (it was never complete)."""
    if not path.is_file():
        return []
    lines = path.read_bytes().splitlines()
    steps = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = parse_json(line, f"{path}:{number}")
        except InputError:
            if number == len(lines):
                break
            raise
        if not isinstance(record, dict) or "items" not in record or "scores" not in record:
            raise InputError(f"{path}:{number}: not an adaptive step record")
        steps.append(record)
    return steps


def write_json(path: Path, payload: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(payload, indent=2, ensure_ascii=False, default=str) + "\n")


def write_samples(path: Path, samples: list[dict[str, Any]]) -> None:
    with atomic_path(path) as tmp:
        text = "".join(json.dumps(s, ensure_ascii=False, default=str) + "\n" for s in samples)
        tmp.write_text(text, encoding="utf-8")
