//! The `webrtc` baseline against published numbers: libwebrtc's own GoogCC scenario tests and
//! Vidaptive's measurement of real WebRTC. Each test names its source; the setups follow the
//! sources as far as the simulator can (noted where it cannot).

use sluice_core::cc::gcc::GccConfig;
use sluice_core::columns::Value;
use sluice_core::encoder::model::ModelEncoderConfig;
use sluice_core::link::trace_gen::{generate, TraceSpec};
use sluice_core::metrics::{FrameRecord, Sample};
use sluice_core::scheme::{lookup, CcConfig, SchemeConfig};
use sluice_core::session::{EncoderConfig, PathConfig, RunConfig};
use sluice_core::sim::Simulation;
use sluice_core::units::{DataRate, TimeDelta, Timestamp};
use std::sync::Arc;

/// The registered `webrtc` composition with GCC's rate limits replaced.
fn webrtc_with_rates(start_kbps: i64, min_kbps: i64, max_kbps: i64) -> SchemeConfig {
    let mut scheme = lookup("webrtc").expect("webrtc is registered").config;
    let CcConfig::Gcc(gcc) = &mut scheme.cc else { panic!("webrtc runs GCC") };
    *gcc = GccConfig {
        start_rate: DataRate::from_kbps(start_kbps),
        min_rate: DataRate::from_kbps(min_kbps),
        max_rate: DataRate::from_kbps(max_kbps),
        ..gcc.clone()
    };
    scheme
}

/// A simulation of `scheme` over a generated trace, the model encoder at `width` x `height`.
fn simulation(
    scheme: SchemeConfig,
    trace_spec: &str,
    seconds: f64,
    delay_ms: f64,
    (width, height): (u32, u32),
) -> Simulation {
    let cfg = RunConfig {
        scheme_name: "webrtc".into(),
        scheme: Some(scheme),
        duration_s: seconds,
        drain_s: 0.0,
        downlink: PathConfig { delay_ms, ..Default::default() },
        uplink: PathConfig { delay_ms, ..Default::default() },
        encoder: EncoderConfig::Model(ModelEncoderConfig { width, height, ..Default::default() }),
        ..Default::default()
    };
    let spec = TraceSpec::parse_cli(trace_spec).expect("valid spec");
    let trace = Arc::new(generate(&spec, TimeDelta::from_secs_f64(seconds + 5.0)).expect("trace"));
    let encoder = sluice_core::session::build_encoder(&cfg).expect("model encoder");
    Simulation::new(&cfg, Some(trace), None, encoder).expect("valid config")
}

/// The target in the last sample at or before `t_s`.
fn target_kbps_at(samples: &[Sample], t_s: f64) -> f64 {
    samples
        .iter()
        .take_while(|s| s.t_us as f64 <= t_s * 1e6)
        .last()
        .map_or(f64::NAN, |s| s.target_rate_bps as f64 / 1e3)
}

/// libwebrtc M119, modules/congestion_controller/goog_cc/goog_cc_network_control_unittest.cc,
/// `UpdatesTargetRateBasedOnLinkCapacity`: start 300 kbps, limits 10-1500 kbps, 100 ms each
/// way; 500 kbps for 25 s: 450 +- 100; 800 kbps for 20 s: 750 +- 150; then 100 kbps with
/// 200 ms each way for 50 s: 90 +- 25. The scenario's video is 320x180; so is the model
/// encoder here (at 720p it cannot go below about 600 kbps).
#[test]
fn googcc_scenario_updates_target_rate_based_on_link_capacity() {
    let scheme = webrtc_with_rates(300, 10, 1500);
    let mut sim = simulation(scheme, "steps:0.5@25,0.8@20,0.1@60", 95.0, 100.0, (320, 180));
    sim.run_until(Timestamp::from_ms(25_000));
    let r25 = target_kbps_now(&mut sim, 25.0);
    sim.run_until(Timestamp::from_ms(45_000));
    let r45 = target_kbps_now(&mut sim, 45.0);
    sim.downlink_mut().set_delay(TimeDelta::from_ms(200));
    sim.uplink_mut().set_delay(TimeDelta::from_ms(200));
    sim.run_until(Timestamp::from_ms(95_000));
    let r95 = target_kbps_now(&mut sim, 95.0);
    dump(sim.samples());
    // The measured values, for `cargo test --test gcc_fidelity -- --nocapture`.
    eprintln!("UpdatesTargetRateBasedOnLinkCapacity: {r25:.0} / {r45:.0} / {r95:.0} kbps");
    assert!((r25 - 450.0).abs() <= 100.0, "500 kbps link, 25 s: target {r25:.0} kbps");
    assert!((r45 - 750.0).abs() <= 150.0, "800 kbps link, 45 s: target {r45:.0} kbps");
    assert!((r95 - 90.0).abs() <= 25.0, "100 kbps link, 95 s: target {r95:.0} kbps");
}

