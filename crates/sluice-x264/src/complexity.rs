//! ACE-C's encoding-complexity levels (ACE §5.1, Table 2) as x264 analysis parameters.
//!
//! | level | partitions (inter and intra)        | motion search | subpel | trellis |
//! |-------|-------------------------------------|---------------|--------|---------|
//! | c0    | 8x8 only (P8x8, I8x8)               | DIA           | 1      | off     |
//! | c1    | all (P8x8, P4x4, I8x8, I4x4)        | HEX           | 4      | off     |
//! | c2    | all                                 | HEX           | 4      | on (1)  |
//!
//! x264 can switch between these with `x264_encoder_reconfig` only if the encoder was opened
//! with subpel refinement above 0, the 8x8 transform and CABAC: every preset from superfast
//! up (High profile, the default without `--profile`), not ultrafast or the baseline profile.
//! [`X264Encoder::reconfigure_analysis`](crate::X264Encoder::reconfigure_analysis) reports
//! the violation as an error.

use crate::{AnalysisParams, MeMethod, Partitions};
use sluice_core::encoder::Complexity;

/// Quantiser steps that halve a frame's size when x264 adds them to one frame as a uniform
/// quant offset. Measured by `bench/encoder.py` (one frame in ten offset by 1 and 2 QP
/// within an ABR stream, four 960 px clips at 0.6, 1.5 and 4 Mbps): 2.3 to 4.2, mean 2.9.
/// Far below the textbook 6 (one doubling of the quantiser step): more macroblocks turn into
/// skips and fewer coefficients survive the dead zone.
pub const QP_PER_SIZE_HALVING: f64 = 3.0;

/// The quant offset that carries out a planned-size scale (ACE §5.1's correction, see
/// `FrameRequest::planned_size_scale`): `-QP_PER_SIZE_HALVING * log2(scale)`. 0 for a scale
/// that is not a positive number.
pub fn qp_offset_for_size_scale(scale: f64) -> f32 {
    if scale > 0.0 && scale.is_finite() {
        (-QP_PER_SIZE_HALVING * scale.log2()) as f32
    } else {
        0.0
    }
}

/// The analysis parameters of a complexity level.
pub fn analysis_for(level: Complexity) -> AnalysisParams {
    match level {
        Complexity::C0 => AnalysisParams {
            partitions: Partitions::P8X8 | Partitions::I8X8,
            me_method: MeMethod::Dia,
            subpel_refine: 1,
            trellis: 0,
        },
        Complexity::C1 => AnalysisParams {
            partitions: Partitions::P8X8 | Partitions::P4X4 | Partitions::I8X8 | Partitions::I4X4,
            me_method: MeMethod::Hex,
            subpel_refine: 4,
            trellis: 0,
        },
        Complexity::C2 => AnalysisParams { trellis: 1, ..analysis_for(Complexity::C1) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{I420Frame, X264Config, X264Encoder};

    #[test]
    fn every_level_is_accepted_mid_stream_and_read_back() {
        let mut cfg = X264Config::new(320, 240, 30, 500_000);
        cfg.preset = "superfast".into();
        let mut enc = X264Encoder::open(&cfg).expect("open");
        let frame = I420Frame::new_grey(320, 240);
        for level in [Complexity::C2, Complexity::C0, Complexity::C1, Complexity::C2] {
            let want = analysis_for(level);
            enc.reconfigure_analysis(&want).expect("reconfigure");
            enc.encode(&frame, false).expect("encode");
            assert_eq!(enc.analysis(), want, "{level:?}");
        }
    }

    #[test]
    fn ultrafast_cannot_take_the_levels() {
        let mut cfg = X264Config::new(320, 240, 30, 500_000);
        cfg.preset = "ultrafast".into();
        let mut enc = X264Encoder::open(&cfg).expect("open");
        assert!(enc.reconfigure_analysis(&analysis_for(Complexity::C0)).is_err());
    }
}
