"""Sluice's ``webrtc`` against real Chromium: the fidelity table (``docs/results/chrome.md``).

``python -m sluice.analysis.chrome PLAN [--results results] [--report-dir DIR] [--report-only]``
runs every cell of ``PLAN`` (``experiments/chrome-fidelity.toml``) that has no result yet and
writes the report. A cell is a trace, a bitrate cap and a side:

* ``sim``: ``webrtc`` in the simulator, x264 on the plan's clip (modeled encode time), GCC's
  rate capped at the cap (``cc.max_rate``);
* ``live``: the same over real UDP on loopback (``sluice live run``), in real time;
* ``chrome``: Chromium sending to Chromium through the same relay (``sluice browser run``),
  VP8, at Chromium's own cap (``chromium_default``) or the cap raised to ``kbps``;
* one more simulator side per ``[[variant]]`` of the plan (``label``, ``scheme``, ``set``: a
  table of config paths), e.g. ``webrtc`` with Chromium's 40 ms pacer burst.

Plan keys: ``name``, ``description``, ``seed``, ``duration_s``, ``delay_ms`` (one way, both
directions), ``queue_bytes`` (drop-tail), ``[video]`` (``path``, ``width``, ``fps``),
``[[cap]]`` (``label``, ``kbps``, ``chromium_default``), ``[[trace]]`` (``label``, ``path``,
``duration_s``), ``[[variant]]`` (``label``, ``scheme``, ``set``: config paths), ``live``
(default true: whether to run the ``live`` side), ``chrome_repeats`` (default 1: how many times
each ``chrome`` cell runs; the second run goes to ``chrome-run2``). Paths are relative to the
plan.

A simulator run is deterministic (the same plan gives the same bytes, whatever the seed), a
browser run is not: with ``chrome_repeats`` > 1 the tables compare each side with the median of
Chromium's runs and show their lowest and highest value, and the target agreement pools
Chromium's runs and says how well its runs agree with each other.

Per run the report derives, from the records and the same rules for every side: the video
bitrate (encoded video only: Chromium's ``bytesReceived`` less its **FEC** share, the ULPFEC
packets it adds to a frame's RED stream under loss, counted at the relay; Sluice's ``webrtc``
sends no FEC) and utilisation (summary), the all-slot P95 and P99 (Salsify's rule), freezes
(WebRTC's rule), the **ramp** (seconds from the start, and from each step up of a synthetic
trace, until the 1 s mean of the delivered rate reaches 80 % of the lower of the cap and the
new rate), the **settle** (seconds after each step down until no capture slot of the phase
waits more than 200 ms any more), the **receive P95** (the all-slot P95 with each frame counted
until its last packet arrived instead of until it was shown: the sender and the network without
the receiver's jitter buffer, decoding and rendering; Sluice's receiver shows a frame when it
is complete, Chromium's `requestVideoFrameCallback` gives both times) and the **receiver P50**
(the median time from a frame's last packet to its display) and the **send span** (P50 and P95
over the frames of the time from a frame's first packet leaving the sender to its last: whether
frames leave as one burst or paced; Sluice's sides from the sender's records, Chromium's from
the times its media packets reached the relay, which adds its sending path's tens of
microseconds a packet, FEC left out; frames shown, for Chromium, frames sent for Sluice).
Per trace at each cap Chromium applies to GCC too (not ``chromium_default``, where Chromium
caps its encoder and its estimate goes higher), the **target agreement** compares GCC's target
with Chromium's ``availableOutgoingBitrate`` second by second after the first 5 s (start-up
probing): the share of seconds whose median targets are within 20 % of each other, and the
median of the per-second ratios.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import results
from ..errors import SluiceError
from . import (
    ANALYSIS_SLOT,
    add_report_dir,
    existing_analysis,
    figure,
    fmt,
    markdown,
    provenance,
    report_dir_of,
    report_main,
    report_parser,
    write_markdown,
)
from .pooled import slot_latencies_ms

PROG = "python -m sluice.analysis.chrome"
SIDES = ("sim", "live", "chrome")
#: Sides that run in the simulator: ``sim`` and the plan's variants.
SIM = "sim"
#: A difference worth explaining (the issue's threshold).
TOLERANCE = 0.20


@dataclass(frozen=True)
class Cell:
    trace_label: str
    trace: str
    duration_s: float
    cap_label: str
    cap_kbps: int
    chromium_default: bool
    side: str
    #: Which run of the side (1, 2, ...): a browser cell runs ``chrome_repeats`` times.
    rep: int = 1

    def dir(self, root: Path) -> Path:
        return root / self.trace_label / self.cap_label / side_dir(self.side, self.rep)


def side_dir(side: str, rep: int = 1) -> str:
    """The folder of a side's run: ``chrome`` for the first, ``chrome-run2`` for the second."""
    return side if rep == 1 else f"{side}-run{rep}"


def chrome_repeats(plan: dict[str, Any]) -> int:
    """How many times each browser cell runs (``chrome_repeats``, default 1)."""
    return int(plan.get("chrome_repeats", 1))


