//! Trendline delay-gradient estimator with the adaptive threshold and the over-use detector.
//! Follows libwebrtc's `TrendlineEstimator` (goog_cc: `trendline_estimator.cc`); the
//! time-window variant follows the
//! ACE (200 ms) and MAE (100 ms) forks.
//!
//! MAE's pre-reaction (MAE §5.2, §6.5): with a ratio r, every sample also compares the
//! modified trend m with r x the threshold as it was before this sample's adaptive update, so
//! it fires between r x threshold and the threshold without GCC's over-use gates (10 ms,
//! two samples, a non-falling slope). GCC itself never reads it (MAE §4.2, Fig. 15).

use crate::cc::BandwidthUsage;
use crate::units::{TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Smoothing coefficient of the accumulated delay (libwebrtc 0.9).
pub const SMOOTHING_COEF: f64 = 0.9;
/// Gain applied to the slope (libwebrtc 4.0).
pub const THRESHOLD_GAIN: f64 = 4.0;
/// The slope is scaled by min(deltas, this) (libwebrtc kMinNumDeltas = 60).
pub const MIN_NUM_DELTAS: u32 = 60;
/// Cap of the delta counter (libwebrtc kDeltaCounterMax = 1000).
pub const DELTA_COUNTER_MAX: u32 = 1000;
/// Threshold adaptation rate when |m| >= threshold (libwebrtc k_up).
pub const K_UP: f64 = 0.0087;
/// Threshold adaptation rate when |m| < threshold (libwebrtc k_down).
pub const K_DOWN: f64 = 0.039;
/// Initial threshold (libwebrtc 12.5).
pub const INITIAL_THRESHOLD: f64 = 12.5;
/// Threshold clamp (libwebrtc [6, 600]).
pub const MIN_THRESHOLD: f64 = 6.0;
/// Upper bound of the adaptive threshold (libwebrtc 600; see [`MIN_THRESHOLD`]).
pub const MAX_THRESHOLD: f64 = 600.0;
/// The threshold does not adapt to outliers beyond threshold + 15 (libwebrtc kMaxAdaptOffsetMs).
pub const MAX_ADAPT_OFFSET_MS: f64 = 15.0;
/// Longest time step of one threshold update (libwebrtc kMaxTimeDeltaMs = 100).
pub const MAX_THRESHOLD_TIME_DELTA_MS: f64 = 100.0;
/// Over-use must last this long before it is signalled (libwebrtc 10 ms).
pub const OVERUSE_TIME_THRESHOLD_MS: f64 = 10.0;

/// Which groups the least-squares fit uses.
///
/// Serialised (serde) as an internally tagged object:
/// `{"kind": "packets", "count": 20}` or `{"kind": "time", "window_ms": 200}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "TrendlineWindowRepr", into = "TrendlineWindowRepr")]
pub enum TrendlineWindow {
    /// The last N packet groups (libwebrtc default 20; libwebrtc accepts 10..=200). The fit
    /// starts once N groups have been seen.
    Packets(usize),
    /// Groups whose arrival time is within this span of the newest group (ACE 200 ms, MAE
    /// 100 ms). The fit starts once a group has aged out, i.e. the window has filled once.
    Time(TimeDelta),
    /// The MAE artifact's time window (`trendline_estimator.cc` of its fork): groups older
    /// than the span leave while more than two remain, and the slope is refitted only in an
    /// update in which a group left (otherwise the previous slope is kept).
    TimeMaeCode(TimeDelta),
}

impl Default for TrendlineWindow {
    fn default() -> Self {
        TrendlineWindow::Packets(20)
    }
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum TrendlineWindowRepr {
    Packets { count: usize },
    Time { window_ms: i64 },
    TimeMaeCode { window_ms: i64 },
}

impl From<TrendlineWindowRepr> for TrendlineWindow {
    fn from(r: TrendlineWindowRepr) -> Self {
        match r {
            TrendlineWindowRepr::Packets { count } => TrendlineWindow::Packets(count),
            TrendlineWindowRepr::Time { window_ms } => {
                TrendlineWindow::Time(TimeDelta::from_ms(window_ms))
            }
            TrendlineWindowRepr::TimeMaeCode { window_ms } => {
                TrendlineWindow::TimeMaeCode(TimeDelta::from_ms(window_ms))
            }
        }
    }
}

impl From<TrendlineWindow> for TrendlineWindowRepr {
    fn from(w: TrendlineWindow) -> Self {
        match w {
            TrendlineWindow::Packets(count) => TrendlineWindowRepr::Packets { count },
            TrendlineWindow::Time(d) => TrendlineWindowRepr::Time { window_ms: d.as_ms() },
            TrendlineWindow::TimeMaeCode(d) => {
                TrendlineWindowRepr::TimeMaeCode { window_ms: d.as_ms() }
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Point {
    /// Arrival time in ms since the first group.
    x: f64,
    /// Smoothed accumulated delay in ms.
    y: f64,
}

/// Least-squares slope of y over x; `None` when all x are equal.
fn linear_fit_slope(points: &VecDeque<Point>) -> Option<f64> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.x).sum::<f64>() / n;
    let my = points.iter().map(|p| p.y).sum::<f64>() / n;
    let mut num = 0.0;
    let mut den = 0.0;
    for p in points {
        num += (p.x - mx) * (p.y - my);
        den += (p.x - mx) * (p.x - mx);
    }
    if den == 0.0 {
        None
    } else {
        Some(num / den)
    }
}

/// Trendline estimator + adaptive threshold + over-use detector.
#[derive(Clone, Debug)]
pub struct TrendlineEstimator {
    window: TrendlineWindow,
    num_deltas: u32,
    first_arrival_ms: Option<f64>,
    accumulated_delay: f64,
    smoothed_delay: f64,
    history: VecDeque<Point>,
    window_filled: bool,
    prev_trend: f64,
    prev_modified_trend: f64,
    // Adaptive threshold.
    threshold: f64,
    last_threshold_update_ms: Option<f64>,
    // Over-use detector.
    time_over_using_ms: Option<f64>,
    overuse_counter: u32,
    state: BandwidthUsage,
    // MAE's pre-reaction.
    pre_reaction_ratio: Option<f64>,
    /// m / (r x threshold) of the last sample (`None` before two deltas or without a ratio).
    pre_reaction_level: Option<f64>,
}

impl TrendlineEstimator {
    /// An estimator fitting over `window`, at the initial threshold, in the normal state.
    pub fn new(window: TrendlineWindow) -> Self {
        TrendlineEstimator {
            window,
            num_deltas: 0,
            first_arrival_ms: None,
            accumulated_delay: 0.0,
            smoothed_delay: 0.0,
            history: VecDeque::new(),
            window_filled: false,
            prev_trend: 0.0,
            prev_modified_trend: 0.0,
            threshold: INITIAL_THRESHOLD,
            last_threshold_update_ms: None,
            time_over_using_ms: None,
            overuse_counter: 0,
            state: BandwidthUsage::Normal,
            pre_reaction_ratio: None,
            pre_reaction_level: None,
        }
    }

    /// The same estimator, also reporting MAE's pre-reaction at `ratio` x the threshold.
    pub fn with_pre_reaction(mut self, ratio: Option<f64>) -> Self {
        self.pre_reaction_ratio = ratio.filter(|r| r.is_finite() && *r > 0.0);
        self
    }

    /// m / (r x threshold) of the last sample, the threshold taken before its update: above 1
    /// the pre-reaction condition held.
    pub fn pre_reaction_level(&self) -> Option<f64> {
        self.pre_reaction_level
    }
    /// Whether the last sample met the pre-reaction condition (m > r x threshold).
    pub fn pre_reacted(&self) -> bool {
        self.pre_reaction_level.is_some_and(|l| l > 1.0)
    }

    /// The window the fit uses.
    pub fn window(&self) -> TrendlineWindow {
        self.window
    }
    /// Detector state after the last update.
    pub fn state(&self) -> BandwidthUsage {
        self.state
    }
    /// The last modified trend, min(n, 60) * slope * 4.
    pub fn modified_trend(&self) -> f64 {
        self.prev_modified_trend
    }
    /// The last fitted slope (ms of delay per ms of arrival time).
    pub fn slope(&self) -> f64 {
        self.prev_trend
    }
    /// The adaptive threshold.
    pub fn threshold(&self) -> f64 {
        self.threshold
    }
    /// Group deltas seen so far, at most [`DELTA_COUNTER_MAX`].
    pub fn num_deltas(&self) -> u32 {
        self.num_deltas
    }

    /// Adds the deltas between two groups. `arrival` is the arrival time of the packet that
    /// completed the older group's successor (libwebrtc passes the current packet's arrival).
    pub fn update(&mut self, recv_delta: TimeDelta, send_delta: TimeDelta, arrival: Timestamp) {
        let recv_ms = recv_delta.as_ms_f64();
        let send_ms = send_delta.as_ms_f64();
        let arrival_ms = arrival.as_us() as f64 / 1e3;
        self.num_deltas = (self.num_deltas + 1).min(DELTA_COUNTER_MAX);
        let first = *self.first_arrival_ms.get_or_insert(arrival_ms);
        self.accumulated_delay += recv_ms - send_ms;
        self.smoothed_delay =
            SMOOTHING_COEF * self.smoothed_delay + (1.0 - SMOOTHING_COEF) * self.accumulated_delay;
        let x = arrival_ms - first;
        self.history.push_back(Point { x, y: self.smoothed_delay });
        match self.window {
            TrendlineWindow::Packets(n) => {
                let n = n.max(2);
                while self.history.len() > n {
                    self.history.pop_front();
                }
                if self.history.len() == n {
                    self.window_filled = true;
                }
            }
            TrendlineWindow::Time(w) => {
                let w_ms = w.as_ms_f64();
                while let Some(front) = self.history.front() {
                    if x - front.x > w_ms {
                        self.history.pop_front();
                        self.window_filled = true;
                    } else {
                        break;
                    }
                }
            }
            TrendlineWindow::TimeMaeCode(w) => {
                let w_ms = w.as_ms_f64();
                let mut evicted = false;
                while self.history.len() > 2
                    && self.history.front().is_some_and(|front| x - front.x > w_ms)
                {
                    self.history.pop_front();
                    evicted = true;
                }
                // Refit only in an update that evicted a group.
                self.window_filled = evicted;
            }
        }
        let mut trend = self.prev_trend;
        if self.window_filled && self.history.len() >= 2 {
            trend = linear_fit_slope(&self.history).unwrap_or(trend);
        }
        self.detect(trend, send_ms, arrival_ms);
    }

    fn detect(&mut self, trend: f64, send_delta_ms: f64, now_ms: f64) {
        if self.num_deltas < 2 {
            self.state = BandwidthUsage::Normal;
            self.pre_reaction_level = None;
            return;
        }
        let modified = f64::from(self.num_deltas.min(MIN_NUM_DELTAS)) * trend * THRESHOLD_GAIN;
        self.prev_modified_trend = modified;
        // MAE: against the threshold before this sample adapts it.
        self.pre_reaction_level = self.pre_reaction_ratio.map(|r| modified / (r * self.threshold));
        if modified > self.threshold {
            let t = match self.time_over_using_ms {
                None => send_delta_ms / 2.0,
                Some(t) => t + send_delta_ms,
            };
            self.time_over_using_ms = Some(t);
            self.overuse_counter += 1;
            if t > OVERUSE_TIME_THRESHOLD_MS && self.overuse_counter > 1 && trend >= self.prev_trend
            {
                self.time_over_using_ms = Some(0.0);
                self.overuse_counter = 0;
                self.state = BandwidthUsage::Overusing;
            }
        } else if modified < -self.threshold {
            self.time_over_using_ms = None;
            self.overuse_counter = 0;
            self.state = BandwidthUsage::Underusing;
        } else {
            self.time_over_using_ms = None;
            self.overuse_counter = 0;
            self.state = BandwidthUsage::Normal;
        }
        self.prev_trend = trend;
        self.update_threshold(modified, now_ms);
    }

    fn update_threshold(&mut self, modified: f64, now_ms: f64) {
        let last = *self.last_threshold_update_ms.get_or_insert(now_ms);
        let m = modified.abs();
        if m > self.threshold + MAX_ADAPT_OFFSET_MS {
            // An outlier (e.g. a route change): do not adapt to it.
            self.last_threshold_update_ms = Some(now_ms);
            return;
        }
        let k = if m < self.threshold { K_DOWN } else { K_UP };
        let dt = (now_ms - last).min(MAX_THRESHOLD_TIME_DELTA_MS);
        self.threshold += k * (m - self.threshold) * dt;
        self.threshold = self.threshold.clamp(MIN_THRESHOLD, MAX_THRESHOLD);
        self.last_threshold_update_ms = Some(now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(ms: i64) -> TimeDelta {
        TimeDelta::from_ms(ms)
    }
    fn t(ms: i64) -> Timestamp {
        Timestamp::from_ms(ms)
    }

    // Feeds (recv 10, send 5) @100, (12, 5) @110, (5, 5) @120.
    //   acc:      5, 12, 12
    //   smoothed: 0.5, 0.45 + 1.2 = 1.65, 1.485 + 1.2 = 2.685
    //   x:        0, 10, 20
    fn feed(est: &mut TrendlineEstimator) {
        est.update(d(10), d(5), t(100));
        est.update(d(12), d(5), t(110));
        est.update(d(5), d(5), t(120));
    }

    #[test]
    fn packet_window_slope_and_modified_trend_by_hand() {
        let mut est = TrendlineEstimator::new(TrendlineWindow::Packets(3));
        feed(&mut est);
        // Mean x = 10; slope = (-10*(0.5-my) + 10*(2.685-my)) / 200 = 10*2.185/200 = 0.10925.
        assert!((est.slope() - 0.10925).abs() < 1e-9, "{}", est.slope());
        // m = min(3, 60) * 0.10925 * 4 = 1.311.
        assert!((est.modified_trend() - 1.311).abs() < 1e-9);
        assert_eq!(est.state(), BandwidthUsage::Normal);
        // Threshold: update 1 has < 2 deltas (no update); update 2 sets the clock at 110
        // (dt 0); update 3: 12.5 + 0.039 * (1.311 - 12.5) * 10 = 8.13629.
        assert!((est.threshold() - 8.13629).abs() < 1e-9, "{}", est.threshold());
    }

    #[test]
    fn packet_window_does_not_fit_before_full() {
        let mut est = TrendlineEstimator::new(TrendlineWindow::Packets(4));
        feed(&mut est);
        assert_eq!(est.slope(), 0.0);
        assert_eq!(est.modified_trend(), 0.0);
    }

    #[test]
    fn time_window_keeps_recent_groups_only() {
        let mut est = TrendlineEstimator::new(TrendlineWindow::Time(d(15)));
        feed(&mut est);
        // At x = 20 the x = 0 point is 20 ms old (> 15) and leaves; the fit uses
        // (10, 1.65), (20, 2.685): slope 0.1035, m = 3 * 0.1035 * 4 = 1.242.
        assert!((est.slope() - 0.1035).abs() < 1e-9, "{}", est.slope());
        assert!((est.modified_trend() - 1.242).abs() < 1e-9);
        // A 25 ms window never drops a point here, so it never fits.
        let mut est = TrendlineEstimator::new(TrendlineWindow::Time(d(25)));
        feed(&mut est);
        assert_eq!(est.slope(), 0.0);
    }

    #[test]
    fn adaptive_threshold_update_rules() {
        let mut est = TrendlineEstimator::new(TrendlineWindow::Packets(20));
        est.update_threshold(20.0, 0.0); // first call: dt = 0
        assert_eq!(est.threshold(), 12.5);
        // |m| >= thr: k_up. 12.5 + 0.0087 * 7.5 * 50 = 15.7625.
        est.update_threshold(20.0, 50.0);
        assert!((est.threshold() - 15.7625).abs() < 1e-9);
        // Outlier beyond thr + 15: skipped.
        est.update_threshold(-40.0, 100.0);
        assert!((est.threshold() - 15.7625).abs() < 1e-9);
        // |m| < thr: k_down; dt capped at 100 ms.
        // 15.7625 + 0.039 * (5 - 15.7625) * 100 = -26.21 -> clamped to 6.
        est.update_threshold(5.0, 1000.0);
        assert_eq!(est.threshold(), MIN_THRESHOLD);
        // Upper clamp: thr 590, m 600 (within +15), dt 100: 590 + 0.0087*10*100 = 598.7.
        est.threshold = 590.0;
        est.update_threshold(600.0, 1100.0);
        assert!((est.threshold() - 598.7).abs() < 1e-9);
        est.update_threshold(604.0, 1200.0); // 598.7 + 0.0087*5.3*100 = 603.311 -> 600
        assert_eq!(est.threshold(), MAX_THRESHOLD);
    }

    #[test]
    fn overuse_detector_state_transitions() {
        let mut est = TrendlineEstimator::new(TrendlineWindow::Packets(20));
        est.num_deltas = 60;
        // m = 60 * 0.1 * 4 = 24 > 12.5: timer 5 ms, counter 1 -> still Normal.
        est.detect(0.1, 10.0, 0.0);
        assert_eq!(est.state(), BandwidthUsage::Normal);
        assert!((est.modified_trend() - 24.0).abs() < 1e-9);
        // Slope decreased (0.09 < 0.1): timer 15 > 10 and counter 2 but state is kept.
        est.detect(0.09, 10.0, 10.0);
        assert_eq!(est.state(), BandwidthUsage::Normal);
        // Threshold after that update: 12.5 + 0.0087*(21.6-12.5)*10 = 13.2917.
        assert!((est.threshold() - 13.2917).abs() < 1e-9);
        // Slope back up: Overusing.
        est.detect(0.1, 10.0, 20.0);
        assert_eq!(est.state(), BandwidthUsage::Overusing);
        // Within the band: Normal.
        est.detect(0.0, 10.0, 30.0);
        assert_eq!(est.state(), BandwidthUsage::Normal);
        // Strongly negative: Underusing.
        est.detect(-0.1, 10.0, 40.0);
        assert_eq!(est.state(), BandwidthUsage::Underusing);
        // A single over-threshold sample with a 30 ms send delta: timer 15 > 10 but counter 1.
        est.detect(0.1, 30.0, 50.0);
        assert_eq!(est.state(), BandwidthUsage::Underusing);
    }

    /// MAE §5.2/§6.5: the pre-reaction compares m with r x the threshold before its update,
    /// and fires without the over-use gates.
    #[test]
    fn pre_reaction_fires_between_r_times_threshold_and_threshold_without_overuse() {
        let mut est =
            TrendlineEstimator::new(TrendlineWindow::Packets(20)).with_pre_reaction(Some(0.5));
        est.num_deltas = 60;
        // m = 60 * 0.04 * 4 = 9.6: above 0.5 x 12.5 = 6.25, below 12.5.
        est.detect(0.04, 10.0, 0.0);
        assert!((est.pre_reaction_level().unwrap() - 9.6 / 6.25).abs() < 1e-12);
        assert!(est.pre_reacted());
        assert_eq!(est.state(), BandwidthUsage::Normal);
        // m = 60 * 0.02 * 4 = 4.8 against 0.5 x the threshold the first sample left
        // (12.5 + 0.039 * (9.6 - 12.5) * 0 = 12.5, dt 0): 4.8 / 6.25 < 1.
        est.detect(0.02, 10.0, 0.0);
        assert!(!est.pre_reacted());
        // Without a ratio there is no level.
        let mut plain = TrendlineEstimator::new(TrendlineWindow::Packets(20));
        plain.num_deltas = 60;
        plain.detect(0.04, 10.0, 0.0);
        assert_eq!(plain.pre_reaction_level(), None);
    }

    /// MAE §6.5's scaling factor `s` is over the threshold halved: `s = 1` ("MAE selects 1")
    /// fires at half GCC's threshold, `s = 2` (the artifact's `flag > 2`) at the full one,
    /// Fig. 23's `s = 0.5` at a quarter. The first sample is compared with the initial
    /// threshold, 12.5.
    #[test]
    fn the_papers_scaling_factor_is_over_the_halved_threshold() {
        use super::super::pre_reaction_ratio_from_scaling_factor as ratio;
        // (s, the trend m just above and just below where it must fire)
        for (s, fires_at) in [(0.5, 12.5 / 4.0), (1.0, 12.5 / 2.0), (2.0, 12.5)] {
            for (m, fires) in [(fires_at * 1.01, true), (fires_at * 0.99, false)] {
                let mut est = TrendlineEstimator::new(TrendlineWindow::Packets(20))
                    .with_pre_reaction(Some(ratio(s)));
                est.num_deltas = 60;
                // m = 60 x slope x 4.
                est.detect(m / 240.0, 10.0, 0.0);
                assert_eq!(est.pre_reacted(), fires, "s = {s}, m = {m}");
            }
        }
        assert_eq!(ratio(1.0), 0.5);
    }

    #[test]
    fn pre_reaction_comes_before_overuse_on_a_rising_trend() {
        let mut est =
            TrendlineEstimator::new(TrendlineWindow::Packets(20)).with_pre_reaction(Some(0.5));
        est.num_deltas = 60;
        let (mut pre, mut over) = (None, None);
        for i in 0..40 {
            // The slope ramps up by 0.002 per 5 ms group.
            est.detect(0.002 * f64::from(i), 5.0, 5.0 * f64::from(i));
            if est.pre_reacted() && pre.is_none() {
                pre = Some(i);
            }
            if est.state() == BandwidthUsage::Overusing && over.is_none() {
                over = Some(i);
            }
        }
        let (pre, over) = (pre.expect("pre-reaction"), over.expect("over-use"));
        assert!(pre + 2 <= over, "pre-reaction at group {pre}, over-use at {over}");
    }

    /// The MAE artifact's window: keeps at least two groups and refits only when one left.
    #[test]
    fn mae_code_window_refits_only_on_eviction() {
        let mut est = TrendlineEstimator::new(TrendlineWindow::TimeMaeCode(d(15)));
        feed(&mut est);
        // Same points as the 15 ms time window at x = 20: slope 0.1035.
        assert!((est.slope() - 0.1035).abs() < 1e-9, "{}", est.slope());
        // Next group at x = 25 evicts nothing (25 - 10 = 15 is not > 15): slope kept although
        // the points changed; the plain time window refits.
        est.update(d(20), d(5), t(125));
        assert!((est.slope() - 0.1035).abs() < 1e-9, "{}", est.slope());
        let mut plain = TrendlineEstimator::new(TrendlineWindow::Time(d(15)));
        feed(&mut plain);
        plain.update(d(20), d(5), t(125));
        assert!((plain.slope() - 0.1035).abs() > 1e-3);
        // And never fewer than two groups: a 1 ms window still fits two points.
        let mut tiny = TrendlineEstimator::new(TrendlineWindow::TimeMaeCode(d(1)));
        feed(&mut tiny);
        assert_eq!(tiny.history.len(), 2);
    }

    #[test]
    fn window_serde_round_trip() {
        let w: TrendlineWindow =
            serde_json::from_str(r#"{"kind":"time_mae_code","window_ms":100}"#).unwrap();
        assert_eq!(w, TrendlineWindow::TimeMaeCode(d(100)));
        let w: TrendlineWindow =
            serde_json::from_str(r#"{"kind":"time","window_ms":200}"#).unwrap();
        assert_eq!(w, TrendlineWindow::Time(d(200)));
        let s = serde_json::to_string(&TrendlineWindow::Packets(20)).unwrap();
        assert_eq!(s, r#"{"kind":"packets","count":20}"#);
    }
}
