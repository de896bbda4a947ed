//! A bottleneck that reports: drop-tail plus a periodic [`BottleneckReport`] of its backlog
//! and of a capacity measured over a window, sent to the sender over the bottleneck's own
//! path. [`BottleneckConfig::QueueReport`](super::bottleneck::BottleneckConfig) reports the
//! capacity served over the last window; FDCC's oracle (`link/oracle.rs`) the capacity of the
//! next one.

use super::{DropTail, Drops, QueueDiscipline, QueueLimit, QueueView, Queued};
use crate::columns::Columns;
use crate::packet::{BottleneckReport, Datagram, Feedback, FlowId};
use crate::units::{DataSize, TimeDelta, Timestamp};
use std::collections::VecDeque;

/// How a [`QueueReporter`] measures the capacity it reports: the bytes the link can serve in
/// a window of the given length at `now` (`None` if the view cannot say).
pub(super) type CapacityFn = fn(&QueueView<'_>, Timestamp, TimeDelta) -> Option<DataSize>;

/// The capacity the link offered over the last `window` (what the bottleneck has seen).
pub(super) fn served_capacity(
    view: &QueueView<'_>,
    now: Timestamp,
    window: TimeDelta,
) -> Option<DataSize> {
    view.capacity_between(now - window, now)
}

/// Drop-tail plus a periodic [`BottleneckReport`] of the backlog and a capacity over a window:
/// the last one ([`super::bottleneck::BottleneckConfig::QueueReport`]) or, for FDCC's oracle, the next one
/// (`link/oracle.rs`, the only reader of the trace's future).
#[derive(Debug)]
pub struct QueueReporter {
    queue: DropTail,
    flow: FlowId,
    interval: TimeDelta,
    window: TimeDelta,
    capacity: CapacityFn,
    next: Timestamp,
    seq: u64,
    outbox: VecDeque<Datagram>,
    last: Option<BottleneckReport>,
}

impl QueueReporter {
    pub(super) fn new(
        limit: QueueLimit,
        flow: FlowId,
        interval: TimeDelta,
        window: TimeDelta,
        capacity: CapacityFn,
    ) -> Self {
        QueueReporter {
            queue: DropTail { limit },
            flow,
            interval,
            window,
            capacity,
            next: Timestamp::ZERO + interval,
            seq: 0,
            outbox: VecDeque::new(),
            last: None,
        }
    }
}

impl QueueDiscipline for QueueReporter {
    fn on_arrival(&mut self, view: &mut QueueView<'_>, item: Queued, dropped: &mut Drops) {
        self.queue.on_arrival(view, item, dropped);
    }

    fn handle_timeout(&mut self, view: &mut QueueView<'_>, _: &mut Drops) {
        let now = view.now();
        if now < self.next {
            return;
        }
        while self.next <= now {
            self.next += self.interval;
        }
        let rate = (self.capacity)(view, now, self.window)
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
