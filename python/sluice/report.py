"""Summary tables: plain text for the terminal, Markdown and CSV for compare directories."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Sequence
from typing import Any

# (column header, summary path, formatter)
Column = tuple[str, tuple[str, ...], Callable[[float], str]]


def _ms(v: float) -> str:
    return f"{v:.1f}"


def _pct(v: float) -> str:
    return f"{100 * v:.2f}%"


def _mbps(v: float) -> str:
    return f"{v / 1e6:.2f}"


def _ratio(v: float) -> str:
    return f"{v:.2f}"


COLUMNS: list[Column] = [
    ("lat mean ms", ("latency_ms", "mean"), _ms),
    ("lat p50 ms", ("latency_ms", "p50"), _ms),
    ("lat p95 ms", ("latency_ms", "p95"), _ms),
    ("lat p99 ms", ("latency_ms", "p99"), _ms),
    ("stall rate", ("stall_rate",), _pct),
    ("fps", ("fps",), lambda v: f"{v:.1f}"),
    ("loss", ("loss_rate",), _pct),
    ("bitrate Mbps", ("video_bitrate_bps",), _mbps),
    ("utilisation", ("utilization",), _pct),
    ("bwe ratio", ("bwe_ratio",), _ratio),
]

# Shown only when some run was scored (runs on real video with --quality).
QUALITY_COLUMNS: list[Column] = [
    ("VMAF", ("vmaf_mean",), lambda v: f"{v:.2f}"),
    ("VMAF p5", ("vmaf_p5",), lambda v: f"{v:.2f}"),
    ("SSIM", ("ssim_mean",), lambda v: f"{v:.4f}"),
    ("PSNR dB", ("psnr_mean",), lambda v: f"{v:.2f}"),
]

# Flat CSV columns: name -> summary path.
CSV_FIELDS: list[tuple[str, tuple[str, ...]]] = [
    ("latency_ms_mean", ("latency_ms", "mean")),
    ("latency_ms_p50", ("latency_ms", "p50")),
    ("latency_ms_p95", ("latency_ms", "p95")),
    ("latency_ms_p99", ("latency_ms", "p99")),
    ("latency_ms_p999", ("latency_ms", "p999")),
    ("latency_ms_max", ("latency_ms", "max")),
    ("stall_rate", ("stall_rate",)),
    ("stall_count_200ms", ("stall_count_200ms",)),
    ("fps", ("fps",)),
    ("loss_rate", ("loss_rate",)),
    ("video_bitrate_bps", ("video_bitrate_bps",)),
    ("utilization", ("utilization",)),
    ("bwe_ratio", ("bwe_ratio",)),
    ("frames_sent", ("frames_sent",)),
    ("frames_displayed", ("frames_displayed",)),
    ("vmaf_mean", ("vmaf_mean",)),
    ("vmaf_p5", ("vmaf_p5",)),
    ("vmaf_delivered_mean", ("vmaf_delivered_mean",)),
    ("ssim_mean", ("ssim_mean",)),
    ("psnr_mean", ("psnr_mean",)),
]


def _get(summary: dict[str, Any] | None, path: tuple[str, ...]) -> Any:
    v: Any = summary
    for k in path:
        if not isinstance(v, dict):
            return None
        v = v.get(k)
    return v


def _fmt(v: Any, f: Callable[[float], str]) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    try:
        return f(float(v))
    except (TypeError, ValueError):
        return str(v)


def rows(named: Sequence[tuple[str, dict[str, Any] | None]]) -> tuple[list[str], list[list[str]]]:
    columns = list(COLUMNS)
    if any(_get(s, ("vmaf_mean",)) is not None for _, s in named):
        columns += QUALITY_COLUMNS
    head = ["scheme", *(c[0] for c in columns)]
    body = [[name, *(_fmt(_get(s, c[1]), c[2]) for c in columns)] for name, s in named]
    return head, body


def text_table(named: Sequence[tuple[str, dict[str, Any] | None]]) -> str:
    head, body = rows(named)
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

    def line(r: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))
        ).rstrip()

    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, body)])


def markdown_table(named: Sequence[tuple[str, dict[str, Any] | None]]) -> str:
    head, body = rows(named)
    rule = "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"
    out = ["| " + " | ".join(head) + " |", rule]
    out += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(out)


def csv_text(named: Sequence[tuple[str, dict[str, Any] | None]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["scheme", *(f for f, _ in CSV_FIELDS)])
    for name, s in named:
        w.writerow([name, *("" if (v := _get(s, p)) is None else v for _, p in CSV_FIELDS)])
    return buf.getvalue()
