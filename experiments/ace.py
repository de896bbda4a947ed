#!/usr/bin/env python3
"""Reproduction of the ACE evaluation (SIGCOMM '25, §6) in Sluice.

Runs the schemes of ACE §6.1 that Sluice has (WebRTC*, WebRTC-B, CBR, AlwaysBurst) and ACE,
ACE-C and ACE-N, plus ACE with the threshold T of §6.5 swept, over Wi-Fi, 4G and 5G traces
and a few clips (libx264, VMAF as the viewer saw it), then writes ``docs/results/ace.md``
(tables generated from the runs), ``docs/results/ace-runs.csv`` (one row per run) and the
figures ``docs/results/img/ace-*.png``.

Runs are resumable: results live in ``results/ace/<trace>/<clip>/<scheme>`` and a second
invocation runs only what is missing (``--rerun stale`` also reruns results from another
commit). Schemes not registered in this build are skipped with a warning.

    python experiments/ace.py                # the full matrix (hours on 2 cores)
    python experiments/ace.py --quick        # a tiny matrix, report under results/ace-quick
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import re
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sluice import experiments as ex
from sluice import plots, results
from sluice.errors import SluiceError

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

PROG = "ace.py"
EXPERIMENT = "ace"
BASELINE = "webrtc-x264"  # WebRTC* of ACE §6.1: the reference of the relative numbers
ACE = "ace"
# The comparison of ACE §6.1 (without Salsify and VP8 WebRTC, which Sluice does not have) and
# the ablation of §6.4.
SCHEMES = ["webrtc-x264", "webrtc-b", "cbr", "always-burst", "ace-c", "ace-n", "ace"]
ABLATION = ["webrtc-x264", "ace-c", "ace-n", "ace"]
# `ace` without ACE-C's planned-size correction (§5.1): the correction's own ablation.
UNCORRECTED = "ace-uncorrected"
SIZE_SCALE_FIELD = "planned_size_scale"
T_VALUES = (7.5, 10.0, 12.5, 15.0)  # ACE §6.5
NETWORKS = ("Wi-Fi", "4G", "5G")

# (network type, path under --traces-dir, label); 5G: every ucc-5g/*.mahi.
DEFAULT_TRACES = [
    ("Wi-Fi", "zhuge/office-wifi_trace7.mahi", "wifi-zhuge-office7"),
    ("Wi-Fi", "hairpin/wifi_trace14.mahi", "wifi-hairpin14"),
    ("4G", "zhuge/4g_trace2.mahi", "4g-zhuge2"),
    ("4G", "zhuge/4g_trace9.mahi", "4g-zhuge9"),
]
FIVE_G_GLOB = "ucc-5g/*.mahi"
# The shipped clip (animation) and two camera clips with more motion; all 1280x720.
DEFAULT_CLIPS = [
    REPO / "data/videos/bbb-intro_1280x720_24fps_10s.mp4",
    SHARED / "videos/handheld_flower_1280x720_30fps_10s.mp4",
    SHARED / "videos/nature_squirrel_1280x720_25fps_10s.mp4",
]

ANALYSIS_OPEN = "<!-- analysis -->"
ANALYSIS_CLOSE = "<!-- /analysis -->"
ANALYSIS_PLACEHOLDER = (
    "\n_Hand-written analysis goes here; it is kept when the report is regenerated._\n"
)


class Usage(Exception):
    """A user mistake: reported as one line, exit status 2."""


# --- arguments ------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    p.add_argument("--traces-dir", default=str(SHARED / "traces"), metavar="DIR",
                   help="trace collection (default: ../shared/traces next to the repository)")
    p.add_argument("--clips", metavar="A,B", help="comma-separated video clips (default: the "
                   "shipped bbb-intro plus handheld_flower and nature_squirrel if present)")
    p.add_argument("--schemes", metavar="A,B", help=f"default: {','.join(SCHEMES)}")
    p.add_argument("--t-values", default=",".join(f"{t:g}" for t in T_VALUES), metavar="T,T",
                   help="ACE-N thresholds T (packets) for the sweep on 'ace'; '' for none")
    p.add_argument("--no-uncorrected", action="store_true",
                   help=f"skip `{UNCORRECTED}` (`ace` without ACE-C's planned-size correction)")
    p.add_argument("--duration", type=float, default=20.0, metavar="S", help="seconds (20)")
    p.add_argument("--width", type=int, default=1280, metavar="W", help="video width (1280)")
    p.add_argument("--fps", type=float, default=None, metavar="F",
                   help="frame rate (default: each clip's own)")
    p.add_argument("--encode-time", choices=("measured", "modeled"), default="modeled")
    p.add_argument("--quality", choices=("none", "fast", "full"), default="fast")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--queue-bytes", type=int, default=100_000, help="bottleneck (ACE: 100 kB)")
    p.add_argument("--delay-ms", type=float, default=20.0, help="one-way delay (20)")
    p.add_argument("--jobs", type=int, default=None, help="parallel runs (default: CPUs)")
    p.add_argument("--backend", choices=("process", "ray"), default="process")
    p.add_argument("--rerun", choices=ex.RERUN_MODES, default="missing",
                   help="missing (default): only runs without results; stale: also results "
                   "from another commit; all: everything")
    p.add_argument("--results-dir", default=None, metavar="DIR",
                   help="where runs go (default: the repository's results/, i.e. results/ace/...)")
    p.add_argument("--report-dir", default=None, metavar="DIR",
                   help="where ace.md and img/ go (default: docs/results)")
    p.add_argument("--detail-trace", metavar="LABEL",
                   help="trace of the single-run figures (default: the first Wi-Fi trace)")
    p.add_argument("--detail-clip", metavar="LABEL",
                   help="clip of the single-run figures (default: the first clip)")
    p.add_argument("--quick", action="store_true",
                   help="tiny matrix for testing: 2 traces, 1 clip, 4 s, 320 px, T 7.5 and 15; "
                   "results and report under results/ace-quick")
    args = p.parse_args(argv)
    args.experiment = EXPERIMENT + ("-quick" if args.quick else "")
    if args.quick:
        args.duration = min(args.duration, 4.0)
        args.width = min(args.width, 320)
        if args.t_values == p.get_default("t_values"):
            args.t_values = "7.5,15"
    args.results_dir = args.results_dir or str(REPO / "results")
    default_report = REPO / ("results/ace-quick/report" if args.quick else "docs/results")
    args.report_dir = Path(args.report_dir) if args.report_dir else default_report
    if args.duration <= 0 or args.width < 16 or (args.jobs is not None and args.jobs < 1):
        raise Usage("--duration must be > 0, --width >= 16, --jobs >= 1")
    try:
        args.t_list = [float(t) for t in args.t_values.split(",") if t.strip()]
    except ValueError:
        raise Usage(f"--t-values: expected numbers, got {args.t_values!r}") from None
    return args


def traces(args: argparse.Namespace) -> list[ex.TraceSpec]:
    root = Path(args.traces_dir)
    if not root.is_dir():
        raise Usage(f"traces directory not found: {root} (give --traces-dir DIR)")
    chosen = [(net, root / rel, label) for net, rel, label in DEFAULT_TRACES]
    for f in sorted(root.glob(FIVE_G_GLOB)):
        # Download_Driving_B_2020.01.16_09.56.56 -> 5g-driving-b
        parts = f.stem.split("_")
        label = "5g-" + "-".join(parts[1:3]).lower() if len(parts) >= 3 else "5g-" + f.stem
        chosen.append(("5G", f, ex.safe_label(label)))
    missing = [str(p) for _, p, _ in chosen if not p.is_file()]
    if missing:
        raise Usage(f"trace not found: {', '.join(missing)} (check --traces-dir {root})")
    if not any(net == "5G" for net, _, _ in chosen):
        raise Usage(f"no 5G traces: {root / FIVE_G_GLOB} matches nothing")
    if args.quick:  # one Wi-Fi and one 4G trace
        chosen = [next(c for c in chosen if c[0] == n) for n in ("Wi-Fi", "4G")]
    return [ex.TraceSpec(str(p), label, net) for net, p, label in chosen]


def clips(args: argparse.Namespace) -> list[ex.ClipSpec]:
    if args.clips:
        paths = [Path(c.strip()) for c in args.clips.split(",") if c.strip()]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise Usage(f"clip not found: {', '.join(missing)}")
    else:
        paths = [p for p in DEFAULT_CLIPS if p.is_file()]
        if not paths:
            raise Usage(f"no default clip found ({DEFAULT_CLIPS[0]}); give --clips")
    if args.quick:
        paths = paths[:1]
    return [ex.ClipSpec(str(p), ex.clip_label(str(p))) for p in paths]


def ablation(df: Any) -> list[str]:
    """The ablation's schemes that ran: ACE Fig. 15's, and `ace` without §5.1's correction."""
    present = set(df["scheme"])
    return [s for s in [*ABLATION, UNCORRECTED] if s in present]


