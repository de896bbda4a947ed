//! The live endpoints, sans-IO: the core's sender, receiver and links behind bytes in and
//! bytes out (quinn-proto's shape: `handle_datagram(now)`, `handle_timeout(now)`,
//! `poll_transmit(now)`, `poll_timeout()`). They read no clock and touch no socket; the
//! runtime ([`crate::runtime`]) drives them with a real clock and UDP sockets, tests drive
//! them with virtual time.
//!
//! * [`SenderEndpoint`]: the simulator's [`Sender`], unchanged; media out as RTP, feedback
//!   in as RTCP.
//! * [`ReceiverEndpoint`]: the simulator's [`Receiver`], unchanged; media in, feedback out.
//! * [`RelayEndpoint`]: the simulator's downlink (queue, trace, delay, loss, the scheme's
//!   bottleneck behaviour) and uplink [`Link`]s between the two, carrying the datagrams'
//!   bytes; plus fault injection (duplication, reordering, a feedback blackout).
//!
//! A datagram that does not parse is counted, never fatal.

use crate::wire::{self, MediaReader, SentNumbers, WireError};
use sluice_core::columns::Columns;
use sluice_core::link::{DropReason, Link};
use sluice_core::metrics::Sample;
use sluice_core::packet::{Datagram, Feedback, Packet, PacketKind, UDP_IP_OVERHEAD};
use sluice_core::receiver::{Receiver, ReceiverEvent};
use sluice_core::rng::Rng;
use sluice_core::sender::{Sender, SenderEvent};
use sluice_core::units::{DataSize, TimeDelta, Timestamp};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

/// The other end of a datagram, by role (the runtime maps roles to addresses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Sender,
    Receiver,
    /// An RTP player that gets a copy of the received video (output only).
    Monitor,
}

/// A sans-IO live endpoint.
pub trait Endpoint: Send {
    /// A datagram from `from` arrived at `now`.
    fn handle_datagram(&mut self, from: Role, bytes: &[u8], now: Timestamp);
    /// Timer work due at or before `now`; a spurious call does nothing.
    fn handle_timeout(&mut self, now: Timestamp);
    /// The next datagram to send at `now` and to whom. Changes after any `handle_*` call.
    fn poll_transmit(&mut self, now: Timestamp) -> Option<(Role, Vec<u8>)>;
    /// When the endpoint next has something to do.
    fn poll_timeout(&self) -> Timestamp;
    /// Datagrams that did not parse (or came from nobody we know), so far.
    fn malformed(&self) -> u64;
}

/// The relay's downlink state, for the sender's samples in a `live run`.
#[derive(Clone, Debug, Default)]
pub struct LinkSnapshot {
    pub queue_bytes: i64,
    pub queue_packets: u64,
    pub queue_delay_us: i64,
    pub delivered_bytes: i64,
    pub dropped_packets: u64,
    pub columns: Columns,
    pub link_capacity_bps: i64,
    /// With cross traffic: every flow's bytes delivered so far, by flow id (0: the session's
    /// own), for the samples' `flow<ID>_rate_bps` columns as in the simulator.
    pub flow_delivered_bytes: Vec<(u32, i64)>,
}

pub type SharedLink = Arc<Mutex<LinkSnapshot>>;

/// The sender end.
pub struct SenderEndpoint {
    sender: Sender,
    sent: SentNumbers,
    /// RTP timestamps of frames with packets still to send (capture times).
    rtp_ts: BTreeMap<u64, u32>,
    padding_seq: u16,
    pub events: Vec<SenderEvent>,
    pub samples: Vec<Sample>,
    sample_interval: TimeDelta,
    next_sample: Timestamp,
    capture_end: Timestamp,
    sent_bytes: i64,
    last_sent_bytes: i64,
    last_delivered_bytes: i64,
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

/// Frames kept for retransmissions.
const FRAMES_KEPT: usize = 512;

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
            sample_interval,
            next_sample: now + sample_interval,
            capture_end,
            sent_bytes: 0,
            last_sent_bytes: 0,
            last_delivered_bytes: 0,
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
        self.last_delivered_bytes
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
        let interval = self.sample_interval;
        let control = self.sender.control_update();
        let mut columns = Columns::default();
        self.sender.debug_columns(&mut columns);
        let link = self.link.as_ref().and_then(|l| l.lock().ok().map(|s| s.clone()));
        let link = link.unwrap_or_default();
        columns.set_all(&link.columns);
        for &(flow, bytes) in &link.flow_delivered_bytes {
            let last = self.last_flow_delivered.insert(flow, bytes).unwrap_or(0);
            let rate = DataSize::from_bytes(bytes - last) / interval;
            columns.rate(format!("flow{flow}_rate_bps"), Some(rate));
        }
        let sent = self.sent_bytes;
        self.samples.push(Sample {
            t_us: now.as_us(),
            target_rate_bps: control.target_rate.as_bps(),
            encoder_rate_bps: control.encoder_rate.as_bps(),
            pacing_rate_bps: Some(self.sender.pacing_rate())
                .filter(|r| r.is_finite())
                .map(|r| r.as_bps()),
            link_capacity_bps: link.link_capacity_bps,
            send_rate_bps: (DataSize::from_bytes(sent - self.last_sent_bytes) / interval).as_bps(),
            delivered_rate_bps: (DataSize::from_bytes(
                link.delivered_bytes - self.last_delivered_bytes,
            ) / interval)
                .as_bps(),
            queue_bytes: link.queue_bytes,
            queue_packets: link.queue_packets,
            queue_delay_us: link.queue_delay_us,
            pacer_queue_bytes: self.sender.pacer_queue_size().as_bytes(),
            pacer_delay_us: self.sender.pacer_oldest_queue_time(now).as_us(),
            rtt_us: self.sender.smoothed_rtt().map(|r| r.as_us()),
            in_flight_bytes: self.sender.bytes_in_flight().as_bytes(),
            cwnd_bytes: control.congestion_window.map(|w| w.as_bytes()),
            lost_packets: link.dropped_packets,
            columns,
        });
        self.last_sent_bytes = sent;
        self.last_delivered_bytes = link.delivered_bytes;
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
        while self.next_sample <= now && self.next_sample <= self.capture_end {
            self.take_sample(self.next_sample);
            self.next_sample += self.sample_interval;
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
        let sample = if self.next_sample <= self.capture_end {
            self.next_sample
        } else {
            Timestamp::INFINITY
        };
        let restart = self.restart_at.unwrap_or(Timestamp::INFINITY);
        self.sender.poll_timeout().min(sample).min(restart)
    }

