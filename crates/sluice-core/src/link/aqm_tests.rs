//! CoDel (RFC 8289) and FQ-CoDel (RFC 8290) at a trace-driven link.

use super::codel::{Codel, CodelConfig};
use super::fq_codel::{FqCodel, FqCodelConfig};
use super::*;
use crate::packet::{FlowId, Packet};

/// A 12 Mbps link (one 1504-byte opportunity per ms) with `discipline`.
fn link_with(discipline: Box<dyn QueueDiscipline>) -> Link {
    let trace = Arc::new(Trace::from_ms("t", vec![1]).unwrap());
    let config = LinkConfig { rate: LinkRate::Trace(trace), ..LinkConfig::default() };
    Link::with_discipline(config, Rng::new(1), discipline)
}

fn packet(flow: FlowId, seq: u64, bytes: i64, now: Timestamp) -> Datagram {
    let mut p = Packet::padding(DataSize::from_bytes(bytes), now);
    p.flow = flow;
    p.media_seq = seq;
    Datagram::Media(p)
}

/// A constant-rate source: flow, bytes per packet, packets per ms (as a period in us).
struct Source {
    flow: FlowId,
    bytes: i64,
    period_us: i64,
}

/// Drives `link` for `ms` milliseconds with the sources (an arrival every `period_us` each);
/// returns per flow (delivery time, time since arrival: queueing and serialisation, to the
/// 100 us step) and the drop times.
#[allow(clippy::type_complexity)]
fn drive(
    link: &mut Link,
    sources: &[Source],
    ms: i64,
) -> (Vec<Vec<(Timestamp, TimeDelta)>>, Vec<(Timestamp, FlowId)>) {
    let mut delivered = vec![Vec::new(); 4];
    let mut drops = Vec::new();
    let mut seq = 0;
    for us in (0..ms * 1000).step_by(100) {
        let now = Timestamp::from_us(us);
        for s in sources {
            if us % s.period_us == 0 {
                link.handle_datagram(packet(s.flow, seq, s.bytes, now), now);
                seq += 1;
            }
        }
        link.handle_timeout(now);
        while let Some(d) = link.poll_datagram(now) {
            let Datagram::Media(p) = &d else { unreachable!() };
            delivered[p.flow as usize].push((now, now - p.send_time));
        }
        while let Some((d, _)) = link.poll_drop() {
            drops.push((now, d.flow()));
        }
    }
    (delivered, drops)
}

#[test]
fn codel_never_drops_a_queue_that_drains() {
    // 1000 B every 1 ms at 12 Mbps: no standing queue.
    let mut link = link_with(Box::new(Codel::new(CodelConfig::default(), QueueLimit::Unlimited)));
    let (delivered, drops) =
        drive(&mut link, &[Source { flow: 0, bytes: 1000, period_us: 1000 }], 3000);
    assert!(drops.is_empty());
    assert!(delivered[0].len() >= 2990);
}

#[test]
fn codel_drops_after_an_interval_above_target_then_by_its_control_law() {
    // 1500 B every 500 us: twice the 12 Mbps link, unresponsive. The sojourn time passes
    // 5 ms within about 10 ms; the first drop comes 100 ms later; then the gaps shrink as
    // 100 ms / sqrt(count) (RFC 8289 §5.5): 100, 70.7, 57.7, 50 ms ...
    let mut link = link_with(Box::new(Codel::new(CodelConfig::default(), QueueLimit::Unlimited)));
    let (_, drops) = drive(&mut link, &[Source { flow: 0, bytes: 1500, period_us: 500 }], 600);
    let t: Vec<f64> = drops.iter().map(|(t, _)| t.as_us() as f64 / 1e3).collect();
    assert!(t.len() >= 6, "{t:?}");
    assert!((105.0..125.0).contains(&t[0]), "first drop at {} ms", t[0]);
    for (k, w) in t.windows(2).take(5).enumerate() {
        let want = 100.0 / ((k + 1) as f64).sqrt();
        assert!((w[1] - w[0] - want).abs() <= 1.5, "gap {k}: {} ms, want {want:.1}", w[1] - w[0]);
    }
    let codel = link.discipline_as::<Codel>().unwrap();
    assert_eq!(codel.drops() as usize, t.len());
    // Conservation: every arrival is delivered, dropped or still inside.
    let s = link.stats();
    assert_eq!(
        s.arrived_packets,
        s.delivered_packets + s.dropped_packets() + link.packets_inside() as u64
    );
}

#[test]
fn codel_bounds_the_delay_of_an_overload_where_drop_tail_does_not() {
    // An unresponsive source at 1.1x the link: drop-tail at 300 packets holds ~300 ms;
    // CoDel's increasing drop rate bounds the delay far lower after its first seconds.
    let src = [Source { flow: 0, bytes: 1500, period_us: 900 }];
    let mut tail = link_with(Box::new(DropTail { limit: QueueLimit::Packets(300) }));
    let mut codel =
        link_with(Box::new(Codel::new(CodelConfig::default(), QueueLimit::Packets(300))));
    let (dt, _) = drive(&mut tail, &src, 20_000);
    let (cd, _) = drive(&mut codel, &src, 20_000);
    let late = |v: &[(Timestamp, TimeDelta)]| {
        v.iter().filter(|(t, _)| *t > Timestamp::from_secs_f64(15.0)).map(|(_, d)| d.as_ms()).max()
    };
    let (tail_ms, codel_ms) = (late(&dt[0]).unwrap(), late(&cd[0]).unwrap());
    assert!(tail_ms > 250, "drop-tail {tail_ms} ms");
    assert!(codel_ms < 60, "codel {codel_ms} ms");
}

