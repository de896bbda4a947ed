//! Competing flows in a simulated session (issue 29): the nodes of each flow that shares
//! the bottleneck with the session's media flow, their per-flow time series, and their part
//! of the summary (`flows`, `jain_index`).
//!
//! ```text
//! sender (flow 0) ----+                                  +--> receiver (flow 0) -> uplink -> sender
//! media sender i -----+--> downlink (bottleneck) --> demux --> media receiver i -> uplink i -> sender i
//! TCP sender j -------+                                  +--> TCP receiver j -> ACK path j -> sender j
//! (bulk or short)     |                                  |
//! audio sender k -----+                                  +--> audio receiver k (no feedback)
//! ```
//!
//! Every competing flow has its own return path with the uplink's delay and loss (not its
//! trace: the feedback paths do not share a bottleneck) and its own access delay, if it is
//! given one. With a `second_bottleneck` (RFC 8867 §6.3) a second link and demultiplexer
//! sit between the first demultiplexer and the session's receiver; a competing flow crosses
//! the first, the second or both (`crosses`) and counts at the last it crosses. A reverse
//! media flow (`reverse-media:SCHEME`, RFC 8867 §5.3) runs the other way: its sender feeds
//! the session's uplink, where its media queues with flow 0's feedback (a demultiplexer at
//! the uplink's far end sorts them), and its receiver's feedback crosses the bottleneck with
//! the forward media; its rate, share and queueing delay are the uplink's (so are a
//! `reverse-audio` flow's, which has no feedback). A competing
//! media flow runs the model encoder (the session's model settings, its own seed) whatever
//! the session's encoder. Flow ids: 0 is the session's media flow, competing flow `k` (from
//! 0, in the order given) is `k + 1`.

use super::network::{Network, NodeId, Port, Scheduled, IN, OUT};
use super::RunConfig;
use crate::columns::Columns;
use crate::cross::audio::{AudioConfig, AudioReceiver, AudioSender};
use crate::cross::short_tcp::{ShortTcpConfig, ShortTcpSender};
use crate::cross::tcp::{TcpReceiver, TcpSender};
use crate::cross::{CompetingKind, Crosses, SPEC_GRAMMAR};
use crate::encoder::InlineEncoder;
use crate::link::flow_stats::FlowStatsTable;
use crate::link::{Link, LinkConfig};
use crate::metrics::FlowSummary;
use crate::packet::FlowId;
use crate::receiver::Receiver;
use crate::rng::Rng;
use crate::sender::Sender;
use crate::session::{
    build_encoder, build_flow_receiver, build_flow_sender, ConfigError, EncoderConfig,
};
use crate::units::{DataSize, TimeDelta, Timestamp};

/// `media:self`: a competing media flow of the session's own scheme (its composition too:
/// a custom scheme or a plan's variant), for suites that run every scheme against itself.
pub const SELF: &str = "self";

/// The most competing flows a session takes (flow ids are the demultiplexer's ports).
pub const MAX_COMPETING: usize = 64;
/// Jain's index leaves out this much after the last flow started (issue 29: "after a 10 s
/// warm-up").
pub const JAIN_WARMUP: TimeDelta = TimeDelta::from_secs(10);