/// The target the sender's congestion controller has now.
fn target_kbps_now(sim: &mut Simulation, t_s: f64) -> f64 {
    target_kbps_at(sim.samples(), t_s)
}

/// libwebrtc M119, goog_cc_network_control_unittest.cc, `StableEstimateDoesNotVaryInSteadyState`
/// (the target part): 500 kbps, 100 ms each way, default rates; after 30 s, the target sampled
/// once a second for 20 s dips by at least the 15 % back-off (min / max < 0.85).
#[test]
fn googcc_scenario_target_backs_off_in_steady_state() {
    let scheme = webrtc_with_rates(300, 5, 200_000);
    let mut sim = simulation(scheme, "constant:0.5", 50.0, 100.0, (320, 180));
    sim.run_until(Timestamp::from_ms(50_000));
    let targets: Vec<f64> = (30..50).map(|t| target_kbps_at(sim.samples(), t as f64)).collect();
    let (min, max) =
        targets.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &t| (lo.min(t), hi.max(t)));
    eprintln!("steady state 30-50 s: target {min:.0}-{max:.0} kbps, min/max {:.3}", min / max);
    assert!(min / max < 0.85, "min/max target over 30-50 s: {min:.0}/{max:.0} = {:.3}", min / max);
}

/// Vidaptive (NINeS '26) §2.1 measured real WebRTC (M108, VP8) on a link alternating 2 Mbps
/// and 0.5 Mbps every 40 s, 50 ms minimum RTT, deep buffer: GCC took about 18 s to climb from
/// 0.5 to 2 Mbps and used about 85 % of the link in the steady state; after each drop latency
/// exceeded 1 s and took about 12 s to stabilise. Bands: 15-22 s to 90 % of 2 Mbps, 80-92 %
/// utilisation over the last 15 s of the 2 Mbps phase, a post-drop peak above 1 s, 6-18 s
/// until frames are below 200 ms again. The 640x360 model encoder stands in for their VP8,
/// whose rate control libwebrtc trusts, so the media-optimisation frame dropper is off.
///
/// The climb, the utilisation and the peak match. The 12 s does not: with the
/// VideoStreamEncoder's congestion-window frame drop, which both M108 and M119 have by
/// default (`DropFrame:true`), latency is back below 200 ms 2-3 s after each drop; only
/// without that drop does it take 12-16 s. Why real M108 did not drain faster is not known
/// (see the README's list of deviations); the test pins both behaviours.
#[test]
fn vidaptive_m108_measurement_two_and_half_mbps_alternating() {
    let run = |cwnd_pushback: bool| {
        let mut scheme = webrtc_with_rates(300, 5, 200_000);
        scheme.frame_drop.frame_dropper = false; // VP8: a trusted rate controller
        scheme.frame_drop.cwnd_pushback = cwnd_pushback;
        let mut sim = simulation(scheme, "alternating:2,0.5,80", 160.0, 25.0, (640, 360));
        sim.run_until(Timestamp::from_ms(160_000));
        sim.finish()
    };
    let r = run(true);
    dump(&r.samples);
    // Phases: 2 Mbps on [0, 40) and [80, 120), 0.5 Mbps on [40, 80) and [120, 160). The climb
    // at 80 s (the one at the start is shortened by start-up probing here).
    let up = 80.0;
    let climbed = r
        .samples
        .iter()
        .find(|s| s.t_us as f64 >= up * 1e6 && s.target_rate_bps >= 1_800_000)
        .map(|s| s.t_us as f64 / 1e6 - up);
    assert!(
        climbed.is_some_and(|t| (15.0..=22.0).contains(&t)),
        "0.5 -> 2 Mbps at {up} s: target at 90 % after {climbed:?} s"
    );
    // "Even in the steady state, GCC limits utilization at about 85%": the phase's last 15 s,
    // after the climb.
    let util = utilization(&r.samples, up + 25.0, up + 40.0);
    eprintln!("M108 scenario: climb {climbed:?} s, steady utilisation {util:.3}");
    assert!((0.80..=0.92).contains(&util), "utilisation, steady 2 Mbps phase: {util:.3}");
    for down in [40.0, 120.0] {
        let (peak, settled) = after_drop(&r.frames, down);
        eprintln!("M108 scenario, drop at {down} s: peak {peak:.0} ms, settled {settled:?} s");
        assert!(peak > 1000.0, "peak latency after the drop at {down} s: {peak:.0} ms");
        assert!(
            settled.is_some_and(|t| t <= 4.0),
            "with the cwnd frame drop: below 200 ms again {settled:?} s after the drop at {down} s"
        );
    }
    let r = run(false);
    for down in [40.0, 120.0] {
        let (peak, settled) = after_drop(&r.frames, down);
        eprintln!("  without the cwnd drop, at {down} s: peak {peak:.0} ms, settled {settled:?} s");
        assert!(peak > 1000.0, "peak latency after the drop at {down} s: {peak:.0} ms");
        assert!(
            settled.is_some_and(|t| (6.0..=18.0).contains(&t)),
            "without it: below 200 ms again {settled:?} s after the drop at {down} s"
        );
    }
}

