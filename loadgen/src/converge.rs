//! Group convergence as the client sees it: when is every member of a group stable with its
//! assignment, and how long did that take — for a start-up storm (`--until-stable`) and for
//! members joining an already stable group one at a time (`--late-joiners`).
//!
//! **Converged** (a group): every member that has started is stable (the member's own notion,
//! `MemberMachine::is_stable`), every partition of the subscribed topics is owned, and the owned
//! counts differ by at most one between members. The last condition matters for the consumer
//! protocol: a new member is first answered with an empty assignment while the partitions meant
//! for it are still being revoked elsewhere, and after one quiet heartbeat it counts as stable —
//! with every partition still owned by the old owners. Both assignors this tool meets balance one
//! topic to within one partition (the brokers' `uniform`, and the `range` assignor the classic
//! leader runs here), so a group that is not balanced is still moving.
//!
//! The time of convergence is the latest change (a member becoming stable or unstable, or its
//! owned-partition count changing) among the group's members, not the time it was noticed: each
//! worker stamps its members' changes with its clock, and sends the aggregates of its members per
//! group every [`REPORT_EVERY_US`]. The main thread ([`Tracker`]) declares a group converged only
//! once every worker has reported again after it first saw the condition hold, with the same
//! latest change, so that two workers' reports taken at different moments cannot make up a state
//! that never existed.
//!
//! Pure: the tracker is fed reports and the current time, and answers with what to do next.

use crate::member::Micros;
use crate::report::percentiles_json;
use crate::stats::new_histogram;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU32};

/// How often a worker sends its per-group aggregates while convergence is tracked.
pub const REPORT_EVERY_US: Micros = 50_000;

/// What the main thread tells the workers during a run.
#[derive(Debug, Default)]
pub struct RunControl {
    /// End the measured run now (as if --duration had passed).
    pub stop: AtomicBool,
    /// Late joiners `0..released` may start.
    pub released: AtomicU32,
}

/// One worker's members of one group, at the moment of its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupAgg {
    pub started: u32,
    pub stable: u32,
    /// Partitions owned, summed over the members.
    pub owned: u64,
    /// Fewest and most partitions one started member owns (`u32::MAX`/0 when none started).
    pub min_owned: u32,
    pub max_owned: u32,
    /// The latest change of any of these members (0 = none yet).
    pub last_change_us: Micros,
}

impl Default for GroupAgg {
    fn default() -> Self {
        GroupAgg {
            started: 0,
            stable: 0,
            owned: 0,
            min_owned: u32::MAX,
            max_owned: 0,
            last_change_us: 0,
        }
    }
}

impl GroupAgg {
    /// Fold one started member in.
    pub fn add(&mut self, stable: bool, owned: u32, last_change_us: Micros) {
        self.started += 1;
        self.stable += u32::from(stable);
        self.owned += u64::from(owned);
        self.min_owned = self.min_owned.min(owned);
        self.max_owned = self.max_owned.max(owned);
        self.last_change_us = self.last_change_us.max(last_change_us);
    }

    pub fn merge(&mut self, o: &GroupAgg) {
        self.started += o.started;
        self.stable += o.stable;
        self.owned += o.owned;
        self.min_owned = self.min_owned.min(o.min_owned);
        self.max_owned = self.max_owned.max(o.max_owned);
        self.last_change_us = self.last_change_us.max(o.last_change_us);
    }

    /// Every started member stable, every partition owned, counts balanced to within one.
    pub fn converged(&self, partitions: u64) -> bool {
        self.started > 0
            && self.stable == self.started
            && self.owned == partitions
            && self.max_owned - self.min_owned.min(self.max_owned) <= 1
    }
}

/// A late joiner, as its worker last saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LateView {
    /// 0-based: the order in which late joiners are released.
    pub index: u32,
    pub started_us: Option<Micros>,
    pub stable: bool,
    pub last_change_us: Micros,
}

/// What a worker sends every [`REPORT_EVERY_US`] while convergence is tracked.
#[derive(Debug, Clone)]
pub struct GroupReport {
    pub worker: usize,
    /// The worker's clock when it built the report.
    pub at_us: Micros,
    /// One entry per group of the run (empty aggregates for groups it has no member of).
    pub groups: Vec<GroupAgg>,
    pub late: Vec<LateView>,
}

/// One late joiner's measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LateEvent {
    pub started_us: Micros,
    /// The new member's own join → stable with its final assignment.
    pub joiner_stable_us: Micros,
    /// Its join → the whole group converged again.
    pub group_stable_us: Micros,
}

