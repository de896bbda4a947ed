//! Prints a run's time series at a coarse step, for debugging controllers without the
//! Python front end:
//! `cargo run --release -p sluice-core --example inspect -- webrtc constant:12 20 [queue_bytes]`

use sluice_core::link::trace_gen::{generate, TraceSpec};
use sluice_core::sim::{build_encoder, PathConfig, RunConfig, Simulation};
use sluice_core::units::TimeDelta;
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: inspect SCHEME TRACE_SPEC SECONDS [QUEUE_BYTES] [STEP_MS]");
        std::process::exit(2);
    }
    let seconds: f64 = args[3].parse().expect("seconds");
    let queue_bytes = args.get(4).and_then(|s| s.parse().ok()).filter(|&b: &i64| b > 0);
    let step_ms: i64 = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(500);
    let spec = TraceSpec::parse_cli(&args[2]).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let trace = Arc::new(generate(&spec, TimeDelta::from_secs_f64(seconds + 5.0)).expect("trace"));
    let cfg = RunConfig {
        scheme_name: args[1].clone(),
        duration_s: seconds,
        downlink: PathConfig { queue_bytes, delay_ms: 20.0, ..Default::default() },
        ..Default::default()
    };
    let sim = Simulation::new(&cfg, Some(trace), None, build_encoder(&cfg).expect("model encoder"))
        .unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        });
    let r = sim.run();
    println!("   t_s  cap_mbps target_mbps sent_mbps deliv_mbps queue_ms pacer_ms rtt_ms lost  trend   thr acked_mbps cap_est usage");
    let every = (step_ms * 1000 / (cfg.sample_interval_ms * 1000.0) as i64).max(1) as usize;
    for s in r.samples.iter().step_by(every) {
        println!(
            "{:6.2} {:9.2} {:11.2} {:9.2} {:10.2} {:8.1} {:8.1} {:6.1} {:4} {:6.2} {:5.1} {:9.2} {:7.2} {:?}",
            s.t_us as f64 / 1e6,
            s.link_capacity_bps as f64 / 1e6,
            s.target_rate_bps as f64 / 1e6,
            s.send_rate_bps as f64 / 1e6,
            s.delivered_rate_bps as f64 / 1e6,
            s.queue_delay_us as f64 / 1e3,
            s.pacer_delay_us as f64 / 1e3,
            s.rtt_us.unwrap_or(0) as f64 / 1e3,
            s.lost_packets,
            s.cc_modified_trend.unwrap_or(f64::NAN),
            s.cc_threshold.unwrap_or(f64::NAN),
            s.cc_acknowledged_rate_bps.unwrap_or(0) as f64 / 1e6,
            s.cc_link_capacity_bps.unwrap_or(0) as f64 / 1e6,
            s.cc_usage,
        );
    }
    println!("{}", serde_json::to_string_pretty(&r.summary).unwrap());
}
