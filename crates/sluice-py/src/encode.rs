//! Encoders outside the simulator, for the encoder benchmarks (`bench/encoder.py`).
//!
//! * `encode_clip(raw_path, width, height, fps, frames, jobs_json, start_frame=0)` encodes
//!   `frames` frames of a raw I420 file from `start_frame` on (played back and forth when
//!   shorter, `sluice_core::encoder::clip_frame`) with
//!   libx264, once per job; records and schedules count frames from 0 at `start_frame`. The jobs run
//!   in lockstep -- frame `i` goes through every job's encoder (in an order rotated per frame)
//!   before frame `i + 1` -- so a change in machine load hits all jobs alike and their
//!   encode-time ratios stay fair.
//! * `model_encode(fps, frames, jobs_json)` runs the same schedules on the core's model
//!   encoder, for comparing it with x264.
//!
//! A job is `{"preset": "superfast", "threads": 1, "refs": 1, "qp": null, "psnr": false,
//! "model": {...}, "schedule": [STEP, ...]}` (all but `schedule` optional; `model` is a
//! `ModelEncoderConfig` for `model_encode`, `preset`/`threads`/`refs`/`qp`/`psnr` are
//! x264's). A
//! step `{"frame": N, "bitrate_bps": B, "vbv_max_bps": M, "vbv_buffer_bits": V,
//! "complexity": "c0", "size_scale": 1.0}` applies from frame `N` on: a step with
//! `bitrate_bps` sets the ABR target and VBV (`vbv_max_bps` defaults to the bitrate,
//! `vbv_buffer_bits` to half of it, a 0.5 s buffer); `complexity` switches the analysis level
//! (ACE Table 2); `size_scale` is the planned-size correction (ACE §5.1; on x264 a quant
//! offset of `-QP_PER_SIZE_HALVING * log2(size_scale)` on every macroblock); absent fields
//! keep what is in effect. ABR jobs need a rate at frame 0; `qp` jobs (constant quantiser, no
//! VBV) take no rates. Both return JSON: one array per job of per-frame records `{"frame",
//! "size_bytes", "type" ("IDR", "I", "P", "B", "?"), "keyframe", "qp", "encode_us",
//! "psnr_y"}`, `encode_us` being the wall time of the encode call (model: its modeled time)
//! and `psnr_y` the luma PSNR of x264's reconstruction if `psnr` was asked for, else null.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use serde::{Deserialize, Serialize};
use sluice_core::encoder::model::{ModelEncoder, ModelEncoderConfig};
use sluice_core::encoder::{Complexity, Encoder, FrameRequest, RateControl};
use sluice_core::units::{DataRate, DataSize, Timestamp};
use sluice_x264::complexity::{analysis_for, qp_offset_for_size_scale};
use sluice_x264::{FrameType, I420Frame, PictureOptions, X264Config, X264Encoder};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Job {
    #[serde(default = "default_preset")]
    preset: String,
    #[serde(default = "default_threads")]
    threads: u32,
    /// Reference frames x264 keeps (`X264Config::refs`).
    #[serde(default = "default_refs")]
    refs: u32,
    #[serde(default)]
    qp: Option<u8>,
    #[serde(default)]
    psnr: bool,
    #[serde(default)]
    model: Option<ModelEncoderConfig>,
    schedule: Vec<Step>,
}

fn default_preset() -> String {
    "superfast".into()
}

fn default_threads() -> u32 {
    1
}

fn default_refs() -> u32 {
    1
}

#[derive(Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    frame: u64,
    bitrate_bps: Option<u64>,
    vbv_max_bps: Option<u64>,
    vbv_buffer_bits: Option<u64>,
    complexity: Option<Complexity>,
    /// Planned-size scale from this frame on (see `FrameRequest::planned_size_scale`).
    size_scale: Option<f64>,
}

impl Step {
    /// (bitrate, VBV max rate, VBV buffer) this step sets, if any.
    fn rate(&self) -> Option<(u64, u64, u64)> {
        self.bitrate_bps
            .map(|b| (b, self.vbv_max_bps.unwrap_or(b), self.vbv_buffer_bits.unwrap_or(b / 2)))
    }
}

#[derive(Serialize)]
struct Record {
    frame: u64,
    size_bytes: usize,
    #[serde(rename = "type")]
    frame_type: &'static str,
    keyframe: bool,
    qp: f64,
    encode_us: f64,
    psnr_y: Option<f64>,
}

enum Failure {
    /// Bad input: raised as ValueError.
    Invalid(String),
    /// The encoder or the file failed mid-run: RuntimeError.
    Run(String),
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        match f {
            Failure::Invalid(m) => PyValueError::new_err(m),
            Failure::Run(m) => PyRuntimeError::new_err(m),
        }
    }
}

