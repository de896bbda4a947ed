"""User mistakes give one ``sluice: error: ...`` line on stderr and exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from sluice import results
from sluice.errors import SluiceError

# Short runs keep the suite fast; the generated trace needs no data files.
TRACE = "gen:constant:12"
DURATION = "3"


def test_missing_trace_file(sluice, tmp_path):
    missing = tmp_path / "nope.mahi"
    r = sluice("run", "--trace", str(missing), "--out", str(tmp_path / "out"))
    r.assert_one_line_error("trace file not found", str(missing))


def test_a_generator_spec_without_gen_is_pointed_at_it(sluice, tmp_path):
    r = sluice("trace", "info", "constant:12")
    r.assert_one_line_error("trace file not found: constant:12",
                            "a generated trace is written gen:constant:12")  # fmt: skip
    # A path that merely has a colon is not taken for one.
    r = sluice("trace", "info", str(tmp_path / "a:b.mahi"))
    assert "gen:" not in r.err, r.err


def test_a_byte_order_mark_is_named(sluice, tmp_path):
    bom = tmp_path / "bom.mahi"
    bom.write_bytes(b"\xef\xbb\xbf1\n2\n")
    sluice("trace", "info", str(bom)).assert_one_line_error(f"{bom}:1", "byte-order mark")


def test_malformed_mahimahi_names_file_and_line(sluice, tmp_path):
    bad = tmp_path / "bad.mahi"
    bad.write_text("# a comment\n1\n2\nthree\n4\n")
    r = sluice("run", "--trace", str(bad), "--out", str(tmp_path / "out"))
    r.assert_one_line_error(f"{bad}:4")


def test_decreasing_mahimahi_names_file_and_line(sluice, tmp_path):
    bad = tmp_path / "dec.mahi"
    bad.write_text("1\n5\n3\n")
    sluice("trace", "info", str(bad)).assert_one_line_error(f"{bad}:3")


def test_malformed_rate_series_names_file_and_line(sluice, tmp_path):
    bad = tmp_path / "bad.log"
    bad.write_text("0 10\n1 x\n2 10\n")
    sluice("trace", "info", str(bad)).assert_one_line_error(f"{bad}:2")


def test_empty_trace_file(sluice, tmp_path):
    empty = tmp_path / "empty.mahi"
    empty.write_text("# nothing\n\n")
    sluice("trace", "info", str(empty)).assert_one_line_error(str(empty))


def test_bad_generator_spec(sluice):
    sluice("trace", "info", "gen:constant").assert_one_line_error("constant")


def test_unknown_scheme(sluice, tmp_path):
    r = sluice("run", "--scheme", "nosuch", "--trace", TRACE, "--out", str(tmp_path / "o"))
    r.assert_one_line_error("unknown scheme 'nosuch'", "webrtc")


def test_unknown_scheme_in_compare(sluice, tmp_path):
    r = sluice("compare", "--schemes", "webrtc,nosuch", "--trace", TRACE, "--out", str(tmp_path))
    r.assert_one_line_error("unknown scheme 'nosuch'")


def test_both_queue_options(sluice):
    r = sluice("run", "--trace", TRACE, "--queue-bytes", "100000", "--queue-packets", "50")
    r.assert_one_line_error("--queue-packets", "--queue-bytes")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["run", "--trace", TRACE, "--loss", "1.5"], "--loss"),
        (["run", "--trace", TRACE, "--duration", "-1"], "--duration"),
        (["run", "--trace", TRACE, "--delay-ms", "abc"], "--delay-ms"),
        (["run"], "--trace"),
        (["bogus"], "bogus"),
        ([], "COMMAND"),
    ],
)
def test_bad_arguments(sluice, argv, needle):
    sluice(*argv).assert_one_line_error(needle)


def test_scheme_file_errors(sluice, tmp_path):
    bad = tmp_path / "mine.json"
    bad.write_text("{not json")
    r = sluice("run", "--scheme-file", str(bad), "--trace", TRACE, "--out", str(tmp_path / "o"))
    r.assert_one_line_error(f"{bad}:1")
    bad.write_text(json.dumps({"pacer": {"kind": "no-such-pacer"}}))
    r = sluice("run", "--scheme-file", str(bad), "--trace", TRACE, "--duration", DURATION,
               "--out", str(tmp_path / "o"))  # fmt: skip
    r.assert_one_line_error()
    missing = tmp_path / "missing.json"
    r = sluice("run", "--scheme-file", str(missing), "--trace", TRACE)
    r.assert_one_line_error("scheme file not found", str(missing))
    # A file named as a registered scheme it is listed beside: the message says why.
    same = tmp_path / "webrtc.json"
    same.write_text(json.dumps({"pacer": {"kind": "leaky-bucket"}}))
    r = sluice("compare", "--schemes", "webrtc", "--scheme-file", str(same), "--trace", TRACE,
               "--out", str(tmp_path / "c"))  # fmt: skip
    r.assert_one_line_error("scheme listed twice: webrtc", "named by its file name", str(same))
    # A composition whose parts cannot work together is refused, naming the file.
    bad.write_text(json.dumps({"pacer": {"kind": "leaky-bucket"},
                               "encoder_controller": {"kind": "mae"}}))  # fmt: skip
    r = sluice("run", "--scheme-file", str(bad), "--trace", TRACE, "--duration", DURATION,
               "--out", str(tmp_path / "o"))  # fmt: skip
    r.assert_one_line_error(str(bad), "mae waits for the congestion controller's pre-reaction")


def test_x264_scheme_without_video(sluice, tmp_path):
    r = sluice("run", "--scheme", "ace", "--trace", TRACE, "--out", str(tmp_path / "o"))
    r.assert_one_line_error("needs a video", "--encoder model")


def test_encoder_option_overrides_the_schemes_encoder(tmp_path):
    from sluice.run import RunSpec, resolve_encoder

    assert resolve_encoder(RunSpec(scheme="ace", trace=TRACE, encoder="model")) == "model"
    assert resolve_encoder(RunSpec(scheme="webrtc", trace=TRACE)) == "model"


def test_plot_not_a_run_dir(sluice, tmp_path):
    sluice("plot", str(tmp_path)).assert_one_line_error("not a sluice run directory")
    sluice("plot", str(tmp_path / "missing")).assert_one_line_error("no such run directory")
    # A plan's results: its runs are folders below it; `report` takes the whole.
    (tmp_path / "plan.json").write_text("{}")
    sluice("plot", str(tmp_path)).assert_one_line_error("holds a plan's results",
                                                        "`sluice report` on it")  # fmt: skip


def test_unknown_schema_version(tmp_path):
    (tmp_path / "run.jsonl").write_text(
        json.dumps({"record": "header", "schema_version": 99}) + "\n"
    )
    with pytest.raises(SluiceError, match="schema_version 99"):
        results.load_run(tmp_path)
    with pytest.raises(SluiceError, match="not a sluice run directory"):
        results.load_run(tmp_path / "missing")


def test_python_m_sluice_prints_no_traceback(tmp_path):
    missing = tmp_path / "nope.mahi"
    p = subprocess.run(
        [sys.executable, "-m", "sluice", "run", "--trace", str(missing)],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert p.returncode == 2, p
    assert p.stdout == ""
    assert p.stderr.splitlines() == [f"sluice: error: trace file not found: {missing}"]


def test_set_changes_the_config_and_unknown_paths_are_errors(sluice, tmp_path):
    out = tmp_path / "o"
    r = sluice("run", "--trace", TRACE, "--duration", DURATION, "--out", str(out),
               "--set", "feedback_interval_ms=20", "--set", "cc.pacing_factor=2",
               "--set", "duration_s=2")  # fmt: skip
    assert r.code == 0, r.err
    cfg = results.read_header(out)["config"]
    assert cfg["feedback_interval_ms"] == 20 and cfg["scheme"]["cc"]["pacing_factor"] == 2
    assert cfg["duration_s"] == 2  # --set comes after --duration
    r = sluice("run", "--trace", TRACE, "--set", "pacer.alpha=2", "--out", str(out))
    r.assert_one_line_error("unknown config path 'pacer.alpha'", "(leaky-bucket)",
                            "valid: burst_interval_ms")  # fmt: skip
    r = sluice("compare", "--schemes", "webrtc", "--trace", TRACE, "--set", "fps=fast",
               "--out", str(tmp_path / "c"))  # fmt: skip
    r.assert_one_line_error("'fps' takes a number")
    sluice("run", "--trace", TRACE, "--set", "fps").assert_one_line_error("PATH=VALUE")
    r = sluice("run", "--trace", TRACE, "--set", "duration_s=-1", "--out", str(out))
    r.assert_one_line_error("duration must be positive")


def test_config_command(sluice, tmp_path):
    r = sluice("config", "--scheme", "ace", "--paths", "--set", "pacer.threshold_packets=7.5")
    assert r.code == 0, r.err
    assert "pacer.threshold_packets=7.5" in r.out.splitlines()
    assert 'encoder.kind="x264"' in r.out.splitlines()
    assert json.loads(sluice("config").out)["scheme"]["pacer"]["kind"] == "leaky-bucket"
    sluice("config", "--set", "nope=1").assert_one_line_error("unknown config path 'nope'")
    # The optional paths (absent unless set to something else) are listed too, after a
    # comment line, and each can be set; set to another value, it is among the config's own.
    lines = sluice("config", "--paths").out.splitlines()
    optional = lines[lines.index(next(x for x in lines if x.startswith("# optional"))) + 1:]
    assert "faults.duplicate=0.0" in optional and "second_bottleneck.rate_mbps=1.0" in optional
    # The traces' names are not paths to set (--trace gives them), and not listed as such.
    assert not [x for x in lines if x.startswith(("downlink.trace=", "uplink.trace="))]
    assert any(x.startswith("# set by a run") and "--trace" in x for x in lines)
    for line in optional:
        assert sluice("config", "--paths", "--set", line).code == 0, line
    for line in ("faults.duplicate=0.1", "downlink.queue_discipline=\"codel\"",
                 "second_bottleneck.rate_mbps=2.0"):
        r = sluice("config", "--paths", "--set", line)
        assert line in r.out.split("# optional")[0].splitlines(), (line, r.err)
    # A custom composition's config, from its file.
    comp = tmp_path / "mine.json"
    comp.write_text('{"pacer": {"kind": "none"}, "cc": {"kind": "gcc", "pacing_factor": 1.5}}')
    r = sluice("config", "--scheme-file", str(comp), "--paths")
    assert r.code == 0, r.err
    assert 'pacer.kind="none"' in r.out.splitlines() and "cc.pacing_factor=1.5" in r.out
    # A whole number written as a float is that number; a fraction for an integer is named.
    comp.write_text('{"pacer": {"kind": "none"}, "cc": {"kind": "gcc", "start_rate": 3e5}}')
    r = sluice("config", "--scheme-file", str(comp), "--paths")
    assert "cc.start_rate=300000" in r.out.splitlines(), r.err
    comp.write_text('{"pacer": {"kind": "none"}, "cc": {"kind": "gcc", "start_rate": 3.5}}')
    r = sluice("config", "--scheme-file", str(comp))
    r.assert_one_line_error("takes a whole number, got 3.5 (at cc.start_rate)")
    comp.write_text('{"pacer": {"kind": "none"}, "cc": {"kind": "gcc", "pacing_factor": "x"}}')
    r = sluice("config", "--scheme-file", str(comp))
    r.assert_one_line_error('takes a number, got the string "x" (at cc.pacing_factor)')


def test_bugs_are_not_user_errors(monkeypatch):
    from sluice import cli
    from sluice.cli import tools

    def broken(args):
        raise ValueError("a bug")

    monkeypatch.setattr(tools, "cmd_schemes", broken)
    with pytest.raises(ValueError, match="a bug"):
        cli.main(["schemes"])
