//! Link tests: deterministic cases and seeded property tests over random scenarios.

use super::*;
use crate::packet::Packet;

fn dgram(id: u64, bytes: i64) -> Datagram {
    let mut p = Packet::padding(DataSize::from_bytes(bytes), Timestamp::ZERO);
    p.media_seq = id;
    Datagram::Media(p)
}

fn id_of(d: &Datagram) -> u64 {
    match d {
        Datagram::Media(p) => p.media_seq,
        Datagram::Feedback(_) => u64::MAX,
    }
}

fn trace_link(times_ms: &[i64], queue: QueueLimit, delay: TimeDelta) -> Link {
    let trace = Arc::new(Trace::from_ms("t", times_ms.to_vec()).unwrap());
    let config = LinkConfig { rate: LinkRate::Trace(trace), queue, delay, loss_rate: 0.0 };
    Link::new(config, Rng::new(1))
}

/// Runs the link to quiescence, returning (id, delivery time) in delivery order.
fn drain(link: &mut Link) -> Vec<(u64, Timestamp)> {
    let mut out = Vec::new();
    for _ in 0..1_000_000 {
        let t = link.poll_timeout();
        if !t.is_finite() {
            return out;
        }
        link.handle_timeout(t);
        while let Some(d) = link.poll_datagram(t) {
            out.push((id_of(&d), t));
        }
    }
    panic!("link did not go idle");
}

#[test]
fn idle_link_has_no_timeout_and_spurious_timeouts_do_nothing() {
    let mut link = trace_link(&[1], QueueLimit::Unlimited, TimeDelta::ZERO);
    assert_eq!(link.poll_timeout(), Timestamp::INFINITY);
    link.handle_timeout(Timestamp::from_ms(5));
    assert_eq!(link.poll_timeout(), Timestamp::INFINITY);
    link.handle_datagram(dgram(0, 1000), Timestamp::from_us(5_500));
    assert_eq!(link.poll_timeout(), Timestamp::from_ms(6));
    link.handle_timeout(Timestamp::from_us(5_900)); // spurious
    assert_eq!(link.poll_timeout(), Timestamp::from_ms(6));
    assert_eq!(link.poll_datagram(Timestamp::from_us(5_900)), None);
    assert_eq!(link.stats().delivered_packets, 0);
    assert_eq!(drain(&mut link), vec![(0, Timestamp::from_ms(6))]);
}

#[test]
fn small_packets_share_an_opportunity_and_large_ones_carry_over() {
    let delay = TimeDelta::from_ms(10);
    let mut link = trace_link(&[1], QueueLimit::Unlimited, delay);
    // 3 x 500 B share the opportunity at 1 ms; the 4th (500 B) has 4 B there, rest at 2 ms.
    for id in 0..4 {
        link.handle_datagram(dgram(id, 500), Timestamp::from_us(200));
    }
    // A 3000 B packet needs 1504 + 1496 (with 8 B left over from 2 ms): done at 3 ms.
    link.handle_datagram(dgram(4, 3000), Timestamp::from_us(300));
    let out = drain(&mut link);
    let ms = |m| Timestamp::from_ms(m) + delay;
    assert_eq!(out, vec![(0, ms(1)), (1, ms(1)), (2, ms(1)), (3, ms(2)), (4, ms(4))]);
    // 496 + 3000 = 3496 B after the 1504 of 1 ms: 2 ms (1504) + 3 ms (1504) + 4 ms (488).
    assert_eq!(link.last_queue_delay(), Timestamp::from_ms(4) - Timestamp::from_us(300));
}

#[test]
fn arrival_exactly_at_an_opportunity_may_use_it_in_any_call_order() {
    // The queue empties at 1 ms with bytes left; a packet arriving at exactly 1 ms uses
    // them whether it arrives before or after the timeout at 1 ms is handled.
    for timeout_first in [false, true] {
        let mut link = trace_link(&[1], QueueLimit::Unlimited, TimeDelta::ZERO);
        link.handle_datagram(dgram(0, 100), Timestamp::from_us(500));
        if timeout_first {
            link.handle_timeout(Timestamp::from_ms(1));
        }
        link.handle_datagram(dgram(1, 100), Timestamp::from_ms(1));
        let out = drain(&mut link);
        assert_eq!(
            out,
            vec![(0, Timestamp::from_ms(1)), (1, Timestamp::from_ms(1))],
            "{timeout_first}"
        );
    }
    // Arriving 1 us after the opportunity: wait for the next one.
    let mut link = trace_link(&[1], QueueLimit::Unlimited, TimeDelta::ZERO);
    link.handle_datagram(dgram(0, 100), Timestamp::from_us(1_001));
    assert_eq!(drain(&mut link), vec![(0, Timestamp::from_ms(2))]);
}

