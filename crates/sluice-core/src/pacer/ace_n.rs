//! ACE-N (ACE §4.1, Algorithm 1 in Appendix C): a token-bucket pacer whose bucket size
//! adapts, once per frame, to the bottleneck queue it predicts.
//!
//! **Token bucket.** Tokens refill at the token rate up to the bucket size. The token rate is
//! the rate given by [`Pacer::set_rates`], i.e. the congestion controller's pacing rate (GCC:
//! the target times its `pacing_factor`). A packet at the head of the queue leaves as soon as the tokens cover it,
//! so a frame that finds a full bucket leaves as one burst at the same `now` (the authors'
//! fork sends it at 100x the pacing rate; Sluice sends it at once, which gives the burst one
//! send time, as the packet-train estimator needs). Without tokens, packets wait for them,
//! i.e. are paced at exactly the token rate. Retransmissions go before video; probe clusters
//! are sent by the shared [`super::prober::Prober`] as in the other pacers; padding (when the padding rate is
//! non-zero) is sent as by the leaky bucket, only when the queue is empty.
//!
//! **Network view** (from every transport feedback report, [`Pacer::on_transport_feedback`]):
//! * per-packet RTTs: the sender's estimator's ([`crate::cc::rtt`]), each from the packet's
//!   own arrival time;
//! * queuing delay = standing RTT - min RTT, as in Copa (§4.1: "inspired by Copa");
//! * capacity from packet trains ([`super::packet_train`], the fork's estimator);
//! * predicted queue = queuing delay x capacity;
//! * losses: packets reported lost.
//!
//! **Bucket adaptation** ([`Pacer::on_frame`], once per frame, before its packets):
//! * Decrease (Algorithm 1 lines 18-26): if the predicted queue exceeds `T`, the bucket
//!   shrinks by the excess; if packets were lost since the previous frame, it halves (both,
//!   in that order, when both hold).
//! * Otherwise increase (lines 2-17): fast recovery to `min(B_historical, alpha x B_recent)`
//!   once the network queue has cleared after a decrease, additive increase otherwise; no
//!   increase at all while the bucket exceeds the previous frame (application limit).
//!
//! Choices for what the paper leaves open (each is a field of [`AceNConfig`]):
//! * `T` in packets becomes bytes as `T x packet_size_bytes`; the packet size is a full
//!   packet on the wire (Sluice's default: 1200 B payload + 60 B headers = 1260 B).
//! * Additive step: one full packet per frame. The smallest step that changes a burst by a
//!   whole packet; at 30 fps it adds ~38 kB/s, so the bucket reaches a typical 12 Mbps frame
//!   (~50 kB) in ~1.3 s. The paper calls additive increase "conservative probing".
//! * `alpha` = 0.8: the paper only says 0 < alpha < 1 and calls alpha x B_recent "a
//!   conservative estimate of the bottleneck's maximum capacity"; 0.8 leaves 20 % of the
//!   buffer for what the previous frame still has queued and for estimation error (TCP's
//!   multiplicative factors are 0.5 to 0.8; halving is already the loss response here).
//! * "Historical information unavailable" (line 3): no decrease is waiting for its fast
//!   recovery, or the queue has not cleared yet (Fig. 11: additive increase t6-t7 after the
//!   halving at t5-t6, fast recovery at t7-t8), or neither B_historical nor B_recent has been
//!   recorded. If only one of them is known, fast recovery uses that one. Fast recovery never
//!   lowers the bucket (it is part of the increase procedure).
//! * B_historical ("bucket size when the buffer was empty"): the bucket after every frame
//!   that saw the queue empty while no recovery was pending; it is not updated between a
//!   decrease and its recovery, so it keeps the size from before the congestion episode.
//! * B_recent ("queue size just before packet loss"): the largest per-packet queuing delay
//!   in the report that carries the loss, times the capacity: the queue at its fullest,
//!   i.e. when the drop-tail buffer overflowed (the standing queue can be much lower when
//!   one burst overflowed it).
//! * "Buffer empty": predicted queue <= `empty_queue_packets` (one packet): less than one
//!   packet is within the estimate's own error (serialisation of the sampled packet, jitter).
//! * Min RTT: minimum over the last 10 s of per-packet RTTs (Copa's window, also BBR's
//!   min-RTT expiry; Copa's max(10 s, 20 x min RTT) differs only for RTTs above 500 ms).
//! * Queuing delay: Copa's standing RTT, the minimum RTT of the packets that arrived within
//!   srtt/2 of the newest one (srtt: the sender's, an EWMA of the reports' samples with gain
//!   1/8), minus the min
//!   RTT. A frame's own burst queues up behind its first packet and drains within a few
//!   milliseconds when the link is faster than the token rate; the standing RTT ignores
//!   that (the first packet saw no queue) and rises only when the queue persists, as in
//!   ACE Fig. 25, where bursts spike the buffer while the predicted queue stays low until
//!   the bandwidth drops. With the newest packet's RTT alone (`standing_rtt_fraction` = 0)
//!   any report taken during a burst's drain reads the burst as a queue and shrinks the
//!   bucket: in `ace_n_bursts_frames_when_the_estimate_underrates_the_link`
//!   (tests/scenarios.rs) it sent 17 % of the frames as one burst instead of 57 %.
//! * Capacity before the first usable train: the token rate (the only rate known).
//! * One reaction per observation: the threshold decrease is applied once per new RTT sample
//!   (a frame that comes before the next report does not shrink the bucket again for the
//!   same sample); the halving reacts only to packets sent after the previous halving, like
//!   TCP's one reduction per window, so one overflow episode reported in two reports halves
//!   once.
//! * Bucket floor: one full packet (`packet_size_bytes`), so a paced packet never waits for
//!   tokens the bucket cannot hold. A packet larger than the bucket (only if the configured
//!   packet size is smaller than real packets) leaves when the bucket is full and the excess
//!   is paid from later refills (tokens go negative), so the long-run rate is still the token
//!   rate. No ceiling: the application limit keeps the bucket within one step of a recent
//!   frame, and fast recovery returns at most to an earlier bucket.
//! * Initial bucket: one 30 fps frame at the pacing rate (the fork: pacing_kbps / 30 / 8 *
//!   1000 bytes), set at the first `set_rates`; the bucket starts full.
//! * Probes and padding take tokens but never push them below zero: they follow their own
//!   rate, and charging them in full would stall the media after each probe cluster.
//! * Application limit: "the previous frame's size" is its size on the wire (the video
//!   packets enqueued after the previous `on_frame`), the unit of the bucket; the payload
//!   size given to `on_frame` stands in when no packets were enqueued.
//! * Queue-time limit: the libwebrtc drain rule of the leaky bucket (2 s), since the fork's
//!   token bucket lives inside libwebrtc's pacing controller: the token rate is raised so
//!   the queue drains before its average packet has waited 2 s.
//! * Token rate: the pacing rate the controller hands the pacer, "the sending rate
//!   determined by the CCA" (§4.1): GCC's pacing rate, libwebrtc's video default of 1.1x its
//!   target, as in the authors' WebRTC fork, whose bucket fills at the pacing controller's
//!   `pacing_kbps` (a development fork the project found, not published with the paper;
//!   `--set cc.pacing_factor=1.0` gives the other reading). §5.2's "configured to match the estimated bitrate" read as 1.0x makes
//!   the bucket fill exactly as fast as ABR's encoder spends on average, so tokens never
//!   accumulate for a burst and the queue is a random walk without drift: on the demo's
//!   Wi-Fi trace the pacer's P95 delay is 154 ms at 1.0x against 28 ms at 1.1x (webrtc's
//!   leaky bucket: 88 ms), the opposite of the paper's result. The ablation without ACE-N (`ace-c`) paces
//!   "with a pacing rate fixed to estimate bandwidth" (§6.4): 1.0x, on libwebrtc's leaky
//!   bucket, whose queue-time limit keeps it stable.

