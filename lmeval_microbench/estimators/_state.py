"""What reading a saved estimator state can raise, as one-line refusals naming the estimator."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import InputError


@contextmanager
def state_errors(name: str) -> Iterator[None]:
    """Turn a missing field (``KeyError``) or a malformed value (``TypeError``,
    ``ValueError``) met while reading estimator ``name``'s state into an :class:`InputError`;
    an ``InputError`` raised inside passes as it is. For the estimators whose state is their
    own (made of other estimators or readings); the base class reads the common one."""
    try:
        yield
    except KeyError as exc:
        raise InputError(f"{name}: estimator state lacks field {exc.args[0]!r}") from exc
    except InputError:
        raise
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name}: malformed estimator state ({exc})") from exc
