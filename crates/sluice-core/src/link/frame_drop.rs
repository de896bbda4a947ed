//! Co-RTV's frame-dropping bottleneck (Zhang et al., "Predictable Real-Time Video Latency
//! Control with Frame-level Collaboration", §III-B, Alg. 1): the bottleneck node drops whole
//! video frames that cannot arrive in time, tells the sender at once which frame the drop
//! starts from, and recovers forwarding when the sender's re-encoded frames arrive.
//!
//! **Frame information** (§III-B2): every media packet carries its frame number, its index
//! in the frame, the frame's packet count (Sluice's frame descriptor) and the latest
//! re-encoded frame number, LRF ([`Packet::latest_reencoded`], 4 more header bytes).
//!
//! **Bandwidth** (§III-B3): `Bw` is the mean over the last `w` = 50 ms of what the link
//! served or could serve ([`super::bandwidth`]; never the trace's future), times `bw_scale`
//! (Fig. 15). `Bw_old` is the largest `Bw` of the last `RTT_BN + w` (brief A3).
//!
//! **Decision** (§III-B1, B4, Alg. 1), re-run every `tick_ms` (1 ms) and when a frame's first
//! packet arrives, only while `Bw_old > Bw` (line 3), read at the estimate's resolution:
//! `Bw` counts whole 1504-byte delivery opportunities, so on a constant link it moves by one
//! opportunity per window (0.24 Mbps at w = 50 ms) and `Bw_old`, a maximum, is that much
//! above it half the time; that is not a decrease. Alg. 1 runs when `Bw_old` exceeds `Bw` by
//! more than `bw_decrease_margin_mtu` opportunities per window (1; 0 is the literal gate).
//! For each candidate frame `i`:
//! `L_di = (QLen + size(i)) / Bw - (RTT_BN + 2 / FR) + T_pre` (Eq. 2, 3, 5),
//! `Q_di = alpha (Bw_old - Bw) / Bw / FR` (Eq. 4, alpha = 0.5), `Gain_i = L_di - Q_di`
//! (Eq. 1); drop when `Gain_i > 0` ([`DropCost`]). Candidates (brief A4):
//! * frames waiting in the queue none of whose packets has left or is leaving it (a frame
//!   with a packet already sent is kept: dropping the rest would leave the receiver a hole):
//!   `QLen` = the bytes ahead of its first packet (the packet in transit included),
//!   `size(i)` = its packet count x its packet size, `T_pre = 0`;
//! * the next `k` frames that have not arrived yet, decided ahead (`lookahead_frames`; the
//!   paper fixes w but not k: Fig. 7 is "an example with k = 2"). **Sluice's default is
//!   k = 0**, deciding at a frame's arrival: on the 50 ms mean, a decision k frames ahead
//!   comes earlier but on a `Bw` that has not yet followed the drop, keeps the frames ahead
//!   of `D`, and `D` cannot move back, so on the 20 -> 2 Mbps step k = 2 gives a P95 of 422
//!   ms against 158 ms and breaks the §III-A bound (448 ms against 366 ms), while k = 0
//!   keeps it (215 ms) and is neutral on the real traces (docs/results/cortv.md). The
//!   `co-rtv-k2` scheme keeps the paper's example. For k > 0,
//!   frame `last + m` is expected `m / FR` after the first packet of the newest frame `last`,
//!   its size is the last P frame's ("the size difference ... is minimal"), `T_pre` = its
//!   expected arrival minus now, and `QLen` = what will still be queued then at `Bw`:
//!   `max(0, backlog + rest of frame last + frames last+1.. ahead of it - Bw x T_pre)`.
//!
//! Because `Gain` grows with the queue ahead of a frame, the frames to drop are a suffix: the
//! first candidate `D` with `Gain > 0` is dropped with every later frame of its generation
//! (§III-B5: the feedback names "the frame that starts to be dropped"). Every queued packet
//! of those frames is removed at once (§IV's enqueue and dequeue phases: the point is to free
//! the queue), later arrivals of them are dropped, retransmissions included.
//!
//! **Forwarding recovery** (§III-B4): while `D` is active a packet is forwarded iff its
//! frame number `< D` or its LRF `>= D`. Every encode has a fresh, increasing frame id and the
//! sender stamps LRF = `D` on every frame it encodes after it heard of `D` (brief A5), so the
//! re-encoded frames restore forwarding by themselves and a later drop can target them:
//! after `D` only frames with LRF `>= D` are candidates (frames below `D` are committed to
//! forwarding), so `D` only grows, and no prediction is made until the first frame of the new
//! generation has arrived (the ids between `D` and it will never come).
//!
//! **Feedback** (§III-B5) on the link's report port, over the bottleneck's own path to the
//! sender: `{Bw, QLen, D}` immediately when a drop is decided, and `QLen` alone every
//! `RTT_BN` (brief A8: "if no frames are dropped, the feedback simply contains the queue
//! length"); `QLen` is the bytes still to serialise after the drop.
//!
//! **Without feedback** (`feedback: false`, the paper's "Co-RTV w/o fb", brief A12): the
//! same decision, but only the frames whose own `Gain > 0` are dropped (no suffix, no LRF
//! rule), one by one, and nothing is reported; the sender finds out from its receiver.
//!
//! `RTT_BN` is the bottleneck-sender round trip (§IV: `RTT_E2E - RTT_LL`); in the simulator
//! the bottleneck knows its path: twice the sender-bottleneck delay (brief A1), unless
//! `rtt_bn_ms` sets it. `FR` is the run's frame rate.

