//! The sender's RTT estimator and the RTT filters controllers and pacers build on it.
//!
//! [`RttEstimator`] is owned by the sender and runs once per transport feedback report. The
//! receiver sends a report `hold_time` after the newest arrival it reports (its DLSR), so a
//! packet that arrived at `a` in the receiver's clock, `d = newest - a` before the newest
//! one, would have been reported `d` earlier: its RTT is
//! `(now - hold_time - d) - send_time`. Every received packet of the report gets its own
//! sample this way, from its own arrival time, not the report's: a report batches 50 ms of
//! packets, and stamping them all with the report's time would hide the queue building up
//! within the batch. The difference of two packets' RTTs is the difference of their one-way
//! delays (the clock offset cancels). The report's own sample, the newest packet's, feeds the
//! smoothed RTT (gain 1/8 per report, RFC 6298) that the sender uses for retransmission
//! timing.
//!
//! Filters over the per-packet samples, for the controllers that need them:
//! [`WindowedMin`] (the minimum RTT over a time window, Copa's and BBR's min-RTT filter) and
//! [`StandingRtt`] (Copa's standing RTT: the minimum over the packets that arrived within a
//! span, e.g. srtt / 2, of the newest one).

use super::PacketResult;
use crate::units::{TimeDelta, Timestamp};
use std::collections::VecDeque;

/// Gain of the smoothed RTT per report (RFC 6298's alpha = 1/8).
pub const SRTT_GAIN: f64 = 0.125;
/// Floor of any RTT sample (a report processed in the same microsecond as the packet's send
/// would give zero).
const MIN_SAMPLE: TimeDelta = TimeDelta::from_us(1);

/// Per-packet RTT samples from transport feedback, and the smoothed RTT.
#[derive(Clone, Debug, Default)]
pub struct RttEstimator {
    latest: Option<TimeDelta>,
    smoothed: Option<TimeDelta>,
}

impl RttEstimator {
    /// Fills in the RTT of every received packet of a report that reached the sender at `now`
    /// and was sent `hold_time` after its newest arrival; returns the report's sample (its
    /// newest packet's RTT; among packets that arrived at the same time, the first in
    /// sequence order), or `None` if it reports no arrival.
    pub fn on_feedback(
        &mut self,
        packets: &mut [PacketResult],
        hold_time: TimeDelta,
        now: Timestamp,
    ) -> Option<TimeDelta> {
        let mut newest: Option<(Timestamp, Timestamp)> = None; // (arrival, send time)
        for p in packets.iter() {
            if let Some(arrival) = p.receive_time {
                if newest.is_none_or(|(a, _)| arrival > a) {
                    newest = Some((arrival, p.sent.send_time));
                }
            }
        }
        let (newest_arrival, newest_send) = newest?;
        let reported_at = now - hold_time;
        for p in packets.iter_mut() {
            p.rtt = p.receive_time.map(|arrival| {
                (reported_at - (newest_arrival - arrival) - p.sent.send_time).max(MIN_SAMPLE)
            });
        }
        let rtt = (reported_at - newest_send).max(MIN_SAMPLE);
        self.latest = Some(rtt);
        self.smoothed = Some(match self.smoothed {
            None => rtt,
            Some(s) => s * (1.0 - SRTT_GAIN) + rtt * SRTT_GAIN,
        });
        Some(rtt)
    }

    /// The latest report's sample.
    pub fn latest(&self) -> Option<TimeDelta> {
        self.latest
    }
    /// The smoothed RTT (EWMA of the reports' samples).
    pub fn smoothed(&self) -> Option<TimeDelta> {
        self.smoothed
    }
}

/// Minimum over a sliding time window (a monotonic deque: O(1) amortised per sample).
#[derive(Clone, Debug, Default)]
pub struct WindowedMin {
    samples: VecDeque<(Timestamp, TimeDelta)>,
}

