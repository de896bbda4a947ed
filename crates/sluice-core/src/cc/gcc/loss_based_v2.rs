//! Loss-based bandwidth estimator v2 (libwebrtc's `LossBasedBweV2`, as shipped in M119 with
//! its built-in defaults, in which it is enabled).
//!
//! Source read: libwebrtc `modules/congestion_controller/goog_cc/loss_based_bwe_v2.{h,cc}`,
//! `loss_based_bwe_v2_test.cc`, `send_side_bandwidth_estimation.cc`,
//! `goog_cc_network_control.cc` and `probe_controller.cc` at upstream main commit
//! `3272a9926c84` (2023-10-02, the daily version bump around the M119 branch point, read in
//! the upstream history of the signalapp/webrtc mirror). No goog_cc file changed between
//! 2023-09-26 and 2023-10-16, so any branch point of branch-heads/6045 in that range has these
//! files. Defaults cross-checked against webrtc-sdk/webrtc `m114_release`: identical except
//! that M119 drops `BoundByUpperLinkCapacityWhenLossLimited` and adds `UseInStartPhase`.
//! Function names below are libwebrtc's.
//!
//! # What it does
//!
//! **Observations** (`PushBackObservation`). Every transport-feedback report adds its packets
//! (sent, lost, bytes) to a partial observation. Once the newest send time in the reports is
//! at least `observation_duration_lower_bound` (250 ms) past the last send time of the
//! previous observation, the partial one is closed: packets, lost packets and the sending
//! rate (bytes / that send-time span, optionally smoothed with the previous observation's
//! rate, `GetSendingRate`). Observations live in a fixed ring of `observation_window_size`
//! (20) slots; the first report only anchors the send-time clock. All timing comes from
//! packet send times, never from the wall clock.
//!
//! **Loss model** (`GetLossProbability`). A channel is (inherent loss `L`, loss-limited
//! bandwidth `B`). At sending rate `S` a packet is lost with probability
//! `p = L + (1 - L) * max(0, (S - B) / S)`, clamped to [1e-6, 1 - 1e-6]: random loss plus the
//! share of the rate that does not fit. With `L = 0`, a loss ratio `p` at rate `S` is
//! explained by `B = S (1 - p)`.
//!
//! **Candidates** (`GetCandidates`). Each update proposes bandwidths: the current estimate
//! times each candidate factor (1.02, 1.0, 0.95), the acknowledged rate (unless disabled in
//! ALR; off by default), and the delay-based estimate if it is above the current estimate.
//! Each is capped at max(current, upper bound), where the upper bound is the maximum bitrate,
//! or the bandwidth-limited increase cap while loss-limited (`GetCandidateBandwidthUpperBound`,
//! plus an acceleration term that is off by default). Each candidate's inherent loss is the
//! current one, clamped to [`inherent_loss_lower_bound`, `offset + balance / B`]
//! (`GetFeasibleInherentLoss`, `GetInherentLossUpperBound`), then refined by one damped Newton
//! step on the likelihood (`NewtonsMethodUpdate`, `GetDerivatives`).
//!
//! **Objective** (`GetObjective`). Sum over observations of
//! `w_age * (lost * ln p + received * ln(1 - p) + bias(B) * packets)`, with temporal weights
//! `w_age = temporal_weight_factor^age` (0.9; age 0 = newest; `CalculateTemporalWeights`).
//! The bias (`GetHighBandwidthBias`, `AdjustBiasFactor`) prefers higher bandwidths while the
//! average loss is below 15 % and lower ones above it:
//! `(0.0002 * kbps + 0.02 * ln(1 + kbps)) * (0.15 - loss) / (0.002 + |0.15 - loss|)`. The
//! average loss (`GetAverageReportedLossRatio`) weighs every observation by
//! `instant_upper_bound_temporal_weight_factor^age` (0.9) and by its packet count. The
//! candidate with the highest objective wins (the first one on ties). A single lossy window
//! is one term among up to 20, discounted 10 % per window of age, so one spike moves the
//! estimate only a little.
//!
//! **After the choice** (`UpdateBandwidthEstimate`): an increase is refused while the average
//! loss exceeds the winner's inherent loss (`not_increase_if_inherent_loss_less_than_average_loss`).
//! While loss-limited (state not `DelayBasedEstimate`, `IsBandwidthLimitedDueToLoss`), an
//! increase within `delayed_increase_window` (300 ms of send time) of the last window start
//! is capped at the window's limit, `max(5 kbps, 1.3 * estimate at the window start)`, and an
//! increase is capped at `bandwidth_rampup_upper_bound_factor * acknowledged rate` (1e6: no
//! effect in practice) unless a probe result was ever seen. The state is `Increasing` if the
//! estimate rose (or held while increasing) while loss-limited and is below the delay-based
//! estimate, `Decreasing` if it is otherwise below the delay-based estimate, else
//! `DelayBasedEstimate`. While loss-limited, a new increase window starts once the previous
//! one has expired (`bandwidth_limit_in_current_window_`).
//!
//! **Instant upper bound** (`CalculateInstantUpperBound`, recomputed per observation). If
//! the average loss exceeds 5 %, the result is capped at `75 kbps / (loss - 0.05)` (10 %:
//! 1.5 Mbps, 25 %: 375 kbps), and above `high_loss_rate_threshold` (1.0: never by default)
//! also at `max(min bitrate, 500 kbps - 1000 kbps * loss)`.
//!
//! **Ready and result** (`IsReady`, `GetLossBasedResult`). Ready once the estimator is enabled,
//! has a loss-limited estimate (seeded from the first finite delay-based estimate, or set
//! with [`LossBasedBweV2::set_bandwidth_estimate`]) and at least one observation. The result
//! is `min(loss-limited estimate, instant upper bound, delay-based estimate)`; before it is
//! ready, the delay-based estimate.
//!
//! # What this means in practice (M119 defaults)
//!
//! * **The instant upper bound is the main loss reaction.** The high-bandwidth preference is
//!   large (0.0002 per kbps and packet: about 0.2 per packet at 1 Mbps, against a
//!   log-likelihood of about -0.3 per packet), and below the instant bound an inherent loss
//!   equal to the average loss is always feasible (both bounds are `0.05 + 75 kbps / B`). So
//!   below 15 % loss, loss at one constant sending rate is taken as inherent loss: the
//!   estimate does not fall to `S (1 - p)` but is capped at `75 kbps / (p - 0.05)` (7.8 %:
//!   2.68 Mbps, 10 %: 1.5 Mbps, 15.6 %: 708 kbps). Above 15 % the preference flips and the
//!   estimate steps down (0.95 per observation, or to the acknowledged rate).
//! * **`S (1 - p)` is found when the data rule out inherent loss:** loss well above the
//!   inherent-loss bound at that rate (e.g. 20 % at 1.25 Mbps, bound 11 %), where the
//!   acknowledged-rate candidate explains it.
//! * **Without loss** the loss-limited estimate drifts up (2 % per observation, or to the
//!   delay-based estimate), and the result is the delay-based estimate.
//! * **After loss**, no increase while the weighted average loss exceeds the fitted inherent
//!   loss, i.e. until the 20-observation window (about 5 s) has forgotten it; then at most
//!   x1.3 per 300 ms while still loss-limited.
//!
//! # Integration (what `SendSideBandwidthEstimation` and `GoogCcNetworkController` do in M119)
//!
//! * Once: `set_min_max_bitrate(max(min, 5 kbps), max)`.
//! * Per transport feedback, in this order: feed the acknowledged-rate estimator and pass its
//!   value to [`LossBasedBweV2::set_acknowledged_bitrate`] (only when it has one); run the
//!   delay-based update (a probe result sets the target, then the delay-based limit is
//!   updated); then [`LossBasedBweV2::set_probe_bitrate`] with the report's probe result and
//!   [`LossBasedBweV2::update_bandwidth_estimate`] with **all** the report's packets (lost
//!   ones included), the current delay-based limit (+infinity before the first delay-based
//!   update) and whether the ALR detector is in ALR; then run the loss-based target update.
//! * The loss-based target update (`UpdateEstimate`, also run every process interval and on
//!   every 1 s loss report): (1) the RTT back-off, unchanged; (2) the 2 s start phase: while
//!   the last loss report shows no loss, take max(current, delay-based) unless
//!   [`LossBasedBweV2::ready_to_use_in_start_phase`] (false by default); (3) update the 1 s
//!   minimum history; (4) nothing more before the first loss report (>= 20 packets); (5) if
//!   [`LossBasedBweV2::is_ready`]: target = [`LossBasedBweV2::result`], capped at
//!   min(delay-based limit, max) and floored at the min, and remember its state; return;
//!   (6) otherwise the 2 %/10 % rule as before.
//! * The state feeds the probe controller's `BandwidthLimitedCause`, which in M119 only acts
//!   when `limit_probe_target_rate_to_loss_bwe` or `not_probe_if_delay_increased` is set
//!   (both off by default): with default trials it changes nothing.
//!
//! # M119 defaults (built into `CreateConfig`; any can be overridden by the
//! `WebRTC-Bwe-LossBasedBweV2` field-trial string; libwebrtc itself sets none)
//!
//! | field | default | libwebrtc parameter |
//! |---|---|---|
//! | `enabled` | true | `Enabled` |
//! | `bandwidth_rampup_upper_bound_factor` | 1e6 | `BwRampupUpperBoundFactor` |
//! | `rampup_acceleration_max_factor` | 0.0 | `BwRampupAccelMaxFactor` |
//! | `rampup_acceleration_maxout_time` | 60 s | `BwRampupAccelMaxoutTime` |
//! | `candidate_factors` | [1.02, 1.0, 0.95] | `CandidateFactors` |
//! | `higher_bandwidth_bias_factor` | 0.0002 | `HigherBwBiasFactor` |
//! | `higher_log_bandwidth_bias_factor` | 0.02 | `HigherLogBwBiasFactor` |
//! | `inherent_loss_lower_bound` | 0.001 | `InherentLossLowerBound` |
//! | `loss_threshold_of_high_bandwidth_preference` | 0.15 | `LossThresholdOfHighBandwidthPreference` |
//! | `bandwidth_preference_smoothing_factor` | 0.002 | `BandwidthPreferenceSmoothingFactor` |
//! | `inherent_loss_upper_bound_bandwidth_balance` | 75 kbps | `InherentLossUpperBoundBwBalance` |
//! | `inherent_loss_upper_bound_offset` | 0.05 | `InherentLossUpperBoundOffset` |
//! | `initial_inherent_loss_estimate` | 0.01 | `InitialInherentLossEstimate` |
//! | `newton_iterations` | 1 | `NewtonIterations` |
//! | `newton_step_size` | 0.75 | `NewtonStepSize` |
//! | `append_acknowledged_rate_candidate` | true | `AckedRateCandidate` |
//! | `append_delay_based_estimate_candidate` | true | `DelayBasedCandidate` |
//! | `observation_duration_lower_bound` | 250 ms | `ObservationDurationLowerBound` |
//! | `observation_window_size` | 20 | `ObservationWindowSize` |
//! | `sending_rate_smoothing_factor` | 0.0 | `SendingRateSmoothingFactor` |
//! | `instant_upper_bound_temporal_weight_factor` | 0.9 | `InstantUpperBoundTemporalWeightFactor` |
//! | `instant_upper_bound_bandwidth_balance` | 75 kbps | `InstantUpperBoundBwBalance` |
//! | `instant_upper_bound_loss_offset` | 0.05 | `InstantUpperBoundLossOffset` |
//! | `temporal_weight_factor` | 0.9 | `TemporalWeightFactor` |
//! | `bandwidth_backoff_lower_bound_factor` | 1.0 | `BwBackoffLowerBoundFactor` |
//! | `max_increase_factor` | 1.3 | `MaxIncreaseFactor` |
//! | `delayed_increase_window` | 300 ms | `DelayedIncreaseWindow` |
//! | `not_increase_if_inherent_loss_less_than_average_loss` | true | `NotIncreaseIfInherentLossLessThanAverageLoss` |
//! | `high_loss_rate_threshold` | 1.0 | `HighLossRateThreshold` |
//! | `bandwidth_cap_at_high_loss_rate` | 500 kbps | `BandwidthCapAtHighLossRate` |
//! | `slope_of_bwe_high_loss_func` | 1000 | `SlopeOfBweHighLossFunc` |
//! | `probe_integration_enabled` | false | `ProbeIntegrationEnabled` |
//! | `probe_expiration` | 10 s | `ProbeExpiration` |
//! | `not_use_acked_rate_in_alr` | false | `NotUseAckedRateInAlr` |
//! | `use_in_start_phase` | false | `UseInStartPhase` |
//!
//! # M156 (`m156`, [`LossBasedBweV2Config::m156`])
//!
//! Chromium 156's estimator, read at libwebrtc `main@{#48401}` (2026-08-22; the Debian
//! Chromium 156 binary carries all of its parameter names, docs/notes/gcc-m119-m156.md), runs
//! when the config has `m156`. The same fit, with these differences (`update_m156`):
//! * **Bounded when computed.** The result is `max(instant lower bound, min(best candidate,
//!   instant upper bound, delay-based estimate))`, stored with its state; the instant lower
//!   bound is `LowerBoundByAckedRateFactor` (1.0) x the acknowledged rate, at least the min
//!   bitrate (`CalculateInstantLowerBound`). With `BoundBestCandidate` a best candidate above
//!   the bounded estimate is replaced by it, with zero inherent loss.
//! * **Ramp-up from the acknowledged rate** while loss-limited, with no probe exception:
//!   at most `BwRampupUpperBoundFactor` (1.5) x the acknowledged rate, or
//!   `BwRampupUpperBoundInHoldFactor` (1.2) while the acknowledged rate is below
//!   `BwRampupUpperBoundHoldThreshold` (1.3) x the held rate; out of a decrease it rises by at
//!   least 1 bps, so that the state turns increasing.
//! * **Hold.** On entering a decrease the estimate is held at most at its rate (raised to the
//!   instant lower bound) until the newest observation's send time passes the hold's end;
//!   the hold lasts 300 ms, x `HoldDurationFactor` (2) at every further entry, up to 60 s, and
//!   is forgotten when the delay-based estimate rules again.
//! * **Padding.** While it increases loss-limited the state is `IncreaseUsingPadding`
//!   (`PaddingDuration` 2 s: for 2 s after the estimate last rose to a new padding rate, or
//!   while it keeps rising), and goog_cc pads up to the pushed-back target
//!   (`GetPacingRates`; [`super::Gcc`]); during that time the acknowledged-rate candidate is
//!   kept in ALR too.
//! * **Byte loss rate** (`UseByteLossRate`): the likelihood, the bias and the average loss
//!   count kB, not packets; with more than three observations the average leaves out the
//!   lossiest and the least lossy observation unless the lossiest was sent at
//!   `MedianSendingRateFactor` (2) x the median sending rate or more. A packet reported lost
//!   and then received within one observation counts as received.
//! * Ready after `MinNumObservations` (3); a tie between candidates goes to the higher
//!   bandwidth; the shared defaults change (window 15, both balances 100 kbps, loss threshold
//!   of the high-bandwidth preference 0.20, `NotUseAckedRateInAlr` and `UseInStartPhase` on);
//!   the high-loss cap and the probe integration are gone.
//!
//! M156's probe controller, which sends no probe while the estimate is loss-limited or the
//! delay-based detector over- or under-uses, reads this estimator's state: it is
//! [`super::probe_controller::ProbeRules::M156`] (`webrtc-m156` runs both).
//!
//! # Differences from M119 and what could not be verified
//!
//! * Not implemented: the trendline integration (`TrendlineIntegrationEnabled`, default false;
//!   with it `TrendlineObservationsWindowSize` 20 and `UseAckedBitrateOnlyWhenOverusing` false).
//!   M119's `UpdateBandwidthEstimate` also takes the delay detector's state, which matters only
//!   with that integration, so [`LossBasedBweV2::update_bandwidth_estimate`] does not take it.
//!   These keys are rejected by the config parser rather than silently ignored.
//! * M119 passes the report's probe result into `UpdateBandwidthEstimate`; here it is given
//!   with [`LossBasedBweV2::set_probe_bitrate`] just before the update, and it is consumed
//!   (or dropped, as in M119, when the report closes no observation) by that update.
//! * `now` is accepted by `update_bandwidth_estimate` for the caller's convenience but unused:
//!   M119 times everything by packet send times.
//! * Sluice guards (no behavioural change on sane input): a zero or negative delay-based
//!   estimate means "none" (as `SendSideBandwidthEstimation` passes +infinity for zero);
//!   negative rates and sizes are ignored or treated as zero; incoming rates are capped at
//!   [`RATE_CEILING`]; time arithmetic saturates; counts are 64-bit; the result is clamped
//!   to [min, max] (which `SendSideBandwidthEstimation` does anyway, so the integrated target
//!   is unchanged); a window over [`MAX_OBSERVATION_WINDOW_SIZE`] slots makes the config
//!   invalid. An invalid config disables the estimator, as in libwebrtc.
//! * Not verified: whether any CL was cherry-picked onto branch-heads/6045 after the branch
//!   point (none was visible; the mirror read has no release branches for M119), and which
//!   Finch parameters Chrome 119 ran with in the field (only the built-in defaults are known).

