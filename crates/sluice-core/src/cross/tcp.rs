//! A long-lived bulk flow (TCP-like) as two sans-IO nodes: [`TcpSender`] always has data,
//! sends full-size datagrams whenever its congestion window allows, and detects losses as
//! QUIC does (RFC 9002 §6: packet threshold 3, time threshold 9/8 RTT, probe timeout);
//! [`TcpReceiver`] acknowledges every datagram at once on its own ACK path. Packet numbers
//! are never reused (QUIC semantics): a lost packet's bytes are simply sent again as new
//! packets, which for a bulk flow is the same thing.
//!
//! Simplifications, stated: an ACK per datagram (no delayed ACKs, so no `max_ack_delay`),
//! no pacing unless the controller asks for it (BBR; NewReno and CUBIC release the window
//! as ACKs arrive, as Linux without `fq`), no persistent congestion (RFC 9002 §7.6), no
//! receive window and no application-limited marking (a bulk flow never is).

use super::{TcpCc, TcpCongestion};
use crate::packet::{Datagram, Ecn, Feedback, FlowId, Packet, PacketReport, TransportFeedback};
use crate::sim::network::{Node, Port, OUT};
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use std::collections::BTreeMap;

/// A bulk datagram on the wire: a 1500-byte IP packet (Ethernet MTU).
pub const TCP_DATAGRAM: DataSize = DataSize::from_bytes(1500);

/// RFC 9002 §5.3 and §6: the RTT estimator (smoothed RTT, variation, minimum).
#[derive(Clone, Copy, Debug, Default)]
pub struct RttEstimator {
    /// `latest_rtt`: the newest sample.
    pub latest: Option<TimeDelta>,
    /// `smoothed_rtt`: EWMA of the samples with gain 1/8 (`None` before a sample).
    pub smoothed: Option<TimeDelta>,
    /// `rttvar`: EWMA of the samples' deviation from `smoothed_rtt`, gain 1/4.
    pub var: TimeDelta,
    /// `min_rtt`: the smallest sample so far.
    pub min: Option<TimeDelta>,
}

impl RttEstimator {
    /// RFC 9002 §5.3 (without ack delay: the receiver acknowledges at once).
    pub fn update(&mut self, sample: TimeDelta) {
        self.latest = Some(sample);
        self.min = Some(self.min.map_or(sample, |m| m.min(sample)));
        match self.smoothed {
            None => {
                self.smoothed = Some(sample);
                self.var = sample / 2;
            }
            Some(s) => {
                self.var = (self.var * 3 + (s - sample).abs()) / 4;
                self.smoothed = Some((s * 7 + sample) / 8);
            }
        }
    }
    /// The smoothed RTT, or RFC 9002 §6.2.2's initial 333 ms before any sample.
    pub fn smoothed_or_initial(&self) -> TimeDelta {
        self.smoothed.unwrap_or(TimeDelta::from_ms(333))
    }
}

/// RFC 9002 §6.1.1: `kPacketThreshold`.
const PACKET_THRESHOLD: u64 = 3;
/// RFC 9002 §6.1.2: `kTimeThreshold` = 9/8, `kGranularity` = 1 ms.
const TIME_THRESHOLD: f64 = 9.0 / 8.0;
const GRANULARITY: TimeDelta = TimeDelta::from_ms(1);

#[derive(Clone, Copy, Debug)]
struct Sent {
    time: Timestamp,
    size: DataSize,
    /// Delivery-rate state when it was sent (draft-cheng-iccrg-delivery-rate-estimation
    /// §3.2: `P.delivered`, `P.delivered_time`, `P.first_sent_time`, `P.is_app_limited`).
    delivered: DataSize,
    delivered_time: Timestamp,
    first_sent_time: Timestamp,
}

/// A delivery-rate sample (draft-cheng-iccrg-delivery-rate-estimation §3.3), one per
/// acknowledged packet.
#[derive(Clone, Copy, Debug)]
pub struct RateSample {
    /// Bytes delivered over the interval, and the interval (the longer of the send and the
    /// acknowledgement intervals).
    pub delivered: DataSize,
    /// The sample's interval: the longer of the send and the acknowledgement elapsed times.
    pub interval: TimeDelta,
    /// `delivered / interval` (`None` for an empty interval).
    pub delivery_rate: Option<crate::units::DataRate>,
    /// Bytes delivered before the acknowledged packet was sent (`P.delivered`), and in all.
    pub prior_delivered: DataSize,
    /// Bytes delivered in all, this packet's included (`C.delivered`).
    pub total_delivered: DataSize,
    /// The packet's RTT.
    pub rtt: TimeDelta,
    /// Bytes in flight after this acknowledgement.
    pub in_flight: DataSize,
}