/// What the run should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Nothing,
    /// Let late joiners `0..n` start (n grows by one per event).
    Release(u32),
    /// The measurement is over: end the run now.
    Stop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the initial members to converge.
    Initial,
    /// Waiting for late joiner k (released) and the group to converge again.
    Late(u32),
    Done,
}

/// The main thread's view: merges the workers' reports and decides when a state has converged.
#[derive(Debug)]
pub struct Tracker {
    groups: usize,
    partitions_per_group: u64,
    initial_members: u64,
    late_total: u32,
    stop_when_done: bool,
    latest: Vec<Option<GroupReport>>,
    phase: Phase,
    /// (main-thread time the condition was first seen, the latest change then).
    candidate: Option<(Micros, Micros)>,
    pub initial_converged_us: Option<Micros>,
    pub events: Vec<LateEvent>,
}

impl Tracker {
    pub fn new(
        workers: usize,
        groups: usize,
        partitions_per_group: u64,
        initial_members: u64,
        late_total: u32,
        stop_when_done: bool,
    ) -> Self {
        Tracker {
            groups,
            partitions_per_group,
            initial_members,
            late_total,
            stop_when_done,
            latest: vec![None; workers],
            phase: Phase::Initial,
            candidate: None,
            initial_converged_us: None,
            events: Vec::new(),
        }
    }

    pub fn on_report(&mut self, r: GroupReport) {
        let w = r.worker;
        if w < self.latest.len() {
            self.latest[w] = Some(r);
        }
    }

    fn released(&self) -> u32 {
        match self.phase {
            Phase::Initial => 0,
            Phase::Late(k) => k + 1,
            Phase::Done => self.events.len() as u32,
        }
    }

    /// The merged state, if every worker has reported and every group has converged: the latest
    /// change across them.
    fn converged_at(&self) -> Option<Micros> {
        let mut merged = vec![GroupAgg::default(); self.groups];
        for r in &self.latest {
            let r = r.as_ref()?;
            for (m, g) in merged.iter_mut().zip(&r.groups) {
                m.merge(g);
            }
        }
        let started: u64 = merged.iter().map(|g| u64::from(g.started)).sum();
        if started != self.initial_members + u64::from(self.released()) {
            return None;
        }
        merged
            .iter()
            .all(|g| g.converged(self.partitions_per_group))
            .then(|| merged.iter().map(|g| g.last_change_us).max().unwrap_or(0))
    }

    fn late_view(&self, k: u32) -> Option<LateView> {
        self.latest
            .iter()
            .flatten()
            .flat_map(|r| r.late.iter())
            .find(|l| l.index == k)
            .copied()
    }

    /// Called after reports arrived (or periodically) with the main thread's clock.
    pub fn poll(&mut self, now_us: Micros) -> Command {
        if self.phase == Phase::Done {
            return Command::Nothing;
        }
        let Some(at) = self.converged_at() else {
            self.candidate = None;
            return Command::Nothing;
        };
        match self.candidate {
            Some((seen, last)) if last == at => {
                // Confirmed once every worker has reported since the condition was first seen.
                let all_after = self
                    .latest
                    .iter()
                    .all(|r| r.as_ref().is_some_and(|r| r.at_us > seen));
                if !all_after {
                    return Command::Nothing;
                }
            }
            _ => {
                self.candidate = Some((now_us, at));
                return Command::Nothing;
            }
        }
        self.candidate = None;
        match self.phase {
            Phase::Initial => {
                self.initial_converged_us = Some(at);
            }
            Phase::Late(k) => {
                let Some(v) = self.late_view(k) else {
                    return Command::Nothing;
                };
                let Some(started) = v.started_us else {
                    return Command::Nothing;
                };
                self.events.push(LateEvent {
                    started_us: started,
                    joiner_stable_us: v.last_change_us.saturating_sub(started),
                    group_stable_us: at.saturating_sub(started),
                });
            }
            Phase::Done => unreachable!("returned above"),
        }
        let next = self.events.len() as u32;
        if next < self.late_total {
            self.phase = Phase::Late(next);
            Command::Release(next + 1)
        } else {
            self.phase = Phase::Done;
            if self.stop_when_done {
                Command::Stop
            } else {
                Command::Nothing
            }
        }
    }
}

