//! The receiver end: the core's [`Receiver`], unchanged; media in, feedback out.

use super::{Endpoint, Role, Spoofed, FRAMES_KEPT};
use crate::wire::{self, MediaReader, WireError};
use sluice_core::packet::{Datagram, PacketKind};
use sluice_core::receiver::{Receiver, ReceiverEvent};
use sluice_core::units::Timestamp;
use std::collections::{BTreeMap, VecDeque};

/// Receives depacketized media (the x264 stream, for ffmpeg interop and quality).
pub trait MediaSink: Send {
    fn on_media(&mut self, media: &wire::MediaIn);
}

/// The receiver end.
pub struct ReceiverEndpoint {
    receiver: Receiver,
    /// Builds a fresh receiver: for a restart of the receiving process, and for a new stream
    /// (the sender restarted).
    fresh: Option<Box<dyn Fn(Timestamp) -> Receiver + Send>>,
    restart_at: Option<Timestamp>,
    pub restarts: u64,
    /// New streams received (the sender restarted), and packets of an old stream refused.
    pub new_streams: u64,
    pub stale_packets: u64,
    /// Packets that would have switched it to another stream but were not valid as a whole.
    pub spoofed: Spoofed,
    /// After a restart, transport sequence numbers are handed to the fresh state machine
    /// relative to the first one it sees (the core's receiver reports from 0 on, as a
    /// receiver that starts mid-stream reports from its first packet), and feedback adds it
    /// back. `None` until the first packet after a restart.
    transport_base: Option<u64>,
    restarted: bool,
    /// Restarted: a keyframe request goes out with the first packet's stream.
    pli_pending: bool,
    outbox: VecDeque<Vec<u8>>,
    reader: MediaReader,
    pub events: Vec<ReceiverEvent>,
    malformed: u64,
    pub media_packets: u64,
    sink: Option<Box<dyn MediaSink>>,
    /// With stream recording: the payload parts of frames not yet displayed, and the
    /// displayed frames' bytes in display order (the stream the viewer's decoder gets).
    parts: Option<BTreeMap<u64, Vec<Option<bytes::Bytes>>>>,
    pub stream: Vec<u8>,
    /// Displayed frames whose bytes were not all there (not written to the stream).
    pub stream_gaps: u64,
    /// Copy every video RTP datagram received to the monitor (an RTP player).
    forward: bool,
    monitor_out: VecDeque<Vec<u8>>,
}

impl ReceiverEndpoint {
    pub fn new(receiver: Receiver) -> Self {
        ReceiverEndpoint {
            receiver,
            fresh: None,
            restart_at: None,
            restarts: 0,
            new_streams: 0,
            stale_packets: 0,
            spoofed: Spoofed::default(),
            transport_base: None,
            restarted: false,
            pli_pending: false,
            outbox: VecDeque::new(),
            reader: MediaReader::default(),
            events: Vec::new(),
            malformed: 0,
            media_packets: 0,
            sink: None,
            parts: None,
            stream: Vec::new(),
            stream_gaps: 0,
            forward: false,
            monitor_out: VecDeque::new(),
        }
    }

    /// The receiver of a run ([`sluice_core::session::build_receiver`] for `cfg` and `scheme`),
    /// able to start fresh (a restart, or a new stream from a restarted sender).
    pub fn for_run(
        cfg: &sluice_core::session::RunConfig,
        scheme: &sluice_core::scheme::SchemeConfig,
        now: Timestamp,
    ) -> Self {
        let mut r = ReceiverEndpoint::new(sluice_core::session::build_receiver(cfg, scheme, now));
        let (cfg, scheme) = (cfg.clone(), scheme.clone());
        r.set_fresh(Box::new(move |now| sluice_core::session::build_receiver(&cfg, &scheme, now)));
        r
    }

    /// Copies the received video RTP (not padding) to [`Role::Monitor`].
    pub fn forward_video(&mut self) {
        self.forward = true;
    }

    /// Records the payloads of displayed frames, in display order ([`Self::stream`]).
    pub fn record_stream(&mut self) {
        self.parts = Some(BTreeMap::new());
    }

    fn keep_part(&mut self, m: &wire::MediaIn) {
        let Some(parts) = self.parts.as_mut() else { return };
        let p = &m.packet;
        if p.kind == PacketKind::Padding || p.packet_index >= p.packet_count {
            return;
        }
        if !parts.contains_key(&p.frame_id) && parts.len() >= FRAMES_KEPT {
            parts.pop_first();
        }
        let v = parts.entry(p.frame_id).or_insert_with(|| vec![None; p.packet_count as usize]);
        if let Some(slot) = v.get_mut(p.packet_index as usize) {
            slot.get_or_insert_with(|| m.payload.clone());
        }
    }

    fn on_displayed(&mut self, frame_id: u64) {
        let Some(parts) = self.parts.as_mut() else { return };
        match parts.remove(&frame_id) {
            Some(v) if v.iter().all(|x| x.is_some()) => {
                let parts: Vec<bytes::Bytes> = v.into_iter().flatten().collect();
                match crate::h264::depacketize(&parts) {
                    Ok(annexb) => self.stream.extend_from_slice(&annexb),
                    Err(_) => self.stream_gaps += 1,
                }
            }
            _ => self.stream_gaps += 1,
        }
        // Older frames will not be displayed any more.
        while parts.first_key_value().is_some_and(|(k, _)| *k < frame_id) {
            parts.pop_first();
        }
    }
    /// Restarts the receiver at `at` (fault injection): its state is lost (a fresh state
    /// machine from [`Self::set_fresh`]'s builder, which it needs; sequence numbers
    /// unwrapped anew) and, as a receiver does when it starts on a stream it cannot decode,
    /// it asks for a keyframe (PLI).
    pub fn restart_at(&mut self, at: Timestamp) {
        self.restart_at = Some(at);
    }

