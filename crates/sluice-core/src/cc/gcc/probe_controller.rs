//! Decides when to send probe clusters: exponential start-up probing, further probing while
//! results keep up, periodic probing in ALR and a recovery probe after a large drop.
//! Follows libwebrtc's `ProbeController` (goog_cc: `probe_controller.cc`), by default as of
//! M119; [`ProbeRules::M156`] adds what Chromium 156's defaults changed since. One addition is
//! Sluice's, not libwebrtc's, and off unless asked for: outage-recovery probing
//! ([`ProbeController::with_outage_recovery`]).

use crate::cc::ProbeClusterConfig;
use crate::units::{DataRate, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Which libwebrtc's probing rules goog_cc follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeRules {
    /// libwebrtc M119 (the papers' baseline): probes whatever limits the estimate; a probe
    /// is capped only when it exceeds the maximum rate.
    #[default]
    M119,
    /// libwebrtc `main@{#48401}` (Chromium 156), whose defaults changed since M119 (commits
    /// `7c612c3074`, `8e18e2e085`, `93ec3434a5`; docs/notes/gcc-m119-m156.md):
    /// - no probe while the delay-based detector over- or under-uses, while the RTT back-off
    ///   is on, or while the loss-based estimate decreases or ramps up on padding
    ///   ([`BandwidthLimitedCause`]); while it increases, probes go to at most
    ///   [`LOSS_LIMITED_PROBE_SCALE`] x the estimate;
    /// - a probe that reaches the maximum rate (`>=`, M119 `>`) ends probing;
    /// - goog_cc floors a probe result at min(delay-based estimate, 0.85 x acknowledged rate)
    ///   (`WebRTC-Bwe-LimitProbesLowerThanThroughputEstimate`, default on since M120).
    ///
    /// Not modelled: allocation probes (Sluice's encoders announce no allocation) and
    /// waiting for the transport to be writable (the simulated path is from the start).
    M156,
}

impl ProbeRules {
    /// Whether these are M119's (the default, left out of a serialised config).
    pub fn is_m119(&self) -> bool {
        *self == ProbeRules::M119
    }
}

/// Why the estimate is where it is, as goog_cc tells the probe controller with each estimate
/// (libwebrtc `BandwidthLimitedCause`, goog_cc_network_control.cc
/// `GetBandwidthLimitedCause`). Only [`ProbeRules::M156`] reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BandwidthLimitedCause {
    /// The loss-based estimate limits and is increasing: probes are capped.
    LossLimitedIncreasing,
    /// The loss-based estimate limits and is decreasing or ramping up on padding: no probe.
    LossLimited,
    /// The delay-based detector over- or under-uses: no probe.
    DelayIncreased,
    /// The RTT back-off (corrected RTT above 3 s) is on: no probe.
    RttBackoff,
    /// The delay-based estimate limits (libwebrtc's initial cause).
    #[default]
    DelayBased,
}

/// M156: while the loss-based estimate increases, probes go to at most this multiple of the
/// estimate (libwebrtc `loss_limited_scale`, 1.5).
pub const LOSS_LIMITED_PROBE_SCALE: f64 = 1.5;
/// M156: a probe result is not taken below this fraction of the acknowledged rate (nor above
/// the delay-based estimate) (libwebrtc `kProbeDropThroughputFraction`, 0.85).
pub const PROBE_DROP_THROUGHPUT_FRACTION: f64 = 0.85;