def t_label(t: float) -> str:
    return f"{ACE}-T{t:g}"


def schemes(args: argparse.Namespace) -> tuple[list[ex.SchemeSpec], dict[str, float], list[str]]:
    """(schemes to run, T of each sweep scheme, notes on what was skipped)."""
    names = [s.strip() for s in (args.schemes or ",".join(SCHEMES)).split(",") if s.strip()]
    run, skipped = ex.known_schemes(names)
    notes = [f"scheme `{s}` is not registered in this build: skipped" for s in skipped]
    sweep: dict[str, float] = {}
    if args.t_list and ACE in names:
        base = ex.registered_config(ACE)
        default_t = ex.find_param(base, ex.ACE_N_T_FIELD) if base else None
        if base is None:
            notes.append(f"T sweep skipped: scheme `{ACE}` is not registered")
        elif default_t is None:
            notes.append(f"T sweep skipped: `{ACE}` has no `{ex.ACE_N_T_FIELD}` field")
        else:
            for t in args.t_list:
                if math.isclose(t, float(default_t)) and any(s.name == ACE for s in run):
                    sweep[ACE] = t  # the default T: the ace runs themselves
                    continue
                v = ex.variant(ACE, ex.ACE_N_T_FIELD, t, name=t_label(t))
                run.append(v)
                sweep[v.name] = t
    if ACE in names and not args.no_uncorrected:
        base = ex.registered_config(ACE)
        if base is not None and ex.find_param(base, SIZE_SCALE_FIELD) is not None:
            run.append(ex.variant(ACE, SIZE_SCALE_FIELD, [1.0, 1.0, 1.0], name=UNCORRECTED))
        else:
            notes.append(f"`{UNCORRECTED}` skipped: `{ACE}` has no `{SIZE_SCALE_FIELD}` field")
    for n in notes:
        print(f"warning: {n}", file=sys.stderr)
    return run, sweep, notes


