//! The live endpoints in virtual time: sender, relay and receiver exchange real RTP/RTCP
//! bytes, stepped to the earliest timeout as the simulator steps its nodes (no sockets, no
//! clock). Checks the wire path end to end, deterministically, against the simulator.

use sluice_core::encoder::InlineEncoder;
use sluice_core::link::trace::Trace;
use sluice_core::metrics::Recorder;
use sluice_core::session::{build_encoder, build_links, build_receiver, build_sender, RunConfig};
use sluice_core::sim::Simulation;
use sluice_core::units::{DataRate, TimeDelta, Timestamp};
use sluice_live::endpoint::{
    Endpoint, Faults, ReceiverEndpoint, RelayEndpoint, Role, SenderEndpoint,
};
use std::sync::Arc;

fn config() -> RunConfig {
    let mut cfg = RunConfig {
        scheme_name: "webrtc".into(),
        duration_s: 10.0,
        drain_s: 1.0,
        ..RunConfig::default()
    };
    cfg.downlink.queue_bytes = Some(100_000);
    cfg
}

/// Runs the three endpoints in virtual time; returns the recorder's frames.
fn run_endpoints(
    cfg: &RunConfig,
    trace: Arc<Trace>,
) -> (Vec<sluice_core::metrics::FrameRecord>, u64) {
    let scheme = cfg.resolve_scheme().unwrap();
    let (down, up) = build_links(cfg, &scheme, Some(trace.clone()), None);
    let relay = RelayEndpoint::new(
        down,
        up,
        cfg.faults.clone(),
        Faults::default(),
        cfg.seed,
        Some(trace),
        None,
    );
    let (frames, malformed, _, _) = run_with_relay(cfg, relay, None);
    (frames, malformed)
}

/// [`run_endpoints`] with a given relay (and the link snapshot it shares with the sender,
/// if any); also returns the relay and the sender's samples.
#[allow(clippy::type_complexity)]
fn run_with_relay(
    cfg: &RunConfig,
    mut relay: RelayEndpoint,
    link: Option<sluice_live::endpoint::SharedLink>,
) -> (Vec<sluice_core::metrics::FrameRecord>, u64, RelayEndpoint, Vec<sluice_core::metrics::Sample>)
{
    let scheme = cfg.resolve_scheme().unwrap();
    let now = Timestamp::ZERO;
    let capture_end = now + TimeDelta::from_secs_f64(cfg.duration_s);
    let end = capture_end + TimeDelta::from_secs_f64(cfg.drain_s);
    let enc = Box::new(InlineEncoder::new(build_encoder(cfg).unwrap()));
    let mut tx = SenderEndpoint::new(
        build_sender(cfg, &scheme, enc, now),
        TimeDelta::from_ms(20),
        capture_end,
        link,
        now,
    );
    let mut rx = ReceiverEndpoint::new(build_receiver(cfg, &scheme, now));
    let mut t = now;
    let mut malformed = 0;
    while t <= end {
        // Settle: timers, then move datagrams until nothing more happens at `t`.
        for _ in 0..100_000 {
            let mut moved = false;
            for ep in [&mut tx as &mut dyn Endpoint, &mut relay, &mut rx] {
                if ep.poll_timeout() <= t {
                    ep.handle_timeout(t);
                }
            }
            while let Some((to, b)) = tx.poll_transmit(t) {
                assert_eq!(to, Role::Receiver);
                relay.handle_datagram(Role::Sender, &b, t);
                moved = true;
            }
            while let Some((to, b)) = relay.poll_transmit(t) {
                match to {
                    Role::Receiver => rx.handle_datagram(Role::Sender, &b, t),
                    Role::Sender => tx.handle_datagram(Role::Receiver, &b, t),
                    Role::Monitor => unreachable!("the relay has no monitor"),
                }
                moved = true;
            }
            while let Some((_, b)) = rx.poll_transmit(t) {
                relay.handle_datagram(Role::Receiver, &b, t);
                moved = true;
            }
            if !moved {
                break;
            }
        }
        malformed = tx.malformed() + rx.malformed();
        let next = tx.poll_timeout().min(relay.poll_timeout()).min(rx.poll_timeout());
        t = next.max(t + TimeDelta::from_us(1));
    }
    let mut rec = Recorder::default();
    for e in &tx.events {
        rec.on_sender_event(e.clone());
    }
    for e in &rx.events {
        rec.on_receiver_event(e.clone());
    }
    (rec.frames(), malformed, relay, tx.samples.clone())
}

