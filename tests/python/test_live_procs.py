"""`sluice live send`, `recv`, `relay` as separate processes on loopback, and `live merge`
(real clocks: these take their duration in wall time; kept short)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sluice import results
from sluice.cli import main

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="signals to child processes")

SUMMARY_KEYS = ("latency_ms", "stall_rate", "fps", "loss_rate", "utilization", "bwe_ratio",
                "frames_sent", "frames_displayed", "frames_skipped")  # fmt: skip


def _free_ports(n: int) -> list[int]:
    """``n`` UDP ports free on 127.0.0.1 now (held together while picked, so distinct)."""
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _sluice(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sluice", *args], cwd=cwd,
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONWARNINGS": "ignore"})  # fmt: skip


def _wait_listening(port: int, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    """Until a process has bound UDP ``port`` on 127.0.0.1 (binding it here then fails)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return
        finally:
            s.close()
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port} after {timeout_s} s")


def _addr(port: int) -> str:
    return f"127.0.0.1:{port}"


def _done(proc: subprocess.Popen, code: int = 0) -> str:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert "Traceback" not in err, err
    return err


def _receiver_and_relay(tmp_path: Path, ports: list[int], run: list[str], recv_extra: list[str],
                        relay_extra: list[str]) -> tuple[subprocess.Popen, subprocess.Popen]:
    """`live recv` and `live relay` (12 Mbps, 100 kB queue) started and listening, the sender
    to come on ``ports[0]``; parts in tmp_path/recv and tmp_path/relay."""
    s, x, r = ports
    recv = _sluice(["live", "recv", "--listen", _addr(r), "--peer", _addr(x), *run, *recv_extra,
                    "--start-timeout-s", "60", "--out", "recv"], tmp_path)  # fmt: skip
    relay = _sluice(["live", "relay", "--listen", _addr(x), "--sender", _addr(s), "--receiver",
                     _addr(r), "--trace", "gen:constant:12", "--queue-bytes", "100000", *run,
                     *relay_extra, "--start-timeout-s", "60", "--out", "relay"],
                    tmp_path)  # fmt: skip
    _wait_listening(r, recv)
    _wait_listening(x, relay)
    return recv, relay


