//! What travels between the nodes of a session: media packets (RTP-like) and feedback
//! messages (RTCP-like), wrapped in a [`Datagram`].
//!
//! Sizes are on-wire sizes: `size` includes the RTP-like header and the UDP/IP overhead
//! that the link serialises ([`PACKET_OVERHEAD`]).

use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};

/// IPv4 + UDP headers (28 bytes) counted on the link for every datagram.
pub const UDP_IP_OVERHEAD: DataSize = DataSize::from_bytes(28);
/// RTP fixed header (12) + a one-byte-header extension block carrying the transport-wide
/// sequence number (4 + 4) + Sluice's frame descriptor (frame id, packet index and count,
/// reference frame; 12 bytes): see [`crate::packetizer::RtpHeader`].
pub const RTP_HEADER_SIZE: DataSize = DataSize::from_bytes(32);
/// Per-packet overhead on the wire on top of the payload.
pub const PACKET_OVERHEAD: DataSize = DataSize::from_bytes(28 + 32);

/// Identifier of a flow through the simulated network (the video session is flow 0; cross
/// traffic takes other ids).
pub type FlowId = u32;

/// What a media-path packet carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PacketKind {
    /// A packet of an encoded video frame.
    Video,
    /// A retransmission (RTX) of the video packet with this media sequence number.
    Retransmission,
    /// Padding: no media, only bytes (probing, keeping the feedback loop alive).
    Padding,
}

/// One media-path packet (RTP-like).
#[derive(Clone, Debug, PartialEq)]
pub struct Packet {
    /// The flow it belongs to (the video session is flow 0).
    pub flow: FlowId,
    /// What it carries: video, a retransmission or padding.
    pub kind: PacketKind,
    /// Transport-wide sequence number, assigned when the packet leaves the pacer (TWCC).
    pub transport_seq: u64,
    /// Media (RTP) sequence number; a retransmission repeats the original's.
    pub media_seq: u64,
    /// The encoded frame it carries part of (0 for padding).
    pub frame_id: u64,
    /// Index of this packet within its frame and the frame's packet count.
    pub packet_index: u16,
    /// The number of packets the frame was split into (see `packet_index`).
    pub packet_count: u16,
    /// The frame this frame references (`None` for a keyframe).
    pub ref_frame_id: Option<u64>,
    /// Whether its frame is a keyframe (decodable without a reference).
    pub is_keyframe: bool,
    /// Co-RTV's "Latest Re-encoded Frame Number" (§III-B2): the first frame of the latest
    /// drop the sender reacted to when this frame was encoded (`None` before any). A frame-
    /// dropping bottleneck forwards a packet iff its frame is below the active drop or this
    /// is at or above it (§III-B4). Carried only by schemes whose bottleneck reads it (4 more
    /// header bytes, [`crate::link::bottleneck::BottleneckConfig::header_extension`]).
    pub latest_reencoded: Option<u64>,
    /// On-wire size (payload + RTP header + UDP/IP).
    pub size: DataSize,
    /// When the sender handed it to the network.
    pub send_time: Timestamp,
    /// The probe cluster this packet belongs to, if any.
    pub probe_cluster_id: Option<u32>,
    /// When the packet entered the pacer queue (for pacer-delay metrics).
    pub enqueue_time: Timestamp,
    /// Its ECN codepoint (RFC 3168): the media flows send Not-ECT (libwebrtc M119 does not
    /// use ECN); the bulk cross traffic sends ECT(0); an AQM with ECN marks CE.
    pub ecn: Ecn,
}

/// The ECN field of a packet (RFC 3168 §5; ECT(1) is not used).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ecn {
    /// Not-ECT (`00`): not ECN-capable.
    #[default]
    NotEct,
    /// ECT(0) (`10`): ECN-capable transport.
    Ect0,
    /// CE (`11`): congestion experienced, set by an AQM instead of a drop.
    Ce,
}

impl Packet {
    /// A padding packet of `size` bytes on the wire.
    pub fn padding(size: DataSize, now: Timestamp) -> Packet {
        Packet {
            flow: 0,
            kind: PacketKind::Padding,
            transport_seq: 0,
            media_seq: 0,
            frame_id: 0,
            packet_index: 0,
            packet_count: 0,
            ref_frame_id: None,
            is_keyframe: false,
            latest_reencoded: None,
            size,
            send_time: now,
            probe_cluster_id: None,
            enqueue_time: now,
            ecn: Ecn::NotEct,
        }
    }
}