use super::bandwidth::{BwSource, WindowedBandwidth};
use super::{DropReason, DropTail, Drops, QueueDiscipline, QueueLimit, QueueView, Queued};
use crate::columns::Columns;
use crate::packet::{BottleneckReport, Datagram, Feedback, FlowId, Packet, PacketKind};
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, VecDeque};

/// Parameters of Co-RTV's bottleneck (defaults: the paper's, or the brief's where the paper
/// gives none).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CoRtvBottleneckConfig {
    /// Sensitivity to the quality decrease, Eq. 4 (§III-B1: 0.5 "based on numerous
    /// experiments"; Fig. 16 sweeps it).
    pub alpha: f64,
    /// The bandwidth window `w` (§III-B3: 50 ms).
    pub window_ms: f64,
    /// What `Bw` is measured from (brief A2: the link's service schedule over the window;
    /// `link-rate` reads the link's setting as the paper's emulation did, §V-B).
    pub bw_source: BwSource,
    /// Multiplies the estimate (Fig. 15: 0.8, 1.0, 1.2, 1.5).
    pub bw_scale: f64,
    /// Alg. 1 runs while `Bw_old - Bw` exceeds this many 1504-byte opportunities per window
    /// (the estimate's resolution; 0: the paper's literal `Bw_old > Bw`).
    pub bw_decrease_margin_mtu: f64,
    /// `Bw_old` is the largest `Bw` over this window (`None`: `RTT_BN + w`, brief A3).
    pub bw_old_window_ms: Option<f64>,
    /// Frames decided ahead of their arrival, `k` (§III-B4; Fig. 7's example is 2). Default
    /// 0, deciding at arrival: Sluice's choice, see the module documentation.
    pub lookahead_frames: u32,
    /// `RTT_BN` (`None`: the simulated path's, twice the sender-bottleneck delay; brief A1).
    pub rtt_bn_ms: Option<f64>,
    /// Report to the sender (false: "Co-RTV w/o fb", brief A12).
    pub feedback: bool,
    /// Period of the queue-length feedback (`None`: `RTT_BN`, §III-B5, at least 1 ms).
    pub feedback_interval_ms: Option<f64>,
    /// How often `Bw` is recomputed and Alg. 1 re-run (brief A4: every 1 ms).
    pub tick_ms: f64,
}

