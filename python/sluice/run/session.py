"""The third stage of a run: the session that runs it. :class:`Simulated`, the default, is
the deterministic simulator advanced in chunks of virtual time (with a progress bar on a
terminal); :mod:`sluice.live` has the live one, over real UDP. Either is opened by
:func:`open_session`, which folds what a C library printed on stderr into the error of a
session that does not build."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .. import results
from ..errors import core_errors
from .inputs import Inputs
from .spec import RunSpec

# Virtual seconds per run_until() step: the granularity of progress reporting and of
# signal checks (a virtual second takes milliseconds of wall time at the rate limits).
CHUNK_S = 1.0
# Show a per-run progress bar only for runs at least this long (and only on a terminal).
PROGRESS_MIN_DURATION_S = 20.0


@contextlib.contextmanager
def captured_stderr() -> Iterator[Callable[[], str]]:
    """File descriptor 2 goes to a temporary file inside the block (what C libraries print
    there); yields a function returning what was written so far. What was captured is
    written to the real stderr after the block unless the block raised (the caller folds it
    into its message then)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)

        def said() -> str:
            tmp.flush()
            tmp.seek(0)
            return tmp.read().decode(errors="replace")

        ok = False
        try:
            yield said
            ok = True
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if ok and (text := said()):
                sys.stderr.write(text)


def fold_stderr(message: str, said: str) -> str:
    """``message`` with the last line a library printed on stderr, if it adds anything."""
    lines = [ln.strip() for ln in said.splitlines() if ln.strip()]
    if not lines or lines[-1] in message:
        return message
    return f"{message} ({lines[-1]})"


def _show_progress(spec: RunSpec, duration_s: float) -> bool:
    return (
        spec.progress
        and duration_s >= PROGRESS_MIN_DURATION_S
        and hasattr(sys.stderr, "isatty")
        and sys.stderr.isatty()
    )


def advance(sim: Any, spec: RunSpec, duration_s: float) -> tuple[str, str, str, str]:
    """Runs the simulation to its end in chunks of :data:`CHUNK_S` virtual seconds (with a
    progress bar on a terminal). Signal handlers run between chunks (``run_until`` releases
    the GIL and checks for signals), so SIGINT and SIGTERM stop a run whatever the
    terminal."""
    end = sim.end_s
    bar = None
    if _show_progress(spec, duration_s):
        from tqdm import tqdm

        bar = tqdm(
            total=round(end, 3), unit="s", desc=spec.scheme, leave=False, file=sys.stderr,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} sim s [{elapsed}]",
        )  # fmt: skip
    try:
        t = sim.now_s
        while t < end:
            nxt = min(t + CHUNK_S, end)
            sim.run_until(nxt)
            if bar is not None:
                bar.update(nxt - t)
            t = nxt
    finally:
        if bar is not None:
            bar.close()
    return sim.finish()


class Simulated:
    """The default session: the deterministic simulator (``sluice._core.Simulation``),
    advanced in chunks (:func:`advance`).

    A session is built with ``(core module, run config JSON, downlink trace, uplink trace,
    run directory)`` and has ``resolved_config_json()``, ``run(spec, duration_s)`` returning
    the (frames, skips, samples, summary) JSON of the finished run, ``files`` (files of its
    own for the result: name in the run directory -> where it is, under a temporary name)
    and ``interrupted`` (it stopped early on Ctrl-C and its records are partial: not
    scored), and ``header_live`` (None, or what a live session ran with that the run config does
    not hold, for the result header's ``live``). :mod:`sluice.live` has the live one."""

    interrupted = False
    header_live: dict[str, Any] | None = None

    def __init__(self, _core: Any, cfg_json: str, down: Any, up: Any, run_dir: Path) -> None:
        self.sim = _core.Simulation(cfg_json, down, up)
        self.files: dict[str, Path] = {}

    def resolved_config_json(self) -> str:
        return str(self.sim.resolved_config_json())

    def run(self, spec: RunSpec, duration_s: float) -> tuple[str, str, str, str]:
        return advance(self.sim, spec, duration_s)


def open_session(_core: Any, run_dir: Path, inputs: Inputs,
                 session: Callable[..., Any],
                 ) -> tuple[Any, dict[str, Any], dict[str, Path]]:  # fmt: skip
    """Builds ``session`` for the inputs' config (:func:`~sluice.run.inputs.prepare`);
    returns it, the resolved config the core runs (with the x264
    files' paths relative to the run directory: the same run written elsewhere is the same
    file) and the files of the result so far (the session's own, x264's stream and its
    index, by name in the run directory). libx264 reports on fd 2 itself ("x264 [error]:
    ..."): that is folded into the error of a session that does not build."""
    cfg = inputs.config
    with captured_stderr() as said, core_errors():
        try:
            sim = session(_core, json.dumps(cfg), inputs.down.trace if inputs.down else None,
                          inputs.up.trace if inputs.up else None, run_dir)  # fmt: skip
        except ValueError as e:
            raise ValueError(fold_stderr(str(e), said())) from None
        resolved = json.loads(sim.resolved_config_json())
    files = dict(sim.files)
    if inputs.raw is not None:
        stream = Path(cfg["encoder"]["bitstream_path"])
        files.update({results.STREAM_FILE: stream,
                      results.STREAM_INDEX_FILE: Path(f"{stream}.idx")})  # fmt: skip
        resolved["encoder"].update(
            bitstream_path=results.STREAM_FILE,
            video_path=os.path.relpath(os.path.abspath(inputs.raw.path), run_dir.resolve()),
        )
    return sim, resolved, files
