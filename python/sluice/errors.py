"""User-facing errors.

A :class:`SluiceError` is a user mistake (bad argument, missing or malformed file) or an
environment problem: the CLI prints its message on one line and exits with status 2, never a
traceback. The ``sluice._core`` extension reports bad input (a run config, a trace, a
generator spec) as ``ValueError``; the calls that hand it user input convert that to a
:class:`SluiceError` where they are made (:func:`core_errors`). Any other exception is a bug
and keeps its traceback.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import ModuleType


class SluiceError(Exception):
    """A user mistake or environment problem, reported as one line."""


def core() -> ModuleType:
    """The ``sluice._core`` extension module, or a clear error if it has not been built."""
    try:
        from . import _core
    except ImportError as e:
        raise SluiceError(
            f"the extension module sluice._core is not available ({e}); "
            "build it with `maturin develop --release` or `make build`"
        ) from e
    return _core


@contextlib.contextmanager
def core_errors(prefix: str = "") -> Iterator[None]:
    """Around a ``sluice._core`` call that takes user input: its ``ValueError`` (the core's
    way of rejecting input) becomes a :class:`SluiceError` with ``prefix`` + the message."""
    try:
        yield
    except ValueError as e:
        raise SluiceError(f"{prefix}{e}") from None


def one_line(e: BaseException) -> str:
    """``e`` as one line: a :class:`SluiceError`'s message; for anything else (a bug) its
    type, message and the innermost frame of its traceback (``file.py:LINE in function``)."""
    msg = " ".join(str(e).split())
    if isinstance(e, SluiceError):
        return msg
    import traceback

    where = ""
    frames = traceback.extract_tb(e.__traceback__) if e.__traceback__ is not None else []
    if frames:
        last = frames[-1]
        where = f" (at {last.filename.rsplit('/', 1)[-1]}:{last.lineno} in {last.name})"
    return f"{type(e).__name__}: {msg or 'no message'}{where}"