use super::core::{Due, PacerCore};
use super::packet_train::PacketTrainEstimator;
use super::padding::PaddingBudget;
use super::Pacer;
use crate::cc::rtt::{StandingRtt, WindowedMin};
use crate::cc::TransportPacketsFeedback;
use crate::columns::Columns;
use crate::packet::{Packet, PacketKind};
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};

/// Parameters of ACE-N (ACE §4.1; the module documentation says how each was chosen).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AceNConfig {
    /// Threshold `T` on the predicted queue, in packets (Sluice's default 10: the paper names
    /// none; §6.5 sweeps 7.5, 10, 12.5, 15).
    pub threshold_packets: f64,
    /// A full packet on the wire: converts packets to bytes and is the bucket floor.
    pub packet_size_bytes: i64,
    /// Additive-increase step per frame, in packets.
    pub additive_step_packets: f64,
    /// Fast-recovery factor on the queue size before the last loss (the paper: 0 < alpha < 1;
    /// 1, the queue before the loss itself, is accepted as the limit).
    pub alpha: f64,
    /// The network queue counts as empty at or below this many packets.
    pub empty_queue_packets: f64,
    /// Initial bucket, as time at the pacing rate (one 30 fps frame).
    pub initial_bucket_ms: f64,
    /// Window of the min-RTT filter.
    pub min_rtt_window_ms: f64,
    /// The standing RTT is the minimum over the packets that arrived within this fraction
    /// of the smoothed RTT (Copa: 0.5); 0 uses the newest packet's RTT alone.
    pub standing_rtt_fraction: f64,
    /// Packet trains shorter than this (at the receiver) give no capacity sample.
    pub capacity_min_span_ms: f64,
    /// Weight of the old capacity estimate in the moving average (fork: 0.9).
    pub capacity_smoothing: f64,
    /// Count the first packet's bytes in a train (see [`super::packet_train`]).
    pub capacity_count_first_packet: bool,
    /// Queue-time limit of the drain rule (libwebrtc: 2000 ms); 0 disables it.
    pub queue_time_limit_ms: f64,
}

impl Default for AceNConfig {
    fn default() -> Self {
        AceNConfig {
            threshold_packets: 10.0,
            packet_size_bytes: crate::packetizer::DEFAULT_MAX_PAYLOAD
                + crate::packet::PACKET_OVERHEAD.as_bytes(),
            additive_step_packets: 1.0,
            alpha: 0.8,
            empty_queue_packets: 1.0,
            initial_bucket_ms: 1000.0 / 30.0,
            min_rtt_window_ms: 10_000.0,
            standing_rtt_fraction: 0.5,
            capacity_min_span_ms: 4.0,
            capacity_smoothing: 0.9,
            capacity_count_first_packet: true,
            queue_time_limit_ms: 2000.0,
        }
    }
}

/// The branch of Algorithm 1 taken at a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BucketDecision {
    /// B += step (no history to recover to, or the queue has not cleared yet).
    AdditiveIncrease,
    /// B = max(B, min(B_historical, alpha * B_recent)) once the queue cleared.
    FastRecovery,
    /// The bucket already exceeds the previous frame: no increase.
    ApplicationLimited,
    /// Predicted queue above T: B -= predicted - T.
    ThresholdDecrease,
    /// Loss since the previous frame: B /= 2.
    LossHalving,
    /// Both decreases, threshold first.
    ThresholdDecreaseAndLossHalving,
}

/// Bytes are `bits * 1e6 / 8e6` of rate (bps) times time (us): the token credit is kept in
/// these units below one byte so refills never lose a fraction.
const CREDIT_PER_BYTE: i128 = 8_000_000;

