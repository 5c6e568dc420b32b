"""One strict JSON parser for every file the package reads (bundles, joint files, lm-eval output).

Python's ``json`` accepts things that later turn into tracebacks or silently different
numbers: a key given twice (the last one wins, so line order decides a score), ``NaN`` and
``Infinity``, integers too large for a float, lone UTF-16 surrogates that cannot be hashed or
written back, and nesting deep enough to exhaust the stack. :func:`parse_json` refuses each of
them with an :class:`~lmeval_microbench.errors.InputError` naming the source.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .errors import InputError

MAX_DEPTH = 64
"""Deepest nesting accepted: far more than any file we read, far less than the stack allows."""
_MAX_INT_DIGITS = 300
"""Longer integers overflow a float (1e308) wherever they are used as numbers."""
_SURROGATE = re.compile("[\ud800-\udfff]")


def _pairs(source: str) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj:
                raise InputError(f"{source}: key {key!r} appears twice in one JSON object")
            obj[key] = value
        return obj

    return build


def _refuse_constant(source: str) -> Callable[[str], Any]:
    def refuse(name: str) -> Any:
        raise InputError(f"{source}: {name} is not valid JSON (write null for a missing number)")

    return refuse


def _finite_int(source: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if len(text.lstrip("-")) > _MAX_INT_DIGITS:
            raise InputError(f"{source}: integer {text[:20]}... is too large for a number")
        return int(text)

    return parse


def _finite_float(source: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise InputError(f"{source}: number {text[:20]} is too large")
        return value

    return parse


def _check_parsed(value: Any, source: str, *, depth_limit: bool, strings: bool) -> None:
    """Refuse nesting beyond ``MAX_DEPTH`` and lone surrogates in keys or strings.

    Iterative, so the walk itself cannot exhaust the stack; only run when the text could hold
    either (many brackets, a ``\\u`` escape), so ordinary files pay nothing.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if strings and _SURROGATE.search(item):
                raise InputError(
                    f"{source}: text that is not valid Unicode (an unpaired UTF-16 surrogate)"
                )
        elif isinstance(item, (dict, list)):
            if depth_limit and depth > MAX_DEPTH:
                raise InputError(f"{source}: JSON nested more than {MAX_DEPTH} levels deep")
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


def parse_json(text: str | bytes, source: str, *, allow_nan: bool = False) -> Any:
    """Parse ``text`` strictly; ``source`` (a file name, ``file:line``) names it in errors.

    ``allow_nan`` accepts ``NaN`` (lm-eval writes it for a metric it could not compute, and
    our in-run estimate of a partial run is one); files we write never hold it.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
    try:
        value = json.loads(
            text,
            object_pairs_hook=_pairs(source),
            parse_constant=float if allow_nan else _refuse_constant(source),
            parse_int=_finite_int(source),
            parse_float=_finite_float(source),
        )
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: not valid JSON ({exc})") from None
    except RecursionError:
        raise InputError(f"{source}: JSON nested more than the parser allows") from None
    deep = text.count("[") + text.count("{") > MAX_DEPTH
    escaped = "\\u" in text
    if deep or escaped:
        _check_parsed(value, source, depth_limit=deep, strings=escaped)
    return value


def read_json(path: str | os.PathLike[str], *, allow_nan: bool = False) -> Any:
    """The JSON document in ``path``, parsed strictly; unreadable files are errors naming it."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not a JSON file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return parse_json(data, str(path), allow_nan=allow_nan)


def strict_json(value: Any) -> Any:
    """NaN and infinities as ``None`` all the way down: strict JSON every reader accepts (an
    undefined statistic, such as Kendall's tau of models that all score the same, is
    ``null``, never a bare ``NaN``)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value
