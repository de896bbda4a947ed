//! Schemes: named compositions of components (pacer x congestion controller x encoder
//! controller x frame dropping x bottleneck behaviour). A scheme is data, so a new combination needs no new
//! code: the registry below names the ones the papers compare, and any [`SchemeConfig`] can
//! be given as JSON.

use crate::cc::copa::{CopaConfig, CopaRtt};
use crate::cc::gcc::trendline::TrendlineWindow;
use crate::cc::gcc::{
    pre_reaction_ratio_from_scaling_factor, Gcc, GccConfig, LossBasedBweV2Config, ProbeRules,
};
use crate::cc::rocc::RoccConfig;
use crate::cc::CongestionController;
use crate::encoder_controller::ace_c::AceCConfig;
use crate::encoder_controller::mae::{MaeConfig, MaeMode, MaeTrigger};
use crate::encoder_controller::salsify::SalsifyConfig;
use crate::encoder_controller::vidaptive::VidaptiveConfig;
use crate::encoder_controller::vidaptive_alpha::AlphaConfig;
use crate::encoder_controller::video_stream_encoder::FrameDropConfig;
use crate::encoder_controller::{EncoderController, EncoderControllerConfig};
use crate::link::bottleneck::BottleneckConfig;
use crate::link::frame_drop::CoRtvBottleneckConfig;
use crate::pacer::ace_n::AceNConfig;
use crate::pacer::dummy::DummyConfig;
use crate::pacer::leaky_bucket::LeakyBucketConfig;
use crate::pacer::vidaptive::VidaptivePacerConfig;
use crate::pacer::PacerConfig;
use crate::units::{TimeDelta, Timestamp};
use serde::{Deserialize, Serialize};

/// Congestion-controller choice and parameters.
// A config is built once per run; boxing GCC's larger config would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum CcConfig {
    /// Google Congestion Control (libwebrtc goog_cc).
    Gcc(GccConfig),
    /// Copa (NSDI '18), window-based, as genericCC's reference code.
    Copa(CopaConfig),
    /// RoCC (HotNets '22), window-based, as its reference kernel module.
    Rocc(RoccConfig),
    /// FDCC (Co-RTV §V-A, Eq. 9): `Rate = Bw - QLen / tau` from an oracle bottleneck's reports.
    Fdcc(crate::cc::fdcc::FdccConfig),
}

impl CcConfig {
    /// A configuration mistake, if any.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            CcConfig::Gcc(c) => c.validate(),
            CcConfig::Copa(c) => c.validate(),
            CcConfig::Rocc(c) => c.validate(),
            CcConfig::Fdcc(c) => c.validate(),
        }
    }

    /// Whether the controller signals a pre-reaction (MAE §5.2: GCC with a
    /// `pre_reaction_ratio`, Copa with a `pre_reaction_queuing_delay_ms`).
    pub fn pre_reacts(&self) -> bool {
        match self {
            CcConfig::Gcc(c) => c.pre_reaction_ratio.is_some(),
            CcConfig::Copa(c) => c.pre_reaction_queuing_delay_ms.is_some(),
            CcConfig::Rocc(_) | CcConfig::Fdcc(_) => false,
        }
    }

    /// The controller this config describes.
    pub fn build(&self, now: Timestamp) -> Box<dyn CongestionController> {
        match self {
            CcConfig::Gcc(c) => Box::new(Gcc::new(c.clone(), now)),
            CcConfig::Copa(c) => c.build(now),
            CcConfig::Rocc(c) => Box::new(c.build(now)),
            CcConfig::Fdcc(c) => Box::new(c.build()),
        }
    }
}

impl Default for CcConfig {
    fn default() -> Self {
        CcConfig::Gcc(GccConfig::default())
    }
}

/// The components of a scheme.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemeConfig {
    /// The pacer and its parameters.
    pub pacer: PacerConfig,
    /// The congestion controller (default: GCC).
    #[serde(default)]
    pub cc: CcConfig,
    /// The encoder controller (default: ABR + VBV with a 500 ms buffer).
    #[serde(default)]
    pub encoder_controller: EncoderControllerConfig,
    /// libwebrtc's VideoStreamEncoder frame dropping in front of the encoder controller
    /// (`encoder_controller/video_stream_encoder.rs`; default: off).
    #[serde(default)]
    pub frame_drop: FrameDropConfig,
    /// Salsify's encoder-transport integration in front of the encoder controller
    /// (`encoder_controller/salsify.rs`): each frame capped at what the congestion window
    /// lets out now, skipped when not even half a frame fits (default: off, `null`).
    #[serde(default)]
    pub salsify: Option<SalsifyConfig>,
    /// What the bottleneck queue does besides serving packets (default: drop-tail).
    #[serde(default)]
    pub bottleneck: BottleneckConfig,
    /// The receiver's transport-feedback interval this scheme's transport uses, unless the
    /// run sets one (`None`: the run's default, 50 ms). Controllers clocked by ACKs (Copa)
    /// need reports more often than WebRTC's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_interval_ms: Option<f64>,
    /// Bytes per packet the encoder's allocation sets aside for headers: the encoder gets the
    /// target times `payload / (payload + this)` (`None`: the packets' own header, RTP + UDP/IP,
    /// [`crate::packet::PACKET_OVERHEAD`]). libwebrtc (`RtpVideoSender::OnBitrateUpdated`)
    /// subtracts, per full packet, the largest RTP header its negotiated extensions could make
    /// (`ExpectedPerPacketOverhead`) plus the transport's overhead, more than a packet
    /// carries; Chromium 156's encoder target is 0.89-0.92x GCC's on loss-free links, which is
    /// about 120 B at 1200 B of payload (docs/results/chrome.md, finding 10). Wire sizes do
    /// not change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_overhead_bytes: Option<i64>,
}

