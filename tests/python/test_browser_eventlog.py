"""Chromium's RTC event log (``sluice browser run --event-log``): the delta-encoded fields and
the transport feedback decoded by hand, then a real session's log."""

from __future__ import annotations

import json

from sluice import results
from sluice.browser import eventlog
from sluice.cli import main as cli


class _BitWriter:
    def __init__(self) -> None:
        self.bits = ""

    def put(self, value: int, n: int) -> None:
        self.bits += format(value & ((1 << n) - 1), f"0{n}b")

    def data(self) -> bytes:
        b = self.bits + "0" * (-len(self.bits) % 8)
        return bytes(int(b[i : i + 8], 2) for i in range(0, len(b), 8))


def test_delta_encoded_fields_decode() -> None:
    # Empty: every value is the base.
    assert eventlog.decode_deltas(b"", 7, 3) == [7, 7, 7]
    # Type 0: unsigned 4-bit deltas, 64-bit values: 100 -> 101, 104, 119.
    w = _BitWriter()
    w.put(0, 2), w.put(4 - 1, 6)
    for d in (1, 3, 15):
        w.put(d, 4)
    assert eventlog.decode_deltas(w.data(), 100, 3) == [101, 104, 119]
    # Type 1: signed 5-bit deltas, 16-bit values wrapping: 3 -> 1, 65535, 10 (wraps).
    w = _BitWriter()
    w.put(1, 2), w.put(5 - 1, 6), w.put(1, 1), w.put(0, 1), w.put(16 - 1, 6)
    for d in (-2, -2, 11):
        w.put(d, 5)
    assert eventlog.decode_deltas(w.data(), 3, 3) == [1, 65535, 10]
    # Optional values without a base: the first present one a varint (300), then deltas.
    w = _BitWriter()
    w.put(1, 2), w.put(3 - 1, 6), w.put(0, 1), w.put(1, 1), w.put(16 - 1, 6)
    for e in (0, 1, 0, 1):
        w.put(e, 1)
    w.put(0xAC, 8), w.put(0x02, 8)  # varint 300
    w.put(2, 3)
    assert eventlog.decode_deltas(w.data(), None, 4) == [None, 300, None, 302]


def test_transport_feedback_decodes() -> None:
    # Base 65534, 4 packets: received (+1 ms), lost, received (-0.5 ms), received (+0.25 ms);
    # one two-bit status vector chunk, reference time 2 (x 64 ms).
    fci = bytes([0xFF, 0xFE, 0, 4, 0, 0, 2, 9])
    fci += bytes([0b11_01_00_10, 0b01_00_00_00])  # symbols 1 0 2 1 0 0 0
    fci += bytes([4]) + (-2 & 0xFFFF).to_bytes(2, "big") + bytes([1, 0])
    fb = eventlog.transport_feedback(fci)
    assert fb["fb_count"] == 9 and fb["count"] == 4 and fb["received"] == 3
    ref = 2 * 64_000
    assert fb["packets"] == [[65534, ref + 1000], [65535, None], [0, ref + 500], [1, ref + 750]]


def test_chromium_writes_and_sluice_decodes_the_event_log(tmp_path, capsys) -> None:
    out = tmp_path / "chrome"
    rc = cli(["browser", "run", "--trace", "gen:constant:6", "--duration", "10", "--width",
              "320", "--event-log", "--out", str(out), "--json"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    run = results.load_run(out)
    info = run.header["browser"]["event_log"]
    assert not info["errors"], info
    assert (out / "sender.rtceventlog").stat().st_size > 1000
    assert results.incomplete_reason(out) is None
    recs = eventlog.load(out)
    sender = [r for r in recs if r["peer"] == "sender"]
    # Times on the run's clock, in order, up to the run's end (Chromium's last 5-s write
    # included); the packets sent reach the end of the session.
    times = [r["t_us"] for r in sender]
    assert all(t is not None for t in times) and times == sorted(times)
    assert times[-1] <= info["end_us"]
    sent = [r for r in sender if r["event"] == "rtp_out"]
    assert sent[0]["t_us"] < 2_000_000 and sent[-1]["t_us"] > 9_500_000
    # The delay-based estimate: plausible rates, and set to a probe's result once.
    delay = [r for r in sender if r["event"] == "delay_based"]
    assert delay and all(30_000 < r["bitrate_bps"] < 50_000_000 for r in delay), delay
    assert {r["detector_state"] for r in delay} <= {"normal", "overusing", "underusing"}
    clusters = [r for r in sender if r["event"] == "probe_cluster"]
    probes = [r for r in sender if r["event"] in ("probe_success", "probe_failure")]
    assert clusters and probes
    assert all(r["bitrate_bps"] > 30_000 and r["min_packets"] > 0 for r in clusters)
    assert {r["bitrate_bps"] for r in delay} & {r.get("bitrate_bps") for r in probes}
    assert any(r["event"] == "loss_based" for r in sender)
    # Every packet once (transport-wide numbers consecutive), about as many as the relay
    # carried, and the feedback acknowledges packets that were sent.
    seqs = [r["transport_seq_unwrapped"] for r in sent]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    relay = [json.loads(ln) for ln in (out / results.RELAY_LOG_FILE).read_text().splitlines()]
    media = [d for d in relay if d["dir"] == "down" and d["size_bytes"] > 200]
    big = [r for r in sent if r["size"] > 200]
    assert 0.9 < len(big) / len(media) < 1.1, (len(big), len(media))
    acked = {p[0] for r in sender if r["event"] == "transport_feedback" for p in r["packets"]
             if p[1] is not None}  # fmt: skip
    assert len(acked) > 0.8 * len(sent) and acked <= {s & 0xFFFF for s in seqs}
    # The CSV: the congestion controller's events alone.
    rows = (out / eventlog.CSV_FILE).read_text().splitlines()
    assert rows[0].startswith("t_s,peer,event,bitrate_bps,detector_state")
    assert len(rows) - 1 == sum(1 for r in recs if r["event"] in eventlog.CONTROL_EVENTS)
