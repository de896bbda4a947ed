//! When libwebrtc's pacing controller runs: the task queue around it
//! (modules/pacing/task_queue_paced_sender.cc, `MaybeProcessPackets`; the same at M119 and
//! M156).
//!
//! libwebrtc does not wake its pacer at each packet's send time. The controller runs when a
//! packet is enqueued, the rates change or a probe cluster is created, and on a delayed task
//! it schedules for itself. At each run it sends every packet whose send time has come
//! (accounting each at that time, so no budget is lost by sending late), then schedules the
//! next run:
//!
//! * at the next send time, but no sooner than the hold-back window:
//!   `min(max_hold_back_window, max_hold_back_window_in_packets * mean packet size / pacing
//!   rate)`, 5 ms and 3 packets as `RtpTransportControllerSend` builds it (no hold-back
//!   while probing);
//! * the delay rounded up to a whole millisecond (`RoundUpTo(TimeDelta::Millis(1))`);
//! * only if no earlier run is already scheduled; a run scheduled earlier than one in flight
//!   retires it, and a retired run still sends what is due when it fires, without scheduling.
//!
//! The mean packet size is an exponential filter (`rtc::ExpFilter`, alpha 0.95) over the
//! sizes of enqueued packets. So at 30 Mbps the pacer wakes about every millisecond and
//! sends three or four packets back to back; at 2.5 Mbps every 5 ms.
//!
//! This module keeps the schedule; the pacer that uses it
//! ([`super::leaky_bucket::LeakyBucketPacer`]) pays its budget up to each packet's due time,
//! and when the sender's congestion window releases it, up to now (`SetCongested`), so the
//! time it was held is not credit.
//!
//! Not modelled: libwebrtc lets a run send probes up to 1 ms early
//! (`kMaxEarlyProbeProcessing`); here probes go at their own times or at the next run.

use crate::units::{DataRate, TimeDelta, Timestamp};

/// `rtc::ExpFilter`'s alpha for the mean packet size (`packet_size_(/*alpha=*/0.95)`).
const PACKET_SIZE_ALPHA: f64 = 0.95;

/// The delayed tasks libwebrtc's task queue holds for the pacer, and what makes it run.
#[derive(Debug)]
pub struct WakeSchedule {
    hold_back_window: TimeDelta,
    hold_back_packets: f64,
    /// Mean size of enqueued packets in bytes (unset until the first packet).
    packet_size_bytes: Option<f64>,
    /// Delayed tasks in flight: (when it fires, the run time it was scheduled for).
    timers: Vec<(Timestamp, Timestamp)>,
    /// `next_process_time_`: the run time of the task that will schedule the next one.
    scheduled: Option<Timestamp>,
    /// When an enqueue, a rate change or a probe cluster first asked for a run not yet made.
    kicked_at: Option<Timestamp>,
    /// A run in progress (the pacer is being polled at this instant).
    running_at: Option<Timestamp>,
}

impl WakeSchedule {
    /// A schedule with libwebrtc's hold-back window and its bound in packets.
    pub fn new(hold_back_window: TimeDelta, hold_back_packets: f64) -> Self {
        WakeSchedule {
            hold_back_window,
            hold_back_packets,
            packet_size_bytes: None,
            timers: Vec::new(),
            scheduled: None,
            kicked_at: None,
            running_at: None,
        }
    }

    /// A packet of `size_bytes` was enqueued at `now`: it enters the mean size and asks for a
    /// run.
    pub fn on_enqueued(&mut self, size_bytes: f64, now: Timestamp) {
        self.packet_size_bytes = Some(match self.packet_size_bytes {
            None => size_bytes,
            Some(mean) => PACKET_SIZE_ALPHA * mean + (1.0 - PACKET_SIZE_ALPHA) * size_bytes,
        });
        self.kick(now);
    }

    /// Something asked the pacer to run at `now` (`PostMaybeProcessPackets`).
    pub fn kick(&mut self, now: Timestamp) {
        self.kicked_at = Some(self.kicked_at.map_or(now, |k| k.min(now)));
    }

    /// Whether the pacer runs at `now`: a run goes on, was asked for, or a delayed task
    /// fired. A fired task that is the scheduled one clears the schedule, so the run's end
    /// schedules the next.
    pub fn runs_at(&mut self, now: Timestamp) -> bool {
        let mut fired = false;
        let scheduled = &mut self.scheduled;
        self.timers.retain(|&(fires, run_time)| {
            if fires > now {
                return true;
            }
            fired = true;
            if *scheduled == Some(run_time) {
                *scheduled = None;
            }
            false
        });
        // A run interrupted at an earlier instant (the sender's window closed) goes on now,
        // as libwebrtc's pacer runs again when the congestion state changes.
        if fired || self.kicked_at.is_some() || self.running_at.is_some() {
            self.kicked_at = None;
            self.running_at = Some(now);
            true
        } else {
            false
        }
    }

