"""The leaderboard (``docs/results/leaderboard.md`` and ``leaderboard.html``).

``python -m sluice.analysis.leaderboard RESULTS [--report-dir DIR]`` reads a finished
``sluice matrix experiments/leaderboard.toml`` and writes, per network family:

* the **ranking**: the schemes whose mean VMAF is within :data:`VMAF_MARGIN` points of the
  family's best, ordered by their mean all-slot P95 (the latency over every capture slot: a
  slot whose frame is not shown counts until the next frame shown), so a scheme cannot win
  by showing fewer or worse frames; the others follow, unranked, with how far their VMAF is
  below the best;
* the **Pareto front** of all-slot P95 against VMAF: the schemes no other scheme beats on
  both;
* schemes that need the network's help (a bottleneck that is not plain drop-tail: FDCC's
  oracle, which knows the link's capacity, and Co-RTV's cooperating bottleneck) are shown as
  references: they neither set the best VMAF nor take a rank, and are on the front only
  against each other's kind;
* means over the family's cells (trace windows x clips) with the half-width of their 95 %
  t interval; ``~`` marks a P95 not distinguishable from the ranking's first.

It also writes a figure of every family's front and the matrix's HTML report.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SluiceError
from ..spread import Spread, spread
from . import (
    ANALYSIS_SLOT,
    existing_analysis,
    figure,
    load,
    markdown,
    matrix_report_main,
    prose,
    provenance,
    write_markdown,
)

PROG = "python -m sluice.analysis.leaderboard"
REPORT = "leaderboard"  # templates/leaderboard.md
#: A scheme is ranked when its mean VMAF is at most this far below the family's best.
VMAF_MARGIN = 2.0


@dataclass(frozen=True)
class Entry:
    """One scheme in one family: means and intervals over its cells."""

    scheme: str
    #: The bottleneck behaviour it needs (``None``: plain drop-tail, end to end only).
    network: str | None
    cells: int
    p95: Spread
    p99: Spread
    vmaf: Spread
    stalls: Spread
    freezes: Spread
    bitrate: Spread
    shown_p95: Spread


def network_help(run_dir: str) -> str | None:
    """The bottleneck behaviour a run's scheme needs, or ``None`` for plain drop-tail."""
    from .. import results

    cfg = results.read_header(run_dir).get("config", {})
    kind = ((cfg.get("scheme") or {}).get("bottleneck") or {}).get("kind", "drop-tail")
    return None if kind == "drop-tail" else str(kind)


def entries(df: Any) -> list[Entry]:
    out = []
    for scheme, g in df.groupby("scheme", sort=False):
        out.append(Entry(
            str(scheme), network_help(str(g["run_dir"].iloc[0])), len(g),
            spread(g["latency_all_ms_p95"]), spread(g["latency_all_ms_p99"]),
            spread(g["vmaf_mean"]), spread(g["stall_ratio_200ms"]), spread(g["freeze_count"]),
            spread(g["video_bitrate_bps"] / 1e6), spread(g["latency_ms_p95"]),
        ))  # fmt: skip
    return out


def ranking(es: Sequence[Entry]) -> tuple[list[Entry], list[Entry], float]:
    """(ranked, unranked, best VMAF) of the end-to-end schemes: ranked are within the margin
    of their best VMAF, by P95; the others by VMAF, best first."""
    es = [e for e in es if e.network is None]
    best = max((e.vmaf.mean for e in es if math.isfinite(e.vmaf.mean)), default=math.nan)
    ok = [e for e in es if math.isfinite(e.vmaf.mean) and e.vmaf.mean >= best - VMAF_MARGIN]
    rest = [e for e in es if e not in ok]
    ok.sort(key=lambda e: (e.p95.mean if math.isfinite(e.p95.mean) else math.inf, e.scheme))
    rest.sort(key=lambda e: -e.vmaf.mean if math.isfinite(e.vmaf.mean) else math.inf)
    return ok, rest, best