use crate::cc::PacketResult;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};

/// Rates beyond this (about 1.1 Pbps) are treated as this, so that scaling them cannot reach
/// the units' infinity sentinel (a Sluice guard, not in libwebrtc).
pub const RATE_CEILING: DataRate = DataRate::from_bps(1 << 50);
/// Largest accepted `observation_window_size` (a Sluice guard for bounded memory).
pub const MAX_OBSERVATION_WINDOW_SIZE: usize = 1000;
/// Floor of the bandwidth-limited increase window (libwebrtc kCongestionControllerMinBitrate).
pub const CONGESTION_CONTROLLER_MIN_BITRATE: DataRate = DataRate::from_kbps(5);
/// Loss probabilities are kept this far from 0 and 1, so logs and divisions stay finite.
const PROBABILITY_MARGIN: f64 = 1.0e-6;

/// Configuration of [`LossBasedBweV2`]; every default is M119's built-in one. Rates serialise
/// as integer bits per second and durations as integer microseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LossBasedBweV2Config {
    /// The estimator runs at all (`Enabled`, true).
    pub enabled: bool,
    /// While loss-limited, increases are capped at this times the acknowledged rate, unless a
    /// probe result was seen (`BwRampupUpperBoundFactor`, 1e6).
    pub bandwidth_rampup_upper_bound_factor: f64,
    /// Candidate upper bound grows by up to this times the acknowledged rate with the time
    /// since the last reduction (`BwRampupAccelMaxFactor`, 0: off).
    pub rampup_acceleration_max_factor: f64,
    /// Time for that growth to reach its maximum (`BwRampupAccelMaxoutTime`, 60 s).
    pub rampup_acceleration_maxout_time: TimeDelta,
    /// Factors of the current estimate proposed as candidates (`CandidateFactors`,
    /// 1.02|1.0|0.95).
    pub candidate_factors: Vec<f64>,
    /// Linear high-bandwidth preference per kbps (`HigherBwBiasFactor`, 0.0002).
    pub higher_bandwidth_bias_factor: f64,
    /// Logarithmic high-bandwidth preference (`HigherLogBwBiasFactor`, 0.02).
    pub higher_log_bandwidth_bias_factor: f64,
    /// Smallest inherent loss (`InherentLossLowerBound`, 0.001).
    pub inherent_loss_lower_bound: f64,
    /// Average loss above which lower bandwidths are preferred
    /// (`LossThresholdOfHighBandwidthPreference`, 0.15).
    pub loss_threshold_of_high_bandwidth_preference: f64,
    /// Softens the sign change of the preference around that threshold
    /// (`BandwidthPreferenceSmoothingFactor`, 0.002).
    pub bandwidth_preference_smoothing_factor: f64,
    /// Inherent loss is at most offset + this / bandwidth (`InherentLossUpperBoundBwBalance`,
    /// 75 kbps).
    pub inherent_loss_upper_bound_bandwidth_balance: DataRate,
    /// The offset of that bound (`InherentLossUpperBoundOffset`, 0.05).
    pub inherent_loss_upper_bound_offset: f64,
    /// Inherent loss before any fit (`InitialInherentLossEstimate`, 0.01).
    pub initial_inherent_loss_estimate: f64,
    /// Newton steps on the inherent loss per candidate (`NewtonIterations`, 1).
    pub newton_iterations: u32,
    /// Damping of each Newton step (`NewtonStepSize`, 0.75).
    pub newton_step_size: f64,
    /// The acknowledged rate is a candidate (`AckedRateCandidate`, true).
    pub append_acknowledged_rate_candidate: bool,
    /// The delay-based estimate is a candidate when above the current estimate
    /// (`DelayBasedCandidate`, true).
    pub append_delay_based_estimate_candidate: bool,
    /// Minimum send-time span of one observation (`ObservationDurationLowerBound`, 250 ms).
    pub observation_duration_lower_bound: TimeDelta,
    /// Observations kept (`ObservationWindowSize`, 20).
    pub observation_window_size: usize,
    /// Weight of the previous observation's rate in the sending rate
    /// (`SendingRateSmoothingFactor`, 0).
    pub sending_rate_smoothing_factor: f64,
    /// Per-observation decay of the weights of the average loss
    /// (`InstantUpperBoundTemporalWeightFactor`, 0.9).
    pub instant_upper_bound_temporal_weight_factor: f64,
    /// Instant upper bound = this / (average loss - offset) (`InstantUpperBoundBwBalance`,
    /// 75 kbps).
    pub instant_upper_bound_bandwidth_balance: DataRate,
    /// The offset of that bound (`InstantUpperBoundLossOffset`, 0.05).
    pub instant_upper_bound_loss_offset: f64,
    /// Per-observation decay of the weights of the likelihood (`TemporalWeightFactor`, 0.9).
    pub temporal_weight_factor: f64,
    /// The acknowledged-rate candidate is the acknowledged rate times this
    /// (`BwBackoffLowerBoundFactor`, 1.0).
    pub bandwidth_backoff_lower_bound_factor: f64,
    /// While loss-limited, at most this increase per delayed-increase window
    /// (`MaxIncreaseFactor`, 1.3).
    pub max_increase_factor: f64,
    /// Length of that window, in send time (`DelayedIncreaseWindow`, 300 ms).
    pub delayed_increase_window: TimeDelta,
    /// No increase while the average loss exceeds the inherent loss
    /// (`NotIncreaseIfInherentLossLessThanAverageLoss`, true).
    pub not_increase_if_inherent_loss_less_than_average_loss: bool,
    /// Average loss above which the high-loss cap applies (`HighLossRateThreshold`, 1.0:
    /// never).
    pub high_loss_rate_threshold: f64,
    /// High-loss cap at zero loss (`BandwidthCapAtHighLossRate`, 500 kbps).
    pub bandwidth_cap_at_high_loss_rate: DataRate,
    /// High-loss cap slope, kbps per unit of loss (`SlopeOfBweHighLossFunc`, 1000).
    pub slope_of_bwe_high_loss_func: f64,
    /// While increasing, cap at the latest probe result for `probe_expiration`
    /// (`ProbeIntegrationEnabled`, false).
    pub probe_integration_enabled: bool,
    /// How long a probe result caps the estimate (`ProbeExpiration`, 10 s).
    pub probe_expiration: TimeDelta,
    /// No acknowledged-rate candidate in ALR (`NotUseAckedRateInAlr`, false in M119).
    pub not_use_acked_rate_in_alr: bool,
    /// Usable during the 2 s start phase (`UseInStartPhase`, false).
    pub use_in_start_phase: bool,
    /// M156's estimator (see [`LossBasedM156Config`]); absent: M119's. Left out of the
    /// serialised config when absent, so M119 configurations keep their form.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub m156: Option<LossBasedM156Config>,
}

/// The parameters M156's `LossBasedBweV2` adds (libwebrtc `main@{#48401}`, 2026-08-22, whose
/// `loss_based_bwe_v2.cc` the Debian Chromium 156 binary's parameter names match; see
/// docs/notes/gcc-m119-m156.md). Present, the estimator runs M156's `UpdateBandwidthEstimate`:
/// the estimate is bounded (instant lower and upper bounds, delay-based limit) when it is
/// computed, held after a decrease, ramped from the acknowledged rate without M119's probe
/// exception, and may ask for padding. Every default is M156's built-in one; the M156 values
/// of the shared parameters come with [`LossBasedBweV2Config::m156`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LossBasedM156Config {
    /// The ramp-up bound while the acknowledged rate is under `bandwidth_rampup_hold_threshold`
    /// times the held rate (`BwRampupUpperBoundInHoldFactor`, 1.2).
    pub bandwidth_rampup_upper_bound_factor_in_hold: f64,
    /// See above (`BwRampupUpperBoundHoldThreshold`, 1.3).
    pub bandwidth_rampup_hold_threshold: f64,
    /// In ALR, the instant upper bound is a candidate (`UpperBoundCandidateInAlr`, false).
    pub append_upper_bound_candidate_in_alr: bool,
    /// Observations before the estimator is ready (`MinNumObservations`, 3).
    pub min_num_observations: u64,
    /// The estimate is never below this times the acknowledged rate
    /// (`LowerBoundByAckedRateFactor`, 1.0; 0: no such bound).
    pub lower_bound_by_acked_rate_factor: f64,
    /// On entering a decrease the estimate is held for a duration that starts at 300 ms and
    /// is multiplied by this at every further entry, up to 60 s (`HoldDurationFactor`, 2.0;
    /// 0: no hold).
    pub hold_duration_factor: f64,
    /// Loss, likelihood and bias counted in bytes (kB) rather than packets
    /// (`UseByteLossRate`, true).
    pub use_byte_loss_rate: bool,
    /// An increase while loss-limited asks goog_cc to pad up to the estimate for this long
    /// (`PaddingDuration`, 2 s; 0: no padding).
    pub padding_duration: TimeDelta,
    /// A candidate above the bounded estimate is replaced by it, with zero inherent loss
    /// (`BoundBestCandidate`, true).
    pub bound_best_candidate: bool,
    /// The byte loss ratio drops the lossiest and the least lossy observation unless the
    /// lossiest one was sent at this times the median sending rate or more
    /// (`MedianSendingRateFactor`, 2.0).
    pub median_sending_rate_factor: f64,
}

impl Default for LossBasedM156Config {
    fn default() -> Self {
        LossBasedM156Config {
            bandwidth_rampup_upper_bound_factor_in_hold: 1.2,
            bandwidth_rampup_hold_threshold: 1.3,
            append_upper_bound_candidate_in_alr: false,
            min_num_observations: 3,
            lower_bound_by_acked_rate_factor: 1.0,
            hold_duration_factor: 2.0,
            use_byte_loss_rate: true,
            padding_duration: TimeDelta::from_secs(2),
            bound_best_candidate: true,
            median_sending_rate_factor: 2.0,
        }
    }
}

impl Default for LossBasedBweV2Config {
    fn default() -> Self {
        LossBasedBweV2Config {
            enabled: true,
            bandwidth_rampup_upper_bound_factor: 1_000_000.0,
            rampup_acceleration_max_factor: 0.0,
            rampup_acceleration_maxout_time: TimeDelta::from_secs(60),
            candidate_factors: vec![1.02, 1.0, 0.95],
            higher_bandwidth_bias_factor: 0.0002,
            higher_log_bandwidth_bias_factor: 0.02,
            inherent_loss_lower_bound: 1.0e-3,
            loss_threshold_of_high_bandwidth_preference: 0.15,
            bandwidth_preference_smoothing_factor: 0.002,
            inherent_loss_upper_bound_bandwidth_balance: DataRate::from_kbps(75),
            inherent_loss_upper_bound_offset: 0.05,
            initial_inherent_loss_estimate: 0.01,
            newton_iterations: 1,
            newton_step_size: 0.75,
            append_acknowledged_rate_candidate: true,
            append_delay_based_estimate_candidate: true,
            observation_duration_lower_bound: TimeDelta::from_ms(250),
            observation_window_size: 20,
            sending_rate_smoothing_factor: 0.0,
            instant_upper_bound_temporal_weight_factor: 0.9,
            instant_upper_bound_bandwidth_balance: DataRate::from_kbps(75),
            instant_upper_bound_loss_offset: 0.05,
            temporal_weight_factor: 0.9,
            bandwidth_backoff_lower_bound_factor: 1.0,
            max_increase_factor: 1.3,
            delayed_increase_window: TimeDelta::from_ms(300),
            not_increase_if_inherent_loss_less_than_average_loss: true,
            high_loss_rate_threshold: 1.0,
            bandwidth_cap_at_high_loss_rate: DataRate::from_kbps(500),
            slope_of_bwe_high_loss_func: 1000.0,
            probe_integration_enabled: false,
            probe_expiration: TimeDelta::from_secs(10),
            not_use_acked_rate_in_alr: false,
            use_in_start_phase: false,
            m156: None,
        }
    }
}

impl LossBasedBweV2Config {
    /// M156's built-in configuration (libwebrtc `main@{#48401}`): the May 2025 defaults
    /// (`068e6ba696`) of the shared parameters and M156's additions. `HighLossRateThreshold`,
    /// its cap and slope and the probe integration no longer exist in M156 and are unused.
    pub fn m156() -> Self {
        LossBasedBweV2Config {
            bandwidth_rampup_upper_bound_factor: 1.5,
            loss_threshold_of_high_bandwidth_preference: 0.20,
            inherent_loss_upper_bound_bandwidth_balance: DataRate::from_kbps(100),
            instant_upper_bound_bandwidth_balance: DataRate::from_kbps(100),
            observation_window_size: 15,
            not_use_acked_rate_in_alr: true,
            use_in_start_phase: true,
            m156: Some(LossBasedM156Config::default()),
            ..LossBasedBweV2Config::default()
        }
    }
}

impl LossBasedBweV2Config {
    /// The checks of libwebrtc's `IsConfigValid`, plus finiteness, a non-negative back-off
    /// factor and the window-size ceiling; every problem found, empty if valid.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        let mut check = |ok: bool, what: &str| {
            if !ok {
                p.push(what.to_string());
            }
        };
        let in_range = |x: f64, lo_open: bool, lo: f64, hi: f64, hi_open: bool| {
            x.is_finite()
                && (if lo_open { x > lo } else { x >= lo })
                && (if hi_open { x < hi } else { x <= hi })
        };
        let positive_rate = |r: DataRate| r > DataRate::ZERO && r.is_finite();
        let positive_time = |t: TimeDelta| t > TimeDelta::ZERO && t.is_finite();
        let above = |x: f64, lo: f64| x.is_finite() && x > lo;
        let at_least = |x: f64, lo: f64| x.is_finite() && x >= lo;
        check(
            above(self.bandwidth_rampup_upper_bound_factor, 1.0),
            "bandwidth_rampup_upper_bound_factor must be > 1",
        );
        check(
            at_least(self.rampup_acceleration_max_factor, 0.0),
            "rampup_acceleration_max_factor must be >= 0",
        );
        check(
            positive_time(self.rampup_acceleration_maxout_time),
            "rampup_acceleration_maxout_time must be > 0",
        );
        check(
            self.candidate_factors.iter().all(|f| f.is_finite() && *f > 0.0),
            "candidate factors must be > 0",
        );
        check(
            self.append_acknowledged_rate_candidate
                || self.append_delay_based_estimate_candidate
                || self.candidate_factors.iter().any(|f| *f != 1.0),
            "no candidate other than the current estimate can be generated",
        );
        check(
            self.higher_bandwidth_bias_factor.is_finite()
                && self.higher_bandwidth_bias_factor >= 0.0,
            "higher_bandwidth_bias_factor must be >= 0",
        );
        check(
            self.higher_log_bandwidth_bias_factor.is_finite(),
            "higher_log_bandwidth_bias_factor must be finite",
        );
        check(
            in_range(self.inherent_loss_lower_bound, false, 0.0, 1.0, true),
            "inherent_loss_lower_bound must be in [0, 1)",
        );
        check(
            in_range(self.loss_threshold_of_high_bandwidth_preference, false, 0.0, 1.0, true),
            "loss_threshold_of_high_bandwidth_preference must be in [0, 1)",
        );
        check(
            in_range(self.bandwidth_preference_smoothing_factor, true, 0.0, 1.0, false),
            "bandwidth_preference_smoothing_factor must be in (0, 1]",
        );
        check(
            positive_rate(self.inherent_loss_upper_bound_bandwidth_balance),
            "inherent_loss_upper_bound_bandwidth_balance must be > 0",
        );
        check(
            in_range(
                self.inherent_loss_upper_bound_offset,
                false,
                self.inherent_loss_lower_bound,
                1.0,
                true,
            ),
            "inherent_loss_upper_bound_offset must be in [inherent_loss_lower_bound, 1)",
        );
        check(
            in_range(self.initial_inherent_loss_estimate, false, 0.0, 1.0, true),
            "initial_inherent_loss_estimate must be in [0, 1)",
        );
        check(self.newton_iterations > 0, "newton_iterations must be > 0");
        check(
            self.newton_step_size.is_finite() && self.newton_step_size > 0.0,
            "newton_step_size must be > 0",
        );
        check(
            positive_time(self.observation_duration_lower_bound),
            "observation_duration_lower_bound must be > 0",
        );
        check(
            (2..=MAX_OBSERVATION_WINDOW_SIZE).contains(&self.observation_window_size),
            "observation_window_size must be in [2, 1000]",
        );
        check(
            in_range(self.sending_rate_smoothing_factor, false, 0.0, 1.0, true),
            "sending_rate_smoothing_factor must be in [0, 1)",
        );
        check(
            in_range(self.instant_upper_bound_temporal_weight_factor, true, 0.0, 1.0, false),
            "instant_upper_bound_temporal_weight_factor must be in (0, 1]",
        );
        check(
            positive_rate(self.instant_upper_bound_bandwidth_balance),
            "instant_upper_bound_bandwidth_balance must be > 0",
        );
        check(
            in_range(self.instant_upper_bound_loss_offset, false, 0.0, 1.0, true),
            "instant_upper_bound_loss_offset must be in [0, 1)",
        );
        check(
            in_range(self.temporal_weight_factor, true, 0.0, 1.0, false),
            "temporal_weight_factor must be in (0, 1]",
        );
        check(
            self.bandwidth_backoff_lower_bound_factor.is_finite()
                && self.bandwidth_backoff_lower_bound_factor <= 1.0
                && self.bandwidth_backoff_lower_bound_factor >= 0.0,
            "bandwidth_backoff_lower_bound_factor must be in [0, 1]",
        );
        check(
            self.max_increase_factor.is_finite() && self.max_increase_factor > 0.0,
            "max_increase_factor must be > 0",
        );
        check(positive_time(self.delayed_increase_window), "delayed_increase_window must be > 0");
        check(
            in_range(self.high_loss_rate_threshold, true, 0.0, 1.0, false),
            "high_loss_rate_threshold must be in (0, 1]",
        );
        check(
            self.bandwidth_cap_at_high_loss_rate.is_finite(),
            "bandwidth_cap_at_high_loss_rate must be finite",
        );
        check(
            self.slope_of_bwe_high_loss_func.is_finite(),
            "slope_of_bwe_high_loss_func must be finite",
        );
        check(self.probe_expiration.is_finite(), "probe_expiration must be finite");
        if let Some(m) = &self.m156 {
            check(
                above(m.bandwidth_rampup_upper_bound_factor_in_hold, 1.0),
                "m156.bandwidth_rampup_upper_bound_factor_in_hold must be > 1",
            );
            check(
                at_least(m.bandwidth_rampup_hold_threshold, 0.0),
                "m156.bandwidth_rampup_hold_threshold must be >= 0",
            );
            check(m.min_num_observations > 0, "m156.min_num_observations must be > 0");
            check(
                at_least(m.lower_bound_by_acked_rate_factor, 0.0),
                "m156.lower_bound_by_acked_rate_factor must be >= 0",
            );
            check(at_least(m.hold_duration_factor, 0.0), "m156.hold_duration_factor must be >= 0");
            check(
                m.padding_duration.is_finite() && m.padding_duration >= TimeDelta::ZERO,
                "m156.padding_duration must be >= 0",
            );
            check(
                at_least(m.median_sending_rate_factor, 0.0),
                "m156.median_sending_rate_factor must be >= 0",
            );
        }
        p
    }
}

