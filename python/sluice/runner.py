"""Running simulations: one (:func:`run_one`) or many in parallel (:func:`run_many`)."""

from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import quality, results, video
from .errors import SluiceError, core
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
    """Everything one run needs. Picklable, so it can be shipped to worker processes."""

    scheme: str = "webrtc"
    trace: str | None = None  # file path, "gen:SPEC", or None for an unlimited link
    uplink_trace: str | None = None
    scheme_config: dict[str, Any] | None = None  # a custom composition (SchemeConfig JSON)
    trace_format: str | None = None  # None: detect
    delay_ms: float = 20.0  # one-way propagation delay, each direction
    queue_bytes: int | None = None  # downlink bottleneck queue limit
    queue_packets: int | None = None
    loss: float = 0.0  # downlink random loss probability
    duration_s: float = 30.0
    seed: int = 1
    fps: float | None = None  # None: the video's own rate, or the core default (30)
    out_dir: str | None = None  # None: default_out_dir()
    progress: bool = True
    video: str | None = None  # any clip ffmpeg reads; x264 is then the default encoder
    encoder: str | None = None  # "model" | "x264" | None (x264 with a video, else model)
    width: int | None = None  # scale the video to this width (height keeps the aspect)
    quality: str = "fast"  # none | fast | full (runs on real video only)
    encode_time: str = "measured"  # x264 encode time: measured wall time or modeled
    preset: str = "superfast"
    cache_dir: str = os.path.join("results", ".video-cache")

    def default_out_dir(self) -> str:
        stem = trace_stem(self.trace) if self.trace else "unlimited"
        return os.path.join("results", f"{self.scheme}-{stem}-s{self.seed}")

    def resolved_out_dir(self) -> str:
        return self.out_dir or self.default_out_dir()


def default_config() -> dict[str, Any]:
    return json.loads(core().default_config_json())


def build_config(spec: RunSpec, down_name: str | None, up_name: str | None) -> dict[str, Any]:
    """The RunConfig JSON object for ``spec`` (core defaults for everything not given)."""
    if spec.queue_bytes is not None and spec.queue_packets is not None:
        raise SluiceError("give a queue limit in bytes or in packets, not both")
    cfg = default_config()
    cfg["scheme_name"] = spec.scheme
    cfg["scheme"] = spec.scheme_config
    cfg["seed"] = spec.seed
    cfg["duration_s"] = float(spec.duration_s)
    if spec.fps is not None:
        cfg["fps"] = float(spec.fps)
    cfg["downlink"].update(
        trace=down_name,
        queue_bytes=spec.queue_bytes,
        queue_packets=spec.queue_packets,
        delay_ms=float(spec.delay_ms),
        loss=float(spec.loss),
    )
    cfg["uplink"].update(trace=up_name, delay_ms=float(spec.delay_ms))
    return cfg


def _show_progress(spec: RunSpec) -> bool:
    return (
        spec.progress
        and spec.duration_s >= PROGRESS_MIN_DURATION_S
        and hasattr(sys.stderr, "isatty")
        and sys.stderr.isatty()
    )


def resolve_encoder(spec: RunSpec) -> str:
    """The encoder a run uses: ``--encoder`` if given, else the scheme's own if it names one
    (the ACE schemes and webrtc-x264 are defined on x264), else x264 for a video and the model
    encoder otherwise. The model encoder answers ACE-C's complexity levels too."""
    pinned = None
    if spec.scheme_config is None:
        for entry in json.loads(core().schemes_json()):
            if entry["name"] == spec.scheme:
                pinned = entry.get("encoder")
    if spec.encoder is not None and spec.encoder not in ENCODERS:
        raise SluiceError(f"encoder must be one of {', '.join(ENCODERS)}, got {spec.encoder!r}")
    chosen = spec.encoder or pinned or ("x264" if spec.video else "model")
    if chosen == "x264" and not spec.video:
        hint = " or --encoder model" if pinned else ""
        raise SluiceError(f"the x264 encoder needs a video: add --video CLIP{hint} ({spec.scheme})")
    return chosen


def _x264_encoder_config(spec: RunSpec, raw: video.RawVideo, run_dir: Path) -> dict[str, Any]:
    if spec.encode_time not in ENCODE_TIME_MODES:
        raise SluiceError(f"encode time must be measured or modeled, got {spec.encode_time!r}")
    return {
        "kind": "x264",
        "video_path": os.path.abspath(raw.path),
        "width": raw.width,
        "height": raw.height,
        "video_frames": raw.frames,
        "preset": spec.preset,
        "threads": 1,
        "encode_time": spec.encode_time,
        "bitstream_path": str((run_dir / "stream.264").resolve()),
    }


