//! FDCC's oracle bottleneck (Co-RTV §II-C, §V-A, Eq. 9): drop-tail, and every report
//! period a report to the sender of the queue length and the *actual future* bandwidth of
//! the trace ("the RTV sender is fed with the actual future bandwidth in traces from the BN";
//! "feeding precise bandwidth Bw and queue length QLen to the sender"). The sender's FDCC
//! controller (`cc/fdcc.rs`) sets `Rate = Bw - QLen / tau` from it.
//!
//! **This is the only module allowed to read the trace's future** (through
//! [`QueueView::oracle_capacity_between`]); every other bottleneck behaviour sees the
//! service schedule up to now only. FDCC is an upper bound for what a congestion controller
//! could do with a perfect estimate, and it still pays the report's trip to the sender and
//! the sender's packets' trip back before a change takes effect (§II-C).
//!
//! Choices the paper leaves open (brief A13): `Bw` is the trace's capacity over the next
//! `lookahead_ms` (50 ms: the window Co-RTV's own estimate averages over, looking forward
//! instead of back; a shorter window reads Mahimahi's 1504-byte opportunities too coarsely,
//! +-25 % over 20 ms at 2 Mbps); the period is `RTT_BN` (Co-RTV's feedback period), or
//! `interval_ms`; the report travels the same bottleneck-sender path as Co-RTV's.

use super::queue_report::QueueReporter;
use super::{QueueLimit, QueueView};
use crate::packet::FlowId;
use crate::units::{DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};

/// Parameters of the FDCC oracle's reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FdccReportConfig {
    /// Report period (`None`: `RTT_BN`, the path's round trip to the sender, at least 1 ms).
    pub interval_ms: Option<f64>,
    /// The reported `Bw` is the trace's capacity over `[now, now + lookahead_ms)`.
    pub lookahead_ms: f64,
}

impl Default for FdccReportConfig {
    fn default() -> Self {
        FdccReportConfig { interval_ms: None, lookahead_ms: 50.0 }
    }
}

impl FdccReportConfig {
    /// A configuration mistake, if any.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(v) = self.interval_ms {
            if !(v.is_finite() && (1.0..=60_000.0).contains(&v)) {
                return Err(format!("bottleneck.interval_ms must be in [1, 60000], got {v}"));
            }
        }
        let v = self.lookahead_ms;
        if !(v.is_finite() && (1.0..=60_000.0).contains(&v)) {
            return Err(format!("bottleneck.lookahead_ms must be in [1, 60000], got {v}"));
        }
        Ok(())
    }

    /// The discipline for a queue limit and a flow whose sender is `path_rtt` away (round
    /// trip).
    pub fn build(&self, limit: QueueLimit, flow: FlowId, path_rtt: TimeDelta) -> QueueReporter {
        let interval =
            self.interval_ms.map_or(path_rtt, TimeDelta::from_ms_f64).max(TimeDelta::from_ms(1));
        let lookahead = TimeDelta::from_ms_f64(self.lookahead_ms);
        QueueReporter::new(limit, flow, interval, lookahead, capacity_ahead)
    }
}

/// The trace's capacity over the next `window`: the oracle's `Bw`, the one read of the future.
fn capacity_ahead(view: &QueueView<'_>, now: Timestamp, window: TimeDelta) -> Option<DataSize> {
    view.oracle_capacity_between(now, now + window)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{Link, LinkConfig, LinkRate};
    use crate::packet::{Datagram, Feedback};
    use crate::rng::Rng;
    use std::sync::Arc;

    #[test]
    fn reports_the_capacity_ahead_every_period() {
        // 20 Mbps until 1 s, then 2 Mbps: the report at 0.96 s already sees the drop in
        // [0.96, 1.01), the one at 1.0 s reads 2 Mbps; one report every 40 ms.
        let spec = crate::link::TraceSpec::parse_cli("steps:20@1,2@2").unwrap();
        let trace = Arc::new(crate::link::generate(&spec, TimeDelta::from_secs(3)).unwrap());
        let cfg = FdccReportConfig::default();
        let mut link = Link::with_discipline(
            LinkConfig { rate: LinkRate::Trace(trace), ..LinkConfig::default() },
            Rng::new(1),
            Box::new(cfg.build(QueueLimit::Unlimited, 0, TimeDelta::from_ms(40))),
        );
        let mut now = Timestamp::ZERO;
        let mut reports = Vec::new();
        while now <= Timestamp::from_ms(1100) {
            link.handle_timeout(now);
            while let Some(Datagram::Feedback(Feedback::Bottleneck(r))) = link.poll_report() {
                reports.push(r);
            }
            now = link.poll_timeout();
        }
        assert_eq!(reports.len(), 27);
        for (k, r) in reports.iter().enumerate() {
            assert_eq!(r.time, Timestamp::from_ms(40 * (k as i64 + 1)));
            assert_eq!(r.queue, crate::units::DataSize::ZERO);
            let mbps = r.rate.unwrap().as_mbps_f64();
            let t = r.time.as_ms();
            let expected = if t + 50 <= 1000 {
                20.05
            } else if t >= 1000 {
                2.0
            } else {
                (20.05 * (1000 - t) as f64 + 2.0 * (t + 50 - 1000) as f64) / 50.0
            };
            assert!((mbps - expected).abs() < 0.6, "{t} ms: {mbps} vs {expected}");
        }
        let at_960 = reports.iter().find(|r| r.time == Timestamp::from_ms(960)).unwrap();
        assert!(at_960.rate.unwrap().as_mbps_f64() < 18.0, "the oracle sees the drop ahead");
    }
}
