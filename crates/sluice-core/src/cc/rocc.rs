//! RoCC (Agarwal, Arun, Ray, Martins and Seshan, HotNets '22, "Automating network heuristic
//! design and analysis"), the second window-based controller Vidaptive runs (Vidaptive §4,
//! §5.4): the window is "slightly more than" the bytes received over the last
//! `(1 + gamma) x RTTmin`, which holds a queueing delay of `gamma x RTTmin`.
//!
//! Sluice follows Venkat Arun's reference kernel module as the Vidaptive brief gives it
//! (`tcp_simple_rocc.c` in 108anup/rocc_kernel, its loss mode from `tcp_rocc.c`):
//!
//! * **ACKs.** Every received packet of a transport feedback report, in arrival order, with
//!   its own RTT sample (as Copa's ACKs, [`super::copa`]); the time of an ACK is the packet's
//!   arrival time in the receiver's clock, forced non-decreasing. The reference stamps an ACK
//!   with the sender's clock at processing; with reports batching 10-50 ms of packets that
//!   would put one or two reports in a history of 2 x RTTmin, so the delivered bytes are
//!   counted when they were received (the brief's pitfall).
//! * **RTTs.** srtt: EWMA with gain 1/8 per ACK (Linux `tcp_rtt_estimator`, whose smoothed
//!   RTT the module reads); RTTmin: the minimum of srtt since the start (the module's
//!   `min_rtt_us`, never expired).
//! * **History.** `hist = (1 + gamma) x RTTmin` (the module: `2 x min_rtt_us`, gamma = 1; the
//!   paper leaves gamma open). ACKs are counted in 16 sub-intervals of `2 x hist / 16 + 1 us`
//!   (a ring; an ACK more than one sub-interval after the newest one's start opens a new
//!   one). The history sums sub-intervals from the newest back to (and including) the first
//!   that started more than `hist` ago: `hist` plus part of one sub-interval, the paper's
//!   "slightly more than". Bytes, not packets: a 200 B dummy counts for its size.
//! * **Window.** After every ACK, `cwnd = acked bytes in the history + alpha` (alpha = 2
//!   packets, `rocc_alpha`), at least 2 packets (`rocc_min_cwnd`), but not lower than before
//!   while any sub-interval of the history holds an application-limited ACK ("Do not decrease
//!   cwnd if app limited"). Before the first ACK: 10 packets (Linux's initial window).
//! * **Application-limited** (Linux `tcp_rate_check_app_limited`: the sender had the window
//!   and nothing to send; every packet sent until the data then in flight is delivered is
//!   marked, and its ACK is an app-limited rate sample). Sluice's controller sees sends and
//!   reports, not the sender's queue, so it infers the idle: a packet sent more than
//!   `app_limited_slack_ms` after both the previous packet's pacing slot (its size at the
//!   pacing rate) and the moment the window last opened marks the flow app-limited, and every
//!   packet sent within one srtt from then is marked. A pacer at RoCC's rate with a backlog
//!   never leaves such a gap.
//! * **Loss mode** (`tcp_rocc.c`; commented out in `tcp_simple_rocc.c`): when more than
//!   64/1024 of the history was lost, pacing drops to
//!   `cwnd x (1 + 2 x 64/1024) / (2 x srtt)`. The kernel counts packets (`pkts_acked`,
//!   `pkts_lost`); Sluice's history counts bytes, the same share while packets are of one
//!   size and weighted by size when small ones (padding, audio) are in the mix.
//!
//! **Outputs**: `congestion_window = cwnd`; `target_rate = encoder_rate` = the rate RoCC
//! sends at: `cwnd / srtt` (Vidaptive's CC-Rate, §3.1), or the loss-mode rate if lower;
//! `pacing_rate = cwnd / srtt` (Vidaptive; the module paces at `cwnd / RTTmin`, option
//! [`RoccRtt::Min`]) or the loss-mode rate. No padding, no probes, no timer.
//! [`CcSignals::queuing_delay`] is `srtt - RTTmin`.

use super::window_limits::{self, MAX_RTT_SAMPLE, MIN_RTT_SAMPLE, TIME_LIMIT_US};
use super::window_rate as rate;
use super::{
    CcSignals, CongestionController, NetworkControlUpdate, PacketResult, ProbeClusterConfig,
    SentPacket, TransportPacketsFeedback,
};
use crate::columns::Columns;
use crate::finite_or;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The RTT RoCC's pacing rate divides the window by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoccRtt {
    /// The smoothed RTT: Vidaptive's CC-Rate, `cwnd / srtt` (§3.1).
    Smoothed,
    /// RTTmin (the kernel module: "pace a little extra because we want to be cwnd limited").
    Min,
}

