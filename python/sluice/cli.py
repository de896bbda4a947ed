"""The ``sluice`` command line.

User mistakes (bad arguments, missing or malformed files, invalid configs and plans) are
reported as one ``sluice: error: ...`` line on stderr with exit status 2: they are
:class:`~sluice.errors.SluiceError` (the extension's rejections of user input are converted
where the input is handed to it). Anything else is a bug and shows its traceback. Set
``SLUICE_DEBUG=1`` to get the traceback of user errors too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from . import __version__
from .errors import SluiceError
from .video import X264_PRESETS

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line: ``sluice: error: <message>``."""

    def error(self, message: str) -> NoReturn:
        cmd = self.prog.split(" ", 1)[1] if " " in self.prog else ""
        hint = f" (see: sluice {cmd + ' ' if cmd else ''}--help)"
        print(f"sluice: error: {message}{hint}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


# --- argument types ------------------------------------------------------------------------


def _number(kind: str, cond: Any, what: str) -> Any:
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


_pos_float = _number("positive number", lambda v: v > 0, "a positive number")
_nonneg_float = _number("non-negative number", lambda v: v >= 0, "a number >= 0")
_probability = _number("probability", lambda v: 0 <= v < 1, "a probability in [0, 1)")
# The limits of docs/cli.md ("Limits"), checked where the flag is read.
MAX_SESSION_S = 86_400
MAX_DELAY_MS = 60_000
_duration = _number(
    "duration", lambda v: 0 < v <= MAX_SESSION_S, f"seconds in (0, {MAX_SESSION_S}] (a day)"
)
_delay = _number("delay", lambda v: 0 <= v <= MAX_DELAY_MS, f"milliseconds in [0, {MAX_DELAY_MS}]")
_fps = _number("fps", lambda v: 0 < v <= 1000, "a frame rate in (0, 1000]")


def _int(minimum: int, what: str, maximum: int | None = None) -> Any:
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {s!r}") from None
        if v < minimum or (maximum is not None and v > maximum):
            raise argparse.ArgumentTypeError(f"expected {what}, got {s!r}")
        return v

    parse.__name__ = what
    return parse


_pos_int = _int(1, "a positive integer")
_seed = _int(0, "an integer in [0, 2**64 - 1]", 2**64 - 1)
_jobs = _int(1, "a number of jobs in [1, 1024]", 1024)
_queue_bytes = _int(1504, "bytes in [1504, 1000000000]", 1_000_000_000)
_queue_packets = _int(1, "packets in [1, 1000000]", 1_000_000)


def _out_path(s: str) -> str:
    if not s.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty string")
    return s


_out_path.__name__ = "path"


def _assignment(s: str) -> tuple[str, Any]:
    from .config import parse_assignment

    try:
        return parse_assignment(s)
    except SluiceError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


_assignment.__name__ = "PATH=VALUE"


# --- parser ---------------------------------------------------------------------------------


def _add_network(p: argparse.ArgumentParser) -> None:
    _add_link(p)
    _add_run(p)
    _add_video(p)


def _add_link(p: argparse.ArgumentParser) -> None:
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
        "--delay-ms", type=_delay, default=None, metavar="D",
        help="one-way propagation delay in each direction (default 20)",
    )  # fmt: skip
    d.add_argument(
        "--bn-delay-ms", type=_delay, default=None, metavar="D",
        help="one-way delay between the bottleneck and the receiver, each direction (Co-RTV "
        "§V-A: 5, an RTT of 10); the same setting as --delay-ms, named for the topology "
        "with --access-delay-ms",
    )  # fmt: skip
    g.add_argument(
        "--access-delay-ms", type=_delay, default=None, metavar="D",
        help="one-way delay between the sender and the bottleneck, each direction: media "
        "before the queue, the bottleneck's reports and the receiver's feedback on the way "
        "back (Co-RTV §V-A: 20; default 0)",
    )  # fmt: skip
    q = g.add_mutually_exclusive_group()
    q.add_argument("--queue-bytes", type=_queue_bytes, metavar="B", help="bottleneck queue, bytes")
    q.add_argument(
        "--queue-packets", type=_queue_packets, metavar="N", help="bottleneck queue, packets"
    )
    g.add_argument(
        "--loss", type=_probability, default=None, metavar="P", help="downlink random loss"
    )