#: While a report is written, each run directory is checked and loaded once for all its tables
#: and figures (None otherwise: a run made between two reports is read afresh).
_report_cache: dict[tuple[str, Path], Any] | None = None


def _cached(kind: str, d: Path, read: Any) -> Any:
    if _report_cache is None:
        return read(d)
    key = (kind, Path(d))
    if key not in _report_cache:
        _report_cache[key] = read(d)
    return _report_cache[key]


def _complete(d: Path) -> bool:
    """:func:`results.is_complete`, once per report."""
    return _cached("complete", d, results.is_complete)


def _run(d: Path) -> results.Run:
    """:func:`results.load_run`, once per report."""
    return _cached("run", d, results.load_run)


def load_plan(path: str | os.PathLike[str]) -> dict[str, Any]:
    from ..plan import tomllib

    p = Path(path)
    if p.is_dir():
        raise SluiceError(f"{p} is a directory: give the plan file (a .toml whose results "
                          "--results holds)")  # fmt: skip
    try:
        plan = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise SluiceError(f"cannot read {p}: {e.strerror or e}") from None
    except ValueError as e:
        raise SluiceError(f"{p}: {e}") from None
    base = p.resolve().parent

    def path_of(s: str) -> str:
        return s if s.startswith("gen:") else str((base / s).resolve())

    for key in ("name", "video", "cap", "trace"):
        if key not in plan:
            raise SluiceError(f"{p}: missing {key}")
    n = plan.get("chrome_repeats", 1)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SluiceError(f"{p}: chrome_repeats is a whole number of runs, 1 or more "
                          f"(got {n!r})")  # fmt: skip
    if not isinstance(plan.get("live", True), bool):
        raise SluiceError(f"{p}: live is true or false (whether to run the live side)")
    for v in plan.setdefault("variant", []):
        if not v.get("label") or v["label"] in SIDES:
            raise SluiceError(f"{p}: each [[variant]] needs a label other than {SIDES}")
    plan["video"]["path"] = path_of(plan["video"]["path"])
    for t in plan["trace"]:
        t["path"] = path_of(t["path"])
    return plan


def sides(plan: dict[str, Any]) -> tuple[str, ...]:
    """``sim``, the plan's variants, ``live`` (unless the plan says ``live = false``),
    ``chrome``."""
    live = ("live",) if plan.get("live", True) else ()
    return (SIM, *(v["label"] for v in plan.get("variant", [])), *live, "chrome")


def sim_sides(plan: dict[str, Any]) -> tuple[str, ...]:
    return (SIM, *(v["label"] for v in plan.get("variant", [])))


def cells(plan: dict[str, Any]) -> list[Cell]:
    out = []
    for t in plan["trace"]:
        for c in plan["cap"]:
            for side in sides(plan):
                for k in range(1, (chrome_repeats(plan) if side == "chrome" else 1) + 1):
                    out.append(Cell(t["label"], t["path"], float(t.get("duration_s",
                               plan.get("duration_s", 60))), c["label"], int(c["kbps"]),
                               bool(c.get("chromium_default")), side, k))  # fmt: skip
    return out


def spec_of(plan: dict[str, Any], cell: Cell, out: Path) -> Any:
    from ..run import RunSpec

    v = plan["video"]
    overrides: list[tuple[str, Any]] = [
        ("duration_s", cell.duration_s),
        ("seed", int(plan.get("seed", 1))),
        ("fps", float(v.get("fps", 30))),
        ("downlink.delay_ms", float(plan.get("delay_ms", 20))),
        ("uplink.delay_ms", float(plan.get("delay_ms", 20))),
        ("downlink.queue_bytes", int(plan.get("queue_bytes", 150_000))),
    ]
    if cell.side != "chrome":
        overrides.append(("cc.max_rate", cell.cap_kbps * 1000))
    scheme = "webrtc"
    variant = next((x for x in plan.get("variant", []) if x["label"] == cell.side), None)
    if variant is not None:
        scheme = variant.get("scheme", scheme)
        overrides += list((variant.get("set") or {}).items())
    simulated = cell.side in sim_sides(plan)
    return RunSpec(
        scheme=scheme, overrides=tuple(overrides), trace=cell.trace, video=v["path"],
        encoder="x264", width=int(v.get("width", 1280)), quality="none",
        encode_time="modeled" if simulated else "measured", out_dir=str(out),
        progress=False,
    )  # fmt: skip


def run_cell(plan: dict[str, Any], cell: Cell, root: Path) -> Path:
    out = cell.dir(root)
    spec = spec_of(plan, cell, out)
    if cell.side in sim_sides(plan):
        from ..run import run_one

        return run_one(spec)
    if cell.side == "live":
        from ..live import run_live

        return run_live(spec)
    from ..browser import harness

    return harness.run(spec, codec="vp8", quiet=True,
                       max_kbps=None if cell.chromium_default else cell.cap_kbps)  # fmt: skip


