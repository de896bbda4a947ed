"""Co-RTV (Zhang et al.) §V-B in Sluice: the report of ``experiments/cortv.toml`` (model
encoder, the comparison and the sweeps of Fig. 12-16) and ``experiments/cortv-x264.toml``
(x264 at 60 fps). Reads the two results tables and their runs and writes
``<report-dir>/cortv.md`` (tables generated from the runs; the hand-written analysis block is
kept byte for byte), ``cortv-runs.csv`` (one row per run) and ``img/cortv-*.png``::

    sluice matrix experiments/cortv.toml && sluice matrix experiments/cortv-x264.toml && \\
        python -m sluice.analysis.cortv results/cortv results/cortv-x264 \\
        --report-dir docs/results                                      # make cortv-report

Per-run numbers beyond the summary, from the frames: the mean size of the displayed frames
(the paper's quality proxy, Fig. 11-16), the share of "small frames" (encoded at 10-40 % of
the size the congestion controller's rate implies, Fig. 14), and the re-encodes.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import plots, results
from ..errors import SluiceError
from ..plots import plt, save, scheme_color
from . import (
    ANALYSIS_SLOT,
    existing_analysis,
    figure,
    fmt,
    load,
    markdown,
    pct,
    provenance,
    relative_to_cwd,
    signed_pct,
    write_markdown,
)

PROG = "python -m sluice.analysis.cortv"
NAME = "cortv"
BASE = ("copa", "fdcc", "co-rtv", "co-rtv-nofb", "webrtc")
NETWORKS = ("5G", "4G", "Wi-Fi", "synthetic")
DSB = "downlink.access_delay_ms"
#: (label, config path, schemes) of the parameter sweeps (Fig. 13-16).
SWEEPS = (
    ("tau (ms)", "encoder_controller.tau_ms", ("co-rtv",)),
    ("tau (ms)", "cc.tau_ms", ("fdcc",)),
    ("QSF", "encoder_controller.qsf", ("co-rtv",)),
    ("Bw scale", "bottleneck.bw_scale", ("co-rtv",)),
    ("alpha", "bottleneck.alpha", ("co-rtv",)),
)



# --- per-run frame metrics ------------------------------------------------------------------


def _true(col: Any) -> np.ndarray:
    return col.fillna(False).astype(bool).to_numpy() if col is not None else np.array([])


def frame_metrics(run_dir: str) -> dict[str, float]:
    """Mean displayed frame size (bytes), small-frame share, re-encodes, superseded frames."""
    run = results.load_run(run_dir)
    f = run.frames
    out = {"size_displayed": math.nan, "small_share": math.nan, "reencodes": 0.0}
    if f.empty:
        return out
    shown = f[f["displayed_us"].notna()]
    out["size_displayed"] = float(shown["size_bytes"].mean()) if len(shown) else math.nan
    if "cortv_reencode" in f:
        out["reencodes"] = float(_true(f["cortv_reencode"]).sum())
    # Small frames (Fig. 14): encoded at 10-40 % of the size the CC's rate implies.
    s = run.samples
    fps = float(run.config.get("fps") or 30.0)
    if not s.empty and "target_rate_bps" in s:
        ts = s["t_us"].to_numpy(dtype=float)
        rate = s["target_rate_bps"].to_numpy(dtype=float)
        idx = np.searchsorted(ts, f["encode_start_us"].to_numpy(dtype=float), "right") - 1
        ideal = np.where(idx >= 0, rate[np.clip(idx, 0, None)], np.nan) / 8 / fps
        rel = f["size_bytes"].to_numpy(dtype=float) / np.where(ideal > 0, ideal, np.nan)
        ok = np.isfinite(rel)
        if ok.any():
            out["small_share"] = float(((rel >= 0.1) & (rel <= 0.4))[ok].mean())
    return out


def prepare(table: Any) -> Any:
    """The results table with the frame metrics of every run."""
    import pandas as pd

    extra = pd.DataFrame([frame_metrics(d) for d in table["run_dir"]], index=table.index)
    return pd.concat([table, extra], axis=1)


# --- tables ---------------------------------------------------------------------------------

MAIN_COLUMNS = (
    ("P50 ms", "latency_ms_p50", fmt(".0f")),
    ("P95 ms", "latency_ms_p95", fmt(".0f")),
    ("P99 ms", "latency_ms_p99", fmt(".0f")),
    ("mean ms", "latency_ms_mean", fmt(".0f")),
    ("frame kB", "size_displayed", lambda v: fmt(".1f")(v / 1e3)),
    ("fps", "fps", fmt(".1f")),
    ("bn drop %", "bn_drop_rate", pct),
    ("loss %", "loss_rate", pct),
    ("re-encodes", "reencodes", fmt(".0f")),
    ("keyframes", "keyframes", fmt(".1f")),
    ("util %", "utilization", pct),
)


def means(df: Any, names: Sequence[str], columns=MAIN_COLUMNS) -> str:
    rows = []
    for s in names:
        sub = df[df["scheme"] == s]
        if sub.empty:
            continue
        rows.append(
            [
                f"`{s}`",
                str(len(sub)),
                *(f(sub[c].mean() if c in sub else math.nan) for _, c, f in columns),
            ]
        )
    return markdown(["scheme", "runs", *(h for h, _, _ in columns)], rows)


def ratio(df: Any, a: str, b: str, col: str) -> float:
    """Mean of ``col`` for scheme ``a`` over that of ``b``, minus one."""
    x = df.loc[df["scheme"] == a, col].mean()
    y = df.loc[df["scheme"] == b, col].mean()
    return x / y - 1 if y and not math.isnan(y) else math.nan


def wins(df: Any, a: str, b: str, col: str = "latency_ms_p95") -> str:
    """'k/n': (trace, clip, seed) cells where ``a`` has a lower ``col`` than ``b``."""
    key = ["trace", "clip", "seed"]
    x = df[df["scheme"] == a].set_index(key)[col]
    y = df[df["scheme"] == b].set_index(key)[col]
    both = x.index.intersection(y.index)
    return f"{int((x[both] < y[both]).sum())}/{len(both)}" if len(both) else "-"


def comparison(df: Any, groups: Sequence[str]) -> str:
    """Co-RTV against each baseline: ΔP95, ΔP99, Δframe size per network and overall."""
    head = [
        "Co-RTV vs",
        *(f"{g} ΔP95 / Δsize" for g in groups),
        "all ΔP95",
        "all ΔP99",
        "all Δsize",
        "lower P95 (runs)",
    ]
    rows = []
    for b in ("copa", "fdcc", "co-rtv-nofb", "webrtc"):
        if b not in set(df["scheme"]):
            continue
        r = [f"`{b}`"]
        for g in groups:
            sub = df[df["network"] == g]
            r.append(
                f"{signed_pct(ratio(sub, 'co-rtv', b, 'latency_ms_p95'))} / "
                f"{signed_pct(ratio(sub, 'co-rtv', b, 'size_displayed'))}"
            )
        r += [
            signed_pct(ratio(df, "co-rtv", b, "latency_ms_p95")),
            signed_pct(ratio(df, "co-rtv", b, "latency_ms_p99")),
            signed_pct(ratio(df, "co-rtv", b, "size_displayed")),
            wins(df, "co-rtv", b),
        ]
        rows.append(r)
    return markdown(head, rows)


SWEEP_COLUMNS = (
    ("P95 ms", "latency_ms_p95", fmt(".0f")),
    ("P99 ms", "latency_ms_p99", fmt(".0f")),
    ("frame kB", "size_displayed", lambda v: fmt(".1f")(v / 1e3)),
    ("fps", "fps", fmt(".1f")),
    ("small frames %", "small_share", pct),
    ("skipped", "frames_skipped", fmt(".0f")),
    ("bn drop %", "bn_drop_rate", pct),
)


def sweep_rows(df: Any, path: str, schemes: Sequence[str]) -> Any:
    """Rows of the schemes swept over ``path`` (the base scheme and its variants)."""
    if path not in df:
        return df.iloc[0:0]
    base = df["base_scheme"].fillna(df["scheme"]) if "base_scheme" in df else df["scheme"]
    return df[df[path].notna() & base.isin(schemes)]


def sweep_table(df: Any, label: str, path: str, schemes: Sequence[str]) -> str:
    sw = sweep_rows(df, path, schemes)
    if sw.empty:
        return "Not in these runs."
    rows = []
    for (s, v), sub in sorted(sw.groupby(["scheme", path]), key=lambda x: (x[0][0][:4], x[0][1])):
        rows.append(
            [f"`{s}`", f"{v:g}", str(len(sub)), *(f(sub[c].mean()) for _, c, f in SWEEP_COLUMNS)]
        )
    return markdown(["scheme", label, "runs", *(h for h, _, _ in SWEEP_COLUMNS)], rows)


# --- figures --------------------------------------------------------------------------------


def plot_p95_size(df: Any, out: Path, groups: Sequence[str]) -> Path:
    """Fig. 11's two bars as one plane per network: mean P95 (x) and frame size (y)."""
    n = len(groups)
    fig, axes = plt.subplots(
        1, n, figsize=(3.6 * n + 1.5, 3.6), squeeze=False, layout="constrained"
    )
    for ax, g in zip(axes[0], groups):
        sub = df[df["network"] == g]
        for s in BASE:
            rows = sub[sub["scheme"] == s]
            if rows.empty:
                continue
            x, y = rows["latency_ms_p95"].mean(), rows["size_displayed"].mean() / 1e3
            ax.scatter([x], [y], color=scheme_color(s), s=60, edgecolor="k", lw=0.6, label=s)
        ax.set_xscale("log")
        ax.set_xlabel("mean P95 latency (ms, log)")
        ax.set_ylabel("mean displayed frame (kB)")
        ax.set_title(g, fontsize=10)
        ax.grid(True, alpha=0.3, which="both")
    h, lab = axes[0][0].get_legend_handles_labels()
    fig.legend(h, lab, loc="outside right center", fontsize=8)
    fig.suptitle("P95 latency vs frame size per network (Co-RTV Fig. 11)", fontsize=10)
    return save(fig, out)


