//! The live runtime: a real clock, UDP sockets and an encoder thread around the sans-IO
//! endpoints ([`crate::endpoint`]). Each endpoint runs on its own thread with a
//! single-threaded tokio runtime: on every wake-up it feeds the datagrams that arrived with
//! `now`, sends what the endpoint polls out, and sleeps until `poll_timeout` or the next
//! datagram.
//!
//! Timers: tokio's timer wheel has a 1 ms resolution, too coarse for pacing at 100 Mbps
//! (a 1200-byte packet every 0.1 ms). The loop sleeps with tokio until 1 ms before the
//! deadline (so datagrams are still read while it waits) and the last stretch with
//! `std::thread::sleep`, which Linux serves with high-resolution timers; the pacer's send-
//! time error is measured by `bench/run.py` (`live_pacing`).

use crate::endpoint::{Endpoint, Role};
use sluice_core::encoder::{Encoder, EncoderDriver, FinishedFrame, FrameAnalysis, FrameRequest};
use sluice_core::units::{TimeDelta, Timestamp};
use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The session clock: microseconds since a shared origin, as the core's [`Timestamp`].
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin: Instant,
}

impl Clock {
    pub fn new(origin: Instant) -> Self {
        Clock { origin }
    }
    pub fn now(&self) -> Timestamp {
        Timestamp::from_us(self.origin.elapsed().as_micros() as i64)
    }
    pub fn instant(&self, t: Timestamp) -> Instant {
        self.origin + Duration::from_micros(t.as_us().max(0) as u64)
    }
}

/// Who may send to an endpoint and where its outputs go.
#[derive(Clone, Debug, Default)]
pub struct Peers {
    pub sender: Option<SocketAddr>,
    pub receiver: Option<SocketAddr>,
    /// Where copies of the received video RTP go (an RTP player such as ffmpeg); never
    /// heard from.
    pub monitor: Option<SocketAddr>,
}

impl Peers {
    fn role_of(&self, a: SocketAddr) -> Option<Role> {
        if self.sender == Some(a) {
            Some(Role::Sender)
        } else if self.receiver == Some(a) {
            Some(Role::Receiver)
        } else {
            None
        }
    }
    fn addr(&self, r: Role) -> Option<SocketAddr> {
        match r {
            Role::Sender => self.sender,
            Role::Receiver => self.receiver,
            Role::Monitor => self.monitor,
        }
    }
}

/// What the runtime counted while driving an endpoint.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct IoStats {
    pub datagrams_in: u64,
    pub datagrams_out: u64,
    /// Datagrams from an address that is not a configured peer (dropped unread).
    pub foreign: u64,
    pub send_errors: u64,
    /// Wake-ups later than the endpoint asked for by more than 0.5 ms / 2 ms.
    pub late_wakeups_500us: u64,
    pub late_wakeups_2ms: u64,
    /// Turns of the event loop.
    pub wakeups: u64,
    /// The longest turn of the loop (endpoint work and sends), in microseconds.
    pub max_turn_us: u64,
    /// The longest time between two turns, in microseconds.
    pub max_gap_us: u64,
    /// Datagrams sent on a timer, by how late they left against the time the endpoint's
    /// timer was due (its schedule): 10 µs bins, the last one for 10 ms and more.
    pub send_error: Histogram,
}

/// Counts of microsecond values in 10 µs bins up to 10 ms.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Histogram {
    pub bin_us: u64,
    pub counts: Vec<u64>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { bin_us: 10, counts: vec![0; 1001] }
    }
}

impl Histogram {
    pub fn add(&mut self, us: u64) {
        let i = ((us / self.bin_us) as usize).min(self.counts.len() - 1);
        self.counts[i] += 1;
    }
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
    /// The upper edge of the bin holding the `q` quantile (0..=1), in microseconds.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let want = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Some((i as u64 + 1) * self.bin_us);
            }
        }
        None
    }
}

/// A timer wake-up later than this is handled at the real time, not at its due time.
const ANCHOR_SLACK: TimeDelta = TimeDelta::from_ms(2);