/// The checks on `cfg.competing` (called by [`RunConfig::validate`]).
pub(crate) fn validate_competing(cfg: &RunConfig) -> Result<(), String> {
    if cfg.competing.is_empty() {
        return Ok(());
    }
    if cfg.competing.len() > MAX_COMPETING {
        return Err(format!(
            "at most {MAX_COMPETING} competing flows, got {}",
            cfg.competing.len()
        ));
    }
    let main = cfg.resolve_scheme().map_err(|e| e.0)?;
    // A frame-dropping bottleneck (Co-RTV) drops only its own flow's frames and drains the
    // whole queue at the link's rate: a constant audio flow can share it (RFC 8867's cases
    // run one beside the video); flows that adapt to it cannot (its node is one flow's).
    if let Some(c) = cfg.competing.iter().find(|c| !matches!(c.kind, CompetingKind::Audio { .. })) {
        if main.bottleneck.drops_frames() {
            return Err(format!(
                "competing flow '{}': competing flows other than audio cannot share the \
                 frame-dropping bottleneck of scheme '{}'",
                c.spec(),
                cfg.scheme_name
            ));
        }
    }
    for c in &cfg.competing {
        let spec = c.spec();
        if !c.crosses.is_first() {
            if cfg.second_bottleneck.is_none() {
                return Err(format!(
                    "competing flow '{spec}' crosses '{}': the session has no second_bottleneck",
                    c.crosses.name()
                ));
            }
            if c.is_reverse() {
                return Err(format!(
                    "competing flow '{spec}': a reverse flow crosses the uplink only"
                ));
            }
        }
        crate::check_range(
            &format!("competing flow '{spec}': access_delay_ms"),
            c.access_delay_ms,
            0.0,
            false,
            crate::limits::MAX_DELAY_MS,
        )?;
        if c.start_s >= cfg.duration_s {
            return Err(format!(
                "competing flow '{spec}' starts at {} s, not before the end of the session \
                 ({} s)",
                c.start_s, cfg.duration_s
            ));
        }
        if let CompetingKind::Media { scheme, .. } = &c.kind {
            let config = if scheme == SELF {
                main.clone()
            } else {
                let Some(info) = crate::scheme::lookup(scheme) else {
                    let names: Vec<&str> =
                        crate::scheme::registry().iter().map(|s| s.name).collect();
                    return Err(format!(
                        "competing flow '{spec}': unknown scheme '{scheme}' (known: {}, or \
                         self; specs: {SPEC_GRAMMAR})",
                        names.join(", ")
                    ));
                };
                info.config
            };
            let b = &config.bottleneck;
            if b.reports() || b.drops_frames() || b.header_extension() > DataSize::ZERO {
                let name = if scheme == SELF { cfg.scheme_name.as_str() } else { scheme };
                return Err(format!(
                    "competing flow '{spec}': scheme '{name}' needs its own bottleneck \
                     behaviour, which a competing flow cannot have"
                ));
            }
        }
    }
    Ok(())
}

/// A competing flow's return path: the uplink's delay (plus its own access delay) and loss,
/// not its trace (the feedback paths do not share a bottleneck).
fn return_path(cfg: &RunConfig, c: &crate::cross::CompetingFlow, flow: FlowId) -> Link {
    let mut back = Link::new(
        LinkConfig {
            delay: TimeDelta::from_ms_f64(cfg.uplink.delay_ms + c.access_delay_ms),
            loss_rate: cfg.uplink.loss,
            ..LinkConfig::default()
        },
        Rng::fork(cfg.seed, &format!("competing-{flow}-uplink")),
    );
    back.set_drop_log(false);
    back
}

/// Connects a competing flow's sender to the bottleneck (`to`): directly, or through a
/// delay line of its own access delay.
fn connect_to_bottleneck(
    net: &mut Network,
    sender: NodeId,
    to: NodeId,
    access_delay_ms: f64,
    seed: u64,
    flow: FlowId,
) {
    if access_delay_ms <= 0.0 {
        net.connect(sender, OUT, to, IN);
        return;
    }
    let mut access = Link::new(
        LinkConfig { delay: TimeDelta::from_ms_f64(access_delay_ms), ..LinkConfig::default() },
        Rng::fork(seed, &format!("competing-{flow}-access")),
    );
    access.set_drop_log(false);
    let a = net.add("competing-access", Box::new(access));
    net.connect(sender, OUT, a, IN);
    net.connect(a, OUT, to, IN);
}

/// When competing flow `c` starts, and stops (`None`: it runs to the end).
fn span(c: &crate::cross::CompetingFlow) -> (Timestamp, Option<Timestamp>) {
    let at = |s: f64| Timestamp::ZERO + TimeDelta::from_secs_f64(s);
    (at(c.start_s), c.stop_s.map(at))
}

/// The name of a competing flow's return path node.
fn return_path_name(kind: &CompetingKind) -> &'static str {
    match kind {
        CompetingKind::Media { .. } => "competing-uplink",
        _ => "tcp-ack-path",
    }
}

