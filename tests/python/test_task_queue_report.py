"""The task-queue report (``python -m sluice.analysis.task_queue``): it pairs each scheme
with its ``-holdback5`` variant cell by cell, and refuses results without such a pair."""

from __future__ import annotations

from pathlib import Path

import pytest
from sluice.analysis import task_queue
from sluice.plan import load_plan

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_plan_sweeps_what_the_report_pairs():
    plan = load_plan(REPO / "experiments" / "webrtc-task-queue.toml")
    names = {c.scheme for c in plan.cells()}
    assert "webrtc" in names and "webrtc" + task_queue.SUFFIX in names


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    from sluice.cli import main

    root = tmp_path_factory.mktemp("tq")
    plan = root / "tq.toml"
    plan.write_text('name = "tq"\nseeds = [1, 2]\n[set]\nduration_s = 4\n'
                    '[[scheme]]\nname = "webrtc"\n[[scheme]]\nname = "always-burst"\n'
                    '[[scheme]]\nname = "webrtc-burst40"\n'
                    '[[scheme]]\nname = "webrtc-stamps"\nbase = "webrtc"\n'
                    'set = { "cc.send_time_resolution_us" = 1000 }\n'
                    '[[trace]]\npath = "gen:constant:6"\nnetwork = "flat"\n'
                    '[[trace]]\npath = "gen:steps:6@2,2@2"\nlabel = "step"\nnetwork = "steps"\n'
                    '[[sweep]]\npath = "pacer.hold_back_window_ms"\nvalues = [0, 5]\n'
                    'schemes = ["webrtc", "webrtc-stamps", "webrtc-burst40"]\n'
                    'label = "holdback"\n')  # fmt: skip
    assert main(["matrix", str(plan), "--jobs", "1", "--no-report",
                 "--results", str(root / "results")]) == 0  # fmt: skip
    return root / "results" / "tq"


def test_the_report_pairs_each_scheme_with_its_task_queue_variant(matrix, tmp_path, capsys):
    out = tmp_path / "rep"
    assert task_queue.main([str(matrix), "--report-dir", str(out)]) == 0
    text = (out / "task-queue.md").read_text(encoding="utf-8")
    assert "### `webrtc`" in text and "`webrtc-holdback5`" in text
    # always-burst has no variant: it is not compared.
    assert "always-burst" not in text.split("## Per scheme")[1].split("## The headlines")[0]
    # Two seeds on two traces: four cells per comparison, two per family.
    assert "| `webrtc-holdback5` | all-slot P95 | 4 |" in text
    assert "of 2)" in text
    assert (out / "img" / "task-queue-cdf.png").stat().st_size > 10_000
    # What GCC saw, from the runs' samples: one row for the plan's family and one for all.
    saw = text.split("## What GCC saw: `webrtc`")[1].split("## GCC's timestamps")[0]
    assert "| flat | 2 / 2 |" in saw and "| all | 4 / 4 |" in saw and " -> " in saw
    # The timestamps' section: each against the same scheme with exact timestamps.
    stamps = text.split("## GCC's timestamps")[1].split("## Per network family")[0]
    assert "| `webrtc-stamps` | all-slot P95 | 4 |" in stamps
    assert "| `webrtc-stamps-holdback5` | all-slot P95 | 4 |" in stamps
    assert "`webrtc-holdback5` mean" in stamps