impl Default for CoRtvBottleneckConfig {
    fn default() -> Self {
        CoRtvBottleneckConfig {
            alpha: 0.5,
            window_ms: 50.0,
            bw_source: BwSource::Capacity,
            bw_scale: 1.0,
            bw_decrease_margin_mtu: 1.0,
            bw_old_window_ms: None,
            lookahead_frames: 0,
            rtt_bn_ms: None,
            feedback: true,
            feedback_interval_ms: None,
            tick_ms: 1.0,
        }
    }
}

impl CoRtvBottleneckConfig {
    /// A configuration mistake, if any.
    pub fn validate(&self) -> Result<(), String> {
        let check = |name: &str, v: f64, lo: f64, hi: f64| {
            if v.is_finite() && v >= lo && v <= hi {
                Ok(())
            } else {
                Err(format!("bottleneck.{name} must be in [{lo}, {hi}], got {v}"))
            }
        };
        check("alpha", self.alpha, 0.0, 100.0)?;
        check("window_ms", self.window_ms, 1.0, 10_000.0)?;
        check("bw_scale", self.bw_scale, 0.01, 100.0)?;
        check("bw_decrease_margin_mtu", self.bw_decrease_margin_mtu, 0.0, 1000.0)?;
        check("tick_ms", self.tick_ms, 0.1, 1000.0)?;
        if let Some(v) = self.bw_old_window_ms {
            check("bw_old_window_ms", v, 0.0, 60_000.0)?;
        }
        if let Some(v) = self.rtt_bn_ms {
            check("rtt_bn_ms", v, 0.0, 10_000.0)?;
        }
        if let Some(v) = self.feedback_interval_ms {
            check("feedback_interval_ms", v, 1.0, 60_000.0)?;
        }
        if self.lookahead_frames > 64 {
            return Err(format!(
                "bottleneck.lookahead_frames must be at most 64, got {}",
                self.lookahead_frames
            ));
        }
        Ok(())
    }

    /// The bottleneck for a queue limit, a flow, the frame rate and the path's RTT to the
    /// sender.
    pub fn build(
        &self,
        limit: QueueLimit,
        flow: FlowId,
        fps: f64,
        path_rtt: TimeDelta,
    ) -> FrameDroppingBottleneck {
        let rtt_bn = self.rtt_bn_ms.map_or(path_rtt, TimeDelta::from_ms_f64).max(TimeDelta::ZERO);
        let window = TimeDelta::from_ms_f64(self.window_ms);
        let old_window = self.bw_old_window_ms.map_or(rtt_bn + window, TimeDelta::from_ms_f64);
        let interval = self
            .feedback_interval_ms
            .map_or(rtt_bn, TimeDelta::from_ms_f64)
            .max(TimeDelta::from_ms(1));
        FrameDroppingBottleneck {
            queue: DropTail { limit },
            flow,
            alpha: self.alpha,
            fps: if fps.is_finite() && fps > 0.0 { fps } else { 30.0 },
            rtt_bn,
            lookahead: self.lookahead_frames,
            feedback: self.feedback,
            interval,
            tick: TimeDelta::from_ms_f64(self.tick_ms).max(TimeDelta::from_us(100)),
            bw: WindowedBandwidth::new(self.bw_source, window, old_window, self.bw_scale),
            decrease_margin: (super::MTU * 1000 / window.max(TimeDelta::from_us(1)))
                .scale(self.bw_decrease_margin_mtu * self.bw_scale / 1000.0),
            next_tick: Timestamp::ZERO,
            next_report: Timestamp::ZERO + interval,
            seq: 0,
            outbox: VecDeque::new(),
            drop_from: None,
            dropped_frames: BTreeSet::new(),
            max_started: None,
            newest: None,
            p_frame_size: None,
            decisions: Vec::new(),
            decision_count: 0,
            dropped_packets: 0,
        }
    }
}