/// The sender and receiver of competing media flow `c` (id `flow`), each active from its
/// start to its stop: the flow's scheme (the session's composition for `self`), its own
/// seed, the model encoder.
fn media_flow(
    cfg: &RunConfig,
    c: &crate::cross::CompetingFlow,
    flow: FlowId,
) -> Result<(Scheduled<Sender>, Scheduled<Receiver>), ConfigError> {
    let CompetingKind::Media { scheme, .. } = &c.kind else {
        return Err(ConfigError(format!("competing flow '{}' is not a media flow", c.spec())));
    };
    let capture_end = Timestamp::ZERO + TimeDelta::from_secs_f64(cfg.duration_s);
    let (start, stop) = span(c);
    let until = stop.unwrap_or(Timestamp::INFINITY);
    let mut fc = cfg.clone();
    if scheme != SELF {
        // `self` keeps the session's scheme, its composition included.
        fc.scheme_name = scheme.clone();
        fc.scheme = None;
    }
    fc.competing = Vec::new();
    fc.seed = Rng::fork(cfg.seed, &format!("competing-{flow}")).next_u64();
    fc.duration_s = (until.min(capture_end) - start).as_secs_f64();
    if let EncoderConfig::X264(_) = fc.encoder {
        fc.encoder = EncoderConfig::default();
    }
    let scheme_cfg = fc.resolve_scheme()?;
    let encoder = build_encoder(&fc)?;
    let sender =
        build_flow_sender(&fc, &scheme_cfg, Box::new(InlineEncoder::new(encoder)), start, flow);
    let receiver = build_flow_receiver(&fc, &scheme_cfg, start, flow);
    Ok((Scheduled::new(sender, start, until), Scheduled::new(receiver, start, until)))
}

/// Adds the sender and receiver of TCP flow `c` (bulk or short, id `flow`) to `net`.
fn tcp_flow(
    cfg: &RunConfig,
    c: &crate::cross::CompetingFlow,
    flow: FlowId,
    net: &mut Network,
) -> (NodeId, NodeId) {
    let (start, stop) = span(c);
    let s = match &c.kind {
        CompetingKind::Tcp(cc) => net.add(
            "tcp-sender",
            Box::new(TcpSender::new(flow, *cc, start, stop.unwrap_or(Timestamp::INFINITY))),
        ),
        _ => net.add(
            "short-tcp-sender",
            Box::new(ShortTcpSender::new(
                flow,
                ShortTcpConfig::default(),
                Rng::fork(cfg.seed, &format!("competing-{flow}-short-tcp")),
                start,
                Timestamp::ZERO + TimeDelta::from_secs_f64(cfg.duration_s),
            )),
        ),
    };
    (s, net.add("tcp-receiver", Box::new(TcpReceiver::new(flow))))
}

/// Adds the sender and receiver of audio flow `c` (id `flow`) to `net` (no return path:
/// a CBR codec takes no feedback).
fn audio_flow(
    c: &crate::cross::CompetingFlow,
    flow: FlowId,
    net: &mut Network,
) -> (NodeId, NodeId) {
    let (start, stop) = span(c);
    let until = stop.unwrap_or(Timestamp::INFINITY);
    let s = net.add(
        "audio-sender",
        Box::new(AudioSender::new(flow, AudioConfig::default(), start, until)),
    );
    (s, net.add("audio-receiver", Box::new(AudioReceiver)))
}

/// Drops what competing media flows' senders and receivers recorded (their frames are not
/// the session's).
fn drain_media_events(net: &mut Network, media: &[(NodeId, NodeId)]) {
    for &(sender, receiver) in media {
        if let Some(s) = net.get_mut_for_events::<Scheduled<Sender>>(sender) {
            while s.inner.poll_event().is_some() {}
        }
        if let Some(r) = net.get_mut_for_events::<Scheduled<Receiver>>(receiver) {
            while r.inner.poll_event().is_some() {}
        }
    }
}

#[derive(Clone, Debug)]
struct FlowEntry {
    flow: FlowId,
    kind: &'static str,
    scheme: String,
    /// The link whose bytes of it count (its rate, share, queueing and loss): the last
    /// bottleneck it crosses, the uplink for a reverse media flow.
    at: At,
    /// The other links it crosses, whose bytes of it count toward their flows' shares
    /// (flow 0 and `crosses = "both"` flows at the downlink when there is a second
    /// bottleneck).
    also: Option<At>,
    start: Timestamp,
    stop: Option<Timestamp>,
    access_delay_ms: f64,
}

/// The flows of a session with competing traffic and their delivered bytes over time.
#[derive(Debug)]
pub struct Flows {
    entries: Vec<FlowEntry>,
    /// The sender and receiver of each competing media flow (their events are drained).
    media_nodes: Vec<(NodeId, NodeId)>,
    capture_end: Timestamp,
    /// Sample times, and each flow's bytes delivered by the bottleneck up to each (at its
    /// `at`, and at its `also`).
    times: Vec<Timestamp>,
    delivered: Vec<Vec<i64>>,
    delivered_also: Vec<Vec<i64>>,
    last: Vec<i64>,
}

/// A link whose per-flow bytes count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum At {
    Down,
    Up,
    Second,
}

