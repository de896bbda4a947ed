//! Padding when there is no media (libwebrtc's padding debt): padding packets of 5 ms of the
//! padding rate leave whenever the debt they left behind has been paid off at that rate.

use super::prober::PROBE_PADDING_SIZE;
use crate::units::{DataRate, DataSize, TimeDelta, Timestamp};

/// Padding is sent in 5 ms worth of the padding rate (libwebrtc).
const PADDING_TARGET: TimeDelta = TimeDelta::from_ms(5);

/// The padding debt and its rate.
#[derive(Debug, Default)]
pub struct PaddingBudget {
    rate: DataRate,
    debt: DataSize,
}

impl PaddingBudget {
    /// Sets the padding rate (zero: no padding).
    pub fn set_rate(&mut self, rate: DataRate) {
        self.rate = rate;
    }
    /// Pays the debt off for `elapsed`.
    pub fn pay(&mut self, elapsed: TimeDelta) {
        self.debt = (self.debt - self.rate * elapsed).max(DataSize::ZERO);
    }
    /// When the next padding packet may go (`last_update`: when the debt was last paid);
    /// never while media waits or without a padding rate.
    pub fn send_time(&self, last_update: Timestamp, queue_empty: bool) -> Timestamp {
        if self.rate == DataRate::ZERO || !queue_empty {
            return Timestamp::INFINITY;
        }
        last_update + self.debt / self.rate
    }
    /// The size of the next padding packet, charged to the debt.
    pub fn take_packet(&mut self) -> DataSize {
        let size =
            (self.rate * PADDING_TARGET).max(DataSize::from_bytes(50)).min(PROBE_PADDING_SIZE);
        self.debt += size;
        size
    }
}
