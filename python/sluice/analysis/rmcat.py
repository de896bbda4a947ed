"""The RMCAT evaluation test cases (RFC 8867 §5) in Sluice: the report of the plans in
``experiments/rmcat/`` (one per test case). Reads each case's results and writes
``<report-dir>/rmcat.md``: a pass/fail matrix of scheme x test case against each case's
expected behaviour, the numbers behind every cell, and per case the figure RFC 8868 §4 asks
for (every flow's rate over time, with the capacity), ``img/rmcat-<case>.png``::

    for p in experiments/rmcat/*.toml; do sluice matrix $p; done && \\
        python -m sluice.analysis.rmcat results --report-dir docs/results      # make rmcat

RFC 8867 states each case's expected behaviour in words; the thresholds that make them a
pass or a fail are Sluice's reading, written next to each case (:data:`CASES`). Rates are
bytes the bottleneck delivered per flow (headers included), from the time series'
``flow<ID>_rate_bps`` columns.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import results
from ..errors import SluiceError
from ..plots import plt, save, scheme_color
from . import (
    ANALYSIS_SLOT,
    add_report_dir,
    existing_analysis,
    figure,
    prose,
    provenance,
    report_dir_of,
    report_main,
    report_parser,
    write_markdown,
)

PROG = "python -m sluice.analysis.rmcat"
REPORT = "rmcat"  # templates/rmcat.md
#: The baseline first, then the four systems.
SCHEMES = ("webrtc", "ace", "mae", "vidaptive", "co-rtv")
#: Colours of the competing flows (flow 0 has its scheme's).
OTHERS = ("0.25", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#bcbd22", "#7f7f7f")


def _rates(run: results.Run, t0: float, t1: float) -> dict[int, float]:
    """Each flow's mean delivered rate (bps) over ``(t0, t1]`` seconds; flow 0 is the
    session's own (``delivered_rate_bps`` without competing flows)."""
    s = run.samples
    t = s["t_us"].to_numpy(dtype=float) / 1e6
    m = (t > t0) & (t <= t1)
    out = {}
    for c in s.columns:
        name = str(c)
        if name.startswith("flow") and name.endswith("_rate_bps"):
            out[int(name[4:-9])] = float(np.nanmean(s[c].to_numpy(dtype=float)[m]))
    if not out:
        out[0] = float(np.nanmean(s["delivered_rate_bps"].to_numpy(dtype=float)[m]))
    return out


def _capacity(run: results.Run, t0: float, t1: float) -> float:
    s = run.samples
    t = s["t_us"].to_numpy(dtype=float) / 1e6
    m = (t > t0) & (t <= t1)
    return float(np.nanmean(s["link_capacity_bps"].to_numpy(dtype=float)[m]))


def _jain(xs: Sequence[float]) -> float:
    sq = sum(x * x for x in xs)
    return sum(xs) ** 2 / (len(xs) * sq) if xs and sq > 0 else math.nan


def _media(run: results.Run) -> list[int]:
    """The media flows' ids (the session's and the competing media flows)."""
    flows = (run.summary or {}).get("flows") or [{"flow": 0, "kind": "media"}]
    return [f["flow"] for f in flows if f.get("kind") == "media"]


def _audio(run: results.Run) -> str:
    """What RFC 8867's audio flows met: at the bottleneck (``audio``: their queueing P95, the
    worst of them, and their loss) and on the uplink (``reverse-audio``, §5.3's backward
    audio); "" without any."""
    flows = (run.summary or {}).get("flows") or []
    said = []
    for kind, name in (("audio", "audio"), ("reverse-audio", "backward audio")):
        audio = [f for f in flows if f.get("kind") == kind]
        if audio:
            q = max((f.get("queue_delay_ms_p95") or math.nan for f in audio), default=math.nan)
            loss = max(float(f.get("loss_rate") or 0.0) for f in audio)
            said.append(f"{name}: queue P95 {q:.0f} ms, loss {100 * loss:.1f} %")
    return "; ".join(said)


def _num(v: Any) -> float:
    """A summary value as a number: NaN for a missing one (a NaN is written as null)."""
    return float(v) if isinstance(v, (int, float)) else math.nan


def _queue_p95(run: results.Run) -> float:
    """The session's packets' bottleneck queueing delay P95 (ms; NaN without samples)."""
    return _num((run.summary or {}).get("queue_delay_ms_p95"))