def pareto(es: Sequence[Entry], end_to_end: bool = True) -> list[Entry]:
    """The schemes no other beats on both all-slot P95 (lower) and VMAF (higher), by P95;
    ``end_to_end``: among the schemes that need no help from the network."""
    if end_to_end:
        es = [e for e in es if e.network is None]

    def beats(a: Entry, b: Entry) -> bool:
        return (a.p95.mean <= b.p95.mean and a.vmaf.mean >= b.vmaf.mean
                and (a.p95.mean < b.p95.mean or a.vmaf.mean > b.vmaf.mean))  # fmt: skip

    ok = [e for e in es if math.isfinite(e.p95.mean) and math.isfinite(e.vmaf.mean)]
    front = [e for e in ok if not any(beats(o, e) for o in ok if o is not e)]
    return sorted(front, key=lambda e: e.p95.mean)


def family_table(es: Sequence[Entry]) -> str:
    ranked, rest, best = ranking(es)
    front = {e.scheme for e in pareto(es)}
    rows = []
    for i, e in enumerate(ranked):
        tie = "" if i == 0 or not e.p95.overlaps(ranked[0].p95) else " ~"
        rows.append([f"{i + 1}", f"`{e.scheme}`", e.p95.format(".0f") + tie,
                     e.p99.format(".0f"), e.vmaf.format(".1f"), _pct(e.stalls),
                     e.freezes.format(".1f"), e.bitrate.format(".2f"), e.shown_p95.format(".0f"),
                     "yes" if e.scheme in front else ""])  # fmt: skip
    helped = [e for e in es if e.network is not None]
    for e in [*rest, *sorted(helped, key=lambda e: e.p95.mean)]:
        rank = (f"- (VMAF {e.vmaf.mean - best:+.1f})" if e.network is None
                else f"ref. ({e.network} bottleneck)")  # fmt: skip
        rows.append([rank, f"`{e.scheme}`",
                     e.p95.format(".0f"), e.p99.format(".0f"), e.vmaf.format(".1f"),
                     _pct(e.stalls), e.freezes.format(".1f"), e.bitrate.format(".2f"),
                     e.shown_p95.format(".0f"), "yes" if e.scheme in front else ""])  # fmt: skip
    head = ["rank", "scheme", "all-slot P95 ms", "all-slot P99 ms", "VMAF", "slots > 200 ms",
            "freezes", "bitrate Mbps", "shown P95 ms", "Pareto front"]  # fmt: skip
    return markdown(head, rows)


def _pct(s: Spread) -> str:
    if not math.isfinite(s.mean):
        return "-"
    scaled = Spread(100 * s.mean, 100 * s.half if math.isfinite(s.half) else s.half, s.n)
    return scaled.format(".2f") + "%"


def summary_table(by_family: dict[str, list[Entry]]) -> str:
    """Each scheme's rank in each family (``-`` when not ranked), and on how many fronts."""
    schemes = list(dict.fromkeys(e.scheme for es in by_family.values() for e in es))
    ranks: dict[str, dict[str, str]] = {s: {} for s in schemes}
    helped = {e.scheme for es in by_family.values() for e in es if e.network is not None}
    fronts = dict.fromkeys(schemes, 0)
    for fam, es in by_family.items():
        ranked, _, _ = ranking(es)
        for i, e in enumerate(ranked):
            ranks[e.scheme][fam] = str(i + 1)
        for e in pareto(es):
            fronts[e.scheme] += 1
    fams = list(by_family)

    def key(s: str) -> tuple[float, str]:
        r = [int(ranks[s][f]) for f in fams if f in ranks[s]]
        return (-len(r), sum(r) / len(r) if r else math.inf), s  # type: ignore[return-value]

    rows = [[f"`{s}`" + (" (ref.)" if s in helped else ""),
             *(ranks[s].get(f, "ref." if s in helped else "-") for f in fams),
             "-" if s in helped else str(fronts[s])]
            for s in sorted(schemes, key=lambda s: (s in helped, key(s)))]  # fmt: skip
    return markdown(["scheme", *fams, "Pareto fronts"], rows)


