//! Congestion control: the [`CongestionController`] trait and the value types it consumes
//! and produces. Controllers are sans-IO: every input carries its time, and the sender polls
//! them for the target rate and for probe clusters.
//!
//! Built-in controllers: [`gcc`] (Google Congestion Control as in libwebrtc's goog_cc).

pub mod gcc;

use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};

/// A packet as the congestion controller sees it when it leaves the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentPacket {
    pub transport_seq: u64,
    pub send_time: Timestamp,
    /// On-wire size.
    pub size: DataSize,
    pub probe_cluster_id: Option<u32>,
    /// True for padding (no media).
    pub is_padding: bool,
    /// Bytes in flight (sent, not yet acknowledged or declared lost) after this send.
    pub data_in_flight: DataSize,
}

/// The fate of one sent packet as reported by transport feedback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketResult {
    pub sent: SentPacket,
    /// Arrival time in the receiver's clock, `None` if reported lost.
    pub receive_time: Option<Timestamp>,
}

/// One transport feedback report matched against the send history.
#[derive(Clone, Debug, PartialEq)]
pub struct TransportPacketsFeedback {
    /// When the report reached the sender.
    pub feedback_time: Timestamp,
    /// Reported packets in transport-sequence order.
    pub packets: Vec<PacketResult>,
    /// Bytes in flight before this report was processed.
    pub prior_in_flight: DataSize,
    /// Bytes in flight after it.
    pub data_in_flight: DataSize,
}

impl TransportPacketsFeedback {
    /// Received packets sorted by arrival time (ties by sequence number).
    pub fn received_by_arrival(&self) -> Vec<PacketResult> {
        let mut v: Vec<PacketResult> =
            self.packets.iter().copied().filter(|p| p.receive_time.is_some()).collect();
        v.sort_by_key(|p| (p.receive_time, p.sent.transport_seq));
        v
    }
    pub fn lost_count(&self) -> usize {
        self.packets.iter().filter(|p| p.receive_time.is_none()).count()
    }
}

/// A request to the pacer to send a probe cluster (libwebrtc's ProbeClusterConfig).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeClusterConfig {
    pub id: u32,
    pub at_time: Timestamp,
    pub target_rate: DataRate,
    /// Minimum duration of the cluster (libwebrtc: 15 ms).
    pub target_duration: TimeDelta,
    /// Minimum number of packets (libwebrtc: 5).
    pub min_probes: u32,
}

/// Over-use detector state (libwebrtc's BandwidthUsage).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BandwidthUsage {
    #[default]
    Normal,
    Underusing,
    Overusing,
}

/// Internal signals a controller exposes for encoder controllers (MAE pre-reaction, ACE)
/// and for plots. Fields a controller does not have stay `None`.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct CcSignals {
    /// The trendline detector's modified trend (slope * min(n,60) * gain).
    pub modified_trend: Option<f64>,
    /// The adaptive over-use threshold.
    pub threshold: Option<f64>,
    pub usage: Option<BandwidthUsage>,
    /// The link-capacity estimate of AIMD rate control, if it has one.
    pub link_capacity: Option<DataRate>,
    /// The acknowledged (throughput) rate.
    pub acknowledged_rate: Option<DataRate>,
    /// Delay-based estimate.
    pub delay_based_rate: Option<DataRate>,
    /// Loss-based estimate.
    pub loss_based_rate: Option<DataRate>,
    /// Whether the sender is currently application limited (ALR).
    pub in_alr: bool,
    /// Smoothed RTT as the controller sees it.
    pub rtt: Option<TimeDelta>,
    /// The rate given to the encoder when it differs from the target (pushback).
    pub encoder_rate: Option<DataRate>,
}

/// A congestion controller driven by send events and transport feedback.
///
/// Every method takes the current time; none reads a clock. `poll_*` results can change
/// after any `on_*`/`handle_timeout` call.
pub trait CongestionController: Send {
    /// A packet left the sender (media, retransmission, padding or probe).
    fn on_packet_sent(&mut self, packet: &SentPacket, now: Timestamp);
    /// Transport feedback arrived and was matched against the send history.
    fn on_transport_feedback(&mut self, feedback: &TransportPacketsFeedback, now: Timestamp);
    /// A new round-trip-time sample (from feedback hold times or receiver reports).
    fn on_rtt_sample(&mut self, rtt: TimeDelta, now: Timestamp);
    /// Periodic processing (libwebrtc calls it every 25 ms); a spurious call does nothing
    /// harmful.
    fn handle_timeout(&mut self, now: Timestamp);
    /// When `handle_timeout` next wants to run.
    fn poll_timeout(&self) -> Timestamp;
    /// The rate the sender should target on the network (pacing, retransmission budget).
    fn target_rate(&self) -> DataRate;
    /// The rate for the encoder: the target, or less while the controller pushes back
    /// (e.g. GCC's congestion window).
    fn encoder_rate(&self) -> DataRate {
        self.target_rate()
    }
    /// Bytes waiting in the pacer (for controllers that count them as outstanding).
    fn on_pacer_queue(&mut self, _queued: DataSize) {}
    /// The next probe cluster the pacer should send, if any.
    fn poll_probe_cluster(&mut self, now: Timestamp) -> Option<ProbeClusterConfig>;
    /// Internal signals for controllers and plots.
    fn signals(&self) -> CcSignals;
}
