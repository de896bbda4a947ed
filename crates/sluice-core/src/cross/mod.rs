//! Cross traffic: the flows that share the bottleneck with the session's media flow
//! (issue 29; RFC 8867 §5's competing flows). A [`CompetingFlow`] is parsed from the
//! command line's and plan files' spec (`media:SCHEME[@START_S[-STOP_S]]`,
//! `reverse-media:SCHEME[@START_S[-STOP_S]]`,
//! `tcp:newreno|cubic|bbr[@START_S[-STOP_S]]`, `short-tcp[@START_S]`,
//! `audio[@START_S[-STOP_S]]`, `reverse-audio[@START_S[-STOP_S]]`); media flows are built by
//! the simulator from the scheme registry (their own sender, receiver and feedback path),
//! bulk TCP-like flows by [`tcp`],
//! short ones (RFC 8867 §5.7) by [`short_tcp`], RFC 8867's CBR audio by [`audio`].
//!
//! Why not quinn-proto's congestion controllers: its `Controller` trait takes
//! `std::time::Instant`, which the core cannot make without reading a clock (the only
//! constructor is `Instant::now()`), and its `RttEstimator` cannot be built outside the
//! crate. NewReno (RFC 9002 §7), CUBIC (RFC 9438) and BBR (v1,
//! draft-cardwell-iccrg-bbr-congestion-control-00) are therefore written here as small
//! sans-IO state machines over the core's unit types, with QUIC's loss detection (RFC 9002
//! §6) and delivery-rate estimation (draft-cheng-iccrg-delivery-rate-estimation) in the
//! sender ([`tcp::TcpSender`]).

pub mod audio;
pub mod bbr;
pub mod cubic;
pub mod newreno;
pub mod short_tcp;
pub mod tcp;

use crate::units::{DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};

/// A congestion controller of a bulk flow: a window in bytes, grown on acknowledgements and
/// cut on congestion events (RFC 9002 §7's interface, with explicit times).
pub trait TcpCongestion: std::fmt::Debug + Send {
    /// `bytes` of a packet sent at `sent` were acknowledged at `now`; `srtt` is the smoothed
    /// RTT.
    fn on_ack(&mut self, sent: Timestamp, bytes: DataSize, now: Timestamp, srtt: TimeDelta);
    /// Packets were declared lost at `now`, the newest of them sent at `sent`.
    fn on_congestion_event(&mut self, sent: Timestamp, now: Timestamp);
    /// The congestion window.
    fn window(&self) -> DataSize;
    /// The slow-start threshold: in effect infinite (`i64::MAX / 4` bytes) until the first
    /// reduction; BBR, which keeps none, reports that value throughout.
    fn ssthresh(&self) -> DataSize;
    /// A delivery-rate sample for the acknowledgement just given to
    /// [`on_ack`](Self::on_ack) (model-based controllers: BBR). Default: ignored.
    fn on_rate_sample(&mut self, _rs: &tcp::RateSample, _now: Timestamp) {}
    /// The rate to pace at (`None`: send as the window allows, unpaced).
    fn pacing_rate(&self) -> Option<crate::units::DataRate> {
        None
    }
}

/// What every window-based controller here keeps (RFC 9002 Appendix B.2).
#[derive(Clone, Debug)]
pub struct TcpCcState {
    /// The maximum datagram size (`max_datagram_size`), the unit of the window's steps.
    pub max_datagram: DataSize,
    /// The congestion window (`congestion_window`).
    pub cwnd: DataSize,
    /// The slow-start threshold (`ssthresh`): `i64::MAX / 4` bytes, in effect infinite, until
    /// the first reduction.
    pub ssthresh: DataSize,
    /// The start of the current recovery period (`congestion_recovery_start_time`).
    pub recovery_start: Option<Timestamp>,
}

