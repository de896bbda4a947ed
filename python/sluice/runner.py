"""Running simulations: one (:func:`run_one`) or many in parallel (:func:`run_many`)."""

from __future__ import annotations

import concurrent.futures as cf
import copy
import json
import multiprocessing
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import config, quality, results, video
from .errors import SluiceError, core, core_errors, one_line
from .traces import load_trace, trace_stem

ENCODERS = ("model", "x264")
ENCODE_TIME_MODES = ("measured", "modeled")

BACKENDS = ("process", "ray")
# Virtual seconds per run_until() step: the granularity of progress reporting.
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
    return chosen


def _advance(sim: Any, spec: RunSpec, duration_s: float) -> tuple[str, str, str, str]:
    """Runs the simulation to its end (with a progress bar on a terminal)."""
    end = sim.end_s
    if _show_progress(spec, duration_s):
        from tqdm import tqdm

        with tqdm(
            total=round(end, 3), unit="s", desc=spec.scheme, leave=False, file=sys.stderr,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} sim s [{elapsed}]",
        ) as bar:  # fmt: skip
            t = sim.now_s
            while t < end:
                nxt = min(t + CHUNK_S, end)
                sim.run_until(nxt)
                bar.update(nxt - t)
                t = nxt
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


def check(spec: RunSpec) -> dict[str, Any]:
    """Checks what can be checked before running (scheme, encoder, overrides, ranges);
    returns :meth:`RunSpec.config`. Raises :class:`SluiceError`."""
    if spec.quality not in quality.MODES:
        raise SluiceError(f"quality must be one of {', '.join(quality.MODES)}")
    cfg = spec.config()
    config.resolve(cfg, validate=True)
    return cfg


@dataclass
class RunOutput:
    """What a run produced, before it is written (:meth:`write`): the header's fields (for
    :func:`sluice.results.make_header`, which adds the version and git SHA of the process
    that writes) and the records. Files the run wrote itself (x264's ``stream.264``,
    ``delivered.264``) are in ``run_dir``."""

    run_dir: Path
    header: dict[str, Any]
    frames: list[dict[str, Any]]
    samples: list[dict[str, Any]]
    summary: dict[str, Any]
    quality: list[dict[str, Any]]
    skips: list[dict[str, Any]]

    def write(self, run_dir: str | os.PathLike[str] | None = None) -> Path:
        """Writes ``run.jsonl`` and ``summary.json`` into ``run_dir`` (default: the run's)."""
        header = results.make_header(**self.header)
        return results.write_run(run_dir or self.run_dir, header, self.frames, self.samples,
                                 self.summary, quality=self.quality, skips=self.skips)  # fmt: skip


def run_one(spec: RunSpec) -> Path:
    """Runs ``spec`` and writes its results; returns the run directory."""
    return simulate(spec).write()


def simulate(spec: RunSpec) -> RunOutput:
    """Runs ``spec`` without writing its results (:meth:`RunOutput.write` does)."""
    _core = core()
    if spec.quality not in quality.MODES:
        raise SluiceError(f"quality must be one of {', '.join(quality.MODES)}")
    encoder = resolve_encoder(spec)
    cfg = planned_config(spec, encoder)
    down, up = load_traces(spec, cfg)
    run_dir = Path(spec.resolved_out_dir())
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
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise SluiceError(f"cannot create output directory {run_dir}: {e}") from None
        cfg["fps"] = raw.fps
        cfg["encoder"].update(
            video_path=os.path.abspath(raw.path),
            width=raw.width,
            height=raw.height,
            video_frames=raw.frames,
            bitstream_path=str((run_dir / "stream.264").resolve()),
        )
    # The overrides win over what the front end derived.
    cfg = config.apply_overrides(cfg, spec.overrides)
    with core_errors():
        sim = _core.Simulation(json.dumps(cfg), down.trace if down else None,
                               up.trace if up else None)  # fmt: skip
        resolved = json.loads(sim.resolved_config_json())

    try:
        frames_json, skips_json, samples_json, summary_json = _advance(
            sim, spec, float(cfg["duration_s"])
        )
    except RuntimeError as e:  # the encoder failed mid-run (unreadable video, x264 error)
        raise SluiceError(f"run {spec.scheme} stopped: {e}") from None
    frames = json.loads(frames_json)
    skips = json.loads(skips_json)
    summary = json.loads(summary_json)

    scores: list[dict[str, Any]] = []
    if raw is not None and spec.quality != "none":
        shown = quality.displayed_frames(frames)
        stream = Path(cfg["encoder"]["bitstream_path"])
        delivered = quality.delivered_stream(
            stream, [f for _, f in shown], run_dir / "delivered.264"
        )
        slots = quality.slot_count(frames, skips)
        per_frame, qsummary = quality.score(raw, shown, slots, delivered, spec.quality)
        scores = [
            {"slot": q.slot, "shown_frame": q.shown_frame, "vmaf": round(q.vmaf, 4),
             "ssim": round(q.ssim, 6), "psnr": round(q.psnr, 4)}
            for q in per_frame
        ]  # fmt: skip
        summary.update(qsummary)

    header = {
        "seed": resolved["seed"],
        "scheme": spec.scheme,
        "config": resolved,
        "trace": down.header() if down else None,
        "uplink_trace": up.header() if up else None,
    }
    return RunOutput(run_dir, header, frames, json.loads(samples_json), summary, scores, skips)


