"""Live mode: a scheme over real UDP on loopback (crates/sluice-live).

``sluice live run`` starts the sender, the relay (the simulator's link code: the trace, the
queue, the delay, the loss, the scheme's bottleneck behaviour) and the receiver, each on its
own thread with its own UDP socket on 127.0.0.1, with RTP/RTCP on the wire, and writes the
same result files as a simulated run (``run.jsonl``, ``summary.json``; ``sluice plot`` draws
them, ``--quality`` scores them) plus ``live.json`` (the live counters: datagrams, malformed
input, injected faults, late wake-ups). Ctrl-C stops the run and still writes what it has.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import SluiceError, core, core_errors

if TYPE_CHECKING:  # the runner (and what it imports) loads only when a run starts
    from .runner import RunSpec

LIVE_FILE = "live.json"
# x264 runs: the H.264 stream the receiver reassembled from RTP, displayed frames only.
RECEIVED_STREAM = "received.264"
# How often the front end wakes while a live run goes on (progress, Ctrl-C).
POLL_S = 0.2


@dataclass(frozen=True)
class LiveFaults:
    """Faults the relay injects on top of the link model (whose random loss is ``--loss``)."""

    duplicate: float = 0.0  # probability a media datagram is delivered twice
    reorder: float = 0.0  # probability a media datagram is held back by reorder_delay_ms
    reorder_delay_ms: float = 5.0
    feedback_blackout_s: tuple[float, float] | None = None  # relay drops all feedback
    garbage: float = 0.0  # probability of a malformed datagram after each forwarded one
    restart_receiver_at_s: float | None = None  # the receiver restarts (state lost)

    def options(self, bind: str) -> dict[str, Any]:
        return {
            "bind": bind,
            "duplicate": self.duplicate,
            "reorder": self.reorder,
            "reorder_delay_ms": self.reorder_delay_ms,
            "feedback_blackout_s": list(self.feedback_blackout_s)
            if self.feedback_blackout_s
            else None,
            "garbage": self.garbage,
            "restart_receiver_at_s": self.restart_receiver_at_s,
        }


def with_default_out(spec: RunSpec) -> RunSpec:
    """``spec`` writing to ``results/live-<scheme>-<trace>-s<seed>`` unless it names a
    directory (so a live run does not overwrite the simulated run of the same setting)."""
    if spec.out_dir is not None:
        return spec
    sim = Path(spec.default_out_dir())
    return replace(spec, out_dir=str(sim.with_name("live-" + sim.name)))


def _probability(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= v < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return v


def _window(text: str) -> tuple[float, float]:
    try:
        a, b = (float(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:END seconds, got {text!r}") from None
    if not (0.0 <= a < b and math.isfinite(b)):
        raise argparse.ArgumentTypeError(f"expected 0 <= START < END, got {text!r}")
    return a, b


def add_live_options(p: argparse.ArgumentParser) -> None:
    """The live-only options of ``sluice live run``."""
    g = p.add_argument_group("live")
    g.add_argument(
        "--bind", default="127.0.0.1", metavar="IP",
        help="address the endpoints listen on (default 127.0.0.1: loopback only)",
    )  # fmt: skip
    g.add_argument(
        "--duplicate", type=_probability, default=0.0, metavar="P",
        help="the relay delivers a media datagram twice with this probability",
    )  # fmt: skip
    g.add_argument(
        "--reorder", type=_probability, default=0.0, metavar="P",
        help="the relay holds a media datagram back by --reorder-ms with this probability",
    )  # fmt: skip
    g.add_argument(
        "--reorder-ms", type=float, default=5.0, metavar="MS", help="(default 5)"
    )  # fmt: skip
    g.add_argument(
        "--feedback-blackout", type=_window, default=None, metavar="START:END",
        help="the relay drops all feedback between these times (seconds)",
    )  # fmt: skip
    g.add_argument(
        "--garbage", type=_probability, default=0.0, metavar="P",
        help="after each datagram it forwards, the relay sends the same peer a malformed one "
        "with this probability",
    )  # fmt: skip
    g.add_argument(
        "--forward-rtp", type=int, default=None, metavar="PORT",
        help="copy the received video RTP to this port (x264 runs; writes stream.sdp for "
        "ffmpeg or another RTP player)",
    )  # fmt: skip
    g.add_argument(
        "--restart-receiver-at", type=float, default=None, metavar="S",
        help="restart the receiver (its state lost) at this time in seconds",
    )  # fmt: skip


def faults_from_args(args: argparse.Namespace) -> LiveFaults:
    if not (math.isfinite(args.reorder_ms) and args.reorder_ms >= 0):
        raise SluiceError(f"--reorder-ms must be >= 0, got {args.reorder_ms}")
    at = args.restart_receiver_at
    if at is not None and not (math.isfinite(at) and at >= 0):
        raise SluiceError(f"--restart-receiver-at must be >= 0 s, got {at}")
    return LiveFaults(
        duplicate=args.duplicate,
        reorder=args.reorder,
        reorder_delay_ms=args.reorder_ms,
        feedback_blackout_s=args.feedback_blackout,
        garbage=args.garbage,
        restart_receiver_at_s=args.restart_receiver_at,
    )


def _progress(run: Any, label: str) -> None:
    """Waits for the run, with a progress bar on a terminal."""
    show = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    if not show:
        while not run.wait(POLL_S):
            pass
        return
    from tqdm import tqdm

    end = run.end_s
    with tqdm(total=round(end, 1), unit="s", desc=f"live {label}", leave=False,
              file=sys.stderr, bar_format="{desc}: {percentage:3.0f}%|{bar}| "
              "{n:.0f}/{total:.0f} s") as bar:  # fmt: skip
        done = 0.0
        while not run.wait(POLL_S):
            now = min(run.now_s, end)
            bar.update(now - done)
            done = now


SDP_FILE = "stream.sdp"


def sdp(port: int, address: str = "127.0.0.1") -> str:
    """An SDP description of the forwarded video (RFC 6184 H.264, packetization mode 1) for
    an RTP player: ``ffmpeg -protocol_whitelist file,udp,rtp -i stream.sdp``."""
    return (
        "v=0\r\n"
        f"o=- 0 0 IN IP4 {address}\r\n"
        "s=Sluice live\r\n"
        f"c=IN IP4 {address}\r\n"
        "t=0 0\r\n"
        f"m=video {port} RTP/AVP 96\r\n"
        "a=rtpmap:96 H264/90000\r\n"
        "a=fmtp:96 packetization-mode=1\r\n"
    )


def run_live(
    spec: RunSpec,
    faults: LiveFaults | None = None,
    bind: str = "127.0.0.1",
    forward_rtp: int | None = None,
) -> Path:
    """Runs ``spec`` live on loopback and writes its results; returns the run directory.
    ``forward_rtp``: a port on ``bind`` that gets a copy of the received video RTP (an
    RTP player; ``stream.sdp`` in the run directory describes it)."""
    from . import quality, results, video
    from .runner import load_traces, planned_config, resolve_encoder

    _core = core()
    faults = faults or LiveFaults()
    if spec.quality not in quality.MODES:
        raise SluiceError(f"quality must be one of {', '.join(quality.MODES)}")
    encoder = resolve_encoder(spec)
    if forward_rtp is not None:
        if not 1 <= forward_rtp <= 65535:
            raise SluiceError(f"--forward-rtp must be a port number, got {forward_rtp}")
        if encoder != "x264":
            raise SluiceError("--forward-rtp needs x264 (--video): the model encoder has no "
                              "bitstream to play")  # fmt: skip
    cfg = planned_config(spec, encoder)
    down, up = load_traces(spec, cfg)
    run_dir = Path(spec.resolved_out_dir())
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SluiceError(f"cannot create output directory {run_dir}: {e}") from None
    cfg["downlink"]["trace"] = down.name if down else None
    cfg["uplink"]["trace"] = up.name if up else None
    raw = None
    if encoder == "x264":
        assert spec.video is not None  # resolve_encoder checked it
        raw = video.prepare(spec.video, spec.cache_dir, width=spec.width, fps=None)
        cfg["fps"] = raw.fps
        cfg["encoder"].update(
            video_path=os.path.abspath(raw.path),
            width=raw.width,
            height=raw.height,
            video_frames=raw.frames,
            bitstream_path=str((run_dir / "stream.264").resolve()),
        )
    from . import config as config_mod

    cfg = config_mod.apply_overrides(cfg, spec.overrides)
    options = faults.options(bind)
    if forward_rtp is not None:
        options["forward_rtp"] = f"{bind}:{forward_rtp}"
        (run_dir / SDP_FILE).write_text(sdp(forward_rtp, bind), encoding="utf-8")
    if raw is not None:
        # The receiver writes the bytes of the frames it displayed, in display order.
        options["received_stream"] = str((run_dir / RECEIVED_STREAM).resolve())
    with core_errors():
        run = _core.LiveRun(
            json.dumps(cfg),
            down.trace if down else None,
            up.trace if up else None,
            json.dumps(options),
        )
        resolved = json.loads(run.resolved_config_json())
    interrupted = False
    try:
        _progress(run, spec.scheme)
    except KeyboardInterrupt:
        run.stop()
        interrupted = True
    try:
        frames_json, skips_json, samples_json, summary_json, stats_json = run.finish()
    except RuntimeError as e:  # the encoder failed mid-run
        raise SluiceError(f"live run {spec.scheme} stopped: {e}") from None
    frames = json.loads(frames_json)
    skips = json.loads(skips_json)
    summary = json.loads(summary_json)
    stats = json.loads(stats_json)

    scores: list[dict[str, Any]] = []
    if raw is not None and spec.quality != "none" and not interrupted:
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
        seed=resolved["seed"],
        scheme=spec.scheme,
        config=resolved,
        trace=down.header() if down else None,
        uplink_trace=up.header() if up else None,
    )
    out = results.write_run(
        run_dir, header, frames, json.loads(samples_json), summary, quality=scores, skips=skips
    )
    stats["mode"] = "live"
    stats["faults"] = faults.options(bind)
    (out / LIVE_FILE).write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    if interrupted:
        raise KeyboardInterrupt
    return out
