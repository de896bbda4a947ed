//! Live runs on loopback: the three endpoints over real UDP, a few seconds each. The fault
//! cases run one after another in one test (parallel live runs would compete for the CPU
//! and for timing).

use sluice_core::link::faults::{FaultStats, FaultsConfig};
use sluice_core::link::trace::Trace;
use sluice_core::session::{build_encoder, RunConfig};
use sluice_core::sim::{RunResult, Simulation};
use sluice_core::units::{DataRate, TimeDelta, Timestamp};
use sluice_live::endpoint::Faults;
use sluice_live::session::{EncoderFactory, LiveOptions, LiveResult, LiveRun};
use sluice_live::webrtc::Transport;
use std::sync::{Arc, Mutex};

/// One live run at a time (the tests of this file would otherwise run in parallel and
/// compete for two cores and for timing).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn run(duration_s: f64, options: LiveOptions, edit: impl FnOnce(&mut RunConfig)) -> LiveResult {
    run_scheme("webrtc", duration_s, options, edit)
}

/// The tests' run: `scheme` for `duration_s` (1 s drain), a 100 kB bottleneck queue, then
/// `edit`.
fn config(scheme: &str, duration_s: f64, edit: impl FnOnce(&mut RunConfig)) -> RunConfig {
    let mut cfg =
        RunConfig { scheme_name: scheme.into(), duration_s, drain_s: 1.0, ..RunConfig::default() };
    cfg.downlink.queue_bytes = Some(100_000);
    edit(&mut cfg);
    cfg
}

fn constant_12mbps() -> Arc<Trace> {
    Arc::new(Trace::constant(DataRate::from_mbps(12), TimeDelta::from_secs(1)))
}

fn run_scheme(
    scheme: &str,
    duration_s: f64,
    mut options: LiveOptions,
    edit: impl FnOnce(&mut RunConfig),
) -> LiveResult {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cfg = config(scheme, duration_s, edit);
    let trace = constant_12mbps();
    let enc = build_encoder(&cfg).unwrap();
    if options.restart_sender_at.is_some() {
        let c = cfg.clone();
        options.encoder_factory =
            Some(EncoderFactory(Arc::new(move || build_encoder(&c).map_err(|e| e.to_string()))));
    }
    LiveRun::start(&cfg, Some(trace), None, enc, &options).unwrap().finish().unwrap()
}

/// A run's records, live or simulated (a live fault scenario replays in the simulator).
trait Records {
    fn records(&self) -> &RunResult;
}
impl Records for LiveResult {
    fn records(&self) -> &RunResult {
        &self.run
    }
}
impl Records for RunResult {
    fn records(&self) -> &RunResult {
        self
    }
}

/// Displayed frames over capture slots.
fn displayed_share(r: &impl Records) -> f64 {
    let r = r.records();
    let shown = r.frames.iter().filter(|f| f.displayed_us.is_some()).count();
    shown as f64 / (r.frames.len() + r.skips.len()).max(1) as f64
}

/// Frames captured at or after `t_s` that were displayed.
fn displayed_after(r: &impl Records, t_s: f64) -> usize {
    let t = Timestamp::from_secs_f64(t_s).as_us();
    let frames = &r.records().frames;
    frames.iter().filter(|f| f.capture_us >= t && f.displayed_us.is_some()).count()
}

/// The same scenario in the simulator: `run`'s config and trace, the model encoder.
fn replay(duration_s: f64, edit: impl FnOnce(&mut RunConfig)) -> RunResult {
    let cfg = config("webrtc", duration_s, edit);
    let enc = build_encoder(&cfg).unwrap();
    Simulation::new(&cfg, Some(constant_12mbps()), None, enc).unwrap().run()
}

/// What the path faults did in a simulated run.
fn sim_faults(r: &RunResult) -> FaultStats {
    r.summary.path_faults.expect("a run with path faults counts them")
}

fn faults(f: Faults) -> LiveOptions {
    LiveOptions { faults: f, ..LiveOptions::default() }
}