    fn malformed(&self) -> u64 {
        self.malformed
    }
}

/// Datagrams from a peer's address that a real peer would not send (spoofed, or damaged in a
/// way that looks like it), counted and ignored (issue 30).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Spoofed {
    /// Relay and receiver: packets of a stream they were not reading that were not valid as
    /// a whole (they stayed on their stream).
    pub stream_packets: u64,
    /// Sender: NACKed sequence numbers it never sent.
    pub nacked_never_sent: u64,
    /// Sender: keyframe requests (PLI) beyond one in [`PLI_MIN_INTERVAL`].
    pub plis_rate_limited: u64,
}

impl Spoofed {
    /// Whether anything was counted.
    pub fn any(&self) -> bool {
        *self != Spoofed::default()
    }

    /// The sum of two endpoints' counts.
    pub fn plus(self, o: Spoofed) -> Spoofed {
        Spoofed {
            stream_packets: self.stream_packets + o.stream_packets,
            nacked_never_sent: self.nacked_never_sent + o.nacked_never_sent,
            plis_rate_limited: self.plis_rate_limited + o.plis_rate_limited,
        }
    }
}

/// The sender honours at most one keyframe request (PLI) in this time; more are counted
/// ([`Spoofed::plis_rate_limited`]) and ignored: a flood of them would otherwise make every
/// frame a keyframe. A receiver that cannot decode asks again every 300 ms (the core's
/// receiver), so it waits at most one more request.
pub const PLI_MIN_INTERVAL: TimeDelta = TimeDelta::from_ms(500);

/// Receives depacketized media (the x264 stream, for ffmpeg interop and quality).
pub trait MediaSink: Send {
    fn on_media(&mut self, media: &wire::MediaIn);
}

/// The receiver end.
pub struct ReceiverEndpoint {
    receiver: Receiver,
    /// Builds a fresh receiver: for a restart of the receiving process, and for a new stream
    /// (the sender restarted).
    fresh: Option<Box<dyn Fn(Timestamp) -> Receiver + Send>>,
    restart_at: Option<Timestamp>,
    pub restarts: u64,
    /// New streams received (the sender restarted), and packets of an old stream refused.
    pub new_streams: u64,
    pub stale_packets: u64,
    /// Packets that would have switched it to another stream but were not valid as a whole.
    pub spoofed: Spoofed,
    /// After a restart, transport sequence numbers are handed to the fresh state machine
    /// relative to the first one it sees (the core's receiver reports from 0 on, as a
    /// receiver that starts mid-stream reports from its first packet), and feedback adds it
    /// back. `None` until the first packet after a restart.
    transport_base: Option<u64>,
    restarted: bool,
    /// Restarted: a keyframe request goes out with the first packet's stream.
    pli_pending: bool,
    outbox: VecDeque<Vec<u8>>,
    reader: MediaReader,
    pub events: Vec<ReceiverEvent>,
    malformed: u64,
    pub media_packets: u64,
    sink: Option<Box<dyn MediaSink>>,
    /// With stream recording: the payload parts of frames not yet displayed, and the
    /// displayed frames' bytes in display order (the stream the viewer's decoder gets).
    parts: Option<BTreeMap<u64, Vec<Option<bytes::Bytes>>>>,
    pub stream: Vec<u8>,
    /// Displayed frames whose bytes were not all there (not written to the stream).
    pub stream_gaps: u64,
    /// Copy every video RTP datagram received to the monitor (an RTP player).
    forward: bool,
    monitor_out: VecDeque<Vec<u8>>,
}

impl ReceiverEndpoint {
    pub fn new(receiver: Receiver) -> Self {
        ReceiverEndpoint {
            receiver,
            fresh: None,
            restart_at: None,
            restarts: 0,
            new_streams: 0,
            stale_packets: 0,
            spoofed: Spoofed::default(),
            transport_base: None,
            restarted: false,
            pli_pending: false,
            outbox: VecDeque::new(),
            reader: MediaReader::default(),
            events: Vec::new(),
            malformed: 0,
            media_packets: 0,
            sink: None,
            parts: None,
            stream: Vec::new(),
            stream_gaps: 0,
            forward: false,
            monitor_out: VecDeque::new(),
        }
    }

