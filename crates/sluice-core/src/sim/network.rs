//! The simulated network as data: nodes with numbered ports, and edges from an output port
//! to an input port (neqo's simulator, Mahimahi's composable elements). The sender, the
//! receiver and every link are nodes; a topology is a list of them and the edges between
//! them, so a bottleneck with its own path back to the sender, an access delay, or cross
//! traffic is a few more entries, not a new simulator.
//!
//! Every node is a sans-IO state machine: datagrams in on a port, outputs polled with their
//! port, timers through `poll_timeout`/`handle_timeout`. The [`Network`] only moves datagrams
//! along edges; the simulator moves time.

use crate::link::faults::{Fate, FaultStats, PathFaults};
use crate::link::Link;
use crate::packet::Datagram;
use crate::receiver::Receiver;
use crate::sender::Sender;
use crate::units::Timestamp;
use std::any::Any;
use std::collections::{BTreeMap, VecDeque};

/// A port number of a node.
pub type Port = u8;

/// Output port of a link for the datagrams it delivers; of a sender for media; of a receiver
/// for feedback.
pub const OUT: Port = 0;
/// Output port of a link for its queue discipline's reports (a bottleneck node's path to the
/// sender).
pub const REPORT: Port = 1;
/// The input port of every built-in node.
pub const IN: Port = 0;

