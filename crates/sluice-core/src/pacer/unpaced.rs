//! No pacing ("always burst", ACE §6.1): media leaves the moment it is packetized.
//! Probe clusters are still sent at their rate by the shared prober, since a probe sent as
//! one burst would measure nothing.

use super::prober::Prober;
use super::queue::PacketQueue;
use super::Pacer;
use crate::cc::ProbeClusterConfig;
use crate::packet::Packet;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};

pub struct Unpaced {
    queue: PacketQueue,
    prober: Prober,
    rate: DataRate,
}

impl Unpaced {
    pub fn new(_now: Timestamp) -> Self {
        Unpaced { queue: PacketQueue::default(), prober: Prober::default(), rate: DataRate::ZERO }
    }
}

impl Pacer for Unpaced {
    fn set_rates(&mut self, pacing_rate: DataRate, _padding_rate: DataRate, _now: Timestamp) {
        self.rate = pacing_rate;
    }
    fn enqueue(&mut self, mut packet: Packet, now: Timestamp) {
        packet.enqueue_time = now;
        self.prober.on_packet_enqueued(packet.size);
        self.queue.push(packet);
    }
    fn create_probe_cluster(&mut self, cluster: ProbeClusterConfig, _now: Timestamp) {
        self.prober.add_cluster(cluster);
    }
    fn poll_send(&mut self, now: Timestamp) -> Option<Packet> {
        // Media goes at once; probes (padding, the queue being empty) at their rate.
        self.queue.pop().or_else(|| self.prober.poll_probe(&mut self.queue, now))
    }
    fn poll_timeout(&self) -> Timestamp {
        if !self.queue.is_empty() {
            // Due immediately; the caller polls at its current time.
            return Timestamp::ZERO;
        }
        self.prober.next_probe_time()
    }
    fn purge(&mut self, pred: &mut dyn FnMut(&Packet) -> bool) -> usize {
        self.queue.remove_where(pred)
    }
    fn queue_size(&self) -> DataSize {
        self.queue.bytes()
    }
    fn queue_packets(&self) -> usize {
        self.queue.len()
    }
    fn oldest_queue_time(&self, now: Timestamp) -> TimeDelta {
        self.queue.oldest_queue_time(now)
    }
    fn pacing_rate(&self) -> DataRate {
        DataRate::INFINITY
    }
}
