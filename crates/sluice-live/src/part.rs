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
//! The sender's events and samples carry the core's interned names (`&'static str` column
//! names and skip reasons); in a part they are owned strings ([`SenderEventRecord`],
//! [`SampleRecord`]), interned again when read ([`intern`]).

use crate::runtime::IoStats;
use crate::session::{LiveResult, LiveStats};
use serde::{Deserialize, Serialize};
use sluice_core::columns::{Columns, Value};
use sluice_core::metrics::{LinkTotals, Sample};
use sluice_core::packet::{BottleneckReport, PacketKind};
use sluice_core::receiver::ReceiverEvent;
use sluice_core::sender::SenderEvent;
use sluice_core::sim::RunConfig;
use sluice_core::units::{DataRate, DataSize, TimeDelta, Timestamp};
use std::collections::BTreeSet;
use std::sync::Mutex;

/// The version of the part format (`events.json`).
pub const PART_SCHEMA: u32 = 1;

static INTERNED: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());

/// `s` as a `&'static str`: each distinct string is allocated once for the life of the
/// process (column names and skip reasons: a few dozen).
pub fn intern(s: &str) -> &'static str {
    let mut set = INTERNED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&k) = set.get(s) {
        return k;
    }
    let k: &'static str = Box::leak(s.to_owned().into_boxed_str());
    set.insert(k);
    k
}

/// A column value in a part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ValueRecord {
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(String),
    Null,
}

/// [`Columns`] in a part: `[name, value]` pairs in their order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ColumnsRecord(Vec<(String, ValueRecord)>);

impl From<&Columns> for ColumnsRecord {
    fn from(c: &Columns) -> Self {
        ColumnsRecord(
            c.names()
                .map(|n| {
                    let v = match c.get(n) {
                        Some(Value::Int(v)) => ValueRecord::Int(v),
                        Some(Value::Float(v)) if v.is_finite() => ValueRecord::Float(v),
                        Some(Value::Bool(v)) => ValueRecord::Bool(v),
                        Some(Value::Text(v)) => ValueRecord::Text(v.to_owned()),
                        _ => ValueRecord::Null,
                    };
                    (n.to_owned(), v)
                })
                .collect(),
        )
    }
}

impl ColumnsRecord {
    pub fn columns(&self) -> Columns {
        let mut c = Columns::default();
        for (n, v) in &self.0 {
            let v = match v {
                ValueRecord::Int(v) => Value::Int(*v),
                ValueRecord::Float(v) => Value::Float(*v),
                ValueRecord::Bool(v) => Value::Bool(*v),
                ValueRecord::Text(v) => Value::Text(intern(v)),
                ValueRecord::Null => Value::Null,
            };
            c.push(intern(n), v);
        }
        c
    }
}

