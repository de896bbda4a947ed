"""Loading bandwidth traces: files (Mahimahi or rate series) and generated ``gen:SPEC`` traces.

A file is read by the core line by line (memory for the opportunities kept, not the file),
which reports malformed input as ``FILE:LINE: ...``; a Mahimahi file faster than 10 Gbit/s
is refused as a rate series above it is. The format is detected from the first data line: a single
integer is a Mahimahi trace (one millisecond timestamp per line), two or more numeric
columns a ``time_s rate_mbps`` series. ``#`` starts a comment in either format.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import SluiceError, core, core_errors, interruptible, regular_file

GEN_PREFIX = "gen:"
#: Trace files: up to 1 GB (the limit of 100 million opportunities is about that much
#: Mahimahi text), read streaming.
MAX_TRACE_FILE_BYTES = 1 << 30
FORMATS = ("mahimahi", "rate")
#: The longest line of a trace file (the core's ``limits::MAX_TRACE_LINE_BYTES``).
MAX_LINE_BYTES = 4096


@dataclass(frozen=True)
class LoadedTrace:
    """A parsed trace and where it came from."""

    trace: Any  # sluice._core.Trace
    name: str  # the file name (no directory) or "gen:SPEC"
    stem: str  # for default output names
    sha256: str  # of the file bytes, or of the generated Mahimahi text
    format: str  # "mahimahi", "rate" or "generated"
    source: str  # the argument as given

    def header(self) -> dict[str, Any]:
        """The ``trace`` entry of a result header (fixed key order)."""
        return {
            "name": self.name,
            "sha256": self.sha256,
            "mean_rate_bps": self.trace.mean_rate_bps,
        }


def is_generated(arg: str) -> bool:
    return arg.startswith(GEN_PREFIX)


def trace_stem(arg: str) -> str:
    """A short filesystem-safe name for a trace argument (file stem or sanitised spec)."""
    if is_generated(arg):
        raw = "gen-" + arg[len(GEN_PREFIX) :]
    else:
        raw = Path(arg).stem or Path(arg).name
    # Bounded: it becomes part of a directory name (results/<scheme>-<stem>-s<seed>).
    return re.sub(r"[^A-Za-z0-9._-]+", "-", raw).strip("-")[:80].strip("-") or "trace"


def _strip_comment(line: str) -> str:
    return line.split("#", 1)[0].strip()


def detect_format(text: str, path: str) -> str:
    """``"mahimahi"`` or ``"rate"``, from the first data line of ``text``."""
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = _strip_comment(raw)
        if line:
            return _line_format(line, lineno, path)
    raise SluiceError(f"{path}: trace file has no data lines")


def _line_format(line: str, lineno: int, path: str) -> str:
    if line.startswith("\ufeff"):
        raise SluiceError(f"{path}:{lineno}: the file starts with a UTF-8 byte-order mark (some "
                          "editors write one): save it without one")  # fmt: skip
    fields = [f for f in re.split(r"[,\s]+", line) if f]
    if len(fields) == 1:
        try:
            int(fields[0])
        except ValueError:
            shown = fields[0] if len(fields[0]) <= 40 else fields[0][:40] + "..."
            raise SluiceError(
                f"{path}:{lineno}: {shown!r} is neither a Mahimahi timestamp (integer ms) "
                "nor a 'time_s rate_mbps' row; use --trace-format to choose"
            ) from None
        return "mahimahi"
    return "rate"


def parse_trace_text(text: str, path: str, fmt: str | None = None) -> Any:
    """Parses trace text (``fmt`` None: detect). ``path`` names the source in errors."""
    fmt = fmt or detect_format(text, path)
    _core = core()
    if fmt == "mahimahi":
        # The core's Mahimahi parser skips blank lines but not comments: blank comment lines
        # out, keeping line numbers for its error messages.
        if "#" in text:
            text = "\n".join(_strip_comment(line) for line in text.splitlines())
        with core_errors():
            return interruptible(_core.Trace.parse_mahimahi, text, path)
    if fmt == "rate":
        with core_errors():
            return interruptible(_core.Trace.parse_rate_series, text, path)
    raise SluiceError(f"unknown trace format {fmt!r} (expected one of: {', '.join(FORMATS)})")


#: Opportunities per piece of a trace's Mahimahi text (:func:`mahimahi_pieces`).
PIECE = 1 << 20


def mahimahi_pieces(trace: Any) -> Iterator[str]:
    """A trace's Mahimahi text in pieces (a generated day is 100 million lines: never the
    whole text in memory at once)."""
    for start in range(0, len(trace), PIECE):
        yield trace.to_mahimahi_range(start, start + PIECE)


def generate(spec: str, duration_s: float) -> Any:
    """The core's generated trace for ``spec`` (without ``gen:``, e.g. ``constant:12``) over
    ``duration_s``; :class:`SluiceError` for a bad spec."""
    with core_errors(f"{GEN_PREFIX}{spec}: "):
        return interruptible(core().Trace.generate, spec, float(duration_s))


def trace_name(arg: str) -> str:
    """The name a run's config gives the trace ``arg`` (``downlink.trace``), known before it
    is loaded (:func:`load_trace` gives the same): a generated trace's ``gen:`` spec as
    written, a file's name without its folder."""
    return arg if is_generated(arg) else Path(arg).name


