//! Driving one of Sluice's congestion controllers from your own transport, without the rest
//! of the pipeline (docs/architecture.md, "Using the core as a library").
//!
//! A backlogged sender paces 1200-byte packets at the controller's pacing rate through a
//! drop-tail bottleneck of 100 kB that serves 4 Mbps, then 1 Mbps from 10 s; 20 ms each way;
//! the receiver reports every 50 ms (every 10 ms for Copa). Prints the target each second.
//!
//! ```text
//! cargo run --release -p sluice-core --example drive_controller -- gcc    # or copa
//! ```
//!
//! What a transport owes a controller, in order, at every instant `now` (none reads a clock):
//! 1. `handle_timeout(now)` when `now >= poll_timeout()`;
//! 2. `poll_probe_cluster(now)` until `None`: send at least `min_probes` packets over at
//!    least `target_duration` at the cluster's rate, each `SentPacket` carrying the cluster's
//!    id (GCC learns the capacity from them; without them it ramps up by 8 % a second);
//! 3. `on_packet_sent` for every packet that leaves, with the bytes in flight after it;
//! 4. for every feedback message, a `TransportPacketsFeedback`: the packets it reports
//!    matched to what was sent (arrival times in the receiver's clock, `None` if lost), the
//!    bytes in flight before and after, and the RTT samples `RttEstimator::on_feedback`
//!    fills in (Copa and RoCC need each packet's `rtt`);
//! 5. `update()` for the target, pacing rate and window after any of these.

use sluice_core::cc::copa::CopaConfig;
use sluice_core::cc::gcc::{Gcc, GccConfig};
use sluice_core::cc::rtt::RttEstimator;
use sluice_core::cc::{
    CongestionController, PacketResult, ProbeClusterConfig, SentPacket, TransportPacketsFeedback,
};
use sluice_core::units::{DataRate, DataSize, TimeDelta, Timestamp};
use std::collections::VecDeque;

const PACKET: DataSize = DataSize::from_bytes(1200);
const QUEUE: DataSize = DataSize::from_bytes(100_000);
const ONE_WAY: TimeDelta = TimeDelta::from_ms(20);

/// A packet sent and its arrival at the receiver (None: the bottleneck dropped it).
type Fate = (SentPacket, Option<Timestamp>);

fn capacity(t: Timestamp) -> DataRate {
    DataRate::from_mbps(if t < Timestamp::from_ms(10_000) { 4 } else { 1 })
}

/// Runs `cc` for 20 s; returns the target at each whole second.
fn run(mut cc: Box<dyn CongestionController>, report_every: TimeDelta) -> Vec<DataRate> {
    let (mut now, end) = (Timestamp::ZERO, Timestamp::from_ms(20_000));
    let (mut next_send, mut next_report, mut next_print) = (now, now + report_every, now);
    let mut link_free = now; // when the bottleneck has served what it holds
    let mut seq = 0;
    let mut in_flight = DataSize::ZERO;
    // Sent and not yet reported (the packet, its arrival or None), and reports on their way
    // (when each reaches the sender).
    let mut unreported: VecDeque<Fate> = VecDeque::new();
    let mut reports: VecDeque<(Timestamp, Vec<Fate>)> = VecDeque::new();
    let mut rtt = RttEstimator::default();
    let mut targets = Vec::new();
    // The probe cluster being sent: its config, packets sent so far and its start.
    let mut probe: Option<(ProbeClusterConfig, u32, Timestamp)> = None;
    while now < end {
        if cc.poll_timeout() <= now {
            cc.handle_timeout(now);
        }
        while let Some(cluster) = cc.poll_probe_cluster(now) {
            probe = Some((cluster, 0, now)); // the newest one, a simpler prober than libwebrtc's
        }
        if next_send <= now {
            let window_open = cc.update().congestion_window.is_none_or(|w| in_flight < w);
            if window_open {
                in_flight += PACKET;
                let sent = SentPacket {
                    transport_seq: seq,
                    send_time: now,
                    size: PACKET,
                    probe_cluster_id: probe.map(|p| p.0.id),
                    is_padding: false,
                    data_in_flight: in_flight,
                };
                seq += 1;
                cc.on_packet_sent(&sent, now);
                let backlog = capacity(now) * (link_free - now).max(TimeDelta::ZERO);
                let arrival = (backlog + PACKET <= QUEUE).then(|| {
                    link_free = link_free.max(now) + PACKET / capacity(now);
                    link_free + ONE_WAY
                });
                unreported.push_back((sent, arrival));
            }
            let mut pacing = cc.update().pacing_rate.max(DataRate::from_kbps(10));
            if let Some((cluster, sent, start)) = probe.as_mut() {
                *sent += 1;
                pacing = cluster.target_rate;
                if *sent >= cluster.min_probes && now - *start >= cluster.target_duration {
                    probe = None;
                }
            }
            next_send = now + PACKET / pacing;
        }
        if next_report <= now {
            // The receiver reports what arrived by now, and the losses before the newest.
            if let Some(i) = unreported.iter().rposition(|p| p.1.is_some_and(|a| a <= now)) {
                reports.push_back((now + ONE_WAY, unreported.drain(..=i).collect()));
            }
            next_report = now + report_every;
        }
        while reports.front().is_some_and(|r| r.0 <= now) {
            let (_, batch) = reports.pop_front().expect("a report");
            let prior_in_flight = in_flight;
            let mut packets: Vec<PacketResult> = batch
                .iter()
                .map(|&(sent, receive_time)| PacketResult { sent, receive_time, rtt: None })
                .collect();
            for p in &packets {
                in_flight -= p.sent.size;
            }
            // The report left the receiver at once: no hold time.
            let sample = rtt.on_feedback(&mut packets, TimeDelta::ZERO, now);
            cc.on_transport_feedback(
                &TransportPacketsFeedback {
                    feedback_time: now,
                    packets,
                    prior_in_flight,
                    data_in_flight: in_flight,
                    rtt: sample,
                    smoothed_rtt: rtt.smoothed(),
                },
                now,
            );
        }
        if next_print <= now {
            targets.push(cc.update().target_rate);
            next_print += TimeDelta::from_secs(1);
        }
        let mut next = next_send.min(next_report).min(next_print).min(cc.poll_timeout());
        if let Some(r) = reports.front() {
            next = next.min(r.0);
        }
        now = next.max(now + TimeDelta::from_us(1));
    }
    targets
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "gcc".into());
    let (cc, every): (Box<dyn CongestionController>, _) = match which.as_str() {
        // Each controller is built from its config, whose defaults are the paper's (or
        // libwebrtc's); `validate()` names a mistake in a config you changed.
        "gcc" => (Box::new(Gcc::new(GccConfig::default(), Timestamp::ZERO)), 50),
        "copa" => (CopaConfig::default().build(Timestamp::ZERO), 10),
        other => {
            eprintln!("unknown controller {other:?}: gcc or copa");
            std::process::exit(2);
        }
    };
    for (s, rate) in run(cc, TimeDelta::from_ms(every)).iter().enumerate() {
        println!(
            "{s:>2} s  capacity {:>4.1} Mbps  target {:>6.3} Mbps",
            capacity(Timestamp::from_ms(s as i64 * 1000)).as_mbps_f64(),
            rate.as_mbps_f64()
        );
    }
}
