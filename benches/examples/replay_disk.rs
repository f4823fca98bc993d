//! Replay from disk alone, for profiles and repeated runs: writes N OffsetCommit records (the
//! storage bench's shape: 1,000 groups × 64 partitions, batches of 1,000) as a partition log in
//! DIR — once; a later run with the same DIR and N reuses it — then loads it `--loads` times the
//! way the broker loads a partition (`PartitionLog::open` + `Coordinator::replay_bytes`),
//! printing each load's wall-clock and CPU rate.
//!
//! `cargo build --release -p ringleader-benches --example replay_disk`, then
//! `target/release/examples/replay_disk [N] [--dir DIR] [--loads K] [--chunk BYTES]`
//! (default 2,000,000 records, a temporary directory removed at the end, 3 loads, reads of
//! `LogConfig::default().read_chunk_bytes`; the broker reads `offsets.load.buffer.size`). The log is
//! written without fdatasync (`skip_fsync_for_benchmarks`), so writing 10 M records takes
//! seconds; the segment files are Kafka's format (`kafka-dump-log.sh` reads them).

use engine::group::{Coordinator, GroupConfig};
use glommio::{LocalExecutorBuilder, Placement};
use ringleader_benches::cpu_time;
use ringleader_benches::offset_commits::{commit_record, refs};
use std::time::Instant;
use storage::io::GlommioDir;
use storage::log::{LogConfig, PartitionLog};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let n: u64 = args
        .first()
        .filter(|a| !a.starts_with("--"))
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let loads: usize = flag("--loads").and_then(|v| v.parse().ok()).unwrap_or(3);
    let config = LogConfig {
        read_chunk_bytes: flag("--chunk")
            .and_then(|v| v.parse().ok())
            .unwrap_or(LogConfig::default().read_chunk_bytes),
        ..LogConfig::default()
    };
    let (dir, keep) = match flag("--dir") {
        Some(d) => (std::path::PathBuf::from(d), true),
        None => (
            std::env::temp_dir().join(format!("rl-replay-disk-{}", std::process::id())),
            false,
        ),
    };
    storage::io::skip_fsync_for_benchmarks();
    LocalExecutorBuilder::new(Placement::Unbound)
        .spawn(move || async move {
            let d = GlommioDir::new(&dir).unwrap();
            let (mut log, rep) = PartitionLog::open(d.clone(), LogConfig::default(), |_, _, _, _| {})
                .await
                .unwrap();
            if rep.records != n {
                assert_eq!(rep.records, 0, "{} holds {} records, not {n}: use another --dir", dir.display(), rep.records);
                let t = Instant::now();
                let mut i = 0u64;
                while i < n {
                    let batch: Vec<(Vec<u8>, Vec<u8>)> = (i..(i + 1000).min(n)).map(commit_record).collect();
                    log.append(&refs(&batch), 0).await.unwrap();
                    i += batch.len() as u64;
                }
                println!("wrote {n} records to {} in {:.2} s", dir.display(), t.elapsed().as_secs_f64());
            }
            drop(log);
            for round in 1..=loads {
                let mut c = Coordinator::new(0, GroupConfig::default());
                let t = Instant::now();
                let cpu = cpu_time::thread_seconds();
                let (_, rep) = PartitionLog::open(d.clone(), config.clone(), |_, _, k, v| {
                    c.replay_bytes(k.unwrap_or_default(), v);
                })
                .await
                .unwrap();
                let cpu = cpu_time::thread_seconds() - cpu;
                let secs = t.elapsed().as_secs_f64();
                println!(
                    "load {round}: {} records, {:.1} MiB in {:.3} s = {:.2} M records/s; {:.3} s of CPU = {:.2} M records per CPU second; {} offsets",
                    rep.records,
                    rep.bytes as f64 / 1048576.0,
                    secs,
                    rep.records as f64 / secs / 1e6,
                    cpu,
                    rep.records as f64 / cpu / 1e6,
                    c.offsets.len()
                );
            }
            if !keep {
                let _ = std::fs::remove_dir_all(&dir);
            }
        })
        .unwrap()
        .join()
        .unwrap();
}