def test_send_relay_recv_as_three_processes_merge_into_a_result(tmp_path, capsys):
    s, x, r = ports = _free_ports(3)
    run = ["--scheme", "webrtc", "--duration", "7", "--seed", "3"]
    recv, relay = _receiver_and_relay(tmp_path, ports, run, [], ["--duplicate", "0.02"])
    # A stranger writes to the relay (before the session and during it): counted, dropped.
    stranger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stranger.bind(("127.0.0.1", 0))
    stranger.sendto(b"\x80\x60 not from the sender", ("127.0.0.1", x))
    send = _sluice(["live", "send", "--listen", _addr(s), "--peer", _addr(x), *run,
                    "--out", "send"], tmp_path)  # fmt: skip
    time.sleep(2.0)
    stranger.sendto(b"\x80\x60 still not the sender", ("127.0.0.1", x))
    stranger.close()
    _done(send)
    _done(relay)
    _done(recv)

    relay_part = json.loads((tmp_path / "relay" / "part.json").read_text())
    assert relay_part["live"]["io"]["foreign"] == 2
    assert relay_part["live"]["malformed"] == 0  # dropped unread, not handed to the relay
    assert relay_part["trace"]["name"].startswith("gen:constant:12")
    for d, role in (("send", "sender"), ("relay", "relay"), ("recv", "receiver")):
        part = json.loads((tmp_path / d / "part.json").read_text())
        assert part["role"] == role and part["seed"] == 3 and part["live"]["ended"] == "end"
        assert part["wall_origin_us"] > 1.6e15  # wall-clock Unix microseconds (after 2020)

    out = tmp_path / "merged"
    rc = main(["live", "merge", "--sender", str(tmp_path / "send"), "--relay",
               str(tmp_path / "relay"), "--receiver", str(tmp_path / "recv"), "--out", str(out),
               "--json"])  # fmt: skip
    assert rc == 0
    res = results.load_run(out)
    slots = len(res.frames) + res.summary["frames_skipped"]
    assert slots == 7 * 30
    shown = int(res.frames["displayed_us"].notna().sum())
    assert shown >= 0.9 * slots, f"{shown} of {slots} frames displayed"
    assert res.summary["frames_displayed"] == shown
    for k in SUMMARY_KEYS:
        assert k in res.summary, k
    # Latencies are on the sender's clock: positive, and at least the 20 ms one-way delay.
    assert (res.frames["latency_us"].dropna() >= 20_000).all()
    # The relay's link state is in the sender's samples.
    assert res.samples["queue_delay_us"].max() > 0
    assert res.samples["link_capacity_bps"].max() == pytest.approx(12e6, rel=0.05)
    assert res.header["config"]["downlink"]["queue_bytes"] == 100000
    # The relay's path faults are the merged run's (2 % of some 2500 media datagrams twice).
    assert res.header["config"]["faults"]["duplicate"] == 0.02
    # How it ran, and the relay's wire faults, which the run config does not hold.
    assert res.header["live"] == {"processes": "separate", "garbage": 0.0, "spoof": 0.0}
    assert res.summary["path_faults"]["duplicated"] >= 15, res.summary["path_faults"]
    live = json.loads((out / "live.json").read_text())
    assert live["relay_io"]["foreign"] == 2 and live["media_packets_received"] > 1000
    assert live["processes"]["receiver"]["offset_us"] > 0
    assert main(["plot", str(out)]) == 0
    for png in ("latency_cdf.png", "timeseries.png"):
        assert (out / png).stat().st_size > 10_000

    # A part whose header and events file disagree on its clock origin (files of two parts
    # mixed): merge checks the header's origin but shifts by the events file's, so it refuses.
    part_file = tmp_path / "recv" / "part.json"
    part = json.loads(part_file.read_text())
    part_file.write_text(json.dumps({**part, "wall_origin_us": part["wall_origin_us"] + 1}))
    rc = main(["live", "merge", "--sender", str(tmp_path / "send"), "--relay",
               str(tmp_path / "relay"), "--receiver", str(tmp_path / "recv"), "--out",
               str(tmp_path / "mixed")])  # fmt: skip
    assert rc == 2
    assert "the files of two parts are mixed" in capsys.readouterr().err
    assert not (tmp_path / "mixed").exists()
    part_file.write_text(json.dumps(part))
    # Nor does it write the merged result into one of the parts.
    rc = main(["live", "merge", "--sender", str(tmp_path / "send"), "--relay",
               str(tmp_path / "relay"), "--receiver", str(tmp_path / "recv"), "--out",
               str(tmp_path / "send")])  # fmt: skip
    assert rc == 2 and "is the sender's part" in capsys.readouterr().err
    assert not (tmp_path / "send" / "run.jsonl").exists()


def test_send_relay_recv_over_webrtc_signal_through_files_and_drop_every_forgery(tmp_path,
                                                                                capsys):
    # Issue 28: DTLS-SRTP between separate processes. The SDP offer and answer go through
    # files (out of band, as a call's signalling does); the relay forwards opaque SRTP and
    # forges SRTP packets to the receiver and plain NACKs and keyframe requests to the
    # sender; every forgery is counted and dropped, none reaches an endpoint.
    s, x, r = ports = _free_ports(3)
    run = ["--scheme", "webrtc", "--duration", "5", "--seed", "3"]
    sdp = tmp_path / "sdp"
    sdp.mkdir()
    offer, answer = str(sdp / "offer.sdp"), str(sdp / "answer.sdp")
    recv_webrtc = ["--transport", "webrtc", "--sdp-in", offer, "--sdp-out", answer]
    recv, relay = _receiver_and_relay(tmp_path, ports, run, recv_webrtc, ["--spoof", "0.2"])
    send = _sluice(["live", "send", "--listen", _addr(s), "--peer", _addr(x), *run,
                    "--transport", "webrtc", "--sdp-out", offer, "--sdp-in", answer,
                    "--out", "send"], tmp_path)  # fmt: skip
    for p in (send, relay, recv):
        _done(p)
    assert not any(sdp.iterdir()), "each side removes its peer's SDP once read"
    out = tmp_path / "merged"
    assert main(["live", "merge", "--sender", str(tmp_path / "send"), "--relay",
                 str(tmp_path / "relay"), "--receiver", str(tmp_path / "recv"), "--out",
                 str(out)]) == 0  # fmt: skip
    assert "failed SRTP authentication" in capsys.readouterr().err
    res = results.load_run(out)
    live = json.loads((out / "live.json").read_text())
    assert live["transport"] == "webrtc"
    forged = live["relay_spoof_sent"]
    assert forged > 300, live
    # Every forgery that arrived was dropped as not authentic (a few are still in flight at
    # the end); nothing spoofed reached the endpoints, the sender retransmitted nothing.
    assert 0.95 * forged <= res.summary["srtp_auth_failed"] <= forged, (forged, res.summary)
    assert not any(live["spoofed"].values()), live["spoofed"]
    assert live["sender_webrtc"]["nacks"] == 0
    assert res.summary["frames_displayed"] >= 0.9 * 5 * 30, res.summary


