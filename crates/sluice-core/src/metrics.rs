//! Per-frame records, time-series samples and the run summary.
//!
//! Definitions (also in docs/metrics.md):
//! * latency: display time minus capture time, over displayed frames;
//! * `stall_rate` (ACE §6.3): the share of the session in which the interval between
//!   displayed frames exceeds 100 ms (each such interval counts whole; the session's start and
//!   end count as display instants, so waiting for the first frame and the time after the
//!   last one count too, and a session that displays nothing has a stall rate of 1);
//! * `tail10_mean` in each latency summary: the mean of the worst 10 % (the MAE artifact's
//!   "tail overall delay");
//! * `stall_ratio_200ms` (MAE §6.1): `stall_count_200ms` over the capture slots;
//! * `adaptation_ratio` (MAE §6.7): encoded frames whose encoder controller marked them
//!   adapted (the plan column `encoder_adapted`, MAE's tight VBV) over encoded frames; 0 when
//!   the controller never adapts;
//! * `stall_count_200ms` (MAE §6.1): capture slots whose frame was displayed more than 200 ms
//!   after capture or never (a skipped slot counts);
//! * `latency_all_ms` (Salsify's rule, Vidaptive §5.1): over every capture slot, displayed or
//!   not: a slot whose frame was never displayed counts until the next frame of a later slot
//!   was displayed (or the end of the run);
//! * `loss_rate`: media-path packets the network lost at the downlink (queue overflow or
//!   random loss) over packets that reached it (every kind: video, retransmissions, padding);
//! * `bn_drop_rate`: packets a frame-dropping bottleneck dropped on purpose (Co-RTV) over
//!   packets that reached the downlink, apart from `loss_rate`;
//! * `video_bitrate_bps` (Vidaptive §5.1, "the total video bitrate ... at the receiver"): the
//!   encoded bytes of the frames the receiver completed, over the session; padding,
//!   retransmitted copies and frames that never arrived whole do not count;
//! * `padding_ratio`: padding bytes (probes, keep-alives, Vidaptive's dummy packets) over all
//!   bytes the sender put on the wire (on-wire sizes);
//! * `utilization`: bytes the downlink delivered over the bytes its trace could deliver during
//!   the session;
//! * `bwe_ratio`: mean target rate over mean link capacity, both time-averaged over the
//!   samples.

use crate::columns::{Columns, Value, ADAPTED_COLUMN};
use crate::packet::PacketKind;
use crate::receiver::ReceiverEvent;
use crate::sender::SenderEvent;
use crate::stats::{percentile, tail_mean};
use crate::units::{TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One encoded frame's life (one per encode: a source frame encoded twice has two). Times are
/// microseconds from the session start; `None` when the event did not happen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FrameRecord {
    /// The encode's frame id.
    pub frame_id: u64,
    /// The capture slot (source frame) it encodes.
    pub source_index: u64,
    /// Capture time of the slot.
    pub capture_us: i64,
    /// When the encode started.
    pub encode_start_us: i64,
    /// When the encode finished.
    pub encode_end_us: i64,
    /// Encoded size (payload, no packet headers).
    pub size_bytes: i64,
    /// Whether it was coded as a keyframe.
    pub is_keyframe: bool,
    /// Average quantiser, to three decimals (NaN, written null, when unknown).
    #[serde(with = "crate::columns::float_or_null")]
    pub qp: f64,
    /// The rate control's target for the frame (after the application's cap).
    pub target_rate_bps: i64,
    /// Packets the frame was split into.
    pub packets: u16,
    /// The frame it references (`None` for a keyframe).
    pub ref_frame_id: Option<u64>,
    /// When its first video packet left the sender.
    pub first_packet_sent_us: Option<i64>,
    /// When its latest video packet left the sender (retransmissions not counted).
    pub last_packet_sent_us: Option<i64>,
    /// When its first packet reached the head of the pacer queue: `last_packet_sent_us`
    /// minus this is its service time.
    pub pacer_head_us: Option<i64>,
    /// When the receiver had all its packets.
    pub completed_us: Option<i64>,
    /// When the receiver displayed it.
    pub displayed_us: Option<i64>,
    /// Display time minus capture time (displayed frames only).
    pub latency_us: Option<i64>,
    /// Passed over by the receiver because a later frame was displayed first.
    pub discarded: bool,
    /// Removed from the pacer by the sender (the packets it had not sent yet).
    pub purged: bool,
    /// The encoder controller's per-frame state (ACE-C: `complexity`,
    /// `predicted_relative_size`; ...), flattened into the record.
    #[serde(flatten)]
    pub columns: Columns,
}

/// A capture slot that was never encoded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SkipRecord {
    /// The skipped capture slot.
    pub source_index: u64,
    /// Its capture time.
    pub capture_us: i64,
    /// Why the encoder controller skipped it.
    pub reason: crate::columns::Name,
}

