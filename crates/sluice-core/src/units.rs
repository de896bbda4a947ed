//! Unit types with integer storage, in the spirit of libwebrtc's `api/units`.
//!
//! * [`Timestamp`]: a point in time, microseconds since the start of a session.
//! * [`TimeDelta`]: a signed duration in microseconds.
//! * [`DataSize`]: a signed amount of data in bytes.
//! * [`DataRate`]: a signed rate in bits per second.
//!
//! Cross-unit operators are defined once here (size / time = rate, rate * time = size,
//! size / rate = time), so bits-versus-bytes and ms-versus-us mistakes stop compiling.
//! `Timestamp`, `TimeDelta` and `DataRate` have a plus-infinity value, used for
//! "never" timeouts and unbounded rates.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Div, Mul, Neg, Sub, SubAssign};

const INF: i64 = i64::MAX;

/// `x.round() as i64` (half away from zero, saturating, NaN to 0) without the call into
/// libm's `round` that showed in the simulator's profiles: exact while `x - trunc(x)` is,
/// i.e. for every |x| below 2^52, and above that `x` is already whole.
#[inline]
pub(crate) fn round_i64(x: f64) -> i64 {
    let i = x as i64;
    let frac = x - i as f64;
    if frac >= 0.5 {
        i.saturating_add(1)
    } else if frac <= -0.5 {
        i.saturating_sub(1)
    } else {
        i
    }
}

/// A point in (virtual or real) time, in microseconds from the start of the session.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The start of the session.
    pub const ZERO: Timestamp = Timestamp(0);
    /// "Never": the timeout of a state machine with nothing to do.
    pub const INFINITY: Timestamp = Timestamp(INF);

    /// A timestamp `us` microseconds from the start of the session.
    pub const fn from_us(us: i64) -> Self {
        Timestamp(us)
    }
    /// A timestamp `ms` milliseconds from the start of the session.
    pub const fn from_ms(ms: i64) -> Self {
        Timestamp(ms * 1000)
    }
    /// A timestamp `s` seconds from the start of the session, rounded to the nearest microsecond.
    pub fn from_secs_f64(s: f64) -> Self {
        Timestamp(round_i64(s * 1e6))
    }
    /// Microseconds from the start of the session.
    pub const fn as_us(self) -> i64 {
        self.0
    }
    /// Rounded down to a multiple of `resolution` (libwebrtc's `RoundDownTo`, as
    /// `rtc::TimeMillis()` reads a clock); itself when `resolution` is not positive or the
    /// timestamp is infinite.
    pub fn round_down_to(self, resolution: TimeDelta) -> Self {
        let r = resolution.as_us();
        if r <= 0 || !self.is_finite() {
            return self;
        }
        Timestamp(self.0 - self.0.rem_euclid(r))
    }
    /// Rounded to the nearest multiple of `resolution`, halves up (libwebrtc's `RoundTo`);
    /// itself when `resolution` is not positive or the timestamp is infinite.
    pub fn round_to(self, resolution: TimeDelta) -> Self {
        let r = resolution.as_us();
        if r <= 0 || !self.is_finite() {
            return self;
        }
        Timestamp(self.0 + r / 2).round_down_to(resolution)
    }
    /// Whole milliseconds from the start of the session (truncated towards zero).
    pub const fn as_ms(self) -> i64 {
        self.0 / 1000
    }
    /// Seconds from the start of the session, as a float ([`Self::INFINITY`] is not mapped to
    /// `f64::INFINITY`).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// Whether this is not [`Self::INFINITY`].
    pub const fn is_finite(self) -> bool {
        self.0 != INF
    }
    /// Saturating difference: `self - earlier`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Timestamp) -> TimeDelta {
        if earlier >= self {
            TimeDelta::ZERO
        } else {
            self - earlier
        }
    }
}

/// A signed duration in microseconds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct TimeDelta(i64);

