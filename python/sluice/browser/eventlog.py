"""libwebrtc's RTC event log, as Chromium writes it (``--webrtc-event-logging=DIR``), decoded
into plain records.

The log is libwebrtc's "new format" (``logging/rtc_event_log/rtc_event_log2.proto``): a
protobuf ``EventStream``, written as concatenated chunks, each a length-delimited field
holding one message of one event type. Most types are batched: the message holds the first
event's fields as plain protobuf fields and the ``number_of_deltas`` further events as one
``bytes`` field per field (``delta_encoding.cc``): a bit stream, most significant bit first,
with a header (2 bits encoding type; 6 bits delta width - 1; for type 1, a signed-deltas bit,
a values-optional bit and 6 bits value width - 1), then for optional values one "exists" bit
per event, then each value as a fixed-width delta from the previous existing value (wrapping
at the value width; signed deltas in two's complement), or, while there is no previous value,
as a varint of 8-bit groups. An empty delta field means every value equals the base. RTCP
packets are batched as blobs: all lengths as varints, then the bytes.

This module is a small hand-written wire decoder for the event types the congestion
controller logs (delay-based and loss-based estimates, probe clusters and results, ALR state,
route changes, remote estimates), the RTP packets sent and received (with the transport-wide
sequence number), the transport-wide feedback, receiver reports, NACKs and REMB inside the
RTCP packets, the stream configurations and the decoded frames. Other event types are
counted and skipped. The legacy format (``rtc_event_log.proto``) and the v3 format are not
decoded (:class:`EventLogError`).

Timestamps: every event has the log's monotonic clock in ms (``log_ms``); the log's first
event (BeginLog) has that clock and the UTC wall clock (ms) read together, so ``t_us`` is the
event's time on the wall clock minus the run's origin (``wall_origin_us``, the relay's first
datagram): the same origin as ``run.jsonl`` and ``relay.jsonl``, to about 1 ms.

What libwebrtc logs (``modules/congestion_controller/goog_cc``):

* ``delay_based``: DelayBasedBwe's estimate and the overuse detector's state, logged when
  either changed, checked once per transport feedback (the state at the end of that
  feedback; an overuse that ends within one feedback is not seen).
* ``loss_based``: SendSideBandwidthEstimation's target, i.e. the loss-based estimate capped
  by the delay-based one (and the configured maximum): the rate the sender uses
  (getStats' ``availableOutgoingBitrate``). Logged when it or ``fraction_loss`` (the last
  RTCP receiver reports', in 1/256) changed, or every 5 s. A target below the delay-based
  estimate is the loss-based estimator's doing; LossBasedBweV2's own state is not logged.
* ``probe_success``: logged at every estimate of a cluster as its feedback arrives; the
  last one of a cluster is the one the controller took.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import SluiceError


class EventLogError(SluiceError):
    pass


#: The decoded records, one JSON object a line (the run directory's).
JSONL_FILE = "eventlog.jsonl"
#: The congestion controller's events alone, as CSV.
CSV_FILE = "eventlog.csv"
#: Record types that are the congestion controller's (the CSV's).
CONTROL_EVENTS = ("delay_based", "loss_based", "probe_cluster", "probe_success",
                  "probe_failure", "alr", "route_change", "remote_estimate")  # fmt: skip
CSV_COLUMNS = ("t_s", "peer", "event", "bitrate_bps", "detector_state", "fraction_loss",
               "total_packets", "id", "min_packets", "min_bytes", "reason", "in_alr",
               "connected", "overhead", "lower_kbps", "upper_kbps", "log_ms")  # fmt: skip

DETECTOR_STATES = {0: "unknown", 1: "normal", 2: "underusing", 3: "overusing"}
PROBE_FAILURES = {0: "unknown", 1: "invalid_send_receive_interval",
                  2: "invalid_send_receive_ratio", 3: "timeout"}  # fmt: skip
CODECS = {0: "unknown", 1: "generic", 2: "vp8", 3: "vp9", 4: "av1", 5: "h264", 6: "h265"}

# --- protobuf wire format -----------------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        if pos >= len(buf):
            raise EventLogError("truncated varint")
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, pos
        shift += 7
        if shift > 63:
            raise EventLogError("varint longer than 10 bytes")


def _fields(buf: bytes) -> dict[int, list[Any]]:
    """A message's fields: number -> values (ints for varint and fixed, bytes otherwise)."""
    out: dict[int, list[Any]] = {}
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        num, wire = tag >> 3, tag & 7
        if wire == 0:
            v, pos = _varint(buf, pos)
        elif wire == 1:
            v, pos = int.from_bytes(buf[pos : pos + 8], "little"), pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            v, pos = buf[pos : pos + n], pos + n
        elif wire == 5:
            v, pos = int.from_bytes(buf[pos : pos + 4], "little"), pos + 4
        else:
            raise EventLogError(f"unsupported protobuf wire type {wire}")
        if pos > len(buf):
            raise EventLogError("truncated protobuf field")
        out.setdefault(num, []).append(v)
    return out


