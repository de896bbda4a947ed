//! MAE (NSDI '26): the encoder's VBV buffer tightens while the congestion controller
//! pre-signals a bandwidth drop, and returns to normal when the queue drains.
//!
//! * **Buffer** (MAE §3.1, §4.1, §5.1, §6.5): x264 ABR with VBV max rate = the target and a
//!   buffer of `normal_buffer_ms` (500 ms: "half of the current bitrate") of the *current*
//!   target, recomputed every frame; while tight, 40 ms of the target (§6.5 "a ratio of
//!   0.04x", the artifact's `bitrate_kbps * 0.04`), or §5.1's one frame + 1 kbit
//!   ([`TightBuffer::OneFrame`]).
//! * **When** (§4.2, Fig. 16): tight from the congestion controller's pre-reaction event
//!   ([`CcSignals::pre_reaction_at`](crate::cc::CcSignals), GCC's trend above r x its
//!   threshold, see [`crate::cc::gcc::trendline`]) until it reports under-use
//!   (`underuse_at`, the queue draining). Event times are latched in the controller, so a
//!   trigger or a recovery between two frames is never lost: the frame is tight iff the latest
//!   trigger is newer than the latest recovery. With [`MaeTrigger::NativeOveruse`] GCC's own
//!   over-use is the trigger (§6.4's "MAE-No-Prediction").
//! * **Options** for what the paper leaves open: [`MaeMode::Code`] is the authors' artifact
//!   (`h264_encoder_impl.cc`): no latch and no recovery rule, a frame is tight iff the
//!   pre-reaction level carried by the latest congestion-control update is above 1 (their
//!   ratio r = 1); `quiet_timeout_ms` ends a tight period once the trigger has been silent
//!   that long, for the false alarm that under-use never ends (not in MAE; off by default).
//!   On Sluice's simulated links the paper's latch needs it: the pre-reaction fires at
//!   r x threshold = 3 (GCC's threshold sits at its floor of 6 on a clean link) on the
//!   trend's frame-to-frame noise, and nothing but a real queue draining ever pushes the trend
//!   below -6, so a false alarm latches until the next real drop (docs/results/mae.md).
//!
//! MAE does not skip frames, scale the target or change the congestion controller (§4.2,
//! Fig. 9, Fig. 15). Each frame records `mae_vbv_buffer_bytes`, `mae_tight`,
//! `mae_pre_reaction_level` and `encoder_adapted` (= tight, for the summary's
//! `adaptation_ratio`).

use super::{EncoderController, FrameContext, FrameDecision, FramePlan};
use crate::columns::Columns;
use crate::encoder::RateControl;
use crate::units::{DataRate, DataSize, TimeDelta};
use serde::{Deserialize, Serialize};

/// The buffer while a drop is suspected.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum TightBuffer {
    /// This long at the current target (MAE §6.5 and the artifact: 40 ms).
    Duration {
        /// The buffer's duration at the target, in ms.
        ms: f64,
    },
    /// One frame of the target plus this many kbit (MAE §5.1: "TargetBitrate / fps + 1";
    /// the +1 keeps x264 from clamping the buffer to a frame).
    OneFrame {
        /// Kilobits added to one frame's worth of the target.
        plus_kbit: f64,
    },
}

/// What starts a tight period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MaeTrigger {
    /// The congestion controller's pre-reaction (MAE §5.2).
    #[default]
    PreReaction,
    /// Its own over-use decision (MAE §6.4, "MAE-No-Prediction").
    NativeOveruse,
}

/// How tight periods begin and end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MaeMode {
    /// The paper (§4.2): latched from the trigger until the controller reports under-use.
    #[default]
    Paper,
    /// The authors' artifact: tight iff the latest pre-reaction level is above 1, frame by
    /// frame (no latch, no recovery rule).
    Code,
}

