//! libx264 as a Sluice [`Encoder`]: encodes frames of a raw yuv420p file (frame `i` of the
//! session is frame `clip_frame(i, n)` of the file, which is memory-mapped: x264 reads each
//! frame from the page cache, with no copy of ours and no read call), follows the
//! rate control of every frame request through `x264_encoder_reconfig`, writes the Annex-B
//! stream and its per-frame index for quality scoring, and charges the encode time to virtual
//! time as measured wall time or as a deterministic model.

use crate::complexity::{analysis_for, qp_offset_for_size_scale};
use crate::{I420Planes, PictureOptions, X264Config, X264Encoder, X264Error};
use sluice_core::encoder::satd::{satd, LumaPlane};
use sluice_core::encoder::{
    Complexity, EncodeTimeMode, EncodedFrame, Encoder, FrameAnalysis, FrameRequest, X264Settings,
};
use sluice_core::units::{DataSize, TimeDelta};
use std::fs::File;
use std::io::{BufWriter, Write};

/// Modeled encode time of one 1280x720 frame per preset, in ms; scaled by the pixel count.
/// For reproducible runs (`--encode-time modeled`); `measured` charges the real wall time.
/// Measured by `bench/encoder.py` (docs/schemes.md, "Encoder characterisation") on the 2-core AMD EPYC
/// VM Sluice is developed on, one thread, ABR 4 Mbps + 0.5 s VBV, nothing else running:
/// superfast 5.6 ms, the mean over six clips at 1280 px wide (per-clip means 4.9-7.5 ms; runs
/// while other builds shared the cores gave 6.0-6.2 ms); the other presets are superfast
/// times their measured ratio on the shipped clip (medium took no longer than fast). slow and
/// slower were not measured: medium's time x1.67 and x2.5, the ratios of the earlier guess.
fn modeled_ms_720p(preset: &str) -> f64 {
    match preset {
        "ultrafast" => 2.9,
        "superfast" => 5.6,
        "veryfast" => 8.7,
        "faster" => 12.4,
        "fast" => 17.9,
        "medium" => 18.1,
        "slow" => 30.0,
        _ => 45.0,
    }
}

/// Modeled encode time of a complexity level relative to c0 (c0 itself is charged the
/// preset's time; measured, c0 takes 1.13x superfast's own settings). Measured by
/// `bench/encoder.py` as ACE-C uses the levels: one frame in 10 of a c0 stream switched to
/// the level, its time over the same frame's at c0, mean over six clips at 1280 px, ABR
/// 4 Mbps: c1 2.1x, c2 2.6x (per clip 1.8-2.5x and 2.2-3.1x; at 640x360 and 1.5 Mbps the same
/// clips give 2.25x and 2.85x, and `examples/complexity_probe.rs` found 2.6x and 3.2x on two
/// of them).
fn modeled_complexity_factor(level: Complexity) -> f64 {
    match level {
        Complexity::C0 => 1.0,
        Complexity::C1 => 2.1,
        Complexity::C2 => 2.6,
    }
}

pub struct X264SimEncoder {
    encoder: X264Encoder,
    /// The settings it was opened with (to reopen it with filler data before the first frame).
    config: X264Config,
    /// The raw clip, mapped read-only. Sluice's clip cache writes a file once and renames it
    /// into place, so a mapped file is never changed under the mapping; a file that shrinks
    /// anyway (someone else's doing) is caught before each frame is read ([`Self::planes`]),
    /// an error rather than a SIGBUS.
    video: memmap2::Mmap,
    video_file: File,
    video_frames: u64,
    width: u32,
    height: u32,
    rate: Option<(u64, u64, u64)>,
    complexity: Option<Complexity>,
    /// Half-resolution luma of the last analysed frame, for the SATD of the next one.
    last_luma: Option<(u64, LumaPlane)>,
    /// Wall time spent on analysis since the last encode (charged to that encode when time
    /// is measured).
    analysis_time: std::time::Duration,
    stream: Option<(BufWriter<File>, BufWriter<File>, u64)>,
    encode_time: EncodeTimeMode,
    modeled: TimeDelta,
    failure: Option<String>,
    /// (frame id, pts) of the recent encodes, to turn a reference into x264's pts.
    encoded: std::collections::VecDeque<(u64, i64)>,
    /// Gets every encoded frame's bitstream (the live sender puts it on the wire).
    frame_sink: Option<FrameSink>,
}

