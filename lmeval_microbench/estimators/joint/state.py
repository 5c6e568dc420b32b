"""The fitted joint estimator of a sealed ``joint.json`` file (JSON, never pickles)."""

from __future__ import annotations

import os
from pathlib import Path

from ..._io import SEAL_KEY
from ..._json import read_json
from ...errors import InputError
from .estimator import JointEstimator


def load_state(path: str | os.PathLike[str]) -> JointEstimator:
    """The fitted joint estimator of a ``joint.json`` written with ``_io.seal_json``.

    Errors name the file; a state without its checksum is refused (no pickles are read).
    """
    path = Path(path)
    try:
        state = read_json(path)
    except InputError as exc:
        reason = str(exc).removeprefix(f"{path}: ")
        raise InputError(f"{path}: cannot read the joint estimator state ({reason})") from exc
    if not isinstance(state, dict) or SEAL_KEY not in state:
        raise InputError(f"{path}: the joint estimator state has no checksum; write it again")
    try:
        return JointEstimator.from_state(state)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from exc
