"""Import a module of ``tools/`` the way the tools import each other.

``tools/`` is a folder of scripts, not a package: ``python tools/x.py`` puts the folder first
on ``sys.path`` and the scripts import their siblings by plain name (``from leaderboard_bench
import ...``). Code that only the tools use lives there, so tests of it do the same.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def tools_module(name: str) -> ModuleType:
    """``tools/{name}.py`` imported with ``tools/`` on ``sys.path`` (its siblings resolve)."""
    if str(TOOLS) not in sys.path:
        sys.path.insert(0, str(TOOLS))
    return importlib.import_module(name)
