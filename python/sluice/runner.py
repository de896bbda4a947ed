"""Running simulations: one (:func:`run_one`) or many in parallel (:func:`run_many`)."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import config, quality, results, video
from .errors import SluiceError, core, core_errors
from .traces import load_trace, trace_stem
from .video import X264_PRESETS

ENCODERS = ("model", "x264")
ENCODE_TIME_MODES = ("measured", "modeled")

# Virtual seconds per run_until() step: the granularity of progress reporting and of
# signal checks (a virtual second takes milliseconds of wall time at the rate limits).
CHUNK_S = 1.0
# Show a per-run progress bar only for runs at least this long (and only on a terminal).
PROGRESS_MIN_DURATION_S = 20.0


@dataclass(frozen=True)
class RunSpec:
    """Everything one run needs. Picklable, so it can be shipped to worker processes.

    The run's config is the core's ``RunConfig``: the defaults, the scheme's composition
    (the registry's, or ``scheme_config``), then what the front end derives (trace names,
    the x264 settings of the video, the clip's frame rate), then ``overrides``: ``(config
    path, value)`` pairs applied in order (:mod:`sluice.config`), so any field can be set
    (``("duration_s", 20.0)``, ``("downlink.queue_bytes", 100000)``,
    ``("pacer.threshold_packets", 12.5)``). The other fields are front-end settings that are
    not part of the config.
    """

    scheme: str = "webrtc"  # a registered scheme, or the name of ``scheme_config``
    scheme_config: dict[str, Any] | None = None  # a custom composition (SchemeConfig JSON)
    overrides: tuple[tuple[str, Any], ...] = ()
    trace: str | None = None  # file path, "gen:SPEC", or None for an unlimited link
    uplink_trace: str | None = None
    trace_format: str | None = None  # None: detect
    video: str | None = None  # any clip ffmpeg reads; x264 is then the default encoder
    encoder: str | None = None  # "model" | "x264" | None (x264 with a video, else model)
    width: int | None = None  # scale the video to this width (height keeps the aspect)
    quality: str = "fast"  # none | fast | full (runs on real video only)
    encode_time: str = "measured"  # x264 encode time: measured wall time or modeled
    preset: str = "superfast"
    out_dir: str | None = None  # None: default_out_dir()
    progress: bool = True
    cache_dir: str = os.path.join("results", ".video-cache")
    # False: once quality is scored, the run's H.264 files (stream.264, its index and
    # delivered.264) are not kept (a big matrix: about 60 MB a minute of 720p video)
    keep_streams: bool = True

    def __post_init__(self) -> None:
        items = self.overrides.items() if isinstance(self.overrides, dict) else self.overrides
        pairs = []
        for item in items:
            path, value = item
            pairs.append((str(path), value))
        object.__setattr__(self, "overrides", tuple(pairs))

    def config(self) -> dict[str, Any]:
        """The resolved run config this spec asks for, before the front end fills in trace
        names and the video: defaults, the scheme, the encoder's kind, the overrides.
        Raises :class:`SluiceError` for an unknown scheme or a bad override."""
        return planned_config(self, resolve_encoder(self))

    def default_out_dir(self) -> str:
        stem = trace_stem(self.trace) if self.trace else "unlimited"
        return os.path.join("results", f"{self.scheme}-{stem}-s{self.config()['seed']}")

    def resolved_out_dir(self) -> str:
        return self.out_dir or self.default_out_dir()


def _overridden(spec: RunSpec, path: str) -> bool:
    want = config.short_path(path)
    return any(config.short_path(p) == want for p, _ in spec.overrides)


def planned_config(spec: RunSpec, encoder: str) -> dict[str, Any]:
    """See :meth:`RunSpec.config` (``encoder``: from :func:`resolve_encoder`)."""
    if spec.encode_time not in ENCODE_TIME_MODES:
        raise SluiceError(f"encode time must be measured or modeled, got {spec.encode_time!r}")
    cfg = config.default_config()
    cfg["scheme_name"] = spec.scheme
    cfg["scheme"] = (
        copy.deepcopy(spec.scheme_config)
        if spec.scheme_config is not None
        else config.scheme_config(spec.scheme)
    )
    if encoder == "x264":
        cfg["encoder"] = {"kind": "x264", "preset": spec.preset, "threads": 1,
                          "encode_time": spec.encode_time}  # fmt: skip
    try:
        cfg = config.resolve(cfg)
    except SluiceError as e:
        what = f"scheme {spec.scheme}" if spec.scheme_config is not None else "run config"
        msg = str(e).removeprefix("invalid run config: ")
        raise SluiceError(f"invalid {what}: {msg}") from None
    return config.apply_overrides(cfg, spec.overrides)


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


def _fold(message: str, said: str) -> str:
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


def resolve_encoder(spec: RunSpec) -> str:
    """The encoder a run uses: ``--encoder`` if given, else the scheme's own if it names one
    (the ACE schemes and webrtc-x264 are defined on x264), else x264 for a video and the model
    encoder otherwise. The model encoder answers ACE-C's complexity levels too."""
    pinned = None
    if spec.scheme_config is None:
        info = config.scheme_info(spec.scheme)
        if info is None:
            config.scheme_config(spec.scheme)  # raises: unknown scheme
        pinned = info["encoder"] if info else None
    if spec.encoder is not None and spec.encoder not in ENCODERS:
        raise SluiceError(f"encoder must be one of {', '.join(ENCODERS)}, got {spec.encoder!r}")
    chosen = spec.encoder or pinned or ("x264" if spec.video else "model")
    if chosen == "x264" and not spec.video:
        hint = " or --encoder model" if pinned else ""
        raise SluiceError(f"the x264 encoder needs a video: add --video CLIP{hint} ({spec.scheme})")
    if chosen == "x264" and spec.preset not in X264_PRESETS:
        raise SluiceError(f"unknown x264 preset {spec.preset!r} (known: {', '.join(X264_PRESETS)})")
    return chosen


