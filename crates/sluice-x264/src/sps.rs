//! One edit of x264's sequence parameter set: `gaps_in_frame_num_value_allowed_flag`.
//!
//! A sender that recovers from loss by predicting from an older frame (Salsify's re-referencing,
//! Co-RTV's re-encodes) leaves encodes the receiver never gets, so the stream it delivers has
//! gaps in `frame_num` (H.264 §7.4.3). x264 always writes the flag as 0, which declares such a
//! gap an unintentional loss (§8.2.5.2): a decoder conceals it, and ffmpeg then outputs fewer
//! pictures than it was given. With the flag at 1 the gap is legal and the decoder fills it
//! with "non-existing" frames that are never output (§8.2.5.2), which is what the receiver
//! model assumes. The flag changes nothing in how the frames were coded.
//!
//! The SPS is parsed up to the flag (§7.3.2.1.1); an SPS it cannot parse (picture order count
//! type 1, scaling matrices) is left as it is.

/// `au` (Annex-B NAL units) with the flag set in every SPS it holds; unchanged without one.
pub fn allow_frame_num_gaps(au: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(au.len() + 4);
    let starts = start_codes(au);
    if starts.is_empty() {
        return au.to_vec();
    }
    out.extend_from_slice(&au[..starts[0].0]);
    for (k, &(at, code_len)) in starts.iter().enumerate() {
        let begin = at + code_len;
        let end = starts.get(k + 1).map_or(au.len(), |&(next, _)| next);
        out.extend_from_slice(&au[at..begin]);
        let nal = &au[begin..end];
        match nal.first() {
            Some(&h) if h & 0x1f == 7 => match patched_sps(nal) {
                Some(p) => out.extend_from_slice(&p),
                None => out.extend_from_slice(nal),
            },
            _ => out.extend_from_slice(nal),
        }
    }
    out
}

/// (offset, length) of every `00 00 01` start code (the zero byte of a four-byte one stays
/// with the bytes before it, which are copied unchanged).
fn start_codes(b: &[u8]) -> Vec<(usize, usize)> {
    let mut v = Vec::new();
    let mut i = 0;
    while i + 3 <= b.len() {
        if b[i] == 0 && b[i + 1] == 0 && b[i + 2] == 1 {
            v.push((i, 3));
            i += 3;
        } else {
            i += 1;
        }
    }
    v
}

fn unescape(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut zeros = 0;
    for &x in b {
        if zeros >= 2 && x == 3 {
            zeros = 0;
            continue;
        }
        zeros = if x == 0 { zeros + 1 } else { 0 };
        out.push(x);
    }
    out
}

fn escape(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len() + 4);
    let mut zeros = 0;
    for &x in b {
        if zeros >= 2 && x <= 3 {
            out.push(3);
            zeros = 0;
        }
        zeros = if x == 0 { zeros + 1 } else { 0 };
        out.push(x);
    }
    out
}

struct Bits<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Bits<'_> {
    fn u(&mut self, n: usize) -> Option<u32> {
        let mut v = 0u32;
        for _ in 0..n {
            let byte = *self.b.get(self.pos >> 3)?;
            v = (v << 1) | u32::from((byte >> (7 - (self.pos & 7))) & 1);
            self.pos += 1;
        }
        Some(v)
    }

    fn ue(&mut self) -> Option<u32> {
        let mut zeros = 0;
        while self.u(1)? == 0 {
            zeros += 1;
            if zeros > 31 {
                return None;
            }
        }
        Some((1u32 << zeros) - 1 + self.u(zeros)?)
    }
}

/// The SPS NAL unit (header byte included) with the flag set; `None` if it cannot be parsed.
fn patched_sps(nal: &[u8]) -> Option<Vec<u8>> {
    let mut rbsp = unescape(&nal[1..]);
    let bit = gaps_flag_bit(&rbsp)?;
    *rbsp.get_mut(bit >> 3)? |= 0x80 >> (bit & 7);
    let mut out = vec![nal[0]];
    out.extend(escape(&rbsp));
    Some(out)
}

/// The bit position of `gaps_in_frame_num_value_allowed_flag` in an SPS's RBSP.
fn gaps_flag_bit(rbsp: &[u8]) -> Option<usize> {
    let mut r = Bits { b: rbsp, pos: 0 };
    let profile = r.u(8)?;
    r.u(16)?; // constraint flags, level
    r.ue()?; // seq_parameter_set_id
    if matches!(profile, 100 | 110 | 122 | 244 | 44 | 83 | 86 | 118 | 128 | 138 | 139 | 134 | 135) {
        if r.ue()? == 3 {
            r.u(1)?; // separate_colour_plane_flag
        }
        r.ue()?; // bit_depth_luma_minus8
        r.ue()?; // bit_depth_chroma_minus8
        r.u(1)?; // qpprime_y_zero_transform_bypass_flag
        if r.u(1)? == 1 {
            return None; // seq_scaling_matrix_present_flag: x264 does not write one
        }
    }
    r.ue()?; // log2_max_frame_num_minus4
    match r.ue()? {
        0 => {
            r.ue()?; // log2_max_pic_order_cnt_lsb_minus4
        }
        2 => {}
        _ => return None,
    }
    r.ue()?; // max_num_ref_frames
    Some(r.pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_round_trips_and_guards_start_codes() {
        let raw = [0u8, 0, 1, 0, 0, 0, 0, 3, 5, 0, 0];
        let esc = escape(&raw);
        assert_eq!(esc, [0, 0, 3, 1, 0, 0, 3, 0, 0, 3, 3, 5, 0, 0]);
        assert_eq!(unescape(&esc), raw);
    }

    /// The flag of the first SPS in `au`.
    fn flag(au: &[u8]) -> bool {
        let (at, len) =
            start_codes(au).into_iter().find(|&(at, len)| au[at + len] & 0x1f == 7).unwrap();
        let rbsp = unescape(&au[at + len + 1..]);
        let bit = gaps_flag_bit(&rbsp).unwrap();
        rbsp[bit >> 3] & (0x80 >> (bit & 7)) != 0
    }

    #[test]
    fn an_x264_keyframe_gets_the_flag_and_nothing_else_changes() {
        use crate::{I420Frame, X264Config, X264Encoder};
        let mut cfg = X264Config::new(64, 48, 30, 500_000);
        cfg.refs = 16;
        let mut enc = X264Encoder::open(&cfg).unwrap();
        let au = enc.encode(&I420Frame::new_grey(64, 48), true).unwrap().data;
        assert!(!flag(&au), "x264 writes 0");
        let patched = allow_frame_num_gaps(&au);
        assert!(flag(&patched));
        assert_eq!(allow_frame_num_gaps(&patched), patched, "idempotent");
        // everything after the SPS is byte for byte the same
        let tail = |b: &[u8]| {
            let starts = start_codes(b);
            let k = starts.iter().position(|&(at, len)| b[at + len] & 0x1f == 7).unwrap();
            b[starts[k + 1].0..].to_vec()
        };
        assert_eq!(tail(&au), tail(&patched));
        assert!(patched.len().abs_diff(au.len()) <= 1);
    }

    #[test]
    fn a_stream_without_an_sps_is_unchanged() {
        let au = [0u8, 0, 0, 1, 0x41, 0x9a, 0, 0, 3, 1, 0x80];
        assert_eq!(allow_frame_num_gaps(&au), au);
    }
}
