//! Congestion control: the [`CongestionController`] trait and the value types it consumes
//! and produces. Controllers are sans-IO: every input carries its time, and after every event
//! the sender reads the controller's [`NetworkControlUpdate`] (target, pacing and padding
//! rates, congestion window) and polls it for probe clusters.
//!
//! Built-in controllers: [`gcc`] (Google Congestion Control as in libwebrtc's goog_cc),
//! [`copa`] (with its paper variants: [`copa_bottleneck`], [`copa_pre_reaction`]), [`rocc`]
//! and [`fdcc`].
//! [`rtt`] is the sender's RTT estimator, whose per-packet samples every controller and
//! pacer shares.

pub mod copa;
pub mod copa_bottleneck;
pub mod copa_pre_reaction;
pub mod fdcc;
pub mod gcc;
pub mod rocc;
pub mod rtt;

use crate::columns::Columns;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};

/// A packet as the congestion controller sees it when it leaves the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentPacket {
    /// Transport-wide sequence number, by which feedback reports the packet.
    pub transport_seq: u64,
    /// When the packet left the sender (the sender's clock).
    pub send_time: Timestamp,
    /// On-wire size.
    pub size: DataSize,
    /// The probe cluster it was sent for ([`ProbeClusterConfig::id`]), if any.
    pub probe_cluster_id: Option<u32>,
    /// True for padding (no media).
    pub is_padding: bool,
    /// Bytes in flight (sent, not yet acknowledged or declared lost) after this send.
    pub data_in_flight: DataSize,
}

/// The fate of one sent packet as reported by transport feedback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketResult {
    /// The packet as it was sent.
    pub sent: SentPacket,
    /// Arrival time in the receiver's clock, `None` if reported lost.
    pub receive_time: Option<Timestamp>,
    /// This packet's round-trip time, from its own arrival time (see [`rtt::RttEstimator`]);
    /// `None` if lost.
    pub rtt: Option<TimeDelta>,
}

impl PacketResult {
    /// Arrival minus send time: the one-way delay plus the (unknown, constant) offset between
    /// the receiver's and the sender's clocks, so only differences between packets mean
    /// anything. `None` if lost.
    pub fn one_way_delay(&self) -> Option<TimeDelta> {
        self.receive_time.map(|r| r - self.sent.send_time)
    }
}

/// One transport feedback report matched against the send history.
#[derive(Clone, Debug, PartialEq)]
pub struct TransportPacketsFeedback {
    /// When the report reached the sender.
    pub feedback_time: Timestamp,
    /// Reported packets in transport-sequence order, each with its own RTT sample.
    pub packets: Vec<PacketResult>,
    /// Bytes in flight before this report was processed.
    pub prior_in_flight: DataSize,
    /// Bytes in flight after it.
    pub data_in_flight: DataSize,
    /// The report's RTT sample (its newest arrival's), if it reported an arrival.
    pub rtt: Option<TimeDelta>,
    /// The sender's smoothed RTT after this report.
    pub smoothed_rtt: Option<TimeDelta>,
}

impl TransportPacketsFeedback {
    /// Received packets sorted by arrival time (ties by sequence number).
    pub fn received_by_arrival(&self) -> Vec<PacketResult> {
        let mut v: Vec<PacketResult> =
            self.packets.iter().copied().filter(|p| p.receive_time.is_some()).collect();
        v.sort_by_key(|p| (p.receive_time, p.sent.transport_seq));
        v
    }
    /// Number of reported packets without an arrival (lost).
    pub fn lost_count(&self) -> usize {
        self.packets.iter().filter(|p| p.receive_time.is_none()).count()
    }
}

/// A request to the pacer to send a probe cluster (libwebrtc's ProbeClusterConfig).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeClusterConfig {
    /// Identifier of the cluster; its packets carry it ([`SentPacket::probe_cluster_id`]).
    pub id: u32,
    /// When the cluster was requested (libwebrtc's `at_time`).
    pub at_time: Timestamp,
    /// The rate to send the cluster's packets at (libwebrtc's `target_data_rate`).
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
    /// Neither over- nor under-using (libwebrtc's `kBwNormal`).
    #[default]
    Normal,
    /// The delay trend is below minus the threshold: queues draining (libwebrtc's
    /// `kBwUnderusing`).
    Underusing,
    /// The delay trend has stayed above the threshold: queues building (libwebrtc's
    /// `kBwOverusing`).
    Overusing,
}

/// A congestion controller's outputs (libwebrtc's NetworkControlUpdate): what the sender
/// does with the network after the controller's latest event.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NetworkControlUpdate {
    /// The rate the sender targets on the network (retransmission budget, the encoder's
    /// basis).
    pub target_rate: DataRate,
    /// The rate for the encoder: the target, or less while the controller pushes back (GCC's
    /// congestion-window pushback with `drop_frame` off).
    pub encoder_rate: DataRate,
    /// The share of the encoder rate the controller would have the encoder shed by dropping
    /// frames (libwebrtc's `TargetTransferRate::cwnd_reduce_ratio`: GCC's congestion-window
    /// pushback in its default `DropFrame` mode reports `(target - pushback) / target` here
    /// and leaves `encoder_rate` at the target); 0 when unused.
    pub cwnd_reduce_ratio: f64,
    /// The rate the pacer releases packets at (the controller's pacing factor applied).
    pub pacing_rate: DataRate,
    /// The rate to fill with padding when no media waits.
    pub padding_rate: DataRate,
    /// Bytes the sender may have in flight (sent and not yet reported); `None`: no window.
    pub congestion_window: Option<DataSize>,
}