# --- tables ---------------------------------------------------------------------------------


def _f(fmt: str) -> Callable[[Any], str]:
    def f(v: Any) -> str:
        try:
            x = float(v)
        except (TypeError, ValueError):
            return "-" if v is None else str(v)
        return "-" if math.isnan(x) else format(x, fmt)

    return f


def _pct(v: Any) -> str:
    return _f(".2f")(None if v is None else float(v) * 100)


def _signed_pct(v: Any) -> str:
    return "-" if v is None or math.isnan(float(v)) else f"{100 * float(v):+.1f}%"


def _signed(v: Any) -> str:
    return "-" if v is None or math.isnan(float(v)) else f"{float(v):+.2f}"


def md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    rule = "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"
    return "\n".join(["| " + " | ".join(head) + " |", rule,
                      *("| " + " | ".join(r) + " |" for r in rows)])  # fmt: skip


# (header, column, formatter): the metrics of the per-scheme tables, means over runs.
METRICS: list[tuple[str, str, Callable[[Any], str]]] = [
    ("P50 ms", "p50_ms", _f(".1f")),
    ("P95 ms", "p95_ms", _f(".1f")),
    ("P99 ms", "p99_ms", _f(".1f")),
    ("mean ms", "mean_ms", _f(".1f")),
    ("VMAF", "vmaf_mean", _f(".2f")),
    ("VMAF p5", "vmaf_p5", _f(".2f")),
    ("loss %", "loss_rate", _pct),
    ("stall %", "stall_rate", _pct),
    ("c0 frames %", "c0_share", _pct),
    ("burst frames %", "burst_share", _pct),
]


