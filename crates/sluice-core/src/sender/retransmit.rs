//! NACK-driven retransmission with libwebrtc's two guards: a packet is resent at most once
//! per RTT, and retransmissions use at most the target rate over the last second
//! (RtpTransportControllerSend's retransmission rate limiter).

use super::history::SendHistory;
use crate::packet::{Packet, PacketKind};
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use std::collections::VecDeque;

/// Retransmissions may use at most the target rate over this window (libwebrtc's
/// retransmission rate limiter in RtpTransportControllerSend: 1 s at the target rate).
const RTX_RATE_WINDOW: TimeDelta = TimeDelta::from_secs(1);

/// The retransmissions of the last second, for the rate limit.
#[derive(Default)]
pub(super) struct Retransmitter {
    /// (time, size) of each retransmission in the window.
    window: VecDeque<(Timestamp, DataSize)>,
    window_bytes: DataSize,
}

impl Retransmitter {
    /// The retransmissions a NACK of `media_seqs` asks for at `now`, in order: packets still
    /// in `history`, not of a purged frame (`is_purged`), not resent within the last RTT
    /// (`smoothed_rtt`, 100 ms before any, at most 500 ms), within the rate limit of
    /// `target_rate`. The rest waits for the next NACK.
    pub(super) fn on_nack(
        &mut self,
        history: &mut SendHistory,
        media_seqs: &[u64],
        is_purged: impl Fn(u64) -> bool,
        smoothed_rtt: Option<TimeDelta>,
        target_rate: DataRate,
        now: Timestamp,
    ) -> Vec<Packet> {
        let min_gap = smoothed_rtt.unwrap_or(TimeDelta::from_ms(100)).min(TimeDelta::from_ms(500));
        while self.window.front().is_some_and(|(t, _)| now - *t > RTX_RATE_WINDOW) {
            if let Some((_, size)) = self.window.pop_front() {
                self.window_bytes -= size;
            }
        }
        let budget = target_rate * RTX_RATE_WINDOW;
        let mut out = Vec::new();
        for &seq in media_seqs {
            let Some(record) = history.media_mut(seq) else { continue };
            if is_purged(record.packet.frame_id) {
                continue; // purged on purpose: not resent
            }
            if now - record.last_sent < min_gap && record.last_sent != record.packet.send_time {
                continue;
            }
            if self.window_bytes + record.packet.size > budget {
                break; // over the rate limit: the rest waits for the next NACK
            }
            let mut rtx = record.packet.clone();
            rtx.kind = PacketKind::Retransmission;
            record.last_sent = now;
            self.window.push_back((now, rtx.size));
            self.window_bytes += rtx.size;
            out.push(rtx);
        }
        out
    }
}
