"""ACE (SIGCOMM '25) §6 in Sluice: the report of the ``experiments/ace.toml`` matrix.

``sluice matrix experiments/ace.toml`` runs the schemes of ACE §6.1 that Sluice has
(WebRTC*, WebRTC-B, CBR, AlwaysBurst), ACE, ACE-C and ACE-N, ACE without ACE-C's planned-size
correction (``ace-uncorrected``) and ACE with the threshold T of §6.5 swept, over Wi-Fi, 4G
and 5G traces and a few clips. This module reads its results (the table and the runs) and
writes ``<report-dir>/<name>.md`` (tables generated from the runs; the hand-written analysis
block is kept byte for byte), ``<name>-runs.csv`` (one row per run) and the figures
``img/ace-*.png``::

    sluice matrix experiments/ace.toml && sluice matrix experiments/ace-1080p.toml
    python -m sluice.analysis.ace results/ace --hd results/ace-1080p \\
        --report-dir docs/results                      # make ace-report
    python -m sluice.analysis.ace experiments/ace-quick.toml   # make ace-report-quick

It also holds the ACE-only plots: the ablation (Fig. 15), ACE-N's internals over time
(Fig. 25) and the per-frame decisions (Fig. 17).
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
from ..metrics import BURST_RATE_FACTOR, frame_burst
from ..plots import no_data, ordered, plt, save
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
    write_markdown,
)
from .cells import (
    LATENCY_COLUMNS,
    MEANS_LEGEND,
    STALL_COLUMNS,
    VERSUS_LATENCY,
    VERSUS_LEGEND,
    VERSUS_VMAF,
    Column,
    group_table,
    means_table,
    paired,
    plot_slot_cdf,
    pooled_table,
    versus_table,
)

PROG = "python -m sluice.analysis.ace"
REPORT = "ace"  # templates/ace.md
BASELINE = "webrtc-x264"  # WebRTC* of ACE §6.1: the reference of the relative numbers
ACE = "ace"
#: The ablation of ACE §6.4 (Fig. 15).
ABLATION_SCHEMES = ("webrtc-x264", "ace-c", "ace-n", "ace")
#: `ace` without ACE-C's planned-size correction (§5.1): the correction's own ablation.
UNCORRECTED = "ace-uncorrected"
#: ACE-N's threshold T (ACE §4.1, §6.5), in packets, and its packet size: config paths.
T_PATH = "pacer.threshold_packets"
PACKET_SIZE_PATH = "pacer.packet_size_bytes"
NETWORKS = ("Wi-Fi", "4G", "5G")


# --- ACE plots ------------------------------------------------------------------------------


def plot_ablation(
    df,
    out: str | os.PathLike[str],
    *,
    schemes: Sequence[str] = ABLATION_SCHEMES,
    baselines: Sequence[str] = (),
) -> Path:
    """ACE Fig. 15: the ablation schemes (and any ``baselines``) on the trade-off plane,
    all runs in one panel."""
    return plots.plot_tradeoff(df, out, schemes=[*schemes, *baselines], by=None,
                               x="latency_all_ms_p95",
                               title="Ablation: all-slot P95 latency vs mean VMAF")  # fmt: skip


def _config_param(run: Run, path: str) -> float | None:
    v = config.get_path(run.config, path, None)
    return None if v is None else float(v)


def acen_threshold(run: Run) -> tuple[float | None, float]:
    """(ACE-N threshold T in packets or None if the pacer has none, packet size in bytes)."""
    return _config_param(run, T_PATH), _config_param(run, PACKET_SIZE_PATH) or 1260.0


def _col(s, name: str) -> np.ndarray:
    if name not in s:
        return np.full(len(s), np.nan)
    return s[name].to_numpy(dtype=float, na_value=np.nan)


def acen_window(run: Run, window_s: float = 2.0, threshold_bytes: float | None = None,
                warmup_s: float = 2.0) -> float:  # fmt: skip
    """Start (s) of an ACE-N window worth showing: 40 % of the window before the first time
    after ``warmup_s`` the predicted queue exceeds the threshold; else the window around the
    largest real bottleneck queue; else 0."""
    s = run.samples
    if s.empty:
        return 0.0
    t = _col(s, "t_us") / 1e6
    pred = _col(s, "pacer_predicted_queue_bytes")
    end = float(np.nanmax(t)) if np.isfinite(t).any() else 0.0
    late = t >= warmup_s
    if threshold_bytes is not None:
        over = np.flatnonzero(late & (pred > threshold_bytes))
        if over.size:
            return float(max(0.0, min(t[over[0]] - 0.4 * window_s, end - window_s)))
    q = _col(s, "queue_bytes")
    q = np.where(late, q, np.nan)
    if np.isfinite(q).any():
        return float(max(0.0, min(t[int(np.nanargmax(q))] - 0.5 * window_s, end - window_s)))
    return 0.0


def plot_acen_timeseries(
    run: Run,
    out: str | os.PathLike[str],
    *,
    start_s: float | None = None,
    window_s: float = 2.0,
    threshold_packets: float | None = None,
    packet_size_bytes: float | None = None,
) -> Path:
    """ACE Fig. 25 for one run, over ``window_s`` from ``start_s`` (default: :func:`acen_window`):
    (a) link capacity, the CC target, GCC's and ACE-N's capacity estimates; (b) the real
    bottleneck queue and ACE-N's predicted queue, in packets, with the threshold T; (c) the
    token bucket size and tokens. ``threshold_packets`` and ``packet_size_bytes`` default to
    the run's pacer config. Pacer fields a scheme does not report (null) are left out and
    the panel says so. Samples are every 20 ms, so sub-frame spikes are not resolved."""
    s = run.samples
    run_t, run_pkt = acen_threshold(run)
    T = threshold_packets if threshold_packets is not None else run_t
    pkt = packet_size_bytes or run_pkt
    if start_s is None:
        start_s = acen_window(run, window_s, None if T is None else T * pkt)
    fig, (ax_a, ax_b, ax_c) = plt.subplots(3, 1, figsize=(8, 8.5), sharex=True,
                                           layout="constrained")  # fmt: skip
    if s.empty:
        for ax in (ax_a, ax_b, ax_c):
            no_data(ax, "no samples")
    else:
        t = _col(s, "t_us") / 1e6
        w = (t >= start_s) & (t <= start_s + window_s)
        tm = (t[w] - start_s) * 1000

        def line(ax, name, scale, label, **kw) -> bool:
            v = _col(s, name)[w]
            if not np.isfinite(v).any():
                return False
            ax.plot(tm, v * scale, label=label, **kw)
            return True

        missing = []
        ax_a.fill_between(tm, _col(s, "link_capacity_bps")[w] / 1e6, step="pre", color="0.85",
                          label="link capacity")  # fmt: skip
        line(ax_a, "target_rate_bps", 1e-6, "CC target", color="tab:blue", lw=1.5)
        line(ax_a, "cc_link_capacity_bps", 1e-6, "GCC link-capacity estimate", color="tab:purple",
             lw=1, ls=":")  # fmt: skip
        if not line(ax_a, "pacer_link_capacity_bps", 1e-6, "ACE-N capacity estimate",
                    color="tab:orange", lw=1.5):  # fmt: skip
            missing.append("capacity estimate")
        line(ax_b, "queue_bytes", 1 / pkt, "bottleneck queue (real)", color="tab:red", lw=1.5)
        if not line(ax_b, "pacer_predicted_queue_bytes", 1 / pkt, "predicted queue (ACE-N)",
                    color="tab:green", lw=1.5):  # fmt: skip
            missing.append("predicted queue")
        if T is not None:
            ax_b.axhline(T, ls="--", color="k", lw=1, label=f"threshold T = {T:g} packets")
        got_b = line(ax_c, "pacer_bucket_bytes", 1e-3, "bucket size", color="tab:brown", lw=1.5)
        got_t = line(ax_c, "pacer_tokens_bytes", 1e-3, "tokens", color="tab:gray", lw=1, alpha=0.8)
        if not (got_b or got_t):
            missing.append("bucket")
            no_data(ax_c, f"no token-bucket state: the {run.scheme} pacer reports none")
        if missing:
            ax_a.text(0.01, 0.97, f"{run.scheme}: no ACE-N {', '.join(missing)} (null)",
                      transform=ax_a.transAxes, va="top", fontsize=8, color="0.3")  # fmt: skip
        for ax in (ax_a, ax_b, ax_c):
            ax.grid(True, alpha=0.3)
            ax.set_ylim(bottom=0)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(loc="upper right", fontsize=7)
    ax_a.set_ylabel("(a) rate (Mbit/s)")
    ax_b.set_ylabel(f"(b) queue (packets of {pkt:g} B)")
    ax_c.set_ylabel("(c) bytes (kB)")
    ax_c.set_xlabel(f"time from t = {start_s:.2f} s (ms)")
    fig.suptitle(f"ACE-N pacing, {run.scheme} on {run.trace_name}", fontsize=10)
    return save(fig, out)


COMPLEXITY_MARKERS = {"c0": "s", "c1": "X", "c2": "P"}


def decision_points(run: Run):
    """Per sent frame (ACE Fig. 17): ``relative_size`` = size / target frame size
    (``target_rate_bps / 8 / fps``), ``queue_bytes`` = the real bottleneck queue in the last
    sample at or before the frame's first packet left (the queue the frame found; samples
    are every 20 ms), ``complexity`` and ``burst`` (:func:`sluice.metrics.frame_burst`)."""
    import pandas as pd

    f = run.frames
    cols = ["frame_id", "relative_size", "queue_bytes", "complexity", "burst"]
    if f.empty:
        return pd.DataFrame(columns=cols)
    fps = float(run.config.get("fps") or (run.summary or {}).get("fps") or 30.0)
    sent = f[f["first_packet_sent_us"].notna()]
    target_frame = sent["target_rate_bps"].astype(float) / 8 / fps
    rel = sent["size_bytes"].astype(float) / target_frame.where(target_frame > 0)
    s = run.samples
    if s.empty:
        q = np.full(len(sent), np.nan)
    else:
        ts = _col(s, "t_us")
        idx = np.searchsorted(ts, sent["first_packet_sent_us"].to_numpy(dtype=float), "right") - 1
        qs = _col(s, "queue_bytes")
        q = np.where(idx >= 0, qs[np.clip(idx, 0, None)], np.nan)
    comp = sent["complexity"] if "complexity" in sent else pd.Series(None, index=sent.index)
    return pd.DataFrame({
        "frame_id": sent["frame_id"].to_numpy(),
        "relative_size": rel.to_numpy(dtype=float),
        "queue_bytes": q,
        "complexity": comp.to_numpy(dtype=object),
        "burst": frame_burst(sent).to_numpy(dtype=object),
    })  # fmt: skip


def plot_decision_scatter(run: Run, out: str | os.PathLike[str]) -> Path:
    """ACE Fig. 17: per frame, relative size (x) vs the bottleneck queue it found (y);
    marker = complexity level, colour = sent as a burst or paced."""
    d = decision_points(run)
    fig, ax = plt.subplots(figsize=(7, 4.8), layout="constrained")
    if d.empty:
        no_data(ax, "no frames sent")
    levels = sorted(ordered(d["complexity"].dropna())) if len(d) else []
    if len(d) and d["complexity"].isna().any():
        levels.append(None)
    for burst, color, what in ((True, "tab:blue", "burst"), (False, "tab:green", "paced")):
        for lv in levels:
            m = (d["burst"] == burst) & (d["complexity"].isna() if lv is None
                                         else d["complexity"] == lv)  # fmt: skip
            if not m.any():
                continue
            mk = COMPLEXITY_MARKERS.get(lv, "o") if lv is not None else "o"
            ax.scatter(d.loc[m, "relative_size"], d.loc[m, "queue_bytes"] / 1e3, s=14,
                       marker=mk, color=color, alpha=0.55, lw=0,
                       label=f"{what}, {lv or 'no level'} ({int(m.sum())})")  # fmt: skip
    limit = (run.config.get("downlink") or {}).get("queue_bytes")
    if limit:
        ax.axhline(limit / 1e3, ls="--", color="tab:red", lw=1, label="queue limit")
    ax.axvline(1.0, ls=":", color="0.5", lw=1)
    ax.set_xlabel("frame size / target frame size (target rate / 8 / fps)")
    ax.set_ylabel("bottleneck queue when the frame left (kB)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper right")
    ax.set_title(f"Decisions per frame: {run.scheme} on {run.trace_name}", fontsize=10)
    return save(fig, out)


# --- tables ---------------------------------------------------------------------------------

#: (header, column, formatter): the columns of the per-scheme tables after the latency
#: (all-slot first, then shown) and the stall columns of :mod:`sluice.analysis.cells`.
ACE_COLUMNS: tuple[Column, ...] = (
    ("stall %", "stall_rate", pct),
    ("loss %", "loss_rate", pct),
    ("VMAF", "vmaf_mean", fmt(".2f")),
    ("VMAF p5", "vmaf_p5", fmt(".2f")),
    ("switched %", "switched_share", pct),
    ("burst frames %", "burst_share", pct),
)
METRICS: tuple[Column, ...] = (*LATENCY_COLUMNS, *STALL_COLUMNS, *ACE_COLUMNS)

#: The paper's claims the headline table sets Sluice's numbers against (ACE §6.2-§6.7).
PAPER = {
    "p95": "-34 % overall (§6.2); per network the baselines' P95 is 43 / 23 / 35 % above "
    "ACE's on Wi-Fi / 4G / 5G (ACE -30 / -19 / -26 %); \"up to 43 %\" (abstract)",
    "vmaf": "ACE has the highest VMAF of all schemes (§6.2, Fig. 12)",
    "stall": "ACE 2.39 % stall rate, -16 % against WebRTC* (§6.3)",
    "switch": "97 % of frames at c0, i.e. about 3 % switched, only frames above 1.6x the "
    "average size (§6.7)",
}


def ablation(df: Any) -> list[str]:
    """The ablation's schemes that ran: ACE Fig. 15's, and `ace` without §5.1's correction."""
    present = set(df["scheme"])
    return [s for s in [*ABLATION_SCHEMES, UNCORRECTED] if s in present]


