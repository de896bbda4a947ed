//! The pacer's packet queue: retransmissions before video (libwebrtc's priorities: video RTX
//! above video), FIFO within a class, with byte counts and queue-time bookkeeping for the
//! queue-drain rule.

use crate::packet::{Packet, PacketKind};
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use std::collections::VecDeque;

/// The packets waiting in a pacer, retransmissions first.
#[derive(Debug, Default)]
pub struct PacketQueue {
    retransmissions: VecDeque<Packet>,
    video: VecDeque<Packet>,
    bytes: DataSize,
    /// Sum of enqueue times in microseconds, for the average queue time.
    enqueue_time_sum_us: i128,
}

impl PacketQueue {
    /// Appends `packet` to its class (its `enqueue_time` already set).
    pub fn push(&mut self, packet: Packet) {
        self.bytes += packet.size;
        self.enqueue_time_sum_us += packet.enqueue_time.as_us() as i128;
        match packet.kind {
            PacketKind::Retransmission => self.retransmissions.push_back(packet),
            _ => self.video.push_back(packet),
        }
    }

    /// The packet [`pop`](Self::pop) would return next.
    pub fn peek(&self) -> Option<&Packet> {
        self.retransmissions.front().or_else(|| self.video.front())
    }

    /// Removes and returns the next packet: the oldest retransmission, else the oldest other.
    pub fn pop(&mut self) -> Option<Packet> {
        let p = self.retransmissions.pop_front().or_else(|| self.video.pop_front())?;
        self.bytes -= p.size;
        self.enqueue_time_sum_us -= p.enqueue_time.as_us() as i128;
        Some(p)
    }

    /// Removes the packets for which `pred` is true; returns how many.
    pub fn remove_where(&mut self, pred: &mut dyn FnMut(&Packet) -> bool) -> usize {
        let mut removed = 0;
        for q in [&mut self.retransmissions, &mut self.video] {
            q.retain(|p| {
                if pred(p) {
                    self.bytes -= p.size;
                    self.enqueue_time_sum_us -= p.enqueue_time.as_us() as i128;
                    removed += 1;
                    false
                } else {
                    true
                }
            });
        }
        removed
    }

    /// Whether no packet waits.
    pub fn is_empty(&self) -> bool {
        self.retransmissions.is_empty() && self.video.is_empty()
    }
    /// Packets waiting.
    pub fn len(&self) -> usize {
        self.retransmissions.len() + self.video.len()
    }
    /// Bytes waiting.
    pub fn bytes(&self) -> DataSize {
        self.bytes
    }

    /// Mean time the queued packets have waited.
    pub fn average_queue_time(&self, now: Timestamp) -> TimeDelta {
        let n = self.len() as i128;
        if n == 0 {
            return TimeDelta::ZERO;
        }
        // In i64 when the sum fits (always, in practice): the same quotient without i128's
        // slow division on the pacer's hot path.
        let mean_enqueue = match i64::try_from(self.enqueue_time_sum_us) {
            Ok(sum) => i128::from(sum / n as i64),
            Err(_) => self.enqueue_time_sum_us / n,
        };
        TimeDelta::from_us((now.as_us() as i128 - mean_enqueue) as i64)
    }

    /// libwebrtc's queue-drain rule: the rate at which the queued bytes leave before their
    /// average queue time reaches `limit` (at least 1 ms is left to drain them). Zero for an
    /// empty queue or a zero limit (rule off).
    pub fn drain_rate(&self, limit: TimeDelta, now: Timestamp) -> DataRate {
        if limit <= TimeDelta::ZERO || self.is_empty() {
            return DataRate::ZERO;
        }
        let remaining = (limit - self.average_queue_time(now)).max(TimeDelta::from_ms(1));
        self.bytes / remaining
    }

    /// How long the oldest waiting packet has waited (zero when empty).
    pub fn oldest_queue_time(&self, now: Timestamp) -> TimeDelta {
        let oldest = [self.retransmissions.front(), self.video.front()]
            .into_iter()
            .flatten()
            .map(|p| p.enqueue_time)
            .min();
        oldest.map_or(TimeDelta::ZERO, |t| now.saturating_since(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(kind: PacketKind, seq: u64, t_ms: i64) -> Packet {
        let mut p = Packet::padding(DataSize::from_bytes(1000), Timestamp::from_ms(t_ms));
        p.kind = kind;
        p.media_seq = seq;
        p
    }

    #[test]
    fn retransmissions_jump_the_queue() {
        let mut q = PacketQueue::default();
        q.push(pkt(PacketKind::Video, 1, 0));
        q.push(pkt(PacketKind::Video, 2, 0));
        q.push(pkt(PacketKind::Retransmission, 0, 10));
        assert_eq!(q.bytes().as_bytes(), 3000);
        assert_eq!(q.average_queue_time(Timestamp::from_ms(30)).as_ms(), 26);
        assert_eq!(q.pop().unwrap().media_seq, 0);
        assert_eq!(q.pop().unwrap().media_seq, 1);
        assert_eq!(q.oldest_queue_time(Timestamp::from_ms(30)).as_ms(), 30);
        assert_eq!(q.pop().unwrap().media_seq, 2);
        assert!(q.pop().is_none());
        assert_eq!(q.bytes(), DataSize::ZERO);
    }

    #[test]
    fn removes_what_the_predicate_picks_and_keeps_the_accounts() {
        let mut q = PacketQueue::default();
        for (seq, t) in [(1, 0), (2, 10), (3, 20)] {
            q.push(pkt(PacketKind::Video, seq, t));
        }
        q.push(pkt(PacketKind::Retransmission, 2, 30));
        assert_eq!(q.remove_where(&mut |p| p.media_seq == 2), 2);
        assert_eq!(q.len(), 2);
        assert_eq!(q.bytes().as_bytes(), 2000);
        // Mean enqueue time of what is left (0 and 20 ms).
        assert_eq!(q.average_queue_time(Timestamp::from_ms(40)).as_ms(), 30);
        assert_eq!(q.pop().unwrap().media_seq, 1);
        assert_eq!(q.pop().unwrap().media_seq, 3);
    }
}
