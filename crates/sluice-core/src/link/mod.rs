//! One direction of a Mahimahi-style link, sans-IO: IID random loss (`mm-loss`), a bounded
//! queue (drop-tail by default, behind the [`QueueDiscipline`] seam), trace-driven
//! byte-level serialisation (`mm-link`) and a fixed propagation delay (`mm-delay`).
//!
//! Shape: push datagrams with [`Link::handle_datagram`], wake it at [`Link::poll_timeout`]
//! with [`Link::handle_timeout`], pull output with [`Link::poll_datagram`] and drops with
//! [`Link::poll_drop`]. The link never ticks through idle time: it catches up lazily over
//! the opportunities between two calls, jumping over idle gaps with a binary search.
//!
//! Serialisation (Mahimahi's `link_queue`): each opportunity serves [`MTU_BYTES`] bytes of
//! the queue head; several small packets can share one; a partly sent packet carries its
//! remaining bytes to the next opportunity; bytes not needed when the queue runs empty are
//! wasted. A packet arriving at `a` may only use opportunities at times `>= a` (including
//! what is left of an opportunity at exactly `a`). A packet completes (departs) at the
//! opportunity that sends its last byte and is delivered `delay` later.
//!
//! `now` passed to the `handle_*`/`poll_*` calls must not go backwards; an earlier `now` is
//! treated as the latest one seen.

pub mod bandwidth;
pub mod bottleneck;
pub mod codel;
pub mod faults;
pub mod flow_stats;
pub mod fq_codel;
pub mod frame_drop;
pub mod oracle;
pub mod queue_report;
pub mod trace;
pub mod trace_gen;

pub use trace::{Trace, TraceError, TraceErrorKind, MTU, MTU_BYTES};
pub use trace_gen::{generate, TraceSpec};

use crate::packet::Datagram;
use crate::rng::Rng;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use std::collections::VecDeque;
use std::sync::Arc;
use trace::OppCursor;

/// The serialisation rate of a link.
#[derive(Clone, Debug)]
pub enum LinkRate {
    /// No serialisation: packets only see loss and delay.
    Unlimited,
    /// Mahimahi delivery opportunities, looping.
    Trace(Arc<Trace>),
}

/// The queue limit (drop-tail). As in Mahimahi, the packet being serialised (partly sent)
/// has left the queue and does not count. Ignored with [`LinkRate::Unlimited`] (no queue
/// forms there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueLimit {
    /// No limit: every arrival is queued.
    Unlimited,
    /// At most this many bytes waiting (an arrival that would exceed it is dropped).
    Bytes(i64),
    /// At most this many packets waiting.
    Packets(usize),
}

/// One direction of a link: its rate, queue limit, delay and random loss.
#[derive(Clone, Debug)]
pub struct LinkConfig {
    /// The serialisation rate (default: unlimited).
    pub rate: LinkRate,
    /// The drop-tail limit (default: unlimited; a custom queue discipline ignores it).
    pub queue: QueueLimit,
    /// One-way propagation delay added after serialisation.
    pub delay: TimeDelta,
    /// IID loss probability applied to every arriving datagram, before the queue.
    pub loss_rate: f64,
}

impl Default for LinkConfig {
    /// An ideal link: unlimited rate and queue, no delay, no loss.
    fn default() -> Self {
        LinkConfig {
            rate: LinkRate::Unlimited,
            queue: QueueLimit::Unlimited,
            delay: TimeDelta::ZERO,
            loss_rate: 0.0,
        }
    }
}

/// Why a datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// IID random loss at entry (`loss_rate`).
    RandomLoss,
    /// The queue dropped it: its limit was reached (drop-tail), or an AQM (CoDel, FQ-CoDel)
    /// dropped it; both count as loss in the summary's `loss_rate`.
    QueueFull,
    /// Dropped by a queue policy (e.g. a bottleneck node that drops whole frames).
    Policy,
}