/// Where the loss-based estimate stands (libwebrtc `LossBasedState`; M119 has three values,
/// M156 adds `IncreaseUsingPadding`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LossBasedState {
    /// Loss-limited and rising.
    Increasing,
    /// Loss-limited and rising, goog_cc padding up to the estimate (M156 only).
    IncreaseUsingPadding,
    /// Loss-limited and not rising.
    Decreasing,
    /// Not loss-limited: the delay-based estimate rules.
    #[default]
    DelayBasedEstimate,
}

/// The estimator's output (libwebrtc `LossBasedBweV2::Result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LossBasedResult {
    /// The loss-based estimate, within the min and max bitrates.
    pub bandwidth_estimate: DataRate,
    /// Where the estimate stands.
    pub state: LossBasedState,
}

/// A channel hypothesis: inherent loss and loss-limited bandwidth.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Channel {
    inherent_loss: f64,
    bandwidth: DataRate,
}

#[derive(Clone, Copy, Debug)]
struct Observation {
    packets: u64,
    lost: u64,
    received: u64,
    sending_rate: DataRate,
    /// Bytes sent and bytes lost (M156's byte loss rate).
    size: DataSize,
    lost_size: DataSize,
    /// Sequence number of this observation (0 for the first).
    id: u64,
}

#[derive(Clone, Debug, Default)]
struct PartialObservation {
    packets: u64,
    lost: u64,
    size: DataSize,
    /// M156: lost packets by transport sequence number, so that a packet reported lost and
    /// then received within the observation counts as received (`fb2c7bc8bd`).
    lost_packets: std::collections::BTreeMap<u64, DataSize>,
}

/// M156's `HoldInfo`: after entering a decrease, the estimate stays at most `rate` until
/// `until` (send time of the observations).
#[derive(Clone, Copy, Debug)]
struct HoldInfo {
    until: Option<Timestamp>,
    duration: TimeDelta,
    rate: DataRate,
}

/// M156's initial hold (`kInitHoldDuration`) and its ceiling (`kMaxHoldDuration`).
const INIT_HOLD_DURATION: TimeDelta = TimeDelta::from_ms(300);
const MAX_HOLD_DURATION: TimeDelta = TimeDelta::from_secs(60);

impl HoldInfo {
    fn reset() -> Self {
        HoldInfo { until: None, duration: INIT_HOLD_DURATION, rate: DataRate::INFINITY }
    }
}

/// M156's `PaddingInfo`: the rate padding was last started at and when (`None`: never).
#[derive(Clone, Copy, Debug, Default)]
struct PaddingInfo {
    rate: Option<DataRate>,
    since: Option<Timestamp>,
}

/// libwebrtc's `LossBasedBweV2` (M119).
///
/// Integration, following `SendSideBandwidthEstimation` (M119): construct once, call
/// [`set_min_max_bitrate`](Self::set_min_max_bitrate) with the configured limits; per
/// transport feedback, after the acknowledged-rate estimator, call
/// [`set_acknowledged_bitrate`](Self::set_acknowledged_bitrate); after the delay-based update,
/// [`set_probe_bitrate`](Self::set_probe_bitrate) with the report's probe result and then
/// [`update_bandwidth_estimate`](Self::update_bandwidth_estimate) with all the report's packets
/// (lost ones included), the delay-based limit and whether in ALR; then re-run the
/// loss-based target update, which, once [`is_ready`](Self::is_ready), takes
/// [`result`](Self::result) instead of the 2 %/10 % rule.
#[derive(Clone, Debug)]
pub struct LossBasedBweV2 {
    config: LossBasedBweV2Config,
    enabled: bool,
    acknowledged_bitrate: Option<DataRate>,
    /// Current hypothesis; `None` bandwidth until seeded.
    inherent_loss: f64,
    loss_limited_bandwidth: Option<DataRate>,
    num_observations: u64,
    /// Fixed ring of `observation_window_size` slots, indexed by `id % size`.
    observations: Vec<Option<Observation>>,
    partial: PartialObservation,
    last_send_time_most_recent_observation: Option<Timestamp>,
    last_time_estimate_reduced: Option<Timestamp>,
    cached_instant_upper_bound: Option<DataRate>,
    /// Weights by age (0 = newest), for the likelihood and for the average loss.
    temporal_weights: Vec<f64>,
    instant_upper_bound_temporal_weights: Vec<f64>,
    recovering_after_loss_timestamp: Option<Timestamp>,
    bandwidth_limit_in_current_window: DataRate,
    min_bitrate: DataRate,
    max_bitrate: DataRate,
    state: LossBasedState,
    probe_bitrate: Option<DataRate>,
    pending_probe_bitrate: Option<DataRate>,
    last_probe_timestamp: Option<Timestamp>,
    /// +infinity when there is none.
    delay_based_estimate: DataRate,
    /// M156: the bounded estimate of the last update (`loss_based_result_.bandwidth_estimate`;
    /// its state is `state`).
    result_estimate: DataRate,
    /// The average loss, computed once per observation (M156's `average_reported_loss_ratio_`;
    /// M119 computed it when asked, from the same observations).
    average_loss: f64,
    /// M156: `GetInstantLowerBound` (the acknowledged rate times its factor, at least the
    /// min bitrate), the hold and the padding.
    cached_instant_lower_bound: Option<DataRate>,
    hold: HoldInfo,
    padding: PaddingInfo,
}

fn ts_add(t: Timestamp, d: TimeDelta) -> Timestamp {
    if !t.is_finite() || !d.is_finite() {
        return Timestamp::INFINITY;
    }
    Timestamp::from_us(t.as_us().saturating_add(d.as_us()).min(i64::MAX - 1))
}

fn ts_sub(a: Timestamp, b: Timestamp) -> TimeDelta {
    TimeDelta::from_us(a.as_us().saturating_sub(b.as_us()).min(i64::MAX - 1))
}

/// Rate times a factor, rounded to the nearest bit per second (libwebrtc's `DataRate *
/// double`), kept within [0, RATE_CEILING].
fn mul(rate: DataRate, factor: f64) -> DataRate {
    let v = rate.as_bps() as f64 * factor;
    if v.is_nan() || v <= 0.0 {
        return DataRate::ZERO;
    }
    DataRate::from_bps_f64(v.min(RATE_CEILING.as_bps() as f64))
}

/// Accepts a finite, non-negative rate, capped at [`RATE_CEILING`].
fn sane(rate: DataRate) -> Option<DataRate> {
    (rate.is_finite() && rate >= DataRate::ZERO).then(|| rate.min(RATE_CEILING))
}

/// libwebrtc's integer `kbps()`: rounded to the nearest kbps, halves up.
fn kbps_rounded(rate: DataRate) -> f64 {
    let bps = rate.as_bps();
    (bps / 1000 + i64::from(bps % 1000 >= 500)) as f64
}

/// `GetLossProbability`.
fn loss_probability(inherent_loss: f64, bandwidth: DataRate, sending_rate: DataRate) -> f64 {
    let l = inherent_loss.clamp(0.0, 1.0);
    let mut p = if l.is_nan() { 0.0 } else { l };
    if sending_rate.is_finite() && bandwidth.is_finite() && sending_rate > bandwidth {
        let s = sending_rate.as_bps() as f64;
        p += (1.0 - p) * (s - bandwidth.as_bps() as f64) / s;
    }
    p.clamp(PROBABILITY_MARGIN, 1.0 - PROBABILITY_MARGIN)
}

impl LossBasedBweV2 {
    /// An estimator with `config`; disabled (never ready, result = delay-based estimate) if
    /// the config is disabled or invalid ([`LossBasedBweV2Config::problems`]).
    pub fn new(config: LossBasedBweV2Config) -> Self {
        let enabled = config.enabled && config.problems().is_empty();
        let n = if enabled { config.observation_window_size } else { 0 };
        let weights = |f: f64| (0..n).map(|i| f.powi(i as i32)).collect::<Vec<f64>>();
        LossBasedBweV2 {
            enabled,
            acknowledged_bitrate: None,
            inherent_loss: config.initial_inherent_loss_estimate,
            loss_limited_bandwidth: None,
            num_observations: 0,
            observations: vec![None; n],
            partial: PartialObservation::default(),
            last_send_time_most_recent_observation: None,
            last_time_estimate_reduced: None,
            cached_instant_upper_bound: None,
            temporal_weights: weights(config.temporal_weight_factor),
            instant_upper_bound_temporal_weights: weights(
                config.instant_upper_bound_temporal_weight_factor,
            ),
            recovering_after_loss_timestamp: None,
            bandwidth_limit_in_current_window: DataRate::INFINITY,
            min_bitrate: DataRate::from_kbps(1),
            max_bitrate: DataRate::INFINITY,
            state: LossBasedState::DelayBasedEstimate,
            probe_bitrate: None,
            pending_probe_bitrate: None,
            last_probe_timestamp: None,
            delay_based_estimate: DataRate::INFINITY,
            result_estimate: DataRate::INFINITY,
            cached_instant_lower_bound: None,
            average_loss: 0.0,
            hold: HoldInfo::reset(),
            padding: PaddingInfo::default(),
            config,
        }
    }

    /// The configuration it was built with (an invalid one leaves it disabled, see
    /// [`Self::is_enabled`]).
    pub fn config(&self) -> &LossBasedBweV2Config {
        &self.config
    }

    /// `IsEnabled`.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// `IsReady`: enabled, seeded with an estimate and at least one observation.
    pub fn is_ready(&self) -> bool {
        let min_observations = self.config.m156.as_ref().map_or(1, |m| m.min_num_observations);
        self.enabled
            && self.loss_limited_bandwidth.is_some()
            && self.num_observations >= min_observations
    }

    /// `ReadyToUseInStartPhase`: ready and configured for the start phase (off by default).
    pub fn ready_to_use_in_start_phase(&self) -> bool {
        self.is_ready() && self.config.use_in_start_phase
    }

    /// `GetLossBasedResult`, clamped to [min, max] (see the module notes).
    pub fn result(&self) -> LossBasedResult {
        let (estimate, state) = match self.loss_limited_bandwidth {
            // M156 keeps the result bounded when it computed it.
            Some(_) if self.is_ready() && self.config.m156.is_some() => {
                (self.result_estimate, self.state)
            }
            Some(b) if self.is_ready() => {
                (b.min(self.instant_upper_bound()).min(self.delay_based_estimate), self.state)
            }
            // Not ready: M156 says so (M119 reports its state regardless).
            _ if self.config.m156.is_some() => {
                (self.delay_based_estimate, LossBasedState::DelayBasedEstimate)
            }
            _ => (self.delay_based_estimate, self.state),
        };
        LossBasedResult {
            bandwidth_estimate: estimate.clamp(self.min_bitrate, self.max_bitrate),
            state,
        }
    }

    /// `SetAcknowledgedBitrate`; a negative or infinite rate is ignored.
    pub fn set_acknowledged_bitrate(&mut self, rate: DataRate) {
        if let Some(r) = sane(rate) {
            self.acknowledged_bitrate = Some(r);
            self.calculate_instant_lower_bound();
        }
    }

    /// `SetBandwidthEstimate`: sets the loss-limited estimate directly (libwebrtc uses it in
    /// tests only; GCC seeds it from the first delay-based estimate).
    pub fn set_bandwidth_estimate(&mut self, rate: DataRate) {
        if let Some(r) = sane(rate) {
            self.loss_limited_bandwidth = Some(r);
            self.result_estimate = r;
            if self.config.m156.is_some() {
                self.state = LossBasedState::DelayBasedEstimate;
            }
        }
    }

    /// `SetMinMaxBitrate`; a negative or infinite value leaves that limit unchanged, and the
    /// max is raised to the min if below it.
    pub fn set_min_max_bitrate(&mut self, min: DataRate, max: DataRate) {
        if let Some(m) = sane(min) {
            self.min_bitrate = m;
        }
        if let Some(m) = sane(max) {
            self.max_bitrate = m;
        }
        self.max_bitrate = self.max_bitrate.max(self.min_bitrate);
        self.calculate_instant_lower_bound();
    }

    /// The probe result carried by the report about to be given to
    /// [`update_bandwidth_estimate`](Self::update_bandwidth_estimate) (M119's `probe_bitrate`
    /// argument); consumed by that call.
    pub fn set_probe_bitrate(&mut self, probe: Option<DataRate>) {
        self.pending_probe_bitrate = probe.and_then(sane);
    }

    /// The loss-limited estimate before the instant and delay-based caps.
    pub fn loss_limited_bandwidth(&self) -> Option<DataRate> {
        self.loss_limited_bandwidth
    }
    /// The fitted inherent loss.
    pub fn inherent_loss(&self) -> f64 {
        self.inherent_loss
    }
    /// `GetInstantUpperBound`: the cap from the average loss (the max bitrate if none).
    pub fn instant_upper_bound(&self) -> DataRate {
        self.cached_instant_upper_bound.unwrap_or(self.max_bitrate)
    }
    /// Observations made so far.
    pub fn num_observations(&self) -> u64 {
        self.num_observations
    }

    /// `UpdateBandwidthEstimate` for one transport-feedback report: `packets` are all its
    /// packets, lost ones included; `delay_based_estimate` is the current delay-based limit
    /// (zero, negative or infinite: none); `in_alr` whether the sender is application-limited.
    pub fn update_bandwidth_estimate(
        &mut self,
        packets: &[PacketResult],
        delay_based_estimate: DataRate,
        in_alr: bool,
        _now: Timestamp,
    ) {
        let probe = self.pending_probe_bitrate.take();
        self.delay_based_estimate = match sane(delay_based_estimate) {
            Some(d) if d > DataRate::ZERO => d,
            _ => DataRate::INFINITY,
        };
        if !self.enabled || packets.is_empty() || !self.push_back_observation(packets) {
            return;
        }
        if self.config.m156.is_some() {
            self.update_m156(in_alr);
            return;
        }
        // `SetProbeBitrate`.
        if let Some(p) = probe {
            self.probe_bitrate = Some(p);
            self.last_probe_timestamp = self.last_send_time_most_recent_observation;
        }
        let Some((current, mut best)) = self.best_candidate(in_alr, false) else { return };
        let last_send = self.last_send_time_most_recent_observation;

        if self.is_bandwidth_limited_due_to_loss() {
            self.cap_by_increase_window(&mut best);
            if self.increasing_when_loss_limited(current, best) && self.probe_bitrate.is_none() {
                if let Some(acked) = self.acknowledged_bitrate {
                    let cap = mul(acked, self.config.bandwidth_rampup_upper_bound_factor);
                    best.bandwidth = best.bandwidth.min(cap);
                }
            }
        }

        let delay_based = self.delay_based_estimate;
        self.state =
            if self.increasing_when_loss_limited(current, best) && best.bandwidth < delay_based {
                LossBasedState::Increasing
            } else if best.bandwidth < delay_based {
                LossBasedState::Decreasing
            } else {
                LossBasedState::DelayBasedEstimate
            };

        if self.config.probe_integration_enabled && self.state == LossBasedState::Increasing {
            if let (Some(p), Some(t), Some(l)) =
                (self.probe_bitrate, self.last_probe_timestamp, last_send)
            {
                if ts_add(t, self.config.probe_expiration) >= l {
                    best.bandwidth = best.bandwidth.min(p);
                }
            }
        }

        self.inherent_loss = best.inherent_loss;
        self.loss_limited_bandwidth = Some(best.bandwidth);
        self.renew_increase_window(best.bandwidth);
    }

