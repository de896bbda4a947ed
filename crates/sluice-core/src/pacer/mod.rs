//! Pacers behind one trait. A pacer holds the packets the encoder produced and releases them
//! onto the network at its own schedule. It also sends the probe clusters the congestion
//! controller asks for. The queue and the prober, and the order a paced pacer keeps when
//! polled (probe, media, its own filler), are one [`core::PacerCore`] that every pacer has,
//! as libwebrtc's pacing controller has them; each pacer adds its rule.
//!
//! * [`leaky_bucket::LeakyBucketPacer`]: libwebrtc's debt-based pacing controller, run at
//!   each packet's time or, optionally, when libwebrtc's [`task_queue`] would run it.
//! * [`unpaced::Unpaced`]: no pacing ("always burst").
//! * [`ace_n::AceNPacer`]: ACE-N (ACE §4.1), a token bucket whose size adapts per frame to
//!   the predicted bottleneck queue, with [`packet_train`] capacity estimates.
//! * [`vidaptive::VidaptivePacer`]: Vidaptive (§3.1), paced at the controller's rate with no
//!   queue-drain speed-up, [`dummy`] packets when no media waits.

pub mod ace_n;
pub mod core;
pub mod dummy;
pub mod leaky_bucket;
pub mod packet_train;
pub mod padding;
pub mod prober;
pub mod queue;
pub mod task_queue;
pub mod unpaced;
pub mod vidaptive;

use crate::cc::{ProbeClusterConfig, TransportPacketsFeedback};
use crate::columns::Columns;
use crate::packet::Packet;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};

/// A pacer: packets in with `enqueue`, out with `poll_send`.
pub trait Pacer: Send {
    /// New rates from the congestion controller's update. `pacing_rate` is the controller's
    /// (its pacing factor applied); `padding_rate` is the rate to fill with padding when
    /// there is no media.
    fn set_rates(&mut self, pacing_rate: DataRate, padding_rate: DataRate, now: Timestamp);
    /// A packet to send (video or retransmission).
    fn enqueue(&mut self, packet: Packet, now: Timestamp);
    /// The queue and the prober ([`core::PacerCore`]).
    fn core(&self) -> &core::PacerCore;
    /// The queue and the prober, mutable.
    fn core_mut(&mut self) -> &mut core::PacerCore;
    /// A probe cluster to send.
    fn create_probe_cluster(&mut self, cluster: ProbeClusterConfig, _now: Timestamp) {
        self.core_mut().prober.add_cluster(cluster);
    }
    /// The next packet to put on the wire at `now`, if it is due. Padding packets are created
    /// by the pacer. Call repeatedly until `None`.
    fn poll_send(&mut self, now: Timestamp) -> Option<Packet>;
    /// When `poll_send` may next return a packet (`Timestamp::INFINITY` if never without new
    /// input).
    fn poll_timeout(&self) -> Timestamp;
    /// Removes the waiting packets `pred` picks (frames purged by the sender); returns how
    /// many.
    fn purge(&mut self, pred: &mut dyn FnMut(&Packet) -> bool) -> usize {
        self.core_mut().queue.remove_where(pred)
    }
    /// Bytes and packets waiting.
    fn queue_size(&self) -> DataSize {
        self.core().queue.bytes()
    }
    /// Packets waiting.
    fn queue_packets(&self) -> usize {
        self.core().queue.len()
    }
    /// How long the oldest waiting packet has waited.
    fn oldest_queue_time(&self, now: Timestamp) -> TimeDelta {
        self.core().queue.oldest_queue_time(now)
    }
    /// The current pacing rate (including any queue-drain adjustment).
    fn pacing_rate(&self) -> DataRate;
    /// A frame's packets are about to be enqueued (`size`: the frame's payload bytes, no
    /// headers). Called once per frame, before its packets' `enqueue` calls. Pacers that
    /// adapt per frame (ACE-N) update here; the default does nothing.
    fn on_frame(&mut self, _size: DataSize, _now: Timestamp) {}
    /// Transport feedback, matched against the send history, with the sender's per-packet
    /// RTT samples. For pacers that watch the network (ACE-N); the default ignores it.
    fn on_transport_feedback(&mut self, _feedback: &TransportPacketsFeedback, _now: Timestamp) {}
    /// Pacer-specific state for the time series, under `pacer_*` names.
    fn debug_columns(&self, _out: &mut Columns) {}
    /// The sender's congestion window stops (`true`) or again lets (`false`) the pacer's
    /// packets go (libwebrtc's `SetCongested`). A pacer that pays its budget whenever it is
    /// polled need not care (the default ignores it); one that pays only up to its packets'
    /// due times must not keep the time it was held as credit.
    fn set_congested(&mut self, _congested: bool, _now: Timestamp) {}
    /// When the next frame is captured (`Timestamp::INFINITY`: capture has ended) and the
    /// frame interval; the sender calls it whenever the next capture moves. For pacers that
    /// time padding around frames (Vidaptive's dummy guard); the default ignores it.
    fn set_capture_schedule(&mut self, _next_capture: Timestamp, _frame_interval: TimeDelta) {}
}

