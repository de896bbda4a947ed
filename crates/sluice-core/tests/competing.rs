//! Competing traffic at the bottleneck (issue 29): several flows over one link, per-flow
//! accounting, Jain's index, the queue disciplines, and the issue's acceptance cases.

use sluice_core::columns::Value;
use sluice_core::cross::CompetingFlow;
use sluice_core::link::trace::Trace;
use sluice_core::metrics::FlowSummary;
use sluice_core::session::{build_encoder, PathConfig, QueueDisciplineKind, RunConfig};
use sluice_core::sim::{RunResult, Simulation};
use sluice_core::units::{DataRate, TimeDelta};
use std::sync::Arc;

/// The acceptance path: a constant 4 Mbps link, a 60 kB queue, 25 ms one way.
fn accept_path(queue: QueueDisciplineKind) -> PathConfig {
    PathConfig {
        queue_bytes: Some(60_000),
        delay_ms: 25.0,
        queue_discipline: queue,
        ..Default::default()
    }
}

fn run_with(scheme: &str, competing: &[&str], seconds: f64, downlink: PathConfig) -> RunResult {
    let cfg = RunConfig {
        scheme_name: scheme.into(),
        duration_s: seconds,
        downlink,
        uplink: PathConfig { delay_ms: 25.0, ..Default::default() },
        competing: competing.iter().map(|s| CompetingFlow::parse(s).unwrap()).collect(),
        ..Default::default()
    };
    let t =
        Arc::new(Trace::constant(DataRate::from_mbps(4), TimeDelta::from_secs_f64(seconds + 5.0)));
    Simulation::new(&cfg, Some(t), None, build_encoder(&cfg).unwrap()).unwrap().run()
}

