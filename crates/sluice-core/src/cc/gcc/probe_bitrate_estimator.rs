//! Estimates the rate a probe cluster achieved from its feedback. Follows libwebrtc's
//! `ProbeBitrateEstimator` (goog_cc: `probe_bitrate_estimator.cc`).

use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use std::collections::BTreeMap;

/// A cluster counts once this fraction of its min packets and min bytes arrived (libwebrtc).
pub const MIN_RECEIVED_PROBES_RATIO: f64 = 0.80;
/// The share of the cluster's min bytes that must arrive (libwebrtc 0.80; see
/// [`MIN_RECEIVED_PROBES_RATIO`]).
pub const MIN_RECEIVED_BYTES_RATIO: f64 = 0.80;
/// Receive rate / send rate above this is invalid (libwebrtc 2.0).
pub const MAX_VALID_RATIO: f64 = 2.0;
/// Below this receive/send ratio the link is saturated (libwebrtc 0.9) and the result is
/// [`TARGET_UTILIZATION`] of the receive rate (libwebrtc 0.95).
pub const MIN_RATIO_FOR_UNSATURATED_LINK: f64 = 0.9;
/// The share of the receive rate taken as the result when the link is saturated (libwebrtc
/// 0.95).
pub const TARGET_UTILIZATION: f64 = 0.95;
/// Longest valid send or receive interval of a cluster (libwebrtc 1 s).
pub const MAX_PROBE_INTERVAL: TimeDelta = TimeDelta::from_secs(1);
/// Clusters not updated for this long are forgotten (libwebrtc 1 s).
pub const MAX_CLUSTER_HISTORY: TimeDelta = TimeDelta::from_secs(1);

/// What the estimator needs to know about a cluster the controller requested.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeClusterInfo {
    /// The cluster's minimum packet count (its request's `min_probes`).
    pub min_probes: u32,
    /// target rate * target duration.
    pub min_bytes: DataSize,
}

#[derive(Clone, Copy, Debug)]
struct Aggregate {
    first_send: Timestamp,
    last_send: Timestamp,
    first_receive: Timestamp,
    last_receive: Timestamp,
    size_last_send: DataSize,
    size_first_receive: DataSize,
    size_total: DataSize,
    num_probes: u32,
}

/// libwebrtc's `ProbeBitrateEstimator`: aggregates received probe packets per cluster and
/// estimates the rate each cluster achieved.
#[derive(Clone, Debug, Default)]
pub struct ProbeBitrateEstimator {
    clusters: BTreeMap<u32, Aggregate>,
    last_estimate: Option<DataRate>,
}

impl ProbeBitrateEstimator {
    /// An estimator with no clusters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one received probe packet; returns the cluster's estimate once it is valid.
    pub fn handle_probe(
        &mut self,
        cluster_id: u32,
        info: ProbeClusterInfo,
        send_time: Timestamp,
        receive_time: Timestamp,
        size: DataSize,
    ) -> Option<DataRate> {
        self.clusters.retain(|_, c| receive_time - c.last_receive < MAX_CLUSTER_HISTORY);
        let c = self.clusters.entry(cluster_id).or_insert(Aggregate {
            first_send: send_time,
            last_send: send_time,
            first_receive: receive_time,
            last_receive: receive_time,
            size_last_send: size,
            size_first_receive: size,
            size_total: DataSize::ZERO,
            num_probes: 0,
        });
        if send_time < c.first_send {
            c.first_send = send_time;
        }
        if send_time > c.last_send {
            c.last_send = send_time;
            c.size_last_send = size;
        }
        if receive_time < c.first_receive {
            c.first_receive = receive_time;
            c.size_first_receive = size;
        }
        if receive_time > c.last_receive {
            c.last_receive = receive_time;
        }
        c.size_total += size;
        c.num_probes += 1;

        let min_probes = f64::from(info.min_probes) * MIN_RECEIVED_PROBES_RATIO;
        let min_bytes = info.min_bytes.as_bytes_f64() * MIN_RECEIVED_BYTES_RATIO;
        if f64::from(c.num_probes) < min_probes || c.size_total.as_bytes_f64() < min_bytes {
            return None;
        }
        let send_interval = c.last_send - c.first_send;
        let recv_interval = c.last_receive - c.first_receive;
        if send_interval <= TimeDelta::ZERO
            || send_interval > MAX_PROBE_INTERVAL
            || recv_interval <= TimeDelta::ZERO
            || recv_interval > MAX_PROBE_INTERVAL
        {
            return None;
        }
        // The last sent packet's bytes were sent after the interval, the first received
        // packet's bytes arrived before it.
        let send_rate = (c.size_total - c.size_last_send) / send_interval;
        let recv_rate = (c.size_total - c.size_first_receive) / recv_interval;
        let ratio = recv_rate / send_rate;
        if ratio > MAX_VALID_RATIO {
            return None;
        }
        let mut res = send_rate.min(recv_rate);
        if recv_rate.as_bps_f64() < MIN_RATIO_FOR_UNSATURATED_LINK * send_rate.as_bps_f64() {
            res = recv_rate.scale(TARGET_UTILIZATION);
        }
        self.last_estimate = Some(res);
        Some(res)
    }

