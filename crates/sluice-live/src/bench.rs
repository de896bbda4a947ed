//! The pacing benchmark of `make bench`: the webrtc scheme's pacer at a fixed rate, kept
//! backlogged, driven by the live runtime over a loopback socket; how late each datagram
//! leaves against the time the pacer scheduled it.

use crate::endpoint::{Endpoint, Role};
use crate::runtime::{drive, Clock, IoStats, Peers};
use sluice_core::pacer::Pacer;
use sluice_core::packet::{Packet, PacketKind, UDP_IP_OVERHEAD};
use sluice_core::units::{DataRate, DataSize, TimeDelta, Timestamp};
use std::net::UdpSocket;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// A sender that is only a pacer with a full queue.
struct PacerOnly {
    pacer: Box<dyn Pacer>,
    packet: DataSize,
    sent: u64,
}

impl Endpoint for PacerOnly {
    fn handle_datagram(&mut self, _: Role, _: &[u8], _: Timestamp) {}
    fn handle_timeout(&mut self, now: Timestamp) {
        while self.pacer.queue_packets() < 64 {
            let mut p = Packet::padding(self.packet, now);
            p.kind = PacketKind::Video;
            p.packet_count = 1;
            self.pacer.enqueue(p, now);
        }
    }
    fn poll_transmit(&mut self, now: Timestamp) -> Option<(Role, Vec<u8>)> {
        let p = self.pacer.poll_send(now)?;
        self.sent += 1;
        Some((Role::Receiver, vec![0u8; (p.size - UDP_IP_OVERHEAD).as_bytes() as usize]))
    }
    fn poll_timeout(&self) -> Timestamp {
        self.pacer.poll_timeout()
    }
    fn malformed(&self) -> u64 {
        0
    }
}

/// What the benchmark measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PacingReport {
    pub rate_bps: i64,
    pub packet_bytes: i64,
    pub duration_s: f64,
    pub packets: u64,
    /// Rate achieved on the wire (IP bytes) over the run.
    pub achieved_bps: f64,
    pub send_error_us_p50: Option<u64>,
    pub send_error_us_p99: Option<u64>,
    pub send_error_us_p999: Option<u64>,
    pub io: IoStats,
}

/// Paces 1200-byte packets (1228 on the wire) at `rate` for `duration` to a loopback sink.
pub fn pacing_benchmark(rate: DataRate, duration: TimeDelta) -> std::io::Result<PacingReport> {
    let sink = UdpSocket::bind("127.0.0.1:0")?;
    let sink_addr = sink.local_addr()?;
    sink.set_read_timeout(Some(std::time::Duration::from_millis(100)))?;
    let socket = UdpSocket::bind("127.0.0.1:0")?;
    let stop = AtomicBool::new(false);
    let now = Timestamp::ZERO;
    let scheme = sluice_core::scheme::lookup("webrtc")
        .ok_or_else(|| std::io::Error::other("no webrtc scheme"))?;
    let mut pacer = scheme.config.pacer.build(now);
    pacer.set_rates(rate, DataRate::ZERO, now);
    let packet = DataSize::from_bytes(1228);
    let mut ep = PacerOnly { pacer, packet, sent: 0 };
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let done2 = done.clone();
    let drain = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !done2.load(std::sync::atomic::Ordering::Relaxed) {
            let _ = sink.recv_from(&mut buf);
        }
    });
    let clock = Clock::new(Instant::now());
    let end = now + duration;
    let peers = Peers { receiver: Some(sink_addr), ..Peers::default() };
    let io = drive(&mut ep, socket, &peers, clock, end, &stop, None)?;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = drain.join();
    let secs = duration.as_secs_f64();
    Ok(PacingReport {
        rate_bps: rate.as_bps(),
        packet_bytes: packet.as_bytes(),
        duration_s: secs,
        packets: ep.sent,
        achieved_bps: ep.sent as f64 * packet.as_bits() as f64 / secs,
        send_error_us_p50: io.send_error.quantile_us(0.5),
        send_error_us_p99: io.send_error.quantile_us(0.99),
        send_error_us_p999: io.send_error.quantile_us(0.999),
        io,
    })
}
