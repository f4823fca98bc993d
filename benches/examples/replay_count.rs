//! Replay cost per record without I/O, for instruction counts that do not depend on the load
//! of a shared machine: builds N OffsetCommit records (1,000 groups × 64 partitions, batches of
//! 1,000) in memory as a segment's bytes, then replays them the way a partition load does —
//! validate each batch (CRC) and its records, then `Coordinator::replay_bytes` each
//! (`storage::batch::for_each_record_checked`, as `PartitionLog::open` does).
//!
//! `valgrind --tool=callgrind --toggle-collect='*replay_all*' target/release/examples/replay_count
//! 200000` counts only the replay; divide the instructions by N.

use engine::group::{Coordinator, GroupConfig};
use ringleader_benches::cpu_time;
use ringleader_benches::offset_commits::{commit_record, refs};
use storage::batch::{encode_batch, for_each_record_checked, peek_batch, Peek};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let build_only = args.iter().any(|a| a == "--build-only");
    let mut log = Vec::new();
    let mut i = 0u64;
    while i < n {
        let batch: Vec<(Vec<u8>, Vec<u8>)> = (i..(i + 1000).min(n)).map(commit_record).collect();
        encode_batch(i, 0, &refs(&batch), &mut log);
        i += batch.len() as u64;
    }
    if build_only {
        println!("built {n} records, {} bytes", log.len());
        return;
    }
    let t = std::time::Instant::now();
    let cpu = cpu_time::thread_seconds();
    let (c, records) = replay_all(&log);
    let cpu = cpu_time::thread_seconds() - cpu;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "replayed {records} records ({} bytes) in {:.3} s = {:.2} M records/s; {:.3} s of CPU = {:.2} M records per CPU second; {} offsets",
        log.len(),
        secs,
        records as f64 / secs / 1e6,
        cpu,
        records as f64 / cpu / 1e6,
        c.offsets.len()
    );
}

/// The measured part (`--toggle-collect=*replay_all*` with callgrind counts only this).
#[inline(never)]
fn replay_all(log: &[u8]) -> (Coordinator, u64) {
    let mut c = Coordinator::new(0, GroupConfig::default());
    let mut pos = 0usize;
    let mut records = 0u64;
    let mut spans = Vec::new();
    while pos < log.len() {
        let Ok(Peek::Batch(h)) = peek_batch(&log[pos..], pos as u64, 1 << 26) else {
            panic!("bad batch at {pos}")
        };
        let b = &log[pos..pos + h.size];
        for_each_record_checked(b, &h, pos as u64, &mut spans, |_, _, k, v| {
            c.replay_bytes(k.unwrap_or_default(), v);
            records += 1;
        })
        .unwrap();
        pos += h.size;
    }
    (c, records)
}
