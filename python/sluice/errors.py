"""User-facing errors.

A :class:`SluiceError` is a user mistake (bad argument, missing or malformed file) or an
environment problem: the CLI prints its message on one line and exits with status 2, never a
traceback. ``ValueError`` raised by the ``sluice._core`` extension is treated the same way.
"""

from __future__ import annotations

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
