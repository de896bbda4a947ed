//! libwebrtc's VideoStreamEncoder frame dropping (`video/video_stream_encoder.cc`, M119) as a
//! stage in front of any encoder controller: per capture slot, before the wrapped controller
//! is asked, the slot may be dropped by
//!
//! 1. **congestion-window pushback** (`UpdateTargetBitrate`, `OnFrame`): when the congestion
//!    controller reports `cwnd_reduce_ratio > 0.01` (GCC's pushback in its default `DropFrame`
//!    mode, [`crate::cc::gcc::congestion_window_pushback`]) and the target is above the codec's
//!    minimum, `reduce = min(target x ratio, target - minimum)`, `N = max(2, target / reduce)`
//!    (integer division), one slot in N is dropped (a counter that runs while an interval is
//!    set; the slot where `counter % N == 0` goes), and the encoder's target is lowered by
//!    `target / N`. Reason `"cwnd-pushback"`.
//! 2. **the media-optimisation frame dropper** (`MaybeEncodeVideoFrame`, `OnEncodedImage`'s
//!    post-encode step, `OnBitrateUpdated`; [`super::frame_dropper`]): each slot that got past
//!    1 leaks the dropper's bucket at the input frame rate and asks it whether to drop; every
//!    encoded frame fills the bucket with its size (keyframe or delta); on a rate change the
//!    dropper gets `SetRates((target_bps + 500) / 1000, fps)` with the target after the
//!    reduction of 1. libwebrtc consults it when the encoder's rate controller is not
//!    trusted (M119: H.264 in software, OpenH264; libvpx and libaom are trusted). Reason
//!    `"frame-dropper"`.
//!
//! Slots that pass go to the wrapped controller with `cc_target` lowered as in 1 (and
//! `cwnd_reduce_ratio` 0, since this stage acted on it). A dropped slot is skipped (the next
//! frame references the last one encoded, no keyframe is asked for) and the wrapped
//! controller never hears of it. Everything else is forwarded. Frame plans get the stage's
//! state as columns: `vse_encoder_target_bps`, `vse_cwnd_drop_interval` (with the cwnd stage),
//! `vse_dropper_bucket_kbit`, `vse_dropper_bucket_max_kbit`, `vse_dropper_drop_ratio` (with the
//! frame dropper; after the slot's leak, before its fill).
//!
//! libwebrtc applies each rate update as it arrives; here the stage reads the rates in force
//! at every capture slot and every time the sender polls it after an event
//! ([`EncoderController::poll_encode`]: after every timeout, feedback and frame sent), which
//! sees every update but merges those that come between two polls.

use super::frame_dropper::FrameDropper;
use super::{
    EncodeOrder, EncoderController, FrameContext, FrameDecision, FrameEvent, FramePlan,
    SenderCommand,
};
use crate::columns::Columns;
use crate::encoder::EncodedFrame;
use crate::units::{DataRate, Timestamp};
use serde::{Deserialize, Serialize};

/// The frame-dropping stage of a scheme (`SchemeConfig::frame_drop`). Both off (the default)
/// leave the encoder controller unwrapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FrameDropConfig {
    /// The media-optimisation frame dropper: `modules/video_coding/utility/frame_dropper.cc`,
    /// consulted before every encode by `video/video_stream_encoder.cc`
    /// (`MaybeEncodeVideoFrame`) for encoders whose rate controller is not trusted.
    pub frame_dropper: bool,
    /// Dropping one slot in N while the congestion controller reports a
    /// `cwnd_reduce_ratio` (`video/video_stream_encoder.cc`, `UpdateTargetBitrate` and
    /// `OnFrame`): GCC's congestion-window pushback in libwebrtc's default `DropFrame` mode
    /// acts only through this; without it that pushback has no effect.
    pub cwnd_pushback: bool,
}

impl FrameDropConfig {
    /// Both stages, as libwebrtc M119 runs them.
    pub const LIBWEBRTC: FrameDropConfig =
        FrameDropConfig { frame_dropper: true, cwnd_pushback: true };

    /// Whether both stages are off (the controller is then left unwrapped).
    pub fn is_off(&self) -> bool {
        !self.frame_dropper && !self.cwnd_pushback
    }

    /// `inner` behind this stage (`inner` itself when both parts are off).
    pub fn wrap(&self, inner: Box<dyn EncoderController>) -> Box<dyn EncoderController> {
        if self.is_off() {
            inner
        } else {
            Box::new(VideoStreamEncoder::new(*self, inner))
        }
    }
}

