//! libwebrtc's pacing controller (modules/pacing/pacing_controller), debt-based:
//!
//! * sending a packet adds its size to `media_debt` (capped at `pacing_rate * 500 ms`);
//! * elapsed time (at most 2 s at once) pays the debt off at the (adjusted) pacing rate;
//! * the next packet may go when the debt drains to zero, or at once while the time to drain
//!   it is within `burst_interval` (0 = the paper-era behaviour; current libwebrtc: 40 ms),
//!   and at most 63 kB of it (libwebrtc's `kMaxBurstSize`);
//! * retransmissions go before video; padding only when the queue is empty and the padding
//!   debt is paid;
//! * queue-time limit: when the average queue time approaches `queue_time_limit`, the rate is
//!   raised to `queue_bytes / (limit - average queue time)` so the queue drains in time.
//!
//! * with `hold_back_window_ms` set, the pacer runs when libwebrtc's task queue would run it
//!   (see [`super::task_queue`]): on an enqueue, a rate change or a probe cluster, and on its
//!   own delayed task, scheduled for the next send time but no sooner than the hold-back
//!   window (none while probing), the delay rounded up to a whole millisecond; each run sends
//!   every packet whose time has come. Without it
//!   (the default) each packet goes at its own send time, to the microsecond.
//!
//! The pacing rate is the congestion controller's (GCC: `pacing_factor * target`; WebRTC's
//! video default is 1.1, the legacy default, ACE's WebRTC-B, 2.5; notes §2).

use super::core::{Due, PacerCore};
use super::padding::PaddingBudget;
use super::task_queue::WakeSchedule;
use super::Pacer;
use crate::packet::Packet;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};

/// Parameters of libwebrtc's pacing controller.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeakyBucketConfig {
    /// Debt that may be sent at once (libwebrtc's "burst interval"); 0 paces every packet.
    pub burst_interval_ms: f64,
    /// Queue-time limit for the drain rule (libwebrtc: 2000 ms); 0 disables it.
    pub queue_time_limit_ms: f64,
    /// Cap on media debt, as a duration at the pacing rate (libwebrtc: 500 ms).
    pub max_debt_ms: f64,
    /// libwebrtc's hold-back window: the shortest wait between two runs of the pacer that
    /// its task queue schedules (`max_hold_back_window`, 5 ms in `RtpTransportControllerSend`);
    /// its delayed runs are also rounded up to whole milliseconds. 0 (the default) models no
    /// task queue: each packet leaves at its own send time.
    pub hold_back_window_ms: f64,
    /// The hold-back window's bound in packets: at most this many mean packet sizes at the
    /// pacing rate (`max_hold_back_window_in_packets`, libwebrtc: 3). Used only with a
    /// hold-back window.
    pub hold_back_packets: f64,
    /// libwebrtc's probe priority: while a probe cluster is being sent it takes the pacer
    /// over ("If probing is active, that always takes priority", `NextSendTime`; every packet
    /// `ProcessPackets` sends meanwhile is the cluster's, queued media first), so no untagged
    /// media or padding leaves between its probes and the cluster's packets arrive at the
    /// rate the path gives them all. Off (the default, left out of a serialised config) in
    /// every registered scheme: media due between two probes goes untagged, as every
    /// published report ran, and the probes then measure less than the path carries. On, it
    /// changes 22 of the 105 regression runs and, on Chromium's cells, moves
    /// `webrtc-burst40`'s tails at 20 Mbps both ways by up to 4x (docs/schemes.md).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub probe_takes_over: bool,
}

impl Default for LeakyBucketConfig {
    fn default() -> Self {
        LeakyBucketConfig {
            burst_interval_ms: 0.0,
            queue_time_limit_ms: 2000.0,
            max_debt_ms: 500.0,
            hold_back_window_ms: 0.0,
            hold_back_packets: 3.0,
            probe_takes_over: false,
        }
    }
}

/// Largest gap over which debt is paid off at once (libwebrtc: 2 s).
const MAX_ELAPSED: TimeDelta = TimeDelta::from_secs(2);

