//! Durability of `__consumer_offsets` against the real `ringleader` binary: SIGKILL under load,
//! corrupt and torn segment tails, and a classic group surviving a restart.
//!
//! Each test runs the binary (`CARGO_BIN_EXE_ringleader`) on a fresh data directory and an
//! ephemeral port (read back from its `listening on` log line), talks to it over real sockets
//! with the `wire` codec, and restarts it on the same data directory.
//!
//! `RINGLEADER_KILL_ROUNDS` raises the number of kill -9 rounds (default 5).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Encodable;
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wire::{Request, Response};

mod common;
use common::*;

#[global_allocator]
static ALLOC: wire::alloc::GuardedAlloc<std::alloc::System> =
    wire::alloc::GuardedAlloc(std::alloc::System);

const OFFSETS_PARTITIONS: i32 = 50;
const LOAD_LINE: &str = "loaded __consumer_offsets-";
const TRUNCATED_LINE: &str = "truncated a torn or corrupt log tail";

// ------------------------------------------------------------------------------------------------
// The broker process
// ------------------------------------------------------------------------------------------------

/// Records the load line of `partition` reports (`loaded __consumer_offsets-P partition=P
/// records=N .. snapshot_records=M`): those replayed from segments plus those a snapshot held.
fn loaded_records(lines: &[String], partition: i32) -> Option<u64> {
    let field = format!("partition={partition}");
    let line = lines
        .iter()
        .filter(|l| l.contains(LOAD_LINE))
        .find(|l| l.split_whitespace().any(|w| w == field))?;
    let num = |name: &str| -> Option<u64> {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|n| n.parse().ok())
    };
    Some(num("records=")? + num("snapshot_records=").unwrap_or(0))
}

// ------------------------------------------------------------------------------------------------
// A blocking wire client
// ------------------------------------------------------------------------------------------------

/// OffsetCommit v8 of `offsets` (partition, offset) of `topic`.
fn commit_request(
    group: &str,
    generation: i32,
    member: &str,
    topic: &str,
    offsets: &[(i32, i64)],
) -> Request {
    Request::OffsetCommit(
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(s(member))
            .with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_partitions(
                        offsets
                            .iter()
                            .map(|(p, o)| {
                                offset_commit_request::OffsetCommitRequestPartition::default()
                                    .with_partition_index(*p)
                                    .with_committed_offset(*o)
                                    .with_committed_metadata(Some(s("")))
                            })
                            .collect(),
                    ),
            ]),
    )
}

/// Partition → error code of an OffsetCommit response.
fn commit_errors(resp: Response) -> Vec<(i32, i16)> {
    let Response::OffsetCommit(r) = resp else {
        panic!("OffsetCommit response expected")
    };
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.partition_index, p.error_code))
        .collect()
}

/// OffsetFetch v7 of `partitions` of `topic`: partition → committed offset (-1 = none).
/// Retries while the coordinator is loading or not available.
fn fetch_offsets(
    c: &mut Client,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> BTreeMap<i32, i64> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let req = Request::OffsetFetch(
            OffsetFetchRequest::default()
                .with_group_id(GroupId(s(group)))
                .with_topics(Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(TopicName(s(topic)))
                        .with_partition_indexes(partitions.to_vec()),
                ])),
        );
        let Response::OffsetFetch(r) = c.call(7, req) else {
            panic!("OffsetFetch")
        };
        let retriable = |code: i16| code == 14 || code == 15;
        let part_errors = r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .any(|p| retriable(p.error_code));
        if (retriable(r.error_code) || part_errors) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        assert_eq!(r.error_code, 0, "OffsetFetch {group}");
        let mut out = BTreeMap::new();
        for t in &r.topics {
            assert_eq!(t.name.0.as_str(), topic);
            for p in &t.partitions {
                assert_eq!(p.error_code, 0, "OffsetFetch {group} partition");
                out.insert(p.partition_index, p.committed_offset);
            }
        }
        return out;
    }
}

/// A small xorshift generator seeded from the clock (the seed is printed).

// ------------------------------------------------------------------------------------------------
// kill -9 under load
// ------------------------------------------------------------------------------------------------

const KILL_TOPIC: &str = "t";
const KILL_TOPIC_PARTITIONS: i32 = 8;
const KILL_CLIENTS: usize = 8;

/// What one client saw in one round: per partition, the highest offset acknowledged and the
/// highest offset sent.
#[derive(Debug, Default, Clone)]
struct Seen {
    acked: BTreeMap<i32, i64>,
    sent: BTreeMap<i32, i64>,
    /// Partition commits acknowledged with error 0.
    acked_commits: u64,
    /// The request whose response never came (the broker died under it), if any.
    in_flight: Vec<(i32, i64)>,
}