@pytest.mark.parametrize("args, needle", [
    (["send", "--peer", "127.0.0.1:5001", "--transport", "webrtc", "--sdp-out", "o.sdp"],
     "needs --sdp-out"),
    (["recv", "--peer", "127.0.0.1:5001", "--sdp-in", "o.sdp"], "are for --transport webrtc"),
    (["send", "--peer", "127.0.0.1:5001", "--transport", "webrtc", "--sdp-out", "a.sdp",
      "--sdp-in", "a.sdp"], "the same file"),
    (["recv", "--peer", "127.0.0.1:5001", "--transport", "webrtc", "--sdp-out", "no/a.sdp",
      "--sdp-in", "b.sdp"], "no such directory"),
    (["relay", "--trace", "gen:constant:6", "--sender", "127.0.0.1:5000", "--receiver",
      "127.0.0.1:5002", "--scheme", "co-rtv", "--transport", "webrtc"], "cannot send over WebRTC"),
    (["send", "--peer", "127.0.0.1:5001", "--scheme", "co-rtv", "--transport", "webrtc",
      "--sdp-out", "a.sdp", "--sdp-in", "b.sdp"], "cannot send over WebRTC"),
])  # fmt: skip
def test_webrtc_signalling_files_are_checked_in_one_line(tmp_path, capsys, monkeypatch, args,
                                                          needle):
    monkeypatch.chdir(tmp_path)
    rc = main(["live", *args, "--out", str(tmp_path / "out")])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sluice: error:") and needle in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_terminated_receiver_still_writes_its_part(tmp_path, capsys):
    s, r = _free_ports(2)
    run = ["--duration", "30", "--seed", "2"]
    recv = _sluice(["live", "recv", "--listen", _addr(r), "--peer", _addr(s), *run,
                    "--start-timeout-s", "60", "--out", "recv"], tmp_path)  # fmt: skip
    _wait_listening(r, recv)
    send = _sluice(["live", "send", "--listen", _addr(s), "--peer", _addr(r), *run,
                    "--out", "send"], tmp_path)  # fmt: skip
    part = tmp_path / "recv" / "part.json"
    time.sleep(3.0)
    recv.send_signal(signal.SIGTERM)
    _done(recv, 143)
    time.sleep(0.5)
    send.send_signal(signal.SIGINT)
    _done(send, 130)
    got = json.loads(part.read_text())
    assert got["interrupted"] is True and got["live"]["ended"] == "stopped"
    assert got["live"]["media_packets"] > 100
    # The parts merge (sender straight to receiver: no relay), marked interrupted.
    out = tmp_path / "merged"
    rc = main(["live", "merge", "--sender", str(tmp_path / "send"), "--receiver",
               str(tmp_path / "recv"), "--out", str(out), "--json"])  # fmt: skip
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["interrupted"] is True and summary["frames_displayed"] >= 30
    # Its table says so too.
    rc = main(["live", "merge", "--sender", str(tmp_path / "send"), "--receiver",
               str(tmp_path / "recv"), "--out", str(out)])  # fmt: skip
    assert rc == 0 and "(interrupted: " in capsys.readouterr().out