#[test]
fn webrtc_on_a_constant_link_displays_nearly_every_frame() {
    let r = run(4.0, LiveOptions::default(), |_| {});
    // Every capture slot of the 4 s is there, encoded or skipped by the frame dropper.
    let slots = r.run.frames.len() + r.run.skips.len();
    assert!(slots >= 110, "{slots} capture slots");
    // 90%, not the acceptance's 95% (tests/python/test_live.py, 10 s): in a 4 s run the
    // ramp-up weighs more, and a GCC overuse detected in it (live timing noise on two shared
    // cores; docs/results/live.md) costs a few frames to the frame dropper.
    assert!(displayed_share(&r) >= 0.9, "{} {:?}", displayed_share(&r), r.stats);
    assert_eq!(r.stats.sender_malformed + r.stats.receiver_malformed, 0, "{:?}", r.stats);
    assert_eq!(r.stats.sender_unsendable, 0);
    assert!(r.stats.feedback_messages > 40, "{:?}", r.stats);
    // Every datagram the sender put out reached the relay, and the relay forwarded them all
    // (no loss configured, the queue never overflows at this rate).
    assert_eq!(r.stats.relay_io.foreign, 0);
    assert_eq!(r.stats.receiver_io.datagrams_in, r.stats.media_packets_received);
    assert!(r.run.samples.len() >= 190, "{} samples", r.run.samples.len());
}

#[test]
fn survives_loss_reordering_duplication_blackout_restart_and_garbage() {
    // Random loss on the downlink: NACKs and retransmissions repair it.
    let r = run(3.0, LiveOptions::default(), |c| c.downlink.loss = 0.03);
    assert!(r.run.summary.retransmissions > 0, "{:?}", r.run.summary);
    assert!(displayed_share(&r) >= 0.8, "loss: {}", displayed_share(&r));

    // The path faults are the run config's: each scenario replays in the simulator, where
    // the same assertions hold.
    // Reordering: 10% of the media held back 5 ms.
    let reorder = |c: &mut RunConfig| {
        c.faults = FaultsConfig { reorder: 0.1, reorder_delay_ms: 5.0, ..FaultsConfig::default() }
    };
    let r = run(3.0, LiveOptions::default(), reorder);
    assert!(r.stats.relay_reordered > 20, "{:?}", r.stats);
    assert!(displayed_share(&r) >= 0.85, "reorder: {}", displayed_share(&r));
    let sim = replay(3.0, reorder);
    assert!(sim_faults(&sim).reordered > 20, "{:?}", sim.summary.path_faults);
    assert!(displayed_share(&sim) >= 0.85, "reorder, simulated: {}", displayed_share(&sim));

    // Duplication: 10% of the media twice.
    let duplicate =
        |c: &mut RunConfig| c.faults = FaultsConfig { duplicate: 0.1, ..FaultsConfig::default() };
    let r = run(3.0, LiveOptions::default(), duplicate);
    assert!(r.stats.relay_duplicated > 20, "{:?}", r.stats);
    assert!(displayed_share(&r) >= 0.85, "duplicate: {}", displayed_share(&r));
    assert_eq!(r.stats.receiver_malformed, 0, "duplicates are not malformed");
    let sim = replay(3.0, duplicate);
    assert!(sim_faults(&sim).duplicated > 20, "{:?}", sim.summary.path_faults);
    assert!(displayed_share(&sim) >= 0.85, "duplicate, simulated: {}", displayed_share(&sim));

    // A 2 s feedback blackout: the sender's window/keepalive carries it through and the
    // session recovers once feedback is back. The packets whose reports were lost leave the
    // bytes in flight at the first feedback after it; before that was so, they stayed in
    // flight and the congestion-window pushback skipped every other frame after the
    // blackout (15 of the 30 slots from 3.5 s displayed; now all 30 in four runs).
    let blackout = |c: &mut RunConfig| {
        c.faults = FaultsConfig { feedback_blackout_s: Some((1.0, 3.0)), ..FaultsConfig::default() }
    };
    let r = run(4.5, LiveOptions::default(), blackout);
    // The receiver sends a report every 50 ms in which media came; in the blackout the
    // congestion-window pushback skips about every other frame, so 2 s hold 27 to 32 reports
    // (the earlier `>= 30` failed on 27 and 28).
    assert!(r.stats.relay_blackout_dropped >= 20, "{:?}", r.stats);
    assert!(displayed_after(&r, 3.5) >= 25, "after the blackout: {}", displayed_after(&r, 3.5));
    let sim = replay(4.5, blackout);
    assert!(sim_faults(&sim).blackout_dropped >= 20, "{:?}", sim.summary.path_faults);
    let after = displayed_after(&sim, 3.5);
    assert!(after >= 25, "after the blackout, simulated: {after}");

    // The receiver restarts at 1.5 s: it asks for a keyframe and displays again.
    let opts = LiveOptions {
        restart_receiver_at: Some(Timestamp::from_secs_f64(1.5)),
        ..LiveOptions::default()
    };
    let r = run(3.5, opts, |_| {});
    assert_eq!(r.stats.receiver_restarts, 1);
    assert!(r.run.summary.keyframes >= 2, "a new keyframe: {:?}", r.run.summary);
    assert!(displayed_after(&r, 2.5) >= 20, "after the restart: {}", displayed_after(&r, 2.5));

    // The sender restarts at 1.5 s: a fresh one (new congestion control, encoder, pacer and
    // sequence numbers) starts a new stream with a keyframe. The receiver drops the old
    // stream's state, refuses its late packets, and displays the new stream.
    let opts = LiveOptions {
        restart_sender_at: Some(Timestamp::from_secs_f64(1.5)),
        ..LiveOptions::default()
    };
    let r = run(3.5, opts, |_| {});
    assert_eq!((r.stats.sender_restarts, r.stats.receiver_new_streams), (1, 1), "{:?}", r.stats);
    let key_after = |t_us: i64| r.run.frames.iter().any(|f| f.is_keyframe && f.capture_us >= t_us);
    assert!(key_after(1_500_000), "the new stream starts with a keyframe");
    assert!(displayed_after(&r, 2.0) >= 30, "after the restart: {}", displayed_after(&r, 2.0));
    // Both lives' records stay apart: no frame id or capture slot twice, ids in capture order.
    let ids: Vec<(u64, u64)> = r.run.frames.iter().map(|f| (f.source_index, f.frame_id)).collect();
    assert!(ids.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1), "{ids:?}");
    assert_eq!(r.stats.receiver_malformed, 0, "a new stream is not malformed");

    // Malformed datagrams from the peers' address (corrupted, truncated, random): counted,
    // never fatal.
    // How much garbage goes out follows how much the relay forwards, which a garbled report
    // the sender takes for real can halve (830 or 1720 sender datagrams in 3 s, with or
    // without this stop's changes): about 8 % of the forwarded datagrams get a malformed
    // one after them (59 to 135 in eight runs; an absolute `> 30` failed once), and 37 to
    // 52 % of those reach the receiver and are counted there. The sender gets far fewer
    // datagrams (about 21 a second, the receiver's feedback): in 3 s about 5 garbled ones
    // were expected and none came once (2026-12-07), so the run lasts 5 s (about 8.4; none
    // with a chance of 2e-4).
    let r = run(5.0, faults(Faults { garbage: 0.08, ..Faults::default() }), |_| {});
    let garbage = r.stats.relay_garbage_sent;
    let forwarded = r.stats.relay_io.datagrams_out - garbage;
    assert!(forwarded >= 300, "{:?}", r.stats);
    assert!(garbage * 25 >= forwarded, "at least 4 % of {forwarded}: {:?}", r.stats);
    assert!(r.stats.receiver_malformed * 8 >= garbage, "{:?}", r.stats);
    assert!(r.stats.sender_malformed > 0, "{:?}", r.stats);
    // A corrupted copy can still parse (a valid header with wrong numbers): the receiver
    // may NACK or ask for a keyframe on it; the session goes on.
    assert!(displayed_share(&r) >= 0.7, "garbage: {}", displayed_share(&r));
    assert!(displayed_after(&r, 2.0) >= 15, "garbage: {}", displayed_after(&r, 2.0));
}

