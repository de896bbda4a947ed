"""A browser run: Chromium sends to Chromium through Sluice's trace relay.

:func:`run` prepares the camera file, serves the pages (:mod:`.server`), starts the relay
once both peers' ports are known (``_core.LiveEndpoint("relay")``: the link code of the
simulator and ``sluice live relay``), starts two headless Chromium processes (:mod:`.chromium`),
lets the session run, stops the pages and collects what they recorded; :mod:`.records` turns
that into the result files of a simulator run (scheme ``chrome``).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SluiceError, core, core_errors
from ..traces import trace_stem
from ..video import RawVideo
from . import chromium
from .server import Signal, serve

#: How long the pages may take to connect through the relay.
CONNECT_TIMEOUT_S = 30.0
#: How long the pages may take to flush their last records after being told to stop.
FLUSH_TIMEOUT_S = 10.0
#: How long the pages keep their connections after the relay stopped, with event logs on:
#: Chromium writes the logs every 5 s and the last partial batch is lost at the close.
EVENT_LOG_FLUSH_S = 5.5


def write_y4m(video: RawVideo, path: Path) -> int:
    """Writes ``video`` as a y4m file played forwards then backwards (Chromium's fake camera
    loops its file; a plain loop would cut from the last frame to the first). Returns the
    number of frames written."""
    from .. import _core

    n = video.frames
    count = 2 * (n - 1) if n > 1 else 1
    num, den = video.fps.as_integer_ratio() if float(video.fps).is_integer() else (
        round(video.fps * 1000), 1000)  # fmt: skip
    header = f"YUV4MPEG2 W{video.width} H{video.height} F{num}:{den} Ip A1:1 C420jpeg\n"
    tmp = path.with_suffix(".part")
    with open(video.path, "rb") as src, open(tmp, "wb") as out:
        out.write(header.encode())
        for i in range(count):
            src.seek(_core.clip_frame(i, n) * video.frame_bytes)
            out.write(b"FRAME\n")
            out.write(src.read(video.frame_bytes))
    tmp.replace(path)
    return count


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Session:
    """What a browser run collected: the pages' records, the relay's part, timings."""

    logs: dict[str, dict[str, list[Any]]]
    relay_counters: dict[str, Any]
    relay_events: Path
    wall_origin_us: int
    errors: list[str] = field(default_factory=list)
    #: With ``event_log``: each page's RTC event logs (one a peer connection), in order.
    event_logs: dict[str, list[bytes]] = field(default_factory=dict)


def run_session(
    cfg: dict[str, Any],
    down: Any,
    up: Any,
    video: RawVideo,
    codec: str,
    work: Path,
    progress: Callable[[float], None] | None = None,
    max_kbps: int | None = None,
    degradation: str = "",
    event_log: bool = False,
) -> Session:
    """Runs one Chromium -> relay -> Chromium session for ``cfg["duration_s"]`` seconds of
    media (from the relay's first datagram), plus the drain."""
    duration = float(cfg["duration_s"]) + float(cfg["drain_s"])
    camera = work / "camera.y4m"
    write_y4m(video, camera)
    signal = Signal(token=secrets.token_urlsafe(16))
    server = serve(signal)
    port = server.server_address[1]
    query = (f"token={signal.token}&codec={codec}&width={video.width}&height={video.height}"
             f"&fps={video.fps:g}&max_kbps={max_kbps or 0}&degradation={degradation}")  # fmt: skip
    browsers: list[chromium.Browser] = []
    el_dirs = {role: event_log_dir(work, role) if event_log else None
               for role in ("sender", "receiver")}  # fmt: skip
    try:
        browsers.append(chromium.Browser(
            f"http://127.0.0.1:{port}/receiver.html?{query}", None, work / "receiver.log",
            el_dirs["receiver"]))  # fmt: skip
        browsers.append(chromium.Browser(
            f"http://127.0.0.1:{port}/sender.html?{query}", camera, work / "sender.log",
            el_dirs["sender"]))  # fmt: skip
        _await(signal, browsers, lambda: signal.peers_known.wait(0.1) or None,
               "the pages did not negotiate", work)
        # The relay lives in this thread (the endpoint object is not to be shared).
        ep, _ = start_relay(signal, cfg, down, up)
        # The session: the relay's clock starts at its first datagram (an ICE check, within
        # milliseconds); the pages run the duration and the drain from there.
        end = time.monotonic() + duration
        while time.monotonic() < end:
            time.sleep(0.2)
            if progress is not None:
                progress(min(1.0, 1.0 - (end - time.monotonic()) / duration))
            if signal.errors:
                raise SluiceError("browser run: " + signal.errors[0])
        if event_log:
            # Chromium writes a page's event log every 5 s and drops what is pending when
            # the peer connection closes: the relay stops here (its part ends as the run's),
            # the pages keep their connections open (nothing passes) past the next write.
            ep.stop()
            time.sleep(EVENT_LOG_FLUSH_S)
        signal.stop()
        for role in ("sender", "receiver"):
            signal.done[role].wait(FLUSH_TIMEOUT_S)
        ep.stop()
        events = work / "relay-events.json"
        with core_errors("relay: "):
            counters = json.loads(ep.finish(str(events)))
    finally:
        for b in browsers:
            b.stop()
        server.shutdown()
        server.server_close()
    with signal.lock:
        logs = json.loads(json.dumps(signal.logs))
        errors = list(signal.errors)
    # Chromium has closed them (it stopped): event_log_<date>_<time>_<renderer>_<pc>.log
    event_logs = {role: [p.read_bytes() for p in sorted(d.glob("*.log"), key=_log_order)]
                  for role, d in el_dirs.items() if d is not None}  # fmt: skip
    return Session(logs, counters, work / "relay-events.json", int(counters["wall_origin_us"]),
                   errors, event_logs)  # fmt: skip


def start_relay(signal: Any, cfg: dict[str, Any], down: Any, up: Any) -> tuple[Any, int]:
    """Starts the trace relay between the two peers ``signal`` knows, on a free port it is
    told of; returns the relay endpoint and its port."""
    sender_port, receiver_port = signal.peers
    port = free_udp_port()
    options = {
        "listen": f"127.0.0.1:{port}",
        "sender": f"127.0.0.1:{sender_port}",
        "receiver": f"127.0.0.1:{receiver_port}",
        "idle_timeout_s": 5.0,
        "start_timeout_s": CONNECT_TIMEOUT_S,
        "log_datagrams": True,
    }
    with core_errors("relay: "):
        ep = core().LiveEndpoint(
            "relay", json.dumps(cfg), json.dumps(options),
            down.trace if down else None, up.trace if up else None,
        )  # fmt: skip
    signal.relay_at(port)
    return ep, port


def event_log_dir(work: Path, role: str) -> Path:
    """The directory ``role``'s Chromium writes its RTC event logs into (made here: Chromium
    does not make it)."""
    d = work / f"eventlog-{role}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _log_order(p: Path) -> list[Any]:
    return [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in p.stem.split("_")]


def event_log_files(
    session: Session, run_dir: Path, end_us: int
) -> tuple[dict[str, Path], dict[str, Any]]:
    """Writes the pages' RTC event logs (``sender.rtceventlog``, ``receiver.rtceventlog``;
    ``sender-2.rtceventlog`` and so on for further peer connections) and their decoded
    records (:mod:`.eventlog`: ``eventlog.jsonl``, the congestion controller's in
    ``eventlog.csv``) to temporary paths in ``run_dir``; returns them (name -> path) and
    what the header says of them. The records end at ``end_us`` (the relay's end: after it
    the pages only waited for Chromium to write); a log that cannot be decoded is kept, with
    the reason."""
    from .. import results
    from . import eventlog

    files: dict[str, Path] = {}
    info: dict[str, Any] = {"switch": "--webrtc-event-logging", "files": {}, "errors": [],
                            "wall_origin_us": session.wall_origin_us, "end_us": end_us}  # fmt: skip
    recs: list[dict[str, Any]] = []
    for role in ("sender", "receiver"):
        for i, data in enumerate(session.event_logs.get(role) or []):
            peer = role if i == 0 else f"{role}-{i + 1}"
            name = f"{peer}.rtceventlog"
            tmp = results.temp_path(run_dir / name)
            tmp.write_bytes(data)
            files[name] = tmp
            info["files"][name] = {"bytes": len(data)}
            try:
                got = eventlog.records(data, session.wall_origin_us, peer)
            except SluiceError as e:
                info["errors"].append(f"{name}: {e}")
                continue
            info["files"][name]["events"] = len(got)
            times = [r["t_us"] for r in got if r["t_us"] is not None]
            info["files"][name]["last_us"] = max(times, default=None)
            recs += [r for r in got if r["t_us"] is None or r["t_us"] <= end_us]
    if not files:
        info["errors"].append("Chromium wrote no event log")
    recs.sort(key=lambda r: (r["t_us"] is None, r["t_us"] or 0))
    for name, write in ((eventlog.JSONL_FILE, eventlog.write_jsonl),
                        (eventlog.CSV_FILE, eventlog.write_csv)):  # fmt: skip
        tmp = results.temp_path(run_dir / name)
        write(recs, tmp)
        files[name] = tmp
    return files, info


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="sluice-browser-"))


