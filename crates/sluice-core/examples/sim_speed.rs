//! Benchmark of the whole simulator without the Python front end:
//! `sim_speed SCHEME RATE_MBPS SECONDS [REPEATS] [HOLD_BACK_MS]` runs the scheme with the model
//! encoder on a constant link (20 ms one way, 300 kB drop-tail queue) and prints one JSON
//! object: simulated seconds per wall second (best of the repeats) and the frames sent.
//! HOLD_BACK_MS runs a libwebrtc pacer under its task queue's hold-back window
//! (`pacer.hold_back_window_ms`).

use sluice_core::link::trace_gen::{generate, TraceSpec};
use sluice_core::session::{build_encoder, PathConfig, RunConfig};
use sluice_core::sim::Simulation;
use sluice_core::units::TimeDelta;
use std::sync::Arc;
use std::time::Instant;

// A benchmark of the core, outside it: measuring wall time is its purpose.
#[allow(clippy::disallowed_methods)]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: sim_speed SCHEME RATE_MBPS SECONDS [REPEATS] [HOLD_BACK_MS]");
        std::process::exit(2);
    }
    let scheme = args[1].clone();
    let (rate, seconds): (f64, f64) = match (args[2].parse(), args[3].parse()) {
        (Ok(r), Ok(s)) => (r, s),
        _ => {
            eprintln!("sim_speed: RATE_MBPS and SECONDS are numbers");
            std::process::exit(2);
        }
    };
    let repeats: usize = args.get(4).and_then(|r| r.parse().ok()).unwrap_or(3);
    let trace = match generate(
        &TraceSpec::Constant { rate_mbps: rate },
        TimeDelta::from_secs_f64(seconds + 5.0),
    ) {
        Ok(t) => Arc::new(t),
        Err(e) => {
            eprintln!("sim_speed: {e}");
            std::process::exit(2);
        }
    };
    let mut scheme_config = None;
    if let Some(ms) = args.get(5) {
        let (Ok(ms), Some(info)) = (ms.parse::<f64>(), sluice_core::scheme::lookup(&scheme)) else {
            eprintln!("sim_speed: HOLD_BACK_MS is a number, SCHEME a registered scheme");
            std::process::exit(2);
        };
        let mut config = info.config;
        match &mut config.pacer {
            sluice_core::pacer::PacerConfig::LeakyBucket(c) => c.hold_back_window_ms = ms,
            _ => {
                eprintln!("sim_speed: {scheme} has no libwebrtc pacer");
                std::process::exit(2);
            }
        }
        scheme_config = Some(config);
    }
    let cfg = RunConfig {
        scheme_name: scheme.clone(),
        scheme: scheme_config,
        duration_s: seconds,
        downlink: PathConfig { delay_ms: 20.0, queue_bytes: Some(300_000), ..Default::default() },
        ..Default::default()
    };
    let mut best = f64::INFINITY;
    let mut frames = 0;
    for _ in 0..repeats {
        let encoder = match build_encoder(&cfg) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("sim_speed: {e}");
                std::process::exit(2);
            }
        };
        let sim = match Simulation::new(&cfg, Some(trace.clone()), None, encoder) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("sim_speed: {e}");
                std::process::exit(2);
            }
        };
        let t0 = Instant::now();
        let r = sim.run();
        best = best.min(t0.elapsed().as_secs_f64());
        frames = r.frames.len();
    }
    println!(
        "{{\"scheme\": \"{scheme}\", \"rate_mbps\": {rate}, \"seconds\": {seconds}, \
         \"speed\": {:.1}, \"wall_s_best\": {best:.4}, \"frames\": {frames}}}",
        seconds / best
    );
}
