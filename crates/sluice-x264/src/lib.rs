//! Safe wrapper around libx264 for Sluice's real-time sender.
//!
//! The encoder is opened for low-latency streaming: `x264_param_default_preset` with the
//! configured preset (and `zerolatency` tune), endless GOP (`X264_KEYINT_MAX_INFINITE`),
//! one reference frame, no B-frames, Annex B output with SPS/PPS repeated on every keyframe,
//! ABR rate control with VBV (or, for measurements, a constant quantiser). Frames are I420.
//!
//! * [`X264Encoder::open`] / [`X264Encoder::encode`]: one frame in, one [`EncodedPicture`]
//!   out (Annex B bytes, keyframe flag, QP, pts, wall time of the encode call, and the luma
//!   PSNR of the reconstruction if asked for).
//! * [`X264Encoder::reconfigure_rate`] / [`X264Encoder::reconfigure_analysis`]: per-frame
//!   changes through `x264_encoder_reconfig`.
//! * [`X264Encoder::invalidate_reference`]: loss recovery without a keyframe.
//!
//! All FFI lives in the private `sys` module; nothing here panics on bad input, every
//! failure is an [`X264Error`].

#![deny(unsafe_code)]

pub mod complexity;
pub mod sim_encoder;
pub mod sps;
mod sys;

use std::fmt;
use std::ops::{BitOr, BitOrAssign};
use std::time::Duration;

/// `X264_BUILD` of the libx264 header this crate was built against.
pub const X264_BUILD: u32 = sys::X264_BUILD;

/// Errors from opening, configuring or running the encoder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum X264Error {
    /// Width/height zero, odd (I420 needs even dimensions) or above 16384.
    InvalidDimensions { width: u32, height: u32 },
    /// Frame rate numerator or denominator zero.
    InvalidFrameRate { num: u32, den: u32 },
    /// A rate or buffer size out of range (zero target, > 2^31 kbit/s, or only one of the
    /// VBV parameters zero).
    InvalidRate(String),
    /// Thread count does not fit x264's `int`.
    InvalidThreads(u32),
    /// A string field contains a NUL byte.
    InvalidString { field: &'static str },
    /// `x264_param_default_preset` rejected the preset name.
    UnknownPreset(String),
    /// `x264_param_apply_profile` rejected the profile (unknown, or incompatible with the
    /// other settings).
    InvalidProfile(String),
    /// `subpel_refine` outside 0..=11 or `trellis` outside 0..=2, or an analysis change
    /// x264 would silently ignore (see [`X264Encoder::reconfigure_analysis`]).
    InvalidAnalysis(String),
    /// `x264_encoder_open` returned NULL (x264 logs the reason to stderr).
    OpenFailed,
    /// The frame's dimensions differ from the encoder's.
    FrameSizeMismatch { expected: (u32, u32), got: (u32, u32) },
    /// A plane is shorter than `stride * (rows - 1) + row_width`. Planes: 0 = Y, 1 = U, 2 = V.
    PlaneTooSmall { plane: usize, needed: usize, len: usize },
    /// A stride is smaller than the plane's row width (or absurdly large).
    InvalidStride { plane: usize, stride: usize, row_width: usize },
    /// Rate reconfiguration needs VBV: x264 cannot change the ABR bitrate of an encoder
    /// opened without VBV, nor turn VBV on or off after open.
    VbvRequired,
    /// `x264_encoder_encode` returned an error code.
    EncodeFailed(i32),
    /// `x264_encoder_reconfig` returned an error code.
    ReconfigFailed(i32),
    /// `x264_encoder_invalidate_reference` returned an error code.
    InvalidateFailed(i32),
    /// [`X264Encoder::flush`] was called; the encoder accepts no more frames.
    Flushed,
    /// A quantiser offset that is not a finite number.
    InvalidQpOffset(String),
    /// A quantiser offset was asked of an encoder without adaptive quantisation (x264 would
    /// ignore it; ultrafast switches AQ off).
    QpOffsetNeedsAq,
}

