//! Vidaptive's encoder rate controller (Vidaptive §3.2, §3.3, §4, Fig. 4): the encoder pause
//! and the target `alpha x CC-Rate`.
//!
//! **Encoder pause** (§3.2, §4, App. B). At a capture slot, if the oldest packet in the pacer
//! has waited longer than `tau` (33 ms: "pausing encoding if packets from the previous frame
//! remain unsent"), encoding pauses: the slot is skipped (reason `"pause"`) and the pause holds
//! until the pacer queue (video and retransmissions; dummies never enter it) has drained.
//! Slots captured while paused are skipped too, each replacing the held one. On the drain (the
//! sender polls after every event) the held slot is encoded under libwebrtc's rule, which
//! Vidaptive reuses ("We reuse WebRTC's support for buffering the latest unencoded camera
//! frame until transmission resumes", §4): `VideoStreamEncoder` encodes its pending frame if
//! it is less than `kPendingFrameTimeoutMs` = 1 s old, else drops it. The third-party crate's
//! rule ([`ResumeRule::Crate`]) skips a held frame older than half a frame interval. A held
//! slot that is encoded late keeps its capture time (its latency counts from the capture).
//! The test runs at captures (the reading; the brief's A9); [`PauseCheck::EveryEvent`]
//! also pauses between captures, whenever the sender polls.
//!
//! **Target** (§3.3): `min(alpha x CC-Rate, max_video_rate)`, alpha from
//! [`super::vidaptive_alpha`]; CC-Rate is the congestion controller's encoder rate with
//! per-packet overhead removed ([`FrameContext::cc_target`]; for Copa and RoCC `cwnd / srtt`).
//! The clamp at the clip's maximum useful rate (the brief's A7: the rate above which dummies
//! stop, §3.1) keeps the target where it still buys quality. Rate control: ABR with a VBV of
//! `vbv_buffer_ms` at the target, as the other schemes' encoders.
//!
//! Per-frame columns: `alpha` (in force for the frame), `alpha_raw` (Eq. 3 at the latest
//! update, before smoothing) and `cc_rate_bps` (the CC-Rate the frame was planned with).

use super::vidaptive_alpha::{AlphaConfig, AlphaEstimator};
use super::{EncodeOrder, EncoderController, FrameContext, FrameDecision, FrameEvent, FramePlan};
use crate::check_range;
use crate::columns::Columns;
use crate::encoder::{EncodedFrame, RateControl};
use crate::units::{DataRate, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// When the pause test runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PauseCheck {
    /// At each capture slot (the issue's wording; App. B: "skips the current frame if the
    /// previous frame has been more than tau in the pacer queue").
    AtCapture,
    /// Also whenever the sender polls the controller (after every timeout, feedback and
    /// frame sent), as a transport-layer monitor would (§4).
    EveryEvent,
}

/// What happens to the held slot when the pacer drains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResumeRule {
    /// libwebrtc's `VideoStreamEncoder`: encode it if it is less than 1 s old.
    Libwebrtc,
    /// The third-party crate: skip it if it is older than half a frame interval.
    Crate,
}

impl ResumeRule {
    /// The oldest a held slot may be to be encoded on resume.
    pub fn max_age(self, fps: f64) -> TimeDelta {
        match self {
            // kPendingFrameTimeoutMs (video/video_stream_encoder.cc).
            ResumeRule::Libwebrtc => TimeDelta::from_ms(1000),
            ResumeRule::Crate => TimeDelta::from_secs_f64(0.5 / fps.max(1e-3)),
        }
    }
}

/// Parameters of Vidaptive's encoder controller (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VidaptiveConfig {
    /// The encoder pause (§3.2; `false`: Vidaptive w/o Latency safeguards, §5.4).
    pub pause: bool,
    /// Pause threshold tau (§3.2: 33 ms at 30 fps; swept 33/165/330 in Fig. 23).
    pub tau_ms: f64,
    /// When the pause test runs (default: at each capture slot).
    pub pause_check: PauseCheck,
    /// What happens to the held slot when the pacer drains (default: libwebrtc's 1 s rule).
    pub resume: ResumeRule,
    /// The target-bitrate fraction (§3.3).
    pub alpha: AlphaConfig,
    /// The clip's maximum useful video rate: the target never exceeds it (§3.1: 12 Mbps for
    /// their 1080p clips; per clip, with the pacer's `dummy.max_video_rate_bps`).
    pub max_video_rate_bps: f64,
    /// VBV buffer of the encoder's ABR (as the other schemes: 0.5 s).
    pub vbv_buffer_ms: f64,
}

impl Default for VidaptiveConfig {
    fn default() -> Self {
        VidaptiveConfig {
            pause: true,
            tau_ms: 33.0,
            pause_check: PauseCheck::AtCapture,
            resume: ResumeRule::Libwebrtc,
            alpha: AlphaConfig::default(),
            max_video_rate_bps: 12e6,
            vbv_buffer_ms: 500.0,
        }
    }
}