/// The most debt a burst may leave (libwebrtc's `PacingController::kMaxBurstSize`, 63 kB:
/// "not to risk overfilling socket buffers"): `NextSendTime` bounds the burst interval by
/// `kMaxBurstSize / rate`, so above 12.6 Mbps of pacing rate a 40 ms interval allows less
/// than 40 ms of budget at once.
const MAX_BURST_SIZE: DataSize = DataSize::from_bytes(63_000);

/// libwebrtc's debt-based pacer (see the module documentation).
pub struct LeakyBucketPacer {
    /// The config's durations, converted once (they are used per packet).
    burst_interval: TimeDelta,
    queue_time_limit: TimeDelta,
    max_debt: TimeDelta,
    core: PacerCore,
    pacing_rate: DataRate,
    padding: PaddingBudget,
    /// Rate after the queue-drain adjustment.
    adjusted_rate: DataRate,
    media_debt: DataSize,
    last_update: Timestamp,
    /// When the pacer runs, with a hold-back window; `None`: at each packet's send time.
    wake: Option<WakeSchedule>,
    /// The sender's window holds the packets back (only tracked with a task queue).
    congested: bool,
    /// [`LeakyBucketConfig::probe_takes_over`].
    probe_takes_over: bool,
}

impl LeakyBucketPacer {
    /// The pacer at `now`, without debt, at 300 kbps until the first `set_rates`.
    pub fn new(config: LeakyBucketConfig, now: Timestamp) -> Self {
        LeakyBucketPacer {
            burst_interval: TimeDelta::from_ms_f64(config.burst_interval_ms),
            queue_time_limit: TimeDelta::from_ms_f64(config.queue_time_limit_ms),
            max_debt: TimeDelta::from_ms_f64(config.max_debt_ms),
            core: PacerCore::default(),
            pacing_rate: DataRate::from_kbps(300),
            padding: PaddingBudget::default(),
            adjusted_rate: DataRate::from_kbps(300),
            media_debt: DataSize::ZERO,
            last_update: now,
            wake: (config.hold_back_window_ms > 0.0).then(|| {
                WakeSchedule::new(
                    TimeDelta::from_ms_f64(config.hold_back_window_ms),
                    config.hold_back_packets,
                )
            }),
            congested: false,
            probe_takes_over: config.probe_takes_over,
        }
    }

    /// Up to when the budget is paid at `now`: `now`, or with a task queue the send time of
    /// a packet that waited for the pacer's run, so that sending it late loses no budget
    /// (pacing_controller.cc pays up to the target send time).
    fn pay_time(&self, now: Timestamp) -> Timestamp {
        if self.wake.is_none() {
            return now;
        }
        now.min(self.media_send_time()).min(self.padding_send_time())
    }

    /// The next time anything may be sent: media, padding or a probe (`NextSendTime`).
    fn next_send_time(&self) -> Timestamp {
        if self.probes_only() {
            return self.core.prober.next_probe_time();
        }
        self.core.prober.next_probe_time().min(self.media_send_time()).min(self.padding_send_time())
    }

    /// Whether only probes may go now ([`LeakyBucketConfig::probe_takes_over`]).
    fn probes_only(&self) -> bool {
        self.probe_takes_over && self.core.prober.is_probing()
    }

    /// The next packet at `now` if it is due, paying the budget up to the time it was due.
    fn send_due(&mut self, now: Timestamp) -> Option<Packet> {
        let open = !self.probes_only();
        let (media_due, padding_due) =
            (open && self.media_send_time() <= now, open && self.padding_send_time() <= now);
        match self.core.next_due(now, media_due, padding_due)? {
            Due::Probe(p) | Due::Media(p) => {
                self.on_sent(p.size);
                self.update_adjusted_rate(now);
                Some(p)
            }
            Due::Filler => {
                let size = self.padding.take_packet();
                self.on_sent(size);
                Some(Packet::padding(size, now))
            }
        }
    }

    /// A run of the pacer at `now` under the task queue: every packet due goes, then the
    /// next run is scheduled.
    fn poll_run(&mut self, now: Timestamp) -> Option<Packet> {
        if !self.wake.as_mut().is_some_and(|w| w.runs_at(now)) {
            return None;
        }
        // A probe cluster dropped as late changes the next send time; a few rounds at most.
        for _ in 0..16 {
            let next = self.next_send_time();
            if next > now {
                break;
            }
            self.update_budget(self.pay_time(now));
            if let Some(p) = self.send_due(now) {
                return Some(p);
            }
        }
        let (next, probing, rate) =
            (self.next_send_time(), self.core.prober.is_probing(), self.adjusted_rate);
        if let Some(w) = self.wake.as_mut() {
            w.finish(now, next, probing, rate);
        }
        None
    }

