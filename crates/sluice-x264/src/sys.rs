//! The only module with `unsafe` code: bindgen-generated FFI for `x264.h` plus a thin
//! owning handle ([`RawEncoder`]) whose methods are safe to call. Everything that could make
//! a call unsound (plane sizes, strides, string NULs) is checked here, right before the call,
//! so the safety of this module does not depend on validation done elsewhere.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::raw::{c_char, c_int};
use std::ptr::{self, NonNull};
use std::time::{Duration, Instant};

use crate::X264Error;

#[allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::pedantic
)]
mod ffi {
    include!(concat!(env!("OUT_DIR"), "/x264_bindings.rs"));
}

/// `X264_BUILD` of the header the crate was compiled against.
pub const X264_BUILD: u32 = ffi::X264_BUILD;

/// Everything needed to open an encoder, already range-checked by the caller. Units are
/// x264's: kbit/s and kbit.
pub(crate) struct OpenSettings<'a> {
    pub width: u32,
    pub height: u32,
    pub fps_num: u32,
    pub fps_den: u32,
    pub preset: &'a str,
    pub tune_zerolatency: bool,
    pub threads: u32,
    pub bitrate_kbps: i32,
    pub vbv_max_kbps: i32,
    pub vbv_buffer_kbit: i32,
    pub profile: Option<&'a str>,
    pub subpel_refine: Option<i32>,
    pub scenecut: bool,
    /// Reference frames kept (x264 `--ref`).
    pub refs: u32,
    /// `rc.b_filler`.
    pub filler: bool,
    pub log_level: i32,
    /// Constant QP instead of ABR (the rate fields are then zero).
    pub constant_qp: Option<i32>,
    pub psnr: bool,
}

/// Analysis settings in x264's representation.
pub(crate) struct RawAnalysis {
    pub inter: u32,
    pub intra: u32,
    pub me_method: i32,
    pub subpel_refine: i32,
    pub trellis: i32,
}

/// The parts of the current `x264_param_t` the safe layer wants to look at.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ParamSnapshot {
    pub bitrate_kbps: i32,
    pub vbv_max_kbps: i32,
    pub vbv_buffer_kbit: i32,
    pub subpel_refine: i32,
    pub transform_8x8: bool,
    pub cabac: bool,
    pub inter: u32,
    pub me_method: i32,
    pub trellis: i32,
    /// Adaptive quantisation is on (mode and strength non-zero), so per-macroblock quantiser
    /// offsets take effect.
    pub adaptive_quant: bool,
}

/// One picture to encode.
pub(crate) struct RawInput<'a> {
    pub planes: &'a Planes<'a>,
    pub pts: i64,
    pub force_idr: bool,
    /// Quantiser offset added to every macroblock of this picture on top of x264's own
    /// decisions (`x264_image_properties_t::quant_offsets`); 0 for none.
    pub qp_offset: f32,
}

/// One I420 picture: three planes with their strides, read-only.
pub(crate) struct Planes<'a> {
    pub width: u32,
    pub height: u32,
    pub data: [&'a [u8]; 3],
    pub stride: [usize; 3],
}

/// What one `x264_encoder_encode` call produced.
pub(crate) struct RawOutput {
    /// Annex B bytes of all NAL units (empty if the frame was buffered).
    pub data: Vec<u8>,
    pub got_picture: bool,
    pub i_type: i32,
    pub b_keyframe: bool,
    pub qp: f64,
    pub pts: i64,
    pub encode_time: Duration,
    /// Luma PSNR (dB) if PSNR was enabled at open and a picture came out.
    pub psnr_y: Option<f64>,
}

fn cstring(field: &'static str, s: &str) -> Result<CString, X264Error> {
    CString::new(s).map_err(|_| X264Error::InvalidString { field })
}