def _advance(sim: Any, spec: RunSpec, duration_s: float) -> tuple[str, str, str, str]:
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


def load_traces(spec: RunSpec, cfg: dict[str, Any]) -> tuple[Any, Any]:
    """(downlink, uplink) :class:`~sluice.traces.LoadedTrace` or None, generated traces long
    enough for the config's duration plus drain."""
    total_s = float(cfg["duration_s"]) + float(cfg["drain_s"])
    down = load_trace(spec.trace, duration_s=total_s, fmt=spec.trace_format) if spec.trace else None
    up = (
        load_trace(spec.uplink_trace, duration_s=total_s, fmt=spec.trace_format)
        if spec.uplink_trace
        else None
    )
    return down, up


def validate_config(cfg: dict[str, Any]) -> None:
    """What a run refuses of a config with its overrides applied: the core's checks (fields,
    ranges, components) and an x264 preset that libx264 does not know. ``sluice config``
    refuses the same. Raises :class:`SluiceError`."""
    config.resolve(cfg, validate=True)
    enc = cfg.get("encoder") or {}
    if enc.get("kind") == "x264" and enc.get("preset") not in X264_PRESETS:
        raise SluiceError(f"encoder.preset: unknown x264 preset {enc.get('preset')!r} "
                          f"(known: {', '.join(X264_PRESETS)})")  # fmt: skip


def check(spec: RunSpec) -> dict[str, Any]:
    """Checks what can be checked before running (scheme, encoder, overrides, ranges);
    returns :meth:`RunSpec.config`. Raises :class:`SluiceError`."""
    if spec.quality not in quality.MODES:
        raise SluiceError(f"quality must be one of {', '.join(quality.MODES)}")
    cfg = spec.config()
    validate_config(cfg)
    return cfg


