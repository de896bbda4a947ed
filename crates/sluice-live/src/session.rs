//! `live run`: the sender, the relay and the receiver on loopback, each on its own thread
//! with its own UDP socket, sharing one clock origin (so their timestamps are comparable, as
//! in the simulator), and their events collected into the simulator's result format.

use crate::endpoint::{Faults, LinkSnapshot, ReceiverEndpoint, RelayEndpoint, SenderEndpoint};
use crate::part::{PartInfo, ReceiverPart, RelayPart, SenderPart};
use crate::runtime::{drive, Clock, IoStats, Peers, ThreadedEncoder};
use crate::webrtc::{Side, Transport, Transported, WebRtc, WebRtcStats};
use sluice_core::encoder::Encoder;
use sluice_core::link::trace::Trace;
use sluice_core::metrics::LinkTotals;
use sluice_core::session::{build_sender, ConfigError, RunConfig};
use sluice_core::sim::RunResult;
use sluice_core::units::{TimeDelta, Timestamp};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;
use tokio::sync::Notify;

/// Options of a live run beyond the run config.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// Address the three endpoints bind (loopback unless told otherwise).
    pub bind: IpAddr,
    pub faults: Faults,
    /// Restart the receiver at this time (its state is lost; it asks for a keyframe).
    pub restart_receiver_at: Option<Timestamp>,
    /// Restart the sender at this time (its state is lost; a fresh one, with an encoder from
    /// `encoder_factory`, starts a new stream).
    pub restart_sender_at: Option<Timestamp>,
    pub encoder_factory: Option<EncoderFactory>,
    /// The encoded frames' bitstreams (x264): put on the wire instead of zeros, and the
    /// receiver's displayed frames written to `received_stream`.
    pub frames: Option<crate::endpoint::FrameStore>,
    pub received_stream: Option<std::path::PathBuf>,
    /// Copies of the received video RTP go to this address (an RTP player).
    pub forward_rtp: Option<SocketAddr>,
    /// How the sender and the receiver talk: plain RTP/RTCP or WebRTC (DTLS-SRTP).
    pub transport: Transport,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            faults: Faults::default(),
            restart_receiver_at: None,
            restart_sender_at: None,
            encoder_factory: None,
            frames: None,
            received_stream: None,
            forward_rtp: None,
            transport: Transport::Rtp,
        }
    }
}

/// Opens a fresh encoder of the run (for a restarted sender).
#[derive(Clone)]
pub struct EncoderFactory(pub Arc<dyn Fn() -> Result<Box<dyn Encoder>, String> + Send + Sync>);

impl std::fmt::Debug for EncoderFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EncoderFactory")
    }
}

/// What the live run counted beyond the simulator's results.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct LiveStats {
    pub sender_io: IoStats,
    pub relay_io: IoStats,
    pub receiver_io: IoStats,
    /// Datagrams that did not parse (or that the receiver's state machine refused).
    pub sender_malformed: u64,
    pub receiver_malformed: u64,
    /// Media datagrams the relay could not parse and forwarded as opaque bytes.
    pub relay_opaque: u64,
    pub relay_duplicated: u64,
    pub relay_reordered: u64,
    pub relay_blackout_dropped: u64,
    pub relay_garbage_sent: u64,
    /// Spoofed datagrams the relay sent (the spoof fault).
    pub relay_spoof_sent: u64,
    /// Bottleneck reports the relay sent (`SLBN`) and the sender received.
    pub relay_reports_sent: u64,
    pub sender_reports_received: u64,
    pub receiver_restarts: u64,
    pub sender_restarts: u64,
    /// New streams the receiver saw (sender restarts), and packets of an old stream it
    /// refused.
    pub receiver_new_streams: u64,
    pub receiver_stale_packets: u64,
    /// What the endpoints counted and ignored as spoofed (issue 30), summed.
    pub spoofed: crate::endpoint::Spoofed,
    /// Bytes of the received stream written, and displayed frames missing from it.
    pub received_stream_bytes: u64,
    pub received_stream_gaps: u64,
    pub feedback_messages: u64,
    /// Packets the wire format could not carry (dropped at the sender).
    pub sender_unsendable: u64,
    pub media_packets_received: u64,
    /// The transport, and with WebRTC what its layers counted at the sender and the
    /// receiver (datagrams that failed SRTP authentication among them).
    pub transport: Transport,
    pub sender_webrtc: Option<WebRtcStats>,
    pub receiver_webrtc: Option<WebRtcStats>,
    /// With WebRTC: datagrams that failed SRTP/SRTCP authentication, at both ends (dropped).
    pub srtp_auth_failed: u64,
    /// The run was stopped before its end (Ctrl-C).
    pub stopped_early: bool,
    /// Wall-clock seconds the run took.
    pub wall_s: f64,
}