fn parse_jobs(jobs_json: &str, model: bool) -> Result<Vec<Job>, Failure> {
    let jobs: Vec<Job> = serde_json::from_str(jobs_json)
        .map_err(|e| Failure::Invalid(format!("invalid encoder jobs: {e}")))?;
    if jobs.is_empty() {
        return Err(Failure::Invalid("no encoder jobs".into()));
    }
    for (k, job) in jobs.iter().enumerate() {
        let bad = |why: &str| Failure::Invalid(format!("encoder job {k}: {why}"));
        if !job.schedule.windows(2).all(|w| w[0].frame < w[1].frame) {
            return Err(bad("schedule steps must have increasing frame numbers"));
        }
        if job.schedule.iter().any(|s| s.size_scale.is_some_and(|x| !(x > 0.0 && x.is_finite()))) {
            return Err(bad("size_scale must be a positive number"));
        }
        let has_rate = job.schedule.iter().any(|s| s.rate().is_some());
        if job.schedule.iter().any(|s| {
            s.bitrate_bps.is_none() && (s.vbv_max_bps.is_some() || s.vbv_buffer_bits.is_some())
        }) {
            return Err(bad("vbv_max_bps and vbv_buffer_bits need bitrate_bps in the same step"));
        }
        if job.qp.is_some() {
            if model {
                return Err(bad("the model encoder has no constant-QP mode"));
            }
            if has_rate {
                return Err(bad("a constant-QP job takes no rates"));
            }
        } else if job.schedule.first().is_none_or(|s| s.frame != 0 || s.bitrate_bps.is_none()) {
            return Err(bad("an ABR job needs a step at frame 0 with bitrate_bps"));
        }
        if !model && job.model.is_some() {
            return Err(bad("\"model\" is for model_encode"));
        }
        if model && job.psnr {
            return Err(bad("the model encoder has no PSNR"));
        }
    }
    Ok(jobs)
}

fn type_name(t: Option<FrameType>) -> &'static str {
    match t {
        Some(FrameType::Idr) => "IDR",
        Some(FrameType::I) => "I",
        Some(FrameType::P) => "P",
        Some(FrameType::B) => "B",
        _ => "?",
    }
}

struct X264Job {
    encoder: X264Encoder,
    schedule: Vec<Step>,
    next_step: usize,
    size_scale: f64,
    records: Vec<Record>,
}

impl X264Job {
    fn open(job: Job, width: u32, height: u32, fps: f64) -> Result<Self, Failure> {
        let (bitrate, vbv_max, vbv_buffer) =
            job.schedule.first().and_then(Step::rate).unwrap_or((1_000_000, 1_000_000, 500_000));
        let mut cfg = X264Config::new(width, height, 1, bitrate);
        cfg.fps_num = (fps * 1000.0).round() as u32;
        cfg.fps_den = 1000;
        cfg.vbv_max_rate_bps = vbv_max;
        cfg.vbv_buffer_bits = vbv_buffer;
        cfg.preset = job.preset;
        cfg.threads = job.threads;
        cfg.refs = job.refs;
        cfg.constant_qp = job.qp;
        cfg.psnr = job.psnr;
        let encoder =
            X264Encoder::open(&cfg).map_err(|e| Failure::Invalid(format!("x264: {e}")))?;
        Ok(X264Job {
            encoder,
            schedule: job.schedule,
            next_step: 0,
            size_scale: 1.0,
            records: Vec::new(),
        })
    }

    fn encode(&mut self, index: u64, frame: &I420Frame) -> Result<(), Failure> {
        while let Some(step) = self.schedule.get(self.next_step).filter(|s| s.frame <= index) {
            if let Some((b, m, v)) = step.rate() {
                self.encoder.reconfigure_rate(b, m, v).map_err(|e| {
                    Failure::Invalid(format!("frame {index}: rate {b}/{m}/{v}: {e}"))
                })?;
            }
            if let Some(level) = step.complexity {
                self.encoder.reconfigure_analysis(&analysis_for(level)).map_err(|e| {
                    Failure::Invalid(format!("frame {index}: complexity {}: {e}", level.name()))
                })?;
            }
            self.size_scale = step.size_scale.unwrap_or(self.size_scale);
            self.next_step += 1;
        }
        let qp_offset = qp_offset_for_size_scale(self.size_scale);
        let options = PictureOptions { force_keyframe: false, qp_offset };
        let pic = self
            .encoder
            .encode_with(frame, options)
            .map_err(|e| Failure::Run(format!("x264 failed on frame {index}: {e}")))?;
        self.records.push(Record {
            frame: index,
            size_bytes: pic.size_bytes(),
            frame_type: type_name(pic.frame_type),
            keyframe: pic.is_keyframe,
            qp: pic.qp,
            encode_us: pic.encode_time.as_nanos() as f64 / 1000.0,
            psnr_y: pic.psnr_y,
        });
        Ok(())
    }
}

