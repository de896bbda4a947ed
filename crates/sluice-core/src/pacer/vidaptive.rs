//! Vidaptive's pacer (Vidaptive §3.1, Fig. 4): packets leave at the congestion controller's
//! pacing rate (in the Vidaptive schemes the CC-Rate, `cwnd / srtt`), one at a time, and the
//! sender sends none while the bytes in flight reach the window; when no video or
//! retransmission waits, [`dummy`](super::dummy) packets fill the rate.
//!
//! * Debt-based, as libwebrtc's pacing controller without a burst interval: a packet adds its
//!   size to the debt (capped at the rate x `max_debt_ms`), elapsed time (at most 2 s at once)
//!   pays it off at the rate, the next packet goes when the debt is paid.
//! * No queue-drain speed-up: §3.2 rejects sending packets stuck in the pacer faster than the
//!   CC-Rate ("they would still have to wait at the bottleneck link"); the encoder pause is
//!   the remedy instead.
//! * Priorities: retransmissions, then video, then dummies (§3.1: "strictly lower priority").
//! * Probe clusters, if a controller asks for any, go through the shared prober (Copa and
//!   RoCC ask for none).

use super::core::{Due, PacerCore};
use super::dummy::DummyConfig;
use super::Pacer;
use crate::columns::Columns;
use crate::packet::Packet;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};

/// Parameters of Vidaptive's pacer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VidaptivePacerConfig {
    /// Dummy packets (§3.1, §4).
    pub dummy: DummyConfig,
    /// Cap on the debt, as a duration at the pacing rate (libwebrtc: 500 ms).
    pub max_debt_ms: f64,
}

impl Default for VidaptivePacerConfig {
    fn default() -> Self {
        VidaptivePacerConfig { dummy: DummyConfig::default(), max_debt_ms: 500.0 }
    }
}

/// Largest gap over which debt is paid off at once (libwebrtc: 2 s).
const MAX_ELAPSED: TimeDelta = TimeDelta::from_secs(2);

/// Vidaptive's pacer (see the module documentation).
pub struct VidaptivePacer {
    dummy: DummyConfig,
    max_debt: TimeDelta,
    core: PacerCore,
    rate: DataRate,
    debt: DataSize,
    last_update: Timestamp,
    next_capture: Timestamp,
    frame_interval: TimeDelta,
    dummies_sent: u64,
}

impl VidaptivePacer {
    /// The pacer at `now`, at 300 kbps until the first `set_rates`; no dummies until the sender
    /// gives its capture schedule.
    pub fn new(config: VidaptivePacerConfig, now: Timestamp) -> Self {
        let max_debt_ms =
            if config.max_debt_ms.is_finite() { config.max_debt_ms.max(0.0) } else { 500.0 };
        VidaptivePacer {
            dummy: config.dummy,
            max_debt: TimeDelta::from_ms_f64(max_debt_ms),
            core: PacerCore::default(),
            rate: DataRate::from_kbps(300),
            debt: DataSize::ZERO,
            last_update: now,
            // Until the sender says when frames come: no dummies.
            next_capture: Timestamp::INFINITY,
            frame_interval: TimeDelta::ZERO,
            dummies_sent: 0,
        }
    }

    /// Dummy packets sent so far.
    pub fn dummies_sent(&self) -> u64 {
        self.dummies_sent
    }

    fn update_budget(&mut self, now: Timestamp) {
        let elapsed = now.saturating_since(self.last_update).min(MAX_ELAPSED);
        self.last_update = self.last_update.max(now);
        self.debt = (self.debt - self.rate * elapsed).max(DataSize::ZERO);
    }

    fn on_sent(&mut self, size: DataSize) {
        let cap = self.rate * self.max_debt;
        self.debt = (self.debt + size).min(cap.max(size));
    }

    /// When the pacer's budget next allows a packet.
    fn budget_time(&self) -> Timestamp {
        self.last_update + self.debt / self.rate
    }

    fn media_send_time(&self) -> Timestamp {
        if self.core.queue.is_empty() {
            Timestamp::INFINITY
        } else {
            self.budget_time()
        }
    }

    fn dummy_send_time(&self) -> Timestamp {
        if !self.core.queue.is_empty() {
            return Timestamp::INFINITY;
        }
        self.dummy.send_time(self.budget_time(), self.rate, self.next_capture, self.frame_interval)
    }
}

impl Pacer for VidaptivePacer {
    fn core(&self) -> &PacerCore {
        &self.core
    }
    fn core_mut(&mut self) -> &mut PacerCore {
        &mut self.core
    }
    fn set_rates(&mut self, pacing_rate: DataRate, _padding_rate: DataRate, now: Timestamp) {
        self.update_budget(now);
        self.rate = pacing_rate.max(DataRate::from_bps(1));
    }

