//! Copa (Arun and Balakrishnan, NSDI '18): a delay-based, window-based congestion controller
//! that steers its window towards the rate `1 / (delta x d_q)`, where `d_q` is the queueing
//! delay it measures.
//!
//! Sluice follows Copa's reference implementation, genericCC's `markoviancc.cc` with
//! `rtt-window.cc` and `estimators.cc` (commit 25fa626, the one Vidaptive reuses, §4 of its
//! paper; later commits only fix an iterator bug), run as its README does, with `do_ss`; the
//! paper's and mvfst's (`quic/congestion_control/Copa.cpp`) variants are options of
//! [`CopaConfig`]. The reference counts packets; Sluice keeps the window in bytes and scales
//! every per-ACK step by `acked bytes / MSS` (MSS: a full packet on the wire, 1200 B payload +
//! 60 B headers = 1260 B), so a 200 B padding packet's ACK moves the window 200/1260 of what a
//! full packet's does (the reference never sees small packets).
//!
//! **ACKs.** An ACK is one received packet of a transport feedback report, processed in
//! arrival order ([`TransportPacketsFeedback::received_by_arrival`]), with its own RTT sample
//! ([`PacketResult::rtt`], from its own arrival time). The time of an ACK, for every window and
//! period below, is the packet's arrival time in the receiver's clock (only differences
//! matter): it is what the reference's ACK time is under per-packet ACKs, up to the constant
//! return-path delay, and batching reports every 20-50 ms does not collapse it. It is forced
//! to be non-decreasing (reordered arrivals take the latest time seen).
//!
//! **RTT filters** (genericCC `RTTWindow::new_rtt_sample`; the paper §2):
//! * srtt: EWMA with gain 1/16 per ACK, the first sample sets it.
//! * RTTmin: the minimum RTT over the last `max(10 s, 20 x RTTmin)` (genericCC; the paper and
//!   mvfst use 10 s; the two differ only when RTTmin exceeds 500 ms).
//! * RTTstanding: the minimum RTT over the ACKs of the last `srtt / 2` (capped at the RTTmin
//!   window), the paper's and genericCC's "unjittered RTT".
//! * `d_q = RTTstanding - RTTmin`; target window `W* = RTTstanding / (delta x d_q)` packets,
//!   infinite when `d_q = 0` (genericCC `update_intersend_time`; the paper §2: the target
//!   rate `1 / (delta x d_q)` against the current rate `W / RTTstanding`).
//!
//! **Window** (genericCC `update_intersend_time`, per ACK):
//! * Start: `W = 10` packets (genericCC `num_probe_pkts`; mvfst's initial window). The window
//!   does not move during the first `2 x 10 - 1 = 19` ACKs ("first two RTTs are for probing");
//!   Sluice counts them in MSS, so small packets count for their share.
//! * Slow start (genericCC with `do_ss`, as its README runs Copa): `W += 1` per ACK until
//!   `W >= W*` after the increase; this is the paper's "double once per RTT until the current
//!   rate exceeds the target". (Without `do_ss` genericCC grows only while `W*` is infinite
//!   and aborts on an assertion the first time it is finite; that mode cannot run.)
//! * Steady state: `W += v / (delta x W)` if `W < W*`, else `W -= v / (delta x W)` (W in
//!   packets).
//! * Velocity `v`: once per period (genericCC: the latest RTT sample; mvfst: srtt), the net
//!   direction of the period (ups minus downs, in MSS) is compared with the previous one: the
//!   same sign doubles `v`; otherwise `v = 1` and the remembered direction flips (genericCC
//!   treats a zero net as a change too, and its first period after slow start is empty, so it
//!   always resets `v` and flips). Then, on every ACK, `v` halves if `v > delta x W`, and
//!   `v >= 1`. mvfst and the paper double only once the direction has stayed the same for 3
//!   periods ([`CopaConfig::velocity_same_direction_periods`]).
//! * `W >= 2` packets (genericCC; mvfst's minimum window).
//! * Loss (genericCC `ReduceOnLoss`, commit d223989; not in the paper): the ACKs and losses
//!   are counted over windows of 2 latest RTTs; when a window closes (the first ACK more than
//!   2 RTTs after the previous close, once it counted more than 20 packets) and more than 30 %
//!   of its packets were lost, `W *= 0.7` (once per window, in slow start too). A packet
//!   reported lost (`receive_time: None`) is counted at the next ACK, as genericCC discovers a
//!   loss at the ACK after the hole. (The shared notes' "10 % over one RTT" does not match
//!   the code; it is a configuration of the same fields.)
//!
//! **Outputs**: `congestion_window = W`; `target_rate = encoder_rate = W / srtt` (Copa's own
//! srtt: the "CC rate" Vidaptive gives its encoder, §3.1); `pacing_rate = 2 x W /
//! RTTstanding` (genericCC's inter-send time `0.5 x RTTstanding / W`; the paper paces at
//! `2 x cwnd / RTTstanding` too; Vidaptive paces at `W / srtt`, gain 1 on the smoothed RTT);
//! no padding, no probe clusters, no timer. Before the first RTT sample the rates use an
//! initial RTT of 100 ms (QUIC's `kInitialRttMs` in Chromium/quiche; genericCC has none and
//! sends its first window unpaced). [`CcSignals::queuing_delay`] is `d_q`. Pacing at twice
//! the window's rate relies on per-packet ACK clocking: with transport feedback every 20 ms,
//! each report frees ~20 ms of window at once and the pacer sends it at twice the link rate;
//! in the closed-loop test below that raises the mean queue at 12 Mbps from ~2.4 ms
//! (per-packet feedback) to ~8 ms.
//!
//! **Competitive mode** (the paper's mode for competing with buffer-filling flows,
//! genericCC's `auto:` configuration; off by default, as in genericCC's other configurations
//! and Vidaptive): the flow stays in the default mode (`delta` = the configured one) while
//! the minimum RTT over the last `4 x srtt` is below `RTTmin + 0.1 x (max RTT over the last
//! 4 x srtt - RTTmin)`, i.e. the queue was nearly empty at least once (strictly below, as in
//! genericCC: a perfectly constant RTT, or a single sample, counts as competitive);
//! otherwise `1 / delta` grows by 1 per RTT and `delta` doubles on a loss (genericCC passes
//! no RTT to its loss call, so every ACK that reveals a loss doubles it), `delta` never above
//! the configured one.
//!
//! **The papers' changes** are wrappers in their own modules, each built from its option of
//! [`CopaConfig`]: MAE's pre-reaction signal ([`super::copa_pre_reaction`],
//! `pre_reaction_queuing_delay_ms`) and Co-RTV's two changes ([`super::copa_bottleneck`],
//! `bottleneck_feedback`). Copa offers them three hooks and no more: a per-ACK view of its
//! state ([`Copa::on_feedback_per_ack`]), a hold on window decreases
//! ([`Copa::set_decrease_hold`]) and a restart of the window ([`Copa::restart_window`]).
//!
//! **Left out**: the other genericCC utility modes (pFabric, bounded delay, TCP cooperation);
//! mvfst's immediate velocity reset when the per-ACK direction flips while `v > 1`, its
//! cwnd-comparison direction and its slow start doubling once per srtt; any reaction to
//! timeouts (genericCC's `onTimeout` and `onDupACK` do nothing); application-limited
//! detection (neither reference has one: the window keeps growing while the application
//! sends less, which is the behaviour Vidaptive's dummy packets address).

use super::copa_bottleneck::CopaBottleneck;
use super::copa_pre_reaction::CopaPreReaction;
use super::rtt::{StandingRtt, WindowedMin};
use super::window_limits::{self, MAX_RTT_SAMPLE, MAX_WINDOW_BYTES, MIN_RTT_SAMPLE, TIME_LIMIT_US};
use super::window_rate as rate;
use super::{
    CcSignals, CongestionController, NetworkControlUpdate, PacketResult, ProbeClusterConfig,
    SentPacket, TransportPacketsFeedback,
};
use crate::columns::Columns;
use crate::finite_or;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};

/// Which RTT estimate a rule uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CopaRtt {
    /// The newest ACK's RTT sample (genericCC's `get_latest_rtt`).
    Latest,
    /// Copa's smoothed RTT (gain `srtt_gain` per ACK).
    Smoothed,
    /// RTTstanding.
    Standing,
    /// RTTmin.
    Min,
}

