//! [`Transported`]: a live endpoint over the plain or the WebRTC transport.

use super::{BrowserFrame, Side, WebRtc, WebRtcStats};
use crate::endpoint::{Endpoint, Role};
use sluice_core::units::Timestamp;

/// A live endpoint over a transport: plain (passed through) or WebRTC.
pub struct Transported<E> {
    pub inner: E,
    webrtc: Option<Box<WebRtc>>,
}

impl<E: Endpoint> Transported<E> {
    pub fn plain(inner: E) -> Self {
        Transported { inner, webrtc: None }
    }
    pub fn webrtc(inner: E, w: WebRtc) -> Self {
        Transported { inner, webrtc: Some(Box::new(w)) }
    }
    /// Sets the WebRTC layer's time zero (the session's, once its clock starts).
    pub fn set_origin(&mut self, origin: std::time::Instant) {
        if let Some(w) = self.webrtc.as_mut() {
            w.set_origin(origin);
        }
    }
    /// The WebRTC layer's counts (`None` with the plain transport).
    pub fn webrtc_stats(&self) -> Option<&WebRtcStats> {
        self.webrtc.as_ref().map(|w| &w.stats)
    }
    /// A browser's frames as the WebRTC layer described them (receiver of a browser).
    pub fn webrtc_frames(&self) -> Vec<BrowserFrame> {
        self.webrtc.as_ref().map_or_else(Vec::new, |w| w.browser_frames())
    }
    /// The peer's role for the inner endpoint.
    fn peer(side: Side) -> Role {
        match side {
            Side::Sender => Role::Receiver,
            Side::Receiver => Role::Sender,
        }
    }
    /// Hands what str0m gave for the endpoint to it.
    fn feed_inner(&mut self, now: Timestamp) {
        let Some(w) = self.webrtc.as_mut() else { return };
        let from = Self::peer(w.side);
        while let Some(b) = w.to_inner.pop_front() {
            self.inner.handle_datagram(from, &b, now);
        }
    }
}

impl<E: Endpoint> Endpoint for Transported<E> {
    fn handle_datagram(&mut self, from: Role, bytes: &[u8], now: Timestamp) {
        let Some(w) = self.webrtc.as_mut() else {
            return self.inner.handle_datagram(from, bytes, now);
        };
        if from != Self::peer(w.side) {
            w.stats.rejected += 1;
            return;
        }
        w.receive(bytes, now);
        self.feed_inner(now);
    }

    fn handle_timeout(&mut self, now: Timestamp) {
        if let Some(w) = self.webrtc.as_mut() {
            w.tick(now);
            if !w.held.is_empty() {
                w.flush_held(now);
                w.deadline = w.deadline.min(w.instant(now));
                w.tick(now);
            }
            self.feed_inner(now);
        }
        self.inner.handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Timestamp) -> Option<(Role, Vec<u8>)> {
        let Some(side) = self.webrtc.as_ref().map(|w| w.side) else {
            return self.inner.poll_transmit(now);
        };
        let peer = Self::peer(side);
        loop {
            if let Some(b) = self.webrtc.as_mut().and_then(|w| w.outbox.pop_front()) {
                return Some((peer, b));
            }
            let (to, bytes) = self.inner.poll_transmit(now)?;
            if to == Role::Monitor {
                return Some((to, bytes));
            }
            let w = self.webrtc.as_mut()?;
            match side {
                Side::Sender => {
                    w.send_media(&bytes, now);
                    // write_rtp only queues: a timeout at `now` sends it.
                    w.deadline = w.deadline.min(w.instant(now));
                    w.tick(now);
                }
                Side::Receiver => w.write_feedback(&bytes, now),
            }
            self.feed_inner(now);
        }
    }

    fn poll_timeout(&self) -> Timestamp {
        let inner = self.inner.poll_timeout();
        match &self.webrtc {
            None => inner,
            Some(w) if !w.outbox.is_empty() || !w.to_inner.is_empty() => Timestamp::ZERO,
            Some(w) => inner.min(w.timestamp(w.deadline)),
        }
    }

    fn malformed(&self) -> u64 {
        self.inner.malformed()
    }
}
