"""The result format: header, round trip through load_run, determinism."""

from __future__ import annotations

import json

from sluice import results

# Short runs keep the suite fast; the generated trace needs no data files.
TRACE = "gen:constant:12"
DURATION = "3"


def _run(sluice, out, *extra):
    r = sluice("run", "--trace", TRACE, "--duration", DURATION, "--out", str(out), *extra)
    assert r.code == 0, r.err
    return r


def test_round_trip_and_header(sluice, tmp_path):
    _run(sluice, tmp_path / "a", "--seed", "7", "--queue-bytes", "100000", "--delay-ms", "30")
    lines = (tmp_path / "a" / "run.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    assert list(header) == [
        "record", "schema_version", "sluice_version", "git_sha", "git_dirty", "seed", "scheme",
        "config", "trace", "uplink_trace",
    ]  # fmt: skip
    assert header["record"] == "header"
    assert header["schema_version"] == results.SCHEMA_VERSION
    assert header["seed"] == 7 and header["scheme"] == "webrtc"
    assert header["config"]["seed"] == 7
    assert header["config"]["scheme"] is not None  # resolved composition
    assert header["config"]["downlink"]["queue_bytes"] == 100000
    assert header["config"]["downlink"]["delay_ms"] == 30
    assert header["trace"]["name"] == TRACE
    assert len(header["trace"]["sha256"]) == 64
    assert header["trace"]["mean_rate_bps"] > 11e6
    assert header["uplink_trace"] is None
    kinds = [json.loads(line)["record"] for line in lines[1:]]
    n_frames = kinds.count("frame")
    assert n_frames > 0 and kinds == ["frame"] * n_frames + ["sample"] * (len(kinds) - n_frames)

    run = results.load_run(tmp_path / "a")
    assert run.header == header
    assert len(run.frames) == n_frames
    # The core's record schema fixes the leading columns, in its order.
    cols = results.record_columns()
    assert cols["frame"][:2] == ["frame_id", "source_index"] and "displayed_us" in cols["frame"]
    assert cols["skip"] == ["source_index", "capture_us", "reason"]
    assert list(run.frames.columns[: len(cols["frame"])]) == cols["frame"]
    assert list(run.samples.columns[: len(cols["sample"])]) == cols["sample"]
    assert len(run.samples) == len(kinds) - n_frames
    assert run.frames["latency_us"].dropna().gt(0).all()
    assert set(run.summary["latency_ms"]) >= {"mean", "p50", "p95", "p99", "p999", "max"}
    assert run.summary["frames_sent"] == n_frames


def test_same_seed_is_byte_identical(sluice, tmp_path):
    _run(sluice, tmp_path / "a")
    _run(sluice, tmp_path / "b")
    a = (tmp_path / "a" / "run.jsonl").read_bytes()
    b = (tmp_path / "b" / "run.jsonl").read_bytes()
    assert a == b


def test_json_output_is_the_summary(sluice, tmp_path):
    r = _run(sluice, tmp_path / "a", "--json")
    summary = json.loads(r.out)
    assert summary == json.loads((tmp_path / "a" / "summary.json").read_text())
    assert {"latency_ms", "stall_rate", "fps", "utilization", "bwe_ratio"} <= set(summary)