def scheme_order(df: Any) -> list[str]:
    return list(dict.fromkeys(df["scheme"]))


def means_table(df: Any, names: Sequence[str]) -> str:
    rows = []
    for s in names:
        sub = df[df["scheme"] == s]
        if sub.empty:
            continue
        rows.append([f"`{s}`", str(len(sub)), *(f(sub[c].mean()) for _, c, f in METRICS)])
    return md_table(["scheme", "runs", *(h for h, _, _ in METRICS)], rows)


def relative(df: Any, s: str, col: str, kind: str) -> float:
    """Ratio of means minus 1 (``kind="ratio"``) or difference of means (``"diff"``) of
    ``col`` between scheme ``s`` and the baseline, over the same rows of ``df``."""
    a = df.loc[df["scheme"] == s, col].mean()
    b = df.loc[df["scheme"] == BASELINE, col].mean()
    if kind == "ratio":
        return a / b - 1 if b and not math.isnan(b) else math.nan
    return a - b


def paired_wins(df: Any, s: str, col: str = "p95_ms") -> str:
    """'k/n': cells (trace, clip) where ``s`` has a lower ``col`` than the baseline."""
    key = ["trace", "clip"]
    a = df[df["scheme"] == s].set_index(key)[col]
    b = df[df["scheme"] == BASELINE].set_index(key)[col]
    both = a.index.intersection(b.index)
    return f"{int((a[both] < b[both]).sum())}/{len(both)}" if len(both) else "-"


def relative_table(df: Any, names: Sequence[str], groups: Sequence[str]) -> str:
    head = ["scheme"]
    for g in groups:
        head += [f"{g} ΔP95", f"{g} ΔVMAF"]
    head += ["all ΔP95", "all ΔVMAF", "lower P95 (cells)"]
    rows = []
    for s in names:
        if s == BASELINE:
            continue
        r = [f"`{s}`"]
        for g in groups:
            sub = df[df["network"] == g]
            r += [_signed_pct(relative(sub, s, "p95_ms", "ratio")),
                  _signed(relative(sub, s, "vmaf_mean", "diff"))]  # fmt: skip
        r += [_signed_pct(relative(df, s, "p95_ms", "ratio")),
              _signed(relative(df, s, "vmaf_mean", "diff")), paired_wins(df, s)]  # fmt: skip
        rows.append(r)
    return md_table(head, rows)


def sweep_table(df: Any, groups: Sequence[str]) -> str:
    sw = df[df["T"].notna()]
    head = ["T (packets)", "scheme", "runs", "P95 ms", "ΔP95 vs baseline", "VMAF", "loss %",
            "stall %", "burst frames %", *(f"{g} P95 ms" for g in groups)]  # fmt: skip
    rows = []
    for t in sorted(set(sw["T"])):
        sub = sw[sw["T"] == t]
        s = sub["scheme"].iloc[0]
        both = df[df["scheme"].isin([s, BASELINE])]
        rows.append([
            f"{t:g}", f"`{s}`", str(len(sub)), _f(".1f")(sub["p95_ms"].mean()),
            _signed_pct(relative(both, s, "p95_ms", "ratio")),
            _f(".2f")(sub["vmaf_mean"].mean()), _pct(sub["loss_rate"].mean()),
            _pct(sub["stall_rate"].mean()), _pct(sub["burst_share"].mean()),
            *(_f(".1f")(sub.loc[sub["network"] == g, "p95_ms"].mean()) for g in groups),
        ])  # fmt: skip
    return md_table(head, rows)


