//! Vidaptive (NINeS '26) scenarios on the model encoder: 25 ms one way (the paper's §5.1),
//! unlimited queue unless said otherwise.

use sluice_core::link::trace_gen::{generate, TraceSpec};
use sluice_core::metrics::Sample;
use sluice_core::scheme::{lookup, SchemeConfig};
use sluice_core::session::{build_encoder, PathConfig, RunConfig};
use sluice_core::sim::{RunResult, Simulation};
use sluice_core::units::TimeDelta;
use std::sync::Arc;

fn path(delay_ms: f64) -> PathConfig {
    PathConfig { delay_ms, ..Default::default() }
}

fn run_with(scheme: &str, trace: &str, seconds: f64, seed: u64, downlink: PathConfig) -> RunResult {
    let config: SchemeConfig = lookup(scheme).expect("registered").config;
    let cfg = RunConfig {
        scheme_name: scheme.into(),
        scheme: Some(config),
        seed,
        duration_s: seconds,
        uplink: path(downlink.delay_ms),
        downlink,
        ..Default::default()
    };
    let spec = TraceSpec::parse_cli(trace).expect("valid spec");
    let t = Arc::new(generate(&spec, TimeDelta::from_secs_f64(seconds + 5.0)).expect("trace"));
    let sim = Simulation::new(&cfg, Some(t), None, build_encoder(&cfg).expect("model encoder"))
        .expect("valid config");
    sim.run()
}

fn run(scheme: &str, trace: &str, seconds: f64, seed: u64) -> RunResult {
    run_with(scheme, trace, seconds, seed, path(25.0))
}

/// Mean of `rate` over the samples in `(t - window, t]`.
fn mean_rate(r: &RunResult, t: f64, window: f64, rate: fn(&Sample) -> i64) -> f64 {
    let w: Vec<f64> = r
        .samples
        .iter()
        .filter(|s| {
            let ts = s.t_us as f64 / 1e6;
            ts > t - window && ts <= t
        })
        .map(|s| rate(s) as f64)
        .collect();
    w.iter().sum::<f64>() / w.len().max(1) as f64
}

/// Seconds after `from` until the `window`-second mean of `rate` (a window wholly after
/// `from`) first satisfies `ok` (infinity if never).
fn time_until(
    r: &RunResult,
    from: f64,
    window: f64,
    rate: fn(&Sample) -> i64,
    ok: impl Fn(f64) -> bool,
) -> f64 {
    for s in &r.samples {
        let t = s.t_us as f64 / 1e6;
        if t >= from + window && ok(mean_rate(r, t, window, rate)) {
            return t - from;
        }
    }
    f64::INFINITY
}

fn send(s: &Sample) -> i64 {
    s.send_rate_bps
}
fn delivered(s: &Sample) -> i64 {
    s.delivered_rate_bps
}

