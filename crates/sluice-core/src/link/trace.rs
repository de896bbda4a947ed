//! Mahimahi link traces: delivery opportunities in milliseconds.
//!
//! A trace is a sorted list of millisecond timestamps; each one is a delivery opportunity of
//! [`MTU_BYTES`] bytes (Mahimahi's `PACKET_SIZE`). The trace repeats with a period equal to
//! its last timestamp: the opportunity at `m` ms in loop `k` happens at `k * period + m`
//! (so an opportunity at `period` in loop `k` coincides with one at 0 in loop `k + 1`, as in
//! `mm-link`).
//!
//! Throughput time series ("time_s rate_mbps") are converted by the rule of
//! `traces/README.md` ([`Trace::parse_rate_series`]), which counts
//! [`CONVERSION_BITS_PER_OPPORTUNITY`] (1500 bytes) per opportunity, so that converting a
//! shipped `.orig` file reproduces the shipped `.mahi` file byte for byte.

use crate::limits;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;

/// Bytes served by one delivery opportunity (Mahimahi's `PACKET_SIZE`).
pub const MTU_BYTES: i64 = 1504;
/// One delivery opportunity as a [`DataSize`].
pub const MTU: DataSize = DataSize::from_bytes(MTU_BYTES);
/// Bits counted per opportunity when converting a rate series (traces/README.md: 1500 * 8).
pub const CONVERSION_BITS_PER_OPPORTUNITY: i64 = 12_000;

/// What is wrong with a trace file.
#[derive(Clone, Debug, PartialEq)]
pub enum TraceErrorKind {
    /// A line that should be a non-negative integer millisecond timestamp is not.
    NotAnInteger(String),
    /// A negative timestamp.
    Negative(i64),
    /// A timestamp smaller than the one on the previous line.
    Decreasing {
        /// The timestamp on this line (ms).
        value: i64,
        /// The timestamp on the line before (ms).
        previous: i64,
    },
    /// No opportunities at all.
    Empty,
    /// The last timestamp is 0: the trace would loop with a zero period.
    ZeroPeriod,
    /// A rate-series line that does not have a time and a rate column.
    MissingColumn,
    /// A rate-series field that is not a finite number.
    NotANumber(String),
    /// A negative rate.
    NegativeRate(f64),
    /// A sample time not greater than the previous one.
    TimeNotIncreasing {
        /// The sample time on this line (s).
        value: f64,
        /// The sample time on the line before (s).
        previous: f64,
    },
    /// A rate series with fewer than two samples (no interval to take the median of).
    TooFewSamples(usize),
    /// A timestamp (ms) beyond [`limits::MAX_TRACE_MS`].
    TimestampTooLarge(i64),
    /// A rate (Mbit/s) above [`limits::MAX_RATE_MBPS`].
    RateTooHigh(f64),
    /// A rate-series sample time (s after the first) beyond a day.
    TimeTooLate(f64),
    /// More delivery opportunities than [`limits::MAX_TRACE_OPPORTUNITIES`] (at least this
    /// many).
    TooManyOpportunities(i64),
    /// A Mahimahi trace faster than [`limits::MAX_RATE_BPS`]: `count` opportunities within
    /// `span_ms` (a second of the trace, or its whole loop when that is shorter).
    MahimahiTooFast {
        /// Opportunities within `span_ms`.
        count: i64,
        /// The span counted, in ms.
        span_ms: i64,
    },
    /// A line that is not UTF-8 text.
    NotText,
    /// A line longer than [`limits::MAX_TRACE_LINE_BYTES`].
    LineTooLong,
    /// The file could not be read.
    Io(String),
}

/// A trace parse error: the file, the 1-based line (if the problem is on a line) and what is
/// wrong.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceError {
    /// The trace's name as the caller gave it (usually its file's).
    pub file: String,
    /// 1-based line number; `None` for whole-file problems (empty, zero period).
    pub line: Option<usize>,
    /// What is wrong.
    pub kind: TraceErrorKind,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: ", self.file, line)?,
            None => write!(f, "{}: ", self.file)?,
        }
        match &self.kind {
            TraceErrorKind::NotAnInteger(s) => {
                write!(f, "{s:?} is not a non-negative integer millisecond timestamp")
            }
            TraceErrorKind::Negative(v) => write!(f, "timestamp {v} is negative"),
            TraceErrorKind::Decreasing { value, previous } => {
                write!(f, "timestamp {value} is smaller than the previous one ({previous})")
            }
            TraceErrorKind::Empty => write!(f, "the trace has no delivery opportunities"),
            TraceErrorKind::ZeroPeriod => {
                write!(f, "the last timestamp is 0, so the trace would loop with a zero period")
            }
            TraceErrorKind::MissingColumn => {
                write!(f, "expected two columns \"time_s rate_mbps\"")
            }
            TraceErrorKind::NotANumber(s) => write!(f, "{s:?} is not a finite number"),
            TraceErrorKind::NegativeRate(r) => write!(f, "rate {r} Mbps is negative"),
            TraceErrorKind::TimeNotIncreasing { value, previous } => write!(
                f,
                "sample time {value} s is not greater than the previous one ({previous} s)"
            ),
            TraceErrorKind::TooFewSamples(n) => {
                write!(f, "a rate series needs at least 2 samples, found {n}")
            }
            TraceErrorKind::TimestampTooLarge(v) => write!(
                f,
                "timestamp {v} ms is beyond the limit of {} ms (a day)",
                limits::MAX_TRACE_MS
            ),
            TraceErrorKind::RateTooHigh(r) => write!(
                f,
                "rate {r} Mbps is above the limit of {} Mbps (10 Gbit/s)",
                limits::MAX_RATE_MBPS
            ),
            TraceErrorKind::TimeTooLate(t) => write!(
                f,
                "sample time {t} s after the first is beyond the limit of {} s (a day)",
                limits::MAX_SESSION_S
            ),
            TraceErrorKind::TooManyOpportunities(n) => write!(
                f,
                "the trace would have {n} or more delivery opportunities, above the limit of {}",
                limits::MAX_TRACE_OPPORTUNITIES
            ),
            TraceErrorKind::MahimahiTooFast { count, span_ms } => write!(
                f,
                "{count} delivery opportunities within {span_ms} ms ({:.0} Mbps at 1500 bytes \
                 each), above the rate limit of {} Mbps (10 Gbit/s: {} opportunities a second)",
                *count as f64 * CONVERSION_BITS_PER_OPPORTUNITY as f64
                    / (*span_ms).max(1) as f64
                    / 1e3,
                limits::MAX_RATE_MBPS,
                limits::MAX_OPPORTUNITIES_PER_S
            ),
            TraceErrorKind::NotText => write!(f, "not a text trace file (invalid UTF-8)"),
            TraceErrorKind::LineTooLong => write!(
                f,
                "a line longer than {} bytes: not a trace file",
                limits::MAX_TRACE_LINE_BYTES
            ),
            TraceErrorKind::Io(e) => write!(f, "cannot read the trace file: {e}"),
        }
    }
}

