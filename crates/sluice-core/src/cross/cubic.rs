//! CUBIC congestion control (RFC 9438) for the bulk cross traffic: after a congestion event
//! the window follows the cubic `W_cubic(t) = C (t - K)^3 + W_max` (§4.2) toward and
//! beyond the window before the event, with the Reno-friendly region (§4.3), the concave
//! and convex regions (§4.4-4.5), multiplicative decrease by beta = 0.7 (§4.6) and fast
//! convergence (§4.7). Slow start is standard (§4.10 allows HyStart++; not modelled).
//! Windows are computed in segments of the maximum datagram, as the RFC does.

use super::{TcpCcState, TcpCongestion};
use crate::units::{DataSize, TimeDelta, Timestamp};

/// RFC 9438 §4 constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CubicConfig {
    /// `C` (§5: 0.4), in segments per second cubed.
    pub c: f64,
    /// `beta_cubic`, the multiplicative decrease factor (§4.6: 0.7).
    pub beta: f64,
    /// Fast convergence (§4.7: on).
    pub fast_convergence: bool,
}

impl Default for CubicConfig {
    fn default() -> Self {
        CubicConfig { c: 0.4, beta: 0.7, fast_convergence: true }
    }
}

/// CUBIC's state (RFC 9438 §4.1.2's variables).
#[derive(Clone, Debug)]
pub struct Cubic {
    config: CubicConfig,
    s: TcpCcState,
    /// `W_max`, segments: the window before the last reduction.
    w_max: f64,
    /// `W_last_max`, for fast convergence.
    w_last_max: f64,
    /// `K`, seconds.
    k: f64,
    /// `t_epoch`: when the current congestion avoidance stage began (`None`: not in one yet).
    epoch: Option<Timestamp>,
    /// `W_est`, segments: the Reno-friendly estimate (§4.3).
    w_est: f64,
    /// `cwnd` in segments, with its fraction (the byte window is its floor).
    cwnd_segments: f64,
}

impl Cubic {
    /// CUBIC with `config`, at RFC 9002's initial window for datagrams of `max_datagram` bytes.
    pub fn new(config: CubicConfig, max_datagram: DataSize) -> Cubic {
        let s = TcpCcState::new(max_datagram);
        let cwnd_segments = s.cwnd.as_bytes_f64() / max_datagram.as_bytes_f64();
        Cubic {
            config,
            s,
            w_max: 0.0,
            w_last_max: 0.0,
            k: 0.0,
            epoch: None,
            w_est: 0.0,
            cwnd_segments,
        }
    }

    fn mss(&self) -> f64 {
        self.s.max_datagram.as_bytes_f64()
    }

    /// §4.2 Eq. 1: `W_cubic(t)`, segments.
    fn w_cubic(&self, t: f64) -> f64 {
        self.config.c * (t - self.k).powi(3) + self.w_max
    }

    fn set_cwnd_segments(&mut self, w: f64) {
        let min = self.s.min_window().as_bytes_f64() / self.mss();
        self.cwnd_segments = w.max(min);
        self.s.cwnd = DataSize::from_bytes((self.cwnd_segments * self.mss()) as i64);
    }
}

impl TcpCongestion for Cubic {
    fn on_ack(&mut self, sent: Timestamp, bytes: DataSize, now: Timestamp, srtt: TimeDelta) {
        if self.s.in_recovery(sent) {
            return;
        }
        let acked = bytes.as_bytes_f64() / self.mss();
        if self.s.cwnd < self.s.ssthresh {
            // Slow start.
            self.set_cwnd_segments(self.cwnd_segments + acked);
            return;
        }
        let cwnd = self.cwnd_segments;
        // A congestion avoidance stage without a preceding reduction (slow start ended at
        // ssthresh) starts now, with W_max = cwnd and K = 0.
        let epoch = *self.epoch.get_or_insert(now);
        if self.w_max <= 0.0 {
            self.w_max = cwnd;
            self.k = 0.0;
            self.w_est = cwnd;
        }
        let t = (now - epoch).as_secs_f64();
        // §4.3: the Reno-friendly estimate grows by alpha_cubic per window acknowledged.
        let beta = self.config.beta;
        let alpha = 3.0 * (1.0 - beta) / (1.0 + beta);
        self.w_est += alpha * acked / cwnd;
        let w_cubic_now = self.w_cubic(t);
        if w_cubic_now < self.w_est {
            // §4.3: Reno-friendly region.
            self.set_cwnd_segments(self.w_est.max(cwnd));
            return;
        }
        // §4.4-4.5: concave or convex region; the target one RTT ahead, within
        // [cwnd, 1.5 cwnd] (§4.2).
        let target = self.w_cubic(t + srtt.as_secs_f64()).clamp(cwnd, 1.5 * cwnd);
        self.set_cwnd_segments(cwnd + (target - cwnd) / cwnd * acked);
    }

