//! Co-RTV scenarios on the model encoder (60 fps, sender-bottleneck 20 ms one way,
//! bottleneck-receiver 5 ms one way, unlimited queue, seeded; Co-RTV §V-A): what the issue's
//! acceptance asks of the whole pipeline. Numbers: `cargo test --release -p sluice-core
//! --test cortv -- --nocapture`.

use sluice_core::columns::Value;
use sluice_core::encoder::model::ModelEncoderConfig;
use sluice_core::link::bottleneck::BottleneckConfig;
use sluice_core::link::frame_drop::{CoRtvBottleneckConfig, Decision, FrameDroppingBottleneck};
use sluice_core::link::trace::Trace;
use sluice_core::link::trace_gen::{generate, TraceSpec};
use sluice_core::metrics::FrameRecord;
use sluice_core::session::{build_encoder, EncoderConfig, PathConfig, RunConfig};
use sluice_core::sim::{RunResult, Simulation};
use sluice_core::units::{TimeDelta, Timestamp};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const STEP: &str = "steps:20@4,2@10";
const STEP_US: i64 = 4_000_000;
const FPS: f64 = 60.0;

fn trace(spec: &str, seconds: f64) -> Arc<Trace> {
    let spec = TraceSpec::parse_cli(spec).expect("valid spec");
    Arc::new(generate(&spec, TimeDelta::from_secs_f64(seconds)).expect("trace"))
}

/// The paper's topology (§V-A, brief A1): d_sb 20 ms, d_br 5 ms (RTT 10 ms), 60 fps; the
/// model encoder with its default single reference (the Co-RTV schemes raise it to 8).
fn config(scheme: &str, seconds: f64) -> RunConfig {
    RunConfig {
        scheme_name: scheme.into(),
        seed: 1,
        duration_s: seconds,
        fps: FPS,
        encoder: EncoderConfig::Model(ModelEncoderConfig::default()),
        downlink: PathConfig { delay_ms: 5.0, access_delay_ms: 20.0, ..Default::default() },
        uplink: PathConfig { delay_ms: 5.0, ..Default::default() },
        ..Default::default()
    }
}

fn with_bottleneck(mut cfg: RunConfig, bn: CoRtvBottleneckConfig) -> RunConfig {
    let mut scheme = cfg.resolve_scheme().unwrap();
    scheme.bottleneck = BottleneckConfig::CoRtv(bn);
    cfg.scheme = Some(scheme);
    cfg
}

/// Runs `cfg` on `spec`; the bottleneck's drop decisions too, if it drops frames.
fn run(cfg: &RunConfig, spec: &str) -> (RunResult, Vec<Decision>) {
    let t = trace(spec, cfg.duration_s + 5.0);
    let mut sim = Simulation::new(cfg, Some(t), None, build_encoder(cfg).expect("model encoder"))
        .expect("valid config");
    sim.run_until(Timestamp::from_secs_f64(cfg.duration_s + 3.0));
    let decisions = sim
        .downlink_mut()
        .discipline_as::<FrameDroppingBottleneck>()
        .map(|b| b.decisions().to_vec())
        .unwrap_or_default();
    (sim.finish(), decisions)
}

/// The capture time of each slot, in slot order (as `metrics::slot_latencies` lists them).
fn slot_captures(r: &RunResult) -> Vec<i64> {
    let mut slots: BTreeMap<u64, i64> = BTreeMap::new();
    for s in &r.skips {
        slots.entry(s.source_index).or_insert(s.capture_us);
    }
    for f in &r.frames {
        slots.entry(f.source_index).or_insert(f.capture_us);
    }
    slots.into_values().collect()
}