SEND_AT, RECV_AT = "127.0.0.1:5000", "127.0.0.1:5002"


def _fake_part(d: Path, role: str, **edits: object) -> None:
    d.mkdir(parents=True)
    me, peer = (SEND_AT, RECV_AT) if role == "sender" else (RECV_AT, SEND_AT)
    part = {"record": "live-part", "part_schema": 1, "role": role, "seed": 1,
            "scheme": "webrtc", "config": {"duration_s": 5.0, "drain_s": 2.0, "fps": 30.0,
            "downlink": {}, "uplink": {}, "encoder": {}}, "wall_origin_us": 1_700_000_000_000_000,
            "started": True, "interrupted": False, "spec": {}, "listen": me, "peer": peer,
            "live": {"stream": 7} if role == "sender" else {"last_stream": 7}}  # fmt: skip
    for k, v in edits.items():
        if k == "duration_s":
            part["config"]["duration_s"] = v  # type: ignore[index]
        elif v is None:
            del part[k]
        else:
            part[k] = v
    (d / "part.json").write_text(json.dumps(part))
    (d / "events.json").write_text("{}")


@pytest.mark.parametrize("edit, needle", [
    ({"seed": 9}, "seed 9"),
    ({"scheme": "copa"}, "scheme copa"),
    ({"duration_s": 6.0}, "duration_s"),
    ({"wall_origin_us": 1_700_000_000_000_000 + 600_000_000}, "600.0 s after"),
    ({"started": False}, "never heard its peer"),
    # Another session on the same ports: the receiver read another sender's stream.
    ({"live": {"last_stream": 8}}, "read stream 8, the sender sent stream 7"),
    # A relayed session merged without its relay: the sender did not send to the receiver.
    ({"listen": "127.0.0.1:5003"}, "give the relay's part with --relay"),
    ({"scheme": None}, "'scheme' missing"),
    ({"wall_origin_us": "soon"}, "'wall_origin_us' missing or not an integer"),
])  # fmt: skip
def test_merge_refuses_parts_of_another_session_in_one_line(tmp_path, capsys, edit, needle):
    _fake_part(tmp_path / "send", "sender")
    _fake_part(tmp_path / "recv", "receiver", **edit)
    rc = main(["live", "merge", "--sender", str(tmp_path / "send"), "--receiver",
               str(tmp_path / "recv"), "--out", str(tmp_path / "m")])  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sluice: error:") and needle in err[0], err
    assert not (tmp_path / "m").exists()


def _recv_on_a_port_in_use(out: Path, capsys) -> tuple[int, int, list[str]]:
    """``live recv`` told to listen on a port held here: (port, exit code, stderr lines)."""
    held = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    held.bind(("127.0.0.1", 0))
    port = held.getsockname()[1]
    try:
        rc = main(["live", "recv", "--listen", _addr(port), "--peer", "127.0.0.1:9",
                   "--out", str(out)])  # fmt: skip
    finally:
        held.close()
    return port, rc, capsys.readouterr().err.strip().splitlines()


def test_a_port_in_use_is_one_line_and_leaves_nothing(tmp_path, capsys):
    port, rc, err = _recv_on_a_port_in_use(tmp_path / "recv", capsys)
    assert rc == 2
    assert len(err) == 1 and f"cannot listen on 127.0.0.1:{port}" in err[0], err
    assert not (tmp_path / "recv").exists()


def test_a_port_in_use_leaves_the_previous_part_in_out_as_it_was(tmp_path, capsys):
    out = tmp_path / "recv"
    _fake_part(out, "receiver")
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    _, rc, err = _recv_on_a_port_in_use(out, capsys)
    assert rc == 2
    assert "cannot listen on" in err[0], err
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before


def test_a_receiver_whose_peer_never_came_leaves_no_sdp_file(tmp_path, capsys):
    (r,) = _free_ports(1)
    out = tmp_path / "recv"
    rc = main(["live", "recv", "--listen", _addr(r), "--peer", "127.0.0.1:9", "--encoder",
               "x264", "--forward-rtp", "5999", "--start-timeout-s", "0.3", "--out",
               str(out)])  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sluice: error:" in err[0], err
    assert not out.exists() or not any(out.iterdir()), list(out.iterdir())


