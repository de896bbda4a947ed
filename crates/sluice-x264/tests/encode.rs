//! End-to-end tests against the system libx264, and ffmpeg for decoding: `$SLUICE_FFMPEG`
//! (`make test` points it at imageio-ffmpeg's binary) or `ffmpeg` on the PATH.

use sluice_x264::{
    AnalysisParams, FrameType, I420Frame, I420Planes, MeMethod, Partitions, X264Config,
    X264Encoder, X264Error,
};
use std::process::Command;

const W: u32 = 320;
const H: u32 = 240;
const FPS: u32 = 30;

/// Deterministic test clip: a diagonal gradient moving 2 px/frame, a static noise texture
/// that moves with it, and a little fresh noise per frame (so every frame costs bits).
struct Clip {
    texture: Vec<u8>,
    rng: u64,
}

impl Clip {
    fn new() -> Self {
        let mut c = Clip { texture: Vec::new(), rng: 0x9E37_79B9_7F4A_7C15 };
        let n = (W * 2 * H) as usize;
        c.texture = (0..n).map(|_| (c.next() % 48) as u8).collect();
        c
    }
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32
    }
    fn frame(&mut self, i: u32) -> I420Frame {
        let mut f = I420Frame::new_grey(W, H);
        let shift = (i * 2) as usize;
        for y in 0..H as usize {
            for x in 0..W as usize {
                let xs = x + shift;
                let grad = ((xs + y) % 256) as u32 / 2 + 40;
                let tex = self.texture
                    [(y * (W as usize * 2) + xs % (W as usize * 2)) % self.texture.len()]
                    as u32;
                let fresh = (self.next() % 6) as u32;
                f.y[y * W as usize + x] = (grad + tex + fresh).min(255) as u8;
            }
        }
        let cw = (W / 2) as usize;
        for y in 0..(H / 2) as usize {
            for x in 0..cw {
                f.u[y * cw + x] = (96 + ((x + shift / 2) % 64)) as u8;
                f.v[y * cw + x] = (160 - (y % 64)) as u8;
            }
        }
        f
    }
}

fn open(bitrate_bps: u64) -> X264Encoder {
    X264Encoder::open(&X264Config::new(W, H, FPS, bitrate_bps)).expect("open x264")
}

#[test]
fn clip_at_1mbps_hits_target_and_starts_with_keyframe() {
    let mut enc = open(1_000_000);
    let mut clip = Clip::new();
    let mut sizes = Vec::new();
    for i in 0..60 {
        let pic = enc.encode(&clip.frame(i), false).unwrap();
        assert!(!pic.is_empty(), "frame {i} produced no output (zerolatency should not delay)");
        assert_eq!(pic.pts, i as i64);
        assert!(pic.qp > 0.0 && pic.qp <= 69.0, "qp {}", pic.qp);
        if i == 0 {
            assert!(pic.is_keyframe, "frame 0 must be a keyframe");
            assert_eq!(pic.frame_type, Some(FrameType::Idr));
            // Annex B with SPS first.
            assert_eq!(&pic.data[..4], &[0, 0, 0, 1]);
            assert_eq!(pic.data[4] & 0x1f, 7, "first NAL should be an SPS");
        } else {
            assert!(!pic.is_keyframe, "unexpected keyframe at frame {i}");
        }
        if i % 10 == 0 {
            eprintln!(
                "frame {i}: {} B qp {} {:?} in {:?}",
                pic.size_bytes(),
                pic.qp,
                pic.frame_type,
                pic.encode_time
            );
        }
        sizes.push(pic.size_bytes());
    }
    let second: usize = sizes[FPS as usize..].iter().sum();
    let target = 1_000_000.0 / 8.0; // bytes in one second
    let ratio = second as f64 / target;
    eprintln!("second-second bytes {second}, target {target}, ratio {ratio:.3}");
    assert!((0.7..=1.3).contains(&ratio), "size ratio {ratio:.3} outside ±30%");
}

