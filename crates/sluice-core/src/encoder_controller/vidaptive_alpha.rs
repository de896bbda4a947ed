//! Vidaptive's target-bitrate fraction alpha (Vidaptive §3.3, Eq. 2-3; §4): the encoder gets
//! `alpha x CC-Rate`, with alpha chosen so that the lambda-th percentile of the frames'
//! counterfactual service times is P.
//!
//! * Service time `d_i`: from frame i's first packet reaching the head of the pacer queue to
//!   its last packet leaving (§3.3 "Preliminaries", §4: "this does not include the queuing time
//!   the frame spent in the pacer before frames ahead of it"); the sender measures it
//!   ([`FrameEvent::Serviced`](super::FrameEvent)). It includes pacing, window stalls and any
//!   dummy sent ahead of the frame's first packet.
//! * Normalised service time `d_i x CC-Rate / tr_i`, `tr_i` the target frame i was encoded
//!   at (§3.3: "had frame i been encoded by alpha x CC-Rate instead, the frame service time
//!   would have been d_i x alpha x CC-Rate / tr_i"). CC-Rate is the rate at the update
//!   (Eq. 3 as written, the brief's A2 default) or, as an option, the one frame i was planned
//!   with (then `d_i / alpha_i` when no cap bound). Both rates are the encoder's (overhead
//!   removed), so the ratio carries no constant bias.
//! * Eq. 3: `alpha = min(P / Percentile_lambda(normalised d_i), 1)` over the frames whose
//!   service ended in the last `window_ms` (D = 1 s, §4; the brief's A3 default), percentile
//!   by linear interpolation ([`crate::stats::percentile`], A4); recomputed every
//!   `update_interval_ms` (1 s, §4) at the first plan at or after the due time.
//! * "We also apply an EWMA smoothing over the values of alpha" (§4, weight unstated): weight
//!   0.25 on the new value, alpha kept in [0.05, 1], starting at 1 (the third-party crate's
//!   values, the brief's A1); no frame in the window keeps alpha (A5).
//!
//! Defaults: P = 33 ms (§5.4 "P is selected as 33 ms"), lambda = 0.9 (§3.3, Fig. 5-6).

use crate::units::{DataRate, TimeDelta, Timestamp};
use crate::{check_range, finite_or};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Which CC-Rate normalises a frame's service time (Eq. 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlphaCcRate {
    /// The CC-Rate at the update (Eq. 3 as written).
    Current,
    /// The CC-Rate frame i was planned with.
    PerFrame,
}

/// Parameters of the alpha estimate (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AlphaConfig {
    /// Choose alpha at all (`false`: alpha = 1, Vidaptive w/o Bitrate Selection, §5.4).
    pub enabled: bool,
    /// Target service time P (§5.4: 33 ms; swept 20/33/66 in Fig. 10-11).
    pub p_ms: f64,
    /// Percentile lambda in (0, 1] (§3.3: 0.9; swept 0.5/0.7/0.9/0.95 in Fig. 22).
    pub lambda: f64,
    /// Frames whose service ended within this long before an update count (D = 1 s, §4).
    pub window_ms: f64,
    /// Alpha is recomputed this often (§4: every second).
    pub update_interval_ms: f64,
    /// EWMA weight of the new value (§4 smooths, weight unstated; the crate: 0.25).
    pub ewma_weight: f64,
    /// Bounds and start (the crate: [0.05, 1], 1).
    pub min: f64,
    /// Upper bound on alpha (at most 1; default 1).
    pub max: f64,
    /// Alpha before the first update (default 1).
    pub initial: f64,
    /// The CC-Rate that normalises service times.
    pub cc_rate: AlphaCcRate,
}

impl Default for AlphaConfig {
    fn default() -> Self {
        AlphaConfig {
            enabled: true,
            p_ms: 33.0,
            lambda: 0.9,
            window_ms: 1000.0,
            update_interval_ms: 1000.0,
            ewma_weight: 0.25,
            min: 0.05,
            max: 1.0,
            initial: 1.0,
            cc_rate: AlphaCcRate::Current,
        }
    }
}