/// The ACE-N pacer (see the module documentation).
pub struct AceNPacer {
    config: AceNConfig,
    /// `config.queue_time_limit_ms`, converted once (used per packet).
    queue_time_limit: TimeDelta,
    core: PacerCore,
    pacing_rate: DataRate,
    padding: PaddingBudget,
    /// Token rate after the queue-drain adjustment.
    adjusted_rate: DataRate,
    last_update: Timestamp,
    rates_set: bool,
    // Token bucket.
    bucket: DataSize,
    tokens: DataSize,
    /// Token credit below one byte, in 1/8e6 byte (0 <= credit < CREDIT_PER_BYTE).
    credit: i64,
    // Network view.
    min_rtt: WindowedMin,
    standing_rtt: StandingRtt,
    predicted_queue: Option<DataSize>,
    /// A new RTT sample arrived since the last frame.
    fresh_sample: bool,
    capacity: PacketTrainEstimator,
    // Algorithm 1 state.
    loss_pending: bool,
    /// Losses of packets sent before this time were already answered by a halving.
    last_halving: Option<Timestamp>,
    /// B_historical.
    bucket_when_empty: Option<DataSize>,
    /// B_recent.
    queue_before_loss: Option<DataSize>,
    /// A decrease happened and its fast recovery has not.
    recovery_pending: bool,
    /// Wire bytes of video enqueued since the last `on_frame`.
    frame_bytes: DataSize,
    /// Payload size given at the last `on_frame`.
    frame_payload: DataSize,
    previous_frame: Option<DataSize>,
    last_decision: Option<BucketDecision>,
}

impl AceNPacer {
    /// The pacer at `now`, at 300 kbps until the first `set_rates`.
    pub fn new(config: AceNConfig, now: Timestamp) -> Self {
        let capacity = PacketTrainEstimator::new(
            TimeDelta::from_ms_f64(config.capacity_min_span_ms),
            config.capacity_smoothing,
            config.capacity_count_first_packet,
        );
        let rate = DataRate::from_kbps(300);
        let mut p = AceNPacer {
            queue_time_limit: TimeDelta::from_ms_f64(config.queue_time_limit_ms),
            config,
            core: PacerCore::default(),
            pacing_rate: rate,
            padding: PaddingBudget::default(),
            adjusted_rate: rate,
            last_update: now,
            rates_set: false,
            bucket: DataSize::ZERO,
            tokens: DataSize::ZERO,
            credit: 0,
            min_rtt: WindowedMin::default(),
            standing_rtt: StandingRtt::default(),
            predicted_queue: None,
            fresh_sample: false,
            capacity,
            loss_pending: false,
            last_halving: None,
            bucket_when_empty: None,
            queue_before_loss: None,
            recovery_pending: false,
            frame_bytes: DataSize::ZERO,
            frame_payload: DataSize::ZERO,
            previous_frame: None,
            last_decision: None,
        };
        p.reset_bucket();
        p
    }

    /// The current bucket size.
    pub fn bucket(&self) -> DataSize {
        self.bucket
    }
    /// Tokens as of the last update.
    pub fn tokens(&self) -> DataSize {
        self.tokens
    }
    /// Queuing delay x capacity from the latest report (`None` before the first RTT sample).
    pub fn predicted_queue(&self) -> Option<DataSize> {
        self.predicted_queue
    }
    /// The packet-train capacity estimate.
    pub fn link_capacity(&self) -> Option<DataRate> {
        self.capacity.estimate()
    }
    /// The branch of Algorithm 1 taken at the latest frame.
    pub fn last_decision(&self) -> Option<BucketDecision> {
        self.last_decision
    }

    fn packets(&self, n: f64) -> DataSize {
        DataSize::from_bytes(self.config.packet_size_bytes).scale(n)
    }
    fn floor(&self) -> DataSize {
        DataSize::from_bytes(self.config.packet_size_bytes.max(1))
    }

    /// Initial bucket: one frame at the pacing rate, full of tokens.
    fn reset_bucket(&mut self) {
        let frame = self.pacing_rate * TimeDelta::from_ms_f64(self.config.initial_bucket_ms);
        self.bucket = frame.max(self.floor());
        self.tokens = self.bucket;
        self.credit = 0;
    }

    /// Refills tokens (and pays off padding debt) for the time since the last update.
    fn update_tokens(&mut self, now: Timestamp) {
        let elapsed = now.saturating_since(self.last_update);
        self.last_update = self.last_update.max(now);
        self.padding.pay(elapsed);
        if self.tokens >= self.bucket || !self.adjusted_rate.is_finite() {
            self.tokens = self.bucket;
            self.credit = 0;
        } else {
            let credit =
                self.adjusted_rate.as_bps() as i128 * elapsed.as_us() as i128 + self.credit as i128;
            let room = (self.bucket - self.tokens).as_bytes() as i128;
            let bytes = credit / CREDIT_PER_BYTE;
            if bytes >= room {
                self.tokens = self.bucket;
                self.credit = 0;
            } else {
                self.tokens += DataSize::from_bytes(bytes as i64);
                self.credit = (credit % CREDIT_PER_BYTE) as i64;
            }
        }
        self.update_adjusted_rate(now);
    }

    /// libwebrtc's drain rule (see the leaky bucket).
    fn update_adjusted_rate(&mut self, now: Timestamp) {
        self.adjusted_rate =
            self.pacing_rate.max(self.core.queue.drain_rate(self.queue_time_limit, now));
    }

    /// Tokens a packet of `size` needs before it may leave.
    fn tokens_needed(&self, size: DataSize) -> DataSize {
        size.min(self.bucket)
    }

    /// When the queue head may go.
    fn media_send_time(&self) -> Timestamp {
        let Some(head) = self.core.queue.peek() else { return Timestamp::INFINITY };
        let need = self.tokens_needed(head.size);
        if self.tokens >= need {
            return self.last_update;
        }
        let rate = self.adjusted_rate.as_bps() as i128;
        if rate <= 0 {
            return Timestamp::INFINITY;
        }
        let deficit =
            (need - self.tokens).as_bytes() as i128 * CREDIT_PER_BYTE - self.credit as i128;
        let wait_us = (deficit + rate - 1) / rate;
        self.last_update + TimeDelta::from_us(wait_us as i64)
    }