def _competing(s: str) -> str:
    """A --competing spec in its canonical form (the media scheme must be registered)."""
    from .config import scheme_names
    from .errors import core

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


_competing.__name__ = "competing flow"


def _add_sharing(p: argparse.ArgumentParser) -> None:
    """--competing and --queue: what shares the bottleneck and its queue discipline."""
    g = p.add_argument_group("competing traffic")
    g.add_argument(
        "--competing", action="append", default=[], type=_competing, metavar="SPEC",
        help="a flow sharing the bottleneck (repeatable): media:SCHEME[@START_S[-STOP_S]] "
        "(a media flow of any scheme; self: the session's own), "
        "tcp:newreno|cubic|bbr[@START_S[-STOP_S]] (a bulk flow) or "
        "short-tcp[@START_S] (RFC 8867's short flow: 30-50 KB downloads, 10 s mean idle); "
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


def _add_run(p: argparse.ArgumentParser) -> None:
    r = p.add_argument_group("run")
    r.add_argument(
        "--duration", type=_duration, default=None, metavar="S",
        help="capture duration in seconds (default 30; at most a day)",
    )  # fmt: skip
    r.add_argument("--seed", type=_seed, default=None, metavar="N", help="random seed (default 1)")
    r.add_argument(
        "--fps", type=_fps, default=None, metavar="F",
        help="frame rate (default: the video's, or 30 for the model encoder)",
    )  # fmt: skip
    r.add_argument(
        "--set", action="append", default=[], metavar="PATH=VALUE", dest="overrides",
        type=_assignment,
        help="set any run-config field by its full path, after the options above "
        "(repeatable): duration_s=10, feedback_interval_ms=20, downlink.queue_bytes=50000, "
        "pacer.threshold_packets=12.5, cc.pacing_factor=2, pacer={\"kind\":\"ace-n\"}; "
        "values are JSON, a bare word is a string (see: sluice config)",
    )  # fmt: skip


def _add_seeds_and_frame_drop(p: argparse.ArgumentParser) -> None:
    """--seeds (run and compare) and --frame-drop (every command that runs schemes)."""
    g = p.add_argument_group("repetitions and equal settings")
    g.add_argument(
        "--seeds", metavar="LIST", default=None,
        help="run every seed of LIST (1,2,3 or 1-5): tables give the mean and its 95 %% "
        "interval over them (instead of --seed)",
    )  # fmt: skip
    _add_frame_drop(g)


def _add_frame_drop(g: Any) -> None:
    g.add_argument(
        "--frame-drop", choices=("on", "off"), default=None,
        help="libwebrtc's frame dropping (frame dropper and congestion-window drops) on or "
        "off for every scheme alike (default: each scheme's own: on for webrtc, off for the "
        "papers' schemes)",
    )  # fmt: skip


def _add_video(p: argparse.ArgumentParser, quality: bool = True) -> None:
    v = p.add_argument_group("video")
    v.add_argument(
        "--video", metavar="CLIP", default=None,
        help="encode this clip (any file ffmpeg reads) with x264; looped to the duration",
    )  # fmt: skip
    v.add_argument(
        "--encoder", choices=("x264", "model"), default=None,
        help="encoder (default: x264 with --video, else the model encoder)",
    )  # fmt: skip
    v.add_argument(
        "--width", type=_int(16, "width"), default=None, metavar="W",
        help="scale the video to this width (aspect kept)",
    )  # fmt: skip
    if quality:
        v.add_argument(
            "--quality", choices=("none", "fast", "full"), default="fast",
            help="VMAF/SSIM/PSNR as the viewer saw it: fast scores every 5th frame (default fast)",
        )  # fmt: skip
    v.add_argument(
        "--encode-time", choices=("measured", "modeled"), default="measured",
        help="charge x264's wall time (measured) or a deterministic model (modeled)",
    )  # fmt: skip
    v.add_argument(
        "--preset", default="superfast", choices=X264_PRESETS, metavar="P",
        help=f"x264 preset: {', '.join(X264_PRESETS)} (default superfast)",
    )  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="sluice",
        description="Sluice: pacing, congestion control and encoder control for real-time "
        "video, compared on one simulated pipeline.",
    )
    parser.add_argument("--version", action="version", version=f"sluice {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("run", help="run one scheme on one trace")
    s = p.add_mutually_exclusive_group()
    s.add_argument("--scheme", default="webrtc", metavar="S", help="scheme (see: sluice schemes)")
    s.add_argument(
        "--scheme-file", metavar="FILE.json",
        help="a custom composition (SchemeConfig JSON); named after the file stem",
    )  # fmt: skip
    _add_network(p)
    _add_sharing(p)
    _add_seeds_and_frame_drop(p)
    p.add_argument(
        "--out", type=_out_path, metavar="DIR",
        help="default results/<scheme>-<trace>-s<seed> (with --seeds: one per seed; with --out, "
        "DIR/s<seed>)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print only the summary JSON on stdout")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("compare", help="run several schemes on the same network, in parallel")
    p.add_argument(
        "--schemes", default="", metavar="A,B,C", help="comma-separated registered schemes"
    )
    p.add_argument(
        "--scheme-file", action="append", default=[], metavar="FILE.json",
        help="add a custom composition (repeatable)",
    )  # fmt: skip
    _add_network(p)
    _add_sharing(p)
    _add_seeds_and_frame_drop(p)
    p.add_argument("--jobs", type=_jobs, metavar="N", help="parallel runs (default: CPUs)")
    p.add_argument("--backend", choices=("process", "ray"), default="process")
    p.add_argument(
        "--address", metavar="HOST:PORT", default=None,
        help="with --backend ray: the Ray cluster to run on (default: RAY_ADDRESS, else a "
        "local Ray); see docs/cluster.md",
    )  # fmt: skip
    p.add_argument("--out", type=_out_path, metavar="DIR", help="default results/compare-<trace>")
    p.add_argument("--log-x", action="store_true", help="log-scale latency CDF")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report (report.html)")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser(
        "matrix", help="run an experiment plan (TOML): schemes x traces x clips x seeds",
        description="Runs the cells of PLAN that have no results yet (resumable) and writes "
        "one results table, <results>/<name>/results.csv (and results.parquet with pyarrow). "
        "See docs/experiments.md for the plan format.",
    )  # fmt: skip
    p.add_argument("plan", metavar="PLAN.toml", help="the experiment plan")
    p.add_argument("--jobs", type=_jobs, metavar="N", help="parallel runs (default: CPUs)")
    p.add_argument("--backend", choices=("process", "ray"), default="process")
    p.add_argument(
        "--address", metavar="HOST:PORT", default=None,
        help="with --backend ray: the Ray cluster to run on (default: RAY_ADDRESS, else a "
        "local Ray); see docs/cluster.md",
    )  # fmt: skip
    p.add_argument(
        "--rerun", choices=("missing", "stale", "all"), default="missing",
        help="missing (default): cells without results for their spec; stale: also results "
        "from another commit or a dirty checkout; all: every cell",
    )  # fmt: skip
    p.add_argument(
        "--results", metavar="DIR", default="results",
        help="results root (default results): cells go to DIR/<name>/<trace>/<clip>/<scheme>/",
    )  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="list the cells and what would run")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report (report.html)")
    p.add_argument(
        "--only", metavar="SCHEME,...", default=None,
        help="run only the cells of these schemes (the table still has every finished cell)",
    )  # fmt: skip
    p.set_defaults(func=cmd_matrix)

    p = sub.add_parser(
        "config", help="print a run's resolved config, or the valid config paths",
        description="Prints the run config a scheme resolves to, with --set overrides "
        "applied (the config a run's header records, before trace names and video).",
    )  # fmt: skip
    p.add_argument("--scheme", default="webrtc", metavar="S", help="scheme (default webrtc)")
    p.add_argument(
        "--encoder", choices=("x264", "model"), default=None,
        help="the encoder's config to show (default: the scheme's, else model)",
    )  # fmt: skip
    p.add_argument(
        "--set", action="append", default=[], metavar="PATH=VALUE", dest="overrides",
        type=_assignment, help="override (repeatable)",
    )  # fmt: skip
    p.add_argument("--paths", action="store_true", help="one PATH=VALUE line per field")
    p.set_defaults(func=cmd_config)

    p = sub.add_parser(
        "report", help="one self-contained HTML page for a run, compare or matrix directory",
        description="Writes DIR/report.html: the table with 95 %% intervals (all-slot latency "
        "first), latency against quality per trace family, latency CDFs on a log axis, time "
        "series, the settings the schemes differ in, and provenance. It opens offline.",
    )  # fmt: skip
    p.add_argument("dir", metavar="DIR", help="a run, compare or matrix results directory")
    p.add_argument("--out", type=_out_path, metavar="FILE", help="default DIR/report.html")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("schemes", help="list the registered schemes")
    p.add_argument("--json", action="store_true", help="the registry as JSON")
    p.set_defaults(func=cmd_schemes)

    p = sub.add_parser("trace", help="generate or inspect traces")
    tsub = p.add_subparsers(dest="trace_command", metavar="SUBCOMMAND", required=True)
    g = tsub.add_parser("gen", help="write a generated trace as a Mahimahi file")
    g.add_argument("spec", metavar="SPEC", help="e.g. constant:12, markov:20,2,5,1[,seed]")
    g.add_argument("--duration", type=_duration, required=True, metavar="S")
    g.add_argument("--out", type=_out_path, metavar="FILE", help="output file (default: stdout)")
    g.set_defaults(func=cmd_trace_gen)
    i = tsub.add_parser("info", help="mean rate, period, min/max over 1 s bins")
    i.add_argument("file", metavar="FILE", help="trace file (or gen:SPEC with --duration)")
    i.add_argument("--trace-format", choices=("mahimahi", "rate"))
    i.add_argument("--duration", type=_duration, default=60.0, metavar="S", help="for gen:SPEC")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=cmd_trace_info)

    p = sub.add_parser("plot", help="redraw plots from saved results")
    p.add_argument(
        "run_dirs", nargs="+", metavar="RUN_DIR",
        help="run directories (or a compare directory holding them)",
    )  # fmt: skip
    p.add_argument(
        "--out", type=_out_path, metavar="DIR", help="default: the run (or compare) directory"
    )
    p.add_argument("--log-x", action="store_true", help="log-scale latency CDF")
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("live", help="run a scheme live over UDP (RTP/RTCP): in one process on "
                       "loopback, or as sender, relay and receiver processes")
    lsub = p.add_subparsers(dest="live_command", metavar="MODE", required=True)
    lr = lsub.add_parser("run", help="sender, relay and receiver on loopback; results as `run`")
    s = lr.add_mutually_exclusive_group()
    s.add_argument("--scheme", default="webrtc", metavar="S", help="scheme (see: sluice schemes)")
    s.add_argument("--scheme-file", metavar="FILE.json", help="a custom composition")
    _add_network(lr)
    _add_sharing(lr)
    _add_frame_drop(lr)
    lr.add_argument("--out", metavar="DIR", help="default results/live-<scheme>-<trace>-s<seed>")
    lr.add_argument("--json", action="store_true", help="print only the summary JSON on stdout")
    from .live import add_live_options

    add_live_options(lr)
    lr.set_defaults(func=cmd_live_run)
    from .live_procs import add_commands

    add_commands(lsub)
    from .browser.cli import add_commands as add_browser

    add_browser(sub)
    return parser