fn latencies_ms(frames: &[FrameRecord], from_us: i64, to_us: i64) -> Vec<f64> {
    let mut v: Vec<f64> = frames
        .iter()
        .filter(|f| f.capture_us >= from_us && f.capture_us < to_us)
        .filter_map(|f| f.latency_us)
        .map(|l| l as f64 / 1e3)
        .collect();
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

fn p(v: &[f64], q: f64) -> f64 {
    sluice_core::stats::percentile(v, q)
}

fn is_true(f: &FrameRecord, col: &str) -> bool {
    f.columns.get(col) == Some(&Value::Bool(true))
}

/// The §III-A bound on a displayed frame's latency after the step (brief S1): the latency
/// before the step, plus the cost of replacing a dropped frame `T' + Q_d` (Eq. 3, 4; the
/// largest `Q_d` the bottleneck computed), plus the re-encodes' encode time and one frame's
/// serialisation at the new rate.
struct Bound {
    base_ms: f64,
    t_prime_ms: f64,
    q_d_ms: f64,
    reencode_ms: f64,
    one_frame_ms: f64,
}

impl Bound {
    fn total(&self) -> f64 {
        self.base_ms + self.t_prime_ms + self.q_d_ms + self.reencode_ms + self.one_frame_ms
    }
}

fn bound(r: &RunResult, decisions: &[Decision]) -> Bound {
    let before = latencies_ms(&r.frames, STEP_US - 2_000_000, STEP_US);
    let rtt_bn = decisions[0].cost.rtt_bn.as_secs_f64() * 1e3;
    let q_d = decisions
        .iter()
        .map(|d| d.cost.alpha * (d.cost.bw_old.as_bps_f64() / d.cost.bw.as_bps_f64() - 1.0) / FPS)
        .fold(0.0, f64::max);
    let reencode_ms: f64 = r
        .frames
        .iter()
        .filter(|f| f.capture_us >= STEP_US && is_true(f, "cortv_reencode"))
        .map(|f| (f.encode_end_us - f.encode_start_us) as f64 / 1e3)
        .sum();
    // One frame (the median P frame of the last second before the step) at 2 Mbps.
    let mut sizes: Vec<f64> = r
        .frames
        .iter()
        .filter(|f| f.capture_us >= STEP_US - 1_000_000 && f.capture_us < STEP_US && !f.is_keyframe)
        .map(|f| f.size_bytes as f64)
        .collect();
    sizes.sort_by(|a, b| a.total_cmp(b));
    Bound {
        base_ms: p(&before, 50.0),
        t_prime_ms: rtt_bn + 2e3 / FPS,
        q_d_ms: q_d * 1e3,
        reencode_ms,
        one_frame_ms: p(&sizes, 50.0) * 8.0 / 2e6 * 1e3,
    }
}

/// The chain: every displayed frame that is not a keyframe predicts from a displayed frame.
fn chain_intact(frames: &[FrameRecord]) -> bool {
    let displayed: BTreeSet<u64> =
        frames.iter().filter(|f| f.displayed_us.is_some()).map(|f| f.frame_id).collect();
    frames
        .iter()
        .filter(|f| f.displayed_us.is_some() && !f.is_keyframe)
        .all(|f| f.ref_frame_id.is_some_and(|r| displayed.contains(&r)))
}

#[test]
fn a_20_to_2_mbps_step_co_rtv_against_copa() {
    // The paper's COPA: XQUIC's Copa with Salsify's encoder integration.
    let (copa, _) = run(&config("copa-salsify", 7.0), STEP);
    let (r, decisions) = run(&config("co-rtv", 7.0), STEP);
    let s = &r.summary;
    let copa_p95 = p(&latencies_ms(&copa.frames, STEP_US, 7_000_000), 95.0);
    // Over every capture slot (skipped slots count until the next frame shown), 4 to 6.5 s.
    let all_p95 = |r: &RunResult| {
        let end = Timestamp::from_secs_f64(r.summary.duration_s + 3.0);
        let mut v: Vec<f64> = sluice_core::metrics::slot_latencies(&r.frames, &r.skips, end)
            .iter()
            .zip(slot_captures(r))
            .filter(|(_, c)| (STEP_US..6_500_000).contains(c))
            .map(|((l, _), _)| *l as f64 / 1e3)
            .collect();
        v.sort_by(|a, b| a.total_cmp(b));
        p(&v, 95.0)
    };
    let (all, copa_all) = (all_p95(&r), all_p95(&copa));
    let after = latencies_ms(&r.frames, STEP_US, 7_000_000);
    let b = bound(&r, &decisions);
    let first = decisions.first().expect("a drop decision");
    let first_ms = (first.time.as_us() - STEP_US) as f64 / 1e3;
    eprintln!(
        "co-rtv on 20 -> 2 Mbps: first drop decided {first_ms:.1} ms after the step (frame {}, \
         predicted {}), {} decisions; P95 after the step {:.1} ms vs copa {copa_p95:.1} ms \
         ({:.0} % lower); max {:.1} ms vs the III-A bound {:.1} ms (base {:.1} + T' {:.1} + Q_d \
         {:.1} + re-encodes {:.1} + one frame {:.1}); keyframes {}, keyframe requests {}, RTX {}, \
         loss_rate {}, bn_drop_rate {:.4}, frames dropped at the BN {}",
        first.frame_id,
        first.predicted,
        decisions.len(),
        p(&after, 95.0),
        100.0 * (1.0 - p(&after, 95.0) / copa_p95),
        after.last().unwrap(),
        b.total(),
        b.base_ms,
        b.t_prime_ms,
        b.q_d_ms,
        b.reencode_ms,
        b.one_frame_ms,
        s.keyframes,
        r.keyframe_requests,
        s.retransmissions,
        s.loss_rate,
        s.bn_drop_rate,
        s.frames_bn_dropped,
    );
    // Drops decided within w + one frame interval of the step.
    assert!(first.time.as_us() >= STEP_US, "no drop before the step: {first_ms}");
    assert!(first_ms <= 50.0 + 1e3 / FPS, "{first_ms}");
    // P95 of the displayed frames at least 50 % below the baseline's, and lower over every
    // capture slot too (measured: 0.24x and 0.56x; Co-RTV's frames are shown, the baseline's
    // Salsify stage skips fewer but they wait longer).
    eprintln!("all-slot P95 4-6.5 s: co-rtv {all:.1} ms, copa-salsify {copa_all:.1} ms");
    assert!(p(&after, 95.0) <= 0.5 * copa_p95, "{} vs {copa_p95}", p(&after, 95.0));
    assert!(all < copa_all, "{all} vs {copa_all}");
    // One keyframe (the first), none asked for; no retransmission (the network lost
    // nothing, so any would be of a dropped frame); drops counted apart from loss.
    assert_eq!(s.keyframes, 1);
    assert_eq!(r.keyframe_requests, 0);
    assert_eq!(s.retransmissions, 0);
    assert_eq!(s.loss_rate, 0.0);
    assert!(s.bn_drop_rate > 0.0 && s.frames_bn_dropped > 0);
    // The receiver displays re-encoded frames and the chain never breaks.
    let shown_reencodes = r
        .frames
        .iter()
        .filter(|f| is_true(f, "cortv_reencode") && f.displayed_us.is_some())
        .count();
    assert!(shown_reencodes > 0);
    assert!(chain_intact(&r.frames));
    // Every capture slot is displayed once (all dropped frames were re-encoded, QSF 0) or
    // was skipped by the Salsify stage while the window had no room ...
    let mut shown: BTreeMap<u64, usize> = BTreeMap::new();
    for f in r.frames.iter().filter(|f| f.displayed_us.is_some()) {
        *shown.entry(f.source_index).or_default() += 1;
    }
    let skipped: BTreeSet<u64> =
        r.skips.iter().filter(|s| s.reason == "salsify-no-room").map(|s| s.source_index).collect();
    assert_eq!(skipped.len(), r.skips.len(), "only the Salsify stage skips");
    let slots = r.frames.iter().map(|f| f.source_index).max().unwrap();
    let missing: Vec<u64> =
        (0..slots).filter(|i| !shown.contains_key(i) && !skipped.contains(i)).collect();
    assert!(missing.len() <= 2, "slots never shown: {missing:?}");
    assert!(shown.values().all(|&n| n == 1));
    // ... and no frame the bottleneck dropped is displayed.
    assert!(r.frames.iter().filter(|f| is_true(f, "bn_dropped")).all(|f| f.displayed_us.is_none()));
}

/// The §III-A bound assumes the bottleneck knows the new rate when it decides ("immediately
/// when the bandwidth drops", §III-B4), as the paper's emulation did by reading the TC
/// setting (§V-B). Under that estimate (`link-rate`) it holds for k = 0 and for the paper's
/// k = 2. On the measured mean it holds when the decision is taken at a frame's arrival
/// (k = 0, Sluice's default; w = 20 and 50 ms), and not for k = 2 at w = 50 ms: the first
/// decision, two frames ahead, comes from a mean still above the new rate, keeps frames
/// queued ahead of D, D cannot move back, and what arrives behind them waits (390 ms against
/// a bound of 364 ms). That violation is a finding (docs/results/cortv.md), asserted here so a
/// change to it is noticed.
#[test]
fn the_latency_bound_after_the_step() {
    use sluice_core::link::bandwidth::BwSource::{Capacity, LinkRate};
    for (bw_source, window_ms, k, holds) in [
        (LinkRate, 50.0, 0u32, true),
        (LinkRate, 50.0, 2, true),
        (Capacity, 50.0, 0, true),
        (Capacity, 20.0, 0, true),
        (Capacity, 50.0, 2, false),
    ] {
        let cfg = with_bottleneck(
            config("co-rtv", 7.0),
            CoRtvBottleneckConfig {
                lookahead_frames: k,
                window_ms,
                bw_source,
                ..Default::default()
            },
        );
        let (r, decisions) = run(&cfg, STEP);
        let after = latencies_ms(&r.frames, STEP_US, 7_000_000);
        let b = bound(&r, &decisions);
        let max = *after.last().unwrap();
        let over =
            after.iter().filter(|&&l| l > b.total()).count() as f64 / after.len() as f64 * 100.0;
        eprintln!(
            "Bw {bw_source:?}, w = {window_ms} ms, k = {k}: max latency after the step {max:.1} \
             ms, bound {:.1} ms, {over:.1} % of frames over it, P95 {:.1} ms, {} decisions",
            b.total(),
            p(&after, 95.0),
            decisions.len()
        );
        let case = format!("{bw_source:?}, w = {window_ms} ms, k = {k}");
        if holds {
            assert!(max <= b.total(), "{case}: {max} > {}", b.total());
        } else {
            assert!(max > b.total(), "{case}: the bound now holds ({max} <= {})", b.total());
        }
    }
}

#[test]
fn no_drops_on_a_constant_link() {
    for scheme in ["co-rtv", "co-rtv-nofb"] {
        let (r, decisions) = run(&config(scheme, 10.0), "constant:12");
        let (copa, _) = run(&config("copa", 10.0), "constant:12");
        eprintln!(
            "{scheme} on a constant 12 Mbps: {} decisions, bn_drop_rate {}, utilisation {:.3} \
             (copa {:.3}), P95 {:.1} ms (copa {:.1})",
            decisions.len(),
            r.summary.bn_drop_rate,
            r.summary.utilization,
            copa.summary.utilization,
            r.summary.latency_ms.p95,
            copa.summary.latency_ms.p95
        );
        assert!(decisions.is_empty());
        assert_eq!(r.summary.bn_drop_rate, 0.0);
        assert_eq!(r.summary.frames_bn_dropped, 0);
        assert_eq!(r.summary.keyframes, 1);
    }
}

/// The same seed gives the same run; FDCC reads the oracle and never drops.
#[test]
fn deterministic_and_fdcc_drops_nothing() {
    let cfg = config("co-rtv", 6.0);
    let (a, _) = run(&cfg, STEP);
    let (b, _) = run(&cfg, STEP);
    assert_eq!(
        serde_json::to_string(&a.summary).unwrap(),
        serde_json::to_string(&b.summary).unwrap()
    );
    let (f, decisions) = run(&config("fdcc", 6.0), STEP);
    assert!(decisions.is_empty());
    assert_eq!(f.summary.bn_drop_rate, 0.0);
    assert_eq!(f.summary.keyframes, 1);
}