impl VidaptiveConfig {
    /// A configuration mistake, if any (the config paths under `encoder_controller`).
    pub fn validate(&self) -> Result<(), String> {
        check_range("encoder_controller.tau_ms", self.tau_ms, 0.0, false, 60_000.0)?;
        check_range(
            "encoder_controller.max_video_rate_bps",
            self.max_video_rate_bps,
            0.0,
            true,
            1e10,
        )?;
        check_range("encoder_controller.vbv_buffer_ms", self.vbv_buffer_ms, 0.0, true, 60_000.0)?;
        self.alpha.validate()
    }

    /// The controller, not paused, with alpha at its initial value.
    pub fn build(&self) -> Vidaptive {
        Vidaptive::new(self.clone())
    }
}

/// The controller's state; built by [`VidaptiveConfig::build`].
pub struct Vidaptive {
    config: VidaptiveConfig,
    alpha: AlphaEstimator,
    paused: bool,
    /// The latest slot captured while paused: (source index, capture time).
    held: Option<(u64, Timestamp)>,
    /// CC-Rate of each planned encode, in encode order, until it is encoded.
    planned: VecDeque<DataRate>,
    /// Frame id -> (target, CC-Rate) until the frame's service is reported.
    in_flight: BTreeMap<u64, (DataRate, DataRate)>,
    pauses: u64,
}

impl Vidaptive {
    /// The controller for `config`, not paused, with alpha at its initial value.
    pub fn new(config: VidaptiveConfig) -> Self {
        Vidaptive {
            alpha: AlphaEstimator::new(config.alpha.clone()),
            config,
            paused: false,
            held: None,
            planned: VecDeque::new(),
            in_flight: BTreeMap::new(),
            pauses: 0,
        }
    }

    /// Whether encoding is paused (waiting for the pacer queue to drain).
    pub fn is_paused(&self) -> bool {
        self.paused
    }
    /// The alpha in force.
    pub fn alpha(&self) -> f64 {
        self.alpha.alpha()
    }
    /// How many times encoding paused.
    pub fn pauses(&self) -> u64 {
        self.pauses
    }

    fn tau(&self) -> TimeDelta {
        let ms = if self.config.tau_ms.is_finite() { self.config.tau_ms.max(0.0) } else { 33.0 };
        TimeDelta::from_ms_f64(ms)
    }

    fn over_tau(&self, ctx: &FrameContext) -> bool {
        ctx.pacer.queue_packets > 0 && ctx.pacer.oldest_queue_time > self.tau()
    }

    fn max_video_rate(&self) -> DataRate {
        let cap = self.config.max_video_rate_bps;
        if cap.is_finite() && cap > 0.0 {
            DataRate::from_bps_f64(cap)
        } else {
            DataRate::INFINITY
        }
    }

    /// The plan of an encode now: target `min(alpha x CC-Rate, cap)`.
    fn frame_plan(&mut self, ctx: &FrameContext) -> FramePlan {
        let cc_rate = ctx.cc_target;
        let alpha = self.alpha.alpha();
        let target = cc_rate.scale(alpha).min(self.max_video_rate());
        let vbv = TimeDelta::from_ms_f64(if self.config.vbv_buffer_ms.is_finite() {
            self.config.vbv_buffer_ms.max(0.0)
        } else {
            500.0
        });
        let mut plan = FramePlan::from(RateControl::abr_vbv(target, vbv));
        let mut cols = Columns::default();
        cols.float("alpha", Some(alpha));
        cols.float("alpha_raw", self.alpha.last_raw());
        cols.rate("cc_rate_bps", Some(cc_rate));
        plan.columns = cols;
        self.planned.push_back(cc_rate);
        plan
    }
}

impl EncoderController for Vidaptive {
    fn plan(&mut self, ctx: &FrameContext) -> FrameDecision {
        self.alpha.maybe_update(ctx.now, ctx.cc_target);
        if self.config.pause {
            if self.paused && ctx.pacer.queue_packets == 0 {
                // Drained since the last poll: this newer slot supersedes the held one.
                self.paused = false;
                self.held = None;
            }
            if !self.paused && self.over_tau(ctx) {
                self.paused = true;
                self.pauses += 1;
            }
            if self.paused {
                self.held = Some((ctx.source_index, ctx.capture_time));
                return FrameDecision::Skip { reason: "pause" };
            }
        }
        self.frame_plan(ctx).into()
    }

