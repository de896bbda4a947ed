//! What every pacer shares: the queue of packets waiting and the prober (libwebrtc's pacing
//! controller holds both), and the order a paced pacer keeps when it is polled: a probe that
//! is due first (media from the queue, else padding), then media by the pacer's own rule,
//! then its own filler (padding, dummy packets). Each pacer keeps its rule (a budget, tokens,
//! a rate) and what it charges for each kind.

use super::prober::Prober;
use super::queue::PacketQueue;
use crate::packet::Packet;
use crate::units::Timestamp;

/// The queue and the prober of a pacer.
#[derive(Debug, Default)]
pub struct PacerCore {
    /// The packets waiting.
    pub queue: PacketQueue,
    /// The probe clusters to send.
    pub prober: Prober,
}

/// What is due when a paced pacer is polled ([`PacerCore::next_due`]).
#[derive(Debug)]
pub enum Due {
    /// A probe (already accounted by the prober).
    Probe(Packet),
    /// The head of the queue.
    Media(Packet),
    /// The pacer's own filler (padding, a dummy packet): the pacer makes it.
    Filler,
}

impl PacerCore {
    /// Takes a packet in at `now` (stamped with it) and tells the prober, whose waiting
    /// clusters a large enough packet activates.
    pub fn enqueue(&mut self, mut packet: Packet, now: Timestamp) {
        packet.enqueue_time = now;
        self.prober.on_packet_enqueued(packet.size);
        self.queue.push(packet);
    }

    /// What is due at `now`: a probe, else media if `media_due` (and any waits), else the
    /// filler if `filler_due`. `media_due` and `filler_due` are the pacer's rules read
    /// before this call (the prober does not change them when no probe is due).
    pub fn next_due(&mut self, now: Timestamp, media_due: bool, filler_due: bool) -> Option<Due> {
        if let Some(p) = self.prober.poll_probe(&mut self.queue, now) {
            return Some(Due::Probe(p));
        }
        if media_due {
            return self.queue.pop().map(Due::Media);
        }
        filler_due.then_some(Due::Filler)
    }
}