    /// The first half of `UpdateBandwidthEstimate` (both versions): seeds the estimate from
    /// the delay-based one if there is none yet, picks the candidate with the highest
    /// objective (M156: a tie to the higher bandwidth), notes a reduction, and refuses an
    /// increase while the average loss exceeds the winner's inherent loss. Returns (current,
    /// best); None if there is no estimate to start from.
    fn best_candidate(&mut self, in_alr: bool, tie_to_higher: bool) -> Option<(Channel, Channel)> {
        let current_bw = match self.loss_limited_bandwidth {
            Some(b) => b,
            None if self.delay_based_estimate.is_finite() => {
                self.loss_limited_bandwidth = Some(self.delay_based_estimate);
                self.result_estimate = self.delay_based_estimate;
                self.state = LossBasedState::DelayBasedEstimate;
                self.delay_based_estimate
            }
            None => return None,
        };
        let current = Channel { inherent_loss: self.inherent_loss, bandwidth: current_bw };
        let mut best = current;
        let mut best_objective = f64::MIN;
        for mut candidate in self.candidates(current, in_alr) {
            self.newton_update(&mut candidate);
            let objective = self.objective(candidate);
            if objective > best_objective
                || (tie_to_higher
                    && objective == best_objective
                    && candidate.bandwidth > best.bandwidth)
            {
                best_objective = objective;
                best = candidate;
            }
        }
        if best.bandwidth < current.bandwidth {
            self.last_time_estimate_reduced = self.last_send_time_most_recent_observation;
        }
        if self.config.not_increase_if_inherent_loss_less_than_average_loss
            && self.average_reported_loss_ratio() > best.inherent_loss
            && best.bandwidth > current.bandwidth
        {
            best.bandwidth = current.bandwidth;
        }
        Some((current, best))
    }

    /// While loss-limited, an increase within `delayed_increase_window` of the window's start
    /// is capped at the window's limit.
    fn cap_by_increase_window(&self, best: &mut Channel) {
        let last_send = self.last_send_time_most_recent_observation;
        let in_window = match (self.recovering_after_loss_timestamp, last_send) {
            (Some(r), Some(l)) => ts_add(r, self.config.delayed_increase_window) > l,
            _ => false,
        };
        if in_window && best.bandwidth > self.bandwidth_limit_in_current_window {
            best.bandwidth = self.bandwidth_limit_in_current_window;
        }
    }

    /// While loss-limited, a new increase window (at most `max_increase_factor` x `bandwidth`)
    /// starts once the previous one has expired.
    fn renew_increase_window(&mut self, bandwidth: DataRate) {
        if !self.is_bandwidth_limited_due_to_loss() {
            return;
        }
        let last_send = self.last_send_time_most_recent_observation;
        let expired = match (self.recovering_after_loss_timestamp, last_send) {
            (None, _) => true,
            (Some(r), Some(l)) => ts_add(r, self.config.delayed_increase_window) < l,
            (Some(_), None) => false,
        };
        if expired {
            self.bandwidth_limit_in_current_window = CONGESTION_CONTROLLER_MIN_BITRATE
                .max(mul(bandwidth, self.config.max_increase_factor));
            self.recovering_after_loss_timestamp = last_send;
        }
    }

    /// M156's `UpdateBandwidthEstimate` after a new observation (module notes).
    fn update_m156(&mut self, in_alr: bool) {
        let Some(m) = self.config.m156 else { return };
        let Some((current, mut best)) = self.best_candidate(in_alr, true) else { return };
        let last_send = self.last_send_time_most_recent_observation;

        if self.is_bandwidth_limited_due_to_loss() {
            self.cap_by_increase_window(&mut best);
            // Bound the increase by the acknowledged rate (no probe exception in M156).
            if self.increasing_m156(current.bandwidth, best.bandwidth) {
                if let Some(acked) = self.acknowledged_bitrate {
                    let in_hold = self.hold.rate.is_finite()
                        && acked < mul(self.hold.rate, m.bandwidth_rampup_hold_threshold);
                    let factor = if in_hold {
                        m.bandwidth_rampup_upper_bound_factor_in_hold
                    } else {
                        self.config.bandwidth_rampup_upper_bound_factor
                    };
                    best.bandwidth = current.bandwidth.max(best.bandwidth.min(mul(acked, factor)));
                    // At least 1 bps up, so that the state becomes increasing (and pads).
                    if self.state == LossBasedState::Decreasing
                        && best.bandwidth == current.bandwidth
                    {
                        best.bandwidth = current.bandwidth + DataRate::from_bps(1);
                    }
                }
            }
        }

        let lower = self.instant_lower_bound();
        let bounded = lower
            .max(best.bandwidth.min(self.instant_upper_bound()).min(self.delay_based_estimate));
        if m.bound_best_candidate && bounded < best.bandwidth {
            self.loss_limited_bandwidth = Some(bounded);
            self.inherent_loss = 0.0;
        } else {
            self.inherent_loss = best.inherent_loss;
            let mut b = best.bandwidth;
            if m.lower_bound_by_acked_rate_factor > 0.0 {
                b = b.max(lower);
            }
            self.loss_limited_bandwidth = Some(b);
        }

        let delay_based = self.delay_based_estimate;
        let holding = match (self.hold.until, last_send) {
            (Some(until), Some(l)) => until > l,
            _ => false,
        };
        if self.state == LossBasedState::Decreasing && holding && bounded < delay_based {
            if m.lower_bound_by_acked_rate_factor > 0.0 {
                self.hold.rate = self.hold.rate.max(lower);
            }
            // No increase above the held rate while the hold lasts.
            self.result_estimate = self.hold.rate.min(bounded);
            return;
        }

        if self.increasing_m156(self.result_estimate, bounded)
            && self.can_keep_increasing(bounded, m)
            && bounded < delay_based
            && bounded < self.max_bitrate
        {
            if m.padding_duration > TimeDelta::ZERO && self.padding.rate.is_none_or(|r| bounded > r)
            {
                self.padding = PaddingInfo { rate: Some(bounded), since: last_send };
            }
            self.state = if m.padding_duration > TimeDelta::ZERO {
                LossBasedState::IncreaseUsingPadding
            } else {
                LossBasedState::Increasing
            };
        } else if bounded < delay_based && bounded < self.max_bitrate {
            if self.state != LossBasedState::Decreasing && m.hold_duration_factor > 0.0 {
                let duration = self.hold.duration;
                self.hold = HoldInfo {
                    until: last_send.map(|l| ts_add(l, duration)),
                    duration: MAX_HOLD_DURATION.min(TimeDelta::from_us(
                        (duration.as_us() as f64 * m.hold_duration_factor)
                            .round()
                            .min(MAX_HOLD_DURATION.as_us() as f64) as i64,
                    )),
                    rate: bounded,
                };
            }
            self.padding = PaddingInfo::default();
            self.state = LossBasedState::Decreasing;
        } else {
            // The delay-based estimate rules again: forget the hold, so as not to stay low.
            self.hold = HoldInfo::reset();
            self.padding = PaddingInfo::default();
            self.state = LossBasedState::DelayBasedEstimate;
        }
        self.result_estimate = bounded;
        self.renew_increase_window(self.loss_limited_bandwidth.unwrap_or(bounded));
    }

    /// M156's `IsEstimateIncreasingWhenLossLimited(old, new)`.
    fn increasing_m156(&self, old: DataRate, new: DataRate) -> bool {
        (old < new
            || (old == new
                && matches!(
                    self.state,
                    LossBasedState::Increasing | LossBasedState::IncreaseUsingPadding
                )))
            && self.is_bandwidth_limited_due_to_loss()
    }

    /// M156's `CanKeepIncreasingState`: padding stays on for `padding_duration` after it
    /// started, or while the estimate keeps rising.
    fn can_keep_increasing(&self, estimate: DataRate, m: LossBasedM156Config) -> bool {
        if m.padding_duration == TimeDelta::ZERO
            || self.state != LossBasedState::IncreaseUsingPadding
        {
            return true;
        }
        self.padding_recently() || self.padding.rate.is_none_or(|r| r < estimate)
    }

    /// `IsBandwidthLimitedDueToLoss`.
    fn is_bandwidth_limited_due_to_loss(&self) -> bool {
        self.state != LossBasedState::DelayBasedEstimate
    }

    /// `IsEstimateIncreasingWhenLossLimited`.
    fn increasing_when_loss_limited(&self, current: Channel, best: Channel) -> bool {
        (current.bandwidth < best.bandwidth
            || (current.bandwidth == best.bandwidth && self.state == LossBasedState::Increasing))
            && self.is_bandwidth_limited_due_to_loss()
    }

    /// `PushBackObservation`: false if the report closed no observation.
    fn push_back_observation(&mut self, packets: &[PacketResult]) -> bool {
        let mut lost = 0u64;
        let mut size = DataSize::ZERO;
        let mut first_send = Timestamp::INFINITY;
        let mut last_send: Option<Timestamp> = None;
        let m156 = self.config.m156.is_some();
        for p in packets {
            if p.receive_time.is_none() {
                lost += 1;
            }
            if m156 {
                if p.receive_time.is_some() {
                    self.partial.lost_packets.remove(&p.sent.transport_seq);
                } else {
                    self.partial.lost_packets.insert(p.sent.transport_seq, p.sent.size);
                }
            }
            let bytes = p.sent.size.as_bytes().max(0);
            size = DataSize::from_bytes(size.as_bytes().saturating_add(bytes));
            first_send = first_send.min(p.sent.send_time);
            last_send = Some(last_send.map_or(p.sent.send_time, |l| l.max(p.sent.send_time)));
        }
        let Some(last_send) = last_send else { return false };
        self.partial.packets = self.partial.packets.saturating_add(packets.len() as u64);
        self.partial.lost = self.partial.lost.saturating_add(lost);
        self.partial.size =
            DataSize::from_bytes(self.partial.size.as_bytes().saturating_add(size.as_bytes()));

        // The first report only starts the clock.
        let previous = *self.last_send_time_most_recent_observation.get_or_insert(first_send);
        let duration = ts_sub(last_send, previous);
        if duration <= TimeDelta::ZERO || duration < self.config.observation_duration_lower_bound {
            return false;
        }
        self.last_send_time_most_recent_observation = Some(last_send);

        // Bytes over the send-time span (truncated, as libwebrtc's size / duration).
        let bps = self.partial.size.as_bytes() as f64 * 8.0 * 1e6 / duration.as_us() as f64;
        let instantaneous = DataRate::from_bps_f64(bps.trunc().min(RATE_CEILING.as_bps() as f64))
            .max(DataRate::ZERO);
        let sending_rate = self.sending_rate(instantaneous);
        let lost = if m156 { self.partial.lost_packets.len() as u64 } else { self.partial.lost };
        let lost_size = DataSize::from_bytes(
            self.partial.lost_packets.values().map(|s| s.as_bytes().max(0)).sum(),
        );
        let observation = Observation {
            packets: self.partial.packets,
            lost,
            received: self.partial.packets.saturating_sub(lost),
            sending_rate,
            size: self.partial.size,
            lost_size,
            id: self.num_observations,
        };
        let n = self.observations.len() as u64;
        self.observations[(observation.id % n) as usize] = Some(observation);
        self.num_observations += 1;
        self.partial = PartialObservation::default();
        self.average_loss = self.compute_average_loss();
        self.calculate_instant_upper_bound();
        true
    }

    /// `GetSendingRate`.
    fn sending_rate(&self, instantaneous: DataRate) -> DataRate {
        if self.num_observations == 0 {
            return instantaneous;
        }
        let n = self.observations.len() as u64;
        let previous = self.observations[((self.num_observations - 1) % n) as usize]
            .map_or(instantaneous, |o| o.sending_rate);
        let s = self.config.sending_rate_smoothing_factor;
        mul(previous, s) + mul(instantaneous, 1.0 - s)
    }

    /// The newest observation as (packets, lost packets, sending rate).
    #[cfg(test)]
    fn newest_observation(&self) -> Option<(u64, u64, DataRate)> {
        self.observations_by_age()
            .find(|(age, _)| *age == 0)
            .map(|(_, o)| (o.packets, o.lost, o.sending_rate))
    }

    /// Stored observations with their age (0 = newest).
    fn observations_by_age(&self) -> impl Iterator<Item = (usize, &Observation)> {
        let newest = self.num_observations.saturating_sub(1);
        self.observations.iter().flatten().map(move |o| ((newest - o.id) as usize, o))
    }

    /// The average loss (`GetAverageReportedLossRatio`, M156's `average_reported_loss_ratio_`):
    /// lost over sent packets (M119), or bytes under M156's byte loss rate, each observation
    /// weighted by `instant_upper_bound_temporal_weight_factor^age`.
    pub fn average_reported_loss_ratio(&self) -> f64 {
        self.average_loss
    }

    /// `UpdateAverageReportedLossRatio`.
    fn compute_average_loss(&self) -> f64 {
        match &self.config.m156 {
            Some(m) if m.use_byte_loss_rate => self.byte_loss_ratio(m.median_sending_rate_factor),
            _ => self.packet_loss_ratio(),
        }
    }

    /// `CalculateAverageReportedByteLossRatio` (M156): lost / sent bytes, each observation
    /// weighted by `instant_upper_bound_temporal_weight_factor^age` (the weighted sizes
    /// rounded to whole bytes, as libwebrtc's `double * DataSize`); with more than three
    /// observations the lossiest and the least lossy are left out, unless the lossiest was
    /// sent at `median_factor` times the median sending rate or more.
    fn byte_loss_ratio(&self, median_factor: f64) -> f64 {
        if self.num_observations == 0 {
            return 0.0;
        }
        let weighted = |w: f64, s: DataSize| (w * s.as_bytes() as f64).round();
        let (mut total, mut lost) = (0.0, 0.0);
        let (mut min_loss, mut max_loss) = (1.0, 0.0);
        let (mut min_lost, mut min_total, mut max_lost, mut max_total) = (0.0, 0.0, 0.0, 0.0);
        let mut rate_of_max_loss = DataRate::ZERO;
        for (age, o) in self.observations_by_age() {
            let w = self.instant_upper_bound_temporal_weights[age];
            total += weighted(w, o.size);
            lost += weighted(w, o.lost_size);
            let loss = if o.size > DataSize::ZERO {
                o.lost_size.as_bytes() as f64 / o.size.as_bytes() as f64
            } else {
                0.0
            };
            if self.num_observations > 3 {
                if loss > max_loss {
                    max_loss = loss;
                    max_lost = weighted(w, o.lost_size);
                    max_total = weighted(w, o.size);
                    rate_of_max_loss = o.sending_rate;
                }
                if loss < min_loss {
                    min_loss = loss;
                    min_lost = weighted(w, o.lost_size);
                    min_total = weighted(w, o.size);
                }
            }
        }
        let ratio = |l: f64, t: f64| if t > 0.0 { l / t } else { 0.0 };
        if mul(self.median_sending_rate(), median_factor) <= rate_of_max_loss
            || total == max_total + min_total
        {
            return ratio(lost, total);
        }
        ratio(lost - min_lost - max_lost, total - max_total - min_total)
    }

    /// `GetMedianSendingRate` (M156): the median of the observations' non-zero sending rates
    /// (the mean of the middle two, truncated, for an even count); zero without any.
    fn median_sending_rate(&self) -> DataRate {
        let mut rates: Vec<DataRate> = self
            .observations
            .iter()
            .flatten()
            .map(|o| o.sending_rate)
            .filter(|r| r.is_finite() && *r > DataRate::ZERO)
            .collect();
        if rates.is_empty() {
            return DataRate::ZERO;
        }
        rates.sort();
        let n = rates.len();
        if n.is_multiple_of(2) {
            DataRate::from_bps((rates[n / 2 - 1].as_bps() + rates[n / 2].as_bps()) / 2)
        } else {
            rates[n / 2]
        }
    }