/// One time-series sample, taken every sample interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// When the sample was taken (microseconds from the session start).
    pub t_us: i64,
    /// The congestion controller's target rate.
    pub target_rate_bps: i64,
    /// Rate given to the encoder (below the target while the controller pushes back).
    pub encoder_rate_bps: i64,
    /// `None` without pacing (the unpaced scheme has no finite rate).
    pub pacing_rate_bps: Option<i64>,
    /// Trace capacity over the last sample interval.
    pub link_capacity_bps: i64,
    /// Rate the sender put on the wire over the last interval (all packet kinds).
    pub send_rate_bps: i64,
    /// Rate the downlink delivered over the last interval.
    pub delivered_rate_bps: i64,
    /// Bytes waiting in the bottleneck queue (not the packet being serialised).
    pub queue_bytes: i64,
    /// Packets waiting in the bottleneck queue.
    pub queue_packets: u64,
    /// Sojourn time of the last packet to leave the bottleneck queue.
    pub queue_delay_us: i64,
    /// Bytes waiting in the sender's pacer.
    pub pacer_queue_bytes: i64,
    /// How long the oldest packet in the pacer has waited.
    pub pacer_delay_us: i64,
    /// The sender's smoothed RTT (`None` before its first sample).
    pub rtt_us: Option<i64>,
    /// Bytes sent and not yet reported by transport feedback.
    pub in_flight_bytes: i64,
    /// The congestion window, for controllers that have one.
    pub cwnd_bytes: Option<i64>,
    /// Downlink drops so far (cumulative).
    pub lost_packets: u64,
    /// The congestion controller's and the pacer's named state (`cc_*`, `pacer_*`; see
    /// [`crate::columns`]), flattened into the record.
    #[serde(flatten)]
    pub columns: Columns,
}

/// The fixed columns of the three record kinds of a run's records (`run.jsonl`: `frame`,
/// `skip`, `sample`), in their order: [`FrameRecord`], [`SkipRecord`] and [`Sample`] as they
/// serialise, without the named columns ([`Columns`]) each record adds after them. Python's
/// readers take their column lists from here (`_core.record_schema()`), so a field added to a
/// record is a column everywhere.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RecordSchema {
    /// The columns of a `frame` record ([`FrameRecord`]).
    pub frame: &'static [&'static str],
    /// The columns of a `skip` record ([`SkipRecord`]).
    pub skip: &'static [&'static str],
    /// The columns of a `sample` record ([`Sample`]).
    pub sample: &'static [&'static str],
}

/// The record schema (a test checks it against the records' serialisation).
pub const RECORD_SCHEMA: RecordSchema = RecordSchema {
    frame: &[
        "frame_id",
        "source_index",
        "capture_us",
        "encode_start_us",
        "encode_end_us",
        "size_bytes",
        "is_keyframe",
        "qp",
        "target_rate_bps",
        "packets",
        "ref_frame_id",
        "first_packet_sent_us",
        "last_packet_sent_us",
        "pacer_head_us",
        "completed_us",
        "displayed_us",
        "latency_us",
        "discarded",
        "purged",
    ],
    skip: &["source_index", "capture_us", "reason"],
    sample: &[
        "t_us",
        "target_rate_bps",
        "encoder_rate_bps",
        "pacing_rate_bps",
        "link_capacity_bps",
        "send_rate_bps",
        "delivered_rate_bps",
        "queue_bytes",
        "queue_packets",
        "queue_delay_us",
        "pacer_queue_bytes",
        "pacer_delay_us",
        "rtt_us",
        "in_flight_bytes",
        "cwnd_bytes",
        "lost_packets",
    ],
};

/// Mean, percentiles (linear interpolation) and maximum of latencies, in milliseconds; NaN
/// without values.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Mean latency.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest latency.
    pub max: f64,
    /// Mean of the worst 10 % (at least one value).
    pub tail10_mean: f64,
}