/// MAE's CBR baseline: with filler data a static picture, which costs almost nothing, is
/// padded to the constant bitrate; without it the encoder undershoots.
#[test]
fn filler_data_pads_a_cheap_stream_to_the_bitrate() {
    let run = |filler: bool| {
        let mut cfg = X264Config::new(W, H, FPS, 1_000_000);
        cfg.vbv_buffer_bits = 1_000_000 / u64::from(FPS) + 1000; // one frame + 1 kbit
        cfg.filler = filler;
        let mut enc = X264Encoder::open(&cfg).expect("open x264");
        let grey = I420Frame::new_grey(W, H);
        let sizes: Vec<usize> =
            (0..60).map(|_| enc.encode(&grey, false).unwrap().size_bytes()).collect();
        sizes[FPS as usize..].iter().sum::<usize>() as f64 / (1_000_000.0 / 8.0)
    };
    let with = run(true);
    let without = run(false);
    eprintln!("second-second bytes over the bitrate: with filler {with:.3}, without {without:.3}");
    assert!((0.9..=1.1).contains(&with), "with filler: {with:.3} of the bitrate");
    assert!(without < 0.2, "without filler: {without:.3} of the bitrate");
}

/// Frame sizes of the first `frames` frames of the clip from `enc`, with `rate(i)` (bitrate,
/// VBV max rate, VBV buffer; bits and bits per second) set before frame `i` where it is
/// `Some`.
fn sizes_with_rates(
    enc: &mut X264Encoder,
    frames: u32,
    mut rate: impl FnMut(u32) -> Option<(u64, u64, u64)>,
) -> Vec<f64> {
    let mut clip = Clip::new();
    (0..frames)
        .map(|i| {
            if let Some((bitrate, max, buffer)) = rate(i) {
                enc.reconfigure_rate(bitrate, max, buffer).unwrap();
            }
            enc.encode(&clip.frame(i), false).unwrap().size_bytes() as f64
        })
        .collect()
}

#[test]
fn reconfigure_rate_drops_frame_size() {
    let mut enc = open(2_000_000);
    let sizes =
        sizes_with_rates(&mut enc, 60, |i| (i == 30).then_some((200_000, 200_000, 100_000)));
    assert_eq!(enc.rate().bitrate_bps, 200_000);
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    let before = mean(&sizes[10..30]);
    let after = mean(&sizes[40..60]);
    eprintln!(
        "mean frame size before {before:.0} B, after {after:.0} B, ratio {:.2}",
        before / after
    );
    assert!(before > 4.0 * after, "before {before:.0} after {after:.0}");
}

/// What MAE's tight VBV does to libx264 (docs/results/mae.md): frames `tight` at a 40 ms
/// buffer, the rest at 0.5 s, the VBV max rate `max_factor` x the 1 Mbps ABR bitrate from
/// frame 20 on. Frame sizes.
fn vbv_run(tight: std::ops::Range<u32>, max_factor: f64) -> Vec<f64> {
    let r = 1_000_000;
    sizes_with_rates(&mut open(r), 80, |i| {
        let max = if i >= 20 { (r as f64 * max_factor) as u64 } else { r };
        let buffer = if tight.contains(&i) { r * 40 / 1000 } else { r / 2 };
        Some((r, max, buffer))
    })
}

#[test]
fn after_a_tight_vbv_x264_undershoots_and_a_max_rate_above_the_bitrate_changes_nothing() {
    let sum = |s: &[f64]| s.iter().sum::<f64>();
    let plain = vbv_run(0..0, 1.0);
    // A VBV max rate above the ABR bitrate is not used at all (MAE's frames after a tight
    // period cannot be helped by letting the buffer fill faster); below it, it is.
    assert_eq!(vbv_run(0..0, 2.0), plain);
    assert!(sum(&vbv_run(0..0, 0.5)[20..]) < 0.7 * sum(&plain[20..]));
    // Five tight frames, then the half-second buffer again: the ten frames after them are
    // far under the plain stream's (59 % of its bytes with libx264 0.164), the next ones
    // back near it.
    let mae = vbv_run(30..35, 1.0);
    assert_eq!(vbv_run(30..35, 3.0), mae);
    let after = sum(&mae[35..45]) / sum(&plain[35..45]);
    let later = sum(&mae[55..80]) / sum(&plain[55..80]);
    eprintln!("after the tight frames {after:.2} of the plain stream's bytes, later {later:.2}");
    assert!(after < 0.8, "{after:.2}");
    assert!((0.8..1.25).contains(&later), "{later:.2}");
}

