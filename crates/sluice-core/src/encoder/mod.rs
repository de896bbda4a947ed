//! Encoders behind one trait. The sender asks for one frame at a time with the rate-control
//! parameters of that frame; the encoder answers with the frame's size, type, QP and the
//! time the encode took.
//!
//! The sender never calls an [`Encoder`] directly: it submits requests to an
//! [`EncoderDriver`] and polls it for finished frames, so an encode never blocks the pacing
//! path. [`InlineEncoder`] is the simulator's driver: it encodes at submission and releases
//! the frame when the encode time has passed in virtual time, one encode after another; a
//! live runtime runs the encoder on its own thread behind the same two calls.
//!
//! * [`model::ModelEncoder`]: a deterministic frame-size model that behaves like x264's
//!   ABR + VBV rate control (heavy-tailed sizes, several frames to converge after a drop).
//! * libx264 on real video: the `sluice-x264` crate implements [`Encoder`] from an
//!   [`X264Settings`] (the core only holds the settings; it links no codec).

pub mod model;
pub mod satd;

use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};

/// Rate-control parameters for one frame (what x264_encoder_reconfig can change).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateControl {
    /// ABR target bitrate.
    pub target_rate: DataRate,
    /// VBV maximum rate (x264 `vbv_max_bitrate`); the seeds use the target rate.
    pub vbv_max_rate: DataRate,
    /// VBV buffer size (x264 `vbv_buffer_size`).
    pub vbv_buffer: DataSize,
    /// Constant bitrate with filler data (x264 `--nal-hrd cbr` style `b_filler`): frames that
    /// would let the VBV buffer overflow are padded, so the stream never runs below the
    /// target. x264 reads it at open only, so the x264 encoder takes it from its first frame;
    /// the model encoder reads it at every frame.
    pub filler: bool,
}

impl RateControl {
    /// ABR with VBV max rate = target and a buffer of `buffer_duration` of the target rate
    /// (the seeds' code: 0.5 s).
    pub fn abr_vbv(target_rate: DataRate, buffer_duration: TimeDelta) -> Self {
        RateControl {
            target_rate,
            vbv_max_rate: target_rate,
            vbv_buffer: target_rate * buffer_duration,
            filler: false,
        }
    }

    /// The same with filler data on or off.
    pub fn with_filler(self, filler: bool) -> Self {
        RateControl { filler, ..self }
    }
}

/// Encoding-complexity level (ACE §5.1, Table 2): how hard the encoder searches for a
/// smaller frame. Each step up trades encode time for a smaller frame at equal quality.
///
/// With libx264 (`sluice-x264` maps them to analysis parameters):
/// * `C0`: 8x8 inter and intra partitions only, DIA motion search, subpel 1, no trellis;
/// * `C1`: all partitions, HEX search, subpel 4, no trellis;
/// * `C2`: `C1` with trellis quantisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Complexity {
    /// The lowest level: the fastest encode, the largest frame at equal quality.
    C0,
    /// The middle level: a slower encode, a smaller frame than `C0`'s at equal quality (under
    /// ABR it buys quality unless ACE-C's planned size shrinks the frame).
    C1,
    /// The highest level: the slowest encode, the smallest frame at equal quality (under ABR
    /// it buys quality unless ACE-C's planned size shrinks the frame).
    C2,
}

impl Complexity {
    /// Every level, lowest first (in [`Complexity::index`] order).
    pub const ALL: [Complexity; 3] = [Complexity::C0, Complexity::C1, Complexity::C2];
    /// The level's position in [`Complexity::ALL`] (0 for `C0`), for per-level arrays.
    pub fn index(self) -> usize {
        self as usize
    }
    /// The level's name as configs and frame columns write it (`"c0"`, `"c1"`, `"c2"`).
    pub fn name(self) -> &'static str {
        ["c0", "c1", "c2"][self.index()]
    }
}

