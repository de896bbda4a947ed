//! Bottleneck-capacity estimate from packet trains in transport feedback, as in the ACE
//! authors' WebRTC development fork (found by the project, not published with the paper): the
//! paper cites PacketPair (ACE §4.1); the fork generalises the pair to every burst the token
//! bucket sends.
//!
//! * Packets with the same send time (sent in one burst) form one train; within one feedback
//!   report, a train is a run of consecutive transport sequence numbers with equal send
//!   times. A train split across two reports gives two shorter trains, each judged alone.
//! * Sample = received bytes * 8 / (last arrival - first arrival), used only when the train
//!   spans at least `min_span` at the receiver (4 ms in the fork; shorter spans are dominated
//!   by timer granularity and cross traffic).
//! * Estimate = `smoothing * old + (1 - smoothing) * sample` (fork: 0.9 / 0.1); the first
//!   sample is taken as is.
//! * Every received packet's bytes count, the first one's too (the fork leaves the first
//!   one's out; the brief for Sluice counts them). Counting them reads an n-packet train as
//!   n/(n-1) times the link rate, e.g. +25 % for a 5-packet train: the estimate errs high,
//!   which inflates ACE-N's predicted queue, i.e. errs towards pacing.
//!   `count_first_packet = false` gives the classic dispersion formula.
//! * Lost packets of a train are skipped (a drop-tail queue spends no link time on them, so
//!   the received ones still measure the link).

use crate::cc::TransportPacketsFeedback;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};

/// The packet-train capacity estimator (see the module documentation).
#[derive(Clone, Debug)]
pub struct PacketTrainEstimator {
    min_span: TimeDelta,
    /// Weight of the old estimate.
    smoothing: f64,
    count_first_packet: bool,
    estimate: Option<DataRate>,
}

/// One train being collected.
#[derive(Clone, Copy, Debug)]
struct Train {
    send_time: Timestamp,
    first_arrival: Option<Timestamp>,
    last_arrival: Option<Timestamp>,
    bytes: DataSize,
    /// Size of the earliest-arriving packet, left out when `count_first_packet` is false.
    first_size: DataSize,
}

impl PacketTrainEstimator {
    /// An estimator without an estimate: samples need trains spanning `min_span`; `smoothing`
    /// is the weight of the old estimate.
    pub fn new(min_span: TimeDelta, smoothing: f64, count_first_packet: bool) -> Self {
        PacketTrainEstimator { min_span, smoothing, count_first_packet, estimate: None }
    }

    /// The smoothed capacity estimate (`None` until a train of `min_span` has been seen).
    pub fn estimate(&self) -> Option<DataRate> {
        self.estimate
    }

    /// Takes the trains in one report; returns how many samples were used.
    pub fn on_feedback(&mut self, feedback: &TransportPacketsFeedback) -> usize {
        let mut used = 0;
        let mut train: Option<Train> = None;
        for p in &feedback.packets {
            let send_time = p.sent.send_time;
            if train.is_some_and(|t| t.send_time != send_time) {
                used += train.take().map_or(0, |t| usize::from(self.on_train(t)));
            }
            let t = train.get_or_insert(Train {
                send_time,
                first_arrival: None,
                last_arrival: None,
                bytes: DataSize::ZERO,
                first_size: DataSize::ZERO,
            });
            let Some(arrival) = p.receive_time else { continue };
            t.bytes += p.sent.size;
            if t.first_arrival.is_none_or(|f| arrival < f) {
                t.first_arrival = Some(arrival);
                t.first_size = p.sent.size;
            }
            t.last_arrival = Some(t.last_arrival.map_or(arrival, |l| l.max(arrival)));
        }
        used + train.map_or(0, |t| usize::from(self.on_train(t)))
    }

