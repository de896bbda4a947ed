//! Per-frame records, time-series samples and the run summary.
//!
//! Definitions (also in the README):
//! * latency: display time minus capture time, over displayed frames;
//! * `stall_rate` (ACE §6.3): the share of the session in which the interval between
//!   displayed frames exceeds 100 ms (each such interval counts whole; the session's start and
//!   end count as display instants, so waiting for the first frame and the time after the
//!   last one count too, and a session that displays nothing has a stall rate of 1);
//! * `stall_count_200ms` (MAE §6.1): frames whose latency exceeds 200 ms, counting frames
//!   never displayed;
//! * `loss_rate`: media-path packets dropped by the downlink (queue overflow, random loss or
//!   a bottleneck policy) over packets that reached it;
//! * `utilization`: bytes the downlink delivered over the bytes its trace could deliver during
//!   the session;
//! * `bwe_ratio`: mean target rate over mean link capacity, both time-averaged over the
//!   samples.

use crate::columns::Columns;
use crate::packet::PacketKind;
use crate::receiver::ReceiverEvent;
use crate::sender::SenderEvent;
use crate::units::{TimeDelta, Timestamp};
use serde::Serialize;
use std::collections::BTreeMap;

/// One encoded frame's life. Times are microseconds from the session start; `None` when the
/// event did not happen.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FrameRecord {
    pub frame_id: u64,
    pub capture_us: i64,
    pub encode_start_us: i64,
    pub encode_end_us: i64,
    pub size_bytes: i64,
    pub is_keyframe: bool,
    pub qp: f64,
    pub target_rate_bps: i64,
    pub packets: u16,
    pub first_packet_sent_us: Option<i64>,
    pub last_packet_sent_us: Option<i64>,
    pub completed_us: Option<i64>,
    pub displayed_us: Option<i64>,
    pub latency_us: Option<i64>,
    /// Skipped by the receiver because a later keyframe was displayed first.
    pub discarded: bool,
    /// Complexity level chosen by the encoder controller (ACE-C); `None`: the preset's.
    pub complexity: Option<crate::encoder::Complexity>,
    /// The controller's predicted size relative to the average frame (ACE-C's rho-hat).
    pub predicted_relative_size: Option<f64>,
}

/// One time-series sample, taken every sample interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Sample {
    pub t_us: i64,
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
    pub queue_bytes: i64,
    pub queue_packets: u64,
    /// Sojourn time of the last packet to leave the bottleneck queue.
    pub queue_delay_us: i64,
    pub pacer_queue_bytes: i64,
    pub pacer_delay_us: i64,
    pub rtt_us: Option<i64>,
    /// Downlink drops so far (cumulative).
    pub lost_packets: u64,
    /// The congestion controller's and the pacer's named state (`cc_*`, `pacer_*`; see
    /// [`crate::columns`]), flattened into the record.
    #[serde(flatten)]
    pub columns: Columns,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// The run summary (JSON keys are part of the result format).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub duration_s: f64,
    pub latency_ms: LatencySummary,
    pub stall_rate: f64,
    pub stall_count_200ms: u64,
    pub fps: f64,
    pub loss_rate: f64,
    pub video_bitrate_bps: f64,
    pub utilization: f64,
    pub bwe_ratio: f64,
    pub frames_sent: u64,
    pub frames_displayed: u64,
    pub frames_discarded: u64,
    pub keyframes: u64,
    pub retransmissions: u64,
    pub padding_bytes: i64,
    pub mean_capacity_bps: f64,
    pub mean_target_rate_bps: f64,
    pub rtt_ms_mean: Option<f64>,
    pub pacer_delay_ms_p95: f64,
    pub queue_delay_ms_p95: f64,
}

/// Collects sender and receiver events into per-frame records.
#[derive(Debug, Default)]
pub struct Recorder {
    frames: BTreeMap<u64, FrameRecord>,
    pub retransmissions: u64,
    pub padding_bytes: i64,
    pub sent_bytes_total: i64,
}

impl Recorder {
    pub fn on_sender_event(&mut self, e: SenderEvent) {
        match e {
            SenderEvent::FrameEncoded {
                frame_id,
                capture_time,
                encode_start,
                encode_end,
                size,
                is_keyframe,
                qp,
                target_rate,
                packet_count,
                complexity,
                predicted_relative_size,
            } => {
                self.frames.insert(
                    frame_id,
                    FrameRecord {
                        frame_id,
                        capture_us: capture_time.as_us(),
                        encode_start_us: encode_start.as_us(),
                        encode_end_us: encode_end.as_us(),
                        size_bytes: size.as_bytes(),
                        is_keyframe,
                        qp: (qp * 1000.0).round() / 1000.0,
                        target_rate_bps: target_rate.as_bps(),
                        packets: packet_count,
                        complexity,
                        predicted_relative_size: predicted_relative_size
                            .map(|r| (r * 1000.0).round() / 1000.0),
                        ..Default::default()
                    },
                );
            }
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
            ReceiverEvent::KeyframeRequested { .. } => {}
        }
    }

