//! Encoder controllers: turn the congestion controller's output (rate and internal signals)
//! and what the sender reports about its frames into what is encoded, when and how: each
//! capture slot is encoded (with its rate control, complexity level and reference) or
//! skipped; held or dropped slots can be encoded later; frames can be purged from the
//! pacer. The baselines live here; ACE-C, MAE, Vidaptive and Co-RTV add their own
//! controllers behind the same trait. [`video_stream_encoder`] is a stage that wraps any of
//! them with libwebrtc's frame dropping ([`frame_dropper`], congestion-window drops).

pub mod ace_c;
pub mod co_rtv;
pub mod frame_dropper;
pub mod loss_recovery;
pub mod mae;
pub mod salsify;
pub mod vidaptive;
pub mod vidaptive_alpha;
pub mod video_stream_encoder;

use crate::cc::CcSignals;
use crate::columns::Columns;
use crate::encoder::{Complexity, EncodedFrame, FrameAnalysis, RateControl};
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};

/// The sender's pacer as an encoder controller sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PacerState {
    /// Bytes waiting in the pacer queue.
    pub queue_bytes: DataSize,
    /// Packets waiting in the pacer queue.
    pub queue_packets: usize,
    /// How long the oldest waiting packet has waited (Vidaptive's pause test).
    pub oldest_queue_time: TimeDelta,
}

/// The sender's transport as an encoder controller sees it: how much more the congestion
/// window lets out now (Salsify sizes each frame to it).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TransportState {
    /// Bytes the congestion controller lets be in flight; `None`: no window.
    pub congestion_window: Option<DataSize>,
    /// Bytes sent and not yet acknowledged or declared lost.
    pub in_flight: DataSize,
}

/// What an encoder controller knows when it decides about a capture slot.
#[derive(Clone, Copy, Debug)]
pub struct FrameContext {
    /// The time of the decision.
    pub now: Timestamp,
    /// The capture slot: index of the source frame (0, 1, 2, ... at the frame rate). For
    /// [`EncoderController::poll_encode`], the latest captured slot.
    pub source_index: u64,
    /// Capture time of `source_index`.
    pub capture_time: Timestamp,
    /// The capture frame rate, frames per second.
    pub fps: f64,
    /// The rate the encoder may use: the congestion controller's encoder rate (its target,
    /// or less while it pushes back) minus per-packet overhead.
    pub cc_target: DataRate,
    /// The share of `cc_target` the congestion controller would have the encoder shed by
    /// dropping frames ([`NetworkControlUpdate::cwnd_reduce_ratio`](crate::cc::NetworkControlUpdate):
    /// GCC's congestion-window pushback in libwebrtc's default `DropFrame` mode); 0 when
    /// unused. Only the [`video_stream_encoder`] stage acts on it.
    pub cwnd_reduce_ratio: f64,
    /// The congestion controller's signals (pre-reaction, over- and under-use times).
    pub cc_signals: CcSignals,
    /// The sender's pacer queue now.
    pub pacer: PacerState,
    /// The congestion window and the bytes in flight now.
    pub transport: TransportState,
    /// The id of the last frame encoded (`None` before the first).
    pub last_frame_id: Option<u64>,
    /// The encoder's look at the frame, if the controller asked for it
    /// ([`EncoderController::wants_analysis`]) and the encoder can give it.
    pub analysis: Option<FrameAnalysis>,
}

/// How one frame is to be encoded.
#[derive(Clone, Debug, PartialEq)]
pub struct FramePlan {
    /// The rate control of the encode (target, VBV).
    pub rate_control: RateControl,
    /// `None`: the encoder's own analysis settings.
    pub complexity: Option<Complexity>,
    /// See [`FrameRequest::planned_size_scale`](crate::encoder::FrameRequest); 1 for none.
    pub planned_size_scale: f64,
    /// The frame this one predicts from (a frame id): `None` for the previous encode; an
    /// older frame makes the encoder drop every reference newer than it (re-referencing after
    /// frames were lost or dropped), without a keyframe.
    pub reference: Option<u64>,
    /// The controller's named per-frame state, recorded with the frame (ACE-C: `complexity`,
    /// `predicted_relative_size`; MAE: the VBV buffer and whether it is tight; ...).
    pub columns: Columns,
}

impl From<RateControl> for FramePlan {
    fn from(rate_control: RateControl) -> Self {
        FramePlan {
            rate_control,
            complexity: None,
            planned_size_scale: 1.0,
            reference: None,
            columns: Columns::default(),
        }
    }
}