    /// How to build a fresh receiver: for a restart ([`Self::restart_at`]), and when a new
    /// stream starts (the sender restarted: a receiver drops the old stream's state and
    /// receives the new one from its first packet, as for a new SSRC). Without it the old
    /// state goes on.
    pub fn set_fresh(&mut self, fresh: Box<dyn Fn(Timestamp) -> Receiver + Send>) {
        self.fresh = Some(fresh);
    }

    /// Replaces the state machine with a fresh one at `now` (the old one's events kept);
    /// false if there is no builder ([`Self::set_fresh`]).
    fn start_fresh(&mut self, now: Timestamp) -> bool {
        let Some(fresh) = self.fresh.as_ref() else { return false };
        let receiver = fresh(now);
        self.drain_events();
        self.receiver = receiver;
        self.transport_base = None;
        true
    }

    /// The sender started a new stream at `now`.
    fn on_new_stream(&mut self, now: Timestamp) {
        self.new_streams += 1;
        if self.start_fresh(now) {
            // The new stream numbers from 0, as the fresh state machine expects.
            self.restarted = false;
        }
    }

    /// The sender's stream it read last (`None` before the first packet).
    pub fn stream(&self) -> Option<u32> {
        self.reader.stream()
    }

    pub fn set_sink(&mut self, sink: Box<dyn MediaSink>) {
        self.sink = Some(sink);
    }
    pub fn receiver(&self) -> &Receiver {
        &self.receiver
    }
    fn drain_events(&mut self) {
        while let Some(e) = self.receiver.poll_event() {
            if let ReceiverEvent::FrameDisplayed { frame_id, .. } = e {
                self.on_displayed(frame_id);
            }
            self.events.push(e);
        }
    }
}

impl Endpoint for ReceiverEndpoint {
    fn handle_datagram(&mut self, from: Role, bytes: &[u8], now: Timestamp) {
        if from != Role::Sender {
            self.malformed += 1;
            return;
        }
        let stream = self.reader.stream();
        match self.reader.read(bytes, now) {
            Ok(m) => {
                if stream.is_some_and(|s| m.stream != s) {
                    self.on_new_stream(now);
                }
                if std::mem::take(&mut self.pli_pending) {
                    // A restarted receiver cannot decode the stream it joins: it asks the
                    // stream's sender for a keyframe.
                    let pli = sluice_core::packet::Feedback::KeyframeRequest { flow: 0 };
                    if let Ok(b) = wire::write_feedback(&pli, m.stream) {
                        self.outbox.push_back(b);
                    }
                }
                self.media_packets += 1;
                if let Some(s) = self.sink.as_mut() {
                    s.on_media(&m);
                }
                self.keep_part(&m);
                if self.forward && m.packet.kind != PacketKind::Padding {
                    self.monitor_out.push_back(bytes.to_vec());
                }
                let mut p = m.packet;
                if self.restarted {
                    let base = *self.transport_base.get_or_insert(p.transport_seq);
                    match p.transport_seq.checked_sub(base) {
                        Some(t) => p.transport_seq = t,
                        None => return, // sent before the restart's first packet
                    }
                }
                self.receiver.handle_datagram(Datagram::Media(p), now);
            }
            Err(WireError::StaleStream) => self.stale_packets += 1,
            Err(WireError::SpoofedStream) => self.spoofed.stream_packets += 1,
            Err(_) => self.malformed += 1,
        }
        self.drain_events();
    }

    fn handle_timeout(&mut self, now: Timestamp) {
        if self.restart_at.is_some_and(|t| t <= now) {
            self.restart_at = None;
            if self.start_fresh(now) {
                self.reader.reset();
                self.restarts += 1;
                self.restarted = true;
                self.pli_pending = true;
            }
        }
        if self.receiver.poll_timeout() <= now {
            self.receiver.handle_timeout(now);
        }
        self.drain_events();
    }

    fn poll_transmit(&mut self, _now: Timestamp) -> Option<(Role, Vec<u8>)> {
        if let Some(b) = self.monitor_out.pop_front() {
            return Some((Role::Monitor, b));
        }
        if let Some(b) = self.outbox.pop_front() {
            return Some((Role::Sender, b));
        }
        loop {
            let Datagram::Feedback(mut f) = self.receiver.poll_transmit()? else { continue };
            if let (sluice_core::packet::Feedback::Transport(t), Some(base)) =
                (&mut f, self.transport_base)
            {
                for r in &mut t.packets {
                    r.transport_seq += base;
                }
            }
            if let Ok(b) = wire::write_feedback(&f, self.reader.stream().unwrap_or(0)) {
                return Some((Role::Sender, b));
            }
        }
    }

    fn poll_timeout(&self) -> Timestamp {
        let restart = self.restart_at.unwrap_or(Timestamp::INFINITY);
        let out = if self.outbox.is_empty() && self.monitor_out.is_empty() {
            Timestamp::INFINITY
        } else {
            Timestamp::ZERO
        };
        self.receiver.poll_timeout().min(restart).min(out)
    }

    fn malformed(&self) -> u64 {
        self.malformed + self.receiver.malformed()
    }
}