def _viewer(run: results.Run) -> str:
    """What the session's viewer saw, whatever the case checks: all-slot latency P95 and the
    time frozen."""
    s = run.summary or {}
    p95 = _num((s.get("latency_all_ms") or {}).get("p95"))
    frozen = _num(s.get("total_freezes_duration_s"))
    return f"video: all-slot P95 {p95:.0f} ms, frozen {frozen:.1f} s"


@dataclass(frozen=True)
class Case:
    """One test case: its plan's name, title, the expected behaviour (RFC 8867's words and
    Sluice's threshold) and the check: a run -> (pass, the numbers shown)."""

    plan: str
    section: str
    title: str
    expected: str
    #: The run -> (pass, the numbers shown); with a ``reference`` plan, (run, the same
    #: scheme's reference run or None) -> ...
    check: Callable[..., tuple[bool, str]]
    #: The plan of the case's reference runs (RFC 8867 §5.3 compares with one), if any.
    reference: str | None = None


#: How long each case's runs are (its plan in experiments/rmcat/, the RFC's): a shorter run
#: (a plan cut for a quick look) cannot be judged, since its checks read windows up to the end.
DURATION_S = {"rmcat-5.1": 100, "rmcat-5.2": 125, "rmcat-5.3": 100, "rmcat-5.4": 120,
              "rmcat-5.5": 300, "rmcat-5.6": 300, "rmcat-5.7": 300, "rmcat-5.8": 120,
              "rmcat-6.3": 300, "rmcat-w1": 140, "rmcat-w2": 70}  # fmt: skip


def _judge(case: Case, run: results.Run, *ref: results.Run | None) -> tuple[bool | None, str]:
    """``case``'s check of ``run``, or (None, why not) for a run shorter than the case."""
    got = float((run.summary or {}).get("duration_s", 0))
    need = DURATION_S.get(case.plan, 0)
    if got < need:
        return None, f"not judged: the run is {got:g} s, the case {need:g} s"
    return case.check(run, *ref)


def _verdict(r: tuple[bool | None, str] | None) -> str:
    """PASS or FAIL; n/a where the scheme has no run of the case (it cannot run it), short
    where its run is shorter than the case (:func:`_judge`: not judged)."""
    if r is None:
        return "n/a"
    return "short" if r[0] is None else "PASS" if r[0] else "FAIL"


#: §5.1's "without excessive queueing", applied to every case of the same 300 ms buffer
#: whose flows must adapt as well as share (§5.2, 5.4, 5.5, 5.8): half the buffer.
ADAPT_QUEUE_MS = 150.0


def _check_51(run: results.Run) -> tuple[bool, str]:
    s = run.summary or {}
    util, q = _num(s.get("utilization")), _queue_p95(run)
    return util >= 0.7 and q <= ADAPT_QUEUE_MS, f"utilisation {util:.2f}, queue P95 {q:.0f} ms"


def _check_53(run: results.Run, ref: results.Run | None) -> tuple[bool, str]:
    """The forward flow against the reference (the same path, the backward one unimpaired):
    its delivered rate at least 0.8 of the reference's and its frames' latency P95 at most
    100 ms above; the backward flow uses at least half its path's mean capacity."""
    s = run.summary or {}
    back = [f for f in s.get("flows") or [] if f.get("kind") == "reverse-media"]
    up_bps = float(((run.header or {}).get("uplink_trace") or {}).get("mean_rate_bps") or 0)
    if not back or up_bps <= 0:
        return False, "no backward flow or uplink trace in the results"
    use = float(back[0].get("mean_rate_bps", 0.0)) / up_bps
    said_back = f"backward: link use {use:.2f}"
    if ref is None:
        return False, f"no reference run; {said_back}"
    r = ref.summary or {}
    end = float(s.get("duration_s", 0))
    rate, ref_rate = _rates(run, 0.0, end).get(0, 0.0), _rates(ref, 0.0, end).get(0, 0.0)
    ratio = rate / ref_rate if ref_rate > 0 else math.nan
    p95 = (s.get("latency_ms") or {}).get("p95", math.nan)
    ref_p95 = (r.get("latency_ms") or {}).get("p95", math.nan)
    ok = ratio >= 0.8 and p95 <= ref_p95 + 100 and use >= 0.5
    return ok, (f"forward: {ratio:.2f} of the reference's rate, frame latency P95 {p95:.0f} ms "
                f"(reference {ref_p95:.0f} ms); {said_back}")  # fmt: skip


