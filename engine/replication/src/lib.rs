//! One replica of one replicated partition, as a sans-IO state machine.
//!
//! Owns: the Raft state of one partition on one node — its in-memory view of the log (the
//! entries since the last compaction point, what raft-rs reads through [`raft::Storage`]), the
//! hard state (term, vote, commit), the voters and how they change, and the translation of
//! raft-rs's `Ready` into a [`Work`] the shell carries out: messages that may leave now,
//! entries and hard state to make durable, messages that may leave only once those are
//! durable, entries now committed by a
//! majority (Kafka's high-watermark rule: a commit, a join result or an acks=all produce is
//! answered only once its entry is in here), and role changes (a coordinator loads its groups
//! when it becomes leader and drops them when it stops being one).
//!
//! Must not: touch a file, a socket, a task or a clock. Time is ticks the shell counts
//! ([`Replica::tick`]), durability is the shell's report ([`Replica::persisted`]), the network
//! is [`encode`] / [`decode`] plus whatever carries the bytes. The broker's glommio shard and
//! the deterministic simulator (tests/cluster_sim.rs) drive this same type, as they drive
//! `coordinator::partition_core`.
//!
//! Consensus is tikv's `raft` crate (raft-rs, the library TiKV runs in production), not our
//! own: this crate only adapts it. Why raft-rs and not openraft is measured in
//! `benches/raft-spike` and written in `docs/replication.md`: raft-rs is a plain state machine
//! stepped by its caller, which is what a thread-per-core shard and a deterministic simulator
//! need, while openraft owns its own tasks and timers on an async runtime.
//!
//! The protocol, from the shell's side:
//! 1. Feed it: [`Replica::step`] for each message from a peer, [`Replica::tick`] every tick
//!    interval, [`Replica::propose`] for a record batch the leader wants replicated.
//! 2. [`Replica::work`] gives at most one [`Work`] at a time. The shell sends
//!    [`Work::send_now`], makes [`Work::entries`] durable (appended at their indexes, cutting
//!    whatever the log held from the first of them on) together with [`Work::hard_state`], and
//!    then calls [`Replica::persisted`], which hands back what waited for durability: more
//!    messages and more committed entries. Committed entries (in [`Work::committed`] and in
//!    what `persisted` returns) are applied in index order.
//! 3. On restart, [`Replica::restart`] takes what the shell found durable.
//! 4. Log compaction: once the shell's state machine has a snapshot of everything up to an
//!    applied index, and the shell has made it durable, [`Replica::compact`] drops the entries
//!    it covers; a follower too far behind is then sent the snapshot instead of the entries,
//!    and a [`Work::snapshot`] it receives replaces its log and its state machine.
//! 5. Membership: [`Replica::change_voters`] on the leader moves the voters, learners first and
//!    one configuration change at a time; [`Work::membership`] says when this replica's changed,
//!    [`Work::must_sync`] that the write must sync the hard state, and [`Replica::join`] starts
//!    a new node's replica. Why each change waits for the last to be applied by majorities, and
//!    why messages carry an epoch, is at [`Replica::conf_epoch`] and in `docs/replication.md`.
//!
//! [`partition::ReplicatedPartition`] puts the group coordinator's partition core on top: the
//! core runs on the leader only, and its "durable" is "committed by a majority".
//! [`topic::TopicReplica`] is the Raft side of a replicated topic partition, whose state machine is
//! the partition's topic log (driven by the broker's shell, `engine::data::replica`).
//! [`metadata::MetadataState`] is the state machine of the cluster's metadata log (topics, their
//! ids and the node leading each partition), applied alike on every node (the broker's shell is
//! `engine::runtime::metadata_log`).

pub mod metadata;
pub mod partition;
pub mod topic;

use raft::eraftpb::{
    ConfChange, ConfChangeSingle, ConfChangeTransition, ConfChangeType, ConfChangeV2, ConfState,
    Entry, EntryType, HardState, Message, MessageType, Snapshot,
};
use raft::{Config, GetEntriesContext, RaftState, RawNode, StateRole, Storage, StorageError};

pub use raft::eraftpb;

/// Node ids as Kafka's `node.id`: positive; raft-rs reserves 0 for "none".
pub type NodeId = u64;
/// The context of a follower's ReadIndex round after its start ([`Replica::caught_up`]); a
/// leader's own rounds carry an 8-byte tick number, so the two never mix.
const START_READ_CTX: &[u8] = b"start";
/// Ticks between two such rounds while none answered.
const START_READ_EVERY_TICKS: u64 = 5;

/// Ticks a follower waits without hearing from a leader before it stands for election (raft-rs
/// randomizes in `[ELECTION_TICKS, 2 × ELECTION_TICKS)`). With a 100 ms tick: 1–2 s, Kafka's
/// `controller.quorum.election.timeout.ms` default is 1 s.
pub const ELECTION_TICKS: usize = 10;
/// A leader sends raft-rs's own heartbeats every other tick. Its lease rounds
/// ([`Replica::tick`]) already send a heartbeat to every follower each tick once it has
/// committed an entry of its term (raft-rs holds a ReadIndex back until then), and followers
/// reset their election timer on either; the plain heartbeat is what keeps followers quiet in
/// that first window, and every other tick is 5x inside the election timeout.
pub const HEARTBEAT_TICKS: usize = 2;
/// The largest append message: bounds what one message from a leader carries.
pub const MAX_MESSAGE_BYTES: u64 = 1 << 20;
/// Append messages in flight to one follower: bounds what a slow follower can queue.
pub const MAX_INFLIGHT_APPENDS: usize = 256;
/// How long, in ticks after a heartbeat round a majority answered was sent, a leader may act as
/// the partition's coordinator. A follower that heard from the leader grants no vote for
/// ELECTION_TICKS of its own ticks (raft-rs's `in_lease` with `check_quorum`), so no other leader
/// can exist before that; two ticks less covers the two clocks' tick phases. Assumes the nodes'
/// clocks run at the same rate (ticks of the same length), as every Raft lease does.
pub const LEASE_TICKS: u64 = ELECTION_TICKS as u64 - 2;
/// How long one tick is: the shell ticks every `TICK_MS` (and a late timer only makes ticks
/// longer). The lease is measured on the shell's clock, not in ticks: a leader whose thread
/// stalls counts no ticks while it stalls, and a lease counted in its own ticks would outlive
/// the followers' promise (they count theirs).
pub const TICK_MS: i64 = 100;
/// [`LEASE_TICKS`] on the shell's clock.
pub const LEASE_MS: i64 = LEASE_TICKS as i64 * TICK_MS;

/// The role of this replica, as the coordinator and the data path need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Role {
    pub term: u64,
    /// The leader this replica knows of in `term`, if any.
    pub leader: Option<NodeId>,
    /// This replica is the leader of `term`: it may answer as coordinator / partition leader.
    pub is_leader: bool,
}

/// Why a proposal was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProposeError {
    /// Only the leader takes proposals: the client is told NOT_COORDINATOR /
    /// NOT_LEADER_OR_FOLLOWER and looks the leader up again (`leader` is a hint).
    NotLeader { leader: Option<NodeId> },
    /// The leader is handing leadership over, or raft-rs dropped it for another reason.
    Dropped,
}

/// Why a membership change was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeError {
    /// Only the leader changes the membership (`leader` is a hint).
    NotLeader { leader: Option<NodeId> },
    /// The change names no voter, node 0, or more than [`MAX_VOTERS`] nodes.
    BadMembership,
}

/// The most voters a partition's membership may name: bounds a configuration (and what a
/// membership change carries).
pub const MAX_VOTERS: usize = 64;

/// A learner counts as caught up, and may become a voter, once its log is within this many
/// entries of the leader's commit index (it then tips no majority behind a slow catch-up).
pub const CATCH_UP_ENTRIES: u64 = 128;

/// Who replicates a partition, as raft-rs's configuration says: the voters (with the outgoing
/// voters while a joint-consensus change is under way, when a majority of each is needed) and
/// the learners (nodes catching up before they become voters; they vote in nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Membership {
    pub voters: Vec<NodeId>,
    /// Non-empty only while the configuration is joint (`voters` is the incoming side).
    pub outgoing: Vec<NodeId>,
    pub learners: Vec<NodeId>,
}

impl Membership {
    fn of(cs: &ConfState) -> Membership {
        let sorted = |v: &[u64]| {
            let mut v = v.to_vec();
            v.sort_unstable();
            v
        };
        let mut learners = sorted(cs.get_learners());
        learners.extend(cs.get_learners_next());
        learners.sort_unstable();
        learners.dedup();
        Membership {
            voters: sorted(cs.get_voters()),
            outgoing: sorted(cs.get_voters_outgoing()),
            learners,
        }
    }

