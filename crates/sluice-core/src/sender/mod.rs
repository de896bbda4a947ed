//! The sender: frame clock -> encoder controller -> encoder -> packetizer -> pacer ->
//! network, with the send history, NACK-driven retransmission, keyframe requests and the
//! congestion controller fed by transport feedback.
//!
//! Frames: every capture slot (source index) goes to the encoder controller, which encodes
//! it or skips it; the controller may also ask for encodes of earlier slots (held or dropped
//! frames, [`EncoderController::poll_encode`]) and for frames to be purged from the pacer
//! ([`SenderCommand`]). Every encode gets a fresh, increasing frame id; a frame references
//! the previous encode unless its plan names an older one. Encodes are submitted to an
//! [`EncoderDriver`] and picked up when they finish, so encoding never blocks pacing. The
//! controller hears each frame's service in the pacer (its first packet reaching the head of
//! the queue, its last leaving) and each purge. Media sequence numbers are assigned when a
//! video packet leaves, so frames purged before they left leave no gap for the receiver to
//! NACK.
//!
//! A frame-dropping bottleneck (Co-RTV, `link/frame_drop.rs`) reports the first frame `D` it
//! drops: the sender then purges every frame from `D` on from the pacer and the encoder's
//! output, refuses their retransmission, keeps the losses of their packets away from the
//! congestion controller (they are not congestion losses of the network), and stamps every
//! frame it packetizes from then on with `D` as its latest re-encoded frame number
//! ([`Packet::latest_reencoded`]), so the bottleneck forwards the new generation. The encoder
//! controller hears the report after that and decides what to re-encode. Packets lost for any
//! other reason are reported to the encoder controller once per frame
//! ([`FrameEvent::Lost`], from NACKs and transport feedback), before any retransmission, so a
//! controller that re-references instead of retransmitting (Salsify) can purge first.
//!
//! Congestion control: after every event the controller's [`NetworkControlUpdate`] sets the
//! pacer's rates and the congestion window; the sender never sends while the bytes in flight
//! (sent, and neither it nor a later packet reported yet) reach the window, except a keepalive
//! every 500 ms.
//!
//! Sans-IO: `handle_feedback` and `handle_timeout` take input, `poll_transmit` yields the
//! datagrams to put on the wire, `poll_timeout` says when to call again, and `poll_event`
//! yields what happened (for metrics).

use crate::cc::rtt::RttEstimator;
use crate::cc::{
    CongestionController, NetworkControlUpdate, PacketResult, SentPacket, TransportPacketsFeedback,
};
use crate::columns::Columns;
use crate::encoder::{EncoderDriver, FrameRequest};
use crate::encoder_controller::{
    EncoderController, FrameContext, FrameDecision, FrameEvent, FramePlan, PacerState,
    SenderCommand, TransportState,
};
use crate::pacer::Pacer;
use crate::packet::{Datagram, Feedback, Packet, PacketKind, TransportFeedback};
use crate::packetizer::Packetizer;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};
use std::collections::{BTreeSet, VecDeque};

mod frames;
mod history;
mod retransmit;

use frames::FramePipeline;
use history::SendHistory;
use retransmit::Retransmitter;

/// Sender parameters that are not part of a scheme's components.
#[derive(Clone, Debug)]
pub struct SenderConfig {
    /// Capture frame rate, frames per second (default 30).
    pub fps: f64,
    /// Largest payload per packet (default 1200 bytes).
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
    /// Header bytes on the wire per media packet: RTP header and extensions plus UDP/IP
    /// ([`crate::packet::PACKET_OVERHEAD`], more for a scheme with more header extensions).
    pub packet_overhead: DataSize,
    /// Header bytes per packet the encoder's allocation sets aside (`None`: `packet_overhead`;
    /// [`crate::scheme::SchemeConfig::allocation_overhead_bytes`]).
    pub allocation_overhead: Option<DataSize>,
    /// The application's highest video bitrate: the controller's target and every frame's
    /// rate control are capped at it (`None`: no cap).
    pub max_video_rate: Option<DataRate>,
    /// The flow id its packets carry (0: the session's media flow; a competing media flow
    /// has its own).
    pub flow: crate::packet::FlowId,
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
            packet_overhead: crate::packet::PACKET_OVERHEAD,
            allocation_overhead: None,
            max_video_rate: None,
            flow: 0,
        }
    }
}