#[test]
fn idle_time_wastes_opportunities() {
    let mut link = trace_link(&[1], QueueLimit::Unlimited, TimeDelta::ZERO);
    let arrival = Timestamp::from_us(10_000_500); // after 10 s of idle
    for id in 0..10 {
        link.handle_datagram(dgram(id, 1504), arrival);
    }
    let out = drain(&mut link);
    let want: Vec<(u64, Timestamp)> =
        (0..10).map(|i| (i, Timestamp::from_ms(10_001 + i as i64))).collect();
    assert_eq!(out, want);
}

#[test]
fn trace_loops_with_its_last_timestamp() {
    // Opportunities 0, 2, 2, 5 -> absolute 0,2,2,5 | 5,7,7,10 | 10,12,12,15 ...
    let mut link = trace_link(&[0, 2, 2, 5], QueueLimit::Unlimited, TimeDelta::ZERO);
    for id in 0..12 {
        link.handle_datagram(dgram(id, 1504), Timestamp::ZERO);
    }
    let times: Vec<i64> = drain(&mut link).iter().map(|(_, t)| t.as_ms()).collect();
    assert_eq!(times, vec![0, 2, 2, 5, 5, 7, 7, 10, 10, 12, 12, 15]);
}

#[test]
fn single_line_1_gives_about_12_mbps_for_a_saturating_sender() {
    let mut link = trace_link(&[1], QueueLimit::Unlimited, TimeDelta::from_ms(20));
    let mut delivered = DataSize::ZERO;
    let mut id = 0;
    let end = Timestamp::from_secs_f64(10.0);
    let mut now = Timestamp::ZERO;
    while now < end {
        // Keep ~10 packets queued.
        while link.queue_packets() < 10 {
            link.handle_datagram(dgram(id, 1200), now);
            id += 1;
        }
        now = link.poll_timeout().min(end);
        link.handle_timeout(now);
        while let Some(d) = link.poll_datagram(now) {
            delivered += d.size();
        }
    }
    let rate = delivered / (end - Timestamp::from_ms(20));
    assert!((rate.as_mbps_f64() - 12.032).abs() < 0.02, "{rate}");
}

#[test]
fn unlimited_rate_only_delays_and_loses() {
    let config = LinkConfig { delay: TimeDelta::from_ms(30), ..LinkConfig::default() };
    let mut link = Link::new(config, Rng::new(9));
    link.handle_datagram(dgram(0, 1200), Timestamp::from_ms(7));
    assert_eq!(link.poll_timeout(), Timestamp::from_ms(37));
    assert_eq!(link.poll_datagram(Timestamp::from_us(36_999)), None);
    assert_eq!(link.poll_datagram(Timestamp::from_ms(37)).map(|d| id_of(&d)), Some(0));
    assert_eq!(link.poll_timeout(), Timestamp::INFINITY);

    let config =
        LinkConfig { delay: TimeDelta::from_ms(30), loss_rate: 0.25, ..LinkConfig::default() };
    let mut link = Link::new(config, Rng::new(9));
    let n = 20_000;
    for id in 0..n {
        link.handle_datagram(dgram(id, 1200), Timestamp::from_us(id as i64 * 100));
    }
    let mut got = 0;
    let t = Timestamp::from_us((n as i64 - 1) * 100) + TimeDelta::from_ms(30);
    while link.poll_datagram(t).is_some() {
        got += 1;
    }
    let mut lost = 0;
    while let Some((_, reason)) = link.poll_drop() {
        assert_eq!(reason, DropReason::RandomLoss);
        lost += 1;
    }
    assert_eq!(got + lost, n);
    let p = lost as f64 / n as f64;
    assert!((p - 0.25).abs() < 0.015, "{p}");
    assert_eq!(link.stats().dropped_loss_packets, lost);
}

#[test]
fn drop_tail_limits_waiting_packets_and_logs_drops() {
    let mut link = trace_link(&[1], QueueLimit::Packets(3), TimeDelta::ZERO);
    for id in 0..6 {
        link.handle_datagram(dgram(id, 1000), Timestamp::from_us(100));
    }
    assert_eq!(link.queue_packets(), 3);
    let drops: Vec<u64> = std::iter::from_fn(|| link.poll_drop())
        .map(|(d, r)| {
            assert_eq!(r, DropReason::QueueFull);
            id_of(&d)
        })
        .collect();
    assert_eq!(drops, vec![3, 4, 5]);
    let mut link = trace_link(&[1], QueueLimit::Bytes(2500), TimeDelta::ZERO);
    link.set_drop_log(false);
    for id in 0..4 {
        link.handle_datagram(dgram(id, 1000), Timestamp::from_us(100));
    }
    assert_eq!(link.queue_bytes(), DataSize::from_bytes(2000));
    assert_eq!(link.stats().dropped_queue_packets, 2);
    assert_eq!(link.poll_drop(), None);
}