def _crossings(run: results.Run) -> dict[int, tuple[int, ...]]:
    """The bottlenecks (1, 2) each flow crosses, by flow id, from the run's config: flow 0
    both, competing flow ``k`` (from 1) by its ``crosses`` (``first`` by default)."""
    config = (run.header or {}).get("config") or {}
    which = {"first": (1,), "second": (2,), "both": (1, 2)}
    out: dict[int, tuple[int, ...]] = {0: (1, 2)}
    for k, c in enumerate(config.get("competing") or [], start=1):
        crosses = c.get("crosses", "first") if isinstance(c, dict) else "first"
        out[k] = which.get(crosses, (1,))
    return out


def _check_63(run: results.Run) -> tuple[bool, str]:
    """Flow 0 crosses both bottlenecks, flow 1 the first, flow 2 the second (the plan):
    each bottleneck used at >= 0.8 of its capacity, flows 0 and 2 share the second fairly,
    and every flow has at least half its max-min fair share; from 10 s."""
    s = run.summary or {}
    second = ((run.header or {}).get("config") or {}).get("second_bottleneck") or {}
    cap2 = float(second.get("rate_mbps") or 0) * 1e6
    if cap2 <= 0 or len(s.get("flows") or []) < 3:
        return False, "no second bottleneck or fewer than three flows in the results"
    end = float(s.get("duration_s", 0))
    r = _rates(run, 10.0, end)
    r0, r1, r2 = r.get(0, 0.0), r.get(1, 0.0), r.get(2, 0.0)
    cap1 = _capacity(run, 10.0, end)
    # Every flow that crosses a bottleneck uses it (the RFC's audio flows too).
    crossing = _crossings(run)
    use1 = sum(x for f, x in r.items() if 1 in crossing.get(f, ())) / cap1
    use2 = sum(x for f, x in r.items() if 2 in crossing.get(f, ())) / cap2
    # Max-min fair: the two flows of the tighter second bottleneck halve it, the first
    # flow takes the rest of the first.
    fair0 = min(cap1, cap2) / 2
    fair = (fair0, cap1 - fair0, cap2 - fair0)
    worst = min(x / f for x, f in zip((r0, r1, r2), fair))
    j = _jain([r0, r2])
    ok = use1 >= 0.8 and use2 >= 0.8 and j >= 0.8 and worst >= 0.5
    return ok, (f"rates {r0 / 1e6:.2f}/{r1 / 1e6:.2f}/{r2 / 1e6:.2f} Mbps (max-min fair "
                f"{fair[0] / 1e6:.2f}/{fair[1] / 1e6:.2f}/{fair[2] / 1e6:.2f}); bottleneck use "
                f"{use1:.2f} and {use2:.2f}; Jain at the second {j:.2f}")  # fmt: skip


def _check_jain(t0: float, what: str,
                adapt: bool = False) -> Callable[[results.Run], tuple[bool, str]]:  # fmt: skip
    """Jain's index of the media flows' rates from ``t0`` >= 0.8; with ``adapt``, also
    §5.1's adaptation: the session's bottleneck queue P95 <= :data:`ADAPT_QUEUE_MS`."""
    def check(run: results.Run) -> tuple[bool, str]:
        s = run.summary or {}
        end = float(s.get("duration_s", 0))
        r = _rates(run, t0, end)
        media = [r[i] for i in _media(run) if i in r]
        j = _jain(media)
        used = sum(r.values()) / _capacity(run, t0, end)
        shares = "/".join(f"{x / 1e6:.2f}" for x in media)
        said = f"Jain {j:.2f} ({shares} Mbps, {what}), link use {used:.2f}"
        if not adapt:
            return j >= 0.8, said
        q = _queue_p95(run)
        return j >= 0.8 and q <= ADAPT_QUEUE_MS, f"{said}, queue P95 {q:.0f} ms"

    return check


def _check_56(run: results.Run) -> tuple[bool, str]:
    r = _rates(run, 70.0, 240.0)
    share = r.get(0, 0.0) / max(sum(r.values()), 1e-9)
    return share >= 0.2, f"media share {share:.2f} of {sum(r.values()) / 1e6:.2f} Mbps (70-240 s)"


