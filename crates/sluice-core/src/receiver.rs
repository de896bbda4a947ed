//! The receiver: frame reassembly, decodability through the reference chain, display,
//! transport-wide feedback (TWCC semantics), NACKs with RTT-based retries, and keyframe
//! requests when the chain breaks.
//!
//! * A frame is **complete** when all its packets have arrived.
//! * A frame is **decodable** when it is complete and it is a keyframe or the frame it
//!   references has been decoded. The next frame displayed is the lowest-numbered decodable
//!   frame after the last one displayed (not only the next id: a sender that drops frames
//!   re-references an older one), or else the newest complete keyframe; frames passed over
//!   are discarded. Decodable frames are displayed at once, in order (no jitter buffer: the
//!   low-latency setting of the papers).
//! * Malformed input (a packet index beyond its frame's count, absurd sizes or sequence
//!   jumps) is counted and dropped, never a panic or an unbounded allocation.
//! * A missing packet is NACKed when the gap is seen and again every RTT (the receiver
//!   measures RTT as NACK -> retransmission time); after `max_nack_retries` or `nack_give_up`
//!   it gives up, the chain is broken, and the receiver asks for a keyframe (repeated every
//!   `keyframe_request_interval` until one is displayed).

use crate::packet::{
    Datagram, Feedback, FlowId, Packet, PacketKind, PacketReport, TransportFeedback,
};
use crate::units::{TimeDelta, Timestamp};
use std::collections::{BTreeMap, VecDeque};

/// Frames larger than this many packets are malformed (about 5 MB of video).
pub const MAX_FRAME_PACKETS: u16 = 4096;
/// Frames waiting to be completed or decoded beyond this many: the oldest are dropped.
const MAX_PENDING_FRAMES: usize = 10_000;
/// A sequence-number jump beyond this is not NACKed packet by packet: the receiver gives up
/// on the gap and asks for a keyframe (libwebrtc's NackRequester: kMaxNackPackets, 1000).
pub const MAX_NACK_GAP: u64 = 1000;
/// Transport-wide feedback covers at most this many packets (a TWCC report's 16-bit status
/// count); older unreported ones are skipped.
pub const MAX_REPORT_PACKETS: u64 = 1 << 15;
/// Decoded frames remembered as possible references (x264's DPB holds at most 16).
const DECODED_MEMORY: usize = 64;

/// Media sequence numbers remembered behind the highest received (to tell duplicates and
/// gaps); older ones are forgotten.
const MEDIA_SEQ_MEMORY: u64 = 100_000;

/// The media sequence numbers received, within [`MEDIA_SEQ_MEMORY`] of the highest: a bitmap
/// from `base` (sequence numbers arrive nearly in order, so a ring beats a tree).
#[derive(Clone, Debug, Default)]
struct SeqSet {
    base: u64,
    bits: VecDeque<bool>,
}

impl SeqSet {
    /// Adds `seq`; false if it was there. A number below the remembered window counts as new
    /// (it is forgotten again at once, as a set that forgets old numbers would).
    fn insert(&mut self, seq: u64) -> bool {
        if seq < self.base {
            return true;
        }
        if seq - self.base > 2 * MEDIA_SEQ_MEMORY {
            // A jump: everything this far behind will be forgotten after this packet anyway.
            self.forget_below(seq - MEDIA_SEQ_MEMORY);
        }
        let i = (seq - self.base) as usize;
        if i >= self.bits.len() {
            self.bits.resize(i + 1, false);
        }
        !std::mem::replace(&mut self.bits[i], true)
    }

    fn contains(&self, seq: u64) -> bool {
        seq >= self.base && self.bits.get((seq - self.base) as usize).copied().unwrap_or(false)
    }

    fn forget_below(&mut self, floor: u64) {
        if floor > self.base {
            let n = usize::try_from(floor - self.base).unwrap_or(usize::MAX);
            self.bits.drain(..n.min(self.bits.len()));
            self.base = floor;
        }
    }
}