impl SchemeConfig {
    /// A composition whose parts cannot work together (each part valid alone): an encoder
    /// controller waiting for a signal the congestion controller never gives, a controller
    /// reading reports no bottleneck sends. Such a scheme would run as another one.
    pub fn check_composition(&self) -> Result<(), String> {
        if let EncoderControllerConfig::Mae(m) = &self.encoder_controller {
            // In mode code the pre-reaction level decides, whatever the trigger.
            let pre_reaction = m.mode == MaeMode::Code || m.trigger == MaeTrigger::PreReaction;
            if pre_reaction && !self.cc.pre_reacts() {
                let why = if m.mode == MaeMode::Code {
                    "in mode code reads the congestion controller's pre-reaction level"
                } else {
                    "waits for the congestion controller's pre-reaction"
                };
                return Err(format!(
                    "encoder_controller mae {why}, which this cc never signals (gcc: set \
                     cc.pre_reaction_ratio; copa: cc.pre_reaction_queuing_delay_ms; rocc and \
                     fdcc have none): MAE would never tighten the buffer"
                ));
            }
            if !pre_reaction && !matches!(self.cc, CcConfig::Gcc(_)) {
                return Err("encoder_controller mae with trigger native-overuse needs gcc's \
                            over-use detector (cc.kind gcc)"
                    .into());
            }
        }
        if matches!(self.cc, CcConfig::Fdcc(_)) && !self.bottleneck.reports() {
            return Err("cc fdcc sets its rate from the bottleneck's reports of its capacity and \
                        queue: it needs a bottleneck that reports (bottleneck.kind fdcc, \
                        queue-report, or co-rtv with feedback); without them it stays at its \
                        initial rate"
                .into());
        }
        Ok(())
    }

    /// `pacer` with every other component at its default: GCC, ABR + VBV(0.5 s), no frame
    /// dropping, no Salsify stage, a drop-tail bottleneck, the run's feedback interval.
    pub fn new(pacer: PacerConfig) -> Self {
        SchemeConfig {
            pacer,
            cc: CcConfig::default(),
            encoder_controller: EncoderControllerConfig::default(),
            frame_drop: FrameDropConfig::default(),
            salsify: None,
            bottleneck: BottleneckConfig::DropTail {},
            feedback_interval_ms: None,
            allocation_overhead_bytes: None,
        }
    }

    /// The scheme's encoder controller: `encoder_controller` behind the `salsify` stage and
    /// then the `frame_drop` stage (each if it is on).
    pub fn build_encoder_controller(&self) -> Box<dyn EncoderController> {
        let inner = self.encoder_controller.build();
        let inner = match &self.salsify {
            Some(s) => s.wrap(inner),
            None => inner,
        };
        self.frame_drop.wrap(inner)
    }
}

/// A registered scheme: name, description, plot colour and composition.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SchemeInfo {
    /// The name a run config (`scheme_name`) or `--scheme` gives.
    pub name: &'static str,
    /// What the scheme is and what it composes, in words.
    pub description: &'static str,
    /// Plot colour (hex), stable across plots.
    pub color: &'static str,
    /// The encoder the scheme is defined with (`"x264"`), or `None` when it runs on either
    /// (the front end then picks x264 for a video and the model encoder otherwise).
    pub encoder: Option<&'static str>,
    /// The composition.
    pub config: SchemeConfig,
}

/// GCC as ACE runs it: the 200 ms time-window trendline (§5.2: bursts make fewer packet
/// groups, and a fixed count of groups would span too long), pacing at `pacing_factor` x
/// its target: ACE-N's token rate is GCC's pacing rate, 1.1x (crate::pacer::ace_n says why
/// not 1.0x); the ablation without ACE-N paces "with a pacing rate fixed to estimate
/// bandwidth" (§6.4), 1.0x.
fn gcc_200ms(pacing_factor: f64) -> CcConfig {
    CcConfig::Gcc(GccConfig {
        trendline_window: TrendlineWindow::Time(TimeDelta::from_ms(200)),
        pacing_factor,
        ..Default::default()
    })
}

/// GCC with libwebrtc's legacy pacing factor 2.5 (ACE's WebRTC-B).
fn gcc_pacing_2_5() -> CcConfig {
    CcConfig::Gcc(GccConfig { pacing_factor: 2.5, ..Default::default() })
}

/// GCC with the 100 ms time-window trendline every scheme of MAE's testbed runs (MAE §5.2:
/// hard-coded in its fork), and MAE's pre-reaction at `ratio` x the threshold if given.
fn gcc_100ms(pre_reaction_ratio: Option<f64>) -> CcConfig {
    CcConfig::Gcc(GccConfig {
        trendline_window: TrendlineWindow::Time(TimeDelta::from_ms(100)),
        pre_reaction_ratio,
        ..Default::default()
    })
}

/// A scheme of MAE's comparison: GCC with the 100 ms trendline, the libwebrtc pacer,
/// frame dropping off (MAE App. A.1: no frame lost for the x264 schemes).
fn mae_testbed(cc: CcConfig, encoder_controller: EncoderControllerConfig) -> SchemeConfig {
    SchemeConfig { cc, encoder_controller, ..SchemeConfig::new(leaky()) }
}

/// Copa as the `copa` scheme runs it, with `copa`'s settings and `encoder_controller`.
fn copa_with(copa: CopaConfig, encoder_controller: EncoderControllerConfig) -> SchemeConfig {
    SchemeConfig {
        pacer: PacerConfig::LeakyBucket(LeakyBucketConfig {
            // Copa's pacer sends at the controller's rate; WebRTC's queue-drain speed-up is
            // not part of it.
            queue_time_limit_ms: 0.0,
            ..Default::default()
        }),
        cc: CcConfig::Copa(copa),
        encoder_controller,
        frame_drop: FrameDropConfig::default(),
        salsify: None,
        bottleneck: BottleneckConfig::DropTail {},
        // Copa is ACK-clocked (genericCC acknowledges every packet; QUIC, which the Co-RTV
        // paper's Copa runs on, about every second packet). Reports every 10 ms stand for
        // that; at WebRTC's 50 ms the window is released in bursts.
        feedback_interval_ms: Some(10.0),
        allocation_overhead_bytes: None,
    }
}

/// Copa as XQUIC runs it (`src/congestion_control/xqc_copa.c`, the Copa of the Co-RTV paper's
/// COPA baseline): delta 0.05 ("the default value recommended by Facebook"), mode switching
/// to competitive mode, a 32-packet initial and 4-packet minimum window, no start-up hold,
/// the velocity doubling once the direction has been the same more than 3 times in a row
/// (`same_dir_cnt > 3`), paced at 2 x cwnd / RTTstanding. Differences left: XQUIC counts
/// velocity periods in delivered-byte rounds (Sluice: the latest RTT), and its competitive
/// mode may double delta up to 0.5 on a loss (Sluice: never above the configured 0.05).
fn xquic_copa() -> CopaConfig {
    CopaConfig {
        delta: 0.05,
        competitive_mode: true,
        initial_window_packets: 32.0,
        min_window_packets: 4.0,
        startup_hold_packets: 0.0,
        velocity_same_direction_periods: 4,
        ..Default::default()
    }
}

