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
    /// Header bytes on the wire per media packet: RTP header and extensions plus UDP/IP
    /// ([`crate::packet::PACKET_OVERHEAD`], more for a scheme with more header extensions).
    pub packet_overhead: DataSize,
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
            max_video_rate: None,
            flow: 0,
        }
    }
}

/// What the sender reports for metrics.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "event")]
pub enum SenderEvent {
    FrameEncoded {
        frame_id: u64,
        source_index: u64,
        capture_time: Timestamp,
        encode_start: Timestamp,
        encode_end: Timestamp,
        size: DataSize,
        is_keyframe: bool,
        #[serde(with = "crate::columns::float_or_null")]
        qp: f64,
        target_rate: DataRate,
        packet_count: u16,
        /// The frame it references (`None` for a keyframe).
        reference: Option<u64>,
        /// The encoder controller's per-frame columns.
        columns: Columns,
    },
    /// The controller skipped a capture slot (it may still encode it later).
    FrameSkipped {
        source_index: u64,
        capture_time: Timestamp,
        reason: crate::columns::Name,
    },
    /// The frame's first packet reached the head of the pacer queue at `head_at` and its
    /// last left at `done_at`.
    FrameServiced {
        frame_id: u64,
        head_at: Timestamp,
        done_at: Timestamp,
    },
    /// What was left of the frame in the pacer (or encoder) was purged.
    FramePurged {
        frame_id: u64,
        time: Timestamp,
    },
    /// A bottleneck node's report reached the sender.
    BottleneckReport {
        report: crate::packet::BottleneckReport,
        received: Timestamp,
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
    /// Counted in the bytes in flight: sent, and no feedback has reported it or a later
    /// packet (nor has it been given up on).
    in_flight: bool,
    /// The frame of a video packet or retransmission.
    frame_id: Option<u64>,
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
    /// The highest transport sequence number any feedback reported.
    acked_through: Option<u64>,
}

impl SendHistory {
    fn on_sent(&mut self, p: &Packet, sent: SentPacket) {
        debug_assert_eq!(sent.transport_seq, self.next_transport_seq());
        self.in_flight += sent.size;
        let frame_id =
            matches!(p.kind, PacketKind::Video | PacketKind::Retransmission).then_some(p.frame_id);
        self.transport.push_back(SentRecord { sent, in_flight: true, frame_id });
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

    /// The transport sequence number of the next packet sent.
    fn next_transport_seq(&self) -> u64 {
        self.transport_base + self.transport.len() as u64
    }

    /// Marks a packet reported; its send record and frame.
    fn report(&mut self, transport_seq: u64) -> Option<(SentPacket, Option<u64>)> {
        let idx = transport_seq.checked_sub(self.transport_base)? as usize;
        let r = self.transport.get_mut(idx)?;
        if r.in_flight {
            r.in_flight = false;
            self.in_flight -= r.sent.size;
        }
        Some((r.sent, r.frame_id))
    }

    /// Feedback reported the packets `reported`: every packet sent up to the highest of them
    /// has left the network, reported or not (its report may have been lost with a feedback
    /// message), so it leaves the bytes in flight, as libwebrtc's TransportFeedbackAdapter
    /// does with its last acknowledged sequence number. Otherwise a lost feedback message
    /// would keep its packets in flight until the history forgets them (60 s), and a window
    /// or libwebrtc's congestion-window pushback would hold the rate down all that time.
    /// Numbers not sent yet (a corrupt or foreign report) say nothing and are ignored.
    fn ack_through(&mut self, reported: impl Iterator<Item = u64>) {
        let sent_end = self.next_transport_seq();
        let Some(transport_seq) = reported.filter(|&s| s < sent_end).max() else { return };
        let from = self.acked_through.map_or(0, |a| a + 1).max(self.transport_base);
        if transport_seq < from {
            return;
        }
        self.acked_through = Some(transport_seq);
        let first = (from - self.transport_base) as usize;
        let end = (transport_seq - self.transport_base) as usize + 1;
        for r in self.transport.range_mut(first..end) {
            if r.in_flight {
                r.in_flight = false;
                self.in_flight -= r.sent.size;
            }
        }
    }

    /// Packets of frames `from..` sent and not yet reported are no longer in flight (a
    /// bottleneck dropped them on purpose): they leave the window now instead of when
    /// feedback reports them missing. Looks at the newest packets only (those frames are
    /// recent).
    fn forget_in_flight(&mut self, from: u64) {
        const LOOK_BACK: usize = 8192;
        for r in self.transport.iter_mut().rev().take(LOOK_BACK) {
            if r.in_flight && r.frame_id.is_some_and(|f| f >= from) {
                r.in_flight = false;
                self.in_flight -= r.sent.size;
            }
        }
    }

    /// The frame a media sequence number belongs to, if it is still kept.
    fn frame_of_media(&self, media_seq: u64) -> Option<u64> {
        let idx = media_seq.checked_sub(self.media_base)?;
        self.media.get(idx as usize).map(|r| r.packet.frame_id)
    }

    /// The oldest frame with a packet kept for retransmission.
    fn oldest_frame(&self) -> Option<u64> {
        self.media.front().map(|r| r.packet.frame_id)
    }

    fn prune(&mut self, now: Timestamp, keep: TimeDelta, keep_transport: TimeDelta) {
        while let Some(r) = self.transport.front() {
            if now - r.sent.send_time <= keep_transport {
                break;
            }
            if r.in_flight {
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

/// A frame submitted to the encoder, waiting to finish.
struct Submitted {
    frame_id: u64,
    plan: FramePlan,
    /// The frame it references unless it comes out as a keyframe.
    reference: Option<u64>,
}

/// A frame with packets in the pacer, for its service time.
struct InPacer {
    frame_id: u64,
    enqueued: Timestamp,
    remaining: u16,
    /// When its first packet reached the head of the queue (once it has).
    head_at: Option<Timestamp>,
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
    pub next_frame_id: u64,
    pub capture_until: Timestamp,
}

pub struct Sender {
    config: SenderConfig,
    cc: Box<dyn CongestionController>,
    pacer: Box<dyn Pacer>,
    encoder: Box<dyn EncoderDriver>,
    controller: Box<dyn EncoderController>,
    packetizer: Packetizer,
    history: SendHistory,
    next_transport_seq: u64,
    next_media_seq: u64,
    /// The next capture slot (source index).
    next_slot: u64,
    next_frame_id: u64,
    /// The last frame submitted to the encoder.
    last_submitted: Option<u64>,
    submitted: VecDeque<Submitted>,
    in_pacer: VecDeque<InPacer>,
    /// Frames still encoding when a purge covered them: dropped when they finish.
    purge_on_finish: BTreeSet<u64>,
    /// Purged frames: their retransmissions are refused.
    purged: BTreeSet<u64>,
    /// The latest drop `D` a frame-dropping bottleneck reported (stamped on every frame
    /// packetized since as its latest re-encoded frame number).
    latest_reencoded: Option<u64>,
    /// Frames a bottleneck dropped, as `[from, to)` ranges: losses of their packets are not
    /// congestion losses.
    bn_dropped: VecDeque<(u64, u64)>,
    /// Frames already reported lost to the encoder controller (recent ones).
    lost_frames: BTreeSet<u64>,
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
    /// Why the sender cannot go on (besides the encoder's own failure).
    failure: Option<String>,
}

/// A controller hands out finitely many orders per event; the bound only stops a faulty one
/// from hanging the sender.
const MAX_ORDERS: usize = 4096;
/// Bottleneck drop ranges remembered (each drop adds one).
const MAX_BN_DROP_RANGES: usize = 256;
/// Frames remembered as already reported lost.
const MAX_LOST_FRAMES_KEPT: usize = 4096;
/// Retransmissions may use at most the target rate over this window (libwebrtc's
/// retransmission rate limiter in RtpTransportControllerSend: 1 s at the target rate).
const RTX_RATE_WINDOW: TimeDelta = TimeDelta::from_secs(1);
/// While the congestion window is full, a padding packet goes out this long after the last
/// send, so that feedback keeps coming even if the packets in flight were all lost
/// (libwebrtc's PacingController: kCongestedPacketInterval, 500 ms).
const KEEPALIVE_INTERVAL: TimeDelta = TimeDelta::from_ms(500);
/// The keepalive: one byte of padding payload (libwebrtc sends a 1-byte padding packet).
const KEEPALIVE_SIZE: DataSize =
    DataSize::from_bytes(crate::packet::PACKET_OVERHEAD.as_bytes() + 1);

impl Sender {
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
            next_transport_seq: 0,
            next_media_seq: 0,
            next_slot: 0,
            next_frame_id: 0,
            last_submitted: None,
            submitted: VecDeque::new(),
            in_pacer: VecDeque::new(),
            purge_on_finish: BTreeSet::new(),
            purged: BTreeSet::new(),
            latest_reencoded: None,
            bn_dropped: VecDeque::new(),
            lost_frames: BTreeSet::new(),
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
            next_frame_id: self.next_frame_id,
            capture_until: self.config.capture_until,
        }
    }

    /// Continues `t` (a fresh sender replacing one that stopped, at `now`): the next capture
    /// is the first slot of `t`'s clock at or after `now`, and frame ids go on from `t`'s.
    /// Call it on a sender that has not captured yet.
    pub fn continue_timeline(&mut self, t: Timeline, now: Timestamp) {
        self.start = t.start;
        self.config.capture_until = t.capture_until;
        self.next_frame_id = self.next_frame_id.max(t.next_frame_id);
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

    /// The share of the target rate left for the encoder once per-packet overhead (RTP
    /// header + UDP/IP) is paid, assuming full packets, as libwebrtc's overhead-aware
    /// allocation does.
    /// `rate`, at most the application's cap.
    fn capped(&self, rate: DataRate) -> DataRate {
        self.config.max_video_rate.map_or(rate, |cap| rate.min(cap))
    }

    fn media_rate(&self) -> DataRate {
        let payload = self.config.max_payload.as_bytes_f64();
        let overhead = self.config.packet_overhead.as_bytes_f64();
        self.cc.update().encoder_rate.scale(payload / (payload + overhead))
    }

    /// The congestion controller's latest update.
    pub fn control_update(&self) -> NetworkControlUpdate {
        self.cc.update()
    }
    /// Bytes sent and not yet reported by feedback, directly or by a later packet's report
    /// (nor given up on).
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
        FrameContext {
            now,
            source_index,
            capture_time: self.capture_time_of(source_index),
            fps: self.config.fps,
            cc_target: self.capped(self.media_rate()),
            cwnd_reduce_ratio: self.cc.update().cwnd_reduce_ratio,
            cc_signals: self.cc.signals(),
            pacer: PacerState {
                queue_bytes: self.pacer.queue_size(),
                queue_packets: self.pacer.queue_packets(),
                oldest_queue_time: self.pacer.oldest_queue_time(now),
            },
            transport: TransportState {
                congestion_window: self.window,
                in_flight: self.history.in_flight,
            },
            last_frame_id: self.last_submitted,
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
        let frame_id = self.next_frame_id;
        self.next_frame_id += 1;
        let reference = plan.reference.or(self.last_submitted);
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
        self.last_submitted = Some(frame_id);
        self.encoder.submit(request, now);
        self.submitted.push_back(Submitted { frame_id, plan, reference });
    }

    /// Packetizes the frames the encoder has finished and hands them to the pacer.
    fn collect_encoded(&mut self, now: Timestamp) {
        while let Some(done) = self.encoder.poll_finished(now) {
            let frame = done.frame;
            let Some(sub) = self.submitted.pop_front() else { break };
            debug_assert_eq!(sub.frame_id, frame.frame_id, "encoder finished out of order");
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
                    "the encoder produced a frame of {} bytes, more than {} packets",
                    frame.size.as_bytes(),
                    crate::packetizer::MAX_PACKETS_PER_FRAME
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
            if self.purge_on_finish.remove(&frame.frame_id) {
                self.events
                    .push_back(SenderEvent::FramePurged { frame_id: frame.frame_id, time: now });
                self.controller
                    .on_frame_event(&FrameEvent::Purged { frame_id: frame.frame_id }, now);
                continue;
            }
            for p in &mut packets {
                p.latest_reencoded = self.latest_reencoded;
            }
            self.pacer.on_frame(frame.size, now);
            let head_at = if self.in_pacer.is_empty() { Some(now) } else { None };
            self.in_pacer.push_back(InPacer {
                frame_id: frame.frame_id,
                enqueued: now,
                remaining: packets.len() as u16,
                head_at,
            });
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
        if self.latest_reencoded.is_some_and(|l| d <= l) {
            return; // already handled (D only grows)
        }
        if d < self.next_frame_id {
            self.bn_dropped.push_back((d, self.next_frame_id));
            while self.bn_dropped.len() > MAX_BN_DROP_RANGES {
                self.bn_dropped.pop_front();
            }
            self.purge(d, now);
            self.history.forget_in_flight(d);
        }
        self.latest_reencoded = Some(d);
    }

    /// Whether a bottleneck reported this frame dropped.
    fn dropped_at_bottleneck(&self, frame_id: u64) -> bool {
        self.bn_dropped.iter().any(|&(from, to)| (from..to).contains(&frame_id))
    }

    /// Tells the controller, once per frame, that a packet of these frames was lost (frames a
    /// bottleneck dropped are not news); then runs the commands it gives.
    fn notify_lost(&mut self, frames: impl IntoIterator<Item = u64>, now: Timestamp) {
        let mut any = false;
        for f in frames {
            if self.dropped_at_bottleneck(f) || !self.lost_frames.insert(f) {
                continue;
            }
            any = true;
            self.controller.on_frame_event(&FrameEvent::Lost { frame_id: f }, now);
        }
        while self.lost_frames.len() > MAX_LOST_FRAMES_KEPT {
            self.lost_frames.pop_first();
        }
        if any {
            self.run_commands(now);
        }
    }

    /// Removes frames `from_frame_id..` from the pacer and the encoder's output.
    fn purge(&mut self, from_frame_id: u64, now: Timestamp) {
        self.pacer.purge(&mut |p: &Packet| {
            matches!(p.kind, PacketKind::Video | PacketKind::Retransmission)
                && p.frame_id >= from_frame_id
        });
        let front = self.in_pacer.front().map(|f| f.frame_id);
        let mut gone = Vec::new();
        self.in_pacer.retain(|f| {
            let purge = f.frame_id >= from_frame_id;
            if purge {
                gone.push(f.frame_id);
            }
            !purge
        });
        for s in &self.submitted {
            if s.frame_id >= from_frame_id {
                self.purge_on_finish.insert(s.frame_id);
            }
        }
        self.purged.extend(from_frame_id..self.next_frame_id);
        for frame_id in gone {
            self.events.push_back(SenderEvent::FramePurged { frame_id, time: now });
            self.controller.on_frame_event(&FrameEvent::Purged { frame_id }, now);
        }
        if self.in_pacer.front().map(|f| f.frame_id) != front {
            self.advance_head(now);
        }
    }

    /// The frame now at the front of the pacer reached the head at `now` (or its enqueue).
    fn advance_head(&mut self, now: Timestamp) {
        if let Some(f) = self.in_pacer.front_mut() {
            f.head_at.get_or_insert(now.max(f.enqueued));
        }
    }

    /// A video packet of `frame_id` left the pacer at `now`.
    fn on_video_sent(&mut self, frame_id: u64, now: Timestamp) {
        let Some(i) = self.in_pacer.iter().position(|f| f.frame_id == frame_id) else { return };
        let f = &mut self.in_pacer[i];
        f.remaining = f.remaining.saturating_sub(1);
        if f.remaining > 0 {
            return;
        }
        let head_at = f.head_at.unwrap_or(f.enqueued);
        let _ = self.in_pacer.remove(i);
        self.events.push_back(SenderEvent::FrameServiced { frame_id, head_at, done_at: now });
        self.controller
            .on_frame_event(&FrameEvent::Serviced { frame_id, head_at, done_at: now }, now);
        if i == 0 {
            self.advance_head(now);
        }
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
            self.purged = self.purged.split_off(&oldest);
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
        let prior_in_flight = self.history.in_flight;
        let mut packets = Vec::with_capacity(fb.packets.len());
        let mut lost = BTreeSet::new();
        self.history.ack_through(fb.packets.iter().map(|r| r.transport_seq));
        for report in &fb.packets {
            let Some((sent, frame)) = self.history.report(report.transport_seq) else { continue };
            if report.arrival_time.is_none() {
                if let Some(f) = frame {
                    if self.dropped_at_bottleneck(f) {
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
            if self.purged.contains(&record.packet.frame_id) {
                continue; // purged on purpose: not resent
            }
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
        if p.kind == PacketKind::Video {
            p.media_seq = self.next_media_seq;
            self.next_media_seq += 1;
        }
        p.transport_seq = self.next_transport_seq;
        self.next_transport_seq += 1;
        // Padding and probes are made by the pacer with no flow of their own.
        p.flow = self.config.flow;
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
        if p.kind == PacketKind::Video {
            self.on_video_sent(p.frame_id, now);
        }
        Some(Datagram::Media(p))
    }

    pub fn poll_timeout(&self) -> Timestamp {
        let pending = self.encoder.poll_timeout();
        // A full window waits for feedback (an input), or for the keepalive.
        let send =
            if self.window_open() { self.pacer.poll_timeout() } else { self.keepalive_time() };
        self.next_capture_time().min(pending).min(send).min(self.cc.poll_timeout())
    }

    pub fn poll_event(&mut self) -> Option<SenderEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{CcSignals, ProbeClusterConfig};
    use crate::encoder::model::{ModelEncoder, ModelEncoderConfig};
    use crate::encoder::{InlineEncoder, RateControl};
    use crate::encoder_controller::EncodeOrder;
    use crate::pacer::leaky_bucket::{LeakyBucketConfig, LeakyBucketPacer};
    use crate::receiver::{Receiver, ReceiverConfig, ReceiverEvent};
    use std::sync::{Arc, Mutex};

    /// A controller with a fixed rate and an optional window; it keeps every feedback.
    struct FixedCc {
        rate: DataRate,
        window: Option<DataSize>,
        feedback: Arc<Mutex<Vec<TransportPacketsFeedback>>>,
    }

    impl CongestionController for FixedCc {
        fn on_packet_sent(&mut self, _: &SentPacket, _: Timestamp) {}
        fn on_transport_feedback(&mut self, fb: &TransportPacketsFeedback, _: Timestamp) {
            self.feedback.lock().unwrap().push(fb.clone());
        }
        fn handle_timeout(&mut self, _: Timestamp) {}
        fn poll_timeout(&self) -> Timestamp {
            Timestamp::INFINITY
        }
        fn update(&self) -> NetworkControlUpdate {
            NetworkControlUpdate {
                target_rate: self.rate,
                encoder_rate: self.rate,
                cwnd_reduce_ratio: 0.0,
                pacing_rate: self.rate,
                padding_rate: DataRate::ZERO,
                congestion_window: self.window,
            }
        }
        fn poll_probe_cluster(&mut self, _: Timestamp) -> Option<ProbeClusterConfig> {
            None
        }
        fn signals(&self) -> CcSignals {
            CcSignals::default()
        }
    }

    /// ABR at the target, but skipping some slots and, at one slot, purging the frames from
    /// a given id and re-referencing an older one.
    #[derive(Default)]
    struct Scripted {
        skip: Vec<u64>,
        /// At slot `.0`: purge frames from id `.1`, encode the slot referencing frame `.2`,
        /// and encode slot `.1`'s source again first.
        drop_and_reencode: Option<(u64, u64, u64)>,
        orders: VecDeque<EncodeOrder>,
        commands: VecDeque<SenderCommand>,
        events: Arc<Mutex<Vec<FrameEvent>>>,
    }

    impl EncoderController for Scripted {
        fn plan(&mut self, ctx: &FrameContext) -> FrameDecision {
            if self.skip.contains(&ctx.source_index) {
                return FrameDecision::Skip { reason: "test" };
            }
            let plan =
                FramePlan::from(RateControl::abr_vbv(ctx.cc_target, TimeDelta::from_ms(500)));
            if let Some((slot, from, reference)) = self.drop_and_reencode {
                if ctx.source_index == slot {
                    self.commands.push_back(SenderCommand::PurgeFrames { from_frame_id: from });
                    let again = FramePlan { reference: Some(reference), ..plan.clone() };
                    self.orders.push_back(EncodeOrder {
                        source_index: from,
                        capture_time: Timestamp::ZERO
                            + TimeDelta::from_secs_f64(from as f64 / ctx.fps),
                        plan: again,
                    });
                    // This slot itself is encoded after the re-encode (default reference).
                    self.orders.push_back(EncodeOrder {
                        source_index: slot,
                        capture_time: ctx.capture_time,
                        plan: plan.clone(),
                    });
                    return FrameDecision::Skip { reason: "held for the re-encode" };
                }
            }
            plan.into()
        }
        fn poll_encode(&mut self, _ctx: &FrameContext) -> Option<EncodeOrder> {
            if self.commands.is_empty() {
                self.orders.pop_front()
            } else {
                None
            }
        }
        fn poll_command(&mut self) -> Option<SenderCommand> {
            self.commands.pop_front()
        }
        fn on_frame_event(&mut self, e: &FrameEvent, _: Timestamp) {
            self.events.lock().unwrap().push(*e);
        }
    }

    fn sender(cc: FixedCc, controller: Scripted, encode_ms: f64) -> Sender {
        let model = ModelEncoderConfig {
            width: 640,
            height: 360,
            encode_time_ms: encode_ms,
            reference_frames: 4,
            ..Default::default()
        };
        Sender::new(
            SenderConfig::default(),
            Box::new(cc),
            Box::new(LeakyBucketPacer::new(LeakyBucketConfig::default(), Timestamp::ZERO)),
            Box::new(InlineEncoder::new(Box::new(ModelEncoder::new(model, 30.0)))),
            Box::new(controller),
            Timestamp::ZERO,
        )
    }

    /// A sender and a receiver joined by an ideal path (fixed delay each way, no loss),
    /// stepped from timeout to timeout.
    struct Pair {
        tx: Sender,
        rx: Receiver,
        now: Timestamp,
        delay: TimeDelta,
        to_rx: VecDeque<(Timestamp, Datagram)>,
        to_tx: VecDeque<(Timestamp, Datagram)>,
        /// frame id -> source index.
        sources: std::collections::BTreeMap<u64, u64>,
        displayed: Vec<u64>,
        keyframe_requests: usize,
        keyframes: usize,
        max_over_window: i64,
        /// Every sender event, in order.
        sender_events: Vec<SenderEvent>,
        /// Feedback the receiver sends in this interval is lost.
        feedback_blackout: Option<(Timestamp, Timestamp)>,
    }

    impl Pair {
        fn new(tx: Sender, delay_ms: i64) -> Pair {
            let rx = Receiver::new(ReceiverConfig::default(), 0, Timestamp::ZERO);
            Pair {
                tx,
                rx,
                now: Timestamp::ZERO,
                delay: TimeDelta::from_ms(delay_ms),
                to_rx: VecDeque::new(),
                to_tx: VecDeque::new(),
                sources: Default::default(),
                displayed: Vec::new(),
                keyframe_requests: 0,
                keyframes: 0,
                max_over_window: i64::MIN,
                sender_events: Vec::new(),
                feedback_blackout: None,
            }
        }

        fn run_until(&mut self, end: Timestamp, window: Option<DataSize>) {
            for _ in 0..10_000_000 {
                let next = [
                    self.tx.poll_timeout(),
                    self.rx.poll_timeout(),
                    self.to_rx.front().map_or(Timestamp::INFINITY, |d| d.0),
                    self.to_tx.front().map_or(Timestamp::INFINITY, |d| d.0),
                ]
                .into_iter()
                .min()
                .unwrap();
                if next > end {
                    return;
                }
                self.now = next.max(self.now);
                let now = self.now;
                self.tx.handle_timeout(now);
                self.rx.handle_timeout(now);
                while self.to_rx.front().is_some_and(|d| d.0 <= now) {
                    let (_, d) = self.to_rx.pop_front().unwrap();
                    self.rx.handle_datagram(d, now);
                }
                while self.to_tx.front().is_some_and(|d| d.0 <= now) {
                    if let (_, Datagram::Feedback(f)) = self.to_tx.pop_front().unwrap() {
                        self.tx.handle_feedback(f, now);
                    }
                }
                while let Some(d) = self.tx.poll_transmit(now) {
                    if let Some(w) = window {
                        let over = (self.tx.bytes_in_flight() - w).as_bytes();
                        self.max_over_window = self.max_over_window.max(over);
                    }
                    self.to_rx.push_back((now + self.delay, d));
                }
                while let Some(d) = self.rx.poll_transmit() {
                    if self.feedback_blackout.is_some_and(|(from, to)| now >= from && now < to) {
                        continue;
                    }
                    self.to_tx.push_back((now + self.delay, d));
                }
                while let Some(e) = self.tx.poll_event() {
                    self.sender_events.push(e.clone());
                    if let SenderEvent::FrameEncoded {
                        frame_id, source_index, is_keyframe, ..
                    } = e
                    {
                        self.sources.insert(frame_id, source_index);
                        self.keyframes += usize::from(is_keyframe);
                    }
                }
                while let Some(e) = self.rx.poll_event() {
                    match e {
                        ReceiverEvent::FrameDisplayed { frame_id, .. } => {
                            self.displayed.push(self.sources[&frame_id])
                        }
                        ReceiverEvent::KeyframeRequested { .. } => self.keyframe_requests += 1,
                        _ => {}
                    }
                }
            }
            panic!("livelock at {:?}", self.now);
        }
    }

    fn fixed(
        rate_mbps: i64,
        window: Option<i64>,
    ) -> (FixedCc, Arc<Mutex<Vec<TransportPacketsFeedback>>>) {
        let feedback = Arc::new(Mutex::new(Vec::new()));
        let cc = FixedCc {
            rate: DataRate::from_mbps(rate_mbps),
            window: window.map(DataSize::from_bytes),
            feedback: feedback.clone(),
        };
        (cc, feedback)
    }

    #[test]
    fn a_fresh_sender_continues_a_stopped_ones_timeline() {
        let (cc, _) = fixed(4, None);
        let mut first = Pair::new(sender(cc, Scripted::default(), 5.0), 20);
        first.run_until(Timestamp::from_ms(500), None);
        let mut t = first.tx.timeline();
        assert_eq!(t.next_slot, 16, "slots 0..=15 captured by 500 ms at 30 fps");
        t.capture_until = Timestamp::from_ms(800);
        // The replacement starts at 510 ms with fresh state, and an encoder that has not
        // seen a frame.
        let now = Timestamp::from_ms(510);
        let (cc, _) = fixed(4, None);
        let model = ModelEncoderConfig { width: 640, height: 360, ..Default::default() };
        let mut fresh = Sender::new(
            SenderConfig { capture_until: Timestamp::from_ms(900), ..Default::default() },
            Box::new(cc),
            Box::new(LeakyBucketPacer::new(LeakyBucketConfig::default(), now)),
            Box::new(InlineEncoder::new(Box::new(ModelEncoder::new(model, 30.0)))),
            Box::new(Scripted::default()),
            now,
        );
        fresh.continue_timeline(t, now);
        let mut second = Pair::new(fresh, 20);
        second.run_until(Timestamp::from_ms(2000), None);
        let encoded: Vec<(u64, u64, Timestamp, bool)> = second
            .sender_events
            .iter()
            .filter_map(|e| match e {
                SenderEvent::FrameEncoded {
                    frame_id,
                    source_index,
                    capture_time,
                    is_keyframe,
                    ..
                } => Some((*frame_id, *source_index, *capture_time, *is_keyframe)),
                _ => None,
            })
            .collect();
        // Slot 16 (533 ms) is the first at or after 510 ms; ids go on from the first
        // sender's; the fresh encoder starts with a keyframe; capture stops at the
        // timeline's end (800 ms, not the fresh config's 900 ms): slot 23 (766.7 ms) is
        // the last.
        let (id, slot, capture, key) = encoded[0];
        assert_eq!((id, slot, key), (t.next_frame_id, 16, true));
        assert_eq!(capture, Timestamp::from_us(533_333));
        assert_eq!(encoded.last().unwrap().1, 23);
        assert_eq!(second.displayed.first(), Some(&16));
    }

    #[test]
    fn a_skipped_slot_is_no_loss_and_asks_for_no_keyframe() {
        let (cc, _) = fixed(4, None);
        let controller = Scripted { skip: vec![1, 5, 6], ..Default::default() };
        let mut pair = Pair::new(sender(cc, controller, 5.0), 20);
        pair.run_until(Timestamp::from_ms(2000), None);
        assert_eq!(&pair.displayed[..6], &[0, 2, 3, 4, 7, 8]);
        assert_eq!(pair.keyframe_requests, 0);
        assert_eq!(pair.keyframes, 1, "only the first frame");
        // Every encode is displayed, in order; those of the last half second may still be on
        // their way (the keyframe's queue drains at 10 % over the rate).
        let encoded: Vec<u64> = pair.sources.values().copied().collect();
        assert_eq!(pair.displayed[..], encoded[..pair.displayed.len()]);
        let before_1500_ms = encoded.iter().filter(|&&slot| slot < 45).count();
        assert!(pair.displayed.len() >= before_1500_ms, "{:?}", pair.displayed);
    }

    #[test]
    fn the_window_caps_the_bytes_in_flight_and_a_keepalive_keeps_feedback_coming() {
        // 8 Mbps of video, but a 12 kB window over a 2 x 50 ms path: the window binds
        // (12 kB per ~110 ms is under 1 Mbps).
        let (cc, feedback) = fixed(8, Some(12_000));
        let mut pair = Pair::new(sender(cc, Scripted::default(), 5.0), 50);
        pair.run_until(Timestamp::from_ms(3000), Some(DataSize::from_bytes(12_000)));
        // Never more than the window plus one packet in flight.
        assert!(pair.max_over_window >= 0, "the window was reached");
        assert!(pair.max_over_window < 1260, "over the window by {} B", pair.max_over_window);
        // The link never carried more than the window allows per round trip.
        let fb = feedback.lock().unwrap();
        assert!(!fb.is_empty());
        assert!(fb.iter().all(|f| f.prior_in_flight <= DataSize::from_bytes(12_000 + 1260)));
    }

    #[test]
    fn packets_whose_feedback_was_lost_leave_the_bytes_in_flight_at_the_next_feedback() {
        // 4 Mbps over 20 ms each way; the receiver's feedback is lost for 1 s. The packets of
        // that second are never reported, but the first feedback after it reports later
        // packets, so they are no longer in flight (libwebrtc's last acknowledged sequence
        // number), instead of staying in flight until the history forgets them.
        let (cc, _) = fixed(4, None);
        let mut pair = Pair::new(sender(cc, Scripted::default(), 5.0), 20);
        pair.feedback_blackout = Some((Timestamp::from_ms(1000), Timestamp::from_ms(2000)));
        pair.run_until(Timestamp::from_ms(1990), None);
        let during = pair.tx.bytes_in_flight();
        assert!(during > DataSize::from_bytes(400_000), "{during:?} in flight in the blackout");
        pair.run_until(Timestamp::from_ms(2200), None);
        // At most what 4 Mbps sends in a round trip plus a feedback interval (90 ms), and
        // a frame.
        let after = pair.tx.bytes_in_flight();
        assert!(after < DataSize::from_bytes(45_000 + 20_000), "{after:?} in flight after it");
    }

    #[test]
    fn a_report_of_a_packet_never_sent_takes_nothing_out_of_flight() {
        let (cc, _) = fixed(4, None);
        let mut pair = Pair::new(sender(cc, Scripted::default(), 5.0), 20);
        pair.feedback_blackout = Some((Timestamp::ZERO, Timestamp::from_ms(1000)));
        pair.run_until(Timestamp::from_ms(500), None);
        let before = pair.tx.bytes_in_flight();
        assert!(before > DataSize::from_bytes(100_000), "{before:?}");
        let forged = TransportFeedback {
            flow: 0,
            feedback_seq: 1,
            packets: vec![crate::packet::PacketReport {
                transport_seq: u64::MAX - 1,
                arrival_time: Some(Timestamp::from_ms(500)),
            }],
            hold_time: TimeDelta::ZERO,
            ecn_ce_count: 0,
        };
        pair.tx.handle_feedback(Feedback::Transport(forged), Timestamp::from_ms(500));
        assert_eq!(pair.tx.bytes_in_flight(), before);
    }

    #[test]
    fn feedback_carries_per_packet_rtts_from_arrival_times() {
        let (cc, feedback) = fixed(4, None);
        let mut pair = Pair::new(sender(cc, Scripted::default(), 5.0), 20);
        pair.run_until(Timestamp::from_ms(1000), None);
        let fb = feedback.lock().unwrap();
        // An ideal 20 ms path each way: every packet's RTT is 40 ms, however long it waited
        // in the report batch (reports go every 50 ms).
        let rtts: Vec<TimeDelta> =
            fb.iter().flat_map(|f| f.packets.iter().filter_map(|p| p.rtt)).collect();
        assert!(rtts.len() > 50);
        assert!(rtts.iter().all(|&r| r == TimeDelta::from_ms(40)), "{:?}", &rtts[..5]);
        let owd: Vec<TimeDelta> =
            fb.iter().flat_map(|f| f.packets.iter().filter_map(|p| p.one_way_delay())).collect();
        assert!(owd.iter().all(|&d| d == TimeDelta::from_ms(20)));
        assert!(fb.iter().all(|f| f.rtt == Some(TimeDelta::from_ms(40))));
    }

    #[test]
    fn purged_frames_are_replaced_by_a_re_encode_without_a_keyframe() {
        // At slot 20 the controller purges frames from id 18 on (whatever of them is still in
        // the pacer or encoding) and encodes source 18 again referencing frame 17, then slot
        // 20. A slow encoder (40 ms per frame) keeps frames queued so the purge has work.
        let events = Arc::new(Mutex::new(Vec::new()));
        let controller = Scripted {
            drop_and_reencode: Some((20, 18, 17)),
            events: events.clone(),
            ..Default::default()
        };
        let (cc, _) = fixed(2, None);
        let mut pair = Pair::new(sender(cc, controller, 40.0), 20);
        pair.run_until(Timestamp::from_ms(3000), None);
        let purged: Vec<u64> = events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                FrameEvent::Purged { frame_id } => Some(*frame_id),
                _ => None,
            })
            .collect();
        assert!(purged.contains(&19), "frame 19 (slot 19) was still queued: {purged:?}");
        assert_eq!(pair.keyframe_requests, 0);
        assert_eq!(pair.keyframes, 1);
        // Slots 0..17 as encoded, then 18 (its re-encode), then 20 onwards: 19 was dropped.
        let shown = &pair.displayed;
        let i = shown.iter().position(|&s| s == 18).expect("slot 18 displayed");
        assert_eq!(&shown[..i], &(0..18).collect::<Vec<_>>()[..]);
        assert_eq!(shown[i + 1], 20, "{shown:?}");
        assert!(!shown.contains(&19));
        // Services are reported for frames that left the pacer.
        assert!(events.lock().unwrap().iter().any(|e| matches!(e, FrameEvent::Serviced { .. })));
    }

    /// Vidaptive's pacer with dummies and a small video (64x36: the model encoder tops out
    /// near 0.2 Mbps), so that dummies fill most of the rate.
    fn vidaptive_sender(cc: FixedCc, encode_ms: f64) -> Sender {
        use crate::pacer::vidaptive::{VidaptivePacer, VidaptivePacerConfig};
        let model = ModelEncoderConfig {
            width: 64,
            height: 36,
            encode_time_ms: encode_ms,
            ..Default::default()
        };
        Sender::new(
            SenderConfig::default(),
            Box::new(cc),
            Box::new(VidaptivePacer::new(VidaptivePacerConfig::default(), Timestamp::ZERO)),
            Box::new(InlineEncoder::new(Box::new(ModelEncoder::new(model, 30.0)))),
            Box::new(Scripted::default()),
            Timestamp::ZERO,
        )
    }

    #[test]
    fn dummies_stay_inside_the_window_and_count_in_flight() {
        // Vidaptive's pacer at 3 Mbps with dummies, a 6 kB window over 2 x 50 ms (the window
        // allows ~0.44 Mbps): the window binds video and dummies alike. The sender sends while
        // the bytes in flight are below the window, so it exceeds it by less than the packet
        // that crossed it.
        let (cc, feedback) = fixed(3, Some(6000));
        let mut pair = Pair::new(vidaptive_sender(cc, 5.0), 50);
        pair.run_until(Timestamp::from_ms(3000), Some(DataSize::from_bytes(6000)));
        assert!(pair.max_over_window >= 0, "the window was reached");
        assert!(pair.max_over_window < 1260, "over the window by {} B", pair.max_over_window);
        let fb = feedback.lock().unwrap();
        assert!(fb.iter().all(|f| f.prior_in_flight <= DataSize::from_bytes(6000 + 1260)));
        // Dummies went out, and feedback reported them like any packet.
        let padding = fb.iter().flat_map(|f| &f.packets).filter(|p| p.sent.is_padding).count();
        assert!(padding > 200, "{padding} padding packets acknowledged");
        // Without a window the same pacer fills its 3 Mbps with video and dummies, minus
        // the guard before each capture.
        let (cc, _) = fixed(3, None);
        let mut pair = Pair::new(vidaptive_sender(cc, 5.0), 50);
        pair.run_until(Timestamp::from_ms(3000), None);
        let sent: i64 = pair
            .sender_events
            .iter()
            .filter_map(|e| match e {
                SenderEvent::PacketSent { size, time, .. } if *time >= Timestamp::from_ms(1000) => {
                    Some(size.as_bytes())
                }
                _ => None,
            })
            .sum();
        let rate = sent as f64 * 8.0 / 2.0;
        assert!(rate > 0.7 * 3e6 && rate < 1.02 * 3e6, "{rate} bps");
    }

    #[test]
    fn service_time_starts_when_the_frame_reaches_the_head_of_the_pacer() {
        // 1 Mbps pacing with 1 Mbps of video (heavy-tailed frames), 20 ms encodes: frames
        // often wait behind the previous one. Each frame's service starts at the later of its
        // enqueue (its encode's end) and the previous frame's last departure (Vidaptive §4:
        // "this does not include the queuing time the frame spent in the pacer before frames
        // ahead of it"), and ends with its last packet.
        let (cc, _) = fixed(1, None);
        let mut pair = Pair::new(sender(cc, Scripted::default(), 20.0), 20);
        pair.run_until(Timestamp::from_ms(5000), None);
        let mut enqueued = std::collections::BTreeMap::new();
        let mut last_sent = std::collections::BTreeMap::new();
        let mut services = Vec::new();
        for e in &pair.sender_events {
            match *e {
                SenderEvent::FrameEncoded { frame_id, encode_end, .. } => {
                    enqueued.insert(frame_id, encode_end);
                }
                SenderEvent::PacketSent { kind: PacketKind::Video, frame_id, time, .. } => {
                    last_sent.insert(frame_id, time);
                }
                SenderEvent::FrameServiced { frame_id, head_at, done_at } => {
                    services.push((frame_id, head_at, done_at))
                }
                _ => {}
            }
        }
        assert!(services.len() > 100);
        let mut behind = 0;
        for w in services.windows(2) {
            let ((_, _, prev_done), (id, head, done)) = (w[0], w[1]);
            assert_eq!(head, enqueued[&id].max(prev_done), "frame {id}");
            assert_eq!(done, last_sent[&id], "frame {id}");
            behind += usize::from(prev_done > enqueued[&id]);
        }
        assert!(behind > 10, "only {behind} frames waited behind another");
        // A window stall is part of the service: with a 3 kB window over 2 x 20 ms (about
        // 0.6 Mbps) the frames take longer than their bytes at the 1 Mbps pacing rate.
        let (cc, _) = fixed(1, Some(3000));
        let mut pair = Pair::new(sender(cc, Scripted::default(), 5.0), 20);
        pair.run_until(Timestamp::from_ms(5000), Some(DataSize::from_bytes(3000)));
        let (mut service_us, mut paced_us) = (0i64, 0i64);
        let mut size = std::collections::BTreeMap::new();
        for e in &pair.sender_events {
            match *e {
                SenderEvent::FrameEncoded { frame_id, size: s, packet_count, .. } => {
                    size.insert(frame_id, s + crate::packet::PACKET_OVERHEAD * packet_count as i64);
                }
                SenderEvent::FrameServiced { frame_id, head_at, done_at } => {
                    service_us += (done_at - head_at).as_us();
                    paced_us += (size[&frame_id] / DataRate::from_mbps(1)).as_us();
                }
                _ => {}
            }
        }
        assert!(service_us as f64 > 1.3 * paced_us as f64, "{service_us} vs {paced_us} us");
    }
}
