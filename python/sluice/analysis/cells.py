"""Per-cell comparisons for the system reports, so that no headline rests on one cell.

A *cell* is one (trace, clip, seed) of a matrix: the same input for every scheme. A
comparison of scheme ``a`` against a baseline ``b`` on a metric pairs their values cell by
cell (a cell either has not run is left out) and reports

- the ratio of the means (or, for scores such as VMAF, the difference of the means), which
  the papers' headlines use;
- the distribution of the per-cell ratios (differences): their median and interquartile
  range;
- in how many cells ``a`` is lower, higher, or within the tie tolerance (1 % of the
  baseline's value for ratios, 0.1 for differences) of the baseline.

The tables here lead with latency over every capture slot (``latency_all_ms``, Salsify's
rule: a slot whose frame is not shown counts until the next shown frame, so skipping
frames cannot hide a tail), then the displayed frames' own latency (``latency_ms``), and put
WebRTC's freeze counts (``freeze_count``, ``total_freezes_duration_s``) next to the stall
ratio. A mean over runs carries ``± h``, the half-width of its 95 % interval
(:mod:`sluice.spread`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..spread import spread
from . import fmt, markdown, pct

#: The columns that identify a cell (those a results table has).
KEY = ("trace", "clip", "seed")
#: Relative tolerance of a tie for ratios, absolute for differences.
RATIO_TIE = 0.01
DIFF_TIE = 0.1


def cell_key(df: Any) -> list[str]:
    return [c for c in KEY if c in df]


def _cells(df: Any, scheme: str, col: str) -> Any:
    """``col`` of ``scheme``'s rows indexed by cell (NaN-free keys; duplicates averaged)."""
    key = cell_key(df)
    sub = df[df["scheme"] == scheme]
    if sub.empty or col not in sub:
        return None
    idx = sub[key].astype(str).fillna("").agg("|".join, axis=1)
    vals = sub[col].astype(float).groupby(idx.to_numpy()).mean()
    return vals[np.isfinite(vals.to_numpy())]


@dataclass(frozen=True)
class Paired:
    """``scheme`` against ``baseline`` on ``col`` over the ``n`` cells both have."""

    col: str
    scheme: str
    baseline: str
    kind: str  # "ratio" or "diff"
    n: int
    mean: float  # the scheme's mean over the shared cells
    base_mean: float
    median: float  # of the per-cell ratios (or differences)
    q1: float
    q3: float
    lo: float  # the smallest and largest per-cell ratio (difference)
    hi: float
    lower: int  # cells where the scheme is below the baseline by more than the tolerance
    higher: int
    same: int

    @property
    def of_means(self) -> float:
        """Ratio (or difference) of the means."""
        if self.kind == "diff":
            return self.mean - self.base_mean
        return self.mean / self.base_mean if self.base_mean else math.nan


def paired(df: Any, scheme: str, baseline: str, col: str, kind: str = "ratio") -> Paired:
    """The per-cell comparison of ``scheme`` against ``baseline`` on ``col`` in ``df``."""
    a, b = _cells(df, scheme, col), _cells(df, baseline, col)
    if a is None or b is None:
        both: list[str] = []
    else:
        both = [k for k in a.index if k in b.index]
    if not both:
        nan = math.nan
        return Paired(col, scheme, baseline, kind, 0, nan, nan, nan, nan, nan, nan, nan, 0, 0, 0)
    x = a[both].to_numpy(dtype=float)
    y = b[both].to_numpy(dtype=float)
    if kind == "diff":
        r = x - y
        tie = np.abs(r) <= DIFF_TIE
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(y != 0, x / np.where(y != 0, y, 1.0), np.where(x == 0, 1.0, np.inf))
        tie = np.abs(x - y) <= RATIO_TIE * np.abs(y)
    fin = r[np.isfinite(r)]
    q = np.percentile(fin, [25, 50, 75]) if fin.size else [math.nan] * 3
    return Paired(
        col, scheme, baseline, kind, len(both), float(x.mean()), float(y.mean()),
        float(q[1]), float(q[0]), float(q[2]),
        float(fin.min()) if fin.size else math.nan, float(fin.max()) if fin.size else math.nan,
        int(((x < y) & ~tie).sum()), int(((x > y) & ~tie).sum()), int(tie.sum()),
    )  # fmt: skip


def _r(v: float, kind: str) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return f"{v:+.2f}" if kind == "diff" else f"{v:.2f}x"


def describe(p: Paired) -> str:
    """One line: ``0.62x of the means; per cell median 0.80x (IQR 0.55-0.97), lower in 14,
    higher in 4, within 1 % in 0 of 18``."""
    if p.n == 0:
        return "no shared cells"
    tie = "0.1" if p.kind == "diff" else "1 %"
    what = "difference of the means" if p.kind == "diff" else "of the means"
    return (f"{_r(p.of_means, p.kind)} {what}; per cell median {_r(p.median, p.kind)} (IQR "
            f"{_r(p.q1, p.kind)} to {_r(p.q3, p.kind)}), lower in {p.lower}, higher in "
            f"{p.higher}, within {tie} in {p.same} of {p.n}")  # fmt: skip


