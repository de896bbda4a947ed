"""MAE (NSDI '26) in Sluice: the report of ``experiments/mae.toml`` (x264) and
``experiments/mae-model.toml`` (the model encoder).

``sluice matrix`` runs both plans: MAE §6.1's schemes on libx264 over the artifact's
alternating 10/2 Mbps trace and one Hairpin trace per network type, and, on the model encoder
with three seeds, the drops of §3.1, a constant link, the ablations of §6.4, the sweeps of §6.5,
the latch's alternatives, the trendline window, the one-way delay and Table 1's Copa pair.
This module reads both results directories and writes ``<report-dir>/mae.md`` (tables from the
runs; the hand-written analysis block is kept byte for byte), ``mae-runs.csv`` (one row per
run of either plan) and ``img/mae-*.png``::

    sluice matrix experiments/mae.toml && sluice matrix experiments/mae-model.toml
    sluice matrix experiments/mae-clips.toml
    sluice matrix experiments/checks/mae-heldout.toml
    python -m sluice.analysis.mae results/mae results/mae-model --clips results/mae-clips \\
        --heldout results/mae-heldout --report-dir docs/results   # make mae-report

Latency leads with every capture slot (``latency_all_ms``: a slot whose frame is not shown
counts until the next shown frame), then the displayed frames' own; comparisons with the
baseline are per cell (:mod:`sluice.analysis.cells`), so no headline rests on one cell.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import config, plots, results
from ..errors import SluiceError
from ..metrics import PRE_REACTION_RATIO_PATH, pre_reaction_leads
from ..plots import no_data, plt, save, scheme_color
from . import (
    ANALYSIS_SLOT,
    Results,
    add_report_dir,
    add_results_root,
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
    require_schemes,
    run_encoder,
    write_markdown,
)
from .cells import (
    MEANS_LEGEND,
    VERSUS_LEGEND,
    Column,
    group_table,
    means_table,
    paired,
    plot_slot_cdf,
    pooled_row,
    pooled_table,
    versus_table,
)

PROG = "python -m sluice.analysis.mae"
REPORT = "mae"
BASELINE = "x264-gcc100"  # MAE's WebRTC + x264: the reference of the relative numbers
#: MAE §6.1's comparison as Sluice names it, and Sluice's time-out variant.
MAIN = (
    "x264-gcc100",
    "cbr-filler",
    "salsify-vbv",
    "mae-no-prediction",
    "mae",
    "mae-latch",
    "mae-timeout",
)
#: §6.4's ablation (Fig. 21): no MAE, MAE on GCC's own over-use, MAE (the latch, the
#: trigger being the only difference from `mae-no-prediction`, and the artifact's rule).
ABLATION = ("x264-gcc100", "mae-no-prediction", "mae-latch", "mae")
#: What ends a tight period (§4.2 is the latch until under-use).
LATCH = ("mae", "mae-latch", "mae-timeout", "mae-timeout1000", "mae-one-frame")
NETWORKS = ("synthetic", "Wi-Fi", "Cellular", "Ethernet", "constant")
#: The schemes whose pre-reaction leads (§6.7) the report tabulates, and those it plots.
LEAD_SCHEMES = ("mae", "mae-latch", "mae-latch-r0.25", "mae-latch-r0.75", "mae-timeout")
LEAD_CDF = ("mae", "mae-latch", "mae-latch-r0.25", "mae-latch-r0.75")
#: (label of the swept value, config path, the base scheme, what the paper says)
SWEEPS = (
    ("tight buffer (ms)", "encoder_controller.tight.ms", "mae", "§6.5 Fig. 22: 0.04 s best"),
    (
        "r",
        PRE_REACTION_RATIO_PATH,
        "mae-latch",
        "§6.5 Fig. 23: the scaling factor s = 0.5 has lower latency and -2.3 % quality against "
        "s = 1, MAE's choice. The paper's sentence: \"For GCC, we first set the overuse "
        "threshold to half of its original value. We later test the scaling factor over the "
        "threshold ... if the scaling factor is 0.5, buffer adjustment is triggered when the "
        "network trend reaches 50% of the threshold ... MAE selects 1.\" s scales the halved "
        "threshold, so Sluice's pre-reaction ratio r, a share of GCC's full threshold, is "
        "r = s / 2 (`pre_reaction_ratio_from_scaling_factor` in `cc/gcc`, tested at s = 0.5, "
        "1 and 2): the r values 0.25, 0.5, 0.75 and 1 below are s = 0.5, 1, 1.5 and 2. "
        "`mae-latch` is the paper's choice s = 1 (r = 0.5); `mae`, the artifact's rule, "
        "triggers at the full threshold, r = 1 (s = 2), and does not latch",
    ),
    (
        "Copa threshold (ms)",
        "cc.pre_reaction_queuing_delay_ms",
        "mae-copa-d20",
        "not in the paper (MAE leaves Copa's threshold open)",
    ),
)

#: The paper's headline numbers (MAE abstract, §6.2, §6.7, Table 1).
PAPER = {
    "stall": "-86.2% stall rate vs WebRTC + x264 (3.8% -> 0.69%, §6.2)",
    "p99": "-54.7% P99 latency overall, -47..-68% per network (§6.2, Fig. 17)",
    "vmaf": "at most -2.1% VMAF (abstract)",
    "adapt": "adaptation ratio: Wi-Fi 80% of trials under 10%, Cellular/Ethernet about 20% "
    "(§6.7, Fig. 27a)",
    "lead": "more than 20% of drops pre-reacted more than 100 ms early (§6.7, Fig. 27b)",
    "copa": "Copa x264 -> MAE: stall ratio 0.19 -> 0.10 (-47.5%), VMAF 83.12 -> 88.36 "
    "(Table 1, Wi-Fi)",
}

#: (header, column, formatter) of the main tables: latency over every capture slot first
#: (P99, the paper's tail, and the artifact's worst-10 % mean), then the displayed frames'
#: own, the stall ratio with WebRTC's freeze counts next to it.
METRICS: list[Column] = [
    ("all-slot P99 ms", "latency_all_ms_p99", fmt(".0f")),
    ("all-slot P95 ms", "latency_all_ms_p95", fmt(".0f")),
    ("all-slot worst-10% ms", "latency_all_ms_tail10_mean", fmt(".0f")),
    ("shown P99 ms", "latency_ms_p99", fmt(".0f")),
    ("shown P50 ms", "latency_ms_p50", fmt(".0f")),
    ("slots > 200 ms %", "stall_ratio_200ms", pct),
    ("freezes", "freeze_count", fmt(".1f")),
    ("freeze s", "total_freezes_duration_s", fmt(".2f")),
    ("VMAF", "vmaf_mean", fmt(".2f")),
    ("VMAF p5", "vmaf_p5", fmt(".2f")),
    ("video Mbps", "video_bitrate_bps", lambda v: fmt(".2f")(v / 1e6)),
    ("utilisation %", "utilization", pct),
    ("fps", "fps", fmt(".1f")),
    ("adapted %", "adaptation_ratio", pct),
]
MODEL_METRICS = [m for m in METRICS if not m[1].startswith("vmaf")]
#: The clips plan adds the keyframe count (the 1080p clip used to get one per loop).
CLIP_METRICS = [*METRICS, ("keyframes", "keyframes", fmt(".1f"))]
P99 = "latency_all_ms_p99"
STALLS = "stall_ratio_200ms"


# --- data -----------------------------------------------------------------------------------


def prepare(res: Results, encoder: str) -> Any:
    """The results table with ``encoder`` (x264 or model) and, for every sweep of the plan,
    the swept value filled in for the base scheme's own cells from their headers."""
    df = res.table.copy()
    df["encoder"] = encoder
    for _, path, base, _ in SWEEPS:
        if path not in df:
            df[path] = math.nan
        own = (df["scheme"] == base) & df[path].isna()
        df.loc[own, path] = [
            _config_value(d, path) for d in df.loc[own, "run_dir"]
        ]  # the base's value
    return df


