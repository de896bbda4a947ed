"""Live mode: a scheme over real UDP on loopback (crates/sluice-live).

``sluice live run`` starts the sender, the relay (the simulator's link code: the trace, the
queue, the delay, the loss, the scheme's bottleneck behaviour) and the receiver, each on its
own thread with its own UDP socket on 127.0.0.1, with RTP/RTCP on the wire, and writes the
same result files as a simulated run (``run.jsonl``, ``summary.json``; ``sluice plot`` draws
them, ``--quality`` scores them) plus ``live.json`` (the live counters: datagrams, malformed
input, injected faults, late wake-ups). Ctrl-C stops the run and still writes what it has.

``sluice live send``, ``live recv`` and ``live relay`` run the same endpoints one per process
(on one host or several), each writing its part into its ``--out``; ``live merge`` shifts the
parts onto the sender's clock and writes the files of ``live run`` (:mod:`sluice.live_procs`
has the details). Three terminals, receiver and relay first, then the merge::

    sluice live recv  --listen 127.0.0.1:5002 --peer 127.0.0.1:5001 --duration 10 \
        --out parts/recv
    sluice live relay --listen 127.0.0.1:5001 --sender 127.0.0.1:5000 \
        --receiver 127.0.0.1:5002 --trace gen:constant:12 --duration 10 --out parts/relay
    sluice live send  --listen 127.0.0.1:5000 --peer 127.0.0.1:5001 --duration 10 \
        --out parts/send
    sluice live merge --sender parts/send --relay parts/relay --receiver parts/recv \
        --out results/live-split
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import results
from .errors import SluiceError

if TYPE_CHECKING:  # the run stages (and what they import) load only when a run starts
    from .run import RunSpec

# Files of a live result: the live counters, and for x264 runs the H.264 stream the receiver
# reassembled from RTP (displayed frames only).
LIVE_FILE = results.LIVE_FILE
RECEIVED_STREAM = results.RECEIVED_FILE
# How often the front end wakes while a live run goes on (progress, Ctrl-C).
POLL_S = 0.2


@dataclass(frozen=True)
class LiveFaults:
    """Faults only the relay injects, as bytes. The path faults (duplication, reordering, a
    feedback blackout) are the run config's ``faults``: the simulator applies them too, so a
    live fault scenario replays in simulation (``sluice run`` with the same options)."""

    garbage: float = 0.0  # probability of a malformed datagram after each forwarded one
    spoof: float = 0.0  # probability of a spoofed datagram after each forwarded one

    def options(self) -> dict[str, Any]:
        return {"garbage": self.garbage, "spoof": self.spoof}


@dataclass(frozen=True)
class Restarts:
    """Endpoints of ``live run`` that restart with their state lost (seconds of the run)."""

    receiver_at_s: float | None = None  # the receiver restarts
    sender_at_s: float | None = None  # the sender restarts: a new stream

    def options(self) -> dict[str, Any]:
        return {"restart_receiver_at_s": self.receiver_at_s,
                "restart_sender_at_s": self.sender_at_s}  # fmt: skip


def with_default_out(spec: RunSpec) -> RunSpec:
    """``spec`` writing to ``results/live-<scheme>-<trace>-s<seed>`` unless it names a
    directory (so a live run does not overwrite the simulated run of the same setting)."""
    if spec.out_dir is not None:
        return spec
    sim = Path(spec.default_out_dir())
    return replace(spec, out_dir=str(sim.with_name("live-" + sim.name)))


def faults_from_args(args: argparse.Namespace) -> LiveFaults:
    """The relay's faults of the wire (``live run`` and ``live relay``)."""
    return LiveFaults(garbage=args.garbage, spoof=args.spoof)


def restarts_from_args(args: argparse.Namespace) -> Restarts:
    """The endpoint restarts of ``live run``."""
    for flag, at in (("--restart-receiver-at", args.restart_receiver_at),
                     ("--restart-sender-at", args.restart_sender_at)):  # fmt: skip
        if at is not None and not (math.isfinite(at) and at >= 0):
            raise SluiceError(f"{flag} must be >= 0 s, got {at}")
    return Restarts(receiver_at_s=args.restart_receiver_at, sender_at_s=args.restart_sender_at)


def _progress(run: Any, label: str) -> None:
    """Waits for the run (or a single endpoint, ``sluice live send/recv/relay``, whose clock
    starts with its peer's first datagram), with a progress bar on a terminal."""
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
            if not getattr(run, "started", True):
                bar.set_description_str(f"live {label} (waiting for the peer)")
                continue
            bar.set_description_str(f"live {label}")
            now = min(run.now_s, end)
            bar.update(now - done)
            done = now


#: The spoof counters a live run's summary carries (``live.json``'s ``spoofed``, summed
#: over the endpoints): datagrams from a peer's address that a real peer would not send,
#: counted and ignored.
SPOOF_KEYS = ("stream_packets", "nacked_never_sent", "plis_rate_limited")