    /// The receiver of a run ([`sluice_core::session::build_receiver`] for `cfg` and `scheme`),
    /// able to start fresh (a restart, or a new stream from a restarted sender).
    pub fn for_run(
        cfg: &sluice_core::session::RunConfig,
        scheme: &sluice_core::scheme::SchemeConfig,
        now: Timestamp,
    ) -> Self {
        let mut r = ReceiverEndpoint::new(sluice_core::session::build_receiver(cfg, scheme, now));
        let (cfg, scheme) = (cfg.clone(), scheme.clone());
        r.set_fresh(Box::new(move |now| sluice_core::session::build_receiver(&cfg, &scheme, now)));
        r
    }

    /// Copies the received video RTP (not padding) to [`Role::Monitor`].
    pub fn forward_video(&mut self) {
        self.forward = true;
    }

    /// Records the payloads of displayed frames, in display order ([`Self::stream`]).
    pub fn record_stream(&mut self) {
        self.parts = Some(BTreeMap::new());
    }

    fn keep_part(&mut self, m: &wire::MediaIn) {
        let Some(parts) = self.parts.as_mut() else { return };
        let p = &m.packet;
        if p.kind == PacketKind::Padding || p.packet_index >= p.packet_count {
            return;
        }
        if !parts.contains_key(&p.frame_id) && parts.len() >= FRAMES_KEPT {
            parts.pop_first();
        }
        let v = parts.entry(p.frame_id).or_insert_with(|| vec![None; p.packet_count as usize]);
        if let Some(slot) = v.get_mut(p.packet_index as usize) {
            slot.get_or_insert_with(|| m.payload.clone());
        }
    }

    fn on_displayed(&mut self, frame_id: u64) {
        let Some(parts) = self.parts.as_mut() else { return };
        match parts.remove(&frame_id) {
            Some(v) if v.iter().all(|x| x.is_some()) => {
                let parts: Vec<bytes::Bytes> = v.into_iter().flatten().collect();
                match crate::h264::depacketize(&parts) {
                    Ok(annexb) => self.stream.extend_from_slice(&annexb),
                    Err(_) => self.stream_gaps += 1,
                }
            }
            _ => self.stream_gaps += 1,
        }
        // Older frames will not be displayed any more.
        while parts.first_key_value().is_some_and(|(k, _)| *k < frame_id) {
            parts.pop_first();
        }
    }
    /// Restarts the receiver at `at` (fault injection): its state is lost (a fresh state
    /// machine from [`Self::set_fresh`]'s builder, which it needs; sequence numbers
    /// unwrapped anew) and, as a receiver does when it starts on a stream it cannot decode,
    /// it asks for a keyframe (PLI).
    pub fn restart_at(&mut self, at: Timestamp) {
        self.restart_at = Some(at);
    }

    /// How to build a fresh receiver: for a restart ([`Self::restart_at`]), and when a new
    /// stream starts (the sender restarted: a receiver drops the old stream's state and
    /// receives the new one from its first packet, as for a new SSRC). Without it the old
    /// state goes on.
    pub fn set_fresh(&mut self, fresh: Box<dyn Fn(Timestamp) -> Receiver + Send>) {
        self.fresh = Some(fresh);
    }

    /// Replaces the state machine with a fresh one at `now` (the old one's events kept);
    /// false if there is no builder ([`Self::set_fresh`]).
    fn start_fresh(&mut self, now: Timestamp) -> bool {
        let Some(fresh) = self.fresh.as_ref() else { return false };
        let receiver = fresh(now);
        self.drain_events();
        self.receiver = receiver;
        self.transport_base = None;
        true
    }

    /// The sender started a new stream at `now`.
    fn on_new_stream(&mut self, now: Timestamp) {
        self.new_streams += 1;
        if self.start_fresh(now) {
            // The new stream numbers from 0, as the fresh state machine expects.
            self.restarted = false;
        }
    }

    /// The sender's stream it read last (`None` before the first packet).
    pub fn stream(&self) -> Option<u32> {
        self.reader.stream()
    }

    pub fn set_sink(&mut self, sink: Box<dyn MediaSink>) {
        self.sink = Some(sink);
    }
    pub fn receiver(&self) -> &Receiver {
        &self.receiver
    }
    fn drain_events(&mut self) {
        while let Some(e) = self.receiver.poll_event() {
            if let ReceiverEvent::FrameDisplayed { frame_id, .. } = e {
                self.on_displayed(frame_id);
            }
            self.events.push(e);
        }
    }
}

