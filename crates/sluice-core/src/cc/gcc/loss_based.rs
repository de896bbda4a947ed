//! The loss-based side of GCC: libwebrtc M119's `SendSideBandwidthEstimation`
//! (goog_cc/send_side_bandwidth_estimation.cc), whose target is capped by the delay-based
//! estimate. It runs [`LossBasedBweV2`](super::loss_based_v2) once that is ready (enabled by
//! default since libwebrtc commit e04726281c, 2022-12-08, i.e. from M110 on), and before that,
//! or with `loss_based_v2.enabled = false`, the classic rule that was libwebrtc's loss
//! controller up to M109 (`UpdateEstimate` in the same file): +8 % per second of
//! the last second's minimum below 2 % loss, hold between 2 % and 10 %, x (1 - loss / 2)
//! above, at most once per 300 ms + RTT. Also the 2 s start phase that trusts the delay-based
//! estimate while no loss is reported, and the RTT back-off when feedback stops.

use super::loss_based_v2::{LossBasedBweV2, LossBasedBweV2Config, LossBasedState};
use crate::cc::PacketResult;
use crate::units::{DataRate, TimeDelta, Timestamp};
use std::collections::VecDeque;

/// Window of the minimum-rate history used for increases (libwebrtc kBweIncreaseInterval).
pub const INCREASE_INTERVAL: TimeDelta = TimeDelta::from_secs(1);
/// Minimum spacing of loss decreases, plus one RTT (libwebrtc kBweDecreaseInterval).
pub const DECREASE_INTERVAL: TimeDelta = TimeDelta::from_ms(300);
/// During this time after the first loss report, with no loss, the delay-based estimate is
/// trusted (libwebrtc kStartPhase).
pub const START_PHASE: TimeDelta = TimeDelta::from_secs(2);
/// Loss reports with fewer packets are accumulated (libwebrtc kLimitNumPackets).
pub const LIMIT_NUM_PACKETS: u64 = 20;
/// Loss fraction thresholds (libwebrtc 2 % and 10 %).
pub const LOW_LOSS: f64 = 0.02;
/// The upper loss fraction threshold: above it the rate is cut (libwebrtc 10 %; see
/// [`LOW_LOSS`]).
pub const HIGH_LOSS: f64 = 0.10;
/// Loss reports older than this are ignored (libwebrtc 1.2 * kMaxRtcpFeedbackInterval 5 s).
pub const LOSS_REPORT_TIMEOUT: TimeDelta = TimeDelta::from_ms(6000);
/// RTT back-off: above this corrected RTT (libwebrtc 3 s) the rate drops by
/// [`RTT_BACKOFF_FACTOR`] once per [`RTT_BACKOFF_INTERVAL`], not below [`RTT_BACKOFF_FLOOR`].
pub const RTT_BACKOFF_LIMIT: TimeDelta = TimeDelta::from_secs(3);
/// Factor of each RTT back-off step (libwebrtc's `RttBasedBackoff` `drop_fraction`, 0.8).
pub const RTT_BACKOFF_FACTOR: f64 = 0.8;
/// Minimum spacing of RTT back-off steps (`drop_interval`, 1 s).
pub const RTT_BACKOFF_INTERVAL: TimeDelta = TimeDelta::from_secs(1);
/// The RTT back-off does not go below this rate (`bandwidth_floor`, 5 kbps).
pub const RTT_BACKOFF_FLOOR: DataRate = DataRate::from_kbps(5);

/// The loss-based side of GCC, libwebrtc M119's `SendSideBandwidthEstimation` (see the
/// module documentation).
#[derive(Clone, Debug)]
pub struct LossBasedControl {
    min_rate: DataRate,
    max_rate: DataRate,
    current: DataRate,
    delay_based_limit: DataRate,
    /// Loss fraction in 1/256 units, as RTCP carries it.
    last_fraction_loss: u8,
    lost_since_update: u64,
    expected_since_update: u64,
    has_decreased_since_last_loss: bool,
    first_report_time: Option<Timestamp>,
    last_loss_report: Option<Timestamp>,
    time_last_decrease: Option<Timestamp>,
    min_history: VecDeque<(Timestamp, DataRate)>,
    rtt: TimeDelta,
    // RTT back-off inputs.
    last_propagation_rtt: TimeDelta,
    last_propagation_rtt_update: Option<Timestamp>,
    last_packet_sent: Option<Timestamp>,
    /// LossBasedBweV2 (M119: enabled).
    v2: LossBasedBweV2,
    /// The state of the last v2 result used (`loss_based_state_`).
    state: LossBasedState,
}