/// Copa's settings. The defaults are genericCC's (commit 25fa626, the code Vidaptive reuses;
/// Vidaptive's own pacing, gain 1 on the smoothed RTT, is an option); the paper's and
/// mvfst's variants are options too (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CopaConfig {
    /// Delay sensitivity: the target rate is `1 / (delta x d_q)` packets per second, the
    /// equilibrium queue about `1 / delta` packets. 0.5: genericCC's `default_delta` (its
    /// default mode resets delta to it on every ACK, even under `constant_delta:`) and the
    /// paper's default; mvfst uses 0.05 (`deltaParam_`).
    pub delta: f64,
    /// One packet in the reference's packet counts: a full packet on the wire (Sluice's
    /// 1200 B payload + 60 B headers). Every per-ACK step is scaled by acked bytes / this.
    pub mss_bytes: i64,
    /// Initial window, in packets (genericCC `num_probe_pkts` = 10; mvfst `initCwndInMss`).
    pub initial_window_packets: f64,
    /// Minimum window, in packets (genericCC `max(2, W)`; mvfst `minCwndInMss` = 2).
    pub min_window_packets: f64,
    /// The window does not move until this many packets (in MSS) have been acknowledged
    /// (genericCC: `2 x num_probe_pkts - 1` = 19, "the first two RTTs are for probing";
    /// the paper and mvfst have no such hold: 0).
    pub startup_hold_packets: f64,
    /// RTT assumed for the rates before the first sample (Chromium/quiche QUIC
    /// `kInitialRttMs` = 100 ms; genericCC has none: it sends the first window unpaced).
    pub initial_rtt_ms: f64,
    /// Gain of the smoothed RTT per ACK (genericCC `srtt_alpha` = 1/16; mvfst uses the QUIC
    /// srtt, 1/8 per ACK frame).
    pub srtt_gain: f64,
    /// RTTmin window, at least this long (genericCC `10e3` ms; mvfst `kMinRTTWindowLength`
    /// 10 s; the paper: 10 s).
    pub min_rtt_window_ms: f64,
    /// ... and at least this many RTTmin (genericCC: `max(10 s, 20 x RTTmin)`, followed
    /// here as Vidaptive reuses genericCC; 0: the paper's and mvfst's fixed 10 s). The two
    /// differ only for RTTmin above 500 ms.
    pub min_rtt_window_rtts: f64,
    /// RTTstanding is the minimum over the ACKs of the last `fraction x srtt` (genericCC,
    /// mvfst and the paper: 0.5).
    pub standing_rtt_fraction: f64,
    /// Length of a velocity period (genericCC: the latest RTT sample; mvfst: srtt).
    pub velocity_period_rtt: CopaRtt,
    /// The velocity doubles at the end of a period once the direction has been the same as
    /// the previous period's this many times in a row (genericCC: 1, i.e. two consecutive
    /// periods; the paper and mvfst: 3).
    pub velocity_same_direction_periods: u32,
    /// Pacing rate = gain x W / the `pacing_rtt` (genericCC and the paper: 2 on RTTstanding;
    /// mvfst: 2 on srtt; Vidaptive: 1 on srtt).
    pub pacing_gain: f64,
    /// The RTT the pacing rate divides by (genericCC: RTTstanding).
    pub pacing_rtt: CopaRtt,
    /// Multiplicative decrease on heavy loss (genericCC `ReduceOnLoss`, not in the paper nor
    /// mvfst).
    pub loss_reduction: bool,
    /// Loss rate over a loss window above which the window is cut (genericCC: 0.3).
    pub loss_rate_threshold: f64,
    /// Length of a loss window in latest RTTs (genericCC: 2).
    pub loss_window_rtts: f64,
    /// A loss window closes only after more than this many packets, in MSS (genericCC: 20).
    pub loss_min_packets: f64,
    /// Factor applied to the window on a cut (genericCC: 0.7).
    pub loss_decrease_factor: f64,
    /// Competitive mode (the paper's mode for competing with buffer-filling flows; genericCC
    /// only with `auto:`, as in its README's example `do_ss:auto:0.5`): off by default, as
    /// in genericCC's other modes and in Vidaptive.
    pub competitive_mode: bool,
    /// MAE's pre-reaction on Copa (MAE §5.2, Table 1): report a drop coming when the queuing
    /// delay `d_q` exceeds this many ms, and the end of it (`underuse_at`) when an ACK moves
    /// the window up again (`d_q` below Copa's switch point `1 / (delta x rate)`). MAE leaves
    /// the threshold open; `None` (default): no signal. Copa's own rules never read it
    /// ([`super::copa_pre_reaction`]).
    pub pre_reaction_queuing_delay_ms: Option<f64>,
    /// Co-RTV's changes (§III-C) driven by a bottleneck's reports
    /// ([`super::copa_bottleneck`]); `None` (default): Copa as its reference code, reports
    /// ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck_feedback: Option<CopaBottleneckFeedback>,
}

/// The settings of Co-RTV's two changes to Copa ([`super::copa_bottleneck`], Co-RTV §III-C).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CopaBottleneckFeedback {
    /// (b): set the rate to the bottleneck's `Bw` when it reports a new drop.
    pub rate_on_drop: bool,
    /// (a): the queuing delay `d_q` up to which a window decrease is held (brief A10: 10 ms).
    pub hold_rtt_rise_ms: f64,
    /// (a): "nearly unchanged" queue: the last two reports differ by at most this share of
    /// the older one (brief A10: 10 %) ...
    pub hold_queue_change: f64,
    /// ... or by at most this many bytes (two full packets), so an empty queue counts.
    pub hold_queue_slack_bytes: i64,
}

impl Default for CopaBottleneckFeedback {
    fn default() -> Self {
        CopaBottleneckFeedback {
            rate_on_drop: true,
            hold_rtt_rise_ms: 10.0,
            hold_queue_change: 0.1,
            hold_queue_slack_bytes: 2 * 1264,
        }
    }
}

impl Default for CopaConfig {
    fn default() -> Self {
        CopaConfig {
            delta: 0.5,
            mss_bytes: crate::packetizer::DEFAULT_MAX_PAYLOAD
                + crate::packet::PACKET_OVERHEAD.as_bytes(),
            initial_window_packets: 10.0,
            min_window_packets: 2.0,
            startup_hold_packets: 19.0,
            initial_rtt_ms: 100.0,
            srtt_gain: 1.0 / 16.0,
            min_rtt_window_ms: 10_000.0,
            min_rtt_window_rtts: 20.0,
            standing_rtt_fraction: 0.5,
            velocity_period_rtt: CopaRtt::Latest,
            velocity_same_direction_periods: 1,
            pacing_gain: 2.0,
            pacing_rtt: CopaRtt::Standing,
            loss_reduction: true,
            loss_rate_threshold: 0.3,
            loss_window_rtts: 2.0,
            loss_min_packets: 20.0,
            loss_decrease_factor: 0.7,
            competitive_mode: false,
            bottleneck_feedback: None,
            pre_reaction_queuing_delay_ms: None,
        }
    }
}

impl CopaConfig {
    /// A configuration mistake in the settings MAE and Co-RTV add, if any (config paths
    /// under `cc`).
    pub fn validate(&self) -> Result<(), String> {
        use crate::check_range;
        check_range("cc.mss_bytes", self.mss_bytes as f64, 100.0, false, 9000.0)?;
        check_range("cc.delta", self.delta, 0.0, true, 100.0)?;
        check_range("cc.pacing_gain", self.pacing_gain, 0.0, true, 100.0)?;
        check_range("cc.initial_window_packets", self.initial_window_packets, 1.0, false, 1e6)?;
        check_range("cc.min_window_packets", self.min_window_packets, 1.0, false, 1e6)?;
        check_range("cc.srtt_gain", self.srtt_gain, 0.0, true, 1.0)?;
        check_range("cc.loss_decrease_factor", self.loss_decrease_factor, 0.0, true, 1.0)?;
        check_range("cc.loss_rate_threshold", self.loss_rate_threshold, 0.0, false, 1.0)?;
        check_range("cc.standing_rtt_fraction", self.standing_rtt_fraction, 0.0, false, 1.0)?;
        if let Some(ms) = self.pre_reaction_queuing_delay_ms {
            check_range("cc.pre_reaction_queuing_delay_ms", ms, 0.0, true, 60_000.0)?;
        }
        if let Some(f) = &self.bottleneck_feedback {
            check_range(
                "cc.bottleneck_feedback.hold_rtt_rise_ms",
                f.hold_rtt_rise_ms,
                0.0,
                false,
                60_000.0,
            )?;
            check_range(
                "cc.bottleneck_feedback.hold_queue_change",
                f.hold_queue_change,
                0.0,
                false,
                1e6,
            )?;
            if f.hold_queue_slack_bytes < 0 {
                return Err(format!(
                    "cc.bottleneck_feedback.hold_queue_slack_bytes must be >= 0, got {}",
                    f.hold_queue_slack_bytes
                ));
            }
        }
        Ok(())
    }

    /// Copa with the papers' changes this configuration asks for: Co-RTV's around MAE's
    /// around Copa, each only when its option is set.
    pub fn build(&self, now: Timestamp) -> Box<dyn CongestionController> {
        let copa = Copa::new(self.clone(), now);
        let threshold = self.pre_reaction_queuing_delay_ms.filter(|t| *t > 0.0);
        match (threshold, self.bottleneck_feedback.clone()) {
            (None, None) => Box::new(copa),
            (Some(t), None) => Box::new(CopaPreReaction::new(copa, t)),
            (None, Some(f)) => Box::new(CopaBottleneck::new(copa, f)),
            (Some(t), Some(f)) => Box::new(CopaBottleneck::new(CopaPreReaction::new(copa, t), f)),
        }
    }
}

/// Competitive mode: the queue counts as nearly empty below RTTmin + this fraction of the
/// recent RTT range (genericCC `RTTWindow::is_copa`: 0.1).
const COMPETITIVE_EMPTY_FRACTION: f64 = 0.1;
/// Competitive mode: the recent RTT range spans this many srtt (genericCC `is_copa_min` and
/// `is_copa_max` windows: 4).
const COMPETITIVE_WINDOW_SRTTS: f64 = 4.0;