/// Counters of a bulk sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Datagrams sent (probes included).
    pub sent_packets: u64,
    /// Datagrams acknowledged.
    pub acked_packets: u64,
    /// Datagrams declared lost (RFC 9002 §6.1).
    pub lost_packets: u64,
    /// Congestion events given to the controller (losses and CE-count increases).
    pub congestion_events: u64,
    /// Probe timeouts that fired (RFC 9002 §6.2).
    pub ptos: u64,
    /// The receiver's CE count as last echoed.
    pub ce_marks: u64,
}

/// The sending side of a bulk flow (see the module documentation).
#[derive(Debug)]
pub struct TcpSender {
    flow: FlowId,
    cc: Box<dyn TcpCongestion>,
    datagram: DataSize,
    start: Timestamp,
    stop: Timestamp,
    next_pn: u64,
    /// The first packet number of this connection (`poll_timeout` waits for `start` until
    /// it sent one).
    first_pn: u64,
    unacked: BTreeMap<u64, Sent>,
    in_flight: DataSize,
    largest_acked: Option<u64>,
    rtt: RttEstimator,
    /// RFC 9002 §6.1.2: when the earliest packet not yet lost by time would be.
    loss_time: Option<Timestamp>,
    pto_count: u32,
    last_sent: Timestamp,
    /// Probe datagrams owed after a probe timeout (sent beyond the window).
    probes: u32,
    /// A finite transfer: this many datagrams to get acknowledged (`None`: bulk, forever).
    limit_packets: Option<u64>,
    /// Delivery-rate estimation (`C.delivered`, `C.delivered_time`, `C.first_sent_time`).
    delivered: DataSize,
    delivered_time: Timestamp,
    first_sent_time: Timestamp,
    /// When the pacer lets the next datagram go (the controller's pacing rate, if any).
    next_send: Timestamp,
    /// The peer's CE count seen so far, and when the newest acknowledged packet was sent.
    ce_count: u64,
    last_acked_sent: Option<Timestamp>,
    stats: TcpStats,
}

impl TcpSender {
    /// A bulk sender of `flow` with `cc`, sending from `start` until `stop`.
    pub fn new(flow: FlowId, cc: TcpCc, start: Timestamp, stop: Timestamp) -> TcpSender {
        TcpSender {
            flow,
            cc: cc.build(TCP_DATAGRAM),
            datagram: TCP_DATAGRAM,
            start,
            stop,
            next_pn: 0,
            first_pn: 0,
            unacked: BTreeMap::new(),
            in_flight: DataSize::ZERO,
            largest_acked: None,
            rtt: RttEstimator::default(),
            loss_time: None,
            pto_count: 0,
            last_sent: Timestamp::ZERO,
            probes: 0,
            limit_packets: None,
            delivered: DataSize::ZERO,
            delivered_time: start,
            first_sent_time: start,
            next_send: start,
            ce_count: 0,
            last_acked_sent: None,
            stats: TcpStats::default(),
        }
    }

    /// A connection that transfers `packets` datagrams from `start` (a download of a short
    /// flow), numbering its packets from `first_pn` (after the flow's earlier connections,
    /// so a late acknowledgement of one of theirs is never taken for one of its own).
    pub fn download(
        flow: FlowId,
        cc: TcpCc,
        start: Timestamp,
        packets: u64,
        first_pn: u64,
    ) -> Self {
        let mut s = TcpSender::new(flow, cc, start, Timestamp::INFINITY);
        s.limit_packets = Some(packets);
        s.next_pn = first_pn;
        s.first_pn = first_pn;
        s
    }

    /// Whether a finite transfer has been acknowledged in full.
    pub fn is_complete(&self) -> bool {
        self.limit_packets.is_some_and(|n| self.stats.acked_packets >= n)
    }

    /// The peer's CE count this connection has seen (a flow's next connection starts from
    /// it: the receiver's count is the flow's).
    pub fn ce_count(&self) -> u64 {
        self.ce_count
    }
    /// Starts from the peer's CE count `n` (a short flow's next connection continues the
    /// previous one's).
    pub fn set_ce_count(&mut self, n: u64) {
        self.ce_count = n;
    }