/// The inputs of Alg. 1 for one frame, and its cost and gain (§III-B1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DropCost {
    /// Bytes queued ahead of the frame (predicted at its arrival for a frame decided ahead).
    pub qlen: DataSize,
    /// The frame's size on the wire.
    pub size: DataSize,
    /// `Bw`: the bandwidth estimate over the window `w`, times `bw_scale` (§III-B3).
    pub bw: DataRate,
    /// `Bw_old`: the largest `Bw` over the recent window (by default `RTT_BN + w`).
    pub bw_old: DataRate,
    /// `RTT_BN`: the bottleneck-sender round trip.
    pub rtt_bn: TimeDelta,
    /// `FR`: the frame rate, frames per second.
    pub fps: f64,
    /// How long before the frame's arrival the decision is made (Eq. 5).
    pub t_pre: TimeDelta,
    /// `alpha` of Eq. 4: the sensitivity to the quality decrease.
    pub alpha: f64,
}

impl DropCost {
    fn frame_interval_s(&self) -> f64 {
        1.0 / self.fps
    }
    /// `T'_i = RTT_BN + 2 / FR`: feedback, re-encode, the trip back and pacing (Eq. 3, Fig. 6).
    pub fn replacement_time(&self) -> TimeDelta {
        self.rtt_bn + TimeDelta::from_secs_f64(2.0 * self.frame_interval_s())
    }
    /// `L_di = (QLen + size) / Bw - T'_i + T_pre` (Eq. 2, 3, 5); infinite at `Bw = 0`.
    pub fn latency_decrease(&self) -> TimeDelta {
        let serve = (self.qlen + self.size) / self.bw;
        if !serve.is_finite() {
            return TimeDelta::INFINITY;
        }
        serve - self.replacement_time() + self.t_pre
    }
    /// `Q_di = alpha (Bw_old - Bw) / Bw / FR` (Eq. 4); infinite at `Bw = 0`.
    pub fn quality_decrease(&self) -> TimeDelta {
        let bw = self.bw.as_bps_f64();
        if bw <= 0.0 {
            return TimeDelta::INFINITY;
        }
        let ratio = (self.bw_old.as_bps_f64() - bw) / bw;
        TimeDelta::from_secs_f64(self.alpha * ratio * self.frame_interval_s())
    }
    /// `Gain_i = L_di - Q_di` (Eq. 1); `None` at `Bw = 0`, where both are infinite (see
    /// [`Self::drop`]).
    pub fn gain(&self) -> Option<TimeDelta> {
        (self.bw > DataRate::ZERO).then(|| self.latency_decrease() - self.quality_decrease())
    }
    /// Alg. 1 lines 3 and 7: `Bw_old > Bw` and `Gain_i > 0`. Decided on `Gain_i x Bw` (bytes),
    /// which has the same sign for `Bw > 0` and a limit at `Bw = 0` (an outage): drop when
    /// more than `alpha x Bw_old / FR` bytes would have to wait.
    pub fn drop(&self) -> bool {
        if self.bw_old <= self.bw {
            return false;
        }
        let bw_bytes_per_s = self.bw.as_bps_f64() / 8.0;
        let old_bytes_per_s = self.bw_old.as_bps_f64() / 8.0;
        let waiting = self.qlen.as_bytes_f64() + self.size.as_bytes_f64();
        let t = self.t_pre.as_secs_f64() - self.replacement_time().as_secs_f64();
        let quality = self.alpha * (old_bytes_per_s - bw_bytes_per_s) * self.frame_interval_s();
        waiting + bw_bytes_per_s * t - quality > 0.0
    }
}

/// Forwarding recovery (§III-B4): with a drop from `drop_from` active, a packet of frame
/// `frame` stamped with `lrf` is forwarded iff `frame < D` or `LRF >= D`.
pub fn forwards(frame: u64, lrf: Option<u64>, drop_from: Option<u64>) -> bool {
    match drop_from {
        None => true,
        Some(d) => frame < d || lrf.is_some_and(|l| l >= d),
    }
}

/// One drop decision, for tests and the time series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    /// When the decision was made.
    pub time: Timestamp,
    /// The first frame dropped (with feedback: the start of the suffix).
    pub frame_id: u64,
    /// Alg. 1's inputs, cost and gain for that frame.
    pub cost: DropCost,
    /// Whether the frame had not arrived yet (decided `lookahead_frames` ahead).
    pub predicted: bool,
}