/// The run summary (JSON keys are part of the result format).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// The session (capture) duration, seconds.
    pub duration_s: f64,
    /// Latency of the displayed frames.
    pub latency_ms: LatencySummary,
    /// Share of the session in gaps of more than 100 ms between displays (ACE §6.3).
    pub stall_rate: f64,
    /// Capture slots displayed more than 200 ms after capture, or never (MAE §6.1).
    pub stall_count_200ms: u64,
    /// `stall_count_200ms` over the capture slots (MAE's stall ratio).
    pub stall_ratio_200ms: f64,
    /// Freezes as WebRTC's getStats counts them (`freezeCount`; [`freezes`]).
    pub freeze_count: u64,
    /// Their total duration (`totalFreezesDuration`), seconds.
    pub total_freezes_duration_s: f64,
    /// Share of encoded frames the encoder controller adapted (MAE's tight VBV).
    pub adaptation_ratio: f64,
    /// Latency over every capture slot, Salsify's rule (see the module documentation).
    pub latency_all_ms: LatencySummary,
    /// Displayed frames per second of the session (frames shown in the drain count too).
    pub fps: f64,
    /// Packets the network lost on the media path over packets that reached the downlink.
    pub loss_rate: f64,
    /// Packets a bottleneck dropped on purpose (whole frames), over packets that reached it.
    pub bn_drop_rate: f64,
    /// Video as received: encoded bytes of the frames the receiver completed, over the
    /// session (see the module documentation).
    pub video_bitrate_bps: f64,
    /// Padding bytes over all bytes sent.
    pub padding_ratio: f64,
    /// Bytes of the session's media flow the downlink delivered over the bytes its trace could
    /// deliver (NaN without a trace).
    pub utilization: f64,
    /// Mean target rate over mean link capacity, over the samples (NaN without a trace).
    pub bwe_ratio: f64,
    /// Frame records: encodes (a slot encoded twice counts twice).
    pub frames_sent: u64,
    /// Encodes the receiver displayed.
    pub frames_displayed: u64,
    /// Encodes the receiver passed over (a later frame was displayed first).
    pub frames_discarded: u64,
    /// Capture slots never encoded.
    pub frames_skipped: u64,
    /// Frames purged from the pacer by the sender.
    pub frames_purged: u64,
    /// Frames with a packet a bottleneck dropped on purpose.
    pub frames_bn_dropped: u64,
    /// Keyframes encoded.
    pub keyframes: u64,
    /// Retransmitted packets sent.
    pub retransmissions: u64,
    /// Padding bytes sent (probes, keep-alives, dummy packets; on-wire sizes).
    pub padding_bytes: i64,
    /// Time average of the trace's capacity over the samples.
    pub mean_capacity_bps: f64,
    /// Time average of the congestion controller's target over the samples.
    pub mean_target_rate_bps: f64,
    /// Mean of the sender's smoothed RTT over the samples (`None` if it never had one).
    pub rtt_ms_mean: Option<f64>,
    /// P95 over the samples of the oldest pacer packet's wait.
    pub pacer_delay_ms_p95: f64,
    /// P95 over the samples of the last bottleneck departure's sojourn time.
    pub queue_delay_ms_p95: f64,
    /// Every flow at the bottleneck, the session's media flow first (only with competing
    /// flows; `sim/flows.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flows: Option<Vec<FlowSummary>>,
    /// Jain's fairness index of the flows' rates over the interval in which all are active,
    /// after a 10 s warm-up (only with competing flows; null if that interval is empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jain_index: Option<f64>,
    /// What the path faults did (only with `faults` in the run config).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_faults: Option<crate::link::faults::FaultStats>,
}

/// One flow's share of the bottleneck (`flows` in the summary).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowSummary {
    /// The flow id (0: the session's media flow).
    pub flow: u32,
    /// `media`, `reverse-media`, `tcp`, `short-tcp`, `audio` or `reverse-audio`.
    pub kind: String,
    /// The media flow's scheme, the TCP flow's congestion control, or `cbr` (audio).
    pub scheme: String,
    /// When it started, seconds into the session.
    pub start_s: f64,
    /// When it stopped (null: it ran to the end).
    pub stop_s: Option<f64>,
    /// Its one-way delay between its sender and the bottleneck, each way, on top of the
    /// path's (the session's `downlink.access_delay_ms` for flow 0).
    pub access_delay_ms: f64,
    /// Bytes delivered by the bottleneck over the flow's active time, as a rate.
    pub mean_rate_bps: f64,
    /// Its share of all bytes the bottleneck delivered (sampled part of the session).
    pub share: f64,
    /// P95 of its packets' queueing delay at the bottleneck (null: none left the queue).
    pub queue_delay_ms_p95: Option<f64>,
    /// Its packets dropped at the bottleneck over its packets that reached it.
    pub loss_rate: f64,
}

/// Collects sender and receiver events into per-frame records.
#[derive(Debug, Default)]
pub struct Recorder {
    frames: BTreeMap<u64, FrameRecord>,
    /// Slots skipped and not (yet) encoded.
    skipped: BTreeMap<u64, SkipRecord>,
    /// Retransmitted packets sent.
    pub retransmissions: u64,
    /// Padding bytes sent (on-wire sizes).
    pub padding_bytes: i64,
    /// Bytes of every packet the sender put on the wire (on-wire sizes).
    pub sent_bytes_total: i64,
    /// Bottleneck reports that reached the sender.
    pub bottleneck_reports: u64,
    /// Times the receiver asked for a keyframe.
    pub keyframe_requests: u64,
    /// Whether the bottleneck drops frames on purpose: frames then carry a `bn_dropped`
    /// column.
    bottleneck_drops: bool,
}