def plot_dsb(df: Any, out: Path) -> Path:
    """Fig. 12: P95 and frame size against the sender-bottleneck delay."""
    sw = sweep_rows(df, DSB, ("copa", "fdcc", "co-rtv"))
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
    for s in ("copa", "fdcc", "co-rtv"):
        rows = sw[sw["base_scheme"].fillna(sw["scheme"]) == s]
        if rows.empty:
            continue
        g = rows.groupby(DSB)
        a.plot(g["latency_ms_p95"].mean(), marker="o", color=scheme_color(s), label=s)
        b.plot(g["size_displayed"].mean() / 1e3, marker="o", color=scheme_color(s), label=s)
    a.set_yscale("log")
    a.set_ylabel("mean P95 latency (ms, log)")
    b.set_ylabel("mean displayed frame (kB)")
    for ax in (a, b):
        ax.set_xlabel("sender-bottleneck delay, one way (ms)")
        ax.grid(True, alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.suptitle("Sender-bottleneck delay (Co-RTV Fig. 12), all traces", fontsize=10)
    return save(fig, out)


def plot_sweeps(df: Any, out: Path) -> Path:
    """Fig. 13-16: one panel per sweep; P95 (left axis) and frame size (right axis)."""
    panels = [
        ("tau (ms)", [("encoder_controller.tau_ms", "co-rtv"), ("cc.tau_ms", "fdcc")]),
        ("QSF", [("encoder_controller.qsf", "co-rtv")]),
        ("Bw scale", [("bottleneck.bw_scale", "co-rtv")]),
        ("alpha", [("bottleneck.alpha", "co-rtv")]),
    ]
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6), layout="constrained")
    for ax, (label, lines) in zip(axes, panels):
        ax2 = ax.twinx()
        for path, s in lines:
            rows = sweep_rows(df, path, (s,))
            if rows.empty:
                continue
            g = rows.groupby(path)
            c = scheme_color(s)
            ax.plot(g["latency_ms_p95"].mean(), marker="o", color=c, label=f"{s} P95")
            ax2.plot(
                g["size_displayed"].mean() / 1e3,
                marker="s",
                ls="--",
                color=c,
                alpha=0.6,
                label=f"{s} frame",
            )
        ax.set_xlabel(label)
        ax.set_ylabel("mean P95 (ms), solid")
        ax2.set_ylabel("mean frame (kB), dashed")
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(
        "Sweeps (Co-RTV Fig. 13 tau, 14 QSF, 15 Bw error, 16 alpha), all traces", fontsize=10
    )
    return save(fig, out)


