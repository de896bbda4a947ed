//! Tests of Co-RTV's bottleneck: Alg. 1's gain with the brief's worked values, whole-frame
//! drops, the forwarding rule across repeated drops, deciding ahead, feedback timing.

use super::*;
use crate::link::{Link, LinkConfig, LinkRate};
use crate::rng::Rng;
use std::collections::BTreeMap;
use std::sync::Arc;

const FPS: f64 = 60.0;

fn ms(v: i64) -> Timestamp {
    Timestamp::from_ms(v)
}

fn video(frame: u64, index: u16, count: u16, size: i64, lrf: Option<u64>) -> Packet {
    let mut p = Packet::padding(DataSize::from_bytes(size), Timestamp::ZERO);
    p.kind = PacketKind::Video;
    p.frame_id = frame;
    p.packet_index = index;
    p.packet_count = count;
    p.ref_frame_id = frame.checked_sub(1);
    p.latest_reencoded = lrf;
    p
}

// --- Eq. 1-5 with the brief's worked values (U1) -------------------------------------------

fn cost(qlen_kb: i64, size_kb: i64, bw_mbps: f64, old_mbps: f64) -> DropCost {
    DropCost {
        qlen: DataSize::from_kilobytes(qlen_kb),
        size: DataSize::from_kilobytes(size_kb),
        bw: DataRate::from_bps_f64(bw_mbps * 1e6),
        bw_old: DataRate::from_bps_f64(old_mbps * 1e6),
        rtt_bn: TimeDelta::from_ms(40),
        fps: FPS,
        t_pre: TimeDelta::ZERO,
        alpha: 0.5,
    }
}

fn ms_f(d: TimeDelta) -> f64 {
    d.as_us() as f64 / 1e3
}

#[test]
fn gain_of_the_brief_20_to_2_mbps() {
    // Bw = 2 Mbps, QLen = 50 kB, size = 10 kB, RTT_BN = 40 ms, FR = 60: L = 240 - 73.3 =
    // 166.7 ms; Bw_old = 20 Mbps, alpha = 0.5: Q = 0.5 x 9 / 60 = 75 ms; Gain = 91.7 ms.
    let c = cost(50, 10, 2.0, 20.0);
    assert!((ms_f(c.replacement_time()) - 73.333).abs() < 0.001);
    assert!((ms_f(c.latency_decrease()) - 166.667).abs() < 0.001);
    assert!((ms_f(c.quality_decrease()) - 75.0).abs() < 0.001);
    assert!((ms_f(c.gain().unwrap()) - 91.667).abs() < 0.001);
    assert!(c.drop());
    // Bw_old = 2.5 Mbps: Q = 0.5 x 0.25 / 60 = 2.1 ms, drop.
    let c = cost(50, 10, 2.0, 2.5);
    assert!((ms_f(c.quality_decrease()) - 2.083).abs() < 0.001);
    assert!(c.drop());
    // An empty queue and a 10 kB frame at 20 Mbps: L = 4 - 73.3 < 0, keep.
    let c = cost(0, 10, 20.0, 40.0);
    assert!(c.latency_decrease() < TimeDelta::ZERO);
    assert!(!c.drop());
    // Bw_old <= Bw: never drop, whatever the queue (Alg. 1 line 3).
    assert!(!cost(5000, 10, 2.0, 2.0).drop());
    assert!(!cost(5000, 10, 2.0, 1.0).drop());
    // Deciding T_pre ahead adds T_pre to L (Eq. 5).
    let ahead = DropCost { t_pre: TimeDelta::from_ms(30), ..cost(50, 10, 2.0, 20.0) };
    assert!((ms_f(ahead.gain().unwrap()) - 121.667).abs() < 0.001);
    // The sign of the decision is the sign of the gain, on either side of Gain = 0:
    // QLen + size = Bw x (T' + Q) = 2 Mbps x 148.3 ms = 37.08 kB.
    assert!(!cost(27, 10, 2.0, 20.0).drop());
    assert!(cost(28, 10, 2.0, 20.0).drop());
    assert!(cost(27, 10, 2.0, 20.0).gain().unwrap() < TimeDelta::ZERO);
    // An outage (Bw = 0): drop when more than alpha x Bw_old / FR (20.8 kB at 20 Mbps) waits.
    let out = |q| DropCost { bw: DataRate::ZERO, ..cost(q, 10, 2.0, 20.0) };
    assert!(out(0).gain().is_none());
    assert!(!out(10).drop());
    assert!(out(11).drop());
}