fn leaky() -> PacerConfig {
    PacerConfig::LeakyBucket(LeakyBucketConfig::default())
}

/// Vidaptive (NINeS '26, §3-4): Copa paced at its CC-Rate (`cwnd / srtt`, gain 1, §3.1),
/// Vidaptive's pacer with dummy packets, its encoder controller (pause, alpha); changed by
/// the ablations.
fn vidaptive(
    cc: CcConfig,
    dummy: DummyConfig,
    encoder_controller: VidaptiveConfig,
) -> SchemeConfig {
    SchemeConfig {
        cc,
        encoder_controller: EncoderControllerConfig::Vidaptive(encoder_controller),
        // As the `copa` baseline: ACK-clocked controllers need reports more often than
        // WebRTC's 50 ms; with 50 ms the window must also cover the report wait, and
        // cwnd / srtt overstates the rate the window allows.
        feedback_interval_ms: Some(10.0),
        ..SchemeConfig::new(PacerConfig::Vidaptive(VidaptivePacerConfig {
            dummy,
            ..Default::default()
        }))
    }
}

/// The `combined` scheme and its ablations (docs/results/combined.md): GCC with libwebrtc's
/// own 20-packet trendline (`trendline_100ms`: MAE's 100 ms window instead, the first
/// `combined`), MAE's pre-reaction (the authors' rule, `mae`) on that trendline tightening
/// x264's VBV when `mae` is on (ABR + VBV(0.5 s) otherwise), the leaky-bucket pacer at
/// `pacing_factor` x the target, and libwebrtc's frame dropping (frame dropper +
/// cwnd-pushback drops) when `frame_drop` is on. Each part is one registered mechanism; only
/// their combination is new.
fn combined(
    mae: bool,
    trendline_100ms: bool,
    pacing_factor: f64,
    frame_drop: bool,
) -> SchemeConfig {
    let pre_reaction = mae.then(|| pre_reaction_ratio_from_scaling_factor(2.0));
    let gcc = if trendline_100ms {
        let CcConfig::Gcc(g) = gcc_100ms(pre_reaction) else { unreachable!("gcc_100ms is GCC") };
        g
    } else {
        GccConfig { pre_reaction_ratio: pre_reaction, ..Default::default() }
    };
    let encoder_controller = if mae {
        EncoderControllerConfig::Mae(MaeConfig { mode: MaeMode::Code, ..Default::default() })
    } else {
        EncoderControllerConfig::default()
    };
    SchemeConfig {
        cc: CcConfig::Gcc(GccConfig { pacing_factor, ..gcc }),
        encoder_controller,
        frame_drop: if frame_drop {
            FrameDropConfig::LIBWEBRTC
        } else {
            FrameDropConfig::default()
        },
        ..SchemeConfig::new(leaky())
    }
}

/// Copa as Vidaptive runs it: paced at `cwnd / srtt` (§3.1), otherwise genericCC's.
fn copa_cc_rate() -> CcConfig {
    CcConfig::Copa(CopaConfig {
        pacing_gain: 1.0,
        pacing_rtt: CopaRtt::Smoothed,
        ..Default::default()
    })
}

