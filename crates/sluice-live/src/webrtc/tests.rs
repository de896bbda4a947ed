use super::*;

/// A sender and a receiver layer wired to each other directly, in virtual time.
fn pair(origin: Instant) -> (WebRtc, WebRtc) {
    let (s_addr, r_addr) = ("127.0.0.1:40000".parse().unwrap(), "127.0.0.1:40001".parse().unwrap());
    let mut s = WebRtc::new(Side::Sender, s_addr, r_addr, origin).unwrap();
    let mut r = WebRtc::new(Side::Receiver, r_addr, s_addr, origin).unwrap();
    let offer = s.offer().unwrap();
    let answer = r.answer(&offer).unwrap();
    s.accept_answer(&answer).unwrap();
    (s, r)
}

/// Moves datagrams both ways and fires timers at `now` until nothing is left to move.
/// Exchanges datagrams between `s` and `r` at `now` until neither has any to send; returns
/// the datagrams `s` sent.
fn pump(s: &mut WebRtc, r: &mut WebRtc, now: Timestamp) -> Vec<Vec<u8>> {
    let mut sent = Vec::new();
    for _ in 0..100 {
        s.tick(now);
        r.tick(now);
        let (a, b): (Vec<_>, Vec<_>) = (s.outbox.drain(..).collect(), r.outbox.drain(..).collect());
        if a.is_empty() && b.is_empty() {
            break;
        }
        for d in a {
            r.receive(&d, now);
            sent.push(d);
        }
        for d in b {
            s.receive(&d, now);
        }
    }
    sent
}

fn connected_pair() -> (WebRtc, WebRtc, Timestamp) {
    let (mut s, mut r) = pair(Instant::now());
    let mut now = Timestamp::ZERO;
    while !(s.is_connected() && r.is_connected()) {
        assert!(now < Timestamp::from_ms(3000), "not connected in virtual time");
        pump(&mut s, &mut r, now);
        now += TimeDelta::from_ms(5);
    }
    (s, r, now)
}

/// An RTP-looking datagram: version 2, payload type `pt`, `ssrc`, sequence number `seq`.
fn rtp_like(pt: u8, ssrc: u32, seq: u16) -> Vec<u8> {
    let mut d = vec![0x80, pt];
    d.extend_from_slice(&seq.to_be_bytes());
    d.extend_from_slice(&1234u32.to_be_bytes());
    d.extend_from_slice(&ssrc.to_be_bytes());
    d.extend(std::iter::repeat_n(0xab, 200));
    d
}

#[test]
fn transport_parses_and_names_the_bad_value() {
    assert_eq!("webrtc".parse::<Transport>(), Ok(Transport::Webrtc));
    assert_eq!("rtp".parse::<Transport>(), Ok(Transport::Rtp));
    assert!("quic".parse::<Transport>().unwrap_err().contains("\"quic\""));
}

#[test]
fn forged_datagrams_are_counted_and_dropped_in_virtual_time() {
    let (mut s, mut r, now) = connected_pair();
    assert!(!r.ssrcs.is_empty(), "the offer declares the sender's SSRC");
    let ssrc = *r.ssrcs.iter().next().unwrap();
    // Forged RTP on the negotiated stream (str0m authenticates it and fails), on another
    // SSRC (dropped before str0m), and forged RTCP to the sender (a NACK's header).
    r.receive(&rtp_like(102, ssrc, 999), now);
    r.receive(&rtp_like(102, ssrc ^ 1, 999), now);
    let mut nack = vec![0x81, 205, 0, 3];
    nack.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2, 0, 5, 0, 0]);
    s.receive(&nack, now);
    pump(&mut s, &mut r, now);
    assert_eq!(r.stats.srtp_auth_failed, 2, "{:?}", r.stats);
    assert_eq!(s.stats.srtp_auth_failed, 1, "{:?}", s.stats);
    assert_eq!((r.stats.rtp_received, s.stats.nacks), (0, 0));
    // Garbage that is none of STUN, DTLS, RTP, RTCP: refused, not believed either.
    r.receive(&[7, 7, 7], now);
    assert_eq!(r.stats.rtp_received, 0);
}

#[test]
fn connects_when_the_answer_comes_late() {
    // A browser answers seconds after the offer.
    let origin = Instant::now();
    let (s_addr, r_addr) = ("127.0.0.1:40000".parse().unwrap(), "127.0.0.1:40001".parse().unwrap());
    let mut s = WebRtc::new(Side::Sender, s_addr, r_addr, origin).unwrap();
    let mut r = WebRtc::new(Side::Receiver, r_addr, s_addr, origin).unwrap();
    let offer = s.offer().unwrap();
    let answer = r.answer(&offer).unwrap();
    let mut now = Timestamp::from_ms(8000);
    s.accept_answer(&answer).unwrap();
    while !(s.is_connected() && r.is_connected()) {
        assert!(now < Timestamp::from_ms(11000), "not connected: {:?}", s.stats);
        pump(&mut s, &mut r, now);
        now += TimeDelta::from_ms(5);
    }
}

/// Pushes packet `seq` of the frame at RTP time `ts` (payload: an H.264 NAL header of
/// `nal` type).
fn push(a: &mut Assembler, ts: u32, seq: u16, marker: bool, nal: u8) {
    a.push_parts(ts, seq, marker, bytes::Bytes::from(vec![nal, 0, 0]), seq, None);
}