// ---------------------------------------------------------------------------------------
// Property tests over random scenarios.

fn random_trace(rng: &mut Rng) -> Trace {
    match (rng.uniform() * 3.0) as u32 {
        0 => {
            // Random Mahimahi list with duplicates and gaps.
            let n = 1 + (rng.uniform() * 300.0) as usize;
            let mut t = (rng.uniform() * 3.0) as i64;
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                if rng.bernoulli(0.6) {
                    t += (rng.exponential(2.0)) as i64;
                }
                if rng.bernoulli(0.01) {
                    t += 200; // outage
                }
                v.push(t);
            }
            if *v.last().unwrap() == 0 {
                *v.last_mut().unwrap() = 1;
            }
            Trace::from_ms("random", v).unwrap()
        }
        1 => {
            let mbps = 0.5 + rng.uniform() * 40.0;
            generate(
                &TraceSpec::Constant { rate_mbps: mbps },
                TimeDelta::from_ms(50 + (rng.uniform() * 2000.0) as i64),
            )
            .unwrap()
        }
        _ => {
            let spec = TraceSpec::Markov {
                good_mbps: 5.0 + rng.uniform() * 30.0,
                bad_mbps: 0.1 + rng.uniform() * 2.0,
                mean_good_s: 0.05 + rng.uniform(),
                mean_bad_s: 0.05 + rng.uniform() * 0.5,
                seed: rng.next_u64(),
            };
            generate(&spec, TimeDelta::from_secs(3)).unwrap()
        }
    }
}

struct Scenario {
    trace: Arc<Trace>,
    queue: QueueLimit,
    delay: TimeDelta,
    loss_rate: f64,
    /// (arrival, size_bytes), non-decreasing arrivals.
    arrivals: Vec<(Timestamp, i64)>,
}

fn random_scenario(rng: &mut Rng, allow_drops: bool) -> Scenario {
    let trace = Arc::new(random_trace(rng));
    let queue = if !allow_drops {
        QueueLimit::Unlimited
    } else {
        match (rng.uniform() * 3.0) as u32 {
            0 => QueueLimit::Unlimited,
            1 => QueueLimit::Packets(1 + (rng.uniform() * 60.0) as usize),
            _ => QueueLimit::Bytes(1504 + (rng.uniform() * 100_000.0) as i64),
        }
    };
    let delay = TimeDelta::from_us((rng.uniform() * 100_000.0) as i64);
    let loss_rate = if allow_drops && rng.bernoulli(0.5) { rng.uniform() * 0.3 } else { 0.0 };
    // Load relative to the trace's mean rate, with bursts and idle gaps.
    let load = 0.2 + rng.uniform() * 1.6;
    let mean_size = 782.0;
    let mean_gap_us = mean_size * 8.0 / (trace.mean_rate().as_bps_f64() * load) * 1e6;
    let n = 200 + (rng.uniform() * 1500.0) as usize;
    let mut t = (rng.uniform() * 5000.0) as i64;
    let mut arrivals = Vec::with_capacity(n);
    for _ in 0..n {
        let r = rng.uniform();
        if r < 0.2 {
            // burst: same time
        } else if r < 0.22 {
            t += (rng.uniform() * 3_000_000.0) as i64; // long idle
        } else if r < 0.25 {
            t = (t / 1000 + 1) * 1000; // exactly on a millisecond (opportunity) boundary
        } else {
            t += rng.exponential(mean_gap_us * 1.25) as i64;
        }
        let size = 60 + (rng.uniform() * 1445.0) as i64; // 60..=1504
        arrivals.push((Timestamp::from_us(t), size));
    }
    Scenario { trace, queue, delay, loss_rate, arrivals }
}

#[derive(Debug)]
struct Departure {
    id: u64,
    arrival: Timestamp,
    /// Completion at the bottleneck (delivery - delay).
    completion: Timestamp,
    size: i64,
}