    /// A node that votes in either side of the configuration.
    pub fn is_voter(&self, id: NodeId) -> bool {
        self.voters.contains(&id) || self.outgoing.contains(&id)
    }

    /// A node that holds a replica: a voter or a learner.
    pub fn contains(&self, id: NodeId) -> bool {
        self.is_voter(id) || self.learners.contains(&id)
    }

    /// The configuration is joint (a change between two voter sets is under way).
    pub fn is_joint(&self) -> bool {
        !self.outgoing.is_empty()
    }
}

/// What the shell must do, in order. See the protocol in the crate's documentation.
#[derive(Debug, Default)]
pub struct Work {
    /// May leave before anything is durable (a leader's appends go out in parallel with its
    /// own write, as in the Raft thesis §10.2.1).
    pub send_now: Vec<Message>,
    /// To append durably, replacing whatever the log held from the first entry's index on.
    pub entries: Vec<Entry>,
    /// For each configuration change among `entries`: its index and the voters of the
    /// configuration it leads to (the incoming side while joint), which the shell writes beside
    /// it for Kafka's tools to read (a KRaft voters record).
    pub change_voters: Vec<(u64, Vec<NodeId>)>,
    /// To store durably with the entries, if it changed.
    pub hard_state: Option<HardState>,
    /// The hard state must reach the disk with this write even if only its commit index
    /// changed: that commit index covers a configuration change this replica applied, and
    /// after a crash the replica must not come back under the configuration before it (its
    /// peers were told it applied that change, see [`Replica::conf_epoch`]).
    pub must_sync: bool,
    /// Entries committed by a majority, to apply now (they are already durable here).
    pub committed: Vec<Entry>,
    /// The membership changed: a committed configuration change was applied (the shell talks
    /// to new replicas from now on, and drops this one once it is no longer a member).
    pub membership: Option<Membership>,
    /// The role changed (election won or lost, a new leader heard of).
    pub role: Option<Role>,
    /// A leader's snapshot to install, before `entries`: the shell makes it durable in place of
    /// its whole log (Raft's InstallSnapshot discards the log) and replaces its state machine
    /// with it.
    pub snapshot: Option<LogSnapshot>,
}

/// A state machine's snapshot: everything applied up to `index` (whose entry has `term`), as
/// `data` in the state machine's own encoding, and the partition's membership at `index`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogSnapshot {
    pub index: u64,
    pub term: u64,
    pub data: Vec<u8>,
    /// The configuration as of `index`; None: the voters the replica was started with (a
    /// shell whose partitions never change membership need not store it).
    pub conf: Option<SnapshotConf>,
}

/// The configuration a snapshot carries: raft-rs's, and the index of the change that made it
/// (0: the partition's first voters), which replicas compare (see [`Replica::conf_epoch`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SnapshotConf {
    pub state: ConfState,
    pub index: u64,
}

impl SnapshotConf {
    /// How a shell stores it beside its snapshot: the index (8 bytes, big-endian), then
    /// raft-rs's ConfState in its protobuf encoding.
    pub fn encode(&self) -> Vec<u8> {
        use protobuf::Message as _;
        let mut b = self.index.to_be_bytes().to_vec();
        b.extend(
            self.state
                .write_to_bytes()
                .expect("a ConfState always encodes"),
        );
        b
    }

    /// What [`SnapshotConf::encode`] wrote; an error saying why for anything else.
    pub fn decode(bytes: &[u8]) -> Result<SnapshotConf, String> {
        use protobuf::Message as _;
        let (index, state) = bytes
            .split_first_chunk::<8>()
            .ok_or_else(|| format!("{} bytes, shorter than a configuration", bytes.len()))?;
        let state = ConfState::parse_from_bytes(state).map_err(|e| e.to_string())?;
        if state.voters.is_empty() {
            return Err("a configuration without voters".into());
        }
        Ok(SnapshotConf {
            state,
            index: u64::from_be_bytes(*index),
        })
    }
}

/// What waited for the shell's durable write: send and apply, in this order.
#[derive(Debug, Default)]
pub struct AfterPersist {
    pub send: Vec<Message>,
    pub committed: Vec<Entry>,
}

/// What the shell found durable at restart.
#[derive(Debug, Clone, Default)]
pub struct Durable {
    pub hard_state: HardState,
    /// The snapshot the log was compacted to, if any.
    pub snapshot: Option<LogSnapshot>,
    /// Contiguous, from the snapshot's index + 1 (index 1 without one).
    pub entries: Vec<Entry>,
}

/// raft-rs's view of our log: the entries the shell made durable, the hard state, the voters.
/// Plain fields, no locks: it lives on the one shard that owns the partition.
#[derive(Debug)]
pub struct Log {
    entries: Vec<Entry>,
    hard_state: HardState,
    /// The configuration as of the snapshot (or the voters the replica was started with), and
    /// the index of the change that made it (0: the first voters).
    base_conf: ConfState,
    base_conf_index: u64,
    /// The configurations applied since, by index of their entry, oldest first.
    confs: Vec<(u64, ConfState)>,
    /// What the entries before the first one were compacted to (index 0: never compacted).
    snapshot: Snapshot,
    /// raft-rs asked for a snapshot for a member the stored one's configuration does not name
    /// (a node added since it was taken, which refuses a snapshot that leaves it out): the next
    /// compaction is due whatever the log's size ([`Replica::snapshot_wanted`]).
    wanted: std::cell::Cell<bool>,
}

impl Log {
    fn first_index(&self) -> u64 {
        self.snapshot.get_metadata().index + 1
    }

    fn last_index(&self) -> u64 {
        self.entries
            .last()
            .map_or(self.snapshot.get_metadata().index, |e| e.index)
    }

    /// The snapshot the log starts after, if it was ever compacted, as raft-rs sends it (its
    /// data starts with the configuration's epoch: [`Log::snapshot_data`] is the shell's part).
    fn snapshot(&self) -> Option<&Snapshot> {
        (self.snapshot.get_metadata().index > 0).then_some(&self.snapshot)
    }

    /// The shell's data in the snapshot the log starts after, if it was ever compacted.
    pub fn snapshot_data(&self) -> Option<&[u8]> {
        self.snapshot().map(|s| split_snapshot_data(&s.data).1)
    }

    /// The configuration in force after applying the entry at `index`, and the index of the
    /// change that made it.
    fn conf_at(&self, index: u64) -> (u64, &ConfState) {
        self.confs
            .iter()
            .rev()
            .find(|(i, _)| *i <= index)
            .map_or((self.base_conf_index, &self.base_conf), |(i, c)| (*i, c))
    }

    /// The configuration in force now, and the index of the change that made it (0: the first
    /// voters).
    fn conf(&self) -> (u64, &ConfState) {
        self.conf_at(u64::MAX)
    }

    /// raft-rs's snapshot of the shell's `data` at `index`. Its data travels as the index of
    /// the configuration change in force (8 bytes) and then the shell's data, so a replica
    /// that installs it knows its configuration's epoch.
    fn snapshot_of(&self, index: u64, term: u64, data: Vec<u8>) -> Snapshot {
        let (conf_index, conf) = self.conf_at(index);
        let conf = conf.clone();
        let mut bytes = Vec::with_capacity(8 + data.len());
        bytes.extend_from_slice(&conf_index.to_be_bytes());
        bytes.extend_from_slice(&data);
        let mut snap = Snapshot {
            data: bytes.into(),
            ..Default::default()
        };
        let meta = snap.mut_metadata();
        meta.index = index;
        meta.term = term;
        meta.set_conf_state(conf);
        snap
    }

    /// A leader's snapshot replaces the whole log (Raft's InstallSnapshot).
    fn install(&mut self, snap: Snapshot) {
        let (index, term) = (snap.get_metadata().index, snap.get_metadata().term);
        assert!(
            index >= self.snapshot.get_metadata().index,
            "snapshot at {index} older than ours"
        );
        self.entries.clear();
        self.hard_state.commit = self.hard_state.commit.max(index);
        self.hard_state.term = self.hard_state.term.max(term);
        // The snapshot's configuration replaces ours (raft-rs's tracker takes it too).
        self.base_conf = snap.get_metadata().get_conf_state().clone();
        self.base_conf_index = split_snapshot_data(&snap.data).0;
        self.confs.clear();
        self.snapshot = snap;
    }

    /// Append what the shell made durable, cutting a conflicting suffix (Raft §5.3).
    fn append(&mut self, ents: &[Entry]) {
        let Some(first) = ents.first() else { return };
        assert!(
            first.index >= self.first_index() && first.index <= self.last_index() + 1,
            "append at {} leaves a gap after {}",
            first.index,
            self.last_index()
        );
        let keep = (first.index - self.first_index()) as usize;
        self.entries.truncate(keep);
        self.entries.extend_from_slice(ents);
    }