/// A receiver of each encoded frame's bitstream: `(frame id, Annex B bytes)`.
pub type FrameSink = Box<dyn FnMut(u64, &[u8]) + Send>;

/// Encodes remembered for references (more than x264's 16 reference frames).
const REFERENCE_MEMORY: usize = 64;

/// Why the encoder could not be set up (reported to the user, never a panic).
#[derive(Debug)]
pub enum SimEncoderError {
    Video(String),
    Output(String),
    X264(X264Error),
}

impl std::fmt::Display for SimEncoderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimEncoderError::Video(m) | SimEncoderError::Output(m) => f.write_str(m),
            SimEncoderError::X264(e) => write!(f, "x264: {e}"),
        }
    }
}
impl std::error::Error for SimEncoderError {}

/// Session frame `index` of a mapped raw yuv420p clip of `frames` frames (even `width` and
/// `height`, checked against the file's length at open).
fn clip_planes(video: &[u8], width: u32, height: u32, frames: u64, index: u64) -> I420Planes<'_> {
    let (w, h) = (width as usize, height as usize);
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    let frame_bytes = w * h + 2 * cw * ch;
    let clip_index = sluice_core::encoder::clip_frame(index, frames) as usize;
    let frame = &video[clip_index * frame_bytes..(clip_index + 1) * frame_bytes];
    let (y, chroma) = frame.split_at(w * h);
    let (u, v) = chroma.split_at(cw * ch);
    I420Planes { width, height, y, y_stride: w, u, u_stride: cw, v, v_stride: cw }
}

impl X264SimEncoder {
    /// Hands every frame's bitstream (as written to the stream file) to `sink` as well.
    pub fn set_frame_sink(&mut self, sink: FrameSink) {
        self.frame_sink = Some(sink);
    }

    pub fn open(s: &X264Settings, fps: f64) -> Result<Self, SimEncoderError> {
        let file = File::open(&s.video_path)
            .map_err(|e| SimEncoderError::Video(format!("{}: {e}", s.video_path)))?;
        let frame_bytes = s.width as u64 * s.height as u64 * 3 / 2;
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if s.width == 0 || s.height == 0 || s.video_frames == 0 {
            return Err(SimEncoderError::Video(
                "x264: video size and frame count are required".into(),
            ));
        }
        if len < frame_bytes * s.video_frames {
            return Err(SimEncoderError::Video(format!(
                "{}: {len} bytes, less than {} frames of {}x{} yuv420p",
                s.video_path, s.video_frames, s.width, s.height
            )));
        }
        let video = crate::sys::map_read_only(&file)
            .map_err(|e| SimEncoderError::Video(format!("{}: {e}", s.video_path)))?;
        // Opened at a placeholder rate; every frame request sets the real one.
        let mut cfg = X264Config::new(s.width, s.height, 1, 300_000);
        cfg.fps_num = (fps * 1000.0).round() as u32;
        cfg.fps_den = 1000;
        cfg.preset = s.preset.clone();
        cfg.threads = s.threads;
        cfg.refs = s.refs;
        let encoder = X264Encoder::open(&cfg).map_err(SimEncoderError::X264)?;
        let config = cfg;
        let stream = match &s.bitstream_path {
            None => None,
            Some(path) => {
                let open = |p: String| {
                    File::create(&p)
                        .map(BufWriter::new)
                        .map_err(|e| SimEncoderError::Output(format!("{p}: {e}")))
                };
                Some((open(path.clone())?, open(format!("{path}.idx"))?, 0))
            }
        };
        let pixels = s.width as f64 * s.height as f64 / (1280.0 * 720.0);
        Ok(X264SimEncoder {
            encoder,
            config,
            video,
            video_file: file,
            video_frames: s.video_frames,
            width: s.width,
            height: s.height,
            rate: None,
            complexity: None,
            last_luma: None,
            analysis_time: std::time::Duration::ZERO,
            stream,
            encode_time: s.encode_time,
            modeled: TimeDelta::from_ms_f64(modeled_ms_720p(&s.preset) * pixels),
            failure: None,
            encoded: std::collections::VecDeque::new(),
            frame_sink: None,
        })
    }