/// The built-in schemes.
pub fn registry() -> Vec<SchemeInfo> {
    vec![
        SchemeInfo {
            name: "webrtc",
            description: "WebRTC (libwebrtc M119 as Chrome runs it, encoder rate control not trusted): GCC with congestion-window pushback in DropFrame mode + leaky-bucket pacer at 1.1x the target (libwebrtc's video default), ABR+VBV(0.5 s), VideoStreamEncoder frame dropping (frame dropper + cwnd-pushback drops)",
            color: "#1f77b4",
            encoder: None,
            config: SchemeConfig {
                frame_drop: FrameDropConfig::LIBWEBRTC,
                ..SchemeConfig::new(leaky())
            },
        },
        SchemeInfo {
            name: "webrtc-burst40",
            description: "WebRTC with the pacer Chromium runs today: `webrtc` whose leaky-bucket pacer may send up to 40 ms of its budget at once, at most 63 kB (libwebrtc's kMaxBurstSize; Blink sets RTCConfiguration's pacer burst interval to 40 ms; libwebrtc's own default since M120; M119's code default was 0); measured against Chromium 156 in docs/results/chrome.md",
            color: "#aec7e8",
            encoder: None,
            config: SchemeConfig {
                frame_drop: FrameDropConfig::LIBWEBRTC,
                ..SchemeConfig::new(PacerConfig::LeakyBucket(LeakyBucketConfig {
                    burst_interval_ms: 40.0,
                    ..Default::default()
                }))
            },
        },
        SchemeInfo {
            name: "webrtc-m156",
            description: "WebRTC as Chromium 156 runs it: `webrtc-burst40` whose GCC has M156's loss-based estimator (LossBasedBweV2 with its May 2025 defaults: held after a decrease, never below the acknowledged rate, ramping up at most 1.5x the acknowledged rate, loss counted in bytes, padding while it ramps up loss-limited) and M156's probe rules (no probe while loss-limited, over- or under-using, probes capped at 1.5x the estimate while the loss-based estimate increases, probe results floored at 0.85x the acknowledged rate); docs/notes/gcc-m119-m156.md",
            color: "#08519c",
            encoder: None,
            config: SchemeConfig {
                cc: CcConfig::Gcc(GccConfig {
                    loss_based_v2: LossBasedBweV2Config::m156(),
                    probe_rules: ProbeRules::M156,
                    ..Default::default()
                }),
                frame_drop: FrameDropConfig::LIBWEBRTC,
                ..SchemeConfig::new(PacerConfig::LeakyBucket(LeakyBucketConfig {
                    burst_interval_ms: 40.0,
                    ..Default::default()
                }))
            },
        },
        SchemeInfo {
            name: "webrtc-b",
            description: "WebRTC-B (ACE §6.1): GCC + leaky-bucket pacer at 2.5x the target (libwebrtc's legacy factor); frame dropping off as in ACE's runs (§6.3), so GCC's DropFrame-mode pushback has no effect",
            color: "#ff7f0e",
            encoder: None,
            config: SchemeConfig {
                cc: gcc_pacing_2_5(),
                ..SchemeConfig::new(leaky())
            },
        },
        SchemeInfo {
            name: "always-burst",
            description: "AlwaysBurst (ACE §6.1): GCC, no pacing; frames leave as one burst; frame dropping off as in ACE's runs (§6.3), so GCC's DropFrame-mode pushback has no effect",
            color: "#d62728",
            encoder: None,
            config: SchemeConfig::new(PacerConfig::None {}),
        },
        SchemeInfo {
            name: "webrtc-x264",
            description: "WebRTC* (ACE §6.1): x264 ABR + VBV(0.5 s), GCC, leaky-bucket pacer at 1.1x; frame dropping off as in ACE's runs (§6.3), so GCC's DropFrame-mode pushback has no effect",
            color: "#2ca02c",
            encoder: Some("x264"),
            config: SchemeConfig::new(leaky()),
        },
        SchemeInfo {
            name: "cbr",
            description: "CBR (ACE §6.1, MAE §6): VBV of one frame so no frame exceeds the target frame size; GCC, pacer at 1.1x; frame dropping off as in ACE's and MAE's runs (ACE §6.3, MAE App. A.1), so GCC's DropFrame-mode pushback has no effect",
            color: "#9467bd",
            encoder: None,
            config: SchemeConfig {
                encoder_controller: EncoderControllerConfig::OneFrameVbv { filler: false },
                ..SchemeConfig::new(leaky())
            },
        },
        SchemeInfo {
            name: "copa",
            description: "Copa (NSDI '18) as its reference code (genericCC): window-based, delta 0.5, paced at 2 x cwnd / standing RTT; ABR + VBV(0.5 s) at cwnd / srtt; no dummy packets, no encoder pause, no frame dropping (Vidaptive's and Co-RTV's Copa baseline)",
            color: "#01665e",
            encoder: None,
            config: copa_with(CopaConfig::default(), EncoderControllerConfig::default()),
        },
        SchemeInfo {
            name: "copa-salsify",
            description: "The Co-RTV paper's COPA baseline (§II-B, Fig. 4, §V): XQUIC's Copa (delta 0.05 as Facebook recommends, competitive mode, initial window 32 packets, minimum 4, velocity doubling after more than 3 same-direction rounds, paced at 2 x cwnd / standing RTT) with Salsify's encoder integration: each frame capped at what the window lets out now (cwnd - in flight - pacer queue, at most 2 frames at Copa's rate), skipped when under half a frame fits; ABR at cwnd / srtt; feedback every 10 ms",
            color: "#5254a3",
            encoder: None,
            config: SchemeConfig {
                salsify: Some(SalsifyConfig::default()),
                ..copa_with(xquic_copa(), EncoderControllerConfig::default())
            },
        },
        SchemeInfo {
            name: "ace-c",
            description: "ACE-C only (ACE §4.2, §6.4 ablation): complexity level per frame from the SATD size prediction; x264 ABR + VBV(0.5 s), GCC with 200 ms trendline, leaky-bucket pacer at 1.0x the target (§6.4: \"a pacing rate fixed to estimate bandwidth\"); frame dropping off (ACE §6.3), so GCC's DropFrame-mode pushback has no effect",
            color: "#8c564b",
            encoder: Some("x264"),
            config: SchemeConfig {
                cc: gcc_200ms(1.0),
                encoder_controller: EncoderControllerConfig::AceC(AceCConfig::default()),
                ..SchemeConfig::new(leaky())
            },
        },
        SchemeInfo {
            name: "ace-n",
            description: "ACE-N only (ACE §4.1, §6.4 ablation): token-bucket pacer at GCC's pacing rate (1.1x its target, the sending rate the CCA determines) whose bucket adapts per frame to the predicted network queue; x264 ABR + VBV(0.5 s), GCC with 200 ms trendline; frame dropping off (ACE §6.3), so GCC's DropFrame-mode pushback has no effect",
            color: "#17becf",
            encoder: Some("x264"),
            config: SchemeConfig {
                cc: gcc_200ms(1.1),
                ..SchemeConfig::new(PacerConfig::AceN(AceNConfig::default()))
            },
        },
        SchemeInfo {
            name: "ace",
            description: "ACE (SIGCOMM '25): ACE-N adaptive token-bucket pacing at GCC's pacing rate (1.1x its target, §4.1) + ACE-C complexity-adaptive encoding on x264, GCC with 200 ms trendline; frame dropping off (ACE §6.3), so GCC's DropFrame-mode pushback has no effect",
            color: "#e377c2",
            encoder: Some("x264"),
            config: SchemeConfig {
                cc: gcc_200ms(1.1),
                encoder_controller: EncoderControllerConfig::AceC(AceCConfig::default()),
                ..SchemeConfig::new(PacerConfig::AceN(AceNConfig::default()))
            },
        },
        SchemeInfo {
            name: "vidaptive",
            description: "Vidaptive (NINeS '26): Copa (genericCC, delta 0.5) paced at its CC-Rate cwnd / srtt and gated by its window, no queue-drain speed-up; dummy packets (199 B) when no video waits, withheld 25 % of a frame interval before a capture, off at or above the clip's maximum useful rate (12 Mbps default); encoder paused while the oldest pacer packet waited over tau = 33 ms, the held frame encoded at the drain if under 1 s old; ABR + VBV(0.5 s) at alpha x CC-Rate (P 33 ms, lambda 0.9, every 1 s, EWMA 0.25, alpha in [0.05, 1]); feedback every 10 ms",
            color: "#d4a017",
            encoder: None,
            config: vidaptive(copa_cc_rate(), DummyConfig::default(), VidaptiveConfig::default()),
        },
        SchemeInfo {
            name: "vidaptive-rocc",
            description: "Vidaptive on RoCC (§5.4): RoCC (cwnd = bytes received over 2 x RTTmin + 2 packets, no decrease while app-limited, loss mode) paced at cwnd / srtt; otherwise `vidaptive`",
            color: "#8c6d31",
            encoder: None,
            config: vidaptive(
                CcConfig::Rocc(RoccConfig::default()),
                DummyConfig::default(),
                VidaptiveConfig::default(),
            ),
        },
        SchemeInfo {
            name: "vidaptive-no-dummy",
            description: "Vidaptive w/o Dummy (§5.4 ablation): `vidaptive` without dummy packets",
            color: "#e7969c",
            encoder: None,
            config: vidaptive(
                copa_cc_rate(),
                DummyConfig { enabled: false, ..Default::default() },
                VidaptiveConfig::default(),
            ),
        },
        SchemeInfo {
            name: "vidaptive-no-pause",
            description: "Vidaptive w/o Latency safeguards (§5.4 ablation): `vidaptive` without the encoder pause",
            color: "#ad494a",
            encoder: None,
            config: vidaptive(
                copa_cc_rate(),
                DummyConfig::default(),
                VidaptiveConfig { pause: false, ..Default::default() },
            ),
        },
        SchemeInfo {
            name: "vidaptive-no-alpha",
            description: "Vidaptive w/o Bitrate Selection (§5.4 ablation): `vidaptive` with alpha = 1, the encoder gets the CC-Rate",
            color: "#7b4173",
            encoder: None,
            config: vidaptive(
                copa_cc_rate(),
                DummyConfig::default(),
                VidaptiveConfig {
                    alpha: AlphaConfig { enabled: false, ..Default::default() },
                    ..Default::default()
                },
            ),
        },
        SchemeInfo {
            name: "x264-gcc100",
            description: "MAE's WebRTC + x264 (MAE §6.1): x264 ABR + VBV(0.5 s), GCC with the 100 ms trendline of MAE's testbed, leaky-bucket pacer at 1.1x; frame dropping off (MAE App. A.1), so GCC's DropFrame-mode pushback has no effect",
            color: "#7f7f7f",
            encoder: None,
            config: mae_testbed(gcc_100ms(None), EncoderControllerConfig::default()),
        },
        SchemeInfo {
            name: "cbr-filler",
            description: "MAE's CBR (MAE §6.1): x264 with a one-frame VBV and filler data, so the rate is constant at the target; GCC with the 100 ms trendline, pacer at 1.1x; frame dropping off (MAE App. A.1), so GCC's DropFrame-mode pushback has no effect",
            color: "#c5b0d5",
            encoder: None,
            config: mae_testbed(
                gcc_100ms(None),
                EncoderControllerConfig::OneFrameVbv { filler: true },
            ),
        },
        SchemeInfo {
            name: "salsify-vbv",
            description: "MAE's \"Salsify\" stand-in (MAE §6.1, its artifact): x264 with a 40 ms VBV always; not Salsify (no functional encoder, no frame choice); GCC with the 100 ms trendline; frame dropping off (MAE App. A.1), so GCC's DropFrame-mode pushback has no effect",
            color: "#98df8a",
            encoder: None,
            config: mae_testbed(
                gcc_100ms(None),
                EncoderControllerConfig::AbrVbv { vbv_buffer_ms: 40.0 },
            ),
        },
        SchemeInfo {
            name: "mae-no-prediction",
            description: "MAE without prediction (MAE §6.4): the VBV tightens at GCC's own over-use and recovers at under-use; GCC with the 100 ms trendline; frame dropping off (MAE App. A.1), so GCC's DropFrame-mode pushback has no effect",
            color: "#ffbb78",
            encoder: None,
            config: mae_testbed(
                gcc_100ms(None),
                EncoderControllerConfig::Mae(MaeConfig {
                    trigger: MaeTrigger::NativeOveruse,
                    ..Default::default()
                }),
            ),
        },
        SchemeInfo {
            name: "mae",
            description: "MAE (NSDI '26) as its authors' artifact runs it (Sluice's choice of rule, docs/results/mae.md): x264's VBV buffer is 40 ms of the target instead of 0.5 s on each frame whose latest GCC trend is above the full over-use threshold (r = 1, the paper's scaling factor s = 2), no latch; GCC with the 100 ms trendline, pacer at 1.1x; frame dropping off (MAE App. A.1), so GCC's DropFrame-mode pushback has no effect",
            color: "#ff9896",
            encoder: None,
            config: mae_testbed(
                gcc_100ms(Some(pre_reaction_ratio_from_scaling_factor(2.0))),
                EncoderControllerConfig::Mae(MaeConfig { mode: MaeMode::Code, ..Default::default() }),
            ),
        },
        SchemeInfo {
            name: "mae-latch",
            description: "MAE as the paper's text describes it (§4.2, §6.5): x264's VBV buffer tightens from 0.5 s to 40 ms of the target when GCC's trend passes half its threshold (r = 0.5, the paper's scaling factor s = 1) and stays tight until GCC reports under-use; GCC with the 100 ms trendline, pacer at 1.1x; frame dropping off (MAE App. A.1), so GCC's DropFrame-mode pushback has no effect",
            color: "#c49c94",
            encoder: None,
            config: mae_testbed(
                gcc_100ms(Some(pre_reaction_ratio_from_scaling_factor(1.0))),
                EncoderControllerConfig::Mae(MaeConfig::default()),
            ),
        },
        SchemeInfo {
            name: "mae-timeout",
            description: "mae-latch with a Sluice safeguard the paper does not have: a tight period also ends once the pre-reaction has been silent for 300 ms, so a false alarm that under-use never ends does not latch (MAE §4.2 is silent on it); r = 0.5 (s = 1); GCC with the 100 ms trendline; frame dropping off (MAE App. A.1), so GCC's DropFrame-mode pushback has no effect",
            color: "#f7b6d2",
            encoder: None,
            config: mae_testbed(
                gcc_100ms(Some(pre_reaction_ratio_from_scaling_factor(1.0))),
                EncoderControllerConfig::Mae(MaeConfig {
                    quiet_timeout_ms: Some(300.0),
                    ..Default::default()
                }),
            ),
        },
        SchemeInfo {
            name: "copa-x264",
            description: "MAE Table 1's x264 on Copa: the copa scheme's composition (ABR + VBV(0.5 s) at Copa's rate)",
            color: "#35978f",
            encoder: None,
            config: copa_with(CopaConfig::default(), EncoderControllerConfig::default()),
        },
        SchemeInfo {
            name: "mae-copa",
            description: "MAE on Copa (MAE §5.2, Table 1): the VBV tightens when Copa's queuing delay passes 33 ms (one frame; MAE leaves the threshold open) and recovers when Copa's window moves up again",
            color: "#9edae5",
            encoder: None,
            config: copa_with(
                CopaConfig { pre_reaction_queuing_delay_ms: Some(33.0), ..Default::default() },
                EncoderControllerConfig::Mae(MaeConfig::default()),
            ),
        },
        SchemeInfo {
            name: "fdcc",
            description: "FDCC (Co-RTV §V-A, Eq. 9): the oracle baseline; the bottleneck reports the trace's actual capacity over the next 50 ms and its queue every RTT_BN, the sender sets Rate = Bw - QLen/tau (tau 50 ms), paced at 2x; ABR + one-frame VBV at Rate; no frame dropping",
            color: "#636363",
            encoder: None,
            config: SchemeConfig {
                cc: CcConfig::Fdcc(crate::cc::fdcc::FdccConfig::default()),
                bottleneck: BottleneckConfig::Fdcc(Default::default()),
                ..copa_with(CopaConfig::default(), EncoderControllerConfig::OneFrameVbv { filler: false })
            },
        },
        SchemeInfo {
            name: "co-rtv",
            description: "Co-RTV (Zhang et al.): the bottleneck drops whole frames whose gain is positive (Alg. 1, alpha 0.5, w 50 ms; k 0, deciding at a frame's arrival, Sluice's choice where the paper fixes none: `co-rtv-k2` decides 2 frames ahead), reports {Bw, QLen, D} at once and QLen every RTT_BN, forwards the re-encoded generation (LRF >= D); the sender runs copa-salsify's XQUIC Copa with Co-RTV's two changes and its Salsify stage, R = SndRate - QLen/tau (tau 50 ms), Eq. 7 on a drop, QSF 0, purges the dropped frames and re-encodes the newest 8 of them from the frame before D (no keyframe, no retransmission); ABR + one-frame VBV at R; 4 more header bytes per packet",
            color: "#e6550d",
            encoder: None,
            config: co_rtv(Default::default()),
        },
        SchemeInfo {
            name: "co-rtv-k2",
            description: "co-rtv with the paper's illustrated lookahead (§III-B4, Fig. 7: \"an example with k = 2\"): the bottleneck decides about the next 2 frames before they arrive; otherwise `co-rtv`",
            color: "#a63603",
            encoder: None,
            config: co_rtv(CoRtvBottleneckConfig { lookahead_frames: 2, ..Default::default() }),
        },
        SchemeInfo {
            name: "co-rtv-nofb",
            description: "Co-RTV without feedback (§V-A, brief A12): the bottleneck drops each frame whose own gain is positive and tells nobody; the sender (copa-salsify's XQUIC Copa and Salsify stage, ABR + one-frame VBV at its rate) learns of the loss from its receiver and re-references the newest intact frame instead of retransmitting (Salsify)",
            color: "#fdae6b",
            encoder: None,
            config: SchemeConfig {
                bottleneck: BottleneckConfig::CoRtv(CoRtvBottleneckConfig {
                    feedback: false,
                    ..Default::default()
                }),
                salsify: Some(SalsifyConfig::default()),
                ..copa_with(
                    CopaConfig { mss_bytes: cortv_mss(), ..xquic_copa() },
                    EncoderControllerConfig::LossRecovery(Default::default()),
                )
            },
        },
        SchemeInfo {
            name: "combined",
            description: "Sluice's combination (docs/results/combined.md): MAE's VBV pre-reaction as `mae` (x264's VBV 40 ms of the target on each frame whose GCC trend is above the over-use threshold) on GCC with libwebrtc's own 20-packet trendline (MAE's 100 ms window over-detects on jittery links: `combined-mae100`) + the leaky-bucket pacer at 2.5x the target (libwebrtc's legacy factor, `webrtc-b`: a frame leaves in 40 % of its interval, without the bursts that make GCC back off) + libwebrtc's frame dropping (frame dropper and cwnd-pushback drops, as `webrtc`); one configuration for every network",
            color: "#000000",
            encoder: None,
            config: combined(true, false, 2.5, true),
        },
        SchemeInfo {
            name: "combined-no-mae",
            description: "`combined` without MAE: ABR + VBV(0.5 s) throughout, GCC with its 20-packet trendline and no pre-reaction (`webrtc` paced at 2.5x); frame dropping on",
            color: "#525252",
            encoder: None,
            config: combined(false, false, 2.5, true),
        },
        SchemeInfo {
            name: "combined-1x",
            description: "`combined` with libwebrtc's video pacing factor 1.1x instead of 2.5x; MAE and frame dropping on",
            color: "#969696",
            encoder: None,
            config: combined(true, false, 1.1, true),
        },
        SchemeInfo {
            name: "combined-no-fd",
            description: "`combined` without libwebrtc's frame dropping (frame dropper and cwnd-pushback drops off, so GCC's DropFrame-mode pushback has no effect): MAE, pacer at 2.5x",
            color: "#bdbdbd",
            encoder: None,
            config: combined(true, false, 2.5, false),
        },
        SchemeInfo {
            name: "combined-mae100",
            description: "the first `combined` (issue 31's first round): `combined` with MAE's 100 ms trendline (as `mae`) instead of GCC's 20-packet one; MAE, pacer at 2.5x, frame dropping on",
            color: "#737373",
            encoder: None,
            config: combined(true, true, 2.5, true),
        },
    ]
}