/// How long before a deadline the loop leaves tokio's timer for a precise sleep.
const PRECISE_SLEEP: Duration = Duration::from_micros(1500);

/// Drives `ep` on `socket` until `end` or until `stop` is set. Never fails on network input;
/// returns an error only if the socket cannot be registered with tokio.
pub fn drive(
    ep: &mut dyn Endpoint,
    socket: UdpSocket,
    peers: &Peers,
    clock: Clock,
    end: Timestamp,
    stop: &AtomicBool,
    wake: Option<Arc<Notify>>,
) -> std::io::Result<IoStats> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async move {
        socket.set_nonblocking(true)?;
        // Draining reads go straight to the socket: tokio's `try_recv_from` answers from its
        // cached readiness, which only its driver updates when the loop parks, and a backlogged
        // pacer keeps the loop from parking (it sleeps precisely instead).
        let raw = socket.try_clone()?;
        let raw_fd = raw.as_raw_fd();
        set_timer_slack();
        let socket = tokio::net::UdpSocket::from_std(socket)?;
        let mut stats = IoStats::default();
        let mut buf = vec![0u8; 65_536];
        let wake = wake.unwrap_or_else(|| Arc::new(Notify::new()));
        let mut last_turn: Option<Instant> = None;
        let mut last_now = Timestamp::ZERO;
        let mut timer_due: Option<Timestamp> = None;
        loop {
            let real = clock.now();
            if real >= end || stop.load(Ordering::Relaxed) {
                break;
            }
            // A timer wake-up is handled at the time it was due (if the wake-up came at most
            // ANCHOR_SLACK late): the state machines see their timers fire on schedule, as in
            // the simulator, so a debt-based pacer does not lose the sleep's overshoot on
            // every packet (its debt cannot go below zero). The datagram leaves at the real
            // time; the difference is the send-time error `make bench` measures.
            let due = timer_due.take();
            let now = match due {
                Some(due) if real >= due && real - due <= ANCHOR_SLACK => due,
                _ => real,
            }
            .max(last_now);
            last_now = now;
            stats.wakeups += 1;
            let turn = Instant::now();
            if let Some(prev) = last_turn {
                let gap = turn.saturating_duration_since(prev).as_micros() as u64;
                stats.max_gap_us = stats.max_gap_us.max(gap);
            }
            // Sends on a timer are measured against the time it was due.
            let scheduled = due;
            ep.handle_timeout(now);
            while let Some((to, bytes)) = ep.poll_transmit(now) {
                if let Some(due) = scheduled {
                    stats.send_error.add((clock.now() - due).as_us().max(0) as u64);
                }
                match peers.addr(to) {
                    Some(a) => match socket.try_send_to(&bytes, a) {
                        Ok(_) => stats.datagrams_out += 1,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            // The socket buffer is full: wait for room (a real send queue).
                            match socket.send_to(&bytes, a).await {
                                Ok(_) => stats.datagrams_out += 1,
                                Err(_) => stats.send_errors += 1,
                            }
                        }
                        Err(_) => stats.send_errors += 1,
                    },
                    None => stats.send_errors += 1,
                }
            }
            stats.max_turn_us = stats.max_turn_us.max(turn.elapsed().as_micros() as u64);
            last_turn = Some(Instant::now());
            let deadline = ep.poll_timeout().min(end);
            let at = clock.instant(deadline);
            // Everything already queued, with the same wake-up.
            let mut got = false;
            while let Ok((n, from)) = raw.recv_from(&mut buf) {
                handle(ep, peers, &buf[..n], from, clock.now(), &mut stats);
                got = true;
            }
            if got {
                continue;
            }
            let until = at.saturating_duration_since(Instant::now());
            if until <= PRECISE_SLEEP {
                // Close: a precise wait (tokio's timer would round it up to its next
                // millisecond tick) that still wakes for a datagram, so arrival times stay
                // exact (a receiver's feedback reports them).
                if precise_wait_until(raw_fd, at) {
                    continue;
                }
                note_lateness(&mut stats, at, deadline, end);
                timer_due = Some(deadline);
                continue;
            }
            tokio::select! {
                r = socket.recv_from(&mut buf) => {
                    if let Ok((n, from)) = r {
                        handle(ep, peers, &buf[..n], from, clock.now(), &mut stats);
                    }
                }
                _ = tokio::time::sleep_until((at - PRECISE_SLEEP).into()) => {}
                _ = wake.notified() => {}
            }
        }
        Ok(stats)
    })
}

