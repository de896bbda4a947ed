//! `sluice._core.LiveRun`: a live run on loopback (crates/sluice-live), with the same result
//! JSON as `Simulation.finish()` plus the live counters.

use crate::{make_encoder, make_x264, parse_config, resolved_json, x264_settings, PyTrace};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use serde::Deserialize;
use sluice_core::session::RunConfig;
use sluice_core::units::Timestamp;
use sluice_live::endpoint::{Faults, FrameStore};
use sluice_live::session::{EncoderFactory, LiveOptions, LiveRun};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Live options from the front end (JSON).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct OptionsJson {
    bind: Option<String>,
    /// Probability of a malformed datagram after each forwarded one.
    garbage: f64,
    /// Probability of a spoofed datagram after each forwarded one.
    spoof: f64,
    /// Restart the receiver at this time (seconds).
    restart_receiver_at_s: Option<f64>,
    /// Restart the sender at this time (seconds).
    restart_sender_at_s: Option<f64>,
    /// Where the receiver writes the displayed frames' bytes (x264 runs).
    received_stream: Option<String>,
    /// IP:PORT that gets a copy of the received video RTP (an RTP player).
    forward_rtp: Option<String>,
    /// "rtp" (default) or "webrtc".
    transport: Option<String>,
}

/// A restart time in seconds (`None`: no restart).
fn restart_time(who: &str, seconds: Option<f64>) -> PyResult<Option<Timestamp>> {
    match seconds {
        Some(t) if t.is_finite() && t >= 0.0 => Ok(Some(Timestamp::from_secs_f64(t))),
        Some(t) => {
            Err(PyValueError::new_err(format!("{who} restart time must be >= 0 s, got {t}")))
        }
        None => Ok(None),
    }
}

pub(crate) fn options(json: Option<&str>) -> PyResult<LiveOptions> {
    let o: OptionsJson = match json {
        Some(j) => serde_json::from_str(j)
            .map_err(|e| PyValueError::new_err(format!("invalid live options: {e}")))?,
        None => OptionsJson::default(),
    };
    // (The path faults, duplication, reordering and a feedback blackout, are the run
    // config's `faults`, checked with it.)
    for (name, p) in [("garbage", o.garbage), ("spoof", o.spoof)] {
        if !(0.0..1.0).contains(&p) {
            return Err(PyValueError::new_err(format!("{name} must be in [0, 1), got {p}")));
        }
    }
    let mut out = LiveOptions {
        faults: Faults { garbage: o.garbage, spoof: o.spoof },
        restart_receiver_at: restart_time("receiver", o.restart_receiver_at_s)?,
        restart_sender_at: restart_time("sender", o.restart_sender_at_s)?,
        ..LiveOptions::default()
    };
    out.received_stream = o.received_stream.map(std::path::PathBuf::from);
    if let Some(a) = o.forward_rtp {
        out.forward_rtp = Some(a.parse().map_err(|_| {
            PyValueError::new_err(format!("not an IP:PORT to forward RTP to: {a:?}"))
        })?);
    }
    if let Some(t) = o.transport {
        out.transport = t.parse().map_err(PyValueError::new_err)?;
    }
    if let Some(b) = o.bind {
        out.bind = b
            .parse()
            .map_err(|_| PyValueError::new_err(format!("not an IP address to bind: {b:?}")))?;
    }
    Ok(out)
}

/// Hands each frame x264 encodes to `store`, which the sender puts on the wire.
fn feed(x: &mut sluice_x264::sim_encoder::X264SimEncoder, store: FrameStore) {
    x.set_frame_sink(Box::new(move |id, data| store.insert(id, data)));
}

/// The encoder of a live sender: with x264 the frames' bitstreams go on the wire (the
/// encoder hands each frame to the returned store as it writes the stream file); the model
/// encoder's packets carry zeros (no store).
pub(crate) fn live_encoder(
    config: &RunConfig,
) -> PyResult<(Box<dyn sluice_core::encoder::Encoder>, Option<FrameStore>)> {
    Ok(match make_x264(config)? {
        Some(mut x) => {
            let store = FrameStore::default();
            feed(&mut x, store.clone());
            (Box::new(x), Some(store))
        }
        None => (make_encoder(config)?, None),
    })
}

