"""What a browser session recorded, as the records of a simulated run (scheme ``chrome``).

Clock: the relay's. Its origin (its first datagram, an ICE check) is time 0; the pages'
times (milliseconds since the Unix epoch, ``performance.timeOrigin`` plus the page's clock)
are shifted onto it. All processes run on one host, so they read one clock.

* **Frames** come from the receiver page's ``requestVideoFrameCallback``: one record per
  displayed frame. ``capture_us`` is the metadata's ``captureTime`` (from the
  abs-capture-time header extension, the sender's clock); frames shown before it arrives
  get theirs from the RTP timestamp (90 kHz, the capturer's clock) and the offset the others
  give. ``displayed_us`` is ``expectedDisplayTime``, ``completed_us`` ``receiveTime``,
  ``latency_us`` their difference to the capture. The capture slot (``source_index``) is
  the RTP timestamp's, in frame intervals from the first displayed frame. Sizes, QPs and
  encode times are not reported per frame (0 or NaN).
* **Packet trains** (``chrome_first_at_relay_us``, ``chrome_last_at_relay_us``,
  ``chrome_packets_at_relay``): when the displayed frame's first and last packet reached the
  relay, and how many there were, from the relay's datagram log (each RTP packet's fixed
  header is in the clear under SRTP): the packets of the video SSRC whose RTP timestamp is
  the frame's up to its marked last packet, each sequence number counted once
  (retransmissions go on RTX's SSRC; the ULPFEC packets Chromium adds after the marked one
  under loss are counted apart, ``chrome_fec_packets_at_relay``, and their share of the
  video stream's bytes is the summary's ``chrome_fec_bytes_share``). Chromium
  sends to the relay over loopback, so these are its send times plus the sending path's own
  time per packet (tens of microseconds); Chromium's ``first_packet_sent_us`` and
  ``last_packet_sent_us`` stay empty, as the sender's own clock never saw them.
* **Skips**: the slots between the first displayed frame and the end of capture that no
  displayed frame had, reason ``not-displayed`` (Chromium's encoder may have dropped them,
  or the receiver never showed them): the all-slot latency charges each until the next
  frame shown, as for every scheme.
* **Samples** every ``stats_ms`` (100 ms) from both pages' getStats and the relay's link
  samples: the target rate (``targetBitrate``), the rate on the wire (``bytesSent`` +
  ``headerBytesSent``), the pacer delay (``totalPacketSendDelay`` per packet sent), the
  RTT (``currentRoundTripTime``), the bottleneck's queue and delivered rate; Chromium's own
  values as ``chrome_*`` columns.
* **Summary**: the core's own (``_core.summarize_records``), with the relay's link counters;
  ``video_bitrate_bps`` is the receiver's ``bytesReceived`` over the session (no per-frame
  sizes) less the share of the video stream's delivered bytes that were ULPFEC
  (``chrome_fec_bytes_share``, from the relay's log; ``bytesReceived`` counts them, and a
  simulated run's bitrate is encoded bytes only); ``chrome_bytes_received_bps`` is
  ``bytesReceived`` alone; ``freeze_count`` applies WebRTC's rule to the displayed frames
  as for every run, and ``chrome_freeze_count`` / ``chrome_total_freezes_duration_s`` are
  getStats' own ``freezeCount`` and ``totalFreezesDuration``.
"""

from __future__ import annotations

import json
import math
from statistics import median
from typing import Any

from ..errors import core

RTP_CLOCK_HZ = 90_000


def _us(ms: float | None, origin_us: int) -> int | None:
    if ms is None or not isinstance(ms, (int, float)) or not math.isfinite(ms):
        return None
    return round(ms * 1000) - origin_us


def _unwrap(values: list[int]) -> list[int]:
    """32-bit RTP timestamps made monotonic across wraps."""
    out: list[int] = []
    base = 0
    prev: int | None = None
    for v in values:
        if prev is not None and v - prev < -(1 << 31):
            base += 1 << 32
        elif prev is not None and v - prev > (1 << 31):
            base -= 1 << 32
        out.append(v + base)
        prev = v
    return out


