"""Generic plots from saved runs and results tables (matplotlib, Agg backend, PNG output).

Analysis is separate from running: every function here takes loaded :class:`~sluice.results.Run`
objects or a results table (one row per run, :mod:`sluice.experiments`), so plots can be
redrawn from a results directory at any time (``sluice plot``). Plots of one system's
internals live with its analysis (:mod:`sluice.analysis`).

Every plot colours a scheme with :func:`scheme_color`: the registry's colour, else a stable
colour derived from the name (a variant such as ``ace-T7.5`` gets a shade of its base's).
A report sets the colours of its schemes by family (:func:`family_palette`): a sweep's
variants in evenly spaced shades of their scheme's colour.
"""

from __future__ import annotations

import colorsys
import contextlib
import hashlib
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .config import scheme_colors as registry_colors  # noqa: E402
from .errors import output_file  # noqa: E402
from .metrics import metric  # noqa: E402
from .report import flow_words, queue_words  # noqa: E402
from .results import Run  # noqa: E402

#: Colours of runs that are not registered schemes: Chromium's own sender (``browser run``),
#: whose derived hue fell next to ``webrtc``'s blue.
OTHER_COLORS = {"chrome": "#6a3d9a"}


#: Colours :func:`family_palette` chose for the schemes of one report (None: none chosen).
_PALETTE: dict[str, str] | None = None


@contextlib.contextmanager
def family_palette(names: Sequence[str], parents: dict[str, str | None] | None = None
                   ) -> Iterator[dict[str, str]]:  # fmt: skip
    """Within the block, :func:`scheme_color` gives ``names`` (the schemes of one report or
    plot) colours by family: a registered scheme its own, a scheme of the plan's own (a
    composition) the hue farthest from the others', and the variants of one scheme (a
    sweep's, from ``parents`` or a ``<scheme>-`` prefix of the name) shades of its colour
    spread evenly from dark to light in the order of their names (numbers by value), so no
    two look alike and the same names get the same colours in every plot of them. A
    registered scheme is never a variant. Within an enclosing block, the names it coloured
    keep their colours."""
    global _PALETTE
    reg = {**registry_colors(), **OTHER_COLORS}
    names = list(dict.fromkeys(names))
    parents = parents or {}

    def parent(n: str) -> str | None:
        if n in reg:
            return None
        if parents.get(n):
            return parents[n]
        return max((b for b in [*reg, *names] if n.startswith(b + "-")), key=len, default=None)

    families: dict[str, list[str]] = {}
    for n in names:
        root, seen = n, {n}
        while (p := parent(root)) is not None and p not in seen:
            root = p
            seen.add(p)
        families.setdefault(root, []).append(n)
    chosen: dict[str, str] = {}
    # A root of the plan's own takes the hue farthest from those of the other roots here.
    hues = [colorsys.rgb_to_hls(*matplotlib.colors.to_rgb(reg[r]))[0] for r in families
            if r in reg]  # fmt: skip
    for root in sorted(r for r in families if r not in reg):
        hue = max((k / 24 for k in range(24)),
                  key=lambda h: min((min(abs(h - u), 1 - abs(h - u)) for u in hues), default=1))
        hues.append(hue)
        chosen[root] = matplotlib.colors.to_hex(colorsys.hsv_to_rgb(hue, 0.65, 0.8))
    for root, members in families.items():
        base = chosen.get(root) or reg[root]
        chosen[root] = base
        variants = sorted((m for m in members if m != root), key=_natural)
        r, g, b = matplotlib.colors.to_rgb(base)
        hue, light, sat = colorsys.rgb_to_hls(r, g, b)
        # n + 1 evenly spaced lightnesses, the one nearest the base's left to the base.
        levels = list(np.linspace(0.22, 0.75, len(variants) + 1))
        levels.pop(int(np.argmin([abs(x - light) for x in levels])))
        for m, level in zip(variants, levels):
            rgb = colorsys.hls_to_rgb(hue, level, sat)
            chosen[m] = matplotlib.colors.to_hex(tuple(min(max(c, 0.0), 1.0) for c in rgb))
    before = _PALETTE
    _PALETTE = {**chosen, **(before or {})}  # an enclosing block's colours stand
    try:
        yield chosen
    finally:
        _PALETTE = before