def plot(by_family: dict[str, list[Entry]], out: Path) -> Path:
    from ..plots import plt, save, scheme_color, tidy_log_axis

    fams = list(by_family)
    cols = 3
    rows = math.ceil(len(fams) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.0 * rows), squeeze=False)
    for ax, fam in zip([a for r in axes for a in r], fams):
        es = [e for e in by_family[fam] if math.isfinite(e.p95.mean) and math.isfinite(e.vmaf.mean)]
        for e in es:
            xerr = e.p95.half if math.isfinite(e.p95.half) else 0.0
            yerr = e.vmaf.half if math.isfinite(e.vmaf.half) else 0.0
            ax.errorbar(e.p95.mean, e.vmaf.mean, xerr=xerr, yerr=yerr, fmt="o", ms=5,
                        color=scheme_color(e.scheme), ecolor=scheme_color(e.scheme),
                        elinewidth=0.8, capsize=2, alpha=0.9)  # fmt: skip
            ax.annotate(e.scheme, (e.p95.mean, e.vmaf.mean), fontsize=6.5,
                        xytext=(3, 3), textcoords="offset points")  # fmt: skip
        front = pareto(es)
        for e in es:
            if e.network is not None:
                ax.scatter([e.p95.mean], [e.vmaf.mean], s=90, facecolors="none",
                           edgecolors="0.3", lw=0.8, zorder=3)  # fmt: skip
        ax.plot([e.p95.mean for e in front], [e.vmaf.mean for e in front], "-", color="0.4",
                lw=1, zorder=0, label="Pareto front")  # fmt: skip
        _, _, best = ranking(es)
        if math.isfinite(best):
            ax.axhspan(best - VMAF_MARGIN, best + 0.5, color="#2ca02c", alpha=0.08, lw=0,
                       label=f"within {VMAF_MARGIN:g} VMAF of the best")  # fmt: skip
        ax.set_xscale("log")
        tidy_log_axis(ax.xaxis)
        lo, hi = ax.get_ylim()
        ax.set_ylim(max(lo, 0.0), min(hi, 101.0))
        ax.set_title(fam, fontsize=10)
        ax.set_xlabel("all-slot P95 (ms, log)", fontsize=8)
        ax.set_ylabel("VMAF", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="both", alpha=0.2)
    for ax in [a for r in axes for a in r][len(fams):]:
        ax.set_visible(False)
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.suptitle("All-slot P95 against VMAF per network family (means, 95 % intervals)",
                 fontsize=11)  # fmt: skip
    fig.tight_layout()
    return save(fig, out)


def completeness(plan: dict[str, Any], df: Any) -> str | None:
    """A sentence naming what the plan has that the results do not (``None``: complete)."""
    schemes = [s.get("name") for s in plan.get("schemes", [])]
    traces = [(t.get("label"), t.get("network")) for t in plan.get("traces", [])]
    clips = [c.get("label") for c in plan.get("clips", [])]
    seeds = plan.get("seeds") or [1]
    planned = len(schemes) * len(traces) * len(clips) * len(seeds) - len(plan.get("skipped", []))
    if planned <= 0 or len(df) >= planned:
        return None
    done = df.groupby(df["network"].fillna("all")).size() if "network" in df else {}
    per_run = len(schemes) * len(clips) * len(seeds)
    short = []
    for fam in dict.fromkeys(n or "all" for _, n in traces):
        want = per_run * sum(1 for _, n in traces if (n or "all") == fam)
        have = int(done.get(fam, 0)) if len(done) else 0
        if have < want:
            short.append(f"{fam} {have} of {want}")
    missing_schemes = [s for s in schemes if s not in set(df["scheme"])]
    parts = [f"**Incomplete: {len(df)} of the plan's {planned} runs have finished**"]
    if short:
        parts.append(f"runs per family: {', '.join(short)}")
    if missing_schemes:
        parts.append(f"none yet of {', '.join(f'`{s}`' for s in missing_schemes)}")
    return "; ".join(parts) + (". The families below are ranked on the runs they have; "
                               "rerun the report when the matrix is done.")  # fmt: skip