/// Why MAE's frames after a tight one cannot be helped by a faster-filling VBV: x264 takes a
/// new ABR bitrate only when its VBV max rate is at the bitrate ("bitrate (CBR only)" in
/// `x264_encoder_reconfig`), so an encoder that follows a congestion controller runs in the
/// mode where the buffer refills at the bitrate and no faster. Here a 0.2 -> 2 Mbps change:
/// with the max rate at 2x the bitrate x264 stays at its old bitrate.
#[test]
fn x264_takes_a_new_abr_bitrate_only_with_the_max_rate_at_the_bitrate() {
    let rise = |max_factor: f64| {
        let mut cfg = X264Config::new(W, H, FPS, 200_000);
        cfg.vbv_max_rate_bps = (200_000.0 * max_factor) as u64;
        let mut enc = X264Encoder::open(&cfg).expect("open x264");
        let max = (2_000_000.0 * max_factor) as u64;
        let sizes =
            sizes_with_rates(&mut enc, 60, |i| (i == 30).then_some((2_000_000, max, 1_000_000)));
        sizes[40..60].iter().sum::<f64>() / sizes[10..30].iter().sum::<f64>()
    };
    let (at, above) = (rise(1.0), rise(2.0));
    eprintln!(
        "frames after a 0.2 -> 2 Mbps change over those before: max rate at the bitrate \
               {at:.2}x, at 2x {above:.2}x"
    );
    assert!(at > 4.0, "{at:.2}");
    assert!(above < 2.0, "{above:.2}");
}

#[test]
fn constant_qp_holds_the_quantiser_and_reports_psnr() {
    let encode_at = |qp: u8| {
        let cfg = X264Config { constant_qp: Some(qp), psnr: true, ..X264Config::new(W, H, FPS, 1) };
        let mut enc = X264Encoder::open(&cfg).unwrap();
        assert_eq!(enc.reconfigure_rate(500_000, 500_000, 250_000), Err(X264Error::VbvRequired));
        let mut clip = Clip::new();
        let pics: Vec<_> = (0..20).map(|i| enc.encode(&clip.frame(i), false).unwrap()).collect();
        for pic in &pics[1..] {
            assert_eq!(pic.qp, f64::from(qp), "P frames stay at the constant QP");
        }
        let bytes: usize = pics.iter().map(|p| p.size_bytes()).sum();
        let psnr = pics.iter().map(|p| p.psnr_y.expect("psnr requested")).sum::<f64>() / 20.0;
        (bytes, psnr)
    };
    let (fine_bytes, fine_psnr) = encode_at(20);
    let (coarse_bytes, coarse_psnr) = encode_at(36);
    eprintln!(
        "qp 20: {fine_bytes} B {fine_psnr:.1} dB; qp 36: {coarse_bytes} B {coarse_psnr:.1} dB"
    );
    assert!(fine_bytes > 2 * coarse_bytes);
    assert!(fine_psnr > coarse_psnr + 3.0 && coarse_psnr > 20.0);
    // Without the flag there is no PSNR; out-of-range quantisers are refused.
    let mut enc = open(500_000);
    assert_eq!(enc.encode(&Clip::new().frame(0), false).unwrap().psnr_y, None);
    for qp in [0, 52] {
        let cfg = X264Config { constant_qp: Some(qp), ..X264Config::new(W, H, FPS, 1) };
        assert!(matches!(X264Encoder::open(&cfg), Err(X264Error::InvalidRate(_))));
    }
}

#[test]
fn forced_keyframe_at_30() {
    let mut enc = open(1_000_000);
    let mut clip = Clip::new();
    for i in 0..40 {
        let pic = enc.encode(&clip.frame(i), i == 30).unwrap();
        if i == 0 || i == 30 {
            assert!(pic.is_keyframe, "frame {i} should be a keyframe");
            assert_eq!(pic.frame_type, Some(FrameType::Idr));
            assert_eq!(pic.data[4] & 0x1f, 7, "keyframe {i} should repeat the SPS");
        } else {
            assert!(!pic.is_keyframe, "unexpected keyframe at {i}");
            assert_eq!(pic.frame_type, Some(FrameType::P), "frame {i}");
        }
    }
}

