//! A whole run: start-up, workers, live progress, the final report and the exit code.

use crate::api::{Api, Versions, API_COUNT};
use crate::classic::{subscription_for, ClassicMember};
use crate::config::{Args, Protocol};
use crate::consumer::ConsumerMember;
use crate::converge::{self, Command, RunControl, Tracker};
use crate::member::MemberCfg;
use crate::procstat::ServerSampler;
use crate::report::{self, RunInfo};
use crate::setup;
use crate::stats::{IntervalReport, Stats};
use crate::worker::{self, WorkerSetup};
use kafka_protocol::messages::GroupId;
use kafka_protocol::protocol::StrBytes;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The APIs a classic member uses (reported even when unused).
pub const CLASSIC_APIS: [Api; 6] = [
    Api::Heartbeat,
    Api::JoinGroup,
    Api::SyncGroup,
    Api::OffsetCommit,
    Api::OffsetFetch,
    Api::LeaveGroup,
];

/// The APIs a KIP-848 member uses (reported even when unused).
pub const CONSUMER_APIS: [Api; 3] = [
    Api::ConsumerGroupHeartbeat,
    Api::OffsetCommit,
    Api::OffsetFetch,
];

/// Exit codes.
pub const EXIT_OK: i32 = 0;
/// Errors above `--max-error-rate` (or a worker failed).
pub const EXIT_ERRORS: i32 = 1;
/// Bad arguments, an unsupported mode, or start-up failed (no broker, no usable versions).
pub const EXIT_SETUP: i32 = 2;

/// A failure before any member ran.
#[derive(Debug)]
pub struct SetupError(pub String);

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for SetupError {}

/// What a finished run produced.
#[derive(Debug)]
pub struct Outcome {
    pub exit_code: i32,
    pub summary: serde_json::Value,
    pub table: String,
}

/// Raise the open-file limit to the hard limit: every member may need a connection of its own
/// while it rebalances.
fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the rlimit struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 0;
    }
    if lim.rlim_cur < lim.rlim_max {
        let want = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads the struct we pass; raising the soft limit up to the hard limit
        // needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
            return want.rlim_cur;
        }
    }
    lim.rlim_cur
}