/// What to do with a capture slot.
#[derive(Clone, Debug, PartialEq)]
pub enum FrameDecision {
    /// Encode it now.
    Encode(FramePlan),
    /// Leave it unencoded (for now: the controller may still encode it later through
    /// [`EncoderController::poll_encode`]). `reason` is recorded with the slot if it is never
    /// encoded ("frame-dropper", "pause", ...).
    Skip {
        /// Why the slot was skipped (`"pause"`, `"frame-dropper"`, ...).
        reason: &'static str,
    },
}

impl From<FramePlan> for FrameDecision {
    fn from(plan: FramePlan) -> Self {
        FrameDecision::Encode(plan)
    }
}

impl From<RateControl> for FrameDecision {
    fn from(rate_control: RateControl) -> Self {
        FrameDecision::Encode(rate_control.into())
    }
}

/// An encode the controller asks for outside a capture slot's own decision: a held slot
/// released, or an earlier slot encoded again.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodeOrder {
    /// The capture slot (source frame) to encode.
    pub source_index: u64,
    /// The capture time the frame is recorded with (its latency counts from it).
    pub capture_time: Timestamp,
    /// How to encode it.
    pub plan: FramePlan,
}

/// What happened to a frame after it was encoded, as the sender tells its controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameEvent {
    /// The frame's first packet reached the head of the pacer queue at `head_at` (its enqueue,
    /// or the departure of the frame ahead of it) and its last packet left at `done_at`:
    /// `done_at - head_at` is the frame's service time (Vidaptive §3.3, §4).
    Serviced {
        /// The frame's id.
        frame_id: u64,
        /// When its first packet reached the head of the pacer queue.
        head_at: Timestamp,
        /// When its last packet left the pacer.
        done_at: Timestamp,
    },
    /// The frame's packets still waiting were removed from the pacer ([`SenderCommand`]).
    Purged {
        /// The purged frame's id.
        frame_id: u64,
    },
    /// A capture slot the controller skipped.
    Skipped {
        /// The skipped capture slot.
        source_index: u64,
    },
    /// A packet of the frame did not reach the receiver (a NACK or transport feedback said
    /// so), for a reason the sender was not told of (frames a bottleneck reported dropping are
    /// not announced); once per frame, before any retransmission of it.
    Lost {
        /// The id of the frame that lost a packet.
        frame_id: u64,
    },
}

/// A request from the encoder controller to the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SenderCommand {
    /// Remove every frame with an id at or above `from_frame_id` from the pacer (and from
    /// the encoder's output not yet packetized); they are not retransmitted either.
    PurgeFrames {
        /// The first frame id to purge.
        from_frame_id: u64,
    },
}

/// Decides how every frame is encoded.
///
/// The sender calls [`plan`](Self::plan) once per capture slot and, after every event, polls
/// [`poll_encode`](Self::poll_encode) and [`poll_command`](Self::poll_command) until they
/// return `None`; their results can change after `plan`, `on_frame_encoded` and
/// `on_frame_event`.
pub trait EncoderController: Send {
    /// Whether [`FrameContext::analysis`] is needed (analysis costs time on a real encoder).
    fn wants_analysis(&self) -> bool {
        false
    }
    /// Decides about a new capture slot.
    fn plan(&mut self, ctx: &FrameContext) -> FrameDecision;
    /// An encode wanted now besides the capture slots' own.
    fn poll_encode(&mut self, _ctx: &FrameContext) -> Option<EncodeOrder> {
        None
    }
    /// A request to the sender.
    fn poll_command(&mut self) -> Option<SenderCommand> {
        None
    }
    /// The frame planned with `plan` was encoded (called in encode order, when it is done).
    fn on_frame_encoded(&mut self, _frame: &EncodedFrame, _plan: &FramePlan) {}
    /// What happened to a frame in the pacer, or to a slot.
    fn on_frame_event(&mut self, _event: &FrameEvent, _now: Timestamp) {}
    /// A bottleneck node's report (Co-RTV); the default ignores it.
    fn on_bottleneck_report(&mut self, _report: &crate::packet::BottleneckReport, _now: Timestamp) {
    }
}