    /// The packet number the next packet would take.
    pub fn next_packet_number(&self) -> u64 {
        self.next_pn
    }

    /// Whether a finite transfer has handed out everything it still needs to (what is
    /// acknowledged or in flight covers it; a loss reopens it).
    fn transfer_covered(&self) -> bool {
        self.limit_packets
            .is_some_and(|n| self.stats.acked_packets + self.unacked.len() as u64 >= n)
    }

    /// The sender's counters.
    pub fn stats(&self) -> TcpStats {
        self.stats
    }
    /// The controller's congestion window.
    pub fn window(&self) -> DataSize {
        self.cc.window()
    }
    /// Bytes sent and neither acknowledged nor declared lost.
    pub fn bytes_in_flight(&self) -> DataSize {
        self.in_flight
    }
    /// The RTT estimator's state.
    pub fn rtt(&self) -> RttEstimator {
        self.rtt
    }

    fn active(&self, now: Timestamp) -> bool {
        now >= self.start && now < self.stop
    }

    /// An acknowledgement of packet `pn` arrived at `now`.
    pub fn handle_ack(&mut self, pn: u64, now: Timestamp) {
        let Some(sent) = self.unacked.remove(&pn) else {
            // Already declared lost (a spurious loss) or never sent.
            return;
        };
        self.stats.acked_packets += 1;
        self.in_flight -= sent.size;
        self.last_acked_sent = Some(self.last_acked_sent.map_or(sent.time, |t| t.max(sent.time)));
        if self.largest_acked.is_none_or(|l| pn > l) {
            self.largest_acked = Some(pn);
            self.rtt.update(now - sent.time);
        }
        self.pto_count = 0;
        // Delivery-rate estimation, §3.3 (one packet per acknowledgement).
        self.delivered += sent.size;
        self.delivered_time = now;
        self.first_sent_time = sent.time;
        let send_elapsed = sent.time - sent.first_sent_time;
        let ack_elapsed = now - sent.delivered_time;
        let interval = send_elapsed.max(ack_elapsed);
        let delivered = self.delivered - sent.delivered;
        let rs = RateSample {
            delivered,
            interval,
            delivery_rate: (interval > TimeDelta::ZERO).then(|| delivered / interval),
            prior_delivered: sent.delivered,
            total_delivered: self.delivered,
            rtt: now - sent.time,
            in_flight: self.in_flight,
        };
        self.cc.on_ack(sent.time, sent.size, now, self.rtt.smoothed_or_initial());
        self.cc.on_rate_sample(&rs, now);
        self.detect_lost(now);
    }

    /// RFC 9002 §7.1 and Appendix B.7 (`ProcessECN`): an increase of the peer's CE count
    /// is a congestion event, dated by the newest packet acknowledged (one per recovery
    /// period, as a loss).
    fn handle_ecn_ce_count(&mut self, ce_count: u64, now: Timestamp) {
        if ce_count <= self.ce_count {
            return;
        }
        self.ce_count = ce_count;
        self.stats.ce_marks = ce_count;
        if let Some(sent) = self.last_acked_sent {
            self.stats.congestion_events += 1;
            self.cc.on_congestion_event(sent, now);
        }
    }

    /// RFC 9002 §6.1 `DetectAndRemoveLostPackets`.
    fn detect_lost(&mut self, now: Timestamp) {
        self.loss_time = None;
        let Some(largest) = self.largest_acked else {
            return;
        };
        let rtt = self.rtt.latest.unwrap_or_default().max(self.rtt.smoothed_or_initial());
        let loss_delay = (rtt * TIME_THRESHOLD).max(GRANULARITY);
        let lost_send_time = now - loss_delay;
        let mut lost = Vec::new();
        for (&pn, s) in self.unacked.range(..largest) {
            if s.time <= lost_send_time || largest - pn >= PACKET_THRESHOLD {
                lost.push(pn);
            } else {
                let t = s.time + loss_delay;
                self.loss_time = Some(self.loss_time.map_or(t, |l| l.min(t)));
            }
        }
        let mut newest_lost = None;
        for pn in lost {
            // Invariant: `pn` came from `unacked` just above.
            let s = self.unacked.remove(&pn).expect("a lost packet was unacked");
            self.in_flight -= s.size;
            self.stats.lost_packets += 1;
            newest_lost = Some(newest_lost.map_or(s.time, |t: Timestamp| t.max(s.time)));
        }
        if let Some(sent) = newest_lost {
            self.stats.congestion_events += 1;
            self.cc.on_congestion_event(sent, now);
        }
    }

