//! Sans-IO wire formats: the core's [`Datagram`]s to and from bytes (no socket, no clock).
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

use bytes::{Bytes, BytesMut};
use rtcp::payload_feedbacks::picture_loss_indication::PictureLossIndication;
use rtcp::raw_packet::RawPacket;
use rtcp::transport_feedbacks::transport_layer_cc::{
    PacketStatusChunk, RecvDelta, RunLengthChunk, StatusChunkTypeTcc, SymbolTypeTcc,
    TransportLayerCc,
};
use rtcp::transport_feedbacks::transport_layer_nack::{
    nack_pairs_from_sequence_numbers, TransportLayerNack,
};
use sluice_core::packet::{
    BottleneckReport, Feedback, Packet, PacketKind, PacketReport, TransportFeedback,
    UDP_IP_OVERHEAD,
};
use sluice_core::units::{DataRate, DataSize, TimeDelta, Timestamp};
use webrtc_util::marshal::{Marshal, Unmarshal};

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

/// The RTP header of a media-path packet (the payload is the caller's).
fn media_header(
    p: &Packet,
    stream: u32,
    rtp_ts: u32,
    padding_seq: u16,
) -> Result<rtp::header::Header, WireError> {
    let mut h = rtp::header::Header { version: 2, timestamp: rtp_ts, ..Default::default() };
    let ext = |h: &mut rtp::header::Header, id: u8, bytes: Vec<u8>| {
        h.set_extension(id, Bytes::from(bytes)).map_err(|e| WireError::Encode(e.to_string()))
    };
    h.extension = true;
    h.extension_profile = rtp::header::EXTENSION_PROFILE_ONE_BYTE;
    ext(&mut h, EXT_TRANSPORT_SEQ, (p.transport_seq as u16).to_be_bytes().to_vec())?;
    match p.kind {
        PacketKind::Padding => {
            h.payload_type = PT_PADDING;
            h.ssrc = padding_ssrc(stream);
            h.sequence_number = padding_seq;
        }
        PacketKind::Video | PacketKind::Retransmission => {
            h.payload_type = PT_VIDEO;
            h.ssrc = video_ssrc(stream);
            h.sequence_number = p.media_seq as u16;
            h.marker = p.packet_index + 1 == p.packet_count;
            let ref_delta = p.ref_frame_id.map_or(0, |r| p.frame_id.saturating_sub(r).min(65535));
            let mut d = Vec::with_capacity(FRAME_EXT_LEN);
            d.extend_from_slice(&(p.frame_id as u32).to_be_bytes());
            d.extend_from_slice(&p.packet_index.to_be_bytes());
            d.extend_from_slice(&p.packet_count.to_be_bytes());
            d.extend_from_slice(&(ref_delta as u16).to_be_bytes());
            let mut flags = 0;
            if p.is_keyframe {
                flags |= FLAG_KEYFRAME;
            }
            if p.kind == PacketKind::Retransmission {
                flags |= FLAG_RETRANSMISSION;
            }
            d.push(flags);
            ext(&mut h, EXT_FRAME, d)?;
            if let Some(l) = p.latest_reencoded {
                ext(&mut h, EXT_LATEST_REENCODED, (l as u32).to_be_bytes().to_vec())?;
            }
        }
    }
    Ok(h)
}

/// A spoofed copy of media datagram `b` (fault injection, issue 30): the same packet with
/// the video SSRC of `stream` and without its frame descriptor, so not valid as a whole.
/// `None` if `b` is not a video packet.
pub fn spoofed_media(b: &[u8], stream: u32) -> Option<Vec<u8>> {
    use webrtc_util::marshal::MarshalSize;
    precheck_rtp(b).ok()?;
    let pkt = guarded(|| {
        let mut bytes = Bytes::copy_from_slice(b);
        rtp::packet::Packet::unmarshal(&mut bytes).map_err(|e| WireError::Parse(e.to_string()))
    })
    .ok()?;
    if pkt.header.payload_type != PT_VIDEO {
        return None;
    }
    let mut header = pkt.header.clone();
    header.ssrc = video_ssrc(stream);
    header.del_extension(EXT_FRAME).ok()?;
    let mut out = vec![0u8; header.marshal_size()];
    header.marshal_to(&mut out).ok()?;
    out.extend_from_slice(&pkt.payload);
    Some(out)
}

