"""Vidaptive (NINeS '26) §5 in Sluice: the report of ``experiments/vidaptive.toml`` (model
encoder) and ``experiments/vidaptive-x264.toml`` (libx264 with VMAF, SSIM, PSNR).

The model-encoder matrix runs GCC (``webrtc``), Copa applied directly to video (``copa``),
``vidaptive``, ``vidaptive-rocc``, the ablations (``vidaptive-no-dummy``, ``-no-pause``,
``-no-alpha``), App. C's transport-only pair and the P, lambda and tau sweeps over the
Mahimahi cellular traces, three Pantheon-like paths and the synthetic traces of Fig. 2 and
Fig. 21b; the x264 matrix runs the four main schemes at 1080p and 720p. This module reads
both results and writes ``<report-dir>/vidaptive.md`` (tables generated from the runs; the
hand-written analysis block is kept byte for byte), ``vidaptive-runs.csv`` (one row per run
of both matrices) and ``img/vidaptive-*.png``::

    sluice matrix experiments/vidaptive.toml && sluice matrix experiments/vidaptive-x264.toml
    python -m sluice.analysis.vidaptive results/vidaptive results/vidaptive-x264 \\
        --report-dir docs/results                       # make vidaptive-report

Latency is the paper's (§5.1, Salsify's rule): every capture slot counts, a slot whose frame
was never displayed until the next displayed frame (``latency_all_ms`` in the summaries;
:func:`slot_latencies_ms` gives the per-slot values for the pooled CDFs, Fig. 7's
aggregation).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import metrics, results
from ..errors import SluiceError
from ..plots import no_data, plt, save, scheme_color, tidy_log_axis
from ..results import Run
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
    quality_words,
    relative_to_cwd,
    report_dir_of,
    report_main,
    report_parser,
    require_schemes,
    run_encoder,
    signed_pct,
    write_markdown,
)
from .cells import VERSUS_LEGEND, paired
from .cells import versus_table as cell_table

PROG = "python -m sluice.analysis.vidaptive"
REPORT = "vidaptive"  # templates/vidaptive.md
NAME = "vidaptive"
BASELINE = "webrtc"  # GCC: the reference of the paper's relative numbers
MAIN = ("webrtc", "copa", "vidaptive", "vidaptive-rocc")
#: §5.4's ablations (Fig. 14-18): "Copa", w/o Dummy, w/o Latency safeguards, w/o Bitrate
#: Selection, and Vidaptive itself.
ABLATION = ("copa", "vidaptive-no-dummy", "vidaptive-no-pause", "vidaptive-no-alpha",
            "vidaptive")  # fmt: skip
#: App. C (Fig. 21b): Copa on Vidaptive's window pacer, target = CC-Rate, no pause.
APP_C = ("copa-window", "copa-window-dummy")
#: (column, label, paper figure) of the swept config paths.
SWEEPS = (
    ("encoder_controller.alpha.p_ms", "P (ms)", "§5.3, Fig. 10-11"),
    ("encoder_controller.alpha.lambda", "lambda", "App. B, Fig. 22"),
    ("encoder_controller.tau_ms", "tau (ms)", "App. B, Fig. 23"),
)
CLIP_RATES = "vidaptive-clip-rates.json"
#: The paper's headline numbers (Abstract, §1, §5.2 Fig. 7, Fig. 9).
PAPER = {
    "bitrate_ratio": 1.5,
    "vmaf_gain": 0.40,
    "p95_change": -0.57,
    "median_delta_ms": 17.0,
}



# --- per-run derived data -------------------------------------------------------------------


#: Per capture slot, in source order: Salsify's latency (Vidaptive §5.1) in ms, the values the
#: summary's ``latency_all_ms`` is over (:func:`sluice.metrics.slot_latencies_ms`).
slot_latencies_ms = metrics.slot_latencies_ms


def _col(s: Any, name: str) -> np.ndarray:
    if name not in s:
        return np.full(len(s), np.nan)
    return s[name].to_numpy(dtype=float, na_value=np.nan)


def rate_series(run: Run, column: str, window_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(t in s, ``column`` averaged over the trailing ``window_s``) from the run's samples."""
    s = run.samples
    if s.empty:
        return np.array([]), np.array([])
    t = _col(s, "t_us") / 1e6
    v = _col(s, column)
    dt_s = float(np.median(np.diff(t))) if len(t) > 1 else 0.02
    n = max(1, int(round(window_s / dt_s)))
    kernel = np.ones(n) / n
    vv = np.convolve(np.nan_to_num(v), kernel, mode="full")[: len(v)]
    return t, vv