def run_missing(plan: dict[str, Any], root: Path, progress: bool = True) -> None:
    todo = [c for c in cells(plan) if not results.is_complete(c.dir(root))]
    for i, c in enumerate(todo):
        if progress:
            print(f"[{i + 1}/{len(todo)}] {c.trace_label} {c.cap_label} "
                  f"{side_dir(c.side, c.rep)}", file=sys.stderr)  # fmt: skip
        run_cell(plan, c, root)


# --- metrics --------------------------------------------------------------------------------


def _trace(cell: Cell, seconds: float) -> Any:
    from ..traces import load_trace

    return load_trace(cell.trace, duration_s=seconds).trace


def steps(cell: Cell) -> list[tuple[float, float, float]]:
    """(time s, rate before, rate after) of a synthetic trace's rate changes (1 s bins; a
    change of more than 30 % that holds); none for a real trace."""
    if not cell.trace.startswith("gen:"):
        return []
    rates = list(_trace(cell, cell.duration_s + 5).rate_series_bps(1.0, cell.duration_s))
    out = []
    for i in range(1, len(rates)):
        a, b = rates[i - 1], rates[i]
        if a > 0 and abs(b - a) / a > 0.3:
            out.append((float(i), a, b))
    return out


def delivered_mean_1s(run: results.Run) -> tuple[np.ndarray, np.ndarray]:
    s = run.samples
    t = s["t_us"].to_numpy(dtype=float) / 1e6
    d = s["delivered_rate_bps"].to_numpy(dtype=float)
    out = np.array([d[(t > x - 1.0) & (t <= x)].mean() if len(d) else np.nan for x in t])
    return t, out


def ramp_s(run: results.Run, start: float, goal_bps: float) -> float:
    t, m = delivered_mean_1s(run)
    hit = np.where((t >= start + 1.0) & (m >= 0.8 * goal_bps))[0]
    return float(t[hit[0]] - start) if len(hit) else math.nan


def settle_s(run: results.Run, start: float, end: float) -> float:
    """Seconds after ``start`` until no slot captured before ``end`` waits over 200 ms."""
    lat = slot_latencies_ms(run)
    f = run.frames
    capture: dict[int, int] = {}
    if run.skips is not None:
        for s, c in zip(run.skips["source_index"], run.skips["capture_us"]):
            capture.setdefault(int(s), int(c))
    for s, c in zip(f["source_index"], f["capture_us"]):
        capture.setdefault(int(s), int(c))
    caps = np.array([capture[k] for k in sorted(capture)], dtype=float) / 1e6
    inside = (caps >= start) & (caps < end)
    late = caps[inside & (lat > 200.0)]
    return float(late.max() - start) if len(late) else 0.0


def _p(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else math.nan


def _receiver_ms(run: results.Run) -> np.ndarray:
    """Time from each shown frame's last packet to its display (ms)."""
    f = run.frames
    d = f["displayed_us"].to_numpy(dtype=float) - f["completed_us"].to_numpy(dtype=float)
    return d[np.isfinite(d)] / 1e3


#: Where a frame's packet train is in its record: Sluice's sender's send times, or (a
#: browser run) the times Chromium's packets reached the relay (browser/records.py).
TRAIN_COLUMNS = (("first_packet_sent_us", "last_packet_sent_us"),
                 ("chrome_first_at_relay_us", "chrome_last_at_relay_us"))  # fmt: skip


def send_spans_ms(run: results.Run) -> np.ndarray:
    """Per frame with a packet train: from its first packet leaving the sender to its last,
    in ms (:data:`TRAIN_COLUMNS`); empty if the run has none (a browser run from before the
    relay logged RTP headers)."""
    import pandas as pd

    f = run.frames
    for a, b in TRAIN_COLUMNS:
        if f is not None and a in f and b in f:
            d = (pd.to_numeric(f[b], errors="coerce") - pd.to_numeric(f[a], errors="coerce"))
            d = d.dropna().to_numpy(dtype=float)
            if len(d):
                return d / 1e3
    return np.array([])


#: A frame whose packets left over more than this did not leave in one burst (Chromium's
#: sending path alone spreads a 100-packet keyframe over about 2-3 ms).
SPLIT_MS = 5.0
#: The bins of the gaps inside such a frame (ms): back to back, paced, a wait.
GAP_BINS = ((0.0, 0.5, "< 0.5 ms"), (0.5, 20.0, "0.5-20 ms"), (20.0, math.inf, ">= 20 ms"))


def split_frame_gaps_ms(run_dir: Path) -> tuple[int, int, np.ndarray]:
    """A browser run's frames that did not leave in one burst: (how many, of how many frames
    with a train, the gaps between their consecutive packets at the relay in ms), from the
    relay's log (:func:`sluice.browser.records.packet_trains`); (0, 0, empty) for a run
    without RTP headers in its log."""
    import json

    from ..browser.records import packet_trains

    log = run_dir / results.RELAY_LOG_FILE
    if not log.is_file():
        return 0, 0, np.array([])
    rows = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines() if x.strip()]
    by_frame = packet_trains(rows)
    gaps, split = [], 0
    for times in by_frame.values():
        t = np.sort(np.array(times, dtype=float)) / 1e3
        if t[-1] - t[0] > SPLIT_MS:
            split += 1
            gaps.append(np.diff(t))
    return split, len(by_frame), np.concatenate(gaps) if gaps else np.array([])


