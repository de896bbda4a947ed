//! The deterministic virtual-time simulator: a discrete-event loop over a [`Network`] of
//! nodes that jumps to the earliest timeout. Every node is a sans-IO state machine; the
//! simulator only moves time forward (the network moves datagrams along its edges). Same
//! seed and config give identical output.
//!
//! The topology a run config gives ([`Simulation::new`]):
//!
//! ```text
//! sender -> [access delay] -> downlink (bottleneck: queue + trace + delay) -> receiver
//!   ^                              | reports (bottleneck behaviours that send them)
//!   |                              v
//!   +---- [access delay, back] <---+---- uplink (feedback) <--------------- receiver
//! ```
//!
//! The access delay (sender to bottleneck, `downlink.access_delay_ms`; Co-RTV's
//! sender-bottleneck delay) and its way back exist only when set: the bottleneck's reports
//! and the receiver's feedback (after the uplink, receiver to bottleneck) both cross it back.
//! Without it the network is the four nodes it always was, in the same order, so results do
//! not change.

pub mod flows;
pub mod network;

use crate::cross::CompetingFlow;
use crate::encoder::model::{ModelEncoder, ModelEncoderConfig};
use crate::encoder::{Encoder, InlineEncoder};
use crate::link::bottleneck::BottleneckEnv;
use crate::link::trace::Trace;
use crate::link::{DropReason, Link, LinkConfig, LinkRate, QueueLimit};
use crate::metrics::{self, FrameRecord, LinkTotals, Recorder, Sample, SkipRecord, Summary};
use crate::packet::PacketKind;
use crate::receiver::{Receiver, ReceiverConfig};
use crate::rng::Rng;
use crate::scheme::SchemeConfig;
use crate::sender::{Sender, SenderConfig};
use crate::units::{DataSize, TimeDelta, Timestamp};
use network::{Network, NodeId, IN, OUT, REPORT};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One direction of the network path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PathConfig {
    /// Name of the trace file (informational; the trace itself is passed to
    /// [`Simulation::new`]). `None`: unlimited rate.
    pub trace: Option<String>,
    /// Drop-tail limit in bytes (`queue_packets` and this are exclusive; neither: unlimited).
    pub queue_bytes: Option<i64>,
    pub queue_packets: Option<usize>,
    /// One-way propagation delay, after the queue.
    pub delay_ms: f64,
    /// One-way delay from the sender to the bottleneck queue (Co-RTV's sender-bottleneck
    /// delay); the bottleneck's reports and the receiver's feedback take the same delay back
    /// (the uplink's `delay_ms` is then receiver to bottleneck). Downlink only.
    pub access_delay_ms: f64,
    /// IID random loss probability.
    pub loss: f64,
    /// The queue discipline (drop-tail, CoDel, FQ-CoDel) at the limit above. Only
    /// written when it is not drop-tail, so configs without it read and print as before.
    #[serde(skip_serializing_if = "QueueDisciplineKind::is_drop_tail")]
    pub queue_discipline: QueueDisciplineKind,
    /// An AQM discipline (CoDel, FQ-CoDel) marks ECN-capable packets CE instead of dropping
    /// them (only the TCP cross traffic is ECN-capable). Only written when on.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ecn: bool,
}

/// The queue discipline of a path (`--queue`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueDisciplineKind {
    /// Drop-tail at the queue limit (Mahimahi), or the scheme's own bottleneck behaviour.
    #[default]
    Droptail,
    /// CoDel (RFC 8289; `link/codel.rs`).
    Codel,
    /// FQ-CoDel (RFC 8290; `link/fq_codel.rs`).
    FqCodel,
}

impl QueueDisciplineKind {
    pub fn is_drop_tail(&self) -> bool {
        *self == QueueDisciplineKind::Droptail
    }
    pub fn name(self) -> &'static str {
        match self {
            QueueDisciplineKind::Droptail => "droptail",
            QueueDisciplineKind::Codel => "codel",
            QueueDisciplineKind::FqCodel => "fq-codel",
        }
    }
    /// The discipline for a queue limited to `limit` (marking ECN-capable packets CE
    /// instead of dropping them with `ecn`, for the AQMs).
    pub fn build(self, limit: QueueLimit, ecn: bool) -> Box<dyn crate::link::QueueDiscipline> {
        use crate::link::{codel, fq_codel, DropTail};
        let codel = codel::CodelConfig { ecn, ..codel::CodelConfig::default() };
        match self {
            QueueDisciplineKind::Droptail => Box::new(DropTail { limit }),
            QueueDisciplineKind::Codel => Box::new(codel::Codel::new(codel, limit)),
            QueueDisciplineKind::FqCodel => Box::new(fq_codel::FqCodel::new(
                fq_codel::FqCodelConfig { codel, ..fq_codel::FqCodelConfig::default() },
                limit,
            )),
        }
    }
}

