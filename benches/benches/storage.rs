//! Storage macro-benchmarks, each a ratio or rate measured in one run (absolute times on a
//! shared VM are noisy):
//!
//! 1. Replay from disk: N OffsetCommit records (default 2,000,000; `RL_REPLAY_RECORDS=10000000`
//!    for the figure) written as a partition log, then loaded the way the broker loads a
//!    partition: read segments in large chunks, validate CRCs, decode every record and replay it
//!    into the coordinator. Reports records/s and the file read rate beside it.
//! 2. Restart with a snapshot: the same state snapshotted, plus a short tail: time to load.
//! 3. Durable append: `PartitionLog::append` (encode + io_uring write + fdatasync) against a bare
//!    io_uring write + fdatasync loop of the same byte sizes, for several batch sizes.
//! 4. Compaction: the same N records in 16 MiB segments compacted in the broker's slices
//!    (`engine::runtime::partition::COMPACTION_SLICE_BYTES`): the longest slice (how long a pass can hold
//!    up a partition's writes), slices per pass, bytes before and after, read rate. Beside it,
//!    the time to build a snapshot of that state on the shard.
//!
//! `cargo bench -p ringleader-benches --bench storage` (`RL_STORAGE_ONLY=replay` for rows 1-2)

use engine::group::{Coordinator, GroupConfig};
use glommio::{LocalExecutorBuilder, Placement};
use ringleader_benches::cpu_time;
use ringleader_benches::offset_commits::{commit_record, refs};
use std::time::Instant;
use storage::io::{GlommioDir, LogDir, LogFile};
use storage::log::{LogConfig, PartitionLog};
use wire::records::Record;

/// Append N commit records to `log` in batches of 1,000 (what a busy partition's group commit
/// produces).
async fn write_commits(log: &mut PartitionLog<GlommioDir>, n: u64) {
    let mut i = 0u64;
    while i < n {
        let batch: Vec<(Vec<u8>, Vec<u8>)> = (i..(i + 1000).min(n)).map(commit_record).collect();
        log.append(&refs(&batch), 0).await.unwrap();
        i += batch.len() as u64;
    }
}