/// Run the load generator. Progress goes to stderr (unless `--quiet`); the final table is
/// returned (the binary prints it on stdout) and the report files are written to `--out`.
pub fn run(args: &Args) -> Result<Outcome, SetupError> {
    args.validate().map_err(SetupError)?;
    let consumer = args.protocol == Protocol::Consumer;
    let (hb_api, protocol_apis): (Api, &[Api]) = if consumer {
        (Api::ConsumerGroupHeartbeat, &CONSUMER_APIS)
    } else {
        (Api::Heartbeat, &CLASSIC_APIS)
    };
    let say = |msg: String| {
        if !args.quiet {
            eprintln!("loadgen: {msg}");
        }
    };
    let fd_limit = raise_fd_limit();
    // Members that start with the run, and with the late joiners (who join group 0 later).
    let initial = args.total_members();
    let total = initial + args.late_joiners as usize;
    let shared = args.shared_connections();
    let cores = args.worker_threads();
    if fd_limit > 0 && (shared + total) as u64 + 64 > fd_limit {
        say(format!(
            "warning: {shared} shared connections + up to {total} join/sync connections may exceed the open-file limit ({fd_limit})"
        ));
    }

    // Start-up over one blocking connection.
    let setup_err = |what: &str, e: anyhow::Error| SetupError(format!("{what}: {e:#}"));
    let tls = match &args.tls_ca {
        Some(ca) => Some(Arc::new(
            crate::tls::TlsClient::from_files(
                ca,
                args.tls_cert.as_deref(),
                args.tls_key.as_deref(),
                &args.bootstrap,
            )
            .map_err(|e| setup_err("TLS", e))?,
        )),
        None => None,
    };
    let mut client = setup::Client::connect(&args.bootstrap, &args.client_id, tls.as_deref())
        .map_err(|e| setup_err("bootstrap", e))?;
    let av = setup::api_versions(&mut client).map_err(|e| setup_err("ApiVersions", e))?;
    let versions = Versions::negotiate(&av, &args.max_api_versions);
    if consumer {
        versions
            .check_consumer()
            .map_err(|e| SetupError(format!("the broker at {}: {e}", args.bootstrap)))?;
    } else {
        versions.check_classic().map_err(|api| {
            SetupError(format!(
                "the broker at {} serves no {} version loadgen implements ({}-{})",
                args.bootstrap,
                api.name(),
                api.implemented().0,
                api.implemented().1
            ))
        })?;
    }
    let topics = setup::ensure_topics(
        &mut client,
        &versions,
        &args.topic_prefix,
        args.topics,
        args.partitions,
    )
    .map_err(|e| setup_err("topics", e))?;
    if consumer {
        if let Some(t) = topics.iter().find(|t| t.id.is_nil()) {
            return Err(SetupError(format!(
                "topic {} has no topic id in the Metadata answer; --protocol consumer needs ids",
                t.name
            )));
        }
    }
    let group_names: Vec<String> = (0..args.groups)
        .map(|g| format!("{}{g}", args.group_prefix))
        .collect();
    let (group_coord, addrs) = setup::find_coordinators(&mut client, &versions, &group_names)
        .map_err(|e| setup_err("FindCoordinator", e))?;
    drop(client);
    say(format!(
        "{} members in {} groups, {} topics, {} shared connections, {} worker threads; coordinators {:?}; versions {:?}",
        total,
        args.groups,
        topics.len(),
        shared,
        cores,
        addrs,
        versions.table()
    ));
    if let Some(r) = args.rate {
        let per_member_s = total as f64 / r;
        if per_member_s * 1000.0 > args.session_timeout_ms as f64 / 2.0 {
            say(format!(
                "warning: at {r} heartbeats/s each member heartbeats only every {per_member_s:.1} s; the session timeout is {} ms",
                args.session_timeout_ms
            ));
        }
    }

    let cfg = MemberCfg {
        session_timeout_ms: args.session_timeout_ms as i32,
        rebalance_timeout_ms: args.rebalance_timeout_ms as i32,
        heartbeat_interval_us: args.classic_heartbeat_interval_ms() * 1000,
        heartbeat_interval_override_us: if consumer {
            args.heartbeat_interval_ms.map(|ms| ms * 1000)
        } else {
            None
        },
        commit_interval_us: args.commit_interval_ms * 1000,
        closed_loop_heartbeats: args.rate.is_none(),
        retry_backoff_us: 100_000,
        commit_offset_step: 10,
        expect_partitions: args.expect_partitions,
    };
    let subscription = subscription_for(&topics);
    // KIP-848 member ids are made by the client; seed them per run so that two runs against the
    // same broker do not reuse each other's ids.
    let id_seed = fastrand::u64(..);

    // Members → workers: member m uses shared connection m mod C, owned by worker (m mod C) mod W.
    let mut owned: Vec<Vec<u32>> = vec![Vec::new(); cores];
    for m in 0..total {
        owned[(m % shared) % cores].push(m as u32);
    }
    let partitions_per_group: u64 = topics.iter().map(|t| t.partitions.max(0) as u64).sum();
    let control = Arc::new(RunControl::default());
    let (group_tx, group_rx) = mpsc::channel::<converge::GroupReport>();
    let group_tx = args.tracks_convergence().then_some(group_tx);
    let mut tracker = Tracker::new(
        cores,
        args.groups,
        partitions_per_group,
        initial as u64,
        args.late_joiners,
        args.until_stable,
    );
    let (tx, rx) = mpsc::channel::<IntervalReport>();
    let barrier = Arc::new(Barrier::new(cores + 1));
    let mut handles = Vec::with_capacity(cores);
    for (w, members) in owned.into_iter().enumerate() {
        let share = members.len() as f64 / total as f64;
        let ws = WorkerSetup {
            index: w,
            members,
            members_per_group: args.members_per_group,
            total_members: total,
            // Each thread gets its own copies so hot-path clones do not share reference counts.
            groups: group_names
                .iter()
                .map(|g| GroupId(StrBytes::from_string(g.clone())))
                .collect(),
            group_coord: group_coord.clone(),
            addrs: addrs.clone(),
            topics: topics
                .iter()
                .map(|t| crate::assign::TopicInfo {
                    name: StrBytes::from_string(t.name.to_string()),
                    partitions: t.partitions,
                    id: t.id,
                })
                .collect(),
            subscription: bytes::Bytes::copy_from_slice(&subscription),
            cfg: cfg.clone(),
            versions: versions.clone(),
            shared_connections: shared,
            client_id: args.client_id.clone(),
            tls: tls.clone(),
            max_in_flight: args.max_in_flight,
            request_timeout_us: args.request_timeout_ms * 1000,
            rebalance_request_timeout_us: (args.rebalance_timeout_ms + 5000) * 1000,
            churn_per_s: args.churn_per_s * share,
            rate_per_s: args.rate.map(|r| r * share),
            duration_us: args.duration.as_micros() as u64,
            ramp_us: args.ramp_up.as_micros() as u64,
            drain_us: args.drain.as_micros() as u64,
            leave_on_exit: !args.no_leave_on_exit,
            prewarm_pool: !consumer,
            spin_us: args.spin_us,
            reports: tx.clone(),
            start: barrier.clone(),
            late_from: initial as u32,
            group_reports: group_tx.clone(),
            control: control.clone(),
        };
        let builder = std::thread::Builder::new().name(format!("loadgen-w{w}"));
        let spawned = if consumer {
            builder.spawn(move || {
                worker::run(ws, |g: u32| {
                    ConsumerMember::new(u64::from(g) ^ id_seed.rotate_left(17))
                })
            })
        } else {
            builder.spawn(move || worker::run(ws, |g: u32| ClassicMember::new(u64::from(g))))
        };
        let h = spawned.map_err(|e| SetupError(format!("spawning a worker thread: {e}")))?;
        handles.push(h);
    }
    drop(tx);
    drop(group_tx);
    let mut sampler = args
        .server_pid
        .map(|pid| ServerSampler::new(pid, args.warmup));
    barrier.wait();
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let t0 = Instant::now();

    // Merge reports; print progress once a second.
    let mut total_stats = Stats::default();
    // Latency after the warm-up: workers report each whole second, so a report that arrives a
    // second or more past the warm-up covers only steady-state requests.
    let mut steady = Stats::default();
    let steady_from = args.warmup + Duration::from_secs(1);
    let mut window = [0u64; API_COUNT];
    let mut last_stable = vec![0u32; cores];
    let mut ever_stable = vec![0u32; cores];
    let mut shared_open = vec![0u32; cores];
    let mut pool_open = vec![0u32; cores];
    let mut pool_peak = vec![0u32; cores];
    let mut stable_at_end = vec![0u32; cores];
    let mut owned_at_end: Vec<(u32, u16, i32)> = Vec::new();
    let mut finished = vec![false; cores];
    let mut fatal = Vec::new();
    let mut member_times = Vec::new();
    // When the measured run ended: --duration, or earlier when --until-stable stopped it.
    let mut run_end: Option<Duration> = None;
    let mut next_sample = Duration::ZERO;
    let (mut late, mut idle) = (0u64, 0u64);
    // Workers report on whole seconds; print a little after, once their reports are in.
    let mut next_print = Duration::from_millis(1100);
    let mut printed_responses = 0u64;
    let mut last_print = t0;
    while finished.iter().any(|f| !f) {
        let mut wait = next_print.saturating_sub(t0.elapsed());
        if args.tracks_convergence() && run_end.is_none() {
            wait = wait.min(Duration::from_millis(20));
        }
        if sampler.is_some() {
            wait = wait.min(next_sample.saturating_sub(t0.elapsed()));
        }
        match rx.recv_timeout(wait) {
            Ok(r) => {
                let w = r.worker;
                if !r.draining {
                    for (a, b) in window.iter_mut().zip(r.stats.responses.iter()) {
                        *a += b;
                    }
                }
                total_stats.merge(&r.stats);
                if counts_as_steady(args.warmup, t0.elapsed(), steady_from, r.draining) {
                    steady.merge(&r.stats);
                }
                last_stable[w] = r.stable;
                ever_stable[w] = r.ever_stable;
                shared_open[w] = r.shared_conns;
                pool_open[w] = r.pool_conns;
                pool_peak[w] = pool_peak[w].max(r.pool_peak);
                late += r.rate_late_slots;
                idle += r.rate_idle_slots;
                if let Some(s) = r.stable_at_end {
                    stable_at_end[w] = s;
                    owned_at_end.extend_from_slice(&r.owned_at_end);
                    member_times.extend_from_slice(&r.member_times);
                }
                if let Some(f) = r.fatal {
                    fatal.push(f);
                }
                if r.finished {
                    finished[w] = true;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let elapsed = t0.elapsed();
        if run_end.is_none() {
            while let Ok(g) = group_rx.try_recv() {
                tracker.on_report(g);
            }
            if args.tracks_convergence() {
                match tracker.poll(elapsed.as_micros() as u64) {
                    Command::Nothing => {}
                    Command::Release(n) => {
                        say(format!(
                            "[{:.1}s] group converged; late joiner {n} of {} joins",
                            elapsed.as_secs_f64(),
                            args.late_joiners
                        ));
                        control.released.store(n, Ordering::Release);
                    }
                    Command::Stop => {
                        say(format!(
                            "[{:.1}s] every group converged; ending the run",
                            elapsed.as_secs_f64()
                        ));
                        control.stop.store(true, Ordering::Release);
                        run_end = Some(elapsed);
                    }
                }
            }
            if run_end.is_none() && elapsed >= args.duration {
                run_end = Some(args.duration);
            }
            if let (Some(s), Some(end)) = (sampler.as_mut(), run_end) {
                s.end(end.max(elapsed));
            }
        }
        if let Some(s) = sampler.as_mut() {
            if elapsed >= next_sample {
                next_sample = elapsed + Duration::from_secs(1);
                if run_end.is_none() {
                    s.sample(elapsed);
                } else {
                    s.drain_sample();
                }
            }
        }
        if t0.elapsed() >= next_print {
            next_print += Duration::from_secs(1);
            if !args.quiet {
                let responses = total_stats.total_responses();
                let dt = last_print.elapsed().as_secs_f64().max(1e-3);
                last_print = Instant::now();
                let h = &total_stats.hists[hb_api.index()];
                let (p50, p99) = if !h.is_empty() {
                    (h.value_at_quantile(0.5), h.value_at_quantile(0.99))
                } else {
                    (0, 0)
                };
                let phase = if t0.elapsed() > args.duration {
                    " (draining)"
                } else {
                    ""
                };
                eprintln!(
                    "[{:>4}s] {:>9.0} resp/s | heartbeat p50 {:.3} ms p99 {:.3} ms | errors {} | stable {}/{} | conns {}+{}{}",
                    t0.elapsed().as_secs(),
                    (responses - printed_responses) as f64 / dt,
                    p50 as f64 / 1000.0,
                    p99 as f64 / 1000.0,
                    total_stats.total_errors(),
                    last_stable.iter().sum::<u32>(),
                    total,
                    shared_open.iter().sum::<u32>(),
                    pool_open.iter().sum::<u32>(),
                    phase
                );
                let _ = std::io::stderr().flush();
                printed_responses = responses;
            }
        }
    }
    for h in handles {
        if h.join().is_err() {
            fatal.push("a worker thread panicked".into());
        }
    }

    if !args.warmup.is_zero() {
        total_stats = with_steady_latency(total_stats, &steady);
    }
    let ownership = ownership_at_end(&owned_at_end, args.groups, &topics);
    let group_convergence = args
        .tracks_convergence()
        .then(|| converge::report_json(&tracker, &member_times, args.groups, partitions_per_group));
    let measured = run_end.unwrap_or(args.duration).min(args.duration);
    let info = RunInfo {
        args,
        versions: &versions,
        topics: &topics,
        protocol_apis,
        duration_s: measured.as_secs_f64(),
        window_responses: window,
        members_total: total as u64,
        stable_at_end: stable_at_end.iter().map(|&x| x as u64).sum(),
        ever_stable: ever_stable.iter().map(|&x| x as u64).sum(),
        shared_conns: shared as u64,
        pool_peak: pool_peak.iter().map(|&x| x as u64).sum(),
        rate_late_slots: late,
        rate_idle_slots: idle,
        started_unix_ms,
        fatal,
        ownership_at_end: Some(ownership.to_json()),
        server: sampler.as_ref().map(ServerSampler::to_json),
        group_convergence,
    };
    let summary = report::summary_json(&info, &total_stats);
    let mut table = report::text_table(&info, &total_stats);
    table.push_str(&ownership.line());
    let out_dir = Path::new(&args.out);
    match report::write_files(out_dir, &info, &total_stats) {
        Ok(files) => say(format!(
            "wrote {} files to {}",
            files.len(),
            out_dir.display()
        )),
        Err(e) => {
            return Err(SetupError(format!(
                "writing the report to {}: {e}",
                out_dir.display()
            )))
        }
    }
    let exit_code = if info.passed(&total_stats) {
        EXIT_OK
    } else {
        EXIT_ERRORS
    };
    if exit_code != EXIT_OK && info.ever_stable == 0 {
        say(format!(
            "FAILED: no member reached a stable generation in {} (a broker may hold JoinGroup up \
             to the rebalance timeout, {} ms; see --rebalance-timeout-ms)",
            crate::config::format_duration(args.duration),
            args.rebalance_timeout_ms
        ));
    } else if exit_code != EXIT_OK {
        say(format!(
            "FAILED: error rate {:.4}% ({} errors / {} requests) exceeds --max-error-rate {}{}",
            info.error_rate(&total_stats) * 100.0,
            total_stats.total_errors(),
            total_stats.total_requests(),
            args.max_error_rate,
            if info.fatal.is_empty() {
                ""
            } else {
                ", or a worker failed"
            }
        ));
    }
    Ok(Outcome {
        exit_code,
        summary,
        table,
    })
}

/// Who owned which partition when the run ended (before the members left).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ownership {
    pub groups: u64,
    /// Partitions per group × groups.
    pub partitions: u64,
    pub owned_once: u64,
    pub unowned: u64,
    pub owned_more_than_once: u64,
    /// Groups in which every partition had exactly one owner.
    pub groups_complete: u64,
}

impl Ownership {
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "groups": self.groups,
            "partitions": self.partitions,
            "owned_exactly_once": self.owned_once,
            "unowned": self.unowned,
            "owned_more_than_once": self.owned_more_than_once,
            "groups_with_every_partition_owned_once": self.groups_complete,
        })
    }

    fn line(&self) -> String {
        format!(
            "ownership at end: {}/{} partitions owned exactly once ({} unowned, {} with several owners); {}/{} groups complete\n",
            self.owned_once,
            self.partitions,
            self.unowned,
            self.owned_more_than_once,
            self.groups_complete,
            self.groups
        )
    }
}

