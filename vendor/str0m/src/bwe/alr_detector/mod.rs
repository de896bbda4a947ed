//! Application Limited Region (ALR) detector for bandwidth estimation.

mod budget;
mod detector;

pub use detector::AlrDetector;
