//! The send history: every packet sent, by transport sequence number (for transport feedback
//! and the bytes in flight), and the video packets kept for retransmission, by media sequence
//! number (for NACKs). The transport sequence counter lives here, once.

use crate::cc::SentPacket;
use crate::packet::{Packet, PacketKind};
use crate::units::{DataSize, TimeDelta, Timestamp};
use std::collections::VecDeque;

#[derive(Debug)]
struct SentRecord {
    sent: SentPacket,
    /// Counted in the bytes in flight: sent, and no feedback has reported it or a later
    /// packet (nor has it been given up on).
    in_flight: bool,
    /// The frame of a video packet or retransmission.
    frame_id: Option<u64>,
    /// Feedback reported it received: a later report of it (a duplicated feedback message)
    /// is ignored, as libwebrtc's TransportFeedbackAdapter drops a received packet from its
    /// history. A packet reported lost stays: a later report may say it arrived.
    received: bool,
}

#[derive(Debug)]
pub(super) struct MediaRecord {
    pub(super) packet: Packet,
    pub(super) last_sent: Timestamp,
}

/// The send history, indexed by transport and by media sequence number.
#[derive(Debug, Default)]
pub(super) struct SendHistory {
    transport_base: u64,
    transport: VecDeque<SentRecord>,
    media_base: u64,
    media: VecDeque<MediaRecord>,
    in_flight: DataSize,
    /// The highest transport sequence number any feedback reported.
    acked_through: Option<u64>,
}

impl SendHistory {
    pub(super) fn on_sent(&mut self, p: &Packet, sent: SentPacket) {
        debug_assert_eq!(sent.transport_seq, self.next_transport_seq());
        self.in_flight += sent.size;
        let frame_id =
            matches!(p.kind, PacketKind::Video | PacketKind::Retransmission).then_some(p.frame_id);
        self.transport.push_back(SentRecord { sent, in_flight: true, frame_id, received: false });
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

    /// Bytes sent and not yet reported by feedback, directly or by a later packet's report
    /// (nor given up on).
    pub(super) fn in_flight(&self) -> DataSize {
        self.in_flight
    }

    pub(super) fn media_mut(&mut self, media_seq: u64) -> Option<&mut MediaRecord> {
        let idx = media_seq.checked_sub(self.media_base)?;
        self.media.get_mut(idx as usize)
    }

    /// The transport sequence number of the next packet sent.
    pub(super) fn next_transport_seq(&self) -> u64 {
        self.transport_base + self.transport.len() as u64
    }

    /// Marks a packet reported (`received`: as arrived); its send record and frame. None for
    /// a packet not kept, and for one an earlier report said arrived (a duplicate report).
    pub(super) fn report(
        &mut self,
        transport_seq: u64,
        received: bool,
    ) -> Option<(SentPacket, Option<u64>)> {
        let idx = transport_seq.checked_sub(self.transport_base)? as usize;
        let r = self.transport.get_mut(idx)?;
        if r.received {
            return None;
        }
        r.received = received;
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
    pub(super) fn ack_through(&mut self, reported: impl Iterator<Item = u64>) {
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
    pub(super) fn forget_in_flight(&mut self, from: u64) {
        const LOOK_BACK: usize = 8192;
        for r in self.transport.iter_mut().rev().take(LOOK_BACK) {
            if r.in_flight && r.frame_id.is_some_and(|f| f >= from) {
                r.in_flight = false;
                self.in_flight -= r.sent.size;
            }
        }
    }

    /// The frame a media sequence number belongs to, if it is still kept.
    pub(super) fn frame_of_media(&self, media_seq: u64) -> Option<u64> {
        let idx = media_seq.checked_sub(self.media_base)?;
        self.media.get(idx as usize).map(|r| r.packet.frame_id)
    }

    /// The oldest frame with a packet kept for retransmission.
    pub(super) fn oldest_frame(&self) -> Option<u64> {
        self.media.front().map(|r| r.packet.frame_id)
    }

    pub(super) fn prune(&mut self, now: Timestamp, keep: TimeDelta, keep_transport: TimeDelta) {
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
