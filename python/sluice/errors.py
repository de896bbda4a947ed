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
import json
import math
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")


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


def regular_file(
    path: str | os.PathLike[str], what: str, max_bytes: int | None = None
) -> Path:
    """``path`` if it is a regular file (of at most ``max_bytes``); otherwise a
    :class:`SluiceError` that says what it is: missing, a directory, something that is not a
    file (a FIFO or a device, which would block or never end), or too large to read."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise SluiceError(f"{what} not found: {path}") from None
    except OSError as e:
        raise SluiceError(f"cannot read {what} {path}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise SluiceError(f"{what} {path} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise SluiceError(f"{what} {path} is not a regular file (a FIFO, socket or device)")
    if max_bytes is not None and st.st_size > max_bytes:
        raise SluiceError(
            f"{what} {path} is {st.st_size} bytes, above the limit of {max_bytes} bytes"
        )
    return p


def read_json_object(path: str | os.PathLike[str], what: str) -> dict[str, Any]:
    """The JSON object in file ``path`` (``what`` names it in the error); a
    :class:`SluiceError` if it cannot be read, is not UTF-8 JSON, or is not an object (a
    file damaged or edited by hand)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise SluiceError(f"cannot read {what} {path}: {e.strerror or e}") from None
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise SluiceError(f"cannot read {what} {path}: not UTF-8 JSON ({e})") from None
    if not isinstance(data, dict):
        raise SluiceError(f"{what} {path} is not a JSON object (it holds a "
                          f"{type(data).__name__}): damaged or edited by hand?")  # fmt: skip
    return data


def output_file(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` if writing it replaces at most a regular file: a new path or a file (a
    temporary file is renamed over it). A directory, FIFO, socket or device there (also
    through a symlink) is a :class:`SluiceError`: Sluice writes nothing over those."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return p
    except OSError as e:
        raise SluiceError(f"cannot write {what} {path}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise SluiceError(f"{what} {path} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise SluiceError(
            f"{what} {path} is not a regular file (a FIFO, socket or device): "
            "sluice writes only new files or over regular ones"
        )
    return p


class DuplicateKey(ValueError):
    """A JSON object with a key given twice (:func:`strict_json`)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key '{key}' given twice in one object")
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise DuplicateKey(k)
        out[k] = v
    return out


def strict_json(text: str) -> Any:
    """``json.loads``, but an object with a key given twice raises :class:`DuplicateKey`
    (json would keep the last silently)."""
    import json

    return json.loads(text, object_pairs_hook=_no_duplicates)


def non_finite_path(obj: Any, prefix: str = "") -> str | None:
    """The path (``a.b[2].c``) of the first NaN or infinite number in a JSON-like ``obj``
    (Python's json reads ``NaN``, ``Infinity`` and ``1e999``), or of an integer beyond 64
    bits (which the core would read as an inexact float), or None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return prefix or "(value)"
    if isinstance(obj, int) and not isinstance(obj, bool) and not -(2**63) <= obj < 2**64:
        return prefix or "(value)"
    if isinstance(obj, dict):
        for k, v in obj.items():
            found = non_finite_path(v, f"{prefix}.{k}" if prefix else str(k))
            if found:
                return found
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            found = non_finite_path(v, f"{prefix}[{i}]")
            if found:
                return found
    return None


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Python's handler runs (:func:`handle_sigterm`), so that a
    terminated run unwinds like an interrupted one: temporary files removed, exit 143."""


#: How long a second SIGINT or SIGTERM is ignored while the first one unwinds (stopping a
#: pool, removing temporary files: well under a second); after that one ends the process.
UNWIND_GRACE_S = 5.0
_first_signal: float | None = None


def _first(signum: int) -> bool:
    """Whether this SIGINT or SIGTERM is the first (the caller raises, and the process
    unwinds). Another one while it unwinds (a second Ctrl-C during cleanup) is ignored, so
    the cleanup ends and the exit is still 130 or 143 with the one line, never death by the
    signal or a traceback; one that comes after :data:`UNWIND_GRACE_S` (a cleanup that hangs)
    ends the process at once, the same way. What was being written is never taken for a
    result (:mod:`sluice.results`) and its temporary files go with the next write."""
    import time

    global _first_signal
    if _first_signal is None:
        _first_signal = time.monotonic()
        return True
    if time.monotonic() - _first_signal > UNWIND_GRACE_S:
        import signal

        os.write(2, b"sluice: interrupted\n")
        os._exit(143 if signum == signal.SIGTERM else 130)
    return False


def _raise_terminated(signum: int, frame: Any) -> None:
    if _first(signum):
        raise Terminated()


def _raise_interrupt(signum: int, frame: Any) -> None:
    if _first(signum):
        raise KeyboardInterrupt()


def handle_sigterm() -> None:
    """Makes SIGTERM raise :class:`Terminated` and SIGINT :class:`KeyboardInterrupt` in the
    main thread, once (:func:`_first`: a second one while the first unwinds is ignored).
    Leaves a signal alone that is ignored or has a handler of someone else's, and does
    nothing outside the main thread."""
    import signal
    import threading

    global _first_signal
    if threading.current_thread() is not threading.main_thread():
        return
    _first_signal = None
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, _raise_terminated):
        signal.signal(signal.SIGTERM, _raise_terminated)
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, _raise_interrupt):
        signal.signal(signal.SIGINT, _raise_interrupt)


def interruptible(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a helper thread while the main thread waits in short steps, so that
    SIGINT and SIGTERM are handled at once even during a long call into the extension (one
    that releases the GIL: trace parsing and generation). An interrupted call is abandoned
    (the process is ending)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = fn(*args)
        except BaseException as e:  # re-raised in the caller's thread
            out["error"] = e

    t = threading.Thread(target=target, name="sluice-core-call", daemon=True)
    t.start()
    while t.is_alive():
        t.join(0.05)
    if "error" in out:
        raise out["error"]
    return out["value"]


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
