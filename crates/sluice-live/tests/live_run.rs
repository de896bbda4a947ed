//! Live runs on loopback: the three endpoints over real UDP, short (a few seconds each).

use sluice_core::link::trace::Trace;
use sluice_core::sim::{build_encoder, RunConfig};
use sluice_core::units::{DataRate, TimeDelta};
use sluice_live::session::{LiveOptions, LiveResult, LiveRun};
use std::sync::Arc;

fn run(
    scheme: &str,
    duration_s: f64,
    options: LiveOptions,
    edit: impl FnOnce(&mut RunConfig),
) -> LiveResult {
    let mut cfg =
        RunConfig { scheme_name: scheme.into(), duration_s, drain_s: 1.0, ..RunConfig::default() };
    cfg.downlink.queue_bytes = Some(100_000);
    edit(&mut cfg);
    let trace = Arc::new(Trace::constant(DataRate::from_mbps(12), TimeDelta::from_secs(1)));
    let enc = build_encoder(&cfg).unwrap();
    LiveRun::start(&cfg, Some(trace), None, enc, &options).unwrap().finish().unwrap()
}

fn displayed_share(r: &LiveResult) -> f64 {
    let shown = r.run.frames.iter().filter(|f| f.displayed_us.is_some()).count();
    shown as f64 / (r.run.frames.len() + r.run.skips.len()).max(1) as f64
}

#[test]
fn webrtc_on_a_constant_link_displays_nearly_every_frame() {
    let r = run("webrtc", 4.0, LiveOptions::default(), |_| {});
    eprintln!("{:?}\n{:?}", r.run.summary, r.stats);
    for s in r.run.samples.iter().filter(|s| s.t_us > 900_000 && s.t_us < 1_300_000) {
        eprintln!("C {} {}", s.t_us / 1000, serde_json::to_string(&s.columns).unwrap());
    }
    for s in r.run.samples.iter().step_by(10) {
        eprintln!(
            "t {} tgt {} pace {:?} infl {} cwnd {:?} pq {} rtt {:?} q {} send {}",
            s.t_us / 1000,
            s.target_rate_bps / 1000,
            s.pacing_rate_bps.map(|x| x / 1000),
            s.in_flight_bytes,
            s.cwnd_bytes,
            s.pacer_queue_bytes,
            s.rtt_us.map(|x| x / 1000),
            s.queue_bytes,
            s.send_rate_bps / 1000
        );
    }
    assert!(r.run.frames.len() >= 110, "{} frames", r.run.frames.len());
    assert!(displayed_share(&r) >= 0.95, "{}", displayed_share(&r));
    assert_eq!(r.stats.sender_malformed + r.stats.receiver_malformed, 0);
    assert!(r.stats.feedback_messages > 40);
}

#[test]
#[ignore]
fn print_sim_for_comparison() {
    let mut cfg = RunConfig {
        scheme_name: "webrtc".into(),
        duration_s: 4.0,
        drain_s: 1.0,
        ..RunConfig::default()
    };
    cfg.downlink.queue_bytes = Some(100_000);
    let trace = Arc::new(Trace::constant(DataRate::from_mbps(12), TimeDelta::from_secs(1)));
    let enc = build_encoder(&cfg).unwrap();
    let r = sluice_core::sim::Simulation::new(&cfg, Some(trace), None, enc).unwrap().run();
    eprintln!("{:?}", r.summary);
    for s in r.samples.iter().step_by(10) {
        eprintln!(
            "t {} tgt {} pace {:?} infl {} cwnd {:?} pq {} rtt {:?} q {} send {}",
            s.t_us / 1000,
            s.target_rate_bps / 1000,
            s.pacing_rate_bps.map(|x| x / 1000),
            s.in_flight_bytes,
            s.cwnd_bytes,
            s.pacer_queue_bytes,
            s.rtt_us.map(|x| x / 1000),
            s.queue_bytes,
            s.send_rate_bps / 1000
        );
    }
}
