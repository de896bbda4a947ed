//! An audio flow (RFC 8867 §4: "Media type: Audio, Media codec: CBR, Media bit rate:
//! 20 Kbps"): one RTP packet of a constant-bit-rate codec every packet interval, not
//! congestion controlled, from its start to its stop. RFC 8867's test cases run one beside
//! each video flow (§5.1-5.4, 5.6-5.8); it takes little of the bottleneck, and what it
//! measures is the queueing the video flows leave it (its `flows` entry's
//! `queue_delay_ms_p95`, from the bottleneck's per-flow counters). Its receiver only takes
//! what arrives (no feedback: a CBR codec does not adapt).

use crate::packet::{Datagram, FlowId, Packet, UDP_IP_OVERHEAD};
use crate::sim::network::{Node, Port, OUT};
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};

/// RFC 8867 §4's audio source.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AudioConfig {
    /// The codec's bit rate (RFC 8867 §4: 20 Kbps).
    pub rate: DataRate,
    /// One packet each this often (20 ms: the packet time of Opus's and most voice codecs'
    /// defaults, RFC 7587 §4.2; RFC 8867 does not name one).
    pub packet_interval: TimeDelta,
    /// Per-packet overhead on top of the codec's bytes: an RTP header of 12 bytes (RFC
    /// 3550 §5.1) and UDP/IPv4.
    pub overhead: DataSize,
}

impl Default for AudioConfig {
    fn default() -> Self {
        AudioConfig {
            rate: DataRate::from_kbps(20),
            packet_interval: TimeDelta::from_ms(20),
            overhead: DataSize::from_bytes(12) + UDP_IP_OVERHEAD,
        }
    }
}

impl AudioConfig {
    /// A packet's size on the wire: the codec's bytes of one packet interval and the
    /// overhead (20 Kbps every 20 ms: 50 + 40 = 90 bytes, 36 kbps on the wire).
    pub fn packet_size(&self) -> DataSize {
        self.rate * self.packet_interval + self.overhead
    }
}

/// The sender of an audio flow: a packet every interval from `start` until `stop`.
#[derive(Debug)]
pub struct AudioSender {
    flow: FlowId,
    size: DataSize,
    interval: TimeDelta,
    next: Timestamp,
    stop: Timestamp,
    seq: u64,
}

impl AudioSender {
    /// An audio sender of `flow` with `config`: its first packet at `start`, none at or after
    /// `stop`.
    pub fn new(flow: FlowId, config: AudioConfig, start: Timestamp, stop: Timestamp) -> Self {
        AudioSender {
            flow,
            size: config.packet_size(),
            interval: config.packet_interval,
            next: start,
            stop,
            seq: 0,
        }
    }
}

impl Node for AudioSender {
    fn handle_input(&mut self, _: Port, _: Datagram, _: Timestamp) {}
    fn handle_timeout(&mut self, _: Timestamp) {}
    fn poll_output(&mut self, now: Timestamp) -> Option<(Port, Datagram)> {
        if self.next > now || self.next >= self.stop {
            return None;
        }
        let mut p = Packet::padding(self.size, now);
        p.flow = self.flow;
        p.media_seq = self.seq;
        p.transport_seq = self.seq;
        self.seq += 1;
        self.next += self.interval;
        Some((OUT, Datagram::Media(p)))
    }
    fn poll_timeout(&self) -> Timestamp {
        if self.next >= self.stop {
            Timestamp::INFINITY
        } else {
            self.next
        }
    }
}

/// The receiver of an audio flow: the end of its path (what it received is counted at the
/// bottleneck, per flow).
#[derive(Debug, Default)]
pub struct AudioReceiver;

impl Node for AudioReceiver {
    fn handle_input(&mut self, _: Port, _: Datagram, _: Timestamp) {}
    fn handle_timeout(&mut self, _: Timestamp) {}
    fn poll_output(&mut self, _: Timestamp) -> Option<(Port, Datagram)> {
        None
    }
    fn poll_timeout(&self) -> Timestamp {
        Timestamp::INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_sends_rfc_8867s_20_kbps_in_90_byte_packets_every_20_ms_until_its_stop() {
        let c = AudioConfig::default();
        assert_eq!(c.packet_size(), DataSize::from_bytes(90));
        let start = Timestamp::from_ms(1000);
        let mut s = AudioSender::new(3, c, start, Timestamp::from_ms(2000));
        assert_eq!(s.poll_timeout(), start);
        assert!(s.poll_output(Timestamp::from_ms(999)).is_none());
        let mut times = Vec::new();
        let mut t = start;
        while t < Timestamp::INFINITY {
            while let Some((_, Datagram::Media(p))) = s.poll_output(t) {
                assert_eq!((p.flow, p.size), (3, DataSize::from_bytes(90)));
                times.push(t.as_ms());
            }
            t = s.poll_timeout();
        }
        // 50 packets a second, at 1000, 1020, ..., 1980 ms.
        assert_eq!(times.len(), 50);
        assert_eq!((times[0], times[1], times[49]), (1000, 1020, 1980));
    }
}