@dataclass
class RunOutput:
    """What a run produced, before it is written (:meth:`write`): the header's fields (for
    :func:`sluice.results.make_header`, which adds the version and git SHA of the process
    that writes) and the records. ``files``: what the run wrote itself (x264's
    ``stream.264`` and its index, ``delivered.264``), by name in the run directory, each
    still under its temporary name until :meth:`write` moves it in. ``quality_error``: why
    quality scoring failed, if it did (the run is still written, then this is raised)."""

    run_dir: Path
    header: dict[str, Any]
    frames: list[dict[str, Any]]
    samples: list[dict[str, Any]]
    summary: dict[str, Any]
    quality: list[dict[str, Any]]
    skips: list[dict[str, Any]]
    files: dict[str, Path] = field(default_factory=dict)
    quality_error: str | None = None

    def write(self, run_dir: str | os.PathLike[str] | None = None) -> Path:
        """Writes the run into ``run_dir`` (default: the run's) as one result
        (:func:`sluice.results.write_run`: ``run.jsonl``, ``summary.json``, ``files``, the
        manifest). Raises :class:`SluiceError` after writing if quality scoring failed."""
        header = results.make_header(**self.header)
        if self.quality_error:  # said in the result too, so that a matrix runs it again
            self.summary = {**self.summary, results.QUALITY_ERROR_KEY: self.quality_error}
        try:
            out = results.write_run(
                run_dir or self.run_dir, header, self.frames, self.samples, self.summary,
                quality=self.quality, skips=self.skips, extra=self.files,
            )  # fmt: skip
        finally:
            self.discard()
        if self.quality_error:
            raise SluiceError(f"run written to {out} without quality scores: {self.quality_error}")
        return out

    def discard(self) -> None:
        """Removes the run's own files that were not moved into a result."""
        for tmp in self.files.values():
            tmp.unlink(missing_ok=True)


def run_one(spec: RunSpec) -> Path:
    """Runs ``spec`` and writes its results; returns the run directory."""
    return simulate(spec).write()


class Simulated:
    """The default session of :func:`simulate`: the deterministic simulator
    (``sluice._core.Simulation``), advanced in chunks (:func:`_advance`).

    A session is built with ``(core module, run config JSON, downlink trace, uplink trace,
    run directory)`` and has ``resolved_config_json()``, ``run(spec, duration_s)`` returning
    the (frames, skips, samples, summary) JSON of the finished run, ``files`` (files of its
    own for the result: name in the run directory -> where it is, under a temporary name)
    and ``interrupted`` (it stopped early on Ctrl-C and its records are partial: not
    scored). :mod:`sluice.live` has the live one."""

    interrupted = False

    def __init__(self, _core: Any, cfg_json: str, down: Any, up: Any, run_dir: Path) -> None:
        self.sim = _core.Simulation(cfg_json, down, up)
        self.files: dict[str, Path] = {}

    def resolved_config_json(self) -> str:
        return str(self.sim.resolved_config_json())

    def run(self, spec: RunSpec, duration_s: float) -> tuple[str, str, str, str]:
        return _advance(self.sim, spec, duration_s)


def simulate(spec: RunSpec, session: Callable[..., Any] = Simulated) -> RunOutput:
    """Runs ``spec`` without writing its results (:meth:`RunOutput.write` does).
    ``session``: what runs it (:class:`Simulated`, the default, or a live session)."""
    _core = core()
    if spec.quality not in quality.MODES:
        raise SluiceError(f"quality must be one of {', '.join(quality.MODES)}")
    encoder = resolve_encoder(spec)
    cfg = planned_config(spec, encoder)
    validate_config(cfg)  # ranges before traces are generated or read
    run_dir = results.check_result_dir(spec.resolved_out_dir())
    down, up = load_traces(spec, cfg)
    raw = None
    cfg["downlink"]["trace"] = down.name if down else None
    cfg["uplink"]["trace"] = up.name if up else None
    if encoder == "x264":
        assert spec.video is not None  # resolve_encoder checked it
        if cfg["encoder"]["kind"] != "x264":
            raise SluiceError(
                f"an override replaced the x264 encoder's config with a {cfg['encoder']['kind']} "
                "one: choose the encoder with --encoder (a plan's encoder = ...) instead"
            )
        fps = float(cfg["fps"]) if _overridden(spec, "fps") else None
        raw = video.prepare(spec.video, spec.cache_dir, width=spec.width, fps=fps)
        created = not run_dir.exists()
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise SluiceError(f"cannot create output directory {run_dir}: {e}") from None
        cfg["fps"] = raw.fps
        # The stream is written under a temporary name and becomes part of the result
        # only when the run is complete (results.write_run).
        stream_tmp = results.temp_path(run_dir.resolve() / results.STREAM_FILE)
        cfg["encoder"].update(
            video_path=os.path.abspath(raw.path),
            width=raw.width,
            height=raw.height,
            video_frames=raw.frames,
            bitstream_path=str(stream_tmp),
        )
    else:
        created, stream_tmp = False, None
    try:
        return _build_and_run(_core, spec, cfg, run_dir, raw, down, up, session)
    except BaseException:
        if stream_tmp is not None:  # the encoder's stream of a run that did not finish
            stream_tmp.unlink(missing_ok=True)
            Path(f"{stream_tmp}.idx").unlink(missing_ok=True)
        if created and run_dir.is_dir() and not any(run_dir.iterdir()):
            run_dir.rmdir()  # nothing of a failed run is left behind
        raise


