//! Synthetic traces (`sluice trace gen`): constant, steps, alternating, a two-state
//! Markov (good/bad) channel and Poisson delivery (Pantheon's calibrated emulators).
//!
//! Rates are converted by the traces/README.md rule (12000 bits per opportunity, remainders
//! carried in exact integers), so the nominal mean rate ([`Trace::nominal_rate`]) is exact up
//! to less than one opportunity over the whole duration, and the loop period equals the
//! requested duration.

use super::trace::{Builder, Trace};
use crate::limits;
use crate::rng::Rng;
use crate::units::TimeDelta;
use serde::Deserialize;

/// A synthetic trace description (JSON/TOML: `{"kind": "steps", "steps": [[10, 30], [10, 3]]}`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TraceSpec {
    /// A constant rate.
    Constant {
        /// The rate, Mbit/s.
        rate_mbps: f64,
    },
    /// Piecewise-constant `(duration_s, rate_mbps)` steps, repeated until the duration is
    /// covered (e.g. `[(10, 30), (10, 3)]`: 30 Mbps for 10 s then 3 Mbps for 10 s). A rate of
    /// 0 is an outage.
    Steps {
        /// `(duration_s, rate_mbps)` pairs, in order.
        steps: Vec<(f64, f64)>,
    },
    /// `high_mbps` for half of `period_s`, then `low_mbps` for the other half, repeated.
    Alternating {
        /// The rate of the first half of each period, Mbit/s.
        high_mbps: f64,
        /// The rate of the second half, Mbit/s.
        low_mbps: f64,
        /// The period, seconds.
        period_s: f64,
    },
    /// Two-state good/bad channel starting in the good state, with exponential holding times
    /// of the given means, drawn from [`Rng`] seeded with `seed`.
    Markov {
        /// The rate in the good state, Mbit/s.
        good_mbps: f64,
        /// The rate in the bad state, Mbit/s.
        bad_mbps: f64,
        /// Mean time in the good state, seconds.
        mean_good_s: f64,
        /// Mean time in the bad state, seconds.
        mean_bad_s: f64,
        /// Seed of the holding times (default 0).
        #[serde(default)]
        seed: u64,
    },
    /// Delivery opportunities as a Poisson process of mean rate `rate_mbps` (exponential gaps
    /// between opportunities, drawn from [`Rng`] seeded with `seed`), as Pantheon's calibrated
    /// emulators deliver (Yan et al., ATC '18; Vidaptive §5.2).
    Poisson {
        /// The mean rate, Mbit/s.
        rate_mbps: f64,
        /// Seed of the gaps between opportunities (default 0).
        #[serde(default)]
        seed: u64,
    },
}

fn positive(what: &str, v: f64) -> Result<(), String> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(format!("{what} must be a positive number, got {v}"))
    }
}

/// A rate in Mbit/s: positive (`allow_zero`: or 0) and at most [`limits::MAX_RATE_MBPS`].
fn rate(what: &str, v: f64, allow_zero: bool) -> Result<(), String> {
    if allow_zero && v == 0.0 {
        return Ok(());
    }
    positive(what, v)?;
    if v > limits::MAX_RATE_MBPS {
        return Err(format!(
            "{what} {v} Mbps is above the limit of {} Mbps (10 Gbit/s)",
            limits::MAX_RATE_MBPS
        ));
    }
    Ok(())
}

/// A time in seconds: at least 1 ms and at most a day.
fn seconds(what: &str, v: f64) -> Result<(), String> {
    positive(what, v)?;
    if !(0.001..=limits::MAX_SESSION_S).contains(&v) {
        return Err(format!(
            "{what} must be between 0.001 and {} s (a day), got {v}",
            limits::MAX_SESSION_S
        ));
    }
    Ok(())
}

fn parse_num(what: &str, s: &str) -> Result<f64, String> {
    s.trim().parse::<f64>().map_err(|_| format!("{what}: {:?} is not a number", s.trim()))
}

