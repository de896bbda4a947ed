//! The frame pipeline's bookkeeping: frame ids, the frames at the encoder, the frames with
//! packets in the pacer (for their service times), purges, the frames already reported lost,
//! and Co-RTV's bottleneck drops. It holds no component: the [`Sender`](super::Sender) calls
//! the encoder, the pacer and the encoder controller and tells this what happened.

use crate::encoder_controller::FramePlan;
use crate::units::Timestamp;
use std::collections::{BTreeSet, VecDeque};

/// Bottleneck drop ranges remembered (each drop adds one).
const MAX_BN_DROP_RANGES: usize = 256;
/// Frames remembered as already reported lost.
const MAX_LOST_FRAMES_KEPT: usize = 4096;

/// A frame submitted to the encoder, waiting to finish.
pub(super) struct Submitted {
    pub(super) frame_id: u64,
    pub(super) plan: FramePlan,
    /// The frame it references unless it comes out as a keyframe.
    pub(super) reference: Option<u64>,
}

/// A frame with packets in the pacer, for its service time.
struct InPacer {
    frame_id: u64,
    enqueued: Timestamp,
    remaining: u16,
    /// When its first packet reached the head of the queue (once it has).
    head_at: Option<Timestamp>,
}

/// What a frame-dropping bottleneck (Co-RTV §3, `link/frame_drop.rs`) reported: the frames
/// it dropped, whose packet losses are not congestion losses, and the latest drop `D`, which
/// every frame packetized since carries as its latest re-encoded frame number.
#[derive(Default)]
pub(super) struct BottleneckDrops {
    latest_reencoded: Option<u64>,
    /// Frames dropped, as `[from, to)` ranges.
    ranges: VecDeque<(u64, u64)>,
}

impl BottleneckDrops {
    /// The latest drop reported (`None` before any).
    pub(super) fn latest_reencoded(&self) -> Option<u64> {
        self.latest_reencoded
    }

    /// Records the drop of every frame from `d` on that was numbered before `next_frame_id`;
    /// false if `d` is old news (`D` only grows).
    pub(super) fn record(&mut self, d: u64, next_frame_id: u64) -> bool {
        if self.latest_reencoded.is_some_and(|l| d <= l) {
            return false;
        }
        if d < next_frame_id {
            self.ranges.push_back((d, next_frame_id));
            while self.ranges.len() > MAX_BN_DROP_RANGES {
                self.ranges.pop_front();
            }
        }
        self.latest_reencoded = Some(d);
        true
    }

    /// Whether a bottleneck reported this frame dropped.
    pub(super) fn contains(&self, frame_id: u64) -> bool {
        self.ranges.iter().any(|&(from, to)| (from..to).contains(&frame_id))
    }
}

/// Frame ids and the state of every frame between the encoder and the wire.
#[derive(Default)]
pub(super) struct FramePipeline {
    next_frame_id: u64,
    /// The last frame submitted to the encoder.
    last_submitted: Option<u64>,
    submitted: VecDeque<Submitted>,
    in_pacer: VecDeque<InPacer>,
    /// Frames still encoding when a purge covered them: dropped when they finish.
    purge_on_finish: BTreeSet<u64>,
    /// Purged frames: their retransmissions are refused.
    purged: BTreeSet<u64>,
    /// Frames already reported lost to the encoder controller (recent ones).
    lost_frames: BTreeSet<u64>,
    pub(super) drops: BottleneckDrops,
}

impl FramePipeline {
    /// The id the next encode gets.
    pub(super) fn next_frame_id(&self) -> u64 {
        self.next_frame_id
    }

    /// Frame ids go on from `next` (a sender continuing another's timeline).
    pub(super) fn continue_from(&mut self, next: u64) {
        self.next_frame_id = self.next_frame_id.max(next);
    }

    pub(super) fn last_submitted(&self) -> Option<u64> {
        self.last_submitted
    }