/// RoCC's settings; the defaults follow the reference kernel module (`tcp_simple_rocc.c`,
/// its loss mode from `tcp_rocc.c`) and Vidaptive's pacing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoccConfig {
    /// Queueing-delay target as a multiple of RTTmin: the history is `(1 + gamma) x RTTmin`
    /// (the module: 2 x RTTmin, gamma = 1; Vidaptive §4 leaves it open).
    pub gamma: f64,
    /// Added to the delivered bytes, in packets (`rocc_alpha` = 2).
    pub alpha_packets: f64,
    /// Minimum window, in packets (`rocc_min_cwnd` = 2).
    pub min_window_packets: f64,
    /// Window before the first ACK, in packets (Linux's initial window, 10).
    pub initial_window_packets: f64,
    /// One packet: a full packet on the wire (1200 B payload + 60 B headers).
    pub mss_bytes: i64,
    /// Sub-intervals of the history ring (`rocc_num_intervals` = 16).
    pub intervals: usize,
    /// srtt gain per ACK (Linux: 1/8).
    pub srtt_gain: f64,
    /// RTT assumed before the first sample (as Copa's, 100 ms).
    pub initial_rtt_ms: f64,
    /// Never lower the window while the history holds an app-limited ACK (the module: on).
    pub hold_when_app_limited: bool,
    /// A send this much later than both its pacing slot and the window's opening marks the
    /// flow application-limited (Sluice's inference of Linux's check; see the module doc).
    pub app_limited_slack_ms: f64,
    /// Loss mode (`tcp_rocc.c`): pacing at `cwnd x (1 + 2 x threshold) / (2 x srtt)` while
    /// the history's loss rate exceeds `loss_threshold`.
    pub loss_mode: bool,
    /// `rocc_loss_thresh / 1024` = 64/1024.
    pub loss_threshold: f64,
    /// The pacing rate is `cwnd / this RTT` (Vidaptive: srtt).
    pub pacing_rtt: RoccRtt,
}

impl Default for RoccConfig {
    fn default() -> Self {
        RoccConfig {
            gamma: 1.0,
            alpha_packets: 2.0,
            min_window_packets: 2.0,
            initial_window_packets: 10.0,
            mss_bytes: crate::packetizer::DEFAULT_MAX_PAYLOAD
                + crate::packet::PACKET_OVERHEAD.as_bytes(),
            intervals: 16,
            srtt_gain: 0.125,
            initial_rtt_ms: 100.0,
            hold_when_app_limited: true,
            app_limited_slack_ms: 1.0,
            loss_mode: true,
            loss_threshold: 64.0 / 1024.0,
            pacing_rtt: RoccRtt::Smoothed,
        }
    }
}

impl RoccConfig {
    /// A configuration mistake, if any (the config paths under `cc`).
    pub fn validate(&self) -> Result<(), String> {
        use crate::check_range;
        check_range("cc.gamma", self.gamma, 0.0, false, 100.0)?;
        check_range("cc.alpha_packets", self.alpha_packets, 0.0, false, 1e6)?;
        check_range("cc.min_window_packets", self.min_window_packets, 1.0, false, 1e6)?;
        check_range("cc.initial_window_packets", self.initial_window_packets, 1.0, false, 1e6)?;
        check_range("cc.srtt_gain", self.srtt_gain, 0.0, true, 1.0)?;
        check_range("cc.initial_rtt_ms", self.initial_rtt_ms, 0.0, true, 60_000.0)?;
        check_range("cc.app_limited_slack_ms", self.app_limited_slack_ms, 0.0, false, 60_000.0)?;
        check_range("cc.loss_threshold", self.loss_threshold, 0.0, true, 1.0)?;
        if !(1..=1024).contains(&self.intervals) {
            return Err(format!("cc.intervals must be in [1, 1024], got {}", self.intervals));
        }
        if !(100..=9000).contains(&self.mss_bytes) {
            return Err(format!("cc.mss_bytes must be in [100, 9000], got {}", self.mss_bytes));
        }
        Ok(())
    }

    /// The controller with this configuration.
    pub fn build(&self, now: Timestamp) -> Rocc {
        Rocc::new(self.clone(), now)
    }
}

/// Send records kept for the app-limited flags of packets not yet reported.
const MAX_SEND_RECORDS: usize = 1 << 20;

/// One sub-interval of the history.
#[derive(Clone, Copy, Debug)]
struct Interval {
    start: Timestamp,
    acked: f64,
    lost: f64,
    app_limited: bool,
}

