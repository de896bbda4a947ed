//! Acknowledged (throughput) bitrate. Two estimators from libwebrtc's goog_cc:
//! the robust throughput estimator (a window of recent packets; M119's default) and the
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
    /// Adds `amount` bytes received at `at` (libwebrtc's `BitrateEstimator::Update`): each
    /// closed window (500 ms before the first estimate, then 150 ms) gives a sample for the
    /// Bayesian update.
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

    /// The estimate, `None` before the first window has closed.
    pub fn bitrate(&self) -> Option<DataRate> {
        self.estimate_kbps.map(|k| DataRate::from_bps_f64(k * 1e3))
    }
    /// The estimate's variance (libwebrtc's `bitrate_estimate_var_`).
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
    /// libwebrtc's robust throughput estimator (M119's default,
    /// `WebRTC-Bwe-RobustThroughputEstimatorSettings` enabled): the rate over a window of
    /// recent packets, the lower of the send and receive rates.
    #[default]
    Robust,
    /// libwebrtc's older Bayesian `BitrateEstimator`. It trusts upward samples very little
    /// (uncertainty scales with |estimate - sample| / estimate), so after start-up probing it
    /// can lag the real throughput by seconds, and the first over-use then cuts the target to
    /// 0.85 x that stale rate.
    Bayesian,
}

/// libwebrtc M119's `RobustThroughputEstimator` (goog_cc/robust_throughput_estimator.cc, with
/// the defaults of `RobustThroughputEstimatorSettings` in
/// acknowledged_bitrate_estimator_interface.h): a window of received packets, sorted by
/// arrival, holding at least `WINDOW_PACKETS` and at least `MIN_WINDOW` of arrivals, never
/// more than `MAX_WINDOW_PACKETS` or `MAX_WINDOW`. The rate is the lower of
/// * the receive rate: bytes except the first arrival's over the arrival span, with the
///   largest gap between arrivals replaced by the second largest (a delivery pause followed
///   by a burst does not pull the estimate down), and
/// * the send rate: bytes except the last sent packet's over the send span, leaving out
///   packets sent before the newest send time already discarded from the window (reordered
///   ones); with fewer than `REQUIRED_PACKETS` such packets, the receive rate alone.
///
/// Spans are at least 1 ms. Arrivals more than 1 s older than the newest clear the window
/// (severe reordering or a clock jump). Audio-without-transport-sequence accounting
/// (`prior_unacked_data`) does not exist here: every packet has transport feedback.
#[derive(Clone, Debug, Default)]
pub struct RobustThroughputEstimator {
    /// (send, receive, size), sorted by receive time.
    window: VecDeque<(Timestamp, Timestamp, DataSize)>,
    latest_discarded_send_time: Option<Timestamp>,
    /// The rate for the current window (it only changes with a report).
    rate: Option<DataRate>,
}

/// `window_packets` (M119: 20).
const WINDOW_PACKETS: usize = 20;
/// `max_window_packets` (M119: 500).
const MAX_WINDOW_PACKETS: usize = 500;
/// `min_window_duration` (M119: 1 s).
const MIN_WINDOW: TimeDelta = TimeDelta::from_ms(1000);
/// `max_window_duration` (M119: 5 s).
const MAX_WINDOW: TimeDelta = TimeDelta::from_ms(5000);
/// `required_packets` (M119: 10).
const REQUIRED_PACKETS: usize = 10;
/// Reordering beyond this clears the window (`kMaxReorderingTime`).
const MAX_REORDERING: TimeDelta = TimeDelta::from_ms(1000);

impl RobustThroughputEstimator {
    /// One feedback report's received packets (`IncomingPacketFeedbackVector`); old packets
    /// leave the window after the whole report is in, as in libwebrtc.
    pub fn on_packets(
        &mut self,
        packets: impl IntoIterator<Item = (Timestamp, Timestamp, DataSize)>,
    ) {
        for (send, receive, size) in packets {
            self.window.push_back((send, receive, size));
            // Keep the window sorted by arrival when feedback was reordered.
            let mut i = self.window.len() - 1;
            while i > 0 && self.window[i].1 < self.window[i - 1].1 {
                self.window.swap(i, i - 1);
                i -= 1;
            }
            let newest = self.window.back().map_or(receive, |p| p.1);
            if newest - receive > MAX_REORDERING {
                self.window.clear();
                self.latest_discarded_send_time = None;
            }
        }
        while self.first_packet_outside_window() {
            if let Some((send, _, _)) = self.window.pop_front() {
                self.latest_discarded_send_time =
                    Some(self.latest_discarded_send_time.map_or(send, |t| t.max(send)));
            }
        }
        self.rate = self.compute_rate();
    }

    fn first_packet_outside_window(&self) -> bool {
        let (Some(front), Some(back)) = (self.window.front(), self.window.back()) else {
            return false;
        };
        let duration = back.1 - front.1;
        self.window.len() > MAX_WINDOW_PACKETS
            || duration > MAX_WINDOW
            || (self.window.len() > WINDOW_PACKETS && duration > MIN_WINDOW)
    }