impl Recorder {
    /// A recorder for a run whose bottleneck drops frames: every frame record gets a
    /// `bn_dropped` column, set by [`Self::on_bottleneck_drop`].
    pub fn with_bottleneck_drops() -> Recorder {
        Recorder { bottleneck_drops: true, ..Recorder::default() }
    }

    /// The bottleneck dropped a packet of `frame_id` on purpose.
    pub fn on_bottleneck_drop(&mut self, frame_id: u64) {
        if let Some(f) = self.frames.get_mut(&frame_id) {
            f.columns.set("bn_dropped", crate::columns::Value::Bool(true));
        }
    }

    /// Records a sender event in the frame and skip records and the counters.
    pub fn on_sender_event(&mut self, e: SenderEvent) {
        match e {
            SenderEvent::FrameEncoded {
                frame_id,
                source_index,
                capture_time,
                encode_start,
                encode_end,
                size,
                is_keyframe,
                qp,
                target_rate,
                packet_count,
                reference,
                mut columns,
            } => {
                if self.bottleneck_drops {
                    columns.bool("bn_dropped", false);
                }
                self.skipped.remove(&source_index);
                self.frames.insert(
                    frame_id,
                    FrameRecord {
                        frame_id,
                        source_index,
                        capture_us: capture_time.as_us(),
                        encode_start_us: encode_start.as_us(),
                        encode_end_us: encode_end.as_us(),
                        size_bytes: size.as_bytes(),
                        is_keyframe,
                        qp: (qp * 1000.0).round() / 1000.0,
                        target_rate_bps: target_rate.as_bps(),
                        packets: packet_count,
                        ref_frame_id: reference,
                        columns,
                        ..Default::default()
                    },
                );
            }
            SenderEvent::FrameSkipped { source_index, capture_time, reason } => {
                self.skipped.insert(
                    source_index,
                    SkipRecord { source_index, capture_us: capture_time.as_us(), reason },
                );
            }
            SenderEvent::FrameServiced { frame_id, head_at, .. } => {
                if let Some(f) = self.frames.get_mut(&frame_id) {
                    f.pacer_head_us = Some(head_at.as_us());
                }
            }
            SenderEvent::FramePurged { frame_id, .. } => {
                if let Some(f) = self.frames.get_mut(&frame_id) {
                    f.purged = true;
                }
            }
            SenderEvent::BottleneckReport { .. } => self.bottleneck_reports += 1,
            SenderEvent::PacketSent { kind, frame_id, size, time } => {
                self.sent_bytes_total += size.as_bytes();
                match kind {
                    PacketKind::Padding => self.padding_bytes += size.as_bytes(),
                    PacketKind::Retransmission => self.retransmissions += 1,
                    PacketKind::Video => {
                        if let Some(f) = self.frames.get_mut(&frame_id) {
                            let t = time.as_us();
                            f.first_packet_sent_us.get_or_insert(t);
                            f.last_packet_sent_us = Some(t);
                        }
                    }
                }
            }
        }
    }

    /// Records a receiver event (completion, display, discard, keyframe request).
    pub fn on_receiver_event(&mut self, e: ReceiverEvent) {
        match e {
            ReceiverEvent::FrameCompleted { frame_id, time } => {
                if let Some(f) = self.frames.get_mut(&frame_id) {
                    f.completed_us = Some(time.as_us());
                }
            }
            ReceiverEvent::FrameDisplayed { frame_id, time } => {
                if let Some(f) = self.frames.get_mut(&frame_id) {
                    f.displayed_us = Some(time.as_us());
                    f.latency_us = Some(time.as_us() - f.capture_us);
                }
            }
            ReceiverEvent::FrameDiscarded { frame_id, .. } => {
                if let Some(f) = self.frames.get_mut(&frame_id) {
                    f.discarded = true;
                }
            }
            ReceiverEvent::KeyframeRequested { .. } => self.keyframe_requests += 1,
        }
    }

    /// The frame records, by frame id.
    pub fn frames(&self) -> Vec<FrameRecord> {
        self.frames.values().cloned().collect()
    }
    /// The slots skipped and never encoded.
    pub fn skips(&self) -> Vec<SkipRecord> {
        self.skipped.values().cloned().collect()
    }
}

/// Link-level totals the summary needs.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkTotals {
    /// Packets of the session's media flow that reached the bottleneck (all packets when it
    /// is alone).
    pub arrived_packets: u64,
    /// Every drop, whatever the reason.
    pub dropped_packets: u64,
    /// Drops a bottleneck policy made on purpose (counted in `dropped_packets` too).
    pub policy_dropped_packets: u64,
    /// Bytes of the session's media flow the bottleneck delivered up to the last sample, the
    /// numerator of `utilization`.
    pub delivered_bytes: i64,
    /// Bytes the trace could deliver over the session.
    pub capacity_bytes: i64,
}