/// Commit as fast as possible until the connection breaks (or `stop` is set). Each request
/// commits a rotating half of the partitions, each at the next offset of its own sequence.
fn commit_until_broken(
    addr: SocketAddr,
    group: String,
    mut next: BTreeMap<i32, i64>,
    stop: Arc<AtomicBool>,
) -> Seen {
    let mut seen = Seen::default();
    let Ok(sock) = TcpStream::connect(addr) else {
        return seen;
    };
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    sock.set_nodelay(true).unwrap();
    let mut c = Client { sock, next_cid: 1 };
    let mut round = 0i32;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let offsets: Vec<(i32, i64)> = (0..KILL_TOPIC_PARTITIONS)
            .filter(|p| (p + round) % 2 == 0 || round % 5 == 0)
            .map(|p| {
                let o = next.get_mut(&p).unwrap();
                *o += 1;
                (p, *o)
            })
            .collect();
        for &(p, o) in &offsets {
            seen.sent.insert(p, o);
        }
        let req = commit_request(&group, -1, "", KILL_TOPIC, &offsets);
        let Ok(resp) = c.try_call(8, req) else {
            seen.in_flight = offsets; // killed: the outcome of this commit is unknown
            break;
        };
        let errors = commit_errors(resp);
        if let Some((p, code)) = errors.iter().find(|(_, code)| *code != 0) {
            // COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR while the broker stops: not
            // acknowledged, and its outcome is unknown like that of a request the kill cut off.
            assert!(
                [14, 15, 16].contains(code),
                "group {group} partition {p}: OffsetCommit error {code}"
            );
            seen.in_flight = offsets;
            break;
        }
        for (p, _) in errors {
            let o = offsets.iter().find(|(q, _)| *q == p).unwrap().1;
            seen.acked.insert(p, o);
            seen.acked_commits += 1;
        }
    }
    seen
}

