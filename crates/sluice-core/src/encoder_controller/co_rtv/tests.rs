//! Co-RTV's sender equations with the brief's worked values (U7) and the re-encode orders
//! after a drop (U8).

use super::*;
use crate::cc::CcSignals;
use crate::encoder_controller::PacerState;

const FPS: f64 = 60.0;

fn mbps(v: f64) -> DataRate {
    DataRate::from_bps_f64(v * 1e6)
}

fn ctx(slot: u64, last: Option<u64>, snd_mbps: f64) -> FrameContext {
    FrameContext {
        now: Timestamp::ZERO + TimeDelta::from_secs_f64(slot as f64 / FPS),
        source_index: slot,
        capture_time: Timestamp::ZERO + TimeDelta::from_secs_f64(slot as f64 / FPS),
        fps: FPS,
        cc_target: mbps(snd_mbps),
        cwnd_reduce_ratio: 0.0,
        cc_signals: CcSignals::default(),
        pacer: PacerState::default(),
        transport: Default::default(),
        last_frame_id: last,
        analysis: None,
    }
}

fn report(queue_kb: i64, drop_from: Option<u64>) -> BottleneckReport {
    BottleneckReport {
        flow: 0,
        seq: 0,
        time: Timestamp::ZERO,
        queue: DataSize::from_kilobytes(queue_kb),
        rate: drop_from.map(|_| mbps(10.0)),
        drop_from,
    }
}

