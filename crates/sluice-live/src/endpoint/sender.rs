//! The sender end: the core's [`Sender`], unchanged; media out as RTP, feedback in as RTCP.

use super::{Endpoint, Role, SharedLink, Spoofed, FRAMES_KEPT, PLI_MIN_INTERVAL};
use crate::wire::{self, SentNumbers, WireError};
use sluice_core::metrics::Sample;
use sluice_core::packet::{Datagram, Feedback, Packet, PacketKind, UDP_IP_OVERHEAD};
use sluice_core::sender::{Sender, SenderEvent};
use sluice_core::session::{LinkReading, Sampler};
use sluice_core::units::{DataSize, TimeDelta, Timestamp};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

/// The sender end.
pub struct SenderEndpoint {
    sender: Sender,
    sent: SentNumbers,
    /// RTP timestamps of frames with packets still to send (capture times).
    rtp_ts: BTreeMap<u64, u32>,
    padding_seq: u16,
    pub events: Vec<SenderEvent>,
    pub samples: Vec<Sample>,
    sampler: Sampler,
    sent_bytes: i64,
    /// Each flow's delivered bytes at the last sample (cross traffic in the relay).
    last_flow_delivered: std::collections::BTreeMap<u32, i64>,
    link: Option<SharedLink>,
    malformed: u64,
    pub feedback_messages: u64,
    /// Feedback a real receiver would not send, ignored.
    pub spoofed: Spoofed,
    /// When the sender last honoured a keyframe request.
    last_pli: Option<Timestamp>,
    /// Packets the wire format could not carry (dropped at the sender).
    pub unsendable: u64,
    pub transmitted: u64,
    outbox: VecDeque<Vec<u8>>,
    /// Payloads of encoded frames (H.264 with x264), by frame id: packets carry their share.
    payloads: Option<Box<dyn PayloadSource>>,
    /// Builds a fresh sender (a restart of the sending process), if restarts are wanted.
    fresh: Option<FreshSender>,
    restart_at: Option<Timestamp>,
    pub restarts: u64,
    /// Why a restart failed (the fresh sender could not be built).
    restart_failure: Option<String>,
}

/// Builds the sender a restarted sending process starts with, at `now`.
pub type FreshSender = Box<dyn FnMut(Timestamp) -> Result<Sender, String> + Send>;

/// Where the bytes of an encoded frame come from (the model encoder has none: its packets
/// carry zeros).
pub trait PayloadSource: Send {
    /// The payload of packet `index` of `count` of frame `frame_id` (the size the packetizer
    /// gave it), if the frame's bytes are known.
    fn payload(&mut self, frame_id: u64, index: u16, count: u16, size: usize) -> Option<Vec<u8>>;
}

/// Encoded frames' bitstreams by frame id, filled by the encoder thread (x264's frame sink)
/// and read by the sender: packet `i` of `n` carries the `i`-th of `n` nearly equal parts
/// of the frame's bytes (the packetizer's split), so the datagram is the size the core
/// accounted for.
#[derive(Clone, Debug, Default)]
pub struct FrameStore(Arc<Mutex<BTreeMap<u64, StoredFrame>>>);

#[derive(Debug)]
struct StoredFrame {
    annexb: Vec<u8>,
    /// The RFC 6184 payloads for a packet count, once made.
    payloads: Option<(u16, Option<Vec<Vec<u8>>>)>,
}

impl FrameStore {
    pub fn insert(&self, frame_id: u64, data: &[u8]) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(frame_id, StoredFrame { annexb: data.to_vec(), payloads: None });
            while m.len() > FRAMES_KEPT {
                m.pop_first();
            }
        }
    }
}

/// Part `index` of `count` of `len` bytes, split as the packetizer splits a frame.
pub fn share(len: usize, index: u16, count: u16) -> std::ops::Range<usize> {
    let (i, n) = (index as usize, count.max(1) as usize);
    let (base, extra) = (len / n, len % n);
    let start = i * base + i.min(extra);
    let end = (start + base + usize::from(i < extra)).min(len);
    start.min(end)..end
}

impl PayloadSource for FrameStore {
    /// RFC 6184 payloads ([`crate::h264::payloads`]) when the frame can be split into
    /// `count` of them, else the frame's raw share.
    fn payload(&mut self, frame_id: u64, index: u16, count: u16, _size: usize) -> Option<Vec<u8>> {
        let mut m = self.0.lock().ok()?;
        let f = m.get_mut(&frame_id)?;
        if f.payloads.as_ref().is_none_or(|(n, _)| *n != count) {
            f.payloads = Some((count, crate::h264::payloads(&f.annexb, count as usize)));
        }
        match f.payloads.as_ref().and_then(|(_, p)| p.as_ref()) {
            Some(p) => p.get(index as usize).cloned(),
            None => Some(f.annexb[share(f.annexb.len(), index, count)].to_vec()),
        }
    }
}