    fn on_congestion_event(&mut self, sent: Timestamp, now: Timestamp) {
        if self.s.in_recovery(sent) {
            return;
        }
        self.s.recovery_start = Some(now);
        let cwnd = self.cwnd_segments;
        let beta = self.config.beta;
        // §4.7: fast convergence releases bandwidth to newer flows.
        self.w_max = if self.config.fast_convergence && cwnd < self.w_last_max {
            cwnd * (1.0 + beta) / 2.0
        } else {
            cwnd
        };
        self.w_last_max = cwnd;
        // §4.6: multiplicative decrease.
        let reduced = (cwnd * beta).max(self.s.min_window().as_bytes_f64() / self.mss());
        self.s.ssthresh = DataSize::from_bytes((reduced * self.mss()) as i64);
        self.set_cwnd_segments(reduced);
        // §4.2 Eq. 2: K, with cwnd_epoch the reduced window.
        self.k = ((self.w_max - reduced) / self.config.c).max(0.0).cbrt();
        self.epoch = Some(now);
        self.w_est = reduced;
    }

    fn window(&self) -> DataSize {
        self.s.cwnd
    }
    fn ssthresh(&self) -> DataSize {
        self.s.ssthresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MD: DataSize = DataSize::from_bytes(1500);

    /// Acknowledges one window every `rtt` from `from` for `seconds`; returns the window in
    /// segments at each round.
    fn rounds(c: &mut Cubic, from: Timestamp, rtt: TimeDelta, seconds: f64) -> Vec<(f64, f64)> {
        let mut out = Vec::new();
        let mut now = from;
        while (now - from).as_secs_f64() < seconds {
            let w = c.window();
            let segments = (w.as_bytes() / MD.as_bytes()).max(1);
            for _ in 0..segments {
                c.on_ack(now, MD, now + rtt, rtt);
            }
            now += rtt;
            out.push(((now - from).as_secs_f64(), c.window().as_bytes_f64() / 1500.0));
        }
        out
    }

    #[test]
    fn after_a_loss_the_window_climbs_back_to_w_max_in_k_seconds_then_beyond() {
        let mut c = Cubic::new(CubicConfig::default(), MD);
        // Slow start to about 100 segments, then a loss.
        let t0 = Timestamp::ZERO;
        while c.window() < MD * 100 {
            c.on_ack(t0, MD, t0, TimeDelta::from_ms(100));
        }
        let w_max = c.window().as_bytes_f64() / 1500.0;
        let lost_at = Timestamp::from_secs_f64(1.0);
        c.on_congestion_event(lost_at, lost_at);
        let after = c.window().as_bytes_f64() / 1500.0;
        assert!((after - 0.7 * w_max).abs() < 0.01, "beta: {after} of {w_max}");
        // RFC 9438 §4.2: K = cbrt(W_max (1 - beta) / C).
        let k = (w_max * 0.3 / 0.4).cbrt();
        assert!((c.k - k).abs() < 1e-9);
        // A 100 ms RTT keeps the Reno-friendly estimate (+0.53 segment per RTT) below the
        // cubic curve.
        let series = rounds(&mut c, lost_at, TimeDelta::from_ms(100), k + 3.0);
        let at = |t: f64| series.iter().find(|(s, _)| *s >= t).unwrap().1;
        // Concave: fast at first, flat near W_max around K, convex beyond.
        assert!(at(k / 2.0) > after + 0.6 * (w_max - after), "{}", at(k / 2.0));
        assert!((at(k) / w_max - 1.0).abs() < 0.03, "at K: {} vs {w_max}", at(k));
        assert!(at(k + 3.0) > w_max + 0.4 * 27.0 * 0.8, "convex: {}", at(k + 3.0));
    }

    #[test]
    fn with_a_short_rtt_the_reno_friendly_region_rules() {
        // At 10 ms, Reno's alpha_cubic (0.53 segment per RTT) gains 53 segments a second,
        // faster than the cubic curve near its plateau: the window follows W_est (§4.3).
        let mut c = Cubic::new(CubicConfig::default(), MD);
        let t0 = Timestamp::ZERO;
        while c.window() < MD * 100 {
            c.on_ack(t0, MD, t0, TimeDelta::from_ms(10));
        }
        let lost_at = Timestamp::from_secs_f64(1.0);
        c.on_congestion_event(lost_at, lost_at);
        let start = c.cwnd_segments;
        let series = rounds(&mut c, lost_at, TimeDelta::from_ms(10), 2.0);
        let (_, w) = series.last().unwrap();
        let alpha = 3.0 * 0.3 / 1.7;
        let reno = start + alpha * series.len() as f64;
        assert!((w - reno).abs() / reno < 0.05, "{w} vs Reno-friendly {reno}");
        assert!(*w > c.w_cubic(2.0) + 10.0);
    }

    #[test]
    fn fast_convergence_lowers_w_max_when_the_window_shrinks_between_losses() {
        let mut c = Cubic::new(CubicConfig::default(), MD);
        let t = Timestamp::from_ms;
        while c.window() < MD * 100 {
            c.on_ack(t(0), MD, t(0), TimeDelta::from_ms(100));
        }
        c.on_congestion_event(t(10), t(10));
        let w1 = c.cwnd_segments;
        // A second loss before the window regrew: W_max = cwnd (1 + beta) / 2.
        c.on_congestion_event(t(20), t(20));
        assert!((c.w_max - w1 * 0.85).abs() < 1e-9, "{} vs {}", c.w_max, w1);
    }
}
