//! FDCC, "feedback-driven congestion control" (Co-RTV §II-C, §V-A, Eq. 9): the oracle
//! baseline of the Co-RTV paper. The bottleneck feeds the sender the trace's actual future
//! bandwidth `Bw` and its queue length `QLen` (`link/oracle.rs`, the only reader of the
//! trace's future), and the sender sets
//!
//! `Rate = Bw - QLen / tau` (Eq. 9), `tau` = 50 ms ("the same role as in Co-RTV", §V-B).
//!
//! The rate is the target and the encoder's rate; packets are paced at `pacing_gain` times
//! it (2, as Copa paces and as Co-RTV's sender does, so a frame leaves within half a frame
//! interval and the queue it makes shows in the next `QLen`). Choices the paper leaves open:
//! the rate before the first report (`initial_rate_kbps`, 1 Mbps) and a floor of
//! `min_rate_fraction` (5 %) of `Bw` when the queue term exceeds it (brief A9, as Co-RTV's
//! `R`). No window, no probing, no reaction to transport feedback: the oracle is all it uses.

use super::{CcSignals, CongestionController, NetworkControlUpdate, ProbeClusterConfig};
use super::{SentPacket, TransportPacketsFeedback};
use crate::columns::Columns;
use crate::packet::BottleneckReport;
use crate::units::{DataRate, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};

/// FDCC's settings (Co-RTV Eq. 9; see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FdccConfig {
    /// The queue empty time `tau` of Eq. 9 (§V-B: 50 ms, as Co-RTV's; Fig. 13 sweeps it).
    pub tau_ms: f64,
    /// Pacing rate over the rate (2: as Copa and Co-RTV's sender).
    pub pacing_gain: f64,
    /// The rate before the first report.
    pub initial_rate_kbps: f64,
    /// The rate never falls below this share of `Bw`.
    pub min_rate_fraction: f64,
}

impl Default for FdccConfig {
    fn default() -> Self {
        FdccConfig {
            tau_ms: 50.0,
            pacing_gain: 2.0,
            initial_rate_kbps: 1000.0,
            min_rate_fraction: 0.05,
        }
    }
}

impl FdccConfig {
    /// A configuration mistake, if any (the config paths under `cc`).
    pub fn validate(&self) -> Result<(), String> {
        use crate::check_range;
        check_range("cc.tau_ms", self.tau_ms, 0.0, true, 60_000.0)?;
        check_range("cc.pacing_gain", self.pacing_gain, 0.0, true, 100.0)?;
        check_range("cc.initial_rate_kbps", self.initial_rate_kbps, 0.0, true, 1e7)?;
        check_range("cc.min_rate_fraction", self.min_rate_fraction, 0.0, false, 1.0)
    }

    /// The controller, at `initial_rate_kbps` until the first report.
    pub fn build(&self) -> Fdcc {
        Fdcc {
            tau: TimeDelta::from_ms_f64(self.tau_ms.max(0.001)),
            rate: DataRate::from_bps_f64(self.initial_rate_kbps.max(1.0) * 1e3),
            bw: None,
            config: self.clone(),
        }
    }
}

/// Eq. 9 applied to every oracle report (see the module documentation).
#[derive(Clone, Debug)]
pub struct Fdcc {
    config: FdccConfig,
    tau: TimeDelta,
    rate: DataRate,
    bw: Option<DataRate>,
}

/// Eq. 9: `Bw - QLen / tau`, at least `floor x Bw`.
pub fn fdcc_rate(
    bw: DataRate,
    queue: crate::units::DataSize,
    tau: TimeDelta,
    floor: f64,
) -> DataRate {
    let drain = queue / tau;
    let rate = if drain.is_finite() { bw - drain } else { DataRate::ZERO };
    rate.max(bw.scale(floor.clamp(0.0, 1.0)))
}

impl CongestionController for Fdcc {
    fn on_packet_sent(&mut self, _: &SentPacket, _: Timestamp) {}
    fn on_transport_feedback(&mut self, _: &TransportPacketsFeedback, _: Timestamp) {}
    fn handle_timeout(&mut self, _: Timestamp) {}
    fn poll_timeout(&self) -> Timestamp {
        Timestamp::INFINITY
    }

    fn on_bottleneck_report(&mut self, report: &BottleneckReport, _now: Timestamp) {
        if let Some(bw) = report.rate.filter(|r| r.is_finite()) {
            self.bw = Some(bw);
            self.rate = fdcc_rate(bw, report.queue, self.tau, self.config.min_rate_fraction);
        }
    }

    fn update(&self) -> NetworkControlUpdate {
        let gain = if self.config.pacing_gain.is_finite() { self.config.pacing_gain } else { 1.0 };
        NetworkControlUpdate {
            target_rate: self.rate,
            encoder_rate: self.rate,
            cwnd_reduce_ratio: 0.0,
            pacing_rate: self.rate.scale(gain.max(0.01)),
            padding_rate: DataRate::ZERO,
            congestion_window: None,
        }
    }

    fn poll_probe_cluster(&mut self, _: Timestamp) -> Option<ProbeClusterConfig> {
        None
    }

    fn signals(&self) -> CcSignals {
        CcSignals::default()
    }

    fn debug_columns(&self, out: &mut Columns) {
        out.rate("cc_oracle_bw_bps", self.bw);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::DataSize;

    fn report(bw_mbps: i64, queue_kb: i64) -> BottleneckReport {
        BottleneckReport {
            flow: 0,
            seq: 0,
            time: Timestamp::ZERO,
            queue: DataSize::from_kilobytes(queue_kb),
            rate: Some(DataRate::from_mbps(bw_mbps)),
            drop_from: None,
        }
    }

    #[test]
    fn rate_is_bw_less_the_queue_over_tau() {
        let mut f = FdccConfig::default().build();
        assert_eq!(f.update().target_rate, DataRate::from_kbps(1000));
        // 10 Mbps and 25 kB queued: 10 - 25e3 x 8 / 0.05 = 6 Mbps; paced at 12.
        f.on_bottleneck_report(&report(10, 25), Timestamp::ZERO);
        assert_eq!(f.update().target_rate, DataRate::from_mbps(6));
        assert_eq!(f.update().encoder_rate, DataRate::from_mbps(6));
        assert_eq!(f.update().pacing_rate, DataRate::from_mbps(12));
        assert_eq!(f.update().congestion_window, None);
        // A queue worth more than tau x Bw: the floor, 5 % of Bw.
        f.on_bottleneck_report(&report(2, 100), Timestamp::ZERO);
        assert_eq!(f.update().target_rate, DataRate::from_kbps(100));
        // A report without a rate changes nothing.
        let mut r = report(50, 0);
        r.rate = None;
        f.on_bottleneck_report(&r, Timestamp::ZERO);
        assert_eq!(f.update().target_rate, DataRate::from_kbps(100));
        // tau = 100 ms halves the queue's share.
        let mut g = FdccConfig { tau_ms: 100.0, ..Default::default() }.build();
        g.on_bottleneck_report(&report(10, 25), Timestamp::ZERO);
        assert_eq!(g.update().target_rate, DataRate::from_mbps(8));
    }
}