impl WindowedMin {
    /// Adds a sample taken at `now` and returns the minimum of the samples within `window`
    /// of `now` (at least the new one).
    pub fn update(&mut self, value: TimeDelta, now: Timestamp, window: TimeDelta) -> TimeDelta {
        while self.samples.back().is_some_and(|&(_, v)| v >= value) {
            self.samples.pop_back();
        }
        self.samples.push_back((now, value));
        while self.samples.front().is_some_and(|&(t, _)| now - t > window) {
            self.samples.pop_front();
        }
        // Non-empty: the new sample was pushed and is never older than the window.
        self.samples.front().map_or(value, |&(_, v)| v)
    }
    /// The current minimum (`None` before any sample).
    pub fn get(&self) -> Option<TimeDelta> {
        self.samples.front().map(|&(_, v)| v)
    }
}

/// Copa's standing RTT: the smallest RTT among the packets that arrived (receiver clock)
/// within a span of the newest one.
///
/// Samples come in arrival order, so the expired ones are at the front and a monotonic deque
/// gives the minimum in O(1) amortised per sample (a scan over the span per acknowledgement
/// was a tenth of a Copa simulation). A sample out of arrival order switches to the scan.
#[derive(Clone, Debug)]
pub struct StandingRtt {
    /// Every sample within the span, in push order.
    recent: VecDeque<(Timestamp, TimeDelta)>,
    /// While in order: the samples that may still be the minimum (increasing RTT).
    candidates: VecDeque<(Timestamp, TimeDelta)>,
    in_order: bool,
}

impl Default for StandingRtt {
    fn default() -> Self {
        StandingRtt { recent: VecDeque::new(), candidates: VecDeque::new(), in_order: true }
    }
}