/// RoCC's state; built by [`RoccConfig::build`].
#[derive(Clone, Debug)]
pub struct Rocc {
    config: RoccConfig,
    mss: f64,
    /// The window in bytes.
    window: f64,
    srtt_us: Option<f64>,
    min_rtt: Option<TimeDelta>,
    /// Newest first, at most `config.intervals`.
    intervals: VecDeque<Interval>,
    last_ack: Option<Timestamp>,
    /// Lost bytes reported but not yet counted (counted with the next ACK).
    pending_lost: f64,
    /// Sums over the history after the latest ACK.
    history_acked: f64,
    history_lost: f64,
    history_app_limited: bool,
    in_loss_mode: bool,
    // App-limited inference.
    /// (transport seq, app-limited) of packets sent and not yet reported, in send order.
    sends: VecDeque<(u64, bool)>,
    last_send: Option<(Timestamp, DataSize)>,
    /// Since when the bytes in flight have been below the window (`None`: window full).
    window_open_since: Option<Timestamp>,
    app_limited_until: Timestamp,
}

impl Rocc {
    /// RoCC with `config`, at its initial window (`now` is not used).
    pub fn new(config: RoccConfig, _now: Timestamp) -> Self {
        let mss = config.mss_bytes.max(1) as f64;
        let mut r = Rocc {
            mss,
            window: 0.0,
            srtt_us: None,
            min_rtt: None,
            intervals: VecDeque::new(),
            last_ack: None,
            pending_lost: 0.0,
            history_acked: 0.0,
            history_lost: 0.0,
            history_app_limited: false,
            in_loss_mode: false,
            sends: VecDeque::new(),
            last_send: None,
            window_open_since: None,
            app_limited_until: Timestamp::ZERO,
            config,
        };
        r.window = r.clamp_window(finite_or(r.config.initial_window_packets, 10.0) * mss);
        r
    }

    /// The congestion window.
    pub fn window(&self) -> DataSize {
        DataSize::from_bytes(self.window.round() as i64)
    }
    /// The smoothed RTT (EWMA with gain `srtt_gain` per ACK), `None` before the first sample.
    pub fn smoothed_rtt(&self) -> Option<TimeDelta> {
        self.srtt_us.map(|s| TimeDelta::from_us(s.round() as i64))
    }
    /// The minimum of the smoothed RTT so far.
    pub fn min_rtt(&self) -> Option<TimeDelta> {
        self.min_rtt
    }
    /// The history length, `(1 + gamma) x RTTmin` (`None` before the first sample).
    pub fn history(&self) -> Option<TimeDelta> {
        let g = finite_or(self.config.gamma, 1.0).clamp(0.0, 1e6);
        self.min_rtt.map(|m| m * (1.0 + g))
    }
    /// Bytes acknowledged in the history after the latest ACK.
    pub fn history_acked(&self) -> DataSize {
        DataSize::from_bytes(self.history_acked.round() as i64)
    }
    /// Whether the history holds an application-limited ACK.
    pub fn app_limited(&self) -> bool {
        self.history_app_limited
    }
    /// Whether the history's loss rate is above `loss_threshold` (the loss mode's condition,
    /// which changes the rates only with `loss_mode` on).
    pub fn in_loss_mode(&self) -> bool {
        self.in_loss_mode
    }

    fn clamp_window(&self, bytes: f64) -> f64 {
        window_limits::clamp_window(bytes, self.config.min_window_packets, self.mss)
    }

    fn initial_rtt(&self) -> TimeDelta {
        window_limits::initial_rtt(self.config.initial_rtt_ms)
    }

    fn srtt_or_initial(&self) -> TimeDelta {
        self.smoothed_rtt().unwrap_or_else(|| self.initial_rtt()).max(MIN_RTT_SAMPLE)
    }

    /// The rate RoCC sends at (before the pacing RTT choice): `cwnd / srtt`, or the loss
    /// mode's rate.
    fn loss_mode_rate(&self) -> Option<DataRate> {
        if !(self.config.loss_mode && self.in_loss_mode) {
            return None;
        }
        let thr = finite_or(self.config.loss_threshold, 0.0625).clamp(0.0, 1.0);
        Some(rate(self.window * (1.0 + 2.0 * thr) / 2.0, self.srtt_or_initial()))
    }

    /// Whether packet `seq` was sent while the flow was app-limited (and forgets it).
    fn take_app_limited(&mut self, seq: u64) -> bool {
        while self.sends.front().is_some_and(|&(s, _)| s < seq) {
            self.sends.pop_front();
        }
        match self.sends.front() {
            Some(&(s, flag)) if s == seq => {
                self.sends.pop_front();
                flag
            }
            _ => false,
        }
    }