    /// `CalculateInstantLowerBound` (M156): the acknowledged rate times
    /// `lower_bound_by_acked_rate_factor`, at least the min bitrate; none under M119.
    fn calculate_instant_lower_bound(&mut self) {
        let Some(m) = &self.config.m156 else { return };
        let mut bound = DataRate::ZERO;
        if let Some(acked) = self.acknowledged_bitrate {
            if m.lower_bound_by_acked_rate_factor > 0.0 {
                bound = mul(acked, m.lower_bound_by_acked_rate_factor);
            }
        }
        self.cached_instant_lower_bound = Some(bound.max(self.min_bitrate));
    }

    /// `GetInstantLowerBound` (M156): zero until computed.
    pub fn instant_lower_bound(&self) -> DataRate {
        self.cached_instant_lower_bound.unwrap_or(DataRate::ZERO)
    }

    /// Packet loss ratio (M119's `GetAverageReportedLossRatio`, M156's
    /// `CalculateAverageReportedPacketLossRatio`): lost / sent packets, each observation
    /// weighted by `instant_upper_bound_temporal_weight_factor^age`; 0 without observations.
    fn packet_loss_ratio(&self) -> f64 {
        let (mut packets, mut lost) = (0.0, 0.0);
        for (age, o) in self.observations_by_age() {
            let w = self.instant_upper_bound_temporal_weights[age];
            packets += w * o.packets as f64;
            lost += w * o.lost as f64;
        }
        if packets > 0.0 {
            lost / packets
        } else {
            0.0
        }
    }

    /// `GetCandidateBandwidthUpperBound`.
    fn candidate_bandwidth_upper_bound(&self) -> DataRate {
        let mut bound = self.max_bitrate;
        if self.is_bandwidth_limited_due_to_loss()
            && self.bandwidth_limit_in_current_window.is_finite()
        {
            bound = self.bandwidth_limit_in_current_window;
        }
        let Some(acked) = self.acknowledged_bitrate else { return bound };
        if self.config.rampup_acceleration_max_factor > 0.0 {
            let since_reduced = match (
                self.last_send_time_most_recent_observation,
                self.last_time_estimate_reduced,
            ) {
                (Some(l), Some(r)) => ts_sub(l, r).max(TimeDelta::ZERO),
                // Never reduced: as long ago as it gets.
                _ => self.config.rampup_acceleration_maxout_time,
            };
            let maxout = self.config.rampup_acceleration_maxout_time;
            let fraction = since_reduced.min(maxout) / maxout;
            bound += mul(acked, self.config.rampup_acceleration_max_factor * fraction);
        }
        bound
    }

    /// `GetCandidates`.
    fn candidates(&self, current: Channel, in_alr: bool) -> Vec<Channel> {
        let mut bandwidths: Vec<DataRate> =
            self.config.candidate_factors.iter().map(|f| mul(current.bandwidth, *f)).collect();
        if let Some(acked) = self.acknowledged_bitrate {
            if self.config.append_acknowledged_rate_candidate
                && (!(self.config.not_use_acked_rate_in_alr && in_alr) || self.padding_recently())
            {
                bandwidths.push(mul(acked, self.config.bandwidth_backoff_lower_bound_factor));
            }
        }
        if self.config.append_delay_based_estimate_candidate
            && self.delay_based_estimate.is_finite()
            && self.delay_based_estimate > current.bandwidth
        {
            bandwidths.push(self.delay_based_estimate);
        }
        if in_alr
            && self.config.m156.as_ref().is_some_and(|m| m.append_upper_bound_candidate_in_alr)
            && current.bandwidth > self.instant_upper_bound()
        {
            bandwidths.push(self.instant_upper_bound());
        }
        let cap = current.bandwidth.max(self.candidate_bandwidth_upper_bound());
        bandwidths
            .into_iter()
            .map(|b| {
                let mut c = Channel { inherent_loss: current.inherent_loss, bandwidth: b.min(cap) };
                c.inherent_loss = self.feasible_inherent_loss(c);
                c
            })
            .collect()
    }

    /// M156: padding started within `padding_duration` of the newest observation.
    fn padding_recently(&self) -> bool {
        let Some(m) = &self.config.m156 else { return false };
        match (self.padding.since, self.last_send_time_most_recent_observation) {
            (Some(since), Some(last)) => {
                m.padding_duration > TimeDelta::ZERO && ts_add(since, m.padding_duration) >= last
            }
            _ => false,
        }
    }

    /// An observation's (lost, received, total) in the likelihood's unit: packets, or kB
    /// under M156's byte loss rate.
    fn counts(&self, o: &Observation) -> (f64, f64, f64) {
        if self.config.m156.as_ref().is_some_and(|m| m.use_byte_loss_rate) {
            let kb = |s: DataSize| s.as_bytes() as f64 / 1000.0;
            let received = DataSize::from_bytes(o.size.as_bytes() - o.lost_size.as_bytes());
            (kb(o.lost_size), kb(received), kb(o.size))
        } else {
            (o.lost as f64, o.received as f64, o.packets as f64)
        }
    }

    /// `GetFeasibleInherentLoss` (NaN-safe: a NaN becomes the lower bound).
    fn feasible_inherent_loss(&self, c: Channel) -> f64 {
        c.inherent_loss
            .max(self.config.inherent_loss_lower_bound)
            .min(self.inherent_loss_upper_bound(c.bandwidth))
    }

    /// `GetInherentLossUpperBound`.
    fn inherent_loss_upper_bound(&self, bandwidth: DataRate) -> f64 {
        if bandwidth <= DataRate::ZERO {
            return 1.0;
        }
        let balance = self.config.inherent_loss_upper_bound_bandwidth_balance;
        (self.config.inherent_loss_upper_bound_offset + balance / bandwidth).min(1.0)
    }

    /// `AdjustBiasFactor`.
    fn adjust_bias_factor(&self, loss: f64, factor: f64) -> f64 {
        let threshold = self.config.loss_threshold_of_high_bandwidth_preference;
        factor * (threshold - loss)
            / (self.config.bandwidth_preference_smoothing_factor + (threshold - loss).abs())
    }

    /// `GetHighBandwidthBias`.
    fn high_bandwidth_bias(&self, bandwidth: DataRate) -> f64 {
        if !bandwidth.is_finite() {
            return 0.0;
        }
        let loss = self.average_reported_loss_ratio();
        let kbps = kbps_rounded(bandwidth).max(0.0);
        self.adjust_bias_factor(loss, self.config.higher_bandwidth_bias_factor) * kbps
            + self.adjust_bias_factor(loss, self.config.higher_log_bandwidth_bias_factor)
                * (1.0 + kbps).ln()
    }

    /// `GetObjective`: the temporally weighted log-likelihood plus the bandwidth bias.
    fn objective(&self, c: Channel) -> f64 {
        let bias = self.high_bandwidth_bias(c.bandwidth);
        let mut objective = 0.0;
        for (age, o) in self.observations_by_age() {
            let p = loss_probability(c.inherent_loss, c.bandwidth, o.sending_rate);
            let w = self.temporal_weights[age];
            let (lost, received, total) = self.counts(o);
            objective += w * (lost * p.ln() + received * (1.0 - p).ln());
            objective += w * bias * total;
        }
        objective
    }

    /// `GetDerivatives` of the log-likelihood with respect to the inherent loss (the second
    /// derivative is forced negative, as libwebrtc does).
    fn derivatives(&self, c: Channel) -> (f64, f64) {
        let (mut first, mut second) = (0.0, 0.0);
        for (age, o) in self.observations_by_age() {
            let p = loss_probability(c.inherent_loss, c.bandwidth, o.sending_rate);
            let w = self.temporal_weights[age];
            let (lost, received, _) = self.counts(o);
            first += w * (lost / p - received / (1.0 - p));
            second -= w * (lost / (p * p) + received / ((1.0 - p) * (1.0 - p)));
        }
        if second.is_nan() || second >= 0.0 {
            second = -1.0e-6;
        }
        (first, second)
    }

    /// `NewtonsMethodUpdate`.
    fn newton_update(&self, c: &mut Channel) {
        if self.num_observations == 0 {
            return;
        }
        for _ in 0..self.config.newton_iterations {
            let (first, second) = self.derivatives(*c);
            c.inherent_loss -= self.config.newton_step_size * first / second;
            c.inherent_loss = self.feasible_inherent_loss(*c);
        }
    }

