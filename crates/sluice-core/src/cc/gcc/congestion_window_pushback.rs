//! Congestion-window pushback, as libwebrtc M119 runs it in Chrome: goog_cc's
//! `CongestionWindowPushbackController`
//! (`modules/congestion_controller/goog_cc/congestion_window_pushback_controller.cc`), the data
//! window `GoogCcNetworkController::UpdateCongestionWindowSize` keeps for it and the use
//! `MaybeTriggerOnNetworkChanged` makes of it (`goog_cc_network_control.cc`), with the
//! `WebRTC-CongestionWindow` defaults of `rtc_base/experiments/rate_control_settings.cc`
//! ("QueueSize:350,MinBitrate:30000,DropFrame:true").
//!
//! The data window is the last target times (the smallest of the recent per-feedback max
//! RTTs, in whole ms, plus 350 ms), averaged with the previous window, at least two full
//! packets; it is recomputed after every transport feedback that reported an arrival and every
//! process interval (once a feedback RTT exists). With pushback on, the pacer ignores the
//! window.
//!
//! The ratio: on every network update (every sent packet, every process interval, every
//! feedback that changed the delay-based estimate) the bytes in flight (plus the pacer queue
//! if `add_pacing`) are compared with the window: fill > 1.5 -> ratio x 0.9; fill > 1 -> ratio
//! x 0.95; fill < 0.1 -> ratio = 1; else ratio x 1.05, at most 1. The pushback rate is the
//! target x ratio (truncated to whole bits per second), not below `min_rate_bps` unless the
//! target itself is lower, and not below GCC's minimum rate.
//!
//! What the encoder is told depends on `drop_frame` (libwebrtc's `DropFrame`, on by default):
//! * on: the encoder keeps the target and gets `cwnd_reduce_ratio = (target - pushback) /
//!   target`, which libwebrtc's VideoStreamEncoder turns into dropped frames
//!   ([`crate::encoder_controller::video_stream_encoder`], a scheme's
//!   `frame_drop.cwnd_pushback`); without that stage the pushback has no effect;
//! * off: the encoder's rate is the pushback rate (and the ratio is 0).

use crate::units::{DataRate, DataSize, TimeDelta};
use serde::{Deserialize, Serialize};

/// Settings of the congestion-window pushback (libwebrtc's `WebRTC-CongestionWindow` field
/// trial; the defaults are Chrome's: `QueueSize:350,MinBitrate:30000,DropFrame:true`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CongestionWindowConfig {
    /// Queueing allowance added to the RTT for the window (`QueueSize`, 350 ms).
    pub queue_size_ms: f64,
    /// The pushback rate is not pushed below this unless the target itself is lower
    /// (`MinBitrate`, 30 kbps).
    pub min_rate_bps: i64,
    /// Count the pacer queue as outstanding too (libwebrtc's
    /// `WebRTC-AddPacingToCongestionWindowPushback`; off by default).
    pub add_pacing: bool,
    /// libwebrtc's `DropFrame` (on by default in M119): the encoder keeps the target rate and
    /// the pushback reaches it only as `cwnd_reduce_ratio`, which only a scheme with the
    /// `frame_drop.cwnd_pushback` stage acts on (elsewhere the pushback has no effect). Off:
    /// the encoder's rate is lowered to the pushback rate.
    pub drop_frame: bool,
}

impl Default for CongestionWindowConfig {
    fn default() -> Self {
        CongestionWindowConfig {
            queue_size_ms: 350.0,
            min_rate_bps: 30_000,
            add_pacing: false,
            drop_frame: true,
        }
    }
}

/// The smallest data window: two full packets (goog_cc_network_control.cc, `kMinCwnd`).
const MIN_WINDOW: DataSize = DataSize::from_bytes(2 * 1500);