impl TimeDelta {
    /// A zero duration.
    pub const ZERO: TimeDelta = TimeDelta(0);
    /// Plus infinity: an unbounded duration (what a size takes at a zero rate).
    pub const INFINITY: TimeDelta = TimeDelta(INF);

    /// A duration of `us` microseconds.
    pub const fn from_us(us: i64) -> Self {
        TimeDelta(us)
    }
    /// A duration of `ms` milliseconds.
    pub const fn from_ms(ms: i64) -> Self {
        TimeDelta(ms * 1000)
    }
    /// A duration of `s` whole seconds.
    pub const fn from_secs(s: i64) -> Self {
        TimeDelta(s * 1_000_000)
    }
    /// Rounded up to a multiple of `resolution` (libwebrtc's `RoundUpTo`); itself when
    /// `resolution` is not positive or the duration is infinite.
    pub fn round_up_to(self, resolution: TimeDelta) -> Self {
        let r = resolution.as_us();
        if r <= 0 || !self.is_finite() {
            return self;
        }
        TimeDelta(self.0.div_euclid(r) * r + if self.0.rem_euclid(r) != 0 { r } else { 0 })
    }
    /// A duration of `s` seconds, rounded to the nearest microsecond; plus infinity gives
    /// [`Self::INFINITY`].
    pub fn from_secs_f64(s: f64) -> Self {
        if s.is_infinite() && s > 0.0 {
            return TimeDelta::INFINITY;
        }
        TimeDelta(round_i64(s * 1e6))
    }
    /// A duration of `ms` milliseconds, rounded to the nearest microsecond.
    pub fn from_ms_f64(ms: f64) -> Self {
        TimeDelta(round_i64(ms * 1e3))
    }
    /// The duration in microseconds.
    pub const fn as_us(self) -> i64 {
        self.0
    }
    /// The duration in whole milliseconds (truncated towards zero).
    pub const fn as_ms(self) -> i64 {
        self.0 / 1000
    }
    /// The duration in milliseconds, as a float.
    pub fn as_ms_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }
    /// The duration in seconds, as a float; [`Self::INFINITY`] gives `f64::INFINITY`.
    pub fn as_secs_f64(self) -> f64 {
        if self.0 == INF {
            return f64::INFINITY;
        }
        self.0 as f64 / 1e6
    }
    /// Whether this is not [`Self::INFINITY`].
    pub const fn is_finite(self) -> bool {
        self.0 != INF
    }
    /// The absolute value of the duration.
    pub fn abs(self) -> Self {
        TimeDelta(self.0.abs())
    }
    /// This duration clamped to `[lo, hi]` (panics if `lo > hi`, as `Ord::clamp`).
    pub fn clamp(self, lo: TimeDelta, hi: TimeDelta) -> Self {
        TimeDelta(self.0.clamp(lo.0, hi.0))
    }
}

/// An amount of data in bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct DataSize(i64);

impl DataSize {
    /// No data.
    pub const ZERO: DataSize = DataSize(0);

    /// A size of `b` bytes.
    pub const fn from_bytes(b: i64) -> Self {
        DataSize(b)
    }
    /// A size of `kb` kilobytes of 1000 bytes.
    pub const fn from_kilobytes(kb: i64) -> Self {
        DataSize(kb * 1000)
    }
    /// The size in bytes.
    pub const fn as_bytes(self) -> i64 {
        self.0
    }
    /// The size in bits (bytes x 8).
    pub const fn as_bits(self) -> i64 {
        self.0 * 8
    }
    /// The size in bytes, as a float.
    pub fn as_bytes_f64(self) -> f64 {
        self.0 as f64
    }
    /// The larger of the two sizes.
    pub fn max(self, other: DataSize) -> DataSize {
        DataSize(self.0.max(other.0))
    }
    /// The smaller of the two sizes.
    pub fn min(self, other: DataSize) -> DataSize {
        DataSize(self.0.min(other.0))
    }
}

