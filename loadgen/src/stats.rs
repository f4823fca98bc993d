//! Counters and latency histograms. Each worker fills a `Stats` for one reporting interval and
//! hands it to the main thread, which merges intervals into the run's totals.

use crate::api::{Api, API_COUNT};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;

/// Histogram slots: one per API, then rebalance convergence.
pub const CONVERGENCE: usize = API_COUNT;
pub const HIST_COUNT: usize = API_COUNT + 1;

/// Largest value a histogram holds: one hour in microseconds (larger values saturate).
pub const HIST_MAX_US: u64 = 3_600_000_000;
/// Significant decimal digits kept (HdrHistogram precision).
pub const HIST_SIGFIG: u8 = 3;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_US, HIST_SIGFIG).expect("valid histogram bounds")
}

/// Name of a histogram slot.
pub fn slot_name(slot: usize) -> &'static str {
    if slot == CONVERGENCE {
        "Rebalance"
    } else {
        Api::ALL[slot].name()
    }
}

#[derive(Debug, Clone)]
pub struct Stats {
    /// Latency in µs per API (by `Api::index`), and join → stable time at `CONVERGENCE`.
    pub hists: Vec<Histogram<u64>>,
    pub requests: [u64; API_COUNT],
    pub responses: [u64; API_COUNT],
    /// Responses and failures counted as errors.
    pub errors: [u64; API_COUNT],
    /// Responses that arrived after the member had moved on (rejoined, left); not acted upon
    /// and never counted as errors.
    pub stale: [u64; API_COUNT],
    /// Every non-zero response code, and loadgen's own negative failure codes: (api, code) → n.
    pub codes: BTreeMap<(Api, i16), u64>,
    /// The subset of `codes` counted as errors.
    pub error_codes: BTreeMap<(Api, i16), u64>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            hists: (0..HIST_COUNT).map(|_| new_histogram()).collect(),
            requests: [0; API_COUNT],
            responses: [0; API_COUNT],
            errors: [0; API_COUNT],
            stale: [0; API_COUNT],
            codes: BTreeMap::new(),
            error_codes: BTreeMap::new(),
        }
    }
}

impl Stats {
    pub fn record_latency(&mut self, api: Api, micros: u64) {
        self.hists[api.index()].saturating_record(micros.max(1));
    }

    pub fn record_convergence(&mut self, micros: u64) {
        self.hists[CONVERGENCE].saturating_record(micros.max(1));
    }

    pub fn code(&mut self, api: Api, code: i16) {
        if code != 0 {
            *self.codes.entry((api, code)).or_default() += 1;
        }
    }

    pub fn error(&mut self, api: Api, code: i16) {
        self.errors[api.index()] += 1;
        *self.error_codes.entry((api, code)).or_default() += 1;
    }

    /// Take the interval's numbers, leaving zeroed counters and empty histograms behind.
    pub fn take(&mut self) -> Stats {
        let fresh = Stats {
            hists: self.hists.iter().map(Histogram::new_from).collect(),
            ..Stats::default()
        };
        std::mem::replace(self, fresh)
    }

    pub fn merge(&mut self, other: &Stats) {
        for (a, b) in self.hists.iter_mut().zip(&other.hists) {
            // Same bounds everywhere, so adding cannot fail.
            let _ = a.add(b);
        }
        for i in 0..API_COUNT {
            self.requests[i] += other.requests[i];
            self.responses[i] += other.responses[i];
            self.errors[i] += other.errors[i];
            self.stale[i] += other.stale[i];
        }
        for (k, v) in &other.codes {
            *self.codes.entry(*k).or_default() += v;
        }
        for (k, v) in &other.error_codes {
            *self.error_codes.entry(*k).or_default() += v;
        }
    }

    pub fn total_requests(&self) -> u64 {
        self.requests.iter().sum()
    }
    pub fn total_responses(&self) -> u64 {
        self.responses.iter().sum()
    }
    pub fn total_errors(&self) -> u64 {
        self.errors.iter().sum()
    }
}

/// What a worker sends the main thread once a second (and at the end).
#[derive(Debug)]
pub struct IntervalReport {
    pub worker: usize,
    pub stats: Stats,
    /// Members of this worker stable right now.
    pub stable: u32,
    pub members: u32,
    /// Members that were stable at least once.
    pub ever_stable: u32,
    /// Connections open right now: shared, and the JoinGroup/SyncGroup pool.
    pub shared_conns: u32,
    pub pool_conns: u32,
    /// Largest pool size so far.
    pub pool_peak: u32,
    /// Open loop: heartbeat slots whose send was late (the backlog of intended sends), and
    /// slots that found no stable member.
    pub rate_late_slots: u64,
    pub rate_idle_slots: u64,
    /// The interval lies after the measured run (drain of in-flight requests and LeaveGroups).
    pub draining: bool,
    /// Snapshot taken when the run ended, before shutdown: stable members at that moment.
    pub stable_at_end: Option<u32>,
    /// With `stable_at_end`: every partition the members own at that moment, as (group, topic
    /// index, partition), one entry per owner.
    pub owned_at_end: Vec<(u32, u16, i32)>,
    /// Last report of this worker.
    pub finished: bool,
    /// A fatal error that stopped the worker early.
    pub fatal: Option<String>,
    /// With `stable_at_end`, when convergence is tracked: every member's times.
    pub member_times: Vec<crate::converge::MemberTimes>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::ResponseError;

    #[test]
    fn take_resets_and_merge_adds() {
        let mut s = Stats::default();
        s.record_latency(Api::Heartbeat, 100);
        s.record_latency(Api::Heartbeat, 0); // clamped to 1
        s.requests[Api::Heartbeat.index()] = 2;
        s.code(Api::Heartbeat, ResponseError::RebalanceInProgress.code());
        s.code(Api::Heartbeat, 0);
        s.error(Api::Heartbeat, ResponseError::UnknownMemberId.code());
        let t = s.take();
        assert_eq!(s.total_requests(), 0);
        assert_eq!(s.hists[0].len(), 0);
        assert_eq!(t.hists[0].len(), 2);
        assert_eq!(t.codes.len(), 1);
        let mut total = Stats::default();
        total.merge(&t);
        total.merge(&t);
        assert_eq!(total.hists[0].len(), 4);
        assert_eq!(total.total_errors(), 2);
        assert_eq!(
            total.error_codes[&(Api::Heartbeat, ResponseError::UnknownMemberId.code())],
            2
        );
        assert_eq!(
            total.codes[&(Api::Heartbeat, ResponseError::RebalanceInProgress.code())],
            2
        );
    }
}
