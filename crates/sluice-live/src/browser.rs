//! `sluice browser run --scheme S` (issue 28): a scheme's unchanged sender sends to a browser
//! (Chromium's receiver page) over WebRTC, through the trace relay. The sender's WebRTC layer
//! ([`crate::webrtc`], str0m) offers; the page answers; ICE and DTLS are done before the
//! session's clock starts; the browser's transport-cc feedback, NACKs and PLIs drive the
//! sender's controllers. The harness (python/sluice/browser) runs the relay and the page
//! and records the frames the page displays.

use crate::endpoint::{FrameStore, ReceiverEndpoint, SenderEndpoint, Spoofed};
use crate::runtime::{drive, Clock, IoStats, Peers, ThreadedEncoder};
use crate::webrtc::{BrowserFrame, Side, Transported, WebRtc, WebRtcStats};
use sluice_core::encoder::Encoder;
use sluice_core::metrics::Sample;
use sluice_core::receiver::ReceiverEvent;
use sluice_core::sender::SenderEvent;
use sluice_core::session::{build_sender, ConfigError, RunConfig};
use sluice_core::units::{TimeDelta, Timestamp};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::Notify;

/// What the two browser-facing ends share: the socket and WebRTC layer until the start,
/// then the session's clock, its end and the thread that drives the endpoint.
struct Driven<E> {
    cfg: RunConfig,
    socket: Option<UdpSocket>,
    addr: SocketAddr,
    webrtc: Option<WebRtc>,
    stop: Arc<AtomicBool>,
    /// Set when the endpoint's thread has ended.
    done: Arc<AtomicBool>,
    clock: Option<Clock>,
    end: Timestamp,
    wall_origin_us: i64,
    thread: Option<JoinHandle<(Transported<E>, std::io::Result<IoStats>)>>,
}

impl<E: crate::endpoint::Endpoint + 'static> Driven<E> {
    /// A fresh UDP socket on 127.0.0.1 and a WebRTC layer for `side` on it.
    fn bind(cfg: &RunConfig, side: Side) -> Result<Self, ConfigError> {
        let socket = UdpSocket::bind("127.0.0.1:0")
            .map_err(|e| ConfigError(format!("cannot bind a UDP socket: {e}")))?;
        let addr = socket.local_addr().map_err(|e| ConfigError(format!("socket: {e}")))?;
        let mut w = WebRtc::new(side, addr, addr, Instant::now()).map_err(ConfigError)?;
        w.for_browser();
        Ok(Driven {
            cfg: cfg.clone(),
            socket: Some(socket),
            addr,
            webrtc: Some(w),
            stop: Arc::new(AtomicBool::new(false)),
            done: Arc::new(AtomicBool::new(false)),
            clock: None,
            end: Timestamp::ZERO,
            wall_origin_us: 0,
            thread: None,
        })
    }

    fn webrtc(&mut self) -> Result<&mut WebRtc, String> {
        Ok(self.webrtc.as_mut().ok_or("already started")?)
    }

    /// Connects (ICE, DTLS) through the relay at `relay` (after `answer`, the browser's
    /// answer to our offer, if we offered), then starts the session's clock: its end is
    /// `duration_s + drain_s` from now. Returns the WebRTC layer, the socket and the clock.
    fn connect(
        &mut self,
        relay: SocketAddr,
        answer: Option<&str>,
        timeout: Duration,
    ) -> Result<(WebRtc, UdpSocket, Clock), String> {
        let mut w = self.webrtc.take().ok_or("already started")?;
        let socket = self.socket.take().ok_or("already started")?;
        w.set_remote(relay);
        if let Some(a) = answer {
            w.accept_answer(a)?;
        }
        crate::webrtc::connect(&mut w, &socket, timeout)?;
        let origin = Instant::now();
        self.wall_origin_us = wall_now_us();
        let clock = Clock::new(origin);
        w.set_origin(origin);
        self.end = Timestamp::ZERO
            + TimeDelta::from_secs_f64(self.cfg.duration_s)
            + TimeDelta::from_secs_f64(self.cfg.drain_s);
        Ok((w, socket, clock))
    }

    /// Drives `ep` on its own thread until the end or a stop; returns the clock's origin in
    /// µs since the Unix epoch.
    fn spawn(
        &mut self,
        name: &str,
        mut ep: Transported<E>,
        socket: UdpSocket,
        peers: Peers,
        clock: Clock,
        wake: Option<Arc<Notify>>,
    ) -> Result<i64, String>
    where
        Transported<E>: Send,
    {
        let (stop, done, end) = (self.stop.clone(), self.done.clone(), self.end);
        let thread = std::thread::Builder::new()
            .name(format!("sluice-browser-{name}"))
            .spawn(move || {
                let r = drive(&mut ep, socket, &peers, clock, end, &stop, wake);
                done.store(true, Ordering::Relaxed);
                (ep, r)
            })
            .map_err(|e| format!("cannot start the {name} thread: {e}"))?;
        self.thread = Some(thread);
        self.clock = Some(clock);
        Ok(self.wall_origin_us)
    }

    fn now_s(&self) -> f64 {
        self.clock.map_or(f64::NAN, |c| c.now().as_secs_f64())
    }

    /// Waits for the thread: the endpoint and its socket's counters.
    fn join(&mut self, name: &str) -> Result<(Transported<E>, IoStats), String> {
        let t = self.thread.take().ok_or(format!("the {name} was not started"))?;
        let (ep, io) = t.join().map_err(|_| format!("the {name} thread panicked"))?;
        let io = io.map_err(|e| format!("the {name}'s socket failed: {e}"))?;
        Ok((ep, io))
    }
}