/// A run of `cfg` through the relay of its config (its competing flows, the traces given);
/// the sender's samples read the relay's link state with `link`. No datagram is malformed.
fn run_relay_of(
    cfg: &RunConfig,
    down: &Arc<Trace>,
    up: Option<&Arc<Trace>>,
    link: Option<sluice_live::endpoint::SharedLink>,
) -> (Vec<sluice_core::metrics::FrameRecord>, RelayEndpoint, Vec<sluice_core::metrics::Sample>) {
    let scheme = cfg.resolve_scheme().unwrap();
    let relay = RelayEndpoint::for_run(
        cfg,
        &scheme,
        Some(down.clone()),
        up.cloned(),
        Faults::default(),
        link.clone(),
    )
    .unwrap();
    let (frames, malformed, relay, samples) = run_with_relay(cfg, relay, link);
    assert_eq!(malformed, 0);
    (frames, relay, samples)
}

/// Issue 29's acceptance path (a constant 4 Mbps link, a 60 kB queue, 25 ms one way) for
/// `seconds`, shared with one competing flow.
fn shared_4mbps(seconds: f64, competing: &str) -> (RunConfig, Arc<Trace>) {
    let mut cfg = config();
    cfg.duration_s = seconds;
    cfg.downlink.queue_bytes = Some(60_000);
    cfg.downlink.delay_ms = 25.0;
    cfg.uplink.delay_ms = 25.0;
    cfg.competing = vec![sluice_core::cross::CompetingFlow::parse(competing).unwrap()];
    (cfg, Arc::new(Trace::constant(DataRate::from_mbps(4), TimeDelta::from_secs(1))))
}

/// The same run in the simulator.
fn simulate(
    cfg: &RunConfig,
    down: Arc<Trace>,
    up: Option<Arc<Trace>>,
) -> sluice_core::sim::RunResult {
    Simulation::new(cfg, Some(down), up, build_encoder(cfg).unwrap()).unwrap().run()
}

#[test]
fn endpoints_over_the_wire_match_the_simulator_closely_in_virtual_time() {
    let cfg = config();
    let trace = Arc::new(Trace::constant(DataRate::from_mbps(12), TimeDelta::from_secs(1)));
    let (frames, malformed) = run_endpoints(&cfg, trace.clone());
    assert_eq!(malformed, 0);
    let sim = simulate(&cfg, trace, None);
    let shown = |f: &[sluice_core::metrics::FrameRecord]| {
        f.iter().filter(|f| f.displayed_us.is_some()).count()
    };
    assert_eq!(frames.len(), sim.frames.len());
    assert_eq!(shown(&frames), shown(&sim.frames));
    // The only differences on the wire: arrival times in 250 µs steps (transport-cc) and
    // the feedback's real sizes; GCC's trajectory moves a little, not much.
    let p95 = |f: &[sluice_core::metrics::FrameRecord]| {
        let mut v: Vec<i64> = f.iter().filter_map(|f| f.latency_us).collect();
        v.sort_unstable();
        v[v.len() * 95 / 100] as f64
    };
    let (a, b) = (p95(&frames), p95(&sim.frames));
    eprintln!("P95 over the wire {a} us, simulated {b} us");
    assert!((a / b - 1.0).abs() < 0.05, "P95 {a} us over the wire vs {b} us simulated");
    let bytes = |f: &[sluice_core::metrics::FrameRecord]| {
        f.iter().map(|f| f.size_bytes).sum::<i64>() as f64
    };
    assert!((bytes(&frames) / bytes(&sim.frames) - 1.0).abs() < 0.1);
}