/// NaN and infinities (not JSON) as null, and back as NaN.
mod float_or_null {
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else {
            s.serialize_none()
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

/// A [`SenderEvent`] in a part (the same fields, names and reasons as owned strings).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event")]
pub enum SenderEventRecord {
    FrameEncoded {
        frame_id: u64,
        source_index: u64,
        capture_time: Timestamp,
        encode_start: Timestamp,
        encode_end: Timestamp,
        size: DataSize,
        is_keyframe: bool,
        #[serde(with = "float_or_null")]
        qp: f64,
        target_rate: DataRate,
        packet_count: u16,
        reference: Option<u64>,
        columns: ColumnsRecord,
    },
    FrameSkipped {
        source_index: u64,
        capture_time: Timestamp,
        reason: String,
    },
    FrameServiced {
        frame_id: u64,
        head_at: Timestamp,
        done_at: Timestamp,
    },
    FramePurged {
        frame_id: u64,
        time: Timestamp,
    },
    BottleneckReport {
        report: BottleneckReport,
        received: Timestamp,
    },
    PacketSent {
        kind: PacketKind,
        frame_id: u64,
        size: DataSize,
        time: Timestamp,
    },
}

impl From<&SenderEvent> for SenderEventRecord {
    fn from(e: &SenderEvent) -> Self {
        match e.clone() {
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
                columns,
            } => SenderEventRecord::FrameEncoded {
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
                columns: (&columns).into(),
            },
            SenderEvent::FrameSkipped { source_index, capture_time, reason } => {
                SenderEventRecord::FrameSkipped {
                    source_index,
                    capture_time,
                    reason: reason.to_owned(),
                }
            }
            SenderEvent::FrameServiced { frame_id, head_at, done_at } => {
                SenderEventRecord::FrameServiced { frame_id, head_at, done_at }
            }
            SenderEvent::FramePurged { frame_id, time } => {
                SenderEventRecord::FramePurged { frame_id, time }
            }
            SenderEvent::BottleneckReport { report, received } => {
                SenderEventRecord::BottleneckReport { report, received }
            }
            SenderEvent::PacketSent { kind, frame_id, size, time } => {
                SenderEventRecord::PacketSent { kind, frame_id, size, time }
            }
        }
    }
}

impl SenderEventRecord {
    pub fn event(&self) -> SenderEvent {
        match self.clone() {
            SenderEventRecord::FrameEncoded {
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
                columns,
            } => SenderEvent::FrameEncoded {
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
                columns: columns.columns(),
            },
            SenderEventRecord::FrameSkipped { source_index, capture_time, reason } => {
                SenderEvent::FrameSkipped { source_index, capture_time, reason: intern(&reason) }
            }
            SenderEventRecord::FrameServiced { frame_id, head_at, done_at } => {
                SenderEvent::FrameServiced { frame_id, head_at, done_at }
            }
            SenderEventRecord::FramePurged { frame_id, time } => {
                SenderEvent::FramePurged { frame_id, time }
            }
            SenderEventRecord::BottleneckReport { report, received } => {
                SenderEvent::BottleneckReport { report, received }
            }
            SenderEventRecord::PacketSent { kind, frame_id, size, time } => {
                SenderEvent::PacketSent { kind, frame_id, size, time }
            }
        }
    }
}

/// A [`Sample`] in a part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleRecord {
    pub t_us: i64,
    pub target_rate_bps: i64,
    pub encoder_rate_bps: i64,
    pub pacing_rate_bps: Option<i64>,
    pub link_capacity_bps: i64,
    pub send_rate_bps: i64,
    pub delivered_rate_bps: i64,
    pub queue_bytes: i64,
    pub queue_packets: u64,
    pub queue_delay_us: i64,
    pub pacer_queue_bytes: i64,
    pub pacer_delay_us: i64,
    pub rtt_us: Option<i64>,
    pub in_flight_bytes: i64,
    pub cwnd_bytes: Option<i64>,
    pub lost_packets: u64,
    pub columns: ColumnsRecord,
}

impl From<&Sample> for SampleRecord {
    fn from(s: &Sample) -> Self {
        SampleRecord {
            t_us: s.t_us,
            target_rate_bps: s.target_rate_bps,
            encoder_rate_bps: s.encoder_rate_bps,
            pacing_rate_bps: s.pacing_rate_bps,
            link_capacity_bps: s.link_capacity_bps,
            send_rate_bps: s.send_rate_bps,
            delivered_rate_bps: s.delivered_rate_bps,
            queue_bytes: s.queue_bytes,
            queue_packets: s.queue_packets,
            queue_delay_us: s.queue_delay_us,
            pacer_queue_bytes: s.pacer_queue_bytes,
            pacer_delay_us: s.pacer_delay_us,
            rtt_us: s.rtt_us,
            in_flight_bytes: s.in_flight_bytes,
            cwnd_bytes: s.cwnd_bytes,
            lost_packets: s.lost_packets,
            columns: (&s.columns).into(),
        }
    }
}