impl Endpoint for ReceiverEndpoint {
    fn handle_datagram(&mut self, from: Role, bytes: &[u8], now: Timestamp) {
        if from != Role::Sender {
            self.malformed += 1;
            return;
        }
        let stream = self.reader.stream();
        match self.reader.read(bytes, now) {
            Ok(m) => {
                if stream.is_some_and(|s| m.stream != s) {
                    self.on_new_stream(now);
                }
                if std::mem::take(&mut self.pli_pending) {
                    // A restarted receiver cannot decode the stream it joins: it asks the
                    // stream's sender for a keyframe.
                    let pli = sluice_core::packet::Feedback::KeyframeRequest { flow: 0 };
                    if let Ok(b) = wire::write_feedback(&pli, m.stream) {
                        self.outbox.push_back(b);
                    }
                }
                self.media_packets += 1;
                if let Some(s) = self.sink.as_mut() {
                    s.on_media(&m);
                }
                self.keep_part(&m);
                if self.forward && m.packet.kind != PacketKind::Padding {
                    self.monitor_out.push_back(bytes.to_vec());
                }
                let mut p = m.packet;
                if self.restarted {
                    let base = *self.transport_base.get_or_insert(p.transport_seq);
                    match p.transport_seq.checked_sub(base) {
                        Some(t) => p.transport_seq = t,
                        None => return, // sent before the restart's first packet
                    }
                }
                self.receiver.handle_datagram(Datagram::Media(p), now);
            }
            Err(WireError::StaleStream) => self.stale_packets += 1,
            Err(WireError::SpoofedStream) => self.spoofed.stream_packets += 1,
            Err(_) => self.malformed += 1,
        }
        self.drain_events();
    }

    fn handle_timeout(&mut self, now: Timestamp) {
        if self.restart_at.is_some_and(|t| t <= now) {
            self.restart_at = None;
            if self.start_fresh(now) {
                self.reader.reset();
                self.restarts += 1;
                self.restarted = true;
                self.pli_pending = true;
            }
        }
        if self.receiver.poll_timeout() <= now {
            self.receiver.handle_timeout(now);
        }
        self.drain_events();
    }

    fn poll_transmit(&mut self, _now: Timestamp) -> Option<(Role, Vec<u8>)> {
        if let Some(b) = self.monitor_out.pop_front() {
            return Some((Role::Monitor, b));
        }
        if let Some(b) = self.outbox.pop_front() {
            return Some((Role::Sender, b));
        }
        loop {
            let Datagram::Feedback(mut f) = self.receiver.poll_transmit()? else { continue };
            if let (sluice_core::packet::Feedback::Transport(t), Some(base)) =
                (&mut f, self.transport_base)
            {
                for r in &mut t.packets {
                    r.transport_seq += base;
                }
            }
            if let Ok(b) = wire::write_feedback(&f, self.reader.stream().unwrap_or(0)) {
                return Some((Role::Sender, b));
            }
        }
    }

    fn poll_timeout(&self) -> Timestamp {
        let restart = self.restart_at.unwrap_or(Timestamp::INFINITY);
        let out = if self.outbox.is_empty() && self.monitor_out.is_empty() {
            Timestamp::INFINITY
        } else {
            Timestamp::ZERO
        };
        self.receiver.poll_timeout().min(restart).min(out)
    }

    fn malformed(&self) -> u64 {
        self.malformed + self.receiver.malformed()
    }
}

/// A forged copy of an SRTP packet `b` (WebRTC transport; the relay cannot read it as
/// Sluice's RTP): a later sequence number and a payload byte changed, or another SSRC, so
/// it is not authentic. `None` for anything else (Sluice's plain RTP, RTCP, STUN, DTLS).
fn forged_srtp(b: &[u8], r: u64) -> Option<Vec<u8>> {
    let rtp = b.len() > 40 && (128..192).contains(&b[0]) && !(192..=223).contains(&b[1]);
    if !rtp {
        return None;
    }
    let mut f = b.to_vec();
    if r & 4 == 0 {
        // A sequence number ahead (so the receiver authenticates it) and a changed byte.
        let seq = u16::from_be_bytes([f[2], f[3]]).wrapping_add(500 + (r >> 8) as u16 % 500);
        f[2..4].copy_from_slice(&seq.to_be_bytes());
        let i = 32 + (r >> 16) as usize % (f.len() - 32);
        f[i] ^= 0x5a;
    } else {
        // Another SSRC: a new stream of the same media.
        f[11] ^= 0x5a;
    }
    Some(f)
}

/// Faults the relay injects on top of the link model (the link's own loss is
/// `PathConfig::loss`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Faults {
    /// Probability that a delivered media datagram is delivered twice.
    pub duplicate: f64,
    /// Probability that a delivered media datagram is held back by `reorder_delay` (so later
    /// ones overtake it).
    pub reorder: f64,
    pub reorder_delay: TimeDelta,
    /// Feedback (receiver to sender) dropped in this window: a feedback blackout.
    pub feedback_blackout: Option<(Timestamp, Timestamp)>,
    /// Probability that the relay, forwarding a datagram, also sends the same peer a
    /// malformed one (a corrupted copy, a truncation or random bytes).
    pub garbage: f64,
    /// Probability that the relay, forwarding a datagram, also sends the same peer a
    /// spoofed one (issue 30): to the receiver a copy of a video packet claiming another
    /// stream, not valid as a whole (with WebRTC, a copy of an SRTP packet with a byte
    /// changed); to the sender a NACK of numbers it never sent or a keyframe request (plain
    /// RTCP: with WebRTC, not authentic).
    pub spoof: f64,
}

