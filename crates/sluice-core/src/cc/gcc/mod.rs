//! Google Congestion Control, following libwebrtc's goog_cc (`GoogCcNetworkController`,
//! `DelayBasedBwe`, `SendSideBandwidthEstimation` v1, `ProbeController`, `AlrDetector`,
//! `AcknowledgedBitrateEstimator`; libwebrtc's `modules/congestion_controller/goog_cc/`).
//!
//! Data flow per transport feedback: received packets (sorted by arrival) go through
//! [`inter_arrival`] grouping into the [`trendline`] detector, whose state drives
//! [`aimd_rate_control`] with the [`acknowledged_bitrate`] as throughput; probe packets feed
//! the [`probe_bitrate_estimator`], whose result sets the delay-based estimate directly. The
//! [`loss_based`] controller is capped by the delay-based estimate and the target is the
//! minimum of both. The [`alr_detector`] watches sent bytes; the [`probe_controller`] asks
//! for probe clusters.

pub mod acknowledged_bitrate;
pub mod aimd_rate_control;
pub mod alr_detector;
pub mod congestion_window_pushback;
pub mod inter_arrival;
pub mod loss_based;
pub mod loss_based_v2;
pub mod probe_bitrate_estimator;
pub mod probe_controller;
pub mod trendline;

pub use trendline::TrendlineWindow;

use crate::cc::{
    BandwidthUsage, CcSignals, CongestionController, NetworkControlUpdate, PacketResult,
    ProbeClusterConfig, SentPacket, TransportPacketsFeedback,
};
use crate::columns::Columns;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
pub use acknowledged_bitrate::AckedRateEstimator;
use acknowledged_bitrate::AcknowledgedBitrateEstimator;
use aimd_rate_control::AimdRateControl;
use alr_detector::AlrDetector;
pub use congestion_window_pushback::CongestionWindowConfig;
use congestion_window_pushback::CongestionWindowPushback;
use inter_arrival::InterArrival;
use loss_based::LossBasedControl;
pub use loss_based_v2::LossBasedBweV2Config;
use loss_based_v2::LossBasedState;
use probe_bitrate_estimator::{ProbeBitrateEstimator, ProbeClusterInfo};
pub use probe_controller::ProbeRules;
use probe_controller::{BandwidthLimitedCause, ProbeController, PROBE_DROP_THROUGHPUT_FRACTION};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use trendline::TrendlineEstimator;

/// Process interval (libwebrtc 25 ms).
pub const PROCESS_INTERVAL: TimeDelta = TimeDelta::from_ms(25);
/// Filters reset after this long without feedback (libwebrtc kStreamTimeOut 2 s).
pub const STREAM_TIMEOUT: TimeDelta = TimeDelta::from_secs(2);
/// Loss reports are aggregated over this interval (libwebrtc kLossUpdateInterval 1 s).
pub const LOSS_UPDATE_INTERVAL: TimeDelta = TimeDelta::from_secs(1);
/// Feedback-based RTT: mean of the last this-many per-report maximum RTTs (libwebrtc 32).
pub const FEEDBACK_RTT_WINDOW: usize = 32;

/// GCC configuration. Every field has a default (`#[serde(default)]`); rates serialise as
/// integer bits per second and durations as integer microseconds (the `units` encoding).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GccConfig {
    /// Start rate (libwebrtc 300 kbps).
    pub start_rate: DataRate,
    /// Minimum target (libwebrtc 5 kbps).
    pub min_rate: DataRate,
    /// Maximum target. libwebrtc uses 30 Mbps; the default here is 200 Mbps as in the ACE
    /// and MAE forks (cloud gaming).
    pub max_rate: DataRate,
    /// Trendline window: 20 groups (libwebrtc), or a time window (ACE 200 ms, MAE 100 ms).
    pub trendline_window: TrendlineWindow,
    /// Pacing rate = pacing_factor x target (goog_cc's pacer config). libwebrtc's default is
    /// 2.5 (kDefaultPaceMultiplier, ACE's WebRTC-B); video senders use 1.1 (the
    /// WebRTC-Video-Pacing field trial), the default here.
    pub pacing_factor: f64,
    /// Start-up and further exponential probing (libwebrtc: on).
    pub probing: bool,
    /// Periodic probing at 2x every 5 s while application limited. Off, as in libwebrtc for
    /// camera video: `EnablePeriodicAlrProbing` is only asked for by screenshare streams with
    /// ALR probing settings (video_send_stream_impl.cc; rate_control_settings.h `alr_probing`
    /// false).
    pub alr_probing: bool,
    /// Allow the recovery probe after a large drop outside ALR (libwebrtc's rapid-recovery
    /// experiment; off by default as in libwebrtc).
    pub rapid_recovery_probing: bool,
    /// Which libwebrtc's probing rules apply: `"m119"` (default) or `"m156"`, Chromium 156's
    /// (no probe while over- or under-using or loss-limited, probe results floored near the
    /// acknowledged rate; [`ProbeRules`]). Left out of a serialised config when M119's.
    #[serde(skip_serializing_if = "ProbeRules::is_m119")]
    pub probe_rules: ProbeRules,
    /// Sluice's outage-recovery probing, not libwebrtc's (off by default): once the estimate
    /// has collapsed below 5 % of its rate before, probe every 5 s from twice the estimate
    /// towards that rate ([`ProbeController::with_outage_recovery`]).
    pub outage_recovery_probing: bool,
    /// RTT assumed until samples arrive (libwebrtc 200 ms).
    pub default_rtt: TimeDelta,
    /// Congestion-window pushback (Chrome's default `WebRTC-CongestionWindow` field trial,
    /// in its `DropFrame` mode unless configured otherwise); `null` turns it off.
    pub congestion_window: Option<CongestionWindowConfig>,
    /// Throughput estimator behind the acknowledged rate (libwebrtc's current default is the
    /// robust one).
    pub acked_rate_estimator: AckedRateEstimator,
    /// LossBasedBweV2 with M119's defaults; `enabled: false` leaves the classic loss rule of
    /// libwebrtc up to M109 (see [`loss_based`]).
    pub loss_based_v2: LossBasedBweV2Config,
    /// MAE's pre-reaction (MAE §5.2, §6.5): report a drop coming when the modified trend
    /// exceeds `r` x GCC's adaptive over-use threshold, `r` being this ratio. `None`
    /// (default): no pre-reaction signal. GCC's own decisions never use it.
    ///
    /// `r` is a share of GCC's *full* threshold. The paper's scaling factor `s` is not: "For
    /// GCC, we first set the overuse threshold to half of its original value. We later test
    /// the scaling factor over the threshold that the current network trend must exceed to
    /// trigger buffer adjustment" (MAE §6.5), so `s` multiplies the halved threshold and
    /// `r = s / 2` ([`pre_reaction_ratio_from_scaling_factor`]). "MAE selects 1" is `r = 0.5`
    /// (the `mae-latch` and `mae-timeout` schemes); Fig. 23's 0.5 is `r = 0.25`. The authors'
    /// artifact tightens when `trend / (0.5 x threshold) > 2`, i.e. `s = 2`, `r = 1` (the
    /// `mae` scheme).
    pub pre_reaction_ratio: Option<f64>,
    /// The resolution of the send times GCC reads, in microseconds; 0 (the default): exact.
    /// libwebrtc's transport stamps a sent packet in whole milliseconds
    /// (`rtc::SentPacket::send_time_ms`, from `rtc::TimeMillis()`): 1000 models it.
    pub send_time_resolution_us: i64,
    /// The resolution of the arrival times GCC reads, in microseconds; 0 (the default):
    /// exact. Transport-wide feedback carries arrival deltas in 250 us ticks, each rounded
    /// to the nearest (transport_feedback.cc `kDeltaTick`): 250 models it, rounding each
    /// arrival to the nearest tick of the simulation's clock. The live runtime's feedback on
    /// the wire has that resolution already.
    pub arrival_time_resolution_us: i64,
}