impl Default for PathConfig {
    fn default() -> Self {
        PathConfig {
            trace: None,
            queue_bytes: None,
            queue_packets: None,
            delay_ms: 20.0,
            access_delay_ms: 0.0,
            loss: 0.0,
            queue_discipline: QueueDisciplineKind::Droptail,
            ecn: false,
        }
    }
}

/// Which encoder a run uses.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum EncoderConfig {
    Model(ModelEncoderConfig),
    /// libx264 on real video; built by the `sluice-x264` crate, not by [`build_encoder`].
    X264(crate::encoder::X264Settings),
}

impl Default for EncoderConfig {
    fn default() -> Self {
        EncoderConfig::Model(ModelEncoderConfig::default())
    }
}

/// Everything that defines a run (and goes into the result header).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    pub scheme_name: String,
    pub scheme: Option<SchemeConfig>,
    pub seed: u64,
    /// Capture duration.
    pub duration_s: f64,
    /// Extra time after the last capture so frames in flight can arrive.
    pub drain_s: f64,
    pub fps: f64,
    pub sample_interval_ms: f64,
    /// Transport feedback interval of the receiver; `None`: the scheme's
    /// ([`SchemeConfig::feedback_interval_ms`]), else 50 ms.
    pub feedback_interval_ms: Option<f64>,
    pub max_payload_bytes: i64,
    /// The application's highest video bitrate (WebRTC's `maxBitrate`), the same for every
    /// scheme: the encoder controller never sees a target above it and the encoder is never
    /// asked for more. `None` (the default): no cap.
    pub max_video_rate_bps: Option<f64>,
    pub encoder: EncoderConfig,
    pub downlink: PathConfig,
    pub uplink: PathConfig,
    /// Flows that share the downlink (the bottleneck) with the session's media flow
    /// (`--competing`; [`crate::cross`]). Only written when there are some.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub competing: Vec<CompetingFlow>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            scheme_name: "webrtc".into(),
            scheme: None,
            seed: 1,
            duration_s: 30.0,
            drain_s: 2.0,
            fps: 30.0,
            sample_interval_ms: 20.0,
            feedback_interval_ms: None,
            max_payload_bytes: crate::packetizer::DEFAULT_MAX_PAYLOAD,
            max_video_rate_bps: None,
            encoder: EncoderConfig::default(),
            downlink: PathConfig::default(),
            uplink: PathConfig::default(),
            competing: Vec::new(),
        }
    }
}

fn check_range(field: &str, v: f64, lo: f64, open_lo: bool, hi: f64) -> Result<(), ConfigError> {
    crate::check_range(field, v, lo, open_lo, hi).map_err(ConfigError)
}

/// The range a config number's unit allows, by the suffix of its name (the project's rule:
/// plain numbers carry their unit in the name), and the typed rates (bits per second).
fn unit_range(key: &str) -> Option<(f64, f64)> {
    use crate::limits;
    const RATES_BPS: [&str; 3] = ["start_rate", "min_rate", "max_rate"];
    let max_bps = limits::MAX_RATE_BPS as f64;
    if RATES_BPS.contains(&key) || key.ends_with("_bps") {
        Some((0.0, max_bps))
    } else if key.ends_with("_kbps") {
        Some((0.0, max_bps / 1e3))
    } else if key.ends_with("_mbps") {
        Some((0.0, max_bps / 1e6))
    } else if key.ends_with("_ms") {
        Some((0.0, limits::MAX_TIME_MS))
    } else if key.ends_with("_s") {
        Some((0.0, limits::MAX_SESSION_S))
    } else if key.ends_with("_bytes") || key.ends_with("_mtu") {
        Some((0.0, limits::MAX_SIZE_BYTES))
    } else if key.ends_with("_packets") || key.ends_with("_frames") {
        Some((0.0, limits::MAX_PACKETS))
    } else if SIGNED.contains(&key) || key == "seed" {
        None
    } else {
        // Factors, fractions, counts and the typed times (microseconds): never negative, and
        // small enough that no product with a time or a rate overflows.
        Some((0.0, MAX_PLAIN))
    }
}

/// Config numbers that may be negative.
const SIGNED: [&str; 1] = ["initial_offset"];
/// The largest value of a number without a unit in its name (a typed time in microseconds:
/// about 11 days).
const MAX_PLAIN: f64 = 1e12;