    /// A new frame id for an encode of `plan` referencing `reference`, submitted now.
    pub(super) fn submit(&mut self, plan: FramePlan, reference: Option<u64>) -> u64 {
        let frame_id = self.next_frame_id;
        self.next_frame_id += 1;
        self.last_submitted = Some(frame_id);
        self.submitted.push_back(Submitted { frame_id, plan, reference });
        frame_id
    }

    /// The encoder finished its oldest frame, `frame_id`.
    pub(super) fn finished(&mut self, frame_id: u64) -> Option<Submitted> {
        let sub = self.submitted.pop_front()?;
        debug_assert_eq!(sub.frame_id, frame_id, "encoder finished out of order");
        Some(sub)
    }

    /// Whether a purge covered this frame while it was encoding (it is dropped now).
    pub(super) fn take_purged_on_finish(&mut self, frame_id: u64) -> bool {
        self.purge_on_finish.remove(&frame_id)
    }

    /// `packets` packets of `frame_id` entered the pacer at `now`.
    pub(super) fn enqueued(&mut self, frame_id: u64, packets: u16, now: Timestamp) {
        let head_at = if self.in_pacer.is_empty() { Some(now) } else { None };
        self.in_pacer.push_back(InPacer { frame_id, enqueued: now, remaining: packets, head_at });
    }

    /// Removes frames `from_frame_id..` from the pipeline: the ones in the pacer (returned, in
    /// order), those still encoding (dropped when they finish), and their retransmissions.
    pub(super) fn purge(&mut self, from_frame_id: u64, now: Timestamp) -> Vec<u64> {
        let front = self.in_pacer.front().map(|f| f.frame_id);
        let mut gone = Vec::new();
        self.in_pacer.retain(|f| {
            let purge = f.frame_id >= from_frame_id;
            if purge {
                gone.push(f.frame_id);
            }
            !purge
        });
        for s in &self.submitted {
            if s.frame_id >= from_frame_id {
                self.purge_on_finish.insert(s.frame_id);
            }
        }
        self.purged.extend(from_frame_id..self.next_frame_id);
        if self.in_pacer.front().map(|f| f.frame_id) != front {
            self.advance_head(now);
        }
        gone
    }

    /// Whether the frame was purged (its retransmissions are refused).
    pub(super) fn is_purged(&self, frame_id: u64) -> bool {
        self.purged.contains(&frame_id)
    }

    /// Forgets the purges of frames older than `oldest` (none of their packets is kept).
    pub(super) fn forget_purged_before(&mut self, oldest: u64) {
        self.purged = self.purged.split_off(&oldest);
    }

    /// The frame now at the front of the pacer reached the head at `now` (or its enqueue).
    fn advance_head(&mut self, now: Timestamp) {
        if let Some(f) = self.in_pacer.front_mut() {
            f.head_at.get_or_insert(now.max(f.enqueued));
        }
    }

    /// A video packet of `frame_id` left the pacer at `now`. Returns when the frame reached
    /// the head of the queue if that was its last packet (the frame is serviced).
    pub(super) fn video_sent(&mut self, frame_id: u64, now: Timestamp) -> Option<Timestamp> {
        let i = self.in_pacer.iter().position(|f| f.frame_id == frame_id)?;
        let f = &mut self.in_pacer[i];
        f.remaining = f.remaining.saturating_sub(1);
        if f.remaining > 0 {
            return None;
        }
        let head_at = f.head_at.unwrap_or(f.enqueued);
        let _ = self.in_pacer.remove(i);
        if i == 0 {
            self.advance_head(now);
        }
        Some(head_at)
    }

    /// Of the frames with a lost packet, those to report to the encoder controller: once per
    /// frame, and not the ones a bottleneck dropped on purpose.
    pub(super) fn newly_lost(&mut self, frames: impl IntoIterator<Item = u64>) -> Vec<u64> {
        let mut out = Vec::new();
        for f in frames {
            if self.drops.contains(f) || !self.lost_frames.insert(f) {
                continue;
            }
            out.push(f);
        }
        while self.lost_frames.len() > MAX_LOST_FRAMES_KEPT {
            self.lost_frames.pop_first();
        }
        out
    }
}
