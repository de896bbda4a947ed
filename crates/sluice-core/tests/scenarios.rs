//! End-to-end scenarios on the deterministic simulator, with metric assertions.

use sluice_core::cc::gcc::{GccConfig, TrendlineWindow};
use sluice_core::columns::Value;
use sluice_core::encoder::model::ModelEncoderConfig;
use sluice_core::encoder_controller::EncoderControllerConfig;
use sluice_core::link::trace::Trace;
use sluice_core::link::trace_gen::{generate, TraceSpec};
use sluice_core::metrics::{FrameRecord, Sample};
use sluice_core::pacer::ace_n::AceNConfig;
use sluice_core::pacer::leaky_bucket::LeakyBucketConfig;
use sluice_core::pacer::PacerConfig;
use sluice_core::scheme::{CcConfig, SchemeConfig};
use sluice_core::session::{build_encoder, EncoderConfig, PathConfig, RunConfig};
use sluice_core::sim::{RunResult, Simulation};
use sluice_core::units::{DataRate, TimeDelta};
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
    sluice_core::stats::percentile(&v, 95.0)
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

/// Lost feedback: a packet whose report was lost leaves the bytes in flight when a later
/// packet is reported (libwebrtc's TransportFeedbackAdapter). Before that was so, 10 % loss
/// on the feedback path left phantom bytes in flight: `webrtc` used 14 % of the link at
/// 15.5 fps, `vidaptive` 13 % at 4.1 fps (30 s runs).
#[test]
fn webrtc_and_vidaptive_keep_their_rate_when_a_tenth_of_the_feedback_is_lost() {
    for scheme in ["webrtc", "vidaptive"] {
        let cfg = RunConfig {
            scheme_name: scheme.into(),
            seed: 1,
            duration_s: 20.0,
            downlink: path(None, Some(100_000)),
            uplink: PathConfig { delay_ms: 20.0, loss: 0.1, ..Default::default() },
            ..Default::default()
        };
        let t = trace("constant:12", 25.0);
        let sim = Simulation::new(&cfg, Some(t), None, build_encoder(&cfg).unwrap()).unwrap();
        let r = sim.run();
        let util = utilization_between(&r, 10.0, 20.0);
        eprintln!("{scheme}, 10 % feedback loss: utilisation {util:.3}, fps {:.1}", r.summary.fps);
        assert!(util >= 0.6, "{scheme}: utilisation over 10-20 s {util:.3}");
        assert!(r.summary.fps >= 27.0, "{scheme}: {:.1} fps", r.summary.fps);
    }
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
    // GCC backs off within a few hundred milliseconds of the step (MAE §3.1: GCC detects a
    // 10 -> 1 Mbps drop in 140 ms)...
    let first_cut = r
        .samples
        .iter()
        .find(|s| s.t_us >= 10_000_000 && s.target_rate_bps < 20_000_000)
        .map(|s| s.t_us as f64 / 1e6);
    assert!(first_cut.is_some_and(|t| t < 10.4), "first back-off at {first_cut:?} s");
    // ...and is below the new capacity within 1.5 s: each back-off (one per ~200 ms here)
    // goes to 0.85 x the acknowledged rate, whose window (M119: the last second of arrivals,
    // at most 500 packets) still holds arrivals from before the step for about a second.
    let reacted = r
        .samples
        .iter()
        .find(|s| s.t_us >= 10_000_000 && s.target_rate_bps < 3_000_000)
        .map(|s| s.t_us as f64 / 1e6);
    assert!(reacted.is_some_and(|t| t < 11.5), "target below 3 Mbps at {reacted:?} s");
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
        sluice_core::stats::percentile(&v, 50.0)
    };
    assert!(p50_after < 100.0, "median from 15 s on {p50_after:.1} ms");
    let last = r.samples.last().unwrap();
    assert!(last.target_rate_bps < 3_300_000, "target {} bps", last.target_rate_bps);
}

