//! Packetizer: splits an encoded frame into RTP-like packets of at most `max_payload` bytes,
//! with sizes as equal as possible (as libwebrtc's H.264 packetizer balances fragments),
//! and the RTP-like header that carries the transport-wide sequence number and Sluice's frame
//! descriptor on the wire.

use crate::packet::{FlowId, Packet, PacketKind, PACKET_OVERHEAD};
use crate::units::{DataSize, Timestamp};

/// Default payload limit per packet (bytes), as in the seeds' WebRTC forks (~1200).
pub const DEFAULT_MAX_PAYLOAD: i64 = 1200;
/// The most packets one frame may have: the receiver's limit
/// ([`crate::receiver::MAX_FRAME_PACKETS`], about 5 MB of video at 1200 B per packet).
pub const MAX_PACKETS_PER_FRAME: u16 = crate::receiver::MAX_FRAME_PACKETS;

/// Splits frames into packets. Media sequence numbers are the sender's to assign, when a
/// packet leaves (so that a frame purged before it left leaves no gap).
#[derive(Debug)]
pub struct Packetizer {
    flow: FlowId,
    max_payload: DataSize,
    /// Header bytes on the wire per packet (RTP header, extensions, UDP/IP).
    overhead: DataSize,
}

impl Packetizer {
    /// A packetizer with Sluice's 32-byte RTP header plus UDP/IP ([`PACKET_OVERHEAD`]).
    pub fn new(flow: FlowId, max_payload: DataSize) -> Self {
        Packetizer::with_overhead(flow, max_payload, PACKET_OVERHEAD)
    }

    /// A packetizer whose packets carry `overhead` header bytes on the wire (a scheme with
    /// more header extensions, e.g. Co-RTV's latest-re-encoded frame number).
    pub fn with_overhead(flow: FlowId, max_payload: DataSize, overhead: DataSize) -> Self {
        assert!(max_payload.as_bytes() > 0, "max_payload must be positive");
        Packetizer { flow, max_payload, overhead }
    }

    /// The largest payload of one packet.
    pub fn max_payload(&self) -> DataSize {
        self.max_payload
    }

    /// Packets for one frame of `payload` bytes, or `None` if the frame needs more packets
    /// than a frame descriptor can count ([`MAX_PACKETS_PER_FRAME`]). Sequence numbers and
    /// send times are filled in when the pacer releases them.
    pub fn packetize(
        &mut self,
        frame_id: u64,
        payload: DataSize,
        is_keyframe: bool,
        ref_frame_id: Option<u64>,
        now: Timestamp,
    ) -> Option<Vec<Packet>> {
        let total = payload.as_bytes().max(1);
        let max = self.max_payload.as_bytes();
        let count = (total + max - 1) / max;
        if count > MAX_PACKETS_PER_FRAME as i64 {
            return None;
        }
        let base = total / count;
        let extra = total % count;
        (0..count)
            .map(|i| {
                let payload = base + if i < extra { 1 } else { 0 };
                Packet {
                    flow: self.flow,
                    kind: PacketKind::Video,
                    transport_seq: 0,
                    media_seq: 0,
                    frame_id,
                    packet_index: i as u16,
                    packet_count: count as u16,
                    ref_frame_id,
                    is_keyframe,
                    latest_reencoded: None,
                    size: DataSize::from_bytes(payload) + self.overhead,
                    send_time: now,
                    probe_cluster_id: None,
                    enqueue_time: now,
                    ecn: crate::packet::Ecn::NotEct,
                }
            })
            .collect::<Vec<_>>()
            .into()
    }
}

/// Sluice's RTP header: the 12-byte fixed header (V=2, PT, sequence number, timestamp, SSRC),
/// a one-byte-header extension (RFC 8285) with the transport-wide sequence number (id 1,
/// 2 bytes, as in draft-holmer-rmcat-transport-wide-cc-extensions) and a frame descriptor
/// (id 2, 11 bytes: frame id (4), packet index (2), packet count (2), reference delta (2),
/// flags (1)), padded to a 4-byte boundary: 32 bytes in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtpHeader {
    /// The RTP payload type (7 bits).
    pub payload_type: u8,
    /// The RTP marker bit (for video, conventionally set on a frame's last packet).
    pub marker: bool,
    /// The RTP sequence number (the media sequence number's low 16 bits).
    pub sequence_number: u16,
    /// The RTP timestamp, in units of the media clock.
    pub rtp_timestamp: u32,
    /// The synchronisation source identifier (SSRC) of the stream.
    pub ssrc: u32,
    /// The transport-wide sequence number (extension id 1), the low 16 bits of
    /// [`Packet::transport_seq`].
    pub transport_seq: u16,
    /// The frame id (frame descriptor, extension id 2).
    pub frame_id: u32,
    /// The packet's index within its frame.
    pub packet_index: u16,
    /// The number of packets of the frame.
    pub packet_count: u16,
    /// frame_id - ref_frame_id, 0 for a keyframe.
    pub ref_delta: u16,
    /// Whether the frame is a keyframe (bit 0 of the descriptor's flags byte).
    pub is_keyframe: bool,
}

/// Errors when parsing an RTP header from the wire. Malformed input is reported, never a
/// panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtpParseError {
    /// Fewer bytes than the header ([`RtpHeader::SIZE`]).
    TooShort,
    /// The RTP version field is not 2.
    BadVersion,
    /// The extension bit, the one-byte-header profile (`0xBEDE`) or the two extensions' ids
    /// and lengths are not where Sluice writes them.
    MissingExtension,
}