def _check_57(run: results.Run) -> tuple[bool, str]:
    end = float((run.summary or {}).get("duration_s", 0))
    r = _rates(run, 10.0, end)
    media = [r[i] for i in _media(run) if i in r]
    share = sum(media) / max(sum(r.values()), 1e-9)
    j = _jain(media)
    return j >= 0.8 and share >= 0.5, f"media Jain {j:.2f}, media share {share:.2f}"


def _check_58(run: results.Run) -> tuple[bool, str]:
    during = _rates(run, 45.0, 60.0)
    use = (during.get(0, 0.0) + during.get(1, 0.0)) / _capacity(run, 45.0, 60.0)
    after = _rates(run, 80.0, 120.0)
    j = _jain([after.get(i, 0.0) for i in (0, 1, 3)])
    q = _queue_p95(run)
    return j >= 0.8 and use >= 0.7 and q <= ADAPT_QUEUE_MS, (
        f"paused: link use {use:.2f}; resumed: Jain {j:.2f}; queue P95 {q:.0f} ms")


CASES = (
    Case("rmcat-5.1", "5.1", "Variable available capacity, one flow",
         "detect the capacity and converge to it without excessive queueing: utilisation "
         ">= 0.7 and bottleneck queue P95 <= 150 ms (half the 300 ms buffer)", _check_51),
    Case("rmcat-5.2", "5.2", "Variable available capacity, two flows",
         "both flows adapt and share: as in §5.1, the session's bottleneck queue P95 <= 150 "
         "ms (half the 300 ms buffer), and Jain's index of the two flows' rates >= 0.8 from "
         "10 s", _check_jain(10.0, "two flows", adapt=True)),
    Case("rmcat-5.3", "5.3", "Congested feedback link, a media flow each way",
         "cope with feedback delayed and lost behind the backward flow's media, compared with "
         "the reference case (the backward path unimpaired, no backward flow): the forward "
         "flow keeps >= 0.8 of the reference's delivered rate and its frame latency P95 stays "
         "within 100 ms of the reference's, and the backward flow uses >= 0.5 of its path's "
         "mean capacity", _check_53, reference="rmcat-5.3-reference"),
    Case("rmcat-5.4", "5.4", "Three flows of the same scheme",
         "converge to a fair share without excessive queueing: Jain's index of the three "
         "rates >= 0.8 from 10 s, and (as in §5.1) the session's bottleneck queue P95 <= 150 "
         "ms", _check_jain(10.0, "three flows", adapt=True)),
    Case("rmcat-5.5", "5.5", "Round-trip time fairness",
         "flows of one-way delays 10-150 ms are not starved and share without excessive "
         "queueing: Jain's index of the five rates >= 0.8 from 14 s (the last start plus "
         "10 s), and (as in §5.1) the session's bottleneck queue P95 <= 150 ms",
         _check_jain(14.0, "one-way 10/25/50/100/150 ms", adapt=True)),
    Case("rmcat-5.6", "5.6", "A long TCP (CUBIC) flow",
         "no starvation by the TCP flow: the media flow keeps >= 20 % of the delivered bytes "
         "while TCP runs (70-240 s, after 10 s of warm-up)", _check_56),
    Case("rmcat-5.7", "5.7", "Ten short TCP flows",
         "the two media flows are not starved and share fairly: Jain's index of the two >= 0.8 "
         "and >= 50 % of the delivered bytes together, from 10 s", _check_57),
    Case("rmcat-5.8", "5.8", "Pause and resume",
         "the other flows take the freed capacity (link use >= 0.7 during 45-60 s) and the "
         "resumed flow regains its share (Jain's index of the three >= 0.8 during 80-120 s), "
         "without excessive queueing (as in §5.1, the session's bottleneck queue P95 <= 150 "
         "ms)", _check_58),
    Case("rmcat-6.3", "6.3", "Multiple bottlenecks",
         "full utilisation at both bottlenecks without starving any of the three flows and a "
         "fair share at each: from 10 s, each bottleneck used at >= 0.8 of its capacity, "
         "Jain's index of the two flows of the second bottleneck >= 0.8, and every flow at "
         ">= 0.5 of its max-min fair share", _check_63),
)

