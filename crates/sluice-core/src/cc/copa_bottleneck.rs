//! Co-RTV's two changes to Copa (Co-RTV §III-C, "Congestion control"), driven by the
//! bottleneck node's reports; the `co-rtv` scheme's controller, built by
//! [`super::copa::CopaConfig::build`] when `cc.bottleneck_feedback` is set.
//!
//! (a) "when the sender observes an increase in RTT within a threshold while the BN's queue
//! length remains nearly unchanged, it maintains the current bandwidth instead of reducing
//! it": while the last two bottleneck reports' queue lengths differ by at most
//! `hold_queue_change` of the older one (or `hold_queue_slack_bytes`), Copa's window does not
//! step down when its queuing delay `d_q` is at most `hold_rtt_rise_ms` (brief A10; the paper
//! gives no threshold). (b) "after receiving the feedback of frame dropping, the bandwidth
//! will be updated to that fed back by the BN": on a report with a new drop `D` and a rate
//! `Bw`, `W = Bw x srtt` (so Copa's target `W / srtt` is `Bw`), slow start ends and the
//! velocity restarts at 1.

use super::copa::{Copa, CopaBottleneckFeedback};
use super::{
    CcSignals, CongestionController, NetworkControlUpdate, ProbeClusterConfig, SentPacket,
    TransportPacketsFeedback,
};
use crate::columns::Columns;
use crate::finite_or;
use crate::packet::BottleneckReport;
use crate::units::{DataSize, TimeDelta, Timestamp};

/// A congestion controller that is Copa underneath (plain, or with MAE's signal), so a
/// paper's change can reach Copa's hooks through it.
pub trait CopaVariant: CongestionController {
    /// The Copa underneath.
    fn copa(&self) -> &Copa;
    /// The Copa underneath, for a change to reach its hooks.
    fn copa_mut(&mut self) -> &mut Copa;
}

impl CopaVariant for Copa {
    fn copa(&self) -> &Copa {
        self
    }
    fn copa_mut(&mut self) -> &mut Copa {
        self
    }
}

/// Copa (or a variant of it) with Co-RTV's changes.
#[derive(Clone, Debug)]
pub struct CopaBottleneck<C> {
    inner: C,
    config: CopaBottleneckFeedback,
    /// The queue length of the latest bottleneck report.
    queue: Option<DataSize>,
    /// Whether the last two reports showed a nearly unchanged queue.
    queue_steady: bool,
    /// The latest drop acted on.
    drop: Option<u64>,
}

impl<C: CopaVariant> CopaBottleneck<C> {
    /// Co-RTV's changes, set by `config`, around `inner`.
    pub fn new(inner: C, config: CopaBottleneckFeedback) -> Self {
        CopaBottleneck { inner, config, queue: None, queue_steady: false, drop: None }
    }
}

impl<C: CopaVariant> CongestionController for CopaBottleneck<C> {
    fn on_packet_sent(&mut self, packet: &SentPacket, now: Timestamp) {
        self.inner.on_packet_sent(packet, now);
    }
    fn on_transport_feedback(&mut self, feedback: &TransportPacketsFeedback, now: Timestamp) {
        self.inner.on_transport_feedback(feedback, now);
    }
    fn handle_timeout(&mut self, now: Timestamp) {
        self.inner.handle_timeout(now);
    }
    fn poll_timeout(&self) -> Timestamp {
        self.inner.poll_timeout()
    }

    fn on_bottleneck_report(&mut self, report: &BottleneckReport, _now: Timestamp) {
        let cfg = &self.config;
        let q = report.queue.max(DataSize::ZERO);
        if let Some(prev) = self.queue {
            let change = (q - prev).as_bytes().abs() as f64;
            let allowed = (finite_or(cfg.hold_queue_change, 0.0) * prev.as_bytes() as f64)
                .max(cfg.hold_queue_slack_bytes as f64);
            self.queue_steady = change <= allowed;
        }
        self.queue = Some(q);
        let hold = TimeDelta::from_ms_f64(finite_or(cfg.hold_rtt_rise_ms, 0.0));
        let copa = self.inner.copa_mut();
        copa.set_decrease_hold(self.queue_steady.then_some(hold));
        if let (true, Some(d), Some(bw)) = (cfg.rate_on_drop, report.drop_from, report.rate) {
            if self.drop.is_none_or(|last| d > last) {
                self.drop = Some(d);
                copa.restart_window(bw.as_bps_f64() / 8.0 * copa.rate_rtt().as_secs_f64());
            }
        }
    }

    fn update(&self) -> NetworkControlUpdate {
        self.inner.update()
    }
    fn poll_probe_cluster(&mut self, now: Timestamp) -> Option<ProbeClusterConfig> {
        self.inner.poll_probe_cluster(now)
    }
    fn signals(&self) -> CcSignals {
        self.inner.signals()
    }

    fn debug_columns(&self, out: &mut Columns) {
        self.inner.debug_columns(out);
        out.bool("cc_bn_queue_steady", self.queue_steady);
        out.int("cc_bn_holds", Some(self.inner.copa().held_decreases() as i64));
    }
}