impl TcpCcState {
    /// RFC 9002 §7.2: the initial window is `min(10 * max_datagram, max(14720, 2 *
    /// max_datagram))`.
    pub fn new(max_datagram: DataSize) -> TcpCcState {
        let md = max_datagram.as_bytes();
        TcpCcState {
            max_datagram,
            cwnd: DataSize::from_bytes((10 * md).min(14_720.max(2 * md))),
            ssthresh: DataSize::from_bytes(i64::MAX / 4),
            recovery_start: None,
        }
    }
    /// `kMinimumWindow`: two maximum datagrams (RFC 9002 §7.2).
    pub fn min_window(&self) -> DataSize {
        self.max_datagram * 2
    }
    /// Whether a packet sent at `sent` belongs to the current recovery period (RFC 9002
    /// §7.3.2: one reduction per round trip of losses).
    pub fn in_recovery(&self, sent: Timestamp) -> bool {
        self.recovery_start.is_some_and(|r| sent <= r)
    }
}

/// The congestion control of a bulk flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpCc {
    /// NewReno (RFC 9002 §7; [`newreno`]).
    NewReno,
    /// CUBIC (RFC 9438; [`cubic`]).
    Cubic,
    /// BBR v1 ([`bbr`]).
    Bbr,
}

impl TcpCc {
    /// The name a spec writes (`newreno`, `cubic`, `bbr`).
    pub fn name(self) -> &'static str {
        match self {
            TcpCc::NewReno => "newreno",
            TcpCc::Cubic => "cubic",
            TcpCc::Bbr => "bbr",
        }
    }
    /// The controller with its RFC defaults, for datagrams of `max_datagram` bytes.
    pub fn build(self, max_datagram: DataSize) -> Box<dyn TcpCongestion> {
        match self {
            TcpCc::NewReno => {
                Box::new(newreno::NewReno::new(newreno::NewRenoConfig::default(), max_datagram))
            }
            TcpCc::Cubic => {
                Box::new(cubic::Cubic::new(cubic::CubicConfig::default(), max_datagram))
            }
            TcpCc::Bbr => Box::new(bbr::Bbr::new(bbr::BbrConfig::default(), max_datagram)),
        }
    }
}

/// What a competing flow is.
#[derive(Clone, Debug, PartialEq)]
pub enum CompetingKind {
    /// A media flow of a registered scheme; `reverse`: in the other direction, its media
    /// over the session's feedback path and its feedback over the bottleneck (RFC 8867
    /// §5.3's bi-directional media, `reverse-media:SCHEME`).
    Media {
        /// The scheme's name in the registry.
        scheme: String,
        /// Whether it runs the other way (`reverse-media`).
        reverse: bool,
    },
    /// A long-lived bulk flow with this congestion control.
    Tcp(TcpCc),
    /// A short TCP flow: downloads of 30-50 KB files and exponential idle times
    /// (RFC 8867 §5.7; [`short_tcp`]).
    ShortTcp,
    /// RFC 8867 §4's audio: 20 Kbps CBR, not congestion controlled ([`audio`]); `reverse`:
    /// over the session's uplink (the backward audio of RFC 8867 §5.3, `reverse-audio`).
    Audio {
        /// Whether it runs over the session's uplink (`reverse-audio`).
        reverse: bool,
    },
}

/// One competing flow of a session: what it is, when it runs (seconds from the start;
/// `stop_s` `None`: to the end), its own one-way delay between its sender and the
/// bottleneck, each way (`access_delay_ms`, added to the path's: RFC 8867 §5.5's flows of
/// different RTTs), and, with a second bottleneck, which it crosses (`crosses`). Written and
/// read as its spec string, or as `{"spec": SPEC, "access_delay_ms": D, "crosses": C}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "CompetingRepr", into = "CompetingRepr")]
pub struct CompetingFlow {
    /// What the flow is.
    pub kind: CompetingKind,
    /// When it starts, in seconds from the start of the session.
    pub start_s: f64,
    /// When it stops, in seconds from the start of the session (`None`: at the end).
    pub stop_s: Option<f64>,
    /// Its own one-way delay between its sender and the bottleneck, each way, in ms (added to
    /// the path's).
    pub access_delay_ms: f64,
    /// Which bottlenecks it crosses when the session has a second one.
    pub crosses: Crosses,
}

