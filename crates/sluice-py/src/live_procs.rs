//! `sluice._core.LiveEndpoint` (one live endpoint in this process: `sluice live send`,
//! `recv`, `relay`) and `sluice._core.live_merge` (their parts merged into the result JSON of
//! `LiveRun.finish()`).

use crate::{parse_config, PyTrace};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use serde::Deserialize;
use sluice_core::units::TimeDelta;
use sluice_live::part;
use sluice_live::process::{EndpointProcess, ProcessOptions};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// Endpoint options from the front end (JSON).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct EndpointJson {
    listen: String,
    peer: Option<String>,
    sender: Option<String>,
    receiver: Option<String>,
    idle_timeout_s: Option<f64>,
    start_timeout_s: Option<f64>,
    /// The relay's faults of the wire, as `LiveRun`'s options (`garbage`, `spoof`).
    faults: Option<serde_json::Value>,
    /// The relay: record every datagram's way through it.
    log_datagrams: bool,
    received_stream: Option<String>,
    forward_rtp: Option<String>,
    /// "rtp" (default) or "webrtc", and with WebRTC the SDP files (this endpoint's, the
    /// peer's).
    transport: Option<String>,
    sdp_out: Option<String>,
    sdp_in: Option<String>,
}

fn addr(what: &str, a: &str) -> PyResult<SocketAddr> {
    a.parse().map_err(|_| PyValueError::new_err(format!("{what}: not an IP:PORT address: {a:?}")))
}

fn seconds(what: &str, v: f64) -> PyResult<f64> {
    if v.is_finite() && v > 0.0 && v <= 86_400.0 {
        Ok(v)
    } else {
        Err(PyValueError::new_err(format!("{what} must be in (0, 86400] seconds, got {v}")))
    }
}

/// One live endpoint (role "sender", "relay" or "receiver") in this process, started at
/// construction. Poll `wait()` (it releases the GIL), `stop()` on Ctrl-C, then
/// `finish(path)` writes its part and returns the part's counters as JSON.
#[pyclass(name = "LiveEndpoint", module = "sluice._core", unsendable)]
pub struct PyLiveEndpoint {
    run: Option<EndpointProcess>,
}

#[pymethods]
impl PyLiveEndpoint {
    #[new]
    #[pyo3(signature = (role, config_json, options_json, downlink=None, uplink=None))]
    fn new(
        role: &str,
        config_json: &str,
        options_json: &str,
        downlink: Option<PyTrace>,
        uplink: Option<PyTrace>,
    ) -> PyResult<Self> {
        let config = parse_config(config_json)?;
        config.validate().map_err(|e| PyValueError::new_err(e.to_string()))?;
        let o: EndpointJson = serde_json::from_str(options_json)
            .map_err(|e| PyValueError::new_err(format!("invalid endpoint options: {e}")))?;
        let mut opts = ProcessOptions::new(addr("listen", &o.listen)?);
        opts.peer = o.peer.as_deref().map(|a| addr("peer", a)).transpose()?;
        opts.sender = o.sender.as_deref().map(|a| addr("sender", a)).transpose()?;
        opts.receiver = o.receiver.as_deref().map(|a| addr("receiver", a)).transpose()?;
        if let Some(s) = o.idle_timeout_s {
            opts.idle_timeout = TimeDelta::from_secs_f64(seconds("the idle timeout", s)?);
        }
        if let Some(s) = o.start_timeout_s {
            opts.start_timeout = Some(Duration::from_secs_f64(seconds("the start timeout", s)?));
        }
        if let Some(f) = &o.faults {
            opts.faults = crate::live::options(Some(&f.to_string()))?.faults;
        }
        opts.log_datagrams = o.log_datagrams;
        opts.received_stream = o.received_stream.map(std::path::PathBuf::from);
        opts.forward_rtp = o.forward_rtp.as_deref().map(|a| addr("forward-rtp", a)).transpose()?;
        if let Some(t) = &o.transport {
            opts.transport = t.parse().map_err(PyValueError::new_err)?;
        }
        opts.sdp_out = o.sdp_out.map(std::path::PathBuf::from);
        opts.sdp_in = o.sdp_in.map(std::path::PathBuf::from);
        let err = |e: sluice_core::session::ConfigError| PyValueError::new_err(e.to_string());
        let run = match role {
            "sender" => {
                let (encoder, frames) = crate::live::live_encoder(&config)?;
                opts.frames = frames;
                EndpointProcess::sender(&config, encoder, &opts).map_err(err)?
            }
            "receiver" => EndpointProcess::receiver(&config, &opts).map_err(err)?,
            "relay" => EndpointProcess::relay(
                &config,
                downlink.map(|t| t.inner),
                uplink.map(|t| t.inner),
                &opts,
            )
            .map_err(err)?,
            _ => return Err(PyValueError::new_err(format!("unknown endpoint role {role:?}"))),
        };
        Ok(PyLiveEndpoint { run: Some(run) })
    }

