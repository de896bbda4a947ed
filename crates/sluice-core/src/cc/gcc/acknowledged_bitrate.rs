//! Acknowledged (throughput) bitrate. Two estimators from libwebrtc's goog_cc:
//! the robust throughput estimator (a window of recent packets; current default) and the
//! Bayesian `BitrateEstimator` over fixed windows of received bytes (notes §1
//! "Acknowledged bitrate"), selectable with `GccConfig::acked_rate_estimator`.

use crate::cc::PacketResult;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// First window until an estimate exists (libwebrtc 500 ms).
pub const INITIAL_WINDOW_MS: i64 = 500;
/// Later windows (libwebrtc 150 ms).
pub const WINDOW_MS: i64 = 150;
/// Sample uncertainty scale (libwebrtc 10).
pub const UNCERTAINTY_SCALE: f64 = 10.0;
/// Initial variance (libwebrtc 50).
pub const INITIAL_VARIANCE: f64 = 50.0;
/// Variance growth per update (libwebrtc 5).
pub const VARIANCE_GROWTH: f64 = 5.0;
/// Variance added when leaving ALR (libwebrtc 200).
pub const ALR_END_VARIANCE: f64 = 200.0;

/// Bayesian estimate of a bitrate from byte counts over windows, in kbps.
#[derive(Clone, Debug)]
pub struct BitrateEstimator {
    sum_bytes: i64,
    current_window_ms: i64,
    prev_time_ms: Option<i64>,
    estimate_kbps: Option<f64>,
    variance: f64,
}

impl Default for BitrateEstimator {
    fn default() -> Self {
        BitrateEstimator {
            sum_bytes: 0,
            current_window_ms: 0,
            prev_time_ms: None,
            estimate_kbps: None,
            variance: INITIAL_VARIANCE,
        }
    }
}

impl BitrateEstimator {
    pub fn update(&mut self, at: Timestamp, amount: DataSize) {
        let window = if self.estimate_kbps.is_none() { INITIAL_WINDOW_MS } else { WINDOW_MS };
        let Some(sample) = self.update_window(at.as_ms(), amount.as_bytes(), window) else {
            return;
        };
        let Some(est) = self.estimate_kbps else {
            self.estimate_kbps = Some(sample);
            return;
        };
        let uncertainty = UNCERTAINTY_SCALE * (est - sample).abs() / est.max(f64::MIN_POSITIVE);
        let sample_var = uncertainty * uncertainty;
        let pred_var = self.variance + VARIANCE_GROWTH;
        let new = (sample_var * est + pred_var * sample) / (sample_var + pred_var);
        self.estimate_kbps = Some(new.max(0.0));
        self.variance = sample_var * pred_var / (sample_var + pred_var);
    }

    fn update_window(&mut self, now_ms: i64, bytes: i64, window_ms: i64) -> Option<f64> {
        if let Some(prev) = self.prev_time_ms {
            if now_ms < prev {
                // Time went backwards: start over.
                self.prev_time_ms = None;
                self.sum_bytes = 0;
                self.current_window_ms = 0;
            }
        }
        if let Some(prev) = self.prev_time_ms {
            self.current_window_ms += now_ms - prev;
            if now_ms - prev > window_ms {
                // A gap longer than a window: drop what was accumulated.
                self.sum_bytes = 0;
                self.current_window_ms %= window_ms;
            }
        }
        self.prev_time_ms = Some(now_ms);
        let mut sample = None;
        if self.current_window_ms >= window_ms {
            sample = Some(8.0 * self.sum_bytes as f64 / window_ms as f64);
            self.current_window_ms -= window_ms;
            self.sum_bytes = 0;
        }
        self.sum_bytes += bytes;
        sample
    }