# --- the report -----------------------------------------------------------------------------


def existing_analysis(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ANALYSIS_PLACEHOLDER
    i, j = text.find(ANALYSIS_OPEN), text.find(ANALYSIS_CLOSE)
    if i < 0 or j < i:
        return ANALYSIS_PLACEHOLDER
    return text[i + len(ANALYSIS_OPEN) : j]


def pick_run(df: Any, prefer: Sequence[str], trace: str, clip: str) -> Any:
    """The row of the first scheme of ``prefer`` on (trace, clip), else on any cell, else any
    run on (trace, clip), else the first run."""
    cell = (df["trace"] == trace) & (df["clip"] == clip)
    for s in prefer:
        rows = df[(df["scheme"] == s) & cell]
        if len(rows):
            return rows.iloc[0]
    for s in prefer:
        rows = df[df["scheme"] == s]
        if len(rows):
            return rows.iloc[0]
    rows = df[cell]
    return rows.iloc[0] if len(rows) else (df.iloc[0] if len(df) else None)


def make_figures(df: Any, args: argparse.Namespace, img: Path, main: list[str]) -> dict:
    """Writes the figures; returns name -> (path, caption, note)."""
    figs: dict[str, tuple[Path, str, str]] = {}

    def add(key: str, path: Path, caption: str, note: str = "") -> None:
        figs[key] = (path, caption, note)

    add("tradeoff", plots.plot_tradeoff(df, img / "ace-tradeoff.png", schemes=main),
        "P95 latency vs mean VMAF per network type (ACE Fig. 12)")  # fmt: skip
    add("cdf", plots.plot_latency_cdf_pooled(df, img / "ace-latency-cdf.png", schemes=main,
                                             logx=True),
        "Frame latency CDF, all runs of each scheme pooled (ACE Fig. 14a)")  # fmt: skip
    add("loss", plots.plot_loss_stall(df, img / "ace-loss-stall.png", schemes=main),
        "Loss rate and stall rate (ACE Fig. 14b,c)")  # fmt: skip
    add("ablation", plots.plot_ablation(df, img / "ace-ablation.png", schemes=ablation(df)),
        "Ablation: WebRTC*, ACE-C only, ACE-N only, ACE, ACE without the planned-size "
        "correction (ACE Fig. 15)")  # fmt: skip
    if df["T"].notna().any():
        add("sweep", plots.plot_param_sweep(df, img / "ace-t-sweep.png",
                                            reference=df[df["scheme"] == BASELINE]),
            "P95, VMAF and loss against ACE-N's threshold T (ACE Fig. 16)")  # fmt: skip
    trace = args.detail_trace or next(
        (t for t, n in zip(df["trace"], df["network"]) if n == "Wi-Fi"), df["trace"].iloc[0]
    )
    clip = args.detail_clip or df["clip"].iloc[0]
    row = pick_run(df, [ACE, "ace-c", "ace-n", BASELINE], trace, clip)
    if row is not None:
        run = results.load_run(row["run_dir"])
        add("decisions", plots.plot_decision_scatter(run, img / "ace-decisions.png"),
            "Per-frame decisions (ACE Fig. 17)",
            f"`{row['scheme']}` on {row['trace']}, clip {row['clip']}")  # fmt: skip
    row = pick_run(df, [ACE, "ace-n", BASELINE], trace, clip)
    if row is not None:
        run = results.load_run(row["run_dir"])
        p = plots.plot_acen_timeseries(run, img / "ace-n-timeseries.png", window_s=2.0)
        t, pkt = plots.acen_threshold(run)
        start = plots.acen_window(run, 2.0, None if t is None else t * pkt)
        add("timeseries", p, "ACE-N adaptive pacing over 2 s of one run (ACE Fig. 25)",
            f"`{row['scheme']}` on {row['trace']}, clip {row['clip']}, from t = {start:.2f} s")
    return figs


def _repo_relative(path: str) -> str:
    p = Path(path).resolve()
    return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p)