#: Codecs the pages can ask Chromium for (RTCRtpSender.getCapabilities mime types).
CODECS = ("vp8", "vp9", "h264", "av1")
#: The clip a browser run uses without --video (shipped with the repository).
DEFAULT_CLIP = (Path(__file__).resolve().parents[3] / "data" / "videos"
                / "bbb-intro_1280x720_24fps_10s.mp4")  # fmt: skip
DEFAULT_WIDTH = 640
DEFAULT_FPS = 30.0
#: RTCRtpSendParameters.degradationPreference values the harness accepts ("" = Chromium's).
DEGRADATIONS = ("maintain-resolution", "maintain-framerate", "balanced", "")
DEFAULT_DEGRADATION = "maintain-resolution"


def chromium_version() -> str:
    import subprocess

    try:
        out = subprocess.run([chromium.executable(), "--version"], capture_output=True,
                             text=True, timeout=30)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = [ln for ln in out.stdout.splitlines() if "Chromium" in ln or "Chrome" in ln]
    return lines[-1].strip() if lines else (out.stdout.strip() or "unknown")


def _with_progress(desc: str, quiet: bool, keep_work: bool, work: Path,
                   session: Callable[[Callable[[float], None]], Any],
                   ) -> tuple[Any, dict[str, Any]]:  # fmt: skip
    """Runs ``session(progress)`` behind a progress bar (none when ``quiet``) and returns the
    session and its relay's events; the work directory goes unless ``keep_work``."""
    bar = None
    if not quiet and hasattr(sys.stderr, "isatty") and sys.stderr.isatty():  # not into a log
        from tqdm import tqdm

        bar = tqdm(total=100, desc=desc, leave=False, file=sys.stderr,
                   bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}]")  # fmt: skip

    def progress(x: float) -> None:
        if bar is not None:
            bar.n = round(100 * x)
            bar.refresh()

    try:
        s = session(progress)
        return s, json.loads(s.relay_events.read_text(encoding="utf-8"))
    finally:
        if bar is not None:
            bar.close()
        if not keep_work:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work directory kept (Chromium's logs, the SDP, the relay's events): {work}",
                  file=sys.stderr)  # fmt: skip