impl TraceSpec {
    /// Parses the compact CLI form:
    /// `constant:12`, `steps:30@10,3@10` (rate_mbps@seconds), `alternating:10,2,15`
    /// (high_mbps,low_mbps,period_s), `markov:20,2,5,1[,seed]`
    /// (good_mbps,bad_mbps,mean_good_s,mean_bad_s).
    pub fn parse_cli(s: &str) -> Result<TraceSpec, String> {
        const USAGE: &str = "expected constant:RATE, steps:RATE@SECS,..., \
                             alternating:HIGH,LOW,PERIOD_S, markov:GOOD,BAD,MEAN_GOOD_S,MEAN_BAD_S[,SEED] \
                             or poisson:RATE[,SEED]";
        let (kind, args) =
            s.split_once(':').ok_or_else(|| format!("trace spec {s:?}: missing ':'; {USAGE}"))?;
        let args: Vec<&str> = args.split(',').collect();
        let arity = |n: &[usize], form: &str| -> Result<(), String> {
            if n.contains(&args.len()) {
                Ok(())
            } else {
                Err(format!("trace spec {s:?}: expected {form}, got {} value(s)", args.len()))
            }
        };
        let spec = match kind.trim() {
            "constant" => {
                arity(&[1], "constant:RATE_MBPS")?;
                TraceSpec::Constant { rate_mbps: parse_num("rate", args[0])? }
            }
            "steps" => {
                let mut steps = Vec::new();
                for a in &args {
                    let (rate, secs) = a.split_once('@').ok_or_else(|| {
                        format!("trace spec {s:?}: step {:?} should be RATE_MBPS@SECONDS", a.trim())
                    })?;
                    steps.push((parse_num("step seconds", secs)?, parse_num("step rate", rate)?));
                }
                TraceSpec::Steps { steps }
            }
            "alternating" => {
                arity(&[3], "alternating:HIGH_MBPS,LOW_MBPS,PERIOD_S")?;
                TraceSpec::Alternating {
                    high_mbps: parse_num("high rate", args[0])?,
                    low_mbps: parse_num("low rate", args[1])?,
                    period_s: parse_num("period", args[2])?,
                }
            }
            "markov" => {
                arity(&[4, 5], "markov:GOOD_MBPS,BAD_MBPS,MEAN_GOOD_S,MEAN_BAD_S[,SEED]")?;
                let seed = match args.get(4) {
                    Some(a) => a.trim().parse::<u64>().map_err(|_| {
                        format!("seed: {:?} is not a non-negative integer", a.trim())
                    })?,
                    None => 0,
                };
                TraceSpec::Markov {
                    good_mbps: parse_num("good rate", args[0])?,
                    bad_mbps: parse_num("bad rate", args[1])?,
                    mean_good_s: parse_num("mean good time", args[2])?,
                    mean_bad_s: parse_num("mean bad time", args[3])?,
                    seed,
                }
            }
            "poisson" => {
                arity(&[1, 2], "poisson:RATE_MBPS[,SEED]")?;
                let seed = match args.get(1) {
                    Some(a) => a.trim().parse::<u64>().map_err(|_| {
                        format!("seed: {:?} is not a non-negative integer", a.trim())
                    })?,
                    None => 0,
                };
                TraceSpec::Poisson { rate_mbps: parse_num("rate", args[0])?, seed }
            }
            "gen" => {
                // `gen:constant:12` where only the spec is asked for (`trace gen SPEC`).
                return Err(format!(
                    "trace spec {s:?}: give the spec without its \"gen:\" prefix ({:?}); {USAGE}",
                    s.trim().trim_start_matches("gen:")
                ));
            }
            other => return Err(format!("trace spec {s:?}: unknown kind {other:?}; {USAGE}")),
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Checks that every rate and duration is finite and positive (a step's rate may be 0:
    /// an outage) and under the limits.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            TraceSpec::Constant { rate_mbps } => rate("rate_mbps", *rate_mbps, false),
            TraceSpec::Steps { steps } => {
                if steps.is_empty() {
                    return Err("steps: at least one step is needed".into());
                }
                for (i, &(secs, r)) in steps.iter().enumerate() {
                    positive(&format!("step {} duration_s", i + 1), secs)?;
                    // A zero rate is an outage (no delivery opportunity), as real traces have.
                    if !(r.is_finite() && r >= 0.0) {
                        return Err(format!(
                            "step {} rate_mbps must be a number >= 0 (0: an outage), got {r}",
                            i + 1
                        ));
                    }
                    if secs < 0.001 {
                        return Err(format!("step {} duration_s must be at least 1 ms", i + 1));
                    }
                    seconds(&format!("step {} duration_s", i + 1), secs)?;
                    rate(&format!("step {} rate_mbps", i + 1), r, true)?;
                }
                if steps.iter().all(|&(_, r)| r == 0.0) {
                    return Err("steps: at least one step needs a rate above 0".into());
                }
                Ok(())
            }
            TraceSpec::Alternating { high_mbps, low_mbps, period_s } => {
                rate("high_mbps", *high_mbps, false)?;
                rate("low_mbps", *low_mbps, false)?;
                positive("period_s", *period_s)?;
                if *period_s < 0.002 {
                    return Err("period_s must be at least 2 ms".into());
                }
                seconds("period_s", *period_s)
            }
            TraceSpec::Markov { good_mbps, bad_mbps, mean_good_s, mean_bad_s, .. } => {
                rate("good_mbps", *good_mbps, false)?;
                rate("bad_mbps", *bad_mbps, false)?;
                seconds("mean_good_s", *mean_good_s)?;
                seconds("mean_bad_s", *mean_bad_s)
            }
            TraceSpec::Poisson { rate_mbps, .. } => rate("rate_mbps", *rate_mbps, false),
        }
    }

    /// The highest rate the spec asks for (Mbit/s).
    pub fn max_rate_mbps(&self) -> f64 {
        match self {
            TraceSpec::Constant { rate_mbps } | TraceSpec::Poisson { rate_mbps, .. } => *rate_mbps,
            TraceSpec::Steps { steps } => steps.iter().map(|&(_, r)| r).fold(0.0, f64::max),
            TraceSpec::Alternating { high_mbps, low_mbps, .. } => high_mbps.max(*low_mbps),
            TraceSpec::Markov { good_mbps, bad_mbps, .. } => good_mbps.max(*bad_mbps),
        }
    }

    /// A short name for file names and logs.
    pub fn name(&self) -> String {
        // `{}` writes an f64 in full (300 digits for 1e-300): the crate's `show` gives an
        // exponent outside [1e-4, 1e9) and the same text as `{}` within.
        use crate::show as n;
        match self {
            TraceSpec::Constant { rate_mbps } => format!("constant-{}", n(*rate_mbps)),
            TraceSpec::Steps { steps } => {
                let parts: Vec<String> =
                    steps.iter().map(|(s, r)| format!("{}@{}", n(*r), n(*s))).collect();
                format!("steps-{}", parts.join("-"))
            }
            TraceSpec::Alternating { high_mbps, low_mbps, period_s } => {
                format!("alternating-{}-{}-{}", n(*high_mbps), n(*low_mbps), n(*period_s))
            }
            TraceSpec::Markov { good_mbps, bad_mbps, mean_good_s, mean_bad_s, seed } => {
                format!(
                    "markov-{}-{}-{}-{}-{seed}",
                    n(*good_mbps),
                    n(*bad_mbps),
                    n(*mean_good_s),
                    n(*mean_bad_s)
                )
            }
            TraceSpec::Poisson { rate_mbps, seed } => format!("poisson-{}-{seed}", n(*rate_mbps)),
        }
    }
}

fn mbps_to_bps(mbps: f64) -> i64 {
    (mbps * 1e6).round() as i64
}

/// Generates a trace of the given duration (the loop period) from a spec.
pub fn generate(spec: &TraceSpec, duration: TimeDelta) -> Result<Trace, String> {
    spec.validate()?;
    if duration < TimeDelta::from_ms(1) || !duration.is_finite() {
        return Err(format!("duration must be at least 1 ms, got {duration}"));
    }
    if duration.as_secs_f64() > limits::MAX_SESSION_S {
        return Err(format!(
            "a generated trace lasts at most {} s (a day), asked for {} s",
            limits::MAX_SESSION_S,
            duration.as_secs_f64()
        ));
    }
    // Bounds before allocation: at most the highest rate over the whole duration.
    let expected = spec.max_rate_mbps() * 1e6 * duration.as_secs_f64()
        / super::trace::CONVERSION_BITS_PER_OPPORTUNITY as f64;
    if expected > limits::MAX_TRACE_OPPORTUNITIES as f64 {
        return Err(format!(
            "{} over {} s would give up to {expected:.0} delivery opportunities, above the \
             limit of {} (lower the rate or the duration)",
            spec.name(),
            duration.as_secs_f64(),
            limits::MAX_TRACE_OPPORTUNITIES
        ));
    }
    let end_us = duration.as_us() / 1000 * 1000;
    if let TraceSpec::Poisson { rate_mbps, seed } = spec {
        return poisson(*rate_mbps, *seed, end_us, &spec.name());
    }
    // `expected` is at most the limit (checked above) and at least the count.
    let mut builder = Builder::with_capacity(expected.ceil() as usize + 1);
    // Emits piecewise-constant segments (duration_us, rate_bps) until end_us is covered.
    let mut t_us = 0_i64;
    let mut segment = |b: &mut Builder, d_us: i64, rate_bps: i64| -> bool {
        let d_us = d_us.max(1).min(end_us - t_us);
        b.interval(t_us, d_us, rate_bps);
        t_us += d_us;
        t_us < end_us
    };
    match spec {
        TraceSpec::Constant { rate_mbps } => {
            segment(&mut builder, end_us, mbps_to_bps(*rate_mbps));
        }
        TraceSpec::Steps { steps } => 'outer: loop {
            for &(secs, rate) in steps {
                let d = TimeDelta::from_secs_f64(secs).as_us();
                if !segment(&mut builder, d, mbps_to_bps(rate)) {
                    break 'outer;
                }
            }
        },
        TraceSpec::Alternating { high_mbps, low_mbps, period_s } => {
            let period_us = TimeDelta::from_secs_f64(*period_s).as_us();
            let high_us = period_us / 2;
            loop {
                if !segment(&mut builder, high_us, mbps_to_bps(*high_mbps))
                    || !segment(&mut builder, period_us - high_us, mbps_to_bps(*low_mbps))
                {
                    break;
                }
            }
        }
        // Generated above.
        TraceSpec::Poisson { .. } => {}
        TraceSpec::Markov { good_mbps, bad_mbps, mean_good_s, mean_bad_s, seed } => {
            let mut rng = Rng::fork(*seed, "trace-gen-markov");
            let mut good = true;
            loop {
                let (mean, rate) =
                    if good { (mean_good_s, good_mbps) } else { (mean_bad_s, bad_mbps) };
                let hold = TimeDelta::from_secs_f64(rng.exponential(*mean)).as_us();
                if !segment(&mut builder, hold, mbps_to_bps(*rate)) {
                    break;
                }
                good = !good;
            }
        }
    }
    builder
        .finish(&spec.name(), end_us)
        .map_err(|e| format!("{e} (the rates are too low to give any opportunity in {duration})"))
}

