//! Python bindings: the `sluice._core` extension module.
//!
//! The front end passes file *contents* in and gets JSON-serialisable results out; the core
//! does no I/O. User mistakes (bad config, malformed trace) raise `ValueError` with one clear
//! message.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use sluice_core::link::trace::{Trace, TraceFormat};
use sluice_core::link::trace_gen::TraceSpec;
use sluice_core::session::{build_encoder, RunConfig};
use sluice_core::sim::{RunResult, Simulation};
use sluice_core::units::{TimeDelta, Timestamp};
use std::sync::Arc;

mod encode;
mod live;
mod live_procs;

/// A bandwidth trace (Mahimahi delivery opportunities).
#[pyclass(name = "Trace", module = "sluice._core", frozen)]
#[derive(Clone)]
struct PyTrace {
    inner: Arc<Trace>,
}

#[pymethods]
impl PyTrace {
    /// Parses a Mahimahi trace (one millisecond timestamp per line).
    #[staticmethod]
    fn parse_mahimahi(py: Python<'_>, text: &str, name: &str) -> PyResult<PyTrace> {
        py.allow_threads(|| Trace::parse_mahimahi(text, name))
            .map(|t| PyTrace { inner: Arc::new(t) })
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Reads a trace file of `format` ("mahimahi" or "rate") line by line: memory for the
    /// opportunities kept, not the file. `name` names it in errors.
    #[staticmethod]
    fn read_file(py: Python<'_>, path: &str, name: &str, format: &str) -> PyResult<PyTrace> {
        let format = match format {
            "mahimahi" => TraceFormat::Mahimahi,
            "rate" => TraceFormat::RateSeries,
            _ => return Err(PyValueError::new_err(format!("unknown trace format {format:?}"))),
        };
        py.allow_threads(|| Trace::read_file(std::path::Path::new(path), name, format))
            .map(|t| PyTrace { inner: Arc::new(t) })
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Parses a "time_s rate_mbps" series, converted with carried remainders.
    #[staticmethod]
    fn parse_rate_series(py: Python<'_>, text: &str, name: &str) -> PyResult<PyTrace> {
        py.allow_threads(|| Trace::parse_rate_series(text, name))
            .map(|t| PyTrace { inner: Arc::new(t) })
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Generates a synthetic trace from a compact spec ("constant:12", "steps:30@10,3@10",
    /// "alternating:10,2,15", "markov:20,2,5,1[,seed]", "poisson:3.04[,seed]").
    #[staticmethod]
    fn generate(py: Python<'_>, spec: &str, duration_s: f64) -> PyResult<PyTrace> {
        if !(duration_s > 0.0 && duration_s.is_finite()) {
            return Err(PyValueError::new_err(format!(
                "trace duration must be positive, got {duration_s}"
            )));
        }
        let spec = TraceSpec::parse_cli(spec).map_err(PyValueError::new_err)?;
        py.allow_threads(|| {
            sluice_core::link::trace_gen::generate(&spec, TimeDelta::from_secs_f64(duration_s))
        })
        .map(|t| PyTrace { inner: Arc::new(t) })
        .map_err(PyValueError::new_err)
    }

    fn to_mahimahi(&self) -> String {
        self.inner.to_mahimahi_string()
    }

    /// The Mahimahi text of opportunities `start..end` (clamped), so a long trace can be
    /// hashed or written in pieces.
    fn to_mahimahi_range(&self, start: usize, end: usize) -> String {
        use std::fmt::Write;
        let times = self.inner.times_ms();
        let end = end.min(times.len());
        let mut s = String::with_capacity(end.saturating_sub(start) * 9);
        for t in &times[start.min(end)..end] {
            // Writing to a String cannot fail.
            let _ = writeln!(s, "{t}");
        }
        s
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    #[getter]
    fn period_s(&self) -> f64 {
        self.inner.period().as_secs_f64()
    }

    #[getter]
    fn mean_rate_bps(&self) -> f64 {
        self.inner.mean_rate().as_bps_f64()
    }

    /// Capacity per bin (bits per second) over `duration_s`, for plots.
    fn rate_series_bps(&self, bin_s: f64, duration_s: f64) -> PyResult<Vec<f64>> {
        // Bounds before allocation: one f64 per bin.
        let bins = duration_s / bin_s;
        if !(bin_s > 0.0 && duration_s > 0.0 && bins.is_finite() && bins <= 1e7) {
            return Err(PyValueError::new_err(format!(
                "rate series of {duration_s} s in bins of {bin_s} s: at most 10000000 bins"
            )));
        }
        Ok(self
            .inner
            .rate_series(TimeDelta::from_secs_f64(bin_s), TimeDelta::from_secs_f64(duration_s))
            .into_iter()
            .map(|r| r.as_bps_f64())
            .collect())
    }

    /// Bytes the link can serve in `[t0_us, t1_us)` (microseconds from its start, looping).
    fn capacity_bytes(&self, t0_us: i64, t1_us: i64) -> i64 {
        use sluice_core::units::Timestamp;
        self.inner.capacity_between(Timestamp::from_us(t0_us), Timestamp::from_us(t1_us)).as_bytes()
    }
}

/// The encoder a config asks for: the core's model encoder, or libx264 on real video.
fn make_encoder(config: &RunConfig) -> PyResult<Box<dyn sluice_core::encoder::Encoder>> {
    match make_x264(config)? {
        Some(e) => Ok(Box::new(e)),
        None => build_encoder(config).map_err(|e| PyValueError::new_err(e.to_string())),
    }
}

/// libx264 on real video if the config asks for it.
fn make_x264(config: &RunConfig) -> PyResult<Option<sluice_x264::sim_encoder::X264SimEncoder>> {
    let Some(s) = x264_settings(config)? else { return Ok(None) };
    sluice_x264::sim_encoder::X264SimEncoder::open(&s, config.fps)
        .map(Some)
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The x264 settings a config asks for, if any.
fn x264_settings(config: &RunConfig) -> PyResult<Option<sluice_core::encoder::X264Settings>> {
    let sluice_core::session::EncoderConfig::X264(s) = &config.encoder else { return Ok(None) };
    let mut s = s.clone();
    // A controller that re-references past dropped frames keeps more references.
    let scheme = config.resolve_scheme().map_err(|e| PyValueError::new_err(e.to_string()))?;
    if let Some(n) = scheme.encoder_controller.reference_frames() {
        s.refs = s.refs.max(n);
    }
    Ok(Some(s))
}

/// A simulated session. Build it from a JSON `RunConfig`, advance it with `run_until` (so the
/// caller can show progress), then `finish()` for the results.
#[pyclass(name = "Simulation", module = "sluice._core", unsendable)]
struct PySimulation {
    sim: Option<Simulation>,
    config: RunConfig,
}

fn parse_config(config_json: &str) -> PyResult<RunConfig> {
    serde_json::from_str(config_json)
        .map_err(|e| PyValueError::new_err(format!("invalid run config: {e}")))
}

#[pymethods]
impl PySimulation {
    #[new]
    #[pyo3(signature = (config_json, downlink=None, uplink=None))]
    fn new(
        config_json: &str,
        downlink: Option<PyTrace>,
        uplink: Option<PyTrace>,
    ) -> PyResult<Self> {
        let config = parse_config(config_json)?;
        config.validate().map_err(|e| PyValueError::new_err(e.to_string()))?;
        let encoder = make_encoder(&config)?;
        let sim =
            Simulation::new(&config, downlink.map(|t| t.inner), uplink.map(|t| t.inner), encoder)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PySimulation { sim: Some(sim), config })
    }

    /// The config with defaults filled in, as JSON (for the result header).
    fn resolved_config_json(&self) -> PyResult<String> {
        resolved_json(self.config.clone())
    }

    #[getter]
    fn now_s(&self) -> f64 {
        self.sim.as_ref().map_or(f64::NAN, |s| s.now().as_secs_f64())
    }

    #[getter]
    fn end_s(&self) -> f64 {
        self.sim.as_ref().map_or(f64::NAN, |s| s.end().as_secs_f64())
    }

    /// Advances virtual time to `t_s` seconds (releases the GIL while simulating).
    fn run_until(&mut self, py: Python<'_>, t_s: f64) -> PyResult<()> {
        let sim = self
            .sim
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("simulation already finished"))?;
        let until = Timestamp::from_secs_f64(t_s);
        py.allow_threads(|| sim.run_until(until));
        // Python's signal handlers (SIGINT, SIGTERM) run here, between chunks.
        py.check_signals()?;
        match sim.failure() {
            Some(why) => Err(PyRuntimeError::new_err(why.to_owned())),
            None => Ok(()),
        }
    }

    /// Runs to the end and returns `(frames_json, skips_json, samples_json, summary_json)`:
    /// JSON arrays of per-frame records, skipped capture slots and time-series samples, and
    /// the summary object.
    fn finish(&mut self, py: Python<'_>) -> PyResult<(String, String, String, String)> {
        let mut sim =
            self.sim.take().ok_or_else(|| PyValueError::new_err("simulation already finished"))?;
        let end = sim.end();
        py.allow_threads(|| sim.run_until(end));
        if let Some(why) = sim.failure() {
            return Err(PyRuntimeError::new_err(why.to_owned()));
        }
        let result: RunResult = py.allow_threads(|| sim.finish());
        let to_json =
            |v: serde_json::Result<String>| v.map_err(|e| PyValueError::new_err(e.to_string()));
        Ok((
            to_json(serde_json::to_string(&result.frames))?,
            to_json(serde_json::to_string(&result.skips))?,
            to_json(serde_json::to_string(&result.samples))?,
            to_json(serde_json::to_string(&result.summary))?,
        ))
    }
}

/// `config` with its scheme's components resolved (from the registry when not given), as JSON.
fn resolved_json(config: RunConfig) -> PyResult<String> {
    let c = config.resolved().map_err(|e| PyValueError::new_err(e.to_string()))?;
    serde_json::to_string(&c).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A run config (JSON) as the core reads it: every field present, tagged components with
/// their defaults, the scheme's components resolved; with `validate`, also range-checked as
/// a simulation would be. Builds nothing (no encoder, no video): the front end uses it to
/// resolve config paths before a run.
#[pyfunction]
#[pyo3(signature = (config_json, validate=false))]
fn resolve_config_json(config_json: &str, validate: bool) -> PyResult<String> {
    let config = parse_config(config_json)?;
    if validate {
        config.validate().map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    resolved_json(config)
}

/// The registered schemes as JSON: name, description, colour and composition.
#[pyfunction]
fn schemes_json() -> PyResult<String> {
    serde_json::to_string(&sluice_core::scheme::registry())
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A competing flow's spec (`media:SCHEME[@START_S[-STOP_S]]`,
/// `tcp:newreno|cubic|bbr[@START_S[-STOP_S]]`, `short-tcp[@START_S]`) in its canonical form; `ValueError` saying what
/// is wrong with it (the scheme is checked when the run config is validated).
#[pyfunction]
fn competing_spec(spec: &str) -> PyResult<String> {
    sluice_core::cross::CompetingFlow::parse(spec).map(|c| c.spec()).map_err(PyValueError::new_err)
}

/// The default run config as JSON.
#[pyfunction]
fn default_config_json() -> PyResult<String> {
    serde_json::to_string(&RunConfig::default()).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Records made outside the simulator (a browser run), to be summarised by the core's rules.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExternalRecords {
    frames: Vec<sluice_core::metrics::FrameRecord>,
    #[serde(default)]
    skips: Vec<sluice_core::metrics::SkipRecord>,
    #[serde(default)]
    samples: Vec<sluice_core::metrics::Sample>,
    #[serde(default)]
    link: sluice_core::metrics::LinkTotals,
    #[serde(default)]
    retransmissions: u64,
    #[serde(default)]
    padding_bytes: i64,
    #[serde(default)]
    sent_bytes_total: i64,
    session_end_us: i64,
    run_end_us: i64,
}

/// The summary (JSON) of records made outside the simulator (`{"frames": [...], "skips":
/// [...], "samples": [...], "link": {...}, "retransmissions": N, "padding_bytes": N,
/// "sent_bytes_total": N, "session_end_us": T, "run_end_us": T}`), by the same code as a
/// simulated run's, so every summary key means the same thing.
#[pyfunction]
fn summarize_records(records_json: &str) -> PyResult<String> {
    use sluice_core::units::Timestamp;
    let r: ExternalRecords = serde_json::from_str(records_json)
        .map_err(|e| PyValueError::new_err(format!("records: {e}")))?;
    let mut recorder = sluice_core::metrics::Recorder::default();
    recorder.retransmissions = r.retransmissions;
    recorder.padding_bytes = r.padding_bytes;
    recorder.sent_bytes_total = r.sent_bytes_total;
    let summary = sluice_core::metrics::summarize(
        &r.frames,
        &r.skips,
        &r.samples,
        r.link,
        &recorder,
        Timestamp::from_us(r.session_end_us),
        Timestamp::from_us(r.run_end_us),
    );
    serde_json::to_string(&summary).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The fixed columns of the frame, skip and sample records (JSON: `{"frame": [...], "skip":
/// [...], "sample": [...]}`), `sluice_core::metrics::RECORD_SCHEMA`.
#[pyfunction]
fn record_schema() -> PyResult<String> {
    serde_json::to_string(&sluice_core::metrics::RECORD_SCHEMA)
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The clip frame shown at session frame `index` of a `frames`-frame clip (played back and
/// forth, `sluice_core::encoder::clip_frame`): the quality scorer reads the same reference
/// frames the encoder got.
#[pyfunction]
fn clip_frame(index: u64, frames: u64) -> u64 {
    sluice_core::encoder::clip_frame(index, frames)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(clip_frame, m)?)?;
    m.add_function(wrap_pyfunction!(summarize_records, m)?)?;
    m.add_function(wrap_pyfunction!(record_schema, m)?)?;
    m.add_class::<PyTrace>()?;
    m.add_class::<PySimulation>()?;
    m.add_class::<live::PyLiveRun>()?;
    m.add_class::<live::PyBrowserSender>()?;
    m.add_class::<live::PyBrowserReceiver>()?;
    live_procs::register(m)?;
    m.add_function(wrap_pyfunction!(schemes_json, m)?)?;
    m.add_function(wrap_pyfunction!(competing_spec, m)?)?;
    m.add_function(wrap_pyfunction!(default_config_json, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_config_json, m)?)?;
    encode::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