def scheme_order(df: Any) -> list[str]:
    return list(dict.fromkeys(df["scheme"]))


def relative(df: Any, s: str, col: str, kind: str) -> float:
    """Ratio of means minus 1 (``kind="ratio"``) or difference of means (``"diff"``) of
    ``col`` between scheme ``s`` and the baseline, over the cells both ran."""
    p = paired(df, s, BASELINE, col, "diff" if kind == "diff" else "ratio")
    return p.of_means - 1 if kind == "ratio" else p.of_means


def sweep_table(df: Any, groups: Sequence[str]) -> str:
    sw = df[df["T"].notna()]
    head = ["T (packets)", "scheme", "runs", "all-slot P95 ms", "vs baseline (median per cell)",
            "shown P95 ms", "VMAF", "loss %", "stall %", "burst frames %",
            *(f"{g} all-slot P95 ms" for g in groups)]  # fmt: skip
    rows = []
    for t in sorted(set(sw["T"])):
        sub = sw[sw["T"] == t]
        s = sub["scheme"].iloc[0]
        p = paired(df, s, BASELINE, "latency_all_ms_p95")
        rows.append([
            f"{t:g}", f"`{s}`", str(len(sub)), fmt(".0f")(sub["latency_all_ms_p95"].mean()),
            f"{p.of_means:.2f}x ({p.median:.2f}x)" if p.n else "-",
            fmt(".0f")(sub["latency_ms_p95"].mean()),
            fmt(".2f")(sub["vmaf_mean"].mean()), pct(sub["loss_rate"].mean()),
            pct(sub["stall_rate"].mean()), pct(sub["burst_share"].mean()),
            *(fmt(".0f")(sub.loc[sub["network"] == g, "latency_all_ms_p95"].mean())
              for g in groups),
        ])  # fmt: skip
    return markdown(head, rows)


