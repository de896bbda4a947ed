//! BBR v1 congestion control (draft-cardwell-iccrg-bbr-congestion-control-00, "BBR:
//! Congestion-Based Congestion Control", Cardwell et al., ACM Queue 2016) for the bulk cross
//! traffic: a model of the path's bottleneck bandwidth (`BtlBw`, the windowed maximum of
//! the delivery rate over 10 round trips, §4.1.1) and round-trip propagation time
//! (`RTprop`, the windowed minimum RTT over 10 s, §4.1.2), paced at `pacing_gain x BtlBw`
//! with a window of `cwnd_gain x BDP`, through the states Startup, Drain, ProbeBW (the
//! 8-phase gain cycle 1.25, 0.75, 1 x 6) and ProbeRTT (4 packets for 200 ms when RTprop
//! has not been refreshed for 10 s) (§4.3).
//!
//! Simplified, stated: losses do not change the window (v1's packet conservation during
//! recovery is left out; its model ignores loss), no application-limited samples (a bulk
//! flow never is), no idle restart, and the ProbeBW cycle advances once per `RTprop`
//! (leaving the 0.75 phase early once in flight falls to the BDP, §4.3.4.4).

use super::tcp::RateSample;
use super::{TcpCcState, TcpCongestion};
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};

/// BBR v1's constants (draft §4.2-4.3).
#[derive(Clone, Debug, PartialEq)]
pub struct BbrConfig {
    /// Startup's pacing and window gain, 2/ln 2 (§4.3.2.1).
    pub high_gain: f64,
    /// ProbeBW's window gain (§4.3.4.1: 2).
    pub cwnd_gain: f64,
    /// ProbeBW's pacing gains, one phase per RTprop (§4.3.4.1).
    pub pacing_gain_cycle: [f64; 8],
    /// The `BtlBw` max filter's window, in round trips (§4.1.1: 10).
    pub btl_bw_filter_rounds: u64,
    /// The `RTprop` min filter's window (§4.1.2: 10 s).
    pub rtprop_filter: TimeDelta,
    /// How long ProbeRTT holds the window at its minimum (§4.3.5: 200 ms).
    pub probe_rtt_duration: TimeDelta,
    /// The smallest window, in datagrams (§4.3.5: 4).
    pub min_pipe_cwnd_packets: i64,
    /// Startup ends after this many rounds without 25 % growth of `BtlBw` (§4.3.2.2: 3).
    pub full_bw_rounds: u32,
}

impl Default for BbrConfig {
    fn default() -> Self {
        BbrConfig {
            high_gain: 2.0 / std::f64::consts::LN_2,
            cwnd_gain: 2.0,
            pacing_gain_cycle: [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
            btl_bw_filter_rounds: 10,
            rtprop_filter: TimeDelta::from_secs(10),
            probe_rtt_duration: TimeDelta::from_ms(200),
            min_pipe_cwnd_packets: 4,
            full_bw_rounds: 3,
        }
    }
}

/// BBR's state (§4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BbrMode {
    /// Exponential growth at the high gain until `BtlBw` stops growing (§4.3.2).
    Startup,
    /// Pacing below `BtlBw` to drain the queue Startup built (§4.3.3).
    Drain,
    /// Cycling the pacing gain around `BtlBw`, one phase per `RTprop` (§4.3.4).
    ProbeBw,
    /// The window held at its minimum to refresh `RTprop` (§4.3.5).
    ProbeRtt,
}

/// BBR v1 (see the module documentation).
#[derive(Clone, Debug)]
pub struct Bbr {
    config: BbrConfig,
    s: TcpCcState,
    mode: BbrMode,
    /// Delivery-rate samples of the last rounds: (round, rate) (the max filter's content).
    bw_samples: Vec<(u64, DataRate)>,
    btl_bw: DataRate,
    rtprop: Option<TimeDelta>,
    rtprop_stamp: Timestamp,
    round_count: u64,
    next_round_delivered: DataSize,
    round_start: bool,
    filled_pipe: bool,
    full_bw: DataRate,
    full_bw_count: u32,
    pacing_gain: f64,
    cwnd_gain: f64,
    cycle_index: usize,
    cycle_stamp: Timestamp,
    probe_rtt_done: Option<Timestamp>,
    probe_rtt_round_done: bool,
    prior_cwnd: DataSize,
    in_flight: DataSize,
}