/// A node's view as [`Any`], for the simulator to reach a concrete node (the sender, a link)
/// by downcasting; every `'static` type has it.
pub trait AsAny {
    /// The node as `&dyn Any`.
    fn as_any(&self) -> &dyn Any;
    /// The node as `&mut dyn Any`.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// One element of the simulated network.
pub trait Node: AsAny + Send {
    /// A datagram arrives on input port `port` at `now`.
    fn handle_input(&mut self, port: Port, datagram: Datagram, now: Timestamp);
    /// Timer work due at or before `now`; a spurious call does nothing.
    fn handle_timeout(&mut self, now: Timestamp);
    /// The next output due at `now`, with the port it leaves on. Changes after any
    /// `handle_*` call.
    fn poll_output(&mut self, now: Timestamp) -> Option<(Port, Datagram)>;
    /// When the node next has something to do (`Timestamp::INFINITY`: nothing without input).
    fn poll_timeout(&self) -> Timestamp;
    /// Whether the node is polled at every instant something happens anywhere, due or not
    /// (see [`Network`]). The sender is: its pacer pays its budget at every poll, rounded to
    /// the byte, and re-reads its queue-drain rate, so how often it is polled shows in its
    /// timing, as libwebrtc's pacer depends on when it runs. Polled again at the same
    /// instant with no input and no timer due, such a node must produce nothing: it is
    /// polled again at an instant only when another round is needed for other reasons.
    fn polled_at_every_event(&self) -> bool {
        false
    }
}

impl Node for Sender {
    fn polled_at_every_event(&self) -> bool {
        true
    }
    fn handle_input(&mut self, _port: Port, datagram: Datagram, now: Timestamp) {
        if let Datagram::Feedback(f) = datagram {
            self.handle_feedback(f, now);
        }
    }
    fn handle_timeout(&mut self, now: Timestamp) {
        Sender::handle_timeout(self, now)
    }
    fn poll_output(&mut self, now: Timestamp) -> Option<(Port, Datagram)> {
        self.poll_transmit(now).map(|d| (OUT, d))
    }
    fn poll_timeout(&self) -> Timestamp {
        Sender::poll_timeout(self)
    }
}

impl Node for Receiver {
    fn handle_input(&mut self, _port: Port, datagram: Datagram, now: Timestamp) {
        self.handle_datagram(datagram, now)
    }
    fn handle_timeout(&mut self, now: Timestamp) {
        Receiver::handle_timeout(self, now)
    }
    fn poll_output(&mut self, _now: Timestamp) -> Option<(Port, Datagram)> {
        self.poll_transmit().map(|d| (OUT, d))
    }
    fn poll_timeout(&self) -> Timestamp {
        Receiver::poll_timeout(self)
    }
}

impl Node for Link {
    fn handle_input(&mut self, _port: Port, datagram: Datagram, now: Timestamp) {
        self.handle_datagram(datagram, now)
    }
    fn handle_timeout(&mut self, now: Timestamp) {
        Link::handle_timeout(self, now)
    }
    fn poll_output(&mut self, now: Timestamp) -> Option<(Port, Datagram)> {
        if let Some(r) = self.poll_report() {
            return Some((REPORT, r));
        }
        self.poll_datagram(now).map(|d| (OUT, d))
    }
    fn poll_timeout(&self) -> Timestamp {
        Link::poll_timeout(self)
    }
}

/// Routes each datagram to the output port of its flow id (a shared bottleneck's far end,
/// in front of one receiver per flow). Flow ids above 255 share port 255.
#[derive(Debug, Default)]
pub struct Demux {
    out: VecDeque<(Port, Datagram)>,
}

impl Node for Demux {
    fn handle_input(&mut self, _port: Port, datagram: Datagram, _now: Timestamp) {
        let port = Port::try_from(datagram.flow()).unwrap_or(Port::MAX);
        self.out.push_back((port, datagram));
    }
    fn handle_timeout(&mut self, _now: Timestamp) {}
    fn poll_output(&mut self, _now: Timestamp) -> Option<(Port, Datagram)> {
        self.out.pop_front()
    }
    fn poll_timeout(&self) -> Timestamp {
        Timestamp::INFINITY
    }
}

/// The path faults ([`PathFaults`]) as a node: media in on [`FAULT_DOWN`] (from the
/// bottleneck), out on the same port (to the receiver), once, twice or later; feedback in on
/// [`FAULT_UP`] (from the receiver), out on it (to the feedback path) unless a blackout
/// loses it. The live relay applies the same decisions to bytes.
pub struct FaultNode {
    faults: PathFaults,
    /// Media held back: (release time, datagram), in release order (one delay for all).
    held: VecDeque<(Timestamp, Datagram)>,
    out: VecDeque<(Port, Datagram)>,
}

/// The media direction of a [`FaultNode`] (bottleneck to receiver), in and out.
pub const FAULT_DOWN: Port = 0;
/// The feedback direction of a [`FaultNode`] (receiver to sender), in and out.
pub const FAULT_UP: Port = 1;

impl FaultNode {
    /// A node applying `faults`' decisions.
    pub fn new(faults: PathFaults) -> Self {
        FaultNode { faults, held: VecDeque::new(), out: VecDeque::new() }
    }
    /// What the faults did so far.
    pub fn stats(&self) -> FaultStats {
        self.faults.stats()
    }
}

impl Node for FaultNode {
    fn handle_input(&mut self, port: Port, datagram: Datagram, now: Timestamp) {
        if port == FAULT_UP {
            if self.faults.feedback_passes(now) {
                self.out.push_back((FAULT_UP, datagram));
            }
            return;
        }
        match self.faults.media_fate(now) {
            Fate::Deliver => self.out.push_back((FAULT_DOWN, datagram)),
            Fate::DeliverTwice => {
                self.out.push_back((FAULT_DOWN, datagram.clone()));
                self.out.push_back((FAULT_DOWN, datagram));
            }
            Fate::HoldUntil(t) => self.held.push_back((t, datagram)),
        }
    }
    fn handle_timeout(&mut self, now: Timestamp) {
        while self.held.front().is_some_and(|(t, _)| *t <= now) {
            if let Some((_, d)) = self.held.pop_front() {
                self.out.push_back((FAULT_DOWN, d));
            }
        }
    }
    fn poll_output(&mut self, _now: Timestamp) -> Option<(Port, Datagram)> {
        self.out.pop_front()
    }
    fn poll_timeout(&self) -> Timestamp {
        self.held.front().map_or(Timestamp::INFINITY, |(t, _)| *t)
    }
}

/// A node that exists only from `start` to `stop` (a competing flow with start and stop
/// times): before `start` it ignores input and waits; from `stop` on it swallows input and
/// output and has no timeout. In between it is the inner node.
pub struct Scheduled<N: Node> {
    /// The node it runs between `start` and `stop`.
    pub inner: N,
    start: Timestamp,
    stop: Timestamp,
}

impl<N: Node> Scheduled<N> {
    /// `inner`, active from `start` until `stop`.
    pub fn new(inner: N, start: Timestamp, stop: Timestamp) -> Self {
        Scheduled { inner, start, stop }
    }
    fn active(&self, now: Timestamp) -> bool {
        now >= self.start && now < self.stop
    }
}

impl<N: Node + 'static> Node for Scheduled<N> {
    fn polled_at_every_event(&self) -> bool {
        self.inner.polled_at_every_event()
    }
    fn handle_input(&mut self, port: Port, datagram: Datagram, now: Timestamp) {
        if self.active(now) {
            self.inner.handle_input(port, datagram, now);
        }
    }
    fn handle_timeout(&mut self, now: Timestamp) {
        if self.active(now) {
            self.inner.handle_timeout(now);
        }
    }
    fn poll_output(&mut self, now: Timestamp) -> Option<(Port, Datagram)> {
        if self.active(now) {
            self.inner.poll_output(now)
        } else {
            None
        }
    }
    fn poll_timeout(&self) -> Timestamp {
        let t = self.inner.poll_timeout().max(self.start);
        if t >= self.stop {
            Timestamp::INFINITY
        } else {
            t
        }
    }
}

