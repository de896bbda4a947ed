//! Feedback: compound RTCP (transport-cc, NACK, PLI, Sluice's APP packets), built and
//! parsed.

use super::*;
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
};
use sluice_core::units::{DataRate, DataSize, TimeDelta, Timestamp};
use webrtc_util::marshal::Marshal;

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
        if h[0] >> 6 != 2 || !is_rtcp_type(h[1]) {
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
    if buf[0] >> 6 != 2 || !is_rtcp_type(buf[1]) {
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
