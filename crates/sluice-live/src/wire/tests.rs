use super::*;
use sluice_core::packet::{
    BottleneckReport, Feedback, Packet, PacketKind, PacketReport, TransportFeedback,
};
use sluice_core::rng::Rng;
use sluice_core::units::{DataRate, DataSize, TimeDelta};

fn video(frame_id: u64, index: u16, count: u16, media_seq: u64, tseq: u64) -> Packet {
    let mut p = Packet::padding(DataSize::from_bytes(1260), Timestamp::ZERO);
    p.kind = PacketKind::Video;
    p.frame_id = frame_id;
    p.packet_index = index;
    p.packet_count = count;
    p.media_seq = media_seq;
    p.transport_seq = tseq;
    p.ref_frame_id = frame_id.checked_sub(1);
    p
}

#[test]
fn what_sluice_writes_is_told_apart_by_its_second_byte() {
    // RFC 5761 §4: 192-223 are RTCP; RTP's marker bit and payload type fall outside.
    assert!([192, 200, 205, 206, 223].into_iter().all(is_rtcp_type));
    assert!(![0, 96, 100, 127, 128 | 96, 191, 224, 255].into_iter().any(is_rtcp_type));
    let pli = write_feedback(&Feedback::KeyframeRequest { flow: 0 }, 0).unwrap();
    assert!(is_rtcp_type(pli[1]));
    let media = write_media(&video(1, 0, 1, 0, 0), 0, 0, 0, None).unwrap();
    assert!(!is_rtcp_type(media[1]));
}