/// Opens the fresh encoder a restarted sender starts with: the model encoder, or x264 on
/// the same clip handing its frames to the sender's store. The restarted x264 writes no
/// stream file (`stream.264` holds the first sender's frames only).
fn encoder_factory(config: &RunConfig, frames: Option<FrameStore>) -> PyResult<EncoderFactory> {
    let fps = config.fps;
    let open: Arc<
        dyn Fn() -> Result<Box<dyn sluice_core::encoder::Encoder>, String> + Send + Sync,
    > = match x264_settings(config)? {
        Some(mut s) => {
            s.bitstream_path = None;
            Arc::new(move || {
                let mut x = sluice_x264::sim_encoder::X264SimEncoder::open(&s, fps)
                    .map_err(|e| e.to_string())?;
                if let Some(store) = frames.clone() {
                    feed(&mut x, store);
                }
                Ok(Box::new(x) as Box<dyn sluice_core::encoder::Encoder>)
            })
        }
        None => {
            let config = config.clone();
            Arc::new(move || {
                sluice_core::session::build_encoder(&config).map_err(|e| e.to_string())
            })
        }
    };
    Ok(EncoderFactory(open))
}

/// Waits up to `timeout_s` seconds (at most an hour), without the GIL, until `finished`;
/// true if it is.
pub(crate) fn wait_for(
    py: Python<'_>,
    timeout_s: f64,
    finished: impl Fn() -> bool + Send + Sync,
) -> bool {
    let until = Instant::now() + Duration::from_secs_f64(timeout_s.clamp(0.0, 3600.0));
    py.allow_threads(|| {
        while !finished() {
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    })
}

/// A live run: sender, relay and receiver on loopback, started at construction. Poll
/// `wait()` (it releases the GIL), `stop()` on Ctrl-C, then `finish()` for the results.
#[pyclass(name = "LiveRun", module = "sluice._core", unsendable)]
pub struct PyLiveRun {
    run: Option<LiveRun>,
    config: RunConfig,
}

#[pymethods]
impl PyLiveRun {
    #[new]
    #[pyo3(signature = (config_json, downlink=None, uplink=None, options_json=None))]
    fn new(
        config_json: &str,
        downlink: Option<PyTrace>,
        uplink: Option<PyTrace>,
        options_json: Option<&str>,
    ) -> PyResult<Self> {
        let config = parse_config(config_json)?;
        config.validate().map_err(|e| PyValueError::new_err(e.to_string()))?;
        let mut options = options(options_json)?;
        let (encoder, frames) = live_encoder(&config)?;
        if frames.is_none() {
            options.received_stream = None; // the model encoder has no bitstream
        }
        options.frames = frames;
        if options.restart_sender_at.is_some() {
            options.encoder_factory = Some(encoder_factory(&config, options.frames.clone())?);
        }
        let run = LiveRun::start(
            &config,
            downlink.map(|t| t.inner),
            uplink.map(|t| t.inner),
            encoder,
            &options,
        )
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyLiveRun { run: Some(run), config })
    }

    fn resolved_config_json(&self) -> PyResult<String> {
        resolved_json(self.config.clone())
    }

    #[getter]
    fn now_s(&self) -> f64 {
        self.run.as_ref().map_or(f64::NAN, |r| r.now_s())
    }

    #[getter]
    fn end_s(&self) -> f64 {
        self.run.as_ref().map_or(f64::NAN, |r| r.end_s())
    }

    /// Waits up to `timeout_s` seconds (without the GIL) for the run to end; true if it has.
    fn wait(&self, py: Python<'_>, timeout_s: f64) -> bool {
        let Some(run) = self.run.as_ref() else { return true };
        wait_for(py, timeout_s, || run.is_finished())
    }

    /// Asks the endpoints to stop now (Ctrl-C); `finish()` still returns the results so far.
    fn stop(&self) {
        if let Some(r) = self.run.as_ref() {
            r.stop();
        }
    }

    /// Waits for the end and returns `(frames_json, skips_json, samples_json, summary_json,
    /// live_stats_json)`.
    fn finish(&mut self, py: Python<'_>) -> PyResult<(String, String, String, String, String)> {
        let run =
            self.run.take().ok_or_else(|| PyValueError::new_err("live run already finished"))?;
        let result = py.allow_threads(|| run.finish()).map_err(PyRuntimeError::new_err)?;
        let to_json =
            |v: serde_json::Result<String>| v.map_err(|e| PyValueError::new_err(e.to_string()));
        Ok((
            to_json(serde_json::to_string(&result.run.frames))?,
            to_json(serde_json::to_string(&result.run.skips))?,
            to_json(serde_json::to_string(&result.run.samples))?,
            to_json(serde_json::to_string(&result.run.summary))?,
            to_json(serde_json::to_string(&result.stats))?,
        ))
    }
}

