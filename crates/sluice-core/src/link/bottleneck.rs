//! Bottleneck behaviours: what the queue at the bottleneck link does besides serving
//! packets. The plain one is Mahimahi's drop-tail; others run timers, look at the service so
//! far, remove packets and report to the sender over the bottleneck's own path (the link's
//! report port), through the [`QueueDiscipline`] seam.

use super::frame_drop::CoRtvBottleneckConfig;
use super::oracle::FdccReportConfig;
use super::queue_report::{served_capacity, QueueReporter};
use super::{DropTail, QueueDiscipline, QueueLimit};
use crate::packet::FlowId;
use crate::units::{DataSize, TimeDelta};
use serde::{Deserialize, Serialize};

/// The bottleneck's behaviour, part of a scheme.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum BottleneckConfig {
    /// Drop-tail at the path's queue limit (Mahimahi).
    /// The default. (A variant with no fields, written `{}` so that serde refuses other keys
    /// beside `kind`, which it ignores for a unit variant of an internally tagged enum.)
    DropTail {},
    /// Drop-tail that reports its queue and its capacity over a recent window to the sender,
    /// periodically: the in-band report of the IETF SCONE draft (capacity and queue length,
    /// e.g. every 100 ms) and the periodic part of Co-RTV's feedback (§III-B5).
    QueueReport {
        /// Report period (SCONE draft's example: 100 ms).
        #[serde(default = "default_report_interval_ms")]
        interval_ms: f64,
        /// The capacity reported is the link's over this last window (Co-RTV §III-B3's w:
        /// 50 ms).
        #[serde(default = "default_rate_window_ms")]
        rate_window_ms: f64,
    },
    /// Co-RTV's frame-dropping bottleneck (§III-B, Alg. 1; `link/frame_drop.rs`): drops whole
    /// frames whose gain is positive, recovers forwarding by the latest-re-encoded rule and
    /// reports `{Bw, QLen, D}` on a drop and `QLen` every `RTT_BN`.
    CoRtv(CoRtvBottleneckConfig),
    /// FDCC's oracle (§V-A, Eq. 9; `link/oracle.rs`): drop-tail that reports the trace's
    /// actual future capacity and the queue every `RTT_BN`.
    Fdcc(FdccReportConfig),
}

/// What a bottleneck behaviour knows about its run besides the queue: the frame rate and its
/// path's round trip to the sender.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BottleneckEnv {
    /// The video's frame rate (Co-RTV's FR).
    pub fps: f64,
    /// The round trip between the bottleneck and the sender (Co-RTV's `RTT_BN`): twice the
    /// sender-bottleneck delay in the simulator.
    pub rtt_to_sender: TimeDelta,
}

impl Default for BottleneckEnv {
    fn default() -> Self {
        BottleneckEnv { fps: 30.0, rtt_to_sender: TimeDelta::ZERO }
    }
}

/// The header extension Co-RTV adds to every media packet: the latest re-encoded frame
/// number, one 4-byte RTP header-extension element (§III-B2; brief M3: 32 -> 36 bytes).
pub const LATEST_REENCODED_HEADER: DataSize = DataSize::from_bytes(4);

fn default_report_interval_ms() -> f64 {
    100.0
}
fn default_rate_window_ms() -> f64 {
    50.0
}

impl Default for BottleneckConfig {
    fn default() -> Self {
        BottleneckConfig::DropTail {}
    }
}

impl BottleneckConfig {
    /// The queue discipline for a bottleneck with queue limit `limit` serving `flow`, with
    /// [`BottleneckEnv::default`].
    pub fn build(&self, limit: QueueLimit, flow: FlowId) -> Box<dyn QueueDiscipline> {
        self.build_in(limit, flow, BottleneckEnv::default())
    }

    /// The queue discipline for a bottleneck with queue limit `limit` serving `flow` in a run
    /// described by `env`.
    pub fn build_in(
        &self,
        limit: QueueLimit,
        flow: FlowId,
        env: BottleneckEnv,
    ) -> Box<dyn QueueDiscipline> {
        match self {
            BottleneckConfig::CoRtv(c) => {
                Box::new(c.build(limit, flow, env.fps, env.rtt_to_sender))
            }
            BottleneckConfig::Fdcc(c) => Box::new(c.build(limit, flow, env.rtt_to_sender)),
            BottleneckConfig::DropTail {} => Box::new(DropTail { limit }),
            BottleneckConfig::QueueReport { interval_ms, rate_window_ms } => {
                Box::new(QueueReporter::new(
                    limit,
                    flow,
                    TimeDelta::from_ms_f64(*interval_ms),
                    TimeDelta::from_ms_f64(*rate_window_ms),
                    served_capacity,
                ))
            }
        }
    }

    /// Whether the bottleneck sends anything to the sender.
    pub fn reports(&self) -> bool {
        match self {
            BottleneckConfig::DropTail {} => false,
            BottleneckConfig::CoRtv(c) => c.feedback,
            BottleneckConfig::QueueReport { .. } | BottleneckConfig::Fdcc(_) => true,
        }
    }

    /// Whether the bottleneck drops frames on purpose (its drops are counted apart from
    /// network loss: `bn_drop_rate`).
    pub fn drops_frames(&self) -> bool {
        matches!(self, BottleneckConfig::CoRtv(_))
    }

    /// Header bytes the scheme's media packets carry beyond Sluice's RTP header for this
    /// bottleneck to read: Co-RTV's latest re-encoded frame number (4 bytes); nothing for the
    /// others, whose packets keep their size.
    pub fn header_extension(&self) -> DataSize {
        match self {
            BottleneckConfig::CoRtv(_) => LATEST_REENCODED_HEADER,
            _ => DataSize::ZERO,
        }
    }

    /// A configuration mistake, if any.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            BottleneckConfig::QueueReport { interval_ms, rate_window_ms } => {
                for (name, v) in [("interval_ms", interval_ms), ("rate_window_ms", rate_window_ms)]
                {
                    if !(v.is_finite() && *v >= 1.0 && *v <= 60_000.0) {
                        return Err(format!("bottleneck.{name} must be in [1, 60000], got {v}"));
                    }
                }
                Ok(())
            }
            BottleneckConfig::CoRtv(c) => c.validate(),
            BottleneckConfig::Fdcc(c) => c.validate(),
            BottleneckConfig::DropTail {} => Ok(()),
        }
    }
}
