//! ACE-C, the complexity-adaptive encoding controller (ACE §4.2, §5.1, Tables 1-2).
//!
//! Before each frame, ACE-C predicts the frame's size relative to the recent average from
//! the SATD between the frame and its predecessor (Eq. 4: `rho_hat = w * S / S_n + offset`)
//! and picks the complexity level with the largest gain (Eq. 2):
//!
//! ```text
//! Gain(c) = rho_hat * phi(c) / f - dTe(c)
//! ```
//!
//! the transmission time saved by a frame `phi(c)` smaller (at the estimated bandwidth,
//! `BWE = f * F_n`) minus the extra encode time. `phi(c0) = dTe(c0) = 0`, so c0 wins unless
//! a frame is large enough for the saving to pay for the slower encode. After each frame,
//! `w`, `offset`, `phi(c)` and `dTe(c)` are updated by EWMA with weight 0.5 (Eq. 5).
//!
//! The rate control underneath is unchanged: ABR + VBV at the congestion controller's target
//! (as the `webrtc-x264` baseline).
//!
//! The planned-size correction of §5.1: under ABR a frame switched to c1/c2 is planned at
//! c0's size, and x264's rate control spends the level's saving on quality (measured by
//! `bench/encoder.py`, docs/schemes.md "Encoder characterisation": 3-11% *larger* and 0.4-1.4 dB
//! better than the same frame at c0). The authors patched x264 to shrink the plan by the
//! level's preset saving. libx264's public API cannot change one frame's plan, so Sluice asks
//! for a scaled plan ([`FramePlan::planned_size_scale`]) and the x264 encoder carries it out
//! as a uniform quant offset on the frame (`sluice_x264::complexity`). The default scales,
//! 0.76 (c1) and 0.65 (c2), are the ones at which a switched frame came out at c0's PSNR on
//! x264 in a spot check at 960 px (four clips at 1.5 and 4 Mbps: -0.05 / -0.09 dB on average,
//! 0.80 / 0.73 of c0's size, the levels' saving at equal quality, BD-rate 0.79 / 0.73); the
//! encoder bench at 1280 px and 4 Mbps gives 0.84 / 0.76 of c0's size at +0.19 / +0.13 dB.
//! Under ABR the next frame spends most of the saving again (0.99x / 1.06x c0's bytes).
//!
//! Choices where the paper is silent, and why:
//! * `S_n` and `F_n`, "over a short time window n": exponential averages over about one
//!   second (`window_frames` = 30), the horizon of x264's ABR blur.
//! * Fitting `w` and `offset` from single frames is underdetermined, so each frame first
//!   refits them by exponentially weighted least squares over the recent frames
//!   (`fit_window_frames`), and the fit enters Eq. 5's EWMA.
//! * `phi(c)` is observed as `1 - size / (rho_hat * F_n)` for frames encoded at `c`: the size
//!   against what the predictor expected at c0. Clamped to [0, `max_phi`] so a bad
//!   prediction cannot make a level look free or negative.
//! * `dTe(c)` is observed as the frame's encode time minus the running c0 encode time.
//! * Keyframes are always encoded at c0 and are not used for learning (their size is a
//!   different population; ACE-C targets oversized P frames).
//! * Priors from the x264 measurements of `bench/encoder.py` (docs/schemes.md): `phi` 0.20 and
//!   0.27 (the corrected sizes above); a switched frame takes 2.1x and 2.6x c0's encode time
//!   on superfast, so the extra encode time starts at 1.1x and 1.6x the running c0 encode
//!   time (`initial_encode_time_ratio`) and follows the frame's resolution: a fixed prior in
//!   ms (3.5 and 5 ms, what it costs at 960x540) made c1 win from `rho ~ 0.5` at 1080p as at
//!   960 px. `w = 1`, `offset = 0`. Until a c0 frame has been timed no level is switched.
//!
//! **How often it switches.** A level wins when `rho_hat > dTe(c) x f / phi(c)`. With the
//! priors and superfast's timing that is about 1.7x the average frame at 1080p and 30 fps
//! (c0 12.6 ms per frame: dTe 13.9 and 20 ms, phi 0.24 and 0.35 after the size
//! correction), the paper's ">1.6x the average" for the few percent of frames it switches
//! (§6.7); at 960x540 the encoder is 2.25x faster and the threshold falls to about 0.8x, so
//! half the frames switch. ACE's experiments therefore run at the paper's 1080p, and the
//! report gives the switching share per clip.

