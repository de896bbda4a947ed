//! The time series of a session, as both runtimes record it: one [`Sample`] every sample
//! interval until the end of capture, from the sender's state and a reading of the
//! bottleneck. The simulator reads its own link ([`crate::sim`]); live mode reads the relay's
//! shared snapshot (`sluice-live`'s sender endpoint). Rates over the interval come from the
//! cumulative counts kept here, so a sample means the same in both.

use crate::columns::Columns;
use crate::metrics::Sample;
use crate::sender::Sender;
use crate::units::{DataSize, TimeDelta, Timestamp};

/// The bottleneck as a sample sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkReading {
    /// The trace's capacity over the last sample interval.
    pub capacity_bps: i64,
    /// Bytes of the session's media flow the bottleneck has delivered so far.
    pub delivered_bytes: i64,
    /// Bytes waiting in the bottleneck queue.
    pub queue_bytes: i64,
    /// Packets waiting in the bottleneck queue.
    pub queue_packets: u64,
    /// Sojourn time of the last packet to leave the queue.
    pub queue_delay_us: i64,
    /// The media flow's packets dropped at the bottleneck so far.
    pub lost_packets: u64,
}

/// When the next sample is due, and the counts the interval rates are taken from.
#[derive(Clone, Debug)]
pub struct Sampler {
    interval: TimeDelta,
    next: Timestamp,
    capture_end: Timestamp,
    last_sent_bytes: i64,
    last_delivered_bytes: i64,
}

impl Sampler {
    /// Samples every `interval` from `start + interval` to `capture_end` (none after it: the
    /// drain only lets frames arrive).
    pub fn new(interval: TimeDelta, start: Timestamp, capture_end: Timestamp) -> Self {
        Sampler {
            interval,
            next: start + interval,
            capture_end,
            last_sent_bytes: 0,
            last_delivered_bytes: 0,
        }
    }

    /// The sample interval.
    pub fn interval(&self) -> TimeDelta {
        self.interval
    }

    /// When the next sample is due; [`Timestamp::INFINITY`] once capture has ended.
    pub fn poll_timeout(&self) -> Timestamp {
        if self.next <= self.capture_end {
            self.next
        } else {
            Timestamp::INFINITY
        }
    }

    /// The bytes the bottleneck had delivered at the last sample (what utilisation counts,
    /// not what is delivered while the session drains).
    pub fn delivered_bytes(&self) -> i64 {
        self.last_delivered_bytes
    }

    /// The sample at `now` (the next one is due an interval after the one this replaces):
    /// the sender's target, rates, pacer and transport state, `sent_bytes` (everything the
    /// sender has put on the wire so far) and `link`, then the sender's named columns and
    /// those `more_columns` adds (the link's, the flows').
    pub fn take(
        &mut self,
        now: Timestamp,
        sender: &Sender,
        sent_bytes: i64,
        link: LinkReading,
        more_columns: impl FnOnce(&mut Columns),
    ) -> Sample {
        let interval = self.interval;
        let control = sender.control_update();
        let mut columns = Columns::default();
        sender.debug_columns(&mut columns);
        more_columns(&mut columns);
        let sample = Sample {
            t_us: now.as_us(),
            target_rate_bps: control.target_rate.as_bps(),
            encoder_rate_bps: control.encoder_rate.as_bps(),
            pacing_rate_bps: Some(sender.pacing_rate())
                .filter(|r| r.is_finite())
                .map(|r| r.as_bps()),
            link_capacity_bps: link.capacity_bps,
            send_rate_bps: (DataSize::from_bytes(sent_bytes - self.last_sent_bytes) / interval)
                .as_bps(),
            delivered_rate_bps: (DataSize::from_bytes(
                link.delivered_bytes - self.last_delivered_bytes,
            ) / interval)
                .as_bps(),
            queue_bytes: link.queue_bytes,
            queue_packets: link.queue_packets,
            queue_delay_us: link.queue_delay_us,
            pacer_queue_bytes: sender.pacer_queue_size().as_bytes(),
            pacer_delay_us: sender.pacer_oldest_queue_time(now).as_us(),
            rtt_us: sender.smoothed_rtt().map(|r| r.as_us()),
            in_flight_bytes: sender.bytes_in_flight().as_bytes(),
            cwnd_bytes: control.congestion_window.map(|w| w.as_bytes()),
            lost_packets: link.lost_packets,
            columns,
        };
        self.last_sent_bytes = sent_bytes;
        self.last_delivered_bytes = link.delivered_bytes;
        self.next += interval;
        sample
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::InlineEncoder;
    use crate::session::{build_encoder, build_sender, RunConfig};

    #[test]
    fn samples_are_due_every_interval_until_capture_ends_with_rates_over_the_interval() {
        let ms = TimeDelta::from_ms;
        let cfg = RunConfig::default();
        let scheme = cfg.resolve_scheme().unwrap();
        let encoder = Box::new(InlineEncoder::new(build_encoder(&cfg).unwrap()));
        let sender = build_sender(&cfg, &scheme, encoder, Timestamp::ZERO);
        let mut s = Sampler::new(ms(20), Timestamp::ZERO, Timestamp::from_ms(50));
        assert_eq!(s.poll_timeout(), Timestamp::from_ms(20));
        let link = |delivered_bytes| LinkReading {
            capacity_bps: 4_000_000,
            delivered_bytes,
            queue_bytes: 3000,
            queue_packets: 2,
            queue_delay_us: 7000,
            lost_packets: 1,
        };
        let a = s.take(Timestamp::from_ms(20), &sender, 5_000, link(2_500), |c| {
            c.int("link_extra", Some(1))
        });
        // 5000 B sent and 2500 B delivered over 20 ms.
        assert_eq!((a.t_us, a.send_rate_bps, a.delivered_rate_bps), (20_000, 2_000_000, 1_000_000));
        assert_eq!((a.link_capacity_bps, a.queue_bytes, a.queue_packets), (4_000_000, 3000, 2));
        assert_eq!((a.queue_delay_us, a.lost_packets), (7000, 1));
        assert!(a.columns.get("link_extra").is_some());
        assert_eq!(s.poll_timeout(), Timestamp::from_ms(40));
        let b = s.take(Timestamp::from_ms(40), &sender, 5_000, link(5_000), |_| {});
        assert_eq!((b.send_rate_bps, b.delivered_rate_bps), (0, 1_000_000));
        assert_eq!(s.delivered_bytes(), 5_000);
        // 60 ms is after the end of capture: no more samples.
        assert_eq!(s.poll_timeout(), Timestamp::INFINITY);
        assert_eq!(s.interval(), ms(20));
    }
}