impl fmt::Display for X264Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use X264Error::*;
        match self {
            InvalidDimensions { width, height } => {
                write!(
                    f,
                    "invalid dimensions {width}x{height}: must be even, non-zero and <= 16384"
                )
            }
            InvalidFrameRate { num, den } => write!(f, "invalid frame rate {num}/{den}"),
            InvalidRate(msg) => write!(f, "invalid rate: {msg}"),
            InvalidThreads(n) => write!(f, "invalid thread count {n}"),
            InvalidString { field } => write!(f, "{field} contains a NUL byte"),
            UnknownPreset(p) => write!(f, "unknown x264 preset {p:?}"),
            InvalidProfile(p) => write!(f, "x264 rejected profile {p:?}"),
            InvalidAnalysis(msg) => write!(f, "invalid analysis parameters: {msg}"),
            OpenFailed => write!(f, "x264_encoder_open failed"),
            FrameSizeMismatch { expected, got } => write!(
                f,
                "frame is {}x{}, encoder expects {}x{}",
                got.0, got.1, expected.0, expected.1
            ),
            PlaneTooSmall { plane, needed, len } => {
                write!(f, "plane {plane} has {len} bytes, needs {needed}")
            }
            InvalidStride { plane, stride, row_width } => {
                write!(f, "plane {plane} stride {stride} is invalid for row width {row_width}")
            }
            VbvRequired => {
                write!(f, "rate reconfiguration requires VBV enabled at open (and kept on)")
            }
            EncodeFailed(rc) => write!(f, "x264_encoder_encode failed ({rc})"),
            ReconfigFailed(rc) => write!(f, "x264_encoder_reconfig failed ({rc})"),
            InvalidateFailed(rc) => write!(f, "x264_encoder_invalidate_reference failed ({rc})"),
            Flushed => write!(f, "encoder was flushed"),
            InvalidQpOffset(q) => write!(f, "quantiser offset {q} is not a finite number"),
            QpOffsetNeedsAq => write!(
                f,
                "a quantiser offset needs adaptive quantisation (every preset but ultrafast has it)"
            ),
        }
    }
}

impl std::error::Error for X264Error {}

/// x264's log level (messages go to stderr).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LogLevel {
    None,
    #[default]
    Error,
    Warning,
    Info,
}

impl LogLevel {
    fn raw(self) -> i32 {
        match self {
            LogLevel::None => sys::types::LOG_NONE,
            LogLevel::Error => sys::types::LOG_ERROR,
            LogLevel::Warning => sys::types::LOG_WARNING,
            LogLevel::Info => sys::types::LOG_INFO,
        }
    }
}

/// Parameters for [`X264Encoder::open`]. Build with [`X264Config::new`] and adjust fields.
#[derive(Clone, Debug, PartialEq)]
pub struct X264Config {
    /// Frame width in pixels (even).
    pub width: u32,
    /// Frame height in pixels (even).
    pub height: u32,
    /// Frame rate numerator (frames per `fps_den` seconds). pts are frame indices.
    pub fps_num: u32,
    /// Frame rate denominator.
    pub fps_den: u32,
    /// x264 preset ("ultrafast" ... "placebo"). Default "superfast".
    pub preset: String,
    /// Apply `--tune zerolatency` (no lookahead, no frame delay). Default true.
    pub tune_zerolatency: bool,
    /// Encoder threads; 0 lets x264 choose. Default 1.
    pub threads: u32,
    /// ABR target in bit/s (rounded to kbit/s for x264, at least 1 kbit/s). Ignored with
    /// `constant_qp`.
    pub bitrate_bps: u64,
    /// VBV maximum rate in bit/s; 0 (with `vbv_buffer_bits` 0) disables VBV, which also
    /// disables [`X264Encoder::reconfigure_rate`]. Default = `bitrate_bps`.
    pub vbv_max_rate_bps: u64,
    /// VBV buffer size in bits (rounded to kbit). Default = 0.5 s of `bitrate_bps`.
    pub vbv_buffer_bits: u64,
    /// H.264 profile to enforce ("baseline", "main", "high"). `None` keeps whatever the
    /// preset enables; 8x8 transform / I8x8 partitions need "high" (or `None` with a preset
    /// other than ultrafast).
    pub profile: Option<String>,
    /// Subpixel refinement (`--subme`, 0..=11) at open; `None` keeps the preset's value.
    /// If 0 at open, it can never be raised later.
    pub subpel_refine: Option<i32>,
    /// x264 scene-cut detection (may insert keyframes on its own). Default true (x264's
    /// default); set false if only the caller should decide keyframes.
    pub scenecut: bool,
    /// Reference frames kept (x264 `--ref`, 1..=16). Default 1, as the seeds' WebRTC forks.
    /// With more than one, [`X264Encoder::invalidate_reference`] of the newest frames leaves
    /// older ones to predict from, so the next frame is a P frame, not an IDR; every frame
    /// may then also search the extra references (slower, smaller).
    pub refs: u32,
    /// x264 log level. Default [`LogLevel::Error`].
    pub log_level: LogLevel,
    /// Constant quantiser (x264 `--qp`, 1..=51) instead of ABR: every P frame at this QP,
    /// I frames `ip_factor` lower, no VBV (the rate fields are ignored and
    /// [`X264Encoder::reconfigure_rate`] returns [`X264Error::VbvRequired`]). For measuring
    /// what an analysis setting saves at equal quantiser. Default `None` (ABR).
    pub constant_qp: Option<u8>,
    /// Compute each frame's PSNR against its input (x264 `--psnr`, reported in
    /// [`EncodedPicture::psnr_y`]). Costs time inside the encode call. Default false.
    pub psnr: bool,
    /// Filler data (x264 `rc.b_filler`): with VBV max rate = bitrate (CBR) x264 pads frames
    /// that would overflow the VBV buffer, so the output rate never falls below the bitrate
    /// (MAE's CBR baseline). Only settable at open. Default false.
    pub filler: bool,
}

