//! What one node knows of the cluster it belongs to (`controller.quorum.voters` with other
//! nodes in it): the voters and their node-to-node addresses, where each node's clients connect
//! (learned from the node's own handshake), which node leads each `__consumer_offsets`
//! partition and each partition of a topic replicated on every voter as far as this node's
//! replica of it knows, and which peers are connected now (the sign Metadata uses to report a
//! placed partition's leader as unavailable).
//!
//! Shared by every shard (read by FindCoordinator and Metadata on any shard, written by the
//! shard that owns a partition when its replica's role changes, and by the node-to-node
//! listener when a peer introduces itself): plain atomics, an `ArcSwap` and one `RwLock` taken
//! only for a single map operation, no lock held while anything else runs.
//!
//! Must not: decide leadership (the partition's Raft replica does, on its shard), or hold
//! anything a client's answer could be wrong about for longer than one read: a leader read here
//! is a hint that the leader's own partition confirms (it answers NOT_COORDINATOR otherwise).

use arc_swap::ArcSwap;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::RwLock;
use uuid::Uuid;

/// A node, as `node.id` and `controller.quorum.voters` number it.
pub type NodeId = u64;

/// One endpoint a node serves clients on: its listener's name and advertised address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub listener: String,
    pub host: String,
    pub port: i32,
}

/// A voter of the quorum: its id and node-to-node address (`host:port`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    pub id: NodeId,
    pub addr: String,
}

/// How long a topic partition leader's word (`runtime::peers::TOPIC_LEADER`, sent every
/// [`TOPIC_HINT_EVERY_TICKS`] Raft ticks) counts on a node without a replica.
pub const TOPIC_HINT_TTL: std::time::Duration = std::time::Duration::from_millis(3_000);
/// Raft ticks between two words of a topic partition's leader to the nodes without a replica.
pub const TOPIC_HINT_EVERY_TICKS: u64 = 10;

/// A topic partition leader's word (`Cluster::set_topic_hint`): its term, itself, when it came.
type TopicHint = (u64, NodeId, std::time::Instant);

/// The metadata log's Raft group as this node's replica of it last saw it (DescribeQuorum).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuorumView {
    pub leader: Option<NodeId>,
    pub term: u64,
    /// This replica's commit index: the group's high watermark as far as it knows.
    pub commit: u64,
    /// This replica's last index.
    pub last: u64,
    /// The group's voters and learners, as this replica applied its configuration.
    pub voters: Vec<NodeId>,
    pub learners: Vec<NodeId>,
    /// On the leader: each member's matched index (its own: its last index). Empty elsewhere.
    pub matched: Vec<(NodeId, u64)>,
    /// On the leader: each other member's last fetch and last caught-up time (wall clock, ms;
    /// -1 when not since the leader took over), DescribeQuorum's timestamps. Empty elsewhere.
    pub activity: Vec<(NodeId, i64, i64)>,
}

impl QuorumView {
    /// The leader's view as it sends it to the other members every Raft tick
    /// ([`crate::runtime::peers::QUORUM_VIEW`]), so that any node answers DescribeQuorum as the
    /// leader would. Big-endian: leader (u64, 0 = none), term, commit, last (u64 each), then
    /// four lists, each a u16 count: voters and learners (u64 each), matched (u64 node, u64
    /// index), activity (u64 node, i64 last fetch, i64 last caught up).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64 + 24 * (self.matched.len() + self.activity.len()));
        for v in [self.leader.unwrap_or(0), self.term, self.commit, self.last] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        let count = |b: &mut Vec<u8>, n: usize| {
            b.extend_from_slice(&u16::try_from(n).expect("members are bounded").to_be_bytes())
        };
        for list in [&self.voters, &self.learners] {
            count(&mut b, list.len());
            list.iter()
                .for_each(|n| b.extend_from_slice(&n.to_be_bytes()));
        }
        count(&mut b, self.matched.len());
        for (n, m) in &self.matched {
            b.extend_from_slice(&n.to_be_bytes());
            b.extend_from_slice(&m.to_be_bytes());
        }
        count(&mut b, self.activity.len());
        for (n, f, c) in &self.activity {
            b.extend_from_slice(&n.to_be_bytes());
            b.extend_from_slice(&f.to_be_bytes());
            b.extend_from_slice(&c.to_be_bytes());
        }
        b
    }

    /// [`Self::encode`]'s bytes back; None for anything else (a truncated frame, trailing
    /// bytes, or a list longer than an address book holds).
    pub fn decode(mut b: &[u8]) -> Option<QuorumView> {
        fn take<const N: usize>(b: &mut &[u8]) -> Option<[u8; N]> {
            let (head, rest) = b.split_first_chunk::<N>()?;
            *b = rest;
            Some(*head)
        }
        let u64_ = |b: &mut &[u8]| take::<8>(b).map(u64::from_be_bytes);
        let i64_ = |b: &mut &[u8]| take::<8>(b).map(i64::from_be_bytes);
        let count = |b: &mut &[u8]| {
            take::<2>(b)
                .map(|c| usize::from(u16::from_be_bytes(c)))
                .filter(|c| *c <= MAX_BOOK)
        };
        let leader = u64_(&mut b)?;
        let (term, commit, last) = (u64_(&mut b)?, u64_(&mut b)?, u64_(&mut b)?);
        let mut lists = [Vec::new(), Vec::new()];
        for list in &mut lists {
            for _ in 0..count(&mut b)? {
                list.push(u64_(&mut b)?);
            }
        }
        let [voters, learners] = lists;
        let mut matched = Vec::new();
        for _ in 0..count(&mut b)? {
            matched.push((u64_(&mut b)?, u64_(&mut b)?));
        }
        let mut activity = Vec::new();
        for _ in 0..count(&mut b)? {
            activity.push((u64_(&mut b)?, i64_(&mut b)?, i64_(&mut b)?));
        }
        b.is_empty().then_some(QuorumView {
            leader: (leader != 0).then_some(leader),
            term,
            commit,
            last,
            voters,
            learners,
            matched,
            activity,
        })
    }
}