def _natural(name: str) -> list[Any]:
    """A sort key that orders the numbers in a name by value (``x-vbv100`` before
    ``x-vbv1000``, ``x-T7.5`` before ``x-T10``)."""
    return [(0, float(p), "") if i % 2 else (1, 0.0, p)
            for i, p in enumerate(re.split(r"(\d+(?:\.\d+)?)", name))]  # fmt: skip


def _outlined(color: str) -> dict[str, Any]:
    """Text options for ``color`` on white: a light shade (a sweep's palest variant) gets
    a grey outline, so it reads and keeps its colour."""
    from matplotlib import patheffects

    light = colorsys.rgb_to_hls(*matplotlib.colors.to_rgb(color))[1]
    if light <= 0.6:
        return {"color": color}
    return {"color": color, "path_effects": [patheffects.withStroke(linewidth=1.2,
                                                                    foreground="0.35")]}


def _hashed(name: str) -> str:
    h = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") / 2**32
    return matplotlib.colors.to_hex(colorsys.hsv_to_rgb(h, 0.65, 0.8))


def scheme_color(name: str, base: str | None = None) -> str:
    """The colour of scheme ``name`` in every plot: the one :func:`family_palette` chose
    where one is in force; else the registry's; else, for a variant of a registered scheme
    (``base``, or the longest registered ``<base>-`` prefix of the name, as in
    ``ace-T7.5``), a shade of the base's colour; else a hue derived from the name. Outside
    a palette, stable across plots and runs; within one, the same for the same names."""
    if _PALETTE is not None and name in _PALETTE:
        return _PALETTE[name]
    reg = {**registry_colors(), **OTHER_COLORS}
    if name in reg:
        return reg[name]
    h = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") / 2**32
    if base not in reg:
        base = max((b for b in reg if name.startswith(b + "-")), key=len, default=None)
    if base is not None:
        r, g, b = matplotlib.colors.to_rgb(reg[base])
        hue, light, sat = colorsys.rgb_to_hls(r, g, b)
        # Clearly darker or lighter than the base (never white or black), so the variant
        # stands apart from its base in a legend.
        step = 0.2 + 0.15 * h
        light = light - step if light > 0.5 else light + step
        rgb = colorsys.hls_to_rgb(hue, min(max(light, 0.15), 0.85), sat)
        # hls_to_rgb can overshoot 1 by a rounding error, which newer matplotlib rejects.
        return matplotlib.colors.to_hex(tuple(min(max(c, 0.0), 1.0) for c in rgb))
    return _hashed(name)


def scheme_colors(runs: Sequence[Run]) -> list[str]:
    """One colour per run: :func:`scheme_color` of its scheme, and for a scheme's second
    and later runs in one plot (two traces, two seeds) a shade of it, so their lines differ."""
    seen: dict[str, int] = {}
    out = []
    for r in runs:
        k = seen[r.scheme] = seen.get(r.scheme, -1) + 1
        out.append(_shade(scheme_color(r.scheme), k))
    return out