#: (label, column, kind) of the headline comparisons.
Versus = tuple[str, str, str]
VERSUS_LATENCY: tuple[Versus, ...] = (
    ("all-slot P95", "latency_all_ms_p95", "ratio"),
    ("all-slot P99", "latency_all_ms_p99", "ratio"),
    ("shown P95", "latency_ms_p95", "ratio"),
)
VERSUS_VMAF: Versus = ("VMAF (points)", "vmaf_mean", "diff")


def versus_table(df: Any, schemes: Sequence[str], baseline: str,
                 metrics: Sequence[Versus] = VERSUS_LATENCY) -> str:  # fmt: skip
    """Markdown: per scheme and metric, the baseline's and the scheme's mean over the
    shared cells, the ratio (difference) of the means, and the per-cell median, IQR and
    lower / higher / tied counts."""
    head = ["scheme", "metric", "cells", f"`{baseline}` mean", "scheme mean",
            "of the means", "per-cell median", "per-cell IQR", "range",
            "lower / higher / tie"]  # fmt: skip
    rows = []
    for s in schemes:
        if s == baseline or s not in set(df["scheme"]):
            continue
        for label, col, kind in metrics:
            p = paired(df, s, baseline, col, kind)
            if p.n == 0:
                continue
            f = fmt(".2f") if kind == "diff" or abs(p.base_mean) < 10 else fmt(".0f")
            rows.append([
                f"`{s}`", label, str(p.n), f(p.base_mean), f(p.mean), _r(p.of_means, kind),
                _r(p.median, kind), f"{_r(p.q1, kind)} to {_r(p.q3, kind)}",
                f"{_r(p.lo, kind)} to {_r(p.hi, kind)}", f"{p.lower} / {p.higher} / {p.same}",
            ])  # fmt: skip
    return markdown(head, rows)


VERSUS_LEGEND = (
    "Per cell (trace, clip, seed) both schemes ran: the ratio of the scheme's value to the "
    "baseline's (VMAF: the difference in points). *Of the means*: the ratio (difference) of "
    "the means over those cells, the papers' form of a headline; *per-cell median*, *IQR* "
    "and *range*: the distribution of the per-cell ratios; *lower / higher / tie*: cells "
    "where the scheme is below / above the baseline by more than 1 % (0.1 VMAF points) / "
    "within it. All-slot latency counts every capture slot (a slot not shown waits for the "
    "next shown frame); shown latency counts displayed frames only."
)


# --- means tables ---------------------------------------------------------------------------

#: (header, column, formatter).
Column = tuple[str, str, Callable[[Any], str]]


def _mbps(v: Any) -> str:
    return fmt(".2f")(None if v is None else float(v) / 1e6)


LATENCY_COLUMNS: tuple[Column, ...] = (
    ("all-slot P95 ms", "latency_all_ms_p95", fmt(".0f")),
    ("all-slot P99 ms", "latency_all_ms_p99", fmt(".0f")),
    ("shown P95 ms", "latency_ms_p95", fmt(".0f")),
    ("shown P99 ms", "latency_ms_p99", fmt(".0f")),
)
STALL_COLUMNS: tuple[Column, ...] = (
    ("slots > 200 ms %", "stall_ratio_200ms", pct),
    ("freezes", "freeze_count", fmt(".1f")),
    ("freeze s", "total_freezes_duration_s", fmt(".2f")),
)
RATE_COLUMNS: tuple[Column, ...] = (
    ("fps", "fps", fmt(".1f")),
    ("video Mbps", "video_bitrate_bps", _mbps),
)
QUALITY_COLUMNS: tuple[Column, ...] = (
    ("VMAF", "vmaf_mean", fmt(".2f")),
    ("VMAF p5", "vmaf_p5", fmt(".2f")),
)


def _with_interval(values: Any, f: Callable[[Any], str]) -> str:
    sp = spread(values)
    if sp.n == 0:
        return "-"
    text = f(sp.mean)
    if sp.n > 1 and math.isfinite(sp.half):
        text += " ± " + f(sp.half)
    return text


def means_table(df: Any, names: Sequence[str], columns: Sequence[Column],
                interval: bool = True) -> str:  # fmt: skip
    """Markdown: per scheme of ``names`` present in ``df``, its number of runs and the mean
    of each column over them, ``± h`` the half-width of the mean's 95 % interval (with
    ``interval``)."""
    rows = []
    for s in names:
        sub = df[df["scheme"] == s]
        if sub.empty:
            continue
        cells = []
        for _, c, f in columns:
            if c not in sub:
                cells.append("-")
            elif interval:
                cells.append(_with_interval(sub[c], f))
            else:
                cells.append(f(sub[c].astype(float).mean()))
        rows.append([f"`{s}`", str(len(sub)), *cells])
    return markdown(["scheme", "runs", *(h for h, _, _ in columns)], rows)