/// An index of a node in its [`Network`].
pub type NodeId = usize;

/// Nodes and the edges between their ports.
///
/// A node's outputs and timeout change only when it is handed input, runs its timers, is
/// polled for output, or is reached mutably from outside ([`Network::get_mut`]). The network
/// keeps each node's last `poll_timeout` and whether one of those happened since
/// ("dirty"), and [`Network::settle`] visits only the nodes that are dirty or due (and those
/// [polled at every event](Node::polled_at_every_event)): a clean node that is not due would
/// produce nothing. The order of everything that does happen is the same as visiting every
/// node every round.
#[derive(Default)]
pub struct Network {
    nodes: Vec<(&'static str, Box<dyn Node>)>,
    edges: BTreeMap<(NodeId, Port), (NodeId, Port)>,
    /// `edges` by node and port, for the hot path.
    routes: Vec<Vec<Option<(NodeId, Port)>>>,
    /// Each node's `poll_timeout` when it was last clean.
    timeouts: Vec<Timestamp>,
    dirty: Vec<bool>,
    /// [`Node::polled_at_every_event`] of each node.
    always: Vec<bool>,
    /// Outputs that had no edge (a topology mistake; counted, not fatal).
    unrouted: u64,
    /// Tests: settle by the rule [`Network::settle`] economises on (another round whenever
    /// anything moved), to compare whole simulations under both.
    #[cfg(test)]
    pub(crate) round_after_any_output: bool,
}

impl Network {
    /// Adds a node; nodes run in the order they were added.
    pub fn add(&mut self, name: &'static str, node: Box<dyn Node>) -> NodeId {
        self.always.push(node.polled_at_every_event());
        self.nodes.push((name, node));
        self.routes.push(Vec::new());
        self.timeouts.push(Timestamp::INFINITY);
        self.dirty.push(true);
        self.nodes.len() - 1
    }
    /// Sends what `from` outputs on `from_port` to `to`'s `to_port`.
    pub fn connect(&mut self, from: NodeId, from_port: Port, to: NodeId, to_port: Port) {
        self.edges.insert((from, from_port), (to, to_port));
        let ports = &mut self.routes[from];
        if ports.len() <= usize::from(from_port) {
            ports.resize(usize::from(from_port) + 1, None);
        }
        ports[usize::from(from_port)] = Some((to, to_port));
    }
    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
    /// Whether the network has no node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
    /// The name node `id` was added with (panics for an unknown id).
    pub fn name(&self, id: NodeId) -> &'static str {
        self.nodes[id].0
    }
    /// Node `id` as its concrete type, if it is one.
    pub fn get<T: Any>(&self, id: NodeId) -> Option<&T> {
        // Through the node, not the box (a `Box<dyn Node>` is `Any` itself).
        AsAny::as_any(&*self.nodes.get(id)?.1).downcast_ref()
    }
    /// Node `id` as its concrete type, if it is one; the network looks at it again before
    /// it next settles (whatever the caller does to it).
    pub fn get_mut<T: Any>(&mut self, id: NodeId) -> Option<&mut T> {
        *self.dirty.get_mut(id)? = true;
        AsAny::as_any_mut(&mut *self.nodes.get_mut(id)?.1).downcast_mut()
    }
    /// Node `id` as its concrete type, to drain what it recorded (events, drop logs). The
    /// caller must not change what the node outputs or when: the network does not look at it
    /// again because of this access (use [`Network::get_mut`] for anything else).
    pub fn get_mut_for_events<T: Any>(&mut self, id: NodeId) -> Option<&mut T> {
        AsAny::as_any_mut(&mut *self.nodes.get_mut(id)?.1).downcast_mut()
    }
    /// Hands node `id` datagram `d` on its port `port` at `now`, as an edge would.
    pub fn handle_input(&mut self, id: NodeId, port: Port, d: Datagram, now: Timestamp) {
        self.nodes[id].1.handle_input(port, d, now);
        self.dirty[id] = true;
    }
    /// Outputs dropped because their port had no edge (a topology mistake).
    pub fn unrouted(&self) -> u64 {
        self.unrouted
    }

