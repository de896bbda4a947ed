//! Path faults beyond the link model (whose own IID loss is `PathConfig::loss`): media
//! datagrams delivered twice or held back so later ones overtake them, and a window in which
//! all feedback is lost. One decision engine, [`PathFaults`], for both runtimes: the
//! simulator runs it as a network node between the bottleneck and the receiver
//! ([`crate::sim::network::FaultNode`]), the live relay applies the same decisions to the
//! datagrams' bytes, so a fault scenario seen live replays in the simulator from the run's
//! config (`faults` in [`crate::session::RunConfig`]).
//!
//! Faults that exist only as bytes (a malformed or a spoofed datagram) stay with the live
//! relay: the simulator's datagrams have no wire form to corrupt.

use crate::rng::Rng;
use crate::units::{TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};

/// The path faults of a run (all off by default). `faults` in a run config; `--duplicate`,
/// `--reorder`, `--reorder-ms` and `--feedback-blackout` on `sluice run` and `live run`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultsConfig {
    /// Probability that a media datagram the bottleneck delivers, and does not hold back
    /// (`reorder`), is delivered twice: the share duplicated is `(1 - reorder) x duplicate`.
    pub duplicate: f64,
    /// Probability that a media datagram the bottleneck delivers is held back by
    /// `reorder_delay_ms` (later ones overtake it).
    pub reorder: f64,
    /// How long a reordered datagram is held back, in ms (default 5).
    pub reorder_delay_ms: f64,
    /// `[start, end)` seconds of the run in which all feedback (receiver to sender) is lost.
    pub feedback_blackout_s: Option<(f64, f64)>,
}

impl Default for FaultsConfig {
    fn default() -> Self {
        FaultsConfig {
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay_ms: 5.0,
            feedback_blackout_s: None,
        }
    }
}

impl FaultsConfig {
    /// No fault at all (the run's topology then has no fault node).
    pub fn is_none(&self) -> bool {
        self.duplicate == 0.0 && self.reorder == 0.0 && self.feedback_blackout_s.is_none()
    }

    /// Every field its default: what a run config leaves out.
    pub fn is_default(&self) -> bool {
        *self == FaultsConfig::default()
    }

    /// `Err` names the field a user got wrong.
    pub fn validate(&self) -> Result<(), String> {
        for (name, p) in [("duplicate", self.duplicate), ("reorder", self.reorder)] {
            if !(0.0..1.0).contains(&p) {
                return Err(format!("faults.{name} must be a probability in [0, 1), got {p}"));
            }
        }
        let d = self.reorder_delay_ms;
        if !(d.is_finite() && (0.0..=crate::limits::MAX_TIME_MS).contains(&d)) {
            return Err(format!(
                "faults.reorder_delay_ms must be 0 to {} ms, got {d}",
                crate::limits::MAX_TIME_MS
            ));
        }
        if let Some((a, b)) = self.feedback_blackout_s {
            if !(a.is_finite() && b.is_finite() && 0.0 <= a && a < b) {
                return Err(format!(
                    "faults.feedback_blackout_s must be [start, end) seconds with 0 <= start < \
                     end, got [{a}, {b}]"
                ));
            }
        }
        Ok(())
    }

    /// The blackout as times of the run.
    pub fn blackout(&self) -> Option<(Timestamp, Timestamp)> {
        self.feedback_blackout_s
            .map(|(a, b)| (Timestamp::from_secs_f64(a), Timestamp::from_secs_f64(b)))
    }
}

/// What happens to one media datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Delivered now, once.
    Deliver,
    /// Delivered now, and a copy right after it.
    DeliverTwice,
    /// Held back until this time.
    HoldUntil(Timestamp),
}

/// What the faults did (the summary's `path_faults` with faults configured; the live
/// relay's counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultStats {
    /// Media datagrams the faults decided on (the shares' denominator).
    pub media_datagrams: u64,
    /// Feedback datagrams the faults saw, in the blackout or not.
    pub feedback_datagrams: u64,
    /// Media datagrams delivered twice.
    pub duplicated: u64,
    /// Media datagrams held back by the reorder delay.
    pub reordered: u64,
    /// Feedback datagrams lost in the blackout.
    pub blackout_dropped: u64,
}

