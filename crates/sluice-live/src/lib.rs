//! Sluice's live mode: the core's sans-IO state machines (the simulator's sender, receiver
//! and links, unchanged) over real UDP with RTP and RTCP on the wire.
//!
//! * [`wire`]: the wire formats, sans-IO (bytes in, core datagrams out, and back).
//! * [`endpoint`]: sender, receiver and relay endpoints, sans-IO.
//! * [`runtime`]: the clock, sockets, tokio loop and encoder thread that drive them.
//! * [`browser`]: a sender over WebRTC to a browser (`sluice browser run --scheme`).
//! * [`webrtc`]: the WebRTC transport (str0m: ICE, DTLS-SRTP, SDP) around an endpoint.
//! * [`session`]: `live run`, all three on loopback, results in the simulator's format.
//! * [`process`]: `live send`, `recv`, `relay`: one endpoint per process, each writing its
//!   part ([`part`]); `live merge` merges the parts through the same code as `live run`
//!   ([`merge`]).

pub mod bench;
pub mod browser;
pub mod endpoint;
pub mod h264;
pub mod merge;
pub mod part;
pub mod process;
pub mod runtime;
pub mod session;
pub mod webrtc;
pub mod wire;

use sluice_core::session::{ConfigError, RunConfig};

/// What every live entry point checks before it builds anything: the config itself (the
/// competing flows among it), then what live mode cannot carry (one bottleneck, the relay's:
/// no second one). The relay then builds the competing flows with
/// [`sluice_core::sim::flows::CrossTraffic::for_run`].
pub fn check_live_config(cfg: &RunConfig) -> Result<(), ConfigError> {
    cfg.validate()?;
    if cfg.second_bottleneck.is_some() {
        return Err(ConfigError(
            "live mode has one bottleneck, the relay's: second_bottleneck is simulated only".into(),
        ));
    }
    Ok(())
}