/// A rate in bits per second.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct DataRate(i64);

impl DataRate {
    /// A zero rate.
    pub const ZERO: DataRate = DataRate(0);
    /// Plus infinity: an unbounded rate (no limit; what a size sent in no time makes).
    pub const INFINITY: DataRate = DataRate(INF);

    /// A rate of `bps` bits per second.
    pub const fn from_bps(bps: i64) -> Self {
        DataRate(bps)
    }
    /// A rate of `kbps` kilobits (1000 bits) per second.
    pub const fn from_kbps(kbps: i64) -> Self {
        DataRate(kbps * 1000)
    }
    /// A rate of `mbps` megabits (10^6 bits) per second.
    pub const fn from_mbps(mbps: i64) -> Self {
        DataRate(mbps * 1_000_000)
    }
    /// A rate of `bps` bits per second, rounded to the nearest bit per second; plus infinity
    /// gives [`Self::INFINITY`].
    pub fn from_bps_f64(bps: f64) -> Self {
        if bps.is_infinite() && bps > 0.0 {
            return DataRate::INFINITY;
        }
        DataRate(round_i64(bps))
    }
    /// The rate in bits per second ([`Self::INFINITY`] is `i64::MAX`).
    pub const fn as_bps(self) -> i64 {
        self.0
    }
    /// The rate in bits per second, as a float; [`Self::INFINITY`] gives `f64::INFINITY`.
    pub fn as_bps_f64(self) -> f64 {
        if self.0 == INF {
            return f64::INFINITY;
        }
        self.0 as f64
    }
    /// The rate in kilobits per second, as a float (infinite for [`Self::INFINITY`]).
    pub fn as_kbps_f64(self) -> f64 {
        self.as_bps_f64() / 1e3
    }
    /// The rate in megabits per second, as a float (infinite for [`Self::INFINITY`]).
    pub fn as_mbps_f64(self) -> f64 {
        self.as_bps_f64() / 1e6
    }
    /// Whether this is not [`Self::INFINITY`].
    pub const fn is_finite(self) -> bool {
        self.0 != INF
    }
    /// This rate clamped to `[lo, hi]` (panics if `lo > hi`, as `Ord::clamp`).
    pub fn clamp(self, lo: DataRate, hi: DataRate) -> Self {
        DataRate(self.0.clamp(lo.0, hi.0))
    }
    /// Scales by a dimensionless factor (rounded to the nearest bit per second).
    pub fn scale(self, factor: f64) -> Self {
        if self.0 == INF {
            return self;
        }
        DataRate(round_i64(self.0 as f64 * factor))
    }
}

impl DataSize {
    /// Scales by a dimensionless factor (rounded to the nearest byte).
    pub fn scale(self, factor: f64) -> Self {
        DataSize(round_i64(self.0 as f64 * factor))
    }
}

// ---- same-unit arithmetic ----

macro_rules! linear_ops {
    ($t:ident) => {
        impl Add for $t {
            type Output = $t;
            fn add(self, o: $t) -> $t {
                if self.0 == INF || o.0 == INF {
                    return $t(INF);
                }
                $t(self.0 + o.0)
            }
        }
        /// Infinity minus a finite quantity stays infinite, as in libwebrtc's units.
        impl Sub for $t {
            type Output = $t;
            fn sub(self, o: $t) -> $t {
                if self.0 == INF && o.0 != INF {
                    return $t(INF);
                }
                $t(self.0 - o.0)
            }
        }
        impl AddAssign for $t {
            fn add_assign(&mut self, o: $t) {
                *self = *self + o;
            }
        }
        impl SubAssign for $t {
            fn sub_assign(&mut self, o: $t) {
                *self = *self - o;
            }
        }
        impl Neg for $t {
            type Output = $t;
            fn neg(self) -> $t {
                $t(-self.0)
            }
        }
        /// Infinity times a positive factor stays infinite; a product past the range
        /// saturates (at infinity, above) rather than wrapping.
        impl Mul<i64> for $t {
            type Output = $t;
            fn mul(self, k: i64) -> $t {
                if self.0 == INF && k > 0 {
                    return $t(INF);
                }
                $t(self.0.saturating_mul(k))
            }
        }
        impl Div<i64> for $t {
            type Output = $t;
            fn div(self, k: i64) -> $t {
                $t(self.0 / k)
            }
        }
        /// Ratio of two quantities of the same unit.
        impl Div for $t {
            type Output = f64;
            fn div(self, o: $t) -> f64 {
                self.0 as f64 / o.0 as f64
            }
        }
        impl std::iter::Sum for $t {
            fn sum<I: Iterator<Item = $t>>(iter: I) -> $t {
                iter.fold($t(0), |a, b| a + b)
            }
        }
    };
}
linear_ops!(TimeDelta);
linear_ops!(DataSize);
linear_ops!(DataRate);