def time_until(run: Run, start_s: float, column: str, ok, window_s: float = 0.5,
               horizon_s: float = 40.0) -> float:  # fmt: skip
    """Seconds after ``start_s`` until ``ok(mean of column over the last window_s)`` first
    holds (NaN if not within ``horizon_s``)."""
    t, v = rate_series(run, column, window_s)
    m = (t > start_s + window_s) & (t <= start_s + horizon_s)
    hit = np.flatnonzero(m & np.array([bool(ok(x)) for x in v]))
    return float(t[hit[0]] - start_s) if hit.size else math.nan


# --- tables ---------------------------------------------------------------------------------


def pooled(df: Any, s: str) -> np.ndarray:
    """All capture slots' latencies (ms) of every run of scheme ``s`` in ``df``."""
    parts = [slot_latencies_ms(results.load_run(d)) for d in df.loc[df["scheme"] == s, "run_dir"]]
    return np.concatenate(parts) if parts else np.array([])


def _mean(df: Any, s: str, col: str) -> float:
    sub = df.loc[df["scheme"] == s]
    return float(sub[col].mean()) if col in sub and len(sub) else math.nan


def _mbps(v: Any) -> str:
    return fmt(".2f")(None if v is None else float(v) / 1e6)


def scheme_rows(df: Any, names: Sequence[str], quality: bool = False) -> list[dict[str, Any]]:
    """Per scheme present in ``df``: run count, pooled all-slot latency (p50, p95, p99,
    mean), the mean of the per-run all-slot P95, the displayed frames' P95, the share of
    slots over 200 ms, freezes, received video bitrate, fps, utilisation, padding ratio
    and, with ``quality``, VMAF (mean of runs, median of runs), SSIM dB and PSNR."""
    out = []
    for s in names:
        sub = df[df["scheme"] == s]
        if sub.empty:
            continue
        lat = pooled(df, s)
        r: dict[str, Any] = {
            "scheme": s, "runs": len(sub),
            "p50": float(np.percentile(lat, 50)) if lat.size else math.nan,
            "p95": float(np.percentile(lat, 95)) if lat.size else math.nan,
            "p99": float(np.percentile(lat, 99)) if lat.size else math.nan,
            "mean": float(lat.mean()) if lat.size else math.nan,
            "stalls": float(np.mean(lat > 200.0)) if lat.size else math.nan,
            "run_p95": _mean(df, s, "latency_all_ms_p95"),
            "shown_p95": _mean(df, s, "latency_ms_p95"),
            "freezes": _mean(df, s, "freeze_count"),
            "freeze_s": _mean(df, s, "total_freezes_duration_s"),
            "bitrate": _mean(df, s, "video_bitrate_bps"),
            "fps": _mean(df, s, "fps"),
            "util": _mean(df, s, "utilization"),
            "padding": _mean(df, s, "padding_ratio"),
        }  # fmt: skip
        if quality:
            r["vmaf"] = _mean(df, s, "vmaf_mean")
            r["vmaf_median"] = float(sub["vmaf_mean"].median()) if "vmaf_mean" in sub else math.nan
            r["ssim_db"] = _mean(df, s, "ssim_db_mean")
            r["psnr"] = _mean(df, s, "psnr_mean")
        out.append(r)
    return out


def scheme_table(rows: Sequence[dict[str, Any]], quality: bool = False) -> str:
    head = ["scheme", "runs", "all-slot P50 ms", "all-slot P95 ms", "all-slot P99 ms",
            "all-slot mean ms", "per-run all-slot P95 ms", "shown P95 ms (per run)",
            "slots > 200 ms %", "freezes", "freeze s", "video Mbps", "fps", "utilisation %",
            "padding %"]  # fmt: skip
    if quality:
        head += ["VMAF", "VMAF median (runs)", "SSIM dB", "PSNR dB"]
    out = []
    for r in rows:
        row = [f"`{r['scheme']}`", str(r["runs"]), fmt(".0f")(r["p50"]), fmt(".0f")(r["p95"]),
               fmt(".0f")(r["p99"]), fmt(".0f")(r["mean"]), fmt(".0f")(r["run_p95"]),
               fmt(".0f")(r["shown_p95"]), pct(r["stalls"]), fmt(".1f")(r["freezes"]),
               fmt(".2f")(r["freeze_s"]), _mbps(r["bitrate"]),
               fmt(".1f")(r["fps"]), pct(r["util"]), pct(r["padding"])]  # fmt: skip
        if quality:
            row += [fmt(".1f")(r["vmaf"]), fmt(".1f")(r["vmaf_median"]),
                    fmt(".2f")(r["ssim_db"]), fmt(".2f")(r["psnr"])]  # fmt: skip
        out.append(row)
    return markdown(head, out)