    /// RFC 9002 §6.2.1: the probe timeout, backed off per consecutive PTO.
    fn pto_time(&self) -> Option<Timestamp> {
        if self.in_flight <= DataSize::ZERO {
            return None;
        }
        let rtt = self.rtt.smoothed_or_initial();
        let var = if self.rtt.smoothed.is_some() { self.rtt.var } else { rtt / 2 };
        let pto = (rtt + (var * 4).max(GRANULARITY)) * (1i64 << self.pto_count.min(16));
        Some(self.last_sent + pto)
    }
}

impl Node for TcpSender {
    fn handle_input(&mut self, _port: Port, datagram: Datagram, now: Timestamp) {
        if let Datagram::Feedback(Feedback::Transport(fb)) = datagram {
            if fb.flow == self.flow && self.active(now) {
                for r in &fb.packets {
                    if r.arrival_time.is_some() {
                        self.handle_ack(r.transport_seq, now);
                    }
                }
                self.handle_ecn_ce_count(fb.ecn_ce_count, now);
            }
        }
    }

    fn handle_timeout(&mut self, now: Timestamp) {
        if !self.active(now) {
            return;
        }
        if self.loss_time.is_some_and(|t| t <= now) {
            self.detect_lost(now);
        } else if self.pto_time().is_some_and(|t| t <= now) {
            // RFC 9002 §6.2.4: send a probe (one datagram, beyond the window).
            self.stats.ptos += 1;
            self.pto_count += 1;
            self.probes = 1;
        }
    }