def switching_table(parts: Sequence[tuple[str, Any]], groups: Sequence[str]) -> str:
    """ACE-C's switching share (frames encoded at c1 or c2, 1 - the c0 share) per matrix
    and clip (a row) and network type (a column), for the schemes with ACE-C: the mean over
    the traces, and the range over them."""
    head = ["matrix", "clip", "scheme", *groups, "all", "range over runs"]
    rows = []
    for label, df in parts:
        for clip in dict.fromkeys(df["clip"]):
            for s in ("ace-c", ACE):
                sub = df[(df["clip"] == clip) & (df["scheme"] == s)]
                if sub.empty or sub["switched_share"].isna().all():
                    continue
                v = sub["switched_share"].astype(float)
                rows.append([label, f"`{clip}`", f"`{s}`",
                             *(pct(sub.loc[sub["network"] == g, "switched_share"].mean())
                               for g in groups),
                             pct(v.mean()), f"{pct(v.min())}-{pct(v.max())}"])  # fmt: skip
    return markdown(head, rows)


def _cmp(df: Any, s: str, col: str, kind: str = "ratio") -> str:
    p = paired(df, s, BASELINE, col, kind)
    if p.n == 0:
        return "-"
    if kind == "diff":
        return f"{p.of_means:+.2f} (median {p.median:+.2f}; higher in {p.higher} of {p.n})"
    if not p.base_mean:
        return f"{p.mean:.3g} against 0 (lower in {p.lower} of {p.n})"
    return f"{p.of_means - 1:+.0%} (median {p.median - 1:+.0%}; lower in {p.lower} of {p.n})"


