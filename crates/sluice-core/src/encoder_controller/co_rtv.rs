//! Co-RTV's sender: scalable QoE-driven flow control (Zhang et al., §III-C) on the reports
//! of Co-RTV's bottleneck (`link/frame_drop.rs`).
//!
//! **Encoding bitrate** (Eq. 6): on every report, `R = SndRate - QLen / tau`, with `SndRate`
//! the congestion controller's rate (Copa with Co-RTV's changes; on a drop report Copa has
//! just taken the bottleneck's `Bw`), `QLen` the reported queue and `tau` the queue empty time
//! (50 ms). `R` is held until the next report (brief A9), and never above the controller's
//! current rate (a Copa decrease between reports reaches the encoder at once). Floor:
//! `R >= min_rate_fraction x SndRate` (5 %, brief A9; P8: `R <= 0` when `QLen / tau >
//! SndRate`). Before the first report `R = SndRate`.
//!
//! **On a drop report** naming a new `D` (Eq. 7, 8): `N_d = j - D`, `j` the id of the next
//! encode; the `N_d` dropped frames are re-encoded and re-sent, taking bandwidth from new
//! ones: `R *= tau FR / (N_d + tau FR)`. Skipping (Eq. 8): `N_s = QSF (tau FR + N_d)
//! (1 - R / SndRate)`, `0 <= QSF <= 1`, 0 by default (§V-B), rounded to the nearest integer
//! (brief A9) and spread evenly over the horizon `H = tau FR + N_d` encodes that starts with
//! the re-encodes: positions `floor((m + 0.5) H / N_s)`, `m = 0 .. N_s - 1`; a skipped
//! re-encode is not encoded, a skipped capture slot is skipped (reason "co-rtv-skip"), and
//! the frames of the horizon that are encoded get `H / (H - N_s)` times the per-frame bytes
//! ("after skipping frames, the sender will increase the bitrate R to utilize the preserved
//! bandwidth of skipped frames").
//!
//! **Re-encoding** (§III-C, §IV, brief A5/A6): every dropped frame's source frame is encoded
//! again (less the skipped ones; at most the newest `max_reencodes`, 8, see the field), in order, before the next capture, each with a fresh id,
//! from the original capture time (latency counts from the original capture, brief A7); the
//! first predicts from the newest frame below `D` that no bottleneck dropped ("the last frame
//! before D"), the rest from the previous encode: no keyframe (the encoder keeps several
//! references; with one it codes an IDR, counted in `keyframes`). The sender has purged the
//! dropped frames, refuses their retransmission and stamps the new generation with LRF = `D`
//! before this controller hears of the report (`sender/frames.rs`).
//!
//! **Rate control**: ABR at `R` with a VBV of one frame (`vbv_buffer_ms` `None`): the paper's
//! encoder sets each frame's size ("each frame gets (SndRate tau - QLen) / (tau FR + N_d)
//! bytes"; §IV: a Salsify-like hardware encoder), which a one-frame VBV does on x264 and the
//! model encoder (a 0.5 s VBV lets frames overshoot for several frames after a drop, which
//! `vbv_buffer_ms = 500` shows).

use super::{EncodeOrder, EncoderController, FrameContext, FrameDecision, FramePlan};
use crate::columns::Columns;
use crate::encoder::{EncodedFrame, RateControl};
use crate::packet::BottleneckReport;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// Parameters of Co-RTV's sender rules.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CoRtvConfig {
    /// Queue empty time `tau` (Eq. 6-8; §V-B: 50 ms; Fig. 13 sweeps it).
    pub tau_ms: f64,
    /// Quality sensitivity factor (Eq. 8; §V-B: 0; Fig. 14 sweeps 0..1).
    pub qsf: f64,
    /// `R` never falls below this share of `SndRate` (brief A9: 5 %).
    pub min_rate_fraction: f64,
    /// VBV buffer of the rate control (`None`: one frame at `R`, per-frame size control).
    pub vbv_buffer_ms: Option<f64>,
    /// Reference frames the encoder keeps at least (so a re-encode can predict from the
    /// frame before `D` instead of coding a keyframe). 16, x264's maximum: the frame before
    /// `D` must still be held when the re-encode starts, `N_d + 1` encodes later, and a drop
    /// of re-encodes (a second `D`) reaches 8 and more at 60 fps; with the brief's 8 (M5) the
    /// x264 test's second drop coded an IDR. Salsify-like state restore (§IV) has no limit.
    pub reference_frames: u32,
    /// At most this many source frames are re-encoded per drop, the newest (Sluice's bound;
    /// the paper re-encodes all `N_d`, brief A6 names "only the newest" as the other option).
    /// Frames the sender still held when the report came (its pacer's backlog behind
    /// Copa's window) are purged with the dropped ones; re-encoding all of them made every
    /// later drop re-encode hundreds of frames (4G trace 9: P95 12 s). 8 covers the `N_d`
    /// of the paper's timing, `(RTT_BN + 2 / FR) FR + k`, up to a 50 ms sender-bottleneck
    /// delay. The older ones are not shown (counted in `cortv_superseded`).
    pub max_reencodes: usize,
}