    /// The rate of the current window, `None` while it holds fewer than `REQUIRED_PACKETS` (10)
    /// packets.
    pub fn bitrate(&self) -> Option<DataRate> {
        self.rate
    }

    fn compute_rate(&self) -> Option<DataRate> {
        if self.window.is_empty() || self.window.len() < REQUIRED_PACKETS {
            return None;
        }
        let (mut largest_gap, mut second_gap) = (TimeDelta::ZERO, TimeDelta::ZERO);
        for (a, b) in self.window.iter().zip(self.window.iter().skip(1)) {
            let gap = b.1 - a.1;
            if gap > largest_gap {
                second_gap = largest_gap;
                largest_gap = gap;
            } else if gap > second_gap {
                second_gap = gap;
            }
        }
        let mut first_recv: Option<(Timestamp, DataSize)> = None;
        // From the window's own arrivals, not 0 (libwebrtc starts at minus infinity): arrivals
        // are in the receiver's clock, which may be far behind the sender's (negative times;
        // the span from 0 made the rate tiny and held GCC's target at its floor).
        let mut last_recv = self.window.iter().next()?.1;
        let mut recv_size = DataSize::ZERO;
        let mut first_send = Timestamp::INFINITY;
        let mut last_send: Option<(Timestamp, DataSize)> = None;
        let mut send_size = DataSize::ZERO;
        let mut sent_packets = 0usize;
        for &(send, receive, size) in &self.window {
            if first_recv.is_none_or(|(t, _)| receive < t) {
                first_recv = Some((receive, size));
            }
            last_recv = last_recv.max(receive);
            recv_size += size;
            if self.latest_discarded_send_time.is_some_and(|t| send < t) {
                continue; // reordered: its send time would stretch the send span
            }
            if last_send.is_none_or(|(t, _)| send > t) {
                last_send = Some((send, size));
            }
            first_send = first_send.min(send);
            send_size += size;
            sent_packets += 1;
        }
        let (first_recv_time, first_recv_size) = first_recv?;
        // N packets span N - 1 intervals: the first arrival's bytes were on the link before
        // the span, the last send's after it.
        recv_size -= first_recv_size;
        let recv_duration =
            ((last_recv - first_recv_time) - largest_gap + second_gap).max(TimeDelta::from_ms(1));
        let recv_rate = recv_size / recv_duration;
        let Some((last_send_time, last_send_size)) = last_send else {
            return Some(recv_rate);
        };
        if sent_packets < REQUIRED_PACKETS {
            return Some(recv_rate);
        }
        send_size -= last_send_size;
        let send_duration = (last_send_time - first_send).max(TimeDelta::from_ms(1));
        Some((send_size / send_duration).min(recv_rate))
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
    /// An estimator using the default throughput estimator ([`AckedRateEstimator::Robust`]).
    pub fn new() -> Self {
        Self::default()
    }
    /// An estimator using the `kind` of throughput estimator.
    pub fn with_kind(kind: AckedRateEstimator) -> Self {
        AcknowledgedBitrateEstimator { kind, ..Self::default() }
    }
    /// The application-limited region ended at `t`: the first packet sent after it makes the
    /// Bayesian estimator expect a fast rate change (libwebrtc's `SetAlrEndedTime`).
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
        }
        self.robust.on_packets(
            packets
                .iter()
                .filter_map(|p| p.receive_time.map(|rx| (p.sent.send_time, rx, p.sent.size))),
        );
    }
    /// The acknowledged rate from the configured estimator, `None` before it has one.
    pub fn bitrate(&self) -> Option<DataRate> {
        match self.kind {
            AckedRateEstimator::Robust => self.robust.bitrate(),
            AckedRateEstimator::Bayesian => self.estimator.bitrate(),
        }
    }
    /// The Bayesian estimator, which is fed whichever estimator is configured.
    pub fn estimator(&self) -> &BitrateEstimator {
        &self.estimator
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packets of `size` bytes sent every `send_gap_us` and received `delay_us` later, spaced
    /// `recv_gap_us` apart, from time `t0_us`, in feedback reports of 10 packets.
    fn feed(
        r: &mut RobustThroughputEstimator,
        n: i64,
        t0_us: i64,
        send_gap_us: i64,
        recv_gap_us: i64,
        size: i64,
    ) -> i64 {
        let pkts: Vec<_> = (0..n)
            .map(|i| {
                (
                    Timestamp::from_us(t0_us + i * send_gap_us),
                    Timestamp::from_us(t0_us + 20_000 + i * recv_gap_us),
                    DataSize::from_bytes(size),
                )
            })
            .collect();
        for chunk in pkts.chunks(10) {
            r.on_packets(chunk.iter().copied());
        }
        t0_us + n * send_gap_us
    }

    #[test]
    fn robust_estimator_needs_ten_packets_and_keeps_one_second() {
        let mut r = RobustThroughputEstimator::default();
        // 1200 B every 3.2 ms = 3 Mbps.
        feed(&mut r, 9, 0, 3200, 3200, 1200);
        assert_eq!(r.bitrate(), None, "fewer than required_packets (10)");
        let mut r = RobustThroughputEstimator::default();
        feed(&mut r, 1000, 0, 3200, 3200, 1200);
        let rate = r.bitrate().unwrap().as_mbps_f64();
        assert!((rate - 3.0).abs() < 1e-3, "{rate}");
        // The window holds the arrivals of the last second: 313 packets 3.2 ms apart.
        assert_eq!(r.window.len(), 1_000_000 / 3200 + 1);
    }

    #[test]
    fn robust_estimator_follows_a_jump_within_its_one_second_window() {
        // 3 Mbps for 3 s, then 6 Mbps: half a second in, the 1 s window still holds half a
        // second of the old rate (156 + 312 packets over 1 s: 4.5 Mbps); a second in, only
        // the new rate.
        let mut r = RobustThroughputEstimator::default();
        let t = feed(&mut r, 1000, 0, 3200, 3200, 1200);
        let t = feed(&mut r, 312, t, 1600, 1600, 1200);
        let half = r.bitrate().unwrap().as_mbps_f64();
        assert!((half - 4.5).abs() < 0.1, "{half}");
        let t = feed(&mut r, 700, t, 1600, 1600, 1200);
        let full = r.bitrate().unwrap().as_mbps_f64();
        assert!((full - 6.0).abs() < 0.01, "{full}");
        // At 30 Mbps 500 packets (max_window_packets) cover only 160 ms.
        feed(&mut r, 2000, t, 320, 320, 1200);
        assert_eq!(r.window.len(), 500);
        assert!((r.bitrate().unwrap().as_mbps_f64() - 30.0).abs() < 0.01);
    }

    #[test]
    fn robust_estimator_is_the_lower_of_send_and_receive_rates() {
        // Sent at 30 Mbps, spread to 3 Mbps by a bottleneck.
        let mut q = RobustThroughputEstimator::default();
        feed(&mut q, 100, 0, 320, 3200, 1200);
        assert!((q.bitrate().unwrap().as_mbps_f64() - 3.0).abs() < 0.01);
        // Sent at 3 Mbps, arriving in a burst: the send rate bounds it.
        let mut b = RobustThroughputEstimator::default();
        feed(&mut b, 100, 0, 3200, 320, 1200);
        assert!((b.bitrate().unwrap().as_mbps_f64() - 3.0).abs() < 0.01);
    }

    #[test]
    fn robust_estimator_replaces_the_largest_arrival_gap() {
        // 3 Mbps with one 200 ms delivery pause (a cellular link holding packets) followed
        // by the held packets at once: the pause is replaced by the second largest gap, so
        // the estimate stays near the rate instead of dropping by a fifth.
        let mut r = RobustThroughputEstimator::default();
        let mut pkts = Vec::new();
        for i in 0..300i64 {
            let send = i * 3200;
            let mut recv = 20_000 + i * 3200;
            if (100..160).contains(&i) {
                recv = 20_000 + 160 * 3200; // held, then delivered together
            }
            pkts.push((
                Timestamp::from_us(send),
                Timestamp::from_us(recv),
                DataSize::from_bytes(1200),
            ));
        }
        r.on_packets(pkts);
        let rate = r.bitrate().unwrap().as_mbps_f64();
        assert!((rate - 3.0).abs() < 0.05, "{rate}");
    }

    #[test]
    fn robust_estimator_ignores_reordered_send_times_and_clears_on_severe_reordering() {
        let mut r = RobustThroughputEstimator::default();
        let t = feed(&mut r, 1000, 0, 3200, 3200, 1200);
        // A straggler sent 2 s ago arrives now: without the rule its send time would stretch
        // the send span to 3 s and the rate would fall to a third.
        let now = Timestamp::from_us(t + 20_000);
        r.on_packets([(Timestamp::from_us(t - 2_000_000), now, DataSize::from_bytes(1200))]);
        let rate = r.bitrate().unwrap().as_mbps_f64();
        assert!((rate - 3.0).abs() < 0.1, "{rate}");
        // An arrival 1.5 s older than the newest: the window starts over.
        r.on_packets([(now, now - TimeDelta::from_ms(1500), DataSize::from_bytes(1200))]);
        assert!(r.window.len() <= 1 && r.bitrate().is_none());
    }

    #[test]
    fn the_rate_is_the_same_whatever_the_receivers_clock_offset() {
        // Arrival times are in the receiver's clock: only their differences count. A clock
        // 100 s behind (negative arrivals) measured the span from 0 and gave a tiny rate.
        let rate = |offset_us: i64| {
            let mut r = RobustThroughputEstimator::default();
            let pkts: Vec<_> = (0..100)
                .map(|i| {
                    (
                        Timestamp::from_us(i * 3200),
                        Timestamp::from_us(offset_us + 20_000 + i * 3200),
                        DataSize::from_bytes(1200),
                    )
                })
                .collect();
            for chunk in pkts.chunks(10) {
                r.on_packets(chunk.iter().copied());
            }
            r.bitrate().unwrap()
        };
        assert_eq!(rate(-100_000_000), rate(0));
        assert_eq!(rate(-1_000_000), rate(0));
        assert!((rate(0).as_mbps_f64() - 3.0).abs() < 0.05);
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