    fn poll_output(&mut self, now: Timestamp) -> Option<(Port, Datagram)> {
        if !self.active(now) {
            return None;
        }
        if self.probes == 0 && self.in_flight + self.datagram > self.cc.window() {
            return None;
        }
        if self.transfer_covered() {
            return None;
        }
        if self.probes == 0 && now < self.next_send {
            return None;
        }
        if let Some(rate) = self.cc.pacing_rate().filter(|r| *r > DataRate::ZERO) {
            self.next_send = self.next_send.max(now - self.datagram / rate) + self.datagram / rate;
        }
        self.probes = self.probes.saturating_sub(1);
        let pn = self.next_pn;
        self.next_pn += 1;
        if self.unacked.is_empty() {
            // §3.2: the start of a flight.
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        let sent = Sent {
            time: now,
            size: self.datagram,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
        };
        self.unacked.insert(pn, sent);
        self.in_flight += self.datagram;
        self.last_sent = now;
        self.stats.sent_packets += 1;
        let mut p = Packet::padding(self.datagram, now);
        p.flow = self.flow;
        p.transport_seq = pn;
        p.ecn = Ecn::Ect0;
        Some((OUT, Datagram::Media(p)))
    }

    fn poll_timeout(&self) -> Timestamp {
        if self.stop <= self.start {
            return Timestamp::INFINITY;
        }
        if self.next_pn == self.first_pn {
            return self.start;
        }
        let mut t = self.loss_time.or(self.pto_time()).unwrap_or(Timestamp::INFINITY);
        // A paced sender with room in its window sends when the pacer lets it.
        let room = self.in_flight + self.datagram <= self.cc.window() && !self.transfer_covered();
        if room && self.next_send > self.start {
            t = t.min(self.next_send);
        }
        if t >= self.stop {
            Timestamp::INFINITY
        } else {
            t
        }
    }
}

/// The receiving side of a bulk flow: an acknowledgement per datagram, at once.
#[derive(Debug, Default)]
pub struct TcpReceiver {
    flow: FlowId,
    acks: std::collections::VecDeque<Datagram>,
    seq: u64,
    /// Datagrams that arrived marked CE (echoed cumulatively in every ACK).
    pub ce_packets: u64,
    /// Datagrams received.
    pub received_packets: u64,
    /// Bytes received, in on-wire sizes.
    pub received_bytes: i64,
}

impl TcpReceiver {
    /// A receiver whose acknowledgements carry `flow`.
    pub fn new(flow: FlowId) -> TcpReceiver {
        TcpReceiver { flow, ..TcpReceiver::default() }
    }
}

impl Node for TcpReceiver {
    fn handle_input(&mut self, _port: Port, datagram: Datagram, now: Timestamp) {
        let Datagram::Media(p) = datagram else {
            return;
        };
        self.received_packets += 1;
        self.received_bytes += p.size.as_bytes();
        if p.ecn == Ecn::Ce {
            self.ce_packets += 1;
        }
        self.acks.push_back(Datagram::Feedback(Feedback::Transport(TransportFeedback {
            flow: self.flow,
            feedback_seq: self.seq,
            packets: vec![PacketReport { transport_seq: p.transport_seq, arrival_time: Some(now) }],
            hold_time: TimeDelta::ZERO,
            ecn_ce_count: self.ce_packets,
        })));
        self.seq += 1;
    }
    fn handle_timeout(&mut self, _now: Timestamp) {}
    fn poll_output(&mut self, _now: Timestamp) -> Option<(Port, Datagram)> {
        self.acks.pop_front().map(|d| (OUT, d))
    }
    fn poll_timeout(&self) -> Timestamp {
        Timestamp::INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cross::testbed::dumbbell;
    use crate::link::Link;
    use crate::sim::network::Network;

    /// One bulk flow alone on a `mbps` link with a `queue_bytes` drop-tail queue and
    /// `one_way_ms` each way, for `seconds`; returns the network and the node ids of the
    /// sender and the bottleneck.
    fn alone(
        cc: TcpCc,
        mbps: i64,
        queue_bytes: i64,
        one_way_ms: i64,
        seconds: i64,
    ) -> (Network, usize, usize) {
        let sender = Box::new(TcpSender::new(1, cc, Timestamp::ZERO, Timestamp::INFINITY));
        let mut d = dumbbell(sender, 1, mbps, queue_bytes, one_way_ms, seconds);
        d.run(Timestamp::from_ms(seconds * 1000), |_, _| {});
        (d.net, d.sender, d.bottleneck)
    }

    #[test]
    fn a_bulk_flow_fills_its_link_and_finds_its_losses() {
        for cc in [TcpCc::NewReno, TcpCc::Cubic] {
            let (net, s, d) = alone(cc, 4, 60_000, 25, 30);
            let link = net.get::<Link>(d).unwrap();
            let sender = net.get::<TcpSender>(s).unwrap();
            let st = sender.stats();
            // 30 s at 4 Mbps: 15 MB of capacity; a window-limited flow through a queue of
            // about 2 BDP keeps it busy (>= 90 %).
            let delivered = link.stats().delivered_bytes as f64;
            assert!(delivered > 0.9 * 15e6, "{cc:?}: {delivered} B");
            // Every drop at the queue is found lost (or still unacknowledged at the end),
            // and never more: packet numbers are not reused.
            let dropped = link.stats().dropped_packets();
            assert!(dropped > 0, "{cc:?}: a full queue drops");
            assert!(
                st.lost_packets >= dropped.saturating_sub(50),
                "{cc:?}: {st:?}, {dropped} dropped"
            );
            assert!(st.lost_packets <= dropped + 5, "{cc:?}: {st:?}, {dropped} dropped");
            assert_eq!(
                st.sent_packets,
                st.acked_packets + st.lost_packets + sender.unacked.len() as u64
            );
            // The RTT it measured: 50 ms of propagation plus up to 120 ms of queue.
            let srtt = sender.rtt().smoothed.unwrap().as_ms();
            assert!((50..=185).contains(&srtt), "{cc:?}: srtt {srtt} ms");
            assert!(sender.rtt().min.unwrap().as_ms() >= 50);
        }
    }

    #[test]
    fn nothing_is_sent_before_start_or_after_stop() {
        let mut s =
            TcpSender::new(3, TcpCc::Cubic, Timestamp::from_ms(100), Timestamp::from_ms(200));
        assert_eq!(s.poll_timeout(), Timestamp::from_ms(100));
        assert!(s.poll_output(Timestamp::from_ms(50)).is_none());
        let mut n = 0;
        while let Some((_, Datagram::Media(p))) = s.poll_output(Timestamp::from_ms(100)) {
            assert_eq!(p.flow, 3);
            assert_eq!(p.size, TCP_DATAGRAM);
            n += 1;
        }
        // RFC 9002 §7.2's initial window of 1500-byte datagrams: 14720 B, so 9 of them.
        assert_eq!(n, 9);
        s.handle_ack(0, Timestamp::from_ms(250));
        assert!(s.poll_output(Timestamp::from_ms(250)).is_none());
        assert_eq!(s.poll_timeout(), Timestamp::INFINITY);
    }
}