def _config_value(run_dir: str, path: str) -> float:
    v = config.get_path(results.read_header(run_dir).get("config") or {}, path, None)
    return float(v) if isinstance(v, int | float) else math.nan


def ordered_schemes(df: Any, names: Sequence[str]) -> list[str]:
    present = set(df["scheme"])
    return [s for s in names if s in present]


def relative(df: Any, s: str, col: str) -> float:
    """Ratio of the means of ``col`` (scheme ``s`` over the baseline) minus one, over the
    cells both ran."""
    return paired(df, s, BASELINE, col).of_means - 1


#: The comparisons of :func:`relative_table` (:func:`sluice.analysis.cells.versus_table`).
VERSUS = (
    ("all-slot P99", P99, "ratio"),
    ("all-slot worst-10%", "latency_all_ms_tail10_mean", "ratio"),
    ("shown P99", "latency_ms_p99", "ratio"),
    ("slots > 200 ms", STALLS, "ratio"),
    ("freezes", "freeze_count", "ratio"),
    ("VMAF (points)", "vmaf_mean", "diff"),
)


def relative_table(df: Any, names: Sequence[str], groups: Sequence[str]) -> str:
    """The all-slot P99 and the stall ratio per trace group against the baseline (ratio of
    the means, median per cell, lower in k of n), then every metric over all of ``df``."""
    out = []
    if groups:
        out.append("All-slot P99 per trace group:\n")
        out.append(group_table(df, names, BASELINE, P99, "ratio", groups) + "\n")
        out.append("Slots later than 200 ms per trace group:\n")
        out.append(group_table(df, names, BASELINE, STALLS, "ratio", groups) + "\n")
    metrics = [v for v in VERSUS if v[1] in df and df[v[1]].notna().any()]
    out.append(versus_table(df, names, BASELINE, metrics))
    return "\n".join(out)


