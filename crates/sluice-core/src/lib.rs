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

pub mod cc;
pub mod columns;
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
pub mod sim;
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
        Err(format!("{field} must be in {l}{lo}, {hi}], got {v}"))
    }
}