impl AlphaConfig {
    /// A configuration mistake, if any (the config paths under `encoder_controller.alpha`).
    pub fn validate(&self) -> Result<(), String> {
        let f = |n: &str| format!("encoder_controller.alpha.{n}");
        check_range(&f("p_ms"), self.p_ms, 0.0, true, 10_000.0)?;
        check_range(&f("lambda"), self.lambda, 0.0, true, 1.0)?;
        check_range(&f("window_ms"), self.window_ms, 0.0, true, 60_000.0)?;
        check_range(&f("update_interval_ms"), self.update_interval_ms, 0.0, true, 60_000.0)?;
        check_range(&f("ewma_weight"), self.ewma_weight, 0.0, true, 1.0)?;
        check_range(&f("min"), self.min, 0.0, true, 1.0)?;
        check_range(&f("max"), self.max, self.min, false, 1.0)
            .map_err(|e| format!("{e} (at least encoder_controller.alpha.min)"))?;
        check_range(&f("initial"), self.initial, self.min, false, self.max)
            .map_err(|e| format!("{e} (between alpha.min and alpha.max)"))
    }
}

/// Eq. 3 before smoothing: `min(P / Percentile_lambda(normalised), 1)`; `None` without
/// samples. A zero percentile (instant service) gives 1.
pub fn raw_alpha(normalised_ms: &[f64], p_ms: f64, lambda: f64) -> Option<f64> {
    let mut v: Vec<f64> = normalised_ms.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let q = if lambda.is_finite() { lambda.clamp(0.0, 1.0) } else { 0.9 } * 100.0;
    let x = crate::stats::percentile(&v, q);
    if x <= 0.0 {
        return Some(1.0);
    }
    Some((p_ms / x).min(1.0))
}

/// One serviced frame.
#[derive(Clone, Copy, Debug)]
struct Sample {
    done_at: Timestamp,
    service: TimeDelta,
    target: DataRate,
    cc_rate: DataRate,
}

/// The alpha state: samples of the last window and the smoothed value.
#[derive(Clone, Debug)]
pub struct AlphaEstimator {
    config: AlphaConfig,
    alpha: f64,
    last_raw: Option<f64>,
    samples: VecDeque<Sample>,
    next_update: Option<Timestamp>,
}

impl AlphaEstimator {
    /// The estimator at `config.initial` (clamped to the bounds), with no samples.
    pub fn new(config: AlphaConfig) -> Self {
        let mut e = AlphaEstimator {
            alpha: 1.0,
            last_raw: None,
            samples: VecDeque::new(),
            next_update: None,
            config,
        };
        e.alpha = e.clamp(finite_or(e.config.initial, 1.0));
        e
    }

    fn bounds(&self) -> (f64, f64) {
        let lo = finite_or(self.config.min, 0.05).clamp(1e-6, 1.0);
        let hi = finite_or(self.config.max, 1.0).clamp(lo, 1.0);
        (lo, hi)
    }

    fn clamp(&self, a: f64) -> f64 {
        let (lo, hi) = self.bounds();
        a.clamp(lo, hi)
    }

    /// The alpha the encoder target uses now (1 when alpha selection is off).
    pub fn alpha(&self) -> f64 {
        if self.config.enabled {
            self.alpha
        } else {
            1.0
        }
    }

    /// Eq. 3's value at the latest update, before smoothing.
    pub fn last_raw(&self) -> Option<f64> {
        self.last_raw
    }

    /// A frame's service ended at `done_at` after `service`; it was encoded at `target`, and
    /// planned when the CC-Rate was `cc_rate`. Frames with no target are left out.
    pub fn on_serviced(
        &mut self,
        done_at: Timestamp,
        service: TimeDelta,
        target: DataRate,
        cc_rate: DataRate,
    ) {
        if target <= DataRate::ZERO || service < TimeDelta::ZERO {
            return;
        }
        self.samples.push_back(Sample { done_at, service, target, cc_rate });
        // Bounded: more than a window's worth of frames at any frame rate is never needed.
        while self.samples.len() > 100_000 {
            self.samples.pop_front();
        }
    }