#[test]
fn peek_rtp_reads_the_fixed_header_of_rtp_only() {
    // What Sluice writes, read back by the crate's parser and by the peek.
    let mut p = video(7, 0, 1, 65_534, 3);
    p.size = DataSize::from_bytes(300);
    let media = write_media(&p, 0, 0xDEAD_BEEF, 0, None).unwrap();
    let h = peek_rtp(&media).expect("Sluice's media is RTP");
    assert_eq!((h.payload_type, h.ssrc, h.timestamp), (PT_VIDEO, SSRC_VIDEO, 0xDEAD_BEEF));
    assert_eq!(h.sequence, 65_534);
    // A hand-made header: marker set, PT 111, sequence 0x0102, timestamp 0x03040506, SSRC
    // 0x0708090A; only the 12 fixed bytes are read (an SRTP payload after them is opaque).
    let mut b = vec![0x80, 0x80 | 111, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    let want = RtpFixedHeader {
        marker: true,
        payload_type: 111,
        sequence: 0x0102,
        timestamp: 0x0304_0506,
        ssrc: 0x0708_090A,
    };
    assert_eq!(peek_rtp(&b), Some(want));
    b.extend([0xFF; 40]);
    assert_eq!(peek_rtp(&b), Some(want));
    // Not RTP: too short, RTCP (a PLI), STUN (first byte 0), DTLS (20-63), version 1.
    let pli = write_feedback(&Feedback::KeyframeRequest { flow: 0 }, 0).unwrap();
    for not in [&b[..11], &pli[..], &[0u8; 20][..], &[22u8; 20][..], &[0x40u8; 20][..]] {
        assert_eq!(peek_rtp(not), None, "{not:?}");
    }
}

#[test]
fn unwrap_near_takes_the_nearest_cycle() {
    assert_eq!(unwrap_near(5, 16, 65_530), 65_541);
    assert_eq!(unwrap_near(65_530, 16, 65_541), 65_530);
    assert_eq!(unwrap_near(65_535, 16, 3), 65_535, "never negative");
    assert_eq!(unwrap_near(10, 16, 3 * 65_536 + 20), 3 * 65_536 + 10);
    assert_eq!(unwrap_near(0, 32, (1 << 32) - 1), 1 << 32);
    let mut u = Unwrapper::new(16);
    let mut expect = 60_000u64;
    for _ in 0..200_000 {
        let got = u.peek(expect & 0xffff);
        assert_eq!(got, expect);
        u.accept(got);
        expect += 7;
    }
}

#[test]
fn media_round_trip_keeps_every_field_and_the_size() {
    let mut reader = MediaReader::default();
    let mut p = video(70_000, 2, 5, 65_534, 65_535);
    p.latest_reencoded = Some(69_990);
    p.size = DataSize::from_bytes(1000);
    let bytes = write_media(&p, 0, 1234, 0, None).unwrap();
    assert_eq!(bytes.len() as i64 + 28, 1000);
    // The reader has seen numbers near these before.
    let mut warm = video(69_999, 0, 1, 65_530, 65_530);
    warm.size = DataSize::from_bytes(200);
    reader.read(&write_media(&warm, 0, 0, 0, None).unwrap(), Timestamp::ZERO).unwrap();
    let got = reader.read(&bytes, Timestamp::from_ms(3)).unwrap();
    let q = &got.packet;
    assert_eq!(q.kind, PacketKind::Video);
    assert_eq!((q.frame_id, q.packet_index, q.packet_count), (70_000, 2, 5));
    assert_eq!((q.media_seq, q.transport_seq), (65_534, 65_535));
    assert_eq!(q.ref_frame_id, Some(69_999));
    assert_eq!(q.latest_reencoded, Some(69_990));
    assert_eq!(q.size, DataSize::from_bytes(1000));
    assert_eq!(got.rtp_timestamp, 1234);
    // Past the 16-bit wrap.
    let mut r = video(70_001, 0, 1, 65_536 + 3, 65_536 + 4);
    r.is_keyframe = true;
    r.ref_frame_id = None;
    r.kind = PacketKind::Retransmission;
    let got = reader.read(&write_media(&r, 0, 0, 0, None).unwrap(), Timestamp::ZERO).unwrap();
    assert_eq!((got.packet.media_seq, got.packet.transport_seq), (65_539, 65_540));
    assert_eq!(got.packet.kind, PacketKind::Retransmission);
    assert!(got.packet.is_keyframe && got.packet.ref_frame_id.is_none());
    // Padding.
    let mut pad = Packet::padding(DataSize::from_bytes(61), Timestamp::ZERO);
    pad.transport_seq = 65_541;
    let got = reader.read(&write_media(&pad, 0, 0, 9, None).unwrap(), Timestamp::ZERO).unwrap();
    assert_eq!(got.packet.kind, PacketKind::Padding);
    assert_eq!(got.packet.size, DataSize::from_bytes(61));
    assert_eq!(got.packet.transport_seq, 65_541);
}

#[test]
fn feedback_round_trip() {
    let sent = SentNumbers {
        highest_transport_seq: 70_000,
        highest_media_seq: 66_000,
        highest_frame_id: 5_000,
        ..Default::default()
    };
    let arrivals = [Some(1_000_123), None, Some(1_000_400), Some(1_090_000), None, Some(1_089_000)];
    let fb = TransportFeedback {
        flow: 0,
        feedback_seq: 300,
        packets: arrivals
            .iter()
            .enumerate()
            .map(|(i, a)| PacketReport {
                transport_seq: 65_534 + i as u64,
                arrival_time: a.map(Timestamp::from_us),
            })
            .collect(),
        hold_time: TimeDelta::from_us(12_345),
        ecn_ce_count: 0,
    };
    let bytes = write_feedback(&Feedback::Transport(fb.clone()), 0).unwrap();
    let got = read_feedback(&bytes, &sent).unwrap();
    let [Feedback::Transport(g)] = &got[..] else { panic!("{got:?}") };
    assert_eq!(g.feedback_seq, 300);
    assert_eq!(g.hold_time, fb.hold_time);
    assert_eq!(g.packets.len(), fb.packets.len());
    for (a, b) in g.packets.iter().zip(&fb.packets) {
        assert_eq!(a.transport_seq, b.transport_seq);
        match (a.arrival_time, b.arrival_time) {
            (Some(x), Some(y)) => assert!((x - y).abs() <= TimeDelta::from_us(125), "{x:?} {y:?}"),
            (None, None) => {}
            other => panic!("{other:?}"),
        }
    }
    let nack = Feedback::Nack { flow: 0, media_seqs: vec![65_530, 65_531, 65_560, 65_600] };
    assert_eq!(read_feedback(&write_feedback(&nack, 0).unwrap(), &sent).unwrap(), vec![nack]);
    let pli = Feedback::KeyframeRequest { flow: 0 };
    assert_eq!(read_feedback(&write_feedback(&pli, 0).unwrap(), &sent).unwrap(), vec![pli]);
    let report = Feedback::Bottleneck(BottleneckReport {
        flow: 0,
        seq: 7,
        time: Timestamp::from_ms(4_000),
        queue: DataSize::from_bytes(45_000),
        rate: Some(DataRate::from_kbps(6_000)),
        drop_from: Some(4_990),
    });
    assert_eq!(read_feedback(&write_feedback(&report, 0).unwrap(), &sent).unwrap(), vec![report]);
}

/// Valid datagrams of every kind, to mutate.
fn corpus() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut p = video(9, 1, 3, 100, 200);
    p.latest_reencoded = Some(5);
    out.push(write_media(&p, 0, 90_000, 0, None).unwrap());
    p.size = DataSize::from_bytes(120);
    out.push(write_media(&p, 0, 90_000, 0, Some(&[0, 0, 0, 1, 0x65, 1, 2, 3])).unwrap());
    out.push(
        write_media(&Packet::padding(DataSize::from_bytes(300), Timestamp::ZERO), 0, 0, 3, None)
            .unwrap(),
    );
    let fb = TransportFeedback {
        flow: 0,
        feedback_seq: 1,
        packets: (0..40)
            .map(|i| PacketReport {
                transport_seq: 190 + i,
                arrival_time: (i % 7 != 3).then(|| Timestamp::from_us(500_000 + 900 * i as i64)),
            })
            .collect(),
        hold_time: TimeDelta::from_ms(3),
        ecn_ce_count: 0,
    };
    out.push(write_feedback(&Feedback::Transport(fb), 0).unwrap());
    out.push(
        write_feedback(&Feedback::Nack { flow: 0, media_seqs: vec![90, 91, 99, 140] }, 0).unwrap(),
    );
    out.push(write_feedback(&Feedback::KeyframeRequest { flow: 0 }, 0).unwrap());
    out.push(
        write_feedback(
            &Feedback::Bottleneck(BottleneckReport {
                flow: 0,
                seq: 1,
                time: Timestamp::from_ms(10),
                queue: DataSize::from_bytes(1),
                rate: None,
                drop_from: None,
            }),
            0,
        )
        .unwrap(),
    );
    out
}

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    let ops = 1 + rng.next_u64() % 4;
    for _ in 0..ops {
        let r = rng.next_u64();
        let pos = |rng: &mut Rng, len: usize| {
            if len == 0 {
                0
            } else {
                (rng.next_u64() % len as u64) as usize
            }
        };
        match r % 7 {
            0 if !b.is_empty() => {
                let i = pos(rng, b.len());
                b[i] ^= 1 << (rng.next_u64() % 8);
            }
            1 if !b.is_empty() => {
                let i = pos(rng, b.len());
                b[i] = rng.next_u64() as u8;
            }
            2 => {
                let n = pos(rng, b.len() + 1);
                b.truncate(n);
            }
            3 => {
                let n = (rng.next_u64() % 64) as usize;
                for _ in 0..n {
                    b.push(rng.next_u64() as u8);
                }
            }
            4 if b.len() > 4 => {
                // Interesting values in a length, count or extension byte.
                let i = pos(rng, b.len().min(40));
                b[i] = [0, 0xff, 0x7f, 0x80, 0x0f, 0x10, 0xf0, 1][(rng.next_u64() % 8) as usize];
            }
            5 if b.len() > 8 => {
                // A 16-bit field set to an extreme.
                let i = pos(rng, b.len().min(40) - 1);
                let v: u16 = [0, 0xffff, 0x8000, 0x7fff, 1][(rng.next_u64() % 5) as usize];
                b[i..i + 2].copy_from_slice(&v.to_be_bytes());
            }
            _ => {
                let n = pos(rng, 80);
                b = (0..n).map(|_| rng.next_u64() as u8).collect();
                if n > 2 && rng.next_u64().is_multiple_of(2) {
                    b[0] = 0x80 | (b[0] & 0x3f); // version 2
                }
            }
        }
    }
    b
}