    /// The entries after the snapshot (durable, or being made durable by the shell).
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }
}

impl Storage for Log {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState {
            hard_state: self.hard_state.clone(),
            conf_state: self.conf().1.clone(),
        })
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low < self.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        assert!(
            high <= self.last_index() + 1,
            "entries up to {high} past {}",
            self.last_index()
        );
        let off = self.first_index();
        let mut out = self.entries[(low - off) as usize..(high - off) as usize].to_vec();
        raft::util::limit_size(&mut out, max_size.into());
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx == 0 {
            return Ok(0);
        }
        if idx == self.snapshot.get_metadata().index {
            return Ok(self.snapshot.get_metadata().term);
        }
        if idx < self.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if idx > self.last_index() {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        Ok(self.entries[(idx - self.first_index()) as usize].term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(Log::first_index(self))
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(Log::last_index(self))
    }

    fn snapshot(&self, request_index: u64, to: u64) -> raft::Result<Snapshot> {
        // raft-rs asks only for a follower that needs entries we compacted away, so a snapshot
        // exists; one older than asked for cannot help (the next compaction makes a newer one).
        // A replica restores only a snapshot whose configuration names it (raft-rs's
        // `restore`): one taken before a node was added cannot bring that node up, so a newer
        // one is asked of the shell.
        let names = |s: &Snapshot| {
            let cs = s.get_metadata().get_conf_state();
            cs.get_voters()
                .iter()
                .chain(cs.get_learners())
                .chain(cs.get_voters_outgoing())
                .chain(cs.get_learners_next())
                .any(|id| *id == to)
        };
        match self.snapshot() {
            Some(s) if s.get_metadata().index >= request_index && names(s) => Ok(s.clone()),
            Some(s) if !names(s) => {
                self.wanted.set(true);
                Err(raft::Error::Store(
                    StorageError::SnapshotTemporarilyUnavailable,
                ))
            }
            _ => Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            )),
        }
    }
}

/// One replica of one partition.
pub struct Replica {
    raw: RawNode<Log>,
    /// The Ready handed out as [`Work`] and not yet reported durable: its number, and the
    /// messages that may leave only once it is durable (votes, append acknowledgements).
    in_flight: Option<(u64, Vec<Message>)>,
    role: Role,
    /// Ticks since this replica started.
    ticks: u64,
    /// While leading: when (the shell's clock, ms) the newest heartbeat round a majority
    /// answered was sent (raft-rs's ReadIndex, with the tick as its context).
    confirmed_at: Option<i64>,
    /// While leading: the rounds sent and not yet answered, (tick, when), oldest first; bounded
    /// (a round older than the lease is worth nothing).
    rounds: std::collections::VecDeque<(u64, i64)>,
    /// On a follower: the leader's commit index as a ReadIndex round after this replica's
    /// start reported it ([`Replica::caught_up`]); None until one answered.
    read_since_start: Option<u64>,
    /// [`Replica::track_caught_up`] was called: a follower asks the leader for its commit index.
    tracks_caught_up: bool,
    /// While leading: followers sent a snapshot, and the tick it was sent at. A snapshot the
    /// network lost would pause that follower for good (raft-rs waits for its answer or a
    /// `report_snapshot`), so one unanswered for [`SNAPSHOT_RETRY_TICKS`] is reported failed
    /// and sent again.
    snapshots_sent: Vec<(NodeId, u64)>,
    /// The index of the last configuration change applied: a restart applies the committed ones
    /// before raft-rs starts, and they are not applied again when handed out with the rest.
    conf_applied: u64,
    /// While leading: the voters the caller asked for ([`Replica::change_voters`]), reached one
    /// configuration change at a time; dropped when leadership is.
    target: Option<Vec<NodeId>>,
    /// The term in which this leader handed leadership over (it was removed): a transferee
    /// campaigns without waiting for the followers' lease, so the lease is void for the rest of
    /// the term.
    lease_void_term: Option<u64>,
    /// Committed configuration changes that did not decode or apply (every replica sees the same
    /// bytes over the same configuration, so every one skips the same entries).
    bad_conf_changes: u64,
    /// The configuration epoch each member last told this replica (in every message it sends):
    /// a leader starts the next change only once a majority of each side of the configuration
    /// has applied the current one. Only members are recorded (bounded by [`MAX_VOTERS`] and
    /// the learners).
    peer_epochs: std::collections::HashMap<NodeId, u64>,
    /// The tick each member was last heard from (any message): a handover goes only to a
    /// member heard from within [`HEARD_TICKS`]. Only members are recorded, as above.
    heard_at: std::collections::HashMap<NodeId, u64>,
    /// The term in which this leader handed leadership to its preferred replica
    /// ([`Replica::hand_to_preferred`]); if raft-rs gives the handover up (the transferee did
    /// not take over within an election timeout) this leader steps down, its lease being void.
    handing_to_preferred: Option<u64>,
    /// While leading: the tick each member last held every entry this leader had (members
    /// only, as above).
    caught_up_at: std::collections::HashMap<NodeId, u64>,
    /// Election timeouts drawn from a seed ([`Replica::seed_elections`]; the simulations), or
    /// None: raft-rs's own draws (the broker).
    elections: Option<SeededElections>,
}

/// A replica's election timeouts drawn from a seed rather than from raft-rs's unseeded
/// `rand::thread_rng()` (`RaftCore::reset_randomized_election_timeout`), so that a simulation
/// run again with a failing seed elects the same leaders at the same steps.
///
/// raft-rs draws a new timeout in `RaftCore::reset`, which only `become_follower`,
/// `become_candidate` and `become_leader` call, and each of their callers changes the term or
/// the role. So after every call that can reach them (raft-rs's `tick`, `step` and `campaign`,
/// and this crate's own `become_follower`s) the replica compares (term, role) with what it last
/// saw and, when they moved, replaces raft-rs's draw with one of its own from the same range.
/// The timeout is read only by raft-rs's `tick`, which so never sees raft-rs's own draw.
struct SeededElections {
    /// splitmix64's state.
    state: u64,
    seen: (u64, StateRole),
}

impl SeededElections {
    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A handover to a preferred replica goes only to one heard from within this many ticks.
pub const HEARD_TICKS: u64 = 3;

/// Ticks a leader waits for a follower to answer a snapshot before sending it again.
pub const SNAPSHOT_RETRY_TICKS: u64 = 3 * ELECTION_TICKS as u64;

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica")
            .field("id", &self.raw.raft.id)
            .field("role", &self.role)
            .finish()
    }
}

fn config(id: NodeId, applied: u64) -> Config {
    Config {
        id,
        election_tick: ELECTION_TICKS,
        heartbeat_tick: HEARTBEAT_TICKS,
        max_size_per_msg: MAX_MESSAGE_BYTES,
        max_inflight_msgs: MAX_INFLIGHT_APPENDS,
        // A leader that has not heard from a majority for an election timeout steps down, so a
        // leader cut off from the others stops acting as coordinator (Raft thesis §6.2).
        check_quorum: true,
        // A node that rejoins after a partition does not disrupt a working leader (§9.6).
        pre_vote: true,
        applied,
        ..Config::default()
    }
}

impl Replica {
    /// A new replica of a partition whose voters are `voters` (this node among them), with an
    /// empty log.
    pub fn new(id: NodeId, voters: &[NodeId]) -> Result<Self, raft::Error> {
        assert!(
            voters.contains(&id),
            "node {id} is not among the voters {voters:?}"
        );
        Self::restart(id, voters, Durable::default())
    }

    /// A new, empty replica on a node being added to a partition whose log started with the
    /// voters `initial` (its first replicas, as its creation recorded them): the configuration
    /// changes in the leader's log, or its snapshot's configuration, apply on top of those. It
    /// stands for no election until a configuration names it a voter.
    ///
    /// A replica id is never a member twice: a node whose replica was removed, or whose disk
    /// was lost, comes back under a new id. A replica that forgot its log and its votes under
    /// its old id could hand a majority to a stale node that never learnt it was removed.
    pub fn join(id: NodeId, initial: &[NodeId]) -> Result<Self, raft::Error> {
        assert!(
            !initial.contains(&id),
            "node {id} was one of the partition's first voters: it cannot join it empty"
        );
        Self::restart(id, initial, Durable::default())
    }