/// Writes a media-path packet as one RTP datagram of `p.size` minus UDP/IP bytes (or the
/// header plus `payload`, if given). `rtp_ts`: the frame's RTP timestamp; `padding_seq`:
/// the padding stream's sequence number (padding packets only); `stream`: the sender's stream
/// number (a restarted sender starts another), which picks the SSRCs.
pub fn write_media(
    p: &Packet,
    stream: u32,
    rtp_ts: u32,
    padding_seq: u16,
    payload: Option<&[u8]>,
) -> Result<Vec<u8>, WireError> {
    use webrtc_util::marshal::MarshalSize;
    let header = media_header(p, stream, rtp_ts, padding_seq)?;
    let header_len = header.marshal_size();
    let mut out = vec![0u8; header_len];
    header.marshal_to(&mut out).map_err(|e| WireError::Encode(e.to_string()))?;
    match payload {
        Some(b) => out.extend_from_slice(b),
        None => {
            let total = (p.size - UDP_IP_OVERHEAD).as_bytes().max(0) as usize;
            out.resize(total.max(header_len).min(MAX_DATAGRAM), 0);
        }
    }
    if out.len() > MAX_DATAGRAM {
        return Err(WireError::TooLong);
    }
    Ok(out)
}

/// A media datagram taken apart without interpretation: the RTP header fields and Sluice's
/// extensions as raw bytes. The WebRTC transport ([`crate::webrtc`]) carries these through
/// another RTP stack and puts them together again ([`media_datagram`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MediaParts {
    pub payload_type: u8,
    pub ssrc: u32,
    pub sequence: u16,
    pub timestamp: u32,
    pub marker: bool,
    /// Sluice's transport-wide sequence number (low 16 bits).
    pub transport_seq: u16,
    /// The frame descriptor (video packets): 11 bytes.
    pub frame: Option<Vec<u8>>,
    /// Co-RTV's latest re-encoded frame number: 4 bytes.
    pub latest_reencoded: Option<Vec<u8>>,
    pub payload: Bytes,
}

/// Takes a media datagram apart ([`MediaParts`]).
pub fn media_parts(buf: &[u8]) -> Result<MediaParts, WireError> {
    precheck_rtp(buf)?;
    let pkt = guarded(|| {
        let mut b = Bytes::copy_from_slice(buf);
        rtp::packet::Packet::unmarshal(&mut b).map_err(|e| WireError::Parse(e.to_string()))
    })?;
    let h = &pkt.header;
    let transport_seq = h
        .get_extension(EXT_TRANSPORT_SEQ)
        .filter(|e| e.len() == 2)
        .map(|e| u16::from_be_bytes([e[0], e[1]]))
        .ok_or(WireError::MissingExtension("transport-wide sequence number"))?;
    Ok(MediaParts {
        payload_type: h.payload_type,
        ssrc: h.ssrc,
        sequence: h.sequence_number,
        timestamp: h.timestamp,
        marker: h.marker,
        transport_seq,
        frame: h.get_extension(EXT_FRAME).filter(|e| e.len() == FRAME_EXT_LEN).map(|e| e.to_vec()),
        latest_reencoded: h
            .get_extension(EXT_LATEST_REENCODED)
            .filter(|e| e.len() == 4)
            .map(|e| e.to_vec()),
        payload: pkt.payload.clone(),
    })
}