def headline_table(parts: Sequence[tuple[str, Any]], groups: Sequence[str]) -> str:
    """The paper's claims against `ace`'s numbers in each matrix (``parts``: label, table)."""
    head = ["claim (`ace` vs `webrtc-x264`)", "paper", *(label for label, _ in parts)]
    rows: list[list[str]] = []

    def row(claim: str, paper: str, f: Callable[[Any], str]) -> None:
        rows.append([claim, paper, *(f(df) for _, df in parts)])

    for g in [*groups, "all"]:
        def sub(df: Any, g: str = g) -> Any:
            return df if g == "all" else df[df["network"] == g]

        paper = {"Wi-Fi": "-30 %", "4G": "-19 %", "5G": "-26 %", "all": "-34 %"}.get(g, "-")
        row(f"all-slot P95, {g}", paper, lambda df, sub=sub: _cmp(sub(df), ACE,
                                                                "latency_all_ms_p95"))
    row("all-slot P99, all", "-", lambda df: _cmp(df, ACE, "latency_all_ms_p99"))
    row("shown P95, all", "-", lambda df: _cmp(df, ACE, "latency_ms_p95"))
    row("VMAF (points), all", "highest of all schemes", lambda df: _cmp(df, ACE, "vmaf_mean",
                                                                      "diff"))
    row("stall rate (ACE §6.3), all", "-16 %", lambda df: _cmp(df, ACE, "stall_rate"))
    row("freezes per run, all", "-", lambda df: _cmp(df, ACE, "freeze_count"))
    row("frames switched by ACE-C (`ace`)", "about 3 %",
        lambda df: pct(df.loc[df["scheme"] == ACE, "switched_share"].mean()) + " %")
    return markdown(head, rows)