def plot_step(df: Any, out: Path, trace: str = "step-20-2") -> Path | None:
    """Frame latency over time of the first seed on the 10x step trace (``trace``, else the
    first synthetic trace, else the first trace), one line per scheme."""
    if trace not in set(df["trace"]):
        synthetic = df.loc[df["network"] == "synthetic", "trace"]
        trace = synthetic.iloc[0] if len(synthetic) else df["trace"].iloc[0]
    seed = df.loc[df["trace"] == trace, "seed"].min()
    fig, ax = plt.subplots(figsize=(9, 3.8), layout="constrained")
    drawn = False
    for s in ("copa", "fdcc", "co-rtv", "co-rtv-nofb"):
        rows = df[(df["scheme"] == s) & (df["trace"] == trace) & (df["seed"] == seed)]
        if rows.empty:
            continue
        f = results.load_run(rows["run_dir"].iloc[0]).frames
        f = f[f["latency_us"].notna()]
        ax.plot(
            f["capture_us"] / 1e6, f["latency_us"] / 1e3, lw=0.8, color=scheme_color(s), label=s
        )
        drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set_yscale("log")
    ax.set_xlim(0, min(30.0, float(df["duration_s"].max()) if "duration_s" in df else 30.0))
    ax.set_xlabel(
        "capture time (s)"
        + ("; 20 Mbps, 2 Mbps from 10 s to 15 s, again from 25 s" if trace == "step-20-2" else "")
    )
    ax.set_ylabel("frame latency (ms, log)")
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.suptitle(f"Frame latency on {trace} (seed {seed}, model encoder)", fontsize=10)
    return save(fig, out)


