//! The replay benchmark's input as a partition directory another program can load, and
//! Ringleader's load of that directory, so both sides of a comparison load the same bytes in the
//! same run (`scripts/bench-kafka-jmh.sh` sets Kafka 4.4's own coordinator loader beside it).
//!
//! - `offset_log write DIR [N]`: N OffsetCommit records (default 2,000,000; 1,000 groups × 64
//!   partitions, batches of 1,000) appended through `PartitionLog::append`, the way
//!   `benches/benches/storage.rs` writes the log it replays. The segments are Kafka record batches
//!   named `<base offset:020>.log`, as in a Kafka partition directory. DIR must not exist yet.
//! - `offset_log load DIR [ROUNDS]`: opens the log ROUNDS times (default 5) into a fresh
//!   coordinator each time, the way the broker loads a partition and the storage bench's replay
//!   rows measure it (read segments in large chunks, validate CRCs, `Coordinator::replay_bytes`
//!   every record), and prints each round's rate, then one JSON line
//!   `{"records":N,"bytes":B,"seconds":[...]}`.
//!
//! `cargo run --release -p ringleader-benches --example offset_log -- write DIR 2000000`

use engine::group::{Coordinator, GroupConfig};
use glommio::{LocalExecutorBuilder, Placement};
use ringleader_benches::offset_commits::{commit_record, refs};
use std::time::Instant;
use storage::io::GlommioDir;
use storage::log::{LogConfig, PartitionLog};

fn usage() -> ! {
    eprintln!("usage: offset_log write DIR [RECORDS] | offset_log load DIR [ROUNDS]");
    std::process::exit(2);
}

fn positive(arg: Option<&String>, default: u64) -> u64 {
    match arg.map(|s| s.parse::<u64>()) {
        None => default,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => usage(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(mode), Some(dir)) = (args.first().cloned(), args.get(1).cloned()) else {
        usage()
    };
    let write = match mode.as_str() {
        "write" => true,
        "load" => false,
        _ => usage(),
    };
    let n = positive(args.get(2), if write { 2_000_000 } else { 5 });
    // Appending to an existing log would make the record count a lie.
    if write && std::path::Path::new(&dir).exists() {
        eprintln!("{dir} already exists; give a new directory");
        std::process::exit(2);
    }
    if !write && !std::path::Path::new(&dir).is_dir() {
        eprintln!("{dir} is not a directory");
        std::process::exit(2);
    }
    LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(1 << 20)
        .spawn(move || async move {
            let d = GlommioDir::new(&dir).expect("open the directory");
            if write {
                let mut log = PartitionLog::open(d, LogConfig::default(), |_, _, _, _| {}).await.expect("open").0;
                let mut i = 0u64;
                while i < n {
                    let batch: Vec<(Vec<u8>, Vec<u8>)> = (i..(i + 1000).min(n)).map(commit_record).collect();
                    log.append(&refs(&batch), 0).await.expect("append");
                    i += batch.len() as u64;
                }
                println!("offset_log: {n} records, {} segments, next offset {} in {dir}", log.segment_count(), log.next_offset());
                return;
            }
            let (mut records, mut bytes, mut seconds) = (0, 0, Vec::new());
            for round in 1..=n {
                let mut c = Coordinator::new(0, GroupConfig::default());
                let t = Instant::now();
                let (_, rep) = PartitionLog::open(d.clone(), LogConfig::default(), |_, _, k, v| {
                    c.replay_bytes(k.unwrap_or_default(), v);
                })
                .await
                .expect("load");
                let secs = t.elapsed().as_secs_f64();
                // A load that replayed nothing would be a fast lie.
                assert!(rep.records > 0 && !c.offsets.all().is_empty(), "nothing loaded from {dir}");
                println!(
                    "offset_log load {round}/{n}: {} records, {:.1} MiB in {:.3} s = {:.2} M records/s; {} offsets",
                    rep.records,
                    rep.bytes as f64 / 1048576.0,
                    secs,
                    rep.records as f64 / secs / 1e6,
                    c.offsets.all().len()
                );
                (records, bytes) = (rep.records, rep.bytes);
                seconds.push(secs);
            }
            let list: Vec<String> = seconds.iter().map(|s| format!("{s:.6}")).collect();
            println!("{{\"records\":{records},\"bytes\":{bytes},\"seconds\":[{}]}}", list.join(","));
        })
        .expect("spawn the executor")
        .join()
        .expect("executor");
}
