//! Spike: throughput/latency of one 3-replica openraft 0.9 log over loopback TCP,
//! with fdatasync on every log append and vote save.
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{Cursor, Write};
use std::ops::RangeBounds;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError,
};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::storage::{LogFlushed, RaftLogStorage, RaftStateMachine};
use openraft::{
    BasicNode, Config, Entry, EntryPayload, LogId, LogState, RaftLogReader, RaftNetwork,
    RaftNetworkFactory, RaftSnapshotBuilder, ServerState, SnapshotMeta, SnapshotPolicy,
    StorageError, StoredMembership, Vote,
};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

openraft::declare_raft_types!(
    pub TC:
        D = Vec<u8>,
        R = (),
);

type NID = u64;
type Raft = openraft::Raft<TC>;

// ---------------------------------------------------------------- log storage
#[derive(Default)]
struct LogInner {
    log: BTreeMap<u64, Entry<TC>>,
    last_purged: Option<LogId<NID>>,
    vote: Option<Vote<NID>>,
    committed: Option<LogId<NID>>,
}

// Per node (index = node id): log fdatasync count and entries made durable.
static FSYNCS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
static ENTRIES: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

fn io_counters() -> [(u64, u64); 4] {
    std::array::from_fn(|i| (FSYNCS[i].load(Ordering::Relaxed), ENTRIES[i].load(Ordering::Relaxed)))
}

#[derive(Clone)]
struct LogStore {
    id: usize,
    inner: Arc<Mutex<LogInner>>,
    log_file: Arc<Mutex<File>>,
    vote_file: Arc<Mutex<File>>,
    /// FLUSH=thread: a per-node flusher thread does write+fdatasync and then calls the callbacks
    /// (group commit across queued appends). FLUSH=inline (default): done inside `append`.
    flusher: Option<std::sync::mpsc::Sender<(Vec<u8>, u64, LogFlushed<TC>)>>,
}

fn flusher_thread(id: usize, file: Arc<Mutex<File>>, rx: std::sync::mpsc::Receiver<(Vec<u8>, u64, LogFlushed<TC>)>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        let mut f = file.lock().unwrap();
        let mut n = 0;
        for (buf, cnt, _) in &batch {
            f.write_all(buf).unwrap();
            n += cnt;
        }
        f.sync_data().unwrap();
        drop(f);
        FSYNCS[id].fetch_add(1, Ordering::Relaxed);
        ENTRIES[id].fetch_add(n, Ordering::Relaxed);
        for (_, _, cb) in batch {
            cb.log_io_completed(Ok(()));
        }
    }
}

impl LogStore {
    fn new(id: usize, dir: &str) -> Self {
        let log_file = OpenOptions::new().create(true).append(true).open(format!("{dir}/log")).unwrap();
        let vote_file = OpenOptions::new().create(true).write(true).open(format!("{dir}/vote")).unwrap();
        let log_file = Arc::new(Mutex::new(log_file));
        let flusher = if std::env::var("FLUSH").as_deref() == Ok("thread") {
            let (tx, rx) = std::sync::mpsc::channel();
            let f = log_file.clone();
            std::thread::spawn(move || flusher_thread(id, f, rx));
            Some(tx)
        } else {
            None
        };
        LogStore { id, inner: Default::default(), log_file, vote_file: Arc::new(Mutex::new(vote_file)), flusher }
    }
}