# --- the report -----------------------------------------------------------------------------


def write_report(
    model_dir: str,
    x264_dir: str | None,
    report_dir: str | os.PathLike[str],
    command: str | None = None,
) -> Path:
    import pandas as pd

    res = load(model_dir)
    df = prepare(res.table)
    if df.empty:
        raise SluiceError(f"{res.path}: no finished runs to report")
    xdf = None
    if x264_dir is not None:
        xres = load(x264_dir)
        xdf = prepare(xres.table)
    out_dir = Path(report_dir)
    img = out_dir / "img"
    img.mkdir(parents=True, exist_ok=True)
    md_path = out_dir / f"{NAME}.md"
    csv_path = out_dir / f"{NAME}-runs.csv"
    both = pd.concat([df, xdf]) if xdf is not None else df.copy()
    both["run_dir"] = [relative_to_cwd(d) for d in both["run_dir"]]
    both.to_csv(csv_path, index=False)

    # The default cells: the registered schemes (variants only where a sweep's value is the
    # default, which the table lists under the scheme's own name).
    main = df[df["scheme"].isin(BASE)]
    main = main[main[DSB].isna() | (main[DSB] == 20)] if DSB in main else main
    groups = [g for g in NETWORKS if g in set(main["network"])]
    figs = {
        "p95size": (
            plot_p95_size(main, img / "cortv-p95-size.png", groups),
            "Mean P95 latency and displayed frame size per network (Fig. 11)",
        ),
        "cdf": (
            plots.plot_latency_cdf_pooled(
                main, img / "cortv-latency-cdf.png", schemes=list(BASE), logx=True
            ),
            "Frame latency CDF, all default runs pooled",
        ),
        "dsb": (plot_dsb(df, img / "cortv-dsb.png"), "Sender-bottleneck delay (Fig. 12)"),
        "sweeps": (
            plot_sweeps(df, img / "cortv-sweeps.png"),
            "tau, QSF, Bw scale and alpha (Fig. 13-16)",
        ),
    }
    step = plot_step(main, img / "cortv-step.png")
    if step is not None:
        figs["step"] = (step, "Frame latency over time on the 10x step, first seed")

    def fig(key: str) -> str:
        if key not in figs:
            return ""
        return figure(*figs[key], out_dir)

    L: list[str] = ["# Co-RTV (Zhang et al.) in Sluice\n"]
    L.append(
        f"Generated by `{PROG}` from the runs of `sluice matrix experiments/cortv.toml` "
        "and `sluice matrix experiments/cortv-x264.toml` (`make cortv-report`); every "
        f"number below comes from `{os.path.relpath(csv_path, out_dir)}` (one row per "
        "run).\n"
    )
    L += provenance(both["git_sha"], command)
    cfg = results.read_header(df["run_dir"].iloc[0]).get("config") or {}
    down = cfg.get("downlink") or {}
    L.append(
        f"- model encoder: {cfg.get('duration_s', math.nan):g} s per run, seeds "
        f"{', '.join(str(s) for s in sorted(set(df['seed'])))}, {cfg.get('fps'):g} fps; "
        f"sender-bottleneck {down.get('access_delay_ms', math.nan):g} ms one way (RTT_BN "
        f"{2 * down.get('access_delay_ms', math.nan):g} ms), bottleneck-receiver "
        f"{down.get('delay_ms', math.nan):g} ms one way, unlimited queue; {len(df)} runs"
    )
    if xdf is not None and len(xdf):
        xcfg = results.read_header(xdf["run_dir"].iloc[0]).get("config") or {}
        enc = xcfg.get("encoder") or {}
        L.append(
            f"- x264: {xcfg.get('duration_s', math.nan):g} s per run, "
            f"{enc.get('width')}x{enc.get('height')} at {xcfg.get('fps'):g} fps, preset "
            f"{enc.get('preset')}, encode time {enc.get('encode_time')}, clip "
            f"{', '.join(f'`{c}`' for c in dict.fromkeys(xdf['clip']))}; {len(xdf)} runs"
        )
    for g in groups:
        ts = ", ".join(f"`{t}`" for t in dict.fromkeys(main.loc[main["network"] == g, "trace"]))
        L.append(f"- {g}: {ts}")
    L.append("")
    L.append("## Analysis\n")
    analysis = existing_analysis(md_path)
    L.append(ANALYSIS_SLOT)

    L.append("## Co-RTV against the baselines (Fig. 11)\n")
    L.append(
        "Default settings (sender-bottleneck 20 ms, tau 50 ms, QSF 0, alpha 0.5, w 50 "
        "ms, k 2). Means of the per-run values; latency is capture to display of the "
        "displayed frames (re-encoded frames from their original capture); frame kB: mean "
        "size of the displayed frames.\n"
    )
    for g in groups:
        L.append(f"### {g}\n")
        L.append(means(main[main["network"] == g], BASE) + "\n")
    L.append("### All traces\n")
    L.append(means(main, BASE) + "\n")
    L.append("### Co-RTV relative to each baseline\n")
    L.append(
        "Ratio of the means minus one; lower P95 (runs): in how many (trace, seed) runs "
        "Co-RTV's P95 is below the baseline's.\n"
    )
    L.append(comparison(main, groups) + "\n")
    L.append(fig("p95size") + fig("cdf") + fig("step"))

    L.append("## Sender-bottleneck delay (Fig. 12)\n")
    L.append(
        "The one-way delay between the sender and the bottleneck; media, the "
        "bottleneck's reports and the receiver's feedback all cross it. All traces.\n"
    )
    L.append(sweep_table(df, "d_sb ms", DSB, ("copa", "fdcc", "co-rtv")) + "\n")
    L.append(fig("dsb"))
    L.append("## tau, QSF, bandwidth error and alpha (Fig. 13-16)\n")
    L.append(
        "All traces. Small frames: encoded at 10-40 % of the size the congestion "
        "controller's rate implies (rate / 8 / fps; Fig. 14).\n"
    )
    for label, path, schemes in SWEEPS:
        L.append(f"### {label}: `{path}`\n")
        L.append(sweep_table(df, label, path, schemes) + "\n")
    L.append(fig("sweeps"))

    L.append("## x264 at 60 fps\n")
    if xdf is not None and len(xdf):
        xcols = (
            *MAIN_COLUMNS[:5],
            ("VMAF", "vmaf_mean", fmt(".1f")),
            ("VMAF p5", "vmaf_p5", fmt(".1f")),
            *MAIN_COLUMNS[5:],
        )
        for t in dict.fromkeys(xdf["trace"]):
            L.append(f"### {t}\n")
            L.append(means(xdf[xdf["trace"] == t], BASE, xcols) + "\n")
        L.append("### All\n")
        L.append(means(xdf, BASE, xcols) + "\n")
    else:
        L.append("Not run.\n")
    L.append("## Definitions\n")
    L.append(
        "- bn drop %: packets the Co-RTV bottleneck dropped on purpose (whole frames) over "
        "packets that reached it (`bn_drop_rate`); loss %: network loss only (`loss_rate`).\n"
        "- re-encodes: frames encoded again after a drop report (fresh ids, the source frame of "
        "a dropped one).\n"
        "- keyframes: encoded keyframes per run (1 = the first frame only).\n"
        "- util %: bytes delivered over the bytes the trace could carry.\n"
    )
    return write_markdown(md_path, L, analysis)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("model", metavar="MODEL_RESULTS", help="results/cortv")
    p.add_argument(
        "x264",
        metavar="X264_RESULTS",
        nargs="?",
        default=None,
        help="results/cortv-x264 (optional)",
    )
    p.add_argument(
        "--report-dir",
        default="docs/results",
        metavar="DIR",
        help="where cortv.md, cortv-runs.csv and img/ go (default docs/results)",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(args_list)
    try:
        md = write_report(
            args.model, args.x264, args.report_dir, command=shlex.join([*PROG.split(), *args_list])
        )
    except SluiceError as e:
        print(f"{PROG}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    print(f"report: {md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
