//! libwebrtc's media-optimisation frame dropper (`modules/video_coding/utility/frame_dropper.cc`,
//! M119), which VideoStreamEncoder consults before every encode when the encoder's rate
//! controller is not trusted (see [`super::video_stream_encoder`]).
//!
//! A leaky bucket in kilobits: every encoded frame adds its size ([`FrameDropper::fill`]),
//! every frame offered to the encoder drains `target / input fps` ([`FrameDropper::leak`]).
//! The bucket's nominal size is half a second of the target. Keyframes, and delta frames
//! larger than 3x the average delta frame, are not added at once but in equal chunks over the
//! next frames (as many as the frames between keyframes, at most half a second's worth, at
//! least 5). While the bucket is above its size, a drop ratio (an exponential filter of "above
//! the size", capped at 0.96) rises; [`FrameDropper::drop_frame`] spreads the drops: at a
//! ratio r >= 0.5 it drops round(1 / (1 - r) - 1) frames per kept frame (at most 4 s worth),
//! below 0.5 it keeps round(1 / r - 1) frames per dropped frame. When the bucket crosses its
//! size from below, the next decision starts a new drop run at once.
//!
//! The arithmetic is in `f32`, as libwebrtc's (the unit tests' numbers are derived from it).
//! libwebrtc exposes none of the constants below as settings; each is documented with its
//! name in frame_dropper.cc.

/// Filter factor of the average delta-frame size (`kDefaultFrameSizeAlpha`).
const FRAME_SIZE_ALPHA: f32 = 0.9;
/// Filter factor of the keyframe ratio (`kDefaultKeyFrameRatioAlpha`).
const KEY_FRAME_RATIO_ALPHA: f32 = 0.99;
/// Initial keyframe ratio: one keyframe every 10 s at 30 fps (`kDefaultKeyFrameRatioValue`).
const KEY_FRAME_RATIO_VALUE: f32 = 1.0 / 300.0;
/// Filter factor of the drop ratio (`kDefaultDropRatioAlpha`); 0.8 while the bucket is more
/// than 1.3x its size (`UpdateRatio`).
const DROP_RATIO_ALPHA: f32 = 0.9;
const DROP_RATIO_ALPHA_FAST: f32 = 0.8;
/// The drop ratio never exceeds this (`kDefaultDropRatioValue`, the filter's maximum).
const DROP_RATIO_MAX: f32 = 0.96;
/// Longest run of consecutive drops, in seconds of input frames
/// (`kDefaultMaxDropDurationSecs`).
const MAX_DROP_DURATION_S: f32 = 4.0;
/// Target assumed before the first rate (`kDefaultTargetBitrateKbps`).
const DEFAULT_TARGET_KBPS: f32 = 300.0;
/// Input frame rate assumed before the first rate (`kDefaultIncomingFrameRate`).
const DEFAULT_INCOMING_FPS: f32 = 30.0;
/// The bucket's nominal size, in seconds of the target (`kLeakyBucketSizeSeconds`).
const BUCKET_SIZE_S: f32 = 0.5;
/// A delta frame above this times the average delta frame is spread like a keyframe
/// (`kLargeDeltaFactor`).
const LARGE_DELTA_FACTOR: f32 = 3.0;
/// The bucket is capped at this many seconds of the target (`kAccumulatorCapBufferSizeSecs`).
const ACCUMULATOR_CAP_S: f32 = 3.0;
/// The bucket level above which the drop ratio reacts faster, in bucket sizes
/// (`UpdateRatio`).
const FAST_REACTION_LEVEL: f32 = 1.3;
/// Fewest frames a large frame is spread over (`Leak`).
const MIN_SPREAD_FRAMES: f64 = 5.0;

/// libwebrtc's `rtc::ExpFilter` (`rtc_base/numerics/exp_filter.cc`) as the frame dropper
/// uses it: every sample is applied with exponent 1; the first sample sets the value.
#[derive(Clone, Debug)]
struct ExpFilter {
    alpha: f32,
    filtered: Option<f32>,
    max: Option<f32>,
}

impl ExpFilter {
    fn new(alpha: f32, max: Option<f32>) -> Self {
        ExpFilter { alpha, filtered: None, max }
    }
    fn apply(&mut self, sample: f32) {
        let y = match self.filtered {
            None => sample,
            Some(y) => self.alpha * y + (1.0 - self.alpha) * sample,
        };
        self.filtered = Some(match self.max {
            Some(max) if y > max => max,
            _ => y,
        });
    }
    fn update_base(&mut self, alpha: f32) {
        self.alpha = alpha;
    }
}