Capacity = Callable[[int, int], float]


def _await(signal: Any, browsers: list[Any], got: Callable[[], Any], failed: str,
           work: Path) -> Any:  # fmt: skip
    """Polls ``got()`` until it gives something, which it returns; a page's error, a
    Chromium that exited or :data:`CONNECT_TIMEOUT_S` ends the wait with one line
    (``failed``: what did not happen, said first)."""
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while (value := got()) is None:
        if signal.errors:
            raise SluiceError("browser run: " + signal.errors[0])
        dead = [b for b in browsers if not b.alive()]
        if dead:
            raise SluiceError(f"Chromium exited early (its output: {Path(dead[0].log.name).name} "
                              "in a run with --keep-work)")  # fmt: skip
        if time.monotonic() > deadline:
            raise SluiceError(f"{failed} within {CONNECT_TIMEOUT_S:.0f} s (Chromium's output: "
                              f"{work})")  # fmt: skip
    return value


def _camera_inputs(spec: Any) -> tuple[dict[str, Any], Any, Any, str, RawVideo]:
    """What a run with Chromium's camera needs (after checking Chromium is there): the
    config (model encoder on Sluice's side; the frame rate an override gives, else
    :data:`DEFAULT_FPS`), the traces, the clip and its frames at that rate."""
    from .. import config
    from ..run import load_traces, overridden, planned_config, prepare_clip

    chromium.executable()  # one clear line before anything else if it is missing
    cfg = planned_config(spec, "model")
    config.resolve(cfg, validate=True)
    cfg["fps"] = float(cfg["fps"]) if overridden(spec, "fps") else DEFAULT_FPS
    down, up = load_traces(spec, cfg)
    clip = clip_of(spec)
    return cfg, down, up, clip, prepare_clip(spec, cfg, clip, DEFAULT_WIDTH, cfg["fps"])


def _header(cfg: dict[str, Any], scheme: str, down: Any, up: Any) -> dict[str, Any]:
    """A browser run's result header (before its ``browser`` record)."""
    from .. import results

    return results.make_header(seed=cfg["seed"], scheme=scheme, config=cfg,
                               trace=down.header() if down else None,
                               uplink_trace=up.header() if up else None)  # fmt: skip


def clip_of(spec: Any) -> str:
    """``spec``'s clip, or the shipped one (:data:`DEFAULT_CLIP`, in a checkout's data/)."""
    if spec.video:
        return str(spec.video)
    if not DEFAULT_CLIP.is_file():
        raise SluiceError(f"give a clip with --video: the default one ({DEFAULT_CLIP.name}) "
                          "ships in the repository's data/videos, not with this "
                          "installation")  # fmt: skip
    return str(DEFAULT_CLIP)


def _link_on_clock(part: dict[str, Any], trace: Any, origin_us: int, end_us: int
                   ) -> tuple[list[dict[str, Any]], Capacity | None, int]:  # fmt: skip
    """The relay's link samples, the trace's capacity between two times (bit/s) and its
    bytes over the session ``[0, end_us)``, all on the clock whose origin is ``origin_us``
    (wall-clock µs): the relay's clock starts at its first datagram, not at the endpoint's
    start, and there is no link before it."""
    d = int(part.get("wall_origin_us") or origin_us) - origin_us
    link = [{**x, "t_us": int(x["t_us"]) + d} for x in part.get("link_samples") or []]
    if trace is None:
        return link, None, 0

    def capacity_bytes(t0: int, t1: int) -> int:
        a, b = max(0, t0 - d), max(0, t1 - d)
        return int(trace.capacity_bytes(a, b)) if b > a else 0

    def cap(t0: int, t1: int) -> float:
        return capacity_bytes(t0, t1) * 8 / max(1e-6, (t1 - t0) / 1e6)

    return link, cap, capacity_bytes(0, end_us)


