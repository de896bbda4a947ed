//! End-to-end scenarios on the deterministic simulator, with metric assertions.

use sluice_core::link::trace::Trace;
use sluice_core::link::trace_gen::{generate, TraceSpec};
use sluice_core::metrics::FrameRecord;
use sluice_core::sim::{build_encoder, PathConfig, RunConfig, RunResult, Simulation};
use sluice_core::units::TimeDelta;
use std::sync::Arc;

fn trace(spec: &str, seconds: f64) -> Arc<Trace> {
    let spec = TraceSpec::parse_cli(spec).expect("valid spec");
    Arc::new(generate(&spec, TimeDelta::from_secs_f64(seconds)).expect("trace"))
}

fn run(scheme: &str, trace_spec: &str, seconds: f64, downlink: PathConfig, seed: u64) -> RunResult {
    let cfg = RunConfig {
        scheme_name: scheme.into(),
        seed,
        duration_s: seconds,
        downlink,
        ..Default::default()
    };
    let t = trace(trace_spec, seconds + 5.0);
    let sim = Simulation::new(&cfg, Some(t), None, build_encoder(&cfg).expect("model encoder"))
        .expect("valid config");
    sim.run()
}

fn path(queue_packets: Option<usize>, queue_bytes: Option<i64>) -> PathConfig {
    PathConfig { queue_packets, queue_bytes, delay_ms: 20.0, ..Default::default() }
}

fn p95(frames: &[&FrameRecord]) -> f64 {
    let mut v: Vec<f64> =
        frames.iter().map(|f| f.latency_us.map_or(f64::INFINITY, |l| l as f64 / 1e3)).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    sluice_core::metrics::percentile(&v, 95.0)
}

/// Delivered over capacity between two times, from the samples.
fn utilization_between(r: &RunResult, from_s: f64, to_s: f64) -> f64 {
    let (mut delivered, mut capacity) = (0.0, 0.0);
    for s in &r.samples {
        let t = s.t_us as f64 / 1e6;
        if t > from_s && t <= to_s {
            delivered += s.delivered_rate_bps as f64;
            capacity += s.link_capacity_bps as f64;
        }
    }
    delivered / capacity
}

#[test]
fn webrtc_fills_a_constant_12mbps_link_and_its_tail_latency_is_pacing() {
    let r = run("webrtc", "constant:12", 20.0, path(None, Some(100_000)), 1);
    let util = utilization_between(&r, 10.0, 20.0);
    assert!(util >= 0.70, "utilisation over 10-20 s: {util:.3}");
    assert_eq!(r.summary.loss_rate, 0.0);
    assert!(r.summary.frames_displayed == r.summary.frames_sent);
    // ACE §3: with heavy-tailed frames behind a 1.1x pacer the tail is pacing delay, not
    // network queueing.
    let s = &r.summary;
    assert!(s.latency_ms.p95 < 300.0, "P95 latency {:.1} ms", s.latency_ms.p95);
    assert!(
        s.pacer_delay_ms_p95 > 5.0 * s.queue_delay_ms_p95,
        "pacer P95 {:.1} ms vs bottleneck queue P95 {:.1} ms",
        s.pacer_delay_ms_p95,
        s.queue_delay_ms_p95
    );
    // Pacing at 2.5x (WebRTC-B) moves frames out faster: P95 below 150 ms.
    let b = run("webrtc-b", "constant:12", 20.0, path(None, Some(100_000)), 1);
    assert!(b.summary.latency_ms.p95 < 150.0, "webrtc-b P95 {:.1} ms", b.summary.latency_ms.p95);
    assert!(b.summary.latency_ms.p95 < s.latency_ms.p95);
}