impl Default for CoRtvConfig {
    fn default() -> Self {
        CoRtvConfig {
            tau_ms: 50.0,
            qsf: 0.0,
            min_rate_fraction: 0.05,
            vbv_buffer_ms: None,
            reference_frames: 16,
            max_reencodes: 8,
        }
    }
}

impl CoRtvConfig {
    /// A configuration mistake, if any (config paths under `encoder_controller`).
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=1024).contains(&self.max_reencodes) {
            return Err(format!(
                "encoder_controller.max_reencodes must be in [1, 1024], got {}",
                self.max_reencodes
            ));
        }
        if !(self.tau_ms.is_finite() && self.tau_ms > 0.0 && self.tau_ms <= 10_000.0) {
            return Err(format!(
                "encoder_controller.tau_ms must be in (0, 10000], got {}",
                self.tau_ms
            ));
        }
        if !(0.0..=1.0).contains(&self.qsf) {
            return Err(format!("encoder_controller.qsf must be in [0, 1], got {}", self.qsf));
        }
        if !(0.0..=1.0).contains(&self.min_rate_fraction) {
            return Err(format!(
                "encoder_controller.min_rate_fraction must be in [0, 1], got {}",
                self.min_rate_fraction
            ));
        }
        if let Some(v) = self.vbv_buffer_ms {
            if !(v.is_finite() && v > 0.0 && v <= 10_000.0) {
                return Err(format!(
                    "encoder_controller.vbv_buffer_ms must be in (0, 10000], got {v}"
                ));
            }
        }
        if !(1..=16).contains(&self.reference_frames) {
            return Err(format!(
                "encoder_controller.reference_frames must be in [1, 16], got {}",
                self.reference_frames
            ));
        }
        Ok(())
    }

    /// The controller, before any report.
    pub fn build(&self) -> CoRtv {
        CoRtv {
            config: self.clone(),
            tau: TimeDelta::from_ms_f64(self.tau_ms),
            frames: BTreeMap::new(),
            dropped: VecDeque::new(),
            last_drop: None,
            reports: VecDeque::new(),
            rate: None,
            horizon: VecDeque::new(),
            horizon_scale: 1.0,
            reencodes: VecDeque::new(),
            last: None,
            superseded: 0,
        }
    }
}

/// `R = SndRate - QLen / tau` (Eq. 6), at least `floor x SndRate`.
pub fn encoding_rate(snd_rate: DataRate, qlen: DataSize, tau: TimeDelta, floor: f64) -> DataRate {
    let drain = qlen / tau;
    let r = if drain.is_finite() { snd_rate - drain } else { DataRate::ZERO };
    r.max(snd_rate.scale(floor.clamp(0.0, 1.0)))
}

/// `R x tau FR / (N_d + tau FR)` (Eq. 7).
pub fn rate_after_drop(r: DataRate, n_d: u64, tau: TimeDelta, fps: f64) -> DataRate {
    let tau_fr = tau.as_secs_f64() * fps;
    if tau_fr <= 0.0 {
        return r;
    }
    r.scale(tau_fr / (n_d as f64 + tau_fr))
}

/// `N_s = QSF (tau FR + N_d) (1 - R / SndRate)` (Eq. 8), unrounded.
pub fn skips(qsf: f64, n_d: u64, tau: TimeDelta, fps: f64, r: DataRate, snd_rate: DataRate) -> f64 {
    if snd_rate <= DataRate::ZERO {
        return 0.0;
    }
    let share = (1.0 - r.as_bps_f64() / snd_rate.as_bps_f64()).clamp(0.0, 1.0);
    qsf.clamp(0.0, 1.0) * (tau.as_secs_f64() * fps + n_d as f64) * share
}

