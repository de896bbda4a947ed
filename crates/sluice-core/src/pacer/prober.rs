//! Probe-cluster sender, following libwebrtc M119's `BitrateProber`
//! (modules/pacing/bitrate_prober.cc): each cluster is sent at its target rate, probe k at
//! `start + bytes_sent_before_k / rate`, until at least `min_probes` packets and
//! `rate * target_duration` bytes have gone. Queued media is used for probes when available;
//! otherwise the pacer creates padding of [`PROBE_PADDING_SIZE`] (libwebrtc's RTX payload
//! padding resends full-size media packets).
//!
//! As in libwebrtc, probing waits for media: a new cluster stays inactive until a packet of
//! at least min(2 ms at the probe rate, 200 B) is enqueued (`OnIncomingPacket`), then its
//! first probe goes at once. A cluster whose next probe is more than 10 ms late is dropped
//! (`max_probe_delay`), clusters requested more than 5 s before a newer one are dropped, and so
//! are the oldest while more than 5 wait before a new one is added, so 6 can wait
//! (`kProbeClusterTimeout`, `kMaxPendingProbeClusters`).

use super::queue::PacketQueue;
use crate::cc::ProbeClusterConfig;
use crate::packet::Packet;
use crate::units::{DataSize, TimeDelta, Timestamp};
use std::collections::VecDeque;

/// Size of padding packets created for probes (on the wire).
pub const PROBE_PADDING_SIZE: DataSize = DataSize::from_bytes(1200);
/// A probe is at least this long at the cluster's rate (`min_probe_delta`, 2 ms).
const MIN_PROBE_DELTA: TimeDelta = TimeDelta::from_ms(2);
/// Packets this large activate probing (`min_packet_size`, 200 B).
const MIN_ACTIVATING_PACKET: DataSize = DataSize::from_bytes(200);
/// A probe later than this drops its cluster (`max_probe_delay`, 10 ms).
const MAX_PROBE_DELAY: TimeDelta = TimeDelta::from_ms(10);
/// Clusters requested this long before a new one are dropped (`kProbeClusterTimeout`, 5 s).
const PROBE_CLUSTER_TIMEOUT: TimeDelta = TimeDelta::from_secs(5);
/// At most this many clusters wait (`kMaxPendingProbeClusters`).
const MAX_PENDING_CLUSTERS: usize = 5;

#[derive(Debug)]
struct ActiveCluster {
    config: ProbeClusterConfig,
    started: Option<Timestamp>,
    sent_bytes: DataSize,
    sent_probes: u32,
}

/// The probe clusters waiting and being sent (see the module documentation).
#[derive(Debug, Default)]
pub struct Prober {
    clusters: VecDeque<ActiveCluster>,
    /// libwebrtc's `kActive`: a large enough packet was enqueued since clusters arrived.
    active: bool,
    /// When the next probe is due once active (`None`: at once).
    next_probe: Option<Timestamp>,
}

impl Prober {
    /// Queues a cluster (one without a rate is ignored), first dropping the oldest waiting
    /// clusters that timed out or are over the pending limit.
    pub fn add_cluster(&mut self, config: ProbeClusterConfig) {
        if config.target_rate.as_bps() <= 0 {
            return;
        }
        while self.clusters.front().is_some_and(|c| {
            config.at_time - c.config.at_time > PROBE_CLUSTER_TIMEOUT
                || self.clusters.len() > MAX_PENDING_CLUSTERS
        }) {
            self.clusters.pop_front();
        }
        self.clusters.push_back(ActiveCluster {
            config,
            started: None,
            sent_bytes: DataSize::ZERO,
            sent_probes: 0,
        });
    }

    /// A packet was enqueued in the pacer: probing starts once one is large enough.
    pub fn on_packet_enqueued(&mut self, size: DataSize) {
        let Some(front) = self.clusters.front() else { return };
        if !self.active
            && size >= (front.config.target_rate * MIN_PROBE_DELTA).min(MIN_ACTIVATING_PACKET)
        {
            self.active = true;
            self.next_probe = None;
        }
    }

    /// Whether a cluster waits and probing is active.
    pub fn is_probing(&self) -> bool {
        self.active && !self.clusters.is_empty()
    }

    /// When the next probe packet is due (never while inactive). Overdue clusters are
    /// dropped when polled ([`poll_probe`](Self::poll_probe)), so this may be in the past.
    pub fn next_probe_time(&self) -> Timestamp {
        if !self.is_probing() {
            return Timestamp::INFINITY;
        }
        self.next_probe.unwrap_or(Timestamp::ZERO)
    }