impl Bbr {
    /// BBR in Startup with `config`, for datagrams of `max_datagram` bytes.
    pub fn new(config: BbrConfig, max_datagram: DataSize) -> Bbr {
        let high_gain = config.high_gain;
        Bbr {
            s: TcpCcState::new(max_datagram),
            mode: BbrMode::Startup,
            bw_samples: Vec::new(),
            btl_bw: DataRate::ZERO,
            rtprop: None,
            rtprop_stamp: Timestamp::ZERO,
            round_count: 0,
            next_round_delivered: DataSize::ZERO,
            round_start: false,
            filled_pipe: false,
            full_bw: DataRate::ZERO,
            full_bw_count: 0,
            pacing_gain: high_gain,
            cwnd_gain: high_gain,
            cycle_index: 0,
            cycle_stamp: Timestamp::ZERO,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            prior_cwnd: DataSize::ZERO,
            in_flight: DataSize::ZERO,
            config,
        }
    }

    /// The current state.
    pub fn mode(&self) -> BbrMode {
        self.mode
    }
    /// `BtlBw`: the windowed maximum delivery rate (zero before a sample).
    pub fn btl_bw(&self) -> DataRate {
        self.btl_bw
    }
    /// `RTprop`: the windowed minimum RTT (`None` before a sample).
    pub fn rtprop(&self) -> Option<TimeDelta> {
        self.rtprop
    }

    fn min_cwnd(&self) -> DataSize {
        self.s.max_datagram * self.config.min_pipe_cwnd_packets
    }

    /// `gain x BDP` (§4.2.3.2), plus three datagrams for quantization; the initial window
    /// before there is a model.
    fn inflight(&self, gain: f64) -> DataSize {
        let Some(rtprop) = self.rtprop else {
            return TcpCcState::new(self.s.max_datagram).cwnd;
        };
        let bdp = (self.btl_bw * rtprop).as_bytes_f64();
        DataSize::from_bytes((gain * bdp) as i64) + self.s.max_datagram * 3
    }

    /// §4.1.1: the windowed max of the delivery rate over the last 10 rounds.
    fn update_btl_bw(&mut self, rs: &RateSample) {
        if rs.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = rs.total_delivered;
            self.round_count += 1;
            self.round_start = true;
        } else {
            self.round_start = false;
        }
        if let Some(rate) = rs.delivery_rate.filter(|r| r.is_finite()) {
            self.bw_samples.push((self.round_count, rate));
        }
        let keep_from = self.round_count.saturating_sub(self.config.btl_bw_filter_rounds - 1);
        self.bw_samples.retain(|(round, _)| *round >= keep_from);
        self.btl_bw = self.bw_samples.iter().map(|(_, r)| *r).max().unwrap_or(DataRate::ZERO);
    }

    /// §4.3.2.2: Startup ends when `BtlBw` stopped growing by 25 % for three rounds.
    fn check_full_pipe(&mut self) {
        if self.filled_pipe || !self.round_start {
            return;
        }
        if self.btl_bw.as_bps_f64() >= self.full_bw.as_bps_f64() * 1.25 {
            self.full_bw = self.btl_bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        if self.full_bw_count >= self.config.full_bw_rounds {
            self.filled_pipe = true;
        }
    }

    fn enter_probe_bw(&mut self, now: Timestamp) {
        self.mode = BbrMode::ProbeBw;
        self.cwnd_gain = self.config.cwnd_gain;
        // §4.3.4.3 starts at a random phase other than 0.75; a fixed one keeps runs
        // deterministic without a random source: the first cruising phase.
        self.cycle_index = 2;
        self.pacing_gain = self.config.pacing_gain_cycle[self.cycle_index];
        self.cycle_stamp = now;
    }

    /// §4.3.4.4: the next phase after an RTprop (the 0.75 phase leaves early once the
    /// queue it drains is gone).
    fn update_cycle(&mut self, now: Timestamp) {
        let rtprop = self.rtprop.unwrap_or(TimeDelta::from_ms(100));
        let elapsed = now - self.cycle_stamp > rtprop;
        let drained = self.pacing_gain < 1.0 && self.in_flight <= self.inflight(1.0);
        if elapsed || drained {
            self.cycle_index = (self.cycle_index + 1) % self.config.pacing_gain_cycle.len();
            self.pacing_gain = self.config.pacing_gain_cycle[self.cycle_index];
            self.cycle_stamp = now;
        }
    }

    /// §4.2.3.4-4.2.3.6: toward `cwnd_gain x BDP`; before the pipe is full, by what is
    /// acknowledged (like slow start) while below it or the initial window is not delivered.
    fn set_cwnd(&mut self, acked: DataSize, total_delivered: DataSize) {
        let target = self.inflight(self.cwnd_gain);
        let initial = TcpCcState::new(self.s.max_datagram).cwnd;
        let cwnd = if self.filled_pipe {
            (self.s.cwnd + acked).min(target)
        } else if self.s.cwnd < target || total_delivered < initial {
            self.s.cwnd + acked
        } else {
            self.s.cwnd
        };
        self.s.cwnd = cwnd.max(self.min_cwnd());
        if self.mode == BbrMode::ProbeRtt {
            self.s.cwnd = self.s.cwnd.min(self.min_cwnd());
        }
    }
}