/// Puts a media datagram together from its parts (the inverse of [`media_parts`]).
pub fn media_datagram(m: &MediaParts) -> Result<Vec<u8>, WireError> {
    use webrtc_util::marshal::MarshalSize;
    let mut h = rtp::header::Header {
        version: 2,
        payload_type: m.payload_type,
        ssrc: m.ssrc,
        sequence_number: m.sequence,
        timestamp: m.timestamp,
        marker: m.marker,
        extension: true,
        extension_profile: rtp::header::EXTENSION_PROFILE_ONE_BYTE,
        ..Default::default()
    };
    let mut ext = |id: u8, bytes: &[u8]| {
        h.set_extension(id, Bytes::copy_from_slice(bytes))
            .map_err(|e| WireError::Encode(e.to_string()))
    };
    ext(EXT_TRANSPORT_SEQ, &m.transport_seq.to_be_bytes())?;
    if let Some(f) = &m.frame {
        ext(EXT_FRAME, f)?;
    }
    if let Some(l) = &m.latest_reencoded {
        ext(EXT_LATEST_REENCODED, l)?;
    }
    let mut out = vec![0u8; h.marshal_size()];
    h.marshal_to(&mut out).map_err(|e| WireError::Encode(e.to_string()))?;
    out.extend_from_slice(&m.payload);
    if out.len() > MAX_DATAGRAM {
        return Err(WireError::TooLong);
    }
    Ok(out)
}

/// The sender's stream of a video SSRC ([`video_ssrc`]), if it is one.
pub fn stream_of_video_ssrc(ssrc: u32) -> Option<u32> {
    stream_of(ssrc, SSRC_VIDEO)
}

/// Checks the RTP fixed header and the RFC 8285 extension block so that the `rtp` crate's
/// parser stays inside the buffer. Returns the payload type.
fn precheck_rtp(buf: &[u8]) -> Result<u8, WireError> {
    if buf.len() < 12 {
        return Err(WireError::TooShort);
    }
    if buf.len() > MAX_DATAGRAM {
        return Err(WireError::TooLong);
    }
    if buf[0] >> 6 != 2 {
        return Err(WireError::NotRtp);
    }
    let pt = buf[1] & 0x7f;
    if (72..=79).contains(&pt) {
        return Err(WireError::NotRtp); // RTCP's range (RFC 5761)
    }
    let cc = (buf[0] & 0x0f) as usize;
    let mut off = 12 + 4 * cc;
    if buf.len() < off {
        return Err(WireError::TooShort);
    }
    if buf[0] & 0x10 != 0 {
        if buf.len() < off + 4 {
            return Err(WireError::BadExtensions);
        }
        let profile = u16::from_be_bytes([buf[off], buf[off + 1]]);
        let len = u16::from_be_bytes([buf[off + 2], buf[off + 3]]) as usize * 4;
        off += 4;
        let end = off + len;
        if buf.len() < end {
            return Err(WireError::BadExtensions);
        }
        match profile {
            rtp::header::EXTENSION_PROFILE_ONE_BYTE => {
                let mut i = off;
                while i < end {
                    let b = buf[i];
                    i += 1;
                    if b == 0 {
                        continue;
                    }
                    if b >> 4 == 0x0f {
                        break;
                    }
                    i += (b & 0x0f) as usize + 1;
                    if i > end {
                        return Err(WireError::BadExtensions);
                    }
                }
            }
            rtp::header::EXTENSION_PROFILE_TWO_BYTE => {
                let mut i = off;
                while i < end {
                    let b = buf[i];
                    i += 1;
                    if b == 0 {
                        continue;
                    }
                    if i >= end {
                        return Err(WireError::BadExtensions);
                    }
                    i += buf[i] as usize + 1;
                    if i > end {
                        return Err(WireError::BadExtensions);
                    }
                }
            }
            _ => {}
        }
        off = end;
    }
    if buf[0] & 0x20 != 0 {
        // RTP padding: the last byte counts the padding, header not included.
        let pad = buf[buf.len() - 1] as usize;
        if pad == 0 || buf.len() < off + pad {
            return Err(WireError::TooShort);
        }
    }
    Ok(pt)
}

/// A media datagram, parsed: the packet as the core sees it (64-bit numbers unwrapped, size
/// on the wire with UDP/IP), its RTP timestamp, and the payload.
#[derive(Clone, Debug)]
pub struct MediaIn {
    pub packet: Packet,
    pub rtp_timestamp: u32,
    pub rtp_sequence: u16,
    pub marker: bool,
    pub payload: Bytes,
    /// The sender's stream it belongs to ([`video_ssrc`]).
    pub stream: u32,
}