/// Encoder-controller choice and parameters, part of a scheme (JSON: tagged by `kind`). The
/// default is `AbrVbv` with a 500 ms buffer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum EncoderControllerConfig {
    /// ABR at the CC target with a VBV buffer of `vbv_buffer_ms` (x264 in WebRTC; the seeds'
    /// code uses 500 ms).
    AbrVbv {
        /// VBV buffer as a duration at the target rate, in ms (default 500).
        #[serde(default = "default_vbv_ms")]
        vbv_buffer_ms: f64,
    },
    /// CBR-like: a VBV buffer of one frame, so no frame exceeds the target frame size
    /// (the CBR baseline of ACE §6.1 and MAE §6). With `filler`, frames are padded so the
    /// stream never runs below the target either (x264's filler data: MAE's CBR).
    OneFrameVbv {
        /// Pad frames with filler data (default off).
        #[serde(default, skip_serializing_if = "is_false")]
        filler: bool,
    },
    /// ACE-C: complexity level per frame from the SATD size prediction (ACE §4.2).
    AceC(ace_c::AceCConfig),
    /// Co-RTV's sender (§III-C): `R = SndRate - QLen / tau` on the bottleneck's reports,
    /// Eq. 7 and Eq. 8 on a drop, the dropped frames re-encoded from the frame before D.
    CoRtv(co_rtv::CoRtvConfig),
    /// Re-referencing instead of retransmission after a loss (Salsify; the sender of Co-RTV's
    /// "w/o fb" baseline).
    LossRecovery(loss_recovery::LossRecoveryConfig),
    /// MAE: the VBV buffer tightens while the congestion controller pre-signals a drop
    /// (MAE §4, §5.1).
    Mae(mae::MaeConfig),
    /// Vidaptive: encoder pause and target `alpha x CC-Rate` (Vidaptive §3.2, §3.3).
    Vidaptive(vidaptive::VidaptiveConfig),
}

fn is_false(b: &bool) -> bool {
    !*b
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
    /// The controller this config describes (the scheme adds its Salsify and frame-drop stages).
    pub fn build(&self) -> Box<dyn EncoderController> {
        match self {
            EncoderControllerConfig::AbrVbv { vbv_buffer_ms } => {
                Box::new(AbrVbv { vbv_buffer: TimeDelta::from_ms_f64(*vbv_buffer_ms) })
            }
            EncoderControllerConfig::OneFrameVbv { filler } => {
                Box::new(OneFrameVbv { filler: *filler })
            }
            EncoderControllerConfig::AceC(c) => Box::new(ace_c::AceC::new(c.clone())),
            EncoderControllerConfig::CoRtv(c) => Box::new(c.build()),
            EncoderControllerConfig::LossRecovery(c) => Box::new(c.build()),
            EncoderControllerConfig::Mae(c) => Box::new(mae::Mae::new(c.clone())),
            EncoderControllerConfig::Vidaptive(c) => Box::new(c.build()),
        }
    }

    /// A configuration mistake, if any.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            EncoderControllerConfig::AbrVbv { vbv_buffer_ms }
                if !(vbv_buffer_ms.is_finite() && *vbv_buffer_ms > 0.0) =>
            {
                Err(format!("encoder_controller.vbv_buffer_ms must be > 0, got {vbv_buffer_ms}"))
            }
            EncoderControllerConfig::Mae(c) => c.validate(),
            EncoderControllerConfig::Vidaptive(c) => c.validate(),
            EncoderControllerConfig::CoRtv(c) => c.validate(),
            EncoderControllerConfig::LossRecovery(c) => c.validate(),
            EncoderControllerConfig::AceC(c) => c.validate(),
            _ => Ok(()),
        }
    }

    /// The reference frames the encoder must keep at least for this controller (one that
    /// re-references past dropped frames needs several), if it asks for any.
    pub fn reference_frames(&self) -> Option<u32> {
        match self {
            EncoderControllerConfig::CoRtv(c) => Some(c.reference_frames),
            EncoderControllerConfig::LossRecovery(c) => Some(c.reference_frames),
            _ => None,
        }
    }
}

/// ABR + VBV at the congestion controller's target.
pub struct AbrVbv {
    /// VBV buffer as a duration at the target rate.
    pub vbv_buffer: TimeDelta,
}

impl EncoderController for AbrVbv {
    fn plan(&mut self, ctx: &FrameContext) -> FrameDecision {
        RateControl::abr_vbv(ctx.cc_target, self.vbv_buffer).into()
    }
}

/// VBV buffer of one frame at the target rate, optionally with filler data.
pub struct OneFrameVbv {
    /// Pad frames with filler data (x264 `b_filler`) so the stream never runs below the target.
    pub filler: bool,
}

impl EncoderController for OneFrameVbv {
    fn plan(&mut self, ctx: &FrameContext) -> FrameDecision {
        RateControl::abr_vbv(ctx.cc_target, TimeDelta::from_secs_f64(1.0 / ctx.fps))
            .with_filler(self.filler)
            .into()
    }
}