def frames_and_skips(
    shown: list[dict[str, Any]], origin_us: int, fps: float, capture_end_us: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The frame records of the displayed frames and the skip records of the slots none
    showed (see the module documentation)."""
    shown = [f for f in shown if isinstance(f.get("rtp_timestamp"), int)]
    if not shown:
        return [], []
    rtp = _unwrap([int(f["rtp_timestamp"]) for f in shown])
    # capture (ms) - rtp / 90: the offset between the capturer's RTP clock and the wall clock.
    offsets = [
        f["capture_ms"] - r * 1000 / RTP_CLOCK_HZ
        for f, r in zip(shown, rtp)
        if isinstance(f.get("capture_ms"), (int, float))
    ]
    offset = median(offsets) if offsets else None
    rtp0 = min(rtp)
    frame_ticks = RTP_CLOCK_HZ / fps
    frames: list[dict[str, Any]] = []
    seen: set[int] = set()
    first_capture_us: int | None = None
    for i, (f, r) in enumerate(zip(shown, rtp)):
        capture_ms = f.get("capture_ms")
        if not isinstance(capture_ms, (int, float)):
            if offset is None:
                continue
            capture_ms = offset + r * 1000 / RTP_CLOCK_HZ
        capture_us = _us(capture_ms, origin_us)
        displayed_us = _us(f.get("expected_display_ms"), origin_us)
        if capture_us is None or displayed_us is None:
            continue
        slot = round((r - rtp0) / frame_ticks)
        if slot in seen:  # the same frame shown again (a repeated callback)
            continue
        seen.add(slot)
        if first_capture_us is None or capture_us < first_capture_us:
            first_capture_us = capture_us
        frames.append({
            "frame_id": len(frames), "source_index": slot, "capture_us": capture_us,
            "encode_start_us": capture_us, "encode_end_us": capture_us, "size_bytes": 0,
            "is_keyframe": i == 0, "qp": None, "target_rate_bps": 0, "packets": 0,
            "ref_frame_id": None, "first_packet_sent_us": None, "last_packet_sent_us": None,
            "pacer_head_us": None, "completed_us": _us(f.get("receive_ms"), origin_us),
            "displayed_us": displayed_us, "latency_us": displayed_us - capture_us,
            "discarded": False, "purged": False,
            "chrome_rtp_timestamp": int(f["rtp_timestamp"]),
            "chrome_width": f.get("width"), "chrome_height": f.get("height"),
            "chrome_capture_from_rtp": not isinstance(f.get("capture_ms"), (int, float)),
        })  # fmt: skip
    frames = [fr for fr in frames if fr["capture_us"] < capture_end_us]
    frames.sort(key=lambda fr: fr["source_index"])
    for k, fr in enumerate(frames):
        fr["frame_id"] = k
    if not frames:
        return [], []
    # Slots on the capture grid from the first frame shown to the end of capture.
    c0 = frames[0]["capture_us"] - frames[0]["source_index"] * 1e6 / fps
    last_slot = math.floor((capture_end_us - 1 - c0) * fps / 1e6)
    have = {fr["source_index"] for fr in frames}
    first = frames[0]["source_index"]
    skips = [{"source_index": k, "capture_us": round(c0 + k * 1e6 / fps),
              "reason": "not-displayed"}
             for k in range(first, last_slot + 1) if k not in have]  # fmt: skip
    return frames, skips


def _video_frames(datagrams: list[dict[str, Any]]) -> dict[int, tuple[list[dict], list[dict]]]:
    """The video stream's packets in a relay's datagram log, by RTP timestamp: (media, FEC),
    each in sequence order, each packet (timestamp and sequence number, which wraps within a
    long run) once, at its first arrival. The video SSRC is the one with the most marker bits
    (one a frame; RTX and padding have few or none), or without any the one with the most
    packets. A frame's media ends at its marked packet; the packets after it with its
    timestamp are forward error correction: Chromium sends VP8 in RED and adds ULPFEC
    packets to a frame, on the same SSRC and timestamp, once its receiver reports losses
    (their payload, encrypted, cannot say so; their place after the marker and their size,
    the FEC headers' bytes more than the media's, do). Empty for a log without RTP headers
    (a run from before the relay logged them)."""
    media = sorted((d for d in datagrams if d.get("dir") == "down" and "rtp_ssrc" in d),
                   key=lambda d: d["arrived_us"])  # fmt: skip
    if not media:
        return {}
    markers: dict[int, int] = {}
    packets: dict[int, int] = {}
    for d in media:
        packets[d["rtp_ssrc"]] = packets.get(d["rtp_ssrc"], 0) + 1
        if d.get("rtp_marker"):
            markers[d["rtp_ssrc"]] = markers.get(d["rtp_ssrc"], 0) + 1
    counts = markers or packets
    video = max(counts, key=lambda k: counts[k])
    by_ts: dict[int, list[dict]] = {}
    seen: set[tuple[int, int]] = set()
    for d in media:
        key = (d["rtp_ts"], d["rtp_seq"])
        if d["rtp_ssrc"] == video and key not in seen:  # a duplicate counts once
            seen.add(key)
            by_ts.setdefault(d["rtp_ts"], []).append(d)
    out: dict[int, tuple[list[dict], list[dict]]] = {}
    for ts, ds in by_ts.items():
        s0 = ds[0]["rtp_seq"]
        # Sequence order, signed from the first to arrive (a frame's numbers may wrap).
        ds.sort(key=lambda d: (d["rtp_seq"] - s0 + 32_768) % 65_536 - 32_768)
        last = max((k for k, d in enumerate(ds) if d.get("rtp_marker")), default=len(ds) - 1)
        out[ts] = (ds[:last + 1], ds[last + 1:])
    return out


def packet_trains(datagrams: list[dict[str, Any]]) -> dict[int, list[int]]:
    """Each video frame's media packets (FEC left out: :func:`_video_frames`) in a relay's
    datagram log, by RTP timestamp: their arrival times at the relay (us, its clock,
    ascending). Empty for a log without RTP headers."""
    return {ts: sorted(int(d["arrived_us"]) for d in media)
            for ts, (media, _) in _video_frames(datagrams).items()}  # fmt: skip


def fec_bytes(datagrams: list[dict[str, Any]]) -> tuple[int, int]:
    """The video stream's bytes the relay delivered: (FEC, all), each packet once
    (:func:`_video_frames`, which tells FEC from media by all the packets, so a frame whose
    marked packet was dropped still has its FEC told apart); (0, 0) for a log without RTP
    headers."""

    def delivered(ds: list[dict]) -> int:
        return sum(int(d["size_bytes"]) for d in ds if not d.get("dropped"))

    fec = total = 0
    for media, extra in _video_frames(datagrams).values():
        f = delivered(extra)
        fec += f
        total += f + delivered(media)
    return fec, total


def add_relay_trains(frames: list[dict[str, Any]], datagrams: list[dict[str, Any]],
                     shift_us: int = 0) -> int:
    """Fills each frame's packet train at the relay (the module documentation) from the
    relay's datagram log (:func:`packet_trains`; ``shift_us`` moves the relay's clock onto
    the frames'). Returns how many frames got a train (0, and the frames left as they are,
    for a log without RTP headers: a run from before the relay logged them)."""
    trains = _video_frames(datagrams)
    if not trains:
        return 0
    filled = 0
    for fr in frames:
        media, fec = trains.get(fr.get("chrome_rtp_timestamp"), ([], []))
        times = sorted(int(d["arrived_us"]) for d in media)
        got = ((times[0] + shift_us, times[-1] + shift_us, len(times), len(fec)) if times
               else (None,) * 4)  # fmt: skip
        fr.update(chrome_first_at_relay_us=got[0], chrome_last_at_relay_us=got[1],
                  chrome_packets_at_relay=got[2], chrome_fec_packets_at_relay=got[3])  # fmt: skip
        filled += got[0] is not None
    return filled


def _report(stats: dict[str, Any], kind: str) -> dict[str, Any]:
    for r in stats.get("reports") or []:
        if r.get("type") == kind:
            return r
    return {}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def _delta(now: dict[str, Any], before: dict[str, Any] | None, *keys: str) -> float:
    """The increase of the sum of ``keys`` from ``before`` to ``now`` (counters)."""
    total = sum(_num(now.get(k)) or 0.0 for k in keys)
    if before:
        total -= sum(_num(before.get(k)) or 0.0 for k in keys)
    return total


def samples(
    sender_stats: list[dict[str, Any]],
    receiver_stats: list[dict[str, Any]],
    link: list[dict[str, Any]],
    origin_us: int,
    capacity_bps: Any,
    end_us: int,
) -> list[dict[str, Any]]:
    """One sample per sender getStats poll up to ``end_us`` (module documentation).
    ``capacity_bps(t0_us, t1_us)`` is the trace's capacity over ``[t0, t1)`` (None without a
    trace); ``link`` the relay's link samples (its clock)."""
    recv = [(t, s) for s in receiver_stats if (t := _us(s.get("t_ms"), origin_us)) is not None]
    recv.sort(key=lambda x: x[0])
    out: list[dict[str, Any]] = []
    prev: tuple[int, dict, dict, int] | None = None  # (t, outbound, inbound, delivered)
    li = ri = 0
    last_link: dict[str, Any] = {}
    for s in sender_stats:
        t = _us(s.get("t_ms"), origin_us)
        if t is None or t < 0 or t > end_us:
            continue
        out_rtp, pair = _report(s, "outbound-rtp"), _report(s, "candidate-pair")
        while li < len(link) and link[li]["t_us"] <= t:
            last_link, li = link[li], li + 1
        while ri < len(recv) and recv[ri][0] <= t:
            ri += 1
        in_rtp = _report(recv[ri - 1][1], "inbound-rtp") if ri else {}
        delivered = int(last_link.get("delivered_bytes") or 0)
        t0, p_out, p_in, p_delivered = prev if prev else (t - 100_000, None, None, 0)
        dt = (t - t0) / 1e6
        sent_packets = _delta(out_rtp, p_out, "packetsSent")
        frames_enc = _delta(out_rtp, p_out, "framesEncoded")
        emitted = _delta(in_rtp, p_in, "jitterBufferEmittedCount")
        rtt = _num(pair.get("currentRoundTripTime"))
        aob = _num(pair.get("availableOutgoingBitrate"))
        target = round(_num(out_rtp.get("targetBitrate")) or 0)
        cap = capacity_bps(t0, t) if capacity_bps else None
        send_delay = _delta(out_rtp, p_out, "totalPacketSendDelay")
        jb = _delta(in_rtp, p_in, "jitterBufferDelay")
        qp = _delta(out_rtp, p_out, "qpSum")
        out.append({
            "t_us": t,
            "target_rate_bps": target,
            "encoder_rate_bps": target,
            "pacing_rate_bps": None,
            "link_capacity_bps": int(cap or 0),
            "send_rate_bps": round(_delta(out_rtp, p_out, "bytesSent", "headerBytesSent") * 8 / dt)
            if prev else 0,
            "delivered_rate_bps": round((delivered - p_delivered) * 8 / dt) if prev else 0,
            "queue_bytes": int(last_link.get("queue_bytes") or 0),
            "queue_packets": int(last_link.get("queue_packets") or 0),
            "queue_delay_us": int(last_link.get("queue_delay_us") or 0),
            "pacer_queue_bytes": 0,
            "pacer_delay_us": round(send_delay / sent_packets * 1e6) if sent_packets > 0 else 0,
            "rtt_us": round(rtt * 1e6) if rtt is not None else None,
            "in_flight_bytes": 0,
            "cwnd_bytes": None,
            "lost_packets": int(last_link.get("dropped_packets") or 0),
            "chrome_available_outgoing_bitrate_bps": round(aob) if aob is not None else None,
            "chrome_encoder_fps": _num(out_rtp.get("framesPerSecond")),
            "chrome_frame_width": out_rtp.get("frameWidth"),
            "chrome_frame_height": out_rtp.get("frameHeight"),
            "chrome_qp": round(qp / frames_enc, 3) if frames_enc > 0 else None,
            "chrome_quality_limitation": out_rtp.get("qualityLimitationReason"),
            "chrome_nack_count": in_rtp.get("nackCount"),
            "chrome_pli_count": in_rtp.get("pliCount"),
            "chrome_retransmitted_bytes": out_rtp.get("retransmittedBytesSent"),
            "chrome_frames_dropped": in_rtp.get("framesDropped"),
            "chrome_freeze_count": in_rtp.get("freezeCount"),
            "chrome_total_freezes_duration_s": _num(in_rtp.get("totalFreezesDuration")),
            "chrome_jitter_buffer_delay_ms": round(jb / emitted * 1e3, 3) if emitted > 0 else None,
        })  # fmt: skip
        prev = (t, out_rtp, in_rtp, delivered)
    return out