#[test]
fn invalidated_reference_stream_decodes_with_ffmpeg() {
    let mut enc = open(1_000_000);
    let mut clip = Clip::new();
    let mut stream = Vec::new();
    let mut types = Vec::new();
    for i in 0..45 {
        if i == 25 {
            // Frame 24 "was lost": stop predicting from it.
            enc.invalidate_reference(24).unwrap();
        }
        if i == 31 {
            enc.invalidate_reference(40).unwrap();
        }
        if i == 35 {
            // Change analysis mid-stream too, to exercise reconfig in the decoded stream.
            enc.reconfigure_analysis(&AnalysisParams {
                partitions: Partitions::I4X4 | Partitions::P8X8,
                me_method: MeMethod::Hex,
                subpel_refine: 4,
                trellis: 1,
            })
            .unwrap();
            assert_eq!(enc.analysis().me_method, MeMethod::Hex);
        }
        let pic = enc.encode(&clip.frame(i), false).unwrap();
        types.push((pic.is_keyframe, pic.frame_type));
        stream.extend_from_slice(&pic.data);
    }
    assert!(enc.flush().unwrap().is_empty());
    assert_eq!(enc.encode(&clip.frame(0), false), Err(X264Error::Flushed));
    // With one reference frame, the frame after the invalidation has nothing to predict
    // from, and x264 codes it as an IDR frame; invalidating a pts newer than every encoded
    // frame (frame 40 at frame 30) is a no-op.
    assert_eq!(types[25], (true, Some(FrameType::Idr)), "frame after invalidation");
    assert_eq!(types[26], (false, Some(FrameType::P)));
    assert_eq!(types[31], (false, Some(FrameType::P)), "future pts must not invalidate");

    assert_eq!(decode(&stream), 45, "every frame decodes");
}

/// The ffmpeg to decode with: `$SLUICE_FFMPEG`, else `ffmpeg` on the PATH. A decode check
/// that cannot run is a failure, not a skip.
fn ffmpeg() -> String {
    let exe = std::env::var("SLUICE_FFMPEG").unwrap_or_else(|_| "ffmpeg".into());
    if Command::new(&exe).arg("-version").output().is_err() {
        panic!(
            "no ffmpeg to decode with ({exe}): run the tests with `make test`, which sets \
             SLUICE_FFMPEG to imageio-ffmpeg's, or put ffmpeg on the PATH"
        );
    }
    exe
}

/// Decodes an Annex-B stream with ffmpeg; fails on any error or warning; returns the number
/// of frames decoded.
fn decode(stream: &[u8]) -> usize {
    let path = std::env::temp_dir().join(format!(
        "sluice-x264-test-{}-{}.264",
        std::process::id(),
        stream.len()
    ));
    std::fs::write(&path, stream).unwrap();
    let out = Command::new(ffmpeg())
        .args(["-nostdin", "-v", "warning", "-f", "h264", "-i"])
        .arg(&path)
        .args(["-f", "rawvideo", "-pix_fmt", "yuv420p", "-"])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ffmpeg failed: {stderr}");
    assert!(stderr.trim().is_empty(), "ffmpeg printed: {stderr}");
    let frame_bytes = (W * H * 3 / 2) as usize;
    assert_eq!(out.stdout.len() % frame_bytes, 0);
    out.stdout.len() / frame_bytes
}

#[test]
fn re_referencing_after_dropped_frames_is_a_p_frame_and_decodes() {
    // Co-RTV's case: frames 20-22 are dropped in the network; the sender invalidates them
    // and encodes the next frame from frame 19. With four reference frames x264 still holds
    // frame 19, so the frame is a P frame; the delivered stream (without 20-22) decodes,
    // every frame of it.
    let mut cfg = X264Config::new(W, H, FPS, 1_000_000);
    cfg.refs = 4;
    let mut enc = X264Encoder::open(&cfg).unwrap();
    let mut clip = Clip::new();
    let mut delivered = Vec::new();
    let mut frames = 0;
    let mut types = Vec::new();
    for i in 0..40u32 {
        if i == 23 {
            enc.invalidate_reference(20).unwrap(); // pts 20, 21, 22 are gone
        }
        let pic = enc.encode(&clip.frame(i), false).unwrap();
        types.push(pic.frame_type);
        if !(20..23).contains(&i) {
            delivered.extend_from_slice(&pic.data);
            frames += 1;
        }
    }
    assert_eq!(types[23], Some(FrameType::P), "{types:?}");
    assert!(types[1..].iter().all(|t| *t == Some(FrameType::P)));
    assert_eq!(decode(&delivered), frames);
    // With one reference frame the same invalidation needs an IDR.
    let mut one = open(1_000_000);
    let mut clip = Clip::new();
    for i in 0..24u32 {
        if i == 23 {
            one.invalidate_reference(20).unwrap();
        }
        let pic = one.encode(&clip.frame(i), false).unwrap();
        if i == 23 {
            assert_eq!(pic.frame_type, Some(FrameType::Idr));
        }
    }
}

