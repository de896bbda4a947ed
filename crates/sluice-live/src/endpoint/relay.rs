//! The relay: the simulator's downlink and uplink [`Link`]s between sender and receiver,
//! carrying the datagrams' bytes, plus fault injection: the run's path faults
//! (duplication, reordering, a feedback blackout; the core's [`PathFaults`], which the
//! simulator runs too) and the faults that exist only as bytes (garbage, spoofed datagrams).

use super::{Endpoint, LinkSnapshot, Role, SharedLink, Spoofed};
use crate::wire::{self, MediaReader, WireError};
use sluice_core::columns::Columns;
use sluice_core::link::faults::{Fate, FaultStats, FaultsConfig, PathFaults};
use sluice_core::link::{DropReason, Link};
use sluice_core::packet::{Datagram, Feedback, Packet, PacketKind, UDP_IP_OVERHEAD};
use sluice_core::rng::Rng;
use sluice_core::units::{DataSize, TimeDelta, Timestamp};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// A forged copy of an SRTP packet `b` (WebRTC transport; the relay cannot read it as
/// Sluice's RTP): a later sequence number and a payload byte changed, or another SSRC, so
/// it is not authentic. `None` for anything else (Sluice's plain RTP, RTCP, STUN, DTLS).
fn forged_srtp(b: &[u8], r: u64) -> Option<Vec<u8>> {
    let rtp = b.len() > 40 && (128..192).contains(&b[0]) && !crate::wire::is_rtcp_type(b[1]);
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

/// The faults only the relay can inject: they exist as bytes (the path faults, duplication,
/// reordering and a feedback blackout, are the run config's `faults`, applied here by the
/// core's [`PathFaults`] as the simulator's fault node applies them).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Faults {
    /// Probability that the relay, forwarding a datagram, also sends the same peer a
    /// malformed one (a corrupted copy, a truncation or random bytes).
    pub garbage: f64,
    /// Probability that the relay, forwarding a datagram, also sends the same peer a
    /// spoofed one (issue 30): to the receiver a copy of a video packet claiming another
    /// stream, not valid as a whole (with WebRTC, a copy of an SRTP packet with a byte
    /// changed); to the sender a NACK of numbers it never sent or a keyframe request, twice
    /// in a row (plain RTCP: with WebRTC, not authentic).
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
    /// The run's path faults (duplication, reordering, feedback blackout).
    path_faults: PathFaults,
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
    /// Competing flows inside the downlink and the uplink (`--competing media:...`,
    /// `reverse-media:...`, `tcp:...`, `short-tcp`, `audio`, `reverse-audio`).
    cross: Option<sluice_core::sim::flows::CrossTraffic>,
}

/// One datagram's way through the relay (its clock): when it came, its size, which way it
/// went, and when it left (`None`: the link dropped it, or it was still inside at the end);
/// for an RTP packet (SRTP too: its header is in the clear) its fixed header, so that a
/// sender's packet trains can be read per frame (the RTP timestamp) from the log alone.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DatagramRecord {
    pub arrived_us: i64,
    /// "down" (sender to receiver, through the bottleneck) or "up" (the way back).
    pub dir: String,
    pub size_bytes: u32,
    pub left_us: Option<i64>,
    pub dropped: bool,
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub rtp: Option<RtpFields>,
}

/// The fixed RTP header of a logged datagram ([`crate::wire::peek_rtp`]).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RtpFields {
    pub rtp_ssrc: u32,
    pub rtp_pt: u8,
    pub rtp_seq: u16,
    pub rtp_ts: u32,
    pub rtp_marker: bool,
}

/// The datagrams inside the relay and the records of those that left or were dropped.
#[derive(Debug, Default)]
struct DatagramLog {
    inside: BTreeMap<u64, DatagramRecord>,
    done: Vec<DatagramRecord>,
}

