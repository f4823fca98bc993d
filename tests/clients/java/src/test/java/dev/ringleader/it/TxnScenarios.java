package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ringleader.it.support.Broker;
import dev.ringleader.it.support.Clients;
import dev.ringleader.it.support.Txn;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;

/**
 * The transaction scenarios of TransactionsTest and TransactionsDiffTest. Each runs against one broker, asserts what
 * must hold on any broker that implements Kafka transactions, and returns its outcome: the steps whose result a
 * client can observe (mostly "ok" or the exception class), free of anything that varies from run to run, so two
 * brokers' outcomes can be compared and a broker's outcome can be compared with the reference broker's.
 *
 * Names of topics, groups and transactional ids carry a `tag` so scenarios can share a broker.
 */
final class TxnScenarios {
    private TxnScenarios() {}

    static final int PARTITIONS = 3;

    /** Producer settings of every scenario: bounded blocking (initTransactions against a broker without a coordinator). */
    static Map<String, Object> bounded() {
        return Map.of(ProducerConfig.MAX_BLOCK_MS_CONFIG, 15_000);
    }

    static void topic(Broker b, String name) throws Exception {
        try (Admin a = Clients.admin(b)) {
            Clients.createTopic(a, name, PARTITIONS);
        }
    }

    static Map<TopicPartition, Long> nonZero(Map<TopicPartition, Long> m) {
        Map<TopicPartition, Long> out = new TreeMap<>(java.util.Comparator.comparing(TopicPartition::toString));
        m.forEach((k, v) -> {
            if (v != 0) {
                out.put(k, v);
            }
        });
        return out;
    }

    // ------------------------------------------------------------------------------------------------------ (a)

    /**
     * One committed transaction of N records and one aborted one of M on a 3-partition topic: read_committed sees
     * exactly the N, read_uncommitted all N+M, and both end at the high watermark, which counts one control record
     * (marker) per partition per transaction.
     */
    static List<String> commitAndAbortVisibility(Broker b, String tag) throws Exception {
        String topic = "txn-visibility-" + tag;
        int n = 30;
        int m = 12;
        topic(b, topic);
        List<RecordMetadata> committed = new ArrayList<>();
        List<RecordMetadata> aborted = new ArrayList<>();
        try (KafkaProducer<String, String> p = Txn.producer(b, "tx-visibility-" + tag, bounded())) {
            p.initTransactions();
            p.beginTransaction();
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                fs.add(p.send(new ProducerRecord<>(topic, "k" + i, "c" + i)));
            }
            p.commitTransaction();
            for (var f : fs) {
                committed.add(f.get());
            }
            p.beginTransaction();
            fs.clear();
            for (int i = 0; i < m; i++) {
                fs.add(p.send(new ProducerRecord<>(topic, "k" + i, "a" + i)));
            }
            p.flush(); // the aborted records reach the log before the abort
            for (var f : fs) {
                aborted.add(f.get());
            }
            p.abortTransaction();
        }
        // Expected high watermark per partition: its data records plus one marker per transaction that touched it.
        Map<TopicPartition, Long> expected = new HashMap<>();
        for (TopicPartition tp : Txn.partitions(topic, PARTITIONS)) {
            expected.put(tp, 0L);
        }
        for (List<RecordMetadata> txn : List.of(committed, aborted)) {
            for (RecordMetadata md : txn) {
                expected.merge(new TopicPartition(topic, md.partition()), 1L, Long::sum);
            }
            txn.stream().map(md -> new TopicPartition(topic, md.partition())).distinct()
                    .forEach(tp -> expected.merge(tp, 1L, Long::sum));
        }
        // Markers are written after EndTxn is answered: wait for them.
        Clients.waitUntil(Duration.ofSeconds(20), "high watermarks " + expected + " (data + one marker per txn)",
                () -> Txn.highWatermarks(b, topic, PARTITIONS).equals(expected));