/// Start-up probes at these multiples of the start rate (libwebrtc 3.0 and 6.0).
pub const FIRST_EXPONENTIAL_PROBE_SCALE: f64 = 3.0;
/// The second start-up probe's multiple of the start rate (libwebrtc 6.0).
pub const SECOND_EXPONENTIAL_PROBE_SCALE: f64 = 6.0;
/// Further probes at this multiple of the new estimate (libwebrtc 2.0)...
pub const FURTHER_EXPONENTIAL_PROBE_SCALE: f64 = 2.0;
/// ...while the estimate exceeds this fraction of the last probed rate (libwebrtc 0.7).
pub const FURTHER_PROBE_THRESHOLD: f64 = 0.7;
/// Give up waiting for a probe result after this long (libwebrtc 1 s).
pub const MAX_WAITING_TIME_FOR_PROBING_RESULT: TimeDelta = TimeDelta::from_secs(1);
/// ALR probing interval and scale (libwebrtc 5 s, 2.0).
pub const ALR_PROBING_INTERVAL: TimeDelta = TimeDelta::from_secs(5);
/// ALR probes go out at this multiple of the estimate (libwebrtc 2.0).
pub const ALR_PROBE_SCALE: f64 = 2.0;
/// A drop below this fraction of the previous estimate is "large" (libwebrtc 0.66).
pub const BITRATE_DROP_THRESHOLD: f64 = 0.66;
/// Recovery probe at this fraction of the rate before the drop (libwebrtc 0.85)...
pub const PROBE_FRACTION_AFTER_DROP: f64 = 0.85;
/// ...if the probe could plausibly succeed (libwebrtc 5 % uncertainty)...
pub const PROBE_UNCERTAINTY: f64 = 0.05;
/// ...within this time of the drop (libwebrtc 5 s)...
pub const BITRATE_DROP_TIMEOUT: TimeDelta = TimeDelta::from_secs(5);
/// ...and not more often than this (libwebrtc kMinTimeBetweenAlrProbes 5 s).
pub const MIN_TIME_BETWEEN_DROP_PROBES: TimeDelta = TimeDelta::from_secs(5);
/// ALR counts as "recently ended" for this long (libwebrtc 3 s).
pub const ALR_ENDED_TIMEOUT: TimeDelta = TimeDelta::from_secs(3);
/// Outage-recovery probing (Sluice's): how long after a collapse began it keeps probing...
pub const OUTAGE_RECOVERY_WINDOW: TimeDelta = TimeDelta::from_secs(60);
/// ...once the estimate fell below this fraction of the rate before the collapse (an
/// outage's trickle, not a drop to a slower link).
pub const OUTAGE_DEPTH: f64 = 0.05;
/// Probe cluster defaults (libwebrtc 15 ms, 5 probes).
pub const PROBE_DURATION: TimeDelta = TimeDelta::from_ms(15);
/// Minimum packets per probe cluster (libwebrtc 5).
pub const MIN_PROBES: u32 = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Init,
    WaitingForProbingResult,
    ProbingComplete,
}

/// A collapse of the estimate (outage-recovery probing): a chain of large drops, each within
/// [`BITRATE_DROP_TIMEOUT`] of the one before, or any drop once the estimate has been deep.
#[derive(Clone, Copy, Debug)]
struct Collapse {
    /// The estimate before the first drop.
    before: DataRate,
    /// When the first drop came.
    since: Timestamp,
    /// Whether the estimate has fallen below [`OUTAGE_DEPTH`] of `before` since.
    deep: bool,
}

/// libwebrtc's `ProbeController`: queues the probe clusters GCC asks the pacer for (see the
/// module documentation).
#[derive(Clone, Debug)]
pub struct ProbeController {
    enabled: bool,
    alr_probing: bool,
    rapid_recovery: bool,
    max_rate: DataRate,
    start_rate: DataRate,
    estimated: DataRate,
    state: State,
    min_rate_to_probe_further: Option<DataRate>,
    time_last_probing_initiated: Option<Timestamp>,
    time_of_last_large_drop: Option<Timestamp>,
    rate_before_last_large_drop: DataRate,
    last_drop_probe_time: Option<Timestamp>,
    alr_start_time: Option<Timestamp>,
    alr_end_time: Option<Timestamp>,
    outage_recovery: bool,
    rules: ProbeRules,
    /// The cause given with the last estimate (read under [`ProbeRules::M156`]).
    cause: BandwidthLimitedCause,
    /// The collapse under way, if any (outage-recovery probing).
    collapse: Option<Collapse>,
    /// The delay-based detector is over-using (no recovery probe into a growing queue).
    overusing: bool,
    next_id: u32,
    pending: VecDeque<ProbeClusterConfig>,
}