/// The bottlenecks a competing flow crosses when the session has a second one
/// (`second_bottleneck`; RFC 8867 §6.3). Without one, only `first` is possible.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Crosses {
    /// The downlink only (leaves the path after it).
    #[default]
    First,
    /// The second bottleneck only (joins the path after the downlink).
    Second,
    /// Both, as the session's media does.
    Both,
}

impl Crosses {
    /// Whether this is [`Crosses::First`], the default (which serde leaves unwritten).
    pub fn is_first(&self) -> bool {
        *self == Crosses::First
    }

    /// The name a config writes (`first`, `second`, `both`).
    pub fn name(&self) -> &'static str {
        match self {
            Crosses::First => "first",
            Crosses::Second => "second",
            Crosses::Both => "both",
        }
    }
}

/// How a [`CompetingFlow`] is written: its spec, or its spec and an access delay.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum CompetingRepr {
    /// The spec string alone.
    Spec(String),
    /// An object: the spec, an access delay and the bottlenecks crossed.
    WithDelay(CompetingWithDelay),
}

/// A string or an object, told apart by what the input is, so a mistake in an object is
/// reported as its own (an unknown key, a bad `crosses`), not as matching neither form.
impl<'de> Deserialize<'de> for CompetingRepr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = CompetingRepr;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "a competing-flow spec ({SPEC_GRAMMAR}) or an object with `spec`")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(CompetingRepr::Spec(v.to_owned()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                let de = serde::de::value::MapAccessDeserializer::new(map);
                CompetingWithDelay::deserialize(de).map(CompetingRepr::WithDelay)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// `{"spec": SPEC, "access_delay_ms": D, "crosses": C}` (both optional).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompetingWithDelay {
    /// The flow's spec string (what [`CompetingFlow::parse`] reads).
    pub spec: String,
    /// Its access delay each way, in ms (default 0).
    #[serde(default)]
    pub access_delay_ms: f64,
    /// Which bottlenecks it crosses (default `first`).
    #[serde(default, skip_serializing_if = "Crosses::is_first")]
    pub crosses: Crosses,
}

/// The spec grammar, for error messages.
pub const SPEC_GRAMMAR: &str = "media:SCHEME[@START_S[-STOP_S]], \
     reverse-media:SCHEME[@START_S[-STOP_S]], tcp:newreno|cubic|bbr[@START_S[-STOP_S]], \
     short-tcp[@START_S], audio[@START_S[-STOP_S]], reverse-audio[@START_S[-STOP_S]]";

impl CompetingFlow {
    /// Parses `media:SCHEME[@START_S[-STOP_S]]`, `reverse-media:SCHEME[@START_S[-STOP_S]]`,
    /// `tcp:newreno|cubic|bbr[@START_S[-STOP_S]]`, `short-tcp[@START_S]` or
    /// `audio[@START_S[-STOP_S]]` or `reverse-audio[@START_S[-STOP_S]]`;
    /// `Err` says what is wrong with it (the caller names the spec). The scheme is checked
    /// against the registry by [`crate::session::RunConfig::validate`].
    pub fn parse(spec: &str) -> Result<CompetingFlow, String> {
        let (what, when) = match spec.split_once('@') {
            Some((w, t)) => (w, Some(t)),
            None => (spec, None),
        };
        let kind = match what.split_once(':') {
            Some(("media", scheme)) if !scheme.is_empty() => {
                CompetingKind::Media { scheme: scheme.to_owned(), reverse: false }
            }
            Some(("reverse-media", scheme)) if !scheme.is_empty() => {
                CompetingKind::Media { scheme: scheme.to_owned(), reverse: true }
            }
            Some(("tcp", "newreno")) => CompetingKind::Tcp(TcpCc::NewReno),
            Some(("tcp", "cubic")) => CompetingKind::Tcp(TcpCc::Cubic),
            Some(("tcp", "bbr")) => CompetingKind::Tcp(TcpCc::Bbr),
            Some(("tcp", cc)) => {
                return Err(format!("unknown TCP congestion control '{cc}' (newreno, cubic, bbr)"))
            }
            _ if what == "short-tcp" => CompetingKind::ShortTcp,
            _ if what == "audio" => CompetingKind::Audio { reverse: false },
            _ if what == "reverse-audio" => CompetingKind::Audio { reverse: true },
            _ => return Err(format!("expected {SPEC_GRAMMAR}")),
        };
        let seconds = |s: &str, what: &str| -> Result<f64, String> {
            let v: f64 = s.parse().map_err(|_| format!("{what} '{s}' is not a number"))?;
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{what} must be a finite number of seconds >= 0, got {s}"));
            }
            Ok(v)
        };
        let (start_s, stop_s) = match when {
            None => (0.0, None),
            // `@-3`: a negative start, not an empty one before the range's dash.
            Some(t) if t.starts_with('-') => {
                return Err(format!("start must be a finite number of seconds >= 0, got {t}"))
            }
            // The range's dash, not an exponent's sign (`@1e-3-2e-3`).
            Some(t) => match t
                .char_indices()
                .find(|&(i, c)| c == '-' && i > 0 && !t[..i].ends_with(['e', 'E']))
                .map(|(i, _)| (&t[..i], &t[i + 1..]))
            {
                Some((a, b)) => (seconds(a, "start")?, Some(seconds(b, "stop")?)),
                None => (seconds(t, "start")?, None),
            },
        };
        if kind == CompetingKind::ShortTcp && stop_s.is_some() {
            return Err("a short-tcp flow takes a start time only (short-tcp[@START_S])".into());
        }
        if let Some(stop) = stop_s {
            if stop <= start_s {
                return Err(format!("stop ({stop} s) must be after start ({start_s} s)"));
            }
        }
        Ok(CompetingFlow { kind, start_s, stop_s, access_delay_ms: 0.0, crosses: Crosses::First })
    }

    /// The spec string (what [`Self::parse`] reads).
    pub fn spec(&self) -> String {
        let what = match &self.kind {
            CompetingKind::Media { scheme, reverse } => {
                format!("{}:{scheme}", if *reverse { "reverse-media" } else { "media" })
            }
            CompetingKind::Tcp(cc) => format!("tcp:{}", cc.name()),
            CompetingKind::ShortTcp => "short-tcp".to_owned(),
            CompetingKind::Audio { .. } => self.kind_name().to_owned(),
        };
        match self.stop_s {
            Some(stop) => format!("{what}@{}-{}", self.start_s, stop),
            None if self.start_s > 0.0 => format!("{what}@{}", self.start_s),
            None => what,
        }
    }

    /// `media`, `reverse-media`, `tcp`, `short-tcp`, `audio` or `reverse-audio`.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            CompetingKind::Media { reverse: false, .. } => "media",
            CompetingKind::Media { reverse: true, .. } => "reverse-media",
            CompetingKind::Tcp(_) => "tcp",
            CompetingKind::ShortTcp => "short-tcp",
            CompetingKind::Audio { reverse: false } => "audio",
            CompetingKind::Audio { reverse: true } => "reverse-audio",
        }
    }

    /// Whether it runs the other way, over the session's uplink (`reverse-media`,
    /// `reverse-audio`).
    pub fn is_reverse(&self) -> bool {
        matches!(
            self.kind,
            CompetingKind::Media { reverse: true, .. } | CompetingKind::Audio { reverse: true }
        )
    }

    /// The scheme's name, the TCP congestion control's, or `cbr` (audio).
    pub fn scheme_name(&self) -> String {
        match &self.kind {
            CompetingKind::Media { scheme, .. } => scheme.clone(),
            CompetingKind::Tcp(cc) => cc.name().to_owned(),
            CompetingKind::ShortTcp => short_tcp::ShortTcpConfig::default().cc.name().to_owned(),
            CompetingKind::Audio { .. } => "cbr".to_owned(),
        }
    }
}