def with_link(samples: list[dict[str, Any]], link: list[dict[str, Any]],
              capacity_bps: Capacity | None) -> list[dict[str, Any]]:  # fmt: skip
    """Sluice's sender's samples with the bottleneck's columns from the relay's ``link``
    samples on the same clock (:func:`_link_on_clock`): each takes the latest link sample at
    or before it, as ``live merge`` does; the delivered rate is the difference of delivered
    bytes since the previous sample, the capacity the trace's over the same interval."""
    out, i, last, prev = [], 0, {}, None
    for s in samples:
        t = int(s["t_us"])
        while i < len(link) and int(link[i]["t_us"]) <= t:
            last, i = link[i], i + 1
        delivered = int(last.get("delivered_bytes") or 0)
        joined = {**s, "queue_bytes": int(last.get("queue_bytes") or 0),
                  "queue_packets": int(last.get("queue_packets") or 0),
                  "queue_delay_us": int(last.get("queue_delay_us") or 0),
                  "lost_packets": int(last.get("dropped_packets") or 0)}  # fmt: skip
        if prev is not None and t > prev[0]:
            dt = (t - prev[0]) / 1e6
            joined["delivered_rate_bps"] = round((delivered - prev[1]) * 8 / dt)
            if capacity_bps is not None:
                joined["link_capacity_bps"] = round(capacity_bps(prev[0], t))
        out.append(joined)
        prev = (t, delivered)
    return out


def _relay_counters(part: dict[str, Any]) -> dict[str, Any]:
    return {k: part.get(k) for k in ("arrived_packets", "dropped_packets", "opaque",
                                     "delivered_bytes")}  # fmt: skip


def _write_browser_run(run_dir: Path, header: dict[str, Any], frames: list[Any],
                       samples: list[Any], summary: dict[str, Any], skips: list[Any],
                       part: dict[str, Any], pages: dict[str, Any],
                       more: dict[str, Path] | None = None) -> None:  # fmt: skip
    """Writes a browser run: the records, the relay's datagram log, the pages' logs and
    ``more`` files (name -> a temporary path, moved in by :func:`results.write_run`)."""
    from .. import results

    tmp_log = results.temp_path(run_dir / results.RELAY_LOG_FILE)
    tmp_browser = results.temp_path(run_dir / results.BROWSER_FILE)
    run_dir.mkdir(parents=True, exist_ok=True)
    extra = {results.RELAY_LOG_FILE: tmp_log, results.BROWSER_FILE: tmp_browser, **(more or {})}
    try:
        with open(tmp_log, "w", encoding="utf-8") as f:
            for d in part.get("datagrams") or []:
                f.write(json.dumps(d, separators=(",", ":")) + "\n")
        tmp_browser.write_text(json.dumps(pages, separators=(",", ":")), encoding="utf-8")
        results.write_run(run_dir, header, frames, samples, summary, skips=skips, extra=extra)
    finally:
        for tmp in (tmp_log, tmp_browser):
            tmp.unlink(missing_ok=True)