    fn poll_encode(&mut self, ctx: &FrameContext) -> Option<EncodeOrder> {
        if !self.config.pause {
            return None;
        }
        if !self.paused && self.config.pause_check == PauseCheck::EveryEvent && self.over_tau(ctx) {
            self.paused = true;
            self.pauses += 1;
        }
        if !(self.paused && ctx.pacer.queue_packets == 0) {
            return None;
        }
        self.paused = false;
        let (source_index, capture_time) = self.held.take()?;
        if ctx.now.saturating_since(capture_time) >= self.config.resume.max_age(ctx.fps) {
            return None; // too old: stays skipped
        }
        Some(EncodeOrder { source_index, capture_time, plan: self.frame_plan(ctx) })
    }

    fn on_frame_encoded(&mut self, frame: &EncodedFrame, plan: &FramePlan) {
        let cc_rate = self.planned.pop_front().unwrap_or(plan.rate_control.target_rate);
        self.in_flight.insert(frame.frame_id, (plan.rate_control.target_rate, cc_rate));
        while self.in_flight.len() > 10_000 {
            self.in_flight.pop_first();
        }
    }

    fn on_frame_event(&mut self, event: &FrameEvent, _now: Timestamp) {
        match *event {
            FrameEvent::Serviced { frame_id, head_at, done_at } => {
                if let Some((target, cc_rate)) = self.in_flight.remove(&frame_id) {
                    self.alpha.on_serviced(done_at, done_at - head_at, target, cc_rate);
                }
            }
            FrameEvent::Purged { frame_id } => {
                self.in_flight.remove(&frame_id);
            }
            // A lost frame was still serviced by the pacer: alpha keeps its sample.
            FrameEvent::Skipped { .. } | FrameEvent::Lost { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::CcSignals;
    use crate::encoder_controller::PacerState;
    use crate::units::DataSize;

    /// The context of slot `slot` (captured at slot x 33.333 ms) seen at `now_ms`, with a
    /// pacer holding `packets` whose oldest waited `oldest_ms`.
    fn ctx(slot: u64, now_ms: f64, packets: usize, oldest_ms: f64) -> FrameContext {
        FrameContext {
            now: Timestamp::from_us((now_ms * 1000.0) as i64),
            source_index: slot,
            capture_time: Timestamp::from_us((slot as f64 * 1e6 / 30.0).round() as i64),
            fps: 30.0,
            cc_target: DataRate::from_mbps(2),
            cwnd_reduce_ratio: 0.0,
            cc_signals: CcSignals::default(),
            pacer: PacerState {
                queue_bytes: DataSize::from_bytes(1200 * packets as i64),
                queue_packets: packets,
                oldest_queue_time: TimeDelta::from_us((oldest_ms * 1000.0) as i64),
            },
            transport: Default::default(),
            last_frame_id: None,
            analysis: None,
        }
    }

    fn capture(c: &mut Vidaptive, slot: u64, packets: usize, oldest_ms: f64) -> FrameDecision {
        let t = slot as f64 * 1000.0 / 30.0;
        c.plan(&ctx(slot, t, packets, oldest_ms))
    }

    const PAUSE: FrameDecision = FrameDecision::Skip { reason: "pause" };

    #[test]
    fn pauses_over_tau_and_resumes_with_the_latest_held_frame() {
        let mut c = VidaptiveConfig::default().build();
        // Slot 0: empty pacer. Slot 1: the oldest packet waited exactly 33 ms, not more.
        assert!(matches!(capture(&mut c, 0, 0, 0.0), FrameDecision::Encode(_)));
        assert!(matches!(capture(&mut c, 1, 4, 33.0), FrameDecision::Encode(_)));
        // Slot 2: 33.1 ms > tau: skipped, held; encoding pauses.
        assert_eq!(capture(&mut c, 2, 4, 33.1), PAUSE);
        assert!(c.is_paused());
        // Slot 3: the old packets have left but the queue has not drained: still paused;
        // slot 3 replaces slot 2 as the held frame.
        assert_eq!(capture(&mut c, 3, 2, 5.0), PAUSE);
        // A poll while packets remain: nothing.
        assert!(c.poll_encode(&ctx(3, 105.0, 1, 10.0)).is_none());
        // The queue drains at 110 ms: slot 3 (captured at 100 ms, 10 ms old) is encoded now,
        // at alpha x CC-Rate, and keeps its capture time.
        let order = c.poll_encode(&ctx(3, 110.0, 0, 0.0)).expect("the held frame");
        assert_eq!(order.source_index, 3);
        assert_eq!(order.capture_time, Timestamp::from_us(100_000));
        assert_eq!(order.plan.rate_control.target_rate, DataRate::from_mbps(2));
        assert!(!c.is_paused());
        assert!(c.poll_encode(&ctx(3, 111.0, 0, 0.0)).is_none(), "once");
        assert!(matches!(capture(&mut c, 4, 3, 20.0), FrameDecision::Encode(_)));
        assert_eq!(c.pauses(), 1);
    }

    #[test]
    fn a_held_frame_too_old_at_the_drain_stays_skipped() {
        // libwebrtc's rule: under 1 s old. Paused at slot 2 (66.7 ms); slots up to 31 held
        // (1033 ms); the drain at 1050 ms: slot 31 is 17 ms old, encoded.
        let mut c = VidaptiveConfig::default().build();
        assert_eq!(capture(&mut c, 2, 9, 50.0), PAUSE);
        for slot in 3..=31 {
            assert_eq!(capture(&mut c, slot, 9, 10.0), PAUSE);
        }
        assert_eq!(c.poll_encode(&ctx(31, 1050.0, 0, 0.0)).map(|o| o.source_index), Some(31));
        // The same drain 1 s after slot 31's capture: dropped.
        let mut c = VidaptiveConfig::default().build();
        assert_eq!(capture(&mut c, 31, 9, 50.0), PAUSE);
        assert!(c.poll_encode(&ctx(31, 2033.4, 0, 0.0)).is_none());
        assert!(!c.is_paused());
        // The crate's rule: older than half a frame interval (16.7 ms) at the drain: dropped.
        let cfg = VidaptiveConfig { resume: ResumeRule::Crate, ..Default::default() };
        let mut c = cfg.build();
        assert_eq!(capture(&mut c, 3, 9, 50.0), PAUSE);
        assert!(c.poll_encode(&ctx(3, 117.0, 0, 0.0)).is_none(), "17 ms old");
        let mut c = cfg.build();
        assert_eq!(capture(&mut c, 3, 9, 50.0), PAUSE);
        assert!(c.poll_encode(&ctx(3, 116.0, 0, 0.0)).is_some(), "16 ms old");
    }

    #[test]
    fn checks_between_captures_only_when_asked_and_never_without_pause() {
        // EveryEvent: a poll that sees 40 ms of wait pauses before the next capture.
        let cfg = VidaptiveConfig { pause_check: PauseCheck::EveryEvent, ..Default::default() };
        let mut c = cfg.build();
        assert!(c.poll_encode(&ctx(0, 20.0, 3, 40.0)).is_none());
        assert!(c.is_paused());
        assert_eq!(capture(&mut c, 1, 1, 10.0), PAUSE);
        // AtCapture (default): the same poll does nothing.
        let mut c = VidaptiveConfig::default().build();
        assert!(c.poll_encode(&ctx(0, 20.0, 3, 40.0)).is_none());
        assert!(!c.is_paused());
        assert!(matches!(capture(&mut c, 1, 1, 10.0), FrameDecision::Encode(_)));
        // Pause off (Vidaptive w/o Latency safeguards): a 2 s old packet changes nothing.
        let mut c = VidaptiveConfig { pause: false, ..Default::default() }.build();
        assert!(matches!(capture(&mut c, 5, 99, 2000.0), FrameDecision::Encode(_)));
    }

    #[test]
    fn the_target_is_alpha_times_the_cc_rate_capped_at_the_clip_s_maximum() {
        let mut c = VidaptiveConfig { max_video_rate_bps: 1.5e6, ..Default::default() }.build();
        let FrameDecision::Encode(plan) = capture(&mut c, 0, 0, 0.0) else { panic!() };
        assert_eq!(plan.rate_control.target_rate, DataRate::from_kbps(1500), "2 Mbps capped");
        assert_eq!(plan.columns.get("alpha"), Some(&crate::columns::Value::Float(1.0)));
        assert_eq!(plan.columns.get("cc_rate_bps"), Some(&crate::columns::Value::Int(2_000_000)));
        // Serviced frames feed alpha: 30 frames of 66 ms at the CC-Rate they were encoded
        // at (2 Mbps, cap lifted), then the update 1 s after the first plan: alpha
        // 1 -> 0.875, the target 2 Mbps x 0.875 = 1.75 Mbps.
        let mut c = VidaptiveConfig::default().build();
        for slot in 0..30u64 {
            let id = slot;
            let FrameDecision::Encode(plan) = capture(&mut c, slot, 0, 0.0) else { panic!() };
            let frame = EncodedFrame {
                frame_id: id,
                size: DataSize::from_bytes(8000),
                is_keyframe: false,
                qp: 30.0,
                encode_time: TimeDelta::from_ms(5),
            };
            c.on_frame_encoded(&frame, &plan);
            let head = Timestamp::from_us((slot as f64 * 1e6 / 30.0) as i64);
            let done = head + TimeDelta::from_ms(66);
            c.on_frame_event(
                &FrameEvent::Serviced { frame_id: id, head_at: head, done_at: done },
                done,
            );
        }
        let FrameDecision::Encode(plan) = capture(&mut c, 31, 0, 0.0) else { panic!() };
        assert_eq!(c.alpha(), 0.875);
        assert_eq!(plan.rate_control.target_rate, DataRate::from_kbps(1750));
    }
}