impl TryFrom<String> for CompetingFlow {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        CompetingFlow::parse(&s).map_err(|e| format!("bad competing flow '{s}': {e}"))
    }
}

impl TryFrom<CompetingRepr> for CompetingFlow {
    type Error = String;
    fn try_from(r: CompetingRepr) -> Result<Self, String> {
        match r {
            CompetingRepr::Spec(s) => CompetingFlow::try_from(s),
            CompetingRepr::WithDelay(w) => {
                let mut c = CompetingFlow::try_from(w.spec.clone())?;
                // Its range is checked with the config's other delays (`validate`).
                c.access_delay_ms = w.access_delay_ms;
                c.crosses = w.crosses;
                Ok(c)
            }
        }
    }
}

impl From<CompetingFlow> for CompetingRepr {
    fn from(c: CompetingFlow) -> CompetingRepr {
        if c.access_delay_ms == 0.0 && c.crosses.is_first() {
            CompetingRepr::Spec(c.spec())
        } else {
            CompetingRepr::WithDelay(CompetingWithDelay {
                spec: c.spec(),
                access_delay_ms: c.access_delay_ms,
                crosses: c.crosses,
            })
        }
    }
}

/// A one-flow dumbbell for the cross-traffic tests: a sender, a drop-tail bottleneck, a
/// receiver and a return path.
#[cfg(test)]
pub(crate) mod testbed {
    use crate::cross::tcp::TcpReceiver;
    use crate::link::trace::Trace;
    use crate::link::{Link, LinkConfig, LinkRate, QueueLimit};
    use crate::packet::FlowId;
    use crate::rng::Rng;
    use crate::sim::network::{Network, Node, NodeId, IN, OUT};
    use crate::units::{DataRate, TimeDelta, Timestamp};
    use std::sync::Arc;

