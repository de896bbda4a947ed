//! Application-limited region (ALR) detector: an interval budget filled at 65 % of the
//! estimate and drained by sent bytes. Follows libwebrtc's `AlrDetector` + `IntervalBudget`
//! (goog_cc: `alr_detector.cc`; `modules/pacing/interval_budget.cc`).

use crate::units::{DataRate, DataSize, Timestamp};

/// Fraction of the estimate the budget grows at (libwebrtc 0.65).
pub const BANDWIDTH_USAGE_RATIO: f64 = 0.65;
/// ALR starts above this budget ratio (libwebrtc 0.80).
pub const START_BUDGET_RATIO: f64 = 0.80;
/// ALR ends below this budget ratio (libwebrtc 0.50).
pub const STOP_BUDGET_RATIO: f64 = 0.50;
/// Budget window (libwebrtc IntervalBudget kWindowMs = 500).
pub const WINDOW_MS: i64 = 500;

/// A leaky budget that may build up under-use (as libwebrtc's `IntervalBudget` with
/// `can_build_up_underuse = true`).
#[derive(Clone, Debug, Default)]
struct IntervalBudget {
    target_kbps: f64,
    max_bytes: f64,
    remaining: f64,
}

impl IntervalBudget {
    fn set_target_kbps(&mut self, kbps: f64) {
        self.target_kbps = kbps;
        self.max_bytes = WINDOW_MS as f64 * kbps / 8.0;
        self.remaining = self.remaining.clamp(-self.max_bytes, self.max_bytes);
    }
    fn increase(&mut self, delta_ms: i64) {
        let bytes = self.target_kbps * delta_ms as f64 / 8.0;
        self.remaining = (self.remaining + bytes).min(self.max_bytes);
    }
    fn use_budget(&mut self, bytes: i64) {
        self.remaining = (self.remaining - bytes as f64).max(-self.max_bytes);
    }
    fn ratio(&self) -> f64 {
        if self.max_bytes <= 0.0 {
            0.0
        } else {
            self.remaining / self.max_bytes
        }
    }
}

/// libwebrtc's `AlrDetector`: in ALR once the budget is over 80 % full, out of it once
/// below 50 %.
#[derive(Clone, Debug, Default)]
pub struct AlrDetector {
    budget: IntervalBudget,
    last_send_ms: Option<i64>,
    alr_started: Option<Timestamp>,
}

impl AlrDetector {
    /// A detector whose budget fills at 65 % of `estimate`.
    pub fn new(estimate: DataRate) -> Self {
        let mut d = AlrDetector::default();
        d.set_estimated_bitrate(estimate);
        d
    }

    /// Sets the budget's fill rate to [`BANDWIDTH_USAGE_RATIO`] of the new estimate.
    pub fn set_estimated_bitrate(&mut self, rate: DataRate) {
        self.budget.set_target_kbps(rate.as_kbps_f64() * BANDWIDTH_USAGE_RATIO);
    }

    /// Records a sent packet. Returns true if the ALR state changed.
    pub fn on_bytes_sent(&mut self, size: DataSize, send_time: Timestamp) -> bool {
        let now_ms = send_time.as_ms();
        let Some(last) = self.last_send_ms else {
            // The first packet only starts the clock.
            self.last_send_ms = Some(now_ms);
            return false;
        };
        let delta_ms = now_ms - last;
        self.last_send_ms = Some(now_ms);
        self.budget.use_budget(size.as_bytes());
        self.budget.increase(delta_ms);
        let r = self.budget.ratio();
        if r > START_BUDGET_RATIO && self.alr_started.is_none() {
            self.alr_started = Some(send_time);
            true
        } else if r < STOP_BUDGET_RATIO && self.alr_started.is_some() {
            self.alr_started = None;
            true
        } else {
            false
        }
    }

    /// When the current application-limited region started, if in one.
    pub fn alr_start_time(&self) -> Option<Timestamp> {
        self.alr_started
    }
    /// The budget's remaining bytes over its maximum, in [-1, 1] (above [`START_BUDGET_RATIO`]:
    /// ALR starts).
    pub fn budget_ratio(&self) -> f64 {
        self.budget.ratio()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enters_and_leaves_alr() {
        // 1 Mbps estimate: budget grows at 650 kbps, max 40625 B.
        let mut d = AlrDetector::new(DataRate::from_mbps(1));
        let pkt = DataSize::from_bytes(1000);
        let mut t = 0;
        d.on_bytes_sent(pkt, Timestamp::from_ms(t));
        // Send 1000 B every 40 ms = 200 kbps (< 650): budget +2250 B per packet.
        // Ratio passes 0.8 (32500 B) after 15 packets.
        let mut entered = None;
        for i in 1..=30 {
            t += 40;
            if d.on_bytes_sent(pkt, Timestamp::from_ms(t)) {
                entered = Some(i);
                break;
            }
        }
        assert_eq!(entered, Some(15));
        assert_eq!(d.alr_start_time(), Some(Timestamp::from_ms(600)));
        // Now send at 2 Mbps: 1000 B every 4 ms = -675 B per packet; ratio must go below 0.5
        // (20312.5 B): from 33750 B that takes 20 packets.
        let mut left = None;
        for i in 1..=100 {
            t += 4;
            if d.on_bytes_sent(pkt, Timestamp::from_ms(t)) {
                left = Some(i);
                break;
            }
        }
        assert_eq!(left, Some(20));
        assert_eq!(d.alr_start_time(), None);
    }
}