/// Counters since the link was created. Bytes are on-wire sizes ([`Datagram::size`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Datagrams that reached the link (before random loss).
    pub arrived_packets: u64,
    /// Bytes of those datagrams.
    pub arrived_bytes: i64,
    /// Datagrams lost at random ([`DropReason::RandomLoss`]).
    pub dropped_loss_packets: u64,
    /// Datagrams the queue dropped ([`DropReason::QueueFull`]: drop-tail, CoDel, FQ-CoDel).
    pub dropped_queue_packets: u64,
    /// Datagrams a queue policy dropped on purpose ([`DropReason::Policy`]).
    pub dropped_policy_packets: u64,
    /// Bytes of all dropped packets, whatever the reason.
    pub dropped_bytes: i64,
    /// Packets handed out by [`Link::poll_datagram`].
    pub delivered_packets: u64,
    /// Bytes of the datagrams delivered.
    pub delivered_bytes: i64,
}

impl LinkStats {
    /// Datagrams dropped for any reason.
    pub fn dropped_packets(&self) -> u64 {
        self.dropped_loss_packets + self.dropped_queue_packets + self.dropped_policy_packets
    }
}

/// A datagram waiting in (or being serialised out of) the queue.
#[derive(Debug)]
pub struct Queued {
    /// The waiting datagram.
    pub datagram: Datagram,
    /// When it arrived at the link (its sojourn time counts from here).
    pub arrival: Timestamp,
    /// Its on-wire size ([`Datagram::size`]), what it takes from the link's opportunities.
    pub size: DataSize,
}

/// The waiting packets: everything that has not started serialisation. The packet being
/// serialised is held by the link, not here.
#[derive(Debug, Default)]
pub struct PacketQueue {
    items: VecDeque<Queued>,
    bytes: DataSize,
}

impl PacketQueue {
    /// Packets waiting.
    pub fn len(&self) -> usize {
        self.items.len()
    }
    /// Whether no packet waits.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    /// Bytes waiting (on-wire sizes).
    pub fn bytes(&self) -> DataSize {
        self.bytes
    }
    /// Appends `item` at the tail.
    pub fn push_back(&mut self, item: Queued) {
        self.bytes += item.size;
        self.items.push_back(item);
    }
    /// Removes and returns the oldest waiting packet.
    pub fn pop_front(&mut self) -> Option<Queued> {
        let item = self.items.pop_front()?;
        self.bytes -= item.size;
        Some(item)
    }
    /// The oldest waiting packet.
    pub fn front(&self) -> Option<&Queued> {
        self.items.front()
    }
    /// The waiting packets, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Queued> {
        self.items.iter()
    }
    /// Removes and returns the oldest waiting packet for which `pred` is true (a scheduler
    /// that serves its flows in its own order, as FQ-CoDel; O(length)).
    pub fn remove_first(&mut self, mut pred: impl FnMut(&Queued) -> bool) -> Option<Queued> {
        let i = self.items.iter().position(&mut pred)?;
        let item = self.items.remove(i)?;
        self.bytes -= item.size;
        Some(item)
    }
    /// Removes the waiting packets for which `pred` is true, oldest first, appending them to
    /// `out` (for policies that drop queued packets, e.g. the rest of a frame).
    pub fn remove_where(&mut self, mut pred: impl FnMut(&Queued) -> bool, out: &mut Vec<Queued>) {
        let mut kept = VecDeque::with_capacity(self.items.len());
        for item in self.items.drain(..) {
            if pred(&item) {
                self.bytes -= item.size;
                out.push(item);
            } else {
                kept.push_back(item);
            }
        }
        self.items = kept;
    }
}

/// What a queue discipline sees of its link when it is called at `now`: the waiting packets
/// (it may remove any of them), the packet being serialised (started, so not removable), and
/// the link's service schedule up to `now` (never beyond: a policy that knew the trace's
/// future would be an oracle).
pub struct QueueView<'a> {
    /// The waiting packets; the discipline may remove any of them.
    pub queue: &'a mut PacketQueue,
    /// The packet being serialised and its bytes still to send.
    pub in_transit: Option<(&'a Datagram, DataSize)>,
    trace: Option<&'a Trace>,
    now: Timestamp,
}