/// The frame dropper's state (every field of libwebrtc's `FrameDropper`).
#[derive(Clone, Debug)]
pub struct FrameDropper {
    key_frame_ratio: ExpFilter,
    delta_frame_size_avg_kbits: ExpFilter,
    /// Frames over which a large frame is spread, and how many of them are left, and the
    /// kilobits each adds.
    large_frame_accumulation_spread: f32,
    large_frame_accumulation_count: i32,
    large_frame_accumulation_chunk_size: f32,
    /// The bucket level and its nominal size, in kilobits.
    accumulator: f32,
    accumulator_max: f32,
    target_kbps: f32,
    drop_next: bool,
    drop_ratio: ExpFilter,
    /// Positive: frames dropped in the current run; negative: frames kept.
    drop_count: i32,
    incoming_fps: f32,
    was_below_max: bool,
}

impl Default for FrameDropper {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameDropper {
    /// A dropper in libwebrtc's initial (`Reset`) state.
    pub fn new() -> Self {
        let mut key_frame_ratio = ExpFilter::new(KEY_FRAME_RATIO_ALPHA, None);
        key_frame_ratio.apply(KEY_FRAME_RATIO_VALUE);
        let mut drop_ratio = ExpFilter::new(DROP_RATIO_ALPHA, Some(DROP_RATIO_MAX));
        drop_ratio.apply(0.0);
        FrameDropper {
            key_frame_ratio,
            delta_frame_size_avg_kbits: ExpFilter::new(FRAME_SIZE_ALPHA, None),
            large_frame_accumulation_spread: 0.5 * DEFAULT_INCOMING_FPS,
            large_frame_accumulation_count: 0,
            large_frame_accumulation_chunk_size: 0.0,
            accumulator: 0.0,
            accumulator_max: DEFAULT_TARGET_KBPS / 2.0,
            target_kbps: DEFAULT_TARGET_KBPS,
            drop_next: false,
            drop_ratio,
            drop_count: 0,
            incoming_fps: DEFAULT_INCOMING_FPS,
            was_below_max: true,
        }
    }

    /// The bucket level, in kilobits.
    pub fn accumulator_kbits(&self) -> f32 {
        self.accumulator
    }
    /// The bucket's nominal size, in kilobits.
    pub fn accumulator_max_kbits(&self) -> f32 {
        self.accumulator_max
    }
    /// The filtered drop ratio.
    pub fn drop_ratio(&self) -> f32 {
        self.drop_ratio.filtered.unwrap_or(0.0)
    }
    /// Frames left over which a large frame is still being added.
    pub fn large_frame_frames_left(&self) -> i32 {
        self.large_frame_accumulation_count
    }

    /// An encoded frame of `size_bytes` (`Fill`): a keyframe, or a delta frame over 3x the
    /// average, is spread over the next frames; any other frame is added at once.
    pub fn fill(&mut self, size_bytes: i64, delta_frame: bool) {
        let mut kbits = 8.0 * size_bytes as f32 / 1000.0;
        if !delta_frame {
            self.key_frame_ratio.apply(1.0);
            // Not while a spread is under way (its bits would be lost).
            if self.large_frame_accumulation_count == 0 {
                let ratio = self.key_frame_ratio.filtered.unwrap_or(KEY_FRAME_RATIO_VALUE);
                self.large_frame_accumulation_count =
                    if ratio > 1e-5 && 1.0 / ratio < self.large_frame_accumulation_spread {
                        ((1.0 / ratio) as f64 + 0.5) as i32
                    } else {
                        (self.large_frame_accumulation_spread as f64 + 0.5) as i32
                    };
                self.large_frame_accumulation_chunk_size =
                    kbits / self.large_frame_accumulation_count as f32;
                kbits = 0.0;
            }
        } else {
            let large = self
                .delta_frame_size_avg_kbits
                .filtered
                .is_some_and(|avg| kbits > LARGE_DELTA_FACTOR * avg);
            if large && self.large_frame_accumulation_count == 0 {
                self.large_frame_accumulation_count =
                    (self.large_frame_accumulation_spread as f64 + 0.5) as i32;
                self.large_frame_accumulation_chunk_size =
                    kbits / self.large_frame_accumulation_count as f32;
                kbits = 0.0;
            } else {
                self.delta_frame_size_avg_kbits.apply(kbits);
            }
            self.key_frame_ratio.apply(0.0);
        }
        self.accumulator += kbits;
        self.cap_accumulator();
    }