    /// Runs every node's timers due at `now` and moves outputs along the edges until nothing
    /// more happens at `now`. Returns false if it did not settle within `max_rounds` rounds
    /// (a node that keeps producing output at the same instant).
    ///
    /// A round visits the nodes in order, so a node handed input by an earlier one is visited
    /// later in the same round; another round runs only if something moved and a node may
    /// still have work at `now`: one handed input by a later node (or itself), or one still
    /// due after its visit.
    pub fn settle(&mut self, now: Timestamp, max_rounds: u32) -> bool {
        for _ in 0..max_rounds {
            // `again`: a node may still have work at `now` (see above); a node polled at
            // every event that is neither dirty nor due produces nothing when polled again.
            let (mut progressed, mut again) = (false, false);
            for i in 0..self.nodes.len() {
                // A clean node's cached timeout is its current one: only input, timers,
                // polling or outside access change it, and each of those marks it dirty or
                // re-caches it.
                let due = if self.dirty[i] {
                    self.nodes[i].1.poll_timeout() <= now
                } else {
                    self.timeouts[i] <= now
                };
                if !due && !self.dirty[i] && !self.always[i] {
                    continue;
                }
                if due {
                    self.nodes[i].1.handle_timeout(now);
                }
                while let Some((port, d)) = self.nodes[i].1.poll_output(now) {
                    progressed = true;
                    match self.routes[i].get(usize::from(port)).copied().flatten() {
                        Some((to, to_port)) => {
                            self.nodes[to].1.handle_input(to_port, d, now);
                            self.dirty[to] = true;
                            again |= to <= i;
                        }
                        None => self.unrouted += 1,
                    }
                }
                self.timeouts[i] = self.nodes[i].1.poll_timeout();
                self.dirty[i] = false;
                again |= self.timeouts[i] <= now;
            }
            #[cfg(test)]
            let again = again || self.round_after_any_output;
            if !(progressed && again) {
                return true;
            }
        }
        false
    }