def per_trace_table(df: Any, names: Sequence[str], col: str, f: Any) -> str:
    traces = list(dict.fromkeys(df["trace"]))
    rows = []
    for s in names:
        sub = df[df["scheme"] == s]
        if sub.empty:
            continue
        rows.append([f"`{s}`", *(f(sub.loc[sub["trace"] == t, col].mean()) for t in traces)])
    return markdown(["scheme", *traces], rows)


def _claim(df: Any, s: str, col: str, kind: str = "ratio") -> str:
    """``s`` against the baseline on ``col`` over ``df``'s cells, for the headline table."""
    if df is None or not len(df):
        return "not run"
    p = paired(df, s, BASELINE, col, kind)
    if p.n == 0:
        return "-"
    if kind == "diff":
        rel = p.of_means / p.base_mean if p.base_mean else math.nan
        return (f"{p.of_means:+.2f} points ({rel:+.1%}; median {p.median:+.2f}; higher in "
                f"{p.higher} of {p.n})")  # fmt: skip
    if not p.base_mean:
        return f"{p.mean:.3g} against 0"
    return (f"{p.of_means - 1:+.0%} (median {p.median - 1:+.0%}; lower in {p.lower} of "
            f"{p.n})")  # fmt: skip


def _pooled_claim(df: Any, s: str, what: str) -> str:
    if df is None or not len(df) or s not in set(df["scheme"]):
        return "not run"
    a, b = pooled_row(df, s), pooled_row(df, BASELINE)
    key = {"p99": "p99", "stall": "stalls"}[what]
    return f"{a[key] / b[key] - 1:+.0%}" if b[key] else "-"


def headline_table(parts: Sequence[tuple[str, Any]], scheme: str = "mae") -> str:
    """The paper's claims against ``scheme``'s numbers in each part (label, table)."""
    head = [f"claim (`{scheme}` vs `{BASELINE}`)", "paper", *(label for label, _ in parts)]
    rows: list[list[str]] = []

    def row(claim: str, paper: str, f: Callable[[Any], str]) -> None:
        rows.append([claim, paper, *(f(df) for _, df in parts)])

    row("all-slot P99, per cell", "-54.7 %", lambda df: _claim(df, scheme, P99))
    row("all-slot P99, all slots pooled", "-54.7 %", lambda df: _pooled_claim(df, scheme, "p99"))
    row("slots > 200 ms, per cell", "-86.2 %", lambda df: _claim(df, scheme, STALLS))
    row("slots > 200 ms, pooled", "-86.2 %", lambda df: _pooled_claim(df, scheme, "stall"))
    row("VMAF", "at most -2.1 %", lambda df: _claim(df, scheme, "vmaf_mean", "diff")
        if df is not None and len(df) and df["vmaf_mean"].notna().any() else "-")
    row("adapted frames (mean)", "Wi-Fi < 10 % in 80 % of trials; about 20 % elsewhere",
        lambda df: pct(df.loc[df["scheme"] == scheme, "adaptation_ratio"].mean()) + " %"
        if df is not None and len(df) else "not run")  # fmt: skip
    return markdown(head, rows)


def leads(df: Any, scheme: str) -> np.ndarray:
    """The pre-reaction leads (ms) of every real drop of every run of ``scheme``."""
    out: list[float] = []
    for d in df.loc[df["scheme"] == scheme, "run_dir"]:
        run = results.load_run(d)
        r = config.get_path(run.header.get("config") or {}, PRE_REACTION_RATIO_PATH, None)
        if isinstance(r, int | float):
            out += pre_reaction_leads(run.frames, float(r))
    return np.asarray(out, dtype=float)


def sweep_table(df: Any, label: str, path: str, base: str) -> str:
    if path not in df:
        return "Not run.\n"
    # the base's own cells and its sweep variants (named <base>-<label><value>)
    ours = (df["scheme"] == base) | df["scheme"].str.startswith(base + "-")
    sw = df[df[path].notna() & ours]
    rows = []
    for v in sorted(set(sw[path])):
        sub = sw[sw[path] == v]
        rows.append(
            [
                f"{v:g}",
                ", ".join(f"`{s}`" for s in dict.fromkeys(sub["scheme"])),
                str(len(sub)),
                *(f(sub[c].mean()) for _, c, f in MODEL_METRICS),
            ]
        )
    return markdown([label, "scheme", "runs", *(h for h, _, _ in MODEL_METRICS)], rows)


