//! Prints a run's time series at a coarse step, for debugging controllers without the
//! Python front end:
//! `cargo run --release -p sluice-core --example inspect -- webrtc constant:12 20 [queue_bytes]`
//! (the trace is a generator spec or a Mahimahi file)
//!
//! Every debug column the scheme's controller and pacer publish is printed after the fixed
//! ones, so a new controller needs no change here.

use sluice_core::columns::Value;
use sluice_core::link::trace::Trace;
use sluice_core::link::trace_gen::{generate, TraceSpec};
use sluice_core::session::{build_encoder, PathConfig, RunConfig};
use sluice_core::sim::Simulation;
use sluice_core::units::TimeDelta;
use std::process::exit;
use std::sync::Arc;

fn usage(why: &str) -> ! {
    eprintln!("inspect: {why}");
    eprintln!("usage: inspect SCHEME TRACE_SPEC|MAHIMAHI_FILE SECONDS [QUEUE_BYTES] [STEP_MS]");
    exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        usage("missing arguments");
    }
    let seconds: f64 = args[3].parse().unwrap_or_else(|_| usage("SECONDS must be a number"));
    let queue_bytes = args.get(4).and_then(|s| s.parse().ok()).filter(|&b: &i64| b > 0);
    let step_ms: i64 = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(500).max(1);
    // A Mahimahi file, or a generator spec ("constant:12", "steps:0@0.45,9@60", ...).
    let trace = if std::path::Path::new(&args[2]).is_file() {
        let text = std::fs::read_to_string(&args[2])
            .unwrap_or_else(|e| usage(&format!("{}: {e}", args[2])));
        Trace::parse_mahimahi(&text, &args[2]).unwrap_or_else(|e| usage(&format!("{e}")))
    } else {
        let spec = TraceSpec::parse_cli(&args[2]).unwrap_or_else(|e| usage(&e));
        generate(&spec, TimeDelta::from_secs_f64(seconds + 5.0))
            .unwrap_or_else(|e| usage(&format!("trace: {e}")))
    };
    let cfg = RunConfig {
        scheme_name: args[1].clone(),
        duration_s: seconds,
        downlink: PathConfig { queue_bytes, delay_ms: 20.0, ..Default::default() },
        ..Default::default()
    };
    let encoder = build_encoder(&cfg).unwrap_or_else(|e| usage(&e.to_string()));
    let sim = Simulation::new(&cfg, Some(Arc::new(trace)), None, encoder)
        .unwrap_or_else(|e| usage(&e.to_string()));
    let r = sim.run();
    let debug: Vec<&str> = r.samples.first().map_or(vec![], |s| s.columns.names().collect());
    print!("   t_s  cap_mbps target_mbps sent_mbps deliv_mbps queue_ms pacer_ms rtt_ms lost");
    for name in &debug {
        print!(" {name}");
    }
    println!();
    let every = (step_ms * 1000 / (cfg.sample_interval_ms * 1000.0) as i64).max(1) as usize;
    for s in r.samples.iter().step_by(every) {
        print!(
            "{:6.2} {:9.2} {:11.2} {:9.2} {:10.2} {:8.1} {:8.1} {:6.1} {:4}",
            s.t_us as f64 / 1e6,
            s.link_capacity_bps as f64 / 1e6,
            s.target_rate_bps as f64 / 1e6,
            s.send_rate_bps as f64 / 1e6,
            s.delivered_rate_bps as f64 / 1e6,
            s.queue_delay_us as f64 / 1e3,
            s.pacer_delay_us as f64 / 1e3,
            s.rtt_us.unwrap_or(0) as f64 / 1e3,
            s.lost_packets,
        );
        for name in &debug {
            match s.columns.get(name) {
                Some(Value::Int(v)) => print!(" {v}"),
                Some(Value::Float(v)) => print!(" {v:.3}"),
                Some(Value::Bool(v)) => print!(" {v}"),
                Some(Value::Text(v)) => print!(" {v}"),
                Some(Value::Null) | None => print!(" -"),
            }
        }
        println!();
    }
    match serde_json::to_string_pretty(&r.summary) {
        Ok(json) => println!("{json}"),
        Err(e) => eprintln!("inspect: summary: {e}"),
    }
}