    /// Whether the budget is paid only when the pacer sends (and on an enqueue into an empty
    /// queue), as libwebrtc's pacing controller pays it (`ProcessPackets`, which its task
    /// queue runs only once `NextSendTime` has come; `EnqueuePacket`'s fast-forward): with a
    /// burst interval the time to the next send depends on the debt at the last send, so
    /// paying part of it at a poll in between (an enqueue, a rate change, any other event)
    /// would let packets go before the debt has drained. Without one the rule moves send
    /// times too: a rate change would pay the time since the last payment at the new rate
    /// instead of the old, and an enqueue into a busy queue would not pay at all. Made the
    /// rule for every leaky bucket, 75 of the 102 runs of `bench/regression.py` change (from
    /// the first frames on: `ace-c` on x264, frame 2's first packet 147 ms -> 120 ms), so the
    /// schemes without a burst interval keep the payment at every poll that every published
    /// report ran; libwebrtc's rule for all of them means regenerating every report.
    fn pays_only_when_it_sends(&self) -> bool {
        self.burst_interval > TimeDelta::ZERO
    }

    /// Pays off debt for the time since the last update.
    fn update_budget(&mut self, now: Timestamp) {
        let elapsed = now.saturating_since(self.last_update).min(MAX_ELAPSED);
        self.last_update = self.last_update.max(now);
        self.media_debt = (self.media_debt - self.adjusted_rate * elapsed).max(DataSize::ZERO);
        self.padding.pay(elapsed);
        self.update_adjusted_rate(now);
    }

    /// libwebrtc's drain rule: make the queue drain before the queue-time limit.
    fn update_adjusted_rate(&mut self, now: Timestamp) {
        self.adjusted_rate =
            self.pacing_rate.max(self.core.queue.drain_rate(self.queue_time_limit, now));
    }

    fn on_sent(&mut self, size: DataSize) {
        let cap = self.adjusted_rate * self.max_debt;
        self.media_debt = (self.media_debt + size).min(cap.max(size));
    }

    /// When the queue head may go, from the debt alone (pacing_controller.cc NextSendTime):
    /// at once while the time to drain the debt is shorter than the burst interval, else
    /// once the whole debt is paid (`last_process_time + (burst > drain ? 0 : drain)`). So
    /// with a burst interval the pacer sends up to that much budget at once and then waits
    /// for the debt to drain completely, not packet by packet: a frame larger than the
    /// allowance leaves in bursts a drain time apart, as Chromium's does
    /// (docs/results/chrome-pacing/chrome.md). The interval is bounded by
    /// [`MAX_BURST_SIZE`] at the rate (`min(burst, kMaxBurstSize / rate)`; in bytes, the
    /// allowance is at most 63 kB). Without one it paces each packet.
    ///
    /// The comparison is in bytes, and the wait is the time to pay the whole debt (rounded up
    /// to the microsecond), so the payment at that time, rounded down to the byte, covers it:
    /// no 1 us timers re-armed to pay a last byte.
    fn media_send_time(&self) -> Timestamp {
        if self.core.queue.is_empty() {
            return Timestamp::INFINITY;
        }
        let allowance = (self.adjusted_rate * self.burst_interval).min(MAX_BURST_SIZE);
        if self.media_debt <= DataSize::ZERO || self.media_debt < allowance {
            self.last_update
        } else {
            self.last_update + self.media_debt / self.adjusted_rate
        }
    }

    fn padding_send_time(&self) -> Timestamp {
        self.padding.send_time(self.last_update, self.core.queue.is_empty())
    }
}