/// The newest frame (forwarded) that has a packet at the bottleneck.
#[derive(Clone, Copy, Debug)]
struct NewestFrame {
    id: u64,
    lrf: Option<u64>,
    first_arrival: Timestamp,
    count: u16,
    packet_size: DataSize,
    arrived: u16,
}

#[derive(Clone, Copy, Debug)]
struct Candidate {
    frame_id: u64,
    qlen: DataSize,
    size: DataSize,
    t_pre: TimeDelta,
    predicted: bool,
}

/// Co-RTV's bottleneck behaviour; built by [`CoRtvBottleneckConfig::build`].
#[derive(Debug)]
pub struct FrameDroppingBottleneck {
    queue: DropTail,
    flow: FlowId,
    alpha: f64,
    fps: f64,
    rtt_bn: TimeDelta,
    lookahead: u32,
    feedback: bool,
    interval: TimeDelta,
    tick: TimeDelta,
    bw: WindowedBandwidth,
    /// `Bw_old` must exceed `Bw` by more than this for Alg. 1 to run.
    decrease_margin: DataRate,
    next_tick: Timestamp,
    next_report: Timestamp,
    seq: u64,
    outbox: VecDeque<Datagram>,
    /// The active drop `D` (with feedback).
    drop_from: Option<u64>,
    /// Frames decided dropped one by one (without feedback).
    dropped_frames: BTreeSet<u64>,
    /// The largest frame id with a packet that has left the queue.
    max_started: Option<u64>,
    newest: Option<NewestFrame>,
    /// On-wire size of the last P frame seen (packets x packet size), for predictions.
    p_frame_size: Option<DataSize>,
    decisions: Vec<Decision>,
    decision_count: u64,
    dropped_packets: u64,
}

/// Decisions kept for inspection (the oldest are forgotten).
const MAX_DECISIONS_KEPT: usize = 10_000;

impl FrameDroppingBottleneck {
    /// The drop decisions made so far (the last 10 000).
    pub fn decisions(&self) -> &[Decision] {
        &self.decisions
    }
    /// `RTT_BN` in use.
    pub fn rtt_bn(&self) -> TimeDelta {
        self.rtt_bn
    }

