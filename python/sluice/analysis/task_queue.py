"""libwebrtc's task-queue pacer runs against per-packet pacing (``docs/results/task-queue.md``).

``python -m sluice.analysis.task_queue RESULTS [--report-dir DIR]`` reads a finished
``sluice matrix experiments/webrtc-task-queue.toml``: each scheme that paces with libwebrtc's
leaky bucket as registered (its pacer woken at every packet's send time, to the microsecond)
and as ``<scheme>-holdback5`` (``pacer.hold_back_window_ms = 5``: the pacer runs when
libwebrtc's task queue would run it), on the same cells. It writes, per scheme, the per-cell
comparison of the two (of the means, per-cell median and spread, cells lower and higher) on
latency, rate and loss, the same per network family, and the all-slot latency CDFs; and where
the plan has ``<scheme>-stamps`` (GCC reading its timestamps at libwebrtc's resolution), that
against the scheme, with and without the task queue. Last, every other scheme's ratio against
the baseline (``webrtc``, or ``--headline-baseline``: ``webrtc-x264`` for the leaderboard's
x264 cells, experiments/leaderboard-task-queue.toml) as registered, against its
``-holdback5`` variant, and with both under the task queue where the scheme has the variant:
how the headlines would move. ``--report-name`` names the report (default ``task-queue``).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import SluiceError
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
from .cells import VERSUS_LEGEND, group_table, paired, slot_latencies, versus_table

PROG = "python -m sluice.analysis.task_queue"
REPORT = "task_queue"  # templates/task_queue.md
#: The report's file name (without .md) unless --report-name says otherwise.
REPORT_NAME = "task-queue"
#: The sweep's suffix for the task-queue variant of a scheme.
SUFFIX = "-holdback5"
#: The suffix of a scheme whose GCC reads its timestamps at libwebrtc's resolution.
STAMPS = "-stamps"
#: What the report compares, as (label, column, kind) for :func:`versus_table`.
METRICS = (
    ("all-slot P95", "latency_all_ms_p95", "ratio"),
    ("shown P50", "latency_ms_p50", "ratio"),
    ("shown P95", "latency_ms_p95", "ratio"),
    ("video Mbps", "video_mbps", "ratio"),
    ("loss %", "loss_pct", "ratio"),
    ("VMAF", "vmaf_mean", "diff"),  # where the runs were scored
)


def pairs(df: Any) -> list[str]:
    """The schemes with runs both as registered and as their task-queue variant."""
    names = set(df["scheme"])
    return [s for s in dict.fromkeys(df["scheme"]) if s + SUFFIX in names]


def stamp_pairs(df: Any) -> list[tuple[str, str]]:
    """(scheme, baseline): each ``<s>-stamps`` against ``<s>``, and with the task queue
    ``<s>-stamps-holdback5`` against ``<s>-holdback5``."""
    names = set(df["scheme"])
    out = []
    for s in dict.fromkeys(df["scheme"]):
        if s + STAMPS in names:
            out.append((s + STAMPS, s))
            if s + STAMPS + SUFFIX in names and s + SUFFIX in names:
                out.append((s + STAMPS + SUFFIX, s + SUFFIX))
    return out


#: What GCC saw, per run (:func:`gcc_signals`): (header, function of the samples, format).
SIGNALS = (
    ("median abs. modified trend",
     lambda s: s["cc_modified_trend"].astype(float).abs().median(), ".2f"),
    ("over-use onsets", lambda s: float(((s["cc_usage"] == "overusing")
                                         & (s["cc_usage"].shift() != "overusing")).sum()), ".1f"),
    ("mean target Mbps", lambda s: s["target_rate_bps"].astype(float).mean() / 1e6, ".2f"),
    ("bottleneck queue P95 ms",
     lambda s: s["queue_delay_us"].astype(float).quantile(0.95) / 1e3, ".0f"),
    ("all-slot P95 ms", None, ".0f"),
)  # fmt: skip


def gcc_signals(df: Any, base: str, families: Sequence[str]) -> str:
    """Markdown: per network family, the median over its cells of what GCC saw in each run
    (:data:`SIGNALS`, from the runs' samples) and the all-slot P95, as registered -> with
    the task queue (the runs without GCC's columns left out); empty when none has them."""
    import numpy as np

    from .. import results

    def per_run(scheme: str, fam: str | None) -> list[list[float]]:
        """The signals of each run of ``scheme`` in family ``fam`` (all: ``None``) that has
        GCC's columns."""
        sub = df[(df["scheme"] == scheme) & ((df["network"] == fam) if fam else True)]
        out = []
        for run_dir, p95 in zip(sub["run_dir"], sub["latency_all_ms_p95"]):
            samples = results.load_run(run_dir).samples
            if "cc_modified_trend" in samples and "cc_usage" in samples:
                out.append([float(f(samples)) if f else float(p95) for _, f, _ in SIGNALS])
        return out

    rows = []
    for fam in [*families, None]:
        a, b = per_run(base, fam), per_run(base + SUFFIX, fam)
        if not a or not b:
            continue
        ma, mb = np.nanmedian(np.array(a), axis=0), np.nanmedian(np.array(b), axis=0)
        rows.append([fam or "all", f"{len(a)} / {len(b)}",
                     *(f"{x:{spec}} -> {y:{spec}}"
                       for x, y, (_, _, spec) in zip(ma, mb, SIGNALS))])  # fmt: skip
    if not rows:
        return ""
    head = ["family", "cells", *(h for h, _, _ in SIGNALS)]
    return markdown(head, rows)


#: The baseline the headlines' table sets every scheme against: the leaderboard's `webrtc`.
HEADLINE_BASE = "webrtc"


def headline_table(df: Any, baseline: str, col: str, groups: Sequence[str]) -> str:
    """Markdown: how each scheme's ratio against ``baseline`` on ``col`` would move if the
    baseline (and the scheme, where it has the variant) ran with the task queue. Per scheme,
    up to three rows: both as registered, the baseline with the task queue, and both with it;
    per group and over all cells, ``of the means (median per cell)``. Empty when the plan
    has no ``baseline`` and ``baseline-holdback5`` both; a row without a shared cell is left
    out, and so are the timestamp variants (``-stamps``), which are not headlines."""
    import math

    def x(v: float) -> str:
        return f"{v:.2f}x" if math.isfinite(v) else "-"

    variant = baseline + SUFFIX
    names = set(df["scheme"])
    if baseline not in names or variant not in names:
        return ""
    schemes = [s for s in dict.fromkeys(df["scheme"]) if s not in (baseline, variant)
               and not s.endswith(SUFFIX) and STAMPS not in s]  # fmt: skip
    head = ["scheme", "against", *groups, "all"]
    rows = []
    for s in schemes:
        ways = [(s, baseline, "both as registered"), (s, variant, "the baseline with it")]
        if s + SUFFIX in names:
            ways.append((s + SUFFIX, variant, "both with it"))
        for name, base, label in ways:
            cells = [paired(sub, name, base, col)
                     for sub in [*(df[df["network"] == g] for g in groups), df]]  # fmt: skip
            if cells[-1].n == 0:
                continue
            rows.append([f"`{name}`", f"`{base}` ({label})",
                         *("-" if p.n == 0 else f"{x(p.of_means)} ({x(p.median)})"
                           for p in cells)])  # fmt: skip
    return markdown(head, rows) if rows else ""


#: A Chromium plan's simulator sides set against Chromium: each as registered and
#: with the task queue.
CHROME_PAIRS = (("sim", "sim-holdback"), ("sim-burst40", "sim-burst40-holdback"))
#: (label, column) compared with Chromium's value, and the tolerance of a match.
CHROME_METRICS = (("video bitrate", "video_bitrate_bps"), ("all-slot P95", "latency_all_ms_p95"),
                  ("receive P95", "receive_all_ms_p95"))  # fmt: skip
CHROME_TOLERANCE = 0.20


def chrome_rows(plan_path: str | Path, results_root: str | Path, csv_path: str | Path,
                progress: bool = True) -> tuple[Any, Any]:  # fmt: skip
    """(every row to compare, the rows this report ran): the Chromium and simulator rows of
    the Chromium report's table (``csv_path``, the plan's `chrome-runs.csv`), and the
    rows of the plan's task-queue sides (:data:`CHROME_PAIRS`) that table lacks, run where
    missing under ``results_root``/<plan's name> (x264 in the simulator; the plan's clip and
    traces must be there)."""
    import pandas as pd

    from .. import results
    from . import chrome

    plan = chrome.load_plan(plan_path)
    root = Path(results_root) / plan["name"]
    try:
        shipped = pd.read_csv(csv_path)
    except (OSError, ValueError) as e:
        raise SluiceError(f"cannot read the Chromium report's table {csv_path}: {e}") from None
    have = set(zip(shipped["trace"], shipped["cap"], shipped["side"]))
    wanted = {side for pair in CHROME_PAIRS for side in pair}
    todo = [c for c in chrome.cells(plan) if c.side in wanted
            and (c.trace_label, c.cap_label, c.side) not in have]  # fmt: skip
    missing = [c for c in todo if not results.is_complete(c.dir(root))]
    new = []
    for c in todo:
        if c in missing:
            if progress:
                print(f"[{missing.index(c) + 1}/{len(missing)}] {plan['name']} {c.trace_label} "
                      f"{c.cap_label} {c.side}", file=sys.stderr)  # fmt: skip
            chrome.run_cell(plan, c, root)
        new.append(chrome.row(plan, c, root))
    ran = pd.DataFrame(new)
    return pd.concat([shipped, ran], ignore_index=True), ran


def chrome_table(rows: Any) -> str:
    """Markdown: per simulator side, in how many cells each metric is within
    :data:`CHROME_TOLERANCE` of Chromium's (the median of its runs of the cell, where a plan
    ran it more than once), and the median absolute log ratio to it."""
    import numpy as np
    import pandas as pd

    columns = [col for _, col in CHROME_METRICS]
    browser = rows[rows["side"] == "chrome"]
    chromium = browser.assign(**{c: pd.to_numeric(browser[c], errors="coerce")
                                 for c in columns}).groupby(["trace", "cap"])[columns].median()
    out = []
    for side in (s for pair in CHROME_PAIRS for s in pair):
        sub = rows[rows["side"] == side].set_index(["trace", "cap"])
        cells = sub.index.intersection(chromium.index)
        if not len(cells):
            continue
        r = [f"`{side}`", str(len(cells))]
        for _, col in CHROME_METRICS:
            q = (sub.loc[cells, col].astype(float) / chromium.loc[cells, col].astype(float))
            q = q[np.isfinite(q) & (q > 0)]
            within = int((np.abs(q - 1) <= CHROME_TOLERANCE).sum())
            r.append(f"{within} of {len(q)}; {float(np.median(np.abs(np.log(q)))):.2f}")
        out.append(r)
    head = ["side", "cells", *(f"{label}: within {CHROME_TOLERANCE:.0%}; median abs. log ratio"
                               for label, _ in CHROME_METRICS)]  # fmt: skip
    return markdown(head, out)


def plot_pairs(df: Any, bases: Sequence[str], out: Path) -> Path:
    """One panel per scheme: the CDF of the all-slot latency of every capture slot of every
    cell, as registered (solid) and with the task queue (dashed), their P95 marked."""
    import math

    import numpy as np

    from ..plots import plt, save, scheme_color, tidy_log_axis

    cols = min(3, len(bases))
    rows = math.ceil(len(bases) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False,
                             layout="constrained", sharey=True)  # fmt: skip
    for ax, base in zip(axes.flat, bases):
        color = scheme_color(base)
        for name, style in ((base, "-"), (base + SUFFIX, "--")):
            lat = slot_latencies(df, name)
            if not lat.size:
                continue
            x = np.sort(np.maximum(lat, 1.0))
            p95 = float(np.percentile(lat, 95))
            ax.plot(x, np.arange(1, x.size + 1) / x.size, style, color=color,
                    label=f"{name} (P95 {p95:.0f} ms)")  # fmt: skip
            ax.axvline(p95, color=color, linestyle=style, alpha=0.4, linewidth=0.8)
        ax.set_xscale("log")
        tidy_log_axis(ax.xaxis)
        ax.set_title(base, fontsize=10)
        ax.grid(True, alpha=0.3, which="both")
        ax.legend(fontsize=7, loc="lower right")
        ax.set_xlabel("all-slot latency (ms)")
    for ax in axes[:, 0]:
        ax.set_ylabel("CDF over slots")
    for ax in list(axes.flat)[len(bases):]:
        ax.set_visible(False)
    return save(fig, out)


def write_report(res_dir: str | Path, report_dir: Path, command: str,
                 args: argparse.Namespace | None = None) -> Path:  # fmt: skip
    given = getattr(args, "report_name", None)
    name = REPORT_NAME if given is None else given
    if (not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", name) or len(name) > 100
            or name.lower().endswith(".md")):  # fmt: skip
        raise SluiceError(f"--report-name {name!r}: a file name of letters, digits, '.', '-' "
                          "and '_', not starting with '.' or '-', without .md")  # fmt: skip
    target = Path(report_dir) / f"{name}.md"
    if target.exists() and f"Generated by `{PROG}`" not in target.read_text(encoding="utf-8"):
        raise SluiceError(f"--report-name {name}: {target} exists and is not this report's "
                          "(choose another name)")  # fmt: skip
    res = load(res_dir)
    df = res.table
    if df.empty:
        raise SluiceError(f"no finished runs in {res_dir}")
    missing = [c for c in ("scheme", "run_dir", "git_sha", "latency_all_ms_p95") if c not in df]
    if missing:
        raise SluiceError(f"{res_dir}: results without {', '.join(missing)} (not a matrix's "
                          "results table)")  # fmt: skip
    if "video_bitrate_bps" in df:
        df = df.assign(video_mbps=df["video_bitrate_bps"] / 1e6)
    if "loss_rate" in df:
        df = df.assign(loss_pct=df["loss_rate"] * 100)
    bases = pairs(df)
    wanted = getattr(args, "headline_baseline", None)
    if wanted and wanted not in bases:
        raise SluiceError(f"--headline-baseline {wanted}: it did not run both as registered and "
                          f"as {wanted}{SUFFIX} in {res_dir} (these did: "
                          f"{', '.join(bases) or 'none'})")  # fmt: skip
    if not bases:
        raise SluiceError(f"{res_dir}: no scheme ran both as registered and as "
                          f"<scheme>{SUFFIX} (run experiments/webrtc-task-queue.toml)")  # fmt: skip
    families = list(dict.fromkeys(df["network"].dropna())) if "network" in df else []
    report_dir.mkdir(parents=True, exist_ok=True)
    img = report_dir / "img"
    img.mkdir(exist_ok=True)
    md = report_dir / f"{name}.md"
    analysis = existing_analysis(md)
    cells = df.groupby("scheme").size()
    L = ["# libwebrtc's task-queue pacer runs against per-packet pacing\n"]
    L.append(f"Generated by `{PROG}` from the runs of the plan `{res.name}` ({len(df)} runs; "
             f"{len(bases)} schemes ran both as registered and with the task queue, on up to "
             f"{cells.max()} cells each). "
             f"{' '.join(str(res.plan.get('description', '')).split())}\n")  # fmt: skip
    L += provenance(df["git_sha"], command)
    L.append("")
    L.append(prose(REPORT, "what", suffix=SUFFIX))
    L.append("## Analysis\n")
    L.append(ANALYSIS_SLOT)
    L.append(figure(plot_pairs(df, bases, img / f"{name}-cdf.png"),
                    "The all-slot latency of every capture slot of every cell, each scheme as "
                    "registered (solid) and with the task queue (dashed); the lines mark the "
                    "P95 over all slots", report_dir))  # fmt: skip
    L.append("## Per scheme\n")
    L.append(VERSUS_LEGEND + f" Here the baseline is each scheme as registered, the scheme its "
             f"`{SUFFIX}` variant.\n")  # fmt: skip
    for s in bases:
        L.append(f"### `{s}`\n")
        L.append(versus_table(df, [s + SUFFIX], s, METRICS) + "\n")
    gcc_base = "webrtc" if "webrtc" in bases else bases[0]
    signals = gcc_signals(df if "network" in df else df.assign(network=None), gcc_base,
                          families)  # fmt: skip
    if signals:
        L.append(f"## What GCC saw: `{gcc_base}`\n")
        L.append(prose(REPORT, "signals", scheme=gcc_base))
        L.append(signals + "\n")
    stamps = stamp_pairs(df)
    if stamps:
        L.append("## GCC's timestamps at libwebrtc's resolution\n")
        L.append(prose(REPORT, "stamps", stamps=STAMPS))
        for s, base in stamps:
            L.append(versus_table(df, [s], base, METRICS) + "\n")
    L.append("## Per network family: all-slot P95\n")
    L.append(prose(REPORT, "families"))
    for s in bases:
        L.append(group_table(df, [s + SUFFIX], s, "latency_all_ms_p95", groups=families) + "\n")
    if "video_bitrate_bps" in df:
        L.append("## Per network family: video bitrate\n")
        for s in bases:
            L.append(group_table(df, [s + SUFFIX], s, "video_bitrate_bps", groups=families)
                     + "\n")  # fmt: skip
    headline_base = getattr(args, "headline_baseline", None) or HEADLINE_BASE
    for label, col in (("all-slot P95", "latency_all_ms_p95"),
                       ("video bitrate", "video_bitrate_bps")):  # fmt: skip
        headline = headline_table(df, headline_base, col, families) if col in df else ""
        if headline:
            if label == "all-slot P95":
                L.append(f"## The headlines against `{headline_base}`\n")
                L.append(prose(REPORT, "headline", base=headline_base, suffix=SUFFIX))
            L.append(f"{label}:\n")
            L.append(headline + "\n")
    chrome_plan = getattr(args, "chrome", None)
    if chrome_plan:
        rows, ran = chrome_rows(chrome_plan, args.results_root, args.chrome_csv)
        ran.to_csv(report_dir / f"{name}-chrome.csv", index=False)
        L.append("## Against Chromium\n")
        L.append(prose(REPORT, "chrome", plan=Path(chrome_plan).name,
                       csv=Path(args.chrome_csv).name, ran=f"{name}-chrome.csv",
                       tolerance=f"{CHROME_TOLERANCE:.0%}"))  # fmt: skip
        L.append(chrome_table(rows) + "\n")
    return write_markdown(md, L, analysis)


def options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--chrome", metavar="PLAN", default=None,
                    help="also set the task-queue sides of this Chromium plan "
                    "(experiments/checks/chrome-pacing.toml) against Chromium's rows of "
                    "--chrome-csv, "
                    "running the missing ones (x264; needs the plan's clip and traces)")
    ap.add_argument("--chrome-csv", metavar="CSV", default="docs/results/chrome-runs.csv",
                    help="the Chromium report's table (default docs/results/chrome-runs.csv)")
    ap.add_argument("--headline-baseline", metavar="SCHEME", default=None,
                    help=f"the scheme the headlines' table sets the others against (default "
                    f"{HEADLINE_BASE}, where it ran both ways); it must have its {SUFFIX} "
                    "variant")  # fmt: skip
    ap.add_argument("--report-name", metavar="NAME", default=REPORT_NAME,
                    help=f"the report's file name without .md (default {REPORT_NAME}; "
                    "its plot and Chromium table take it as their prefix)")
    ap.add_argument("--results-root", metavar="DIR", default="results",
                    help="where the Chromium plan's runs go (default results)")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    return matrix_report_main(PROG, __doc__, argv, "results/webrtc-task-queue",
                              "task-queue.md (or --report-name's), its -chrome.csv and img/",
                              "task-queue-report", write_report, options)


if __name__ == "__main__":
    sys.exit(main())
