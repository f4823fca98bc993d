package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ringleader.it.support.Clients;
import dev.ringleader.it.support.RingleaderBroker;
import dev.ringleader.it.support.RingleaderCluster;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.RetriableException;
import org.junit.jupiter.api.Test;

/**
 * The Java consumer (classic protocol) through coordinator failover on a three-node cluster (docs/replication.md).
 *
 * Two members of one group, subscribed to a four-partition topic, commit their partitions' offsets round after
 * round while the node that coordinates the group is killed with SIGKILL (and started again once the group answers
 * on another node). Checked: every commit the client saw acknowledged is the group's committed offset afterwards
 * (asked of the surviving nodes, and again after one more kill at the end); the group answers on a new coordinator
 * each round; both members keep their member ids (the new coordinator loads members and assignment from the
 * replicated log, as Kafka's loader does); and once things settle each partition is owned by exactly one member, in
 * the clients' view and in the coordinator's. The time from each kill to the first acknowledged commit is printed
 * (p50 / p99 / max, in the surefire output).
 *
 * Rounds: `-Dfailover.rounds` (8 in the suite; e.g. `-Dfailover.rounds=100 -Dtest=ClusterFailoverTest` for the long
 * run, or scripts/failover.py for hours of librdkafka). The topic is created once, through one node, and every node
 * then shows it with one topic id (the cluster's metadata log, docs/replication.md). The rounds run once with the
 * classic protocol and once with the consumer protocol (KIP-848), whose members must also keep their epochs. The
 * members only commit: topic data is still per node.
 */
class ClusterFailoverTest {
    static final String TOPIC = "java-failover";
    static final String GROUP = "java-failover";
    static final int PARTITIONS = 4;

    @Test
    void classicMembersCommitThroughCoordinatorKills() throws Exception {
        int rounds = Integer.getInteger("failover.rounds", 8);
        long bound = Long.getLong("failover.bound.s", 90 + rounds * 20L);
        try (RingleaderCluster cluster = RingleaderCluster.start("failover", 3, "group.initial.rebalance.delay.ms=0")) {
            try {
                assertTimeoutPreemptively(Duration.ofSeconds(bound), () -> run(cluster, rounds, "classic"));
            } catch (Throwable t) {
                throw new AssertionError(t.getMessage() + "\nnode logs:" + cluster.tails(), t);
            }
        }
    }

    /** A client bootstrapped at one node learns every node of the cluster, and a topic created once is on all. */
    @Test
    void aClientBootstrappedAtOneNodeLearnsEveryNode() throws Exception {
        try (RingleaderCluster cluster = RingleaderCluster.start("nodes", 3)) {
            createOnce(cluster, TOPIC, 1);
            try (Admin a = Clients.admin(cluster.node(1))) {
                // Bootstrapped at node 1 only, the client still learns every node (DescribeCluster; Metadata
                // lists the same), so it can find a coordinator elsewhere once node 1 is gone.
                // A node learns a peer's endpoint from the peer's hello, so allow the first seconds.
                Map<Integer, String> expected = new TreeMap<>();
                for (int id = 1; id <= 3; id++) {
                    expected.put(id, cluster.node(id).bootstrap());
                }
                Map<Integer, String> seen = new TreeMap<>();
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
                while (!seen.equals(expected) && System.nanoTime() < until) {
                    seen.clear();
                    for (var n : a.describeCluster().nodes().get(30, TimeUnit.SECONDS)) {
                        seen.put(n.id(), n.host() + ":" + n.port());
                    }
                    if (!seen.equals(expected)) {
                        Thread.sleep(200);
                    }
                }
                assertEquals(expected, seen, "the nodes a client bootstrapped at node 1 learns");
            }
        }
    }

    /**
     * The same rounds with the consumer rebalance protocol (KIP-848): the new coordinator loads each member with its
     * epoch from the replicated log, so members keep their ids and their epochs never go back.
     */
    @Test
    void consumerProtocolMembersCommitThroughCoordinatorKills() throws Exception {
        int rounds = Integer.getInteger("failover.rounds", 8);
        long bound = Long.getLong("failover.bound.s", 90 + rounds * 20L);
        try (RingleaderCluster cluster = RingleaderCluster.start("failover848", 3)) {
            try {
                assertTimeoutPreemptively(Duration.ofSeconds(bound), () -> run(cluster, rounds, "consumer"));
            } catch (Throwable t) {
                throw new AssertionError(t.getMessage() + "\nnode logs:" + cluster.tails(), t);
            }
        }
    }