/// How long a view the metadata log's leader sent stands for it: a few of its ticks (it sends
/// one every tick), so a leader gone quiet is not reported for long.
pub const LEADER_VIEW_TTL: std::time::Duration = std::time::Duration::from_millis(1_000);

/// A Raft group's configuration as a replica applied it: its voters (both sides of a joint
/// configuration) and its learners, each sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupView {
    pub voters: Vec<NodeId>,
    pub learners: Vec<NodeId>,
}

impl GroupView {
    /// From a replica's membership.
    pub fn of(m: &replication::Membership) -> Self {
        let mut voters: Vec<NodeId> = m.voters.iter().chain(&m.outgoing).copied().collect();
        voters.sort_unstable();
        voters.dedup();
        let mut learners = m.learners.clone();
        learners.sort_unstable();
        GroupView { voters, learners }
    }
}

/// A node-to-node address as the address book spells it: `host:port`, an IPv6 host in
/// brackets (as `controller.quorum.voters` writes one).
pub fn node_addr(host: &str, port: impl std::fmt::Display) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// An id every node of a cluster derives alike from `key` (which names what it is for and the
/// cluster's id): CRC-32C of `<i>/<key>` for each of its four 32-bit words, shaped as a version-4
/// UUID, so never the nil id nor Kafka's reserved metadata topic id (1).
pub fn derived_id(key: &str) -> Uuid {
    let mut b = [0u8; 16];
    for (i, chunk) in b.chunks_mut(4).enumerate() {
        let h = crc32c::crc32c(format!("{i}/{key}").as_bytes());
        chunk.copy_from_slice(&h.to_be_bytes());
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    Uuid::from_bytes(b)
}

pub struct Cluster {
    pub node_id: NodeId,
    /// `cluster.id`: every node of a cluster is configured with the same one, and peers whose
    /// hello names another are refused.
    pub cluster_id: String,
    /// Every voter `controller.quorum.voters` names, in its order: the nodes the cluster
    /// started with, the first voters of every Raft group created before a node joined or left
    /// (a node removed since stays in it, as it stays in `controller.quorum.voters`). A node
    /// started to join an existing cluster is not among them. [`Self::members`] says which
    /// nodes are of the cluster now.
    pub voters: Vec<Voter>,
    /// The address book: `voters`, then every node that joined since (AddRaftVoter, as the
    /// metadata log applied here says) and, on a joining node, itself. Only ever appended to,
    /// so a node's position in it (its [`Self::inbound`] slot) never changes.
    book: ArcSwap<Vec<Voter>>,
    /// The nodes of the cluster now, as the metadata log applied on this node says: `voters`
    /// and the nodes joined since, less the nodes removed (RemoveRaftVoter). Each Raft group's
    /// leader moves its group to them (`Replica::follow_members`).
    members: ArcSwap<Vec<NodeId>>,
    /// The nodes removed so far: never members again.
    removed: ArcSwap<Vec<NodeId>>,
    /// Each node's data directory incarnation as the metadata log recorded it
    /// (`Command::Incarnation`): a hello naming another under that node id is refused
    /// (`runtime::peers::judge`).
    incarnations: ArcSwap<BTreeMap<NodeId, Uuid>>,
    /// Changes of `incarnations` so far: a node-to-node reader checks its peer again only when
    /// this moved (one atomic load per frame).
    incarnations_changed: AtomicU64,
    /// This node's own record of its peers' incarnations (`DATA/peer-incarnations.properties`),
    /// opened at the start (`Self::open_peer_records`): checked on every hello
    /// (`runtime::peers::judge`) and kept up with the metadata log's records
    /// (`Self::set_incarnations`), so a restarted node refuses another directory before it
    /// replayed its log. Touched by shard 0 only (the node-to-node listener and the metadata
    /// log); a mutex because this struct is shared.
    peer_records: std::sync::Mutex<Option<crate::meta::PeerIncarnations>>,
    /// The metadata log's group, published by its shard on every tick.
    quorum: ArcSwap<QuorumView>,
    /// The metadata log's group as its leader last sent it (a node that is not the leader),
    /// with when it arrived: what DescribeQuorum answers with while it is fresh.
    leader_quorum: ArcSwap<Option<(QuorumView, std::time::Instant)>>,
    /// Per `__consumer_offsets` partition: the leader this node's replica knows of, 0 = none.
    leaders: Vec<AtomicU64>,
    /// Per partition of a topic with a replica on every voter (by topic id, partition): the
    /// leader this node's replica knows of; absent = none known. Topics come and go and grow,
    /// so a map rather than `leaders`' fixed slots; it changes only when a replica's role does.
    topic_leaders: RwLock<hashbrown::HashMap<(Uuid, i32), NodeId>>,
    /// Per partition of a topic with fewer replicas than nodes that has none here: the node
    /// that last said it leads it (`runtime::peers::TOPIC_LEADER`), its term and when it said
    /// so. Bounded by the partitions of the topics known here (a hint for another is dropped
    /// before it gets here, and a deleted topic's are forgotten).
    topic_hints: RwLock<hashbrown::HashMap<(Uuid, i32), TopicHint>>,
    /// Per Raft group with a replica here, by topic id (nil for `__consumer_offsets`) and
    /// partition: its configuration as that replica applied it. Metadata reports a group's
    /// replicas from it while a node joins or leaves (Kafka lists a reassignment's adding and
    /// removing replicas too) and leaves its learners (added, not caught up) out of the ISR.
    groups: RwLock<hashbrown::HashMap<(Uuid, i32), GroupView>>,
    /// Where each node serves clients (this node's own from the start, peers' once they
    /// introduced themselves).
    endpoints: ArcSwap<BTreeMap<NodeId, Vec<Endpoint>>>,
    /// Per node of the address book (by position, up to [`MAX_BOOK`]): node-to-node
    /// connections it has open to this node now.
    /// Every shard of a running peer keeps one ([`crate::runtime::peers`]), and a killed
    /// process's connections are closed by its kernel, so a count of 0 means the node is down or
    /// cut off.
    inbound: Vec<AtomicUsize>,
    /// Preferred leader elections asked for (ElectLeaders, as the metadata log applied them
    /// here), by Raft group (topic id, nil for `__consumer_offsets`; partition): until when
    /// (monotonic ms) this node's replica of it, while it leads, hands it to its preferred
    /// replica. Bounded by the groups there are (one entry each).
    elections: std::sync::Mutex<hashbrown::HashMap<(Uuid, i32), i64>>,
    /// `elections` is not empty: the shards' polls read only this while no election is asked for.
    elections_wanted: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("node_id", &self.node_id)
            .field("voters", &self.voters)
            .finish()
    }
}