/// The relay: downlink and uplink links of the simulator between sender and receiver, and
/// with an access delay the simulator's delay lines between the sender and the bottleneck
/// ([`sluice_core::session::build_access_links`]).
pub struct RelayEndpoint {
    downlink: Link,
    uplink: Link,
    /// The access path: sender to bottleneck, and back to the sender (reports, feedback).
    access: Option<(Link, Link)>,
    reader: MediaReader,
    next_key: u64,
    down_bytes: BTreeMap<u64, Vec<u8>>,
    up_bytes: BTreeMap<u64, Vec<u8>>,
    faults: Faults,
    rng: Rng,
    /// Media held back for reordering: (release time, bytes).
    held: VecDeque<(Timestamp, Vec<u8>)>,
    extra: VecDeque<(Role, Vec<u8>)>,
    malformed: u64,
    /// Media datagrams that did not parse, forwarded as opaque bytes (a network carries
    /// what it is given; the receiver counts them).
    pub opaque: u64,
    /// Packets that would have switched its reader to another stream but were not valid as
    /// a whole (forwarded as opaque bytes all the same).
    pub spoofed: Spoofed,
    pub duplicated: u64,
    pub reordered: u64,
    pub blackout_dropped: u64,
    pub garbage_sent: u64,
    /// Spoofed datagrams sent (the spoof fault).
    pub spoof_sent: u64,
    /// The highest media sequence number read from the sender (for spoofed NACKs).
    last_media_seq: u64,
    /// Bottleneck reports sent to the sender (schemes whose bottleneck reports).
    pub reports_sent: u64,
    /// Frames the bottleneck dropped on purpose (for the frame records).
    pub policy_dropped_frames: Vec<u64>,
    trace: Option<Arc<sluice_core::link::trace::Trace>>,
    shared: Option<SharedLink>,
    last_snapshot: Timestamp,
    snapshot_interval: TimeDelta,
    /// Every datagram's way through the relay, if asked for ([`Self::log_datagrams`]).
    log: Option<DatagramLog>,
    /// TCP cross traffic inside the downlink (`--competing tcp:...`, `short-tcp`).
    cross: Option<sluice_core::sim::flows::CrossTraffic>,
}

/// One datagram's way through the relay (its clock): when it came, its size, which way it
/// went, and when it left (`None`: the link dropped it, or it was still inside at the end).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DatagramRecord {
    pub arrived_us: i64,
    /// "down" (sender to receiver, through the bottleneck) or "up" (the way back).
    pub dir: String,
    pub size_bytes: u32,
    pub left_us: Option<i64>,
    pub dropped: bool,
}

/// The datagrams inside the relay and the records of those that left or were dropped.
#[derive(Debug, Default)]
struct DatagramLog {
    inside: BTreeMap<u64, DatagramRecord>,
    done: Vec<DatagramRecord>,
}

impl DatagramLog {
    fn arrived(&mut self, key: u64, dir: &str, size: usize, now: Timestamp) {
        let size_bytes = u32::try_from(size).unwrap_or(u32::MAX);
        let r = DatagramRecord {
            arrived_us: now.as_us(),
            dir: dir.into(),
            size_bytes,
            left_us: None,
            dropped: false,
        };
        self.inside.insert(key, r);
    }
    fn left(&mut self, key: u64, now: Timestamp) {
        if let Some(mut r) = self.inside.remove(&key) {
            r.left_us = Some(now.as_us());
            self.done.push(r);
        }
    }
    fn dropped(&mut self, key: u64) {
        if let Some(mut r) = self.inside.remove(&key) {
            r.dropped = true;
            self.done.push(r);
        }
    }
}

impl RelayEndpoint {
    pub fn new(
        mut downlink: Link,
        mut uplink: Link,
        faults: Faults,
        seed: u64,
        trace: Option<Arc<sluice_core::link::trace::Trace>>,
        shared: Option<SharedLink>,
    ) -> Self {
        downlink.set_drop_log(true);
        uplink.set_drop_log(true);
        RelayEndpoint {
            downlink,
            uplink,
            access: None,
            reader: MediaReader::default(),
            next_key: 0,
            down_bytes: BTreeMap::new(),
            up_bytes: BTreeMap::new(),
            faults,
            rng: Rng::fork(seed, "live-relay-faults"),
            held: VecDeque::new(),
            extra: VecDeque::new(),
            malformed: 0,
            opaque: 0,
            spoofed: Spoofed::default(),
            duplicated: 0,
            reordered: 0,
            blackout_dropped: 0,
            garbage_sent: 0,
            spoof_sent: 0,
            last_media_seq: 0,
            reports_sent: 0,
            policy_dropped_frames: Vec::new(),
            trace,
            shared,
            last_snapshot: Timestamp::ZERO,
            snapshot_interval: TimeDelta::from_ms(5),
            log: None,
            cross: None,
        }
    }

    /// Carries `cross` (TCP cross traffic, [`sluice_core::sim::flows::CrossTraffic`]) inside
    /// the downlink, sharing its queue and capacity with the media; the downlink then counts
    /// per flow ([`Link::flow_stats`]).
    pub fn set_cross_traffic(&mut self, cross: sluice_core::sim::flows::CrossTraffic) {
        self.downlink.enable_flow_stats();
        self.cross = Some(cross);
    }

