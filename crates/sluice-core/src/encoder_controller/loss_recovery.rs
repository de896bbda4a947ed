//! Loss recovery by re-referencing instead of retransmission, as Salsify does (Fouladi et
//! al., NSDI '18): the sender of the Co-RTV paper's "Co-RTV without feedback" baseline
//! (§V-A: "the BN drops frames when bandwidth drops without feedback. The sender doesn't
//! retransmit them by an advanced reference frame setting referred to Salsify"; brief A12).
//!
//! Every frame predicts from the previous encode (optimistically, as Salsify's sender
//! assumes its frames arrive). When the sender learns that a packet of frame `F` was lost
//! ([`FrameEvent::Lost`]: a NACK or transport feedback, so the receiver's loop, not the
//! bottleneck's), and `F` is on the reference chain of the newest encode, every frame from
//! `F` on is useless to the receiver: the controller purges them from the pacer (which also
//! refuses their retransmission) and the next encode predicts from the newest frame before
//! `F` that is intact (none of its packets reported lost, nor any frame it depends on). No
//! keyframe is asked for; with an encoder holding one reference, the re-referenced frame
//! would be an IDR. Rate control: ABR at the congestion controller's rate with a one-frame
//! VBV, Co-RTV's own encoder setting (`co_rtv.rs`), so the two differ only in the feedback.

use super::{EncoderController, FrameContext, FrameDecision, FrameEvent, FramePlan, SenderCommand};
use crate::columns::Columns;
use crate::encoder::{EncodedFrame, RateControl};
use crate::units::{TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Parameters of the re-referencing loss recovery (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LossRecoveryConfig {
    /// VBV buffer of the rate control (`None`: one frame at the controller's rate).
    pub vbv_buffer_ms: Option<f64>,
    /// Reference frames the encoder keeps at least (re-referencing needs more than one; 16,
    /// x264's maximum, as Co-RTV's sender).
    pub reference_frames: u32,
}

impl Default for LossRecoveryConfig {
    fn default() -> Self {
        LossRecoveryConfig { vbv_buffer_ms: None, reference_frames: 16 }
    }
}

impl LossRecoveryConfig {
    /// A configuration mistake, if any (config paths under `encoder_controller`).
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=16).contains(&self.reference_frames) {
            return Err(format!(
                "encoder_controller.reference_frames must be in [1, 16], got {}",
                self.reference_frames
            ));
        }
        if let Some(v) = self.vbv_buffer_ms {
            if !(v.is_finite() && v > 0.0 && v <= 10_000.0) {
                return Err(format!(
                    "encoder_controller.vbv_buffer_ms must be in (0, 10000], got {v}"
                ));
            }
        }
        Ok(())
    }

    /// The controller, before any loss.
    pub fn build(&self) -> LossRecovery {
        LossRecovery {
            config: self.clone(),
            refs: BTreeMap::new(),
            lost: BTreeSet::new(),
            next_reference: None,
            commands: VecDeque::new(),
            recoveries: 0,
        }
    }
}

/// See the module documentation; built by [`LossRecoveryConfig::build`].
pub struct LossRecovery {
    config: LossRecoveryConfig,
    /// Recent encodes: frame id -> the frame it predicts from (`None`: a keyframe).
    refs: BTreeMap<u64, Option<u64>>,
    /// Frames with a packet reported lost.
    lost: BTreeSet<u64>,
    /// The reference of the next encode, after a loss.
    next_reference: Option<u64>,
    commands: VecDeque<SenderCommand>,
    recoveries: u64,
}

/// Encodes remembered (more than the 16 references any encoder keeps).
const KEPT: usize = 512;

impl LossRecovery {
    /// Whether `f` is on the reference chain of the newest encode.
    fn on_current_chain(&self, f: u64) -> bool {
        let mut x = self.refs.keys().next_back().copied();
        for _ in 0..KEPT {
            match x {
                Some(id) if id == f => return true,
                Some(id) if id > f => x = self.refs.get(&id).copied().flatten(),
                _ => return false,
            }
        }
        false
    }

    /// Whether `id` and every frame it depends on arrived (as far as the sender knows).
    fn intact(&self, id: u64) -> bool {
        let mut x = Some(id);
        for _ in 0..KEPT {
            match x {
                Some(i) if self.lost.contains(&i) => return false,
                Some(i) => match self.refs.get(&i) {
                    Some(r) => x = *r,
                    None => return true, // older than memory: long delivered
                },
                None => return true, // a keyframe
            }
        }
        true
    }