/// The most nodes an address book holds: every node id a cluster ever had (a producer id lane
/// each, `producer_ids::MAX_NODES`).
pub const MAX_BOOK: usize = crate::producer_ids::MAX_NODES;
const _: () = assert!(MAX_BOOK as u64 == replication::metadata::MAX_NODES);

impl Cluster {
    /// A node of the cluster `voters` names (this node among them).
    pub fn new(
        node_id: NodeId,
        cluster_id: String,
        voters: Vec<Voter>,
        partitions: i32,
        own: Vec<Endpoint>,
    ) -> Self {
        assert!(
            voters.iter().any(|v| v.id == node_id),
            "node {node_id} is one of the voters"
        );
        Self::build(node_id, cluster_id, voters, None, partitions, own)
    }

    /// A node started to join the running cluster `voters` names (AddRaftVoter adds it), with
    /// `addr` its node-to-node address. It is no member until the metadata log says so.
    pub fn joining(
        node_id: NodeId,
        cluster_id: String,
        voters: Vec<Voter>,
        addr: String,
        partitions: i32,
        own: Vec<Endpoint>,
    ) -> Self {
        assert!(
            !voters.iter().any(|v| v.id == node_id),
            "node {node_id} is one of the first voters: it does not join"
        );
        let me = Voter { id: node_id, addr };
        Self::build(node_id, cluster_id, voters, Some(me), partitions, own)
    }

    fn build(
        node_id: NodeId,
        cluster_id: String,
        voters: Vec<Voter>,
        me: Option<Voter>,
        partitions: i32,
        own: Vec<Endpoint>,
    ) -> Self {
        assert!(voters.len() <= MAX_BOOK, "too many voters");
        let mut endpoints = BTreeMap::new();
        endpoints.insert(node_id, own);
        let book: Vec<Voter> = voters.iter().cloned().chain(me).collect();
        Cluster {
            node_id,
            cluster_id,
            leaders: (0..partitions.max(0)).map(|_| AtomicU64::new(0)).collect(),
            topic_leaders: RwLock::default(),
            topic_hints: RwLock::default(),
            groups: RwLock::default(),
            endpoints: ArcSwap::from_pointee(endpoints),
            inbound: (0..MAX_BOOK).map(|_| AtomicUsize::new(0)).collect(),
            members: ArcSwap::from_pointee(voters.iter().map(|v| v.id).collect()),
            removed: ArcSwap::from_pointee(Vec::new()),
            incarnations: ArcSwap::from_pointee(BTreeMap::new()),
            incarnations_changed: AtomicU64::new(0),
            peer_records: std::sync::Mutex::new(None),
            book: ArcSwap::from_pointee(book),
            quorum: ArcSwap::from_pointee(QuorumView::default()),
            leader_quorum: ArcSwap::from_pointee(None),
            voters,
            elections: Default::default(),
            elections_wanted: Default::default(),
        }
    }

    /// Ask this node's leaders of `groups` to hand them to their preferred replicas until
    /// `until` (monotonic ms): a preferred leader election the metadata log applied
    /// (`replication::metadata::Command::ElectLeaders`).
    pub fn want_elections(&self, groups: &[(Uuid, i32)], until: i64) {
        if groups.is_empty() {
            return;
        }
        let mut m = self.elections.lock().unwrap_or_else(|p| p.into_inner());
        for g in groups {
            let at = m.entry(*g).or_insert(until);
            *at = (*at).max(until);
        }
        self.elections_wanted.store(true, Ordering::Release);
    }

    /// The groups a preferred leader election is still asked for at `now` (monotonic ms), the
    /// expired ones forgotten; None when there are none (one atomic load).
    pub fn elections(&self, now: i64) -> Option<hashbrown::HashSet<(Uuid, i32)>> {
        if !self.elections_wanted.load(Ordering::Acquire) {
            return None;
        }
        let mut m = self.elections.lock().unwrap_or_else(|p| p.into_inner());
        m.retain(|_, until| *until > now);
        if m.is_empty() {
            self.elections_wanted.store(false, Ordering::Release);
            return None;
        }
        Some(m.keys().copied().collect())
    }

