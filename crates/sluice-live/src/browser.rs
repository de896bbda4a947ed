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

type Joined = JoinHandle<(Transported<SenderEndpoint>, std::io::Result<IoStats>)>;

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
    cfg: RunConfig,
    encoder: Option<Box<dyn Encoder>>,
    frames: Option<FrameStore>,
    socket: Option<UdpSocket>,
    addr: SocketAddr,
    webrtc: Option<WebRtc>,
    stop: Arc<AtomicBool>,
    /// Set when the sender's thread has ended.
    done: Arc<AtomicBool>,
    clock: Option<Clock>,
    end: Timestamp,
    wall_origin_us: i64,
    thread: Option<Joined>,
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
        let socket = UdpSocket::bind("127.0.0.1:0")
            .map_err(|e| ConfigError(format!("cannot bind a UDP socket: {e}")))?;
        let addr = socket.local_addr().map_err(|e| ConfigError(format!("socket: {e}")))?;
        let mut w = WebRtc::new(Side::Sender, addr, addr, Instant::now()).map_err(ConfigError)?;
        w.for_browser();
        Ok(BrowserSender {
            cfg: cfg.clone(),
            encoder: Some(encoder),
            frames,
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

    /// The sender's UDP address (its ICE host candidate).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The SDP offer (one send-only H.264 video m-line, a host candidate on the socket).
    pub fn offer(&mut self) -> Result<String, String> {
        self.webrtc.as_mut().ok_or("already started")?.offer()
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
        let mut w = self.webrtc.take().ok_or("already started")?;
        let socket = self.socket.take().ok_or("already started")?;
        let encoder = self.encoder.take().ok_or("already started")?;
        w.set_remote(relay);
        w.accept_answer(answer)?;
        crate::webrtc::connect(&mut w, &socket, timeout)?;
        let scheme = self.cfg.resolve_scheme().map_err(|e| e.to_string())?;
        let origin = Instant::now();
        self.wall_origin_us = wall_now_us();
        let clock = Clock::new(origin);
        w.set_origin(origin);
        let now = Timestamp::ZERO;
        let capture_end = now + TimeDelta::from_secs_f64(self.cfg.duration_s);
        self.end = capture_end + TimeDelta::from_secs_f64(self.cfg.drain_s);
        let wake = Arc::new(Notify::new());
        let encoder = ThreadedEncoder::new(encoder, clock, wake.clone());
        let sender = build_sender(&self.cfg, &scheme, Box::new(encoder), now);
        let mut sender = SenderEndpoint::new(
            sender,
            TimeDelta::from_ms_f64(self.cfg.sample_interval_ms),
            capture_end,
            None,
            now,
        );
        if let Some(store) = &self.frames {
            sender.set_payload_source(Box::new(store.clone()));
        }
        let mut ep = Transported::webrtc(sender, w);
        let peers = Peers { receiver: Some(relay), ..Peers::default() };
        let (stop, done, end) = (self.stop.clone(), self.done.clone(), self.end);
        let thread = std::thread::Builder::new()
            .name("sluice-browser-sender".into())
            .spawn(move || {
                let r = drive(&mut ep, socket, &peers, clock, end, &stop, Some(wake));
                done.store(true, Ordering::Relaxed);
                (ep, r)
            })
            .map_err(|e| format!("cannot start the sender thread: {e}"))?;
        self.thread = Some(thread);
        self.clock = Some(clock);
        Ok(self.wall_origin_us)
    }

    /// Session time now (seconds; NaN before the start).
    pub fn now_s(&self) -> f64 {
        self.clock.map_or(f64::NAN, |c| c.now().as_secs_f64())
    }
    pub fn end_s(&self) -> f64 {
        self.end.as_secs_f64()
    }
    /// A flag set when the sender has ended (to wait on from another thread).
    pub fn done_flag(&self) -> Arc<AtomicBool> {
        self.done.clone()
    }
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Waits for the sender and returns what it recorded.
    pub fn finish(&mut self) -> Result<BrowserSenderResult, String> {
        let t = self.thread.take().ok_or("the sender was not started")?;
        let (ep, io) = t.join().map_err(|_| "the sender thread panicked".to_string())?;
        let io = io.map_err(|e| format!("the sender's socket failed: {e}"))?;
        let webrtc = ep.webrtc_stats().cloned();
        let s = ep.inner;
        if let Some(why) = s.failure() {
            return Err(why.to_owned());
        }
        Ok(BrowserSenderResult {
            wall_origin_us: self.wall_origin_us,
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

impl Drop for BrowserSender {
    fn drop(&mut self) {
        self.stop();
    }
}

type JoinedReceiver = JoinHandle<(Transported<ReceiverEndpoint>, std::io::Result<IoStats>)>;

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
    cfg: RunConfig,
    socket: Option<UdpSocket>,
    addr: SocketAddr,
    webrtc: Option<WebRtc>,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    clock: Option<Clock>,
    end: Timestamp,
    wall_origin_us: i64,
    thread: Option<JoinedReceiver>,
}

impl BrowserReceiver {
    pub fn new(cfg: &RunConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        cfg.resolve_scheme()?;
        let socket = UdpSocket::bind("127.0.0.1:0")
            .map_err(|e| ConfigError(format!("cannot bind a UDP socket: {e}")))?;
        let addr = socket.local_addr().map_err(|e| ConfigError(format!("socket: {e}")))?;
        let mut w = WebRtc::new(Side::Receiver, addr, addr, Instant::now()).map_err(ConfigError)?;
        w.for_browser();
        Ok(BrowserReceiver {
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

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The answer to the browser's offer (a host candidate on the socket).
    pub fn answer(&mut self, offer: &str) -> Result<String, String> {
        self.webrtc.as_mut().ok_or("already started")?.answer(offer)
    }

    /// Connects (the browser's ICE checks come through the relay at `relay`), then starts
    /// the clock and the receiver. Returns the clock's origin in µs since the Unix epoch.
    pub fn start(&mut self, relay: SocketAddr, timeout: Duration) -> Result<i64, String> {
        let mut w = self.webrtc.take().ok_or("already started")?;
        let socket = self.socket.take().ok_or("already started")?;
        w.set_remote(relay);
        crate::webrtc::connect(&mut w, &socket, timeout)?;
        let scheme = self.cfg.resolve_scheme().map_err(|e| e.to_string())?;
        let origin = Instant::now();
        self.wall_origin_us = wall_now_us();
        let clock = Clock::new(origin);
        w.set_origin(origin);
        let now = Timestamp::ZERO;
        self.end = now
            + TimeDelta::from_secs_f64(self.cfg.duration_s)
            + TimeDelta::from_secs_f64(self.cfg.drain_s);
        let receiver = ReceiverEndpoint::for_run(&self.cfg, &scheme, now);
        let mut ep = Transported::webrtc(receiver, w);
        let peers = Peers { sender: Some(relay), ..Peers::default() };
        let (stop, done, end) = (self.stop.clone(), self.done.clone(), self.end);
        let thread = std::thread::Builder::new()
            .name("sluice-browser-receiver".into())
            .spawn(move || {
                let r = drive(&mut ep, socket, &peers, clock, end, &stop, None);
                done.store(true, Ordering::Relaxed);
                (ep, r)
            })
            .map_err(|e| format!("cannot start the receiver thread: {e}"))?;
        self.thread = Some(thread);
        self.clock = Some(clock);
        Ok(self.wall_origin_us)
    }

    pub fn now_s(&self) -> f64 {
        self.clock.map_or(f64::NAN, |c| c.now().as_secs_f64())
    }
    pub fn end_s(&self) -> f64 {
        self.end.as_secs_f64()
    }
    pub fn done_flag(&self) -> Arc<AtomicBool> {
        self.done.clone()
    }
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn finish(&mut self) -> Result<BrowserReceiverResult, String> {
        let t = self.thread.take().ok_or("the receiver was not started")?;
        let (ep, io) = t.join().map_err(|_| "the receiver thread panicked".to_string())?;
        let io = io.map_err(|e| format!("the receiver's socket failed: {e}"))?;
        let webrtc = ep.webrtc_stats().cloned();
        let frames = ep.webrtc_frames();
        let r = ep.inner;
        Ok(BrowserReceiverResult {
            wall_origin_us: self.wall_origin_us,
            events: r.events.clone(),
            frames,
            io,
            webrtc,
            media_packets: r.media_packets,
            malformed: crate::endpoint::Endpoint::malformed(&r),
        })
    }
}

impl Drop for BrowserReceiver {
    fn drop(&mut self) {
        self.stop();
    }
}