    /// A replica restarted from what the shell found durable. Committed entries are handed out
    /// again from the start of the log (the shell rebuilds its state machine by applying them).
    /// `voters` is the configuration the partition started with; a snapshot's own and the
    /// committed configuration changes in the log replace it.
    pub fn restart(id: NodeId, voters: &[NodeId], durable: Durable) -> Result<Self, raft::Error> {
        assert!(id != 0, "node ids are positive");
        for w in durable.entries.windows(2) {
            assert_eq!(w[0].index + 1, w[1].index, "durable log is not contiguous");
        }
        let mut log = Log {
            entries: Vec::new(),
            hard_state: durable.hard_state,
            base_conf: ConfState::from((voters.to_vec(), vec![])),
            base_conf_index: 0,
            confs: Vec::new(),
            snapshot: Snapshot::default(),
            wanted: Default::default(),
        };
        if let Some(s) = durable.snapshot {
            if let Some(conf) = s.conf {
                log.base_conf = conf.state;
                log.base_conf_index = conf.index;
            }
            log.snapshot = log.snapshot_of(s.index, s.term, s.data);
            // A snapshot holds only committed entries.
            log.hard_state.commit = log.hard_state.commit.max(s.index);
        }
        if let Some(first) = durable.entries.first() {
            assert_eq!(
                first.index,
                log.first_index(),
                "durable log does not start right after its snapshot"
            );
        }
        log.entries = durable.entries;
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let cfg = config(id, 0);
        cfg.validate()?;
        let raw = RawNode::new(&cfg, log, &logger)?;
        let role = Role {
            term: raw.raft.term,
            leader: None,
            is_leader: false,
        };
        let mut replica = Replica {
            raw,
            in_flight: None,
            role,
            ticks: 0,
            confirmed_at: None,
            rounds: Default::default(),
            read_since_start: None,
            tracks_caught_up: false,
            snapshots_sent: Vec::new(),
            conf_applied: 0,
            target: None,
            lease_void_term: None,
            bad_conf_changes: 0,
            peer_epochs: Default::default(),
            heard_at: Default::default(),
            handing_to_preferred: None,
            caught_up_at: Default::default(),
            elections: None,
        };
        // The committed configuration changes take effect before raft-rs ticks or counts a
        // vote: a node must not campaign, or count a majority, with the configuration of its
        // snapshot when its log says the voters changed since.
        let commit = replica.raw.raft.raft_log.committed;
        let changes: Vec<Entry> = replica
            .log()
            .entries
            .iter()
            .take_while(|e| e.index <= commit)
            .filter(|e| is_conf_change(e))
            .cloned()
            .collect();
        for e in &changes {
            replica.apply_conf_entry(e);
        }
        // Everything up to the commit index is applied as far as the configuration goes.
        replica.conf_applied = replica.conf_applied.max(commit);
        Ok(replica)
    }

    /// The configuration epoch: the log index of the change that made the configuration this
    /// replica has applied (0: the partition's first voters). Every message this replica sends
    /// carries it, and it never goes back (a change's commit index is synced before any message
    /// carries its epoch: [`Work::must_sync`]).
    ///
    /// Why: raft-rs applies a configuration change when it commits, not when it is appended, so
    /// a replica that missed a change's commit keeps the configuration before it. Two such
    /// replicas, cut off from the rest, could form a majority of that older configuration and
    /// elect a leader while the current configuration's majority elects another (the
    /// simulation found it within 40 seeds). So a replica grants no vote to a candidate whose
    /// epoch is older than its own, and a leader proposes the next change only once a majority
    /// of each side of the current configuration has applied it: every majority of the previous
    /// configuration then holds a replica that refuses a stale candidate. (A stale candidate can
    /// still win while the current change is the newest, but then every commit on either side
    /// needs a majority of the older configuration, so Raft's own overlap holds.)
    pub fn conf_epoch(&self) -> u64 {
        self.log().conf().0
    }

    /// Tag messages leaving now with this replica's epoch: two bytes `RE` and the epoch ahead
    /// of raft-rs's own context (which vote requests and heartbeats use).
    fn tag(&self, msgs: &mut [Message]) {
        let epoch = self.conf_epoch();
        for m in msgs {
            let mut ctx = Vec::with_capacity(EPOCH_TAG.len() + 8 + m.context.len());
            ctx.extend_from_slice(&EPOCH_TAG);
            ctx.extend_from_slice(&epoch.to_be_bytes());
            ctx.extend_from_slice(&m.context);
            m.context = ctx.into();
        }
    }

    /// The epoch a message was tagged with, taken off its context. None for an untagged one.
    fn untag(m: &mut Message) -> Option<u64> {
        let ctx = m.get_context();
        if ctx.len() < EPOCH_TAG.len() + 8 || ctx[..EPOCH_TAG.len()] != EPOCH_TAG {
            return None;
        }
        let epoch = u64::from_be_bytes(ctx[2..10].try_into().expect("8 bytes"));
        let rest = ctx[10..].to_vec();
        m.context = rest.into();
        Some(epoch)
    }

    /// The epoch a member last told, or this replica's own.
    fn epoch_of(&self, id: NodeId) -> u64 {
        if id == self.id() {
            self.conf_epoch()
        } else {
            self.peer_epochs.get(&id).copied().unwrap_or(0)
        }
    }

    /// A majority of each side of the configuration has applied it.
    fn applied_by_majorities(&self, m: &Membership) -> bool {
        let epoch = self.conf_epoch();
        [&m.voters, &m.outgoing].into_iter().all(|side| {
            side.is_empty()
                || side
                    .iter()
                    .filter(|&&id| self.epoch_of(id) >= epoch)
                    .count()
                    * 2
                    > side.len()
        })
    }

    /// Apply a committed configuration change entry once (a restart applies the committed
    /// ones before they are handed out again). The membership it leads to, if it applied.
    fn apply_conf_entry(&mut self, e: &Entry) -> Option<Membership> {
        if e.index <= self.conf_applied {
            return None;
        }
        self.conf_applied = e.index;
        let cc = match decode_conf_change(e) {
            Some(cc) => cc,
            None => {
                self.bad_conf_changes += 1;
                return None;
            }
        };
        let cs = match self.raw.apply_conf_change(&cc) {
            Ok(cs) => cs,
            Err(_) => {
                // Not applicable to this configuration (raft-rs's leader refuses such a
                // proposal, so only a broken peer writes one): skipped alike everywhere.
                self.bad_conf_changes += 1;
                return None;
            }
        };
        let membership = Membership::of(&cs);
        self.raw.mut_store().confs.push((e.index, cs));
        if self.raw.raft.state == StateRole::Leader && !membership.is_voter(self.id()) {
            // Removed while leading (a change an earlier leader proposed; this crate's own
            // leaders hand leadership over before removing themselves). raft-rs keeps a removed
            // leader leading, untested, and panics when it next persists its own entries (it
            // has no progress of its own any more): step down now, after telling the most
            // up-to-date voter to campaign at once if it has everything (MsgTimeoutNow);
            // otherwise the voters elect one within an election timeout.
            if let Some(to) = self.best_voter(&membership.voters) {
                self.hand_over(to);
            }
            let term = self.raw.raft.term;
            self.raw.raft.become_follower(term, raft::INVALID_ID);
            self.redraw_election_timeout();
        }
        Some(membership)
    }

    /// The voter among `voters` (not this node) whose log is longest: who takes over.
    fn best_voter(&self, voters: &[NodeId]) -> Option<NodeId> {
        let me = self.id();
        self.raw
            .raft
            .prs()
            .iter()
            .filter(|(id, _)| **id != me && voters.contains(id))
            .max_by_key(|(id, pr)| (pr.matched, std::cmp::Reverse(**id)))
            .map(|(id, _)| *id)
    }

    /// Hand leadership to `to` (raft-rs's leadership transfer). The transferee campaigns
    /// without waiting out the lease the followers owe this leader, so this leader's lease
    /// ends here for the rest of its term.
    fn hand_over(&mut self, to: NodeId) {
        self.lease_void_term = Some(self.raw.raft.term);
        self.confirmed_at = None;
        self.raw.transfer_leader(to);
    }

    /// The partition's membership as this replica has applied it.
    pub fn membership(&self) -> Membership {
        Membership::of(&self.raw.raft.prs().conf().to_conf_state())
    }

    /// The membership after the entry at `index` applied.
    pub fn membership_at(&self, index: u64) -> Membership {
        Membership::of(self.log().conf_at(index).1)
    }

    /// The configuration after the entry at `index` applied, as a snapshot at `index` stores it.
    pub fn conf_at(&self, index: u64) -> SnapshotConf {
        let (index, state) = self.log().conf_at(index);
        SnapshotConf {
            state: state.clone(),
            index,
        }
    }

    /// Committed configuration changes skipped because they did not decode or apply.
    pub fn bad_conf_changes(&self) -> u64 {
        self.bad_conf_changes
    }

