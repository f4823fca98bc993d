//! Long runs of the deterministic simulator (`sim` (engine/sim)): many seeds, for hours if asked.
//!
//! ```sh
//! cargo run --release -p ringleader-sim --example sim -- --seeds 10000
//! cargo run --release -p ringleader-sim --example sim -- --duration 3h --members 2000 --groups 60
//! cargo run --release -p ringleader-sim --example sim -- --seed 1234 --trace   # replay one
//! ```
//!
//! Seeds run on `--jobs` threads (each seed is independent and deterministic, so the thread
//! count never changes an outcome). The first failure stops the run and prints its seed and the
//! command that replays it; the exit code is then 1.

use clap::Parser;
use sim::{run_seed, SimConfig, SimStats};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: wire::alloc::GuardedAlloc<mimalloc::MiMalloc> =
    wire::alloc::GuardedAlloc(mimalloc::MiMalloc);

#[derive(Parser, Debug)]
#[command(about = "Run the group-coordinator simulator over many seeds")]
struct Args {
    /// Number of seeds to run (ignored with --duration).
    #[arg(long, default_value_t = 1000)]
    seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    start_seed: u64,
    /// Run exactly this one seed (replay).
    #[arg(long)]
    seed: Option<u64>,
    /// Keep starting seeds until this much wall time has passed (e.g. 90s, 45m, 3h).
    #[arg(long)]
    duration: Option<String>,
    #[arg(long, default_value_t = SimConfig::default().members)]
    members: usize,
    #[arg(long, default_value_t = SimConfig::default().groups)]
    groups: usize,
    #[arg(long, default_value_t = SimConfig::default().partitions)]
    partitions: i32,
    #[arg(long, default_value_t = SimConfig::default().steps)]
    steps: u64,
    /// Transactional producers committing offsets (0: none).
    #[arg(long, default_value_t = SimConfig::default().txn_clients)]
    txn_clients: usize,
    /// Max ms between a TxnOffsetCommit's verification and its write at the group (0: none;
    /// negative: that many on odd seeds, none on even ones).
    #[arg(long, default_value_t = SimConfig::default().verify_hop_ms, allow_negative_numbers = true)]
    verify_hop_ms: i64,
    /// Worker threads (default: available cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Print every event (use with --seed).
    #[arg(long)]
    trace: bool,
    /// Seconds between progress lines.
    #[arg(long, default_value_t = 10)]
    progress: u64,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("bad duration unit in {s:?} (use s, m or h)")),
    };
    Ok(Duration::from_secs(secs))
}

enum Msg {
    Done(SimStats),
    Failed(String),
}

fn main() {
    let args = Args::parse();
    let cfg = SimConfig {
        members: args.members,
        groups: args.groups,
        partitions: args.partitions,
        steps: args.steps,
        txn_clients: args.txn_clients,
        verify_hop_ms: args.verify_hop_ms,
        trace: args.trace,
    };
    let deadline = match args.duration.as_deref().map(parse_duration) {
        Some(Ok(d)) => Some(Instant::now() + d),
        Some(Err(e)) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
        None => None,
    };
    let (first, count) = match args.seed {
        Some(s) => (s, 1),
        None => (
            args.start_seed,
            if deadline.is_some() {
                u64::MAX
            } else {
                args.seeds
            },
        ),
    };
    let jobs = if args.seed.is_some() {
        1
    } else {
        args.jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    };
    println!(
        "simulating seeds from {first} ({}), {} members, {} groups, {} partitions, {} steps, \
         {jobs} threads",
        if deadline.is_some() {
            format!("for {}", args.duration.as_deref().unwrap_or_default())
        } else {
            format!("{count} seeds")
        },
        cfg.members,
        cfg.groups,
        cfg.partitions,
        cfg.steps
    );
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let mut workers = Vec::new();
    for _ in 0..jobs {
        let (next, stop, tx, cfg) = (next.clone(), stop.clone(), tx.clone(), cfg.clone());
        workers.push(std::thread::spawn(move || loop {
            if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
                return;
            }
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= count {
                return;
            }
            let seed = first.wrapping_add(i);
            let msg = match run_seed(seed, &cfg) {
                Ok(s) => Msg::Done(s),
                Err(f) => {
                    stop.store(true, Ordering::Relaxed);
                    Msg::Failed(f.to_string())
                }
            };
            if tx.send(msg).is_err() {
                return;
            }
        }));
    }
    drop(tx);
    let mut total = SimStats::default();
    let mut failure = None;
    let mut last_print = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(Msg::Done(s)) => total.merge(&s),
            Ok(Msg::Failed(f)) => {
                if failure.is_none() {
                    failure = Some(f);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if last_print.elapsed() >= Duration::from_secs(args.progress) {
            last_print = Instant::now();
            let secs = started.elapsed().as_secs_f64();
            println!(
                "[{:>7.0}s] seeds {} ({:.1}/s) | steps {} | simulated {:.1} h | crashes {} | \
                 checks {}",
                secs,
                total.seeds,
                total.seeds as f64 / secs.max(1e-9),
                total.steps,
                total.sim_ms as f64 / 3_600_000.0,
                total.broker_crashes,
                total.checks
            );
        }
    }
    for w in workers {
        let _ = w.join();
    }
    let wall = started.elapsed();
    println!("{total}");
    println!("wall time {:.1} s", wall.as_secs_f64());
    if let Some(f) = failure {
        println!("FAILED\n{f}");
        std::process::exit(1);
    }
    println!("OK: no invariant broken");
}