def gaps_table(plan: dict[str, Any], root: Path) -> str | None:
    """Per Chromium run with packet trains: how many frames did not leave in one burst, and
    how the gaps inside them fall (:data:`GAP_BINS`); None if no run has them."""
    out = []
    for t in plan["trace"]:
        for c in plan["cap"]:
            d = root / t["label"] / c["label"] / "chrome"
            if not _complete(d):
                continue
            split, frames, g = split_frame_gaps_ms(d)
            if not frames:
                continue
            shares = [f"{np.mean((g >= a) & (g < b)):.1%}" if len(g) else "-"
                      for a, b, _ in GAP_BINS]  # fmt: skip
            out.append([f"`{t['label']}`", c["label"], f"{split} of {frames}", str(len(g)),
                        *shares])  # fmt: skip
    if not out:
        return None
    return markdown(["trace", "cap", f"frames over {SPLIT_MS:g} ms", "gaps inside them",
                     *(f"gaps {label}" for _, _, label in GAP_BINS)], out)  # fmt: skip


def row(plan: dict[str, Any], cell: Cell, root: Path) -> dict[str, Any]:
    run = _run(cell.dir(root))
    s = run.summary or {}
    cap = cell.cap_kbps * 1000.0
    out: dict[str, Any] = {
        "trace": cell.trace_label, "cap": cell.cap_label, "side": cell.side, "rep": cell.rep,
        "video_bitrate_bps": s.get("video_bitrate_bps"), "utilization": s.get("utilization"),
        "fec_share": s.get("chrome_fec_bytes_share"),
        "latency_all_ms_p95": (s.get("latency_all_ms") or {}).get("p95"),
        "latency_all_ms_p99": (s.get("latency_all_ms") or {}).get("p99"),
        "latency_ms_p50": (s.get("latency_ms") or {}).get("p50"),
        "receive_all_ms_p95": _p(slot_latencies_ms(run, at="completed_us"), 95),
        "receiver_ms_p50": _p(_receiver_ms(run), 50),
        "send_span_ms_p50": _p(spans := send_spans_ms(run), 50),
        "send_span_ms_p95": _p(spans, 95),
        "freeze_count": s.get("freeze_count"), "git_sha": run.header.get("git_sha"),
        "run_dir": str(cell.dir(root)),
    }  # fmt: skip
    st = steps(cell)
    first = st[0][0] if st else cell.duration_s
    goal0 = min(cap, st[0][1] if st else _trace(cell, cell.duration_s + 5).mean_rate_bps)
    out["ramp_s"] = ramp_s(run, 0.0, goal0)
    ups = [ramp_s(run, t, min(cap, b)) for t, a, b in st
           if b > a and min(cap, b) > min(cap, a) * 1.3]  # fmt: skip
    downs = []
    for i, (t, a, b) in enumerate(st):
        if b < a:
            end = st[i + 1][0] if i + 1 < len(st) else cell.duration_s
            downs.append(settle_s(run, t, end))
    out["ramp_up_s"] = ups[0] if ups else math.nan
    out["settle_s"] = downs[0] if downs else math.nan
    out["first_step_s"] = first
    return out


# --- report ---------------------------------------------------------------------------------

COLUMNS = (
    ("video Mbps", "video_bitrate_bps", lambda v: fmt(".2f")(None if v is None else v / 1e6)),
    ("FEC %", "fec_share", lambda v: fmt(".1f")(None if v is None else 100 * v)),
    ("util %", "utilization", lambda v: fmt(".1f")(None if v is None else 100 * v)),
    ("ramp s", "ramp_s", fmt(".1f")),
    ("ramp after step up s", "ramp_up_s", fmt(".1f")),
    ("all-slot P95 ms", "latency_all_ms_p95", fmt(".0f")),
    ("all-slot P99 ms", "latency_all_ms_p99", fmt(".0f")),
    ("receive P95 ms", "receive_all_ms_p95", fmt(".0f")),
    ("receiver P50 ms", "receiver_ms_p50", fmt(".0f")),
    ("settle after drop s", "settle_s", fmt(".1f")),
    ("send span P50 ms", "send_span_ms_p50", fmt(".1f")),
    ("send span P95 ms", "send_span_ms_p95", fmt(".1f")),
    ("freezes", "freeze_count", fmt(".0f")),
)


def _ratio(a: Any, b: Any) -> float:
    a, b = _number(a), _number(b)
    return a / b if b > 0 and math.isfinite(a) else math.nan


#: What the ratio lines compare.
RATIOS = (("bitrate", "video_bitrate_bps"), ("P95", "latency_all_ms_p95"),
          ("receive P95", "receive_all_ms_p95"))  # fmt: skip