impl std::error::Error for TraceError {}

/// The two trace file formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// One millisecond timestamp per line.
    Mahimahi,
    /// `time_s rate_mbps` per line.
    RateSeries,
}

/// A Mahimahi trace read one line at a time: every line is checked as it comes, and only
/// the opportunities are kept.
struct MahimahiLines<'a> {
    name: &'a str,
    times_ms: Vec<i64>,
}

impl<'a> MahimahiLines<'a> {
    fn new(name: &'a str) -> Self {
        MahimahiLines { name, times_ms: Vec::new() }
    }

    fn err(&self, line: usize, kind: TraceErrorKind) -> TraceError {
        TraceError { file: self.name.to_string(), line: Some(line), kind }
    }

    fn line(&mut self, lineno: usize, raw: &str) -> Result<(), TraceError> {
        let line = raw.trim();
        if line.is_empty() {
            return Ok(());
        }
        let value: i64 = match line.parse() {
            Ok(v) => v,
            Err(_) => return Err(self.err(lineno, TraceErrorKind::NotAnInteger(line.into()))),
        };
        if value < 0 {
            return Err(self.err(lineno, TraceErrorKind::Negative(value)));
        }
        if value > limits::MAX_TRACE_MS {
            return Err(self.err(lineno, TraceErrorKind::TimestampTooLarge(value)));
        }
        let n = self.times_ms.len();
        if n as i64 >= limits::MAX_TRACE_OPPORTUNITIES {
            let kind = TraceErrorKind::TooManyOpportunities(n as i64 + 1);
            return Err(self.err(lineno, kind));
        }
        if let Some(&previous) = self.times_ms.last() {
            if value < previous {
                return Err(self.err(lineno, TraceErrorKind::Decreasing { value, previous }));
            }
        }
        // The rate limit: more than MAX_OPPORTUNITIES_PER_S within a second.
        let k = limits::MAX_OPPORTUNITIES_PER_S as usize;
        if n >= k && value - self.times_ms[n - k] < 1000 {
            let span_ms = value - self.times_ms[n - k] + 1;
            let kind = TraceErrorKind::MahimahiTooFast { count: k as i64 + 1, span_ms };
            return Err(self.err(lineno, kind));
        }
        self.times_ms.push(value);
        Ok(())
    }

    fn finish(mut self) -> Result<Trace, TraceError> {
        // A loop shorter than a second: the rate limit on average over the loop.
        if let Some(&period) = self.times_ms.last() {
            let n = self.times_ms.len() as i64;
            if period > 0 && period < 1000 && n * 1000 > limits::MAX_OPPORTUNITIES_PER_S * period {
                let kind = TraceErrorKind::MahimahiTooFast { count: n, span_ms: period };
                return Err(TraceError { file: self.name.to_string(), line: None, kind });
            }
        }
        self.times_ms.shrink_to_fit();
        Trace::from_ms(self.name, self.times_ms)
    }
}

/// A rate series read one line at a time (its samples kept, checked as they come).
struct RateLines<'a> {
    name: &'a str,
    samples: Vec<(f64, f64)>,
}

impl<'a> RateLines<'a> {
    fn new(name: &'a str) -> Self {
        RateLines { name, samples: Vec::new() }
    }

    fn line(&mut self, lineno: usize, raw: &str) -> Result<(), TraceError> {
        let err = |kind| TraceError { file: self.name.to_string(), line: Some(lineno), kind };
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            return Ok(());
        }
        let mut fields =
            line.split(|c: char| c == ',' || c.is_whitespace()).filter(|s| !s.is_empty());
        let (Some(t), Some(r)) = (fields.next(), fields.next()) else {
            return Err(err(TraceErrorKind::MissingColumn));
        };
        let num = |s: &str| match s.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(err(TraceErrorKind::NotANumber(s.into()))),
        };
        let (t, r) = (num(t)?, num(r)?);
        if r < 0.0 {
            return Err(err(TraceErrorKind::NegativeRate(r)));
        }
        if r > limits::MAX_RATE_MBPS {
            return Err(err(TraceErrorKind::RateTooHigh(r)));
        }
        if let Some(&(first, _)) = self.samples.first() {
            if t - first > limits::MAX_SESSION_S {
                return Err(err(TraceErrorKind::TimeTooLate(t - first)));
            }
        }
        if let Some(&(previous, _)) = self.samples.last() {
            if t <= previous {
                return Err(err(TraceErrorKind::TimeNotIncreasing { value: t, previous }));
            }
        }
        self.samples.push((t, r));
        Ok(())
    }

    fn finish(self) -> Result<Trace, TraceError> {
        Trace::from_rate_samples(self.samples, self.name)
    }
}