    /// Moves what the cross traffic sends at `now` into the downlink.
    fn pump_cross(&mut self, now: Timestamp) {
        let Some(cross) = self.cross.as_mut() else { return };
        while let Some(d) = cross.poll_transmit(now) {
            self.downlink.handle_datagram(d, now);
        }
    }

    /// Keeps a record of every datagram's way through the relay ([`Self::datagram_log`]).
    pub fn log_datagrams(&mut self) {
        self.log.get_or_insert_with(DatagramLog::default);
    }

    /// The datagrams that left or were dropped, then those still inside, in arrival order.
    pub fn datagram_log(&self) -> Vec<DatagramRecord> {
        let Some(log) = &self.log else { return Vec::new() };
        let mut out: Vec<DatagramRecord> =
            log.done.iter().chain(log.inside.values()).cloned().collect();
        out.sort_by_key(|r| r.arrived_us);
        out
    }

    /// The relay of a run: the simulator's downlink and uplink for `cfg` and `scheme`
    /// ([`sluice_core::session::build_links`]), and its access path if `cfg` has an access delay.
    pub fn for_run(
        cfg: &sluice_core::session::RunConfig,
        scheme: &sluice_core::scheme::SchemeConfig,
        downlink_trace: Option<Arc<sluice_core::link::trace::Trace>>,
        uplink_trace: Option<Arc<sluice_core::link::trace::Trace>>,
        faults: Faults,
        shared: Option<SharedLink>,
    ) -> Self {
        let (downlink, uplink) =
            sluice_core::session::build_links(cfg, scheme, downlink_trace.clone(), uplink_trace);
        let mut relay =
            RelayEndpoint::new(downlink, uplink, faults, cfg.seed, downlink_trace, shared);
        if let Some(links) = sluice_core::session::build_access_links(cfg) {
            relay.set_access_path(links);
        }
        // A media flow among them is refused by the caller's check
        // (`CrossTraffic::for_run` before this); none is built here then.
        if let Ok(Some(cross)) = sluice_core::sim::flows::CrossTraffic::for_run(cfg) {
            relay.set_cross_traffic(cross);
        }
        relay
    }

    /// The sender's stream it read last (`None` before the first packet).
    pub fn stream(&self) -> Option<u32> {
        self.reader.stream()
    }

    pub fn downlink(&self) -> &Link {
        &self.downlink
    }

    /// The downlink's counters of the session's own packets: all of them, or with cross
    /// traffic flow 0's (arrivals, drops as queue drops, deliveries), so the summary's keys
    /// stay the session's own as in the simulator.
    pub fn media_stats(&self) -> sluice_core::link::LinkStats {
        let stats = *self.downlink.stats();
        let Some(t) = self.downlink.flow_stats() else { return stats };
        let f = t.get(0);
        sluice_core::link::LinkStats {
            arrived_packets: f.arrived_packets,
            arrived_bytes: f.arrived_bytes,
            dropped_loss_packets: 0,
            dropped_queue_packets: f.dropped_packets - stats.dropped_policy_packets,
            dropped_policy_packets: stats.dropped_policy_packets,
            dropped_bytes: f.dropped_bytes,
            delivered_packets: f.delivered_packets,
            delivered_bytes: f.delivered_bytes,
        }
    }

    /// Puts the access path between the sender and the bottleneck: `(to the bottleneck, back
    /// to the sender)`, as the simulator does for an access delay.
    pub fn set_access_path(&mut self, links: (Link, Link)) {
        self.access = Some(links);
    }

    /// Moves what the access path delivered on: media into the downlink.
    fn forward_access(&mut self, now: Timestamp) {
        let Some((to_bn, back)) = self.access.as_mut() else { return };
        if to_bn.poll_timeout() <= now {
            to_bn.handle_timeout(now);
        }
        while let Some(d) = to_bn.poll_datagram(now) {
            self.downlink.handle_datagram(d, now);
        }
        if back.poll_timeout() <= now {
            back.handle_timeout(now);
        }
    }

    /// A datagram on its way to the sender: over the access path's way back if there is one.
    /// Returns it if it goes straight to the sender.
    fn toward_sender(&mut self, d: Datagram, now: Timestamp) -> Option<Datagram> {
        match self.access.as_mut() {
            Some((_, back)) => {
                back.handle_datagram(d, now);
                None
            }
            None => Some(d),
        }
    }

    /// The bytes of a datagram for the sender (a report written out, feedback looked up).
    fn sender_bytes(&mut self, d: Datagram, now: Timestamp) -> Option<Vec<u8>> {
        match d {
            Datagram::Feedback(r) => {
                let b = wire::write_feedback(&r, self.reader.stream().unwrap_or(0)).ok()?;
                self.reports_sent += 1;
                Some(b)
            }
            Datagram::Media(p) => {
                let b = self.up_bytes.remove(&p.transport_seq)?;
                if let Some(log) = self.log.as_mut() {
                    log.left(p.transport_seq, now);
                }
                self.maybe_garbage(Role::Sender, &b);
                self.maybe_spoof(Role::Sender, &b);
                Some(b)
            }
        }
    }

