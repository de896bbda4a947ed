//! The WebRTC transport (issue 28): Sluice's endpoints over ICE, DTLS-SRTP and SDP, with
//! str0m (sans-IO, RTP mode) doing the WebRTC parts.
//!
//! [`Transported`] wraps a sans-IO endpoint ([`SenderEndpoint`](crate::endpoint::SenderEndpoint)
//! or [`ReceiverEndpoint`](crate::endpoint::ReceiverEndpoint)) and is itself one: with the
//! plain transport it passes everything through; with [`WebRtc`] it translates between the
//! endpoint's plain RTP/RTCP ([`crate::wire`]) and str0m, so that the endpoints, their
//! packetizer, pacer and controllers stay unchanged.
//!
//! * Sender side: each media datagram the endpoint sends is taken apart
//!   ([`wire::media_parts`]) and written with `StreamTx::write_rtp` on the negotiated H.264
//!   payload type. str0m numbers the RTP stream itself (this layer keeps the mapping to
//!   Sluice's media sequence numbers, so a retransmission goes out with its original number)
//!   and assigns the transport-wide sequence number (its `RtpTx` raw event tells which).
//!   Incoming transport-cc feedback, NACK and PLI become Sluice's feedback and are handed to
//!   the endpoint as its RTCP, through the same parser and spoof screening as the plain
//!   transport. Transport-cc has no hold time (Sluice's `SLFB`): it is estimated from the
//!   reports' lag (`WebRtc::on_twcc`). Sluice's frame descriptor and Co-RTV's latest re-encoded number travel in
//!   two header extensions of Sluice's own (`urn:x-sluice:*`), negotiated in SDP; padding
//!   packets go on the video stream, marked as padding in that descriptor (to a browser:
//!   on the RTX stream, [`WebRtc::for_browser`]).
//! * Receiver side: str0m's decrypted RTP packets are put together again as Sluice's RTP
//!   and given to the endpoint. str0m sends transport-cc feedback and NACKs itself (there is
//!   no API to send one's own), so the endpoint's transport feedback and NACKs are dropped
//!   (counted); its keyframe requests go out as PLI.
//! * Every datagram str0m does not accept as authentic SRTP/SRTCP is counted and dropped
//!   ([`WebRtcStats::srtp_auth_failed`]); an exact copy of one it accepted before counts as
//!   replayed instead (the relay's duplication fault makes those).
//!
//! Time: str0m wants `Instant`s; the layer maps the session's [`Timestamp`]s onto an origin
//! `Instant` it is given (arithmetic only: it reads no clock). Limits: no restarts of the
//! sender's stream (its SSRC changes, str0m's does not), no bottleneck reports (a relay
//! cannot write SRTCP).

mod assembler;
mod connect;
mod ext;
mod feedback;
mod transported;

pub use assembler::{Assembler, BrowserFrame};
pub use connect::{connect, handshake};
use ext::*;
pub use ext::{EXT_URI_FRAME, EXT_URI_LATEST};
pub use transported::Transported;

use crate::wire::{self, MediaParts, SentNumbers, Unwrapper};
use sluice_core::cc::rtt::WindowedMin;
use sluice_core::packet::{Feedback, UDP_IP_OVERHEAD};
use sluice_core::units::{TimeDelta, Timestamp};
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use str0m::change::{SdpAnswer, SdpOffer, SdpPendingOffer};
use str0m::format::Codec;
use str0m::media::{Direction, KeyframeRequestKind, MediaKind, Mid, Pt};
use str0m::net::{Protocol, Receive};
use str0m::rtp::rtcp::Rtcp;
use str0m::rtp::{Extension, ExtensionValues, RawPacket, RtpWrite, SeqNo};
use str0m::{Candidate, Event, Input, Output, Rtc, RtcConfig};

/// The transport of a live endpoint's media and feedback.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// Plain RTP/RTCP (Sluice's wire format, ffmpeg can play it).
    #[default]
    Rtp,
    /// WebRTC: ICE, DTLS-SRTP, SDP offer/answer (str0m).
    Webrtc,
}