    /// A frame offered to the encoder at `input_fps` (`Leak`): the bucket drains one frame's
    /// share of the target (less the chunk of a large frame being spread) and the drop ratio
    /// is updated.
    pub fn leak(&mut self, input_fps: u32) {
        if input_fps < 1 || self.target_kbps < 0.0 {
            return;
        }
        self.large_frame_accumulation_spread =
            (0.5 * input_fps as f64).max(MIN_SPREAD_FRAMES) as f32;
        let mut expected_kbits = self.target_kbps / input_fps as f32;
        if self.large_frame_accumulation_count > 0 {
            expected_kbits -= self.large_frame_accumulation_chunk_size;
            self.large_frame_accumulation_count -= 1;
        }
        self.accumulator -= expected_kbits;
        if self.accumulator < 0.0 {
            self.accumulator = 0.0;
        }
        self.update_ratio();
    }

    fn update_ratio(&mut self) {
        if self.accumulator > FAST_REACTION_LEVEL * self.accumulator_max {
            self.drop_ratio.update_base(DROP_RATIO_ALPHA_FAST);
        } else {
            self.drop_ratio.update_base(DROP_RATIO_ALPHA);
        }
        if self.accumulator > self.accumulator_max {
            // Above the size: a drop run starts at the next decision if the bucket just
            // crossed it.
            if self.was_below_max {
                self.drop_next = true;
            }
            self.drop_ratio.apply(1.0);
            self.drop_ratio.update_base(DROP_RATIO_ALPHA);
        } else {
            self.drop_ratio.apply(0.0);
        }
        self.was_below_max = self.accumulator < self.accumulator_max;
    }

    /// Whether to drop the frame now offered (`DropFrame`; call once per frame, after
    /// [`leak`](Self::leak)).
    pub fn drop_frame(&mut self) -> bool {
        if self.drop_next {
            self.drop_next = false;
            self.drop_count = 0;
        }
        let ratio = self.drop_ratio();
        if ratio >= 0.5 {
            // Drops per kept frame.
            let denom = (1.0 - ratio).max(1e-5);
            let mut limit = (1.0 / denom - 1.0 + 0.5) as i32;
            let max_limit = (self.incoming_fps * MAX_DROP_DURATION_S) as i32;
            limit = limit.min(max_limit);
            if self.drop_count < 0 {
                self.drop_count = -self.drop_count;
            }
            if self.drop_count < limit {
                self.drop_count += 1;
                true
            } else {
                self.drop_count = 0;
                false
            }
        } else if ratio > 0.0 {
            // Kept frames per drop (counted negative).
            let denom = ratio.max(1e-5);
            let limit = -((1.0 / denom - 1.0 + 0.5) as i32);
            if self.drop_count > 0 {
                self.drop_count = -self.drop_count;
            }
            if self.drop_count > limit {
                let drop = self.drop_count == 0;
                self.drop_count -= 1;
                drop
            } else {
                self.drop_count = 0;
                false
            }
        } else {
            self.drop_count = 0;
            false
        }
    }

    /// New rates (`SetRates`): the bucket's size follows the target (a smaller target scales
    /// an overfull bucket down with it).
    pub fn set_rates(&mut self, target_kbps: f32, incoming_fps: f32) {
        self.accumulator_max = target_kbps * BUCKET_SIZE_S;
        if self.target_kbps > 0.0
            && target_kbps < self.target_kbps
            && self.accumulator > self.accumulator_max
        {
            self.accumulator *= target_kbps / self.target_kbps;
        }
        self.target_kbps = target_kbps;
        self.cap_accumulator();
        self.incoming_fps = incoming_fps;
    }