/// Controller-independent signals for encoder controllers: the small common set every
/// controller can fill (what it does not have stays `None`). Events are latched with the
/// time of the latest feedback that showed them, so a frame planned after several reports
/// still sees what happened in between.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct CcSignals {
    /// The controller's estimate of the queuing delay at the bottleneck.
    pub queuing_delay: Option<TimeDelta>,
    /// Latest time the controller's "a drop is coming" condition held: MAE's pre-reaction
    /// (§4.2, §5.2), below the controller's own decision threshold.
    pub pre_reaction_at: Option<Timestamp>,
    /// The pre-reaction level after the latest feedback (1 = at the pre-reaction threshold).
    pub pre_reaction_level: Option<f64>,
    /// Latest time the controller decided the path is over-used (congested).
    pub overuse_at: Option<Timestamp>,
    /// Latest time it saw the path under-used (the queue draining).
    pub underuse_at: Option<Timestamp>,
}

/// A congestion controller driven by send events and transport feedback.
///
/// Every method takes the current time; none reads a clock. [`update`](Self::update),
/// [`signals`](Self::signals) and [`poll_probe_cluster`](Self::poll_probe_cluster) can change
/// after any `on_*` or `handle_timeout` call, and only then.
pub trait CongestionController: Send {
    /// A packet left the sender (media, retransmission, padding or probe).
    fn on_packet_sent(&mut self, packet: &SentPacket, now: Timestamp);
    /// Transport feedback arrived and was matched against the send history; its packets
    /// carry their RTT samples.
    fn on_transport_feedback(&mut self, feedback: &TransportPacketsFeedback, now: Timestamp);
    /// Periodic processing (libwebrtc calls it every 25 ms); a spurious call does nothing
    /// harmful.
    fn handle_timeout(&mut self, now: Timestamp);
    /// When `handle_timeout` next wants to run.
    fn poll_timeout(&self) -> Timestamp;
    /// Bytes waiting in the pacer (for controllers that count them as outstanding).
    fn on_pacer_queue(&mut self, _queued: DataSize) {}
    /// A bottleneck node's report (Co-RTV); the default ignores it.
    fn on_bottleneck_report(&mut self, _report: &crate::packet::BottleneckReport, _now: Timestamp) {
    }
    /// The controller's outputs as of its latest event.
    fn update(&self) -> NetworkControlUpdate;
    /// The next probe cluster the pacer should send, if any (each is handed out once).
    fn poll_probe_cluster(&mut self, now: Timestamp) -> Option<ProbeClusterConfig>;
    /// The common signals for encoder controllers.
    fn signals(&self) -> CcSignals;
    /// Controller-specific state for the time series, under `cc_*` names.
    fn debug_columns(&self, _out: &mut Columns) {}
}

/// Numerical limits shared by the window-based controllers (Copa, RoCC), which take RTT
/// samples and arrival times from feedback that may be hostile.
pub(crate) mod window_limits {
    use crate::finite_or;
    use crate::units::TimeDelta;

    /// RTT samples are clamped to [1 us, 1 h]: below, a zero sample would make every ratio
    /// infinite; above, sums of times could overflow.
    pub(crate) const MIN_RTT_SAMPLE: TimeDelta = TimeDelta::from_us(1);
    pub(crate) const MAX_RTT_SAMPLE: TimeDelta = TimeDelta::from_secs(3600);
    /// Arrival times are clamped to +-2^61 us (73 000 years) so that differences never
    /// overflow.
    pub(crate) const TIME_LIMIT_US: i64 = 1 << 61;
    /// Numerical ceiling of the window (1 PB): keeps the window and its rates finite whatever
    /// sizes are reported.
    pub(crate) const MAX_WINDOW_BYTES: f64 = 1e15;

    /// A window of `bytes` kept in [`min_window_packets` packets of `mss`, the ceiling]; a
    /// non-finite window or floor falls back to the floor (2 packets by default).
    pub(crate) fn clamp_window(bytes: f64, min_window_packets: f64, mss: f64) -> f64 {
        let floor = (finite_or(min_window_packets, 2.0) * mss).clamp(1.0, 1e12);
        finite_or(bytes, floor).clamp(floor, MAX_WINDOW_BYTES)
    }

    /// The RTT assumed before the first sample, from the config's `initial_rtt_ms` (100 ms
    /// if not finite), within the sample limits.
    pub(crate) fn initial_rtt(initial_rtt_ms: f64) -> TimeDelta {
        let ms = finite_or(initial_rtt_ms, 100.0);
        TimeDelta::from_ms_f64(ms.clamp(0.001, MAX_RTT_SAMPLE.as_ms_f64()))
    }
}

/// `bytes` per `rtt` as a rate, saturating at 0 (a window-based controller's rate).
pub(crate) fn window_rate(bytes: f64, rtt: TimeDelta) -> DataRate {
    let us = rtt.as_us().max(1) as f64;
    DataRate::from_bps_f64((bytes * 8e6 / us).max(0.0))
}