impl DatagramLog {
    fn arrived(&mut self, key: u64, dir: &str, bytes: &[u8], now: Timestamp) {
        let size_bytes = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        let rtp = crate::wire::peek_rtp(bytes).map(|h| RtpFields {
            rtp_ssrc: h.ssrc,
            rtp_pt: h.payload_type,
            rtp_seq: h.sequence,
            rtp_ts: h.timestamp,
            rtp_marker: h.marker,
        });
        let r = DatagramRecord {
            arrived_us: now.as_us(),
            dir: dir.into(),
            size_bytes,
            left_us: None,
            dropped: false,
            rtp,
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
        path_faults: FaultsConfig,
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
            path_faults: PathFaults::new(path_faults, seed),
            held: VecDeque::new(),
            extra: VecDeque::new(),
            malformed: 0,
            opaque: 0,
            spoofed: Spoofed::default(),
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

    /// Carries `cross` (competing flows, [`sluice_core::sim::flows::CrossTraffic`]) inside
    /// the downlink (and a reverse flow inside the uplink), sharing their queues and capacity
    /// with the session's media and feedback; the links then count per flow
    /// ([`Link::flow_stats`]).
    pub fn set_cross_traffic(&mut self, cross: sluice_core::sim::flows::CrossTraffic) {
        self.downlink.enable_flow_stats();
        if cross.uses_uplink() {
            self.uplink.enable_flow_stats();
        }
        self.cross = Some(cross);
    }

    /// Moves what the cross traffic sends at `now` into the downlink, and a reverse flow's
    /// media or audio into the uplink.
    fn pump_cross(&mut self, now: Timestamp) {
        let Some(cross) = self.cross.as_mut() else { return };
        while let Some(d) = cross.poll_transmit(now) {
            self.downlink.handle_datagram(d, now);
        }
        while let Some(d) = cross.poll_transmit_up(now) {
            self.uplink.handle_datagram(d, now);
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
    /// ([`sluice_core::session::build_links`]), its access path if `cfg` has an access delay,
    /// and its competing flows; an error if those flows do not build.
    pub fn for_run(
        cfg: &sluice_core::session::RunConfig,
        scheme: &sluice_core::scheme::SchemeConfig,
        downlink_trace: Option<Arc<sluice_core::link::trace::Trace>>,
        uplink_trace: Option<Arc<sluice_core::link::trace::Trace>>,
        faults: Faults,
        shared: Option<SharedLink>,
    ) -> Result<Self, sluice_core::session::ConfigError> {
        let (downlink, uplink) =
            sluice_core::session::build_links(cfg, scheme, downlink_trace.clone(), uplink_trace);
        let mut relay = RelayEndpoint::new(
            downlink,
            uplink,
            cfg.faults.clone(),
            faults,
            cfg.seed,
            downlink_trace,
            shared,
        );
        if let Some(links) = sluice_core::session::build_access_links(cfg) {
            relay.set_access_path(links);
        }
        if let Some(cross) = sluice_core::sim::flows::CrossTraffic::for_run(cfg)? {
            relay.set_cross_traffic(cross);
        }
        Ok(relay)
    }

    /// With competing flows: every flow's summary and Jain's index (the summary's `flows`
    /// and `jain_index`), as the simulator computes them from the downlink's per-flow
    /// counters.
    pub fn flow_summaries(&self) -> Option<(Vec<sluice_core::metrics::FlowSummary>, Option<f64>)> {
        let down = self.downlink.flow_stats()?;
        Some(self.cross.as_ref()?.summarize(down, self.uplink.flow_stats()))
    }

    /// What the path faults did.
    pub fn fault_stats(&self) -> FaultStats {
        self.path_faults.stats()
    }

    /// The sender's stream it read last (`None` before the first packet).
    pub fn stream(&self) -> Option<u32> {
        self.reader.stream()
    }

    pub fn downlink(&self) -> &Link {
        &self.downlink
    }

    pub fn uplink(&self) -> &Link {
        &self.uplink
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
                        self.spoof_feedback(r >> 1, stream);
                        forged_srtp(b, r)
                    }
                }
            }
            _ => {
                self.spoof_feedback(r, stream);
                None
            }
        };
        if let Some(s) = spoofed {
            self.spoof_sent += 1;
            self.extra.push_back((to, s));
        }
    }

    /// Sends the sender a spoofed NACK of numbers it never sent, or a keyframe request twice
    /// in a row (the second within any rate limit, so a sender that honours requests at most
    /// every so often has one to refuse each time).
    fn spoof_feedback(&mut self, r: u64, stream: u32) {
        let (f, copies) = if r.is_multiple_of(2) {
            // Numbers far ahead of anything the sender sent (within the unwrap window).
            let ahead = self.last_media_seq + 5000 + (r >> 8) % 1000;
            (Feedback::Nack { flow: 0, media_seqs: vec![ahead, ahead + 1, ahead + 2] }, 1)
        } else {
            (Feedback::KeyframeRequest { flow: 0 }, 2)
        };
        let Ok(bytes) = wire::write_feedback(&f, stream) else { return };
        for _ in 0..copies {
            self.spoof_sent += 1;
            self.extra.push_back((Role::Sender, bytes.clone()));
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
                if p.flow != 0 {
                    continue; // a reverse flow's: its receiver finds out
                }
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
            (Some(t), Some(c)) => c.delivered_bytes(t, self.uplink.flow_stats()),
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
                    log.arrived(key, "down", bytes, now);
                }
                match self.access.as_mut() {
                    Some((to_bn, _)) => to_bn.handle_datagram(Datagram::Media(p), now),
                    None => self.downlink.handle_datagram(Datagram::Media(p), now),
                }
            }
            Role::Receiver => {
                if !self.path_faults.feedback_passes(now) {
                    return;
                }
                let size = DataSize::from_bytes(bytes.len() as i64) + UDP_IP_OVERHEAD;
                let mut p = Packet::padding(size, now);
                p.transport_seq = key;
                self.up_bytes.insert(key, bytes.to_vec());
                if let Some(log) = self.log.as_mut() {
                    log.arrived(key, "up", bytes, now);
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
        if let (Some(cross), Some(table)) = (self.cross.as_mut(), self.downlink.flow_stats()) {
            cross.sample(now, table, self.uplink.flow_stats());
        }
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
            match self.path_faults.media_fate(now) {
                Fate::HoldUntil(t) => {
                    self.held.push_back((t, b));
                    continue;
                }
                Fate::DeliverTwice => self.extra.push_back((Role::Receiver, b.clone())),
                Fate::Deliver => {}
            }
            self.maybe_garbage(Role::Receiver, &b);
            self.maybe_spoof(Role::Receiver, &b);
            return Some((Role::Receiver, b));
        }
        while let Some(d) = self.uplink.poll_datagram(now) {
            if let Some(cross) = self.cross.as_mut().filter(|c| c.carries(d.flow())) {
                cross.deliver(d, now); // a reverse flow's media or audio
                self.pump_cross(now);
                continue;
            }
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