/// The relay carries TCP cross traffic inside its downlink (issue 29): a CUBIC flow from
/// 3 s shares the 4 Mbps bottleneck with the media over the wire, as in the simulator.
#[test]
fn the_relay_carries_tcp_cross_traffic_in_its_bottleneck() {
    let (cfg, trace) = shared_4mbps(30.0, "tcp:cubic@3");
    let (frames, relay, samples) = run_relay_of(&cfg, &trace, None, Some(Arc::default()));
    let table = relay.downlink().flow_stats().expect("per-flow counters");
    let (media, tcp) = (table.get(0), table.get(1));
    // Over 27 s the CUBIC flow delivers megabytes and the two fill the link (13.5 MB).
    assert!(tcp.delivered_bytes > 4_000_000, "{tcp:?}");
    let total = (media.delivered_bytes + tcp.delivered_bytes) as f64;
    assert!(total > 0.85 * 4e6 / 8.0 * 30.0 - 1.5e6, "{total}");
    // CUBIC fills the queue: the media's packets wait about the full 120 ms.
    let q = media.queue_delay_quantile(0.95).unwrap().as_ms();
    assert!((90..=125).contains(&q), "media P95 queueing {q} ms");
    // The same run in the simulator: the media's share of the bytes is alike.
    let sim = simulate(&cfg, trace, None);
    let flows = sim.summary.flows.unwrap();
    let live_share = media.delivered_bytes as f64 / total;
    eprintln!("media share over the wire {live_share:.3}, simulated {:.3}", flows[0].share);
    assert!((live_share - flows[0].share).abs() < 0.1, "{live_share} vs {}", flows[0].share);
    // The relay's summary of the flows says the same as its counters, and has the TCP flow.
    let (summary, _) = relay.flow_summaries().expect("flows with cross traffic");
    assert!((summary[0].share - live_share).abs() < 0.02, "{summary:?} vs {live_share}");
    assert_eq!((summary[1].kind.as_str(), summary[1].scheme.as_str()), ("tcp", "cubic"));
    assert!(frames.iter().any(|f| f.displayed_us.is_some()));
    // The sender's samples carry every flow's rate, as the simulator's; flow 0's is the
    // session's delivered rate (its own bytes, not the link's).
    let col = |s: &sluice_core::metrics::Sample, n: &str| match s.columns.get(n) {
        Some(sluice_core::columns::Value::Int(v)) => *v,
        other => panic!("{n}: {other:?}"),
    };
    let late: Vec<_> = samples.iter().filter(|s| s.t_us > 10_000_000).collect();
    assert!(late.iter().map(|s| col(s, "flow1_rate_bps")).sum::<i64>() > 0);
    for s in &late {
        assert_eq!(col(s, "flow0_rate_bps"), s.delivered_rate_bps);
    }
}

/// A relay whose competing flows cannot be built is an error, not a relay without them (the
/// live entry points check the config first; this is the relay's own guard).
#[test]
fn a_relay_refuses_competing_flows_that_do_not_build() {
    let (mut cfg, trace) = shared_4mbps(10.0, "tcp:cubic");
    cfg.scheme_name = "co-rtv".into();
    let scheme = cfg.resolve_scheme().unwrap();
    let err = RelayEndpoint::for_run(&cfg, &scheme, Some(trace), None, Faults::default(), None)
        .err()
        .expect("a TCP flow cannot share co-rtv's frame-dropping bottleneck");
    assert!(err.0.contains("frame-dropping bottleneck"), "{}", err.0);
}

