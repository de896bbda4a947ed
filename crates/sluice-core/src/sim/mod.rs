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
//! not change. Path faults (`faults`: duplication, reordering, a feedback blackout) add a
//! node between the bottleneck's far end and the receiver, in both directions
//! ([`network::FaultNode`]); the live relay applies the same faults.

pub mod flows;
pub mod network;

use crate::encoder::{Encoder, InlineEncoder};
use crate::link::faults::PathFaults;
use crate::link::trace::Trace;
use crate::link::{DropReason, Link};
use crate::metrics::{self, FrameRecord, LinkTotals, Recorder, Sample, SkipRecord, Summary};
use crate::packet::PacketKind;
use crate::receiver::Receiver;
use crate::sender::Sender;
use crate::session::{
    build_access_links, build_links, build_receiver, build_second_bottleneck, build_sender,
    ConfigError, LinkReading, RunConfig, Sampler,
};
use crate::units::{TimeDelta, Timestamp};
use network::{FaultNode, Network, NodeId, FAULT_DOWN, FAULT_UP, IN, OUT, REPORT};
use std::sync::Arc;

/// Results of a finished run.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// The frame records, one per encode.
    pub frames: Vec<FrameRecord>,
    /// Capture slots never encoded.
    pub skips: Vec<SkipRecord>,
    /// The time series.
    pub samples: Vec<Sample>,
    /// The run summary.
    pub summary: Summary,
    /// Times the receiver asked for a keyframe (not in the summary, whose keys stay fixed).
    pub keyframe_requests: u64,
}

/// A run in virtual time: the session's network of nodes, its recorder and its sampler.
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
    sampler: Sampler,
    capture_end: Timestamp,
    end: Timestamp,
    downlink_trace: Option<Arc<Trace>>,
    /// The uplink's trace when a reverse media flow uses it (its capacity is then sampled
    /// as `uplink_capacity_bps`).
    reverse_uplink_trace: Option<Arc<Trace>>,
    /// The competing flows and their per-flow series (`None`: the media flow alone).
    flows: Option<flows::Flows>,
    /// The path faults' node, if the config has faults.
    faults: Option<NodeId>,
    /// The second bottleneck's node, if the config has one.
    second: Option<NodeId>,
}

impl Simulation {
    /// A simulation of `cfg` over the given traces (`None`: unlimited rate), with `encoder`
    /// (see [`crate::session::topology::build_encoder`] for the config's own).
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
        let reverse_flows = flows::has_reverse_flow(cfg); // media or audio on the uplink
        let reverse_uplink_trace = uplink_trace.clone().filter(|_| reverse_flows);
        let (downlink, uplink) = build_links(cfg, &scheme, downlink_trace.clone(), uplink_trace);
        let bottleneck_drops = scheme.bottleneck.drops_frames();