/// Pacer choice and parameters, part of a scheme.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum PacerConfig {
    /// libwebrtc's leaky bucket.
    LeakyBucket(leaky_bucket::LeakyBucketConfig),
    /// No pacing: media leaves as soon as it is packetized. (No fields, written `{}` so that
    /// serde refuses other keys beside `kind`.)
    None {},
    /// ACE-N: token bucket with an adaptive bucket size.
    AceN(ace_n::AceNConfig),
    /// Vidaptive's pacer: at the controller's rate, no drain speed-up, dummy packets.
    Vidaptive(vidaptive::VidaptivePacerConfig),
}

impl PacerConfig {
    /// A configuration mistake, if any.
    pub fn validate(&self) -> Result<(), String> {
        use crate::check_range;
        match self {
            PacerConfig::AceN(c) => {
                check_range("pacer.threshold_packets", c.threshold_packets, 0.0, true, 1e6)?;
                check_range(
                    "pacer.packet_size_bytes",
                    c.packet_size_bytes as f64,
                    100.0,
                    false,
                    9000.0,
                )?;
                check_range(
                    "pacer.additive_step_packets",
                    c.additive_step_packets,
                    0.0,
                    false,
                    1e6,
                )?;
                check_range("pacer.alpha", c.alpha, 0.0, true, 1.0)?;
                check_range("pacer.capacity_smoothing", c.capacity_smoothing, 0.0, false, 1.0)?;
                check_range(
                    "pacer.standing_rtt_fraction",
                    c.standing_rtt_fraction,
                    0.0,
                    false,
                    1.0,
                )?;
                check_range("pacer.initial_bucket_ms", c.initial_bucket_ms, 0.0, true, 60_000.0)?;
                check_range("pacer.min_rtt_window_ms", c.min_rtt_window_ms, 0.0, true, 1e7)
            }
            PacerConfig::LeakyBucket(c) => {
                check_range("pacer.burst_interval_ms", c.burst_interval_ms, 0.0, false, 60_000.0)?;
                check_range("pacer.max_debt_ms", c.max_debt_ms, 0.0, true, 60_000.0)?;
                check_range("pacer.queue_time_limit_ms", c.queue_time_limit_ms, 0.0, false, 1e7)?;
                check_range(
                    "pacer.hold_back_window_ms",
                    c.hold_back_window_ms,
                    0.0,
                    false,
                    1000.0,
                )?;
                check_range("pacer.hold_back_packets", c.hold_back_packets, 0.0, true, 1e6)
            }
            PacerConfig::Vidaptive(c) => {
                crate::check_range("pacer.max_debt_ms", c.max_debt_ms, 0.0, true, 60_000.0)?;
                c.dummy.validate()
            }
            _ => Ok(()),
        }
    }

    /// The pacer this config describes, starting at `now`.
    pub fn build(&self, now: Timestamp) -> Box<dyn Pacer> {
        match self {
            PacerConfig::LeakyBucket(c) => {
                Box::new(leaky_bucket::LeakyBucketPacer::new(c.clone(), now))
            }
            PacerConfig::None {} => Box::new(unpaced::Unpaced::new(now)),
            PacerConfig::AceN(c) => Box::new(ace_n::AceNPacer::new(c.clone(), now)),
            PacerConfig::Vidaptive(c) => Box::new(vidaptive::VidaptivePacer::new(c.clone(), now)),
        }
    }
}