/// What the sender reports for metrics.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "event")]
pub enum SenderEvent {
    /// A frame finished encoding (one per encode).
    FrameEncoded {
        /// The encode's frame id.
        frame_id: u64,
        /// The capture slot it encodes.
        source_index: u64,
        /// The capture time it was encoded with.
        capture_time: Timestamp,
        /// When the encode started.
        encode_start: Timestamp,
        /// When the encode finished.
        encode_end: Timestamp,
        /// Encoded size (payload, no packet headers).
        size: DataSize,
        /// Whether it was coded as a keyframe.
        is_keyframe: bool,
        /// Average quantiser.
        #[serde(with = "crate::columns::float_or_null")]
        qp: f64,
        /// The rate control's target (after the application's cap).
        target_rate: DataRate,
        /// Packets it was split into.
        packet_count: u16,
        /// The frame it references (`None` for a keyframe).
        reference: Option<u64>,
        /// The encoder controller's per-frame columns.
        columns: Columns,
    },
    /// The controller skipped a capture slot (it may still encode it later).
    FrameSkipped {
        /// The skipped capture slot.
        source_index: u64,
        /// Its capture time.
        capture_time: Timestamp,
        /// The controller's reason (`"pause"`, `"frame-dropper"`, ...).
        reason: crate::columns::Name,
    },
    /// The frame's first packet reached the head of the pacer queue at `head_at` and its
    /// last left at `done_at`.
    FrameServiced {
        /// The frame's id.
        frame_id: u64,
        /// When its first packet reached the head of the pacer queue.
        head_at: Timestamp,
        /// When its last packet left the pacer.
        done_at: Timestamp,
    },
    /// What was left of the frame in the pacer (or encoder) was purged.
    FramePurged {
        /// The purged frame's id.
        frame_id: u64,
        /// When it was purged.
        time: Timestamp,
    },
    /// A bottleneck node's report reached the sender.
    BottleneckReport {
        /// The report as the bottleneck sent it.
        report: crate::packet::BottleneckReport,
        /// When it reached the sender.
        received: Timestamp,
    },
    /// A packet left the sender.
    PacketSent {
        /// Video, retransmission or padding.
        kind: PacketKind,
        /// Its frame (0 for padding).
        frame_id: u64,
        /// Its on-wire size.
        size: DataSize,
        /// When it was sent.
        time: Timestamp,
    },
}

/// Where a sender's capture clock and frame numbering stand. A restarted sending process
/// (live mode's sender-restart fault) starts with fresh state but keeps the camera's clock
/// and numbers its frames after the ones it sent before ([`Sender::continue_timeline`]), so
/// that the records of both lifetimes stay apart and line up with the source.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timeline {
    /// Capture time of source index 0.
    pub start: Timestamp,
    /// The next source index to capture.
    pub next_slot: u64,
    /// The id the next encode gets.
    pub next_frame_id: u64,
    /// When capture stops.
    pub capture_until: Timestamp,
}

/// The sending side of a session (see the module documentation).
pub struct Sender {
    config: SenderConfig,
    cc: Box<dyn CongestionController>,
    pacer: Box<dyn Pacer>,
    encoder: Box<dyn EncoderDriver>,
    controller: Box<dyn EncoderController>,
    packetizer: Packetizer,
    history: SendHistory,
    frames: FramePipeline,
    retransmitter: Retransmitter,
    next_media_seq: u64,
    /// The next capture slot (source index).
    next_slot: u64,
    force_keyframe: bool,
    last_keyframe: Option<Timestamp>,
    last_pacing_rates: (DataRate, DataRate),
    /// The congestion window of the controller's latest update (`None`: no window).
    window: Option<DataSize>,
    /// When the last packet left (for the keepalive while the window is full).
    last_send: Timestamp,
    /// The congestion window held the pacer's packets back at the last poll.
    window_blocked: bool,
    rtt: RttEstimator,
    events: VecDeque<SenderEvent>,
    start: Timestamp,
    /// Why the sender cannot go on (besides the encoder's own failure).
    failure: Option<String>,
}

