"""Co-RTV (Zhang et al.) §V-B in Sluice: the report of ``experiments/cortv.toml`` (model
encoder, the comparison and the sweeps of Fig. 12-16) and ``experiments/cortv-x264.toml``
(x264 at 60 fps). Reads the two results tables and their runs and writes
``<report-dir>/cortv.md`` (tables generated from the runs; the hand-written analysis block is
kept byte for byte), ``cortv-runs.csv`` (one row per run) and ``img/cortv-*.png``::

    sluice matrix experiments/cortv.toml && sluice matrix experiments/cortv-x264.toml && \\
        sluice matrix experiments/cortv-fig4.toml && \\
        sluice matrix experiments/checks/cortv-heldout.toml && \\
        python -m sluice.analysis.cortv results/cortv results/cortv-x264 \\
        --fig4 results/cortv-fig4 --heldout results/cortv-heldout \\
        --report-dir docs/results                                      # make cortv-report

The baseline is the paper's COPA, ``copa-salsify`` (XQUIC's Copa with Salsify's encoder
integration); latency leads with every capture slot (``latency_all_ms``) and comparisons are
per cell (:mod:`sluice.analysis.cells`).

Per-run numbers beyond the summary, from the frames: the mean size of the displayed frames
(the paper's quality proxy, Fig. 11-16), the share of "small frames" (encoded at 10-40 % of
the size the congestion controller's rate implies, Fig. 14), and the re-encodes.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import results
from ..errors import SluiceError
from ..plots import plt, save, scheme_color, tidy_log_axis
from . import (
    ANALYSIS_SLOT,
    add_report_dir,
    existing_analysis,
    figure,
    fmt,
    load,
    markdown,
    pct,
    prose,
    provenance,
    relative_to_cwd,
    report_dir_of,
    report_main,
    report_parser,
    write_markdown,
)
from .cells import (
    MEANS_LEGEND,
    VERSUS_LEGEND,
    group_table,
    paired,
    plot_slot_cdf,
    pooled_table,
    versus_table,
)

PROG = "python -m sluice.analysis.cortv"
REPORT = "cortv"  # templates/cortv.md
NAME = "cortv"
#: The paper's COPA (§II: XQUIC's Copa, "we incorporated the Salsify into our encoder"): the
#: baseline of every relative number.
BASELINE = "copa-salsify"
BASE = ("copa-salsify", "fdcc", "co-rtv", "co-rtv-k2", "co-rtv-nofb", "copa", "webrtc")
#: The schemes of the plots (not GCC, not in the paper).
PLOTTED = ("copa-salsify", "fdcc", "co-rtv", "co-rtv-k2", "co-rtv-nofb", "copa")
#: Fig. 11's plane also shows WebRTC's GCC, as the tables do: the reference a reader knows.
PLOTTED_P95_SIZE = (*PLOTTED, "webrtc")
#: Fig. 4's average frame delays (§II-C; E2E RTT 60 ms, 5G and Wi-Fi fluctuations).
FIG4_PAPER = {"copa-salsify": 213.3, "fdcc": 87.1}
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
    ("all-slot P95 ms", "latency_all_ms_p95", fmt(".0f")),
    ("all-slot P99 ms", "latency_all_ms_p99", fmt(".0f")),
    ("all-slot mean ms", "latency_all_ms_mean", fmt(".0f")),
    ("shown P50 ms", "latency_ms_p50", fmt(".0f")),
    ("shown P95 ms", "latency_ms_p95", fmt(".0f")),
    ("shown mean ms", "latency_ms_mean", fmt(".0f")),
    ("slots > 200 ms %", "stall_ratio_200ms", pct),
    ("freezes", "freeze_count", fmt(".1f")),
    ("freeze s", "total_freezes_duration_s", fmt(".2f")),
    ("frame kB", "size_displayed", lambda v: fmt(".1f")(v / 1e3)),
    ("fps", "fps", fmt(".1f")),
    ("bn drop %", "bn_drop_rate", pct),
    ("loss %", "loss_rate", pct),
    ("re-encodes", "reencodes", fmt(".0f")),
    ("keyframes", "keyframes", fmt(".1f")),
    ("util %", "utilization", pct),
)


def means(df: Any, names: Sequence[str], columns=MAIN_COLUMNS) -> str:
    """Markdown: per scheme its runs and the mean of each column ± the 95 % interval."""
    from .cells import means_table

    return means_table(df, names, columns)


def ratio(df: Any, a: str, b: str, col: str) -> float:
    """Mean of ``col`` for scheme ``a`` over that of ``b`` over the cells both ran, minus
    one."""
    return paired(df, a, b, col).of_means - 1


def _pc(p: Any) -> str:
    if p.n == 0:
        return "-"
    if not p.base_mean:
        return f"{p.mean:.3g} against 0"
    return (f"{p.of_means - 1:+.0%} (median {p.median - 1:+.0%}; lower in {p.lower} of "
            f"{p.n})")  # fmt: skip


def comparison(df: Any, groups: Sequence[str], scheme: str = "co-rtv") -> str:
    """``scheme`` against each baseline per network and overall: all-slot P95 (ratio of the
    means, median per cell, lower in k of n cells), all-slot P99, shown P95 and the
    displayed frame size."""
    head = [f"`{scheme}` vs", *(f"{g}: all-slot P95" for g in groups), "all: all-slot P95",
            "all: all-slot P99", "all: shown P95", "all: frame size"]  # fmt: skip
    rows = []
    for b in (BASELINE, "fdcc", "co-rtv-k2", "co-rtv-nofb", "copa", "webrtc"):
        if b == scheme or b not in set(df["scheme"]) or scheme not in set(df["scheme"]):
            continue
        r = [f"`{b}`"]
        for g in groups:
            r.append(_pc(paired(df[df["network"] == g], scheme, b, "latency_all_ms_p95")))
        r += [_pc(paired(df, scheme, b, c)) for c in ("latency_all_ms_p95",
              "latency_all_ms_p99", "latency_ms_p95")]  # fmt: skip
        p = paired(df, scheme, b, "size_displayed")
        r.append(f"{p.of_means - 1:+.0%} (larger in {p.higher} of {p.n})" if p.n else "-")
        rows.append(r)
    return markdown(head, rows)


SWEEP_COLUMNS = (
    ("all-slot P95 ms", "latency_all_ms_p95", fmt(".0f")),
    ("all-slot P99 ms", "latency_all_ms_p99", fmt(".0f")),
    ("shown P95 ms", "latency_ms_p95", fmt(".0f")),
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
        for s in PLOTTED_P95_SIZE:
            rows = sub[sub["scheme"] == s]
            if rows.empty:
                continue
            x, y = rows["latency_all_ms_p95"].mean(), rows["size_displayed"].mean() / 1e3
            ax.scatter([x], [y], color=scheme_color(s), s=60, edgecolor="k", lw=0.6, label=s)
        ax.set_xscale("log")
        tidy_log_axis(ax.xaxis)
        ax.set_xlabel("mean all-slot P95 latency (ms, log)")
        ax.set_ylabel("mean displayed frame (kB)")
        ax.set_title(g, fontsize=10)
        ax.grid(True, alpha=0.3, which="both")
    h, lab = axes[0][0].get_legend_handles_labels()
    fig.legend(h, lab, loc="outside right center", fontsize=8)
    fig.suptitle("All-slot P95 latency vs frame size per network (Co-RTV Fig. 11)", fontsize=10)
    return save(fig, out)


def plot_dsb(df: Any, out: Path) -> Path:
    """Fig. 12: P95 and frame size against the sender-bottleneck delay."""
    sw = sweep_rows(df, DSB, (BASELINE, "fdcc", "co-rtv"))
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
    for s in (BASELINE, "fdcc", "co-rtv"):
        rows = sw[sw["base_scheme"].fillna(sw["scheme"]) == s]
        if rows.empty:
            continue
        g = rows.groupby(DSB)
        a.plot(g["latency_all_ms_p95"].mean(), marker="o", color=scheme_color(s), label=s)
        b.plot(g["size_displayed"].mean() / 1e3, marker="o", color=scheme_color(s), label=s)
    a.set_yscale("log")
    tidy_log_axis(a.yaxis)
    a.set_ylabel("mean all-slot P95 latency (ms, log)")
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
            ax.plot(g["latency_all_ms_p95"].mean(), marker="o", color=c, label=f"{s} P95")
            ax2.plot(
                g["size_displayed"].mean() / 1e3,
                marker="s",
                ls="--",
                color=c,
                alpha=0.6,
                label=f"{s} frame",
            )
        ax.set_xlabel(label)
        ax.set_ylabel("mean all-slot P95 (ms), solid")
        ax2.set_ylabel("mean frame (kB), dashed")
        # From zero, so a few per cent do not fill the panel.
        for a in (ax, ax2):
            if a.has_data():
                a.set_ylim(0, a.dataLim.y1 * 1.15)
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
    from .pooled import slot_latencies_ms

    for s in (BASELINE, "fdcc", "co-rtv", "co-rtv-k2", "co-rtv-nofb"):
        rows = df[(df["scheme"] == s) & (df["trace"] == trace) & (df["seed"] == seed)]
        if rows.empty:
            continue
        run = results.load_run(rows["run_dir"].iloc[0])
        lat = slot_latencies_ms(run)
        fps = float(run.config.get("fps") or 60.0)
        ax.plot(np.arange(lat.size) / fps, lat, lw=0.8, color=scheme_color(s), label=s)
        drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set_yscale("log")
    tidy_log_axis(ax.yaxis)
    ax.set_xlim(0, min(30.0, float(df["duration_s"].max()) if "duration_s" in df else 30.0))
    ax.set_xlabel(
        "capture time (s)"
        + ("; 20 Mbps, 2 Mbps from 10 s to 15 s, again from 25 s" if trace == "step-20-2" else "")
    )
    ax.set_ylabel("latency per capture slot (ms, log)")
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.suptitle(f"Frame latency on {trace} (seed {seed}, model encoder)", fontsize=10)
    return save(fig, out)


# --- the report -----------------------------------------------------------------------------


def fig4_table(df: Any) -> str:
    """Fig. 4: per scheme, the average frame delay (the mean of the displayed frames'
    latency, and over every capture slot) per network and over all runs, the worst slot
    (mean over runs), against the paper's."""
    groups = [g for g in ("Wi-Fi", "5G") if g in set(df["network"])]
    head = ["scheme", "paper: average frame delay ms",
            *(f"{g}: shown mean ms" for g in groups), "all: shown mean ms",
            "all: all-slot mean ms", "all: shown P95 ms", "all: worst slot ms (mean of runs)",
            "video Mbps"]  # fmt: skip
    rows = []
    for s in ("copa-salsify", "fdcc", "co-rtv", "co-rtv-k2", "copa", "webrtc"):
        sub = df[df["scheme"] == s]
        if sub.empty:
            continue
        paper = FIG4_PAPER.get(s)
        rows.append([
            f"`{s}`", fmt(".1f")(paper) if paper else "-",
            *(fmt(".0f")(sub.loc[sub["network"] == g, "latency_ms_mean"].mean())
              for g in groups),
            fmt(".0f")(sub["latency_ms_mean"].mean()),
            fmt(".0f")(sub["latency_all_ms_mean"].mean()),
            fmt(".0f")(sub["latency_ms_p95"].mean()),
            fmt(".0f")(sub["latency_all_ms_max"].mean() if "latency_all_ms_max" in sub
                       else math.nan),
            fmt(".2f")(sub["video_bitrate_bps"].mean() / 1e6),
        ])  # fmt: skip
    return markdown(head, rows)