#[test]
fn co_rtv_bottleneck_reports_reach_the_sender_over_rtcp_app() {
    let r = run_scheme("co-rtv", 2.0, LiveOptions::default(), |_| {});
    assert!(r.stats.relay_reports_sent >= 10, "{:?}", r.stats);
    assert_eq!(r.stats.sender_reports_received, r.stats.relay_reports_sent, "{:?}", r.stats);
    assert_eq!(r.stats.sender_malformed, 0);
    // Co-RTV's QoE policy skips frames while the ramp leaves no room (Salsify's rule): 4 or
    // 5 of 60 on an idle machine, 7 on a busy CI runner, where `>= 0.9` of all capture slots
    // failed once. What the reports must not cost is the frames that were sent: all but a
    // few are shown; the skips stay a minority.
    let shown = r.run.frames.iter().filter(|f| f.displayed_us.is_some()).count();
    assert!(shown as f64 >= 0.95 * r.run.frames.len() as f64, "{shown} of {}", r.run.frames.len());
    assert!(r.run.skips.len() <= 12, "skips: {:?}", r.run.skips);
    assert!(displayed_share(&r) >= 0.8, "{}", displayed_share(&r));
}

/// The smallest RTT the sender measured (the path's propagation delay and little queue),
/// in ms.
fn min_rtt_ms(samples: &[sluice_core::metrics::Sample]) -> f64 {
    samples.iter().filter_map(|s| s.rtt_us).min().unwrap() as f64 / 1e3
}

