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


def _cdf_line(ax: plt.Axes, lat: np.ndarray, color: str, label: str) -> None:
    """One latency CDF line; the legend gives its P95 as the summary defines it (linear
    interpolation)."""
    lat = np.sort(lat)
    if lat.size == 0:
        ax.plot([], [], color=color, label=f"{label} (no frames displayed)")
        return
    y = np.arange(1, lat.size + 1) / lat.size
    p95 = np.percentile(lat, 95)
    ax.step(lat, y, where="post", color=color, lw=1.6, label=f"{label} (p95 {p95:.0f} ms)")


def _cdf_axes(ax: plt.Axes, logx: bool, title: str) -> None:
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel("frame latency, capture to display (ms)" + (", log scale" if logx else ""))
    ax.set_ylabel("fraction of displayed frames")
    ax.set_ylim(0, 1.005)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title, fontsize=10)


def plot_latency_cdf(runs: Sequence[Run], out: str | os.PathLike[str], logx: bool = False) -> Path:
    """CDF of frame latency (capture to display), one line per run."""
    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    for run, color, label in zip(runs, scheme_colors(runs), run_labels(runs)):
        _cdf_line(ax, latency_ms(run), color, label)
    _cdf_axes(ax, logx, _title(runs, "Frame latency CDF"))
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


# --- experiment matrices (sluice.experiments rows) -------------------------------------------
#
# These take the DataFrame of :func:`sluice.experiments.run_matrix` (one row per run: scheme,
# network, p95_ms, vmaf_mean, loss_rate, stall_rate, run_dir, ...) or single loaded runs.


def _derived_color(name: str) -> str:
    """A deterministic colour for a scheme the registry does not know. A variant named
    ``<registered>-<suffix>`` (``ace-T7.5``) gets a shade of its base scheme's colour; any
    other name a hue from a hash of the name."""
    import colorsys
    import hashlib

    h = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") / 2**32
    reg = registry_colors()
    base = max((b for b in reg if name.startswith(b + "-")), key=len, default=None)
    if base is not None:
        r, g, b = matplotlib.colors.to_rgb(reg[base])
        hue, light, sat = colorsys.rgb_to_hls(r, g, b)
        # Clearly darker or lighter than the base (never white or black), so the variant
        # stands apart from its base in a legend.
        step = 0.2 + 0.15 * h
        light = light - step if light > 0.5 else light + step
        return matplotlib.colors.to_hex(colorsys.hls_to_rgb(hue, min(max(light, 0.15), 0.85), sat))
    return matplotlib.colors.to_hex(colorsys.hsv_to_rgb(h, 0.65, 0.8))


def scheme_color(name: str) -> str:
    """The registry's colour for ``name``, else a deterministic derived one."""
    return registry_colors().get(name) or _derived_color(name)


def _ordered(values: Sequence) -> list:
    return list(dict.fromkeys(v for v in values if v is not None))


def _subset(df, schemes: Sequence[str] | None):
    if schemes is None:
        return df, _ordered(df["scheme"])
    present = set(df["scheme"])
    return df[df["scheme"].isin(schemes)], [s for s in schemes if s in present]


def _no_data(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=9,
            color="0.4", wrap=True)  # fmt: skip


