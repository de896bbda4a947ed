//! Sans-IO wire formats: the core's [`Datagram`](sluice_core::packet::Datagram)s to and from bytes (no socket, no clock).
//!
//! * Media: RTP (RFC 3550) built and parsed with webrtc-rs's `rtp` crate. Every packet
//!   carries RFC 8285 one-byte header extensions: id 1, the transport-wide sequence number
//!   (draft-holmer-rmcat-transport-wide-cc-extensions-01, 2 bytes); on video packets id 2,
//!   Sluice's frame descriptor (frame id (4), packet index (2), packet count (2), reference
//!   delta (2), flags (1): bit 0 keyframe, bit 1 retransmission); id 3, Co-RTV's latest
//!   re-encoded frame number (4 bytes) when the sender stamps one. Video: PT 96 on
//!   [`SSRC_VIDEO`] with the media sequence number; a retransmission repeats the original
//!   packet (same RTP sequence number) with a new transport sequence number; padding: PT 100
//!   on [`SSRC_PADDING`] with its own sequence numbers. The payload is the frame's bytes
//!   (H.264 with x264) or, for the model encoder, zeros, so that every datagram is exactly
//!   the size the simulator charges the link.
//! * Feedback: compound RTCP built and parsed with webrtc-rs's `rtcp` crate: transport-cc
//!   feedback (`TransportLayerCc`), generic NACK (`TransportLayerNack`, RFC 4585), PLI, and
//!   two RTCP APP packets (RFC 3550 §6.7) documented in docs/live-wire.md: `SLFB` (sent
//!   with every transport-cc packet: the feedback counter and the receiver's hold time, the
//!   DLSR-like delay that lets the sender measure RTT without a shared clock) and `SLBN` (a
//!   bottleneck node's report, Co-RTV §III-B5).
//!
//! 16- and 32-bit wire numbers are unwrapped to the core's 64-bit ones against a reference
//! (the highest accepted so far, or the highest sent): [`unwrap_near`].
//!
//! Every parser here returns an error for malformed input and never panics; the crates'
//! parsers are called only on input whose RTP extension block was checked first, and behind
//! `catch_unwind` as a last guard ([`guarded`]).

use sluice_core::units::Timestamp;

/// Whether `b`, the second byte of an RTP-version datagram, is an RTCP packet type: RTP and
/// RTCP multiplexed on one port are told apart by it, 192-223 being RTCP (RFC 5761 §4).
pub fn is_rtcp_type(b: u8) -> bool {
    (192..=223).contains(&b)
}

/// The fixed RTP header (RFC 3550 §5.1): what a relay can read of any RTP stream, SRTP
/// included (SRTP encrypts the payload, not the header: RFC 3711 §3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtpFixedHeader {
    pub marker: bool,
    pub payload_type: u8,
    pub sequence: u16,
    pub timestamp: u32,
    pub ssrc: u32,
}

/// The fixed RTP header of `bytes`, or `None` if it is not an RTP packet: shorter than the
/// 12 fixed bytes, not version 2 (STUN, DTLS and TURN channel data are not: RFC 7983 §7), or
/// an RTCP packet type ([`is_rtcp_type`]). Reads only the fixed header; never panics.
pub fn peek_rtp(bytes: &[u8]) -> Option<RtpFixedHeader> {
    let h: [u8; 12] = bytes.get(..12)?.try_into().ok()?;
    if h[0] >> 6 != 2 || is_rtcp_type(h[1]) {
        return None;
    }
    Some(RtpFixedHeader {
        marker: h[1] & 0x80 != 0,
        payload_type: h[1] & 0x7f,
        sequence: u16::from_be_bytes([h[2], h[3]]),
        timestamp: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
        ssrc: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
    })
}

pub const PT_VIDEO: u8 = 96;
pub const PT_PADDING: u8 = 100;
pub const SSRC_VIDEO: u32 = 0x51CE_0001;
pub const SSRC_PADDING: u32 = 0x51CE_0002;
/// The receiver's SSRC in its feedback.
pub const SSRC_RECEIVER: u32 = 0x51CE_0003;
/// The relay's SSRC in its bottleneck reports.
pub const SSRC_RELAY: u32 = 0x51CE_0004;
/// A sender's streams: a sender that restarts starts a new stream with new SSRCs (RFC 3550
/// §8.2), so that the relay and the receiver tell its packets from its earlier life's.
/// Stream `n` uses the base SSRCs plus `n` times this step (stream 0: the constants above).
pub const STREAM_SSRC_STEP: u32 = 0x10;
/// How many streams the SSRCs number.
pub const MAX_STREAMS: u32 = 0x1000;

/// The video SSRC of a sender's stream `n`.
pub fn video_ssrc(stream: u32) -> u32 {
    SSRC_VIDEO.wrapping_add(stream.wrapping_mul(STREAM_SSRC_STEP))
}

/// The padding SSRC of a sender's stream `n`.
pub fn padding_ssrc(stream: u32) -> u32 {
    SSRC_PADDING.wrapping_add(stream.wrapping_mul(STREAM_SSRC_STEP))
}

/// The stream a restarted sender starts (any other than `stream` works; receivers and relays
/// follow any stream they have not seen, [`MediaReader`]).
pub fn next_stream(stream: u32) -> u32 {
    (stream + 1) % MAX_STREAMS
}