    /// One ACK: `size` bytes that arrived at `arrival` (receiver clock) with RTT `rtt`.
    fn on_ack(&mut self, size: DataSize, arrival: Timestamp, rtt: TimeDelta, app_limited: bool) {
        let t = Timestamp::from_us(arrival.as_us().clamp(-TIME_LIMIT_US, TIME_LIMIT_US));
        let t = self.last_ack.map_or(t, |l| t.max(l));
        self.last_ack = Some(t);
        let r = rtt.clamp(MIN_RTT_SAMPLE, MAX_RTT_SAMPLE).as_us() as f64;
        let gain = finite_or(self.config.srtt_gain, 0.125).clamp(0.0, 1.0);
        let srtt = self.srtt_us.map_or(r, |s| s + gain * (r - s));
        self.srtt_us = Some(srtt);
        let srtt = TimeDelta::from_us(srtt.round() as i64).max(MIN_RTT_SAMPLE);
        self.min_rtt = Some(self.min_rtt.map_or(srtt, |m| m.min(srtt)));
        let hist = self.history().unwrap_or(TimeDelta::INFINITY);

        let n = self.config.intervals.clamp(1, 1 << 16);
        let sub = if hist.is_finite() {
            TimeDelta::from_us((2 * hist.as_us()) / n as i64 + 1)
        } else {
            TimeDelta::INFINITY
        };
        let acked = size.as_bytes().max(0) as f64;
        let lost = std::mem::take(&mut self.pending_lost);
        match self.intervals.front_mut() {
            Some(head) if head.start + sub >= t => {
                head.acked += acked;
                head.lost += lost;
                head.app_limited |= app_limited;
            }
            _ => {
                self.intervals.push_front(Interval { start: t, acked, lost, app_limited });
                self.intervals.truncate(n);
            }
        }
        let (mut a, mut l, mut limited) = (0.0, 0.0, false);
        for i in &self.intervals {
            a += i.acked;
            l += i.lost;
            limited |= i.app_limited;
            if i.start + hist < t {
                break;
            }
        }
        self.history_acked = a;
        self.history_lost = l;
        self.history_app_limited = limited;
        let thr = finite_or(self.config.loss_threshold, 0.0625).clamp(0.0, 1.0);
        self.in_loss_mode = l > thr * (a + l);

        let alpha = finite_or(self.config.alpha_packets, 2.0).max(0.0) * self.mss;
        let mut target = a + alpha;
        if self.config.hold_when_app_limited && limited && target < self.window {
            target = self.window;
        }
        self.window = self.clamp_window(target);
    }

    /// Whether the window is open after an event at `now` (sender clock) that left
    /// `in_flight` bytes outstanding.
    fn update_window_open(&mut self, in_flight: DataSize, now: Timestamp) {
        if in_flight.as_bytes() as f64 >= self.window {
            self.window_open_since = None;
        } else if self.window_open_since.is_none() {
            self.window_open_since = Some(now);
        }
    }
}

impl CongestionController for Rocc {
    fn on_packet_sent(&mut self, packet: &SentPacket, now: Timestamp) {
        let size = packet.size.max(DataSize::ZERO);
        let before = packet.data_in_flight - size;
        if before.as_bytes() as f64 <= self.window - 1.0 {
            if let Some((prev, prev_size)) = self.last_send {
                let pacing = self.update().pacing_rate;
                let slot = prev + prev_size / pacing;
                let opened = self.window_open_since.map_or(slot, |o| o.max(slot));
                let slack = TimeDelta::from_ms_f64(
                    finite_or(self.config.app_limited_slack_ms, 1.0).clamp(0.0, 1e9),
                );
                if now.saturating_since(opened) > slack {
                    self.app_limited_until = now + self.srtt_or_initial();
                }
            }
        }
        let flag = now < self.app_limited_until;
        self.sends.push_back((packet.transport_seq, flag));
        if self.sends.len() > MAX_SEND_RECORDS {
            self.sends.pop_front();
        }
        self.last_send = Some((now, size));
        self.update_window_open(packet.data_in_flight, now);
    }

    fn on_transport_feedback(&mut self, feedback: &TransportPacketsFeedback, now: Timestamp) {
        // App-limited flags, taken in sequence order (the send records are in that order).
        let mut reported: Vec<&PacketResult> = feedback.packets.iter().collect();
        reported.sort_by_key(|p| p.sent.transport_seq);
        let mut flags: Vec<(u64, bool)> = Vec::with_capacity(reported.len());
        for p in reported {
            let flag = self.take_app_limited(p.sent.transport_seq);
            if p.receive_time.is_none() {
                self.pending_lost += p.sent.size.as_bytes().max(0) as f64;
            } else {
                flags.push((p.sent.transport_seq, flag));
            }
        }
        for p in feedback.received_by_arrival() {
            let flag = flags
                .binary_search_by_key(&p.sent.transport_seq, |&(s, _)| s)
                .map(|i| flags[i].1)
                .unwrap_or(false);
            // A received packet without a sample (not filled in by the sender) cannot move RoCC.
            if let PacketResult { receive_time: Some(arrival), rtt: Some(rtt), .. } = p {
                self.on_ack(p.sent.size, arrival, rtt, flag);
            }
        }
        self.update_window_open(feedback.data_in_flight, now);
    }

