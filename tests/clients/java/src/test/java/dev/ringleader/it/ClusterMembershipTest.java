package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ringleader.it.support.Clients;
import dev.ringleader.it.support.RingleaderCluster;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.InvalidRequestException;
import org.apache.kafka.common.errors.VoterNotFoundException;
import org.junit.jupiter.api.Test;

/**
 * Removing a node from a three-node cluster with the Java Admin client, as `kafka-metadata-quorum remove-controller`
 * does: DescribeQuorum names the voters and their directory ids, RemoveRaftVoter takes node 3 out.
 *
 * Before: a topic replicated on all three nodes holds acknowledged records and a classic group committed offsets.
 * Checked: a wrong directory id, a node that is no voter and a removal that would leave one node are refused with
 * Kafka's errors; after the removal the metadata log's voters are {1, 2} on both nodes, Metadata and DescribeCluster
 * list nodes 1 and 2 only, and every partition's replicas are {1, 2}; node 3 is then killed and the cluster goes on
 * (records acknowledged with acks=all, offsets committed); both remaining nodes are killed and restarted; and every
 * acknowledged record and every committed offset is there afterwards, with the voters still {1, 2}.
 */
class ClusterMembershipTest {
    static final String TOPIC = "java-shrink";
    static final String GROUP = "shrink-group";
    static final int PARTITIONS = 3;

    @Test
    void aRemovedNodeLeavesTheClusterWithoutLosingACommit() throws Exception {
        try (RingleaderCluster cluster = RingleaderCluster.start("shrink", 3)) {
            try {
                assertTimeoutPreemptively(Duration.ofSeconds(240), () -> run(cluster));
            } catch (Throwable t) {
                throw new AssertionError(t.getMessage() + "\nnode logs:" + cluster.tails(), t);
            }
        }
    }

    static QuorumInfo quorum(RingleaderCluster cluster, int node) throws Exception {
        try (Admin a = Clients.admin(cluster.node(node))) {
            return a.describeMetadataQuorum().quorumInfo().get(15, TimeUnit.SECONDS);
        }
    }

    static Set<Integer> voters(QuorumInfo q) {
        return q.voters().stream().map(QuorumInfo.ReplicaState::replicaId).collect(Collectors.toSet());
    }

    /** Waits until `node`'s metadata log has these voters and a leader among them. */
    static QuorumInfo awaitVoters(RingleaderCluster cluster, int node, Set<Integer> want) {
        QuorumInfo[] last = new QuorumInfo[1];
        Clients.waitUntil(Duration.ofSeconds(60), "node " + node + "'s metadata voters to be " + want, () -> {
            try {
                last[0] = quorum(cluster, node);
                return voters(last[0]).equals(want) && want.contains(last[0].leaderId());
            } catch (Exception e) {
                return false;
            }
        });
        return last[0];
    }

    /** Waits until `node` reports `want` as the replicas and the ISR of every partition of `topics`. */
    static void awaitReplicas(RingleaderCluster cluster, int node, List<String> topics, Set<Integer> want) {
        String[] last = {""};
        Clients.waitUntil(Duration.ofSeconds(90), "replicas and ISR " + want + " of every partition on node " + node,
                () -> {
            try (Admin a = Clients.admin(cluster.node(node))) {
                Map<String, TopicDescription> ds = a.describeTopics(topics).allTopicNames().get(15, TimeUnit.SECONDS);
                List<String> other = new ArrayList<>();
                for (TopicDescription d : ds.values()) {
                    for (TopicPartitionInfo p : d.partitions()) {
                        Set<Integer> replicas = p.replicas().stream().map(Node::id).collect(Collectors.toSet());
                        Set<Integer> isr = p.isr().stream().map(Node::id).collect(Collectors.toSet());
                        if (!replicas.equals(want) || !isr.equals(want)) {
                            other.add(d.name() + "-" + p.partition() + " replicas " + replicas + " isr " + isr);
                        }
                    }
                }
                last[0] = other.toString();
                return other.isEmpty();
            } catch (Exception e) {
                return false;
            }
        });
    }