/// One packet's entry in transport-wide feedback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketReport {
    /// The reported packet's transport-wide sequence number.
    pub transport_seq: u64,
    /// Arrival time in the receiver's clock; `None` if the packet was not received (yet)
    /// when the report was made.
    pub arrival_time: Option<Timestamp>,
}

/// Transport-wide congestion-control feedback (TWCC semantics: every packet in the
/// reported range, received or not, with per-packet arrival times).
#[derive(Clone, Debug, PartialEq)]
pub struct TransportFeedback {
    /// The flow whose packets are reported.
    pub flow: FlowId,
    /// Feedback counter (wraps at 255 on the wire).
    pub feedback_seq: u64,
    /// Reports sorted by transport sequence number, covering a contiguous range.
    pub packets: Vec<PacketReport>,
    /// Time from the arrival of the newest reported packet to the sending of this report,
    /// measured by the receiver (the DLSR of an RTCP receiver report; lets the sender compute
    /// RTT without sharing a clock).
    pub hold_time: TimeDelta,
    /// Packets the receiver got marked CE so far, cumulative (QUIC's ECN-CE count, RFC 9000
    /// §19.3.2; the media receivers, which do not read ECN, send 0).
    pub ecn_ce_count: u64,
}

/// A bottleneck node's report to the sender, on its own path (Co-RTV §III-B5: {Bw, QLen, D};
/// the IETF SCONE draft's periodic capacity and queue report).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BottleneckReport {
    /// The media flow the report is about, whose sender it goes to.
    pub flow: FlowId,
    /// Report counter.
    pub seq: u64,
    /// When the bottleneck made it.
    pub time: Timestamp,
    /// Bytes queued at the bottleneck (waiting and the rest of the packet being sent).
    pub queue: DataSize,
    /// The bottleneck's estimate of its rate, if the report carries one.
    pub rate: Option<DataRate>,
    /// Frames from this id on are being dropped (Co-RTV's D), if any.
    pub drop_from: Option<u64>,
}

/// RTCP-like messages to the sender: from the receiver, or from a bottleneck node.
#[derive(Clone, Debug, PartialEq)]
pub enum Feedback {
    /// Transport-wide congestion-control feedback (TWCC).
    Transport(TransportFeedback),
    /// Generic NACK: the media sequence numbers the receiver is missing.
    Nack {
        /// The flow the missing packets belong to.
        flow: FlowId,
        /// The missing media sequence numbers.
        media_seqs: Vec<u64>,
    },
    /// Picture loss indication: the receiver needs a keyframe.
    KeyframeRequest {
        /// The flow whose receiver needs a keyframe.
        flow: FlowId,
    },
    /// A bottleneck node's report.
    Bottleneck(BottleneckReport),
}

impl Feedback {
    /// Approximate on-wire size, following the RTCP formats (TWCC: 20 bytes of header plus
    /// about 2 bytes per packet of chunk and delta; NACK: 12 + 4 per lost packet; PLI: 12; a
    /// bottleneck report as RTCP APP: 12 + 4 name + 16 of fields), plus UDP/IP.
    pub fn wire_size(&self) -> DataSize {
        let body = match self {
            Feedback::Transport(fb) => 20 + 2 * fb.packets.len() as i64,
            Feedback::Nack { media_seqs, .. } => 12 + 4 * media_seqs.len() as i64,
            Feedback::KeyframeRequest { .. } => 12,
            Feedback::Bottleneck(_) => 32,
        };
        DataSize::from_bytes(body) + UDP_IP_OVERHEAD
    }

    /// The flow the message is about.
    pub fn flow(&self) -> FlowId {
        match self {
            Feedback::Transport(fb) => fb.flow,
            Feedback::Nack { flow, .. } | Feedback::KeyframeRequest { flow } => *flow,
            Feedback::Bottleneck(r) => r.flow,
        }
    }
}

/// The unit that links carry between nodes.
#[derive(Clone, Debug, PartialEq)]
pub enum Datagram {
    /// A media-path packet (of the session or of cross traffic).
    Media(Packet),
    /// A feedback message towards a sender.
    Feedback(Feedback),
}

impl Datagram {
    /// The datagram's size on the wire (for feedback, [`Feedback::wire_size`]).
    pub fn size(&self) -> DataSize {
        match self {
            Datagram::Media(p) => p.size,
            Datagram::Feedback(f) => f.wire_size(),
        }
    }
    /// The flow the datagram belongs to.
    pub fn flow(&self) -> FlowId {
        match self {
            Datagram::Media(p) => p.flow,
            Datagram::Feedback(f) => f.flow(),
        }
    }
}
