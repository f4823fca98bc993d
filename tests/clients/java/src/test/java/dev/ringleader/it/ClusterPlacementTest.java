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
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.junit.jupiter.api.Test;

/**
 * The Java producer and consumer on a three-node cluster whose topic partitions each live on one node, the one the
 * metadata log placed it on (topic data is not replicated yet, docs/replication.md).
 *
 * Two idempotent producers (acks=all), bootstrapped at different nodes so their producer ids come from different
 * nodes, send to every partition of a six-partition topic while one node after another is killed with SIGKILL and
 * started again. Checked: every node describes the same leader for each partition, spread over the three nodes;
 * while a node is down its partitions have no leader; every send completes (those to the dead node's partitions
 * wait for it, within the delivery timeout); and afterwards a consumer bootstrapped at a third node reads every
 * acknowledged record at its acknowledged offset, each exactly once (the producers' retries through the kills are
 * not written twice, and the two producers' ids never collide).
 */
class ClusterPlacementTest {
    static final String TOPIC = "java-placed";
    static final int PARTITIONS = 6;

    @Test
    void producedRecordsSurviveNodeKillsOnTheirPlacedNodes() throws Exception {
        try (RingleaderCluster cluster = RingleaderCluster.start("placed", 3)) {
            try {
                assertTimeoutPreemptively(Duration.ofSeconds(240), () -> run(cluster));
            } catch (Throwable t) {
                throw new AssertionError(t.getMessage() + "\nnode logs:" + cluster.tails(), t);
            }
        }
    }

    /** Partition -> leader id as `node` describes it (-1 for none). */
    static Map<Integer, Integer> leaders(RingleaderCluster cluster, int node) throws Exception {
        try (Admin a = Clients.admin(cluster.node(node))) {
            TopicDescription d = a.describeTopics(List.of(TOPIC)).allTopicNames().get(10, TimeUnit.SECONDS).get(TOPIC);
            Map<Integer, Integer> out = new TreeMap<>();
            for (TopicPartitionInfo p : d.partitions()) {
                out.put(p.partition(), p.leader() == null ? -1 : p.leader().id());
            }
            return out;
        }
    }

    static void run(RingleaderCluster cluster) throws Exception {
        ClusterFailoverTest.createOnce(cluster, TOPIC, PARTITIONS);
        Map<Integer, Integer> placed = null;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            List<Map<Integer, Integer>> views = new ArrayList<>();
            for (int n = 1; n <= 3; n++) {
                views.add(leaders(cluster, n));
            }
            if (new HashSet<>(views).size() == 1 && !views.get(0).containsValue(-1)) {
                placed = views.get(0);
                break;
            }
            assertTrue(System.nanoTime() < deadline, "nodes disagree on the leaders: " + views);
            Thread.sleep(200);
        }
        assertEquals(Set.of(1, 2, 3), new HashSet<>(placed.values()), "leaders not spread: " + placed);

        // (partition, offset) -> value of every acknowledged send; failures collected.
        Map<TopicPartition, Map<Long, String>> acked = new ConcurrentHashMap<>();
        List<Exception> failed = Collections.synchronizedList(new ArrayList<>());
        Map<String, Object> extra = new HashMap<>();
        extra.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        extra.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 5000);
        extra.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 90000);
        extra.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 500);
        extra.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, 2000);
        int sent = 0;
        try (KafkaProducer<String, String> p1 = Clients.producer(cluster.node(1), extra);
                KafkaProducer<String, String> p2 = Clients.producer(cluster.node(2), extra)) {
            List<KafkaProducer<String, String>> producers = List.of(p1, p2);
            for (int victim = 1; victim <= 3; victim++) {
                for (int phase = 0; phase < 2; phase++) {
                    if (phase == 1) {
                        cluster.node(victim).kill();
                        final int dead = victim;
                        final Map<Integer, Integer> where = placed;
                        // The survivors stop naming the dead node as a leader.
                        Clients.waitUntil(Duration.ofSeconds(20), "node " + dead + "'s partitions lose their leader",
                                () -> {
                                    try {
                                        Map<Integer, Integer> view = leaders(cluster, dead % 3 + 1);
                                        return where.entrySet().stream().allMatch(e -> e.getValue() == dead
                                                ? view.get(e.getKey()) == -1 : view.get(e.getKey()).equals(e.getValue()));
                                    } catch (Exception e) {
                                        return false;
                                    }
                                });
                    }
                    for (int i = 0; i < 60; i++, sent++) {
                        int partition = i % PARTITIONS;
                        String value = "v" + victim + "-" + phase + "-" + i;
                        KafkaProducer<String, String> p = producers.get(i % 2);
                        p.send(new ProducerRecord<>(TOPIC, partition, null, value), (md, e) -> {
                            if (e != null) {
                                failed.add(e);
                            } else {
                                acked.computeIfAbsent(new TopicPartition(md.topic(), md.partition()),
                                        k -> new ConcurrentHashMap<>()).put(md.offset(), value);
                            }
                        });
                    }
                    // The live nodes' partitions are acknowledged while the victim is down.
                    if (phase == 1) {
                        Thread.sleep(1000);
                        cluster.node(victim).startAgain();
                    }
                }
            }
            p1.flush();
            p2.flush();
        }
        assertEquals(List.of(), failed, "sends failed");
        int ackedCount = acked.values().stream().mapToInt(Map::size).sum();
        assertEquals(sent, ackedCount, "every send acknowledged once, at its own offset");

        // Read back through node 3 only: every acknowledged record at its offset, nothing else but those.
        Properties cp = Clients.consumerProps(cluster.node(3), "placed-reader", "classic");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        Map<TopicPartition, Map<Long, String>> read = new HashMap<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            List<TopicPartition> all = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) {
                all.add(new TopicPartition(TOPIC, p));
            }
            c.assign(all);
            c.seekToBeginning(all);
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            int got = 0;
            while (got < ackedCount && System.nanoTime() < until) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    read.computeIfAbsent(new TopicPartition(r.topic(), r.partition()), k -> new HashMap<>())
                            .put(r.offset(), r.value());
                    got++;
                }
            }
            // A little longer: anything beyond the acknowledged records (a duplicate) shows up here.
            long more = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
            while (System.nanoTime() < more) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    read.computeIfAbsent(new TopicPartition(r.topic(), r.partition()), k -> new HashMap<>())
                            .put(r.offset(), r.value());
                }
            }
        }
        assertEquals(new TreeMap<>(toSorted(acked)), new TreeMap<>(toSorted(read)),
                "what the consumer read is not exactly what was acknowledged");
    }

    static Map<String, Map<Long, String>> toSorted(Map<TopicPartition, Map<Long, String>> m) {
        Map<String, Map<Long, String>> out = new TreeMap<>();
        m.forEach((tp, v) -> out.put(tp.toString(), new TreeMap<>(v)));
        return out;
    }
}