impl GccConfig {
    /// A configuration mistake in the settings MAE adds, if any (config paths under `cc`).
    pub fn validate(&self) -> Result<(), String> {
        use crate::check_range;
        check_range("cc.pacing_factor", self.pacing_factor, 0.1, false, 100.0)?;
        let max_bps = crate::limits::MAX_RATE_BPS as f64;
        let rate = |r: DataRate| r.as_bps() as f64;
        check_range("cc.min_rate", rate(self.min_rate), 0.0, false, max_bps)?;
        check_range("cc.max_rate", rate(self.max_rate), 0.0, true, max_bps)?;
        check_range("cc.start_rate", rate(self.start_rate), 0.0, true, max_bps)?;
        if self.min_rate > self.max_rate {
            return Err(format!(
                "cc.min_rate ({} bps) must not be above cc.max_rate ({} bps)",
                self.min_rate.as_bps(),
                self.max_rate.as_bps()
            ));
        }
        match self.trendline_window {
            TrendlineWindow::Packets(n) => {
                check_range("cc.trendline_window.count", n as f64, 2.0, false, 10_000.0)?
            }
            TrendlineWindow::Time(d) | TrendlineWindow::TimeMaeCode(d) => {
                check_range("cc.trendline_window.window_ms", d.as_ms_f64(), 0.0, true, 60_000.0)?
            }
        }
        check_range("cc.default_rtt", self.default_rtt.as_us() as f64, 0.0, true, 6e7)?;
        let us = |v: i64| v as f64;
        check_range(
            "cc.send_time_resolution_us",
            us(self.send_time_resolution_us),
            0.0,
            false,
            1e6,
        )?;
        check_range(
            "cc.arrival_time_resolution_us",
            us(self.arrival_time_resolution_us),
            0.0,
            false,
            1e6,
        )?;
        if let Some(r) = self.pre_reaction_ratio {
            crate::check_range("cc.pre_reaction_ratio", r, 0.0, true, 10.0)?;
        }
        let v2 = &self.loss_based_v2;
        if v2.enabled {
            // libwebrtc switches the estimator off when its config is not valid (a warning in
            // its log); a user's setting is refused here instead of silently running GCC
            // without it.
            if let Some(p) = v2.problems().first() {
                return Err(format!(
                    "cc.loss_based_v2: {p} (an invalid setting would switch the loss-based \
                     estimator off; set cc.loss_based_v2.enabled=false for that)"
                ));
            }
            // Each loss report runs this many Newton steps: beyond a few hundred a run takes
            // hours (libwebrtc's default is 1).
            check_range(
                "cc.loss_based_v2.newton_iterations",
                v2.newton_iterations as f64,
                1.0,
                false,
                MAX_NEWTON_ITERATIONS as f64,
            )?;
        }
        Ok(())
    }
}

/// MAE §6.5's scaling factor `s` (over GCC's threshold halved) as the share `r` of GCC's full
/// threshold that [`GccConfig::pre_reaction_ratio`] takes: `r = s / 2`.
pub fn pre_reaction_ratio_from_scaling_factor(s: f64) -> f64 {
    s * MAE_HALVED_THRESHOLD
}

/// Sluice's bound on `cc.loss_based_v2.newton_iterations` (libwebrtc's default: 1).
pub const MAX_NEWTON_ITERATIONS: u32 = 100;

/// MAE §6.5: "we first set the overuse threshold to half of its original value".
pub const MAE_HALVED_THRESHOLD: f64 = 0.5;

impl Default for GccConfig {
    fn default() -> Self {
        GccConfig {
            start_rate: DataRate::from_kbps(300),
            min_rate: DataRate::from_kbps(5),
            max_rate: DataRate::from_mbps(200),
            trendline_window: TrendlineWindow::default(),
            pacing_factor: 1.1,
            probing: true,
            alr_probing: false,
            rapid_recovery_probing: false,
            probe_rules: ProbeRules::M119,
            outage_recovery_probing: false,
            default_rtt: TimeDelta::from_ms(200),
            acked_rate_estimator: AckedRateEstimator::Robust,
            congestion_window: Some(CongestionWindowConfig::default()),
            loss_based_v2: LossBasedBweV2Config::default(),
            pre_reaction_ratio: None,
            send_time_resolution_us: 0,
            arrival_time_resolution_us: 0,
        }
    }
}

/// Google Congestion Control (delay-based trendline + AIMD, loss-based v1, probing, ALR).
#[derive(Clone, Debug)]
pub struct Gcc {
    config: GccConfig,
    // Delay-based.
    inter_arrival: InterArrival,
    trendline: TrendlineEstimator,
    last_seen_packet: Option<Timestamp>,
    aimd: AimdRateControl,
    // Throughput and ALR.
    acked: AcknowledgedBitrateEstimator,
    alr: AlrDetector,
    previously_in_alr: bool,
    // Loss-based.
    loss: LossBasedControl,
    lost_since_update: u64,
    expected_since_update: u64,
    next_loss_update: Option<Timestamp>,
    // Probing.
    probe_controller: ProbeController,
    probe_estimator: ProbeBitrateEstimator,
    issued_clusters: BTreeMap<u32, ProbeClusterInfo>,
    // RTT.
    rtt: TimeDelta,
    have_rtt_sample: bool,
    feedback_max_rtts: VecDeque<TimeDelta>,
    // Encoder pushback.
    pushback: Option<CongestionWindowPushback>,
    /// The latest probe result (for the time series).
    last_probe_result: Option<DataRate>,
    // Latched detector events (feedback times), for encoder controllers.
    overuse_at: Option<Timestamp>,
    underuse_at: Option<Timestamp>,
    pre_reaction_at: Option<Timestamp>,
    // Output.
    next_process: Timestamp,
    last_target: DataRate,
}