/// The receiver's feedback, NACK and keyframe-request timing.
#[derive(Clone, Debug)]
pub struct ReceiverConfig {
    /// Transport feedback interval (libwebrtc: 100 ms by default, 50-250 ms adaptive).
    pub feedback_interval: TimeDelta,
    /// Give up a NACKed packet after this many requests (libwebrtc: 10).
    pub max_nack_retries: u32,
    /// ...or after it has been missing this long.
    pub nack_give_up: TimeDelta,
    /// RTT assumed before the first measurement.
    pub initial_rtt: TimeDelta,
    /// Least time between two keyframe requests; while the chain is broken they repeat at this
    /// interval (default 300 ms).
    pub keyframe_request_interval: TimeDelta,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            feedback_interval: TimeDelta::from_ms(50),
            max_nack_retries: 10,
            nack_give_up: TimeDelta::from_secs(1),
            initial_rtt: TimeDelta::from_ms(100),
            keyframe_request_interval: TimeDelta::from_ms(300),
        }
    }
}

/// What the receiver reports for metrics (serde: a live receiver's events are written to a
/// file and merged with the sender's, sluice-live's `part`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum ReceiverEvent {
    /// All packets of a frame arrived.
    FrameCompleted {
        /// The completed frame's id.
        frame_id: u64,
        /// When its last missing packet arrived.
        time: Timestamp,
    },
    /// A frame was decoded and displayed.
    FrameDisplayed {
        /// The displayed frame's id.
        frame_id: u64,
        /// When it was displayed.
        time: Timestamp,
    },
    /// Frames passed over because a later frame (a keyframe, or one referencing an older
    /// frame) was displayed first, or the oldest frame still waiting (incomplete or not yet
    /// decodable) given up when 10,000 wait.
    FrameDiscarded {
        /// The discarded frame's id.
        frame_id: u64,
        /// When it was discarded.
        time: Timestamp,
    },
    /// The receiver asked the sender for a keyframe.
    KeyframeRequested {
        /// When it asked.
        time: Timestamp,
    },
}

#[derive(Debug)]
struct FrameAssembly {
    packet_count: u16,
    received: Vec<bool>,
    received_count: u16,
    is_keyframe: bool,
    ref_frame_id: Option<u64>,
    complete: bool,
    /// Media sequence number of the frame's first packet.
    first_media_seq: u64,
}

#[derive(Debug)]
struct NackEntry {
    first_missing: Timestamp,
    first_sent: Option<Timestamp>,
    last_sent: Option<Timestamp>,
    retries: u32,
}

/// The receiving side of one media flow (see the module documentation).
pub struct Receiver {
    config: ReceiverConfig,
    flow: FlowId,
    // --- transport feedback ---
    /// Arrival times of the packets not yet reported, by transport sequence number from
    /// `arrivals_base` (`None`: not arrived); `newest_unreported` is the highest arrived.
    arrivals: VecDeque<Option<Timestamp>>,
    arrivals_base: u64,
    newest_unreported: Option<u64>,
    /// First sequence number the next report covers.
    next_report_seq: u64,
    feedback_seq: u64,
    next_feedback_time: Timestamp,
    // --- media ---
    frames: BTreeMap<u64, FrameAssembly>,
    /// Highest frame id displayed so far (the decoder's position).
    last_decoded: Option<u64>,
    /// Recently decoded frames (the possible references).
    decoded: VecDeque<u64>,
    /// Malformed packets dropped.
    malformed: u64,
    highest_media_seq: Option<u64>,
    received_media: SeqSet,
    nacks: BTreeMap<u64, NackEntry>,
    /// Earliest time a NACK entry is due (retry or give-up); may be early, never late.
    nack_due: Timestamp,
    /// Round-trip time measured from NACK to retransmission (EWMA).
    rtt: TimeDelta,
    chain_broken: bool,
    last_keyframe_request: Option<Timestamp>,
    outbox: VecDeque<Feedback>,
    events: VecDeque<ReceiverEvent>,
}