    /// The run at `now` sent everything due; the next send time is `next_send`. Schedules
    /// the next run unless an earlier one is in flight.
    pub fn finish(&mut self, now: Timestamp, next_send: Timestamp, probing: bool, rate: DataRate) {
        self.running_at = None;
        if !next_send.is_finite() {
            return;
        }
        let hold_back = if probing {
            TimeDelta::ZERO
        } else {
            match self.packet_size_bytes {
                Some(size) if rate > DataRate::ZERO => {
                    let per_packet_us = size * 8e6 / rate.as_bps_f64();
                    self.hold_back_window
                        .min(TimeDelta::from_us((per_packet_us * self.hold_back_packets) as i64))
                }
                _ => self.hold_back_window,
            }
        };
        let delay = hold_back.max(next_send.saturating_since(now));
        let run_time = now + delay;
        if self.scheduled.is_none_or(|s| s > run_time) {
            self.timers.push((now + round_up_to_ms(delay), run_time));
            self.scheduled = Some(run_time);
        }
    }

    /// When the pacer next runs: when it was asked to or its run began (so at once), else
    /// when the first delayed task fires.
    pub fn poll_timeout(&self) -> Timestamp {
        let first = self.timers.iter().map(|t| t.0).min().unwrap_or(Timestamp::INFINITY);
        let asked = self.kicked_at.into_iter().chain(self.running_at).min();
        asked.map_or(first, |t| t.min(first))
    }
}

/// `TimeDelta::RoundUpTo(TimeDelta::Millis(1))` of a delay (a negative one is none).
fn round_up_to_ms(d: TimeDelta) -> TimeDelta {
    d.max(TimeDelta::ZERO).round_up_to(TimeDelta::from_ms(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_delays_up_to_whole_milliseconds() {
        assert_eq!(round_up_to_ms(TimeDelta::from_us(1)), TimeDelta::from_ms(1));
        assert_eq!(round_up_to_ms(TimeDelta::from_us(1000)), TimeDelta::from_ms(1));
        assert_eq!(round_up_to_ms(TimeDelta::from_us(9200)), TimeDelta::from_ms(10));
        assert_eq!(round_up_to_ms(TimeDelta::ZERO), TimeDelta::ZERO);
    }

    #[test]
    fn hold_back_is_three_packets_or_five_ms() {
        let mut w = WakeSchedule::new(TimeDelta::from_ms(5), 3.0);
        w.on_enqueued(1250.0, Timestamp::ZERO);
        assert!(w.runs_at(Timestamp::ZERO));
        // 1250 B at 30 Mbps: 333 us a packet, three of them 1 ms: the next run in 1 ms even
        // though a packet is due in 0.1 ms.
        let next = Timestamp::from_us(100);
        w.finish(Timestamp::ZERO, next, false, DataRate::from_mbps(30));
        assert_eq!(w.poll_timeout(), Timestamp::from_ms(1));
        assert!(!w.runs_at(Timestamp::from_us(999)));
        assert!(w.runs_at(Timestamp::from_ms(1)));
        // At 1 Mbps three packets take 30 ms: the window's 5 ms bounds the hold-back.
        w.finish(Timestamp::from_ms(1), next, false, DataRate::from_mbps(1));
        assert_eq!(w.poll_timeout(), Timestamp::from_ms(6));
        // While probing there is no hold-back: the next run at the send time, rounded up.
        assert!(w.runs_at(Timestamp::from_ms(6)));
        w.finish(Timestamp::from_ms(6), Timestamp::from_us(6200), true, DataRate::from_mbps(1));
        assert_eq!(w.poll_timeout(), Timestamp::from_ms(7));
    }

    #[test]
    fn an_earlier_run_retires_the_scheduled_one_which_still_runs() {
        let mut w = WakeSchedule::new(TimeDelta::from_ms(5), 3.0);
        assert!(!w.runs_at(Timestamp::ZERO));
        w.kick(Timestamp::ZERO);
        assert_eq!(w.poll_timeout(), Timestamp::ZERO);
        assert!(w.runs_at(Timestamp::ZERO));
        w.finish(Timestamp::ZERO, Timestamp::from_ms(20), false, DataRate::from_mbps(1));
        assert_eq!(w.poll_timeout(), Timestamp::from_ms(20));
        // A rate change at 2 ms makes a packet due at 8 ms: a run at 8 ms is scheduled.
        w.kick(Timestamp::from_ms(2));
        assert_eq!(w.poll_timeout(), Timestamp::from_ms(2));
        assert!(w.runs_at(Timestamp::from_ms(2)));
        w.finish(Timestamp::from_ms(2), Timestamp::from_ms(8), false, DataRate::from_mbps(1));
        assert_eq!(w.poll_timeout(), Timestamp::from_ms(8));
        assert!(w.runs_at(Timestamp::from_ms(8)));
        w.finish(Timestamp::from_ms(8), Timestamp::from_ms(30), false, DataRate::from_mbps(1));
        // The retired task at 20 ms still fires and runs; the one for 30 ms stays.
        assert_eq!(w.poll_timeout(), Timestamp::from_ms(20));
        assert!(w.runs_at(Timestamp::from_ms(20)));
        w.finish(Timestamp::from_ms(20), Timestamp::from_ms(30), false, DataRate::from_mbps(1));
        assert_eq!(w.poll_timeout(), Timestamp::from_ms(30));
    }
}