#[test]
fn invalid_config_and_input_return_typed_errors() {
    let good = X264Config::new(W, H, FPS, 1_000_000);

    let odd = X264Config { width: 321, ..good.clone() };
    assert!(matches!(
        X264Encoder::open(&odd),
        Err(X264Error::InvalidDimensions { width: 321, .. })
    ));
    let zero_h = X264Config { height: 0, ..good.clone() };
    assert!(matches!(X264Encoder::open(&zero_h), Err(X264Error::InvalidDimensions { .. })));
    let zero_fps = X264Config { fps_num: 0, ..good.clone() };
    assert!(matches!(
        X264Encoder::open(&zero_fps),
        Err(X264Error::InvalidFrameRate { num: 0, den: 1 })
    ));
    let zero_den = X264Config { fps_den: 0, ..good.clone() };
    assert!(matches!(X264Encoder::open(&zero_den), Err(X264Error::InvalidFrameRate { .. })));
    let zero_rate = X264Config { bitrate_bps: 0, ..good.clone() };
    assert!(matches!(X264Encoder::open(&zero_rate), Err(X264Error::InvalidRate(_))));
    let half_vbv = X264Config { vbv_buffer_bits: 0, ..good.clone() };
    assert!(matches!(X264Encoder::open(&half_vbv), Err(X264Error::InvalidRate(_))));
    let preset = X264Config { preset: "warpspeed".into(), ..good.clone() };
    assert_eq!(
        X264Encoder::open(&preset).unwrap_err(),
        X264Error::UnknownPreset("warpspeed".into())
    );
    let nul = X264Config { preset: "fast\0".into(), ..good.clone() };
    assert!(matches!(X264Encoder::open(&nul), Err(X264Error::InvalidString { field: "preset" })));
    let profile = X264Config { profile: Some("ultra".into()), ..good.clone() };
    assert!(matches!(X264Encoder::open(&profile), Err(X264Error::InvalidProfile(_))));
    let subme = X264Config { subpel_refine: Some(12), ..good.clone() };
    assert!(matches!(X264Encoder::open(&subme), Err(X264Error::InvalidAnalysis(_))));

    // Bad frames.
    let mut enc = X264Encoder::open(&good).unwrap();
    let wrong = I420Frame::new_grey(160, 120);
    assert!(matches!(enc.encode(&wrong, false), Err(X264Error::FrameSizeMismatch { .. })));
    let mut short = I420Frame::new_grey(W, H);
    short.v.truncate(10);
    assert!(matches!(enc.encode(&short, false), Err(X264Error::PlaneTooSmall { plane: 2, .. })));
    let f = I420Frame::new_grey(W, H);
    let bad_stride = I420Planes { y_stride: 100, ..f.as_planes() };
    assert!(matches!(
        enc.encode_planes(&bad_stride, false),
        Err(X264Error::InvalidStride { plane: 0, .. })
    ));
    // Padded strides work.
    let (ys, cs) = (W as usize + 32, (W / 2) as usize + 16);
    let y = vec![100u8; ys * H as usize];
    let c = vec![128u8; cs * (H / 2) as usize];
    let padded = I420Planes {
        width: W,
        height: H,
        y: &y,
        y_stride: ys,
        u: &c,
        u_stride: cs,
        v: &c,
        v_stride: cs,
    };
    assert!(enc.encode_planes(&padded, false).unwrap().is_keyframe);

    // Bad reconfigurations.
    assert!(matches!(enc.reconfigure_rate(0, 1, 1), Err(X264Error::InvalidRate(_))));
    assert_eq!(enc.reconfigure_rate(100_000, 0, 0), Err(X264Error::VbvRequired));
    let analysis = AnalysisParams {
        partitions: Partitions::I4X4,
        me_method: MeMethod::Dia,
        subpel_refine: 1,
        trellis: 3,
    };
    assert!(matches!(enc.reconfigure_analysis(&analysis), Err(X264Error::InvalidAnalysis(_))));

    // No VBV at open: rate cannot be reconfigured.
    let no_vbv = X264Config { vbv_max_rate_bps: 0, vbv_buffer_bits: 0, ..good.clone() };
    let mut enc = X264Encoder::open(&no_vbv).unwrap();
    assert_eq!(enc.reconfigure_rate(500_000, 500_000, 250_000), Err(X264Error::VbvRequired));

    // subme 0 at open is sticky; main profile has no 8x8 transform.
    let sub0 = X264Config { subpel_refine: Some(0), profile: Some("main".into()), ..good.clone() };
    let mut enc = X264Encoder::open(&sub0).unwrap();
    assert!(!enc.transform_8x8_enabled());
    let a = AnalysisParams {
        partitions: Partitions::I4X4,
        me_method: MeMethod::Dia,
        subpel_refine: 2,
        trellis: 0,
    };
    assert!(matches!(enc.reconfigure_analysis(&a), Err(X264Error::InvalidAnalysis(_))));
    let a = AnalysisParams { partitions: Partitions::I8X8, subpel_refine: 0, ..a };
    assert!(matches!(enc.reconfigure_analysis(&a), Err(X264Error::InvalidAnalysis(_))));

    // High profile keeps 8x8 and accepts I8X8.
    let high = X264Config { profile: Some("high".into()), ..good };
    let mut enc = X264Encoder::open(&high).unwrap();
    assert!(enc.transform_8x8_enabled());
    let a = AnalysisParams {
        partitions: Partitions::ALL,
        me_method: MeMethod::Umh,
        subpel_refine: 6,
        trellis: 2,
    };
    enc.reconfigure_analysis(&a).unwrap();
    assert!(enc.analysis().partitions.contains(Partitions::I8X8));
}