use super::{EncoderController, FrameContext, FrameDecision, FramePlan};
use crate::encoder::{Complexity, EncodedFrame, RateControl};
use crate::units::TimeDelta;
use serde::{Deserialize, Serialize};

/// Parameters of ACE-C, with the paper's defaults where it gives them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AceCConfig {
    /// VBV buffer of the underlying ABR + VBV rate control (the seeds: 500 ms).
    pub vbv_buffer_ms: f64,
    /// EWMA weight of the newest value (§4.2 Eq. 5: 0.5).
    pub ewma_alpha: f64,
    /// Averaging horizon for `S_n` and `F_n`, in frames.
    pub window_frames: f64,
    /// Horizon of the least-squares fit of `w` and `offset`, in frames.
    pub fit_window_frames: f64,
    /// Initial `phi(c)` for c0, c1, c2 (c0 is 0 by definition).
    pub initial_phi: [f64; 3],
    /// Initial encode time of c0, c1, c2 as a multiple of c0's (c0 is 1 by definition): the
    /// extra encode time `dTe(c)` starts at `(ratio - 1) x` the running c0 encode time.
    pub initial_encode_time_ratio: [f64; 3],
    /// Initial `w` and `offset` of Eq. 4.
    pub initial_w: f64,
    /// Initial `offset` of Eq. 4 (default 0; may be negative).
    pub initial_offset: f64,
    /// Largest `phi` an observation may report.
    pub max_phi: f64,
    /// Levels ACE-C may choose from (the paper's x264 implementation: c0, c1, c2).
    pub levels: Vec<Complexity>,
    /// The planned-size correction of §5.1: a frame at c0, c1, c2 is planned at this
    /// fraction of the rate control's plan, so that a higher level yields a smaller frame
    /// at about c0's quality instead of a better frame at c0's size. The defaults bring a
    /// switched x264 frame to c0's PSNR (see the module docs). `[1, 1, 1]` turns the
    /// correction off.
    pub planned_size_scale: [f64; 3],
}

impl Default for AceCConfig {
    fn default() -> Self {
        AceCConfig {
            vbv_buffer_ms: 500.0,
            ewma_alpha: 0.5,
            window_frames: 30.0,
            fit_window_frames: 30.0,
            initial_phi: [0.0, 0.20, 0.27],
            initial_encode_time_ratio: [1.0, 2.1, 2.6],
            initial_w: 1.0,
            initial_offset: 0.0,
            max_phi: 0.5,
            levels: Complexity::ALL.to_vec(),
            planned_size_scale: [1.0, 0.76, 0.65],
        }
    }
}

