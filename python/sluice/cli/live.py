"""``sluice live``: a scheme over real UDP, in one process (``live run``) or as sender, relay
and receiver processes (``live send``, ``recv``, ``relay``) whose parts ``live merge`` joins.

The runs themselves are :mod:`sluice.live` (one process) and :mod:`sluice.live_procs` (the
parts); this module is their command line.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from pathlib import Path
from typing import Any

from . import options as o

DEFAULT_LISTEN = {"sender": "127.0.0.1:5000", "relay": "127.0.0.1:5001",
                  "receiver": "127.0.0.1:5002"}  # fmt: skip
DEFAULT_IDLE_TIMEOUT_S = 5.0


def add_commands(sub: Any) -> None:
    """Adds ``live`` and its modes: ``run``, ``send``, ``recv``, ``relay`` and ``merge``."""
    from .. import live_procs as lp

    p = sub.add_parser("live", help="run a scheme live over UDP (RTP/RTCP): in one process on "
                       "loopback, or as sender, relay and receiver processes")  # fmt: skip
    lsub = p.add_subparsers(dest="live_command", metavar="MODE", required=True)

    lr = lsub.add_parser("run", help="sender, relay and receiver on loopback; results as `run`")
    o.add_scheme(lr)
    o.add_network(lr)
    o.add_sharing(lr)
    o.add_path_faults(lr)
    o.add_frame_drop(lr)
    lr.add_argument("--out", metavar="DIR", help="default results/live-<scheme>-<trace>-s<seed>")
    lr.add_argument("--json", action="store_true", help="print only the summary JSON on stdout")
    _add_live_run_options(lr)
    lr.set_defaults(func=cmd_live_run)

    # The endpoints alone: options a part does not use are fixed, so the shared spec builder
    # sees every field.
    none = {"trace": None, "uplink_trace": None, "trace_format": None, "delay_ms": None,
            "bn_delay_ms": None, "access_delay_ms": None, "queue_bytes": None,
            "queue_packets": None, "loss": None}  # fmt: skip
    novideo = {"video": None, "encoder": None, "width": None, "encode_time": None,
               "preset": None}  # fmt: skip

    p = lsub.add_parser("send", help="the sender alone: sends to --peer (a relay or a receiver)")
    o.add_scheme(p)
    o.add_run(p)
    o.add_video(p, quality=False)
    _add_endpoint(p, "sender", [("peer", "the relay's (or the receiver's) address")])
    p.set_defaults(func=lp.leave_nothing(lp.cmd_send), quality="none", **none)

    p = lsub.add_parser("recv", help="the receiver alone: hears only --peer (the relay or the "
                        "sender)")  # fmt: skip
    o.add_scheme(p)
    o.add_run(p)
    p.add_argument(
        "--encoder", choices=("x264", "model"), default=None,
        help="the sender's encoder (default: the scheme's, else model): with x264 the "
        "receiver writes the stream it reassembles (received.264)",
    )  # fmt: skip
    p.add_argument(
        "--forward-rtp", type=int, default=None, metavar="PORT",
        help="copy the received video RTP to this port on the --listen address's host (x264; "
        "writes stream.sdp for ffmpeg or another RTP player)",
    )  # fmt: skip
    _add_endpoint(p, "receiver", [("peer", "the relay's (or the sender's) address")])
    p.set_defaults(func=lp.leave_nothing(lp.cmd_recv), quality="none", **none,
                   **{k: v for k, v in novideo.items() if k != "encoder"})  # fmt: skip

    p = lsub.add_parser("relay", help="the relay alone: the link (trace, queue, delay, loss) "
                        "between --sender and --receiver")  # fmt: skip
    o.add_scheme(p)
    o.add_link(p)
    o.add_sharing(p)
    o.add_run(p)
    o.add_path_faults(p, "seconds of the relay's clock, which starts at the sender's first "
                      "datagram")
    _add_transport(p, "; the relay forwards either as bytes, and with webrtc refuses a scheme "
                      "whose bottleneck sends reports (it cannot write SRTCP)")
    _add_wire_faults(p.add_argument_group("faults of the wire"))
    _add_endpoint(p, "relay", [("sender", "the sender's address (only it is heard as sender)"),
                               ("receiver", "the receiver's address")])  # fmt: skip
    p.set_defaults(func=lp.leave_nothing(lp.cmd_relay), quality="none", **novideo)

    p = lsub.add_parser("merge", help="merge the parts of send, relay and recv into one result "
                        "(the files of `live run`)")  # fmt: skip
    p.add_argument("--sender", required=True, metavar="DIR", help="the sender's --out")
    p.add_argument("--relay", metavar="DIR",
                   help="the relay's --out (leave out if the sender sent to the receiver)")
    p.add_argument("--receiver", required=True, metavar="DIR", help="the receiver's --out")
    p.add_argument("--out", metavar="DIR",
                   help="default results/live-<scheme>-<trace>-s<seed>")  # fmt: skip
    p.add_argument(
        "--quality", choices=("none", "fast", "full"), default="fast",
        help="score VMAF/SSIM/PSNR (x264 runs; needs the sender's clip here; default fast)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print only the summary JSON on stdout")
    p.set_defaults(func=lp.cmd_merge)


# --- argument types -------------------------------------------------------------------------


def address(text: str) -> str:
    """``IP:PORT`` (``[IPv6]:PORT``), port 1..65535: the normalised string."""
    host, sep, port = text.rpartition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected IP:PORT, got {text!r}")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected IP:PORT (an IP address, not a name), "
                                         f"got {text!r}") from None  # fmt: skip
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port in 1..65535 in {text!r}")
    return f"[{ip}]:{int(port)}" if ip.version == 6 else f"{ip}:{int(port)}"


address.__name__ = "IP:PORT"

timeout = o.number("seconds", lambda v: 0 < v <= 86_400, "seconds in (0, 86400]")


# --- option groups --------------------------------------------------------------------------


def _add_wire_faults(g: Any) -> None:
    """The faults only the relay injects, as bytes (``live run`` and ``live relay``; the
    path faults, ``--duplicate`` and the rest, are :func:`options.add_path_faults`)."""
    g.add_argument(
        "--garbage", type=o.probability, default=0.0, metavar="P",
        help="after each datagram it forwards, the relay sends the same peer a malformed one "
        "with this probability",
    )  # fmt: skip
    g.add_argument(
        "--spoof", type=o.probability, default=0.0, metavar="P",
        help="after each datagram it forwards, the relay sends the same peer a spoofed one "
        "with this probability: to the receiver a video packet claiming another stream, to "
        "the sender a NACK of numbers never sent or a keyframe request (counted and ignored)",
    )  # fmt: skip


def _add_live_run_options(p: argparse.ArgumentParser) -> None:
    """The live-only options of ``sluice live run``."""
    g = p.add_argument_group("live")
    g.add_argument(
        "--bind", default="127.0.0.1", metavar="IP",
        help="address the endpoints listen on (default 127.0.0.1: loopback only)",
    )  # fmt: skip
    _add_wire_faults(g)
    _add_transport(g, "")
    g.add_argument(
        "--forward-rtp", type=int, default=None, metavar="PORT",
        help="copy the received video RTP to this port (x264 runs; writes stream.sdp for "
        "ffmpeg or another RTP player)",
    )  # fmt: skip
    g.add_argument(
        "--restart-receiver-at", type=float, default=None, metavar="S",
        help="restart the receiver (its state lost) at this time in seconds",
    )  # fmt: skip
    g.add_argument(
        "--restart-sender-at", type=float, default=None, metavar="S",
        help="restart the sender at this time in seconds: its state is lost and a fresh one "
        "(new encoder, congestion control, pacer, SSRCs) goes on with a keyframe",
    )  # fmt: skip


def _add_transport(g: Any, note: str) -> None:
    """``--transport`` (``live run``, ``send``, ``recv``, ``relay``), with what it means
    for this command in ``note``."""
    from ..live import TRANSPORTS

    g.add_argument(
        "--transport", choices=TRANSPORTS, default="rtp",
        help="how the sender and the receiver talk: rtp (plain RTP/RTCP, the default, which "
        "ffmpeg can play) or webrtc (ICE, DTLS-SRTP and SDP through str0m: every packet "
        "authenticated; the transport for anything beyond loopback)" + note,
    )  # fmt: skip


def _add_endpoint(p: argparse.ArgumentParser, role: str, peers: list[tuple[str, str]]) -> None:
    g = p.add_argument_group("endpoint")
    g.add_argument(
        "--listen", type=address, default=DEFAULT_LISTEN[role], metavar="IP:PORT",
        help=f"address this {role} listens and sends on (default {DEFAULT_LISTEN[role]}; "
        "0.0.0.0 only if you mean every interface)",
    )  # fmt: skip
    for flag, what in peers:
        g.add_argument(f"--{flag}", type=address, required=True, metavar="IP:PORT", help=what)
    if role == "sender":
        g.add_argument(
            "--idle-timeout-s", type=timeout, default=DEFAULT_IDLE_TIMEOUT_S, metavar="S",
            help="end once nothing came back from the peer for this long, counted from the "
            f"start (default {DEFAULT_IDLE_TIMEOUT_S:g}; a peer that never answers: exit 2)",
        )  # fmt: skip
        g.add_argument(
            "--start-timeout-s", type=timeout, default=None, metavar="S",
            help="with webrtc: give up (exit 2) if the peer's SDP answer did not come in this "
            "time, or the call did not connect (default 60)",
        )  # fmt: skip
    else:
        g.add_argument(
            "--idle-timeout-s", type=timeout, default=DEFAULT_IDLE_TIMEOUT_S, metavar="S",
            help="end once no datagram came for this long (default "
            f"{DEFAULT_IDLE_TIMEOUT_S:g}; the session otherwise ends its duration and drain "
            "after the first datagram)",
        )  # fmt: skip
        g.add_argument(
            "--start-timeout-s", type=timeout, default=None, metavar="S",
            help="give up (exit 2) if no datagram came from the peer in this time "
            "(default: wait until Ctrl-C)",
        )  # fmt: skip
    if role != "relay":
        mine, theirs = ("offer", "answer") if role == "sender" else ("answer", "offer")
        _add_transport(g, "; both ends alike, the relay forwards either")
        g.add_argument(
            "--sdp-out", metavar="FILE",
            help=f"with webrtc: where this {role} writes its SDP {mine} for the peer",
        )  # fmt: skip
        g.add_argument(
            "--sdp-in", metavar="FILE",
            help=f"with webrtc: the peer's SDP {theirs}, waited for (at most --start-timeout-s, "
            "else 60 s) and removed once read; carry the files between hosts over a channel "
            "you trust: their certificate fingerprints are what authenticates the peer",
        )  # fmt: skip
    p.add_argument("--out", metavar="DIR", default=f"results/live-{role}",
                   help=f"where this {role}'s part goes (default results/live-{role})")  # fmt: skip


# --- live run -------------------------------------------------------------------------------


def cmd_live_run(args: argparse.Namespace) -> int:
    from .. import live, results

    name, cfg = o.scheme_from_args(args)
    spec = live.with_default_out(o.spec_from_args(args, name, cfg, args.out))
    o.say_if_replacing(args.out, spec.resolved_out_dir())
    results.check_run_target(Path(spec.resolved_out_dir()))
    run_dir = live.run_live(spec, live.faults_from_args(args), bind=args.bind,
                            forward_rtp=args.forward_rtp, restarts=live.restarts_from_args(args),
                            transport=args.transport)  # fmt: skip
    summary = o.print_summary(name, run_dir, args.json)
    # The run's end lines say when spoofed or forged datagrams came.
    for note in (live.spoof_note(summary), live.srtp_note(summary)):
        if note:
            print(note, file=sys.stderr)
    return 0