    /// With the garbage fault, queues a malformed datagram for `to` after `b`.
    fn maybe_garbage(&mut self, to: Role, b: &[u8]) {
        if self.faults.garbage <= 0.0 || !self.rng.bernoulli(self.faults.garbage) {
            return;
        }
        self.garbage_sent += 1;
        let r = self.rng.next_u64();
        let mut g = b.to_vec();
        match r % 4 {
            0 => g.truncate((r >> 8) as usize % g.len().max(1)),
            1 => {
                for i in 0..g.len().min(24) {
                    g[i] ^= (self.rng.next_u64() & 0xff) as u8;
                }
            }
            2 => g = (0..(r >> 8) % 200).map(|_| self.rng.next_u64() as u8).collect(),
            _ => {
                // A valid-looking header with nonsense lengths.
                if g.len() > 4 {
                    g[2] = 0xff;
                    g[3] = 0xff;
                }
            }
        }
        self.extra.push_back((to, g));
    }

    /// With the spoof fault, queues a spoofed datagram for `to` after `b` (see
    /// [`Faults::spoof`]).
    fn maybe_spoof(&mut self, to: Role, b: &[u8]) {
        if self.faults.spoof <= 0.0 || !self.rng.bernoulli(self.faults.spoof) {
            return;
        }
        let stream = self.reader.stream().unwrap_or(0);
        let r = self.rng.next_u64();
        let spoofed = match to {
            Role::Receiver => {
                let other = (stream + 1 + (r % 64) as u32) % wire::MAX_STREAMS;
                match wire::media_parts(b) {
                    Ok(_) => wire::spoofed_media(b, other),
                    Err(_) => {
                        // WebRTC (SRTP): a forged copy to the receiver, and feedback to the
                        // sender at the media's rate (a NACK flood; its own feedback is
                        // too rare to carry one).
                        if let Some(f) = self.spoofed_feedback(r >> 1, stream) {
                            self.spoof_sent += 1;
                            self.extra.push_back((Role::Sender, f));
                        }
                        forged_srtp(b, r)
                    }
                }
            }
            _ => self.spoofed_feedback(r, stream),
        };
        if let Some(s) = spoofed {
            self.spoof_sent += 1;
            self.extra.push_back((to, s));
        }
    }

    /// A spoofed NACK of numbers the sender never sent, or a keyframe request.
    fn spoofed_feedback(&self, r: u64, stream: u32) -> Option<Vec<u8>> {
        if r.is_multiple_of(2) {
            // Numbers far ahead of anything the sender sent (within the unwrap window).
            let ahead = self.last_media_seq + 5000 + (r >> 8) % 1000;
            let f = Feedback::Nack { flow: 0, media_seqs: vec![ahead, ahead + 1, ahead + 2] };
            wire::write_feedback(&f, stream).ok()
        } else {
            wire::write_feedback(&Feedback::KeyframeRequest { flow: 0 }, stream).ok()
        }
    }

    fn key(&mut self) -> u64 {
        self.next_key += 1;
        self.next_key
    }

    fn drain_drops(&mut self) {
        while let Some((d, why)) = self.downlink.poll_drop() {
            if let Datagram::Media(p) = d {
                if p.flow != 0 {
                    continue; // cross traffic: its own loss detection finds out
                }
                self.down_bytes.remove(&p.transport_seq);
                if let Some(log) = self.log.as_mut() {
                    log.dropped(p.transport_seq);
                }
                if why == DropReason::Policy
                    && matches!(p.kind, PacketKind::Video | PacketKind::Retransmission)
                {
                    self.policy_dropped_frames.push(p.frame_id);
                }
            }
        }
        while let Some((d, _)) = self.uplink.poll_drop() {
            if let Datagram::Media(p) = d {
                self.up_bytes.remove(&p.transport_seq);
                if let Some(log) = self.log.as_mut() {
                    log.dropped(p.transport_seq);
                }
            }
        }
    }

    fn snapshot(&mut self, now: Timestamp) {
        let Some(shared) = &self.shared else { return };
        if now < self.last_snapshot + self.snapshot_interval {
            return;
        }
        self.last_snapshot = now;
        let mut columns = Columns::default();
        self.downlink.debug_columns(&mut columns);
        let stats = self.downlink.stats();
        let window = TimeDelta::from_ms(20);
        let capacity = self
            .trace
            .as_ref()
            .map_or(0, |t| (t.capacity_between(now - window, now) / window).as_bps());
        // With cross traffic the session's keys stay its own (flow 0), as in the simulator.
        let (delivered_bytes, dropped_packets) = match self.downlink.flow_stats() {
            Some(t) => (t.delivered_bytes(0), t.dropped_packets(0)),
            None => (stats.delivered_bytes, stats.dropped_packets()),
        };
        let flow_delivered_bytes = match (self.downlink.flow_stats(), &self.cross) {
            (Some(t), Some(c)) => {
                std::iter::once(0).chain(c.flows()).map(|f| (f, t.delivered_bytes(f))).collect()
            }
            _ => Vec::new(),
        };
        if let Ok(mut s) = shared.lock() {
            *s = LinkSnapshot {
                queue_bytes: self.downlink.queue_bytes().as_bytes(),
                queue_packets: self.downlink.queue_packets() as u64,
                queue_delay_us: self.downlink.last_queue_delay().as_us(),
                delivered_bytes,
                dropped_packets,
                flow_delivered_bytes,
                columns,
                link_capacity_bps: capacity,
            };
        }
    }
}

