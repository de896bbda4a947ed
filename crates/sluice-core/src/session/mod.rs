//! What a session is, apart from the runtime that runs it: its configuration
//! ([`config`]), the components and links it builds ([`topology`]) and the time series it
//! records ([`sampler`]). The simulator ([`crate::sim`]) and live mode (the `sluice-live`
//! crate) both start here.

pub mod config;
pub mod sampler;
pub mod topology;

pub use config::{
    ConfigError, EncoderConfig, PathConfig, QueueDisciplineKind, RunConfig, SecondBottleneck,
    DEFAULT_FEEDBACK_MS,
};
pub use sampler::{LinkReading, Sampler};
pub use topology::{
    build_access_links, build_encoder, build_flow_receiver, build_flow_sender, build_links,
    build_receiver, build_second_bottleneck, build_sender,
};