def load_trace(arg: str, *, duration_s: float | None = None, fmt: str | None = None) -> LoadedTrace:
    """Loads ``arg``: a trace file path, or ``gen:SPEC`` generated over ``duration_s``.

    Raises :class:`SluiceError` for a missing or unreadable file, for malformed content
    (naming ``FILE:LINE``) and for a bad generator spec.
    """
    if is_generated(arg):
        spec = arg[len(GEN_PREFIX) :]
        # A format is for the files (the other trace of a run may be one): not used here.
        if duration_s is None:
            raise SluiceError(f"{arg}: a generated trace needs a duration")
        trace = generate(spec, float(duration_s))
        digest = hashlib.sha256()
        for piece in mahimahi_pieces(trace):
            digest.update(piece.encode())
        return LoadedTrace(trace, trace_name(arg), trace_stem(arg), digest.hexdigest(),
                           "generated", arg)  # fmt: skip

    # Streamed: memory for the opportunities kept, never the file (a 1 GB file is fine).
    try:
        path = regular_file(arg, "trace file", MAX_TRACE_FILE_BYTES)
    except SluiceError as e:
        if not os.path.lexists(arg) and re.fullmatch(r"[a-z-]+:[^/]*", arg):
            raise SluiceError(f"{e}; a generated trace is written {GEN_PREFIX}{arg}") from None
        raise
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        fmt = fmt or _detect_file_format(path, arg)
    except OSError as e:
        raise SluiceError(f"cannot read trace file {arg}: {e.strerror or e}") from None
    if fmt not in FORMATS:
        raise SluiceError(f"unknown trace format {fmt!r} (expected one of: {', '.join(FORMATS)})")
    with core_errors():
        trace = interruptible(core().Trace.read_file, str(path), arg, fmt)
    return LoadedTrace(trace, trace_name(arg), trace_stem(arg), digest.hexdigest(), fmt, arg)


def _detect_file_format(path: Path, arg: str) -> str:
    """:func:`detect_format` of a file, from its first data line (read alone)."""
    with open(path, "rb") as f:
        for lineno in itertools.count(1):
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                break
            if len(raw) > MAX_LINE_BYTES:
                raise SluiceError(f"{arg}:{lineno}: a line longer than {MAX_LINE_BYTES} bytes: "
                                  "not a trace file")  # fmt: skip
            try:
                line = _strip_comment(raw.decode("utf-8"))
            except UnicodeDecodeError:
                msg = f"{arg}:{lineno}: not a text trace file (invalid UTF-8)"
                raise SluiceError(msg) from None
            if line:
                return _line_format(line, lineno, arg)
    raise SluiceError(f"{arg}: trace file has no data lines")


def bin_rates_bps(trace: Any, bin_s: float = 1.0) -> list[float]:
    """Capacity over whole ``bin_s`` bins of one trace period (at least one bin). The
    period is taken as ``(0, period]``, a microsecond later than the link's ``[0, period)``:
    a Mahimahi file's last opportunity, at the period itself, is one of its own (the next
    lap's first is the file's opportunity at 0), so a file ``1000`` has one 1 s bin of
    12 kbit/s, not none."""
    period_us = round(trace.period_s * 1e6)
    bin_us = round(bin_s * 1e6)
    if period_us <= 0 or bin_us <= 0:
        return []
    if period_us < bin_us:
        bin_us = period_us
    n = period_us // bin_us
    return [trace.capacity_bytes(i * bin_us + 1, (i + 1) * bin_us + 1) * 8e6 / bin_us
            for i in range(n)]  # fmt: skip
