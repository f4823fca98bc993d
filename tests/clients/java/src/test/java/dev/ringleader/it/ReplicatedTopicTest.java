package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ringleader.it.support.Clients;
import dev.ringleader.it.support.RingleaderCluster;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The Java producer and a Java consumer group on a topic of replication factor 3 over three nodes: each partition is
 * a Raft group over the nodes (docs/replication.md, "Topic partitions"), so its leader moves when its node dies and
 * the producer's sends go on without waiting for the node to come back.
 *
 * An idempotent producer (acks=all) sends to every partition while a subscribed consumer (classic or consumer
 * protocol) reads; each round the node leading partition 0 is SIGKILLed, sends go on while it is down (two of three
 * replicas are a majority), then it is started again. Checked: every node describes each partition with the three
 * replicas and a leader; every send is acknowledged while the victim is still down; the acknowledged offsets of each
 * partition are 0..n without a gap or a repeat (the producer's retries through the kills are not written twice);
 * the consumer receives every acknowledged record at its acknowledged offset and nothing else; the time from a kill
 * to the first acknowledgement of a send to partition 0 made after it is printed. Then DeleteRecords on partition 1
 * is answered with its low watermark, and the earliest offset is that watermark after its leader is SIGKILLed.
 */
class ReplicatedTopicTest {
    static final int PARTITIONS = 3;
    static final int ROUNDS = 3;

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"classic", "consumer"})
    void producerAndConsumerRideThroughLeaderKills(String protocol) throws Exception {
        try (RingleaderCluster cluster = RingleaderCluster.start("replicated-" + protocol, 3)) {
            try {
                assertTimeoutPreemptively(Duration.ofSeconds(240), () -> run(cluster, protocol));
            } catch (Throwable t) {
                throw new AssertionError(t.getMessage() + "\nnode logs:" + cluster.tails(), t);
            }
        }
    }

    /** Partition -> (leader id or -1, replica ids) as `node` describes `topic`. */
    static Map<Integer, List<Integer>> describe(RingleaderCluster cluster, int node, String topic) throws Exception {
        try (Admin a = Clients.admin(cluster.node(node))) {
            TopicDescription d = a.describeTopics(List.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS).get(topic);
            Map<Integer, List<Integer>> out = new TreeMap<>();
            for (TopicPartitionInfo p : d.partitions()) {
                List<Integer> v = new ArrayList<>();
                v.add(p.leader() == null ? -1 : p.leader().id());
                p.replicas().forEach(r -> v.add(r.id()));
                out.put(p.partition(), v);
            }
            return out;
        }
    }

    /**
     * An admin client bootstrapped at each node in turn names a leader for every partition of `topic`, each with three
     * replicas. (The admin client sends its Metadata request to whichever node it likes once bootstrapped, so this
     * is not every node's own view: a node that restarted a moment ago answers LEADER_NOT_AVAILABLE for a partition
     * until its replica hears from the leader, as a restarted Kafka broker does until its metadata cache catches up.)
     */
    static boolean settled(RingleaderCluster cluster, String topic) {
        for (int n = 1; n <= 3; n++) {
            try {
                for (List<Integer> v : describe(cluster, n, topic).values()) {
                    if (v.get(0) == -1 || v.size() != 4) {
                        return false;
                    }
                }
            } catch (Exception e) {
                return false;
            }
        }
        return true;
    }

    static void run(RingleaderCluster cluster, String protocol) throws Exception {
        String topic = "java-replicated-" + protocol;
        ClusterFailoverTest.createOnce(cluster, topic, PARTITIONS, (short) 3);
        Clients.waitUntil(Duration.ofSeconds(30), "every node names a leader and three replicas",
                () -> settled(cluster, topic));

        Map<TopicPartition, Map<Long, String>> acked = new ConcurrentHashMap<>();
        List<Exception> failed = Collections.synchronizedList(new ArrayList<>());
        Map<TopicPartition, Map<Long, String>> read = new ConcurrentHashMap<>();
        List<String> duplicates = Collections.synchronizedList(new ArrayList<>());
        AtomicBoolean stop = new AtomicBoolean();
        Properties cp = Clients.consumerProps(cluster.node(2), "replicated-" + protocol, protocol);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        List<Throwable> consumerFailed = Collections.synchronizedList(new ArrayList<>());
        Thread reader = new Thread(() -> {
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
                c.subscribe(List.of(topic));
                while (!stop.get()) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                        String before = read.computeIfAbsent(new TopicPartition(r.topic(), r.partition()),
                                k -> new ConcurrentHashMap<>()).put(r.offset(), r.value());
                        if (before != null && !before.equals(r.value())) {
                            duplicates.add(r.partition() + "@" + r.offset() + ": " + before + " then " + r.value());
                        }
                    }
                }
            } catch (Throwable t) {
                consumerFailed.add(t);
            }
        }, "replicated-reader");
        reader.start();

        Map<String, Object> extra = new HashMap<>();
        extra.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        extra.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 5000);
        extra.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 60000);
        extra.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 500);
        extra.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, 2000);
        extra.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, 50);
        List<Long> recoveryMs = new ArrayList<>();
        int sent = 0;
        try (KafkaProducer<String, String> p = Clients.producer(cluster.node(1), extra)) {
            for (int round = 0; round < ROUNDS; round++) {
                for (int i = 0; i < 90; i++, sent++) {
                    send(p, topic, sent, "r" + round + "-before-" + i, acked, failed, null);
                }
                p.flush();
                // Asked again until a node names partition 0's leader: the node that answers may be the one
                // restarted last round, whose replica may not have heard from the leader yet.
                int[] victimBox = {-1};
                Clients.waitUntil(Duration.ofSeconds(30), "round " + round + ": a leader named for partition 0", () -> {
                    try {
                        victimBox[0] = describe(cluster, 1, topic).get(0).get(0);
                    } catch (Exception e) {
                        victimBox[0] = -1;
                    }
                    return victimBox[0] != -1;
                });
                int victim = victimBox[0];
                assertTrue(victim >= 1 && victim <= 3, "round " + round + ": partition 0's leader is node " + victim);
                cluster.node(victim).kill();
                long killed = System.nanoTime();
                AtomicLong firstAck = new AtomicLong(0);
                for (int i = 0; i < 90; i++, sent++) {
                    // Partition 0 lost its leader: the time to its first acknowledgement is the failover's.
                    send(p, topic, sent, "r" + round + "-after-" + i, acked, failed,
                            sent % PARTITIONS == 0 ? firstAck : null);
                }
                // Every send made while the victim is down is acknowledged before it is back.
                p.flush();
                assertEquals(List.of(), failed, "round " + round + ": sends failed");
                recoveryMs.add(TimeUnit.NANOSECONDS.toMillis(firstAck.get() - killed));
                cluster.node(victim).startAgain();
                Clients.waitUntil(Duration.ofSeconds(30), "round " + round + ": the cluster settles",
                        () -> settled(cluster, topic));
            }
        }
        int ackedCount = acked.values().stream().mapToInt(Map::size).sum();
        assertEquals(sent, ackedCount, "every send acknowledged once, at its own offset");
        for (Map.Entry<TopicPartition, Map<Long, String>> e : acked.entrySet()) {
            List<Long> offsets = new ArrayList<>(new TreeMap<>(e.getValue()).keySet());
            for (int i = 0; i < offsets.size(); i++) {
                assertEquals((long) i, offsets.get(i), e.getKey() + ": acknowledged offsets " + offsets);
            }
        }
        Clients.waitUntil(Duration.ofSeconds(60), "the consumer read every acknowledged record",
                () -> read.values().stream().mapToInt(Map::size).sum() >= ackedCount || !consumerFailed.isEmpty());
        Thread.sleep(1000); // anything beyond the acknowledged records (a duplicate write) shows up here
        stop.set(true);
        reader.join(30000);
        assertEquals(List.of(), consumerFailed, "the consumer failed");
        assertEquals(List.of(), duplicates, "one offset read with two values");
        assertEquals(ClusterPlacementTest.toSorted(acked), ClusterPlacementTest.toSorted(read),
                "what the consumer read is not exactly what was acknowledged");
        deleteRecordsOutlivesItsLeader(cluster, topic, acked);
        Collections.sort(recoveryMs);
        System.out.printf("replicated topic (%s): %d records, %d leader kills, kill to partition 0's first"
                + " acknowledgement p50 %d ms, max %d ms%n", protocol, sent, ROUNDS, recoveryMs.get(recoveryMs.size() / 2),
                recoveryMs.get(recoveryMs.size() - 1));
    }

    /**
     * DeleteRecords goes through partition 1's Raft log: the Admin's deleteRecords is answered with the new low
     * watermark once a majority moved its log start, so after its leader is SIGKILLed the new leader's earliest
     * offset is that watermark (docs/replication.md, "DeleteRecords").
     */
    static void deleteRecordsOutlivesItsLeader(RingleaderCluster cluster, String topic,
            Map<TopicPartition, Map<Long, String>> acked) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 1);
        long upto = acked.get(tp).size() / 2;
        int leader = describe(cluster, 1, topic).get(1).get(0);
        assertTrue(leader >= 1 && leader <= 3, "partition 1's leader is node " + leader);
        int other = leader % 3 + 1;
        Admin a = Clients.admin(cluster.node(other));
        try {
            long low = a.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(upto))).lowWatermarks().get(tp)
                    .get(30, TimeUnit.SECONDS).lowWatermark();
            assertEquals(upto, low, "deleteRecords' low watermark");
        } finally {
            a.close(Duration.ofSeconds(5));
        }
        cluster.node(leader).kill();
        long[] earliest = {-1};
        // Asked through a new Admin each time, once `other` names another leader: the Java Admin (4.x) keeps the
        // partition leaders it looked up, and a call sent to the killed leader just before `other` noticed the
        // kill (its Metadata may still name it for a moment, as Kafka's does until the controller fences it)
        // waits for that node until its deadline, and so does every later call of that Admin, which reuses the
        // leader it cached (then close() without a timeout waits on them too).
        Clients.waitUntil(Duration.ofSeconds(30), "a new leader answers for partition 1", () -> {
            int now;
            try {
                now = describe(cluster, other, topic).get(1).get(0);
            } catch (Exception e) {
                return false;
            }
            if (now == -1 || now == leader) {
                return false;
            }
            Admin b = Clients.admin(cluster.node(other));
            try {
                earliest[0] = b.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp)
                        .get(5, TimeUnit.SECONDS).offset();
                return true;
            } catch (Exception e) {
                return false;
            } finally {
                b.close(Duration.ofSeconds(2));
            }
        });
        assertEquals(upto, earliest[0], "partition 1's earliest offset after its leader was killed");
        cluster.node(leader).startAgain();
        Clients.waitUntil(Duration.ofSeconds(30), "the cluster settles after the deletion",
                () -> settled(cluster, topic));
        System.out.printf("replicated topic: deleteRecords before %d kept through a kill of partition 1's leader"
                + " (node %d)%n", upto, leader);
    }

    static void send(KafkaProducer<String, String> p, String topic, int n, String value,
            Map<TopicPartition, Map<Long, String>> acked, List<Exception> failed, AtomicLong firstAck) {
        p.send(new ProducerRecord<>(topic, n % PARTITIONS, null, value), (md, e) -> {
            if (e != null) {
                failed.add(e);
                return;
            }
            if (firstAck != null) {
                firstAck.compareAndSet(0, System.nanoTime());
            }
            acked.computeIfAbsent(new TopicPartition(md.topic(), md.partition()), k -> new ConcurrentHashMap<>())
                    .put(md.offset(), value);
        });
    }
}