/// Parses media datagrams, unwrapping their sequence and frame numbers against the highest
/// accepted so far (one per receiving endpoint; the relay has its own). A packet of a stream
/// not seen before (the sender restarted) starts the unwrapping anew; one of a stream it
/// has left is refused ([`WireError::StaleStream`]).
#[derive(Clone, Debug)]
pub struct MediaReader {
    transport: Unwrapper,
    media: Unwrapper,
    frame: Unwrapper,
    stream: Option<u32>,
    /// Streams left behind, newest last (a few).
    left: Vec<u32>,
}

/// Streams a reader remembers having left.
const STREAMS_REMEMBERED: usize = 16;

impl Default for MediaReader {
    fn default() -> Self {
        MediaReader {
            transport: Unwrapper::new(16),
            media: Unwrapper::new(16),
            frame: Unwrapper::new(32),
            stream: None,
            left: Vec::new(),
        }
    }
}

impl MediaReader {
    /// The stream being read (`None` before the first packet).
    pub fn stream(&self) -> Option<u32> {
        self.stream
    }

    /// Forgets everything it has seen (the reading end restarted).
    pub fn reset(&mut self) {
        *self = MediaReader::default();
    }

    /// Parses one datagram received at `now`.
    pub fn read(&mut self, buf: &[u8], now: Timestamp) -> Result<MediaIn, WireError> {
        precheck_rtp(buf)?;
        let pkt = guarded(|| {
            let mut b = Bytes::copy_from_slice(buf);
            rtp::packet::Packet::unmarshal(&mut b).map_err(|e| WireError::Parse(e.to_string()))
        })?;
        let h = &pkt.header;
        let size = DataSize::from_bytes(buf.len() as i64) + UDP_IP_OVERHEAD;
        let tseq = h
            .get_extension(EXT_TRANSPORT_SEQ)
            .filter(|e| e.len() == 2)
            .map(|e| u16::from_be_bytes([e[0], e[1]]))
            .ok_or(WireError::MissingExtension("transport-wide sequence number"))?;
        let stream = match h.payload_type {
            PT_PADDING => stream_of(h.ssrc, SSRC_PADDING),
            PT_VIDEO => stream_of(h.ssrc, SSRC_VIDEO),
            _ => None,
        }
        .ok_or(WireError::UnknownStream)?;
        if self.stream == Some(stream) {
            return self.body(&pkt, tseq, stream, size, now);
        }
        if self.left.contains(&stream) {
            return Err(WireError::StaleStream);
        }
        // The first packet, or the sender restarted: its numbers start afresh. The reader
        // switches only on a packet that is valid as a whole, read with the new stream's
        // fresh state; anything else leaves it on the stream it reads (issue 30: one
        // spoofed datagram must not end a session).
        let mut left = self.left.clone();
        left.extend(self.stream);
        if left.len() > STREAMS_REMEMBERED {
            left.remove(0);
        }
        let mut fresh = MediaReader { stream: Some(stream), left, ..MediaReader::default() };
        let m = match fresh.body(&pkt, tseq, stream, size, now) {
            Ok(m) => m,
            Err(_) if self.stream.is_some() => return Err(WireError::SpoofedStream),
            Err(e) => return Err(e),
        };
        *self = fresh;
        Ok(m)
    }

