package dev.ringleader.it.support;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;

/** Helpers for the transaction tests: transactional producers, reading a topic to its end, naming errors. */
public final class Txn {
    private Txn() {}

    /** The feature that decides whether the Java client uses transactions v1 or v2 (KIP-890) against a broker. */
    public static final String TV = "transaction.version";

    /**
     * A transactional producer. `max.block.ms` bounds initTransactions/commit/abort (against a broker with no
     * transaction coordinator initTransactions blocks that long and throws TimeoutException).
     */
    public static KafkaProducer<String, String> producer(Broker b, String txnId, Map<String, Object> extra) {
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30_000);
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "txn-" + txnId);
        p.putAll(extra);
        return Clients.producer(b, p);
    }

    public static KafkaProducer<String, String> producer(Broker b, String txnId) {
        return producer(b, txnId, Map.of());
    }

    /** A consumer without a group (assign/seek only) at the given isolation level. */
    public static KafkaConsumer<String, String> reader(Broker b, String isolation) {
        Properties p = Clients.consumerProps(b, "unused", "classic");
        p.remove(ConsumerConfig.GROUP_ID_CONFIG);
        p.remove(ConsumerConfig.GROUP_PROTOCOL_CONFIG);
        p.remove(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG);
        p.remove(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "reader-" + isolation);
        return new KafkaConsumer<>(p);
    }

    public static List<TopicPartition> partitions(String topic, int n) {
        List<TopicPartition> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(new TopicPartition(topic, i));
        }
        return out;
    }

    /** The high watermarks (read_uncommitted end offsets) of a topic's partitions. */
    public static Map<TopicPartition, Long> highWatermarks(Broker b, String topic, int n) {
        try (KafkaConsumer<String, String> c = reader(b, "read_uncommitted")) {
            return c.endOffsets(partitions(topic, n), Clients.CALL);
        }
    }

    /** The last stable offsets (read_committed end offsets) of a topic's partitions. */
    public static Map<TopicPartition, Long> lastStableOffsets(Broker b, String topic, int n) {
        try (KafkaConsumer<String, String> c = reader(b, "read_committed")) {
            return c.endOffsets(partitions(topic, n), Clients.CALL);
        }
    }

    /** What a read of a whole topic found: the data records and the position each partition ended at. */
    public record Read(List<ConsumerRecord<String, String>> records, Map<TopicPartition, Long> positions) {
        public List<String> values() {
            return records.stream().map(ConsumerRecord::value).toList();
        }
    }

    /**
     * Reads every partition of `topic` from the beginning at `isolation` until each position reaches `until`
     * (e.g. the high watermarks: a read_committed consumer gets there only once the LSO has), polling at most
     * `timeout`.
     */
    public static Read readUntil(Broker b, String topic, String isolation, Map<TopicPartition, Long> until,
                                 Duration timeout) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        Map<TopicPartition, Long> pos = new HashMap<>();
        try (KafkaConsumer<String, String> c = reader(b, isolation)) {
            List<TopicPartition> tps = new ArrayList<>(until.keySet());
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.nanoTime() + timeout.toNanos();
            while (true) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    out.add(r);
                }
                boolean done = true;
                for (TopicPartition tp : tps) {
                    long p = c.position(tp, Clients.CALL);
                    pos.put(tp, p);
                    done &= p >= until.get(tp);
                }
                if (done) {
                    return new Read(out, pos);
                }
                if (System.nanoTime() > deadline) {
                    throw new AssertionError(isolation + " reader of " + topic + " did not reach " + until
                            + " within " + timeout.toSeconds() + " s; positions " + pos + ", " + out.size()
                            + " records read");
                }
            }
        }
    }

    /** Reads `topic` to its high watermarks (waiting for the LSO to reach them at read_committed). */
    public static Read readAll(Broker b, String topic, int n, String isolation) {
        return readUntil(b, topic, isolation, highWatermarks(b, topic, n), Duration.ofSeconds(30));
    }

    /**
     * The exception a client call ended with, as a test records it: the class of the first Kafka exception in the
     * cause chain that is not a mere wrapper (ExecutionException, or a plain KafkaException with a cause).
     */
    public static String errorName(Throwable t) {
        Throwable e = t;
        while ((e instanceof ExecutionException || e.getClass() == org.apache.kafka.common.KafkaException.class
                || e instanceof java.util.concurrent.CompletionException) && e.getCause() != null) {
            e = e.getCause();
        }
        if (e.getClass() == org.apache.kafka.common.KafkaException.class) {
            // The client's own wrapper of a broker error it has no class for: the message names the error.
            return "KafkaException(" + e.getMessage() + ")";
        }
        return e.getClass().getSimpleName();
    }

    /** Runs `call`, returning "ok" or the name of the exception it threw (see {@link #errorName}). */
    public static String outcome(ThrowingRunnable call) {
        try {
            call.run();
            return "ok";
        } catch (Exception e) {
            return errorName(e);
        }
    }

    public interface ThrowingRunnable {
        void run() throws Exception;
    }

    /**
     * The finalized `transaction.version` a client sees on this broker (0 when the broker finalizes none): the Java
     * client uses transactions v2 (KIP-890: epoch bump per transaction, partitions added by Produce itself) at 2+.
     */
    public static short transactionVersion(Broker b) throws Exception {
        try (Admin a = Clients.admin(b)) {
            FinalizedVersionRange r = a.describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS)
                    .finalizedFeatures().get(TV);
            return r == null ? 0 : r.maxVersionLevel();
        }
    }

    /**
     * Sets the reference broker's finalized `transaction.version` (UpdateFeatures; a downgrade is SAFE_DOWNGRADE),
     * so it can be compared with a broker that speaks the other version. Waits until ApiVersions shows it.
     */
    public static void setTransactionVersion(Broker b, short level) throws Exception {
        short now = transactionVersion(b);
        if (now == level) {
            return;
        }
        try (Admin a = Clients.admin(b)) {
            FeatureUpdate.UpgradeType type = level < now ? FeatureUpdate.UpgradeType.SAFE_DOWNGRADE
                    : FeatureUpdate.UpgradeType.UPGRADE;
            a.updateFeatures(Map.of(TV, new FeatureUpdate(level, type)), new UpdateFeaturesOptions()).all()
                    .get(30, TimeUnit.SECONDS);
        }
        Clients.waitUntil(Duration.ofSeconds(30), b.kind() + " transaction.version " + level, () -> {
            try {
                return transactionVersion(b) == level;
            } catch (Exception e) {
                return false;
            }
        });
    }

    /** Whether `t` (or its cause chain) is a client TimeoutException. */
    public static boolean isTimeout(Throwable t) {
        for (Throwable e = t; e != null; e = e.getCause()) {
            if (e instanceof TimeoutException) {
                return true;
            }
        }
        return false;
    }
}