def last_report(stats: list[dict[str, Any]], kind: str, until_ms: float) -> dict[str, Any]:
    """The last ``kind`` report polled at or before ``until_ms`` (epoch ms)."""
    out: dict[str, Any] = {}
    for s in stats:
        t = s.get("t_ms")
        if isinstance(t, (int, float)) and t <= until_ms:
            r = _report(s, kind)
            if r:
                out = r
    return out


def summary(
    frames: list[dict[str, Any]],
    skips: list[dict[str, Any]],
    samples_: list[dict[str, Any]],
    relay: dict[str, Any],
    capacity_bytes: int,
    sender_stats: list[dict[str, Any]],
    receiver_stats: list[dict[str, Any]],
    origin_us: int,
    duration_s: float,
    drain_s: float,
) -> dict[str, Any]:
    """The core's summary of the records, with the getStats-only keys (module docs)."""
    end_ms = (origin_us + duration_s * 1e6) / 1000
    out_rtp = last_report(sender_stats, "outbound-rtp", end_ms)
    in_rtp = last_report(receiver_stats, "inbound-rtp", end_ms)
    records = {
        "frames": frames,
        "skips": skips,
        "samples": samples_,
        "link": {
            "arrived_packets": int(relay.get("arrived_packets") or 0),
            "dropped_packets": int(relay.get("dropped_packets") or 0),
            "policy_dropped_packets": int(relay.get("policy_dropped_packets") or 0),
            "delivered_bytes": int(relay.get("delivered_bytes") or 0),
            "capacity_bytes": int(capacity_bytes),
        },
        "retransmissions": int(out_rtp.get("retransmittedPacketsSent") or 0),
        "padding_bytes": 0,
        "sent_bytes_total": round(_delta(out_rtp, None, "bytesSent", "headerBytesSent")),
        "session_end_us": round(duration_s * 1e6),
        "run_end_us": round((duration_s + drain_s) * 1e6),
    }
    s = json.loads(core().summarize_records(json.dumps(records)))
    received = _num(in_rtp.get("bytesReceived"))
    # bytesReceived counts the ULPFEC packets on the video SSRC too; the video bitrate is
    # the rest, as a simulated run's counts encoded bytes only (FEC's share of the delivered
    # video stream from the relay's log, 0 where it has no RTP headers).
    fec, video = fec_bytes(relay.get("datagrams") or [])
    share = fec / video if video else 0.0
    s["chrome_fec_bytes_share"] = share if video else None
    s["chrome_bytes_received_bps"] = received * 8 / duration_s if received is not None else None
    s["video_bitrate_bps"] = (received * (1 - share) * 8 / duration_s
                              if received is not None else None)  # fmt: skip
    # Chromium's own count (over its render callbacks, which rVFC samples), next to the
    # summary's, which applies the same rule to the displayed frames the page reported.
    s["chrome_freeze_count"] = in_rtp.get("freezeCount")
    s["chrome_total_freezes_duration_s"] = _num(in_rtp.get("totalFreezesDuration"))
    return s