# --- figures --------------------------------------------------------------------------------


def plot_lead_cdf(lead_sets: dict[str, np.ndarray], out: Path) -> Path:
    """MAE Fig. 27b: the CDF of the pre-reaction lead over the real drops."""
    fig, ax = plt.subplots(figsize=(6.5, 4), layout="constrained")
    for s, v in lead_sets.items():
        if len(v):
            x = np.sort(v)
            ax.step(
                x,
                np.arange(1, len(x) + 1) / len(x),
                where="post",
                color=scheme_color(s),
                label=f"{s} ({len(x)} drops)",
            )
    if not any(len(v) for v in lead_sets.values()):
        no_data(ax, "no real drops")
    ax.axvline(100, ls="--", lw=1, color="0.5")
    ax.set_xlabel("pre-reaction lead before the real drop (ms)")
    ax.set_ylabel("CDF over real drops")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("Pre-reaction lead (MAE Fig. 27b)", fontsize=10)
    return save(fig, out)


#: Frames after an event that :func:`after_events` follows.
AFTER_FRAMES = 30
#: A rate cut: the target falls by more than this share from one frame to the next.
CUT_SHARE = 0.1


def after_events(frames: Any, fps: float) -> tuple[list[list[float]], list[list[float]]]:
    """Each frame's size over its share of the target (``size * 8 * fps / target``) in the
    ``AFTER_FRAMES`` frames after an event: ``[k]`` holds the values of the ``k + 1``-th frame
    after the last tight frame (tight frames themselves left out; a new tight frame starts
    over), and of the ``k``-th frame from a rate cut (the first frame at the lower target is
    ``k = 0``)."""
    size = frames["size_bytes"].to_numpy(dtype=float)
    target = frames["target_rate_bps"].to_numpy(dtype=float)
    ratio = np.where(target > 0, size * 8.0 * fps / np.where(target > 0, target, 1.0), np.nan)
    tight = (
        frames["encoder_adapted"].fillna(False).astype(bool).to_numpy()
        if "encoder_adapted" in frames
        else np.zeros(len(frames), dtype=bool)
    )
    after_tight: list[list[float]] = [[] for _ in range(AFTER_FRAMES)]
    after_cut: list[list[float]] = [[] for _ in range(AFTER_FRAMES)]
    last_tight = None
    for i in range(len(frames)):
        if tight[i]:
            last_tight = i
        elif last_tight is not None and i - last_tight <= AFTER_FRAMES:
            after_tight[i - last_tight - 1].append(ratio[i])
        if i > 0 and target[i] < (1.0 - CUT_SHARE) * target[i - 1]:
            for k in range(min(AFTER_FRAMES, len(frames) - i)):
                after_cut[k].append(ratio[i + k])
    return after_tight, after_cut


def plot_after_events(df: Any, out: Path, schemes: Sequence[str]) -> Path:
    """Frame size over its share of the target after a tight frame and after a rate cut,
    every x264 run of ``schemes`` in ``df`` pooled: libx264's undershoot after MAE's tight
    frames, and its overshoot after GCC's cuts (docs/results/mae.md)."""
    fig, (ax_t, ax_c) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained", sharey=True)
    k = np.arange(1, AFTER_FRAMES + 1)
    for scheme in schemes:
        tight: list[list[float]] = [[] for _ in range(AFTER_FRAMES)]
        cut: list[list[float]] = [[] for _ in range(AFTER_FRAMES)]
        for run_dir in df.loc[df["scheme"] == scheme, "run_dir"]:
            run = results.load_run(run_dir)
            t, c = after_events(run.frames, float((run.header.get("config") or {})["fps"]))
            for acc, new in ((tight, t), (cut, c)):
                for a, n in zip(acc, new):
                    a.extend(n)
        color = scheme_color(scheme)
        for ax, acc, x in ((ax_t, tight, k), (ax_c, cut, k - 1)):
            mean = [np.nanmean(a) if a else np.nan for a in acc]
            if any(a for a in acc):
                ax.plot(x, mean, marker=".", color=color, label=f"{scheme} ({len(acc[0])})")
    for ax, title, xlabel in (
        (ax_t, "after the last tight frame", "frames after the last tight frame"),
        (ax_c, "from a rate cut (target down > 10 %)", "frames from the cut"),
    ):
        ax.axhline(1.0, ls="--", lw=1, color="0.5")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        else:
            no_data(ax, "no such frames")
    ax_t.set_ylabel("frame size / its share of the target")
    fig.suptitle("x264 after MAE's tight frames and after GCC's cuts (mean over events)",
                 fontsize=10)  # fmt: skip
    return save(fig, out)


