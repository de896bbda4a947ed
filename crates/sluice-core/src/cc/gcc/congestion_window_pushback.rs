//! Congestion-window pushback (libwebrtc goog_cc's CongestionWindowPushbackController, on in
//! Chrome through the `WebRTC-CongestionWindow` field trial, QueueSize 350 ms, MinBitrate
//! 30 kbps). A data window of `target * (min feedback RTT + queue_size)` bounds the bytes in
//! flight; while they overfill it, the rate given to the *encoder* shrinks multiplicatively
//! (the pacer keeps the network target), so queues built by an overshooting encoder drain.
//!
//! Per update: fill = outstanding / window; fill > 1.5 -> ratio *= 0.9; fill > 1 -> ratio *=
//! 0.95; fill < 0.1 -> ratio = 1; else ratio *= 1.05 (at most 1). Encoder rate = target *
//! ratio, not below `min_rate` unless the target itself is lower.

use crate::units::{DataRate, DataSize, TimeDelta};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CongestionWindowConfig {
    /// Queueing allowance added to the RTT for the window (Chrome: 350 ms).
    pub queue_size_ms: f64,
    /// The encoder rate is not pushed below this (Chrome: 30 kbps).
    pub min_rate_bps: i64,
    /// Count the pacer queue as outstanding too (libwebrtc's
    /// `WebRTC-AddPacingToCongestionWindowPushback`; off in libwebrtc by default).
    pub add_pacing: bool,
}

impl Default for CongestionWindowConfig {
    fn default() -> Self {
        CongestionWindowConfig { queue_size_ms: 350.0, min_rate_bps: 30_000, add_pacing: false }
    }
}

/// libwebrtc's minimum congestion window: two full packets.
const MIN_WINDOW: DataSize = DataSize::from_bytes(3000);

#[derive(Clone, Debug)]
pub struct CongestionWindowPushback {
    config: CongestionWindowConfig,
    window: Option<DataSize>,
    outstanding: DataSize,
    pacer_queue: DataSize,
    ratio: f64,
}

impl CongestionWindowPushback {
    pub fn new(config: CongestionWindowConfig) -> Self {
        CongestionWindowPushback {
            config,
            window: None,
            outstanding: DataSize::ZERO,
            pacer_queue: DataSize::ZERO,
            ratio: 1.0,
        }
    }

    /// New window from the target and the smallest recent per-feedback max RTT.
    pub fn set_window(&mut self, target: DataRate, min_feedback_rtt: TimeDelta) {
        let time = min_feedback_rtt + TimeDelta::from_ms_f64(self.config.queue_size_ms);
        self.window = Some((target * time).max(MIN_WINDOW));
    }

    pub fn set_outstanding(&mut self, in_flight: DataSize) {
        self.outstanding = in_flight;
    }

    pub fn set_pacer_queue(&mut self, queued: DataSize) {
        self.pacer_queue = queued;
    }

    pub fn ratio(&self) -> f64 {
        self.ratio
    }

    /// One update: adapts the ratio to the window's fill and returns the encoder rate.
    pub fn update(&mut self, target: DataRate) -> DataRate {
        let Some(window) = self.window.filter(|w| *w > DataSize::ZERO) else {
            return target;
        };
        let mut total = self.outstanding;
        if self.config.add_pacing {
            total += self.pacer_queue;
        }
        let fill = total / window;
        if fill > 1.5 {
            self.ratio *= 0.9;
        } else if fill > 1.0 {
            self.ratio *= 0.95;
        } else if fill < 0.1 {
            self.ratio = 1.0;
        } else {
            self.ratio = (self.ratio * 1.05).min(1.0);
        }
        let pushed = target.scale(self.ratio);
        let floor = DataRate::from_bps(self.config.min_rate_bps);
        if pushed < floor {
            target.min(floor)
        } else {
            pushed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_back_while_overfilled_and_recovers() {
        let mut p = CongestionWindowPushback::new(CongestionWindowConfig::default());
        let target = DataRate::from_mbps(10);
        assert_eq!(p.update(target), target, "no window yet");
        // Window: 10 Mbps * (50 + 350 ms) = 500 kB.
        p.set_window(target, TimeDelta::from_ms(50));
        p.set_outstanding(DataSize::from_kilobytes(800)); // fill 1.6
        assert_eq!(p.update(target), DataRate::from_mbps(9));
        p.set_outstanding(DataSize::from_kilobytes(600)); // fill 1.2
        assert_eq!(p.update(target), DataRate::from_bps(8_550_000));
        p.set_outstanding(DataSize::from_kilobytes(250)); // fill 0.5
        assert_eq!(p.update(target), DataRate::from_bps(8_977_500));
        p.set_outstanding(DataSize::from_kilobytes(10)); // fill 0.02
        assert_eq!(p.update(target), target);
    }

    #[test]
    fn respects_the_minimum_rate_unless_target_is_lower() {
        let cfg = CongestionWindowConfig::default();
        let mut p = CongestionWindowPushback::new(cfg);
        p.set_window(DataRate::from_kbps(100), TimeDelta::from_ms(50));
        p.set_outstanding(DataSize::from_kilobytes(100));
        for _ in 0..100 {
            p.update(DataRate::from_kbps(100));
        }
        assert_eq!(p.update(DataRate::from_kbps(100)), DataRate::from_kbps(30));
        assert_eq!(p.update(DataRate::from_kbps(20)), DataRate::from_kbps(20));
    }
}
