//! NewReno congestion control as QUIC specifies it (RFC 9002 §7, after RFC 5681's slow
//! start and congestion avoidance and RFC 6582's one reduction per loss episode): slow start
//! adds the bytes acknowledged, congestion avoidance one maximum datagram per window, a loss
//! (of a packet sent after the current recovery period began) halves the window.

use super::{TcpCcState, TcpCongestion};
use crate::units::{DataSize, TimeDelta, Timestamp};

/// RFC 9002 §7.2 and Appendix B.1's constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NewRenoConfig {
    /// `kLossReductionFactor`: 0.5.
    pub loss_reduction_factor: f64,
}

impl Default for NewRenoConfig {
    fn default() -> Self {
        NewRenoConfig { loss_reduction_factor: 0.5 }
    }
}

/// NewReno's state (RFC 9002 Appendix B.2).
#[derive(Clone, Debug)]
pub struct NewReno {
    config: NewRenoConfig,
    s: TcpCcState,
    /// Bytes acknowledged in congestion avoidance not yet turned into window (so each
    /// acknowledged byte counts, however small the increment).
    bytes_acked: i64,
}

impl NewReno {
    /// NewReno with `config`, at RFC 9002's initial window for datagrams of `max_datagram`
    /// bytes.
    pub fn new(config: NewRenoConfig, max_datagram: DataSize) -> NewReno {
        NewReno { config, s: TcpCcState::new(max_datagram), bytes_acked: 0 }
    }
}

impl TcpCongestion for NewReno {
    fn on_ack(&mut self, sent: Timestamp, bytes: DataSize, _now: Timestamp, _srtt: TimeDelta) {
        if self.s.in_recovery(sent) {
            return;
        }
        if self.s.cwnd < self.s.ssthresh {
            self.s.cwnd += bytes;
        } else {
            // One maximum datagram per congestion window of bytes acknowledged.
            self.bytes_acked += bytes.as_bytes();
            let cwnd = self.s.cwnd.as_bytes().max(1);
            if self.bytes_acked >= cwnd {
                self.bytes_acked -= cwnd;
                self.s.cwnd += self.s.max_datagram;
            }
        }
    }

    fn on_congestion_event(&mut self, sent: Timestamp, now: Timestamp) {
        if self.s.in_recovery(sent) {
            return;
        }
        self.s.recovery_start = Some(now);
        let reduced = self.s.cwnd.as_bytes_f64() * self.config.loss_reduction_factor;
        self.s.ssthresh = DataSize::from_bytes(reduced as i64);
        self.s.cwnd = self.s.ssthresh.max(self.s.min_window());
        self.bytes_acked = 0;
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

    #[test]
    fn slow_start_then_halving_once_per_recovery_then_one_datagram_per_window() {
        let mut r = NewReno::new(NewRenoConfig::default(), MD);
        let t = Timestamp::from_ms;
        let srtt = TimeDelta::from_ms(100);
        assert_eq!(r.window(), DataSize::from_bytes(14_720));
        // Slow start: every acknowledged byte adds a byte.
        for _ in 0..10 {
            r.on_ack(t(0), MD, t(100), srtt);
        }
        assert_eq!(r.window(), DataSize::from_bytes(14_720 + 15_000));
        // A loss halves it, once for every packet sent before the recovery began.
        r.on_congestion_event(t(90), t(200));
        assert_eq!(r.window(), DataSize::from_bytes(14_860));
        r.on_congestion_event(t(150), t(210));
        assert_eq!(r.window(), DataSize::from_bytes(14_860));
        r.on_ack(t(190), MD, t(220), srtt);
        assert_eq!(r.window(), DataSize::from_bytes(14_860), "acks in recovery do not grow it");
        // Congestion avoidance: a window's worth of acknowledged bytes adds one datagram.
        let w = r.window();
        for _ in 0..10 {
            r.on_ack(t(300), MD, t(400), srtt);
        }
        assert_eq!(r.window(), w + MD);
        // A loss of a packet sent after the recovery started is a new episode.
        r.on_congestion_event(t(300), t(500));
        assert_eq!(r.window(), DataSize::from_bytes((w + MD).as_bytes() / 2));
        // Never below two datagrams.
        for k in 0..20 {
            r.on_congestion_event(t(600 + k), t(601 + k));
        }
        assert_eq!(r.window(), MD * 2);
    }
}