impl<E> Drop for Driven<E> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What the sender recorded: its events and samples (its clock: µs since its origin,
/// `wall_origin_us` since the Unix epoch), and its counters.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BrowserSenderResult {
    pub wall_origin_us: i64,
    pub events: Vec<SenderEvent>,
    pub samples: Vec<Sample>,
    pub io: IoStats,
    pub webrtc: Option<WebRtcStats>,
    pub spoofed: Spoofed,
    pub feedback_messages: u64,
    pub transmitted: u64,
    pub unsendable: u64,
}

/// A scheme's sender towards a browser: made, offered, then started with the browser's
/// answer and the relay's address.
pub struct BrowserSender {
    run: Driven<SenderEndpoint>,
    encoder: Option<Box<dyn Encoder>>,
    frames: Option<FrameStore>,
}

fn wall_now_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

impl BrowserSender {
    /// A sender of `cfg` on a fresh UDP socket on 127.0.0.1; `frames`: x264's bitstreams
    /// (a browser needs real H.264: the model encoder's zeros do not decode).
    pub fn new(
        cfg: &RunConfig,
        encoder: Box<dyn Encoder>,
        frames: Option<FrameStore>,
    ) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let scheme = cfg.resolve_scheme()?;
        if scheme.bottleneck.drops_frames() {
            return Err(ConfigError(format!(
                "scheme {} needs the bottleneck's reports, which a relay cannot send over \
                 WebRTC (DTLS-SRTP)",
                cfg.scheme_name
            )));
        }
        Ok(BrowserSender { run: Driven::bind(cfg, Side::Sender)?, encoder: Some(encoder), frames })
    }

    /// The sender's UDP address (its ICE host candidate).
    pub fn local_addr(&self) -> SocketAddr {
        self.run.addr
    }

    /// The SDP offer (one send-only H.264 video m-line, a host candidate on the socket).
    pub fn offer(&mut self) -> Result<String, String> {
        self.run.webrtc()?.offer()
    }

    /// Takes the browser's answer, connects (ICE, DTLS) through the relay at `relay`, then
    /// starts the session's clock and the sender. Returns the clock's origin in µs since
    /// the Unix epoch.
    pub fn start(
        &mut self,
        answer: &str,
        relay: SocketAddr,
        timeout: Duration,
    ) -> Result<i64, String> {
        let encoder = self.encoder.take().ok_or("already started")?;
        let scheme = self.run.cfg.resolve_scheme().map_err(|e| e.to_string())?;
        let (w, socket, clock) = self.run.connect(relay, Some(answer), timeout)?;
        let now = Timestamp::ZERO;
        let cfg = &self.run.cfg;
        let capture_end = now + TimeDelta::from_secs_f64(cfg.duration_s);
        let wake = Arc::new(Notify::new());
        let encoder = ThreadedEncoder::new(encoder, clock, wake.clone());
        let sender = build_sender(cfg, &scheme, Box::new(encoder), now);
        let mut sender = SenderEndpoint::new(
            sender,
            TimeDelta::from_ms_f64(cfg.sample_interval_ms),
            capture_end,
            None,
            now,
        );
        if let Some(store) = &self.frames {
            sender.set_payload_source(Box::new(store.clone()));
        }
        let peers = Peers { receiver: Some(relay), ..Peers::default() };
        self.run.spawn("sender", Transported::webrtc(sender, w), socket, peers, clock, Some(wake))
    }

    /// Session time now (seconds; NaN before the start).
    pub fn now_s(&self) -> f64 {
        self.run.now_s()
    }
    pub fn end_s(&self) -> f64 {
        self.run.end.as_secs_f64()
    }
    /// A flag set when the sender has ended (to wait on from another thread).
    pub fn done_flag(&self) -> Arc<AtomicBool> {
        self.run.done.clone()
    }
    pub fn stop(&self) {
        self.run.stop.store(true, Ordering::Relaxed);
    }

    /// Waits for the sender and returns what it recorded.
    pub fn finish(&mut self) -> Result<BrowserSenderResult, String> {
        let (ep, io) = self.run.join("sender")?;
        let webrtc = ep.webrtc_stats().cloned();
        let s = ep.inner;
        if let Some(why) = s.failure() {
            return Err(why.to_owned());
        }
        Ok(BrowserSenderResult {
            wall_origin_us: self.run.wall_origin_us,
            events: s.events.clone(),
            samples: s.samples.clone(),
            io,
            webrtc,
            spoofed: s.spoofed,
            feedback_messages: s.feedback_messages,
            transmitted: s.transmitted,
            unsendable: s.unsendable,
        })
    }
}

