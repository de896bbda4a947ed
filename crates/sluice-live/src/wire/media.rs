//! Media: RTP packets with Sluice's header extensions (transport-wide sequence number, frame
//! descriptor, latest re-encoded frame), built and parsed; the reader of a stream.

use super::*;
use bytes::Bytes;
use sluice_core::packet::{Packet, PacketKind, UDP_IP_OVERHEAD};
use sluice_core::units::{DataSize, Timestamp};
use webrtc_util::marshal::{Marshal, Unmarshal};

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
        // RFC 8285 elements: padding bytes (0), then an ID and a length, in one byte (ID 15
        // ends the block) or in two; each element must end inside the block.
        let one_byte = profile == rtp::header::EXTENSION_PROFILE_ONE_BYTE;
        if one_byte || profile == rtp::header::EXTENSION_PROFILE_TWO_BYTE {
            let mut i = off;
            while i < end {
                let b = buf[i];
                i += 1;
                if b == 0 {
                    continue;
                }
                let len = if one_byte {
                    if b >> 4 == 0x0f {
                        break;
                    }
                    (b & 0x0f) as usize + 1
                } else {
                    if i >= end {
                        return Err(WireError::BadExtensions);
                    }
                    i += 1;
                    buf[i - 1] as usize
                };
                i += len;
                if i > end {
                    return Err(WireError::BadExtensions);
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An RTP header (payload type 96) with the extension block `profile` / `body`.
    fn with_extensions(profile: u16, body: &[u8]) -> Vec<u8> {
        let mut b = vec![0x90, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
        b.extend_from_slice(&profile.to_be_bytes());
        b.extend_from_slice(&((body.len() / 4) as u16).to_be_bytes());
        b.extend_from_slice(body);
        b.push(0xaa); // payload
        b
    }

    #[test]
    fn extension_elements_must_end_inside_their_block() {
        let (one, two) =
            (rtp::header::EXTENSION_PROFILE_ONE_BYTE, rtp::header::EXTENSION_PROFILE_TWO_BYTE);
        let ok = |p, body: &[u8]| precheck_rtp(&with_extensions(p, body));
        // One-byte: ID 1, 2 bytes; padding; ID 15 ends the block whatever follows.
        assert_eq!(ok(one, &[0x11, 7, 7, 0]), Ok(96));
        assert_eq!(ok(one, &[0, 0, 0xf0, 0xff]), Ok(96));
        assert_eq!(ok(one, &[0x13, 7, 7, 7, 7, 0, 0, 0]), Ok(96));
        assert_eq!(ok(one, &[0, 0, 0, 0x13]), Err(WireError::BadExtensions));
        // Two-byte: ID, length, data; a length byte outside or data past the block.
        assert_eq!(ok(two, &[1, 2, 7, 7]), Ok(96));
        assert_eq!(ok(two, &[0, 0, 1, 0]), Ok(96));
        assert_eq!(ok(two, &[0, 0, 0, 1]), Err(WireError::BadExtensions));
        assert_eq!(ok(two, &[1, 3, 7, 7]), Err(WireError::BadExtensions));
        // Another profile's block is skipped whole.
        assert_eq!(ok(0x1234, &[0xff, 0xff, 0xff, 0xff]), Ok(96));
    }
}