/// Owning handle to an `x264_t`. Closed in `Drop`.
pub(crate) struct RawEncoder {
    handle: NonNull<ffi::x264_t>,
    width: u32,
    height: u32,
    psnr: bool,
    /// The parameters as of the last successful reconfig (or open). x264 applies
    /// x264_encoder_reconfig lazily, on the next encoded frame, and x264_encoder_parameters
    /// keeps returning the old values until then; basing a second reconfig on those would
    /// silently undo the first. So every reconfig starts from this copy instead. Its pointer
    /// fields alias strings owned by the encoder; they are never dereferenced or freed here.
    shadow: ffi::x264_param_t,
}

// SAFETY: an `x264_t` has no thread affinity: libx264 keeps no thread-local state tied to
// the handle, and its own worker threads (if `threads > 1`) are joined in
// `x264_encoder_close`. The handle may therefore be moved to, used from and dropped on
// another thread, as long as it is never used from two threads at once. `RawEncoder` is not
// `Sync` (it holds a raw pointer) and every method that touches the handle takes
// `&mut self`, so the borrow checker rules out concurrent use.
unsafe impl Send for RawEncoder {}

impl RawEncoder {
    pub fn open(s: &OpenSettings<'_>) -> Result<Self, X264Error> {
        let preset = cstring("preset", s.preset)?;
        let profile = s.profile.map(|p| cstring("profile", p)).transpose()?;
        let tune = c"zerolatency";
        let width = c_int::try_from(s.width)
            .map_err(|_| X264Error::InvalidDimensions { width: s.width, height: s.height })?;
        let height = c_int::try_from(s.height)
            .map_err(|_| X264Error::InvalidDimensions { width: s.width, height: s.height })?;
        let threads =
            c_int::try_from(s.threads).map_err(|_| X264Error::InvalidThreads(s.threads))?;

        // SAFETY: x264_param_t is a plain C struct of integers, floats, raw pointers and
        // nullable function pointers (`Option<fn>`), for all of which all-zero bytes are a
        // valid value. x264_param_default_preset overwrites it entirely anyway.
        let mut p: ffi::x264_param_t = unsafe { std::mem::zeroed() };
        let tune_ptr: *const c_char = if s.tune_zerolatency { tune.as_ptr() } else { ptr::null() };
        // SAFETY: `p` is a valid, writable x264_param_t; `preset` and `tune` are
        // NUL-terminated strings that outlive the call (x264 does not keep them).
        let rc = unsafe { ffi::x264_param_default_preset(&mut p, preset.as_ptr(), tune_ptr) };
        if rc < 0 {
            return Err(X264Error::UnknownPreset(s.preset.to_owned()));
        }

        p.i_log_level = s.log_level;
        p.i_width = width;
        p.i_height = height;
        p.i_csp = ffi::X264_CSP_I420 as c_int;
        p.i_fps_num = s.fps_num;
        p.i_fps_den = s.fps_den;
        // pts counts frames: timebase = 1 / fps.
        p.i_timebase_num = s.fps_den;
        p.i_timebase_den = s.fps_num;
        p.b_vfr_input = 0;
        p.i_threads = threads;
        p.i_keyint_max = ffi::X264_KEYINT_MAX_INFINITE as c_int;
        if !s.scenecut {
            p.i_scenecut_threshold = 0;
        }
        p.b_intra_refresh = 0;
        // Validated to 1..=16 by the caller.
        p.i_frame_reference = s.refs as c_int;
        p.i_bframe = 0;
        p.b_annexb = 1;
        p.b_repeat_headers = 1;
        if let Some(qp) = s.constant_qp {
            p.rc.i_rc_method = ffi::X264_RC_CQP as c_int;
            p.rc.i_qp_constant = qp;
            p.rc.i_vbv_max_bitrate = 0;
            p.rc.i_vbv_buffer_size = 0;
        } else {
            p.rc.i_rc_method = ffi::X264_RC_ABR as c_int;
            p.rc.i_bitrate = s.bitrate_kbps;
            p.rc.i_vbv_max_bitrate = s.vbv_max_kbps;
            p.rc.i_vbv_buffer_size = s.vbv_buffer_kbit;
            p.rc.b_filler = c_int::from(s.filler);
        }
        // PSNR is computed here from x264's reconstruction (x264's own `b_psnr` is switched off
        // below log level INFO), outside the timed call.
        p.b_full_recon = c_int::from(s.psnr);
        if let Some(subme) = s.subpel_refine {
            p.analyse.i_subpel_refine = subme;
        }
        if let Some(profile) = &profile {
            // SAFETY: `p` is initialised; `profile` is NUL-terminated and outlives the call.
            let rc = unsafe { ffi::x264_param_apply_profile(&mut p, profile.as_ptr()) };
            if rc < 0 {
                return Err(X264Error::InvalidProfile(s.profile.unwrap_or_default().to_owned()));
            }
        }

        // SAFETY: `p` is a fully initialised parameter set. x264_encoder_open copies what it
        // needs (it strdups the string fields it keeps), so `p` may be dropped afterwards.
        let handle = unsafe { ffi::x264_encoder_open(&mut p) };
        let handle = NonNull::new(handle).ok_or(X264Error::OpenFailed)?;
        let mut enc =
            RawEncoder { handle, width: s.width, height: s.height, psnr: s.psnr, shadow: p };
        enc.shadow = enc.params();
        Ok(enc)
    }