fn plan_of(d: FrameDecision) -> FramePlan {
    match d {
        FrameDecision::Encode(p) => p,
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_sender_equations_with_the_brief_values() {
    let tau = TimeDelta::from_ms(50);
    // Eq. 6: SndRate 10 Mbps, QLen 25 kB, tau 50 ms: R = 10 - 4 = 6 Mbps.
    let r = encoding_rate(mbps(10.0), DataSize::from_kilobytes(25), tau, 0.05);
    assert_eq!(r, mbps(6.0));
    // Eq. 7: N_d = 3 and tau FR = 3: R = 6 x 3 / 6 = 3 Mbps.
    let r = rate_after_drop(r, 3, tau, FPS);
    assert_eq!(r, mbps(3.0));
    // Eq. 8: QSF 1: N_s = 1 x (3 + 3) x (1 - 3/10) = 4.2, rounded to 4; QSF 0: none.
    let n_s = skips(1.0, 3, tau, FPS, r, mbps(10.0));
    assert!((n_s - 4.2).abs() < 1e-9);
    assert_eq!(n_s.round(), 4.0);
    assert_eq!(skips(0.0, 3, tau, FPS, r, mbps(10.0)), 0.0);
    // Spread evenly over the horizon of 6: floor((m + 0.5) x 6 / 4) = 0, 2, 3, 5.
    assert_eq!(skip_positions(4, 6), vec![0, 2, 3, 5]);
    assert_eq!(skip_positions(1, 6), vec![3]);
    assert_eq!(skip_positions(0, 6), Vec::<usize>::new());
    // The floor: a queue worth more than tau x SndRate leaves 5 % of SndRate.
    let r = encoding_rate(mbps(2.0), DataSize::from_kilobytes(100), tau, 0.05);
    assert_eq!(r, mbps(0.1));
}

#[test]
fn a_drop_report_re_encodes_the_dropped_source_frames_from_the_frame_before_d() {
    let mut c = CoRtvConfig::default().build();
    // Slots 0..20 encoded as frames 0..19 at SndRate 10 Mbps, one-frame VBV.
    for i in 0..20u64 {
        let p = plan_of(c.plan(&ctx(i, i.checked_sub(1), 10.0)));
        assert_eq!(p.rate_control.target_rate, mbps(10.0), "no report yet: R = SndRate");
        assert_eq!(p.rate_control.vbv_buffer, mbps(10.0) * TimeDelta::from_secs_f64(1.0 / FPS));
        assert_eq!(p.reference, None);
    }
    // A periodic report: R = 10 - 25 kB / 50 ms = 6 Mbps, held.
    c.on_bottleneck_report(&report(25, None), Timestamp::ZERO);
    let p = plan_of(c.plan(&ctx(20, Some(19), 10.0)));
    assert_eq!(p.rate_control.target_rate, mbps(6.0));
    assert_eq!(c.held_rate(), Some(mbps(6.0)));
    // ... never above the controller's rate of now.
    let p = plan_of(c.plan(&ctx(21, Some(20), 5.0)));
    assert_eq!(p.rate_control.target_rate, mbps(5.0));
    // Frames 19..22 dropped from D = 19 with j = 22: N_d = 3, R = 6 x 3/6 = 3 Mbps; the
    // sources of 19, 20, 21 are encoded again before the next capture, the first from 18.
    c.on_bottleneck_report(&report(25, Some(19)), Timestamp::ZERO);
    let mut orders = Vec::new();
    let mut last = 21;
    while let Some(o) = c.poll_encode(&ctx(21, Some(last), 10.0)) {
        last += 1;
        orders.push(o);
    }
    assert_eq!(c.last_reaction(), Some((19, 3, 0)));
    let sources: Vec<u64> = orders.iter().map(|o| o.source_index).collect();
    assert_eq!(sources, vec![19, 20, 21]);
    assert_eq!(orders[0].plan.reference, Some(18));
    assert!(orders[1..].iter().all(|o| o.plan.reference.is_none()), "then the previous encode");
    for o in &orders {
        assert_eq!(o.plan.rate_control.target_rate, mbps(3.0));
        assert_eq!(
            o.capture_time,
            Timestamp::ZERO + TimeDelta::from_secs_f64(o.source_index as f64 / FPS)
        );
        assert_eq!(o.plan.columns.get("cortv_reencode"), Some(&crate::columns::Value::Bool(true)));
    }
    // The next capture keeps R until the next report.
    let p = plan_of(c.plan(&ctx(22, Some(24), 10.0)));
    assert_eq!(p.rate_control.target_rate, mbps(3.0));
    // The same D again (a repeat) changes nothing; a later report recomputes R.
    c.on_bottleneck_report(&report(25, Some(19)), Timestamp::ZERO);
    assert!(c.poll_encode(&ctx(22, Some(25), 10.0)).is_none());
    assert_eq!(c.held_rate(), Some(mbps(6.0)));
    // A second drop from frame 22 (the first re-encode): the frame before it that no
    // bottleneck dropped is 18, not 21.
    c.on_bottleneck_report(&report(0, Some(22)), Timestamp::ZERO);
    let mut last = 25;
    let mut again = Vec::new();
    while let Some(o) = c.poll_encode(&ctx(23, Some(last), 10.0)) {
        last += 1;
        again.push(o);
    }
    assert_eq!(c.last_reaction(), Some((22, 4, 0)));
    let sources: Vec<u64> = again.iter().map(|o| o.source_index).collect();
    assert_eq!(sources, vec![19, 20, 21, 22], "frames 22-25 encoded sources 19-22");
    assert_eq!(again[0].plan.reference, Some(18));
}

#[test]
fn qsf_skips_spread_over_the_horizon_and_the_rest_gets_their_bytes() {
    let cfg = CoRtvConfig { qsf: 1.0, ..Default::default() };
    let mut c = cfg.build();
    for i in 0..10u64 {
        c.plan(&ctx(i, i.checked_sub(1), 10.0));
    }
    // D = 7, j = 10: N_d = 3; R = 3 Mbps (queue 25 kB), N_s = 4 over H = 6: positions 0, 2,
    // 3, 5. Re-encodes are positions 0-2 (sources 7, 8, 9): 7 and 9 skipped, 8 encoded;
    // captures are 3-5: slot 10 skipped, 11 encoded, 12 skipped; the encoded ones at
    // 3 Mbps x 6 / 2 = 9 Mbps.
    c.on_bottleneck_report(&report(25, Some(7)), Timestamp::ZERO);
    let orders: Vec<EncodeOrder> =
        std::iter::from_fn(|| c.poll_encode(&ctx(9, Some(9), 10.0))).collect();
    assert_eq!(c.last_reaction(), Some((7, 3, 4)));
    assert_eq!(orders.iter().map(|o| o.source_index).collect::<Vec<_>>(), vec![8]);
    assert_eq!(orders[0].plan.reference, Some(6));
    assert_eq!(orders[0].plan.rate_control.target_rate, mbps(9.0));
    assert!(matches!(
        c.plan(&ctx(10, Some(10), 10.0)),
        FrameDecision::Skip { reason: "co-rtv-skip" }
    ));
    assert_eq!(plan_of(c.plan(&ctx(11, Some(10), 10.0))).rate_control.target_rate, mbps(9.0));
    assert!(matches!(c.plan(&ctx(12, Some(11), 10.0)), FrameDecision::Skip { .. }));
    // After the horizon: R again.
    assert_eq!(plan_of(c.plan(&ctx(13, Some(11), 10.0))).rate_control.target_rate, mbps(3.0));
}

#[test]
fn a_drop_from_a_frame_not_yet_encoded_re_encodes_nothing() {
    // The bottleneck decides k frames ahead of their arrival: D can be beyond the sender's
    // next id. N_d = 0: R by Eq. 6 only, no re-encode, and the next capture is encoded.
    let mut c = CoRtvConfig::default().build();
    for i in 0..5u64 {
        c.plan(&ctx(i, i.checked_sub(1), 10.0));
    }
    c.on_bottleneck_report(&report(25, Some(7)), Timestamp::ZERO);
    assert!(c.poll_encode(&ctx(4, Some(4), 10.0)).is_none());
    assert_eq!(c.last_reaction(), Some((7, 0, 0)));
    assert_eq!(c.held_rate(), Some(mbps(6.0)));
    assert_eq!(plan_of(c.plan(&ctx(5, Some(4), 10.0))).rate_control.target_rate, mbps(6.0));
}

#[test]
fn at_most_the_newest_max_reencodes_sources_are_re_encoded() {
    // D = 5 with j = 20: 15 frames dropped; the newest 8 sources (12-19) are re-encoded, the
    // first from frame 4, and Eq. 7 takes N_d = 8: R = 6 x 3 / 11.
    let mut c = CoRtvConfig::default().build();
    for i in 0..20u64 {
        c.plan(&ctx(i, i.checked_sub(1), 10.0));
    }
    c.on_bottleneck_report(&report(25, Some(5)), Timestamp::ZERO);
    let orders: Vec<EncodeOrder> =
        std::iter::from_fn(|| c.poll_encode(&ctx(19, Some(19), 10.0))).collect();
    assert_eq!(
        orders.iter().map(|o| o.source_index).collect::<Vec<_>>(),
        (12..20).collect::<Vec<_>>()
    );
    assert_eq!(orders[0].plan.reference, Some(4));
    assert_eq!(c.last_reaction(), Some((5, 8, 0)));
    assert_eq!(orders[0].plan.rate_control.target_rate, mbps(6.0 * 3.0 / 11.0));
    // With the bound lifted, all 15.
    let mut all = CoRtvConfig { max_reencodes: usize::MAX, ..Default::default() }.build();
    for i in 0..20u64 {
        all.plan(&ctx(i, i.checked_sub(1), 10.0));
    }
    all.on_bottleneck_report(&report(25, Some(5)), Timestamp::ZERO);
    assert_eq!(std::iter::from_fn(|| all.poll_encode(&ctx(19, Some(19), 10.0))).count(), 15);
}