def plot_drop(runs: Sequence[results.Run], out: Path, t0: float, t1: float) -> Path:
    """Around one drop: capacity and target, the encoded frame sizes against the target frame
    size, MAE's tight flag, and frame latency (MAE Fig. 2, Fig. 16)."""
    fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True, layout="constrained")
    ax_rate, ax_size, ax_lat = axes
    for i, run in enumerate(runs):
        c = scheme_color(run.scheme)
        s = run.samples
        s = s[(s["t_us"] >= t0 * 1e6) & (s["t_us"] <= t1 * 1e6)]
        if i == 0 and not s.empty:
            ax_rate.fill_between(
                s["t_us"] / 1e6,
                s["link_capacity_bps"] / 1e6,
                step="pre",
                color="0.85",
                label="capacity",
            )
        if not s.empty:
            ax_rate.plot(
                s["t_us"] / 1e6,
                s["target_rate_bps"] / 1e6,
                color=c,
                lw=1.3,
                label=f"{run.scheme} target",
            )
        f = run.frames
        f = f[(f["capture_us"] >= t0 * 1e6) & (f["capture_us"] <= t1 * 1e6)]
        t = f["capture_us"] / 1e6
        ax_size.plot(
            t,
            f["size_bytes"] * 8 / 1e3,
            color=c,
            lw=1,
            marker=".",
            ms=3,
            label=f"{run.scheme} frame",
        )
        if "mae_tight" in f:
            tight = f["mae_tight"].fillna(False).astype(bool)
            ax_size.scatter(
                t[tight],
                np.zeros(int(tight.sum())),
                marker="|",
                color=c,
                s=40,
                label=f"{run.scheme} tight VBV",
            )
        ax_lat.plot(t, f["latency_us"] / 1e3, color=c, lw=1, label=run.scheme)
    ax_rate.set_ylabel("rate (Mbit/s)")
    ax_size.set_ylabel("encoded frame (kbit)")
    ax_lat.set_ylabel("frame latency (ms)")
    ax_lat.axhline(200, ls="--", lw=1, color="0.5")
    ax_lat.set_xlabel("time (s)")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    fig.suptitle(f"One drop, {t0:g}-{t1:g} s", fontsize=10)
    return save(fig, out)


def make_figures(
    x264: Any, model: Any, img: Path, lead_sets: dict[str, np.ndarray], heldout: Any = None
) -> dict[str, tuple[Path, str]]:
    figs: dict[str, tuple[Path, str]] = {}
    if heldout is not None and len(heldout):
        names = ordered_schemes(heldout, (BASELINE, "mae", "mae-latch"))
        figs["after"] = (
            plot_after_events(heldout, img / "mae-after-tight.png", names),
            "Held out, x264: each frame's size over its share of the target after the last "
            "tight frame (left) and from a GCC rate cut (right), mean over the events of the "
            "three runs of each scheme (the count in the legend)",
        )
    if len(x264):
        main = ordered_schemes(x264, MAIN)
        figs["tradeoff"] = (
            plots.plot_tradeoff(
                x264,
                img / "mae-tradeoff.png",
                schemes=main,
                x=P99,
                title="All-slot P99 latency vs mean VMAF (x264)",
            ),
            "All-slot P99 latency vs mean VMAF per trace group, x264 (MAE Fig. 17-19)",
        )
        figs["cdf"] = (
            plot_slot_cdf(
                x264,
                main,
                img / "mae-latency-cdf.png",
                "Latency of every capture slot, x264 runs of each scheme pooled",
            ),
            "All-slot latency CDF, all x264 runs of each scheme pooled (MAE Fig. 20)",
        )
        figs["stall"] = (
            plots.plot_bars(
                x264,
                img / "mae-stalls.png",
                schemes=main,
                metrics=(
                    ("stall_ratio_200ms", "stall ratio (%)"),
                    ("adaptation_ratio", "adapted frames (%)"),
                ),
                title="Stalls and adaptation, x264 (bar: mean, dots: runs)",
            ),
            "Stall ratio (frames later than 200 ms) and adaptation ratio, x264 runs",
        )
        cell = x264[x264["trace"] == "alt-10-2"]
        picks = [cell[cell["scheme"] == s] for s in (BASELINE, "mae")]
        if all(len(p) for p in picks):
            runs = [results.load_run(p.iloc[0]["run_dir"]) for p in picks]
            figs["drop"] = (
                plot_drop(runs, img / "mae-drop.png", 13.0, 19.0),
                f"The 10 -> 2 Mbps drop at 15 s, x264 on {picks[0].iloc[0]['clip']} "
                "(MAE Fig. 2, Fig. 16): the tight VBV limits the frames after the "
                "pre-reaction",
            )
    if len(model):
        shown = {s: v for s, v in lead_sets.items() if s in LEAD_CDF}
        figs["lead"] = (
            plot_lead_cdf(shown, img / "mae-lead-cdf.png"),
            "Pre-reaction lead over the real drops, model encoder, all traces (MAE Fig. 27b)",
        )
        sw = model[model["encoder_controller.tight.ms"].notna() & (model["base_scheme"] == "mae")]
        if len(sw):
            figs["tight"] = (
                plots.plot_param_sweep(
                    sw,
                    img / "mae-tight-sweep.png",
                    param="encoder_controller.tight.ms",
                    param_label="tight VBV buffer (ms of the target)",
                    metrics=(
                        (P99, "all-slot P99 latency (ms)", 1.0),
                        ("stall_ratio_200ms", "stall ratio (%)", 100.0),
                        ("video_bitrate_bps", "video rate (Mbit/s)", 1e-6),
                    ),
                    reference=model[model["scheme"] == BASELINE],
                    title="Tight buffer size",
                ),
                "The tight buffer, model encoder (MAE Fig. 22)",
            )
    return figs


