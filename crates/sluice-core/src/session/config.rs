//! A run's configuration: the network path in each direction, the encoder, the scheme and
//! the session's length and seed, with the checks that turn a user's mistake into a
//! [`ConfigError`] (units in key names, ranges, combinations). Both runtimes, the simulator
//! and live mode, take a [`RunConfig`].

use crate::cross::CompetingFlow;
use crate::encoder::model::ModelEncoderConfig;
use crate::link::faults::FaultsConfig;
use crate::link::trace::Trace;
use crate::link::{LinkConfig, LinkRate, QueueLimit};
use crate::scheme::SchemeConfig;
use crate::sim::flows;
use crate::units::TimeDelta;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One direction of the network path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PathConfig {
    /// Name of the trace file (informational; the trace itself is passed to
    /// [`crate::sim::Simulation::new`]). `None`: unlimited rate.
    pub trace: Option<String>,
    /// Drop-tail limit in bytes (`queue_packets` and this are exclusive; neither: unlimited).
    pub queue_bytes: Option<i64>,
    /// Drop-tail limit in packets (exclusive with `queue_bytes`).
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
    /// Whether this is drop-tail (the default).
    pub fn is_drop_tail(&self) -> bool {
        *self == QueueDisciplineKind::Droptail
    }
    /// Its name in configs (`droptail`, `codel`, `fq-codel`).
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
    /// The deterministic model encoder.
    Model(ModelEncoderConfig),
    /// libx264 on real video; built by the `sluice-x264` crate, not by [`super::topology::build_encoder`].
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
    /// The scheme's name, looked up in the registry unless `scheme` is given (default `webrtc`).
    pub scheme_name: String,
    /// An explicit composition, used instead of the registry's (`None`: look up `scheme_name`).
    pub scheme: Option<SchemeConfig>,
    /// The run's seed: its random streams fork from it (the model encoder's unless its own
    /// `seed` is set; default 1).
    pub seed: u64,
    /// Capture duration.
    pub duration_s: f64,
    /// Extra time after the last capture so frames in flight can arrive.
    pub drain_s: f64,
    /// Capture frame rate, frames per second (default 30).
    pub fps: f64,
    /// Time-series sample interval, ms (default 20).
    pub sample_interval_ms: f64,
    /// Transport feedback interval of the receiver; `None`: the scheme's
    /// ([`SchemeConfig::feedback_interval_ms`]), else 50 ms.
    pub feedback_interval_ms: Option<f64>,
    /// Largest payload per packet, bytes (100 to 1400; default 1200).
    pub max_payload_bytes: i64,
    /// The application's highest video bitrate (WebRTC's `maxBitrate`), the same for every
    /// scheme: the encoder controller never sees a target above it and the encoder is never
    /// asked for more. `None` (the default): no cap.
    pub max_video_rate_bps: Option<f64>,
    /// The encoder (default: the model encoder).
    pub encoder: EncoderConfig,
    /// The media path, sender to receiver (the bottleneck).
    pub downlink: PathConfig,
    /// The feedback path, receiver to sender.
    pub uplink: PathConfig,
    /// Flows that share the downlink (the bottleneck) with the session's media flow
    /// (`--competing`; [`crate::cross`]). Only written when there are some.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub competing: Vec<CompetingFlow>,
    /// Faults on the path beyond the link model (duplication, reordering, a feedback
    /// blackout; [`crate::link::faults`]), the same in simulation and live. Only written
    /// when not all default (a reorder delay given before the reordering itself is kept).
    #[serde(skip_serializing_if = "FaultsConfig::is_default")]
    pub faults: FaultsConfig,
    /// A second bottleneck on the media path after the downlink (RFC 8867 §6.3's multiple
    /// bottlenecks): the session's media crosses both, a competing flow the one it is given
    /// (`crosses`). Only written when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub second_bottleneck: Option<SecondBottleneck>,
}

/// A second bottleneck after the downlink: a constant rate, a drop-tail queue and its own
/// one-way delay after the queue (added to the path's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecondBottleneck {
    /// Its constant rate, Mbit/s (at least 0.012; default 1).
    pub rate_mbps: f64,
    /// Drop-tail limit in bytes (`None`: unlimited).
    pub queue_bytes: Option<i64>,
    /// Its one-way delay after the queue, ms (default 0).
    pub delay_ms: f64,
}

impl Default for SecondBottleneck {
    fn default() -> Self {
        SecondBottleneck { rate_mbps: 1.0, queue_bytes: None, delay_ms: 0.0 }
    }
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
            faults: FaultsConfig::default(),
            second_bottleneck: None,
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