/// The last stretch before a deadline is spun, not slept: Linux's sleeps overshoot by
/// 50-100 µs (timer slack and the wake-up), as much as the gap between two packets at
/// 100 Mbps.
const SPIN: Duration = Duration::from_micros(100);

/// Waits until `at` or until `fd` is readable (then returns true at once): `ppoll` (a
/// high-resolution timeout) to `SPIN` before `at`, then a spin.
fn precise_wait_until(fd: RawFd, at: Instant) -> bool {
    let now = Instant::now();
    if at > now + SPIN {
        let d = at - now - SPIN;
        let ts = libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        };
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: `pfd` and `ts` live across the call, the count is 1, the signal mask is
        // null (unchanged); `fd` is this loop's open socket.
        let r = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if r > 0 {
            return true;
        }
    }
    while Instant::now() < at {
        std::hint::spin_loop();
    }
    false
}

/// Asks Linux for 1 µs of timer slack on this thread (the default 50 µs delays every
/// timed wake-up by up to that much).
fn set_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and affects only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong);
    }
}

/// Counts a wake-up later than its deadline.
fn note_lateness(stats: &mut IoStats, at: Instant, deadline: Timestamp, end: Timestamp) {
    if !deadline.is_finite() || deadline >= end {
        return;
    }
    let late = Instant::now().saturating_duration_since(at);
    if late > Duration::from_micros(500) {
        stats.late_wakeups_500us += 1;
    }
    if late > Duration::from_millis(2) {
        stats.late_wakeups_2ms += 1;
    }
}

fn handle(
    ep: &mut dyn Endpoint,
    peers: &Peers,
    bytes: &[u8],
    from: SocketAddr,
    now: Timestamp,
    stats: &mut IoStats,
) {
    stats.datagrams_in += 1;
    match peers.role_of(from) {
        Some(role) => ep.handle_datagram(role, bytes, now),
        None => stats.foreign += 1,
    }
}

enum Job {
    Encode(FrameRequest, Timestamp),
    Analyze(u64, mpsc::Sender<Option<FrameAnalysis>>),
}