@dataclass(frozen=True)
class RunFailure:
    """A run of :func:`run_many` (``keep_going=True``) that failed: a user-facing error
    (:class:`SluiceError`: a missing or unreadable input, an invalid setting), a bug in the
    run or a lost worker; ``message`` is one line (:func:`sluice.errors.one_line`)."""

    spec: RunSpec
    message: str


def _run_quiet(spec: RunSpec) -> str:
    return str(run_one(replace(spec, progress=False)))


def _run_caught(spec: RunSpec) -> tuple[bool, str]:
    """(True, run dir) or (False, the error as one line, :func:`sluice.errors.one_line`)."""
    try:
        return True, _run_quiet(spec)
    except Exception as e:  # noqa: BLE001 - one failed cell must not stop the others
        return False, one_line(e)


def run_many(
    specs: list[RunSpec],
    jobs: int | None = None,
    backend: str = "process",
    progress: bool = True,
    *,
    keep_going: bool = False,
    desc: str = "runs",
    address: str | None = None,
) -> list[Any]:
    """Runs ``specs`` in parallel; returns their run directories (``Path``) in the order
    given.

    ``backend="process"``: a local process pool of ``jobs`` workers (default: the CPU count).
    ``backend="ray"``: Ray tasks (:mod:`sluice.cluster`) on a local Ray or, with ``address``
    (or ``RAY_ADDRESS``), on a cluster; inputs travel with the tasks and this process writes
    the results, so no filesystem is shared. ``progress``: a bar over the runs (on a
    terminal only), labelled ``desc``. The first failure cancels what has not started and is
    raised, unless ``keep_going``: then a run that fails is a :class:`RunFailure` in the list
    (its cause on one line) and the others go on.
    """
    if backend not in BACKENDS:
        raise SluiceError(f"unknown backend {backend!r} (expected one of: {', '.join(BACKENDS)})")
    if jobs is not None and jobs < 1:
        raise SluiceError(f"--jobs must be at least 1, got {jobs}")
    if address and backend != "ray":
        raise SluiceError("--address is the Ray cluster's: add --backend ray")
    ray_jobs = jobs
    outs = [s.resolved_out_dir() for s in specs]
    if len(set(map(os.path.abspath, outs))) != len(outs):
        raise SluiceError("two runs would write to the same output directory")
    # Absolute paths: workers may not share our working directory.
    specs = [replace(s, out_dir=os.path.abspath(o), progress=False) for s, o in zip(specs, outs)]
    if not specs:
        return []
    jobs = min(jobs or os.cpu_count() or 1, len(specs))
    show = progress and len(specs) > 1 and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()

    from tqdm import tqdm

    bar = tqdm(total=len(specs), unit="run", desc=desc, disable=not show, file=sys.stderr)
    try:
        if backend == "ray":
            from . import cluster

            done = cluster.run_specs(specs, bar, keep_going, jobs=ray_jobs, address=address)
        elif jobs == 1:
            fn = _run_caught if keep_going else _run_quiet
            done = []
            for s in specs:
                done.append(fn(s))
                bar.update(1)
        else:
            done = _run_pool(specs, jobs, bar, keep_going)
    finally:
        bar.close()
    out: list[Any] = []
    for s, r in zip(specs, done):
        if isinstance(r, tuple):
            ok, text = r
            out.append(Path(text) if ok else RunFailure(s, text))
        else:
            out.append(Path(r))
    return out


def _run_pool(specs: list[RunSpec], jobs: int, bar: Any, keep_going: bool) -> list[Any]:
    # "spawn": no fork of a process that may hold threads (tqdm, BLAS, the extension).
    ctx = multiprocessing.get_context("spawn")
    fn = _run_caught if keep_going else _run_quiet
    out: list[Any] = [None] * len(specs)
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = {pool.submit(fn, s): i for i, s in enumerate(specs)}
        try:
            for fut in cf.as_completed(futures):
                out[futures[fut]] = fut.result()
                bar.update(1)
        except BaseException:
            for f in futures:
                f.cancel()
            raise
    return out