    fn padding_send_time(&self) -> Timestamp {
        self.padding.send_time(self.last_update, self.core.queue.is_empty())
    }

    /// Probes and padding take tokens, never below zero (module doc).
    fn charge_non_media(&mut self, size: DataSize) {
        self.tokens = (self.tokens - size).max(self.tokens.min(DataSize::ZERO));
    }

    /// Algorithm 1 for one frame.
    fn adapt_bucket(&mut self, frame_payload: DataSize, now: Timestamp) {
        let previous = if self.frame_bytes > DataSize::ZERO {
            Some(self.frame_bytes)
        } else if self.frame_payload > DataSize::ZERO {
            Some(self.frame_payload)
        } else {
            self.previous_frame
        };
        self.previous_frame = previous;
        self.frame_bytes = DataSize::ZERO;
        self.frame_payload = frame_payload;

        let threshold = self.packets(self.config.threshold_packets);
        let breach = self.fresh_sample && self.predicted_queue.is_some_and(|q| q > threshold);
        let loss = self.loss_pending;
        let empty = self
            .predicted_queue
            .is_some_and(|q| q <= self.packets(self.config.empty_queue_packets));
        let decision = if breach || loss {
            // Decrease (lines 18-26).
            if breach {
                let excess = self.predicted_queue.unwrap_or(DataSize::ZERO) - threshold;
                self.bucket -= excess;
            }
            if loss {
                self.bucket = self.bucket / 2;
                self.last_halving = Some(now);
            }
            self.recovery_pending = true;
            match (breach, loss) {
                (true, true) => BucketDecision::ThresholdDecreaseAndLossHalving,
                (true, false) => BucketDecision::ThresholdDecrease,
                _ => BucketDecision::LossHalving,
            }
        } else if previous.is_some_and(|p| self.bucket > p) {
            // Application limit (lines 13-17).
            BucketDecision::ApplicationLimited
        } else {
            let alpha_recent = self.queue_before_loss.map(|q| q.scale(self.config.alpha));
            let target = match (self.bucket_when_empty, alpha_recent) {
                (Some(h), Some(r)) => Some(h.min(r)),
                (h, r) => h.or(r),
            };
            match target {
                // Fast recovery (lines 8-11).
                Some(target) if self.recovery_pending && empty => {
                    self.bucket = self.bucket.max(target);
                    self.recovery_pending = false;
                    BucketDecision::FastRecovery
                }
                // Additive increase (lines 3-6).
                _ => {
                    self.bucket += self.packets(self.config.additive_step_packets);
                    BucketDecision::AdditiveIncrease
                }
            }
        };
        self.bucket = self.bucket.max(self.floor());
        self.tokens = self.tokens.min(self.bucket);
        if empty && !self.recovery_pending {
            self.bucket_when_empty = Some(self.bucket);
        }
        self.fresh_sample = false;
        self.loss_pending = false;
        self.last_decision = Some(decision);
    }
}

impl Pacer for AceNPacer {
    fn core(&self) -> &PacerCore {
        &self.core
    }
    fn core_mut(&mut self) -> &mut PacerCore {
        &mut self.core
    }
    fn set_rates(&mut self, pacing_rate: DataRate, padding_rate: DataRate, now: Timestamp) {
        self.update_tokens(now);
        self.pacing_rate = pacing_rate.max(DataRate::from_bps(1));
        self.padding.set_rate(padding_rate);
        if !self.rates_set {
            self.rates_set = true;
            self.reset_bucket();
        }
        self.update_adjusted_rate(now);
    }

    fn enqueue(&mut self, packet: Packet, now: Timestamp) {
        self.update_tokens(now);
        if packet.kind == PacketKind::Video {
            self.frame_bytes += packet.size;
        }
        self.core.enqueue(packet, now);
        self.update_adjusted_rate(now);
    }

    fn poll_send(&mut self, now: Timestamp) -> Option<Packet> {
        self.update_tokens(now);
        let (media_due, padding_due) =
            (self.media_send_time() <= now, self.padding_send_time() <= now);
        let p = match self.core.next_due(now, media_due, padding_due)? {
            Due::Probe(p) => {
                self.charge_non_media(p.size);
                p
            }
            Due::Media(p) => {
                self.tokens -= p.size;
                p
            }
            Due::Filler => {
                let size = self.padding.take_packet();
                self.charge_non_media(size);
                return Some(Packet::padding(size, now));
            }
        };
        self.update_adjusted_rate(now);
        Some(p)
    }

    fn poll_timeout(&self) -> Timestamp {
        self.core.prober.next_probe_time().min(self.media_send_time()).min(self.padding_send_time())
    }

    /// The token rate in effect, including the queue-drain adjustment (not just the
    /// configured `pacing_rate`).
    #[allow(clippy::misnamed_getters)]
    fn pacing_rate(&self) -> DataRate {
        self.adjusted_rate
    }

    fn on_frame(&mut self, size: DataSize, now: Timestamp) {
        self.update_tokens(now);
        self.adapt_bucket(size, now);
    }

