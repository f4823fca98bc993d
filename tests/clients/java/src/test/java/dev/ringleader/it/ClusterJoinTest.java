package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ringleader.it.support.Clients;
import dev.ringleader.it.support.RingleaderBroker;
import dev.ringleader.it.support.RingleaderCluster;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.zip.CRC32C;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.RaftVoterEndpoint;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.DuplicateVoterException;
import org.apache.kafka.common.errors.InvalidRequestException;
import org.junit.jupiter.api.Test;

/**
 * Adding a node to a running three-node cluster with the Java Admin client (AddRaftVoter, as `kafka-metadata-quorum
 * add-controller` sends it), then moving the cluster onto it.
 *
 * Before: a topic replicated on all three nodes holds acknowledged records and a classic group committed offsets.
 * Node 4 starts with the cluster's `controller.quorum.voters` and a CONTROLLER listener of its own. Checked: a wrong
 * directory id and a node that is a voter already are refused with Kafka's errors; after the addition the metadata
 * log's voters are {1, 2, 3, 4} on every node, and every partition of the topic and of `__consumer_offsets` lists
 * node 4 among its replicas and, once it caught up, its ISR. Then node 1 is removed, and killed once every
 * partition's replicas are {2, 3, 4}, and node 2 is killed:
 * nodes 3 and 4 are a majority of {2, 3, 4} only because node 4 holds everything, and every acknowledged record and
 * committed offset is read back through node 4.
 */
class ClusterJoinTest {
    static final String TOPIC = "java-grow";
    static final String GROUP = "grow-group";
    static final int PARTITIONS = 3;

    @Test
    void anAddedNodeTakesReplicasOfEveryPartitionWithoutLosingACommit() throws Exception {
        try (RingleaderCluster cluster = RingleaderCluster.start("grow", 3)) {
            try {
                assertTimeoutPreemptively(Duration.ofSeconds(300), () -> run(cluster));
            } catch (Throwable t) {
                throw new AssertionError(t.getMessage() + "\nnode logs:" + cluster.tails(), t);
            }
        }
    }

    /**
     * A node's directory id, as every Ringleader node derives it (`engine::cluster::Cluster::directory_id`):
     * CRC-32C of "i/{cluster.id}/directory/{node}" for each of its four 32-bit words, shaped as a version-4 UUID.
     */
    static Uuid directoryId(String clusterId, int node) {
        ByteBuffer b = ByteBuffer.allocate(16);
        for (int i = 0; i < 4; i++) {
            CRC32C c = new CRC32C();
            c.update((i + "/" + clusterId + "/directory/" + node).getBytes(StandardCharsets.UTF_8));
            b.putInt((int) c.getValue());
        }
        byte[] a = b.array();
        a[6] = (byte) ((a[6] & 0x0f) | 0x40);
        a[8] = (byte) ((a[8] & 0x3f) | 0x80);
        ByteBuffer r = ByteBuffer.wrap(a);
        return new Uuid(r.getLong(), r.getLong());
    }