impl LossBasedControl {
    /// A controller at `start` (clamped to `min_rate` and `max_rate`), with LossBasedBweV2 built
    /// from `v2_config`.
    pub fn new(
        min_rate: DataRate,
        max_rate: DataRate,
        start: DataRate,
        v2_config: LossBasedBweV2Config,
    ) -> Self {
        let mut v2 = LossBasedBweV2::new(v2_config);
        // SendSideBandwidthEstimation's floor (kCongestionControllerMinBitrate, 5 kbps).
        v2.set_min_max_bitrate(min_rate.max(DataRate::from_kbps(5)), max_rate);
        LossBasedControl {
            min_rate,
            max_rate,
            current: start.clamp(min_rate, max_rate),
            delay_based_limit: DataRate::INFINITY,
            last_fraction_loss: 0,
            lost_since_update: 0,
            expected_since_update: 0,
            has_decreased_since_last_loss: false,
            first_report_time: None,
            last_loss_report: None,
            time_last_decrease: None,
            min_history: VecDeque::new(),
            rtt: TimeDelta::from_ms(200),
            last_propagation_rtt: TimeDelta::ZERO,
            last_propagation_rtt_update: None,
            last_packet_sent: None,
            v2,
            state: LossBasedState::DelayBasedEstimate,
        }
    }

    /// The LossBasedBweV2 estimator (for its debug state).
    pub fn v2(&self) -> &LossBasedBweV2 {
        &self.v2
    }
    /// The state of the last LossBasedBweV2 result in use.
    pub fn state(&self) -> LossBasedState {
        self.state
    }

    /// The acknowledged rate, when there is one (`SetAcknowledgedRate`).
    pub fn set_acknowledged_rate(&mut self, rate: DataRate) {
        if self.v2.is_enabled() {
            self.v2.set_acknowledged_bitrate(rate);
        }
    }

    /// One transport-feedback report for LossBasedBweV2 (`UpdateLossBasedEstimator`): all its
    /// packets, lost ones included, the report's probe result and whether the sender is in
    /// ALR; then the target is updated.
    pub fn update_loss_based_estimator(
        &mut self,
        packets: &[PacketResult],
        probe: Option<DataRate>,
        in_alr: bool,
        now: Timestamp,
    ) {
        if !self.v2.is_enabled() {
            return;
        }
        self.v2.set_probe_bitrate(probe);
        self.v2.update_bandwidth_estimate(packets, self.delay_based_limit, in_alr, now);
        self.update_estimate(now);
    }

    /// The loss-based target (already capped by the delay-based estimate).
    pub fn target(&self) -> DataRate {
        self.current
    }
    /// The last loss report's loss fraction, in [0, 1) (in steps of 1/256, as RTCP carries it).
    pub fn fraction_loss(&self) -> f64 {
        f64::from(self.last_fraction_loss) / 256.0
    }
    /// The RTT added to the loss decrease interval; a non-positive one is ignored.
    pub fn set_rtt(&mut self, rtt: TimeDelta) {
        if rtt > TimeDelta::ZERO {
            self.rtt = rtt;
        }
    }
    /// The latest propagation RTT from transport feedback.
    pub fn propagation_rtt(&self) -> TimeDelta {
        self.last_propagation_rtt
    }
    /// Propagation RTT as seen by transport feedback, for the RTT back-off.
    pub fn update_propagation_rtt(&mut self, now: Timestamp, rtt: TimeDelta) {
        self.last_propagation_rtt = rtt;
        self.last_propagation_rtt_update = Some(now);
    }
    /// A packet was sent at `now` (the RTT back-off counts time without feedback only while
    /// packets are sent).
    pub fn on_packet_sent(&mut self, now: Timestamp) {
        self.last_packet_sent = Some(now);
    }

    fn upper_limit(&self) -> DataRate {
        self.delay_based_limit.min(self.max_rate)
    }

    fn update_target(&mut self, rate: DataRate) {
        self.current = rate.min(self.upper_limit()).max(self.min_rate);
    }

    /// Sets the rate directly (probe results), clearing the min history.
    pub fn set_send_bitrate(&mut self, rate: DataRate) {
        self.update_target(rate);
        self.min_history.clear();
    }

    /// The delay-based estimate, which caps the target (`UpdateDelayBasedEstimate`; zero: no
    /// cap; `now` is not used).
    pub fn update_delay_based_estimate(&mut self, now: Timestamp, rate: DataRate) {
        self.delay_based_limit = if rate == DataRate::ZERO { DataRate::INFINITY } else { rate };
        let _ = now;
        self.update_target(self.current);
    }