    /// The media packet of this flow that belongs to a frame, if `d` is one.
    fn frame_packet<'d>(&self, d: &'d Datagram) -> Option<&'d Packet> {
        match d {
            Datagram::Media(p)
                if p.flow == self.flow
                    && matches!(p.kind, PacketKind::Video | PacketKind::Retransmission) =>
            {
                Some(p)
            }
            _ => None,
        }
    }

    /// Whether a packet of this frame passes (the forwarding rule or the dropped set).
    fn passes(&self, p: &Packet) -> bool {
        if self.feedback {
            forwards(p.frame_id, p.latest_reencoded, self.drop_from)
        } else {
            !self.dropped_frames.contains(&p.frame_id)
        }
    }

    /// Whether a frame may still be chosen by a new decision (its generation is current).
    fn eligible(&self, frame_id: u64, lrf: Option<u64>) -> bool {
        if self.feedback {
            // Frames up to D are committed to forwarding; only the new generation can go. (The
            // first frame the sender encodes after hearing of D can be D itself, when D had
            // not been encoded yet: it carries LRF = D, so no later D can drop it.)
            self.drop_from.is_none_or(|d| frame_id > d && lrf.is_some_and(|l| l >= d))
        } else {
            !self.dropped_frames.contains(&frame_id)
        }
    }

    /// Notes a forwarded frame packet's arrival; true if it is the first of a new frame.
    fn note_arrival(&mut self, p: &Packet, now: Timestamp) -> bool {
        if p.kind != PacketKind::Video {
            return false;
        }
        match &mut self.newest {
            Some(n) if n.id == p.frame_id => {
                n.arrived = n.arrived.saturating_add(1);
                false
            }
            Some(n) if p.frame_id < n.id => false,
            _ => {
                let count = p.packet_count.max(1);
                self.newest = Some(NewestFrame {
                    id: p.frame_id,
                    lrf: p.latest_reencoded,
                    first_arrival: now,
                    count,
                    packet_size: p.size,
                    arrived: 1,
                });
                if !p.is_keyframe {
                    self.p_frame_size = Some(p.size * count as i64);
                }
                true
            }
        }
    }

    /// The frames Alg. 1 looks at, in frame order.
    fn candidates(&self, view: &QueueView<'_>, bw: DataRate) -> Vec<Candidate> {
        let now = view.now();
        let in_transit =
            view.in_transit.and_then(|(d, _)| self.frame_packet(d)).map(|p| p.frame_id);
        let started = self.max_started.max(in_transit);
        let mut out = Vec::new();
        let mut ahead = view.in_transit.map_or(DataSize::ZERO, |(_, left)| left);
        let mut seen: Option<u64> = None;
        for item in view.queue.iter() {
            if let Some(p) = self.frame_packet(&item.datagram) {
                let new = p.kind == PacketKind::Video && seen.is_none_or(|s| p.frame_id > s);
                if new {
                    seen = Some(p.frame_id);
                    if started.is_none_or(|s| p.frame_id > s)
                        && self.eligible(p.frame_id, p.latest_reencoded)
                    {
                        out.push(Candidate {
                            frame_id: p.frame_id,
                            qlen: ahead,
                            size: p.size * p.packet_count.max(1) as i64,
                            t_pre: TimeDelta::ZERO,
                            predicted: false,
                        });
                    }
                }
            }
            ahead += item.size;
        }
        if let Some(n) = self.newest.filter(|n| self.lookahead > 0 && self.eligible(n.id, n.lrf)) {
            let rest = n.packet_size * n.count.saturating_sub(n.arrived) as i64;
            let size = self.p_frame_size.unwrap_or(n.packet_size * n.count as i64);
            let mut before = view.backlog() + rest;
            for m in 1..=self.lookahead as u64 {
                let arrival = n.first_arrival + TimeDelta::from_secs_f64(m as f64 / self.fps);
                let t_pre = arrival.saturating_since(now);
                out.push(Candidate {
                    frame_id: n.id + m,
                    qlen: (before - bw * t_pre).max(DataSize::ZERO),
                    size,
                    t_pre,
                    predicted: true,
                });
                before += size;
            }
        }
        out
    }

    /// Alg. 1 at `view.now()`: decides, removes the queued packets of the frames it drops
    /// and reports (with feedback).
    fn decide(&mut self, view: &mut QueueView<'_>, dropped: &mut Drops) {
        let (Some(bw), Some(bw_old)) = (self.bw.bw(), self.bw.bw_old()) else { return };
        if bw_old <= bw + self.decrease_margin {
            return; // Alg. 1 line 3, at the estimate's resolution
        }
        let now = view.now();
        let mut chosen: Vec<(Candidate, DropCost)> = Vec::new();
        for c in self.candidates(view, bw) {
            let cost = DropCost {
                qlen: c.qlen,
                size: c.size,
                bw,
                bw_old,
                rtt_bn: self.rtt_bn,
                fps: self.fps,
                t_pre: c.t_pre,
                alpha: self.alpha,
            };
            if cost.drop() {
                chosen.push((c, cost));
                if self.feedback {
                    break; // the suffix from the first frame with Gain > 0
                }
            }
        }
        let Some(&(first, cost)) = chosen.first() else { return };
        self.decision_count += 1;
        if self.decisions.len() >= MAX_DECISIONS_KEPT {
            self.decisions.remove(0);
        }
        self.decisions.push(Decision {
            time: now,
            frame_id: first.frame_id,
            cost,
            predicted: first.predicted,
        });
        let mut removed = Vec::new();
        if self.feedback {
            let d = first.frame_id;
            self.drop_from = Some(d);
            let flow = self.flow;
            view.queue.remove_where(
                |q| match &q.datagram {
                    Datagram::Media(p) => {
                        p.flow == flow
                            && matches!(p.kind, PacketKind::Video | PacketKind::Retransmission)
                            && !forwards(p.frame_id, p.latest_reencoded, Some(d))
                    }
                    Datagram::Feedback(_) => false,
                },
                &mut removed,
            );
        } else {
            for (c, _) in &chosen {
                self.dropped_frames.insert(c.frame_id);
            }
            let flow = self.flow;
            let set = &self.dropped_frames;
            view.queue.remove_where(
                |q| match &q.datagram {
                    Datagram::Media(p) => {
                        p.flow == flow
                            && matches!(p.kind, PacketKind::Video | PacketKind::Retransmission)
                            && set.contains(&p.frame_id)
                    }
                    Datagram::Feedback(_) => false,
                },
                &mut removed,
            );
            // Bounded memory: frames far behind the newest never come again.
            if let Some(n) = self.newest {
                let floor = n.id.saturating_sub(10_000);
                while self.dropped_frames.first().is_some_and(|f| *f < floor) {
                    self.dropped_frames.pop_first();
                }
            }
        }
        self.dropped_packets += removed.len() as u64;
        dropped.extend(removed.into_iter().map(|q| (q, DropReason::Policy)));
        if self.feedback {
            self.report(now, view.backlog(), Some(bw), self.drop_from);
        }
    }

    fn report(
        &mut self,
        now: Timestamp,
        queue: DataSize,
        rate: Option<DataRate>,
        drop_from: Option<u64>,
    ) {
        let report =
            BottleneckReport { flow: self.flow, seq: self.seq, time: now, queue, rate, drop_from };
        self.seq += 1;
        self.outbox.push_back(Datagram::Feedback(Feedback::Bottleneck(report)));
    }
}