/// Where the competing flows attach: the downlink and the demultiplexer at its far end,
/// the uplink and its demultiplexer (with a reverse media flow), the second bottleneck and
/// its demultiplexer (with one).
pub(super) struct Attach {
    pub downlink: NodeId,
    pub demux: NodeId,
    pub uplink: NodeId,
    pub up_demux: Option<NodeId>,
    pub second: Option<(NodeId, NodeId)>,
}

impl Flows {
    /// The flows of `cfg` without their nodes: who they are, when they run and which link's
    /// bytes of them count (the simulator adds the nodes in [`Flows::build`], the live relay
    /// counts the flows it carries with it, [`CrossTraffic`]).
    pub(super) fn describe(cfg: &RunConfig) -> Flows {
        let second = cfg.second_bottleneck.is_some();
        let capture_end = Timestamp::ZERO + TimeDelta::from_secs_f64(cfg.duration_s);
        let mut entries = vec![FlowEntry {
            flow: 0,
            kind: "media",
            scheme: cfg.scheme_name.clone(),
            at: if second { At::Second } else { At::Down },
            also: second.then_some(At::Down),
            start: Timestamp::ZERO,
            stop: None,
            access_delay_ms: cfg.downlink.access_delay_ms,
        }];
        for (k, c) in cfg.competing.iter().enumerate() {
            let (start, stop) = span(c);
            // Validated: `second` and `both` only with a second bottleneck, a reverse media
            // flow crosses neither.
            let (at, also) = match (&c.kind, c.crosses, second) {
                _ if c.is_reverse() => (At::Up, None),
                (_, Crosses::Second, true) => (At::Second, None),
                (_, Crosses::Both, true) => (At::Second, Some(At::Down)),
                _ => (At::Down, None),
            };
            entries.push(FlowEntry {
                flow: (k + 1) as FlowId,
                kind: c.kind_name(),
                scheme: match &c.kind {
                    CompetingKind::Media { scheme, .. } if scheme == SELF => {
                        cfg.scheme_name.clone()
                    }
                    _ => c.scheme_name(),
                },
                at,
                also,
                start,
                stop,
                access_delay_ms: c.access_delay_ms,
            });
        }
        let n = entries.len();
        Flows {
            entries,
            media_nodes: Vec::new(),
            capture_end,
            times: Vec::new(),
            delivered: vec![Vec::new(); n],
            delivered_also: vec![Vec::new(); n],
            last: vec![0; n],
        }
    }

    /// Adds the competing flows of `cfg` to `net`: their senders feed the downlink (or the
    /// second bottleneck, by `crosses`), the demultiplexer at the far end of the last one
    /// they cross hands each its datagrams (port = flow id); a reverse media flow's sender
    /// feeds the uplink, whose demultiplexer hands its receiver the media (`Some` when `cfg`
    /// has a reverse flow, [`has_reverse_flow`]).
    pub(super) fn build(
        cfg: &RunConfig,
        net: &mut Network,
        a: Attach,
    ) -> Result<Flows, ConfigError> {
        let Attach { downlink, demux, uplink, up_demux, second } = a;
        let mut flows = Flows::describe(cfg);
        for (k, c) in cfg.competing.iter().enumerate() {
            let flow = (k + 1) as FlowId;
            let port = flow as Port;
            // The bottleneck it enters and the demultiplexer it leaves by (validated:
            // `second` and `both` only with a second bottleneck).
            let (enter, exit) = match (c.crosses, second) {
                (Crosses::Second, Some((b2, d2))) => (b2, d2),
                (Crosses::Both, Some((b2, d2))) => {
                    net.connect(demux, port, b2, IN);
                    (downlink, d2)
                }
                _ => (downlink, demux),
            };
            let (s, r) = match &c.kind {
                CompetingKind::Media { reverse, .. } => {
                    let (sender, receiver) = media_flow(cfg, c, flow)?;
                    let s = net.add("competing-sender", Box::new(sender));
                    let r = net.add("competing-receiver", Box::new(receiver));
                    flows.media_nodes.push((s, r));
                    if let (true, Some(up_demux)) = (reverse, up_demux) {
                        connect_to_bottleneck(net, s, uplink, c.access_delay_ms, cfg.seed, flow);
                        net.connect(up_demux, port, r, IN);
                        net.connect(r, OUT, downlink, IN);
                        net.connect(demux, port, s, IN);
                        continue;
                    }
                    (s, r)
                }
                CompetingKind::Audio { reverse } => {
                    let (s, r) = audio_flow(c, flow, net);
                    match (reverse, up_demux) {
                        (true, Some(up_demux)) => {
                            connect_to_bottleneck(
                                net,
                                s,
                                uplink,
                                c.access_delay_ms,
                                cfg.seed,
                                flow,
                            );
                            net.connect(up_demux, port, r, IN);
                        }
                        _ => {
                            connect_to_bottleneck(net, s, enter, c.access_delay_ms, cfg.seed, flow);
                            net.connect(exit, port, r, IN);
                        }
                    }
                    continue;
                }
                _ => tcp_flow(cfg, c, flow, net),
            };
            let name = return_path_name(&c.kind);
            let back = net.add(name, Box::new(return_path(cfg, c, flow)));
            connect_to_bottleneck(net, s, enter, c.access_delay_ms, cfg.seed, flow);
            net.connect(exit, port, r, IN);
            net.connect(r, OUT, back, IN);
            net.connect(back, OUT, s, IN);
        }
        Ok(flows)
    }