# --- the report -----------------------------------------------------------------------------


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


def make_figures(df: Any, img: Path, main: list[str], detail_trace: str | None = None,
                 detail_clip: str | None = None) -> dict[str, tuple[Path, str, str]]:  # fmt: skip
    """Writes the figures; returns name -> (path, caption, note)."""
    figs: dict[str, tuple[Path, str, str]] = {}

    def add(key: str, path: Path, caption: str, note: str = "") -> None:
        figs[key] = (path, caption, note)

    add("tradeoff", plots.plot_tradeoff(df, img / "ace-tradeoff.png", schemes=main,
                                        x="latency_all_ms_p95",
                                        title="All-slot P95 latency vs mean VMAF"),
        "All-slot P95 latency vs mean VMAF per network type (ACE Fig. 12)")  # fmt: skip
    add("cdf", plot_slot_cdf(df, main, img / "ace-latency-cdf.png",
                             "Latency of every capture slot, all runs of each scheme pooled"),
        "All-slot latency CDF, all runs of each scheme pooled (ACE Fig. 14a)")  # fmt: skip
    add("loss", plots.plot_bars(df, img / "ace-loss-stall.png", schemes=main),
        "Loss rate and stall rate (ACE Fig. 14b,c)")  # fmt: skip
    add("ablation", plot_ablation(df, img / "ace-ablation.png", schemes=ablation(df)),
        "Ablation: WebRTC*, ACE-C only, ACE-N only, ACE, ACE without the planned-size "
        "correction (ACE Fig. 15)")  # fmt: skip
    if df["T"].notna().any():
        add("sweep", plots.plot_param_sweep(df, img / "ace-t-sweep.png", param="T",
                                            param_label="ACE-N threshold T (packets)",
                                            metrics=(("latency_all_ms_p95",
                                                      "all-slot P95 latency (ms)", 1.0),
                                                     ("vmaf_mean", "mean VMAF", 1.0),
                                                     ("loss_rate", "loss rate (%)", 100.0)),
                                            reference=df[df["scheme"] == BASELINE],
                                            title="Sensitivity to T"),
            "All-slot P95, VMAF and loss against ACE-N's threshold T (ACE Fig. 16)")  # fmt: skip
    trace = detail_trace or next(
        (t for t, n in zip(df["trace"], df["network"]) if n == "Wi-Fi"), df["trace"].iloc[0]
    )
    clip = detail_clip or df["clip"].iloc[0]
    row = pick_run(df, [ACE, "ace-c", "ace-n", BASELINE], trace, clip)
    if row is not None:
        run = results.load_run(row["run_dir"])
        add("decisions", plot_decision_scatter(run, img / "ace-decisions.png"),
            "Per-frame decisions (ACE Fig. 17)",
            f"`{row['scheme']}` on {row['trace']}, clip {row['clip']}")  # fmt: skip
    row = pick_run(df, [ACE, "ace-n", BASELINE], trace, clip)
    if row is not None:
        run = results.load_run(row["run_dir"])
        p = plot_acen_timeseries(run, img / "ace-n-timeseries.png", window_s=2.0)
        t, pkt = acen_threshold(run)
        start = acen_window(run, 2.0, None if t is None else t * pkt)
        add(
            "timeseries",
            p,
            "ACE-N adaptive pacing over 2 s of one run (ACE Fig. 25)",
            f"`{row['scheme']}` on {row['trace']}, clip {row['clip']}, from t = {start:.2f} s",
        )
    return figs


