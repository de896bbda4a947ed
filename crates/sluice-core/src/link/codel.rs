//! CoDel, Controlled Delay active queue management (RFC 8289), as a [`QueueDiscipline`]:
//! packets are timestamped on arrival (the queue's `arrival`) and CoDel decides at dequeue
//! from their sojourn time. When the sojourn time has stayed above `target` for at least
//! `interval`, it enters the dropping state and drops at times following the control law
//! `interval / sqrt(count)` until the sojourn time falls below `target` again.
//!
//! [`CodelState`] is the per-queue state machine of RFC 8289 §5 (the pseudocode's
//! `dodequeue` and `dequeue`), shared with FQ-CoDel (`fq_codel.rs`), which runs one per flow.
//! The hard limit on arrival is the path's queue limit (drop-tail beyond it), as Linux's
//! `limit`.

use super::{
    DropReason, DropTail, Drops, PacketQueue, QueueDiscipline, QueueLimit, QueueView, Queued,
};
use crate::columns::Columns;
use crate::packet::{Datagram, Ecn};
use crate::units::{DataSize, TimeDelta, Timestamp};

/// CoDel's parameters (RFC 8289 §4.2-4.4 and its pseudocode's constants).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CodelConfig {
    /// Acceptable standing queue delay (RFC 8289 §4.4: 5 ms).
    pub target: TimeDelta,
    /// The sliding window a standing queue must persist over before drops start, about a
    /// worst-case RTT (RFC 8289 §4.3: 100 ms).
    pub interval: TimeDelta,
    /// A queue holding at most this many bytes is never dropped from (the pseudocode's
    /// `maxpacket`: one MTU).
    pub max_packet: DataSize,
    /// Mark ECN-capable packets CE instead of dropping them (RFC 8289 §5.6's note, RFC 8290
    /// §5.2.7; Linux's `ecn`). Off by default, as the path's `ecn` setting.
    pub ecn: bool,
}

impl Default for CodelConfig {
    fn default() -> Self {
        CodelConfig {
            target: TimeDelta::from_ms(5),
            interval: TimeDelta::from_ms(100),
            max_packet: super::MTU,
            ecn: false,
        }
    }
}

/// The state of one CoDel queue (RFC 8289 §5.4-5.6).
#[derive(Clone, Debug, Default)]
pub struct CodelState {
    /// When the sojourn time went above target plus an interval (`None`: below target).
    first_above_time: Option<Timestamp>,
    /// The next drop in the dropping state.
    drop_next: Timestamp,
    /// Drops in the current dropping state (the control law's count).
    count: u32,
    /// `count` at the start of the last dropping state.
    last_count: u32,
    dropping: bool,
    /// Drops since the start (for the time series and tests).
    pub drops: u64,
    /// Packets marked CE instead of dropped.
    pub marks: u64,
}

impl CodelState {
    /// RFC 8289 §5.5 `control_law`: `t + interval / sqrt(count)`.
    fn control_law(cfg: &CodelConfig, t: Timestamp, count: u32) -> Timestamp {
        t + cfg.interval * (1.0 / f64::from(count.max(1)).sqrt())
    }

    /// RFC 8289 §5.4 `dodequeue`: the next packet from `pop` and whether it may be dropped.
    /// `pop` returns a packet and the bytes left in its queue after it.
    fn do_dequeue(
        &mut self,
        cfg: &CodelConfig,
        now: Timestamp,
        pop: &mut impl FnMut() -> Option<(Queued, DataSize)>,
    ) -> (Option<Queued>, bool) {
        let Some((item, left)) = pop() else {
            self.first_above_time = None;
            return (None, false);
        };
        let sojourn = now - item.arrival;
        let mut ok_to_drop = false;
        if sojourn < cfg.target || left <= cfg.max_packet {
            // Below target, or too few bytes left to keep a standing queue.
            self.first_above_time = None;
        } else {
            match self.first_above_time {
                None => self.first_above_time = Some(now + cfg.interval),
                Some(t) if now >= t => ok_to_drop = true,
                Some(_) => {}
            }
        }
        (Some(item), ok_to_drop)
    }