impl Pacer for LeakyBucketPacer {
    fn core(&self) -> &PacerCore {
        &self.core
    }
    fn core_mut(&mut self) -> &mut PacerCore {
        &mut self.core
    }
    fn set_rates(&mut self, pacing_rate: DataRate, padding_rate: DataRate, now: Timestamp) {
        if !self.pays_only_when_it_sends() {
            self.update_budget(self.pay_time(now));
        }
        if let Some(w) = self.wake.as_mut() {
            w.kick(now);
        }
        self.pacing_rate = pacing_rate.max(DataRate::from_bps(1));
        self.padding.set_rate(padding_rate);
        self.update_adjusted_rate(now);
    }

    fn enqueue(&mut self, packet: Packet, now: Timestamp) {
        // libwebrtc pays into an empty queue only ("fast-forward" the last process time, so
        // that time passed idle is not budget for the first new packet).
        if !self.pays_only_when_it_sends() || self.core.queue.is_empty() {
            self.update_budget(self.pay_time(now));
        }
        if let Some(w) = self.wake.as_mut() {
            w.on_enqueued(packet.size.as_bytes_f64(), now);
        }
        self.core.enqueue(packet, now);
        self.update_adjusted_rate(now);
    }

    fn create_probe_cluster(&mut self, cluster: crate::cc::ProbeClusterConfig, now: Timestamp) {
        self.core.prober.add_cluster(cluster);
        if let Some(w) = self.wake.as_mut() {
            w.kick(now);
        }
    }

    /// With a task queue, the time the window held the pacer is not credit: once released,
    /// the budget is paid up to now (pacing_controller.cc `SetCongested`) and the pacer runs.
    fn set_congested(&mut self, congested: bool, now: Timestamp) {
        if self.wake.is_none() {
            return;
        }
        if self.congested && !congested {
            self.update_budget(now);
            if let Some(w) = self.wake.as_mut() {
                w.kick(now);
            }
        }
        self.congested = congested;
    }

    fn poll_send(&mut self, now: Timestamp) -> Option<Packet> {
        if self.wake.is_some() {
            return self.poll_run(now);
        }
        if self.pays_only_when_it_sends() && self.next_send_time() > now {
            return None;
        }
        self.update_budget(now);
        self.send_due(now)
    }

    fn poll_timeout(&self) -> Timestamp {
        match &self.wake {
            Some(w) => w.poll_timeout(),
            None => self.next_send_time(),
        }
    }