def test_results_without_a_pair_are_refused_in_one_line(matrix, tmp_path, capsys):
    import shutil

    only = tmp_path / "only"
    shutil.copytree(matrix, only)
    csv = only / "results.csv"
    lines = csv.read_text(encoding="utf-8").splitlines()
    csv.write_text("\n".join([lines[0], *(x for x in lines[1:] if "holdback5" not in x)]) + "\n",
                   encoding="utf-8")  # fmt: skip
    capsys.readouterr()
    assert task_queue.main([str(only), "--report-dir", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no scheme ran both" in err[0], err
    assert not (tmp_path / "rep").exists()


def test_a_table_without_a_column_it_needs_is_one_line(matrix, tmp_path, capsys):
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(matrix, bare)
    csv = bare / "results.csv"
    rows = [line.split(",") for line in csv.read_text(encoding="utf-8").splitlines()]
    keep = [i for i, name in enumerate(rows[0]) if name not in ("git_sha", "loss_rate")]
    csv.write_text("\n".join(",".join(r[i] for i in keep) for r in rows) + "\n",
                   encoding="utf-8")  # fmt: skip
    capsys.readouterr()
    assert task_queue.main([str(bare), "--report-dir", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "results without git_sha" in err[0], err


def test_the_task_queue_sides_are_set_against_chromium(matrix, tmp_path, capsys):
    # A Chromium plan of one short cell on a shipped clip, and a Chromium report's table with
    # its Chromium and registered rows: the report runs the two task-queue sides and counts
    # the cells within 20 % of Chromium.
    import pandas as pd

    plan = tmp_path / "chrome.toml"
    plan.write_text(
        'name = "chrome-mini"\nseed = 1\nduration_s = 2\ndelay_ms = 20\nqueue_bytes = 150000\n'
        f'[video]\npath = "{REPO}/data/videos/bbb-intro_1280x720_24fps_10s.mp4"\n'
        'width = 320\nfps = 24\n[[cap]]\nlabel = "cap2.5"\nkbps = 2500\n'
        '[[trace]]\nlabel = "c6"\npath = "gen:constant:6"\n'
        '[[variant]]\nlabel = "sim-burst40"\nscheme = "webrtc-burst40"\n'
        '[[variant]]\nlabel = "sim-holdback"\nscheme = "webrtc"\n'
        'set = { "pacer.hold_back_window_ms" = 5 }\n'
        '[[variant]]\nlabel = "sim-burst40-holdback"\nscheme = "webrtc-burst40"\n'
        'set = { "pacer.hold_back_window_ms" = 5 }\n', encoding="utf-8")
    row = {"trace": "c6", "cap": "cap2.5", "video_bitrate_bps": 1e6,
           "latency_all_ms_p95": 100.0, "receive_all_ms_p95": 90.0}  # fmt: skip
    csv = tmp_path / "chrome-runs.csv"
    # Three Chromium runs of the cell: compared with their median (the first run's values).
    runs = [{**row, "side": "chrome", "rep": 1},
            {**row, "side": "chrome", "rep": 2, "video_bitrate_bps": 0.5e6},
            {**row, "side": "chrome", "rep": 3, "video_bitrate_bps": 3e6,
             "latency_all_ms_p95": 400.0, "receive_all_ms_p95": 300.0}]  # fmt: skip
    pd.DataFrame(runs + [{**row, "side": s, "rep": 1} for s in ("sim", "sim-burst40")]).to_csv(csv)
    out = tmp_path / "rep"
    assert task_queue.main([str(matrix), "--report-dir", str(out), "--chrome", str(plan),
                            "--chrome-csv", str(csv),
                            "--results-root", str(tmp_path / "res")]) == 0  # fmt: skip
    text = (out / "task-queue.md").read_text(encoding="utf-8")
    against = text.split("## Against Chromium")[1]
    # The registered sides equal Chromium's row here: every metric within 20 %.
    assert "| `sim` | 1 | 1 of 1; 0.00 | 1 of 1; 0.00 | 1 of 1; 0.00 |" in against
    ran = pd.read_csv(out / "task-queue-chrome.csv")
    assert sorted(ran["side"]) == ["sim-burst40-holdback", "sim-holdback"]
    assert "`sim-holdback` | 1 |" in against
    header = (tmp_path / "res" / "chrome-mini" / "c6" / "cap2.5" / "sim-holdback")
    from sluice import results

    cfg = results.read_header(header)["config"]
    assert cfg["scheme"]["pacer"]["hold_back_window_ms"] == 5


def test_the_headlines_table_sets_each_scheme_against_webrtc_both_ways(matrix, tmp_path):
    import numpy as np
    import pandas as pd

    out = tmp_path / "rep"
    assert task_queue.main([str(matrix), "--report-dir", str(out)]) == 0
    text = (out / "task-queue.md").read_text(encoding="utf-8")
    section = text.split("## The headlines against `webrtc`")[1].split("\n## ")[0]
    df = pd.read_csv(matrix / "results.csv")
    for label, col in (("all-slot P95:", "latency_all_ms_p95"),
                       ("video bitrate:", "video_bitrate_bps")):  # fmt: skip
        table = section.split(label)[1].split("\n\n", 2)[1]
        rows = [r.strip("|").split(" | ") for r in table.splitlines() if r.startswith("| `")]
        # always-burst (no pacer of its own to switch): as registered and against the baseline
        # with the task queue; webrtc-burst40 also both with it; webrtc's stamps are no headline.
        assert [r[:2] for r in rows] == [
            [" `always-burst`", "`webrtc` (both as registered)"],
            [" `always-burst`", "`webrtc-holdback5` (the baseline with it)"],
            [" `webrtc-burst40`", "`webrtc` (both as registered)"],
            [" `webrtc-burst40`", "`webrtc-holdback5` (the baseline with it)"],
            [" `webrtc-burst40-holdback5`", "`webrtc-holdback5` (both with it)"],
        ], rows
        # Each family's cell and all cells', of the means (per-cell median), from results.csv.
        for r in rows:
            scheme, base = r[0].strip(" `"), r[1].split("`")[1]
            for network, got in zip(["flat", "steps", None], r[2:]):
                sub = df if network is None else df[df["network"] == network]
                a = sub[sub["scheme"] == scheme].set_index(["trace", "seed"])[col]
                b = sub[sub["scheme"] == base].set_index(["trace", "seed"])[col]
                want = f"{a.mean() / b.mean():.2f}x ({np.median(a / b.loc[a.index]):.2f}x)"
                assert got.strip() == want, (label, scheme, base, network, got, want)


def test_report_name_names_the_report_and_its_plot(matrix, tmp_path):
    out = tmp_path / "rep"
    assert task_queue.main([str(matrix), "--report-dir", str(out),
                            "--report-name", "task-queue-x264"]) == 0  # fmt: skip
    text = (out / "task-queue-x264.md").read_text(encoding="utf-8")
    assert not (out / "task-queue.md").exists()
    assert "(img/task-queue-x264-cdf.png)" in text
    assert (out / "img" / "task-queue-x264-cdf.png").stat().st_size > 10_000


def test_a_report_name_that_is_not_a_file_name_is_one_line(matrix, tmp_path, capsys):
    capsys.readouterr()
    for bad in ("../escape", ".hidden", "a/b", "", "x.md", "-x"):
        assert task_queue.main([str(matrix), "--report-dir", str(tmp_path / "rep"),
                                f"--report-name={bad}"]) == 2  # fmt: skip
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--report-name" in err[0], (bad, err)
    assert not (tmp_path / "rep").exists()
    # Another report of the same name is not overwritten.
    other = tmp_path / "docs"
    other.mkdir()
    (other / "leaderboard.md").write_text("# Leaderboard\n", encoding="utf-8")
    assert task_queue.main([str(matrix), "--report-dir", str(other),
                            "--report-name", "leaderboard"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not this report's" in err[0], err
    assert (other / "leaderboard.md").read_text(encoding="utf-8") == "# Leaderboard\n"
    assert not (other / "img").exists()


def test_the_headlines_baseline_can_be_another_scheme_run_both_ways(matrix, tmp_path, capsys):
    out = tmp_path / "rep"
    assert task_queue.main([str(matrix), "--report-dir", str(out),
                            "--headline-baseline", "webrtc-burst40"]) == 0  # fmt: skip
    text = (out / "task-queue.md").read_text(encoding="utf-8")
    section = text.split("## The headlines against `webrtc-burst40`")[1].split("video bitrate:")[0]
    rows = [r.split(" | ")[:2] for r in section.splitlines() if r.startswith("| `")]
    assert rows == [
        ["| `webrtc`", "`webrtc-burst40` (both as registered)"],
        ["| `webrtc`", "`webrtc-burst40-holdback5` (the baseline with it)"],
        ["| `webrtc-holdback5`", "`webrtc-burst40-holdback5` (both with it)"],
        ["| `always-burst`", "`webrtc-burst40` (both as registered)"],
        ["| `always-burst`", "`webrtc-burst40-holdback5` (the baseline with it)"],
    ], rows
    # A baseline without its task-queue variant is refused in one line.
    capsys.readouterr()
    assert task_queue.main([str(matrix), "--report-dir", str(tmp_path / "rep2"),
                            "--headline-baseline", "always-burst"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "always-burst" in err[0] and "webrtc-burst40" in err[0], err
    assert not (tmp_path / "rep2").exists()
