//! AIMD rate control of the delay-based estimate, with the link-capacity estimator.
//! Follows libwebrtc's `AimdRateControl` and `LinkCapacityEstimator` (goog_cc:
//! `aimd_rate_control.cc`, `link_capacity_estimator.cc`).

use crate::cc::BandwidthUsage;
use crate::units::{DataRate, TimeDelta, Timestamp};

/// Multiplicative decrease factor (libwebrtc beta 0.85).
pub const BETA: f64 = 0.85;
/// Multiplicative increase per second (libwebrtc 1.08).
pub const MULTIPLICATIVE_INCREASE: f64 = 1.08;
/// Default RTT before samples (libwebrtc 200 ms).
pub const DEFAULT_RTT: TimeDelta = TimeDelta::from_ms(200);
/// Minimum additive increase (libwebrtc 4000 bps per second).
pub const MIN_NEAR_MAX_INCREASE_BPS_PER_S: f64 = 4000.0;
/// Link-capacity moving-average weight on overuse (libwebrtc 0.05) and on probes (0.5).
pub const CAPACITY_ALPHA_OVERUSE: f64 = 0.05;
/// Link-capacity moving-average weight on probe results (libwebrtc 0.5).
pub const CAPACITY_ALPHA_PROBE: f64 = 0.5;
/// Time after the first throughput sample at which an uninitialised controller adopts it
/// (libwebrtc kInitializationTime).
pub const INITIALIZATION_TIME: TimeDelta = TimeDelta::from_secs(5);

/// Moving estimate of the link capacity in kbps with a normalised variance.
/// Follows libwebrtc's `LinkCapacityEstimator`.
#[derive(Clone, Debug)]
pub struct LinkCapacityEstimator {
    estimate_kbps: Option<f64>,
    /// Normalised variance (kbps), clamped to [0.4, 2.5].
    deviation_kbps: f64,
}

impl Default for LinkCapacityEstimator {
    fn default() -> Self {
        LinkCapacityEstimator { estimate_kbps: None, deviation_kbps: 0.4 }
    }
}

