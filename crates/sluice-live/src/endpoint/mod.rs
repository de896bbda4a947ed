//! The live endpoints, sans-IO: the core's sender, receiver and links behind bytes in and
//! bytes out (quinn-proto's shape: `handle_datagram(now)`, `handle_timeout(now)`,
//! `poll_transmit(now)`, `poll_timeout()`). They read no clock and touch no socket; the
//! runtime ([`crate::runtime`]) drives them with a real clock and UDP sockets, tests drive
//! them with virtual time.
//!
//! * [`SenderEndpoint`]: the simulator's [`Sender`](sluice_core::sender::Sender), unchanged; media out as RTP, feedback
//!   in as RTCP.
//! * [`ReceiverEndpoint`]: the simulator's [`Receiver`](sluice_core::receiver::Receiver), unchanged; media in, feedback out.
//! * [`RelayEndpoint`]: the simulator's downlink (queue, trace, delay, loss, the scheme's
//!   bottleneck behaviour) and uplink [`Link`](sluice_core::link::Link)s between the two, carrying the datagrams'
//!   bytes; plus fault injection (duplication, reordering, a feedback blackout).
//!
//! A datagram that does not parse is counted, never fatal.

use sluice_core::columns::Columns;
use sluice_core::units::{TimeDelta, Timestamp};
use std::sync::{Arc, Mutex};

/// The other end of a datagram, by role (the runtime maps roles to addresses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Sender,
    Receiver,
    /// An RTP player that gets a copy of the received video (output only).
    Monitor,
}

/// A sans-IO live endpoint.
pub trait Endpoint: Send {
    /// A datagram from `from` arrived at `now`.
    fn handle_datagram(&mut self, from: Role, bytes: &[u8], now: Timestamp);
    /// Timer work due at or before `now`; a spurious call does nothing.
    fn handle_timeout(&mut self, now: Timestamp);
    /// The next datagram to send at `now` and to whom. Changes after any `handle_*` call.
    fn poll_transmit(&mut self, now: Timestamp) -> Option<(Role, Vec<u8>)>;
    /// When the endpoint next has something to do.
    fn poll_timeout(&self) -> Timestamp;
    /// Datagrams that did not parse (or came from nobody we know), so far.
    fn malformed(&self) -> u64;
}

/// The relay's downlink state, for the sender's samples in a `live run`.
#[derive(Clone, Debug, Default)]
pub struct LinkSnapshot {
    pub queue_bytes: i64,
    pub queue_packets: u64,
    pub queue_delay_us: i64,
    pub delivered_bytes: i64,
    pub dropped_packets: u64,
    pub columns: Columns,
    pub link_capacity_bps: i64,
    /// With cross traffic: every flow's bytes delivered so far, by flow id (0: the session's
    /// own), for the samples' `flow<ID>_rate_bps` columns as in the simulator.
    pub flow_delivered_bytes: Vec<(u32, i64)>,
}

pub type SharedLink = Arc<Mutex<LinkSnapshot>>;

/// Datagrams from a peer's address that a real peer would not send (spoofed, or damaged in a
/// way that looks like it), counted and ignored (issue 30).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Spoofed {
    /// Relay and receiver: packets of a stream they were not reading that were not valid as
    /// a whole (they stayed on their stream).
    pub stream_packets: u64,
    /// Sender: NACKed sequence numbers it never sent.
    pub nacked_never_sent: u64,
    /// Sender: keyframe requests (PLI) beyond one in [`PLI_MIN_INTERVAL`].
    pub plis_rate_limited: u64,
}

impl Spoofed {
    /// Whether anything was counted.
    pub fn any(&self) -> bool {
        *self != Spoofed::default()
    }

    /// The sum of two endpoints' counts.
    pub fn plus(self, o: Spoofed) -> Spoofed {
        Spoofed {
            stream_packets: self.stream_packets + o.stream_packets,
            nacked_never_sent: self.nacked_never_sent + o.nacked_never_sent,
            plis_rate_limited: self.plis_rate_limited + o.plis_rate_limited,
        }
    }
}

/// The sender honours at most one keyframe request (PLI) in this time; more are counted
/// ([`Spoofed::plis_rate_limited`]) and ignored: a flood of them would otherwise make every
/// frame a keyframe. A receiver that cannot decode asks again every 300 ms (the core's
/// receiver), so it waits at most one more request.
pub const PLI_MIN_INTERVAL: TimeDelta = TimeDelta::from_ms(500);

/// Frames kept: by the sender for retransmissions, by the receiver while it reassembles.
const FRAMES_KEPT: usize = 512;

mod receiver;
mod relay;
mod sender;

pub use receiver::{MediaSink, ReceiverEndpoint};
pub use relay::{DatagramRecord, Faults, RelayEndpoint};
pub use sender::{share, FrameStore, FreshSender, PayloadSource, SenderEndpoint};