def run(spec: Any, codec: str = "vp8", keep_work: bool = False, quiet: bool = False,
        max_kbps: int | None = None, degradation: str = DEFAULT_DEGRADATION,
        event_log: bool = False) -> Path:  # fmt: skip
    """One browser run: Chromium sends ``spec``'s clip (default: the shipped one) to Chromium
    through the trace relay of ``spec``'s network; the result files of a simulated run, scheme
    ``chrome``, in ``spec``'s output directory. ``max_kbps`` raises Chromium's cap on the
    video's bitrate (its default for one stream: 2.5 Mbps at 720p, 1.7 Mbps at 360p).
    ``event_log``: both pages' RTC event logs and their decoded records in the result too
    (:func:`event_log_files`). Raises :class:`SluiceError`."""
    from . import records

    if codec not in CODECS:
        raise SluiceError(f"unknown codec {codec!r} (one of {', '.join(CODECS)})")
    if degradation not in DEGRADATIONS:
        raise SluiceError(f"unknown degradation preference {degradation!r}")
    cfg, down, up, clip, raw = _camera_inputs(spec)
    fps = raw.fps
    work = scratch_dir()
    session, part = _with_progress(
        f"chrome {codec}", quiet, keep_work, work,
        lambda p: run_session(cfg, down, up, raw, codec, work, p, max_kbps, degradation,
                              event_log),
    )  # fmt: skip
    duration = float(cfg["duration_s"])
    origin = session.wall_origin_us
    end_us = round(duration * 1e6)
    frames, skips = records.frames_and_skips(
        session.logs["receiver"]["frames"], origin, fps, end_us)  # fmt: skip
    if not frames:
        raise SluiceError("the receiver page displayed no frame (see the sender's and the "
                          "receiver's events in a run with --keep-work)")  # fmt: skip
    records.add_relay_trains(frames, part.get("datagrams") or [],
                             int(part.get("wall_origin_us") or origin) - origin)  # fmt: skip
    trace = down.trace if down else None
    link, cap, capacity = _link_on_clock(part, trace, origin, end_us)  # origin: the relay's
    samples = records.samples(session.logs["sender"]["stats"], session.logs["receiver"]["stats"],
                              link, origin, cap, end_us)  # fmt: skip
    summary = records.summary(frames, skips, samples, part, capacity,
                              session.logs["sender"]["stats"], session.logs["receiver"]["stats"],
                              origin, duration, float(cfg["drain_s"]))  # fmt: skip
    run_dir = Path(spec.out_dir or os.path.join(
        "results", f"chrome-{codec}-{trace_stem(spec.trace)}-s{cfg['seed']}"))  # fmt: skip
    header = _header(cfg, "chrome", down, up)
    header["browser"] = {
        "chromium": chromium_version(), "codec": codec, "width": raw.width,
        "height": raw.height, "fps": fps, "clip": str(clip), "max_kbps": max_kbps,
        "degradation": degradation or "default",
        "relay": _relay_counters(part),
        "errors": session.errors,
    }  # fmt: skip
    pages = {r: {"stats": session.logs[r]["stats"], "events": session.logs[r]["events"]}
             for r in ("sender", "receiver")}  # fmt: skip
    event_logs: dict[str, Path] = {}
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        if event_log:
            run_end_us = round((duration + float(cfg["drain_s"])) * 1e6)
            event_logs, header["browser"]["event_log"] = event_log_files(session, run_dir,
                                                                         run_end_us)  # fmt: skip
        _write_browser_run(run_dir, header, frames, samples, summary, skips, part, pages,
                           event_logs)  # fmt: skip
    finally:
        for tmp in event_logs.values():
            tmp.unlink(missing_ok=True)
    # An older result's event logs are not this one's.
    for p in [*run_dir.glob("*.rtceventlog"), run_dir / "eventlog.jsonl",
              run_dir / "eventlog.csv"]:  # fmt: skip
        if p.name not in event_logs:
            p.unlink(missing_ok=True)
    return run_dir


# --- Sluice's sender to a Chromium receiver (`browser run --scheme S`, issue 28) ------------

#: What a Chromium receiver needs of a Sluice sender: x264's H.264 (the model encoder's zero
#: payloads do not decode).
SCHEME_ENCODER = "x264"
#: The relay keeps going this long past the sender's end (its clock starts at the first ICE
#: check, before the sender's, which starts once DTLS is up).
RELAY_EXTRA_S = 3.0


@dataclass
class EndpointSession:
    """What a session between Sluice's endpoint and a Chromium page collected: the page's
    log (its stats and events), the relay's counters and events, what Sluice's endpoint
    (sender or receiver) recorded, and the pages' errors."""

    page_log: dict[str, list[Any]]
    relay_counters: dict[str, Any]
    relay_events: Path
    endpoint: dict[str, Any]
    errors: list[str] = field(default_factory=list)


def run_scheme_session(
    cfg: dict[str, Any], down: Any, up: Any, video: RawVideo, work: Path,
    progress: Callable[[float], None] | None = None,
) -> EndpointSession:  # fmt: skip
    """Runs one session: Sluice's sender of ``cfg`` (its WebRTC layer offers; str0m) sends
    to a Chromium receiver page through the trace relay for ``cfg["duration_s"]`` seconds of
    capture plus the drain, both counted from the sender's start (once ICE and DTLS are up)."""
    signal = Signal(token=secrets.token_urlsafe(16))
    server = serve(signal)
    port = server.server_address[1]
    query = (f"token={signal.token}&codec=h264&width={video.width}&height={video.height}"
             f"&fps={video.fps:g}&max_kbps=0&degradation=")  # fmt: skip
    browsers: list[chromium.Browser] = []
    sender = None
    try:
        with core_errors():
            sender = core().BrowserSender(json.dumps(cfg))
            offer = sender.offer()
        (work / "offer.sdp").write_text(offer, encoding="utf-8")  # for --keep-work
        signal.post("offer", {"sdp": offer})
        browsers.append(chromium.Browser(
            f"http://127.0.0.1:{port}/receiver.html?{query}", None, work / "receiver.log",
            None))  # fmt: skip
        _await(signal, browsers, lambda: signal.peers_known.wait(0.1) or None,
               "the receiver page did not answer", work)
        relay_cfg = {**cfg, "drain_s": float(cfg["drain_s"]) + RELAY_EXTRA_S}
        ep, relay_port = start_relay(signal, relay_cfg, down, up)
        answer = signal.get("answer")
        if answer is None:
            raise SluiceError("browser run: the receiver page's answer is missing")
        (work / "answer.sdp").write_text(answer["sdp"], encoding="utf-8")
        with core_errors("WebRTC: "):
            sender.start(answer["sdp"], relay_port, CONNECT_TIMEOUT_S)
        counters, result = _drive_to_end(sender, ep, signal, "receiver", cfg, progress, work)
    finally:
        _close(sender, browsers, server)
    log, errors = _page_log(signal, "receiver")
    return EndpointSession(log, counters, work / "relay-events.json", result, errors)