impl ProbeController {
    /// `enabled = false` never probes. `alr_probing` enables the periodic ALR probes;
    /// `rapid_recovery` allows the drop-recovery probe outside ALR.
    pub fn new(
        enabled: bool,
        alr_probing: bool,
        rapid_recovery: bool,
        start_rate: DataRate,
        max_rate: DataRate,
    ) -> Self {
        ProbeController {
            enabled,
            alr_probing,
            rapid_recovery,
            max_rate,
            start_rate,
            estimated: start_rate,
            state: State::Init,
            min_rate_to_probe_further: None,
            time_last_probing_initiated: None,
            time_of_last_large_drop: None,
            rate_before_last_large_drop: DataRate::ZERO,
            last_drop_probe_time: None,
            alr_start_time: None,
            alr_end_time: None,
            outage_recovery: false,
            rules: ProbeRules::M119,
            cause: BandwidthLimitedCause::DelayBased,
            collapse: None,
            overusing: false,
            next_id: 1,
            pending: VecDeque::new(),
        }
    }

    /// Outage-recovery probing (Sluice's, not libwebrtc's). After an outage the delay-based
    /// estimate has fallen, drop after drop, to the trickle the link let through (tens of
    /// kbps), and libwebrtc climbs back by about 8 % a second: minutes to regain what it had
    /// (docs/results/combined.md; Chromium does the same, chrome-heldout/chrome.md). Its own
    /// drop-recovery probe cannot help: it probes only within 5 s of the *last* large drop,
    /// to 85 % of the rate before it, and in a collapse that rate is already a trickle. Here,
    /// once the estimate has fallen below [`OUTAGE_DEPTH`] of what it was before the collapse
    /// began, while it is below [`BITRATE_DROP_THRESHOLD`] of that rate (for at most
    /// [`OUTAGE_RECOVERY_WINDOW`]) and the detector is not over-using, a probe goes out
    /// every [`ALR_PROBING_INTERVAL`] at twice the estimate (at least the start rate, at most
    /// 85 % of the rate before the collapse), and probing continues exponentially while
    /// results keep up, as at start-up. On a link that stays slow each probe costs one 15 ms
    /// cluster at about twice the link's rate.
    pub fn with_outage_recovery(mut self, on: bool) -> Self {
        self.outage_recovery = on;
        self
    }

    /// The probing rules of this libwebrtc version (M119 unless asked for).
    pub fn with_rules(mut self, rules: ProbeRules) -> Self {
        self.rules = rules;
        self
    }

    /// The cause given with the last estimate.
    pub fn cause(&self) -> BandwidthLimitedCause {
        self.cause
    }

    /// Whether the delay-based detector is over-using.
    pub fn set_overusing(&mut self, overusing: bool) {
        self.overusing = overusing;
    }

    /// Starts exponential probing (3x and 6x the start rate).
    pub fn start(&mut self, now: Timestamp) {
        if self.state == State::Init {
            let probes = [
                self.start_rate.scale(FIRST_EXPONENTIAL_PROBE_SCALE),
                self.start_rate.scale(SECOND_EXPONENTIAL_PROBE_SCALE),
            ];
            self.initiate(now, &probes, true);
        }
    }

    fn initiate(&mut self, now: Timestamp, rates: &[DataRate], mut probe_further: bool) {
        if !self.enabled {
            self.state = State::ProbingComplete;
            return;
        }
        let mut max_rate = self.max_rate;
        let m156 = self.rules == ProbeRules::M156;
        if m156 {
            // M156 InitiateProbing: gated on the cause, state and timers left as they are.
            match self.cause {
                BandwidthLimitedCause::DelayIncreased
                | BandwidthLimitedCause::RttBackoff
                | BandwidthLimitedCause::LossLimited => return,
                BandwidthLimitedCause::LossLimitedIncreasing => {
                    max_rate = max_rate.min(self.estimated.scale(LOSS_LIMITED_PROBE_SCALE));
                }
                BandwidthLimitedCause::DelayBased => {}
            }
        }
        for &r in rates {
            let mut r = r;
            if r > max_rate || (m156 && r == max_rate) {
                r = max_rate;
                probe_further = false;
            }
            self.pending.push_back(ProbeClusterConfig {
                id: self.next_id,
                at_time: now,
                target_rate: r,
                target_duration: PROBE_DURATION,
                min_probes: MIN_PROBES,
            });
            self.next_id += 1;
        }
        self.time_last_probing_initiated = Some(now);
        if probe_further {
            self.state = State::WaitingForProbingResult;
            // From the last rate asked for, before capping (M119's InitiateProbing).
            let last = rates.last().copied().unwrap_or(DataRate::ZERO);
            self.min_rate_to_probe_further = Some(last.scale(FURTHER_PROBE_THRESHOLD));
        } else {
            self.state = State::ProbingComplete;
            self.min_rate_to_probe_further = None;
        }
    }

