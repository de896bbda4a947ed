//! The live endpoints in virtual time: sender, relay and receiver exchange real RTP/RTCP
//! bytes, stepped to the earliest timeout as the simulator steps its nodes (no sockets, no
//! clock). Checks the wire path end to end, deterministically, against the simulator.

use sluice_core::encoder::InlineEncoder;
use sluice_core::link::trace::Trace;
use sluice_core::metrics::Recorder;
use sluice_core::sim::{
    build_encoder, build_links, build_receiver, build_sender, RunConfig, Simulation,
};
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
    let now = Timestamp::ZERO;
    let capture_end = now + TimeDelta::from_secs_f64(cfg.duration_s);
    let end = capture_end + TimeDelta::from_secs_f64(cfg.drain_s);
    let enc = Box::new(InlineEncoder::new(build_encoder(cfg).unwrap()));
    let mut tx = SenderEndpoint::new(
        build_sender(cfg, &scheme, enc, now),
        TimeDelta::from_ms(20),
        capture_end,
        None,
        now,
    );
    let mut rx = ReceiverEndpoint::new(build_receiver(cfg, &scheme, now));
    let (down, up) = build_links(cfg, &scheme, Some(trace.clone()), None);
    let mut relay = RelayEndpoint::new(down, up, Faults::default(), cfg.seed, Some(trace), None);
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
    (rec.frames(), malformed)
}

#[test]
fn endpoints_over_the_wire_match_the_simulator_closely_in_virtual_time() {
    let cfg = config();
    let trace = Arc::new(Trace::constant(DataRate::from_mbps(12), TimeDelta::from_secs(1)));
    let (frames, malformed) = run_endpoints(&cfg, trace.clone());
    assert_eq!(malformed, 0);
    let sim = Simulation::new(&cfg, Some(trace), None, build_encoder(&cfg).unwrap()).unwrap().run();
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