/// Poisson opportunities at `rate_mbps` (mean gap 12 000 bits / rate, the conversion rule of
/// the other generators), each at the millisecond it falls in (rounded up, as Mahimahi
/// timestamps), until `end_us`; the last is moved to the end so the trace loops with the
/// requested period.
fn poisson(rate_mbps: f64, seed: u64, end_us: i64, name: &str) -> Result<Trace, String> {
    let mean_gap_s = super::trace::CONVERSION_BITS_PER_OPPORTUNITY as f64 / (rate_mbps * 1e6);
    let mut rng = Rng::fork(seed, "trace-gen-poisson");
    let end_ms = end_us / 1000;
    let mut times = Vec::new();
    let mut t_s = 0.0;
    loop {
        t_s += rng.exponential(mean_gap_s);
        let ms = (t_s * 1000.0).ceil() as i64;
        if ms > end_ms {
            break;
        }
        times.push(ms);
    }
    match times.last_mut() {
        Some(last) => *last = end_ms,
        None => return Err(format!("poisson:{rate_mbps}: no opportunity in {end_ms} ms")),
    }
    Trace::from_ms(name, times).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_write_numbers_as_given_and_extreme_ones_with_an_exponent() {
        let c = |r: f64| TraceSpec::Constant { rate_mbps: r }.name();
        assert_eq!(c(12.0), "constant-12");
        assert_eq!(c(0.5), "constant-0.5");
        assert_eq!(c(1e-300), "constant-1e-300");
        let steps = TraceSpec::Steps { steps: vec![(0.0, 30.0), (3.0, 3.0)] };
        assert_eq!(steps.name(), "steps-30@0-3@3");
    }
    use crate::units::{DataRate, Timestamp};

    #[test]
    fn parse_cli_forms() {
        assert_eq!(
            TraceSpec::parse_cli("constant:12").unwrap(),
            TraceSpec::Constant { rate_mbps: 12.0 }
        );
        assert_eq!(
            TraceSpec::parse_cli("steps:30@10,3@10").unwrap(),
            TraceSpec::Steps { steps: vec![(10.0, 30.0), (10.0, 3.0)] }
        );
        assert_eq!(
            TraceSpec::parse_cli("alternating:10,2,15").unwrap(),
            TraceSpec::Alternating { high_mbps: 10.0, low_mbps: 2.0, period_s: 15.0 }
        );
        assert_eq!(
            TraceSpec::parse_cli("markov:20,2,5,1,7").unwrap(),
            TraceSpec::Markov {
                good_mbps: 20.0,
                bad_mbps: 2.0,
                mean_good_s: 5.0,
                mean_bad_s: 1.0,
                seed: 7
            }
        );
        assert!(matches!(
            TraceSpec::parse_cli("markov:20,2,5,1").unwrap(),
            TraceSpec::Markov { seed: 0, .. }
        ));
    }

    #[test]
    fn poisson_has_the_mean_rate_and_exponential_gaps() {
        assert_eq!(
            TraceSpec::parse_cli("poisson:0.57,3").unwrap(),
            TraceSpec::Poisson { rate_mbps: 0.57, seed: 3 }
        );
        assert!(TraceSpec::parse_cli("poisson:-1").is_err());
        assert!(TraceSpec::parse_cli("poisson:2,x").is_err());
        // 3.04 Mbps (Pantheon's AWS Brazil -> Colombia path) for 120 s: 12 000 bits per
        // opportunity, so 30 400 opportunities expected, +-1 % (3 sigma = 1.7 %: sqrt(n)).
        let spec = TraceSpec::Poisson { rate_mbps: 3.04, seed: 1 };
        let t = generate(&spec, TimeDelta::from_secs(120)).unwrap();
        let n = t.times_ms().len() as f64;
        assert!((n / 30_400.0 - 1.0).abs() < 0.017, "{n} opportunities");
        assert_eq!(t.period(), TimeDelta::from_secs(120));
        // Gaps: an exponential's coefficient of variation is 1 (ms rounding shrinks it a bit at
        // a 3.9 ms mean gap).
        let gaps: Vec<f64> = t.times_ms().windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!((0.9..1.1).contains(&(sd / mean)), "CV {}", sd / mean);
        // The same seed gives the same trace, another seed another.
        assert_eq!(generate(&spec, TimeDelta::from_secs(120)).unwrap(), t);
        let other = TraceSpec::Poisson { rate_mbps: 3.04, seed: 2 };
        assert_ne!(generate(&other, TimeDelta::from_secs(120)).unwrap(), t);
    }

    #[test]
    fn parse_cli_errors_are_clear() {
        let e = TraceSpec::parse_cli("constant").unwrap_err();
        assert!(e.contains("missing ':'"), "{e}");
        let e = TraceSpec::parse_cli("wobbly:1").unwrap_err();
        assert!(e.contains("unknown kind \"wobbly\""), "{e}");
        let e = TraceSpec::parse_cli("gen:constant:12").unwrap_err();
        assert!(e.contains("without its \"gen:\" prefix (\"constant:12\")"), "{e}");
        let e = TraceSpec::parse_cli("constant:abc").unwrap_err();
        assert!(e.contains("\"abc\" is not a number"), "{e}");
        let e = TraceSpec::parse_cli("constant:-1").unwrap_err();
        assert!(e.contains("rate_mbps must be a positive number"), "{e}");
        let e = TraceSpec::parse_cli("steps:30@10,3").unwrap_err();
        assert!(e.contains("RATE_MBPS@SECONDS"), "{e}");
        let e = TraceSpec::parse_cli("alternating:10,2").unwrap_err();
        assert!(e.contains("got 2 value(s)"), "{e}");
        let e = TraceSpec::parse_cli("markov:20,0,5,1").unwrap_err();
        assert!(e.contains("bad_mbps"), "{e}");
        let e = TraceSpec::parse_cli("markov:20,2,5,1,x").unwrap_err();
        assert!(e.contains("seed"), "{e}");
    }

    #[test]
    fn deserializes_tagged_json() {
        let spec: TraceSpec =
            serde_json::from_str(r#"{"kind":"steps","steps":[[10,30],[10,3]]}"#).unwrap();
        assert_eq!(spec, TraceSpec::Steps { steps: vec![(10.0, 30.0), (10.0, 3.0)] });
        let spec: TraceSpec = serde_json::from_str(
            r#"{"kind":"markov","good_mbps":20,"bad_mbps":2,"mean_good_s":5,"mean_bad_s":1}"#,
        )
        .unwrap();
        assert!(matches!(spec, TraceSpec::Markov { seed: 0, .. }));
        assert!(serde_json::from_str::<TraceSpec>(r#"{"kind":"constant","rate":1}"#).is_err());
    }

    #[test]
    fn constant_and_steps_have_exact_rates() {
        let t =
            generate(&TraceSpec::Constant { rate_mbps: 12.0 }, TimeDelta::from_secs(2)).unwrap();
        assert_eq!(t.len(), 2000);
        assert_eq!(t.period(), TimeDelta::from_secs(2));
        let spec = TraceSpec::parse_cli("steps:30@10,3@10").unwrap();
        let t = generate(&spec, TimeDelta::from_secs(20)).unwrap();
        assert_eq!(t.period(), TimeDelta::from_secs(20));
        assert_eq!(t.nominal_rate(), DataRate::from_kbps(16_500));
        let bytes =
            |a: i64, b: i64| t.capacity_between(Timestamp::from_ms(a), Timestamp::from_ms(b));
        // 30 Mbps = 2.5 opportunities per ms; 3 Mbps = one per 4 ms.
        assert_eq!(bytes(0, 10_000 + 1).as_bytes(), 25_000 * 1504);
        assert_eq!(bytes(10_001, 20_001).as_bytes(), 2_500 * 1504);
        // Steps repeat when the duration is longer than one cycle.
        let t = generate(&spec, TimeDelta::from_secs(30)).unwrap();
        assert_eq!(t.len(), 25_000 + 2_500 + 25_000);
    }

    #[test]
    fn alternating_and_odd_rates_keep_the_mean() {
        let spec = TraceSpec::parse_cli("alternating:10,2,15").unwrap();
        let t = generate(&spec, TimeDelta::from_secs(60)).unwrap();
        assert_eq!(t.nominal_rate(), DataRate::from_mbps(6));
        // A rate that does not divide evenly: carried remainders keep the mean within one
        // opportunity over the whole trace.
        let t =
            generate(&TraceSpec::Constant { rate_mbps: 0.7 }, TimeDelta::from_secs(10)).unwrap();
        let want = 0.7e6 * 10.0 / 12000.0;
        assert!((t.len() as f64 - want).abs() < 1.0, "{} vs {want}", t.len());
        assert_eq!(t.period(), TimeDelta::from_secs(10));
    }

    #[test]
    fn markov_is_seeded_and_visits_both_states() {
        let spec = TraceSpec::parse_cli("markov:20,2,5,1,3").unwrap();
        let a = generate(&spec, TimeDelta::from_secs(120)).unwrap();
        let b = generate(&spec, TimeDelta::from_secs(120)).unwrap();
        assert_eq!(a, b);
        let c = generate(
            &TraceSpec::parse_cli("markov:20,2,5,1,4").unwrap(),
            TimeDelta::from_secs(120),
        )
        .unwrap();
        assert_ne!(a, c);
        let per_s = a.rate_series(TimeDelta::from_secs(1), TimeDelta::from_secs(120));
        assert!(per_s.iter().any(|r| r.as_mbps_f64() > 19.0));
        assert!(per_s.iter().any(|r| r.as_mbps_f64() < 3.0));
        // Mean lies between the two rates, weighted toward the good state (5:1).
        let mean = a.nominal_rate().as_mbps_f64();
        assert!(mean > 8.0 && mean < 20.0, "{mean}");
    }

    #[test]
    fn generate_rejects_bad_input() {
        assert!(generate(&TraceSpec::Constant { rate_mbps: 0.0 }, TimeDelta::from_secs(1)).is_err());
        assert!(generate(&TraceSpec::Constant { rate_mbps: 1.0 }, TimeDelta::ZERO).is_err());
        assert!(generate(&TraceSpec::Steps { steps: vec![] }, TimeDelta::from_secs(1)).is_err());
        // Too slow to give a single opportunity.
        let e = generate(&TraceSpec::Constant { rate_mbps: 0.001 }, TimeDelta::from_secs(1))
            .unwrap_err();
        assert!(e.contains("too low"), "{e}");
    }
}
