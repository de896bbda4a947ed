//! The sender: frame clock -> encoder controller -> encoder -> packetizer -> pacer ->
//! network, with the send history, NACK-driven retransmission, keyframe requests and the
//! congestion controller fed by transport feedback.
//!
//! Sans-IO: `handle_feedback` and `handle_timeout` take input, `poll_transmit` yields the
//! datagrams to put on the wire, `poll_timeout` says when to call again, and `poll_event`
//! yields what happened (for metrics).

use crate::cc::rtt::RttEstimator;
use crate::cc::{
    CongestionController, NetworkControlUpdate, PacketResult, SentPacket,
    TransportPacketsFeedback,
};
use crate::columns::Columns;
use crate::encoder::{Encoder, FrameRequest};
use crate::encoder_controller::{EncoderController, FrameContext};
use crate::pacer::Pacer;
use crate::packet::{Datagram, Feedback, Packet, PacketKind, TransportFeedback};
use crate::packetizer::Packetizer;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use std::collections::VecDeque;

/// Sender parameters that are not part of a scheme's components.
#[derive(Clone, Debug)]
pub struct SenderConfig {
    pub fps: f64,
    pub max_payload: DataSize,
    /// How long sent packets are kept for retransmission.
    pub history: TimeDelta,
    /// How long send times are kept for matching transport feedback (libwebrtc's
    /// TransportFeedbackAdapter: 60 s). Must outlast the worst queueing delay, or feedback
    /// for delayed packets is lost and the congestion controller goes blind.
    pub feedback_history: TimeDelta,
    /// Keyframe requests closer together than this are ignored (libwebrtc: 300 ms).
    pub min_keyframe_interval: TimeDelta,
    /// Stop capturing at this time (the session length).
    pub capture_until: Timestamp,
}

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig {
            fps: 30.0,
            max_payload: DataSize::from_bytes(crate::packetizer::DEFAULT_MAX_PAYLOAD),
            history: TimeDelta::from_secs(2),
            feedback_history: TimeDelta::from_secs(60),
            min_keyframe_interval: TimeDelta::from_ms(300),
            capture_until: Timestamp::INFINITY,
        }
    }
}

/// What the sender reports for metrics.
#[derive(Clone, Debug, PartialEq)]
pub enum SenderEvent {
    FrameEncoded {
        frame_id: u64,
        capture_time: Timestamp,
        encode_start: Timestamp,
        encode_end: Timestamp,
        size: DataSize,
        is_keyframe: bool,
        qp: f64,
        target_rate: DataRate,
        packet_count: u16,
        /// The complexity level the encoder controller chose (`None`: the encoder's own).
        complexity: Option<crate::encoder::Complexity>,
        /// The controller's size prediction relative to the average frame (ACE-C's rho-hat).
        predicted_relative_size: Option<f64>,
    },
    PacketSent {
        kind: PacketKind,
        frame_id: u64,
        size: DataSize,
        time: Timestamp,
    },
}

#[derive(Debug)]
struct SentRecord {
    sent: SentPacket,
    reported: bool,
}

#[derive(Debug)]
struct MediaRecord {
    packet: Packet,
    last_sent: Timestamp,
}

/// The send history, indexed by transport and by media sequence number.
#[derive(Debug, Default)]
struct SendHistory {
    transport_base: u64,
    transport: VecDeque<SentRecord>,
    media_base: u64,
    media: VecDeque<MediaRecord>,
    in_flight: DataSize,
}

impl SendHistory {
    fn on_sent(&mut self, p: &Packet, sent: SentPacket) {
        debug_assert_eq!(sent.transport_seq, self.transport_base + self.transport.len() as u64);
        self.in_flight += sent.size;
        self.transport.push_back(SentRecord { sent, reported: false });
        if p.kind == PacketKind::Video {
            if self.media.is_empty() {
                self.media_base = p.media_seq;
            }
            if p.media_seq == self.media_base + self.media.len() as u64 {
                self.media.push_back(MediaRecord { packet: p.clone(), last_sent: sent.send_time });
            }
        } else if p.kind == PacketKind::Retransmission {
            if let Some(r) = self.media_mut(p.media_seq) {
                r.last_sent = sent.send_time;
            }
        }
    }

    fn media_mut(&mut self, media_seq: u64) -> Option<&mut MediaRecord> {
        let idx = media_seq.checked_sub(self.media_base)?;
        self.media.get_mut(idx as usize)
    }

    fn report(&mut self, transport_seq: u64) -> Option<SentPacket> {
        let idx = transport_seq.checked_sub(self.transport_base)? as usize;
        let r = self.transport.get_mut(idx)?;
        if !r.reported {
            r.reported = true;
            self.in_flight -= r.sent.size;
        }
        Some(r.sent)
    }

