"""Summary tables: plain text for the terminal, Markdown and CSV for compare directories.

Columns are metrics by name (:mod:`sluice.metrics`): the table headers and number formats
come from :data:`sluice.metrics.METRICS`, the values from the flattened summary. Latency over
every capture slot leads (``all-slot``), then the displayed frames' own (``shown``).

A row is a scheme and its runs (one per seed, or per trace and seed in a matrix): a value is
their mean, with ``± h`` the half-width of its 95 % interval when there are several
(:mod:`sluice.spread`). Per column with a better direction, the best mean is marked ``*``
(bold in Markdown), as is every mean that prints as it (a tie), and every other mean inside
the interval of the best (not distinguishable from it at this many runs) ``~``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from .metrics import metric, summary_row
from .spread import Spread, spread

#: The metrics of the terminal / Markdown tables.
TABLE_METRICS = (
    "latency_all_ms_p95", "latency_all_ms_p99", "latency_ms_p50", "latency_ms_p95",
    "stall_ratio_200ms", "freeze_count", "fps", "loss_rate", "video_bitrate_bps", "utilization",
)  # fmt: skip
#: Added when some run was scored (runs on real video with --quality).
QUALITY_METRICS = ("vmaf_mean", "vmaf_p5", "ssim_mean")
#: Added when some run had competing flows (--competing): Jain's index and the session's
#: own share of the bottleneck.
SHARING_METRICS = ("jain_index", "flows_0_share")

#: (name, summary) of one run, or (name, [summaries]) of several (seeds).
Named = Sequence[tuple[str, Any]]


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and v == v and abs(v) != float("inf")


def _runs(s: Any) -> list[dict[str, Any]]:
    if s is None:
        return []
    return [x for x in s if x is not None] if isinstance(s, list) else [s]


def spreads(named: Named, names: Sequence[str]) -> list[tuple[str, int, dict[str, Spread]]]:
    """Per row: its name, how many runs, and the spread of each metric over them."""
    out = []
    for name, s in named:
        rows = [summary_row(x) for x in _runs(s)]
        out.append((name, len(rows), {m: spread(r.get(m) for r in rows) for m in names}))
    return out


def _marks(table: list[tuple[str, int, dict[str, Spread]]], m: str) -> dict[str, str]:
    return best_marks([(n, sp[m]) for n, _, sp in table], m)


def best_marks(spreads: Sequence[tuple[str, Spread]], m: str) -> dict[str, str]:
    """``*`` for the best mean of metric ``m`` among ``spreads`` (name, spread) and every
    mean that prints as it (a tie shares the mark), ``~`` for means inside its interval
    (nothing when every mean prints the same, or the metric has no better direction)."""
    met = metric(m)
    vals = [(n, sp) for n, sp in spreads if sp.n > 0]
    if met.better is None or len(vals) < 2 or len({met.format(v.mean) for _, v in vals}) < 2:
        return {}
    best_name, best = (min if met.better == "low" else max)(vals, key=lambda x: x[1].mean)
    out = {best_name: "*"}
    for n, sp in vals:
        if n != best_name and met.format(sp.mean) == met.format(best.mean):
            out[n] = "*"
        elif n != best_name and sp.overlaps(best):
            out[n] = "~"
    return out


def queue_words(link: dict[str, Any]) -> str:
    """A path's queue as the compare page and plot titles say it: its limit and, when not
    drop-tail, its discipline (``60000 B (fq-codel)``, ``unlimited``)."""
    if link.get("queue_bytes"):
        size = f"{link['queue_bytes']} B"
    elif link.get("queue_packets"):
        size = f"{link['queue_packets']} packets"
    else:
        size = "unlimited"
    kind = link.get("queue_discipline") or "droptail"
    return size if kind == "droptail" else f"{size} ({kind})"


def network_words(cfg: dict[str, Any]) -> str:
    """The network of a run config in a line: the downlink's delays, queue and loss, the
    path faults and the competing flows."""
    down = cfg["downlink"]
    access = down.get("access_delay_ms")
    faults = fault_words(cfg.get("faults"))
    return (f"one-way delay {down['delay_ms']:g} ms, "
            + (f"sender-bottleneck {access:g} ms, " if access else "")
            + f"queue {queue_words(down)}, loss {down['loss']:g}"
            + (f"; path faults: {faults}" if faults else "")
            + (f"; competing flows: {', '.join(map(flow_words, cfg['competing']))}"
               if cfg.get("competing") else ""))  # fmt: skip


def fault_words(faults: Any) -> str:
    """The path faults a config sets (``faults``: duplicate, reorder, feedback blackout), in
    words; empty when none is on."""
    if not isinstance(faults, dict):
        return ""
    def num(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    out = []
    if num(faults.get("duplicate")) and faults["duplicate"]:
        out.append(f"duplicate {faults['duplicate']:g}")
    if num(faults.get("reorder")) and faults["reorder"]:
        delay = faults.get("reorder_delay_ms")  # a resolved config always has it
        out.append(f"reorder {faults['reorder']:g}"
                   + (f" by {delay:g} ms" if num(delay) else ""))  # fmt: skip
    blackout = faults.get("feedback_blackout_s")
    if isinstance(blackout, (list, tuple)) and len(blackout) == 2 and all(map(num, blackout)):
        out.append(f"feedback blackout {blackout[0]:g}-{blackout[1]:g} s")
    return ", ".join(out)


def flow_words(flow: Any) -> str:
    """A competing flow of a config as it was given: its spec, with an object's other
    settings after it (``media:self (access_delay_ms 40)``)."""
    if not isinstance(flow, dict):
        return str(flow)
    extra = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                      for k, v in flow.items() if k != "spec")  # fmt: skip
    return f"{flow.get('spec')} ({extra})" if extra else str(flow.get("spec"))


def metric_names(flat: Sequence[Mapping[str, Any]]) -> list[str]:
    """The columns of a table of the runs ``flat`` (summary rows): the table metrics, the
    quality metrics when some run was scored, the sharing metrics when some run had
    competing flows."""
    names = list(TABLE_METRICS)
    if any(_finite(r.get("vmaf_mean")) for r in flat):
        names += QUALITY_METRICS
    if any(_finite(r.get("flows_0_share")) for r in flat):
        names += SHARING_METRICS
    return names


def named_metrics(named: Named) -> list[str]:
    """:func:`metric_names` of every run of ``named``."""
    return metric_names([summary_row(x) for _, s in named for x in _runs(s)])


def rows(named: Named, markdown_marks: bool = False) -> tuple[list[str], list[list[str]]]:
    names = named_metrics(named)
    table = spreads(named, names)
    several = any(n > 1 for _, n, _ in table)
    marks = {m: _marks(table, m) for m in names}
    cols = [metric(n) for n in names]
    head = ["scheme", *(["runs"] if several else []), *(c.header for c in cols)]
    body = []
    for name, n, sp in table:
        cells = []
        for c in cols:
            v = sp[c.name]
            text = c.format(v.mean if v.n else None)
            if v.n > 1 and v.half == v.half:  # not NaN
                text += " ± " + c.format(v.half)
            mark = marks[c.name].get(name, "")
            if markdown_marks and mark == "*":
                text = f"**{text}**"
            elif mark:
                text += " " + mark
            cells.append(text)
        body.append([name, *([str(n)] if several else []), *cells])
    return head, body


def text_table(named: Named) -> str:
    head, body = rows(named)
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

    def line(r: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))
        ).rstrip()

    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, body)])


def run_table(name: str, summary: dict[str, Any]) -> str:
    """One run's table, and a line under it if the run was interrupted."""
    table = text_table([(name, summary)])
    if SHARING_METRICS[0] in named_metrics([(name, summary)]):
        table += "\n" + SHARING_LEGEND
    if summary.get("interrupted"):
        table += ("\n(interrupted: stopped early; its rates count the planned duration, the "
                  "slots never captured as stalls)")
    return table