/// Checks every number of a serialised config against [`unit_range`]; `Err` names the
/// field's path (scheme components without `scheme.`).
fn check_units(v: &serde_json::Value, path: &str) -> Result<(), String> {
    match v {
        serde_json::Value::Object(m) => {
            for (k, child) in m {
                let p = if path.is_empty() || path == "scheme" {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                check_units(child, &p)?;
            }
            Ok(())
        }
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check_units(item, path)
                    .map_err(|e| e.replacen(path, &format!("{path}[{i}]"), 1))?;
            }
            Ok(())
        }
        serde_json::Value::Number(n) => {
            let key = path.rsplit('.').next().unwrap_or(path);
            match (unit_range(key), n.as_f64()) {
                (Some((lo, hi)), Some(x)) => crate::check_range(path, x, lo, false, hi),
                _ => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// Transport feedback interval unless the run or the scheme sets one.
pub const DEFAULT_FEEDBACK_MS: f64 = 50.0;

/// A configuration mistake (user input), reported, never a panic.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ConfigError {}

impl RunConfig {
    /// The scheme's components: the explicit composition if given, else the registry entry.
    pub fn resolve_scheme(&self) -> Result<SchemeConfig, ConfigError> {
        if let Some(s) = &self.scheme {
            return Ok(s.clone());
        }
        crate::scheme::lookup(&self.scheme_name).map(|s| s.config).ok_or_else(|| {
            let names: Vec<&str> = crate::scheme::registry().iter().map(|s| s.name).collect();
            ConfigError(format!(
                "unknown scheme '{}' (known: {})",
                self.scheme_name,
                names.join(", ")
            ))
        })
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |m: String| Err(ConfigError(m));
        if !(self.duration_s > 0.0 && self.duration_s.is_finite()) {
            return err(format!("duration must be positive, got {}", self.duration_s));
        }
        if !(self.fps > 0.0 && self.fps <= 1000.0) {
            // (NaN fails this comparison too.)
            return err(format!("fps must be in (0, 1000], got {}", self.fps));
        }
        if !(self.drain_s >= 0.0 && self.drain_s.is_finite()) {
            return err(format!(
                "drain must be a finite number of seconds >= 0, got {}",
                self.drain_s
            ));
        }
        if let Some(cap) = self.max_video_rate_bps {
            check_range("max_video_rate_bps", cap, 10_000.0, false, 10e9)?;
        }
        let scheme = self.resolve_scheme()?;
        check_range("sample_interval_ms", self.sample_interval_ms, 1.0, false, 10_000.0)?;
        let feedback_ms = self.feedback_interval_ms(&scheme);
        check_range("feedback_interval_ms", feedback_ms, 1.0, false, 10_000.0)?;
        if self.max_payload_bytes < 100 || self.max_payload_bytes > 1400 {
            return err(format!(
                "max_payload_bytes (max payload) must be 100..=1400 bytes, got {}",
                self.max_payload_bytes
            ));
        }
        for (name, p) in [("downlink", &self.downlink), ("uplink", &self.uplink)] {
            if !(0.0..1.0).contains(&p.loss) {
                return err(format!("{name}.loss must be in [0, 1), got {}", p.loss));
            }
            if p.queue_bytes.is_some() && p.queue_packets.is_some() {
                return err(format!("{name}: give a queue limit in bytes or in packets, not both"));
            }
            if p.queue_bytes.is_some_and(|b| b < 1504) || p.queue_packets == Some(0) {
                return err(format!("{name}: queue limit must hold at least one packet"));
            }
        }
        if !self.downlink.queue_discipline.is_drop_tail()
            && scheme.bottleneck != crate::link::bottleneck::BottleneckConfig::default()
        {
            return err(format!(
                "downlink.queue_discipline {} needs a scheme with a plain drop-tail bottleneck \
                 ('{}' brings its own bottleneck behaviour)",
                self.downlink.queue_discipline.name(),
                self.scheme_name
            ));
        }
        for (name, p) in [("downlink", &self.downlink), ("uplink", &self.uplink)] {
            if p.ecn && p.queue_discipline.is_drop_tail() {
                return err(format!(
                    "{name}.ecn marks with an AQM: set {name}.queue_discipline to codel or \
                     fq-codel (drop-tail has no marking)"
                ));
            }
        }
        flows::validate_competing(self).map_err(ConfigError)?;
        if self.uplink.access_delay_ms != 0.0 {
            return err("the access delay is a downlink setting (sender to bottleneck)".into());
        }
        self.check_limits().map_err(ConfigError)?;
        if let EncoderConfig::Model(m) = &self.encoder {
            m.validate().map_err(ConfigError)?;
        }
        scheme.encoder_controller.validate().map_err(ConfigError)?;
        scheme.pacer.validate().map_err(ConfigError)?;
        scheme.cc.validate().map_err(ConfigError)?;
        scheme.bottleneck.validate().map_err(ConfigError)?;
        if let Some(f) = scheme.feedback_interval_ms {
            check_range("feedback_interval_ms", f, 1.0, false, 10_000.0)?;
        }
        // Every other number of the resolved config, by the unit its name carries.
        let value = serde_json::to_value(self.resolved()?)
            .map_err(|e| ConfigError(format!("run config: {e}")))?;
        check_units(&value, "").map_err(ConfigError)
    }

    /// The limits (docs/cli.md, "Limits") on the run's own settings (session length, delays, queues).
    fn check_limits(&self) -> Result<(), String> {
        use crate::limits;
        crate::check_range("duration_s", self.duration_s, 0.0, true, limits::MAX_SESSION_S)?;
        crate::check_range("drain_s", self.drain_s, 0.0, false, 3_600.0)?;
        if self.duration_s + self.drain_s > limits::MAX_SESSION_S {
            return Err(format!(
                "duration_s + drain_s must be at most {} s (a day), got {} s",
                limits::MAX_SESSION_S,
                self.duration_s + self.drain_s
            ));
        }
        let frames = self.fps * self.duration_s;
        if frames > limits::MAX_RECORDS {
            return Err(format!(
                "fps x duration_s is {} frames, above the limit of {} per run",
                crate::show(frames),
                crate::show(limits::MAX_RECORDS)
            ));
        }
        let samples = (self.duration_s + self.drain_s) * 1000.0 / self.sample_interval_ms;
        if samples > limits::MAX_RECORDS {
            return Err(format!(
                "(duration_s + drain_s) / sample_interval_ms is {} samples, above the limit of \
                 {} per run",
                crate::show(samples.round()),
                crate::show(limits::MAX_RECORDS)
            ));
        }
        for (name, p) in [("downlink", &self.downlink), ("uplink", &self.uplink)] {
            crate::check_range(
                &format!("{name}.delay_ms"),
                p.delay_ms,
                0.0,
                false,
                limits::MAX_DELAY_MS,
            )?;
            crate::check_range(
                &format!("{name}.access_delay_ms"),
                p.access_delay_ms,
                0.0,
                false,
                limits::MAX_DELAY_MS,
            )?;
            if let Some(b) = p.queue_bytes {
                crate::check_range(
                    &format!("{name}.queue_bytes"),
                    b as f64,
                    1504.0,
                    false,
                    limits::MAX_SIZE_BYTES,
                )?;
            }
            if let Some(n) = p.queue_packets {
                crate::check_range(
                    &format!("{name}.queue_packets"),
                    n as f64,
                    1.0,
                    false,
                    limits::MAX_PACKETS,
                )?;
            }
        }
        Ok(())
    }

    /// The transport feedback interval in effect: the run's, else the scheme's, else 50 ms
    /// (Sluice's default; libwebrtc's is 100 ms, adapted within 50-250 ms).
    pub fn feedback_interval_ms(&self, scheme: &SchemeConfig) -> f64 {
        self.feedback_interval_ms.or(scheme.feedback_interval_ms).unwrap_or(DEFAULT_FEEDBACK_MS)
    }

    /// The config with everything it leaves to defaults filled in: the scheme's components
    /// and the feedback interval in effect (what a result header records).
    pub fn resolved(&self) -> Result<RunConfig, ConfigError> {
        let scheme = self.resolve_scheme()?;
        let mut c = self.clone();
        c.feedback_interval_ms = Some(self.feedback_interval_ms(&scheme));
        c.scheme = Some(scheme);
        Ok(c)
    }

    fn link_config(p: &PathConfig, trace: Option<Arc<Trace>>) -> LinkConfig {
        LinkConfig {
            rate: trace.map_or(LinkRate::Unlimited, LinkRate::Trace),
            queue: match (p.queue_bytes, p.queue_packets) {
                (Some(b), _) => QueueLimit::Bytes(b),
                (None, Some(n)) => QueueLimit::Packets(n),
                (None, None) => QueueLimit::Unlimited,
            },
            delay: TimeDelta::from_ms_f64(p.delay_ms),
            loss_rate: p.loss,
        }
    }
}

/// Results of a finished run.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub frames: Vec<FrameRecord>,
    /// Capture slots never encoded.
    pub skips: Vec<SkipRecord>,
    pub samples: Vec<Sample>,
    pub summary: Summary,
    /// Times the receiver asked for a keyframe (not in the summary, whose keys stay fixed).
    pub keyframe_requests: u64,
}

pub struct Simulation {
    now: Timestamp,
    network: Network,
    sender: NodeId,
    receiver: NodeId,
    /// The downlink: the bottleneck whose queue and capacity the samples record.
    downlink: NodeId,
    uplink: NodeId,
    recorder: Recorder,
    samples: Vec<Sample>,
    sample_interval: TimeDelta,
    next_sample: Timestamp,
    capture_end: Timestamp,
    end: Timestamp,
    downlink_trace: Option<Arc<Trace>>,
    last_sent_bytes: i64,
    last_delivered_bytes: i64,
    /// The competing flows and their per-flow series (`None`: the media flow alone).
    flows: Option<flows::Flows>,
}

/// Builds the encoder a config asks for, if the core can: the model encoder. A real encoder
/// (x264) is built by its own crate and passed to [`Simulation::new`].
pub fn build_encoder(cfg: &RunConfig) -> Result<Box<dyn Encoder>, ConfigError> {
    match &cfg.encoder {
        EncoderConfig::Model(m) => {
            let mut m = m.clone();
            // The model's content draws follow the run seed unless the config pins its own.
            if m.seed == ModelEncoderConfig::default().seed {
                m.seed = cfg.seed;
            }
            // A controller that re-references past dropped frames keeps more references (an
            // unknown scheme is reported by `Simulation::new`).
            let wanted =
                cfg.resolve_scheme().ok().and_then(|s| s.encoder_controller.reference_frames());
            if let Some(n) = wanted {
                m.reference_frames = m.reference_frames.max(n);
            }
            Ok(Box::new(ModelEncoder::new(m, cfg.fps)))
        }
        EncoderConfig::X264(_) => Err(ConfigError(
            "the x264 encoder is built by the sluice-x264 crate (use the sluice front end)".into(),
        )),
    }
}

/// The sender of a run (shared by the simulator and the live runtime, so both run the same
/// state machine): the scheme's controller, pacer and encoder controller around `encoder`.
pub fn build_sender(
    cfg: &RunConfig,
    scheme: &SchemeConfig,
    encoder: Box<dyn crate::encoder::EncoderDriver>,
    now: Timestamp,
) -> Sender {
    build_flow_sender(cfg, scheme, encoder, now, 0)
}

/// [`build_sender`] for the media flow `flow` (a competing media flow has its own id).
pub fn build_flow_sender(
    cfg: &RunConfig,
    scheme: &SchemeConfig,
    encoder: Box<dyn crate::encoder::EncoderDriver>,
    now: Timestamp,
    flow: crate::packet::FlowId,
) -> Sender {
    let capture_end = now + TimeDelta::from_secs_f64(cfg.duration_s);
    let cc = scheme.cc.build(now);
    Sender::new(
        SenderConfig {
            fps: cfg.fps,
            max_payload: DataSize::from_bytes(cfg.max_payload_bytes),
            capture_until: capture_end,
            packet_overhead: crate::packet::PACKET_OVERHEAD + scheme.bottleneck.header_extension(),
            max_video_rate: cfg.max_video_rate_bps.map(crate::units::DataRate::from_bps_f64),
            flow,
            ..Default::default()
        },
        cc,
        scheme.pacer.build(now),
        encoder,
        scheme.build_encoder_controller(),
        now,
    )
}

/// The receiver of a run.
pub fn build_receiver(cfg: &RunConfig, scheme: &SchemeConfig, now: Timestamp) -> Receiver {
    build_flow_receiver(cfg, scheme, now, 0)
}

/// [`build_receiver`] for the media flow `flow`.
pub fn build_flow_receiver(
    cfg: &RunConfig,
    scheme: &SchemeConfig,
    now: Timestamp,
    flow: crate::packet::FlowId,
) -> Receiver {
    Receiver::new(
        ReceiverConfig {
            feedback_interval: TimeDelta::from_ms_f64(cfg.feedback_interval_ms(scheme)),
            ..Default::default()
        },
        flow,
        now,
    )
}

/// The downlink (the bottleneck: queue, trace, delay, loss, the scheme's bottleneck
/// behaviour) and the uplink of a run. The downlink logs drops only if its bottleneck drops
/// frames on purpose; the uplink never.
pub fn build_links(
    cfg: &RunConfig,
    scheme: &SchemeConfig,
    downlink_trace: Option<Arc<Trace>>,
    uplink_trace: Option<Arc<Trace>>,
) -> (Link, Link) {
    let downlink_limit = RunConfig::link_config(&cfg.downlink, None).queue;
    let access = TimeDelta::from_ms_f64(cfg.downlink.access_delay_ms);
    let env = BottleneckEnv { fps: cfg.fps, rtt_to_sender: access * 2 };
    let discipline = if cfg.downlink.queue_discipline.is_drop_tail() {
        scheme.bottleneck.build_in(downlink_limit, 0, env)
    } else {
        cfg.downlink.queue_discipline.build(downlink_limit, cfg.downlink.ecn)
    };
    let mut downlink = Link::with_discipline(
        RunConfig::link_config(&cfg.downlink, downlink_trace),
        Rng::fork(cfg.seed, "downlink"),
        discipline,
    );
    let uplink_config = RunConfig::link_config(&cfg.uplink, uplink_trace);
    let uplink_limit = uplink_config.queue;
    let mut uplink = Link::with_discipline(
        uplink_config,
        Rng::fork(cfg.seed, "uplink"),
        cfg.uplink.queue_discipline.build(uplink_limit, cfg.uplink.ecn),
    );
    // Drops are counted in the link stats; the per-packet log is needed only to mark the
    // frames a bottleneck drops on purpose.
    downlink.set_drop_log(scheme.bottleneck.drops_frames());
    uplink.set_drop_log(false);
    (downlink, uplink)
}

/// The access path of a run with an access delay (`downlink.access_delay_ms` > 0): the
/// delay line from the sender to the bottleneck, and the one back to the sender that the
/// bottleneck's reports and the receiver's feedback (after the uplink) cross. `None`
/// without an access delay.
pub fn build_access_links(cfg: &RunConfig) -> Option<(Link, Link)> {
    let access = TimeDelta::from_ms_f64(cfg.downlink.access_delay_ms);
    if access <= TimeDelta::ZERO {
        return None;
    }
    let delay_line = |name: &str| {
        let mut l = Link::new(
            LinkConfig { delay: access, ..LinkConfig::default() },
            Rng::fork(cfg.seed, name),
        );
        l.set_drop_log(false);
        l
    };
    Some((delay_line("access"), delay_line("report-path")))
}

impl Simulation {
    /// A simulation of `cfg` over the given traces (`None`: unlimited rate), with `encoder`
    /// (see [`build_encoder`] for the config's own).
    pub fn new(
        cfg: &RunConfig,
        downlink_trace: Option<Arc<Trace>>,
        uplink_trace: Option<Arc<Trace>>,
        encoder: Box<dyn Encoder>,
    ) -> Result<Simulation, ConfigError> {
        cfg.validate()?;
        let scheme = cfg.resolve_scheme()?;
        let now = Timestamp::ZERO;
        let capture_end = now + TimeDelta::from_secs_f64(cfg.duration_s);
        let sender = build_sender(cfg, &scheme, Box::new(InlineEncoder::new(encoder)), now);
        let receiver = build_receiver(cfg, &scheme, now);
        let (downlink, uplink) = build_links(cfg, &scheme, downlink_trace.clone(), uplink_trace);
        let bottleneck_drops = scheme.bottleneck.drops_frames();

        let mut downlink = downlink;
        if !cfg.competing.is_empty() {
            downlink.enable_flow_stats();
        }
        let mut net = Network::default();
        let tx = net.add("sender", Box::new(sender));
        let down = net.add("downlink", Box::new(downlink));
        let rx = net.add("receiver", Box::new(receiver));
        let up = net.add("uplink", Box::new(uplink));
        let flows = if cfg.competing.is_empty() {
            net.connect(down, OUT, rx, IN);
            None
        } else {
            // The bottleneck's far end sorts datagrams by flow: flow 0 to the session's
            // receiver, each competing flow to its own.
            let demux = net.add("demux", Box::new(network::Demux::default()));
            net.connect(down, OUT, demux, IN);
            net.connect(demux, 0, rx, IN);
            Some(flows::Flows::build(cfg, &mut net, down, demux)?)
        };
        net.connect(rx, OUT, up, IN);
        if let Some((access, report_path)) = build_access_links(cfg) {
            let a = net.add("access", Box::new(access));
            net.connect(tx, OUT, a, IN);
            net.connect(a, OUT, down, IN);
            // The way back: the bottleneck's reports, and the receiver's feedback after the
            // uplink (receiver to bottleneck) crossed it too.
            let back = net.add("bottleneck-report-path", Box::new(report_path));
            net.connect(down, REPORT, back, IN);
            net.connect(up, OUT, back, IN);
            net.connect(back, OUT, tx, IN);
        } else {
            net.connect(up, OUT, tx, IN);
            net.connect(tx, OUT, down, IN);
            net.connect(down, REPORT, tx, IN);
        }
        let sample_interval = TimeDelta::from_ms_f64(cfg.sample_interval_ms);
        Ok(Simulation {
            now,
            network: net,
            sender: tx,
            receiver: rx,
            downlink: down,
            uplink: up,
            recorder: if bottleneck_drops {
                Recorder::with_bottleneck_drops()
            } else {
                Recorder::default()
            },
            samples: Vec::new(),
            sample_interval,
            next_sample: now + sample_interval,
            capture_end,
            end: capture_end + TimeDelta::from_secs_f64(cfg.drain_s),
            downlink_trace,
            last_sent_bytes: 0,
            last_delivered_bytes: 0,
            flows,
        })
    }

    pub fn now(&self) -> Timestamp {
        self.now
    }
    pub fn end(&self) -> Timestamp {
        self.end
    }
    pub fn is_finished(&self) -> bool {
        self.now >= self.end
    }

    fn sender(&self) -> &Sender {
        // The node was added as a Sender by construction.
        self.network.get::<Sender>(self.sender).expect("the sender node is a Sender")
    }
    /// The time series recorded so far.
    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }
    /// The downlink (media path), e.g. to change its delay mid-run in a scenario.
    pub fn downlink_mut(&mut self) -> &mut Link {
        let id = self.downlink;
        self.network.get_mut::<Link>(id).expect("the downlink node is a Link")
    }
    /// The uplink (feedback path).
    pub fn uplink_mut(&mut self) -> &mut Link {
        let id = self.uplink;
        self.network.get_mut::<Link>(id).expect("the uplink node is a Link")
    }
    fn link(&self, id: NodeId) -> &Link {
        // The node was added as a Link by construction.
        self.network.get::<Link>(id).expect("a link node is a Link")
    }

    /// Runs every node until nothing more happens at `self.now`.
    fn settle(&mut self) {
        let now = self.now;
        assert!(self.network.settle(now, 1_000_000), "simulation livelock at {now:?}");
        self.collect_events();
    }

    fn collect_events(&mut self) {
        if let Some(s) = self.network.get_mut_for_events::<Sender>(self.sender) {
            while let Some(e) = s.poll_event() {
                self.recorder.on_sender_event(e);
            }
        }
        if let Some(r) = self.network.get_mut_for_events::<Receiver>(self.receiver) {
            while let Some(e) = r.poll_event() {
                self.recorder.on_receiver_event(e);
            }
        }
        if let Some(f) = &self.flows {
            f.drain_events(&mut self.network);
        }
        let down = self.downlink;
        if let Some(link) = self.network.get_mut_for_events::<Link>(down) {
            while let Some((d, why)) = link.poll_drop() {
                if let (crate::packet::Datagram::Media(p), DropReason::Policy) = (&d, why) {
                    if matches!(p.kind, PacketKind::Video | PacketKind::Retransmission) {
                        self.recorder.on_bottleneck_drop(p.frame_id);
                    }
                }
            }
        }
    }

    fn take_sample(&mut self) {
        let mut flows = self.flows.take();
        let now = self.now;
        let interval = self.sample_interval;
        let sender = self.sender();
        let down = self.link(self.downlink);
        let stats = down.stats();
        let control = sender.control_update();
        let mut columns = crate::columns::Columns::default();
        sender.debug_columns(&mut columns);
        down.debug_columns(&mut columns);
        let capacity_bps = match &self.downlink_trace {
            Some(t) => (t.capacity_between(now - interval, now) / interval).as_bps(),
            None => 0,
        };
        let sent = self.recorder.sent_bytes_total;
        // With competing flows the media flow's keys stay its own (flow 0 at the bottleneck).
        let flow0 = down.flow_stats().filter(|_| flows.is_some());
        let delivered = flow0.map_or(stats.delivered_bytes, |t| t.delivered_bytes(0));
        let lost_packets = flow0.map_or(stats.dropped_packets(), |t| t.dropped_packets(0));
        if let (Some(f), Some(table)) = (&mut flows, down.flow_stats()) {
            f.sample(now, interval, table, &mut columns);
        }
        let sample = Sample {
            t_us: now.as_us(),
            target_rate_bps: control.target_rate.as_bps(),
            encoder_rate_bps: control.encoder_rate.as_bps(),
            pacing_rate_bps: Some(sender.pacing_rate())
                .filter(|r| r.is_finite())
                .map(|r| r.as_bps()),
            link_capacity_bps: capacity_bps,
            send_rate_bps: (DataSize::from_bytes(sent - self.last_sent_bytes) / interval).as_bps(),
            delivered_rate_bps: (DataSize::from_bytes(delivered - self.last_delivered_bytes)
                / interval)
                .as_bps(),
            queue_bytes: down.queue_bytes().as_bytes(),
            queue_packets: down.queue_packets() as u64,
            queue_delay_us: down.last_queue_delay().as_us(),
            pacer_queue_bytes: sender.pacer_queue_size().as_bytes(),
            pacer_delay_us: sender.pacer_oldest_queue_time(now).as_us(),
            rtt_us: sender.smoothed_rtt().map(|r| r.as_us()),
            in_flight_bytes: sender.bytes_in_flight().as_bytes(),
            cwnd_bytes: control.congestion_window.map(|w| w.as_bytes()),
            lost_packets,
            columns,
        };
        self.last_sent_bytes = sent;
        self.last_delivered_bytes = delivered;
        self.samples.push(sample);
        self.flows = flows;
    }

    /// Why the run cannot go on (the encoder failed), if it cannot.
    pub fn failure(&self) -> Option<&str> {
        self.sender().failure()
    }

    /// Advances virtual time to `until` (or the end of the run, whichever is first). Stops
    /// early if the encoder fails ([`failure`](Self::failure)).
    pub fn run_until(&mut self, until: Timestamp) {
        let until = until.min(self.end);
        loop {
            self.settle();
            if self.failure().is_some() {
                break;
            }
            if self.now >= self.next_sample && self.now <= self.capture_end {
                self.take_sample();
                self.next_sample += self.sample_interval;
            }
            // No samples after the end of capture (the drain only lets frames arrive).
            let next = if self.next_sample <= self.capture_end {
                self.next_sample
            } else {
                Timestamp::INFINITY
            };
            let next = next.min(self.network.poll_timeout());
            // A node whose timeout is already due after settling would spin: step past it.
            let next = next.max(self.now + TimeDelta::from_us(1));
            if next > until {
                self.now = self.now.max(until);
                break;
            }
            self.now = next;
        }
    }

    /// Runs to the end and returns the results.
    pub fn run(mut self) -> RunResult {
        self.run_until(self.end);
        self.finish()
    }

    /// Summarises a run (normally after [`run_until`](Self::run_until) reached the end).
    pub fn finish(mut self) -> RunResult {
        self.settle();
        let frames = self.recorder.frames();
        let skips = self.recorder.skips();
        let stats = self.link(self.downlink).stats();
        // Utilisation covers the sampled part of the session (up to the last sample at or
        // before the end of capture), so bytes delivered while draining do not count.
        let sampled_until =
            self.samples.last().map_or(Timestamp::ZERO, |s| Timestamp::from_us(s.t_us));
        let capacity_bytes = match &self.downlink_trace {
            Some(t) => t.capacity_between(Timestamp::ZERO, sampled_until).as_bytes(),
            None => 0,
        };
        let mut totals = LinkTotals {
            arrived_packets: stats.arrived_packets,
            dropped_packets: stats.dropped_packets(),
            policy_dropped_packets: stats.dropped_policy_packets,
            delivered_bytes: self.last_delivered_bytes,
            capacity_bytes,
        };
        let table = self.link(self.downlink).flow_stats();
        if let (Some(_), Some(table)) = (&self.flows, table) {
            // The media flow's own packets (drops at the shared queue are all congestion
            // drops: a policy-dropping bottleneck is not combined with competing flows).
            let f0 = table.get(0);
            totals.arrived_packets = f0.arrived_packets;
            totals.dropped_packets = f0.dropped_packets;
        }
        let flow_summaries = match (&self.flows, table) {
            (Some(f), Some(table)) => Some(f.summarize(table, sampled_until)),
            _ => None,
        };
        let mut summary = metrics::summarize(
            &frames,
            &skips,
            &self.samples,
            totals,
            &self.recorder,
            self.capture_end,
            self.end,
        );
        if let Some((flows, jain)) = flow_summaries {
            summary.flows = Some(flows);
            summary.jain_index = Some(jain.unwrap_or(f64::NAN));
        }
        RunResult {
            frames,
            skips,
            samples: self.samples,
            summary,
            keyframe_requests: self.recorder.keyframe_requests,
        }
    }
}