    /// Session frame `index`: its clip frame's planes in the mapped file, if the file still
    /// holds them.
    fn planes(&self, index: u64) -> Result<I420Planes<'_>, String> {
        self.check_frame(index)?;
        Ok(clip_planes(&self.video, self.width, self.height, self.video_frames, index))
    }

    /// Whether the file still holds session frame `index` (reading a mapped page past the end
    /// of a truncated file would be a SIGBUS).
    fn check_frame(&self, index: u64) -> Result<(), String> {
        let (w, h) = (u64::from(self.width), u64::from(self.height));
        let frame_bytes = w * h + 2 * w.div_ceil(2) * h.div_ceil(2);
        let clip_index = sluice_core::encoder::clip_frame(index, self.video_frames);
        let end = (clip_index + 1) * frame_bytes;
        let len = self.video_file.metadata().map_err(|e| e.to_string())?.len();
        if len < end {
            return Err(format!(
                "reading video frame {index}: the file shrank to {len} bytes while in use"
            ));
        }
        Ok(())
    }

    /// Encodes one frame, or says why it could not.
    fn try_encode(&mut self, req: &FrameRequest) -> Result<EncodedFrame, String> {
        let rc = req.rate_control;
        if rc.filler != self.config.filler {
            // x264 takes filler data only at open: before the first frame the encoder is
            // reopened with it; later it cannot change.
            if !self.encoded.is_empty() {
                return Err(
                    "x264 cannot switch filler data on or off after the first frame".to_owned()
                );
            }
            self.config.filler = rc.filler;
            self.encoder = X264Encoder::open(&self.config)
                .map_err(|e| format!("x264 rejected filler data: {e}"))?;
            self.rate = None;
            self.complexity = None;
        }
        let want = (
            rc.target_rate.as_bps().max(1000) as u64,
            rc.vbv_max_rate.as_bps().max(1000) as u64,
            rc.vbv_buffer.as_bits().max(1000) as u64,
        );
        if self.rate != Some(want) {
            self.encoder
                .reconfigure_rate(want.0, want.1, want.2)
                .map_err(|e| format!("x264 rejected a rate change to {want:?}: {e}"))?;
            self.rate = Some(want);
        }
        if let Some(level) = req.complexity {
            if self.complexity != Some(level) {
                self.encoder.reconfigure_analysis(&analysis_for(level)).map_err(|e| {
                    format!(
                        "x264 cannot switch to complexity {} (ACE-C needs a preset from \
                         superfast up, with CABAC and the 8x8 transform): {e}",
                        level.name()
                    )
                })?;
                self.complexity = Some(level);
            }
        }
        // An explicit reference: drop every newer one (x264 then predicts from what is left,
        // or codes an IDR if nothing is). A reference no longer known forces a keyframe.
        let mut force_keyframe = req.force_keyframe;
        if let Some(reference) = req.reference {
            let newest = self.encoded.back().map(|&(id, _)| id);
            if newest != Some(reference) {
                match self.encoded.iter().find(|&&(id, _)| id == reference) {
                    Some(&(_, pts)) => self.encoder.invalidate_reference(pts + 1).map_err(|e| {
                        format!("x264 cannot drop references after frame {reference}: {e}")
                    })?,
                    None => force_keyframe = true,
                }
            }
        }
        // ACE §5.1's planned-size correction as a quantiser offset on every macroblock: x264
        // plans the frame as usual and the offset lowers its size (x264's API has no other
        // way to change one frame's plan).
        let options = PictureOptions {
            force_keyframe,
            qp_offset: qp_offset_for_size_scale(req.planned_size_scale),
        };
        let pts = self.encoder.next_pts();
        self.check_frame(req.source_index)?;
        // The planes borrow the mapping only (not the encoder), hence the free function.
        let planes =
            clip_planes(&self.video, self.width, self.height, self.video_frames, req.source_index);
        let pic = self
            .encoder
            .encode_planes_with(&planes, options)
            .map_err(|e| format!("x264 failed on frame {}: {e}", req.frame_id))?;
        self.encoded.push_back((req.frame_id, pts));
        if self.encoded.len() > REFERENCE_MEMORY {
            self.encoded.pop_front();
        }
        if let Some((out, idx, offset)) = &mut self.stream {
            // With more than one reference the controller may predict past encodes the
            // receiver never gets: the stream declares its frame_num gaps (crate::sps) in the
            // SPS, which x264 writes only before a keyframe.
            let patched;
            let data = if self.config.refs > 1 && pic.is_keyframe {
                patched = crate::sps::allow_frame_num_gaps(&pic.data);
                &patched
            } else {
                &pic.data
            };
            out.write_all(data)
                .and_then(|_| writeln!(idx, "{} {}", offset, data.len()))
                .map_err(|e| format!("writing the encoded stream: {e}"))?;
            *offset += data.len() as u64;
            if let Some(sink) = &mut self.frame_sink {
                sink(req.frame_id, data);
            }
        } else if let Some(sink) = &mut self.frame_sink {
            sink(req.frame_id, &pic.data);
        }
        let analysis = std::mem::take(&mut self.analysis_time);
        let encode_time = match self.encode_time {
            EncodeTimeMode::Measured => {
                TimeDelta::from_us((pic.encode_time + analysis).as_micros() as i64)
            }
            EncodeTimeMode::Modeled => {
                self.modeled * req.complexity.map_or(1.0, modeled_complexity_factor)
            }
        };
        Ok(EncodedFrame {
            frame_id: req.frame_id,
            size: DataSize::from_bytes(pic.data.len().max(1) as i64),
            is_keyframe: pic.is_keyframe,
            qp: pic.qp,
            encode_time,
        })
    }
}