    /// The latest valid estimate since the last call, if any (libwebrtc's
    /// `FetchAndResetLastEstimatedBitrate`).
    pub fn fetch_and_reset_last_estimate(&mut self) -> Option<DataRate> {
        self.last_estimate.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: ProbeClusterInfo =
        ProbeClusterInfo { min_probes: 5, min_bytes: DataSize::from_bytes(5000) };
    const P: DataSize = DataSize::from_bytes(1000);

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_ms(ms)
    }

    #[test]
    fn valid_cluster_needs_80_percent_of_packets_and_bytes() {
        let mut e = ProbeBitrateEstimator::new();
        // Sent every 2 ms (4 Mbps), received every 2 ms.
        for i in 0..3 {
            assert_eq!(e.handle_probe(1, INFO, t(i * 2), t(100 + i * 2), P), None);
        }
        // Fourth packet: 4 >= 0.8 * 5 and 4000 >= 0.8 * 5000.
        // send: 3000 B over 6 ms = 4 Mbps; recv: 3000 B over 6 ms = 4 Mbps.
        let r = e.handle_probe(1, INFO, t(6), t(106), P).unwrap();
        assert_eq!(r, DataRate::from_mbps(4));
        assert_eq!(e.fetch_and_reset_last_estimate(), Some(DataRate::from_mbps(4)));
        assert_eq!(e.fetch_and_reset_last_estimate(), None);
    }

    #[test]
    fn saturated_link_uses_95_percent_of_receive_rate() {
        let mut e = ProbeBitrateEstimator::new();
        let mut r = None;
        // Sent every 2 ms (4 Mbps), received every 4 ms (2 Mbps): 2 < 0.9 * 4.
        for i in 0..5 {
            r = e.handle_probe(7, INFO, t(i * 2), t(100 + i * 4), P);
        }
        // recv = 4000 B over 16 ms = 2 Mbps -> 1.9 Mbps.
        assert_eq!(r, Some(DataRate::from_kbps(1900)));
    }

    #[test]
    fn receive_faster_than_twice_send_is_invalid() {
        let mut e = ProbeBitrateEstimator::new();
        let mut r = None;
        for i in 0..5 {
            // Sent every 10 ms, received every 2 ms: ratio 5.
            r = e.handle_probe(3, INFO, t(i * 10), t(100 + i * 2), P);
        }
        assert_eq!(r, None);
        // Too few bytes (min_bytes 10000 -> need 8000): invalid even with 5 packets.
        let info = ProbeClusterInfo { min_probes: 5, min_bytes: DataSize::from_bytes(10_000) };
        let mut e = ProbeBitrateEstimator::new();
        for i in 0..5 {
            r = e.handle_probe(4, info, t(i * 2), t(100 + i * 2), P);
        }
        assert_eq!(r, None);
    }
}