def _check_w1(run: results.Run) -> tuple[bool, str]:
    s = run.summary or {}
    q = _queue_p95(run)
    end = float(s.get("duration_s", 0))
    alone = _rates(run, 10.0, 60.0)
    use = alone.get(0, 0.0) / _capacity(run, 10.0, 60.0)
    both = _rates(run, 70.0, end)
    j = _jain([both.get(0, 0.0), both.get(1, 0.0)])
    ok = use >= 0.5 and q <= 300 and j >= 0.8
    return ok, f"alone: link use {use:.2f}; queue P95 {q:.0f} ms; two flows: Jain {j:.2f}"


WIRELESS = (
    Case("rmcat-w1", "RFC 8869 §4", "Cellular (a measured LTE trace)",
         "follow the varying capacity without excessive delay and share it when a second "
         "flow joins: link use >= 0.5 alone (10-60 s), queue P95 <= 300 ms, Jain's index of "
         "the two >= 0.8 from 70 s", _check_w1),
    Case("rmcat-w2", "RFC 8869 §5", "Wi-Fi (a measured Wi-Fi trace), two flows",
         "share the varying capacity: Jain's index of the two rates >= 0.8 from 10 s",
         _check_jain(10.0, "two flows")),
)

#: Every case the report covers: RFC 8867's, then RFC 8869's by real traces (the issue's
#: "RFC 8868 wireless cases" are RFC 8869's; RFC 8868 is the evaluation criteria).
ALL = CASES + WIRELESS


def _runs(case_dir: Path) -> dict[str, results.Run]:
    """The first seed's run of every scheme of a case's results."""
    out: dict[str, results.Run] = {}
    for summary in sorted(case_dir.glob("*/*/*/s*/summary.json")):
        run_dir = summary.parent
        scheme = run_dir.parent.name
        if scheme not in out:
            out[scheme] = results.load_run(run_dir)
    return out


def _where(section: str) -> str:
    """A section as the table shows it: ``§5.1`` (RFC 8867's), ``RFC 8869 §4`` as is."""
    return section if section.startswith("RFC") else f"§{section}"


def _long(section: str) -> str:
    return section if section.startswith("RFC") else f"RFC 8867 §{section}"