impl X264Config {
    /// Defaults as in the ACE seeds: superfast + zerolatency, 1 thread, VBV max rate =
    /// target, VBV buffer = 0.5 s of the target, integer frame rate `fps`.
    pub fn new(width: u32, height: u32, fps: u32, bitrate_bps: u64) -> Self {
        X264Config {
            width,
            height,
            fps_num: fps,
            fps_den: 1,
            preset: "superfast".to_owned(),
            tune_zerolatency: true,
            threads: 1,
            bitrate_bps,
            vbv_max_rate_bps: bitrate_bps,
            vbv_buffer_bits: bitrate_bps / 2,
            profile: None,
            subpel_refine: None,
            scenecut: true,
            refs: 1,
            log_level: LogLevel::default(),
            constant_qp: None,
            psnr: false,
            filler: false,
        }
    }

    /// Frame rate as a float.
    pub fn fps(&self) -> f64 {
        f64::from(self.fps_num) / f64::from(self.fps_den)
    }

    fn validate(&self) -> Result<RateKbps, X264Error> {
        if self.width == 0
            || self.height == 0
            || !self.width.is_multiple_of(2)
            || !self.height.is_multiple_of(2)
            || self.width > 16384
            || self.height > 16384
        {
            return Err(X264Error::InvalidDimensions { width: self.width, height: self.height });
        }
        if self.fps_num == 0
            || self.fps_den == 0
            || self.fps_num > i32::MAX as u32
            || self.fps_den > i32::MAX as u32
        {
            return Err(X264Error::InvalidFrameRate { num: self.fps_num, den: self.fps_den });
        }
        if let Some(s) = self.subpel_refine {
            check_subpel(s)?;
        }
        if !(1..=16).contains(&self.refs) {
            return Err(X264Error::InvalidAnalysis(format!(
                "{} reference frames, x264 keeps 1 to 16",
                self.refs
            )));
        }
        if let Some(qp) = self.constant_qp {
            if !(1..=51).contains(&qp) {
                return Err(X264Error::InvalidRate(format!("constant QP {qp} outside 1..=51")));
            }
            return Ok(RateKbps { bitrate: 0, vbv_max: 0, vbv_buffer: 0 });
        }
        RateKbps::from_bps(self.bitrate_bps, self.vbv_max_rate_bps, self.vbv_buffer_bits)
    }
}

fn check_subpel(s: i32) -> Result<(), X264Error> {
    if (0..=11).contains(&s) {
        Ok(())
    } else {
        Err(X264Error::InvalidAnalysis(format!("subpel_refine {s} outside 0..=11")))
    }
}

/// Rates in x264 units.
#[derive(Clone, Copy, Debug)]
struct RateKbps {
    bitrate: i32,
    vbv_max: i32,
    vbv_buffer: i32,
}