def _number(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def chrome_spread(runs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any],
                                                       dict[str, Any]]:  # fmt: skip
    """Over Chromium's runs of one cell, per column: the median, the lowest and the highest
    value (None where no run has one)."""
    med: dict[str, Any] = dict(runs[0])
    lo: dict[str, Any] = {}
    hi: dict[str, Any] = {}
    for _, key, _ in COLUMNS:
        v = np.array([_number(r.get(key)) for r in runs])
        v = v[np.isfinite(v)]
        med[key] = float(np.median(v)) if len(v) else None
        lo[key] = float(v.min()) if len(v) else None
        hi[key] = float(v.max()) if len(v) else None
    return med, lo, hi


@dataclass
class _CellRuns:
    """One trace and cap: each side's first run, Chromium's as the median of its runs, and the
    span of Chromium's runs (:func:`chrome_spread`)."""

    by: dict[str, dict[str, Any]]
    runs: int
    lo: dict[str, Any]
    hi: dict[str, Any]

    def in_range(self, side: str, key: str) -> bool:
        """Whether ``side``'s ``key`` lies inside the span of two or more Chromium runs."""
        if self.runs < 2:
            return False
        v, lo, hi = (_number(x) for x in (self.by[side].get(key), self.lo[key], self.hi[key]))
        return lo <= v <= hi


def _cell_runs(rows: list[dict[str, Any]]) -> dict[tuple[str, str], _CellRuns]:
    """Every (trace, cap) of ``rows``, in order, as :class:`_CellRuns`."""
    out = {}
    for trace, cap in dict.fromkeys((r["trace"], r["cap"]) for r in rows):
        group = [r for r in rows if r["trace"] == trace and r["cap"] == cap]
        by = {r["side"]: r for r in group if r.get("rep", 1) == 1}
        runs = sorted((r for r in group if r["side"] == "chrome"), key=lambda r: r.get("rep", 1))
        lo: dict[str, Any] = {}
        hi: dict[str, Any] = {}
        if runs:
            by["chrome"], lo, hi = chrome_spread(runs)
        out[(trace, cap)] = _CellRuns(by, len(runs), lo, hi)
    return out


def table(plan: dict[str, Any], rows: list[dict[str, Any]], cap: str) -> str:
    out = []
    for (trace, c), cell in _cell_runs(rows).items():
        if c != cap:
            continue
        by = cell.by
        for side in sides(plan):
            if side not in by:
                continue
            cells_ = [f(by[side].get(k)) for _, k, f in COLUMNS]
            if side == "chrome" and cell.runs > 1:
                out.append([f"`{trace}`", f"chrome, median of {cell.runs} runs", *cells_])
                out.append(["", "chrome, lowest-highest",
                            *(f"{f(cell.lo[k])}-{f(cell.hi[k])}" if cell.lo[k] is not None
                              else f(None) for _, k, f in COLUMNS)])  # fmt: skip
                continue
            out.append([f"`{trace}`", side, *cells_])
        for side in sim_sides(plan):
            if side not in by or "chrome" not in by:
                continue
            flags = []
            for label, key in RATIOS:
                q = _ratio(by[side].get(key), by["chrome"].get(key))
                if math.isfinite(q):
                    mark = "**" if abs(q - 1) > TOLERANCE else ""
                    inside = " (in range)" if cell.in_range(side, key) else ""
                    flags.append(f"{label} x{mark}{q:.2f}{mark}{inside}")
            out.append(["", f"{side} / chrome", "; ".join(flags)] + [""] * (len(COLUMNS) - 1))
    return markdown(["trace", "side", *(h for h, _, _ in COLUMNS)], out)


def agreement_counts(plan: dict[str, Any], rows: list[dict[str, Any]]) -> str | None:
    """Per simulator side, over every trace and cap with a Chromium run: in how many cells the
    side's value is within :data:`TOLERANCE` of Chromium's (the median of its runs), in how
    many it lies inside the span of Chromium's runs (plans with ``chrome_repeats`` > 1), and
    the median ratio; None without Chromium runs."""
    several = chrome_repeats(plan) > 1
    cells = [c for c in _cell_runs(rows).values() if c.runs]
    out = []
    for side in sim_sides(plan):
        line = [side]
        for _, key in RATIOS:
            pairs = [(c, _ratio(c.by[side].get(key), c.by["chrome"].get(key)))
                     for c in cells if side in c.by]  # fmt: skip
            pairs = [(c, q) for c, q in pairs if math.isfinite(q)]
            q = np.array([q for _, q in pairs])
            n = f" of {len(q)}"
            line.append(f"{int(np.sum(np.abs(q - 1) <= TOLERANCE))}{n}" if len(q) else "-")
            if several:
                inside = sum(c.in_range(side, key) for c, _ in pairs)
                line.append(f"{inside}{n}" if len(q) else "-")
            line.append(f"x{np.median(q):.2f}" if len(q) else "-")
        out.append(line)
    if all(c == "-" for line in out for c in line[1:]):
        return None
    head = ["side"]
    for label, _ in RATIOS:
        head += [f"{label} within {TOLERANCE:.0%}"]
        if several:
            head += [f"{label} in Chromium's range"]
        head += [f"{label} median ratio"]
    return markdown(head, out)