impl Gcc {
    /// GCC with `config`, at the start rate (clamped to the min and max rates); with probing
    /// on, the start-up probe clusters are queued at `now`.
    pub fn new(config: GccConfig, now: Timestamp) -> Self {
        let min = config.min_rate;
        let max = config.max_rate.max(min);
        let start = config.start_rate.clamp(min, max);
        let mut aimd = AimdRateControl::new(min, max, start);
        aimd.set_rtt(config.default_rtt);
        let mut loss = LossBasedControl::new(min, max, start, config.loss_based_v2.clone());
        loss.set_rtt(config.default_rtt);
        let mut probe_controller = ProbeController::new(
            config.probing,
            config.alr_probing,
            config.rapid_recovery_probing,
            start,
            max,
        )
        .with_outage_recovery(config.outage_recovery_probing)
        .with_rules(config.probe_rules);
        probe_controller.start(now);
        Gcc {
            inter_arrival: InterArrival::new(),
            trendline: TrendlineEstimator::new(config.trendline_window)
                .with_pre_reaction(config.pre_reaction_ratio),
            last_seen_packet: None,
            aimd,
            acked: AcknowledgedBitrateEstimator::with_kind(config.acked_rate_estimator),
            alr: AlrDetector::new(start),
            previously_in_alr: false,
            loss,
            lost_since_update: 0,
            expected_since_update: 0,
            next_loss_update: None,
            probe_controller,
            probe_estimator: ProbeBitrateEstimator::new(),
            issued_clusters: BTreeMap::new(),
            rtt: config.default_rtt,
            have_rtt_sample: false,
            feedback_max_rtts: VecDeque::new(),
            pushback: config
                .congestion_window
                .clone()
                .map(|c| CongestionWindowPushback::new(c, start)),
            last_probe_result: None,
            overuse_at: None,
            underuse_at: None,
            pre_reaction_at: None,
            next_process: now + PROCESS_INTERVAL,
            last_target: start,
            config,
        }
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &GccConfig {
        &self.config
    }
    /// The delay-based (AIMD) estimate.
    pub fn delay_based_rate(&self) -> DataRate {
        self.aimd.estimate()
    }
    /// The loss-based estimate (capped by the delay-based one).
    pub fn loss_based_rate(&self) -> DataRate {
        self.loss.target()
    }

    fn set_rtt(&mut self, rtt: TimeDelta) {
        self.rtt = rtt;
        self.aimd.set_rtt(rtt);
        self.loss.set_rtt(rtt);
    }

    /// The target rate: the delay-based estimate capped by the loss-based one.
    fn target(&self) -> DataRate {
        self.aimd
            .estimate()
            .min(self.loss.target())
            .clamp(self.config.min_rate, self.config.max_rate.max(self.config.min_rate))
    }

    /// Runs the received packets through grouping and the trendline detector, then updates
    /// the AIMD estimate. Returns (updated, from_probe, recovered_from_overuse).
    fn delay_based_update(
        &mut self,
        received: &[PacketResult],
        acked: Option<DataRate>,
        probe: Option<DataRate>,
        at: Timestamp,
    ) -> (bool, bool, bool) {
        let mut prev_state = self.trendline.state();
        let mut recovered = false;
        for p in received {
            let Some(rx) = p.receive_time else { continue };
            if self.last_seen_packet.is_none_or(|l| at - l > STREAM_TIMEOUT) {
                self.inter_arrival.reset();
                self.trendline = TrendlineEstimator::new(self.config.trendline_window)
                    .with_pre_reaction(self.config.pre_reaction_ratio);
            }
            self.last_seen_packet = Some(at);
            if let Some(d) =
                self.inter_arrival.compute_deltas(p.sent.send_time, rx, at, p.sent.size)
            {
                self.trendline.update(d.arrival_delta, d.send_delta, rx);
            }
            let s = self.trendline.state();
            if prev_state == BandwidthUsage::Underusing && s == BandwidthUsage::Normal {
                recovered = true;
            }
            match s {
                BandwidthUsage::Overusing => self.overuse_at = Some(at),
                BandwidthUsage::Underusing => self.underuse_at = Some(at),
                BandwidthUsage::Normal => {}
            }
            if self.trendline.pre_reacted() {
                self.pre_reaction_at = Some(at);
            }
            prev_state = s;
        }
        let state = self.trendline.state();
        if state == BandwidthUsage::Overusing {
            match acked {
                Some(a) if self.aimd.time_to_reduce_further(at, a) => {
                    self.aimd.update(state, Some(a), at);
                    (true, false, recovered)
                }
                None if self.aimd.initial_time_to_reduce_further(at) => {
                    // Over-use before any acknowledged rate: halve.
                    let half = self.aimd.estimate() / 2;
                    self.aimd.set_estimate(half, at);
                    (true, false, recovered)
                }
                _ => (false, false, recovered),
            }
        } else if let Some(p) = probe {
            self.aimd.set_estimate(p, at);
            (true, true, recovered)
        } else {
            self.aimd.update(state, acked, at);
            (self.aimd.valid_estimate(), false, recovered)
        }
    }

    /// The smallest of the recent per-feedback max RTTs (the pushback's data window).
    fn min_feedback_max_rtt(&self) -> Option<TimeDelta> {
        self.feedback_max_rtts.iter().copied().min()
    }

    fn maybe_trigger_network_changed(&mut self, now: Timestamp) {
        let target = self.target();
        // libwebrtc updates the congestion-window pushback on every network update.
        if let Some(p) = &mut self.pushback {
            p.update(target, self.config.min_rate);
        }
        // libwebrtc hands the probe controller the estimate and its cause whenever either,
        // the loss, the RTT or the pushback changed; only M156's rules read the cause, so
        // under M119's a call with an unchanged target would change nothing.
        let m156 = self.config.probe_rules == ProbeRules::M156;
        let cause = if m156 {
            self.bandwidth_limited_cause(now)
        } else {
            BandwidthLimitedCause::DelayBased
        };
        if target != self.last_target || cause != self.probe_controller.cause() {
            if target != self.last_target {
                self.last_target = target;
                self.alr.set_estimated_bitrate(target);
            }
            self.probe_controller.set_estimated_bitrate(target, cause, now);
        }
    }

    /// What limits the estimate (goog_cc's `GetBandwidthLimitedCause`).
    fn bandwidth_limited_cause(&self, now: Timestamp) -> BandwidthLimitedCause {
        if self.trendline.state() != BandwidthUsage::Normal {
            return BandwidthLimitedCause::DelayIncreased;
        }
        if self.loss.is_rtt_above_limit(now) {
            return BandwidthLimitedCause::RttBackoff;
        }
        match self.loss.state() {
            LossBasedState::Decreasing | LossBasedState::IncreaseUsingPadding => {
                BandwidthLimitedCause::LossLimited
            }
            LossBasedState::Increasing => BandwidthLimitedCause::LossLimitedIncreasing,
            LossBasedState::DelayBasedEstimate => BandwidthLimitedCause::DelayBased,
        }
    }
}

impl Gcc {
    /// `feedback` as libwebrtc's GCC would read it: send and arrival times at the configured
    /// resolutions (the feedback itself when both are exact).
    fn at_resolution<'a>(
        &self,
        feedback: &'a TransportPacketsFeedback,
    ) -> std::borrow::Cow<'a, TransportPacketsFeedback> {
        let (send, arrival) =
            (self.config.send_time_resolution_us, self.config.arrival_time_resolution_us);
        if send <= 0 && arrival <= 0 {
            return std::borrow::Cow::Borrowed(feedback);
        }
        let mut f = feedback.clone();
        for p in &mut f.packets {
            p.sent.send_time = p.sent.send_time.round_down_to(TimeDelta::from_us(send));
            p.receive_time = p.receive_time.map(|t| t.round_to(TimeDelta::from_us(arrival)));
        }
        std::borrow::Cow::Owned(f)
    }
}

