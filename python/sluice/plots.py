"""Plots from saved runs (matplotlib, Agg backend, PNG output).

Analysis is separate from running: every function here takes loaded :class:`~sluice.results.Run`
objects, so plots can be redrawn from a results directory at any time (``sluice plot``).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .results import Run  # noqa: E402

_FALLBACK = plt.get_cmap("tab10").colors


@functools.lru_cache(maxsize=1)
def registry_colors() -> dict[str, str]:
    """Scheme name -> colour from the core's registry ({} if the extension is unavailable)."""
    try:
        from .errors import core

        return {s["name"]: s["color"] for s in json.loads(core().schemes_json())}
    except Exception:  # plots from saved results must not need the simulator
        return {}


def scheme_colors(runs: Sequence[Run]) -> list[str]:
    """One colour per run: the registry's for known schemes, a stable fallback otherwise."""
    reg = registry_colors()
    used = set(reg.values())
    spare = [c for c in (matplotlib.colors.to_hex(c) for c in _FALLBACK) if c not in used]
    assigned: dict[str, str] = {}
    out = []
    for r in runs:
        if r.scheme in reg:
            out.append(reg[r.scheme])
            continue
        if r.scheme not in assigned:
            assigned[r.scheme] = spare[len(assigned) % len(spare)] if spare else "#333333"
        out.append(assigned[r.scheme])
    return out


def run_labels(runs: Sequence[Run]) -> list[str]:
    """Scheme names, disambiguated by trace and seed when runs share a scheme."""
    labels = [r.scheme for r in runs]
    if len(set(labels)) == len(labels):
        return labels
    traces = {r.trace_name for r in runs}
    out = []
    for r in runs:
        parts = [r.scheme]
        if len(traces) > 1:
            parts.append(r.trace_name)
        parts.append(f"s{r.seed}")
        out.append(" ".join(parts))
    return out


def latency_ms(run: Run) -> np.ndarray:
    """Latencies (ms) of displayed frames."""
    if run.frames.empty:
        return np.array([])
    lat = run.frames["latency_us"].dropna().to_numpy(dtype=float)
    return lat / 1000.0


def plot_latency_cdf(runs: Sequence[Run], out: str | os.PathLike[str], logx: bool = False) -> Path:
    """CDF of frame latency (capture to display), one line per run."""
    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    for run, color, label in zip(runs, scheme_colors(runs), run_labels(runs)):
        lat = np.sort(latency_ms(run))
        if lat.size == 0:
            ax.plot([], [], color=color, label=f"{label} (no frames displayed)")
            continue
        y = np.arange(1, lat.size + 1) / lat.size
        p95 = lat[min(lat.size - 1, int(np.ceil(0.95 * lat.size)) - 1)]
        ax.step(lat, y, where="post", color=color, lw=1.6, label=f"{label} (p95 {p95:.0f} ms)")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel("frame latency, capture to display (ms)" + (", log scale" if logx else ""))
    ax.set_ylabel("fraction of displayed frames")
    ax.set_ylim(0, 1.005)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(_title(runs, "Frame latency CDF"), fontsize=10)
    return _save(fig, out)


def plot_timeseries(runs: Sequence[Run], out: str | os.PathLike[str]) -> Path:
    """Per run (column): rates, bottleneck queue delay, pacer delay, frame latency."""
    n = max(1, len(runs))
    fig, axes = plt.subplots(
        4, n, figsize=(4.8 * n + 0.6, 10), sharex="col", sharey="row", squeeze=False,
        layout="constrained",
    )  # fmt: skip
    for col, (run, color, label) in enumerate(zip(runs, scheme_colors(runs), run_labels(runs))):
        ax_rate, ax_q, ax_p, ax_lat = axes[:, col]
        s = run.samples
        if not s.empty:
            t = s["t_us"].to_numpy(dtype=float) / 1e6
            ax_rate.fill_between(
                t, s["link_capacity_bps"].to_numpy(dtype=float) / 1e6, step="pre",
                color="0.8", label="capacity",
            )  # fmt: skip
            ax_rate.plot(t, s["target_rate_bps"] / 1e6, color=color, lw=1.4, label="target")
            ax_rate.plot(
                t, s["delivered_rate_bps"] / 1e6, color="k", lw=0.8, alpha=0.7, label="delivered"
            )
            ax_q.plot(t, s["queue_delay_us"] / 1e3, color=color, lw=1)
            ax_p.plot(t, s["pacer_delay_us"] / 1e3, color=color, lw=1)
        f = run.frames
        if not f.empty:
            shown = f.dropna(subset=["latency_us"])
            ax_lat.scatter(
                shown["capture_us"] / 1e6, shown["latency_us"] / 1e3, s=3, color=color,
                label="displayed",
            )  # fmt: skip
            lost = f[f["latency_us"].isna()]
            if len(lost):
                ax_lat.scatter(
                    lost["capture_us"] / 1e6, np.zeros(len(lost)), s=8, marker="x",
                    color="tab:red", label=f"not displayed ({len(lost)})",
                )  # fmt: skip
                ax_lat.legend(loc="upper right", fontsize=7)
        ax_rate.set_title(label, color=color, fontsize=11, fontweight="bold")
        ax_lat.set_xlabel("time (s)")
        for ax in axes[:, col]:
            ax.grid(True, alpha=0.3)
        if col == 0:
            ax_rate.legend(loc="upper right", fontsize=7)
    axes[0, 0].set_ylabel("rate (Mbit/s)")
    axes[1, 0].set_ylabel("bottleneck queue delay (ms)")
    axes[2, 0].set_ylabel("pacer delay (ms)")
    axes[3, 0].set_ylabel("frame latency (ms)")
    for ax in axes[1:, 0]:
        ax.set_ylim(bottom=0)
    fig.suptitle(_title(runs, "Time series"), fontsize=10)
    return _save(fig, out)


def plot_runs(
    runs: Sequence[Run], out_dir: str | os.PathLike[str], logx: bool = False
) -> list[Path]:
    """Writes ``latency_cdf.png`` and ``timeseries.png`` into ``out_dir``."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    return [
        plot_latency_cdf(runs, d / "latency_cdf.png", logx=logx),
        plot_timeseries(runs, d / "timeseries.png"),
    ]


def _title(runs: Sequence[Run], what: str) -> str:
    traces = sorted({r.trace_name for r in runs})
    if not runs:
        return what
    cfg = runs[0].config.get("downlink", {})
    net = []
    if cfg.get("delay_ms") is not None:
        net.append(f"{cfg['delay_ms']:g} ms one-way")
    if cfg.get("queue_bytes"):
        net.append(f"queue {cfg['queue_bytes']} B")
    elif cfg.get("queue_packets"):
        net.append(f"queue {cfg['queue_packets']} pkts")
    if cfg.get("loss"):
        net.append(f"loss {cfg['loss']:g}")
    return f"{what}: {', '.join(traces)}" + (f" ({', '.join(net)})" if net else "")


def _save(fig: plt.Figure, out: str | os.PathLike[str]) -> Path:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