/// A bounded property fuzzer (fixed seed): mutated datagrams into both entry points, media
/// and feedback, checking they never panic and that what they accept is sane.
#[test]
fn fuzz_wire_parsers_never_panic() {
    let seeds = corpus();
    let mut rng = Rng::new(0x51CE);
    let mut reader = MediaReader::default();
    let sent = SentNumbers {
        highest_transport_seq: 300,
        highest_media_seq: 120,
        highest_frame_id: 12,
        stream: 0,
    };
    let (mut accepted, mut rejected, mut caught) = (0u64, 0u64, 0u64);
    const CASES: usize = 100_000;
    for i in 0..CASES {
        let seed = &seeds[i % seeds.len()];
        let b = mutate(&mut rng, seed);
        match reader.read(&b, Timestamp::from_us(i as i64)) {
            Ok(m) => {
                accepted += 1;
                assert!(m.packet.size.as_bytes() <= (MAX_DATAGRAM + 28) as i64);
            }
            Err(WireError::ParserPanic) => caught += 1,
            Err(_) => rejected += 1,
        }
        match read_feedback(&b, &sent) {
            Ok(fbs) => {
                accepted += 1;
                for f in fbs {
                    if let Feedback::Transport(t) = f {
                        assert!(t.packets.len() <= u16::MAX as usize);
                    }
                }
            }
            Err(WireError::ParserPanic) => caught += 1,
            Err(_) => rejected += 1,
        }
    }
    eprintln!("wire fuzz: {accepted} accepted, {rejected} rejected, {caught} crate panics caught");
    assert_eq!(accepted + rejected + caught, 2 * CASES as u64);
    assert!(accepted > 1000 && rejected > 1000, "the mutations exercise both paths");
    // The prechecks keep the crates' parsers inside the buffer: nothing left to catch.
    assert_eq!(caught, 0, "a crate parser panicked on input the prechecks let through");
}