/// Runs a scenario as a discrete-event loop, checking step invariants; returns departures.
fn run(sc: &Scenario, seed: u64) -> (Vec<Departure>, Link) {
    let config = LinkConfig {
        rate: LinkRate::Trace(sc.trace.clone()),
        queue: sc.queue,
        delay: sc.delay,
        loss_rate: sc.loss_rate,
    };
    let mut link = Link::new(config, Rng::new(seed));
    let mut next = 0;
    let mut departures: Vec<Departure> = Vec::new();
    let mut dropped = 0_u64;
    let mut steps = 0;
    loop {
        steps += 1;
        assert!(steps < 10_000_000, "livelock");
        let timeout = link.poll_timeout();
        let arrival = sc.arrivals.get(next).map_or(Timestamp::INFINITY, |a| a.0);
        let now = timeout.min(arrival);
        if !now.is_finite() {
            break;
        }
        if arrival <= timeout {
            link.handle_datagram(dgram(next as u64, sc.arrivals[next].1), now);
            next += 1;
        } else {
            link.handle_timeout(now);
        }
        assert!(link.poll_timeout() >= now || link.poll_timeout() == now);
        while let Some(d) = link.poll_datagram(now) {
            let id = id_of(&d) as usize;
            let (arrival, size) = sc.arrivals[id];
            assert_eq!(d.size().as_bytes(), size);
            // Delivered exactly when due (we step to every timeout).
            let completion = now - sc.delay;
            assert!(completion >= arrival, "delivered before arrival + delay");
            if let Some(prev) = departures.last() {
                assert!(prev.id < id as u64, "FIFO violated");
                assert!(prev.completion <= completion);
            }
            departures.push(Departure { id: id as u64, arrival, completion, size });
        }
        while let Some((d, reason)) = link.poll_drop() {
            if sc.queue == QueueLimit::Unlimited {
                assert_eq!(reason, DropReason::RandomLoss, "unlimited queue dropped");
            }
            if sc.loss_rate == 0.0 {
                assert_ne!(reason, DropReason::RandomLoss);
            }
            let _ = d;
            dropped += 1;
        }
        // Conservation at every step.
        let s = link.stats();
        assert_eq!(s.arrived_packets, next as u64);
        assert_eq!(s.dropped_packets(), dropped);
        assert_eq!(s.delivered_packets, departures.len() as u64);
        assert_eq!(
            s.arrived_packets,
            s.delivered_packets + s.dropped_packets() + link.packets_inside() as u64
        );
        assert_eq!(
            s.arrived_bytes,
            s.delivered_bytes
                + s.dropped_bytes
                + inside_bytes(&sc.arrivals, &departures, &link, next)
        );
        match sc.queue {
            QueueLimit::Packets(n) => assert!(link.queue_packets() <= n),
            QueueLimit::Bytes(b) => assert!(link.queue_bytes().as_bytes() <= b),
            QueueLimit::Unlimited => {}
        }
    }
    assert_eq!(next, sc.arrivals.len());
    assert_eq!(link.packets_inside(), 0);
    assert_eq!(link.queue_bytes(), DataSize::ZERO);
    (departures, link)
}

/// Bytes inside the link, from the bookkeeping of the test (arrived, minus delivered and
/// dropped); cross-checks the link's own byte counters.
fn inside_bytes(
    arrivals: &[(Timestamp, i64)],
    departures: &[Departure],
    link: &Link,
    next: usize,
) -> i64 {
    let arrived: i64 = arrivals[..next].iter().map(|a| a.1).sum();
    let delivered: i64 = departures.iter().map(|d| d.size).sum();
    arrived - delivered - link.stats().dropped_bytes
}

#[test]
fn property_invariants_over_random_scenarios() {
    let mut rng = Rng::new(0x511ce);
    for case in 0..300 {
        let sc = random_scenario(&mut rng, true);
        let (deps, link) = run(&sc, case);
        let trace = &sc.trace;
        // Each completion happens at an opportunity at or after the arrival.
        for d in &deps {
            assert!(
                trace.capacity_between(d.completion, d.completion + TimeDelta::from_us(1))
                    > DataSize::ZERO,
                "case {case}: completion {:?} is not an opportunity",
                d.completion
            );
            assert!(d.completion >= d.arrival);
        }
        // Bytes completed in [c_i, c_j] never exceed the opportunities in that window plus
        // what the first packet may have received before c_i (< its size <= one MTU).
        for i in 0..deps.len() {
            let mut bytes = 0;
            for j in i..deps.len().min(i + 150) {
                bytes += deps[j].size;
                let cap = trace.capacity_between(
                    deps[i].completion,
                    deps[j].completion + TimeDelta::from_us(1),
                );
                assert!(
                    bytes <= cap.as_bytes() + deps[i].size.min(MTU_BYTES),
                    "case {case}: {bytes} B completed in [{:?}, {:?}] > {cap} + carry",
                    deps[i].completion,
                    deps[j].completion
                );
            }
        }
        if sc.queue == QueueLimit::Unlimited {
            assert_eq!(link.stats().dropped_queue_packets, 0, "case {case}");
        }
    }
}