/// What the receiver recorded: its events (its clock: µs since its origin, `wall_origin_us`
/// since the Unix epoch), the browser's frames as it described them, and its counters.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BrowserReceiverResult {
    pub wall_origin_us: i64,
    pub events: Vec<ReceiverEvent>,
    pub frames: Vec<BrowserFrame>,
    pub io: IoStats,
    pub webrtc: Option<WebRtcStats>,
    pub media_packets: u64,
    pub malformed: u64,
}

/// A scheme's receiver of a browser's stream (`browser run --receiver sluice`): made,
/// answers the browser's offer, then started with the relay's address. Its WebRTC layer is
/// ICE-lite; str0m sends the browser transport-cc feedback and NACKs, the receiver's
/// keyframe requests go out as PLI.
pub struct BrowserReceiver {
    run: Driven<ReceiverEndpoint>,
}

impl BrowserReceiver {
    pub fn new(cfg: &RunConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        cfg.resolve_scheme()?;
        Ok(BrowserReceiver { run: Driven::bind(cfg, Side::Receiver)? })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.run.addr
    }

    /// The answer to the browser's offer (a host candidate on the socket).
    pub fn answer(&mut self, offer: &str) -> Result<String, String> {
        self.run.webrtc()?.answer(offer)
    }

    /// Connects (the browser's ICE checks come through the relay at `relay`), then starts
    /// the clock and the receiver. Returns the clock's origin in µs since the Unix epoch.
    pub fn start(&mut self, relay: SocketAddr, timeout: Duration) -> Result<i64, String> {
        let scheme = self.run.cfg.resolve_scheme().map_err(|e| e.to_string())?;
        let (w, socket, clock) = self.run.connect(relay, None, timeout)?;
        let receiver = ReceiverEndpoint::for_run(&self.run.cfg, &scheme, Timestamp::ZERO);
        let peers = Peers { sender: Some(relay), ..Peers::default() };
        self.run.spawn("receiver", Transported::webrtc(receiver, w), socket, peers, clock, None)
    }

    pub fn now_s(&self) -> f64 {
        self.run.now_s()
    }
    pub fn end_s(&self) -> f64 {
        self.run.end.as_secs_f64()
    }
    pub fn done_flag(&self) -> Arc<AtomicBool> {
        self.run.done.clone()
    }
    pub fn stop(&self) {
        self.run.stop.store(true, Ordering::Relaxed);
    }

    pub fn finish(&mut self) -> Result<BrowserReceiverResult, String> {
        let (ep, io) = self.run.join("receiver")?;
        let webrtc = ep.webrtc_stats().cloned();
        let frames = ep.webrtc_frames();
        let r = ep.inner;
        Ok(BrowserReceiverResult {
            wall_origin_us: self.run.wall_origin_us,
            events: r.events.clone(),
            frames,
            io,
            webrtc,
            media_packets: r.media_packets,
            malformed: crate::endpoint::Endpoint::malformed(&r),
        })
    }
}