    /// Loss counts from transport feedback (libwebrtc aggregates them per second).
    pub fn update_packets_lost(&mut self, lost: u64, expected: u64, now: Timestamp) {
        if self.first_report_time.is_none() {
            self.first_report_time = Some(now);
        }
        if expected == 0 {
            return;
        }
        let total_expected = self.expected_since_update + expected;
        if total_expected < LIMIT_NUM_PACKETS {
            self.expected_since_update = total_expected;
            self.lost_since_update += lost;
            return;
        }
        self.has_decreased_since_last_loss = false;
        let lost_q8 = (self.lost_since_update + lost) << 8;
        self.last_fraction_loss = (lost_q8 / total_expected).min(255) as u8;
        self.lost_since_update = 0;
        self.expected_since_update = 0;
        self.last_loss_report = Some(now);
        self.update_estimate(now);
    }

    fn in_start_phase(&self, now: Timestamp) -> bool {
        match self.first_report_time {
            None => true,
            Some(t) => now - t < START_PHASE,
        }
    }

    /// Whether the RTT back-off is on (libwebrtc `IsRttAboveLimit`).
    pub fn is_rtt_above_limit(&self, now: Timestamp) -> bool {
        self.corrected_rtt(now) > RTT_BACKOFF_LIMIT
    }

    fn corrected_rtt(&self, now: Timestamp) -> TimeDelta {
        let Some(upd) = self.last_propagation_rtt_update else {
            return TimeDelta::ZERO;
        };
        let since_rtt = now.saturating_since(upd);
        // Time without feedback only counts while packets are being sent.
        let since_sent =
            self.last_packet_sent.map(|s| now.saturating_since(s)).unwrap_or(since_rtt);
        let correction = (since_rtt - since_sent).max(TimeDelta::ZERO);
        correction + self.last_propagation_rtt
    }

    fn update_min_history(&mut self, now: Timestamp) {
        // Drop entries older than the increase interval (+1 ms slack for ms rounding).
        while let Some(&(t, _)) = self.min_history.front() {
            if now - t + TimeDelta::from_ms(1) > INCREASE_INTERVAL {
                self.min_history.pop_front();
            } else {
                break;
            }
        }
        // Sliding-window minimum.
        while let Some(&(_, r)) = self.min_history.back() {
            if self.current <= r {
                self.min_history.pop_back();
            } else {
                break;
            }
        }
        self.min_history.push_back((now, self.current));
    }

    /// Periodic update (every process interval) and after every loss report.
    pub fn update_estimate(&mut self, now: Timestamp) {
        if self.corrected_rtt(now) > RTT_BACKOFF_LIMIT {
            let due = self.time_last_decrease.is_none_or(|t| now - t >= RTT_BACKOFF_INTERVAL);
            if due && self.current > RTT_BACKOFF_FLOOR {
                self.time_last_decrease = Some(now);
                let r = self.current.scale(RTT_BACKOFF_FACTOR).max(RTT_BACKOFF_FLOOR);
                self.update_target(r);
                return;
            }
            self.update_target(self.current);
            return;
        }
        // Trust the delay-based estimate in the start phase if no loss has been seen.
        if self.last_fraction_loss == 0
            && self.in_start_phase(now)
            && !self.v2.ready_to_use_in_start_phase()
        {
            let mut r = self.current;
            if self.delay_based_limit.is_finite() {
                r = r.max(self.delay_based_limit);
            }
            if r != self.current {
                self.min_history.clear();
                self.min_history.push_back((now, self.current));
                self.update_target(r);
                return;
            }
        }
        self.update_min_history(now);
        let Some(last_report) = self.last_loss_report else {
            self.update_target(self.current);
            return;
        };
        if self.v2.is_ready() {
            let result = self.v2.result();
            self.state = result.state;
            self.update_target(result.bandwidth_estimate);
            return;
        }
        if now - last_report < LOSS_REPORT_TIMEOUT {
            let loss = self.fraction_loss();
            if loss <= LOW_LOSS {
                // +8 % of the minimum over the last second, + 1 kbps.
                let min = self.min_history.front().map(|&(_, r)| r).unwrap_or(self.current);
                let r = DataRate::from_bps((min.as_bps() as f64 * 1.08 + 0.5) as i64)
                    + DataRate::from_kbps(1);
                self.update_target(r);
                return;
            } else if loss > HIGH_LOSS {
                let due =
                    self.time_last_decrease.is_none_or(|t| now - t >= DECREASE_INTERVAL + self.rtt);
                if !self.has_decreased_since_last_loss && due {
                    self.time_last_decrease = Some(now);
                    // rate * (1 - 0.5 * loss), loss in 1/256 units.
                    let r = DataRate::from_bps_f64(
                        self.current.as_bps() as f64 * (512.0 - f64::from(self.last_fraction_loss))
                            / 512.0,
                    );
                    self.has_decreased_since_last_loss = true;
                    self.update_target(r);
                    return;
                }
            }
            // 2-10 %: hold.
        }
        self.update_target(self.current);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_ms(ms)
    }
    fn kbps(k: i64) -> DataRate {
        DataRate::from_kbps(k)
    }
    /// The classic rule alone (LossBasedBweV2 disabled, as up to M109).
    fn ctl() -> LossBasedControl {
        let v2 = LossBasedBweV2Config { enabled: false, ..Default::default() };
        LossBasedControl::new(kbps(5), DataRate::from_mbps(200), kbps(1000), v2)
    }