/// Mahimahi delivery opportunities (see the module documentation).
#[derive(Clone, Debug)]
pub struct Trace {
    name: String,
    /// Sorted (non-decreasing) millisecond timestamps; non-empty, last > 0.
    times_ms: Vec<i64>,
    /// Number of entries equal to the last timestamp (>= 1).
    at_period: usize,
    /// The rate setting the opportunities were made from, if they were (a generator spec or
    /// a rate series): piecewise-constant `(start_us, rate_bps)` segments over one loop, by
    /// the conversion's 12000 bits per opportunity. A Mahimahi file has none.
    schedule: Option<Arc<[(i64, i64)]>>,
}

/// Two traces are equal when they have the same name and opportunities; whether one also
/// knows the rate setting it was made from does not change the link it describes.
impl PartialEq for Trace {
    fn eq(&self, other: &Trace) -> bool {
        self.name == other.name && self.times_ms == other.times_ms
    }
}
impl Eq for Trace {}

impl Trace {
    /// Builds a trace from millisecond timestamps, checking the invariants.
    pub fn from_ms(name: &str, times_ms: Vec<i64>) -> Result<Trace, TraceError> {
        let err = |line, kind| TraceError { file: name.to_string(), line, kind };
        for (i, &t) in times_ms.iter().enumerate() {
            if t < 0 {
                return Err(err(Some(i + 1), TraceErrorKind::Negative(t)));
            }
            if t > limits::MAX_TRACE_MS {
                return Err(err(Some(i + 1), TraceErrorKind::TimestampTooLarge(t)));
            }
            if i > 0 && t < times_ms[i - 1] {
                let kind = TraceErrorKind::Decreasing { value: t, previous: times_ms[i - 1] };
                return Err(err(Some(i + 1), kind));
            }
        }
        if times_ms.len() as i64 > limits::MAX_TRACE_OPPORTUNITIES {
            return Err(err(None, TraceErrorKind::TooManyOpportunities(times_ms.len() as i64)));
        }
        let Some(&last) = times_ms.last() else {
            return Err(err(None, TraceErrorKind::Empty));
        };
        if last == 0 {
            return Err(err(None, TraceErrorKind::ZeroPeriod));
        }
        let at_period = times_ms.iter().rev().take_while(|&&t| t == last).count();
        Ok(Trace { name: name.to_string(), times_ms, at_period, schedule: None })
    }

    /// Parses a Mahimahi trace: one non-negative integer millisecond timestamp per line,
    /// non-decreasing, at least one line, last > 0, at most 10 Gbit/s
    /// ([`limits::MAX_OPPORTUNITIES_PER_S`]). Blank lines and surrounding whitespace are
    /// ignored.
    pub fn parse_mahimahi(text: &str, name: &str) -> Result<Trace, TraceError> {
        let mut b = MahimahiLines::new(name);
        for (idx, raw) in text.lines().enumerate() {
            b.line(idx + 1, raw)?;
        }
        b.finish()
    }