/// A request to encode source frame `source_index`, captured at `capture_time`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameRequest {
    /// The id of this encode: fresh and increasing with every encode (a source frame encoded
    /// twice gets two ids).
    pub frame_id: u64,
    /// Index of the frame in the source (0, 1, 2, ... at the capture rate). Encoding an index
    /// again gives the same content.
    pub source_index: u64,
    /// When the source frame was captured (the frame's latency counts from it).
    pub capture_time: Timestamp,
    /// The frame (id) this one may reference, with every older one: `None` for the previous
    /// encode. An older frame invalidates the references newer than it, as
    /// `x264_encoder_invalidate_reference` does; the frame stays a P frame as long as the
    /// encoder still holds the reference (else it becomes a keyframe).
    pub reference: Option<u64>,
    /// Rate-control parameters of this frame (see [`RateControl`]).
    pub rate_control: RateControl,
    /// Code the frame as a keyframe (the sender sets it on a receiver's keyframe request).
    pub force_keyframe: bool,
    /// Complexity level for this frame; `None` keeps the encoder's own settings (the
    /// preset's).
    pub complexity: Option<Complexity>,
    /// Scale on the size the rate control plans for this frame (ACE §5.1's planned-size
    /// correction): 1 leaves the plan alone; 0.8 asks for a frame about 20% smaller than the
    /// rate control would make it. Encoders carry it out as a quantiser offset on top of
    /// their rate control's decision, each with its own size-vs-quantiser law, so the saving
    /// is approximate. Values that are not positive numbers count as 1.
    pub planned_size_scale: f64,
}

impl FrameRequest {
    /// A request for source frame `index` as its own encode `index` (the usual case: one
    /// encode per capture slot), at the given rate control.
    pub fn for_slot(index: u64, capture_time: Timestamp, rate_control: RateControl) -> Self {
        FrameRequest {
            frame_id: index,
            source_index: index,
            capture_time,
            reference: None,
            rate_control,
            force_keyframe: false,
            complexity: None,
            planned_size_scale: 1.0,
        }
    }
}

/// What the encoder can say about a frame before encoding it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameAnalysis {
    /// SATD between the frame and its predecessor (luma, 4x4 Hadamard), the size predictor
    /// of ACE-C §4.2 Eq. 3-4. Only ratios between frames matter.
    pub satd: f64,
}

/// The result of encoding one frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EncodedFrame {
    /// The [`FrameRequest::frame_id`] of the request this frame answers.
    pub frame_id: u64,
    /// Size of the encoded bitstream of the frame (payload, no packet headers).
    pub size: DataSize,
    /// Whether the encoder coded it as a keyframe (decodable without a reference).
    pub is_keyframe: bool,
    /// Average quantiser of the frame.
    pub qp: f64,
    /// How long the encode took.
    pub encode_time: TimeDelta,
}

/// A video encoder with per-frame rate control.
pub trait Encoder: Send {
    /// Looks at source frame `source_index` before it is encoded (the next frame to encode).
    /// Encoders that cannot answer return `None`, the default; calling it is optional.
    fn analyze(&mut self, _source_index: u64) -> Option<FrameAnalysis> {
        None
    }
    /// Encodes a frame. Source indices usually increase by one; they may skip (slots left
    /// unencoded) or repeat an earlier index (a frame encoded again, with an explicit
    /// [`FrameRequest::reference`]).
    fn encode(&mut self, request: &FrameRequest) -> EncodedFrame;
    /// Why the encoder cannot go on (a read or codec error in the middle of a run), if it
    /// failed. The simulation stops at the first failure and reports it; an encoder that
    /// failed returns placeholder frames until then.
    fn failure(&self) -> Option<&str> {
        None
    }
}

/// A frame the encoder finished, with when its encode ran.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FinishedFrame {
    /// The request the frame was encoded from.
    pub request: FrameRequest,
    /// The encoded frame: size, type, QP and encode time.
    pub frame: EncodedFrame,
    /// When the encode started (never before the previous encode finished).
    pub started: Timestamp,
    /// When the encode finished and the frame became available to the sender.
    pub finished: Timestamp,
}

/// The sender's encoder seam: requests are submitted, finished frames polled, so the encode
/// runs off the pacing path.
pub trait EncoderDriver: Send {
    /// See [`Encoder::analyze`] (runs at once).
    fn analyze(&mut self, source_index: u64) -> Option<FrameAnalysis>;
    /// Queues an encode; encodes run one at a time in submission order.
    fn submit(&mut self, request: FrameRequest, now: Timestamp);
    /// The next frame finished by `now`, in submission order.
    fn poll_finished(&mut self, now: Timestamp) -> Option<FinishedFrame>;
    /// When the next frame finishes (`Timestamp::INFINITY` if none is queued).
    fn poll_timeout(&self) -> Timestamp;
    /// See [`Encoder::failure`].
    fn failure(&self) -> Option<&str>;
}

/// The simulator's [`EncoderDriver`]: encodes at submission and charges the encode time to
/// virtual time. An encode starts when the previous one has finished (or at submission).
pub struct InlineEncoder {
    encoder: Box<dyn Encoder>,
    free_at: Timestamp,
    finished: std::collections::VecDeque<FinishedFrame>,
}