    fn prune(&mut self, now: Timestamp, keep: TimeDelta, keep_transport: TimeDelta) {
        while let Some(r) = self.transport.front() {
            if now - r.sent.send_time <= keep_transport {
                break;
            }
            if !r.reported {
                self.in_flight -= r.sent.size;
            }
            self.transport.pop_front();
            self.transport_base += 1;
        }
        while let Some(r) = self.media.front() {
            if now - r.packet.send_time <= keep {
                break;
            }
            self.media.pop_front();
            self.media_base += 1;
        }
    }
}

/// One captured frame waiting for its encode to finish.
struct PendingFrame {
    ready: Timestamp,
    size: DataSize,
    packets: Vec<Packet>,
}

pub struct Sender {
    config: SenderConfig,
    cc: Box<dyn CongestionController>,
    pacer: Box<dyn Pacer>,
    encoder: Box<dyn Encoder>,
    controller: Box<dyn EncoderController>,
    packetizer: Packetizer,
    history: SendHistory,
    next_transport_seq: u64,
    frame_index: u64,
    encoder_free_at: Timestamp,
    pending: VecDeque<PendingFrame>,
    force_keyframe: bool,
    last_keyframe: Option<Timestamp>,
    last_pacing_rates: (DataRate, DataRate),
    /// The congestion window of the controller's latest update (`None`: no window).
    window: Option<DataSize>,
    /// When the last packet left (for the keepalive while the window is full).
    last_send: Timestamp,
    rtt: RttEstimator,
    /// Retransmissions of the last second (time, size), for the rate limit.
    rtx_window: VecDeque<(Timestamp, DataSize)>,
    rtx_window_bytes: DataSize,
    events: VecDeque<SenderEvent>,
    start: Timestamp,
}

/// Retransmissions may use at most the target rate over this window (libwebrtc's
/// retransmission rate limiter in RtpTransportControllerSend: 1 s at the target rate).
const RTX_RATE_WINDOW: TimeDelta = TimeDelta::from_secs(1);
/// While the congestion window is full, a padding packet goes out this long after the last
/// send, so that feedback keeps coming even if the packets in flight were all lost
/// (libwebrtc's PacingController: kCongestedPacketInterval, 500 ms).
const KEEPALIVE_INTERVAL: TimeDelta = TimeDelta::from_ms(500);
/// The keepalive: one byte of padding payload (libwebrtc sends a 1-byte padding packet).
const KEEPALIVE_SIZE: DataSize = DataSize::from_bytes(crate::packet::PACKET_OVERHEAD.as_bytes() + 1);

impl Sender {
    pub fn new(
        config: SenderConfig,
        cc: Box<dyn CongestionController>,
        pacer: Box<dyn Pacer>,
        encoder: Box<dyn Encoder>,
        controller: Box<dyn EncoderController>,
        now: Timestamp,
    ) -> Self {
        let packetizer = Packetizer::new(0, config.max_payload);
        let mut s = Sender {
            config,
            cc,
            pacer,
            encoder,
            controller,
            packetizer,
            history: SendHistory::default(),
            next_transport_seq: 0,
            frame_index: 0,
            encoder_free_at: now,
            pending: VecDeque::new(),
            force_keyframe: false,
            last_keyframe: None,
            last_pacing_rates: (DataRate::ZERO, DataRate::ZERO),
            window: None,
            last_send: now,
            rtt: RttEstimator::default(),
            rtx_window: VecDeque::new(),
            rtx_window_bytes: DataSize::ZERO,
            events: VecDeque::new(),
            start: now,
        };
        s.sync_controller_outputs(now);
        s
    }

    fn next_capture_time(&self) -> Timestamp {
        let t = self.start + TimeDelta::from_secs_f64(self.frame_index as f64 / self.config.fps);
        if t >= self.config.capture_until {
            Timestamp::INFINITY
        } else {
            t
        }
    }

    /// The share of the target rate left for the encoder once per-packet overhead (RTP
    /// header + UDP/IP) is paid, assuming full packets, as libwebrtc's overhead-aware
    /// allocation does.
    fn media_rate(&self) -> DataRate {
        let payload = self.config.max_payload.as_bytes_f64();
        let overhead = crate::packet::PACKET_OVERHEAD.as_bytes_f64();
        self.cc.update().encoder_rate.scale(payload / (payload + overhead))
    }