def _chunks(data: bytes) -> tuple[list[tuple[int, bytes]], bool]:
    """The top-level EventStream's fields (number, message); True if the file ends inside
    one (a log cut short: the whole fields before it are kept)."""
    out = []
    pos = 0
    while pos < len(data):
        try:
            tag, p = _varint(data, pos)
            if tag & 7 != 2:
                raise EventLogError(f"top-level field with wire type {tag & 7}")
            n, p = _varint(data, p)
        except EventLogError:
            return out, True
        if p + n > len(data):
            return out, True
        out.append((tag >> 3, data[p : p + n]))
        pos = p + n
    return out, False


# --- delta encoding -----------------------------------------------------------------------


class _Bits:
    """Reads a byte string bit by bit, most significant bit first."""

    def __init__(self, data: bytes) -> None:
        self.bits = "".join(f"{b:08b}" for b in data)
        self.pos = 0

    def read(self, n: int) -> int:
        if self.pos + n > len(self.bits):
            raise EventLogError("delta-encoded field ends early")
        v = int(self.bits[self.pos : self.pos + n], 2) if n else 0
        self.pos += n
        return v

    def varint(self) -> int:
        out = shift = 0
        for _ in range(10):
            b = self.read(8)
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
        raise EventLogError("varint longer than 10 bytes in a delta-encoded field")


def decode_deltas(data: bytes, base: int | None, n: int) -> list[int | None]:
    """The ``n`` values after ``base`` that ``data`` encodes (``delta_encoding.cc``); None
    for a value an optional field does not have."""
    if not data:
        return [base] * n
    r = _Bits(data)
    encoding = r.read(2)
    if encoding not in (0, 1):
        raise EventLogError(f"unknown delta encoding {encoding}")
    delta_width = r.read(6) + 1
    signed, optional, value_width = False, False, 64
    if encoding == 1:
        signed, optional = bool(r.read(1)), bool(r.read(1))
        value_width = r.read(6) + 1
    exists = [bool(r.read(1)) for _ in range(n)] if optional else [True] * n
    value_mask = (1 << value_width) - 1
    delta_mask = (1 << delta_width) - 1
    top = 1 << (delta_width - 1)
    prev = base
    out: list[int | None] = []
    for e in exists:
        if not e:
            out.append(None)
            continue
        if prev is None:
            v = r.varint()
        else:
            d = r.read(delta_width)
            if signed and d & top:
                v = (prev - ((~d & delta_mask) + 1)) & value_mask
            else:
                v = (prev + d) & value_mask
        out.append(v)
        prev = v
    return out


def _signed(v: int | None, bits: int) -> int | None:
    if v is None:
        return None
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _blobs(data: bytes, n: int) -> list[bytes]:
    lengths = []
    pos = 0
    for _ in range(n):
        ln, pos = _varint(data, pos)
        lengths.append(ln)
    out = []
    for ln in lengths:
        out.append(data[pos : pos + ln])
        pos += ln
    if pos != len(data):
        raise EventLogError("blob-encoded field has a wrong length")
    return out


# --- event types --------------------------------------------------------------------------

#: Batched event types: EventStream field -> (record type, number_of_deltas field, fields);
#: each field (name, number, deltas number, kind), kind "u" unsigned, "i64" signed (the log's
#: timestamps), "b" bool, "opt" an optional unsigned (None where absent).
_TS = ("log_ms", 1, 101, "i64")
_RTP = (_TS, ("marker", 2, 102, "b"), ("payload_type", 3, 103, "u"),
        ("seq", 4, 104, "u"), ("rtp_timestamp", 5, 105, "u"), ("ssrc", 6, 106, "u"),
        ("payload_size", 8, 108, "u"), ("header_size", 9, 109, "u"),
        ("padding_size", 10, 110, "u"), ("transport_seq", 15, 115, "opt"),
        ("rtx_osn", 22, 121, "opt"))  # fmt: skip