/// The peak latency (ms) of the frames captured in the 40 s after `down_s`, and how long
/// after `down_s` the first frame comes after which every frame of the next 2 s is shown
/// within 200 ms.
fn after_drop(frames: &[FrameRecord], down_s: f64) -> (f64, Option<f64>) {
    let after: Vec<&FrameRecord> = frames
        .iter()
        .filter(|f| (down_s * 1e6..(down_s + 40.0) * 1e6).contains(&(f.capture_us as f64)))
        .collect();
    let peak = after.iter().filter_map(|f| f.latency_us).max().unwrap_or(0) as f64 / 1e3;
    let settled = after.iter().position(|f| {
        after
            .iter()
            .filter(|g| g.capture_us >= f.capture_us && g.capture_us < f.capture_us + 2_000_000)
            .all(|g| g.latency_us.is_some_and(|l| l < 200_000))
    });
    (peak, settled.map(|i| after[i].capture_us as f64 / 1e6 - down_s))
}

/// Delivered over capacity between two times.
fn utilization(samples: &[Sample], from_s: f64, to_s: f64) -> f64 {
    let (mut delivered, mut capacity) = (0.0, 0.0);
    for s in samples {
        let t = s.t_us as f64 / 1e6;
        if t > from_s && t <= to_s {
            delivered += s.delivered_rate_bps as f64;
            capacity += s.link_capacity_bps as f64;
        }
    }
    delivered / capacity
}

/// With SLUICE_DEBUG set, prints the time series once a second (for investigating a failure).
fn dump(samples: &[Sample]) {
    if std::env::var_os("SLUICE_DEBUG").is_none() {
        return;
    }
    for s in samples.iter().step_by(50) {
        let col = |n: &str| s.columns.get(n).map(|v| format!("{v:?}")).unwrap_or_default();
        eprintln!(
            "{:6.1} s cap {:6.0} target {:6.0} enc {:6.0} kbps queue {:5.0} pacer {:5.0} ms \
             acked {} usage {} lce {} loss {} state {}",
            s.t_us as f64 / 1e6,
            s.link_capacity_bps as f64 / 1e3,
            s.target_rate_bps as f64 / 1e3,
            s.encoder_rate_bps as f64 / 1e3,
            s.queue_delay_us as f64 / 1e3,
            s.pacer_delay_us as f64 / 1e3,
            col("cc_acknowledged_rate_bps"),
            col("cc_usage"),
            col("cc_link_capacity_bps"),
            col("cc_loss_based_bps"),
            col("cc_loss_state"),
        );
    }
}