/// A member's times at the end of the run, for the per-member convergence distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberTimes {
    pub group: u32,
    pub started_us: Option<Micros>,
    pub stable: bool,
    pub owned: u32,
    pub last_change_us: Micros,
}

/// The whole run's convergence report (`summary.json`'s `group_convergence`).
pub fn report_json(
    tracker: &Tracker,
    members: &[MemberTimes],
    groups: usize,
    partitions_per_group: u64,
) -> Value {
    let ms = |us: Micros| (us as f64 / 100.0).round() / 10.0;
    // The start-up storm, from the members' own times at the end of the run: meaningful when
    // nothing moved the initial members afterwards (no late joiners), and only for groups that
    // had converged by then.
    let initial = if tracker.late_total == 0 {
        let mut per_group = vec![GroupAgg::default(); groups];
        for m in members.iter().filter(|m| m.started_us.is_some()) {
            if let Some(g) = per_group.get_mut(m.group as usize) {
                g.add(m.stable, m.owned, m.last_change_us);
            }
        }
        let converged: Vec<bool> = per_group
            .iter()
            .map(|g| g.converged(partitions_per_group))
            .collect();
        let mut h = new_histogram();
        let mut first_start = Micros::MAX;
        let mut group_ms = new_histogram();
        let mut group_start = vec![Micros::MAX; groups];
        for m in members {
            let (Some(s), true) = (
                m.started_us,
                converged.get(m.group as usize).copied().unwrap_or(false),
            ) else {
                continue;
            };
            h.saturating_record(m.last_change_us.saturating_sub(s).max(1));
            first_start = first_start.min(s);
            group_start[m.group as usize] = group_start[m.group as usize].min(s);
        }
        for (g, agg) in per_group.iter().enumerate() {
            if converged[g] {
                group_ms
                    .saturating_record(agg.last_change_us.saturating_sub(group_start[g]).max(1));
            }
        }
        let n_conv = converged.iter().filter(|&&c| c).count();
        let all_at = per_group
            .iter()
            .zip(&converged)
            .filter(|(_, &c)| c)
            .map(|(g, _)| g.last_change_us)
            .max();
        json!({
            "groups": groups,
            "groups_converged_at_end": n_conv,
            "per_member_join_to_stable_us": percentiles_json(&h),
            "per_group_first_join_to_converged_us": percentiles_json(&group_ms),
            "all_groups_converged_ms": (n_conv == groups && groups > 0)
                .then(|| all_at.map(|a| ms(a.saturating_sub(first_start)))).flatten(),
        })
    } else {
        Value::Null
    };
    let mut joiner = new_histogram();
    let mut group = new_histogram();
    for e in &tracker.events {
        joiner.saturating_record(e.joiner_stable_us.max(1));
        group.saturating_record(e.group_stable_us.max(1));
    }
    json!({
        "definition": "a group has converged when every started member is stable, every partition is owned and the owned counts differ by at most one; its time is the latest member change",
        "initial_converged_ms": tracker.initial_converged_us.map(ms),
        "initial": initial,
        "late_joiners": {
            "requested": tracker.late_total,
            "completed": tracker.events.len(),
            "joiner_join_to_stable_us": percentiles_json(&joiner),
            "join_to_group_converged_us": percentiles_json(&group),
            "events_ms": tracker.events.iter().map(|e| json!({
                "started": ms(e.started_us),
                "joiner_join_to_stable": ms(e.joiner_stable_us),
                "join_to_group_converged": ms(e.group_stable_us),
            })).collect::<Vec<_>>(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agg(started: u32, stable: u32, owned: u64, min: u32, max: u32, last: Micros) -> GroupAgg {
        GroupAgg {
            started,
            stable,
            owned,
            min_owned: min,
            max_owned: max,
            last_change_us: last,
        }
    }

    fn report(worker: usize, at: Micros, g: GroupAgg, late: Vec<LateView>) -> GroupReport {
        GroupReport {
            worker,
            at_us: at,
            groups: vec![g],
            late,
        }
    }

    #[test]
    fn a_group_converges_only_when_stable_complete_and_balanced() {
        assert!(agg(2, 2, 4, 2, 2, 9).converged(4));
        assert!(
            !agg(2, 1, 4, 2, 2, 9).converged(4),
            "a member is not stable"
        );
        assert!(
            !agg(2, 2, 3, 1, 2, 9).converged(4),
            "a partition is unowned"
        );
        // The consumer protocol's interim state: the new member stable with nothing while the
        // old owners still hold every partition.
        assert!(!agg(3, 3, 4, 0, 2, 9).converged(4));
        assert!(!GroupAgg::default().converged(4));
    }

    #[test]
    fn convergence_is_confirmed_by_a_second_round_of_reports() {
        let mut t = Tracker::new(2, 1, 4, 2, 0, true);
        t.on_report(report(0, 100, agg(1, 1, 2, 2, 2, 80), vec![]));
        assert_eq!(t.poll(110), Command::Nothing, "worker 1 has not reported");
        t.on_report(report(1, 105, agg(1, 1, 2, 2, 2, 90), vec![]));
        assert_eq!(t.poll(120), Command::Nothing, "first seen");
        t.on_report(report(0, 150, agg(1, 1, 2, 2, 2, 80), vec![]));
        assert_eq!(
            t.poll(155),
            Command::Nothing,
            "worker 1 not yet reported again"
        );
        t.on_report(report(1, 160, agg(1, 1, 2, 2, 2, 90), vec![]));
        assert_eq!(t.poll(165), Command::Stop);
        assert_eq!(t.initial_converged_us, Some(90));
        assert_eq!(t.poll(170), Command::Nothing, "done");
    }

    #[test]
    fn a_change_between_rounds_restarts_the_confirmation() {
        let mut t = Tracker::new(1, 1, 4, 2, 0, true);
        t.on_report(report(0, 100, agg(2, 2, 4, 2, 2, 80), vec![]));
        assert_eq!(t.poll(100), Command::Nothing);
        t.on_report(report(0, 150, agg(2, 2, 4, 2, 2, 140), vec![]));
        assert_eq!(t.poll(150), Command::Nothing, "the latest change moved");
        t.on_report(report(0, 200, agg(2, 2, 4, 2, 2, 140), vec![]));
        assert_eq!(t.poll(200), Command::Stop);
        assert_eq!(t.initial_converged_us, Some(140));
    }

    #[test]
    fn late_joiners_are_released_one_at_a_time_and_measured() {
        let mut t = Tracker::new(1, 1, 4, 2, 2, true);
        let stable2 = agg(2, 2, 4, 2, 2, 50);
        t.on_report(report(0, 100, stable2, vec![]));
        t.poll(100);
        t.on_report(report(0, 150, stable2, vec![]));
        assert_eq!(t.poll(150), Command::Release(1));
        // Not yet started: the group of two still looks converged, but one more is expected.
        t.on_report(report(0, 200, stable2, vec![]));
        assert_eq!(t.poll(200), Command::Nothing);
        let joined = |at, stable, last| LateView {
            index: 0,
            started_us: Some(at),
            stable,
            last_change_us: last,
        };
        // Started, stable with nothing while the others still own everything: not converged.
        t.on_report(report(
            0,
            300,
            agg(3, 3, 4, 0, 2, 260),
            vec![joined(210, true, 260)],
        ));
        assert_eq!(t.poll(300), Command::Nothing);
        t.on_report(report(
            0,
            400,
            agg(3, 3, 4, 1, 2, 390),
            vec![joined(210, true, 380)],
        ));
        t.poll(400);
        t.on_report(report(
            0,
            450,
            agg(3, 3, 4, 1, 2, 390),
            vec![joined(210, true, 380)],
        ));
        assert_eq!(t.poll(450), Command::Release(2));
        assert_eq!(
            t.events,
            vec![LateEvent {
                started_us: 210,
                joiner_stable_us: 170,
                group_stable_us: 180
            }]
        );
    }

    #[test]
    fn the_report_gives_per_member_times_for_converged_groups() {
        let t = Tracker::new(1, 2, 2, 4, 0, true);
        let m = |group, started, last, owned| MemberTimes {
            group,
            started_us: Some(started),
            stable: true,
            owned,
            last_change_us: last,
        };
        // Group 0 converged (1 + 1 of 2 partitions); group 1 has an unowned partition.
        let members = [
            m(0, 0, 1_000, 1),
            m(0, 0, 3_000, 1),
            m(1, 0, 2_000, 1),
            m(1, 0, 2_000, 0),
        ];
        let v = report_json(&t, &members, 2, 2);
        let i = &v["initial"];
        assert_eq!(i["groups_converged_at_end"], 1);
        assert_eq!(i["per_member_join_to_stable_us"]["count"], 2);
        assert_eq!(i["all_groups_converged_ms"], Value::Null);
    }
}