/// The H.264 depacketizer (webrtc-rs's, behind Sluice's entry point) and Sluice's Annex B
/// splitter on mutated RFC 6184 payloads: never a panic.
#[test]
fn fuzz_h264_depacketizer_never_panics() {
    let sps: Vec<u8> = vec![0x67, 0x42, 0xc0, 0x1e, 0xd9];
    let pps: Vec<u8> = vec![0x68, 0xce, 0x3c, 0x80];
    let idr: Vec<u8> =
        std::iter::once(0x65).chain((0..3000).map(|i| (i % 251) as u8 | 1)).collect();
    let mut frame = vec![0, 0, 0, 1];
    frame.extend_from_slice(&sps);
    frame.extend_from_slice(&[0, 0, 1]);
    frame.extend_from_slice(&pps);
    frame.extend_from_slice(&[0, 0, 1]);
    frame.extend_from_slice(&idr);
    let seeds = crate::h264::payloads(&frame, 4).unwrap();
    let mut rng = Rng::new(0x264);
    let (mut ok, mut rejected) = (0u64, 0u64);
    for i in 0..20_000 {
        let mut parts: Vec<bytes::Bytes> =
            seeds.iter().map(|p| bytes::Bytes::from(p.clone())).collect();
        let k = i % parts.len();
        parts[k] = bytes::Bytes::from(mutate(&mut rng, &seeds[k]));
        if rng.next_u64().is_multiple_of(4) {
            parts.swap(0, k);
        }
        match crate::h264::depacketize(&parts) {
            Ok(_) => ok += 1,
            Err(WireError::ParserPanic) => panic!("the crate's depacketizer panicked: {parts:?}"),
            Err(_) => rejected += 1,
        }
        let _ = crate::h264::nal_units(&mutate(&mut rng, &frame[..64]));
    }
    assert_eq!(ok + rejected, 20_000);
    assert!(ok > 100 && rejected > 100, "{ok} {rejected}");
}