impl Mul<f64> for TimeDelta {
    type Output = TimeDelta;
    fn mul(self, k: f64) -> TimeDelta {
        TimeDelta(round_i64(self.0 as f64 * k))
    }
}

// ---- Timestamp arithmetic ----

impl Add<TimeDelta> for Timestamp {
    type Output = Timestamp;
    fn add(self, d: TimeDelta) -> Timestamp {
        if self.0 == INF || d.0 == INF {
            return Timestamp::INFINITY;
        }
        Timestamp(self.0 + d.0)
    }
}
impl AddAssign<TimeDelta> for Timestamp {
    fn add_assign(&mut self, d: TimeDelta) {
        *self = *self + d;
    }
}
/// [`Timestamp::INFINITY`] minus a finite duration stays infinite, as in libwebrtc's units.
impl Sub<TimeDelta> for Timestamp {
    type Output = Timestamp;
    fn sub(self, d: TimeDelta) -> Timestamp {
        if self.0 == INF && d.0 != INF {
            return Timestamp::INFINITY;
        }
        Timestamp(self.0 - d.0)
    }
}
impl Sub for Timestamp {
    type Output = TimeDelta;
    fn sub(self, o: Timestamp) -> TimeDelta {
        if self.0 == INF && o.0 != INF {
            return TimeDelta::INFINITY;
        }
        TimeDelta(self.0 - o.0)
    }
}

// ---- cross-unit operators ----

