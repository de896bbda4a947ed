//! A live process's part of a session's results (`sluice live send`, `recv`, `relay`), and
//! `live merge`: the parts shifted onto the sender's clock and merged through the same code
//! as `live run` ([`crate::merge`]).
//!
//! Each part carries its clock origin as wall-clock Unix time in microseconds (read together
//! with the monotonic origin of its timestamps). Merging shifts the receiver's and the
//! relay's timestamps by their origin minus the sender's, so the result's times are the
//! sender's, as in `live run`. On one host the wall clocks agree; across hosts they must be
//! synchronised (NTP, PTP) and the residual offset is part of the measured latency.
//!
//! The records are the core's own ([`SenderEvent`], [`Sample`], [`Columns`]), which
//! serialise and deserialise as they are: their names are owned when read back.

use crate::endpoint::{Endpoint, ReceiverEndpoint, RelayEndpoint, SenderEndpoint};
use crate::runtime::IoStats;
use crate::session::{LiveResult, LiveStats};
use crate::webrtc::{Transport, WebRtcStats};
use serde::{Deserialize, Serialize};
use sluice_core::columns::Columns;
use sluice_core::link::faults::FaultStats;
use sluice_core::metrics::{LinkTotals, Sample};
use sluice_core::receiver::ReceiverEvent;
use sluice_core::sender::SenderEvent;
use sluice_core::session::RunConfig;
use sluice_core::units::{DataSize, TimeDelta, Timestamp};

/// The version of the part format (`events.json`): 2 since the records are the core's
/// (samples with their columns flattened; 1 had `[name, value]` lists).
pub const PART_SCHEMA: u32 = 2;

/// The relay's downlink at one time (its clock): what `live run`'s sender reads from the
/// relay's shared [`crate::endpoint::LinkSnapshot`] for each sample.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkSampleRecord {
    pub t_us: i64,
    pub queue_bytes: i64,
    pub queue_packets: u64,
    pub queue_delay_us: i64,
    pub delivered_bytes: i64,
    pub dropped_packets: u64,
    /// The trace's capacity over the last 20 ms.
    pub link_capacity_bps: i64,
    /// The bytes the trace could deliver from the relay's start to `t_us`.
    pub capacity_bytes: i64,
    #[serde(flatten)]
    pub columns: Columns,
}