    /// Drops what the competing media flows' senders and receivers recorded (their frames
    /// are not the session's).
    pub(super) fn drain_events(&self, net: &mut Network) {
        drain_media_events(net, &self.media_nodes);
    }

    /// Records every flow's delivered bytes at `now` and writes each flow's rate over the
    /// last `interval` as the column `flow<ID>_rate_bps` (into `columns`, if given).
    pub(super) fn sample(
        &mut self,
        now: Timestamp,
        interval: TimeDelta,
        tables: Tables<'_>,
        mut columns: Option<&mut Columns>,
    ) {
        self.times.push(now);
        for (i, e) in self.entries.iter().enumerate() {
            let d = tables.of(e.at).map_or(0, |t| t.delivered_bytes(e.flow));
            if let Some(at) = e.also {
                let also = tables.of(at).map_or(0, |t| t.delivered_bytes(e.flow));
                self.delivered_also[i].push(also);
            }
            if let Some(columns) = columns.as_deref_mut() {
                let rate = DataSize::from_bytes(d - self.last[i]) / interval;
                columns.rate(format!("flow{}_rate_bps", e.flow), Some(rate));
            }
            self.last[i] = d;
            self.delivered[i].push(d);
        }
    }

    /// Bytes of flow `i` delivered by the last sample at or before `t` (at its `at`).
    fn delivered_at(&self, i: usize, t: Timestamp) -> i64 {
        self.delivered_by(i, self.entries[i].at, t)
    }

    /// Bytes of flow `i` that `link` delivered by the last sample at or before `t` (its
    /// `at` or its `also`; 0 at a link it does not cross).
    fn delivered_by(&self, i: usize, link: At, t: Timestamp) -> i64 {
        let n = self.times.partition_point(|&x| x <= t);
        let e = &self.entries[i];
        let series = if e.at == link {
            &self.delivered[i]
        } else if e.also == Some(link) {
            &self.delivered_also[i]
        } else {
            return 0;
        };
        if n == 0 {
            0
        } else {
            series[n - 1]
        }
    }

    /// Bytes of every flow that `link` delivered by the last sample at or before `t`.
    fn link_total_at(&self, link: At, t: Timestamp) -> i64 {
        let n = self.times.partition_point(|&x| x <= t);
        if n == 0 {
            return 0;
        }
        let mut total = 0;
        for (i, e) in self.entries.iter().enumerate() {
            if e.at == link {
                total += self.delivered[i][n - 1];
            }
            if e.also == Some(link) {
                total += self.delivered_also[i][n - 1];
            }
        }
        total
    }

    /// Flow `i`'s rate through `link` from `t0` to `t1`, bits per second.
    fn rate_between(&self, i: usize, link: At, t0: Timestamp, t1: Timestamp) -> f64 {
        if t1 <= t0 {
            return 0.0;
        }
        let bytes = self.delivered_by(i, link, t1) - self.delivered_by(i, link, t0);
        bytes as f64 * 8.0 / (t1 - t0).as_secs_f64()
    }

