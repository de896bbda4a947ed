"""The paper reports refuse results they cannot report (none of their schemes, no quality
scores) in one line, before writing anything: a page of dashes, or a leaderboard ranked on
NaN, under a header naming a plan the runs did not come from, misleads."""

from __future__ import annotations

import pytest
from sluice.analysis import leaderboard, mae, vidaptive


@pytest.fixture(scope="module")
def other_results(tmp_path_factory):
    from sluice.cli import main

    root = tmp_path_factory.mktemp("other")
    plan = root / "other.toml"
    plan.write_text('name = "other"\n[set]\nduration_s = 1\n[[scheme]]\nname = "cbr"\n'
                    '[[trace]]\npath = "gen:constant:5"\nnetwork = "synthetic"\n')  # fmt: skip
    assert main(["matrix", str(plan), "--jobs", "1", "--results", str(root / "results")]) == 0
    return root / "results" / "other"


@pytest.mark.parametrize("report, needle", [
    (mae, "no runs of this report's schemes"),
    (vidaptive, "no runs of this report's schemes"),
    (leaderboard, "results without vmaf_mean"),
])  # fmt: skip
def test_a_report_without_what_it_reads_is_one_line(report, needle, other_results, tmp_path,
                                                    capsys):
    capsys.readouterr()
    out = tmp_path / "rep"
    assert report.main([str(other_results), "--report-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert not out.exists()


def test_report_headers_say_how_quality_was_scored():
    from sluice.analysis import quality_words

    assert quality_words("none") == "quality none (not scored)"
    assert quality_words(None) == quality_words("fast")
    assert "every 5th slot" in quality_words("fast") and "every slot" in quality_words("full")


def test_the_chrome_report_given_a_directory_asks_for_the_plan(tmp_path, capsys):
    from sluice.analysis import chrome

    assert chrome.main([str(tmp_path), "--report-dir", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a directory: give the plan file" in err[0], err


def test_the_chrome_reports_plan_may_leave_the_live_side_out(tmp_path, capsys):
    from sluice.analysis import chrome

    base = ('name = "p"\n[video]\npath = "clip.mp4"\n[[cap]]\nlabel = "c"\nkbps = 2500\n'
            '[[trace]]\nlabel = "t"\npath = "gen:constant:6"\n')
    plan = tmp_path / "p.toml"
    plan.write_text(base)
    assert chrome.sides(chrome.load_plan(plan)) == ("sim", "live", "chrome")
    plan.write_text("live = false\n" + base)
    assert chrome.sides(chrome.load_plan(plan)) == ("sim", "chrome")
    plan.write_text('live = "no"\n' + base)
    assert chrome.main([str(plan), "--report-only", "--report-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "live is true or false" in err[0], err
    # Chromium's cells may run more than once; the simulator's (deterministic) once. --help
    # lists the plan's keys.
    with pytest.raises(SystemExit):
        chrome.main(["--help"])
    assert "chrome_repeats" in capsys.readouterr().out
    plan.write_text("chrome_repeats = 3\n" + base)
    cells = chrome.cells(chrome.load_plan(plan))
    assert [(c.side, c.rep) for c in cells] == [("sim", 1), ("live", 1), ("chrome", 1),
                                                ("chrome", 2), ("chrome", 3)]  # fmt: skip
    assert [c.dir(tmp_path).name for c in cells[2:]] == ["chrome", "chrome-run2", "chrome-run3"]
    for bad in ("0", "2.5", '"3"', "true"):
        plan.write_text(f"chrome_repeats = {bad}\n" + base)
        assert chrome.main([str(plan), "--report-only", "--report-dir", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "chrome_repeats is a whole number of runs" in err[0], err


def test_a_reports_folder_that_is_a_file_is_one_line(tmp_path, capsys):
    from sluice.analysis import ace

    (tmp_path / "res").mkdir()
    (tmp_path / "res" / "results.csv").write_text("scheme,trace,network,seed,run_dir\n")
    afile = tmp_path / "afile"
    afile.write_text("x")
    for target in (afile, afile / "below"):
        assert ace.main([str(tmp_path / "res"), "--report-dir", str(target)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{afile} is a file, not a folder" in err[0], err
    assert afile.read_text() == "x"