def fig4_per_trace(df: Any) -> str:
    """Fig. 4 per trace: the mean displayed-frame delay of each scheme (mean over seeds)."""
    names = [s for s in ("copa-salsify", "fdcc", "co-rtv", "co-rtv-k2", "copa", "webrtc")
             if s in set(df["scheme"])]  # fmt: skip
    rows = []
    for t in dict.fromkeys(df["trace"]):
        sub = df[df["trace"] == t]
        rows.append([f"`{t}`", str(sub["network"].iloc[0]),
                     *(fmt(".0f")(sub.loc[sub["scheme"] == s, "latency_ms_mean"].mean())
                       for s in names)])  # fmt: skip
    return markdown(["trace", "network", *(f"`{s}`" for s in names)], rows)


def write_report(
    model_dir: str,
    x264_dir: str | None,
    report_dir: str | os.PathLike[str],
    command: str | None = None,
    fig4_dir: str | None = None,
    heldout_dir: str | None = None,
) -> Path:
    import pandas as pd

    res = load(model_dir)
    df = prepare(res.table)
    if df.empty:
        raise SluiceError(f"{res.path}: no finished runs to report")
    # The default cells: the registered schemes (variants only where a sweep's value is the
    # default, which the table lists under the scheme's own name). Checked before anything
    # is written.
    main = df[df["scheme"].isin(BASE)]
    main = main[main[DSB].isna() | (main[DSB] == 20)] if DSB in main else main
    groups = [g for g in NETWORKS if g in set(main["network"])]
    plotted = [s for s in PLOTTED if s in set(main["scheme"])]
    if not groups or not plotted:
        raise SluiceError(
            f"{res.path}: no runs of this report's schemes ({', '.join(PLOTTED)}) at their "
            f"defaults on its networks ({', '.join(NETWORKS)}); it reports "
            "experiments/cortv.toml's results"
        )
    xdf = prepare(load(x264_dir).table) if x264_dir is not None else None
    f4 = prepare(load(fig4_dir).table) if fig4_dir is not None else None
    ho = prepare(load(heldout_dir).table) if heldout_dir is not None else None
    out_dir = Path(report_dir)
    img = out_dir / "img"
    img.mkdir(parents=True, exist_ok=True)
    md_path = out_dir / f"{NAME}.md"
    csv_path = out_dir / f"{NAME}-runs.csv"
    parts = [df.assign(matrix=res.name)]
    for name, t in (("cortv-x264", xdf), ("cortv-fig4", f4), ("cortv-heldout", ho)):
        if t is not None:
            parts.append(t.assign(matrix=name))
    both = pd.concat(parts, ignore_index=True)
    both["run_dir"] = [relative_to_cwd(d) for d in both["run_dir"]]
    both.to_csv(csv_path, index=False)

    figs = {
        "p95size": (
            plot_p95_size(main, img / "cortv-p95-size.png", groups),
            "Mean all-slot P95 latency and displayed frame size per network (Fig. 11)",
        ),
        "cdf": (
            plot_slot_cdf(main, plotted, img / "cortv-latency-cdf.png",
                          "Latency of every capture slot, all default runs pooled"),
            "All-slot latency CDF, all default runs pooled",
        ),
        "dsb": (plot_dsb(df, img / "cortv-dsb.png"), "Sender-bottleneck delay (Fig. 12)"),
        "sweeps": (
            plot_sweeps(df, img / "cortv-sweeps.png"),
            "tau, QSF, Bw scale and alpha (Fig. 13-16)",
        ),
    }  # fmt: skip
    step = plot_step(main, img / "cortv-step.png")
    if step is not None:
        figs["step"] = (step, "Latency per capture slot over time on the 10x step, first seed")

    def fig(key: str) -> str:
        if key not in figs:
            return ""
        return figure(*figs[key], out_dir)

    plans = ["cortv", *(n for n, t in (("cortv-x264", xdf), ("cortv-fig4", f4),
                                       ("checks/cortv-heldout", ho)) if t is not None)]
    L: list[str] = ["# Co-RTV (Zhang et al.) in Sluice\n"]
    plan_list = ", ".join(f"`experiments/{n}.toml`" for n in plans)
    L.append(prose(REPORT, "intro", prog=PROG, plans=plan_list,
                   csv=os.path.relpath(csv_path, out_dir)))  # fmt: skip
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
    if f4 is not None and len(f4):
        fcfg = results.read_header(f4["run_dir"].iloc[0]).get("config") or {}
        fd = fcfg.get("downlink") or {}
        rtt = 2 * (fd.get("access_delay_ms", 0) + fd.get("delay_ms", 0))
        L.append(f"- Fig. 4 setting: model encoder, {fcfg.get('duration_s', math.nan):g} s, "
                 f"seeds {', '.join(str(s) for s in sorted(set(f4['seed'])))}, end-to-end "
                 f"RTT {rtt:g} ms; {len(f4)} runs")  # fmt: skip
    if ho is not None and len(ho):
        L.append(f"- held-out check: {len(ho)} runs on "
                 + ", ".join(f"`{t}`" for t in dict.fromkeys(ho["trace"])))
    for g in groups:
        ts = ", ".join(f"`{t}`" for t in dict.fromkeys(main.loc[main["network"] == g, "trace"]))
        L.append(f"- {g}: {ts}")
    L.append("")
    L.append(prose(REPORT, "baseline"))

    L.append("## Headline against the paper\n")
    rows = []
    if "co-rtv" in set(main["scheme"]):
        def cell(t: Any, a: str, b: str, col: str = "latency_all_ms_p95") -> str:
            return _pc(paired(t, a, b, col)) if t is not None and len(t) else "not run"

        def size(t: Any) -> str:
            if t is None or not len(t):
                return "not run"
            return f"{t['trace'].nunique()} traces x {t['seed'].nunique()} seeds"

        heads = ["claim", "paper", f"model, {size(main)}", f"x264, {size(xdf)}",
                 f"held-out, {size(ho)}"]  # fmt: skip

        def larger(t: Any) -> str:
            if t is None or not len(t):
                return "not run"
            p = paired(t, "co-rtv", BASELINE, "size_displayed")
            return f"{p.of_means - 1:+.0%} (larger in {p.higher} of {p.n})" if p.n else "-"

        for a in ("co-rtv", "co-rtv-k2"):
            rows.append([f"`{a}` vs COPA (`{BASELINE}`), all-slot P95", "over -69 %",
                         cell(main, a, BASELINE), cell(xdf, a, BASELINE),
                         cell(ho, a, BASELINE)])  # fmt: skip
            rows.append([f"`{a}` vs FDCC, all-slot P95", "-37.5 % (delay)",
                         cell(main, a, "fdcc"), cell(xdf, a, "fdcc"), cell(ho, a, "fdcc")])
        rows.append([f"`co-rtv` vs COPA (`{BASELINE}`), shown P95", "over -69 %",
                     cell(main, "co-rtv", BASELINE, "latency_ms_p95"),
                     cell(xdf, "co-rtv", BASELINE, "latency_ms_p95"),
                     cell(ho, "co-rtv", BASELINE, "latency_ms_p95")])  # fmt: skip
        rows.append(["`co-rtv` vs w/o fb, all-slot P95", "over -69 %",
                     cell(main, "co-rtv", "co-rtv-nofb"), cell(xdf, "co-rtv", "co-rtv-nofb"),
                     cell(ho, "co-rtv", "co-rtv-nofb")])  # fmt: skip
        rows.append(["`co-rtv` vs COPA, frame size", "+28.2-36.3 %", larger(main), larger(xdf),
                     larger(ho)])  # fmt: skip
        L.append(prose(REPORT, "headline"))
        L.append(markdown(heads, rows) + "\n")
    if f4 is not None and len(f4):
        c = f4[f4["scheme"] == BASELINE]["latency_ms_mean"].mean()
        d = f4[f4["scheme"] == "fdcc"]["latency_ms_mean"].mean()
        L.append(prose(REPORT, "headline-fig4", baseline=BASELINE, copa=f"{c:.0f}",
                       fdcc=f"{d:.0f}"))  # fmt: skip

    L.append("## Analysis\n")
    analysis = existing_analysis(md_path)
    L.append(ANALYSIS_SLOT)

    L.append("## Co-RTV against the baselines (Fig. 11)\n")
    L.append(prose(REPORT, "fig11", legend=MEANS_LEGEND))
    for g in groups:
        L.append(f"### {g}\n")
        L.append(means(main[main["network"] == g], BASE) + "\n")
    L.append("### All traces\n")
    L.append(means(main, BASE) + "\n")
    L.append("### Co-RTV relative to each baseline\n")
    L.append(prose(REPORT, "fig11-relative"))
    L.append(comparison(main, groups) + "\n")
    L.append("`co-rtv-k2` (the paper's k = 2) relative to each:\n")
    L.append(comparison(main, groups, "co-rtv-k2") + "\n")
    L.append(f"Against `{BASELINE}`, every metric, all traces:\n")
    L.append(versus_table(main, [s for s in BASE if s != "webrtc"], BASELINE) + "\n")
    L.append(VERSUS_LEGEND + "\n")
    L.append("All-slot latencies of every default run pooled:\n")
    L.append(pooled_table(main, list(BASE), BASELINE) + "\n")
    L.append(fig("p95size") + fig("cdf") + fig("step"))

    if f4 is not None and len(f4):
        L.append("## Fig. 4's setting: average frame delay at an RTT of 60 ms (§II-C)\n")
        L.append(prose(REPORT, "fig4"))
        L.append(fig4_table(f4) + "\n")
        L.append("Mean displayed-frame delay (ms) per trace, mean over seeds:\n")
        L.append(fig4_per_trace(f4) + "\n")
        L.append(means(f4, [s for s in BASE if s in set(f4["scheme"])]) + "\n")
        L.append(group_table(f4, [s for s in BASE if s in set(f4["scheme"])], BASELINE,
                             "latency_ms_mean", "ratio", ["Wi-Fi", "5G"]) + "\n")

    if ho is not None and len(ho):
        L.append("## Held-out check: three real traces no report uses (issue 24)\n")
        L.append(prose(REPORT, "heldout"))
        names = [s for s in ("copa-salsify", "co-rtv", "co-rtv-k2", "co-rtv-nofb", "fdcc",
                             "copa") if s in set(ho["scheme"])]  # fmt: skip
        L.append(pooled_table(ho, names, BASELINE) + "\n")
        L.append(means(ho, names) + "\n")
        L.append(comparison(ho, list(dict.fromkeys(ho["network"]))) + "\n")

    L.append("## Sender-bottleneck delay (Fig. 12)\n")
    L.append(prose(REPORT, "dsb"))
    L.append(sweep_table(df, "d_sb ms", DSB, (BASELINE, "fdcc", "co-rtv")) + "\n")
    L.append(fig("dsb"))
    L.append("## tau, QSF, bandwidth error and alpha (Fig. 13-16)\n")
    L.append(prose(REPORT, "sweeps"))
    for label, path, schemes in SWEEPS:
        L.append(f"### {label}: `{path}`\n")
        L.append(sweep_table(df, label, path, schemes) + "\n")
    L.append(fig("sweeps"))

    L.append("## x264 at 60 fps\n")
    if xdf is not None and len(xdf):
        xcols = (
            *MAIN_COLUMNS[:10],
            ("VMAF", "vmaf_mean", fmt(".1f")),
            ("VMAF p5", "vmaf_p5", fmt(".1f")),
            *MAIN_COLUMNS[10:],
        )
        for t in dict.fromkeys(xdf["trace"]):
            L.append(f"### {t}\n")
            L.append(means(xdf[xdf["trace"] == t], BASE, xcols) + "\n")
        L.append("### All\n")
        L.append(means(xdf, BASE, xcols) + "\n")
        L.append(comparison(xdf, []) + "\n")
    else:
        L.append("Not run.\n")
    L.append("## Definitions\n")
    L.append(prose(REPORT, "definitions"))
    return write_markdown(md_path, L, analysis)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = report_parser(PROG, __doc__)
    p.add_argument("model", metavar="MODEL_RESULTS", help="results/cortv")
    p.add_argument(
        "x264",
        metavar="X264_RESULTS",
        nargs="?",
        default=None,
        help="results/cortv-x264 (optional)",
    )
    p.add_argument("--fig4", metavar="RESULTS", default=None,
                   help="results/cortv-fig4 (optional): Fig. 4's setting")
    p.add_argument("--heldout", metavar="RESULTS", default=None,
                   help="results/cortv-heldout (optional): the held-out check")
    add_report_dir(p, "cortv.md, cortv-runs.csv and img/", "MODEL_RESULTS", "cortv-report")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    return report_main(PROG, argv, parse_args, _write)


def _write(args: argparse.Namespace, command: str) -> str:
    md = write_report(args.model, args.x264, report_dir_of(args, args.model), command=command,
                      fig4_dir=args.fig4, heldout_dir=args.heldout)  # fmt: skip
    return f"report: {md}"


if __name__ == "__main__":
    sys.exit(main())