def sluice_frames(shown: list[dict[str, Any]], sender: dict[str, Any]) -> list[dict[str, Any]]:
    """The page's displayed frames with their capture times from Sluice's RTP timestamps
    (the sender's capture clock, 90 kHz from its origin: no abs-capture-time needed)."""
    from .records import RTP_CLOCK_HZ, _unwrap

    shown = [f for f in shown if isinstance(f.get("rtp_timestamp"), int)]
    rtp = _unwrap([int(f["rtp_timestamp"]) for f in shown])
    origin_ms = int(sender["wall_origin_us"]) / 1000
    return [{**f, "capture_ms": origin_ms + r * 1000 / RTP_CLOCK_HZ} for f, r in zip(shown, rtp)]


def _encoded_by_rtp(sender: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Sluice's encoded frames by their RTP timestamp (as the wire carries it)."""
    out = {}
    for e in sender["events"]:
        if e.get("event") == "FrameEncoded":
            out[(int(e["capture_time"]) * 9 // 100) % (1 << 32)] = e
    return out


def check_scheme(name: str, scheme: dict[str, Any] | None = None) -> None:
    """Refuses a scheme whose bottleneck reports to the sender (Co-RTV): a relay cannot
    write SRTCP."""
    from .. import config

    scheme = scheme if scheme is not None else config.scheme_config(name)
    if (scheme.get("bottleneck") or {}).get("kind", "drop-tail") != "drop-tail":
        raise SluiceError(f"scheme {name} needs the bottleneck's reports, which a relay "
                          "cannot send over WebRTC (DTLS-SRTP)")  # fmt: skip


def run_scheme(spec: Any, keep_work: bool = False, quiet: bool = False) -> Path:
    """One browser run with Sluice's sender: ``spec``'s scheme (x264 on ``spec``'s clip,
    default the shipped one) sends to a Chromium receiver page through the trace relay over
    WebRTC (str0m); Chromium's transport-cc feedback, NACKs and PLIs drive the scheme. The
    result files of a simulated run, scheme ``spec.scheme``; frames are those the page
    displayed. Raises :class:`SluiceError`."""
    from .. import config
    from ..run import load_traces, planned_config, prepare_clip, with_clip
    from . import records

    chromium.executable()
    cfg = planned_config(spec, SCHEME_ENCODER)
    config.resolve(cfg, validate=True)
    check_scheme(spec.scheme, cfg["scheme"])
    down, up = load_traces(spec, cfg)
    clip = clip_of(spec)
    raw = prepare_clip(spec, cfg, clip, DEFAULT_WIDTH)
    cfg = with_clip(spec, cfg, raw, None)  # the page decodes the stream: none is written
    work = scratch_dir()
    session, part = _with_progress(
        f"{spec.scheme} -> chrome", quiet, keep_work, work,
        lambda p: run_scheme_session(cfg, down, up, raw, work, p),
    )  # fmt: skip
    duration, drain = float(cfg["duration_s"]), float(cfg["drain_s"])
    origin = int(session.endpoint["wall_origin_us"])
    end_us = round(duration * 1e6)
    shown = sluice_frames(session.page_log["frames"], session.endpoint)
    frames, skips = records.frames_and_skips(shown, origin, raw.fps, end_us)
    if not frames:
        raise SluiceError("the receiver page displayed no frame (see its events in a run with "
                          "--keep-work)")  # fmt: skip
    encoded = _encoded_by_rtp(session.endpoint)
    for fr in frames:
        e = encoded.get(fr["chrome_rtp_timestamp"])
        if e is not None:
            fr.update(size_bytes=int(e["size"]), qp=e.get("qp"), is_keyframe=e["is_keyframe"],
                      target_rate_bps=int(e["target_rate"]), packets=int(e["packet_count"]),
                      encode_start_us=int(e["encode_start"]),
                      encode_end_us=int(e["encode_end"]))  # fmt: skip
    trace = down.trace if down else None
    link, cap, capacity = _link_on_clock(part, trace, origin, end_us)
    samples = with_link(session.endpoint["samples"], link, cap)
    summary = records.summary(frames, skips, samples, part, capacity, [],
                              session.page_log["stats"], origin, duration, drain)  # fmt: skip
    webrtc = session.endpoint.get("webrtc") or {}
    summary["srtp_auth_failed"] = int(webrtc.get("srtp_auth_failed") or 0)
    run_dir = Path(spec.out_dir or os.path.join(
        "results", f"browser-{spec.scheme}-{trace_stem(spec.trace)}-s{cfg['seed']}"))  # fmt: skip
    header = _header(cfg, spec.scheme, down, up)
    header["browser"] = {
        "chromium": chromium_version(), "sender": "sluice", "receiver": "chromium",
        "codec": "h264", "width": raw.width, "height": raw.height, "fps": raw.fps,
        "clip": str(clip),
        "relay": _relay_counters(part),
        "sluice_sender": {
            **{k: session.endpoint.get(k) for k in ("webrtc", "spoofed", "feedback_messages",
                                                   "transmitted", "unsendable", "io")},
            "frames_encoded": len(encoded),
            "frames_skipped": sum(e.get("event") == "FrameSkipped"
                                  for e in session.endpoint["events"]),
        },
        "errors": session.errors,
    }  # fmt: skip
    pages = {"receiver": {"stats": session.page_log["stats"],
                              "events": session.page_log["events"]}}  # fmt: skip
    _write_browser_run(run_dir, header, frames, samples, summary, skips, part, pages)
    return run_dir


# --- Chromium's sender to Sluice's receiver (`browser run --receiver sluice`, issue 28) -----


def run_receiver_session(
    cfg: dict[str, Any], down: Any, up: Any, video: RawVideo, work: Path,
    progress: Callable[[float], None] | None = None, max_kbps: int | None = None,
) -> EndpointSession:  # fmt: skip
    """Runs one session: Chromium's sender page (H.264) sends to Sluice's receiver of
    ``cfg`` (its WebRTC layer answers, ICE-lite; str0m gives Chromium transport-cc feedback
    and NACKs, the receiver's keyframe requests go out as PLI) through the trace relay, for
    the duration and the drain from the receiver's start (once ICE and DTLS are up)."""
    camera = work / "camera.y4m"
    write_y4m(video, camera)
    signal = Signal(token=secrets.token_urlsafe(16))
    server = serve(signal)
    port = server.server_address[1]
    query = (f"token={signal.token}&codec=h264&width={video.width}&height={video.height}"
             f"&fps={video.fps:g}&max_kbps={max_kbps or 0}"
             f"&degradation={DEFAULT_DEGRADATION}")  # fmt: skip
    browsers: list[chromium.Browser] = []
    receiver = None
    try:
        with core_errors():
            receiver = core().BrowserReceiver(json.dumps(cfg))
        browsers.append(chromium.Browser(
            f"http://127.0.0.1:{port}/sender.html?{query}", camera, work / "sender.log",
            None))  # fmt: skip
        offer = _await(signal, browsers, lambda: signal.get("offer") or time.sleep(0.05),
                       "the sender page did not offer", work)
        with signal.lock:
            raw_offer = signal.offer or ""
        (work / "offer.sdp").write_text(raw_offer, encoding="utf-8")  # for --keep-work
        with core_errors("WebRTC: "):
            answer = receiver.answer(offer["sdp"])
        (work / "answer.sdp").write_text(answer, encoding="utf-8")
        signal.post("answer", {"sdp": answer})
        relay_cfg = {**cfg, "drain_s": float(cfg["drain_s"]) + RELAY_EXTRA_S}
        ep, relay_port = start_relay(signal, relay_cfg, down, up)
        with core_errors("WebRTC: "):
            receiver.start(relay_port, CONNECT_TIMEOUT_S)
        counters, result = _drive_to_end(receiver, ep, signal, "sender", cfg, progress, work)
    finally:
        _close(receiver, browsers, server)
    log, errors = _page_log(signal, "sender")
    return EndpointSession(log, counters, work / "relay-events.json", result, errors)


def sluice_receiver_frames(receiver: dict[str, Any]) -> list[dict[str, Any]]:
    """The frames Sluice's receiver displayed, as the receiver page records them (times in
    ms since the Unix epoch): the RTP timestamp, the capture time where abs-capture-time
    gave one, the completion and display times from the receiver's events."""
    origin_ms = int(receiver["wall_origin_us"]) / 1000
    described = {int(f["frame_id"]): f for f in receiver["frames"]}
    completed: dict[int, float] = {}
    out = []
    for e in receiver["events"]:
        (kind, body), = e.items()
        if kind == "FrameCompleted":
            completed[int(body["frame_id"])] = origin_ms + int(body["time"]) / 1000
        elif kind == "FrameDisplayed":
            f = described.get(int(body["frame_id"]))
            if f is None:
                continue
            shown = origin_ms + int(body["time"]) / 1000
            cap = f.get("capture_us")
            out.append({"rtp_timestamp": int(f["rtp_timestamp"]),
                        "capture_ms": cap / 1000 if cap is not None else None,
                        "receive_ms": completed.get(int(body["frame_id"]), shown),
                        "expected_display_ms": shown})  # fmt: skip
    return out


def run_to_sluice(spec: Any, keep_work: bool = False, quiet: bool = False,
                  max_kbps: int | None = None) -> Path:  # fmt: skip
    """One browser run with Sluice's receiver: Chromium's sender page sends ``spec``'s clip
    (H.264) to Sluice's receiver of ``spec``'s scheme through the trace relay over WebRTC;
    the result files of a simulated run, scheme ``chrome``, receiver ``sluice``. Raises
    :class:`SluiceError`."""
    from . import records

    cfg, down, up, clip, raw = _camera_inputs(spec)
    fps = raw.fps
    work = scratch_dir()
    session, part = _with_progress(
        "chrome -> sluice", quiet, keep_work, work,
        lambda p: run_receiver_session(cfg, down, up, raw, work, p, max_kbps),
    )  # fmt: skip
    duration, drain = float(cfg["duration_s"]), float(cfg["drain_s"])
    origin = int(session.endpoint["wall_origin_us"])
    end_us = round(duration * 1e6)
    shown = sluice_receiver_frames(session.endpoint)
    frames, skips = records.frames_and_skips(shown, origin, fps, end_us)
    if not frames:
        raise SluiceError("Sluice's receiver displayed no frame (see the pages' events in a "
                          "run with --keep-work)")  # fmt: skip
    trace = down.trace if down else None
    link, cap, capacity = _link_on_clock(part, trace, origin, end_us)
    samples = records.samples(session.page_log["stats"], [], link, origin, cap,
                              end_us)  # fmt: skip
    summary = records.summary(frames, skips, samples, part, capacity, session.page_log["stats"],
                              [], origin, duration, drain)  # fmt: skip
    webrtc = session.endpoint.get("webrtc") or {}
    summary["srtp_auth_failed"] = int(webrtc.get("srtp_auth_failed") or 0)
    if summary.get("video_bitrate_bps") is None:  # no receiver page: what the relay delivered
        # in the session (its link sample at its end; not the drain's and teardown's bytes)
        upto = [x for x in part.get("link_samples") or [] if int(x["t_us"]) <= end_us]
        delivered = int(upto[-1].get("delivered_bytes") or 0) if upto else 0
        summary["video_bitrate_bps"] = delivered * 8 / duration
    run_dir = Path(spec.out_dir or os.path.join(
        "results", f"chrome-to-sluice-{trace_stem(spec.trace)}-s{cfg['seed']}"))  # fmt: skip
    header = _header(cfg, "chrome", down, up)
    header["browser"] = {
        "chromium": chromium_version(), "sender": "chromium", "receiver": "sluice",
        "codec": "h264", "width": raw.width, "height": raw.height, "fps": fps,
        "clip": str(clip), "max_kbps": max_kbps,
        "relay": _relay_counters(part),
        "sluice_receiver": {**{k: session.endpoint.get(k) for k in (
            "webrtc", "media_packets", "malformed", "io")},
            "frames_described": len(session.endpoint["frames"])},
        "errors": session.errors,
    }  # fmt: skip
    pages = {"sender": {"stats": session.page_log["stats"],
                            "events": session.page_log["events"]}}  # fmt: skip
    _write_browser_run(run_dir, header, frames, samples, summary, skips, part, pages)
    return run_dir


def _drive_to_end(endpoint: Any, ep: Any, signal: Any, page: str, cfg: dict[str, Any],
                  progress: Any, work: Path) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
    """Waits for Sluice's ``endpoint`` to end its session (reporting progress, failing on a page
    error), lets the Chromium ``page`` send its last log, stops the relay ``ep`` and returns
    (the relay's counters, the endpoint's result); the relay's events go to
    ``work/relay-events.json``."""
    end = float(cfg["duration_s"]) + float(cfg["drain_s"])
    while not endpoint.wait(0.2):
        if progress is not None:
            progress(min(1.0, endpoint.now_s / end))
        if signal.errors:
            raise SluiceError("browser run: " + signal.errors[0])
    signal.stop()
    signal.done[page].wait(FLUSH_TIMEOUT_S)
    ep.stop()
    with core_errors("relay: "):
        counters = json.loads(ep.finish(str(work / "relay-events.json")))
    with core_errors():
        result = json.loads(endpoint.finish())
    return counters, result


def _close(endpoint: Any, browsers: Sequence[Any], server: Any) -> None:
    """Stops Sluice's endpoint (if it started), the browsers and the signalling server."""
    if endpoint is not None:
        endpoint.stop()
    for b in browsers:
        b.stop()
    server.shutdown()
    server.server_close()


def _page_log(signal: Any, page: str) -> tuple[Any, list[str]]:
    """A copy of the Chromium ``page``'s log and the signalling errors so far."""
    with signal.lock:
        return json.loads(json.dumps(signal.logs[page])), list(signal.errors)