def plot_tradeoff(
    df,
    out: str | os.PathLike[str],
    *,
    schemes: Sequence[str] | None = None,
    by: str | None = "network",
    x: str = "p95_ms",
    y: str = "vmaf_mean",
    title: str = "P95 latency vs mean VMAF",
) -> Path:
    """ACE Fig. 12: one panel per ``by`` value (network type; ``None``: one panel). Every run
    is a faint point, each scheme's mean over its runs a bold marker with its name. Without
    quality scores (model encoder) the y axis lists the schemes instead."""
    df, names = _subset(df, schemes)
    groups = _ordered(df[by]) if by and len(df) else [None]
    n = max(1, len(groups))
    fig, axes = plt.subplots(1, n, figsize=(4.6 * n + 1.6, 4.4), squeeze=False,
                             layout="constrained")  # fmt: skip
    legend: dict[str, object] = {}
    for ax, g in zip(axes[0], groups):
        sub = df if g is None else df[df[by] == g]
        has_y = sub[y].notna().any() if len(sub) else False
        for i, s in enumerate(names):
            rows = sub[sub["scheme"] == s]
            if rows.empty:
                continue
            c = scheme_color(s)
            xs = rows[x].to_numpy(dtype=float)
            ys = rows[y].to_numpy(dtype=float) if has_y else np.full(len(rows), float(i))
            ax.scatter(xs, ys, color=c, alpha=0.25, s=14, lw=0)
            ok = np.isfinite(xs) & np.isfinite(ys)
            if not ok.any():
                continue
            mx, my = xs[ok].mean(), ys[ok].mean()
            ax.scatter([mx], [my], color=c, s=70, edgecolor="k", lw=0.8, zorder=3, label=s)
            legend.setdefault(s, ax.collections[-1])
        if sub.empty:
            _no_data(ax, "no runs")
        ax.set_xlabel("P95 frame latency (ms)" if x == "p95_ms" else x)
        if has_y:
            ax.set_ylabel("mean VMAF" if y == "vmaf_mean" else y)
            ax.annotate("better", xy=(0.06, 0.94), xytext=(0.22, 0.78), xycoords="axes fraction",
                        arrowprops={"arrowstyle": "->", "color": "0.4"}, fontsize=8,
                        color="0.4")  # fmt: skip
        else:
            ax.set_yticks(range(len(names)), names, fontsize=8)
            ax.set_ylim(-0.7, len(names) - 0.3)
            ax.text(0.98, 0.02, f"no {y} (runs without quality scores)", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=7, color="0.4")  # fmt: skip
        ax.grid(True, alpha=0.3)
        nruns = len(sub)
        ax.set_title(f"{g if g is not None else 'all runs'} ({nruns} runs)", fontsize=10)
    if legend:
        # Centred: at the top it would sit under the suptitle.
        fig.legend(list(legend.values()), list(legend), loc="outside right center", fontsize=8)
    fig.suptitle(f"{title}: faint = one run, bold = mean over runs", fontsize=10)
    return _save(fig, out)