def versus_baseline(rows: Sequence[dict[str, Any]], quality: bool = False) -> dict[str, dict]:
    """Scheme -> its numbers relative to ``webrtc``'s in ``rows``: bitrate ratio, pooled P95
    change, median and mean difference (ms), VMAF change (relative) and SSIM/PSNR (dB)."""
    base = next((r for r in rows if r["scheme"] == BASELINE), None)
    out: dict[str, dict] = {}
    if base is None:
        return out
    for r in rows:
        if r["scheme"] == BASELINE:
            continue
        v = {
            "bitrate_ratio": r["bitrate"] / base["bitrate"] if base["bitrate"] else math.nan,
            "p95_change": r["p95"] / base["p95"] - 1 if base["p95"] else math.nan,
            "p99_change": r["p99"] / base["p99"] - 1 if base["p99"] else math.nan,
            "p95_delta_ms": r["p95"] - base["p95"],
            "median_delta_ms": r["p50"] - base["p50"],
            "shown_p95_change": r["shown_p95"] / base["shown_p95"] - 1
            if base["shown_p95"] else math.nan,
            "mean_delta_ms": r["mean"] - base["mean"],
        }
        if quality:
            v["vmaf_gain"] = r["vmaf"] / base["vmaf"] - 1 if base["vmaf"] else math.nan
            v["ssim_db_delta"] = r["ssim_db"] - base["ssim_db"]
            v["psnr_delta"] = r["psnr"] - base["psnr"]
        out[r["scheme"]] = v
    return out


def _sgn(v: float, spec: str = "+.0f", unit: str = "") -> str:
    return "-" if v is None or math.isnan(v) else f"{format(v, spec)}{unit}"


def versus_table(rel: dict[str, dict], quality: bool = False) -> str:
    head = ["scheme", "video bitrate / webrtc's", "pooled all-slot P95 change",
            "pooled all-slot P99 change", "P95 Δ ms", "median Δ ms", "mean Δ ms"]  # fmt: skip
    if quality:
        head += ["VMAF change", "SSIM Δ dB", "PSNR Δ dB"]
    rows = []
    for s, v in rel.items():
        row = [f"`{s}`", _sgn(v["bitrate_ratio"], ".2f", "x"), signed_pct(v["p95_change"]),
               signed_pct(v["p99_change"]), _sgn(v["p95_delta_ms"]), _sgn(v["median_delta_ms"]),
               _sgn(v["mean_delta_ms"])]  # fmt: skip
        if quality:
            row += [signed_pct(v["vmaf_gain"]), _sgn(v["ssim_db_delta"], "+.2f"),
                    _sgn(v["psnr_delta"], "+.2f")]  # fmt: skip
        rows.append(row)
    return markdown(head, rows)


def per_trace_table(df: Any, names: Sequence[str]) -> str:
    """Fig. 8: per trace, each scheme's P95 (all slots, mean over seeds) and video bitrate."""
    names = [s for s in names if s in set(df["scheme"])]
    head = ["trace", *(f"`{s}` P95 ms" for s in names), *(f"`{s}` Mbps" for s in names)]
    rows = []
    for t in dict.fromkeys(df["trace"]):
        sub = df[df["trace"] == t]
        rows.append([
            t, *(fmt(".0f")(_mean(sub, s, "latency_all_ms_p95")) for s in names),
            *(_mbps(_mean(sub, s, "video_bitrate_bps")) for s in names),
        ])  # fmt: skip
    return markdown(head, rows)


#: The per-cell comparisons of the report (:func:`sluice.analysis.cells.versus_table`).
VERSUS = (
    ("all-slot P95", "latency_all_ms_p95", "ratio"),
    ("all-slot P99", "latency_all_ms_p99", "ratio"),
    ("shown P95", "latency_ms_p95", "ratio"),
    ("slots > 200 ms", "stall_ratio_200ms", "ratio"),
    ("video bitrate", "video_bitrate_bps", "ratio"),
)
VERSUS_X264 = (*VERSUS, ("VMAF (points)", "vmaf_mean", "diff"))


def _percell(df: Any, s: str, col: str, kind: str = "ratio", up: bool = False) -> str:
    """``s`` against webrtc per cell (trace, clip, seed): the median change and in how many
    cells it is lower (``up`` or a difference: higher)."""
    p = paired(df, s, BASELINE, col, kind)
    if p.n == 0:
        return "-"
    word, k = ("higher", p.higher) if up or kind == "diff" else ("lower", p.lower)
    if kind == "diff":
        return f"median {p.median:+.2f} ({word} in {k} of {p.n})"
    return f"median {p.median - 1:+.0%} ({word} in {k} of {p.n})"


def wins(df: Any, s: str, col: str, better) -> str:
    """'k/n': traces where scheme ``s``'s mean ``col`` beats webrtc's (``better(a, b)``)."""
    a = df[df["scheme"] == s].groupby("trace")[col].mean()
    b = df[df["scheme"] == BASELINE].groupby("trace")[col].mean()
    both = a.index.intersection(b.index)
    wins = sum(bool(better(a[t], b[t])) for t in both)
    return f"{wins}/{len(both)}" if len(both) else "-"