    /// The cluster the next probe belongs to, if a probe is due at `now`, dropping clusters
    /// whose probe is more than `MAX_PROBE_DELAY` late (`CurrentCluster`).
    fn due_cluster(&mut self, now: Timestamp) -> Option<u32> {
        if !self.is_probing() || self.next_probe_time() > now {
            return None;
        }
        if let Some(next) = self.next_probe {
            if now - next > MAX_PROBE_DELAY {
                self.clusters.pop_front();
                if self.clusters.is_empty() {
                    self.active = false;
                    return None;
                }
            }
        }
        self.clusters.front().map(|c| c.config.id)
    }

    /// The probe due at `now`, if any, accounted as sent: the head of `queue` if there is
    /// one, else padding of [`PROBE_PADDING_SIZE`], tagged with its cluster.
    pub fn poll_probe(&mut self, queue: &mut PacketQueue, now: Timestamp) -> Option<Packet> {
        let id = self.due_cluster(now)?;
        let mut p = queue.pop().unwrap_or_else(|| Packet::padding(PROBE_PADDING_SIZE, now));
        p.probe_cluster_id = Some(id);
        self.on_probe_sent(p.size, now);
        Some(p)
    }

    /// Accounts a probe packet sent at `now` (`ProbeSent`).
    fn on_probe_sent(&mut self, size: DataSize, now: Timestamp) {
        let Some(c) = self.clusters.front_mut() else { return };
        let start = *c.started.get_or_insert(now);
        c.sent_bytes += size;
        c.sent_probes += 1;
        self.next_probe = Some(start + c.sent_bytes / c.config.target_rate);
        let min_bytes = c.config.target_rate * c.config.target_duration;
        if c.sent_probes >= c.config.min_probes && c.sent_bytes >= min_bytes {
            self.clusters.pop_front();
        }
        if self.clusters.is_empty() {
            self.active = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{DataRate, TimeDelta};

    fn cluster(id: u32, at_ms: i64, mbps: i64) -> ProbeClusterConfig {
        ProbeClusterConfig {
            id,
            at_time: Timestamp::from_ms(at_ms),
            target_rate: DataRate::from_mbps(mbps),
            target_duration: TimeDelta::from_ms(15),
            min_probes: 5,
        }
    }

    #[test]
    fn paces_cluster_at_its_rate_once_media_arrives_and_completes() {
        let mut p = Prober::default();
        let mut queue = PacketQueue::default();
        p.add_cluster(cluster(3, 10, 12)); // 12 Mbps = 1500 B per ms
                                           // Inactive until a large enough packet is enqueued (a 100 B one is not).
        assert_eq!(p.next_probe_time(), Timestamp::INFINITY);
        p.on_packet_enqueued(DataSize::from_bytes(100));
        assert_eq!(p.next_probe_time(), Timestamp::INFINITY);
        p.on_packet_enqueued(DataSize::from_bytes(1200));
        let mut now = Timestamp::from_ms(12);
        assert!(p.next_probe_time() <= now, "the first probe goes at once");
        let mut sent = Vec::new();
        while p.is_probing() {
            let probe = p.poll_probe(&mut queue, now).expect("a probe is due");
            assert_eq!(probe.probe_cluster_id, Some(3));
            sent.push(now);
            now = p.next_probe_time().max(now);
            if !p.is_probing() {
                break;
            }
        }
        // 15 ms at 12 Mbps = 22500 B = 19 padding packets of 1200 B, every 0.8 ms.
        assert_eq!(sent.len(), 19);
        assert_eq!(sent[1] - sent[0], TimeDelta::from_us(800));
        assert_eq!(p.next_probe_time(), Timestamp::INFINITY);
    }

    #[test]
    fn a_late_cluster_is_dropped() {
        let mut p = Prober::default();
        let mut queue = PacketQueue::default();
        p.add_cluster(cluster(1, 0, 12));
        p.add_cluster(cluster(2, 0, 24));
        p.on_packet_enqueued(DataSize::from_bytes(1200));
        assert!(p.poll_probe(&mut queue, Timestamp::ZERO).is_some());
        // The next probe of cluster 1 was due at 0.8 ms; 20 ms later it is dropped and the
        // probe belongs to cluster 2.
        let late = Timestamp::from_ms(20);
        assert_eq!(p.poll_probe(&mut queue, late).unwrap().probe_cluster_id, Some(2));
    }
}