    /// `controller.quorum.voters`' node ids: the first voters of the cluster's first groups.
    pub fn voter_ids(&self) -> Vec<NodeId> {
        self.voters.iter().map(|v| v.id).collect()
    }

    /// This node's node-to-node address (where its peers connect).
    pub fn own_addr(&self) -> String {
        self.address(self.node_id)
            .expect("this node is in its own address book")
    }

    /// The node-to-node address of `node`, if it is in the address book.
    pub fn address(&self, node: NodeId) -> Option<String> {
        self.book
            .load()
            .iter()
            .find(|v| v.id == node)
            .map(|v| v.addr.clone())
    }

    /// The member of the cluster whose node-to-node address is `addr`, if any (this node too).
    pub fn member_at(&self, addr: &str) -> Option<NodeId> {
        self.book
            .load()
            .iter()
            .find(|v| v.addr == addr && self.is_member(v.id))
            .map(|v| v.id)
    }

    /// How many nodes the address book holds, this node among them.
    pub fn book_len(&self) -> usize {
        self.book.load().len()
    }

    /// The node is in the address book: one of the first voters, a node that joined since, or
    /// this node.
    pub fn knows(&self, node: NodeId) -> bool {
        self.book.load().iter().any(|v| v.id == node)
    }

    /// The nodes of the cluster now (see `members`), in `controller.quorum.voters` order then
    /// the order they joined.
    pub fn members(&self) -> std::sync::Arc<Vec<NodeId>> {
        self.members.load_full()
    }

    /// The nodes removed from the cluster so far.
    pub fn removed(&self) -> std::sync::Arc<Vec<NodeId>> {
        self.removed.load_full()
    }

    /// The node is one of the cluster now.
    pub fn is_member(&self, node: NodeId) -> bool {
        self.members.load().contains(&node)
    }

    /// The metadata log applied here names `members` as the cluster's nodes, `removed` as the
    /// nodes removed so far and `joined` (with their node-to-node addresses) as the nodes added
    /// since the start. The address book learns the joined ones first, so a member always has
    /// an address. A node is added once and removed once: `removed` only grows.
    pub fn set_members(&self, members: &[NodeId], removed: &[NodeId], joined: &[(NodeId, String)]) {
        let book = self.book.load();
        let new: Vec<Voter> = joined
            .iter()
            .filter(|(id, _)| !book.iter().any(|v| v.id == *id))
            .map(|(id, addr)| Voter {
                id: *id,
                addr: addr.clone(),
            })
            .collect();
        if !new.is_empty() {
            let mut grown = Vec::clone(&book);
            grown.extend(new);
            assert!(grown.len() <= MAX_BOOK, "the address book is full");
            self.book.store(std::sync::Arc::new(grown));
        }
        drop(book);
        let book = self.book.load();
        assert!(
            members.iter().all(|m| book.iter().any(|v| v.id == *m)),
            "members {members:?} name a node outside the address book"
        );
        let before = self.removed.load();
        assert!(
            before.iter().all(|r| removed.contains(r)),
            "removed {removed:?} forgets one of {before:?}"
        );
        let now = self.members.load();
        if members != now.as_slice() {
            if !members.contains(&self.node_id) && now.contains(&self.node_id) {
                tracing::warn!(
                    node = self.node_id,
                    "this node was removed from the cluster (RemoveRaftVoter): it leads nothing \
                     from now on and may be stopped; its data directory is left as it is"
                );
            }
            if members.contains(&self.node_id) && !now.contains(&self.node_id) {
                tracing::info!(
                    node = self.node_id,
                    "this node was added to the cluster (AddRaftVoter): its replicas catch up \
                     as learners and become voters"
                );
            }
            self.members.store(std::sync::Arc::new(members.to_vec()));
        }
        if removed != before.as_slice() {
            self.removed.store(std::sync::Arc::new(removed.to_vec()));
        }
    }

    /// The metadata log's group as last published.
    pub fn quorum(&self) -> std::sync::Arc<QuorumView> {
        self.quorum.load_full()
    }

    /// A view of the metadata log's group that node `from` sent as its leader; kept if it
    /// names `from` as leader.
    pub fn set_leader_quorum(&self, from: NodeId, view: QuorumView) {
        if view.leader == Some(from) && from != self.node_id {
            self.leader_quorum
                .store(std::sync::Arc::new(Some((view, std::time::Instant::now()))));
        }
    }

    /// The metadata log's group as DescribeQuorum reports it: the leader's own view, as the
    /// leader last sent it, when this node is not the leader and that view is fresh (less than
    /// [`LEADER_VIEW_TTL`] old) and of this node's term or a later one (Kafka forwards the
    /// request to the leader); else this node's own ([`Self::quorum`]).
    pub fn quorum_as_leader_sees_it(&self) -> std::sync::Arc<QuorumView> {
        let own = self.quorum();
        if own.leader == Some(self.node_id) {
            return own;
        }
        match &**self.leader_quorum.load() {
            Some((view, at)) if at.elapsed() < LEADER_VIEW_TTL && view.term >= own.term => {
                std::sync::Arc::new(view.clone())
            }
            _ => own,
        }
    }

    /// Published by the metadata log's shard (only when it changed: readers are rare).
    pub fn set_quorum(&self, view: QuorumView) {
        if **self.quorum.load() != view {
            self.quorum.store(std::sync::Arc::new(view));
        }
    }

