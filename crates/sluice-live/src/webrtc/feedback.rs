//! Sender side of the WebRTC layer: what str0m tells of the packets that left and of the
//! peer's transport-cc and NACK reports, as Sluice's feedback for the wrapped sender (its
//! RTCP). Transport-cc numbers map back to Sluice's transport numbers, wire sequence numbers
//! to Sluice's media sequence numbers, and the report's hold time is estimated from its lag.

use super::{WebRtc, HOLD_WINDOW, MAP_KEPT};
use crate::wire;
use sluice_core::packet::{Feedback, PacketReport, TransportFeedback};
use sluice_core::units::{TimeDelta, Timestamp};

impl WebRtc {
    /// Feedback for the wrapped sender, as its RTCP.
    pub(super) fn give_inner(&mut self, f: &Feedback) {
        if let Ok(b) = wire::write_feedback(f, self.stream) {
            self.to_inner.push_back(b);
        }
    }

    pub(super) fn on_rtp_tx(&mut self, wire_seq: u16, twcc: Option<u16>) {
        let Some(twcc) = twcc else { return };
        // Packets leave in the order they were written.
        while let Some(&(w, sluice)) = self.leaving.front() {
            self.leaving.pop_front();
            if w == wire_seq {
                self.map_twcc(twcc, sluice);
                return;
            }
        }
    }

    /// A padding packet left on the RTX stream: its transport number maps to the core's
    /// padding packet it is part of.
    pub(super) fn on_padding_tx(&mut self, len: usize, twcc: Option<u16>) {
        self.stats.padding_rtx_packets += 1;
        let Some(&mut (sluice, ref mut left)) = self.padding_leaving.front_mut() else {
            return;
        };
        *left = left.saturating_sub(len.max(1));
        if *left == 0 {
            self.padding_leaving.pop_front();
        }
        if let Some(twcc) = twcc {
            self.map_twcc(twcc, sluice);
        }
    }

    fn map_twcc(&mut self, twcc: u16, sluice: u64) {
        let t = self.twcc_unwrap.peek(twcc as u64);
        self.twcc_unwrap.accept(t);
        self.twcc_to_sluice.insert(t, sluice);
        self.stats.twcc_mapped += 1;
        while self.twcc_to_sluice.len() > MAP_KEPT {
            self.twcc_to_sluice.pop_first();
        }
    }

    pub(super) fn on_twcc(&mut self, t: str0m::rtp::rtcp::Twcc, now: Timestamp) {
        self.stats.twcc_reports += 1;
        let extend = self.twcc_to_sluice.last_key_value().map_or(0, |(k, _)| *k);
        let mut reports: Vec<PacketReport> = Vec::new();
        for (seq, _, arrival) in t.into_iter(self.origin, extend.into()) {
            match self.twcc_to_sluice.get(&*seq) {
                Some(&s) => reports.push(PacketReport {
                    transport_seq: s,
                    arrival_time: arrival.map(|a| self.timestamp(a)),
                }),
                None => self.stats.twcc_unmapped += 1,
            }
        }
        reports.sort_by_key(|r| r.transport_seq);
        // The packets of one of the core's padding packets (RTX padding to a browser) report
        // it once, arrived when its last packet did (lost only if all were). Across two
        // reports, the first that says it arrived counts: the sender's history takes a packet
        // reported received once, as libwebrtc's does.
        reports.dedup_by(|later, first| {
            let same = later.transport_seq == first.transport_seq;
            if same {
                first.arrival_time = first.arrival_time.max(later.arrival_time);
            }
            same
        });
        // The hold time (from the newest arrival to the report's sending, which Sluice's
        // SLFB carries and transport-cc does not): the excess of `now - newest arrival`
        // (the arrival in the receiver's clock) over its minimum in the last 10 s. That
        // difference is the clocks' offset plus the way back plus the hold time; its minimum
        // is a report sent right after an arrival. A browser reports every 50 to 250 ms;
        // without this the RTT of every packet of a report would include its wait.
        let hold = match reports.iter().filter_map(|r| r.arrival_time).max() {
            Some(newest) => {
                let d = now - newest;
                d - self.report_lag.update(d, now, HOLD_WINDOW)
            }
            None => TimeDelta::ZERO,
        };
        self.hold_time = hold;
        // Sluice's feedback covers contiguous numbers: one message per run.
        let mut run: Vec<PacketReport> = Vec::new();
        for r in reports {
            if run.last().is_some_and(|l| l.transport_seq + 1 != r.transport_seq) {
                self.give_transport(std::mem::take(&mut run));
            }
            run.push(r);
        }
        self.give_transport(run);
    }

    fn give_transport(&mut self, packets: Vec<PacketReport>) {
        if packets.is_empty() {
            return;
        }
        self.feedback_seq += 1;
        // The report's estimated hold time ([`Self::on_twcc`]).
        let fb = TransportFeedback {
            flow: 0,
            feedback_seq: self.feedback_seq,
            packets,
            hold_time: self.hold_time,
            // Chromium's transport-cc carries no ECN counts.
            ecn_ce_count: 0,
        };
        self.give_inner(&Feedback::Transport(fb));
    }

    pub(super) fn on_nack(&mut self, n: &str0m::rtp::rtcp::Nack) {
        self.stats.nacks += 1;
        let top = self.next_wire_seq.saturating_sub(1);
        let mut media = Vec::new();
        for e in n.reports.iter() {
            let mut seqs = vec![e.pid];
            seqs.extend(
                (0..16).filter(|b| e.blp & (1 << b) != 0).map(|b| e.pid.wrapping_add(b + 1)),
            );
            for s in seqs {
                let w = wire::unwrap_near(s as u64, 16, top);
                match self.wire_to_media.get(&w) {
                    Some(&m) => media.push(m),
                    None => self.stats.nacked_unknown += 1,
                }
            }
        }
        media.sort_unstable();
        media.dedup();
        if !media.is_empty() {
            self.give_inner(&Feedback::Nack { flow: 0, media_seqs: media });
        }
    }
}