    /// The normalised service times (ms) of the frames serviced in the window before `now`,
    /// with `cc_rate` the CC-Rate now.
    pub fn normalised_ms(&self, now: Timestamp, cc_rate: DataRate) -> Vec<f64> {
        let window = TimeDelta::from_ms_f64(finite_or(self.config.window_ms, 1000.0).max(0.0));
        self.samples
            .iter()
            .filter(|s| s.done_at <= now && now - s.done_at <= window)
            .map(|s| {
                let rate = match self.config.cc_rate {
                    AlphaCcRate::Current => cc_rate,
                    AlphaCcRate::PerFrame => s.cc_rate,
                };
                s.service.as_ms_f64() * (rate / s.target)
            })
            .collect()
    }

    /// Recomputes alpha if an update is due at `now` (the first call starts the clock);
    /// returns whether it did.
    pub fn maybe_update(&mut self, now: Timestamp, cc_rate: DataRate) -> bool {
        let interval = TimeDelta::from_ms_f64(
            finite_or(self.config.update_interval_ms, 1000.0).clamp(1.0, 1e9),
        );
        let Some(due) = self.next_update else {
            self.next_update = Some(now + interval);
            return false;
        };
        if now < due {
            return false;
        }
        let mut next = due;
        while next <= now {
            next += interval;
        }
        self.next_update = Some(next);
        let window = TimeDelta::from_ms_f64(finite_or(self.config.window_ms, 1000.0).max(0.0));
        while self.samples.front().is_some_and(|s| now - s.done_at > window) {
            self.samples.pop_front();
        }
        let normalised = self.normalised_ms(now, cc_rate);
        let p = finite_or(self.config.p_ms, 33.0).max(0.0);
        let Some(raw) = raw_alpha(&normalised, p, self.config.lambda) else {
            return false;
        };
        self.last_raw = Some(raw);
        let w = finite_or(self.config.ewma_weight, 0.25).clamp(0.0, 1.0);
        self.alpha = self.clamp((1.0 - w) * self.alpha + w * raw);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq3_worked_examples() {
        // 27 frames of 20 ms and 3 of 60 ms, lambda 0.9: the 90th percentile (linear, 30
        // samples) sits at rank 0.9 x 29 = 26.1, between the last 20 and the first 60:
        // 20 + 0.1 x 40 = 24 ms; P / 24 = 1.375, so alpha = 1.
        let mut v = vec![20.0; 27];
        v.extend([60.0; 3]);
        assert_eq!(raw_alpha(&v, 33.0, 0.9), Some(1.0));
        // All 66 ms: 33 / 66 = 0.5.
        assert_eq!(raw_alpha(&[66.0; 30], 33.0, 0.9), Some(0.5));
        // 27 of 40 ms and 3 of 120 ms: percentile 48 ms, alpha 33/48 = 0.6875.
        let mut v = vec![40.0; 27];
        v.extend([120.0; 3]);
        assert!((raw_alpha(&v, 33.0, 0.9).unwrap() - 0.6875).abs() < 1e-12);
        // lambda 1 is the worst frame: 33 / 120.
        assert_eq!(raw_alpha(&v, 33.0, 1.0), Some(0.275));
        assert_eq!(raw_alpha(&[], 33.0, 0.9), None);
        assert_eq!(raw_alpha(&[0.0], 33.0, 0.9), Some(1.0));
    }

    fn estimator() -> AlphaEstimator {
        AlphaEstimator::new(AlphaConfig::default())
    }

    /// `n` frames serviced in `service_ms` each, ending every 33 ms up to `until_ms`, encoded
    /// at the CC-Rate `target_mbps`.
    fn feed(e: &mut AlphaEstimator, until_ms: i64, n: i64, service_ms: i64, target_mbps: i64) {
        for k in 0..n {
            let done = Timestamp::from_ms(until_ms - 33 * (n - 1 - k));
            let r = DataRate::from_mbps(target_mbps);
            e.on_serviced(done, TimeDelta::from_ms(service_ms), r, r);
        }
    }

    #[test]
    fn smoothed_every_second_and_bounded() {
        let mut e = estimator();
        let rate = DataRate::from_mbps(2);
        assert_eq!(e.alpha(), 1.0);
        assert!(!e.maybe_update(Timestamp::from_ms(0), rate), "the first call starts the clock");
        // All 66 ms at the current CC-Rate: Eq. 3 gives 0.5; alpha 1 -> 0.75 x 1 + 0.25 x 0.5
        // = 0.875 at the update, 1 s after the clock started, and not before.
        feed(&mut e, 999, 30, 66, 2);
        assert!(!e.maybe_update(Timestamp::from_ms(999), rate));
        assert!(e.maybe_update(Timestamp::from_ms(1000), rate));
        assert_eq!(e.last_raw(), Some(0.5));
        assert_eq!(e.alpha(), 0.875);
        assert!(!e.maybe_update(Timestamp::from_ms(1500), rate), "once per second");
        // The same a second later: 0.75 x 0.875 + 0.125 = 0.78125.
        feed(&mut e, 1999, 30, 66, 2);
        assert!(e.maybe_update(Timestamp::from_ms(2000), rate));
        assert_eq!(e.alpha(), 0.78125);
        // A window without frames keeps alpha.
        assert!(!e.maybe_update(Timestamp::from_ms(3500), rate));
        assert_eq!(e.alpha(), 0.78125);
        // Huge service times drive it down to the floor, never below.
        for s in 0..40 {
            let t = 4000 + 1000 * s;
            feed(&mut e, t - 1, 30, 5000, 2);
            e.maybe_update(Timestamp::from_ms(t), rate);
        }
        assert_eq!(e.alpha(), 0.05);
    }

    #[test]
    fn normalises_by_the_cc_rate_over_the_frame_s_target() {
        // A frame serviced in 30 ms that was encoded at 1 Mbps while the CC-Rate is now
        // 2 Mbps would have taken 60 ms at the current rate.
        let mut e = estimator();
        let (one, two) = (DataRate::from_mbps(1), DataRate::from_mbps(2));
        e.on_serviced(Timestamp::from_ms(500), TimeDelta::from_ms(30), one, one);
        assert_eq!(e.normalised_ms(Timestamp::from_ms(1000), two), vec![60.0]);
        // Per-frame CC-Rate: planned at CC-Rate 1.5 Mbps with alpha 2/3 (target 1 Mbps):
        // 30 x 1.5 = 45 ms whatever the rate now.
        let mut e = AlphaEstimator::new(AlphaConfig {
            cc_rate: AlphaCcRate::PerFrame,
            ..Default::default()
        });
        e.on_serviced(
            Timestamp::from_ms(500),
            TimeDelta::from_ms(30),
            one,
            DataRate::from_kbps(1500),
        );
        assert_eq!(e.normalised_ms(Timestamp::from_ms(1000), two), vec![45.0]);
        // Only the last second counts; a zero target never does.
        let mut e = estimator();
        e.on_serviced(Timestamp::from_ms(100), TimeDelta::from_ms(30), one, one);
        e.on_serviced(Timestamp::from_ms(900), TimeDelta::from_ms(30), DataRate::ZERO, one);
        e.on_serviced(Timestamp::from_ms(1200), TimeDelta::from_ms(10), one, one);
        // At 1150 ms: the 100 ms frame is more than 1 s old, the 1200 ms one not yet done.
        assert!(e.normalised_ms(Timestamp::from_ms(1150), one).is_empty());
        assert_eq!(e.normalised_ms(Timestamp::from_ms(1200), one), vec![10.0]);
    }

    #[test]
    fn disabled_alpha_is_one() {
        let mut e = AlphaEstimator::new(AlphaConfig { enabled: false, ..Default::default() });
        e.maybe_update(Timestamp::ZERO, DataRate::from_mbps(1));
        feed(&mut e, 999, 30, 66, 1);
        e.maybe_update(Timestamp::from_ms(1000), DataRate::from_mbps(1));
        assert_eq!(e.alpha(), 1.0);
    }
}
