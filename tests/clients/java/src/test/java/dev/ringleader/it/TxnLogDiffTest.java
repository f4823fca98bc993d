package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.node.TextNode;
import dev.ringleader.it.support.Broker;
import dev.ringleader.it.support.Clients;
import dev.ringleader.it.support.ReferenceKafka;
import dev.ringleader.it.support.RingleaderBroker;
import dev.ringleader.it.support.Txn;
import dev.ringleader.it.support.TxnLog;
import dev.ringleader.it.support.TxnLog.Batch;
import dev.ringleader.it.support.TxnLog.Rec;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The records each broker writes for one fixed transaction sequence (issue 17), read by Kafka's own kafka-dump-log on
 * both data directories after a clean stop:
 *
 * <ul>
 *   <li>`__transaction_state` (`--transaction-log-decoder`): per transactional id, the sequence of
 *       TransactionLogValue records — state, producer epoch, timeout, partition set, value version — and the header
 *       of the batches that carry them;</li>
 *   <li>the topic's partitions (`--print-data-log`): every batch header (producer id/epoch, base sequence, leader
 *       epoch, attributes, size) and record, the transaction markers with their control type and coordinator
 *       epoch;</li>
 *   <li>the group's `__consumer_offsets` partition (`--offsets-decoder`): the transactional offset commits and the
 *       markers that end them.</li>
 * </ul>
 *
 * The sequence: `txd-commit` produces to all 3 partitions, commits offsets for a group and commits, then produces,
 * commits offsets and aborts; `txd-fence` is a zombie whose open transaction a second producer with the same id
 * fences (and aborts) before committing its own; `txd-timeout` leaves a transaction open past its 1 s timeout, so
 * the coordinator aborts it. Every send waits for its answer, so each AddPartitionsToTxn adds one partition and the
 * record sequence is the same on every run.
 *
 * Normalised, because it must differ: producer ids (named after the transactional id that got them), topic ids
 * (`T1`, ...), timestamps (a positive one becomes `<ts>`; -1 stays), batch positions and CRCs (they cover
 * timestamps), and the batching of `__transaction_state` records (a broker may write several in one batch; each
 * batch's header is compared, its offsets and count are not).
 *
 * `ringleader dump-log` must print both brokers' `__transaction_state` segments exactly as kafka-dump-log
 * `--transaction-log-decoder` does.
 *
 * Both brokers run at the same finalized `transaction.version`: the reference broker's storage is formatted at
 * Ringleader's level (`-Dtxn.tv` overrides it, and must then equal Ringleader's). The level decides the
 * `__transaction_state` value version Kafka writes (`TransactionVersion.transactionLogValueVersion`: 0 at level 0,
 * 1 — flexible, with the tagged PreviousProducerId — from level 1), while levels 0 and 1 are the same protocol to a
 * client. Ringleader finalizes none (level 0) until it serves transactions v2; then this runs at its level.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class TxnLogDiffTest {
    static final String TOPIC = "txd";
    static final String GROUP = "g-txd";
    static final int PARTITIONS = 3;
    /** Kafka checks for timed-out transactions every 10 s by default; both brokers check every 500 ms here. */
    static final String[] SETS = {"group.initial.rebalance.delay.ms=0",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=500"};

    /**
     * Fields left out of the comparison, each an intended difference with its reason (docs/compatibility.md lists
     * them too). None now.
     */
    static final Set<String> KNOWN = Set.of();

    private static final ObjectMapper JSON = new ObjectMapper();

    private short tv;
    private final Map<String, List<String>> outcomes = new LinkedHashMap<>();
    private final Map<String, Dump> dumps = new LinkedHashMap<>();
    private final Map<String, java.nio.file.Path> logDirs = new HashMap<>();

    /** One broker's three dumps. */
    record Dump(Map<String, List<Batch>> txnState, Map<String, List<Batch>> data, Map<String, List<Batch>> offsets) {}

    @BeforeAll
    void runOnBoth() throws Exception {
        RingleaderBroker r = null;
        ReferenceKafka k = null;
        try {
            r = RingleaderBroker.start("txn-log", SETS);
            short ours = Txn.transactionVersion(r);
            tv = Short.parseShort(System.getProperty("txn.tv", Short.toString(ours)));
            assertEquals(tv, ours, "-Dtxn.tv is not Ringleader's finalized transaction.version: the logs would differ"
                    + " by the level alone");
            k = ReferenceKafka.start("txn-log", List.of(Txn.TV + "=" + tv), SETS);
            assertEquals(tv, Txn.transactionVersion(k), "the reference broker's finalized transaction.version");
            // Kafka's first: its __transaction_state is created by the first FindCoordinator, which takes a while.
            for (Broker b : List.of(k, r)) {
                outcomes.put(b.kind(), scenario(b));
            }
            int rc = r.stop();
            assertEquals(0, rc, "ringleader's exit code on SIGTERM");
            k.close();
            for (Broker b : List.of(k, r)) {
                dumps.put(b.kind(), dump(b));
                logDirs.put(b.kind(), b.logDir());
            }
        } finally {
            if (r != null) {
                r.close();
            }
            if (k != null) {
                k.close();
            }
        }
    }

    static Map<String, Object> producerSettings(int timeoutMs) {
        Map<String, Object> m = new HashMap<>(TxnScenarios.bounded());
        m.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 60_000);
        m.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, timeoutMs);
        return m;
    }

    static void send(KafkaProducer<String, String> p, int partition, String value) throws Exception {
        p.send(new ProducerRecord<>(TOPIC, partition, "k" + partition, value)).get(30, TimeUnit.SECONDS);
    }

    /** The sequence; returns what the client saw of the steps that fail. */
    static List<String> scenario(Broker b) throws Exception {
        List<String> out = new ArrayList<>();
        try (Admin a = Clients.admin(b)) {
            Clients.createTopic(a, TOPIC, PARTITIONS);
        }
        ConsumerGroupMetadata group = new ConsumerGroupMetadata(GROUP);
        try (KafkaProducer<String, String> p = Txn.producer(b, "txd-commit", producerSettings(60_000))) {
            p.initTransactions();
            p.beginTransaction();
            for (int i = 0; i < PARTITIONS; i++) {
                send(p, i, "committed-" + i);
            }
            // One partition per call: the order of a call's offsets is the client's map order.
            p.sendOffsetsToTransaction(Map.of(new TopicPartition(TOPIC, 0), new OffsetAndMetadata(1)), group);
            p.sendOffsetsToTransaction(Map.of(new TopicPartition(TOPIC, 1), new OffsetAndMetadata(2, "m")), group);
            p.commitTransaction();
            p.beginTransaction();
            send(p, 0, "aborted-0");
            send(p, 1, "aborted-1");
            p.sendOffsetsToTransaction(Map.of(new TopicPartition(TOPIC, 2), new OffsetAndMetadata(7)), group);
            p.abortTransaction();
        }
        try (KafkaProducer<String, String> zombie = Txn.producer(b, "txd-fence", producerSettings(60_000))) {
            zombie.initTransactions();
            zombie.beginTransaction();
            send(zombie, 0, "zombie");
            try (KafkaProducer<String, String> fresh = Txn.producer(b, "txd-fence", producerSettings(60_000))) {
                fresh.initTransactions();
                out.add("zombie commit:" + Txn.outcome(zombie::commitTransaction));
                fresh.beginTransaction();
                send(fresh, 1, "fresh");
                fresh.commitTransaction();
            }
        }
        try (KafkaProducer<String, String> p = Txn.producer(b, "txd-timeout", producerSettings(1000))) {
            p.initTransactions();
            p.beginTransaction();
            send(p, 2, "timed-out");
            waitForState(b, "txd-timeout", TransactionState.COMPLETE_ABORT);
            out.add("commit after the timeout:" + Txn.outcome(p::commitTransaction));
        }
        // Every transaction has written its complete record before the broker stops.
        waitForState(b, "txd-commit", TransactionState.COMPLETE_ABORT);
        waitForState(b, "txd-fence", TransactionState.COMPLETE_COMMIT);
        return out;
    }

    static void waitForState(Broker b, String txnId, TransactionState want) {
        try (Admin a = Clients.admin(b)) {
            Clients.waitUntil(Duration.ofSeconds(30), b.kind() + ": " + txnId + " in " + want, () -> {
                try {
                    return a.describeTransactions(List.of(txnId)).description(txnId).get(10, TimeUnit.SECONDS)
                            .state() == want;
                } catch (Exception e) {
                    return false;
                }
            });
        }
    }

    static Dump dump(Broker b) {
        // Three tool runs; each JVM is most of its own cost, so they run side by side.
        var txn = CompletableFuture.supplyAsync(() -> TxnLog.dump(b.logDir(), List.of("__transaction_state-"),
                "--transaction-log-decoder"));
        var data = CompletableFuture.supplyAsync(() -> TxnLog.dump(b.logDir(), List.of(TOPIC + "-"), "--print-data-log"));
        var offsets = TxnLog.dump(b.logDir(), List.of("__consumer_offsets-"), "--offsets-decoder");
        return new Dump(txn.join(), data.join(), offsets);
    }

    @AfterAll
    void print() {
        dumps.forEach((kind, d) -> {
            System.out.println("==== " + kind + " outcomes " + outcomes.get(kind));
            Names n = names(d);
            System.out.println("---- " + kind + " __transaction_state");
            txnRecords(d, n).forEach((id, vs) -> vs.forEach(v -> System.out.println(id + " " + v)));
            txnBatchHeaders(d, n).forEach(System.out::println);
            System.out.println("---- " + kind + " " + TOPIC);
            d.data().forEach((p, bs) -> lines(bs, n).forEach(l -> System.out.println(p + " " + l)));
            System.out.println("---- " + kind + " __consumer_offsets");
            d.offsets().forEach((p, bs) -> lines(bs, n).forEach(l -> System.out.println(p + " " + l)));
        });
    }

    // ---------------------------------------------------------------------------------------------- normalising

    /**
     * Producer ids named after the transactional id whose records carry them (`pid(txd-fence)`, `pid(x)#2`, ...),
     * topic ids by first appearance (`T1`, ...).
     */
    record Names(Map<String, String> pids, Map<String, String> topicIds) {
        String pid(String raw) {
            if (raw.equals("-1")) {
                return raw;
            }
            return pids.getOrDefault(raw, "unnamed-pid-" + raw);
        }

        String topicId(String raw) {
            return topicIds.computeIfAbsent(raw, x -> "T" + (topicIds.size() + 1));
        }
    }

    static Names names(Dump d) {
        Map<String, String> pids = new HashMap<>();
        Map<String, Integer> perId = new HashMap<>();
        for (List<Batch> bs : d.txnState().values()) {
            for (Batch b : bs) {
                for (Rec r : b.records()) {
                    if (r.payload() == null || r.payload().equals("<DELETE>")) {
                        continue;
                    }
                    String id = tree(r.key()).path("data").path("transactionalId").asText();
                    String pid = tree(r.payload()).path("data").path("producerId").asText();
                    if (!pids.containsKey(pid)) {
                        int n = perId.merge(id, 1, Integer::sum);
                        pids.put(pid, "pid(" + id + ")" + (n == 1 ? "" : "#" + n));
                    }
                }
            }
        }
        return new Names(pids, new HashMap<>());
    }

    static JsonNode tree(String json) {
        try {
            return JSON.readTree(json);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A decoded key or value with timestamps, producer ids and set orders made comparable. */
    static JsonNode normalise(JsonNode node, Names n) {
        if (node instanceof ObjectNode o) {
            for (String k : iterable(o.fieldNames())) {
                JsonNode v = o.get(k);
                if (KNOWN.contains(k)) {
                    o.remove(k);
                } else if ((k.endsWith("Timestamp") || k.endsWith("TimestampMs")) && v.asLong() > 0) {
                    o.set(k, new TextNode("<ts>"));
                } else if (k.endsWith("roducerId") && v.isNumber()) {
                    o.set(k, new TextNode(n.pid(v.asText())));
                } else if (k.equals("topicId") && v.isTextual()) {
                    o.set(k, new TextNode(n.topicId(v.asText())));
                } else {
                    o.set(k, normalise(v, n));
                }
            }
            // A transaction's partitions are a set: Kafka writes them in its hash-set order.
            if (o.get("partitionIds") instanceof ArrayNode ids) {
                List<Integer> sorted = new ArrayList<>();
                ids.forEach(i -> sorted.add(i.asInt()));
                sorted.sort(null);
                ids.removeAll();
                sorted.forEach(ids::add);
            }
        } else if (node instanceof ArrayNode a) {
            for (int i = 0; i < a.size(); i++) {
                a.set(i, normalise(a.get(i), n));
            }
            List<JsonNode> items = new ArrayList<>();
            a.forEach(items::add);
            if (items.stream().allMatch(x -> x.has("topic"))) {
                items.sort(java.util.Comparator.comparing(x -> x.path("topic").asText()));
                a.removeAll();
                items.forEach(a::add);
            }
        }
        return node;
    }

    static <T> List<T> iterable(java.util.Iterator<T> it) {
        List<T> out = new ArrayList<>();
        it.forEachRemaining(out::add);
        return out;
    }

    /** What a batch or record header says, less what must differ. */
    static String fields(Map<String, String> f, Names n, Set<String> drop) {
        StringBuilder sb = new StringBuilder();
        f.forEach((k, v) -> {
            if (drop.contains(k) || KNOWN.contains(k)) {
                return;
            }
            if (k.equals("producerId")) {
                v = n.pid(v);
            }
            sb.append(k).append('=').append(v).append(' ');
        });
        return sb.toString().strip();
    }

    static final Set<String> VARYING = Set.of("position", "CreateTime", "LogAppendTime", "crc");

    /** A partition's batches and records, one line each, in offset order. */
    static List<String> lines(List<Batch> batches, Names n) {
        List<String> out = new ArrayList<>();
        for (Batch b : batches) {
            out.add("batch " + fields(b.header(), n, VARYING));
            for (Rec r : b.records()) {
                String line = "  record " + fields(r.fields(), n, VARYING);
                if (r.key() != null) {
                    line += " key=" + (r.key().startsWith("{") ? normalise(tree(r.key()), n) : r.key());
                }
                if (r.payload() != null) {
                    line += " payload=" + (r.payload().startsWith("{") ? normalise(tree(r.payload()), n) : r.payload());
                }
                out.add(line);
            }
        }
        return out;
    }

    /** Per transactional id, its values in log order (across the `__transaction_state` partitions: an id has one). */
    static Map<String, List<String>> txnRecords(Dump d, Names n) {
        Map<String, List<String>> out = new TreeMap<>();
        d.txnState().forEach((partition, batches) -> {
            for (Batch b : batches) {
                for (Rec r : b.records()) {
                    JsonNode key = tree(r.key());
                    String id = key.path("data").path("transactionalId").asText();
                    String value = r.payload() == null || r.payload().equals("<DELETE>") ? "<tombstone>"
                            : normalise(tree(r.payload()), n).toString();
                    out.computeIfAbsent(partition + " " + id, x -> new ArrayList<>())
                            .add("key=" + key + " " + fields(r.fields(), n, Set.of("offset", "CreateTime", "valueSize"))
                                    + " " + value);
                }
            }
        });
        return out;
    }

    /** The distinct headers of the `__transaction_state` batches (their offsets, counts and sizes left out). */
    static Set<String> txnBatchHeaders(Dump d, Names n) {
        Set<String> out = new TreeSet<>();
        Set<String> drop = new java.util.HashSet<>(VARYING);
        drop.addAll(Set.of("baseOffset", "lastOffset", "count", "size"));
        d.txnState().values().forEach(bs -> bs.forEach(b -> out.add(fields(b.header(), n, drop))));
        return out;
    }

    // ---------------------------------------------------------------------------------------------- comparing

    Dump kafka() {
        return dumps.get("kafka");
    }

    Dump ours() {
        return dumps.get("ringleader");
    }

    @Test
    void theClientSeesTheSameOutcomes() {
        assertEquals(outcomes.get("kafka"), outcomes.get("ringleader"));
    }

    @Test
    void transactionStateRecordsPerTransactionalId() {
        Map<String, List<String>> k = txnRecords(kafka(), names(kafka()));
        Map<String, List<String>> r = txnRecords(ours(), names(ours()));
        assertFalse(k.isEmpty(), "the reference broker wrote no transaction records");
        assertEquals(k.keySet(), r.keySet(), "__transaction_state partition and transactional ids");
        for (String id : k.keySet()) {
            assertEquals(String.join("\n", k.get(id)), String.join("\n", r.get(id)), "records of " + id);
        }
    }

    @Test
    void transactionStateBatchHeaders() {
        assertEquals(txnBatchHeaders(kafka(), names(kafka())), txnBatchHeaders(ours(), names(ours())));
    }

    @Test
    void topicBatchesAndMarkers() {
        Map<String, List<Batch>> k = kafka().data();
        Map<String, List<Batch>> r = ours().data();
        assertEquals(k.keySet(), r.keySet(), "partitions written");
        for (String p : k.keySet()) {
            assertEquals(String.join("\n", lines(k.get(p), names(kafka()))),
                    String.join("\n", lines(r.get(p), names(ours()))), p);
        }
    }

    /**
     * `ringleader dump-log` on each `__transaction_state` segment of both data directories prints what kafka-dump-log
     * `--transaction-log-decoder` prints, line for line (one directory per broker: Kafka's own records and
     * Ringleader's).
     */
    @Test
    void ringleaderDumpLogPrintsTransactionStateAsKafkaDoes() throws Exception {
        for (String kind : List.of("kafka", "ringleader")) {
            List<String> files = segments(logDirs.get(kind), "__transaction_state-");
            assertFalse(files.isEmpty(), kind + ": no __transaction_state segment");
            ReferenceKafka.ToolResult theirs = ReferenceKafka.tool("dump-log", "--transaction-log-decoder", "--files",
                    String.join(",", files));
            assertEquals(0, theirs.exitCode(), theirs.stderr());
            StringBuilder ours = new StringBuilder();
            for (String f : files) {
                Process p = new ProcessBuilder(dev.ringleader.it.support.Repo.binary().toString(), "dump-log",
                        "--transaction-log-decoder", f).redirectErrorStream(true).start();
                ours.append(new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8));
                assertEquals(0, p.waitFor(), "ringleader dump-log " + f + ":\n" + ours);
            }
            assertEquals(theirs.stdout().strip(), ours.toString().strip(), kind + "'s __transaction_state segments");
        }
    }

    /** The non-empty `.log` segments of the partition directories of `dataDir` named `prefix*`, in order. */
    static List<String> segments(java.nio.file.Path dataDir, String prefix) throws IOException {
        List<String> out = new ArrayList<>();
        try (var dirs = java.nio.file.Files.list(dataDir)) {
            for (var d : dirs.filter(x -> x.getFileName().toString().startsWith(prefix)).sorted().toList()) {
                try (var fs = java.nio.file.Files.list(d)) {
                    for (var f : fs.filter(x -> x.toString().endsWith(".log")).sorted().toList()) {
                        if (java.nio.file.Files.size(f) > 0) {
                            out.add(f.toString());
                        }
                    }
                }
            }
        }
        return out;
    }

    @Test
    void consumerOffsetsCommitsAndMarkers() {
        Map<String, List<Batch>> k = kafka().offsets();
        Map<String, List<Batch>> r = ours().offsets();
        String partition = "__consumer_offsets-" + Math.abs(GROUP.hashCode() % 50);
        assertEquals(List.of(partition), List.copyOf(k.keySet()), "the reference broker's partitions written");
        assertEquals(k.keySet(), r.keySet(), "partitions written");
        assertEquals(String.join("\n", lines(k.get(partition), names(kafka()))),
                String.join("\n", lines(r.get(partition), names(ours()))), partition);
    }
}