def test_default_out_dir(sluice, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = sluice("run", "--trace", TRACE, "--duration", DURATION, "--seed", "3")
    assert r.code == 0, r.err
    assert (tmp_path / "results" / "webrtc-gen-constant-12-s3" / "run.jsonl").is_file()
    assert "all-slot P95 ms" in r.out


def test_trace_file_and_scheme_file(sluice, tmp_path):
    trace = tmp_path / "flat.mahi"
    assert sluice("trace", "gen", "constant:12", "--duration", "6", "--out", str(trace)).code == 0
    reg = json.loads(sluice("schemes", "--json").out)
    scheme_file = tmp_path / "mine.json"
    scheme_file.write_text(json.dumps(reg[0]["config"]))
    r = sluice("run", "--scheme-file", str(scheme_file), "--trace", str(trace),
               "--duration", DURATION, "--out", str(tmp_path / "o"))  # fmt: skip
    assert r.code == 0, r.err
    run = results.load_run(tmp_path / "o")
    assert run.scheme == "mine"
    assert run.header["trace"]["name"] == "flat.mahi"
    assert run.header["config"]["scheme"] == reg[0]["config"]


def test_a_new_result_takes_away_an_older_runs_own_files(tmp_path):
    # A live x264 run's files (its counters, the received stream), then a simulated run into
    # the same directory: what the new result lacks is gone, not left beside it.
    header = results.make_header(seed=1, scheme="x", config={"seed": 1}, trace=None,
                                 uplink_trace=None)  # fmt: skip
    extra = {}
    for name in (results.LIVE_FILE, results.RECEIVED_FILE, results.STREAM_FILE):
        extra[name] = results.temp_path(tmp_path / name)
        extra[name].write_text(name)
    results.write_run(tmp_path, header, [], [], {"seed": 1}, extra=extra)
    assert all((tmp_path / name).is_file() for name in extra)
    results.write_run(tmp_path, header, [], [], {"seed": 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        results.MANIFEST_FILE, results.RUN_FILE, results.SUMMARY_FILE
    ]
    assert results.is_complete(tmp_path)


def test_outputs_go_only_into_new_empty_or_sluice_directories(sluice, tmp_path):
    """Issue 30: a result directory is created fresh, empty, or Sluice's own; a result is
    written again into its own directory, but not over a directory of other files."""
    (tmp_path / "empty").mkdir()
    _run(sluice, tmp_path / "empty")
    _run(sluice, tmp_path / "empty", "--seed", "2")  # its own result: written again
    assert results.load_run(tmp_path / "empty").seed == 2
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "summary.json").write_text('{"mine": 1}\n')
    r = sluice("run", "--trace", TRACE, "--duration", DURATION, "--out", str(tmp_path / "theirs"))
    assert r.code == 2 and "not a sluice result directory" in r.err, r.err
    assert (tmp_path / "theirs" / "summary.json").read_text() == '{"mine": 1}\n'
    assert sorted(p.name for p in (tmp_path / "theirs").iterdir()) == ["summary.json"]
    # A compare directory is Sluice's by its runs (and compare.md) the second time.
    for _ in range(2):
        r = sluice("compare", "--schemes", "webrtc", "--trace", TRACE, "--duration", DURATION,
                   "--out", str(tmp_path / "cmp"), "--no-report")  # fmt: skip
        assert r.code == 0, r.err
    assert results.is_own_dir(tmp_path / "cmp") and not results.is_own_dir(tmp_path / "theirs")
    # A folder of someone's files beside an old result is not Sluice's: `--out .` there is
    # refused, for a run as for a compare, and nothing in it changes.
    mine = tmp_path / "mine"
    (mine / "old").mkdir(parents=True)
    (mine / "notes.txt").write_text("hi\n")
    _run(sluice, mine / "old" / "run")
    for cmd in (["run"], ["compare", "--schemes", "webrtc", "--no-report"]):
        r = sluice(*cmd, "--trace", TRACE, "--duration", DURATION, "--out", str(mine))
        assert r.code == 2 and "not a sluice result directory" in r.err, r.err
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt", "old"]
    # A compare whose runs are there but not yet its table and plots (interrupted) is Sluice's.
    for f in (tmp_path / "cmp").iterdir():
        if f.is_file():
            f.unlink()
    assert results.is_own_dir(tmp_path / "cmp") and not results.is_own_dir(tmp_path / "cmp", 0)
    # ... also with the empty directory of a scheme whose run had not begun.
    (tmp_path / "cmp" / "ace").mkdir()
    assert results.is_own_dir(tmp_path / "cmp")
    # The parts of a live session are Sluice's: `live merge --out` their directory is fine.
    (tmp_path / "parts" / "send").mkdir(parents=True)
    (tmp_path / "parts" / "send" / "part.json").write_text("{}")
    assert results.is_own_dir(tmp_path / "parts")
    (tmp_path / "parts" / "theirs").mkdir()
    (tmp_path / "parts" / "theirs" / "notes.txt").write_text("hi\n")
    assert not results.is_own_dir(tmp_path / "parts")


def test_a_run_to_its_default_directory_says_it_replaces_the_one_there(sluice, tmp_path,
                                                                     monkeypatch):  # fmt: skip
    # The default directory is named by scheme, trace and seed only: a second run with other
    # settings replaces the first, and says so.
    monkeypatch.chdir(tmp_path)
    first = sluice("run", "--trace", TRACE, "--duration", DURATION)
    assert first.code == 0 and "replacing" not in first.err, first.err
    again = sluice("run", "--trace", TRACE, "--duration", DURATION, "--set", "cc.pacing_factor=3")
    assert again.code == 0, again.err
    assert "note: replacing the earlier run in results/webrtc-" in again.err
    mine = sluice("run", "--trace", TRACE, "--duration", DURATION, "--out", "kept")
    assert mine.code == 0 and "replacing" not in mine.err


def _compare(sluice, out, schemes, *extra):
    return sluice("compare", "--schemes", schemes, "--trace", TRACE, "--duration", DURATION,
                  "--jobs", "1", "--out", str(out), *extra)  # fmt: skip


def test_a_compare_again_into_its_directory_replaces_the_earlier_one(sluice, tmp_path):
    """A second compare into the same --out: the earlier compare's runs go (said on
    stderr), so its table, report and plots show this compare's runs only; a user's own
    file beside them stays."""
    out = tmp_path / "cmp"
    r = _compare(sluice, out, "webrtc,webrtc-b", "--seeds", "1-2", "--no-report")
    assert r.code == 0, r.err
    (out / "notes.txt").write_text("mine\n")
    r = _compare(sluice, out, "cbr")
    assert r.code == 0, r.err
    assert "replacing the earlier compare" in r.err and "webrtc, webrtc-b" in r.err
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["cbr"]
    assert (out / "notes.txt").read_text() == "mine\n"
    page = (out / "report.html").read_text()
    assert "1 run of 1 scheme." in page and "webrtc-b" not in page
    # The same schemes again: their runs are replaced too, and the earlier page is not left
    # behind by --no-report to mislead.
    r = _compare(sluice, out, "cbr", "--no-report")
    assert r.code == 0 and "(its runs: cbr;" in r.err
    assert not (out / "report.html").exists()


def test_runs_and_compares_do_not_write_into_each_others_directories(sluice, tmp_path):
    """A report or plot of a directory that held a run and a compare would show one of
    them: each refuses the other's directory, and nothing there changes."""
    run_dir, cmp_dir, seeds_dir = tmp_path / "run", tmp_path / "cmp", tmp_path / "seeds"
    _run(sluice, run_dir)
    _run(sluice, seeds_dir, "--seeds", "1,2")
    assert _compare(sluice, cmp_dir, "cbr", "--no-report").code == 0
    before = {p: sorted(x.name for x in p.rglob("*")) for p in (run_dir, cmp_dir, seeds_dir)}
    r = _compare(sluice, run_dir, "cbr")
    assert r.code == 2 and "a run's directory, not a compare's" in r.err, r.err
    r = _compare(sluice, seeds_dir, "cbr")
    assert r.code == 2 and "not of a compare of these schemes (s1, s2)" in r.err, r.err
    for d in (cmp_dir, seeds_dir):
        r = sluice("run", "--trace", TRACE, "--duration", DURATION, "--out", str(d))
        assert r.code == 2 and "holds other runs in its folders" in r.err, r.err
    r = sluice("run", "--trace", TRACE, "--duration", DURATION, "--out", str(run_dir),
               "--seeds", "1,2")  # fmt: skip
    assert r.code == 2 and "holds a single run" in r.err, r.err
    r = sluice("run", "--trace", TRACE, "--duration", DURATION, "--out", str(cmp_dir),
               "--seeds", "1,2")  # fmt: skip
    assert r.code == 2 and "holds other results (cbr)" in r.err, r.err
    assert before == {p: sorted(x.name for x in p.rglob("*")) for p in before}
    # A page of the seeds does not make their directory someone else's: they run again.
    assert sluice("report", str(seeds_dir)).code == 0
    _run(sluice, seeds_dir, "--seeds", "1,2")
    # A run stopped while writing (only its temporary files) is a run to redo, not a
    # stranger's folder.
    stopped = tmp_path / "stopped"
    (stopped / "cbr").mkdir(parents=True)
    (stopped / "cbr" / ".run.jsonl.tmp123").write_text("")
    assert _compare(sluice, stopped, "cbr", "--no-report").code == 0
    assert results.is_run_dir(stopped / "cbr")
    # An interrupted compare (runs, no compare.md yet) of the same schemes is redone.
    for f in results.COMPARE_FILES:
        (cmp_dir / f).unlink(missing_ok=True)
    assert _compare(sluice, cmp_dir, "cbr", "--no-report").code == 0


def test_a_report_made_again_keeps_the_command_that_made_the_runs(sluice, tmp_path):
    out = tmp_path / "cmp"
    assert _compare(sluice, out, "cbr", "--no-report").code == 0
    made = results.made_by(out)
    assert made is not None and made.startswith("sluice compare --schemes cbr --trace")
    assert made.endswith(f"--out {out} --no-report")
    text = (out / "compare.md").read_text()
    assert f"made by: `{made}`" in text and "model encoder, 30 fps" in text
    assert sluice("report", str(out)).code == 0
    page = (out / "report.html").read_text()
    assert f"runs made by: {made}" in page
    assert f"this page made by: sluice report {out}" in page


def test_a_compare_replaces_only_what_the_earlier_compare_wrote(sluice, tmp_path):
    """Only the earlier compare's runs go: a folder of someone's files that happens to hold a
    name Sluice writes (results.csv, events.json), or a plan's results, stays; a run that is
    not the compare's is refused, not deleted; so is a compare.md Sluice did not write; and
    an option refused after the earlier compare was found leaves it whole."""
    out = tmp_path / "cmp"
    assert _compare(sluice, out, "cbr", "--no-report").code == 0
    (out / "analysis").mkdir()
    (out / "analysis" / "results.csv").write_text("a,b\n")
    (out / "analysis" / "thesis.tex").write_text("x\n")
    (out / "paper").mkdir()
    (out / "paper" / "events.json").write_text("{}\n")
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    r = _compare(sluice, out, "cbr", "--address", "h:1")
    assert r.code == 2 and "--backend ray" in r.err and "replacing" not in r.err, r.err
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before
    r = _compare(sluice, out, "webrtc", "--no-report")
    assert r.code == 0 and "(its runs: cbr;" in r.err, r.err
    assert (out / "analysis" / "thesis.tex").is_file() and (out / "paper" / "events.json").is_file()
    assert not (out / "cbr").exists() and results.is_run_dir(out / "webrtc")
    _run(sluice, out / "lone-run")
    r = _compare(sluice, out, "webrtc", "--no-report")
    assert r.code == 2 and "not of a compare of these schemes (lone-run)" in r.err, r.err
    assert results.is_run_dir(out / "lone-run") and results.is_run_dir(out / "webrtc")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "compare.md").write_text("my notes\n")
    r = _compare(sluice, notes, "cbr")
    assert r.code == 2 and "is not a compare of Sluice's" in r.err, r.err
    assert (notes / "compare.md").read_text() == "my notes\n"


def test_a_run_s_page_names_its_command_as_the_command(sluice, tmp_path):
    # Only a compare's page written again names two commands; a run's or a plan's page
    # names the one that made it.
    _run(sluice, tmp_path / "r")
    assert sluice("report", str(tmp_path / "r")).code == 0
    page = (tmp_path / "r" / "report.html").read_text()
    assert f"command: sluice report {tmp_path / 'r'}" in page and "made by" not in page


def test_reorder_ms_is_taken_with_reordering_set_by_path(sluice, tmp_path):
    r = sluice("run", "--trace", TRACE, "--duration", "1", "--reorder-ms", "20", "--set",
               "faults.reorder=0.1", "--out", str(tmp_path / "r"))  # fmt: skip
    assert r.code == 0, r.err
    assert results.read_header(tmp_path / "r")["config"]["faults"]["reorder_delay_ms"] == 20