#: Target agreement: seconds from the start left out (start-up probing).
AGREEMENT_FROM_S = 5.0


def _target_per_second(run: results.Run, key: str) -> dict[int, float]:
    s = run.samples
    if key not in s or not len(s):
        return {}
    t, v = s["t_us"].to_numpy() / 1e6, s[key].to_numpy(dtype=float)
    ok = np.isfinite(v) & (v > 0) & (t >= AGREEMENT_FROM_S)
    sec = np.floor(t[ok]).astype(int)
    return {int(k): float(np.median(v[ok][sec == k])) for k in np.unique(sec)}


def target_agreement(plan: dict[str, Any], root: Path) -> str | None:
    """Per cap Chromium's GCC also has, a table of each simulator side's target against
    Chromium's availableOutgoingBitrate per trace (module docstring), pooled over Chromium's
    runs, and (with ``chrome_repeats`` > 1) Chromium's runs against each other; None without
    runs."""
    caps = [c["label"] for c in plan["cap"] if not c.get("chromium_default")]
    key = "chrome_available_outgoing_bitrate_bps"
    several = chrome_repeats(plan) > 1
    columns = [*sim_sides(plan), *(("chrome's runs against each other",) if several else ())]
    out, pooled = [], {}

    def agreement(col: str, ours: list[dict[int, float]], theirs: list[dict[int, float]],
                  paired: bool = False) -> str:
        """Each of ``ours`` against each of ``theirs`` (or, ``paired``, the i-th against the
        i-th), every second pooled."""
        couples = zip(ours, theirs) if paired else ((a, b) for a in ours for b in theirs)
        qs = [np.array([a[k] / b[k] for k in a.keys() & b.keys()]) for a, b in couples]
        q = np.concatenate(qs) if qs else np.array([])
        if not len(q):
            return "-"
        within = np.abs(np.log(q)) <= math.log(1 + TOLERANCE)
        pooled.setdefault((cap, col), []).append(within)
        return f"{within.mean():.0%} (x{np.median(q):.2f})"

    for cap in caps:
        for t in plan["trace"]:
            d = root / t["label"] / cap
            chrome = [_target_per_second(_run(d / side_dir("chrome", k)), key)
                      for k in range(1, chrome_repeats(plan) + 1)
                      if _complete(d / side_dir("chrome", k))]  # fmt: skip
            if not chrome:
                continue
            line = [f"`{t['label']}`", cap]
            for side in sim_sides(plan):
                sim = [_target_per_second(_run(d / side), "target_rate_bps")] if _complete(
                    d / side) else []  # fmt: skip
                line.append(agreement(side, sim, chrome))
            if several:  # every pair of Chromium's runs, the later against the earlier
                pairs = [(a, b) for i, b in enumerate(chrome) for a in chrome[i + 1:]]
                line.append(agreement(columns[-1], [a for a, _ in pairs], [b for _, b in pairs],
                                      paired=True))  # fmt: skip
            out.append(line)
    if not out:
        return None
    for cap in caps:
        line = ["all traces", cap]
        for col in columns:
            w = pooled.get((cap, col))
            line.append(f"**{np.concatenate(w).mean():.0%}**" if w else "-")
        out.append(line)
    return markdown(["trace", "cap", *columns], out)