    /// `CalculateInstantUpperBound`.
    fn calculate_instant_upper_bound(&mut self) {
        let mut limit = self.max_bitrate;
        let loss = self.average_reported_loss_ratio();
        let offset = self.config.instant_upper_bound_loss_offset;
        if loss > offset {
            let balance = self.config.instant_upper_bound_bandwidth_balance;
            // libwebrtc's `DataRate / double`: rounded to the nearest bit per second.
            limit = DataRate::from_bps_f64(
                (balance.as_bps() as f64 / (loss - offset)).min(RATE_CEILING.as_bps() as f64),
            );
            if loss > self.config.high_loss_rate_threshold && self.config.m156.is_none() {
                let kbps = kbps_rounded(self.min_bitrate).max(
                    kbps_rounded(self.config.bandwidth_cap_at_high_loss_rate)
                        - self.config.slope_of_bwe_high_loss_func * loss,
                );
                // `DataRate::KilobitsPerSec(double)` truncates to whole bits per second.
                let bps = (kbps * 1000.0).trunc().min(RATE_CEILING.as_bps() as f64);
                limit = limit.min(DataRate::from_bps_f64(bps));
            }
        }
        self.cached_instant_upper_bound = Some(limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::SentPacket;

    const PKT: DataSize = DataSize::from_bytes(1200);

    fn kbps(k: i64) -> DataRate {
        DataRate::from_kbps(k)
    }
    fn ms(m: i64) -> Timestamp {
        Timestamp::from_ms(m)
    }

    /// A paced sender: 1200 B packets back to back at the given rate, continuing its
    /// schedule across reports; packet i is lost when floor(loss * (i + 1)) steps up, a
    /// deterministic pattern with exactly the given long-run loss ratio.
    pub(super) struct Stream {
        seq: u64,
        next_send: Timestamp,
        lost_acc: f64,
    }

    impl Stream {
        pub(super) fn new() -> Self {
            Stream { seq: 0, next_send: Timestamp::ZERO, lost_acc: 0.0 }
        }
        /// The packets sent before `until` at `rate` with the given loss ratio.
        pub(super) fn report(
            &mut self,
            until: Timestamp,
            rate: DataRate,
            loss: f64,
        ) -> Vec<PacketResult> {
            let mut out = Vec::new();
            while self.next_send < until {
                let before = self.lost_acc.floor();
                self.lost_acc += loss;
                let lost = self.lost_acc.floor() > before;
                let t = self.next_send;
                out.push(PacketResult {
                    sent: SentPacket {
                        transport_seq: self.seq,
                        send_time: t,
                        size: PKT,
                        probe_cluster_id: None,
                        is_padding: false,
                        data_in_flight: DataSize::ZERO,
                    },
                    receive_time: if lost { None } else { Some(t + TimeDelta::from_ms(20)) },
                    rtt: None,
                });
                self.seq += 1;
                self.next_send = t + PKT / rate;
            }
            out
        }
    }

    fn estimator() -> LossBasedBweV2 {
        let mut e = LossBasedBweV2::new(LossBasedBweV2Config::default());
        e.set_min_max_bitrate(kbps(5), DataRate::from_mbps(200));
        e
    }

    /// libwebrtc's unit-test feedback shapes: 15 000 B packets sent 200 ms apart from
    /// `first`, each received 200 ms after sending unless `lost[i]`.
    fn webrtc_feedback(first: Timestamp, lost: &[bool]) -> Vec<PacketResult> {
        lost.iter()
            .enumerate()
            .map(|(i, &l)| {
                let send = first + TimeDelta::from_ms(200) * i as i64;
                PacketResult {
                    sent: SentPacket {
                        transport_seq: i as u64,
                        send_time: send,
                        size: DataSize::from_bytes(15_000),
                        probe_cluster_id: None,
                        is_padding: false,
                        data_in_flight: DataSize::ZERO,
                    },
                    receive_time: (!l).then(|| send + TimeDelta::from_ms(200)),
                    rtt: None,
                }
            })
            .collect()
    }
    const NO_LOSS: [bool; 2] = [false, false];
    const HALF_LOST: [bool; 2] = [false, true];
    const ALL_LOST: [bool; 2] = [true, true];
    const TENTH_LOST: [bool; 10] =
        [false, false, false, false, false, false, false, false, false, true];

    /// The common configuration of libwebrtc's `LossBasedBweV2Test` (its `Config(true, true,
    /// false)`).
    fn webrtc_test_config() -> LossBasedBweV2Config {
        LossBasedBweV2Config {
            bandwidth_rampup_upper_bound_factor: 1.2,
            candidate_factors: vec![1.1, 1.0, 0.95],
            higher_bandwidth_bias_factor: 0.01,
            inherent_loss_lower_bound: 0.001,
            inherent_loss_upper_bound_bandwidth_balance: kbps(14),
            inherent_loss_upper_bound_offset: 0.9,
            initial_inherent_loss_estimate: 0.01,
            newton_iterations: 2,
            newton_step_size: 0.4,
            observation_window_size: 15,
            sending_rate_smoothing_factor: 0.01,
            instant_upper_bound_temporal_weight_factor: 0.97,
            instant_upper_bound_bandwidth_balance: kbps(90),
            instant_upper_bound_loss_offset: 0.1,
            temporal_weight_factor: 0.98,
            observation_duration_lower_bound: TimeDelta::from_ms(200),
            max_increase_factor: 1.5,
            delayed_increase_window: TimeDelta::from_ms(300),
            ..LossBasedBweV2Config::default()
        }
    }

    /// Shorthand for the small-window configurations of libwebrtc's later tests.
    fn webrtc_small_config(
        factors: &[f64],
        acked_candidate: bool,
        ub_balance: i64,
    ) -> LossBasedBweV2Config {
        LossBasedBweV2Config {
            candidate_factors: factors.to_vec(),
            append_acknowledged_rate_candidate: acked_candidate,
            observation_window_size: 2,
            instant_upper_bound_bandwidth_balance: kbps(ub_balance),
            observation_duration_lower_bound: TimeDelta::from_ms(200),
            ..LossBasedBweV2Config::default()
        }
    }

    fn update(e: &mut LossBasedBweV2, fb: &[PacketResult], delay: DataRate) {
        e.update_bandwidth_estimate(fb, delay, false, Timestamp::ZERO);
    }

    #[test]
    fn parity_with_libwebrtc_unit_test_expectations() {
        let t = |m: i64| Timestamp::from_ms(m);
        // One loss-free observation from 600 kbps without a delay-based limit: the 1.1
        // candidate wins (SetAcknowledgedBitrateOnlyAffectsTheBweWhenAdditionalFeedbackIsGiven).
        let mut e = LossBasedBweV2::new(webrtc_test_config());
        e.set_bandwidth_estimate(kbps(600));
        update(&mut e, &webrtc_feedback(t(0), &NO_LOSS), DataRate::INFINITY);
        assert_eq!(e.result().bandwidth_estimate, kbps(660));

        // All lost: the instant upper bound 90 kbps / (1 - 0.1) = 100 kbps
        // (BandwidthEstimateIsCappedToBeTcpFairGivenTooHighLossRate).
        let mut e = LossBasedBweV2::new(webrtc_test_config());
        e.set_bandwidth_estimate(kbps(600));
        update(&mut e, &webrtc_feedback(t(0), &ALL_LOST), DataRate::INFINITY);
        assert_eq!(e.result().bandwidth_estimate, kbps(100));

        // Loss-free with a 5 Mbps delay-based estimate: the result is the delay-based one
        // (IncreaseToDelayBasedEstimateIfNoLossOrDelayIncrease).
        let mut e = LossBasedBweV2::new(webrtc_test_config());
        e.set_bandwidth_estimate(kbps(600));
        update(&mut e, &webrtc_feedback(t(0), &NO_LOSS), kbps(5000));
        assert_eq!(e.result().bandwidth_estimate, kbps(5000));
        update(&mut e, &webrtc_feedback(t(400), &NO_LOSS), kbps(5000));
        assert_eq!(e.result().bandwidth_estimate, kbps(5000));

        // After a back-off to the acked rate, the next increase is 1.5x
        // (IncreaseByMaxIncreaseFactorAfterLossBasedBweBacksOff).
        let mut e = LossBasedBweV2::new(LossBasedBweV2Config {
            max_increase_factor: 1.5,
            bandwidth_rampup_upper_bound_factor: 2.0,
            not_increase_if_inherent_loss_less_than_average_loss: false,
            ..webrtc_small_config(&[1.2, 1.0, 0.5], true, 10_000)
        });
        e.set_bandwidth_estimate(kbps(600));
        e.set_acknowledged_bitrate(kbps(300));
        update(&mut e, &webrtc_feedback(t(0), &ALL_LOST), kbps(5000));
        let at_loss = e.result().bandwidth_estimate;
        assert_eq!(e.result().state, LossBasedState::Decreasing);
        e.set_acknowledged_bitrate(kbps(600));
        update(&mut e, &webrtc_feedback(t(200), &NO_LOSS), kbps(5000));
        assert_eq!(e.result().bandwidth_estimate, mul(at_loss, 1.5));

        // The increase after a back-off is capped at 1.2 x the acked rate
        // (IncreaseByFactorOfAckedBitrateAfterLossBasedBweBacksOff).
        let mut e = LossBasedBweV2::new(LossBasedBweV2Config {
            loss_threshold_of_high_bandwidth_preference: 0.99,
            bandwidth_rampup_upper_bound_factor: 1.2,
            inherent_loss_upper_bound_offset: 0.9,
            observation_duration_lower_bound: TimeDelta::from_ms(200),
            ..LossBasedBweV2Config::default()
        });
        e.set_bandwidth_estimate(kbps(600));
        e.set_acknowledged_bitrate(kbps(300));
        update(&mut e, &webrtc_feedback(t(0), &ALL_LOST), kbps(5000));
        e.set_acknowledged_bitrate(kbps(50));
        update(&mut e, &webrtc_feedback(t(200), &TENTH_LOST), kbps(5000));
        assert_eq!(e.result().bandwidth_estimate, kbps(60));

        // No increase while the average loss exceeds the inherent loss
        // (NotIncreaseIfInherentLossLessThanAverageLoss).
        let mut e = LossBasedBweV2::new(webrtc_small_config(&[1.2], false, 100));
        e.set_bandwidth_estimate(kbps(600));
        update(&mut e, &webrtc_feedback(t(0), &TENTH_LOST), kbps(5000));
        update(&mut e, &webrtc_feedback(t(200), &TENTH_LOST), kbps(5000));
        assert_eq!(e.result().bandwidth_estimate, kbps(600));

        // 10 % loss with the high-loss cap from 9 %: 500 - 1000 * 0.1 = 400 kbps
        // (StricterBoundUsingHighLossRateThresholdAt10pLossRate).
        let high_loss = |threshold: f64| LossBasedBweV2Config {
            higher_bandwidth_bias_factor: 1000.0,
            higher_log_bandwidth_bias_factor: 1000.0,
            loss_threshold_of_high_bandwidth_preference: 0.05,
            high_loss_rate_threshold: threshold,
            ..webrtc_small_config(&[1.0], false, 100)
        };
        let mut e = LossBasedBweV2::new(high_loss(0.09));
        e.set_min_max_bitrate(kbps(10), kbps(1_000_000));
        e.set_bandwidth_estimate(kbps(600));
        update(&mut e, &webrtc_feedback(t(0), &TENTH_LOST), kbps(5000));
        update(&mut e, &webrtc_feedback(t(200), &TENTH_LOST), kbps(5000));
        assert_eq!(e.result().bandwidth_estimate, kbps(400));
        // 50 % and 100 % loss above a 30 % threshold: the min bitrate (...At50pLossRate,
        // ...At100pLossRate).
        for lost in [HALF_LOST, ALL_LOST] {
            let mut e = LossBasedBweV2::new(high_loss(0.3));
            e.set_min_max_bitrate(kbps(10), kbps(1_000_000));
            e.set_bandwidth_estimate(kbps(600));
            update(&mut e, &webrtc_feedback(t(0), &lost), kbps(5000));
            update(&mut e, &webrtc_feedback(t(200), &lost), kbps(5000));
            assert_eq!(e.result().bandwidth_estimate, kbps(10));
        }

        // All lost outside ALR: back to the acked rate; in ALR with NotUseAckedRateInAlr:
        // between the acked rate and the old estimate (BackOffToAckedRateIfNotInAlr,
        // NotBackOffToAckedRateInAlr).
        for in_alr in [false, true] {
            let mut e = LossBasedBweV2::new(LossBasedBweV2Config {
                not_use_acked_rate_in_alr: true,
                ..webrtc_small_config(&[1.1, 1.0, 0.9], true, 100)
            });
            e.set_min_max_bitrate(kbps(10), kbps(1_000_000));
            e.set_bandwidth_estimate(kbps(600));
            e.set_acknowledged_bitrate(kbps(100));
            e.update_bandwidth_estimate(
                &webrtc_feedback(t(0), &ALL_LOST),
                kbps(5000),
                in_alr,
                t(0),
            );
            let r = e.result().bandwidth_estimate;
            if in_alr {
                assert!(r > kbps(100) && r < kbps(600), "{r:?}");
            } else {
                assert_eq!(r, kbps(100));
            }
        }

        // The delayed-increase window: an update whose packets were sent within 300 ms of
        // the back-off keeps the estimate (EstimateBitrateIsBoundedDuringDelayedWindow...).
        let mut e = LossBasedBweV2::new(webrtc_test_config());
        e.set_bandwidth_estimate(kbps(600));
        e.set_acknowledged_bitrate(kbps(300));
        update(&mut e, &webrtc_feedback(t(0), &NO_LOSS), kbps(5000));
        e.set_acknowledged_bitrate(kbps(5000));
        update(&mut e, &webrtc_feedback(t(298), &HALF_LOST), kbps(5000));
        let estimate_2 = e.result().bandwidth_estimate;
        update(&mut e, &webrtc_feedback(t(299), &NO_LOSS), kbps(5000));
        assert_eq!(e.result().bandwidth_estimate, estimate_2);
    }

    /// A closed loop: the sender sends at v2's result, a link of `capacity` drops the share
    /// above it, the acknowledged rate is the delivered rate min(send, capacity) and the
    /// delay-based estimate is pinned at `delay_based` (a shallow buffer: loss, no delay
    /// signal). Reports every 50 ms. Returns (send rate, loss ratio, result, inherent loss)
    /// per report.
    fn closed_loop(
        e: &mut LossBasedBweV2,
        reports: i64,
        capacity: impl Fn(i64) -> DataRate,
        delay_based: DataRate,
    ) -> Vec<(DataRate, f64, LossBasedResult, f64)> {
        let mut s = Stream::new();
        let mut rate = delay_based;
        let mut out = Vec::new();
        for i in 1..=reports {
            let now = ms(50 * i);
            let c = capacity(i);
            let loss = (1.0 - c.as_bps() as f64 / rate.as_bps() as f64).max(0.0);
            e.set_acknowledged_bitrate(rate.min(c));
            let packets = s.report(now, rate, loss);
            e.update_bandwidth_estimate(&packets, delay_based, false, now);
            let r = e.result();
            out.push((rate, loss, r, e.inherent_loss()));
            rate = r.bandwidth_estimate;
        }
        out
    }

    #[test]
    fn config_defaults_and_json_round_trip() {
        let c = LossBasedBweV2Config::default();
        assert!(c.enabled);
        assert_eq!(c.bandwidth_rampup_upper_bound_factor, 1_000_000.0);
        assert_eq!(c.rampup_acceleration_max_factor, 0.0);
        assert_eq!(c.rampup_acceleration_maxout_time, TimeDelta::from_secs(60));
        assert_eq!(c.candidate_factors, vec![1.02, 1.0, 0.95]);
        assert_eq!(c.higher_bandwidth_bias_factor, 0.0002);
        assert_eq!(c.higher_log_bandwidth_bias_factor, 0.02);
        assert_eq!(c.inherent_loss_lower_bound, 0.001);
        assert_eq!(c.loss_threshold_of_high_bandwidth_preference, 0.15);
        assert_eq!(c.bandwidth_preference_smoothing_factor, 0.002);
        assert_eq!(c.inherent_loss_upper_bound_bandwidth_balance, kbps(75));
        assert_eq!(c.inherent_loss_upper_bound_offset, 0.05);
        assert_eq!(c.initial_inherent_loss_estimate, 0.01);
        assert_eq!(c.newton_iterations, 1);
        assert_eq!(c.newton_step_size, 0.75);
        assert!(c.append_acknowledged_rate_candidate);
        assert!(c.append_delay_based_estimate_candidate);
        assert_eq!(c.observation_duration_lower_bound, TimeDelta::from_ms(250));
        assert_eq!(c.observation_window_size, 20);
        assert_eq!(c.sending_rate_smoothing_factor, 0.0);
        assert_eq!(c.instant_upper_bound_temporal_weight_factor, 0.9);
        assert_eq!(c.instant_upper_bound_bandwidth_balance, kbps(75));
        assert_eq!(c.instant_upper_bound_loss_offset, 0.05);
        assert_eq!(c.temporal_weight_factor, 0.9);
        assert_eq!(c.bandwidth_backoff_lower_bound_factor, 1.0);
        assert_eq!(c.max_increase_factor, 1.3);
        assert_eq!(c.delayed_increase_window, TimeDelta::from_ms(300));
        assert!(c.not_increase_if_inherent_loss_less_than_average_loss);
        assert_eq!(c.high_loss_rate_threshold, 1.0);
        assert_eq!(c.bandwidth_cap_at_high_loss_rate, kbps(500));
        assert_eq!(c.slope_of_bwe_high_loss_func, 1000.0);
        assert!(!c.probe_integration_enabled);
        assert_eq!(c.probe_expiration, TimeDelta::from_secs(10));
        assert!(!c.not_use_acked_rate_in_alr);
        assert!(!c.use_in_start_phase);
        assert!(c.problems().is_empty(), "{:?}", c.problems());

        // Rates are bits per second, durations microseconds; missing fields take defaults.
        let j: LossBasedBweV2Config = serde_json::from_str(
            r#"{"observation_window_size": 15, "candidate_factors": [1.1, 1.0, 0.95],
                "instant_upper_bound_bandwidth_balance": 90000,
                "observation_duration_lower_bound": 200000}"#,
        )
        .unwrap();
        assert_eq!(j.observation_window_size, 15);
        assert_eq!(j.candidate_factors, vec![1.1, 1.0, 0.95]);
        assert_eq!(j.instant_upper_bound_bandwidth_balance, kbps(90));
        assert_eq!(j.observation_duration_lower_bound, TimeDelta::from_ms(200));
        assert_eq!(j.temporal_weight_factor, 0.9);
        let back: LossBasedBweV2Config =
            serde_json::from_str(&serde_json::to_string(&j).unwrap()).unwrap();
        assert_eq!(back, j);
        let d: LossBasedBweV2Config = serde_json::from_str("{}").unwrap();
        assert_eq!(d, c);
        // Unknown keys (including the unimplemented trendline integration) are errors.
        assert!(serde_json::from_str::<LossBasedBweV2Config>(
            r#"{"trendline_integration_enabled": true}"#
        )
        .is_err());

        // Invalid values disable the estimator, as libwebrtc's IsConfigValid does.
        for bad in [
            LossBasedBweV2Config { observation_window_size: 1, ..c.clone() },
            LossBasedBweV2Config { candidate_factors: vec![0.0, 1.1], ..c.clone() },
            LossBasedBweV2Config { bandwidth_rampup_upper_bound_factor: 1.0, ..c.clone() },
            LossBasedBweV2Config { temporal_weight_factor: f64::NAN, ..c.clone() },
            LossBasedBweV2Config {
                candidate_factors: vec![1.0],
                append_acknowledged_rate_candidate: false,
                append_delay_based_estimate_candidate: false,
                ..c.clone()
            },
        ] {
            assert!(!bad.problems().is_empty());
            assert!(!LossBasedBweV2::new(bad).is_enabled());
        }
        assert!(!LossBasedBweV2::new(LossBasedBweV2Config { enabled: false, ..c }).is_enabled());
    }

    #[test]
    fn not_ready_before_the_first_observation() {
        let mut e = estimator();
        assert!(!e.is_ready());
        let mut s = Stream::new();
        // 1 Mbps of 1200 B packets: one every 9.6 ms. The first report (sent 0-200 ms) only
        // starts the clock at the first send time, 0 ms.
        e.update_bandwidth_estimate(&s.report(ms(200), kbps(1000), 0.0), kbps(800), false, ms(200));
        assert!(!e.is_ready());
        assert_eq!(e.num_observations(), 0);
        assert_eq!(
            e.result(),
            LossBasedResult {
                bandwidth_estimate: kbps(800),
                state: LossBasedState::DelayBasedEstimate
            }
        );
        // Newest send time 240 ms (packet 25 at 25 * 9.6 ms): 240 ms < 250 ms, still nothing.
        e.update_bandwidth_estimate(&s.report(ms(249), kbps(1000), 0.0), kbps(800), false, ms(249));
        assert!(!e.is_ready());
        // An empty report and a report from the past change nothing.
        e.update_bandwidth_estimate(&[], kbps(800), false, ms(250));
        let mut old = Stream::new();
        e.update_bandwidth_estimate(
            &old.report(ms(100), kbps(1000), 0.0),
            kbps(800),
            false,
            ms(250),
        );
        assert!(!e.is_ready());
        // Newest send time 249.6 ms: still below 250 ms. 259.2 ms closes the first observation.
        e.update_bandwidth_estimate(&s.report(ms(250), kbps(1000), 0.0), kbps(800), false, ms(250));
        assert_eq!(e.num_observations(), 0);
        e.update_bandwidth_estimate(&s.report(ms(260), kbps(1000), 0.0), kbps(800), false, ms(260));
        assert_eq!(e.num_observations(), 1);
        // Packets 0..=27 (sent 0 to 259.2 ms) plus the 11 stale ones of the report from the
        // past (reports that close no observation still add to the next one): 39 * 9600 bit
        // over the 259.2 ms span from the first send time = 1 444 444 bps (truncated). The
        // first packet's bytes count although its send time opens the span, as in libwebrtc.
        assert_eq!(e.newest_observation(), Some((39, 0, DataRate::from_bps(1_444_444))));
        assert!(e.is_ready());
        assert_eq!(e.result().bandwidth_estimate, kbps(800));

        // Without a delay-based estimate there is nothing to seed the estimate with: the
        // observation is kept, but the estimator only becomes ready once one arrives.
        let mut e = estimator();
        let mut s = Stream::new();
        for i in 1..=12 {
            e.update_bandwidth_estimate(
                &s.report(ms(50 * i), kbps(1000), 0.0),
                DataRate::ZERO,
                false,
                ms(50 * i),
            );
        }
        assert_eq!(e.num_observations(), 2);
        assert!(!e.is_ready());
        for i in 13..=18 {
            e.update_bandwidth_estimate(
                &s.report(ms(50 * i), kbps(1000), 0.0),
                kbps(700),
                false,
                ms(50 * i),
            );
        }
        assert!(e.is_ready());
        assert_eq!(e.result().bandwidth_estimate, kbps(700));
        assert!(!e.ready_to_use_in_start_phase());

        // A disabled estimator never becomes ready and passes the delay-based estimate on.
        let mut e =
            LossBasedBweV2::new(LossBasedBweV2Config { enabled: false, ..Default::default() });
        let mut s = Stream::new();
        for i in 1..=20 {
            e.update_bandwidth_estimate(
                &s.report(ms(50 * i), kbps(1000), 0.5),
                kbps(900),
                false,
                ms(50 * i),
            );
        }
        assert!(!e.is_ready());
        assert_eq!(e.result().bandwidth_estimate, kbps(900));
    }

    #[test]
    fn without_loss_the_result_is_the_delay_based_estimate() {
        let mut e = estimator();
        let mut s = Stream::new();
        // The delay-based estimate changes every 2 s; the sender sends at the result.
        let delay_based = [kbps(1000), kbps(3000), kbps(800), kbps(2000), kbps(5000)];
        let mut rate = delay_based[0];
        let mut changed_at = ms(0);
        let mut previous = delay_based[0];
        for i in 1..=200 {
            let now = ms(50 * i);
            let d = delay_based[(i as usize - 1) / 40];
            if d != previous {
                changed_at = now;
                previous = d;
            }
            e.set_acknowledged_bitrate(rate);
            e.update_bandwidth_estimate(&s.report(now, rate, 0.0), d, false, now);
            let r = e.result();
            assert!(r.bandwidth_estimate <= d, "{now:?}: {r:?} above {d:?}");
            assert_eq!(r.state, LossBasedState::DelayBasedEstimate, "{now:?}");
            // Once ready, an increase of the delay-based estimate is taken over within one
            // observation (250 ms of send time, closed by the next 50 ms report), a decrease
            // at once (the result is capped by it).
            if e.is_ready() && now - changed_at >= TimeDelta::from_ms(350) {
                assert_eq!(r.bandwidth_estimate, d, "{now:?}");
            }
            if e.is_ready() && d < rate {
                assert_eq!(r.bandwidth_estimate, d, "{now:?}");
            }
            rate = r.bandwidth_estimate;
        }
        // Loss-free, the loss-limited estimate only grows (2 % per observation, or to the
        // delay-based estimate), and the inherent loss sits at its lower bound.
        assert!(e.loss_limited_bandwidth().unwrap() >= kbps(5000));
        assert_eq!(e.inherent_loss(), 0.001);
        assert_eq!(e.average_reported_loss_ratio(), 0.0);
    }

    #[test]
    fn loss_explained_by_capacity_pulls_the_estimate_to_send_rate_times_one_minus_loss() {
        // The delay-based estimate overshoots a 1 Mbps link by 25 %. The first observation
        // sees S = 1.25 Mbps and p = 20 % loss, which the loss model with inherent loss ~0
        // explains by a capacity of S (1 - p) = 1.25 * 0.8 = 1.0 Mbps: the acknowledged-rate
        // candidate. Explaining it as inherent loss instead would need L = 0.2, above the
        // bound 0.05 + 75 kbps / 1.25 Mbps = 0.11.
        let mut e = estimator();
        let run = closed_loop(&mut e, 400, |_| kbps(1000), kbps(1250));
        let first = run.iter().position(|x| x.2.state != LossBasedState::DelayBasedEstimate);
        let (s, p, r, l) = run[first.unwrap()];
        assert_eq!(s, kbps(1250));
        assert!((p - 0.2).abs() < 1e-9);
        assert_eq!(l, 0.001);
        assert_eq!(r.state, LossBasedState::Decreasing);
        // The result is first held lower by the instant upper bound: 75 kbps / (0.2 - 0.05)
        // = 500 kbps.
        assert_eq!(r.bandwidth_estimate, kbps(500));
        // It then settles at the capacity, below the lossy send rate, and the loss stops.
        // It then settles at the capacity. Every ~7 s, once the 20-observation window holds
        // no loss, it tries the delay-based estimate again, sees 20 % loss and steps back
        // down to the capacity (0.95 per observation) within ~1.5 s.
        let tail = &run[100..];
        let n = tail.len() as f64;
        let mean = tail.iter().map(|x| x.2.bandwidth_estimate.as_bps_f64()).sum::<f64>() / n;
        assert!((950_000.0..=1_100_000.0).contains(&mean), "mean {mean}");
        let at_capacity = tail.iter().filter(|x| x.2.bandwidth_estimate == kbps(1000)).count();
        assert!(at_capacity as f64 > 0.7 * n, "{at_capacity} of {n} at 1 Mbps");
        let mean_loss = tail.iter().map(|x| x.1).sum::<f64>() / n;
        assert!(mean_loss < 0.04, "mean loss {mean_loss}");
    }

    #[test]
    fn ten_percent_loss_at_a_constant_rate_is_taken_as_inherent_loss() {
        // M119's default behaviour, unlike the simple reading "loss p at rate S means capacity
        // S (1 - p)": the delay-based estimate overshoots a 1 Mbps link by 10 % and the
        // sender follows the result. p = 1 - 1/1.1 = 9.1 %. At one sending rate the model
        // cannot tell capacity from random loss, inherent loss up to 0.05 + 75/1100 = 0.118
        // is allowed, and the high-bandwidth preference (positive below 15 % loss) picks the
        // higher bandwidth: the estimate stays at the send rate, the inherent loss rises to
        // ~p and the loss goes on. Only the instant upper bound, 75 kbps / (0.091 - 0.05) =
        // 1.83 Mbps, would cap it, and it is above the send rate.
        let mut e = estimator();
        let run = closed_loop(&mut e, 400, |_| kbps(1000), kbps(1100));
        assert!(run.iter().all(|x| x.2.bandwidth_estimate == kbps(1100)));
        let l = e.inherent_loss();
        assert!((0.07..=0.11).contains(&l), "inherent loss {l}");
        assert!(run[300..].iter().all(|x| (x.1 - 1.0 / 11.0).abs() < 1e-9));
        let ub = e.instant_upper_bound();
        assert!(ub > kbps(1500) && ub < kbps(2200), "{ub:?}");
    }

    #[test]
    fn a_single_lossy_window_does_not_crater_the_estimate() {
        // 10 s loss-free at 1 Mbps (delay-based 1 Mbps), then 250 ms of reports with 30 %
        // loss, then loss-free again. v1 would cut 15 % (rate * (1 - 0.5 * 0.3)) on such a
        // report. Here the lossy observation is one of 20, weighted 1 against
        // sum(0.9^age, age < 20) = 8.78 for equal packet counts, so the average loss is
        // ~0.3 / 8.78 = 3.4 %, below the 5 % offset of the instant upper bound; the fit
        // explains it with a little inherent loss at the same send rate.
        let mut e = estimator();
        let mut s = Stream::new();
        let d = kbps(1000);
        for i in 1..=200 {
            e.set_acknowledged_bitrate(d);
            e.update_bandwidth_estimate(&s.report(ms(50 * i), d, 0.0), d, false, ms(50 * i));
        }
        assert!(e.num_observations() >= 20);
        let mut max_avg: f64 = 0.0;
        for i in 201..=300 {
            let loss = if (201..=205).contains(&i) { 0.3 } else { 0.0 };
            e.set_acknowledged_bitrate(d.scale(1.0 - loss));
            e.update_bandwidth_estimate(&s.report(ms(50 * i), d, loss), d, false, ms(50 * i));
            max_avg = max_avg.max(e.average_reported_loss_ratio());
            assert_eq!(e.result().bandwidth_estimate, d, "report {i}");
        }
        assert!((0.02..0.05).contains(&max_avg), "average loss peaked at {max_avg}");
        assert_eq!(e.result().state, LossBasedState::DelayBasedEstimate);

        // The same 30 % loss sustained does cut: the average reaches 0.3 and the instant
        // upper bound 75 kbps / (0.3 - 0.05) = 300 kbps.
        for i in 301..=500 {
            e.set_acknowledged_bitrate(d.scale(0.7));
            e.update_bandwidth_estimate(&s.report(ms(50 * i), d, 0.3), d, false, ms(50 * i));
        }
        let r = e.result().bandwidth_estimate;
        assert!(r <= kbps(310) && r >= kbps(290), "{r:?}");
    }

    #[test]
    fn the_instant_upper_bound_caps_the_estimate_under_high_loss() {
        // 40 packets of 1200 B every 250 ms (1.536 Mbps), every 4th lost: each observation
        // has exactly 25 % loss, so the weighted average is 0.25 and the instant upper bound
        // is 75 kbps / (0.25 - 0.05) = 375 kbps. The fit itself puts the capacity at
        // S (1 - p) = 1.536 * 0.75 = 1.152 Mbps (the acknowledged rate), far above.
        let mut e = estimator();
        let mut s = Stream::new();
        let rate = DataRate::from_bps(1_536_000);
        for i in 1..=80 {
            let now = ms(250 * i);
            e.set_acknowledged_bitrate(DataRate::from_bps(1_152_000));
            let packets = s.report(now, rate, 0.25);
            assert_eq!(packets.len(), 40);
            e.update_bandwidth_estimate(&packets, kbps(2000), false, now);
            if i == 2 {
                // The first observation: the acknowledged-rate candidate S (1 - p) wins.
                assert_eq!(e.loss_limited_bandwidth(), Some(DataRate::from_bps(1_152_000)));
            }
            if i >= 2 {
                assert!((e.average_reported_loss_ratio() - 0.25).abs() < 1e-12);
                assert_eq!(e.instant_upper_bound(), kbps(375));
                assert_eq!(e.result().bandwidth_estimate, kbps(375), "report {i}");
                assert_eq!(e.result().state, LossBasedState::Decreasing);
            }
        }
        // Above 15 % average loss the bandwidth preference turns negative, so the fit then
        // steps down (0.95 per observation) a little below S (1 - p) until the likelihood
        // stops it: 1.152 -> 1.094 -> 1.040 Mbps.
        let ll = e.loss_limited_bandwidth().unwrap();
        assert!(ll < DataRate::from_bps(1_152_000) && ll >= kbps(1000), "{ll:?}");
        // With the high-loss cap switched on at 20 %: min(375, 500 - 1000 * 0.25) = 250 kbps.
        let mut e = LossBasedBweV2::new(LossBasedBweV2Config {
            high_loss_rate_threshold: 0.2,
            ..LossBasedBweV2Config::default()
        });
        e.set_min_max_bitrate(kbps(30), DataRate::from_mbps(200));
        let mut s = Stream::new();
        for i in 1..=8 {
            let now = ms(250 * i);
            e.update_bandwidth_estimate(&s.report(now, rate, 0.25), kbps(2000), false, now);
        }
        assert_eq!(e.result().bandwidth_estimate, kbps(250));
    }

    #[test]
    fn loss_limited_increases_are_bounded_per_delayed_increase_window() {
        // libwebrtc's IncreaseByMaxIncreaseFactorAfterLossBasedBweBacksOff configuration
        // (max increase 1.5, acked-rate cap 2.0, no average-loss rule), followed further:
        // all lost -> back to the acked rate, 300 kbps; each later loss-free observation more
        // than 300 ms after the window start may rise at most 1.5x the estimate at that start.
        let mut e = LossBasedBweV2::new(LossBasedBweV2Config {
            max_increase_factor: 1.5,
            bandwidth_rampup_upper_bound_factor: 2.0,
            not_increase_if_inherent_loss_less_than_average_loss: false,
            ..webrtc_small_config(&[1.2, 1.0, 0.5], true, 10_000)
        });
        e.set_bandwidth_estimate(kbps(600));
        e.set_acknowledged_bitrate(kbps(300));
        update(&mut e, &webrtc_feedback(ms(0), &ALL_LOST), kbps(5000));
        assert_eq!(
            e.result(),
            LossBasedResult { bandwidth_estimate: kbps(300), state: LossBasedState::Decreasing }
        );
        // The window opened at the last send time, 200 ms, with a limit of 450 kbps. These
        // observations end at 600, 1000, 1400 ms: each beyond the previous window, so the
        // candidate cap (the previous window's limit) binds and a new window opens.
        e.set_acknowledged_bitrate(kbps(1000));
        let mut expected = kbps(300);
        for k in 0..3 {
            let first = ms(400 + 400 * k);
            update(&mut e, &webrtc_feedback(first, &NO_LOSS), kbps(5000));
            expected = mul(expected, 1.5);
            assert_eq!(
                e.result(),
                LossBasedResult { bandwidth_estimate: expected, state: LossBasedState::Increasing },
                "step {k}"
            );
        }
        assert_eq!(expected, DataRate::from_bps(1_012_500));
        // Inside a window (an observation ending at 1650 ms, 250 ms after the window opened
        // at 1400 ms) the estimate is held at the window's limit, 1.5 x 1012.5 kbps, even if
        // set above it (M119 applies this bound on top of the candidate cap).
        e.set_bandwidth_estimate(kbps(4000));
        update(&mut e, &webrtc_feedback(ms(1450), &NO_LOSS), kbps(5000));
        assert_eq!(e.result().bandwidth_estimate, DataRate::from_bps(1_518_750));
        // Once the delay-based estimate is reached, the state is DelayBasedEstimate.
        let mut e2 = e.clone();
        update(&mut e2, &webrtc_feedback(ms(2000), &NO_LOSS), kbps(1200));
        assert_eq!(
            e2.result(),
            LossBasedResult {
                bandwidth_estimate: kbps(1200),
                state: LossBasedState::DelayBasedEstimate
            }
        );
    }

    #[test]
    fn a_probe_result_lifts_the_acknowledged_rate_cap() {
        // libwebrtc's IncreaseByFactorOfAckedBitrateAfterLossBasedBweBacksOff capped the
        // increase at 1.2 x 50 kbps; in M119 any probe result seen since (it never expires)
        // removes that cap. A probe given with a report that closes no observation is dropped.
        let config = LossBasedBweV2Config {
            loss_threshold_of_high_bandwidth_preference: 0.99,
            bandwidth_rampup_upper_bound_factor: 1.2,
            inherent_loss_upper_bound_offset: 0.9,
            observation_duration_lower_bound: TimeDelta::from_ms(200),
            ..LossBasedBweV2Config::default()
        };
        let run = |probe_with_first: bool, probe_with_second: bool| {
            let mut e = LossBasedBweV2::new(config.clone());
            e.set_bandwidth_estimate(kbps(600));
            e.set_acknowledged_bitrate(kbps(300));
            // A report that closes nothing (one packet only starts the clock)...
            if probe_with_first {
                e.set_probe_bitrate(Some(kbps(900)));
            }
            e.update_bandwidth_estimate(&webrtc_feedback(ms(0), &[true]), kbps(5000), false, ms(0));
            assert_eq!(e.num_observations(), 0);
            update(&mut e, &webrtc_feedback(ms(0), &ALL_LOST), kbps(5000));
            e.set_acknowledged_bitrate(kbps(50));
            if probe_with_second {
                e.set_probe_bitrate(Some(kbps(900)));
            }
            update(&mut e, &webrtc_feedback(ms(200), &TENTH_LOST), kbps(5000));
            e.result().bandwidth_estimate
        };
        assert_eq!(run(false, false), kbps(60));
        assert_eq!(run(true, false), kbps(60));
        assert!(run(false, true) > kbps(60));
    }

    #[test]
    fn hostile_input_never_panics_and_stays_within_min_max() {
        let mut rng = crate::rng::Rng::new(0x0010_55b2);
        let rate_of = |rng: &mut crate::rng::Rng| -> DataRate {
            match rng.next_u64() % 8 {
                0 => DataRate::ZERO,
                1 => DataRate::INFINITY,
                2 => DataRate::from_bps(-(rng.next_u64() as i64 >> 1)),
                3 => DataRate::from_bps(rng.next_u64() as i64 >> 1),
                4 => DataRate::from_bps((rng.next_u64() % 2_000) as i64),
                _ => DataRate::from_bps((rng.next_u64() % 300_000_000) as i64),
            }
        };
        let time_of = |rng: &mut crate::rng::Rng, base: i64| -> Timestamp {
            match rng.next_u64() % 10 {
                0 => Timestamp::from_us(rng.next_u64() as i64),
                1 => Timestamp::INFINITY,
                2 => Timestamp::from_us(i64::MIN + (rng.next_u64() % 1000) as i64),
                3 => Timestamp::from_us(base - (rng.next_u64() % 10_000_000) as i64),
                _ => Timestamp::from_us(base + (rng.next_u64() % 1_000_000) as i64),
            }
        };
        let mut ready_steps = 0;
        for run in 0..40 {
            let config = if run % 4 == 3 {
                LossBasedBweV2Config {
                    observation_window_size: 2 + (rng.next_u64() % 5) as usize,
                    observation_duration_lower_bound: TimeDelta::from_us(
                        1 + (rng.next_u64() % 300_000) as i64,
                    ),
                    high_loss_rate_threshold: 0.1,
                    rampup_acceleration_max_factor: 0.5,
                    sending_rate_smoothing_factor: 0.5,
                    probe_integration_enabled: true,
                    not_use_acked_rate_in_alr: true,
                    newton_iterations: 3,
                    ..LossBasedBweV2Config::default()
                }
            } else {
                LossBasedBweV2Config::default()
            };
            let mut e = LossBasedBweV2::new(config);
            let (mut min, mut max) = (kbps(30), DataRate::from_mbps(50));
            e.set_min_max_bitrate(min, max);
            let mut base: i64 = 0;
            for step in 0..400 {
                base += (rng.next_u64() % 200_000) as i64;
                match rng.next_u64() % 6 {
                    0 => e.set_acknowledged_bitrate(rate_of(&mut rng)),
                    1 => e.set_bandwidth_estimate(rate_of(&mut rng)),
                    2 => e.set_probe_bitrate(Some(rate_of(&mut rng))),
                    3 if step % 50 == 0 => {
                        let (a, b) = (rate_of(&mut rng), rate_of(&mut rng));
                        e.set_min_max_bitrate(a, b);
                        // The documented rule: non-finite or negative values are ignored,
                        // a max below the min is raised to it.
                        if let Some(a) = sane(a) {
                            min = a;
                        }
                        if let Some(b) = sane(b) {
                            max = b;
                        }
                        max = max.max(min);
                    }
                    _ => {}
                }
                let n = match rng.next_u64() % 5 {
                    0 => 0,
                    1 => 1,
                    _ => (rng.next_u64() % 60) as usize,
                };
                let all_lost = rng.next_u64().is_multiple_of(7);
                let packets: Vec<PacketResult> = (0..n)
                    .map(|k| {
                        let send = time_of(&mut rng, base);
                        let size = match rng.next_u64() % 6 {
                            0 => DataSize::from_bytes(0),
                            1 => DataSize::from_bytes(-(rng.next_u64() as i64 >> 1)),
                            2 => DataSize::from_bytes(rng.next_u64() as i64 >> 1),
                            _ => DataSize::from_bytes((rng.next_u64() % 1500) as i64),
                        };
                        let lost = all_lost || rng.uniform() < 0.3;
                        PacketResult {
                            sent: SentPacket {
                                transport_seq: k as u64,
                                send_time: send,
                                size,
                                probe_cluster_id: None,
                                is_padding: false,
                                data_in_flight: DataSize::ZERO,
                            },
                            receive_time: (!lost).then(|| time_of(&mut rng, base)),
                            rtt: None,
                        }
                    })
                    .collect();
                let delay = rate_of(&mut rng);
                let now = time_of(&mut rng, base);
                e.update_bandwidth_estimate(&packets, delay, rng.uniform() < 0.3, now);
                let r = e.result();
                assert!(
                    r.bandwidth_estimate >= min && r.bandwidth_estimate <= max,
                    "run {run} step {step}: {r:?} outside [{min:?}, {max:?}]"
                );
                let l = e.inherent_loss();
                assert!(l.is_finite() && (0.0..=1.0).contains(&l), "inherent loss {l}");
                let a = e.average_reported_loss_ratio();
                assert!(a.is_finite() && (0.0..=1.0).contains(&a), "average loss {a}");
                ready_steps += usize::from(e.is_ready());
                if let Some(b) = e.loss_limited_bandwidth() {
                    assert!(b >= DataRate::ZERO && b.is_finite(), "{b:?}");
                }
            }
        }
        // The estimation path itself was exercised, not only the early returns.
        assert!(ready_steps > 1000, "{ready_steps} ready steps");
    }
}

/// Ports of libwebrtc M156's `loss_based_bwe_v2_test.cc` (`main@{#48401}`) for what M156
/// adds, with its feedback shapes and expected values.
#[cfg(test)]
mod m156_tests {
    use super::*;
    use crate::cc::SentPacket;