/// What every part has.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PartInfo {
    pub schema: u32,
    /// "sender", "relay" or "receiver".
    pub role: String,
    /// The clock origin of the part's timestamps, as wall-clock Unix time in microseconds.
    pub wall_origin_us: i64,
    /// Whether the clock started (the sender's at once; the relay's and the receiver's at
    /// the first datagram from their peer).
    pub started: bool,
    /// Why the process ended: "end" (the session's duration and drain), "idle" (no
    /// datagram for the idle timeout), "stopped" (Ctrl-C or SIGTERM).
    pub ended: String,
    pub wall_s: f64,
    pub io: IoStats,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SenderPart {
    #[serde(flatten)]
    pub info: PartInfo,
    pub malformed: u64,
    pub feedback_messages: u64,
    /// Feedback a real receiver would not send, ignored (issue 30).
    #[serde(default)]
    pub spoofed: crate::endpoint::Spoofed,
    pub unsendable: u64,
    pub transmitted: u64,
    /// The stream it sent (its SSRCs; docs/live-wire.md): merge checks that the receiver
    /// and the relay read this one.
    #[serde(default)]
    pub stream: u32,
    pub events: Vec<SenderEvent>,
    pub samples: Vec<Sample>,
    /// With the WebRTC transport, what its layer counted (`None`: plain RTP).
    #[serde(default)]
    pub webrtc: Option<WebRtcStats>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReceiverPart {
    #[serde(flatten)]
    pub info: PartInfo,
    pub malformed: u64,
    pub media_packets: u64,
    pub stream_bytes: u64,
    pub stream_gaps: u64,
    /// The sender's stream it read last (`None`: none).
    #[serde(default)]
    pub last_stream: Option<u32>,
    /// New streams seen (the sender restarted) and packets of an old stream refused.
    #[serde(default)]
    pub new_streams: u64,
    #[serde(default)]
    pub stale_packets: u64,
    /// Packets of another stream that were not valid as a whole (issue 30).
    #[serde(default)]
    pub spoofed: crate::endpoint::Spoofed,
    pub events: Vec<ReceiverEvent>,
    /// With the WebRTC transport, what its layer counted (`None`: plain RTP).
    #[serde(default)]
    pub webrtc: Option<WebRtcStats>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RelayPart {
    #[serde(flatten)]
    pub info: PartInfo,
    pub malformed: u64,
    pub opaque: u64,
    /// What the path faults did (`duplicated`, `reordered`, `blackout_dropped`).
    #[serde(flatten)]
    pub faults: FaultStats,
    pub garbage_sent: u64,
    /// Spoofed datagrams it sent (the spoof fault).
    #[serde(default)]
    pub spoof_sent: u64,
    /// Packets of another stream that were not valid as a whole (issue 30).
    #[serde(default)]
    pub spoofed: crate::endpoint::Spoofed,
    /// The sender's stream it read last (`None`: none).
    #[serde(default)]
    pub last_stream: Option<u32>,
    pub reports_sent: u64,
    pub arrived_packets: u64,
    pub dropped_packets: u64,
    pub policy_dropped_packets: u64,
    pub delivered_bytes: i64,
    pub policy_dropped_frames: Vec<u64>,
    pub link_samples: Vec<LinkSampleRecord>,
    /// Every datagram's way through the relay, if the relay was asked to log them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub datagrams: Vec<crate::endpoint::DatagramRecord>,
    /// With competing flows: every flow at the bottleneck (the summary's `flows`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<Vec<sluice_core::metrics::FlowSummary>>,
    /// With competing flows: Jain's index (`None`: no interval with every flow active).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jain_index: Option<f64>,
}

/// One process's part.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Part {
    Sender(SenderPart),
    Relay(RelayPart),
    Receiver(ReceiverPart),
}

impl Part {
    pub fn info(&self) -> &PartInfo {
        match self {
            Part::Sender(p) => &p.info,
            Part::Relay(p) => &p.info,
            Part::Receiver(p) => &p.info,
        }
    }

    /// Writes the part as JSON to `path` (through a buffer; parts of long sessions are large).
    pub fn write(&self, path: &std::path::Path) -> Result<(), String> {
        let f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut w = std::io::BufWriter::new(f);
        serde_json::to_writer(&mut w, self).map_err(|e| format!("{}: {e}", path.display()))?;
        std::io::Write::flush(&mut w).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The part without its records (events, samples): what a part's header shows.
    pub fn counters_json(&self) -> serde_json::Result<String> {
        let mut v = serde_json::to_value(self)?;
        if let Some(m) = v.as_object_mut() {
            for k in ["events", "samples", "link_samples", "policy_dropped_frames", "datagrams"] {
                m.remove(k);
            }
        }
        serde_json::to_string(&v)
    }
}

fn read<T: for<'de> Deserialize<'de>>(path: &std::path::Path, role: &str) -> Result<T, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let part: T = serde_json::from_reader(std::io::BufReader::new(f))
        .map_err(|e| format!("{}: not a live {role} part ({e})", path.display()))?;
    Ok(part)
}

fn check(info: &PartInfo, role: &str, path: &std::path::Path) -> Result<(), String> {
    if info.schema != PART_SCHEMA {
        return Err(format!(
            "{}: part format {} (this sluice reads {PART_SCHEMA})",
            path.display(),
            info.schema
        ));
    }
    if info.role != role {
        return Err(format!("{}: a {} part, not a {role} part", path.display(), info.role));
    }
    Ok(())
}

pub fn read_sender(path: &std::path::Path) -> Result<SenderPart, String> {
    let p: SenderPart = read(path, "sender")?;
    check(&p.info, "sender", path)?;
    Ok(p)
}
pub fn read_relay(path: &std::path::Path) -> Result<RelayPart, String> {
    let p: RelayPart = read(path, "relay")?;
    check(&p.info, "relay", path)?;
    Ok(p)
}
pub fn read_receiver(path: &std::path::Path) -> Result<ReceiverPart, String> {
    let p: ReceiverPart = read(path, "receiver")?;
    check(&p.info, "receiver", path)?;
    Ok(p)
}

fn shift_receiver_event(e: &ReceiverEvent, d: TimeDelta) -> ReceiverEvent {
    match *e {
        ReceiverEvent::FrameCompleted { frame_id, time } => {
            ReceiverEvent::FrameCompleted { frame_id, time: time + d }
        }
        ReceiverEvent::FrameDisplayed { frame_id, time } => {
            ReceiverEvent::FrameDisplayed { frame_id, time: time + d }
        }
        ReceiverEvent::FrameDiscarded { frame_id, time } => {
            ReceiverEvent::FrameDiscarded { frame_id, time: time + d }
        }
        ReceiverEvent::KeyframeRequested { time } => {
            ReceiverEvent::KeyframeRequested { time: time + d }
        }
    }
}

/// Fills the link fields of the sender's samples from the relay's link samples (already on
/// the sender's clock): each sample takes the relay's latest link sample at or before it,
/// as `live run`'s sender takes the relay's latest snapshot; the delivered rate is the
/// difference of delivered bytes between samples over the interval, as there.
pub fn join_link_samples(samples: &mut [Sample], link: &[LinkSampleRecord], interval: TimeDelta) {
    let mut i = 0;
    let mut last_delivered = 0;
    for s in samples.iter_mut() {
        while i < link.len() && link[i].t_us <= s.t_us {
            i += 1;
        }
        let l = if i == 0 { LinkSampleRecord::default() } else { link[i - 1].clone() };
        s.columns.set_all(&l.columns);
        s.link_capacity_bps = l.link_capacity_bps;
        s.delivered_rate_bps =
            (DataSize::from_bytes(l.delivered_bytes - last_delivered) / interval).as_bps();
        s.queue_bytes = l.queue_bytes;
        s.queue_packets = l.queue_packets;
        s.queue_delay_us = l.queue_delay_us;
        s.lost_packets = l.dropped_packets;
        last_delivered = l.delivered_bytes;
    }
}

impl SenderPart {
    /// The part of a sender endpoint that has ended: its counters, events and samples
    /// (`webrtc`: its WebRTC layer's counters, if any).
    pub fn of(ep: SenderEndpoint, info: PartInfo, webrtc: Option<WebRtcStats>) -> SenderPart {
        SenderPart {
            info,
            malformed: Endpoint::malformed(&ep),
            feedback_messages: ep.feedback_messages,
            spoofed: ep.spoofed,
            unsendable: ep.unsendable,
            transmitted: ep.transmitted,
            stream: ep.stream(),
            events: ep.events,
            samples: ep.samples,
            webrtc,
        }
    }
}

impl ReceiverPart {
    /// The part of a receiver endpoint that has ended (its reassembled stream is the
    /// caller's to write).
    pub fn of(ep: ReceiverEndpoint, info: PartInfo, webrtc: Option<WebRtcStats>) -> ReceiverPart {
        ReceiverPart {
            info,
            malformed: Endpoint::malformed(&ep),
            media_packets: ep.media_packets,
            stream_bytes: ep.stream.len() as u64,
            stream_gaps: ep.stream_gaps,
            last_stream: ep.stream(),
            new_streams: ep.new_streams,
            stale_packets: ep.stale_packets,
            spoofed: ep.spoofed,
            events: ep.events,
            webrtc,
        }
    }
}

impl RelayPart {
    /// The part of a relay that has ended, with the link samples it recorded.
    pub fn of(r: &RelayEndpoint, info: PartInfo, link_samples: Vec<LinkSampleRecord>) -> Self {
        let stats = r.media_stats();
        let flows = r.flow_summaries();
        RelayPart {
            info,
            malformed: r.malformed(),
            opaque: r.opaque,
            faults: r.fault_stats(),
            garbage_sent: r.garbage_sent,
            spoof_sent: r.spoof_sent,
            spoofed: r.spoofed,
            last_stream: r.stream(),
            reports_sent: r.reports_sent,
            arrived_packets: stats.arrived_packets,
            dropped_packets: stats.dropped_packets(),
            policy_dropped_packets: stats.dropped_policy_packets,
            delivered_bytes: stats.delivered_bytes,
            policy_dropped_frames: r.policy_dropped_frames.clone(),
            link_samples,
            datagrams: r.datagram_log(),
            flows: flows.as_ref().map(|(f, _)| f.clone()),
            jain_index: flows.and_then(|(_, j)| j),
        }
    }
}

/// Whether any process of the session was stopped (Ctrl-C, SIGTERM) before its end.
fn stopped_early(sender: &SenderPart, relay: Option<&RelayPart>, receiver: &ReceiverPart) -> bool {
    let stopped = |i: &PartInfo| i.ended == "stopped";
    stopped(&sender.info) || stopped(&receiver.info) || relay.is_some_and(|r| stopped(&r.info))
}

/// A session's live counters from its parts, for `live run` and `live merge` alike
/// (`reports`: the bottleneck reports that reached the sender). Restarts within a process
/// are `live run`'s to add.
pub fn live_stats(
    sender: &SenderPart,
    relay: Option<&RelayPart>,
    receiver: &ReceiverPart,
    reports: u64,
) -> LiveStats {
    let empty = RelayPart::default();
    let r = relay.unwrap_or(&empty);
    LiveStats {
        sender_io: sender.info.io.clone(),
        relay_io: r.info.io.clone(),
        receiver_io: receiver.info.io.clone(),
        sender_malformed: sender.malformed,
        receiver_malformed: receiver.malformed,
        relay_opaque: r.opaque,
        relay_duplicated: r.faults.duplicated,
        relay_reordered: r.faults.reordered,
        relay_blackout_dropped: r.faults.blackout_dropped,
        relay_garbage_sent: r.garbage_sent,
        relay_spoof_sent: r.spoof_sent,
        relay_reports_sent: r.reports_sent,
        sender_reports_received: reports,
        receiver_restarts: 0,
        sender_restarts: 0,
        receiver_new_streams: receiver.new_streams,
        receiver_stale_packets: receiver.stale_packets,
        spoofed: sender.spoofed.plus(r.spoofed).plus(receiver.spoofed),
        received_stream_bytes: receiver.stream_bytes,
        received_stream_gaps: receiver.stream_gaps,
        feedback_messages: sender.feedback_messages,
        sender_unsendable: sender.unsendable,
        media_packets_received: receiver.media_packets,
        transport: if sender.webrtc.is_some() { Transport::Webrtc } else { Transport::Rtp },
        sender_webrtc: sender.webrtc.clone(),
        receiver_webrtc: receiver.webrtc.clone(),
        srtp_auth_failed: [&sender.webrtc, &receiver.webrtc]
            .iter()
            .filter_map(|w| w.as_ref().map(|w| w.srtp_auth_failed))
            .sum(),
        stopped_early: stopped_early(sender, relay, receiver),
        wall_s: sender.info.wall_s,
    }
}

/// Merges the parts of one session (checked to belong together by the caller) onto the
/// sender's clock, through the same code as `live run` ([`crate::merge::merge`]).
pub fn merge_parts(
    cfg: &RunConfig,
    sender: &SenderPart,
    relay: Option<&RelayPart>,
    receiver: &ReceiverPart,
) -> Result<LiveResult, String> {
    let scheme = cfg.resolve_scheme().map_err(|e| e.to_string())?;
    let origin = sender.info.wall_origin_us;
    let receiver_shift = TimeDelta::from_us(receiver.info.wall_origin_us - origin);
    let sender_events = &sender.events;
    let receiver_events: Vec<ReceiverEvent> =
        receiver.events.iter().map(|e| shift_receiver_event(e, receiver_shift)).collect();
    let mut samples: Vec<Sample> = sender.samples.clone();
    let link_samples: Vec<LinkSampleRecord> = match relay {
        Some(r) => {
            let d = r.info.wall_origin_us - origin;
            r.link_samples
                .iter()
                .map(|l| LinkSampleRecord { t_us: l.t_us + d, ..l.clone() })
                .collect()
        }
        None => Vec::new(),
    };
    if relay.is_some() {
        join_link_samples(
            &mut samples,
            &link_samples,
            TimeDelta::from_ms_f64(cfg.sample_interval_ms),
        );
    }
    let capacity_until = |t: Timestamp| {
        link_samples
            .iter()
            .take_while(|l| l.t_us <= t.as_us())
            .last()
            .map_or(0, |l| l.capacity_bytes)
    };
    // Delivered bytes up to the last sample, as the simulator counts them for utilisation
    // (the relay's link sample the last sender sample took).
    let sampled_until = samples.last().map_or(0, |s| s.t_us);
    let delivered_sampled = link_samples
        .iter()
        .take_while(|l| l.t_us <= sampled_until)
        .last()
        .map_or(0, |l| l.delivered_bytes);
    let empty = RelayPart::default();
    let r = relay.unwrap_or(&empty);
    let capture_end = Timestamp::ZERO + TimeDelta::from_secs_f64(cfg.duration_s);
    let (run, reports) = crate::merge::merge(crate::merge::MergeInput {
        sender_events,
        policy_dropped_frames: &r.policy_dropped_frames,
        receiver_events: &receiver_events,
        samples,
        link: LinkTotals {
            arrived_packets: r.arrived_packets,
            dropped_packets: r.dropped_packets,
            policy_dropped_packets: r.policy_dropped_packets,
            delivered_bytes: delivered_sampled,
            capacity_bytes: 0,
        },
        capacity_until: &capacity_until,
        capture_end,
        end: capture_end + TimeDelta::from_secs_f64(cfg.drain_s),
        stopped: stopped_early(sender, relay, receiver),
        bottleneck_drops: relay.is_some() && scheme.bottleneck.drops_frames(),
        // The relay's path faults (the merged config has the relay's `faults`).
        path_faults: relay.filter(|_| !cfg.faults.is_none()).map(|r| r.faults),
        flows: r.flows.clone().map(|f| (f, r.jain_index)),
    });
    let stats = live_stats(sender, relay, receiver, reports);
    Ok(LiveResult { run, stats })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::columns::Value;
    use sluice_core::packet::PacketKind;
    use sluice_core::units::DataRate;

    #[test]
    fn sender_events_and_samples_survive_a_part() {
        let mut columns = Columns::default();
        columns.int("enc_level", Some(3));
        columns.float("complexity", Some(2.0));
        columns.float("nan", Some(f64::NAN));
        columns.text("state", Some("normal"));
        columns.bool("adapted", true);
        let events = vec![
            SenderEvent::FrameEncoded {
                frame_id: 7,
                source_index: 7,
                capture_time: Timestamp::from_ms(233),
                encode_start: Timestamp::from_ms(234),
                encode_end: Timestamp::from_ms(240),
                size: DataSize::from_bytes(12_345),
                is_keyframe: false,
                qp: 31.5,
                target_rate: DataRate::from_kbps(2_500),
                packet_count: 11,
                reference: Some(6),
                columns: columns.clone(),
            },
            SenderEvent::FrameSkipped {
                source_index: 8,
                capture_time: Timestamp::from_ms(266),
                reason: "pause".into(),
            },
            SenderEvent::PacketSent {
                kind: PacketKind::Retransmission,
                frame_id: 7,
                size: DataSize::from_bytes(1_200),
                time: Timestamp::from_us(250_001),
            },
        ];
        let sample = Sample { t_us: 20_000, rtt_us: Some(41_000), columns, ..Sample::default() };
        let part = SenderPart {
            events: events.clone(),
            samples: vec![sample.clone()],
            ..SenderPart::default()
        };
        let back: SenderPart =
            serde_json::from_str(&serde_json::to_string(&part).unwrap()).unwrap();
        let got = back.events.clone();
        // NaN comes back as null (JSON has no NaN; the result files write it as null too).
        let fix = |c: &Columns| {
            let mut c = c.clone();
            c.set("nan", Value::Null);
            c
        };
        let mut want = events.clone();
        if let SenderEvent::FrameEncoded { columns, .. } = &mut want[0] {
            *columns = fix(columns);
        }
        assert_eq!(got, want);
        assert_eq!(back.samples[0], Sample { columns: fix(&sample.columns), ..sample });
    }

    #[test]
    fn link_samples_fill_the_senders_samples_by_time() {
        let mut samples: Vec<Sample> =
            (1..=3).map(|i| Sample { t_us: i * 20_000, ..Sample::default() }).collect();
        let link: Vec<LinkSampleRecord> =
            [(5_000, 100, 1_000), (19_000, 200, 26_000), (45_000, 300, 51_000)]
                .iter()
                .map(|&(t_us, queue_bytes, delivered_bytes)| LinkSampleRecord {
                    t_us,
                    queue_bytes,
                    delivered_bytes,
                    columns: {
                        let mut c = Columns::default();
                        c.int("bn_x", Some(queue_bytes));
                        c
                    },
                    ..LinkSampleRecord::default()
                })
                .collect();
        join_link_samples(&mut samples, &link, TimeDelta::from_ms(20));
        let q: Vec<i64> = samples.iter().map(|s| s.queue_bytes).collect();
        assert_eq!(q, vec![200, 200, 300]);
        let rate: Vec<i64> = samples.iter().map(|s| s.delivered_rate_bps).collect();
        // 26 000 B in the first 20 ms, none in the next, 25 000 B in the third.
        assert_eq!(rate, vec![10_400_000, 0, 10_000_000]);
        assert_eq!(samples[2].columns.get("bn_x"), Some(&Value::Int(300)));
    }
}