    /// Every flow's summary, and Jain's index over the interval in which all flows are
    /// active (from [`JAIN_WARMUP`] after the last start to the first stop or the end of
    /// capture; short TCP flows, audio flows and flows not on the link the index is of left
    /// out; `None` if that interval is empty or fewer than two flows are left). Rates and
    /// shares cover the sampled part of the session (up to `sampled_until`).
    pub(super) fn summarize(
        &self,
        tables: Tables<'_>,
        sampled_until: Timestamp,
    ) -> (Vec<FlowSummary>, Option<f64>) {
        // Shares of what the flow's own link delivered.
        let flows = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let end = e.stop.unwrap_or(Timestamp::INFINITY).min(sampled_until);
                let stats = tables.of(e.at).map(|t| t.get(e.flow)).unwrap_or_default();
                let total = self.link_total_at(e.at, sampled_until);
                FlowSummary {
                    flow: e.flow,
                    kind: e.kind.to_owned(),
                    scheme: e.scheme.clone(),
                    start_s: e.start.as_secs_f64(),
                    stop_s: e.stop.map(|t| t.as_secs_f64()),
                    access_delay_ms: e.access_delay_ms,
                    mean_rate_bps: self.rate_between(i, e.at, e.start, end),
                    share: if total > 0 {
                        self.delivered_at(i, sampled_until) as f64 / total as f64
                    } else {
                        0.0
                    },
                    queue_delay_ms_p95: stats.queue_delay_quantile(0.95).map(|d| d.as_ms_f64()),
                    loss_rate: stats.loss_rate(),
                }
            })
            .collect();
        // Short TCP flows are on and off with a finite demand, audio flows have a fixed one:
        // not part of the index. Nor is a flow that does not cross the link the index is of
        // (a reverse media flow's uplink): rates at two links are not shares of one. With a
        // second bottleneck the session crosses both: the index is of the flows on the
        // second, or on the first if no competing flow crosses the second.
        let session = &self.entries[0];
        let on = |link: At| -> Vec<usize> {
            (0..self.entries.len())
                .filter(|&i| {
                    let e = &self.entries[i];
                    !matches!(e.kind, "short-tcp" | "audio")
                        && (e.at == link || e.also == Some(link))
                })
                .collect()
        };
        let (mut link, mut long) = (session.at, on(session.at));
        if long.len() < 2 {
            if let Some(first) = session.also {
                (link, long) = (first, on(first));
            }
        }
        let last_start =
            long.iter().map(|&i| self.entries[i].start).max().unwrap_or(Timestamp::ZERO);
        let first_stop = long
            .iter()
            .filter_map(|&i| self.entries[i].stop)
            .min()
            .unwrap_or(self.capture_end)
            .min(self.capture_end)
            .min(sampled_until);
        let t0 = last_start + JAIN_WARMUP;
        let jain = if first_stop > t0 && long.len() >= 2 {
            let rates: Vec<f64> =
                long.iter().map(|&i| self.rate_between(i, link, t0, first_stop)).collect();
            jain_index(&rates)
        } else {
            None
        };
        (flows, jain)
    }
}

/// Whether `cfg` has a reverse flow (its session's uplink then carries media or audio).
pub fn has_reverse_flow(cfg: &RunConfig) -> bool {
    cfg.competing.iter().any(|c| c.is_reverse())
}

/// The per-flow tables of the bottleneck and, with a reverse media flow, of the uplink,
/// with a second bottleneck, of it.
#[derive(Clone, Copy)]
pub(super) struct Tables<'a> {
    pub down: &'a FlowStatsTable,
    pub up: Option<&'a FlowStatsTable>,
    pub second: Option<&'a FlowStatsTable>,
}

impl<'a> Tables<'a> {
    fn of(&self, at: At) -> Option<&'a FlowStatsTable> {
        match at {
            At::Down => Some(self.down),
            At::Up => self.up,
            At::Second => self.second,
        }
    }
}

