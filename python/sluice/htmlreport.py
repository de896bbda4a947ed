"""``sluice report DIR``: one self-contained HTML page for a ``run``, ``compare`` or
``matrix`` output, readable offline (every figure is embedded).

It holds: the table of every scheme (all-slot latency first; means with 95 % intervals over
seeds, and over traces in a matrix), per trace family for a matrix; the latency-quality
scatter per family (all-slot P95 against mean VMAF, or against the video bitrate when no run
was scored), means with their intervals; latency CDFs on a log axis with the tail as a CCDF
(so one outlier cannot squash the rest); time series of rate, target and latency per scheme
(for a matrix, of one cell per family); the settings the schemes differ in that the user did
not choose; and where it came from (git revisions of the runs, the command, the plan).
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import differences, report, results
from .errors import SluiceError, output_file, read_json_object
from .metrics import metric, summary_row
from .spread import spread

REPORT_FILE = "report.html"


# --- what the directory holds -------------------------------------------------------------


#: A run or compare's runs as read for its table: run directory -> (header, summary).
Read = dict[str, tuple[dict[str, Any], dict[str, Any]]]


def _runs_table(d: Path) -> tuple[Any, dict[str, Any], str, Read]:
    """(one row per run: scheme, trace, network, clip, seed, run_dir and the summary's
    metrics; the plan, if any; what the directory is: run, compare or matrix; a run's or
    compare's headers and summaries as read, none for a matrix)."""
    import pandas as pd

    from .experiments import TABLE_CSV, TABLE_PARQUET, read_table
    from .plan import PLAN_FILE

    if (d / TABLE_CSV).is_file() or (d / TABLE_PARQUET).is_file():
        table = read_table(d)
        if "status" in table:
            table = table[table["status"].fillna("done") == "done"]
        if "latency_all_ms_p95" not in table:
            raise SluiceError(f"{d}: its results table has no latency_all_ms_p95 column (no "
                              "finished run, or a table edited by hand)")  # fmt: skip
        plan = {}
        if (d / PLAN_FILE).is_file():
            plan = read_json_object(d / PLAN_FILE, "the plan's copy")
        return table.reset_index(drop=True), plan, "matrix", {}
    if results.is_run_dir(d):
        dirs, kind = [d], "run"
    else:
        dirs = sorted({p.parent for p in d.rglob(results.RUN_FILE)})
        kind = "compare"
    rows = []
    read: Read = {}
    left_out = []
    for rd in dirs:
        why = results.incomplete_reason(rd)
        if why:
            left_out.append(f"{rd} ({why})")
            continue
        h = results.read_header(rd)
        s = read_json_object(rd / results.SUMMARY_FILE, "summary")
        read[str(rd)] = (h, s)
        trace = (h.get("trace") or {}).get("name") or "unlimited"
        rows.append(
            {
                "scheme": h.get("scheme"),
                "trace": trace,
                "network": trace,
                "clip": None,
                "seed": h.get("seed"),
                "run_dir": str(rd),
                **summary_row(s),
            }
        )
    if not rows:
        why = f": {'; '.join(left_out)}" if left_out else ""
        raise SluiceError(f"no finished runs in {d}{why}")
    for what in left_out:  # a run being written, or a damaged one: said, not hidden
        print(f"note: left out {what}", file=sys.stderr)
    df = pd.DataFrame(rows)
    if kind == "compare" and df["trace"].nunique() > 1:
        kind = "runs"  # not one compare: runs on several traces, tabled per trace too
    order = _compare_order(d)
    if order:
        rank = {s: i for i, s in enumerate(order)}
        df = df.sort_values("scheme", key=lambda c: c.map(lambda s: rank.get(s, len(rank))),
                            kind="stable")  # fmt: skip
    return df.reset_index(drop=True), {}, kind, read


def _compare_order(d: Path) -> list[str]:
    """The schemes in the order ``compare`` listed them (its summary.csv), if it did."""
    return list(dict.fromkeys(r["scheme"] for r in results.compare_rows(d)))


# --- figures --------------------------------------------------------------------------------


def _png(fig: Any) -> str:
    from .plots import plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _quality_axis(df: Any) -> tuple[str, str]:
    if "vmaf_mean" in df and df["vmaf_mean"].notna().any():
        return "vmaf_mean", "mean VMAF (as the viewer saw it)"
    return "video_bitrate_bps", "video bitrate (Mbit/s, no quality scores)"


def _legend_beside(n: int) -> tuple[int, float]:
    """A legend of ``n`` entries beside the panels: its columns (one per 24 entries) and the
    figure height (inches) it needs; a plan's sweep can have 40 variants, and a legend
    taller than its figure collapses the layout."""
    cols = max(1, math.ceil(n / 24))
    return cols, 0.19 * math.ceil(n / cols) + 0.8


def fig_tradeoff(df: Any, families: Sequence[str]) -> str:
    """All-slot P95 against quality, per family: means with 95 % intervals, runs faint."""
    from .plots import plt, scheme_color, tidy_log_axis

    y, ylabel = _quality_axis(df)
    scale = 1e-6 if y == "video_bitrate_bps" else 1.0
    n = max(1, len(families))
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    leg_cols, leg_height = _legend_beside(len(dict.fromkeys(df["scheme"])))
    height = max(4.2 * rows, leg_height)
    fig, axes = plt.subplots(
        rows, cols, figsize=(5.2 * cols + 1.8 * leg_cols, height), squeeze=False,
        layout="constrained",
    )
    handles: dict[str, Any] = {}
    for k, fam in enumerate(families):
        ax = axes[k // cols][k % cols]
        sub = df[df["network"] == fam]
        for s in dict.fromkeys(sub["scheme"]):
            r = sub[sub["scheme"] == s]
            xs = r["latency_all_ms_p95"].to_numpy(dtype=float)
            ys = r[y].to_numpy(dtype=float) * scale if y in r else np.full(len(r), np.nan)
            c = scheme_color(s)
            ax.scatter(xs, ys, color=c, alpha=0.2, s=12, lw=0)
            sx, sy = spread(xs), spread(ys)
            if sx.n == 0 or sy.n == 0:
                continue
            lo, hi = log_whisker(sx.mean, sx.half, xs)
            h = ax.errorbar(
                [sx.mean],
                [sy.mean],
                xerr=[[lo], [hi]],
                yerr=[[sy.half if sy.half == sy.half else 0.0]],
                fmt="o",
                color=c,
                mec="k",
                ms=8,
                capsize=3,
                lw=1.2,
                label=s,
            )
            handles.setdefault(s, h)
        ax.set_xscale("log")
        ax.set_xlabel("all-slot P95 latency (ms, log)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{fam} ({len(sub)} runs)", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        # Neither axis goes below what can be (an interval's whisker would take a bitrate
        # below zero), and "better" points only where it is: up-left with VMAF, left only
        # with a bitrate, which is not better or worse by itself.
        low, high = ax.get_ylim()
        ax.set_ylim(max(low, 0.0), min(high, 100.0) if y == "vmaf_mean" else high)
        tidy_log_axis(ax.xaxis)
        ax.annotate(
            "better" if y == "vmaf_mean" else "lower latency",
            xy=(0.05, 0.95 if y == "vmaf_mean" else 0.9),
            xytext=(0.22, 0.78 if y == "vmaf_mean" else 0.9),
            xycoords="axes fraction",
            arrowprops={"arrowstyle": "->", "color": "0.4"},
            fontsize=8,
            color="0.4",
            va="center",
        )
    for k in range(n, rows * cols):
        axes[k // cols][k % cols].set_visible(False)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside right center", fontsize=8,
                   ncols=leg_cols)  # fmt: skip
    return _png(fig)


def log_whisker(mean: float, half: float, runs: np.ndarray) -> tuple[float, float]:
    """(below, above) the mean: an interval's whisker on a log axis. An interval reaching 0
    or below (few runs far apart) would run off the panel; its lower whisker stops at the
    lowest run instead."""
    half = half if math.isfinite(half) else 0.0
    if mean - half > 0:
        return half, half
    return mean - float(np.nanmin(runs)), half


def fig_latency(lat_by_scheme: dict[str, np.ndarray], title: str) -> str:
    """CDF of all-slot latency on a log axis, and its tail as a CCDF (log-log)."""
    from .plots import plt, scheme_color, tidy_log_axis

    # Many schemes (a plan's sweep): the legend beside the panels; inside the left panel it
    # would collapse the layout.
    outside = len(lat_by_scheme) > 12
    leg_cols, leg_height = _legend_beside(len(lat_by_scheme))
    size = (11 + 2.4 * leg_cols, max(4.0, leg_height)) if outside else (11, 4)
    fig, (a, b) = plt.subplots(1, 2, figsize=size, layout="constrained")
    for s, lat in lat_by_scheme.items():
        lat = np.sort(lat[np.isfinite(lat) & (lat > 0)])
        if lat.size == 0:
            continue
        c = scheme_color(s)
        y = np.arange(1, lat.size + 1) / lat.size
        p95 = np.percentile(lat, 95)
        a.step(lat, y, where="post", color=c, lw=1.5, label=f"{s} (P95 {p95:.0f} ms)")
        b.step(lat, np.maximum(1 - y + 1 / lat.size, 1 / lat.size), where="post", color=c, lw=1.5)
    a.set_xscale("log")
    a.set_xlabel("latency over every capture slot (ms, log)")
    a.set_ylabel("fraction of slots")
    a.set_ylim(0, 1.005)
    if outside:
        fig.legend(loc="outside right center", fontsize=7, ncols=leg_cols)
    else:
        a.legend(fontsize=7, loc="lower right")
    b.set_xscale("log")
    b.set_yscale("log")
    b.set_xlabel("latency (ms, log)")
    b.set_ylabel("fraction of slots at or above (log)")
    for ax in (a, b):
        ax.grid(True, which="both", alpha=0.3)
        tidy_log_axis(ax.xaxis)
    tidy_log_axis(b.yaxis)
    fig.suptitle(title, fontsize=10)
    return _png(fig)


def fig_timeseries(run_dirs: Sequence[str]) -> str:
    import tempfile

    from .plots import plot_timeseries

    runs = [results.load_run(d) for d in run_dirs]
    with tempfile.TemporaryDirectory(prefix="sluice-report-") as tmp:
        path = plot_timeseries(runs, Path(tmp) / "timeseries.png")
        return base64.b64encode(path.read_bytes()).decode("ascii")


def _all_slot(run_dirs: Sequence[str]) -> np.ndarray:
    from .analysis.pooled import slot_latencies_ms

    parts = [slot_latencies_ms(results.load_run(d)) for d in run_dirs]
    return np.concatenate(parts) if parts else np.array([])


# --- the page -------------------------------------------------------------------------------

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1400px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 12px; display: block;
        overflow-x: auto; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: right;
         white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
th { background: #f3f3f3; } td.best { font-weight: bold; } td.tie { color: #555; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 12px; }
.note { color: #555; font-size: 12px; } code { background: #f5f5f5; padding: 0 3px; }
"""

#: Marks the page for a test: any script error, or an image that did not load.
CHECK_JS = """
window.addEventListener('error', function (e) {
  document.documentElement.setAttribute('data-error', String(e.message || 'error'));
});
window.addEventListener('load', function () {
  var bad = Array.prototype.filter.call(document.images, function (i) {
    return !(i.complete && i.naturalWidth > 0); }).length;
  document.documentElement.setAttribute('data-images-bad', String(bad));
  document.documentElement.setAttribute('data-loaded', 'yes');
});
"""


def _flows_html(df: Any, names: Sequence[str], read: Read) -> str | None:
    """What each flow at the bottleneck got (:func:`report.flow_rows`), from the summaries
    the table was made from; None without competing flows."""
    if "flows_1_share" not in df:
        return None
    named = [(s, [read[d][1] for d in df.loc[df["scheme"] == s, "run_dir"]]) for s in names]
    table = report.flow_rows(named)
    if table is None:
        return None
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table[0])
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                   for r in table[1])  # fmt: skip
    return (f"<table><tr>{head}</tr>{rows}</table>"
            f"<p class='note'>{html.escape(report.FLOW_LEGEND.replace('`', ''))}</p>")


def _table_html(df: Any, names: Sequence[str]) -> str:
    """The schemes of ``df`` with the table metrics' means and intervals, best bold."""
    metrics = report.metric_names(df.to_dict("records"))
    rows = []
    spreads = {
        s: {m: spread(df.loc[df["scheme"] == s, m]) if m in df else spread([]) for m in metrics}
        for s in names
    }
    css = {"*": "best", "~": "tie"}
    marks = {m: {s: css[k] for s, k in report.best_marks([(s, spreads[s][m]) for s in names],
                                                         m).items()}
             for m in metrics}  # fmt: skip
    head = "".join(
        f"<th>{html.escape(h)}</th>"
        for h in ["scheme", "runs", *(metric(m).header for m in metrics)]
    )
    for s in names:
        n = int((df["scheme"] == s).sum())
        cells = []
        for m in metrics:
            sp = spreads[s][m]
            c = metric(m)
            text = c.format(sp.mean if sp.n else None)
            if sp.n > 1 and sp.half == sp.half:
                text += " ± " + c.format(sp.half)
            mark = marks[m].get(s, "")
            text += " ~" if mark == "tie" else ""
            cells.append(f'<td class="{mark}">{html.escape(text)}</td>')
        rows.append(
            f"<tr><td><code>{html.escape(str(s))}</code></td><td>{n}</td>"
            + "".join(cells)
            + "</tr>"
        )
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _plan_paths(plan: dict[str, Any]) -> list[str]:
    """The config paths a plan sets (``plan.json``): its own ``set``, each scheme's ``set``
    and the paths its sweeps vary. The schemes differ in these because the plan says so."""

    def paths(sets: Any) -> list[str]:
        items = sets.items() if isinstance(sets, dict) else sets or []
        return [str(k[0] if isinstance(k, (list, tuple)) else k) for k in items]

    out = paths(plan.get("set"))
    for s in plan.get("schemes") or []:
        if isinstance(s, dict):
            out += paths(s.get("set"))
            sweep = s.get("sweep")
            if isinstance(sweep, (list, tuple)) and sweep:
                out.append(str(sweep[0]))
    return list(dict.fromkeys(out))


def _diff_html(df: Any, names: Sequence[str], chosen: Sequence[str]) -> str:
    configs = []
    for s in names:
        d = df.loc[df["scheme"] == s, "run_dir"].iloc[0]
        configs.append((s, results.read_header(d).get("config") or {}))
    diffs = differences.differences(configs, chosen)
    if not diffs:
        return (
            "<p>Beyond their own components (pacer, congestion controller, encoder "
            "controller), the schemes differ in none of the settings Sluice watches (frame "
            "dropping, pacing factor or gain, feedback interval, encoder and its preset, "
            "bottleneck behaviour).</p>"
        )
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ["setting", *names])
    rows = "".join(
        "<tr>"
        + f"<td>{html.escape(label)}</td>"
        + "".join(f"<td>{html.escape(v)}</td>" for v in vals)
        + "</tr>"
        for label, vals in diffs
    )
    return (
        "<p>Settings the schemes differ in that you did not choose; each can move the "
        "numbers as much as the schemes themselves:</p>"
        f"<table><tr>{head}</tr>{rows}</table>"
    )


def _figure(data: str, caption: str) -> str:
    return (
        f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def write_report(
    d: str | Path,
    out: str | Path | None = None,
    command: str | None = None,
    max_timeseries: int = 6,
) -> Path:
    """Writes the page for directory ``d`` to ``out`` (default ``d/report.html``)."""
    d = Path(d)
    if d.exists() and not d.is_dir():
        raise SluiceError(f"{d} is a file: give a result directory (a run, compare or plan's)")
    if not d.is_dir():
        raise SluiceError(f"no such directory: {d}")
    df, plan, kind, read = _runs_table(d)
    if df.empty:
        raise SluiceError(f"no finished runs in {d}")
    names = list(dict.fromkeys(df["scheme"]))
    parents = {s.get("name"): s.get("parent") for s in plan.get("schemes") or []
               if isinstance(s, dict)}  # fmt: skip
    from .plots import family_palette

    with family_palette(names, parents):
        return _write_report(d, out, command, max_timeseries, df, plan, kind, names, read)


def _write_report(d: Path, out: str | Path | None, command: str | None, max_timeseries: int,
                  df: Any, plan: dict[str, Any], kind: str, names: list[str],
                  read: Read) -> Path:  # fmt: skip
    # A plan's trace without a network (its "-") is a family of its own, named by its label.
    network = df["network"].fillna("all")
    if "trace" in df:
        network = network.where(network != "-", df["trace"])
    df = df.assign(network=network)
    families = list(dict.fromkeys(df["network"]))
    shas = sorted({str(results.read_header(r).get("git_sha", "?"))[:12] for r in df["run_dir"]})
    title = plan.get("name") or d.name
    parts = [f"<h1>Sluice {kind}: {html.escape(str(title))}</h1>"]
    if plan.get("description"):
        parts.append(f"<p>{html.escape(' '.join(str(plan['description']).split()))}</p>")
    by_family = kind in ("matrix", "runs")
    word = ("trace family", "trace families") if kind == "matrix" else ("trace", "traces")
    legend = report.legend_of(report.metric_names(df.to_dict("records")), bold=True)
    parts.append(
        f"<p class='note'>{len(df)} run{'s' * (len(df) != 1)} of {len(names)} "
        f"scheme{'s' * (len(names) != 1)}"
        + (f" on {len(families)} {word[len(families) > 1]}" if by_family else "")
        + f". {html.escape(legend)}</p>"
    )
    is_live = [(Path(r) / results.LIVE_FILE).is_file() for r in df["run_dir"]]
    live = [r for r, x in zip(df["run_dir"], is_live) if x]
    if live:  # a live run's numbers come from a real-time session, not the simulator
        both = df.assign(live=is_live).groupby("scheme")["live"].nunique()
        mixed = bool((both > 1).any())  # a scheme whose rows pool live and simulated runs
        parts.append(
            f"<p class='note'>{len(live)} of the {len(df)} runs ran live, in real time over "
            "UDP (<code>live.json</code> beside them)"
            + ("; the others in the simulator, and a scheme's rows pool both" if mixed else "")
            + ".</p>"
        )
    if kind in ("run", "compare"):  # one network: said in a line, as compare.md does
        first = read[df["run_dir"].iloc[0]][0]
        cfg = first.get("config") or {}
        if isinstance(cfg.get("downlink"), dict):
            trace = (first.get("trace") or {}).get("name") or cfg["downlink"].get("trace")
            parts.append(f"<p>Network: {html.escape(str(trace or 'no trace'))}, "
                         f"{float(cfg.get('duration_s', 0)):g} s, "
                         f"{html.escape(report.network_words(cfg))}.</p>")  # fmt: skip
    if kind == "compare":  # one row a scheme, its runs the seeds
        named = [(s, df[df["scheme"] == s].drop(columns=["run_dir", "seed"], errors="ignore")
                  .to_dict("records"))
                 for s in names]  # fmt: skip
        for note in report.seed_notes(named):
            parts.append(f"<p class='note'>Note: {html.escape(note)}.</p>")
    durations = sorted(set(df["duration_s"].dropna())) if "duration_s" in df else []
    if len(durations) > 1:
        parts.append(
            "<p class='note'><b>These runs differ in duration</b> ("
            + ", ".join(f"{x:g} s" for x in durations)
            + "): the tables pool them as they are.</p>"
        )
    traces = df["trace"].nunique() if "trace" in df else 1
    if kind == "runs" or (kind == "matrix" and traces > 1):
        per = "trace" if kind == "runs" else "trace family"
        follows = f"; one table per {per} follows" if len(families) > 1 else ""
        parts.append(
            f"<p class='note'><b>These runs are on {traces} traces</b>: the first table pools "
            f"them (its intervals span the traces, not only seeds, and mostly overlap){follows}."
            "</p>"
        )

    parts.append("<h2>All runs</h2>" + _table_html(df, names))
    # One network's flows (a run's, a compare's): a matrix's traces may each have others.
    flows = _flows_html(df, names, read) if kind in ("run", "compare") else None
    if flows:
        parts.append("<h2>The flows at the bottleneck</h2>" + flows)
    if by_family and len(families) > 1:
        for fam in families:
            parts.append(
                f"<h2>{html.escape(str(fam))}</h2>"
                + _table_html(
                    df[df["network"] == fam],
                    [s for s in names if (df[df["network"] == fam]["scheme"] == s).any()],
                )
            )
    y, _ = _quality_axis(df)
    parts.append(
        "<h2>Latency against quality</h2>"
        + _figure(
            fig_tradeoff(df, families),
            f"All-slot P95 against {'mean VMAF' if y == 'vmaf_mean' else 'video bitrate'} per "
            "trace family: each scheme's mean over its runs with its 95 % interval; faint: runs",
        )
    )
    lat = {s: _all_slot(df.loc[df["scheme"] == s, "run_dir"].tolist()) for s in names}
    parts.append(
        "<h2>Latency distributions</h2>"
        + _figure(
            fig_latency(lat, "Latency over every capture slot, all runs pooled"),
            "Left: CDF on a log axis; right: the tail, the share of slots at or above a latency",
        )
    )
    for fam in families if by_family else [None]:
        sub = df if fam is None else df[df["network"] == fam]
        first = sub.iloc[0]
        cell = sub
        for k in ("trace", "clip", "seed"):
            if k in sub and first.get(k) is not None and first.get(k) == first.get(k):
                cell = cell[cell[k] == first[k]]
        dirs = cell.drop_duplicates("scheme")["run_dir"].tolist()[:max_timeseries]
        parts.append(
            f"<h2>Time series{': ' + html.escape(str(fam)) if fam else ''}</h2>"
            + _figure(
                fig_timeseries(dirs),
                "Rate (capacity, target, delivered), queue and pacer delay, frame latency; "
                f"{'one cell: ' + str(first.get('trace')) if by_family else 'first seed'}",
            )
        )
    chosen = _plan_paths(plan)
    parts.append("<h2>Settings that differ</h2>" + _diff_html(df, names, chosen))
    prov = [
        f"runs made at git {', '.join(shas)}",
        f"written {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"git of this report: {results.git_info()[0][:12]}",
    ]
    made = results.made_by(d)
    again = made is not None and made != command  # a compare's page written again
    if again:
        prov.append(f"runs made by: {made}")
    if command:
        prov.append(f"{'this page made by' if again else 'command'}: {command}")
    if plan:
        prov.append(
            "plan: "
            + json.dumps({k: plan[k] for k in plan if k not in ("description",)}, default=str)[
                :2000
            ]
        )
    parts.append(
        "<h2>Provenance</h2><ul>"
        + "".join(f"<li><code>{html.escape(p)}</code></li>" for p in prov)
        + "</ul>"
    )
    page = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>Sluice: {html.escape(str(title))}</title><style>{CSS}</style>"
        f"<script>{CHECK_JS}</script></head><body>" + "".join(parts) + "</body></html>"
    )
    path = output_file(Path(out) if out else d / REPORT_FILE, "report file")
    try:  # as plot --out does: a new folder for the page is made
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SluiceError(f"cannot create the folder of {path}: {e.strerror or e}") from None
    results.write_text(path, page)  # a full disk: one line naming the file
    return path