BATCHED: dict[int, tuple[str, int, tuple[tuple[str, int, int, str], ...]]] = {
    2: ("rtp_in", 11, _RTP),
    3: ("rtp_out", 11, _RTP),
    7: ("frame_decoded", 15, (_TS, ("ssrc", 2, 102, "u"), ("render_time_ms", 3, 103, "i64"),
                              ("width", 4, 104, "u"), ("height", 5, 105, "u"),
                              ("codec", 6, 106, "u"), ("qp", 7, 107, "u"))),
    18: ("loss_based", 5, (_TS, ("bitrate_bps", 2, 102, "u"), ("fraction_loss", 3, 103, "u"),
                           ("total_packets", 4, 104, "u"))),
    19: ("delay_based", 4, (_TS, ("bitrate_bps", 2, 102, "u"),
                            ("detector_state", 3, 103, "u"))),
    33: ("remote_estimate", 4, (_TS, ("lower_kbps", 2, 102, "opt"),
                                ("upper_kbps", 3, 103, "opt"))),
}  # fmt: skip
#: Event types logged one a message: EventStream field -> (record type, fields (name,
#: number, kind)).
SINGLE: dict[int, tuple[str, tuple[tuple[str, int, str], ...]]] = {
    16: ("begin_log", (("log_ms", 1, "i64"), ("version", 2, "u"), ("utc_ms", 3, "i64"))),
    17: ("end_log", (("log_ms", 1, "i64"),)),
    21: ("probe_cluster", (("log_ms", 1, "i64"), ("id", 2, "u"), ("bitrate_bps", 3, "u"),
                           ("min_packets", 4, "u"), ("min_bytes", 5, "u"))),
    22: ("probe_success", (("log_ms", 1, "i64"), ("id", 2, "u"), ("bitrate_bps", 3, "u"))),
    23: ("probe_failure", (("log_ms", 1, "i64"), ("id", 2, "u"), ("reason", 3, "u"))),
    24: ("alr", (("log_ms", 1, "i64"), ("in_alr", 2, "b"))),
    27: ("dtls_state", (("log_ms", 1, "i64"), ("state", 2, "u"))),
    32: ("route_change", (("log_ms", 1, "i64"), ("connected", 2, "b"), ("overhead", 3, "u"))),
    103: ("video_recv_config", (("log_ms", 1, "i64"), ("remote_ssrc", 2, "u"),
                                ("local_ssrc", 3, "u"), ("rtx_ssrc", 4, "u"))),
    104: ("video_send_config", (("log_ms", 1, "i64"), ("ssrc", 2, "u"), ("rtx_ssrc", 3, "u"))),
}  # fmt: skip
RTCP = {4: "in", 5: "out"}


def _convert(v: int | None, kind: str) -> Any:
    if v is None:
        return None
    if kind == "i64":
        return _signed(v, 64)
    if kind == "b":
        return bool(v)
    return v


def _batched(msg: bytes, count_field: int,
             fields: tuple[tuple[str, int, int, str], ...]) -> list[dict[str, Any]]:  # fmt: skip
    f = _fields(msg)

    def last(num: int) -> Any:
        return f[num][-1] if num in f else None

    n = last(count_field) or 0
    columns = {}
    for name, num, dnum, kind in fields:
        base = last(num)
        if base is None and kind != "opt":
            raise EventLogError(f"event without its required field {name}")
        columns[name] = [base, *decode_deltas(last(dnum) or b"", base, n)] if n else [base]
    return [{name: _convert(columns[name][i], kind) for name, _, _, kind in fields}
            for i in range(n + 1)]  # fmt: skip


def _single(msg: bytes, fields: tuple[tuple[str, int, str], ...]) -> dict[str, Any]:
    f = _fields(msg)
    return {name: _convert(f[num][-1] if num in f else None, kind) for name, num, kind in fields}


def _rtcp(msg: bytes) -> list[tuple[int, bytes]]:
    f = _fields(msg)
    ts = f.get(1, [None])[-1]
    raw = f.get(2, [None])[-1]
    if ts is None or raw is None:
        raise EventLogError("RTCP event without its timestamp or packet")
    out = [(_signed(ts, 64), raw)]
    n = f.get(3, [0])[-1]
    if n:
        times = decode_deltas(f.get(101, [b""])[-1], ts, n)
        out += [(_signed(t, 64), b) for t, b in zip(times, _blobs(f.get(102, [b""])[-1], n))]
    return out


# --- RTCP ---------------------------------------------------------------------------------


def _u(b: bytes, i: int, n: int) -> int:
    return int.from_bytes(b[i : i + n], "big")


