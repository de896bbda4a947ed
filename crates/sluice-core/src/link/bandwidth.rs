//! The bottleneck's own bandwidth estimate (Co-RTV §III-B3): the mean forwarding bandwidth
//! over the last window `w` (50 ms, "based on real-world deployments"), and `Bw_old`, "the
//! BN's bandwidth before the bandwidth decrease" (§III-B1, Eq. 4), which gates Alg. 1
//! (line 3: the algorithm runs only while `Bw_old > Bw`).
//!
//! Two sources, both from the past only (a bottleneck that read the trace's future would be
//! an oracle; only FDCC is, `link/oracle.rs`):
//! * [`BwSource::Capacity`] (default, brief A2 "phy"): the service schedule of the last `w`,
//!   i.e. the bytes the link could have served in `[now - w, now)` whether or not it had
//!   packets. This is what a 5G base station knows from its PRB/TBS allocations (§IV) and what
//!   the paper's emulation reads from "the TC setting" (§V-B, Fig. 15).
//! * [`BwSource::Throughput`]: the bytes the link did serve in the last `w`. It reads low
//!   whenever the queue runs empty (0 on an idle link), so with it `Bw_old > Bw` holds after
//!   every idle gap (brief P2); kept for comparison.
//!
//! * [`BwSource::LinkRate`]: the rate the link is set to now
//!   ([`QueueView::rate_setting`]), what the paper's emulation read: "In the emulation
//!   environment, we can obtain accurate bandwidth by directly reading the TC setting" (§V-B,
//!   Fig. 15). It is not an average, so it follows a step at once; the window does not
//!   apply (except as the update interval of a TC setting replayed from a Mahimahi file).
//!   This is the estimate the §III-A bound assumes (the decision is made "immediately when
//!   the bandwidth drops", §III-B4).
//!
//! Either is multiplied by `scale` (Fig. 15's 0.8 / 1.0 / 1.2 / 1.5 estimation error).
//!
//! `Bw_old` (brief A3, the paper gives no rule): the largest `Bw` over the last `old_window`
//! (default `RTT_BN + w`: the rate the sender is still encoding for, since its reaction to
//! the bottleneck takes a round trip and the estimate lags by up to `w`). With it there are no
//! drops without a decrease of the estimate.

use super::QueueView;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Where the bottleneck's bandwidth estimate comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BwSource {
    /// The link's service schedule (delivery opportunities) over the last window.
    #[default]
    Capacity,
    /// The bytes the link served over the last window.
    Throughput,
    /// The rate the link is set to now (the TC setting of the paper's emulation).
    LinkRate,
}

/// `Bw` over the last window and `Bw_old`, updated by [`WindowedBandwidth::update`].
#[derive(Debug, Clone)]
pub struct WindowedBandwidth {
    source: BwSource,
    window: TimeDelta,
    old_window: TimeDelta,
    scale: f64,
    /// Departures (time, bytes) of the last window, for [`BwSource::Throughput`].
    served: VecDeque<(Timestamp, DataSize)>,
    served_bytes: DataSize,
    /// Decreasing-rate deque of (time, Bw) over the last `old_window`: its front is the max.
    history: VecDeque<(Timestamp, DataRate)>,
    current: Option<DataRate>,
}

impl WindowedBandwidth {
    /// `window` is `w`; `old_window` the span `Bw_old` looks back over; `scale` multiplies
    /// every estimate (1 for none; values that are not positive numbers count as 1).
    pub fn new(
        source: BwSource,
        window: TimeDelta,
        old_window: TimeDelta,
        scale: f64,
    ) -> WindowedBandwidth {
        WindowedBandwidth {
            source,
            window: window.max(TimeDelta::from_us(1)),
            old_window: old_window.max(TimeDelta::ZERO),
            scale: if scale.is_finite() && scale > 0.0 { scale } else { 1.0 },
            served: VecDeque::new(),
            served_bytes: DataSize::ZERO,
            history: VecDeque::new(),
            current: None,
        }
    }

    /// A packet of `size` finished serialisation at `at` (in order).
    pub fn on_served(&mut self, size: DataSize, at: Timestamp) {
        if self.source == BwSource::Throughput {
            self.served.push_back((at, size));
            self.served_bytes += size;
        }
    }