    /// Reads a trace file of `format` line by line (`#` starts a comment in both formats):
    /// memory for the opportunities kept (a rate series: its samples), never the whole
    /// file. `name` names the file in errors.
    pub fn read_file(path: &Path, name: &str, format: TraceFormat) -> Result<Trace, TraceError> {
        let io = |e: std::io::Error| TraceError {
            file: name.to_string(),
            line: None,
            kind: TraceErrorKind::Io(e.to_string()),
        };
        let mut r = BufReader::with_capacity(1 << 16, std::fs::File::open(path).map_err(io)?);
        let mut mahimahi = MahimahiLines::new(name);
        let mut rate = RateLines::new(name);
        let mut buf = Vec::new();
        let mut lineno = 0;
        loop {
            buf.clear();
            let cap = limits::MAX_TRACE_LINE_BYTES as u64 + 1;
            let n = (&mut r).take(cap).read_until(b'\n', &mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            lineno += 1;
            let err = |kind| TraceError { file: name.to_string(), line: Some(lineno), kind };
            if buf.len() as u64 == cap && buf.last() != Some(&b'\n') {
                return Err(err(TraceErrorKind::LineTooLong));
            }
            let text = std::str::from_utf8(&buf).map_err(|_| err(TraceErrorKind::NotText))?;
            let line = text.split('#').next().unwrap_or("");
            match format {
                TraceFormat::Mahimahi => mahimahi.line(lineno, line)?,
                TraceFormat::RateSeries => rate.line(lineno, line)?,
            }
        }
        match format {
            TraceFormat::Mahimahi => mahimahi.finish(),
            TraceFormat::RateSeries => rate.finish(),
        }
    }

    /// Parses a throughput time series, one sample per line: `time_s rate_mbps`, separated by
    /// whitespace or a comma; further columns are ignored (Hairpin's RTT and loss), `#`
    /// starts a comment, blank lines are skipped. Converted by the traces/README.md rule:
    /// each sample is constant until the next one (the last lasts the median interval);
    /// bits = rate * d + carry; n = floor(bits / 12000); the remainder is carried; the n
    /// opportunities sit at ceil(start_ms + (k+1) * d_ms / n), times re-based to the first
    /// sample. (The sum is rounded to the microsecond before the ceiling, as the reference
    /// converter does, so decimal sample times such as 0.87 s do not pick up float noise.)
    pub fn parse_rate_series(text: &str, name: &str) -> Result<Trace, TraceError> {
        let mut b = RateLines::new(name);
        for (idx, raw) in text.lines().enumerate() {
            b.line(idx + 1, raw)?;
        }
        b.finish()
    }

    /// The rate-series conversion of checked `samples` (see [`Trace::parse_rate_series`]).
    fn from_rate_samples(samples: Vec<(f64, f64)>, name: &str) -> Result<Trace, TraceError> {
        if samples.len() < 2 {
            let kind = TraceErrorKind::TooFewSamples(samples.len());
            return Err(TraceError { file: name.to_string(), line: None, kind });
        }
        let mut intervals: Vec<f64> = samples.windows(2).map(|w| w[1].0 - w[0].0).collect();
        let median = {
            let mut sorted = intervals.clone();
            sorted.sort_by(f64::total_cmp);
            let m = sorted.len();
            if m % 2 == 1 {
                sorted[m / 2]
            } else {
                (sorted[m / 2 - 1] + sorted[m / 2]) / 2.0
            }
        };
        intervals.push(median);
        let t0 = samples[0].0;
        // Bounds before allocation: the span (the last sample lasts the median interval) and
        // the number of opportunities the rates give.
        let span_s = samples[samples.len() - 1].0 - t0 + median;
        if span_s > limits::MAX_SESSION_S {
            let kind = TraceErrorKind::TimeTooLate(span_s);
            return Err(TraceError { file: name.to_string(), line: None, kind });
        }
        let expected: f64 =
            samples.iter().zip(&intervals).map(|(&(_, r), &d)| r * 1e6 * d).sum::<f64>()
                / CONVERSION_BITS_PER_OPPORTUNITY as f64;
        if expected > limits::MAX_TRACE_OPPORTUNITIES as f64 {
            let kind = TraceErrorKind::TooManyOpportunities(expected as i64);
            return Err(TraceError { file: name.to_string(), line: None, kind });
        }
        let mut times_ms = Vec::new();
        let mut carry_bits = 0.0_f64;
        let schedule: Vec<(i64, i64)> = samples
            .iter()
            .map(|&(t, rate_mbps)| {
                (((t - t0) * 1e6).round() as i64, (rate_mbps * 1e6).round() as i64)
            })
            .collect();
        for (&(t, rate_mbps), &d_s) in samples.iter().zip(&intervals) {
            let bits = rate_mbps * 1e6 * d_s + carry_bits;
            let n = (bits / CONVERSION_BITS_PER_OPPORTUNITY as f64).floor();
            carry_bits = bits - n * CONVERSION_BITS_PER_OPPORTUNITY as f64;
            let n = n as i64;
            let start_ms = (t - t0) * 1000.0;
            let d_ms = d_s * 1000.0;
            for k in 0..n {
                let at_us = ((start_ms + (k + 1) as f64 * d_ms / n as f64) * 1000.0).round() as i64;
                times_ms.push(ceil_div(at_us, 1000));
            }
        }
        Ok(Trace::from_ms(name, times_ms)?.with_schedule(schedule))
    }

    /// This trace, knowing the rate setting it was made from (`(start_us, rate_bps)` in
    /// order, the first at 0).
    fn with_schedule(mut self, schedule: Vec<(i64, i64)>) -> Trace {
        if schedule.first().is_some_and(|&(start, _)| start == 0) {
            self.schedule = Some(schedule.into());
        }
        self
    }

    /// The rate the link is set to at `t` (looping), as a TC emulation driven by the same
    /// schedule would serve it: the nominal rate of the segment `t` falls in, in bytes of
    /// [`MTU_BYTES`] per opportunity (so 1504/1500 of the nominal rate, the rate the link
    /// really serves). `None` for a trace that does not know its schedule (a Mahimahi file).
    pub fn rate_setting_at(&self, t: Timestamp) -> Option<DataRate> {
        let schedule = self.schedule.as_ref()?;
        let period_us = self.period_ms() * 1000;
        let r = t.as_us().rem_euclid(period_us);
        let i = schedule.partition_point(|&(start, _)| start <= r).max(1) - 1;
        let nominal_bps = schedule[i].1 as i128;
        let bps = nominal_bps * MTU_BYTES as i128 * 8 / CONVERSION_BITS_PER_OPPORTUNITY as i128;
        Some(DataRate::from_bps(bps as i64))
    }

    /// Whether [`Self::rate_setting_at`] knows the rate.
    pub fn has_schedule(&self) -> bool {
        self.schedule.is_some()
    }

    /// A constant-rate trace of the given period, with the README conversion's
    /// 12000 bits per opportunity and carried remainders (so `constant(12 Mbps, 1 s)` is one
    /// opportunity per millisecond, the classic Mahimahi "12 Mbps" trace). The link serves
    /// 1504 bytes per opportunity, so its real capacity is 1504/1500 of the nominal rate
    /// (12.03 Mbps here); utilisation and `bwe_ratio` use the real capacity.
    ///
    /// Panics unless one period holds at least one opportunity (12,000 bits: 12 kbps over
    /// 1 s; a programming error, not input: callers check user rates first, as
    /// `second_bottleneck.rate_mbps`'s validation does).
    pub fn constant(rate: DataRate, period: TimeDelta) -> Trace {
        assert!(rate > DataRate::ZERO && rate.is_finite(), "rate must be positive: {rate}");
        assert!(period >= TimeDelta::from_ms(1), "period must be at least 1 ms: {period}");
        let name = format!("constant-{}bps", rate.as_bps());
        // Invariant: a period holding 12,000 bits gives opportunities with last = period.
        let mut b = Builder::new();
        b.interval(0, period.as_us(), rate.as_bps());
        b.finish(&name, period.as_us()).expect("positive rate and period")
    }

    /// The name the trace was made with (its file's, or a description of a built one).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The opportunities' millisecond timestamps (one loop).
    pub fn times_ms(&self) -> &[i64] {
        &self.times_ms
    }
    /// Number of opportunities in one loop.
    pub fn len(&self) -> usize {
        self.times_ms.len()
    }
    /// Always false (a trace has at least one opportunity); for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.times_ms.is_empty()
    }
    /// The loop period (the last timestamp).
    pub fn period(&self) -> TimeDelta {
        TimeDelta::from_ms(self.period_ms())
    }
    fn period_ms(&self) -> i64 {
        // Invariant: non-empty (checked in from_ms).
        *self.times_ms.last().expect("trace is non-empty")
    }
    /// Mean link capacity: opportunities x [`MTU_BYTES`] / period.
    pub fn mean_rate(&self) -> DataRate {
        MTU * self.times_ms.len() as i64 / self.period()
    }
    /// Mean rate by the README convention (12000 bits per opportunity), as in its tables and
    /// as requested from [`Trace::constant`] and the generator.
    pub fn nominal_rate(&self) -> DataRate {
        DataRate::from_bps(
            CONVERSION_BITS_PER_OPPORTUNITY * self.times_ms.len() as i64 * 1000 / self.period_ms(),
        )
    }

