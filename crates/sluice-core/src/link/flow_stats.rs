//! Per-flow counters at a link that several flows share (a bottleneck with competing
//! traffic): what arrived, what was dropped, what was delivered, and each packet's queueing
//! delay (arrival to departure, as [`super::Link::last_queue_delay`]) in a histogram, so
//! the memory does not grow with the session.

use crate::packet::FlowId;
use crate::units::{DataSize, TimeDelta};

/// Width of a queueing-delay histogram bin.
pub const DELAY_BIN: TimeDelta = TimeDelta::from_ms(1);
/// Bins of the histogram: 0 to 10 s in 1 ms steps; longer delays count in the last bin.
const DELAY_BINS: usize = 10_001;
/// Flow ids a table keeps (a datagram of a larger id counts as this last one).
pub const MAX_FLOWS: usize = 256;

/// One flow's counters. Bytes are on-wire sizes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Packets of the flow that reached the link.
    pub arrived_packets: u64,
    /// Bytes of those packets.
    pub arrived_bytes: i64,
    /// Dropped for any reason (random loss, the queue's limit or its management).
    pub dropped_packets: u64,
    /// Bytes of the dropped packets.
    pub dropped_bytes: i64,
    /// Packets of the flow the link delivered.
    pub delivered_packets: u64,
    /// Bytes of those packets.
    pub delivered_bytes: i64,
    /// Packets per 1 ms bin of queueing delay (empty until the first departure).
    delay_bins: Vec<u64>,
    departed_packets: u64,
}

impl FlowStats {
    /// Dropped over arrived packets (0 before any arrival).
    pub fn loss_rate(&self) -> f64 {
        if self.arrived_packets == 0 {
            0.0
        } else {
            self.dropped_packets as f64 / self.arrived_packets as f64
        }
    }

    /// The `q` quantile (0..=1) of the queueing delay of the packets that left the queue, to
    /// the histogram's 1 ms (the upper edge of the bin); `None` before any departure.
    pub fn queue_delay_quantile(&self, q: f64) -> Option<TimeDelta> {
        if self.departed_packets == 0 {
            return None;
        }
        // The smallest bin by which at least q of the packets have left (nearest rank).
        let rank = ((q.clamp(0.0, 1.0) * self.departed_packets as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.delay_bins.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(DELAY_BIN * (i as i64 + 1));
            }
        }
        Some(DELAY_BIN * DELAY_BINS as i64)
    }

    fn record_delay(&mut self, delay: TimeDelta) {
        if self.delay_bins.is_empty() {
            self.delay_bins = vec![0; DELAY_BINS];
        }
        let bin = (delay.as_us().max(0) / DELAY_BIN.as_us()) as usize;
        self.delay_bins[bin.min(DELAY_BINS - 1)] += 1;
        self.departed_packets += 1;
    }
}

/// Counters by flow id.
#[derive(Clone, Debug, Default)]
pub struct FlowStatsTable {
    flows: Vec<FlowStats>,
}

impl FlowStatsTable {
    /// The counters of `flow` (all zero if nothing of it was seen).
    pub fn get(&self, flow: FlowId) -> FlowStats {
        self.flows.get(flow as usize).cloned().unwrap_or_default()
    }
    /// Bytes delivered of `flow` so far (cheap: for the time series).
    pub fn delivered_bytes(&self, flow: FlowId) -> i64 {
        self.flows.get(flow as usize).map_or(0, |f| f.delivered_bytes)
    }

    /// Packets of `flow` dropped so far.
    pub fn dropped_packets(&self, flow: FlowId) -> u64 {
        self.flows.get(flow as usize).map_or(0, |f| f.dropped_packets)
    }

    fn entry(&mut self, flow: FlowId) -> &mut FlowStats {
        let i = (flow as usize).min(MAX_FLOWS - 1);
        if self.flows.len() <= i {
            self.flows.resize_with(i + 1, FlowStats::default);
        }
        &mut self.flows[i]
    }
    pub(super) fn on_arrival(&mut self, flow: FlowId, size: DataSize) {
        let f = self.entry(flow);
        f.arrived_packets += 1;
        f.arrived_bytes += size.as_bytes();
    }
    pub(super) fn on_drop(&mut self, flow: FlowId, size: DataSize) {
        let f = self.entry(flow);
        f.dropped_packets += 1;
        f.dropped_bytes += size.as_bytes();
    }
    pub(super) fn on_departure(&mut self, flow: FlowId, queue_delay: TimeDelta) {
        self.entry(flow).record_delay(queue_delay);
    }
    pub(super) fn on_delivery(&mut self, flow: FlowId, size: DataSize) {
        let f = self.entry(flow);
        f.delivered_packets += 1;
        f.delivered_bytes += size.as_bytes();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_the_bins_upper_edges() {
        let mut t = FlowStatsTable::default();
        for ms in 0..100 {
            t.on_departure(3, TimeDelta::from_us(ms * 1000 + 500));
        }
        let f = t.get(3);
        assert_eq!(f.queue_delay_quantile(0.95), Some(TimeDelta::from_ms(95)));
        assert_eq!(f.queue_delay_quantile(0.0), Some(TimeDelta::from_ms(1)));
        assert_eq!(t.get(2).queue_delay_quantile(0.95), None);
        t.on_departure(3, TimeDelta::from_secs(60));
        assert_eq!(t.get(3).queue_delay_quantile(1.0), Some(TimeDelta::from_ms(10_001)));
    }

    #[test]
    fn loss_is_drops_over_arrivals_per_flow() {
        let mut t = FlowStatsTable::default();
        for _ in 0..4 {
            t.on_arrival(1, DataSize::from_bytes(1000));
        }
        t.on_drop(1, DataSize::from_bytes(1000));
        t.on_arrival(0, DataSize::from_bytes(10));
        assert_eq!(t.get(1).loss_rate(), 0.25);
        assert_eq!(t.get(0).loss_rate(), 0.0);
        assert_eq!(t.get(7).loss_rate(), 0.0);
    }
}
