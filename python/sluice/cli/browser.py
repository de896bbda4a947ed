"""``sluice browser run``: Chromium -> Sluice's trace relay -> Chromium, or Sluice's sender or
receiver with Chromium at the other end (the sessions are :mod:`sluice.browser.harness`)."""

from __future__ import annotations

import argparse
from typing import Any

from . import options as o


def add_commands(sub: Any) -> None:
    """Adds ``browser run``."""
    from ..browser import harness

    p = sub.add_parser(
        "browser",
        help="real Chromium in the loop: Chromium sends to Chromium through the trace relay",
    )
    bsub = p.add_subparsers(dest="browser_command", metavar="MODE", required=True)
    r = bsub.add_parser(
        "run",
        help="one session of headless Chromium (WebRTC) through the trace relay; results as "
        "`run`, scheme chrome",
    )
    o.add_link(r)
    o.add_run(r, fps_default=f"{harness.DEFAULT_FPS:g}, Chromium's fake camera; with --scheme, "
                             "the video's")  # fmt: skip
    v = r.add_argument_group("video")
    v.add_argument(
        "--video", metavar="CLIP", default=None,
        help="the clip Chromium's fake camera plays (played back and forth; default: the "
        "shipped bbb-intro clip)",
    )  # fmt: skip
    v.add_argument(
        "--width", type=o.int_in(16, f"a width in pixels in [16, {o.MAX_SIDE}]", o.MAX_SIDE),
        default=None,
        metavar="W",
        help=f"capture width, aspect kept (default {harness.DEFAULT_WIDTH})",
    )  # fmt: skip
    v.add_argument(
        "--codec", choices=harness.CODECS, default=None,
        help="the codec the sender page asks for first (default vp8, Chromium's own)",
    )  # fmt: skip
    v.add_argument(
        "--max-bitrate-kbps", type=o.int_in(100, "max bitrate"), default=None, metavar="K",
        help="raise Chromium's cap on the video bitrate (x-google-max-bitrate and the "
        "encoding's maxBitrate; its default for one stream: 2500 at 720p, 1700 at 360p)",
    )  # fmt: skip
    v.add_argument(
        "--degradation", choices=[d for d in harness.DEGRADATIONS if d] + ["default"],
        default=None,
        help="the sender's degradationPreference: what Chromium gives up under limited "
        "bandwidth (default maintain-resolution, as Sluice's encoders; `default` leaves "
        "Chromium's own, which scales the resolution down)",
    )  # fmt: skip
    r.add_argument(
        "--scheme", default=None, metavar="NAME",
        help="Sluice's sender of this scheme sends (x264 on --video) to a Chromium receiver "
        "page over WebRTC, Chromium's transport-cc, NACK and PLI driving it; without it "
        "Chromium sends to Chromium",
    )  # fmt: skip
    r.add_argument(
        "--receiver", choices=("chromium", "sluice"), default="chromium",
        help="who receives: a Chromium receiver page (default) or Sluice's receiver (of the "
        "webrtc scheme) over WebRTC, Chromium's sender page sending H.264 to it",
    )  # fmt: skip
    r.add_argument("--out", metavar="DIR", help="default results/chrome-<codec>-<trace>-s<seed> "
                   "(with --scheme: results/browser-<scheme>-<trace>-s<seed>)")  # fmt: skip
    r.add_argument("--json", action="store_true", help="print only the summary JSON on stdout")
    r.add_argument(
        "--event-log", action="store_true",
        help="record both pages' RTC event logs (libwebrtc's: delay- and loss-based estimates, "
        "probes, ALR, every RTP packet and transport feedback) into the result "
        "(sender.rtceventlog, receiver.rtceventlog) and decode them (eventlog.jsonl; the "
        "congestion controller's events in eventlog.csv)",
    )  # fmt: skip
    r.add_argument(
        "--keep-work", action="store_true",
        help="keep the scratch directory (camera file, Chromium's output) and say where",
    )  # fmt: skip
    r.set_defaults(func=cmd_browser_run)


#: The run's settings of Sluice's sender besides its scheme's components (a
#: Chromium-to-Chromium session refuses both: :func:`sender_settings`).
SENDER_RUN_SETTINGS = ("encoder", "feedback_interval_ms", "max_payload_bytes",
                       "max_video_rate_bps")  # fmt: skip