def with_spoofed(summary_json: str, stats: dict[str, Any]) -> str:
    """The summary with the spoof counters of ``stats`` (``spoofed_<key>``)."""
    spoofed = stats.get("spoofed") or {}
    return json.dumps({**json.loads(summary_json),
                       **{f"spoofed_{k}": int(spoofed.get(k, 0)) for k in SPOOF_KEYS}})


def spoof_note(summary: dict[str, Any]) -> str | None:
    """One line saying what a live run's endpoints screened out, or None if nothing: the
    datagrams a real peer would not send (spoofed, or damaged by --garbage), and keyframe
    requests beyond one in 500 ms (a receiver that cannot decode repeats its own too)."""
    seen = {k: summary.get(f"spoofed_{k}", 0) for k in SPOOF_KEYS}
    if not any(seen.values()):
        return None
    return ("live: screened out, counted and ignored: "
            f"{seen['stream_packets']} packets claiming another stream, "
            f"{seen['nacked_never_sent']} NACKed numbers never sent, "
            f"{seen['plis_rate_limited']} keyframe requests beyond one in 500 ms (spoofed, "
            "damaged, or the receiver's own repeats)")  # fmt: skip


#: The transports of ``sluice live run``.
TRANSPORTS = ("rtp", "webrtc")


def with_srtp(summary_json: str, stats: dict[str, Any]) -> str:
    """The summary with the WebRTC transport's count of datagrams that failed SRTP
    authentication (``srtp_auth_failed``; only with ``--transport webrtc``)."""
    if stats.get("transport") != "webrtc":
        return summary_json
    return json.dumps({**json.loads(summary_json),
                       "srtp_auth_failed": int(stats.get("srtp_auth_failed", 0))})  # fmt: skip


def srtp_note(summary: dict[str, Any]) -> str | None:
    """One line saying how many datagrams failed SRTP authentication, or None."""
    n = summary.get("srtp_auth_failed", 0)
    if not n:
        return None
    return (f"live: {n} datagrams failed SRTP authentication (forged or damaged), "
            "counted and dropped")  # fmt: skip


SDP_FILE = "stream.sdp"


def sdp(port: int, address: str = "127.0.0.1") -> str:
    """An SDP description of the forwarded video (RFC 6184 H.264, packetization mode 1) for
    an RTP player: ``ffmpeg -protocol_whitelist file,udp,rtp -i stream.sdp``. ``address``
    without brackets; an IPv6 one is described as such (RFC 4566 ``IN IP6``)."""
    family = "IP6" if ":" in address else "IP4"
    return (
        "v=0\r\n"
        f"o=- 0 0 IN {family} {address}\r\n"
        "s=Sluice live\r\n"
        f"c=IN {family} {address}\r\n"
        "t=0 0\r\n"
        f"m=video {port} RTP/AVP 96\r\n"
        "a=rtpmap:96 H264/90000\r\n"
        "a=fmtp:96 packetization-mode=1\r\n"
    )


class LiveSession:
    """A :func:`sluice.run.simulate` session that runs the scheme live (``LiveRun`` of the
    extension: sender, relay and receiver on loopback UDP) instead of simulating it. Its own
    files for the result: ``live.json`` (the live counters), and for x264 runs
    ``received.264`` (what the receiver reassembled from RTP). With ``forward_rtp``,
    ``stream.sdp`` is written into the run directory as the run starts."""

    def __init__(self, _core: Any, cfg_json: str, down: Any, up: Any, run_dir: Path,
                 faults: LiveFaults, restarts: Restarts, bind: str,
                 forward_rtp: int | None, transport: str = "rtp") -> None:  # fmt: skip
        self.files: dict[str, Path] = {}
        self.interrupt: KeyboardInterrupt | None = None  # Ctrl-C, or SIGTERM (Terminated)
        self.options = {"bind": bind, "transport": transport, **faults.options(),
                        **restarts.options()}  # fmt: skip
        if json.loads(cfg_json)["encoder"]["kind"] == "x264":
            # The receiver writes the bytes of the frames it displayed, in display order.
            received = results.temp_path(run_dir.resolve() / RECEIVED_STREAM)
            self.files[RECEIVED_STREAM] = received
            self.options["received_stream"] = str(received)
        if forward_rtp is not None:
            self.options["forward_rtp"] = f"{bind}:{forward_rtp}"
        self.run_dir = run_dir
        self.live = _core.LiveRun(cfg_json, down, up, json.dumps(self.options))
        #: The result header's ``live``: how it ran, with what the run config does not hold.
        self.header_live = {"processes": "one", **{k: v for k, v in self.options.items()
                                                   if k not in ("received_stream", "bind")}}
        if forward_rtp is not None:
            # Under its own name as the run starts, for a player to open (so it is not one
            # of the result's files, which appear only when the run is written).
            (run_dir / SDP_FILE).write_text(sdp(forward_rtp, bind), encoding="utf-8")

    #: Ctrl-C while the finished session is scored keeps it, unscored
    #: (:func:`sluice.run.simulate`): the session cannot be run again.
    keep_on_interrupt = True

    @property
    def interrupted(self) -> bool:
        """The run stopped early (its records are partial; :func:`sluice.run.simulate`
        does not score them)."""
        return self.interrupt is not None

    def resolved_config_json(self) -> str:
        return str(self.live.resolved_config_json())

    def run(self, spec: RunSpec, duration_s: float) -> tuple[str, str, str, str]:
        try:
            _progress(self.live, spec.scheme)
        except KeyboardInterrupt as e:  # stop, and still write what the run has
            self.live.stop()
            self.interrupt = e
        frames, skips, samples, summary, stats_json = self.live.finish()
        if self.interrupted:
            # The records end at the stop; the summary's rates still count the planned
            # session (missing frames as stalls): say so in it.
            summary = json.dumps({**json.loads(summary), "interrupted": True})
        stats = json.loads(stats_json)
        summary = with_srtp(with_spoofed(summary, stats), stats)
        stats["mode"] = "live"
        stats["faults"] = {k: v for k, v in self.options.items()
                           if k not in ("received_stream", "forward_rtp")}  # fmt: skip
        stats["interrupted"] = self.interrupted
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tmp = results.temp_path(self.run_dir / LIVE_FILE)
        self.files[LIVE_FILE] = tmp
        tmp.write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
        if not self.files.get(RECEIVED_STREAM, tmp).is_file():
            self.files.pop(RECEIVED_STREAM, None)
        return frames, skips, samples, summary