    fn enqueue(&mut self, packet: Packet, now: Timestamp) {
        self.update_budget(now);
        self.core.enqueue(packet, now);
    }

    fn poll_send(&mut self, now: Timestamp) -> Option<Packet> {
        self.update_budget(now);
        let (media_due, dummy_due) = (self.media_send_time() <= now, self.dummy_send_time() <= now);
        match self.core.next_due(now, media_due, dummy_due)? {
            Due::Probe(p) | Due::Media(p) => {
                self.on_sent(p.size);
                Some(p)
            }
            Due::Filler => {
                let size = self.dummy.size();
                self.on_sent(size);
                self.dummies_sent += 1;
                Some(Packet::padding(size, now))
            }
        }
    }

    fn poll_timeout(&self) -> Timestamp {
        self.core.prober.next_probe_time().min(self.media_send_time()).min(self.dummy_send_time())
    }

    fn pacing_rate(&self) -> DataRate {
        self.rate
    }
    fn set_capture_schedule(&mut self, next_capture: Timestamp, frame_interval: TimeDelta) {
        self.next_capture = next_capture;
        self.frame_interval = frame_interval;
    }
    fn debug_columns(&self, out: &mut Columns) {
        out.bool("pacer_dummies_allowed", self.dummy.allowed_at(self.rate));
        out.int("pacer_dummies_sent", Some(self.dummies_sent as i64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::PacketKind;

    fn video(size: i64, seq: u64, kind: PacketKind) -> Packet {
        let mut p = Packet::padding(DataSize::from_bytes(size), Timestamp::ZERO);
        p.kind = kind;
        p.media_seq = seq;
        p
    }

    /// A pacer at `mbps` with dummies per `dummy`, frames every 33.333 ms from 0.
    fn pacer(mbps: i64, dummy: DummyConfig) -> VidaptivePacer {
        let mut p = VidaptivePacer::new(
            VidaptivePacerConfig { dummy, ..Default::default() },
            Timestamp::ZERO,
        );
        p.set_rates(DataRate::from_mbps(mbps), DataRate::ZERO, Timestamp::ZERO);
        p
    }

    /// Polls until `end`, moving the capture schedule along (30 fps) as the sender does;
    /// returns (time, kind, size) of every packet.
    fn drain(p: &mut VidaptivePacer, end: Timestamp) -> Vec<(Timestamp, PacketKind, DataSize)> {
        let fi = TimeDelta::from_us(33_333);
        let mut out = Vec::new();
        let mut now = Timestamp::ZERO;
        let mut next_capture = Timestamp::ZERO;
        for _ in 0..1_000_000 {
            while next_capture <= now {
                next_capture += fi;
            }
            p.set_capture_schedule(next_capture, fi);
            while let Some(pkt) = p.poll_send(now) {
                out.push((now, pkt.kind, pkt.size));
            }
            let next = p.poll_timeout().min(next_capture);
            if next > end {
                break;
            }
            assert!(next >= now, "timeout went backwards");
            now = next;
        }
        out
    }

    #[test]
    fn paces_at_the_rate_without_a_drain_speed_up() {
        // 100 packets of 1000 B at 100 kbps: one every 80 ms, the last at 7.92 s. libwebrtc's
        // leaky bucket with its 2 s queue-time limit sends them all within ~2 s.
        let mut p = pacer(0, DummyConfig { enabled: false, ..Default::default() });
        p.set_rates(DataRate::from_kbps(100), DataRate::ZERO, Timestamp::ZERO);
        for i in 0..100 {
            p.enqueue(video(1000, i, PacketKind::Video), Timestamp::ZERO);
        }
        let sent = drain(&mut p, Timestamp::from_secs_f64(20.0));
        assert_eq!(sent.len(), 100);
        assert!(sent.iter().all(|s| s.1 == PacketKind::Video), "no dummies when off");
        // (Each wake-up, at every capture here, pays the debt in whole bytes: up to a byte,
        // 80 us at this rate, is lost per wake-up.)
        let ms = |i: usize| sent[i].0.as_us() as f64 / 1e3;
        assert!((80.0..80.5).contains(&ms(1)), "{}", ms(1));
        assert!((7920.0..7960.0).contains(&ms(99)), "{}", ms(99));
        assert_eq!(p.pacing_rate(), DataRate::from_kbps(100));
    }

    #[test]
    fn dummies_only_with_an_empty_queue_and_below_video_and_retransmissions() {
        let mut p = pacer(4, DummyConfig::default());
        for i in 0..10 {
            p.enqueue(video(1260, i, PacketKind::Video), Timestamp::ZERO);
        }
        p.enqueue(video(1260, 0, PacketKind::Retransmission), Timestamp::ZERO);
        let sent = drain(&mut p, Timestamp::from_ms(200));
        // The retransmission first, then the 10 video packets, then dummies.
        assert_eq!(sent[0].1, PacketKind::Retransmission);
        assert!(sent[1..11].iter().all(|s| s.1 == PacketKind::Video));
        assert!(sent[11..].iter().all(|s| s.1 == PacketKind::Padding));
        assert!(sent.len() > 11, "dummies after the queue drained");
        // Video arriving later goes before the next dummy: a packet enqueued at 200 ms is the
        // next one out.
        p.enqueue(video(1260, 10, PacketKind::Video), Timestamp::from_ms(200));
        let t = p.poll_timeout().max(Timestamp::from_ms(200));
        assert_eq!(p.poll_send(t).map(|x| x.kind), Some(PacketKind::Video));
    }

    #[test]
    fn dummies_are_small_withheld_before_a_capture_and_off_at_the_cap() {
        // An empty queue at 2 Mbps: 199 B dummies, never in the last 8.333 ms before a
        // capture (every 33.333 ms), so at most 75 % of the time carries them.
        let mut p = pacer(2, DummyConfig::default());
        let sent = drain(&mut p, Timestamp::from_secs_f64(2.0));
        assert!(sent.iter().all(|s| s.1 == PacketKind::Padding && s.2.as_bytes() == 199));
        let fi = 33_333;
        for (t, _, _) in &sent {
            let into_frame = t.as_us() % fi;
            assert!(into_frame < fi - 8_333, "a dummy at {t:?}, {into_frame} us into a frame");
        }
        // Their rate: 2 Mbps for 75 % of each frame interval (the debt cannot be made up
        // after a guard), within 5 %.
        let bytes: i64 = sent.iter().map(|s| s.2.as_bytes()).sum();
        let rate = bytes as f64 * 8.0 / 2.0;
        assert!((rate / (0.75 * 2e6) - 1.0).abs() < 0.05, "{rate} bps");
        assert_eq!(p.dummies_sent(), sent.len() as u64);
        // At the cap (12 Mbps, the default) and above: none; just below: dummies.
        for (mbps, any) in [(12, false), (20, false), (11, true)] {
            let mut p = pacer(mbps, DummyConfig::default());
            let sent = drain(&mut p, Timestamp::from_ms(100));
            assert_eq!(!sent.is_empty(), any, "{mbps} Mbps");
        }
        // A per-clip cap: 4 Mbps.
        let mut p = pacer(5, DummyConfig { max_video_rate_bps: 4e6, ..Default::default() });
        assert!(drain(&mut p, Timestamp::from_ms(100)).is_empty());
        // Capture over: none.
        let mut p = pacer(2, DummyConfig::default());
        p.set_capture_schedule(Timestamp::INFINITY, TimeDelta::from_us(fi));
        assert_eq!(p.poll_timeout(), Timestamp::INFINITY);
    }

    #[test]
    fn video_and_dummies_together_fill_the_pacing_rate() {
        // 3 Mbps; a 6 kB frame at every capture (1.44 Mbps of video): video leaves first,
        // dummies fill the rest of each frame interval up to the guard. Video + dummies =
        // 3 Mbps x (1 - 0.25 guard), within 5 %, once the first frame is out.
        let mut p = pacer(3, DummyConfig::default());
        let fi = TimeDelta::from_us(33_333);
        let mut now = Timestamp::ZERO;
        let mut next_capture = Timestamp::ZERO;
        let (mut video_bytes, mut dummy_bytes) = (0i64, 0i64);
        let mut seq = 0;
        while now < Timestamp::from_secs_f64(3.0) {
            while next_capture <= now {
                for _ in 0..5 {
                    p.enqueue(video(1200, seq, PacketKind::Video), next_capture);
                    seq += 1;
                }
                next_capture += fi;
            }
            p.set_capture_schedule(next_capture, fi);
            while let Some(pkt) = p.poll_send(now) {
                match pkt.kind {
                    PacketKind::Padding => dummy_bytes += pkt.size.as_bytes(),
                    _ => video_bytes += pkt.size.as_bytes(),
                }
            }
            now = p.poll_timeout().min(next_capture).max(now);
        }
        let total = (video_bytes + dummy_bytes) as f64 * 8.0 / 3.0;
        assert!((video_bytes as f64 * 8.0 / 3.0 / 1.44e6 - 1.0).abs() < 0.02);
        assert!((total / (0.75 * 3e6) - 1.0).abs() < 0.05, "{total} bps");
        assert!(dummy_bytes > 0);
    }
}