/// An [`EncoderDriver`] that encodes on its own thread, so an encode never delays a send.
/// An encode starts when the thread is free and takes at least the encode time the encoder
/// reports (the model encoder computes at once and reports a modelled time; x264 reports the
/// time it took). The thread wakes the runtime through `wake` when a frame is done.
pub struct ThreadedEncoder {
    jobs: Option<mpsc::Sender<Job>>,
    /// Frames the thread finished, in order.
    done: Arc<Mutex<VecDeque<FinishedFrame>>>,
    failure: Arc<Mutex<Option<String>>>,
    failure_seen: Option<String>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ThreadedEncoder {
    pub fn new(mut encoder: Box<dyn Encoder>, clock: Clock, wake: Arc<Notify>) -> Self {
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let done: Arc<Mutex<VecDeque<FinishedFrame>>> = Arc::default();
        let done_tx = done.clone();
        let failure = Arc::new(Mutex::new(None));
        let fail = failure.clone();
        let thread = std::thread::Builder::new()
            .name("sluice-encoder".into())
            .spawn(move || {
                let mut free_at = Timestamp::ZERO;
                while let Ok(job) = job_rx.recv() {
                    match job {
                        Job::Analyze(i, reply) => {
                            let _ = reply.send(encoder.analyze(i));
                        }
                        Job::Encode(request, submitted) => {
                            let started = clock.now().max(submitted).max(free_at);
                            let frame = encoder.encode(&request);
                            let target = started + frame.encode_time;
                            let now = clock.now();
                            if target > now {
                                std::thread::sleep(Duration::from_micros(
                                    (target - now).as_us() as u64
                                ));
                            }
                            let finished = clock.now();
                            free_at = finished;
                            if let Some(f) = encoder.failure() {
                                if let Ok(mut g) = fail.lock() {
                                    *g = Some(f.to_owned());
                                }
                            }
                            if let Ok(mut q) = done_tx.lock() {
                                q.push_back(FinishedFrame { request, frame, started, finished });
                            }
                            wake.notify_one();
                        }
                    }
                }
            })
            .ok();
        ThreadedEncoder { jobs: Some(jobs), done, failure, failure_seen: None, thread }
    }
}

impl Drop for ThreadedEncoder {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl EncoderDriver for ThreadedEncoder {
    fn analyze(&mut self, source_index: u64) -> Option<FrameAnalysis> {
        // A synchronous round trip (ACE-C's SATD look-ahead); waits for a running encode.
        let (tx, rx) = mpsc::channel();
        self.jobs.as_ref()?.send(Job::Analyze(source_index, tx)).ok()?;
        rx.recv().ok().flatten()
    }
    fn submit(&mut self, request: FrameRequest, now: Timestamp) {
        if let Some(j) = &self.jobs {
            let _ = j.send(Job::Encode(request, now));
        }
    }
    fn poll_finished(&mut self, now: Timestamp) -> Option<FinishedFrame> {
        if self.failure_seen.is_none() {
            self.failure_seen = self.failure.lock().ok().and_then(|g| g.clone());
        }
        let mut q = self.done.lock().ok()?;
        if q.front()?.finished <= now {
            q.pop_front()
        } else {
            None
        }
    }
    fn poll_timeout(&self) -> Timestamp {
        // Frames still encoding wake the runtime through the notifier; a finished one is due
        // at its finish time (already past).
        self.done
            .lock()
            .ok()
            .and_then(|q| q.front().map(|f| f.finished))
            .unwrap_or(Timestamp::INFINITY)
    }
    fn failure(&self) -> Option<&str> {
        self.failure_seen.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts what it is given.
    #[derive(Default)]
    struct Counter {
        got: Vec<(Role, Vec<u8>)>,
    }
    impl Endpoint for Counter {
        fn handle_datagram(&mut self, from: Role, bytes: &[u8], _: Timestamp) {
            self.got.push((from, bytes.to_vec()));
        }
        fn handle_timeout(&mut self, _: Timestamp) {}
        fn poll_transmit(&mut self, _: Timestamp) -> Option<(Role, Vec<u8>)> {
            None
        }
        fn poll_timeout(&self) -> Timestamp {
            Timestamp::INFINITY
        }
        fn malformed(&self) -> u64 {
            0
        }
    }

    #[test]
    fn only_the_configured_peer_is_heard() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = sock.local_addr().unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
        let peers = Peers { sender: Some(peer.local_addr().unwrap()), ..Peers::default() };
        stranger.send_to(b"intruder", addr).unwrap();
        peer.send_to(b"hello", addr).unwrap();
        let mut ep = Counter::default();
        let clock = Clock::new(Instant::now());
        let stop = AtomicBool::new(false);
        let stats =
            drive(&mut ep, sock, &peers, clock, Timestamp::from_ms(200), &stop, None).unwrap();
        assert_eq!(ep.got, vec![(Role::Sender, b"hello".to_vec())]);
        assert_eq!((stats.datagrams_in, stats.foreign), (2, 1));
    }

    #[test]
    fn histogram_quantiles() {
        let mut h = Histogram::default();
        for us in 0..100 {
            h.add(us);
        }
        h.add(50_000); // beyond the last bin: counted there
        assert_eq!(h.count(), 101);
        assert_eq!(h.quantile_us(0.5), Some(60));
        assert_eq!(h.quantile_us(1.0), Some(10_010));
    }
}