#[test]
fn the_forwarding_rule_over_a_packet_sequence() {
    // (frame, LRF) -> forwarded, with D = 10 active: below D always, at or above it only the
    // new generation (LRF >= D).
    let d = Some(10);
    let cases = [
        (9, None, true),
        (9, Some(3), true),
        (10, None, false),
        (12, Some(3), false),
        (12, Some(9), false),
        (15, Some(10), true),
        (16, Some(11), true),
    ];
    for (frame, lrf, fwd) in cases {
        assert_eq!(forwards(frame, lrf, d), fwd, "frame {frame}, LRF {lrf:?}");
    }
    assert!(forwards(1000, None, None), "no drop active: everything passes");
    // A second drop from 17 (a re-encoded frame): frames 15-16 with LRF 10 are committed, 17
    // and later with LRF 10 go, LRF 17 passes; the old generation stays out.
    let d2 = Some(17);
    assert!(forwards(16, Some(10), d2));
    assert!(!forwards(17, Some(10), d2));
    assert!(!forwards(18, Some(10), d2));
    assert!(forwards(19, Some(17), d2));
    assert!(forwards(12, None, d2), "below the new D: forwarded (it was dropped before)");
}

// --- a bench: frames into a bottleneck link ---------------------------------------------------

/// Frames of `packets` x 1200 B every 1/FR into a Co-RTV bottleneck, with a sender that can
/// react to drop reports `reaction` after they are made (fresh ids, LRF = D).
struct Bench {
    link: Link,
    now: Timestamp,
    reports: Vec<(Timestamp, BottleneckReport)>,
    delivered: Vec<Packet>,
    dropped: Vec<(Packet, DropReason)>,
    next_id: u64,
    lrf: Option<u64>,
    /// Drop reports not yet acted on: (when the sender acts, D).
    pending: VecDeque<(Timestamp, u64)>,
    reaction: Option<TimeDelta>,
    /// Frames sent: id -> (LRF, packet count).
    sent: BTreeMap<u64, (Option<u64>, u16)>,
    /// The frame clock: the next frame goes at `frame_k / FR`.
    frame_k: u64,
    /// When the sender last reacted to a drop report.
    reacted_at: Option<Timestamp>,
}

impl Bench {
    fn new(trace: &str, cfg: CoRtvBottleneckConfig, reaction: Option<TimeDelta>) -> Bench {
        let spec = crate::link::TraceSpec::parse_cli(trace).unwrap();
        let trace = Arc::new(crate::link::generate(&spec, TimeDelta::from_secs(10)).unwrap());
        let bn = cfg.build(QueueLimit::Unlimited, 0, FPS, TimeDelta::from_ms(40));
        let link = Link::with_discipline(
            LinkConfig { rate: LinkRate::Trace(trace), ..LinkConfig::default() },
            Rng::new(1),
            Box::new(bn),
        );
        Bench {
            link,
            now: Timestamp::ZERO,
            reports: Vec::new(),
            delivered: Vec::new(),
            dropped: Vec::new(),
            next_id: 0,
            lrf: None,
            pending: VecDeque::new(),
            reaction,
            sent: BTreeMap::new(),
            frame_k: 0,
            reacted_at: None,
        }
    }