    /// A new target rate and what limits it. Records large drops and continues exponential
    /// probing while the results keep up with the probed rates.
    pub fn set_estimated_bitrate(
        &mut self,
        rate: DataRate,
        cause: BandwidthLimitedCause,
        now: Timestamp,
    ) {
        self.cause = cause;
        if rate.as_bps_f64() < BITRATE_DROP_THRESHOLD * self.estimated.as_bps_f64() {
            let chained =
                self.time_of_last_large_drop.is_some_and(|t| now - t < BITRATE_DROP_TIMEOUT);
            // A drop from a trickle within a deep collapse (the link's next outage before the
            // estimate found it again) belongs to that collapse: anchoring a new one at the
            // trickle would end the recovery before it began.
            let deep = self.collapse.is_some_and(|c| c.deep);
            if self.collapse.is_none() || !(chained || deep) {
                self.collapse = Some(Collapse { before: self.estimated, since: now, deep: false });
            }
            self.time_of_last_large_drop = Some(now);
            self.rate_before_last_large_drop = self.estimated;
        }
        self.estimated = rate;
        if let Some(c) = &mut self.collapse {
            c.deep |= rate.as_bps_f64() < OUTAGE_DEPTH * c.before.as_bps_f64();
        }
        if self.state == State::WaitingForProbingResult {
            if let Some(min) = self.min_rate_to_probe_further {
                if rate > min {
                    self.initiate(now, &[rate.scale(FURTHER_EXPONENTIAL_PROBE_SCALE)], true);
                }
            }
        }
    }

    /// When the current application-limited region started (`None`: not in one).
    pub fn set_alr_start_time(&mut self, t: Option<Timestamp>) {
        self.alr_start_time = t;
    }
    /// The application-limited region ended at `t` (a recovery probe stays possible for
    /// [`ALR_ENDED_TIMEOUT`]).
    pub fn set_alr_ended_time(&mut self, t: Timestamp) {
        self.alr_end_time = Some(t);
    }

    /// The detector recovered from over-use: probe back towards the rate before a recent
    /// large drop.
    pub fn request_probe(&mut self, now: Timestamp) {
        let in_alr = self.alr_start_time.is_some();
        let alr_ended_recently = self.alr_end_time.is_some_and(|t| now - t < ALR_ENDED_TIMEOUT);
        if !(in_alr || alr_ended_recently || self.rapid_recovery) {
            return;
        }
        if self.state != State::ProbingComplete {
            return;
        }
        let suggested = self.rate_before_last_large_drop.scale(PROBE_FRACTION_AFTER_DROP);
        let min_expected = suggested.scale(1.0 - PROBE_UNCERTAINTY);
        let recent_drop =
            self.time_of_last_large_drop.is_some_and(|t| now - t < BITRATE_DROP_TIMEOUT);
        let probe_allowed =
            self.last_drop_probe_time.is_none_or(|t| now - t > MIN_TIME_BETWEEN_DROP_PROBES);
        if min_expected > self.estimated && recent_drop && probe_allowed {
            self.last_drop_probe_time = Some(now);
            self.initiate(now, &[suggested], false);
        }
    }