impl Encoder for X264SimEncoder {
    /// SATD of the frame against the previously analysed one, on half-resolution luma.
    fn analyze(&mut self, source_index: u64) -> Option<FrameAnalysis> {
        let frame_index = source_index;
        if self.failure.is_some() {
            return None;
        }
        let started = std::time::Instant::now();
        let (w, h) = (self.width as usize, self.height as usize);
        let planes = match self.planes(frame_index) {
            Ok(p) => p,
            Err(e) => {
                self.failure = Some(e);
                return None;
            }
        };
        let luma = LumaPlane::downscale_2x(planes.y, w, h, w);
        let value = match &self.last_luma {
            Some((prev_index, prev)) if prev_index + 1 == frame_index => satd(&luma, prev),
            _ => None,
        };
        self.last_luma = Some((frame_index, luma));
        self.analysis_time += started.elapsed();
        value.map(|s| FrameAnalysis { satd: s as f64 })
    }

    fn encode(&mut self, req: &FrameRequest) -> EncodedFrame {
        if self.failure.is_none() {
            match self.try_encode(req) {
                Ok(frame) => return frame,
                Err(why) => self.failure = Some(why),
            }
        }
        // Failed: a placeholder until the simulation sees `failure()` and stops.
        EncodedFrame {
            frame_id: req.frame_id,
            size: DataSize::from_bytes(1),
            is_keyframe: false,
            qp: 0.0,
            encode_time: TimeDelta::ZERO,
        }
    }

    fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }
}

impl Drop for X264SimEncoder {
    fn drop(&mut self) {
        if let Some((out, idx, _)) = &mut self.stream {
            // Best effort: a failed flush shows up as a short stream when it is scored.
            let _ = out.flush();
            let _ = idx.flush();
        }
    }
}