    /// Recomputes `Bw` at `view.now()` and records it for `Bw_old`. Before one full window
    /// has passed there is no estimate (`None`), except from [`BwSource::LinkRate`], which
    /// needs no history. A link without a rate limit has none either.
    pub fn update(&mut self, view: &QueueView<'_>) -> Option<DataRate> {
        let now = view.now();
        if self.source == BwSource::LinkRate {
            let bw = view.rate_setting(self.window)?.scale(self.scale);
            self.record(bw, now);
            return Some(bw);
        }
        if now < Timestamp::ZERO + self.window {
            return None;
        }
        let start = now - self.window;
        let bytes = match self.source {
            BwSource::LinkRate => unreachable!("handled above"),
            BwSource::Capacity => view.capacity_between(start, now)?,
            BwSource::Throughput => {
                view.capacity_between(start, now)?; // no rate limit: no estimate
                while self.served.front().is_some_and(|(t, _)| *t <= start) {
                    if let Some((_, b)) = self.served.pop_front() {
                        self.served_bytes -= b;
                    }
                }
                self.served_bytes
            }
        };
        let bw = (bytes / self.window).scale(self.scale);
        self.record(bw, now);
        Some(bw)
    }

    fn record(&mut self, bw: DataRate, now: Timestamp) {
        while self.history.back().is_some_and(|(_, b)| *b <= bw) {
            self.history.pop_back();
        }
        self.history.push_back((now, bw));
        let since = now - self.old_window;
        while self.history.len() > 1 && self.history.front().is_some_and(|(t, _)| *t < since) {
            self.history.pop_front();
        }
        self.current = Some(bw);
    }

    /// `Bw` as of the last update.
    pub fn bw(&self) -> Option<DataRate> {
        self.current
    }