def _settings(res: Results) -> str:
    """The run settings line, from the first run's header and the plan."""
    df = res.table
    cfg = results.read_header(df["run_dir"].iloc[0]).get("config") or {}
    enc = cfg.get("encoder") or {}
    video = res.plan.get("video") or {}
    fps_set = any(config.short_path(p) == "fps" for p, _ in res.plan.get("set") or [])
    seeds = ", ".join(str(s) for s in sorted(set(df["seed"])))
    down = cfg.get("downlink") or {}
    if enc.get("kind") == "x264":
        width = f"x264 {enc.get('preset', '')} at {enc.get('width')}x{enc.get('height')}"
    else:
        width = "model encoder"
    fps = f"{cfg.get('fps', math.nan):g}" if fps_set else "each clip's own"
    return (
        f"{cfg.get('duration_s', math.nan):g} s per run, seed {seeds}, {width}, "
        f"fps {fps}, x264 encode time {enc.get('encode_time', '-')}, "
        f"{quality_words(video.get('quality'))}, drop-tail queue "
        f"{down.get('queue_bytes')} B, one-way delay {down.get('delay_ms', math.nan):g} ms"
    )


def prepare(res: Results) -> Any:
    """The results table with a ``T`` column (ACE-N's swept threshold; NaN for the schemes
    the sweep does not cover) and ``switched_share`` (ACE-C's frames at c1 or c2: one minus
    the c0 share; NaN without ACE-C)."""
    df = res.table.copy()
    df["T"] = df[T_PATH].astype(float) if T_PATH in df else math.nan
    df["switched_share"] = 1.0 - df["c0_share"].astype(float) if "c0_share" in df else math.nan
    return df


def _section(L: list[str], df: Any, main: list[str], groups: Sequence[str]) -> None:
    """The per-network tables and the comparisons against the baseline of one matrix."""
    for g in groups:
        L.append(f"#### {g}\n")
        L.append(means_table(df[df["network"] == g], main, METRICS) + "\n")
    L.append("#### All traces\n")
    L.append(means_table(df, main, METRICS) + "\n")
    if BASELINE in set(df["scheme"]):
        L.append(f"#### Per cell against `{BASELINE}` (WebRTC*)\n")
        L.append("All-slot P95, per network type: the ratio of the means "
                 "(1.00x = equal), the median of the per-cell ratios, and in how many cells "
                 "(trace, clip) the scheme's is lower.\n")  # fmt: skip
        L.append(group_table(df, main, BASELINE, "latency_all_ms_p95", "ratio", groups) + "\n")
        L.append("VMAF, per network type: the difference of the means in points, the "
                 "median per-cell difference, and in how many cells it is higher.\n")
        L.append(group_table(df, main, BASELINE, "vmaf_mean", "diff", groups) + "\n")
        L.append("ACE's schemes over all traces, each metric:\n")
        ours = [s for s in main if s.startswith("ace")]
        L.append(versus_table(df, ours, BASELINE, (*VERSUS_LATENCY,
                                                   ("stall rate", "stall_rate", "ratio"),
                                                   VERSUS_VMAF)) + "\n")  # fmt: skip
        L.append(VERSUS_LEGEND + "\n")


