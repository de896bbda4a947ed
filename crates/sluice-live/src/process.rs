//! `sluice live send`, `recv` and `relay`: one endpoint per process, each with its own UDP
//! socket on a given address, driven by the same [`drive`] loop as `live run`, and writing its
//! part of the results ([`crate::part`]).
//!
//! * The sender's clock starts when it starts; it runs the session's duration and drain, and
//!   ends earlier once nothing came back from its peer for the idle timeout (counted from
//!   its start: a peer that never answers ends it too).
//! * The relay's and the receiver's clocks start at the first datagram from their peer (the
//!   sender, or for a receiver behind a relay the relay): the relay's trace starts there.
//!   They run the session's duration and drain from there, and end earlier once no datagram
//!   has come for the idle timeout. Before the first datagram they wait (at most the start
//!   timeout, if one is given).
//! * Datagrams from any other address are counted (`foreign`) and dropped, never fatal.

use crate::endpoint::{
    Endpoint, Faults, FrameStore, LinkSnapshot, ReceiverEndpoint, RelayEndpoint, SenderEndpoint,
    SharedLink,
};
use crate::part::{
    LinkSampleRecord, Part, PartInfo, ReceiverPart, RelayPart, SenderPart, PART_SCHEMA,
};
use crate::runtime::{drive, Clock, IoStats, Peers, ThreadedEncoder};
use crate::webrtc::{Side, Transport, Transported, WebRtc};
use sluice_core::encoder::Encoder;
use sluice_core::link::trace::Trace;
use sluice_core::session::{build_sender, ConfigError, RunConfig};
use sluice_core::units::{TimeDelta, Timestamp};
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::Notify;

/// How often the relay records its downlink (its snapshot interval: `live run`'s sender
/// reads a snapshot at most this old).
pub const LINK_SAMPLE_INTERVAL: TimeDelta = TimeDelta::from_ms(5);

/// Where an endpoint process listens and whom it talks to.
#[derive(Clone, Debug)]
pub struct ProcessOptions {
    pub listen: SocketAddr,
    /// The sender's and the receiver's one peer (the relay, or each other).
    pub peer: Option<SocketAddr>,
    /// The relay's peers.
    pub sender: Option<SocketAddr>,
    pub receiver: Option<SocketAddr>,
    /// Every endpoint ends once no datagram came from its peers for this long (the sender
    /// counts from its start, the relay and the receiver from their first datagram).
    pub idle_timeout: TimeDelta,
    /// The relay and the receiver give up if no datagram came from their peer in this time.
    pub start_timeout: Option<Duration>,
    pub faults: Faults,
    /// The relay: keep a record of every datagram's way through it (the part's `datagrams`).
    pub log_datagrams: bool,
    /// The sender: the encoded frames' bitstreams (x264) to put on the wire.
    pub frames: Option<FrameStore>,
    /// The receiver: write the displayed frames' bytes here (x264).
    pub received_stream: Option<PathBuf>,
    /// The receiver: copies of the received video RTP go here (an RTP player).
    pub forward_rtp: Option<SocketAddr>,
    /// The transport between the sender and the receiver (a relay forwards either).
    pub transport: Transport,
    /// With WebRTC, the signalling, out of band as a call's is: the file this endpoint
    /// writes its SDP to (the sender's offer, the receiver's answer) and the file of its
    /// peer's that it waits for (the receiver's answer, the sender's offer). Whoever carries
    /// the files between hosts vouches for the certificate fingerprints in them.
    pub sdp_out: Option<PathBuf>,
    pub sdp_in: Option<PathBuf>,
}

impl ProcessOptions {
    pub fn new(listen: SocketAddr) -> Self {
        ProcessOptions {
            listen,
            peer: None,
            sender: None,
            receiver: None,
            idle_timeout: TimeDelta::from_secs(5),
            start_timeout: None,
            faults: Faults::default(),
            log_datagrams: false,
            frames: None,
            received_stream: None,
            forward_rtp: None,
            transport: Transport::Rtp,
            sdp_out: None,
            sdp_in: None,
        }
    }
}