    pub fn frames(&self) -> Vec<FrameRecord> {
        self.frames.values().cloned().collect()
    }
}

/// Linear-interpolation percentile (numpy's default) of sorted values.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q / 100.0 * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Link-level totals the summary needs.
#[derive(Clone, Copy, Debug, Default)]
pub struct LinkTotals {
    pub arrived_packets: u64,
    pub dropped_packets: u64,
    pub delivered_bytes: i64,
    /// Bytes the trace could deliver over the session.
    pub capacity_bytes: i64,
}

/// Stall threshold of ACE §6.3.
pub const STALL_INTERVAL: TimeDelta = TimeDelta::from_ms(100);
/// Latency threshold of MAE §6.1.
pub const STALL_LATENCY: TimeDelta = TimeDelta::from_ms(200);

pub fn summarize(
    frames: &[FrameRecord],
    samples: &[Sample],
    link: LinkTotals,
    recorder: &Recorder,
    session_end: Timestamp,
) -> Summary {
    let duration_s = session_end.as_secs_f64();
    let mut lat: Vec<f64> =
        frames.iter().filter_map(|f| f.latency_us).map(|us| us as f64 / 1e3).collect();
    lat.sort_by(|a, b| a.total_cmp(b));
    let mean = if lat.is_empty() { f64::NAN } else { lat.iter().sum::<f64>() / lat.len() as f64 };
    let latency_ms = LatencySummary {
        mean,
        p50: percentile(&lat, 50.0),
        p95: percentile(&lat, 95.0),
        p99: percentile(&lat, 99.0),
        p999: percentile(&lat, 99.9),
        max: lat.last().copied().unwrap_or(f64::NAN),
    };

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
        frames.iter().filter(|f| f.latency_us.is_none_or(|l| l > STALL_LATENCY.as_us())).count()
            as u64;

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
    Summary {
        duration_s,
        latency_ms,
        stall_rate,
        stall_count_200ms,
        fps: if duration_s > 0.0 { displayed as f64 / duration_s } else { 0.0 },
        loss_rate: if link.arrived_packets > 0 {
            link.dropped_packets as f64 / link.arrived_packets as f64
        } else {
            0.0
        },
        video_bitrate_bps: frames.iter().map(|f| f.size_bytes as f64 * 8.0).sum::<f64>()
            / duration_s.max(1e-9),
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn displayed_frame(id: u64, capture_ms: i64, display_ms: Option<i64>) -> FrameRecord {
        FrameRecord {
            frame_id: id,
            capture_us: capture_ms * 1000,
            displayed_us: display_ms.map(|d| d * 1000),
            latency_us: display_ms.map(|d| (d - capture_ms) * 1000),
            ..Default::default()
        }
    }

    #[test]
    fn percentile_matches_numpy_linear() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 50.0), 2.5);
        assert!((percentile(&v, 95.0) - 3.85).abs() < 1e-12);
        assert_eq!(percentile(&v, 100.0), 4.0);
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
        let s = summarize(
            &frames,
            &[],
            LinkTotals::default(),
            &Recorder::default(),
            Timestamp::from_ms(1000),
        );
        // Gaps over 100 ms: 250->650 (400 ms) and 750->1000 (250 ms): 650 ms of 1000. The
        // wait for the first frame (50 ms) is below the threshold.
        assert!((s.stall_rate - 0.65).abs() < 1e-12, "{}", s.stall_rate);
        // Latency > 200 ms: frame 3 (350), frame 4 (260), frame 5 (never shown).
        assert_eq!(s.stall_count_200ms, 3);
        assert_eq!(s.frames_displayed, 7);
        assert_eq!(s.latency_ms.max, 350.0);
    }

    #[test]
    fn nothing_displayed_is_all_stall() {
        let frames = vec![displayed_frame(0, 0, None), displayed_frame(1, 33, None)];
        let s = summarize(
            &frames,
            &[],
            LinkTotals::default(),
            &Recorder::default(),
            Timestamp::from_ms(2000),
        );
        assert_eq!(s.stall_rate, 1.0);
        assert_eq!(s.stall_count_200ms, 2);
        assert!(s.bwe_ratio.is_nan());
    }
}