def write_report(df: Any, args: argparse.Namespace, notes: list[str], argv: Sequence[str]) -> Path:
    out_dir = Path(args.report_dir)
    img = out_dir / "img"
    img.mkdir(parents=True, exist_ok=True)
    md_path = out_dir / f"{args.experiment}.md"
    csv_path = out_dir / f"{args.experiment}-runs.csv"

    order = scheme_order(df)
    sweep_only = [s for s in order if s.startswith(f"{ACE}-T")]
    main = [s for s in order if s not in sweep_only]
    groups = [g for g in NETWORKS if g in set(df["network"])] + sorted(
        set(df["network"]) - set(NETWORKS)
    )
    figs = make_figures(df, args, img, main)

    rel_df = df.copy()  # run directories inside the repository relative to it
    rel_df["run_dir"] = [_repo_relative(d) for d in df["run_dir"]]
    rel_df.to_csv(csv_path, index=False)

    sha, dirty = results.git_info()
    run_shas = df["git_sha"].value_counts()
    cmd = shlex.join(["python", os.path.relpath(Path(argv[0]).resolve(), REPO)
                      if Path(argv[0]).exists() else argv[0], *argv[1:]])  # fmt: skip
    trace_list = "; ".join(
        f"{g}: " + ", ".join(f"`{t}`" for t in dict.fromkeys(df.loc[df["network"] == g, "trace"]))
        for g in groups
    )
    clip_list = ", ".join(f"`{c}`" for c in dict.fromkeys(df["clip"]))

    def fig(key: str) -> str:
        if key not in figs:
            return ""
        path, caption, note = figs[key]
        rel = os.path.relpath(path, out_dir)
        return f"![{caption}]({rel})\n\n_{caption}{'. ' + note if note else ''}._\n\n"

    L: list[str] = []
    L.append(f"# ACE (SIGCOMM '25) in Sluice{' (quick matrix)' if args.quick else ''}\n")
    L.append("Generated by `experiments/ace.py` from the runs; every number below comes from "
             f"`{os.path.relpath(csv_path, out_dir)}` (one row per run).\n")  # fmt: skip
    L.append(f"- git: `{sha}`{' (dirty tree)' if dirty else ''}; runs produced at "
             + ", ".join(f"`{str(k)[:12]}` ({v} runs)" for k, v in run_shas.items()))
    L.append(f"- date: {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    L.append(f"- command: `{cmd}`")
    L.append(
        f"- settings: {args.duration:g} s per run, seed {args.seed}, width {args.width} px, "
        f"fps {'each clip' + chr(39) + 's own' if args.fps is None else f'{args.fps:g}'}, "
        f"x264 encode time {args.encode_time}, quality {args.quality} (VMAF every 5th frame "
        f"with fast), drop-tail queue {args.queue_bytes} B, one-way delay {args.delay_ms:g} ms"
    )
    L.append(f"- traces ({df['trace'].nunique()}): {trace_list}")
    L.append(f"- clips ({df['clip'].nunique()}): {clip_list}")
    L.append(f"- schemes: {', '.join(f'`{s}`' for s in order)}; {len(df)} runs")
    for n in notes:
        L.append(f"- note: {n}")
    L.append("")
    L.append("## Analysis\n")
    analysis = existing_analysis(md_path)  # kept byte for byte
    L.append(ANALYSIS_OPEN + "\0" + ANALYSIS_CLOSE + "\n")

    L.append("## Latency vs quality per network type (ACE Fig. 12)\n")
    L.append("Means over the runs (traces x clips) of each network type; latency is capture to "
             "display of displayed frames.\n")  # fmt: skip
    for g in groups:
        L.append(f"### {g}\n")
        L.append(means_table(df[df["network"] == g], main) + "\n")
    L.append("### All traces\n")
    L.append(means_table(df, main) + "\n")
    L.append(fig("tradeoff"))
    if BASELINE in order:
        L.append(f"### Relative to `{BASELINE}` (WebRTC*)\n")
        L.append("ΔP95: ratio of the mean P95 latencies minus one; ΔVMAF: difference of the mean "
                 "VMAF scores; lower P95 (cells): in how many (trace, clip) cells the scheme's "
                 f"P95 is below `{BASELINE}`'s.\n")  # fmt: skip
        L.append(relative_table(df, main, groups) + "\n")

    L.append("## Latency distribution, loss and stalls (ACE Fig. 14)\n")
    L.append(fig("cdf") + fig("loss"))

    L.append("## Ablation (ACE Fig. 15)\n")
    abl = [s for s in ablation(df) if s in order]
    L.append(means_table(df, abl) + "\n")
    if BASELINE in abl:
        L.append(relative_table(df, abl, []) + "\n")
    L.append(fig("ablation"))

    L.append("## Sensitivity to T (ACE Fig. 16)\n")
    if df["T"].notna().any():
        L.append(f"`{ACE}` with the ACE-N field `{ex.ACE_N_T_FIELD}` set to each T, on the same "
                 "matrix.\n")  # fmt: skip
        L.append(sweep_table(df, groups) + "\n")
        L.append(fig("sweep"))
    else:
        L.append("Not run (see the notes above).\n")

    L.append("## ACE decisions and ACE-N dynamics (ACE Fig. 17, Fig. 25)\n")
    L.append(fig("decisions") + fig("timeseries"))

    L.append("## Definitions\n")
    L.append(
        "- P50/P95/P99/mean: frame latency, capture to display, of the displayed frames of a "
        "run; tables give the mean of the per-run values.\n"
        "- VMAF / VMAF p5: mean and 5th percentile of the per-slot VMAF of what the viewer saw "
        "(a frame not displayed in time shows the previous one).\n"
        "- loss: packets lost at the bottleneck / sent; stall: share of the session with more "
        "than 100 ms between displayed frames (ACE §6.3).\n"
        "- c0 frames: share of the frames with a complexity level that were encoded at c0 "
        "(schemes with ACE-C).\n"
        "- burst frames: share of sent frames whose packets left at least "
        f"{ex.BURST_RATE_FACTOR:g}x faster than the congestion controller's target rate "
        "(one-packet frames count as bursts); a leaky-bucket pacer at 1.1x or 2.5x is slower, "
        "so its frames count as paced except when it sends probes.\n"
        "- Fig. 17: the bottleneck queue a frame found is the last 20 ms sample at or before "
        "its first packet left.\n"
    )
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(L)).rstrip() + "\n"
    text = text.replace("\0", analysis, 1)
    md_path.write_text(text, encoding="utf-8")
    return md_path


# --- main -----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else [PROG, *argv])
    args = parse_args(argv[1:])
    trace_specs, clip_specs = traces(args), clips(args)
    scheme_specs, sweep, notes = schemes(args)
    if not scheme_specs:
        raise Usage("no registered scheme to run")
    df = ex.run_matrix(
        args.experiment, scheme_specs, trace_specs, clip_specs,
        results_root=args.results_dir, jobs=args.jobs, backend=args.backend, rerun=args.rerun,
        skip_unknown=False, duration_s=args.duration, width=args.width, fps=args.fps,
        encode_time=args.encode_time, quality=args.quality, seed=args.seed,
        queue_bytes=args.queue_bytes, delay_ms=args.delay_ms,
    )  # fmt: skip
    if df.empty:
        raise Usage("no finished runs to report")
    df["T"] = df["scheme"].map(sweep).astype(float)
    md = write_report(df, args, notes, argv)
    print(f"{len(df)} runs ({df.attrs.get('ran', 0)} run now); report: {md}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (Usage, SluiceError) as e:
        print(f"{PROG}: error: {' '.join(str(e).split())}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted (finished runs are kept; rerun to resume)", file=sys.stderr)
        sys.exit(130)