/// How long an endpoint waits for its peer's SDP file and for ICE and DTLS, unless a start
/// timeout says otherwise.
const SIGNALLING_TIMEOUT: Duration = Duration::from_secs(60);

/// The paths of the signalling files with WebRTC (`None` with plain RTP).
fn sdp_files(options: &ProcessOptions) -> Result<Option<(PathBuf, PathBuf)>, ConfigError> {
    match (options.transport, &options.sdp_out, &options.sdp_in) {
        (Transport::Rtp, None, None) => Ok(None),
        (Transport::Rtp, ..) => {
            Err(ConfigError("SDP files are for the WebRTC transport (--transport webrtc)".into()))
        }
        (Transport::Webrtc, Some(o), Some(i)) => Ok(Some((o.clone(), i.clone()))),
        (Transport::Webrtc, ..) => Err(ConfigError(
            "the WebRTC transport between processes needs the SDP files: the one this \
             endpoint writes and the peer's it reads (--sdp-out, --sdp-in)"
                .into(),
        )),
    }
}

/// Writes `text` to `path` whole (a temporary file renamed), so a peer polling for it never
/// reads half of it.
fn write_whole(path: &std::path::Path, text: &str) -> Result<(), String> {
    let tmp = path.with_extension("sdp.part");
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

/// The part of an endpoint stopped before its clock started (while signalling).
fn unstarted(role: &str, t0: Instant) -> PartInfo {
    PartInfo {
        schema: PART_SCHEMA,
        role: role.into(),
        wall_origin_us: wall_now_us(),
        started: false,
        ended: "stopped".into(),
        wall_s: t0.elapsed().as_secs_f64(),
        io: IoStats::default(),
    }
}

/// Waits for the peer's SDP file; `None` if the endpoint was stopped first.
fn wait_for_file(
    path: &std::path::Path,
    ctl: &Control,
    timeout: Duration,
) -> Result<Option<String>, String> {
    let t0 = Instant::now();
    loop {
        if ctl.stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        if let Ok(text) = std::fs::read_to_string(path) {
            if !text.is_empty() {
                return Ok(Some(text));
            }
        }
        if t0.elapsed() >= timeout {
            return Err(format!(
                "no SDP from the peer at {} within {} s (is the peer running with --sdp-out \
                 there?)",
                path.display(),
                timeout.as_secs_f64()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The WebRTC layer of a process's endpoint, signalled through files and connected (ICE,
/// DTLS) with `peer` before the session's clock starts; `None` if stopped first.
fn signal_and_connect(
    side: Side,
    socket: &UdpSocket,
    peer: SocketAddr,
    (sdp_out, sdp_in): &(PathBuf, PathBuf),
    ctl: &Control,
    timeout: Duration,
) -> Result<Option<WebRtc>, String> {
    let local = socket.local_addr().map_err(|e| format!("socket: {e}"))?;
    let mut w = WebRtc::new(side, local, peer, Instant::now())?;
    // Each side takes its peer's file away once read, so a later session never reads a
    // stale one; the sender, which starts the exchange, also clears an answer left behind,
    // and takes its offer back when no answer came.
    match side {
        Side::Sender => {
            let _ = std::fs::remove_file(sdp_in);
            write_whole(sdp_out, &w.offer()?)?;
            let answer = wait_for_file(sdp_in, ctl, timeout);
            if !matches!(answer, Ok(Some(_))) {
                // Nobody took the offer: a receiver started later must not answer it.
                let _ = std::fs::remove_file(sdp_out);
            }
            let Some(answer) = answer? else { return Ok(None) };
            let _ = std::fs::remove_file(sdp_in);
            w.accept_answer(&answer)?;
        }
        Side::Receiver => {
            let Some(offer) = wait_for_file(sdp_in, ctl, timeout)? else { return Ok(None) };
            let _ = std::fs::remove_file(sdp_in);
            write_whole(sdp_out, &w.answer(&offer)?)?;
        }
    }
    crate::webrtc::connect(&mut w, socket, timeout)?;
    Ok(Some(w))
}

fn wall_now_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

/// An endpoint wrapped for a process: it ends the run after the idle timeout (through the
/// stop flag the loop checks) and, for the relay, records the downlink.
struct Watch<E> {
    inner: E,
    idle: Option<TimeDelta>,
    last_datagram: Timestamp,
    stop: Arc<AtomicBool>,
    idled: bool,
    sampler: Option<LinkSampler>,
}

struct LinkSampler {
    shared: SharedLink,
    trace: Option<Arc<Trace>>,
    next: Timestamp,
    samples: Vec<LinkSampleRecord>,
}

impl LinkSampler {
    fn take(&mut self, now: Timestamp) {
        let s: LinkSnapshot = self.shared.lock().map(|s| s.clone()).unwrap_or_default();
        let capacity_bytes =
            self.trace.as_ref().map_or(0, |t| t.capacity_between(Timestamp::ZERO, now).as_bytes());
        self.samples.push(LinkSampleRecord {
            t_us: now.as_us(),
            queue_bytes: s.queue_bytes,
            queue_packets: s.queue_packets,
            queue_delay_us: s.queue_delay_us,
            delivered_bytes: s.delivered_bytes,
            dropped_packets: s.dropped_packets,
            link_capacity_bps: s.link_capacity_bps,
            capacity_bytes,
            columns: s.columns.clone(),
        });
    }
}

impl<E: Endpoint> Watch<E> {
    fn new(inner: E, idle: Option<TimeDelta>, stop: Arc<AtomicBool>) -> Self {
        Watch { inner, idle, last_datagram: Timestamp::ZERO, stop, idled: false, sampler: None }
    }
}

impl<E: Endpoint> Endpoint for Watch<E> {
    fn handle_datagram(&mut self, from: crate::endpoint::Role, bytes: &[u8], now: Timestamp) {
        self.last_datagram = self.last_datagram.max(now);
        self.inner.handle_datagram(from, bytes, now);
    }
    fn handle_timeout(&mut self, now: Timestamp) {
        self.inner.handle_timeout(now);
        if let Some(s) = self.sampler.as_mut() {
            if s.next <= now {
                s.take(now);
                s.next += LINK_SAMPLE_INTERVAL;
                if s.next <= now {
                    s.next = now + LINK_SAMPLE_INTERVAL;
                }
            }
        }
        if self.idle.is_some_and(|idle| now >= self.last_datagram + idle) {
            self.idled = true;
            self.stop.store(true, Ordering::Relaxed);
        }
    }
    fn poll_transmit(&mut self, now: Timestamp) -> Option<(crate::endpoint::Role, Vec<u8>)> {
        self.inner.poll_transmit(now)
    }
    fn poll_timeout(&self) -> Timestamp {
        let idle = self.idle.map_or(Timestamp::INFINITY, |d| self.last_datagram + d);
        let sample = self.sampler.as_ref().map_or(Timestamp::INFINITY, |s| s.next);
        self.inner.poll_timeout().min(idle).min(sample)
    }
    fn malformed(&self) -> u64 {
        self.inner.malformed()
    }
}

/// The flags a process's endpoint thread shares with its owner.
#[derive(Clone, Default)]
struct Control {
    stop: Arc<AtomicBool>,
    interrupted: Arc<AtomicBool>,
    /// When the endpoint's clock started.
    started: Arc<Mutex<Option<Instant>>>,
}

impl Control {
    fn start_clock(&self) -> (Clock, i64) {
        let origin = Instant::now();
        let wall = wall_now_us();
        if let Ok(mut s) = self.started.lock() {
            *s = Some(origin);
        }
        (Clock::new(origin), wall)
    }
}

enum Waited {
    Started,
    Stopped,
}

/// Waits for the first datagram from `from` (left in the socket for the loop to read);
/// datagrams from anyone else are read and counted.
fn wait_for_peer(
    socket: &UdpSocket,
    from: SocketAddr,
    ctl: &Control,
    timeout: Option<Duration>,
    foreign: &mut u64,
) -> Result<Waited, String> {
    let t0 = Instant::now();
    socket.set_read_timeout(Some(Duration::from_millis(50))).map_err(|e| format!("socket: {e}"))?;
    let mut buf = [0u8; 2048];
    let waited = loop {
        if ctl.stop.load(Ordering::Relaxed) {
            break Waited::Stopped;
        }
        match socket.peek_from(&mut buf) {
            Ok((_, a)) if a == from => break Waited::Started,
            Ok(_) => {
                let _ = socket.recv_from(&mut buf);
                *foreign += 1;
            }
            // A timeout, or an error a previous send left (ICMP): keep waiting.
            Err(_) => {}
        }
        if timeout.is_some_and(|t| t0.elapsed() >= t) {
            return Err(format!(
                "no datagram from {from} within {} s (is the peer running, and is it \
                 sending from that address?)",
                timeout.unwrap_or_default().as_secs_f64()
            ));
        }
    };
    socket.set_read_timeout(None).map_err(|e| format!("socket: {e}"))?;
    Ok(waited)
}

/// Runs `ep` until the end, the idle timeout or a stop: the relay's and the receiver's life.
/// It starts at the first datagram from `wait_for.0`, waited for at most `wait_for.1`;
/// `on_start` sees the clock then.
fn serve<E: Endpoint>(
    ep: &mut Watch<E>,
    socket: UdpSocket,
    peers: &Peers,
    (wait_for, start_timeout): (SocketAddr, Option<Duration>),
    end: Timestamp,
    ctl: &Control,
    on_start: impl FnOnce(&mut Watch<E>, Clock),
) -> Result<PartInfo, String> {
    let t0 = Instant::now();
    let mut foreign = 0;
    let waited = wait_for_peer(&socket, wait_for, ctl, start_timeout, &mut foreign)?;
    let (info, mut io) = match waited {
        Waited::Stopped => (
            PartInfo { wall_origin_us: wall_now_us(), started: false, ..PartInfo::default() },
            IoStats::default(),
        ),
        Waited::Started => {
            let (clock, wall) = ctl.start_clock();
            on_start(ep, clock);
            let io = drive(ep, socket, peers, clock, end, &ctl.stop, None)
                .map_err(|e| format!("the socket failed: {e}"))?;
            (PartInfo { wall_origin_us: wall, started: true, ..PartInfo::default() }, io)
        }
    };
    io.foreign += foreign;
    io.datagrams_in += foreign;
    let ended = if ctl.interrupted.load(Ordering::Relaxed) {
        "stopped"
    } else if ep.idled {
        "idle"
    } else {
        "end"
    };
    Ok(PartInfo {
        schema: PART_SCHEMA,
        ended: ended.into(),
        wall_s: t0.elapsed().as_secs_f64(),
        io,
        ..info
    })
}

/// A running endpoint process; [`EndpointProcess::finish`] waits for it and returns its part.
pub struct EndpointProcess {
    ctl: Control,
    end: Timestamp,
    thread: Option<JoinHandle<Result<Part, String>>>,
}

fn bind(addr: SocketAddr) -> Result<UdpSocket, ConfigError> {
    UdpSocket::bind(addr).map_err(|e| ConfigError(format!("cannot listen on {addr}: {e}")))
}

fn spawn(
    name: &str,
    f: impl FnOnce() -> Result<Part, String> + Send + 'static,
) -> Result<JoinHandle<Result<Part, String>>, ConfigError> {
    std::thread::Builder::new()
        .name(format!("sluice-live-{name}"))
        .spawn(f)
        .map_err(|e| ConfigError(format!("cannot start the {name} thread: {e}")))
}

fn need(a: Option<SocketAddr>, what: &str) -> Result<SocketAddr, ConfigError> {
    a.ok_or_else(|| ConfigError(format!("the {what}'s address is missing")))
}

fn session_end(cfg: &RunConfig) -> (Timestamp, Timestamp) {
    let capture_end = Timestamp::ZERO + TimeDelta::from_secs_f64(cfg.duration_s);
    (capture_end, capture_end + TimeDelta::from_secs_f64(cfg.drain_s))
}

/// A stream number from a process's wall-clock start (microseconds): two sending processes
/// started apart get different ones but for a 1 in 4096 chance.
fn stream_from_wall_clock(wall_us: i64) -> u32 {
    ((wall_us as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as u32
}

impl EndpointProcess {
    /// The sender: starts sending to `options.peer` at once.
    pub fn sender(
        cfg: &RunConfig,
        encoder: Box<dyn Encoder>,
        options: &ProcessOptions,
    ) -> Result<EndpointProcess, ConfigError> {
        crate::check_live_config(cfg)?;
        let scheme = cfg.resolve_scheme()?;
        let peer = need(options.peer, "peer (the relay or the receiver)")?;
        if options.transport == Transport::Webrtc {
            crate::webrtc::check_scheme(&cfg.scheme_name, &scheme)?;
        }
        let sdp = sdp_files(options)?;
        let socket = bind(options.listen)?;
        let ctl = Control::default();
        let t0 = Instant::now();
        let (capture_end, end) = session_end(cfg);
        let (cfg, frames, idle) = (cfg.clone(), options.frames.clone(), options.idle_timeout);
        let timeout = options.start_timeout.unwrap_or(SIGNALLING_TIMEOUT);
        let c = ctl.clone();
        let thread = spawn("sender", move || {
            // With WebRTC the call is set up before the session's clock starts.
            let webrtc = match &sdp {
                Some(files) => {
                    match signal_and_connect(Side::Sender, &socket, peer, files, &c, timeout)? {
                        Some(w) => Some(w),
                        None => {
                            let info = unstarted("sender", t0);
                            return Ok(Part::Sender(SenderPart { info, ..SenderPart::default() }));
                        }
                    }
                }
                None => None,
            };
            let (clock, wall) = c.start_clock();
            let now = Timestamp::ZERO;
            let wake = Arc::new(Notify::new());
            let encoder = ThreadedEncoder::new(encoder, clock, wake.clone());
            let sender = build_sender(&cfg, &scheme, Box::new(encoder), now);
            let interval = TimeDelta::from_ms_f64(cfg.sample_interval_ms);
            let mut sender_ep = SenderEndpoint::new(sender, interval, capture_end, None, now);
            // A sending process may be a restart of one the receiver heard before: it starts
            // a stream the receiver has not seen (numbered from its start time), so the
            // receiver drops the old one's state instead of unwrapping the new numbers
            // against it.
            sender_ep.set_stream(stream_from_wall_clock(wall));
            if let Some(store) = &frames {
                sender_ep.set_payload_source(Box::new(store.clone()));
            }
            let transported = match webrtc {
                Some(mut w) => {
                    w.set_origin(clock.instant(now));
                    Transported::webrtc(sender_ep, w)
                }
                None => Transported::plain(sender_ep),
            };
            // A peer that never answers (or stops answering) ends the sender after the idle
            // timeout instead of the whole session: the front end says so.
            let mut watch = Watch::new(transported, Some(idle), c.stop.clone());
            let peers = Peers { receiver: Some(peer), ..Peers::default() };
            let io = drive(&mut watch, socket, &peers, clock, end, &c.stop, Some(wake))
                .map_err(|e| format!("the socket failed: {e}"))?;
            if let Some(why) = watch.inner.inner.failure() {
                return Err(why.to_owned());
            }
            let ended = if c.interrupted.load(Ordering::Relaxed) {
                "stopped"
            } else if watch.idled {
                "idle"
            } else {
                "end"
            };
            let info = PartInfo {
                schema: PART_SCHEMA,
                role: "sender".into(),
                wall_origin_us: wall,
                started: true,
                ended: ended.into(),
                wall_s: t0.elapsed().as_secs_f64(),
                io,
            };
            let webrtc = watch.inner.webrtc_stats().cloned();
            Ok(Part::Sender(SenderPart::of(watch.inner.inner, info, webrtc)))
        })?;
        Ok(EndpointProcess { ctl, end, thread: Some(thread) })
    }

    /// The receiver: hears only `options.peer` (the relay or the sender).
    pub fn receiver(
        cfg: &RunConfig,
        options: &ProcessOptions,
    ) -> Result<EndpointProcess, ConfigError> {
        crate::check_live_config(cfg)?;
        let scheme = cfg.resolve_scheme()?;
        let peer = need(options.peer, "peer (the relay or the sender)")?;
        let sdp = sdp_files(options)?;
        let socket = bind(options.listen)?;
        let ctl = Control::default();
        let (_, end) = session_end(cfg);
        // A restarted sending process starts a new stream: the receiver follows it.
        let mut receiver = ReceiverEndpoint::for_run(cfg, &scheme, Timestamp::ZERO);
        if options.received_stream.is_some() {
            receiver.record_stream();
        }
        if options.forward_rtp.is_some() {
            receiver.forward_video();
        }
        let peers = Peers { sender: Some(peer), monitor: options.forward_rtp, ..Peers::default() };
        let (c, start_timeout, stream) =
            (ctl.clone(), options.start_timeout, options.received_stream.clone());
        let idle = options.idle_timeout;
        let thread = spawn("receiver", move || {
            let t0 = Instant::now();
            let timeout = start_timeout.unwrap_or(SIGNALLING_TIMEOUT);
            let transported = match &sdp {
                Some(files) => {
                    match signal_and_connect(Side::Receiver, &socket, peer, files, &c, timeout)? {
                        Some(w) => Transported::webrtc(receiver, w),
                        None => {
                            let info = unstarted("receiver", t0);
                            return Ok(Part::Receiver(ReceiverPart {
                                info,
                                ..ReceiverPart::default()
                            }));
                        }
                    }
                }
                None => Transported::plain(receiver),
            };
            let mut ep = Watch::new(transported, Some(idle), c.stop.clone());
            // The WebRTC layer's time zero is the session's.
            let at_start = |ep: &mut Watch<Transported<ReceiverEndpoint>>, clock: Clock| {
                ep.inner.set_origin(clock.instant(Timestamp::ZERO))
            };
            let info = serve(&mut ep, socket, &peers, (peer, start_timeout), end, &c, at_start)?;
            if let Some(path) = &stream {
                std::fs::write(path, &ep.inner.inner.stream)
                    .map_err(|e| format!("writing {}: {e}", path.display()))?;
            }
            let info = PartInfo { role: "receiver".into(), ..info };
            let webrtc = ep.inner.webrtc_stats().cloned();
            Ok(Part::Receiver(ReceiverPart::of(ep.inner.inner, info, webrtc)))
        })?;
        Ok(EndpointProcess { ctl, end, thread: Some(thread) })
    }

    /// The relay between `options.sender` and `options.receiver`; its clock (and the
    /// trace's) starts at the sender's first datagram.
    pub fn relay(
        cfg: &RunConfig,
        downlink_trace: Option<Arc<Trace>>,
        uplink_trace: Option<Arc<Trace>>,
        options: &ProcessOptions,
    ) -> Result<EndpointProcess, ConfigError> {
        crate::check_live_config(cfg)?;
        let scheme = cfg.resolve_scheme()?;
        if options.transport == Transport::Webrtc {
            crate::webrtc::check_scheme(&cfg.scheme_name, &scheme)?;
        }
        let sender = need(options.sender, "sender")?;
        let receiver = need(options.receiver, "receiver")?;
        if sender == receiver {
            return Err(ConfigError(format!(
                "the sender and the receiver have the same address ({sender})"
            )));
        }
        let socket = bind(options.listen)?;
        let ctl = Control::default();
        let (_, end) = session_end(cfg);
        let shared: SharedLink = Arc::default();
        let mut relay = RelayEndpoint::for_run(
            cfg,
            &scheme,
            downlink_trace.clone(),
            uplink_trace,
            options.faults.clone(),
            Some(shared.clone()),
        )?;
        if options.log_datagrams {
            relay.log_datagrams();
        }
        let mut ep = Watch::new(relay, Some(options.idle_timeout), ctl.stop.clone());
        ep.sampler = Some(LinkSampler {
            shared,
            trace: downlink_trace,
            next: Timestamp::ZERO,
            samples: Vec::new(),
        });
        let peers = Peers { sender: Some(sender), receiver: Some(receiver), monitor: None };
        let (c, start_timeout) = (ctl.clone(), options.start_timeout);
        let thread = spawn("relay", move || {
            let info = serve(&mut ep, socket, &peers, (sender, start_timeout), end, &c, |_, _| {})?;
            let info = PartInfo { role: "relay".into(), ..info };
            let link_samples = ep.sampler.take().map(|s| s.samples).unwrap_or_default();
            Ok(Part::Relay(RelayPart::of(&ep.inner, info, link_samples)))
        })?;
        Ok(EndpointProcess { ctl, end, thread: Some(thread) })
    }

    /// Whether the endpoint's clock has started (the relay and the receiver wait for their
    /// peer's first datagram).
    pub fn started(&self) -> bool {
        self.ctl.started.lock().map(|s| s.is_some()).unwrap_or(false)
    }

    /// The endpoint's session time (seconds since its clock started; 0 before).
    pub fn now_s(&self) -> f64 {
        match self.ctl.started.lock().ok().and_then(|s| *s) {
            Some(origin) => origin.elapsed().as_secs_f64(),
            None => 0.0,
        }
    }

    pub fn end_s(&self) -> f64 {
        self.end.as_secs_f64()
    }

    /// Stops the endpoint now (Ctrl-C, SIGTERM): its part is still written, marked stopped.
    pub fn stop(&self) {
        self.ctl.interrupted.store(true, Ordering::Relaxed);
        self.ctl.stop.store(true, Ordering::Relaxed);
    }

    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Waits for the endpoint and returns its part.
    pub fn finish(mut self) -> Result<Part, String> {
        let t = self.thread.take().ok_or("the endpoint was already collected")?;
        t.join().map_err(|_| "the endpoint thread panicked".to_owned())?
    }
}

impl Drop for EndpointProcess {
    fn drop(&mut self) {
        self.ctl.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::part::{merge_parts, Part};
    use sluice_core::session::build_encoder;

    fn free() -> SocketAddr {
        UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
    }

    /// Sender, relay and receiver as three endpoint processes (threads here) on loopback:
    /// the parts merge into a result whose frames were displayed, and a stranger's
    /// datagrams to the relay are counted, not fatal.
    #[test]
    fn three_endpoint_processes_merge_into_a_result() {
        let cfg = RunConfig { duration_s: 2.0, drain_s: 0.5, ..RunConfig::default() };
        let (s, x, r) = (free(), free(), free());
        let trace = Arc::new(Trace::constant(
            sluice_core::units::DataRate::from_mbps(12),
            TimeDelta::from_secs(1),
        ));
        let opts = |listen| ProcessOptions {
            idle_timeout: TimeDelta::from_secs(1),
            start_timeout: Some(Duration::from_secs(10)),
            ..ProcessOptions::new(listen)
        };
        let receiver =
            EndpointProcess::receiver(&cfg, &ProcessOptions { peer: Some(x), ..opts(r) }).unwrap();
        let relay = EndpointProcess::relay(
            &cfg,
            Some(trace),
            None,
            &ProcessOptions { sender: Some(s), receiver: Some(r), ..opts(x) },
        )
        .unwrap();
        let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
        stranger.send_to(b"not from the sender", x).unwrap();
        let encoder = build_encoder(&cfg).unwrap();
        let sender =
            EndpointProcess::sender(&cfg, encoder, &ProcessOptions { peer: Some(x), ..opts(s) })
                .unwrap();
        let Part::Sender(sp) = sender.finish().unwrap() else { panic!("not a sender part") };
        let Part::Relay(xp) = relay.finish().unwrap() else { panic!("not a relay part") };
        let Part::Receiver(rp) = receiver.finish().unwrap() else { panic!("not a receiver part") };
        assert_eq!(xp.info.io.foreign, 1);
        assert!(xp.info.started && rp.info.started);
        assert!(xp.link_samples.len() > 300, "{} link samples", xp.link_samples.len());
        let result = merge_parts(&cfg, &sp, Some(&xp), &rp).unwrap();
        let shown = result.run.frames.iter().filter(|f| f.displayed_us.is_some()).count();
        assert!(shown >= 50, "{shown} frames displayed");
        assert!(result.run.frames.iter().filter_map(|f| f.latency_us).all(|l| l > 0));
        assert!(result.run.samples.iter().any(|s| s.delivered_rate_bps > 0));
    }
}