/// The codec's minimum rate: no cwnd drops at or below it (`send_codec_.minBitrate`, which is
/// libwebrtc's `kDefaultMinVideoBitrateBps`, 30 kbps, for a single stream).
pub const CODEC_MIN_RATE: DataRate = DataRate::from_kbps(30);
/// Reduce ratios at or below this are ignored (`UpdateTargetBitrate`: 1 %).
pub const MIN_CWND_REDUCE_RATIO: f64 = 0.01;

/// `UpdateTargetBitrate`: the cwnd drop interval N and the encoder's lowered target, or
/// `None` (no cwnd drops; the target unchanged).
pub fn cwnd_drop_interval(target: DataRate, cwnd_reduce_ratio: f64) -> Option<(u64, DataRate)> {
    let target_bps = target.as_bps();
    let min_bps = CODEC_MIN_RATE.as_bps();
    if !(cwnd_reduce_ratio > MIN_CWND_REDUCE_RATIO && target_bps > 0 && target_bps > min_bps) {
        return None;
    }
    let reduce_bps = ((target_bps as f64 * cwnd_reduce_ratio) as i64).min(target_bps - min_bps);
    if reduce_bps <= 0 {
        return None;
    }
    // At most one slot in two.
    let interval = (target_bps / reduce_bps).max(2);
    Some((interval as u64, target - target / interval))
}

/// The input frame rate VideoStreamEncoder hands the dropper (a whole number of frames per
/// second, `GetInputFramerateFps`).
fn input_fps(fps: f64) -> u32 {
    if fps.is_finite() && fps > 0.0 {
        fps.round() as u32
    } else {
        0
    }
}

/// The stage around an encoder controller.
pub struct VideoStreamEncoder {
    config: FrameDropConfig,
    inner: Box<dyn EncoderController>,
    dropper: Option<FrameDropper>,
    /// The cwnd drop interval in force (`cwnd_frame_drop_interval_`).
    cwnd_drop_interval: Option<u64>,
    /// `cwnd_frame_counter_`: counts slots while an interval is set.
    cwnd_frame_counter: u64,
    /// The target the wrapped controller gets (after the cwnd reduction).
    encoder_target: DataRate,
    /// The rates last given to the dropper (kbps, fps).
    dropper_rates: Option<(i64, u32)>,
    /// The slot this stage itself skipped last (its skip event is not forwarded).
    own_skip: Option<u64>,
}

impl VideoStreamEncoder {
    /// The stage around `inner` (with the frame dropper if `config` has it).
    pub fn new(config: FrameDropConfig, inner: Box<dyn EncoderController>) -> Self {
        VideoStreamEncoder {
            config,
            inner,
            dropper: config.frame_dropper.then(FrameDropper::new),
            cwnd_drop_interval: None,
            cwnd_frame_counter: 0,
            encoder_target: DataRate::ZERO,
            dropper_rates: None,
            own_skip: None,
        }
    }

    /// The dropper's state (`None` without it).
    pub fn frame_dropper(&self) -> Option<&FrameDropper> {
        self.dropper.as_ref()
    }

    /// A rate update (`OnBitrateUpdated`): the cwnd interval and the lowered target, then the
    /// dropper's rates if they changed.
    fn on_rates(&mut self, ctx: &FrameContext) {
        let cwnd = if self.config.cwnd_pushback {
            cwnd_drop_interval(ctx.cc_target, ctx.cwnd_reduce_ratio)
        } else {
            None
        };
        self.cwnd_drop_interval = cwnd.map(|(n, _)| n);
        self.encoder_target = cwnd.map_or(ctx.cc_target, |(_, t)| t);
        if let Some(d) = &mut self.dropper {
            let rates = ((self.encoder_target.as_bps() + 500) / 1000, input_fps(ctx.fps));
            if self.dropper_rates != Some(rates) {
                d.set_rates(rates.0 as f32, rates.1 as f32);
                self.dropper_rates = Some(rates);
            }
        }
    }

    /// What the wrapped controller sees.
    fn inner_context(&self, ctx: &FrameContext) -> FrameContext {
        FrameContext {
            cc_target: self.encoder_target,
            cwnd_reduce_ratio: if self.config.cwnd_pushback { 0.0 } else { ctx.cwnd_reduce_ratio },
            ..*ctx
        }
    }