impl Receiver {
    /// A receiver for flow `flow` at `now`; its first feedback is due one interval later.
    pub fn new(config: ReceiverConfig, flow: FlowId, now: Timestamp) -> Self {
        Receiver {
            rtt: config.initial_rtt,
            next_feedback_time: now + config.feedback_interval,
            config,
            flow,
            arrivals: VecDeque::new(),
            arrivals_base: 0,
            newest_unreported: None,
            next_report_seq: 0,
            feedback_seq: 0,
            frames: BTreeMap::new(),
            last_decoded: None,
            decoded: VecDeque::new(),
            malformed: 0,
            highest_media_seq: None,
            received_media: SeqSet::default(),
            nacks: BTreeMap::new(),
            nack_due: Timestamp::INFINITY,
            chain_broken: false,
            last_keyframe_request: None,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// Malformed packets dropped so far.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// The receiver's RTT estimate (from NACK round trips).
    pub fn rtt(&self) -> TimeDelta {
        self.rtt
    }

    /// A datagram arrives at `now` (only media packets are used).
    pub fn handle_datagram(&mut self, d: Datagram, now: Timestamp) {
        if let Datagram::Media(p) = d {
            self.handle_packet(p, now);
        }
    }

    fn handle_packet(&mut self, p: Packet, now: Timestamp) {
        if p.transport_seq >= self.next_report_seq {
            self.record_arrival(p.transport_seq, now);
        }
        if p.kind == PacketKind::Padding {
            return;
        }
        if p.packet_count == 0
            || p.packet_count > MAX_FRAME_PACKETS
            || p.packet_index >= p.packet_count
            || p.media_seq < p.packet_index as u64
        {
            self.malformed += 1;
            return;
        }
        if let Some(entry) = self.nacks.remove(&p.media_seq) {
            // RTT from the first NACK to the retransmission. When the first retransmission
            // was lost this overestimates (Karn's ambiguity); erring long only slows retries.
            if p.kind == PacketKind::Retransmission {
                if let Some(sent) = entry.first_sent {
                    let sample = now - sent;
                    self.rtt = self.rtt * 0.75 + sample * 0.25;
                }
            }
        }
        if !self.received_media.insert(p.media_seq) {
            return; // duplicate
        }
        self.track_gaps(p.media_seq, now);
        // Frames older than the decoder's position are useless now.
        if self.last_decoded.is_some_and(|d| p.frame_id <= d) {
            return;
        }
        if !self.frames.contains_key(&p.frame_id) && self.frames.len() >= MAX_PENDING_FRAMES {
            if let Some((old, _)) = self.frames.pop_first() {
                self.events.push_back(ReceiverEvent::FrameDiscarded { frame_id: old, time: now });
            }
        }
        let f = self.frames.entry(p.frame_id).or_insert_with(|| FrameAssembly {
            packet_count: p.packet_count,
            received: vec![false; p.packet_count as usize],
            received_count: 0,
            is_keyframe: p.is_keyframe,
            ref_frame_id: p.ref_frame_id,
            complete: false,
            first_media_seq: p.media_seq - p.packet_index as u64,
        });
        let idx = p.packet_index as usize;
        if f.packet_count != p.packet_count {
            self.malformed += 1; // the frame's packets disagree on its size
            return;
        }
        if idx < f.received.len() && !f.received[idx] {
            f.received[idx] = true;
            f.received_count += 1;
            if f.received_count == f.packet_count {
                f.complete = true;
                self.events
                    .push_back(ReceiverEvent::FrameCompleted { frame_id: p.frame_id, time: now });
                self.try_display(now);
            }
        }
        // Forget media sequence numbers far behind (bounded memory).
        if let Some(h) = self.highest_media_seq {
            self.received_media.forget_below(h.saturating_sub(MEDIA_SEQ_MEMORY));
        }
    }

    fn track_gaps(&mut self, media_seq: u64, now: Timestamp) {
        match self.highest_media_seq {
            None => self.highest_media_seq = Some(media_seq),
            Some(h) if media_seq > h.saturating_add(MAX_NACK_GAP) => {
                // Too many missing to NACK one by one: skip the gap, start again from a
                // keyframe.
                self.highest_media_seq = Some(media_seq);
                self.nacks.clear();
                self.chain_broken = true;
                self.request_keyframe(now);
            }
            Some(h) if media_seq > h => {
                let mut new_missing = Vec::new();
                for s in h + 1..media_seq {
                    if !self.received_media.contains(s) {
                        self.nacks.insert(
                            s,
                            NackEntry {
                                first_missing: now,
                                first_sent: None,
                                last_sent: None,
                                retries: 0,
                            },
                        );
                        new_missing.push(s);
                    }
                }
                self.highest_media_seq = Some(media_seq);
                if !new_missing.is_empty() {
                    self.send_nacks(now);
                }
            }
            _ => {}
        }
    }

    /// Sends NACKs for entries that are due; gives up on hopeless ones.
    fn send_nacks(&mut self, now: Timestamp) {
        let mut due = Vec::new();
        let mut gave_up = false;
        let retry = self.rtt.max(TimeDelta::from_ms(5));
        let (max_retries, give_up) = (self.config.max_nack_retries, self.config.nack_give_up);
        let mut next_due = Timestamp::INFINITY;
        self.nacks.retain(|&seq, e| {
            if e.retries >= max_retries || now - e.first_missing > give_up {
                gave_up = true;
                return false;
            }
            if e.last_sent.is_none_or(|t| now - t >= retry) {
                e.first_sent.get_or_insert(now);
                e.last_sent = Some(now);
                e.retries += 1;
                due.push(seq);
            }
            let retry_at = e.last_sent.map_or(now, |t| t + retry);
            next_due = next_due.min(retry_at).min(e.first_missing + give_up);
            true
        });
        self.nack_due = next_due;
        if gave_up {
            self.chain_broken = true;
            self.request_keyframe(now);
        }
        if !due.is_empty() {
            self.outbox.push_back(Feedback::Nack { flow: self.flow, media_seqs: due });
        }
    }

    fn request_keyframe(&mut self, now: Timestamp) {
        if self
            .last_keyframe_request
            .is_some_and(|t| now - t < self.config.keyframe_request_interval)
        {
            return;
        }
        self.last_keyframe_request = Some(now);
        self.events.push_back(ReceiverEvent::KeyframeRequested { time: now });
        self.outbox.push_back(Feedback::KeyframeRequest { flow: self.flow });
    }

    /// Whether `f` can be decoded now: complete, and a keyframe or referencing a frame the
    /// decoder holds.
    fn decodable(&self, f: &FrameAssembly) -> bool {
        f.complete && (f.is_keyframe || f.ref_frame_id.is_some_and(|r| self.decoded.contains(&r)))
    }

    /// Displays every frame that has become decodable.
    fn try_display(&mut self, now: Timestamp) {
        loop {
            // The lowest-numbered decodable frame after the decoder's position.
            let next = match self.last_decoded {
                Some(d) if !self.chain_broken => self
                    .frames
                    .range(d.saturating_add(1)..)
                    .find(|(_, f)| self.decodable(f))
                    .map(|(id, _)| *id),
                _ => None,
            };
            let next = next.or_else(|| {
                // Otherwise the newest complete keyframe beyond the decoder's position: at the
                // start, after a break, or when a keyframe makes missing frames irrelevant.
                self.frames
                    .iter()
                    .rev()
                    .find(|(id, f)| {
                        f.complete && f.is_keyframe && self.last_decoded.is_none_or(|d| **id > d)
                    })
                    .map(|(id, _)| *id)
            });
            let Some(id) = next else { break };
            // Frames passed over are discarded.
            let skipped: Vec<u64> = self.frames.range(..id).map(|(k, _)| *k).collect();
            for k in skipped {
                self.frames.remove(&k);
                self.events.push_back(ReceiverEvent::FrameDiscarded { frame_id: k, time: now });
            }
            if let Some(f) = self.frames.remove(&id) {
                // Nothing sent before a displayed frame is needed any more (libwebrtc's
                // NackRequester clears up to a keyframe; a frame that re-references an older
                // one makes the frames between as useless).
                self.nacks.retain(|&seq, _| seq >= f.first_media_seq);
            }
            self.last_decoded = Some(id);
            self.decoded.push_back(id);
            if self.decoded.len() > DECODED_MEMORY {
                self.decoded.pop_front();
            }
            self.chain_broken = false;
            self.events.push_back(ReceiverEvent::FrameDisplayed { frame_id: id, time: now });
        }
    }

    /// Remembers a packet (at or after `next_report_seq`) for the next report. A report
    /// covers at most [`MAX_REPORT_PACKETS`], the newest: older ones are forgotten as soon as
    /// a packet that far ahead arrives.
    fn record_arrival(&mut self, seq: u64, now: Timestamp) {
        if self.arrivals.is_empty() {
            self.arrivals_base = self.next_report_seq;
        }
        if seq < self.arrivals_base {
            // Forgotten already: no report will cover it.
            return;
        }
        if seq - self.arrivals_base >= MAX_REPORT_PACKETS {
            let base = seq + 1 - MAX_REPORT_PACKETS;
            let drop = usize::try_from(base - self.arrivals_base).unwrap_or(usize::MAX);
            self.arrivals.drain(..drop.min(self.arrivals.len()));
            self.arrivals_base = base;
        }
        let i = (seq - self.arrivals_base) as usize;
        if i >= self.arrivals.len() {
            self.arrivals.resize(i + 1, None);
        }
        self.arrivals[i] = Some(now);
        self.newest_unreported = self.newest_unreported.max(Some(seq));
    }

    fn make_transport_feedback(&mut self, now: Timestamp) -> Option<Feedback> {
        let last_seq = self.newest_unreported?;
        if last_seq - self.next_report_seq >= MAX_REPORT_PACKETS {
            // A jump the report cannot cover: report only the newest packets.
            self.next_report_seq = last_seq.saturating_add(1) - MAX_REPORT_PACKETS;
        }
        let mut packets = Vec::with_capacity((last_seq + 1 - self.next_report_seq) as usize);
        let mut newest_arrival = Timestamp::ZERO;
        for seq in self.next_report_seq..=last_seq {
            let arrival = seq
                .checked_sub(self.arrivals_base)
                .and_then(|i| self.arrivals.get(i as usize).copied().flatten());
            if let Some(a) = arrival {
                newest_arrival = newest_arrival.max(a);
            }
            packets.push(PacketReport { transport_seq: seq, arrival_time: arrival });
        }
        self.arrivals.clear();
        self.newest_unreported = None;
        self.next_report_seq = last_seq + 1;
        self.feedback_seq += 1;
        Some(Feedback::Transport(TransportFeedback {
            flow: self.flow,
            feedback_seq: self.feedback_seq,
            packets,
            hold_time: now - newest_arrival,
            ecn_ce_count: 0,
        }))
    }

    /// Timer work at `now`: transport feedback when due, NACK retries and give-ups, keyframe
    /// requests while the chain is broken.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        if now >= self.next_feedback_time {
            if let Some(fb) = self.make_transport_feedback(now) {
                self.outbox.push_back(fb);
            }
            while self.next_feedback_time <= now {
                self.next_feedback_time += self.config.feedback_interval;
            }
        }
        if !self.nacks.is_empty() {
            self.send_nacks(now);
        }
        if self.chain_broken {
            self.request_keyframe(now);
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next needed.
    pub fn poll_timeout(&self) -> Timestamp {
        let mut t = self.next_feedback_time;
        if !self.nacks.is_empty() {
            t = t.min(self.nack_due);
        }
        if self.chain_broken {
            let due = self
                .last_keyframe_request
                .map_or(Timestamp::ZERO, |r| r + self.config.keyframe_request_interval);
            t = t.min(due);
        }
        t
    }

    /// The next feedback datagram to send, if any.
    pub fn poll_transmit(&mut self) -> Option<Datagram> {
        self.outbox.pop_front().map(Datagram::Feedback)
    }

    /// The next event for metrics, if any.
    pub fn poll_event(&mut self) -> Option<ReceiverEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packetizer::Packetizer;
    use crate::units::DataSize;

    fn frame(pz: &mut Packetizer, id: u64, bytes: i64, key: bool, tseq: &mut u64) -> Vec<Packet> {
        let mut v = pz
            .packetize(
                id,
                DataSize::from_bytes(bytes),
                key,
                if key { None } else { Some(id - 1) },
                Timestamp::ZERO,
            )
            .unwrap();
        // Sequence numbers as the sender assigns them when packets leave.
        for p in &mut v {
            p.transport_seq = *tseq;
            p.media_seq = *tseq;
            *tseq += 1;
        }
        v
    }

    fn displayed(r: &mut Receiver) -> Vec<u64> {
        shown_and_discarded(r).0
    }

    /// The frames displayed and discarded since the last poll, in order.
    fn shown_and_discarded(r: &mut Receiver) -> (Vec<u64>, Vec<u64>) {
        let (mut shown, mut discarded) = (Vec::new(), Vec::new());
        while let Some(e) = r.poll_event() {
            match e {
                ReceiverEvent::FrameDisplayed { frame_id, .. } => shown.push(frame_id),
                ReceiverEvent::FrameDiscarded { frame_id, .. } => discarded.push(frame_id),
                _ => {}
            }
        }
        (shown, discarded)
    }

    #[test]
    fn displays_in_order_and_waits_for_missing_reference() {
        let mut pz = Packetizer::new(0, DataSize::from_bytes(1000));
        let mut r = Receiver::new(ReceiverConfig::default(), 0, Timestamp::ZERO);
        let mut tseq = 0;
        let f0 = frame(&mut pz, 0, 2500, true, &mut tseq);
        let f1 = frame(&mut pz, 1, 1500, false, &mut tseq);
        let f2 = frame(&mut pz, 2, 500, false, &mut tseq);
        let t = Timestamp::from_ms(10);
        for p in f0 {
            r.handle_datagram(Datagram::Media(p), t);
        }
        assert_eq!(displayed(&mut r), vec![0]);
        // Frame 1 loses its first packet; frame 2 is complete but must wait.
        r.handle_datagram(Datagram::Media(f1[1].clone()), t);
        r.handle_datagram(Datagram::Media(f2[0].clone()), t);
        assert_eq!(displayed(&mut r), Vec::<u64>::new());
        // The gap was NACKed at once.
        match r.poll_transmit() {
            Some(Datagram::Feedback(Feedback::Nack { media_seqs, .. })) => {
                assert_eq!(media_seqs, vec![f1[0].media_seq])
            }
            other => panic!("expected a NACK, got {other:?}"),
        }
        let mut rtx = f1[0].clone();
        rtx.kind = PacketKind::Retransmission;
        r.handle_datagram(Datagram::Media(rtx), Timestamp::from_ms(60));
        assert_eq!(displayed(&mut r), vec![1, 2]);
        assert_eq!(r.rtt(), TimeDelta::from_ms(100) * 0.75 + TimeDelta::from_ms(50) * 0.25);
    }

    #[test]
    fn transport_feedback_reports_every_packet_in_range() {
        let mut pz = Packetizer::new(0, DataSize::from_bytes(1000));
        let mut r = Receiver::new(ReceiverConfig::default(), 0, Timestamp::ZERO);
        let mut tseq = 0;
        let pkts = frame(&mut pz, 0, 4000, true, &mut tseq);
        for (i, p) in pkts.into_iter().enumerate() {
            if i != 1 {
                r.handle_datagram(Datagram::Media(p), Timestamp::from_ms(10 + i as i64));
            }
        }
        r.handle_timeout(Timestamp::from_ms(50));
        let mut fb = None;
        while let Some(Datagram::Feedback(f)) = r.poll_transmit() {
            if let Feedback::Transport(t) = f {
                fb = Some(t);
            }
        }
        let fb = fb.expect("transport feedback");
        let arrivals: Vec<Option<i64>> =
            fb.packets.iter().map(|p| p.arrival_time.map(|t| t.as_ms())).collect();
        assert_eq!(arrivals, vec![Some(10), None, Some(12), Some(13)]);
        assert_eq!(fb.hold_time, TimeDelta::from_ms(37));
    }

    #[test]
    fn gives_up_and_requests_keyframe_then_recovers_on_keyframe() {
        let mut pz = Packetizer::new(0, DataSize::from_bytes(1000));
        let cfg = ReceiverConfig::default();
        let mut r = Receiver::new(cfg.clone(), 0, Timestamp::ZERO);
        let mut tseq = 0;
        for p in frame(&mut pz, 0, 500, true, &mut tseq) {
            r.handle_datagram(Datagram::Media(p), Timestamp::ZERO);
        }
        let lost = frame(&mut pz, 1, 500, false, &mut tseq);
        drop(lost);
        for p in frame(&mut pz, 2, 500, false, &mut tseq) {
            r.handle_datagram(Datagram::Media(p), Timestamp::from_ms(40));
        }
        // Run the timers past the give-up time without any retransmission arriving.
        let mut now = Timestamp::from_ms(40);
        let mut keyframe_requested = false;
        while now < Timestamp::from_ms(1500) {
            now = r.poll_timeout().max(now + TimeDelta::from_ms(1));
            r.handle_timeout(now);
            while let Some(d) = r.poll_transmit() {
                if let Datagram::Feedback(Feedback::KeyframeRequest { .. }) = d {
                    keyframe_requested = true;
                }
            }
        }
        assert!(keyframe_requested);
        assert_eq!(displayed(&mut r), vec![0]);
        for p in frame(&mut pz, 3, 3000, true, &mut tseq) {
            r.handle_datagram(Datagram::Media(p), now);
        }
        let (shown, discarded) = shown_and_discarded(&mut r);
        assert_eq!(shown, vec![3]);
        assert_eq!(discarded, vec![2]);
    }

    #[test]
    fn keyframe_clears_older_nacks_and_no_spurious_keyframe_request() {
        let mut pz = Packetizer::new(0, DataSize::from_bytes(1000));
        let mut r = Receiver::new(ReceiverConfig::default(), 0, Timestamp::ZERO);
        let mut tseq = 0;
        for p in frame(&mut pz, 0, 500, true, &mut tseq) {
            r.handle_datagram(Datagram::Media(p), Timestamp::ZERO);
        }
        let f1 = frame(&mut pz, 1, 1500, false, &mut tseq);
        r.handle_datagram(Datagram::Media(f1[1].clone()), Timestamp::from_ms(30));
        // Frame 2 is a keyframe and arrives whole: frame 1 is skipped, its NACK dropped.
        for p in frame(&mut pz, 2, 2500, true, &mut tseq) {
            r.handle_datagram(Datagram::Media(p), Timestamp::from_ms(60));
        }
        assert_eq!(displayed(&mut r), vec![0, 2]);
        let mut now = Timestamp::from_ms(60);
        while now < Timestamp::from_ms(2000) {
            now = r.poll_timeout().max(now + TimeDelta::from_ms(1));
            r.handle_timeout(now);
            while let Some(d) = r.poll_transmit() {
                if let Datagram::Feedback(Feedback::KeyframeRequest { .. }) = d {
                    panic!("spurious keyframe request at {now:?}");
                }
            }
        }
        // Decoding continues in order after the keyframe.
        for p in frame(&mut pz, 3, 500, false, &mut tseq) {
            r.handle_datagram(Datagram::Media(p), now);
        }
        assert_eq!(displayed(&mut r), vec![3]);
    }

    #[test]
    fn a_frame_re_referencing_an_older_one_passes_over_the_dropped_ones() {
        // Frames 0 and 1 arrive; frame 2 loses a packet (dropped on purpose upstream); frame
        // 3 references frame 1 and arrives whole: it is displayed, 2 is discarded, and the
        // missing packet of 2 is neither NACKed for ever nor a reason for a keyframe.
        let mut pz = Packetizer::new(0, DataSize::from_bytes(1000));
        let mut r = Receiver::new(ReceiverConfig::default(), 0, Timestamp::ZERO);
        let mut tseq = 0;
        for id in 0..2 {
            for p in frame(&mut pz, id, 1500, id == 0, &mut tseq) {
                r.handle_datagram(Datagram::Media(p), Timestamp::from_ms(10 * id as i64));
            }
        }
        let f2 = frame(&mut pz, 2, 1500, false, &mut tseq);
        r.handle_datagram(Datagram::Media(f2[0].clone()), Timestamp::from_ms(30));
        let mut f3 =
            pz.packetize(3, DataSize::from_bytes(1500), false, Some(1), Timestamp::ZERO).unwrap();
        for p in &mut f3 {
            p.transport_seq = tseq;
            p.media_seq = tseq;
            tseq += 1;
        }
        for p in f3 {
            r.handle_datagram(Datagram::Media(p), Timestamp::from_ms(40));
        }
        let (shown, discarded) = shown_and_discarded(&mut r);
        assert_eq!(shown, vec![0, 1, 3]);
        assert_eq!(discarded, vec![2]);
        // The gap was NACKed once when frame 3's first packet showed it, before frame 3 was
        // complete; after that, nothing.
        while let Some(d) = r.poll_transmit() {
            assert!(!matches!(d, Datagram::Feedback(Feedback::KeyframeRequest { .. })));
        }
        let mut now = Timestamp::from_ms(40);
        while now < Timestamp::from_ms(3000) {
            now = r.poll_timeout().max(now + TimeDelta::from_ms(1));
            r.handle_timeout(now);
            while let Some(d) = r.poll_transmit() {
                match d {
                    Datagram::Feedback(Feedback::KeyframeRequest { .. }) => {
                        panic!("keyframe request at {now:?}")
                    }
                    Datagram::Feedback(Feedback::Nack { media_seqs, .. }) => {
                        panic!("NACK for {media_seqs:?} after the frame was passed over")
                    }
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn malformed_packets_are_counted_not_fatal() {
        let mut pz = Packetizer::new(0, DataSize::from_bytes(1000));
        let mut r = Receiver::new(ReceiverConfig::default(), 0, Timestamp::ZERO);
        let mut tseq = 0;
        let good = frame(&mut pz, 0, 500, true, &mut tseq);
        let mut bad = Vec::new();
        let mut p = good[0].clone();
        p.packet_index = 5; // beyond its count of 1
        bad.push(p);
        let mut p = good[0].clone();
        p.packet_count = 0;
        bad.push(p);
        let mut p = good[0].clone();
        p.packet_count = u16::MAX;
        bad.push(p);
        let mut p = good[0].clone();
        p.media_seq = 0;
        p.packet_index = 0;
        p.packet_count = 2;
        p.frame_id = 9;
        bad.push(p.clone());
        p.packet_index = 1; // media_seq below its index: underflow on the frame's first seq
        bad.push(p);
        for p in bad {
            r.handle_datagram(Datagram::Media(p), Timestamp::ZERO);
        }
        // A sequence-number jump far beyond any loss: no loop over the gap, one keyframe ask.
        let mut jump = good[0].clone();
        jump.media_seq = u64::MAX / 2;
        jump.frame_id = 10;
        r.handle_datagram(Datagram::Media(jump), Timestamp::ZERO);
        // A transport sequence jump: the report stays bounded.
        let mut far = good[0].clone();
        far.transport_seq = u64::MAX - 1;
        far.frame_id = 11;
        r.handle_datagram(Datagram::Media(far), Timestamp::ZERO);
        r.handle_timeout(Timestamp::from_ms(50));
        let mut report_len = 0;
        while let Some(d) = r.poll_transmit() {
            if let Datagram::Feedback(Feedback::Transport(t)) = d {
                report_len = t.packets.len();
            }
        }
        assert!(report_len as u64 <= MAX_REPORT_PACKETS);
        assert_eq!(r.malformed(), 4);
        for p in good {
            r.handle_datagram(Datagram::Media(p), Timestamp::from_ms(60));
        }
    }
}