/// Results of a live run: the simulator's result structure plus the live counters.
pub struct LiveResult {
    pub run: RunResult,
    pub stats: LiveStats,
}

type Joined<E> = JoinHandle<(E, std::io::Result<IoStats>)>;

/// A running live session; [`LiveRun::finish`] waits for it and collects the results.
pub struct LiveRun {
    stop: Arc<AtomicBool>,
    started: Instant,
    end: Timestamp,
    clock: Clock,
    capture_end: Timestamp,
    trace: Option<Arc<Trace>>,
    bottleneck_drops: bool,
    /// The run has path faults (the summary then counts them, as `live merge` does).
    path_faults: bool,
    received_stream: Option<std::path::PathBuf>,
    sender: Option<Joined<Transported<SenderEndpoint>>>,
    relay: Option<Joined<RelayEndpoint>>,
    receiver: Option<Joined<Transported<ReceiverEndpoint>>>,
    transport: Transport,
}

fn bind(ip: IpAddr) -> Result<UdpSocket, ConfigError> {
    UdpSocket::bind(SocketAddr::new(ip, 0))
        .map_err(|e| ConfigError(format!("cannot bind a UDP socket on {ip}: {e}")))
}

fn addr(s: &UdpSocket) -> Result<SocketAddr, ConfigError> {
    s.local_addr().map_err(|e| ConfigError(format!("socket address: {e}")))
}

/// What every endpoint thread shares: the clock, the end of the run, the stop flag.
#[derive(Clone)]
struct Shared {
    clock: Clock,
    end: Timestamp,
    stop: Arc<AtomicBool>,
}

fn spawn<E: crate::endpoint::Endpoint + 'static>(
    name: &str,
    mut ep: E,
    socket: UdpSocket,
    peers: Peers,
    shared: Shared,
    wake: Option<Arc<Notify>>,
) -> Result<Joined<E>, ConfigError> {
    std::thread::Builder::new()
        .name(format!("sluice-live-{name}"))
        .spawn(move || {
            let r = drive(&mut ep, socket, &peers, shared.clock, shared.end, &shared.stop, wake);
            (ep, r)
        })
        .map_err(|e| ConfigError(format!("cannot start the {name} thread: {e}")))
}