    fn add_columns(&self, columns: &mut Columns) {
        columns.rate("vse_encoder_target_bps", Some(self.encoder_target));
        if self.config.cwnd_pushback {
            columns.int("vse_cwnd_drop_interval", self.cwnd_drop_interval.map(|n| n as i64));
        }
        if let Some(d) = &self.dropper {
            columns.float("vse_dropper_bucket_kbit", Some(d.accumulator_kbits() as f64));
            columns.float("vse_dropper_bucket_max_kbit", Some(d.accumulator_max_kbits() as f64));
            columns.float("vse_dropper_drop_ratio", Some(d.drop_ratio() as f64));
        }
    }

    fn skip(&mut self, source_index: u64, reason: &'static str) -> FrameDecision {
        self.own_skip = Some(source_index);
        FrameDecision::Skip { reason }
    }
}

impl EncoderController for VideoStreamEncoder {
    fn wants_analysis(&self) -> bool {
        self.inner.wants_analysis()
    }

    fn plan(&mut self, ctx: &FrameContext) -> FrameDecision {
        self.on_rates(ctx);
        if let Some(n) = self.cwnd_drop_interval {
            let count = self.cwnd_frame_counter;
            self.cwnd_frame_counter += 1;
            if count.is_multiple_of(n) {
                return self.skip(ctx.source_index, "cwnd-pushback");
            }
        }
        if let Some(d) = &mut self.dropper {
            d.leak(input_fps(ctx.fps));
            if d.drop_frame() {
                return self.skip(ctx.source_index, "frame-dropper");
            }
        }
        let mut decision = self.inner.plan(&self.inner_context(ctx));
        if let FrameDecision::Encode(plan) = &mut decision {
            self.add_columns(&mut plan.columns);
        }
        decision
    }

    fn poll_encode(&mut self, ctx: &FrameContext) -> Option<EncodeOrder> {
        self.on_rates(ctx);
        let mut order = self.inner.poll_encode(&self.inner_context(ctx))?;
        self.add_columns(&mut order.plan.columns);
        Some(order)
    }

    fn poll_command(&mut self) -> Option<SenderCommand> {
        self.inner.poll_command()
    }

    fn on_frame_encoded(&mut self, frame: &EncodedFrame, plan: &FramePlan) {
        if let Some(d) = &mut self.dropper {
            if frame.size.as_bytes() > 0 {
                d.fill(frame.size.as_bytes(), !frame.is_keyframe);
            }
        }
        self.inner.on_frame_encoded(frame, plan);
    }

    fn on_frame_event(&mut self, event: &FrameEvent, now: Timestamp) {
        if let FrameEvent::Skipped { source_index } = event {
            if self.own_skip == Some(*source_index) {
                self.own_skip = None;
                return;
            }
        }
        self.inner.on_frame_event(event, now);
    }

