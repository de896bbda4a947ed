//! A short TCP flow (RFC 8867 §5.7, after RFC 8868 §6.1's model of web traffic): a
//! sequence of file downloads interleaved with idle periods. Each download is a new
//! connection ([`TcpSender::download`]: its own slow start and RTT estimate) of a file of
//! uniformly 30-50 KB; the idle time after it is exponential with a mean of 10 s. The flow
//! starts in the ON state (its first download at its start time); RFC 8867's flows that
//! start OFF are flows with a later start.

use super::tcp::{TcpSender, TCP_DATAGRAM};
use super::TcpCc;
use crate::packet::{Datagram, FlowId};
use crate::rng::Rng;
use crate::sim::network::{Node, Port};
use crate::units::{DataSize, TimeDelta, Timestamp};

/// RFC 8867 §5.7 / RFC 8868 §6.1's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShortTcpConfig {
    /// File sizes are uniform in `[min_file, max_file]` (RFC 8868 §6.1: 30-50 KB).
    pub min_file: DataSize,
    /// Largest file size (RFC 8868 §6.1: 50 KB; see `min_file`).
    pub max_file: DataSize,
    /// Mean of the exponential idle period between downloads (RFC 8868 §6.1: 10 s).
    pub mean_idle: TimeDelta,
    /// The TCP congestion control (RFC 8867 §5.6-5.7: the default TCP, CUBIC).
    pub cc: TcpCc,
    /// Payload bytes per 1500-byte datagram (IPv4 + TCP with timestamps: 52 bytes).
    pub payload_per_datagram: DataSize,
}

impl Default for ShortTcpConfig {
    fn default() -> Self {
        ShortTcpConfig {
            min_file: DataSize::from_bytes(30_000),
            max_file: DataSize::from_bytes(50_000),
            mean_idle: TimeDelta::from_secs(10),
            cc: TcpCc::Cubic,
            payload_per_datagram: DataSize::from_bytes(TCP_DATAGRAM.as_bytes() - 52),
        }
    }
}

/// Counters of a short flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShortTcpStats {
    /// Downloads started so far.
    pub downloads_started: u64,
    /// Downloads acknowledged in full so far.
    pub downloads_completed: u64,
    /// Sum of the completed downloads' durations (start to last acknowledgement).
    pub download_time: TimeDelta,
}

/// The sending side of a short TCP flow (see the module documentation); its receiver is a
/// [`super::tcp::TcpReceiver`].
#[derive(Debug)]
pub struct ShortTcpSender {
    flow: FlowId,
    config: ShortTcpConfig,
    rng: Rng,
    stop: Timestamp,
    conn: Option<TcpSender>,
    conn_started: Timestamp,
    next_start: Timestamp,
    next_pn: u64,
    /// The receiver's CE count as the last connection saw it.
    ce_count: u64,
    stats: ShortTcpStats,
}

impl ShortTcpSender {
    /// A short flow `flow` whose first download starts at `start`; no download starts at or
    /// after `stop`. Its random draws come from `rng`.
    pub fn new(
        flow: FlowId,
        config: ShortTcpConfig,
        rng: Rng,
        start: Timestamp,
        stop: Timestamp,
    ) -> Self {
        ShortTcpSender {
            flow,
            config,
            rng,
            stop,
            conn: None,
            conn_started: start,
            next_start: start,
            next_pn: 0,
            ce_count: 0,
            stats: ShortTcpStats::default(),
        }
    }

    /// The flow's counters so far.
    pub fn stats(&self) -> ShortTcpStats {
        self.stats
    }