impl std::fmt::Display for RtpParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RtpParseError::TooShort => write!(f, "packet shorter than the RTP header"),
            RtpParseError::BadVersion => write!(f, "RTP version is not 2"),
            RtpParseError::MissingExtension => write!(f, "Sluice header extensions missing"),
        }
    }
}
impl std::error::Error for RtpParseError {}

impl RtpHeader {
    /// The header's size on the wire, in bytes (as [`crate::packet::RTP_HEADER_SIZE`]).
    pub const SIZE: usize = 32;

    /// Appends the header's [`Self::SIZE`] bytes to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(0x90); // V=2, P=0, X=1, CC=0
        out.push(((self.marker as u8) << 7) | (self.payload_type & 0x7f));
        out.extend_from_slice(&self.sequence_number.to_be_bytes());
        out.extend_from_slice(&self.rtp_timestamp.to_be_bytes());
        out.extend_from_slice(&self.ssrc.to_be_bytes());
        out.extend_from_slice(&[0xBE, 0xDE]);
        out.extend_from_slice(&4u16.to_be_bytes()); // 4 words of extensions
        out.push((1 << 4) | 1); // id 1, len 2
        out.extend_from_slice(&self.transport_seq.to_be_bytes());
        out.push((2 << 4) | 10); // id 2, len 11
        out.extend_from_slice(&self.frame_id.to_be_bytes());
        out.extend_from_slice(&self.packet_index.to_be_bytes());
        out.extend_from_slice(&self.packet_count.to_be_bytes());
        out.extend_from_slice(&self.ref_delta.to_be_bytes());
        out.push(self.is_keyframe as u8);
        out.push(0); // padding to the word boundary
    }

    /// Parses a header from the start of `buf`; returns it and the payload after it.
    pub fn parse(buf: &[u8]) -> Result<(RtpHeader, &[u8]), RtpParseError> {
        if buf.len() < Self::SIZE {
            return Err(RtpParseError::TooShort);
        }
        if buf[0] >> 6 != 2 {
            return Err(RtpParseError::BadVersion);
        }
        if buf[0] & 0x10 == 0 || buf[12..14] != [0xBE, 0xDE] || buf[16] != 0x11 || buf[19] != 0x2A {
            return Err(RtpParseError::MissingExtension);
        }
        let u16_at = |i: usize| u16::from_be_bytes([buf[i], buf[i + 1]]);
        let u32_at = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let h = RtpHeader {
            marker: buf[1] & 0x80 != 0,
            payload_type: buf[1] & 0x7f,
            sequence_number: u16_at(2),
            rtp_timestamp: u32_at(4),
            ssrc: u32_at(8),
            transport_seq: u16_at(17),
            frame_id: u32_at(20),
            packet_index: u16_at(24),
            packet_count: u16_at(26),
            ref_delta: u16_at(28),
            is_keyframe: buf[30] & 1 != 0,
        };
        Ok((h, &buf[Self::SIZE..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::RTP_HEADER_SIZE;

    #[test]
    fn splits_evenly_and_numbers_packets() {
        let mut p = Packetizer::new(0, DataSize::from_bytes(1200));
        let pkts =
            p.packetize(7, DataSize::from_bytes(2500), false, Some(6), Timestamp::ZERO).unwrap();
        assert_eq!(pkts.len(), 3);
        let payloads: Vec<i64> =
            pkts.iter().map(|p| (p.size - PACKET_OVERHEAD).as_bytes()).collect();
        assert_eq!(payloads, vec![834, 833, 833]);
        assert_eq!(pkts.iter().map(|p| p.packet_index).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(pkts.iter().all(|p| p.packet_count == 3 && p.frame_id == 7));
        let next =
            p.packetize(8, DataSize::from_bytes(100), false, Some(7), Timestamp::ZERO).unwrap();
        assert_eq!(next.len(), 1);
        // A frame beyond what the receiver accepts is refused, not truncated or a panic.
        let huge = DataSize::from_bytes(1200 * MAX_PACKETS_PER_FRAME as i64 + 1);
        assert!(p.packetize(9, huge, false, Some(8), Timestamp::ZERO).is_none());
    }

    #[test]
    fn header_round_trips() {
        let h = RtpHeader {
            payload_type: 96,
            marker: true,
            sequence_number: 65535,
            rtp_timestamp: 90_000,
            ssrc: 0xdead_beef,
            transport_seq: 4242,
            frame_id: 123_456,
            packet_index: 3,
            packet_count: 9,
            ref_delta: 1,
            is_keyframe: false,
        };
        let mut buf = Vec::new();
        h.write(&mut buf);
        assert_eq!(buf.len(), RtpHeader::SIZE);
        assert_eq!(buf.len() as i64, RTP_HEADER_SIZE.as_bytes());
        buf.extend_from_slice(b"payload");
        let (parsed, rest) = RtpHeader::parse(&buf).unwrap();
        assert_eq!(parsed, h);
        assert_eq!(rest, b"payload");
    }

    #[test]
    fn malformed_headers_are_errors() {
        assert_eq!(RtpHeader::parse(&[0x80; 10]), Err(RtpParseError::TooShort));
        let mut buf = vec![0u8; 40];
        assert_eq!(RtpHeader::parse(&buf), Err(RtpParseError::BadVersion));
        buf[0] = 0x80;
        assert_eq!(RtpHeader::parse(&buf), Err(RtpParseError::MissingExtension));
    }
}