impl LinkCapacityEstimator {
    fn deviation_estimate_kbps(&self) -> f64 {
        // Standard deviation in kbps: sqrt(normalised variance * estimate).
        (self.deviation_kbps * self.estimate_kbps.unwrap_or(0.0)).sqrt()
    }
    /// Estimate + 3 sigma, infinite without an estimate.
    pub fn upper_bound(&self) -> DataRate {
        match self.estimate_kbps {
            Some(e) => DataRate::from_bps_f64((e + 3.0 * self.deviation_estimate_kbps()) * 1e3),
            None => DataRate::INFINITY,
        }
    }
    /// Estimate - 3 sigma (at least 0), zero without an estimate.
    pub fn lower_bound(&self) -> DataRate {
        match self.estimate_kbps {
            Some(e) => {
                DataRate::from_bps_f64(((e - 3.0 * self.deviation_estimate_kbps()) * 1e3).max(0.0))
            }
            None => DataRate::ZERO,
        }
    }
    /// Forgets the estimate (the normalised variance is kept).
    pub fn reset(&mut self) {
        self.estimate_kbps = None;
    }
    /// Folds in the acknowledged rate at an over-use (weight [`CAPACITY_ALPHA_OVERUSE`]).
    pub fn on_overuse_detected(&mut self, acked: DataRate) {
        self.update(acked, CAPACITY_ALPHA_OVERUSE);
    }
    /// Folds in a probe result (weight [`CAPACITY_ALPHA_PROBE`]).
    pub fn on_probe_rate(&mut self, probe: DataRate) {
        self.update(probe, CAPACITY_ALPHA_PROBE);
    }
    fn update(&mut self, sample: DataRate, alpha: f64) {
        let s = sample.as_kbps_f64();
        let e = match self.estimate_kbps {
            None => s,
            Some(e) => (1.0 - alpha) * e + alpha * s,
        };
        self.estimate_kbps = Some(e);
        let norm = e.max(1.0);
        let err = e - s;
        self.deviation_kbps = (1.0 - alpha) * self.deviation_kbps + alpha * err * err / norm;
        self.deviation_kbps = self.deviation_kbps.clamp(0.4, 2.5);
    }
    /// Whether there is an estimate.
    pub fn has_estimate(&self) -> bool {
        self.estimate_kbps.is_some()
    }
    /// The link-capacity estimate, `None` without one.
    pub fn estimate(&self) -> Option<DataRate> {
        self.estimate_kbps.map(|e| DataRate::from_bps_f64(e * 1e3))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RateControlState {
    Hold,
    Increase,
    Decrease,
}

/// The AIMD controller of the delay-based estimate.
#[derive(Clone, Debug)]
pub struct AimdRateControl {
    min_rate: DataRate,
    max_rate: DataRate,
    current: DataRate,
    latest_throughput: DataRate,
    link_capacity: LinkCapacityEstimator,
    state: RateControlState,
    time_last_change: Option<Timestamp>,
    time_last_decrease: Option<Timestamp>,
    time_first_throughput: Option<Timestamp>,
    initialized: bool,
    rtt: TimeDelta,
}

impl AimdRateControl {
    /// A controller with a known start rate (so it is initialised, as libwebrtc after
    /// `SetStartBitrate`).
    pub fn new(min_rate: DataRate, max_rate: DataRate, start: DataRate) -> Self {
        let start = start.clamp(min_rate, max_rate);
        AimdRateControl {
            min_rate,
            max_rate,
            current: start,
            latest_throughput: start,
            link_capacity: LinkCapacityEstimator::default(),
            state: RateControlState::Hold,
            time_last_change: None,
            time_last_decrease: None,
            time_first_throughput: None,
            initialized: true,
            rtt: DEFAULT_RTT,
        }
    }

    /// The RTT that sets the decrease interval and the additive increase.
    pub fn set_rtt(&mut self, rtt: TimeDelta) {
        self.rtt = rtt;
    }
    /// The delay-based estimate.
    pub fn estimate(&self) -> DataRate {
        self.current
    }
    /// Whether the estimate is initialised (always, as [`Self::new`] starts from a known rate).
    pub fn valid_estimate(&self) -> bool {
        self.initialized
    }
    /// The link-capacity estimator.
    pub fn link_capacity(&self) -> &LinkCapacityEstimator {
        &self.link_capacity
    }

    fn clamp(&self, r: DataRate) -> DataRate {
        r.clamp(self.min_rate, self.max_rate)
    }

    /// Whether a further decrease is allowed: one RTT (clamped to [10, 200] ms) since the
    /// last change, or the throughput has fallen below half the estimate.
    pub fn time_to_reduce_further(&self, now: Timestamp, throughput: DataRate) -> bool {
        let interval = self.rtt.clamp(TimeDelta::from_ms(10), TimeDelta::from_ms(200));
        match self.time_last_change {
            None => return true,
            Some(t) if now - t >= interval => return true,
            _ => {}
        }
        if self.valid_estimate() {
            return throughput < self.current.scale(0.5);
        }
        false
    }

    /// The check used while overusing before any acknowledged rate exists.
    pub fn initial_time_to_reduce_further(&self, now: Timestamp) -> bool {
        self.valid_estimate()
            && self.time_to_reduce_further(now, self.current / 2 - DataRate::from_bps(1))
    }

    /// Sets the estimate directly (probe results, initial back-off).
    pub fn set_estimate(&mut self, rate: DataRate, now: Timestamp) {
        self.initialized = true;
        let prev = self.current;
        self.current = self.clamp(rate);
        self.time_last_change = Some(now);
        if self.current < prev {
            self.time_last_decrease = Some(now);
        }
    }

    /// Feeds a probe result into the link-capacity estimate (alpha 0.5 per the notes).
    pub fn on_probe_rate(&mut self, rate: DataRate) {
        self.link_capacity.on_probe_rate(rate);
    }

    /// One detector update with the acknowledged throughput, if known.
    pub fn update(
        &mut self,
        usage: BandwidthUsage,
        throughput: Option<DataRate>,
        now: Timestamp,
    ) -> DataRate {
        if !self.initialized {
            match self.time_first_throughput {
                None => {
                    if throughput.is_some() {
                        self.time_first_throughput = Some(now);
                    }
                }
                Some(t) => {
                    if let (true, Some(tp)) = (now - t > INITIALIZATION_TIME, throughput) {
                        self.current = tp;
                        self.initialized = true;
                    }
                }
            }
        }
        self.change_bitrate(usage, throughput, now);
        self.current
    }

    fn change_state(&mut self, usage: BandwidthUsage, now: Timestamp) {
        match usage {
            BandwidthUsage::Normal => {
                if self.state == RateControlState::Hold {
                    self.time_last_change = Some(now);
                    self.state = RateControlState::Increase;
                }
            }
            BandwidthUsage::Overusing => {
                self.state = RateControlState::Decrease;
            }
            BandwidthUsage::Underusing => {
                self.state = RateControlState::Hold;
            }
        }
    }

    fn change_bitrate(
        &mut self,
        usage: BandwidthUsage,
        throughput: Option<DataRate>,
        now: Timestamp,
    ) {
        let throughput_now = throughput.unwrap_or(self.latest_throughput);
        if let Some(tp) = throughput {
            self.latest_throughput = tp;
        }
        if !self.initialized && usage != BandwidthUsage::Overusing {
            return;
        }
        self.change_state(usage, now);
        let mut new_rate: Option<DataRate> = None;
        match self.state {
            RateControlState::Hold => {}
            RateControlState::Increase => {
                if throughput_now > self.link_capacity.upper_bound() {
                    self.link_capacity.reset();
                }
                let limit = throughput_now.scale(1.5) + DataRate::from_kbps(10);
                if self.current < limit {
                    let inc = if self.link_capacity.has_estimate() {
                        self.additive_increase(now)
                    } else {
                        self.multiplicative_increase(now)
                    };
                    new_rate = Some((self.current + inc).min(limit));
                }
                self.time_last_change = Some(now);
            }
            RateControlState::Decrease => {
                let mut decreased = throughput_now.scale(BETA);
                if decreased > DataRate::from_kbps(5) {
                    decreased -= DataRate::from_kbps(5);
                }
                if decreased > self.current {
                    if let Some(cap) = self.link_capacity.estimate() {
                        decreased = cap.scale(BETA);
                    }
                }
                if decreased < self.current {
                    new_rate = Some(decreased);
                }
                if throughput_now < self.link_capacity.lower_bound() {
                    self.link_capacity.reset();
                }
                self.initialized = true;
                self.link_capacity.on_overuse_detected(throughput_now);
                self.state = RateControlState::Hold;
                self.time_last_change = Some(now);
                self.time_last_decrease = Some(now);
            }
        }
        self.current = self.clamp(new_rate.unwrap_or(self.current));
    }

    fn multiplicative_increase(&self, now: Timestamp) -> DataRate {
        let mut alpha = MULTIPLICATIVE_INCREASE;
        if let Some(t) = self.time_last_change {
            let dt = (now - t).as_secs_f64().clamp(0.0, 1.0);
            alpha = alpha.powf(dt);
        }
        self.current.scale(alpha - 1.0).max(DataRate::from_bps(1000))
    }

    /// Additive increase rate near the capacity: about one average packet per response time
    /// (30 fps frames of <= 1200 B packets), at least 4 kbps per second.
    pub fn near_max_increase_bps_per_s(&self) -> f64 {
        let frame_size = self.current * TimeDelta::from_us(1_000_000 / 30);
        let packets_per_frame = (frame_size.as_bytes_f64() / 1200.0).ceil().max(1.0);
        let avg_packet_bits = frame_size.as_bits() as f64 / packets_per_frame;
        // Response time per the notes: 2 * (RTT + 100 ms).
        let response_s = 2.0 * (self.rtt + TimeDelta::from_ms(100)).as_secs_f64();
        (avg_packet_bits / response_s).max(MIN_NEAR_MAX_INCREASE_BPS_PER_S)
    }

    fn additive_increase(&self, now: Timestamp) -> DataRate {
        let dt = self.time_last_change.map(|t| (now - t).as_secs_f64()).unwrap_or(0.0);
        DataRate::from_bps_f64(self.near_max_increase_bps_per_s() * dt.max(0.0))
    }

    /// Size-independent helper for tests: average packet size used by the additive increase.
    #[cfg(test)]
    fn avg_packet_size(&self) -> crate::units::DataSize {
        let frame_size = self.current * TimeDelta::from_us(1_000_000 / 30);
        let packets = (frame_size.as_bytes_f64() / 1200.0).ceil().max(1.0);
        crate::units::DataSize::from_bytes((frame_size.as_bytes_f64() / packets).round() as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::DataSize;
    use BandwidthUsage::*;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_ms(ms)
    }
    fn kbps(k: i64) -> DataRate {
        DataRate::from_kbps(k)
    }

    fn aimd(start_kbps: i64) -> AimdRateControl {
        AimdRateControl::new(kbps(5), DataRate::from_mbps(200), kbps(start_kbps))
    }

    #[test]
    fn decrease_is_beta_times_acked_minus_5kbps() {
        let mut a = aimd(1000);
        let r = a.update(Overusing, Some(kbps(800)), t(0));
        // 0.85 * 800 - 5 = 675 kbps.
        assert_eq!(r, kbps(675));
        // Back to Hold; a second overuse within the RTT-based interval needs the throughput
        // to be below half the estimate.
        assert!(!a.time_to_reduce_further(t(100), kbps(400)));
        assert!(a.time_to_reduce_further(t(100), kbps(300)));
        assert!(a.time_to_reduce_further(t(200), kbps(600)));
        // The capacity estimate now exists (first sample = 800 kbps).
        assert_eq!(a.link_capacity().estimate(), Some(kbps(800)));
    }

    #[test]
    fn decrease_uses_capacity_when_acked_above_current() {
        let mut a = aimd(1000);
        a.update(Overusing, Some(kbps(800)), t(0)); // current 675, capacity 800
                                                    // Acked 1000: 0.85 * 1000 - 5 = 845 > 675, so use capacity:
                                                    // capacity update happens after: 0.85 * 800 = 680 > 675 -> not applied.
        let r = a.update(Overusing, Some(kbps(1000)), t(500));
        assert_eq!(r, kbps(675));
        // Capacity moved: 0.95 * 800 + 0.05 * 1000 = 810.
        assert_eq!(a.link_capacity().estimate(), Some(kbps(810)));
    }

    #[test]
    fn multiplicative_increase_and_throughput_cap() {
        let mut a = aimd(1000);
        // First Normal: Hold -> Increase with dt = 0 -> +1 kbps minimum.
        assert_eq!(a.update(Normal, Some(kbps(1000)), t(0)), kbps(1001));
        // 500 ms later: 1001 * (1.08^0.5 - 1).
        let r = a.update(Normal, Some(kbps(1000)), t(500));
        let expect = 1_001_000.0 * 1.08f64.powf(0.5);
        assert!((r.as_bps() as f64 - expect).abs() <= 1.0, "{r:?}");
        // dt is capped at 1 s: 3 s later gives at most 8 %.
        let before = r;
        let r = a.update(Normal, Some(kbps(1000)), t(3500));
        assert!((r.as_bps() as f64 - before.as_bps() as f64 * 1.08).abs() <= 1.0);
        // Above 1.5 * throughput + 10 kbps (160 kbps) there is no increase (and no cut).
        let r2 = a.update(Normal, Some(kbps(100)), t(4500));
        assert_eq!(r2, r);
    }

    #[test]
    fn throughput_cap_limits_increase() {
        let mut a = aimd(150);
        a.update(Normal, Some(kbps(100)), t(0)); // 150 < 160: 151 kbps
        let r = a.update(Normal, Some(kbps(100)), t(1000)); // 151 * 1.08 = 163 -> capped 160
        assert_eq!(r, kbps(160));
    }

    #[test]
    fn additive_increase_near_capacity() {
        let mut a = aimd(1000);
        a.update(Overusing, Some(kbps(1000)), t(0)); // 845 kbps, capacity 1000
        a.set_rtt(TimeDelta::from_ms(100));
        // Frame at 845 kbps / 30 = 3520 B (rounded down by integer units) -> 3 packets.
        let frame_bytes = (kbps(845) * TimeDelta::from_us(33_333)).as_bytes();
        assert_eq!(frame_bytes, 3520);
        assert_eq!(a.avg_packet_size(), DataSize::from_bytes(1173));
        // bits per packet / (2 * (0.1 + 0.1) s) = 28160/3/0.4 = 23466.67 bps per second.
        let rate = a.near_max_increase_bps_per_s();
        assert!((rate - 28160.0 / 3.0 / 0.4).abs() < 1e-6, "{rate}");
        a.update(Normal, Some(kbps(1000)), t(100)); // Hold -> Increase, dt 0
        let r = a.update(Normal, Some(kbps(1000)), t(1100)); // 1 s later
        let expect = 845_000.0 + rate;
        assert!((r.as_bps() as f64 - expect).abs() <= 2.0, "{r:?}");
    }

    #[test]
    fn underuse_holds() {
        let mut a = aimd(1000);
        assert_eq!(a.update(Underusing, Some(kbps(1000)), t(0)), kbps(1000));
        assert_eq!(a.update(Underusing, Some(kbps(1000)), t(1000)), kbps(1000));
    }

    #[test]
    fn link_capacity_estimate_bounds_and_reset() {
        let mut c = LinkCapacityEstimator::default();
        assert_eq!(c.upper_bound(), DataRate::INFINITY);
        c.on_overuse_detected(kbps(1000));
        // Variance: 0.95 * 0.4 + 0 = 0.38 -> clamped to 0.4; sigma = sqrt(0.4 * 1000) = 20.
        assert_eq!(c.upper_bound(), kbps(1060));
        assert_eq!(c.lower_bound(), kbps(940));
        c.on_overuse_detected(kbps(2000));
        // Estimate 1050; error -950; var 0.95*0.4 + 0.05*902500/1050 = 43.36 -> 2.5.
        // sigma = sqrt(2.5 * 1050) = 51.235 kbps.
        let sigma = (2.5f64 * 1050.0).sqrt();
        let ub = DataRate::from_bps_f64((1050.0 + 3.0 * sigma) * 1e3);
        assert_eq!(c.upper_bound(), ub);
        // Probe update uses alpha 0.5.
        c.on_probe_rate(kbps(2050));
        assert_eq!(c.estimate(), Some(kbps(1550)));
        // Increase with throughput above the upper bound resets the estimate.
        let mut a = aimd(1000);
        a.update(Overusing, Some(kbps(1000)), t(0));
        assert!(a.link_capacity().has_estimate());
        a.update(Normal, Some(kbps(1100)), t(100));
        assert!(!a.link_capacity().has_estimate());
    }
}