    pub fn bitrate(&self) -> Option<DataRate> {
        self.estimate_kbps.map(|k| DataRate::from_bps_f64(k * 1e3))
    }
    pub fn variance(&self) -> f64 {
        self.variance
    }
    /// The rate is expected to change quickly (leaving ALR).
    pub fn expect_fast_rate_change(&mut self) {
        self.variance += ALR_END_VARIANCE;
    }
}

/// Which throughput estimator GCC uses for its acknowledged rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AckedRateEstimator {
    /// libwebrtc's robust throughput estimator (the default in current libwebrtc): the
    /// rate over a window of recent packets, the lower of the send and receive rates.
    #[default]
    Robust,
    /// libwebrtc's older Bayesian `BitrateEstimator`. It trusts upward samples very little
    /// (uncertainty scales with |estimate - sample| / estimate), so after start-up probing it
    /// can lag the real throughput by seconds, and the first over-use then cuts the target to
    /// 0.85 x that stale rate.
    Bayesian,
}

/// libwebrtc's `RobustThroughputEstimator`: keeps the received packets of the last
/// `WINDOW_DURATION` (at least `MIN_WINDOW_PACKETS`, at most `MAX_WINDOW_PACKETS`) and
/// reports bytes / max(send span, receive span), excluding the first packet's bytes (its
/// transmission time lies before the span).
#[derive(Clone, Debug, Default)]
pub struct RobustThroughputEstimator {
    window: VecDeque<(Timestamp, Timestamp, DataSize)>, // (send, receive, size)
}

/// libwebrtc's RobustThroughputEstimatorSettings defaults.
const MIN_WINDOW_PACKETS: usize = 20;
const MAX_WINDOW_PACKETS: usize = 500;
const WINDOW_DURATION: TimeDelta = TimeDelta::from_ms(500);

impl RobustThroughputEstimator {
    pub fn on_packet(&mut self, send: Timestamp, receive: Timestamp, size: DataSize) {
        self.window.push_back((send, receive, size));
        let span = |w: &VecDeque<(Timestamp, Timestamp, DataSize)>| match (w.front(), w.back()) {
            (Some(f), Some(b)) => b.1 - f.1,
            _ => TimeDelta::ZERO,
        };
        while self.window.len() > MAX_WINDOW_PACKETS
            || (self.window.len() > MIN_WINDOW_PACKETS && span(&self.window) > WINDOW_DURATION)
        {
            self.window.pop_front();
        }
    }

    pub fn bitrate(&self) -> Option<DataRate> {
        if self.window.len() < MIN_WINDOW_PACKETS {
            return None;
        }
        let (first_send, first_recv) = self
            .window
            .iter()
            .fold((Timestamp::INFINITY, Timestamp::INFINITY), |(s, r), p| (s.min(p.0), r.min(p.1)));
        let (last_send, last_recv) = self
            .window
            .iter()
            .fold((Timestamp::ZERO, Timestamp::ZERO), |(s, r), p| (s.max(p.0), r.max(p.1)));
        let bytes: DataSize = self.window.iter().skip(1).map(|p| p.2).sum();
        let span = (last_send - first_send).max(last_recv - first_recv).max(TimeDelta::from_ms(1));
        Some(bytes / span)
    }
}

/// Feeds received packets (in arrival order) into the configured throughput estimator and
/// handles the end of application-limited periods.
#[derive(Clone, Debug, Default)]
pub struct AcknowledgedBitrateEstimator {
    kind: AckedRateEstimator,
    estimator: BitrateEstimator,
    robust: RobustThroughputEstimator,
    alr_ended_time: Option<Timestamp>,
}