def _advance(sim: Any, spec: RunSpec) -> tuple[str, str, str, str]:
    """Runs the simulation to its end (with a progress bar on a terminal)."""
    end = sim.end_s
    if _show_progress(spec):
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


def run_one(spec: RunSpec) -> Path:
    """Runs ``spec`` and writes its results; returns the run directory."""
    _core = core()
    if spec.quality not in quality.MODES:
        raise SluiceError(f"quality must be one of {', '.join(quality.MODES)}")
    encoder = resolve_encoder(spec)
    drain_s = float(default_config().get("drain_s", 2.0))
    total_s = float(spec.duration_s) + drain_s
    down = load_trace(spec.trace, duration_s=total_s, fmt=spec.trace_format) if spec.trace else None
    up = (
        load_trace(spec.uplink_trace, duration_s=total_s, fmt=spec.trace_format)
        if spec.uplink_trace
        else None
    )
    run_dir = Path(spec.resolved_out_dir())
    raw = None
    if encoder == "x264":
        assert spec.video is not None  # resolve_encoder checked it
        raw = video.prepare(spec.video, spec.cache_dir, width=spec.width, fps=spec.fps)
        spec = replace(spec, fps=raw.fps)
    cfg = build_config(spec, down.name if down else None, up.name if up else None)
    if raw is not None:
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise SluiceError(f"cannot create output directory {run_dir}: {e}") from None
        cfg["encoder"] = _x264_encoder_config(spec, raw, run_dir)
    sim = _core.Simulation(json.dumps(cfg), down.trace if down else None, up.trace if up else None)
    resolved = json.loads(sim.resolved_config_json())

    try:
        frames_json, skips_json, samples_json, summary_json = _advance(sim, spec)
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

    header = results.make_header(
        seed=spec.seed,
        scheme=spec.scheme,
        config=resolved,
        trace=down.header() if down else None,
        uplink_trace=up.header() if up else None,
    )
    return results.write_run(
        run_dir, header, frames, json.loads(samples_json), summary, quality=scores, skips=skips
    )


def _run_quiet(spec: RunSpec) -> str:
    return str(run_one(replace(spec, progress=False)))


def run_many(
    specs: list[RunSpec],
    jobs: int | None = None,
    backend: str = "process",
    progress: bool = True,
) -> list[Path]:
    """Runs ``specs`` in parallel; returns their run directories in the order given.

    ``backend="process"``: a local process pool of ``jobs`` workers (default: the CPU count).
    ``backend="ray"``: Ray tasks (``ray`` must be installed; output directories must be on a
    filesystem the workers share). The first failure cancels what has not started and is
    raised.
    """
    if backend not in BACKENDS:
        raise SluiceError(f"unknown backend {backend!r} (expected one of: {', '.join(BACKENDS)})")
    if jobs is not None and jobs < 1:
        raise SluiceError(f"--jobs must be at least 1, got {jobs}")
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

    bar = tqdm(total=len(specs), unit="run", desc="runs", disable=not show, file=sys.stderr)
    try:
        if backend == "ray":
            return _run_ray(specs, bar)
        if jobs == 1:
            done = []
            for s in specs:
                done.append(run_one(s))
                bar.update(1)
            return done
        return _run_pool(specs, jobs, bar)
    finally:
        bar.close()


def _run_pool(specs: list[RunSpec], jobs: int, bar: Any) -> list[Path]:
    # "spawn": no fork of a process that may hold threads (tqdm, BLAS, the extension).
    ctx = multiprocessing.get_context("spawn")
    out: list[Path | None] = [None] * len(specs)
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = {pool.submit(_run_quiet, s): i for i, s in enumerate(specs)}
        try:
            for fut in cf.as_completed(futures):
                out[futures[fut]] = Path(fut.result())
                bar.update(1)
        except BaseException:
            for f in futures:
                f.cancel()
            raise
    return [p for p in out if p is not None]


def _run_ray(specs: list[RunSpec], bar: Any) -> list[Path]:
    try:
        import ray
    except ImportError:
        raise SluiceError(
            "--backend ray needs the 'ray' package: pip install 'sluice[cluster]'"
        ) from None
    if not ray.is_initialized():
        ray.init(ignore_reinit_error=True, log_to_driver=False)
    task = ray.remote(num_cpus=1)(_run_quiet)
    refs = [task.remote(s) for s in specs]
    index = {ref: i for i, ref in enumerate(refs)}
    out: list[Path | None] = [None] * len(specs)
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                out[index[ref]] = Path(ray.get(ref))
                bar.update(1)
    except BaseException:
        for ref in pending:
            ray.cancel(ref)
        raise
    return [p for p in out if p is not None]