impl QueueView<'_> {
    /// The time of the call.
    pub fn now(&self) -> Timestamp {
        self.now
    }
    /// Bytes the link could serve in `[t0, t1)`, with `t1` clamped to `now`; `None` for a
    /// link without a rate limit.
    pub fn capacity_between(&self, t0: Timestamp, t1: Timestamp) -> Option<DataSize> {
        self.trace.map(|t| t.capacity_between(t0, t1.min(self.now)))
    }
    /// Bytes the link will be able to serve in `[t0, t1)`, future included: the trace's
    /// capacity as an oracle knows it. Only the FDCC oracle (`link/oracle.rs`, Co-RTV
    /// §V-A Eq. 9) may call this; every other behaviour uses [`Self::capacity_between`].
    pub fn oracle_capacity_between(&self, t0: Timestamp, t1: Timestamp) -> Option<DataSize> {
        self.trace.map(|t| t.capacity_between(t0, t1))
    }
    /// The rate the link is set to now, as a TC emulation's node reads its own setting
    /// (Co-RTV §V-B: "we can obtain accurate bandwidth by directly reading the TC setting"):
    /// the trace's rate schedule at `now` if it has one (a generated trace or a rate
    /// series), else the trace's capacity over the `interval` containing `now` (aligned to
    /// multiples of it: a TC setting updated from a Mahimahi file every `interval`, which
    /// holds for the whole interval, so it reads up to `interval` ahead). `None` for a link
    /// without a rate limit.
    pub fn rate_setting(&self, interval: TimeDelta) -> Option<DataRate> {
        let trace = self.trace?;
        if let Some(rate) = trace.rate_setting_at(self.now) {
            return Some(rate);
        }
        let interval = interval.max(TimeDelta::from_ms(1));
        let start =
            Timestamp::from_us(self.now.as_us().div_euclid(interval.as_us()) * interval.as_us());
        Some(trace.capacity_between(start, start + interval) / interval)
    }
    /// A view of `queue` at `now` with nothing in transit (unit tests of disciplines).
    #[cfg(test)]
    pub(crate) fn for_test<'a>(
        queue: &'a mut PacketQueue,
        trace: Option<&'a Trace>,
        now: Timestamp,
    ) -> QueueView<'a> {
        QueueView { queue, in_transit: None, trace, now }
    }
    /// Bytes still to serialise: the queue and the rest of the packet in transit.
    pub fn backlog(&self) -> DataSize {
        self.queue.bytes() + self.in_transit.map_or(DataSize::ZERO, |(_, left)| left)
    }
}

/// What a queue discipline drops while it handles one event, each with its reason (the link
/// takes them out of the run and records them).
pub type Drops = Vec<(Queued, DropReason)>;

