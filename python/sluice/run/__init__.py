"""Running one simulation, stage by stage: what the run is (:mod:`.spec`), its inputs
(:mod:`.inputs`: traces, the video), the session that runs it (:mod:`.session`: the
simulator, or a live session), what the viewer saw (:mod:`.score`) and its result
(:mod:`.write`). :func:`simulate` runs the stages without writing; :func:`run_one` writes
too. Many runs: :mod:`sluice.pool` and :mod:`sluice.cluster`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import results
from ..errors import SluiceError, core
from .inputs import (
    Inputs,
    load_traces,
    prepare,
    prepare_clip,
    with_clip,
)
from .score import Scores, score
from .session import Simulated, advance, captured_stderr, fold_stderr, open_session
from .spec import (
    ENCODE_TIME_MODES,
    ENCODERS,
    RunSpec,
    check,
    check_quality_mode,
    overridden,
    planned_config,
    resolve_encoder,
    validate_config,
)
from .write import RunOutput

__all__ = [
    "ENCODERS", "ENCODE_TIME_MODES", "RunOutput", "RunSpec", "Simulated", "advance",
    "captured_stderr", "check", "fold_stderr", "load_traces", "overridden", "planned_config",
    "prepare_clip", "resolve_encoder", "run_one", "simulate", "validate_config", "with_clip",
]  # fmt: skip


def run_one(spec: RunSpec) -> Path:
    """Runs ``spec`` and writes its results; returns the run directory."""
    return simulate(spec).write()


def simulate(spec: RunSpec, session: Callable[..., Any] = Simulated) -> RunOutput:
    """Runs ``spec`` without writing its results (:meth:`RunOutput.write` does).
    ``session``: what runs it (:class:`Simulated`, the default, or a live session)."""
    _core = core()
    check_quality_mode(spec)
    encoder = resolve_encoder(spec)
    cfg = planned_config(spec, encoder)
    validate_config(cfg)  # ranges before traces are generated or read
    run_dir = results.check_result_dir(spec.resolved_out_dir())
    inputs = prepare(spec, cfg, encoder, run_dir)
    try:
        sim, resolved, files = open_session(_core, run_dir, inputs, session)
        try:
            return _run(sim, spec, run_dir, inputs, resolved, files)
        except BaseException:
            for tmp in files.values():  # the files of a run that did not finish
                tmp.unlink(missing_ok=True)
            raise
    except BaseException:
        inputs.discard(run_dir)
        raise


def _run(sim: Any, spec: RunSpec, run_dir: Path, inputs: Inputs, resolved: dict[str, Any],
         files: dict[str, Path]) -> RunOutput:  # fmt: skip
    """Runs the session, scores what the viewer saw (real video only) and gathers the
    result."""
    try:
        frames_json, skips_json, samples_json, summary_json = sim.run(
            spec, float(resolved["duration_s"])
        )
    except RuntimeError as e:  # the encoder failed mid-run (unreadable video, x264 error)
        raise SluiceError(f"run {spec.scheme} stopped: {e}") from None
    finally:
        files.update(sim.files)  # what the session wrote while it ran
    frames = json.loads(frames_json)
    skips = json.loads(skips_json)
    summary = json.loads(summary_json)
    scored = None
    if inputs.raw is not None and spec.quality != "none" and not sim.interrupted:
        try:
            scored = score(spec, run_dir, inputs.raw, frames, skips, files)
        except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (Terminated)
            if not getattr(sim, "keep_on_interrupt", False):
                raise
            # A live session cannot be run again: written unscored, then the stop goes on.
            sim.interrupt = e
            partial = files.pop(results.DELIVERED_FILE, None)
            if partial is not None:
                Path(partial).unlink(missing_ok=True)
            scored = Scores(error="quality scoring was stopped (the session had finished; "
                                  "its streams are kept)")  # fmt: skip
        summary.update(scored.summary)
    header = {
        "seed": resolved["seed"],
        "scheme": spec.scheme,
        "config": resolved,
        "trace": inputs.down.header() if inputs.down else None,
        "uplink_trace": inputs.up.header() if inputs.up else None,
    }
    if getattr(sim, "header_live", None):
        header["live"] = sim.header_live
    return RunOutput(run_dir, header, frames, json.loads(samples_json), summary,
                     scored.per_slot if scored else [], skips, files=dict(files),
                     quality_error=scored.error if scored else None)  # fmt: skip