/// Jain's fairness index `(sum x)^2 / (n sum x^2)` (Jain, Chiu and Hawe, 1984): 1 when all
/// rates are equal, 1/n when one flow has everything; `None` for no flows or all zero.
pub fn jain_index(rates: &[f64]) -> Option<f64> {
    let n = rates.len() as f64;
    let sum: f64 = rates.iter().sum();
    let sum_sq: f64 = rates.iter().map(|x| x * x).sum();
    if rates.is_empty() || sum_sq <= 0.0 {
        None
    } else {
        Some(sum * sum / (n * sum_sq))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_index_is_one_for_equal_rates_and_one_over_n_for_a_hog() {
        assert_eq!(jain_index(&[2.0, 2.0, 2.0]), Some(1.0));
        assert!((jain_index(&[5.0, 0.0, 0.0, 0.0]).unwrap() - 0.25).abs() < 1e-12);
        // Two flows at 3 and 1: 16 / (2 * 10).
        assert!((jain_index(&[3.0, 1.0]).unwrap() - 0.8).abs() < 1e-12);
        assert_eq!(jain_index(&[]), None);
        assert_eq!(jain_index(&[0.0, 0.0]), None);
    }
}

/// What cross traffic sends toward the bottleneck, collected for the caller.
#[derive(Debug, Default)]
struct Outbox(std::collections::VecDeque<crate::packet::Datagram>);

impl super::network::Node for Outbox {
    fn handle_input(&mut self, _: Port, d: crate::packet::Datagram, _: Timestamp) {
        self.0.push_back(d);
    }
    fn handle_timeout(&mut self, _: Timestamp) {}
    fn poll_output(&mut self, _: Timestamp) -> Option<(Port, crate::packet::Datagram)> {
        None
    }
    fn poll_timeout(&self) -> Timestamp {
        Timestamp::INFINITY
    }
}

/// The competing flows of a run (media both ways, bulk and short TCP, audio) as one sans-IO
/// state machine around bottlenecks it does not own: the live relay carries them inside its
/// downlink and uplink (issue 29: "in live mode the relay carries the same cross traffic
/// inside its bottleneck"). Each flow has the simulator's sender, receiver and return path
/// (the uplink's delay and loss): a media flow runs its scheme's sender and receiver with the
/// model encoder, as in the simulator, but inside the relay, driven by its clock. What they
/// send toward the downlink comes out of [`Self::poll_transmit`], toward the uplink (a
/// reverse media flow's media, RFC 8867 §5.3) out of [`Self::poll_transmit_up`]; what either
/// link delivers of their flows goes in with [`Self::deliver`]: media to the flow's receiver,
/// feedback (a reverse flow's, back over the downlink) to its sender. Flow ids are the
/// simulator's (competing flow `k` is `k + 1`). It also keeps the per-flow series the
/// simulator keeps ([`Self::sample`]), so a live run's summary has the same `flows` and
/// `jain_index` ([`Self::summarize`]).
pub struct CrossTraffic {
    net: Network,
    /// What the flows send toward the downlink, and toward the uplink.
    outbox: NodeId,
    up_outbox: NodeId,
    /// The sender and receiver of each flow, by flow id.
    endpoints: std::collections::BTreeMap<FlowId, (NodeId, NodeId)>,
    /// The sender and receiver of each media flow (their events are drained).
    media: Vec<(NodeId, NodeId)>,
    /// Every flow's delivered bytes over time, the session's own (flow 0) first.
    flows: Flows,
    sample_interval: TimeDelta,
    next_sample: Timestamp,
}

impl CrossTraffic {
    /// The competing flows of `cfg` (`None` without any); `Err` for flows the config's own
    /// checks refuse ([`RunConfig::validate`]) or a media flow that does not build. The relay
    /// carries every kind; a second bottleneck, which it cannot carry, its caller refuses.
    pub fn for_run(cfg: &RunConfig) -> Result<Option<CrossTraffic>, ConfigError> {
        validate_competing(cfg).map_err(ConfigError)?;
        if cfg.competing.is_empty() {
            return Ok(None);
        }
        let mut net = Network::default();
        let outbox = net.add("cross-outbox", Box::new(Outbox::default()));
        let up_outbox = net.add("cross-up-outbox", Box::new(Outbox::default()));
        let mut endpoints = std::collections::BTreeMap::new();
        let mut media = Vec::new();
        for (k, c) in cfg.competing.iter().enumerate() {
            let flow = (k + 1) as FlowId;
            let (s, r) = match &c.kind {
                CompetingKind::Media { reverse, .. } => {
                    let (sender, receiver) = media_flow(cfg, c, flow)?;
                    let s = net.add("competing-sender", Box::new(sender));
                    let r = net.add("competing-receiver", Box::new(receiver));
                    media.push((s, r));
                    endpoints.insert(flow, (s, r));
                    if *reverse {
                        // Its media over the uplink, its feedback over the downlink.
                        connect_to_bottleneck(
                            &mut net,
                            s,
                            up_outbox,
                            c.access_delay_ms,
                            cfg.seed,
                            flow,
                        );
                        net.connect(r, OUT, outbox, IN);
                        continue;
                    }
                    (s, r)
                }
                CompetingKind::Audio { reverse } => {
                    let (s, r) = audio_flow(c, flow, &mut net);
                    let to = if *reverse { up_outbox } else { outbox };
                    connect_to_bottleneck(&mut net, s, to, c.access_delay_ms, cfg.seed, flow);
                    endpoints.insert(flow, (s, r));
                    continue;
                }
                _ => tcp_flow(cfg, c, flow, &mut net),
            };
            let back = net.add(return_path_name(&c.kind), Box::new(return_path(cfg, c, flow)));
            connect_to_bottleneck(&mut net, s, outbox, c.access_delay_ms, cfg.seed, flow);
            net.connect(r, OUT, back, IN);
            net.connect(back, OUT, s, IN);
            endpoints.insert(flow, (s, r));
        }
        let sample_interval = TimeDelta::from_ms_f64(cfg.sample_interval_ms);
        Ok(Some(CrossTraffic {
            net,
            outbox,
            up_outbox,
            endpoints,
            media,
            flows: Flows::describe(cfg),
            sample_interval,
            next_sample: Timestamp::ZERO + sample_interval,
        }))
    }

    /// Runs the flows' timers due at `now`.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        assert!(self.net.settle(now, 1_000_000), "cross traffic livelock at {now:?}");
        drain_media_events(&mut self.net, &self.media);
    }

    /// A datagram of a competing flow that a link delivered at `now`: media to the flow's
    /// receiver, feedback to its sender (others are ignored).
    pub fn deliver(&mut self, d: crate::packet::Datagram, now: Timestamp) {
        let Some(&(s, r)) = self.endpoints.get(&d.flow()) else { return };
        let to = match d {
            crate::packet::Datagram::Media(_) => r,
            crate::packet::Datagram::Feedback(_) => s,
        };
        self.net.handle_input(to, IN, d, now);
        self.handle_timeout(now);
    }

    /// Whether `flow` is one of these flows.
    pub fn carries(&self, flow: FlowId) -> bool {
        self.endpoints.contains_key(&flow)
    }

    /// Whether a flow sends over the uplink (a reverse media flow): its per-flow counters
    /// are then needed there too.
    pub fn uses_uplink(&self) -> bool {
        self.flows.entries.iter().any(|e| e.at == At::Up)
    }

    /// The next datagram for the downlink.
    pub fn poll_transmit(&mut self, now: Timestamp) -> Option<crate::packet::Datagram> {
        self.handle_timeout(now);
        self.net.get_mut_for_events::<Outbox>(self.outbox)?.0.pop_front()
    }

    /// The next datagram for the uplink (a reverse media flow's media).
    pub fn poll_transmit_up(&mut self, now: Timestamp) -> Option<crate::packet::Datagram> {
        self.handle_timeout(now);
        self.net.get_mut_for_events::<Outbox>(self.up_outbox)?.0.pop_front()
    }

    /// When the flows next have something to do (a flow's timer, or the next sample).
    pub fn poll_timeout(&self) -> Timestamp {
        self.net.poll_timeout().min(self.next_sample)
    }

    /// When the per-flow series takes its next sample ([`Self::sample`]): every
    /// `sample_interval_ms` up to the end of capture, as the simulator samples.
    pub fn next_sample(&self) -> Timestamp {
        self.next_sample
    }

    /// Every flow's bytes delivered so far, by flow id, the session's own (0) first: at the
    /// link that carries its media (`down`: the downlink's per-flow counters, `up`: the
    /// uplink's, with a reverse flow).
    pub fn delivered_bytes(
        &self,
        down: &FlowStatsTable,
        up: Option<&FlowStatsTable>,
    ) -> Vec<(FlowId, i64)> {
        let tables = Tables { down, up, second: None };
        self.flows
            .entries
            .iter()
            .map(|e| (e.flow, tables.of(e.at).map_or(0, |t| t.delivered_bytes(e.flow))))
            .collect()
    }

    /// Records every flow's bytes that the links (their per-flow counters, as for
    /// [`Self::delivered_bytes`]) delivered by `now`, if a sample is due.
    pub fn sample(&mut self, now: Timestamp, down: &FlowStatsTable, up: Option<&FlowStatsTable>) {
        if now < self.next_sample {
            return;
        }
        let tables = Tables { down, up, second: None };
        self.flows.sample(now, self.sample_interval, tables, None);
        while self.next_sample <= now {
            self.next_sample += self.sample_interval;
        }
        if self.next_sample > self.flows.capture_end {
            self.next_sample = Timestamp::INFINITY;
        }
    }

    /// Every flow's summary and Jain's index, as the simulator's summary has them (`flows`,
    /// `jain_index`), from the samples taken.
    pub fn summarize(
        &self,
        down: &FlowStatsTable,
        up: Option<&FlowStatsTable>,
    ) -> (Vec<FlowSummary>, Option<f64>) {
        let until = self.flows.times.last().copied().unwrap_or(Timestamp::ZERO);
        self.flows.summarize(Tables { down, up, second: None }, until)
    }
}