def plot_targets(plan: dict[str, Any], root: Path, out: Path) -> Path:
    from ..plots import plt, save

    traces = [t["label"] for t in plan["trace"]]
    caps = [c["label"] for c in plan["cap"]]
    fig, axes = plt.subplots(len(traces), len(caps), figsize=(6 * len(caps), 2.8 * len(traces)),
                             sharex=False, squeeze=False)  # fmt: skip
    handles: dict[str, Any] = {}
    colors = _side_colors(plan)
    for i, t in enumerate(traces):
        for j, c in enumerate(caps):
            ax = axes[i][j]
            top_capacity = 0.0
            for side in sides(plan):
                d = root / t / c / side
                if not _complete(d):
                    continue
                r = _run(d)
                s = r.samples
                key, what = "target_rate_bps", "GCC target"
                if side == "chrome":
                    # GCC's target is availableOutgoingBitrate; Chromium's targetBitrate is
                    # the encoder's, after the encoder bitrate adjuster.
                    key = "chrome_available_outgoing_bitrate_bps"
                    ax.plot(s["t_us"] / 1e6, s["target_rate_bps"] / 1e6, lw=0.6, ls=":",
                            color=colors[side], label="chrome encoder target")  # fmt: skip
                ax.plot(s["t_us"] / 1e6, s[key] / 1e6, lw=0.9, color=colors[side],
                        label=f"{side} {what}")  # fmt: skip
                for k in range(2, (chrome_repeats(plan) if side == "chrome" else 1) + 1):
                    if _complete(dk := root / t / c / side_dir(side, k)):
                        sk = _run(dk).samples
                        ax.plot(sk["t_us"] / 1e6, sk[key] / 1e6, lw=0.6, alpha=0.45,
                                color=colors[side], label=f"{side} {what}, other runs")
                if side == "sim":
                    ax.fill_between(s["t_us"] / 1e6, 0, s["link_capacity_bps"] / 1e6,
                                    color="0.85", lw=0, label="capacity", step="post")  # fmt: skip
                    top_capacity = float(s["link_capacity_bps"].max()) / 1e6
            ax.set_title(f"{t}, {c}", fontsize=9)
            ax.set_ylabel("Mbit/s", fontsize=8)
            ax.tick_params(labelsize=7)
            cap = next(x["kbps"] for x in plan["cap"] if x["label"] == c) / 1e3
            # Zoomed on the targets (up to 1.6x the bitrate cap): a capacity above that is
            # said, not left to fill the panel unread.
            top = min(cap * 1.6, ax.get_ylim()[1])
            ax.set_ylim(0, top)
            if top_capacity > top:
                ax.text(0.01, 0.97, f"capacity up to {top_capacity:.1f} Mbit/s, above the axis",
                        transform=ax.transAxes, fontsize=7, va="top", color="0.35")  # fmt: skip
            for h, lab in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(lab, h)
    for ax in axes[-1]:
        ax.set_xlabel("time (s)", fontsize=8)
    fig.suptitle("GCC's target: Sluice's webrtc (simulator, live) and Chromium 156", fontsize=10)
    bottom = 0.0
    if handles:  # one legend under the panels, not over a panel's lines
        ncols = max(1, min(len(handles), 3 * len(caps)))
        rows = -(-len(handles) // ncols)
        fig.legend(list(handles.values()), list(handles), loc="lower center", fontsize=7,
                   ncols=ncols, frameon=False)  # fmt: skip
        bottom = (0.02 + 0.18 * rows) / (2.8 * len(traces))
    # Room for the title above the first row of panels.
    fig.tight_layout(rect=(0, bottom, 1, 1 - 0.35 / (2.8 * len(traces))))
    return save(fig, out)


def _side_colors(plan: dict[str, Any]) -> dict[str, str]:
    from ..plots import scheme_color

    colors = {"sim": scheme_color("webrtc"), "live": "#2ca02c", "chrome": "#d62728"}
    extra = iter(("#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#ff7f0e", "#393b79"))
    for v in plan.get("variant", []):
        colors[v["label"]] = next(extra, "#7f7f7f")
    return colors


def plot_spans(plan: dict[str, Any], root: Path, out: Path) -> Path | None:
    """Per cap, the CDF of the frames' send spans of every side over all traces (None if no
    run has packet trains)."""
    from ..plots import plt, save

    caps = [c["label"] for c in plan["cap"]]
    colors = _side_colors(plan)
    fig, axes = plt.subplots(1, len(caps), figsize=(5.5 * len(caps), 3.6), squeeze=False)
    drawn = False
    for ax, cap in zip(axes[0], caps):
        for side in sides(plan):
            spans = [send_spans_ms(_run(d)) for t in plan["trace"]
                     if _complete(d := root / t["label"] / cap / side)]  # fmt: skip
            v = np.sort(np.concatenate(spans)) if spans else np.array([])
            if not len(v):
                continue
            drawn = True
            ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post", lw=1.2,
                    color=colors[side], label=side)  # fmt: skip
        ax.set_title(f"{cap}: every trace", fontsize=9)
        ax.set_xlabel("frame send span: first packet to last (ms; axis cut at 60)", fontsize=8)
        ax.set_ylabel("share of frames", fontsize=8)
        ax.set_xlim(-1, 60)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    if not drawn:
        plt.close(fig)
        return None
    fig.tight_layout()
    return save(fig, out)


def write_report(plan: dict[str, Any], root: Path, report_dir: Path, command: str) -> Path:
    global _report_cache
    _report_cache = {}
    try:
        return _write_report(plan, root, report_dir, command)
    finally:
        _report_cache = None


