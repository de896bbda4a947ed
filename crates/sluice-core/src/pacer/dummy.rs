//! Vidaptive's dummy packets (Vidaptive §3.1, §4): when the congestion controller could send
//! (the window has room and the pacer's budget allows) but no video or retransmission waits,
//! the pacer sends a small padding packet instead, so that the flow looks backlogged to the
//! controller and its feedback loop never breaks.
//!
//! The rules and their sources:
//! * only with an empty queue, strictly below video and retransmissions (§3.1: "only sent if
//!   the Pacer queue is empty and congestion control detects free bandwidth"); inside the
//!   window (§4), which the sender enforces for every packet;
//! * each smaller than 200 bytes on the wire (§4: "smaller than 200 bytes each"): 199 B by
//!   default (the third-party crate uses 200 B);
//! * withheld within `guard_fraction` (25 %) of a frame interval before the next capture
//!   (§3.1: "within 25% of the inter-frame time (8.25 ms for 30 FPS)"); the reference instant
//!   is the capture (the brief's A8 default), not the frame's arrival at the pacer;
//! * off while the controller's rate is at or above the video's maximum useful rate (§3.1:
//!   "disabled once the video reaches its maximum achievable bitrate (12 Mbps in our
//!   experiments)", footnote 4: the peak of their 1080p clips). Sluice tests the pacing rate,
//!   which in the Vidaptive schemes is the CC-Rate (`cwnd / srtt`, §3.1) (the brief's A7
//!   default); `max_video_rate_bps` is per clip (a plan's `[[clip]] set`);
//! * none once capture has ended (no frame will come to use what they would discover).
//!
//! They are `PacketKind::Padding`: acknowledged by transport feedback like every packet, in
//! flight and in the link's utilisation, never video (the receiver drops them after logging
//! their arrival for feedback; they carry no media sequence number, so they are never
//! NACKed).

use crate::check_range;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};

/// The dummy-packet rules of a pacer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DummyConfig {
    /// Send dummy packets at all (`false`: Vidaptive w/o Dummy, §5.4).
    pub enabled: bool,
    /// On-wire size of a dummy packet (§4: under 200 B).
    pub size_bytes: i64,
    /// Withhold dummies this fraction of a frame interval before the next capture (§3.1:
    /// 25 %).
    pub guard_fraction: f64,
    /// No dummies while the pacing rate is at least this (§3.1: 12 Mbps for their 1080p
    /// clips; per clip).
    pub max_video_rate_bps: f64,
}

impl DummyConfig {
    /// A configuration mistake, if any (the config paths under `pacer.dummy`).
    pub fn validate(&self) -> Result<(), String> {
        let headers = crate::packet::PACKET_OVERHEAD.as_bytes();
        if !(headers < self.size_bytes && self.size_bytes <= 1260) {
            return Err(format!(
                "pacer.dummy.size_bytes must be in ({headers}, 1260] (on-wire bytes; §4: under \
                 200), got {}",
                self.size_bytes
            ));
        }
        check_range("pacer.dummy.guard_fraction", self.guard_fraction, 0.0, false, 0.99)?;
        check_range("pacer.dummy.max_video_rate_bps", self.max_video_rate_bps, 0.0, true, 1e10)
    }
}

impl Default for DummyConfig {
    fn default() -> Self {
        DummyConfig {
            enabled: true,
            size_bytes: 199,
            guard_fraction: 0.25,
            max_video_rate_bps: 12e6,
        }
    }
}

impl DummyConfig {
    /// The dummy packet's size (at least one byte of headers' worth: 29 B).
    pub fn size(&self) -> DataSize {
        DataSize::from_bytes(self.size_bytes.max(crate::packet::PACKET_OVERHEAD.as_bytes() / 2))
    }

    /// Whether dummies may go at `rate` (the cap).
    pub fn allowed_at(&self, rate: DataRate) -> bool {
        self.enabled && rate.as_bps_f64() < self.max_video_rate_bps
    }

    /// When a dummy may go, given the earliest time the pacer's budget allows a packet
    /// (`due`), the pacing rate, the next capture and the frame interval: `due`, or the next
    /// capture if `due` falls in the guard before it; never when dummies are off or capped,
    /// or capture has ended (`next_capture` infinite).
    pub fn send_time(
        &self,
        due: Timestamp,
        rate: DataRate,
        next_capture: Timestamp,
        frame_interval: TimeDelta,
    ) -> Timestamp {
        if !self.allowed_at(rate) || !next_capture.is_finite() {
            return Timestamp::INFINITY;
        }
        let fraction =
            if self.guard_fraction.is_finite() { self.guard_fraction.clamp(0.0, 1.0) } else { 0.0 };
        let guard_start = next_capture - frame_interval * fraction;
        if due >= guard_start && due < next_capture {
            next_capture
        } else {
            due
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_paper() {
        let c = DummyConfig::default();
        assert!(c.enabled);
        assert_eq!(c.size(), DataSize::from_bytes(199));
        assert!(c.size() < DataSize::from_bytes(200));
        assert_eq!((c.guard_fraction, c.max_video_rate_bps), (0.25, 12e6));
    }

    #[test]
    fn withheld_in_the_guard_and_above_the_cap() {
        // 30 fps: 33.333 ms frames, guard 25 % = 8.333 ms before the capture at 100 ms.
        let c = DummyConfig::default();
        let fi = TimeDelta::from_us(33_333);
        let cap = Timestamp::from_ms(100);
        let r = DataRate::from_mbps(5);
        let at = |ms: f64| Timestamp::from_us((ms * 1000.0).round() as i64);
        assert_eq!(c.send_time(at(91.666), r, cap, fi), at(91.666), "just before the guard");
        assert_eq!(c.send_time(at(91.667), r, cap, fi), cap, "guard starts at 91.667 ms");
        assert_eq!(c.send_time(at(99.999), r, cap, fi), cap);
        assert_eq!(c.send_time(at(100.0), r, cap, fi), at(100.0), "the capture itself");
        // At or above the cap: never.
        let over = DataRate::from_mbps(12);
        assert_eq!(c.send_time(at(50.0), over, cap, fi), Timestamp::INFINITY);
        assert_eq!(c.send_time(at(50.0), DataRate::from_bps(11_999_999), cap, fi), at(50.0));
        // Capture over, or off.
        assert_eq!(c.send_time(at(50.0), r, Timestamp::INFINITY, fi), Timestamp::INFINITY);
        let off = DummyConfig { enabled: false, ..c };
        assert_eq!(off.send_time(at(50.0), r, cap, fi), Timestamp::INFINITY);
    }
}