    /// The Mahimahi text form (one timestamp per line).
    pub fn to_mahimahi_string(&self) -> String {
        use std::fmt::Write;
        let mut s = String::with_capacity(self.times_ms.len() * 7);
        for t in &self.times_ms {
            // Writing to a String cannot fail.
            let _ = writeln!(s, "{t}");
        }
        s
    }

    /// Number of opportunities (over all loops, from time 0) strictly before `t`.
    pub fn count_before(&self, t: Timestamp) -> i64 {
        let t_us = t.as_us();
        if t_us <= 0 {
            return 0;
        }
        let period_us = self.period_ms() * 1000;
        let q = t_us / period_us;
        let r = t_us % period_us;
        let in_loop = self.times_ms.partition_point(|&m| m * 1000 < r) as i64;
        let mut n = q * self.times_ms.len() as i64 + in_loop;
        if r == 0 && q > 0 {
            // The previous loop's opportunities at `period` fall exactly at t.
            n -= self.at_period as i64;
        }
        n
    }

    /// Bytes of the opportunities with time in `[t0, t1)`, looping (zero if `t1 <= t0`).
    pub fn capacity_between(&self, t0: Timestamp, t1: Timestamp) -> DataSize {
        if t1 <= t0 {
            return DataSize::ZERO;
        }
        MTU * (self.count_before(t1) - self.count_before(t0))
    }

    /// Capacity per bin of `bin` over `[0, duration)` (for plots); a partial last bin is
    /// normalised by its length.
    pub fn rate_series(&self, bin: TimeDelta, duration: TimeDelta) -> Vec<DataRate> {
        if bin <= TimeDelta::ZERO || duration <= TimeDelta::ZERO {
            return Vec::new();
        }
        let bins = ceil_div(duration.as_us(), bin.as_us());
        (0..bins)
            .map(|i| {
                let start = Timestamp::ZERO + bin * i;
                let end = (Timestamp::ZERO + bin * (i + 1)).min(Timestamp::ZERO + duration);
                self.capacity_between(start, end) / (end - start)
            })
            .collect()
    }

    /// The position of the first opportunity at or after `t` (clamped to time 0).
    pub(crate) fn seek(&self, t: Timestamp) -> OppCursor {
        let t_us = t.as_us().max(0);
        let period_us = self.period_ms() * 1000;
        let q = t_us / period_us;
        let r = t_us % period_us;
        if r == 0 && q > 0 {
            // The previous loop's opportunities at `period` are at t itself.
            return OppCursor { lap: q - 1, index: self.times_ms.len() - self.at_period };
        }
        let index = self.times_ms.partition_point(|&m| m * 1000 < r);
        if index == self.times_ms.len() {
            OppCursor { lap: q + 1, index: 0 }
        } else {
            OppCursor { lap: q, index }
        }
    }

    pub(crate) fn time_of(&self, c: OppCursor) -> Timestamp {
        Timestamp::from_us((c.lap * self.period_ms() + self.times_ms[c.index]) * 1000)
    }

    pub(crate) fn advance(&self, c: &mut OppCursor) {
        c.index += 1;
        if c.index == self.times_ms.len() {
            c.index = 0;
            c.lap += 1;
        }
    }
}

/// The position of one opportunity: loop number and index within the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct OppCursor {
    pub lap: i64,
    pub index: usize,
}

pub(crate) fn ceil_div(a: i64, b: i64) -> i64 {
    debug_assert!(b > 0);
    a.div_euclid(b) + i64::from(a.rem_euclid(b) != 0)
}

