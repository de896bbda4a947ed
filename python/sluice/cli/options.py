"""The options and argument types the ``sluice`` commands share.

Every command group (:mod:`sluice.cli.run`, :mod:`~sluice.cli.tools`, :mod:`~sluice.cli.live`,
:mod:`~sluice.cli.browser`) builds its parsers from these groups, so a flag means the same
everywhere, and turns parsed arguments into a :class:`~sluice.run.RunSpec` here. This
module imports no command module.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from ..errors import SluiceError
from ..video import MAX_SIDE, X264_PRESETS

EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """argparse, but errors are one line: ``sluice: error: <message>``."""

    def error(self, message: str) -> NoReturn:
        cmd = self.prog.split(" ", 1)[1] if " " in self.prog else ""
        hint = f" (see: sluice {cmd + ' ' if cmd else ''}--help)"
        print(f"sluice: error: {message}{hint}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def command_line(args: argparse.Namespace) -> str:
    """The command as the user typed it (for provenance): ``sluice`` and the arguments
    :func:`sluice.cli.main` was given (not the interpreter's, when called in-process)."""
    import shlex

    return shlex.join(["sluice", *getattr(args, "argv", sys.argv[1:])])


# --- argument types ------------------------------------------------------------------------


def number(kind: str, cond: Any, what: str) -> Any:
    def parse(s: str) -> float:
        try:
            v = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {s!r}") from None
        if not math.isfinite(v) or not cond(v):
            raise argparse.ArgumentTypeError(f"expected {what}, got {s!r}")
        return v

    parse.__name__ = kind
    return parse


pos_float = number("positive number", lambda v: v > 0, "a positive number")
nonneg_float = number("non-negative number", lambda v: v >= 0, "a number >= 0")
probability = number("probability", lambda v: 0 <= v < 1, "a probability in [0, 1)")
# The limits of docs/cli.md ("Limits"), checked where the flag is read.
MAX_SESSION_S = 86_400
MAX_DELAY_MS = 60_000
duration = number(
    "duration", lambda v: 0 < v <= MAX_SESSION_S, f"seconds in (0, {MAX_SESSION_S}] (a day)"
)
delay = number("delay", lambda v: 0 <= v <= MAX_DELAY_MS, f"milliseconds in [0, {MAX_DELAY_MS}]")
fps = number("fps", lambda v: 0 < v <= 1000, "a frame rate in (0, 1000]")


def int_in(minimum: int, what: str, maximum: int | None = None) -> Any:
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            try:  # 1e5 is a whole number written as a float (as in config values)
                f = float(s)
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected {what}, got {s!r}") from None
            if not f.is_integer():
                raise argparse.ArgumentTypeError(
                    f"expected {what} (a whole number), got {s!r}") from None  # fmt: skip
            v = int(f)
        if v < minimum or (maximum is not None and v > maximum):
            raise argparse.ArgumentTypeError(f"expected {what}, got {s!r}")
        return v

    parse.__name__ = what
    return parse


pos_int = int_in(1, "a positive integer")
seed = int_in(0, "an integer in [0, 2**64 - 1]", 2**64 - 1)
jobs = int_in(1, "a number of jobs in [1, 1024]", 1024)
queue_bytes = int_in(1504, "bytes in [1504, 1000000000]", 1_000_000_000)
queue_packets = int_in(1, "packets in [1, 1000000]", 1_000_000)


def out_path(s: str) -> str:
    if not s.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty string")
    return s


out_path.__name__ = "path"


def assignment(s: str) -> tuple[str, Any]:
    from ..config import parse_assignment

    try:
        return parse_assignment(s)
    except SluiceError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


assignment.__name__ = "PATH=VALUE"


# --- parser ---------------------------------------------------------------------------------


def add_network(p: argparse.ArgumentParser) -> None:
    add_link(p)
    add_run(p)
    add_video(p)


def add_link(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("network")
    g.add_argument(
        "--trace", required=True, metavar="T",
        help="downlink capacity trace: a Mahimahi or 'time_s rate_mbps' file, or gen:SPEC "
        "(e.g. gen:constant:12, gen:steps:30@10,3@10, gen:alternating:10,2,15, "
        "gen:markov:20,2,5,1)",
    )  # fmt: skip
    g.add_argument("--uplink-trace", metavar="U", help="uplink (feedback) trace; default unlimited")
    g.add_argument("--trace-format", choices=("mahimahi", "rate"), help="override format detection")
    d = g.add_mutually_exclusive_group()
    d.add_argument(
        "--delay-ms", type=delay, default=None, metavar="D",
        help="one-way propagation delay in each direction (default 20)",
    )  # fmt: skip
    d.add_argument(
        "--bn-delay-ms", type=delay, default=None, metavar="D",
        help="one-way delay between the bottleneck and the receiver, each direction (Co-RTV "
        "§V-A: 5, an RTT of 10); the same setting as --delay-ms, named for the topology "
        "with --access-delay-ms",
    )  # fmt: skip
    g.add_argument(
        "--access-delay-ms", type=delay, default=None, metavar="D",
        help="one-way delay between the sender and the bottleneck, each direction: media "
        "before the queue, the bottleneck's reports and the receiver's feedback on the way "
        "back (Co-RTV §V-A: 20; default 0)",
    )  # fmt: skip
    q = g.add_mutually_exclusive_group()
    q.add_argument("--queue-bytes", type=queue_bytes, metavar="B", help="bottleneck queue, bytes")
    q.add_argument(
        "--queue-packets", type=queue_packets, metavar="N", help="bottleneck queue, packets"
    )
    g.add_argument(
        "--loss", type=probability, default=None, metavar="P", help="downlink random loss"
    )


def window(text: str) -> tuple[float, float]:
    """``START:END`` seconds, ``0 <= START < END``."""
    try:
        a, b = (float(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:END seconds, got {text!r}") from None
    if not (0.0 <= a < b and math.isfinite(b)):
        raise argparse.ArgumentTypeError(f"expected 0 <= START < END, got {text!r}")
    return a, b


window.__name__ = "START:END"


def competing(s: str) -> str:
    """A --competing spec in its canonical form (the media scheme must be registered)."""
    from ..config import scheme_names
    from ..errors import core

    try:
        spec = str(core().competing_spec(s))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"'{s}': {e}") from None
    if spec.startswith("media:"):
        scheme = spec.removeprefix("media:").split("@")[0]
        if scheme != "self" and scheme not in scheme_names():
            raise argparse.ArgumentTypeError(
                f"'{s}': unknown scheme '{scheme}' (known: {', '.join(scheme_names())})"
            )
    return spec


competing.__name__ = "competing flow"


def add_sharing(p: argparse.ArgumentParser) -> None:
    """--competing and --queue: what shares the bottleneck and its queue discipline."""
    g = p.add_argument_group("competing traffic")
    g.add_argument(
        "--competing", action="append", default=[], type=competing, metavar="SPEC",
        help="a flow sharing the bottleneck (repeatable): media:SCHEME[@START_S[-STOP_S]] "
        "(a media flow of any scheme; self: the session's own), "
        "reverse-media:SCHEME[@START_S[-STOP_S]] (one the other way, its media on the uplink "
        "with the session's feedback), tcp:newreno|cubic|bbr[@START_S[-STOP_S]] (a bulk flow) or "
        "short-tcp[@START_S] (RFC 8867's short flow: 30-50 KB downloads, 10 s mean idle) or "
        "audio[@START_S[-STOP_S]] (RFC 8867's 20 Kbps CBR audio; reverse-audio: over the uplink); "
        "the summary gains flows and jain_index",
    )  # fmt: skip
    g.add_argument(
        "--queue", choices=("droptail", "codel", "fq-codel"), default=None,
        help="the bottleneck's queue discipline (default droptail; CoDel: RFC 8289, "
        "FQ-CoDel: RFC 8290) at the --queue-bytes/--queue-packets limit",
    )  # fmt: skip
    g.add_argument(
        "--ecn", action="store_true", default=None,
        help="with --queue codel or fq-codel: mark ECN-capable packets CE instead of dropping "
        "them (the TCP cross traffic is ECN-capable; the media flows are not)",
    )  # fmt: skip


def add_path_faults(p: argparse.ArgumentParser, clock: str = "seconds of the run") -> None:
    """The path faults (the run config's ``faults``): the simulator's fault node and the live
    relay apply them alike, so a live fault scenario replays in simulation."""
    g = p.add_argument_group("path faults (simulated and live alike)")
    g.add_argument(
        "--duplicate", type=probability, default=None, metavar="P",
        help="a media datagram the bottleneck delivers arrives twice with this probability",
    )  # fmt: skip
    g.add_argument(
        "--reorder", type=probability, default=None, metavar="P",
        help="a media datagram the bottleneck delivers is held back by --reorder-ms with this "
        "probability (later ones overtake it)",
    )  # fmt: skip
    g.add_argument("--reorder-ms", type=delay, default=None, metavar="MS",
                   help="(default 5)")  # fmt: skip
    g.add_argument(
        "--feedback-blackout", type=window, default=None, metavar="START:END",
        help=f"all feedback (receiver to sender) is lost between these times ({clock})",
    )  # fmt: skip


def add_run(p: argparse.ArgumentParser,
            fps_default: str = "the video's, or 30 for the model encoder") -> None:  # fmt: skip
    r = p.add_argument_group("run")
    r.add_argument(
        "--duration", type=duration, default=None, metavar="S",
        help="capture duration in seconds (default 30; at most a day)",
    )  # fmt: skip
    r.add_argument("--seed", type=seed, default=None, metavar="N", help="random seed (default 1)")
    r.add_argument(
        "--fps", type=fps, default=None, metavar="F",
        help=f"frame rate (default: {fps_default})",
    )  # fmt: skip
    r.add_argument(
        "--set", action="append", default=[], metavar="PATH=VALUE", dest="overrides",
        type=assignment,
        help="set a run-config field by its full path, after the options above "
        "(repeatable): duration_s=10, feedback_interval_ms=20, downlink.queue_bytes=50000, "
        "pacer.threshold_packets=12.5, cc.pacing_factor=2, pacer={\"kind\":\"ace-n\"}; "
        "values are JSON, a bare word is a string; the traces' names and scheme_name come "
        "from --trace, --uplink-trace and --scheme (see: sluice config --paths)",
    )  # fmt: skip


def add_seeds_and_frame_drop(p: argparse.ArgumentParser) -> None:
    """--seeds (run and compare) and --frame-drop (every command that runs schemes)."""
    g = p.add_argument_group("repetitions and equal settings")
    g.add_argument(
        "--seeds", metavar="LIST", default=None,
        help="run every seed of LIST (1,2,3 or 1-5): tables give the mean and its 95 %% "
        "interval over them (instead of --seed)",
    )  # fmt: skip
    add_frame_drop(g)


def add_frame_drop(g: Any) -> None:
    g.add_argument(
        "--frame-drop", choices=("on", "off"), default=None,
        help="libwebrtc's frame dropping (frame dropper and congestion-window drops) on or "
        "off for every scheme alike (default: each scheme's own: on for webrtc, off for the "
        "papers' schemes)",
    )  # fmt: skip


def add_video(p: argparse.ArgumentParser, quality: bool = True) -> None:
    v = p.add_argument_group("video")
    v.add_argument(
        "--video", metavar="CLIP", default=None,
        help="encode this clip (any file ffmpeg reads) with x264; played forwards and backwards "
        "to the duration",
    )  # fmt: skip
    v.add_argument(
        "--encoder", choices=("x264", "model"), default=None,
        help="encoder (default: the scheme's own if it is defined on one, as ace, ace-n, ace-c "
        "and webrtc-x264 are on x264; else x264 with --video, else the model encoder)",
    )  # fmt: skip
    v.add_argument(
        "--width", type=int_in(16, f"a width in pixels in [16, {MAX_SIDE}]", MAX_SIDE),
        default=None,
        metavar="W",
        help="scale the video to this width (aspect kept)",
    )  # fmt: skip
    if quality:
        v.add_argument(
            "--quality", choices=("none", "fast", "full"), default=None,
            help="VMAF/SSIM/PSNR as the viewer saw it: fast scores every 5th frame (default fast)",
        )  # fmt: skip
    v.add_argument(
        "--encode-time", choices=("measured", "modeled"), default=None,
        help="charge x264's wall time (measured) or a deterministic model (modeled); "
        "default measured",
    )  # fmt: skip
    v.add_argument(
        "--preset", default=None, choices=X264_PRESETS, metavar="P",
        help=f"x264 preset: {', '.join(X264_PRESETS)} (default superfast)",
    )  # fmt: skip

def check_schemes(names: Sequence[str]) -> None:
    from ..config import scheme_names

    known = scheme_names()
    for n in names:
        if n not in known:
            raise SluiceError(f"unknown scheme '{n}' (known: {', '.join(known)})")


def say_if_replacing(out: str | None, default: str) -> None:
    """A run to its ``default`` directory (no ``--out``, so ``out`` is None: scheme, trace
    and seed name it, not the other settings) replaces the run there: said on stderr, so a
    run with other settings is not lost unnoticed."""
    from .. import results

    if out is None and results.is_run_dir(Path(default)):
        print(f"note: replacing the earlier run in {default} (give --out to keep both)",
              file=sys.stderr)  # fmt: skip


def after_run_notes(name: str, base: dict[str, Any] | None, cfg: dict[str, Any]) -> None:
    """The notes a finished run or compare prints for scheme ``name`` run with config
    ``cfg`` (``base``: the scheme's composition, None for a registered scheme's)."""
    note_unbounded_queue(cfg)
    note_changed_components(name, base, cfg)


def note_changed_components(name: str, base: dict[str, Any] | None, cfg: dict[str, Any]) -> None:
    """Says on stderr when overrides changed the kind of one of scheme ``name``'s components
    (``base``: its composition, None for a registered scheme's): the run still carries the
    scheme's name, which names other components."""
    from .. import config

    if base is None:
        info = config.scheme_info(name)
        base = info["config"] if info else None
    if not base:
        return
    changed = []
    for comp in config.SCHEME_COMPONENTS:  # those without a kind compare None with None
        was = (base.get(comp) or {}).get("kind")
        now = ((cfg.get("scheme") or {}).get(comp) or {}).get("kind")
        if was != now:
            changed.append(f"{comp} {was} -> {now}")
    if changed:
        print(f"note: the overrides changed {name}'s components ({'; '.join(changed)}) and the "
              f"results still say {name}: a scheme file (--scheme-file) names a composition "
              f"of its own", file=sys.stderr)  # fmt: skip


def note_unbounded_queue(cfg: dict[str, Any]) -> None:
    """A bulk TCP flow on a default unlimited drop-tail queue (the downlink's, or the second
    bottleneck's when it crosses that) fills it for the whole run (seconds of queue, which
    the video shares): said on stderr, with how to bound it."""
    flows = [f if isinstance(f, dict) else {"spec": f} for f in cfg.get("competing") or []]
    crosses = {f.get("crosses") or "first" for f in flows
               if str(f.get("spec")).startswith(("tcp:newreno", "tcp:cubic"))}  # fmt: skip
    down, second = cfg.get("downlink") or {}, cfg.get("second_bottleneck")
    down_open = (down.get("queue_bytes") is None and down.get("queue_packets") is None
                 and down.get("queue_discipline", "droptail") == "droptail")  # fmt: skip
    if down_open and crosses & {"first", "both"}:
        print("note: the downlink queue is unlimited: a loss-based TCP flow fills it without "
              "bound and the video waits behind it (give --queue-bytes, or --queue codel)",
              file=sys.stderr)  # fmt: skip
    if second is not None and second.get("queue_bytes") is None and crosses & {"second", "both"}:
        print("note: the second bottleneck's queue is unlimited: a loss-based TCP flow that "
              "crosses it fills it without bound and the video waits behind it (give "
              "--set second_bottleneck.queue_bytes=N)", file=sys.stderr)  # fmt: skip


def load_scheme_file(path: str) -> tuple[str, dict[str, Any]]:
    """``--scheme-file``: (the scheme's name, the file's stem; its resolved composition)."""
    from .. import config

    obj = config.read_scheme_file(path)[1]
    from ..experiments import name_problem

    name = Path(path).stem
    why = name_problem(name)
    if why:  # the scheme's name becomes a directory (compare's DIR/NAME)
        raise SluiceError(f"scheme file {path}: its name '{name}' (the file's stem, which "
                          f"names the scheme and its directory) {why}: rename the file")
    return name, obj


def overrides(args: argparse.Namespace) -> tuple[tuple[str, Any], ...]:
    """The network and run options as config overrides (only those given), then --set."""
    out: list[tuple[str, Any]] = []
    for d in (args.delay_ms, args.bn_delay_ms):
        if d is not None:
            out += [("downlink.delay_ms", d), ("uplink.delay_ms", d)]
    if args.access_delay_ms is not None:
        out.append(("downlink.access_delay_ms", args.access_delay_ms))
    if args.queue_bytes is not None:
        out.append(("downlink.queue_bytes", args.queue_bytes))
    if args.queue_packets is not None:
        out.append(("downlink.queue_packets", args.queue_packets))
    if args.loss is not None:
        out.append(("downlink.loss", args.loss))
    if getattr(args, "queue", None) is not None:
        out.append(("downlink.queue_discipline", args.queue))
    if getattr(args, "ecn", None):
        out.append(("downlink.ecn", True))
    # --competing adds to a `competing` list given with --set (after it), or is the list.
    sets = list(args.overrides)
    if flows := list(getattr(args, "competing", None) or ()):
        given = [i for i, (p, v) in enumerate(sets) if p == "competing" and isinstance(v, list)]
        if given:
            sets[given[-1]] = ("competing", [*sets[given[-1]][1], *flows])
        else:
            out.append(("competing", flows))
    reorder_set = any(p.endswith(("faults.reorder", "faults")) for p, _ in args.overrides)
    if (getattr(args, "reorder_ms", None) is not None and not getattr(args, "reorder", None)
            and not reorder_set):
        raise SluiceError("--reorder-ms is how long --reorder holds a datagram back: give "
                          "--reorder P too")  # fmt: skip
    for flag, path in (("duplicate", "faults.duplicate"), ("reorder", "faults.reorder"),
                       ("reorder_ms", "faults.reorder_delay_ms"),
                       ("feedback_blackout", "faults.feedback_blackout_s")):  # fmt: skip
        value = getattr(args, flag, None)
        if value is not None:
            out.append((path, list(value) if isinstance(value, tuple) else value))
    if args.duration is not None:
        out.append(("duration_s", args.duration))
    if args.seed is not None:
        out.append(("seed", args.seed))
    if args.fps is not None:
        out.append(("fps", args.fps))
    frame_drop = getattr(args, "frame_drop", None)
    if frame_drop is not None:
        on = frame_drop == "on"
        out.append(("frame_drop", {"frame_dropper": on, "cwnd_pushback": on}))
    return (*out, *sets)


def check_trace_format(fmt: str | None, *traces: str | None) -> None:
    """--trace-format is for trace files: refused when every trace given is generated."""
    from ..traces import is_generated

    given = [t for t in traces if t]
    if fmt is not None and given and all(is_generated(t) for t in given):
        raise SluiceError(f"--trace-format {fmt} is for trace files; {', '.join(given)} "
                          f"{'is' if len(given) == 1 else 'are'} generated")  # fmt: skip


#: (argument, flag) of the options that only an x264 run with a video uses (besides --video).
X264_OPTIONS = (("width", "--width"), ("quality", "--quality"),
                ("encode_time", "--encode-time"), ("preset", "--preset"))  # fmt: skip


def spec_from_args(args: argparse.Namespace, scheme: str, scheme_config: Any, out: str | None):
    from ..run import RunSpec, resolve_encoder

    spec = RunSpec(
        scheme=scheme,
        scheme_config=scheme_config,
        overrides=overrides(args),
        trace=args.trace,
        uplink_trace=args.uplink_trace,
        trace_format=args.trace_format,
        out_dir=out,
        video=args.video,
        encoder=args.encoder,
        width=args.width,
        quality=getattr(args, "quality", None) or "fast",
        encode_time=args.encode_time or "measured",
        preset=args.preset or "superfast",
    )
    check_trace_format(args.trace_format, args.trace, args.uplink_trace)
    # Options for x264's video, given for a run that has none, would do nothing.
    given = [flag for attr, flag in X264_OPTIONS
             if getattr(args, attr, None) not in (None, "none")]  # fmt: skip
    if (args.video is not None or given) and resolve_encoder(spec) != "x264":
        if args.video is not None:
            raise SluiceError("--video is encoded by x264 only: with --encoder model the clip "
                              "would not be used (leave one of them out)")  # fmt: skip
        what = ", ".join(given)
        raise SluiceError(f"{what} {'is' if len(given) == 1 else 'are'} for x264's video; "
                          f"{scheme} runs on the model encoder here, which has none (add "
                          f"--video CLIP without --encoder model, or leave {what} out)")
    return spec

def seeds(args: argparse.Namespace) -> list[int] | None:
    """--seeds as a list (None without it); with --seed too, one clear error."""
    from ..spread import parse_seeds

    if getattr(args, "seeds", None) is None:
        return None
    if args.seed is not None:
        raise SluiceError("give --seed or --seeds, not both")
    if any(path == "seed" for path, _ in overrides(args)):
        raise SluiceError("give the seeds with --seeds, not also --set seed (each run's seed "
                          "is one of --seeds)")  # fmt: skip
    return parse_seeds(args.seeds)


def add_scheme(p: argparse.ArgumentParser, help_file: str = "a custom composition") -> None:
    """``--scheme S`` or ``--scheme-file FILE.json`` (one of them)."""
    s = p.add_mutually_exclusive_group()
    s.add_argument("--scheme", default="webrtc", metavar="S", help="scheme (see: sluice schemes)")
    s.add_argument("--scheme-file", metavar="FILE.json", help=help_file)


def scheme_from_args(args: argparse.Namespace) -> tuple[str, dict[str, Any] | None]:
    """The scheme :func:`add_scheme` chose: its name, and its composition for a file."""
    if args.scheme_file:
        return load_scheme_file(args.scheme_file)
    check_schemes([args.scheme])
    return args.scheme, None


def print_summary(name: str, run_dir: Path, as_json: bool) -> dict[str, Any]:
    """A finished run's summary: as JSON (``--json``) or as the table, with where it is."""
    from .. import report, results

    summary = json.loads((Path(run_dir) / results.SUMMARY_FILE).read_text(encoding="utf-8"))
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        print(report.run_table(name, summary))
        print(f"\nresults: {run_dir}")
    return summary


def fail(message: str) -> int:
    """Says ``message`` as the one ``sluice: error:`` line; the exit status of a user error."""
    line = " ".join(message.split()) or "unknown error"
    print(f"sluice: error: {line}", file=sys.stderr)
    return EXIT_USAGE
