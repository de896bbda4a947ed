//! Bottleneck behaviours: what the queue at the bottleneck link does besides serving
//! packets. The plain one is Mahimahi's drop-tail; others run timers, look at the service so
//! far, remove packets and report to the sender over the bottleneck's own path (the link's
//! report port), through the [`QueueDiscipline`] seam.

use super::{DropReason, DropTail, QueueDiscipline, QueueLimit, QueueView, Queued};
use crate::columns::Columns;
use crate::packet::{BottleneckReport, Datagram, Feedback, FlowId};
use crate::units::{TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The bottleneck's behaviour, part of a scheme.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum BottleneckConfig {
    /// Drop-tail at the path's queue limit (Mahimahi).
    #[default]
    DropTail,
    /// Drop-tail that reports its queue and its capacity over a recent window to the sender,
    /// periodically: the in-band report of the IETF SCONE draft (capacity and queue length,
    /// e.g. every 100 ms) and the periodic part of Co-RTV's feedback (§III-B5).
    QueueReport {
        /// Report period (SCONE draft's example: 100 ms).
        #[serde(default = "default_report_interval_ms")]
        interval_ms: f64,
        /// The capacity reported is the link's over this last window (Co-RTV §III-B3's w:
        /// 50 ms).
        #[serde(default = "default_rate_window_ms")]
        rate_window_ms: f64,
    },
}

fn default_report_interval_ms() -> f64 {
    100.0
}
fn default_rate_window_ms() -> f64 {
    50.0
}

impl BottleneckConfig {
    /// The queue discipline for a bottleneck with queue limit `limit` serving `flow`.
    pub fn build(&self, limit: QueueLimit, flow: FlowId) -> Box<dyn QueueDiscipline> {
        match self {
            BottleneckConfig::DropTail => Box::new(DropTail { limit }),
            BottleneckConfig::QueueReport { interval_ms, rate_window_ms } => {
                Box::new(QueueReporter {
                    queue: DropTail { limit },
                    flow,
                    interval: TimeDelta::from_ms_f64(*interval_ms),
                    window: TimeDelta::from_ms_f64(*rate_window_ms),
                    next: Timestamp::ZERO + TimeDelta::from_ms_f64(*interval_ms),
                    seq: 0,
                    outbox: VecDeque::new(),
                    last: None,
                })
            }
        }
    }

    /// Whether the bottleneck sends anything to the sender.
    pub fn reports(&self) -> bool {
        !matches!(self, BottleneckConfig::DropTail)
    }

    /// A configuration mistake, if any.
    pub fn validate(&self) -> Result<(), String> {
        if let BottleneckConfig::QueueReport { interval_ms, rate_window_ms } = self {
            for (name, v) in [("interval_ms", interval_ms), ("rate_window_ms", rate_window_ms)] {
                if !(v.is_finite() && *v >= 1.0 && *v <= 60_000.0) {
                    return Err(format!("bottleneck.{name} must be in [1, 60000], got {v}"));
                }
            }
        }
        Ok(())
    }
}

/// Drop-tail plus a periodic [`BottleneckReport`] of the backlog and the capacity of the last
/// window.
#[derive(Debug)]
struct QueueReporter {
    queue: DropTail,
    flow: FlowId,
    interval: TimeDelta,
    window: TimeDelta,
    next: Timestamp,
    seq: u64,
    outbox: VecDeque<Datagram>,
    last: Option<BottleneckReport>,
}

impl QueueDiscipline for QueueReporter {
    fn on_arrival(
        &mut self,
        view: &mut QueueView<'_>,
        item: Queued,
        dropped: &mut Vec<(Queued, DropReason)>,
    ) {
        self.queue.on_arrival(view, item, dropped);
    }

    fn handle_timeout(&mut self, view: &mut QueueView<'_>, _: &mut Vec<(Queued, DropReason)>) {
        let now = view.now();
        if now < self.next {
            return;
        }
        while self.next <= now {
            self.next += self.interval;
        }
        let rate = view
            .capacity_between(now - self.window, now)
            .map(|bytes| bytes / self.window.max(TimeDelta::from_us(1)));
        let report = BottleneckReport {
            flow: self.flow,
            seq: self.seq,
            time: now,
            queue: view.backlog(),
            rate,
            drop_from: None,
        };
        self.seq += 1;
        self.last = Some(report.clone());
        self.outbox.push_back(Datagram::Feedback(Feedback::Bottleneck(report)));
    }

    fn poll_timeout(&self) -> Timestamp {
        self.next
    }

    fn poll_report(&mut self) -> Option<Datagram> {
        self.outbox.pop_front()
    }

    fn debug_columns(&self, out: &mut Columns) {
        out.size("bn_reported_queue_bytes", self.last.as_ref().map(|r| r.queue));
        out.rate("bn_reported_rate_bps", self.last.as_ref().and_then(|r| r.rate));
    }
}
