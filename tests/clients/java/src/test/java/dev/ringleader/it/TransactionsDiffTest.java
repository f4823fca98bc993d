package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.ringleader.it.support.Broker;
import dev.ringleader.it.support.Clients;
import dev.ringleader.it.support.ReferenceKafka;
import dev.ringleader.it.support.RingleaderBroker;
import dev.ringleader.it.support.Txn;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.stream.Stream;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The same transactional sequences, with the Java client 4.4, against Ringleader and against the reference Kafka
 * broker: every step's outcome (ok, or the exception class the client throws) must be equal. Covers the errors a
 * broker decides — a fenced zombie (three ways), a transaction aborted on its timeout, a transaction timeout above
 * transaction.max.timeout.ms, sendOffsetsToTransaction with a stale generation / member epoch or an unknown member
 * for both group protocols — and leaves out errors the client raises itself (commit without begin and the like).
 *
 * The client speaks transactions v1 or v2 (KIP-890) by the broker's finalized transaction.version, and the
 * exception classes differ between the two (see TransactionsTest.EXPECTED), so the reference broker is first set to
 * Ringleader's level (at least 1: 0 and 1 are the same protocol to the client).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class TransactionsDiffTest {
    static final String[] SETS = {"group.initial.rebalance.delay.ms=0"};

    private Broker ringleader;
    private ReferenceKafka kafka;

    /**
     * `-Dtxn.diff.ours=kafka` puts a second reference broker where Ringleader would be: the proof that the cases are
     * deterministic, and the way to read Kafka's outcomes. `-Dtxn.tv` sets that broker's transaction.version first
     * (UpdateFeatures; default its own level, 2 on both).
     */
    @BeforeAll
    void start() throws Exception {
        if (System.getProperty("txn.diff.ours", "ringleader").equals("kafka")) {
            ringleader = ReferenceKafka.start("txn-diff-ours", SETS);
            if (System.getProperty("txn.tv") != null) {
                Txn.setTransactionVersion(ringleader, Short.parseShort(System.getProperty("txn.tv")));
            }
        } else {
            ringleader = RingleaderBroker.start("txn-diff", SETS);
            if (System.getProperty("txn.tv") != null) {
                Txn.setTransactionVersion(ringleader, Short.parseShort(System.getProperty("txn.tv")));
            }
        }
        kafka = ReferenceKafka.start("txn-diff", SETS);
        short level = (short) Math.max(1, Txn.transactionVersion(ringleader));
        Txn.setTransactionVersion(kafka, level);
        System.out.println("transaction.version: ringleader " + Txn.transactionVersion(ringleader) + ", kafka "
                + Txn.transactionVersion(kafka));
        // The first initTransactions creates Kafka's __transaction_state: do it once, unhurried, on both.
        for (Broker b : List.of(kafka, ringleader)) {
            try (KafkaProducer<String, String> p = Txn.producer(b, "warm-up", Map.of(ProducerConfig.MAX_BLOCK_MS_CONFIG, 60_000))) {
                p.initTransactions();
            }
        }
    }

    @AfterAll
    void stop() {
        if (ringleader != null) {
            ringleader.close();
        }
        if (kafka != null) {
            kafka.close();
        }
    }

    interface Steps {
        List<String> run(Broker b, String tag) throws Exception;
    }

    record Case(String name, Steps steps) {
        @Override
        public String toString() {
            return name;
        }
    }

    static Stream<Case> cases() {
        return Stream.of(
                new Case("fenced-same-partition", (b, t) -> TxnScenarios.fencing(b, t, "same-partition")),
                new Case("fenced-new-partition", (b, t) -> TxnScenarios.fencing(b, t, "new-partition")),
                new Case("fenced-idle", (b, t) -> TxnScenarios.fencing(b, t, "idle")),
                new Case("timed-out-transaction", TxnScenarios::transactionTimeout),
                new Case("transaction-timeout-above-max", TransactionsDiffTest::timeoutAboveMax),
                new Case("offsets-stale-generation-classic", (b, t) -> badGroupMetadata(b, t, "classic", "stale")),
                new Case("offsets-unknown-member-classic", (b, t) -> badGroupMetadata(b, t, "classic", "unknown")),
                new Case("offsets-stale-epoch-consumer", (b, t) -> badGroupMetadata(b, t, "consumer", "stale")),
                new Case("offsets-unknown-member-consumer", (b, t) -> badGroupMetadata(b, t, "consumer", "unknown")),
                new Case("offsets-without-member-to-active-group", (b, t) -> badGroupMetadata(b, t, "classic", "none")));
    }

    /** transaction.timeout.ms above the broker's transaction.max.timeout.ms (15 min by default). */
    static List<String> timeoutAboveMax(Broker b, String tag) {
        Map<String, Object> extra = new HashMap<>(TxnScenarios.bounded());
        extra.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 900_001);
        try (KafkaProducer<String, String> p = Txn.producer(b, "tx-max-" + tag, extra)) {
            return List.of("initTransactions:" + Txn.outcome(p::initTransactions));
        }
    }

    /**
     * A live member of `group` (it has polled and owns partitions); a transaction whose sendOffsetsToTransaction
     * carries group metadata that is `how`: "stale" (generation / member epoch + 5), "unknown" (a member id the
     * group does not have), "none" (a plain ConsumerGroupMetadata(group): no member, generation -1).
     */
    static List<String> badGroupMetadata(Broker b, String tag, String protocol, String how) throws Exception {
        String topic = "txn-gm-" + protocol + "-" + how + "-" + tag;
        String group = "g-" + topic;
        TxnScenarios.topic(b, topic);
        Clients.produceKeyed(b, topic, 10);
        List<String> out = new ArrayList<>();
        Properties cp = Clients.consumerProps(b, group, protocol);
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp);
             KafkaProducer<String, String> p = Txn.producer(b, "tx-gm-" + protocol + "-" + how + "-" + tag,
                     TxnScenarios.bounded())) {
            c.subscribe(List.of(topic));
            Clients.waitUntil(Duration.ofSeconds(30), "the member owning partitions", () -> {
                c.poll(Duration.ofMillis(100));
                return c.assignment().size() == TxnScenarios.PARTITIONS;
            });
            ConsumerGroupMetadata gm = c.groupMetadata();
            ConsumerGroupMetadata bad = switch (how) {
                case "stale" -> new ConsumerGroupMetadata(group, gm.generationId() + 5, gm.memberId(), gm.groupInstanceId());
                case "unknown" -> new ConsumerGroupMetadata(group, gm.generationId(), "not-a-member", Optional.empty());
                default -> new ConsumerGroupMetadata(group);
            };
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, "k0", "in-txn"));
            out.add("sendOffsetsToTransaction:" + Txn.outcome(() -> p.sendOffsetsToTransaction(
                    Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(1)), bad)));
            String commit = Txn.outcome(p::commitTransaction);
            out.add("commit:" + commit);
            if (!commit.equals("ok")) {
                out.add("abort:" + Txn.outcome(p::abortTransaction));
            }
            // What the group holds afterwards for the partition (requireStable: the transaction has ended).
            out.add("committed:" + TxnScenarios.describe(
                    c.committed(java.util.Set.of(new TopicPartition(topic, 0)), Duration.ofSeconds(10))));
        }
        return out;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void sameOutcome(Case k) throws Exception {
        // The same names on both brokers: outcomes may name partitions.
        List<String> theirs = k.steps().run(kafka, "d");
        System.out.println("kafka " + k.name() + ": " + theirs);
        List<String> ours = k.steps().run(ringleader, "d");
        System.out.println(ringleader.kind() + " " + k.name() + ": " + ours);
        assertEquals(theirs, ours, k.name() + ": outcomes differ from the reference broker's");
    }
}
