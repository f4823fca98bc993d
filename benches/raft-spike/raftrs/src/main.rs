//! Spike: one replicated log (3 replicas, one process, TCP on 127.0.0.1) on tikv's `raft` crate.
//! Each node is one thread driving a RawNode (tick / step / ready), the way a glommio shard
//! would. Entries are persisted to a per-node file with one fdatasync per Ready (group commit).
//! K proposer threads each propose a 100-byte entry on the leader and wait until it is
//! committed and applied there; latencies go to an HDR histogram.
//!
//! Standalone (not in the workspace): run with scripts/raft-spike.sh, which runs it interleaved
//! with the openraft spike beside it. KS=1,8,64 picks the proposer counts, NOSYNC=1 skips the
//! fdatasync (library overhead only), SPIKE_DATA the data directory.

use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError, Sender};
use hdrhistogram::Histogram;
use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, EntryType, Message};
use raft::storage::MemStorage;
use raft::{Config, RawNode, StateRole};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

enum Input {
    Raft(Message),
    Propose(Vec<u8>, Sender<()>),
}

fn cpu_seconds() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn reader(mut s: TcpStream, inbox: Sender<Input>) {
    let mut len = [0u8; 4];
    loop {
        if s.read_exact(&mut len).is_err() {
            return;
        }
        let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
        if s.read_exact(&mut buf).is_err() {
            return;
        }
        let m = Message::parse_from_bytes(&buf).expect("decode");
        if inbox.send(Input::Raft(m)).is_err() {
            return;
        }
    }
}

fn writer(mut s: TcpStream, out: Receiver<Message>) {
    s.set_nodelay(true).unwrap();
    let mut buf = Vec::new();
    while let Ok(m) = out.recv() {
        buf.clear();
        let mut push = |m: &Message| {
            let b = m.write_to_bytes().unwrap();
            buf.extend_from_slice(&(b.len() as u32).to_be_bytes());
            buf.extend_from_slice(&b);
        };
        push(&m);
        while let Ok(m) = out.try_recv() {
            push(&m);
        }
        if s.write_all(&buf).is_err() {
            return;
        }
    }
}

struct Node {
    raw: RawNode<MemStorage>,
    file: File,
    peers: HashMap<u64, Sender<Message>>,
    waiting: HashMap<u64, (Sender<()>, )>,
    syncs: u64,
    synced_entries: u64,
}

impl Node {
    fn send(&self, msgs: Vec<Message>) {
        for m in msgs {
            self.peers[&m.to].send(m).unwrap();
        }
    }

    fn persist(&mut self, entries: &[Entry], hs: Option<&raft::eraftpb::HardState>) {
        if entries.is_empty() && hs.is_none() {
            return;
        }
        let mut buf = Vec::new();
        for e in entries {
            buf.extend_from_slice(&e.write_to_bytes().unwrap());
        }
        if let Some(hs) = hs {
            buf.extend_from_slice(&hs.write_to_bytes().unwrap());
        }
        self.file.write_all(&buf).unwrap();
        if std::env::var_os("NOSYNC").is_none() {
            self.file.sync_data().unwrap();
        }
        self.syncs += 1;
        self.synced_entries += entries.len() as u64;
        let mut st = self.raw.mut_store().wl();
        if !entries.is_empty() {
            st.append(entries).unwrap();
        }
        if let Some(hs) = hs {
            st.set_hardstate(hs.clone());
        }
    }

    fn apply(&mut self, committed: Vec<Entry>) {
        for e in committed {
            if e.get_entry_type() == EntryType::EntryNormal && !e.data.is_empty() {
                if let Some((tx,)) = self.waiting.remove(&e.index) {
                    let _ = tx.send(());
                }
            }
        }
    }

    fn on_ready(&mut self) {
        if !self.raw.has_ready() {
            return;
        }
        let mut rd = self.raw.ready();
        self.send(rd.take_messages());
        let committed = rd.take_committed_entries();
        self.apply(committed);
        let entries = rd.take_entries();
        let hs = rd.hs().cloned();
        self.persist(&entries, hs.as_ref());
        self.send(rd.take_persisted_messages());
        let mut light = self.raw.advance(rd);
        if let Some(c) = light.commit_index() {
            let mut st = self.raw.mut_store().wl();
            let mut hs = st.hard_state().clone();
            hs.commit = c;
            st.set_hardstate(hs);
        }
        self.send(light.take_messages());
        self.apply(light.take_committed_entries());
        self.raw.advance_apply();
    }
}