# --- the report -----------------------------------------------------------------------------


def _settings(df: Any, what: str) -> str:
    if df.empty:
        return f"- {what}: not run"
    cfg = results.read_header(df["run_dir"].iloc[0]).get("config") or {}
    enc = cfg.get("encoder") or {}
    down = cfg.get("downlink") or {}
    seeds = ", ".join(str(s) for s in sorted(set(df["seed"])))
    if enc.get("kind") == "x264":
        widths = sorted(
            {
                ((results.read_header(d).get("config") or {}).get("encoder") or {}).get("width")
                for d in df["run_dir"]
            }
            - {None}
        )
        width = f"x264 at width {' / '.join(str(w) for w in widths)} px"
    else:
        width = "model encoder"
    q = down.get("queue_bytes")
    return (
        f"- {what}: {len(df)} runs, {cfg.get('duration_s', math.nan):g} s each, seeds "
        f"{seeds}, {width}, one-way delay {down.get('delay_ms', math.nan):g} ms (unless a "
        f"scheme sets it), queue {'unlimited' if q is None else f'{q} B'}, traces "
        + ", ".join(f"`{t}`" for t in dict.fromkeys(df["trace"]))
        + (
            f"; clips {', '.join(f'`{c}`' for c in dict.fromkeys(df['clip']))}"
            if enc.get("kind") == "x264"
            else ""
        )
    )