    fn on_transport_feedback(&mut self, feedback: &TransportPacketsFeedback, now: Timestamp) {
        self.capacity.on_feedback(feedback);
        let capacity = self.capacity.estimate().unwrap_or(self.adjusted_rate);
        let received = feedback.received_by_arrival();
        let mut peak_queue = None;
        if let (Some(rtt), Some(newest)) = (feedback.rtt, received.last()) {
            let newest_arrival = newest.receive_time.unwrap_or(now);
            let window = TimeDelta::from_ms_f64(self.config.min_rtt_window_ms);
            let mut min_rtt = rtt;
            let mut max_rtt = rtt;
            for p in &received {
                let packet_rtt = p.rtt.unwrap_or(rtt);
                min_rtt = self.min_rtt.update(packet_rtt, now, window);
                max_rtt = max_rtt.max(packet_rtt);
                self.standing_rtt.push(p.receive_time.unwrap_or(now), packet_rtt);
            }
            // Copa's standing RTT: the smallest RTT among the packets that arrived within
            // `standing_rtt_fraction x srtt` of the newest one.
            let span = feedback.smoothed_rtt.unwrap_or(rtt) * self.config.standing_rtt_fraction;
            let standing = self.standing_rtt.update(newest_arrival, span).unwrap_or(rtt);
            self.predicted_queue = Some(capacity * (standing - min_rtt).max(TimeDelta::ZERO));
            peak_queue = Some(capacity * (max_rtt - min_rtt));
            self.fresh_sample = true;
        }
        let new_loss = feedback.packets.iter().any(|p| {
            p.receive_time.is_none() && self.last_halving.is_none_or(|t| p.sent.send_time >= t)
        });
        if new_loss {
            self.loss_pending = true;
            // B_recent: the fullest the queue was seen in the report that carries the loss.
            if let Some(q) = peak_queue.or(self.predicted_queue) {
                self.queue_before_loss = Some(q);
            }
        }
    }