/// A scheme's sender towards a browser over WebRTC (`sluice browser run --scheme`): made,
/// `offer()`, `start(answer, relay_port)` (connects, then starts the clock), `wait()`,
/// `finish()`.
#[pyclass(name = "BrowserSender", module = "sluice._core", unsendable)]
pub struct PyBrowserSender {
    sender: sluice_live::browser::BrowserSender,
}

#[pymethods]
impl PyBrowserSender {
    #[new]
    fn new(config_json: &str) -> PyResult<Self> {
        let config = parse_config(config_json)?;
        config.validate().map_err(|e| PyValueError::new_err(e.to_string()))?;
        let (encoder, frames) = live_encoder(&config)?;
        let sender = sluice_live::browser::BrowserSender::new(&config, encoder, frames)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyBrowserSender { sender })
    }

    #[getter]
    fn port(&self) -> u16 {
        self.sender.local_addr().port()
    }

    fn offer(&mut self) -> PyResult<String> {
        self.sender.offer().map_err(PyRuntimeError::new_err)
    }

    /// Connects through the relay on 127.0.0.1:`relay_port` (at most `timeout_s`), then
    /// starts; returns the session clock's origin in µs since the Unix epoch.
    fn start(
        &mut self,
        py: Python<'_>,
        answer: &str,
        relay_port: u16,
        timeout_s: f64,
    ) -> PyResult<i64> {
        let relay = std::net::SocketAddr::from(([127, 0, 0, 1], relay_port));
        let timeout = Duration::from_secs_f64(timeout_s.clamp(0.1, 600.0));
        py.allow_threads(|| self.sender.start(answer, relay, timeout))
            .map_err(PyRuntimeError::new_err)
    }

    #[getter]
    fn now_s(&self) -> f64 {
        self.sender.now_s()
    }

    #[getter]
    fn end_s(&self) -> f64 {
        self.sender.end_s()
    }

    fn wait(&self, py: Python<'_>, timeout_s: f64) -> bool {
        let done = self.sender.done_flag();
        wait_for(py, timeout_s, || done.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn stop(&self) {
        self.sender.stop();
    }

    /// Waits for the end; what the sender recorded, as JSON.
    fn finish(&mut self, py: Python<'_>) -> PyResult<String> {
        let r = py.allow_threads(|| self.sender.finish()).map_err(PyRuntimeError::new_err)?;
        serde_json::to_string(&r).map_err(|e| PyValueError::new_err(e.to_string()))
    }
}

/// A scheme's receiver of a browser's stream over WebRTC (`sluice browser run --receiver
/// sluice`): made, `answer(offer)`, `start(relay_port)` (connects, then starts the clock),
/// `wait()`, `finish()`.
#[pyclass(name = "BrowserReceiver", module = "sluice._core", unsendable)]
pub struct PyBrowserReceiver {
    receiver: sluice_live::browser::BrowserReceiver,
}

#[pymethods]
impl PyBrowserReceiver {
    #[new]
    fn new(config_json: &str) -> PyResult<Self> {
        let config = parse_config(config_json)?;
        let receiver = sluice_live::browser::BrowserReceiver::new(&config)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyBrowserReceiver { receiver })
    }

    #[getter]
    fn port(&self) -> u16 {
        self.receiver.local_addr().port()
    }

    fn answer(&mut self, offer: &str) -> PyResult<String> {
        self.receiver.answer(offer).map_err(PyRuntimeError::new_err)
    }

    /// Connects through the relay on 127.0.0.1:`relay_port` (at most `timeout_s`), then
    /// starts; returns the session clock's origin in µs since the Unix epoch.
    fn start(&mut self, py: Python<'_>, relay_port: u16, timeout_s: f64) -> PyResult<i64> {
        let relay = std::net::SocketAddr::from(([127, 0, 0, 1], relay_port));
        let timeout = Duration::from_secs_f64(timeout_s.clamp(0.1, 600.0));
        py.allow_threads(|| self.receiver.start(relay, timeout)).map_err(PyRuntimeError::new_err)
    }

    #[getter]
    fn now_s(&self) -> f64 {
        self.receiver.now_s()
    }

    #[getter]
    fn end_s(&self) -> f64 {
        self.receiver.end_s()
    }

    fn wait(&self, py: Python<'_>, timeout_s: f64) -> bool {
        let done = self.receiver.done_flag();
        wait_for(py, timeout_s, || done.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn stop(&self) {
        self.receiver.stop();
    }

    /// Waits for the end; what the receiver recorded, as JSON.
    fn finish(&mut self, py: Python<'_>) -> PyResult<String> {
        let r = py.allow_threads(|| self.receiver.finish()).map_err(PyRuntimeError::new_err)?;
        serde_json::to_string(&r).map_err(|e| PyValueError::new_err(e.to_string()))
    }
}