fn main() {
    // `cargo bench` passes --bench; nothing else to parse.
    let n: u64 = std::env::var("RL_REPLAY_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    // `RL_STORAGE_ONLY=replay`: stop after the replay and restart rows (the replay work's loop).
    let only_replay = std::env::var("RL_STORAGE_ONLY").is_ok_and(|v| v == "replay");
    let root = std::env::temp_dir().join(format!("rl-bench-storage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(1 << 20)
        .spawn(move || async move {
            let dir = GlommioDir::new(root.join("p0")).unwrap();
            let mut log = PartitionLog::open(dir.clone(), LogConfig::default(), |_, _, _, _| {}).await.unwrap().0;
            let t = Instant::now();
            write_commits(&mut log, n).await;
            println!("storage/write: {n} records in {:.2} s", t.elapsed().as_secs_f64());
            drop(log);
            // Drop the page cache's advantage as far as we can without root tricks: report both a
            // cold-ish first load and a warm second one.
            // The third load replays through an owned `Record` per record (the path before
            // `replay_bytes`), for the ratio in the same run.
            for (round, borrowed) in [("first", true), ("second", true), ("owned Record decode", false)] {
                let mut c = Coordinator::new(0, GroupConfig::default());
                let t = Instant::now();
                let cpu = cpu_time::thread_seconds();
                let (_, rep) = PartitionLog::open(dir.clone(), LogConfig::default(), |_, _, k, v| {
                    if borrowed {
                        c.replay_bytes(k.unwrap_or_default(), v);
                    } else if let Ok(r) = Record::decode(k.unwrap_or_default(), v) {
                        c.replay(&r);
                    }
                })
                .await
                .unwrap();
                let cpu = cpu_time::thread_seconds() - cpu;
                let secs = t.elapsed().as_secs_f64();
                println!(
                    "storage/replay ({round} load): {} records, {:.1} MiB in {:.3} s = {:.2} M records/s, {:.0} MiB/s read; {:.3} s of CPU = {:.2} M records per CPU second; {} offsets in memory",
                    rep.records,
                    rep.bytes as f64 / 1048576.0,
                    secs,
                    rep.records as f64 / secs / 1e6,
                    rep.bytes as f64 / 1048576.0 / secs,
                    cpu,
                    rep.records as f64 / cpu / 1e6,
                    c.offsets.len()
                );
            }
            // Snapshot of that state + a 10,000-record tail.
            let mut c = Coordinator::new(0, GroupConfig::default());
            let (mut log, _) = PartitionLog::open(dir.clone(), LogConfig::default(), |_, _, k, v| {
                c.replay_bytes(k.unwrap_or_default(), v);
            })
            .await
            .unwrap();
            let snap: Vec<storage::snapshot::SnapshotRecord> = c
                .snapshot_records()
                .iter()
                .map(|r| storage::snapshot::SnapshotRecord { key: r.encode_key().unwrap(), value: r.encode_value().unwrap().unwrap_or_default() })
                .collect();
            let covered = log.next_offset() - 1;
            storage::snapshot::write(dir.path(), covered, &snap).unwrap();
            for j in 0..10 {
                let batch: Vec<(Vec<u8>, Vec<u8>)> = (0..1000).map(|x| commit_record(n + j * 1000 + x)).collect();
                log.append(&refs(&batch), 0).await.unwrap();
            }
            drop(log);
            let t = Instant::now();
            let s = storage::snapshot::latest(dir.path()).unwrap().0.unwrap();
            let mut c = Coordinator::new(0, GroupConfig::default());
            for r in s.records().iter() {
                c.replay_bytes(r.key.as_slice(), Some(r.value.as_slice()));
            }
            let snap_ms = t.elapsed().as_secs_f64() * 1000.0;
            let (_, rep) = PartitionLog::open_from(dir.clone(), LogConfig::default(), s.offset + 1, |_, _, k, v| {
                c.replay_bytes(k.unwrap_or_default(), v);
            })
            .await
            .unwrap();
            let total_ms = t.elapsed().as_secs_f64() * 1000.0;
            println!(
                "storage/restart_with_snapshot: snapshot of {} records ({:.1} MiB) covering {} log records loaded in {:.1} ms; {} segments scanned for the 10,000-record tail (the broker drops covered segments; here they stay), total {:.1} ms",
                s.len(),
                s.size_bytes() as f64 / 1048576.0,
                covered + 1,
                snap_ms,
                rep.segments,
                total_ms
            );

            if only_replay {
                let _ = std::fs::remove_dir_all(&root);
                return;
            }

            // Durable append vs a bare write + fdatasync loop of the same sizes.
            for per_batch in [1usize, 10, 100] {
                let rounds = 300;
                let d = GlommioDir::new(root.join(format!("append-{per_batch}"))).unwrap();
                let mut log = PartitionLog::open(d.clone(), LogConfig::default(), |_, _, _, _| {}).await.unwrap().0;
                let batch: Vec<(Vec<u8>, Vec<u8>)> = (0..per_batch as u64).map(commit_record).collect();
                let refs = refs(&batch);
                let mut sample = Vec::new();
                storage::batch::encode_batch(0, 0, &refs, &mut sample);
                let bare = d.open("bare.bin").await.unwrap();
                let mut pos = 0u64;
                // Alternate the two in slices so drift on a shared VM hits both alike.
                let (mut bare_s, mut log_s) = (0.0, 0.0);
                for _ in 0..10 {
                    let t = Instant::now();
                    for _ in 0..rounds / 10 {
                        bare.write_at(pos, sample.clone()).await.unwrap();
                        bare.sync().await.unwrap();
                        pos += sample.len() as u64;
                    }
                    bare_s += t.elapsed().as_secs_f64();
                    let t = Instant::now();
                    for _ in 0..rounds / 10 {
                        log.append(&refs, 0).await.unwrap();
                    }
                    log_s += t.elapsed().as_secs_f64();
                }
                println!(
                    "storage/durable_append {per_batch:>3} commits/batch ({} B): log {:.0} fsyncs/s = {:.0} commits/s; bare write+fdatasync {:.0}/s; ratio {:.2}",
                    sample.len(),
                    rounds as f64 / log_s,
                    rounds as f64 * per_batch as f64 / log_s,
                    rounds as f64 / bare_s,
                    bare_s / log_s
                );
            }

            // Compaction in slices.
            let d = GlommioDir::new(root.join("compact")).unwrap();
            let cfg = LogConfig { segment_bytes: 16 << 20, ..LogConfig::default() };
            let mut log = PartitionLog::open(d.clone(), cfg.clone(), |_, _, _, _| {}).await.unwrap().0;
            write_commits(&mut log, n).await;
            let slice_bytes = engine::runtime::partition::COMPACTION_SLICE_BYTES;
            let mut c = log
                .start_compaction(storage::compact::CompactConfig { delete_retention_ms: 86_400_000, slice_bytes }, 0, None)
                .expect("closed segments");
            let mut slices: Vec<f64> = Vec::new();
            let t = Instant::now();
            loop {
                let s0 = Instant::now();
                let done = log.compact_slice(&mut c).await.unwrap();
                slices.push(s0.elapsed().as_secs_f64() * 1000.0);
                if done {
                    break;
                }
            }
            let total = t.elapsed().as_secs_f64();
            slices.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let st = &c.stats;
            println!(
                "storage/compaction: {} slices of {} KiB, longest {:.2} ms, p99 {:.2} ms, median {:.2} ms; pass {:.2} s; {} keys; {:.1} MiB -> {:.2} MiB in closed segments ({} records read, {} kept, {} segments removed, {} rewritten); {:.0} MiB/s",
                slices.len(),
                slice_bytes / 1024,
                slices.last().unwrap(),
                slices[(slices.len() * 99 / 100).min(slices.len() - 1)],
                slices[slices.len() / 2],
                total,
                st.keys,
                st.bytes_before as f64 / 1048576.0,
                st.bytes_after as f64 / 1048576.0,
                st.records_read,
                st.records_kept,
                st.segments_removed,
                st.segments_cleaned,
                // The map phase reads every segment, the clean phase the closed ones again.
                (st.bytes_before as f64 * 2.0) / 1048576.0 / total
            );
            drop(log);
            // Building a snapshot of the replayed state, which runs on the shard.
            let mut coord = Coordinator::new(0, GroupConfig::default());
            PartitionLog::open(d.clone(), cfg, |_, _, k, v| {
                coord.replay_bytes(k.unwrap_or_default(), v);
            })
            .await
            .unwrap();
            let t = Instant::now();
            let records = coord.snapshot_records();
            let encoded: Vec<storage::snapshot::SnapshotRecord> = records
                .iter()
                .map(|r| storage::snapshot::SnapshotRecord { key: r.encode_key().unwrap(), value: r.encode_value().unwrap().unwrap_or_default() })
                .collect();
            println!(
                "storage/snapshot_build: {} records collected and encoded on the shard in {:.1} ms",
                encoded.len(),
                t.elapsed().as_secs_f64() * 1000.0
            );
            let _ = std::fs::remove_dir_all(&root);
        })
        .unwrap()
        .join()
        .unwrap();
}