    static void run(RingleaderCluster cluster) throws Exception {
        ClusterFailoverTest.createOnce(cluster, TOPIC, PARTITIONS, (short) 3);
        Map<TopicPartition, Map<Long, String>> acked = produce(cluster, 1, "before-", 30);
        assertEquals(sorted(acked), sorted(consumeAndCommit(cluster, 1, 30)), "read before the addition");
        ClusterMembershipTest.awaitVoters(cluster, 1, Set.of(1, 2, 3));

        RingleaderBroker four = cluster.join(4);
        String controller = four.listener("CONTROLLER");
        int port = Integer.parseInt(controller.substring(controller.lastIndexOf(':') + 1));
        Uuid dir4 = directoryId(cluster.clusterId(), 4);
        Set<RaftVoterEndpoint> endpoints = Set.of(new RaftVoterEndpoint("CONTROLLER", "127.0.0.1", port));
        try (Admin a = Clients.admin(cluster.node(2))) {
            Throwable wrongDir = ClusterMembershipTest.cause(
                    () -> a.addRaftVoter(4, Uuid.randomUuid(), endpoints).all().get(30, TimeUnit.SECONDS));
            assertTrue(wrongDir instanceof InvalidRequestException, "wrong directory id: " + wrongDir);
            Throwable dup = ClusterMembershipTest.cause(() -> a.addRaftVoter(3, directoryId(cluster.clusterId(), 3),
                    Set.of(new RaftVoterEndpoint("CONTROLLER", "127.0.0.1", 1))).all().get(30, TimeUnit.SECONDS));
            assertTrue(dup instanceof DuplicateVoterException, "a voter already: " + dup);
            long t0 = System.nanoTime();
            a.addRaftVoter(4, dir4, endpoints).all().get(30, TimeUnit.SECONDS);
            long answered = System.nanoTime();
            for (int n = 1; n <= 4; n++) {
                ClusterMembershipTest.awaitVoters(cluster, n, Set.of(1, 2, 3, 4));
            }
            long voters = System.nanoTime();
            ClusterMembershipTest.awaitReplicas(cluster, 1, List.of(TOPIC, "__consumer_offsets"),
                    Set.of(1, 2, 3, 4));
            System.out.printf("addition of node 4: answered in %d ms, metadata log voters {1, 2, 3, 4} on every "
                    + "node %d ms later, node 4 in the ISR of all %d partitions %d ms after that%n",
                    (answered - t0) / 1_000_000, (voters - answered) / 1_000_000, PARTITIONS + 50,
                    (System.nanoTime() - voters) / 1_000_000);
            Throwable again = ClusterMembershipTest.cause(
                    () -> a.addRaftVoter(4, dir4, endpoints).all().get(30, TimeUnit.SECONDS));
            assertTrue(again instanceof DuplicateVoterException, "adding node 4 twice: " + again);
        }
        try (Admin a = Clients.admin(cluster.node(4))) {
            Set<Integer> listed = a.describeCluster().nodes().get(15, TimeUnit.SECONDS).stream().map(Node::id)
                    .collect(Collectors.toSet());
            assertEquals(Set.of(1, 2, 3, 4), listed, "DescribeCluster on node 4");
        }

        // Through node 4: more records and commits.
        Map<TopicPartition, Map<Long, String>> more = produce(cluster, 4, "joined-", 30);
        merge(acked, more);
        assertEquals(sorted(more), sorted(consumeAndCommit(cluster, 4, 30)), "read on through node 4");
        Map<TopicPartition, Long> committed = ClusterMembershipTest.committed(cluster, 4, GROUP);
        committed.forEach((tp, o) -> assertEquals((long) acked.get(tp).size(), (long) o, "committed " + tp));

        // Node 1 leaves and goes, node 2 goes: nodes 3 and 4 carry on, which needs node 4's copy of everything.
        try (Admin a = Clients.admin(cluster.node(3))) {
            a.removeRaftVoter(1, directoryId(cluster.clusterId(), 1)).all().get(30, TimeUnit.SECONDS);
        }
        // Killed only once every group let node 1 go: a group of {1, 2, 3, 4} needs three of them.
        ClusterMembershipTest.awaitVoters(cluster, 4, Set.of(2, 3, 4));
        ClusterMembershipTest.awaitReplicas(cluster, 4, List.of(TOPIC, "__consumer_offsets"), Set.of(2, 3, 4));
        cluster.node(1).kill();
        cluster.node(2).kill();
        // The group's commits, asked of node 4 by the Admin client (which reaches the coordinator only if
        // node 4's Metadata lists it: every node must have learnt every other's client endpoint).
        long killed = System.nanoTime();
        List<Map<TopicPartition, Long>> seen = new ArrayList<>(List.of(Map.of()));
        Clients.waitUntil(Duration.ofSeconds(90), "the group's commits through node 4 with nodes 1 and 2 gone", () -> {
            try {
                seen.set(0, ClusterMembershipTest.committed(cluster, 4, GROUP));
                return seen.get(0).equals(committed);
            } catch (Exception e) {
                return false;
            }
        });
        System.out.printf("nodes 1 and 2 gone: the group's commits read through node 4 %d ms later%n",
                (System.nanoTime() - killed) / 1_000_000);
        Map<TopicPartition, Map<Long, String>> all = ClusterMembershipTest.readAll(cluster, 4, TOPIC, PARTITIONS, 60);
        assertEquals(sorted(acked), sorted(all), "every acknowledged record, read through node 4");
    }

    static Map<TopicPartition, Map<Long, String>> produce(RingleaderCluster cluster, int node, String prefix,
            int count) throws Exception {
        return ClusterMembershipTest.produce(cluster, node, prefix, count, TOPIC, PARTITIONS);
    }

    static Map<TopicPartition, Map<Long, String>> consumeAndCommit(RingleaderCluster cluster, int node, int count) {
        return ClusterMembershipTest.consumeAndCommit(cluster, node, count, TOPIC, GROUP);
    }

    static void merge(Map<TopicPartition, Map<Long, String>> into, Map<TopicPartition, Map<Long, String>> more) {
        ClusterMembershipTest.merge(into, more);
    }

    static Map<String, Map<Long, String>> sorted(Map<TopicPartition, Map<Long, String>> m) {
        return ClusterMembershipTest.sorted(m);
    }
}