    /// The congestion controller's latest update.
    pub fn control_update(&self) -> NetworkControlUpdate {
        self.cc.update()
    }
    /// Bytes sent and not yet reported by feedback (nor given up on).
    pub fn bytes_in_flight(&self) -> DataSize {
        self.history.in_flight
    }
    pub fn pacing_rate(&self) -> DataRate {
        self.pacer.pacing_rate()
    }
    pub fn pacer_queue_size(&self) -> DataSize {
        self.pacer.queue_size()
    }
    pub fn pacer_oldest_queue_time(&self, now: Timestamp) -> TimeDelta {
        self.pacer.oldest_queue_time(now)
    }
    pub fn smoothed_rtt(&self) -> Option<TimeDelta> {
        self.rtt.smoothed()
    }
    /// The encoder's failure, if it failed (see [`Encoder::failure`]).
    pub fn encoder_failure(&self) -> Option<&str> {
        self.encoder.failure()
    }
    /// The controller's and the pacer's debug columns (`cc_*`, `pacer_*`).
    pub fn debug_columns(&self, out: &mut Columns) {
        self.cc.debug_columns(out);
        self.pacer.debug_columns(out);
    }

    /// Applies the controller's update: rates to the pacer, the window to the sender, probe
    /// requests to the pacer.
    fn sync_controller_outputs(&mut self, now: Timestamp) {
        self.cc.on_pacer_queue(self.pacer.queue_size());
        let update = self.cc.update();
        let rates = (update.pacing_rate, update.padding_rate);
        if rates != self.last_pacing_rates {
            self.pacer.set_rates(rates.0, rates.1, now);
            self.last_pacing_rates = rates;
        }
        self.window = update.congestion_window;
        while let Some(cluster) = self.cc.poll_probe_cluster(now) {
            self.pacer.create_probe_cluster(cluster, now);
        }
    }

    fn capture_frame(&mut self, capture_time: Timestamp) {
        let analysis = if self.controller.wants_analysis() {
            self.encoder.analyze(self.frame_index)
        } else {
            None
        };
        let ctx = FrameContext {
            now: capture_time,
            frame_index: self.frame_index,
            fps: self.config.fps,
            cc_target: self.media_rate(),
            cc_signals: self.cc.signals(),
            analysis,
        };
        let plan = self.controller.plan(&ctx);
        let rate_control = plan.rate_control;
        let request = FrameRequest {
            frame_index: self.frame_index,
            capture_time,
            rate_control,
            force_keyframe: self.force_keyframe,
            complexity: plan.complexity,
            planned_size_scale: plan.planned_size_scale,
        };
        let frame = self.encoder.encode(&request);
        self.controller.on_frame_encoded(&frame, &plan);
        self.force_keyframe = false;
        if frame.is_keyframe {
            self.last_keyframe = Some(capture_time);
        }
        let encode_start = capture_time.max(self.encoder_free_at);
        let encode_end = encode_start + frame.encode_time;
        self.encoder_free_at = encode_end;
        let frame_id = self.frame_index;
        let ref_frame = if frame.is_keyframe { None } else { frame_id.checked_sub(1) };
        let packets = self.packetizer.packetize(
            frame_id,
            frame.size,
            frame.is_keyframe,
            ref_frame,
            encode_end,
        );
        self.events.push_back(SenderEvent::FrameEncoded {
            frame_id,
            capture_time,
            encode_start,
            encode_end,
            size: frame.size,
            is_keyframe: frame.is_keyframe,
            qp: frame.qp,
            target_rate: rate_control.target_rate,
            packet_count: packets.len() as u16,
            complexity: plan.complexity,
            predicted_relative_size: plan.predicted_relative_size,
        });
        self.pending.push_back(PendingFrame { ready: encode_end, size: frame.size, packets });
        self.frame_index += 1;
    }