/// A controller hands out finitely many orders per event; the bound only stops a faulty one
/// from hanging the sender.
const MAX_ORDERS: usize = 4096;
/// While the congestion window is full, a padding packet goes out this long after the last
/// send, so that feedback keeps coming even if the packets in flight were all lost
/// (libwebrtc's PacingController: kCongestedPacketInterval, 500 ms).
const KEEPALIVE_INTERVAL: TimeDelta = TimeDelta::from_ms(500);
/// The keepalive: one byte of padding payload (libwebrtc sends a 1-byte padding packet).
const KEEPALIVE_SIZE: DataSize =
    DataSize::from_bytes(crate::packet::PACKET_OVERHEAD.as_bytes() + 1);

impl Sender {
    /// A sender of these components starting at `now`, whose first capture is at `now`.
    pub fn new(
        config: SenderConfig,
        cc: Box<dyn CongestionController>,
        pacer: Box<dyn Pacer>,
        encoder: Box<dyn EncoderDriver>,
        controller: Box<dyn EncoderController>,
        now: Timestamp,
    ) -> Self {
        let packetizer =
            Packetizer::with_overhead(config.flow, config.max_payload, config.packet_overhead);
        let mut s = Sender {
            config,
            cc,
            pacer,
            encoder,
            controller,
            packetizer,
            history: SendHistory::default(),
            frames: FramePipeline::default(),
            retransmitter: Retransmitter::default(),
            next_media_seq: 0,
            next_slot: 0,
            force_keyframe: false,
            last_keyframe: None,
            last_pacing_rates: (DataRate::ZERO, DataRate::ZERO),
            window: None,
            last_send: now,
            window_blocked: false,
            rtt: RttEstimator::default(),
            events: VecDeque::new(),
            start: now,
            failure: None,
        };
        s.sync_controller_outputs(now);
        s.pacer.set_capture_schedule(s.next_capture_time(), s.frame_interval());
        s
    }

    /// Where this sender's capture clock and frame numbering stand.
    pub fn timeline(&self) -> Timeline {
        Timeline {
            start: self.start,
            next_slot: self.next_slot,
            next_frame_id: self.frames.next_frame_id(),
            capture_until: self.config.capture_until,
        }
    }

    /// Continues `t` (a fresh sender replacing one that stopped, at `now`): the next capture
    /// is the first slot of `t`'s clock at or after `now`, and frame ids go on from `t`'s.
    /// Call it on a sender that has not captured yet.
    pub fn continue_timeline(&mut self, t: Timeline, now: Timestamp) {
        self.start = t.start;
        self.config.capture_until = t.capture_until;
        self.frames.continue_from(t.next_frame_id);
        let elapsed_slots = ((now - t.start).as_secs_f64() * self.config.fps).floor().max(0.0);
        let mut slot = t.next_slot.max((elapsed_slots as u64).saturating_sub(1));
        while self.capture_time_of(slot) < now {
            slot += 1;
        }
        self.next_slot = slot;
        self.pacer.set_capture_schedule(self.next_capture_time(), self.frame_interval());
    }

    fn capture_time_of(&self, slot: u64) -> Timestamp {
        self.start + TimeDelta::from_secs_f64(slot as f64 / self.config.fps)
    }

    fn frame_interval(&self) -> TimeDelta {
        TimeDelta::from_secs_f64(1.0 / self.config.fps)
    }

    fn next_capture_time(&self) -> Timestamp {
        let t = self.capture_time_of(self.next_slot);
        if t >= self.config.capture_until {
            Timestamp::INFINITY
        } else {
            t
        }
    }

    /// `rate`, at most the application's cap.
    fn capped(&self, rate: DataRate) -> DataRate {
        self.config.max_video_rate.map_or(rate, |cap| rate.min(cap))
    }