/// goog_cc's congestion-window pushback: the data window, and the encoding-rate ratio that
/// shrinks while the bytes in flight exceed it (see the module documentation).
#[derive(Clone, Debug)]
pub struct CongestionWindowPushback {
    config: CongestionWindowConfig,
    /// The data window (`None` until the first feedback RTT: then no pushback).
    window: Option<DataSize>,
    outstanding: DataSize,
    /// The pacer queue as last heard, and as handed over at the last process interval (the
    /// one counted: libwebrtc passes it with the process-interval message).
    pacer_queue_heard: DataSize,
    pacer_queue: DataSize,
    /// libwebrtc's `encoding_rate_ratio_`.
    ratio: f64,
    /// The target at the latest update (libwebrtc's `last_loss_based_target_rate_`, which
    /// starts at the start rate); the window is sized from it.
    last_target: DataRate,
    /// The pushback rate at the latest update (libwebrtc's `pushback_target_rate`).
    pushback_rate: DataRate,
}

impl CongestionWindowPushback {
    /// Pushback with `config` from `start_rate`: no window yet, the ratio at 1.
    pub fn new(config: CongestionWindowConfig, start_rate: DataRate) -> Self {
        CongestionWindowPushback {
            config,
            window: None,
            outstanding: DataSize::ZERO,
            pacer_queue_heard: DataSize::ZERO,
            pacer_queue: DataSize::ZERO,
            ratio: 1.0,
            last_target: start_rate,
            pushback_rate: start_rate,
        }
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &CongestionWindowConfig {
        &self.config
    }

    /// Bytes in flight, from a sent packet or a transport feedback.
    pub fn set_outstanding(&mut self, in_flight: DataSize) {
        self.outstanding = in_flight;
    }

    /// The pacer's queue; counted (with `add_pacing`) from the next process interval on.
    pub fn set_pacer_queue(&mut self, queued: DataSize) {
        self.pacer_queue_heard = queued;
    }

    /// A process interval: the pacer queue heard last is handed over and, once a feedback
    /// RTT exists, the window is updated.
    pub fn on_process_interval(&mut self, min_feedback_rtt: Option<TimeDelta>) {
        self.pacer_queue = self.pacer_queue_heard;
        if let Some(rtt) = min_feedback_rtt {
            self.update_window(rtt);
        }
    }

    /// libwebrtc's `UpdateCongestionWindowSize`: a new window from the last target and the
    /// smallest of the recent per-feedback max RTTs, averaged with the previous one.
    pub fn update_window(&mut self, min_feedback_rtt: TimeDelta) {
        // libwebrtc keeps the feedback RTTs in whole milliseconds (rounded).
        let rtt_ms = (min_feedback_rtt.as_us() as f64 / 1e3).round() as i64;
        let time_us = (rtt_ms * 1000) + (self.config.queue_size_ms * 1e3).round() as i64;
        // Rate x time rounded to the nearest byte, as libwebrtc's units do.
        let bytes = (self.last_target.as_bps() as i128 * time_us as i128 + 4_000_000) / 8_000_000;
        let fresh = DataSize::from_bytes(bytes as i64);
        let window = match self.window {
            Some(previous) => (fresh + previous) / 2,
            None => fresh,
        };
        self.window = Some(window.max(MIN_WINDOW));
    }

    /// One network update (`MaybeTriggerOnNetworkChanged`'s use of
    /// `UpdateTargetBitrate`): adapts the ratio to the window's fill and sets the pushback
    /// rate for `target`, not below `min_rate` (GCC's minimum).
    pub fn update(&mut self, target: DataRate, min_rate: DataRate) {
        self.last_target = target;
        let pushed = match self.window.filter(|w| *w > DataSize::ZERO) {
            None => target,
            Some(window) => {
                let mut total = self.outstanding;
                if self.config.add_pacing {
                    total += self.pacer_queue;
                }
                let fill = total / window;
                if fill > 1.5 {
                    self.ratio *= 0.9;
                } else if fill > 1.0 {
                    self.ratio *= 0.95;
                } else if fill < 0.1 {
                    self.ratio = 1.0;
                } else {
                    self.ratio = (self.ratio * 1.05).min(1.0);
                }
                let adjusted = DataRate::from_bps((target.as_bps() as f64 * self.ratio) as i64);
                let floor = DataRate::from_bps(self.config.min_rate_bps);
                if adjusted < floor {
                    target.min(floor)
                } else {
                    adjusted
                }
            }
        };
        self.pushback_rate = pushed.max(min_rate);
    }

    /// libwebrtc's `encoding_rate_ratio_`.
    pub fn ratio(&self) -> f64 {
        self.ratio
    }

    /// The data window (`None` before the first feedback RTT).
    pub fn window(&self) -> Option<DataSize> {
        self.window
    }

    /// The pushback rate at the latest update.
    pub fn pushback_rate(&self) -> DataRate {
        self.pushback_rate
    }

    /// `(target - pushback) / target` at the latest update, in `drop_frame` mode; 0 otherwise.
    pub fn cwnd_reduce_ratio(&self) -> f64 {
        if !self.config.drop_frame || self.last_target <= DataRate::ZERO {
            return 0.0;
        }
        let target = self.last_target.as_bps();
        (target - self.pushback_rate.as_bps()) as f64 / target as f64
    }

    /// The encoder's rate for `target`: the target in `drop_frame` mode, else the pushback
    /// rate (never above the target).
    pub fn encoder_rate(&self, target: DataRate) -> DataRate {
        if self.config.drop_frame {
            target
        } else {
            self.pushback_rate.min(target)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::gcc::{Gcc, GccConfig};
    use crate::cc::{CongestionController, PacketResult, SentPacket, TransportPacketsFeedback};
    use crate::units::Timestamp;

    fn pushback(drop_frame: bool, start: DataRate) -> CongestionWindowPushback {
        let config = CongestionWindowConfig { drop_frame, ..Default::default() };
        CongestionWindowPushback::new(config, start)
    }

    const GCC_MIN: DataRate = DataRate::from_kbps(5);

    #[test]
    fn defaults_are_m119s() {
        let c = CongestionWindowConfig::default();
        assert_eq!((c.queue_size_ms, c.min_rate_bps), (350.0, 30_000));
        assert!(c.drop_frame && !c.add_pacing);
        // Configs written before `drop_frame` existed get the default.
        let old: CongestionWindowConfig =
            serde_json::from_str(r#"{"queue_size_ms": 300}"#).unwrap();
        assert!(old.drop_frame);
    }

    #[test]
    fn ratio_follows_the_windows_fill_and_drop_frame_reports_it() {
        let target = DataRate::from_mbps(10);
        let mut p = pushback(true, target);
        p.set_outstanding(DataSize::from_kilobytes(800));
        p.update(target, GCC_MIN);
        assert_eq!((p.ratio(), p.pushback_rate(), p.cwnd_reduce_ratio()), (1.0, target, 0.0));
        // Window: 10 Mbps x (50 + 350 ms) = 500 kB.
        p.update_window(TimeDelta::from_ms(50));
        assert_eq!(p.window(), Some(DataSize::from_kilobytes(500)));
        let steps = [
            (800, 9_000_000),  // fill 1.6: x 0.9
            (600, 8_550_000),  // fill 1.2: x 0.95
            (250, 8_977_500),  // fill 0.5: x 1.05
            (250, 9_426_375),  // again x 1.05
            (250, 9_897_693),  // x 1.05 = 0.98976...(truncated to whole bps)
            (250, 10_000_000), // capped at 1
            (800, 9_000_000),  // x 0.9
            (10, 10_000_000),  // fill 0.02: back to 1 at once
        ];
        for (kb, rate_bps) in steps {
            p.set_outstanding(DataSize::from_kilobytes(kb));
            p.update(target, GCC_MIN);
            assert_eq!(p.pushback_rate().as_bps(), rate_bps, "at {kb} kB in flight");
            // DropFrame: the encoder keeps the target; the ratio carries the pushback.
            assert_eq!(p.encoder_rate(target), target);
            let ratio = (10_000_000 - rate_bps) as f64 / 1e7;
            assert_eq!(p.cwnd_reduce_ratio(), ratio);
        }
    }

    #[test]
    fn without_drop_frame_the_encoder_rate_is_lowered_and_no_ratio_is_reported() {
        let target = DataRate::from_mbps(10);
        let mut p = pushback(false, target);
        p.update_window(TimeDelta::from_ms(50));
        p.set_outstanding(DataSize::from_kilobytes(800));
        p.update(target, GCC_MIN);
        assert_eq!(p.encoder_rate(target), DataRate::from_mbps(9));
        assert_eq!(p.cwnd_reduce_ratio(), 0.0);
        // Never above the target in force.
        assert_eq!(p.encoder_rate(DataRate::from_mbps(5)), DataRate::from_mbps(5));
    }

    #[test]
    fn the_window_is_sized_from_the_last_target_and_averaged_with_the_previous() {
        let mut p = pushback(true, DataRate::from_kbps(300));
        // Before any update: the start rate. 300 kbps x (100 + 350 ms) = 16 875 B.
        p.update_window(TimeDelta::from_ms(100));
        assert_eq!(p.window(), Some(DataSize::from_bytes(16_875)));
        // The last target is 1 Mbps from now on: fresh 56 250 B, averaged: 36 562 B.
        p.update(DataRate::from_mbps(1), GCC_MIN);
        p.update_window(TimeDelta::from_ms(100));
        assert_eq!(p.window(), Some(DataSize::from_bytes(36_562)));
        // RTTs count in whole milliseconds, rounded: 99.5 ms is 100 ms.
        let mut q = pushback(true, DataRate::from_kbps(300));
        q.update_window(TimeDelta::from_us(99_500));
        assert_eq!(q.window(), Some(DataSize::from_bytes(16_875)));
        q = pushback(true, DataRate::from_kbps(300));
        q.update_window(TimeDelta::from_us(99_499));
        assert_eq!(q.window(), Some(DataSize::from_bytes(16_838))); // 99 ms: 16 837.5 rounded
                                                                    // At least two full packets.
        let mut r = pushback(true, DataRate::from_kbps(10));
        r.update_window(TimeDelta::from_ms(10));
        assert_eq!(r.window(), Some(DataSize::from_bytes(3000)));
    }

    #[test]
    fn the_floor_is_min_rate_unless_the_target_is_lower_and_never_below_gccs_minimum() {
        let mut p = pushback(true, DataRate::from_kbps(100));
        p.update_window(TimeDelta::from_ms(50));
        p.set_outstanding(DataSize::from_kilobytes(100));
        for _ in 0..100 {
            p.update(DataRate::from_kbps(100), GCC_MIN);
        }
        assert_eq!(p.pushback_rate(), DataRate::from_kbps(30));
        assert_eq!(p.cwnd_reduce_ratio(), 0.7);
        p.update(DataRate::from_kbps(20), GCC_MIN);
        assert_eq!(p.pushback_rate(), DataRate::from_kbps(20));
        assert_eq!(p.cwnd_reduce_ratio(), 0.0);
        let cfg = CongestionWindowConfig { min_rate_bps: 0, ..Default::default() };
        let mut q = CongestionWindowPushback::new(cfg, DataRate::from_kbps(100));
        q.update_window(TimeDelta::from_ms(50));
        q.set_outstanding(DataSize::from_kilobytes(100));
        for _ in 0..100 {
            q.update(DataRate::from_kbps(100), GCC_MIN);
        }
        assert_eq!(q.pushback_rate(), GCC_MIN);
    }

    #[test]
    fn the_pacer_queue_counts_with_add_pacing_from_the_next_process_interval() {
        let cfg = CongestionWindowConfig { add_pacing: true, ..Default::default() };
        let target = DataRate::from_mbps(10);
        let mut p = CongestionWindowPushback::new(cfg, target);
        p.update_window(TimeDelta::from_ms(50)); // 500 kB
        p.set_outstanding(DataSize::from_kilobytes(400));
        p.set_pacer_queue(DataSize::from_kilobytes(400));
        p.update(target, GCC_MIN);
        assert_eq!(p.ratio(), 1.0, "fill 0.8 until the queue is handed over");
        p.on_process_interval(None);
        p.update(target, GCC_MIN);
        assert_eq!(p.ratio(), 0.9, "fill 1.6");
    }

    fn feedback(sent_at: Timestamp, rtt: TimeDelta) -> TransportPacketsFeedback {
        let sent = SentPacket {
            transport_seq: 0,
            send_time: sent_at,
            size: DataSize::from_bytes(1200),
            probe_cluster_id: None,
            is_padding: false,
            data_in_flight: DataSize::from_bytes(1200),
        };
        TransportPacketsFeedback {
            feedback_time: sent_at + rtt,
            packets: vec![PacketResult {
                sent,
                receive_time: Some(sent_at + rtt / 2),
                rtt: Some(rtt),
            }],
            prior_in_flight: DataSize::from_bytes(1200),
            data_in_flight: DataSize::ZERO,
            rtt: Some(rtt),
            smoothed_rtt: Some(rtt),
        }
    }

    fn sent(seq: u64, at: Timestamp, in_flight: DataSize) -> SentPacket {
        SentPacket {
            transport_seq: seq,
            send_time: at,
            size: DataSize::from_bytes(1200),
            probe_cluster_id: None,
            is_padding: false,
            data_in_flight: in_flight,
        }
    }

    fn gcc(drop_frame: bool) -> Gcc {
        let cw = CongestionWindowConfig { drop_frame, ..Default::default() };
        let cfg = GccConfig { congestion_window: Some(cw), ..Default::default() };
        Gcc::new(cfg, Timestamp::ZERO)
    }

    /// GCC with pushback as M119 wires it: no window before a feedback RTT; then every sent
    /// packet is a network update that moves the ratio.
    fn overfill(g: &mut Gcc) -> DataRate {
        let start = g.update().target_rate;
        assert_eq!(start, DataRate::from_kbps(300));
        // No window yet: an overfull pipe (and a process interval) push nothing back.
        g.on_packet_sent(
            &sent(0, Timestamp::from_ms(1), DataSize::from_kilobytes(100)),
            Timestamp::from_ms(1),
        );
        g.handle_timeout(Timestamp::from_ms(25));
        let u = g.update();
        assert_eq!((u.encoder_rate, u.cwnd_reduce_ratio), (start, 0.0));
        assert_eq!(g.pushback.as_ref().unwrap().window(), None);
        // A feedback with a 100 ms RTT. Its delay-based update raises the target by AIMD's
        // minimum increase (1 kbps), which the loss-based side takes at once (M119's
        // UpdateLossBasedEstimator runs UpdateEstimate): window 301 kbps x 450 ms = 16 931 B.
        g.on_transport_feedback(
            &feedback(Timestamp::from_ms(1), TimeDelta::from_ms(100)),
            Timestamp::from_ms(101),
        );
        let target = g.update().target_rate;
        assert_eq!(target, DataRate::from_kbps(301));
        assert_eq!(g.pushback.as_ref().unwrap().window(), Some(DataSize::from_bytes(16_931)));
        // Three sends with 30 kB in flight (fill 1.77): ratio 0.9^3.
        for i in 1..=3 {
            let at = Timestamp::from_ms(101 + i);
            g.on_packet_sent(&sent(i as u64, at, DataSize::from_kilobytes(30)), at);
        }
        target
    }

    #[test]
    fn gcc_in_drop_frame_mode_reports_the_ratio_after_every_sent_packet_and_keeps_the_rate() {
        let mut g = gcc(true);
        let target = overfill(&mut g);
        let u = g.update();
        assert_eq!(u.target_rate, target);
        assert_eq!(u.encoder_rate, target);
        // Pushback 301 000 x 0.729 = 219 429 bps: the ratio is 81 571 / 301 000.
        assert_eq!(u.cwnd_reduce_ratio, 81_571.0 / 301_000.0);
    }

    #[test]
    fn gcc_without_drop_frame_lowers_the_encoder_rate() {
        let mut g = gcc(false);
        let target = overfill(&mut g);
        let u = g.update();
        assert_eq!(u.target_rate, target);
        assert_eq!(u.encoder_rate, DataRate::from_bps(219_429));
        assert_eq!(u.cwnd_reduce_ratio, 0.0);
        // Without pushback: neither.
        let cfg = GccConfig { congestion_window: None, ..Default::default() };
        let mut g = Gcc::new(cfg, Timestamp::ZERO);
        g.on_packet_sent(
            &sent(0, Timestamp::from_ms(1), DataSize::from_kilobytes(100)),
            Timestamp::from_ms(1),
        );
        let u = g.update();
        assert_eq!((u.encoder_rate, u.cwnd_reduce_ratio), (u.target_rate, 0.0));
    }
}