impl TcpCongestion for Bbr {
    fn on_ack(&mut self, _sent: Timestamp, _bytes: DataSize, _now: Timestamp, _srtt: TimeDelta) {}

    fn on_rate_sample(&mut self, rs: &RateSample, now: Timestamp) {
        self.in_flight = rs.in_flight;
        self.update_btl_bw(rs);
        // §4.1.2: RTprop, refreshed by a lower RTT or after 10 s.
        let expired = now > self.rtprop_stamp + self.config.rtprop_filter;
        if self.rtprop.is_none_or(|r| rs.rtt <= r) || expired {
            self.rtprop = Some(rs.rtt);
            self.rtprop_stamp = now;
        }
        match self.mode {
            BbrMode::Startup => {
                self.check_full_pipe();
                if self.filled_pipe {
                    // §4.3.3: drain the queue Startup built.
                    self.mode = BbrMode::Drain;
                    self.pacing_gain = 1.0 / self.config.high_gain;
                    self.cwnd_gain = self.config.high_gain;
                }
            }
            BbrMode::Drain => {
                if self.in_flight <= self.inflight(1.0) {
                    self.enter_probe_bw(now);
                }
            }
            BbrMode::ProbeBw => self.update_cycle(now),
            BbrMode::ProbeRtt => {}
        }
        // §4.3.5: ProbeRTT when RTprop went 10 s without a refresh.
        if self.mode != BbrMode::ProbeRtt && expired {
            self.mode = BbrMode::ProbeRtt;
            self.pacing_gain = 1.0;
            self.prior_cwnd = self.s.cwnd;
            self.probe_rtt_done = None;
        }
        if self.mode == BbrMode::ProbeRtt {
            match self.probe_rtt_done {
                None if self.in_flight <= self.min_cwnd() => {
                    self.probe_rtt_done = Some(now + self.config.probe_rtt_duration);
                    self.probe_rtt_round_done = false;
                    self.next_round_delivered = rs.total_delivered;
                }
                Some(done) => {
                    if self.round_start {
                        self.probe_rtt_round_done = true;
                    }
                    if self.probe_rtt_round_done && now >= done {
                        self.rtprop_stamp = now;
                        self.s.cwnd = self.s.cwnd.max(self.prior_cwnd);
                        if self.filled_pipe {
                            self.enter_probe_bw(now);
                        } else {
                            self.mode = BbrMode::Startup;
                            self.pacing_gain = self.config.high_gain;
                            self.cwnd_gain = self.config.high_gain;
                        }
                    }
                }
                None => {}
            }
        }
        self.set_cwnd(rs.delivered.min(self.s.max_datagram), rs.total_delivered);
    }

    fn on_congestion_event(&mut self, _sent: Timestamp, _now: Timestamp) {}

    fn window(&self) -> DataSize {
        self.s.cwnd
    }
    fn ssthresh(&self) -> DataSize {
        self.s.ssthresh
    }