    /// The media share of the controller's encoder rate (`update`: its latest): what is left
    /// for the encoder once per-packet overhead (RTP header + UDP/IP, or what the allocation
    /// sets aside) is paid, assuming full packets, as libwebrtc's overhead-aware allocation
    /// does.
    fn media_rate(&self, update: &NetworkControlUpdate) -> DataRate {
        let payload = self.config.max_payload.as_bytes_f64();
        let overhead =
            self.config.allocation_overhead.unwrap_or(self.config.packet_overhead).as_bytes_f64();
        update.encoder_rate.scale(payload / (payload + overhead))
    }

    /// The congestion controller's latest update.
    pub fn control_update(&self) -> NetworkControlUpdate {
        self.cc.update()
    }
    /// Bytes sent and not yet reported by feedback, directly or by a later packet's report
    /// (nor given up on).
    pub fn bytes_in_flight(&self) -> DataSize {
        self.history.in_flight()
    }
    /// The pacer's current rate (including any queue-drain adjustment).
    pub fn pacing_rate(&self) -> DataRate {
        self.pacer.pacing_rate()
    }
    /// Bytes waiting in the pacer.
    pub fn pacer_queue_size(&self) -> DataSize {
        self.pacer.queue_size()
    }
    /// How long the oldest packet in the pacer has waited at `now`.
    pub fn pacer_oldest_queue_time(&self, now: Timestamp) -> TimeDelta {
        self.pacer.oldest_queue_time(now)
    }
    /// The smoothed RTT from transport feedback (`None` before the first sample).
    pub fn smoothed_rtt(&self) -> Option<TimeDelta> {
        self.rtt.smoothed()
    }
    /// Why the sender cannot go on: the encoder failed ([`crate::encoder::Encoder::failure`])
    /// or produced a frame too large to send.
    pub fn failure(&self) -> Option<&str> {
        self.encoder.failure().or(self.failure.as_deref())
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

    /// What the encoder controller sees for a decision about `source_index`.
    fn context(
        &self,
        now: Timestamp,
        source_index: u64,
        analysis: Option<crate::encoder::FrameAnalysis>,
    ) -> FrameContext {
        // Built at every poll of the controller: the controller's update is read once.
        let update = self.cc.update();
        FrameContext {
            now,
            source_index,
            capture_time: self.capture_time_of(source_index),
            fps: self.config.fps,
            cc_target: self.capped(self.media_rate(&update)),
            cwnd_reduce_ratio: update.cwnd_reduce_ratio,
            cc_signals: self.cc.signals(),
            pacer: PacerState {
                queue_bytes: self.pacer.queue_size(),
                queue_packets: self.pacer.queue_packets(),
                oldest_queue_time: self.pacer.oldest_queue_time(now),
            },
            transport: TransportState {
                congestion_window: self.window,
                in_flight: self.history.in_flight(),
            },
            last_frame_id: self.frames.last_submitted(),
            analysis,
        }
    }

    fn capture_slot(&mut self, capture_time: Timestamp) {
        let source_index = self.next_slot;
        self.next_slot += 1;
        self.pacer.set_capture_schedule(self.next_capture_time(), self.frame_interval());
        let analysis = if self.controller.wants_analysis() {
            self.encoder.analyze(source_index)
        } else {
            None
        };
        let ctx = self.context(capture_time, source_index, analysis);
        match self.controller.plan(&ctx) {
            FrameDecision::Encode(plan) => {
                self.submit(source_index, capture_time, plan, capture_time)
            }
            FrameDecision::Skip { reason } => {
                self.events.push_back(SenderEvent::FrameSkipped {
                    source_index,
                    capture_time,
                    reason: reason.into(),
                });
                self.controller.on_frame_event(&FrameEvent::Skipped { source_index }, capture_time);
            }
        }
    }

    fn submit(
        &mut self,
        source_index: u64,
        capture_time: Timestamp,
        plan: FramePlan,
        now: Timestamp,
    ) {
        let frame_id = self.frames.next_frame_id();
        let reference = plan.reference.or(self.frames.last_submitted());
        let mut rate_control = plan.rate_control;
        if let Some(cap) = self.config.max_video_rate {
            // A controller that asks for more than the application allows gets its plan
            // scaled down, target, VBV rate and buffer alike.
            if rate_control.target_rate > cap {
                let f = cap.as_bps_f64() / rate_control.target_rate.as_bps_f64();
                rate_control.target_rate = cap;
                rate_control.vbv_max_rate = rate_control.vbv_max_rate.scale(f);
                rate_control.vbv_buffer = rate_control.vbv_buffer.scale(f);
            }
        }
        let request = FrameRequest {
            frame_id,
            source_index,
            capture_time,
            reference: plan.reference,
            rate_control,
            force_keyframe: self.force_keyframe,
            complexity: plan.complexity,
            planned_size_scale: plan.planned_size_scale,
        };
        self.force_keyframe = false;
        self.frames.submit(plan, reference);
        self.encoder.submit(request, now);
    }

    /// Packetizes the frames the encoder has finished and hands them to the pacer.
    fn collect_encoded(&mut self, now: Timestamp) {
        while let Some(done) = self.encoder.poll_finished(now) {
            let frame = done.frame;
            let Some(sub) = self.frames.finished(frame.frame_id) else { break };
            self.controller.on_frame_encoded(&frame, &sub.plan);
            if frame.is_keyframe {
                self.last_keyframe = Some(done.request.capture_time);
            }
            let reference = if frame.is_keyframe { None } else { sub.reference };
            let Some(mut packets) = self.packetizer.packetize(
                frame.frame_id,
                frame.size,
                frame.is_keyframe,
                reference,
                done.finished,
            ) else {
                self.failure = Some(format!(
                    "the encoder produced a frame of {} bytes, more than {} packets of {} bytes \
                     (max_payload_bytes)",
                    frame.size.as_bytes(),
                    crate::packetizer::MAX_PACKETS_PER_FRAME,
                    self.packetizer.max_payload().as_bytes()
                ));
                return;
            };
            self.events.push_back(SenderEvent::FrameEncoded {
                frame_id: frame.frame_id,
                source_index: done.request.source_index,
                capture_time: done.request.capture_time,
                encode_start: done.started,
                encode_end: done.finished,
                size: frame.size,
                is_keyframe: frame.is_keyframe,
                qp: frame.qp,
                target_rate: done.request.rate_control.target_rate,
                packet_count: packets.len() as u16,
                reference,
                columns: sub.plan.columns,
            });
            if self.frames.take_purged_on_finish(frame.frame_id) {
                self.events
                    .push_back(SenderEvent::FramePurged { frame_id: frame.frame_id, time: now });
                self.controller
                    .on_frame_event(&FrameEvent::Purged { frame_id: frame.frame_id }, now);
                continue;
            }
            for p in &mut packets {
                p.latest_reencoded = self.frames.drops.latest_reencoded();
            }
            self.pacer.on_frame(frame.size, now);
            self.frames.enqueued(frame.frame_id, packets.len() as u16, now);
            for p in packets {
                self.pacer.enqueue(p, now);
            }
        }
    }

    /// Encodes and commands the controller wants now: encodes, then commands, then the
    /// encodes a command made possible (a controller holds its re-encodes back until its
    /// purge ran, or they would be purged too).
    fn poll_controller(&mut self, now: Timestamp) {
        self.poll_encodes(now);
        if self.run_commands(now) {
            self.poll_encodes(now);
        }
        self.collect_encoded(now);
    }

    /// Submits the encodes the controller asks for.
    fn poll_encodes(&mut self, now: Timestamp) {
        if let Some(latest) = self.next_slot.checked_sub(1) {
            for _ in 0..MAX_ORDERS {
                let ctx = self.context(now, latest, None);
                let Some(order) = self.controller.poll_encode(&ctx) else { break };
                self.submit(order.source_index, order.capture_time, order.plan, now);
            }
        }
    }

    /// Carries out the controller's commands; true if there was any.
    fn run_commands(&mut self, now: Timestamp) -> bool {
        let mut ran = false;
        for _ in 0..MAX_ORDERS {
            match self.controller.poll_command() {
                Some(SenderCommand::PurgeFrames { from_frame_id }) => {
                    self.purge(from_frame_id, now);
                    ran = true;
                }
                None => break,
            }
        }
        ran
    }

    /// A frame-dropping bottleneck drops every frame from `d` on that was encoded before the
    /// sender heard of it: purge them here too, keep their losses from the congestion
    /// controller, refuse their retransmission, and stamp the next generation with `d`.
    fn on_bottleneck_drop(&mut self, d: u64, now: Timestamp) {
        let next = self.frames.next_frame_id();
        if self.frames.drops.record(d, next) && d < next {
            self.purge(d, now);
            self.history.forget_in_flight(d);
        }
    }

    /// Tells the controller, once per frame, that a packet of these frames was lost (frames a
    /// bottleneck dropped are not news); then runs the commands it gives.
    fn notify_lost(&mut self, frames: impl IntoIterator<Item = u64>, now: Timestamp) {
        let lost = self.frames.newly_lost(frames);
        for &f in &lost {
            self.controller.on_frame_event(&FrameEvent::Lost { frame_id: f }, now);
        }
        if !lost.is_empty() {
            self.run_commands(now);
        }
    }

    /// Removes frames `from_frame_id..` from the pacer and the encoder's output.
    fn purge(&mut self, from_frame_id: u64, now: Timestamp) {
        self.pacer.purge(&mut |p: &Packet| {
            matches!(p.kind, PacketKind::Video | PacketKind::Retransmission)
                && p.frame_id >= from_frame_id
        });
        for frame_id in self.frames.purge(from_frame_id, now) {
            self.events.push_back(SenderEvent::FramePurged { frame_id, time: now });
            self.controller.on_frame_event(&FrameEvent::Purged { frame_id }, now);
        }
    }

    /// A video packet of `frame_id` left the pacer at `now`.
    fn on_video_sent(&mut self, frame_id: u64, now: Timestamp) {
        let Some(head_at) = self.frames.video_sent(frame_id, now) else { return };
        self.events.push_back(SenderEvent::FrameServiced { frame_id, head_at, done_at: now });
        self.controller
            .on_frame_event(&FrameEvent::Serviced { frame_id, head_at, done_at: now }, now);
        self.poll_controller(now);
    }

    /// Time-driven work: captures, encodes finishing, controller timers.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        if self.cc.poll_timeout() <= now {
            self.cc.handle_timeout(now);
        }
        while self.next_capture_time() <= now {
            let t = self.next_capture_time();
            self.capture_slot(t);
        }
        self.collect_encoded(now);
        self.poll_controller(now);
        self.history.prune(now, self.config.history, self.config.feedback_history);
        if let Some(oldest) = self.history.oldest_frame() {
            self.frames.forget_purged_before(oldest);
        }
        self.sync_controller_outputs(now);
    }

    /// Feedback from the receiver.
    pub fn handle_feedback(&mut self, feedback: Feedback, now: Timestamp) {
        match feedback {
            Feedback::Transport(fb) => self.on_transport_feedback(&fb, now),
            Feedback::Nack { media_seqs, .. } => {
                let frames: BTreeSet<u64> =
                    media_seqs.iter().filter_map(|&s| self.history.frame_of_media(s)).collect();
                self.notify_lost(frames, now);
                self.on_nack(&media_seqs, now)
            }
            Feedback::KeyframeRequest { .. } => {
                let recent =
                    self.last_keyframe.is_some_and(|t| now - t < self.config.min_keyframe_interval);
                if !recent {
                    self.force_keyframe = true;
                }
            }
            Feedback::Bottleneck(report) => {
                if let Some(d) = report.drop_from {
                    self.on_bottleneck_drop(d, now);
                }
                self.cc.on_bottleneck_report(&report, now);
                self.controller.on_bottleneck_report(&report, now);
                self.events.push_back(SenderEvent::BottleneckReport { report, received: now });
            }
        }
        self.poll_controller(now);
        self.sync_controller_outputs(now);
    }

    fn on_transport_feedback(&mut self, fb: &TransportFeedback, now: Timestamp) {
        let prior_in_flight = self.history.in_flight();
        let mut packets = Vec::with_capacity(fb.packets.len());
        let mut lost = BTreeSet::new();
        self.history.ack_through(fb.packets.iter().map(|r| r.transport_seq));
        for report in &fb.packets {
            let received = report.arrival_time.is_some();
            let Some((sent, frame)) = self.history.report(report.transport_seq, received) else {
                continue;
            };
            if report.arrival_time.is_none() {
                if let Some(f) = frame {
                    if self.frames.drops.contains(f) {
                        continue; // dropped by the bottleneck on purpose: not a network loss
                    }
                    lost.insert(f);
                }
            }
            packets.push(PacketResult { sent, receive_time: report.arrival_time, rtt: None });
        }
        self.notify_lost(lost, now);
        let rtt = self.rtt.on_feedback(&mut packets, fb.hold_time, now);
        if packets.is_empty() {
            return;
        }
        let feedback = TransportPacketsFeedback {
            feedback_time: now,
            packets,
            prior_in_flight,
            data_in_flight: self.history.in_flight(),
            rtt,
            smoothed_rtt: self.rtt.smoothed(),
        };
        self.cc.on_transport_feedback(&feedback, now);
        self.pacer.on_transport_feedback(&feedback, now);
    }

    fn on_nack(&mut self, media_seqs: &[u64], now: Timestamp) {
        let frames = &self.frames;
        let rtx = self.retransmitter.on_nack(
            &mut self.history,
            media_seqs,
            |f| frames.is_purged(f),
            self.rtt.smoothed(),
            self.cc.update().target_rate,
            now,
        );
        for p in rtx {
            self.pacer.enqueue(p, now);
        }
    }

    /// Whether the congestion window lets another packet go: bytes in flight below the
    /// window (so the window is exceeded by less than one packet).
    fn window_open(&self) -> bool {
        self.window.is_none_or(|w| self.history.in_flight() < w)
    }

    /// When a keepalive goes out if the window stays full.
    fn keepalive_time(&self) -> Timestamp {
        self.last_send + KEEPALIVE_INTERVAL
    }

    /// The next datagram to put on the wire at `now`, if any. Changes after any `handle_*`
    /// call and as time passes ([`poll_timeout`](Self::poll_timeout)).
    pub fn poll_transmit(&mut self, now: Timestamp) -> Option<Datagram> {
        let open = self.window_open();
        if open == self.window_blocked {
            self.window_blocked = !open;
            self.pacer.set_congested(!open, now);
        }
        let mut p = if open {
            self.pacer.poll_send(now)?
        } else if self.keepalive_time() <= now {
            Packet::padding(KEEPALIVE_SIZE, now)
        } else {
            return None;
        };
        self.last_send = now;
        if p.kind == PacketKind::Video {
            p.media_seq = self.next_media_seq;
            self.next_media_seq += 1;
        }
        p.transport_seq = self.history.next_transport_seq();
        // Padding and probes are made by the pacer with no flow of their own.
        p.flow = self.config.flow;
        p.send_time = now;
        let sent = SentPacket {
            transport_seq: p.transport_seq,
            send_time: now,
            size: p.size,
            probe_cluster_id: p.probe_cluster_id,
            is_padding: p.kind == PacketKind::Padding,
            data_in_flight: self.history.in_flight() + p.size,
        };
        self.history.on_sent(&p, sent);
        self.cc.on_packet_sent(&sent, now);
        self.events.push_back(SenderEvent::PacketSent {
            kind: p.kind,
            frame_id: p.frame_id,
            size: p.size,
            time: now,
        });
        if p.kind == PacketKind::Video {
            self.on_video_sent(p.frame_id, now);
        }
        Some(Datagram::Media(p))
    }

    /// When [`handle_timeout`](Self::handle_timeout) or [`poll_transmit`](Self::poll_transmit)
    /// is next needed.
    pub fn poll_timeout(&self) -> Timestamp {
        let pending = self.encoder.poll_timeout();
        // A full window waits for feedback (an input), or for the keepalive.
        let send =
            if self.window_open() { self.pacer.poll_timeout() } else { self.keepalive_time() };
        self.next_capture_time().min(pending).min(send).min(self.cc.poll_timeout())
    }

    /// The next event for metrics, if any.
    pub fn poll_event(&mut self) -> Option<SenderEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests;