    fn handle_timeout(&mut self, _now: Timestamp) {}

    fn poll_timeout(&self) -> Timestamp {
        Timestamp::INFINITY
    }

    fn update(&self) -> NetworkControlUpdate {
        let srtt = self.srtt_or_initial();
        let cc_rate = rate(self.window, srtt);
        let loss = self.loss_mode_rate();
        let target = loss.map_or(cc_rate, |l| l.min(cc_rate));
        let pacing = match loss {
            Some(l) => l,
            None => {
                let rtt = match self.config.pacing_rtt {
                    RoccRtt::Smoothed => srtt,
                    RoccRtt::Min => self.min_rtt.unwrap_or(srtt),
                };
                rate(self.window, rtt)
            }
        };
        NetworkControlUpdate {
            target_rate: target,
            encoder_rate: target,
            cwnd_reduce_ratio: 0.0,
            pacing_rate: pacing,
            padding_rate: DataRate::ZERO,
            congestion_window: Some(self.window()),
        }
    }

    fn poll_probe_cluster(&mut self, _now: Timestamp) -> Option<ProbeClusterConfig> {
        None
    }

    fn signals(&self) -> CcSignals {
        let q = match (self.smoothed_rtt(), self.min_rtt) {
            (Some(s), Some(m)) => Some((s - m).max(TimeDelta::ZERO)),
            _ => None,
        };
        CcSignals { queuing_delay: q, ..CcSignals::default() }
    }

