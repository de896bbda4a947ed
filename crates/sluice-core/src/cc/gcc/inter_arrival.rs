//! Packet grouping for the delay-based detector: turns per-packet (send, arrival) times into
//! per-group deltas. Follows libwebrtc's `InterArrivalDelta` (goog_cc:
//! `inter_arrival_delta.cc`).

use crate::units::{DataSize, TimeDelta, Timestamp};

/// A group holds packets sent within this span of the group's first send time (libwebrtc).
pub const SEND_TIME_GROUP_LENGTH: TimeDelta = TimeDelta::from_ms(5);
/// Burst merge: maximum arrival gap for a packet to join the current group (libwebrtc).
pub const BURST_DELTA_THRESHOLD: TimeDelta = TimeDelta::from_ms(5);
/// Burst merge: a burst-merged group may not be older than this (libwebrtc).
pub const MAX_BURST_DURATION: TimeDelta = TimeDelta::from_ms(100);
/// A jump of arrival time against the sender's clock at least this large resets (libwebrtc).
pub const ARRIVAL_TIME_OFFSET_THRESHOLD: TimeDelta = TimeDelta::from_secs(3);
/// Number of consecutive groups with a negative arrival delta that resets (libwebrtc).
pub const REORDERED_RESET_THRESHOLD: u32 = 3;

/// Deltas between two consecutive completed groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupDeltas {
    /// Difference of the groups' last send times.
    pub send_delta: TimeDelta,
    /// Difference of the groups' last arrival times.
    pub arrival_delta: TimeDelta,
    /// Difference of the groups' total sizes.
    pub size_delta: DataSize,
}

#[derive(Clone, Copy, Debug)]
struct Group {
    size: DataSize,
    first_send: Timestamp,
    /// Latest send time in the group.
    send: Timestamp,
    first_arrival: Timestamp,
    /// Arrival time of the last packet added.
    complete: Timestamp,
    /// Local (feedback) time of the last packet added.
    last_system: Timestamp,
}

/// Groups packets into 5 ms send-time groups and reports deltas between completed groups.
#[derive(Clone, Debug, Default)]
pub struct InterArrival {
    current: Option<Group>,
    prev: Option<Group>,
    consecutive_reordered: u32,
}

impl InterArrival {
    /// A grouper with no groups yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets all groups.
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    fn belongs_to_burst(cur: &Group, send: Timestamp, arrival: Timestamp) -> bool {
        let arrival_delta = arrival - cur.complete;
        let send_delta = send - cur.send;
        if send_delta == TimeDelta::ZERO {
            return true;
        }
        let propagation_delta = arrival_delta - send_delta;
        propagation_delta < TimeDelta::ZERO
            && arrival_delta <= BURST_DELTA_THRESHOLD
            && arrival - cur.first_arrival < MAX_BURST_DURATION
    }

    /// Adds one packet (packets should come in arrival order). `system_time` is the local time
    /// the packet's feedback was processed. Returns the deltas between the two previous groups
    /// when this packet starts a new group.
    pub fn compute_deltas(
        &mut self,
        send: Timestamp,
        arrival: Timestamp,
        system_time: Timestamp,
        size: DataSize,
    ) -> Option<GroupDeltas> {
        let mut result = None;
        match self.current {
            None => {
                self.current = Some(Group {
                    size: DataSize::ZERO,
                    first_send: send,
                    send,
                    first_arrival: arrival,
                    complete: arrival,
                    last_system: system_time,
                });
            }
            Some(cur) => {
                if send < cur.first_send {
                    // Reordered against the current group: dropped.
                    return None;
                }
                let new_group = !Self::belongs_to_burst(&cur, send, arrival)
                    && send - cur.first_send > SEND_TIME_GROUP_LENGTH;
                if new_group {
                    if let Some(prev) = self.prev {
                        let send_delta = cur.send - prev.send;
                        let arrival_delta = cur.complete - prev.complete;
                        let system_delta = cur.last_system - prev.last_system;
                        if arrival_delta - system_delta >= ARRIVAL_TIME_OFFSET_THRESHOLD {
                            // The receiver's clock jumped.
                            self.reset();
                            return None;
                        }
                        if arrival_delta < TimeDelta::ZERO {
                            self.consecutive_reordered += 1;
                            if self.consecutive_reordered >= REORDERED_RESET_THRESHOLD {
                                self.reset();
                            }
                            return None;
                        }
                        self.consecutive_reordered = 0;
                        result = Some(GroupDeltas {
                            send_delta,
                            arrival_delta,
                            size_delta: cur.size - prev.size,
                        });
                    }
                    self.prev = Some(cur);
                    self.current = Some(Group {
                        size: DataSize::ZERO,
                        first_send: send,
                        send,
                        first_arrival: arrival,
                        complete: arrival,
                        last_system: system_time,
                    });
                } else if let Some(c) = self.current.as_mut() {
                    c.send = c.send.max(send);
                }
            }
        }
        let c = self.current.as_mut().expect("current group exists");
        c.size += size;
        c.complete = arrival;
        c.last_system = system_time;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: i64) -> Timestamp {
        Timestamp::from_ms(v)
    }
    const B: DataSize = DataSize::from_bytes(1000);

