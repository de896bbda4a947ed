//! H.264 over RTP (RFC 6184, packetization mode 1) for the core's packets, sans-IO.
//!
//! The core's packetizer decides how many packets a frame has (`n`, equal shares of the
//! frame's size); RFC 6184 splits at NAL boundaries. [`payloads`] makes exactly `n` RTP
//! payloads from an Annex B frame: with one NAL (an x264 P frame: one slice), FU-A
//! fragments of equal size (a single NAL unit packet when `n` is 1); with several (a
//! keyframe: SPS, PPS, SEI, then the slice), every NAL but the last in the first packet (a
//! STAP-A, or a single NAL unit packet if there is one), the last NAL in FU-A fragments over
//! the other `n - 1`. The payloads are then a few bytes (FU headers) to a few hundred (a
//! keyframe's parameter sets in the first packet) off the core's equal shares; the relay's
//! link charges the real sizes. The receiver depacketizes with webrtc-rs's `H264Packet`.

use crate::wire::WireError;
use bytes::Bytes;
use rtp::codecs::h264::H264Packet;
use rtp::packetizer::Depacketizer;

const FU_A: u8 = 28;
const STAP_A: u8 = 24;

/// The NAL units of an Annex B stream (start codes removed; empty units skipped).
pub fn nal_units(annexb: &[u8]) -> Vec<&[u8]> {
    let mut starts = Vec::new(); // (start of the start code, start of the NAL)
    let mut i = 0;
    while i + 3 <= annexb.len() {
        if annexb[i] == 0 && annexb[i + 1] == 0 && annexb[i + 2] == 1 {
            let code_start = if i > 0 && annexb[i - 1] == 0 { i - 1 } else { i };
            starts.push((code_start, i + 3));
            i += 3;
        } else {
            i += 1;
        }
    }
    let mut out = Vec::with_capacity(starts.len());
    for (k, &(_, nal_start)) in starts.iter().enumerate() {
        let end = starts.get(k + 1).map_or(annexb.len(), |&(code_start, _)| code_start);
        if nal_start < end {
            out.push(&annexb[nal_start..end]);
        }
    }
    out
}

/// FU-A fragments of one NAL unit, `parts` of them (at least 2), equal shares of its body.
fn fu_a(nal: &[u8], parts: usize, out: &mut Vec<Vec<u8>>) {
    let header = nal[0];
    let body = &nal[1..];
    let indicator = (header & 0xe0) | FU_A;
    for i in 0..parts {
        let r = crate::endpoint::share(body.len(), i as u16, parts as u16);
        let mut fu_header = header & 0x1f;
        if i == 0 {
            fu_header |= 0x80;
        }
        if i + 1 == parts {
            fu_header |= 0x40;
        }
        let mut p = Vec::with_capacity(2 + r.len());
        p.push(indicator);
        p.push(fu_header);
        p.extend_from_slice(&body[r]);
        out.push(p);
    }
}

/// Exactly `n` RTP payloads (RFC 6184, mode 1) for an Annex B frame, or `None` if it cannot
/// be done (no NAL units, more fragments than body bytes, a NAL over 65535 bytes in a
/// STAP-A).
pub fn payloads(annexb: &[u8], n: usize) -> Option<Vec<Vec<u8>>> {
    let nals = nal_units(annexb);
    let (last, rest) = nals.split_last()?;
    if n == 0 {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    let first_packet_nals: Vec<&[u8]> = if n == 1 { nals.clone() } else { rest.to_vec() };
    match first_packet_nals.len() {
        0 => {}
        1 => out.push(first_packet_nals[0].to_vec()),
        _ => {
            let mut p = vec![(first_packet_nals[0][0] & 0x60) | STAP_A];
            for nal in &first_packet_nals {
                let len = u16::try_from(nal.len()).ok()?;
                p.extend_from_slice(&len.to_be_bytes());
                p.extend_from_slice(nal);
            }
            out.push(p);
        }
    }
    if n > 1 {
        let parts = n - out.len();
        if parts == 1 {
            out.push(last.to_vec());
        } else if parts > 1 && last.len() > parts {
            fu_a(last, parts, &mut out);
        } else {
            return None;
        }
    }
    (out.len() == n).then_some(out)
}

/// Whether a STAP-A payload's units fit it exactly (the crate's depacketizer reads past the
/// end of one whose last unit has a 1-byte length field, found by `wire::tests`' fuzzer).
fn stap_a_fits(p: &[u8]) -> bool {
    let mut i = 1;
    while i < p.len() {
        let Some(len) = p.get(i..i + 2) else { return false };
        i += 2 + u16::from_be_bytes([len[0], len[1]]) as usize;
    }
    i == p.len()
}

/// Reassembles a frame's payloads (in packet order) into Annex B; an error if they are not
/// valid RFC 6184 payloads.
pub fn depacketize(payloads: &[Bytes]) -> Result<Vec<u8>, WireError> {
    let mut d = H264Packet::default();
    let mut out = Vec::new();
    for p in payloads {
        if p.first().is_some_and(|b| b & 0x1f == STAP_A) && !stap_a_fits(p) {
            return Err(WireError::Parse("STAP-A units overrun the payload".into()));
        }
        let b =
            crate::wire::guarded(|| d.depacketize(p).map_err(|e| WireError::Parse(e.to_string())))?;
        out.extend_from_slice(&b);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annexb(nals: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        for (i, n) in nals.iter().enumerate() {
            v.extend_from_slice(if i == 0 { &[0, 0, 0, 1] } else { &[0, 0, 1] });
            v.extend_from_slice(n);
        }
        v
    }

    fn canonical(annexb: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        for n in nal_units(annexb) {
            v.extend_from_slice(&[0, 0, 0, 1]);
            v.extend_from_slice(n);
        }
        v
    }

    #[test]
    fn round_trips_through_the_crate_depacketizer_with_exactly_n_packets() {
        let sps: Vec<u8> = vec![0x67, 0x42, 0xc0, 0x1e, 0xd9];
        let pps: Vec<u8> = vec![0x68, 0xce, 0x3c, 0x80];
        let idr: Vec<u8> =
            std::iter::once(0x65).chain((0..5000).map(|i| (i * 7 % 251) as u8 | 1)).collect();
        let p_slice: Vec<u8> =
            std::iter::once(0x41).chain((0..2500).map(|i| (i % 200) as u8 | 1)).collect();
        for (frame, ns) in [
            (annexb(&[&sps, &pps, &idr]), vec![1, 2, 3, 5]),
            (annexb(&[&p_slice]), vec![1, 2, 3, 4]),
        ] {
            for n in ns {
                let ps = payloads(&frame, n).unwrap();
                assert_eq!(ps.len(), n);
                let bytes: Vec<Bytes> = ps.into_iter().map(Bytes::from).collect();
                assert_eq!(depacketize(&bytes).unwrap(), canonical(&frame), "n = {n}");
            }
        }
        assert!(payloads(&[], 2).is_none());
        assert!(payloads(&annexb(&[&[0x41, 1]]), 5).is_none(), "more parts than bytes");
    }
}
