//! Encoder controllers: turn the congestion controller's output (rate and internal signals)
//! into each frame's rate-control parameters. The baselines live here; MAE, ACE-C, Vidaptive
//! and Co-RTV add their own controllers behind the same trait.

pub mod ace_c;

use crate::cc::CcSignals;
use crate::encoder::{Complexity, EncodedFrame, FrameAnalysis, RateControl};
use crate::units::{DataRate, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};

/// What an encoder controller knows when a frame is captured.
#[derive(Clone, Copy, Debug)]
pub struct FrameContext {
    pub now: Timestamp,
    pub frame_index: u64,
    pub fps: f64,
    /// The congestion controller's target rate.
    pub cc_target: DataRate,
    pub cc_signals: CcSignals,
    /// The encoder's look at the frame, if the controller asked for it
    /// ([`EncoderController::wants_analysis`]) and the encoder can give it.
    pub analysis: Option<FrameAnalysis>,
}

/// How one frame is to be encoded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FramePlan {
    pub rate_control: RateControl,
    /// `None`: the encoder's own analysis settings.
    pub complexity: Option<Complexity>,
    /// The controller's prediction of the frame's size relative to the average frame
    /// (ACE-C's rho-hat), recorded with the frame.
    pub predicted_relative_size: Option<f64>,
    /// See [`FrameRequest::planned_size_scale`](crate::encoder::FrameRequest); 1 for none.
    pub planned_size_scale: f64,
}

impl From<RateControl> for FramePlan {
    fn from(rate_control: RateControl) -> Self {
        FramePlan {
            rate_control,
            complexity: None,
            predicted_relative_size: None,
            planned_size_scale: 1.0,
        }
    }
}

/// Decides how every frame is encoded.
pub trait EncoderController: Send {
    /// Whether [`FrameContext::analysis`] is needed (analysis costs time on a real encoder).
    fn wants_analysis(&self) -> bool {
        false
    }
    fn plan(&mut self, ctx: &FrameContext) -> FramePlan;
    /// The frame planned by the last `plan` call was encoded.
    fn on_frame_encoded(&mut self, _frame: &EncodedFrame, _plan: &FramePlan) {}
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum EncoderControllerConfig {
    /// ABR at the CC target with a VBV buffer of `vbv_buffer_ms` (x264 in WebRTC; the seeds'
    /// code uses 500 ms).
    AbrVbv {
        #[serde(default = "default_vbv_ms")]
        vbv_buffer_ms: f64,
    },
    /// CBR-like: a VBV buffer of one frame, so no frame exceeds the target frame size
    /// (the CBR baseline of ACE §6.1 and MAE §6).
    OneFrameVbv,
    /// ACE-C: complexity level per frame from the SATD size prediction (ACE §4.2).
    AceC(ace_c::AceCConfig),
}

fn default_vbv_ms() -> f64 {
    500.0
}

impl Default for EncoderControllerConfig {
    fn default() -> Self {
        EncoderControllerConfig::AbrVbv { vbv_buffer_ms: default_vbv_ms() }
    }
}

impl EncoderControllerConfig {
    pub fn build(&self) -> Box<dyn EncoderController> {
        match self {
            EncoderControllerConfig::AbrVbv { vbv_buffer_ms } => {
                Box::new(AbrVbv { vbv_buffer: TimeDelta::from_ms_f64(*vbv_buffer_ms) })
            }
            EncoderControllerConfig::OneFrameVbv => Box::new(OneFrameVbv),
            EncoderControllerConfig::AceC(c) => Box::new(ace_c::AceC::new(c.clone())),
        }
    }
}

/// ABR + VBV at the congestion controller's target.
pub struct AbrVbv {
    pub vbv_buffer: TimeDelta,
}

impl EncoderController for AbrVbv {
    fn plan(&mut self, ctx: &FrameContext) -> FramePlan {
        RateControl::abr_vbv(ctx.cc_target, self.vbv_buffer).into()
    }
}

/// VBV buffer of one frame at the target rate.
pub struct OneFrameVbv;

impl EncoderController for OneFrameVbv {
    fn plan(&mut self, ctx: &FrameContext) -> FramePlan {
        RateControl::abr_vbv(ctx.cc_target, TimeDelta::from_secs_f64(1.0 / ctx.fps)).into()
    }
}