    /** Every record of `topic`'s `partitions` from the start, read through `node` until `want` arrived (or 90 s). */
    static Map<TopicPartition, Map<Long, String>> readAll(RingleaderCluster cluster, int node, String topic,
            int partitions, int want) {
        Properties cp = Clients.consumerProps(cluster.node(node), topic + "-reader", "classic");
        Map<TopicPartition, Map<Long, String>> all = new HashMap<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            int got = 0;
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            while (got < want && System.nanoTime() < until) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    all.computeIfAbsent(new TopicPartition(r.topic(), r.partition()), k -> new TreeMap<>())
                            .put(r.offset(), r.value());
                    got++;
                }
            }
        }
        return all;
    }

    /** Sends `count` records with acks=all through `node`; returns partition -> offset -> value. */
    static Map<TopicPartition, Map<Long, String>> produce(RingleaderCluster cluster, int node, String prefix, int count)
            throws Exception {
        return produce(cluster, node, prefix, count, TOPIC, PARTITIONS);
    }

    /** Sends `count` records with acks=all to `topic`'s `partitions` through `node`. */
    static Map<TopicPartition, Map<Long, String>> produce(RingleaderCluster cluster, int node, String prefix, int count,
            String topic, int partitions) throws Exception {
        Map<TopicPartition, Map<Long, String>> out = new HashMap<>();
        try (KafkaProducer<String, String> p = Clients.producer(cluster.node(node), Map.of())) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                fs.add(p.send(new ProducerRecord<>(topic, i % partitions, null, prefix + i)));
            }
            p.flush();
            for (int i = 0; i < count; i++) {
                RecordMetadata md = fs.get(i).get(60, TimeUnit.SECONDS);
                out.computeIfAbsent(new TopicPartition(topic, md.partition()), k -> new TreeMap<>())
                        .put(md.offset(), prefix + i);
            }
        }
        return out;
    }

    /** The group reads on from its committed offsets through `node` until it has `count` records, and commits. */
    static Map<TopicPartition, Map<Long, String>> consumeAndCommit(RingleaderCluster cluster, int node, int count) {
        return consumeAndCommit(cluster, node, count, TOPIC, GROUP);
    }

    /** `group` reads `topic` on from its committed offsets through `node` until it has `count` records, and commits. */
    static Map<TopicPartition, Map<Long, String>> consumeAndCommit(RingleaderCluster cluster, int node, int count,
            String topic, String group) {
        Properties cp = Clients.consumerProps(cluster.node(node), group, "classic");
        Map<TopicPartition, Map<Long, String>> read = new HashMap<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.subscribe(List.of(topic));
            int got = 0;
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (got < count && System.nanoTime() < until) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    read.computeIfAbsent(new TopicPartition(r.topic(), r.partition()), k -> new TreeMap<>())
                            .put(r.offset(), r.value());
                    got++;
                }
            }
            assertEquals(count, got, "records the group read on from its commits");
            c.commitSync(Duration.ofSeconds(30));
        }
        return read;
    }

    static Map<TopicPartition, Long> committed(RingleaderCluster cluster, int node) throws Exception {
        return committed(cluster, node, GROUP);
    }

    static Map<TopicPartition, Long> committed(RingleaderCluster cluster, int node, String group) throws Exception {
        Admin a = Clients.admin(cluster.node(node));
        try {
            Map<TopicPartition, OffsetAndMetadata> m = a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                    .get(30, TimeUnit.SECONDS);
            Map<TopicPartition, Long> out = new TreeMap<>((x, y) -> x.toString().compareTo(y.toString()));
            m.forEach((tp, o) -> out.put(tp, o.offset()));
            return out;
        } finally {
            // Bounded: a call still waiting for a node must not hold the test past its own deadline.
            a.close(Duration.ofSeconds(5));
        }
    }

    static void merge(Map<TopicPartition, Map<Long, String>> into, Map<TopicPartition, Map<Long, String>> more) {
        more.forEach((tp, m) -> into.computeIfAbsent(tp, k -> new TreeMap<>()).putAll(m));
    }

    static Map<String, Map<Long, String>> sorted(Map<TopicPartition, Map<Long, String>> m) {
        Map<String, Map<Long, String>> out = new TreeMap<>();
        m.forEach((tp, v) -> out.put(tp.toString(), new TreeMap<>(v)));
        return out;
    }

    interface Call {
        void run() throws Exception;
    }

    /** What `call` failed with (the cause of the future's ExecutionException); fails if it succeeded. */
    static Throwable cause(Call call) {
        try {
            call.run();
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (Exception e) {
            throw new AssertionError(e);
        }
        throw new AssertionError("the call succeeded");
    }

    static void run(RingleaderCluster cluster) throws Exception {
        ClusterFailoverTest.createOnce(cluster, TOPIC, PARTITIONS, (short) 3);
        Map<TopicPartition, Map<Long, String>> acked = produce(cluster, 1, "before-", 30);
        Map<TopicPartition, Map<Long, String>> read = consumeAndCommit(cluster, 1, 30);
        assertEquals(sorted(acked), sorted(read), "read before the removal");

        QuorumInfo q = awaitVoters(cluster, 1, Set.of(1, 2, 3));
        Map<Integer, Uuid> dirs = new HashMap<>();
        q.voters().forEach(v -> dirs.put(v.replicaId(), v.replicaDirectoryId()));
        assertEquals(3, new HashSet<>(dirs.values()).size(), "one directory id per voter: " + dirs);
        assertNotEquals(Uuid.ZERO_UUID, dirs.get(3));
        assertEquals(quorum(cluster, 2).voters().stream().map(QuorumInfo.ReplicaState::replicaDirectoryId)
                .collect(Collectors.toSet()), new HashSet<>(dirs.values()), "every node names the same ids");

        try (Admin a = Clients.admin(cluster.node(2))) {
            Throwable wrongDir = cause(() -> a.removeRaftVoter(3, Uuid.randomUuid()).all().get(30, TimeUnit.SECONDS));
            assertTrue(wrongDir instanceof VoterNotFoundException, "wrong directory id: " + wrongDir);
            // The removal, asked of node 2 (the metadata log's leader or not).
            long t0 = System.nanoTime();
            a.removeRaftVoter(3, dirs.get(3)).all().get(30, TimeUnit.SECONDS);
            long answered = System.nanoTime();
            awaitVoters(cluster, 1, Set.of(1, 2));
            awaitVoters(cluster, 2, Set.of(1, 2));
            System.out.printf("removal of node 3: answered in %d ms, metadata log voters {1, 2} on both nodes "
                    + "%d ms later%n", (answered - t0) / 1_000_000, (System.nanoTime() - answered) / 1_000_000);
        }
        try (Admin a = Clients.admin(cluster.node(1))) {
            Set<Integer> listed = a.describeCluster().nodes().get(15, TimeUnit.SECONDS).stream().map(Node::id)
                    .collect(Collectors.toSet());
            assertEquals(Set.of(1, 2), listed, "DescribeCluster after the removal");
            // Each partition's group lets node 3 go on its leader's next ticks; Metadata lists it until then.
            for (int n = 1; n <= 2; n++) {
                awaitReplicas(cluster, n, List.of(TOPIC, "__consumer_offsets"), Set.of(1, 2));
            }
            Throwable again = cause(() -> a.removeRaftVoter(3, dirs.get(3)).all().get(30, TimeUnit.SECONDS));
            assertTrue(again instanceof VoterNotFoundException, "removing node 3 twice: " + again);
            Throwable lastTwo = cause(() -> a.removeRaftVoter(2, dirs.get(2)).all().get(30, TimeUnit.SECONDS));
            assertTrue(lastTwo instanceof InvalidRequestException, "leaving one node: " + lastTwo);
        }

        // Node 3 goes; the two left go on without it.
        cluster.node(3).kill();
        Map<TopicPartition, Map<Long, String>> after = produce(cluster, 1, "after-", 30);
        merge(acked, after);
        assertEquals(sorted(after), sorted(consumeAndCommit(cluster, 2, 30)), "read on after the removal");
        Map<TopicPartition, Long> committedBefore = committed(cluster, 1);
        assertEquals(PARTITIONS, committedBefore.size());
        committedBefore.forEach((tp, o) -> assertEquals((long) acked.get(tp).size(), (long) o, "committed " + tp));

        // Both remaining nodes crash and come back: the voters, the records and the commits are all there.
        cluster.node(1).kill();
        cluster.node(2).kill();
        cluster.node(1).startAgain();
        cluster.node(2).startAgain();
        awaitVoters(cluster, 1, Set.of(1, 2));
        List<Map<TopicPartition, Long>> seen = new ArrayList<>(List.of(Map.of()));
        Clients.waitUntil(Duration.ofSeconds(60), "the group's commits after the restart", () -> {
            try {
                seen.set(0, committed(cluster, 2));
                return seen.get(0).equals(committedBefore);
            } catch (Exception e) {
                return false;
            }
        });
        Map<TopicPartition, Map<Long, String>> all = readAll(cluster, 2, TOPIC, PARTITIONS, 60);
        assertEquals(sorted(acked), sorted(all), "every acknowledged record after the restart");
    }
}