MEANS_LEGEND = (
    "Means over the runs, ± the half-width of the mean's 95 % interval over them (traces, "
    "clips and seeds together, so the interval shows how much the cells differ, not only "
    "noise). all-slot: latency over every capture slot (a slot whose frame is not shown "
    "counts until the next shown frame); shown: the displayed frames only. slots > 200 ms: "
    "the share of capture slots later than 200 ms (`stall_ratio_200ms`); freezes and freeze "
    "s: WebRTC's getStats `freezeCount` and `totalFreezesDuration` per run."
)


# --- pooled latencies -----------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _slots(run_dir: str) -> np.ndarray:
    from .. import results
    from .pooled import slot_latencies_ms

    return slot_latencies_ms(results.load_run(run_dir))


def slot_latencies(df: Any, scheme: str) -> np.ndarray:
    """Every capture slot's all-slot latency (ms) of every run of ``scheme`` in ``df``
    (cached per run directory)."""
    parts = [_slots(str(d)) for d in df.loc[df["scheme"] == scheme, "run_dir"]]
    return np.concatenate(parts) if parts else np.array([])


def pooled_row(df: Any, scheme: str) -> dict[str, float]:
    lat = slot_latencies(df, scheme)
    if not lat.size:
        return {"slots": 0, "p50": math.nan, "p95": math.nan, "p99": math.nan,
                "stalls": math.nan}  # fmt: skip
    p50, p95, p99 = np.percentile(lat, [50, 95, 99])
    return {"slots": int(lat.size), "p50": float(p50), "p95": float(p95), "p99": float(p99),
            "stalls": float(np.count_nonzero(lat > 200.0) / lat.size)}  # fmt: skip


def pooled_table(df: Any, names: Sequence[str], baseline: str | None = None) -> str:
    """Markdown: per scheme, the all-slot P50 / P95 / P99 over the slots of all its runs
    pooled, the pooled share of slots over 200 ms, and the ratios to ``baseline``'s."""
    rows = []
    base = pooled_row(df, baseline) if baseline and baseline in set(df["scheme"]) else None
    for s in names:
        if s not in set(df["scheme"]):
            continue
        p = pooled_row(df, s)
        r = [f"`{s}`", str(int((df["scheme"] == s).sum())), str(p["slots"]),
             fmt(".0f")(p["p50"]), fmt(".0f")(p["p95"]), fmt(".0f")(p["p99"]),
             pct(p["stalls"])]  # fmt: skip
        if base is not None:
            r += [_r(p["p95"] / base["p95"], "ratio") if base["p95"] else "-",
                  _r(p["p99"] / base["p99"], "ratio") if base["p99"] else "-",
                  _r(p["stalls"] / base["stalls"], "ratio") if base["stalls"] else "-"]
        rows.append(r)
    head = ["scheme", "runs", "slots", "pooled all-slot P50 ms", "P95 ms", "P99 ms",
            "slots > 200 ms %"]  # fmt: skip
    if base is not None:
        head += [f"P95 / `{baseline}`'s", "P99 / its", "slots > 200 ms / its"]
    return markdown(head, rows)


def plot_slot_cdf(df: Any, names: Sequence[str], out: str | Path, title: str) -> Path:
    """The CDF of the all-slot latency of every capture slot of every run of each scheme,
    pooled, on a log axis."""
    from ..plots import no_data, plt, save, scheme_color, tidy_log_axis

    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    drawn = False
    for s in names:
        lat = slot_latencies(df, s)
        if not lat.size:
            continue
        x = np.sort(np.maximum(lat, 1.0))
        ax.plot(x, np.arange(1, x.size + 1) / x.size, color=scheme_color(s), label=s)
        drawn = True
    if not drawn:
        no_data(ax, "no runs")
    else:
        ax.legend(fontsize=8)
    ax.set_xscale("log")
    tidy_log_axis(ax.xaxis)
    ax.set_xlabel("latency per capture slot, all slots (ms; a slot not shown waits for the "
                  "next shown frame)")  # fmt: skip
    ax.set_ylabel("CDF over slots")
    ax.grid(True, alpha=0.3, which="both")
    ax.set_title(title, fontsize=10)
    return save(fig, out)


def group_table(df: Any, names: Sequence[str], baseline: str, col: str, kind: str = "ratio",
                groups: Sequence[str] = (), group_col: str = "network") -> str:  # fmt: skip
    """Markdown: per scheme (a row) and group of ``group_col`` (a column, then all cells),
    ``of the means (median per cell; lower in k of n)`` against ``baseline`` on ``col``;
    for a difference (``kind="diff"``, a score) the count is of cells where it is higher."""
    head = ["scheme", *groups, "all"]
    rows = []
    for s in names:
        if s == baseline or s not in set(df["scheme"]):
            continue
        r = [f"`{s}`"]
        for sub in [*(df[df[group_col] == g] for g in groups), df]:
            p = paired(sub, s, baseline, col, kind)
            if p.n == 0:
                r.append("-")
                continue
            k, word = (p.higher, "higher") if kind == "diff" else (p.lower, "lower")
            r.append(f"{_r(p.of_means, kind)} (median {_r(p.median, kind)}; {word} in {k} "
                     f"of {p.n})")  # fmt: skip
        rows.append(r)
    return markdown(head, rows)