    fn collect(&mut self) {
        while let Some(d) = self.link.poll_report() {
            if let Datagram::Feedback(Feedback::Bottleneck(r)) = d {
                if let (Some(d), Some(react)) = (r.drop_from, self.reaction) {
                    self.pending.push_back((r.time + react, d));
                }
                self.reports.push((self.now, r));
            }
        }
        while let Some(d) = self.link.poll_datagram(self.now) {
            if let Datagram::Media(p) = d {
                self.delivered.push(p);
            }
        }
        while let Some((d, why)) = self.link.poll_drop() {
            if let Datagram::Media(p) = d {
                self.dropped.push((p, why));
            }
        }
    }

    /// Runs the link up to `until`.
    fn advance(&mut self, until: Timestamp) {
        loop {
            let next = self.link.poll_timeout();
            if next > until {
                break;
            }
            self.now = next.max(self.now);
            self.link.handle_timeout(self.now);
            self.collect();
        }
        self.now = until;
        self.link.handle_timeout(until);
        self.collect();
    }

    fn send(&mut self, p: Packet) {
        self.link.handle_datagram(Datagram::Media(p), self.now);
        self.collect();
    }

    /// Sends one frame of `packets` packets at once, as the sender that reacted so far would.
    fn send_frame(&mut self, packets: u16) -> u64 {
        while self.pending.front().is_some_and(|(t, _)| *t <= self.now) {
            let (_, d) = self.pending.pop_front().unwrap();
            self.lrf = Some(d);
            self.reacted_at = Some(self.now);
        }
        let id = self.next_id;
        self.next_id += 1;
        self.sent.insert(id, (self.lrf, packets));
        for i in 0..packets {
            self.send(video(id, i, packets, 1200, self.lrf));
        }
        id
    }

    /// Frames of `packets` packets on the frame clock (every 1/FR from time 0) until `until`.
    fn frames_until(&mut self, until: Timestamp, packets: u16) {
        self.frames_sized_until(until, |_| packets);
    }

    /// Frames on the frame clock until `until`, sized by `packets(bench)` at each frame.
    fn frames_sized_until(&mut self, until: Timestamp, packets: impl Fn(&Bench) -> u16) {
        loop {
            let t = Timestamp::ZERO + TimeDelta::from_secs_f64(self.frame_k as f64 / FPS);
            if t >= until {
                break;
            }
            self.advance(t);
            let n = packets(self);
            self.send_frame(n);
            self.frame_k += 1;
        }
        self.advance(until);
    }

    fn drop_reports(&self) -> Vec<&BottleneckReport> {
        self.reports.iter().map(|(_, r)| r).filter(|r| r.drop_from.is_some()).collect()
    }

    /// Per frame id: (packets delivered, packets dropped by the policy).
    fn fates(&self) -> BTreeMap<u64, (usize, usize)> {
        let mut out: BTreeMap<u64, (usize, usize)> = BTreeMap::new();
        for p in self.delivered.iter().filter(|p| p.kind == PacketKind::Video && p.flow == 0) {
            out.entry(p.frame_id).or_default().0 += 1;
        }
        for (p, why) in &self.dropped {
            assert_eq!(*why, DropReason::Policy);
            if p.kind == PacketKind::Video && p.flow == 0 {
                out.entry(p.frame_id).or_default().1 += 1;
            }
        }
        out
    }

    fn bn(&self) -> &FrameDroppingBottleneck {
        self.link.discipline_as::<FrameDroppingBottleneck>().unwrap()
    }
}