impl AceCConfig {
    /// A configuration mistake, if any, named by its config path.
    pub fn validate(&self) -> Result<(), String> {
        use crate::check_range;
        let p = |f: &str| format!("encoder_controller.{f}");
        check_range(&p("vbv_buffer_ms"), self.vbv_buffer_ms, 0.0, true, 60_000.0)?;
        check_range(&p("ewma_alpha"), self.ewma_alpha, 0.0, true, 1.0)?;
        check_range(&p("window_frames"), self.window_frames, 1.0, false, 10_000.0)?;
        check_range(&p("fit_window_frames"), self.fit_window_frames, 2.0, false, 10_000.0)?;
        check_range(&p("max_phi"), self.max_phi, 0.0, true, 0.99)?;
        for i in 0..3 {
            check_range(&p(&format!("initial_phi[{i}]")), self.initial_phi[i], 0.0, false, 0.99)?;
            let ratio = self.initial_encode_time_ratio[i];
            check_range(&p(&format!("initial_encode_time_ratio[{i}]")), ratio, 0.0, true, 100.0)?;
            let scale = self.planned_size_scale[i];
            check_range(&p(&format!("planned_size_scale[{i}]")), scale, 0.0, true, 2.0)?;
        }
        for (f, v) in [("initial_w", self.initial_w), ("initial_offset", self.initial_offset)] {
            if !v.is_finite() || v.abs() > 1e6 {
                let v = crate::show(v);
                return Err(format!("{} must be a finite number within 1e6, got {v}", p(f)));
            }
        }
        if self.levels.is_empty() {
            return Err(format!("{} must name at least one level (c0, c1, c2)", p("levels")));
        }
        Ok(())
    }
}

/// One decision, for tests and plots.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AceCDecision {
    /// Predicted size relative to the recent average frame (Eq. 4; 1 without a SATD).
    pub rho_hat: f64,
    /// The complexity level chosen.
    pub level: Complexity,
    /// Gain of each level in seconds (Eq. 2).
    pub gains_s: [f64; 3],
}

/// The ACE-C controller (see the module documentation).
pub struct AceC {
    config: AceCConfig,
    w: f64,
    offset: f64,
    phi: [f64; 3],
    /// Observed extra encode time per level (s); `None` until the level is first used.
    extra_encode_s: [Option<f64>; 3],
    /// Running c0 encode time (s), the base of `dTe`.
    c0_encode_s: Option<f64>,
    /// Exponential averages of the SATD and of the frame size (`S_n`, `F_n`, bytes).
    satd_avg: Option<f64>,
    size_avg: Option<f64>,
    /// Weighted sums for the least-squares fit of rho = w * x + offset.
    fit: [f64; 5],
    /// The pending frame's x = S / S_n and decision.
    pending: Option<(Option<f64>, AceCDecision)>,
    last: Option<AceCDecision>,
}

impl AceC {
    /// ACE-C with `config`'s priors, before any frame.
    pub fn new(config: AceCConfig) -> Self {
        let extra_encode_s = [Some(0.0), None, None];
        AceC {
            w: config.initial_w,
            offset: config.initial_offset,
            phi: config.initial_phi,
            extra_encode_s,
            c0_encode_s: None,
            satd_avg: None,
            size_avg: None,
            fit: [0.0; 5],
            pending: None,
            last: None,
            config,
        }
    }

    /// The last decision.
    pub fn last_decision(&self) -> Option<AceCDecision> {
        self.last
    }
    /// The current `phi(c)` of c0, c1, c2: each level's relative size saving (Eq. 2).
    pub fn phi(&self) -> [f64; 3] {
        self.phi
    }
    /// `dTe(c)` for each level: observed, else the prior at the running c0 encode time;
    /// infinite before a c0 frame has been timed.
    fn extra_encode_s(&self) -> [f64; 3] {
        std::array::from_fn(|i| {
            self.extra_encode_s[i].unwrap_or_else(|| match self.c0_encode_s {
                Some(c0) => (self.config.initial_encode_time_ratio[i] - 1.0).max(0.0) * c0,
                None => f64::INFINITY,
            })
        })
    }
    /// `dTe(c)` of c0, c1, c2 (infinite before a c0 frame has been timed).
    pub fn extra_encode_time(&self) -> [TimeDelta; 3] {
        self.extra_encode_s().map(|s| {
            if s.is_finite() {
                TimeDelta::from_secs_f64(s)
            } else {
                TimeDelta::INFINITY
            }
        })
    }
    /// The current `(w, offset)` of the size predictor (Eq. 4).
    pub fn size_model(&self) -> (f64, f64) {
        (self.w, self.offset)
    }