#[test]
fn an_access_delay_sits_between_the_sender_and_the_bottleneck_as_in_the_simulator() {
    // Co-RTV's topology: 20 ms from the sender to the bottleneck, crossed back by the
    // bottleneck's reports and by the receiver's feedback.
    let access = |c: &mut RunConfig| c.downlink.access_delay_ms = 20.0;
    let r = run_scheme("co-rtv", 3.0, LiveOptions::default(), access);
    assert!(r.stats.relay_reports_sent >= 10, "{:?}", r.stats);
    assert_eq!(r.stats.sender_reports_received, r.stats.relay_reports_sent);
    assert!(displayed_share(&r) >= 0.9, "{}", displayed_share(&r));
    // The sender sees the simulator's round trip: 40 ms more than without the access path
    // (the smallest RTTs: the medians carry each run's own queueing).
    let cfg = config("co-rtv", 3.0, access);
    let sim = Simulation::new(&cfg, Some(constant_12mbps()), None, build_encoder(&cfg).unwrap())
        .unwrap()
        .run();
    let without = run_scheme("co-rtv", 3.0, LiveOptions::default(), |_| {});
    let (live_ms, sim_ms) = (min_rtt_ms(&r.run.samples), min_rtt_ms(&sim.samples));
    let base_ms = min_rtt_ms(&without.run.samples);
    eprintln!(
        "smallest RTT: live {live_ms:.1} ms, simulated {sim_ms:.1} ms, live without {base_ms:.1} ms"
    );
    // A live round trip also carries the machine's own scheduling (sockets, timers, two
    // processes' worth of threads): 0.5-2.5 ms on an idle machine, 4.5 ms once on a busy
    // CI runner, where a bound of 3 ms over the simulator failed. It is never shorter than
    // the simulator's, and the access path adds its 40 ms in both.
    assert!(live_ms >= sim_ms - 1.0, "live {live_ms} ms, simulated {sim_ms} ms");
    assert!(live_ms <= sim_ms + 10.0, "live {live_ms} ms, simulated {sim_ms} ms");
    assert!((live_ms - base_ms - 40.0).abs() <= 5.0, "with {live_ms} ms, without {base_ms} ms");
}

#[test]
fn a_session_survives_spoofed_datagrams_and_counts_them() {
    // Issue 30: the relay sends, after about 1 in 5 datagrams it forwards, a spoofed one
    // from the peer's address: to the receiver a copy of a video packet claiming another
    // stream (not valid as a whole), to the sender NACKs of numbers it never sent and
    // keyframe requests (two in a row). Nobody switches streams, the NACKs and the PLIs
    // within 500 ms of an honoured one are ignored, and each is counted.
    let r = run(3.0, faults(Faults { spoof: 0.2, ..Faults::default() }), |_| {});
    let s = r.stats.spoofed;
    assert!(r.stats.relay_spoof_sent >= 10, "{:?}", r.stats);
    assert!(s.stream_packets > 0 && s.nacked_never_sent > 0 && s.plis_rate_limited > 0, "{s:?}");
    assert_eq!(r.stats.receiver_new_streams, 0, "{:?}", r.stats);
    assert_eq!(r.stats.receiver_stale_packets, 0, "{:?}", r.stats);
    // At most one keyframe per PLI_MIN_INTERVAL (500 ms) however many requests come: the
    // first, and at most 2 a second over the 3 s and the 1 s drain.
    let keyframes = r.run.frames.iter().filter(|f| f.is_keyframe).count();
    eprintln!("spoofed: {s:?}, {keyframes} keyframes, {} displayed", displayed_share(&r));
    assert!(keyframes <= 10, "{keyframes} keyframes: {s:?}");
    // A plain-RTP PLI cannot be told from the receiver's own, so the honoured ones cost what a
    // keyframe costs: the encoder's frame dropper skipped up to 10 of the 90 slots after them
    // (on a busy machine, 1 in 10 runs), which is what the rate limit bounds. Every frame
    // that was sent is displayed.
    let shown = r.run.frames.iter().filter(|f| f.displayed_us.is_some()).count();
    assert!(shown as f64 >= 0.98 * r.run.frames.len() as f64, "{shown} of {}", r.run.frames.len());
    assert!(r.run.skips.iter().all(|k| k.reason == "frame-dropper"), "{:?}", r.run.skips);
    assert!(displayed_share(&r) >= 0.8, "spoofed: {}", displayed_share(&r));
}