#[test]
fn a_20_to_2_mbps_step_drops_a_suffix_of_whole_frames_and_nothing_else() {
    // 60 fps frames of 34 x 1200 B (19.6 Mbps) onto a link that drops from 20 to 2 Mbps at 1 s;
    // padding and another flow's packets share the queue. No sender reaction: after D every
    // frame of the old generation goes.
    let mut b = Bench::new("steps:20@1,2@9", CoRtvBottleneckConfig::default(), None);
    let mut other = 0;
    for k in 0..80u64 {
        b.frames_until(ms(25 * k as i64 + 25), 34);
        let mut pad = Packet::padding(DataSize::from_bytes(300), b.now);
        pad.frame_id = 5; // padding carries no frame: never dropped whatever its id
        b.send(pad);
        let mut x = video(10_000 + k, 0, 1, 1200, None);
        x.flow = 7;
        b.send(x);
        other += 1;
    }
    b.advance(ms(4000));
    let decisions = b.bn().decisions().to_vec();
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    let dec = decisions[0];
    let d = dec.frame_id;
    // Decided within w + one frame interval of the step (1000 + 50 + 16.7 ms).
    assert!(dec.time > ms(1000) && dec.time <= ms(1067), "{dec:?}");
    // One drop report, made at once, naming D with Bw and the queue left.
    let drops = b.drop_reports();
    assert_eq!(drops.len(), 1);
    assert_eq!(drops[0].drop_from, Some(d));
    assert_eq!(drops[0].time, dec.time);
    assert_eq!(drops[0].rate, Some(dec.cost.bw));
    assert!(dec.cost.bw < dec.cost.bw_old);
    // Whole frames: every frame below D arrives complete, every frame from D on not at all.
    let fates = b.fates();
    for (&id, &(_, count_sent)) in &b.sent {
        let (delivered, dropped) = fates.get(&id).copied().unwrap_or((0, 0));
        if id < d {
            assert_eq!((delivered, dropped), (count_sent as usize, 0), "frame {id} < D = {d}");
        } else {
            assert_eq!((delivered, dropped), (0, count_sent as usize), "frame {id} >= D = {d}");
        }
    }
    // Padding and the other flow are untouched; policy drops are counted apart.
    let pads = b.delivered.iter().filter(|p| p.kind == PacketKind::Padding).count();
    assert_eq!(pads, 80);
    assert_eq!(b.delivered.iter().filter(|p| p.flow == 7).count(), other);
    let stats = *b.link.stats();
    assert_eq!(stats.dropped_policy_packets as usize, b.dropped.len());
    assert_eq!(stats.dropped_queue_packets + stats.dropped_loss_packets, 0);
    // A retransmission of a dropped frame is dropped too; one of an earlier frame passes.
    let mut rtx = video(d, 0, 34, 1200, None);
    rtx.kind = PacketKind::Retransmission;
    b.send(rtx.clone());
    assert_eq!(b.dropped.last().unwrap().0, rtx);
    rtx.frame_id = d - 1;
    b.send(rtx);
    b.advance(ms(4500));
    assert!(b.delivered.iter().any(|p| p.kind == PacketKind::Retransmission));
}

#[test]
fn a_frame_with_a_packet_already_sent_is_kept() {
    // Frames large enough that one is always being served: the decision never picks a frame
    // whose first packet has left, so nothing arrives partially.
    let mut b = Bench::new("steps:20@1,1@9", CoRtvBottleneckConfig::default(), None);
    b.frames_until(ms(2500), 60);
    b.advance(ms(9000));
    let d = b.bn().decisions()[0].frame_id;
    for (id, (delivered, dropped)) in b.fates() {
        let n = b.sent[&id].1 as usize;
        assert!((delivered, dropped) == (n, 0) || (delivered, dropped) == (0, n), "frame {id}");
        assert_eq!(delivered == n, id < d);
    }
    // The frame in service when D was decided was delivered whole and is below D.
    assert!(b.fates()[&(d - 1)].0 == b.sent[&(d - 1)].1 as usize);
}

