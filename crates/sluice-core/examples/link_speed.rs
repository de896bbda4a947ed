//! Benchmark of the link emulator alone: a 30 Mbps trace link with a 100 kB drop-tail queue,
//! 1 % loss and 25 ms delay, offered 33 Mbps of 1200 B packets for 120 s of virtual time.
//! Prints one JSON object (`make bench` reads it): packets, wall seconds (best of three) and
//! simulated seconds per wall second.

use sluice_core::link::trace_gen::{generate, TraceSpec};
use sluice_core::link::{Link, LinkConfig, LinkRate, QueueLimit};
use sluice_core::packet::{Datagram, Packet};
use sluice_core::rng::Rng;
use sluice_core::units::{DataSize, TimeDelta, Timestamp};
use std::sync::Arc;
use std::time::Instant;

// A benchmark of the core, outside it: measuring wall time is its purpose.
#[allow(clippy::disallowed_methods)]
fn run_once() -> (u64, f64) {
    let seconds = 120;
    let trace =
        match generate(&TraceSpec::Constant { rate_mbps: 30.0 }, TimeDelta::from_secs(seconds)) {
            Ok(t) => Arc::new(t),
            Err(e) => {
                eprintln!("link_speed: {e}");
                std::process::exit(2);
            }
        };
    let config = LinkConfig {
        rate: LinkRate::Trace(trace),
        queue: QueueLimit::Bytes(100_000),
        delay: TimeDelta::from_ms(25),
        loss_rate: 0.01,
    };
    let mut link = Link::new(config, Rng::new(3));
    link.set_drop_log(false);
    let end = Timestamp::from_ms(seconds * 1000);
    let started = Instant::now();
    let (mut sent, mut next_send) = (0_u64, Timestamp::ZERO);
    loop {
        let now = link.poll_timeout().min(next_send);
        if now > end {
            break;
        }
        if now == next_send {
            let p = Packet::padding(DataSize::from_bytes(1200), now);
            link.handle_datagram(Datagram::Media(p), now);
            sent += 1;
            next_send = now + TimeDelta::from_us(291);
        } else {
            link.handle_timeout(now);
        }
        while link.poll_datagram(now).is_some() {}
    }
    (sent, started.elapsed().as_secs_f64())
}

fn main() {
    let runs: Vec<(u64, f64)> = (0..3).map(|_| run_once()).collect();
    let best = runs.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
    let report = serde_json::json!({
        "name": "link_speed/30mbps/120s",
        "unit": "simulated seconds per wall second",
        "value": (120.0 / best * 10.0).round() / 10.0,
        "packets": runs[0].0,
        "wall_s_best": best,
    });
    println!("{report}");
}