fn show(flows: &[FlowSummary]) -> String {
    flows
        .iter()
        .map(|f| {
            format!(
                "{}:{} {:.2} Mbps share {:.3} q95 {:?} ms loss {:.4}",
                f.kind,
                f.scheme,
                f.mean_rate_bps / 1e6,
                f.share,
                f.queue_delay_ms_p95,
                f.loss_rate
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Each flow's mean rate (from its `flow<ID>_rate_bps` column) over `(from_s, to_s]`.
/// The session's mean send rate over the samples in (`from_s`, `to_s`].
fn mean_send_rate(r: &RunResult, from_s: f64, to_s: f64) -> f64 {
    let v: Vec<f64> = r
        .samples
        .iter()
        .filter(|s| s.t_us as f64 / 1e6 > from_s && s.t_us as f64 / 1e6 <= to_s)
        .map(|s| s.send_rate_bps as f64)
        .collect();
    v.iter().sum::<f64>() / v.len() as f64
}

fn rates_between(r: &RunResult, flows: usize, from_s: f64, to_s: f64) -> Vec<f64> {
    (0..flows)
        .map(|f| {
            let name = format!("flow{f}_rate_bps");
            let v: Vec<f64> = r
                .samples
                .iter()
                .filter(|s| {
                    let t = s.t_us as f64 / 1e6;
                    t > from_s && t <= to_s
                })
                .map(|s| match s.columns.get(&name) {
                    Some(Value::Int(x)) => *x as f64,
                    other => panic!("{name}: {other:?}"),
                })
                .collect();
            v.iter().sum::<f64>() / v.len() as f64
        })
        .collect()
}

/// Issue 29's first acceptance case: two `webrtc` flows (the second from 10 s) share a
/// 4 Mbps link with a 60 kB queue fairly: Jain's index over 20-90 s at least 0.8.
#[test]
fn two_webrtc_flows_share_the_bottleneck_fairly() {
    let r =
        run_with("webrtc", &["media:webrtc@10"], 90.0, accept_path(QueueDisciplineKind::Droptail));
    let s = &r.summary;
    let flows = s.flows.as_ref().expect("flows");
    eprintln!("jain {:?} | {}", s.jain_index, show(flows));
    let jain = s.jain_index.expect("jain_index");
    assert!(jain >= 0.8, "Jain's index {jain:.3}: {}", show(flows));
    // The same index from the time series (all flows active from 10 s, 10 s warm-up).
    let rates = rates_between(&r, 2, 20.0, 90.0);
    let j = rates.iter().sum::<f64>().powi(2) / (2.0 * rates.iter().map(|x| x * x).sum::<f64>());
    assert!((j - jain).abs() < 0.01, "{j} vs {jain}");
    // The newcomer is not starved: at least a third of the link in the last 30 s.
    let late = rates_between(&r, 2, 60.0, 90.0);
    assert!(late[1] > 4e6 / 3.0 * 0.9, "{late:?}");
}

/// Issue 29's second acceptance case: `webrtc` against one CUBIC flow from 10 s should keep
/// at least 20 % of the bottleneck while they compete (20-90 s, after the 10 s warm-up).
///
/// Our GCC (libwebrtc M119's goog_cc) does NOT: it keeps 15-19 % (seeds 1-5: 0.194, 0.187,
/// 0.174, 0.194, 0.152), and this test asserts that, so a change either way shows. Why:
/// CUBIC fills the 60 kB drop-tail queue (about 120 ms, 2.4 BDP) and keeps a standing queue
/// of ~100 ms whose growth phases GCC's trendline detector reads as overuse; every overuse
/// cuts GCC's estimate to 0.85 x the acknowledged rate, and near its own link-capacity
/// estimate GCC only grows additively (a packet per response time, RTT + 100 ms: tens of
/// kbps per second at a 170 ms RTT), so its target falls from 3.3 Mbps to ~450 kbps by
/// 45 s and climbs back to only ~1 Mbps by 85 s. Loss plays no part: the media flow loses
/// ~0.2 % of its packets, under the loss-based estimator's threshold, so its bound never
/// binds (`cc_loss_based_bps` = target). This is the known starvation of delay-based
/// congestion control by loss-based TCP over a deep buffer (RFC 8867 §5.6's case; the
/// adaptive threshold of Carlucci et al., ToN 2017, only mitigates it). GCC is not tuned
/// here to pass.
#[test]
fn webrtc_against_cubic_keeps_15_to_20_percent_not_the_issues_20() {
    let r = run_with("webrtc", &["tcp:cubic@10"], 90.0, accept_path(QueueDisciplineKind::Droptail));
    let flows = r.summary.flows.as_ref().expect("flows");
    let rates = rates_between(&r, 2, 20.0, 90.0);
    let share = rates[0] / (rates[0] + rates[1]);
    eprintln!("webrtc share while competing {share:.3} ({rates:?}) | {}", show(flows));
    assert!(
        (0.12..0.20).contains(&share),
        "webrtc's share against CUBIC {share:.3} (0.194 when written; at 0.2 or more the \
         issue's acceptance case passes: make this assert it): {}",
        show(flows)
    );
    // The mechanism: delay-based back-off, not loss.
    assert!(flows[0].loss_rate < 0.01, "media loss {}", flows[0].loss_rate);
    // CUBIC fills the 60 kB queue (120 ms at 4 Mbps): both flows see it.
    for f in flows {
        let q = f.queue_delay_ms_p95.unwrap();
        assert!((90.0..=125.0).contains(&q), "{}: P95 queueing {q} ms", f.scheme);
    }
    assert!(flows[1].loss_rate > 0.0, "a full drop-tail queue drops CUBIC's packets");
}

/// FQ-CoDel isolates the media flow from the bulk flow's queue (RFC 8290 §1): its P95
/// queueing delay falls from the full buffer to a few ms, and the two split the link.
#[test]
fn fq_codel_isolates_webrtc_from_cubic() {
    let tail =
        run_with("webrtc", &["tcp:cubic@10"], 60.0, accept_path(QueueDisciplineKind::Droptail));
    let fq = run_with("webrtc", &["tcp:cubic@10"], 60.0, accept_path(QueueDisciplineKind::FqCodel));
    let q =
        |r: &RunResult, i: usize| r.summary.flows.as_ref().unwrap()[i].queue_delay_ms_p95.unwrap();
    assert!(q(&tail, 0) > 90.0, "drop-tail: {}", q(&tail, 0));
    assert!(q(&fq, 0) < 20.0, "fq-codel: {}", q(&fq, 0));
    // CoDel keeps the bulk flow's own queue near its 5 ms target too (P95 within ~30 ms).
    assert!(q(&fq, 1) < 40.0, "fq-codel, cubic: {}", q(&fq, 1));
    let jain = fq.summary.jain_index.unwrap();
    assert!(jain > 0.95, "fq-codel Jain {jain:.3}");
}

/// Per-flow accounting adds up: the flows' delivered bytes are the link's, the shares sum
/// to one, and the session's own keys are flow 0's (its loss, its delivered rate).
#[test]
fn per_flow_accounting_adds_up_and_the_main_keys_stay_the_main_flows() {
    let r = run_with(
        "webrtc",
        &["tcp:newreno@5-25", "media:copa@3"],
        30.0,
        accept_path(QueueDisciplineKind::Droptail),
    );
    let s = &r.summary;
    let flows = s.flows.as_ref().unwrap();
    assert_eq!(flows.len(), 3);
    assert_eq!((flows[1].kind.as_str(), flows[1].scheme.as_str()), ("tcp", "newreno"));
    assert_eq!((flows[2].kind.as_str(), flows[2].scheme.as_str()), ("media", "copa"));
    assert_eq!(flows[1].stop_s, Some(25.0));
    let shares: f64 = flows.iter().map(|f| f.share).sum();
    assert!((shares - 1.0).abs() < 1e-9, "{shares}");
    assert_eq!(s.loss_rate, flows[0].loss_rate, "the session's loss is its own");
    // Per sample: the session's delivered rate is its flow's column.
    for smp in &r.samples {
        let Some(Value::Int(own)) = smp.columns.get("flow0_rate_bps") else { panic!() };
        assert_eq!(*own, smp.delivered_rate_bps);
    }
    // The NewReno flow sends nothing before 5 s or after 25 s (what it sent before 25 s
    // may still leave the 120 ms queue and the 25 ms of propagation after).
    let before = rates_between(&r, 3, 0.0, 5.0);
    let after = rates_between(&r, 3, 25.3, 30.0);
    assert_eq!(before[1], 0.0);
    assert_eq!(after[1], 0.0);
    assert_eq!(rates_between(&r, 3, 0.0, 3.0)[2], 0.0, "media:copa starts at 3 s");
    assert!(rates_between(&r, 3, 3.0, 5.0)[2] > 0.0);
    // Jain's index covers 15-25 s (the last start at 5 s plus the warm-up, to the first
    // stop at 25 s).
    let rates = rates_between(&r, 3, 15.0, 25.0);
    let j = rates.iter().sum::<f64>().powi(2) / (3.0 * rates.iter().map(|x| x * x).sum::<f64>());
    assert!((j - s.jain_index.unwrap()).abs() < 0.01, "{j} vs {:?}", s.jain_index);
    // Deterministic.
    let again = run_with(
        "webrtc",
        &["tcp:newreno@5-25", "media:copa@3"],
        30.0,
        accept_path(QueueDisciplineKind::Droptail),
    );
    assert_eq!(again.summary, r.summary);
}

/// Without competing flows the summary has no `flows` and no `jain_index`, and the samples
/// no per-flow columns (single-flow results keep their format).
#[test]
fn a_single_flow_run_has_no_flow_keys() {
    let r = run_with("webrtc", &[], 5.0, accept_path(QueueDisciplineKind::Droptail));
    assert!(r.summary.flows.is_none() && r.summary.jain_index.is_none());
    let json = serde_json::to_value(&r.summary).unwrap();
    assert!(json.get("flows").is_none() && json.get("jain_index").is_none());
    assert!(r.samples.iter().all(|s| s.columns.get("flow0_rate_bps").is_none()));
}

#[test]
fn bad_competing_configs_are_refused_with_the_reason() {
    let base = RunConfig { duration_s: 20.0, ..Default::default() };
    let cases: [(RunConfig, &str); 4] = [
        (
            RunConfig {
                competing: vec![CompetingFlow::parse("media:nosuch").unwrap()],
                ..base.clone()
            },
            "unknown scheme 'nosuch'",
        ),
        (
            RunConfig {
                competing: vec![CompetingFlow::parse("tcp:cubic@30").unwrap()],
                ..base.clone()
            },
            "starts at 30 s",
        ),
        (
            RunConfig {
                competing: vec![CompetingFlow::parse("media:co-rtv").unwrap()],
                ..base.clone()
            },
            "needs its own bottleneck",
        ),
        (
            RunConfig {
                scheme_name: "co-rtv".into(),
                downlink: PathConfig {
                    queue_discipline: QueueDisciplineKind::Codel,
                    ..Default::default()
                },
                ..base.clone()
            },
            "needs a scheme with a plain drop-tail bottleneck",
        ),
    ];
    for (cfg, says) in cases {
        let e = cfg.validate().unwrap_err().0;
        assert!(e.contains(says), "{e}");
    }
    let bad: Result<RunConfig, _> = serde_json::from_str(r#"{"competing": ["tcp:vegas"]}"#);
    let e = bad.unwrap_err().to_string();
    assert!(e.contains("bad competing flow 'tcp:vegas'"), "{e}");
}

/// Short TCP flows (RFC 8867 §5.7) take their part of the link while they download and are
/// left out of Jain's index (their demand is finite and on and off).
#[test]
fn short_tcp_flows_download_and_stay_out_of_the_index() {
    let r = run_with(
        "webrtc",
        &["short-tcp", "short-tcp@5", "media:webrtc@2"],
        40.0,
        accept_path(QueueDisciplineKind::Droptail),
    );
    let s = &r.summary;
    let flows = s.flows.as_ref().unwrap();
    assert_eq!((flows[1].kind.as_str(), flows[1].scheme.as_str()), ("short-tcp", "cubic"));
    assert_eq!(flows[2].start_s, 5.0);
    for f in &flows[1..3] {
        // A few 30-50 KB downloads in 35-40 s, one per ~10 s idle: tens of kbps on average.
        assert!(f.mean_rate_bps > 10e3 && f.mean_rate_bps < 400e3, "{}", f.mean_rate_bps);
    }
    assert!(rates_between(&r, 4, 0.0, 4.9)[2] == 0.0, "short-tcp@5 waits for 5 s");
    // Jain's index: flows 0 and 3 only, from 12 s (the last long start, 2 s, plus 10 s).
    let rates = rates_between(&r, 4, 12.0, 40.0);
    let (a, b) = (rates[0], rates[3]);
    let j = (a + b).powi(2) / (2.0 * (a * a + b * b));
    assert!((j - s.jain_index.unwrap()).abs() < 0.01, "{j} vs {:?}", s.jain_index);
}

/// BBR (v1) against `webrtc`: its model keeps the shared drop-tail queue below the full
/// buffer CUBIC keeps (its own packets' P95 queueing delay well under 120 ms), and being
/// loss-agnostic it loses far more than CUBIC under FQ-CoDel's drops.
#[test]
fn bbr_keeps_the_queue_below_cubics_and_ignores_codels_drops() {
    let p95 =
        |r: &RunResult, i: usize| r.summary.flows.as_ref().unwrap()[i].queue_delay_ms_p95.unwrap();
    let loss = |r: &RunResult, i: usize| r.summary.flows.as_ref().unwrap()[i].loss_rate;
    let bbr = run_with("webrtc", &["tcp:bbr@10"], 60.0, accept_path(QueueDisciplineKind::Droptail));
    let cubic =
        run_with("webrtc", &["tcp:cubic@10"], 60.0, accept_path(QueueDisciplineKind::Droptail));
    assert!(p95(&bbr, 1) < 0.8 * p95(&cubic, 1), "{} vs {}", p95(&bbr, 1), p95(&cubic, 1));
    let rates = rates_between(&bbr, 2, 20.0, 60.0);
    assert!(rates[0] + rates[1] > 0.85 * 4e6, "the two fill the link: {rates:?}");
    let bbr_fq =
        run_with("webrtc", &["tcp:bbr@10"], 60.0, accept_path(QueueDisciplineKind::FqCodel));
    let cubic_fq =
        run_with("webrtc", &["tcp:cubic@10"], 60.0, accept_path(QueueDisciplineKind::FqCodel));
    assert!(
        loss(&bbr_fq, 1) > 3.0 * loss(&cubic_fq, 1),
        "{} vs {}",
        loss(&bbr_fq, 1),
        loss(&cubic_fq, 1)
    );
}

/// `media:self` is the session's own scheme, its composition included.
#[test]
fn media_self_competes_with_the_sessions_own_composition() {
    let mut scheme = sluice_core::scheme::lookup("webrtc").unwrap().config;
    scheme.feedback_interval_ms = Some(100.0);
    let cfg = RunConfig {
        scheme_name: "my-webrtc".into(),
        scheme: Some(scheme),
        duration_s: 30.0,
        downlink: accept_path(QueueDisciplineKind::Droptail),
        competing: vec![CompetingFlow::parse("media:self@5").unwrap()],
        ..Default::default()
    };
    let t = Arc::new(Trace::constant(DataRate::from_mbps(4), TimeDelta::from_secs(35)));
    let r =
        Simulation::new(&cfg, Some(t.clone()), None, build_encoder(&cfg).unwrap()).unwrap().run();
    let flows = r.summary.flows.unwrap();
    assert_eq!(flows[1].scheme, "my-webrtc");
    assert!(flows[1].mean_rate_bps > 0.5e6, "{}", flows[1].mean_rate_bps);
    // The same flow spelled by its registry name differs only in the feedback interval,
    // which shows in the run.
    let named = RunConfig {
        competing: vec![CompetingFlow::parse("media:webrtc@5").unwrap()],
        ..cfg.clone()
    };
    let r2 = Simulation::new(&named, Some(t), None, build_encoder(&named).unwrap()).unwrap().run();
    assert_ne!(r2.summary.flows.unwrap()[1].mean_rate_bps, flows[1].mean_rate_bps);
}

/// A competing flow's own access delay (RFC 8867 §5.5's flows of different RTTs): its
/// datagrams reach the bottleneck that much later, and the summary records it.
#[test]
fn a_competing_flows_access_delay_delays_its_packets_to_the_bottleneck() {
    let cfg: RunConfig = serde_json::from_value(serde_json::json!({
        "duration_s": 6.0,
        "downlink": {"queue_bytes": 60000, "delay_ms": 25.0},
        "competing": [{"spec": "tcp:cubic@2", "access_delay_ms": 500.0}, "tcp:newreno@2"],
    }))
    .unwrap();
    let t = Arc::new(Trace::constant(DataRate::from_mbps(4), TimeDelta::from_secs(10)));
    let r = Simulation::new(&cfg, Some(t), None, build_encoder(&cfg).unwrap()).unwrap().run();
    // Delivered rates (after the 25 ms beyond the queue): NewReno (no access delay) from
    // 2.025 s; CUBIC not before 2.525 s (then behind NewReno's queue).
    assert!(rates_between(&r, 3, 2.0, 2.1)[2] > 0.0);
    assert_eq!(rates_between(&r, 3, 2.0, 2.52)[1], 0.0);
    assert!(rates_between(&r, 3, 2.5, 3.0)[1] > 0.0);
    let flows = r.summary.flows.unwrap();
    assert_eq!(flows[1].access_delay_ms, 500.0);
    assert_eq!(flows[2].access_delay_ms, 0.0);
    let bad = RunConfig {
        competing: vec![CompetingFlow { access_delay_ms: -1.0, ..flows_spec("tcp:cubic") }],
        ..Default::default()
    };
    assert!(bad.validate().unwrap_err().0.contains("access_delay_ms"));
}

fn flows_spec(s: &str) -> CompetingFlow {
    CompetingFlow::parse(s).unwrap()
}

/// ECN (issue 29, item 2): under FQ-CoDel with `ecn`, the CUBIC flow's packets (ECT(0))
/// are marked instead of dropped and CUBIC backs off on the marks as on losses; the media
/// flow (Not-ECT) is dropped as before.
#[test]
fn fq_codel_with_ecn_marks_the_tcp_flow_instead_of_dropping_it() {
    let mut path = accept_path(QueueDisciplineKind::FqCodel);
    let plain = run_with("webrtc", &["tcp:cubic@10"], 60.0, path.clone());
    path.ecn = true;
    let ecn = run_with("webrtc", &["tcp:cubic@10"], 60.0, path);
    let f = |r: &RunResult| r.summary.flows.clone().unwrap();
    assert!(f(&plain)[1].loss_rate > 0.005, "without ECN CoDel drops: {}", f(&plain)[1].loss_rate);
    assert!(f(&ecn)[1].loss_rate < 0.1 * f(&plain)[1].loss_rate, "{}", f(&ecn)[1].loss_rate);
    // CUBIC still responds (to the marks): its queue stays near CoDel's target and the
    // two still share.
    assert!(f(&ecn)[1].queue_delay_ms_p95.unwrap() < 40.0, "{:?}", f(&ecn)[1]);
    assert!(ecn.summary.jain_index.unwrap() > 0.9, "{:?}", ecn.summary.jain_index);
    let marks = ecn.samples.last().unwrap().columns.get("bn_codel_marks");
    assert!(matches!(marks, Some(Value::Int(n)) if *n > 10), "{marks:?}");
    // ECN needs an AQM.
    let bad = RunConfig {
        downlink: PathConfig { ecn: true, ..Default::default() },
        ..Default::default()
    };
    assert!(bad.validate().unwrap_err().0.contains("downlink.ecn marks with an AQM"));
}

/// RFC 8867 §5.3's bi-directional media: a `reverse-media` flow sends over the session's
/// uplink (2 Mbps here, the downlink 4) beside the session's feedback, and its feedback
/// crosses the bottleneck. Both flows take most of their own path; the reverse flow's
/// numbers are the uplink's, and Jain's index (forward flows only) has one flow: none.
#[test]
fn a_reverse_media_flow_uses_the_uplink_and_its_feedback_crosses_the_bottleneck() {
    let seconds = 40.0;
    let cfg = RunConfig {
        scheme_name: "webrtc".into(),
        duration_s: seconds,
        downlink: accept_path(QueueDisciplineKind::Droptail),
        uplink: PathConfig { delay_ms: 25.0, queue_bytes: Some(30_000), ..Default::default() },
        competing: vec![CompetingFlow::parse("reverse-media:self@2").unwrap()],
        ..Default::default()
    };
    let len = TimeDelta::from_secs_f64(seconds + 5.0);
    let down = Arc::new(Trace::constant(DataRate::from_mbps(4), len));
    let up = Arc::new(Trace::constant(DataRate::from_mbps(2), len));
    let r =
        Simulation::new(&cfg, Some(down), Some(up), build_encoder(&cfg).unwrap()).unwrap().run();
    let s = &r.summary;
    let flows = s.flows.as_ref().expect("flows");
    eprintln!("{}", show(flows));
    assert_eq!(flows[1].kind, "reverse-media");
    // Each flow alone on its link: all of its link's bytes (the uplink's feedback of flow 0
    // is not a flow of the uplink's table).
    assert_eq!(flows[0].share, 1.0);
    assert!(flows[1].share > 0.9, "{}", show(flows));
    let [fwd, back] = rates_between(&r, 2, 20.0, seconds)[..] else { unreachable!() };
    assert!((2.4e6..=4.0e6).contains(&fwd), "forward {fwd}");
    assert!((1.0e6..=2.0e6).contains(&back), "backward {back} on a 2 Mbps uplink");
    assert!(s.jain_index.is_some_and(f64::is_nan), "{:?}", s.jain_index);
    // The uplink's capacity is sampled beside the flows' rates (the trace's delivery
    // opportunities per interval: 2 Mbps on average).
    let up: Vec<f64> = r
        .samples
        .iter()
        .map(|s| match s.columns.get("uplink_capacity_bps") {
            Some(Value::Int(x)) => *x as f64,
            other => panic!("uplink_capacity_bps: {other:?}"),
        })
        .collect();
    let mean = up.iter().sum::<f64>() / up.len() as f64;
    assert!((mean - 2e6).abs() < 0.02e6, "{mean}");
    // The session's feedback got through the loaded uplink: frames kept flowing.
    assert!(s.frames_displayed as f64 >= 0.9 * 30.0 * seconds, "{}", s.frames_displayed);
}

/// RFC 8867 §6.3's topology: a second bottleneck after the downlink; the session's flow
/// crosses both, one competing flow the first only, one the second only. Each bottleneck
/// carries what crosses it and no more, and the shares are of each flow's own bottleneck.
#[test]
fn a_second_bottleneck_carries_the_flows_that_cross_it() {
    use sluice_core::cross::Crosses;
    use sluice_core::session::SecondBottleneck;
    let seconds = 60.0;
    let mut second = CompetingFlow::parse("media:self").unwrap();
    second.crosses = Crosses::Second;
    let cfg = RunConfig {
        scheme_name: "webrtc".into(),
        duration_s: seconds,
        downlink: accept_path(QueueDisciplineKind::Droptail),
        uplink: PathConfig { delay_ms: 25.0, ..Default::default() },
        competing: vec![CompetingFlow::parse("media:self").unwrap(), second],
        second_bottleneck: Some(SecondBottleneck {
            rate_mbps: 2.0,
            queue_bytes: Some(30_000),
            delay_ms: 10.0,
        }),
        ..Default::default()
    };
    let t =
        Arc::new(Trace::constant(DataRate::from_mbps(4), TimeDelta::from_secs_f64(seconds + 5.0)));
    let r = Simulation::new(&cfg, Some(t), None, build_encoder(&cfg).unwrap()).unwrap().run();
    let flows = r.summary.flows.as_ref().expect("flows");
    eprintln!("{}", show(flows));
    let [r0, r1, r2] = rates_between(&r, 3, 20.0, seconds)[..] else { unreachable!() };
    // The second bottleneck (2 Mbps) carries flows 0 and 2, the first (4 Mbps) flows 0 and 1.
    assert!(r0 + r2 <= 2.0e6 * 1.02 && r0 + r2 >= 1.4e6, "second: {r0} + {r2}");
    assert!(r0 + r1 <= 4.0e6 * 1.02 && r1 > 1.5e6, "first: {r0} + {r1}");
    // Shares of each flow's own bottleneck: flows 0 and 2 split the second between them.
    assert!((flows[0].share + flows[2].share - 1.0).abs() < 1e-9, "{}", show(flows));
    assert!(flows[1].share > 0.4 && flows[1].share < 1.0, "{}", show(flows));
    // Jain's index is of the flows at the session's own (second) bottleneck, 0 and 2: flow
    // 1's rate is at another link, not a share of this one.
    let [j0, _, j2] = rates_between(&r, 3, 10.0, seconds)[..] else { unreachable!() };
    let jain = (j0 + j2).powi(2) / (2.0 * (j0 * j0 + j2 * j2));
    let got = r.summary.jain_index.expect("jain_index");
    assert!((got - jain).abs() < 0.01, "{got} vs {jain} (flows 0 and 2): {}", show(flows));
    // With no competing flow on the second, the index is of the first, which the session
    // crosses too: the session and the flow that crosses the first only.
    let first_only =
        RunConfig { competing: vec![CompetingFlow::parse("media:self").unwrap()], ..cfg.clone() };
    let t =
        Arc::new(Trace::constant(DataRate::from_mbps(4), TimeDelta::from_secs_f64(seconds + 5.0)));
    let r1 =
        Simulation::new(&first_only, Some(t), None, build_encoder(&first_only).unwrap()).unwrap();
    let r1 = r1.run();
    let [a, b] = rates_between(&r1, 2, 10.0, seconds)[..] else { unreachable!() };
    let jain = (a + b).powi(2) / (2.0 * (a * a + b * b));
    let got = r1.summary.jain_index.expect("an index of the first bottleneck's flows");
    assert!((got - jain).abs() < 0.01, "{got} vs {jain} (flows 0 and 1 on the first)");
    // Its rates are the first link's: where the session loses much at the second (a 1 Mbps
    // link with a two-packet queue), its rate there is below what the first carried of it.
    let lossy = RunConfig {
        second_bottleneck: Some(SecondBottleneck {
            rate_mbps: 1.0,
            queue_bytes: Some(3000),
            delay_ms: 0.0,
        }),
        ..first_only.clone()
    };
    let t =
        Arc::new(Trace::constant(DataRate::from_mbps(4), TimeDelta::from_secs_f64(seconds + 5.0)));
    let r2 = Simulation::new(&lossy, Some(t), None, build_encoder(&lossy).unwrap()).unwrap().run();
    let [at_second, b] = rates_between(&r2, 2, 10.0, seconds)[..] else { unreachable!() };
    let sent = mean_send_rate(&r2, 10.0, seconds);
    let jain = (sent + b).powi(2) / (2.0 * (sent * sent + b * b));
    let mixed = (at_second + b).powi(2) / (2.0 * (at_second * at_second + b * b));
    let got = r2.summary.jain_index.expect("an index of the first bottleneck's flows");
    // (GCC keeps the loss small, 0.3 %: the two indexes differ in the fourth digit; the one
    // given is the first link's, ten times nearer it than the index of the mixed rates.)
    assert!(r2.summary.loss_rate > 0.0 && at_second < sent, "{at_second} {sent}");
    assert!(
        (got - jain).abs() < 0.25 * (jain - mixed).abs(),
        "{got}: {jain} of the first link's rates, {mixed} with the session's at the second"
    );

    // Alone, the session's drops at the second bottleneck are its losses: a 1 Mbps second
    // link with a two-packet queue behind the 4 Mbps first one.
    let alone = RunConfig {
        competing: Vec::new(),
        second_bottleneck: Some(SecondBottleneck {
            rate_mbps: 1.0,
            queue_bytes: Some(3000),
            delay_ms: 0.0,
        }),
        ..cfg.clone()
    };
    let t = Arc::new(Trace::constant(DataRate::from_mbps(4), TimeDelta::from_secs(35)));
    let r = Simulation::new(&alone, Some(t), None, build_encoder(&alone).unwrap()).unwrap().run();
    let d = r.summary.video_bitrate_bps;
    assert!(d < 1.0e6, "the second bottleneck limits the video: {d}");
    assert!(r.summary.loss_rate > 0.0, "{}", r.summary.loss_rate);

    // Crossing the second needs one; a reverse flow crosses the uplink only.
    let mut bad = cfg.clone();
    bad.second_bottleneck = None;
    let e = bad.validate().unwrap_err().0;
    assert!(e.contains("no second_bottleneck"), "{e}");
    let mut bad = cfg.clone();
    let mut rev = CompetingFlow::parse("reverse-media:self").unwrap();
    rev.crosses = Crosses::Both;
    bad.competing = vec![rev];
    let e = bad.validate().unwrap_err().0;
    assert!(e.contains("reverse flow crosses the uplink only"), "{e}");
    for rate in [0.0, 1e-9, f64::NAN, -1.0] {
        let mut bad = cfg.clone();
        bad.second_bottleneck.as_mut().unwrap().rate_mbps = rate;
        assert!(bad.validate().unwrap_err().0.contains("second_bottleneck.rate_mbps"), "{rate}");
    }
}

/// RFC 8867 §4's audio beside the video flows (§5.1-5.4's media timelines): 20 Kbps CBR in
/// 90-byte packets every 20 ms, 36 kbps on the wire whatever the video does, queued behind
/// the video, and left out of Jain's index (a fixed demand, as the short TCP flows' finite
/// one): two video flows and an audio flow give the same index as the two video flows
/// would over their own rates.
#[test]
fn an_audio_flow_sends_its_constant_rate_and_stays_out_of_jains_index() {
    let r = run_with(
        "webrtc",
        &["media:webrtc@5", "audio@2-40"],
        45.0,
        accept_path(QueueDisciplineKind::Droptail),
    );
    let s = &r.summary;
    let flows = s.flows.as_ref().expect("flows");
    eprintln!("jain {:?} | {}", s.jain_index, show(flows));
    let audio = &flows[2];
    assert_eq!(
        (audio.kind.as_str(), audio.scheme.as_str(), audio.stop_s),
        ("audio", "cbr", Some(40.0))
    );
    // 38 s of 90 bytes every 20 ms: 36 kbps, none lost on a link it barely uses.
    assert!((audio.mean_rate_bps - 36_000.0).abs() < 500.0, "{}", audio.mean_rate_bps);
    assert_eq!(audio.loss_rate, 0.0);
    assert!(audio.share > 0.005 && audio.share < 0.015, "{}", audio.share);
    // It waits in the video's queue (the 60 kB queue at 4 Mbps holds 120 ms).
    let q = audio.queue_delay_ms_p95.unwrap();
    assert!(q > 1.0 && q <= 125.0, "{q}");
    // Jain's index over 15-40 s (the audio's stop is not the video flows'), of the video
    // flows alone.
    let rates = rates_between(&r, 2, 15.0, 45.0);
    let j = (rates[0] + rates[1]).powi(2) / (2.0 * (rates[0].powi(2) + rates[1].powi(2)));
    assert!((j - s.jain_index.unwrap()).abs() < 0.01, "{j} vs {:?}", s.jain_index);
    // With the video flow alone beside it there is no index (one long flow).
    let alone = run_with("webrtc", &["audio"], 20.0, accept_path(QueueDisciplineKind::Droptail));
    assert!(alone.summary.jain_index.unwrap().is_nan());
    assert_eq!(alone.summary.flows.unwrap()[1].kind, "audio");
}

/// Co-RTV's frame-dropping bottleneck drops only its own flow's frames, so RFC 8867's audio
/// can share it (§5.1); a flow that adapts cannot, and is refused by name.
#[test]
fn co_rtv_shares_its_bottleneck_with_audio_only() {
    let r = run_with("co-rtv", &["audio"], 30.0, accept_path(QueueDisciplineKind::Droptail));
    let flows = r.summary.flows.as_ref().expect("flows");
    eprintln!("{}", show(flows));
    assert_eq!(flows[1].loss_rate, 0.0, "the node never drops the audio");
    assert!((flows[1].mean_rate_bps - 36_000.0).abs() < 500.0);
    assert!(r.frames.iter().filter(|f| f.displayed_us.is_some()).count() > 800);
    let cfg = RunConfig {
        scheme_name: "co-rtv".into(),
        competing: vec![
            CompetingFlow::parse("audio").unwrap(),
            CompetingFlow::parse("tcp:cubic").unwrap(),
        ],
        ..Default::default()
    };
    let e = cfg.validate().unwrap_err().0;
    assert!(e.contains("'tcp:cubic'") && e.contains("other than audio"), "{e}");
}

/// RFC 8867 §5.3's backward audio: `reverse-audio` sends over the session's uplink, beside
/// its feedback, and its `flows` entry counts the uplink's bytes of it.
#[test]
fn a_reverse_audio_flow_uses_the_uplink() {
    let cfg = RunConfig {
        scheme_name: "webrtc".into(),
        duration_s: 20.0,
        downlink: accept_path(QueueDisciplineKind::Droptail),
        uplink: PathConfig { delay_ms: 25.0, queue_bytes: Some(20_000), ..Default::default() },
        competing: vec![CompetingFlow::parse("reverse-audio@1").unwrap()],
        ..Default::default()
    };
    let t = |mbps| Arc::new(Trace::constant(DataRate::from_mbps(mbps), TimeDelta::from_secs(30)));
    let r =
        Simulation::new(&cfg, Some(t(4)), Some(t(1)), build_encoder(&cfg).unwrap()).unwrap().run();
    let flows = r.summary.flows.as_ref().expect("flows");
    eprintln!("{}", show(flows));
    let a = &flows[1];
    assert_eq!((a.kind.as_str(), a.scheme.as_str()), ("reverse-audio", "cbr"));
    assert!((a.mean_rate_bps - 36_000.0).abs() < 500.0, "{}", a.mean_rate_bps);
    assert!(r.summary.jain_index.unwrap().is_nan(), "one forward flow: no index");
    // The video is not disturbed by 36 kbps beside its feedback.
    assert!(r.frames.iter().filter(|f| f.displayed_us.is_some()).count() > 550);
}
