"""``sluice compare`` / ``plot`` outputs and ``sluice trace gen`` / ``info``."""

from __future__ import annotations

import csv
import json

# Short runs keep the suite fast; the generated trace needs no data files.
TRACE = "gen:constant:12"
DURATION = "3"


def test_compare_writes_table_and_plots(sluice, tmp_path):
    out = tmp_path / "cmp"
    r = sluice("compare", "--schemes", "webrtc,always-burst", "--trace", TRACE,
               "--duration", DURATION, "--queue-bytes", "100000", "--jobs", "2",
               "--out", str(out))  # fmt: skip
    assert r.code == 0, r.err
    for name in ("compare.md", "summary.csv", "latency_cdf.png", "timeseries.png"):
        assert (out / name).is_file(), name
        assert (out / name).stat().st_size > 0, name
    for name in ("latency_cdf.png", "timeseries.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "compare.md").read_text()
    assert "| webrtc |" in md and "| always-burst |" in md
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [row["scheme"] for row in rows] == ["webrtc", "always-burst"]
    assert [row["seed"] for row in rows] == ["1", "1"]
    assert rows[1]["run_dir"].endswith("always-burst")
    assert float(rows[0]["latency_ms_p95"]) > 0
    assert (out / "webrtc" / "run.jsonl").is_file()
    assert "webrtc" in r.out and "latency_cdf.png" in r.out

    # Plots can be redrawn from the saved results alone.
    (out / "latency_cdf.png").unlink()
    r = sluice("plot", str(out), "--log-x")
    assert r.code == 0, r.err
    assert (out / "latency_cdf.png").is_file()
    r = sluice("plot", str(out / "webrtc"), "--out", str(tmp_path / "single"))
    assert r.code == 0, r.err
    assert (tmp_path / "single" / "timeseries.png").is_file()


def test_report_says_which_run_it_left_out_and_reads_a_damaged_table_in_one_line(sluice,
                                                                                   tmp_path):
    out = tmp_path / "cmp"
    r = sluice("compare", "--schemes", "webrtc,always-burst", "--trace", TRACE,
               "--duration", "1", "--no-report", "--out", str(out))  # fmt: skip
    assert r.code == 0, r.err
    # One run damaged after the fact: the report is of the other, and says so.
    with open(out / "always-burst" / "run.jsonl", "a") as f:
        f.write("junk\n")
    r = sluice("report", str(out))
    assert r.code == 0, r.err
    assert "note: left out" in r.err and "always-burst" in r.err and "manifest" in r.err, r.err
    # compare's summary.csv saved by a spreadsheet in another encoding.
    (out / "summary.csv").write_bytes("scheme,seed\nwebrtc,\xe9\n".encode("cp1252"))
    r = sluice("report", str(out), "--out", str(tmp_path / "r.html"))
    assert r.code == 2 and "summary.csv" in r.err and "Traceback" not in r.err, r.err
    # Both runs damaged: the error says why, not only that there is nothing.
    (out / "summary.csv").unlink()
    with open(out / "webrtc" / "run.jsonl", "a") as f:
        f.write("junk\n")
    r = sluice("report", str(out), "--out", str(tmp_path / "r.html"))
    assert r.code == 2 and "no finished runs" in r.err and "manifest" in r.err, r.err


def test_compare_with_seeds_says_which_run_is_which(sluice, tmp_path, monkeypatch):
    from sluice import plots, results

    out = tmp_path / "cmp"
    r = sluice("compare", "--schemes", "webrtc,always-burst", "--trace", TRACE,
               "--duration", "1", "--seeds", "2,1", "--jobs", "2", "--no-report",
               "--out", str(out))  # fmt: skip
    assert r.code == 0, r.err
    rows = list(csv.DictReader((out / "summary.csv").open()))
    got = [(row["scheme"], row["seed"], row["run_dir"]) for row in rows]
    assert got == [(s, str(k), f"{s}/s{k}") for s in ("webrtc", "always-burst")
                   for k in (2, 1)]  # fmt: skip
    # compare drew each scheme's first seed given (2); `plot` of the directory draws the same.
    drawn = []
    real = plots.plot_runs

    def spy(runs, *a, **k):
        drawn.extend(runs)
        return real(runs, *a, **k)

    monkeypatch.setattr(plots, "plot_runs", spy)
    r = sluice("plot", str(out))
    assert r.code == 0, r.err
    assert sorted((x.scheme, x.seed) for x in drawn) == [("always-burst", 2), ("webrtc", 2)]
    assert (out / "latency_cdf.png").is_file()

    runs = [results.load_run(out / "webrtc" / f"s{k}") for k in (1, 2)]
    assert plots._title(runs[:1], "CDF").endswith(", seed 1)")
    assert plots._title(runs, "CDF").endswith(", seeds 1, 2)")


def test_trace_gen_and_info(sluice, tmp_path):
    f = tmp_path / "c12.mahi"
    r = sluice("trace", "gen", "constant:12", "--duration", "10", "--out", str(f))
    assert r.code == 0, r.err
    lines = f.read_text().split()
    assert all(x.isdigit() for x in lines)
    assert len(lines) == 10_000  # 12 Mbit/s = one 1500-byte opportunity per ms
    r = sluice("trace", "info", str(f))
    assert r.code == 0, r.err
    assert "mean rate: 12." in r.out and "period:    10.000 s" in r.out
    info = json.loads(sluice("trace", "info", str(f), "--json").out)
    assert info["format"] == "mahimahi"
    # 10,000 opportunities in 10 s; the core may count 1500 or 1504 bytes per opportunity.
    assert abs(info["mean_rate_mbps"] - 12) < 0.1
    assert abs(info["min_1s_mbps"] - 12) < 0.1 and abs(info["max_1s_mbps"] - 12) < 0.1
    # A file of one opportunity at 1 s: one per second, in its one bin as in its mean.
    (tmp_path / "one.mahi").write_text("1000\n")
    info = json.loads(sluice("trace", "info", str(tmp_path / "one.mahi"), "--json").out)
    assert info["min_1s_mbps"] == info["max_1s_mbps"] == info["mean_rate_mbps"] > 0


def test_trace_info_rate_series_and_comments(sluice, tmp_path):
    rate = tmp_path / "series.log"
    rate.write_text("# time_s rate_mbps\n0 6\n1 6\n2 6\n3 6\n")
    r = sluice("trace", "info", str(rate), "--json")
    assert r.code == 0, r.err
    assert '"format": "rate"' in r.out
    mahi = tmp_path / "commented.mahi"
    mahi.write_text("# header comment\n1\n2\n\n3\n4\n")
    r = sluice("trace", "info", str(mahi))
    assert r.code == 0, r.err
    assert "(mahimahi)" in r.out
    # An explicit format overrides detection.
    r = sluice("trace", "info", str(rate), "--trace-format", "mahimahi")
    assert r.code == 2 and f"{rate}:2" in r.err


def test_generated_trace_to_stdout(sluice):
    r = sluice("trace", "gen", "constant:1.2", "--duration", "1")
    assert r.code == 0, r.err
    assert len(r.out.split()) == 100


def test_schemes_lists_registry(sluice):
    from sluice import _core

    registry = [entry["name"] for entry in json.loads(_core.schemes_json())]
    r = sluice("schemes")
    assert r.code == 0
    names = [line.split()[0] for line in r.out.splitlines() if line.strip()]
    # Every registered scheme once, in the registry's order; names others rely on are there.
    assert [n for n in names if n in registry] == registry
    for name in ("webrtc", "webrtc-b", "always-burst", "cbr", "ace-n", "ace-c", "ace", "copa"):
        assert name in registry
    listed = json.loads(sluice("schemes", "--json").out)
    assert [entry["name"] for entry in listed] == registry



def test_table_marks_and_counts_read_as_printed():
    from sluice import report

    def runs(freezes, p5):
        return [{"freeze_count": f, "vmaf_mean": 90.0, "vmaf_p5": p5} for f in freezes]

    # A mean of counts keeps its half (0.5 freezes is not 0), and a best mark is given only
    # where the printed values differ; a value that prints as the best's shares its mark.
    named = [("a", runs([0, 1], 99.181)), ("b", runs([2, 2], 99.179)), ("c", runs([3, 3], 98))]
    head, body = report.rows(named, markdown_marks=True)
    freezes = [r[head.index("freezes")] for r in body]
    assert freezes[0] == "**0.5 ± 6.4**" and freezes[1:] == ["2 ± 0 ~", "3 ± 0 ~"]
    p5 = [r[head.index("VMAF p5")] for r in body]
    assert p5 == ["**99.18 ± 0.00**", "**99.18 ± 0.00**", "98.00 ± 0.00"]
    head, body = report.rows(named)
    assert [r[head.index("VMAF p5")] for r in body] == [
        "99.18 ± 0.00 *", "99.18 ± 0.00 *", "98.00 ± 0.00"]
    same = [("a", runs([0], 99.181)), ("b", runs([0], 99.179))]
    head, body = report.rows(same, markdown_marks=True)
    assert [r[head.index("VMAF p5")] for r in body] == ["99.18", "99.18"]


def test_seeds_that_gave_the_same_run_are_said_to():
    """With nothing drawing on the seed (x264 with modelled encode times on a constant trace),
    every seed gives the same run: its "± 0" would read as a tight interval."""
    from sluice import report

    run = {"latency_all_ms": {"p95": 80.0}, "fps": 30.0}
    other = {"latency_all_ms": {"p95": 90.0}, "fps": 30.0}
    note = report.identical_seeds_note([("a", [run, dict(run)]), ("b", [run, other]),
                                        ("c", [run])])  # fmt: skip
    assert note.startswith("every seed of a gave the same run") and " b" not in note
    assert report.identical_seeds_note([("b", [run, other]), ("c", run)]) == ""


def test_rows_of_two_runs_are_said_to_have_an_interval_too_wide_to_read():
    from sluice import report
    from sluice.spread import spread

    def run(p95: float) -> dict:
        return {"latency_all_ms": {"p95": p95}, "fps": 30.0}

    named = [("a", [run(80), run(90)]), ("b", [run(80), run(85), run(90)]), ("c", [run(1)])]
    note = report.two_runs_note(named)
    assert note.startswith("a has two runs: a 95 % interval from two runs is 12.7 times")
    # Identical runs have their own note (their "± 0" is no spread at all).
    assert report.two_runs_note([("d", [run(80), run(80)])]) == ""
    assert report.two_runs_note(named + [("e", named[0][1])]).startswith(
        "a, e have two runs each")
    assert report.seed_notes(named) == [note]
    assert report.two_runs_note([("b", named[1][1])]) == ""
    # The 12.7 it names is the interval the table prints.
    assert abs(spread([80.0, 90.0]).half - 12.706 * 5) < 0.01



def test_the_time_series_show_at_most_twelve_runs_and_say_so(tmp_path, monkeypatch, capsys):
    # `sluice plot` of a folder of 17 runs drew a 9000 px wide figure, one column a run.
    from types import SimpleNamespace

    from sluice import plots

    seen: dict[str, int] = {}

    def drawn(what):
        def draw(runs, path, **_):
            seen[what] = len(runs)
            return path
        return draw

    monkeypatch.setattr(plots, "plot_latency_cdf", drawn("cdf"))
    monkeypatch.setattr(plots, "plot_timeseries", drawn("ts"))
    runs = [SimpleNamespace(scheme=f"s{i}") for i in range(17)]
    plots.plot_runs(runs, tmp_path)
    assert seen == {"cdf": 17, "ts": 12} and plots.MAX_TIMESERIES_RUNS == 12
    assert "first 12 of 17 runs" in capsys.readouterr().err
    plots.plot_runs(runs[:3], tmp_path)
    assert seen == {"cdf": 3, "ts": 3} and "first" not in capsys.readouterr().err


def test_an_override_that_changes_a_component_is_noted(sluice, tmp_path):
    # `--set pacer.kind=ace-n` runs ACE-N's pacer under webrtc's name: every table says
    # webrtc. Said once, with the way to name the composition; a parameter is not a change.
    base = ["run", "--trace", "gen:constant:6", "--duration", "2"]
    r = sluice(*base, "--set", "pacer.kind=ace-n", "--out", str(tmp_path / "a"))
    assert r.code == 0, r.err
    assert "changed webrtc's components (pacer leaky-bucket -> ace-n)" in r.err, r.err
    assert "--scheme-file" in r.err
    r = sluice(*base, "--set", "pacer.burst_interval_ms=40", "--out", str(tmp_path / "b"))
    assert r.code == 0 and "changed" not in r.err, r.err