impl RateKbps {
    fn from_bps(
        bitrate_bps: u64,
        vbv_max_rate_bps: u64,
        vbv_buffer_bits: u64,
    ) -> Result<Self, X264Error> {
        fn kbit(name: &str, v: u64) -> Result<i32, X264Error> {
            // Round to nearest kbit, but never round a non-zero value down to 0 (= disabled).
            let k = (v.saturating_add(500) / 1000).max(u64::from(v > 0));
            i32::try_from(k).map_err(|_| X264Error::InvalidRate(format!("{name} {v} is too large")))
        }
        if bitrate_bps == 0 {
            return Err(X264Error::InvalidRate("bitrate must be > 0".into()));
        }
        if (vbv_max_rate_bps == 0) != (vbv_buffer_bits == 0) {
            return Err(X264Error::InvalidRate(
                "vbv_max_rate and vbv_buffer must both be zero (no VBV) or both non-zero".into(),
            ));
        }
        Ok(RateKbps {
            bitrate: kbit("bitrate", bitrate_bps)?,
            vbv_max: kbit("vbv_max_rate", vbv_max_rate_bps)?,
            vbv_buffer: kbit("vbv_buffer", vbv_buffer_bits)?,
        })
    }
}

/// The rate-control settings currently in effect, as x264 stores them (kbit granularity).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateSettings {
    pub bitrate_bps: u64,
    pub vbv_max_rate_bps: u64,
    pub vbv_buffer_bits: u64,
}

/// An owned I420 frame: Y plane `width * height`, U and V planes
/// `(width / 2) * (height / 2)`, tightly packed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct I420Frame {
    pub width: u32,
    pub height: u32,
    pub y: Vec<u8>,
    pub u: Vec<u8>,
    pub v: Vec<u8>,
}

impl I420Frame {
    /// A mid-grey frame (Y = U = V = 128). Odd dimensions are rounded up for chroma.
    pub fn new_grey(width: u32, height: u32) -> Self {
        let (w, h) = (width as usize, height as usize);
        let c = w.div_ceil(2) * h.div_ceil(2);
        I420Frame { width, height, y: vec![128; w * h], u: vec![128; c], v: vec![128; c] }
    }

    /// A borrowed view with tight strides.
    pub fn as_planes(&self) -> I420Planes<'_> {
        let cw = (self.width as usize).div_ceil(2);
        I420Planes {
            width: self.width,
            height: self.height,
            y: &self.y,
            y_stride: self.width as usize,
            u: &self.u,
            u_stride: cw,
            v: &self.v,
            v_stride: cw,
        }
    }
}

/// A borrowed I420 picture with arbitrary strides (e.g. straight from a decoder or a
/// capture buffer). Each plane needs at least `stride * (rows - 1) + row_width` bytes.
#[derive(Clone, Copy, Debug)]
pub struct I420Planes<'a> {
    pub width: u32,
    pub height: u32,
    pub y: &'a [u8],
    pub y_stride: usize,
    pub u: &'a [u8],
    pub u_stride: usize,
    pub v: &'a [u8],
    pub v_stride: usize,
}

/// H.264 picture type of an encoded frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameType {
    Idr,
    I,
    P,
    B,
    /// A type code this wrapper does not know.
    Other(i32),
}

impl FrameType {
    fn from_raw(t: i32) -> Self {
        use sys::types as t_;
        match t {
            t_::IDR | t_::KEYFRAME => FrameType::Idr,
            t_::I => FrameType::I,
            t_::P => FrameType::P,
            t_::B | t_::BREF => FrameType::B,
            other => FrameType::Other(other),
        }
    }
}

/// Per-picture options of [`X264Encoder::encode_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PictureOptions {
    /// Make the picture an IDR frame (with SPS/PPS in front).
    pub force_keyframe: bool,
    /// Quantiser offset added to every macroblock on top of x264's own decision (its rate
    /// control and adaptive quantisation), through `quant_offsets`. Positive: a coarser,
    /// smaller frame. Needs adaptive quantisation (every preset but ultrafast).
    pub qp_offset: f32,
}

/// One encoded frame.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodedPicture {
    /// Annex B byte stream of the frame (start codes, SPS/PPS/SEI before keyframes).
    /// Empty if x264 buffered the frame instead of emitting it (does not happen with
    /// `tune_zerolatency`; the frame then comes out of a later call or [`X264Encoder::flush`]).
    pub data: Vec<u8>,
    /// IDR frame (a decoder can start here).
    pub is_keyframe: bool,
    /// Picture type, `None` if nothing was output.
    pub frame_type: Option<FrameType>,
    /// Frame quantiser as reported by x264 (`i_qpplus1 - 1`; the frame's rate-control QP
    /// before adaptive quantisation). 0 if nothing was output.
    pub qp: f64,
    /// pts of the emitted frame (the frame index assigned by [`X264Encoder::encode`]), or
    /// of the submitted frame if nothing was output.
    pub pts: i64,
    /// Wall time of the `x264_encoder_encode` call.
    pub encode_time: Duration,
    /// Luma PSNR in dB of the reconstructed frame against the input, if the encoder was
    /// opened with [`X264Config::psnr`] and produced a picture.
    pub psnr_y: Option<f64>,
}