    /// The rest of [`Self::read`] for a packet of the stream being read.
    fn body(
        &mut self,
        pkt: &rtp::packet::Packet,
        tseq: u16,
        stream: u32,
        size: DataSize,
        now: Timestamp,
    ) -> Result<MediaIn, WireError> {
        let h = &pkt.header;
        let mut packet = match h.payload_type {
            PT_PADDING => Packet::padding(size, now),
            PT_VIDEO => {
                let d = h
                    .get_extension(EXT_FRAME)
                    .filter(|e| e.len() == FRAME_EXT_LEN)
                    .ok_or(WireError::MissingExtension("frame descriptor"))?;
                let frame32 = u32::from_be_bytes([d[0], d[1], d[2], d[3]]) as u64;
                let frame_id = self.frame.peek(frame32);
                let packet_index = u16::from_be_bytes([d[4], d[5]]);
                let packet_count = u16::from_be_bytes([d[6], d[7]]);
                if packet_count == 0 || packet_index >= packet_count {
                    return Err(WireError::Parse(format!(
                        "frame descriptor: part {packet_index} of {packet_count}"
                    )));
                }
                let ref_delta = u16::from_be_bytes([d[8], d[9]]) as u64;
                let flags = d[10];
                let is_keyframe = flags & FLAG_KEYFRAME != 0;
                let latest_reencoded =
                    h.get_extension(EXT_LATEST_REENCODED).filter(|e| e.len() == 4).map(|e| {
                        unwrap_near(
                            u32::from_be_bytes([e[0], e[1], e[2], e[3]]) as u64,
                            32,
                            frame_id,
                        )
                    });
                let mut p = Packet::padding(size, now);
                p.kind = if flags & FLAG_RETRANSMISSION != 0 {
                    PacketKind::Retransmission
                } else {
                    PacketKind::Video
                };
                p.media_seq = self.media.peek(h.sequence_number as u64);
                p.frame_id = frame_id;
                p.packet_index = packet_index;
                p.packet_count = packet_count;
                p.is_keyframe = is_keyframe;
                p.ref_frame_id = if is_keyframe || ref_delta == 0 {
                    None
                } else {
                    frame_id.checked_sub(ref_delta)
                };
                p.latest_reencoded = latest_reencoded;
                self.frame.accept(frame_id);
                self.media.accept(p.media_seq);
                p
            }
            _ => return Err(WireError::UnknownStream),
        };
        packet.transport_seq = self.transport.peek(tseq as u64);
        self.transport.accept(packet.transport_seq);
        Ok(MediaIn {
            packet,
            rtp_timestamp: h.timestamp,
            rtp_sequence: h.sequence_number,
            marker: h.marker,
            payload: pkt.payload.clone(),
            stream,
        })
    }
}

/// Builds an RTCP APP packet (RFC 3550 §6.7): subtype 0, `ssrc`, `name`, `data` (a multiple
/// of 4 bytes).
fn app_packet(ssrc: u32, name: [u8; 4], data: &[u8]) -> Vec<u8> {
    debug_assert_eq!(data.len() % 4, 0);
    let words = (8 + data.len()) / 4; // length in 32-bit words minus one
    let mut out = Vec::with_capacity(12 + data.len());
    out.push(0x80);
    out.push(204);
    out.extend_from_slice(&(words as u16).to_be_bytes());
    out.extend_from_slice(&ssrc.to_be_bytes());
    out.extend_from_slice(&name);
    out.extend_from_slice(data);
    out
}

/// The name and data of an APP packet the `rtcp` crate passed through as raw bytes.
fn parse_app(raw: &[u8]) -> Option<([u8; 4], &[u8])> {
    if raw.len() < 12 || raw[1] != 204 || raw[0] >> 6 != 2 {
        return None;
    }
    let name = [raw[8], raw[9], raw[10], raw[11]];
    Some((name, &raw[12..]))
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}
fn be_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(((be_u32(b, at)? as u64) << 32) | be_u32(b, at + 4)? as u64)
}