# --- commands -------------------------------------------------------------------------------


def _check_schemes(names: Sequence[str]) -> None:
    from .config import scheme_names

    known = scheme_names()
    for n in names:
        if n not in known:
            raise SluiceError(f"unknown scheme '{n}' (known: {', '.join(known)})")


def _load_scheme_file(path: str) -> tuple[str, dict[str, Any]]:
    from . import config
    from .errors import DuplicateKey, non_finite_path, regular_file, strict_json

    try:
        text = regular_file(path, "scheme file", 1 << 24).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SluiceError(f"cannot read scheme file {path}: {e}") from None
    try:
        obj = strict_json(text)
    except DuplicateKey as e:
        raise SluiceError(f"{path}: {e} (a scheme file gives each key once)") from None
    except json.JSONDecodeError as e:
        raise SluiceError(f"{path}:{e.lineno}: malformed JSON ({e.msg})") from None
    except RecursionError:
        raise SluiceError(f"{path}: JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise SluiceError(f"{path}: expected a JSON object (a scheme composition)")
    if isinstance(obj.get("config"), dict) and "pacer" not in obj:
        obj = obj["config"]  # an entry copied from `sluice schemes --json`
    bad = non_finite_path(obj)
    if bad:
        raise SluiceError(
            f"{path}: {bad} must be a finite number within 64 bits, got {_get(obj, bad)}"
        )
    # Checked here, so the message names the file (and the field's config path).
    cfg = config.default_config()
    cfg["scheme"] = obj
    try:
        config.resolve(cfg, validate=True)
    except SluiceError as e:
        msg = str(e).removeprefix("invalid run config: ")
        raise SluiceError(f"{path}: {msg}") from None
    from .experiments import name_problem

    name = Path(path).stem
    why = name_problem(name)
    if why:  # the scheme's name becomes a directory (compare's DIR/NAME)
        raise SluiceError(f"scheme file {path}: its name '{name}' (the file's stem, which "
                          f"names the scheme and its directory) {why}: rename the file")
    return name, obj


def _get(obj: Any, path: str) -> Any:
    import re

    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        obj = obj[int(part[1:-1])] if part.startswith("[") else obj[part]
    return obj


def _overrides(args: argparse.Namespace) -> tuple[tuple[str, Any], ...]:
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
    if getattr(args, "competing", None):
        out.append(("competing", list(args.competing)))
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
    return (*out, *args.overrides)


def _spec_from_args(args: argparse.Namespace, scheme: str, scheme_config: Any, out: str | None):
    from .runner import RunSpec, resolve_encoder

    spec = RunSpec(
        scheme=scheme,
        scheme_config=scheme_config,
        overrides=_overrides(args),
        trace=args.trace,
        uplink_trace=args.uplink_trace,
        trace_format=args.trace_format,
        out_dir=out,
        video=args.video,
        encoder=args.encoder,
        width=args.width,
        quality=args.quality,
        encode_time=args.encode_time,
        preset=args.preset,
    )
    if args.width is not None and resolve_encoder(spec) != "x264":
        raise SluiceError(f"--width {args.width} scales a video for x264; the model encoder "
                          f"of {scheme} has no video (add --video CLIP, or leave --width out)")
    return spec


def cmd_run(args: argparse.Namespace) -> int:
    from . import report, results
    from .runner import run_one

    if args.scheme_file:
        name, cfg = _load_scheme_file(args.scheme_file)
    else:
        name, cfg = args.scheme, None
        _check_schemes([name])
    seeds = _seeds(args)
    if seeds is None:
        run_dir = run_one(_spec_from_args(args, name, cfg, args.out))
        summary = json.loads((run_dir / results.SUMMARY_FILE).read_text(encoding="utf-8"))
        if args.json:
            print(json.dumps(summary, indent=2))
            return 0
        print(report.text_table([(name, summary)]))
        print(f"\nresults: {run_dir}")
        return 0
    summaries = []
    run_dirs = []
    for seed in seeds:
        out = os.path.join(args.out, f"s{seed}") if args.out else None
        spec = _spec_from_args(args, name, cfg, out)
        spec = replace(spec, overrides=(*spec.overrides, ("seed", seed)))
        run_dirs.append(run_one(spec))
        summaries.append(json.loads((run_dirs[-1] / results.SUMMARY_FILE).read_text("utf-8")))
    if args.json:
        print(json.dumps(summaries, indent=2))
        return 0
    print(report.text_table([(name, summaries)]))
    print(f"{report.LEGEND}\n\nresults: {', '.join(str(d) for d in run_dirs)}")
    return 0


def _seeds(args: argparse.Namespace) -> list[int] | None:
    """--seeds as a list (None without it); with --seed too, one clear error."""
    from .spread import parse_seeds

    if getattr(args, "seeds", None) is None:
        return None
    if args.seed is not None:
        raise SluiceError("give --seed or --seeds, not both")
    return parse_seeds(args.seeds)


def cmd_live_run(args: argparse.Namespace) -> int:
    from . import live, report, results

    if args.scheme_file:
        name, cfg = _load_scheme_file(args.scheme_file)
    else:
        name, cfg = args.scheme, None
        _check_schemes([name])
    spec = live.with_default_out(_spec_from_args(args, name, cfg, args.out))
    run_dir = live.run_live(spec, live.faults_from_args(args), bind=args.bind,
                            forward_rtp=args.forward_rtp, restarts=live.restarts_from_args(args),
                            transport=args.transport)  # fmt: skip
    summary = json.loads((run_dir / results.SUMMARY_FILE).read_text(encoding="utf-8"))
    # The run's end lines say when spoofed or forged datagrams came.
    notes = [n for n in (live.spoof_note(summary), live.srtp_note(summary)) if n]
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(report.text_table([(name, summary)]))
        print(f"\nresults: {run_dir}")
    for note in notes:
        print(note, file=sys.stderr)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from . import differences, plots, report, results, runner
    from .traces import trace_stem

    names = [n.strip() for n in args.schemes.split(",") if n.strip()]
    _check_schemes(names)
    entries: list[tuple[str, Any]] = [(n, None) for n in names]
    entries += [_load_scheme_file(f) for f in args.scheme_file]
    if not entries:
        raise SluiceError("give schemes to compare: --schemes a,b,c and/or --scheme-file FILE")
    seen = [n for n, _ in entries]
    dup = sorted({n for n in seen if seen.count(n) > 1})
    if dup:
        raise SluiceError(f"scheme listed twice: {', '.join(dup)}")
    seeds = _seeds(args)

    out = Path(args.out or os.path.join("results", f"compare-{trace_stem(args.trace)}"))
    results.check_result_dir(out, "compare directory")
    specs = []
    for n, cfg in entries:
        if seeds is None:
            specs.append(_spec_from_args(args, n, cfg, str(out / n)))
            continue
        for seed in seeds:
            spec = _spec_from_args(args, n, cfg, str(out / n / f"s{seed}"))
            specs.append(replace(spec, overrides=(*spec.overrides, ("seed", seed))))
    # Configs and traces once up front, so mistakes come before any run starts.
    cfgs = [runner.check(s) for s in specs]
    runner.load_traces(specs[0], cfgs[0])
    run_dirs = runner.run_many(specs, jobs=args.jobs, backend=args.backend,
                               address=args.address)  # fmt: skip
    runs = [results.load_run(d) for d in run_dirs]
    by_scheme: dict[str, list[Any]] = {}
    for r in runs:
        by_scheme.setdefault(r.scheme, []).append(r)
    named = [(n, [r.summary for r in rs]) for n, rs in by_scheme.items()]

    cfg = cfgs[0]
    chosen = [p for p, _ in specs[0].overrides if p != "seed"]
    firsts = [rs[0] for rs in by_scheme.values()]
    diffs = differences.markdown([(r.scheme, r.config) for r in firsts], chosen)
    seed_text = (f"seeds {', '.join(map(str, seeds))}" if seeds else f"seed {cfg['seed']}")
    header = (
        f"# sluice compare: {args.trace}\n\n"
        f"duration {cfg['duration_s']:g} s, {seed_text}, "
        f"one-way delay {cfg['downlink']['delay_ms']:g} ms, "
        + (
            f"sender-bottleneck {cfg['downlink']['access_delay_ms']:g} ms, "
            if cfg["downlink"].get("access_delay_ms")
            else ""
        )
        + f"queue {_queue_desc(cfg['downlink'])}, loss {cfg['downlink']['loss']:g}\n\n"
    )
    body = report.markdown_table(named) + "\n\n" + report.LEGEND + "\n"
    if diffs:
        body += ("\n## Settings the schemes differ in, which you did not choose\n\n"
                 + diffs + "\n")  # fmt: skip
    results.write_text(out / "compare.md", header + body)
    results.write_text(out / "summary.csv", report.csv_text(named))
    pngs = plots.plot_runs(firsts, out, logx=args.log_x)
    html = None
    if not args.no_report:
        from .htmlreport import write_report

        html = write_report(out, command=" ".join(["sluice", *sys.argv[1:]]))

    print(report.text_table(named))
    print(report.LEGEND)
    note = differences.note([(r.scheme, r.config) for r in firsts], chosen)
    if note:
        print(note)
    print(f"\nresults: {out}")
    print(f"table:   {out / 'compare.md'}, {out / 'summary.csv'}")
    print(f"plots:   {', '.join(str(p) for p in pngs)}")
    if html:
        print(f"report:  {html}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .errors import output_file
    from .htmlreport import write_report

    if args.out:
        output_file(args.out, "--out")
    path = write_report(args.dir, args.out, command=" ".join(["sluice", *sys.argv[1:]]))
    print(f"report: {path}")
    return 0


def _queue_desc(link: dict[str, Any]) -> str:
    if link.get("queue_bytes"):
        return f"{link['queue_bytes']} B"
    if link.get("queue_packets"):
        return f"{link['queue_packets']} packets"
    return "unlimited"


def cmd_matrix(args: argparse.Namespace) -> int:
    from . import plan as plans

    p = plans.load_plan(args.plan)
    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    res = plans.run_plan(
        p, args.results, jobs=args.jobs, backend=args.backend, rerun=args.rerun, only=only,
        dry_run=args.dry_run, address=args.address,
    )  # fmt: skip
    if args.dry_run:
        todo = {c.run_dir for c in res.todo}
        for c in res.cells:
            if c.run_dir in todo:
                state = "run "
            elif only and c.scheme not in only:
                state = "skip"
            else:
                state = "done"
            print(f"{state}  {c.scheme}  {c.trace}  {c.clip}  s{c.seed}  {c.run_dir}")
        print(f"{p.name}: {len(res.cells)} cells, {len(res.todo)} to run")
        return 0
    assert res.outcome is not None
    for cell, msg in res.outcome.failed:
        print(f"sluice: cell {cell.run_dir} failed: {msg}", file=sys.stderr)
    print(f"{p.name}: {len(res.cells)} cells, {len(res.outcome.ran)} run now, "
          f"{len(res.table)} with results")  # fmt: skip
    if len(res.table):
        from . import report

        t = res.table
        named = [(sch, t[t["scheme"] == sch].to_dict("records"))
                 for sch in dict.fromkeys(t["scheme"])]  # fmt: skip
        print(report.text_table(named))
        print(report.LEGEND)
    print(f"table: {', '.join(str(x) for x in res.paths)}")
    if len(res.table) and not args.no_report:
        from .htmlreport import write_report

        html = write_report(Path(res.paths[0]).parent,
                            command=" ".join(["sluice", *sys.argv[1:]]))  # fmt: skip
        print(f"report: {html}")
    if res.outcome.failed:
        return _fail(f"{len(res.outcome.failed)} of {len(res.todo)} runs failed (see above)")
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from . import config
    from .runner import RunSpec, planned_config, validate_config

    _check_schemes([args.scheme])
    info = config.scheme_info(args.scheme) or {}
    encoder = info.get("encoder") or args.encoder or "model"
    if args.encoder and info.get("encoder") and args.encoder != info["encoder"]:
        raise SluiceError(f"scheme {args.scheme} is defined with the {info['encoder']} encoder")
    cfg = planned_config(RunSpec(scheme=args.scheme, overrides=tuple(args.overrides)), encoder)
    validate_config(cfg)  # what `run` refuses, `config` refuses too
    if args.paths:
        for k, v in config.flatten(cfg).items():
            print(f"{k}={json.dumps(v)}")
    else:
        print(json.dumps(cfg, indent=2))
    return 0


def cmd_schemes(args: argparse.Namespace) -> int:
    from .config import registry

    reg = registry()
    if args.json:
        print(json.dumps(reg, indent=2))
        return 0
    width = max((len(s["name"]) for s in reg), default=0)
    for s in reg:
        print(f"{s['name'].ljust(width)}  {s['color']}  {s['description']}")
    return 0


def cmd_trace_gen(args: argparse.Namespace) -> int:
    from .errors import output_file
    from .results import temp_path
    from .traces import generate, mahimahi_pieces

    if args.out:
        output_file(args.out, "--out")  # before generating: nothing is written over a device
    trace = generate(args.spec, args.duration)
    if args.out:
        path = output_file(args.out, "--out")
        if path.parent != Path(""):
            path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_path(path)  # renamed into place when complete
        try:
            try:
                with open(tmp, "w", encoding="utf-8", newline="\n") as f:
                    for piece in mahimahi_pieces(trace):
                        f.write(piece)
            except OSError as e:  # a full disk: said with the file it was for
                raise SluiceError(f"cannot write {path}: {e.strerror or e}") from None
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        print(
            f"wrote {path}: mean {trace.mean_rate_bps / 1e6:.3f} Mbit/s, "
            f"period {trace.period_s:g} s",
            file=sys.stderr,
        )
    else:
        for piece in mahimahi_pieces(trace):
            sys.stdout.write(piece)
    return 0


def cmd_trace_info(args: argparse.Namespace) -> int:
    from .traces import bin_rates_bps, load_trace

    lt = load_trace(args.file, duration_s=args.duration, fmt=args.trace_format)
    bins = bin_rates_bps(lt.trace, 1.0)
    info = {
        "name": lt.name,
        "format": lt.format,
        "sha256": lt.sha256,
        "period_s": lt.trace.period_s,
        "mean_rate_mbps": lt.trace.mean_rate_bps / 1e6,
        "min_1s_mbps": min(bins) / 1e6 if bins else None,
        "max_1s_mbps": max(bins) / 1e6 if bins else None,
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"trace:     {args.file} ({lt.format})")
    print(f"period:    {info['period_s']:.3f} s")
    print(f"mean rate: {info['mean_rate_mbps']:.3f} Mbit/s")
    if bins:
        print(f"1 s bins:  min {info['min_1s_mbps']:.3f}  max {info['max_1s_mbps']:.3f} Mbit/s")
    print(f"sha256:    {lt.sha256}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from . import plots, results

    dirs: list[Path] = []
    for d in map(Path, args.run_dirs):
        if results.is_run_dir(d):
            dirs.append(d)
        elif d.is_dir() and (subs := sorted(s for s in d.iterdir() if results.is_run_dir(s))):
            dirs.extend(subs)  # a compare directory
        elif not d.exists():
            raise SluiceError(f"no such run directory: {d}")
        else:
            raise SluiceError(f"not a sluice run directory (no {results.RUN_FILE}): {d}")
    runs = [results.load_run(d) for d in dirs]
    if args.out:
        out = Path(args.out)
    elif len(args.run_dirs) == 1:
        out = Path(args.run_dirs[0])
    else:
        out = Path(os.path.commonpath([str(d.resolve().parent) for d in dirs]))
    for p in plots.plot_runs(runs, out, logx=args.log_x):
        print(p)
    return 0


# --- entry point ----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the CLI; returns the exit status (also raises SystemExit for argparse errors)."""
    from .errors import Terminated, handle_sigterm

    handle_sigterm()
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = os.environ.get("SLUICE_DEBUG", "") not in ("", "0")
    try:
        return int(args.func(args) or 0)
    except SluiceError as e:
        if debug:
            raise
        return _fail(str(e))
    except BrokenPipeError:  # e.g. `sluice ... | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except OSError as e:
        if debug:
            raise
        where = f": {e.filename}" if e.filename else ""
        return _fail(f"{e.strerror or e}{where}")
    except KeyboardInterrupt as e:  # SIGINT, or SIGTERM (Terminated)
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():  # unwound: one line only
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("sluice: interrupted", file=sys.stderr)
        return 143 if isinstance(e, Terminated) else 130


def _fail(message: str) -> int:
    line = " ".join(message.split()) or "unknown error"
    print(f"sluice: error: {line}", file=sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