/// Parameters of MAE (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MaeConfig {
    /// The buffer normally, as a duration of the current target (MAE §3.1, §5.1: 500 ms).
    pub normal_buffer_ms: f64,
    /// The buffer while tight (MAE §6.5: 40 ms of the target).
    pub tight: TightBuffer,
    /// What starts a tight period in [`MaeMode::Paper`] (default: the pre-reaction).
    pub trigger: MaeTrigger,
    /// How tight periods begin and end (default: the paper's latch).
    pub mode: MaeMode,
    /// End a tight period when the trigger has not fired for this long, even without
    /// under-use: a suspected drop that did not come (not in MAE; `None`).
    pub quiet_timeout_ms: Option<f64>,
}

impl Default for MaeConfig {
    fn default() -> Self {
        MaeConfig {
            normal_buffer_ms: 500.0,
            tight: TightBuffer::Duration { ms: 40.0 },
            trigger: MaeTrigger::PreReaction,
            mode: MaeMode::Paper,
            quiet_timeout_ms: None,
        }
    }
}

impl MaeConfig {
    /// A configuration mistake, if any.
    pub fn validate(&self) -> Result<(), String> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(self.normal_buffer_ms) {
            return Err(format!(
                "encoder_controller.normal_buffer_ms must be > 0, got {}",
                self.normal_buffer_ms
            ));
        }
        match self.tight {
            TightBuffer::Duration { ms } if !positive(ms) => {
                return Err(format!("encoder_controller.tight.ms must be > 0, got {ms}"));
            }
            TightBuffer::OneFrame { plus_kbit } if !(plus_kbit.is_finite() && plus_kbit >= 0.0) => {
                return Err(format!(
                    "encoder_controller.tight.plus_kbit must be >= 0, got {plus_kbit}"
                ));
            }
            _ => {}
        }
        if let Some(ms) = self.quiet_timeout_ms {
            if !positive(ms) {
                return Err(format!("encoder_controller.quiet_timeout_ms must be > 0, got {ms}"));
            }
        }
        Ok(())
    }
}

/// The MAE encoder controller. It keeps no state of its own: the congestion controller
/// latches the event times, and each frame is decided from them.
pub struct Mae {
    config: MaeConfig,
}

impl Mae {
    /// The controller for `config`.
    pub fn new(config: MaeConfig) -> Self {
        Mae { config }
    }

    /// Whether this frame is encoded tight.
    fn tight(&self, ctx: &FrameContext) -> bool {
        let s = &ctx.cc_signals;
        if self.config.mode == MaeMode::Code {
            return s.pre_reaction_level.is_some_and(|l| l > 1.0);
        }
        let trigger = match self.config.trigger {
            MaeTrigger::PreReaction => s.pre_reaction_at,
            MaeTrigger::NativeOveruse => s.overuse_at,
        };
        let Some(trigger) = trigger else {
            return false;
        };
        if s.underuse_at.is_some_and(|u| u >= trigger) {
            return false;
        }
        self.config.quiet_timeout_ms.is_none_or(|ms| ctx.now - trigger < TimeDelta::from_ms_f64(ms))
    }

    fn buffer(&self, target: DataRate, fps: f64, tight: bool) -> DataSize {
        if !tight {
            return target * TimeDelta::from_ms_f64(self.config.normal_buffer_ms);
        }
        match self.config.tight {
            TightBuffer::Duration { ms } => target * TimeDelta::from_ms_f64(ms),
            TightBuffer::OneFrame { plus_kbit } => {
                let bits = target.as_bps_f64() / fps.max(1e-3) + plus_kbit * 1000.0;
                DataSize::from_bytes((bits / 8.0).round() as i64)
            }
        }
    }
}