    /// `Bw_old`: the largest `Bw` of the updates within the last `old_window` (the current
    /// one included, so `Bw_old >= Bw`).
    pub fn bw_old(&self) -> Option<DataRate> {
        self.history.front().map(|(_, b)| *b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{DropTail, Drops, QueueDiscipline, Queued};
    use crate::link::{Link, LinkConfig, LinkRate, QueueLimit};
    use crate::rng::Rng;
    use std::sync::{Arc, Mutex};

    /// (time, Bw, Bw_old) per update.
    type Log = Vec<(Timestamp, Option<DataRate>, Option<DataRate>)>;

    /// A drop-tail discipline that runs an estimator every millisecond and logs it.
    #[derive(Debug)]
    struct Probe {
        est: WindowedBandwidth,
        next: Timestamp,
        log: Arc<Mutex<Log>>,
    }
    impl QueueDiscipline for Probe {
        fn on_arrival(&mut self, view: &mut QueueView<'_>, item: Queued, dropped: &mut Drops) {
            DropTail { limit: QueueLimit::Unlimited }.on_arrival(view, item, dropped);
        }
        fn on_departure(&mut self, d: &crate::packet::Datagram, _: Timestamp, at: Timestamp) {
            self.est.on_served(d.size(), at);
        }
        fn handle_timeout(&mut self, view: &mut QueueView<'_>, _: &mut Drops) {
            let now = view.now();
            if now >= self.next {
                let bw = self.est.update(view);
                self.log.lock().unwrap().push((now, bw, self.est.bw_old()));
                self.next = now + TimeDelta::from_ms(1);
            }
        }
        fn poll_timeout(&self) -> Timestamp {
            self.next
        }
    }

    /// 20 Mbps until 1 s, then 2 Mbps (a Mahimahi trace), idle: no packet ever arrives.
    fn run(
        source: BwSource,
        until_ms: i64,
    ) -> Vec<(Timestamp, Option<DataRate>, Option<DataRate>)> {
        let spec = crate::link::TraceSpec::parse_cli("steps:20@1,2@2").unwrap();
        let trace = Arc::new(crate::link::generate(&spec, TimeDelta::from_secs(3)).unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        let est =
            WindowedBandwidth::new(source, TimeDelta::from_ms(50), TimeDelta::from_ms(90), 1.0);
        let probe = Probe { est, next: Timestamp::ZERO, log: log.clone() };
        let mut link = Link::with_discipline(
            LinkConfig { rate: LinkRate::Trace(trace), ..LinkConfig::default() },
            Rng::new(1),
            Box::new(probe),
        );
        let mut now = Timestamp::ZERO;
        while now <= Timestamp::from_ms(until_ms) {
            link.handle_timeout(now);
            now = link.poll_timeout();
        }
        let out = log.lock().unwrap().clone();
        out
    }

    fn mbps_at(log: &Log, ms: i64) -> (f64, f64) {
        let (_, bw, old) = log.iter().find(|(t, ..)| *t == Timestamp::from_ms(ms)).unwrap();
        (bw.unwrap().as_mbps_f64(), old.unwrap().as_mbps_f64())
    }

    #[test]
    fn capacity_follows_a_step_within_one_window_and_never_reads_ahead() {
        // Brief U2: 20 Mbps before the step, about 11 halfway through the window, 2 after it.
        let log = run(BwSource::Capacity, 1200);
        assert!(log.iter().all(|(t, bw, _)| bw.is_some() == (*t >= Timestamp::from_ms(50))));
        // Mahimahi opportunities carry 1504 B of IP bytes: 20 Mbps of trace is 20.05 Mbps.
        for ms in [100, 500, 999, 1000] {
            let (bw, old) = mbps_at(&log, ms);
            assert!((bw - 20.0).abs() < 0.3, "{ms} ms: {bw}");
            assert!((old - 20.0).abs() < 0.3, "{ms} ms: {old}");
        }
        let (bw, old) = mbps_at(&log, 1025);
        assert!((bw - 11.0).abs() < 0.6, "halfway: {bw}");
        assert!((old - 20.0).abs() < 0.3);
        for ms in [1050, 1100] {
            let (bw, _) = mbps_at(&log, ms);
            assert!((bw - 2.0).abs() < 0.5, "{ms} ms: {bw}");
        }
        // Bw_old remembers the 20 Mbps for 90 ms after the last window that saw it.
        assert!(mbps_at(&log, 1080).1 > 15.0);
        assert!(mbps_at(&log, 1200).1 < 2.5);
    }

    #[test]
    fn the_link_rate_follows_the_step_at_once() {
        let log = run(BwSource::LinkRate, 1200);
        let real = |mbps: f64| mbps * 1504.0 / 1500.0;
        assert!((mbps_at(&log, 0).0 - real(20.0)).abs() < 1e-6);
        assert!((mbps_at(&log, 999).0 - real(20.0)).abs() < 1e-6);
        let (bw, old) = mbps_at(&log, 1000);
        assert!((bw - real(2.0)).abs() < 1e-6, "{bw}");
        // Bw_old still remembers the rate before the drop.
        assert!((old - real(20.0)).abs() < 1e-6, "{old}");
        assert!((mbps_at(&log, 1200).1 - real(2.0)).abs() < 1e-6);
    }

    #[test]
    fn throughput_reads_zero_on_an_idle_link_and_capacity_does_not() {
        let thr = run(BwSource::Throughput, 300);
        assert!(thr.iter().filter_map(|(_, bw, _)| *bw).all(|b| b == DataRate::ZERO));
        let cap = run(BwSource::Capacity, 300);
        assert!(cap.iter().filter_map(|(_, bw, _)| *bw).all(|b| b.as_mbps_f64() > 19.0));
    }

    #[test]
    fn scale_multiplies_the_estimate() {
        let spec = crate::link::TraceSpec::parse_cli("constant:10").unwrap();
        let trace = Arc::new(crate::link::generate(&spec, TimeDelta::from_secs(1)).unwrap());
        let mut queue = crate::link::PacketQueue::default();
        let view = QueueView::for_test(&mut queue, Some(&trace), Timestamp::from_ms(500));
        let mut a = WindowedBandwidth::new(
            BwSource::Capacity,
            TimeDelta::from_ms(50),
            TimeDelta::ZERO,
            1.0,
        );
        let mut b = WindowedBandwidth::new(
            BwSource::Capacity,
            TimeDelta::from_ms(50),
            TimeDelta::ZERO,
            1.5,
        );
        let (ra, rb) = (a.update(&view).unwrap(), b.update(&view).unwrap());
        assert_eq!(rb, ra.scale(1.5));
    }
}