    /// The directory id DescribeQuorum reports for `node` and RemoveRaftVoter must name: a
    /// pure function of `cluster.id` and the node id, so every node gives the same one without
    /// telling the others. (Kafka's `directory.id` is random per log directory, KIP-853, and
    /// tells a node that lost its disk from its earlier self; here a node id is never a member
    /// twice, and a node that lost its disk is told apart by the random `incarnation.id` of its
    /// data directory, which the metadata log records, `Command::Incarnation`.) Shaped as a
    /// version-4 UUID, never the nil id.
    pub fn directory_id(&self, node: NodeId) -> Uuid {
        derived_id(&format!("{}/directory/{node}", self.cluster_id))
    }

    /// The other nodes of the address book.
    pub fn peers(&self) -> Vec<Voter> {
        self.book
            .load()
            .iter()
            .filter(|v| v.id != self.node_id)
            .cloned()
            .collect()
    }

    /// The node `partition`'s replica here knows as leader.
    pub fn leader(&self, partition: i32) -> Option<NodeId> {
        let l = self.leaders.get(usize::try_from(partition).ok()?)?;
        match l.load(Ordering::Acquire) {
            0 => None,
            id => Some(id),
        }
    }

    /// Called by the shard that owns `partition` when its replica's role changes.
    pub fn set_leader(&self, partition: i32, leader: Option<NodeId>) {
        if let Some(l) = usize::try_from(partition)
            .ok()
            .and_then(|p| self.leaders.get(p))
        {
            l.store(leader.unwrap_or(0), Ordering::Release);
        }
    }