    fn on_train(&mut self, t: Train) -> bool {
        let (Some(first), Some(last)) = (t.first_arrival, t.last_arrival) else { return false };
        let span = last - first;
        if span < self.min_span || span <= TimeDelta::ZERO {
            return false;
        }
        let bytes = if self.count_first_packet { t.bytes } else { t.bytes - t.first_size };
        let sample = bytes / span;
        self.estimate = Some(match self.estimate {
            None => sample,
            Some(old) => old.scale(self.smoothing) + sample.scale(1.0 - self.smoothing),
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{PacketResult, SentPacket};

    /// A report from `(send_ms, size_bytes, arrival_us)` triples, in sequence order.
    fn report(packets: &[(i64, i64, Option<i64>)]) -> TransportPacketsFeedback {
        let packets = packets
            .iter()
            .enumerate()
            .map(|(i, &(send_ms, size, arrival_us))| PacketResult {
                sent: SentPacket {
                    transport_seq: i as u64,
                    send_time: Timestamp::from_ms(send_ms),
                    size: DataSize::from_bytes(size),
                    probe_cluster_id: None,
                    is_padding: false,
                    data_in_flight: DataSize::ZERO,
                },
                receive_time: arrival_us.map(Timestamp::from_us),
                rtt: None,
            })
            .collect();
        TransportPacketsFeedback {
            feedback_time: Timestamp::from_ms(100),
            packets,
            prior_in_flight: DataSize::ZERO,
            data_in_flight: DataSize::ZERO,
            rtt: None,
            smoothed_rtt: None,
        }
    }

    fn estimator() -> PacketTrainEstimator {
        PacketTrainEstimator::new(TimeDelta::from_ms(4), 0.9, true)
    }

    #[test]
    fn counts_every_packet_of_a_train_spanning_4_ms() {
        let mut e = estimator();
        // Five 1000 B packets sent together, arriving 1 ms apart: 5000 B over 4 ms = 10 Mbps
        // (the first packet's bytes count).
        let r = report(&[
            (10, 1000, Some(30_000)),
            (10, 1000, Some(31_000)),
            (10, 1000, Some(32_000)),
            (10, 1000, Some(33_000)),
            (10, 1000, Some(34_000)),
        ]);
        assert_eq!(e.on_feedback(&r), 1);
        assert_eq!(e.estimate(), Some(DataRate::from_mbps(10)));
        // Without the first packet: 4000 B over 4 ms = 8 Mbps.
        let mut classic = PacketTrainEstimator::new(TimeDelta::from_ms(4), 0.9, false);
        classic.on_feedback(&r);
        assert_eq!(classic.estimate(), Some(DataRate::from_mbps(8)));
    }

    #[test]
    fn short_trains_are_ignored_and_samples_are_smoothed() {
        let mut e = estimator();
        // 3.999 ms span: ignored. Single packets (different send times): no train.
        let r = report(&[
            (0, 1000, Some(10_000)),
            (0, 1000, Some(13_999)),
            (1, 1000, Some(14_500)),
            (2, 1000, Some(15_000)),
        ]);
        assert_eq!(e.on_feedback(&r), 0);
        assert_eq!(e.estimate(), None);
        // 10 Mbps, then 20 Mbps: 0.9 * 10 + 0.1 * 20 = 11 Mbps.
        e.on_feedback(&report(&[(5, 2500, Some(20_000)), (5, 2500, Some(24_000))]));
        assert_eq!(e.estimate(), Some(DataRate::from_mbps(10)));
        e.on_feedback(&report(&[(7, 5000, Some(30_000)), (7, 5000, Some(34_000))]));
        assert_eq!(e.estimate(), Some(DataRate::from_mbps(11)));
    }

    #[test]
    fn trains_are_split_by_send_time_and_losses_skipped() {
        let mut e = estimator();
        let r = report(&[
            // Train A: 3 packets, the middle one lost: 2000 B over 4 ms = 4 Mbps.
            (0, 1000, Some(10_000)),
            (0, 1000, None),
            (0, 1000, Some(14_000)),
            // Train B: 4000 B over 8 ms = 4 Mbps.
            (3, 2000, Some(20_000)),
            (3, 2000, Some(28_000)),
        ]);
        assert_eq!(e.on_feedback(&r), 2);
        assert_eq!(e.estimate(), Some(DataRate::from_mbps(4)));
    }
}
