//! Probe-cluster sender (libwebrtc's BitrateProber): sends each cluster at its target rate,
//! scheduling packet k at `start + bytes_sent_before_k / rate`, until it has sent at least
//! `min_probes` packets and `rate * target_duration` bytes. Queued media is used for probes
//! when available; otherwise the pacer creates padding of [`PROBE_PADDING_SIZE`].

use super::queue::PacketQueue;
use crate::cc::ProbeClusterConfig;
use crate::packet::Packet;
use crate::units::{DataSize, Timestamp};
use std::collections::VecDeque;

/// Size of padding packets created for probes (on the wire).
pub const PROBE_PADDING_SIZE: DataSize = DataSize::from_bytes(1200);

#[derive(Debug)]
struct ActiveCluster {
    config: ProbeClusterConfig,
    started: Option<Timestamp>,
    sent_bytes: DataSize,
    sent_probes: u32,
}

#[derive(Debug, Default)]
pub struct Prober {
    clusters: VecDeque<ActiveCluster>,
}

impl Prober {
    pub fn add_cluster(&mut self, config: ProbeClusterConfig) {
        if config.target_rate.as_bps() <= 0 {
            return;
        }
        self.clusters.push_back(ActiveCluster {
            config,
            started: None,
            sent_bytes: DataSize::ZERO,
            sent_probes: 0,
        });
    }

    pub fn is_probing(&self) -> bool {
        !self.clusters.is_empty()
    }

    /// When the next probe packet is due.
    pub fn next_probe_time(&self) -> Timestamp {
        match self.clusters.front() {
            None => Timestamp::INFINITY,
            Some(c) => match c.started {
                None => c.config.at_time,
                Some(start) => start + c.sent_bytes / c.config.target_rate,
            },
        }
    }

    /// The cluster the next probe belongs to, if a probe is due at `now`.
    pub fn due_cluster(&self, now: Timestamp) -> Option<u32> {
        if self.next_probe_time() <= now {
            self.clusters.front().map(|c| c.config.id)
        } else {
            None
        }
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

    /// Accounts a probe packet sent at `now`.
    pub fn on_probe_sent(&mut self, size: DataSize, now: Timestamp) {
        let Some(c) = self.clusters.front_mut() else { return };
        if c.started.is_none() {
            c.started = Some(now);
        }
        c.sent_bytes += size;
        c.sent_probes += 1;
        let min_bytes = c.config.target_rate * c.config.target_duration;
        if c.sent_probes >= c.config.min_probes && c.sent_bytes >= min_bytes {
            self.clusters.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{DataRate, TimeDelta};

    #[test]
    fn paces_cluster_at_its_rate_and_completes() {
        let mut p = Prober::default();
        p.add_cluster(ProbeClusterConfig {
            id: 3,
            at_time: Timestamp::from_ms(10),
            target_rate: DataRate::from_mbps(12), // 1500 B per ms
            target_duration: TimeDelta::from_ms(15),
            min_probes: 5,
        });
        assert_eq!(p.next_probe_time(), Timestamp::from_ms(10));
        assert_eq!(p.due_cluster(Timestamp::from_ms(9)), None);
        let mut now = Timestamp::from_ms(10);
        let mut sent = 0;
        while p.is_probing() {
            assert_eq!(p.due_cluster(now), Some(3));
            p.on_probe_sent(DataSize::from_bytes(1500), now);
            sent += 1;
            now = p.next_probe_time();
        }
        // 15 ms at 12 Mbps = 22500 B = 15 packets of 1500 B, one every millisecond.
        assert_eq!(sent, 15);
        assert_eq!(now, Timestamp::INFINITY);
    }
}
