"""`sluice live run`: the sender, relay and receiver over UDP on loopback (a real clock, so
these runs take their duration in wall time; kept short)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sluice import live, results
from sluice.cli import main


def test_live_run_of_webrtc_displays_frames_and_writes_results_plot_draws(tmp_path, capsys):
    out = tmp_path / "live"
    args = ["live", "run", "--scheme", "webrtc", "--trace", "gen:constant:12", "--duration",
            "10", "--queue-bytes", "100000", "--out", str(out), "--json"]  # fmt: skip
    rc = main(args)
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    run = results.load_run(out)
    # 300 capture slots: encoded frames plus the slots the frame dropper skipped.
    assert len(run.frames) + summary["frames_skipped"] == 300
    shown = int(run.frames["displayed_us"].notna().sum())
    assert shown >= 0.95 * 300, f"{shown} of 300 frames displayed"
    assert summary["frames_displayed"] == shown
    assert run.header["config"]["scheme_name"] == "webrtc"
    live = json.loads((out / "live.json").read_text())
    assert live["mode"] == "live"
    assert live["sender_malformed"] == 0 and live["receiver_malformed"] == 0
    assert live["media_packets_received"] > 3000  # at least ~3 Mbps for 10 s
    # The saved results draw like a simulated run's.
    assert main(["plot", str(out)]) == 0
    for png in ("latency_cdf.png", "timeseries.png"):
        assert (out / png).stat().st_size > 10_000


def test_a_live_run_shares_the_relay_with_a_competing_media_flow_and_counts_both(
        tmp_path, capsys):
    # Issue 29: the relay carries a competing media flow (its sender and receiver run inside
    # the relay); the summary has `flows` and `jain_index` as a simulated run's.
    out = tmp_path / "shared"
    rc = main(["live", "run", "--trace", "gen:constant:4", "--queue-bytes", "60000",
               "--delay-ms", "25", "--duration", "14", "--competing", "media:webrtc@1",
               "--out", str(out), "--json"])  # fmt: skip
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    flows = summary["flows"]
    assert [(f["flow"], f["kind"], f["scheme"]) for f in flows] == [
        (0, "media", "webrtc"), (1, "media", "webrtc")]
    # Both send, and together they fill most of the 4 Mbps from 1 s on.
    assert all(f["mean_rate_bps"] > 0.3e6 for f in flows), flows
    assert sum(f["mean_rate_bps"] for f in flows) > 3.0e6, flows
    assert abs(sum(f["share"] for f in flows) - 1.0) < 0.01, flows
    assert 0.5 < summary["jain_index"] <= 1.0, summary["jain_index"]
    run = results.load_run(out)
    assert run.samples["flow1_rate_bps"].iloc[-50:].sum() > 0


def test_live_run_over_webrtc_counts_forged_datagrams_and_displays_every_frame(tmp_path, capsys):
    # Issue 28: DTLS-SRTP between the sender and the receiver (str0m); the relay forges SRTP
    # packets to the receiver and sends plain NACKs and keyframe requests to the sender.
    out = tmp_path / "webrtc"
    args = ["live", "run", "--scheme", "webrtc", "--transport", "webrtc", "--trace",
            "gen:constant:12", "--duration", "4", "--queue-bytes", "100000", "--spoof", "0.3",
            "--out", str(out), "--json"]  # fmt: skip
    assert main(args) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    live_json = json.loads((out / "live.json").read_text())
    assert live_json["transport"] == "webrtc"
    forged = live_json["relay_spoof_sent"]
    assert forged > 300
    # Every forged datagram that arrived was counted and dropped: none reached an endpoint.
    assert 0.98 * forged <= summary["srtp_auth_failed"] <= forged
    assert not any(v for v in live_json["spoofed"].values())
    assert live_json["sender_webrtc"]["nacks"] == 0
    assert "failed SRTP authentication" in captured.err
    slots = 120
    assert summary["frames_displayed"] >= 0.9 * slots, summary


def test_a_live_fault_scenario_replays_in_the_simulator_from_its_results(tmp_path, capsys):
    # The path faults are the run config's `faults`: the live result's header carries them,
    # and `sluice run` with that config runs the simulator's fault node on the same scenario.
    live_dir, sim_dir = tmp_path / "live", tmp_path / "sim"
    net = ["--scheme", "webrtc", "--trace", "gen:constant:12", "--duration", "4",
           "--queue-bytes", "100000"]  # fmt: skip
    faults = ["--duplicate", "0.05", "--reorder", "0.05", "--feedback-blackout", "1.5:2.5"]
    assert main(["live", "run", *net, *faults, "--out", str(live_dir), "--json"]) == 0
    live_summary = json.loads(capsys.readouterr().out)
    config = results.load_run(live_dir).header["config"]
    assert config["faults"] == {"duplicate": 0.05, "reorder": 0.05, "reorder_delay_ms": 5.0,
                                "feedback_blackout_s": [1.5, 2.5]}  # fmt: skip
    replay = ["--set", "faults=" + json.dumps(config["faults"])]
    assert main(["run", *net, *replay, "--out", str(sim_dir), "--json"]) == 0
    sim_summary = json.loads(capsys.readouterr().out)
    assert results.load_run(sim_dir).header["config"]["faults"] == config["faults"]
    live_f, sim_f = live_summary["path_faults"], sim_summary["path_faults"]
    # The same shares of the media datagrams each saw (how many depends on the rate GCC
    # reached, which a loaded machine lowers live: 63 duplicated of some 1000 on CI against
    # 115 of 1500 simulated): reordered 5 %, duplicated 5 % of the rest.
    for f in (live_f, sim_f):
        assert f["media_datagrams"] > 500, (live_f, sim_f)
        for key in ("duplicated", "reordered"):
            assert 0.03 <= f[key] / f["media_datagrams"] <= 0.075, (key, live_f, sim_f)
        # The feedback of one second: transport reports every 50 ms with media in them and
        # NACKs of what reordering made look lost (31 to 46 seen).
        assert 15 <= f["blackout_dropped"] < f["feedback_datagrams"], (live_f, sim_f)
    for s in (live_summary, sim_summary):
        assert s["frames_displayed"] >= 0.85 * 120, s


def test_live_run_rejects_bad_options_in_one_line(tmp_path, capsys):
    rc = main(["live", "run", "--trace", "gen:constant:12", "--duration", "1",
               "--bind", "not-an-ip", "--out", str(tmp_path / "x")])  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sluice: error:") and "not-an-ip" in err[0]
    with pytest.raises(SystemExit) as e:
        main(["live", "run", "--feedback-blackout", "3:1"])
    assert e.value.code == 2
    capsys.readouterr()
    # What the relay cannot carry is refused, not ignored: a second bottleneck (RFC 8867
    # §6.3 runs in the simulator), and what the simulator refuses too.
    refused = [(["--set", "second_bottleneck.rate_mbps=1.5"], "simulated only"),
               (["--scheme", "co-rtv", "--competing", "tcp:cubic"], "other than audio")]
    for extra, says in refused:
        rc = main(["live", "run", "--trace", "gen:constant:12", "--duration", "1", *extra,
                   "--out", str(tmp_path / "y")])  # fmt: skip
        assert rc == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_a_live_run_and_still_writes_its_results(tmp_path, sig, code):
    out = tmp_path / "interrupted"
    cmd = [sys.executable, "-m", "sluice", "live", "run", "--trace", "gen:constant:12",
           "--duration", "60", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    time.sleep(3.0)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    # It says where the run so far went, then that it was interrupted.
    assert err.strip().splitlines()[-2:] == [
        f"results (the run until it was stopped): {out}", "sluice: interrupted"], err
    run = results.load_run(out)
    assert 30 <= len(run.frames) < 600
    assert run.summary["interrupted"] is True  # its rates count the planned 60 s
    # A slot never shown counts until the run stopped, about 3 s in, not until the planned
    # end (a slot at 2.9 s read 60 s of latency).
    assert run.summary["latency_all_ms"]["max"] < 10_000, run.summary["latency_all_ms"]
    # No slot is negative (a frame captured after the last sample), and the front end's
    # per-slot values, which the reports draw, end where the summary's do.
    from sluice.metrics import slot_latencies_ms

    lat = slot_latencies_ms(run)
    assert lat.min() >= 0 and abs(lat.max() - run.summary["latency_all_ms"]["max"]) < 1e-6
    live = json.loads((Path(out) / "live.json").read_text())
    assert live["stopped_early"] is True
    # The header says it ran live and with what the run config does not hold.
    assert run.header["live"]["processes"] == "one" and run.header["live"]["garbage"] == 0.0


def test_a_live_run_to_its_default_directory_says_it_replaces_one(tmp_path, capsys,
                                                                    monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    argv = ["live", "run", "--trace", "gen:constant:6", "--duration", "1"]
    assert main(argv) == 0
    assert "replacing" not in capsys.readouterr().err
    assert main(argv) == 0
    d = os.path.join("results", "live-webrtc-gen-constant-6-s1")
    assert f"note: replacing the earlier run in {d}" in capsys.readouterr().err
    assert main([*argv, "--out", d]) == 0  # named: no note
    assert "replacing" not in capsys.readouterr().err


def test_ctrl_c_while_a_live_run_is_scored_keeps_the_session(tmp_path, capsys, monkeypatch):
    # The session had finished and cannot be run again; a Ctrl-C during its scoring threw
    # all of it away. Now it is written unscored (its streams kept), then the stop goes on.
    import sluice.run

    def stopped(*_args, **_kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(sluice.run, "score", stopped)
    out = tmp_path / "x264"
    clip = Path(__file__).resolve().parents[2] / "data/videos/bbb-intro_1280x720_24fps_10s.mp4"
    # (conftest restores the signal handlers the interrupted main() sets to ignore)
    rc = main(["live", "run", "--scheme", "webrtc-x264", "--video", str(clip), "--width", "320",
               "--trace", "gen:constant:6", "--duration", "2", "--quality", "fast",
               "--out", str(out)])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 130, err
    assert err[-2:] == [f"results (the whole session, unscored: scoring was stopped): {out}",
                        "sluice: interrupted"], err  # fmt: skip
    run = results.load_run(out)
    assert len(run.frames) >= 40 and "interrupted" not in run.summary
    assert "scoring was stopped" in run.summary[results.QUALITY_ERROR_KEY]
    assert (out / "stream.264").stat().st_size > 1000 and not (out / "delivered.264").exists()
    assert not [p for p in out.iterdir() if ".tmp" in p.name]


def test_a_write_that_fails_after_a_stopped_scoring_is_an_error(tmp_path, capsys, monkeypatch):
    # Only the quality error is kept quiet after a stop: a write that fails (a full disk)
    # is said, not reported as results written.
    import sluice.run
    from sluice import results as res
    from sluice.errors import SluiceError

    def stopped(*_args, **_kw):
        raise KeyboardInterrupt

    def full(*_args, **_kw):
        raise SluiceError("No space left on device")

    monkeypatch.setattr(sluice.run, "score", stopped)
    monkeypatch.setattr(res, "write_run", full)
    clip = Path(__file__).resolve().parents[2] / "data/videos/bbb-intro_1280x720_24fps_10s.mp4"
    rc = main(["live", "run", "--scheme", "webrtc-x264", "--video", str(clip), "--width", "320",
               "--trace", "gen:constant:6", "--duration", "1", "--quality", "fast",
               "--out", str(tmp_path / "x")])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and "No space left on device" in err and "results (" not in err, err


def _nal_units(annexb: bytes) -> list[bytes]:
    """The NAL units of an Annex B stream (start codes of 3 or 4 bytes removed)."""
    return [n.rstrip(b"\x00") for n in re.split(b"\x00\x00\x01", annexb) if n.strip(b"\x00")]


def _ffmpeg_decoded_frames(stream: Path) -> int:
    """How many frames ffmpeg decodes from an H.264 stream, asserting it reports no error."""
    import imageio_ffmpeg

    ffmpeg = imageio_ffmpeg.get_ffmpeg_exe()
    r = subprocess.run([ffmpeg, "-v", "error", "-i", str(stream), "-f", "null", "-"],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr
    probe = subprocess.run([ffmpeg, "-i", str(stream), "-f", "null", "-"],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    return int(re.findall(r"frame=\s*(\d+)", probe.stderr)[-1])


def test_live_x264_run_is_scored_like_a_simulated_one(tmp_path):
    out = tmp_path / "x264"
    clip = Path(__file__).resolve().parents[2] / "data/videos/bbb-intro_1280x720_24fps_10s.mp4"
    rc = main(["live", "run", "--scheme", "webrtc-x264", "--video", str(clip), "--width", "320",
               "--trace", "gen:constant:6", "--duration", "3", "--queue-bytes", "100000",
               "--quality", "fast", "--out", str(out), "--json"])  # fmt: skip
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["frames_displayed"] >= 60
    assert 0 < summary["vmaf_mean"] <= 100
    assert (out / "stream.264").stat().st_size > 10_000
    # The frames crossed the wire as RTP/H.264 (RFC 6184): the receiver's depacketized
    # stream has the same NAL units as what the viewer's decoder gets (the sender-side
    # reconstruction quality scores), and ffmpeg decodes every frame of it without an error.
    assert _nal_units((out / "received.264").read_bytes()) == _nal_units(
        (out / "delivered.264").read_bytes()
    )
    live = json.loads((out / "live.json").read_text())
    assert live["received_stream_gaps"] == 0
    assert _ffmpeg_decoded_frames(out / "received.264") == summary["frames_displayed"]


def test_a_restarted_sender_starts_a_new_stream_that_the_receiver_and_ffmpeg_follow(
    tmp_path, capsys
):
    out = tmp_path / "restart"
    clip = Path(__file__).resolve().parents[2] / "data/videos/bbb-intro_1280x720_24fps_10s.mp4"
    args = ["live", "run", "--scheme", "webrtc-x264", "--video", str(clip), "--width", "320",
            "--trace", "gen:constant:6", "--duration", "4", "--queue-bytes", "100000",
            "--restart-sender-at", "1.5", "--out", str(out)]  # fmt: skip
    # Scoring needs the sender's whole stream.264, which the restarted encoder does not extend.
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--quality none" in err[0], err
    assert main([*args, "--quality", "none", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    live = json.loads((out / "live.json").read_text())
    assert (live["sender_restarts"], live["receiver_new_streams"]) == (1, 1), live
    assert live["receiver_malformed"] == 0
    run = results.load_run(out)
    after = run.frames[run.frames["capture_us"] >= 1_500_000]
    assert bool(after["is_keyframe"].iloc[0]), "the new stream starts with a keyframe"
    assert int(after["displayed_us"].notna().sum()) >= 40  # of 75 slots in 2.5 s
    assert run.frames["frame_id"].is_unique and run.frames["source_index"].is_monotonic_increasing
    # The receiver's stream runs on across the restart: ffmpeg decodes all of it, the old
    # stream's frames and the new one's, without an error.
    assert _ffmpeg_decoded_frames(out / "received.264") == summary["frames_displayed"]


def _free_udp_port() -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_ffmpeg_plays_the_live_rtp_h264_stream_from_the_sdp_file(tmp_path, rtp_player):
    out = tmp_path / "rtp"
    out.mkdir()
    port = _free_udp_port()
    sdp_path = out / "player.sdp"
    sdp_path.write_text(live.sdp(port))
    with rtp_player(sdp_path) as player:
        clip = Path(__file__).resolve().parents[2] / "data/videos/bbb-intro_1280x720_24fps_10s.mp4"
        rc = main(["live", "run", "--scheme", "webrtc-x264", "--video", str(clip), "--width",
                   "320", "--trace", "gen:constant:6", "--duration", "3", "--queue-bytes",
                   "100000", "--quality", "none", "--forward-rtp", str(port), "--out",
                   str(out / "run"), "--json"])  # fmt: skip
        assert rc == 0
        player.stop()
    # The run wrote the same description for its own forwarded stream.
    assert (out / "run" / "stream.sdp").read_bytes() == live.sdp(port).encode()
    player.assert_played(json.loads((out / "run" / "summary.json").read_text())["frames_displayed"])


def test_a_live_run_survives_spoofed_datagrams_and_says_so(tmp_path, capsys):
    """Issue 30: spoofed datagrams from the peers' addresses (the relay's --spoof: video
    packets claiming another stream to the receiver, NACKs of numbers never sent and
    keyframe requests to the sender) are counted and ignored: at least 90 % of the frames
    are displayed, the summary carries the counters, and the run's end line says so."""
    out = tmp_path / "live"
    rc = main(["live", "run", "--trace", "gen:constant:12", "--duration", "4", "--queue-bytes",
               "100000", "--spoof", "0.2", "--out", str(out), "--json"])  # fmt: skip
    assert rc == 0
    cap = capsys.readouterr()
    summary = json.loads(cap.out)
    assert summary["spoofed_stream_packets"] > 0, summary
    assert summary["spoofed_nacked_never_sent"] > 0, summary
    assert summary["spoofed_plis_rate_limited"] > 0, summary
    slots = summary["frames_displayed"] + summary["frames_skipped"]
    run = results.load_run(out)
    shown = int(run.frames["displayed_us"].notna().sum())
    assert shown >= 0.9 * 120, f"{shown} of 120 frames displayed ({slots} slots)"
    lines = cap.err.strip().splitlines()
    assert lines and lines[-1].startswith("live: screened out"), cap.err
    stats = json.loads((out / "live.json").read_text())
    assert stats["relay_spoof_sent"] > 0 and stats["receiver_new_streams"] == 0, stats
    # Without spoofing, the counters are there and zero, and nothing is said.
    rc = main(["live", "run", "--trace", "gen:constant:12", "--duration", "1", "--out",
               str(tmp_path / "clean"), "--json"])  # fmt: skip
    assert rc == 0
    cap = capsys.readouterr()
    clean = json.loads(cap.out)
    assert [clean[f"spoofed_{k}"] for k in live.SPOOF_KEYS] == [0, 0, 0]
    assert "spoofed" not in cap.err