/// The positions of `n_s` skips spread evenly over a horizon of `h` encodes:
/// `floor((m + 0.5) h / n_s)`.
pub fn skip_positions(n_s: usize, h: usize) -> Vec<usize> {
    if n_s == 0 || h == 0 {
        return Vec::new();
    }
    let n_s = n_s.min(h);
    (0..n_s)
        .map(|m| (((m as f64 + 0.5) * h as f64 / n_s as f64).floor() as usize).min(h - 1))
        .collect()
}

/// What the last drop report did (for the frames' columns).
#[derive(Clone, Copy, Debug)]
struct DropReaction {
    drop_from: u64,
    n_d: u64,
    n_s: u64,
}

/// Co-RTV's sender rules; built by [`CoRtvConfig::build`].
pub struct CoRtv {
    config: CoRtvConfig,
    tau: TimeDelta,
    /// Recent encodes: frame id -> (source index, capture time).
    frames: BTreeMap<u64, (u64, Timestamp)>,
    /// Frames the bottleneck dropped, `[from, to)`.
    dropped: VecDeque<(u64, u64)>,
    last_drop: Option<u64>,
    /// Reports not yet turned into a rate (they are, at the next decision, with the
    /// controller's rate of that moment).
    reports: VecDeque<BottleneckReport>,
    /// `R`, held until the next report.
    rate: Option<DataRate>,
    /// The skip schedule of the current horizon (true: skip), for the next encodes.
    horizon: VecDeque<bool>,
    horizon_scale: f64,
    reencodes: VecDeque<EncodeOrder>,
    last: Option<DropReaction>,
    /// Source frames dropped and not re-encoded (beyond `max_reencodes`), so far.
    superseded: u64,
}

/// Encodes remembered for re-encoding (about 17 s at 60 fps).
const FRAMES_KEPT: usize = 1024;
/// Drop ranges remembered.
const DROPS_KEPT: usize = 256;

impl CoRtv {
    fn vbv(&self, fps: f64) -> TimeDelta {
        self.config
            .vbv_buffer_ms
            .map_or_else(|| TimeDelta::from_secs_f64(1.0 / fps), TimeDelta::from_ms_f64)
    }

    fn was_dropped(&self, id: u64) -> bool {
        self.dropped.iter().any(|&(a, b)| (a..b).contains(&id))
    }

    fn remember(&mut self, id: u64, source: u64, capture: Timestamp) {
        self.frames.insert(id, (source, capture));
        while self.frames.len() > FRAMES_KEPT {
            self.frames.pop_first();
        }
    }

    /// Turns the pending reports into `R` (and, for a new drop, the re-encodes and the skip
    /// schedule), with the controller's rate of now.
    fn absorb(&mut self, ctx: &FrameContext) {
        while let Some(report) = self.reports.pop_front() {
            let snd = ctx.cc_target;
            let floor = self.config.min_rate_fraction;
            let mut r = encoding_rate(snd, report.queue, self.tau, floor);
            if let Some(d) = report.drop_from.filter(|d| self.last_drop.is_none_or(|l| *d > l)) {
                r = self.react_to_drop(d, r, snd, ctx);
            }
            self.rate = Some(r);
        }
    }