    /// RFC 8289 §5.6 `dequeue`: the packet to send at `now`, after the drops CoDel makes
    /// (pushed onto `dropped`).
    pub fn dequeue(
        &mut self,
        cfg: &CodelConfig,
        now: Timestamp,
        mut pop: impl FnMut() -> Option<(Queued, DataSize)>,
        dropped: &mut Drops,
    ) -> Option<Queued> {
        let (mut item, ok_to_drop) = self.do_dequeue(cfg, now, &mut pop);
        if item.is_none() {
            self.dropping = false;
            return None;
        }
        if self.dropping {
            if !ok_to_drop {
                // Sojourn time below target: leave the dropping state.
                self.dropping = false;
            }
            while self.dropping && now >= self.drop_next {
                self.count += 1;
                if cfg.ecn {
                    if let Some(it) = item.as_mut().filter(|it| ect(it)) {
                        // Marked instead of dropped: it goes out, the schedule goes on.
                        mark_ce(it);
                        self.marks += 1;
                        self.drop_next = Self::control_law(cfg, self.drop_next, self.count);
                        return item;
                    }
                }
                if let Some(it) = item.take() {
                    dropped.push((it, DropReason::QueueFull));
                    self.drops += 1;
                }
                let (next, ok) = self.do_dequeue(cfg, now, &mut pop);
                item = next;
                if !ok {
                    self.dropping = false;
                } else {
                    self.drop_next = Self::control_law(cfg, self.drop_next, self.count);
                }
            }
        } else if ok_to_drop {
            match item.as_mut() {
                Some(it) if cfg.ecn && ect(it) => {
                    mark_ce(it);
                    self.marks += 1;
                }
                _ => {
                    if let Some(it) = item.take() {
                        dropped.push((it, DropReason::QueueFull));
                        self.drops += 1;
                    }
                    let (next, _) = self.do_dequeue(cfg, now, &mut pop);
                    item = next;
                }
            }
            self.dropping = true;
            // Start from the count of the last dropping state if it ended recently (the drop
            // rate that controlled the queue then is likely about right now).
            let delta = self.count.saturating_sub(self.last_count);
            self.count =
                if delta > 1 && now - self.drop_next < cfg.interval * 16 { delta } else { 1 };
            self.drop_next = Self::control_law(cfg, now, self.count);
            self.last_count = self.count;
        }
        item
    }

    /// Whether CoDel is in its dropping state (RFC 8289's `dropping`).
    pub fn is_dropping(&self) -> bool {
        self.dropping
    }
}

/// Whether a queued packet is ECN-capable (ECT or already CE).
fn ect(it: &Queued) -> bool {
    matches!(&it.datagram, Datagram::Media(p) if p.ecn != Ecn::NotEct)
}

fn mark_ce(it: &mut Queued) {
    if let Datagram::Media(p) = &mut it.datagram {
        p.ecn = Ecn::Ce;
    }
}

/// CoDel on one FIFO queue, with drop-tail at the path's limit on arrival.
#[derive(Debug)]
pub struct Codel {
    config: CodelConfig,
    limit: DropTail,
    state: CodelState,
}

impl Codel {
    /// CoDel with `config`, behind drop-tail at `limit` on arrival.
    pub fn new(config: CodelConfig, limit: QueueLimit) -> Codel {
        Codel { config, limit: DropTail { limit }, state: CodelState::default() }
    }
    /// Packets CoDel dropped (not counting drop-tail at the limit).
    pub fn drops(&self) -> u64 {
        self.state.drops
    }
    /// Packets CoDel marked CE instead.
    pub fn marks(&self) -> u64 {
        self.state.marks
    }
}

impl QueueDiscipline for Codel {
    fn on_arrival(&mut self, view: &mut QueueView<'_>, item: Queued, dropped: &mut Drops) {
        self.limit.on_arrival(view, item, dropped);
    }

    fn dequeue(
        &mut self,
        queue: &mut PacketQueue,
        now: Timestamp,
        dropped: &mut Drops,
    ) -> Option<Queued> {
        let pop = || queue.pop_front().map(|it| (it, queue.bytes()));
        self.state.dequeue(&self.config, now, pop, dropped)
    }

    fn debug_columns(&self, out: &mut Columns) {
        out.int("bn_codel_drops", Some(self.state.drops as i64));
        if self.config.ecn {
            out.int("bn_codel_marks", Some(self.state.marks as i64));
        }
        out.bool("bn_codel_dropping", self.state.dropping);
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