impl LiveRun {
    /// Starts the three endpoints of `cfg` (traces as for [`sluice_core::sim::Simulation`]).
    pub fn start(
        cfg: &RunConfig,
        downlink_trace: Option<Arc<Trace>>,
        uplink_trace: Option<Arc<Trace>>,
        encoder: Box<dyn Encoder>,
        options: &LiveOptions,
    ) -> Result<LiveRun, ConfigError> {
        crate::check_live_config(cfg)?;
        let scheme = cfg.resolve_scheme()?;
        let (s_sock, r_sock, x_sock) =
            (bind(options.bind)?, bind(options.bind)?, bind(options.bind)?);
        let (s_addr, r_addr, x_addr) = (addr(&s_sock)?, addr(&r_sock)?, addr(&x_sock)?);
        // With WebRTC, ICE and DTLS are done before the clock starts (a call is set up
        // before its media flows).
        let webrtc = match options.transport {
            Transport::Rtp => None,
            Transport::Webrtc => {
                crate::webrtc::check_scheme(&cfg.scheme_name, &scheme)?;
                if options.restart_sender_at.is_some() {
                    return Err(ConfigError(
                        "a sender restart is not supported with --transport webrtc".into(),
                    ));
                }
                let origin = Instant::now();
                let mut s =
                    WebRtc::new(Side::Sender, s_addr, x_addr, origin).map_err(ConfigError)?;
                let mut r =
                    WebRtc::new(Side::Receiver, r_addr, x_addr, origin).map_err(ConfigError)?;
                // SDP offer/answer in process; both sides see the relay as their peer.
                let offer = s.offer().map_err(ConfigError)?;
                let answer = r.answer(&offer).map_err(ConfigError)?;
                s.accept_answer(&answer).map_err(ConfigError)?;
                crate::webrtc::handshake(
                    [(&mut s, &s_sock), (&mut r, &r_sock)],
                    &x_sock,
                    std::time::Duration::from_secs(10),
                )
                .map_err(ConfigError)?;
                Some((s, r))
            }
        };
        let clock = Clock::new(Instant::now());
        let now = Timestamp::ZERO;
        let capture_end = now + TimeDelta::from_secs_f64(cfg.duration_s);
        let end = capture_end + TimeDelta::from_secs_f64(cfg.drain_s);
        let stop = Arc::new(AtomicBool::new(false));
        let wake = Arc::new(Notify::new());
        let link_snapshot: Arc<Mutex<LinkSnapshot>> = Arc::default();

        if options.restart_sender_at.is_some() && options.encoder_factory.is_none() {
            return Err(ConfigError("a sender restart needs an encoder factory".into()));
        }
        let encoder = ThreadedEncoder::new(encoder, clock, wake.clone());
        let sender = build_sender(cfg, &scheme, Box::new(encoder), now);
        let mut sender = SenderEndpoint::new(
            sender,
            TimeDelta::from_ms_f64(cfg.sample_interval_ms),
            capture_end,
            Some(link_snapshot.clone()),
            now,
        );
        if let Some(store) = &options.frames {
            sender.set_payload_source(Box::new(store.clone()));
        }
        if let (Some(at), Some(factory)) = (options.restart_sender_at, &options.encoder_factory) {
            let (cfg, scheme, factory, wake) =
                (cfg.clone(), scheme.clone(), factory.clone(), wake.clone());
            sender.restart_at(
                at,
                Box::new(move |now| {
                    let encoder = ThreadedEncoder::new((factory.0)()?, clock, wake.clone());
                    Ok(build_sender(&cfg, &scheme, Box::new(encoder), now))
                }),
            );
        }
        let mut receiver = ReceiverEndpoint::for_run(cfg, &scheme, now);
        if options.received_stream.is_some() {
            receiver.record_stream();
        }
        if options.forward_rtp.is_some() {
            receiver.forward_video();
        }
        if let Some(at) = options.restart_receiver_at {
            receiver.restart_at(at);
        }
        let relay = RelayEndpoint::for_run(
            cfg,
            &scheme,
            downlink_trace.clone(),
            uplink_trace,
            options.faults.clone(),
            Some(link_snapshot),
        )?;
        let (sender, receiver) = match webrtc {
            None => (Transported::plain(sender), Transported::plain(receiver)),
            Some((mut s, mut r)) => {
                s.set_origin(clock.instant(Timestamp::ZERO));
                r.set_origin(clock.instant(Timestamp::ZERO));
                (Transported::webrtc(sender, s), Transported::webrtc(receiver, r))
            }
        };
        let relay_peers = Peers { sender: Some(s_addr), receiver: Some(r_addr), monitor: None };
        let sender_peers = Peers { receiver: Some(x_addr), ..Peers::default() };
        let receiver_peers =
            Peers { sender: Some(x_addr), monitor: options.forward_rtp, ..Peers::default() };
        let shared = Shared { clock, end, stop: stop.clone() };
        let relay = spawn("relay", relay, x_sock, relay_peers, shared.clone(), None)?;
        let receiver = spawn("receiver", receiver, r_sock, receiver_peers, shared.clone(), None)?;
        let sender = spawn("sender", sender, s_sock, sender_peers, shared.clone(), Some(wake))?;
        Ok(LiveRun {
            stop,
            started: Instant::now(),
            end,
            clock,
            capture_end,
            trace: downlink_trace,
            bottleneck_drops: scheme.bottleneck.drops_frames(),
            path_faults: !cfg.faults.is_none(),
            received_stream: options.received_stream.clone(),
            sender: Some(sender),
            relay: Some(relay),
            receiver: Some(receiver),
            transport: options.transport,
        })
    }