impl QueueDiscipline for FrameDroppingBottleneck {
    fn on_arrival(&mut self, view: &mut QueueView<'_>, item: Queued, dropped: &mut Drops) {
        let mut new_frame = false;
        let frame = self.frame_packet(&item.datagram).map(|p| (self.passes(p), p.clone()));
        if let Some((passes, p)) = frame {
            if !passes {
                self.dropped_packets += 1;
                dropped.push((item, DropReason::Policy));
                return;
            }
            new_frame = self.note_arrival(&p, view.now());
        }
        self.queue.on_arrival(view, item, dropped);
        if new_frame {
            self.decide(view, dropped);
        }
    }

    fn on_departure(&mut self, datagram: &Datagram, _arrival: Timestamp, at: Timestamp) {
        if let Some(p) = self.frame_packet(datagram) {
            if p.kind == PacketKind::Video {
                self.max_started = self.max_started.max(Some(p.frame_id));
            }
        }
        self.bw.on_served(datagram.size(), at);
    }

    fn handle_timeout(&mut self, view: &mut QueueView<'_>, dropped: &mut Drops) {
        let now = view.now();
        if now >= self.next_tick {
            self.bw.update(view);
            self.decide(view, dropped);
            while self.next_tick <= now {
                self.next_tick += self.tick;
            }
        }
        if self.feedback && now >= self.next_report {
            self.report(now, view.backlog(), None, None);
            while self.next_report <= now {
                self.next_report += self.interval;
            }
        }
    }

    fn poll_timeout(&self) -> Timestamp {
        if self.feedback {
            self.next_tick.min(self.next_report)
        } else {
            self.next_tick
        }
    }

    fn poll_report(&mut self) -> Option<Datagram> {
        self.outbox.pop_front()
    }

    fn debug_columns(&self, out: &mut Columns) {
        out.rate("bn_bw_bps", self.bw.bw());
        out.rate("bn_bw_old_bps", self.bw.bw_old());
        out.int("bn_drop_from", self.drop_from.map(|d| d as i64));
        out.int("bn_drop_decisions", Some(self.decision_count as i64));
        out.int("bn_policy_drops", Some(self.dropped_packets as i64));
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

#[cfg(test)]
mod tests;