impl EncodedPicture {
    /// Size of the bitstream in bytes.
    pub fn size_bytes(&self) -> usize {
        self.data.len()
    }
    /// True if x264 produced no output for this call.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// Macroblock partitions searched (x264 `--partitions`), a set of flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Partitions(u32);

impl Partitions {
    pub const NONE: Partitions = Partitions(0);
    /// Intra 4x4.
    pub const I4X4: Partitions = Partitions(sys::types::ANALYSE_I4X4);
    /// Intra 8x8: needs the 8x8 transform, i.e. opened with it enabled (profile "high", or
    /// no profile and a preset above ultrafast).
    pub const I8X8: Partitions = Partitions(sys::types::ANALYSE_I8X8);
    /// P 16x8, 8x16 and 8x8.
    pub const P8X8: Partitions = Partitions(sys::types::ANALYSE_PSUB16X16);
    /// P 8x4, 4x8 and 4x4 (only searched together with P8X8).
    pub const P4X4: Partitions = Partitions(sys::types::ANALYSE_PSUB8X8);
    /// B 16x8, 8x16 and 8x8 (irrelevant without B-frames).
    pub const B8X8: Partitions = Partitions(sys::types::ANALYSE_BSUB16X16);
    /// Everything.
    pub const ALL: Partitions = Partitions(
        sys::types::ANALYSE_I4X4
            | sys::types::ANALYSE_I8X8
            | sys::types::ANALYSE_PSUB16X16
            | sys::types::ANALYSE_PSUB8X8
            | sys::types::ANALYSE_BSUB16X16,
    );

    pub fn contains(self, other: Partitions) -> bool {
        self.0 & other.0 == other.0
    }
    /// The x264 `X264_ANALYSE_*` bits.
    pub fn bits(self) -> u32 {
        self.0
    }
    /// From x264 bits; unknown bits are dropped.
    pub fn from_bits_truncate(bits: u32) -> Self {
        Partitions(bits & Self::ALL.0)
    }
}

impl BitOr for Partitions {
    type Output = Partitions;
    fn bitor(self, rhs: Partitions) -> Partitions {
        Partitions(self.0 | rhs.0)
    }
}

impl BitOrAssign for Partitions {
    fn bitor_assign(&mut self, rhs: Partitions) {
        self.0 |= rhs.0;
    }
}

/// Motion-estimation method (`--me`). Exhaustive searches are excluded because x264 cannot
/// switch into them after open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeMethod {
    Dia,
    Hex,
    Umh,
}

/// Analysis settings changeable per frame with [`X264Encoder::reconfigure_analysis`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnalysisParams {
    /// Partitions for P-frames; the intra bits (I4X4, I8X8) also apply to I-frames.
    pub partitions: Partitions,
    pub me_method: MeMethod,
    /// `--subme`, 0..=11. Cannot leave 0 if the encoder was opened (or set) at 0.
    pub subpel_refine: i32,
    /// `--trellis`, 0..=2. x264 forces 0 without CABAC (ultrafast or baseline profile).
    pub trellis: i32,
}

/// A libx264 encoder.
///
/// `Send` (can move between threads) but not `Sync`; all methods take `&mut self`.
pub struct X264Encoder {
    raw: sys::RawEncoder,
    width: u32,
    height: u32,
    fps_num: u32,
    fps_den: u32,
    vbv: bool,
    next_pts: i64,
    flushed: bool,
}

impl fmt::Debug for X264Encoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("X264Encoder")
            .field("width", &self.width)
            .field("height", &self.height)
            .field("next_pts", &self.next_pts)
            .finish_non_exhaustive()
    }
}