fn webrtc(f: Faults) -> LiveOptions {
    LiveOptions { faults: f, transport: Transport::Webrtc, ..LiveOptions::default() }
}

#[test]
fn over_webrtc_a_session_displays_nearly_every_frame() {
    // Issue 28: the same endpoints over str0m (ICE, DTLS-SRTP), their feedback from str0m's
    // transport-cc, NACK and PLI.
    let r = run(4.0, webrtc(Faults::default()), |_| {});
    let (s, x) = (r.stats.sender_webrtc.clone().unwrap(), r.stats.receiver_webrtc.clone().unwrap());
    eprintln!("webrtc: {} displayed, sender {s:?}, receiver {x:?}", displayed_share(&r));
    // ICE and DTLS were up before the session's clock started.
    assert_eq!((s.connected_us, x.connected_us), (Some(0), Some(0)), "{s:?}");
    assert_eq!(s.held_before_connect, 0, "{s:?}");
    // The rate rises from GCC's 300 kbps start (12 Mbps link): str0m's feedback drives GCC.
    // How far it gets in 4 s of real time depends on whether its probes land cleanly: the
    // second half's mean target was 3.4 and 3.8 Mbps in two of three runs on two cores and
    // above 6 Mbps in the third. Without feedback it would stay at or below the start rate.
    let late = &r.run.samples[r.run.samples.len() / 2..];
    let mean = late.iter().map(|x| x.target_rate_bps as f64).sum::<f64>() / late.len() as f64;
    assert!(mean > 2e6, "target {mean} bps");
    assert!(displayed_share(&r) >= 0.9, "{}", displayed_share(&r));
    assert_eq!(r.stats.srtp_auth_failed, 0, "{:?}", r.stats);
    // Every packet str0m sent for Sluice was mapped, and its reports name only those.
    assert_eq!(s.twcc_mapped, s.rtp_written, "{s:?}");
    assert_eq!(s.twcc_unmapped, 0, "{s:?}");
    assert!(s.twcc_reports > 40 && r.stats.feedback_messages > 40, "{s:?}");
    assert_eq!(r.stats.sender_malformed + r.stats.receiver_malformed, 0, "{:?}", r.stats);
    assert_eq!(x.rtp_undescribed, 0, "{x:?}");
}

#[test]
fn over_webrtc_spoofed_datagrams_and_a_nack_flood_change_nothing_but_a_counter() {
    // Issue 28: the relay's spoof fault against a WebRTC session, after half of the datagrams
    // it forwards: to the receiver forged copies of SRTP packets, to the sender NACKs of
    // numbers never sent and keyframe requests from the receiver's address (a flood: about
    // 100 a second). None is authentic: each is counted as failing SRTP authentication and
    // dropped; no endpoint sees any of them.
    let r = run(3.0, webrtc(Faults { spoof: 0.5, ..Faults::default() }), |_| {});
    let (s, x) = (r.stats.sender_webrtc.clone().unwrap(), r.stats.receiver_webrtc.clone().unwrap());
    eprintln!(
        "spoofed over webrtc: {} sent, sender {s:?}, receiver {x:?}, {} displayed",
        r.stats.relay_spoof_sent,
        displayed_share(&r)
    );
    let sent = r.stats.relay_spoof_sent;
    assert!(sent >= 300, "{:?}", r.stats);
    assert!(s.srtp_auth_failed > 50 && x.srtp_auth_failed > 50, "{s:?} {x:?}");
    // Every spoofed datagram that arrived before the end was counted, and nothing else.
    let failed = r.stats.srtp_auth_failed;
    assert!(failed <= sent && failed as f64 >= 0.98 * sent as f64, "{failed} of {sent}");
    // Nothing reached the endpoints: no NACK, no keyframe request, no spoof counted there.
    assert_eq!((s.nacks, s.keyframe_requests), (0, 0), "{s:?}");
    assert!(!r.stats.spoofed.any(), "{:?}", r.stats.spoofed);
    let keyframes = r.run.frames.iter().filter(|f| f.is_keyframe).count();
    assert_eq!(keyframes, 1);
    assert_eq!(r.stats.sender_malformed + r.stats.receiver_malformed, 0, "{:?}", r.stats);
    assert!(displayed_share(&r) >= 0.9, "{}", displayed_share(&r));
}