/// Count owners per (group, topic, partition).
/// Whether a worker's interval report belongs to the steady part of the run: past the warm-up
/// (reports arrive each whole second, so one that arrives a second past it covers only
/// steady-state requests) and before the drain — when the run ends every member leaves at once,
/// and that storm is not steady state either.
pub fn counts_as_steady(
    warmup: Duration,
    elapsed: Duration,
    steady_from: Duration,
    draining: bool,
) -> bool {
    !warmup.is_zero() && elapsed >= steady_from && !draining
}

/// The run's counts with the per-API latency histograms of the steady part only; rebalance
/// convergence (join → stable) stays whole-run, since joins mostly happen during the warm-up.
pub fn with_steady_latency(mut total: Stats, steady: &Stats) -> Stats {
    for (i, h) in steady.hists.iter().enumerate() {
        if i != crate::stats::CONVERGENCE {
            total.hists[i] = h.clone();
        }
    }
    total
}

pub fn ownership_at_end(
    owned: &[(u32, u16, i32)],
    groups: usize,
    topics: &[crate::assign::TopicInfo],
) -> Ownership {
    let mut base = Vec::with_capacity(topics.len());
    let mut per_group = 0usize;
    for t in topics {
        base.push(per_group);
        per_group += t.partitions.max(0) as usize;
    }
    let mut counts = vec![0u32; per_group * groups];
    for &(g, t, p) in owned {
        let (g, t) = (g as usize, t as usize);
        if g < groups && t < topics.len() && p >= 0 && p < topics[t].partitions {
            counts[g * per_group + base[t] + p as usize] += 1;
        }
    }
    let mut o = Ownership {
        groups: groups as u64,
        partitions: counts.len() as u64,
        ..Ownership::default()
    };
    for g in 0..groups {
        let c = &counts[g * per_group..(g + 1) * per_group];
        let once = c.iter().filter(|&&n| n == 1).count() as u64;
        o.owned_once += once;
        o.unowned += c.iter().filter(|&&n| n == 0).count() as u64;
        o.owned_more_than_once += c.iter().filter(|&&n| n > 1).count() as u64;
        if once == per_group as u64 {
            o.groups_complete += 1;
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::CONVERGENCE;

    #[test]
    fn the_steady_part_excludes_the_warm_up_and_the_final_leave_storm() {
        let (w, from) = (Duration::from_secs(10), Duration::from_secs(11));
        assert!(!counts_as_steady(w, Duration::from_secs(5), from, false));
        assert!(counts_as_steady(w, Duration::from_secs(12), from, false));
        assert!(!counts_as_steady(w, Duration::from_secs(31), from, true));
        assert!(!counts_as_steady(
            Duration::ZERO,
            Duration::from_secs(12),
            Duration::from_secs(1),
            false
        ));
    }

    #[test]
    fn steady_latency_replaces_api_histograms_but_keeps_counts_and_convergence() {
        let mut total = Stats::default();
        total.record_latency(Api::Heartbeat, 90_000); // a join-storm outlier
        total.record_latency(Api::Heartbeat, 100);
        total.record_convergence(5_000_000);
        total.requests[Api::Heartbeat.index()] = 2;
        let mut steady = Stats::default();
        steady.record_latency(Api::Heartbeat, 100);
        let out = with_steady_latency(total, &steady);
        let hb = &out.hists[Api::Heartbeat.index()];
        assert_eq!((hb.len(), hb.max() < 1000), (1, true));
        assert_eq!(out.hists[CONVERGENCE].len(), 1);
        assert_eq!(out.requests[Api::Heartbeat.index()], 2);
    }
}