impl X264Encoder {
    /// Validates `cfg` and opens an encoder.
    pub fn open(cfg: &X264Config) -> Result<Self, X264Error> {
        let rate = cfg.validate()?;
        let settings = sys::OpenSettings {
            width: cfg.width,
            height: cfg.height,
            fps_num: cfg.fps_num,
            fps_den: cfg.fps_den,
            preset: &cfg.preset,
            tune_zerolatency: cfg.tune_zerolatency,
            threads: cfg.threads,
            bitrate_kbps: rate.bitrate,
            vbv_max_kbps: rate.vbv_max,
            vbv_buffer_kbit: rate.vbv_buffer,
            profile: cfg.profile.as_deref(),
            subpel_refine: cfg.subpel_refine,
            scenecut: cfg.scenecut,
            refs: cfg.refs,
            filler: cfg.filler,
            log_level: cfg.log_level.raw(),
            constant_qp: cfg.constant_qp.map(i32::from),
            psnr: cfg.psnr,
        };
        let raw = sys::RawEncoder::open(&settings)?;
        Ok(X264Encoder {
            raw,
            width: cfg.width,
            height: cfg.height,
            fps_num: cfg.fps_num,
            fps_den: cfg.fps_den,
            vbv: rate.vbv_max > 0,
            next_pts: 0,
            flushed: false,
        })
    }

    pub fn width(&self) -> u32 {
        self.width
    }
    pub fn height(&self) -> u32 {
        self.height
    }
    /// Frame rate as opened (`fps_num / fps_den`).
    pub fn fps(&self) -> f64 {
        f64::from(self.fps_num) / f64::from(self.fps_den)
    }
    /// The pts the next submitted frame will get (= number of frames submitted so far).
    pub fn next_pts(&self) -> i64 {
        self.next_pts
    }

    /// Encodes the next frame. Its pts is the number of frames submitted before it.
    /// `force_keyframe` makes it an IDR frame (with SPS/PPS in front).
    pub fn encode(
        &mut self,
        frame: &I420Frame,
        force_keyframe: bool,
    ) -> Result<EncodedPicture, X264Error> {
        self.encode_with(frame, PictureOptions { force_keyframe, ..PictureOptions::default() })
    }

    /// [`encode`](Self::encode) with every per-picture option.
    pub fn encode_with(
        &mut self,
        frame: &I420Frame,
        options: PictureOptions,
    ) -> Result<EncodedPicture, X264Error> {
        self.encode_planes_with(&frame.as_planes(), options)
    }

    /// Like [`encode`](Self::encode) for a borrowed picture with strides.
    pub fn encode_planes(
        &mut self,
        planes: &I420Planes<'_>,
        force_keyframe: bool,
    ) -> Result<EncodedPicture, X264Error> {
        self.encode_planes_with(planes, PictureOptions { force_keyframe, ..Default::default() })
    }

    /// Like [`encode_with`](Self::encode_with) for a borrowed picture with strides.
    pub fn encode_planes_with(
        &mut self,
        planes: &I420Planes<'_>,
        options: PictureOptions,
    ) -> Result<EncodedPicture, X264Error> {
        if self.flushed {
            return Err(X264Error::Flushed);
        }
        let p = sys::Planes {
            width: planes.width,
            height: planes.height,
            data: [planes.y, planes.u, planes.v],
            stride: [planes.y_stride, planes.u_stride, planes.v_stride],
        };
        let out = self.raw.encode(Some(&sys::RawInput {
            planes: &p,
            pts: self.next_pts,
            force_idr: options.force_keyframe,
            qp_offset: options.qp_offset,
        }))?;
        self.next_pts += 1;
        Ok(Self::picture(out))
    }

    /// Ends the stream and returns any frames x264 still holds (none with zerolatency).
    /// Afterwards [`encode`](Self::encode) returns [`X264Error::Flushed`].
    pub fn flush(&mut self) -> Result<Vec<EncodedPicture>, X264Error> {
        self.flushed = true;
        let mut out = Vec::new();
        while self.raw.delayed_frames() > 0 {
            let pic = self.raw.encode(None)?;
            if !pic.got_picture {
                break;
            }
            out.push(Self::picture(pic));
        }
        Ok(out)
    }

    fn picture(out: sys::RawOutput) -> EncodedPicture {
        EncodedPicture {
            is_keyframe: out.b_keyframe,
            frame_type: out.got_picture.then(|| FrameType::from_raw(out.i_type)),
            qp: out.qp,
            pts: out.pts,
            encode_time: out.encode_time,
            psnr_y: out.psnr_y,
            data: out.data,
        }
    }