def _write_report(plan: dict[str, Any], root: Path, report_dir: Path, command: str) -> Path:
    import pandas as pd

    rows = [row(plan, c, root) for c in cells(plan) if _complete(c.dir(root))]
    if not rows:
        raise SluiceError(f"no finished runs under {root}")
    report_dir.mkdir(parents=True, exist_ok=True)
    img = report_dir / "img"
    img.mkdir(exist_ok=True)
    csv = report_dir / "chrome-runs.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    md = report_dir / "chrome.md"
    chromium = ""
    for r in rows:
        if r["side"] == "chrome":
            h = results.read_header(r["run_dir"])
            chromium = (h.get("browser") or {}).get("chromium", "")
            break
    L = ["# Sluice's WebRTC model against Chromium\n"]
    L.append(f"Generated by `{PROG}` from `{csv.name}` (one row per run). "
             f"{' '.join(str(plan.get('description', '')).split())}\n")  # fmt: skip
    L += provenance([r["git_sha"] for r in rows], command)
    v = plan["video"]
    L.append(f"- browser: {chromium}; VP8, degradation preference maintain-resolution")
    L.append(f"- clip: `{Path(v['path']).name}` at {v.get('width', 1280)} px, "
             f"{v.get('fps', 30)} fps (x264 superfast, zerolatency on Sluice's side)")  # fmt: skip
    L.append(f"- network: {plan.get('delay_ms', 20)} ms one way each direction, drop-tail "
             f"{plan.get('queue_bytes')} B at the bottleneck, feedback path unlimited; seed "
             f"{plan.get('seed', 1)}\n")  # fmt: skip
    L.append("## Analysis\n")
    analysis = existing_analysis(md)
    L.append(ANALYSIS_SLOT)
    for c in plan["cap"]:
        L.append(f"## {c['label']}: {c['kbps'] / 1000:g} Mbps cap\n")
        several = chrome_repeats(plan) > 1
        L.append("`sim / chrome`: the simulator's value over Chromium's"
                 + (f" (the median of its {chrome_repeats(plan)} runs of the cell; `in range`: "
                    "the simulator's value lies between Chromium's lowest and highest)"
                    if several else "")
                 + f"; bold where they differ by more than {TOLERANCE:.0%}. `FEC %`: the share "
                 "of Chromium's video stream that was ULPFEC (left out of its video Mbps).\n")
        L.append(table(plan, rows, c["label"]) + "\n")
    counts = agreement_counts(plan, rows)
    if counts is not None:
        L.append("## Cells in agreement\n")
        L.append("Per simulator side, over every trace and cap: the cells whose value is within "
                 f"{TOLERANCE:.0%} of Chromium's"
                 + (" (the median of its runs), the cells whose value lies inside the span of "
                    "Chromium's runs" if several else "")
                 + ", and the median of the ratios.\n")  # fmt: skip
        L.append(counts + "\n")
    L.append(figure(plot_targets(plan, root, img / "chrome-targets.png"),
                    "GCC's target over time: Sluice's webrtc in the simulator (and its "
                    "variants) and live, and Chromium's availableOutgoingBitrate (solid) and "
                    "encoder target (dotted); capacity shaded", report_dir))  # fmt: skip
    agreement = target_agreement(plan, root)
    if agreement is not None:
        L.append("## GCC's target against Chromium's estimate\n")
        L.append(f"Seconds after the first {AGREEMENT_FROM_S:g} s in which the side's median GCC "
                 f"target is within {TOLERANCE:.0%} of Chromium's median availableOutgoingBitrate"
                 " (and the median ratio of the two)"
                 + (", pooled over Chromium's runs; the last column compares every pair of "
                    "Chromium's runs, the agreement two runs of the browser reach"
                    if chrome_repeats(plan) > 1 else "")
                 + "; the last line pools every second of every trace.\n")  # fmt: skip
        L.append(agreement + "\n")
    spans = plot_spans(plan, root, img / "chrome-spans.png")
    if spans is not None:
        L.append("## How frames leave the sender\n")
        L.append(figure(spans, "How frames leave the sender: the CDF of the frames' send spans "
                        "(first packet to last) of every run of each side"
                        + (" (Chromium's first runs)" if chrome_repeats(plan) > 1 else "")
                        + ", per cap", report_dir))  # fmt: skip
        gaps = gaps_table(plan, root)
        if gaps is not None:
            L.append(("In Chromium's first run of each cell, its" if chrome_repeats(plan) > 1
                      else "Chromium's")
                     + f" frames whose media packets left over more than {SPLIT_MS:g} ms, "
                     "and the gaps between their consecutive packets at the relay: back to "
                     "back (< 0.5 ms), paced (0.5-20 ms), or a wait (>= 20 ms).\n")
            L.append(gaps + "\n")
    L.append("## Definitions\n")
    L.append("Per run, " + __doc__.split("Per run the report derives, ")[1].strip() + "\n")
    return write_markdown(md, L, analysis)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    ap = report_parser(PROG, __doc__)
    # The plan's keys and what several browser runs change, from the module's docstring.
    ap.epilog = ("Plan keys: " + __doc__.split("Plan keys: ")[1].split("Per run the report")[0]
                 ).replace("``", "'").strip()  # fmt: skip
    ap.add_argument("plan", metavar="PLAN", help="the plan (experiments/chrome-fidelity.toml)")
    ap.add_argument("--results", default="results", metavar="DIR",
                    help="results root (default results): its runs go to DIR/<plan's name>")
    add_report_dir(ap, "chrome.md, chrome-runs.csv and img/", "DIR/<plan's name>",
                   "chrome-report")
    ap.add_argument("--report-only", action="store_true", help="run nothing, only report")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    return report_main(PROG, argv, parse_args, _write)


def _write(args: argparse.Namespace, command: str) -> str:
    plan = load_plan(args.plan)
    root = Path(args.results) / plan["name"]
    if not args.report_only:
        run_missing(plan, root)
    return f"report: {write_report(plan, root, report_dir_of(args, root), command)}"


if __name__ == "__main__":
    sys.exit(main())