/// A naive reference: expand every opportunity in order, serving all packets that have
/// arrived, byte by byte; returns completion times. Unlimited queue, no loss.
fn reference_completions(trace: &Trace, arrivals: &[(Timestamp, i64)]) -> Vec<Timestamp> {
    let mut out = Vec::with_capacity(arrivals.len());
    let mut head = 0;
    let mut remaining = arrivals.first().map_or(0, |a| a.1);
    let period = trace.period().as_us();
    let mut lap = 0;
    while head < arrivals.len() {
        for &m in trace.times_ms() {
            let t = Timestamp::from_us(lap * period + m * 1000);
            let mut budget = MTU_BYTES;
            while head < arrivals.len() && arrivals[head].0 <= t && budget > 0 {
                let take = budget.min(remaining);
                budget -= take;
                remaining -= take;
                if remaining == 0 {
                    out.push(t);
                    head += 1;
                    remaining = arrivals.get(head).map_or(0, |a| a.1);
                }
            }
        }
        lap += 1;
    }
    out
}

#[test]
fn property_matches_naive_reference_without_drops() {
    let mut rng = Rng::new(77);
    for case in 0..150 {
        let sc = random_scenario(&mut rng, false);
        let (deps, link) = run(&sc, case);
        assert_eq!(link.stats().dropped_packets(), 0);
        let want = reference_completions(&sc.trace, &sc.arrivals);
        let got: Vec<Timestamp> = deps.iter().map(|d| d.completion).collect();
        assert_eq!(got.len(), want.len(), "case {case}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "case {case}: packet {i} arrived {:?}", sc.arrivals[i].0);
        }
    }
}

/// The link saturated for 120 s at 30 Mbps delivers the trace's rate. (How fast it does so
/// is a benchmark: `make bench`, `examples/link_speed.rs`.)
#[test]
fn saturating_120_s_at_30_mbps_delivers_the_trace_rate() {
    let trace = Arc::new(
        generate(&TraceSpec::Constant { rate_mbps: 30.0 }, TimeDelta::from_secs(120)).unwrap(),
    );
    let config = LinkConfig {
        rate: LinkRate::Trace(trace),
        queue: QueueLimit::Bytes(100_000),
        delay: TimeDelta::from_ms(25),
        loss_rate: 0.01,
    };
    let mut link = Link::new(config, Rng::new(3));
    let end = Timestamp::from_ms(120_000);
    // Offer 33 Mbps of 1200 B packets (one every ~291 us).
    let mut id = 0;
    let mut next_send = Timestamp::ZERO;
    let mut delivered = 0_u64;
    loop {
        let now = link.poll_timeout().min(next_send);
        if now > end {
            break;
        }
        if now == next_send {
            link.handle_datagram(dgram(id, 1200), now);
            id += 1;
            next_send = now + TimeDelta::from_us(291);
        } else {
            link.handle_timeout(now);
        }
        while link.poll_datagram(now).is_some() {
            delivered += 1;
        }
        while link.poll_drop().is_some() {}
    }
    assert!(id > 400_000);
    let rate = (delivered as f64 * 1200.0 * 8.0) / 120.0 / 1e6;
    assert!((rate - 30.0 * 1504.0 / 1500.0).abs() < 0.3, "{rate}");
}

#[test]
fn a_changed_delay_applies_to_later_packets_without_reordering() {
    // One opportunity per ms; 100 ms delay, then 10 ms from 2 ms on.
    let mut link = trace_link(&[1], QueueLimit::Unlimited, TimeDelta::from_ms(100));
    link.handle_datagram(dgram(1, 1500), Timestamp::ZERO);
    link.handle_timeout(Timestamp::from_ms(2));
    link.set_delay(TimeDelta::from_ms(10));
    link.handle_datagram(dgram(2, 1500), Timestamp::from_ms(2));
    let out = drain(&mut link);
    // Packet 1 left the queue at 1 ms: 101 ms. Packet 2 leaves at 2 ms and would arrive at
    // 12 ms, but not before packet 1.
    assert_eq!(out, vec![(1, Timestamp::from_ms(101)), (2, Timestamp::from_ms(101))]);
    // Later packets get the new delay (the opportunity at 200 ms carries it at once).
    link.handle_datagram(dgram(3, 1500), Timestamp::from_ms(200));
    assert_eq!(drain(&mut link), vec![(3, Timestamp::from_ms(210))]);
}