    /// Whether the endpoint's clock started (the relay and the receiver wait for their peer).
    #[getter]
    fn started(&self) -> bool {
        self.run.as_ref().is_some_and(|r| r.started())
    }

    #[getter]
    fn now_s(&self) -> f64 {
        self.run.as_ref().map_or(f64::NAN, |r| r.now_s())
    }

    #[getter]
    fn end_s(&self) -> f64 {
        self.run.as_ref().map_or(f64::NAN, |r| r.end_s())
    }

    /// Waits up to `timeout_s` seconds (without the GIL) for the endpoint to end; true if it
    /// has.
    fn wait(&self, py: Python<'_>, timeout_s: f64) -> bool {
        let Some(run) = self.run.as_ref() else { return true };
        crate::live::wait_for(py, timeout_s, || run.is_finished())
    }

    /// Stops the endpoint now (Ctrl-C, SIGTERM); `finish()` still writes its part.
    fn stop(&self) {
        if let Some(r) = self.run.as_ref() {
            r.stop();
        }
    }

    /// Waits for the end, writes the part to `path` and returns its counters (the part
    /// without its records) as JSON.
    fn finish(&mut self, py: Python<'_>, path: &str) -> PyResult<String> {
        let run =
            self.run.take().ok_or_else(|| PyValueError::new_err("endpoint already finished"))?;
        let part = py.allow_threads(|| run.finish()).map_err(PyRuntimeError::new_err)?;
        let path = Path::new(path);
        py.allow_threads(|| part.write(path)).map_err(PyRuntimeError::new_err)?;
        part.counters_json().map_err(|e| PyValueError::new_err(e.to_string()))
    }
}

/// The clock origins (wall-clock Unix µs) of the sender's, the relay's and the receiver's
/// part as their headers give them.
type Origins = (i64, Option<i64>, i64);

/// Merges the parts of a split live session (the relay's is optional) with the merged
/// session's run config; returns `(frames_json, skips_json, samples_json, summary_json,
/// live_stats_json)` as `LiveRun.finish()` does. With `origins_us`, each events file's clock
/// origin must be the one its part's header gives (the header's is the one that was checked;
/// the events file's is the one the merge shifts by).
#[pyfunction]
#[pyo3(signature = (config_json, sender_path, relay_path, receiver_path, origins_us=None))]
fn live_merge(
    py: Python<'_>,
    config_json: &str,
    sender_path: &str,
    relay_path: Option<&str>,
    receiver_path: &str,
    origins_us: Option<Origins>,
) -> PyResult<(String, String, String, String, String)> {
    let config = parse_config(config_json)?;
    let same_origin = |path: &str, events: i64, header: Option<i64>| match header {
        Some(h) if h != events => Err(format!(
            "{path}: its clock origin ({events} us) is not its part header's ({h} us): the \
             files of two parts are mixed"
        )),
        _ => Ok(()),
    };
    let result = py
        .allow_threads(|| {
            let sender = part::read_sender(Path::new(sender_path))?;
            let relay = relay_path.map(|p| part::read_relay(Path::new(p))).transpose()?;
            let receiver = part::read_receiver(Path::new(receiver_path))?;
            if let Some((s, x, r)) = origins_us {
                same_origin(sender_path, sender.info.wall_origin_us, Some(s))?;
                if let (Some(path), Some(relay)) = (relay_path, &relay) {
                    same_origin(path, relay.info.wall_origin_us, x)?;
                }
                same_origin(receiver_path, receiver.info.wall_origin_us, Some(r))?;
            }
            part::merge_parts(&config, &sender, relay.as_ref(), &receiver)
        })
        .map_err(PyValueError::new_err)?;
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLiveEndpoint>()?;
    m.add_function(wrap_pyfunction!(live_merge, m)?)?;
    Ok(())
}