def write_report(res: Results, report_dir: str | os.PathLike[str], *,
                 detail_trace: str | None = None, detail_clip: str | None = None,
                 command: str | None = None, hd: Results | None = None) -> Path:  # fmt: skip
    """Writes ``<report_dir>/<name>.md``, ``<name>-runs.csv`` and ``img/ace-*.png`` from the
    main matrix ``res`` and (optional) the 1080p one ``hd``."""
    import pandas as pd

    df = prepare(res)
    if df.empty:
        raise SluiceError(f"{res.path}: no finished runs to report")
    hdf = prepare(hd) if hd is not None else None
    if hdf is not None and hdf.empty:
        hdf = None
    name = res.name
    out_dir = Path(report_dir)
    img = out_dir / "img"
    img.mkdir(parents=True, exist_ok=True)
    md_path = out_dir / f"{name}.md"
    csv_path = out_dir / f"{name}-runs.csv"

    order = scheme_order(df)
    variants = {s["name"] for s in res.plan.get("schemes") or [] if s.get("sweep")}
    sweep_only = [s for s in order if s in variants or (not res.plan and s.startswith("ace-T"))]
    main = [s for s in order if s not in sweep_only]
    groups = [g for g in NETWORKS if g in set(df["network"])] + sorted(
        set(df["network"]) - set(NETWORKS)
    )
    figs = make_figures(df, img, main, detail_trace, detail_clip)

    tables = [res.table.assign(matrix=name)]
    if hdf is not None and hd is not None:
        tables.append(hd.table.assign(matrix=hd.name))
    rel_df = pd.concat(tables, ignore_index=True)
    rel_df["run_dir"] = [relative_to_cwd(d) for d in rel_df["run_dir"]]
    rel_df.to_csv(csv_path, index=False)

    plan_file = res.plan.get("plan")
    trace_list = "; ".join(
        f"{g}: " + ", ".join(f"`{t}`" for t in dict.fromkeys(df.loc[df["network"] == g, "trace"]))
        for g in groups
    )
    clip_list = ", ".join(f"`{c}`" for c in dict.fromkeys(df["clip"]))

    def fig(key: str) -> str:
        if key not in figs:
            return ""
        return figure(*figs[key][:2], out_dir, figs[key][2])

    width = (results.read_header(df["run_dir"].iloc[0]).get("config") or {}).get("encoder") or {}
    nclips = df["clip"].nunique()
    main_label = f"{width.get('width', '?')} px, {nclips} clip{'s' if nclips != 1 else ''}"
    parts = [(main_label, df)]
    hd_label = ""
    if hdf is not None:
        hcfg = (results.read_header(hdf["run_dir"].iloc[0]).get("config") or {}).get(
            "encoder") or {}  # fmt: skip
        hd_label = f"{hcfg.get('width', '?')}x{hcfg.get('height', '?')}, " + ", ".join(
            f"`{c}`" for c in dict.fromkeys(hdf["clip"]))
        parts.append((hd_label, hdf))

    L: list[str] = []
    L.append(f"# ACE (SIGCOMM '25) in Sluice{f' ({name})' if name != ACE else ''}\n")
    plan_arg = relative_to_cwd(plan_file) if plan_file else name
    hd_arg = ""
    if hd is not None and hd.plan.get("plan"):
        hd_arg = f" and `sluice matrix {relative_to_cwd(hd.plan['plan'])}`"
    L.append(prose(REPORT, "intro", prog=PROG, plan=plan_arg, hd=hd_arg,
                   csv=os.path.relpath(csv_path, out_dir)))  # fmt: skip
    shas = [*df["git_sha"], *(hdf["git_sha"] if hdf is not None else [])]
    L += provenance(shas, command)
    L.append(f"- main matrix (`{name}`): {_settings(res)}; {len(df)} runs")
    L.append(f"- traces ({df['trace'].nunique()}): {trace_list}")
    L.append(f"- clips ({df['clip'].nunique()}): {clip_list}")
    L.append(f"- schemes: {', '.join(f'`{s}`' for s in order)}")
    if hdf is not None and hd is not None:
        L.append(f"- 1080p matrix (`{hd.name}`): {_settings(hd)}; {len(hdf)} runs; clip "
                 + ", ".join(f"`{c}`" for c in dict.fromkeys(hdf["clip"])))
    for n in [*(res.plan.get("skipped") or []), *((hd.plan.get("skipped") or []) if hd
                                                  else [])]:  # fmt: skip
        L.append(f"- note: {n}")
    L.append("")
    L.append(prose(REPORT, "baseline"))

    L.append("## Headline against the paper\n")
    L.append(prose(REPORT, "headline", p95=PAPER["p95"], vmaf=PAPER["vmaf"],
                   stall=PAPER["stall"], switch=PAPER["switch"], baseline=BASELINE))  # fmt: skip
    L.append(headline_table(parts, groups) + "\n")

    L.append("## Analysis\n")
    analysis = existing_analysis(md_path)  # kept byte for byte
    L.append(ANALYSIS_SLOT)

    L.append("## Latency vs quality per network type (ACE Fig. 12)\n")
    L.append(f"### Main matrix ({main_label})\n")
    L.append(prose(REPORT, "tradeoff", legend=MEANS_LEGEND))
    _section(L, df, main, groups)
    L.append(fig("tradeoff"))
    if hdf is not None:
        hmain = [s for s in scheme_order(hdf) if not s.startswith("ace-T")]
        hgroups = [g for g in groups if g in set(hdf["network"])]
        L.append(f"### At the paper's resolution ({hd_label})\n")
        L.append(prose(REPORT, "hd"))
        _section(L, hdf, hmain, hgroups)

    L.append("## ACE-C's switching share per clip (ACE §6.7)\n")
    L.append(prose(REPORT, "switching", paper=PAPER["switch"]))
    short = [(main_label.split(",")[0], df)]
    if hdf is not None:
        short.append((hd_label.split(",")[0], hdf))
    L.append(switching_table(short, groups) + "\n")

    L.append("## Latency distribution, loss and stalls (ACE Fig. 14)\n")
    L.append(prose(REPORT, "pooled"))
    L.append(pooled_table(df, main, BASELINE) + "\n")
    L.append(fig("cdf") + fig("loss"))

    L.append("## Ablation (ACE Fig. 15)\n")
    abl = [s for s in ablation(df) if s in order]
    L.append(means_table(df, abl, METRICS) + "\n")
    if BASELINE in abl:
        L.append(group_table(df, abl, BASELINE, "latency_all_ms_p95", "ratio", groups) + "\n")
    L.append(fig("ablation"))

    L.append("## Sensitivity to T (ACE Fig. 16)\n")
    if df["T"].notna().any():
        L.append(prose(REPORT, "sweep", ace=ACE, path=T_PATH))
        L.append(sweep_table(df, groups) + "\n")
        L.append(fig("sweep"))
    else:
        L.append(prose(REPORT, "sweep-not-run", path=T_PATH))

    L.append("## ACE decisions and ACE-N dynamics (ACE Fig. 17, Fig. 25)\n")
    L.append(fig("decisions") + fig("timeseries"))

    L.append("## Definitions\n")
    L.append(prose(REPORT, "definitions", burst_factor=f"{BURST_RATE_FACTOR:g}"))
    return write_markdown(md_path, L, analysis)