impl EncoderController for Mae {
    fn plan(&mut self, ctx: &FrameContext) -> FrameDecision {
        let tight = self.tight(ctx);
        let buffer = self.buffer(ctx.cc_target, ctx.fps, tight);
        let mut columns = Columns::default();
        columns.size("mae_vbv_buffer_bytes", Some(buffer));
        columns.bool("mae_tight", tight);
        columns.float("mae_pre_reaction_level", ctx.cc_signals.pre_reaction_level);
        columns.bool(crate::columns::ADAPTED_COLUMN, tight);
        let rate_control = RateControl {
            vbv_buffer: buffer,
            ..RateControl::abr_vbv(ctx.cc_target, TimeDelta::ZERO)
        };
        FramePlan { columns, ..FramePlan::from(rate_control) }.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::CcSignals;
    use crate::columns::Value;
    use crate::encoder_controller::{EncoderControllerConfig, PacerState};
    use crate::units::Timestamp;

    fn ctx(now_ms: i64, target_kbps: i64, signals: CcSignals) -> FrameContext {
        FrameContext {
            now: Timestamp::from_ms(now_ms),
            source_index: (now_ms / 33) as u64,
            capture_time: Timestamp::from_ms(now_ms),
            fps: 30.0,
            cc_target: DataRate::from_kbps(target_kbps),
            cwnd_reduce_ratio: 0.0,
            cc_signals: signals,
            pacer: PacerState::default(),
            transport: Default::default(),
            last_frame_id: None,
            analysis: None,
        }
    }

    fn plan(c: &mut dyn EncoderController, ctx: &FrameContext) -> FramePlan {
        match c.plan(ctx) {
            FrameDecision::Encode(p) => p,
            FrameDecision::Skip { reason } => panic!("MAE never skips ({reason})"),
        }
    }

    fn at(ms: i64) -> Option<Timestamp> {
        Some(Timestamp::from_ms(ms))
    }

    fn tight(p: &FramePlan) -> bool {
        p.columns.get("mae_tight") == Some(&Value::Bool(true))
    }

    #[test]
    fn without_events_it_is_the_half_second_abr_controller() {
        let mut mae = Mae::new(MaeConfig::default());
        let mut abr = EncoderControllerConfig::AbrVbv { vbv_buffer_ms: 500.0 }.build();
        for (i, kbps) in [3000, 2500, 800, 12_000].into_iter().enumerate() {
            let c = ctx(33 * i as i64, kbps, CcSignals::default());
            let (m, a) = (plan(&mut mae, &c), plan(abr.as_mut(), &c));
            assert_eq!(m.rate_control, a.rate_control);
            assert!(!tight(&m));
        }
    }

    #[test]
    fn a_pre_reaction_tightens_the_next_frame_until_a_newer_underuse() {
        let mut mae = Mae::new(MaeConfig::default());
        // An event at 90 ms: the frame at 100 ms is tight, 40 ms of the 3 Mbps target.
        let s = CcSignals { pre_reaction_at: at(90), underuse_at: at(10), ..Default::default() };
        let p = plan(&mut mae, &ctx(100, 3000, s));
        assert!(tight(&p));
        assert_eq!(p.rate_control.vbv_buffer, DataSize::from_bytes(15_000));
        assert_eq!(p.rate_control.vbv_max_rate, DataRate::from_kbps(3000));
        // The target falls while tight: the buffer follows it (40 ms of 1 Mbps).
        let p = plan(&mut mae, &ctx(133, 1000, s));
        assert_eq!(p.rate_code(), (true, 5_000));
        // Under-use older than the event changes nothing; newer ends the period at once.
        let s = CcSignals { pre_reaction_at: at(90), underuse_at: at(80), ..Default::default() };
        assert!(tight(&plan(&mut mae, &ctx(166, 1000, s))));
        let s = CcSignals { pre_reaction_at: at(90), underuse_at: at(180), ..Default::default() };
        let p = plan(&mut mae, &ctx(200, 1000, s));
        assert_eq!(p.rate_code(), (false, 62_500));
        // Both since the last frame: the later one decides.
        let s = CcSignals { pre_reaction_at: at(230), underuse_at: at(220), ..Default::default() };
        assert!(tight(&plan(&mut mae, &ctx(233, 1000, s))));
    }

    #[test]
    fn one_frame_buffer_is_a_frame_plus_a_kilobit() {
        let cfg =
            MaeConfig { tight: TightBuffer::OneFrame { plus_kbit: 1.0 }, ..Default::default() };
        let mut mae = Mae::new(cfg);
        let s = CcSignals { pre_reaction_at: at(0), ..Default::default() };
        // 3 Mbps / 30 fps = 100 kbit = 12 500 B, + 1 kbit = 12 625 B.
        assert_eq!(plan(&mut mae, &ctx(10, 3000, s)).rate_code(), (true, 12_625));
    }

    #[test]
    fn native_overuse_trigger_ignores_the_pre_reaction() {
        let cfg = MaeConfig { trigger: MaeTrigger::NativeOveruse, ..Default::default() };
        let mut mae = Mae::new(cfg);
        let s = CcSignals { pre_reaction_at: at(50), ..Default::default() };
        assert!(!tight(&plan(&mut mae, &ctx(100, 3000, s))));
        let s = CcSignals { pre_reaction_at: at(50), overuse_at: at(120), ..Default::default() };
        assert!(tight(&plan(&mut mae, &ctx(133, 3000, s))));
    }

    #[test]
    fn code_mode_follows_the_level_frame_by_frame() {
        let cfg = MaeConfig { mode: MaeMode::Code, ..Default::default() };
        let mut mae = Mae::new(cfg);
        let level = |l: f64| CcSignals {
            pre_reaction_level: Some(l),
            pre_reaction_at: at(0),
            ..Default::default()
        };
        assert!(tight(&plan(&mut mae, &ctx(33, 3000, level(1.4)))));
        // No latch: the next frame with a level below 1 is normal, whatever the latched times.
        assert!(!tight(&plan(&mut mae, &ctx(66, 3000, level(0.9)))));
    }

    #[test]
    fn quiet_timeout_ends_a_period_the_trigger_stopped_feeding() {
        let cfg = MaeConfig { quiet_timeout_ms: Some(100.0), ..Default::default() };
        let mut mae = Mae::new(cfg);
        let s = CcSignals { pre_reaction_at: at(0), ..Default::default() };
        assert!(tight(&plan(&mut mae, &ctx(10, 3000, s))));
        assert!(tight(&plan(&mut mae, &ctx(99, 3000, s))));
        assert!(!tight(&plan(&mut mae, &ctx(100, 3000, s))));
        // The trigger firing again keeps it tight for another 100 ms from then.
        let s = CcSignals { pre_reaction_at: at(150), ..Default::default() };
        assert!(tight(&plan(&mut mae, &ctx(160, 3000, s))));
        assert!(tight(&plan(&mut mae, &ctx(240, 3000, s))));
        // Under-use still ends it before the time-out.
        let s = CcSignals { pre_reaction_at: at(150), underuse_at: at(200), ..Default::default() };
        assert!(!tight(&plan(&mut mae, &ctx(210, 3000, s))));
        assert!(MaeConfig { quiet_timeout_ms: Some(0.0), ..Default::default() }
            .validate()
            .is_err());
    }

    #[test]
    fn config_json_and_validation() {
        let c: MaeConfig = serde_json::from_str(
            r#"{"tight": {"kind": "one-frame", "plus_kbit": 1}, "mode": "code"}"#,
        )
        .unwrap();
        assert_eq!(c.tight, TightBuffer::OneFrame { plus_kbit: 1.0 });
        assert_eq!(c.mode, MaeMode::Code);
        assert_eq!(c.normal_buffer_ms, 500.0);
        assert!(MaeConfig { normal_buffer_ms: 0.0, ..Default::default() }.validate().is_err());
        let bad = MaeConfig { tight: TightBuffer::Duration { ms: -1.0 }, ..Default::default() };
        assert!(bad.validate().is_err());
        assert!(serde_json::from_str::<MaeConfig>(r#"{"tihgt": 1}"#).is_err());
    }

    impl FramePlan {
        /// (tight, VBV buffer bytes).
        fn rate_code(&self) -> (bool, i64) {
            (tight(self), self.rate_control.vbv_buffer.as_bytes())
        }
    }
}
