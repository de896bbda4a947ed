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
        let plan = FramePlan::from(RateControl::abr_vbv(ctx.cc_target, TimeDelta::from_ms(500)));
        if let Some((slot, from, reference)) = self.drop_and_reencode {
            if ctx.source_index == slot {
                self.commands.push_back(SenderCommand::PurgeFrames { from_frame_id: from });
                let again = FramePlan { reference: Some(reference), ..plan.clone() };
                self.orders.push_back(EncodeOrder {
                    source_index: from,
                    capture_time: Timestamp::ZERO + TimeDelta::from_secs_f64(from as f64 / ctx.fps),
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
                if let SenderEvent::FrameEncoded { frame_id, source_index, is_keyframe, .. } = e {
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
                frame_id, source_index, capture_time, is_keyframe, ..
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

#[test]
fn a_duplicated_feedback_message_reports_its_received_packets_once() {
    use crate::packet::PacketReport;
    let (cc, feedback) = fixed(4, None);
    let mut pair = Pair::new(sender(cc, Scripted::default(), 5.0), 20);
    pair.run_until(Timestamp::from_ms(500), None);
    let last = feedback.lock().unwrap().last().cloned().expect("feedback by 500 ms");
    let count = || feedback.lock().unwrap().len();
    let n = count();
    let message = |packets: Vec<PacketReport>| {
        Feedback::Transport(TransportFeedback {
            flow: 0,
            feedback_seq: 1_000,
            packets,
            hold_time: TimeDelta::ZERO,
            ecn_ce_count: 0,
        })
    };
    let now = Timestamp::from_ms(500);
    let again = last
        .packets
        .iter()
        .map(|p| PacketReport { transport_seq: p.sent.transport_seq, arrival_time: p.receive_time })
        .collect();
    pair.tx.handle_feedback(message(again), now);
    assert_eq!(count(), n, "the controller hears of a received packet once");
    // A packet reported lost may arrive after all: a later report of it counts, once.
    let seq = pair.tx.history.next_transport_seq() - 1;
    let report = |arrival| vec![PacketReport { transport_seq: seq, arrival_time: arrival }];
    pair.tx.handle_feedback(message(report(None)), now);
    assert_eq!(count(), n + 1);
    pair.tx.handle_feedback(message(report(Some(now))), now);
    assert_eq!(count(), n + 2);
    pair.tx.handle_feedback(message(report(Some(now))), now);
    assert_eq!(count(), n + 2);
}

/// An ABR controller that keeps the target each frame was offered.
struct Offered(Arc<Mutex<Vec<DataRate>>>);

impl EncoderController for Offered {
    fn plan(&mut self, ctx: &FrameContext) -> FrameDecision {
        self.0.lock().unwrap().push(ctx.cc_target);
        FramePlan::from(RateControl::abr_vbv(ctx.cc_target, TimeDelta::from_ms(500))).into()
    }
}

#[test]
fn the_encoder_is_offered_the_target_less_the_header_bytes_the_allocation_sets_aside() {
    // By default the packets' own header (60 B per 1200 B of payload); with
    // allocation_overhead, what libwebrtc's allocation reserves instead. Wire sizes stay.
    let offered = |allocation: Option<i64>| {
        let (cc, _) = fixed(4, None);
        let targets = Arc::new(Mutex::new(Vec::new()));
        let model = ModelEncoderConfig { width: 640, height: 360, ..Default::default() };
        let tx = Sender::new(
            SenderConfig {
                allocation_overhead: allocation.map(DataSize::from_bytes),
                ..Default::default()
            },
            Box::new(cc),
            Box::new(LeakyBucketPacer::new(LeakyBucketConfig::default(), Timestamp::ZERO)),
            Box::new(InlineEncoder::new(Box::new(ModelEncoder::new(model, 30.0)))),
            Box::new(Offered(targets.clone())),
            Timestamp::ZERO,
        );
        let mut pair = Pair::new(tx, 20);
        pair.run_until(Timestamp::from_ms(300), None);
        let sizes: Vec<i64> = pair
            .sender_events
            .iter()
            .filter_map(|e| match e {
                SenderEvent::PacketSent { size, .. } => Some(size.as_bytes()),
                _ => None,
            })
            .collect();
        let t = targets.lock().unwrap().clone();
        (t, sizes.into_iter().max().unwrap())
    };
    let (own, own_max) = offered(None);
    let (reserved, reserved_max) = offered(Some(120));
    assert!(!own.is_empty() && own.len() == reserved.len());
    for (a, b) in own.iter().zip(&reserved) {
        assert!((a.as_bps_f64() - 4e6 * 1200.0 / 1260.0).abs() < 1.0, "{a:?}");
        assert!((b.as_bps_f64() - 4e6 * 1200.0 / 1320.0).abs() < 1.0, "{b:?}");
    }
    // Packets still carry 60 B of header on up to 1200 B of payload.
    assert!(own_max <= 1260 && reserved_max <= 1260 && reserved_max > 1200, "{reserved_max}");
}