/// Stall threshold of ACE §6.3.
pub const STALL_INTERVAL: TimeDelta = TimeDelta::from_ms(100);
/// Latency threshold of MAE §6.1.
pub const STALL_LATENCY: TimeDelta = TimeDelta::from_ms(200);

impl LatencySummary {
    /// Mean, percentiles and maximum of latencies in microseconds, in milliseconds.
    fn of_us(values_us: impl Iterator<Item = i64>) -> LatencySummary {
        let mut lat: Vec<f64> = values_us.map(|us| us as f64 / 1e3).collect();
        lat.sort_by(|a, b| a.total_cmp(b));
        let mean =
            if lat.is_empty() { f64::NAN } else { lat.iter().sum::<f64>() / lat.len() as f64 };
        LatencySummary {
            mean,
            p50: percentile(&lat, 50.0),
            p95: percentile(&lat, 95.0),
            p99: percentile(&lat, 99.0),
            p999: percentile(&lat, 99.9),
            max: lat.last().copied().unwrap_or(f64::NAN),
            tail10_mean: tail_mean(&lat, 0.10),
        }
    }
}

/// Per capture slot (in source order): capture time and the latency Salsify's rule gives it
/// (its own frame's display, else the first display of a later slot's frame, else `run_end`),
/// and whether its own frame was displayed.
pub fn slot_latencies(
    frames: &[FrameRecord],
    skips: &[SkipRecord],
    run_end: Timestamp,
) -> Vec<(i64, bool)> {
    // source index -> (capture, earliest display of a frame of this slot)
    let mut slots: BTreeMap<u64, (i64, Option<i64>)> = BTreeMap::new();
    for s in skips {
        slots.entry(s.source_index).or_insert((s.capture_us, None));
    }
    for f in frames {
        let e = slots.entry(f.source_index).or_insert((f.capture_us, None));
        if let Some(d) = f.displayed_us {
            e.1 = Some(e.1.map_or(d, |x: i64| x.min(d)));
        }
    }
    let mut out = Vec::with_capacity(slots.len());
    let mut later_display = run_end.as_us();
    for (capture, shown) in slots.values().rev() {
        let until = shown.unwrap_or(later_display);
        out.push((until - capture, shown.is_some()));
        if let Some(d) = shown {
            later_display = later_display.min(*d);
        }
    }
    out.reverse();
    out
}

/// Frames in libwebrtc's moving average of render intervals
/// (`kAvgInterframeDelaysWindowSizeFrames`).
pub const FREEZE_WINDOW_FRAMES: usize = 30;
/// Intervals it needs before a freeze can be detected (`kMinFrameSamplesToDetectFreeze`).
pub const FREEZE_MIN_SAMPLES: usize = 5;
/// The least increase over the average interval that is a freeze (`kMinIncreaseForFreezeMs`).
pub const FREEZE_MIN_INCREASE_MS: i64 = 150;

/// Freezes as WebRTC counts them for getStats' `freezeCount` and `totalFreezesDuration`
/// (libwebrtc `video/video_quality_observer2.cc`, `OnRenderedFrame`): each interval between
/// two consecutively displayed frames, in whole milliseconds, joins a moving average of the
/// last 30; once it holds 5, an interval is a freeze if it is at least `max(3 x average,
/// average + 150 ms)` (the average rounded down, the interval itself included). Returns the
/// count and the total duration in seconds. `display_us` in display order.
pub fn freezes(display_us: &[i64]) -> (u64, f64) {
    let mut window: std::collections::VecDeque<i64> = std::collections::VecDeque::new();
    let (mut count, mut total_ms) = (0u64, 0i64);
    for w in display_us.windows(2) {
        let d = w[1].div_euclid(1000) - w[0].div_euclid(1000);
        window.push_back(d);
        if window.len() > FREEZE_WINDOW_FRAMES {
            window.pop_front();
        }
        if window.len() >= FREEZE_MIN_SAMPLES {
            let avg = window.iter().sum::<i64>().div_euclid(window.len() as i64);
            if d >= (3 * avg).max(avg + FREEZE_MIN_INCREASE_MS) {
                count += 1;
                total_ms += d;
            }
        }
    }
    (count, total_ms as f64 / 1e3)
}