impl CongestionController for Gcc {
    fn on_packet_sent(&mut self, packet: &SentPacket, now: Timestamp) {
        let packet = &SentPacket {
            send_time: packet
                .send_time
                .round_down_to(TimeDelta::from_us(self.config.send_time_resolution_us)),
            ..*packet
        };
        self.alr.on_bytes_sent(packet.size, packet.send_time);
        self.loss.on_packet_sent(now);
        // With pushback, every sent packet is a network update (libwebrtc's OnSentPacket).
        if let Some(p) = &mut self.pushback {
            p.set_outstanding(packet.data_in_flight);
            self.maybe_trigger_network_changed(packet.send_time);
        }
    }

    fn on_pacer_queue(&mut self, queued: DataSize) {
        if let Some(p) = &mut self.pushback {
            p.set_pacer_queue(queued);
        }
    }

    fn on_transport_feedback(&mut self, feedback: &TransportPacketsFeedback, _now: Timestamp) {
        let feedback = &*self.at_resolution(feedback);
        // The report's RTT sample (libwebrtc takes it from RTCP and the feedback alike).
        if let Some(rtt) = feedback.rtt.filter(|r| *r > TimeDelta::ZERO) {
            self.have_rtt_sample = true;
            self.set_rtt(rtt);
        }
        if feedback.packets.is_empty() {
            return;
        }
        if let Some(p) = &mut self.pushback {
            p.set_outstanding(feedback.data_in_flight);
        }
        let at = feedback.feedback_time;
        let received = feedback.received_by_arrival();

        // Feedback-based RTT (goog_cc OnTransportPacketsFeedback): the largest feedback RTT of
        // the report, and the propagation RTT, the smallest feedback RTT less the time each
        // packet then waited at the receiver for the report's newest arrival.
        if !received.is_empty() {
            let newest = received.iter().filter_map(|p| p.receive_time).max().unwrap_or(at);
            let max_rtt =
                received.iter().map(|p| at - p.sent.send_time).max().unwrap_or(TimeDelta::ZERO);
            let min_rtt = received
                .iter()
                .map(|p| {
                    let pending = p.receive_time.map_or(TimeDelta::ZERO, |rx| newest - rx);
                    at - p.sent.send_time - pending
                })
                .min()
                .unwrap_or(TimeDelta::ZERO);
            self.feedback_max_rtts.push_back(max_rtt);
            if self.feedback_max_rtts.len() > FEEDBACK_RTT_WINDOW {
                self.feedback_max_rtts.pop_front();
            }
            self.loss.update_propagation_rtt(at, min_rtt);
            if !self.have_rtt_sample {
                let n = self.feedback_max_rtts.len() as i64;
                let mean = self.feedback_max_rtts.iter().copied().sum::<TimeDelta>() / n;
                self.set_rtt(mean);
            }
        }

        // Loss, aggregated per second.
        self.lost_since_update += feedback.lost_count() as u64;
        self.expected_since_update += feedback.packets.len() as u64;
        if self.next_loss_update.is_none_or(|t| at > t) {
            self.next_loss_update = Some(at + LOSS_UPDATE_INTERVAL);
            self.loss.update_packets_lost(self.lost_since_update, self.expected_since_update, at);
            self.lost_since_update = 0;
            self.expected_since_update = 0;
        }

        // ALR transitions and acknowledged rate.
        let alr_start = self.alr.alr_start_time();
        if self.previously_in_alr && alr_start.is_none() {
            self.acked.set_alr_ended_time(at);
            self.probe_controller.set_alr_ended_time(at);
        }
        self.previously_in_alr = alr_start.is_some();
        self.acked.on_packets(&received);
        let acked = self.acked.bitrate();
        if let Some(a) = acked {
            self.loss.set_acknowledged_rate(a);
        }

        // Probe results.
        for p in &received {
            let (Some(id), Some(rx)) = (p.sent.probe_cluster_id, p.receive_time) else {
                continue;
            };
            if let Some(info) = self.issued_clusters.get(&id).copied() {
                self.probe_estimator.handle_probe(id, info, p.sent.send_time, rx, p.sent.size);
            }
        }
        let mut probe = self.probe_estimator.fetch_and_reset_last_estimate();
        if probe.is_some() {
            self.last_probe_result = probe;
        }
        if self.config.probe_rules == ProbeRules::M156 {
            // LimitProbesLowerThanThroughputEstimate: a probe that measured less than the path
            // carries is floored slightly below the acknowledged rate (to drain a queue), but
            // never raises the delay-based estimate.
            if let (Some(p), Some(a)) = (probe, acked) {
                let limit = self.aimd.estimate().min(a.scale(PROBE_DROP_THROUGHPUT_FRACTION));
                probe = Some(p.max(limit));
            }
        }

        let (updated, from_probe, recovered) = self.delay_based_update(&received, acked, probe, at);
        if updated {
            let delay_based = self.aimd.estimate();
            if from_probe {
                self.loss.set_send_bitrate(delay_based);
            }
            self.loss.update_delay_based_estimate(at, delay_based);
        }
        // M119 order: LossBasedBweV2 sees every report (lost packets included) after the
        // delay-based limit moved; the network update follows only a delay-based update, else
        // the next process interval carries it.
        self.loss.update_loss_based_estimator(&feedback.packets, probe, alr_start.is_some(), at);
        if updated {
            self.maybe_trigger_network_changed(at);
        }
        if recovered {
            self.probe_controller.set_alr_start_time(alr_start);
            self.probe_controller.request_probe(at);
        }
        // The pushback's window, after any update above used the previous one.
        if !received.is_empty() {
            let min_rtt = self.min_feedback_max_rtt();
            if let (Some(p), Some(rtt)) = (&mut self.pushback, min_rtt) {
                p.update_window(rtt);
            }
        }
    }