def sweep_table(df: Any, col: str, label: str) -> str:
    if col not in df:
        return f"Not run (no sweep of `{col}`).\n"
    sw = df[df[col].notna()]
    head = [label, "scheme", "runs", "per-run P95 ms", "P50 ms (runs)", "video Mbps", "fps",
            "utilisation %", "padding %"]  # fmt: skip
    rows = []
    for v in sorted(set(sw[col].astype(float))):
        sub = sw[sw[col].astype(float) == v]
        rows.append([
            f"{v:g}", f"`{sub['scheme'].iloc[0]}`", str(len(sub)),
            fmt(".0f")(sub["latency_all_ms_p95"].mean()),
            fmt(".0f")(sub["latency_all_ms_p50"].mean()),
            _mbps(sub["video_bitrate_bps"].mean()), fmt(".1f")(sub["fps"].mean()),
            pct(sub["utilization"].mean()), pct(sub["padding_ratio"].mean()),
        ])  # fmt: skip
    return markdown(head, rows)


def fig2_numbers(df: Any) -> list[list[str]]:
    """Fig. 2: per scheme and seed on the alternating 2 <-> 0.5 Mbps trace: seconds until the
    delivered rate (1 s mean) reaches 80 % of 2 Mbps after the step up at 80 s, until the
    send rate falls to 110 % of 0.5 Mbps after the step down at 40 s, and P95 (all slots)."""
    rows = []
    sub = df[df["trace"].str.startswith("fig2-")]
    for s in ("webrtc", "copa", "vidaptive", "vidaptive-rocc"):
        for _, r in sub[sub["scheme"] == s].iterrows():
            run = results.load_run(r["run_dir"])
            up = time_until(run, 80.0, "delivered_rate_bps", lambda x: x >= 0.8 * 2e6, 1.0)
            down = time_until(run, 40.0, "send_rate_bps", lambda x: x <= 1.1 * 0.5e6, 1.0)
            rows.append([f"`{s}`", str(r["seed"]), _sgn(up, ".1f", " s"), _sgn(down, ".1f", " s"),
                         fmt(".0f")(r["latency_all_ms_p95"])])  # fmt: skip
    return rows


def app_c_numbers(df: Any) -> list[list[str]]:
    """App. C: seconds after the 2 -> 5 Mbps step at 80 s of Fig. 21b's trace until the send
    rate (0.5 s mean, video and dummies) reaches 90 % of 5 Mbps."""
    rows = []
    sub = df[df["trace"].str.startswith("fig21b")]
    for s in (*APP_C, "vidaptive-no-dummy", "vidaptive", "copa"):
        for _, r in sub[sub["scheme"] == s].iterrows():
            run = results.load_run(r["run_dir"])
            t = time_until(run, 80.0, "send_rate_bps", lambda x: x >= 0.9 * 5e6, 0.5)
            rows.append([f"`{s}`", str(r["seed"]), _sgn(t, ".2f", " s"),
                         pct(r["padding_ratio"])])  # fmt: skip
    return rows


# --- figures --------------------------------------------------------------------------------


def plot_cdf(df: Any, names: Sequence[str], out: Path, title: str) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    drawn = False
    for s in names:
        lat = pooled(df, s)
        if not lat.size:
            continue
        x = np.sort(lat)
        ax.plot(x, np.arange(1, x.size + 1) / x.size, color=scheme_color(s), label=s)
        drawn = True
    if not drawn:
        no_data(ax, "no runs")
    ax.set_xscale("log")
    tidy_log_axis(ax.xaxis)
    ax.set_xlabel("frame latency, all capture slots (ms, Salsify's rule)")
    ax.set_ylabel("CDF")
    ax.grid(True, alpha=0.3)
    if drawn:
        ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    return save(fig, out)


def plot_rates(runs: Sequence[tuple[str, Run]], out: Path, column: str, title: str,
               window_s: float = 1.0) -> Path:  # fmt: skip
    """Link capacity and each run's ``column`` (``window_s`` mean) over time; below, the
    all-slot latency of each capture slot."""
    fig, (ax, axl) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, layout="constrained")
    if not runs:
        no_data(ax, "no runs")
    for i, (s, run) in enumerate(runs):
        t, v = rate_series(run, column, window_s)
        if i == 0:
            tc, cap = rate_series(run, "link_capacity_bps", window_s)
            ax.fill_between(tc, cap / 1e6, color="0.85", label="link capacity")
        color = plt.get_cmap("tab10").colors[i % 10]
        ax.plot(t, v / 1e6, color=color, lw=1.3, label=s)
        lat = slot_latencies_ms(run)
        fps = float((run.header.get("config") or {}).get("fps", 30.0))
        axl.plot(np.arange(lat.size) / fps, lat, color=color, lw=0.8, label=s)
    ax.set_ylabel(f"{column.replace('_bps', '')} (Mbit/s, {window_s:g} s mean)")
    axl.set_ylabel("latency per capture slot (ms)")
    axl.set_yscale("log")
    tidy_log_axis(axl.yaxis)
    axl.set_xlabel("time (s)")
    for a in (ax, axl):
        a.grid(True, alpha=0.3)
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=8, loc="upper right")
    ax.set_ylim(bottom=0)
    fig.suptitle(title, fontsize=10)
    return save(fig, out)