impl<C: CopaVariant> CopaVariant for CopaBottleneck<C> {
    fn copa(&self) -> &Copa {
        self.inner.copa()
    }
    fn copa_mut(&mut self) -> &mut Copa {
        self.inner.copa_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::copa::tests::{report, result, set_velocity, steady_copa, MSS};
    use crate::cc::copa::CopaConfig;
    use crate::units::DataRate;

    fn bn_report(queue: i64, drop_from: Option<u64>, rate_mbps: i64) -> BottleneckReport {
        BottleneckReport {
            flow: 0,
            seq: 0,
            time: Timestamp::ZERO,
            queue: DataSize::from_bytes(queue),
            rate: drop_from.map(|_| DataRate::from_mbps(rate_mbps)),
            drop_from,
        }
    }

    fn ack(cc: &mut dyn CongestionController, seq: u64, at_ms: f64, rtt_ms: f64) {
        let p = result(seq, MSS, Some((at_ms * 1000.0) as i64), (rtt_ms * 1000.0) as i64);
        cc.on_transport_feedback(&report(vec![p]), Timestamp::ZERO);
    }

    fn w_bytes(cc: &dyn CongestionController) -> i64 {
        cc.update().congestion_window.unwrap().as_bytes()
    }

    #[test]
    fn co_rtv_changes_hold_on_a_steady_queue_and_take_the_bottleneck_rate_on_a_drop() {
        let cortv = CopaBottleneckFeedback::default();
        let config =
            CopaConfig { bottleneck_feedback: Some(cortv.clone()), ..CopaConfig::default() };
        // W = 30 packets, min RTT 50 ms, then RTT 55 ms: d_q = 5 ms, W* = 55 / (0.5 x 5) = 22
        // packets < W, so plain Copa steps down.
        let setup = |variant: bool, queues: &[i64]| -> (i64, Box<dyn CongestionController>) {
            let copa = steady_copa(config.clone(), 30.0);
            let mut cc: Box<dyn CongestionController> = if variant {
                Box::new(CopaBottleneck::new(copa, cortv.clone()))
            } else {
                Box::new(copa)
            };
            ack(cc.as_mut(), 0, 0.0, 50.0);
            for &q in queues {
                cc.on_bottleneck_report(&bn_report(q, None, 0), Timestamp::ZERO);
            }
            let w0 = w_bytes(cc.as_ref());
            ack(cc.as_mut(), 1, 1000.0, 55.0);
            (w0, cc)
        };
        let (w0, plain) = setup(false, &[20_000, 20_500]);
        assert!(w_bytes(plain.as_ref()) < w0, "plain Copa ignores the reports");
        // (a) two reports 2.5 % apart (within 10 %): held.
        let (w0, held) = setup(true, &[20_000, 20_500]);
        assert_eq!(w_bytes(held.as_ref()), w0);
        let mut cols = Columns::default();
        held.debug_columns(&mut cols);
        assert_eq!(cols.get("cc_bn_holds"), Some(&crate::columns::Value::Int(1)));
        assert_eq!(cols.get("cc_bn_queue_steady"), Some(&crate::columns::Value::Bool(true)));
        // ... a queue that grew 50 %: steps down.
        let (w0, moved) = setup(true, &[20_000, 30_000]);
        assert!(w_bytes(moved.as_ref()) < w0);
        // ... an empty queue twice (within the two-packet slack): held.
        let (w0, empty) = setup(true, &[0, 0]);
        assert_eq!(w_bytes(empty.as_ref()), w0);
        // ... one report only: nothing to compare, steps down.
        let (w0, one) = setup(true, &[20_000]);
        assert!(w_bytes(one.as_ref()) < w0);
        // ... a steady queue, then one that moved: the hold ends.
        let (w0, ended) = setup(true, &[20_000, 20_000, 40_000]);
        assert!(w_bytes(ended.as_ref()) < w0);
        // ... an RTT rise above 10 ms (d_q = 15 ms) with a steady queue: steps down.
        let mut cc = CopaBottleneck::new(steady_copa(config.clone(), 30.0), cortv.clone());
        ack(&mut cc, 0, 0.0, 50.0);
        cc.on_bottleneck_report(&bn_report(20_000, None, 0), Timestamp::ZERO);
        cc.on_bottleneck_report(&bn_report(20_000, None, 0), Timestamp::ZERO);
        let w0 = w_bytes(&cc);
        ack(&mut cc, 1, 1000.0, 65.0);
        assert!(w_bytes(&cc) < w0);

        // (b) a drop report sets W = Bw x srtt (target rate Bw), once per D.
        let mut cc = CopaBottleneck::new(steady_copa(config.clone(), 30.0), cortv.clone());
        ack(&mut cc, 0, 0.0, 50.0);
        ack(&mut cc, 1, 10.0, 50.0);
        set_velocity(cc.copa_mut(), 4.0);
        let srtt = cc.copa().smoothed_rtt().unwrap();
        cc.on_bottleneck_report(&bn_report(5_000, Some(40), 2), Timestamp::ZERO);
        let expect = 2e6 / 8.0 * srtt.as_secs_f64();
        assert_eq!(w_bytes(&cc), expect.round() as i64);
        assert_eq!(cc.copa().velocity(), 1.0);
        assert!(!cc.copa().in_slow_start());
        cc.copa_mut().restart_window(30.0 * MSS as f64);
        cc.on_bottleneck_report(&bn_report(5_000, Some(40), 1), Timestamp::ZERO);
        assert_eq!(w_bytes(&cc), 30 * MSS, "the same D again changes nothing");
        cc.on_bottleneck_report(&bn_report(5_000, Some(41), 1), Timestamp::ZERO);
        assert_eq!(w_bytes(&cc), (expect / 2.0).round() as i64, "a later D: the new Bw");
        // Without rate_on_drop a drop report leaves the window.
        let no_rate = CopaBottleneckFeedback { rate_on_drop: false, ..cortv };
        let mut cc = CopaBottleneck::new(steady_copa(config, 30.0), no_rate);
        cc.on_bottleneck_report(&bn_report(5_000, Some(40), 2), Timestamp::ZERO);
        assert_eq!(w_bytes(&cc), 30 * MSS);
    }
}
