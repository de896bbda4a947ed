//! MAE's pre-reaction signal on Copa (MAE, NSDI '26, §5.2 and Table 1: "MAE on Copa"):
//! Copa, unchanged, with the signal MAE's encoder controller reads
//! ([`CcSignals::pre_reaction_at`], [`CcSignals::underuse_at`]).
//!
//! After every ACK: the level is `d_q / threshold` (`d_q` Copa's queuing delay, the threshold
//! `cc.pre_reaction_queuing_delay_ms`, which MAE leaves open); above 1 a drop is coming, at
//! the feedback's time; an ACK that moved Copa's window up (`W < W*`, the queuing delay below
//! Copa's switch point `1 / (delta x rate)`) ends it (`underuse_at`). The encoder side of MAE
//! (the VBV that tightens and recovers) is the encoder controller's; Copa's own rules never
//! read the signal.

use super::copa::Copa;
use super::copa_bottleneck::CopaVariant;
use super::{
    CcSignals, CongestionController, NetworkControlUpdate, ProbeClusterConfig, SentPacket,
    TransportPacketsFeedback,
};
use crate::columns::Columns;
use crate::units::Timestamp;

/// Copa with MAE's pre-reaction signal; built by [`super::copa::CopaConfig::build`] when
/// `pre_reaction_queuing_delay_ms` is set.
#[derive(Clone, Debug)]
pub struct CopaPreReaction {
    copa: Copa,
    threshold_ms: f64,
    /// Latest feedback at which `d_q` was above the threshold.
    pre_reaction_at: Option<Timestamp>,
    /// `d_q / threshold` after the latest ACK.
    pre_reaction_level: Option<f64>,
    /// Latest feedback with an ACK that moved the window up.
    underuse_at: Option<Timestamp>,
}

impl CopaPreReaction {
    /// `copa` signalling a drop above `threshold_ms` of queuing delay (> 0).
    pub fn new(copa: Copa, threshold_ms: f64) -> Self {
        CopaPreReaction {
            copa,
            threshold_ms,
            pre_reaction_at: None,
            pre_reaction_level: None,
            underuse_at: None,
        }
    }
}

impl CopaVariant for CopaPreReaction {
    fn copa(&self) -> &Copa {
        &self.copa
    }
    fn copa_mut(&mut self) -> &mut Copa {
        &mut self.copa
    }
}

impl CongestionController for CopaPreReaction {
    fn on_packet_sent(&mut self, packet: &SentPacket, now: Timestamp) {
        self.copa.on_packet_sent(packet, now);
    }

    fn on_transport_feedback(&mut self, feedback: &TransportPacketsFeedback, _now: Timestamp) {
        let at = feedback.feedback_time;
        let threshold_ms = self.threshold_ms;
        let (mut level, mut above, mut up) = (self.pre_reaction_level, false, false);
        self.copa.on_feedback_per_ack(feedback, |copa| {
            let Some(d_q) = copa.queuing_delay() else { return };
            let l = d_q.as_ms_f64() / threshold_ms;
            level = Some(l);
            above |= l > 1.0;
            up |= copa.last_ack_stepped_up();
        });
        self.pre_reaction_level = level;
        if above {
            self.pre_reaction_at = Some(at);
        }
        if up {
            self.underuse_at = Some(at);
        }
    }

    fn handle_timeout(&mut self, now: Timestamp) {
        self.copa.handle_timeout(now);
    }
    fn poll_timeout(&self) -> Timestamp {
        self.copa.poll_timeout()
    }
    fn update(&self) -> NetworkControlUpdate {
        self.copa.update()
    }
    fn poll_probe_cluster(&mut self, now: Timestamp) -> Option<ProbeClusterConfig> {
        self.copa.poll_probe_cluster(now)
    }

    fn signals(&self) -> CcSignals {
        CcSignals {
            pre_reaction_at: self.pre_reaction_at,
            pre_reaction_level: self.pre_reaction_level,
            underuse_at: self.underuse_at,
            ..self.copa.signals()
        }
    }