impl Endpoint for RelayEndpoint {
    fn handle_datagram(&mut self, from: Role, bytes: &[u8], now: Timestamp) {
        let key = self.key();
        match from {
            // A monitor is output only (the runtime never maps an address to it).
            Role::Monitor => self.malformed += 1,
            Role::Sender => {
                let mut p = match self.reader.read(bytes, now) {
                    Ok(m) => {
                        self.last_media_seq = self.last_media_seq.max(m.packet.media_seq);
                        m.packet
                    }
                    Err(e) => {
                        if e == WireError::SpoofedStream {
                            self.spoofed.stream_packets += 1;
                        }
                        self.opaque += 1;
                        let size = DataSize::from_bytes(bytes.len() as i64) + UDP_IP_OVERHEAD;
                        Packet::padding(size, now)
                    }
                };
                // The key finds the bytes again when the link delivers (links do not read
                // transport sequence numbers).
                p.transport_seq = key;
                self.down_bytes.insert(key, bytes.to_vec());
                if let Some(log) = self.log.as_mut() {
                    log.arrived(key, "down", bytes.len(), now);
                }
                match self.access.as_mut() {
                    Some((to_bn, _)) => to_bn.handle_datagram(Datagram::Media(p), now),
                    None => self.downlink.handle_datagram(Datagram::Media(p), now),
                }
            }
            Role::Receiver => {
                if self.faults.feedback_blackout.is_some_and(|(a, b)| now >= a && now < b) {
                    self.blackout_dropped += 1;
                    return;
                }
                let size = DataSize::from_bytes(bytes.len() as i64) + UDP_IP_OVERHEAD;
                let mut p = Packet::padding(size, now);
                p.transport_seq = key;
                self.up_bytes.insert(key, bytes.to_vec());
                if let Some(log) = self.log.as_mut() {
                    log.arrived(key, "up", bytes.len(), now);
                }
                self.uplink.handle_datagram(Datagram::Media(p), now);
            }
        }
        self.pump_cross(now);
        self.drain_drops();
        self.snapshot(now);
    }

    fn handle_timeout(&mut self, now: Timestamp) {
        self.forward_access(now);
        self.pump_cross(now);
        if self.downlink.poll_timeout() <= now {
            self.downlink.handle_timeout(now);
        }
        if self.uplink.poll_timeout() <= now {
            self.uplink.handle_timeout(now);
        }
        self.drain_drops();
        self.snapshot(now);
    }

    fn poll_transmit(&mut self, now: Timestamp) -> Option<(Role, Vec<u8>)> {
        if let Some(x) = self.extra.pop_front() {
            return Some(x);
        }
        if self.held.front().is_some_and(|(t, _)| *t <= now) {
            return self.held.pop_front().map(|(_, b)| (Role::Receiver, b));
        }
        while let Some(report) = self.downlink.poll_report() {
            if let Some(d) = self.toward_sender(report, now) {
                if let Some(b) = self.sender_bytes(d, now) {
                    return Some((Role::Sender, b));
                }
            }
        }
        while let Some(d) = self.downlink.poll_datagram(now) {
            if let Some(cross) = self.cross.as_mut().filter(|c| c.carries(d.flow())) {
                cross.deliver(d, now);
                self.pump_cross(now);
                continue;
            }
            let Datagram::Media(p) = d else { continue };
            let Some(b) = self.down_bytes.remove(&p.transport_seq) else { continue };
            if let Some(log) = self.log.as_mut() {
                log.left(p.transport_seq, now);
            }
            if self.faults.reorder > 0.0 && self.rng.bernoulli(self.faults.reorder) {
                self.reordered += 1;
                self.held.push_back((now + self.faults.reorder_delay, b));
                continue;
            }
            if self.faults.duplicate > 0.0 && self.rng.bernoulli(self.faults.duplicate) {
                self.duplicated += 1;
                self.extra.push_back((Role::Receiver, b.clone()));
            }
            self.maybe_garbage(Role::Receiver, &b);
            self.maybe_spoof(Role::Receiver, &b);
            return Some((Role::Receiver, b));
        }
        while let Some(d) = self.uplink.poll_datagram(now) {
            if let Some(d) = self.toward_sender(d, now) {
                if let Some(b) = self.sender_bytes(d, now) {
                    return Some((Role::Sender, b));
                }
            }
        }
        while let Some(d) = self.access.as_mut().and_then(|(_, back)| back.poll_datagram(now)) {
            if let Some(b) = self.sender_bytes(d, now) {
                return Some((Role::Sender, b));
            }
        }
        None
    }

    fn poll_timeout(&self) -> Timestamp {
        let held = self.held.front().map_or(Timestamp::INFINITY, |(t, _)| *t);
        let extra = if self.extra.is_empty() { Timestamp::INFINITY } else { Timestamp::ZERO };
        let access = self
            .access
            .as_ref()
            .map_or(Timestamp::INFINITY, |(a, b)| a.poll_timeout().min(b.poll_timeout()));
        let cross = self.cross.as_ref().map_or(Timestamp::INFINITY, |c| c.poll_timeout());
        self.downlink
            .poll_timeout()
            .min(self.uplink.poll_timeout())
            .min(held)
            .min(extra)
            .min(access)
            .min(cross)
    }

    fn malformed(&self) -> u64 {
        self.malformed
    }
}