    /// The network and the node ids of the sender, the bottleneck and the receiver.
    pub struct Dumbbell {
        pub net: Network,
        pub sender: NodeId,
        pub bottleneck: NodeId,
        pub receiver: NodeId,
    }

    /// `sender` (of flow `flow`) over an `mbps` bottleneck with a `queue_bytes` drop-tail
    /// queue and `one_way_ms` each way, lasting `seconds`.
    pub fn dumbbell(
        sender: Box<dyn Node>,
        flow: FlowId,
        mbps: i64,
        queue_bytes: i64,
        one_way_ms: i64,
        seconds: i64,
    ) -> Dumbbell {
        let trace =
            Arc::new(Trace::constant(DataRate::from_mbps(mbps), TimeDelta::from_secs(seconds + 1)));
        let down = Link::new(
            LinkConfig {
                rate: LinkRate::Trace(trace),
                queue: QueueLimit::Bytes(queue_bytes),
                delay: TimeDelta::from_ms(one_way_ms),
                loss_rate: 0.0,
            },
            Rng::new(1),
        );
        let up = Link::new(
            LinkConfig { delay: TimeDelta::from_ms(one_way_ms), ..LinkConfig::default() },
            Rng::new(2),
        );
        let mut net = Network::default();
        let s = net.add("sender", sender);
        let d = net.add("down", Box::new(down));
        let r = net.add("rx", Box::new(TcpReceiver::new(flow)));
        let u = net.add("up", Box::new(up));
        net.connect(s, OUT, d, IN);
        net.connect(d, OUT, r, IN);
        net.connect(r, OUT, u, IN);
        net.connect(u, OUT, s, IN);
        Dumbbell { net, sender: s, bottleneck: d, receiver: r }
    }