def transport_feedback(fci: bytes) -> dict[str, Any]:
    """A transport-wide congestion control feedback (draft-holmer-rmcat-transport-wide-cc-
    extensions-01) from its FCI (after the two SSRCs): base sequence number, the packets'
    statuses and their arrival times (µs on the receiver's clock: reference time plus the
    deltas; None for a packet reported lost)."""
    base, count = _u(fci, 0, 2), _u(fci, 2, 2)
    ref = _signed(_u(fci, 4, 3), 24)
    fb_count = fci[7]
    pos = 8
    symbols: list[int] = []
    while len(symbols) < count:
        if pos + 2 > len(fci):
            raise EventLogError("transport feedback ends in its status chunks")
        chunk = _u(fci, pos, 2)
        pos += 2
        if not chunk & 0x8000:  # run length
            symbols += [(chunk >> 13) & 3] * (chunk & 0x1FFF)
        elif not chunk & 0x4000:  # 14 one-bit symbols
            symbols += [(chunk >> (13 - i)) & 1 for i in range(14)]
        else:  # 7 two-bit symbols
            symbols += [(chunk >> (12 - 2 * i)) & 3 for i in range(7)]
    symbols = symbols[:count]
    t = ref * 64_000
    packets: list[list[int | None]] = []
    for i, s in enumerate(symbols):
        seq = (base + i) & 0xFFFF
        if s == 1:
            t += fci[pos] * 250
            pos += 1
        elif s == 2:
            t += _signed(_u(fci, pos, 2), 16) * 250
            pos += 2
        elif s != 0:
            raise EventLogError("transport feedback with a reserved status symbol")
        packets.append([seq, t if s else None])
    received = sum(1 for _, a in packets if a is not None)
    return {"base_seq": base, "count": count, "fb_count": fb_count, "received": received,
            "lost": count - received, "ref_time_us": ref * 64_000, "packets": packets}  # fmt: skip


def _report_blocks(b: bytes, pos: int, n: int) -> list[dict[str, Any]]:
    out = []
    for _ in range(n):
        if pos + 24 > len(b):
            break
        out.append({
            "ssrc": _u(b, pos, 4), "fraction_lost": b[pos + 4],
            "cumulative_lost": _signed(_u(b, pos + 5, 3), 24),
            "ext_highest_seq": _u(b, pos + 8, 4), "jitter": _u(b, pos + 12, 4),
        })  # fmt: skip
        pos += 24
    return out


def rtcp_records(raw: bytes) -> list[dict[str, Any]]:
    """The parts of a (compound) RTCP packet decoded here: transport feedback, report
    blocks (of SR and RR), NACK (the number of sequence numbers asked for), PLI, FIR, REMB;
    other packets as ``rtcp_other`` with their type."""
    out: list[dict[str, Any]] = []
    pos = 0
    while pos + 4 <= len(raw):
        fmt, pt = raw[pos] & 0x1F, raw[pos + 1]
        size = (_u(raw, pos + 2, 2) + 1) * 4
        b = raw[pos : pos + size]
        pos += size
        if len(b) < size:
            break
        if pt in (200, 201):
            blocks = _report_blocks(b, 28 if pt == 200 else 8, fmt)
            if blocks:
                out.append({"event": "rtcp_report", "sr": pt == 200, "blocks": blocks})
        elif pt == 205 and fmt == 15 and len(b) >= 20:
            out.append({"event": "transport_feedback", "media_ssrc": _u(b, 8, 4),
                        **transport_feedback(b[12:])})  # fmt: skip
        elif pt == 205 and fmt == 1:
            n = 0
            for i in range(12, len(b) - 3, 4):
                n += 1 + bin(_u(b, i + 2, 2)).count("1")
            out.append({"event": "rtcp_nack", "media_ssrc": _u(b, 8, 4), "packets": n})
        elif pt == 206 and fmt == 15 and b[12:16] == b"REMB" and len(b) >= 20:
            exp, mantissa = b[17] >> 2, _u(b, 17, 3) & 0x3FFFF
            out.append({"event": "rtcp_remb", "bitrate_bps": mantissa << exp})
        elif pt == 206 and fmt in (1, 4):
            out.append({"event": "rtcp_pli" if fmt == 1 else "rtcp_fir",
                        "media_ssrc": _u(b, 8, 4)})  # fmt: skip
        else:
            out.append({"event": "rtcp_other", "pt": pt, "fmt": fmt})
    return out


# --- the log ------------------------------------------------------------------------------


