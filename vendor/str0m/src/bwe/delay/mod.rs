mod arrival_group;
mod control;
mod rate_control;
mod trendline;

pub use control::DelayController;