    #[test]
    fn groups_by_five_ms_send_time() {
        let mut ia = InterArrival::new();
        // Group 1: sent at 0, 2, 5 ms (5 is within 5 ms of the first), arriving spread out
        // (no burst merge since propagation grows).
        assert_eq!(ia.compute_deltas(ms(0), ms(100), ms(200), B), None);
        assert_eq!(ia.compute_deltas(ms(2), ms(103), ms(200), B), None);
        assert_eq!(ia.compute_deltas(ms(5), ms(107), ms(200), B), None);
        // Group 2 starts at 6 ms (6 - 0 > 5): no previous group yet, so no deltas.
        assert_eq!(ia.compute_deltas(ms(6), ms(109), ms(200), B), None);
        assert_eq!(ia.compute_deltas(ms(9), ms(113), ms(200), B), None);
        // Group 3 starts at 20 ms: deltas group2 - group1 = send 9-5, arrival 113-107, size 2-3.
        let d = ia.compute_deltas(ms(20), ms(125), ms(200), B).unwrap();
        assert_eq!(d.send_delta, TimeDelta::from_ms(4));
        assert_eq!(d.arrival_delta, TimeDelta::from_ms(6));
        assert_eq!(d.size_delta, DataSize::from_bytes(-1000));
    }

    #[test]
    fn burst_merge_joins_late_send_with_early_arrival() {
        let mut ia = InterArrival::new();
        ia.compute_deltas(ms(0), ms(100), ms(0), B);
        // Sent 10 ms later but arrived only 2 ms later (arrival gap <= 5 ms, propagation
        // delta -8 ms < 0, group 2 ms old): merged into the first group.
        assert_eq!(ia.compute_deltas(ms(10), ms(102), ms(0), B), None);
        // Same send time always merges.
        assert_eq!(ia.compute_deltas(ms(10), ms(140), ms(0), B), None);
        // Next group at 30 ms, then 50 ms: deltas of group2 vs group1.
        assert_eq!(ia.compute_deltas(ms(30), ms(160), ms(0), B), None);
        let d = ia.compute_deltas(ms(50), ms(180), ms(0), B).unwrap();
        // Group 1 last send 10 ms, last arrival 140 ms, 3 packets; group 2: 30 ms, 160 ms, 1.
        assert_eq!(d.send_delta, TimeDelta::from_ms(20));
        assert_eq!(d.arrival_delta, TimeDelta::from_ms(20));
        assert_eq!(d.size_delta, DataSize::from_bytes(-2000));
    }

    #[test]
    fn no_burst_merge_when_arrival_gap_too_large() {
        let mut ia = InterArrival::new();
        ia.compute_deltas(ms(0), ms(100), ms(0), B);
        // Arrival gap 6 ms > 5 ms: a new group even though propagation shrank.
        ia.compute_deltas(ms(10), ms(106), ms(0), B);
        let d = ia.compute_deltas(ms(20), ms(116), ms(0), B).unwrap();
        assert_eq!(d.send_delta, TimeDelta::from_ms(10));
        assert_eq!(d.arrival_delta, TimeDelta::from_ms(6));
    }

    #[test]
    fn reordered_packet_dropped_and_negative_deltas_reset() {
        let mut ia = InterArrival::new();
        ia.compute_deltas(ms(10), ms(100), ms(0), B);
        // Sent before the current group's first packet: dropped.
        assert_eq!(ia.compute_deltas(ms(5), ms(101), ms(0), B), None);
        assert_eq!(ia.current.unwrap().size, B);
        // Now build groups whose arrival deltas are negative three times in a row. Feedback
        // is normally sorted by arrival, so this needs an out-of-order feed: group 2 starts
        // at 200 ms and a burst-merged packet completes it at 95 ms, before group 1 (100).
        let mut ia = InterArrival::new();
        ia.compute_deltas(ms(0), ms(100), ms(0), B);
        ia.compute_deltas(ms(10), ms(200), ms(0), B);
        ia.compute_deltas(ms(12), ms(95), ms(0), B);
        assert_eq!(ia.compute_deltas(ms(20), ms(210), ms(0), B), None); // -5 ms: count 1
        assert_eq!(ia.consecutive_reordered, 1);
        assert!(ia.prev.is_some());
        assert_eq!(ia.compute_deltas(ms(21), ms(211), ms(0), B), None); // count 2
        assert!(ia.current.is_some());
        assert_eq!(ia.compute_deltas(ms(22), ms(212), ms(0), B), None); // count 3: reset
        assert!(ia.current.is_none() && ia.prev.is_none());
    }

    #[test]
    fn clock_jump_resets() {
        let mut ia = InterArrival::new();
        ia.compute_deltas(ms(0), ms(100), ms(0), B);
        ia.compute_deltas(ms(10), ms(4000), ms(10), B);
        // Arrival delta 3900 ms vs system delta 10 ms: >= 3 s offset, reset.
        assert_eq!(ia.compute_deltas(ms(20), ms(4010), ms(20), B), None);
        assert!(ia.prev.is_none() && ia.current.is_none());
    }
}