#[test]
fn forwarding_recovers_with_the_new_generation_and_a_later_drop_targets_it() {
    // Two 20 -> 2 Mbps periods (1-2 s and 3-4 s). The sender hears of each drop 20 ms after it
    // is decided; from then on it sends fresh ids stamped LRF = D, and small frames (3 x 1200
    // B, 1.7 Mbps) until the link is back at 20 Mbps.
    let mut b = Bench::new(
        "steps:20@1,2@1,20@1,2@1,20@5",
        CoRtvBottleneckConfig::default(),
        Some(TimeDelta::from_ms(20)),
    );
    let low = |t: Timestamp| (ms(1000)..ms(2000)).contains(&t) || (ms(3000)..ms(4000)).contains(&t);
    // Small frames from the reaction until 100 ms after the link is back up (the estimate
    // lags by up to w = 50 ms: a large frame right at the step up would look too slow).
    let period = |t: Timestamp| {
        if (ms(1000)..ms(2100)).contains(&t) {
            1
        } else if (ms(3000)..ms(4100)).contains(&t) {
            2
        } else {
            0
        }
    };
    b.frames_sized_until(ms(5000), |b| {
        let reacted = b.reacted_at.is_some_and(|r| period(r) == period(b.now));
        if period(b.now) > 0 && reacted {
            3
        } else {
            34
        }
    });
    b.advance(ms(6000));
    let decisions = b.bn().decisions().to_vec();
    let ds: Vec<u64> = decisions.iter().map(|d| d.frame_id).collect();
    // D only grows; every D after the first is a frame of the generation the previous D
    // started (a re-encoded frame), so repeated drops work.
    assert!(ds.windows(2).all(|w| w[1] > w[0]), "{ds:?}");
    for w in ds.windows(2) {
        assert!(
            b.sent[&w[1]].0.is_some_and(|l| l >= w[0]),
            "D {} has LRF {:?}",
            w[1],
            b.sent[&w[1]].0
        );
    }
    // Drops in both low periods, none once the link is back up.
    assert!(decisions.iter().any(|d| (ms(1000)..ms(2000)).contains(&d.time)));
    assert!(decisions.iter().any(|d| (ms(3000)..ms(4000)).contains(&d.time)));
    let late: Vec<_> = decisions.iter().filter(|d| !low(d.time)).collect();
    assert!(late.is_empty(), "{late:?}");
    // Every frame is delivered whole or dropped whole, and dropped exactly when some decision
    // D covers it: frame >= D with LRF < D (the forwarding rule across repeated drops).
    let fates = b.fates();
    for (&id, &(lrf, n)) in &b.sent {
        let (delivered, dropped) = fates.get(&id).copied().unwrap_or((0, 0));
        let covered = ds.iter().any(|&d| !forwards(id, lrf, Some(d)));
        let expect = if covered { (0, n as usize) } else { (n as usize, 0) };
        assert_eq!((delivered, dropped), expect, "frame {id} (LRF {lrf:?}), D = {ds:?}");
    }
    // Forwarding recovers in each period: small frames of the latest generation get through.
    for period in [ms(1000), ms(3000)] {
        let delivered_new = b
            .sent
            .iter()
            .filter(|(_, (l, n))| *n == 3 && l.is_some())
            .filter(|(id, _)| fates.get(id).is_some_and(|f| f.0 > 0))
            .count();
        assert!(delivered_new > 10, "{period:?}: {delivered_new}");
    }
    let last_d = *ds.last().unwrap();
    assert!(b.sent.range(last_d + 1..).any(|(id, (l, _))| *l == Some(last_d) && fates[id].0 > 0));
}