    /// The earliest timeout of any node.
    pub fn poll_timeout(&self) -> Timestamp {
        let mut earliest = Timestamp::INFINITY;
        for (i, (_, n)) in self.nodes.iter().enumerate() {
            let t = if self.dirty[i] { n.poll_timeout() } else { self.timeouts[i] };
            earliest = earliest.min(t);
        }
        earliest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::bottleneck::BottleneckConfig;
    use crate::link::trace::Trace;
    use crate::link::{LinkConfig, LinkRate, QueueLimit};
    use crate::packet::{Feedback, Packet, PacketKind};
    use crate::rng::Rng;
    use crate::units::{DataRate, DataSize, TimeDelta};
    use std::collections::VecDeque;
    use std::sync::Arc;

    /// Emits media packets at given times.
    struct Source(VecDeque<(Timestamp, Packet)>);
    impl Node for Source {
        fn handle_input(&mut self, _: Port, _: Datagram, _: Timestamp) {}
        fn handle_timeout(&mut self, _: Timestamp) {}
        fn poll_output(&mut self, now: Timestamp) -> Option<(Port, Datagram)> {
            if self.0.front().is_some_and(|(t, _)| *t <= now) {
                return self.0.pop_front().map(|(_, p)| (OUT, Datagram::Media(p)));
            }
            None
        }
        fn poll_timeout(&self) -> Timestamp {
            self.0.front().map_or(Timestamp::INFINITY, |(t, _)| *t)
        }
    }

    /// Records what arrives, with the port and the time.
    #[derive(Default)]
    struct Sink(Vec<(Port, Timestamp, Datagram)>);
    impl Node for Sink {
        fn handle_input(&mut self, port: Port, d: Datagram, now: Timestamp) {
            self.0.push((port, now, d));
        }
        fn handle_timeout(&mut self, _: Timestamp) {}
        fn poll_output(&mut self, _: Timestamp) -> Option<(Port, Datagram)> {
            None
        }
        fn poll_timeout(&self) -> Timestamp {
            Timestamp::INFINITY
        }
    }

    /// `n` video packets of 1200 B, one every ms from 0, frame id = the ms.
    fn video_every_ms(n: u64) -> VecDeque<(Timestamp, Packet)> {
        (0..n)
            .map(|i| {
                let mut p = Packet::padding(DataSize::from_bytes(1200), Timestamp::ZERO);
                p.kind = PacketKind::Video;
                p.frame_id = i;
                (Timestamp::from_ms(i as i64), p)
            })
            .collect()
    }

    fn run(net: &mut Network, until: Timestamp) {
        let mut now = Timestamp::ZERO;
        loop {
            assert!(net.settle(now, 10_000));
            let next = net.poll_timeout().max(now + TimeDelta::from_us(1));
            if next > until {
                break;
            }
            now = next;
        }
    }

    #[test]
    fn a_bottleneck_report_reaches_the_sender_exactly_its_path_delay_later() {
        // A source sends 1200 B every ms (9.6 Mbps) into a 6 Mbps bottleneck that reports
        // every 100 ms; the report path takes 20 ms; the media path 5 ms after the queue.
        let trace = Arc::new(Trace::constant(DataRate::from_mbps(6), TimeDelta::from_secs(1)));
        let packets = video_every_ms(1000);
        let bottleneck = BottleneckConfig::QueueReport { interval_ms: 100.0, rate_window_ms: 50.0 };
        let link = Link::with_discipline(
            LinkConfig {
                rate: LinkRate::Trace(trace),
                delay: TimeDelta::from_ms(5),
                ..LinkConfig::default()
            },
            Rng::new(1),
            bottleneck.build(QueueLimit::Unlimited, 0),
        );
        let path = Link::new(
            LinkConfig { delay: TimeDelta::from_ms(20), ..LinkConfig::default() },
            Rng::new(2),
        );
        let mut net = Network::default();
        let src = net.add("source", Box::new(Source(packets)));
        let bn = net.add("bottleneck", Box::new(link));
        let back = net.add("report-path", Box::new(path));
        let sender = net.add("sender", Box::new(Sink::default()));
        let receiver = net.add("receiver", Box::new(Sink::default()));
        net.connect(src, OUT, bn, IN);
        net.connect(bn, OUT, receiver, IN);
        net.connect(bn, REPORT, back, IN);
        net.connect(back, OUT, sender, 3);
        run(&mut net, Timestamp::from_ms(1020));
        let got = &net.get::<Sink>(sender).unwrap().0;
        assert_eq!(got.len(), 10, "one report per 100 ms");
        let mut last_queue = DataSize::ZERO;
        for (k, (port, at, d)) in got.iter().enumerate() {
            let Datagram::Feedback(Feedback::Bottleneck(r)) = d else { panic!("{d:?}") };
            assert_eq!(*port, 3);
            assert_eq!(r.seq, k as u64);
            assert_eq!(r.time, Timestamp::from_ms(100 * (k as i64 + 1)));
            assert_eq!(*at - r.time, TimeDelta::from_ms(20), "report {k}");
            // The queue grows by 3.6 Mbps of excess: 45 kB per 100 ms.
            assert!(r.queue > last_queue, "report {k}: {:?}", r.queue);
            last_queue = r.queue;
            // The capacity of the last 50 ms: 6 Mbps (the trace's 6.016 Mbps of IP bytes).
            let rate = r.rate.unwrap().as_bps_f64();
            assert!((rate / 6.0e6 - 1.0).abs() < 0.01, "{rate}");
        }
        let q = last_queue.as_bytes() as f64;
        assert!((q / 450_000.0 - 1.0).abs() < 0.02, "queue after 1 s: {q} B");
        assert!(net.get::<Sink>(receiver).unwrap().0.iter().all(|(p, ..)| *p == IN));
        assert_eq!(net.unrouted(), 0);
    }

    #[test]
    fn the_fault_node_duplicates_and_holds_back_media_and_loses_feedback_in_its_blackout() {
        use crate::link::faults::FaultsConfig;
        // Media every ms for 2 s into the node's media port; feedback every 10 ms into its
        // feedback port (a second source); the blackout is [0.5 s, 1 s).
        let media = video_every_ms(2000);
        let feedback: VecDeque<_> = (0..200)
            .map(|i| {
                (
                    Timestamp::from_ms(10 * i),
                    Packet::padding(DataSize::from_bytes(80), Timestamp::ZERO),
                )
            })
            .collect();
        let cfg = FaultsConfig {
            duplicate: 0.1,
            reorder: 0.1,
            reorder_delay_ms: 3.0,
            feedback_blackout_s: Some((0.5, 1.0)),
        };
        let mut net = Network::default();
        let src = net.add("media", Box::new(Source(media)));
        let fb = net.add("feedback", Box::new(Source(feedback)));
        let faults = net.add("faults", Box::new(FaultNode::new(PathFaults::new(cfg, 7))));
        let rx = net.add("receiver", Box::new(Sink::default()));
        let tx = net.add("sender", Box::new(Sink::default()));
        net.connect(src, OUT, faults, FAULT_DOWN);
        net.connect(fb, OUT, faults, FAULT_UP);
        net.connect(faults, FAULT_DOWN, rx, IN);
        net.connect(faults, FAULT_UP, tx, IN);
        run(&mut net, Timestamp::from_ms(2100));
        let stats = net.get::<FaultNode>(faults).unwrap().stats();
        let got = &net.get::<Sink>(rx).unwrap().0;
        // Every packet once, the duplicated ones twice; the held-back ones 3 ms late.
        assert_eq!(got.len() as u64, 2000 + stats.duplicated);
        let (mut late, mut seen) = (0, std::collections::BTreeMap::new());
        for (_, at, d) in got {
            let Datagram::Media(p) = d else { panic!() };
            let sent = Timestamp::from_ms(p.frame_id as i64);
            match *at - sent {
                x if x == TimeDelta::ZERO => {}
                x if x == TimeDelta::from_ms(3) => late += 1,
                x => panic!("packet {} delivered {x:?} late", p.frame_id),
            }
            *seen.entry(p.frame_id).or_insert(0u64) += 1;
        }
        assert_eq!(late, stats.reordered);
        assert_eq!(seen.values().filter(|n| **n == 2).count() as u64, stats.duplicated);
        assert!((150..250).contains(&stats.reordered), "{stats:?}");
        assert!((130..240).contains(&stats.duplicated), "{stats:?}");
        // Feedback at 0.50, 0.51, ..., 0.99 s is lost: 50 of 200.
        let fed = &net.get::<Sink>(tx).unwrap().0;
        assert_eq!(stats.blackout_dropped, 50);
        assert_eq!(fed.len(), 150);
        assert!(fed
            .iter()
            .all(|(_, at, _)| *at < Timestamp::from_ms(500) || *at >= Timestamp::from_ms(1000)));
    }

    /// What every relay was handed, in order: (node, time, packet id, hops left).
    type Log = Arc<std::sync::Mutex<Vec<(usize, Timestamp, u64, u16)>>>;

    /// Forwards each packet `delay` after it arrives while it has hops left, one hop fewer,
    /// on the port of its hops' parity; with `always`, it asks to be polled at every event;
    /// with `one_per_timer`, it releases one packet per timer call (still due after its
    /// visit when more are waiting).
    struct Relay {
        id: usize,
        delay: TimeDelta,
        always: bool,
        one_per_timer: bool,
        released: bool,
        held: VecDeque<(Timestamp, Packet)>,
        log: Log,
    }
    impl Node for Relay {
        fn handle_input(&mut self, _: Port, d: Datagram, now: Timestamp) {
            let Datagram::Media(mut p) = d else { return };
            self.log.lock().unwrap().push((self.id, now, p.frame_id, p.packet_index));
            if p.packet_index > 0 {
                p.packet_index -= 1;
                self.held.push_back((now + self.delay, p));
            }
        }
        fn handle_timeout(&mut self, _: Timestamp) {
            self.released = false;
        }
        fn poll_output(&mut self, now: Timestamp) -> Option<(Port, Datagram)> {
            if self.one_per_timer && self.released {
                return None;
            }
            if self.held.front().is_some_and(|(t, _)| *t <= now) {
                self.released = true;
                let port = |p: &Packet| (p.packet_index % 2) as Port;
                return self.held.pop_front().map(|(_, p)| (port(&p), Datagram::Media(p)));
            }
            None
        }
        fn poll_timeout(&self) -> Timestamp {
            self.held.front().map_or(Timestamp::INFINITY, |(t, _)| *t)
        }
        fn polled_at_every_event(&self) -> bool {
            self.always
        }
    }

    /// The rule `settle` is an economy of: every node visited (timers, then outputs) every
    /// round until a round moves nothing.
    fn settle_visiting_every_node(net: &mut Network, now: Timestamp) {
        loop {
            let mut progressed = false;
            for i in 0..net.nodes.len() {
                if net.nodes[i].1.poll_timeout() <= now {
                    net.nodes[i].1.handle_timeout(now);
                }
                while let Some((port, d)) = net.nodes[i].1.poll_output(now) {
                    progressed = true;
                    if let Some((to, to_port)) = net.routes[i][usize::from(port)] {
                        net.nodes[to].1.handle_input(to_port, d, now);
                    }
                }
            }
            if !progressed {
                return;
            }
        }
    }

    #[test]
    fn settling_moves_everything_in_the_order_visiting_every_node_every_round_would() {
        // A source feeds pairs of packets to relays: 1 (no delay, one packet per timer call)
        // -> 2 (3 ms) -> 3 (no delay, polled at every event) or back to 1; 3 -> itself or back
        // to 1: packets go forward, back and to the same node at one instant, and 1 is still
        // due after a visit.
        let build = |log: &Log| {
            let mut net = Network::default();
            let mut rng = Rng::new(7);
            let source: VecDeque<(Timestamp, Packet)> = (0..300u64)
                .map(|i| {
                    let mut p = Packet::padding(DataSize::from_bytes(100), Timestamp::ZERO);
                    p.frame_id = i;
                    p.packet_index = (rng.next_u64() % 7) as u16;
                    (Timestamp::from_us(((i / 2) * 1700 + (i / 2) * 7919 % 1000) as i64), p)
                })
                .collect();
            let src = net.add("source", Box::new(Source(source)));
            let relay = |id, delay_ms, always, one_per_timer| Relay {
                id,
                delay: TimeDelta::from_ms(delay_ms),
                always,
                one_per_timer,
                released: false,
                held: VecDeque::new(),
                log: log.clone(),
            };
            let a = net.add("a", Box::new(relay(1, 0, false, true)));
            let b = net.add("b", Box::new(relay(2, 3, false, false)));
            let c = net.add("c", Box::new(relay(3, 0, true, false)));
            net.connect(src, OUT, a, IN);
            net.connect(a, 0, b, IN);
            net.connect(a, 1, b, IN);
            net.connect(b, 0, c, IN);
            net.connect(b, 1, a, IN);
            net.connect(c, 0, c, IN);
            net.connect(c, 1, a, IN);
            net
        };
        let (fast, reference): (Log, Log) = Default::default();
        let (mut net, mut every) = (build(&fast), build(&reference));
        // As the simulator steps: past an instant once it has settled; both networks agree
        // on when the next thing happens (a cached timeout gone stale would show here).
        let mut now = Timestamp::ZERO;
        while now.is_finite() {
            assert!(net.settle(now, 100));
            settle_visiting_every_node(&mut every, now);
            let next = every.nodes.iter().map(|(_, n)| n.poll_timeout()).min().unwrap();
            assert_eq!(net.poll_timeout(), next, "at {now:?}");
            now = next.max(now + TimeDelta::from_us(1));
        }
        let (fast, reference) = (fast.lock().unwrap(), reference.lock().unwrap());
        // Every edge carried something: 3 -> 3 and 3 -> 1 (same instant), 2 -> 1.
        let to = |node: usize| fast.iter().filter(|&&(n, ..)| n == node).count();
        assert!(to(3) > 100 && to(1) > 400, "{} {}", to(1), to(3));
        assert!(reference.len() > 600, "{} hand-overs", reference.len());
        assert_eq!(*fast, *reference);
    }
}
