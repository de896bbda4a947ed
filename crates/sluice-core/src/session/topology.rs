//! The session's topology: the sender, receiver and links a [`RunConfig`] and a scheme
//! build, shared by the simulator ([`crate::sim::Simulation`]) and live mode.

use super::config::{ConfigError, EncoderConfig, RunConfig};
use crate::encoder::model::{ModelEncoder, ModelEncoderConfig};
use crate::encoder::Encoder;
use crate::link::bottleneck::BottleneckEnv;
use crate::link::trace::Trace;
use crate::link::{Link, LinkConfig};
use crate::receiver::{Receiver, ReceiverConfig};
use crate::rng::Rng;
use crate::scheme::SchemeConfig;
use crate::sender::{Sender, SenderConfig};
use crate::units::{DataSize, TimeDelta, Timestamp};
use std::sync::Arc;

/// Builds the encoder a config asks for, if the core can: the model encoder. A real encoder
/// (x264) is built by its own crate and passed to [`crate::sim::Simulation::new`].
pub fn build_encoder(cfg: &RunConfig) -> Result<Box<dyn Encoder>, ConfigError> {
    match &cfg.encoder {
        EncoderConfig::Model(m) => {
            let mut m = m.clone();
            // The model's content draws follow the run seed unless the config pins its own.
            if m.seed == ModelEncoderConfig::default().seed {
                m.seed = cfg.seed;
            }
            // A controller that re-references past dropped frames keeps more references (an
            // unknown scheme is reported by `Simulation::new`).
            let wanted =
                cfg.resolve_scheme().ok().and_then(|s| s.encoder_controller.reference_frames());
            if let Some(n) = wanted {
                m.reference_frames = m.reference_frames.max(n);
            }
            Ok(Box::new(ModelEncoder::new(m, cfg.fps)))
        }
        EncoderConfig::X264(_) => Err(ConfigError(
            "the x264 encoder is built by the sluice-x264 crate (use the sluice front end)".into(),
        )),
    }
}

/// The sender of a run (shared by the simulator and the live runtime, so both run the same
/// state machine): the scheme's controller, pacer and encoder controller around `encoder`.
pub fn build_sender(
    cfg: &RunConfig,
    scheme: &SchemeConfig,
    encoder: Box<dyn crate::encoder::EncoderDriver>,
    now: Timestamp,
) -> Sender {
    build_flow_sender(cfg, scheme, encoder, now, 0)
}

/// [`build_sender`] for the media flow `flow` (a competing media flow has its own id).
pub fn build_flow_sender(
    cfg: &RunConfig,
    scheme: &SchemeConfig,
    encoder: Box<dyn crate::encoder::EncoderDriver>,
    now: Timestamp,
    flow: crate::packet::FlowId,
) -> Sender {
    let capture_end = now + TimeDelta::from_secs_f64(cfg.duration_s);
    let cc = scheme.cc.build(now);
    Sender::new(
        SenderConfig {
            fps: cfg.fps,
            max_payload: DataSize::from_bytes(cfg.max_payload_bytes),
            capture_until: capture_end,
            packet_overhead: crate::packet::PACKET_OVERHEAD + scheme.bottleneck.header_extension(),
            allocation_overhead: scheme.allocation_overhead_bytes.map(DataSize::from_bytes),
            max_video_rate: cfg.max_video_rate_bps.map(crate::units::DataRate::from_bps_f64),
            flow,
            ..Default::default()
        },
        cc,
        scheme.pacer.build(now),
        encoder,
        scheme.build_encoder_controller(),
        now,
    )
}

/// The receiver of a run.
pub fn build_receiver(cfg: &RunConfig, scheme: &SchemeConfig, now: Timestamp) -> Receiver {
    build_flow_receiver(cfg, scheme, now, 0)
}