def run_live(
    spec: RunSpec,
    faults: LiveFaults | None = None,
    bind: str = "127.0.0.1",
    forward_rtp: int | None = None,
    restarts: Restarts | None = None,
    transport: str = "rtp",
) -> Path:
    """Runs ``spec`` live on loopback and writes its results as one result (the simulated
    run's files, through the same :func:`sluice.run.simulate`, plus the live session's,
    :class:`LiveSession`); returns the run directory. ``forward_rtp``: a port on ``bind``
    that gets a copy of the received video RTP (an RTP player; ``stream.sdp`` in the run
    directory describes it). ``transport``: ``rtp`` or ``webrtc`` (DTLS-SRTP through str0m;
    ICE and DTLS are set up before the run's clock starts). Ctrl-C stops the run, writes
    what it has, then re-raises."""
    from .run import resolve_encoder, simulate

    faults = faults or LiveFaults()
    restarts = restarts or Restarts()
    if forward_rtp is not None:
        if not 1 <= forward_rtp <= 65535:
            raise SluiceError(f"--forward-rtp must be a port number, got {forward_rtp}")
        if resolve_encoder(spec) != "x264":
            raise SluiceError("--forward-rtp needs x264 (--video): the model encoder has no "
                              "bitstream to play")  # fmt: skip
    if (restarts.sender_at_s is not None and resolve_encoder(spec) == "x264"
            and spec.quality != "none"):  # fmt: skip
        raise SluiceError("--restart-sender-at with x264 needs --quality none: the restarted "
                          "encoder's frames are not in stream.264, so the run cannot be "
                          "scored")  # fmt: skip
    duration = float(spec.config()["duration_s"])
    for flag, at in (("--restart-receiver-at", restarts.receiver_at_s),
                     ("--restart-sender-at", restarts.sender_at_s)):  # fmt: skip
        if at is not None and at >= duration:
            raise SluiceError(f"{flag} {at:g} s is not within the run ({duration:g} s): it "
                              "would never happen")  # fmt: skip
    if transport not in TRANSPORTS:
        raise SluiceError(f"--transport must be one of {', '.join(TRANSPORTS)}, got {transport!r}")
    if transport == "webrtc" and restarts.sender_at_s is not None:
        raise SluiceError("--restart-sender-at is not supported with --transport webrtc (the "
                          "restarted sender's new SSRCs are not negotiated)")  # fmt: skip
    sessions: list[LiveSession] = []

    def session(_core: Any, cfg_json: str, down: Any, up: Any, run_dir: Path) -> LiveSession:
        sessions.append(LiveSession(_core, cfg_json, down, up, run_dir, faults, restarts, bind,
                                    forward_rtp, transport))  # fmt: skip
        return sessions[-1]

    output = simulate(spec, session)
    stopped = bool(sessions) and sessions[0].interrupted
    # Stopped while scoring: written unscored (its summary says why), then the stop goes on.
    out = output.write(raise_quality_error=not stopped)
    if stopped:
        what = ("the whole session, unscored: scoring was stopped" if output.quality_error
                else "the run until it was stopped")  # fmt: skip
        print(f"results ({what}): {out}", file=sys.stderr)
        raise sessions[0].interrupt  # Ctrl-C: exit 130; SIGTERM (Terminated): 143
    return out