impl std::str::FromStr for Transport {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "rtp" => Ok(Transport::Rtp),
            "webrtc" => Ok(Transport::Webrtc),
            _ => Err(format!("unknown transport {s:?} (expected rtp or webrtc)")),
        }
    }
}

/// Refuses a scheme whose bottleneck sends reports over WebRTC: a relay cannot write
/// SRTCP, so the sender could not believe them.
pub fn check_scheme(
    scheme_name: &str,
    scheme: &sluice_core::scheme::SchemeConfig,
) -> Result<(), sluice_core::session::ConfigError> {
    if scheme.bottleneck.drops_frames() {
        return Err(sluice_core::session::ConfigError(format!(
            "scheme {scheme_name} needs the bottleneck's reports, which a relay cannot send \
             over WebRTC (DTLS-SRTP): use --transport rtp"
        )));
    }
    Ok(())
}

/// Which end of the media the layer serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Sends media, receives feedback; full ICE agent, offers.
    Sender,
    /// Receives media, sends feedback; ICE-lite, answers.
    Receiver,
}

/// What the WebRTC layer counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WebRtcStats {
    /// RTP/RTCP datagrams that str0m did not accept as authentic (SRTP/SRTCP authentication
    /// failed, or an unknown stream): counted and dropped, never believed.
    pub srtp_auth_failed: u64,
    /// Exact copies of datagrams it accepted before (replays), dropped.
    pub srtp_replayed: u64,
    /// Datagrams str0m refused outright (not STUN, DTLS, RTP or RTCP) or failed on.
    pub rejected: u64,
    /// When ICE and DTLS were up (µs of session time).
    pub connected_us: Option<i64>,
    /// Media packets held until the connection was up, and those dropped (queue full).
    pub held_before_connect: u64,
    pub dropped_before_connect: u64,
    /// Sender: RTP packets written to str0m (`write_rtp`; padding on the RTX stream counts in
    /// `padding_rtx_packets` instead), and the transport-wide numbers mapped to Sluice's:
    /// one for each of either.
    pub rtp_written: u64,
    pub twcc_mapped: u64,
    /// Sender: transport-cc reports received, and reported numbers that map to no packet
    /// of Sluice's.
    pub twcc_reports: u64,
    pub twcc_unmapped: u64,
    /// Sender: NACKs received, and NACKed numbers str0m never sent for Sluice.
    pub nacks: u64,
    pub nacked_unknown: u64,
    /// Sender: keyframe requests received.
    pub keyframe_requests: u64,
    /// Receiver: RTP packets str0m delivered, and those without Sluice's descriptor.
    pub rtp_received: u64,
    pub rtp_undescribed: u64,
    /// Receiver: the endpoint's feedback not sent because str0m sends its own (transport-cc,
    /// NACK), and keyframe requests sent as PLI.
    pub feedback_replaced: u64,
    pub plis_sent: u64,
    /// Sender to a browser: padding packets sent on the RTX stream, and the core's padding
    /// packets that went out as an empty packet on the media stream instead (no RTX
    /// negotiated).
    #[serde(default)]
    pub padding_rtx_packets: u64,
    #[serde(default)]
    pub padding_unpadded: u64,
}

/// Bytes on the link of one of str0m's blank RTX padding packets besides its padding: the
/// RTP header with its extensions (34), the SRTP tag (10) and UDP/IPv4 (28). A test holds it
/// to what str0m writes.
const RTX_PADDING_OVERHEAD: usize = 72;
/// Most padding bytes in one blank RTX packet (str0m's `MAX_BLANK_PADDING_PAYLOAD_SIZE`).
const RTX_PADDING_MAX: usize = 240;