    /// Eq. 2 for every level at relative size `rho_hat` and `fps`; the best allowed level.
    pub fn choose(&self, rho_hat: f64, fps: f64) -> AceCDecision {
        let mut gains_s = [f64::NEG_INFINITY; 3];
        let mut best = (Complexity::C0, f64::NEG_INFINITY);
        let extra = self.extra_encode_s();
        for &c in &self.config.levels {
            let i = c.index();
            let gain = rho_hat * self.phi[i] / fps - extra[i];
            gains_s[i] = gain;
            // Ties go to the cheaper level.
            if gain > best.1 {
                best = (c, gain);
            }
        }
        AceCDecision { rho_hat, level: best.0, gains_s }
    }

    fn ewma(&self, old: f64, new: f64) -> f64 {
        self.config.ewma_alpha * new + (1.0 - self.config.ewma_alpha) * old
    }

    fn window_weight(frames: f64) -> f64 {
        1.0 / frames.max(1.0)
    }
}

impl EncoderController for AceC {
    fn wants_analysis(&self) -> bool {
        true
    }

    fn plan(&mut self, ctx: &FrameContext) -> FrameDecision {
        let rate =
            RateControl::abr_vbv(ctx.cc_target, TimeDelta::from_ms_f64(self.config.vbv_buffer_ms));
        let satd = ctx.analysis.map(|a| a.satd);
        let x = match (satd, self.satd_avg) {
            (Some(s), Some(avg)) if avg > 0.0 => Some(s / avg),
            _ => None,
        };
        if let Some(s) = satd {
            let k = Self::window_weight(self.config.window_frames);
            self.satd_avg = Some(self.satd_avg.map_or(s, |a| (1.0 - k) * a + k * s));
        }
        // Without a SATD (first frame, no analysis) the frame is assumed average.
        let rho_hat = x.map_or(1.0, |x| (self.w * x + self.offset).max(0.0));
        let decision = match (x, self.size_avg) {
            (Some(_), Some(_)) => self.choose(rho_hat, ctx.fps),
            _ => AceCDecision { rho_hat, level: Complexity::C0, gains_s: [0.0; 3] },
        };
        self.pending = Some((x, decision));
        self.last = Some(decision);
        let mut plan = FramePlan {
            complexity: Some(decision.level),
            planned_size_scale: self.config.planned_size_scale[decision.level.index()],
            ..FramePlan::from(rate)
        };
        plan.columns.text("complexity", Some(decision.level.name()));
        // Recorded to three decimals, like the other per-frame ratios.
        plan.columns
            .float("predicted_relative_size", x.map(|_| (rho_hat * 1000.0).round() / 1000.0));
        plan.into()
    }