    fn params(&mut self) -> ffi::x264_param_t {
        // SAFETY: all-zero is a valid x264_param_t (see `open`), and
        // x264_encoder_parameters overwrites it with a copy of the encoder's parameters.
        // `self.handle` is a live encoder (closed only in Drop).
        unsafe {
            let mut p: ffi::x264_param_t = std::mem::zeroed();
            ffi::x264_encoder_parameters(self.handle.as_ptr(), &mut p);
            p
        }
    }

    /// The settings in effect from the next frame on.
    pub fn snapshot(&self) -> ParamSnapshot {
        let p = &self.shadow;
        ParamSnapshot {
            bitrate_kbps: p.rc.i_bitrate,
            vbv_max_kbps: p.rc.i_vbv_max_bitrate,
            vbv_buffer_kbit: p.rc.i_vbv_buffer_size,
            subpel_refine: p.analyse.i_subpel_refine,
            transform_8x8: p.analyse.b_transform_8x8 != 0,
            cabac: p.b_cabac != 0,
            inter: p.analyse.inter,
            me_method: p.analyse.i_me_method,
            trellis: p.analyse.i_trellis,
            adaptive_quant: p.rc.i_aq_mode != 0 && p.rc.f_aq_strength != 0.0,
        }
    }

    fn reconfig(&mut self, p: &mut ffi::x264_param_t) -> Result<(), X264Error> {
        // SAFETY: `p` is a copy obtained from x264_encoder_parameters on this encoder (via
        // `shadow`) with plain numeric fields changed; this is the documented way to use
        // x264_encoder_reconfig, which copies the reconfigurable fields and keeps no pointer
        // into `p`.
        let rc = unsafe { ffi::x264_encoder_reconfig(self.handle.as_ptr(), p) };
        if rc < 0 {
            Err(X264Error::ReconfigFailed(rc))
        } else {
            self.shadow = *p;
            Ok(())
        }
    }

    pub fn reconfig_rate(
        &mut self,
        bitrate_kbps: i32,
        vbv_max_kbps: i32,
        vbv_buffer_kbit: i32,
    ) -> Result<(), X264Error> {
        let mut p = self.shadow;
        p.rc.i_bitrate = bitrate_kbps;
        p.rc.i_vbv_max_bitrate = vbv_max_kbps;
        p.rc.i_vbv_buffer_size = vbv_buffer_kbit;
        self.reconfig(&mut p)
    }