        let (mut downlink, mut uplink) = (downlink, uplink);
        if !cfg.competing.is_empty() {
            downlink.enable_flow_stats();
        }
        if reverse_flows {
            uplink.enable_flow_stats();
        }
        let mut net = Network::default();
        let tx = net.add("sender", Box::new(sender));
        let down = net.add("downlink", Box::new(downlink));
        let rx = net.add("receiver", Box::new(receiver));
        let up = net.add("uplink", Box::new(uplink));
        // The path faults sit between the bottleneck's far end and the receiver, both ways.
        let faults = (!cfg.faults.is_none()).then(|| {
            let node = FaultNode::new(PathFaults::new(cfg.faults.clone(), cfg.seed));
            net.add("path-faults", Box::new(node))
        });
        let (to_rx, to_rx_port) = faults.map_or((rx, IN), |f| (f, FAULT_DOWN));
        if let Some(f) = faults {
            net.connect(f, FAULT_DOWN, rx, IN);
            net.connect(rx, OUT, f, FAULT_UP);
            net.connect(f, FAULT_UP, up, IN);
        } else {
            net.connect(rx, OUT, up, IN);
        }
        // With reverse media on the uplink its far end sorts too: flow 0's feedback on to
        // the sender (port 0), a reverse flow's media to its receiver.
        let (up_out, up_out_port) = if reverse_flows {
            let d = net.add("uplink-demux", Box::new(network::Demux::default()));
            net.connect(up, OUT, d, IN);
            (d, 0)
        } else {
            (up, OUT)
        };
        // A second bottleneck (RFC 8867 §6.3) sits between the downlink and the receiver.
        let second = build_second_bottleneck(cfg).map(|mut link| {
            if !cfg.competing.is_empty() {
                link.enable_flow_stats();
            }
            net.add("second-bottleneck", Box::new(link))
        });
        let (after_down, after_down_port) = second.map_or((to_rx, to_rx_port), |b| (b, IN));
        let flows = if cfg.competing.is_empty() {
            net.connect(down, OUT, after_down, after_down_port);
            if let Some(b) = second {
                net.connect(b, OUT, to_rx, to_rx_port);
            }
            None
        } else {
            // The bottleneck's far end sorts datagrams by flow: flow 0 on to the session's
            // receiver (or the second bottleneck), each competing flow to its own; so does
            // the second bottleneck's.
            let demux = net.add("demux", Box::new(network::Demux::default()));
            net.connect(down, OUT, demux, IN);
            net.connect(demux, 0, after_down, after_down_port);
            let second = second.map(|b| {
                let d = net.add("second-demux", Box::new(network::Demux::default()));
                net.connect(b, OUT, d, IN);
                net.connect(d, 0, to_rx, to_rx_port);
                (b, d)
            });
            let attach = flows::Attach {
                downlink: down,
                demux,
                uplink: up,
                up_demux: reverse_flows.then_some(up_out),
                second,
            };
            Some(flows::Flows::build(cfg, &mut net, attach)?)
        };
        if let Some((access, report_path)) = build_access_links(cfg) {
            let a = net.add("access", Box::new(access));
            net.connect(tx, OUT, a, IN);
            net.connect(a, OUT, down, IN);
            // The way back: the bottleneck's reports, and the receiver's feedback after the
            // uplink (receiver to bottleneck) crossed it too.
            let back = net.add("bottleneck-report-path", Box::new(report_path));
            net.connect(down, REPORT, back, IN);
            net.connect(up_out, up_out_port, back, IN);
            net.connect(back, OUT, tx, IN);
        } else {
            net.connect(up_out, up_out_port, tx, IN);
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
            sampler: Sampler::new(sample_interval, now, capture_end),
            capture_end,
            end: capture_end + TimeDelta::from_secs_f64(cfg.drain_s),
            downlink_trace,
            reverse_uplink_trace,
            flows,
            faults,
            second,
        })
    }

    /// The current virtual time.
    pub fn now(&self) -> Timestamp {
        self.now
    }
    /// When the run ends: the end of capture plus the drain.
    pub fn end(&self) -> Timestamp {
        self.end
    }
    /// Whether virtual time has reached the end of the run.
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
        let interval = self.sampler.interval();
        // The nodes through the network alone, so the sampler can be borrowed beside them.
        let network = &self.network;
        let down = network.get::<Link>(self.downlink).expect("a link node is a Link");
        let sender = network.get::<Sender>(self.sender).expect("the sender node is a Sender");
        let stats = down.stats();
        let capacity_bps = match &self.downlink_trace {
            Some(t) => (t.capacity_between(now - interval, now) / interval).as_bps(),
            None => 0,
        };
        // With competing flows the media flow's keys stay its own (flow 0 at the bottleneck).
        let flow0 = down.flow_stats().filter(|_| flows.is_some());
        let link = LinkReading {
            capacity_bps,
            delivered_bytes: flow0.map_or(stats.delivered_bytes, |t| t.delivered_bytes(0)),
            queue_bytes: down.queue_bytes().as_bytes(),
            queue_packets: down.queue_packets() as u64,
            queue_delay_us: down.last_queue_delay().as_us(),
            lost_packets: flow0.map_or(stats.dropped_packets(), |t| t.dropped_packets(0)),
        };
        let sent = self.recorder.sent_bytes_total;
        let tables = flows
            .as_ref()
            .and_then(|_| flow_tables(network, self.downlink, self.uplink, self.second));
        let up_capacity = self
            .reverse_uplink_trace
            .as_ref()
            .map(|t| t.capacity_between(now - interval, now) / interval);
        let sample = self.sampler.take(now, sender, sent, link, |columns| {
            down.debug_columns(columns);
            if let Some(c) = up_capacity {
                columns.rate("uplink_capacity_bps", Some(c));
            }
            if let (Some(f), Some(t)) = (&mut flows, tables) {
                f.sample(now, interval, t, Some(columns));
            }
        });
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
            if self.now >= self.sampler.poll_timeout() && self.now <= self.capture_end {
                self.take_sample();
            }
            // No samples after the end of capture (the drain only lets frames arrive).
            let next = self.sampler.poll_timeout().min(self.network.poll_timeout());
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
            delivered_bytes: self.sampler.delivered_bytes(),
            capacity_bytes,
        };
        let table = self.link(self.downlink).flow_stats();
        if let (Some(_), Some(table)) = (&self.flows, table) {
            // The media flow's own packets (its drops count as the link's do without
            // competing flows: a frame-dropping bottleneck's policy drops among them, only
            // the media flow's are dropped by it).
            let f0 = table.get(0);
            totals.arrived_packets = f0.arrived_packets;
            totals.dropped_packets = f0.dropped_packets;
        }
        // The media flow's drops at a second bottleneck are its losses too.
        if let Some(b) = self.second {
            let link = self.link(b);
            totals.dropped_packets += match link.flow_stats() {
                Some(t) => t.get(0).dropped_packets,
                None => link.stats().dropped_packets(),
            };
        }
        let tables = flow_tables(&self.network, self.downlink, self.uplink, self.second);
        let flow_summaries = match (&self.flows, tables) {
            (Some(f), Some(t)) => Some(f.summarize(t, sampled_until)),
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
        summary.path_faults =
            self.faults.and_then(|f| self.network.get::<FaultNode>(f)).map(FaultNode::stats);
        RunResult {
            frames,
            skips,
            samples: self.samples,
            summary,
            keyframe_requests: self.recorder.keyframe_requests,
        }
    }
}