/// The relay carries a competing media flow inside its downlink too (its sender and
/// receiver run in the relay, as TCP's do): `webrtc` against a second `webrtc` from 5 s on a
/// 4 Mbps link with a 60 kB queue (issue 29's acceptance case, shortened), and the live
/// summary's `flows` and `jain_index` come out as the simulator's do for the same run.
#[test]
fn the_relay_carries_a_competing_media_flow_and_counts_every_flow() {
    let (cfg, trace) = shared_4mbps(40.0, "media:webrtc@5");
    let (frames, relay, _) = run_relay_of(&cfg, &trace, None, None);
    assert!(frames.iter().filter(|f| f.displayed_us.is_some()).count() > 1000);
    let (live, live_jain) = relay.flow_summaries().expect("flows with a competing flow");
    let sim = simulate(&cfg, trace, None);
    let (flows, jain) = (sim.summary.flows.unwrap(), sim.summary.jain_index.unwrap());
    let show = |f: &[sluice_core::metrics::FlowSummary]| {
        f.iter()
            .map(|f| format!("{} {:.2} Mbps {:.3}", f.scheme, f.mean_rate_bps / 1e6, f.share))
            .collect::<Vec<_>>()
    };
    eprintln!(
        "live {:?} jain {live_jain:?}; simulated {:?} jain {jain:.3}",
        show(&live),
        show(&flows)
    );
    assert_eq!(live.len(), 2);
    assert_eq!(
        (live[1].kind.as_str(), live[1].scheme.as_str(), live[1].start_s),
        ("media", "webrtc", 5.0)
    );
    // Both flows send (the competing one is not a stub) and together fill most of the link.
    let total: f64 = live.iter().map(|f| f.mean_rate_bps).sum();
    assert!(live.iter().all(|f| f.mean_rate_bps > 0.5e6), "{:?}", show(&live));
    assert!(total > 0.8 * 4e6, "{total}");
    // Jain's index over 15-40 s, and each flow's share, as the simulator's within noise.
    let live_jain = live_jain.expect("an interval with both flows active");
    assert!((live_jain - jain).abs() < 0.1, "{live_jain} vs {jain}");
    for (l, s) in live.iter().zip(&flows) {
        assert!((l.share - s.share).abs() < 0.1, "{:?} vs {:?}", show(&live), show(&flows));
    }
}

/// The relay carries a reverse media flow too (RFC 8867 §5.3), and its audio: its media shares
/// the relay's uplink with the session's feedback, its feedback the downlink with the
/// session's media;
/// the flows' summary (the reverse flow counted at the uplink) is the simulator's.
#[test]
fn the_relay_carries_a_reverse_media_flow_over_its_uplink() {
    let mut cfg = config();
    cfg.duration_s = 30.0;
    cfg.downlink.queue_bytes = Some(75_000);
    cfg.uplink.queue_bytes = Some(40_000);
    cfg.downlink.delay_ms = 50.0;
    cfg.uplink.delay_ms = 50.0;
    cfg.competing = ["reverse-media:webrtc", "reverse-audio"]
        .iter()
        .map(|s| sluice_core::cross::CompetingFlow::parse(s).unwrap())
        .collect();
    let down = Arc::new(Trace::constant(DataRate::from_mbps(2), TimeDelta::from_secs(1)));
    let up = Arc::new(Trace::constant(DataRate::from_mbps(1), TimeDelta::from_secs(1)));
    let (frames, relay, _) = run_relay_of(&cfg, &down, Some(&up), None);
    assert!(frames.iter().filter(|f| f.displayed_us.is_some()).count() > 700);
    let (live, _) = relay.flow_summaries().expect("flows with a competing flow");
    let sim = simulate(&cfg, down, Some(up));
    let flows = sim.summary.flows.unwrap();
    let rates = |f: &[sluice_core::metrics::FlowSummary]| {
        f.iter().map(|f| (f.kind.clone(), (f.mean_rate_bps / 1e3).round())).collect::<Vec<_>>()
    };
    eprintln!("live {:?}; simulated {:?}", rates(&live), rates(&flows));
    assert_eq!(live[1].kind, "reverse-media");
    // Its audio goes the same way (RFC 8867 §5.3's backward audio): 36 kbps on the uplink.
    assert_eq!(live[2].kind, "reverse-audio");
    assert!((live[2].mean_rate_bps - 36_000.0).abs() < 1_000.0, "{:?}", rates(&live));
    // The backward flow uses its 1 Mbps uplink (its feedback comes back over the downlink),
    // and each flow's rate is the simulator's within 15 %.
    assert!(live[1].mean_rate_bps > 0.5e6, "{:?}", rates(&live));
    let up_table = relay.uplink().flow_stats().expect("per-flow counters on the uplink");
    assert!(up_table.delivered_bytes(1) > 1_500_000);
    for (l, s) in live.iter().zip(&flows) {
        let r = l.mean_rate_bps / s.mean_rate_bps;
        assert!((0.85..1.15).contains(&r), "{:?} vs {:?}", rates(&live), rates(&flows));
    }
}