    pub fn reconfig_analysis(&mut self, a: &RawAnalysis) -> Result<(), X264Error> {
        let mut p = self.shadow;
        p.analyse.inter = a.inter;
        p.analyse.intra = a.intra;
        p.analyse.i_me_method = a.me_method;
        p.analyse.i_subpel_refine = a.subpel_refine;
        p.analyse.i_trellis = a.trellis;
        self.reconfig(&mut p)
    }

    pub fn invalidate_reference(&mut self, pts: i64) -> Result<(), X264Error> {
        // SAFETY: live handle; the call only flags reference frames as corrupt.
        let rc = unsafe { ffi::x264_encoder_invalidate_reference(self.handle.as_ptr(), pts) };
        if rc < 0 {
            Err(X264Error::InvalidateFailed(rc))
        } else {
            Ok(())
        }
    }

    pub fn delayed_frames(&mut self) -> i32 {
        // SAFETY: live handle.
        unsafe { ffi::x264_encoder_delayed_frames(self.handle.as_ptr()) }
    }

    /// Encodes one picture (`Some`) or drains one delayed frame (`None`, end of stream).
    pub fn encode(&mut self, input: Option<&RawInput<'_>>) -> Result<RawOutput, X264Error> {
        // SAFETY: all-zero is a valid x264_picture_t (ints, floats, null pointers);
        // x264_picture_init then sets the documented defaults.
        let mut pic_in: ffi::x264_picture_t = unsafe { std::mem::zeroed() };
        let mut pic_out: ffi::x264_picture_t = unsafe { std::mem::zeroed() };
        // SAFETY: both point to writable x264_picture_t values.
        unsafe {
            ffi::x264_picture_init(&mut pic_in);
            ffi::x264_picture_init(&mut pic_out);
        }
        let mut pts_in = 0;
        // Kept alive until after the encode call, which reads it synchronously (x264 turns it
        // into the frame's AQ offsets before the call returns).
        let mut quant_offsets: Vec<f32> = Vec::new();
        if let Some(&RawInput { planes, pts, force_idr, qp_offset }) = input {
            self.check_planes(planes)?;
            if qp_offset != 0.0 {
                if !qp_offset.is_finite() {
                    return Err(X264Error::InvalidQpOffset(qp_offset.to_string()));
                }
                // x264 ignores quant_offsets without adaptive quantisation; say so instead.
                if !self.snapshot().adaptive_quant {
                    return Err(X264Error::QpOffsetNeedsAq);
                }
                // One offset per 16x16 macroblock, dimensions rounded up (progressive).
                let mbs = self.width.div_ceil(16) as usize * self.height.div_ceil(16) as usize;
                quant_offsets = vec![qp_offset; mbs];
                pic_in.prop.quant_offsets = quant_offsets.as_mut_ptr();
            }
            pic_in.img.i_csp = ffi::X264_CSP_I420 as c_int;
            pic_in.img.i_plane = 3;
            for i in 0..3 {
                // Cast to *mut only because the C field is not const: x264 copies the input
                // picture into its own frame buffers and never writes through these pointers.
                pic_in.img.plane[i] = planes.data[i].as_ptr().cast_mut();
                // Fits: check_planes bounded strides by i32::MAX.
                pic_in.img.i_stride[i] = planes.stride[i] as c_int;
            }
            pic_in.i_pts = pts;
            pts_in = pts;
            pic_in.i_type =
                if force_idr { ffi::X264_TYPE_IDR } else { ffi::X264_TYPE_AUTO } as c_int;
        }
        let pic_in_ptr: *mut ffi::x264_picture_t =
            if input.is_some() { &mut pic_in } else { ptr::null_mut() };

        let mut nals: *mut ffi::x264_nal_t = ptr::null_mut();
        let mut n_nal: c_int = 0;
        let start = Instant::now();
        // SAFETY: live handle; `pic_in` (if given) describes three planes that
        // check_planes verified to contain `stride * (rows - 1) + row_width` readable bytes
        // each for the encoder's dimensions, and the borrowed slices outlive the call (x264
        // copies the picture synchronously inside x264_encoder_encode). `prop.quant_offsets`
        // is null or points to one float per macroblock in `quant_offsets`, which outlives
        // the call and which x264 only reads (no free callback is set). `nals`, `n_nal`
        // and `pic_out` are valid out-pointers.
        let ret = unsafe {
            ffi::x264_encoder_encode(
                self.handle.as_ptr(),
                &mut nals,
                &mut n_nal,
                pic_in_ptr,
                &mut pic_out,
            )
        };
        let encode_time = start.elapsed();
        drop(quant_offsets);
        if ret < 0 {
            return Err(X264Error::EncodeFailed(ret));
        }

        let mut data = Vec::with_capacity(ret as usize);
        if ret > 0 && !nals.is_null() && n_nal > 0 {
            // SAFETY: on success x264 returns `n_nal` NAL descriptors at `nals`, each with
            // `i_payload` bytes at `p_payload`; they stay valid until the next call on this
            // encoder, and we copy them out before returning.
            let nal_slice = unsafe { std::slice::from_raw_parts(nals, n_nal as usize) };
            for nal in nal_slice {
                if nal.i_payload > 0 && !nal.p_payload.is_null() {
                    // SAFETY: see above.
                    let bytes = unsafe {
                        std::slice::from_raw_parts(nal.p_payload, nal.i_payload as usize)
                    };
                    data.extend_from_slice(bytes);
                }
            }
        }
        let got_picture = ret > 0;
        Ok(RawOutput {
            data,
            got_picture,
            i_type: if got_picture { pic_out.i_type } else { 0 },
            b_keyframe: got_picture && pic_out.b_keyframe != 0,
            qp: if got_picture { f64::from(pic_out.i_qpplus1 - 1).max(0.0) } else { 0.0 },
            pts: if got_picture { pic_out.i_pts } else { pts_in },
            encode_time,
            psnr_y: match input {
                Some(i) if got_picture && self.psnr && pic_out.i_pts == pts_in => {
                    self.recon_psnr_y(&pic_out.img, i.planes)
                }
                _ => None,
            },
        })
    }