/// Co-RTV's sender and bottleneck (the `co-rtv` scheme) with the bottleneck `bn`.
///
/// Co-RTV runs on the transport and encoder of its COPA baseline (`copa-salsify`): the
/// emulation's sender and receiver use XQUIC (§V-A), whose Copa is the baseline's ("COPA: a
/// widely used delay-based RTV congestion control algorithm integrated with XQUIC"), and the
/// sender's encoder has Salsify's integration ("we incorporated the Salsify into our encoder
/// ... in subsequent experiments", §II-B; "similar to Salsify", §IV), so Co-RTV's own queue
/// ① stays drained as the baseline's does. Co-RTV adds its two Copa changes, its encoder
/// controller and the bottleneck.
fn co_rtv(bn: CoRtvBottleneckConfig) -> SchemeConfig {
    SchemeConfig {
        bottleneck: BottleneckConfig::CoRtv(bn),
        salsify: Some(SalsifyConfig::default()),
        ..copa_with(
            CopaConfig {
                mss_bytes: cortv_mss(),
                bottleneck_feedback: Some(Default::default()),
                ..xquic_copa()
            },
            EncoderControllerConfig::CoRtv(Default::default()),
        )
    }
}

/// Copa's MSS with Co-RTV's header: a full packet on the wire, 1200 B payload + 64 B.
fn cortv_mss() -> i64 {
    crate::packetizer::DEFAULT_MAX_PAYLOAD
        + (crate::packet::PACKET_OVERHEAD + crate::link::bottleneck::LATEST_REENCODED_HEADER)
            .as_bytes()
}