    fn handle_timeout(&mut self, now: Timestamp) {
        if now < self.next_process {
            return;
        }
        self.loss.update_estimate(now);
        self.probe_controller.set_alr_start_time(self.alr.alr_start_time());
        self.probe_controller.set_overusing(self.trendline.state() == BandwidthUsage::Overusing);
        self.probe_controller.process(now);
        let min_rtt = self.min_feedback_max_rtt();
        if let Some(p) = &mut self.pushback {
            p.on_process_interval(min_rtt);
        }
        self.maybe_trigger_network_changed(now);
        self.next_process = now + PROCESS_INTERVAL;
    }

    fn poll_timeout(&self) -> Timestamp {
        self.next_process
    }

    fn update(&self) -> NetworkControlUpdate {
        let target = self.target();
        let (encoder_rate, cwnd_reduce_ratio) = match &self.pushback {
            Some(p) => (p.encoder_rate(target), p.cwnd_reduce_ratio()),
            None => (target, 0.0),
        };
        // M156's LossBasedBweV2 may ask to pad up to the (pushed-back) target while it ramps
        // up loss-limited (`GetPacingRates`; camera video has no other padding).
        let padding_rate = if self.loss.state() == LossBasedState::IncreaseUsingPadding {
            encoder_rate.min(target)
        } else {
            DataRate::ZERO
        };
        NetworkControlUpdate {
            target_rate: target,
            encoder_rate,
            cwnd_reduce_ratio,
            pacing_rate: target.scale(self.config.pacing_factor),
            padding_rate,
            congestion_window: None,
        }
    }

    fn poll_probe_cluster(&mut self, _now: Timestamp) -> Option<ProbeClusterConfig> {
        let c = self.probe_controller.pop_probe()?;
        self.issued_clusters.insert(
            c.id,
            ProbeClusterInfo {
                min_probes: c.min_probes,
                min_bytes: c.target_rate * c.target_duration,
            },
        );
        // Results older than a few clusters are useless; keep the map small.
        while self.issued_clusters.len() > 64 {
            self.issued_clusters.pop_first();
        }
        Some(c)
    }

    fn signals(&self) -> CcSignals {
        CcSignals {
            overuse_at: self.overuse_at,
            underuse_at: self.underuse_at,
            pre_reaction_at: self.pre_reaction_at,
            pre_reaction_level: self.trendline.pre_reaction_level(),
            ..CcSignals::default()
        }
    }