fn drain(a: &mut Assembler) -> Vec<(u64, u16, u16, bool)> {
    std::iter::from_fn(|| a.pop())
        .map(|m| {
            let f = m.frame.unwrap();
            let id = u32::from_be_bytes([f[0], f[1], f[2], f[3]]) as u64;
            let (i, n) = (u16::from_be_bytes([f[4], f[5]]), u16::from_be_bytes([f[6], f[7]]));
            (id, i, n, f[10] & 1 != 0)
        })
        .collect()
}

#[test]
fn a_browsers_frames_are_described_once_complete() {
    let mut a = Assembler::default();
    // Frame 0: a keyframe (STAP-A with an SPS, then FU-A), seqs 10-12.
    a.push_parts(0, 10, false, bytes::Bytes::from(vec![24, 0, 1, 0x67]), 10, Some(5));
    push(&mut a, 0, 11, false, 28);
    push(&mut a, 0, 12, true, 28);
    assert_eq!(drain(&mut a), vec![(0, 0, 3, true), (0, 1, 3, true), (0, 2, 3, true)]);
    // Frame 1 (seqs 13-14) loses 13; frame 2 (seq 15) is complete: it goes first.
    push(&mut a, 3000, 14, true, 1);
    push(&mut a, 6000, 15, true, 1);
    assert_eq!(drain(&mut a), vec![(2, 0, 1, false)]);
    // The retransmission of 13 completes frame 1; a late copy of it changes nothing.
    push(&mut a, 3000, 13, false, 1);
    assert_eq!(drain(&mut a), vec![(1, 0, 2, false), (1, 1, 2, false)]);
    push(&mut a, 3000, 13, false, 1);
    assert!(drain(&mut a).is_empty());
    let d: Vec<(u64, bool, Option<i64>)> =
        a.described.iter().map(|f| (f.frame_id, f.is_keyframe, f.capture_us)).collect();
    assert_eq!(d, vec![(0, true, Some(5)), (2, false, None), (1, false, None)]);
}

#[test]
fn padding_to_a_browser_goes_on_the_rtx_stream_and_is_reported_once() {
    use sluice_core::packet::Packet;
    use sluice_core::units::DataSize;
    let (mut s, mut r, mut now) = connected_pair();
    s.for_browser();
    // One of the core's padding packets, 1200 bytes (a probe's).
    let mut p = Packet::padding(DataSize::from_bytes(1200), now);
    p.transport_seq = 7;
    assert_eq!(rtx_padding_for(1200), 912); // 240, 240, 240 and 192 bytes of padding
    let d = wire::write_media(&p, 0, 0, 1, None).unwrap();
    s.send_media(&d, now);
    // Blank RTX padding packets (at most 240 bytes of padding each) putting the 1200 bytes
    // the core counted on the link (UDP/IP included), each mapped to the core's packet.
    let on_link: usize = pump(&mut s, &mut r, now)
        .iter()
        .filter(|d| !crate::wire::is_rtcp_type(d[1])) // RTP, not RTCP
        .map(|d| d.len() + UDP_IP_OVERHEAD.as_bytes() as usize)
        .sum();
    assert_eq!(s.stats.padding_unpadded, 0, "{:?}", s.stats);
    assert_eq!(s.stats.padding_rtx_packets, 4, "{:?}", s.stats);
    assert!((1200..1216).contains(&on_link), "{on_link} bytes on the link");
    assert!(s.twcc_to_sluice.len() as u64 == s.stats.padding_rtx_packets);
    assert!(s.twcc_to_sluice.values().all(|&t| t == 7), "{:?}", s.twcc_to_sluice);
    assert!(s.padding_leaving.is_empty());
    // The receiver's transport-cc reports: the core hears of its packet once, arrived.
    s.to_inner.clear();
    for _ in 0..60 {
        now += TimeDelta::from_ms(5);
        pump(&mut s, &mut r, now);
    }
    assert!(s.stats.twcc_reports > 0, "{:?}", s.stats);
    let sent = wire::SentNumbers { highest_transport_seq: 7, ..Default::default() };
    let reported: Vec<(u64, bool)> = s
        .to_inner
        .iter()
        .flat_map(|b| wire::read_feedback(b, &sent).unwrap())
        .filter_map(|f| match f {
            Feedback::Transport(t) => Some(t.packets),
            _ => None,
        })
        .flatten()
        .map(|p| (p.transport_seq, p.arrival_time.is_some()))
        .collect();
    assert_eq!(reported, vec![(7, true)]);
}

#[test]
fn an_sdp_parse_error_says_what_was_expected_not_a_memory_address() {
    // str0m's own error for a file that is not SDP.
    let e = SdpOffer::from_sdp_string("hello").expect_err("not SDP");
    let said = sdp_error("offer", &e);
    assert!(!said.contains("PointerOffset") && !said.contains('\n'), "{said}");
    assert!(said.starts_with("SDP offer: ") && said.contains("Expected"), "{said}");
    assert_eq!(sdp_error("answer", "no media (m-line)"), "SDP answer: no media (m-line)");
}