    const OBS: TimeDelta = TimeDelta::from_ms(250);
    const SIZE: i64 = 15_000;

    fn kbps(k: i64) -> DataRate {
        DataRate::from_kbps(k)
    }

    /// libwebrtc's test fixture: packets with consecutive transport sequence numbers.
    struct Fixture {
        seq: u64,
    }

    impl Fixture {
        fn packet(
            &mut self,
            send: Timestamp,
            size: i64,
            receive: Option<Timestamp>,
        ) -> PacketResult {
            self.seq += 1;
            PacketResult {
                sent: SentPacket {
                    transport_seq: self.seq - 1,
                    send_time: send,
                    size: DataSize::from_bytes(size),
                    probe_cluster_id: None,
                    is_padding: false,
                    data_in_flight: DataSize::ZERO,
                },
                receive_time: receive,
                rtt: None,
            }
        }
        /// `CreatePacketResultsWithReceivedPackets`.
        fn received(&mut self, first: Timestamp) -> Vec<PacketResult> {
            vec![
                self.packet(first, SIZE, Some(first + OBS)),
                self.packet(first + OBS, SIZE, Some(first + OBS * 2)),
            ]
        }
        /// `CreatePacketResultsWith10pPacketLossRate`.
        fn loss10(&mut self, first: Timestamp, lost_size: i64) -> Vec<PacketResult> {
            (0..10)
                .map(|i| {
                    let lost = i == 9;
                    self.packet(
                        first + OBS * i,
                        if lost { lost_size } else { SIZE },
                        (!lost).then(|| first + OBS * (i + 1)),
                    )
                })
                .collect()
        }
        /// `CreatePacketResultsWith50pPacketLossRate`.
        fn loss50(&mut self, first: Timestamp) -> Vec<PacketResult> {
            vec![self.packet(first, SIZE, Some(first + OBS)), self.packet(first + OBS, SIZE, None)]
        }
        /// `CreatePacketResultsWith100pLossRate`.
        fn loss100(&mut self, first: Timestamp, n: i64) -> Vec<PacketResult> {
            let mut v: Vec<PacketResult> = (0..n - 1)
                .map(|i| self.packet(first + TimeDelta::from_ms(i * 10), SIZE, None))
                .collect();
            v.push(self.packet(first + OBS, SIZE, None));
            v
        }
    }