    fn debug_columns(&self, out: &mut Columns) {
        let usage = match self.trendline.state() {
            BandwidthUsage::Normal => "normal",
            BandwidthUsage::Underusing => "underusing",
            BandwidthUsage::Overusing => "overusing",
        };
        out.float("cc_modified_trend", Some(self.trendline.modified_trend()));
        out.float("cc_threshold", Some(self.trendline.threshold()));
        if self.config.pre_reaction_ratio.is_some() {
            out.float("cc_pre_reaction_level", self.trendline.pre_reaction_level());
        }
        out.text("cc_usage", Some(usage));
        out.rate("cc_link_capacity_bps", self.aimd.link_capacity().estimate());
        out.rate("cc_acknowledged_rate_bps", self.acked.bitrate());
        out.bool("cc_in_alr", self.alr.alr_start_time().is_some());
        out.rate("cc_probe_result_bps", self.last_probe_result);
        out.rate("cc_loss_based_bps", Some(self.loss.target()));
        let v2 = self.loss.v2();
        if v2.is_enabled() {
            let state = match self.loss.state() {
                LossBasedState::Increasing => "increasing",
                LossBasedState::IncreaseUsingPadding => "increase_using_padding",
                LossBasedState::Decreasing => "decreasing",
                LossBasedState::DelayBasedEstimate => "delay_based",
            };
            out.text("cc_loss_state", Some(state));
            out.float("cc_inherent_loss", Some(v2.inherent_loss()));
            out.rate("cc_loss_upper_bound_bps", Some(v2.instant_upper_bound()));
        }
        if let Some(p) = &self.pushback {
            out.float("cc_pushback_ratio", Some(p.ratio()));
            out.size("cc_pushback_window_bytes", p.window());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::DataSize;

    const PKT: DataSize = DataSize::from_bytes(1200);
    const ONE_WAY: TimeDelta = TimeDelta::from_ms(20);
    const FEEDBACK_INTERVAL_MS: i64 = 50;

    /// A tiny fluid model of one bottleneck: packets leave the queue at
    /// max(send, previous departure) + size / capacity and arrive one-way-delay later.
    /// The sender paces media at the target rate and honours probe clusters (probe packets
    /// replace media while a cluster is being sent); the receiver reports every 50 ms.
    struct Sim {
        gcc: Gcc,
        now: Timestamp,
        seq: u64,
        last_departure: Timestamp,
        next_media: Timestamp,
        probe_queue: VecDeque<(Timestamp, u32)>,
        unreported: VecDeque<PacketResult>,
        /// (time, target, queue delay of the last packet sent)
        trace: Vec<(Timestamp, DataRate, TimeDelta)>,
        /// Random loss probability of the bottleneck, and its generator.
        loss: f64,
        rng: crate::rng::Rng,
        /// Media at most at this rate (application-limited below the target).
        media_cap: DataRate,
        /// Probe packets arrive spread at this rate, whatever they were sent at (as if they
        /// queued behind a burst of cross traffic); media is not delayed by them.
        probe_arrival_rate: Option<DataRate>,
        last_probe_arrival: Timestamp,
    }

    impl Sim {
        fn new(config: GccConfig) -> Self {
            Sim {
                gcc: Gcc::new(config, Timestamp::ZERO),
                now: Timestamp::ZERO,
                seq: 0,
                last_departure: Timestamp::ZERO,
                next_media: Timestamp::ZERO,
                probe_queue: VecDeque::new(),
                unreported: VecDeque::new(),
                trace: Vec::new(),
                loss: 0.0,
                rng: crate::rng::Rng::new(5),
                media_cap: DataRate::INFINITY,
                probe_arrival_rate: None,
                last_probe_arrival: Timestamp::ZERO,
            }
        }

        fn send(&mut self, capacity: DataRate, probe: Option<u32>, at: Timestamp) -> TimeDelta {
            let sent = SentPacket {
                transport_seq: self.seq,
                send_time: at,
                size: PKT,
                probe_cluster_id: probe,
                is_padding: probe.is_some(),
                data_in_flight: DataSize::ZERO,
            };
            self.seq += 1;
            self.gcc.on_packet_sent(&sent, at);
            let departure = match (probe, self.probe_arrival_rate) {
                (Some(_), Some(slow)) => {
                    self.last_probe_arrival = at.max(self.last_probe_arrival) + PKT / slow;
                    self.last_probe_arrival
                }
                _ => {
                    self.last_departure = at.max(self.last_departure) + PKT / capacity;
                    self.last_departure
                }
            };
            let lost = self.rng.bernoulli(self.loss);
            self.unreported.push_back(PacketResult {
                sent,
                // A lost packet is reported (without an arrival) with the packets around it.
                receive_time: if lost { None } else { Some(departure + ONE_WAY) },
                rtt: None,
            });
            departure - at
        }

        /// Runs one 1 ms step at the given capacity.
        fn step(&mut self, capacity: DataRate) {
            let now = self.now;
            // Feedback generated at receiver time now - ONE_WAY on a 50 ms grid.
            let rx_time = now - ONE_WAY;
            if rx_time > Timestamp::ZERO && rx_time.as_ms() % FEEDBACK_INTERVAL_MS == 0 {
                let mut packets = Vec::new();
                while let Some(p) = self.unreported.front() {
                    if p.receive_time.unwrap_or(p.sent.send_time + ONE_WAY) <= rx_time {
                        packets.push(self.unreported.pop_front().unwrap());
                    } else {
                        break;
                    }
                }
                if !packets.is_empty() {
                    let fb = TransportPacketsFeedback {
                        feedback_time: now,
                        packets,
                        prior_in_flight: DataSize::ZERO,
                        data_in_flight: DataSize::ZERO,
                        rtt: None,
                        smoothed_rtt: None,
                    };
                    self.gcc.on_transport_feedback(&fb, now);
                }
            }
            if now >= self.gcc.poll_timeout() {
                self.gcc.handle_timeout(now);
            }
            while let Some(c) = self.gcc.poll_probe_cluster(now) {
                let n = (c.min_probes as i64)
                    .max(((c.target_rate * c.target_duration).as_bytes() + 1199) / 1200);
                let gap = PKT / c.target_rate;
                let start = self.probe_queue.back().map_or(now, |&(t, _)| t + gap).max(now);
                for i in 0..n {
                    self.probe_queue.push_back((start + gap * i, c.id));
                }
            }
            let mut qdelay = TimeDelta::ZERO;
            let next = now + TimeDelta::from_ms(1);
            if !self.probe_queue.is_empty() {
                while let Some(&(t, id)) = self.probe_queue.front() {
                    if t >= next {
                        break;
                    }
                    self.probe_queue.pop_front();
                    qdelay = self.send(capacity, Some(id), t);
                }
                self.next_media = next;
            } else {
                // Media paced evenly at the target rate with microsecond send times.
                // Padding (M156's loss-based ramp-up) makes up what media leaves.
                let u = self.gcc.update();
                let gap = PKT / u.target_rate.min(self.media_cap).max(u.padding_rate);
                self.next_media = self.next_media.max(now);
                while self.next_media < next {
                    let t = self.next_media;
                    qdelay = self.send(capacity, None, t);
                    self.next_media = t + gap;
                }
            }
            self.trace.push((now, self.gcc.update().target_rate, qdelay));
            self.now = next;
        }
    }

    /// Random loss the queue does not cause: LossBasedBweV2 (M119) takes loss below 15 % at a
    /// steady rate as inherent and caps the target at its instant upper bound,
    /// 75 kbps / (loss - 5 %) (12 %: 1.07 Mbps); the classic rule (up to M109) cuts by
    /// loss / 2 after every loss report above 10 % and holds between 2 % and 10 %, so it
    /// sinks until the per-second loss reports, noisier at lower rates, read 10 % or less
    /// about as often as they read more (measured: about 460 kbps).
    #[test]
    fn random_loss_v2_caps_at_its_upper_bound_where_the_classic_rule_collapses() {
        let run = |v2_enabled: bool| {
            let config = GccConfig {
                loss_based_v2: LossBasedBweV2Config { enabled: v2_enabled, ..Default::default() },
                ..GccConfig::default()
            };
            let mut sim = Sim::new(config);
            sim.loss = 0.12;
            for _ in 0..60_000 {
                sim.step(DataRate::from_mbps(5));
            }
            let last: Vec<f64> =
                sim.trace[50_000..].iter().map(|&(_, r, _)| r.as_kbps_f64()).collect();
            let mean = last.iter().sum::<f64>() / last.len() as f64;
            (mean, sim.gcc.loss.v2().instant_upper_bound().as_kbps_f64())
        };
        // The bound follows the measured average loss (about 12 %, so about 1.07 Mbps); the
        // 5 Mbps link and the delay-based estimate would allow far more.
        let (v2, bound) = run(true);
        assert!((bound - 1071.0).abs() < 250.0, "instant upper bound {bound:.0} kbps");
        assert!((800.0..1400.0).contains(&v2), "v2 target {v2:.0} kbps (bound now {bound:.0})");
        let (classic, _) = run(false);
        assert!(classic < 0.5 * v2, "classic target {classic:.0} kbps, v2 {v2:.0} kbps");
    }

    /// M156's loss-based estimator asks goog_cc to pad up to the (pushed-back) target while
    /// it ramps up loss-limited after a lossy spell (`GetPacingRates`); M119's never pads.
    #[test]
    fn m156_pads_while_it_ramps_up_loss_limited() {
        let run = |loss_based_v2: LossBasedBweV2Config| {
            let mut sim = Sim::new(GccConfig { loss_based_v2, ..GccConfig::default() });
            let mut padded = Vec::new();
            for i in 0..30_000 {
                sim.loss = if (10_000..13_000).contains(&i) { 0.2 } else { 0.0 };
                sim.step(DataRate::from_mbps(5));
                let u = sim.gcc.update();
                if u.padding_rate > DataRate::ZERO {
                    assert_eq!(sim.gcc.loss.state(), LossBasedState::IncreaseUsingPadding);
                    assert_eq!(u.padding_rate, u.encoder_rate.min(u.target_rate));
                    padded.push(i);
                }
            }
            padded
        };
        let padded = run(LossBasedBweV2Config::m156());
        assert!(padded.len() > 100, "padded in {} steps", padded.len());
        assert!(padded[0] >= 10_000, "padding before any loss (step {})", padded[0]);
        assert!(run(LossBasedBweV2Config::default()).is_empty());
    }

    /// M156's probe rules in goog_cc: application-limited video at 300 kbps on a 5 Mbps link
    /// (padding when the loss-based estimate asks for it) with ALR probing on, 20 % random
    /// loss for 10 s. M119 sends its periodic ALR probe while the estimate is loss-limited;
    /// M156 sends no probe while the estimate is loss-limited (decreasing or padding) or the
    /// detector over- or under-uses, and one while it increases loss-limited goes to at most
    /// 1.5x the estimate.
    #[test]
    fn m156_probe_rules_hold_probes_back_while_loss_limited() {
        let run = |probe_rules: ProbeRules| {
            let mut sim = Sim::new(GccConfig {
                loss_based_v2: LossBasedBweV2Config::m156(),
                probe_rules,
                alr_probing: true,
                ..GccConfig::default()
            });
            sim.media_cap = DataRate::from_kbps(300);
            let mut in_loss = 0;
            let mut causes = Vec::new();
            for i in 0..40_000 {
                sim.loss = if (15_000..25_000).contains(&i) { 0.2 } else { 0.0 };
                let issued = sim.gcc.issued_clusters.len();
                sim.step(DataRate::from_mbps(5));
                if sim.gcc.issued_clusters.len() > issued {
                    let (id, info) = sim.gcc.issued_clusters.last_key_value().unwrap();
                    if (16_000..25_000).contains(&i) {
                        in_loss += 1;
                    }
                    if sim.gcc.probe_controller.cause()
                        == BandwidthLimitedCause::LossLimitedIncreasing
                    {
                        let cap = sim.gcc.last_target.scale(1.5) * probe_controller::PROBE_DURATION;
                        assert!(info.min_bytes <= cap, "cluster {id}");
                    }
                    causes.push(sim.gcc.probe_controller.cause());
                }
            }
            (in_loss, causes)
        };
        let (m119, _) = run(ProbeRules::M119);
        assert!(m119 >= 1, "M119 probed {m119} times in the lossy spell");
        let (m156, causes) = run(ProbeRules::M156);
        assert_eq!(m156, 0, "M156 probed in the lossy spell");
        assert!(causes.len() >= 4, "{causes:?}");
        assert!(causes.iter().all(|c| matches!(
            c,
            BandwidthLimitedCause::DelayBased | BandwidthLimitedCause::LossLimitedIncreasing
        )));
    }

    /// M156's `LimitProbesLowerThanThroughputEstimate`: application-limited video at 1 Mbps
    /// with ALR probing on, each probe's packets arriving spread at 200 kbps. M119 takes the
    /// probe's result (0.95 x 200 kbps) as the delay-based estimate; M156 floors it at 0.85x
    /// the acknowledged rate.
    #[test]
    fn m156_floors_a_low_probe_result_near_the_acknowledged_rate() {
        let run = |probe_rules: ProbeRules| {
            let mut sim =
                Sim::new(GccConfig { probe_rules, alr_probing: true, ..Default::default() });
            sim.media_cap = DataRate::from_mbps(1);
            for _ in 0..3000 {
                sim.step(DataRate::from_mbps(5));
            }
            sim.probe_arrival_rate = Some(DataRate::from_kbps(200));
            // The first probe result of packets that arrived slowed down, the target and the
            // acknowledged rate (the report's packets included) after it.
            for _ in 3000..10_000 {
                sim.step(DataRate::from_mbps(5));
                let slowed = sim.gcc.last_probe_result.filter(|p| *p < DataRate::from_kbps(200));
                if let Some(p) = slowed {
                    return (p, sim.gcc.update().target_rate, sim.gcc.acked.bitrate().unwrap());
                }
            }
            panic!("no slowed probe result");
        };
        let (probe, target, _) = run(ProbeRules::M119);
        assert_eq!(target, probe);
        let (probe, target, acked) = run(ProbeRules::M156);
        assert!(target > probe.scale(2.0), "probe {probe:?}, target {target:?}");
        assert_eq!(target, acked.scale(PROBE_DROP_THROUGHPUT_FRACTION), "probe {probe:?}");
    }

    /// goog_cc's propagation RTT: a packet's feedback RTT less the time it waited at the
    /// receiver for the report's newest arrival (only the RTT back-off uses it).
    #[test]
    fn propagation_rtt_takes_off_the_time_waiting_for_the_report() {
        let mut g = Gcc::new(GccConfig::default(), Timestamp::ZERO);
        let packet = |seq: u64, sent_ms: i64, rx_ms: i64| PacketResult {
            sent: SentPacket {
                transport_seq: seq,
                send_time: Timestamp::from_ms(sent_ms),
                size: PKT,
                probe_cluster_id: None,
                is_padding: false,
                data_in_flight: DataSize::ZERO,
            },
            receive_time: Some(Timestamp::from_ms(rx_ms)),
            rtt: None,
        };
        // Feedback at 1000 ms: RTTs 1000 and 900 ms; the first packet waited 400 ms for the
        // second's arrival, so the propagation RTT is 600 ms (not the smallest RTT, 900).
        let fb = TransportPacketsFeedback {
            feedback_time: Timestamp::from_ms(1000),
            packets: vec![packet(0, 0, 500), packet(1, 100, 900)],
            prior_in_flight: DataSize::ZERO,
            data_in_flight: DataSize::ZERO,
            rtt: None,
            smoothed_rtt: None,
        };
        g.on_transport_feedback(&fb, Timestamp::from_ms(1000));
        assert_eq!(g.loss.propagation_rtt(), TimeDelta::from_ms(600));
    }

    /// With libwebrtc's resolutions GCC reads send times in whole milliseconds and arrival
    /// times in 250 us ticks; by default it reads them exactly.
    #[test]
    fn feedback_times_at_libwebrtcs_resolution() {
        let packet = |send_us: i64, rx_us: Option<i64>| PacketResult {
            sent: SentPacket {
                transport_seq: 0,
                send_time: Timestamp::from_us(send_us),
                size: PKT,
                probe_cluster_id: None,
                is_padding: false,
                data_in_flight: DataSize::ZERO,
            },
            receive_time: rx_us.map(Timestamp::from_us),
            rtt: None,
        };
        let fb = TransportPacketsFeedback {
            feedback_time: Timestamp::from_ms(100),
            packets: vec![packet(1_999, Some(41_374)), packet(2_000, None)],
            prior_in_flight: DataSize::ZERO,
            data_in_flight: DataSize::ZERO,
            rtt: None,
            smoothed_rtt: None,
        };
        let exact = Gcc::new(GccConfig::default(), Timestamp::ZERO);
        assert_eq!(*exact.at_resolution(&fb), fb);
        let config = GccConfig {
            send_time_resolution_us: 1000,
            arrival_time_resolution_us: 250,
            ..GccConfig::default()
        };
        assert_eq!(config.validate(), Ok(()));
        let g = Gcc::new(config, Timestamp::ZERO);
        let read = g.at_resolution(&fb);
        let times: Vec<(i64, Option<i64>)> = read
            .packets
            .iter()
            .map(|p| (p.sent.send_time.as_us(), p.receive_time.map(|t| t.as_us())))
            .collect();
        assert_eq!(times, vec![(1_000, Some(41_250)), (2_000, None)]);
        let late =
            TransportPacketsFeedback { packets: vec![packet(0, Some(41_375))], ..fb.clone() };
        assert_eq!(
            g.at_resolution(&late).packets[0].receive_time,
            Some(Timestamp::from_us(41_500))
        );
        let bad = GccConfig { send_time_resolution_us: -1, ..GccConfig::default() };
        assert!(bad.validate().unwrap_err().contains("cc.send_time_resolution_us"));
    }

    #[test]
    fn config_defaults_and_serde() {
        let c = GccConfig::default();
        assert_eq!(c.start_rate, DataRate::from_kbps(300));
        assert_eq!(c.min_rate, DataRate::from_kbps(5));
        assert_eq!(c.max_rate, DataRate::from_mbps(200));
        assert_eq!(c.trendline_window, TrendlineWindow::Packets(20));
        let c: GccConfig = serde_json::from_str(
            r#"{"max_rate": 50000000, "trendline_window": {"kind": "time", "window_ms": 200}}"#,
        )
        .unwrap();
        assert_eq!(c.max_rate, DataRate::from_mbps(50));
        assert_eq!(c.trendline_window, TrendlineWindow::Time(TimeDelta::from_ms(200)));
        assert_eq!(c.start_rate, DataRate::from_kbps(300));
        let back: GccConfig = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn initial_probes_at_3x_and_6x() {
        let mut g = Gcc::new(GccConfig::default(), Timestamp::ZERO);
        let a = g.poll_probe_cluster(Timestamp::ZERO).unwrap();
        let b = g.poll_probe_cluster(Timestamp::ZERO).unwrap();
        assert_eq!(a.target_rate, DataRate::from_kbps(900));
        assert_eq!(b.target_rate, DataRate::from_kbps(1800));
        assert_eq!((a.target_duration, a.min_probes), (TimeDelta::from_ms(15), 5));
        assert!(g.poll_probe_cluster(Timestamp::ZERO).is_none());
        assert_eq!(g.update().target_rate, DataRate::from_kbps(300));
        let g = Gcc::new(GccConfig { probing: false, ..GccConfig::default() }, Timestamp::ZERO);
        assert!(g.probe_controller.clone().pop_probe().is_none());
    }

    fn run_closed_loop(window: TrendlineWindow) -> Sim {
        let mut sim = Sim::new(GccConfig { trendline_window: window, ..GccConfig::default() });
        for ms in 0..10_000 {
            let cap = if ms < 6000 { DataRate::from_mbps(30) } else { DataRate::from_mbps(10) };
            sim.step(cap);
        }
        sim
    }

    fn check_closed_loop(sim: &Sim) {
        let at = |ms: i64| sim.trace[ms as usize].1;
        // Finds the 30 Mbps link within 5 s from a 300 kbps start.
        let first_above_20 = sim.trace.iter().find(|e| e.1 > DataRate::from_mbps(20)).map(|e| e.0);
        assert!(
            first_above_20.is_some_and(|t| t <= Timestamp::from_ms(5000)),
            "first above 20 Mbps at {first_above_20:?}"
        );
        assert!(at(5000) > DataRate::from_mbps(20), "target at 5 s {:?}", at(5000));
        // Queue stays bounded while the capacity is 30 Mbps.
        let max_q = sim.trace[1000..6000].iter().map(|e| e.2).max().unwrap();
        assert!(max_q < TimeDelta::from_ms(300), "max queue {max_q:?}");
        // Capacity drops to 10 Mbps at 6 s: the queue grows and GCC backs off below it.
        let backed_off =
            sim.trace[6000..8000].iter().find(|e| e.1 < DataRate::from_mbps(10)).map(|e| e.0);
        assert!(backed_off.is_some(), "no back-off below 10 Mbps by 8 s");
        // ... and stays below it, so the standing queue drains.
        let b = (backed_off.unwrap().as_ms() + 500) as usize;
        assert!(sim.trace[b..].iter().all(|e| e.1 < DataRate::from_mbps(10)));
        let peak_q = sim.trace[6000..10_000].iter().map(|e| e.2).max().unwrap();
        let tail_q = sim.trace[9500..10_000].iter().map(|e| e.2).max().unwrap();
        assert!(tail_q < peak_q / 2, "queue at the end {tail_q:?}, peak {peak_q:?}");
        // At 30 Mbps: every time the increase overshoots the capacity, the queue growth makes
        // it back off below the capacity within a second (and it does overshoot: probing
        // finds the link within the first seconds).
        let overshoots: Vec<usize> = (1..6000)
            .filter(|&ms| {
                sim.trace[ms].1 > DataRate::from_mbps(30)
                    && sim.trace[ms - 1].1 <= DataRate::from_mbps(30)
            })
            .collect();
        assert!(!overshoots.is_empty(), "the target never exceeded the 30 Mbps link");
        for &over in overshoots.iter().filter(|&&ms| ms + 1000 <= 6000) {
            assert!(
                sim.trace[over..over + 1000].iter().any(|e| e.1 < DataRate::from_mbps(30)),
                "no back-off after exceeding 30 Mbps at {over} ms"
            );
        }
    }

    #[test]
    fn closed_loop_finds_30mbps_and_backs_off() {
        let sim = run_closed_loop(TrendlineWindow::Packets(20));
        if std::env::var("GCC_TRACE").is_ok() {
            for e in sim.trace.iter().step_by(100) {
                eprintln!("{:?} {:?} {:?}", e.0, e.1, e.2);
            }
        }
        check_closed_loop(&sim);
    }

    #[test]
    fn closed_loop_time_window() {
        let sim = run_closed_loop(TrendlineWindow::Time(TimeDelta::from_ms(200)));
        if std::env::var("GCC_TRACE").is_ok() {
            for e in sim.trace.iter().step_by(200) {
                eprintln!("{:?} {:?} {:?}", e.0, e.1, e.2);
            }
        }
        check_closed_loop(&sim);
    }
}