/// Exact integer conversion of constant-rate intervals to opportunities (README rule with
/// 12000 bits per opportunity; the carry is kept in bit-microseconds, so nothing drifts).
pub(crate) struct Builder {
    times_ms: Vec<i64>,
    /// Carried remainder in bit-microseconds (bits * 1e6).
    carry: i128,
    /// The `(start_us, rate_bps)` of each interval, for [`Trace::rate_setting_at`].
    schedule: Vec<(i64, i64)>,
}

impl Builder {
    pub(crate) fn new() -> Builder {
        Builder { times_ms: Vec::new(), carry: 0, schedule: Vec::new() }
    }

    /// A builder with room for `n` opportunities (bounded by the caller: no growth by
    /// doubling past what a long trace needs).
    pub(crate) fn with_capacity(n: usize) -> Builder {
        Builder { times_ms: Vec::with_capacity(n), carry: 0, schedule: Vec::new() }
    }

    /// Adds `[start_us, start_us + d_us)` at `rate_bps`.
    pub(crate) fn interval(&mut self, start_us: i64, d_us: i64, rate_bps: i64) {
        if d_us <= 0 {
            return;
        }
        if self.schedule.last().is_none_or(|&(_, r)| r != rate_bps) {
            self.schedule.push((start_us, rate_bps));
        }
        let per_opp = CONVERSION_BITS_PER_OPPORTUNITY as i128 * 1_000_000;
        self.carry += rate_bps as i128 * d_us as i128;
        let n = (self.carry / per_opp) as i64;
        self.carry -= n as i128 * per_opp;
        for k in 0..n {
            // ceil((start_us + (k+1) * d_us / n) / 1000) in exact integers.
            let num = start_us as i128 * n as i128 + (k + 1) as i128 * d_us as i128;
            let den = n as i128 * 1000;
            let ms = num / den + i128::from(num % den != 0);
            self.times_ms.push(ms as i64);
        }
    }