def write_report(res_dir: Path, report_dir: Path, command: str) -> Path:
    from .. import htmlreport

    res = load(res_dir)
    df = res.table
    if df.empty:
        raise SluiceError(f"no finished runs in {res_dir}")
    missing = [c for c in ("latency_all_ms_p95", "vmaf_mean")
               if c not in df or not df[c].notna().any()]  # fmt: skip
    if missing:
        raise SluiceError(f"{res_dir}: results without {', '.join(missing)} (the leaderboard "
                          "needs clips scored for quality)")  # fmt: skip
    families = list(dict.fromkeys(df["network"].fillna("all")))
    # A scheme is compared in a family only on as many cells as the family's most complete
    # scheme (the plan runs every scheme on every cell; fewer means it has not finished):
    # a mean over two cells is not set against a mean over nine.
    behind: dict[str, list[str]] = {}
    by_family = {}
    for f in families:
        fam_df = df[df["network"].fillna("all") == f]
        counts = fam_df.groupby("scheme").size()
        behind[f] = [f"`{s}` ({n} of {counts.max()})" for s, n in counts.items()
                     if n < counts.max()]  # fmt: skip
        by_family[f] = entries(fam_df[fam_df["scheme"].isin(counts[counts == counts.max()].index)])
    report_dir.mkdir(parents=True, exist_ok=True)
    img = report_dir / "img"
    img.mkdir(exist_ok=True)
    md = report_dir / "leaderboard.md"
    html_out = htmlreport.write_report(res.path, report_dir / "leaderboard.html", command=command)
    plan = res.plan
    cells = df.groupby("scheme").size()
    L = ["# Leaderboard\n"]
    L.append(f"Generated by `{PROG}` from the runs of the plan `{res.name}` "
             f"({len(df)} runs: {len(cells)} schemes, {len(families)} families, "
             f"{df['trace'].nunique()} traces, {df['clip'].nunique()} clips). "
             f"{' '.join(str(plan.get('description', '')).split())} Per family the runs' "
             f"means with intervals (without the ranks), latency CDFs and time series of up to "
             f"six schemes: "
             f"[leaderboard.html]({html_out.name}).\n")  # fmt: skip
    L += provenance(df["git_sha"], command)
    L.append("")
    incomplete = completeness(plan, df)
    if incomplete:
        L.append(incomplete + "\n")
    L.append(prose(REPORT, "how-to-read", margin=f"{VMAF_MARGIN:g}"))
    L.append("## Analysis\n")
    analysis = existing_analysis(md)
    L.append(ANALYSIS_SLOT)
    L.append("## Ranks\n")
    L.append(prose(REPORT, "ranks", margin=f"{VMAF_MARGIN:g}"))
    L.append(summary_table(by_family) + "\n")
    L.append(figure(plot(by_family, img / "leaderboard.png"),
                    "All-slot P95 (log) against VMAF per family, with 95 % intervals, the Pareto "
                    "front, and the band of schemes that are ranked", report_dir))  # fmt: skip
    for fam in families:
        traces = sorted(df[df["network"].fillna("all") == fam]["trace"].unique())
        L.append(f"## {fam}\n")
        L.append(f"Traces: {', '.join(f'`{t}`' for t in traces)}.\n")
        if behind[fam]:
            L.append(f"Not compared yet (fewer cells finished than the others): "
                     f"{', '.join(behind[fam])}.\n")  # fmt: skip
        L.append(family_table(by_family[fam]) + "\n")
    return write_markdown(md, L, analysis)


def main(argv: Sequence[str] | None = None) -> int:
    return matrix_report_main(PROG, __doc__, argv, "results/leaderboard",
                              "leaderboard.md, leaderboard.html and img/", "leaderboard",
                              write_report)


if __name__ == "__main__":
    sys.exit(main())