/// The padding to ask str0m for so that its blank RTX packets put `wire` bytes on the link
/// (what the core counted for its padding packet, UDP/IP included): each of them carries
/// [`RTX_PADDING_OVERHEAD`] bytes besides its padding.
fn rtx_padding_for(wire: usize) -> usize {
    let packets = wire.div_ceil(RTX_PADDING_MAX + RTX_PADDING_OVERHEAD);
    wire.saturating_sub(packets * RTX_PADDING_OVERHEAD).max(1)
}

/// The window of the minimum report lag the hold time is estimated against.
const HOLD_WINDOW: TimeDelta = TimeDelta::from_secs(10);

/// Datagrams kept to tell a replay from a forgery.
const REPLAY_MEMORY: usize = 8192;
/// Media packets held before the connection is up.
const HOLD_MAX: usize = 4096;
/// Mappings kept (wire numbers to Sluice's).
const MAP_KEPT: usize = 32_768;

/// A str0m session serving one Sluice endpoint.
pub struct WebRtc {
    side: Side,
    rtc: Rtc,
    origin: Instant,
    local: SocketAddr,
    /// Where the peer's datagrams come from and ours go (the relay, on loopback).
    remote: SocketAddr,
    pending_offer: Option<SdpPendingOffer>,
    mid: Option<Mid>,
    pt: Option<Pt>,
    connected: bool,
    deadline: Instant,
    outbox: VecDeque<Vec<u8>>,
    /// Sender: media held until connected.
    held: VecDeque<Vec<u8>>,
    /// Sender: next RTP sequence number on the wire (str0m's stream), wire numbers to
    /// Sluice's media sequence numbers, and the Sluice transport numbers written but not yet
    /// seen leaving (wire number, Sluice's transport number).
    next_wire_seq: u64,
    media_unwrap: Unwrapper,
    transport_unwrap: Unwrapper,
    wire_to_media: BTreeMap<u64, u64>,
    /// Browser receivers: a retransmission repeats its original wire number (libwebrtc's
    /// packet buffer assembles a frame from consecutive numbers) and padding goes out on the
    /// RTX stream (libwebrtc's padding); see [`WebRtc::for_browser`].
    browser: bool,
    media_to_wire: BTreeMap<u64, u64>,
    /// Receiver of a browser's stream: its frames, told apart by RTP timestamp and marker,
    /// numbered and described as Sluice's ([`Assembler`]).
    assembler: Option<Assembler>,
    leaving: VecDeque<(u16, u64)>,
    /// Sender to a browser: the core's padding packets written as RTX padding and not yet
    /// all sent (Sluice's transport number, padding bytes still to leave), and the RTX SSRC
    /// they leave on. str0m splits a request into packets of at most 240 bytes of padding;
    /// each maps back to the core's one packet.
    padding_leaving: VecDeque<(u64, usize)>,
    rtx_ssrc: Option<u32>,
    twcc_unwrap: Unwrapper,
    twcc_to_sluice: BTreeMap<u64, u64>,
    /// Sender: the Sluice stream (from the SSRC it sends), for the feedback it is given.
    stream: u32,
    sent: SentNumbers,
    feedback_seq: u64,
    /// Sender: `now - newest arrival` of the transport-cc reports, its running minimum, and
    /// the hold time estimated for the report being handed on.
    report_lag: WindowedMin,
    hold_time: TimeDelta,
    /// Receiver: padding sequence numbers for the rebuilt padding packets.
    padding_seq: u16,
    /// Receiver: the SSRCs the offer declared (empty: any). An RTP datagram of another is
    /// dropped before str0m sees it: str0m maps a new SSRC to a stream by its mid header
    /// extension before it authenticates the packet, so one forged packet would move the
    /// stream to the forger's SSRC.
    ssrcs: HashSet<u32>,
    /// What str0m accepted lately: RTP by (SSRC, sequence number), RTCP by its bytes' hash;
    /// to tell a replay (or a late duplicate) from a forgery.
    accepted: HashSet<u64>,
    accepted_order: VecDeque<u64>,