def decode(data: bytes) -> dict[str, Any]:
    """The events of one log, in the order logged: ``{"events": [...], "begin": the first
    BeginLog (or None), "truncated": bool, "skipped": {field number: count}}``. Each event a
    dict with ``event`` (its type) and ``log_ms``."""
    if not data:
        raise EventLogError("the event log is empty")
    chunks, truncated = _chunks(data)
    if chunks and chunks[0][0] == 1:
        raise EventLogError("a legacy-format event log (rtc_event_log.proto): not decoded here")
    if not chunks or chunks[0][0] != 16:
        raise EventLogError("not a new-format RTC event log (no BeginLog event first)")
    events: list[dict[str, Any]] = []
    skipped: Counter[int] = Counter()
    for num, msg in chunks:
        if num in BATCHED:
            kind, count_field, fields = BATCHED[num]
            for e in _batched(msg, count_field, fields):
                events.append({"event": kind, **e})
        elif num in SINGLE:
            kind, sfields = SINGLE[num]
            events.append({"event": kind, **_single(msg, sfields)})
        elif num in RTCP:
            for ts, raw in _rtcp(msg):
                for r in rtcp_records(raw):
                    events.append({**r, "dir": RTCP[num], "log_ms": ts})
        else:
            skipped[num] += 1
    begin = next((e for e in events if e["event"] == "begin_log"), None)
    return {"events": events, "begin": begin, "truncated": truncated, "skipped": dict(skipped)}


def _tidy(e: dict[str, Any]) -> dict[str, Any]:
    kind = e["event"]
    if kind == "delay_based":
        e["detector_state"] = DETECTOR_STATES.get(e["detector_state"], str(e["detector_state"]))
    elif kind == "probe_failure":
        e["reason"] = PROBE_FAILURES.get(e["reason"], str(e["reason"]))
    elif kind == "frame_decoded":
        e["codec"] = CODECS.get(e["codec"], str(e["codec"]))
    elif kind in ("rtp_in", "rtp_out"):
        e["size"] = e["payload_size"] + e["header_size"] + e["padding_size"]
    return e


def _unwrap_transport_seq(recs: list[dict[str, Any]]) -> None:
    """Adds ``transport_seq_unwrapped`` (the 16-bit number made monotonic) to RTP records."""
    prev: int | None = None
    for r in recs:
        seq = r.get("transport_seq")
        if seq is None:
            r["transport_seq_unwrapped"] = None
            continue
        if prev is None:
            prev = seq
        else:
            prev += ((seq - prev + 0x8000) & 0xFFFF) - 0x8000
        r["transport_seq_unwrapped"] = prev


def records(data: bytes, wall_origin_us: int | None, peer: str) -> list[dict[str, Any]]:
    """One log's events as records: ``peer``, ``event``, ``t_us`` (µs from
    ``wall_origin_us`` on the wall clock; None without an origin or a BeginLog event),
    ``log_ms`` (the log's own clock) and the event's fields; sorted by time. The log batches
    RTP packets by SSRC, so packets of one millisecond are ordered by their transport-wide
    sequence number (RTP records also have it unwrapped: ``transport_seq_unwrapped``)."""
    log = decode(data)
    begin = log["begin"]
    offset_ms = (begin["utc_ms"] - begin["log_ms"]) if begin and begin["utc_ms"] else None
    out = []
    for e in log["events"]:
        t_us = None
        if offset_ms is not None and wall_origin_us is not None:
            t_us = (e["log_ms"] + offset_ms) * 1000 - wall_origin_us
        out.append(_tidy({"peer": peer, "event": e.pop("event"), "t_us": t_us, **e}))
    # Stable: events of one type are logged in order.
    out.sort(key=lambda r: r["log_ms"])
    for kind in ("rtp_out", "rtp_in"):
        _unwrap_transport_seq([r for r in out if r["event"] == kind])

    def key(r: dict[str, Any]) -> tuple[int, int]:
        seq = r.get("transport_seq_unwrapped")
        return r["log_ms"], -1 if seq is None else seq

    out.sort(key=key)
    return out


def write_jsonl(recs: Iterable[dict[str, Any]], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in recs:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")


def write_csv(recs: Iterable[dict[str, Any]], path: Path,
              events: tuple[str, ...] = CONTROL_EVENTS) -> None:  # fmt: skip
    """The records of type ``events`` as CSV (:data:`CSV_COLUMNS`; ``t_s`` in seconds)."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, CSV_COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in recs:
            if r["event"] in events:
                t = r.get("t_us")
                w.writerow({**r, "t_s": None if t is None else f"{t / 1e6:.3f}"})


def load(path: str | Path) -> list[dict[str, Any]]:
    """The records of an ``eventlog.jsonl`` (a run directory's, or the file)."""
    p = Path(path)
    if p.is_dir():
        p = p / JSONL_FILE
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise SluiceError(f"cannot read {p}: {e.strerror or e}") from None
    return [json.loads(ln) for ln in lines if ln.strip()]