impl SenderEndpoint {
    pub fn new(
        sender: Sender,
        sample_interval: TimeDelta,
        capture_end: Timestamp,
        link: Option<SharedLink>,
        now: Timestamp,
    ) -> Self {
        SenderEndpoint {
            sender,
            sent: SentNumbers::default(),
            rtp_ts: BTreeMap::new(),
            padding_seq: 0,
            events: Vec::new(),
            samples: Vec::new(),
            sampler: Sampler::new(sample_interval, now, capture_end),
            sent_bytes: 0,
            last_flow_delivered: std::collections::BTreeMap::new(),
            link,
            malformed: 0,
            feedback_messages: 0,
            spoofed: Spoofed::default(),
            last_pli: None,
            unsendable: 0,
            transmitted: 0,
            outbox: VecDeque::new(),
            payloads: None,
            fresh: None,
            restart_at: None,
            restarts: 0,
            restart_failure: None,
        }
    }

    /// Restarts the sender at `at` (fault injection): its state is lost (pacer queue, frames
    /// being encoded, congestion control, sequence numbers) and a fresh sender from `fresh`
    /// goes on with a new stream (new SSRCs, numbers from 0) and a keyframe. It keeps the
    /// capture clock and numbers its frames after the old ones ([`Sender::continue_timeline`]),
    /// so that the run's records of both lives stay apart.
    pub fn restart_at(&mut self, at: Timestamp, fresh: FreshSender) {
        self.restart_at = Some(at);
        self.fresh = Some(fresh);
    }

    /// Why the sender cannot go on: its state machine's failure, or a restart that failed.
    pub fn failure(&self) -> Option<&str> {
        self.restart_failure.as_deref().or_else(|| self.sender.failure())
    }

    fn restart(&mut self, now: Timestamp) {
        self.restart_at = None;
        let Some(mut fresh) = self.fresh.take() else { return };
        self.drain_events();
        let timeline = self.sender.timeline();
        match fresh(now) {
            Ok(mut sender) => {
                sender.continue_timeline(timeline, now);
                self.sender = sender;
                self.restarts += 1;
                let stream = wire::next_stream(self.sent.stream);
                self.sent = SentNumbers { stream, ..SentNumbers::default() };
                self.padding_seq = 0;
                self.outbox.clear();
                self.drain_events();
            }
            Err(why) => self.restart_failure = Some(format!("restarting the sender: {why}")),
        }
    }

    /// Feedback as a real receiver sends it: NACKed numbers the sender never sent are
    /// dropped from the NACK (a NACK of none of its numbers is dropped), a keyframe request
    /// within [`PLI_MIN_INTERVAL`] of the last honoured one is dropped; both counted.
    fn screen(&mut self, f: Feedback, now: Timestamp) -> Option<Feedback> {
        match f {
            Feedback::Nack { flow, media_seqs } => {
                let sent = self.sent.highest_media_seq;
                let n = media_seqs.len();
                let media_seqs: Vec<u64> = media_seqs.into_iter().filter(|&s| s <= sent).collect();
                self.spoofed.nacked_never_sent += (n - media_seqs.len()) as u64;
                (!media_seqs.is_empty()).then_some(Feedback::Nack { flow, media_seqs })
            }
            Feedback::KeyframeRequest { flow } => {
                if self.last_pli.is_some_and(|t| now < t + PLI_MIN_INTERVAL) {
                    self.spoofed.plis_rate_limited += 1;
                    return None;
                }
                self.last_pli = Some(now);
                Some(Feedback::KeyframeRequest { flow })
            }
            f => Some(f),
        }
    }

    /// Starts on stream `stream` (which picks the SSRCs, [`wire::video_ssrc`]) instead of 0:
    /// a sending process that may be a restart picks one its peers have not seen.
    pub fn set_stream(&mut self, stream: u32) {
        self.sent.stream = stream % wire::MAX_STREAMS;
    }

    /// The stream it sends.
    pub fn stream(&self) -> u32 {
        self.sent.stream
    }

    pub fn set_payload_source(&mut self, source: Box<dyn PayloadSource>) {
        self.payloads = Some(source);
    }

    pub fn sender(&self) -> &Sender {
        &self.sender
    }

    /// The bytes the downlink had delivered at the last sample: the simulator's utilisation
    /// counts these (not what is delivered while the session drains).
    pub fn delivered_bytes_sampled(&self) -> i64 {
        self.sampler.delivered_bytes()
    }