    /// §4.2.1: `pacing_gain x BtlBw`; before a sample, the initial window over 1 ms
    /// scaled by the gain (the draft's `InitialCwnd / SRTT` with no RTT yet).
    fn pacing_rate(&self) -> Option<DataRate> {
        if self.btl_bw > DataRate::ZERO {
            Some(self.btl_bw.scale(self.pacing_gain))
        } else {
            let rtt = self.rtprop.unwrap_or(TimeDelta::from_ms(1)).max(TimeDelta::from_ms(1));
            Some((self.s.cwnd / rtt).scale(self.config.high_gain))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cross::tcp::TcpSender;
    use crate::cross::testbed::dumbbell;
    use crate::cross::TcpCc;
    use crate::link::Link;

    #[test]
    fn bbr_finds_the_bottleneck_and_keeps_its_queue_small() {
        // 10 Mbps, 20 ms each way (BDP 50 kB), a deep 500 kB queue: CUBIC would fill it
        // (400 ms); BBR's model keeps about 1 BDP in flight beyond the pipe at most.
        let sender = Box::new(TcpSender::new(1, TcpCc::Bbr, Timestamp::ZERO, Timestamp::INFINITY));
        let mut bed = dumbbell(sender, 1, 10, 500_000, 20, 30);
        let (s, d) = (bed.sender, bed.bottleneck);
        let mut worst_queue = DataSize::ZERO;
        bed.run(Timestamp::from_secs_f64(30.0), |net, now| {
            if now > Timestamp::from_secs_f64(5.0) {
                worst_queue = worst_queue.max(net.get::<Link>(d).unwrap().backlog_bytes());
            }
        });
        let net = &bed.net;
        let link = net.get::<Link>(d).unwrap();
        let delivered = link.stats().delivered_bytes as f64;
        // At least 90 % of 30 s at 10 Mbps (37.5 MB), with no loss at all.
        assert!(delivered > 0.9 * 37.5e6, "{delivered}");
        assert_eq!(link.stats().dropped_packets(), 0);
        // After Startup and Drain, the queue stays within about a BDP (ProbeBW's 1.25 phase
        // and 2 BDP of window), far from the 500 kB CUBIC would fill.
        assert!(worst_queue.as_bytes() < 120_000, "worst queue {worst_queue:?}");
        let sender = net.get::<TcpSender>(s).unwrap();
        let bbr_rtt = sender.rtt().min.unwrap();
        assert!((40..=42).contains(&bbr_rtt.as_ms()), "{bbr_rtt:?}");
    }

    #[test]
    fn startup_then_drain_then_probe_bw_and_probe_rtt_every_10_s() {
        let mut b = Bbr::new(BbrConfig::default(), DataSize::from_bytes(1500));
        let mut delivered = DataSize::ZERO;
        let rtt = TimeDelta::from_ms(50);
        let mut now = Timestamp::ZERO;
        let mut modes = Vec::new();
        // A path that delivers 8 Mbps: one round trip per 50 ms, 50 kB per round; after
        // 2 s a standing queue makes every RTT 60 ms, so RTprop (50 ms) is not refreshed
        // and ProbeRTT comes 10 s after the last 50 ms sample.
        for k in 0..400 {
            let rtt = if k < 40 { rtt } else { TimeDelta::from_ms(60) };
            let prior = delivered;
            delivered += DataSize::from_bytes(50_000);
            now += rtt;
            let rs = RateSample {
                delivered: DataSize::from_bytes(50_000),
                interval: rtt,
                delivery_rate: Some(DataRate::from_mbps(8)),
                prior_delivered: prior,
                total_delivered: delivered,
                rtt,
                in_flight: DataSize::from_bytes(4 * 1500),
            };
            b.on_rate_sample(&rs, now);
            if modes.last() != Some(&b.mode()) {
                modes.push(b.mode());
            }
        }
        assert_eq!(b.btl_bw(), DataRate::from_mbps(8));
        // RTprop was refreshed by ProbeRTT (to the 60 ms the path now has).
        assert_eq!(b.rtprop(), Some(TimeDelta::from_ms(60)));
        assert_eq!(&modes[..3], &[BbrMode::Startup, BbrMode::Drain, BbrMode::ProbeBw]);
        assert!(modes.contains(&BbrMode::ProbeRtt), "{modes:?}");
        // In ProbeBW the window is 2 BDP (8 Mbps x 60 ms = 60 kB) + 3 datagrams.
        assert_eq!(b.inflight(2.0), DataSize::from_bytes(120_000 + 4_500));
    }
}