#[test]
fn encoder_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<X264Encoder>();
    let mut enc = open(500_000);
    let handle = std::thread::spawn(move || {
        let mut clip = Clip::new();
        enc.encode(&clip.frame(0), false).unwrap().is_keyframe
    });
    assert!(handle.join().unwrap());
}

/// ACE §5.1's planned-size correction: a quant offset on one frame shrinks that frame, at
/// some quality, and leaves the frames before it alone.
#[test]
fn quant_offset_shrinks_one_frame() {
    use sluice_core::encoder::Complexity;
    use sluice_x264::complexity::{analysis_for, qp_offset_for_size_scale};
    use sluice_x264::PictureOptions;

    let open_at = |preset: &str| {
        let cfg =
            X264Config { preset: preset.into(), psnr: true, ..X264Config::new(W, H, FPS, 800_000) };
        X264Encoder::open(&cfg).unwrap()
    };
    // Four encoders in lockstep on the same frames: c0; c0 with frame 30 offset by 3 QP;
    // frame 30 at c2; frame 30 at c2 planned at 0.65x.
    let mut encs: Vec<_> = (0..4).map(|_| open_at("superfast")).collect();
    for e in &mut encs {
        e.reconfigure_analysis(&analysis_for(Complexity::C0)).unwrap();
    }
    let mut clip = Clip::new();
    let mut out = vec![Vec::new(); 4];
    for i in 0..32 {
        let frame = clip.frame(i);
        for (k, e) in encs.iter_mut().enumerate() {
            let switched = i == 30 && k >= 2;
            let level = if switched { Complexity::C2 } else { Complexity::C0 };
            e.reconfigure_analysis(&analysis_for(level)).unwrap();
            let qp_offset = match (i, k) {
                (30, 1) => 3.0,
                (30, 3) => qp_offset_for_size_scale(0.65),
                _ => 0.0,
            };
            let pic = e.encode_with(&frame, PictureOptions { qp_offset, ..Default::default() });
            out[k].push(pic.unwrap());
        }
    }
    let size = |k: usize, i: usize| out[k][i].size_bytes() as f64;
    let psnr = |k: usize, i: usize| out[k][i].psnr_y.unwrap();
    for k in 0..4 {
        eprintln!(
            "encoder {k}: frame 30 {} B {:.2} dB, frame 31 {} B",
            size(k, 30),
            psnr(k, 30),
            size(k, 31)
        );
    }
    // Before frame 30 the streams are identical.
    assert!((0..30).all(|i| out[1][i].data == out[0][i].data));
    // +3 QP: a clearly smaller, worse frame.
    assert!(size(1, 30) < 0.85 * size(0, 30));
    assert!(psnr(1, 30) < psnr(0, 30) - 0.3);
    // c2 planned at 0.65x: smaller and worse than c2 alone. (Whether c2 alone is better than
    // c0 depends on the content: see the Python test on the shipped clip.)
    assert!(size(3, 30) < 0.9 * size(2, 30) && psnr(3, 30) < psnr(2, 30));

    // Offsets need adaptive quantisation (off in ultrafast) and a finite value.
    let mut fast = open_at("ultrafast");
    let opts = |qp_offset| PictureOptions { qp_offset, ..Default::default() };
    assert_eq!(fast.encode_with(&clip.frame(0), opts(1.0)), Err(X264Error::QpOffsetNeedsAq));
    let mut enc = open_at("superfast");
    assert!(matches!(
        enc.encode_with(&clip.frame(0), opts(f32::NAN)),
        Err(X264Error::InvalidQpOffset(_))
    ));
    assert!(enc.encode_with(&clip.frame(0), opts(0.0)).is_ok());
}