    static KafkaConsumer<String, String> member(RingleaderCluster cluster, String name, String protocol) {
        // consumerProps: session 10 s, heartbeat 1 s (classic), no auto-commit
        Properties p = Clients.consumerProps(cluster.node(1), GROUP, protocol);
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap());
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
        p.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 500);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 5000);
        return new KafkaConsumer<>(p);
    }

    static Admin admin(RingleaderCluster cluster) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, cluster.bootstrap());
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "java-failover-admin");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 5000);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 500);
        return Admin.create(p);
    }

    /** The group as its coordinator describes it, retried while no coordinator answers. */
    static ConsumerGroupDescription describe(Admin admin) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            try {
                return admin.describeConsumerGroups(List.of(GROUP)).all().get(10, TimeUnit.SECONDS).get(GROUP);
            } catch (Exception e) {
                if (System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(100);
            }
        }
    }

    /**
     * Commits `offset` for every partition `c` owns, once; true when the coordinator acknowledged it (and then
     * `acked` holds it). A commit refused while the coordinator moves or the group rebalances is not an error.
     */
    static boolean commit(KafkaConsumer<String, String> c, long offset, Map<TopicPartition, Long> acked) {
        c.poll(Duration.ofMillis(20));
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (TopicPartition tp : c.assignment()) {
            offsets.put(tp, new OffsetAndMetadata(offset));
        }
        if (offsets.isEmpty()) {
            return false;
        }
        try {
            c.commitSync(offsets, Duration.ofSeconds(5));
        } catch (RetriableException | RebalanceInProgressException | CommitFailedException e) {
            return false;
        }
        offsets.forEach((tp, om) -> acked.put(tp, om.offset()));
        return true;
    }

    /** Polls both members until each partition has exactly one owner among them (in the clients' view). */
    static void settle(List<KafkaConsumer<String, String>> members) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            Set<TopicPartition> union = new HashSet<>();
            int owned = 0;
            for (KafkaConsumer<String, String> c : members) {
                c.poll(Duration.ofMillis(50));
                union.addAll(c.assignment());
                owned += c.assignment().size();
            }
            boolean everyMemberOwns = members.stream().allMatch(c -> !c.assignment().isEmpty());
            if (union.size() == PARTITIONS && owned == PARTITIONS && everyMemberOwns) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("the members never split the " + PARTITIONS + " partitions: "
                        + members.stream().map(c -> c.assignment().toString()).toList());
            }
        }
    }

    /**
     * Create `topic` through node 1 and wait until every node describes it with one topic id and `partitions`
     * partitions (the metadata log applies it on every node). Right after start the create waits for the metadata
     * log's first election (about a second).
     */
    static void createOnce(RingleaderCluster cluster, String topic, int partitions) throws Exception {
        createOnce(cluster, topic, partitions, (short) 1);
    }

    /** Create `topic` with this replication factor through node 1 and wait until every node shows it alike. */
    static void createOnce(RingleaderCluster cluster, String topic, int partitions, short replicationFactor)
            throws Exception {
        try (Admin a = Clients.admin(cluster.node(1))) {
            a.createTopics(List.of(new NewTopic(topic, partitions, replicationFactor))).all().get(30, TimeUnit.SECONDS);
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            Map<Integer, Uuid> ids = new TreeMap<>();
            boolean whole = true;
            for (int id = 1; id <= cluster.nodes().size(); id++) {
                try (Admin a = Clients.admin(cluster.node(id))) {
                    TopicDescription d =
                            a.describeTopics(List.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS).get(topic);
                    ids.put(id, d.topicId());
                    whole &= d.partitions().size() == partitions;
                } catch (java.util.concurrent.ExecutionException e) {
                    whole = false;
                }
            }
            if (whole && ids.size() == cluster.nodes().size() && new HashSet<>(ids.values()).size() == 1) {
                return;
            }
            assertTrue(System.nanoTime() < deadline, "nodes disagree on " + topic + ": " + ids);
            Thread.sleep(100);
        }
    }

    static void run(RingleaderCluster cluster, int rounds, String protocol) throws Exception {
        createOnce(cluster, TOPIC, PARTITIONS);
        Map<TopicPartition, Long> acked = new TreeMap<>((x, y) -> Integer.compare(x.partition(), y.partition()));
        List<Double> recoveryMs = new ArrayList<>();
        List<Integer> coordinators = new ArrayList<>();
        List<Integer> epochs = new ArrayList<>();
        try (Admin admin = admin(cluster);
                KafkaConsumer<String, String> c1 = member(cluster, "failover-1", protocol);
                KafkaConsumer<String, String> c2 = member(cluster, "failover-2", protocol)) {
            List<KafkaConsumer<String, String>> members = List.of(c1, c2);
            c1.subscribe(List.of(TOPIC));
            c2.subscribe(List.of(TOPIC));
            settle(members);
            List<String> memberIds = members.stream().map(c -> c.groupMetadata().memberId()).toList();
            // The classic generation, or the member epoch (KIP-848): never back across failovers.
            epochs.addAll(members.stream().map(c -> c.groupMetadata().generationId()).toList());
            long offset = 0;
            for (int r = 0; r < rounds; r++) {
                for (int k = 0; k < 3; k++) {
                    offset++;
                    for (KafkaConsumer<String, String> c : members) {
                        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                        while (!commit(c, offset, acked)) {
                            assertTrue(System.nanoTime() < deadline, "round " + r + ": commit " + offset
                                    + " never acknowledged");
                        }
                    }
                }
                int leader = describe(admin).coordinator().id();
                coordinators.add(leader);
                RingleaderBroker victim = cluster.node(leader);
                victim.kill();
                long killedAt = System.nanoTime();
                offset++;
                // The first member to get a commit acknowledged after the kill ends the outage; both then
                // commit this offset before the round goes on.
                Set<KafkaConsumer<String, String>> done = new HashSet<>();
                long deadline = killedAt + TimeUnit.SECONDS.toNanos(30);
                while (done.size() < members.size()) {
                    for (KafkaConsumer<String, String> c : members) {
                        if (!done.contains(c) && commit(c, offset, acked)) {
                            if (done.isEmpty()) {
                                recoveryMs.add((System.nanoTime() - killedAt) / 1e6);
                            }
                            done.add(c);
                        }
                    }
                    assertTrue(System.nanoTime() < deadline, "round " + r + ": no commit acknowledged within 30 s"
                            + " of killing node " + leader);
                }
                ConsumerGroupDescription d = describe(admin);
                assertNotEquals(leader, d.coordinator().id(), "round " + r + ": node " + leader
                        + " is dead but still named coordinator");
                assertEquals(memberIds, members.stream().map(c -> c.groupMetadata().memberId()).toList(),
                        "round " + r + ": a member rejoined under a new member id");
                for (int i = 0; i < members.size(); i++) {
                    int now = members.get(i).groupMetadata().generationId();
                    assertTrue(now >= epochs.get(i), "round " + r + ": member " + i + "'s epoch went back from "
                            + epochs.get(i) + " to " + now);
                    epochs.set(i, now);
                }
                victim.startAgain();
            }

            settle(members);
            // Each partition owned by exactly one member in the coordinator's view too, matching the clients'.
            ConsumerGroupDescription d = describe(admin);
            assertEquals(GroupState.STABLE, d.groupState());
            Map<String, Set<TopicPartition>> byMember = new HashMap<>();
            Set<TopicPartition> seen = new HashSet<>();
            for (MemberDescription m : d.members()) {
                Set<TopicPartition> parts = m.assignment().topicPartitions();
                for (TopicPartition tp : parts) {
                    assertTrue(seen.add(tp), tp + " is assigned to two members: " + d);
                }
                byMember.put(m.consumerId(), parts);
            }
            assertEquals(PARTITIONS, seen.size(), "not every partition is assigned: " + d);
            for (KafkaConsumer<String, String> c : members) {
                assertEquals(c.assignment(), byMember.get(c.groupMetadata().memberId()),
                        "the client's assignment is not the coordinator's");
            }
            assertEquals(acked, committed(admin), "acknowledged commits missing after " + rounds + " kills");
        }

        // Every node up: one more kill of whichever node coordinates, and the commits are still there.
        try (Admin admin = admin(cluster)) {
            int leader = describe(admin).coordinator().id();
            cluster.node(leader).kill();
            assertEquals(acked, committed(admin), "acknowledged commits missing after the last kill");
            cluster.node(leader).startAgain();
        }

        List<Double> sorted = new ArrayList<>(recoveryMs);
        Collections.sort(sorted);
        double p50 = sorted.get(sorted.size() / 2);
        double p99 = sorted.get(Math.min(sorted.size() - 1, (int) Math.ceil(sorted.size() * 0.99) - 1));
        System.out.printf("cluster failover (java %s, 2 members): rounds=%d coordinators=%s epochs=%s kill-to-commit "
                + "p50=%.0f ms p99=%.0f ms max=%.0f ms%n", protocol, rounds, coordinators, epochs, p50, p99,
                sorted.get(sorted.size() - 1));
        assertTrue(sorted.get(sorted.size() - 1) < 30_000, "a failover took " + sorted.get(sorted.size() - 1) + " ms");
    }

    /** The group's committed offsets, asked of whichever node coordinates now (retried while none does). */
    static Map<TopicPartition, Long> committed(Admin admin) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            try {
                Map<TopicPartition, Long> out =
                        new TreeMap<>((x, y) -> Integer.compare(x.partition(), y.partition()));
                admin.listConsumerGroupOffsets(GROUP).partitionsToOffsetAndMetadata().get(10, TimeUnit.SECONDS)
                        .forEach((tp, om) -> out.put(tp, om.offset()));
                return out;
            } catch (Exception e) {
                if (System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(100);
            }
        }
    }
}