fn run_node(
    id: u64,
    inbox: Receiver<Input>,
    peers: HashMap<u64, Sender<Message>>,
    dir: &str,
    stop: Arc<AtomicBool>,
    leader_tx: Sender<u64>,
) {
    let cfg = Config {
        id,
        election_tick: 15,
        heartbeat_tick: 1,
        max_size_per_msg: 1 << 20,
        max_inflight_msgs: 256,
        ..Default::default()
    };
    cfg.validate().unwrap();
    let store = MemStorage::new_with_conf_state(ConfState::from((vec![1, 2, 3], vec![])));
    let logger = slog::Logger::root(slog::Discard, slog::o!());
    let raw = RawNode::new(&cfg, store, &logger).unwrap();
    let _ = std::fs::create_dir_all(dir);
    let file = OpenOptions::new().create(true).append(true).open(format!("{dir}/log")).unwrap();
    let mut node = Node { raw, file, peers, waiting: HashMap::new(), syncs: 0, synced_entries: 0 };
    if id == 1 {
        node.raw.campaign().unwrap();
    }
    let tick = Duration::from_millis(100);
    let mut next_tick = Instant::now() + tick;
    let mut announced = false;
    while !stop.load(Ordering::Relaxed) {
        let timeout = next_tick.saturating_duration_since(Instant::now());
        match inbox.recv_timeout(timeout) {
            Ok(first) => {
                let handle = |i: Input, node: &mut Node| match i {
                    Input::Raft(m) => {
                        let _ = node.raw.step(m);
                    }
                    Input::Propose(data, tx) => {
                        node.raw.propose(vec![], data).unwrap();
                        let idx = node.raw.raft.raft_log.last_index();
                        node.waiting.insert(idx, (tx,));
                    }
                };
                handle(first, &mut node);
                while let Ok(i) = inbox.try_recv() {
                    handle(i, &mut node);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if Instant::now() >= next_tick {
            node.raw.tick();
            next_tick += tick;
        }
        node.on_ready();
        if !announced && node.raw.raft.state == StateRole::Leader {
            announced = true;
            leader_tx.send(id).unwrap();
        }
    }
    eprintln!(
        "raft-rs node {id}: {} fdatasyncs, {:.2} entries per fdatasync",
        node.syncs,
        node.synced_entries as f64 / node.syncs.max(1) as f64
    );
}

fn main() {
    let base = &std::env::var("SPIKE_DATA").unwrap_or_else(|_| format!("{}/data", env!("CARGO_MANIFEST_DIR")));
    let _ = std::fs::remove_dir_all(base);
    let ids = [1u64, 2, 3];
    let listeners: Vec<TcpListener> =
        ids.iter().map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    let addrs: Vec<_> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
    let inboxes: Vec<(Sender<Input>, Receiver<Input>)> = ids.iter().map(|_| unbounded()).collect();
    for (i, l) in listeners.into_iter().enumerate() {
        let inbox = inboxes[i].0.clone();
        thread::spawn(move || {
            for s in l.incoming() {
                let s = s.unwrap();
                s.set_nodelay(true).unwrap();
                let inbox = inbox.clone();
                thread::spawn(move || reader(s, inbox));
            }
        });
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (leader_tx, leader_rx) = bounded(3);
    let mut handles = Vec::new();
    for (i, &id) in ids.iter().enumerate() {
        let mut peers = HashMap::new();
        for (j, &pid) in ids.iter().enumerate() {
            if pid != id {
                let (tx, rx) = unbounded();
                let s = TcpStream::connect(addrs[j]).unwrap();
                thread::spawn(move || writer(s, rx));
                peers.insert(pid, tx);
            }
        }
        let inbox = inboxes[i].1.clone();
        let stop = stop.clone();
        let leader_tx = leader_tx.clone();
        let dir = format!("{base}/node-{id}");
        handles.push(thread::spawn(move || run_node(id, inbox, peers, &dir, stop, leader_tx)));
    }
    let leader = leader_rx.recv_timeout(Duration::from_secs(10)).expect("a leader");
    assert_eq!(leader, 1);
    let leader_inbox = inboxes[0].0.clone();
    let k_list: Vec<usize> = std::env::var("KS")
        .ok()
        .map(|s| s.split(',').map(|x| x.parse().unwrap()).collect())
        .unwrap_or(vec![1, 8, 64]);
    for k in k_list {
        let phase_stop = Arc::new(AtomicBool::new(false));
        let measuring = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        for _ in 0..k {
            let inbox = leader_inbox.clone();
            let phase_stop = phase_stop.clone();
            let measuring = measuring.clone();
            workers.push(thread::spawn(move || {
                let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
                let mut n = 0u64;
                let (tx, rx) = bounded(1);
                while !phase_stop.load(Ordering::Relaxed) {
                    let t0 = Instant::now();
                    inbox.send(Input::Propose(vec![7u8; 100], tx.clone())).unwrap();
                    rx.recv().unwrap();
                    if measuring.load(Ordering::Relaxed) {
                        h.record(t0.elapsed().as_micros().max(1) as u64).unwrap();
                        n += 1;
                    }
                }
                (h, n)
            }));
        }
        thread::sleep(Duration::from_secs(3));
        let cpu0 = cpu_seconds();
        let t0 = Instant::now();
        measuring.store(true, Ordering::Relaxed);
        thread::sleep(Duration::from_secs(10));
        measuring.store(false, Ordering::Relaxed);
        let secs = t0.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu0;
        phase_stop.store(true, Ordering::Relaxed);
        let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        let mut n = 0;
        for w in workers {
            let (h, c) = w.join().unwrap();
            all.add(h).unwrap();
            n += c;
        }
        println!(
            "raft-rs K={k} ops/s={:.0} p50_us={} p99_us={} p999_us={} cpu_s={:.2} cpu_us_per_op={:.1}",
            n as f64 / secs,
            all.value_at_quantile(0.5),
            all.value_at_quantile(0.99),
            all.value_at_quantile(0.999),
            cpu,
            cpu * 1e6 / n as f64
        );
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
}