def plot_bars(df: Any, names: Sequence[str], out: Path, title: str) -> Path:
    """Per scheme: video bitrate, per-run P95 (all slots), fps and padding ratio, the mean
    over runs (bar) and each run (dot)."""
    metrics = (("video_bitrate_bps", "video bitrate (Mbit/s)", 1e-6),
               ("latency_all_ms_p95", "P95 latency, all slots (ms)", 1.0),
               ("fps", "frame rate (fps)", 1.0), ("padding_ratio", "padding (%)", 100.0))
    names = [s for s in names if s in set(df["scheme"])]
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.6 * len(metrics), 4.2),
                             layout="constrained")  # fmt: skip
    for ax, (col, label, scale) in zip(axes, metrics):
        for i, s in enumerate(names):
            v = df.loc[df["scheme"] == s, col].to_numpy(dtype=float) * scale
            v = v[np.isfinite(v)]
            if v.size:
                ax.bar(i, v.mean(), color=scheme_color(s), alpha=0.85, width=0.7)
                ax.scatter(np.full(v.size, i), v, color="k", s=5, alpha=0.4, zorder=3)
        ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
        ax.set_ylabel(label)
        ax.grid(True, axis="y", alpha=0.3)
        if not names:
            no_data(ax, "no runs")
    fig.suptitle(title, fontsize=10)
    return save(fig, out)


def plot_sweeps(df: Any, out: Path) -> Path:
    """One row per sweep (P, lambda, tau): per-run P95 (all slots), video bitrate,
    utilisation, padding ratio and fps against the swept value, one line per network type
    (mean over its traces and seeds)."""
    metrics = (("latency_all_ms_p95", "P95 all slots (ms)", 1.0),
               ("video_bitrate_bps", "video (Mbit/s)", 1e-6),
               ("utilization", "utilisation (%)", 100.0),
               ("padding_ratio", "padding (%)", 100.0), ("fps", "fps", 1.0))
    fig, axes = plt.subplots(len(SWEEPS), len(metrics), figsize=(3.3 * len(metrics), 2.9 *
                             len(SWEEPS)), squeeze=False, layout="constrained")  # fmt: skip
    colors = plt.get_cmap("tab10").colors
    for row, (col, label, _) in enumerate(SWEEPS):
        sw = df[df[col].notna()] if col in df else df.iloc[0:0]
        values = sorted(set(sw[col].astype(float))) if col in sw else []
        for ax, (mcol, mlabel, scale) in zip(axes[row], metrics):
            if not values:
                no_data(ax, f"no {col}")
                continue
            for gi, g in enumerate(dict.fromkeys(sw["network"])):
                m = sw[sw["network"] == g].groupby(col)[mcol].mean().reindex(values) * scale
                ax.plot(values, m, marker="o", lw=1.2, color=colors[gi % 10], label=str(g))
            ax.set_xlabel(label)
            ax.set_ylabel(mlabel, fontsize=8)
            ax.set_xticks(values, [f"{v:g}" for v in values], fontsize=7)
            ax.grid(True, alpha=0.3)
        if values:
            axes[row, 0].legend(fontsize=7)
    fig.suptitle("vidaptive's P, lambda and tau swept (mean over traces and seeds of each "
                 "network type)", fontsize=10)  # fmt: skip
    return save(fig, out)


# --- the report -----------------------------------------------------------------------------


def _first_run(df: Any, scheme: str, trace_prefix: str, seed: int | None = None) -> Run | None:
    rows = df[(df["scheme"] == scheme) & df["trace"].str.startswith(trace_prefix)]
    if seed is not None and (rows["seed"] == seed).any():
        rows = rows[rows["seed"] == seed]
    return results.load_run(rows["run_dir"].iloc[0]) if len(rows) else None


def _settings(res: Results) -> str:
    df = res.table
    cfg = results.read_header(df["run_dir"].iloc[0]).get("config") or {}
    enc = cfg.get("encoder") or {}
    seeds = ", ".join(str(s) for s in sorted(set(df["seed"])))
    if enc.get("kind") == "x264":
        encoder = (f"libx264 {enc.get('preset', '')}, encode time {enc.get('encode_time', '-')}, "
                   + quality_words((res.plan.get("video") or {}).get("quality")))
    else:
        encoder = f"model encoder ({enc.get('width')}x{enc.get('height')})"
    down = cfg.get("downlink") or {}
    return (f"{cfg.get('duration_s', math.nan):g} s per run, {cfg.get('fps', math.nan):g} fps, "
            f"seeds {seeds}, {encoder}; one-way delay {down.get('delay_ms', math.nan):g} ms "
            "and an unlimited queue unless the trace sets its path")  # fmt: skip