@pytest.mark.parametrize("args, needle", [
    (["recv", "--listen", "[::1]:5002", "--peer", "127.0.0.1:5001"],
     "--peer 127.0.0.1:5001 is IPv4 but --listen [::1]:5002 is IPv6"),
    (["send", "--peer", "0.0.0.0:5001"], "not an address to send to"),
    (["send", "--peer", "255.255.255.255:5001"], "multicast or broadcast"),
    (["send", "--peer", "239.1.2.3:5001"], "multicast or broadcast"),
    (["send", "--listen", "127.0.0.1:5000", "--peer", "127.0.0.1:5000"],
     "this endpoint's own --listen address"),
    (["recv", "--listen", "0.0.0.0:5002", "--peer", "127.0.0.1:5002"],
     "this endpoint's own --listen address"),
    (["relay", "--trace", "gen:constant:6", "--sender", "127.0.0.1:5000", "--receiver",
      "127.0.0.1:5000"],
     "--receiver and --sender are the same address"),
])  # fmt: skip
def test_a_peer_the_endpoint_cannot_send_to_is_one_line(tmp_path, capsys, args, needle):
    rc = main(["live", *args, "--out", str(tmp_path / "out")])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sluice: error:") and needle in err[0], err
    assert not (tmp_path / "out").exists()


def test_the_sdp_of_an_ipv6_address_says_ip6():
    from sluice.live import sdp

    assert "c=IN IP6 ::1\r\n" in sdp(5004, "::1")
    assert "c=IN IP4 127.0.0.1\r\n" in sdp(5004)


def test_a_restarted_send_process_starts_a_new_stream_that_the_receiver_follows(tmp_path):
    s, r = _free_ports(2)
    run = ["--scheme", "webrtc"]
    recv = _sluice(["live", "recv", "--listen", _addr(r), "--peer", _addr(s), *run,
                    "--duration", "8", "--start-timeout-s", "60", "--out", "recv"],
                   tmp_path)  # fmt: skip
    _wait_listening(r, recv)
    send = ["live", "send", "--listen", _addr(s), "--peer", _addr(r), *run]
    first = _sluice([*send, "--duration", "8", "--out", "send1"], tmp_path)
    time.sleep(3.0)
    first.send_signal(signal.SIGTERM)  # the sending process dies; another one starts
    _done(first, 143)
    restarted_at = time.time()
    _done(_sluice([*send, "--duration", "3", "--out", "send2"], tmp_path))
    _done(recv)
    part = json.loads((tmp_path / "recv" / "part.json").read_text())
    assert part["live"]["new_streams"] == 1, part["live"]
    assert part["live"]["malformed"] == 0
    # The receiver displays the new stream: frames shown after the restart, on its clock.
    events = json.loads((tmp_path / "recv" / "events.json").read_text())["events"]
    since_us = (restarted_at * 1e6 - part["wall_origin_us"]) + 0.5e6
    shown = [e for e in events if "FrameDisplayed" in e and e["FrameDisplayed"]["time"] > since_us]
    assert len(shown) >= 60, f"{len(shown)} frames displayed after the restart"