impl SampleRecord {
    pub fn sample(&self) -> Sample {
        Sample {
            t_us: self.t_us,
            target_rate_bps: self.target_rate_bps,
            encoder_rate_bps: self.encoder_rate_bps,
            pacing_rate_bps: self.pacing_rate_bps,
            link_capacity_bps: self.link_capacity_bps,
            send_rate_bps: self.send_rate_bps,
            delivered_rate_bps: self.delivered_rate_bps,
            queue_bytes: self.queue_bytes,
            queue_packets: self.queue_packets,
            queue_delay_us: self.queue_delay_us,
            pacer_queue_bytes: self.pacer_queue_bytes,
            pacer_delay_us: self.pacer_delay_us,
            rtt_us: self.rtt_us,
            in_flight_bytes: self.in_flight_bytes,
            cwnd_bytes: self.cwnd_bytes,
            lost_packets: self.lost_packets,
            columns: self.columns.columns(),
        }
    }
}

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
    pub columns: ColumnsRecord,
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
    pub unsendable: u64,
    pub transmitted: u64,
    /// The stream it sent (its SSRCs; docs/live-wire.md): merge checks that the receiver
    /// and the relay read this one.
    #[serde(default)]
    pub stream: u32,
    pub events: Vec<SenderEventRecord>,
    pub samples: Vec<SampleRecord>,
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
    pub events: Vec<ReceiverEvent>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RelayPart {
    #[serde(flatten)]
    pub info: PartInfo,
    pub malformed: u64,
    pub opaque: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub blackout_dropped: u64,
    pub garbage_sent: u64,
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
            for k in ["events", "samples", "link_samples", "policy_dropped_frames"] {
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
        let columns = l.columns.columns();
        for n in columns.names() {
            if let Some(v) = columns.get(n) {
                s.columns.set(n, v);
            }
        }
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
    let sender_events: Vec<SenderEvent> = sender.events.iter().map(|e| e.event()).collect();
    let receiver_events: Vec<ReceiverEvent> =
        receiver.events.iter().map(|e| shift_receiver_event(e, receiver_shift)).collect();
    let mut samples: Vec<Sample> = sender.samples.iter().map(|s| s.sample()).collect();
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
        sender_events: &sender_events,
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
        bottleneck_drops: relay.is_some() && scheme.bottleneck.drops_frames(),
    });
    let stopped = |i: &PartInfo| i.ended == "stopped";
    let stats = LiveStats {
        sender_io: sender.info.io.clone(),
        relay_io: r.info.io.clone(),
        receiver_io: receiver.info.io.clone(),
        sender_malformed: sender.malformed,
        receiver_malformed: receiver.malformed,
        relay_opaque: r.opaque,
        relay_duplicated: r.duplicated,
        relay_reordered: r.reordered,
        relay_blackout_dropped: r.blackout_dropped,
        relay_garbage_sent: r.garbage_sent,
        relay_reports_sent: r.reports_sent,
        sender_reports_received: reports,
        receiver_restarts: 0,
        sender_restarts: 0,
        receiver_new_streams: receiver.new_streams,
        receiver_stale_packets: receiver.stale_packets,
        received_stream_bytes: receiver.stream_bytes,
        received_stream_gaps: receiver.stream_gaps,
        feedback_messages: sender.feedback_messages,
        sender_unsendable: sender.unsendable,
        media_packets_received: receiver.media_packets,
        stopped_early: stopped(&sender.info)
            || stopped(&receiver.info)
            || relay.is_some_and(|r| stopped(&r.info)),
        wall_s: sender.info.wall_s,
    };
    Ok(LiveResult { run, stats })
}

#[cfg(test)]
mod tests {
    use super::*;

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
                reason: "pause",
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
            events: events.iter().map(SenderEventRecord::from).collect(),
            samples: vec![(&sample).into()],
            ..SenderPart::default()
        };
        let back: SenderPart =
            serde_json::from_str(&serde_json::to_string(&part).unwrap()).unwrap();
        let got: Vec<SenderEvent> = back.events.iter().map(|e| e.event()).collect();
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
        assert_eq!(back.samples[0].sample(), Sample { columns: fix(&sample.columns), ..sample });
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
                    columns: ColumnsRecord(vec![("bn_x".into(), ValueRecord::Int(queue_bytes))]),
                    ..LinkSampleRecord::default()
                })
                .collect();
        join_link_samples(&mut samples, &link, TimeDelta::from_ms(20));
        let q: Vec<i64> = samples.iter().map(|s| s.queue_bytes).collect();
        assert_eq!(q, vec![200, 200, 300]);
        let rate: Vec<i64> = samples.iter().map(|s| s.delivered_rate_bps).collect();
        // 26 000 B in the first 20 ms, none in the next, 25 000 B in the third.
        assert_eq!(rate, vec![10_400_000, 0, 10_000_000]);
        assert_eq!(samples[2].columns.get("bn_x"), Some(Value::Int(300)));
    }
}