    fn cap_accumulator(&mut self) {
        let cap = self.target_kbps * ACCUMULATOR_CAP_S;
        if self.accumulator > cap {
            self.accumulator = cap;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `slots` capture slots as VideoStreamEncoder does (leak, ask, and fill with the
    /// frame's size if it was kept) at 300 kbps, rates set for `rate_fps`, leaking at
    /// `leak_fps`; the first kept frame is `first` (bytes, delta?) if given, every other a
    /// delta frame of `bytes`. Returns the dropper, the dropped slots and the bucket level
    /// after every slot.
    fn run(
        slots: usize,
        bytes: i64,
        first: Option<(i64, bool)>,
        rate_fps: f32,
        leak_fps: u32,
    ) -> (FrameDropper, Vec<usize>, Vec<f32>) {
        let mut d = FrameDropper::new();
        d.set_rates(300.0, rate_fps);
        let (mut dropped, mut levels) = (Vec::new(), Vec::new());
        for i in 0..slots {
            d.leak(leak_fps);
            if d.drop_frame() {
                dropped.push(i);
            } else {
                match first.filter(|_| i == 0) {
                    Some((b, delta)) => d.fill(b, delta),
                    None => d.fill(bytes, true),
                }
            }
            levels.push(d.accumulator_kbits());
        }
        (d, dropped, levels)
    }

    fn kept(slots: usize, dropped: &[usize]) -> Vec<usize> {
        (0..slots).filter(|i| !dropped.contains(i)).collect()
    }

    #[test]
    fn initial_state_is_libwebrtcs_reset() {
        let d = FrameDropper::new();
        assert_eq!((d.accumulator_kbits(), d.accumulator_max_kbits()), (0.0, 150.0));
        assert_eq!(d.drop_ratio(), 0.0);
        assert_eq!(d.large_frame_frames_left(), 0);
    }

    #[test]
    fn frames_twice_the_budget_are_dropped_where_libwebrtc_drops_them() {
        // 300 kbps at 30 fps: 10 kbit per slot; frames of 2 500 B = 20 kbit. Each kept slot
        // leaks 10 and fills 20: the bucket is 10 k kbit after slot k's leak. At slot 15 it is
        // exactly at its 150 kbit size (not above, and no longer below), at slot 16 above it:
        // the drop ratio becomes 0.1 (one drop per 9 kept) and a run starts with a drop.
        // After that the drops and the ratio settle around one slot in two. (The slots are
        // those of an independent f32 transcription of frame_dropper.cc.)
        let (d, dropped, levels) = run(60, 2500, None, 30.0, 30);
        assert_eq!(levels[15], 170.0, "150 after slot 15's leak, 170 after its fill");
        assert_eq!(
            dropped,
            [
                16, 20, 22, 24, 25, 27, 28, 30, 31, 33, 35, 38, 41, 43, 44, 46, 48, 50, 52, 54, 56,
                58
            ]
        );
        assert_eq!(dropped.iter().filter(|&&i| i >= 16).count(), (60 - 16) / 2);
        assert!((d.drop_ratio() - 0.4925).abs() < 1e-4, "{}", d.drop_ratio());
    }

    #[test]
    fn the_drop_ratio_is_capped_so_a_frame_is_kept_after_24_drops() {
        // Frames of 1 000 kbit fill the bucket to its 3 s cap (900 kbit); it stays far above
        // its size, the ratio climbs 0.2, 0.36, 0.488, 0.5904, ... to its 0.96 cap, so at most
        // round(1 / 0.04 - 1) = 24 slots are dropped per kept one.
        let (d, dropped, levels) = run(120, 125_000, None, 30.0, 30);
        assert_eq!(levels[0], 900.0, "capped at 3 s of the target");
        assert_eq!(kept(120, &dropped), [0, 2, 3, 28, 53, 78, 103]);
        assert_eq!(d.drop_ratio(), 0.96);
    }

    #[test]
    fn drop_runs_last_at_most_4_s_of_input_frames() {
        // As above, but the rates say 5 fps (the bucket still leaks a 30th of the target per
        // slot, so it stays above its size): runs stop at 5 fps x 4 s = 20 drops, below the
        // ratio's 24.
        let (_, dropped, _) = run(120, 125_000, None, 5.0, 30);
        assert_eq!(kept(120, &dropped), [0, 2, 3, 24, 45, 66, 87, 108]);
        // At 6 fps the 4 s limit (24) no longer binds.
        let (_, dropped, _) = run(120, 125_000, None, 6.0, 30);
        assert_eq!(kept(120, &dropped), [0, 2, 3, 28, 53, 78, 103]);
    }

    #[test]
    fn a_keyframe_is_spread_over_the_next_frames_a_delta_frame_is_not() {
        // A 200 kbit keyframe, then delta frames of 5 kbit at a 10 kbit budget: the
        // keyframe's ratio (0.99 x 1/300 + 0.01 = 0.0133) means one every 75 frames, more
        // than half a second, so it is spread over 15 slots in chunks of 13.33 kbit: the
        // bucket rises by 8.33 kbit per slot to 125 kbit, below its 150 kbit size, and
        // nothing is dropped.
        let (d, dropped, levels) = run(30, 625, Some((25_000, false)), 30.0, 30);
        assert_eq!(levels[0], 0.0, "not added at once");
        assert!((levels[1] - 8.3333).abs() < 1e-3 && (levels[15] - 125.0).abs() < 1e-3);
        assert!((levels[16] - 120.0).abs() < 1e-3, "spread done: 5 in, 10 out");
        assert!(dropped.is_empty(), "{dropped:?}");
        assert_eq!(d.large_frame_frames_left(), 0);
        // The same 200 kbit as the first delta frame (no average yet, so not "large") goes in
        // at once: 190 kbit after the next leak, above the size from below, so the next slot
        // is dropped.
        let (_, dropped, levels) = run(30, 625, Some((25_000, true)), 30.0, 30);
        assert_eq!(levels[0], 200.0);
        assert_eq!(dropped, [1, 5, 7, 10, 14]);
    }

    #[test]
    fn the_spread_count_follows_the_keyframe_ratio() {
        let mut d = FrameDropper::new();
        d.fill(30_000, false);
        // 1 / 0.0133 = 75 frames between keyframes, over the 15-frame spread: 15.
        assert_eq!(d.large_frame_frames_left(), 15);
        // A delta frame over 3x the average is spread too, over half a second of frames (at
        // least 5: 5 at 6 fps after a leak at that rate).
        let mut d = FrameDropper::new();
        d.fill(1000, true);
        d.leak(6);
        d.fill(4000, true);
        assert_eq!(d.large_frame_frames_left(), 5);
        let mut d = FrameDropper::new();
        d.fill(1000, true);
        d.fill(2999, true);
        assert_eq!(d.large_frame_frames_left(), 0, "under 3x the average: added at once");
        assert_eq!(d.accumulator_kbits(), 8.0 + 23.992);
        // Keyframes every 4th frame (8 kbit each, leaking at 30 fps): the first is spread over
        // 15 frames; the next three arrive while that spread runs and go in at once (8 kbit
        // in the bucket). The ratio rises towards 1/4 (0.214 after 200 frames): once 1 / ratio
        // is under the 15-frame spread, a keyframe is spread over round(1 / ratio) frames
        // (13, 9, 8, 7, 6, 5), and while that is longer than 4 every second keyframe still
        // finds a spread running. (From the independent f32 transcription.)
        let mut d = FrameDropper::new();
        let (mut counts, mut levels) = (Vec::new(), Vec::new());
        for i in 0..200 {
            d.leak(30);
            d.fill(1000, i % 4 != 0);
            if i % 4 == 0 {
                counts.push(d.large_frame_frames_left());
                levels.push(d.accumulator_kbits());
            }
        }
        assert_eq!(
            counts,
            [
                15, 11, 7, 3, 15, 11, 7, 3, 13, 9, 5, 1, 9, 5, 1, 8, 4, 8, 4, 7, 3, 7, 3, 6, 2, 6,
                2, 6, 2, 6, 2, 5, 1, 5, 1, 5, 1, 5, 1, 5, 1, 5, 1, 5, 1, 5, 1, 5, 1, 5
            ]
        );
        assert_eq!(levels[..5], [0.0, 8.0, 8.0, 8.0, 0.0]);
    }

    #[test]
    fn a_lower_rate_scales_an_overfull_bucket_and_the_bucket_is_capped() {
        let mut d = FrameDropper::new();
        d.fill(25_000, true); // 200 kbit, over the 150 kbit size
        d.set_rates(150.0, 30.0);
        assert_eq!((d.accumulator_kbits(), d.accumulator_max_kbits()), (100.0, 75.0));
        // A higher rate does not scale it.
        d.set_rates(600.0, 30.0);
        assert_eq!(d.accumulator_kbits(), 100.0);
        // The cap is 3 s of the target.
        let mut d = FrameDropper::new();
        d.set_rates(20.0, 30.0);
        d.fill(25_000, true);
        assert_eq!(d.accumulator_kbits(), 60.0);
    }
}