    /// Checks the whole config; the first mistake found, as a [`ConfigError`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |m: String| Err(ConfigError(m));
        if !(self.duration_s > 0.0 && self.duration_s.is_finite()) {
            return err(format!("duration must be positive, got {}", self.duration_s));
        }
        if !(self.fps > 0.0 && self.fps <= 1000.0) {
            // (NaN fails this comparison too.)
            return err(format!("fps must be in (0, 1000], got {}", self.fps));
        }
        if self.duration_s * self.fps < 1.0 {
            // A run captures from 0 to the duration: shorter than one frame interval, it has
            // one frame and rates over a sliver of time (1000 fps for a 1 ms run at 30).
            return err(format!(
                "duration {} s is shorter than one frame interval at {} fps (1/fps = {:.3} s)",
                crate::show(self.duration_s),
                crate::show(self.fps),
                1.0 / self.fps
            ));
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
        if let Some(b) = &self.second_bottleneck {
            // At least one 1500-byte packet a second (0.012 Mbps): the link's constant trace
            // has one delivery opportunity per 12,000 bits over its 1 s period, and none
            // below that.
            let hi = crate::limits::MAX_RATE_MBPS;
            check_range("second_bottleneck.rate_mbps", b.rate_mbps, 0.012, false, hi)?;
            check_range(
                "second_bottleneck.delay_ms",
                b.delay_ms,
                0.0,
                false,
                crate::limits::MAX_DELAY_MS,
            )?;
            if b.queue_bytes.is_some_and(|q| q < 1504) {
                return err("second_bottleneck: queue limit must hold at least one packet".into());
            }
        }
        flows::validate_competing(self).map_err(ConfigError)?;
        self.faults.validate().map_err(ConfigError)?;
        if let Some((start, _)) = self.faults.feedback_blackout_s {
            if start >= self.duration_s {
                return err(format!(
                    "faults.feedback_blackout_s starts at {start} s, at or after the end of \
                     capture ({} s): it would never happen",
                    self.duration_s
                ));
            }
        }
        if self.uplink.access_delay_ms != 0.0 {
            return err("the access delay is a downlink setting (sender to bottleneck)".into());
        }
        self.check_limits().map_err(ConfigError)?;
        if let EncoderConfig::Model(m) = &self.encoder {
            m.validate().map_err(ConfigError)?;
        }
        scheme.encoder_controller.validate().map_err(ConfigError)?;
        if let Some(salsify) = &scheme.salsify {
            salsify.validate().map_err(ConfigError)?;
        }
        scheme.pacer.validate().map_err(ConfigError)?;
        scheme.cc.validate().map_err(ConfigError)?;
        scheme.bottleneck.validate().map_err(ConfigError)?;
        scheme.check_composition().map_err(ConfigError)?;
        if let Some(f) = scheme.feedback_interval_ms {
            check_range("feedback_interval_ms", f, 1.0, false, 10_000.0)?;
        }
        if let Some(b) = scheme.allocation_overhead_bytes {
            if !(0..=1000).contains(&b) {
                return err(format!(
                    "allocation_overhead_bytes (header bytes the encoder's allocation sets aside \
                     per packet) must be 0..=1000, got {b}"
                ));
            }
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

    pub(crate) fn link_config(p: &PathConfig, trace: Option<Arc<Trace>>) -> LinkConfig {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_feedback_blackout_after_the_end_is_refused_in_one_plain_sentence() {
        let mut cfg = RunConfig { duration_s: 2.0, ..RunConfig::default() };
        cfg.faults.feedback_blackout_s = Some((1.0, 3.0));
        assert!(cfg.validate().is_ok());
        cfg.faults.feedback_blackout_s = Some((2.0, 3.0));
        let e = cfg.validate().unwrap_err().0;
        assert_eq!(
            e,
            "faults.feedback_blackout_s starts at 2 s, at or after the end of capture (2 s): it \
             would never happen"
        );
    }

    #[test]
    fn faults_are_written_when_any_field_is_not_its_default() {
        let json = |c: &RunConfig| serde_json::to_value(c).unwrap();
        let mut cfg = RunConfig::default();
        assert!(json(&cfg).get("faults").is_none(), "a config without faults reads as before");
        // A reorder delay set while no fault is on yet survives a round trip, so that a
        // later override turning reordering on keeps it (the front end resolves the config
        // after every override).
        cfg.faults.reorder_delay_ms = 20.0;
        let back: RunConfig = serde_json::from_value(json(&cfg)).unwrap();
        assert_eq!(back.faults.reorder_delay_ms, 20.0);
        assert!(back.faults.is_none(), "and it is still no fault");
    }

    #[test]
    fn the_allocation_overhead_is_refused_outside_0_to_1000_bytes_and_left_out_when_unset() {
        let scheme = crate::scheme::lookup("webrtc-m156").unwrap().config;
        let run = |b: Option<i64>| RunConfig {
            scheme: Some(SchemeConfig { allocation_overhead_bytes: b, ..scheme.clone() }),
            ..RunConfig::default()
        };
        for ok in [None, Some(0), Some(120), Some(1000)] {
            assert!(run(ok).validate().is_ok(), "{ok:?}");
        }
        for bad in [-1, 1001] {
            let e = run(Some(bad)).validate().unwrap_err().0;
            assert!(
                e.starts_with("allocation_overhead_bytes (header bytes")
                    && e.contains(&format!("got {bad}")),
                "{e}"
            );
        }
        let json = serde_json::to_value(run(None)).unwrap();
        assert!(
            json["scheme"].get("allocation_overhead_bytes").is_none(),
            "configs read as before"
        );
    }

    #[test]
    fn a_run_shorter_than_one_frame_interval_is_refused() {
        let cfg = |duration_s, fps| RunConfig { duration_s, fps, ..RunConfig::default() };
        let e = cfg(0.001, 30.0).validate().unwrap_err().0;
        assert!(e.contains("shorter than one frame interval at 30 fps"), "{e}");
        assert!(cfg(1.0 / 30.0, 30.0).validate().is_ok());
        assert!(cfg(0.01, 100.0).validate().is_ok());
    }

    #[test]
    fn a_second_bottleneck_too_slow_for_one_packet_a_second_is_refused_not_a_panic() {
        let with = |rate_mbps| RunConfig {
            second_bottleneck: Some(SecondBottleneck { rate_mbps, ..Default::default() }),
            ..RunConfig::default()
        };
        let e = with(0.011).validate().unwrap_err().0;
        assert!(e.contains("second_bottleneck.rate_mbps must be in [0.012"), "{e}");
        let slowest = with(0.012);
        assert!(slowest.validate().is_ok());
        assert!(crate::session::topology::build_second_bottleneck(&slowest).is_some());
    }

    #[test]
    fn component_settings_a_run_would_ignore_or_choke_on_are_refused() {
        use crate::encoder_controller::EncoderControllerConfig;
        let scheme = |name: &str| crate::scheme::lookup(name).unwrap().config;
        let run = |s: SchemeConfig| RunConfig { scheme: Some(s), ..RunConfig::default() };
        let refused = |s: SchemeConfig, needle: &str| {
            let e = run(s).validate().unwrap_err().0;
            assert!(e.contains(needle) && !e.contains("  "), "{needle}: {e}");
        };
        // GCC's loss-based estimator: libwebrtc would switch it off on an invalid setting.
        let mut s = scheme("webrtc");
        let crate::scheme::CcConfig::Gcc(g) = &mut s.cc else { panic!("webrtc is GCC") };
        g.loss_based_v2.observation_window_size = 1;
        refused(s.clone(), "cc.loss_based_v2: observation_window_size");
        let crate::scheme::CcConfig::Gcc(g) = &mut s.cc else { unreachable!() };
        g.loss_based_v2.enabled = false;
        assert!(run(s.clone()).validate().is_ok(), "off, its settings do not matter");
        let crate::scheme::CcConfig::Gcc(g) = &mut s.cc else { unreachable!() };
        g.loss_based_v2 = Default::default();
        g.loss_based_v2.newton_iterations = 4_000_000_000;
        refused(s, "cc.loss_based_v2.newton_iterations must be in [1, 100]");
        // Salsify's stage.
        let mut s = scheme("copa-salsify");
        s.salsify.as_mut().unwrap().min_frame_fraction = 1e12;
        refused(s, "salsify.min_frame_fraction");
        // ACE-C.
        let mut s = scheme("ace");
        let EncoderControllerConfig::AceC(c) = &mut s.encoder_controller else { panic!("ACE-C") };
        c.planned_size_scale = [0.0, 0.0, 0.0];
        refused(s.clone(), "encoder_controller.planned_size_scale[0]");
        let EncoderControllerConfig::AceC(c) = &mut s.encoder_controller else { unreachable!() };
        c.planned_size_scale = [1.0, 0.76, 0.65];
        c.ewma_alpha = 1e12;
        refused(s, "encoder_controller.ewma_alpha");
    }
}
