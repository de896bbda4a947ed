//! Sluice core: sans-IO state machines for low-latency real-time video and a deterministic
//! virtual-time simulator that composes them.
//!
//! The modules follow the media pipeline: [`encoder`] (+ [`encoder_controller`]) ->
//! [`packetizer`] -> [`pacer`] -> [`link`] -> [`receiver`] -> feedback ([`packet`]) ->
//! congestion control ([`cc`]); [`sender`] assembles the sending side, [`sim`] a session,
//! [`scheme`] names compositions, [`metrics`] turns events into records and summaries.
//!
//! Nothing here reads a clock, spawns a thread or touches a socket: every input carries its
//! time (`handle_*(.., now)`), outputs are polled (`poll_*`), and each state machine says when
//! it next needs to run (`poll_timeout`).
//!
//! Used as a library: a whole session ([`sim::Simulation`]), a [`sender::Sender`] and
//! [`receiver::Receiver`] in your own loop, or one controller in your own transport
//! (`examples/drive_controller.rs`); docs/architecture.md, "Using the core as a library", says
//! what each needs. Components follow libwebrtc's controller interfaces (`on_*` events,
//! `update()`), the endpoints the `handle_*`/`poll_*` names above.

#![warn(missing_docs)]

pub mod cc;
pub mod columns;
pub mod cross;
pub mod encoder;
pub mod encoder_controller;
pub mod link;
pub mod metrics;
pub mod pacer;
pub mod packet;
pub mod packetizer;
pub mod receiver;
pub mod rng;
pub mod scheme;
pub mod sender;
pub mod session;
pub mod sim;
pub mod stats;
pub mod units;

/// `v` if it is finite, else `fallback` (configurations are user input).
pub(crate) fn finite_or(v: f64, fallback: f64) -> f64 {
    if v.is_finite() {
        v
    } else {
        fallback
    }
}

/// `Err` naming `field` unless `v` is finite and inside `lo..=hi` (`lo` excluded when
/// `open_lo`).
pub(crate) fn check_range(
    field: &str,
    v: f64,
    lo: f64,
    open_lo: bool,
    hi: f64,
) -> Result<(), String> {
    let above = if open_lo { v > lo } else { v >= lo };
    if v.is_finite() && above && v <= hi {
        Ok(())
    } else {
        let l = if open_lo { "(" } else { "[" };
        Err(format!("{field} must be in {l}{}, {}], got {}", show(lo), show(hi), show(v)))
    }
}

/// A number as a user would write it: `1e-9` and `1e20`, not 0.000000001 and 100000...
pub fn show(v: f64) -> String {
    if v != 0.0 && v.is_finite() && (v.abs() < 1e-4 || v.abs() >= 1e9) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// What the simulator accepts (docs/cli.md, "Limits"): every rate, duration, timestamp and size a
/// user gives is checked against these where it enters (trace parsers and generators, the
/// run config), before anything is allocated for it.
pub mod limits {
    /// Link and controller rates: up to 10 Gbit/s.
    pub const MAX_RATE_BPS: i64 = 10_000_000_000;
    /// [`MAX_RATE_BPS`] in Mbit/s (trace files and generator specs).
    pub const MAX_RATE_MBPS: f64 = 10_000.0;
    /// A session (capture plus drain) and a generated trace: up to a day.
    pub const MAX_SESSION_S: f64 = 86_400.0;
    /// Trace timestamps (Mahimahi milliseconds, a rate series' span): up to a day.
    pub const MAX_TRACE_MS: i64 = 86_400_000;
    /// Delivery opportunities in one loop of a trace (8 bytes each: 800 MB at the limit).
    pub const MAX_TRACE_OPPORTUNITIES: i64 = 100_000_000;
    /// [`MAX_RATE_BPS`] as delivery opportunities in one second of a Mahimahi trace (12000
    /// bits each, rounded up): more in any second of a trace file, or on average over a loop
    /// shorter than a second, is above the rate limit.
    pub const MAX_OPPORTUNITIES_PER_S: i64 = 833_334;
    /// The longest line of a trace file read (far above any real line).
    pub const MAX_TRACE_LINE_BYTES: usize = 4096;
    /// Delays and time settings of a config (`*_ms` fields): up to a day.
    pub const MAX_TIME_MS: f64 = 86_400_000.0;
    /// One-way propagation delays: up to a minute.
    pub const MAX_DELAY_MS: f64 = 60_000.0;
    /// Sizes (`*_bytes` fields, queue limits): up to 1 GB.
    pub const MAX_SIZE_BYTES: f64 = 1e9;
    /// Packet counts (`*_packets` fields): up to a million.
    pub const MAX_PACKETS: f64 = 1e6;
    /// Frames (fps x duration) and samples ((duration + drain) / sample interval) of one
    /// run, each: up to 10 million (a run holds its records in memory until it ends).
    pub const MAX_RECORDS: f64 = 1e7;
}