impl RaftLogReader<TC> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TC>>, StorageError<NID>> {
        let g = self.inner.lock().unwrap();
        Ok(g.log.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TC> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TC>, StorageError<NID>> {
        let g = self.inner.lock().unwrap();
        let last = g.log.last_key_value().map(|(_, e)| e.log_id).or(g.last_purged);
        Ok(LogState { last_purged_log_id: g.last_purged, last_log_id: last })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NID>) -> Result<(), StorageError<NID>> {
        let bytes = bincode::serialize(vote).unwrap();
        {
            let f = self.vote_file.lock().unwrap();
            f.set_len(0).unwrap();
            f.write_all_at(&bytes, 0).unwrap();
            f.sync_data().unwrap();
        }
        self.inner.lock().unwrap().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NID>>, StorageError<NID>> {
        Ok(self.inner.lock().unwrap().vote)
    }

    async fn save_committed(&mut self, c: Option<LogId<NID>>) -> Result<(), StorageError<NID>> {
        self.inner.lock().unwrap().committed = c;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NID>>, StorageError<NID>> {
        Ok(self.inner.lock().unwrap().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TC>) -> Result<(), StorageError<NID>>
    where I: IntoIterator<Item = Entry<TC>> + Send, I::IntoIter: Send {
        let entries: Vec<Entry<TC>> = entries.into_iter().collect();
        let mut buf = Vec::with_capacity(entries.len() * 160);
        for e in &entries {
            let b = bincode::serialize(e).unwrap();
            buf.extend_from_slice(&(b.len() as u32).to_le_bytes());
            buf.extend_from_slice(&b);
        }
        let n = entries.len() as u64;
        {
            let mut g = self.inner.lock().unwrap();
            for e in entries {
                g.log.insert(e.log_id.index, e);
            }
        }
        if let Some(tx) = &self.flusher {
            tx.send((buf, n, callback)).unwrap();
            return Ok(());
        }
        {
            // Synchronous write + fdatasync, inline in the RaftCore task (blocks the worker thread).
            let mut f = self.log_file.lock().unwrap();
            f.write_all(&buf).unwrap();
            f.sync_data().unwrap();
        }
        FSYNCS[self.id].fetch_add(1, Ordering::Relaxed);
        ENTRIES[self.id].fetch_add(n, Ordering::Relaxed);
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<NID>) -> Result<(), StorageError<NID>> {
        // In-memory only (the file is an append-only durability-cost sink).
        let mut g = self.inner.lock().unwrap();
        let _ = g.log.split_off(&log_id.index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NID>) -> Result<(), StorageError<NID>> {
        let mut g = self.inner.lock().unwrap();
        let keep = g.log.split_off(&(log_id.index + 1));
        g.log = keep;
        g.last_purged = Some(log_id);
        Ok(())
    }
}

// ---------------------------------------------------------------- state machine
#[derive(Default, Clone)]
struct Sm {
    applied: Arc<AtomicU64>, // count of applied Normal entries
    last_applied: Option<LogId<NID>>,
    membership: StoredMembership<NID, BasicNode>,
}

impl RaftSnapshotBuilder<TC> for Sm {
    async fn build_snapshot(&mut self) -> Result<openraft::Snapshot<TC>, StorageError<NID>> {
        let meta = SnapshotMeta {
            last_log_id: self.last_applied,
            last_membership: self.membership.clone(),
            snapshot_id: format!("{:?}", self.last_applied),
        };
        Ok(openraft::Snapshot { meta, snapshot: Box::new(Cursor::new(Vec::new())) })
    }
}

impl RaftStateMachine<TC> for Sm {
    type SnapshotBuilder = Sm;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NID>>, StoredMembership<NID, BasicNode>), StorageError<NID>> {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError<NID>>
    where I: IntoIterator<Item = Entry<TC>> + Send, I::IntoIter: Send {
        let mut res = Vec::new();
        for e in entries {
            self.last_applied = Some(e.log_id);
            match e.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(_) => {
                    self.applied.fetch_add(1, Ordering::Relaxed);
                }
                EntryPayload::Membership(m) => {
                    self.membership = StoredMembership::new(Some(e.log_id), m);
                }
            }
            res.push(());
        }
        Ok(res)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NID>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NID, BasicNode>,
        _snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NID>> {
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<openraft::Snapshot<TC>>, StorageError<NID>> {
        Ok(None)
    }
}

// ---------------------------------------------------------------- network (TCP, length-prefixed bincode)
#[derive(Serialize, Deserialize)]
enum Req {
    Append(AppendEntriesRequest<TC>),
    Vote(VoteRequest<NID>),
    Snap(InstallSnapshotRequest<TC>),
}

async fn write_frame(s: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(body.len() + 4);
    buf.extend_from_slice(&(body.len() as u32).to_le_bytes());
    buf.extend_from_slice(body);
    s.write_all(&buf).await
}

async fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await?;
    let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
    s.read_exact(&mut body).await?;
    Ok(body)
}

async fn serve(listener: TcpListener, raft: Raft) {
    loop {
        let (mut s, _) = match listener.accept().await {
            Ok(x) => x,
            Err(_) => continue,
        };
        s.set_nodelay(true).unwrap();
        let raft = raft.clone();
        tokio::spawn(async move {
            while let Ok(body) = read_frame(&mut s).await {
                let resp = match bincode::deserialize::<Req>(&body).unwrap() {
                    Req::Append(r) => bincode::serialize(&raft.append_entries(r).await),
                    Req::Vote(r) => bincode::serialize(&raft.vote(r).await),
                    Req::Snap(r) => bincode::serialize(&raft.install_snapshot(r).await),
                }
                .unwrap();
                if write_frame(&mut s, &resp).await.is_err() {
                    break;
                }
            }
        });
    }
}

struct NetFactory;

struct Conn {
    target: NID,
    addr: String,
    stream: Option<TcpStream>,
}

impl RaftNetworkFactory<TC> for NetFactory {
    type Network = Conn;
    async fn new_client(&mut self, target: NID, node: &BasicNode) -> Conn {
        Conn { target, addr: node.addr.clone(), stream: None }
    }
}

impl Conn {
    /// One RPC at a time on a persistent connection. The stream is taken out while in flight so
    /// that a cancelled call (openraft applies timeouts) drops the connection instead of
    /// desynchronising it.
    async fn call<T: DeserializeOwned, E: std::error::Error>(
        &mut self,
        req: &Req,
    ) -> Result<T, RPCError<NID, BasicNode, RaftError<NID, E>>>
    where Result<T, RaftError<NID, E>>: DeserializeOwned {
        let io = async {
            let mut s = match self.stream.take() {
                Some(s) => s,
                None => {
                    let s = TcpStream::connect(&self.addr).await?;
                    s.set_nodelay(true)?;
                    s
                }
            };
            write_frame(&mut s, &bincode::serialize(req).unwrap()).await?;
            let body = read_frame(&mut s).await?;
            self.stream = Some(s);
            Ok::<_, std::io::Error>(body)
        };
        let body = io.await.map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let r: Result<T, RaftError<NID, E>> = bincode::deserialize(&body).unwrap();
        r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TC> for Conn {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TC>,
        _o: RPCOption,
    ) -> Result<AppendEntriesResponse<NID>, RPCError<NID, BasicNode, RaftError<NID>>> {
        self.call(&Req::Append(rpc)).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TC>,
        _o: RPCOption,
    ) -> Result<InstallSnapshotResponse<NID>, RPCError<NID, BasicNode, RaftError<NID, InstallSnapshotError>>>
    {
        self.call(&Req::Snap(rpc)).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NID>,
        _o: RPCOption,
    ) -> Result<VoteResponse<NID>, RPCError<NID, BasicNode, RaftError<NID>>> {
        self.call(&Req::Vote(rpc)).await
    }
}

// ---------------------------------------------------------------- benchmark
fn cpu_seconds() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

async fn run_load(leader: &Raft, k: usize, warm: Duration, measure: Duration) {
    let phase = Arc::new(AtomicU8::new(0)); // 0 warm-up, 1 measured, 2 stop
    let mut tasks = Vec::new();
    for _ in 0..k {
        let raft = leader.clone();
        let phase = phase.clone();
        tasks.push(tokio::spawn(async move {
            let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
            let mut n = 0u64;
            loop {
                let p = phase.load(Ordering::Relaxed);
                if p == 2 {
                    break;
                }
                let t = Instant::now();
                raft.client_write(vec![0xABu8; 100]).await.expect("client_write");
                let us = t.elapsed().as_micros() as u64;
                if phase.load(Ordering::Relaxed) == 1 && p == 1 {
                    h.saturating_record(us.max(1));
                    n += 1;
                }
            }
            (h, n)
        }));
    }
    tokio::time::sleep(warm).await;
    let (c0, t0) = (cpu_seconds(), Instant::now());
    let io0 = io_counters();
    phase.store(1, Ordering::Relaxed);
    tokio::time::sleep(measure).await;
    phase.store(2, Ordering::Relaxed);
    let (c1, t1) = (cpu_seconds(), Instant::now());
    let io1 = io_counters();
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    let mut n = 0;
    for t in tasks {
        let (th, tn) = t.await.unwrap();
        h.add(th).unwrap();
        n += tn;
    }
    let secs = (t1 - t0).as_secs_f64();
    for id in 1..=3 {
        let (f, e) = (io1[id].0 - io0[id].0, io1[id].1 - io0[id].1);
        eprintln!(
            "  [K={k}] node {id}: fdatasyncs/s={:.0} entries/fdatasync={:.2}",
            f as f64 / (t1 - t0).as_secs_f64(),
            e as f64 / f.max(1) as f64
        );
    }
    let cpu = c1 - c0;
    println!(
        "openraft K={} ops/s={:.0} p50_us={} p99_us={} p999_us={} cpu_s={:.2} cpu_us_per_op={:.1}",
        k,
        n as f64 / secs,
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
        cpu,
        cpu * 1e6 / n.max(1) as f64
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(amain());
}

async fn amain() {
    let base = std::env::var("SPIKE_DATA").unwrap_or_else(|_| format!("{}/data", env!("CARGO_MANIFEST_DIR")));
    let config = Arc::new(
        Config {
            cluster_name: "spike".into(),
            heartbeat_interval: 100,
            election_timeout_min: 1000,
            election_timeout_max: 2000,
            snapshot_policy: SnapshotPolicy::Never,
            ..Default::default()
        }
        .validate()
        .unwrap(),
    );

    let mut listeners = BTreeMap::new();
    let mut nodes = BTreeMap::new();
    for id in 1..=3u64 {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        nodes.insert(id, BasicNode { addr: l.local_addr().unwrap().to_string() });
        listeners.insert(id, l);
    }
    let mut rafts = BTreeMap::new();
    for (id, l) in listeners {
        let dir = format!("{base}/data-{id}");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let raft = Raft::new(id, config.clone(), NetFactory, LogStore::new(id as usize, &dir), Sm::default())
            .await
            .unwrap();
        tokio::spawn(serve(l, raft.clone()));
        rafts.insert(id, raft);
    }
    let leader = rafts[&1].clone();
    leader.initialize(nodes).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let m = leader.metrics().borrow().clone();
        if m.state == ServerState::Leader && m.current_leader == Some(1) {
            break;
        }
        assert!(Instant::now() < deadline, "node 1 did not become leader: {:?}", m);
        if m.state == ServerState::Follower {
            let _ = leader.trigger().elect().await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "node 1 is leader; flush mode={}; runtime=multi_thread(2 workers)",
        std::env::var("FLUSH").unwrap_or("inline".into())
    );

    let ks: Vec<usize> = std::env::var("KS")
        .map(|s| s.split(',').map(|x| x.parse().unwrap()).collect())
        .unwrap_or(vec![1, 8, 64]);
    let warm = Duration::from_secs(std::env::var("WARM_S").map(|s| s.parse().unwrap()).unwrap_or(3));
    let meas = Duration::from_secs(std::env::var("MEAS_S").map(|s| s.parse().unwrap()).unwrap_or(10));
    for k in ks {
        run_load(&leader, k, warm, meas).await;
    }
    for r in rafts.values() {
        let _ = r.shutdown().await;
    }
}