    /// Luma PSNR (dB, capped at 100) of x264's reconstruction `img` (as returned in the output
    /// picture of the call that encoded `input`) against `input`. `None` for a high-depth or
    /// missing reconstruction.
    fn recon_psnr_y(&self, img: &ffi::x264_image_t, input: &Planes<'_>) -> Option<f64> {
        let (w, h) = (self.width as usize, self.height as usize);
        let csp = img.i_csp as u32;
        if img.plane[0].is_null() || csp & ffi::X264_CSP_HIGH_DEPTH != 0 {
            return None;
        }
        let stride = usize::try_from(img.i_stride[0]).ok().filter(|&s| s >= w)?;
        // SAFETY: x264 sets `img` of the output picture to its reconstructed frame (x264.h:
        // "Out: reconstructed image data"): an 8-bit luma plane of the encoder's width and
        // height with `i_stride[0]` bytes per row (checked >= width above; 8-bit checked via
        // the csp), valid until the next call on this encoder. `b_full_recon` is set when PSNR
        // is on, so the plane is fully reconstructed.
        let recon = unsafe { std::slice::from_raw_parts(img.plane[0], stride * (h - 1) + w) };
        let mut ssd: u64 = 0;
        for y in 0..h {
            let a = &recon[y * stride..y * stride + w];
            let b = &input.data[0][y * input.stride[0]..y * input.stride[0] + w];
            ssd += a
                .iter()
                .zip(b)
                .map(|(&p, &q)| (i32::from(p) - i32::from(q)).pow(2) as u64)
                .sum::<u64>();
        }
        if ssd == 0 {
            return Some(100.0);
        }
        let mse = ssd as f64 / (w * h) as f64;
        Some((10.0 * (255.0 * 255.0 / mse).log10()).min(100.0))
    }