# --- main -----------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = report_parser(PROG, __doc__)
    p.add_argument(
        "results",
        metavar="RESULTS",
        help="the matrix's results directory (results/ace) or its plan file",
    )
    add_results_root(p)
    add_report_dir(p, "<name>.md, <name>-runs.csv and img/", "RESULTS", "ace-report")
    p.add_argument(
        "--hd",
        metavar="RESULTS",
        help="the 1080p matrix's results directory (results/ace-1080p) or its plan file",
    )
    p.add_argument(
        "--detail-trace",
        metavar="LABEL",
        help="trace of the single-run figures (default: the first Wi-Fi trace)",
    )
    p.add_argument(
        "--detail-clip",
        metavar="LABEL",
        help="clip of the single-run figures (default: the first clip)",
    )
    return p.parse_args(argv)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    return report_main(PROG, argv, parse_args, _write)


def _write(args: argparse.Namespace, command: str) -> str:
    res = load(args.results, args.results_root)
    hd = load(args.hd, args.results_root) if args.hd else None
    md = write_report(res, report_dir_of(args, res.path), detail_trace=args.detail_trace,
                      detail_clip=args.detail_clip, hd=hd, command=command)  # fmt: skip
    return f"{len(res.table)} runs; report: {md}"


if __name__ == "__main__":
    sys.exit(main())