/// The seam for queue policies (drop-tail; a bottleneck node that drops frames and reports
/// to the sender, as Co-RTV's). A discipline decides about each arrival, may run timers,
/// hears each departure, and can send reports upstream on the link's report port.
pub trait QueueDiscipline: std::fmt::Debug + Send {
    /// Enqueue `item` into `view.queue`, or push it (and/or queued packets) onto `dropped`
    /// with a reason. Packets pushed onto `dropped` must not stay in the queue. Called for
    /// each arrival that survived random loss, after the link caught up to the arrival time.
    fn on_arrival(&mut self, view: &mut QueueView<'_>, item: Queued, dropped: &mut Drops);
    /// The packet to serialise next, taken out of `queue` at `now` (the time of the
    /// opportunity it starts at; every waiting packet arrived at or before it). A discipline
    /// that drops at dequeue (CoDel) pushes what it drops onto `dropped`; one that schedules
    /// flows (FQ-CoDel) may take any waiting packet. `None`: nothing to send (the queue is
    /// empty or the discipline dropped all of it). The default serves the head (FIFO).
    fn dequeue(
        &mut self,
        queue: &mut PacketQueue,
        _now: Timestamp,
        _dropped: &mut Drops,
    ) -> Option<Queued> {
        queue.pop_front()
    }
    /// A packet finished serialisation at `at` (in order).
    fn on_departure(&mut self, _datagram: &Datagram, _arrival: Timestamp, _at: Timestamp) {}
    /// Timer work; may remove queued packets onto `dropped`. A spurious call does nothing.
    fn handle_timeout(&mut self, _view: &mut QueueView<'_>, _dropped: &mut Drops) {}
    /// When `handle_timeout` next wants to run.
    fn poll_timeout(&self) -> Timestamp {
        Timestamp::INFINITY
    }
    /// The next report for the sender (sent on the link's report port at once; the path it
    /// takes adds its own delay).
    fn poll_report(&mut self) -> Option<Datagram> {
        None
    }
    /// Named state for the time series (`bn_*`).
    fn debug_columns(&self, _out: &mut crate::columns::Columns) {}
    /// The discipline as `Any`, for tests and scenarios that inspect a concrete one
    /// ([`Link::discipline_as`]); `None` by default.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// Drop-tail against a [`QueueLimit`].
#[derive(Debug, Clone, Copy)]
pub struct DropTail {
    /// The limit each arrival is checked against.
    pub limit: QueueLimit,
}

impl QueueDiscipline for DropTail {
    fn on_arrival(&mut self, view: &mut QueueView<'_>, item: Queued, dropped: &mut Drops) {
        let queue = &mut *view.queue;
        let fits = match self.limit {
            QueueLimit::Unlimited => true,
            QueueLimit::Bytes(b) => (queue.bytes() + item.size).as_bytes() <= b,
            QueueLimit::Packets(n) => queue.len() < n,
        };
        if fits {
            queue.push_back(item);
        } else {
            dropped.push((item, DropReason::QueueFull));
        }
    }
}

/// The packet being serialised.
#[derive(Debug)]
struct InTransit {
    item: Queued,
    remaining: DataSize,
}

/// One direction of a link (see the module documentation).
#[derive(Debug)]
pub struct Link {
    trace: Option<Arc<Trace>>,
    delay: TimeDelta,
    loss_rate: f64,
    rng: Rng,
    discipline: Box<dyn QueueDiscipline>,
    queue: PacketQueue,
    in_transit: Option<InTransit>,
    /// Next opportunity not yet started.
    next_opp: OppCursor,
    /// Time and unused bytes of the most recently started opportunity.
    cur_opp_time: Timestamp,
    cur_opp_left: DataSize,
    /// Completed packets with their delivery times (non-decreasing).
    in_flight: VecDeque<(Timestamp, Datagram)>,
    drops: VecDeque<(Datagram, DropReason)>,
    drop_log: bool,
    scratch: Drops,
    stats: LinkStats,
    /// Per-flow counters, when asked for ([`Link::enable_flow_stats`]).
    flow_stats: Option<flow_stats::FlowStatsTable>,
    last_queue_delay: TimeDelta,
    now: Timestamp,
}

impl Link {
    /// A link with drop-tail queueing at `config.queue`.
    pub fn new(config: LinkConfig, rng: Rng) -> Link {
        let discipline = Box::new(DropTail { limit: config.queue });
        Link::with_discipline(config, rng, discipline)
    }

    /// A link with a custom queue policy (`config.queue` is then ignored).
    pub fn with_discipline(
        config: LinkConfig,
        rng: Rng,
        discipline: Box<dyn QueueDiscipline>,
    ) -> Link {
        let trace = match config.rate {
            LinkRate::Unlimited => None,
            LinkRate::Trace(t) => Some(t),
        };
        Link {
            trace,
            delay: config.delay,
            loss_rate: config.loss_rate,
            rng,
            discipline,
            queue: PacketQueue::default(),
            in_transit: None,
            next_opp: OppCursor { lap: 0, index: 0 },
            cur_opp_time: Timestamp::ZERO,
            cur_opp_left: DataSize::ZERO,
            in_flight: VecDeque::new(),
            drops: VecDeque::new(),
            drop_log: true,
            scratch: Vec::new(),
            stats: LinkStats::default(),
            flow_stats: None,
            last_queue_delay: TimeDelta::ZERO,
            now: Timestamp::ZERO,
        }
    }

    /// Keep dropped datagrams for [`Link::poll_drop`] (on by default; turn off if nobody
    /// polls them, to save memory).
    pub fn set_drop_log(&mut self, enabled: bool) {
        self.drop_log = enabled;
        if !enabled {
            self.drops.clear();
        }
    }

    /// Keeps counters per flow (arrivals, drops, deliveries, queueing delays) from now on:
    /// a bottleneck that several flows share ([`Link::flow_stats`]).
    pub fn enable_flow_stats(&mut self) {
        self.flow_stats.get_or_insert_with(flow_stats::FlowStatsTable::default);
    }

    /// The per-flow counters, if enabled.
    pub fn flow_stats(&self) -> Option<&flow_stats::FlowStatsTable> {
        self.flow_stats.as_ref()
    }

    /// Changes the one-way delay for packets that leave the queue from now on (packets
    /// already on their way keep theirs; a shorter delay never reorders them). For scenarios
    /// that change conditions mid-run, such as libwebrtc's GoogCcScenario tests.
    pub fn set_delay(&mut self, delay: TimeDelta) {
        self.delay = delay.max(TimeDelta::ZERO);
    }

    /// Queues a datagram for delivery at `at`, never before the one ahead of it (FIFO).
    fn push_in_flight(&mut self, at: Timestamp, datagram: Datagram) {
        let at = self.in_flight.back().map_or(at, |(last, _)| at.max(*last));
        self.in_flight.push_back((at, datagram));
    }

    /// A datagram arrives at the link at `now`.
    pub fn handle_datagram(&mut self, datagram: Datagram, now: Timestamp) {
        let now = self.clamp_now(now);
        self.catch_up(now);
        let size = datagram.size();
        self.stats.arrived_packets += 1;
        self.stats.arrived_bytes += size.as_bytes();
        if let Some(f) = &mut self.flow_stats {
            f.on_arrival(datagram.flow(), size);
        }
        if self.rng.bernoulli(self.loss_rate) {
            self.record_drop(datagram, size, DropReason::RandomLoss);
            return;
        }
        let item = Queued { datagram, arrival: now, size };
        if self.trace.is_none() {
            // Unlimited rate: no queue, straight to the delay line.
            self.last_queue_delay = TimeDelta::ZERO;
            self.push_in_flight(now + self.delay, item.datagram);
            return;
        }
        self.run_discipline(now, |d, view, dropped| d.on_arrival(view, item, dropped));
        // Use what is left of an opportunity at exactly `now` right away.
        self.catch_up(now);
    }

    /// Gives the queue discipline its view of the queue at `now`, then records what it
    /// dropped.
    fn run_discipline(
        &mut self,
        now: Timestamp,
        f: impl FnOnce(&mut dyn QueueDiscipline, &mut QueueView, &mut Drops),
    ) {
        let mut dropped = std::mem::take(&mut self.scratch);
        let mut view = QueueView {
            queue: &mut self.queue,
            in_transit: self.in_transit.as_ref().map(|t| (&t.item.datagram, t.remaining)),
            trace: self.trace.as_deref(),
            now,
        };
        f(self.discipline.as_mut(), &mut view, &mut dropped);
        self.record_drops(&mut dropped);
        self.scratch = dropped;
    }

    /// Processes the opportunities due at or before `now`, then the queue discipline's
    /// timers. A spurious call does nothing.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        let now = self.clamp_now(now);
        self.catch_up(now);
        if self.discipline.poll_timeout() <= now {
            self.run_discipline(now, |d, view, dropped| d.handle_timeout(view, dropped));
            self.catch_up(now);
        }
    }

    /// The next report of the queue discipline for the sender (the link's report port).
    pub fn poll_report(&mut self) -> Option<Datagram> {
        self.discipline.poll_report()
    }

    /// The queue discipline as its concrete type, if it is one and lets itself be seen
    /// ([`QueueDiscipline::as_any`]).
    pub fn discipline_as<T: std::any::Any>(&self) -> Option<&T> {
        self.discipline.as_any()?.downcast_ref()
    }

    /// The queue discipline's named state.
    pub fn debug_columns(&self, out: &mut crate::columns::Columns) {
        self.discipline.debug_columns(out);
    }

    fn record_drops(&mut self, dropped: &mut Drops) {
        for (q, reason) in dropped.drain(..) {
            self.record_drop(q.datagram, q.size, reason);
        }
    }

    /// The next datagram whose delivery time is at or before `now`, in order. Changes after
    /// [`Link::handle_datagram`] and [`Link::handle_timeout`] (it also catches up itself).
    pub fn poll_datagram(&mut self, now: Timestamp) -> Option<Datagram> {
        let now = self.clamp_now(now);
        self.catch_up(now);
        if self.in_flight.front()?.0 > now {
            return None;
        }
        let (_, d) = self.in_flight.pop_front()?;
        self.stats.delivered_packets += 1;
        self.stats.delivered_bytes += d.size().as_bytes();
        if let Some(f) = &mut self.flow_stats {
            f.on_delivery(d.flow(), d.size());
        }
        Some(d)
    }

    /// The next dropped datagram and why (if the drop log is on).
    pub fn poll_drop(&mut self) -> Option<(Datagram, DropReason)> {
        self.drops.pop_front()
    }

    /// When the link next needs [`Link::handle_timeout`] or has a datagram for
    /// [`Link::poll_datagram`]: the earliest of the next usable opportunity (if a packet is
    /// waiting) and the next delivery; [`Timestamp::INFINITY`] when idle.
    pub fn poll_timeout(&self) -> Timestamp {
        let delivery = self.in_flight.front().map_or(Timestamp::INFINITY, |(t, _)| *t);
        let own = delivery.min(self.discipline.poll_timeout());
        let head_arrival = match (&self.in_transit, self.queue.front()) {
            (Some(t), _) => t.item.arrival,
            (None, Some(q)) => q.arrival,
            (None, None) => return own,
        };
        own.min(self.next_usable_opportunity(head_arrival))
    }

    /// Counters since the link was created.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }
    /// Bytes waiting in the queue (not counting the packet being serialised).
    pub fn queue_bytes(&self) -> DataSize {
        self.queue.bytes()
    }
    /// Packets waiting in the queue (not counting the packet being serialised).
    pub fn queue_packets(&self) -> usize {
        self.queue.len()
    }
    /// Bytes still to serialise: the queue plus the rest of the packet being serialised.
    pub fn backlog_bytes(&self) -> DataSize {
        self.queue.bytes() + self.in_transit.as_ref().map_or(DataSize::ZERO, |t| t.remaining)
    }
    /// Packets inside the link: waiting, being serialised, or propagating (completed but not
    /// yet delivered). `arrived = delivered + dropped + packets_inside` at all times.
    pub fn packets_inside(&self) -> usize {
        self.queue.len() + usize::from(self.in_transit.is_some()) + self.in_flight.len()
    }
    /// Arrival-to-departure time (queueing + serialisation, without the propagation delay) of
    /// the last packet to leave the queue; zero before any.
    pub fn last_queue_delay(&self) -> TimeDelta {
        self.last_queue_delay
    }

    fn clamp_now(&mut self, now: Timestamp) -> Timestamp {
        if now > self.now {
            self.now = now;
        }
        self.now
    }

    fn record_drop(&mut self, datagram: Datagram, size: DataSize, reason: DropReason) {
        match reason {
            DropReason::RandomLoss => self.stats.dropped_loss_packets += 1,
            DropReason::QueueFull => self.stats.dropped_queue_packets += 1,
            DropReason::Policy => self.stats.dropped_policy_packets += 1,
        }
        self.stats.dropped_bytes += size.as_bytes();
        if let Some(f) = &mut self.flow_stats {
            f.on_drop(datagram.flow(), size);
        }
        if self.drop_log {
            self.drops.push_back((datagram, reason));
        }
    }

    /// The time of the first opportunity a head packet that arrived at `arrival` can use.
    fn next_usable_opportunity(&self, arrival: Timestamp) -> Timestamp {
        match &self.trace {
            Some(trace) => self.next_usable_in(trace, arrival),
            None => arrival,
        }
    }

    fn next_usable_in(&self, trace: &Trace, arrival: Timestamp) -> Timestamp {
        if self.cur_opp_left > DataSize::ZERO && self.cur_opp_time >= arrival {
            return self.cur_opp_time;
        }
        let next = trace.time_of(self.next_opp);
        if next >= arrival {
            next
        } else {
            trace.time_of(trace.seek(arrival))
        }
    }

    /// Serialises with the opportunities at or before `now`. O(1) per opportunity used and
    /// per packet completed; an idle gap costs one binary search.
    fn catch_up(&mut self, now: Timestamp) {
        // The trace is moved out for the loop and back after it (cloning the Arc here cost
        // two atomic operations per call, a tenth of the simulator's time).
        let Some(trace) = self.trace.take() else {
            return;
        };
        self.serialize(&trace, now);
        self.trace = Some(trace);
    }

    fn serialize(&mut self, trace: &Trace, now: Timestamp) {
        loop {
            if self.in_transit.is_none() {
                let Some(head) = self.queue.front() else {
                    return;
                };
                // Only start the head if an opportunity it may use is due.
                let start = self.next_usable_in(trace, head.arrival);
                if start > now {
                    return;
                }
                // The discipline picks the packet (the head for FIFO ones; every waiting
                // packet arrived by `start`) and may drop at dequeue (CoDel).
                let mut dropped = std::mem::take(&mut self.scratch);
                let item = self.discipline.dequeue(&mut self.queue, start, &mut dropped);
                self.record_drops(&mut dropped);
                self.scratch = dropped;
                let Some(item) = item else {
                    continue;
                };
                let remaining = item.size;
                self.in_transit = Some(InTransit { item, remaining });
            }
            // Invariant: set just above if it was None.
            let transit = self.in_transit.as_mut().expect("a packet is in transit");
            if self.cur_opp_left <= DataSize::ZERO || self.cur_opp_time < transit.item.arrival {
                // Start the next opportunity the packet may use.
                let mut cursor = self.next_opp;
                if trace.time_of(cursor) < transit.item.arrival {
                    cursor = trace.seek(transit.item.arrival);
                }
                let t = trace.time_of(cursor);
                if t > now {
                    self.next_opp = cursor;
                    return;
                }
                self.cur_opp_time = t;
                self.cur_opp_left = MTU;
                trace.advance(&mut cursor);
                self.next_opp = cursor;
            }
            let take = self.cur_opp_left.min(transit.remaining);
            self.cur_opp_left -= take;
            transit.remaining -= take;
            if transit.remaining <= DataSize::ZERO {
                // Invariant: in_transit is Some (borrowed as `transit` above).
                let done = self.in_transit.take().expect("in transit");
                self.last_queue_delay = self.cur_opp_time - done.item.arrival;
                if let Some(f) = &mut self.flow_stats {
                    f.on_departure(done.item.datagram.flow(), self.last_queue_delay);
                }
                self.discipline.on_departure(
                    &done.item.datagram,
                    done.item.arrival,
                    self.cur_opp_time,
                );
                self.push_in_flight(self.cur_opp_time + self.delay, done.item.datagram);
            }
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod aqm_tests;
