//! No pacing ("always burst", ACE §6.1): media leaves the moment it is packetized.
//! Probe clusters are still sent at their rate by the shared prober, since a probe sent as
//! one burst would measure nothing.

use super::core::PacerCore;
use super::Pacer;
use crate::packet::Packet;
use crate::units::{DataRate, Timestamp};

/// The pacer that does not pace (see the module documentation).
pub struct Unpaced {
    core: PacerCore,
    rate: DataRate,
}

impl Unpaced {
    /// The pacer, empty.
    pub fn new(_now: Timestamp) -> Self {
        Unpaced { core: PacerCore::default(), rate: DataRate::ZERO }
    }
}

impl Pacer for Unpaced {
    fn core(&self) -> &PacerCore {
        &self.core
    }
    fn core_mut(&mut self) -> &mut PacerCore {
        &mut self.core
    }
    fn set_rates(&mut self, pacing_rate: DataRate, _padding_rate: DataRate, _now: Timestamp) {
        self.rate = pacing_rate;
    }
    fn enqueue(&mut self, packet: Packet, now: Timestamp) {
        self.core.enqueue(packet, now);
    }
    fn poll_send(&mut self, now: Timestamp) -> Option<Packet> {
        // Media goes at once; probes (padding, the queue being empty) at their rate.
        self.core.queue.pop().or_else(|| self.core.prober.poll_probe(&mut self.core.queue, now))
    }
    fn poll_timeout(&self) -> Timestamp {
        if !self.core.queue.is_empty() {
            // Due immediately; the caller polls at its current time.
            return Timestamp::ZERO;
        }
        self.core.prober.next_probe_time()
    }
    fn pacing_rate(&self) -> DataRate {
        DataRate::INFINITY
    }
}