/// `frames` frames of the synthetic clip as a raw yuv420p file in `dir`, as the front end
/// decodes a video.
fn write_clip(dir: &std::path::Path, frames: u32) -> std::path::PathBuf {
    let raw = dir.join("clip.yuv");
    let mut clip = Clip::new();
    let mut bytes = Vec::new();
    for i in 0..frames {
        let f = clip.frame(i);
        bytes.extend_from_slice(&f.y);
        bytes.extend_from_slice(&f.u);
        bytes.extend_from_slice(&f.v);
    }
    std::fs::write(&raw, &bytes).unwrap();
    raw
}

#[test]
fn the_sim_encoder_re_references_by_frame_id_and_reencodes_a_source_frame() {
    use sluice_core::encoder::{EncodeTimeMode, Encoder, FrameRequest, RateControl, X264Settings};
    use sluice_core::units::{DataRate, TimeDelta, Timestamp};
    use sluice_x264::sim_encoder::X264SimEncoder;
    // A raw clip of 30 frames on disk, as the front end decodes one.
    let dir = std::env::temp_dir().join(format!("sluice-x264-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let raw = write_clip(&dir, 30);
    let stream = dir.join("stream.264");
    let settings = X264Settings {
        video_path: raw.to_string_lossy().into(),
        width: W,
        height: H,
        video_frames: 30,
        refs: 4,
        encode_time: EncodeTimeMode::Modeled,
        bitstream_path: Some(stream.to_string_lossy().into()),
        ..Default::default()
    };
    let mut enc = X264SimEncoder::open(&settings, 30.0).unwrap();
    let rc = RateControl::abr_vbv(DataRate::from_kbps(800), TimeDelta::from_ms(500));
    let at = |i: u64| Timestamp::from_ms(i as i64 * 33);
    let mut kinds = Vec::new();
    // Frames 0..=12 for sources 0..=12; frames 10-12 are then "dropped" and sources 10-12
    // encoded again as frames 13-15 from frame 9; then sources 13.. as frames 16...
    for i in 0..13u64 {
        kinds.push(enc.encode(&FrameRequest::for_slot(i, at(i), rc)).is_keyframe);
    }
    for (k, source) in (10..13u64).enumerate() {
        let req = FrameRequest {
            frame_id: 13 + k as u64,
            reference: if k == 0 { Some(9) } else { None },
            ..FrameRequest::for_slot(source, at(source), rc)
        };
        let f = enc.encode(&req);
        assert_eq!(f.frame_id, 13 + k as u64);
        kinds.push(f.is_keyframe);
    }
    for source in 13..20u64 {
        let req =
            FrameRequest { frame_id: source + 3, ..FrameRequest::for_slot(source, at(source), rc) };
        kinds.push(enc.encode(&req).is_keyframe);
    }
    assert!(enc.failure().is_none(), "{:?}", enc.failure());
    drop(enc); // flushes the stream and its index
    assert_eq!(kinds.iter().filter(|k| **k).count(), 1, "one keyframe, the first: {kinds:?}");
    // The delivered stream: frames 0-9, then 13.. (10-12 dropped), cut with the index.
    let data = std::fs::read(&stream).unwrap();
    let index: Vec<(usize, usize)> = std::fs::read_to_string(format!("{}.idx", stream.display()))
        .unwrap()
        .lines()
        .map(|l| {
            let mut it = l.split_whitespace().map(|x| x.parse::<usize>().unwrap());
            (it.next().unwrap(), it.next().unwrap())
        })
        .collect();
    assert_eq!(index.len(), 23);
    let mut delivered = Vec::new();
    for (id, (offset, len)) in index.iter().enumerate() {
        if !(10..13).contains(&id) {
            delivered.extend_from_slice(&data[*offset..offset + len]);
        }
    }
    assert_eq!(decode(&delivered), 20);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn co_rtv_delivered_stream_with_re_encoded_frames_decodes() {
    // Co-RTV end to end on x264: a 10x capacity drop makes the bottleneck drop frames; the
    // sender re-encodes them from the frame before D (16 references, no keyframe). The frames
    // the receiver displayed, cut from the encoder's stream in display order, decode with
    // ffmpeg: as many pictures as displayed frames, no error, no warning.
    use sluice_core::encoder::{EncodeTimeMode, X264Settings};
    use sluice_core::link::trace_gen::{generate, TraceSpec};
    use sluice_core::session::{EncoderConfig, PathConfig, RunConfig};
    use sluice_core::sim::Simulation;
    use sluice_core::units::TimeDelta;
    use sluice_x264::sim_encoder::X264SimEncoder;
    use std::sync::Arc;
    let dir = std::env::temp_dir().join(format!("sluice-x264-cortv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let raw = write_clip(&dir, 120);
    let stream = dir.join("stream.264");
    let settings = X264Settings {
        video_path: raw.to_string_lossy().into(),
        width: W,
        height: H,
        video_frames: 120,
        encode_time: EncodeTimeMode::Modeled,
        bitstream_path: Some(stream.to_string_lossy().into()),
        ..Default::default()
    };
    let cfg = RunConfig {
        scheme_name: "co-rtv".into(),
        seed: 1,
        duration_s: 5.0,
        fps: 60.0,
        encoder: EncoderConfig::X264(settings.clone()),
        downlink: PathConfig { delay_ms: 5.0, access_delay_ms: 20.0, ..Default::default() },
        uplink: PathConfig { delay_ms: 5.0, ..Default::default() },
        ..Default::default()
    };
    // The Co-RTV scheme asks for 16 references (the front end applies it the same way).
    let refs = cfg.resolve_scheme().unwrap().encoder_controller.reference_frames().unwrap();
    let encoder = X264SimEncoder::open(&X264Settings { refs, ..settings }, cfg.fps).unwrap();
    let spec = TraceSpec::parse_cli("steps:6@2,0.6@5").unwrap();
    let trace = Arc::new(generate(&spec, TimeDelta::from_secs(10)).unwrap());
    let r = Simulation::new(&cfg, Some(trace), None, Box::new(encoder)).unwrap().run();
    let reencoded = |f: &&&sluice_core::metrics::FrameRecord| {
        f.columns.get("cortv_reencode") == Some(&sluice_core::columns::Value::Bool(true))
    };
    let mut displayed: Vec<_> = r.frames.iter().filter(|f| f.displayed_us.is_some()).collect();
    displayed.sort_by_key(|f| (f.displayed_us, f.frame_id));
    let shown_reencodes = displayed.iter().filter(reencoded).count();
    eprintln!(
        "co-rtv on x264: {} frames encoded, {} displayed ({shown_reencodes} re-encodes), {} \
         dropped at the bottleneck, {} keyframes",
        r.frames.len(),
        displayed.len(),
        r.summary.frames_bn_dropped,
        r.summary.keyframes
    );
    let keyframes: Vec<(u64, u64, bool)> = r
        .frames
        .iter()
        .filter(|f| f.is_keyframe)
        .map(|f| (f.frame_id, f.source_index, reencoded(&&f)))
        .collect();
    eprintln!("keyframes (id, source, re-encode): {keyframes:?}");
    assert!(r.summary.frames_bn_dropped > 0, "the step makes the bottleneck drop frames");
    assert!(shown_reencodes > 0);
    assert_eq!(r.summary.keyframes, 1, "re-encodes are P frames");
    assert_eq!(r.keyframe_requests, 0);
    let data = std::fs::read(&stream).unwrap();
    let index: Vec<(usize, usize)> = std::fs::read_to_string(format!("{}.idx", stream.display()))
        .unwrap()
        .lines()
        .map(|l| {
            let mut it = l.split_whitespace().map(|x| x.parse::<usize>().unwrap());
            (it.next().unwrap(), it.next().unwrap())
        })
        .collect();
    let mut delivered = Vec::new();
    for f in &displayed {
        let (offset, len) = index[f.frame_id as usize];
        delivered.extend_from_slice(&data[offset..offset + len]);
    }
    assert_eq!(decode(&delivered), displayed.len());
    let _ = std::fs::remove_dir_all(&dir);
}