def sender_settings() -> set[str]:
    """The top-level config keys only Sluice's sender uses: every component of a scheme (as
    the config defines them, so a new one is included) and :data:`SENDER_RUN_SETTINGS`."""
    from .. import config

    return {*config.scheme_config("webrtc"), *SENDER_RUN_SETTINGS}


def cmd_browser_run(args: argparse.Namespace) -> int:
    from ..browser import harness
    from ..errors import SluiceError

    if args.receiver == "sluice" and args.scheme is not None:
        raise SluiceError("--receiver sluice takes no --scheme: Chromium sends (for Sluice's "
                          "sender use --scheme S with the Chromium receiver)")  # fmt: skip
    if args.receiver == "sluice" or args.scheme is not None:
        # Options of a Chromium-to-Chromium session that these modes would not use.
        mode = "--receiver sluice" if args.receiver == "sluice" else "--scheme"
        unused = [flag for flag, given in (
            ("--event-log", args.event_log), ("--degradation", args.degradation is not None),
            ("--max-bitrate-kbps", args.scheme is not None and args.max_bitrate_kbps)) if given]
        if unused:
            raise SluiceError(f"{', '.join(unused)}: not taken with {mode}; only a session "
                              "of Chromium to Chromium (without either) uses "
                              f"{'it' if len(unused) == 1 else 'them'}")  # fmt: skip
    if args.receiver == "sluice":
        return _sluice_receiver(args)
    if args.scheme is not None:
        return _sluice_sender(args)
    # Chromium sends to Chromium: Sluice's sender's settings would be written into the
    # result's header and do nothing (Chromium's own GCC, pacer and encoder run).
    own = sender_settings()
    sender = [p for p, _ in o.overrides(args)
              if p.removeprefix("scheme.").split(".")[0] in own]  # fmt: skip
    if sender:
        raise SluiceError(f"--set {', '.join(sender)}: Chromium sends here (its own congestion "
                          "control, pacer and encoder), so Sluice's sender settings would do "
                          "nothing; the network's (downlink., uplink., duration_s, seed, ...) "
                          "apply, and --scheme S runs Sluice's sender")  # fmt: skip
    degradation = args.degradation or harness.DEFAULT_DEGRADATION
    # The relay's links only: drop-tail, as every WebRTC path.
    run_dir = harness.run(_spec(args, "webrtc"), codec=args.codec or "vp8",
                          keep_work=args.keep_work,
                          quiet=args.json, max_kbps=args.max_bitrate_kbps,
                          degradation="" if degradation == "default" else degradation,
                          event_log=args.event_log)  # fmt: skip
    o.print_summary("chrome", run_dir, args.json)
    return 0


def _spec(args: argparse.Namespace, scheme: str) -> Any:
    from ..run import RunSpec

    return RunSpec(
        scheme=scheme,
        overrides=o.overrides(args),
        trace=args.trace,
        uplink_trace=args.uplink_trace,
        trace_format=args.trace_format,
        out_dir=args.out,
        video=args.video,
        width=args.width,
    )


def _sluice_sender(args: argparse.Namespace) -> int:
    """``browser run --scheme S``: Sluice's sender to a Chromium receiver page."""
    from ..browser import harness
    from ..errors import SluiceError

    if args.codec not in (None, "h264"):
        raise SluiceError(f"--scheme takes no --codec {args.codec}: Sluice's sender sends "
                          "H.264 (x264)")  # fmt: skip
    o.check_schemes([args.scheme])
    harness.check_scheme(args.scheme)
    run_dir = harness.run_scheme(_spec(args, args.scheme), keep_work=args.keep_work,
                                 quiet=args.json)  # fmt: skip
    o.print_summary(f"{args.scheme} -> chrome", run_dir, args.json)
    return 0


def _sluice_receiver(args: argparse.Namespace) -> int:
    """``browser run --receiver sluice``: Chromium's sender page to Sluice's receiver."""
    from ..browser import harness
    from ..errors import SluiceError

    if args.codec not in (None, "h264"):
        raise SluiceError(f"--receiver sluice takes no --codec {args.codec}: Chromium sends "
                          "H.264 to it")  # fmt: skip
    # Sluice's receiver of the webrtc scheme; the relay's links.
    run_dir = harness.run_to_sluice(_spec(args, "webrtc"), keep_work=args.keep_work,
                                    quiet=args.json, max_kbps=args.max_bitrate_kbps)  # fmt: skip
    o.print_summary("chrome -> sluice", run_dir, args.json)
    return 0