    /// `ShortObservationConfig`: M156's defaults with one observation needed and two kept.
    fn short(edit: impl FnOnce(&mut LossBasedBweV2Config)) -> (LossBasedBweV2, Fixture) {
        let mut c = LossBasedBweV2Config::m156();
        c.observation_window_size = 2;
        c.m156.as_mut().unwrap().min_num_observations = 1;
        edit(&mut c);
        (LossBasedBweV2::new(c), Fixture { seq: 0 })
    }

    fn at(n: i64) -> Timestamp {
        Timestamp::ZERO + OBS * n
    }

    fn update(e: &mut LossBasedBweV2, fb: &[PacketResult], delay: DataRate, in_alr: bool) {
        e.update_bandwidth_estimate(fb, delay, in_alr, Timestamp::ZERO);
    }

    const NONE: DataRate = DataRate::INFINITY;
    use LossBasedState::*;

    #[test]
    fn m156_config_keeps_m119_form_and_round_trips() {
        let m119 = serde_json::to_value(LossBasedBweV2Config::default()).unwrap();
        assert!(m119.get("m156").is_none(), "M119's serialised config is unchanged");
        let c = LossBasedBweV2Config::m156();
        let back: LossBasedBweV2Config =
            serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        assert!(c.problems().is_empty());
        let mut bad = c.clone();
        bad.m156.as_mut().unwrap().bandwidth_rampup_upper_bound_factor_in_hold = 1.0;
        assert_eq!(bad.problems().len(), 1);
    }

    #[test]
    fn increase_by_hold_factor_after_backing_off() {
        let (mut e, mut f) = short(|_| {});
        let delay = kbps(5000);
        e.set_bandwidth_estimate(kbps(600));
        e.set_acknowledged_bitrate(kbps(100));
        update(&mut e, &f.loss100(Timestamp::ZERO, 2), delay, false);
        let at_loss = e.result();
        let mut n = 2;
        while e.result().state != IncreaseUsingPadding {
            update(&mut e, &f.received(at(n)), delay, false);
            n += 1;
            assert!(n < 100);
        }
        // BwRampupUpperBoundInHoldFactor 1.2.
        assert_eq!(e.result().bandwidth_estimate, at_loss.bandwidth_estimate.scale(1.2));
    }

    #[test]
    fn state_is_delay_based_after_the_network_recovers() {
        let (mut e, mut f) = short(|c| {
            c.candidate_factors = vec![100.0, 1.0, 0.5];
            c.instant_upper_bound_bandwidth_balance = kbps(10_000);
            c.max_increase_factor = 100.0;
            c.not_increase_if_inherent_loss_less_than_average_loss = false;
        });
        let delay = kbps(600);
        e.set_bandwidth_estimate(kbps(600));
        e.set_acknowledged_bitrate(kbps(300));
        update(&mut e, &f.loss100(Timestamp::ZERO, 2), delay, false);
        assert_eq!(e.result().state, Decreasing);
        for n in 1..=2 {
            e.set_acknowledged_bitrate(kbps(600));
            update(&mut e, &f.received(at(n)), delay, false);
            assert_eq!(e.result().state, DelayBasedEstimate);
        }
    }

    #[test]
    fn increase_of_one_bps_even_if_bound_by_the_acknowledged_rate() {
        let (mut e, mut f) = short(|c| {
            c.loss_threshold_of_high_bandwidth_preference = 0.99;
            c.bandwidth_rampup_upper_bound_factor = 1.2;
            c.instant_upper_bound_bandwidth_balance = kbps(10_000);
        });
        let delay = kbps(5000);
        e.set_bandwidth_estimate(kbps(600));
        e.set_acknowledged_bitrate(kbps(300));
        update(&mut e, &f.loss100(Timestamp::ZERO, 2), delay, false);
        let mut r = e.result();
        assert_eq!(r.state, Decreasing);
        let estimate_1 = r.bandwidth_estimate;
        assert!(estimate_1 < kbps(600));
        e.set_acknowledged_bitrate(DataRate::from_bps(estimate_1.as_bps() / 2));
        let mut n = 1;
        while r.state != IncreaseUsingPadding {
            update(&mut e, &f.received(at(n)), delay, false);
            n += 1;
            r = e.result();
            assert!(n < 100);
        }
        assert_eq!(r.bandwidth_estimate, estimate_1 + DataRate::from_bps(1));
    }

    #[test]
    fn estimate_is_bounded_by_the_acknowledged_rate() {
        let (mut e, mut f) = short(|_| {});
        e.set_min_max_bitrate(kbps(10), kbps(1_000_000));
        e.set_bandwidth_estimate(kbps(600));
        e.set_acknowledged_bitrate(kbps(500));
        update(&mut e, &f.loss100(Timestamp::ZERO, 2), NONE, false);
        assert_eq!(e.result().bandwidth_estimate, kbps(500));
        // M119 has no such bound: the same feedback takes it below the acknowledged rate.
        let mut m119 = LossBasedBweV2::new(LossBasedBweV2Config {
            observation_window_size: 2,
            ..Default::default()
        });
        m119.set_min_max_bitrate(kbps(10), kbps(1_000_000));
        m119.set_bandwidth_estimate(kbps(600));
        m119.set_acknowledged_bitrate(kbps(500));
        update(&mut m119, &Fixture { seq: 0 }.loss100(Timestamp::ZERO, 2), NONE, false);
        assert!(m119.result().bandwidth_estimate < kbps(500));
    }

    #[test]
    fn padding_state_while_increasing_loss_limited() {
        let (mut e, mut f) = short(|c| {
            c.m156.as_mut().unwrap().padding_duration = TimeDelta::from_ms(1000);
        });
        e.set_bandwidth_estimate(kbps(2500));
        update(&mut e, &f.loss50(Timestamp::ZERO), NONE, false);
        assert_eq!(e.result().state, Decreasing);
        let mut n = 1;
        while e.result().state != IncreaseUsingPadding {
            update(&mut e, &f.received(at(n)), NONE, false);
            n += 1;
            assert!(n < 100);
        }
    }

    #[test]
    fn best_candidate_resets_to_the_upper_bound() {
        let (mut e, mut f) = short(|c| {
            c.m156.as_mut().unwrap().padding_duration = TimeDelta::from_ms(1000);
        });
        e.set_bandwidth_estimate(kbps(2500));
        update(&mut e, &f.loss50(Timestamp::ZERO), NONE, true);
        let after_loss = e.result();
        assert_eq!(after_loss.state, Decreasing);
        update(&mut e, &f.received(at(1)), NONE, true);
        update(&mut e, &f.received(at(2)), NONE, true);
        assert_eq!(e.result().state, IncreaseUsingPadding);
        let d = e.result().bandwidth_estimate.as_bps() - after_loss.bandwidth_estimate.as_bps();
        assert!(d.abs() <= 100_000, "{d}");
    }

    #[test]
    fn decrease_after_one_second_of_padding() {
        let (mut e, mut f) = short(|c| {
            c.m156.as_mut().unwrap().padding_duration = TimeDelta::from_ms(1000);
            c.bandwidth_rampup_upper_bound_factor = 2.0;
        });
        e.set_bandwidth_estimate(kbps(2500));
        e.set_acknowledged_bitrate(kbps(51));
        update(&mut e, &f.loss50(Timestamp::ZERO), NONE, false);
        assert_eq!(e.result().state, Decreasing);
        assert_eq!(e.result().bandwidth_estimate, kbps(51));
        e.set_acknowledged_bitrate(kbps(26));
        let mut n = 1;
        while e.result().state != IncreaseUsingPadding {
            update(&mut e, &f.received(at(n)), NONE, false);
            n += 1;
            assert!(n < 100);
        }
        let increased = at(n);
        while e.result().state == IncreaseUsingPadding {
            update(&mut e, &f.received(at(n)), NONE, false);
            n += 1;
            assert!(n < 200);
        }
        assert_eq!(e.result().state, Decreasing);
        assert_eq!(at(n - 1) - increased, TimeDelta::from_secs(1));
    }

    #[test]
    fn hold_rate_is_not_below_the_acknowledged_rate() {
        let (mut e, mut f) = short(|c| c.m156.as_mut().unwrap().hold_duration_factor = 10.0);
        e.set_bandwidth_estimate(kbps(2500));
        update(&mut e, &f.loss50(Timestamp::ZERO), NONE, false);
        assert_eq!(e.result().state, Decreasing);
        e.set_acknowledged_bitrate(kbps(1000));
        update(&mut e, &f.loss50(at(1)), NONE, false);
        assert_eq!(e.result().state, Decreasing);
        assert_eq!(e.result().bandwidth_estimate, kbps(1000));
    }

    #[test]
    fn estimate_is_not_below_the_acknowledged_rate_and_recovers_from_it() {
        let (mut e, mut f) = short(|_| {});
        e.set_bandwidth_estimate(kbps(2500));
        update(&mut e, &f.loss100(Timestamp::ZERO, 2), NONE, false);
        assert!(e.result().bandwidth_estimate < kbps(1000));
        e.set_acknowledged_bitrate(kbps(1000));
        update(&mut e, &f.loss100(at(1), 2), NONE, false);
        assert_eq!(e.result().bandwidth_estimate, kbps(1000));
        update(&mut e, &f.received(at(2)), NONE, false);
        update(&mut e, &f.received(at(3)), NONE, false);
        assert!(e.result().bandwidth_estimate > kbps(1000));
    }

    #[test]
    fn the_hold_ends_when_the_delay_based_estimate_works() {
        let (mut e, mut f) = short(|_| {});
        e.set_bandwidth_estimate(kbps(2500));
        update(&mut e, &f.loss50(Timestamp::ZERO), NONE, false);
        assert_eq!(e.result().state, Decreasing);
        let estimate = e.result().bandwidth_estimate;
        update(&mut e, &f.received(at(1)), estimate + kbps(10), false);
        update(&mut e, &f.received(at(2)), estimate + kbps(10), false);
        assert_eq!(e.result().state, DelayBasedEstimate);
        assert_eq!(e.result().bandwidth_estimate, estimate + kbps(10));
    }

    #[test]
    fn byte_loss_rate_counts_a_large_lost_packet() {
        let (mut e, mut f) = short(|_| {});
        e.set_bandwidth_estimate(kbps(500));
        // 10 % of the packets but over 50 % of the bytes lost.
        update(&mut e, &f.loss10(Timestamp::ZERO, SIZE * 20), NONE, false);
        assert_eq!(e.result().state, Decreasing);
        assert!(e.result().bandwidth_estimate < kbps(160));
    }

    /// The delay-based estimate of the byte-loss-rate tests.
    const DELAY_500: DataRate = DataRate::from_kbps(500);

    /// `CreateTestFieldTrials("UseByteLossRate:true,ObservationWindowSize:5")` (every other
    /// parameter M156's default), its window filled with loss-free observations at 500 kbps.
    fn window_5_filled() -> (LossBasedBweV2, Fixture) {
        let mut c = LossBasedBweV2Config::m156();
        c.observation_window_size = 5;
        let (mut e, mut f) = (LossBasedBweV2::new(c), Fixture { seq: 0 });
        e.set_bandwidth_estimate(DELAY_500);
        for i in 0..5 {
            update(&mut e, &f.received(at(i)), DELAY_500, false);
        }
        (e, f)
    }

    #[test]
    fn byte_loss_rate_ignores_one_loss_spike() {
        let (mut e, mut f) = window_5_filled();
        let delay = DELAY_500;
        update(&mut e, &f.loss100(at(5), 2), delay, false);
        update(&mut e, &f.received(at(6)), delay, false);
        assert_eq!(e.result().state, DelayBasedEstimate);
        assert_eq!(e.result().bandwidth_estimate, delay);
        // A second lossy observation is no spike.
        update(&mut e, &f.loss100(at(7), 2), delay, false);
        assert_eq!(e.result().state, Decreasing);
        assert!(e.result().bandwidth_estimate < delay);
    }

    #[test]
    fn byte_loss_rate_keeps_a_spike_sent_in_a_burst() {
        let (mut e, mut f) = window_5_filled();
        let delay = DELAY_500;
        update(&mut e, &f.loss100(at(5), 5), delay, false);
        assert_eq!(e.result().state, Decreasing);
        assert!(e.result().bandwidth_estimate <= delay);
    }

    #[test]
    fn a_packet_reported_lost_then_received_is_not_lost() {
        let (mut e, mut f) = short(|_| {});
        let start = kbps(2500);
        e.set_bandwidth_estimate(start);
        let t0 = Timestamp::ZERO;
        let ms10 = TimeDelta::from_ms(10);
        let mut p = |seq: u64, send: Timestamp, rx: Option<Timestamp>| {
            let mut r = f.packet(send, SIZE, rx);
            r.sent.transport_seq = seq;
            r
        };
        let fb1 = vec![p(1, t0, Some(t0 + ms10)), p(2, t0, None), p(3, t0, Some(t0 + ms10))];
        let fb2 = vec![
            p(2, t0, Some(t0 + ms10)),
            p(4, t0 + OBS, Some(t0 + OBS + ms10)),
            p(5, t0, Some(t0 + ms10)),
        ];
        update(&mut e, &fb1, start, false);
        update(&mut e, &fb2, start, false);
        assert_eq!(e.result().bandwidth_estimate, start);
    }

    #[test]
    fn a_tie_goes_to_the_higher_candidate() {
        let (mut e, mut f) = short(|_| {});
        let start = kbps(1000);
        e.set_bandwidth_estimate(start);
        update(&mut e, &f.received(Timestamp::ZERO), start, false);
        // libwebrtc's BytesPerSec(bytes_per_sec * 1.02 + 1).
        let delay = DataRate::from_bps(((125_000.0 * 1.02 + 1.0) as i64) * 8);
        update(&mut e, &f.received(at(1)), delay, false);
        assert_eq!(e.result().bandwidth_estimate, delay);
    }
}