/// The transport-cc packet for a transport feedback (run-length chunks; arrival times in
/// 250 µs steps from a 64 ms reference, rounded without drift).
fn twcc_packet(fb: &TransportFeedback, stream: u32) -> TransportLayerCc {
    let first = fb.packets.first().map_or(0, |r| r.transport_seq);
    let reference_us = fb
        .packets
        .iter()
        .find_map(|r| r.arrival_time)
        .map_or(0, |t| t.as_us().max(0) / TWCC_REFERENCE_US * TWCC_REFERENCE_US);
    let mut chunks: Vec<PacketStatusChunk> = Vec::new();
    let mut deltas = Vec::new();
    let mut last_us = reference_us; // the quantised time of the last received packet
    let mut run: Option<(SymbolTypeTcc, u16)> = None;
    let flush = |run: &mut Option<(SymbolTypeTcc, u16)>, chunks: &mut Vec<PacketStatusChunk>| {
        if let Some((symbol, n)) = run.take() {
            chunks.push(PacketStatusChunk::RunLengthChunk(RunLengthChunk {
                type_tcc: StatusChunkTypeTcc::RunLengthChunk,
                packet_status_symbol: symbol,
                run_length: n,
            }));
        }
    };
    for r in &fb.packets {
        let symbol = match r.arrival_time {
            None => SymbolTypeTcc::PacketNotReceived,
            Some(t) => {
                let ticks = ((t.as_us() - last_us) as f64 / TWCC_DELTA_US as f64).round() as i64;
                let ticks = ticks.clamp(i16::MIN as i64, i16::MAX as i64);
                last_us += ticks * TWCC_DELTA_US;
                let symbol = if (0..=255).contains(&ticks) {
                    SymbolTypeTcc::PacketReceivedSmallDelta
                } else {
                    SymbolTypeTcc::PacketReceivedLargeDelta
                };
                deltas.push(RecvDelta { type_tcc_packet: symbol, delta: ticks * TWCC_DELTA_US });
                symbol
            }
        };
        run = match run {
            Some((s, n)) if s == symbol && n < 8191 => Some((s, n + 1)),
            _ => {
                flush(&mut run, &mut chunks);
                Some((symbol, 1))
            }
        };
    }
    flush(&mut run, &mut chunks);
    TransportLayerCc {
        sender_ssrc: SSRC_RECEIVER,
        media_ssrc: video_ssrc(stream),
        base_sequence_number: first as u16,
        packet_status_count: fb.packets.len() as u16,
        reference_time: ((reference_us / TWCC_REFERENCE_US) as u32) & 0x00ff_ffff,
        fb_pkt_count: fb.feedback_seq as u8,
        packet_chunks: chunks,
        recv_deltas: deltas,
    }
}

/// Writes one feedback message as one RTCP datagram; transport-cc, NACK and PLI name the
/// sender's `stream` they are about (its video SSRC).
pub fn write_feedback(f: &Feedback, stream: u32) -> Result<Vec<u8>, WireError> {
    let mut out = BytesMut::new();
    match f {
        Feedback::Transport(fb) => {
            out.extend_from_slice(
                &twcc_packet(fb, stream).marshal().map_err(|e| WireError::Encode(e.to_string()))?,
            );
            let mut data = Vec::with_capacity(8);
            data.extend_from_slice(&(fb.feedback_seq as u32).to_be_bytes());
            data.extend_from_slice(
                &(fb.hold_time.as_us().clamp(0, u32::MAX as i64) as u32).to_be_bytes(),
            );
            out.extend_from_slice(&app_packet(SSRC_RECEIVER, APP_FEEDBACK, &data));
        }
        Feedback::Nack { media_seqs, .. } => {
            let seqs: Vec<u16> = media_seqs.iter().map(|&s| s as u16).collect();
            let nack = TransportLayerNack {
                sender_ssrc: SSRC_RECEIVER,
                media_ssrc: video_ssrc(stream),
                nacks: nack_pairs_from_sequence_numbers(&seqs),
            };
            out.extend_from_slice(&nack.marshal().map_err(|e| WireError::Encode(e.to_string()))?);
        }
        Feedback::KeyframeRequest { .. } => {
            let pli = PictureLossIndication {
                sender_ssrc: SSRC_RECEIVER,
                media_ssrc: video_ssrc(stream),
            };
            out.extend_from_slice(&pli.marshal().map_err(|e| WireError::Encode(e.to_string()))?);
        }
        Feedback::Bottleneck(r) => {
            let mut data = Vec::with_capacity(32);
            data.extend_from_slice(&(r.seq as u32).to_be_bytes());
            data.extend_from_slice(&(r.time.as_us().max(0) as u64).to_be_bytes());
            data.extend_from_slice(
                &(r.queue.as_bytes().clamp(0, u32::MAX as i64) as u32).to_be_bytes(),
            );
            data.extend_from_slice(
                &r.rate.map_or(u64::MAX, |x| x.as_bps().max(0) as u64).to_be_bytes(),
            );
            data.extend_from_slice(&r.drop_from.map_or(u32::MAX, |d| d as u32).to_be_bytes());
            data.extend_from_slice(&0u32.to_be_bytes());
            out.extend_from_slice(&app_packet(SSRC_RELAY, APP_BOTTLENECK, &data));
        }
    }
    Ok(out.to_vec())
}