impl AcknowledgedBitrateEstimator {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn with_kind(kind: AckedRateEstimator) -> Self {
        AcknowledgedBitrateEstimator { kind, ..Self::default() }
    }
    pub fn set_alr_ended_time(&mut self, t: Timestamp) {
        self.alr_ended_time = Some(t);
    }
    /// `packets` must be received packets sorted by arrival time.
    pub fn on_packets(&mut self, packets: &[PacketResult]) {
        for p in packets {
            let Some(rx) = p.receive_time else { continue };
            if let Some(end) = self.alr_ended_time {
                if p.sent.send_time > end {
                    self.estimator.expect_fast_rate_change();
                    self.alr_ended_time = None;
                }
            }
            self.estimator.update(rx, p.sent.size);
            self.robust.on_packet(p.sent.send_time, rx, p.sent.size);
        }
    }
    pub fn bitrate(&self) -> Option<DataRate> {
        match self.kind {
            AckedRateEstimator::Robust => self.robust.bitrate(),
            AckedRateEstimator::Bayesian => self.estimator.bitrate(),
        }
    }
    pub fn estimator(&self) -> &BitrateEstimator {
        &self.estimator
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn robust_estimator_tracks_a_rate_jump_within_its_window() {
        // 1200 B every 0.32 ms = 30 Mbps, after 1 s at 3 Mbps (one packet every 3.2 ms).
        let mut r = RobustThroughputEstimator::default();
        let mut t = 0i64;
        for _ in 0..300 {
            r.on_packet(
                Timestamp::from_us(t),
                Timestamp::from_us(t + 20_000),
                DataSize::from_bytes(1200),
            );
            t += 3200;
        }
        let slow = r.bitrate().unwrap().as_mbps_f64();
        assert!((slow - 3.0).abs() < 0.05, "{slow}");
        for _ in 0..1600 {
            r.on_packet(
                Timestamp::from_us(t),
                Timestamp::from_us(t + 20_000),
                DataSize::from_bytes(1200),
            );
            t += 320;
        }
        let fast = r.bitrate().unwrap().as_mbps_f64();
        assert!((fast - 30.0).abs() < 0.5, "{fast}");
        // The lower of send and receive rates: a bottleneck spreading arrivals shows.
        let mut q = RobustThroughputEstimator::default();
        for i in 0..100i64 {
            q.on_packet(
                Timestamp::from_us(i * 320),
                Timestamp::from_us(i * 3200),
                DataSize::from_bytes(1200),
            );
        }
        assert!((q.bitrate().unwrap().as_mbps_f64() - 3.0).abs() < 0.05);
    }

    #[test]
    fn initial_window_then_bayesian_update() {
        let mut e = BitrateEstimator::default();
        // 1000 B every 10 ms = 800 kbps. Windows close on the packet that reaches them; that
        // packet's bytes go to the next window.
        for i in 0..=50 {
            e.update(Timestamp::from_ms(i * 10), DataSize::from_bytes(1000));
        }
        // At 500 ms: 50 packets (0..=490) in 500 ms = 800 kbps.
        assert_eq!(e.bitrate(), Some(DataRate::from_kbps(800)));
        // Next window (150 ms) at half rate: 1000 B every 20 ms, 7.5 packets -> samples below.
        // One window: packets at 520..=640 (7 packets, plus the 500 ms one = 8000 B) closes at
        // 660 ms: sample 8 * 8000 / 150 = 426.67 kbps.
        for k in 1..=8 {
            e.update(Timestamp::from_ms(500 + k * 20), DataSize::from_bytes(1000));
        }
        let sample = 8.0 * 8000.0 / 150.0;
        let unc = 10.0 * (800.0 - sample) / 800.0;
        let sv = unc * unc;
        let pv = 55.0;
        let expect = (sv * 800.0 + pv * sample) / (sv + pv);
        let got = e.bitrate().unwrap().as_kbps_f64();
        assert!((got - expect).abs() < 1e-3, "{got} vs {expect}");
        assert!((e.variance() - sv * pv / (sv + pv)).abs() < 1e-9);
    }

    #[test]
    fn alr_end_adds_variance() {
        let mut e = BitrateEstimator::default();
        e.expect_fast_rate_change();
        assert_eq!(e.variance(), 250.0);
    }
}