def _plot(case: Case, runs: dict[str, results.Run], out: Path) -> Path:
    schemes = [s for s in SCHEMES if s in runs] + [s for s in runs if s not in SCHEMES]
    fig, axes = plt.subplots(1, len(schemes), figsize=(4.2 * len(schemes) + 0.6, 3.2),
                             sharey=True, squeeze=False, layout="constrained")  # fmt: skip
    for ax, scheme in zip(axes[0], schemes):
        s = runs[scheme].samples
        t = s["t_us"].to_numpy(dtype=float) / 1e6
        cap = s["link_capacity_bps"].to_numpy(dtype=float) / 1e6
        up = "uplink_capacity_bps" in s.columns  # a backward flow's path (§5.3)
        config = (runs[scheme].header or {}).get("config") or {}
        second = (config.get("second_bottleneck") or {}).get("rate_mbps")  # §6.3
        label = "capacity, forward" if up else "capacity, first" if second else "capacity"
        ax.fill_between(t, np.convolve(cap, np.ones(50) / 50, mode="same"), color="0.88",
                        label=label)  # fmt: skip
        if second:
            ax.axhline(float(second), color="0.45", lw=0.9, ls="--", label="capacity, second")
        if up:
            ucap = s["uplink_capacity_bps"].to_numpy(dtype=float) / 1e6
            ax.plot(t, np.convolve(ucap, np.ones(50) / 50, mode="same"), color="0.45", lw=0.9,
                    ls="--", label="capacity, backward")  # fmt: skip
        flows = (runs[scheme].summary or {}).get("flows") or []
        names = {f["flow"]: f"{f['flow']} {f['kind']}:{f['scheme']}" for f in flows}
        # RFC 8867's audio flows (a constant 36 kbps on the wire) would lie flat on the axis.
        audio = {f"flow{f['flow']}_rate_bps" for f in flows
                 if f.get("kind") in ("audio", "reverse-audio")}  # fmt: skip
        cols = sorted((c for c in s.columns if str(c).startswith("flow") and c not in audio),
                      key=lambda c: int(str(c)[4:-9])) or ["delivered_rate_bps"]  # fmt: skip
        for k, c in enumerate(cols):
            v = s[c].to_numpy(dtype=float) / 1e6
            smooth = np.convolve(v, np.ones(50) / 50, mode="same")  # 1 s at 20 ms
            color = scheme_color(scheme) if k == 0 else OTHERS[(k - 1) % len(OTHERS)]
            flow = int(str(c)[4:-9]) if str(c).startswith("flow") else 0
            ax.plot(t, smooth, lw=1.0, color=color,
                    label=names.get(flow, "media") if len(cols) <= 4 or k < 3 else None)
        ax.set_title(scheme, fontsize=10)
        ax.set_xlabel("time (s)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, loc="upper right")
    axes[0, 0].set_ylabel("delivered rate, 1 s mean (Mbit/s)")
    fig.suptitle(f"{_long(case.section)}: {case.title}", fontsize=10)
    return save(fig, out)


def write_report(results_root: str | Path, report_dir: str | Path, command: str) -> Path:
    root, out_dir = Path(results_root), Path(report_dir)
    img = out_dir / "img"
    img.mkdir(parents=True, exist_ok=True)
    matrix: dict[str, dict[str, tuple[bool, str] | None]] = {}
    figures: list[str] = []
    shas: list[str] = []
    missing: list[Case] = []
    for case in ALL:
        case_dir = root / case.plan
        runs = _runs(case_dir) if case_dir.is_dir() else {}
        if not runs:
            # A plan whose trace is optional and missing (w1: ../shared/traces).
            missing.append(case)
            matrix[case.plan] = {}
            continue
        if case.reference:
            ref_dir = root / case.reference
            refs = _runs(ref_dir) if ref_dir.is_dir() else {}
            matrix[case.plan] = {s: _judge(case, r, refs.get(s)) for s, r in runs.items()}
        else:
            matrix[case.plan] = {s: _judge(case, r) for s, r in runs.items()}
        for s, r in runs.items():
            said = "; ".join(x for x in (_viewer(r), _audio(r)) if x)
            if matrix[case.plan][s] is not None:
                ok, numbers = matrix[case.plan][s]
                matrix[case.plan][s] = ok, f"{numbers}; {said}"
        shas += [str(r.header.get("git_sha", "?")) for r in runs.values()]
        png = _plot(case, runs, img / f"{case.plan}.png")
        figures.append(figure(png, f"{_long(case.section)}, {case.title.lower()}: every "
                              "flow's delivered rate", out_dir))  # fmt: skip
    if len(missing) == len(ALL):
        raise SluiceError(f"no RMCAT results in {root} (run `make rmcat`, or `sluice matrix` "
                          "on experiments/rmcat/*.toml, first)")  # fmt: skip
    schemes = [s for s in SCHEMES if any(s in m for m in matrix.values())]
    lines = ["# The RMCAT test cases (RFC 8867) in Sluice", "",
             prose(REPORT, "intro", command=command), "",
             "| case | " + " | ".join(schemes) + " |",
             "|---|" + "---|" * len(schemes)]  # fmt: skip
    for case in ALL:
        cells = []
        for s in schemes:
            r = matrix[case.plan].get(s)
            if case in missing:
                cells.append("no results")
            else:
                cells.append(_verdict(r))
        lines.append(f"| {_where(case.section)} {case.title} | " + " | ".join(cells) + " |")
    lines += ["", "## The cases, their thresholds and numbers", ""]
    for case in ALL:
        lines += [f"### {_where(case.section)} {case.title}", "", f"Expected: {case.expected}.",
                  ""]  # fmt: skip
        for s in schemes:
            r = matrix[case.plan].get(s)
            if r is not None:
                lines.append(f"- `{s}`: {_verdict(r)}: {r[1]}")
        lines.append("")
    lines += ["", "## Figures", "", *figures, "## Analysis", "", ANALYSIS_SLOT, "## Provenance", "",
              *provenance(shas, command)]  # fmt: skip
    md = out_dir / "rmcat.md"
    return write_markdown(md, lines, existing_analysis(md))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = report_parser(PROG, __doc__)
    p.add_argument("results", metavar="RESULTS", help="the results root (results)")
    add_report_dir(p, "rmcat.md and img/", "RESULTS", "rmcat")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    return report_main(PROG, argv, parse_args, _write)


def _write(args: argparse.Namespace, command: str) -> str:
    md = write_report(args.results, report_dir_of(args, args.results), command=command)
    return f"report: {md}"


if __name__ == "__main__":
    sys.exit(main())

