//! `cargo run --release -p sluice-live --example pacing_bench -- RATE_MBPS SECONDS`: the live
//! runtime's pacing send-time error (see `sluice_live::bench`), one JSON object on stdout.

use sluice_core::units::{DataRate, TimeDelta};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (rate, secs) =
        match (args.get(1).map(|a| a.parse::<f64>()), args.get(2).map(|a| a.parse::<f64>())) {
            (Some(Ok(r)), Some(Ok(s))) if r > 0.0 && s > 0.0 => (r, s),
            _ => {
                eprintln!("usage: pacing_bench RATE_MBPS SECONDS");
                std::process::exit(2);
            }
        };
    match sluice_live::bench::pacing_benchmark(
        DataRate::from_bps_f64(rate * 1e6),
        TimeDelta::from_secs_f64(secs),
    ) {
        Ok(mut r) => {
            r.io.send_error.counts.clear(); // the quantiles are in the report
            println!("{}", serde_json::to_string(&r).expect("a report serialises"));
        }
        Err(e) => {
            eprintln!("pacing_bench: {e}");
            std::process::exit(1);
        }
    }
}