/// The stream number of `ssrc` if it is one of `base`'s streams.
fn stream_of(ssrc: u32, base: u32) -> Option<u32> {
    let d = ssrc.wrapping_sub(base);
    (d.is_multiple_of(STREAM_SSRC_STEP) && d / STREAM_SSRC_STEP < MAX_STREAMS)
        .then_some(d / STREAM_SSRC_STEP)
}

const EXT_TRANSPORT_SEQ: u8 = 1;
const EXT_FRAME: u8 = 2;
const EXT_LATEST_REENCODED: u8 = 3;
const FRAME_EXT_LEN: usize = 11;
const FLAG_KEYFRAME: u8 = 1;
const FLAG_RETRANSMISSION: u8 = 2;
/// RTP clock rate of video.
pub const RTP_CLOCK_HZ: i64 = 90_000;
/// The largest datagram Sluice sends or accepts.
pub const MAX_DATAGRAM: usize = 1500;
const APP_FEEDBACK: [u8; 4] = *b"SLFB";
const APP_BOTTLENECK: [u8; 4] = *b"SLBN";
const TWCC_DELTA_US: i64 = 250;
const TWCC_REFERENCE_US: i64 = 64_000;

/// Why a datagram was not accepted. Counted by the endpoints, never fatal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    TooShort,
    TooLong,
    NotRtp,
    NotRtcp,
    /// The RTP extension block runs past its end or the packet.
    BadExtensions,
    MissingExtension(&'static str),
    UnknownStream,
    /// A packet of a stream the reader has left (sent before its sender restarted).
    StaleStream,
    /// A packet of a stream the reader is not reading that is not valid as a whole (a
    /// spoofed or damaged one): the reader stays on its stream.
    SpoofedStream,
    /// A crate's parser rejected it (its message).
    Parse(String),
    /// A crate's parser panicked on it (caught).
    ParserPanic,
    Encode(String),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::TooShort => f.write_str("datagram too short"),
            WireError::TooLong => f.write_str("datagram too long"),
            WireError::NotRtp => f.write_str("not an RTP packet"),
            WireError::NotRtcp => f.write_str("not an RTCP packet"),
            WireError::BadExtensions => f.write_str("malformed RTP header extensions"),
            WireError::MissingExtension(e) => write!(f, "RTP header extension missing: {e}"),
            WireError::UnknownStream => f.write_str("unknown SSRC or payload type"),
            WireError::StaleStream => f.write_str("a packet of the sender's earlier stream"),
            WireError::SpoofedStream => {
                f.write_str("a packet of a new stream that is not valid as a whole")
            }
            WireError::Parse(m) => write!(f, "parse error: {m}"),
            WireError::ParserPanic => f.write_str("parser panicked"),
            WireError::Encode(m) => write!(f, "encode error: {m}"),
        }
    }
}
impl std::error::Error for WireError {}

/// Runs a crate's parser; a panic inside it becomes [`WireError::ParserPanic`].
pub fn guarded<T>(f: impl FnOnce() -> Result<T, WireError>) -> Result<T, WireError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(Err(WireError::ParserPanic))
}

/// The 64-bit number whose low `bits` bits are `value` that is nearest to `reference`
/// (ties go forward), never negative. `bits` is 1..=32.
pub fn unwrap_near(value: u64, bits: u32, reference: u64) -> u64 {
    let modulus = 1u64 << bits;
    let mask = modulus - 1;
    let value = value & mask;
    let base = reference & !mask;
    let candidate = base | value;
    let half = modulus / 2;
    if candidate > reference && candidate - reference > half {
        // Behind: the previous cycle, if there is one.
        candidate.checked_sub(modulus).unwrap_or(candidate)
    } else if candidate < reference && reference - candidate >= half {
        candidate.saturating_add(modulus)
    } else {
        candidate
    }
}

/// Unwraps a stream of wire numbers against the highest accepted so far.
#[derive(Clone, Copy, Debug)]
pub struct Unwrapper {
    bits: u32,
    highest: Option<u64>,
}

impl Unwrapper {
    pub fn new(bits: u32) -> Self {
        Unwrapper { bits, highest: None }
    }
    /// The unwrapped number (does not change the state: call [`accept`](Self::accept)).
    pub fn peek(&self, value: u64) -> u64 {
        match self.highest {
            None => value & ((1u64 << self.bits) - 1),
            Some(h) => unwrap_near(value, self.bits, h),
        }
    }
    pub fn accept(&mut self, unwrapped: u64) {
        self.highest = Some(self.highest.map_or(unwrapped, |h| h.max(unwrapped)));
    }
    /// Forgets the history (the peer restarted).
    pub fn reset(&mut self) {
        self.highest = None;
    }
}

/// RTP timestamp (90 kHz) of a capture time.
pub fn rtp_timestamp(capture: Timestamp) -> u32 {
    (capture.as_us().max(0) * RTP_CLOCK_HZ / 1_000_000) as u32
}

mod feedback;
mod media;

pub use feedback::{read_feedback, write_feedback, SentNumbers};
pub use media::{
    media_datagram, media_parts, spoofed_media, stream_of_video_ssrc, write_media, MediaIn,
    MediaParts, MediaReader,
};

#[cfg(test)]
mod tests;