    /// On the leader: move the partition's voters to `voters`, one configuration change at a
    /// time as ticks come — new nodes join as learners first and become voters only once
    /// caught up (it answered, holds what the leader compacted, and is within [`CATCH_UP_ENTRIES`] of
    /// the commit index), so adding a replica never
    /// makes a majority wait for a copy of the whole log; then one joint-consensus change
    /// (raft-rs's ConfChangeV2, left automatically) adds them and removes the voters not named,
    /// so a majority of the old and of the new voters holds every entry committed across it.
    /// A leader that removes itself hands leadership to another voter. The target is dropped
    /// if this replica stops leading: the caller asks the new leader again.
    pub fn change_voters(&mut self, voters: &[NodeId]) -> Result<(), ChangeError> {
        if self.raw.raft.state != StateRole::Leader {
            return Err(ChangeError::NotLeader {
                leader: self.leader_hint(),
            });
        }
        let mut target = voters.to_vec();
        target.sort_unstable();
        target.dedup();
        if target.is_empty() || target.contains(&0) || target.len() > MAX_VOTERS {
            return Err(ChangeError::BadMembership);
        }
        self.target = Some(target);
        self.advance_membership();
        Ok(())
    }

    /// On the leader, once no change is under way: move the partition's voters to the cluster's
    /// nodes, `members` and `removed` as this node's metadata log has applied them, through
    /// [`Self::change_voters`] (a member missing from the group joins as a learner first and
    /// becomes a voter once caught up; a removed node leaves). True if a change started. Every
    /// node calls it on every tick and only the leader acts.
    ///
    /// Only a node in `removed` is taken out, never one merely missing from `members`: a
    /// leader whose metadata log lags (a node replaying it, or one that has not applied a node's
    /// addition yet) must not undo a change another leader made, and a node id is added once
    /// and removed once, so a lagging view only delays either. Nothing happens when no member
    /// would be left in the partition.
    ///
    /// A change under way toward another target is redirected: a partition moved to a node that
    /// never catches up (down, cut off) would otherwise keep its leader waiting for it forever,
    /// and a later move (or its cancellation) would never start.
    pub fn follow_members(&mut self, members: &[NodeId], removed: &[NodeId]) -> bool {
        if self.raw.raft.state != StateRole::Leader {
            return false;
        }
        let m = self.membership();
        let stale = m
            .voters
            .iter()
            .chain(&m.learners)
            .any(|id| removed.contains(id));
        let missing = members
            .iter()
            .any(|id| !removed.contains(id) && !m.voters.contains(id));
        let mut target: Vec<NodeId> = m
            .voters
            .iter()
            .chain(members)
            .copied()
            .filter(|id| !removed.contains(id))
            .collect();
        target.sort_unstable();
        target.dedup();
        match &self.target {
            Some(t) if *t == target => return false,
            Some(_) => {}
            None if !self.membership_settled() || (!stale && !missing) => return false,
            None => {}
        }
        !target.is_empty() && self.change_voters(&target).is_ok()
    }

    /// On the leader: move the partition's voters to exactly `set`, less `removed` (a partition
    /// with replicas of its own, `metadata::PlacedTopic::replicas`): a node the set names joins,
    /// as a learner until caught up, and every voter or learner it does not name leaves, where
    /// [`Self::follow_members`] only ever takes out a removed node. A change under way is
    /// redirected as there. True if a change started.
    pub fn follow_set(&mut self, set: &[NodeId], removed: &[NodeId]) -> bool {
        let m = self.membership();
        let mut off = removed.to_vec();
        off.extend(
            m.voters
                .iter()
                .chain(&m.learners)
                .filter(|n| !set.contains(n)),
        );
        self.follow_members(set, &off)
    }

    /// On the leader: every member's log as far as the leader knows it matches its own (its own
    /// entry is its last index), by node id. Empty on a follower, which does not track others.
    pub fn matched(&self) -> Vec<(NodeId, u64)> {
        if self.raw.raft.state != StateRole::Leader {
            return Vec::new();
        }
        let me = self.id();
        let last = self.last_index();
        let mut out: Vec<(NodeId, u64)> = self
            .raw
            .raft
            .prs()
            .iter()
            .map(|(id, pr)| (*id, if *id == me { last } else { pr.matched }))
            .collect();
        out.sort_unstable();
        out
    }