    /// Session time now (seconds since the start).
    pub fn now_s(&self) -> f64 {
        self.clock.now().as_secs_f64()
    }
    pub fn end_s(&self) -> f64 {
        self.end.as_secs_f64()
    }

    /// Asks the endpoints to stop now (results are still collected).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether every endpoint has finished.
    pub fn is_finished(&self) -> bool {
        [
            self.sender.as_ref().map(|h| h.is_finished()),
            self.relay.as_ref().map(|h| h.is_finished()),
            self.receiver.as_ref().map(|h| h.is_finished()),
        ]
        .iter()
        .all(|f| f.unwrap_or(true))
    }

    /// Waits for the endpoints and builds the results.
    pub fn finish(mut self) -> Result<LiveResult, String> {
        let (sender_t, sender_io) = join(self.sender.take(), "sender")?;
        let (relay, relay_io) = join(self.relay.take(), "relay")?;
        let (receiver_t, receiver_io) = join(self.receiver.take(), "receiver")?;
        let sender_webrtc = sender_t.webrtc_stats().cloned();
        let receiver_webrtc = receiver_t.webrtc_stats().cloned();
        let (sender, receiver) = (sender_t.inner, receiver_t.inner);
        if let Some(why) = sender.failure() {
            return Err(why.to_owned());
        }
        let stopped_early = self.stop.load(Ordering::Relaxed);
        if let Some(path) = &self.received_stream {
            std::fs::write(path, &receiver.stream)
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
        let trace = self.trace.clone();
        let capacity_until = move |t: Timestamp| match &trace {
            Some(tr) => tr.capacity_between(Timestamp::ZERO, t).as_bytes(),
            None => 0,
        };
        // The three endpoints as the parts `live merge` reads, so both count alike.
        let (restarts, delivered_sampled) =
            ((sender.restarts, receiver.restarts), sender.delivered_bytes_sampled());
        let part_info = |io| PartInfo { io, ..PartInfo::default() };
        let mut sp = SenderPart::of(sender, part_info(sender_io), sender_webrtc);
        let rp = ReceiverPart::of(receiver, part_info(receiver_io), receiver_webrtc);
        let xp = RelayPart::of(&relay, part_info(relay_io), Vec::new());
        let (run, bottleneck_reports) = crate::merge::merge(crate::merge::MergeInput {
            sender_events: &sp.events,
            policy_dropped_frames: &xp.policy_dropped_frames,
            receiver_events: &rp.events,
            samples: std::mem::take(&mut sp.samples),
            link: LinkTotals {
                arrived_packets: xp.arrived_packets,
                dropped_packets: xp.dropped_packets,
                policy_dropped_packets: xp.policy_dropped_packets,
                delivered_bytes: delivered_sampled,
                capacity_bytes: 0,
            },
            capacity_until: &capacity_until,
            capture_end: self.capture_end,
            end: self.end,
            stopped: stopped_early,
            bottleneck_drops: self.bottleneck_drops,
            path_faults: self.path_faults.then_some(xp.faults),
            flows: xp.flows.clone().map(|f| (f, xp.jain_index)),
        });
        let live = LiveStats {
            sender_restarts: restarts.0,
            receiver_restarts: restarts.1,
            transport: self.transport,
            stopped_early,
            wall_s: self.started.elapsed().as_secs_f64(),
            ..crate::part::live_stats(&sp, Some(&xp), &rp, bottleneck_reports)
        };
        Ok(LiveResult { run, stats: live })
    }
}

fn join<E>(h: Option<Joined<E>>, name: &str) -> Result<(E, IoStats), String> {
    let h = h.ok_or_else(|| format!("the {name} was already collected"))?;
    let (ep, io) = h.join().map_err(|_| format!("the {name} thread panicked"))?;
    let io = io.map_err(|e| format!("the {name}'s socket failed: {e}"))?;
    Ok((ep, io))
}

impl Drop for LiveRun {
    fn drop(&mut self) {
        // Dropped without finish (an error in the caller): stop the threads.
        self.stop();
    }
}