#[test]
fn webrtc_recovers_after_a_30_to_3_mbps_step() {
    // 30 Mbps for 10 s, then 3 Mbps; unlimited bottleneck queue.
    let r = run("webrtc", "steps:30@10,3@30", 20.0, path(None, None), 1);
    let window = |from_s: f64, to_s: f64| -> Vec<&FrameRecord> {
        r.frames
            .iter()
            .filter(|f| (from_s * 1e6..to_s * 1e6).contains(&(f.capture_us as f64)))
            .collect()
    };
    let before = window(5.0, 10.0);
    assert!(p95(&before) < 150.0, "P95 before the step {:.1} ms", p95(&before));
    // The target falls below the new capacity within a second of the step...
    let reacted = r
        .samples
        .iter()
        .find(|s| s.t_us >= 10_000_000 && s.target_rate_bps < 3_000_000)
        .map(|s| s.t_us as f64 / 1e6);
    assert!(reacted.is_some_and(|t| t < 11.0), "target below 3 Mbps at {reacted:?} s");
    // ...the step hurts (the encoder and the queue take time to converge)...
    let during = window(10.0, 12.0);
    assert!(p95(&during) > 300.0, "P95 right after the step {:.1} ms", p95(&during));
    // ...and 5 s after the step the latency is back to what 3 Mbps allows: a P95-sized
    // frame (about 2.7x the 12.5 kB mean) alone takes ~100 ms to leave a 2.8 Mbps pacer,
    // plus 20 ms of propagation and the encode, so the floor is ~130 ms; 200 ms leaves
    // room for queueing behind the previous frame but none for a standing queue.
    let after = window(15.0, 20.0);
    assert!(p95(&after) < 200.0, "P95 from 15 s on {:.1} ms", p95(&after));
    let p50_after = {
        let mut v: Vec<f64> =
            after.iter().filter_map(|f| f.latency_us).map(|l| l as f64 / 1e3).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        sluice_core::metrics::percentile(&v, 50.0)
    };
    assert!(p50_after < 100.0, "median from 15 s on {p50_after:.1} ms");
    let last = r.samples.last().unwrap();
    assert!(last.target_rate_bps < 3_300_000, "target {} bps", last.target_rate_bps);
}

#[test]
fn always_burst_overflows_a_20_packet_queue_where_webrtc_does_not() {
    let burst = run("always-burst", "constant:12", 20.0, path(Some(20), None), 1);
    let paced = run("webrtc", "constant:12", 20.0, path(Some(20), None), 1);
    assert!(burst.summary.loss_rate > 0.002, "always-burst loss {}", burst.summary.loss_rate);
    assert!(
        paced.summary.loss_rate < burst.summary.loss_rate / 10.0,
        "webrtc loss {} vs always-burst {}",
        paced.summary.loss_rate,
        burst.summary.loss_rate
    );
}

#[test]
fn same_seed_same_frames() {
    let a = run("webrtc", "markov:20,3,3,1,7", 10.0, path(None, Some(60_000)), 42);
    let b = run("webrtc", "markov:20,3,3,1,7", 10.0, path(None, Some(60_000)), 42);
    let c = run("webrtc", "markov:20,3,3,1,7", 10.0, path(None, Some(60_000)), 43);
    let ja = serde_json::to_string(&a.frames).unwrap();
    let jb = serde_json::to_string(&b.frames).unwrap();
    let jc = serde_json::to_string(&c.frames).unwrap();
    assert_eq!(ja, jb);
    assert_ne!(ja, jc);
    assert_eq!(
        serde_json::to_string(&a.samples).unwrap(),
        serde_json::to_string(&b.samples).unwrap()
    );
}

#[test]
fn bad_configs_are_errors_not_panics() {
    let bad = [
        RunConfig { scheme_name: "nope".into(), ..Default::default() },
        RunConfig { duration_s: -1.0, ..Default::default() },
        RunConfig {
            downlink: PathConfig { queue_bytes: Some(10), ..Default::default() },
            ..Default::default()
        },
        RunConfig {
            downlink: PathConfig { loss: 1.5, ..Default::default() },
            ..Default::default()
        },
    ];
    for cfg in bad {
        let err =
            Simulation::new(&cfg, None, None, build_encoder(&cfg).expect("model encoder")).err();
        assert!(err.is_some(), "{cfg:?} accepted");
    }
}

#[test]
fn an_application_limited_encoder_does_not_inflate_the_estimate() {
    // At 150 Mbps the 720p model encoder cannot fill the link (it tops out near QP 10), so the
    // sender is application limited: the estimate may follow what probes measure, but never
    // exceeds the path, and ALR is detected.
    let r = run("webrtc", "constant:150", 30.0, path(None, None), 1);
    let capacity = 150.4e6;
    let max_target = r.samples.iter().map(|s| s.target_rate_bps).max().unwrap() as f64;
    assert!(max_target <= 1.05 * capacity, "target reached {:.1} Mbps", max_target / 1e6);
    let alr = r.samples.iter().filter(|s| s.cc_in_alr).count() as f64 / r.samples.len() as f64;
    assert!(alr > 0.2, "in ALR {:.0}% of the time", alr * 100.0);
    assert!(r.summary.video_bitrate_bps < 0.7 * capacity);
}