/// The registered scheme called `name`, if any.
pub fn lookup(name: &str) -> Option<SchemeInfo> {
    registry().into_iter().find(|s| s.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compositions_whose_parts_cannot_work_together_are_refused() {
        // MAE on a controller without its pre-reaction: it would never tighten (a scheme file
        // with MAE on the default GCC ran exactly as ABR + VBV, without a word).
        let mut mae = lookup("mae").unwrap().config;
        assert_eq!(mae.check_composition(), Ok(()));
        let CcConfig::Gcc(g) = &mut mae.cc else { panic!("mae is on gcc") };
        g.pre_reaction_ratio = None;
        assert!(mae.check_composition().unwrap_err().contains("cc.pre_reaction_ratio"));
        let mut copa = lookup("mae-copa").unwrap().config;
        assert_eq!(copa.check_composition(), Ok(()));
        let CcConfig::Copa(c) = &mut copa.cc else { panic!("mae-copa is on copa") };
        c.pre_reaction_queuing_delay_ms = None;
        assert!(copa.check_composition().unwrap_err().contains("pre-reaction"));
        let native = lookup("mae-no-prediction").unwrap().config;
        assert_eq!(native.check_composition(), Ok(()));
        let on_copa = SchemeConfig { cc: lookup("copa").unwrap().config.cc, ..native };
        assert!(on_copa.check_composition().unwrap_err().contains("native-overuse"));
        // FDCC without its oracle's reports stays at its initial rate.
        let mut fdcc = lookup("fdcc").unwrap().config;
        assert_eq!(fdcc.check_composition(), Ok(()));
        fdcc.bottleneck = BottleneckConfig::default();
        assert!(fdcc.check_composition().unwrap_err().contains("a bottleneck that reports"));
        fdcc.bottleneck = lookup("co-rtv").unwrap().config.bottleneck;
        assert_eq!(fdcc.check_composition(), Ok(()));
        // Mode code reads the level whatever the trigger: the message says so.
        let mut code = lookup("mae").unwrap().config;
        let EncoderControllerConfig::Mae(m) = &mut code.encoder_controller else { panic!() };
        m.trigger = MaeTrigger::NativeOveruse;
        let CcConfig::Gcc(g) = &mut code.cc else { panic!("mae is on gcc") };
        g.pre_reaction_ratio = None;
        assert!(code.check_composition().unwrap_err().contains("in mode code"));
    }

    #[test]
    fn registered_configs_validate_and_vidaptive_mistakes_are_named() {
        for s in registry() {
            let c = &s.config;
            let ok = c.pacer.validate().and(c.cc.validate()).and(c.encoder_controller.validate());
            assert_eq!(ok, Ok(()), "{}", s.name);
            assert_eq!(c.check_composition(), Ok(()), "{}", s.name);
        }
        let v = lookup("vidaptive").unwrap().config;
        let EncoderControllerConfig::Vidaptive(ec) = v.encoder_controller else { panic!() };
        let bad = |f: &dyn Fn(&mut VidaptiveConfig)| {
            let mut c = ec.clone();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert!(bad(&|c| c.alpha.lambda = 1.5).contains("encoder_controller.alpha.lambda"));
        assert!(bad(&|c| c.alpha.p_ms = 0.0).contains("encoder_controller.alpha.p_ms"));
        assert!(bad(&|c| c.tau_ms = -5.0).contains("encoder_controller.tau_ms"));
        assert!(bad(&|c| c.alpha.initial = 0.01).contains("encoder_controller.alpha.initial"));
        let PacerConfig::Vidaptive(p) = v.pacer else { panic!() };
        let mut d = p.dummy.clone();
        d.size_bytes = 0;
        assert!(d.validate().unwrap_err().contains("pacer.dummy.size_bytes"));
        d.size_bytes = 199;
        d.guard_fraction = 1.0;
        assert!(d.validate().unwrap_err().contains("pacer.dummy.guard_fraction"));
        let rocc = RoccConfig { gamma: -1.0, ..Default::default() };
        assert!(CcConfig::Rocc(rocc).validate().unwrap_err().contains("cc.gamma"));
    }

    #[test]
    fn mae_and_co_rtv_controller_mistakes_are_named() {
        let CcConfig::Gcc(mut gcc) = lookup("mae").unwrap().config.cc else { panic!() };
        gcc.pre_reaction_ratio = Some(0.0);
        assert!(CcConfig::Gcc(gcc).validate().unwrap_err().contains("cc.pre_reaction_ratio"));
        let CcConfig::Copa(mut copa) = lookup("mae-copa").unwrap().config.cc else { panic!() };
        copa.pre_reaction_queuing_delay_ms = Some(-5.0);
        let e = CcConfig::Copa(copa).validate().unwrap_err();
        assert!(e.contains("cc.pre_reaction_queuing_delay_ms"), "{e}");
        let CcConfig::Copa(mut copa) = lookup("co-rtv").unwrap().config.cc else { panic!() };
        copa.bottleneck_feedback.as_mut().unwrap().hold_queue_slack_bytes = -1;
        let e = CcConfig::Copa(copa).validate().unwrap_err();
        assert!(e.contains("cc.bottleneck_feedback.hold_queue_slack_bytes"), "{e}");
        let CcConfig::Fdcc(mut fdcc) = lookup("fdcc").unwrap().config.cc else { panic!() };
        fdcc.pacing_gain = 0.0;
        assert!(CcConfig::Fdcc(fdcc).validate().unwrap_err().contains("cc.pacing_gain"));
        let EncoderControllerConfig::CoRtv(mut c) =
            lookup("co-rtv").unwrap().config.encoder_controller
        else {
            panic!()
        };
        c.max_reencodes = 0;
        assert!(c.validate().unwrap_err().contains("encoder_controller.max_reencodes"));
    }

    #[test]
    fn names_are_unique_and_configs_round_trip() {
        let reg = registry();
        let mut names: Vec<&str> = reg.iter().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), reg.len());
        for s in reg {
            let json = serde_json::to_string(&s.config).unwrap();
            let back: SchemeConfig = serde_json::from_str(&json).unwrap();
            assert_eq!(back, s.config, "{json}");
        }
    }

    #[test]
    fn custom_composition_from_json() {
        let c: SchemeConfig = serde_json::from_str(
            r#"{"pacer": {"kind": "leaky-bucket"}, "cc": {"kind": "gcc", "pacing_factor": 1.5},
                "encoder_controller": {"kind": "one-frame-vbv"}}"#,
        )
        .unwrap();
        let CcConfig::Gcc(ref g) = c.cc else { panic!("{:?}", c.cc) };
        assert_eq!(g.pacing_factor, 1.5);
        assert_eq!(c.encoder_controller, EncoderControllerConfig::OneFrameVbv { filler: false });
        // Scheme files written before the frame-drop axis keep working, with it off.
        assert!(c.frame_drop.is_off());
        assert!(serde_json::from_str::<SchemeConfig>(r#"{"pacer": {"kind": "warp"}}"#).is_err());
        let c: SchemeConfig = serde_json::from_str(
            r#"{"pacer": {"kind": "leaky-bucket"}, "frame_drop": {"frame_dropper": true}}"#,
        )
        .unwrap();
        assert_eq!(c.frame_drop, FrameDropConfig { frame_dropper: true, cwnd_pushback: false });
        let typo = r#"{"pacer": {"kind": "leaky-bucket"}, "frame_drop": {"dropper": true}}"#;
        assert!(serde_json::from_str::<SchemeConfig>(typo).is_err());
    }

    #[test]
    fn only_webrtc_drops_frames_and_gcc_runs_pushback_in_drop_frame_mode() {
        for s in registry() {
            let expected = match s.name {
                "webrtc" | "webrtc-burst40" | "webrtc-m156" | "combined" | "combined-no-mae"
                | "combined-1x" | "combined-mae100" => FrameDropConfig::LIBWEBRTC,
                "combined-no-fd" => FrameDropConfig::default(),
                // ACE's and MAE's baselines ran without frame dropping; Copa has no pushback.
                "webrtc-b" | "always-burst" | "webrtc-x264" | "cbr" | "ace-n" | "ace-c" | "ace"
                | "copa" | "copa-salsify" | "x264-gcc100" | "cbr-filler" | "salsify-vbv"
                | "mae-no-prediction" | "mae" | "mae-latch" | "mae-timeout" | "copa-x264"
                | "mae-copa" => FrameDropConfig::default(),
                // Vidaptive pauses the encoder itself (§3.2); no libwebrtc frame dropping.
                "vidaptive" | "vidaptive-rocc" | "vidaptive-no-dummy" | "vidaptive-no-pause"
                | "vidaptive-no-alpha" => FrameDropConfig::default(),
                // Co-RTV's frames are dropped by its bottleneck, not by libwebrtc's stage.
                "fdcc" | "co-rtv" | "co-rtv-k2" | "co-rtv-nofb" => FrameDropConfig::default(),
                other => panic!("new scheme {other}: decide its frame dropping"),
            };
            assert_eq!(s.config.frame_drop, expected, "{}", s.name);
            if let CcConfig::Gcc(g) = &s.config.cc {
                let cw = g.congestion_window.as_ref().expect("pushback on");
                assert!(cw.drop_frame, "{}", s.name);
                if expected.is_off() {
                    assert!(s.description.contains("pushback has no effect"), "{}", s.name);
                }
            }
        }
    }

    #[test]
    fn combined_is_mae_on_webrtcs_gcc_paced_at_webrtc_bs_factor_with_webrtcs_frame_dropping() {
        let c = lookup("combined").unwrap().config;
        let (mae, webrtc_b, webrtc) = (
            lookup("mae").unwrap().config,
            lookup("webrtc-b").unwrap().config,
            lookup("webrtc").unwrap().config,
        );
        assert_eq!(c.encoder_controller, mae.encoder_controller);
        assert_eq!(c.frame_drop, webrtc.frame_drop);
        assert_eq!(c.pacer, mae.pacer);
        let (CcConfig::Gcc(cg), CcConfig::Gcc(mg), CcConfig::Gcc(bg)) =
            (&c.cc, &mae.cc, &webrtc_b.cc)
        else {
            panic!()
        };
        // webrtc-b's GCC (libwebrtc's trendline, 2.5x) with MAE's pre-reaction on it.
        assert_eq!(GccConfig { pre_reaction_ratio: None, ..cg.clone() }, *bg);
        assert_eq!(cg.pre_reaction_ratio, mg.pre_reaction_ratio);
        assert_eq!(cg.trendline_window, GccConfig::default().trendline_window);
        // Each ablation differs from `combined` in its one part only.
        let one_off = |name: &str| {
            let a = lookup(name).unwrap().config;
            [
                a.cc != c.cc,
                a.encoder_controller != c.encoder_controller,
                a.frame_drop != c.frame_drop,
            ]
        };
        assert_eq!(one_off("combined-1x"), [true, false, false]);
        assert_eq!(one_off("combined-no-fd"), [false, false, true]);
        assert_eq!(one_off("combined-no-mae"), [true, true, false]);
        assert_eq!(one_off("combined-mae100"), [true, false, false]);
        let CcConfig::Gcc(ng) = lookup("combined-no-mae").unwrap().config.cc else { panic!() };
        assert_eq!(GccConfig { pre_reaction_ratio: cg.pre_reaction_ratio, ..ng }, *cg);
        // The first `combined` is `mae`'s GCC (the 100 ms trendline) paced at 2.5x.
        let CcConfig::Gcc(hg) = lookup("combined-mae100").unwrap().config.cc else { panic!() };
        assert_eq!(GccConfig { pacing_factor: mg.pacing_factor, ..hg }, *mg);
    }
}