#[test]
fn webrtc_drops_frames_on_a_capacity_drop_without_keyframes_and_frame_drop_off_schemes_do_not() {
    // 30 Mbps, then 3 Mbps from 10 s; unlimited queue, so nothing is lost and any keyframe
    // after the first would come from the skips.
    let r = run("webrtc", "steps:30@10,3@10", 20.0, path(None, None), 1);
    let s = &r.summary;
    let count = |reason: &str| r.skips.iter().filter(|k| k.reason == reason).count();
    let (cwnd, dropper) = (count("cwnd-pushback"), count("frame-dropper"));
    // GCC's DropFrame-mode pushback and the frame dropper both act, only after the step
    // (measured: 51 and 5 slots; the model encoder follows the drop within about two frames,
    // so the dropper's bucket overflows only briefly)...
    assert!(cwnd >= 10 && dropper >= 1, "cwnd-pushback {cwnd}, frame-dropper {dropper}");
    assert_eq!(cwnd + dropper, r.skips.len(), "only the stage's reasons");
    assert!(r.skips.iter().all(|k| k.capture_us >= 10_000_000), "skips before the step");
    assert_eq!(s.frames_sent + s.frames_skipped, 600, "every slot encoded or skipped once");
    // ...the receiver passes over the skipped slots: every encoded frame is displayed and
    // no keyframe is asked for.
    assert_eq!(s.keyframes, 1);
    assert_eq!(s.frames_displayed, s.frames_sent);
    assert_eq!(s.loss_rate, 0.0);
    // The same composition without the stage (webrtc-x264's, here on the model encoder)
    // skips nothing, and its frames wait far longer.
    let off = run("webrtc-x264", "steps:30@10,3@10", 20.0, path(None, None), 1);
    assert!(off.skips.is_empty());
    assert_eq!(off.summary.frames_sent, 600);
    assert!(
        s.latency_ms.p95 < off.summary.latency_ms.p95 / 2.0,
        "P95 with frame dropping {:.1} ms, without {:.1} ms",
        s.latency_ms.p95,
        off.summary.latency_ms.p95
    );
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
fn the_application_cap_holds_for_every_scheme() {
    // max_video_rate_bps caps what every scheme's encoder is asked for, window-based and
    // rate-based alike; uncapped, each of them runs above it on this link.
    for scheme in ["webrtc", "copa", "vidaptive", "co-rtv", "fdcc"] {
        let cfg = |cap: Option<f64>| RunConfig {
            scheme_name: scheme.into(),
            duration_s: 10.0,
            downlink: path(None, Some(300_000)),
            max_video_rate_bps: cap,
            ..Default::default()
        };
        let go = |cfg: RunConfig| {
            let t = trace("constant:12", 15.0);
            let enc = build_encoder(&cfg).expect("model encoder");
            Simulation::new(&cfg, Some(t), None, enc).expect("valid config").run()
        };
        let free = go(cfg(None));
        let capped = go(cfg(Some(2e6)));
        let over =
            |r: &RunResult| r.frames.iter().filter(|f| f.target_rate_bps > 2_000_000).count();
        assert!(over(&free) > 0, "{scheme}: never above 2 Mbps without the cap");
        assert_eq!(over(&capped), 0, "{scheme}: a frame asked for more than the cap");
        let late = |r: &RunResult| r.summary.video_bitrate_bps;
        assert!(
            late(&capped) < 2.2e6,
            "{scheme}: {:.2} Mbps under a 2 Mbps cap",
            late(&capped) / 1e6
        );
    }
    let bad = RunConfig { max_video_rate_bps: Some(-1.0), ..Default::default() };
    assert!(Simulation::new(&bad, None, None, build_encoder(&bad).expect("model")).is_err());
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
    let in_alr = |s: &&Sample| s.columns.get("cc_in_alr") == Some(&Value::Bool(true));
    let alr = r.samples.iter().filter(in_alr).count() as f64 / r.samples.len() as f64;
    assert!(alr > 0.2, "in ALR {:.0}% of the time", alr * 100.0);
    assert!(r.summary.video_bitrate_bps < 0.7 * capacity);
}

/// A run of `pacer` behind ACE's congestion controller (GCC with the ACE fork's 200 ms
/// trendline window) capped at `max_mbps`, so the estimate underrates a faster link, with the
/// model encoder and a 100 kB drop-tail queue.
fn run_ace_pacer(pacer: PacerConfig, trace_spec: &str, max_mbps: i64, seed: u64) -> RunResult {
    let seconds = 20.0;
    let cc = CcConfig::Gcc(GccConfig {
        max_rate: DataRate::from_mbps(max_mbps),
        trendline_window: TrendlineWindow::Time(TimeDelta::from_ms(200)),
        ..Default::default()
    });
    let cfg = RunConfig {
        scheme_name: "custom".into(),
        scheme: Some(SchemeConfig {
            pacer,
            cc,
            encoder_controller: EncoderControllerConfig::default(),
            frame_drop: Default::default(),
            salsify: None,
            bottleneck: Default::default(),
            feedback_interval_ms: None,
            allocation_overhead_bytes: None,
        }),
        seed,
        duration_s: seconds,
        downlink: path(None, Some(100_000)),
        // ACE's premise: frame sizes as heavy-tailed as ACE §2 Fig. 2 (heavier than x264 on
        // the benchmark clips, the model's default).
        encoder: EncoderConfig::Model(ModelEncoderConfig::ace_fig2()),
        ..Default::default()
    };
    let t = trace(trace_spec, seconds + 5.0);
    let sim = Simulation::new(&cfg, Some(t), None, build_encoder(&cfg).expect("model encoder"))
        .expect("valid config");
    sim.run()
}

/// The three ways to send a frame compared in ACE §6: ACE-N, WebRTC's leaky bucket at 1.1x,
/// and no pacing.
fn ace_n() -> PacerConfig {
    PacerConfig::AceN(AceNConfig::default())
}
fn leaky_1_1() -> PacerConfig {
    PacerConfig::LeakyBucket(LeakyBucketConfig::default())
}

/// Share of the frames captured in [from_s, to_s) whose packets all left at one instant.
fn burst_share(r: &RunResult, from_s: f64, to_s: f64) -> f64 {
    let frames: Vec<&FrameRecord> = r
        .frames
        .iter()
        .filter(|f| (from_s * 1e6..to_s * 1e6).contains(&(f.capture_us as f64)))
        .collect();
    let bursts = frames
        .iter()
        .filter(|f| {
            f.first_packet_sent_us.is_some() && f.first_packet_sent_us == f.last_packet_sent_us
        })
        .count();
    bursts as f64 / frames.len() as f64
}

/// Packets the bottleneck dropped in (from_s, to_s], from the cumulative sample counter.
fn drops_between(r: &RunResult, from_s: f64, to_s: f64) -> u64 {
    let at = |t_s: f64| {
        r.samples.iter().rfind(|s| s.t_us as f64 <= t_s * 1e6).map_or(0, |s| s.lost_packets)
    };
    at(to_s) - at(from_s)
}

/// Recorded bucket samples in [from_s, to_s).
fn buckets(r: &RunResult, from_s: f64, to_s: f64) -> Vec<i64> {
    r.samples
        .iter()
        .filter(|s| (from_s * 1e6..to_s * 1e6).contains(&(s.t_us as f64)))
        .filter_map(|s| match s.columns.get("pacer_bucket_bytes") {
            Some(Value::Int(b)) => Some(*b),
            _ => None,
        })
        .collect()
}

#[test]
fn ace_n_bursts_frames_when_the_estimate_underrates_the_link() {
    // A 30 Mbps link, GCC capped at 8 Mbps (ACE Fig. 25 before t = 400 ms): the link absorbs
    // bursts, so ACE-N should send frames at once where the 1.1x leaky bucket spreads them
    // over ~30 ms. All three use the same capped GCC ("webrtc" and "always-burst" here are
    // their pacers, not the registry entries with uncapped GCC).
    let ace = run_ace_pacer(ace_n(), "constant:30", 8, 1);
    let paced = run_ace_pacer(leaky_1_1(), "constant:30", 8, 1);
    let burst = run_ace_pacer(PacerConfig::None {}, "constant:30", 8, 1);
    let (a, p, b) = (&ace.summary, &paced.summary, &burst.summary);
    // Measured (seed 1): ace-n sends 56.5 % of the frames as one burst, P95 98.7 ms, pacer
    // P95 56.3 ms, no loss; leaky 1.1x 0.2 %, P95 144.1 ms, pacer P95 109.3 ms, no loss; no
    // pacing P95 69.7 ms, loss 2.9 % (frames above 100 kB overflow the queue). The rest of
    // ACE-N's pacing is the token rate: after a large frame empties the bucket, tokens come
    // back at only 10 % above the average frame rate.
    let share = burst_share(&ace, 0.0, 20.0);
    assert!(share > 0.5, "ace-n sent {:.1} % of frames as one burst", share * 100.0);
    assert!(burst_share(&paced, 0.0, 20.0) < 0.01);
    assert!(
        a.pacer_delay_ms_p95 < 0.65 * p.pacer_delay_ms_p95,
        "pacer P95: ace-n {:.1} ms, leaky 1.1x {:.1} ms",
        a.pacer_delay_ms_p95,
        p.pacer_delay_ms_p95
    );
    assert!(
        a.latency_ms.p95 < 0.8 * p.latency_ms.p95,
        "P95: ace-n {:.1} ms, leaky 1.1x {:.1} ms",
        a.latency_ms.p95,
        p.latency_ms.p95
    );
    assert!(a.loss_rate < 0.001, "ace-n loss {}", a.loss_rate);
    assert!(b.loss_rate > 0.01, "always-burst loss {}", b.loss_rate);
    assert_eq!(a.frames_displayed, a.frames_sent);
}

#[test]
fn ace_n_shrinks_its_bucket_and_paces_when_the_capacity_drops() {
    // 30 Mbps for 10 s, then 6 Mbps; GCC capped at 8 Mbps; 100 kB drop-tail queue (ACE
    // Fig. 25 from t = 400 ms: the predicted queue crosses T, the bucket shrinks, frames are
    // paced; fast recovery once the queue has cleared).
    let spec = "steps:30@10,6@10";
    let ace = run_ace_pacer(ace_n(), spec, 8, 1);
    let burst = run_ace_pacer(PacerConfig::None {}, spec, 8, 1);
    // Measured (seed 1): ace-n drops 0 packets (0 before the step, 0 after), bucket mean
    // 63.8 kB over 5-10 s, down to 1260 B (the floor) within 1.5 s of the step, bursts 53 %
    // of the frames over 5-10 s and 11 % over 10-11.5 s, bottleneck queue peak 69.7 kB, P95
    // 128.7 ms, pacer P95 76.3 ms. No pacing drops 253 + 203 packets (loss 3.3 %), P95
    // 263.2 ms. (Leaky bucket 1.1x, same GCC: no drops, P95 159.4 ms, pacer P95 109.3 ms.)
    let (ace_drops, burst_drops) =
        (drops_between(&ace, 10.0, 20.0), drops_between(&burst, 10.0, 20.0));
    assert!(ace_drops <= 10, "ace-n dropped {ace_drops} packets after the step");
    assert!(burst_drops >= 100, "always-burst dropped {burst_drops} packets after the step");
    assert!(ace.summary.loss_rate < burst.summary.loss_rate / 10.0);
    let before = buckets(&ace, 5.0, 10.0);
    let mean_before = before.iter().sum::<i64>() as f64 / before.len() as f64;
    let min_after = *buckets(&ace, 10.0, 11.5).iter().min().expect("bucket samples") as f64;
    assert!(
        min_after < 0.2 * mean_before,
        "bucket: mean {mean_before:.0} B before the step, min {min_after:.0} B after"
    );
    let (share_before, share_after) = (burst_share(&ace, 5.0, 10.0), burst_share(&ace, 10.0, 11.5));
    assert!(
        share_after < 0.5 * share_before,
        "frames sent as one burst: {share_before:.3} before the step, {share_after:.3} after"
    );
    let peak = ace.samples.iter().filter(|s| s.t_us >= 10_000_000).map(|s| s.queue_bytes).max();
    assert!(peak.is_some_and(|q| q < 90_000), "bottleneck queue peak {peak:?} B");
}

/// `copa` over `trace_spec` with 25 ms each way (50 ms base RTT) and an unlimited queue.
fn copa_run(trace_spec: &str, seconds: f64) -> RunResult {
    let one_way = PathConfig { delay_ms: 25.0, ..Default::default() };
    let cfg = RunConfig {
        scheme_name: "copa".into(),
        duration_s: seconds,
        downlink: one_way.clone(),
        uplink: one_way,
        ..Default::default()
    };
    let t = trace(trace_spec, seconds + 5.0);
    Simulation::new(&cfg, Some(t), None, build_encoder(&cfg).expect("model encoder"))
        .expect("valid config")
        .run()
}

/// A full packet on the wire.
const PACKET: i64 = 1260;

fn never_over_the_window(r: &RunResult) {
    for s in &r.samples {
        let w = s.cwnd_bytes.expect("Copa has a window");
        assert!(
            s.in_flight_bytes < w + PACKET,
            "at {} us: {} B in flight, window {w} B",
            s.t_us,
            s.in_flight_bytes
        );
    }
}

#[test]
fn copa_backlogged_fills_a_constant_link_over_a_queue_of_a_few_packets() {
    let r = copa_run("constant:12", 10.0);
    let after = |s: &&Sample| s.t_us > 2_000_000;
    // Backlogged: the encoder's target (cwnd / srtt) exceeds what the window lets out, so
    // the pacer always holds video.
    let backlog = r.samples.iter().filter(after).filter(|s| s.pacer_queue_bytes > 0).count();
    assert_eq!(backlog, r.samples.iter().filter(after).count());
    // Within 10 % of capacity from 2 s on.
    let util = utilization_between(&r, 2.0, 10.0);
    assert!(util >= 0.9, "utilisation over 2-10 s: {util:.3}");
    // Copa's equilibrium queue is about 1/delta = 2 packets plus what a 10 ms report releases
    // at once: a mean of at most 6 packets (5 ms at 12 Mbps).
    let q: Vec<f64> =
        r.samples.iter().filter(after).map(|s| s.queue_delay_us as f64 / 1e3).collect();
    let mean_ms = q.iter().sum::<f64>() / q.len() as f64;
    let packet_ms = PACKET as f64 * 8.0 / 12.0e3;
    assert!(mean_ms < 6.0 * packet_ms, "mean queueing delay {mean_ms:.2} ms");
    never_over_the_window(&r);
}

#[test]
fn copa_window_adapts_within_a_second_of_a_12_to_3_mbps_step() {
    let r = copa_run("steps:12@10,3@10", 16.0);
    // The bandwidth-delay product at 3 Mbps over the 50 ms path plus the 10 ms report
    // interval the window also covers: 22.5 kB. Adapted: the window within 1.5x of it and
    // the queue the step built (up to ~170 ms) drained to under 20 ms.
    let bdp = 3.0e6 / 8.0 * 0.060;
    let adapted = r
        .samples
        .iter()
        .find(|s| {
            s.t_us > 10_000_000
                && (s.cwnd_bytes.unwrap_or(i64::MAX) as f64) < 1.5 * bdp
                && s.queue_delay_us < 20_000
        })
        .map(|s| s.t_us as f64 / 1e6);
    assert!(adapted.is_some_and(|t| t <= 11.0), "adapted at {adapted:?} s");
    // And it stays near the new rate.
    let util = utilization_between(&r, 12.0, 16.0);
    assert!(util >= 0.8, "utilisation over 12-16 s: {util:.3}");
    never_over_the_window(&r);
}

// --- MAE (NSDI '26) on the model encoder: its testbed's link (no added delay, an unlimited
// queue, the feedback path on the same trace), 30 fps, 120 s, seeds 1-5. ---

const MAE_SEEDS: [u64; 5] = [1, 2, 3, 4, 5];

fn mae_run(scheme: &str, trace_spec: &str, seed: u64) -> RunResult {
    let seconds = 120.0;
    let no_delay = PathConfig { delay_ms: 0.0, ..Default::default() };
    let cfg = RunConfig {
        scheme_name: scheme.into(),
        seed,
        duration_s: seconds,
        downlink: no_delay.clone(),
        uplink: no_delay,
        ..Default::default()
    };
    let t = trace(trace_spec, seconds + 5.0);
    let sim = Simulation::new(&cfg, Some(t.clone()), Some(t), build_encoder(&cfg).expect("model"))
        .expect("valid config");
    sim.run()
}

/// Means over the seeds of what MAE's comparison reads.
#[derive(Debug)]
struct MaeMeans {
    p99: f64,
    tail10: f64,
    stall_ratio: f64,
    adaptation: f64,
    qp: f64,
    bitrate_bps: f64,
}

fn mae_means(runs: &[RunResult]) -> MaeMeans {
    let mean = |f: &dyn Fn(&RunResult) -> f64| runs.iter().map(f).sum::<f64>() / runs.len() as f64;
    MaeMeans {
        p99: mean(&|r| r.summary.latency_ms.p99),
        tail10: mean(&|r| r.summary.latency_ms.tail10_mean),
        stall_ratio: mean(&|r| r.summary.stall_ratio_200ms),
        adaptation: mean(&|r| r.summary.adaptation_ratio),
        qp: mean(&|r| r.frames.iter().map(|f| f.qp).sum::<f64>() / r.frames.len() as f64),
        bitrate_bps: mean(&|r| r.summary.video_bitrate_bps),
    }
}

fn mae_scheme(scheme: &str, trace_spec: &str) -> (Vec<RunResult>, MaeMeans) {
    let runs: Vec<RunResult> = MAE_SEEDS.iter().map(|&s| mae_run(scheme, trace_spec, s)).collect();
    let means = mae_means(&runs);
    (runs, means)
}

fn is_tight(f: &FrameRecord) -> bool {
    f.columns.get("mae_tight") == Some(&Value::Bool(true))
}

const ALTERNATING: &str = "alternating:10,2,30";

#[test]
fn mae_cuts_the_tail_and_the_stalls_of_its_baseline_on_the_alternating_trace() {
    let (_, base) = mae_scheme("x264-gcc100", ALTERNATING);
    let (runs, mae) = mae_scheme("mae", ALTERNATING);
    let msg = format!("x264-gcc100 {base:?}\nmae {mae:?}");
    // MAE §6.2 (Fig. 17): P99 -55 %, stalls -86 %. Here the tail is mostly GCC's own
    // over-estimate after 10 -> 2 Mbps, which no encoder setting removes (salsify-vbv's P99
    // is as high): expect about -35 % and -40 %.
    assert!(mae.p99 < 0.8 * base.p99, "{msg}");
    assert!(mae.tail10 < 0.8 * base.tail10, "{msg}");
    assert!(mae.stall_ratio < 0.75 * base.stall_ratio, "{msg}");
    assert!(mae.qp - base.qp < 1.5, "{msg}");
    assert!((mae.bitrate_bps / base.bitrate_bps - 1.0).abs() < 0.05, "{msg}");
    // Every 10 -> 2 Mbps step (at 15, 45, 75, 105 s) has MAE tight within 150 ms. The
    // artifact's rule (r = 1) fires at GCC's own threshold, without its dwell; the paper's
    // r = 0.5 (`mae-latch`) fires ahead of GCC's first over-use sample in most steps (the
    // pre-reaction's lead, §6.7).
    for r in &runs {
        for step_s in [15.0, 45.0, 75.0, 105.0] {
            let step_us = (step_s * 1e6) as i64;
            let tight = r.frames.iter().find(|f| f.capture_us >= step_us && is_tight(f));
            let tight = tight.expect("tight after the step").capture_us;
            assert!(tight - step_us <= 150_000, "tight {} ms after the step", tight - step_us);
        }
    }
    let (latch_runs, _) = mae_scheme("mae-latch", ALTERNATING);
    let (mut steps, mut ahead) = (0, 0);
    for r in &latch_runs {
        for step_s in [15.0, 45.0, 75.0, 105.0] {
            let step_us = (step_s * 1e6) as i64;
            let tight = r
                .frames
                .iter()
                .find(|f| f.capture_us >= step_us && is_tight(f))
                .map(|f| f.capture_us)
                .expect("tight after the step");
            assert!(tight - step_us <= 150_000, "tight {} ms after the step", tight - step_us);
            let overuse = r
                .samples
                .iter()
                .find(|s| {
                    s.t_us >= step_us
                        && s.columns.get("cc_usage") == Some(&Value::text("overusing"))
                })
                .map(|s| s.t_us);
            steps += 1;
            ahead += usize::from(overuse.is_none_or(|o| tight <= o));
        }
    }
    assert!(ahead * 4 >= steps * 3, "tight ahead of GCC's over-use in {ahead} of {steps} steps");
}

#[test]
fn maes_latch_holds_false_alarms_that_its_time_out_and_its_artifact_do_not() {
    // The paper's recovery is GCC's under-use, which needs a draining queue. The pre-reaction
    // fires at half GCC's threshold (3 of its floor 6) on a queue of a few ms, and on a link
    // the sender under-uses the queue cannot drain below empty, so nothing ends such a period
    // before the next real drop: on the alternating trace the literal latch is tight a third
    // of the time (MAE reports 10-20 %). The artifact (no latch, r = 1) and Sluice's 300 ms
    // quiet time-out are under a quarter, and keep the latch's gain.
    let (_, base) = mae_scheme("x264-gcc100", ALTERNATING);
    let (_, mae) = mae_scheme("mae-latch", ALTERNATING);
    let (timeout_runs, timeout) = mae_scheme("mae-timeout", ALTERNATING);
    let (_, code) = mae_scheme("mae", ALTERNATING);
    let msg = format!("mae-latch {mae:?}\nmae-timeout {timeout:?}\nmae {code:?}");
    assert!(mae.adaptation > 0.3, "{msg}");
    assert!(timeout.adaptation < 0.25 && code.adaptation < 0.25, "{msg}");
    assert!(timeout.p99 < 0.8 * base.p99 && timeout.stall_ratio < 0.75 * base.stall_ratio);
    // With the time-out every tight period ends before the next 2 -> 10 Mbps step ends its
    // high phase (the literal latch can span a whole high phase).
    for r in &timeout_runs {
        let mut since = None;
        for f in &r.frames {
            match (is_tight(f), since) {
                (true, None) => since = Some(f.capture_us),
                (false, Some(_)) => since = None,
                (true, Some(t)) => assert!(f.capture_us - t < 15_000_000, "tight from {t} us"),
                (false, None) => {}
            }
        }
    }
}

#[test]
fn on_a_constant_link_mae_rarely_tightens_and_costs_nothing() {
    let (_, base) = mae_scheme("x264-gcc100", "constant:12");
    let (_, mae) = mae_scheme("mae-latch", "constant:12");
    let (_, timeout) = mae_scheme("mae-timeout", "constant:12");
    let (_, code) = mae_scheme("mae", "constant:12");
    let msg = format!("base {base:?}\nmae-latch {mae:?}\nmae-timeout {timeout:?}\nmae {code:?}");
    // The artifact's rule almost never fires; r = 0.5 fires on GCC's probes past 12 Mbps and
    // on the few-ms queues its frames leave near capacity: ~5 % with the time-out, ~10 % (up
    // to 19 % on one seed) latched.
    assert!(code.adaptation < 0.02, "{msg}");
    assert!(timeout.adaptation < 0.1, "{msg}");
    assert!(mae.adaptation < 0.2, "{msg}");
    // And it costs no latency. The artifact's rule costs little quality; the latched rules
    // cost more than their adaptation ratio suggests (measured: +0.8 and +1.4 QP): with the
    // VBV's max rate at the target x264 does not spend later what a tight period saved (no
    // ABR overflow correction), and the fill left by the 40 ms buffer refills at one frame's
    // worth per frame, so the quantiser stays raised after each tight period.
    for m in [&mae, &timeout, &code] {
        assert!(m.p99 < 1.1 * base.p99, "{msg}");
    }
    assert!(code.qp - base.qp < 1.0, "{msg}");
    assert!(mae.qp - base.qp < 2.0 && timeout.qp - base.qp < 2.0, "{msg}");
}

#[test]
fn the_registered_ace_n_holds_frames_for_less_time_than_webrtcs_pacer() {
    // ACE-N's token bucket fills at GCC's pacing rate (1.1x its target). At 1.0x it would fill
    // only as fast as ABR's encoder spends, never get ahead for a burst, and its queue would
    // drift: on the demo's Wi-Fi trace its pacer P95 was 154 ms against webrtc's 88 ms.
    let trace_spec = "markov:24,6,6,2,1";
    let ace = run("ace-n", trace_spec, 30.0, path(None, Some(100_000)), 1);
    let webrtc = run("webrtc-x264", trace_spec, 30.0, path(None, Some(100_000)), 1);
    let (a, w) = (ace.summary.pacer_delay_ms_p95, webrtc.summary.pacer_delay_ms_p95);
    assert!(a < 0.7 * w, "pacer P95: ace-n {a:.1} ms, webrtc-x264 {w:.1} ms");
}