    /// Frames encoded so far whose losses made the controller re-reference (for tests).
    pub fn recoveries(&self) -> u64 {
        self.recoveries
    }
}

impl EncoderController for LossRecovery {
    fn plan(&mut self, ctx: &FrameContext) -> FrameDecision {
        let id = ctx.last_frame_id.map_or(0, |l| l + 1);
        let reference = self.next_reference.take();
        self.refs.insert(id, reference.or(ctx.last_frame_id));
        while self.refs.len() > KEPT {
            self.refs.pop_first();
        }
        let vbv = self
            .config
            .vbv_buffer_ms
            .map_or_else(|| TimeDelta::from_secs_f64(1.0 / ctx.fps), TimeDelta::from_ms_f64);
        let mut columns = Columns::default();
        columns.int("salsify_reference", reference.map(|r| r as i64));
        FramePlan {
            reference,
            columns,
            ..FramePlan::from(RateControl::abr_vbv(ctx.cc_target, vbv))
        }
        .into()
    }

    fn poll_command(&mut self) -> Option<SenderCommand> {
        self.commands.pop_front()
    }

    fn on_frame_encoded(&mut self, frame: &EncodedFrame, _plan: &FramePlan) {
        if frame.is_keyframe {
            self.refs.insert(frame.frame_id, None);
        }
    }

    fn on_frame_event(&mut self, event: &FrameEvent, _now: Timestamp) {
        let FrameEvent::Lost { frame_id: f } = *event else { return };
        self.lost.insert(f);
        while self.lost.len() > KEPT {
            self.lost.pop_first();
        }
        if !self.on_current_chain(f) {
            return; // already re-referenced past it
        }
        self.commands.push_back(SenderCommand::PurgeFrames { from_frame_id: f });
        self.next_reference =
            self.refs.range(..f).rev().map(|(id, _)| *id).find(|id| self.intact(*id));
        // No intact frame known: ask for one that no encoder holds, which makes a keyframe.
        if self.next_reference.is_none() {
            self.next_reference = Some(u64::MAX);
        }
        self.recoveries += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::CcSignals;
    use crate::encoder_controller::PacerState;
    use crate::units::DataRate;

    fn ctx(slot: u64, last: Option<u64>) -> FrameContext {
        FrameContext {
            now: Timestamp::from_ms(slot as i64 * 16),
            source_index: slot,
            capture_time: Timestamp::from_ms(slot as i64 * 16),
            fps: 60.0,
            cc_target: DataRate::from_mbps(6),
            cwnd_reduce_ratio: 0.0,
            cc_signals: CcSignals::default(),
            pacer: PacerState::default(),
            transport: Default::default(),
            last_frame_id: last,
            analysis: None,
        }
    }

    fn reference(d: FrameDecision) -> Option<u64> {
        match d {
            FrameDecision::Encode(p) => p.reference,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_lost_frame_is_purged_and_the_next_frame_predicts_from_before_it() {
        let mut c = LossRecoveryConfig::default().build();
        for i in 0..10 {
            assert_eq!(reference(c.plan(&ctx(i, i.checked_sub(1)))), None, "previous encode");
        }
        // Frame 6 lost: purge from 6, frame 10 predicts from 5. One-frame VBV at the rate.
        c.on_frame_event(&FrameEvent::Lost { frame_id: 6 }, Timestamp::ZERO);
        assert_eq!(c.poll_command(), Some(SenderCommand::PurgeFrames { from_frame_id: 6 }));
        assert_eq!(c.poll_command(), None);
        let FrameDecision::Encode(p) = c.plan(&ctx(10, Some(9))) else { panic!() };
        assert_eq!(p.reference, Some(5));
        assert_eq!(
            p.rate_control.vbv_buffer,
            DataRate::from_mbps(6) * TimeDelta::from_secs_f64(1.0 / 60.0)
        );
        // Frames 7-9 (on the abandoned chain) lost too: nothing more to do.
        for f in 7..10 {
            c.on_frame_event(&FrameEvent::Lost { frame_id: f }, Timestamp::ZERO);
        }
        assert_eq!(c.poll_command(), None);
        assert_eq!(reference(c.plan(&ctx(11, Some(10)))), None);
        // Frame 5 turns out lost as well (it is on the new chain): back to 4.
        c.on_frame_event(&FrameEvent::Lost { frame_id: 5 }, Timestamp::ZERO);
        assert_eq!(c.poll_command(), Some(SenderCommand::PurgeFrames { from_frame_id: 5 }));
        assert_eq!(reference(c.plan(&ctx(12, Some(11)))), Some(4));
        assert_eq!(c.recoveries(), 2);
    }
}
