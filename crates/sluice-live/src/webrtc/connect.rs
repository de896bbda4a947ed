//! Setting up a WebRTC layer's connection (ICE, DTLS) before a session's clock starts:
//! runtime code, which reads the clock and the sockets (the layer itself, in mod.rs, is
//! sans-IO).

use super::WebRtc;
use sluice_core::units::Timestamp;
use std::time::{Duration, Instant};
use str0m::net::{Protocol, Receive};
use str0m::Input;

/// Connects two WebRTC layers (ICE, DTLS) before a session starts, as a call is set up
/// before its media flows: their datagrams go through `relay` (the relay's socket, as in
/// the session) without its link model. Runtime code: reads the clock and the sockets.
/// Fails if they are not connected within `timeout`.
pub fn handshake(
    ends: [(&mut WebRtc, &std::net::UdpSocket); 2],
    relay: &std::net::UdpSocket,
    timeout: Duration,
) -> Result<(), String> {
    let start = Instant::now();
    let [(a, a_sock), (b, b_sock)] = ends;
    let (a_addr, b_addr) = (a.local, b.local);
    for s in [a_sock, b_sock, relay] {
        s.set_nonblocking(true).map_err(|e| format!("socket: {e}"))?;
    }
    let mut buf = vec![0u8; 65_536];
    let result = loop {
        if a.connected && b.connected {
            break Ok(());
        }
        if start.elapsed() > timeout {
            break Err(format!("WebRTC: not connected after {:.1} s", timeout.as_secs_f64()));
        }
        let now = Instant::now();
        for (w, sock) in [(&mut *a, a_sock), (&mut *b, b_sock)] {
            if now >= w.deadline {
                let _ = w.rtc.handle_input(Input::Timeout(now));
                w.drain(Timestamp::ZERO);
            }
            while let Some(d) = w.outbox.pop_front() {
                let _ = sock.send_to(&d, w.remote);
            }
            while let Ok((n, _)) = sock.recv_from(&mut buf) {
                let Ok(contents) = buf[..n].try_into() else { continue };
                let input = Input::Receive(
                    Instant::now(),
                    Receive {
                        proto: Protocol::Udp,
                        source: w.remote,
                        destination: w.local,
                        contents,
                    },
                );
                let _ = w.rtc.handle_input(input);
                w.drain(Timestamp::ZERO);
            }
        }
        while let Ok((n, from)) = relay.recv_from(&mut buf) {
            let to = if from == a_addr { b_addr } else { a_addr };
            let _ = relay.send_to(&buf[..n], to);
        }
        std::thread::sleep(Duration::from_micros(500));
    };
    for s in [a_sock, b_sock, relay] {
        s.set_nonblocking(false).map_err(|e| format!("socket: {e}"))?;
    }
    result
}

/// Connects a WebRTC layer (ICE, DTLS) with a peer that runs on its own (a browser)
/// through `sock`, before a session's clock starts. Runtime code: reads the clock and the
/// socket. Fails if not connected within `timeout`.
pub fn connect(
    w: &mut WebRtc,
    sock: &std::net::UdpSocket,
    timeout: Duration,
) -> Result<(), String> {
    let start = Instant::now();
    sock.set_read_timeout(Some(Duration::from_millis(1))).map_err(|e| format!("socket: {e}"))?;
    let mut buf = vec![0u8; 65_536];
    let (mut sent, mut got) = (0u64, 0u64);
    let result = loop {
        if w.connected {
            break Ok(());
        }
        if start.elapsed() > timeout {
            break Err(format!(
                "WebRTC: not connected to {} after {:.1} s ({sent} datagrams sent, {got} received)",
                w.remote,
                timeout.as_secs_f64()
            ));
        }
        let now = Instant::now();
        if now >= w.deadline {
            let _ = w.rtc.handle_input(Input::Timeout(now));
            w.drain(Timestamp::ZERO);
        }
        while let Some(d) = w.outbox.pop_front() {
            if sock.send_to(&d, w.remote).is_ok() {
                sent += 1;
            }
        }
        if let Ok((n, from)) = sock.recv_from(&mut buf) {
            if from != w.remote {
                continue;
            }
            got += 1;
            let Ok(contents) = buf[..n].try_into() else { continue };
            let input = Input::Receive(
                Instant::now(),
                Receive { proto: Protocol::Udp, source: w.remote, destination: w.local, contents },
            );
            let _ = w.rtc.handle_input(input);
            w.drain(Timestamp::ZERO);
        }
    };
    sock.set_read_timeout(None).map_err(|e| format!("socket: {e}"))?;
    result
}
