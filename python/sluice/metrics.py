"""Metrics of a run, one name each, used by every table.

Summary metrics are the run's ``summary.json`` flattened: a nested key joins its parent with
``_`` (``latency_ms.p95`` -> ``latency_ms_p95``), every other key keeps its name
(``stall_rate``, ``vmaf_mean``). :func:`summary_row` is that rule; the results table of
``sluice matrix``, ``summary.csv`` of ``sluice compare`` and the reports all use it, so a
metric the core adds shows up everywhere without a list to update.

Frame metrics are derived from a run's frames (:func:`frame_row`): ``latency_ms_p95_steady``
(P95 without the start-up), ``c0_share`` (ACE-C's complexity levels) and ``burst_share``
(frames that left as a burst, :func:`frame_burst`), and MAE's pre-reaction lead (§6.7,
:func:`pre_reaction_leads`): ``pre_reaction_drops``, ``pre_reaction_lead_ms_median`` and
``pre_reacted_100ms_share``.

:data:`METRICS` gives the known metrics a table header and a number format.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from .results import Run


def _given(v: object) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def slot_latencies_ms(run: Run, at: str = "displayed_us") -> np.ndarray:
    """Each capture slot's latency (ms) by Salsify's rule, in slot order: until the slot's
    frame, or the next one, was shown; ``at="completed_us"``: until that shown frame had all
    its packets (the latency without the receiver's own delay). A slot never shown counts
    until the end of the run: capture and drain, or, for a live run that was stopped
    (``interrupted``), its last sample or last capture, whichever came later, as the summary's
    ``latency_all_ms`` counts."""
    cfg = run.config
    run_end_us = round((float(cfg.get("duration_s", 0.0)) + float(cfg.get("drain_s", 0.0))) * 1e6)
    capture: dict[int, int] = {}
    shown: dict[int, int] = {}
    if run.skips is not None and len(run.skips):
        for s, c in zip(run.skips["source_index"], run.skips["capture_us"]):
            capture.setdefault(int(s), int(c))
    f = run.frames
    for s, c, d, t in zip(f["source_index"], f["capture_us"], f["displayed_us"], f[at]):
        capture.setdefault(int(s), int(c))
        if _given(d) and _given(t):
            shown[int(s)] = min(shown.get(int(s), int(t)), int(t))
    if (run.summary or {}).get("interrupted"):
        samples = run.samples
        last = int(samples["t_us"].max()) if samples is not None and len(samples) else 0
        run_end_us = min(run_end_us, max(last, max(capture.values(), default=0)))
    out = []
    later = run_end_us
    for s in sorted(capture, reverse=True):
        until = shown.get(s, later)
        out.append(until - capture[s])
        if s in shown:
            later = min(later, shown[s])
    import numpy as np

    return np.asarray(out[::-1], dtype=float) / 1e3


def _ms(v: float) -> str:
    return f"{v:.1f}"


def _pct(v: float) -> str:
    return f"{100 * v:.2f}%"


def _mbps(v: float) -> str:
    return f"{v / 1e6:.2f}"


def _ratio(v: float) -> str:
    return f"{v:.2f}"


def _count(v: float) -> str:
    """A count: whole, or to one decimal when it is a mean over runs (0.5 freezes is not 0)."""
    return f"{v:.0f}" if v == round(v) else f"{v:.1f}"


@dataclass(frozen=True)
class Metric:
    """A metric's column name, short table header, number format, and which way is better
    (``"low"``, ``"high"`` or ``None``: neither, as a bitrate)."""

    name: str
    header: str
    fmt: Callable[[float], str]
    better: str | None = None

    def format(self, v: Any) -> str:
        """``v`` formatted, ``-`` for a missing value."""
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
        try:
            return self.fmt(float(v))
        except (TypeError, ValueError):
            return str(v)


_KNOWN = [
    # Latency over every capture slot first (Salsify's rule: a slot not shown counts until
    # the next frame shown), so skipping frames cannot hide a tail; then the displayed
    # frames' own.
    Metric("latency_all_ms_mean", "all-slot mean ms", _ms, "low"),
    Metric("latency_all_ms_p50", "all-slot P50 ms", _ms, "low"),
    Metric("latency_all_ms_p95", "all-slot P95 ms", _ms, "low"),
    Metric("latency_all_ms_p99", "all-slot P99 ms", _ms, "low"),
    Metric("latency_ms_mean", "shown mean ms", _ms, "low"),
    Metric("latency_ms_p50", "shown P50 ms", _ms, "low"),
    Metric("latency_ms_p95", "shown P95 ms", _ms, "low"),
    Metric("latency_ms_p99", "shown P99 ms", _ms, "low"),
    Metric("latency_ms_p999", "shown P99.9 ms", _ms, "low"),
    Metric("latency_ms_tail10_mean", "shown worst-10% mean ms", _ms, "low"),
    Metric("latency_ms_max", "shown max ms", _ms, "low"),
    Metric("latency_ms_p95_steady", "shown P95 steady ms", _ms, "low"),
    Metric("stall_rate", "stall rate", _pct, "low"),
    Metric("stall_count_200ms", "slots > 200 ms", _count, "low"),
    Metric("stall_ratio_200ms", "slots > 200 ms", _pct, "low"),
    Metric("freeze_count", "freezes", _count, "low"),
    Metric("total_freezes_duration_s", "freeze time s", lambda v: f"{v:.2f}", "low"),
    Metric("fps", "fps", lambda v: f"{v:.1f}", "high"),
    Metric("loss_rate", "loss", _pct, "low"),
    Metric("video_bitrate_bps", "bitrate Mbps", _mbps),
    Metric("utilization", "utilisation", _pct, "high"),
    Metric("jain_index", "Jain", lambda v: f"{v:.3f}", "high"),
    Metric("flows_0_share", "own share", _pct),
    Metric("bwe_ratio", "bwe ratio", _ratio),
    Metric("vmaf_mean", "VMAF", lambda v: f"{v:.2f}", "high"),
    Metric("vmaf_p5", "VMAF p5", lambda v: f"{v:.2f}", "high"),
    Metric("vmaf_delivered_mean", "VMAF delivered", lambda v: f"{v:.2f}", "high"),
    Metric("ssim_mean", "SSIM", lambda v: f"{v:.4f}", "high"),
    Metric("psnr_mean", "PSNR dB", lambda v: f"{v:.2f}", "high"),
    Metric("padding_ratio", "padding", _pct),
    Metric("ssim_db_mean", "SSIM dB", lambda v: f"{v:.2f}", "high"),
    Metric("c0_share", "c0 frames", _pct),
    Metric("burst_share", "burst frames", _pct),
    Metric("adaptation_ratio", "adapted frames", _pct),
    Metric("pre_reaction_lead_ms_median", "pre-reaction lead ms", _ms),
    Metric("pre_reacted_100ms_share", "drops pre-reacted > 100 ms", _pct),
]
#: Metric name -> :class:`Metric` (header and format) for the metrics tables show.
METRICS: dict[str, Metric] = {m.name: m for m in _KNOWN}

#: The columns :func:`frame_row` adds, in order.
FRAME_METRICS = (
    "latency_ms_p95_steady",
    "c0_share",
    "burst_share",
    "pre_reaction_drops",
    "pre_reaction_lead_ms_median",
    "pre_reacted_100ms_share",
)


def metric(name: str) -> Metric:
    """The :class:`Metric` called ``name`` (a plain one for metrics without a format)."""
    return METRICS.get(name) or Metric(name, name, lambda v: f"{v:g}")


def summary_row(summary: dict[str, Any] | None) -> dict[str, Any]:
    """A summary flattened to metric names: nested keys joined with ``_``
    (``{"latency_ms": {"p95": 1}}`` -> ``{"latency_ms_p95": 1}``), in the summary's order.
    The per-flow list of a run with competing flows becomes one column per flow and number,
    by flow id (``flows_1_share``, ``flows_1_mean_rate_bps``); its text fields (``kind``,
    ``scheme``) are left out, so every column stays numeric."""
    out: dict[str, Any] = {}

    def walk(prefix: str, v: Any) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                walk(f"{prefix}_{k}" if prefix else str(k), x)
        elif isinstance(v, list) and prefix == "flows":
            for f in v:
                if isinstance(f, dict):
                    fid = f.get("flow")
                    walk(f"flows_{fid}", {k: x for k, x in f.items()
                                          if k != "flow" and not isinstance(x, str)})
        else:
            out[prefix] = v

    walk("", summary or {})
    return out


# --- frame metrics --------------------------------------------------------------------------

#: A frame left as a burst if its packets left at least this many times faster than the
#: congestion controller's target rate: faster than any leaky-bucket pacer in the registry
#: (1.1x, 2.5x) can send. See :func:`frame_burst`.
BURST_RATE_FACTOR = 4.0

#: Frames captured before this are the start-up (GCC's initial probing and the first rate
#: cuts); ``latency_ms_p95_steady`` leaves them out.
WARMUP_S = 5.0


def frame_burst(frames: pd.DataFrame) -> pd.Series:
    """Per frame: True if it left as a burst, False if paced, NA if it was never sent.

    A frame's packets left over ``span = last - first packet send time``; they carried
    ``size x (n-1)/n`` bytes after the first one, so they left at ``rate = that / span``.
    The frame counts as a burst if ``rate >= BURST_RATE_FACTOR x target_rate_bps`` (or
    ``span == 0``; one-packet frames are bursts by this rule): no leaky-bucket pacer of the
    registry (1.1x, 2.5x the target) sends that fast, while a frame that found a full token
    bucket leaves at once. A fixed span cut-off (say 2 ms) would call a paced 3-packet frame
    at 20 Mbit/s a burst.
    """
    import pandas as pd

    if frames.empty:
        return pd.Series([], dtype="boolean")
    first = pd.to_numeric(frames["first_packet_sent_us"], errors="coerce")
    last = pd.to_numeric(frames["last_packet_sent_us"], errors="coerce")
    span_s = (last - first) / 1e6
    n = pd.to_numeric(frames["packets"], errors="coerce").clip(lower=1)
    bits = frames["size_bytes"].astype(float) * 8 * (n - 1) / n
    target = pd.to_numeric(frames["target_rate_bps"], errors="coerce")
    rate = bits / span_s.where(span_s > 0)
    burst = (span_s <= 0) | (rate >= BURST_RATE_FACTOR * target)
    return burst.astype("boolean").where(first.notna() & last.notna())


def complexity_share(frames: pd.DataFrame, level: str = "c0") -> float:
    """Share of the frames with a recorded complexity level that used ``level`` (NaN if no
    frame recorded one, e.g. schemes without ACE-C)."""
    if frames.empty or "complexity" not in frames:
        return math.nan
    levels = frames["complexity"].dropna()
    return float((levels == level).mean()) if len(levels) else math.nan


def steady_p95(frames: pd.DataFrame, warmup_s: float = WARMUP_S) -> float:
    """P95 latency (ms) of the displayed frames captured after ``warmup_s``, the summary's
    P95 without the start-up transient."""
    import numpy as np

    if frames.empty or "latency_us" not in frames:
        return math.nan
    lat = frames.loc[frames["capture_us"] >= warmup_s * 1e6, "latency_us"].dropna()
    return float(np.percentile(lat / 1e3, 95)) if len(lat) else math.nan


#: The per-frame pre-reaction level MAE's controller records (1 = the trend at r x GCC's
#: threshold), and how many frames in a row above the full threshold make a "real" drop
#: (the MAE artifact's rule for §6.7's lead time).
PRE_REACTION_LEVEL_COLUMN = "mae_pre_reaction_level"
REAL_DROP_FRAMES = 5
#: GCC's pre-reaction ratio r, a config path.
PRE_REACTION_RATIO_PATH = "cc.pre_reaction_ratio"


def pre_reaction_leads(
    frames: pd.DataFrame, ratio: float, confirm_frames: int = REAL_DROP_FRAMES
) -> list[float]:
    """MAE §6.7 (Fig. 27b): for every real drop, how long (ms) before it the pre-reaction
    fired. A real drop starts at the first of ``confirm_frames`` consecutive frames whose
    level is at least ``1 / ratio`` (the trend at GCC's full threshold; the level is 1 at
    ``ratio`` x the threshold) and ends when the level falls below that again. Its lead is the
    capture time of that first frame minus the capture time of the latest frame at or before
    it where the level crossed 1 from below: 0 when the trend went from under the
    pre-reaction threshold to over the full one between two frames. Frames without a level
    (no pre-reaction signal) break runs. An empty list when the run has no level column."""
    import numpy as np
    import pandas as pd

    if frames.empty or PRE_REACTION_LEVEL_COLUMN not in frames or not ratio > 0:
        return []
    f = frames.sort_values("capture_us")
    level = pd.to_numeric(f[PRE_REACTION_LEVEL_COLUMN], errors="coerce").to_numpy(dtype=float)
    t_ms = f["capture_us"].to_numpy(dtype=float) / 1e3
    above_full = np.nan_to_num(level, nan=-np.inf) >= 1.0 / ratio
    above_pre = np.nan_to_num(level, nan=-np.inf) > 1.0
    leads: list[float] = []
    i, n = 0, len(level)
    while i < n:
        if not above_full[i]:
            i += 1
            continue
        j = i
        while j < n and above_full[j]:
            j += 1
        if j - i >= confirm_frames:
            k = i
            while k > 0 and above_pre[k - 1]:
                k -= 1
            leads.append(float(t_ms[i] - t_ms[k]))
        i = j
    return leads


def lead_row(run: Run) -> dict[str, float]:
    """The pre-reaction lead metrics of a run (NaN without a pre-reaction level)."""
    from .config import get_path

    ratio = get_path(run.header.get("config") or {}, PRE_REACTION_RATIO_PATH, None)
    if PRE_REACTION_LEVEL_COLUMN not in run.frames or not isinstance(ratio, int | float):
        return {"pre_reaction_drops": math.nan, "pre_reaction_lead_ms_median": math.nan,
                "pre_reacted_100ms_share": math.nan}  # fmt: skip
    leads = pre_reaction_leads(run.frames, float(ratio))
    if not leads:
        return {"pre_reaction_drops": 0.0, "pre_reaction_lead_ms_median": math.nan,
                "pre_reacted_100ms_share": math.nan}  # fmt: skip
    import numpy as np

    return {
        "pre_reaction_drops": float(len(leads)),
        "pre_reaction_lead_ms_median": float(np.median(leads)),
        "pre_reacted_100ms_share": float(np.mean(np.asarray(leads) > 100.0)),
    }


def frame_row(run: Run) -> dict[str, float]:
    """The frame metrics (:data:`FRAME_METRICS`) of a loaded run."""
    burst = frame_burst(run.frames)
    return {
        "latency_ms_p95_steady": steady_p95(run.frames),
        "c0_share": complexity_share(run.frames, "c0"),
        "burst_share": float(burst.dropna().mean()) if burst.notna().any() else math.nan,
        **lead_row(run),
    }