def write_report(
    x264_res: Results | None,
    model_res: Results | None,
    report_dir: str | os.PathLike[str],
    command: str | None = None,
    clips_res: Results | None = None,
    heldout_res: Results | None = None,
) -> Path:
    """Writes ``<report_dir>/mae.md``, ``mae-runs.csv`` and ``img/mae-*.png`` from the x264
    plan's results, the model plan's and (optional) the clips plan's."""
    x264 = prepare(x264_res, "x264") if x264_res else None
    model = prepare(model_res, "model") if model_res else None
    clips = prepare(clips_res, "x264") if clips_res else None
    heldout = prepare(heldout_res, "x264") if heldout_res else None
    if (x264 is None or x264.empty) and (model is None or model.empty):
        raise SluiceError("no finished runs to report")
    for r in (x264_res, model_res):
        if r is not None:
            require_schemes(r, (*MAIN, *ABLATION, *LATCH),
                            "experiments/mae.toml and mae-model.toml's results")  # fmt: skip
    import pandas as pd

    x264 = x264 if x264 is not None else pd.DataFrame(columns=["scheme", "trace", "network"])
    model = model if model is not None else pd.DataFrame(columns=["scheme", "trace", "network"])
    out_dir = Path(report_dir)
    img = out_dir / "img"
    img.mkdir(parents=True, exist_ok=True)
    md_path = out_dir / f"{REPORT}.md"
    csv_path = out_dir / f"{REPORT}-runs.csv"
    parts = [x264, model] + [p for p in (clips, heldout) if p is not None]
    both = pd.concat([p for p in parts if len(p)], ignore_index=True)
    both["run_dir"] = [relative_to_cwd(d) for d in both["run_dir"]]
    both.to_csv(csv_path, index=False)
    # every run of these schemes is read once, for the table and the figure
    lead_sets = (
        {s: leads(model, s) for s in ordered_schemes(model, LEAD_SCHEMES)} if len(model) else {}
    )
    figs = make_figures(x264, model, img, lead_sets, heldout)

    def fig(key: str) -> str:
        if key not in figs:
            return ""
        return figure(*figs[key], out_dir)

    L: list[str] = ["# MAE (NSDI '26) in Sluice\n"]
    # The plan each set of runs came from, as its plan.json says (the shipped plan's name
    # for results from before it said).
    plans = ", ".join(f"`{_plan_file(r, f'experiments/{n}.toml')}`" for n, r, d in (
        ("mae", x264_res, x264), ("mae-model", model_res, model),
        ("mae-clips", clips_res, clips), ("checks/mae-heldout", heldout_res, heldout))
        if d is not None and len(d))  # fmt: skip
    L.append(prose(REPORT, "intro", prog=PROG, plans=plans,
                   csv=os.path.relpath(csv_path, out_dir)))  # fmt: skip
    L += provenance(both["git_sha"], command)
    L.append(_settings(x264, "x264 plan (`mae`)"))
    L.append(_settings(model, "model plan (`mae-model`)"))
    if clips is not None:
        L.append(_settings(clips, "clips plan (`mae-clips`)"))
    if heldout is not None:
        L.append(_settings(heldout, "held-out check (`mae-heldout`, experiments/checks)"))
    L.append(prose(REPORT, "not-in-sluice"))
    L.append(prose(REPORT, "baseline"))
    L.append("## Headline against the paper\n")
    L.append(prose(REPORT, "headline"))
    head_parts: list[tuple[str, Any]] = []
    if len(x264):
        head_parts.append(("x264, Hairpin", x264[x264["network"] != "synthetic"]))
        head_parts.append(("x264, `alt-10-2`", x264[x264["network"] == "synthetic"]))
    if clips is not None and len(clips):
        head_parts.append(("x264, 3 more clips", clips))
    if heldout is not None and len(heldout):
        head_parts.append(("x264, held-out traces", heldout))
    if len(model):
        head_parts.append(("model, varying traces", model[model["network"] != "constant"]))
    for s in ("mae", "mae-latch"):
        L.append(f"`{s}`:\n")
        L.append(headline_table(head_parts, s) + "\n")
    L.append("## Analysis\n")
    analysis = existing_analysis(md_path)
    L.append(ANALYSIS_SLOT)

    L.append("## The comparison on x264 (MAE §6.2, Fig. 17-19)\n")
    if len(x264):
        main = ordered_schemes(x264, MAIN)
        groups = [g for g in NETWORKS if g in set(x264["network"])]
        for g in groups:
            L.append(f"### {g}\n")
            L.append(means_table(x264[x264["network"] == g], main, METRICS) + "\n")
        L.append("### All traces\n")
        L.append(means_table(x264, main, METRICS) + "\n")
        L.append(MEANS_LEGEND + "\n")
        L.append(f"### Relative to `{BASELINE}`\n")
        L.append(f"The paper: {PAPER['stall']}; {PAPER['p99']}; {PAPER['vmaf']}.\n")
        L.append(relative_table(x264, main, groups) + "\n")
        L.append(VERSUS_LEGEND + "\n")
        L.append("All x264 slots pooled:\n")
        L.append(pooled_table(x264, main, BASELINE) + "\n")
        L.append(fig("tradeoff") + fig("cdf") + fig("stall") + fig("drop"))
    else:
        L.append("Not run.\n")

    if clips is not None and len(clips):
        L.append("## Across clips (MAE §6.2, Fig. 19)\n")
        L.append(prose(REPORT, "clips"))
        names = ordered_schemes(clips, ("x264-gcc100", "mae", "mae-latch"))
        for c in dict.fromkeys(clips["clip"]):
            sub = clips[clips["clip"] == c]
            L.append(f"### `{c}`\n")
            L.append(means_table(sub, names, CLIP_METRICS) + "\n")
            L.append(relative_table(sub, names, []) + "\n")
        L.append("### All clips of the clips plan\n")
        L.append(relative_table(clips, names, []) + "\n")
        L.append(pooled_table(clips, names, BASELINE) + "\n")

    if heldout is not None and len(heldout):
        L.append("## Held-out check: three real traces no report uses (issue 24)\n")
        L.append(prose(REPORT, "heldout"))
        names = ordered_schemes(heldout, ("x264-gcc100", "mae", "mae-latch", "mae-timeout"))
        L.append(pooled_table(heldout, names, BASELINE) + "\n")
        L.append(means_table(heldout, names, METRICS) + "\n")
        L.append(relative_table(heldout, names, []) + "\n")
        L.append(fig("after"))

    if len(model):
        main = ordered_schemes(model, MAIN)
        L.append("## The same schemes on the model encoder, three seeds (MAE §3.1, §6.2)\n")
        L.append("### All traces except the constant link\n")
        varying = model[model["network"] != "constant"]
        L.append(means_table(varying, main, MODEL_METRICS) + "\n")
        L.append(
            relative_table(varying, main, [g for g in NETWORKS if g in set(varying["network"])])
            + "\n"
        )
        L.append("### All-slot P99 latency (ms) per trace\n")
        L.append(per_trace_table(model, main, P99, fmt(".0f")) + "\n")
        L.append("### Stall ratio (%) per trace\n")
        L.append(per_trace_table(model, main, "stall_ratio_200ms", pct) + "\n")

        L.append("## Ablation (MAE §6.4, Fig. 21)\n")
        L.append(prose(REPORT, "ablation"))
        L.append(means_table(varying, ordered_schemes(model, ABLATION), MODEL_METRICS) + "\n")

        L.append("## What ends a tight period: the adaptation ratio (MAE §4.2, §6.7 Fig. 27a)\n")
        L.append(prose(REPORT, "adaptation", paper=PAPER["adapt"]))
        latch = ordered_schemes(model, LATCH)
        L.append(per_trace_table(model, latch, "adaptation_ratio", pct) + "\n")
        L.append("All-slot P99 latency (ms) per trace:\n")
        L.append(per_trace_table(model, latch, P99, fmt(".0f")) + "\n")

        L.append("## Pre-reaction lead (MAE §6.7, Fig. 27b)\n")
        L.append(prose(REPORT, "lead", paper=PAPER["lead"]))
        rows = []
        for s, v in lead_sets.items():
            rows.append(
                [
                    f"`{s}`",
                    str(len(v)),
                    fmt(".0f")(np.median(v) if len(v) else math.nan),
                    pct(np.mean(v > 100) if len(v) else math.nan),
                    pct(np.mean(v > 0) if len(v) else math.nan),
                ]
            )
        L.append(
            markdown(["scheme", "real drops", "median lead ms", "> 100 ms %", "> 0 %"], rows) + "\n"
        )
        L.append(fig("lead"))

        L.append("## Sweeps (MAE §6.5)\n")
        for label, path, base, paper in SWEEPS:
            L.append(f"### {label}: `{path}` on `{base}`\n")
            L.append(prose(REPORT, "sweep", paper=paper))
            L.append(sweep_table(varying, label, path, base) + "\n")
            if path == "encoder_controller.tight.ms":
                L.append(fig("tight"))

        L.append("## Trendline window and one-way delay\n")
        L.append(prose(REPORT, "trendline"))
        L.append(
            means_table(
                varying,
                ordered_schemes(
                    model,
                    ("x264-gcc100", "mae", "x264-gcc20", "mae-gcc20", "x264-gcc100-d20", "mae-d20"),
                ),
                MODEL_METRICS,
            )
            + "\n"
        )

        L.append("## The Copa pair (MAE Table 1)\n")
        L.append(prose(REPORT, "copa", paper=PAPER["copa"]))
        copa = ordered_schemes(
            model, ("copa-x264-d20", "mae-copa-d20", "copa-x264-fb1", "mae-copa-fb1")
        )
        L.append(means_table(varying, copa, MODEL_METRICS) + "\n")
        L.append(per_trace_table(model, copa, "stall_ratio_200ms", pct) + "\n")

    L.append("## Definitions\n")
    L.append(prose(REPORT, "definitions"))
    return write_markdown(md_path, L, analysis)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = report_parser(PROG, __doc__)
    p.add_argument(
        "results",
        nargs="+",
        metavar="RESULTS",
        help="results directories or plan files: the x264 plan's and/or the model "
        "plan's (told apart by their encoder)",
    )
    add_results_root(p)
    p.add_argument(
        "--clips",
        metavar="RESULTS",
        help="the clips plan's results (results/mae-clips) or plan file",
    )
    p.add_argument(
        "--heldout",
        metavar="RESULTS",
        help="the held-out check's results (results/mae-heldout) or plan file",
    )
    add_report_dir(p, "mae.md, mae-runs.csv and img/", "the first RESULTS", "mae-report")
    return p.parse_args(argv)


def _plan_file(res: Results | None, default: str) -> str:
    plan = (res.plan or {}).get("plan") if res is not None else None
    return relative_to_cwd(plan) if plan else default


def main(argv: Sequence[str] | None = None) -> int:
    return report_main(PROG, argv, parse_args, _write)


def _write(args: argparse.Namespace, command: str) -> str:
    loaded = [load(r, args.results_root) for r in args.results]
    by_encoder: dict[str, Results] = {}
    for res in loaded:
        e = run_encoder(res)
        if e in by_encoder:
            raise SluiceError(f"two {e} results given: {by_encoder[e].path} and {res.path}")
        by_encoder[e] = res
    md = write_report(
        by_encoder.get("x264"),
        by_encoder.get("model"),
        report_dir_of(args, loaded[0].path),
        command=command,
        clips_res=load(args.clips, args.results_root) if args.clips else None,
        heldout_res=load(args.heldout, args.results_root) if args.heldout else None,
    )
    return f"report: {md}"


if __name__ == "__main__":
    sys.exit(main())