fn run_x264(
    raw_path: &str,
    width: u32,
    height: u32,
    fps: f64,
    frames: u64,
    start_frame: u64,
    jobs: Vec<Job>,
) -> Result<String, Failure> {
    let mut file =
        File::open(raw_path).map_err(|e| Failure::Invalid(format!("{raw_path}: {e}")))?;
    let mut frame = I420Frame::new_grey(width, height);
    let frame_bytes = (frame.y.len() + frame.u.len() + frame.v.len()) as u64;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let file_frames = len / frame_bytes;
    if file_frames == 0 {
        return Err(Failure::Invalid(format!(
            "{raw_path}: {len} bytes, not one {width}x{height} yuv420p frame"
        )));
    }
    let mut encoders = jobs
        .into_iter()
        .map(|job| X264Job::open(job, width, height, fps))
        .collect::<Result<Vec<_>, _>>()?;
    let n = encoders.len();
    for i in 0..frames {
        let read = |file: &mut File, f: &mut I420Frame| -> std::io::Result<()> {
            let clip_index = sluice_core::encoder::clip_frame(start_frame + i, file_frames);
            file.seek(SeekFrom::Start(clip_index * frame_bytes))?;
            file.read_exact(&mut f.y)?;
            file.read_exact(&mut f.u)?;
            file.read_exact(&mut f.v)
        };
        read(&mut file, &mut frame)
            .map_err(|e| Failure::Run(format!("{raw_path}: reading frame {i}: {e}")))?;
        for j in 0..n {
            encoders[(i as usize + j) % n].encode(i, &frame)?;
        }
    }
    let out: Vec<&Vec<Record>> = encoders.iter().map(|e| &e.records).collect();
    serde_json::to_string(&out).map_err(|e| Failure::Run(e.to_string()))
}

fn run_model(fps: f64, frames: u64, jobs: Vec<Job>) -> Result<String, Failure> {
    let mut out = Vec::with_capacity(jobs.len());
    for job in jobs {
        let mut enc = ModelEncoder::new(job.model.unwrap_or_default(), fps);
        let mut rc = None;
        let mut complexity = None;
        let mut size_scale = 1.0;
        let mut steps = job.schedule.iter().peekable();
        let mut records = Vec::with_capacity(frames as usize);
        for i in 0..frames {
            while let Some(step) = steps.next_if(|s| s.frame <= i) {
                if let Some((b, m, v)) = step.rate() {
                    let rate = |bps: u64| DataRate::from_bps(bps.min(i64::MAX as u64) as i64);
                    rc = Some(RateControl {
                        target_rate: rate(b),
                        vbv_max_rate: rate(m),
                        vbv_buffer: DataSize::from_bytes((v / 8).min(i64::MAX as u64) as i64),
                        filler: false,
                    });
                }
                complexity = step.complexity.or(complexity);
                size_scale = step.size_scale.unwrap_or(size_scale);
            }
            let Some(rate_control) = rc else {
                return Err(Failure::Invalid("model job without a rate at frame 0".into()));
            };
            let capture = Timestamp::from_us((i as f64 / fps * 1e6).round() as i64);
            let f = enc.encode(&FrameRequest {
                complexity,
                planned_size_scale: size_scale,
                ..FrameRequest::for_slot(i, capture, rate_control)
            });
            records.push(Record {
                frame: i,
                size_bytes: f.size.as_bytes().max(0) as usize,
                frame_type: if f.is_keyframe { "IDR" } else { "P" },
                keyframe: f.is_keyframe,
                qp: f.qp,
                encode_us: f.encode_time.as_us() as f64,
                psnr_y: None,
            });
        }
        out.push(records);
    }
    serde_json::to_string(&out).map_err(|e| Failure::Run(e.to_string()))
}

fn check_common(fps: f64, frames: u64) -> Result<(), Failure> {
    if !(fps > 0.0 && fps.is_finite() && fps * 1000.0 < f64::from(u32::MAX)) {
        return Err(Failure::Invalid(format!("invalid frame rate {fps}")));
    }
    if frames == 0 {
        return Err(Failure::Invalid("frames must be > 0".into()));
    }
    Ok(())
}

/// Encodes `frames` frames of a raw I420 file from `start_frame` on with libx264 once per
/// job (in lockstep) and returns the per-frame records as JSON (see the module docs).
/// Releases the GIL.
#[pyfunction]
#[pyo3(signature = (raw_path, width, height, fps, frames, jobs_json, start_frame=0))]
#[allow(clippy::too_many_arguments)]
fn encode_clip(
    py: Python<'_>,
    raw_path: &str,
    width: u32,
    height: u32,
    fps: f64,
    frames: u64,
    jobs_json: &str,
    start_frame: u64,
) -> PyResult<String> {
    check_common(fps, frames)?;
    let jobs = parse_jobs(jobs_json, false)?;
    Ok(py.allow_threads(|| run_x264(raw_path, width, height, fps, frames, start_frame, jobs))?)
}

/// Runs the jobs' schedules on the model encoder and returns per-frame records as JSON.
#[pyfunction]
fn model_encode(py: Python<'_>, fps: f64, frames: u64, jobs_json: &str) -> PyResult<String> {
    check_common(fps, frames)?;
    let jobs = parse_jobs(jobs_json, true)?;
    Ok(py.allow_threads(|| run_model(fps, frames, jobs))?)
}

/// Adds this module's functions to `sluice._core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_clip, m)?)?;
    m.add_function(wrap_pyfunction!(model_encode, m)?)?;
    m.add("X264_QP_PER_SIZE_HALVING", sluice_x264::complexity::QP_PER_SIZE_HALVING)?;
    Ok(())
}