    /// On the leader: for each other member, how many ticks ago it was last heard from and last
    /// held every entry the leader had (None: not since this replica started), by node id
    /// (DescribeQuorum's fetch and caught-up timestamps). Empty on a follower.
    pub fn activity(&self) -> Vec<(NodeId, Option<u64>, Option<u64>)> {
        if self.raw.raft.state != StateRole::Leader {
            return Vec::new();
        }
        let me = self.id();
        let ago = |at: Option<&u64>| at.map(|at| self.ticks.saturating_sub(*at));
        let mut out: Vec<_> = self
            .raw
            .raft
            .prs()
            .iter()
            .filter(|(id, _)| **id != me)
            .map(|(id, _)| {
                (
                    *id,
                    ago(self.heard_at.get(id)),
                    ago(self.caught_up_at.get(id)),
                )
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// No membership change is asked for or under way.
    pub fn membership_settled(&self) -> bool {
        self.target.is_none() && !self.raw.raft.has_pending_conf() && !self.membership().is_joint()
    }

    /// One step toward the target voters, when no change is pending.
    fn advance_membership(&mut self) {
        if self.raw.raft.state != StateRole::Leader {
            self.target = None;
            return;
        }
        let m = self.membership();
        // One change at a time, each applied by a majority of each side before the next (see
        // `conf_epoch`), leaving a joint configuration included: it is left explicitly, by
        // whichever leader finds itself in one, asked or not.
        if self.raw.raft.has_pending_conf() || !self.applied_by_majorities(&m) {
            return;
        }
        if m.is_joint() {
            // An empty change is raft-rs's "leave the joint configuration" (its transition
            // must stay the default, Auto, for `ConfChangeV2::leave_joint` to see it).
            let _ = self
                .raw
                .propose_conf_change(Vec::new(), ConfChangeV2::default());
            return;
        }
        let Some(target) = self.target.clone() else {
            return;
        };
        let stale_learners: Vec<NodeId> = m
            .learners
            .iter()
            .copied()
            .filter(|id| !target.contains(id))
            .collect();
        let to_learn: Vec<NodeId> = target
            .iter()
            .copied()
            .filter(|id| !m.voters.contains(id) && !m.learners.contains(id))
            .collect();
        let single = |node_id, ty| {
            let mut c = ConfChangeSingle {
                node_id,
                ..Default::default()
            };
            c.set_change_type(ty);
            c
        };
        let changes: Vec<ConfChangeSingle> = if !to_learn.is_empty() {
            to_learn
                .iter()
                .map(|&id| single(id, ConfChangeType::AddLearnerNode))
                .collect()
        } else {
            let promote: Vec<NodeId> = target
                .iter()
                .copied()
                .filter(|id| !m.voters.contains(id))
                .collect();
            // Caught up: it answered (a node added but not running, or cut off, never becomes a
            // voter a majority would wait for), holds everything the leader compacted away (a
            // replica that cannot take the leader's snapshot stays a learner), and is near the
            // commit index.
            let commit = self.commit_index();
            let compacted = self.snapshot_index();
            let caught_up = promote.iter().all(|id| {
                self.raw.raft.prs().get(*id).is_some_and(|pr| {
                    pr.matched > 0
                        && pr.matched >= compacted
                        && pr.matched + CATCH_UP_ENTRIES >= commit
                })
            });
            if !caught_up {
                return;
            }
            // Never the leader itself: once it is the only voter left to remove, it hands
            // leadership to a voter of the target, whose leader (asked again) removes it.
            let me = self.id();
            let remove: Vec<NodeId> = m
                .voters
                .iter()
                .copied()
                .filter(|id| !target.contains(id) && *id != me)
                .collect();
            if promote.is_empty() && remove.is_empty() && stale_learners.is_empty() {
                if !target.contains(&me) && self.raw.raft.lead_transferee.is_none() {
                    if let Some(to) = self.best_voter(&target) {
                        self.hand_over(to);
                    }
                }
                if target.contains(&me) {
                    self.target = None; // reached
                }
                return;
            }
            promote
                .iter()
                .map(|&id| single(id, ConfChangeType::AddNode))
                .chain(
                    remove
                        .iter()
                        .map(|&id| single(id, ConfChangeType::RemoveNode)),
                )
                .chain(
                    stale_learners
                        .iter()
                        .map(|&id| single(id, ConfChangeType::RemoveNode)),
                )
                .collect()
        };
        assert!(!changes.is_empty(), "a membership step with no change");
        let mut cc = ConfChangeV2::default();
        // One change is raft-rs's simple change; more go through a joint configuration, which
        // this crate leaves itself once it is applied widely enough (above).
        cc.set_transition(if changes.len() == 1 {
            ConfChangeTransition::Auto
        } else {
            ConfChangeTransition::Explicit
        });
        cc.set_changes(changes.into());
        // Dropped (a transfer under way, the uncommitted-size bound): the next tick tries again.
        let _ = self.raw.propose_conf_change(Vec::new(), cc);
    }

    pub fn id(&self) -> NodeId {
        self.raw.raft.id
    }

    /// The voters each configuration change among `entries` (about to be appended) leads to:
    /// those of the configuration this replica applied, then every change after it in its log
    /// (appended, not applied yet) up to the one in question. Only a change's incoming side
    /// counts (`voters_after`), so a joint configuration needs no tracking of its own.
    fn voters_of_changes(&self, entries: &[Entry]) -> Vec<(u64, Vec<NodeId>)> {
        if !entries.iter().any(is_conf_change) {
            return Vec::new();
        }
        let (conf_index, conf) = self.log().conf();
        let mut voters = conf.voters.clone();
        let raft_log = &self.raw.raft.raft_log;
        // Entries at or below the snapshot are applied, so not after `conf_index`.
        let from = (conf_index + 1).max(raft_log.first_index());
        let to = entries[0].index;
        if from < to {
            let earlier = raft_log
                .slice(from, to, None, GetEntriesContext::empty(false))
                .expect("the log holds what it applied up to its last entry");
            for e in earlier.iter().filter(|e| is_conf_change(e)) {
                voters_after(&mut voters, e);
            }
        }
        let mut out = Vec::new();
        for e in entries.iter().filter(|e| is_conf_change(e)) {
            voters_after(&mut voters, e);
            out.push((e.index, voters.clone()));
        }
        out
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// The highest index committed by a majority that this replica knows of.
    pub fn commit_index(&self) -> u64 {
        self.raw.raft.raft_log.committed
    }

    /// The term raft-rs is in now (a proposal's entry carries it).
    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    /// Make [`Replica::caught_up`] answer: as a follower, ask the leader for its commit index
    /// (a ReadIndex round) every few ticks until one answers. Off by default: the broker needs it
    /// of its metadata log only, and the other groups' message flow stays as it was.
    pub fn track_caught_up(&mut self) {
        self.tracks_caught_up = true;
    }

    /// This replica applied every entry committed before it (re)started, so what it applied is
    /// not a state long past. A leader: an entry of its term is committed (its log holds every
    /// entry committed before its election, ahead of that one) and it applied up to its commit
    /// index. A follower: it applied up to the leader's commit index as a ReadIndex round sent
    /// after its start reported it (etcd's read index; the follower's own commit index only
    /// says what it has heard so far).
    ///
    /// Only for a replica told to [`Replica::track_caught_up`] (a follower of any other never
    /// asks, and is never caught up).
    pub fn caught_up(&self) -> bool {
        let applied = self.applied_index();
        if self.raw.raft.state == StateRole::Leader {
            let c = self.commit_index();
            return applied >= c && self.raw.raft.raft_log.term(c).ok() == Some(self.term());
        }
        self.read_since_start.is_some_and(|at| applied >= at)
    }

    /// The index of the last entry in the log, durable or not.
    pub fn last_index(&self) -> u64 {
        self.raw.raft.raft_log.last_index()
    }

    /// The durable log (what the shell reported persisted).
    pub fn log(&self) -> &Log {
        self.raw.store()
    }

    /// One tick of the shell's clock, at `now_ms` (every [`TICK_MS`]). A leader also starts a
    /// ReadIndex round tagged with this tick: once a majority answers it, the leader knows none
    /// of them will vote for another leader for an election timeout of their ticks after they
    /// heard it, so it holds the lease until [`LEASE_MS`] after `now_ms` (see
    /// [`Replica::holds_lease`]).
    pub fn tick(&mut self, now_ms: i64) {
        self.tick_raft(now_ms);
        self.redraw_election_timeout();
    }

    fn tick_raft(&mut self, now_ms: i64) {
        self.ticks += 1;
        self.raw.tick();
        let term = self.raw.raft.term;
        if let Some(t) = self.handing_to_preferred {
            let leading = self.raw.raft.state == StateRole::Leader && term == t;
            if !leading {
                self.handing_to_preferred = None;
            } else if self.raw.raft.lead_transferee.is_none() {
                // Given up: the transferee may still campaign with the message it was sent, past
                // the followers' lease, so this leader's lease stays void for the term. Stepping
                // down lets an election give the partition a leader that holds one.
                self.handing_to_preferred = None;
                self.raw.raft.become_follower(term, raft::INVALID_ID);
            }
        }
        if self.raw.raft.state == StateRole::Leader {
            self.raw.read_index(self.ticks.to_be_bytes().to_vec());
            while self
                .rounds
                .front()
                .is_some_and(|(_, at)| *at + LEASE_MS <= now_ms)
            {
                self.rounds.pop_front();
            }
            if self.rounds.len() >= 4 * ELECTION_TICKS {
                self.rounds.pop_front(); // a clock that stopped: still bounded
            }
            self.rounds.push_back((self.ticks, now_ms));
            let last = self.raw.raft.raft_log.last_index();
            let me = self.id();
            for (id, pr) in self.raw.raft.prs().iter() {
                if *id != me && pr.matched >= last {
                    self.caught_up_at.insert(*id, self.ticks);
                }
            }
            self.caught_up_at
                .retain(|id, _| self.raw.raft.prs().get(*id).is_some());
            self.retry_snapshots();
            self.advance_membership();
        } else {
            self.rounds.clear();
            self.snapshots_sent.clear();
            self.target = None;
            // Asked of the leader until it answers ([`Replica::caught_up`]): a leader that has
            // not committed an entry of its term yet drops the request.
            if self.tracks_caught_up
                && self.read_since_start.is_none()
                && self.raw.raft.leader_id != raft::INVALID_ID
                && self.ticks.is_multiple_of(START_READ_EVERY_TICKS)
            {
                self.raw.read_index(START_READ_CTX.to_vec());
            }
        }
    }

    /// Note the followers a snapshot went to (from this replica's outgoing messages) and report
    /// the ones that have not answered in [`SNAPSHOT_RETRY_TICKS`] as failed, so raft-rs sends
    /// again (a lost message would otherwise pause the follower for good).
    fn retry_snapshots(&mut self) {
        let now = self.ticks;
        let mut failed = Vec::new();
        self.snapshots_sent.retain(|&(to, at)| {
            if now >= at + SNAPSHOT_RETRY_TICKS {
                failed.push(to);
                false
            } else {
                true
            }
        });
        for to in failed {
            let stuck = self
                .raw
                .raft
                .prs()
                .get(to)
                .is_some_and(|pr| pr.state == raft::ProgressState::Snapshot);
            if stuck {
                self.raw.report_snapshot(to, raft::SnapshotStatus::Failure);
            }
        }
    }

    fn note_snapshots(&mut self, msgs: &[Message]) {
        for m in msgs {
            if m.get_msg_type() == MessageType::MsgSnapshot {
                self.snapshots_sent.retain(|(to, _)| *to != m.to);
                self.snapshots_sent.push((m.to, self.ticks));
            }
        }
    }

    /// The shell's state machine has a snapshot of everything up to `index` (applied here,
    /// so committed and durable), `data`, and the shell made it durable: drop the entries it
    /// covers. A follower that needs them is sent the snapshot from now on. `index` must be
    /// past the current snapshot and applied.
    pub fn compact(&mut self, index: u64, data: Vec<u8>) {
        let applied = self.raw.raft.raft_log.applied;
        assert!(
            index <= applied,
            "compacting to {index}, past the applied index {applied}"
        );
        let store = self.raw.mut_store();
        assert!(
            index > store.snapshot.get_metadata().index && index <= store.last_index(),
            "compacting to {index} outside the log ({}..={})",
            store.first_index(),
            store.last_index()
        );
        let term = store.term(index).expect("an entry in the log has a term");
        let drop = (index + 1 - store.first_index()) as usize;
        store.entries.drain(..drop);
        store.snapshot = store.snapshot_of(index, term, data);
        store.wanted.set(false);
        let (conf_index, conf) = store.conf_at(index);
        (store.base_conf_index, store.base_conf) = (conf_index, conf.clone());
        store.confs.retain(|(i, _)| *i > index);
    }

    /// On the leader: a member needs a snapshot newer than the stored one (it was added since
    /// that one was taken), so the shell should compact now, whatever the log's size, if it
    /// applied anything since.
    pub fn snapshot_wanted(&self) -> bool {
        self.log().wanted.get() && self.applied_index() > self.snapshot_index()
    }

    /// The index the shell's state machine has applied up to: everything committed and handed
    /// out, no-op entries included (what [`Replica::compact`] may compact to).
    pub fn applied_index(&self) -> u64 {
        self.raw.raft.raft_log.applied
    }

    /// The log holds an entry at `index` of term `term` (raft-rs's `match_term`): a snapshot
    /// there only moves the commit index, where one of another term replaces the log.
    pub fn holds_entry(&self, index: u64, term: u64) -> bool {
        self.raw.raft.raft_log.match_term(index, term)
    }

    /// The term of the entry at `index`, in the log or its snapshot. Panics for an index the
    /// log does not hold (a caller bug).
    pub fn term_at(&self, index: u64) -> u64 {
        self.raw
            .raft
            .raft_log
            .term(index)
            .unwrap_or_else(|e| panic!("no term for index {index}: {e}"))
    }

    /// On the leader: the highest index every voter (itself included) holds durably, what a
    /// log may be compacted to without any replica ever needing a snapshot of it (a topic
    /// partition's snapshot cannot carry its records). None on a follower, which does not know.
    pub fn all_matched(&self) -> Option<u64> {
        if self.raw.raft.state != StateRole::Leader {
            return None;
        }
        self.raw.raft.prs().iter().map(|(_, pr)| pr.matched).min()
    }

    /// The index of the snapshot the log starts after (0: never compacted).
    pub fn snapshot_index(&self) -> u64 {
        self.log().snapshot.get_metadata().index
    }

    /// This replica leads and may act as the partition's leader at `now_ms`: a majority
    /// confirmed its leadership in a round sent less than [`LEASE_MS`] ago, so no other replica
    /// can have been elected since. A leader cut off from the others (or whose thread stalled)
    /// stops serving when this turns false, before any new leader can exist (no split brain for
    /// what the coordinator answers from memory, like a heartbeat or an offset fetch; writes
    /// need a majority anyway).
    pub fn holds_lease(&self, now_ms: i64) -> bool {
        self.raw.raft.state == StateRole::Leader
            && self.lease_void_term != Some(self.raw.raft.term)
            && self.raw.raft.lead_transferee.is_none()
            && self.confirmed_at.is_some_and(|at| now_ms < at + LEASE_MS)
    }

    /// On the leader: hand leadership to `to`, a partition's preferred leader (Kafka's preferred
    /// replica election, which `auto.leader.rebalance.enable` triggers), if that can go
    /// smoothly: `to` is another voter that answered lately and holds every entry this leader
    /// has, and no configuration change or other handover is under way. True if the handover
    /// started (raft-rs's MsgTimeoutNow: `to` campaigns at once and wins, this leader's lease
    /// ends now).
    pub fn hand_to_preferred(&mut self, to: NodeId) -> bool {
        let raft = &self.raw.raft;
        if raft.state != StateRole::Leader
            || to == self.id()
            || raft.lead_transferee.is_some()
            || !self.membership_settled()
            || !self.membership().is_voter(to)
        {
            return false;
        }
        // Heard from lately (raft-rs's `recent_active` is cleared on every quorum check, so it
        // says little about a moment), and holding everything: the transferee can win at once.
        let last = raft.raft_log.last_index();
        let heard = self
            .heard_at
            .get(&to)
            .is_some_and(|at| at + HEARD_TICKS >= self.ticks);
        let ready = heard && raft.prs().get(to).is_some_and(|pr| pr.matched == last);
        if ready {
            self.handing_to_preferred = Some(raft.term);
            self.hand_over(to);
        }
        ready
    }

    /// Stand for election now (a node that should lead a partition it prefers, or a test).
    pub fn campaign(&mut self) -> Result<(), raft::Error> {
        let r = self.raw.campaign();
        self.redraw_election_timeout();
        r
    }

    /// Draw this replica's election timeouts from `seed` from now on, instead of raft-rs's
    /// unseeded generator (see [`SeededElections`]). For simulations, which must repeat a
    /// failing seed; the broker keeps raft-rs's draws. The first draw replaces the current one.
    pub fn seed_elections(&mut self, seed: u64) {
        let raft = &self.raw.raft;
        self.elections = Some(SeededElections {
            state: seed,
            seen: (raft.term, raft.state),
        });
        self.draw_election_timeout();
    }

    /// After a call into raft-rs: a seeded replica whose term or role moved (raft-rs drew a
    /// new timeout, or may have) draws its own instead.
    fn redraw_election_timeout(&mut self) {
        let now = (self.raw.raft.term, self.raw.raft.state);
        match &mut self.elections {
            Some(e) if e.seen != now => e.seen = now,
            _ => return,
        }
        self.draw_election_timeout();
    }

    fn draw_election_timeout(&mut self) {
        let Some(e) = &mut self.elections else {
            return;
        };
        // raft-rs's own range, [min_election_tick, max_election_tick) of the replica's config.
        let cfg = config(self.raw.raft.id, 0);
        let (min, max) = (cfg.min_election_tick(), cfg.max_election_tick());
        let t = min + (e.next() % (max - min) as u64) as usize;
        let raft = &mut self.raw.raft;
        raft.set_randomized_election_timeout(t);
        debug_assert_eq!(raft.randomized_election_timeout(), t);
    }

    /// A message from a peer. Messages for another node, or local-only message types, are
    /// refused (a peer sending them is broken or hostile).
    pub fn step(&mut self, mut m: Message) -> Result<(), raft::Error> {
        let epoch = Self::untag(&mut m);
        if let Some(epoch) = epoch {
            if m.from != self.id() && self.membership().contains(m.from) {
                let known = self.peer_epochs.entry(m.from).or_insert(0);
                *known = (*known).max(epoch);
                self.heard_at.insert(m.from, self.ticks);
            }
        }
        // A candidate whose configuration is older than ours gets no vote (see `conf_epoch`):
        // dropped, as a lost request would be.
        if matches!(
            m.get_msg_type(),
            MessageType::MsgRequestVote | MessageType::MsgRequestPreVote
        ) && epoch.unwrap_or(0) < self.conf_epoch()
        {
            return Ok(());
        }
        // MsgTransferLeader travels only from a follower asked to transfer (this crate never
        // asks one): from the network it would let a peer void the leader's lease.
        if m.to != self.id()
            || raft::raw_node::is_local_msg(m.get_msg_type())
            || m.get_msg_type() == MessageType::MsgTransferLeader
        {
            return Err(raft::Error::StepLocalMsg);
        }
        let forwarded = m.get_msg_type() == MessageType::MsgPropose;
        let stepped = self.raw.step(m);
        self.redraw_election_timeout();
        match stepped {
            // A proposal a follower forwarded (`propose_or_forward`) reached a node that does not
            // lead (any more): dropped, as a lost message would be; its proposer's deadline
            // answers the client.
            Err(raft::Error::ProposalDropped) if forwarded => Ok(()),
            // A response from a node that is no longer a member: dropped, as a lost one would be.
            Err(raft::Error::StepPeerNotFound) => Ok(()),
            r => r,
        }
    }

    /// Replicate `data` (one record batch); on success, the index its entry will commit at.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<u64, ProposeError> {
        if self.raw.raft.state != StateRole::Leader {
            return Err(ProposeError::NotLeader {
                leader: self.leader_hint(),
            });
        }
        let before = self.raw.raft.raft_log.last_index();
        match self.raw.propose(Vec::new(), data) {
            Ok(()) => {
                let idx = self.raw.raft.raft_log.last_index();
                debug_assert_eq!(idx, before + 1);
                Ok(idx)
            }
            Err(raft::Error::ProposalDropped) => Err(ProposeError::Dropped),
            Err(e) => unreachable!("raft-rs propose only drops: {e:?}"),
        }
    }

    /// Replicate `data` from any replica: the leader proposes it (`Ok(Some(index))`), a
    /// follower that knows the leader hands it to the leader (`Ok(None)`: raft-rs forwards the
    /// proposal in a message, which the network may lose, so the caller waits for the entry to
    /// apply, with a deadline). For the cluster's metadata log, where any node takes a client's
    /// change; a coordinator's partition only ever proposes on its leader ([`Self::propose`]).
    pub fn propose_or_forward(&mut self, data: Vec<u8>) -> Result<Option<u64>, ProposeError> {
        if self.raw.raft.state == StateRole::Leader {
            return self.propose(data).map(Some);
        }
        let Some(leader) = self.leader_hint() else {
            return Err(ProposeError::NotLeader { leader: None });
        };
        match self.raw.propose(Vec::new(), data) {
            Ok(()) => Ok(None),
            Err(raft::Error::ProposalDropped) => Err(ProposeError::NotLeader {
                leader: Some(leader),
            }),
            Err(e) => unreachable!("raft-rs propose only drops: {e:?}"),
        }
    }

    fn leader_hint(&self) -> Option<NodeId> {
        match self.raw.raft.leader_id {
            0 => None,
            id => Some(id),
        }
    }

    /// [`Replica::work`] would give something now (the shell need not wake its writer
    /// otherwise).
    pub fn has_work(&self) -> bool {
        self.in_flight.is_none() && self.raw.has_ready()
    }

    /// The next piece of work, if there is any and none is in flight.
    pub fn work(&mut self) -> Option<Work> {
        if self.in_flight.is_some() || !self.raw.has_ready() {
            return None;
        }
        let mut rd = self.raw.ready();
        if self.raw.raft.state == StateRole::Leader {
            for rs in rd.take_read_states() {
                if let Ok(b) = <[u8; 8]>::try_from(rs.request_ctx.as_slice()) {
                    let at = u64::from_be_bytes(b);
                    // When that round was sent; a round no longer listed is older than the
                    // lease and confirms nothing.
                    if let Some(&(_, sent)) = self.rounds.iter().find(|(t, _)| *t == at) {
                        self.confirmed_at = Some(self.confirmed_at.map_or(sent, |c| c.max(sent)));
                    }
                }
            }
        } else {
            self.confirmed_at = None;
            for rs in rd.take_read_states() {
                if rs.request_ctx == START_READ_CTX && self.read_since_start.is_none() {
                    self.read_since_start = Some(rs.index);
                }
            }
        }
        let committed = rd.take_committed_entries();
        let snapshot = (!rd.snapshot().is_empty()).then(|| rd.snapshot().clone());
        let mut work = Work {
            send_now: rd.take_messages(),
            entries: rd.take_entries(),
            hard_state: rd.hs().cloned(),
            committed: only_data(committed.clone()),
            membership: snapshot
                .as_ref()
                .map(|s| Membership::of(s.get_metadata().get_conf_state())),
            role: None,
            snapshot: snapshot.as_ref().map(|s| {
                let (conf_index, data) = split_snapshot_data(&s.data);
                LogSnapshot {
                    index: s.get_metadata().index,
                    term: s.get_metadata().term,
                    data: data.to_vec(),
                    conf: Some(SnapshotConf {
                        state: s.get_metadata().get_conf_state().clone(),
                        index: conf_index,
                    }),
                }
            }),
            must_sync: false,
            change_voters: Vec::new(),
        };
        self.note_snapshots(&work.send_now);
        // Tagged with the epoch before this work's configuration changes apply: those count
        // only once their commit index is durable (the messages sent after `persisted`).
        let mut send_now = std::mem::take(&mut work.send_now);
        self.tag(&mut send_now);
        work.send_now = send_now;
        if rd.ss().is_some() || self.raw.raft.term != self.role.term {
            let role = Role {
                term: self.raw.raft.term,
                leader: self.leader_hint(),
                is_leader: self.raw.raft.state == StateRole::Leader,
            };
            if role != self.role {
                if role.term != self.role.term || !role.is_leader {
                    // A lease belongs to one term of leadership.
                    self.confirmed_at = None;
                }
                self.role = role;
                work.role = Some(role);
            }
        }
        // raft-rs's asynchronous protocol (`advance_append_async`, then `on_persist_ready` once
        // durable): the shell keeps stepping messages, ticking and proposing while its write is
        // under way, which the synchronous `advance` forbids. raft-rs reads the entries back
        // from our `Storage` before they are durable (to send them), so they go in now; what it
        // counts as persisted, and so what it may commit on this replica's behalf or hand out as
        // committed, moves only in `persisted`.
        let store = self.raw.mut_store();
        if let Some(snap) = snapshot {
            store.install(snap);
        }
        store.append(&work.entries);
        if let Some(hs) = &work.hard_state {
            store.hard_state = hs.clone();
        }
        work.change_voters = self.voters_of_changes(&work.entries);
        let number = rd.number();
        let after = rd.take_persisted_messages();
        self.raw.advance_append_async(rd);
        // Configuration changes take effect as they apply (raft-rs's rule), before the applied
        // index moves past them (a leader leaving a joint configuration proposes that then).
        for e in committed.iter().filter(|e| is_conf_change(e)) {
            if let Some(m) = self.apply_conf_entry(e) {
                work.membership = Some(m);
                work.must_sync = true;
            }
        }
        if work.must_sync {
            // The commit index covering the change: the newest hard state, written and synced
            // even if only its commit index moved.
            work.hard_state = Some(self.raw.store().hard_state.clone());
        }
        // Committed entries are applied by the shell from this Work on; raft-rs hands out only
        // entries this replica has persisted (`RaftLog::next_entries_since`).
        if let Some(last) = committed.last() {
            self.raw.advance_apply_to(last.index);
        }
        self.in_flight = Some((number, after));
        Some(work)
    }

    /// The shell made the in-flight [`Work`]'s entries and hard state durable. Panics if no
    /// work is in flight (a shell bug).
    pub fn persisted(&mut self, work: &Work) -> AfterPersist {
        let (number, send) = self
            .in_flight
            .take()
            .expect("persisted() without work in flight");
        self.raw.on_persist_ready(number);
        if let Some(s) = &work.snapshot {
            // The state machine was replaced by the snapshot: applied up to its index.
            if s.index > self.raw.raft.raft_log.applied {
                self.raw.advance_apply_to(s.index);
            }
        }
        self.note_snapshots(&send);
        let mut send = send;
        self.tag(&mut send);
        // Entries this made committed come out of the next `work`.
        AfterPersist {
            send,
            committed: Vec::new(),
        }
    }
}

/// Committed entries the state machine applies: a new leader's empty entry (Raft §8) and
/// configuration changes are raft-rs's own.
fn only_data(entries: Vec<Entry>) -> Vec<Entry> {
    entries.into_iter().filter(is_data).collect()
}

/// An entry the state machine applies: a normal entry with data (not a leader's empty entry, not
/// a configuration change, which is Raft's own).
pub fn is_data(e: &Entry) -> bool {
    e.get_entry_type() == EntryType::EntryNormal && !e.data.is_empty()
}

/// The mark ahead of a message's configuration epoch in its context.
const EPOCH_TAG: [u8; 2] = *b"RE";

/// A snapshot's data as raft-rs carries it: the index of its configuration's change, then the
/// shell's data. Data too short for the index (a broken peer) reads as the first voters'.
/// The shell's part of a snapshot as a Raft message carries it (after the configuration's
/// epoch): what [`Log::snapshot_data`] gives on the node that took it.
pub fn shell_snapshot_data(bytes: &[u8]) -> &[u8] {
    split_snapshot_data(bytes).1
}

fn split_snapshot_data(bytes: &[u8]) -> (u64, &[u8]) {
    match bytes.split_first_chunk::<8>() {
        Some((index, rest)) => (u64::from_be_bytes(*index), rest),
        None => (0, bytes),
    }
}

/// The voters `voters` (a configuration's incoming side) become by the change in `e`: added
/// voters join, demoted and removed ones leave; an empty change (leaving a joint configuration)
/// keeps them. Sorted. A change that does not decode changes nothing (raft-rs drops it too).
fn voters_after(voters: &mut Vec<NodeId>, e: &Entry) {
    for c in decode_conf_change(e).iter().flat_map(|cc| cc.get_changes()) {
        match c.get_change_type() {
            ConfChangeType::AddNode => {
                if !voters.contains(&c.node_id) {
                    voters.push(c.node_id);
                }
            }
            ConfChangeType::AddLearnerNode | ConfChangeType::RemoveNode => {
                voters.retain(|&v| v != c.node_id)
            }
        }
    }
    voters.sort_unstable();
}

fn is_conf_change(e: &Entry) -> bool {
    matches!(
        e.get_entry_type(),
        EntryType::EntryConfChange | EntryType::EntryConfChangeV2
    )
}

/// A configuration change entry's change (raft-rs writes an empty ConfChangeV2 to leave a
/// joint configuration). None for bytes that do not decode.
fn decode_conf_change(e: &Entry) -> Option<ConfChangeV2> {
    use protobuf::Message as _;
    match e.get_entry_type() {
        EntryType::EntryConfChange => ConfChange::parse_from_bytes(&e.data).ok().map(|c| {
            let mut single = ConfChangeSingle {
                node_id: c.node_id,
                ..Default::default()
            };
            single.set_change_type(c.get_change_type());
            let mut v2 = ConfChangeV2::default();
            v2.set_changes(vec![single].into());
            v2
        }),
        EntryType::EntryConfChangeV2 => ConfChangeV2::parse_from_bytes(&e.data).ok(),
        EntryType::EntryNormal => None,
    }
}

/// A message as it goes between nodes (raft-rs's protobuf encoding; the node-to-node frame
/// around it is the transport's).
pub fn encode(m: &Message) -> Vec<u8> {
    use protobuf::Message as _;
    m.write_to_bytes().expect("a Message always encodes")
}

/// A message from a peer's bytes. Garbage is an error, never a panic.
pub fn decode(bytes: &[u8]) -> Result<Message, protobuf::ProtobufError> {
    use protobuf::Message as _;
    Message::parse_from_bytes(bytes)
}