        Txn.Read rc = Txn.readUntil(b, topic, "read_committed", expected, Duration.ofSeconds(30));
        Txn.Read ru = Txn.readUntil(b, topic, "read_uncommitted", expected, Duration.ofSeconds(30));
        List<String> wantCommitted = IntStream.range(0, n).mapToObj(i -> "c" + i).sorted().toList();
        assertEquals(wantCommitted, rc.values().stream().sorted().toList(), "read_committed: exactly the committed records");
        assertEquals(committed.stream().map(md -> md.partition() + "@" + md.offset()).sorted().toList(),
                rc.records().stream().map(r -> r.partition() + "@" + r.offset()).sorted().toList(),
                "read_committed records at the offsets the producer was told");
        List<String> wantAll = new ArrayList<>(wantCommitted);
        IntStream.range(0, m).mapToObj(i -> "a" + i).forEach(wantAll::add);
        assertEquals(wantAll.stream().sorted().toList(), ru.values().stream().sorted().toList(),
                "read_uncommitted: committed and aborted data records, no control records");
        assertEquals(expected, rc.positions(), "read_committed positions end past the markers");
        assertEquals(expected, ru.positions(), "read_uncommitted positions end past the markers");
        assertEquals(expected, Txn.lastStableOffsets(b, topic, PARTITIONS), "LSO = high watermark once both ended");
        return List.of("read_committed:" + rc.records().size(), "read_uncommitted:" + ru.records().size(),
                "end offsets count markers:" + (expected.values().stream().mapToLong(x -> x).sum() - n - m));
    }

    // ------------------------------------------------------------------------------------------------------ (b)

    /**
     * Zombie fencing. `how`: "same-partition" (the zombie's next record goes to a partition already in its
     * transaction: straight to the partition leader with the old epoch), "new-partition" (it must first be added to
     * the transaction, which the coordinator refuses), "idle" (the zombie had committed; its next transaction is
     * fenced). The new producer's transaction commits and only its records are visible to read_committed.
     */
    static List<String> fencing(Broker b, String tag, String how) throws Exception {
        String topic = "txn-fence-" + how + "-" + tag;
        String txnId = "tx-fence-" + how + "-" + tag;
        topic(b, topic);
        List<String> out = new ArrayList<>();
        // k1 and k2 land on different partitions (murmur2 of the key, 3 partitions): checked below.
        try (KafkaProducer<String, String> zombie = Txn.producer(b, txnId, bounded())) {
            zombie.initTransactions();
            zombie.beginTransaction();
            RecordMetadata first = zombie.send(new ProducerRecord<>(topic, "k1", "zombie-1")).get(30, TimeUnit.SECONDS);
            if (how.equals("idle")) {
                zombie.commitTransaction();
                out.add("zombie commit before fencing:ok");
            }
            try (KafkaProducer<String, String> fresh = Txn.producer(b, txnId, bounded())) {
                fresh.initTransactions();
                out.add("second initTransactions:ok");
                String key = how.equals("new-partition") ? "k2" : "k1";
                if (how.equals("idle")) {
                    zombie.beginTransaction();
                }
                String send = Txn.outcome(() -> {
                    RecordMetadata md = zombie.send(new ProducerRecord<>(topic, key, "zombie-2")).get(30, TimeUnit.SECONDS);
                    if (how.equals("new-partition")) {
                        assertTrue(md.partition() != first.partition(), "k1 and k2 should be on different partitions");
                    }
                });
                out.add("zombie send:" + send);
                out.add("zombie commit:" + Txn.outcome(zombie::commitTransaction));
                out.add("zombie abort:" + Txn.outcome(zombie::abortTransaction));

                fresh.beginTransaction();
                fresh.send(new ProducerRecord<>(topic, "k1", "fresh-1"));
                fresh.send(new ProducerRecord<>(topic, "k2", "fresh-2"));
                fresh.commitTransaction();
                out.add("new producer commit:ok");
            }
        }
        Txn.Read rc = Txn.readAll(b, topic, PARTITIONS, "read_committed");
        List<String> want = how.equals("idle") ? List.of("fresh-1", "fresh-2", "zombie-1") : List.of("fresh-1", "fresh-2");
        assertEquals(want, rc.values().stream().sorted().toList(), "read_committed after fencing");
        Txn.Read ru = Txn.readAll(b, topic, PARTITIONS, "read_uncommitted");
        assertTrue(ru.values().contains("zombie-1"), "the zombie's first record is in the log: " + ru.values());
        assertFalse(rc.values().contains("zombie-2"), "the zombie's record after fencing is never committed");
        return out;
    }

    // ------------------------------------------------------------------------------------------------------ (c)

    /**
     * Consume-transform-produce: K input records, read with read_committed, each written transformed to the output
     * with the consumed offsets committed in the same transaction (sendOffsetsToTransaction with the consumer's group
     * metadata); the second transaction is aborted and redone. The read_committed output holds every input record
     * exactly once and the group's committed offsets are the input's end offsets.
     */
    static List<String> consumeTransformProduce(Broker b, String tag, String protocol) throws Exception {
        String in = "ctp-in-" + tag;
        String outTopic = "ctp-out-" + tag;
        String group = "ctp-" + tag;
        int k = 90;
        topic(b, in);
        topic(b, outTopic);
        Clients.produceKeyed(b, in, k);
        Map<TopicPartition, Long> inEnds = Txn.highWatermarks(b, in, PARTITIONS);
        List<String> out = new ArrayList<>();
        int abortedRecords = 0;
        Properties cp = Clients.consumerProps(b, group, protocol);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 10);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp);
             KafkaProducer<String, String> p = Txn.producer(b, "tx-ctp-" + tag, bounded())) {
            p.initTransactions();
            c.subscribe(List.of(in));
            int batches = 0;
            boolean abortedOnce = false;
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (true) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("consume-transform-produce did not finish in 60 s; assignment "
                            + c.assignment());
                }
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) {
                    if (c.assignment().size() == PARTITIONS && inEnds.entrySet().stream()
                            .allMatch(e -> c.position(e.getKey()) >= e.getValue())) {
                        break;
                    }
                    continue;
                }
                batches++;
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                Map<TopicPartition, Long> first = new HashMap<>();
                for (ConsumerRecord<String, String> r : recs) {
                    p.send(new ProducerRecord<>(outTopic, r.key(), "t-" + r.value()));
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    next.put(tp, new OffsetAndMetadata(r.offset() + 1));
                    first.putIfAbsent(tp, r.offset());
                }
                p.sendOffsetsToTransaction(next, c.groupMetadata());
                if (batches == 2 && !abortedOnce) {
                    p.flush();
                    p.abortTransaction();
                    abortedOnce = true;
                    abortedRecords = recs.count();
                    first.forEach(c::seek); // redo the batch
                    continue;
                }
                p.commitTransaction();
            }
            assertTrue(abortedOnce, "a transaction was aborted midway");
            out.add("aborted one transaction:ok");
        }
        Map<TopicPartition, Long> outEnds = Txn.highWatermarks(b, outTopic, PARTITIONS);
        Txn.Read rc = Txn.readUntil(b, outTopic, "read_committed", outEnds, Duration.ofSeconds(30));
        List<String> want = IntStream.range(0, k).mapToObj(i -> "t-v" + i).sorted().toList();
        assertEquals(want, rc.values().stream().sorted().toList(), "read_committed output: every input exactly once");
        Txn.Read ru = Txn.readUntil(b, outTopic, "read_uncommitted", outEnds, Duration.ofSeconds(30));
        assertEquals(k + abortedRecords, ru.records().size(), "read_uncommitted output: the aborted batch too");
        try (Admin a = Clients.admin(b)) {
            Map<TopicPartition, Long> committed = a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                    .get(30, TimeUnit.SECONDS).entrySet().stream().filter(e -> e.getValue() != null)
                    .collect(Collectors.toMap(Map.Entry::getKey, e -> e.getValue().offset()));
            assertEquals(nonZero(inEnds), nonZero(committed), "committed offsets = input end offsets");
        }
        out.add("output exactly once:" + rc.records().size());
        return out;
    }

    // ------------------------------------------------------------------------------------------------------ (d)

    /**
     * OffsetFetch with requireStable while a transaction holds pending offsets for the group (TxnOffsetCommit
     * written, EndTxn not yet), in two rounds: first on a group with no committed offsets, then, after that
     * transaction committed, with a second transaction open. While a transaction is open:
     *
     * <ul>
     *   <li>Admin listConsumerGroupOffsets(requireStable=true), all partitions and the listed ones: the broker answers
     *       UNSTABLE_OFFSET_COMMIT for the pending partitions and the Admin client leaves them out of its result (it
     *       logs "Skipping return offset ... UNSTABLE_OFFSET_COMMIT" and does not retry);</li>
     *   <li>a plain fetch sees the offsets committed before, not the pending ones;</li>
     *   <li>KafkaConsumer.committed() (the Java consumer always sends requireStable, KIP-447, whatever its isolation
     *       level) retries UNSTABLE_OFFSET_COMMIT: it times out while the transaction is open, and a call left waiting
     *       across the commit returns the transaction's offsets only after it.</li>
     * </ul>
     */
    static List<String> requireStable(Broker b, String tag) throws Exception {
        String topic = "stable-" + tag;
        String group = "g-stable-" + tag;
        topic(b, topic);
        Clients.produceKeyed(b, topic, 20);
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        Set<TopicPartition> both = Set.of(p0, p1);
        List<String> out = new ArrayList<>();
        try (KafkaProducer<String, String> p = Txn.producer(b, "tx-stable-" + tag, bounded());
             Admin a = Clients.admin(b);
             KafkaConsumer<String, String> consumer = groupReader(b, group, "read_committed")) {
            p.initTransactions();
            Map<TopicPartition, Long> before = Map.of();
            for (int round = 1; round <= 2; round++) {
                String r = "round " + round + " ";
                long o0 = round * 3;
                long o1 = round * 2;
                p.beginTransaction();
                p.sendOffsetsToTransaction(Map.of(p0, new OffsetAndMetadata(o0), p1, new OffsetAndMetadata(o1)),
                        new ConsumerGroupMetadata(group));
                out.add(r + "admin requireStable all partitions while open:" + fetchOutcome(a, group, null, true));
                out.add(r + "admin requireStable listed partitions while open:" + fetchOutcome(a, group, List.of(p0, p1), true));
                out.add(r + "admin plain fetch while open:" + fetchOutcome(a, group, null, false));
                assertEquals(before, offsetsOf(fetch(a, group, null, false).get(30, TimeUnit.SECONDS)),
                        r + "a plain fetch sees only what was committed before the transaction");
                out.add(r + "consumer committed() while open (3 s):"
                        + Txn.outcome(() -> consumer.committed(both, Duration.ofSeconds(3))));
                // A consumer of its own, left waiting across the commit.
                CompletableFuture<Map<TopicPartition, OffsetAndMetadata>> waiting = CompletableFuture.supplyAsync(() -> {
                    try (KafkaConsumer<String, String> c = groupReader(b, group, "read_committed")) {
                        return c.committed(both, Duration.ofSeconds(30));
                    }
                });
                Thread.sleep(3000);
                assertFalse(waiting.isDone(), r + "a consumer's committed() returned while the "
                        + "transaction was open: " + (waiting.isDone() ? Txn.outcome(waiting::get) : ""));
                p.commitTransaction();
                Map<TopicPartition, OffsetAndMetadata> after = waiting.get(30, TimeUnit.SECONDS);
                before = Map.of(p0, o0, p1, o1);
                assertEquals(before, offsetsOf(after), r + "the waiting committed() after the commit");
                out.add(r + "consumer committed() waiting across the commit:" + describe(after));
                assertEquals(before, offsetsOf(fetch(a, group, null, true).get(30, TimeUnit.SECONDS)),
                        r + "admin requireStable fetch after the commit");
            }
        }
        return out;
    }

    /** A consumer of `group` that never joins it (committed() only). */
    static KafkaConsumer<String, String> groupReader(Broker b, String group, String isolation) {
        Properties p = Clients.consumerProps(b, group, "classic");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        return new KafkaConsumer<>(p);
    }

    static KafkaFuture<Map<TopicPartition, OffsetAndMetadata>> fetch(Admin a, String group, List<TopicPartition> tps,
                                                                     boolean requireStable) {
        ListConsumerGroupOffsetsSpec spec = new ListConsumerGroupOffsetsSpec();
        if (tps != null) {
            spec.topicPartitions(tps);
        }
        return a.listConsumerGroupOffsets(Map.of(group, spec), new ListConsumerGroupOffsetsOptions()
                .requireStable(requireStable)).partitionsToOffsetAndMetadata(group);
    }

    /** A fetch's result ("{p=offset, ...}", partitions without an offset left out) or the exception it failed with. */
    static String fetchOutcome(Admin a, String group, List<TopicPartition> tps, boolean requireStable) {
        try {
            return describe(fetch(a, group, tps, requireStable).get(30, TimeUnit.SECONDS));
        } catch (Exception e) {
            return Txn.errorName(e);
        }
    }

    static Map<TopicPartition, Long> offsetsOf(Map<TopicPartition, OffsetAndMetadata> m) {
        Map<TopicPartition, Long> out = new HashMap<>();
        m.forEach((k, v) -> {
            if (v != null) {
                out.put(k, v.offset());
            }
        });
        return out;
    }

    static String describe(Map<TopicPartition, OffsetAndMetadata> m) {
        return new TreeMap<>(offsetsOf(m).entrySet().stream().collect(Collectors.toMap(
                e -> e.getKey().toString(), Map.Entry::getValue))).toString();
    }

    // ------------------------------------------------------------------------------------------------------ (e)

    /**
     * transaction.timeout.ms=2000: a transaction begun, written to and left open. While open the LSO holds at its
     * first offset; the coordinator aborts it after the timeout (Kafka checks every
     * transaction.abort.timed.out.transaction.cleanup.interval.ms, 10 s by default), so the LSO reaches the high
     * watermark, read_committed sees none of it, and the stalled producer's commit fails. A new producer with the
     * same transactional.id then commits.
     */
    static List<String> transactionTimeout(Broker b, String tag) throws Exception {
        String topic = "txn-timeout-" + tag;
        String txnId = "tx-timeout-" + tag;
        topic(b, topic);
        List<String> out = new ArrayList<>();
        Map<String, Object> extra = new HashMap<>(bounded());
        extra.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 2000);
        try (KafkaProducer<String, String> p = Txn.producer(b, txnId, extra)) {
            p.initTransactions();
            p.beginTransaction();
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                fs.add(p.send(new ProducerRecord<>(topic, "k" + i, "stalled-" + i)));
            }
            p.flush();
            long began = System.nanoTime();
            Map<TopicPartition, Long> data = new HashMap<>();
            for (var f : fs) {
                RecordMetadata md = f.get();
                data.merge(new TopicPartition(topic, md.partition()), 1L, Long::sum);
            }
            Map<TopicPartition, Long> lso = Txn.lastStableOffsets(b, topic, PARTITIONS);
            for (TopicPartition tp : data.keySet()) {
                assertEquals(0L, lso.get(tp), "while the transaction is open the LSO holds at its first offset: " + lso);
            }
            // The abort marker: each touched partition's high watermark is its data + 1 and the LSO reaches it.
            Map<TopicPartition, Long> want = new HashMap<>();
            for (TopicPartition tp : Txn.partitions(topic, PARTITIONS)) {
                want.put(tp, data.containsKey(tp) ? data.get(tp) + 1 : 0L);
            }
            Clients.waitUntil(Duration.ofSeconds(30), "the coordinator aborting the timed-out transaction (LSO = HW = "
                    + want + ")", () -> Txn.highWatermarks(b, topic, PARTITIONS).equals(want)
                    && Txn.lastStableOffsets(b, topic, PARTITIONS).equals(want));
            long tookMs = (System.nanoTime() - began) / 1_000_000;
            System.out.println(b.kind() + ": the timed-out transaction was aborted " + tookMs + " ms after its last send");
            assertTrue(tookMs >= 1500, "aborted only after the 2 s timeout, took " + tookMs + " ms");
            Txn.Read rc = Txn.readUntil(b, topic, "read_committed", want, Duration.ofSeconds(30));
            assertEquals(List.of(), rc.values(), "read_committed sees nothing of the timed-out transaction");
            assertEquals(want, rc.positions(), "read_committed position advances past the aborted transaction");
            assertEquals(6, Txn.readUntil(b, topic, "read_uncommitted", want, Duration.ofSeconds(30)).records().size());
            out.add("stalled producer commit:" + Txn.outcome(p::commitTransaction));
            out.add("stalled producer abort:" + Txn.outcome(p::abortTransaction));
        }
        try (KafkaProducer<String, String> p = Txn.producer(b, txnId, bounded())) {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, "k0", "after"));
            p.commitTransaction();
            out.add("new producer with the same transactional.id commits:ok");
        }
        Txn.Read rc = Txn.readAll(b, topic, PARTITIONS, "read_committed");
        assertEquals(List.of("after"), rc.values(), "read_committed at the end");
        return out;
    }
}