/// The faults' decisions, one datagram at a time, from a seeded random stream.
#[derive(Clone, Debug)]
pub struct PathFaults {
    config: FaultsConfig,
    blackout: Option<(Timestamp, Timestamp)>,
    reorder_delay: TimeDelta,
    rng: Rng,
    stats: FaultStats,
}

impl PathFaults {
    /// The faults of `config`, drawing from the run seed's own stream.
    pub fn new(config: FaultsConfig, seed: u64) -> Self {
        PathFaults {
            blackout: config.blackout(),
            reorder_delay: TimeDelta::from_ms_f64(config.reorder_delay_ms),
            config,
            rng: Rng::fork(seed, "path-faults"),
            stats: FaultStats::default(),
        }
    }

    /// The fate of a media datagram the bottleneck delivers at `now`: held back with
    /// probability `reorder`, else duplicated with probability `duplicate`.
    pub fn media_fate(&mut self, now: Timestamp) -> Fate {
        self.stats.media_datagrams += 1;
        if self.config.reorder > 0.0 && self.rng.bernoulli(self.config.reorder) {
            self.stats.reordered += 1;
            return Fate::HoldUntil(now + self.reorder_delay);
        }
        if self.config.duplicate > 0.0 && self.rng.bernoulli(self.config.duplicate) {
            self.stats.duplicated += 1;
            return Fate::DeliverTwice;
        }
        Fate::Deliver
    }

    /// Whether a feedback datagram leaving the receiver at `now` gets through (false in the
    /// blackout, counted).
    pub fn feedback_passes(&mut self, now: Timestamp) -> bool {
        self.stats.feedback_datagrams += 1;
        if self.blackout.is_some_and(|(a, b)| now >= a && now < b) {
            self.stats.blackout_dropped += 1;
            return false;
        }
        true
    }

    /// What the faults did so far.
    pub fn stats(&self) -> FaultStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shares_follow_the_probabilities_and_the_blackout_is_half_open() {
        let cfg = FaultsConfig {
            duplicate: 0.1,
            reorder: 0.05,
            reorder_delay_ms: 7.0,
            feedback_blackout_s: Some((1.0, 2.0)),
        };
        let mut f = PathFaults::new(cfg, 3);
        let now = Timestamp::from_ms(10);
        let fates: Vec<Fate> = (0..20_000).map(|_| f.media_fate(now)).collect();
        let held = fates.iter().filter(|x| **x == Fate::HoldUntil(Timestamp::from_ms(17))).count();
        let twice = fates.iter().filter(|x| **x == Fate::DeliverTwice).count();
        // Held back 5 %; of the rest, 10 % twice (9.5 % of all).
        assert!((900..1100).contains(&held), "{held}");
        assert!((1700..2100).contains(&twice), "{twice}");
        assert_eq!(f.stats().reordered as usize, held);
        assert_eq!(f.stats().duplicated as usize, twice);
        let passes: Vec<bool> = [999, 1000, 1999, 2000]
            .iter()
            .map(|ms| f.feedback_passes(Timestamp::from_ms(*ms)))
            .collect();
        assert_eq!(passes, [true, false, false, true]);
        assert_eq!(f.stats().blackout_dropped, 2);
        assert_eq!((f.stats().media_datagrams, f.stats().feedback_datagrams), (20_000, 4));
    }

    #[test]
    fn a_users_mistake_names_the_field() {
        let bad = |c: FaultsConfig| c.validate().unwrap_err();
        assert!(
            bad(FaultsConfig { duplicate: 1.0, ..Default::default() }).contains("faults.duplicate")
        );
        assert!(
            bad(FaultsConfig { reorder: -0.1, ..Default::default() }).contains("faults.reorder")
        );
        assert!(bad(FaultsConfig { reorder_delay_ms: f64::NAN, ..Default::default() })
            .contains("reorder_delay_ms"));
        let blackout = FaultsConfig { feedback_blackout_s: Some((3.0, 1.0)), ..Default::default() };
        assert!(bad(blackout).contains("0 <= start < end"));
        assert!(FaultsConfig::default().is_none());
        assert!(FaultsConfig::default().validate().is_ok());
    }
}