    fn debug_columns(&self, out: &mut Columns) {
        self.copa.debug_columns(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::copa::tests::{report, result, steady_copa, MSS};
    use crate::cc::copa::CopaConfig;

    /// Latched when d_q passes the threshold, ended (underuse) by the next ACK that moves the
    /// window up; off without a threshold.
    #[test]
    fn mae_pre_reaction_latches_at_the_queuing_delay_threshold() {
        let mut seq = 0;
        let mut ack = |cc: &mut dyn CongestionController, at_ms: f64, rtt_ms: f64| {
            let p = result(seq, MSS, Some((at_ms * 1000.0) as i64), (rtt_ms * 1000.0) as i64);
            seq += 1;
            let mut fb = report(vec![p]);
            fb.feedback_time = Timestamp::from_us((at_ms * 1000.0) as i64 + 10_000);
            cc.on_transport_feedback(&fb, fb.feedback_time);
        };
        let config = CopaConfig { pre_reaction_queuing_delay_ms: Some(33.0), ..Default::default() };
        let mut cc = CopaPreReaction::new(steady_copa(config, 10.0), 33.0);
        // RTTmin 50 ms with no queue: W* is infinite, the window moves up (underuse at the
        // feedback, 10 ms).
        ack(&mut cc, 0.0, 50.0);
        assert_eq!(cc.signals().underuse_at, Some(Timestamp::from_ms(10)));
        // d_q 20 ms (standing 70 over srtt/2): below the threshold, level 20/33; the window
        // (10) is above W* = 70 / (0.5 x 20) = 7, it moves down: no new underuse.
        ack(&mut cc, 100.0, 70.0);
        let s = cc.signals();
        assert_eq!(s.pre_reaction_at, None);
        assert!((s.pre_reaction_level.unwrap() - 20.0 / 33.0).abs() < 1e-9);
        assert_eq!(s.underuse_at, Some(Timestamp::from_ms(10)));
        assert_eq!(s.queuing_delay, cc.copa().queuing_delay(), "Copa's own signal passes");
        // Standing RTT 100 ms (d_q 50 ms > 33): the event, at the feedback's time.
        for i in 0..20 {
            ack(&mut cc, 200.0 + i as f64, 100.0);
        }
        let s = cc.signals();
        assert_eq!(s.pre_reaction_at, Some(Timestamp::from_ms(229)));
        assert_eq!(s.underuse_at, Some(Timestamp::from_ms(10)));
        // The queue drains (standing back to 50.1 ms after the old samples age out): W* is
        // large, the window moves up, underuse at that ACK.
        for i in 0..300 {
            ack(&mut cc, 400.0 + i as f64, 50.1);
        }
        let s = cc.signals();
        assert_eq!(s.pre_reaction_at, Some(Timestamp::from_ms(229)));
        assert!(s.underuse_at.is_some_and(|u| u > Timestamp::from_ms(229)));
        // The wrapper never moves Copa: the same ACKs give plain Copa the same window.
        let mut plain = steady_copa(CopaConfig::default(), 10.0);
        let mut seq2 = 0;
        let mut ack2 = |cc: &mut dyn CongestionController, at_ms: f64, rtt_ms: f64| {
            let p = result(seq2, MSS, Some((at_ms * 1000.0) as i64), (rtt_ms * 1000.0) as i64);
            seq2 += 1;
            cc.on_transport_feedback(&report(vec![p]), Timestamp::ZERO);
        };
        ack2(&mut plain, 0.0, 50.0);
        ack2(&mut plain, 100.0, 70.0);
        for i in 0..20 {
            ack2(&mut plain, 200.0 + i as f64, 100.0);
        }
        for i in 0..300 {
            ack2(&mut plain, 400.0 + i as f64, 50.1);
        }
        assert_eq!(plain.window(), cc.copa().window());
        // Plain Copa signals nothing of MAE's, and the config builds it without a threshold.
        let s = plain.signals();
        assert_eq!((s.pre_reaction_at, s.pre_reaction_level, s.underuse_at), (None, None, None));
        let built = CopaConfig::default().build(Timestamp::ZERO);
        assert_eq!(built.signals().pre_reaction_level, None);
    }
}