    fn on_bottleneck_report(&mut self, report: &crate::packet::BottleneckReport, now: Timestamp) {
        self.inner.on_bottleneck_report(report, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::CcSignals;
    use crate::columns::Value;
    use crate::encoder::RateControl;
    use crate::encoder_controller::PacerState;
    use crate::units::{DataSize, TimeDelta};
    use std::sync::{Arc, Mutex};

    /// What the wrapped controller heard.
    #[derive(Default)]
    struct Heard {
        /// (slot, cc_target, cwnd_reduce_ratio) per plan.
        plans: Vec<(u64, DataRate, f64)>,
        events: Vec<FrameEvent>,
        encoded: usize,
    }

    /// ABR at the target it is given; skips the slots in `skip`.
    struct Inner {
        heard: Arc<Mutex<Heard>>,
        skip: Vec<u64>,
    }

    impl EncoderController for Inner {
        fn plan(&mut self, ctx: &FrameContext) -> FrameDecision {
            self.heard.lock().unwrap().plans.push((
                ctx.source_index,
                ctx.cc_target,
                ctx.cwnd_reduce_ratio,
            ));
            if self.skip.contains(&ctx.source_index) {
                return FrameDecision::Skip { reason: "inner" };
            }
            RateControl::abr_vbv(ctx.cc_target, TimeDelta::from_ms(500)).into()
        }
        fn on_frame_encoded(&mut self, _: &EncodedFrame, _: &FramePlan) {
            self.heard.lock().unwrap().encoded += 1;
        }
        fn on_frame_event(&mut self, e: &FrameEvent, _: Timestamp) {
            self.heard.lock().unwrap().events.push(*e);
        }
    }

    fn stage(
        frame_dropper: bool,
        cwnd_pushback: bool,
        skip: Vec<u64>,
    ) -> (Box<dyn EncoderController>, Arc<Mutex<Heard>>) {
        let heard = Arc::new(Mutex::new(Heard::default()));
        let inner = Box::new(Inner { heard: heard.clone(), skip });
        (FrameDropConfig { frame_dropper, cwnd_pushback }.wrap(inner), heard)
    }

    fn ctx(slot: u64, target: DataRate, ratio: f64) -> FrameContext {
        FrameContext {
            now: Timestamp::from_ms(slot as i64 * 33),
            source_index: slot,
            capture_time: Timestamp::from_ms(slot as i64 * 33),
            fps: 30.0,
            cc_target: target,
            cwnd_reduce_ratio: ratio,
            cc_signals: CcSignals::default(),
            pacer: PacerState::default(),
            transport: Default::default(),
            last_frame_id: None,
            analysis: None,
        }
    }

    /// Plans `slots` as the sender does: a skip is reported back as an event, an encode as a
    /// frame of `bytes` (the first a keyframe). Returns (slot, reason) of the skips.
    fn drive(
        c: &mut dyn EncoderController,
        slots: std::ops::Range<u64>,
        target: DataRate,
        ratio: f64,
        bytes: i64,
    ) -> Vec<(u64, &'static str)> {
        let mut skips = Vec::new();
        for slot in slots {
            let cx = ctx(slot, target, ratio);
            match c.plan(&cx) {
                FrameDecision::Skip { reason } => {
                    skips.push((slot, reason));
                    c.on_frame_event(&FrameEvent::Skipped { source_index: slot }, cx.now);
                }
                FrameDecision::Encode(plan) => {
                    let frame = EncodedFrame {
                        frame_id: slot,
                        size: DataSize::from_bytes(bytes),
                        is_keyframe: slot == 0,
                        qp: 30.0,
                        encode_time: TimeDelta::from_ms(5),
                    };
                    c.on_frame_encoded(&frame, &plan);
                }
            }
        }
        skips
    }

    #[test]
    fn the_cwnd_interval_is_update_target_bitrates() {
        let mbps = DataRate::from_mbps(1);
        // reduce 300 kbps: N = 3, the encoder gets 1 - 1/3 Mbps.
        assert_eq!(cwnd_drop_interval(mbps, 0.3), Some((3, DataRate::from_bps(666_667))));
        // reduce 600 kbps: 1 / 0.6 is 1, but at most one slot in two: N = 2.
        assert_eq!(cwnd_drop_interval(mbps, 0.6), Some((2, DataRate::from_kbps(500))));
        assert_eq!(cwnd_drop_interval(mbps, 0.011), Some((90, DataRate::from_bps(988_889))));
        // 1 % or less: nothing.
        assert_eq!(cwnd_drop_interval(mbps, 0.01), None);
        assert_eq!(cwnd_drop_interval(mbps, 0.0), None);
        // Not at or below the codec's 30 kbps; above it, the reduction stops there.
        assert_eq!(cwnd_drop_interval(DataRate::from_kbps(30), 0.9), None);
        assert_eq!(
            cwnd_drop_interval(DataRate::from_kbps(40), 0.9),
            Some((4, DataRate::from_kbps(30)))
        );
    }

    #[test]
    fn every_nth_slot_is_skipped_and_the_wrapped_controller_gets_the_lowered_target() {
        let (mut c, heard) = stage(false, true, vec![]);
        let mbps = DataRate::from_mbps(1);
        let skips = drive(c.as_mut(), 0..9, mbps, 0.3, 4000);
        assert_eq!(skips, [(0, "cwnd-pushback"), (3, "cwnd-pushback"), (6, "cwnd-pushback")]);
        {
            let h = heard.lock().unwrap();
            let slots: Vec<u64> = h.plans.iter().map(|p| p.0).collect();
            assert_eq!(slots, [1, 2, 4, 5, 7, 8], "skipped slots never reach it");
            assert!(h.plans.iter().all(|p| p.1 == DataRate::from_bps(666_667) && p.2 == 0.0));
            assert!(h.events.is_empty(), "its own skips are not reported to the wrapped one");
        }
        // Ratio 0.6: one in two. The counter runs on (it is at 9): slots 10, 12, 14 go.
        let skips = drive(c.as_mut(), 9..15, mbps, 0.6, 4000);
        assert_eq!(skips.iter().map(|s| s.0).collect::<Vec<_>>(), [10, 12, 14]);
        // No pushback: nothing skipped, the full target; the counter stops.
        assert!(drive(c.as_mut(), 15..20, mbps, 0.0, 4000).is_empty());
        assert_eq!(heard.lock().unwrap().plans.last().unwrap().1, mbps);
        let skips = drive(c.as_mut(), 20..24, mbps, 0.3, 4000);
        // The counter is at 15 again (it stood still): slot 20 (15) and slot 23 (18) go.
        assert_eq!(skips.iter().map(|s| s.0).collect::<Vec<_>>(), [20, 23]);
    }

    #[test]
    fn the_frame_dropper_drops_where_libwebrtc_would_and_hears_every_encode() {
        // Frames twice the budget at 300 kbps and 30 fps, as in the frame dropper's own test,
        // but through the stage and with a keyframe first (its 20 kbit are spread over 15
        // slots): from slot 15 on every second slot is dropped (slots from an independent f32
        // transcription of frame_dropper.cc, run as VideoStreamEncoder runs it).
        let (mut c, heard) = stage(true, false, vec![]);
        let skips = drive(c.as_mut(), 0..60, DataRate::from_kbps(300), 0.0, 2500);
        assert!(skips.iter().all(|s| s.1 == "frame-dropper"));
        let expected: Vec<u64> = (15..60).step_by(2).collect();
        assert_eq!(skips.iter().map(|s| s.0).collect::<Vec<_>>(), expected);
        assert_eq!(heard.lock().unwrap().encoded, 60 - expected.len());
    }

    #[test]
    fn the_dropper_gets_the_target_after_the_cwnd_reduction_and_rate_updates_between_slots() {
        let (inner, _) = stage(false, false, vec![]);
        let cfg = FrameDropConfig::LIBWEBRTC;
        let mut v = VideoStreamEncoder::new(cfg, inner);
        let _ = v.plan(&ctx(0, DataRate::from_mbps(1), 0.3));
        // (666 667 + 500) / 1000 = 667 kbps: a 333.5 kbit bucket.
        assert_eq!(v.frame_dropper().unwrap().accumulator_max_kbits(), 333.5);
        // A rate update seen when the sender polls, between slots.
        assert!(v.poll_encode(&ctx(0, DataRate::from_kbps(300), 0.0)).is_none());
        assert_eq!(v.frame_dropper().unwrap().accumulator_max_kbits(), 150.0);
    }

    #[test]
    fn plans_carry_the_stages_state() {
        let (mut c, _) = stage(true, true, vec![]);
        let first = c.plan(&ctx(0, DataRate::from_mbps(1), 0.3));
        assert_eq!(first, FrameDecision::Skip { reason: "cwnd-pushback" }, "counter 0");
        let FrameDecision::Encode(plan) = c.plan(&ctx(1, DataRate::from_mbps(1), 0.3)) else {
            panic!("counter 1: kept");
        };
        assert_eq!(plan.columns.get("vse_encoder_target_bps"), Some(&Value::Int(666_667)));
        assert_eq!(plan.columns.get("vse_cwnd_drop_interval"), Some(&Value::Int(3)));
        assert_eq!(plan.columns.get("vse_dropper_bucket_max_kbit"), Some(&Value::Float(333.5)));
        assert_eq!(plan.columns.get("vse_dropper_drop_ratio"), Some(&Value::Float(0.0)));
    }

    #[test]
    fn the_wrapped_controllers_own_skips_reach_it_and_off_means_no_stage() {
        let (mut c, heard) = stage(false, true, vec![2]);
        let skips = drive(c.as_mut(), 0..3, DataRate::from_mbps(1), 0.3, 4000);
        assert_eq!(skips, [(0, "cwnd-pushback"), (2, "inner")]);
        assert_eq!(heard.lock().unwrap().events, [FrameEvent::Skipped { source_index: 2 }]);
        // Both off: the controller itself, which ignores the ratio.
        assert!(FrameDropConfig::default().is_off());
        let (mut c, heard) = stage(false, false, vec![]);
        assert!(drive(c.as_mut(), 0..30, DataRate::from_mbps(1), 0.6, 100_000).is_empty());
        assert!(heard.lock().unwrap().plans.iter().all(|p| p.1 == DataRate::from_mbps(1)));
    }
}