/// Copa's state; [`CopaConfig::build`] builds it with the papers' wrappers.
#[derive(Clone, Debug)]
pub struct Copa {
    config: CopaConfig,
    /// The configuration's MSS, at least one byte.
    mss: f64,
    /// The window in bytes (fractional: per-ACK steps are often below one byte).
    window: f64,
    slow_start: bool,
    /// Packets (in MSS) acknowledged so far, for the start-up hold.
    acked_packets: f64,
    // RTT filters.
    srtt_us: Option<f64>,
    latest_rtt: Option<TimeDelta>,
    min_rtt: WindowedMin,
    standing: StandingRtt,
    standing_rtt: Option<TimeDelta>,
    /// Time (receiver clock) of the latest ACK.
    last_ack: Option<Timestamp>,
    // Velocity.
    velocity: f64,
    /// Direction remembered from the previous period: +1 or -1 (genericCC `prev_update_dir`).
    direction: i8,
    /// Ups minus downs (in MSS) of the current period (genericCC `update_dir`).
    net_direction: f64,
    same_direction_count: u32,
    /// Whether the last ACK moved the window up.
    last_step_up: bool,
    period_start: Option<Timestamp>,
    // Loss windows.
    loss_window_start: Option<Timestamp>,
    loss_window_lost: f64,
    loss_window_total: f64,
    /// Lost packets (in MSS) reported but not yet counted (counted at the next ACK).
    pending_lost: f64,
    // Delta and competitive mode.
    delta: f64,
    competitive: bool,
    recent_min: WindowedMin,
    /// Windowed minimum of the negated samples: the recent maximum.
    recent_max_neg: WindowedMin,
    delta_updated_at: Option<Timestamp>,
    delta_loss_at: Option<Timestamp>,
    /// While set, a window decrease is skipped when `d_q` is at most this
    /// ([`Copa::set_decrease_hold`]).
    decrease_hold: Option<TimeDelta>,
    /// Window decreases held back so far.
    held_decreases: u64,
}

impl Copa {
    /// Copa with `config`, in slow start at its initial window (`now` is not used).
    pub fn new(config: CopaConfig, _now: Timestamp) -> Self {
        let mss = config.mss_bytes.max(1) as f64;
        let delta = finite_or(config.delta, 0.5).max(1e-9);
        let mut copa = Copa {
            mss,
            window: 0.0,
            slow_start: true,
            acked_packets: 0.0,
            srtt_us: None,
            latest_rtt: None,
            min_rtt: WindowedMin::default(),
            standing: StandingRtt::default(),
            standing_rtt: None,
            last_ack: None,
            velocity: 1.0,
            direction: 1,
            net_direction: 0.0,
            same_direction_count: 0,
            last_step_up: false,
            period_start: None,
            loss_window_start: None,
            loss_window_lost: 0.0,
            loss_window_total: 0.0,
            pending_lost: 0.0,
            delta,
            competitive: false,
            recent_min: WindowedMin::default(),
            recent_max_neg: WindowedMin::default(),
            delta_updated_at: None,
            delta_loss_at: None,
            decrease_hold: None,
            held_decreases: 0,
            config,
        };
        copa.window = copa.clamp_window(copa.config.initial_window_packets * mss);
        copa
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &CopaConfig {
        &self.config
    }
    /// The congestion window.
    pub fn window(&self) -> DataSize {
        DataSize::from_bytes(self.window.round() as i64)
    }
    /// The velocity parameter `v`.
    pub fn velocity(&self) -> f64 {
        self.velocity
    }
    /// The delta in use (the configured one unless competitive mode moved it).
    pub fn delta(&self) -> f64 {
        self.delta
    }
    /// Whether Copa is still in slow start (`W += 1` per ACK until `W >= W*`).
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }
    /// Whether the latest ACK moved the window up (`W < W*`).
    pub fn last_ack_stepped_up(&self) -> bool {
        self.last_step_up
    }
    /// The RTT the window's rates divide by: the smoothed RTT, or the initial RTT before a
    /// sample.
    pub fn rate_rtt(&self) -> TimeDelta {
        self.smoothed_rtt().unwrap_or_else(|| self.initial_rtt())
    }
    /// Window decreases [`set_decrease_hold`](Self::set_decrease_hold) held back so far.
    pub fn held_decreases(&self) -> u64 {
        self.held_decreases
    }

    /// From now on, until changed: an ACK that would step the window down leaves it when the
    /// queuing delay `d_q` is at most `hold` (`None`: Copa's own rule). Co-RTV's change (a).
    pub fn set_decrease_hold(&mut self, hold: Option<TimeDelta>) {
        self.decrease_hold = hold;
    }

    /// Sets the window to `bytes` (within its bounds), ends slow start and restarts the
    /// velocity at 1. Co-RTV's change (b).
    pub fn restart_window(&mut self, bytes: f64) {
        self.window = self.clamp_window(bytes);
        self.slow_start = false;
        self.velocity = 1.0;
    }

    /// [`CongestionController::on_transport_feedback`], calling `after_ack` with Copa's state
    /// after each ACK (a received packet, in arrival order): what a wrapper that reads Copa
    /// per ACK (MAE's pre-reaction) needs.
    pub fn on_feedback_per_ack(
        &mut self,
        feedback: &TransportPacketsFeedback,
        mut after_ack: impl FnMut(&Copa),
    ) {
        for p in feedback.packets.iter().filter(|p| p.receive_time.is_none()) {
            self.pending_lost += p.sent.size.as_bytes().max(0) as f64 / self.mss;
        }
        for p in feedback.received_by_arrival() {
            // A received packet without a sample (not filled in by the sender) cannot move Copa.
            if let PacketResult { receive_time: Some(arrival), rtt: Some(rtt), .. } = p {
                self.last_step_up = false;
                self.on_ack(p.sent.size, arrival, rtt);
                after_ack(self);
            }
        }
    }
    /// Copa's smoothed RTT.
    pub fn smoothed_rtt(&self) -> Option<TimeDelta> {
        self.srtt_us.map(|s| TimeDelta::from_us(s.round() as i64))
    }
    /// RTTmin: the minimum RTT over the last `max(min_rtt_window_ms, min_rtt_window_rtts x
    /// RTTmin)`.
    pub fn min_rtt(&self) -> Option<TimeDelta> {
        self.min_rtt.get()
    }
    /// RTTstanding: the minimum RTT over the ACKs of the last `standing_rtt_fraction x srtt`.
    pub fn standing_rtt(&self) -> Option<TimeDelta> {
        self.standing_rtt
    }
    /// `d_q = RTTstanding - RTTmin`.
    pub fn queuing_delay(&self) -> Option<TimeDelta> {
        let (s, m) = (self.standing_rtt?, self.min_rtt.get()?);
        Some((s - m).max(TimeDelta::ZERO))
    }
    /// The target window `W*` in bytes (`None`: infinite, no queueing delay or no sample).
    pub fn target_window(&self) -> Option<DataSize> {
        self.target_window_packets()
            .map(|w| DataSize::from_bytes((w * self.mss).min(MAX_WINDOW_BYTES).round() as i64))
    }

    fn target_window_packets(&self) -> Option<f64> {
        let d_q = self.queuing_delay()?;
        if d_q <= TimeDelta::ZERO {
            return None;
        }
        let standing = self.standing_rtt?;
        Some(standing.as_us() as f64 / (self.delta * d_q.as_us() as f64))
    }

    fn clamp_window(&self, bytes: f64) -> f64 {
        window_limits::clamp_window(bytes, self.config.min_window_packets, self.mss)
    }

    fn initial_rtt(&self) -> TimeDelta {
        window_limits::initial_rtt(self.config.initial_rtt_ms)
    }

    fn rtt_of(&self, kind: CopaRtt) -> Option<TimeDelta> {
        match kind {
            CopaRtt::Latest => self.latest_rtt,
            CopaRtt::Smoothed => self.smoothed_rtt(),
            CopaRtt::Standing => self.standing_rtt,
            CopaRtt::Min => self.min_rtt.get(),
        }
    }

    /// One ACK: a received packet of `size` that arrived at `arrival` (receiver clock) with
    /// RTT sample `rtt`.
    fn on_ack(&mut self, size: DataSize, arrival: Timestamp, rtt: TimeDelta) {
        let t = Timestamp::from_us(arrival.as_us().clamp(-TIME_LIMIT_US, TIME_LIMIT_US));
        let t = self.last_ack.map_or(t, |l| t.max(l));
        self.last_ack = Some(t);
        let rtt = rtt.clamp(MIN_RTT_SAMPLE, MAX_RTT_SAMPLE);
        let acked = size.as_bytes().max(0) as f64 / self.mss;

        self.update_rtt_filters(rtt, t);
        self.update_delta(false, rtt, t);
        if self.acked_packets >= self.config.startup_hold_packets {
            self.update_window(acked, t);
        }
        self.acked_packets += acked;

        let mut reduce = false;
        if self.pending_lost > 0.0 {
            let lost = std::mem::take(&mut self.pending_lost);
            reduce |= self.count_loss_window(lost, lost, rtt, t);
            self.update_delta(true, TimeDelta::ZERO, t);
        }
        reduce |= self.count_loss_window(0.0, acked, rtt, t);
        if reduce && self.config.loss_reduction {
            let factor = finite_or(self.config.loss_decrease_factor, 0.7);
            self.window = self.clamp_window(self.window * factor);
        }
    }

    /// srtt, latest, RTTmin, RTTstanding and the competitive mode's recent range
    /// (genericCC `RTTWindow::new_rtt_sample`).
    fn update_rtt_filters(&mut self, rtt: TimeDelta, t: Timestamp) {
        let r = rtt.as_us() as f64;
        let gain = finite_or(self.config.srtt_gain, 1.0 / 16.0).clamp(0.0, 1.0);
        let srtt = self.srtt_us.map_or(r, |s| s + gain * (r - s));
        self.srtt_us = Some(srtt);
        self.latest_rtt = Some(rtt);
        let srtt = TimeDelta::from_us(srtt.round() as i64);

        // Window lengths from the minimum before this sample (as genericCC).
        let base = TimeDelta::from_ms_f64(
            finite_or(self.config.min_rtt_window_ms, 10_000.0).clamp(0.0, 1e9),
        );
        let max_time = match self.min_rtt.get() {
            Some(m) => {
                let k = finite_or(self.config.min_rtt_window_rtts, 0.0).clamp(0.0, 1e6);
                base.max(m * k)
            }
            None => base,
        };
        self.min_rtt.update(rtt, t, max_time);
        let fraction = finite_or(self.config.standing_rtt_fraction, 0.5).clamp(0.0, 1e6);
        let span = (srtt * fraction).min(max_time);
        self.standing.push(t, rtt);
        self.standing_rtt = self.standing.update(t, span);

        if self.config.competitive_mode {
            let span = (srtt * COMPETITIVE_WINDOW_SRTTS).min(max_time);
            self.recent_min.update(rtt, t, span);
            self.recent_max_neg.update(-rtt, t, span);
        }
    }