    #[test]
    fn start_phase_trusts_delay_based_without_loss() {
        let mut c = ctl();
        // A loss-free first report already increases: 1.08 * 1000 + 1 = 1081 kbps.
        c.update_packets_lost(0, 100, t(0));
        assert_eq!(c.target(), kbps(1081));
        c.update_delay_based_estimate(t(100), kbps(3000));
        // Capped at the delay-based estimate but not raised by it until the next update.
        assert_eq!(c.target(), kbps(1081));
        c.update_estimate(t(100));
        assert_eq!(c.target(), kbps(3000));
        // After the start phase the delay-based estimate only caps: 1.08 * 3000 + 1.
        c.update_delay_based_estimate(t(2100), kbps(9000));
        c.update_estimate(t(2100));
        assert_eq!(c.target(), kbps(3241));
    }

    #[test]
    fn low_loss_increases_8_percent_of_min_over_last_second() {
        let mut c = ctl();
        c.update_packets_lost(0, 100, t(0)); // history (0, 1000) -> 1081
                                             // The 1000 kbps entry is still within the last second: stays 1.08 * 1000 + 1.
        c.update_estimate(t(500));
        assert_eq!(c.target(), kbps(1081));
        // At 1000 ms (with the 1 ms slack) it has aged out: 1.08 * 1081 + 1 = 1168.48 kbps.
        c.update_estimate(t(1000));
        assert_eq!(c.target(), DataRate::from_bps(1_168_480));
        // 1 % loss (2 of 200 -> 2/256) is <= 2 %: increase from the min (1081) again.
        c.update_packets_lost(2, 200, t(1100));
        assert!(c.fraction_loss() > 0.0);
        assert_eq!(c.target(), DataRate::from_bps(1_168_480));
    }

    #[test]
    fn mid_loss_holds_and_high_loss_decreases_once() {
        let mut c = ctl();
        c.update_packets_lost(5, 100, t(0)); // 5 % -> 12/256: hold
        assert_eq!(c.target(), kbps(1000));
        c.update_packets_lost(5, 100, t(2500));
        assert_eq!(c.target(), kbps(1000));
        // 25 % loss: 64/256 -> rate * (512 - 64) / 512 = 875 kbps.
        c.update_packets_lost(25, 100, t(3000));
        assert_eq!(c.target(), kbps(875));
        // No second decrease for the same report, nor within 300 ms + RTT of the last one.
        c.update_estimate(t(3100));
        assert_eq!(c.target(), kbps(875));
        c.update_packets_lost(25, 100, t(3400)); // 400 < 500 ms
        assert_eq!(c.target(), kbps(875));
        c.update_packets_lost(25, 100, t(3500));
        assert_eq!(c.target(), DataRate::from_bps(765_625));
    }

    #[test]
    fn small_reports_are_accumulated() {
        let mut c = ctl();
        c.update_packets_lost(0, 100, t(0));
        c.update_packets_lost(5, 10, t(2500));
        assert_eq!(c.fraction_loss(), 0.0);
        c.update_packets_lost(0, 10, t(2600)); // 5/20 = 64/256
        assert_eq!(c.fraction_loss(), 0.25);
    }

    #[test]
    fn rtt_backoff_when_feedback_stops() {
        let mut c = ctl();
        c.update_propagation_rtt(t(0), TimeDelta::from_ms(100));
        c.on_packet_sent(t(5000));
        c.update_estimate(t(5000)); // corrected 5 s + 100 ms > 3 s
        assert_eq!(c.target(), kbps(800));
        c.update_estimate(t(5500));
        assert_eq!(c.target(), kbps(800));
        c.on_packet_sent(t(6000));
        c.update_estimate(t(6000));
        assert_eq!(c.target(), kbps(640));
    }
}