def pooled_latencies(df, schemes: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """Scheme -> latencies (ms) of the displayed frames of all its runs (``run_dir``)."""
    from .results import load_run

    df, names = _subset(df, schemes)
    out: dict[str, np.ndarray] = {}
    for s in names:
        parts = [latency_ms(load_run(d)) for d in df.loc[df["scheme"] == s, "run_dir"]]
        out[s] = np.concatenate(parts) if parts else np.array([])
    return out


def plot_latency_cdf_pooled(
    df,
    out: str | os.PathLike[str],
    *,
    schemes: Sequence[str] | None = None,
    logx: bool = False,
    title: str = "Frame latency CDF, all runs pooled",
) -> Path:
    """ACE Fig. 14a: one CDF per scheme over the displayed frames of all its runs."""
    lats = pooled_latencies(df, schemes)
    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    for s, lat in lats.items():
        _cdf_line(ax, lat, scheme_color(s), s)
    if not lats:
        _no_data(ax, "no runs")
    _cdf_axes(ax, logx, title)
    return _save(fig, out)


def plot_loss_stall(
    df,
    out: str | os.PathLike[str],
    *,
    schemes: Sequence[str] | None = None,
    metrics: Sequence[tuple[str, str]] = (
        ("loss_rate", "packet loss rate (%)"),
        ("stall_rate", "stall rate (%)"),
    ),
    title: str = "Loss and stalls (bar: mean over runs, dots: runs)",
) -> Path:
    """ACE Fig. 14b,c: one bar chart per metric (a rate, shown in %), a bar per scheme."""
    df, names = _subset(df, schemes)
    n = max(1, len(metrics))
    fig, axes = plt.subplots(1, n, figsize=(max(4.5, 0.7 * len(names) + 1.5) * n, 4.2),
                             squeeze=False, layout="constrained")  # fmt: skip
    for ax, (col, label) in zip(axes[0], metrics):
        for i, s in enumerate(names):
            v = df.loc[df["scheme"] == s, col].to_numpy(dtype=float) * 100
            c = scheme_color(s)
            ok = v[np.isfinite(v)]
            if ok.size:
                ax.bar(i, ok.mean(), color=c, alpha=0.85, width=0.7)
                jitter = (np.arange(ok.size) - (ok.size - 1) / 2) * min(0.08, 0.5 / ok.size)
                ax.scatter(i + jitter, ok, color="k", s=6, alpha=0.5, zorder=3)
        ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(True, axis="y", alpha=0.3)
        if not names:
            _no_data(ax, "no runs")
    fig.suptitle(title, fontsize=10)
    return _save(fig, out)


ABLATION_SCHEMES = ("webrtc-x264", "ace-c", "ace-n", "ace")


def plot_ablation(
    df,
    out: str | os.PathLike[str],
    *,
    schemes: Sequence[str] = ABLATION_SCHEMES,
    baselines: Sequence[str] = (),
) -> Path:
    """ACE Fig. 15: the ablation schemes (and any ``baselines``) on the trade-off plane,
    all runs in one panel."""
    return plot_tradeoff(df, out, schemes=[*schemes, *baselines], by=None,
                         title="Ablation: P95 latency vs mean VMAF")  # fmt: skip


def plot_param_sweep(
    df,
    out: str | os.PathLike[str],
    *,
    param: str = "T",
    param_label: str = "ACE-N threshold T (packets)",
    metrics: Sequence[tuple[str, str, float]] = (
        ("p95_ms", "P95 latency (ms)", 1.0),
        ("vmaf_mean", "mean VMAF", 1.0),
        ("loss_rate", "loss rate (%)", 100.0),
    ),
    reference=None,
    by: str | None = "network",
    title: str = "Sensitivity to T",
) -> Path:
    """ACE Fig. 16: each metric against ``param`` (a column of ``df``; rows without it are
    ignored): the mean over all runs (bold, +-1 standard deviation) and the mean per ``by``
    group (thin). ``reference``: rows of other schemes, drawn as dashed horizontal lines at
    their mean (e.g. webrtc-x264)."""
    sweep = df[df[param].notna()] if param in df else df.iloc[0:0]
    values = sorted(set(sweep[param].astype(float)))
    n = len(metrics)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.8), squeeze=False, layout="constrained")
    groups = _ordered(sweep[by]) if by and by in sweep and len(sweep) else []
    group_colors = plt.get_cmap("tab10").colors
    for ax, (col, label, scale) in zip(axes[0], metrics):
        has = sweep[col].notna().any() if len(sweep) else False
        if not has:
            _no_data(ax, f"no {col}")
        else:
            stats = sweep.groupby(param)[col].agg(["mean", "std"]).reindex(values) * scale
            ax.errorbar(values, stats["mean"], yerr=stats["std"].fillna(0), color="k", lw=2,
                        marker="o", capsize=3, label="all runs")  # fmt: skip
            for gi, g in enumerate(groups):
                m = sweep[sweep[by] == g].groupby(param)[col].mean().reindex(values) * scale
                ax.plot(values, m, marker=".", lw=1, alpha=0.8, label=str(g),
                        color=group_colors[gi % len(group_colors)])  # fmt: skip
        if reference is not None and len(reference) and col in reference:
            for s in _ordered(reference["scheme"]):
                v = reference.loc[reference["scheme"] == s, col].mean() * scale
                if np.isfinite(v):
                    ax.axhline(v, ls="--", lw=1, color=scheme_color(s), label=f"{s} (mean)")
        ax.set_xlabel(param_label)
        ax.set_ylabel(label)
        if values:
            ax.set_xticks(values, [f"{v:g}" for v in values])
        ax.grid(True, alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    return _save(fig, out)


# --- single ACE runs --------------------------------------------------------------------------


def _config_param(run: Run, key: str) -> float | None:
    from .experiments import find_param

    v = find_param(run.config.get("scheme"), key)
    return None if v is None else float(v)


def acen_threshold(run: Run) -> tuple[float | None, float]:
    """(ACE-N threshold T in packets or None if the pacer has none, packet size in bytes)."""
    from .experiments import ACE_N_PACKET_FIELD, ACE_N_T_FIELD

    return _config_param(run, ACE_N_T_FIELD), _config_param(run, ACE_N_PACKET_FIELD) or 1260.0


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
            _no_data(ax, "no samples")
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
            _no_data(ax_c, f"no token-bucket state: the {run.scheme} pacer reports none")
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
    return _save(fig, out)


COMPLEXITY_MARKERS = {"c0": "s", "c1": "X", "c2": "P"}


def decision_points(run: Run):
    """Per sent frame (ACE Fig. 17): ``relative_size`` = size / target frame size
    (``target_rate_bps / 8 / fps``), ``queue_bytes`` = the real bottleneck queue in the last
    sample at or before the frame's first packet left (the queue the frame found; samples
    are every 20 ms), ``complexity`` and ``burst`` (:func:`sluice.experiments.frame_burst`)."""
    import pandas as pd

    from .experiments import frame_burst

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
        _no_data(ax, "no frames sent")
    levels = sorted(_ordered(d["complexity"].dropna())) if len(d) else []
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
    return _save(fig, out)