    /// genericCC `update_delta`: the configured delta, unless competitive mode is on and the
    /// queue has not been nearly empty recently.
    fn update_delta(&mut self, lost: bool, rtt: TimeDelta, t: Timestamp) {
        let default = finite_or(self.config.delta, 0.5).max(1e-9);
        if !self.config.competitive_mode {
            self.delta = default;
            return;
        }
        let (Some(min), Some(recent_min), Some(recent_max_neg)) =
            (self.min_rtt.get(), self.recent_min.get(), self.recent_max_neg.get())
        else {
            return;
        };
        let range = (-recent_max_neg - min).as_us() as f64;
        let threshold = min.as_us() as f64 + COMPETITIVE_EMPTY_FRACTION * range;
        self.competitive = (recent_min.as_us() as f64) >= threshold;
        let elapsed = |since: Option<Timestamp>| since.is_none_or(|s| s + rtt < t);
        if !self.competitive {
            if self.delta_updated_at.is_none() || elapsed(self.delta_loss_at) {
                self.delta = default;
                self.delta_updated_at = Some(t);
            }
        } else {
            if self.delta_updated_at.is_none() {
                self.delta = default;
            }
            if lost && elapsed(self.delta_loss_at) {
                self.delta *= 2.0;
                self.delta_loss_at = Some(t);
            } else if elapsed(self.delta_updated_at) {
                self.delta = 1.0 / (1.0 / self.delta + 1.0);
                self.delta_updated_at = Some(t);
            }
            self.delta = self.delta.min(default);
        }
    }

    /// genericCC `update_intersend_time`: slow start or one steady-state step.
    fn update_window(&mut self, acked: f64, t: Timestamp) {
        let target = self.target_window_packets().unwrap_or(f64::INFINITY);
        if self.slow_start {
            self.window = self.clamp_window(self.window + acked * self.mss);
            if self.window / self.mss >= target {
                self.slow_start = false;
            }
            return;
        }
        let period = self.rtt_of(self.config.velocity_period_rtt).unwrap_or(TimeDelta::ZERO);
        if self.period_start.is_none_or(|s| s + period < t) {
            self.close_velocity_period(t);
        }
        let w = self.window / self.mss;
        if self.velocity > self.delta * w {
            self.velocity /= 2.0;
        }
        self.velocity = self.velocity.max(1.0);
        let step = acked * self.velocity / (self.delta * w) * self.mss;
        self.last_step_up = w < target;
        if w >= target && self.holds_decrease() {
            self.held_decreases += 1;
            return;
        }
        if w < target {
            self.net_direction += acked;
            self.window = self.clamp_window(self.window + step);
        } else {
            self.net_direction -= acked;
            self.window = self.clamp_window(self.window - step);
        }
    }

    /// A decrease held by [`set_decrease_hold`](Self::set_decrease_hold).
    fn holds_decrease(&self) -> bool {
        self.decrease_hold.is_some_and(|hold| self.queuing_delay().is_some_and(|d| d <= hold))
    }

    fn close_velocity_period(&mut self, t: Timestamp) {
        let same = (self.net_direction > 0.0 && self.direction > 0)
            || (self.net_direction < 0.0 && self.direction < 0);
        if same {
            self.same_direction_count = self.same_direction_count.saturating_add(1);
            if self.same_direction_count >= self.config.velocity_same_direction_periods {
                // Bounded by the halving above delta x W on every ACK.
                self.velocity = (self.velocity * 2.0).min(MAX_WINDOW_BYTES);
            }
        } else {
            self.velocity = 1.0;
            self.direction = -self.direction;
            self.same_direction_count = 0;
        }
        self.period_start = Some(t);
        self.net_direction = 0.0;
    }

    /// genericCC `ReduceOnLoss::update`: counts `total` packets of which `lost` were lost;
    /// true when a loss window closes with a loss rate above the threshold.
    fn count_loss_window(&mut self, lost: f64, total: f64, rtt: TimeDelta, t: Timestamp) -> bool {
        self.loss_window_lost += lost;
        self.loss_window_total += total;
        let k = finite_or(self.config.loss_window_rtts, 2.0).clamp(0.0, 1e6);
        let closes = self.loss_window_start.is_none_or(|s| t > s + rtt * k)
            && self.loss_window_total > self.config.loss_min_packets;
        if !closes {
            return false;
        }
        let rate = self.loss_window_lost / self.loss_window_total;
        self.loss_window_start = Some(t);
        self.loss_window_lost = 0.0;
        self.loss_window_total = 0.0;
        rate > self.config.loss_rate_threshold
    }
}

impl CongestionController for Copa {
    fn on_packet_sent(&mut self, _packet: &SentPacket, _now: Timestamp) {}

    fn on_transport_feedback(&mut self, feedback: &TransportPacketsFeedback, _now: Timestamp) {
        self.on_feedback_per_ack(feedback, |_| {});
    }

    fn handle_timeout(&mut self, _now: Timestamp) {}

    fn poll_timeout(&self) -> Timestamp {
        Timestamp::INFINITY
    }

    fn update(&self) -> NetworkControlUpdate {
        let target = rate(self.window, self.rate_rtt());
        let pacing_rtt = self.rtt_of(self.config.pacing_rtt).unwrap_or_else(|| self.initial_rtt());
        let gain = finite_or(self.config.pacing_gain, 2.0).max(0.0);
        NetworkControlUpdate {
            target_rate: target,
            encoder_rate: target,
            cwnd_reduce_ratio: 0.0,
            pacing_rate: rate(self.window * gain, pacing_rtt),
            padding_rate: DataRate::ZERO,
            congestion_window: Some(self.window()),
        }
    }

    fn poll_probe_cluster(&mut self, _now: Timestamp) -> Option<ProbeClusterConfig> {
        None
    }

    fn signals(&self) -> CcSignals {
        CcSignals { queuing_delay: self.queuing_delay(), ..CcSignals::default() }
    }