#[test]
fn deciding_k_frames_ahead_is_earlier_than_at_arrival() {
    // 20 -> 2 Mbps at 1 s under 19.6 Mbps of frames. With k = 2 Alg. 1 drops a frame that has
    // not arrived yet, as soon as the falling estimate says it would wait too long; with
    // k = 0 only frames in the queue can be chosen, so the decision comes later.
    let run = |k: u32| {
        let cfg = CoRtvBottleneckConfig { lookahead_frames: k, ..Default::default() };
        let mut b = Bench::new("steps:20@1,2@9", cfg, None);
        b.frames_until(ms(1500), 34);
        // The newest frame sent by `t` (frames go at k / FR).
        let newest_sent_before =
            |t: Timestamp| (t.as_us() as f64 * FPS / 1e6 + 1e-3).floor() as u64;
        let d = b.bn().decisions()[0];
        (d, newest_sent_before(d.time))
    };
    let (ahead, newest_ahead) = run(2);
    let (at_arrival, newest_at_arrival) = run(0);
    assert!(ahead.predicted, "{ahead:?}");
    assert!(ahead.frame_id > newest_ahead, "not arrived when decided");
    assert!(
        ahead.cost.t_pre > TimeDelta::ZERO
            && ahead.cost.t_pre <= TimeDelta::from_secs_f64(2.0 / FPS)
    );
    assert!(!at_arrival.predicted);
    assert!(at_arrival.frame_id <= newest_at_arrival, "k = 0 picks a frame that is there");
    // ... and here it decides when that frame's first packet arrives, on the frame clock.
    let t = at_arrival.time.as_us() as f64 * FPS / 1e6;
    assert!((t - t.round()).abs() < 1e-3, "{:?}", at_arrival.time);
    assert!(ahead.time < at_arrival.time, "{:?} vs {:?}", ahead.time, at_arrival.time);
    // Both within w + one frame interval of the step.
    assert!(at_arrival.time <= ms(1067));
}

#[test]
fn queue_feedback_every_rtt_and_drop_feedback_at_once() {
    // The paper's k = 2: its first drop leaves frames queued ahead of D, so the reported
    // queue still grows after the step (with k = 0 the drop empties it).
    let cfg = CoRtvBottleneckConfig { lookahead_frames: 2, ..Default::default() };
    let mut b = Bench::new("steps:20@1,2@9", cfg, None);
    b.frames_until(ms(1500), 34);
    let periodic: Vec<_> = b.reports.iter().filter(|(_, r)| r.drop_from.is_none()).collect();
    // Every RTT_BN = 40 ms, on the grid, with the queue length only.
    assert_eq!(periodic.len(), 1500 / 40);
    for (k, (at, r)) in periodic.iter().enumerate() {
        assert_eq!(r.time, ms(40 * (k as i64 + 1)));
        assert_eq!(*at, r.time, "sent when made");
        assert_eq!(r.rate, None);
    }
    // The queue grows after the step.
    assert!(periodic[30].1.queue > periodic[20].1.queue);
    let drop = b.drop_reports()[0].clone();
    assert_eq!(drop.time, b.bn().decisions()[0].time);
    assert!(drop.time.as_us() % 40_000 != 0, "not on the periodic grid: sent at once");
    // Report numbers increase across both kinds.
    let seqs: Vec<u64> = b.reports.iter().map(|(_, r)| r.seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));
}