    /// Raw RTP/RTCP receptions seen while draining (to tell whether an input was accepted).
    rx_seen: u64,
    /// Events for the wrapped endpoint, collected while draining.
    to_inner: VecDeque<Vec<u8>>,
    pub stats: WebRtcStats,
}

fn rtc_config(side: Side) -> RtcConfig {
    let mut cfg = RtcConfig::new()
        .clear_codecs()
        .enable_h264(true)
        .set_rtp_mode(true)
        .enable_raw_packets(true)
        .set_ice_lite(side == Side::Receiver);
    let map = cfg.extension_map();
    map.set(EXT_ID_FRAME, Extension::with_serializer(EXT_URI_FRAME, FrameSerializer));
    map.set(EXT_ID_LATEST, Extension::with_serializer(EXT_URI_LATEST, LatestSerializer));
    // A browser sender's capture times (the harness's sender page offers it).
    map.set(EXT_ID_CAPTURE, Extension::AbsoluteCaptureTime);
    cfg
}

fn rtp_key(ssrc: u32, seq: u16) -> u64 {
    (1 << 63) | ((ssrc as u64) << 16) | seq as u64
}

fn hash(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

impl WebRtc {
    /// A session for `side` on socket address `local`, whose peer's datagrams come from
    /// (and go to) `remote`; `origin` is the session's time zero.
    pub fn new(
        side: Side,
        local: SocketAddr,
        remote: SocketAddr,
        origin: Instant,
    ) -> Result<Self, String> {
        // The crypto provider (aws-lc-rs): installing it twice is harmless.
        str0m::crypto::from_feature_flags().install_process_default();
        let mut rtc = rtc_config(side).build(origin);
        let c = Candidate::host(local, "udp").map_err(|e| format!("ICE candidate {local}: {e}"))?;
        rtc.add_local_candidate(c);
        Ok(WebRtc {
            side,
            rtc,
            origin,
            local,
            remote,
            pending_offer: None,
            mid: None,
            pt: None,
            connected: false,
            deadline: origin,
            outbox: VecDeque::new(),
            held: VecDeque::new(),
            next_wire_seq: 1,
            media_unwrap: Unwrapper::new(16),
            transport_unwrap: Unwrapper::new(16),
            wire_to_media: BTreeMap::new(),
            browser: false,
            media_to_wire: BTreeMap::new(),
            assembler: None,
            leaving: VecDeque::new(),
            padding_leaving: VecDeque::new(),
            rtx_ssrc: None,
            twcc_unwrap: Unwrapper::new(16),
            twcc_to_sluice: BTreeMap::new(),
            stream: 0,
            sent: SentNumbers::default(),
            feedback_seq: 0,
            report_lag: WindowedMin::default(),
            hold_time: TimeDelta::ZERO,
            padding_seq: 0,
            ssrcs: HashSet::new(),
            accepted: HashSet::new(),
            accepted_order: VecDeque::new(),

            rx_seen: 0,
            to_inner: VecDeque::new(),
            stats: WebRtcStats::default(),
        })
    }

    /// The sender's SDP offer (one send-only video m-line).
    pub fn offer(&mut self) -> Result<String, String> {
        let mut change = self.rtc.sdp_api();
        let mid = change.add_media(MediaKind::Video, Direction::SendOnly, None, None, None);
        let (offer, pending) = change.apply().ok_or("nothing to offer")?;
        self.mid = Some(mid);
        self.pending_offer = Some(pending);
        self.drain(Timestamp::ZERO);
        self.due_now();
        Ok(offer.to_sdp_string())
    }

    /// The receiver's answer to `offer`.
    pub fn answer(&mut self, offer: &str) -> Result<String, String> {
        self.ssrcs = offer
            .lines()
            .filter_map(|l| l.strip_prefix("a=ssrc:"))
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect();
        let offer = SdpOffer::from_sdp_string(offer).map_err(|e| sdp_error("offer", e))?;
        let answer =
            self.rtc.sdp_api().accept_offer(offer).map_err(|e| format!("SDP offer: {e}"))?;
        self.drain(Timestamp::ZERO);
        self.due_now();
        Ok(answer.to_sdp_string())
    }

    /// The sender takes the receiver's answer. Its candidates are replaced by `remote` (the
    /// address the peer's datagrams come from: the relay), as the browser harness rewrites
    /// candidates through its relay.
    pub fn accept_answer(&mut self, answer: &str) -> Result<(), String> {
        let pending = self.pending_offer.take().ok_or("no offer pending")?;
        let answer: String =
            answer.split_inclusive('\n').filter(|l| !l.starts_with("a=candidate")).collect();
        let answer = SdpAnswer::from_sdp_string(&answer).map_err(|e| sdp_error("answer", e))?;
        self.rtc
            .sdp_api()
            .accept_answer(pending, answer)
            .map_err(|e| format!("SDP answer: {e}"))?;
        let c = Candidate::host(self.remote, "udp").map_err(|e| format!("ICE candidate: {e}"))?;
        self.rtc.add_remote_candidate(c);
        self.drain(Timestamp::ZERO);
        self.due_now();
        Ok(())
    }

    /// Sends to a browser (libwebrtc) instead of Sluice's receiver: a retransmission goes
    /// out with its original RTP sequence number, padding as blank RTX padding packets of
    /// the size the core counted (str0m's, at most 240 bytes of padding each; each maps
    /// back to the core's one packet in transport-cc feedback).
    pub fn for_browser(&mut self) {
        self.browser = true;
        if self.side == Side::Receiver {
            self.assembler = Some(Assembler::default());
        }
    }

    /// Receiver of a browser's stream: the frames it described so far (frame id -> RTP
    /// timestamp and capture time from abs-capture-time, µs since the Unix epoch).
    pub fn browser_frames(&self) -> Vec<BrowserFrame> {
        self.assembler.as_ref().map_or_else(Vec::new, |a| a.described.clone())
    }

    /// The peer's address (where datagrams go and come from), once known.
    pub fn set_remote(&mut self, remote: SocketAddr) {
        self.remote = remote;
    }

    /// Sets the session's time zero (after [`handshake`], which runs before it).
    pub fn set_origin(&mut self, origin: Instant) {
        self.origin = origin;
    }

    fn instant(&self, t: Timestamp) -> Instant {
        self.origin + Duration::from_micros(t.as_us().max(0) as u64)
    }

    fn timestamp(&self, i: Instant) -> Timestamp {
        let d = i.saturating_duration_since(self.origin);
        Timestamp::from_us(d.as_micros().min(i64::MAX as u128 / 2) as i64)
    }

    /// Whether ICE and DTLS are up.
    pub fn is_connected(&self) -> bool {
        self.connected
    }

    /// After an SDP change (which carries no time), str0m's next timeout may say "never"
    /// until it is given one: it is due at once.
    fn due_now(&mut self) {
        self.deadline = self.deadline.min(self.origin);
    }

    /// Drains str0m's output until its next timeout (after every mutation).
    fn drain(&mut self, now: Timestamp) {
        loop {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(t)) => {
                    self.deadline = t;
                    return;
                }
                Ok(Output::Transmit(t)) => self.outbox.push_back(t.contents.to_vec()),
                Ok(Output::Event(e)) => self.on_event(e, now),
                Err(_) => {
                    self.stats.rejected += 1;
                    self.deadline = self.instant(now) + Duration::from_millis(1);
                    return;
                }
            }
        }
    }

    fn on_event(&mut self, e: Event, now: Timestamp) {
        match e {
            Event::Connected => {
                self.connected = true;
                self.stats.connected_us = Some(now.as_us());
            }
            Event::MediaAdded(m) => {
                self.mid.get_or_insert(m.mid);
            }
            Event::KeyframeRequest(_) => {
                self.stats.keyframe_requests += 1;
                self.give_inner(&Feedback::KeyframeRequest { flow: 0 });
            }
            Event::RtpPacket(p) => self.on_rtp(&p),
            Event::RawPacket(raw) => match *raw {
                RawPacket::RtpTx(h, payload) => {
                    if Some(*h.ssrc) == self.rtx_ssrc {
                        self.on_padding_tx(payload.len(), h.ext_vals.transport_cc)
                    } else {
                        self.on_rtp_tx(h.sequence_number, h.ext_vals.transport_cc)
                    }
                }
                RawPacket::RtpRx(..) => self.rx_seen += 1,
                RawPacket::RtcpRx(fb) => {
                    self.rx_seen += 1;
                    match fb {
                        Rtcp::Twcc(t) => self.on_twcc(t, now),
                        Rtcp::Nack(n) => self.on_nack(&n),
                        _ => {}
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }

    /// Receiver: a packet str0m delivered, as Sluice's RTP for the wrapped receiver.
    fn on_rtp(&mut self, p: &str0m::rtp::RtpPacket) {
        self.stats.rtp_received += 1;
        let ext = p.header.ext_vals.user_values.get::<FrameExt>().map(|f| f.0.clone());
        let latest = p.header.ext_vals.user_values.get::<LatestExt>().map(|f| f.0.clone());
        let Some(ext) = ext else {
            match self.assembler.as_mut() {
                Some(a) => {
                    a.push(p);
                    while let Some(parts) = a.pop() {
                        if let Ok(b) = wire::media_datagram(&parts) {
                            self.to_inner.push_back(b);
                        }
                    }
                }
                None => self.stats.rtp_undescribed += 1,
            }
            return;
        };
        let media_seq = u16::from_be_bytes([ext[1], ext[2]]);
        let transport_seq = p.header.ext_vals.transport_cc.unwrap_or(0);
        let parts = if ext[0] == KIND_PADDING {
            self.padding_seq = self.padding_seq.wrapping_add(1);
            MediaParts {
                payload_type: wire::PT_PADDING,
                ssrc: wire::padding_ssrc(0),
                sequence: self.padding_seq,
                timestamp: p.header.timestamp,
                marker: false,
                transport_seq,
                frame: None,
                latest_reencoded: None,
                payload: bytes::Bytes::copy_from_slice(&p.payload),
            }
        } else {
            MediaParts {
                payload_type: wire::PT_VIDEO,
                ssrc: wire::video_ssrc(0),
                sequence: media_seq,
                timestamp: p.header.timestamp,
                marker: p.header.marker,
                transport_seq,
                frame: Some(ext[3..].to_vec()),
                latest_reencoded: latest,
                payload: bytes::Bytes::copy_from_slice(&p.payload),
            }
        };
        if let Ok(b) = wire::media_datagram(&parts) {
            self.to_inner.push_back(b);
        }
    }

    fn find_pt(&mut self) -> Option<Pt> {
        if self.pt.is_none() {
            let mid = self.mid?;
            let remote = self.rtc.media(mid).map(|m| m.remote_pts().to_vec()).unwrap_or_default();
            self.pt = self
                .rtc
                .codec_config()
                .params()
                .iter()
                .filter(|p| {
                    p.spec().codec == Codec::H264 && p.spec().format.packetization_mode == Some(1)
                })
                .map(|p| p.pt())
                .find(|pt| remote.is_empty() || remote.contains(pt));
        }
        self.pt
    }

    /// Sender: one of the endpoint's media datagrams, held until the connection is up.
    fn send_media(&mut self, bytes: &[u8], now: Timestamp) {
        if !self.connected {
            if self.held.len() < HOLD_MAX {
                self.held.push_back(bytes.to_vec());
                self.stats.held_before_connect += 1;
            } else {
                self.stats.dropped_before_connect += 1;
            }
            return;
        }
        self.flush_held(now);
        self.write_media(bytes, now);
    }

    /// Connected: the media held so far goes out now.
    fn flush_held(&mut self, now: Timestamp) {
        if !self.connected {
            return;
        }
        while let Some(b) = self.held.pop_front() {
            self.write_media(&b, now);
        }
    }

    /// Sender: writes one of the endpoint's media datagrams to str0m.
    fn write_media(&mut self, bytes: &[u8], now: Timestamp) {
        let (Ok(m), Some(mid), Some(pt)) = (wire::media_parts(bytes), self.mid, self.find_pt())
        else {
            self.stats.rejected += 1;
            return;
        };
        let tseq = self.transport_unwrap.peek(m.transport_seq as u64);
        self.transport_unwrap.accept(tseq);
        let (kind, media_seq) = match m.frame {
            Some(_) => {
                if let Some(s) = wire::stream_of_video_ssrc(m.ssrc) {
                    self.stream = s;
                }
                let seq = self.media_unwrap.peek(m.sequence as u64);
                self.media_unwrap.accept(seq);
                (KIND_VIDEO, Some(seq))
            }
            None => (KIND_PADDING, None),
        };
        // To a browser, padding goes on the RTX stream, as libwebrtc pads: its padding
        // packets carry no media, so the browser's packet buffer never sees them, and they are
        // as large as the core counted them (blank packets of at most 240 bytes of padding).
        if self.browser && kind == KIND_PADDING {
            let wire = bytes.len() + UDP_IP_OVERHEAD.as_bytes() as usize;
            if self.write_rtx_padding(mid, tseq, rtx_padding_for(wire), now) {
                return;
            }
            self.stats.padding_unpadded += 1;
        }
        // Every transmission gets the next number of str0m's stream, a retransmission too:
        // str0m's receiver refuses a number more than 100 behind its newest (its replay and
        // NACK window), which a retransmission at video rates often is. The NACKs of either
        // number map back to Sluice's media sequence number. A browser gets a retransmission
        // under its original number.
        let original = if self.browser {
            media_seq.and_then(|s| self.media_to_wire.get(&s).copied())
        } else {
            None
        };
        let wire_seq = original.unwrap_or_else(|| {
            self.next_wire_seq += 1;
            self.next_wire_seq - 1
        });
        if let Some(s) = media_seq {
            self.wire_to_media.insert(wire_seq, s);
            while self.wire_to_media.len() > MAP_KEPT {
                self.wire_to_media.pop_first();
            }
            if self.browser {
                self.media_to_wire.entry(s).or_insert(wire_seq);
                while self.media_to_wire.len() > MAP_KEPT {
                    self.media_to_wire.pop_first();
                }
            }
        }
        let mut ext = vec![kind];
        ext.extend_from_slice(&m.sequence.to_be_bytes());
        if let Some(f) = &m.frame {
            ext.extend_from_slice(f);
        }
        let mut ev = ExtensionValues::default();
        ev.user_values.set(FrameExt(ext));
        if let Some(l) = m.latest_reencoded {
            ev.user_values.set(LatestExt(l));
        }
        let at = self.instant(now);
        let mut api = self.rtc.direct_api();
        let Some(tx) = api.stream_tx_by_mid(mid, None) else {
            self.stats.rejected += 1;
            return;
        };
        // Padding without an RTX stream: an empty packet (its bytes are not what the core
        // counted).
        let payload =
            if self.browser && kind == KIND_PADDING { Vec::new() } else { m.payload.to_vec() };
        tx.write_rtp(
            RtpWrite::new(pt, SeqNo::from(wire_seq), m.timestamp, at, payload)
                .marker(m.marker)
                .nackable(false)
                .ext_vals(ev),
        );
        self.leaving.push_back((wire_seq as u16, tseq));
        self.stats.rtp_written += 1;
        self.drain(now);
    }

    /// Sender to a browser: `bytes` of padding for the core's padding packet `tseq` on the
    /// RTX stream ([`rtx_padding_for`]); false if the stream has none (no RTX negotiated).
    fn write_rtx_padding(&mut self, mid: Mid, tseq: u64, bytes: usize, now: Timestamp) -> bool {
        let rtx = {
            let mut api = self.rtc.direct_api();
            let Some(tx) = api.stream_tx_by_mid(mid, None) else { return false };
            let rtx = tx.rtx();
            if rtx.is_none() || !tx.write_padding(bytes) {
                return false;
            }
            rtx
        };
        self.rtx_ssrc = rtx.map(|s| *s);
        self.padding_leaving.push_back((tseq, bytes));
        self.drain(now);
        true
    }

    /// Receiver: one of the endpoint's feedback datagrams.
    fn write_feedback(&mut self, bytes: &[u8], now: Timestamp) {
        let Ok(fbs) = wire::read_feedback(bytes, &self.sent) else { return };
        for f in fbs {
            match f {
                Feedback::KeyframeRequest { .. } => {
                    let Some(mid) = self.mid else { continue };
                    let mut api = self.rtc.direct_api();
                    if let Some(rx) = api.stream_rx_by_mid(mid, None) {
                        rx.request_keyframe(KeyframeRequestKind::Pli);
                        self.stats.plis_sent += 1;
                    }
                    self.drain(now);
                }
                _ => self.stats.feedback_replaced += 1,
            }
        }
    }

    /// A datagram from the peer at `now`.
    fn receive(&mut self, bytes: &[u8], now: Timestamp) {
        let Ok(contents) = bytes.try_into() else {
            self.stats.rejected += 1;
            return;
        };
        let srtp = bytes.len() >= 12 && (128..192).contains(&bytes[0]);
        let rtcp = srtp && wire::is_rtcp_type(bytes[1]);
        let key = if srtp && !rtcp {
            let ssrc = u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            if self.connected && !self.ssrcs.is_empty() && !self.ssrcs.contains(&ssrc) {
                // A stream nobody negotiated: never authentic (see `ssrcs`).
                self.stats.srtp_auth_failed += 1;
                return;
            }
            rtp_key(ssrc, u16::from_be_bytes([bytes[2], bytes[3]]))
        } else {
            hash(bytes)
        };
        let input = Input::Receive(
            self.instant(now),
            Receive {
                proto: Protocol::Udp,
                source: self.remote,
                destination: self.local,
                contents,
            },
        );
        let before = self.rx_seen;
        if self.rtc.handle_input(input).is_err() {
            self.stats.rejected += 1;
        }
        self.drain(now);
        if !srtp || !self.connected {
            return;
        }
        if self.rx_seen > before {
            self.remember(key);
        } else if self.accepted.contains(&key) {
            self.stats.srtp_replayed += 1;
        } else {
            self.stats.srtp_auth_failed += 1;
        }
    }

    fn remember(&mut self, key: u64) {
        if self.accepted.insert(key) {
            self.accepted_order.push_back(key);
            if self.accepted_order.len() > REPLAY_MEMORY {
                if let Some(old) = self.accepted_order.pop_front() {
                    self.accepted.remove(&old);
                }
            }
        }
    }

    fn tick(&mut self, now: Timestamp) {
        if self.instant(now) >= self.deadline {
            if self.rtc.handle_input(Input::Timeout(self.instant(now))).is_err() {
                self.stats.rejected += 1;
            }
            self.drain(now);
        }
    }
}

/// str0m's SDP parse error as one line for a user: the parser's position is a memory address
/// (`PointerOffset(0x7f...)`), which says nothing; the rest (what it expected, a line each)
/// does, joined with "; ".
fn sdp_error(what: &str, e: impl std::fmt::Display) -> String {
    let text = e.to_string();
    let at = text.find(" at PointerOffset(");
    let text = match at.and_then(|a| text[a..].find(')').map(|b| (a, a + b))) {
        Some((a, b)) => format!("{}{}", &text[..a], &text[b + 1..]),
        None => text,
    };
    // The parser says each thing on a line of its own.
    let parts: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    format!("SDP {what}: {}", parts.join("; "))
}

#[cfg(test)]
mod tests;