def test_ffmpeg_plays_the_stream_live_recv_forwards_from_the_sdp_file_it_writes(tmp_path,
                                                                                rtp_player):
    s, r, player_port = _free_ports(3)
    clip = Path(__file__).resolve().parents[2] / "data/videos/bbb-intro_1280x720_24fps_10s.mp4"
    run = ["--scheme", "webrtc-x264", "--duration", "3"]
    recv = _sluice(["live", "recv", "--listen", _addr(r), "--peer", _addr(s), *run,
                    "--forward-rtp", str(player_port), "--start-timeout-s", "60", "--out",
                    "recv"], tmp_path)  # fmt: skip
    _wait_listening(r, recv)
    # Written right after the socket is bound (a loaded machine may show the bound socket
    # first): give it a moment, not the whole start timeout.
    sdp = tmp_path / "recv" / "stream.sdp"
    deadline = time.monotonic() + 5.0
    while not sdp.is_file() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sdp.is_file(), "live recv writes the SDP as it starts"
    with rtp_player(sdp) as player:
        send = _sluice(["live", "send", "--listen", _addr(s), "--peer", _addr(r), *run,
                        "--video", str(clip), "--width", "320", "--out", "send"],
                       tmp_path)  # fmt: skip
        _done(send)
        _done(recv)
        player.stop()
    events = json.loads((tmp_path / "recv" / "events.json").read_text())["events"]
    shown = sum(1 for e in events if "FrameDisplayed" in e)
    assert shown >= 60, shown
    player.assert_played(shown)
    # The parts merge into a result that --quality scores, as live run's.
    out = tmp_path / "merged"
    rc = main(["live", "merge", "--sender", str(tmp_path / "send"), "--receiver",
               str(tmp_path / "recv"), "--quality", "fast", "--out", str(out)])  # fmt: skip
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["frames_displayed"] == shown
    assert 0 < summary["vmaf_mean"] <= 100


def test_a_sender_whose_peer_never_answers_is_one_line_and_leaves_nothing(tmp_path):
    """Issue 30: `live send` to a peer that never answers (a bound socket that reads and says
    nothing) ends after --idle-timeout-s with one line, exit 2, and no part."""
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))
    try:
        (s,) = _free_ports(1)
        t0 = time.monotonic()
        p = _sluice(["live", "send", "--listen", _addr(s), "--peer",
                     _addr(silent.getsockname()[1]), "--duration", "30", "--idle-timeout-s",
                     "1", "--out", "send"], tmp_path)  # fmt: skip
        err = _done(p, 2).strip().splitlines()
        assert time.monotonic() - t0 < 20  # not the session's 30 s
        assert silent.recv(2048)  # it did send
    finally:
        silent.close()
    assert len(err) == 1 and err[0].startswith("sluice: error: live sender: no answer"), err
    assert "datagrams sent" in err[0] and "no part written" in err[0], err
    assert not (tmp_path / "send").exists()


def test_an_unanswered_webrtc_sender_takes_its_offer_back(tmp_path):
    # A sender nobody answered (here within --start-timeout-s) leaves no offer behind: a
    # receiver started later would answer it, and the next sender would wait in vain.
    s, x = _free_ports(2)
    sdp = tmp_path / "sdp"
    sdp.mkdir()
    send = _sluice(["live", "send", "--listen", _addr(s), "--peer", _addr(x), "--duration", "2",
                    "--transport", "webrtc", "--sdp-out", str(sdp / "offer.sdp"), "--sdp-in",
                    str(sdp / "answer.sdp"), "--start-timeout-s", "1", "--out", "send"],
                   tmp_path)  # fmt: skip
    _, err = send.communicate(timeout=60)
    assert send.returncode == 2 and "no SDP from the peer" in err, err
    assert not any(sdp.iterdir()), sorted(p.name for p in sdp.iterdir())
    rtp = _sluice(["live", "send", "--listen", _addr(s), "--peer", _addr(x), "--duration", "2",
                   "--start-timeout-s", "1", "--out", "send"], tmp_path)  # fmt: skip
    _, err = rtp.communicate(timeout=60)
    assert rtp.returncode == 2 and "is for --transport webrtc" in err, err


def test_a_loopback_endpoint_may_talk_to_the_machines_own_other_addresses():
    # A socket on 127.0.0.1 reaches every address of this machine (not only loopback ones);
    # only a peer elsewhere is refused at once.
    from sluice import live_procs
    from sluice.errors import SluiceError

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("198.51.100.1", 9))  # no datagram: just the route's source address
            own = s.getsockname()[0]
        except OSError:
            pytest.skip("no route off the machine")
    if own.startswith("127."):
        pytest.skip("no address but loopback")
    live_procs._check_peers("127.0.0.1:5000", [("peer", f"{own}:5001")])
    if own != "198.51.100.1":
        with pytest.raises(SluiceError, match="not on this machine"):
            live_procs._check_peers("127.0.0.1:5000", [("peer", "198.51.100.1:5001")])