#[test]
fn feedback_reaches_the_sender_exactly_the_access_delay_later() {
    use crate::sim::network::{Network, Node, Port, IN, OUT, REPORT};
    /// Frames of 34 x 1200 B at 60 fps.
    struct Frames(u64);
    impl Node for Frames {
        fn handle_input(&mut self, _: Port, _: Datagram, _: Timestamp) {}
        fn handle_timeout(&mut self, _: Timestamp) {}
        fn poll_output(&mut self, now: Timestamp) -> Option<(Port, Datagram)> {
            let (frame, index) = (self.0 / 34, (self.0 % 34) as u16);
            let t = Timestamp::ZERO + TimeDelta::from_secs_f64(frame as f64 / FPS);
            (t <= now).then(|| {
                self.0 += 1;
                (OUT, Datagram::Media(video(frame, index, 34, 1200, None)))
            })
        }
        fn poll_timeout(&self) -> Timestamp {
            Timestamp::ZERO + TimeDelta::from_secs_f64((self.0 / 34) as f64 / FPS)
        }
    }
    #[derive(Default)]
    struct Sink(Vec<(Timestamp, Datagram)>);
    impl Node for Sink {
        fn handle_input(&mut self, _: Port, d: Datagram, now: Timestamp) {
            self.0.push((now, d));
        }
        fn handle_timeout(&mut self, _: Timestamp) {}
        fn poll_output(&mut self, _: Timestamp) -> Option<(Port, Datagram)> {
            None
        }
        fn poll_timeout(&self) -> Timestamp {
            Timestamp::INFINITY
        }
    }
    let spec = crate::link::TraceSpec::parse_cli("steps:20@1,2@9").unwrap();
    let trace = Arc::new(crate::link::generate(&spec, TimeDelta::from_secs(10)).unwrap());
    let bn = Link::with_discipline(
        LinkConfig { rate: LinkRate::Trace(trace), ..LinkConfig::default() },
        Rng::new(1),
        crate::link::bottleneck::BottleneckConfig::CoRtv(Default::default()).build_in(
            QueueLimit::Unlimited,
            0,
            crate::link::bottleneck::BottleneckEnv {
                fps: FPS,
                rtt_to_sender: TimeDelta::from_ms(40),
            },
        ),
    );
    let path = Link::new(
        LinkConfig { delay: TimeDelta::from_ms(20), ..LinkConfig::default() },
        Rng::new(2),
    );
    let mut net = Network::default();
    let src = net.add("frames", Box::new(Frames(0)));
    let down = net.add("bottleneck", Box::new(bn));
    let back = net.add("report-path", Box::new(path));
    let sender = net.add("sender", Box::new(Sink::default()));
    let receiver = net.add("receiver", Box::new(Sink::default()));
    net.connect(src, OUT, down, IN);
    net.connect(down, OUT, receiver, IN);
    net.connect(down, REPORT, back, IN);
    net.connect(back, OUT, sender, IN);
    let mut now = Timestamp::ZERO;
    while now <= ms(1500) {
        assert!(net.settle(now, 100_000));
        now = net.poll_timeout().max(now + TimeDelta::from_us(1));
    }
    let got = &net.get::<Sink>(sender).unwrap().0;
    let drops: Vec<_> = got
        .iter()
        .filter_map(|(at, d)| match d {
            Datagram::Feedback(Feedback::Bottleneck(r)) => Some((*at, r.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(drops.len(), 1500 / 40 + 1, "37 periodic reports and one drop report");
    for (at, r) in &drops {
        assert_eq!(*at - r.time, TimeDelta::from_ms(20), "report {}", r.seq);
    }
    assert_eq!(drops.iter().filter(|(_, r)| r.drop_from.is_some()).count(), 1);
}

#[test]
fn no_drops_on_a_constant_link() {
    // 12 Mbps, frames of 8 x 1200 B at 60 fps (4.6 Mbps): Bw_old and Bw wobble by one
    // opportunity but no frame waits anywhere near T' + Q.
    let mut b = Bench::new("constant:12", CoRtvBottleneckConfig::default(), None);
    b.frames_until(ms(5000), 8);
    assert!(b.bn().decisions().is_empty());
    assert!(b.dropped.is_empty());
    assert!(b.drop_reports().is_empty());
}

#[test]
fn without_feedback_frames_go_one_by_one_and_nothing_is_reported() {
    // A 20 -> 2 Mbps dip of 300 ms: frames whose own gain is positive are dropped, the rest
    // forwarded (no suffix), and the bottleneck says nothing.
    let cfg = CoRtvBottleneckConfig { feedback: false, ..Default::default() };
    let mut b = Bench::new("steps:20@1,2@0.3,20@9", cfg, None);
    b.frames_until(ms(2500), 34);
    b.advance(ms(4000));
    assert!(b.reports.is_empty());
    let fates = b.fates();
    let dropped: Vec<u64> = fates.iter().filter(|(_, f)| f.1 > 0).map(|(id, _)| *id).collect();
    assert!(!dropped.is_empty());
    for (id, (delivered, lost)) in &fates {
        let n = b.sent[id].1 as usize;
        assert!((*delivered, *lost) == (n, 0) || (*delivered, *lost) == (0, n), "frame {id}");
    }
    let last_dropped = *dropped.last().unwrap();
    assert!(fates[&(last_dropped + 1)].0 > 0, "later frames flow again without any LRF");
    assert!(b.sent.keys().max().unwrap() > &(last_dropped + 10));
}
