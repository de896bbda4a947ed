"""`sluice compare --seeds` and `sluice report`: tables lead with the all-slot latency and
carry 95 % intervals; the HTML page is self-contained and renders in Chromium without an
error."""

from __future__ import annotations

import re
import subprocess

from sluice.browser import chromium
from sluice.cli import main as cli


def render(page) -> str:
    """The page's DOM after Chromium loaded it (its own script marks errors and images)."""
    out = subprocess.run(
        [chromium.executable(), "--headless=new", "--no-sandbox", "--disable-gpu",
         "--virtual-time-budget=5000", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return out.stdout


def test_compare_with_seeds_writes_intervals_and_a_report_that_renders(tmp_path, capsys):
    out = tmp_path / "cmp"
    rc = cli(["compare", "--schemes", "webrtc,vidaptive,ace", "--encoder", "model", "--trace",
              "gen:steps:12@6,2@6", "--duration", "12", "--seeds", "1-3", "--jobs", "2",
              "--out", str(out)])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    said = capsys.readouterr().out
    md = (out / "compare.md").read_text()
    head = next(ln for ln in md.splitlines() if ln.startswith("| scheme"))
    # The P95 column is the all-slot one, first; values carry intervals over 3 seeds.
    cols = [c.strip() for c in head.strip("|").split("|")]
    assert cols[:4] == ["scheme", "runs", "all-slot P95 ms", "all-slot P99 ms"], cols
    assert re.search(r"\| vidaptive \| 3 \| (\*\*)?[\d.]+ ± [\d.]+", md), md
    assert "seeds 1, 2, 3" in md
    assert "flows at the bottleneck" not in md  # no competing flow: no flows table
    # Where the displayed frames wait: per stage, a P95 with its interval over the seeds.
    assert "| scheme | encode P95 ms | pacer P95 ms | network P95 ms | to display P95 ms |" in md
    assert re.search(r"\| webrtc \| [\d.]+ ± [\d.]+ \| [\d.]+ ± [\d.]+ \|", md), md
    # webrtc drops frames, the others do not: said, in the table and on the terminal.
    assert "frame dropper (libwebrtc)" in md and "note: the schemes also differ" in said
    assert (out / "webrtc" / "s2" / "run.jsonl").is_file()
    # The CDF is of every capture slot, as the table: its P95 is the summary's all-slot one
    # (it drew the displayed frames only, a lower curve than the table's numbers).
    import numpy as np
    from sluice import plots, results

    run = results.load_run(out / "vidaptive" / "s1")
    drawn = []
    real = plots.cdf_line
    plots.cdf_line = lambda ax, lat, *a: (drawn.append(lat), real(ax, lat, *a))
    try:
        plots.plot_latency_cdf([run], out / "cdf-check.png")
    finally:
        plots.cdf_line = real
    want = run.summary["latency_all_ms"]["p95"]
    assert abs(float(np.percentile(drawn[0], 95)) - want) < 1e-6, (drawn[0][:5], want)
    dom = render(out / "report.html")
    assert 'data-loaded="yes"' in dom and 'data-images-bad="0"' in dom, dom[:300]
    assert 'data-error="' not in dom.split("<head>")[0]
    assert dom.count("<img") >= 3 and "all-slot P95" in dom
    # sluice report rewrites it, for a single run too.
    assert cli(["report", str(out / "ace" / "s1")]) == 0
    assert 'data-images-bad="0"' in render(out / "ace" / "s1" / "report.html")
    # --out in a folder that does not exist yet makes it, as plot --out does.
    assert cli(["report", str(out), "--out", str(tmp_path / "new" / "dir" / "r.html")]) == 0
    assert (tmp_path / "new" / "dir" / "r.html").stat().st_size > 1000


def test_frame_drop_alike_removes_the_difference(tmp_path, capsys):
    out = tmp_path / "cmp"
    rc = cli(["compare", "--schemes", "webrtc,webrtc-b", "--encoder", "model", "--trace",
              "gen:constant:6", "--duration", "4", "--frame-drop", "off", "--no-report",
              "--out", str(out)])  # fmt: skip
    assert rc == 0
    md = (out / "compare.md").read_text()
    said = capsys.readouterr().out
    assert "frame dropper" not in md and "frame dropper" not in said
    # What is left: webrtc-b paces at 2.5x GCC's target (ACE's WebRTC-B), webrtc at 1.1x.
    assert "GCC pacing factor" in md and "GCC pacing factor" in said


def test_differences_name_the_parameters_of_shared_components():
    # ace-n is ACE-N on a GCC with a 200 ms trendline window, webrtc's has 20 packets: the
    # table left that out, and a window that moves ACE-N's tail was credited to its pacer.
    # The feedback interval read "-" where the run used 50 ms (the scheme leaves it to the
    # run's default); a GCC parameter beside Copa is not a setting: the CC is the choice.
    from sluice import config, differences

    def cfg(s, *overrides):
        return config.apply_overrides(dict(config.default_config(), scheme_name=s), overrides)

    rows = dict(differences.differences([("webrtc", cfg("webrtc")), ("ace-n", cfg("ace-n"))]))
    assert rows["cc.trendline_window"] == ["packets count 20", "time window_ms 200"], rows
    rows = dict(differences.differences([("copa", cfg("copa")), ("webrtc", cfg("webrtc"))]))
    assert rows["feedback interval ms"] == ["10", "50"], rows
    assert "GCC pacing factor" not in rows and "Copa pacing gain" not in rows, rows
    # A third scheme with another CC keeps the row; its own cell is "-" (GCC's window is
    # not a setting of Copa). A bad header's component (a list) is no crash.
    three = [(s, cfg(s)) for s in ("webrtc", "ace-n", "copa")]
    rows = dict(differences.differences(three))
    assert rows["cc.trendline_window"] == ["packets count 20", "time window_ms 200", "-"], rows
    assert differences.differences([("a", {"scheme": {"cc": [1]}}), ("b", cfg("webrtc"))])
    assert differences._show(1234567.0) != differences._show(1234568.0)
    # Chosen by the user (--set cc.trendline_window=...): not listed.
    same = [("webrtc", cfg("webrtc")), ("ace-n", cfg("ace-n"))]
    assert "cc.trendline_window" not in dict(differences.differences(same, ["cc"]))


def test_figures_of_a_plan_with_many_schemes_keep_their_layout():
    # A sweep plan has dozens of scheme variants (experiments/cortv.toml: 36): the legends go
    # beside the panels and the figures grow for them; before, matplotlib's constrained
    # layout collapsed the latency figure (a warning, and the panels drawn without layout).
    import warnings

    import numpy as np
    import pandas as pd
    from sluice import htmlreport

    rng = np.random.default_rng(1)
    names = [f"variant-{k}" for k in range(40)]
    lat = {s: rng.lognormal(4.5, 1.0, 2000) for s in names}
    df = pd.DataFrame([{"scheme": s, "network": fam, "latency_all_ms_p95": float(v[0]),
                        "video_bitrate_bps": 2e6} for s, v in lat.items()
                       for fam in ("5G", "4G", "Wi-Fi", "synthetic")])  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for png in (htmlreport.fig_latency(lat, "many"),
                    htmlreport.fig_tradeoff(df, ["5G", "4G", "Wi-Fi", "synthetic"])):  # fmt: skip
            assert len(png) > 10_000


def test_log_axes_are_readable_and_whiskers_stay_on_them():
    """A narrow log axis (a plan's schemes within a few ms of each other) gets plain-number
    ticks, not matplotlib's labelled minor ticks that run into each other; an interval that
    reaches below zero on a log axis stops at the lowest run."""
    import math

    import numpy as np
    from sluice import htmlreport
    from sluice.plots import plt, tidy_log_axis

    # Within one decade, 1-2-3-5 ticks: evenly spaced ones (4000, 8000, 12000, 16000) crowd
    # at the top of a log axis (the Co-RTV report's 5G panel ran 12000 into 16000).
    for lo, hi, shown in ((205.5, 208.3, None), (20.0, 300.0, {"20", "50", "100", "200"}),
                          (2700.0, 17000.0, {"3000", "5000", "10000"})):  # fmt: skip
        fig, ax = plt.subplots()
        ax.plot([lo, hi], [0, 1])
        ax.set_xscale("log")
        tidy_log_axis(ax.xaxis)
        fig.canvas.draw()
        left, right = ax.get_xlim()
        major = [t.get_text() for t in ax.get_xticklabels()
                 if t.get_text() and left <= t.get_position()[0] <= right]  # fmt: skip
        minor = [t.get_text() for t in ax.get_xticklabels(minor=True) if t.get_text()]
        plt.close(fig)
        assert not minor and major, (minor, major)
        assert all(float(t) > 0 for t in major), major  # plain numbers, not 2.055x10^2
        if shown:
            assert shown == set(major), major
    assert htmlreport.log_whisker(100.0, 20.0, np.array([80.0, 120.0])) == (20.0, 20.0)
    below, above = htmlreport.log_whisker(100.0, 150.0, np.array([30.0, 170.0]))
    assert (below, above) == (70.0, 150.0) and 100.0 - below > 0
    assert htmlreport.log_whisker(100.0, math.nan, np.array([100.0])) == (0.0, 0.0)


def test_the_delivered_rate_stands_apart_from_a_dark_schemes_target(tmp_path, capsys,
                                                                    monkeypatch):
    """`combined` is drawn in black: its target line was lost under the black delivered
    line."""
    from matplotlib.colors import to_hex
    from matplotlib.figure import Figure
    from sluice import plots, results

    drawn: dict[str, dict[str, str]] = {}
    real = Figure.savefig

    def keep(fig, *a, **k):
        drawn[str(a[0])] = {ln.get_label(): to_hex(ln.get_color())
                            for ln in fig.axes[0].get_lines()}  # fmt: skip
        return real(fig, *a, **k)

    monkeypatch.setattr(Figure, "savefig", keep)
    for scheme in ("combined", "fdcc", "webrtc"):
        out = tmp_path / scheme
        assert cli(["run", "--scheme", scheme, "--trace", "gen:constant:5", "--duration", "1",
                    "--out", str(out)]) == 0  # fmt: skip
        png = tmp_path / f"{scheme}.png"
        plots.plot_timeseries([results.load_run(out)], png)
        lines = drawn[str(png)]
        assert lines["target"] == plots.scheme_color(scheme)
        assert lines["target"] != lines["delivered"], (scheme, lines)
    assert drawn[str(tmp_path / "webrtc.png")]["delivered"] == "#000000"


def test_plot_titles_say_only_what_every_run_shares():
    """A title gave the first run's queue for every run (a live run without a queue limit
    was titled with the simulated run's 100000 B)."""
    from types import SimpleNamespace

    from sluice import plots

    def run(queue, seed=1, trace="t"):
        return SimpleNamespace(trace_name=trace, seed=seed, config={
            "downlink": {"delay_ms": 20, "queue_bytes": queue, "loss": 0}})  # fmt: skip

    same = plots._title([run(100_000), run(100_000)], "CDF")
    assert "queue 100000 B" in same and "20 ms one-way" in same
    mixed = plots._title([run(100_000), run(None, trace="u" * 120)], "CDF", width=60)
    assert "queue differs" in mixed and "100000" not in mixed and "20 ms one-way" in mixed
    assert all(len(line) <= 60 for line in mixed.splitlines())
    assert plots.scheme_color("chrome") != plots.scheme_color("webrtc")


def test_two_runs_of_one_scheme_are_drawn_apart():
    from types import SimpleNamespace

    from sluice import plots

    names = ("webrtc", "webrtc", "ace", "chrome", "chrome", "mine", "mine", "mine",
             "combined", "combined", "combined")  # fmt: skip
    colors = plots.scheme_colors([SimpleNamespace(scheme=s) for s in names])
    assert colors[0] == plots.scheme_color("webrtc") and colors[2] == plots.scheme_color("ace")
    assert len(set(colors)) == len(colors), colors
    # A scheme's shades keep its hue (a scheme file's too, not a hue of their own).
    import colorsys

    from matplotlib.colors import to_rgb

    hues = {round(colorsys.rgb_to_hls(*to_rgb(c))[0], 2) for c in colors[5:8]}
    assert len(hues) == 1, colors[5:8]


def test_a_plans_own_settings_are_not_listed_as_unchosen():
    # The matrix report listed a variant's own set (vbv_buffer_ms) and a sweep's path under
    # "settings that differ, which you did not choose": chosen were the plan's top-level
    # set only.
    from sluice import htmlreport

    plan = {"set": [["duration_s", 2]], "schemes": [
        {"name": "webrtc", "set": [], "sweep": None},
        {"name": "webrtc-P2.5", "set": [], "sweep": ["cc.pacing_factor", 2.5]},
        {"name": "webrtc-vbv1", "set": [["encoder_controller.vbv_buffer_ms", 100]],
         "sweep": None}]}  # fmt: skip
    assert htmlreport._plan_paths(plan) == ["duration_s", "cc.pacing_factor",
                                            "encoder_controller.vbv_buffer_ms"]  # fmt: skip


def test_a_report_says_its_path_faults_and_which_runs_were_live(tmp_path):
    # A live run's page did not say it was live, nor the network line its faults; two runs,
    # one live, one simulated, were pooled as "2 runs of 1 scheme" without a word.
    out = tmp_path / "r"
    assert cli(["run", "--trace", "gen:constant:6", "--duration", "2", "--set",
                "faults.duplicate=0.05", "--set", "faults.feedback_blackout_s=[1,1.5]",
                "--out", str(out)]) == 0  # fmt: skip
    assert cli(["report", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert "path faults: duplicate 0.05, feedback blackout 1-1.5 s" in page
    assert "ran live" not in page
    (out / "live.json").write_text("{}")  # what a live run leaves beside its results
    assert cli(["report", str(out)]) == 0
    assert "1 of the 1 runs ran live" in (out / "report.html").read_text()