/// What the sender has put on the wire, to unwrap the numbers feedback refers to.
#[derive(Clone, Copy, Debug, Default)]
pub struct SentNumbers {
    /// The sender's stream: feedback about another one (sent to the sender before it
    /// restarted) is ignored.
    pub stream: u32,
    pub highest_transport_seq: u64,
    pub highest_media_seq: u64,
    pub highest_frame_id: u64,
}

impl SentNumbers {
    pub fn on_sent(&mut self, p: &Packet) {
        self.highest_transport_seq = self.highest_transport_seq.max(p.transport_seq);
        if p.kind == PacketKind::Video {
            self.highest_media_seq = self.highest_media_seq.max(p.media_seq);
            self.highest_frame_id = self.highest_frame_id.max(p.frame_id);
        }
    }
}

/// Decodes a transport-cc packet into the core's transport feedback.
fn read_twcc(cc: &TransportLayerCc, sent: &SentNumbers) -> Result<TransportFeedback, WireError> {
    let mut symbols = Vec::with_capacity(cc.packet_status_count as usize);
    for c in &cc.packet_chunks {
        match c {
            PacketStatusChunk::RunLengthChunk(r) => {
                symbols.extend(std::iter::repeat_n(r.packet_status_symbol, r.run_length as usize))
            }
            PacketStatusChunk::StatusVectorChunk(v) => {
                symbols.extend(v.symbol_list.iter().copied())
            }
        }
        if symbols.len() >= cc.packet_status_count as usize {
            break;
        }
    }
    if symbols.len() < cc.packet_status_count as usize {
        return Err(WireError::Parse("transport-cc: fewer statuses than packets".into()));
    }
    symbols.truncate(cc.packet_status_count as usize);
    let base = unwrap_near(cc.base_sequence_number as u64, 16, sent.highest_transport_seq);
    let mut t_us = cc.reference_time as i64 * TWCC_REFERENCE_US;
    let mut deltas = cc.recv_deltas.iter();
    let mut packets = Vec::with_capacity(symbols.len());
    for (i, s) in symbols.iter().enumerate() {
        let arrival_time = match s {
            SymbolTypeTcc::PacketNotReceived => None,
            _ => {
                let d = deltas
                    .next()
                    .ok_or_else(|| WireError::Parse("transport-cc: missing delta".into()))?;
                t_us += d.delta;
                Some(Timestamp::from_us(t_us))
            }
        };
        packets.push(PacketReport { transport_seq: base + i as u64, arrival_time });
    }
    Ok(TransportFeedback {
        flow: 0,
        feedback_seq: cc.fb_pkt_count as u64,
        packets,
        hold_time: TimeDelta::ZERO,
        ecn_ce_count: 0,
    })
}

/// Walks a compound RTCP datagram's packet headers so that the `rtcp` crate's parsers stay
/// inside the buffer: every packet is RTCP version 2, fits, and feedback packets are at
/// least as long as their fixed part (a NACK shorter than its two SSRCs makes the crate
/// read past the end).
fn precheck_rtcp(buf: &[u8]) -> Result<(), WireError> {
    let mut i = 0;
    while i < buf.len() {
        let h = buf.get(i..i + 4).ok_or(WireError::TooShort)?;
        if h[0] >> 6 != 2 || !(192..=223).contains(&h[1]) {
            return Err(WireError::NotRtcp);
        }
        let words = u16::from_be_bytes([h[2], h[3]]) as usize;
        let (pt, fmt) = (h[1], h[0] & 0x1f);
        let min_words = match (pt, fmt) {
            (205, 15) => 4,           // transport-cc: SSRCs, base, count, reference time
            (205, _) | (206, _) => 2, // RTPFB/PSFB: the two SSRCs
            (204, _) => 2,            // APP: SSRC and name
            _ => 0,
        };
        if words < min_words {
            return Err(WireError::TooShort);
        }
        i += 4 + 4 * words;
        if i > buf.len() {
            return Err(WireError::TooShort);
        }
    }
    Ok(())
}