#[test]
fn dummies_reach_the_link_rate_faster_after_a_step_up() {
    // Vidaptive App. C (Fig. 21b): after the link opens up, the flow with dummies matches it
    // within 2 s, Copa on video alone takes 6 s. Here 2 -> 5 Mbps at 10 s, seeds 1-3: time
    // until the send rate (0.5 s mean, video and dummies) reaches 90 % of 5 Mbps.
    // Measured: `vidaptive` 0.58, 0.50, 1.22 s; `vidaptive-no-dummy` 0.96, 0.80, 1.10 s (mean
    // 0.95 s against 0.77 s, 1.2x). Without dummies only the video's own packets clock Copa's
    // window, and the video is alpha x CC-Rate, less than the window allows; the dummies fill
    // the gap. The gain is small here because this model encoder follows a target increase
    // within a few frames (x264 with the max rate at the target carries no ABR debt); VP8 in
    // the paper's Fig. 1b took 2 s, App. C measured 6 s against 2 s. (Before the model
    // encoder's debt was removed, 0df1f21, the gap was 2.3x: that encoder lagged instead.)
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for seed in 1..=3 {
        for (scheme, out) in [("vidaptive", &mut with), ("vidaptive-no-dummy", &mut without)] {
            let r = run(scheme, "steps:2@10,5@10", 20.0, seed);
            out.push(time_until(&r, 10.0, 0.5, send, |m| m >= 0.9 * 5e6));
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let msg = format!("with dummies {with:?} s, without {without:?} s");
    eprintln!("{msg}");
    assert!(with.iter().all(|&t| t <= 3.0), "{msg}");
    assert!(mean(&without) >= 1.1 * mean(&with), "{msg}");
}

#[test]
fn vidaptive_tracks_2_to_0_5_mbps_steps_while_webrtc_climbs_slowly() {
    // Vidaptive §2.1 Fig. 2: 2 Mbps and 0.5 Mbps alternating every 40 s, 50 ms RTT, no drops.
    // `vidaptive`: within 3 s of every step its rate follows the link (delivered >= 80 % of
    // 2 Mbps after a step up; sent <= 110 % of 0.5 Mbps after a step down). `webrtc` needs
    // more than 10 s to climb back to 80 % of 2 Mbps (paper, M108: 18 s; M119 here: 25-28 s),
    // and its P95 latency over all capture slots is higher.
    // Measured (seed 1): vidaptive up 1.0 s (start) and 1.6 s (80 s), down 1.0 s; webrtc up
    // 28.5 s at 80 s; P95 (all slots, 120 s) 238 vs 321 ms.
    let v = run("vidaptive", "alternating:2,0.5,80", 120.0, 1);
    let w = run("webrtc", "alternating:2,0.5,80", 120.0, 1);
    let up = |r: &RunResult, at: f64| time_until(r, at, 1.0, delivered, |m| m >= 0.8 * 2e6);
    let down = |r: &RunResult, at: f64| time_until(r, at, 1.0, send, |m| m <= 1.1 * 0.5e6);
    let msg = format!(
        "vidaptive: up {:.1} s, down {:.1} s, up {:.1} s; webrtc up at 80 s {:.1} s; P95 all \
         slots {:.0} vs {:.0} ms",
        up(&v, 0.0),
        down(&v, 40.0),
        up(&v, 80.0),
        up(&w, 80.0),
        v.summary.latency_all_ms.p95,
        w.summary.latency_all_ms.p95
    );
    eprintln!("{msg}");
    for t in [up(&v, 0.0), down(&v, 40.0), up(&v, 80.0)] {
        assert!(t <= 3.0, "{msg}");
    }
    assert!(up(&w, 80.0) > 10.0, "{msg}");
    assert!(v.summary.latency_all_ms.p95 < w.summary.latency_all_ms.p95, "{msg}");
}

#[test]
fn the_pause_keeps_the_tail_down_after_a_10_to_1_mbps_drop() {
    // Vidaptive §3.2, Fig. 16: without the latency safeguard (encoder pause) frames encoded
    // for the old rate queue in the pacer. 10 -> 1 Mbps at 20 s. Measured: P95 over all slots
    // 572 ms with the pause, 2743 ms without; P99 1122 vs 3272 ms.
    let with = run("vidaptive", "steps:10@20,1@20", 40.0, 1);
    let without = run("vidaptive-no-pause", "steps:10@20,1@20", 40.0, 1);
    let (a, b) = (&with.summary.latency_all_ms, &without.summary.latency_all_ms);
    let msg = format!(
        "P95 {:.0} vs {:.0} ms, P99 {:.0} vs {:.0} ms; skipped {} vs {}",
        a.p95, b.p95, a.p99, b.p99, with.summary.frames_skipped, without.summary.frames_skipped
    );
    eprintln!("{msg}");
    assert!(b.p95 > 3.0 * a.p95, "{msg}");
    assert!(b.p99 > 2.0 * a.p99, "{msg}");
    assert!(with.summary.frames_skipped > 0 && without.summary.frames_skipped == 0, "{msg}");
}

#[test]
fn no_deadlock_on_a_lossy_shallow_path() {
    // Pantheon's Nepal -> AWS India path (notes §6): 0.57 Mbps Poisson delivery, 28 ms one
    // way, 4.77 % loss, 14-packet drop-tail queue. Tail losses leave bytes in flight that no
    // later packet reveals; the window must not close for good: frames keep being displayed
    // (no gap over 2 s) until the end.
    let nepal = PathConfig { loss: 0.0477, queue_packets: Some(14), ..path(28.0) };
    for scheme in ["vidaptive", "vidaptive-rocc"] {
        let r = run_with(scheme, "poisson:0.57,1", 60.0, 1, nepal.clone());
        let mut shown: Vec<i64> = r.frames.iter().filter_map(|f| f.displayed_us).collect();
        shown.sort_unstable();
        let gap = shown.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(i64::MAX);
        let last = shown.last().copied().unwrap_or(0);
        let msg = format!(
            "{scheme}: {} frames shown, largest gap {:.2} s, last at {:.2} s, loss {:.3}",
            shown.len(),
            gap as f64 / 1e6,
            last as f64 / 1e6,
            r.summary.loss_rate
        );
        eprintln!("{msg}");
        assert!(r.summary.loss_rate > 0.03, "{msg}");
        assert!(shown.len() > 600, "{msg}");
        assert!(gap < 2_000_000 && last > 58_000_000, "{msg}");
    }
}

#[test]
fn a_run_is_a_function_of_its_seed() {
    let a = run("vidaptive", "markov:6,1,3,1,4", 8.0, 3);
    let b = run("vidaptive", "markov:6,1,3,1,4", 8.0, 3);
    assert_eq!(a.frames, b.frames);
    assert_eq!(a.samples, b.samples);
    assert_eq!(a.summary, b.summary);
    assert!(a.summary.padding_ratio > 0.0 && a.summary.padding_ratio < 1.0);
}