#[test]
fn a_restarted_senders_stream_replaces_the_old_one_and_feedback_names_its_stream() {
    let mut reader = MediaReader::default();
    let old = video(500, 0, 1, 40_000, 40_000);
    let got = reader.read(&write_media(&old, 0, 0, 0, None).unwrap(), Timestamp::ZERO).unwrap();
    assert_eq!((got.stream, got.packet.transport_seq), (0, 40_000));
    // The restarted sender's stream 1 numbers from 0 again: read afresh, not unwrapped
    // against stream 0's numbers.
    let new = video(501, 0, 1, 0, 0);
    let got = reader.read(&write_media(&new, 1, 0, 0, None).unwrap(), Timestamp::ZERO).unwrap();
    assert_eq!((got.stream, got.packet.transport_seq, got.packet.frame_id), (1, 0, 501));
    let mut pad = Packet::padding(DataSize::from_bytes(61), Timestamp::ZERO);
    pad.transport_seq = 1;
    let got = reader.read(&write_media(&pad, 1, 0, 0, None).unwrap(), Timestamp::ZERO).unwrap();
    assert_eq!((got.stream, got.packet.transport_seq), (1, 1));
    // A late packet of the old stream is refused, and does not disturb the new one.
    let late = video(499, 0, 1, 39_999, 39_999);
    let err = reader.read(&write_media(&late, 0, 0, 0, None).unwrap(), Timestamp::ZERO);
    assert_eq!(err.unwrap_err(), WireError::StaleStream);
    let next = video(502, 0, 1, 2, 2);
    let got = reader.read(&write_media(&next, 1, 0, 0, None).unwrap(), Timestamp::ZERO).unwrap();
    assert_eq!(got.packet.transport_seq, 2);
    // Any stream not seen before is a new one, whatever its number (a sending process picks
    // its own); the streams left behind stay refused.
    let third = video(0, 0, 1, 0, 0);
    let got = reader.read(&write_media(&third, 0x0a, 0, 0, None).unwrap(), Timestamp::ZERO);
    assert_eq!(got.unwrap().stream, 0x0a);
    for old in [0, 1] {
        let late = video(503, 0, 1, 3, 3);
        let err = reader.read(&write_media(&late, old, 0, 0, None).unwrap(), Timestamp::ZERO);
        assert_eq!(err.unwrap_err(), WireError::StaleStream);
    }
    assert_eq!(next_stream(MAX_STREAMS - 1), 0);
    // Feedback names the stream it is about; a sender drops feedback about another one.
    let sent = SentNumbers { stream: 1, highest_transport_seq: 10, ..Default::default() };
    let pli = Feedback::KeyframeRequest { flow: 0 };
    assert!(read_feedback(&write_feedback(&pli, 0).unwrap(), &sent).unwrap().is_empty());
    assert_eq!(read_feedback(&write_feedback(&pli, 1).unwrap(), &sent).unwrap(), vec![pli]);
    let nack = Feedback::Nack { flow: 0, media_seqs: vec![3] };
    assert!(read_feedback(&write_feedback(&nack, 0).unwrap(), &sent).unwrap().is_empty());
    let fb = TransportFeedback {
        flow: 0,
        feedback_seq: 1,
        packets: vec![PacketReport { transport_seq: 5, arrival_time: Some(Timestamp::ZERO) }],
        hold_time: TimeDelta::ZERO,
        ecn_ce_count: 0,
    };
    let stale = write_feedback(&Feedback::Transport(fb.clone()), 0).unwrap();
    assert!(read_feedback(&stale, &sent).unwrap().is_empty());
    assert_eq!(
        read_feedback(&write_feedback(&Feedback::Transport(fb), 1).unwrap(), &sent).unwrap().len(),
        1
    );
    // Stream numbers stay clear of the receiver's and the relay's SSRCs.
    for n in 0..MAX_STREAMS {
        for s in [video_ssrc(n), padding_ssrc(n)] {
            assert!(s != SSRC_RECEIVER && s != SSRC_RELAY);
        }
    }
}

#[test]
fn only_a_packet_valid_as_a_whole_switches_the_stream() {
    // Issue 30: one spoofed datagram from the sender's address, claiming another stream,
    // must not move the reader off the stream it reads.
    let mut reader = MediaReader::default();
    let first = write_media(&video(500, 0, 1, 40_000, 40_000), 3, 0, 0, None).unwrap();
    assert_eq!(reader.read(&first, Timestamp::ZERO).unwrap().stream, 3);
    // Stream 9's SSRC without a frame descriptor; with a part beyond the frame's count.
    let spoof = spoofed_media(&first, 9).unwrap();
    assert_eq!(reader.read(&spoof, Timestamp::ZERO).unwrap_err(), WireError::SpoofedStream);
    let bad_part = write_media(&video(0, 5, 2, 0, 0), 9, 0, 0, None).unwrap();
    assert_eq!(reader.read(&bad_part, Timestamp::ZERO).unwrap_err(), WireError::SpoofedStream);
    assert_eq!(reader.stream(), Some(3));
    // The stream's own packets go on as before (unwrapped against its numbers), and stream
    // 9 is not among those left behind: a real restart to it is still followed.
    let next = write_media(&video(501, 0, 1, 40_001, 40_001), 3, 0, 0, None).unwrap();
    assert_eq!(reader.read(&next, Timestamp::ZERO).unwrap().packet.transport_seq, 40_001);
    let real = write_media(&video(0, 0, 1, 0, 0), 9, 0, 0, None).unwrap();
    assert_eq!(reader.read(&real, Timestamp::ZERO).unwrap().stream, 9);
    // The first packet a reader sees is not a switch: a bad one is just malformed.
    let mut fresh = MediaReader::default();
    assert!(matches!(fresh.read(&spoof, Timestamp::ZERO), Err(WireError::MissingExtension(_))));
}