    fn on_frame_encoded(&mut self, frame: &EncodedFrame, plan: &FramePlan) {
        let Some((x, decision)) = self.pending.take() else { return };
        let level = plan.complexity.unwrap_or(Complexity::C0).index();
        let size = frame.size.as_bytes_f64();
        let encode_s = frame.encode_time.as_secs_f64();
        if frame.is_keyframe {
            return;
        }
        // Encode time: c0 frames move the base; other levels their extra time.
        if level == 0 {
            self.c0_encode_s = Some(self.c0_encode_s.map_or(encode_s, |b| self.ewma(b, encode_s)));
        } else if let Some(base) = self.c0_encode_s {
            let prior = self.extra_encode_s()[level];
            self.extra_encode_s[level] = Some(self.ewma(prior, encode_s - base));
        }
        // The size this frame would have had at c0 (before this frame updates `phi`).
        let c0_size = size / (1.0 - self.phi[level]).max(0.05);
        if let (Some(x), Some(avg)) = (x, self.size_avg) {
            if level != 0 && decision.rho_hat > 0.0 {
                let observed =
                    (1.0 - size / (decision.rho_hat * avg)).clamp(0.0, self.config.max_phi);
                self.phi[level] = self.ewma(self.phi[level], observed);
            }
            // Weighted least squares of rho on x over the recent frames, then Eq. 5.
            let rho = c0_size / avg;
            let k = Self::window_weight(self.config.fit_window_frames);
            for (s, v) in self.fit.iter_mut().zip([1.0, x, rho, x * x, x * rho]) {
                *s = (1.0 - k) * *s + k * v;
            }
            let [n, sx, sy, sxx, sxy] = self.fit;
            let var = sxx * n - sx * sx;
            if var > 1e-9 * n * n {
                let w_fit = (sxy * n - sx * sy) / var;
                let offset_fit = (sy - w_fit * sx) / n;
                self.w = self.ewma(self.w, w_fit);
                self.offset = self.ewma(self.offset, offset_fit);
            }
        }
        let k = Self::window_weight(self.config.window_frames);
        self.size_avg = Some(self.size_avg.map_or(c0_size, |a| (1.0 - k) * a + k * c0_size));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::CcSignals;
    use crate::columns::Value;
    use crate::encoder::FrameAnalysis;
    use crate::encoder_controller::PacerState;
    use crate::units::{DataRate, DataSize, Timestamp};

    fn config() -> AceCConfig {
        AceCConfig {
            initial_phi: [0.0, 0.10, 0.15],
            // With c0 at 4 ms: 5 and 9 ms extra.
            initial_encode_time_ratio: [1.0, 2.25, 3.25],
            ..Default::default()
        }
    }

    fn ctx(i: u64, satd: Option<f64>) -> FrameContext {
        FrameContext {
            now: Timestamp::from_ms(i as i64 * 33),
            source_index: i,
            capture_time: Timestamp::from_ms(i as i64 * 33),
            fps: 30.0,
            cc_target: DataRate::from_mbps(3),
            cwnd_reduce_ratio: 0.0,
            cc_signals: CcSignals::default(),
            pacer: PacerState::default(),
            transport: Default::default(),
            last_frame_id: i.checked_sub(1),
            analysis: satd.map(|satd| FrameAnalysis { satd }),
        }
    }

    fn plan(a: &mut AceC, c: &FrameContext) -> FramePlan {
        match a.plan(c) {
            FrameDecision::Encode(p) => p,
            FrameDecision::Skip { reason } => panic!("ACE-C skipped a frame ({reason})"),
        }
    }

    /// The recorded size prediction (three decimals).
    fn rho(p: &FramePlan) -> Option<f64> {
        match p.columns.get("predicted_relative_size") {
            Some(Value::Float(v)) => Some(*v),
            _ => None,
        }
    }

    fn frame(i: u64, bytes: i64, encode_ms: f64) -> EncodedFrame {
        EncodedFrame {
            frame_id: i,
            size: DataSize::from_bytes(bytes),
            is_keyframe: false,
            qp: 30.0,
            encode_time: TimeDelta::from_ms_f64(encode_ms),
        }
    }

    #[test]
    fn gain_picks_the_level_that_pays_for_its_encode_time() {
        let mut a = AceC::new(config());
        // Before a c0 frame has been timed nothing is switched.
        assert_eq!(a.choose(10.0, 30.0).level, Complexity::C0);
        a.c0_encode_s = Some(0.004);
        // rho 1: c1 saves 0.1/30 s = 3.3 ms < 5 ms extra; c2 5 ms < 9 ms: c0.
        let d = a.choose(1.0, 30.0);
        assert_eq!(d.level, Complexity::C0);
        assert!((d.gains_s[1] - (0.1 / 30.0 - 0.005)).abs() < 1e-12);
        // rho 2: c1 gains 6.7 - 5 = 1.7 ms, c2 10 - 9 = 1 ms: c1.
        assert_eq!(a.choose(2.0, 30.0).level, Complexity::C1);
        // rho 4: c1 13.3 - 5 = 8.3 ms, c2 20 - 9 = 11 ms: c2.
        let d = a.choose(4.0, 30.0);
        assert_eq!(d.level, Complexity::C2);
        assert!((d.gains_s[2] - (4.0 * 0.15 / 30.0 - 0.009)).abs() < 1e-12);
        // Break-even of c1 is rho = 5 ms * 30 / 0.1 = 1.5.
        assert_eq!(a.choose(1.49, 30.0).level, Complexity::C0);
        assert_eq!(a.choose(1.51, 30.0).level, Complexity::C1);
        // Only the allowed levels compete.
        let mut only_c0 = AceC::new(AceCConfig { levels: vec![Complexity::C0], ..config() });
        only_c0.c0_encode_s = Some(0.004);
        assert_eq!(only_c0.choose(10.0, 30.0).level, Complexity::C0);
    }

    /// The default priors switch from about 1.7x the average frame at 1080p (c0 12.6 ms,
    /// superfast) and from about 0.8x at 960x540 (c0 3.15 ms): the threshold follows the
    /// resolution through the encode time (ACE §6.7 switches frames above 1.6x).
    #[test]
    fn the_default_threshold_follows_the_encode_time() {
        let threshold = |c0_ms: f64| {
            let mut a = AceC::new(AceCConfig::default());
            a.c0_encode_s = Some(c0_ms / 1e3);
            // The corrected sizes: phi 0.24 and 0.35.
            a.phi = [0.0, 0.24, 0.35];
            (1..400)
                .map(|i| f64::from(i) * 0.01)
                .find(|&r| a.choose(r, 30.0).level != Complexity::C0)
        };
        let hd = threshold(12.6).unwrap();
        assert!((1.6..1.85).contains(&hd), "1080p: {hd}");
        let qhd = threshold(3.15).unwrap();
        assert!((0.35..0.9).contains(&qhd), "960 px: {qhd}");
    }

    #[test]
    fn first_frames_without_history_are_c0() {
        let mut a = AceC::new(config());
        let p = plan(&mut a, &ctx(0, None));
        assert_eq!(p.complexity, Some(Complexity::C0));
        assert_eq!(p.columns.get("predicted_relative_size"), Some(&Value::Null));
        assert_eq!(p.columns.get("complexity"), Some(&Value::text("c0")));
        assert_eq!(
            p.rate_control,
            RateControl::abr_vbv(DataRate::from_mbps(3), TimeDelta::from_ms(500))
        );
    }

    /// Runs frames whose size is exactly `k * satd` with a constant encode time per level.
    fn drive(
        a: &mut AceC,
        satds: &[f64],
        bytes_per_satd: f64,
        encode_ms: [f64; 3],
    ) -> Vec<FramePlan> {
        let mut plans = Vec::new();
        for (i, &s) in satds.iter().enumerate() {
            let p = plan(a, &ctx(i as u64, Some(s)));
            let level = p.complexity.unwrap().index();
            let size = bytes_per_satd * s;
            a.on_frame_encoded(&frame(i as u64, size as i64, encode_ms[level]), &p);
            plans.push(p);
        }
        plans
    }

    #[test]
    fn size_model_learns_that_size_follows_satd() {
        // Frame sizes proportional to the SATD, which alternates 1000 / 3000: the mean is
        // 2000, so the relative sizes are 0.5 and 1.5, and rho_hat should learn them.
        let mut a = AceC::new(AceCConfig { levels: vec![Complexity::C0], ..config() });
        let satds: Vec<f64> = (0..300).map(|i| if i % 2 == 0 { 1000.0 } else { 3000.0 }).collect();
        let plans = drive(&mut a, &satds, 10.0, [4.0; 3]);
        let last: Vec<f64> = plans[290..].iter().map(|p| rho(p).unwrap()).collect();
        for (i, rho) in last.iter().enumerate() {
            let want = if (290 + i) % 2 == 0 { 0.5 } else { 1.5 };
            assert!((rho - want).abs() < 0.05, "frame {}: rho_hat {rho:.3}, want {want}", 290 + i);
        }
        let (w, offset) = a.size_model();
        assert!((w - 1.0).abs() < 0.05 && offset.abs() < 0.05, "w {w:.3} offset {offset:.3}");
    }

    #[test]
    fn ewma_updates_of_encode_time_and_phi() {
        let mut a = AceC::new(config());
        // Warm up with average frames at c0 (4 ms each).
        drive(&mut a, &vec![1000.0; 40], 10.0, [4.0; 3]);
        assert_eq!(a.c0_encode_s, Some(0.004));
        // A frame 5x the average: c2 (gain 5*0.15/30 - 9 ms = 16 ms).
        let p = plan(&mut a, &ctx(40, Some(5000.0)));
        assert_eq!(p.complexity, Some(Complexity::C2));
        let rho_hat = a.last_decision().unwrap().rho_hat;
        let avg = a.size_avg.unwrap();
        // It comes out 30% smaller than predicted and takes 12 ms (8 ms over c0).
        let size = 0.7 * rho_hat * avg;
        a.on_frame_encoded(&frame(40, size.round() as i64, 12.0), &p);
        let phi = a.phi()[2];
        let observed = 1.0 - size.round() / (rho_hat * avg);
        assert!((phi - (0.5 * 0.15 + 0.5 * observed)).abs() < 1e-9, "phi {phi}");
        let extra = a.extra_encode_time()[2].as_secs_f64();
        assert!((extra - (0.5 * 0.009 + 0.5 * 0.008)).abs() < 1e-6, "extra {extra}");
        // c1 untouched.
        assert_eq!(a.phi()[1], 0.10);
    }

    #[test]
    fn the_plan_carries_the_levels_planned_size_correction() {
        let scales = [1.0, 0.76, 0.65];
        let mut a = AceC::new(AceCConfig { planned_size_scale: scales, ..config() });
        drive(&mut a, &vec![1000.0; 40], 10.0, [4.0; 3]);
        // An average frame stays at c0 and unscaled; a 5x frame goes to c2 at c2's scale.
        let p = plan(&mut a, &ctx(40, Some(1000.0)));
        assert_eq!((p.complexity, p.planned_size_scale), (Some(Complexity::C0), 1.0));
        a.on_frame_encoded(&frame(40, 10_000, 4.0), &p);
        let p = plan(&mut a, &ctx(41, Some(5000.0)));
        assert_eq!((p.complexity, p.planned_size_scale), (Some(Complexity::C2), 0.65));
        // Without the correction the plan is never scaled.
        let mut off = AceC::new(AceCConfig { planned_size_scale: [1.0; 3], ..config() });
        drive(&mut off, &vec![1000.0; 40], 10.0, [4.0; 3]);
        let p = plan(&mut off, &ctx(40, Some(5000.0)));
        assert_eq!((p.complexity, p.planned_size_scale), (Some(Complexity::C2), 1.0));
    }

    #[test]
    fn a_level_that_saves_nothing_is_abandoned() {
        // Every frame at c2 comes out as large as predicted (phi observed 0): phi(c2) decays
        // geometrically and the big frames go back to c0 within a few frames.
        let mut a =
            AceC::new(AceCConfig { levels: vec![Complexity::C0, Complexity::C2], ..config() });
        drive(&mut a, &vec![1000.0; 40], 10.0, [4.0; 3]);
        let mut levels = Vec::new();
        for i in 40..60 {
            let satd = if i % 2 == 0 { 5000.0 } else { 1000.0 };
            let p = plan(&mut a, &ctx(i, Some(satd)));
            let rho_hat = a.last_decision().unwrap().rho_hat;
            let size = rho_hat * a.size_avg.unwrap();
            a.on_frame_encoded(
                &frame(
                    i,
                    size as i64,
                    if p.complexity == Some(Complexity::C2) { 13.0 } else { 4.0 },
                ),
                &p,
            );
            levels.push(p.complexity.unwrap());
        }
        assert_eq!(levels[0], Complexity::C2);
        assert!(levels[10..].iter().all(|&l| l == Complexity::C0), "{levels:?}");
    }
}