impl StandingRtt {
    /// A packet's sample, in arrival order.
    pub fn push(&mut self, arrival: Timestamp, rtt: TimeDelta) {
        if self.recent.back().is_some_and(|&(a, _)| arrival < a) {
            self.in_order = false;
            self.candidates.clear();
        }
        self.recent.push_back((arrival, rtt));
        if self.in_order {
            while self.candidates.back().is_some_and(|&(_, r)| r >= rtt) {
                self.candidates.pop_back();
            }
            self.candidates.push_back((arrival, rtt));
        }
    }
    /// Forgets the packets that arrived more than `span` before `newest_arrival` and returns
    /// the minimum of the rest (`None` if there are none).
    pub fn update(&mut self, newest_arrival: Timestamp, span: TimeDelta) -> Option<TimeDelta> {
        let expired = |&(arrival, _): &(Timestamp, TimeDelta)| newest_arrival - arrival > span;
        if !self.in_order {
            self.recent.retain(|s| !expired(s));
            return self.recent.iter().map(|&(_, r)| r).min();
        }
        while self.recent.front().is_some_and(expired) {
            self.recent.pop_front();
        }
        while self.candidates.front().is_some_and(expired) {
            self.candidates.pop_front();
        }
        self.candidates.front().map(|&(_, r)| r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::SentPacket;
    use crate::units::DataSize;

    fn result(seq: u64, send_ms: i64, arrival_ms: Option<i64>) -> PacketResult {
        PacketResult {
            sent: SentPacket {
                transport_seq: seq,
                send_time: Timestamp::from_ms(send_ms),
                size: DataSize::from_bytes(1000),
                probe_cluster_id: None,
                is_padding: false,
                data_in_flight: DataSize::ZERO,
            },
            // The receiver's clock runs 1 s ahead of the sender's: only differences matter.
            receive_time: arrival_ms.map(|a| Timestamp::from_ms(a + 1000)),
            rtt: None,
        }
    }

    #[test]
    fn each_packet_gets_its_rtt_from_its_own_arrival() {
        // Sent at 0, 10, 20 ms; one-way delays 30, 45, 40 ms (a queue built up and drained);
        // the third was lost. The report left the receiver 5 ms after the newest arrival
        // (55 ms) and took 20 ms back: it reached the sender at 80 ms.
        let mut pkts = vec![result(0, 0, Some(30)), result(1, 10, Some(55)), result(2, 20, None)];
        let mut est = RttEstimator::default();
        let rtt = est.on_feedback(&mut pkts, TimeDelta::from_ms(5), Timestamp::from_ms(80));
        // Return path 20 ms: RTT = one-way delay + 20 ms, whatever the report's batching.
        assert_eq!(rtt, Some(TimeDelta::from_ms(65)));
        assert_eq!(pkts[0].rtt, Some(TimeDelta::from_ms(50)));
        assert_eq!(pkts[1].rtt, Some(TimeDelta::from_ms(65)));
        assert_eq!(pkts[2].rtt, None);
        // The one-way delays differ by exactly the RTTs' difference.
        let owd = |p: &PacketResult| p.one_way_delay().unwrap();
        assert_eq!(owd(&pkts[1]) - owd(&pkts[0]), TimeDelta::from_ms(15));
        assert_eq!(est.smoothed(), Some(TimeDelta::from_ms(65)));
        // A second report: smoothed moves by 1/8 of the difference.
        let mut more = vec![result(3, 100, Some(121))];
        est.on_feedback(&mut more, TimeDelta::ZERO, Timestamp::from_ms(141));
        assert_eq!(est.latest(), Some(TimeDelta::from_ms(41)));
        assert_eq!(est.smoothed(), Some(TimeDelta::from_ms(62)));
    }

    #[test]
    fn a_report_without_arrivals_gives_no_sample() {
        let mut pkts = vec![result(0, 0, None)];
        let mut est = RttEstimator::default();
        assert_eq!(est.on_feedback(&mut pkts, TimeDelta::ZERO, Timestamp::from_ms(50)), None);
        assert_eq!(est.smoothed(), None);
    }

    #[test]
    fn windowed_min_expires_old_samples() {
        let mut m = WindowedMin::default();
        let w = TimeDelta::from_secs(10);
        assert_eq!(m.update(TimeDelta::from_ms(40), Timestamp::from_ms(0), w).as_ms(), 40);
        assert_eq!(m.update(TimeDelta::from_ms(60), Timestamp::from_ms(5000), w).as_ms(), 40);
        // At 10.001 s the 40 ms sample is older than the window.
        assert_eq!(m.update(TimeDelta::from_ms(70), Timestamp::from_ms(10_001), w).as_ms(), 60);
        assert_eq!(m.get(), Some(TimeDelta::from_ms(60)));
    }

    #[test]
    fn standing_rtt_matches_a_scan_in_and_out_of_order() {
        // Against the plain definition (retain the span, take the minimum), with spans that
        // grow and shrink and, in the second half, samples out of arrival order.
        let mut rng = crate::rng::Rng::new(3);
        let mut fast = StandingRtt::default();
        let mut naive: Vec<(Timestamp, TimeDelta)> = Vec::new();
        let mut t = 0i64;
        for i in 0..20_000 {
            t += (rng.uniform() * 3000.0) as i64;
            let arrival = if i > 10_000 && rng.uniform() < 0.05 { t - 5000 } else { t };
            let rtt = TimeDelta::from_us(20_000 + (rng.uniform() * 50_000.0) as i64);
            let span = TimeDelta::from_us(5_000 + (rng.uniform() * 60_000.0) as i64);
            let at = Timestamp::from_us(arrival);
            fast.push(at, rtt);
            naive.push((at, rtt));
            naive.retain(|&(a, _)| at - a <= span);
            let want = naive.iter().map(|&(_, r)| r).min();
            assert_eq!(fast.update(at, span), want, "sample {i}");
        }
    }

    #[test]
    fn standing_rtt_is_the_min_over_the_span() {
        let mut s = StandingRtt::default();
        for (a, r) in [(0, 50), (10, 42), (20, 60), (30, 61)] {
            s.push(Timestamp::from_ms(a), TimeDelta::from_ms(r));
        }
        let span = TimeDelta::from_ms(20);
        assert_eq!(s.update(Timestamp::from_ms(30), span), Some(TimeDelta::from_ms(42)));
        // 10 ms later the 42 ms sample is out of the span.
        assert_eq!(s.update(Timestamp::from_ms(40), span), Some(TimeDelta::from_ms(60)));
    }
}