def _build_and_run(_core: Any, spec: RunSpec, cfg: dict[str, Any], run_dir: Path, raw: Any,
                   down: Any, up: Any, session: Callable[..., Any]) -> RunOutput:  # fmt: skip
    # The overrides win over what the front end derived.
    cfg = config.apply_overrides(cfg, spec.overrides)
    # libx264 reports on fd 2 itself ("x264 [error]: ..."): that is folded into our one line.
    with captured_stderr() as said, core_errors():
        try:
            sim = session(_core, json.dumps(cfg), down.trace if down else None,
                          up.trace if up else None, run_dir)  # fmt: skip
        except ValueError as e:
            raise ValueError(_fold(str(e), said())) from None
        resolved = json.loads(sim.resolved_config_json())

    extra = dict(sim.files)
    if raw is not None:
        stream = Path(cfg["encoder"]["bitstream_path"])
        extra.update({results.STREAM_FILE: stream,
                      results.STREAM_INDEX_FILE: Path(f"{stream}.idx")})  # fmt: skip
        # Paths relative to the run directory: the same run written elsewhere is the same file.
        resolved["encoder"].update(
            bitstream_path=results.STREAM_FILE,
            video_path=os.path.relpath(os.path.abspath(raw.path), run_dir.resolve()),
        )
    try:
        return _finish_run(sim, spec, run_dir, raw, resolved, down, up, extra)
    except BaseException:
        for tmp in extra.values():  # the files of a run that did not finish
            tmp.unlink(missing_ok=True)
        raise


def _finish_run(sim: Any, spec: RunSpec, run_dir: Path, raw: Any, resolved: dict[str, Any],
                down: Any, up: Any, extra: dict[str, Path]) -> RunOutput:  # fmt: skip
    try:
        frames_json, skips_json, samples_json, summary_json = sim.run(
            spec, float(resolved["duration_s"])
        )
    except RuntimeError as e:  # the encoder failed mid-run (unreadable video, x264 error)
        raise SluiceError(f"run {spec.scheme} stopped: {e}") from None
    finally:
        extra.update(sim.files)  # what the session wrote while it ran
    frames = json.loads(frames_json)
    skips = json.loads(skips_json)
    summary = json.loads(summary_json)

    scores: list[dict[str, Any]] = []
    quality_error = None
    if raw is not None and spec.quality != "none" and not sim.interrupted:
        shown = quality.displayed_frames(frames)
        delivered = results.temp_path(run_dir / results.DELIVERED_FILE)
        extra[results.DELIVERED_FILE] = delivered
        try:
            quality.delivered_stream(extra[results.STREAM_FILE], [f for _, f in shown], delivered)
            slots = quality.slot_count(frames, skips)
            per_frame, qsummary = quality.score(raw, shown, slots, extra[results.STREAM_FILE],
                                                spec.quality)  # fmt: skip
        except SluiceError as e:  # the run is kept; what failed is said once it is written
            quality_error = str(e)
        else:
            scores = [
                {"slot": q.slot, "shown_frame": q.shown_frame, "vmaf": round(q.vmaf, 4),
                 "ssim": round(q.ssim, 6), "psnr": round(q.psnr, 4)}
                for q in per_frame
            ]  # fmt: skip
            summary.update(qsummary)
        if not delivered.is_file():
            extra.pop(results.DELIVERED_FILE)
        if not spec.keep_streams and quality_error is None:
            for name in (results.STREAM_FILE, results.STREAM_INDEX_FILE, results.DELIVERED_FILE):
                path = extra.pop(name, None)
                if path is not None:
                    Path(path).unlink(missing_ok=True)

    header = {
        "seed": resolved["seed"],
        "scheme": spec.scheme,
        "config": resolved,
        "trace": down.header() if down else None,
        "uplink_trace": up.header() if up else None,
    }
    return RunOutput(run_dir, header, frames, json.loads(samples_json), summary, scores, skips,
                     files=dict(extra), quality_error=quality_error)  # fmt: skip