    /// Finishes a trace meant to loop with period `end_us`: if the last opportunity falls
    /// before the end (a slow final interval), it is moved to the end so the period is the
    /// requested duration (the count, hence the mean rate, is unchanged).
    pub(crate) fn finish(mut self, name: &str, end_us: i64) -> Result<Trace, TraceError> {
        let end_ms = end_us / 1000;
        if let Some(last) = self.times_ms.last_mut() {
            if *last < end_ms {
                *last = end_ms;
            }
        }
        Ok(Trace::from_ms(name, self.times_ms)?.with_schedule(self.schedule))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_err(text: &str) -> TraceError {
        Trace::parse_mahimahi(text, "trace.mahi").unwrap_err()
    }

    fn read(bytes: &[u8], format: TraceFormat) -> Result<Trace, TraceError> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "sluice-trace-{}-{}.txt",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, bytes).unwrap();
        let out = Trace::read_file(&path, "t.txt", format);
        std::fs::remove_file(&path).unwrap();
        out
    }

    #[test]
    fn a_file_read_line_by_line_is_the_text_parsed_whole() {
        for (text, format) in [
            ("1\n1\n2 \n\n3\n", TraceFormat::Mahimahi),
            ("0 12\n0.5 3\n1.0 7\n", TraceFormat::RateSeries),
        ] {
            let whole = match format {
                TraceFormat::Mahimahi => Trace::parse_mahimahi(text, "t.txt"),
                TraceFormat::RateSeries => Trace::parse_rate_series(text, "t.txt"),
            };
            let read_ = read(text.as_bytes(), format).unwrap();
            assert_eq!(read_, whole.unwrap());
            // CRLF line ends and comments change nothing.
            let crlf = text.replace('\n', " # a note\r\n");
            assert_eq!(read(crlf.as_bytes(), format).unwrap(), read_);
        }
        let e = read(b"1\n2\n\xff\n", TraceFormat::Mahimahi).unwrap_err();
        assert_eq!((e.line, e.kind), (Some(3), TraceErrorKind::NotText));
        let long = format!("1\n{}\n", "2".repeat(limits::MAX_TRACE_LINE_BYTES + 1));
        let e = read(long.as_bytes(), TraceFormat::Mahimahi).unwrap_err();
        assert_eq!((e.line, e.kind), (Some(2), TraceErrorKind::LineTooLong));
        let e = read(b"1\n5\n3\n", TraceFormat::Mahimahi).unwrap_err();
        assert_eq!(e.to_string(), "t.txt:3: timestamp 3 is smaller than the previous one (5)");
    }

    #[test]
    fn a_mahimahi_trace_above_10_gbits_is_refused() {
        let k = limits::MAX_OPPORTUNITIES_PER_S as usize;
        // k opportunities in one second are 10 Gbit/s; one more within the second is not.
        let at_limit: String = (0..k).map(|i| format!("{}\n", 1 + i * 1000 / k)).collect();
        assert!(Trace::parse_mahimahi(&(at_limit.clone() + "1001\n"), "x").is_ok());
        let e = parse_err(&(at_limit + "1000\n"));
        assert_eq!(e.line, Some(k + 1));
        assert!(matches!(e.kind, TraceErrorKind::MahimahiTooFast { .. }), "{e}");
        assert!(e.to_string().contains("above the rate limit of 10000 Mbps"), "{e}");
        // A loop shorter than a second: on average over the loop (5 ms of 10000 each).
        let e = parse_err(&"5\n".repeat(10_000));
        assert_eq!(e.kind, TraceErrorKind::MahimahiTooFast { count: 10_000, span_ms: 5 });
        assert!(Trace::parse_mahimahi(&"5\n".repeat(4_000), "x").is_ok());
        // What the generator makes at the limit reads back.
        let spec = crate::link::trace_gen::TraceSpec::parse_cli("constant:10000").unwrap();
        let g = crate::link::trace_gen::generate(&spec, TimeDelta::from_secs(2)).unwrap();
        assert!(Trace::parse_mahimahi(&g.to_mahimahi_string(), "x").is_ok());
    }

    #[test]
    fn parses_mahimahi_with_blank_lines_and_whitespace() {
        let t = Trace::parse_mahimahi("0\n1 \n\n1\n  5\n\n", "x").unwrap();
        assert_eq!(t.times_ms(), &[0, 1, 1, 5]);
        assert_eq!(t.period(), TimeDelta::from_ms(5));
        assert_eq!(Trace::parse_mahimahi(&t.to_mahimahi_string(), "x").unwrap(), t);
    }

    #[test]
    fn unsorted_trace_names_file_and_line() {
        let e = parse_err("1\n2\n1300\n\n1200\n1400\n");
        assert_eq!(e.line, Some(5));
        assert_eq!(
            e.to_string(),
            "trace.mahi:5: timestamp 1200 is smaller than the previous one (1300)"
        );
    }

    #[test]
    fn negative_and_non_integer_lines_are_rejected() {
        let e = parse_err("1\n-3\n");
        assert_eq!((e.line, e.kind.clone()), (Some(2), TraceErrorKind::Negative(-3)));
        assert!(e.to_string().starts_with("trace.mahi:2: "), "{e}");
        let e = parse_err("1\n2\n2.5\n");
        assert_eq!(e.line, Some(3));
        assert!(e.to_string().contains("\"2.5\" is not a non-negative integer"), "{e}");
        let e = parse_err("1\nabc\n");
        assert_eq!(e.line, Some(2));
    }

    #[test]
    fn empty_and_zero_period_are_rejected() {
        let e = parse_err("\n  \n");
        assert_eq!((e.line, e.kind.clone()), (None, TraceErrorKind::Empty));
        assert_eq!(e.to_string(), "trace.mahi: the trace has no delivery opportunities");
        let e = parse_err("0\n0\n");
        assert_eq!(e.kind, TraceErrorKind::ZeroPeriod);
        let boxed: Box<dyn std::error::Error> = Box::new(e);
        assert!(boxed.to_string().contains("zero period"));
    }

    #[test]
    fn a_trace_made_from_rates_knows_its_setting_and_a_file_does_not() {
        let spec = crate::link::TraceSpec::parse_cli("steps:20@1,2@2").unwrap();
        let t = crate::link::generate(&spec, TimeDelta::from_secs(3)).unwrap();
        let real = |mbps: i64| DataRate::from_bps(mbps * 1_000_000 * 1504 / 1500);
        assert_eq!(t.rate_setting_at(Timestamp::from_ms(999)), Some(real(20)));
        assert_eq!(t.rate_setting_at(Timestamp::from_ms(1000)), Some(real(2)));
        assert_eq!(t.rate_setting_at(Timestamp::from_ms(2999)), Some(real(2)));
        // Looping: 3.5 s is 0.5 s into the second loop.
        assert_eq!(t.rate_setting_at(Timestamp::from_ms(3500)), Some(real(20)));
        let file = Trace::parse_mahimahi(&t.to_mahimahi_string(), t.name()).unwrap();
        assert_eq!(file, t);
        assert_eq!(file.rate_setting_at(Timestamp::from_ms(10)), None);
        let series = Trace::parse_rate_series("0 12\n0.5 3\n1 6\n", "s").unwrap();
        assert_eq!(series.rate_setting_at(Timestamp::from_ms(600)), Some(real(3)));
        assert_eq!(series.rate_setting_at(Timestamp::from_ms(1200)), Some(real(6)));
    }

    #[test]
    fn rate_series_errors_have_line_numbers() {
        let e = Trace::parse_rate_series("# hdr\n0 1\n1 x\n", "s.log").unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(e.to_string().starts_with("s.log:3: \"x\""), "{e}");
        let e = Trace::parse_rate_series("0 1\n1 -2\n", "s.log").unwrap_err();
        assert_eq!(e.kind, TraceErrorKind::NegativeRate(-2.0));
        let e = Trace::parse_rate_series("0 1\n1 2\n1 3\n", "s.log").unwrap_err();
        assert_eq!(e.line, Some(3));
        let e = Trace::parse_rate_series("0 1\n", "s.log").unwrap_err();
        assert_eq!(e.kind, TraceErrorKind::TooFewSamples(1));
        let e = Trace::parse_rate_series("0 1\n5\n", "s.log").unwrap_err();
        assert_eq!((e.line, e.kind), (Some(2), TraceErrorKind::MissingColumn));
        let e = Trace::parse_rate_series("0 0\n1 0\n", "s.log").unwrap_err();
        assert_eq!(e.kind, TraceErrorKind::Empty);
    }

    #[test]
    fn rate_series_12_mbps_for_1_s_is_1000_opportunities() {
        // Two samples 0.5 s apart: the last lasts the median interval (0.5 s), 1 s in total.
        let t = Trace::parse_rate_series("0.0 12\n0.5,12\n", "c").unwrap();
        assert_eq!(t.len(), 1000);
        assert_eq!(t.times_ms(), (1..=1000).collect::<Vec<i64>>().as_slice());
        assert_eq!(t.nominal_rate(), DataRate::from_mbps(12));
        assert_eq!(t.mean_rate(), DataRate::from_bps(12_032_000));
    }

    #[test]
    fn rate_series_carries_remainder_across_intervals() {
        // 0.018 Mbps for 1 s = 18000 bits per interval: 1 opportunity + 6000 bits carried,
        // so intervals alternate 1, 2, 1, 2 opportunities (no capacity lost to rounding).
        let text = "# t rate\n0 0.018\n1 0.018 # c\n2\t0.018\n3, 0.018\n";
        let t = Trace::parse_rate_series(text, "c").unwrap();
        assert_eq!(t.times_ms(), &[1000, 1500, 2000, 3000, 3500, 4000]);
        // Without carrying there would be 4.
        assert_eq!(t.len(), 6);
        // Re-based: a series starting at 3001.4 s gives the same opportunities.
        // (Sample times exact in binary: with 3001.4/3001.6 the float interval is a hair
        // under 0.2 s and, by the README's float rule, one opportunity moves to the carry.)
        let shifted = Trace::parse_rate_series("3001.5 12\n3001.75 12\n", "z").unwrap();
        assert_eq!(shifted.times_ms(), (1..=500).collect::<Vec<i64>>().as_slice());
    }

    #[test]
    fn zero_rate_intervals_stay_outages() {
        let t = Trace::parse_rate_series("0 12\n1 0\n2 12\n", "o").unwrap();
        assert_eq!(
            t.capacity_between(Timestamp::from_ms(1001), Timestamp::from_ms(2001)),
            DataSize::ZERO
        );
        assert_eq!(t.len(), 2000);
    }

    /// The README's conversion must reproduce the shipped full-series files exactly.
    #[test]
    fn reproduces_shipped_conversions() {
        let dir = std::path::Path::new("/work/shared/traces");
        let pairs = [
            ("hairpin/eth_trace9.orig.log", "hairpin/eth_trace9.mahi"),
            ("pitree/hsr_trace4.orig.log", "pitree/hsr_trace4.mahi"),
            ("norway-hsdpa/norway_car_12.orig.txt", "norway-hsdpa/norway_car_12.mahi"),
        ];
        for (orig, mahi) in pairs {
            let (Ok(o), Ok(m)) =
                (std::fs::read_to_string(dir.join(orig)), std::fs::read_to_string(dir.join(mahi)))
            else {
                eprintln!("skipping {orig}: shared traces not present");
                continue;
            };
            let converted = Trace::parse_rate_series(&o, orig).unwrap();
            let shipped = Trace::parse_mahimahi(&m, mahi).unwrap();
            assert_eq!(converted.times_ms(), shipped.times_ms(), "{orig}");
        }
    }

    #[test]
    fn capacity_between_loops_and_counts_boundaries() {
        // Opportunities at 0, 2, 2, 5; period 5: absolute times 0,2,2,5 | 5,7,7,10 | 10,...
        let t = Trace::from_ms("t", vec![0, 2, 2, 5]).unwrap();
        let cap = |a: i64, b: i64| {
            t.capacity_between(Timestamp::from_ms(a), Timestamp::from_ms(b)).as_bytes() / MTU_BYTES
        };
        assert_eq!(cap(0, 1), 1);
        assert_eq!(cap(0, 5), 3);
        assert_eq!(cap(5, 6), 2); // loop 0's 5 and loop 1's 0
        assert_eq!(cap(0, 10), 7);
        assert_eq!(cap(0, 11), 9); // 10 twice: loop 1's end and loop 2's start
        assert_eq!(cap(7, 7), 0);
        assert_eq!(cap(100, 105), 4); // 100 twice, 102 twice
                                      // Brute force against an explicit expansion.
        let mut abs = Vec::new();
        for lap in 0..30 {
            for &m in t.times_ms() {
                abs.push(lap * 5 + m);
            }
        }
        for a in 0..100 {
            for b in a..100 {
                let want = abs.iter().filter(|&&x| x >= a && x < b).count() as i64;
                assert_eq!(cap(a, b), want, "[{a},{b})");
            }
            // seek: first opportunity at or after a.
            let first = *abs.iter().find(|&&x| x >= a).unwrap();
            assert_eq!(t.time_of(t.seek(Timestamp::from_ms(a))), Timestamp::from_ms(first));
        }
        // Sub-millisecond seek.
        assert_eq!(t.time_of(t.seek(Timestamp::from_us(2001))), Timestamp::from_ms(5));
    }

    #[test]
    fn single_line_1_is_about_12_mbps() {
        let t = Trace::parse_mahimahi("1\n", "one").unwrap();
        assert_eq!(t.mean_rate(), DataRate::from_bps(12_032_000));
        let series = t.rate_series(TimeDelta::from_ms(100), TimeDelta::from_ms(250));
        // [0, 100 ms) holds the opportunities at 1..=99 ms; later bins hold 100 (the partial
        // last bin [200, 250) holds 50 and is normalised by its length).
        assert_eq!(
            series,
            vec![
                DataRate::from_bps(11_911_680),
                DataRate::from_bps(12_032_000),
                DataRate::from_bps(12_032_000)
            ]
        );
    }

    #[test]
    fn constant_has_exact_mean() {
        let t = Trace::constant(DataRate::from_mbps(12), TimeDelta::from_secs(1));
        assert_eq!(t.times_ms(), (1..=1000).collect::<Vec<i64>>().as_slice());
        let t = Trace::constant(DataRate::from_kbps(2500), TimeDelta::from_secs(3));
        assert_eq!(t.period(), TimeDelta::from_secs(3));
        assert_eq!(t.len(), 625);
        assert_eq!(t.nominal_rate(), DataRate::from_kbps(2500));
    }
}