/// The per-flow tables of the links whose bytes count (`None` without competing flows: the
/// downlink keeps none).
fn flow_tables(
    network: &Network,
    downlink: NodeId,
    uplink: NodeId,
    second: Option<NodeId>,
) -> Option<flows::Tables<'_>> {
    let table = |id: NodeId| network.get::<Link>(id).and_then(Link::flow_stats);
    Some(flows::Tables {
        down: table(downlink)?,
        up: table(uplink),
        second: second.and_then(table),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cross::CompetingFlow;
    use crate::link::trace_gen::{generate, TraceSpec};
    use crate::session::{build_encoder, PathConfig, QueueDisciplineKind, SecondBottleneck};

    /// 8 s, 20 ms one way, a 60 kB drop-tail queue.
    fn eight_seconds() -> RunConfig {
        RunConfig {
            duration_s: 8.0,
            downlink: PathConfig {
                delay_ms: 20.0,
                queue_bytes: Some(60_000),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// The whole run's records as text, to compare runs exactly.
    fn run(cfg: &RunConfig, round_after_any_output: bool) -> String {
        let spec = |s: &str| TraceSpec::parse_cli(s).unwrap();
        let len = TimeDelta::from_secs_f64(cfg.duration_s + 5.0);
        let down = Arc::new(generate(&spec("steps:6@3,1.5@2,4@3"), len).unwrap());
        let up = Arc::new(generate(&spec("constant:3"), len).unwrap());
        let encoder = build_encoder(cfg).unwrap();
        let mut sim = Simulation::new(cfg, Some(down), Some(up), encoder).unwrap();
        sim.network.round_after_any_output = round_after_any_output;
        let r = sim.run();
        let json = |v: serde_json::Result<String>| v.unwrap();
        [
            json(serde_json::to_string(&r.frames)),
            json(serde_json::to_string(&r.skips)),
            json(serde_json::to_string(&r.samples)),
            json(serde_json::to_string(&r.summary)),
        ]
        .join("\n")
    }

    #[test]
    fn settling_in_one_round_where_it_can_changes_no_run() {
        // Every kind of node and edge the topologies build: pacers of each kind (leaky
        // bucket, ACE-N's tokens, Vidaptive's window and dummy packets), a frame-dropping
        // bottleneck with its report path, competing flows of every kind (reverse ones on the
        // uplink), faults, a second bottleneck, FQ-CoDel.
        let flows = |specs: &[&str]| -> Vec<CompetingFlow> {
            specs.iter().map(|s| CompetingFlow::parse(s).unwrap()).collect()
        };
        let base = eight_seconds();
        let mut cases = Vec::new();
        for scheme in ["webrtc", "ace-n", "vidaptive", "copa", "always-burst", "co-rtv"] {
            cases.push(RunConfig { scheme_name: scheme.into(), ..base.clone() });
        }
        let mut c = RunConfig { scheme_name: "webrtc".into(), ..base.clone() };
        c.competing = flows(&[
            "tcp:cubic@1",
            "media:copa@2-6",
            "audio",
            "reverse-media:webrtc@1",
            "short-tcp@3",
            "reverse-audio",
        ]);
        c.faults.duplicate = 0.02;
        c.faults.reorder = 0.02;
        c.faults.feedback_blackout_s = Some((4.0, 5.0));
        cases.push(c);
        let mut c = RunConfig { scheme_name: "vidaptive".into(), ..base.clone() };
        c.competing = flows(&["media:self", "tcp:bbr@2"]);
        c.downlink.queue_discipline = QueueDisciplineKind::FqCodel;
        cases.push(c);
        let mut c = RunConfig { scheme_name: "ace-n".into(), ..base.clone() };
        c.second_bottleneck =
            Some(SecondBottleneck { rate_mbps: 2.0, queue_bytes: Some(30_000), delay_ms: 5.0 });
        let mut second = CompetingFlow::parse("media:webrtc@1").unwrap();
        second.crosses = crate::cross::Crosses::Second;
        c.competing = vec![second, CompetingFlow::parse("tcp:newreno@2").unwrap()];
        cases.push(c);
        let mut c = RunConfig { scheme_name: "co-rtv".into(), ..base.clone() };
        c.competing = flows(&["audio"]);
        cases.push(c);
        cases.push(RunConfig { scheme: Some(task_queue_webrtc()), ..base.clone() });
        // Copa's window holds the task queue's pacer back and releases it.
        let mut copa = crate::scheme::lookup("copa").unwrap().config;
        if let crate::pacer::PacerConfig::LeakyBucket(c) = &mut copa.pacer {
            c.hold_back_window_ms = 5.0;
        }
        cases.push(RunConfig { scheme_name: "copa".into(), scheme: Some(copa), ..base.clone() });
        for cfg in &cases {
            let (fast, every) = (run(cfg, false), run(cfg, true));
            assert!(fast.len() > 1000, "{}: a run with records", cfg.scheme_name);
            assert!(
                fast == every,
                "{} {:?}: settling changed the run",
                cfg.scheme_name,
                cfg.competing.iter().map(|f| f.spec()).collect::<Vec<_>>()
            );
        }
    }

    /// `webrtc` with libwebrtc's task-queue hold-back window (5 ms).
    fn task_queue_webrtc() -> crate::scheme::SchemeConfig {
        let mut config = crate::scheme::lookup("webrtc").unwrap().config;
        match &mut config.pacer {
            crate::pacer::PacerConfig::LeakyBucket(c) => c.hold_back_window_ms = 5.0,
            other => panic!("webrtc's pacer is {other:?}"),
        }
        config
    }

    /// Under the task queue's runs `webrtc` carries a whole run: every frame shown, the link
    /// used (a kick lost would leave the pacer's queue waiting for a run that never comes).
    /// Its rate is not the per-packet pacer's: GCC's trajectory differs (docs/schemes.md).
    #[test]
    fn the_task_queue_pacer_carries_the_run() {
        let cfg = RunConfig {
            scheme_name: "webrtc".into(),
            scheme: Some(task_queue_webrtc()),
            ..eight_seconds()
        };
        let len = TimeDelta::from_secs_f64(cfg.duration_s + 5.0);
        let trace =
            |mbps| Some(Arc::new(generate(&TraceSpec::Constant { rate_mbps: mbps }, len).unwrap()));
        let encoder = build_encoder(&cfg).unwrap();
        let r = Simulation::new(&cfg, trace(4.0), trace(3.0), encoder).unwrap().run();
        assert!(r.summary.frames_displayed >= 228, "{} of 240 shown", r.summary.frames_displayed);
        assert!(r.summary.video_bitrate_bps > 1.5e6, "{}", r.summary.video_bitrate_bps);
    }
}
