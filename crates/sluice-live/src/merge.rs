//! Merging a live session's events into the simulator's result: one code path for `live run`
//! (three threads, one clock) and `live merge` (three processes' parts, shifted onto the
//! sender's clock first, [`crate::part`]). The sender's events, the frames the relay's
//! bottleneck dropped on purpose and the receiver's events go through the simulator's
//! [`Recorder`]; the summary is the simulator's [`metrics::summarize`].

use sluice_core::metrics::{self, LinkTotals, Recorder, Sample};
use sluice_core::receiver::ReceiverEvent;
use sluice_core::sender::SenderEvent;
use sluice_core::sim::RunResult;
use sluice_core::units::Timestamp;

/// What a live session recorded, on one clock (the sender's).
pub struct MergeInput<'a> {
    pub sender_events: &'a [SenderEvent],
    /// Frames the relay's bottleneck dropped on purpose (schemes whose bottleneck does).
    pub policy_dropped_frames: &'a [u64],
    pub receiver_events: &'a [ReceiverEvent],
    /// The sender's samples, with the relay's link state in them.
    pub samples: Vec<Sample>,
    /// The downlink's totals at the end (`capacity_bytes` is filled in by [`merge`]).
    pub link: LinkTotals,
    /// The bytes the downlink's trace could deliver from the start to this time.
    pub capacity_until: &'a dyn Fn(Timestamp) -> i64,
    pub capture_end: Timestamp,
    pub end: Timestamp,
    /// The session was stopped before its end (Ctrl-C, SIGTERM): the run ends at its last
    /// sample, so a slot never shown counts until then, not until the planned end.
    pub stopped: bool,
    pub bottleneck_drops: bool,
    /// What the path faults did (the summary's `path_faults`), if the run had any.
    pub path_faults: Option<sluice_core::link::faults::FaultStats>,
    /// With competing flows: every flow's summary and Jain's index (the relay's).
    pub flows: Option<(Vec<metrics::FlowSummary>, Option<f64>)>,
}

/// The end of a stopped session for the all-slot latency: its last sample, or its last
/// capture if that came later (a slot counts from its capture), at most the planned `end`.
/// `sluice.metrics.slot_latencies_ms` takes the same end.
fn stopped_end(
    end: Timestamp,
    sampled_until: Timestamp,
    frames: &[metrics::FrameRecord],
    skips: &[metrics::SkipRecord],
) -> Timestamp {
    let last_capture = frames
        .iter()
        .map(|f| f.capture_us)
        .chain(skips.iter().map(|s| s.capture_us))
        .max()
        .map_or(Timestamp::ZERO, Timestamp::from_us);
    end.min(sampled_until.max(last_capture))
}

/// The simulator's result of a live session, and the bottleneck reports that reached the
/// sender.
pub fn merge(input: MergeInput<'_>) -> (RunResult, u64) {
    let mut recorder = if input.bottleneck_drops {
        Recorder::with_bottleneck_drops()
    } else {
        Recorder::default()
    };
    for e in input.sender_events {
        recorder.on_sender_event(e.clone());
    }
    for &f in input.policy_dropped_frames {
        recorder.on_bottleneck_drop(f);
    }
    for e in input.receiver_events {
        recorder.on_receiver_event(e.clone());
    }
    let frames = recorder.frames();
    let skips = recorder.skips();
    let samples = input.samples;
    let sampled_until = samples.last().map_or(Timestamp::ZERO, |s| Timestamp::from_us(s.t_us));
    let totals = LinkTotals { capacity_bytes: (input.capacity_until)(sampled_until), ..input.link };
    let end = if input.stopped {
        stopped_end(input.end, sampled_until, &frames, &skips)
    } else {
        input.end
    };
    let mut summary =
        metrics::summarize(&frames, &skips, &samples, totals, &recorder, input.capture_end, end);
    summary.path_faults = input.path_faults;
    if let Some((flows, jain)) = input.flows {
        // As the simulator's summary: an index that cannot be computed is NaN (null).
        summary.flows = Some(flows);
        summary.jain_index = Some(jain.unwrap_or(f64::NAN));
    }
    let reports = recorder.bottleneck_reports;
    let run = RunResult {
        frames,
        skips,
        samples,
        summary,
        keyframe_requests: recorder.keyframe_requests,
    };
    (run, reports)
}