def clip_rates_section(report_dir: Path) -> str:
    path = report_dir / CLIP_RATES
    if not path.is_file():
        return (f"Not measured (`{CLIP_RATES}` is missing; `python "
                "experiments/vidaptive_clip_rates.py --out docs/results/"
                f"{CLIP_RATES}` writes it).\n")  # fmt: skip
    data = json.loads(path.read_text(encoding="utf-8"))
    ladder = data.get("ladder_mbps") or []
    head = ["clip", "width", *(f"{r:g} Mbps" for r in ladder), "cap Mbps"]
    rows = [[c, str(v.get("width")), *(f"{x:.1f}" for x in v.get("vmaf", [])),
             f"{v.get('cap_mbps'):g}"] for c, v in (data.get("clips") or {}).items()]  # fmt: skip
    return (f"VMAF of libx264 (as Sluice drives it) at each rate of the ladder, "
            f"{data.get('frames')} frames at {data.get('fps')} fps; the cap is the "
            f"{data.get('rule')} (`{CLIP_RATES}`, from `experiments/vidaptive_clip_rates.py`)."
            f"\n\n{markdown(head, rows)}\n")  # fmt: skip


def write_report(model: Results, x264: Results | None, report_dir: str | os.PathLike[str], *,
                 command: str | None = None) -> Path:  # fmt: skip
    """Writes ``<report_dir>/vidaptive.md``, ``vidaptive-runs.csv`` and
    ``img/vidaptive-*.png``."""
    import pandas as pd

    df = model.table.copy()
    if df.empty:
        raise SluiceError(f"{model.path}: no finished runs to report")
    plans = "experiments/vidaptive.toml and vidaptive-x264.toml's results"
    require_schemes(model, (*MAIN, *ABLATION), plans)
    if run_encoder(model) != "model":
        raise SluiceError(f"{model.path}: its runs are on x264; the first results are the "
                          "model encoder's (experiments/vidaptive.toml), x264's come second")
    if x264 is not None:
        require_schemes(x264, (*MAIN, *ABLATION), plans)
    xdf = x264.table.copy() if x264 is not None else df.iloc[0:0]
    out_dir = Path(report_dir)
    img = out_dir / "img"
    img.mkdir(parents=True, exist_ok=True)
    md_path = out_dir / f"{NAME}.md"
    csv_path = out_dir / f"{NAME}-runs.csv"

    both = pd.concat([df.assign(matrix=model.name), xdf.assign(matrix=x264.name if x264
                      else "")], ignore_index=True)  # fmt: skip
    both["run_dir"] = [relative_to_cwd(d) for d in both["run_dir"]]
    both.to_csv(csv_path, index=False)

    cell = df[df["network"] == "cellular"]
    pan = df[df["network"] == "pantheon"]
    cell_rows = scheme_rows(cell, MAIN)
    pan_rows = scheme_rows(pan, MAIN)
    x_rows = scheme_rows(xdf, MAIN, quality=True) if len(xdf) else []
    rel_cell = versus_baseline(cell_rows)
    rel_x = versus_baseline(x_rows, quality=True)

    figs: dict[str, str] = {}

    def fig(key: str, path: Path, caption: str) -> None:
        figs[key] = figure(path, caption, out_dir)

    fig("cdf", plot_cdf(cell, [*MAIN, "vidaptive-no-pause"], img / "vidaptive-latency-cdf.png",
                        "Cellular traces, model encoder: all capture slots of all runs pooled"),
        "Latency CDF over all capture slots, cellular traces, runs pooled (Fig. 7b)")
    if len(xdf):
        fig("cdf_x264", plot_cdf(xdf, MAIN, img / "vidaptive-x264-latency-cdf.png",
                                 "Cellular traces, x264 1080p/720p: all slots pooled"),
            "Latency CDF over all capture slots, x264 runs pooled")  # fmt: skip
    fig("ablation", plot_bars(cell, ABLATION, img / "vidaptive-ablation.png",
                              "Ablations on the cellular traces (model encoder)"),
        "Ablations (Fig. 14-18): bar = mean over runs, dots = runs")  # fmt: skip
    if any(c in df for c, _, _ in SWEEPS):
        fig("sweeps", plot_sweeps(df, img / "vidaptive-sweeps.png"),
            "P, lambda and tau sweeps (Fig. 10-11, 22, 23)")
    runs2 = [(s, r) for s in ("webrtc", "vidaptive")
             if (r := _first_run(df, s, "fig2-", 1)) is not None]  # fmt: skip
    if runs2:
        fig("fig2", plot_rates(runs2, img / "vidaptive-fig2.png", "delivered_rate_bps",
                               "2 <-> 0.5 Mbps every 40 s (Fig. 2), seed 1"),
            "Fig. 2's trace: delivered rate and per-slot latency, webrtc vs vidaptive")
    runs21 = [(s, r) for s in APP_C if (r := _first_run(df, s, "fig21b", 1)) is not None]
    if runs21:
        fig("fig21b", plot_rates(runs21, img / "vidaptive-fig21b.png", "send_rate_bps",
                                 "5 -> 2 -> 5 Mbps (Fig. 21b), Copa on the window pacer, "
                                 "target = CC-Rate, seed 1", window_s=0.5),
            "App. C: send rate (video + dummies) with and without dummy packets")

    L: list[str] = []
    L.append("# Vidaptive (NINeS '26) in Sluice\n")
    plans = [p for p in (model.plan.get("plan"), x264.plan.get("plan") if x264 else None) if p]
    plan_list = " and ".join(f"`sluice matrix {relative_to_cwd(p)}`" for p in plans)
    L.append(prose(REPORT, "intro", prog=PROG, plans=plan_list, csv=csv_path.name))
    L += provenance([*df["git_sha"], *xdf["git_sha"]], command)
    L.append(f"- model-encoder matrix (`{model.name}`): {_settings(model)}; {len(df)} runs")
    if x264 is not None and len(xdf):
        L.append(f"- x264 matrix (`{x264.name}`): {_settings(x264)}; {len(xdf)} runs; clips "
                 + ", ".join(f"`{c}`" for c in dict.fromkeys(xdf["clip"])))
    for g in dict.fromkeys(df["network"]):
        L.append(f"- {g} traces: " + ", ".join(
            f"`{t}`" for t in dict.fromkeys(df.loc[df["network"] == g, "trace"])))
    for n in [*(model.plan.get("skipped") or []), *((x264.plan.get("skipped") or [])
              if x264 else [])]:  # fmt: skip
        L.append(f"- note: {n}")
    L.append("")

    L.append(prose(REPORT, "baseline"))
    L.append("## Headline numbers against the paper\n")
    head = ["claim (vs webrtc = GCC)", "paper", "Sluice, model encoder, cellular",
            "Sluice, x264, cellular"]  # fmt: skip
    v, x = rel_cell.get("vidaptive", {}), rel_x.get("vidaptive", {})
    rows = [
        ["video bitrate", f"{PAPER['bitrate_ratio']:g}x", _sgn(v.get("bitrate_ratio", math.nan),
         ".2f", "x"), _sgn(x.get("bitrate_ratio", math.nan), ".2f", "x")],
        ["video bitrate per cell", "-", _percell(cell, "vidaptive", "video_bitrate_bps",
                                                  up=True),
         _percell(xdf, "vidaptive", "video_bitrate_bps", up=True)],
        ["mean VMAF", f"+{PAPER['vmaf_gain'] * 100:.0f}%", "- (no video)",
         signed_pct(x.get("vmaf_gain", math.nan))],
        ["VMAF per cell (points)", "higher on 80 % of traces", "-",
         _percell(xdf, "vidaptive", "vmaf_mean", "diff")],
        ["SSIM", "+1.4 dB", "-", _sgn(x.get("ssim_db_delta", math.nan), "+.2f", " dB")],
        ["all-slot P95 (pooled)", f"{PAPER['p95_change'] * 100:.0f}% (-2.2 s)",
         f"{signed_pct(v.get('p95_change', math.nan))} "
         f"({_sgn(v.get('p95_delta_ms', math.nan), '+.0f', ' ms')})",
         f"{signed_pct(x.get('p95_change', math.nan))} "
         f"({_sgn(x.get('p95_delta_ms', math.nan), '+.0f', ' ms')})"],
        ["all-slot P95 per cell (trace, clip, seed)", "lower on half the traces",
         _percell(cell, "vidaptive", "latency_all_ms_p95"),
         _percell(xdf, "vidaptive", "latency_all_ms_p95")],
        ["all-slot P99 (pooled)", "-", signed_pct(v.get("p99_change", math.nan)),
         signed_pct(x.get("p99_change", math.nan))],
        ["shown P95 (displayed frames only, mean of runs)", "-",
         signed_pct(v.get("shown_p95_change", math.nan)),
         signed_pct(x.get("shown_p95_change", math.nan))],
        ["freezes per run (per cell)", "-", _percell(cell, "vidaptive", "freeze_count"),
         _percell(xdf, "vidaptive", "freeze_count")],
        ["all-slot median (pooled)", f"+{PAPER['median_delta_ms']:g} ms",
         _sgn(v.get("median_delta_ms", math.nan), "+.0f", " ms"),
         _sgn(x.get("median_delta_ms", math.nan), "+.0f", " ms")],
    ]  # fmt: skip
    L.append(markdown(head, rows) + "\n")

    L.append("## Analysis\n")
    analysis = existing_analysis(md_path)
    L.append(ANALYSIS_SLOT)

    L.append("## Cellular traces, model encoder (§5.2, Fig. 7-8)\n")
    L.append(prose(REPORT, "cellular"))
    L.append(scheme_table(cell_rows) + "\n")
    L.append(versus_table(rel_cell) + "\n")
    L.append("Per cell (trace, seed) against `webrtc`:\n")
    L.append(cell_table(cell, MAIN, BASELINE, VERSUS) + "\n")
    L.append(VERSUS_LEGEND + "\n")
    L.append(figs.get("cdf", ""))
    L.append("### Per trace (Fig. 8)\n")
    L.append(per_trace_table(cell, MAIN) + "\n")
    if "vidaptive" in set(cell["scheme"]):
        L.append(f"`vidaptive` has a lower P95 than `webrtc` on "
                 f"{wins(cell, 'vidaptive', 'latency_all_ms_p95', lambda a, b: a < b)} "
                 "traces and a higher video bitrate on "
                 f"{wins(cell, 'vidaptive', 'video_bitrate_bps', lambda a, b: a > b)} "
                 "(paper: lower P95 on 50 %, higher VMAF on 80 %).\n")  # fmt: skip

    L.append("## Cellular traces, x264 with VMAF (§5.2, Fig. 7)\n")
    if len(xdf):
        L.append(scheme_table(x_rows, quality=True) + "\n")
        L.append(versus_table(rel_x, quality=True) + "\n")
        L.append("Per cell (trace, clip) against `webrtc`:\n")
        L.append(cell_table(xdf, MAIN, BASELINE, VERSUS_X264) + "\n")
        L.append("Per clip:\n")
        for c in dict.fromkeys(xdf["clip"]):
            L.append(f"**{c}**\n")
            L.append(scheme_table(scheme_rows(xdf[xdf["clip"] == c], MAIN, quality=True),
                                  quality=True) + "\n")  # fmt: skip
        L.append(figs.get("cdf_x264", ""))
    else:
        L.append("Not run (no x264 results).\n")

    L.append("## Pantheon-like paths (§5.2, Fig. 9)\n")
    if len(pan):
        L.append(scheme_table(pan_rows) + "\n")
        L.append(versus_table(versus_baseline(pan_rows)) + "\n")
        L.append(cell_table(pan, MAIN, BASELINE, VERSUS) + "\n")
        L.append(per_trace_table(pan, MAIN) + "\n")

    L.append("## Synthetic traces: Fig. 2 and App. C (Fig. 21b)\n")
    r2 = fig2_numbers(df)
    if r2:
        L.append(prose(REPORT, "fig2"))
        L.append(markdown(["scheme", "seed", "climb at 80 s", "fall at 40 s", "P95 ms"], r2)
                 + "\n")  # fmt: skip
        L.append(figs.get("fig2", ""))
    rc = app_c_numbers(df)
    if rc:
        L.append(prose(REPORT, "app-c"))
        L.append(markdown(["scheme", "seed", "time to 90 % of 5 Mbps", "padding %"], rc) + "\n")
        L.append(figs.get("fig21b", ""))

    L.append("## Ablations (§5.4, Fig. 14-18)\n")
    L.append(prose(REPORT, "ablations"))
    L.append(scheme_table(scheme_rows(cell, ABLATION)) + "\n")
    L.append(figs.get("ablation", ""))

    L.append("## P, lambda and tau (§5.3, App. B)\n")
    L.append(prose(REPORT, "sweeps"))
    for col, label, where in SWEEPS:
        L.append(f"### {label} ({where}; `{col}`)\n")
        L.append(sweep_table(cell, col, label) + "\n")
    L.append(figs.get("sweeps", ""))

    L.append("## Maximum useful video rate per clip (§3.1, footnote 4)\n")
    L.append(clip_rates_section(out_dir))

    L.append("## Definitions\n")
    L.append(prose(REPORT, "definitions"))
    return write_markdown(md_path, L, analysis)


# --- main -----------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = report_parser(PROG, __doc__)
    p.add_argument("model", metavar="MODEL_RESULTS",
                   help="results of experiments/vidaptive.toml (results/vidaptive) or the plan")
    p.add_argument("x264", metavar="X264_RESULTS", nargs="?", default=None,
                   help="results of experiments/vidaptive-x264.toml (optional)")
    add_results_root(p)
    add_report_dir(p, "vidaptive.md, vidaptive-runs.csv and img/", "MODEL_RESULTS",
                   "vidaptive-report")
    return p.parse_args(argv)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    return report_main(PROG, argv, parse_args, _write)


def _write(args: argparse.Namespace, command: str) -> str:
    model = load(args.model, args.results_root)
    x264 = load(args.x264, args.results_root) if args.x264 else None
    md = write_report(model, x264, report_dir_of(args, model.path), command=command)
    n = len(model.table) + (len(x264.table) if x264 is not None else 0)
    return f"{n} runs; report: {md}"


if __name__ == "__main__":
    sys.exit(main())