    /// The rate in effect, including the queue-drain adjustment (not just the configured
    /// `pacing_rate`).
    #[allow(clippy::misnamed_getters)]
    fn pacing_rate(&self) -> DataRate {
        self.adjusted_rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn video(size: i64, seq: u64) -> Packet {
        let mut p = Packet::padding(DataSize::from_bytes(size), Timestamp::ZERO);
        p.kind = crate::packet::PacketKind::Video;
        p.media_seq = seq;
        p
    }

    /// A pacer at `rate` holding `count` video packets of `size` bytes, all at time zero.
    fn backlogged(
        cfg: LeakyBucketConfig,
        rate: DataRate,
        count: u64,
        size: i64,
    ) -> LeakyBucketPacer {
        let mut p = LeakyBucketPacer::new(cfg, Timestamp::ZERO);
        p.set_rates(rate, DataRate::ZERO, Timestamp::ZERO);
        for i in 0..count {
            p.enqueue(video(size, i), Timestamp::ZERO);
        }
        p
    }

    /// Drains the pacer, returning each packet's send time.
    fn drain(pacer: &mut LeakyBucketPacer, mut now: Timestamp) -> Vec<Timestamp> {
        let mut times = Vec::new();
        for _ in 0..10_000 {
            while let Some(_p) = pacer.poll_send(now) {
                times.push(now);
            }
            let next = pacer.poll_timeout();
            if !next.is_finite() {
                break;
            }
            assert!(next >= now, "timeout went backwards");
            now = next;
        }
        times
    }

    #[test]
    fn paces_at_the_rate_without_burst_interval() {
        let cfg = LeakyBucketConfig::default();
        // 12 Mbps = 1500 B per ms.
        let mut p = backlogged(cfg, DataRate::from_mbps(12), 10, 1500);
        let times = drain(&mut p, Timestamp::ZERO);
        let ms: Vec<i64> = times.iter().map(|t| t.as_us()).collect();
        assert_eq!(ms, (0..10).map(|i| i * 1000).collect::<Vec<_>>());
    }

    /// With `probe_takes_over` a probe cluster takes the pacer over until it is sent, as in
    /// libwebrtc: every packet that leaves meanwhile is one of its probes (queued media first),
    /// none untagged between them, though the pacing rate (12 Mbps, above the probe's 8) and a
    /// 40 ms allowance would let media go. Without it (the default) media due while the
    /// cluster is sent goes untagged, with a burst interval or without.
    #[test]
    fn a_probe_cluster_takes_the_pacer_over_when_asked() {
        let sent = |burst_interval_ms: f64, probe_takes_over: bool| {
            let cfg =
                LeakyBucketConfig { burst_interval_ms, probe_takes_over, ..Default::default() };
            let mut p = LeakyBucketPacer::new(cfg, Timestamp::ZERO);
            p.set_rates(DataRate::from_mbps(12), DataRate::ZERO, Timestamp::ZERO);
            p.create_probe_cluster(
                crate::cc::ProbeClusterConfig {
                    id: 7,
                    at_time: Timestamp::ZERO,
                    target_rate: DataRate::from_mbps(8),
                    target_duration: TimeDelta::from_ms(15),
                    min_probes: 5,
                },
                Timestamp::ZERO,
            );
            for i in 0..40 {
                p.enqueue(video(1200, i), Timestamp::ZERO);
            }
            let mut ids = Vec::new();
            let mut now = Timestamp::ZERO;
            while ids.len() < 40 {
                while let Some(pkt) = p.poll_send(now) {
                    ids.push(pkt.probe_cluster_id);
                }
                now = p.poll_timeout().max(now + TimeDelta::from_us(1));
            }
            ids
        };
        for burst_ms in [0.0, 40.0] {
            // 8 Mbps for 15 ms is 15 kB: 13 probes of 1200 B, then media.
            let ids = sent(burst_ms, true);
            let probes = ids.iter().take_while(|id| **id == Some(7)).count();
            assert_eq!(probes, 13, "{ids:?}");
            assert!(ids[probes..].iter().all(Option::is_none), "{ids:?}");
            // Without it untagged media leaves before the cluster's 13 probes have gone.
            let ids = sent(burst_ms, false);
            assert!(ids[..13].contains(&None) && ids.contains(&Some(7)), "{ids:?}");
        }
    }

    #[test]
    fn burst_interval_lets_debt_go_at_once() {
        let cfg = LeakyBucketConfig { burst_interval_ms: 5.0, ..Default::default() };
        let mut p = backlogged(cfg, DataRate::from_mbps(12), 10, 1500);
        let times = drain(&mut p, Timestamp::ZERO);
        // 12 Mbps is 1500 B a millisecond. Five packets go at t=0: each while the debt
        // before it drains in less than the 5 ms burst interval (0 to 6000 B). With 7500 B
        // (exactly 5 ms) the pacer waits until the whole debt is paid, at 5 ms, and the other
        // five go at once then: bursts a drain time apart, not one packet a millisecond
        // (pacing_controller.cc NextSendTime; Chromium's packet trains, chrome-pacing.md).
        let at = |ms: i64| times.iter().filter(|t| **t == Timestamp::from_ms(ms)).count();
        assert_eq!((at(0), at(5), times.len()), (5, 5, 10), "{times:?}");
    }

    /// Above 12.6 Mbps a 40 ms burst interval is more than libwebrtc's 63 kB burst cap: at
    /// 24 Mbps (3000 B a millisecond) the allowance is 63 kB, not 120 kB, so a 150 kB frame
    /// leaves in bursts of 21 packets of 3000 B (each sent while the debt is below 63 kB) a
    /// drain time (21 ms) apart, where an uncapped allowance would send 40 at once.
    #[test]
    fn burst_interval_is_bounded_by_libwebrtcs_burst_size() {
        let mut p = backlogged(cfg_40(), DataRate::from_mbps(24), 50, 3000);
        let times = drain(&mut p, Timestamp::ZERO);
        let at = |ms: i64| times.iter().filter(|t| **t == Timestamp::from_ms(ms)).count();
        assert_eq!((at(0), at(21), at(42), times.len()), (21, 21, 8, 50), "{times:?}");
        // Below 12.6 Mbps the 40 ms interval is the bound: at 6 Mbps (750 B a ms) 30 kB.
        let mut p = backlogged(cfg_40(), DataRate::from_mbps(6), 25, 1500);
        let times = drain(&mut p, Timestamp::ZERO);
        let at = |ms: i64| times.iter().filter(|t| **t == Timestamp::from_ms(ms)).count();
        assert_eq!((at(0), at(40), times.len()), (20, 5, 25), "{times:?}");
    }

    fn cfg_40() -> LeakyBucketConfig {
        LeakyBucketConfig { burst_interval_ms: 40.0, ..Default::default() }
    }

    /// With a burst interval a backlogged pacer waits for its whole debt to drain whatever
    /// happens meanwhile: polls, rate changes and enqueues into the non-empty queue pay
    /// nothing (libwebrtc pays in ProcessPackets only), so nothing leaves before 5 ms; an
    /// enqueue into an empty queue pays up to then (EnqueuePacket's fast-forward).
    #[test]
    fn burst_interval_waits_for_the_whole_debt_whatever_polls_it() {
        let cfg = LeakyBucketConfig { burst_interval_ms: 5.0, ..Default::default() };
        let mut p = backlogged(cfg, DataRate::from_mbps(12), 10, 1500);
        let mut sent = Vec::new();
        while p.poll_send(Timestamp::ZERO).is_some() {
            sent.push(0);
        }
        assert_eq!(sent.len(), 5);
        assert_eq!(p.poll_timeout(), Timestamp::from_ms(5));
        for us in (250..5000).step_by(250) {
            let now = Timestamp::from_us(us);
            if us == 2000 {
                p.enqueue(video(1500, 99), now);
                p.set_rates(DataRate::from_mbps(12), DataRate::ZERO, now);
            }
            assert!(p.poll_send(now).is_none(), "a packet left at {us} us");
            assert_eq!(p.poll_timeout(), Timestamp::from_ms(5), "at {us} us");
        }
        let at_5 = std::iter::from_fn(|| p.poll_send(Timestamp::from_ms(5))).count();
        assert_eq!(at_5, 5, "a burst again once the debt is paid");
        // Drained at 10 ms; a packet enqueued into the empty queue at 12 ms pays up to then
        // and goes at once.
        let rest = drain(&mut p, Timestamp::from_ms(5));
        assert_eq!(rest, vec![Timestamp::from_ms(10)]);
        p.enqueue(video(1500, 100), Timestamp::from_ms(12));
        assert!(p.poll_send(Timestamp::from_ms(12)).is_some());
    }

    /// Audit finding 8: with a burst interval the pacer idled for a second while holding
    /// 1 MB. A backlogged pacer must never wait longer than its debt over its rate, and every
    /// timeout it asks for must send something.
    #[test]
    fn backlogged_pacer_never_idles_longer_than_its_debt() {
        for burst_ms in [0.0, 5.0, 40.0] {
            let cfg = LeakyBucketConfig { burst_interval_ms: burst_ms, ..Default::default() };
            let mut p = LeakyBucketPacer::new(cfg, Timestamp::ZERO);
            let mut rng = crate::rng::Rng::new(7);
            let mut now = Timestamp::ZERO;
            let mut seq = 0;
            let mut sent = 0u64;
            let mut idle_polls = 0;
            while now < Timestamp::from_ms(5000) {
                // Rate changes like GCC's, sizes like a packetizer's, always a backlog.
                if rng.uniform() < 0.01 {
                    let kbps = 300 + (rng.uniform() * 12_000.0) as i64;
                    p.set_rates(DataRate::from_kbps(kbps), DataRate::ZERO, now);
                }
                while p.queue_packets() < 50 {
                    let size = 200 + (rng.uniform() * 1000.0) as i64;
                    p.enqueue(video(size, seq), now);
                    seq += 1;
                }
                let wait_limit = p.media_debt / p.adjusted_rate;
                let before = now;
                now = p.poll_timeout();
                assert!(now >= before);
                assert!(
                    now - before <= wait_limit,
                    "burst {burst_ms} ms: waited {:?} with debt {:?} at {:?}",
                    now - before,
                    p.media_debt,
                    p.adjusted_rate
                );
                if p.poll_send(now).is_some() {
                    sent += 1;
                    idle_polls = 0;
                } else {
                    idle_polls += 1;
                    assert!(idle_polls < 3, "burst {burst_ms} ms: woke at {now:?} to send nothing");
                }
            }
            assert!(sent > 1000, "burst {burst_ms} ms: only {sent} packets in 5 s");
        }
    }

    fn task_queue() -> LeakyBucketConfig {
        LeakyBucketConfig { hold_back_window_ms: 5.0, ..Default::default() }
    }

    /// libwebrtc's task queue runs the pacer about every millisecond at 30 Mbps and sends
    /// the three or four packets due at each run together, at the pacing rate overall.
    #[test]
    fn task_queue_sends_whole_millisecond_batches_at_the_pacing_rate() {
        // 96 packets of 1250 B at 30 Mbps: 32 ms, one every 333 us.
        let mut p = backlogged(task_queue(), DataRate::from_mbps(30), 96, 1250);
        let times = drain(&mut p, Timestamp::ZERO);
        assert_eq!(times.len(), 96);
        assert!(times.iter().all(|t| t.as_us() % 1000 == 0), "{times:?}");
        let last = *times.last().unwrap();
        assert!(last >= Timestamp::from_ms(31) && last <= Timestamp::from_ms(32), "{last:?}");
        let mut groups = std::collections::BTreeMap::new();
        for t in &times {
            *groups.entry(t.as_us()).or_insert(0) += 1;
        }
        assert!(groups.values().skip(1).all(|&n| (2..=4).contains(&n)), "{groups:?}");
    }

    /// Below the hold-back's three packets the pacer runs at each packet's send time,
    /// rounded up to the millisecond; a late run pays the budget only up to the time the
    /// packet was due, so the lateness does not add up.
    #[test]
    fn task_queue_rounds_runs_up_and_keeps_the_rate() {
        // Six 1200 B packets enqueued at once, sent under the task queue at `rate`: when each
        // goes, in ms.
        let send_six = |rate: DataRate| -> Vec<i64> {
            let mut p = backlogged(task_queue(), rate, 6, 1200);
            drain(&mut p, Timestamp::ZERO).iter().map(|t| t.as_ms()).collect()
        };
        // 1 Mbps: one packet every 9.6 ms.
        assert_eq!(send_six(DataRate::from_mbps(1)), vec![0, 10, 20, 29, 39, 48]);
        // At 2.5 Mbps (3.84 ms a packet) the 5 ms window holds the pacer back.
        assert_eq!(send_six(DataRate::from_kbps(2500)), vec![0, 5, 10, 15, 20, 20]);
    }

    /// The time the sender's window held the pacer back is not credit: when released, the
    /// pacer goes on at its rate instead of sending the held time's budget at once
    /// (pacing_controller.cc `SetCongested` pays up to now).
    #[test]
    fn task_queue_keeps_no_credit_while_the_window_holds_it() {
        let burst_after_release = |tell_congestion: bool| {
            // 12 Mbps: one 1500 B packet a millisecond.
            let mut p = backlogged(task_queue(), DataRate::from_mbps(12), 200, 1500);
            let mut now = Timestamp::ZERO;
            while now < Timestamp::from_ms(10) {
                while p.poll_send(now).is_some() {}
                now = p.poll_timeout();
            }
            // The window closes at 10 ms (the sender stops polling), a frame is enqueued at
            // 50 ms, and the window opens again at 110 ms.
            if tell_congestion {
                p.set_congested(true, now);
            }
            p.enqueue(video(1500, 999), Timestamp::from_ms(50));
            let release = Timestamp::from_ms(110);
            if tell_congestion {
                p.set_congested(false, release);
            }
            std::iter::from_fn(|| p.poll_send(release)).count()
        };
        assert!(burst_after_release(true) <= 2, "{}", burst_after_release(true));
        // Unless told, the pacer sends the 100 ms it was held at once, as a late run would.
        assert!(burst_after_release(false) > 90, "{}", burst_after_release(false));
    }

    /// Under GCC-like rate changes with a standing backlog, the task queue's runs send as
    /// many bytes as a pacer woken at every packet's time: sending late loses no budget.
    #[test]
    fn task_queue_sends_what_the_rate_allows() {
        let run = |cfg: LeakyBucketConfig| {
            let mut p = LeakyBucketPacer::new(cfg, Timestamp::ZERO);
            let mut rng = crate::rng::Rng::new(11);
            // A new rate every 100 ms (both pacers see the same schedule in time).
            let rates: Vec<i64> =
                (0..50).map(|_| 300 + (rng.uniform() * 30_000.0) as i64).collect();
            let mut now = Timestamp::ZERO;
            let (mut seq, mut sent, mut runs, mut slot) = (0, DataSize::ZERO, 0, usize::MAX);
            while now < Timestamp::from_ms(5000) {
                let s = (now.as_ms() / 100) as usize;
                if s != slot {
                    slot = s;
                    p.set_rates(DataRate::from_kbps(rates[s]), DataRate::ZERO, now);
                }
                while p.queue_packets() < 50 {
                    let size = 200 + (rng.uniform() * 1000.0) as i64;
                    p.enqueue(video(size, seq), now);
                    seq += 1;
                }
                while let Some(pkt) = p.poll_send(now) {
                    sent += pkt.size;
                }
                runs += 1;
                let next = p.poll_timeout();
                assert!(next > now, "asked to run again at {next:?}, now {now:?}");
                now = next.min(Timestamp::from_ms((s as i64 + 1) * 100));
            }
            (sent, runs)
        };
        let (every_packet, events) = run(LeakyBucketConfig::default());
        let (held, runs) = run(task_queue());
        let ratio = held.as_bytes_f64() / every_packet.as_bytes_f64();
        assert!((0.99..=1.01).contains(&ratio), "{held:?} against {every_packet:?}");
        assert!(runs * 2 < events, "{runs} runs against {events} wake-ups");
    }

    #[test]
    fn retransmission_goes_first() {
        let mut p = LeakyBucketPacer::new(LeakyBucketConfig::default(), Timestamp::ZERO);
        p.set_rates(DataRate::from_mbps(1), DataRate::ZERO, Timestamp::ZERO);
        p.enqueue(video(1000, 1), Timestamp::ZERO);
        p.enqueue(video(1000, 2), Timestamp::ZERO);
        let mut rtx = video(1000, 0);
        rtx.kind = crate::packet::PacketKind::Retransmission;
        p.enqueue(rtx, Timestamp::ZERO);
        assert_eq!(p.poll_send(Timestamp::ZERO).unwrap().media_seq, 0);
    }

    #[test]
    fn queue_time_limit_raises_the_rate() {
        // 100 kB at 100 kbps would take 8 s; the limit forces it out within ~2 s.
        let mut p = backlogged(LeakyBucketConfig::default(), DataRate::from_kbps(100), 100, 1000);
        let times = drain(&mut p, Timestamp::ZERO);
        assert_eq!(times.len(), 100);
        assert!(*times.last().unwrap() <= Timestamp::from_ms(2100), "{:?}", times.last());
        assert!(p.pacing_rate() >= DataRate::from_kbps(100));
    }

    #[test]
    fn padding_only_when_idle() {
        let mut p = LeakyBucketPacer::new(LeakyBucketConfig::default(), Timestamp::ZERO);
        p.set_rates(DataRate::from_mbps(1), DataRate::from_kbps(800), Timestamp::ZERO);
        p.enqueue(video(1000, 1), Timestamp::ZERO);
        assert_eq!(p.poll_send(Timestamp::ZERO).unwrap().kind, crate::packet::PacketKind::Video);
        // Queue empty now: padding follows at the padding rate.
        let mut now = Timestamp::ZERO;
        let mut padding = DataSize::ZERO;
        while now < Timestamp::from_ms(1000) {
            now = p.poll_timeout();
            while let Some(pkt) = p.poll_send(now) {
                assert_eq!(pkt.kind, crate::packet::PacketKind::Padding);
                padding += pkt.size;
            }
        }
        let rate = padding / (now - Timestamp::ZERO);
        assert!(rate.as_kbps_f64() > 600.0 && rate.as_kbps_f64() < 900.0, "{rate:?}");
    }
}
