"""Summary tables: plain text for the terminal, Markdown and CSV for compare directories.

Columns are metrics by name (:mod:`sluice.metrics`): the table headers and number formats
come from :data:`sluice.metrics.METRICS`, the values from the flattened summary.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from .metrics import metric, summary_row

#: The metrics of the terminal / Markdown tables.
TABLE_METRICS = (
    "latency_ms_mean", "latency_ms_p50", "latency_ms_p95", "latency_ms_p99", "stall_rate",
    "fps", "loss_rate", "video_bitrate_bps", "utilization", "bwe_ratio",
)  # fmt: skip
#: Added when some run was scored (runs on real video with --quality).
QUALITY_METRICS = ("vmaf_mean", "vmaf_p5", "ssim_mean", "psnr_mean")

Named = Sequence[tuple[str, "dict[str, Any] | None"]]


def rows(named: Named) -> tuple[list[str], list[list[str]]]:
    flat = [(name, summary_row(s)) for name, s in named]
    names = list(TABLE_METRICS)
    if any(r.get("vmaf_mean") is not None for _, r in flat):
        names += QUALITY_METRICS
    cols = [metric(n) for n in names]
    head = ["scheme", *(c.header for c in cols)]
    body = [[name, *(c.format(r.get(c.name)) for c in cols)] for name, r in flat]
    return head, body


def text_table(named: Named) -> str:
    head, body = rows(named)
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

    def line(r: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))
        ).rstrip()

    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, body)])


def markdown(head: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """A Markdown table: the first column left-aligned, the others right-aligned."""
    rule = "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"
    return "\n".join(["| " + " | ".join(head) + " |", rule,
                      *("| " + " | ".join(r) + " |" for r in body)])  # fmt: skip


def markdown_table(named: Named) -> str:
    return markdown(*rows(named))


def csv_text(named: Named) -> str:
    """One row per run: ``scheme`` and every summary metric
    (:func:`~sluice.metrics.summary_row`)."""
    flat = [(name, summary_row(s)) for name, s in named]
    cols = list(dict.fromkeys(k for _, r in flat for k in r))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["scheme", *cols])
    for name, r in flat:
        w.writerow([name, *("" if r.get(c) is None else r[c] for c in cols)])
    return buf.getvalue()