/// Parses one RTCP datagram into the feedback messages it carries. `sent`: what the sender
/// has sent, to unwrap sequence and frame numbers.
pub fn read_feedback(buf: &[u8], sent: &SentNumbers) -> Result<Vec<Feedback>, WireError> {
    if buf.len() < 4 {
        return Err(WireError::TooShort);
    }
    if buf.len() > MAX_DATAGRAM {
        return Err(WireError::TooLong);
    }
    if buf[0] >> 6 != 2 || !(192..=223).contains(&buf[1]) {
        return Err(WireError::NotRtcp);
    }
    precheck_rtcp(buf)?;
    let packets = guarded(|| {
        let mut b = Bytes::copy_from_slice(buf);
        rtcp::packet::unmarshal(&mut b).map_err(|e| WireError::Parse(e.to_string()))
    })?;
    let mut out = Vec::new();
    let mut pending_transport: Option<usize> = None;
    let ours = video_ssrc(sent.stream);
    for p in &packets {
        let any = p.as_any();
        if let Some(cc) = any.downcast_ref::<TransportLayerCc>() {
            if cc.media_ssrc != ours {
                pending_transport = None;
                continue;
            }
            out.push(Feedback::Transport(read_twcc(cc, sent)?));
            pending_transport = Some(out.len() - 1);
        } else if let Some(n) = any.downcast_ref::<TransportLayerNack>() {
            if n.media_ssrc != ours {
                continue;
            }
            let mut seqs: Vec<u64> = n
                .nacks
                .iter()
                .flat_map(|pair| pair.packet_list())
                .map(|s| unwrap_near(s as u64, 16, sent.highest_media_seq))
                .collect();
            seqs.sort_unstable();
            seqs.dedup();
            out.push(Feedback::Nack { flow: 0, media_seqs: seqs });
        } else if let Some(pli) = any.downcast_ref::<PictureLossIndication>() {
            if pli.media_ssrc != ours {
                continue;
            }
            out.push(Feedback::KeyframeRequest { flow: 0 });
        } else if let Some(raw) = any.downcast_ref::<RawPacket>() {
            let Some((name, data)) = parse_app(&raw.0) else { continue };
            match name {
                APP_FEEDBACK => {
                    let (Some(seq), Some(hold)) = (be_u32(data, 0), be_u32(data, 4)) else {
                        return Err(WireError::Parse("SLFB too short".into()));
                    };
                    if let Some(Feedback::Transport(fb)) =
                        pending_transport.and_then(|i| out.get_mut(i))
                    {
                        fb.hold_time = TimeDelta::from_us(hold as i64);
                        fb.feedback_seq = seq as u64;
                    }
                }
                APP_BOTTLENECK => {
                    let parsed = (|| {
                        let seq = be_u32(data, 0)? as u64;
                        let time = be_u64(data, 4)?;
                        let queue = be_u32(data, 12)?;
                        let rate = be_u64(data, 16)?;
                        let drop = be_u32(data, 24)?;
                        Some(BottleneckReport {
                            flow: 0,
                            seq,
                            time: Timestamp::from_us(time.min(i64::MAX as u64 / 2) as i64),
                            queue: DataSize::from_bytes(queue as i64),
                            rate: (rate != u64::MAX)
                                .then(|| DataRate::from_bps(rate.min(i64::MAX as u64 / 2) as i64)),
                            drop_from: (drop != u32::MAX)
                                .then(|| unwrap_near(drop as u64, 32, sent.highest_frame_id)),
                        })
                    })();
                    match parsed {
                        Some(r) => out.push(Feedback::Bottleneck(r)),
                        None => return Err(WireError::Parse("SLBN too short".into())),
                    }
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
