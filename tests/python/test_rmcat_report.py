"""The RMCAT suite's report (``python -m sluice.analysis.rmcat``): every plan of
``experiments/rmcat/`` loads, and the report's checks read the runs they are given (two
cases run short, so the test is fast)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from sluice import results
from sluice.analysis import rmcat
from sluice.plan import load_plan

REPO = Path(__file__).resolve().parents[2]
PLANS = sorted((REPO / "experiments" / "rmcat").glob("*.toml"))


def test_every_case_has_a_plan_and_every_plan_loads():
    cases = {c.plan for c in rmcat.ALL} | {c.reference for c in rmcat.ALL if c.reference}
    assert cases == {load_plan(p).name for p in PLANS}


def test_a_run_shorter_than_its_case_is_not_judged(sluice, tmp_path):
    # The report knows each case's length from its plan; a run cut short (its windows are
    # not all there) is "short" with the reason, not a FAIL on NaN, nor the "n/a" of a
    # scheme that cannot run the case.
    plans = [load_plan(p) for p in PLANS if "reference" not in p.stem]
    assert rmcat.DURATION_S == {p.name: dict(p.overrides)["duration_s"] for p in plans}
    out = tmp_path / "r"
    r = sluice("run", "--trace", "gen:constant:2", "--duration", "5", "--out", str(out))
    assert r.code == 0, r.err
    case = next(c for c in rmcat.ALL if c.plan == "rmcat-5.8")
    got = rmcat._judge(case, results.load_run(out))
    assert got == (None, "not judged: the run is 5 s, the case 120 s")
    assert rmcat._verdict(got) == "short"
    assert rmcat._verdict(None) == "n/a"


def test_jain_index_of_the_report():
    assert rmcat._jain([1.0, 1.0]) == 1.0
    assert rmcat._jain([3.0, 1.0]) == pytest.approx(0.8)
    assert math.isnan(rmcat._jain([]))


def test_the_long_tcp_check_reads_the_media_share(sluice, tmp_path):
    # §5.6 shortened: webrtc against CUBIC from 60 s, on 2 Mbps with a 75 kB queue.
    out = tmp_path / "r"
    r = sluice("run", "--trace", "gen:constant:2", "--queue-bytes", "75000", "--delay-ms", "50",
               "--duration", "100", "--competing", "tcp:cubic@60-240", "--competing", "audio",
               "--out", str(out))  # fmt: skip
    assert r.code == 0, r.err
    run = results.load_run(out)
    ok, text = rmcat._check_56(run)
    # RFC 8867's audio beside the video: what the report says of it is its flows entry.
    audio = run.summary["flows"][2]
    assert (audio["kind"], audio["scheme"]) == ("audio", "cbr")
    assert audio["mean_rate_bps"] == pytest.approx(36_000, rel=0.02)
    said = rmcat._audio(run)
    assert said == (f"audio: queue P95 {audio['queue_delay_ms_p95']:.0f} ms, "
                    f"loss {100 * audio['loss_rate']:.1f} %")  # fmt: skip
    assert rmcat._audio(results.load_run(out)) and audio["queue_delay_ms_p95"] > 10
    # The media's share over 70-100 s: GCC backs off against CUBIC (the full-length case
    # gives 8 %; here the media has 30 s of it).
    share = float(text.split("media share ")[1].split()[0])
    assert 0.0 < share < 0.5, text
    assert ok == (share >= 0.2)


def test_the_bidirectional_check_compares_with_the_reference(sluice, tmp_path):
    # §5.3 shortened: a webrtc flow each way, 2 Mbps forward and 1 Mbps back; the reference
    # is the forward flow alone with the backward path unimpaired.
    common = ["--trace", "gen:constant:2", "--queue-bytes", "75000", "--delay-ms", "50",
              "--duration", "30"]  # fmt: skip
    out, ref_out = tmp_path / "r", tmp_path / "ref"
    r = sluice("run", *common, "--uplink-trace", "gen:constant:1", "--set",
               "uplink.queue_bytes=40000", "--competing", "reverse-media:self",
               "--out", str(out))  # fmt: skip
    assert r.code == 0, r.err
    assert sluice("run", *common, "--out", str(ref_out)).code == 0
    run, ref = results.load_run(out), results.load_run(ref_out)
    assert [f["kind"] for f in run.summary["flows"]] == ["media", "reverse-media"]
    ok, text = rmcat._check_53(run, ref)
    use = float(text.split("backward: link use ")[1])
    # The backward flow's bytes over the uplink's mean capacity (1 Mbps).
    assert use == pytest.approx(run.summary["flows"][1]["mean_rate_bps"] / 1e6, abs=0.01)
    assert 0.5 <= use <= 1.0, text
    ratio = float(text.split("forward: ")[1].split()[0])
    assert 0.5 < ratio <= 1.2, text
    p95, ref_p95 = run.summary["latency_ms"]["p95"], ref.summary["latency_ms"]["p95"]
    assert f"P95 {p95:.0f} ms (reference {ref_p95:.0f} ms)" in text
    assert ok == (ratio >= 0.8 and p95 <= ref_p95 + 100 and use >= 0.5)
    # Without a reference run the case fails and says why.
    assert rmcat._check_53(run, None) == (False, f"no reference run; backward: link use {use:.2f}")


def test_the_two_bottleneck_check_counts_every_flow_that_crosses_each():
    # §6.3's plan: flow 0 crosses both bottlenecks, competing flow k by its `crosses`
    # (first by default); the audio flows use the bottlenecks too.
    class Run:
        header = {"config": {"competing": [
            {"spec": "media:self", "access_delay_ms": 20.0},
            {"spec": "media:self", "crosses": "second"},
            {"spec": "audio", "crosses": "both"}, "audio",
            {"spec": "audio", "crosses": "second"}]}}  # fmt: skip

    assert rmcat._crossings(Run()) == {0: (1, 2), 1: (1,), 2: (2,), 3: (1, 2), 4: (1,), 5: (2,)}


def test_the_two_flow_case_judges_adaptation_as_well_as_sharing(sluice, tmp_path):
    # §5.2 shortened: two ACE flows share fairly but keep the 150 kB buffer full after the
    # drop to 1 Mbps: Jain's index alone would pass them, §5.1's queueing threshold does not.
    out = tmp_path / "r"
    r = sluice("run", "--scheme", "ace", "--encoder", "model", "--trace",
               "gen:steps:4@10,1@15", "--delay-ms", "50", "--queue-bytes", "150000",
               "--competing", "media:self", "--duration", "25", "--out", str(out))  # fmt: skip
    assert r.code == 0, r.err
    run = results.load_run(out)
    s = run.summary
    case = next(c for c in rmcat.ALL if c.plan == "rmcat-5.2")
    ok, text = case.check(run)
    assert rmcat._check_jain(10.0, "two flows")(run)[0]
    assert not ok and s["queue_delay_ms_p95"] > 150
    assert text.endswith(f"queue P95 {s['queue_delay_ms_p95']:.0f} ms")
    # What the viewer saw is said beside every case's numbers.
    assert rmcat._viewer(run) == (f"video: all-slot P95 {s['latency_all_ms']['p95']:.0f} ms, "
                                  f"frozen {s['total_freezes_duration_s']:.1f} s")  # fmt: skip


def test_a_run_without_samples_or_shown_frames_is_judged_not_crashed_on():
    # A NaN in a summary is written as null: the checks read it as NaN (a FAIL), not a crash.
    run = results.Run(path=Path("r"), header={"config": {}}, summary={
        "duration_s": 125.0, "latency_all_ms": {"p95": None}, "queue_delay_ms_p95": None,
        "total_freezes_duration_s": None, "utilization": None,
    }, frames=None, samples=None)  # fmt: skip
    assert rmcat._viewer(run) == "video: all-slot P95 nan ms, frozen nan s"
    assert rmcat._check_51(run) == (False, "utilisation nan, queue P95 nan ms")


def test_the_analyses_write_beside_their_results_unless_told_where(monkeypatch, tmp_path):
    # Co-RTV's, RMCAT's and combined's reports went to docs/results by default: a user's own
    # runs overwrote the shipped report. The make targets give --report-dir docs/results.
    from sluice.analysis import combined, cortv

    got = {}

    def capture(name):
        def write(*args, **kwargs):
            got[name] = [a for a in args if isinstance(a, (str, Path))]
            return tmp_path / "x.md"
        return write

    for mod in (rmcat, cortv, combined):
        monkeypatch.setattr(mod, "write_report", capture(mod.__name__))
    rmcat._write(rmcat.parse_args(["res"]), "cmd")
    cortv._write(cortv.parse_args(["res/cortv"]), "cmd")
    combined._write(combined.parse_args(["res/lb", "--ablations", "res/abl"]), "cmd")
    assert Path("res/report") in map(Path, got["sluice.analysis.rmcat"])
    assert Path("res/cortv/report") in map(Path, got["sluice.analysis.cortv"])
    assert Path("res/lb/report") in map(Path, got["sluice.analysis.combined"])
    rmcat._write(rmcat.parse_args(["res", "--report-dir", "docs/results"]), "cmd")
    assert Path("docs/results") in map(Path, got["sluice.analysis.rmcat"])