    impl Dumbbell {
        /// Runs to `end`, calling `each` at every instant something happened.
        pub fn run(&mut self, end: Timestamp, mut each: impl FnMut(&Network, Timestamp)) {
            let mut now = Timestamp::ZERO;
            while now <= end {
                assert!(self.net.settle(now, 100_000));
                each(&self.net, now);
                now = self.net.poll_timeout().max(now + TimeDelta::from_us(1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print_back() {
        for (spec, kind, start, stop) in [
            (
                "media:webrtc",
                CompetingKind::Media { scheme: "webrtc".into(), reverse: false },
                0.0,
                None,
            ),
            (
                "reverse-media:self@2-9",
                CompetingKind::Media { scheme: "self".into(), reverse: true },
                2.0,
                Some(9.0),
            ),
            ("tcp:cubic@10", CompetingKind::Tcp(TcpCc::Cubic), 10.0, None),
            ("tcp:newreno@5-60.5", CompetingKind::Tcp(TcpCc::NewReno), 5.0, Some(60.5)),
            ("short-tcp@12.5", CompetingKind::ShortTcp, 12.5, None),
            ("audio@20-99", CompetingKind::Audio { reverse: false }, 20.0, Some(99.0)),
            ("reverse-audio", CompetingKind::Audio { reverse: true }, 0.0, None),
            ("tcp:bbr@1-2", CompetingKind::Tcp(TcpCc::Bbr), 1.0, Some(2.0)),
        ] {
            let c = CompetingFlow::parse(spec).unwrap();
            assert_eq!(
                c,
                CompetingFlow {
                    kind,
                    start_s: start,
                    stop_s: stop,
                    access_delay_ms: 0.0,
                    crosses: Crosses::First
                }
            );
            assert_eq!(c.spec(), spec);
        }
    }

    #[test]
    fn a_flow_with_an_access_delay_is_written_as_an_object() {
        let c: CompetingFlow =
            serde_json::from_str(r#"{"spec": "media:self@1", "access_delay_ms": 40}"#).unwrap();
        assert_eq!(c.access_delay_ms, 40.0);
        assert_eq!(c.start_s, 1.0);
        let back = serde_json::to_string(&c).unwrap();
        assert_eq!(back, r#"{"spec":"media:self@1","access_delay_ms":40.0}"#);
        let second: CompetingFlow =
            serde_json::from_str(r#"{"spec": "media:self", "crosses": "second"}"#).unwrap();
        assert_eq!((second.crosses, second.access_delay_ms), (Crosses::Second, 0.0));
        assert_eq!(
            serde_json::to_string(&second).unwrap(),
            r#"{"spec":"media:self","access_delay_ms":0.0,"crosses":"second"}"#
        );
        // Errors name a value as a config writes it.
        for c in [Crosses::First, Crosses::Second, Crosses::Both] {
            assert_eq!(serde_json::to_string(&c).unwrap(), format!("\"{}\"", c.name()));
        }
        let plain: CompetingFlow = serde_json::from_str(r#""tcp:cubic""#).unwrap();
        assert_eq!(serde_json::to_string(&plain).unwrap(), r#""tcp:cubic""#);
        // Each error says what is wrong with the object, not that it matches neither form.
        for (bad, says) in [
            (r#"{"spec": "tcp:vegas"}"#, "unknown TCP congestion control 'vegas'"),
            (r#"{"spec": "tcp:cubic", "delay": 3}"#, "unknown field `delay`, expected one of"),
            (r#"{"spec": "tcp:cubic", "crosses": "third"}"#, "unknown variant `third`"),
            (r#"{"access_delay_ms": 3}"#, "missing field `spec`"),
            ("5", "a competing-flow spec (media:SCHEME"),
        ] {
            let e = serde_json::from_str::<CompetingFlow>(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for (spec, says) in [
            ("tcp:vegas", "unknown TCP congestion control 'vegas'"),
            ("udp:x", "expected media:SCHEME"),
            ("media:", "expected media:SCHEME"),
            ("reverse-media:", "expected media:SCHEME"),
            ("tcp:cubic@x", "start 'x' is not a number"),
            ("tcp:cubic@1e-3-x", "stop 'x' is not a number"),
            ("tcp:cubic@-3", "start must be a finite number of seconds >= 0, got -3"),
            ("tcp:cubic@5-2", "stop (2 s) must be after start (5 s)"),
            ("tcp:cubic@inf", "start must be a finite number"),
            ("short-tcp@3-9", "start time only"),
            ("short-tcp:cubic", "expected media:SCHEME"),
        ] {
            let e = CompetingFlow::parse(spec).unwrap_err();
            assert!(e.contains(says), "{spec}: {e}");
        }
    }
}