def _shade(color: str, k: int) -> str:
    """``color`` itself for ``k`` 0, else its ``k``-th shade: lighter and darker in turn, a
    step further each pair (+0.15, -0.15, +0.3, -0.3, ... of lightness), skipping the steps
    that would leave [0.1, 0.9], so every ``k`` gets its own shade."""
    if k == 0:
        return color
    hue, light, sat = colorsys.rgb_to_hls(*matplotlib.colors.to_rgb(color))
    offsets = (0.15 * (n // 2 + 1) * (1 if n % 2 == 0 else -1) for n in range(40))
    feasible = [light + d for d in offsets if 0.1 <= light + d <= 0.9]
    new = feasible[(k - 1) % len(feasible)]
    rgb = colorsys.hls_to_rgb(hue, new, sat)
    return matplotlib.colors.to_hex(tuple(min(max(c, 0.0), 1.0) for c in rgb))


def run_labels(runs: Sequence[Run]) -> list[str]:
    """Scheme names, disambiguated by trace and seed when runs share a scheme (and as live
    or simulated where both are there), and by the part of their paths the runs with one
    label do not share when that is not enough (the same cell of two result folders:
    ``webrtc s1 (res)``, ``webrtc s1 (res2)``)."""
    labels = [r.scheme for r in runs]
    if len(set(labels)) == len(labels):
        return labels
    traces = {r.trace_name for r in runs}
    from .results import LIVE_FILE

    live = [(Path(r.path) / LIVE_FILE).is_file() for r in runs]
    out = []
    for r, is_live in zip(runs, live):
        parts = [r.scheme]
        if len(traces) > 1:
            parts.append(r.trace_name)
        parts.append(f"s{r.seed}")
        if len(set(live)) > 1:  # live runs beside simulated ones
            parts.append("live" if is_live else "simulated")
        out.append(" ".join(parts))
    if len(set(out)) == len(out):
        return out
    paths = [Path(os.path.abspath(r.path)).parts for r in runs]
    named = list(out)
    for label in set(out):
        group = [i for i, o in enumerate(out) if o == label]
        if len(group) < 2:
            continue
        # each twin by the part of its path the group does not share (``res`` and ``res2``
        # of res/p/t/webrtc/s1 and res2/p/t/webrtc/s1)
        ps = [paths[i] for i in group]
        head = next((n for n, parts in enumerate(zip(*ps)) if len(set(parts)) > 1),
                    min(map(len, ps)))  # fmt: skip
        tail = next((n for n, parts in enumerate(zip(*(p[::-1] for p in ps)))
                     if len(set(parts)) > 1), min(map(len, ps)))  # fmt: skip
        for i, p in zip(group, ps):
            part = "/".join(p[head:len(p) - tail]) or "/".join(p[head:]) or p[-1]
            named[i] = f"{label} ({part})"
    return named


def latency_ms(run: Run) -> np.ndarray:
    """Latencies (ms) of displayed frames."""
    if run.frames.empty:
        return np.array([])
    lat = run.frames["latency_us"].dropna().to_numpy(dtype=float)
    return lat / 1000.0


def cdf_line(ax: plt.Axes, lat: np.ndarray, color: str, label: str) -> None:
    """One latency CDF line; the legend gives its P95 as the summary defines it (linear
    interpolation)."""
    lat = np.sort(lat)
    if lat.size == 0:
        ax.plot([], [], color=color, label=f"{label} (no frames displayed)")
        return
    y = np.arange(1, lat.size + 1) / lat.size
    p95 = np.percentile(lat, 95)
    ax.step(lat, y, where="post", color=color, lw=1.6, label=f"{label} (p95 {p95:.0f} ms)")


def tidy_log_axis(axis: Any) -> None:
    """A log ``axis`` (``ax.xaxis``, ``ax.yaxis``) spanning less than two decades gets
    plain-number ticks (1, 2, 5 of each decade: 20, 50, 100, 200; 1, 2, 3, 5 within one
    decade: 2000, 3000, 5000, 10000; evenly spaced where fewer than two of those fall in it:
    205, 210, 215) instead of matplotlib's labelled minor ticks, which run into each other
    there (2.055x10^2 2.06x10^2 ..., 3x10^1 4x10^1). Call it once the data are drawn."""
    import numpy as np
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    lo, hi = axis.get_view_interval()
    if not (lo > 0 and hi > lo and hi / lo < 100):
        return
    subs = (1.0, 2.0, 5.0) if hi / lo >= 10 else (1.0, 2.0, 3.0, 5.0)
    decades = range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
    inside = [s * 10.0**d for d in decades for s in subs if lo <= s * 10.0**d <= hi]
    if len(inside) >= 2:
        axis.set_major_locator(LogLocator(subs=subs))
    else:
        axis.set_major_locator(MaxNLocator(nbins=5, min_n_ticks=2))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def cdf_axes(ax: plt.Axes, logx: bool, title: str, slots: bool = False) -> None:
    """A latency CDF's axes: of the displayed frames, or (``slots``) of every capture slot."""
    if logx:
        ax.set_xscale("log")
    what = ("latency per capture slot, all slots (ms; a slot not shown waits for the next "
            "shown frame)" if slots else "frame latency, capture to display (ms)")  # fmt: skip
    ax.set_xlabel(what + (", log scale" if logx else ""))
    ax.set_ylabel("fraction of capture slots" if slots else "fraction of displayed frames")
    ax.set_ylim(0, 1.005)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title, fontsize=10)
    if logx:
        tidy_log_axis(ax.xaxis)


def plot_latency_cdf(runs: Sequence[Run], out: str | os.PathLike[str], logx: bool = False) -> Path:
    """CDF of the latency per capture slot (every slot, Salsify's rule: the all-slot latency
    the tables lead with; the legend's P95 is the summary's ``latency_all_ms_p95``), one line
    per run."""
    from .metrics import slot_latencies_ms

    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    for run, color, label in zip(runs, scheme_colors(runs), run_labels(runs)):
        lat = slot_latencies_ms(run) if not run.frames.empty else np.array([])
        cdf_line(ax, lat, color, label)
    cdf_axes(ax, logx, _title(runs, "Latency CDF, all capture slots", width=80), slots=True)
    return save(fig, out)


def competing_rates(run: Run) -> list[tuple[int, str, Any]]:
    """The competing flows' delivered rates at the bottleneck (the samples'
    ``flow<ID>_rate_bps`` columns, ID >= 1), with each flow's name from the summary's
    ``flows`` (``tcp:cubic``, ``media:webrtc``); empty for a run without competing flows."""
    names = {}
    for f in (run.summary or {}).get("flows") or []:
        if isinstance(f, dict):
            # A reverse flow's bytes are the uplink's, not the drawn capacity's.
            where = " (uplink)" if str(f.get("kind")).startswith("reverse-") else ""
            names[f.get("flow")] = f"{f.get('kind')}:{f.get('scheme')}{where}"
    out = []
    for c in run.samples.columns:
        m = re.fullmatch(r"flow(\d+)_rate_bps", str(c))
        if m and int(m.group(1)) > 0:
            flow = int(m.group(1))
            out.append((flow, names.get(flow, "?"), run.samples[c].to_numpy(dtype=float)))
    return sorted(out, key=lambda x: x[0])


def plot_timeseries(runs: Sequence[Run], out: str | os.PathLike[str]) -> Path:
    """Per run (column): rates (and every competing flow's), bottleneck queue delay, pacer
    delay, frame latency."""
    n = max(1, len(runs))
    width_in = 4.8 * n + 0.6
    fig, axes = plt.subplots(
        4, n, figsize=(width_in, 10), sharex="col", squeeze=False, layout="constrained",
    )  # fmt: skip
    for col, (run, color, label) in enumerate(zip(runs, scheme_colors(runs), run_labels(runs))):
        ax_rate, ax_q, ax_p, ax_lat = axes[:, col]
        s = run.samples
        flows = competing_rates(run) if not s.empty else []
        dark = False
        if not s.empty:
            t = s["t_us"].to_numpy(dtype=float) / 1e6
            ax_rate.fill_between(
                t, s["link_capacity_bps"].to_numpy(dtype=float) / 1e6, step="pre",
                color="0.8", label="capacity",
            )  # fmt: skip
            # Competing flows under the session's own lines, in greys and dashes no scheme
            # has (a scheme's colour would read as another scheme's target).
            for k, (flow, name, rate) in enumerate(flows):
                ax_rate.plot(
                    t, rate / 1e6, color=str(0.3 + 0.35 * k / max(1, len(flows) - 1)),
                    ls=FLOW_STYLES[k % len(FLOW_STYLES)], lw=1.0, label=f"flow {flow}: {name}",
                )  # fmt: skip
            ax_rate.plot(t, s["target_rate_bps"] / 1e6, color=color, lw=1.4, label="target")
            # Black, unless the scheme's own colour is a dark grey or black (`combined`,
            # `fdcc`): its target could not be told from the delivered line then.
            _, light, sat = colorsys.rgb_to_hls(*matplotlib.colors.to_rgb(color))
            dark = light < 0.3 or (light < 0.5 and sat < 0.25)
            ax_rate.plot(
                t, s["delivered_rate_bps"] / 1e6, color="#e6550d" if dark else "k", lw=0.8,
                alpha=0.7, label="delivered",
            )  # fmt: skip
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
            skipped = run.skips if run.skips is not None else pd.DataFrame()
            # Ticks on the time axis (axes coordinates), not points at a latency of 0: the
            # frames never displayed, and the slots never encoded (skipped by the encoder
            # controller, paused), each at its capture, in colours far from the scheme's.
            for rows, y, options, what in ((lost, 0.02, ("tab:red", "k"), "not displayed"),
                                           (skipped, 0.06, ("0.55", "tab:blue"), "skipped")):
                tick = max(options, key=lambda o: np.linalg.norm(
                    np.subtract(matplotlib.colors.to_rgb(o), matplotlib.colors.to_rgb(color))))
                if len(rows):
                    ax_lat.scatter(
                        rows["capture_us"] / 1e6, np.full(len(rows), y), s=30, marker="|",
                        color=tick, label=f"{what} ({len(rows)}, at their capture)",
                        transform=ax_lat.get_xaxis_transform(), clip_on=False,
                    )  # fmt: skip
            if len(lost) or len(skipped):
                ax_lat.legend(loc="best", fontsize=7)
        ax_rate.set_title(label, fontsize=11, fontweight="bold", **_outlined(color))
        ax_lat.set_xlabel("time (s)")
        for ax in axes[:, col]:
            ax.grid(True, alpha=0.3)
        # Each run's own flows, or its delivered line in orange: its own legend says so.
        if col == 0 or flows or dark:
            ax_rate.legend(loc="upper right", fontsize=7)
    labels = ["rate (Mbit/s)", "bottleneck queue delay (ms)", "pacer delay (ms)",
              "frame latency (ms)"]  # fmt: skip
    for row, text in enumerate(labels):
        own = _share_row(axes[row], bottom_zero=row > 0)
        axes[row, 0].set_ylabel(text + ("\n(each run its own scale)" if own else ""))
    fig.suptitle(_title(runs, "Time series", width=int(width_in * 12)), fontsize=10)
    return save(fig, out)


#: Line styles of competing flows in a time series.
FLOW_STYLES = ("--", ":", "-.", (0, (6, 2, 1, 2, 1, 2)))

#: A row of time-series panels shares its scale unless one run's range is more than this
#: many times another's (one run's seconds of delay would flatten the others' to a line).
SHARED_RANGE_RATIO = 10.0


def _share_row(axes: Sequence[plt.Axes], bottom_zero: bool) -> bool:
    """Gives a row of panels one scale when their ranges are alike; True if each keeps its
    own (their ranges differ by more than :data:`SHARED_RANGE_RATIO`)."""
    if bottom_zero:
        for ax in axes:
            ax.set_ylim(bottom=0)
    # The data's own tops (a run whose values are all 0 draws a flat line at any scale).
    tops = [ax.dataLim.y1 for ax in axes if ax.has_data() and ax.dataLim.y1 > 0]
    if len(tops) >= 2 and max(tops) / min(tops) > SHARED_RANGE_RATIO:
        return True
    lims = [ax.get_ylim() for ax in axes if ax.has_data()]
    if len(lims) < 2:
        return False
    low, high = min(lo for lo, _ in lims), max(hi for _, hi in lims)
    for ax in axes:
        ax.set_ylim(low, high)
    return False


#: Runs side by side in one time-series figure at most (a column each: 17 made it 9000 px wide).
MAX_TIMESERIES_RUNS = 12


def plot_runs(
    runs: Sequence[Run], out_dir: str | os.PathLike[str], logx: bool = False
) -> list[Path]:
    """Writes ``latency_cdf.png`` (every run) and ``timeseries.png`` (the first
    :data:`MAX_TIMESERIES_RUNS`, said on stderr when there are more) into ``out_dir``."""
    d = Path(out_dir)
    for name in ("latency_cdf.png", "timeseries.png"):
        output_file(d / name, "plot file")
    d.mkdir(parents=True, exist_ok=True)
    shown = list(runs[:MAX_TIMESERIES_RUNS])
    if len(runs) > len(shown):
        print(f"note: the time series show the first {len(shown)} of {len(runs)} runs (the "
              "latency CDF has them all); plot fewer directories for the others",
              file=sys.stderr)  # fmt: skip
    with family_palette([r.scheme for r in runs]):
        return [
            plot_latency_cdf(runs, d / "latency_cdf.png", logx=logx),
            plot_timeseries(shown, d / "timeseries.png"),
        ]


def _net_words(cfg: dict[str, Any]) -> dict[str, str]:
    """Setting -> how the title says it, of one run's downlink."""
    out = {}
    if cfg.get("delay_ms") is not None:
        out["delay"] = f"{cfg['delay_ms']:g} ms one-way"
    out["queue"] = f"queue {queue_words(cfg)}"
    if cfg.get("loss"):
        out["loss"] = f"loss {cfg['loss']:g}"
    return out


def _title(runs: Sequence[Run], what: str, width: int = 100) -> str:
    """``what``, the traces, and the network settings the runs share (a setting in which
    they differ is said to differ, not given as the first run's), wrapped to fit a figure."""
    import textwrap

    traces = sorted({r.trace_name for r in runs})
    if not runs:
        return what
    per_run = [{**_net_words(r.config.get("downlink", {})),
                **({"competing": "competing " + ", ".join(map(flow_words, c))}
                   if (c := r.config.get("competing")) else {})}
               for r in runs]  # fmt: skip
    net = []
    for key in dict.fromkeys(k for words in per_run for k in words):
        said = {words.get(key, "") for words in per_run}
        net.append(next(iter(said)) if len(said) == 1 else f"{key} differs")
    # Which seed each curve is (compare --seeds draws its first seed's runs only).
    seeds = sorted({int(r.seed) for r in runs if r.seed is not None})
    if seeds:
        net.append(("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds)))
    text = f"{what}: {', '.join(traces)}" + (f" ({', '.join(net)})" if net else "")
    return "\n".join(textwrap.wrap(text, width))


def save(fig: plt.Figure, out: str | os.PathLike[str]) -> Path:
    """Writes ``fig`` as a PNG to ``out`` (parents created) and closes it."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# --- results tables (sluice.experiments) ---------------------------------------------------
#
# These take a results table (one row per run: scheme, network, latency_ms_p95, vmaf_mean,
# loss_rate, stall_rate, run_dir, ...; :func:`sluice.experiments.read_table`).


def ordered(values: Sequence) -> list:
    """The distinct values, in order of first appearance, without None."""
    return list(dict.fromkeys(v for v in values if v is not None))


def _subset(df, schemes: Sequence[str] | None):
    if schemes is None:
        return df, ordered(df["scheme"])
    present = set(df["scheme"])
    return df[df["scheme"].isin(schemes)], [s for s in schemes if s in present]


def no_data(ax, text: str) -> None:
    """A grey note in the middle of an empty panel."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=9,
            color="0.4", wrap=True)  # fmt: skip


def plot_tradeoff(
    df,
    out: str | os.PathLike[str],
    *,
    schemes: Sequence[str] | None = None,
    by: str | None = "network",
    x: str = "latency_all_ms_p95",
    y: str = "vmaf_mean",
    title: str = "All-slot P95 latency vs mean VMAF",
) -> Path:
    """ACE Fig. 12: one panel per ``by`` value (network type; ``None``: one panel). Every run
    is a faint point, each scheme's mean over its runs a bold marker with its name. Without
    quality scores (model encoder) the y axis lists the schemes instead."""
    df, names = _subset(df, schemes)
    groups = ordered(df[by]) if by and len(df) else [None]
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
            no_data(ax, "no runs")
        ax.set_xlabel("P95 frame latency (ms)" if x == "latency_ms_p95" else metric(x).header)
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
    return save(fig, out)


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
        cdf_line(ax, lat, scheme_color(s), s)
    if not lats:
        no_data(ax, "no runs")
    cdf_axes(ax, logx, title)
    return save(fig, out)


def plot_bars(
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
    """One bar chart per metric (a rate, shown in %), a bar per scheme: its mean over the
    runs, with a dot per run (ACE Fig. 14b,c)."""
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
            no_data(ax, "no runs")
    fig.suptitle(title, fontsize=10)
    return save(fig, out)


def plot_param_sweep(
    df,
    out: str | os.PathLike[str],
    *,
    param: str,
    param_label: str | None = None,
    metrics: Sequence[tuple[str, str, float]] = (
        ("latency_ms_p95", "P95 latency (ms)", 1.0),
        ("vmaf_mean", "mean VMAF", 1.0),
        ("loss_rate", "loss rate (%)", 100.0),
    ),
    reference=None,
    by: str | None = "network",
    title: str | None = None,
) -> Path:
    """Each metric against ``param`` (a column of ``df``, e.g. a swept config path; rows
    without it are ignored): the mean over all runs (bold, +-1 standard deviation) and the
    mean per ``by`` group (thin). ``reference``: rows of other schemes, drawn as dashed
    horizontal lines at their mean (e.g. webrtc-x264). ACE Fig. 16 is T against P95, VMAF
    and loss."""
    sweep = df[df[param].notna()] if param in df else df.iloc[0:0]
    values = sorted(set(sweep[param].astype(float)))
    n = len(metrics)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.8), squeeze=False, layout="constrained")
    groups = ordered(sweep[by]) if by and by in sweep and len(sweep) else []
    group_colors = plt.get_cmap("tab10").colors
    for ax, (col, label, scale) in zip(axes[0], metrics):
        has = sweep[col].notna().any() if len(sweep) else False
        if not has:
            no_data(ax, f"no {col}")
        else:
            stats = sweep.groupby(param)[col].agg(["mean", "std"]).reindex(values) * scale
            # A latency or a loss is never below 0: the bar below the mean stops there.
            std = stats["std"].fillna(0).to_numpy()
            below = np.minimum(std, np.maximum(stats["mean"].to_numpy(), 0))
            ax.errorbar(values, stats["mean"], yerr=[below, std], color="k", lw=2,
                        marker="o", capsize=3, label="all runs")  # fmt: skip
            for gi, g in enumerate(groups):
                m = sweep[sweep[by] == g].groupby(param)[col].mean().reindex(values) * scale
                ax.plot(values, m, marker=".", lw=1, alpha=0.8, label=str(g),
                        color=group_colors[gi % len(group_colors)])  # fmt: skip
        if reference is not None and len(reference) and col in reference:
            for s in ordered(reference["scheme"]):
                v = reference.loc[reference["scheme"] == s, col].mean() * scale
                if np.isfinite(v):
                    ax.axhline(v, ls="--", lw=1, color=scheme_color(s), label=f"{s} (mean)")
        ax.set_xlabel(param_label or param)
        ax.set_ylabel(label)
        if values:
            ax.set_xticks(values, [f"{v:g}" for v in values])
        ax.grid(True, alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(title or f"Sensitivity to {param}", fontsize=10)
    return save(fig, out)