/// size / time = rate
impl Div<TimeDelta> for DataSize {
    type Output = DataRate;
    fn div(self, d: TimeDelta) -> DataRate {
        if d.0 <= 0 {
            return DataRate::INFINITY;
        }
        // i64 when the product fits (always, for sizes below ~1 TB), else i128: the same
        // result, without the 128-bit division that dominated simulator profiles.
        match self.0.checked_mul(8_000_000) {
            Some(num) => DataRate(num / d.0),
            None => DataRate(((self.0 as i128 * 8_000_000) / d.0 as i128) as i64),
        }
    }
}
/// rate * time = size
impl Mul<TimeDelta> for DataRate {
    type Output = DataSize;
    fn mul(self, d: TimeDelta) -> DataSize {
        match self.0.checked_mul(d.0) {
            Some(num) => DataSize(num / 8_000_000),
            None => DataSize(((self.0 as i128 * d.0 as i128) / 8_000_000) as i64),
        }
    }
}
impl Mul<DataRate> for TimeDelta {
    type Output = DataSize;
    fn mul(self, r: DataRate) -> DataSize {
        r * self
    }
}
/// size / rate = time, rounded up to the next microsecond: waiting that long is always
/// enough to send `size` at `rate` (`rate * (size / rate) >= size`), so schedulers built on it
/// never wake up a microsecond early and spin.
impl Div<DataRate> for DataSize {
    type Output = TimeDelta;
    fn div(self, r: DataRate) -> TimeDelta {
        if r.0 == INF {
            return TimeDelta::ZERO;
        }
        if r.0 <= 0 {
            return TimeDelta::INFINITY;
        }
        if let Some(num) = self.0.checked_mul(8_000_000) {
            let q = num.div_euclid(r.0) + if num.rem_euclid(r.0) != 0 { 1 } else { 0 };
            return TimeDelta(q);
        }
        let num = self.0 as i128 * 8_000_000;
        let den = r.0 as i128;
        let q = num.div_euclid(den) + if num.rem_euclid(den) != 0 { 1 } else { 0 };
        TimeDelta(q as i64)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == INF {
            return write!(f, "+inf");
        }
        write!(f, "{:.6}s", self.0 as f64 / 1e6)
    }
}
impl fmt::Debug for TimeDelta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == INF {
            return write!(f, "+inf");
        }
        write!(f, "{:.3}ms", self.0 as f64 / 1e3)
    }
}
impl fmt::Debug for DataSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}B", self.0)
    }
}
impl fmt::Debug for DataRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == INF {
            return write!(f, "+inf bps");
        }
        write!(f, "{:.3}Mbps", self.0 as f64 / 1e6)
    }
}
impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
impl fmt::Display for TimeDelta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
impl fmt::Display for DataSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
impl fmt::Display for DataRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn round_i64_is_round_as_i64() {
        let mut edge = vec![
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            -2.5,
            0.49999999999999994,
            -0.49999999999999994,
            4503599627370495.5,
            -4503599627370495.5,
            4503599627370497.0,
            9.3e18,
            -9.3e18,
            1e300,
            -1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
            123456.5,
        ];
        let mut rng = crate::rng::Rng::new(7);
        for _ in 0..100_000 {
            let scale = 10f64.powi((rng.uniform() * 16.0) as i32);
            edge.push((rng.uniform() - 0.5) * scale);
        }
        for x in edge {
            assert_eq!(round_i64(x), x.round() as i64, "{x:e}");
        }
    }
    use super::*;

    /// The i64 fast paths give what the 128-bit formulas give, on both sides of overflow.
    #[test]
    fn cross_unit_operators_match_128_bit_arithmetic() {
        let mut rng = crate::rng::Rng::new(3);
        for i in 0..20_000 {
            // Magnitudes from bytes to past the i64 fast path's limit.
            let mag = |rng: &mut crate::rng::Rng| -> i64 {
                let bits = (rng.uniform() * 62.0) as u32;
                ((rng.uniform() * (1u64 << bits) as f64) as i64).max(1)
            };
            let (size, rate, us) = (mag(&mut rng), mag(&mut rng), mag(&mut rng));
            let size = if i % 7 == 0 { -size } else { size };
            let s = DataSize::from_bytes(size);
            let r = DataRate::from_bps(rate);
            let d = TimeDelta::from_us(us);
            assert_eq!((s / d).0, ((size as i128 * 8_000_000) / us as i128) as i64);
            assert_eq!((r * d).0, ((rate as i128 * us as i128) / 8_000_000) as i64);
            let num = size as i128 * 8_000_000;
            let q = num.div_euclid(rate as i128) + i128::from(num.rem_euclid(rate as i128) != 0);
            assert_eq!((s / r).0, q as i64, "{size} B / {rate} bps");
        }
    }

    #[test]
    fn cross_unit_operators() {
        let size = DataSize::from_bytes(1500);
        let t = TimeDelta::from_ms(1);
        assert_eq!((size / t).as_bps(), 12_000_000);
        let rate = DataRate::from_mbps(12);
        assert_eq!((rate * t).as_bytes(), 1500);
        assert_eq!((size / rate).as_us(), 1000);
    }

    #[test]
    fn infinities_saturate() {
        assert_eq!(Timestamp::INFINITY + TimeDelta::from_ms(5), Timestamp::INFINITY);
        assert_eq!(DataSize::from_bytes(10) / DataRate::INFINITY, TimeDelta::ZERO);
        assert_eq!(DataSize::from_bytes(10) / DataRate::ZERO, TimeDelta::INFINITY);
        assert!(!(Timestamp::INFINITY - Timestamp::from_ms(3)).is_finite());
        // Infinity less a finite amount, or times a positive factor, stays infinite (it came
        // out finite, and `INFINITY * 2` wrapped to a negative value).
        assert_eq!(Timestamp::INFINITY - TimeDelta::from_ms(1), Timestamp::INFINITY);
        assert_eq!(TimeDelta::INFINITY - TimeDelta::from_ms(1), TimeDelta::INFINITY);
        assert_eq!(DataRate::INFINITY - DataRate::from_kbps(1), DataRate::INFINITY);
        let all = DataSize::from_bytes(i64::MAX);
        assert_eq!(all - DataSize::from_bytes(1), all);
        assert_eq!(TimeDelta::INFINITY * 2, TimeDelta::INFINITY);
        assert_eq!(TimeDelta::from_secs(i64::MAX / 1_000_000) * 4, TimeDelta::INFINITY);
        assert_eq!(TimeDelta::from_ms(3) * 2, TimeDelta::from_ms(6));
        assert_eq!(TimeDelta::from_ms(3) - TimeDelta::from_ms(5), TimeDelta::from_ms(-2));
    }

    #[test]
    fn time_to_send_rounds_up() {
        let rate = DataRate::from_bps(396_001);
        for bytes in [1, 10, 999, 1500] {
            let size = DataSize::from_bytes(bytes);
            let t = size / rate;
            assert!(rate * t >= size, "{bytes} B");
            assert!(rate * (t - TimeDelta::from_us(1)) < size, "{bytes} B");
        }
    }

    #[test]
    fn large_rates_do_not_overflow() {
        let rate = DataRate::from_mbps(200);
        let size = rate * TimeDelta::from_secs(3600);
        assert_eq!(size.as_bytes(), 90_000_000_000);
        assert_eq!((size / TimeDelta::from_secs(3600)).as_bps(), 200_000_000);
    }

    /// libwebrtc's RoundDownTo / RoundTo / RoundUpTo, as GCC's timestamp resolutions and the
    /// task queue's delays use them.
    #[test]
    fn rounding_to_a_resolution() {
        let ms = TimeDelta::from_ms(1);
        let tick = TimeDelta::from_us(250);
        assert_eq!(Timestamp::from_us(2999).round_down_to(ms), Timestamp::from_ms(2));
        assert_eq!(Timestamp::from_us(3000).round_down_to(ms), Timestamp::from_ms(3));
        assert_eq!(Timestamp::from_us(-1).round_down_to(ms), Timestamp::from_ms(-1));
        assert_eq!(Timestamp::from_us(1124).round_to(tick), Timestamp::from_us(1000));
        assert_eq!(Timestamp::from_us(1125).round_to(tick), Timestamp::from_us(1250));
        assert_eq!(Timestamp::from_us(1374).round_to(tick), Timestamp::from_us(1250));
        assert_eq!(TimeDelta::from_us(1).round_up_to(ms), ms);
        assert_eq!(TimeDelta::from_us(9200).round_up_to(ms), TimeDelta::from_ms(10));
        assert_eq!(TimeDelta::from_ms(4).round_up_to(ms), TimeDelta::from_ms(4));
        assert_eq!(TimeDelta::ZERO.round_up_to(ms), TimeDelta::ZERO);
        // No resolution, or no end: unchanged.
        assert_eq!(
            Timestamp::from_us(1234).round_down_to(TimeDelta::ZERO),
            Timestamp::from_us(1234)
        );
        assert_eq!(Timestamp::INFINITY.round_to(tick), Timestamp::INFINITY);
        assert_eq!(TimeDelta::INFINITY.round_up_to(ms), TimeDelta::INFINITY);
    }
}
