//! The receiver's view of a browser's H.264 stream: RTP packets put together into frames and
//! described as Sluice's (frame ids, references, keyframes).

use crate::wire::{self, MediaParts, Unwrapper};
use std::collections::{BTreeMap, VecDeque};

/// A frame of a browser's stream as the receiver described it to Sluice's receiver.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct BrowserFrame {
    pub frame_id: u64,
    pub rtp_timestamp: u32,
    /// From the abs-capture-time header extension (µs since the Unix epoch), if a packet of
    /// the frame carried it.
    pub capture_us: Option<i64>,
    pub is_keyframe: bool,
    pub packets: u16,
}

/// One packet of a browser's frame waiting for the rest.
pub(super) struct Pending {
    payload: bytes::Bytes,
    marker: bool,
    transport_seq: u16,
    capture_us: Option<i64>,
}

/// Frames of a browser's H.264 stream, for Sluice's receiver, which needs each packet's
/// frame, index and count (Sluice's frame descriptor): packets are collected by RTP
/// timestamp; a frame's first packet follows the previous frame's marker packet and its
/// last carries the marker; once all of them are in, the frame goes on as Sluice's RTP,
/// numbered in timestamp order, a keyframe if it carries an IDR or SPS NAL unit, else
/// referencing the previous frame.
#[derive(Default)]
pub struct Assembler {
    ts: Option<Unwrapper>,
    seq: Option<Unwrapper>,
    /// Frames not yet passed on, by extended RTP timestamp: (frame id, packets by extended
    /// sequence number).
    frames: BTreeMap<u64, (u64, BTreeMap<u64, Pending>)>,
    /// The marker packet's sequence number of frames, by timestamp (recent ones).
    markers: BTreeMap<u64, u64>,
    newest_ts: Option<u64>,
    /// Frames passed on (recent ones), by timestamp.
    passed: std::collections::BTreeSet<u64>,
    next_id: u64,
    out: VecDeque<MediaParts>,
    pub described: Vec<BrowserFrame>,
}

/// Frames waiting longer than this many newer frames are given up (the receiver asks for
/// a keyframe when it cannot decode).
pub(super) const ASSEMBLY_FRAMES: usize = 64;

impl Assembler {
    pub(super) fn push(&mut self, p: &str0m::rtp::RtpPacket) {
        let capture_us = p.header.ext_vals.abs_capture_time.as_ref().and_then(|c| {
            c.capture_time.duration_since(std::time::UNIX_EPOCH).ok().map(|d| d.as_micros() as i64)
        });
        self.push_parts(
            p.header.timestamp,
            p.header.sequence_number,
            p.header.marker,
            bytes::Bytes::copy_from_slice(&p.payload),
            p.header.ext_vals.transport_cc.unwrap_or(0),
            capture_us,
        );
    }

    /// One packet: RTP timestamp, sequence number, marker, payload, transport-wide number,
    /// capture time (µs since the Unix epoch) if it carried one.
    pub(super) fn push_parts(
        &mut self,
        timestamp: u32,
        sequence: u16,
        marker: bool,
        payload: bytes::Bytes,
        transport_seq: u16,
        capture_us: Option<i64>,
    ) {
        let ts = self.ts.get_or_insert_with(|| Unwrapper::new(32));
        let t = ts.peek(timestamp as u64);
        ts.accept(t);
        let seq = self.seq.get_or_insert_with(|| Unwrapper::new(16));
        let s = seq.peek(sequence as u64);
        seq.accept(s);
        if self.passed.contains(&t) {
            return; // a late copy of a packet of a frame already passed on
        }
        let next_id = &mut self.next_id;
        let entry = self.frames.entry(t).or_insert_with(|| {
            *next_id += 1;
            (*next_id - 1, BTreeMap::new())
        });
        entry.1.insert(s, Pending { payload, marker, transport_seq, capture_us });
        if marker {
            self.markers.insert(t, s);
            while self.markers.len() > 4 * ASSEMBLY_FRAMES {
                self.markers.pop_first();
            }
        }
        self.newest_ts = Some(self.newest_ts.map_or(t, |n| n.max(t)));
        self.assemble();
    }

    /// Passes on every frame whose packets are all in.
    fn assemble(&mut self) {
        let mut done = Vec::new();
        for (&t, (id, pkts)) in &self.frames {
            let Some(&last) = self.markers.get(&t) else { continue };
            // The first packet follows the previous frame's marker; the very first frame
            // starts with its lowest number.
            let prev = self.markers.range(..t).next_back().map(|(_, &m)| m + 1);
            let first = match prev {
                Some(f) => f,
                None if *id == 0 => *pkts.keys().next().unwrap_or(&last),
                None => continue,
            };
            if first > last || (first..=last).any(|s| !pkts.contains_key(&s)) {
                continue;
            }
            done.push((t, first, last));
        }
        for (t, first, last) in done {
            let Some((id, pkts)) = self.frames.remove(&t) else { continue };
            self.passed.insert(t);
            while self.passed.len() > 4 * ASSEMBLY_FRAMES {
                self.passed.pop_first();
            }
            let count = (last - first + 1) as u16;
            let key = pkts.values().any(|p| h264_keyframe(&p.payload));
            let capture_us = pkts.values().find_map(|p| p.capture_us);
            let ref_delta: u16 = if key || id == 0 { 0 } else { 1 };
            self.described.push(BrowserFrame {
                frame_id: id,
                rtp_timestamp: t as u32,
                capture_us,
                is_keyframe: key,
                packets: count,
            });
            for (i, (s, p)) in
                pkts.into_iter().filter(|(s, _)| (first..=last).contains(s)).enumerate()
            {
                let mut frame = Vec::with_capacity(11);
                frame.extend_from_slice(&(id as u32).to_be_bytes());
                frame.extend_from_slice(&(i as u16).to_be_bytes());
                frame.extend_from_slice(&count.to_be_bytes());
                frame.extend_from_slice(&ref_delta.to_be_bytes());
                frame.push(u8::from(key));
                self.out.push_back(MediaParts {
                    payload_type: wire::PT_VIDEO,
                    ssrc: wire::video_ssrc(0),
                    sequence: s as u16,
                    timestamp: t as u32,
                    marker: p.marker,
                    transport_seq: p.transport_seq,
                    frame: Some(frame),
                    latest_reencoded: None,
                    payload: p.payload,
                });
            }
        }
        while self.frames.len() > ASSEMBLY_FRAMES {
            self.frames.pop_first();
        }
    }

    pub(super) fn pop(&mut self) -> Option<MediaParts> {
        self.out.pop_front()
    }
}

/// Whether an RTP payload of H.264 (RFC 6184) starts or carries an IDR slice or an SPS.
pub(super) fn h264_keyframe(p: &[u8]) -> bool {
    let key = |t: u8| t == 5 || t == 7;
    match p.first().map(|b| b & 0x1f) {
        Some(24) => {
            // STAP-A: 2-byte sizes, then NAL units.
            let mut i = 1;
            while i + 2 < p.len() {
                let n = u16::from_be_bytes([p[i], p[i + 1]]) as usize;
                if key(p[i + 2] & 0x1f) {
                    return true;
                }
                i += 2 + n;
            }
            false
        }
        Some(28) => p.len() > 1 && p[1] & 0x80 != 0 && key(p[1] & 0x1f),
        Some(t) => key(t),
        None => false,
    }
}