    /// Starts the next download if it is due.
    fn maybe_start(&mut self, now: Timestamp) {
        if self.conn.is_some() || now < self.next_start || now >= self.stop {
            return;
        }
        let (lo, hi) = (self.config.min_file.as_bytes(), self.config.max_file.as_bytes());
        let size = lo + (self.rng.uniform() * (hi - lo + 1) as f64) as i64;
        let per = self.config.payload_per_datagram.as_bytes().max(1);
        let packets = ((size.min(hi) + per - 1) / per) as u64;
        let mut c = TcpSender::download(self.flow, self.config.cc, now, packets, self.next_pn);
        c.set_ce_count(self.ce_count);
        self.conn = Some(c);
        self.conn_started = now;
        self.stats.downloads_started += 1;
    }

    /// Ends the current download if it is complete and draws the idle time after it.
    fn maybe_finish(&mut self, now: Timestamp) {
        if !self.conn.as_ref().is_some_and(|c| c.is_complete()) {
            return;
        }
        // Invariant: checked just above.
        let c = self.conn.take().expect("a download in progress");
        self.next_pn = c.next_packet_number();
        self.ce_count = c.ce_count();
        self.stats.downloads_completed += 1;
        self.stats.download_time += now - self.conn_started;
        let idle = self.rng.exponential(self.config.mean_idle.as_secs_f64());
        self.next_start = now + TimeDelta::from_secs_f64(idle);
    }
}

impl Node for ShortTcpSender {
    fn handle_input(&mut self, port: Port, datagram: Datagram, now: Timestamp) {
        if let Some(c) = &mut self.conn {
            c.handle_input(port, datagram, now);
        }
        self.maybe_finish(now);
    }
    fn handle_timeout(&mut self, now: Timestamp) {
        if let Some(c) = &mut self.conn {
            if c.poll_timeout() <= now {
                c.handle_timeout(now);
            }
        }
        self.maybe_finish(now);
        self.maybe_start(now);
    }
    fn poll_output(&mut self, now: Timestamp) -> Option<(Port, Datagram)> {
        self.maybe_start(now);
        self.conn.as_mut()?.poll_output(now)
    }
    fn poll_timeout(&self) -> Timestamp {
        match &self.conn {
            Some(c) => c.poll_timeout(),
            None if self.next_start < self.stop => self.next_start,
            None => Timestamp::INFINITY,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cross::tcp::TcpReceiver;
    use crate::cross::testbed::dumbbell;

    #[test]
    fn downloads_of_30_to_50_kb_alternate_with_exponential_idle_times() {
        // A 2 Mbps link, 50 ms each way, 300 s: about 30 downloads (one per ~10 s idle).
        let sender = Box::new(ShortTcpSender::new(
            4,
            ShortTcpConfig::default(),
            Rng::new(7),
            Timestamp::from_secs_f64(1.0),
            Timestamp::INFINITY,
        ));
        let mut bed = dumbbell(sender, 4, 2, 75_000, 50, 300);
        let (s, r) = (bed.sender, bed.receiver);
        let mut first_arrival = None;
        bed.run(Timestamp::from_secs_f64(300.0), |net, now| {
            if first_arrival.is_none() && net.get::<TcpReceiver>(r).unwrap().received_packets > 0 {
                first_arrival = Some(now);
            }
        });
        let net = &bed.net;
        // The first download starts at 1 s: its first datagram arrives 50 ms + 6 ms later.
        let t = first_arrival.unwrap().as_us();
        assert!((1_050_000..1_060_000).contains(&t), "{t}");
        let st = net.get::<ShortTcpSender>(s).unwrap().stats();
        assert!((18..=45).contains(&st.downloads_completed), "{st:?}");
        assert!(st.downloads_started - st.downloads_completed <= 1);
        // Each download is 21-35 datagrams: a few round trips of slow start (0.3-0.6 s).
        let mean = st.download_time.as_secs_f64() / st.downloads_completed as f64;
        assert!((0.25..0.8).contains(&mean), "mean download time {mean} s");
        // Every byte of every file arrived: 21-35 datagrams per download.
        let rx = net.get::<TcpReceiver>(r).unwrap().received_packets;
        let n = st.downloads_completed;
        assert!(rx >= 21 * n && rx <= 35 * (n + 1), "{rx} datagrams for {n} downloads");
    }
}
