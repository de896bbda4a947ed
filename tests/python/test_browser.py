"""Real Chromium in the loop: Chromium sends to Chromium through Sluice's trace relay, and
the session is a result like any run's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from sluice import results
from sluice.browser import records, server
from sluice.cli import main as cli

SDP = "\r\n".join([
    "v=0", "m=video 9 UDP/TLS/RTP/SAVPF 96", "a=mid:0",
    "a=candidate:1 1 udp 2122194687 127.0.0.1 57685 typ host generation 0",
    "a=candidate:2 1 udp 2122063615 192.0.2.2 40350 typ host generation 0",
    "a=candidate:3 1 tcp 1518214911 127.0.0.1 9 typ host tcptype active generation 0",
    "a=end-of-candidates", "",
])  # fmt: skip


def test_candidates_are_rewritten_to_the_relay_alone() -> None:
    assert server.loopback_port(SDP) == 57685
    out = server.rewrite(SDP, 40000)
    cands = [ln for ln in out.splitlines() if ln.startswith("a=candidate")]
    assert cands == ["a=" + server.candidate_line(40000)]
    assert "127.0.0.1 40000 typ host" in cands[0]
    assert not [ln for ln in server.rewrite(SDP, None).splitlines() if "candidate" in ln]


def test_frames_take_their_capture_time_from_rtp_until_abs_capture_time_arrives() -> None:
    # 30 fps, RTP at 90 kHz; the first two frames have no captureTime; slot 3 never shown.
    origin_us = 1_000_000_000_000
    base_ms = origin_us / 1000 + 100
    shown = []
    for k in (0, 1, 2, 4):
        cap = base_ms + k * 1000 / 30
        shown.append({"rtp_timestamp": 5000 + 3000 * k,
                      "capture_ms": cap if k >= 2 else None,
                      "receive_ms": cap + 30, "expected_display_ms": cap + 50})  # fmt: skip
    frames, skips = records.frames_and_skips(shown, origin_us, 30.0, 300_000)
    assert [f["source_index"] for f in frames] == [0, 1, 2, 4]
    assert [round(f["latency_us"]) for f in frames] == [50_000] * 4
    assert frames[0]["chrome_capture_from_rtp"] and not frames[2]["chrome_capture_from_rtp"]
    # Slots 3 and 5 (200 and 266.7 ms from the origin, before the end of capture at 300 ms)
    # were not displayed.
    assert [(s["source_index"], s["reason"]) for s in skips] == [(3, "not-displayed"),
                                                                (5, "not-displayed")]


def _datagram(t_us: int, ssrc: int, seq: int, ts: int, dir: str = "down") -> dict:
    return {"arrived_us": t_us, "dir": dir, "size_bytes": 1100, "left_us": t_us + 20_000,
            "dropped": False, "rtp_ssrc": ssrc, "rtp_pt": 96, "rtp_seq": seq, "rtp_ts": ts,
            "rtp_marker": False}  # fmt: skip


def test_a_frames_packet_train_comes_from_the_relays_rtp_headers() -> None:
    video, rtx = 0xAAAA, 0xBBBB
    frames = [{"chrome_rtp_timestamp": ts} for ts in (3000, 6000, 9000)]
    log = [
        {"arrived_us": 5, "dir": "down", "size_bytes": 100, "left_us": 9, "dropped": False},
        # Frame 3000: three packets over 400 us, one of them arriving twice.
        _datagram(1000, video, 65_535, 3000), _datagram(1200, video, 0, 3000),
        _datagram(1300, video, 0, 3000), _datagram(1400, video, 1, 3000),
        # A retransmission on RTX's SSRC (same RTP timestamp) and feedback the other way.
        _datagram(90_000, rtx, 7, 3000), _datagram(1250, video, 5, 3000, dir="up"),
        # Frame 6000: one packet; the same sequence number as the first frame's, after a wrap.
        _datagram(34_000, video, 65_535, 6000),
        # Another stream's packets with frame 9000's timestamp do not make its train.
        _datagram(40_000, rtx, 8, 9000),
    ]
    assert records.add_relay_trains(frames, log, shift_us=-1000) == 2
    assert [(f["chrome_first_at_relay_us"], f["chrome_last_at_relay_us"],
             f["chrome_packets_at_relay"]) for f in frames] == [
        (0, 400, 3), (33_000, 33_000, 1), (None, None, None)]  # fmt: skip
    # A log without RTP headers (a run from before the relay logged them) leaves the frames.
    bare = [{"chrome_rtp_timestamp": 3000}]
    assert records.add_relay_trains(bare, log[:1]) == 0 and bare == [{"chrome_rtp_timestamp": 3000}]


def test_fec_after_a_frames_marked_packet_is_apart_from_its_train() -> None:
    """Chromium adds ULPFEC packets to a frame under loss, on the video SSRC with the frame's
    timestamp, numbered after its marked last packet: the train is the media packets only,
    the FEC is counted apart, and the sequence order holds across a wrap."""
    video = 0xAAAA
    frames = [{"chrome_rtp_timestamp": ts} for ts in (3000, 6000)]
    log = [
        # Frame 3000: media 65_534, 65_535, 0 (marked) over 200 us; FEC 1 and 2 after 25 ms,
        # 30 bytes larger; the FEC packet 1 arrives before the media packet 0 (not in order).
        _datagram(1000, video, 65_534, 3000), _datagram(1100, video, 65_535, 3000),
        {**_datagram(26_000, video, 1, 3000), "size_bytes": 1130},
        {**_datagram(1200, video, 0, 3000), "rtp_marker": True},
        {**_datagram(26_100, video, 2, 3000), "size_bytes": 1130},
        # Frame 6000: one marked packet, no FEC.
        {**_datagram(34_000, video, 3, 6000), "rtp_marker": True},
    ]
    assert records.packet_trains(log) == {3000: [1000, 1100, 1200], 6000: [34_000]}
    assert records.add_relay_trains(frames, log) == 2
    assert [(f["chrome_first_at_relay_us"], f["chrome_last_at_relay_us"],
             f["chrome_packets_at_relay"], f["chrome_fec_packets_at_relay"])
            for f in frames] == [(1000, 1200, 3, 2), (34_000, 34_000, 1, 0)]  # fmt: skip
    assert records.fec_bytes(log) == (2 * 1130, 4 * 1100 + 2 * 1130)
    # Only delivered bytes count; a dropped marked packet still ends its frame's media.
    dropped = [{**d, "dropped": d.get("rtp_seq") in (0, 2)} for d in log]
    assert records.fec_bytes(dropped) == (1130, 3 * 1100 + 1130)
    assert records.fec_bytes(log[:1] + [{"arrived_us": 5, "dir": "down"}]) == (0, 1100)
    assert records.fec_bytes([{"arrived_us": 5, "dir": "down"}]) == (0, 0)


def test_the_gaps_inside_frames_that_did_not_leave_in_one_burst(tmp_path) -> None:
    from sluice.analysis.chrome import split_frame_gaps_ms

    video, rtx = 0xAAAA, 0xBBBB
    log = [
        # Frame 3000: four packets back to back, the marked last one 40 ms later.
        *(_datagram(1000 + 20 * k, video, k, 3000) for k in range(4)),
        {**_datagram(41_000, video, 4, 3000), "rtp_marker": True},
        # Frame 6000: one burst (not split); a duplicate of its packet counts once.
        {**_datagram(50_000, video, 5, 6000), "rtp_marker": True},
        _datagram(50_010, video, 5, 6000),
        # Frame 9000: paced, a packet every 2 ms; a retransmission on RTX's SSRC.
        *(_datagram(80_000 + 2000 * k, video, 6 + k, 9000) for k in range(3)),
        {**_datagram(86_000, video, 9, 9000), "rtp_marker": True},
        _datagram(120_000, rtx, 1, 9000),
    ]
    (tmp_path / "relay.jsonl").write_text("".join(json.dumps(d) + "\n" for d in log))
    split, frames, gaps = split_frame_gaps_ms(tmp_path)
    assert (split, frames) == (2, 3)
    assert sorted(np.round(gaps, 2)) == [0.02, 0.02, 0.02, 2.0, 2.0, 2.0, 39.94]
    # A run without a relay log, or one from before the relay read RTP headers: none.
    assert split_frame_gaps_ms(tmp_path / "elsewhere")[:2] == (0, 0)
    (tmp_path / "relay.jsonl").write_text(json.dumps({k: v for k, v in log[0].items()
                                                      if not k.startswith("rtp")}) + "\n")
    assert split_frame_gaps_ms(tmp_path)[:2] == (0, 0)


def test_chromium_sends_to_chromium_through_the_relay(tmp_path, capsys) -> None:
    out = tmp_path / "chrome"
    rc = cli(["browser", "run", "--trace", "gen:constant:6", "--duration", "10", "--width",
              "320", "--out", str(out), "--json"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)
    run = results.load_run(out)
    assert run.scheme == "chrome" and run.header["browser"]["codec"] == "vp8"
    # Every frame Chromium sent is displayed, each with its latency. Chromium's own sender
    # skips capture slots when its machine is busy (35 of 300 in one clean-root check, with
    # every sent frame shown at a P95 of 65 ms): at least 80 % of the slots.
    shown = run.frames[run.frames["displayed_us"].notna()]
    assert summary["frames_displayed"] >= 0.98 * summary["frames_sent"], summary
    assert len(shown) >= 240, len(shown)
    assert (shown["latency_us"] > 0).all() and (shown["latency_us"] < 1_000_000).all()
    assert summary["frames_displayed"] == len(shown)
    assert summary["latency_all_ms"]["p95"] >= summary["latency_ms"]["p95"] * 0.99
    # Chromium's target and the relay's link are in the samples; every datagram in the log.
    assert run.samples["target_rate_bps"].max() > 100_000
    assert run.samples["chrome_available_outgoing_bitrate_bps"].notna().any()
    log = [json.loads(ln) for ln in (out / results.RELAY_LOG_FILE).read_text().splitlines()]
    down = [d for d in log if d["dir"] == "down"]
    assert len(down) > 500 and all(d["left_us"] is not None for d in down[:-20])
    # The relay read the RTP headers (SRTP's are in the clear): nearly every displayed frame
    # has its packet train, and at 6 Mbps Chromium's 40 ms burst sends a frame's packets
    # within a few milliseconds (a pacer without a burst would spread them over ~30 ms).
    assert sum("rtp_ssrc" in d for d in down) > 0.9 * len(down)
    trains = shown["chrome_packets_at_relay"].dropna()
    assert len(trains) >= 0.95 * len(shown) and (trains >= 1).all()
    from sluice.analysis.chrome import send_spans_ms

    spans = send_spans_ms(run)
    assert len(spans) == len(trains) and (spans >= 0).all() and np.median(spans) < 10, spans
    # The video bitrate is bytesReceived less the FEC share the relay counted (a share,
    # whatever Chromium's FEC did on this link).
    share = summary["chrome_fec_bytes_share"]
    assert share is not None and 0 <= share < 0.5, summary
    assert summary["video_bitrate_bps"] == pytest.approx(
        summary["chrome_bytes_received_bps"] * (1 - share))
    assert 0 < summary["utilization"] < 1
    # `sluice plot` draws it.
    assert cli(["plot", str(out)]) == 0
    assert (out / "timeseries.png").stat().st_size > 10_000


@pytest.mark.parametrize("scheme", ["ace", "vidaptive"])
def test_a_sluice_sender_sends_to_chromium_over_webrtc(tmp_path, capsys, scheme) -> None:
    # Issue 28: the scheme's sender (x264) to a Chromium receiver page through a constant
    # 6 Mbps relay over WebRTC (str0m offers, DTLS-SRTP); Chromium's transport-cc feedback
    # drives the scheme.
    out = tmp_path / scheme
    rc = cli(["browser", "run", "--scheme", scheme, "--trace", "gen:constant:6", "--duration",
              "10", "--width", "320", "--out", str(out), "--json"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)
    run = results.load_run(out)
    assert run.scheme == scheme and run.header["browser"]["sender"] == "sluice"
    sent = run.header["browser"]["sluice_sender"]
    webrtc = sent["webrtc"]
    # Every packet str0m sent for Sluice was mapped to Chromium's transport-cc feedback,
    # which came all along (a report every 50 to 250 ms) and named nothing else.
    # Padding went on the RTX stream (libwebrtc's way), never as an empty media packet.
    assert webrtc["rtp_written"] > 1000 and webrtc["padding_unpadded"] == 0, webrtc
    assert webrtc["twcc_mapped"] == webrtc["rtp_written"] + webrtc["padding_rtx_packets"], webrtc
    assert webrtc["twcc_reports"] >= 50 and webrtc["twcc_unmapped"] == 0, webrtc
    assert summary["srtp_auth_failed"] == 0
    # At least 90 % of the frames the scheme sent are displayed, each with its latency
    # (the capture slots the scheme skipped itself are not the transport's; see docs).
    shown = run.frames[run.frames["displayed_us"].notna()]
    assert len(shown) >= 0.9 * sent["frames_encoded"], (len(shown), sent)
    assert (shown["latency_us"] > 0).all()
    # The bottleneck's columns come from the relay's link samples (they were all 0): the
    # trace's 6 Mbps, what the relay delivered, which is the video's rate.
    later = run.samples[run.samples["t_us"] > 1_000_000]
    assert later["link_capacity_bps"].between(5_500_000, 6_500_000).all(), later
    delivered = later["delivered_rate_bps"].mean()
    assert 0.5 * summary["video_bitrate_bps"] < delivered < 6_500_000, (delivered, summary)
    assert summary["bwe_ratio"] is not None
    fps = run.header["browser"]["fps"]
    print(f"{scheme}: {len(shown)} of {round(10 * fps)} slots displayed, {sent}")


def test_chromium_sends_to_a_sluice_receiver_over_webrtc(tmp_path, capsys) -> None:
    # Issue 28: Chromium's sender page (H.264) to Sluice's receiver (ICE-lite, DTLS-SRTP);
    # str0m gives Chromium's GCC its transport-cc feedback and receiver reports.
    out = tmp_path / "to-sluice"
    rc = cli(["browser", "run", "--receiver", "sluice", "--trace", "gen:constant:6",
              "--duration", "10", "--width", "320", "--out", str(out), "--json",
              "--keep-work"])  # fmt: skip
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    summary = json.loads(captured.out)
    # --keep-work says where it kept the work directory.
    kept = Path(captured.err.strip().splitlines()[-1].rpartition(": ")[2])
    assert (kept / "relay-events.json").is_file(), captured.err
    shutil.rmtree(kept)
    run = results.load_run(out)
    assert run.header["browser"]["receiver"] == "sluice"
    got = run.header["browser"]["sluice_receiver"]
    assert got["webrtc"]["srtp_auth_failed"] == 0 and got["malformed"] == 0, got
    # At least 90 % of the 300 capture slots displayed by Sluice's receiver.
    shown = run.frames[run.frames["displayed_us"].notna()]
    assert len(shown) >= 270, (len(shown), got)
    assert summary["frames_displayed"] == len(shown)
    assert (shown["latency_us"] > 0).all()
    # No receiver page: the rate is what the relay delivered to Sluice's receiver in the
    # session's 10 s (fewer bytes than it delivered in all, drain and teardown included).
    total = run.header["browser"]["relay"]["delivered_bytes"] * 8 / 10
    assert 100_000 < summary["video_bitrate_bps"] < total
    # Chromium's congestion controller ran on that feedback: a target rate, and an RTT from
    # str0m's receiver reports.
    assert run.samples["target_rate_bps"].max() >= 300_000
    assert run.samples["rtt_us"].notna().any()


def test_the_relays_link_is_put_on_the_endpoints_clock():
    # The relay started 1 s after the endpoint: its samples move 1 s later, and there is no
    # capacity before it (a clamped interval once read as 24 Gbit/s).
    from sluice import traces
    from sluice.browser import harness

    trace = traces.load_trace("gen:constant:12", duration_s=10).trace
    part = {"wall_origin_us": 5_000_000, "link_samples": [{"t_us": 0, "delivered_bytes": 0},
                                                          {"t_us": 100_000,
                                                           "delivered_bytes": 150_000}]}
    link, cap, total = harness._link_on_clock(part, trace, 4_000_000, 3_000_000)
    assert [x["t_us"] for x in link] == [1_000_000, 1_100_000]
    assert cap(0, 500_000) == 0.0
    assert cap(1_000_000, 2_000_000) == pytest.approx(12e6, rel=0.01)
    assert cap(500_000, 1_500_000) == pytest.approx(6e6, rel=0.01)  # half of it there
    assert total == pytest.approx(2 * 12e6 / 8, rel=0.01)  # 2 s of the session's 3
    samples = harness.with_link([{"t_us": 1_000_000}, {"t_us": 1_100_000}], link, cap)
    assert samples[1]["delivered_rate_bps"] == 12_000_000
    assert samples[1]["link_capacity_bps"] == pytest.approx(12e6, rel=0.01)


def test_target_agreement_counts_the_seconds_within_20_percent_of_chromiums(tmp_path) -> None:
    """The target agreement compares per-second medians after 5 s, only at caps Chromium's GCC
    also has, and pools every second of every trace."""
    from sluice import results
    from sluice.analysis.chrome import target_agreement

    def write(side: str, trace: str, key: str, rate) -> None:
        samples = [{"record": "sample", "t_us": t * 100_000, key: rate(t / 10)}
                   for t in range(200)]  # fmt: skip
        header = {"record": "header", "schema_version": results.SCHEMA_VERSION}
        results.write_run(tmp_path / trace / "cap20" / side, header, [], samples, {"seed": 1})

    chrome = "chrome_available_outgoing_bitrate_bps"
    # Trace a: the simulator at 1.1x for 10 s, then 1.5x (and anything before 5 s ignored).
    write("chrome", "a", chrome, lambda s: 2e6)
    write("sim", "a", "target_rate_bps", lambda s: 1e5 if s < 5 else 2.2e6 if s < 15 else 3e6)
    # Trace b: always within.
    write("chrome", "b", chrome, lambda s: 4e6)
    write("sim", "b", "target_rate_bps", lambda s: 3.5e6)
    # Trace c: a Chromium run without the estimate (no getStats column): no value.
    write("chrome", "c", "target_rate_bps", lambda s: 1e6)
    write("sim", "c", "target_rate_bps", lambda s: 1e6)
    plan = {"cap": [{"label": "cap2.5", "chromium_default": True}, {"label": "cap20"}],
            "trace": [{"label": "a"}, {"label": "b"}, {"label": "c"}], "variant": []}  # fmt: skip
    table = target_agreement(plan, tmp_path)
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:-1]]
            for r in table.splitlines()[2:]}  # fmt: skip
    assert rows["`a`"] == ["cap20", "67% (x1.10)"]  # seconds 5-14 in, 15-19 out
    assert rows["`b`"] == ["cap20", "100% (x0.88)"]
    assert rows["`c`"] == ["cap20", "-"]
    assert rows["all traces"] == ["cap20", "**83%**"]  # 25 of 30 seconds
    assert "cap2.5" not in table  # Chromium caps its encoder there, not GCC
    assert target_agreement({**plan, "cap": plan["cap"][:1]}, tmp_path) is None


def test_several_chromium_runs_are_compared_by_their_median_and_span(tmp_path) -> None:
    """With ``chrome_repeats`` > 1 a side is compared with the median of Chromium's runs, its
    value said to be in range when it lies between their lowest and highest, and the target
    agreement pools Chromium's runs and compares its later runs with its first."""
    from sluice import results
    from sluice.analysis.chrome import agreement_counts, table, target_agreement

    plan = {"cap": [{"label": "cap20"}], "trace": [{"label": "a"}, {"label": "b"}],
            "variant": [], "live": False, "chrome_repeats": 3}  # fmt: skip

    def r(trace: str, side: str, rep: int, mbps: float, p95: float) -> dict:
        return {"trace": trace, "cap": "cap20", "side": side, "rep": rep,
                "video_bitrate_bps": mbps * 1e6, "latency_all_ms_p95": p95}  # fmt: skip

    rows = [r("a", "chrome", 1, 2.0, 100), r("a", "chrome", 2, 2.2, 300),
            r("a", "chrome", 3, 3.0, 150), r("a", "sim", 1, 2.3, 200),
            r("b", "chrome", 1, 4.0, 80), r("b", "sim", 1, 5.0, 81)]  # fmt: skip
    lines = table(plan, rows, "cap20").splitlines()
    med = next(x for x in lines if "median of 3 runs" in x).split("|")
    assert med[3].strip() == "2.20" and med[8].strip() == "150"
    span = next(x for x in lines if "lowest-highest" in x).split("|")
    assert span[3].strip() == "2.00-3.00" and span[8].strip() == "100-300"
    ratios = [x for x in lines if "sim / chrome" in x]
    # a: bitrate 2.3 / 2.2 in range; P95 200 / 150 off by a third, but inside 100-300
    assert "bitrate x1.05 (in range)" in ratios[0] and "P95 x**1.33** (in range)" in ratios[0]
    # b: one Chromium run: no range
    assert "bitrate x**1.25**;" in ratios[1] and "in range" not in ratios[1]
    counts = agreement_counts(plan, rows).splitlines()
    head = [c.strip() for c in counts[0].split("|")[1:-1]]
    sim = dict(zip(head, (c.strip() for c in counts[2].split("|")[1:-1])))
    assert sim["bitrate within 20%"] == "1 of 2" and sim["bitrate in Chromium's range"] == "1 of 2"
    assert sim["P95 within 20%"] == "1 of 2" and sim["P95 in Chromium's range"] == "1 of 2"
    assert sim["P95 median ratio"] == "x1.17"

    def write(d: str, key: str, rate) -> None:
        samples = [{"record": "sample", "t_us": t * 100_000, key: rate} for t in range(150)]
        header = {"record": "header", "schema_version": results.SCHEMA_VERSION}
        results.write_run(tmp_path / "a" / "cap20" / d, header, [], samples, {"seed": 1})

    chrome = "chrome_available_outgoing_bitrate_bps"
    write("chrome", chrome, 2e6)
    write("chrome-run2", chrome, 2.5e6)  # 1.25x its first run: outside 20 %
    write("chrome-run3", chrome, 2.2e6)  # 1.1x the first, 0.88x the second: within
    write("sim", "target_rate_bps", 2.2e6)  # within 20 % of all three
    agree = {x.split("|")[1].strip(): [c.strip() for c in x.split("|")[3:-1]]
             for x in target_agreement(plan, tmp_path).splitlines()[2:]}  # fmt: skip
    assert agree["`a`"] == ["100% (x1.00)", "67% (x1.10)"]  # two of its three pairs
    assert agree["all traces"] == ["**100%**", "**67%**"]


def test_the_report_reads_each_run_once_and_forgets_it_after(tmp_path, monkeypatch) -> None:
    """While the report is written a run is loaded once for all its tables; a run made after
    it (or a failed report) is read afresh."""
    from sluice import results
    from sluice.analysis import chrome
    from sluice.errors import SluiceError

    header = {"record": "header", "schema_version": results.SCHEMA_VERSION}
    d = tmp_path / "a" / "cap20" / "sim"
    results.write_run(d, header, [], [{"record": "sample", "t_us": 0}], {"seed": 1})
    loads = []
    real = results.load_run
    monkeypatch.setattr(results, "load_run", lambda p: loads.append(p) or real(p))
    chrome._report_cache = {}
    try:
        assert chrome._run(d) is chrome._run(d) and len(loads) == 1
    finally:
        chrome._report_cache = None
    chrome._run(d)
    assert len(loads) == 2
    plan = {"cap": [{"label": "cap20", "kbps": 20000}],
            "trace": [{"label": "b", "path": "gen:constant:1"}], "variant": []}  # fmt: skip
    with pytest.raises(SluiceError, match="no finished runs"):
        chrome.write_report(plan, tmp_path, tmp_path / "out", "cmd")
    assert chrome._report_cache is None