impl InlineEncoder {
    /// A driver around `encoder`, idle from time zero.
    pub fn new(encoder: Box<dyn Encoder>) -> Self {
        InlineEncoder {
            encoder,
            free_at: Timestamp::ZERO,
            finished: std::collections::VecDeque::new(),
        }
    }
}

impl EncoderDriver for InlineEncoder {
    fn analyze(&mut self, source_index: u64) -> Option<FrameAnalysis> {
        self.encoder.analyze(source_index)
    }
    fn submit(&mut self, request: FrameRequest, now: Timestamp) {
        let frame = self.encoder.encode(&request);
        let started = now.max(self.free_at);
        let finished = started + frame.encode_time;
        self.free_at = finished;
        self.finished.push_back(FinishedFrame { request, frame, started, finished });
    }
    fn poll_finished(&mut self, now: Timestamp) -> Option<FinishedFrame> {
        if self.finished.front()?.finished <= now {
            self.finished.pop_front()
        } else {
            None
        }
    }
    fn poll_timeout(&self) -> Timestamp {
        self.finished.front().map_or(Timestamp::INFINITY, |f| f.finished)
    }
    fn failure(&self) -> Option<&str> {
        self.encoder.failure()
    }
}

/// How a real encoder's encode time is charged to virtual time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EncodeTimeMode {
    /// The wall time of the encode call (the default with x264; not reproducible).
    #[default]
    Measured,
    /// A deterministic per-preset model scaled by the pixel count (reproducible).
    Modeled,
}

/// The frame of a `frames`-frame clip that session frame `index` shows: the clip plays
/// forwards, then backwards, and so on (0, 1, .., n-1, n-2, .., 1, 0, 1, ..), so a session
/// longer than the clip has no cut where it loops. A plain loop jumps from the last frame to
/// the first, a scene cut that x264 answers with a keyframe (a 2 s clip looped for 30 s gets
/// 14); played back and forth, the clip's motion reverses instead.
pub fn clip_frame(index: u64, frames: u64) -> u64 {
    if frames <= 1 {
        return 0;
    }
    let period = 2 * (frames - 1);
    let k = index % period;
    if k < frames {
        k
    } else {
        period - k
    }
}

#[cfg(test)]
mod clip_tests {
    #[test]
    fn a_clip_plays_back_and_forth() {
        let seq: Vec<u64> = (0..12).map(|i| super::clip_frame(i, 4)).collect();
        assert_eq!(seq, [0, 1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 1]);
        assert_eq!(super::clip_frame(7, 1), 0);
        assert_eq!(super::clip_frame(5, 0), 0);
        // Consecutive frames never jump by more than one.
        assert!((1..1000u64)
            .all(|i| super::clip_frame(i, 7).abs_diff(super::clip_frame(i - 1, 7)) == 1));
    }
}

/// Settings of the libx264 encoder on a raw I420 video file (built by `sluice-x264`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct X264Settings {
    /// Raw yuv420p file (the front end decodes any clip to one); played back and forth when
    /// shorter than the session ([`clip_frame`]).
    pub video_path: String,
    /// Frame width in pixels (`sluice-x264` requires it even, at most 16384).
    pub width: u32,
    /// Frame height in pixels (even, at most 16384, as the width).
    pub height: u32,
    /// Frames in the file.
    pub video_frames: u64,
    /// x264 preset; the seeds' WebRTC forks use superfast or ultrafast with zerolatency.
    pub preset: String,
    /// x264 encoder threads (0 lets x264 choose; default 1).
    pub threads: u32,
    /// Reference frames kept (x264 `--ref`, 1..=16). The seeds use 1; a frame that
    /// re-references an older one after newer ones were dropped stays a P frame only if the
    /// encoder still holds it (with 1, it becomes an IDR).
    pub refs: u32,
    /// How the encode time is charged to virtual time (default: measured).
    pub encode_time: EncodeTimeMode,
    /// Where to write the encoded stream (Annex B) and its per-frame index (`<path>.idx`:
    /// one `offset length` line per frame), for quality scoring after the run.
    pub bitstream_path: Option<String>,
}

impl Default for X264Settings {
    fn default() -> Self {
        X264Settings {
            video_path: String::new(),
            width: 0,
            height: 0,
            video_frames: 0,
            preset: "superfast".into(),
            threads: 1,
            refs: 1,
            encode_time: EncodeTimeMode::Measured,
            bitstream_path: None,
        }
    }
}
