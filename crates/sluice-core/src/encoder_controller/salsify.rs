//! Salsify's encoder-transport integration (Fouladi et al., "Salsify: Low-Latency Network
//! Video through Tighter Integration between a Video Codec and a Transport Protocol",
//! NSDI '18, §4) as a stage in front of any encoder controller: the transport tells the codec
//! how many bytes it can send now without building a queue, and the codec sends the largest
//! frame that fits, or none.
//!
//! The Co-RTV paper runs both its COPA baseline and Co-RTV on it: "to mitigate the influence
//! of queue ① [the sender's] ... we incorporated the Salsify into our encoder ... in
//! subsequent experiments" (§II-B), and Co-RTV's encoder implements state preservation
//! "similar to Salsify" (§IV). Salsify's functional codec encodes each frame twice (a little
//! better and a little worse than the last) and picks; a rate-controlled encoder cannot, so
//! Sluice renders the rule as a per-frame cap on the wrapped controller's plan:
//! * **Room** = the congestion window minus the bytes in flight minus the bytes waiting in
//!   the pacer: what the window lets out now ([`TransportState`]). Without a window the
//!   room is unlimited and the stage only applies the size cap below.
//! * **Skip** when the room is under `min_frame_fraction` of a frame at the target rate
//!   (Salsify skips when even its worse option does not fit; Sluice's threshold: half a
//!   frame), recorded as `salsify-no-room`; the wrapped controller hears of it as a skipped
//!   slot ([`FrameEvent::Skipped`]).
//! * **Otherwise** the wrapped controller's plan with its VBV buffer capped at the room and at
//!   `max_buffer_frames` frames at the target (Salsify's better option is one quality step
//!   above the last frame, not a whole window): no frame is larger than what can leave now,
//!   so the sender's queue stays near empty. Encodes the wrapped controller orders outside a
//!   slot (re-encodes, held frames) are capped the same way but never skipped.
//!
//! Each plan records `salsify_room_bytes`.

use super::{
    EncodeOrder, EncoderController, FrameContext, FrameDecision, FrameEvent, FramePlan,
    SenderCommand, TransportState,
};
use crate::encoder::EncodedFrame;
use crate::units::{DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};

/// Parameters of the Salsify stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SalsifyConfig {
    /// Skip a slot when the room is under this share of one frame at the target rate.
    pub min_frame_fraction: f64,
    /// The largest frame, in frames at the target rate (the VBV buffer's cap).
    pub max_buffer_frames: f64,
}

impl Default for SalsifyConfig {
    fn default() -> Self {
        SalsifyConfig { min_frame_fraction: 0.5, max_buffer_frames: 2.0 }
    }
}

impl SalsifyConfig {
    /// A configuration mistake, if any (config paths under `salsify`).
    pub fn validate(&self) -> Result<(), String> {
        crate::check_range("salsify.min_frame_fraction", self.min_frame_fraction, 0.0, true, 10.0)?;
        crate::check_range("salsify.max_buffer_frames", self.max_buffer_frames, 0.0, false, 100.0)?;
        if self.max_buffer_frames < self.min_frame_fraction {
            return Err(format!(
                "salsify.max_buffer_frames ({}) must not be below salsify.min_frame_fraction ({})",
                self.max_buffer_frames, self.min_frame_fraction
            ));
        }
        Ok(())
    }

    /// `inner` behind this stage.
    pub fn wrap(&self, inner: Box<dyn EncoderController>) -> Box<dyn EncoderController> {
        Box::new(Salsify { config: self.clone(), inner })
    }
}

/// What the window lets out now, given the pacer's backlog; `None` without a window.
pub fn room(transport: &TransportState, pacer_queue: DataSize) -> Option<DataSize> {
    transport.congestion_window.map(|w| (w - transport.in_flight - pacer_queue).max(DataSize::ZERO))
}

/// The stage around an encoder controller.
pub struct Salsify {
    config: SalsifyConfig,
    inner: Box<dyn EncoderController>,
}

impl Salsify {
    fn frame(ctx: &FrameContext) -> DataSize {
        ctx.cc_target * TimeDelta::from_secs_f64(1.0 / ctx.fps.max(1e-3))
    }

    /// `plan` with its VBV buffer capped at the room and the largest frame.
    fn cap(&self, ctx: &FrameContext, mut plan: FramePlan) -> FramePlan {
        let room = room(&ctx.transport, ctx.pacer.queue_bytes);
        let max = Self::frame(ctx).scale(self.config.max_buffer_frames);
        let cap = room.map_or(max, |r| r.min(max));
        let rc = &mut plan.rate_control;
        rc.vbv_buffer = rc.vbv_buffer.min(cap);
        plan.columns.size("salsify_room_bytes", room);
        plan
    }
}