#[test]
fn fq_codel_shares_bytes_equally_and_isolates_a_sparse_flow() {
    // Flow 1 (1500 B every 400 us: 2.5x the link) and flow 2 (500 B every 200 us: 1.7x the
    // link, in smaller packets) are both backlogged; flow 3 is sparse (200 B every 10 ms).
    let sources = [
        Source { flow: 1, bytes: 1500, period_us: 400 },
        Source { flow: 2, bytes: 500, period_us: 200 },
        Source { flow: 3, bytes: 200, period_us: 10_000 },
    ];
    let mut link =
        link_with(Box::new(FqCodel::new(FqCodelConfig::default(), QueueLimit::Bytes(150_000))));
    let (delivered, drops) = drive(&mut link, &sources, 10_000);
    let bytes = |flow: usize, each: i64| {
        delivered[flow].iter().filter(|(t, _)| *t > Timestamp::from_secs_f64(2.0)).count() as i64
            * each
    };
    let (b1, b2) = (bytes(1, 1500), bytes(2, 500));
    let ratio = b1 as f64 / b2 as f64;
    assert!((ratio - 1.0).abs() < 0.05, "flow 1 {b1} B, flow 2 {b2} B");
    // The sparse flow goes first as a new flow, or waits at most a round of the old list
    // (two quanta) behind the packet in transit: a few ms, not the others' queue.
    let worst = delivered[3].iter().map(|(_, d)| d.as_us()).max().unwrap();
    assert!(worst <= 5_000, "sparse flow's worst queueing delay {worst} us");
    assert_eq!(delivered[3].len(), 1000);
    assert!(drops.iter().all(|(_, f)| *f != 3));
    // The same load under drop-tail: the sparse flow waits behind the others' queue.
    let mut tail = link_with(Box::new(DropTail { limit: QueueLimit::Bytes(150_000) }));
    let (dt, _) = drive(&mut tail, &sources, 10_000);
    let worst_tail = dt[3].iter().map(|(_, d)| d.as_us()).max().unwrap();
    assert!(worst_tail > 50_000, "drop-tail: sparse flow's worst delay {worst_tail} us");
}

#[test]
fn fq_codel_on_overflow_drops_from_the_fattest_queue() {
    // A tiny limit (20 kB) with CoDel effectively off: overflow drops must all hit the
    // heavy flow 1, never flow 2 which keeps at most a few packets queued.
    let cfg = FqCodelConfig {
        codel: CodelConfig { target: TimeDelta::from_secs(10), ..CodelConfig::default() },
        ..FqCodelConfig::default()
    };
    let sources = [
        Source { flow: 1, bytes: 1500, period_us: 300 },
        Source { flow: 2, bytes: 1000, period_us: 2000 },
    ];
    let mut link = link_with(Box::new(FqCodel::new(cfg, QueueLimit::Bytes(20_000))));
    let (delivered, drops) = drive(&mut link, &sources, 3000);
    assert!(drops.len() > 100, "{} drops", drops.len());
    assert!(drops.iter().all(|(_, f)| *f == 1));
    // Every packet of flow 2 delivered (the last one may still be on its way).
    assert!(delivered[2].len() >= 1499, "{}", delivered[2].len());
    assert!(link.queue_bytes().as_bytes() <= 20_000);
}

#[test]
fn codel_with_ecn_marks_capable_packets_on_the_same_schedule_and_drops_the_others() {
    // The overload of `codel_drops_after_an_interval_above_target_then_by_its_control_law`,
    // with ECT(0) packets: CoDel marks where it dropped (100 ms after the standing queue
    // began, then 100 / sqrt(count) apart), and drops nothing. Not-ECT packets of a second
    // flow at the same time are still dropped.
    let ecn = CodelConfig { ecn: true, ..CodelConfig::default() };
    let mut link = link_with(Box::new(Codel::new(ecn, QueueLimit::Unlimited)));
    let mut marks = Vec::new();
    let mut seq = 0;
    for us in (0..400_000).step_by(100) {
        let now = Timestamp::from_us(us);
        if us % 500 == 0 {
            let Datagram::Media(mut p) = packet(0, seq, 1500, now) else { unreachable!() };
            p.ecn = crate::packet::Ecn::Ect0;
            link.handle_datagram(Datagram::Media(p), now);
            seq += 1;
        }
        link.handle_timeout(now);
        while let Some(d) = link.poll_datagram(now) {
            if let Datagram::Media(p) = d {
                if p.ecn == crate::packet::Ecn::Ce {
                    marks.push(now.as_us() as f64 / 1e3);
                }
            }
        }
    }
    assert_eq!(link.stats().dropped_packets(), 0, "ECT packets are marked, not dropped");
    let codel = link.discipline_as::<Codel>().unwrap();
    assert_eq!(codel.drops(), 0);
    assert!(marks.len() >= 5, "{marks:?}");
    assert_eq!(codel.marks() as usize, marks.len());
    // Marked at dequeue, delivered one serialisation later: the first about 110-125 ms in.
    assert!((105.0..130.0).contains(&marks[0]), "{marks:?}");
    for (k, w) in marks.windows(2).take(4).enumerate() {
        let want = 100.0 / ((k + 1) as f64).sqrt();
        assert!((w[1] - w[0] - want).abs() <= 1.5, "gap {k}: {} ms, want {want:.1}", w[1] - w[0]);
    }
    // The same load of Not-ECT packets is dropped, ECN or not.
    let mut plain = link_with(Box::new(Codel::new(ecn, QueueLimit::Unlimited)));
    let (_, drops) = drive(&mut plain, &[Source { flow: 0, bytes: 1500, period_us: 500 }], 400);
    assert!(drops.len() >= 5);
    assert_eq!(plain.discipline_as::<Codel>().unwrap().marks(), 0);
}