    /// Periodic work (every process interval).
    pub fn process(&mut self, now: Timestamp) {
        if let Some(t) = self.time_last_probing_initiated {
            if now - t > MAX_WAITING_TIME_FOR_PROBING_RESULT
                && self.state == State::WaitingForProbingResult
            {
                self.state = State::ProbingComplete;
                self.min_rate_to_probe_further = None;
            }
        }
        if self.estimated == DataRate::ZERO || self.state != State::ProbingComplete {
            return;
        }
        if self.outage_recovery {
            self.recover_from_outage(now);
            if self.state != State::ProbingComplete {
                return;
            }
        }
        if self.alr_probing {
            if let Some(alr_start) = self.alr_start_time {
                let base = match self.time_last_probing_initiated {
                    Some(t) => t.max(alr_start),
                    None => alr_start,
                };
                if now >= base + ALR_PROBING_INTERVAL {
                    let r = self.estimated.scale(ALR_PROBE_SCALE);
                    self.initiate(now, &[r], true);
                }
            }
        }
    }

    /// See [`Self::with_outage_recovery`].
    fn recover_from_outage(&mut self, now: Timestamp) {
        let Some(Collapse { before, since, deep }) = self.collapse else { return };
        let recovered = self.estimated.as_bps_f64() >= BITRATE_DROP_THRESHOLD * before.as_bps_f64();
        if recovered || now - since > OUTAGE_RECOVERY_WINDOW {
            self.collapse = None;
            return;
        }
        let due = self.time_last_probing_initiated.is_none_or(|t| now - t >= ALR_PROBING_INTERVAL);
        if !deep || self.overusing || !due {
            return;
        }
        let ceiling = before.scale(PROBE_FRACTION_AFTER_DROP);
        let rate = self.estimated.scale(ALR_PROBE_SCALE).max(self.start_rate).min(ceiling);
        if rate > self.estimated {
            self.initiate(now, &[rate], true);
        }
    }

