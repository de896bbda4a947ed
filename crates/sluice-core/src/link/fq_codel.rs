//! FQ-CoDel, the Flow Queue CoDel packet scheduler and AQM (RFC 8290), as a
//! [`QueueDiscipline`]: one queue per flow, served by deficit round robin with a quantum of
//! one MTU, new flows (those that just became active) before old ones (§4.2), each queue
//! managed by its own CoDel state (`codel.rs`, §4.3), and on overflow a drop from the head
//! of the queue holding the most bytes (§4.1).
//!
//! The simulator knows its flows, so flow ids map to queues one to one instead of through
//! RFC 8290's hash of the 5-tuple into 1024 buckets (no collisions). All packets stay in
//! the link's one [`PacketQueue`] (so its byte count and backlog mean the same as under
//! drop-tail); the scheduler takes the oldest packet of the flow it serves (O(queue length)).

use super::codel::{CodelConfig, CodelState};
use super::{DropReason, Drops, PacketQueue, QueueDiscipline, QueueLimit, QueueView, Queued};
use crate::columns::Columns;
use crate::packet::FlowId;
use crate::units::{DataSize, Timestamp};
use std::collections::{BTreeMap, VecDeque};

/// FQ-CoDel's parameters (RFC 8290 §4 and §5.2, Linux's defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FqCodelConfig {
    /// Bytes a queue may send per round (§4.2: one MTU, 1514 bytes in Linux).
    pub quantum: DataSize,
    /// Each queue's CoDel (§5.2: target 5 ms, interval 100 ms).
    pub codel: CodelConfig,
    /// The total limit when the path sets none (§5.2.3: 10240 packets).
    pub default_limit_packets: usize,
}

impl Default for FqCodelConfig {
    fn default() -> Self {
        FqCodelConfig {
            quantum: DataSize::from_bytes(1514),
            codel: CodelConfig::default(),
            default_limit_packets: 10_240,
        }
    }
}

/// One flow's queue state.
#[derive(Clone, Debug, Default)]
struct FlowQueue {
    deficit: i64,
    codel: CodelState,
    bytes: DataSize,
    packets: usize,
    /// On the new or the old list (§4.2).
    listed: bool,
}

/// FQ-CoDel (see the module documentation).
#[derive(Debug)]
pub struct FqCodel {
    config: FqCodelConfig,
    limit: QueueLimit,
    flows: BTreeMap<FlowId, FlowQueue>,
    new_flows: VecDeque<FlowId>,
    old_flows: VecDeque<FlowId>,
    /// Packets dropped on overflow (from the fattest queue); CoDel's drops are counted per flow.
    overflow_drops: u64,
}

impl FqCodel {
    /// FQ-CoDel with `config`, bounded by `limit` (unlimited: `config.default_limit_packets`).
    pub fn new(config: FqCodelConfig, limit: QueueLimit) -> FqCodel {
        let limit = match limit {
            QueueLimit::Unlimited => QueueLimit::Packets(config.default_limit_packets),
            l => l,
        };
        FqCodel {
            config,
            limit,
            flows: BTreeMap::new(),
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            overflow_drops: 0,
        }
    }

    fn over_limit(&self, queue: &PacketQueue) -> bool {
        match self.limit {
            QueueLimit::Unlimited => false,
            QueueLimit::Bytes(b) => queue.bytes().as_bytes() > b,
            QueueLimit::Packets(n) => queue.len() > n,
        }
    }

    /// Packets dropped from the fattest queue on overflow.
    pub fn overflow_drops(&self) -> u64 {
        self.overflow_drops
    }

    fn take_head(queue: &mut PacketQueue, fq: &mut FlowQueue, flow: FlowId) -> Option<Queued> {
        let item = queue.remove_first(|q| q.datagram.flow() == flow)?;
        fq.bytes -= item.size;
        fq.packets -= 1;
        Some(item)
    }
}

impl QueueDiscipline for FqCodel {
    /// RFC 8290 §4.1: classify, timestamp (the queue's `arrival`), enqueue; a queue that was
    /// not active joins the new list with a full quantum; over the limit, drop from the head
    /// of the queue with the most bytes.
    fn on_arrival(&mut self, view: &mut QueueView<'_>, item: Queued, dropped: &mut Drops) {
        let flow = item.datagram.flow();
        let quantum = self.config.quantum.as_bytes();
        let fq = self.flows.entry(flow).or_default();
        fq.bytes += item.size;
        fq.packets += 1;
        if !fq.listed {
            fq.listed = true;
            fq.deficit = quantum;
            self.new_flows.push_back(flow);
        }
        view.queue.push_back(item);
        while self.over_limit(view.queue) {
            // Invariant: over the limit means some queue holds a packet.
            let Some((&fattest, _)) =
                self.flows.iter().filter(|(_, q)| q.packets > 0).max_by_key(|(_, q)| q.bytes)
            else {
                break;
            };
            let fq = self.flows.get_mut(&fattest).expect("the fattest flow exists");
            match Self::take_head(view.queue, fq, fattest) {
                Some(it) => {
                    self.overflow_drops += 1;
                    dropped.push((it, DropReason::QueueFull));
                }
                None => break,
            }
        }
    }

    /// RFC 8290 §4.2: deficit round robin over the new list, then the old list; each queue's
    /// packet goes through its CoDel.
    fn dequeue(
        &mut self,
        queue: &mut PacketQueue,
        now: Timestamp,
        dropped: &mut Drops,
    ) -> Option<Queued> {
        loop {
            let (flow, from_new) = match self.new_flows.front() {
                Some(&f) => (f, true),
                None => (*self.old_flows.front()?, false),
            };
            let fq = self.flows.get_mut(&flow).expect("a listed flow has a queue");
            if fq.deficit <= 0 {
                // Out of credit: a new quantum and to the end of the old list.
                fq.deficit += self.config.quantum.as_bytes();
                if from_new {
                    self.new_flows.pop_front();
                } else {
                    self.old_flows.pop_front();
                }
                self.old_flows.push_back(flow);
                continue;
            }
            let cfg = self.config.codel;
            let mut codel = std::mem::take(&mut fq.codel);
            let item = codel.dequeue(
                &cfg,
                now,
                || {
                    let it = Self::take_head(queue, fq, flow)?;
                    Some((it, fq.bytes))
                },
                dropped,
            );
            fq.codel = codel;
            match item {
                Some(it) => {
                    fq.deficit -= it.size.as_bytes();
                    return Some(it);
                }
                None => {
                    // The queue is empty: a new flow moves to the end of the old list (so
                    // it cannot come back as new at once, §4.2); an old one leaves.
                    if from_new {
                        self.new_flows.pop_front();
                        if self.old_flows.is_empty() {
                            fq.listed = false;
                        } else {
                            self.old_flows.push_back(flow);
                        }
                    } else {
                        self.old_flows.pop_front();
                        fq.listed = false;
                    }
                }
            }
        }
    }

    fn debug_columns(&self, out: &mut Columns) {
        let codel: u64 = self.flows.values().map(|q| q.codel.drops).sum();
        out.int("bn_codel_drops", Some(codel as i64));
        if self.config.codel.ecn {
            let marks: u64 = self.flows.values().map(|q| q.codel.marks).sum();
            out.int("bn_codel_marks", Some(marks as i64));
        }
        out.int("bn_fq_overflow_drops", Some(self.overflow_drops as i64));
        out.int(
            "bn_fq_active_flows",
            Some(self.flows.values().filter(|q| q.packets > 0).count() as i64),
        );
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
