//! Sum of absolute transformed differences between two frames (ACE §4.2 Eq. 3): the 4x4
//! Hadamard transform of the luma difference, summed over the frame. ACE-C predicts a
//! frame's relative size from it before encoding (Eq. 4), as x264's own rate control does
//! with its lookahead SATD.
//!
//! The transform is linear, so `sum |H(a) - H(b)| = sum |H(a - b)|`: one transform per
//! block of differences. Frames are first downscaled 2x2 (x264's lookahead also works on a
//! half-resolution frame), which quarters the cost and keeps the ranking of frames.

/// A half-resolution luma plane, the input of [`satd`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LumaPlane {
    /// Width in pixels, also the row stride of `pixels`.
    pub width: usize,
    /// Height in pixels (rows of `pixels`).
    pub height: usize,
    /// Luma samples row by row, `width * height` bytes.
    pub pixels: Vec<u8>,
}

impl LumaPlane {
    /// Averages 2x2 blocks of a full-resolution luma plane (`stride` bytes per row).
    /// Odd trailing rows and columns are dropped.
    pub fn downscale_2x(luma: &[u8], width: usize, height: usize, stride: usize) -> Self {
        let (w, h) = (width / 2, height / 2);
        let mut pixels = Vec::with_capacity(w * h);
        for y in 0..h {
            let r0 = &luma[2 * y * stride..];
            let r1 = &luma[(2 * y + 1) * stride..];
            for x in 0..w {
                let s = u16::from(r0[2 * x])
                    + u16::from(r0[2 * x + 1])
                    + u16::from(r1[2 * x])
                    + u16::from(r1[2 * x + 1]);
                pixels.push(((s + 2) / 4) as u8);
            }
        }
        LumaPlane { width: w, height: h, pixels }
    }
}

/// SATD of `cur` against `prev` over all whole 4x4 blocks, with x264's normalisation
/// (the Hadamard sum halved). Planes of different sizes give `None`.
pub fn satd(cur: &LumaPlane, prev: &LumaPlane) -> Option<u64> {
    if cur.width != prev.width || cur.height != prev.height {
        return None;
    }
    let w = cur.width;
    let mut total = 0u64;
    for by in (0..cur.height / 4 * 4).step_by(4) {
        for bx in (0..w / 4 * 4).step_by(4) {
            let mut d = [[0i32; 4]; 4];
            for (y, row) in d.iter_mut().enumerate() {
                let i = (by + y) * w + bx;
                for (x, v) in row.iter_mut().enumerate() {
                    *v = i32::from(cur.pixels[i + x]) - i32::from(prev.pixels[i + x]);
                }
            }
            total += hadamard_4x4_abs_sum(&d) / 2;
        }
    }
    Some(total)
}

/// Sum of absolute values of the 4x4 Hadamard transform of `d` (unnormalised).
fn hadamard_4x4_abs_sum(d: &[[i32; 4]; 4]) -> u64 {
    let mut t = [[0i32; 4]; 4];
    for (i, r) in d.iter().enumerate() {
        let (s01, d01, s23, d23) = (r[0] + r[1], r[0] - r[1], r[2] + r[3], r[2] - r[3]);
        t[i] = [s01 + s23, d01 + d23, s01 - s23, d01 - d23];
    }
    let [t0, t1, t2, t3] = t;
    let mut sum = 0u64;
    for j in 0..4 {
        let (s01, d01) = (t0[j] + t1[j], t0[j] - t1[j]);
        let (s23, d23) = (t2[j] + t3[j], t2[j] - t3[j]);
        for v in [s01 + s23, d01 + d23, s01 - s23, d01 - d23] {
            sum += u64::from(v.unsigned_abs());
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plane(w: usize, h: usize, f: impl Fn(usize, usize) -> u8) -> LumaPlane {
        let pixels = (0..h).flat_map(|y| (0..w).map(move |x| (x, y))).map(|(x, y)| f(x, y));
        LumaPlane { width: w, height: h, pixels: pixels.collect() }
    }

    #[test]
    fn identical_frames_have_zero_satd() {
        let a = plane(16, 8, |x, y| (x * 7 + y * 13) as u8);
        assert_eq!(satd(&a, &a), Some(0));
    }

    #[test]
    fn a_flat_offset_is_only_dc() {
        // A constant difference c in a 4x4 block: the Hadamard DC is 16c, all else 0;
        // halved: 8c per block. 16x8 has 8 blocks.
        let a = plane(16, 8, |_, _| 100);
        let b = plane(16, 8, |_, _| 97);
        assert_eq!(satd(&a, &b), Some(8 * 3 * 8));
    }

    #[test]
    fn a_single_pixel_spreads_over_all_coefficients() {
        // One pixel differing by 10: every one of the 16 coefficients is +-10.
        let a = plane(4, 4, |x, y| if (x, y) == (2, 1) { 60 } else { 50 });
        let b = plane(4, 4, |_, _| 50);
        assert_eq!(satd(&a, &b), Some(16 * 10 / 2));
    }

    #[test]
    fn more_change_gives_more_satd_and_sizes_must_match() {
        let base = plane(32, 32, |x, y| ((x * 5) ^ (y * 3)) as u8);
        let small = plane(32, 32, |x, y| ((x * 5) ^ (y * 3)) as u8 ^ u8::from(x % 8 == 0));
        let big = plane(32, 32, |x, y| ((x * 5 + 17) ^ (y * 3)) as u8);
        let (s, b) = (satd(&small, &base).unwrap(), satd(&big, &base).unwrap());
        assert!(0 < s && s < b, "{s} vs {b}");
        assert_eq!(satd(&plane(8, 8, |_, _| 0), &base), None);
    }

    #[test]
    fn downscale_averages_2x2_blocks_with_stride() {
        // 4x2 visible, stride 6 (two bytes of padding per row).
        let luma = [10, 20, 30, 41, 0, 0, 30, 40, 50, 60, 0, 0];
        let p = LumaPlane::downscale_2x(&luma, 4, 2, 6);
        assert_eq!((p.width, p.height), (2, 1));
        assert_eq!(p.pixels, vec![25, 45]); // (10+20+30+40)/4, (30+41+50+60+2)/4 = 45
    }
}