    fn react_to_drop(
        &mut self,
        d: u64,
        r: DataRate,
        snd: DataRate,
        ctx: &FrameContext,
    ) -> DataRate {
        self.last_drop = Some(d);
        let j = ctx.last_frame_id.map_or(0, |l| l + 1);
        if j > d {
            self.dropped.push_back((d, j));
            while self.dropped.len() > DROPS_KEPT {
                self.dropped.pop_front();
            }
        }
        // The source frames of the frames from D on, oldest first, the newest
        // `max_reencodes` of them. D may name a frame not encoded yet (the bottleneck decides
        // k frames ahead of their arrival): then nothing is re-encoded, and the frames from D
        // on carry LRF = D.
        let mut sources: Vec<(u64, Timestamp)> = {
            let mut seen = std::collections::BTreeSet::new();
            let range = if d < j { self.frames.range(d..j) } else { self.frames.range(0..0) };
            range.map(|(_, v)| *v).filter(|(s, _)| seen.insert(*s)).collect()
        };
        let superseded = sources.len().saturating_sub(self.config.max_reencodes);
        sources.drain(..superseded);
        // N_d of Eq. 7 and 8: the frames re-encoded (they share the bandwidth with new ones).
        let n_d = sources.len() as u64;
        let r = rate_after_drop(r, n_d, self.tau, ctx.fps)
            .max(snd.scale(self.config.min_rate_fraction.clamp(0.0, 1.0)));
        let tau_fr = self.tau.as_secs_f64() * ctx.fps;
        let h = (tau_fr + n_d as f64).round().max(1.0) as usize;
        let n_s = skips(self.config.qsf, n_d, self.tau, ctx.fps, r, snd).round() as usize;
        let n_s = n_s.min(h.saturating_sub(1));
        let mut schedule = vec![false; h];
        for p in skip_positions(n_s, h) {
            schedule[p] = true;
        }
        self.horizon = schedule.into();
        self.horizon_scale = h as f64 / (h - n_s) as f64;
        self.superseded += superseded as u64;
        // The newest frame below D that no bottleneck dropped: the re-encodes predict from it.
        let reference =
            self.frames.range(..d).rev().map(|(id, _)| *id).find(|id| !self.was_dropped(*id));
        self.reencodes.clear();
        let rate = r.scale(self.horizon_scale);
        let mut first = true;
        for (source, capture) in sources {
            let skip = self.horizon.pop_front().unwrap_or(false);
            if skip {
                continue;
            }
            let mut columns = Columns::default();
            columns.rate("cortv_rate_bps", Some(rate));
            columns.bool("cortv_reencode", true);
            columns.int("cortv_drop_from", Some(d as i64));
            let plan = FramePlan {
                // The first re-encode predicts from the frame before D, the others from the
                // previous encode. A missing reference (a drop at the very start) makes the
                // encoder code a keyframe: it holds no frame with this id.
                reference: first.then(|| reference.unwrap_or(u64::MAX)),
                columns,
                ..FramePlan::from(RateControl::abr_vbv(rate, self.vbv(ctx.fps)))
            };
            first = false;
            self.reencodes.push_back(EncodeOrder {
                source_index: source,
                capture_time: capture,
                plan,
            });
        }
        self.last = Some(DropReaction { drop_from: d, n_d, n_s: n_s as u64 });
        r
    }

    /// The rate for the next encode: `R`, at most the controller's rate now.
    fn current_rate(&self, ctx: &FrameContext) -> DataRate {
        self.rate.map_or(ctx.cc_target, |r| r.min(ctx.cc_target))
    }
}

impl EncoderController for CoRtv {
    fn plan(&mut self, ctx: &FrameContext) -> FrameDecision {
        self.absorb(ctx);
        let mut scale = 1.0;
        if let Some(skip) = self.horizon.pop_front() {
            if skip {
                return FrameDecision::Skip { reason: "co-rtv-skip" };
            }
            scale = self.horizon_scale;
        }
        let rate = self.current_rate(ctx).scale(scale);
        let id = ctx.last_frame_id.map_or(0, |l| l + 1);
        self.remember(id, ctx.source_index, ctx.capture_time);
        let mut columns = Columns::default();
        columns.rate("cortv_rate_bps", Some(rate));
        columns.bool("cortv_reencode", false);
        columns.int("cortv_drop_from", self.last_drop.map(|d| d as i64));
        columns.int("cortv_superseded", Some(self.superseded as i64));
        FramePlan { columns, ..FramePlan::from(RateControl::abr_vbv(rate, self.vbv(ctx.fps))) }
            .into()
    }

    fn poll_encode(&mut self, ctx: &FrameContext) -> Option<EncodeOrder> {
        self.absorb(ctx);
        let order = self.reencodes.pop_front()?;
        let id = ctx.last_frame_id.map_or(0, |l| l + 1);
        self.remember(id, order.source_index, order.capture_time);
        Some(order)
    }

    fn on_frame_encoded(&mut self, frame: &EncodedFrame, _plan: &FramePlan) {
        debug_assert!(self.frames.contains_key(&frame.frame_id), "frame ids are last + 1");
    }

    fn on_bottleneck_report(&mut self, report: &BottleneckReport, _now: Timestamp) {
        self.reports.push_back(report.clone());
    }
}

impl CoRtv {
    /// `R` as held (for tests).
    pub fn held_rate(&self) -> Option<DataRate> {
        self.rate
    }
    /// `N_d` and `N_s` of the last drop reaction (for tests).
    pub fn last_reaction(&self) -> Option<(u64, u64, u64)> {
        self.last.map(|l| (l.drop_from, l.n_d, l.n_s))
    }
}

#[cfg(test)]
mod tests;