    /// Time-driven work: captures, encodes finishing, controller timers.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        if self.cc.poll_timeout() <= now {
            self.cc.handle_timeout(now);
        }
        while self.next_capture_time() <= now {
            let t = self.next_capture_time();
            self.capture_frame(t);
        }
        while self.pending.front().is_some_and(|f| f.ready <= now) {
            if let Some(frame) = self.pending.pop_front() {
                self.pacer.on_frame(frame.size, now);
                for p in frame.packets {
                    self.pacer.enqueue(p, now);
                }
            }
        }
        self.history.prune(now, self.config.history, self.config.feedback_history);
        self.sync_controller_outputs(now);
    }

    /// Feedback from the receiver.
    pub fn handle_feedback(&mut self, feedback: Feedback, now: Timestamp) {
        match feedback {
            Feedback::Transport(fb) => self.on_transport_feedback(&fb, now),
            Feedback::Nack { media_seqs, .. } => self.on_nack(&media_seqs, now),
            Feedback::KeyframeRequest { .. } => {
                let recent =
                    self.last_keyframe.is_some_and(|t| now - t < self.config.min_keyframe_interval);
                if !recent {
                    self.force_keyframe = true;
                }
            }
        }
        self.sync_controller_outputs(now);
    }

    fn on_transport_feedback(&mut self, fb: &TransportFeedback, now: Timestamp) {
        let prior_in_flight = self.history.in_flight;
        let mut packets = Vec::with_capacity(fb.packets.len());
        for report in &fb.packets {
            let Some(sent) = self.history.report(report.transport_seq) else { continue };
            packets.push(PacketResult { sent, receive_time: report.arrival_time, rtt: None });
        }
        let rtt = self.rtt.on_feedback(&mut packets, fb.hold_time, now);
        if packets.is_empty() {
            return;
        }
        let feedback = TransportPacketsFeedback {
            feedback_time: now,
            packets,
            prior_in_flight,
            data_in_flight: self.history.in_flight,
            rtt,
            smoothed_rtt: self.rtt.smoothed(),
        };
        self.cc.on_transport_feedback(&feedback, now);
        self.pacer.on_transport_feedback(&feedback, now);
    }

    fn on_nack(&mut self, media_seqs: &[u64], now: Timestamp) {
        // Do not resend a packet more often than once per RTT (libwebrtc's RTX rate guard).
        let min_gap =
            self.rtt.smoothed().unwrap_or(TimeDelta::from_ms(100)).min(TimeDelta::from_ms(500));
        while self.rtx_window.front().is_some_and(|(t, _)| now - *t > RTX_RATE_WINDOW) {
            if let Some((_, size)) = self.rtx_window.pop_front() {
                self.rtx_window_bytes -= size;
            }
        }
        let budget = self.cc.update().target_rate * RTX_RATE_WINDOW;
        for &seq in media_seqs {
            let Some(record) = self.history.media_mut(seq) else { continue };
            if now - record.last_sent < min_gap && record.last_sent != record.packet.send_time {
                continue;
            }
            if self.rtx_window_bytes + record.packet.size > budget {
                break; // over the retransmission rate limit: the rest waits for the next NACK
            }
            let mut rtx = record.packet.clone();
            rtx.kind = PacketKind::Retransmission;
            record.last_sent = now;
            self.rtx_window.push_back((now, rtx.size));
            self.rtx_window_bytes += rtx.size;
            self.pacer.enqueue(rtx, now);
        }
    }

    /// Whether the congestion window lets another packet go: bytes in flight below the
    /// window (so the window is exceeded by less than one packet).
    fn window_open(&self) -> bool {
        self.window.is_none_or(|w| self.history.in_flight < w)
    }

    /// When a keepalive goes out if the window stays full.
    fn keepalive_time(&self) -> Timestamp {
        self.last_send + KEEPALIVE_INTERVAL
    }

    /// The next datagram to put on the wire at `now`, if any. Changes after any `handle_*`
    /// call and as time passes ([`poll_timeout`](Self::poll_timeout)).
    pub fn poll_transmit(&mut self, now: Timestamp) -> Option<Datagram> {
        let mut p = if self.window_open() {
            self.pacer.poll_send(now)?
        } else if self.keepalive_time() <= now {
            Packet::padding(KEEPALIVE_SIZE, now)
        } else {
            return None;
        };
        self.last_send = now;
        p.transport_seq = self.next_transport_seq;
        self.next_transport_seq += 1;
        p.send_time = now;
        let sent = SentPacket {
            transport_seq: p.transport_seq,
            send_time: now,
            size: p.size,
            probe_cluster_id: p.probe_cluster_id,
            is_padding: p.kind == PacketKind::Padding,
            data_in_flight: self.history.in_flight + p.size,
        };
        self.history.on_sent(&p, sent);
        self.cc.on_packet_sent(&sent, now);
        self.events.push_back(SenderEvent::PacketSent {
            kind: p.kind,
            frame_id: p.frame_id,
            size: p.size,
            time: now,
        });
        Some(Datagram::Media(p))
    }

    pub fn poll_timeout(&self) -> Timestamp {
        let pending = self.pending.front().map_or(Timestamp::INFINITY, |f| f.ready);
        // A full window waits for feedback (an input), or for the keepalive.
        let send = if self.window_open() { self.pacer.poll_timeout() } else { self.keepalive_time() };
        self.next_capture_time().min(pending).min(send).min(self.cc.poll_timeout())
    }

    pub fn poll_event(&mut self) -> Option<SenderEvent> {
        self.events.pop_front()
    }
}