/// Start-up behind an outage: no delivery for 450 ms (common at the start of cellular
/// traces), then 9 Mbps. libwebrtc M119 (and Sluice) send the start-up probes at 900 kbps and
/// 1.8 Mbps into the outage; their packets wait in the bottleneck queue and leave back to
/// back at 9 Mbps, so each cluster's receive rate is 5-10x its send rate and
/// ProbeBitrateEstimator rejects both (receive/send ratio above kMaxValidRatio 2). The probe
/// controller stops waiting after 1 s (kMaxWaitingTimeForProbingResult); camera video has no
/// periodic ALR probing, nothing over-uses, so AIMD, without a link-capacity estimate,
/// increases multiplicatively by 8 % per second from the 300 kbps start: about
/// 300 x 1.08^4.5 = 0.42 Mbps at 5 s (the first feedback arrives at about 0.5 s), and
/// ln(9 / 0.3) / ln(1.08) = 44 s to reach the link rate. LossBasedBweV2 and the start-phase
/// loss rule only follow the delay-based estimate when nothing is lost. (M120 added a floor
/// on probe results, `WebRTC-Bwe-LimitProbesLowerThanThroughputEstimate`; M119 has it off.)
#[test]
fn start_up_behind_a_450_ms_outage_climbs_at_8_percent_per_second() {
    let scheme = webrtc_with_rates(300, 5, 200_000);
    let mut sim = simulation(scheme, "steps:0@0.45,9@60", 6.0, 20.0, (1280, 720));
    sim.run_until(Timestamp::from_ms(6_000));
    let samples = sim.samples();
    dump(samples);
    let at5 = target_kbps_at(samples, 5.0);
    eprintln!("start-up behind a 450 ms outage: target at 5 s {at5:.0} kbps");
    assert!((380.0..=470.0).contains(&at5), "target at 5 s: {at5:.0} kbps");
    // No probe result at all: both start-up clusters were rejected.
    let probed = samples
        .iter()
        .any(|s| !matches!(s.columns.get("cc_probe_result_bps"), Some(Value::Null) | None));
    assert!(!probed, "a start-up probe produced a result");
}

/// libwebrtc M119, goog_cc_network_control_unittest.cc, `CongestionWindowPushbackOnNetworkDelay`
/// and `CongestionWindowPushbackDropFrameOnNetworkDelay` (`QueueSize:800,MinBitrate:30000`):
/// 1 Mbps, 100 ms each way, start 300 kbps, limits 10-2000 kbps; after 10 s the link stops
/// delivering for 10 s; 3 s into the pause the rate the encoder is given is below 40 kbps
/// without DropFrame (pushback to its 30 kbps floor), and the target stays above 300 kbps with
/// DropFrame (the encoder's rate is only cut by dropping frames).
#[test]
fn googcc_scenario_congestion_window_pushback_on_network_delay() {
    let run = |drop_frame: bool| {
        let mut scheme = webrtc_with_rates(300, 10, 2000);
        let CcConfig::Gcc(gcc) = &mut scheme.cc else { panic!("webrtc runs GCC") };
        let cw = gcc.congestion_window.as_mut().expect("webrtc has pushback");
        cw.queue_size_ms = 800.0;
        cw.drop_frame = drop_frame;
        let mut sim = simulation(scheme, "steps:1@10,0@10,1@60", 14.0, 100.0, (320, 180));
        sim.run_until(Timestamp::from_ms(13_000));
        let s = sim.samples().last().expect("samples").clone();
        (s.target_rate_bps as f64 / 1e3, s.encoder_rate_bps as f64 / 1e3)
    };
    let (_, encoder_kbps) = run(false);
    eprintln!(
        "pushback, 3 s into the pause: encoder rate without DropFrame {encoder_kbps:.0} kbps"
    );
    assert!(encoder_kbps < 40.0, "without DropFrame: encoder rate {encoder_kbps:.0} kbps");
    let (target_kbps, encoder_kbps) = run(true);
    eprintln!(
        "  with DropFrame: target {target_kbps:.0} kbps, encoder rate {encoder_kbps:.0} kbps"
    );
    assert!(target_kbps > 300.0, "with DropFrame: target {target_kbps:.0} kbps");
    assert_eq!(encoder_kbps, target_kbps, "with DropFrame the encoder rate is the target");
}