def markdown(head: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """A Markdown table: the first column left-aligned, the others right-aligned."""
    rule = "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"
    return "\n".join(["| " + " | ".join(head) + " |", rule,
                      *("| " + " | ".join(r) + " |" for r in body)])  # fmt: skip


def markdown_table(named: Named) -> str:
    return markdown(*rows(named, markdown_marks=True))


#: The columns of :func:`flow_rows` after the scheme and the flow's own.
FLOW_HEAD = ("flow", "kind", "scheme / CC", "active s", "mean Mbps", "share", "queue P95 ms",
             "loss")  # fmt: skip


def _mean_of(runs: Sequence[dict[str, Any]], key: str, scale: float = 1.0) -> float | None:
    vals = [float(r[key]) * scale for r in runs if _finite(r.get(key))]
    return sum(vals) / len(vals) if vals else None


def flow_rows(named: Named) -> tuple[list[str], list[list[str]]] | None:
    """What each flow at the bottleneck got, one row per scheme and flow (the summary's
    ``flows``: the session's flow 0, then the competing flows as given), the means over a
    scheme's runs; None when no run had a competing flow."""
    body = []
    for name, s in named:
        runs = _runs(s)
        by_id: dict[int, list[dict[str, Any]]] = {}
        for r in runs:
            for f in r.get("flows") or []:
                by_id.setdefault(int(f["flow"]), []).append(f)
        if len(by_id) < 2:
            continue
        for fid, fs in sorted(by_id.items()):
            f = fs[0]
            stop = f.get("stop_s")
            active = f"{float(f.get('start_s') or 0):g}-{'end' if stop is None else f'{stop:g}'}"
            rate, share = _mean_of(fs, "mean_rate_bps", 1e-6), _mean_of(fs, "share", 100)
            queue, loss = _mean_of(fs, "queue_delay_ms_p95"), _mean_of(fs, "loss_rate", 100)
            body.append([name, str(fid) + (" (session)" if fid == 0 else ""),
                         str(f.get("kind", "")), str(f.get("scheme", "")), active,
                         "-" if rate is None else f"{rate:.2f}",
                         "-" if share is None else f"{share:.1f}%",
                         "-" if queue is None else f"{queue:.0f}",
                         "-" if loss is None else f"{loss:.2f}%"])  # fmt: skip
    return (["scheme", *FLOW_HEAD], body) if body else None


#: The stages of a displayed frame's latency, from its frame record: (column head, from, to).
STAGES = (
    ("encode", "capture_us", "encode_end_us"),
    ("pacer", "encode_end_us", "last_packet_sent_us"),
    ("network", "last_packet_sent_us", "completed_us"),
    ("to display", "completed_us", "displayed_us"),
)


def stage_rows(runs: Mapping[str, Sequence[Any]]) -> tuple[list[str], list[list[str]]] | None:
    """Where the displayed frames' latency goes, one row per scheme (``runs``: its loaded
    runs, :class:`~sluice.results.Run`): per stage (:data:`STAGES`) the P95 over a run's
    displayed frames in ms, the mean over the runs ± its 95 % interval. None without frames."""
    import numpy as np
    import pandas as pd

    body = []
    for name, rs in runs.items():
        per_stage: list[list[float]] = [[] for _ in STAGES]
        for r in rs:
            f = r.frames
            if f is None or f.empty or "displayed_us" not in f:
                continue
            shown = f[pd.to_numeric(f["displayed_us"], errors="coerce").notna()]
            for k, (_, a, b) in enumerate(STAGES):
                if a not in shown or b not in shown:
                    continue
                d = (pd.to_numeric(shown[b], errors="coerce")
                     - pd.to_numeric(shown[a], errors="coerce")).dropna()  # fmt: skip
                if len(d):
                    per_stage[k].append(float(np.percentile(d / 1e3, 95)))
        if any(per_stage):
            body.append([name, *(spread(v).format(".1f") for v in per_stage)])
    head = ["scheme", *(f"{label} P95 ms" for label, _, _ in STAGES)]
    return (head, body) if body else None


#: Under the stages table.
STAGE_LEGEND = (
    "Each stage of a displayed frame's latency, from its frame record: encode (capture to "
    "the end of its encode), pacer (to its last packet's send), network (to the frame's "
    "completion at the receiver: the path's delay, the bottleneck's queue and the lost "
    "packets' retransmissions), to display (waiting for a reference or an earlier frame). "
    "P95 over a run's displayed frames, the mean over the runs ± its 95 % interval; the "
    "stages' P95s do not add up to the latency's, whose tail frames are not each stage's."
)


#: Under the flows table.
FLOW_LEGEND = (
    "Each flow at the bottleneck (`flows` in summary.json, `flows_<flow>_*` in summary.csv): "
    "its mean rate while active, its share of the bytes its bottleneck delivered, the P95 of "
    "its packets' queueing delay there and its loss there; means over a scheme's runs. A "
    "reverse flow's numbers are the uplink's; with a second bottleneck, a flow's are those of "
    "the last one it crosses."
)


#: What the marks in a table mean (printed under it).
LEGEND = (
    "all-slot: latency over every capture slot (a slot not shown counts until the next frame "
    "shown); shown: the displayed frames only. Means over the runs, ± the half-width of the "
    "95 % interval; * the best (a tie shares it), ~ not distinguishable from it."
)


#: Added to the legend when a table has the sharing metrics.
SHARING_LEGEND = (
    "Jain: Jain's index of the rates of the session's flow and the long competing flows at its "
    "bottleneck (short TCP, audio and reverse flows left out), from 10 s after the last flow "
    "started to the first stop or the end (- when that window is empty or fewer than two "
    "flows are left); own share: the session's share of the bytes the bottleneck delivered."
)


def legend_of(metrics: Sequence[str], bold: bool = False) -> str:
    """What a table with columns ``metrics`` and its marks mean (``bold``: a Markdown or
    HTML table, whose best values are bold rather than marked ``*``)."""
    text = LEGEND.replace("* the best", "bold: the best") if bold else LEGEND
    return text + (" " + SHARING_LEGEND if SHARING_METRICS[0] in metrics else "")


def legend(named: Named, bold: bool = False) -> str:
    """What the table of ``named`` (see :func:`rows`) and its marks mean."""
    return legend_of(named_metrics(named), bold)


def _identical(named: Named) -> list[str]:
    """The rows whose several runs (seeds) gave identical summaries."""
    def key(r: dict[str, Any]) -> str:  # NaN equals NaN here, as it does not in ==
        return json.dumps(r, sort_keys=True, default=str)

    return [n for n, s in named if len(runs := _runs(s)) > 1
            and len({key(r) for r in runs}) == 1]  # fmt: skip


def identical_seeds_note(named: Named) -> str:
    """A sentence naming the schemes whose several runs (seeds) gave identical summaries: their
    "± 0" is not a spread over independent samples, nothing in the settings drew on the seed
    (empty when there are none)."""
    same = _identical(named)
    if not same:
        return ""
    return (f"every seed of {', '.join(same)} gave the same run: nothing in these settings "
            "draws on the seed (no random loss or trace, x264 with modelled encode times, ...), "
            "so its interval says nothing about the spread")  # fmt: skip


def two_runs_note(named: Named) -> str:
    """A sentence naming the rows of exactly two runs, whose 95 % interval (t = 12.7) is
    too wide to read and may run past a metric's limits (empty when there are none)."""
    same = set(_identical(named))
    two = [n for n, s in named if len(_runs(s)) == 2 and n not in same]
    if not two:
        return ""
    return (f"{', '.join(two)} {'has two runs' if len(two) == 1 else 'have two runs each'}: "
            "a 95 % interval from two runs is 12.7 times half their difference and can run "
            "past a metric's limits (a share below 0 %); three or more seeds give one worth "
            "reading")


def seed_notes(named: Named) -> list[str]:
    """The notes a table of several runs per row needs under it."""
    return [x for x in (identical_seeds_note(named), two_runs_note(named)) if x]


def csv_text(named: Named, labels: Sequence[dict[str, Any]] | None = None) -> str:
    """One row per run: ``scheme``, the run's ``labels`` if given (one dict per run in the
    order of ``named``'s runs: its seed and directory), and every summary metric
    (:func:`~sluice.metrics.summary_row`)."""
    flat = [(name, summary_row(x)) for name, s in named for x in _runs(s)]
    if labels is not None and len(labels) != len(flat):
        raise ValueError(f"{len(labels)} labels for {len(flat)} runs")
    labels = labels or [{} for _ in flat]
    heads = list(dict.fromkeys(k for lab in labels for k in lab))
    cols = list(dict.fromkeys(k for _, r in flat for k in r))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["scheme", *heads, *cols])
    for (name, r), lab in zip(flat, labels):
        w.writerow([name, *(lab.get(h, "") for h in heads),
                    *("" if r.get(c) is None else r[c] for c in cols)])  # fmt: skip
    return buf.getvalue()