/// [`build_receiver`] for the media flow `flow`.
pub fn build_flow_receiver(
    cfg: &RunConfig,
    scheme: &SchemeConfig,
    now: Timestamp,
    flow: crate::packet::FlowId,
) -> Receiver {
    Receiver::new(
        ReceiverConfig {
            feedback_interval: TimeDelta::from_ms_f64(cfg.feedback_interval_ms(scheme)),
            ..Default::default()
        },
        flow,
        now,
    )
}

/// The downlink (the bottleneck: queue, trace, delay, loss, the scheme's bottleneck
/// behaviour) and the uplink of a run. The downlink logs drops only if its bottleneck drops
/// frames on purpose; the uplink never.
pub fn build_links(
    cfg: &RunConfig,
    scheme: &SchemeConfig,
    downlink_trace: Option<Arc<Trace>>,
    uplink_trace: Option<Arc<Trace>>,
) -> (Link, Link) {
    let downlink_limit = RunConfig::link_config(&cfg.downlink, None).queue;
    let access = TimeDelta::from_ms_f64(cfg.downlink.access_delay_ms);
    let env = BottleneckEnv { fps: cfg.fps, rtt_to_sender: access * 2 };
    let discipline = if cfg.downlink.queue_discipline.is_drop_tail() {
        scheme.bottleneck.build_in(downlink_limit, 0, env)
    } else {
        cfg.downlink.queue_discipline.build(downlink_limit, cfg.downlink.ecn)
    };
    let mut downlink = Link::with_discipline(
        RunConfig::link_config(&cfg.downlink, downlink_trace),
        Rng::fork(cfg.seed, "downlink"),
        discipline,
    );
    let uplink_config = RunConfig::link_config(&cfg.uplink, uplink_trace);
    let uplink_limit = uplink_config.queue;
    let mut uplink = Link::with_discipline(
        uplink_config,
        Rng::fork(cfg.seed, "uplink"),
        cfg.uplink.queue_discipline.build(uplink_limit, cfg.uplink.ecn),
    );
    // Drops are counted in the link stats; the per-packet log is needed only to mark the
    // frames a bottleneck drops on purpose.
    downlink.set_drop_log(scheme.bottleneck.drops_frames());
    uplink.set_drop_log(false);
    (downlink, uplink)
}

/// The access path of a run with an access delay (`downlink.access_delay_ms` > 0): the
/// delay line from the sender to the bottleneck, and the one back to the sender that the
/// bottleneck's reports and the receiver's feedback (after the uplink) cross. `None`
/// without an access delay.
pub fn build_access_links(cfg: &RunConfig) -> Option<(Link, Link)> {
    let access = TimeDelta::from_ms_f64(cfg.downlink.access_delay_ms);
    if access <= TimeDelta::ZERO {
        return None;
    }
    let delay_line = |name: &str| {
        let mut l = Link::new(
            LinkConfig { delay: access, ..LinkConfig::default() },
            Rng::fork(cfg.seed, name),
        );
        l.set_drop_log(false);
        l
    };
    Some((delay_line("access"), delay_line("report-path")))
}

/// The second bottleneck of a run (`second_bottleneck`, RFC 8867 §6.3), if it has one: a
/// drop-tail link at a constant rate with its own delay.
pub fn build_second_bottleneck(cfg: &RunConfig) -> Option<Link> {
    let b = cfg.second_bottleneck.as_ref()?;
    let rate = crate::units::DataRate::from_bps_f64(b.rate_mbps * 1e6);
    let config = LinkConfig {
        rate: crate::link::LinkRate::Trace(Arc::new(Trace::constant(
            rate,
            TimeDelta::from_secs(1),
        ))),
        queue: b
            .queue_bytes
            .map_or(crate::link::QueueLimit::Unlimited, crate::link::QueueLimit::Bytes),
        delay: TimeDelta::from_ms_f64(b.delay_ms),
        loss_rate: 0.0,
    };
    let mut link = Link::new(config, Rng::fork(cfg.seed, "second-bottleneck"));
    link.set_drop_log(false);
    Some(link)
}