impl EncoderController for Salsify {
    fn wants_analysis(&self) -> bool {
        self.inner.wants_analysis()
    }

    fn plan(&mut self, ctx: &FrameContext) -> FrameDecision {
        let room = room(&ctx.transport, ctx.pacer.queue_bytes);
        if room.is_some_and(|r| r < Self::frame(ctx).scale(self.config.min_frame_fraction)) {
            self.inner
                .on_frame_event(&FrameEvent::Skipped { source_index: ctx.source_index }, ctx.now);
            return FrameDecision::Skip { reason: "salsify-no-room" };
        }
        match self.inner.plan(ctx) {
            FrameDecision::Encode(plan) => FrameDecision::Encode(self.cap(ctx, plan)),
            skip => skip,
        }
    }

    fn poll_encode(&mut self, ctx: &FrameContext) -> Option<EncodeOrder> {
        let order = self.inner.poll_encode(ctx)?;
        Some(EncodeOrder { plan: self.cap(ctx, order.plan), ..order })
    }

    fn poll_command(&mut self) -> Option<SenderCommand> {
        self.inner.poll_command()
    }

    fn on_frame_encoded(&mut self, frame: &EncodedFrame, plan: &FramePlan) {
        self.inner.on_frame_encoded(frame, plan);
    }

    fn on_frame_event(&mut self, event: &FrameEvent, now: Timestamp) {
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
    use crate::encoder_controller::{EncoderControllerConfig, PacerState};
    use crate::units::DataRate;

    fn ctx(window: Option<i64>, in_flight: i64, queued: i64) -> FrameContext {
        FrameContext {
            now: Timestamp::from_ms(100),
            source_index: 3,
            capture_time: Timestamp::from_ms(100),
            fps: 25.0,
            // 36 kB per frame.
            cc_target: DataRate::from_kbps(7200),
            cwnd_reduce_ratio: 0.0,
            cc_signals: CcSignals::default(),
            pacer: PacerState { queue_bytes: DataSize::from_bytes(queued), ..Default::default() },
            transport: TransportState {
                congestion_window: window.map(DataSize::from_bytes),
                in_flight: DataSize::from_bytes(in_flight),
            },
            last_frame_id: Some(2),
            analysis: None,
        }
    }

    fn buffer(d: FrameDecision) -> i64 {
        match d {
            FrameDecision::Encode(p) => p.rate_control.vbv_buffer.as_bytes(),
            FrameDecision::Skip { reason } => panic!("skipped: {reason}"),
        }
    }

    fn stage(inner_vbv_ms: f64) -> Box<dyn EncoderController> {
        SalsifyConfig::default()
            .wrap(EncoderControllerConfig::AbrVbv { vbv_buffer_ms: inner_vbv_ms }.build())
    }

    #[test]
    fn a_frame_is_capped_at_the_room_the_window_leaves_and_skipped_without_room() {
        let mut s = stage(500.0);
        // Room 100 - 40 - 20 = 40 kB: capped by the room.
        assert_eq!(buffer(s.plan(&ctx(Some(100_000), 40_000, 20_000))), 40_000);
        // A large window: capped at two frames.
        assert_eq!(buffer(s.plan(&ctx(Some(1_000_000), 0, 0))), 72_000);
        // No window: two frames.
        assert_eq!(buffer(s.plan(&ctx(None, 500_000, 0))), 72_000);
        // The wrapped controller's own buffer, if smaller, stays (one frame at 40 ms).
        assert_eq!(buffer(stage(40.0).plan(&ctx(Some(1_000_000), 0, 0))), 36_000);
        // Room 14 kB, under half a frame (18 kB): skipped.
        let d = s.plan(&ctx(Some(100_000), 80_000, 6_000));
        assert_eq!(d, FrameDecision::Skip { reason: "salsify-no-room" });
        // Over-full window: no room, never a negative size.
        let d = s.plan(&ctx(Some(10_000), 80_000, 6_000));
        assert!(matches!(d, FrameDecision::Skip { .. }));
        assert_eq!(
            room(&ctx(Some(10_000), 80_000, 6_000).transport, DataSize::ZERO),
            Some(DataSize::ZERO)
        );
    }

    #[test]
    fn mistakes_are_named() {
        let bad = SalsifyConfig { min_frame_fraction: -1.0, ..Default::default() };
        assert!(bad.validate().unwrap_err().contains("salsify.min_frame_fraction"));
        let bad = SalsifyConfig { max_buffer_frames: 0.25, ..Default::default() };
        assert!(bad.validate().unwrap_err().contains("salsify.max_buffer_frames"));
    }
}