    fn drain_events(&mut self) {
        while let Some(e) = self.sender.poll_event() {
            match &e {
                SenderEvent::FrameEncoded { frame_id, capture_time, .. } => {
                    self.rtp_ts.insert(*frame_id, wire::rtp_timestamp(*capture_time));
                }
                SenderEvent::PacketSent { size, .. } => self.sent_bytes += size.as_bytes(),
                _ => {}
            }
            self.events.push(e);
        }
        // Frames far behind the newest have long left (retransmissions look theirs up).
        while self.rtp_ts.len() > 4096 {
            self.rtp_ts.pop_first();
        }
    }

    fn take_sample(&mut self, now: Timestamp) {
        let interval = self.sampler.interval();
        let link = self.link.as_ref().and_then(|l| l.lock().ok().map(|s| s.clone()));
        let link = link.unwrap_or_default();
        let reading = LinkReading {
            capacity_bps: link.link_capacity_bps,
            delivered_bytes: link.delivered_bytes,
            queue_bytes: link.queue_bytes,
            queue_packets: link.queue_packets,
            queue_delay_us: link.queue_delay_us,
            lost_packets: link.dropped_packets,
        };
        let last_flow_delivered = &mut self.last_flow_delivered;
        let sample = self.sampler.take(now, &self.sender, self.sent_bytes, reading, |columns| {
            columns.set_all(&link.columns);
            for &(flow, bytes) in &link.flow_delivered_bytes {
                let last = last_flow_delivered.insert(flow, bytes).unwrap_or(0);
                let rate = DataSize::from_bytes(bytes - last) / interval;
                columns.rate(format!("flow{flow}_rate_bps"), Some(rate));
            }
        });
        self.samples.push(sample);
    }

    fn packet_bytes(&mut self, p: &Packet) -> Result<Vec<u8>, WireError> {
        let rtp_ts = self.rtp_ts.get(&p.frame_id).copied().unwrap_or(0);
        if p.kind == PacketKind::Padding {
            self.padding_seq = self.padding_seq.wrapping_add(1);
            return wire::write_media(p, self.sent.stream, rtp_ts, self.padding_seq, None);
        }
        let payload = self.payloads.as_mut().and_then(|s| {
            let header = (p.size - UDP_IP_OVERHEAD).as_bytes() as usize;
            let size = header.saturating_sub(wire_header_len(p));
            s.payload(p.frame_id, p.packet_index, p.packet_count, size)
        });
        wire::write_media(p, self.sent.stream, rtp_ts, 0, payload.as_deref())
    }
}

/// The RTP header bytes of a media packet (12 + extensions).
fn wire_header_len(p: &Packet) -> usize {
    if p.latest_reencoded.is_some() {
        36
    } else {
        32
    }
}

impl Endpoint for SenderEndpoint {
    fn handle_datagram(&mut self, from: Role, bytes: &[u8], now: Timestamp) {
        if from != Role::Receiver {
            self.malformed += 1;
            return;
        }
        match wire::read_feedback(bytes, &self.sent) {
            Ok(fbs) => {
                for f in fbs {
                    self.feedback_messages += 1;
                    if let Some(f) = self.screen(f, now) {
                        self.sender.handle_feedback(f, now);
                    }
                }
            }
            Err(_) => self.malformed += 1,
        }
        self.drain_events();
    }

    fn handle_timeout(&mut self, now: Timestamp) {
        if self.restart_at.is_some_and(|t| t <= now) {
            self.restart(now);
        }
        if self.sender.poll_timeout() <= now {
            self.sender.handle_timeout(now);
        }
        self.drain_events();
        // Every sample due by now, each at its own time (a late wake-up catches up).
        while self.sampler.poll_timeout() <= now {
            self.take_sample(self.sampler.poll_timeout());
        }
    }

    fn poll_transmit(&mut self, now: Timestamp) -> Option<(Role, Vec<u8>)> {
        if let Some(b) = self.outbox.pop_front() {
            return Some((Role::Receiver, b));
        }
        loop {
            let Datagram::Media(p) = self.sender.poll_transmit(now)? else { continue };
            self.sent.on_sent(&p);
            self.drain_events();
            match self.packet_bytes(&p) {
                Ok(b) => {
                    self.transmitted += 1;
                    return Some((Role::Receiver, b));
                }
                // A packet the wire cannot carry (larger than a datagram): lost, as a link
                // would lose it; the receiver NACKs it.
                Err(_) => {
                    self.unsendable += 1;
                    continue;
                }
            }
        }
    }

    fn poll_timeout(&self) -> Timestamp {
        let sample = self.sampler.poll_timeout();
        let restart = self.restart_at.unwrap_or(Timestamp::INFINITY);
        self.sender.poll_timeout().min(sample).min(restart)
    }

    fn malformed(&self) -> u64 {
        self.malformed
    }
}