    fn debug_columns(&self, out: &mut Columns) {
        out.size("cc_cwnd_bytes", Some(self.window()));
        out.float("cc_velocity", Some(self.velocity));
        out.delta("cc_srtt_us", self.smoothed_rtt());
        out.delta("cc_min_rtt_us", self.min_rtt());
        out.delta("cc_standing_rtt_us", self.standing_rtt());
        out.delta("cc_queuing_delay_us", self.queuing_delay());
        out.size("cc_target_window_bytes", self.target_window());
        out.bool("cc_slow_start", self.slow_start);
        out.float("cc_delta", Some(self.delta));
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cc::rtt::RttEstimator;
    use crate::rng::Rng;
    use std::collections::VecDeque;

    pub(crate) const MSS: i64 = 1260;
    /// The receiver's clock runs 7 s ahead of the sender's: only differences may matter.
    const RX_OFFSET_US: i64 = 7_000_000;

    pub(crate) fn result(
        seq: u64,
        size: i64,
        arrival_us: Option<i64>,
        rtt_us: i64,
    ) -> PacketResult {
        PacketResult {
            sent: SentPacket {
                transport_seq: seq,
                send_time: Timestamp::from_us(arrival_us.unwrap_or(0).saturating_sub(rtt_us / 2)),
                size: DataSize::from_bytes(size),
                probe_cluster_id: None,
                is_padding: size < MSS,
                data_in_flight: DataSize::ZERO,
            },
            receive_time: arrival_us.map(|a| Timestamp::from_us(a.saturating_add(RX_OFFSET_US))),
            rtt: arrival_us.map(|_| TimeDelta::from_us(rtt_us)),
        }
    }

    pub(crate) fn report(packets: Vec<PacketResult>) -> TransportPacketsFeedback {
        TransportPacketsFeedback {
            feedback_time: Timestamp::from_ms(1),
            packets,
            prior_in_flight: DataSize::ZERO,
            data_in_flight: DataSize::ZERO,
            rtt: None,
            smoothed_rtt: None,
        }
    }

    /// Copa in steady state with a window of `w` packets and no start-up hold.
    pub(crate) fn steady_copa(config: CopaConfig, w: f64) -> Copa {
        let mut copa =
            Copa::new(CopaConfig { startup_hold_packets: 0.0, ..config }, Timestamp::ZERO);
        copa.slow_start = false;
        copa.window = w * MSS as f64;
        copa
    }

    pub(crate) fn set_velocity(copa: &mut Copa, v: f64) {
        copa.velocity = v;
    }

    /// Feeds ACKs and losses one report at a time.
    struct Driver {
        copa: Copa,
        seq: u64,
    }

    impl Driver {
        fn new(config: CopaConfig) -> Self {
            Driver { copa: Copa::new(config, Timestamp::ZERO), seq: 0 }
        }
        /// A driver already in steady state with a window of `w` packets.
        fn steady(config: CopaConfig, w: f64) -> Self {
            Driver { copa: steady_copa(config, w), seq: 0 }
        }
        fn ack_sized(&mut self, at_ms: f64, rtt_ms: f64, size: i64) {
            let p = result(
                self.seq,
                size,
                Some((at_ms * 1000.0).round() as i64),
                (rtt_ms * 1000.0).round() as i64,
            );
            self.seq = self.seq.wrapping_add(1);
            self.copa.on_transport_feedback(&report(vec![p]), Timestamp::ZERO);
        }
        fn ack(&mut self, at_ms: f64, rtt_ms: f64) {
            self.ack_sized(at_ms, rtt_ms, MSS);
        }
        fn lose(&mut self, n: usize) {
            let pkts = (0..n)
                .map(|_| {
                    self.seq = self.seq.wrapping_add(1);
                    result(self.seq, MSS, None, 0)
                })
                .collect();
            self.copa.on_transport_feedback(&report(pkts), Timestamp::ZERO);
        }
        fn w_bytes(&self) -> f64 {
            self.copa.window
        }
    }

    #[test]
    fn config_defaults_and_json() {
        let c = CopaConfig::default();
        assert_eq!(c.delta, 0.5);
        assert_eq!(c.mss_bytes, 1260);
        assert_eq!(c.initial_window_packets, 10.0);
        assert_eq!(c.min_window_packets, 2.0);
        assert_eq!(c.startup_hold_packets, 19.0);
        assert_eq!(c.initial_rtt_ms, 100.0);
        assert_eq!(c.srtt_gain, 1.0 / 16.0);
        assert_eq!((c.min_rtt_window_ms, c.min_rtt_window_rtts), (10_000.0, 20.0));
        assert_eq!(c.standing_rtt_fraction, 0.5);
        assert_eq!(c.velocity_period_rtt, CopaRtt::Latest);
        assert_eq!(c.velocity_same_direction_periods, 1);
        assert_eq!((c.pacing_gain, c.pacing_rtt), (2.0, CopaRtt::Standing));
        assert!(c.loss_reduction);
        assert_eq!(
            (c.loss_rate_threshold, c.loss_window_rtts, c.loss_min_packets),
            (0.3, 2.0, 20.0)
        );
        assert_eq!(c.loss_decrease_factor, 0.7);
        assert!(!c.competitive_mode);

        let c: CopaConfig = serde_json::from_str(r#"{"delta": 0.05}"#).unwrap();
        assert_eq!(c, CopaConfig { delta: 0.05, ..CopaConfig::default() });
        let c: CopaConfig =
            serde_json::from_str(r#"{"pacing_gain": 1.0, "pacing_rtt": "smoothed"}"#).unwrap();
        assert_eq!(c.pacing_rtt, CopaRtt::Smoothed);
        let back: CopaConfig = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        let err = serde_json::from_str::<CopaConfig>(r#"{"delta": 0.5, "detla": 1}"#);
        assert!(err.is_err_and(|e| e.to_string().contains("unknown field")));
    }

    #[test]
    fn min_rtt_expires_after_its_window() {
        let mut d = Driver::new(CopaConfig::default());
        d.ack(0.0, 40.0);
        d.ack(5000.0, 60.0);
        assert_eq!(d.copa.min_rtt(), Some(TimeDelta::from_ms(40)));
        // Window max(10 s, 20 x 40 ms) = 10 s: at 10.001 s the 40 ms sample is too old.
        d.ack(10_000.0, 70.0);
        assert_eq!(d.copa.min_rtt(), Some(TimeDelta::from_ms(40)));
        d.ack(10_001.0, 70.0);
        assert_eq!(d.copa.min_rtt(), Some(TimeDelta::from_ms(60)));

        // genericCC's 20 x RTTmin: with a 1 s RTTmin the window is 20 s.
        let mut d = Driver::new(CopaConfig::default());
        d.ack(0.0, 1000.0);
        d.ack(15_000.0, 1200.0);
        assert_eq!(d.copa.min_rtt(), Some(TimeDelta::from_ms(1000)));
        d.ack(20_001.0, 1200.0);
        assert_eq!(d.copa.min_rtt(), Some(TimeDelta::from_ms(1200)));
        // ... and 10 s without it (the paper, mvfst).
        let mut d = Driver::new(CopaConfig { min_rtt_window_rtts: 0.0, ..Default::default() });
        d.ack(0.0, 1000.0);
        d.ack(15_000.0, 1200.0);
        assert_eq!(d.copa.min_rtt(), Some(TimeDelta::from_ms(1200)));
    }

    #[test]
    fn standing_rtt_is_the_min_over_half_srtt_by_arrival() {
        // One report, listed out of arrival order; arrivals 0, 10, 30, 40 ms with RTTs 40,
        // 50, 55, 56 ms. srtt (gain 1/16): 40, 40.625, 41.523, 42.428 ms; srtt / 2 =
        // 21.2 ms, so at the newest arrival (40 ms) the window holds the arrivals at 30 and
        // 40 ms: RTTstanding = 55 ms (the 50 ms sample arrived 30 ms earlier).
        let mut c = Copa::new(CopaConfig::default(), Timestamp::ZERO);
        let pkts = vec![
            result(3, MSS, Some(40_000), 56_000),
            result(1, MSS, Some(10_000), 50_000),
            result(2, MSS, Some(30_000), 55_000),
            result(0, MSS, Some(0), 40_000),
        ];
        c.on_transport_feedback(&report(pkts), Timestamp::from_ms(500));
        assert_eq!(c.smoothed_rtt(), Some(TimeDelta::from_us(42_428)));
        assert_eq!(c.standing_rtt(), Some(TimeDelta::from_ms(55)));
        assert_eq!(c.min_rtt(), Some(TimeDelta::from_ms(40)));
        assert_eq!(c.signals().queuing_delay, Some(TimeDelta::from_ms(15)));
        // W* = 55 / (0.5 x 15) = 7.33 packets.
        assert_eq!(c.target_window(), Some(DataSize::from_bytes(9240)));
    }

    #[test]
    fn startup_hold_then_slow_start_one_mss_per_ack() {
        let mut d = Driver::new(CopaConfig::default());
        // The first 2 x 10 - 1 = 19 ACKs do not move the window (genericCC).
        for i in 0..19 {
            d.ack(i as f64, 50.0);
            assert_eq!(d.copa.window(), DataSize::from_bytes(12_600), "ACK {}", i + 1);
        }
        // Then + 1 MSS per full-size ACK while W* is infinite (no queueing delay).
        for i in 19..25 {
            d.ack(i as f64, 50.0);
            assert_eq!(d.copa.target_window(), None);
            assert!(d.copa.in_slow_start());
        }
        assert_eq!(d.copa.window(), DataSize::from_bytes(16 * MSS));
        // 30 ms later the RTT is 60 ms: srtt = 50.625 ms, the 50 ms samples have left the
        // srtt / 2 window, d_q = 10 ms, W* = 60 / (0.5 x 10) = 12 packets. The window takes
        // its step (17 packets) and, being above W*, leaves slow start.
        d.ack(54.0, 60.0);
        assert_eq!(d.copa.target_window(), Some(DataSize::from_bytes(12 * MSS)));
        assert_eq!(d.copa.window(), DataSize::from_bytes(17 * MSS));
        assert!(!d.copa.in_slow_start());
        // In steady state W > W*: it decreases by v / (delta x W) = 1 / 8.5 packet.
        d.ack(55.0, 60.0);
        assert!((d.w_bytes() - (17.0 - 1.0 / 8.5) * 1260.0).abs() < 1e-6, "{}", d.w_bytes());
    }

    #[test]
    fn small_acks_move_the_window_by_their_share() {
        // The start-up hold counts MSS: 200 B ACKs take 121 ACKs (> 19 x 1260 / 200).
        let mut d = Driver::new(CopaConfig::default());
        for i in 0..120 {
            d.ack_sized(i as f64 * 0.1, 50.0, 200);
        }
        assert_eq!(d.copa.window(), DataSize::from_bytes(12_600));
        d.ack_sized(12.0, 50.0, 200);
        assert_eq!(d.copa.window(), DataSize::from_bytes(12_800), "slow start: + 200 B");

        // Steady state, W = 30 packets, W < W* (no queue): a full ACK adds
        // v / (delta x W) = 1 / 15 packet = 84 B, a 200 B ACK 200/1260 of that.
        let mut full = Driver::steady(CopaConfig::default(), 30.0);
        full.ack(0.0, 50.0);
        let mut small = Driver { copa: full.copa.clone(), seq: 100 };
        let w0 = full.w_bytes();
        full.ack(1.0, 50.0);
        small.ack_sized(1.0, 50.0, 200);
        let full_step = full.w_bytes() - w0;
        let small_step = small.w_bytes() - w0;
        assert!((full_step - 1260.0 / (0.5 * (w0 / 1260.0))).abs() < 1e-9, "{full_step}");
        assert!((small_step / full_step - 200.0 / 1260.0).abs() < 1e-12, "{small_step}");

        // Same for a decrease (W > W*).
        let mut full = Driver::steady(CopaConfig::default(), 30.0);
        full.ack(0.0, 50.0);
        full.ack(100.0, 100.0);
        assert!(full.copa.target_window().is_some_and(|t| t < full.copa.window()));
        let w0 = full.w_bytes();
        let mut small = Driver { copa: full.copa.clone(), seq: 100 };
        full.ack(101.0, 100.0);
        small.ack_sized(101.0, 100.0, 200);
        let ratio = (small.w_bytes() - w0) / (full.w_bytes() - w0);
        assert!(full.w_bytes() < w0 && (ratio - 200.0 / 1260.0).abs() < 1e-12, "{ratio}");
    }

    /// Feeds ACKs every 10 ms with the given RTT and returns, for each velocity period that
    /// closed, (net direction of the closed period, velocity after the close).
    fn run_periods(d: &mut Driver, from_ms: f64, to_ms: f64, rtt_ms: f64) -> Vec<(f64, f64)> {
        let mut closes = Vec::new();
        let mut t = from_ms;
        while t < to_ms {
            let (start, net) = (d.copa.period_start, d.copa.net_direction);
            d.ack(t, rtt_ms);
            if d.copa.period_start != start {
                closes.push((net, d.copa.velocity()));
            }
            t += 10.0;
        }
        closes
    }

    #[test]
    fn velocity_doubles_resets_and_halves() {
        // W = 1000 packets, no queue: every ACK goes up. Periods of one latest RTT (50 ms)
        // close at the first ACK more than 50 ms later: 6 ACKs each.
        let mut d = Driver::steady(CopaConfig::default(), 1000.0);
        let closes = run_periods(&mut d, 0.0, 400.0, 50.0);
        let v: Vec<f64> = closes.iter().map(|c| c.1).collect();
        // The first close ends the empty period after slow start (a "change": v = 1, the
        // remembered direction flips to down); the next one sees up != down (v = 1); then
        // each period in the same direction as the previous one doubles v.
        assert_eq!(v, [1.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0], "{closes:?}");
        assert_eq!(closes[1].0, 6.0);
        // A queue builds (RTT 80 ms, W* = 80 / (0.5 x 30) = 5.3 packets): once a period
        // closes with a net decrease, v is back to 1.
        let closes = run_periods(&mut d, 400.0, 1000.0, 80.0);
        let first_down = closes.iter().position(|c| c.0 < 0.0).unwrap();
        assert_eq!(closes[first_down].1, 1.0, "{closes:?}");
        assert!(closes[first_down + 1].0 < 0.0 && closes[first_down + 1].1 == 2.0);

        // mvfst / the paper: doubling only once the direction repeated 3 times.
        let config = CopaConfig { velocity_same_direction_periods: 3, ..Default::default() };
        let mut d = Driver::steady(config, 1000.0);
        let v: Vec<f64> = run_periods(&mut d, 0.0, 400.0, 50.0).iter().map(|c| c.1).collect();
        assert_eq!(v, [1.0, 1.0, 1.0, 1.0, 2.0, 4.0, 8.0]);

        // Halving: W = 4 packets (delta x W = 2) with v = 4: v halves to 2, and the step is
        // 2 / (0.5 x 4) = 1 packet. Next ACK: delta x W = 2.5 >= 2, v stays, W += 2 / 2.5.
        let mut d = Driver::steady(CopaConfig::default(), 4.0);
        d.copa.velocity = 4.0;
        d.copa.period_start = Some(Timestamp::from_us(RX_OFFSET_US));
        d.ack(0.0, 50.0);
        assert_eq!(d.copa.velocity(), 2.0);
        assert!((d.w_bytes() - 5.0 * 1260.0).abs() < 1e-9);
        d.ack(1.0, 50.0);
        assert_eq!(d.copa.velocity(), 2.0);
        assert!((d.w_bytes() - 5.8 * 1260.0).abs() < 1e-9);
        // v never below 1: with W = 2 packets (delta x W = 1), v = 2 halves to 1 and stays.
        let mut d = Driver::steady(CopaConfig::default(), 2.0);
        d.copa.velocity = 2.0;
        d.copa.period_start = Some(Timestamp::from_us(RX_OFFSET_US));
        d.ack(0.0, 50.0);
        assert_eq!(d.copa.velocity(), 1.0);
    }

    #[test]
    fn window_never_below_two_mss() {
        // RTTmin 50 ms, then a 500 ms standing RTT: W* = 500 / (0.5 x 450) = 2.22 packets.
        // From 3 packets: 3 - 1 / 1.5 = 2.33, then 2.33 - 1 / 1.17 = 1.48 -> 2 packets.
        let mut d = Driver::steady(CopaConfig::default(), 3.0);
        d.ack(0.0, 50.0);
        d.copa.window = 3.0 * 1260.0;
        d.ack(100.0, 500.0);
        assert!((d.w_bytes() - (3.0 - 1.0 / 1.5) * 1260.0).abs() < 1e-9, "{}", d.w_bytes());
        d.ack(101.0, 500.0);
        assert_eq!(d.w_bytes(), 2520.0);
        // delta = 1: W* = 500 / 450 = 1.1 packets; the window sits on the floor.
        let mut d = Driver::steady(CopaConfig { delta: 1.0, ..Default::default() }, 3.0);
        d.ack(0.0, 50.0);
        let mut lowest = f64::INFINITY;
        for i in 0..500 {
            d.ack(100.0 + i as f64, 500.0);
            lowest = lowest.min(d.w_bytes());
        }
        assert_eq!(lowest, 2520.0);
        // A loss cut from 2.5 packets (to 1.75) stops on the floor.
        let mut d = Driver::new(CopaConfig { startup_hold_packets: 1e9, ..Default::default() });
        d.copa.window = 3150.0;
        d.lose(30);
        for i in 0..25 {
            d.ack(i as f64, 50.0);
        }
        assert_eq!(d.copa.window(), DataSize::from_bytes(2520));
    }

    #[test]
    fn heavy_loss_cuts_the_window_once_per_loss_window() {
        // The window is frozen (start-up hold) so that only the loss rule moves it.
        let frozen = CopaConfig { startup_hold_packets: 1e9, ..Default::default() };
        let mut d = Driver::new(frozen.clone());
        // 15 losses are counted at the next ACK; the first loss window closes once it holds
        // more than 20 packets: at the 6th ACK, 15 / 21 = 71 % lost > 30 %: W = 0.7 x 10.
        d.lose(15);
        for i in 0..5 {
            d.ack(i as f64, 50.0);
        }
        assert_eq!(d.copa.window(), DataSize::from_bytes(12_600));
        d.ack(5.0, 50.0);
        assert_eq!(d.copa.window(), DataSize::from_bytes(8820));
        // As much loss within the next 2 RTTs (100 ms): no second cut.
        d.lose(15);
        for i in 0..20 {
            d.ack(10.0 + i as f64, 50.0);
        }
        assert_eq!(d.copa.window(), DataSize::from_bytes(8820));
        // The window closes at the first ACK after 105 ms: 15 / 36 = 42 %: cut again.
        d.ack(200.0, 50.0);
        assert_eq!(d.copa.window(), DataSize::from_bytes(6174));
        // 10 lost of 42 (24 %) when the next window closes (at 305 ms): below 30 %.
        d.lose(10);
        for i in 0..31 {
            d.ack(210.0 + i as f64 * 2.0, 50.0);
        }
        d.ack(305.0, 50.0);
        assert_eq!(d.copa.loss_window_start, Some(Timestamp::from_us(305_000 + RX_OFFSET_US)));
        assert_eq!(d.copa.window(), DataSize::from_bytes(6174));
        // Switched off: no cut.
        let mut d = Driver::new(CopaConfig { loss_reduction: false, ..frozen.clone() });
        d.lose(15);
        for i in 0..6 {
            d.ack(i as f64, 50.0);
        }
        assert_eq!(d.copa.window(), DataSize::from_bytes(12_600));

        // 4 lost in every 60 ms (~12 %, 30 ACKs per block): no cut with genericCC's 30 %;
        // with the notes' variant (10 % over one RTT) exactly one cut per RTT.
        let run = |config: CopaConfig| {
            let mut d = Driver::new(config);
            let mut windows = Vec::new();
            for block in 0..3 {
                d.lose(4);
                for i in 0..30 {
                    d.ack(block as f64 * 60.0 + i as f64, 50.0);
                }
                windows.push(d.copa.window().as_bytes());
            }
            windows
        };
        assert_eq!(run(frozen.clone()), [12_600, 12_600, 12_600]);
        let per_rtt =
            CopaConfig { loss_rate_threshold: 0.1, loss_window_rtts: 1.0, ..frozen.clone() };
        assert_eq!(run(per_rtt), [8820, 6174, 4322]);
    }

    #[test]
    fn outputs_before_and_after_samples() {
        let mut c = Copa::new(CopaConfig::default(), Timestamp::ZERO);
        // Before any sample: 10 packets over the initial 100 ms.
        let u = c.update();
        assert_eq!(u.congestion_window, Some(DataSize::from_bytes(12_600)));
        assert_eq!(u.target_rate, DataRate::from_bps(1_008_000));
        assert_eq!(u.encoder_rate, u.target_rate);
        assert_eq!(u.pacing_rate, DataRate::from_bps(2_016_000));
        assert_eq!(u.padding_rate, DataRate::ZERO);
        assert_eq!(c.signals(), CcSignals::default());
        assert_eq!(c.poll_timeout(), Timestamp::INFINITY);
        assert_eq!(c.poll_probe_cluster(Timestamp::ZERO), None);
        // Empty feedback changes nothing.
        c.on_transport_feedback(&report(Vec::new()), Timestamp::from_ms(10));
        assert_eq!(c.update(), u);
        // One sample of 50 ms: target W / srtt, pacing 2 W / RTTstanding.
        let p = result(0, MSS, Some(0), 50_000);
        c.on_transport_feedback(&report(vec![p]), Timestamp::from_ms(60));
        let u = c.update();
        assert_eq!(u.target_rate, DataRate::from_bps(2_016_000));
        assert_eq!(u.pacing_rate, DataRate::from_bps(4_032_000));
        assert_eq!(c.signals().queuing_delay, Some(TimeDelta::ZERO));
        // Vidaptive's pacing: W / srtt.
        let config =
            CopaConfig { pacing_gain: 1.0, pacing_rtt: CopaRtt::Smoothed, ..CopaConfig::default() };
        let mut v = config.build(Timestamp::ZERO);
        v.on_transport_feedback(&report(vec![p]), Timestamp::from_ms(60));
        assert_eq!(v.update().pacing_rate, v.update().target_rate);

        let mut cols = Columns::default();
        c.debug_columns(&mut cols);
        let names: Vec<&str> = cols.names().collect();
        assert_eq!(
            names,
            [
                "cc_cwnd_bytes",
                "cc_velocity",
                "cc_srtt_us",
                "cc_min_rtt_us",
                "cc_standing_rtt_us",
                "cc_queuing_delay_us",
                "cc_target_window_bytes",
                "cc_slow_start",
                "cc_delta"
            ]
        );
        use crate::columns::Value;
        assert_eq!(cols.get("cc_cwnd_bytes"), Some(&Value::Int(12_600)));
        assert_eq!(cols.get("cc_srtt_us"), Some(&Value::Int(50_000)));
        assert_eq!(cols.get("cc_target_window_bytes"), Some(&Value::Null));
        assert_eq!(cols.get("cc_slow_start"), Some(&Value::Bool(true)));
    }

    #[test]
    fn competitive_mode_moves_delta_only_when_enabled() {
        // RTTmin 50 ms, then a standing queue (RTT 100 ms) for 1.5 s, ACKs every 5 ms.
        let run = |competitive_mode: bool| {
            let config =
                CopaConfig { competitive_mode, startup_hold_packets: 1e9, ..CopaConfig::default() };
            let mut d = Driver::new(config);
            d.ack(0.0, 50.0);
            let mut changes = vec![(0.0, 1.0 / d.copa.delta())];
            for i in 1..300 {
                let t = i as f64 * 5.0;
                d.ack(t, 100.0);
                if 1.0 / d.copa.delta() != changes.last().unwrap().1 {
                    changes.push((t, 1.0 / d.copa.delta()));
                }
            }
            (d, changes)
        };
        let (_, changes) = run(false);
        assert_eq!(changes, [(0.0, 2.0)]);
        let (mut d, changes) = run(true);
        // The first ACK alone has an empty RTT range, which genericCC counts as "not Copa"
        // (strict comparison): competitive, 1 / delta = 2 + 1. The second shows the range
        // 50-100 ms with the minimum at its bottom: default mode, 1 / delta = 2.
        assert_eq!(changes[..2], [(0.0, 3.0), (5.0, 2.0)], "{changes:?}");
        // Competitive once the 50 ms sample has left the last 4 srtt (~400 ms); the first
        // step comes an RTT after the last default-mode update, then 1 / delta += 1 per RTT
        // (every 105 ms at this ACK spacing).
        assert!(changes.len() >= 10, "{changes:?}");
        assert!(changes[2].0 > 490.0 && changes[2].0 < 520.0, "{changes:?}");
        for w in changes[2..].windows(2) {
            assert!((w[1].1 - w[0].1 - 1.0).abs() < 1e-9, "{changes:?}");
            assert!(w[1].0 - w[0].0 > 100.0, "{changes:?}");
        }
        assert!(d.copa.competitive);
        // A loss doubles delta.
        let before = d.copa.delta();
        d.lose(1);
        d.ack(1500.0, 100.0);
        assert!((d.copa.delta() - 2.0 * before).abs() < 1e-12);
        // The queue empties: default mode, delta back to 0.5 once an RTT has passed since
        // the loss.
        for i in 0..10 {
            d.ack(1505.0 + i as f64 * 10.0, 50.0);
        }
        assert!(!d.copa.competitive);
        assert_eq!(d.copa.delta(), 0.5);
    }

    #[test]
    fn hostile_input_never_panics() {
        let mut rng = Rng::new(7);
        let configs = [
            CopaConfig::default(),
            CopaConfig { competitive_mode: true, ..Default::default() },
            CopaConfig {
                delta: 0.0,
                mss_bytes: -5,
                min_window_packets: f64::NAN,
                initial_window_packets: f64::INFINITY,
                srtt_gain: -1.0,
                min_rtt_window_ms: f64::NAN,
                initial_rtt_ms: 0.0,
                pacing_gain: f64::NAN,
                loss_window_rtts: f64::INFINITY,
                loss_min_packets: f64::NAN,
                velocity_same_direction_periods: 0,
                competitive_mode: true,
                ..Default::default()
            },
            // Both papers' wrappers, with the hostile reports below.
            CopaConfig {
                pre_reaction_queuing_delay_ms: Some(1e-9),
                bottleneck_feedback: Some(CopaBottleneckFeedback {
                    hold_rtt_rise_ms: f64::INFINITY,
                    hold_queue_change: f64::NAN,
                    ..Default::default()
                }),
                ..Default::default()
            },
        ];
        let extremes = [0, 1, -1, i64::MAX, i64::MIN, i64::MAX - 1, 1 << 40, -(1 << 40)];
        let pick = |rng: &mut Rng, scale: i64| -> i64 {
            if rng.bernoulli(0.2) {
                extremes[(rng.next_u64() % extremes.len() as u64) as usize]
            } else {
                (rng.uniform() * scale as f64) as i64
            }
        };
        for config in configs {
            let mut c = config.build(Timestamp::ZERO);
            let mut t = 0i64;
            let mut seq = u64::MAX - 50;
            for _ in 0..3000 {
                let n = (rng.next_u64() % 6) as usize;
                let mut packets = Vec::new();
                for _ in 0..n {
                    // Time mostly moves forward, sometimes back, sometimes jumps.
                    t = t.saturating_add(pick(&mut rng, 20_000).saturating_sub(2_000));
                    let lost = rng.bernoulli(0.2);
                    let mut p = result(seq, pick(&mut rng, 1500), Some(t), pick(&mut rng, 300_000));
                    seq = seq.wrapping_add(1);
                    if lost {
                        p.receive_time = None;
                        p.rtt = None;
                    } else if rng.bernoulli(0.05) {
                        p.rtt = None;
                    }
                    packets.push(p);
                }
                let fb = report(packets);
                c.on_transport_feedback(&fb, Timestamp::from_us(t));
                c.on_packet_sent(
                    &fb.packets.first().map_or(result(0, 0, None, 0), |p| *p).sent,
                    Timestamp::ZERO,
                );
                c.handle_timeout(Timestamp::from_us(t));
                if rng.bernoulli(0.3) {
                    let report = crate::packet::BottleneckReport {
                        flow: 0,
                        seq: rng.next_u64(),
                        time: Timestamp::from_us(t),
                        queue: DataSize::from_bytes(pick(&mut rng, 100_000)),
                        rate: Some(DataRate::from_bps(pick(&mut rng, 50_000_000))),
                        drop_from: rng.bernoulli(0.5).then(|| rng.next_u64()),
                    };
                    c.on_bottleneck_report(&report, Timestamp::from_us(t));
                }
                let u = c.update();
                let w = u.congestion_window.unwrap();
                assert!(w >= DataSize::from_bytes(1), "{w:?}");
                assert!(u.target_rate >= DataRate::ZERO && u.pacing_rate >= DataRate::ZERO);
                let _ = c.signals();
                c.debug_columns(&mut Columns::default());
            }
        }
    }

    const ONE_WAY: TimeDelta = TimeDelta::from_ms(25);

    /// One packet sent in the closed loop.
    struct Sent {
        time: Timestamp,
        /// Time it waited in the bottleneck queue.
        queue_delay: TimeDelta,
        cwnd: DataSize,
        in_flight_after: DataSize,
    }

    /// A small fluid model of one bottleneck: a FIFO served at `capacity(t)` (a packet's
    /// service starts at max(send time, previous departure) and lasts size / capacity at
    /// that moment), 25 ms one-way each direction. The sender is backlogged with 1260 B
    /// packets, paced at Copa's pacing rate and sends only while the bytes in flight (sent,
    /// not yet reported) are below the window. The receiver reports every
    /// `feedback_interval` (receiver time) or, if `None`, each packet on arrival; the
    /// sender's RTT estimator gives every packet its own RTT from its own arrival time.
    struct Loop {
        copa: Copa,
        rtt: RttEstimator,
        capacity: fn(Timestamp) -> DataRate,
        feedback_interval: Option<TimeDelta>,
        now: Timestamp,
        seq: u64,
        next_send: Timestamp,
        in_flight: DataSize,
        link_free_at: Timestamp,
        /// Packets on their way to or at the receiver, in arrival order (true time).
        at_receiver: VecDeque<(Timestamp, PacketResult)>,
        /// Reports on their way back: (reaches the sender, packets, hold time).
        to_sender: VecDeque<(Timestamp, Vec<PacketResult>, TimeDelta)>,
        next_report: Timestamp,
        sent: Vec<Sent>,
        /// (true arrival time, size)
        arrivals: Vec<(Timestamp, DataSize)>,
        /// (time, window, queuing delay estimate) after every report.
        windows: Vec<(Timestamp, DataSize, Option<TimeDelta>)>,
    }

    impl Loop {
        fn new(
            config: CopaConfig,
            capacity: fn(Timestamp) -> DataRate,
            feedback_interval: Option<TimeDelta>,
        ) -> Self {
            Loop {
                copa: Copa::new(config, Timestamp::ZERO),
                rtt: RttEstimator::default(),
                capacity,
                feedback_interval,
                now: Timestamp::ZERO,
                seq: 0,
                next_send: Timestamp::ZERO,
                in_flight: DataSize::ZERO,
                link_free_at: Timestamp::ZERO,
                at_receiver: VecDeque::new(),
                to_sender: VecDeque::new(),
                next_report: feedback_interval.map_or(Timestamp::INFINITY, |i| Timestamp::ZERO + i),
                sent: Vec::new(),
                arrivals: Vec::new(),
                windows: Vec::new(),
            }
        }

        fn send(&mut self) {
            let size = DataSize::from_bytes(MSS);
            let u = self.copa.update();
            let sent = SentPacket {
                transport_seq: self.seq,
                send_time: self.now,
                size,
                probe_cluster_id: None,
                is_padding: false,
                data_in_flight: self.in_flight + size,
            };
            self.seq += 1;
            self.copa.on_packet_sent(&sent, self.now);
            self.in_flight += size;
            let start = self.now.max(self.link_free_at);
            let departure = start + size / (self.capacity)(start);
            self.link_free_at = departure;
            let arrival = departure + ONE_WAY;
            let receive_time = Some(Timestamp::from_us(arrival.as_us() + RX_OFFSET_US));
            self.at_receiver.push_back((arrival, PacketResult { sent, receive_time, rtt: None }));
            self.arrivals.push((arrival, size));
            self.sent.push(Sent {
                time: self.now,
                queue_delay: start - self.now,
                cwnd: u.congestion_window.unwrap(),
                in_flight_after: self.in_flight,
            });
            self.next_send = self.now + size / u.pacing_rate;
        }

        /// The receiver reports the packets that arrived by `at` (if any).
        fn make_report(&mut self, at: Timestamp) {
            let mut packets = Vec::new();
            let mut newest = None;
            while self.at_receiver.front().is_some_and(|(a, _)| *a <= at) {
                let (a, p) = self.at_receiver.pop_front().unwrap();
                newest = Some(a);
                packets.push(p);
            }
            if let Some(newest) = newest {
                self.to_sender.push_back((at + ONE_WAY, packets, at - newest));
            }
        }

        fn deliver_report(&mut self, mut packets: Vec<PacketResult>, hold: TimeDelta) {
            let prior = self.in_flight;
            let rtt = self.rtt.on_feedback(&mut packets, hold, self.now);
            for p in &packets {
                self.in_flight -= p.sent.size;
            }
            let fb = TransportPacketsFeedback {
                feedback_time: self.now,
                packets,
                prior_in_flight: prior,
                data_in_flight: self.in_flight,
                rtt,
                smoothed_rtt: self.rtt.smoothed(),
            };
            self.copa.on_transport_feedback(&fb, self.now);
            self.windows.push((self.now, self.copa.window(), self.copa.queuing_delay()));
        }

        fn run_until(&mut self, end: Timestamp) {
            while self.now < end {
                while self.to_sender.front().is_some_and(|r| r.0 <= self.now) {
                    let (_, packets, hold) = self.to_sender.pop_front().unwrap();
                    self.deliver_report(packets, hold);
                }
                match self.feedback_interval {
                    Some(interval) => {
                        if self.now >= self.next_report {
                            self.make_report(self.next_report);
                            self.next_report += interval;
                        }
                    }
                    None => {
                        while let Some(&(a, _)) = self.at_receiver.front() {
                            if a > self.now {
                                break;
                            }
                            self.make_report(a);
                        }
                    }
                }
                let cwnd = self.copa.update().congestion_window.unwrap();
                if self.in_flight < cwnd && self.next_send <= self.now {
                    self.send();
                    continue;
                }
                // Next event: a report reaching the sender, a report leaving the receiver,
                // the pacer (if the window has room).
                let mut next = end;
                if let Some(r) = self.to_sender.front() {
                    next = next.min(r.0);
                }
                match self.feedback_interval {
                    Some(_) => next = next.min(self.next_report),
                    None => {
                        if let Some(&(a, _)) = self.at_receiver.front() {
                            next = next.min(a);
                        }
                    }
                }
                if self.in_flight < cwnd {
                    next = next.min(self.next_send);
                }
                self.now = next.max(self.now);
            }
        }

        fn delivery_rate(&self, from: Timestamp, to: Timestamp) -> DataRate {
            let bytes: DataSize =
                self.arrivals.iter().filter(|(a, _)| *a >= from && *a < to).map(|(_, s)| *s).sum();
            bytes / (to - from)
        }

        fn mean_queue_delay(&self, from: Timestamp, to: Timestamp) -> TimeDelta {
            let q: Vec<TimeDelta> = self
                .sent
                .iter()
                .filter(|s| s.time >= from && s.time < to)
                .map(|s| s.queue_delay)
                .collect();
            q.iter().copied().sum::<TimeDelta>() / q.len().max(1) as i64
        }

        fn check_in_flight(&self) {
            let mss = DataSize::from_bytes(MSS);
            for s in &self.sent {
                assert!(
                    s.in_flight_after <= s.cwnd + mss,
                    "at {:?}: in flight {:?} > window {:?} + 1 packet",
                    s.time,
                    s.in_flight_after,
                    s.cwnd
                );
            }
        }
    }

    fn constant_12(_: Timestamp) -> DataRate {
        DataRate::from_mbps(12)
    }

    fn step_12_to_3(t: Timestamp) -> DataRate {
        if t < Timestamp::from_secs_f64(5.0) {
            DataRate::from_mbps(12)
        } else {
            DataRate::from_mbps(3)
        }
    }

    #[test]
    fn closed_loop_fills_a_constant_link_with_a_small_queue() {
        // 12 Mbps, 50 ms: BDP 60 packets, one packet = 0.84 ms. Copa's equilibrium queue is
        // 1 / delta = 2 packets, around which the window oscillates by a few packets: a few
        // ms with per-packet feedback. With a report every 20 ms the pacer (gain 2) sends each report's freed
        // window, ~20 ms of data, at twice the link rate: up to 10 ms more queue at the end
        // of the burst, ~5 ms on average. Measured (2-8 s): per packet 11.94 Mbps, mean
        // queue 2.36 ms (2.8 packets); 20 ms reports 11.51 Mbps, 8.0 ms (9.5 packets).
        for (interval, bound_ms) in [(Some(TimeDelta::from_ms(20)), 10), (None, 5)] {
            let mut sim = Loop::new(CopaConfig::default(), constant_12, interval);
            let end = Timestamp::from_ms(8000);
            sim.run_until(end);
            sim.check_in_flight();
            let from = Timestamp::from_ms(2000);
            let rate = sim.delivery_rate(from, end);
            let q = sim.mean_queue_delay(from, end);
            let max_q = sim.sent.iter().filter(|s| s.time >= from).map(|s| s.queue_delay).max();
            let msg = format!(
                "feedback {interval:?}: rate after 2 s {:.2} Mbps, mean queueing delay {:.2} ms \
                 ({:.2} packets), max {max_q:?}, final window {:?}",
                rate.as_mbps_f64(),
                q.as_ms_f64(),
                q.as_ms_f64() / 0.84,
                sim.copa.window()
            );
            eprintln!("{msg}");
            assert!(rate.as_mbps_f64() > 12.0 * 0.9 && rate.as_mbps_f64() <= 12.01, "{msg}");
            assert!(q < TimeDelta::from_ms(bound_ms), "{msg}");
        }
    }

    /// Time from the capacity step at 5 s until the first packet that finds less than
    /// 20 ms of queue, and the window then.
    fn adaptation(sim: &Loop) -> (TimeDelta, DataSize) {
        let step = Timestamp::from_ms(5000);
        let s = sim
            .sent
            .iter()
            .find(|s| {
                s.time > step + TimeDelta::from_ms(100) && s.queue_delay < TimeDelta::from_ms(20)
            })
            .expect("the queue never drained");
        (s.time - step, s.cwnd)
    }

    #[test]
    fn closed_loop_adapts_to_a_capacity_drop() {
        // 12 -> 3 Mbps at 5 s: the window (61 packets with per-packet feedback, 85 with
        // 20 ms reports, whose window also covers the feedback delay) is suddenly 4-6 x the
        // new BDP (15 packets); the queue jumps to 150-220 ms and the RTT with it. Copa
        // sheds v / delta packets per RTT with v doubling per RTT (1, 2, 4, ... after the
        // first period, whose direction is mixed): 45-70 excess packets take
        // 2 (2^k - 1) >= 70, k = 5-6 periods of the inflated RTT (200-270 ms, falling).
        // Measured: the queue is under 20 ms 0.67 s after the step per packet, 1.31 s with
        // 20 ms reports: the brief's "within about 1 s" holds only for the former.
        for (interval, bound_ms) in [(None, 1000), (Some(TimeDelta::from_ms(20)), 1500)] {
            let mut sim = Loop::new(CopaConfig::default(), step_12_to_3, interval);
            let end = Timestamp::from_ms(10_000);
            sim.run_until(end);
            sim.check_in_flight();
            let (took, cwnd) = adaptation(&sim);
            let tail = Timestamp::from_ms(7000);
            let q = sim.mean_queue_delay(tail, end);
            let rate = sim.delivery_rate(tail, end);
            let msg = format!(
                "feedback {interval:?}: queue under 20 ms {:.0} ms after the step, window then \
                 {cwnd:?} (3 Mbps x 50 ms = 18750 B); 7-10 s: rate {:.2} Mbps, mean queueing \
                 delay {:.2} ms",
                took.as_ms_f64(),
                rate.as_mbps_f64(),
                q.as_ms_f64()
            );
            eprintln!("{msg}");
            assert!(took <= TimeDelta::from_ms(bound_ms), "{msg}");
            // The window then is back near the new BDP plus the feedback delay's share.
            assert!(cwnd < DataSize::from_bytes(3 * 18_750), "{msg}");
            // At 3 Mbps a packet is 3.4 ms: the equilibrium queue (~2 packets) and, with
            // batched feedback, half a report interval's burst at gain 2 stay below 20 ms.
            assert!(q < TimeDelta::from_ms(20), "{msg}");
            // Utilisation at the small BDP (15 packets): the window swings by ~+-6 packets
            // around its equilibrium (v doubles while the direction holds) and the link
            // idles in the troughs; measured 87 % per packet, 97 % with 20 ms feedback.
            // (RTTmin also keeps the 12 Mbps serialisation time for 10 s: Copa reads
            // 2.5 ms of queue that is the slower link's transmission time.)
            assert!(rate.as_mbps_f64() > 3.0 * 0.8, "{msg}");
        }
    }
}