    /// Checks that the planes match the encoder and are large enough for x264 to read
    /// `row_width` bytes from each of `rows` rows spaced `stride` apart.
    fn check_planes(&self, p: &Planes<'_>) -> Result<(), X264Error> {
        if p.width != self.width || p.height != self.height {
            return Err(X264Error::FrameSizeMismatch {
                expected: (self.width, self.height),
                got: (p.width, p.height),
            });
        }
        let w = self.width as usize;
        let h = self.height as usize;
        let dims = [(w, h), (w.div_ceil(2), h.div_ceil(2)), (w.div_ceil(2), h.div_ceil(2))];
        for (i, &(row_width, rows)) in dims.iter().enumerate() {
            let stride = p.stride[i];
            if stride < row_width || stride > i32::MAX as usize {
                return Err(X264Error::InvalidStride { plane: i, stride, row_width });
            }
            let needed = stride
                .checked_mul(rows.saturating_sub(1))
                .and_then(|n| n.checked_add(row_width))
                .ok_or(X264Error::InvalidStride { plane: i, stride, row_width })?;
            if p.data[i].len() < needed {
                return Err(X264Error::PlaneTooSmall { plane: i, needed, len: p.data[i].len() });
            }
        }
        Ok(())
    }
}

impl Drop for RawEncoder {
    fn drop(&mut self) {
        // SAFETY: the handle came from x264_encoder_open, is closed exactly once here, and
        // is not used afterwards.
        unsafe { ffi::x264_encoder_close(self.handle.as_ptr()) }
    }
}

/// x264 picture-type constants, for mapping `RawOutput::i_type`.
pub(crate) mod types {
    use super::ffi;
    pub const IDR: i32 = ffi::X264_TYPE_IDR as i32;
    pub const I: i32 = ffi::X264_TYPE_I as i32;
    pub const P: i32 = ffi::X264_TYPE_P as i32;
    pub const BREF: i32 = ffi::X264_TYPE_BREF as i32;
    pub const B: i32 = ffi::X264_TYPE_B as i32;
    pub const KEYFRAME: i32 = ffi::X264_TYPE_KEYFRAME as i32;
    pub const ANALYSE_I4X4: u32 = ffi::X264_ANALYSE_I4x4;
    pub const ANALYSE_I8X8: u32 = ffi::X264_ANALYSE_I8x8;
    pub const ANALYSE_PSUB16X16: u32 = ffi::X264_ANALYSE_PSUB16x16;
    pub const ANALYSE_PSUB8X8: u32 = ffi::X264_ANALYSE_PSUB8x8;
    pub const ANALYSE_BSUB16X16: u32 = ffi::X264_ANALYSE_BSUB16x16;
    pub const ME_DIA: i32 = ffi::X264_ME_DIA as i32;
    pub const ME_HEX: i32 = ffi::X264_ME_HEX as i32;
    pub const ME_UMH: i32 = ffi::X264_ME_UMH as i32;
    pub const LOG_NONE: i32 = ffi::X264_LOG_NONE;
    pub const LOG_ERROR: i32 = ffi::X264_LOG_ERROR as i32;
    pub const LOG_WARNING: i32 = ffi::X264_LOG_WARNING as i32;
    pub const LOG_INFO: i32 = ffi::X264_LOG_INFO as i32;
}

/// Maps `file` read-only. Sound as long as nobody changes or truncates the file while it is
/// mapped: Sluice's clip cache (python/sluice/video.py) writes a raw clip once, to a
/// temporary name, and renames it into place; it never writes a cached file again.
pub(crate) fn map_read_only(file: &std::fs::File) -> std::io::Result<memmap2::Mmap> {
    // SAFETY: see above; the mapping is only ever read.
    unsafe { memmap2::Mmap::map(file) }
}