    fn debug_columns(&self, out: &mut Columns) {
        out.size("pacer_bucket_bytes", Some(self.bucket));
        out.size("pacer_tokens_bytes", Some(self.tokens));
        out.size("pacer_predicted_queue_bytes", self.predicted_queue);
        out.rate("pacer_link_capacity_bps", self.capacity.estimate());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::rtt::RttEstimator;
    use crate::cc::{PacketResult, ProbeClusterConfig, SentPacket};
    use crate::columns::Value;
    use crate::pacer::PacerConfig;

    /// The pacer with the sender's RTT estimator beside it, as the sender feeds it.
    struct TestPacer {
        pacer: AceNPacer,
        rtt: RttEstimator,
    }
    impl From<AceNPacer> for TestPacer {
        fn from(pacer: AceNPacer) -> Self {
            TestPacer { pacer, rtt: RttEstimator::default() }
        }
    }
    impl std::ops::Deref for TestPacer {
        type Target = AceNPacer;
        fn deref(&self) -> &AceNPacer {
            &self.pacer
        }
    }
    impl std::ops::DerefMut for TestPacer {
        fn deref_mut(&mut self) -> &mut AceNPacer {
            &mut self.pacer
        }
    }

    fn columns(p: &AceNPacer) -> Columns {
        let mut c = Columns::default();
        p.debug_columns(&mut c);
        c
    }

    /// 1000 B packets, T = 10 packets = 10 kB, step 1 kB, alpha 0.5, token rate = target.
    fn config() -> AceNConfig {
        AceNConfig {
            packet_size_bytes: 1000,
            alpha: 0.5,
            queue_time_limit_ms: 0.0,
            ..Default::default()
        }
    }

    /// A pacer at 8 Mbps (1000 B per ms): initial bucket 8 Mbps x 33.333 ms = 33333 B.
    fn pacer() -> TestPacer {
        let mut p = AceNPacer::new(config(), Timestamp::ZERO);
        p.set_rates(DataRate::from_mbps(8), DataRate::ZERO, Timestamp::ZERO);
        assert_eq!(p.bucket(), DataSize::from_bytes(33_333));
        p.into()
    }

    fn video(size: i64, seq: u64) -> Packet {
        let mut p = Packet::padding(DataSize::from_bytes(size), Timestamp::ZERO);
        p.kind = PacketKind::Video;
        p.media_seq = seq;
        p
    }

    /// A frame of `packets` 1000 B packets at `ms`; returns the decision taken.
    fn frame(p: &mut TestPacer, packets: u64, ms: i64) -> BucketDecision {
        let now = Timestamp::from_ms(ms);
        p.on_frame(DataSize::from_bytes(packets as i64 * 940), now);
        for i in 0..packets {
            p.enqueue(video(1000, i), now);
        }
        p.last_decision().unwrap()
    }

    /// A packet in a report: (send time ms, arrival us or lost).
    fn result(seq: u64, send_ms: i64, arrival_us: Option<i64>) -> PacketResult {
        PacketResult {
            sent: SentPacket {
                transport_seq: seq,
                send_time: Timestamp::from_ms(send_ms),
                size: DataSize::from_bytes(1000),
                probe_cluster_id: None,
                is_padding: false,
                data_in_flight: DataSize::ZERO,
            },
            receive_time: arrival_us.map(Timestamp::from_us),
            rtt: None,
        }
    }

    /// A report reaching the sender at `ms` whose newest packet's RTT is `rtt_ms` (the hold
    /// time follows from it); `None`: a report that gives no RTT sample.
    fn report(p: &mut TestPacer, ms: i64, mut packets: Vec<PacketResult>, rtt_ms: Option<i64>) {
        let now = Timestamp::from_ms(ms);
        let mut rtt = None;
        if let Some(r) = rtt_ms {
            let newest = packets
                .iter()
                .filter(|p| p.receive_time.is_some())
                .fold(None::<&PacketResult>, |best, p| match best {
                    Some(b) if b.receive_time >= p.receive_time => Some(b),
                    _ => Some(p),
                })
                .expect("a report with an RTT sample has an arrival");
            let hold = now - newest.sent.send_time - TimeDelta::from_ms(r);
            rtt = p.rtt.on_feedback(&mut packets, hold, now);
        }
        let fb = TransportPacketsFeedback {
            feedback_time: now,
            packets,
            prior_in_flight: DataSize::ZERO,
            data_in_flight: DataSize::ZERO,
            rtt,
            smoothed_rtt: p.rtt.smoothed(),
        };
        p.pacer.on_transport_feedback(&fb, now);
    }

    /// A report at `ms` with one received packet whose RTT is `rtt_ms` (sent `rtt_ms` ago,
    /// arrived 10 ms ago), after the packets in `lost`.
    fn sample(p: &mut TestPacer, ms: i64, rtt_ms: i64, mut lost: Vec<PacketResult>) {
        lost.push(result(100, ms - rtt_ms, Some((ms - 10) * 1000)));
        report(p, ms, lost, Some(rtt_ms));
    }

    /// A 5-packet train arriving 1 ms apart (10 Mbps counting every packet), then an RTT
    /// sample of 40 ms: min RTT 40 ms, capacity 10 Mbps, predicted queue 0.
    fn calibrate(p: &mut TestPacer, ms: i64) {
        let train = (0..5).map(|i| result(i, ms - 50, Some((ms - 30 + i as i64) * 1000)));
        report(p, ms - 5, train.collect(), None);
        sample(p, ms, 40, vec![]);
        assert_eq!(p.link_capacity(), Some(DataRate::from_mbps(10)));
        assert_eq!(p.predicted_queue(), Some(DataSize::ZERO));
    }

    #[test]
    fn additive_increase_without_history() {
        let mut p = pacer();
        assert_eq!(frame(&mut p, 50, 0), BucketDecision::AdditiveIncrease);
        assert_eq!(p.bucket(), DataSize::from_bytes(34_333));
        assert_eq!(frame(&mut p, 50, 33), BucketDecision::AdditiveIncrease);
        assert_eq!(p.bucket(), DataSize::from_bytes(35_333));
        let s = columns(&p);
        assert_eq!(s.get("pacer_bucket_bytes"), Some(&Value::Int(35_333)));
        assert_eq!(s.get("pacer_predicted_queue_bytes"), Some(&Value::Null));
    }

    #[test]
    fn application_limit_blocks_the_increase() {
        let mut p = pacer();
        frame(&mut p, 50, 0); // 34333
        frame(&mut p, 10, 33); // previous frame 50 kB: 35333
                               // The previous frame was 10 kB on the wire, the bucket 35.3 kB: no increase.
        assert_eq!(frame(&mut p, 50, 66), BucketDecision::ApplicationLimited);
        assert_eq!(p.bucket(), DataSize::from_bytes(35_333));
        // After a 50 kB frame it grows again.
        assert_eq!(frame(&mut p, 50, 100), BucketDecision::AdditiveIncrease);
        assert_eq!(p.bucket(), DataSize::from_bytes(36_333));
    }

    #[test]
    fn threshold_breach_decreases_by_the_excess_once_per_sample() {
        let mut p = pacer();
        calibrate(&mut p, 100);
        assert_eq!(frame(&mut p, 50, 100), BucketDecision::AdditiveIncrease); // 34333
                                                                              // RTT 60 ms: 20 ms of queue at 10 Mbps = 25 kB, 15 kB above T = 10 kB.
        sample(&mut p, 150, 60, vec![]);
        assert_eq!(p.predicted_queue(), Some(DataSize::from_bytes(25_000)));
        assert_eq!(frame(&mut p, 50, 150), BucketDecision::ThresholdDecrease);
        assert_eq!(p.bucket(), DataSize::from_bytes(34_333 - 15_000));
        assert_eq!(columns(&p).get("pacer_predicted_queue_bytes"), Some(&Value::Int(25_000)));
        // No new sample before the next frame: no second decrease; the queue has not
        // cleared, so the increase is additive.
        assert_eq!(frame(&mut p, 50, 183), BucketDecision::AdditiveIncrease);
        assert_eq!(p.bucket(), DataSize::from_bytes(20_333));
        // A queue of exactly T is no breach.
        sample(&mut p, 200, 48, vec![]);
        assert_eq!(p.predicted_queue(), Some(DataSize::from_bytes(10_000)));
        assert_eq!(frame(&mut p, 50, 216), BucketDecision::AdditiveIncrease);
    }

    #[test]
    fn loss_halves_once_per_episode() {
        let mut p = pacer();
        frame(&mut p, 50, 0); // 34333
        report(&mut p, 60, vec![result(0, 10, None)], None);
        assert_eq!(frame(&mut p, 50, 66), BucketDecision::LossHalving);
        assert_eq!(p.bucket(), DataSize::from_bytes(17_166));
        // A packet sent before the halving reported lost later: no second halving.
        report(&mut p, 90, vec![result(1, 50, None)], None);
        assert_eq!(frame(&mut p, 50, 100), BucketDecision::AdditiveIncrease);
        assert_eq!(p.bucket(), DataSize::from_bytes(18_166));
        // A packet sent after it: halve again.
        report(&mut p, 120, vec![result(2, 66, None)], None);
        assert_eq!(frame(&mut p, 50, 133), BucketDecision::LossHalving);
        assert_eq!(p.bucket(), DataSize::from_bytes(9_083));
    }

    #[test]
    fn fast_recovery_to_min_of_history_and_alpha_times_queue_before_loss() {
        let mut p = pacer();
        calibrate(&mut p, 100);
        // Queue empty: additive increase, B_historical = 34333.
        assert_eq!(frame(&mut p, 50, 100), BucketDecision::AdditiveIncrease);
        // 25 kB queue and a loss in one report: B_recent = 25 kB.
        sample(&mut p, 150, 60, vec![result(10, 120, None)]);
        assert_eq!(frame(&mut p, 50, 150), BucketDecision::ThresholdDecreaseAndLossHalving);
        assert_eq!(p.bucket(), DataSize::from_bytes((34_333 - 15_000) / 2));
        // Queue still 10 kB: not cleared, additive increase.
        sample(&mut p, 200, 48, vec![]);
        assert_eq!(frame(&mut p, 50, 200), BucketDecision::AdditiveIncrease);
        assert_eq!(p.bucket(), DataSize::from_bytes(10_666));
        // Cleared: min(34333, 0.5 * 25000) = 12500.
        sample(&mut p, 250, 40, vec![]);
        assert_eq!(frame(&mut p, 50, 250), BucketDecision::FastRecovery);
        assert_eq!(p.bucket(), DataSize::from_bytes(12_500));
        // Recovered: additive increase from there.
        assert_eq!(frame(&mut p, 50, 283), BucketDecision::AdditiveIncrease);
        assert_eq!(p.bucket(), DataSize::from_bytes(13_500));
    }

    #[test]
    fn fast_recovery_without_loss_returns_to_the_bucket_of_the_empty_queue() {
        let mut p = pacer();
        calibrate(&mut p, 100);
        frame(&mut p, 50, 100); // 34333, queue empty
        sample(&mut p, 150, 60, vec![]);
        assert_eq!(frame(&mut p, 50, 150), BucketDecision::ThresholdDecrease); // 19333
        sample(&mut p, 200, 40, vec![]);
        assert_eq!(frame(&mut p, 50, 200), BucketDecision::FastRecovery);
        assert_eq!(p.bucket(), DataSize::from_bytes(34_333));
        // With alpha * B_recent above B_historical, B_historical wins.
        let mut p: TestPacer =
            AceNPacer::new(AceNConfig { alpha: 0.9, ..config() }, Timestamp::ZERO).into();
        p.set_rates(DataRate::from_mbps(8), DataRate::ZERO, Timestamp::ZERO);
        calibrate(&mut p, 100);
        frame(&mut p, 50, 100); // 34333
        sample(&mut p, 150, 80, vec![result(10, 120, None)]); // B_recent = 50 kB
        frame(&mut p, 50, 150);
        sample(&mut p, 200, 40, vec![]);
        assert_eq!(frame(&mut p, 50, 200), BucketDecision::FastRecovery);
        assert_eq!(p.bucket(), DataSize::from_bytes(34_333));
    }

    /// A report at `ms` of paced packets sent 1 ms apart from `first_send_ms`, each with
    /// 20 ms of propagation plus its queuing delay; the RTT sample is the newest packet's:
    /// 40 ms plus its queuing delay.
    fn paced_report(p: &mut TestPacer, ms: i64, first_send_ms: i64, queue_ms: &[i64]) {
        let packets: Vec<PacketResult> = queue_ms
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let send = first_send_ms + i as i64;
                result(200 + i as u64, send, Some((send + 20 + q) * 1000))
            })
            .collect();
        report(p, ms, packets, Some(40 + queue_ms.last().unwrap()));
    }

    #[test]
    fn predicted_queue_uses_the_standing_rtt() {
        let mut p = pacer();
        calibrate(&mut p, 100);
        // A transient queue (0 to 8 ms within 12 ms of arrivals, srtt/2 ~ 20 ms): the first
        // packet saw none, so no standing queue.
        paced_report(&mut p, 150, 100, &[0, 2, 4, 6, 8]);
        assert_eq!(p.predicted_queue(), Some(DataSize::ZERO));
        // Every packet in the window queued at least 12 ms: 12 ms x 10 Mbps = 15 kB.
        paced_report(&mut p, 200, 150, &[12, 14, 16, 18, 20]);
        assert_eq!(p.predicted_queue(), Some(DataSize::from_bytes(15_000)));
        // With a zero window the newest packet's RTT alone counts: 20 ms -> 25 kB.
        let mut raw: TestPacer =
            AceNPacer::new(AceNConfig { standing_rtt_fraction: 0.0, ..config() }, Timestamp::ZERO)
                .into();
        raw.set_rates(DataRate::from_mbps(8), DataRate::ZERO, Timestamp::ZERO);
        calibrate(&mut raw, 100);
        paced_report(&mut raw, 150, 100, &[0, 2, 4, 6, 8]);
        assert_eq!(raw.predicted_queue(), Some(DataSize::from_bytes(10_000)));
        paced_report(&mut raw, 200, 150, &[12, 14, 16, 18, 20]);
        assert_eq!(raw.predicted_queue(), Some(DataSize::from_bytes(25_000)));
    }

    #[test]
    fn bucket_never_drops_below_one_packet() {
        let mut p = pacer();
        calibrate(&mut p, 100);
        sample(&mut p, 150, 140, vec![]); // 125 kB predicted
        assert_eq!(frame(&mut p, 50, 150), BucketDecision::ThresholdDecrease);
        assert_eq!(p.bucket(), DataSize::from_bytes(1000));
        // Tokens were capped with it: one packet goes, the next waits 1 ms.
        assert!(p.poll_send(Timestamp::from_ms(150)).is_some());
        assert!(p.poll_send(Timestamp::from_ms(150)).is_none());
        assert_eq!(p.poll_timeout(), Timestamp::from_ms(151));
    }

    /// Drains the pacer, returning each packet's send time.
    fn drain(p: &mut AceNPacer, mut now: Timestamp) -> Vec<(Timestamp, Packet)> {
        let mut sent = Vec::new();
        for _ in 0..100_000 {
            while let Some(pkt) = p.poll_send(now) {
                sent.push((now, pkt));
            }
            let next = p.poll_timeout();
            if !next.is_finite() {
                break;
            }
            assert!(next > now, "timeout did not advance");
            now = next;
        }
        sent
    }

    #[test]
    fn packets_with_tokens_leave_together_then_wait_for_tokens() {
        let mut p = pacer();
        for i in 0..10 {
            p.enqueue(video(1000, i), Timestamp::ZERO);
        }
        let first: Vec<_> = std::iter::from_fn(|| p.poll_send(Timestamp::ZERO)).collect();
        assert_eq!(first.len(), 10);
        assert_eq!(p.tokens(), DataSize::from_bytes(23_333));
        for i in 10..60 {
            p.enqueue(video(1000, i), Timestamp::ZERO);
        }
        let sent = drain(&mut p, Timestamp::ZERO);
        // 23 more at t = 0 (333 B of tokens left), then one per 1000 B of tokens at 1 B/us.
        assert_eq!(sent.iter().filter(|(t, _)| *t == Timestamp::ZERO).count(), 23);
        assert_eq!(sent[23].0, Timestamp::from_us(667));
        assert_eq!(sent[24].0, Timestamp::from_us(1667));
        assert_eq!(sent.last().unwrap().0, Timestamp::from_us(667 + 26 * 1000));
    }

    #[test]
    fn without_tokens_the_release_rate_is_the_token_rate() {
        // 7 Mbps does not divide a 1000 B packet into whole microseconds: the sub-byte credit
        // carries over, so send times never drift.
        let mut p = AceNPacer::new(config(), Timestamp::ZERO);
        p.set_rates(DataRate::from_mbps(7), DataRate::ZERO, Timestamp::ZERO);
        let b0 = p.bucket().as_bytes(); // 7 Mbps x 33.333 ms = 29166 B
        assert_eq!(b0, 29_166);
        let n = 1000i64;
        for i in 0..n {
            p.enqueue(video(1000, i as u64), Timestamp::ZERO);
        }
        let sent = drain(&mut p, Timestamp::ZERO);
        assert_eq!(sent.len(), n as usize);
        for (k, (t, _)) in sent.iter().enumerate() {
            // Packet k (0-based) needs (k + 1) * 1000 B of tokens in all.
            let deficit = ((k as i64 + 1) * 1000 - b0).max(0) as i128;
            let expected = (deficit * 8_000_000 + 7_000_000 - 1) / 7_000_000;
            assert_eq!(t.as_us() as i128, expected, "packet {k}");
        }
        let (first_paced, last) = (sent[29].0, sent.last().unwrap().0);
        let rate = DataSize::from_bytes((n - 30) * 1000) / (last - first_paced);
        assert!((rate.as_bps() - 7_000_000).abs() < 10, "{rate:?}");
    }

    #[test]
    fn retransmissions_go_first() {
        let mut p = pacer();
        p.enqueue(video(1000, 1), Timestamp::ZERO);
        let mut rtx = video(1000, 0);
        rtx.kind = PacketKind::Retransmission;
        p.enqueue(rtx, Timestamp::ZERO);
        assert_eq!(p.poll_send(Timestamp::ZERO).unwrap().media_seq, 0);
    }

    #[test]
    fn probes_go_out_with_or_without_tokens() {
        let cluster = |id| ProbeClusterConfig {
            id,
            at_time: Timestamp::ZERO,
            target_rate: DataRate::from_mbps(12),
            target_duration: TimeDelta::from_ms(15),
            min_probes: 5,
        };
        // Without media nothing is probed (libwebrtc's prober waits for a packet); one media
        // packet starts the cluster, padding makes up the rest at the cluster's rate.
        let mut p = pacer();
        p.create_probe_cluster(cluster(1), Timestamp::ZERO);
        assert!(drain(&mut p, Timestamp::ZERO).is_empty());
        p.enqueue(video(1200, 0), Timestamp::ZERO);
        let sent = drain(&mut p, Timestamp::ZERO);
        // 15 ms at 12 Mbps = 22.5 kB = 19 packets of 1200 B, 0.8 ms apart.
        assert_eq!(sent.len(), 19);
        assert!(sent.iter().all(|(_, s)| s.probe_cluster_id == Some(1)));
        assert_eq!(sent[0].1.kind, PacketKind::Video);
        assert_eq!(sent[1].0, Timestamp::from_us(800));
        // Tokens used up by media: the probe takes the next queued media packet anyway.
        let mut p = pacer();
        for i in 0..40 {
            p.enqueue(video(1000, i), Timestamp::ZERO);
        }
        assert_eq!(std::iter::from_fn(|| p.poll_send(Timestamp::ZERO)).count(), 33);
        p.create_probe_cluster(cluster(2), Timestamp::ZERO);
        p.enqueue(video(1000, 40), Timestamp::ZERO);
        let probe = p.poll_send(Timestamp::ZERO).unwrap();
        assert_eq!((probe.kind, probe.probe_cluster_id), (PacketKind::Video, Some(2)));
        assert_eq!(p.tokens(), DataSize::ZERO);
    }

    #[test]
    fn padding_only_when_idle() {
        let mut p = pacer();
        p.set_rates(DataRate::from_mbps(8), DataRate::from_kbps(800), Timestamp::ZERO);
        p.enqueue(video(1000, 1), Timestamp::ZERO);
        assert_eq!(p.poll_send(Timestamp::ZERO).unwrap().kind, PacketKind::Video);
        let mut now = Timestamp::ZERO;
        let mut padding = DataSize::ZERO;
        while now < Timestamp::from_ms(1000) {
            now = p.poll_timeout();
            while let Some(pkt) = p.poll_send(now) {
                assert_eq!(pkt.kind, PacketKind::Padding);
                padding += pkt.size;
            }
        }
        let rate = padding / (now - Timestamp::ZERO);
        assert!(rate.as_kbps_f64() > 600.0 && rate.as_kbps_f64() < 900.0, "{rate:?}");
    }

    #[test]
    fn config_from_json() {
        let c: PacerConfig =
            serde_json::from_str(r#"{"kind": "ace-n", "threshold_packets": 12.5}"#).unwrap();
        let PacerConfig::AceN(ref a) = c else { panic!("{c:?}") };
        assert_eq!(a.threshold_packets, 12.5);
        assert_eq!(a.packet_size_bytes, 1260);
        assert!(serde_json::from_str::<PacerConfig>(r#"{"kind": "ace-n", "t": 3}"#).is_err());
    }
}