    /// The node the replica here of `partition` of `topic` (a topic replicated on every voter)
    /// knows as leader.
    pub fn topic_leader(&self, topic: Uuid, partition: i32) -> Option<NodeId> {
        self.topic_leaders
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(topic, partition))
            .copied()
    }

    /// Called by the shard that hosts the replica of `partition` of `topic` when its role
    /// changes; None: no leader known.
    pub fn set_topic_leader(&self, topic: Uuid, partition: i32, leader: Option<NodeId>) {
        let mut m = self
            .topic_leaders
            .write()
            .unwrap_or_else(|p| p.into_inner());
        match leader {
            Some(l) => m.insert((topic, partition), l),
            None => m.remove(&(topic, partition)),
        };
    }

    /// `from` says it leads `partition` of `topic` in Raft term `term` (a partition with no
    /// replica here). Kept unless a fresh word from a later term is kept already: a deposed
    /// leader's word, late, must not replace its successor's.
    pub fn set_topic_hint(&self, topic: Uuid, partition: i32, from: NodeId, term: u64) {
        self.set_topic_hint_at(topic, partition, from, term, std::time::Instant::now())
    }

    fn set_topic_hint_at(
        &self,
        topic: Uuid,
        partition: i32,
        from: NodeId,
        term: u64,
        now: std::time::Instant,
    ) {
        let mut m = self.topic_hints.write().unwrap_or_else(|p| p.into_inner());
        let fresh = |at: &std::time::Instant| now.saturating_duration_since(*at) < TOPIC_HINT_TTL;
        match m.get(&(topic, partition)) {
            Some((t, _, at)) if *t > term && fresh(at) => {}
            _ => {
                m.insert((topic, partition), (term, from, now));
            }
        }
    }

    /// The leader of `partition` of `topic` as its own word says (see
    /// [`Self::set_topic_hint`]), if it came within [`TOPIC_HINT_TTL`]: a leader sends it every
    /// second, so an older one is from a leader that died or was cut off.
    pub fn topic_hint(&self, topic: Uuid, partition: i32) -> Option<NodeId> {
        self.topic_hint_at(topic, partition, std::time::Instant::now())
    }

    fn topic_hint_at(
        &self,
        topic: Uuid,
        partition: i32,
        now: std::time::Instant,
    ) -> Option<NodeId> {
        self.topic_hints
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(topic, partition))
            .filter(|(_, _, at)| now.saturating_duration_since(*at) < TOPIC_HINT_TTL)
            .map(|(_, l, _)| *l)
    }

    /// Forget the leaders' words about the topics `keep` refuses (deleted ones: a topic id is
    /// never reused).
    pub fn retain_topic_hints(&self, keep: impl Fn(Uuid) -> bool) {
        self.topic_hints
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(t, _), _| keep(*t));
    }

    /// The topic was deleted (or its replicas here closed): none of its partitions' leaders is
    /// known any more, and a topic id is never reused, so nothing of it stays behind.
    pub fn forget_topic(&self, topic: Uuid) {
        self.topic_leaders
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(t, _), _| *t != topic);
        self.topic_hints
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(t, _), _| *t != topic);
        self.groups
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(t, _), _| *t != topic);
    }

    /// Published by the shard that hosts a replica of `partition` of `topic` (nil:
    /// `__consumer_offsets`) on every Raft tick: the group's configuration as it applied it.
    /// Takes the lock for writing only when it changed.
    pub fn set_group(&self, topic: Uuid, partition: i32, view: GroupView) {
        let same = self
            .groups
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(topic, partition))
            == Some(&view);
        if !same {
            self.groups
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .insert((topic, partition), view);
        }
    }

    /// The configuration of the group of `partition` of `topic` (nil: `__consumer_offsets`)
    /// as the replica here applied it; None when no replica here published one.
    pub fn group(&self, topic: Uuid, partition: i32) -> Option<GroupView> {
        self.groups
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(topic, partition))
            .cloned()
    }

    /// `nodes` (the metadata log's replica list of a partition) as its group is now, where the
    /// replica here published it: those still in the group, in that order, then the group's
    /// other members (a node joining or leaving); and which of them are learners.
    pub fn replicas_of(
        &self,
        topic: Uuid,
        partition: i32,
        nodes: &[NodeId],
    ) -> (Vec<NodeId>, Vec<NodeId>) {
        let Some(g) = self.group(topic, partition) else {
            return (nodes.to_vec(), Vec::new());
        };
        let in_group = |n: &NodeId| g.voters.contains(n) || g.learners.contains(n);
        let mut out: Vec<NodeId> = nodes.iter().copied().filter(|n| in_group(n)).collect();
        for n in g.voters.iter().chain(&g.learners) {
            if !out.contains(n) {
                out.push(*n);
            }
        }
        (out, g.learners)
    }

    /// How many `__consumer_offsets` partitions this node leads (logs, tests).
    pub fn led_here(&self) -> usize {
        self.leaders
            .iter()
            .filter(|l| l.load(Ordering::Acquire) == self.node_id)
            .count()
    }

    /// A connection from `node` opened (`+1`) or closed (`-1`).
    pub fn count_inbound(&self, node: NodeId, delta: isize) {
        if let Some(i) = self.book.load().iter().position(|v| v.id == node) {
            if delta >= 0 {
                self.inbound[i].fetch_add(delta as usize, Ordering::AcqRel);
            } else {
                let prev = self.inbound[i].fetch_sub(delta.unsigned_abs(), Ordering::AcqRel);
                assert!(
                    prev >= delta.unsigned_abs(),
                    "node {node}: more connections closed than opened"
                );
            }
        }
    }

    /// This node, or a peer with a node-to-node connection to it open: one that can serve what
    /// the metadata log placed on it. (Kafka's controller fences a broker whose heartbeats stop,
    /// `broker.session.timeout.ms`; a closed connection is our sooner sign.)
    pub fn is_up(&self, node: NodeId) -> bool {
        node == self.node_id
            || self
                .book
                .load()
                .iter()
                .position(|v| v.id == node)
                .is_some_and(|i| self.inbound[i].load(Ordering::Acquire) > 0)
    }

    /// Read this node's record of its peers' incarnations from `data_dir` (at the start).
    pub fn open_peer_records(&self, data_dir: &std::path::Path) -> anyhow::Result<()> {
        *self.peer_records() = Some(crate::meta::PeerIncarnations::open(data_dir)?);
        Ok(())
    }

    /// This node's record of its peers' incarnations (None before `open_peer_records`).
    pub fn peer_records(&self) -> std::sync::MutexGuard<'_, Option<crate::meta::PeerIncarnations>> {
        self.peer_records.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The incarnations the metadata log recorded (published by its shard when they changed),
    /// written through to this node's own record (a durable write per node, once).
    pub fn set_incarnations(&self, recorded: &BTreeMap<NodeId, Uuid>) {
        if **self.incarnations.load() != *recorded {
            self.incarnations
                .store(std::sync::Arc::new(recorded.clone()));
            self.incarnations_changed.fetch_add(1, Ordering::Release);
            if let Some(records) = self.peer_records().as_mut() {
                for (&node, &id) in recorded {
                    if node != self.node_id {
                        if let Err(e) = records.record(node, id) {
                            // Taken again at the node's next hello (`peers::judge`).
                            tracing::warn!(node, error = ?e, "cannot record a peer's incarnation");
                        }
                    }
                }
            }
        }
    }

    /// How many times the recorded incarnations changed (see [`Self::set_incarnations`]).
    pub fn incarnations_changed(&self) -> u64 {
        self.incarnations_changed.load(Ordering::Acquire)
    }

    /// The incarnation the metadata log recorded for `node`, if any.
    pub fn incarnation(&self, node: NodeId) -> Option<Uuid> {
        self.incarnations.load().get(&node).copied()
    }

    /// A peer introduced itself with where it serves clients.
    pub fn set_endpoints(&self, node: NodeId, endpoints: Vec<Endpoint>) {
        if node == self.node_id {
            return;
        }
        self.endpoints.rcu(|m| {
            let mut m = BTreeMap::clone(m);
            m.insert(node, endpoints.clone());
            m
        });
    }

    /// Where `node` serves clients on the listener named `listener`, if known.
    pub fn endpoint(&self, node: NodeId, listener: &str) -> Option<Endpoint> {
        self.endpoints
            .load()
            .get(&node)?
            .iter()
            .find(|e| e.listener == listener)
            .cloned()
    }

    /// Every node whose endpoint on `listener` is known, by id.
    pub fn nodes_on(&self, listener: &str) -> Vec<(NodeId, Endpoint)> {
        self.endpoints
            .load()
            .iter()
            .filter_map(|(id, eps)| {
                eps.iter()
                    .find(|e| e.listener == listener)
                    .map(|e| (*id, e.clone()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Node `node` of a cluster of voters 1, 2 and 3, with 4 `__consumer_offsets` partitions.
    fn three(node: NodeId) -> Cluster {
        let voters = (1..=3)
            .map(|id| Voter {
                id,
                addr: format!("127.0.0.1:1900{id}"),
            })
            .collect();
        Cluster::new(node, "c1".into(), voters, 4, ep(9092))
    }

    fn ep(port: i32) -> Vec<Endpoint> {
        vec![Endpoint {
            listener: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port,
        }]
    }

    #[test]
    fn a_leader_view_round_trips_and_only_its_leader_may_send_it() {
        let view = QuorumView {
            leader: Some(2),
            term: 7,
            commit: 120,
            last: 121,
            voters: vec![1, 2, 3],
            learners: vec![4],
            matched: vec![(1, 120), (2, 121), (3, 90), (4, 12)],
            activity: vec![(1, 1_700_000_000_100, 1_700_000_000_000), (3, 5, -1)],
        };
        let bytes = view.encode();
        assert_eq!(QuorumView::decode(&bytes), Some(view.clone()));
        assert_eq!(
            QuorumView::decode(&QuorumView::default().encode()),
            Some(QuorumView::default())
        );
        for cut in 0..bytes.len() {
            assert_eq!(QuorumView::decode(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(QuorumView::decode(&longer), None, "trailing bytes");
        let mut huge = vec![0u8; 32];
        huge.extend_from_slice(&u16::MAX.to_be_bytes());
        assert_eq!(
            QuorumView::decode(&huge),
            None,
            "a list past the address book"
        );

        let c = three(1);
        let own = QuorumView {
            leader: Some(2),
            term: 7,
            commit: 118,
            ..Default::default()
        };
        c.set_quorum(own.clone());
        assert_eq!(*c.quorum_as_leader_sees_it(), own, "nothing heard yet");
        c.set_leader_quorum(3, view.clone());
        assert_eq!(
            *c.quorum_as_leader_sees_it(),
            own,
            "node 3 does not lead it"
        );
        c.set_leader_quorum(2, view.clone());
        assert_eq!(*c.quorum_as_leader_sees_it(), view, "the leader's, fresh");
        c.set_quorum(QuorumView {
            term: 8,
            leader: None,
            ..own.clone()
        });
        assert_eq!(
            c.quorum_as_leader_sees_it().term,
            8,
            "an older term's view is not used"
        );
    }

    #[test]
    fn elections_are_asked_for_until_their_time_is_up() {
        let c = three(1);
        let t = Uuid::from_u128(9);
        assert_eq!(c.elections(0), None);
        c.want_elections(&[(t, 0), (Uuid::nil(), 3)], 1_000);
        c.want_elections(&[(t, 0)], 2_000); // asked again: the later time holds
        let at = |now| {
            c.elections(now).map(|s| {
                let mut v: Vec<_> = s.into_iter().collect();
                v.sort();
                v
            })
        };
        assert_eq!(at(999), Some(vec![(Uuid::nil(), 3), (t, 0)]));
        assert_eq!(at(1_000), Some(vec![(t, 0)]));
        assert_eq!(at(2_000), None);
        assert!(
            c.elections.lock().unwrap().is_empty(),
            "expired ones are forgotten"
        );
    }

    #[test]
    fn leaders_and_endpoints_are_what_was_last_set() {
        let c = three(2);
        assert_eq!(
            c.peers().iter().map(|v| v.id).collect::<Vec<_>>(),
            vec![1, 3]
        );
        assert_eq!(c.leader(1), None);
        c.set_leader(1, Some(3));
        c.set_leader(2, Some(2));
        assert_eq!(c.leader(1), Some(3));
        assert_eq!(c.leader(7), None, "a partition out of range has no leader");
        assert_eq!(c.led_here(), 1);
        c.set_leader(1, None);
        assert_eq!(c.leader(1), None);
        assert_eq!(c.endpoint(3, "PLAINTEXT"), None);
        c.set_endpoints(3, ep(9094));
        c.set_endpoints(2, ep(1)); // a peer cannot overwrite this node's own endpoints
        assert_eq!(c.endpoint(3, "PLAINTEXT").unwrap().port, 9094);
        assert_eq!(c.endpoint(2, "PLAINTEXT").unwrap().port, 9092);
        assert_eq!(c.endpoint(3, "SSL"), None);
        assert!(c.is_up(2), "this node is up");
        assert!(!c.is_up(3), "a peer is down until it connects");
        c.count_inbound(3, 1);
        c.count_inbound(3, 1);
        c.count_inbound(3, -1);
        assert!(c.is_up(3), "one connection of two still open");
        c.count_inbound(3, -1);
        assert!(!c.is_up(3));
        assert!(!c.is_up(9), "not a voter");
        assert_eq!(*c.members(), [1, 2, 3]);
        c.set_members(&[1, 2], &[3], &[]);
        assert_eq!(*c.members(), [1, 2]);
        assert_eq!(*c.removed(), [3]);
        assert!(c.is_member(2) && !c.is_member(3));
        assert_eq!(c.peers().len(), 2, "the address book keeps a removed node");
        // A node joins: the book learns its address, it becomes a member and can be up.
        assert!(!c.knows(4));
        c.set_members(&[1, 2, 4], &[3], &[(4, "127.0.0.1:19004".into())]);
        assert_eq!(c.address(4).as_deref(), Some("127.0.0.1:19004"));
        assert_eq!(
            c.peers().iter().map(|v| v.id).collect::<Vec<_>>(),
            [1, 3, 4]
        );
        assert!(!c.is_up(4));
        c.count_inbound(4, 1);
        assert!(c.is_up(4));
        c.count_inbound(4, -1);
        assert_eq!(c.own_addr(), "127.0.0.1:19002");
        assert_eq!(c.member_at("127.0.0.1:19004"), Some(4));
        assert_eq!(c.member_at("127.0.0.1:19002"), Some(2), "this node's own");
        assert_eq!(c.member_at("127.0.0.1:19003"), None, "a removed node's");
        assert_eq!(c.book_len(), 4);
        assert_eq!(node_addr("::1", 9), "[::1]:9");
        assert_eq!(node_addr("h", 9), "h:9");
        assert_eq!(
            c.voter_ids(),
            [1, 2, 3],
            "the first voters stay as configured"
        );
        let d = c.directory_id(3);
        assert_eq!(d, c.directory_id(3), "stable");
        assert_ne!(d, c.directory_id(1));
        assert_eq!(d.get_version_num(), 4);
        let other = Cluster::new(2, "c2".into(), c.voters.clone(), 4, ep(9092));
        assert_ne!(d, other.directory_id(3), "another cluster's");
        assert_eq!(
            c.nodes_on("PLAINTEXT")
                .iter()
                .map(|(id, e)| (*id, e.port))
                .collect::<Vec<_>>(),
            vec![(2, 9092), (3, 9094)]
        );
    }

    #[test]
    fn topic_leaders_are_what_was_last_set_until_forgotten() {
        let voters = (1..=3)
            .map(|id| Voter {
                id,
                addr: format!("127.0.0.1:1900{id}"),
            })
            .collect();
        let c = Cluster::new(1, "c1".into(), voters, 2, ep(9092));
        let (a, b) = (Uuid::from_u128(10), Uuid::from_u128(11));
        assert_eq!(c.topic_leader(a, 0), None);
        c.set_topic_leader(a, 0, Some(2));
        c.set_topic_leader(a, 1, Some(3));
        c.set_topic_leader(b, 0, Some(1));
        assert_eq!(c.topic_leader(a, 0), Some(2));
        assert_eq!(c.topic_leader(a, 1), Some(3));
        assert_eq!(c.topic_leader(a, 2), None);
        assert_eq!(c.leader(0), None, "__consumer_offsets' leaders are apart");
        c.set_topic_leader(a, 0, Some(1));
        assert_eq!(c.topic_leader(a, 0), Some(1));
        c.set_topic_leader(a, 0, None);
        assert_eq!(c.topic_leader(a, 0), None);
        let joining = GroupView {
            voters: vec![1, 2, 3],
            learners: vec![4],
        };
        c.set_group(a, 1, joining.clone());
        c.set_group(Uuid::nil(), 1, joining);
        assert_eq!(
            c.replicas_of(a, 1, &[3, 1, 2, 4]),
            (vec![3, 1, 2, 4], vec![4])
        );
        assert_eq!(
            c.replicas_of(a, 0, &[1, 2]),
            (vec![1, 2], vec![]),
            "none published"
        );
        // Node 1 is leaving (the metadata log dropped it), node 4 caught up.
        let leaving = GroupView {
            voters: vec![1, 2, 3, 4],
            learners: vec![],
        };
        c.set_group(Uuid::nil(), 1, leaving);
        assert_eq!(
            c.replicas_of(Uuid::nil(), 1, &[2, 3, 4]),
            (vec![2, 3, 4, 1], vec![])
        );
        c.forget_topic(a);
        assert_eq!(c.group(a, 1), None);
        assert!(
            c.group(Uuid::nil(), 1).is_some(),
            "__consumer_offsets' stay"
        );
        assert_eq!(c.topic_leader(a, 1), None);
        assert_eq!(c.topic_leader(b, 0), Some(1), "another topic's stay");
    }

    #[test]
    fn a_leaders_word_is_kept_until_a_later_term_or_its_time_is_up() {
        let c = three(1);
        let (a, b) = (Uuid::from_u128(10), Uuid::from_u128(11));
        let t0 = std::time::Instant::now();
        let at = |ms| t0 + std::time::Duration::from_millis(ms);
        assert_eq!(c.topic_hint_at(a, 0, t0), None);
        c.set_topic_hint_at(a, 0, 2, 5, t0);
        assert_eq!(c.topic_hint_at(a, 0, at(100)), Some(2));
        assert_eq!(c.topic_hint_at(a, 1, at(100)), None, "per partition");
        // A late word of an older term does not replace the newer one while it is fresh...
        c.set_topic_hint_at(a, 0, 3, 4, at(200));
        assert_eq!(c.topic_hint_at(a, 0, at(300)), Some(2));
        // ...and a later term's does at once.
        c.set_topic_hint_at(a, 0, 3, 6, at(400));
        assert_eq!(c.topic_hint_at(a, 0, at(500)), Some(3));
        // Repeated every second it stays; unheard for the TTL it is gone.
        let ttl = TOPIC_HINT_TTL.as_millis() as u64;
        assert_eq!(c.topic_hint_at(a, 0, at(400 + ttl - 1)), Some(3));
        assert_eq!(c.topic_hint_at(a, 0, at(400 + ttl)), None);
        // A stale one of a later term gives way to any word.
        c.set_topic_hint_at(a, 0, 2, 1, at(400 + ttl));
        assert_eq!(c.topic_hint_at(a, 0, at(400 + ttl)), Some(2));
        c.set_topic_hint_at(b, 0, 2, 1, t0);
        c.forget_topic(a);
        assert_eq!(c.topic_hint_at(a, 0, at(400 + ttl)), None);
        assert_eq!(
            c.topic_hint_at(b, 0, at(1)),
            Some(2),
            "another topic's stay"
        );
        c.set_topic_hint_at(a, 1, 2, 1, t0);
        c.retain_topic_hints(|t| t != b);
        assert_eq!(c.topic_hint_at(b, 0, at(1)), None, "deleted");
        assert_eq!(c.topic_hint_at(a, 1, at(1)), Some(2), "kept");
    }
}