/// The run summary. `session_end` is the end of capture; `run_end` the end of the run
/// (capture plus the drain), the display time charged to slots never shown.
pub fn summarize(
    frames: &[FrameRecord],
    skips: &[SkipRecord],
    samples: &[Sample],
    link: LinkTotals,
    recorder: &Recorder,
    session_end: Timestamp,
    run_end: Timestamp,
) -> Summary {
    let duration_s = session_end.as_secs_f64();
    let latency_ms = LatencySummary::of_us(frames.iter().filter_map(|f| f.latency_us));
    let slots = slot_latencies(frames, skips, run_end);
    let latency_all_ms = LatencySummary::of_us(slots.iter().map(|&(l, _)| l));

    // Display instants within the session, anchored at its start: the wait for the first
    // frame counts, and a session that displays nothing is one long stall.
    let end_us = session_end.as_us();
    let mut display_times: Vec<i64> =
        frames.iter().filter_map(|f| f.displayed_us).filter(|&t| t <= end_us).collect();
    display_times.sort_unstable();
    display_times.insert(0, 0);
    display_times.push(end_us);
    let mut stalled_us = 0i64;
    let threshold = STALL_INTERVAL.as_us();
    for w in display_times.windows(2) {
        let gap = w[1] - w[0];
        if gap > threshold {
            stalled_us += gap;
        }
    }
    let stall_rate = if duration_s > 0.0 { stalled_us as f64 / 1e6 / duration_s } else { 0.0 };
    let stall_count_200ms =
        slots.iter().filter(|&&(l, shown)| !shown || l > STALL_LATENCY.as_us()).count() as u64;

    let mean_of = |f: &dyn Fn(&Sample) -> f64| -> f64 {
        if samples.is_empty() {
            return f64::NAN;
        }
        samples.iter().map(f).sum::<f64>() / samples.len() as f64
    };
    let mean_capacity = mean_of(&|s| s.link_capacity_bps as f64);
    let mean_target = mean_of(&|s| s.target_rate_bps as f64);
    let rtts: Vec<f64> = samples.iter().filter_map(|s| s.rtt_us).map(|r| r as f64 / 1e3).collect();
    let mut pacer: Vec<f64> = samples.iter().map(|s| s.pacer_delay_us as f64 / 1e3).collect();
    pacer.sort_by(|a, b| a.total_cmp(b));
    let mut queue: Vec<f64> = samples.iter().map(|s| s.queue_delay_us as f64 / 1e3).collect();
    queue.sort_by(|a, b| a.total_cmp(b));

    let displayed = frames.iter().filter(|f| f.displayed_us.is_some()).count() as u64;
    let mut shown_at: Vec<i64> = frames.iter().filter_map(|f| f.displayed_us).collect();
    shown_at.sort_unstable();
    let (freeze_count, total_freezes_duration_s) = freezes(&shown_at);
    Summary {
        duration_s,
        latency_ms,
        stall_rate,
        stall_count_200ms,
        stall_ratio_200ms: if slots.is_empty() {
            0.0
        } else {
            stall_count_200ms as f64 / slots.len() as f64
        },
        freeze_count,
        total_freezes_duration_s,
        adaptation_ratio: if frames.is_empty() {
            0.0
        } else {
            frames
                .iter()
                .filter(|f| f.columns.get(ADAPTED_COLUMN) == Some(&Value::Bool(true)))
                .count() as f64
                / frames.len() as f64
        },
        latency_all_ms,
        fps: if duration_s > 0.0 { displayed as f64 / duration_s } else { 0.0 },
        loss_rate: if link.arrived_packets > 0 {
            link.dropped_packets.saturating_sub(link.policy_dropped_packets) as f64
                / link.arrived_packets as f64
        } else {
            0.0
        },
        bn_drop_rate: if link.arrived_packets > 0 {
            link.policy_dropped_packets as f64 / link.arrived_packets as f64
        } else {
            0.0
        },
        video_bitrate_bps: frames
            .iter()
            .filter(|f| f.completed_us.is_some())
            .map(|f| f.size_bytes as f64 * 8.0)
            // From +0: an empty f64 sum is -0.0, which a summary without frames showed.
            .fold(0.0, |a, b| a + b)
            / duration_s.max(1e-9),
        padding_ratio: if recorder.sent_bytes_total > 0 {
            recorder.padding_bytes as f64 / recorder.sent_bytes_total as f64
        } else {
            0.0
        },
        utilization: if link.capacity_bytes > 0 {
            link.delivered_bytes as f64 / link.capacity_bytes as f64
        } else {
            f64::NAN
        },
        // Undefined (NaN, written as null) without a capacity trace.
        bwe_ratio: if mean_capacity > 0.0 { mean_target / mean_capacity } else { f64::NAN },
        frames_sent: frames.len() as u64,
        frames_displayed: displayed,
        frames_discarded: frames.iter().filter(|f| f.discarded).count() as u64,
        frames_skipped: skips.len() as u64,
        frames_purged: frames.iter().filter(|f| f.purged).count() as u64,
        frames_bn_dropped: frames
            .iter()
            .filter(|f| f.columns.get("bn_dropped") == Some(&crate::columns::Value::Bool(true)))
            .count() as u64,
        keyframes: frames.iter().filter(|f| f.is_keyframe).count() as u64,
        retransmissions: recorder.retransmissions,
        padding_bytes: recorder.padding_bytes,
        mean_capacity_bps: mean_capacity,
        mean_target_rate_bps: mean_target,
        rtt_ms_mean: if rtts.is_empty() {
            None
        } else {
            Some(rtts.iter().sum::<f64>() / rtts.len() as f64)
        },
        pacer_delay_ms_p95: percentile(&pacer, 95.0),
        queue_delay_ms_p95: percentile(&queue, 95.0),
        flows: None,
        jain_index: None,
        path_faults: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn displayed_frame(id: u64, capture_ms: i64, display_ms: Option<i64>) -> FrameRecord {
        FrameRecord {
            frame_id: id,
            source_index: id,
            capture_us: capture_ms * 1000,
            displayed_us: display_ms.map(|d| d * 1000),
            latency_us: display_ms.map(|d| (d - capture_ms) * 1000),
            ..Default::default()
        }
    }

    /// libwebrtc's rule on a 30 fps stream: one 200 ms gap is a freeze (3 x 33 ms and
    /// 33 + 150 ms are both below it), a 150 ms gap is not (below 33 + 150), nor is any gap
    /// in the first five intervals.
    #[test]
    fn freezes_follow_webrtcs_rule() {
        let mut t = vec![0_i64];
        let mut push = |gap_ms: i64| t.push(t.last().unwrap() + gap_ms * 1000);
        push(400); // too early to count
        for _ in 0..40 {
            push(33);
        }
        push(150); // average ~36 ms: 36 + 150 > 150, no freeze
        for _ in 0..10 {
            push(33);
        }
        push(200); // a freeze
        for _ in 0..10 {
            push(33);
        }
        assert_eq!(freezes(&t), (1, 0.2));
        assert_eq!(freezes(&[]), (0, 0.0));
        assert_eq!(freezes(&[5]), (0, 0.0));
    }

    /// The summary of `frames` alone (no skips, samples or link), captured and run until
    /// `end_ms`.
    fn summarize_frames(frames: &[FrameRecord], end_ms: i64) -> Summary {
        let end = Timestamp::from_ms(end_ms);
        summarize(frames, &[], &[], LinkTotals::default(), &Recorder::default(), end, end)
    }

    #[test]
    fn the_record_schema_is_what_the_records_serialise_to() {
        fn keys<T: Serialize>(record: &T) -> Vec<String> {
            let v = serde_json::to_value(record).unwrap();
            v.as_object().unwrap().keys().cloned().collect()
        }
        fn sorted(names: &[&str]) -> Vec<String> {
            let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            v.sort();
            v
        }
        let skip = SkipRecord { source_index: 0, capture_us: 0, reason: "x".into() };
        // serde_json's map is ordered by key: compare as sets, and no name twice.
        assert_eq!(keys(&FrameRecord::default()), sorted(RECORD_SCHEMA.frame));
        assert_eq!(keys(&skip), sorted(RECORD_SCHEMA.skip));
        assert_eq!(keys(&Sample::default()), sorted(RECORD_SCHEMA.sample));
        // The order is the structs' (the files' column order): the first and last fields.
        assert_eq!(RECORD_SCHEMA.frame.first(), Some(&"frame_id"));
        assert_eq!(RECORD_SCHEMA.frame.last(), Some(&"purged"));
        assert_eq!(RECORD_SCHEMA.sample.last(), Some(&"lost_packets"));
    }

    #[test]
    fn stall_rate_and_stall_count() {
        // Frames every 100 ms displayed 50 ms after capture, except frame 3 (shown 350 ms
        // late) and frame 5 (never shown). Session ends at 1 s.
        let frames = vec![
            displayed_frame(0, 0, Some(50)),
            displayed_frame(1, 100, Some(150)),
            displayed_frame(2, 200, Some(250)),
            displayed_frame(3, 300, Some(650)),
            displayed_frame(4, 400, Some(660)),
            displayed_frame(5, 500, None),
            displayed_frame(6, 600, Some(700)),
            displayed_frame(7, 700, Some(750)),
        ];
        let s = summarize_frames(&frames, 1000);
        // Gaps over 100 ms: 250->650 (400 ms) and 750->1000 (250 ms): 650 ms of 1000. The
        // wait for the first frame (50 ms) is below the threshold.
        assert!((s.stall_rate - 0.65).abs() < 1e-12, "{}", s.stall_rate);
        // Latency > 200 ms: frame 3 (350), frame 4 (260), frame 5 (never shown).
        assert_eq!(s.stall_count_200ms, 3);
        assert_eq!(s.frames_displayed, 7);
        assert_eq!(s.latency_ms.max, 350.0);
        // MAE's stall ratio: 3 of 8 slots. The worst 10 % of the 7 displayed latencies is
        // ceil(0.7) = 1 frame: 350 ms.
        assert_eq!(s.stall_ratio_200ms, 3.0 / 8.0);
        assert_eq!(s.latency_ms.tail10_mean, 350.0);
        assert_eq!(s.adaptation_ratio, 0.0);
    }

    #[test]
    fn tail10_mean_and_adaptation_ratio() {
        // 20 frames, latencies 10..=200 ms; two of them marked adapted.
        let mut frames: Vec<FrameRecord> = (0..20)
            .map(|i| displayed_frame(i, 100 * i as i64, Some(100 * i as i64 + 10 * (i as i64 + 1))))
            .collect();
        for f in &mut frames[5..7] {
            f.columns.bool(ADAPTED_COLUMN, true);
        }
        frames[7].columns.bool(ADAPTED_COLUMN, false);
        let s = summarize_frames(&frames, 2000);
        // Worst 10 %: 190 and 200 ms.
        assert_eq!(s.latency_ms.tail10_mean, 195.0);
        assert_eq!(s.adaptation_ratio, 0.1);
    }

    #[test]
    fn nothing_displayed_is_all_stall() {
        let frames = vec![displayed_frame(0, 0, None), displayed_frame(1, 33, None)];
        let s = summarize_frames(&frames, 2000);
        assert_eq!(s.stall_rate, 1.0);
        assert_eq!(s.stall_count_200ms, 2);
        assert!(s.bwe_ratio.is_nan());
    }

    #[test]
    fn latency_over_all_slots_counts_undisplayed_ones_until_the_next_display() {
        // Slots every 100 ms: slot 0 shown at 50 ms; slot 1 skipped; slot 2 encoded as frame
        // 1 and shown at 260 ms; slot 3 encoded (frame 2), never shown; slot 4 skipped and
        // nothing later shown: it counts to the end of the run (1000 ms).
        let mut f1 = displayed_frame(1, 200, Some(260));
        f1.source_index = 2;
        let mut f2 = displayed_frame(2, 300, None);
        f2.source_index = 3;
        let frames = vec![displayed_frame(0, 0, Some(50)), f1, f2];
        let skips = vec![
            SkipRecord { source_index: 1, capture_us: 100_000, reason: "test".into() },
            SkipRecord { source_index: 4, capture_us: 400_000, reason: "test".into() },
        ];
        let s = summarize(
            &frames,
            &skips,
            &[],
            LinkTotals::default(),
            &Recorder::default(),
            Timestamp::from_ms(500),
            Timestamp::from_ms(1000),
        );
        // Slots: 50, 160 (until 260), 60, 700 (to the end), 600 (to the end).
        assert_eq!(s.latency_all_ms.mean, (50.0 + 160.0 + 60.0 + 700.0 + 600.0) / 5.0);
        assert_eq!(s.latency_all_ms.max, 700.0);
        // Displayed frames only: 50 and 60.
        assert_eq!(s.latency_ms.mean, 55.0);
        assert_eq!(s.frames_skipped, 2);
        // Not shown within 200 ms: slots 1, 3 and 4.
        assert_eq!(s.stall_count_200ms, 3);
    }

    #[test]
    fn video_bitrate_is_what_arrived_and_padding_has_its_ratio() {
        // Three frames of 10 kB over a 2 s session: two completed at the receiver, one never
        // arrived whole. Video bitrate = 2 x 10 kB x 8 / 2 s = 80 kbps.
        let mut frames: Vec<FrameRecord> = (0..3).map(|i| displayed_frame(i, 0, None)).collect();
        for f in &mut frames {
            f.size_bytes = 10_000;
        }
        frames[0].completed_us = Some(50_000);
        frames[2].completed_us = Some(2_100_000); // during the drain: it still counts
        let mut rec = Recorder::default();
        // On the wire: 31 500 B of video (with headers) and 8 500 B of padding.
        for (kind, size) in [(PacketKind::Video, 31_500), (PacketKind::Padding, 8_500)] {
            rec.on_sender_event(SenderEvent::PacketSent {
                kind,
                frame_id: 0,
                size: crate::units::DataSize::from_bytes(size),
                time: Timestamp::ZERO,
            });
        }
        let s = summarize(
            &frames,
            &[],
            &[],
            LinkTotals::default(),
            &rec,
            Timestamp::from_ms(2000),
            Timestamp::from_ms(4000),
        );
        assert_eq!(s.video_bitrate_bps, 80_000.0);
        assert_eq!(s.padding_bytes, 8_500);
        assert_eq!(s.padding_ratio, 8_500.0 / 40_000.0);
    }
}