    fn debug_columns(&self, out: &mut Columns) {
        out.size("cc_cwnd_bytes", Some(self.window()));
        out.delta("cc_srtt_us", self.smoothed_rtt());
        out.delta("cc_min_rtt_us", self.min_rtt);
        out.size("cc_history_acked_bytes", Some(self.history_acked()));
        out.bool("cc_app_limited", self.history_app_limited);
        out.bool("cc_loss_mode", self.in_loss_mode);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::rtt::RttEstimator;
    use crate::rng::Rng;

    const MSS: i64 = 1260;
    /// The receiver's clock runs 7 s ahead of the sender's: only differences may matter.
    const RX_OFFSET_US: i64 = 7_000_000;

    fn sent(seq: u64, size: i64, at_us: i64, in_flight_after: i64) -> SentPacket {
        SentPacket {
            transport_seq: seq,
            send_time: Timestamp::from_us(at_us),
            size: DataSize::from_bytes(size),
            probe_cluster_id: None,
            is_padding: size < MSS,
            data_in_flight: DataSize::from_bytes(in_flight_after),
        }
    }

    fn report(packets: Vec<PacketResult>, in_flight: i64) -> TransportPacketsFeedback {
        TransportPacketsFeedback {
            feedback_time: Timestamp::ZERO,
            packets,
            prior_in_flight: DataSize::ZERO,
            data_in_flight: DataSize::from_bytes(in_flight),
            rtt: None,
            smoothed_rtt: None,
        }
    }

    /// Feeds one ACK per report; `app_limited` marks the packet as sent while app-limited.
    struct Driver {
        rocc: Rocc,
        seq: u64,
    }

    impl Driver {
        fn new(config: RoccConfig) -> Self {
            Driver { rocc: config.build(Timestamp::ZERO), seq: 0 }
        }
        fn ack(&mut self, at_ms: f64, rtt_ms: f64, app_limited: bool) {
            let at = (at_ms * 1000.0).round() as i64;
            let rtt = (rtt_ms * 1000.0).round() as i64;
            self.rocc.sends.push_back((self.seq, app_limited));
            let p = PacketResult {
                sent: sent(self.seq, MSS, at - rtt / 2, 0),
                receive_time: Some(Timestamp::from_us(at + RX_OFFSET_US)),
                rtt: Some(TimeDelta::from_us(rtt)),
            };
            self.seq += 1;
            self.rocc.on_transport_feedback(&report(vec![p], 0), Timestamp::ZERO);
        }
        fn lose(&mut self, n: usize) {
            let pkts = (0..n)
                .map(|_| {
                    self.seq += 1;
                    PacketResult { sent: sent(self.seq, MSS, 0, 0), receive_time: None, rtt: None }
                })
                .collect();
            self.rocc.on_transport_feedback(&report(pkts, 0), Timestamp::ZERO);
        }
        fn window(&self) -> i64 {
            self.rocc.window().as_bytes()
        }
    }

    #[test]
    fn config_defaults_and_json() {
        let c = RoccConfig::default();
        assert_eq!((c.gamma, c.alpha_packets, c.min_window_packets), (1.0, 2.0, 2.0));
        assert_eq!((c.initial_window_packets, c.mss_bytes, c.intervals), (10.0, 1260, 16));
        assert_eq!((c.srtt_gain, c.initial_rtt_ms), (0.125, 100.0));
        assert!(c.hold_when_app_limited && c.loss_mode);
        assert_eq!(c.loss_threshold, 0.0625);
        assert_eq!(c.pacing_rtt, RoccRtt::Smoothed);
        let c: RoccConfig = serde_json::from_str(r#"{"gamma": 0.5, "pacing_rtt": "min"}"#).unwrap();
        assert_eq!(c, RoccConfig { gamma: 0.5, pacing_rtt: RoccRtt::Min, ..Default::default() });
        assert!(serde_json::from_str::<RoccConfig>(r#"{"gama": 1}"#).is_err());
    }

    #[test]
    fn window_is_the_history_s_acked_bytes_plus_alpha() {
        // One full packet acknowledged every ms, RTT 50 ms: srtt = RTTmin = 50 ms, history
        // 2 x 50 = 100 ms, sub-intervals of 2 x 100 / 16 ms + 1 us = 12.501 ms. An ACK opens
        // a new sub-interval once it arrives more than 12.501 ms after the newest one's
        // start: they start at 0, 13, 26, ..., 286 and 299 ms (13 ACKs each). At 299 ms the
        // history sums from 299 back to the first sub-interval that started more than
        // 100 ms before: 195 (195 + 100 < 299), so 299 + 8 x 13 ACKs = 105 packets, about
        // 105 ms of them: "slightly more than" 2 RTTmin. cwnd = (105 + 2) x 1260 = 134 820 B.
        let mut d = Driver::new(RoccConfig::default());
        assert_eq!(d.window(), 10 * MSS, "the initial window");
        for t in 0..300 {
            d.ack(t as f64, 50.0, false);
        }
        assert_eq!(d.rocc.min_rtt(), Some(TimeDelta::from_ms(50)));
        assert_eq!(d.rocc.history(), Some(TimeDelta::from_ms(100)));
        assert_eq!(d.rocc.history_acked().as_bytes(), 105 * MSS);
        assert_eq!(d.window(), 107 * MSS);
        // The CC-Rate: cwnd / srtt = 134 820 B / 50 ms = 21.5712 Mbps; paced at it.
        let u = d.rocc.update();
        assert_eq!(u.target_rate, DataRate::from_bps(21_571_200));
        assert_eq!(u.pacing_rate, u.target_rate);
        assert_eq!(u.congestion_window, Some(DataSize::from_bytes(107 * MSS)));
        // The module's own pacing: cwnd / RTTmin (the same here, srtt = RTTmin).
        let mut k = Driver::new(RoccConfig { pacing_rtt: RoccRtt::Min, ..Default::default() });
        for (t, rtt) in [(0.0, 50.0), (1.0, 90.0)] {
            k.ack(t, rtt, false);
        }
        // srtt 50 then 50 + (90 - 50) / 8 = 55 ms; RTTmin stays 50 ms (the min of srtt).
        assert_eq!(k.rocc.smoothed_rtt(), Some(TimeDelta::from_ms(55)));
        assert_eq!(k.rocc.min_rtt(), Some(TimeDelta::from_ms(50)));
        let u = k.rocc.update();
        // cwnd = 2 ACKs + 2 = 4 packets = 5040 B: pacing 5040 B / 50 ms, target / 55 ms.
        assert_eq!(u.pacing_rate, DataRate::from_bps(806_400));
        assert_eq!(u.target_rate, DataRate::from_bps(733_091));
        assert_eq!(k.rocc.signals().queuing_delay, Some(TimeDelta::from_ms(5)));
    }

    #[test]
    fn the_window_does_not_shrink_while_the_history_is_app_limited() {
        let mut d = Driver::new(RoccConfig::default());
        for t in 0..300 {
            d.ack(t as f64, 50.0, false);
        }
        let full = d.window();
        assert_eq!(full, 107 * MSS);
        // Half the ACKs, sent while app-limited: the window may still grow (the first ACKs
        // join the 299 ms sub-interval while the oldest ones leave the history a whole
        // sub-interval at a time) but never shrinks.
        let mut prev = full;
        for t in (300..500).step_by(2) {
            d.ack(t as f64, 50.0, true);
            assert!(d.window() >= prev, "at {t} ms: {} < {prev}", d.window());
            prev = d.window();
        }
        assert!(d.rocc.app_limited());
        // Half the ACKs, no longer app-limited: once the history (~112 ms) holds no
        // app-limited ACK the window falls to its acked bytes + 2 packets, 50-57 ACKs of
        // the last 100-112.5 ms.
        for t in (500..800).step_by(2) {
            d.ack(t as f64, 50.0, false);
        }
        assert!(!d.rocc.app_limited());
        let acked = d.rocc.history_acked().as_bytes();
        assert!((50 * MSS..=57 * MSS).contains(&acked), "{acked}");
        assert_eq!(d.window(), acked + 2 * MSS);
        // Without the rule the window follows the acked bytes at once.
        let mut d = Driver::new(RoccConfig { hold_when_app_limited: false, ..Default::default() });
        for t in 0..300 {
            d.ack(t as f64, 50.0, false);
        }
        for t in (300..500).step_by(2) {
            d.ack(t as f64, 50.0, true);
        }
        assert!(d.window() < full * 7 / 10, "{}", d.window());
    }

    #[test]
    fn an_idle_sender_with_an_open_window_is_app_limited_for_one_srtt() {
        // Before any sample: window 10 x 1260 = 12 600 B, srtt 100 ms, paced at
        // 12 600 B / 100 ms = 1.008 Mbps: a full packet every 10 ms.
        let mut r = RoccConfig::default().build(Timestamp::ZERO);
        let send = |r: &mut Rocc, seq: u64, at_ms: f64, in_flight: i64| {
            r.on_packet_sent(
                &sent(seq, MSS, (at_ms * 1000.0) as i64, in_flight),
                Timestamp::from_us((at_ms * 1000.0) as i64),
            )
        };
        // Backlogged: every packet in its slot (the first has no previous one).
        for (i, t) in [0.0, 10.0, 20.0].into_iter().enumerate() {
            send(&mut r, i as u64, t, (i as i64 + 1) * MSS);
        }
        // 0.9 ms late: within the 1 ms slack.
        send(&mut r, 3, 30.9, 4 * MSS);
        // 5 ms after its slot (40.9 ms) with the window open: app-limited, and so is every
        // packet sent in the next srtt (100 ms): until 145.9 ms.
        send(&mut r, 4, 45.9, 5 * MSS);
        send(&mut r, 5, 55.9, 6 * MSS);
        send(&mut r, 6, 145.8, 7 * MSS);
        let flags: Vec<bool> = r.sends.iter().map(|&(_, f)| f).collect();
        assert_eq!(flags, [false, false, false, false, true, true, true]);
        // A full window (7 + 3 packets = 12 600 B) that a report reopens at 400 ms: a packet
        // sent 0.5 ms after the window opened is not app-limited, however long ago its
        // pacing slot was.
        let mut r = RoccConfig::default().build(Timestamp::ZERO);
        for i in 0..10 {
            send(&mut r, i, i as f64 * 10.0, (i as i64 + 1) * MSS);
        }
        assert!(r.window_open_since.is_none(), "the window is full");
        r.on_transport_feedback(&report(vec![], 9 * MSS), Timestamp::from_ms(400));
        send(&mut r, 10, 400.5, 10 * MSS);
        assert!(!r.sends.back().unwrap().1);
    }

    #[test]
    fn heavy_loss_in_the_history_slows_pacing() {
        let mut d = Driver::new(RoccConfig::default());
        for t in 0..300 {
            d.ack(t as f64, 50.0, false);
        }
        assert!(!d.rocc.in_loss_mode());
        // 10 packets lost, counted with the next ACK (300 ms, a new sub-interval): the
        // history holds 106 ACKed and 10 lost, 8.6 % > 64/1024 = 6.25 %.
        d.lose(10);
        d.ack(300.0, 50.0, false);
        assert!(d.rocc.in_loss_mode());
        assert_eq!(d.window(), 108 * MSS);
        // Pacing cwnd x (1 + 2 x 64/1024) / (2 x srtt) = 136 080 x 1.125 / 2 / 50 ms.
        let u = d.rocc.update();
        assert_eq!(u.pacing_rate, DataRate::from_bps(12_247_200));
        assert_eq!(u.target_rate, u.pacing_rate);
        // Off: pacing stays cwnd / srtt.
        let mut d = Driver::new(RoccConfig { loss_mode: false, ..Default::default() });
        for t in 0..300 {
            d.ack(t as f64, 50.0, false);
        }
        d.lose(10);
        d.ack(300.0, 50.0, false);
        assert_eq!(d.rocc.update().pacing_rate, DataRate::from_bps(21_772_800));
    }

    #[test]
    fn hostile_input_never_panics() {
        let mut rng = Rng::new(11);
        for _ in 0..200 {
            let mut r = RoccConfig {
                gamma: if rng.bernoulli(0.1) { f64::NAN } else { rng.uniform() * 3.0 },
                intervals: (rng.next_u64() % 40) as usize,
                ..Default::default()
            }
            .build(Timestamp::ZERO);
            let mut t: i64 = 0;
            let mut seq = 0u64;
            for _ in 0..50 {
                t = t.saturating_add((rng.next_u64() % 20_000) as i64 - 2_000);
                let n = (rng.next_u64() % 6) as usize;
                let mut packets = Vec::new();
                for _ in 0..n {
                    let size = (rng.next_u64() % 1500) as i64;
                    r.on_packet_sent(
                        &sent(seq, size, t, (rng.next_u64() % 100_000) as i64),
                        Timestamp::from_us(t),
                    );
                    let lost = rng.bernoulli(0.2);
                    packets.push(PacketResult {
                        sent: sent(seq, size, t, 0),
                        receive_time: (!lost).then(|| Timestamp::from_us(t + 7)),
                        rtt: (!lost).then(|| TimeDelta::from_us((rng.next_u64() % 300_000) as i64)),
                    });
                    seq += 1;
                }
                r.on_transport_feedback(&report(packets, 0), Timestamp::from_us(t));
                let u = r.update();
                assert!(u.congestion_window.unwrap() >= DataSize::from_bytes(1));
                assert!(u.target_rate >= DataRate::ZERO && u.pacing_rate >= DataRate::ZERO);
                r.debug_columns(&mut Columns::default());
            }
        }
    }

    /// A fluid bottleneck (FIFO at a constant rate, 25 ms one way each direction), a
    /// backlogged sender paced at RoCC's pacing rate and gated by its window, and a report
    /// per packet. Returns (delivery rate over the last 4 s, mean queueing delay over them).
    fn closed_loop(config: RoccConfig, capacity: DataRate) -> (DataRate, TimeDelta) {
        let one_way = TimeDelta::from_ms(25);
        let size = DataSize::from_bytes(MSS);
        let mut rocc = config.build(Timestamp::ZERO);
        let mut est = RttEstimator::default();
        let mut now = Timestamp::ZERO;
        let mut next_send = Timestamp::ZERO;
        let mut link_free = Timestamp::ZERO;
        let mut in_flight = DataSize::ZERO;
        let mut seq = 0;
        // (arrival at the sender of the ACK, packet result with its true arrival time)
        let mut acks: std::collections::VecDeque<(Timestamp, PacketResult)> = Default::default();
        let (mut bytes, mut qsum, mut qn) = (DataSize::ZERO, TimeDelta::ZERO, 0i64);
        let end = Timestamp::from_secs_f64(8.0);
        let from = Timestamp::from_secs_f64(4.0);
        while now < end {
            while acks.front().is_some_and(|a| a.0 <= now) {
                let (_, p) = acks.pop_front().unwrap();
                in_flight -= p.sent.size;
                let mut pk = vec![p];
                est.on_feedback(&mut pk, TimeDelta::ZERO, now);
                let fb = TransportPacketsFeedback {
                    feedback_time: now,
                    packets: pk,
                    prior_in_flight: in_flight + size,
                    data_in_flight: in_flight,
                    rtt: None,
                    smoothed_rtt: None,
                };
                rocc.on_transport_feedback(&fb, now);
            }
            let u = rocc.update();
            if in_flight < u.congestion_window.unwrap() && next_send <= now {
                in_flight += size;
                let s = sent(seq, MSS, now.as_us(), in_flight.as_bytes());
                seq += 1;
                rocc.on_packet_sent(&s, now);
                let start = now.max(link_free);
                link_free = start + size / capacity;
                let arrival = link_free + one_way;
                if now >= from {
                    bytes += size;
                    qsum += start - now;
                    qn += 1;
                }
                let p = PacketResult {
                    sent: s,
                    receive_time: Some(Timestamp::from_us(arrival.as_us() + RX_OFFSET_US)),
                    rtt: None,
                };
                acks.push_back((arrival + one_way, p));
                next_send = now + size / u.pacing_rate;
                continue;
            }
            let mut next = acks.front().map_or(end, |a| a.0);
            if in_flight < u.congestion_window.unwrap() {
                next = next.min(next_send);
            }
            now = next.max(now + TimeDelta::from_us(1)).min(end);
        }
        (bytes / (end - from), qsum / qn.max(1))
    }

    #[test]
    fn closed_loop_holds_a_queue_of_gamma_rtt_min() {
        // 12 Mbps, 50 ms: the window settles at the bytes delivered over 2 x RTTmin (two
        // BDPs) + 2 packets, so the RTT doubles: a queue of gamma x RTTmin = 50 ms
        // (+ 2 packets, 1.7 ms). gamma = 0.5: 25 ms.
        let c = DataRate::from_mbps(12);
        for (gamma, expect_ms) in [(1.0, 50.0), (0.5, 25.0)] {
            let (rate, q) = closed_loop(RoccConfig { gamma, ..Default::default() }, c);
            let msg = format!("gamma {gamma}: {:.2} Mbps, mean queue {q:?}", rate.as_mbps_f64());
            eprintln!("{msg}");
            assert!(rate.as_mbps_f64() > 11.4, "{msg}");
            assert!((q.as_ms_f64() - expect_ms).abs() < 0.25 * expect_ms, "{msg}");
        }
    }
}