    /// Changes the ABR target and VBV from the next frame on (x264_encoder_reconfig).
    /// Rates are rounded to kbit/s (kbit), non-zero values to at least 1. Requires an
    /// encoder opened with VBV; VBV cannot be switched off ([`X264Error::VbvRequired`]).
    pub fn reconfigure_rate(
        &mut self,
        bitrate_bps: u64,
        vbv_max_rate_bps: u64,
        vbv_buffer_bits: u64,
    ) -> Result<(), X264Error> {
        let rate = RateKbps::from_bps(bitrate_bps, vbv_max_rate_bps, vbv_buffer_bits)?;
        if !self.vbv || rate.vbv_max == 0 {
            return Err(X264Error::VbvRequired);
        }
        self.raw.reconfig_rate(rate.bitrate, rate.vbv_max, rate.vbv_buffer)
    }

    /// The rate settings in effect from the next frame on (kbit granularity).
    pub fn rate(&self) -> RateSettings {
        let s = self.raw.snapshot();
        let bits = |k: i32| u64::try_from(k).unwrap_or(0) * 1000;
        RateSettings {
            bitrate_bps: bits(s.bitrate_kbps),
            vbv_max_rate_bps: bits(s.vbv_max_kbps),
            vbv_buffer_bits: bits(s.vbv_buffer_kbit),
        }
    }

    /// The analysis settings in effect from the next frame on.
    pub fn analysis(&self) -> AnalysisParams {
        let s = self.raw.snapshot();
        AnalysisParams {
            partitions: Partitions::from_bits_truncate(s.inter),
            me_method: match s.me_method {
                sys::types::ME_DIA => MeMethod::Dia,
                sys::types::ME_HEX => MeMethod::Hex,
                _ => MeMethod::Umh,
            },
            subpel_refine: s.subpel_refine,
            trellis: s.trellis,
        }
    }

    /// Whether the 8x8 transform (and so I8x8 partitions) is available: decided at open.
    pub fn transform_8x8_enabled(&self) -> bool {
        self.raw.snapshot().transform_8x8
    }

    /// Changes partitions, motion search, subpel refinement and trellis from the next frame
    /// on (x264_encoder_reconfig).
    ///
    /// Limits of x264, reported as [`X264Error::InvalidAnalysis`] instead of being silently
    /// ignored: `subpel_refine` cannot leave 0 once it is 0 (at open or after a reconfig);
    /// [`Partitions::I8X8`] needs the 8x8 transform enabled at open (profile "high"); trellis
    /// needs CABAC.
    pub fn reconfigure_analysis(&mut self, a: &AnalysisParams) -> Result<(), X264Error> {
        check_subpel(a.subpel_refine)?;
        if !(0..=2).contains(&a.trellis) {
            return Err(X264Error::InvalidAnalysis(format!("trellis {} outside 0..=2", a.trellis)));
        }
        let cur = self.raw.snapshot();
        if cur.subpel_refine == 0 && a.subpel_refine != 0 {
            return Err(X264Error::InvalidAnalysis(
                "subpel_refine cannot be raised from 0 after open".into(),
            ));
        }
        if a.partitions.contains(Partitions::I8X8) && !cur.transform_8x8 {
            return Err(X264Error::InvalidAnalysis(
                "I8X8 partitions need the 8x8 transform (open with profile \"high\")".into(),
            ));
        }
        if a.trellis > 0 && !cur.cabac {
            return Err(X264Error::InvalidAnalysis("trellis needs CABAC".into()));
        }
        let intra_bits = (Partitions::I4X4 | Partitions::I8X8).bits();
        self.raw.reconfig_analysis(&sys::RawAnalysis {
            inter: a.partitions.bits(),
            intra: a.partitions.bits() & intra_bits,
            me_method: match a.me_method {
                MeMethod::Dia => sys::types::ME_DIA,
                MeMethod::Hex => sys::types::ME_HEX,
                MeMethod::Umh => sys::types::ME_UMH,
            },
            subpel_refine: a.subpel_refine,
            trellis: a.trellis,
        })
    }

    /// Marks every reference frame with pts >= `pts` as lost (x264_encoder_invalidate_reference),
    /// so the next frame predicts only from older, intact frames. If none is left -- always
    /// the case with one reference frame ([`X264Config::refs`]), unless `pts` is newer than
    /// every encoded frame -- x264 codes the next frame as an IDR (`is_keyframe` true, with
    /// SPS/PPS). A `pts` older than the last IDR or newer than the last frame is a no-op.
    pub fn invalidate_reference(&mut self, pts: i64) -> Result<(), X264Error> {
        self.raw.invalidate_reference(pts)
    }
}