    /// The next queued probe cluster, if any (each is handed out once).
    pub fn pop_probe(&mut self) -> Option<ProbeClusterConfig> {
        self.pending.pop_front()
    }
    /// Whether probe clusters wait to be handed out.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_ms(ms)
    }
    fn kbps(k: i64) -> DataRate {
        DataRate::from_kbps(k)
    }
    const DB: BandwidthLimitedCause = BandwidthLimitedCause::DelayBased;
    fn rates(pc: &mut ProbeController) -> Vec<DataRate> {
        std::iter::from_fn(|| pc.pop_probe()).map(|p| p.target_rate).collect()
    }

    #[test]
    fn exponential_probing_continues_while_results_keep_up() {
        let mut pc = ProbeController::new(true, true, false, kbps(300), DataRate::from_mbps(30));
        pc.start(t(0));
        assert_eq!(rates(&mut pc), vec![kbps(900), kbps(1800)]);
        // 1.2 Mbps is below 0.7 * 1.8 = 1.26 Mbps: no further probe.
        pc.set_estimated_bitrate(kbps(1200), DB, t(100));
        assert!(rates(&mut pc).is_empty());
        pc.set_estimated_bitrate(kbps(1700), DB, t(150));
        assert_eq!(rates(&mut pc), vec![kbps(3400)]);
        pc.set_estimated_bitrate(kbps(3400), DB, t(300));
        pc.set_estimated_bitrate(kbps(6800), DB, t(450));
        pc.set_estimated_bitrate(kbps(13600), DB, t(600));
        // 27.2 Mbps probe, then the max rate (30 Mbps) ends probing.
        pc.set_estimated_bitrate(kbps(27200), DB, t(750));
        let r = rates(&mut pc);
        assert_eq!(r, vec![kbps(6800), kbps(13600), kbps(27200), DataRate::from_mbps(30)]);
        pc.set_estimated_bitrate(DataRate::from_mbps(30), DB, t(900));
        assert!(rates(&mut pc).is_empty());
        let p = ProbeController::new(true, true, false, kbps(300), kbps(1000));
        assert_eq!(p.state, State::Init);
    }

    #[test]
    fn waiting_times_out_and_alr_probes_every_5s() {
        let mut pc = ProbeController::new(true, true, false, kbps(300), DataRate::from_mbps(30));
        pc.start(t(0));
        rates(&mut pc);
        pc.set_estimated_bitrate(kbps(1000), DB, t(100)); // below 1.26 Mbps: keep waiting
        pc.process(t(1001));
        assert_eq!(pc.state, State::ProbingComplete);
        pc.set_alr_start_time(Some(t(2000)));
        pc.process(t(6999));
        assert!(rates(&mut pc).is_empty());
        pc.process(t(7000));
        assert_eq!(rates(&mut pc), vec![kbps(2000)]);
    }

    #[test]
    fn recovery_probe_after_large_drop_in_alr() {
        let mut pc = ProbeController::new(true, true, false, kbps(300), DataRate::from_mbps(30));
        pc.start(t(0));
        rates(&mut pc);
        pc.process(t(1100)); // probing complete
        pc.set_estimated_bitrate(kbps(10_000), DB, t(1200));
        pc.set_estimated_bitrate(kbps(5000), DB, t(1300)); // < 0.66 * 10 Mbps: large drop
                                                           // Not in ALR and no rapid recovery: nothing.
        pc.request_probe(t(1400));
        assert!(rates(&mut pc).is_empty());
        pc.set_alr_start_time(Some(t(1350)));
        pc.request_probe(t(1400));
        assert_eq!(rates(&mut pc), vec![kbps(8500)]);
        // Not again within 5 s.
        pc.request_probe(t(1500));
        assert!(rates(&mut pc).is_empty());
        // Too late after the drop.
        let mut pc = ProbeController::new(true, true, true, kbps(300), DataRate::from_mbps(30));
        pc.start(t(0));
        rates(&mut pc);
        pc.process(t(1100));
        pc.set_estimated_bitrate(kbps(10_000), DB, t(1200));
        pc.set_estimated_bitrate(kbps(5000), DB, t(1300));
        pc.request_probe(t(6300));
        assert!(rates(&mut pc).is_empty());
        pc.request_probe(t(6299));
        assert_eq!(rates(&mut pc), vec![kbps(8500)]);
    }

    #[test]
    fn disabled_never_probes() {
        let mut pc = ProbeController::new(false, true, true, kbps(300), DataRate::from_mbps(30));
        pc.start(t(0));
        pc.set_alr_start_time(Some(t(0)));
        pc.process(t(10_000));
        assert!(!pc.has_pending());
    }

    /// A controller past its start-up probing at `rate` (no ALR probing), then a collapse
    /// of the estimate: 2450 kbps, then drops 1.5 s apart (a chain) to 20 kbps.
    fn collapsed(outage_recovery: bool) -> ProbeController {
        let mut pc = ProbeController::new(true, false, false, kbps(300), DataRate::from_mbps(30))
            .with_outage_recovery(outage_recovery);
        pc.start(t(0));
        rates(&mut pc);
        pc.process(t(1100));
        pc.set_estimated_bitrate(kbps(2450), DB, t(2000));
        for (k, ms) in [(1600, 20_000), (500, 21_500), (100, 23_000), (20, 24_500)] {
            pc.set_estimated_bitrate(kbps(k), DB, t(ms));
        }
        assert!(rates(&mut pc).is_empty());
        pc
    }

    #[test]
    fn outage_recovery_probes_back_towards_the_rate_before_the_collapse() {
        // libwebrtc's controller never probes here (not in ALR, no rapid recovery).
        let mut pc = collapsed(false);
        for ms in (25_000..90_000).step_by(1000) {
            pc.process(t(ms));
        }
        assert!(rates(&mut pc).is_empty());

        let mut pc = collapsed(true);
        // Not into a queue the detector sees growing.
        pc.set_overusing(true);
        pc.process(t(25_000));
        assert!(rates(&mut pc).is_empty());
        // Then from twice the estimate, at least the start rate...
        pc.set_overusing(false);
        pc.process(t(25_100));
        assert_eq!(rates(&mut pc), vec![kbps(300)]);
        // ... on while results keep up, at most 85 % of the rate before the collapse...
        pc.set_estimated_bitrate(kbps(290), DB, t(25_300));
        assert_eq!(rates(&mut pc), vec![kbps(580)]);
        pc.set_estimated_bitrate(kbps(300), DB, t(25_500)); // the link gave no more
        assert!(rates(&mut pc).is_empty());
        // ... and again every 5 s.
        pc.process(t(26_500));
        pc.process(t(30_099));
        assert!(rates(&mut pc).is_empty());
        pc.process(t(30_500));
        assert_eq!(rates(&mut pc), vec![kbps(600)]);
        pc.set_estimated_bitrate(kbps(1200), DB, t(30_700));
        assert_eq!(rates(&mut pc), vec![kbps(2400)]);
        // Back above 0.66 x 2450 kbps: the collapse is over, no more recovery probes.
        pc.set_estimated_bitrate(kbps(1700), DB, t(31_000));
        rates(&mut pc);
        pc.process(t(40_000));
        assert!(rates(&mut pc).is_empty() && pc.collapse.is_none());
        // A drop from the trickle 10 s later (the next outage) stays in the collapse: the
        // recovery probes keep aiming at the rate before it.
        let mut pc = collapsed(true);
        pc.process(t(25_100));
        assert_eq!(rates(&mut pc), vec![kbps(300)]);
        pc.set_estimated_bitrate(kbps(200), DB, t(25_400));
        pc.set_estimated_bitrate(kbps(60), DB, t(35_000));
        assert_eq!(pc.collapse.map(|c| c.before), Some(kbps(2450)));
        pc.process(t(35_100));
        assert_eq!(rates(&mut pc), vec![kbps(300)]);
        // A collapse older than the window is left alone.
        let mut pc = collapsed(true);
        pc.process(t(20_000 + OUTAGE_RECOVERY_WINDOW.as_ms() + 1));
        assert!(rates(&mut pc).is_empty() && pc.collapse.is_none());
    }

    /// Ports of libwebrtc `main@{#48401}`'s `probe_controller_unittest.cc` for the rules M156
    /// changed (same rates: start 300 bps, max 10 kbps), and the same cases under M119's rules.
    mod m156 {
        use super::*;

        const T0: i64 = 100_000;
        fn bps(b: i64) -> DataRate {
            DataRate::from_bps(b)
        }
        /// A controller past `SetBitrates` with ALR probing on, its start-up probes taken.
        fn controller(rules: ProbeRules) -> ProbeController {
            let mut pc =
                ProbeController::new(true, true, false, bps(300), bps(10_000)).with_rules(rules);
            pc.start(t(T0));
            assert_eq!(rates(&mut pc), vec![bps(900), bps(1800)]);
            pc
        }

        #[test]
        fn limit_alr_probe_when_loss_based_bwe_limited() {
            // An ALR probe after 5 s, then the next one 6 s later while the loss-based
            // estimate increases: what it asks for.
            let loss_limited_alr_probe = |rules| {
                let mut pc = controller(rules);
                pc.set_estimated_bitrate(bps(500), DB, t(T0));
                pc.set_alr_start_time(Some(t(T0)));
                pc.process(t(T0 + 5000));
                assert_eq!(rates(&mut pc).len(), 1);
                let cause = BandwidthLimitedCause::LossLimitedIncreasing;
                pc.set_estimated_bitrate(bps(500), cause, t(T0 + 5000));
                pc.process(t(T0 + 11_000));
                (rates(&mut pc), pc)
            };
            let (r, mut pc) = loss_limited_alr_probe(ProbeRules::M156);
            assert_eq!(r, vec![bps(750)]);
            pc.set_estimated_bitrate(bps(750), DB, t(T0 + 11_000));
            pc.process(t(T0 + 17_000));
            let r = rates(&mut pc);
            assert!(r[0] > bps(1125), "{r:?}");
            // M119 probes at twice the estimate whatever the loss-based side does.
            assert_eq!(loss_limited_alr_probe(ProbeRules::M119).0, vec![bps(1000)]);
        }

        /// `ProbeInAlrIfLossBasedIncreasing`, `NotProbeWhenInAlrIfLossBasedDecreases` and
        /// `NotProbeIfLossBasedIncreasingOutsideAlr`.
        #[test]
        fn alr_probes_follow_the_loss_based_state() {
            let alr_probe = |cause, in_alr: bool| {
                let mut pc = controller(ProbeRules::M156);
                pc.set_estimated_bitrate(bps(300), cause, t(T0));
                pc.process(t(T0 + 5000));
                assert!(rates(&mut pc).is_empty());
                pc.set_alr_start_time(in_alr.then_some(t(T0 + 5000)));
                pc.process(t(T0 + 10_001));
                rates(&mut pc)
            };
            assert_eq!(
                alr_probe(BandwidthLimitedCause::LossLimitedIncreasing, true),
                vec![bps(450)]
            );
            assert!(alr_probe(BandwidthLimitedCause::LossLimited, true).is_empty());
            assert!(alr_probe(BandwidthLimitedCause::LossLimitedIncreasing, false).is_empty());
            assert_eq!(alr_probe(DB, true), vec![bps(600)]);
        }

        /// `DontProbeIfDelayIncreased` and `DontProbeIfHighRtt`, with an ALR probe where
        /// libwebrtc's tests use a network-state probe (Sluice has no network-state
        /// estimator): none while the cause stands, one once the delay-based estimate limits.
        #[test]
        fn no_probe_while_delay_increased_or_rtt_high() {
            for cause in [BandwidthLimitedCause::DelayIncreased, BandwidthLimitedCause::RttBackoff]
            {
                let mut pc = controller(ProbeRules::M156);
                pc.process(t(T0 + 1100));
                assert!(rates(&mut pc).is_empty());
                pc.set_alr_start_time(Some(t(T0 + 1100)));
                pc.set_estimated_bitrate(bps(300), cause, t(T0 + 1100));
                assert!(rates(&mut pc).is_empty());
                pc.process(t(T0 + 6100));
                assert!(rates(&mut pc).is_empty(), "{cause:?}");
                pc.set_estimated_bitrate(bps(300), DB, t(T0 + 6200));
                pc.process(t(T0 + 6200));
                assert_eq!(rates(&mut pc), vec![bps(600)]);
            }
        }

        /// `DontProbeFurtherWhenLossLimited` / `ProbeFurtherWhenDelayBasedLimited` on start-up
        /// probing: a gated further probe leaves the controller waiting, so it goes out at the
        /// next estimate whose cause allows it.
        #[test]
        fn further_probing_waits_out_a_loss_limit() {
            let mut pc = controller(ProbeRules::M156);
            pc.set_estimated_bitrate(bps(1800), BandwidthLimitedCause::LossLimited, t(T0 + 100));
            assert!(rates(&mut pc).is_empty());
            assert_eq!(pc.state, State::WaitingForProbingResult);
            pc.set_estimated_bitrate(bps(1800), DB, t(T0 + 200));
            assert_eq!(rates(&mut pc), vec![bps(3600)]);
        }

        /// `TestExponentialProbingOverflow`, and M156's `>=`: a further probe that lands on the
        /// maximum rate ends probing (M119 asks for one more, capped, at the result).
        #[test]
        fn probing_to_the_max_rate_ends_it() {
            for rules in [ProbeRules::M119, ProbeRules::M156] {
                let mut pc = ProbeController::new(
                    true,
                    false,
                    false,
                    DataRate::from_mbps(10),
                    DataRate::from_mbps(100),
                )
                .with_rules(rules);
                pc.start(t(T0));
                rates(&mut pc);
                pc.set_estimated_bitrate(DataRate::from_mbps(60), DB, t(T0));
                assert_eq!(rates(&mut pc), vec![DataRate::from_mbps(100)]);
                pc.set_estimated_bitrate(DataRate::from_mbps(100), DB, t(T0));
                assert!(rates(&mut pc).is_empty());
            }
            let exactly_max = |rules| {
                let mut pc = controller(rules);
                pc.set_estimated_bitrate(bps(5000), DB, t(T0 + 100));
                assert_eq!(rates(&mut pc), vec![bps(10_000)]);
                pc.set_estimated_bitrate(bps(9000), DB, t(T0 + 200));
                rates(&mut pc)
            };
            assert_eq!(exactly_max(ProbeRules::M119), vec![bps(10_000)]);
            assert!(exactly_max(ProbeRules::M156).is_empty());
        }
    }
}