#[test]
fn kill_9_under_load_loses_no_acknowledged_commit() {
    let rounds: usize = std::env::var("RINGLEADER_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let started = Instant::now();
    let dir = data_dir("kill9");
    // Small segments so rolls happen under load too.
    // Small segments and a short snapshot interval, so compaction passes and snapshot builds
    // (in slices, then written by their own task) are under way when the SIGKILL lands.
    let sets = [
        "offsets.topic.segment.bytes=65536",
        "offsets.snapshot.interval.records=500",
    ];
    let (mut snapshots, mut compactions) = (0usize, 0usize);
    let mut rng = Rng::from_clock();
    let groups: Vec<String> = (0..KILL_CLIENTS).map(|i| format!("kill9-g{i}")).collect();
    let mut group_partitions: Vec<i32> = groups
        .iter()
        .map(|g| wire::partition_for(g, OFFSETS_PARTITIONS))
        .collect();
    group_partitions.sort_unstable();
    group_partitions.dedup();

    // Cumulative highest acknowledged offset per (group, partition); next offset to send.
    let mut acked: BTreeMap<(String, i32), i64> = BTreeMap::new();
    let mut next: Vec<BTreeMap<i32, i64>> = (0..KILL_CLIENTS)
        .map(|_| (0..KILL_TOPIC_PARTITIONS).map(|p| (p, 0)).collect())
        .collect();
    let mut total_acked = 0u64;
    let mut total_checked = 0u64;
    let mut durable_unacked = 0u64;
    let mut truncations = 0usize;

    let mut broker = Broker::start(&dir, &sets);
    create_topic(
        &mut Client::connect(broker.addr),
        KILL_TOPIC,
        KILL_TOPIC_PARTITIONS,
    );
    // What is on disk for certain at each start: every partition's last segment as it is
    // then (journal recovery and a clean stop sync them all).
    let mut synced = synced_tails(&dir);
    let mut power_losses = 0usize;
    // The last round stops the broker with SIGTERM under the same load instead: a clean stop
    // must exit 0 and keep every acknowledged commit too.
    for round in 1..=rounds + 1 {
        let graceful = round > rounds;
        let stop = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..KILL_CLIENTS)
            .map(|i| {
                let (addr, group, from, stop) = (
                    broker.addr,
                    groups[i].clone(),
                    next[i].clone(),
                    stop.clone(),
                );
                std::thread::spawn(move || commit_until_broken(addr, group, from, stop))
            })
            .collect();
        let kill_after = Duration::from_millis(200 + rng.next() % 600);
        std::thread::sleep(kill_after);
        snapshots += broker.log_lines("wrote __consumer_offsets snapshot").len();
        compactions += broker.log_lines(COMPACTED_LINE).len();
        if graceful {
            broker.stop();
        } else {
            broker.kill9();
            // Every other kill is a power loss too: segment bytes written since their last
            // sync are gone (torn at a random point), and only the journal holds those
            // batches. A process kill alone keeps them in the page cache.
            if round % 2 == 0 {
                drop_unsynced_tails(&dir, &synced, &mut rng);
                power_losses += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let seen: Vec<Seen> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let round_acked: u64 = seen.iter().map(|s| s.acked_commits).sum();
        total_acked += round_acked;
        for (i, s) in seen.iter().enumerate() {
            for (&p, &o) in &s.acked {
                acked.insert((groups[i].clone(), p), o);
            }
            for (&p, &o) in &s.sent {
                next[i].insert(p, o); // continue after the highest offset ever sent
            }
        }

        broker = Broker::start(&dir, &sets);
        synced = synced_tails(&dir);
        let loads = broker.log_lines(LOAD_LINE);
        assert_eq!(
            loads.len(),
            OFFSETS_PARTITIONS as usize,
            "one load line per partition:\n{}",
            broker.log_text()
        );
        for &p in &group_partitions {
            if acked
                .keys()
                .any(|(g, _)| wire::partition_for(g, OFFSETS_PARTITIONS) == p)
            {
                assert!(
                    loaded_records(&loads, p).is_some_and(|n| n > 0),
                    "partition {p} loaded no records:\n{}",
                    loads.join("\n")
                );
            }
        }
        truncations += broker.log_lines(TRUNCATED_LINE).len();

        let mut c = Client::connect(broker.addr);
        let partitions: Vec<i32> = (0..KILL_TOPIC_PARTITIONS).collect();
        let mut round_checked = 0;
        for (i, group) in groups.iter().enumerate() {
            let fetched = fetch_offsets(&mut c, group, KILL_TOPIC, &partitions);
            // What the group must hold: every acknowledged commit (`before`), or that plus the
            // one request in flight at the kill (`after`) — all of it or none of it, since one
            // request's records are one batch.
            let before: BTreeMap<i32, i64> = partitions
                .iter()
                .map(|&p| (p, acked.get(&(group.clone(), p)).copied().unwrap_or(-1)))
                .collect();
            let mut after = before.clone();
            after.extend(seen[i].in_flight.iter().copied());
            for &p in &partitions {
                let got = fetched.get(&p).copied().unwrap_or(-1);
                let want = before[&p];
                assert!(
                    got >= want,
                    "round {round}: {group} partition {p}: fetched {got} < acknowledged {want}\n{}",
                    broker.log_text()
                );
                let sent = next[i][&p];
                assert!(
                    got <= sent,
                    "round {round}: {group} partition {p}: fetched {got} was never sent (max {sent})"
                );
                round_checked += 1;
            }
            assert!(
                fetched == before || fetched == after,
                "round {round}: {group}: fetched {fetched:?} is neither the acknowledged state {before:?} nor that plus the request in flight {after:?}"
            );
            if fetched != before {
                durable_unacked += 1;
            }
            // The loaded state is what the next round builds on.
            for (&p, &o) in &fetched {
                acked.insert((group.clone(), p), o);
            }
        }
        total_checked += round_checked;
        println!(
            "round {round}: {} after {} ms, {round_acked} commits acknowledged, {round_checked} (group, partition) offsets verified, {} load lines",
            if graceful { "SIGTERM" } else { "SIGKILL" },
            kill_after.as_millis(),
            loads.len()
        );
    }
    broker.stop();
    let segments: usize = group_partitions
        .iter()
        .map(|p| {
            std::fs::read_dir(dir.join(format!("__consumer_offsets-{p}")))
                .unwrap()
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .ends_with(".log")
                })
                .count()
        })
        .sum();
    // Every partition directory must verify clean after the last (clean) stop.
    for p in &group_partitions {
        let out = Command::new(env!("CARGO_BIN_EXE_ringleader"))
            .arg("dump-log")
            .arg(dir.join(format!("__consumer_offsets-{p}")))
            .arg("--verify")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "dump-log --verify: {text}");
        assert!(text.starts_with("OK: "), "{text}");
    }
    // A clean stop leaves no journal behind: the segments alone hold everything.
    let journal_files = std::fs::read_dir(dir.join("__consumer_offsets-journal"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(journal_files, 0, "a clean stop removes the journal");
    println!(
        "kill -9: {power_losses} of them with the unsynced segment tails dropped (power loss)"
    );
    println!(
        "kill -9: {rounds} rounds (+1 SIGTERM round), {total_acked} acknowledged partition commits, {total_checked} offsets verified, {durable_unacked} in-flight requests found durable (unacknowledged), {truncations} tail truncations, {segments} segments in {} partitions, {snapshots} snapshots and {compactions} compaction passes completed, {:.1} s",
        group_partitions.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(total_acked > 0, "no commit was acknowledged");
    assert!(snapshots > 0, "the load wrote no snapshot to recover from");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each `__consumer_offsets` partition's last segment: (file name, length). Taken right after a
/// start, when everything in them is durable.
fn synced_tails(dir: &Path) -> BTreeMap<i32, (String, u64)> {
    (0..OFFSETS_PARTITIONS)
        .filter_map(|p| {
            let seg = segment_paths(&dir.join(format!("__consumer_offsets-{p}"))).pop()?;
            let len = std::fs::metadata(&seg).unwrap().len();
            Some((
                p,
                (seg.file_name().unwrap().to_string_lossy().into_owned(), len),
            ))
        })
        .collect()
}

/// A power loss after a SIGKILL: each partition's last segment keeps what was durable at the
/// last start (`synced`) plus a random prefix of what was written since. A segment created by a
/// roll since then was never synced (the roll synced the one before it), so all of it may go.
/// Only the journal still holds those batches.
fn drop_unsynced_tails(dir: &Path, synced: &BTreeMap<i32, (String, u64)>, rng: &mut Rng) {
    for p in 0..OFFSETS_PARTITIONS {
        let Some(seg) = segment_paths(&dir.join(format!("__consumer_offsets-{p}"))).pop() else {
            continue;
        };
        let name = seg.file_name().unwrap().to_string_lossy().into_owned();
        let len = std::fs::metadata(&seg).unwrap().len();
        let durable = match synced.get(&p) {
            Some((n, l)) if *n == name => *l,
            _ => 0,
        };
        if len > durable {
            let keep = durable + rng.next() % (len - durable + 1);
            std::fs::OpenOptions::new()
                .write(true)
                .open(&seg)
                .unwrap()
                .set_len(keep)
                .unwrap();
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Corrupt and torn tails
// ------------------------------------------------------------------------------------------------

/// The batches of a segment: (byte position, size, records).
type Batches = Vec<(u64, usize, Vec<storage::batch::LogRecord>)>;

fn batches_of(path: &Path) -> Batches {
    let mut out = Vec::new();
    let problem = storage::log::scan_segment_file(path, 1 << 26, |pos, h, bytes| {
        out.push((
            pos,
            h.size,
            storage::batch::decode_records(bytes, h, pos).unwrap(),
        ))
    })
    .unwrap();
    assert_eq!(problem, None, "{} is not clean", path.display());
    out
}

/// The segment files of a partition directory, oldest first.
fn segment_paths(partition_dir: &Path) -> Vec<PathBuf> {
    let mut segs: Vec<PathBuf> = std::fs::read_dir(partition_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    segs.sort();
    segs
}

/// The last segment of a partition directory.
fn last_segment(partition_dir: &Path) -> PathBuf {
    segment_paths(partition_dir).pop().expect("a segment")
}

/// The committed offsets of `group` on `topic` after replaying `batches` in order.
fn offsets_after(
    batches: &[(u64, usize, Vec<storage::batch::LogRecord>)],
    group: &str,
    topic: &str,
) -> BTreeMap<i32, i64> {
    use wire::records::{Record, RecordKey, RecordValue};
    let mut out = BTreeMap::new();
    for (_, _, records) in batches {
        for r in records {
            let Ok(rec) = Record::decode(r.key.as_deref().unwrap(), r.value.as_deref()) else {
                continue;
            };
            if let RecordKey::OffsetCommit {
                group: g,
                topic: t,
                partition,
            } = &rec.key
            {
                if g == group && t == topic {
                    match rec.value {
                        Some(RecordValue::OffsetCommit(v)) => {
                            out.insert(*partition, v.offset);
                        }
                        _ => {
                            out.remove(partition);
                        }
                    }
                }
            }
        }
    }
    out
}

fn dump_log(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ringleader"))
        .arg("dump-log")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn corrupt_or_torn_tail_recovers_to_the_last_good_batch() {
    let dir = data_dir("corrupt");
    let group = "corrupt-g";
    let topic = "c";
    let partitions: Vec<i32> = (0..4).collect();
    let p = wire::partition_for(group, OFFSETS_PARTITIONS);
    let pdir = dir.join(format!("__consumer_offsets-{p}"));

    let mut broker = Broker::start(&dir, &[]);
    let mut c = Client::connect(broker.addr);
    create_topic(&mut c, topic, 4);
    // Ten commits, one after another: each is acknowledged (durable) before the next is sent,
    // so each is its own batch.
    for i in 0..10i64 {
        let offsets: Vec<(i32, i64)> = partitions.iter().map(|&q| (q, 100 + i)).collect();
        let resp = c.call(8, commit_request(group, -1, "", topic, &offsets));
        assert!(commit_errors(resp).iter().all(|(_, e)| *e == 0));
    }
    broker.stop();

    let seg = last_segment(&pdir);
    let seg_name = seg.file_name().unwrap().to_string_lossy().into_owned();
    let batches = batches_of(&seg);
    assert!(batches.len() >= 10, "{} batches", batches.len());
    assert_eq!(
        offsets_after(&batches, group, topic),
        partitions.iter().map(|&q| (q, 109)).collect()
    );

    // 1. Flip a byte near the end of the last batch.
    let (last_pos, last_size, _) = batches.last().cloned().unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    assert_eq!(bytes.len() as u64, last_pos + last_size as u64);
    let flip = bytes.len() - 3;
    bytes[flip] ^= 0x5a;
    std::fs::write(&seg, &bytes).unwrap();
    let (code, out) = dump_log(&[pdir.as_os_str(), "--verify".as_ref()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.starts_with(&format!(
            "CORRUPT at byte offset {last_pos} of {}: ",
            seg.display()
        )),
        "{out}"
    );
    assert!(out.contains("CRC mismatch"), "{out}");
    let expected = offsets_after(&batches[..batches.len() - 1], group, topic);
    assert_eq!(expected, partitions.iter().map(|&q| (q, 108)).collect());

    broker = Broker::start(&dir, &[]);
    let warn = broker.log_lines(TRUNCATED_LINE);
    assert_eq!(warn.len(), 1, "{}", broker.log_text());
    assert!(warn[0].contains(&seg_name), "{}", warn[0]);
    assert!(
        warn[0].contains(&format!("position={last_pos}")),
        "{}",
        warn[0]
    );
    let mut c = Client::connect(broker.addr);
    assert_eq!(fetch_offsets(&mut c, group, topic, &partitions), expected);
    broker.stop();
    // Recovery cut the file at the bad batch.
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), last_pos);
    let (code, out) = dump_log(&[pdir.as_os_str(), "--verify".as_ref()]);
    assert_eq!(code, 0, "{out}");

    // 2. Truncate the segment in the middle of its (new) last batch.
    let batches = batches_of(&seg);
    let (last_pos, last_size, _) = batches.last().cloned().unwrap();
    let expected = offsets_after(&batches[..batches.len() - 1], group, topic);
    assert_eq!(expected, partitions.iter().map(|&q| (q, 107)).collect());
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(last_pos + last_size as u64 / 2).unwrap();
    drop(f);
    let (code, out) = dump_log(&[seg.as_os_str(), "--verify".as_ref()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.starts_with(&format!("CORRUPT at byte offset {last_pos} of ")),
        "{out}"
    );
    assert!(out.contains("torn batch"), "{out}");

    broker = Broker::start(&dir, &[]);
    let warn = broker.log_lines(TRUNCATED_LINE);
    assert_eq!(warn.len(), 1, "{}", broker.log_text());
    assert!(warn[0].contains(&seg_name), "{}", warn[0]);
    assert!(warn[0].contains("torn"), "{}", warn[0]);
    let mut c = Client::connect(broker.addr);
    assert_eq!(fetch_offsets(&mut c, group, topic, &partitions), expected);
    // Appends continue after the cut and survive the next restart.
    let offsets: Vec<(i32, i64)> = partitions.iter().map(|&q| (q, 500)).collect();
    let resp = c.call(8, commit_request(group, -1, "", topic, &offsets));
    assert!(commit_errors(resp).iter().all(|(_, e)| *e == 0));
    broker.stop();
    broker = Broker::start(&dir, &[]);
    assert!(
        broker.log_lines(TRUNCATED_LINE).is_empty(),
        "{}",
        broker.log_text()
    );
    let mut c = Client::connect(broker.addr);
    assert_eq!(
        fetch_offsets(&mut c, group, topic, &partitions),
        partitions.iter().map(|&q| (q, 500)).collect()
    );
    broker.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------------------------------------------------------
// A classic group survives a restart
// ------------------------------------------------------------------------------------------------

fn subscription(topics: &[&str]) -> Bytes {
    let mut b = BytesMut::new();
    b.extend_from_slice(&0i16.to_be_bytes());
    ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| s(t)).collect())
        .encode(&mut b, 0)
        .unwrap();
    b.freeze()
}

fn assignment(topic: &str, partitions: &[i32]) -> Bytes {
    let mut b = BytesMut::new();
    b.extend_from_slice(&0i16.to_be_bytes());
    ConsumerProtocolAssignment::default()
        .with_assigned_partitions(vec![consumer_protocol_assignment::TopicPartition::default(
        )
        .with_topic(TopicName(s(topic)))
        .with_partitions(partitions.to_vec())])
        .encode(&mut b, 0)
        .unwrap();
    b.freeze()
}

#[test]
fn restart_keeps_a_classic_group_and_its_offsets() {
    let dir = data_dir("classic");
    let group = "restart-classic";
    let topic = "orders";
    let committed: [i64; 6] = [10, 9, 13, 6, 14, 8];
    let sets = ["group.initial.rebalance.delay.ms=0"];
    let mut broker = Broker::start(&dir, &sets);
    let mut c = Client::connect(broker.addr);
    create_topic(&mut c, topic, 6);

    // JoinGroup v5: MEMBER_ID_REQUIRED with an id, then the real join with it.
    let join = |member: &str| {
        Request::JoinGroup(
            JoinGroupRequest::default()
                .with_group_id(GroupId(s(group)))
                .with_session_timeout_ms(30_000)
                .with_rebalance_timeout_ms(30_000)
                .with_member_id(s(member))
                .with_protocol_type(s("consumer"))
                .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
                )
                .with_name(s("range"))
                .with_metadata(subscription(&[topic]))]),
        )
    };
    let Response::JoinGroup(first) = c.call(5, join("")) else {
        panic!()
    };
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    let member_id = first.member_id.to_string();
    assert!(!member_id.is_empty());
    let Response::JoinGroup(joined) = c.call(5, join(&member_id)) else {
        panic!()
    };
    assert_eq!(joined.error_code, 0, "JoinGroup");
    assert_eq!(joined.member_id.as_str(), member_id);
    assert_eq!(joined.leader.as_str(), member_id);
    let generation = joined.generation_id;
    assert!(generation >= 1);

    let assigned = assignment(topic, &[0, 1, 2, 3, 4, 5]);
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(generation)
        .with_member_id(s(&member_id))
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(Some(s("range")))
        .with_assignments(vec![
            sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(s(&member_id))
                .with_assignment(assigned.clone()),
        ]);
    let Response::SyncGroup(sg) = c.call(5, Request::SyncGroup(sync)) else {
        panic!()
    };
    assert_eq!(sg.error_code, 0, "SyncGroup");
    assert_eq!(sg.assignment, assigned);

    let offsets: Vec<(i32, i64)> = committed
        .iter()
        .enumerate()
        .map(|(p, o)| (p as i32, *o))
        .collect();
    let resp = c.call(
        8,
        commit_request(group, generation, &member_id, topic, &offsets),
    );
    assert!(
        commit_errors(resp).iter().all(|(_, e)| *e == 0),
        "OffsetCommit"
    );
    broker.stop();

    // The log holds the group: dump-log shows its GroupMetadata record with the member and the
    // decoded assignment, and the offsets.
    let p = wire::partition_for(group, OFFSETS_PARTITIONS);
    let pdir = dir.join(format!("__consumer_offsets-{p}"));
    let (code, out) = dump_log(&[pdir.as_os_str()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines().any(|l| l.contains(r#"key: {"type":"2","data":{"group":"restart-classic"}}"#)
            && l.contains(&format!(r#""memberId":"{member_id}""#))
            && l.contains(r#""assignment":{"assignedPartitions":[{"topic":"orders","partitions":[0,1,2,3,4,5]}]"#)),
        "{out}"
    );
    assert!(
        out.contains(r#"key: {"type":"1","data":{"group":"restart-classic","topic":"orders","partition":2}} payload: {"version":"4","data":{"offset":13,"#),
        "{out}"
    );

    let mut broker = Broker::start(&dir, &sets);
    let loads = broker.log_lines(LOAD_LINE);
    assert!(
        loaded_records(&loads, p).is_some_and(|n| n >= 7),
        "{}",
        loads.join("\n")
    );
    let mut c = Client::connect(broker.addr);
    let Response::DescribeGroups(d) = c.call(
        5,
        Request::DescribeGroups(
            DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]),
        ),
    ) else {
        panic!()
    };
    let g = &d.groups[0];
    assert_eq!(g.error_code, 0);
    assert_eq!(g.group_state.as_str(), "Stable");
    assert_eq!(g.protocol_type.as_str(), "consumer");
    assert_eq!(g.protocol_data.as_str(), "range");
    assert_eq!(g.members.len(), 1);
    assert_eq!(g.members[0].member_id.as_str(), member_id);
    assert_eq!(g.members[0].member_assignment, assigned);
    assert_eq!(g.members[0].member_metadata, subscription(&[topic]));

    let fetched = fetch_offsets(&mut c, group, topic, &[0, 1, 2, 3, 4, 5]);
    assert_eq!(fetched, offsets.iter().copied().collect());

    // The old member id and generation are still valid.
    let Response::Heartbeat(hb) = c.call(
        4,
        Request::Heartbeat(
            HeartbeatRequest::default()
                .with_group_id(GroupId(s(group)))
                .with_generation_id(generation)
                .with_member_id(s(&member_id)),
        ),
    ) else {
        panic!()
    };
    assert_eq!(hb.error_code, 0, "Heartbeat after restart");
    // And a commit with the generation too.
    let resp = c.call(
        8,
        commit_request(group, generation, &member_id, topic, &[(0, 11)]),
    );
    assert_eq!(commit_errors(resp), vec![(0, 0)]);
    broker.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// CRC-32C (Castagnoli), bitwise: enough to forge a CRC-valid batch below.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A batch whose CRC is valid but whose records do not parse (it claims one record more than it
/// holds) must be dropped whole: recovery truncates it, so none of its records may reach the
/// group state. (Found as a bug: recovery used to replay the records that parsed before finding
/// the bad one, so the first restart served offsets that were no longer on disk.)
#[test]
fn a_batch_recovery_truncates_is_not_half_replayed() {
    let dir = data_dir("halfbatch");
    let group = "half-g";
    let topic = "h";
    let p = wire::partition_for(group, OFFSETS_PARTITIONS);
    let mut broker = Broker::start(&dir, &[]);
    let mut c = Client::connect(broker.addr);
    create_topic(&mut c, topic, 1);
    let resp = c.call(8, commit_request(group, -1, "", topic, &[(0, 5)]));
    assert_eq!(commit_errors(resp), vec![(0, 0)]);
    broker.stop();

    let seg = last_segment(&dir.join(format!("__consumer_offsets-{p}")));
    let batches = batches_of(&seg);
    let next = batches
        .last()
        .map(|(_, _, recs)| recs.last().unwrap().offset + 1)
        .unwrap();
    let record = |o: i64| {
        let r = wire::records::Record::new(
            wire::records::RecordKey::OffsetCommit {
                group: group.into(),
                topic: topic.into(),
                partition: 0,
            },
            wire::records::RecordValue::OffsetCommit(wire::records::OffsetCommitValue {
                offset: o,
                ..Default::default()
            }),
        );
        (r.encode_key().unwrap(), r.encode_value().unwrap())
    };
    let (r1, r2) = (record(777), record(778));
    let mut forged = Vec::new();
    storage::batch::encode_batch(
        next,
        1,
        &[
            (Some(&r1.0), r1.1.as_deref()),
            (Some(&r2.0), r2.1.as_deref()),
        ],
        &mut forged,
    );
    assert_eq!(
        crc32c(&forged[21..]).to_be_bytes(),
        forged[17..21],
        "crc32c self-check"
    );
    forged[57..61].copy_from_slice(&3i32.to_be_bytes()); // records count 3, two present
    let crc = crc32c(&forged[21..]);
    forged[17..21].copy_from_slice(&crc.to_be_bytes());
    let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
    f.write_all(&forged).unwrap();
    drop(f);
    let (code, out) = dump_log(&[seg.as_os_str(), "--verify".as_ref()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("record: length"), "{out}");

    broker = Broker::start(&dir, &[]);
    assert_eq!(
        broker.log_lines(TRUNCATED_LINE).len(),
        1,
        "{}",
        broker.log_text()
    );
    let mut c = Client::connect(broker.addr);
    let first = fetch_offsets(&mut c, group, topic, &[0])[&0];
    broker.stop();
    broker = Broker::start(&dir, &[]);
    let mut c = Client::connect(broker.addr);
    let second = fetch_offsets(&mut c, group, topic, &[0])[&0];
    broker.stop();
    assert_eq!(
        (first, second),
        (5, 5),
        "the truncated batch's records were replayed by the first restart only"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------------------------------------------------------
// Compaction
// ------------------------------------------------------------------------------------------------

const COMPACTED_LINE: &str = "compacted __consumer_offsets partition";

/// Every record of a partition directory, segment by segment, in offset order.
fn partition_records(partition_dir: &Path) -> Batches {
    segment_paths(partition_dir)
        .iter()
        .flat_map(|p| batches_of(p))
        .collect()
}

#[test]
fn compaction_keeps_each_keys_last_commit_and_drops_deleted_groups() {
    let dir = data_dir("compaction");
    let topic = "orders";
    let partitions: Vec<i32> = (0..10).collect();
    // One offsets partition, tiny segments so the log rolls often, no snapshots (compaction
    // alone keeps the log small), tombstones removable at once.
    let sets = [
        "offsets.topic.num.partitions=1",
        "offsets.topic.segment.bytes=8192",
        "offsets.snapshot.interval.records=1000000000",
        "log.cleaner.delete.retention.ms=0",
    ];
    let mut broker = Broker::start(&dir, &sets);
    let mut c = Client::connect(broker.addr);
    create_topic(&mut c, topic, 10);
    let commit = |c: &mut Client, group: &str, offset: i64| {
        let offsets: Vec<(i32, i64)> = partitions.iter().map(|p| (*p, offset)).collect();
        let errs = commit_errors(c.call(8, commit_request(group, -1, "", topic, &offsets)));
        assert!(errs.iter().all(|(_, e)| *e == 0), "{group}: {errs:?}");
    };
    // Groups that get deleted: their commits become tombstones, then go entirely.
    let gone: Vec<String> = (0..5).map(|i| format!("gone-{i}")).collect();
    for g in &gone {
        commit(&mut c, g, 7);
    }
    for round in 0..150 {
        commit(&mut c, "keep", round);
    }
    let Response::DeleteGroups(r) = c.call(
        2,
        Request::DeleteGroups(
            DeleteGroupsRequest::default()
                .with_groups_names(gone.iter().map(|g| GroupId(s(g))).collect()),
        ),
    ) else {
        panic!("DeleteGroups")
    };
    assert!(r.results.iter().all(|x| x.error_code == 0), "{r:?}");
    let written = 5 * 10 + 150 * 10 + 5 * 10;
    let mut last = 0;
    for round in 150..400 {
        commit(&mut c, "keep", round);
        last = round;
    }
    // Passes run after rolls; wait for one that removed the deleted groups' tombstones.
    let deadline = Instant::now() + Duration::from_secs(20);
    let tombstones_removed = |lines: &[String]| -> u64 {
        lines
            .iter()
            .filter_map(|l| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix("tombstones_removed="))
                    .and_then(|n| n.parse::<u64>().ok())
            })
            .sum()
    };
    while tombstones_removed(&broker.log_lines(COMPACTED_LINE)) < 50 {
        assert!(
            Instant::now() < deadline,
            "no compaction removed the tombstones:\n{}",
            broker.log_lines(COMPACTED_LINE).join("\n")
        );
        // More commits roll more segments, which start more passes.
        last += 1;
        commit(&mut c, "keep", last);
        std::thread::sleep(Duration::from_millis(50));
    }
    let pdir = dir.join("__consumer_offsets-0");
    let on_disk = partition_records(&pdir);
    let records: usize = on_disk.iter().map(|b| b.2.len()).sum();
    assert!(
        records < (written + 250 * 10) / 4,
        "compaction left {records} records of about {}",
        written + 250 * 10
    );
    // Offsets are never reused: batches keep their base offsets and go up.
    let bases: Vec<u64> = on_disk
        .iter()
        .map(|b| b.2.first().map_or(0, |r| r.offset))
        .collect();
    assert!(bases.windows(2).all(|w| w[0] < w[1]));
    for g in &gone {
        assert!(
            offsets_after(&on_disk, g, topic).is_empty(),
            "{g}'s records are all gone from the log"
        );
    }
    // The files are whole Kafka batches (`dump-log --verify` checks every CRC).
    let (code, _) = dump_log(&["--verify".as_ref(), pdir.as_os_str()]);
    assert_eq!(code, 0, "dump-log --verify of a compacted partition");

    // Restart from the compacted log alone: the same committed offsets.
    broker.kill9();
    let broker = Broker::start(&dir, &sets);
    let mut c = Client::connect(broker.addr);
    let keep = fetch_offsets(&mut c, "keep", topic, &partitions);
    assert!(
        keep.len() == 10 && keep.values().all(|o| *o == last),
        "last commits survive compaction and restart: {keep:?}"
    );
    for g in &gone {
        let got = fetch_offsets(&mut c, g, topic, &partitions);
        assert!(got.values().all(|o| *o == -1), "{g} stays deleted: {got:?}");
    }
    drop(broker);
    let _ = std::fs::remove_dir_all(&dir);
}
