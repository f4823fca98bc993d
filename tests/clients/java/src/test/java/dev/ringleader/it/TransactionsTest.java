package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.ringleader.it.support.Broker;
import dev.ringleader.it.support.ReferenceKafka;
import dev.ringleader.it.support.RingleaderBroker;
import dev.ringleader.it.support.Txn;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Kafka transactions with the Java client 4.4 against Ringleader (issue 17): (a) commit and abort visibility at both
 * isolation levels, with end offsets that count the markers; (b) zombie fencing; (c) consume-transform-produce with
 * sendOffsetsToTransaction, one transaction aborted and redone, for both group protocols; (d) OffsetFetch
 * requireStable while a transaction holds pending offsets; (e) a transaction aborted by the coordinator on
 * transaction.timeout.ms. The scenarios are in {@link TxnScenarios}; each asserts its own invariants, and the
 * outcome it returns (exception classes of the fenced and timed-out producers) must equal what the reference broker
 * gave, recorded in {@link #EXPECTED} per transaction protocol the client speaks (transaction.version < 2: v1,
 * else v2 — the Java client picks by the broker's finalized feature).
 *
 * Against the reference broker instead: `-Dtxn.broker=kafka`. `-Dtxn.tv=1` or `2` sets the broker's
 * transaction.version first (UpdateFeatures, on either broker); TransactionsDiffTest runs the same scenarios on
 * both brokers side by side.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class TransactionsTest {
    /**
     * What the reference broker (Kafka 4.4.0) gives, per transaction protocol the client speaks, measured with
     * `-Dtxn.broker=kafka -Dtxn.tv=1` and `-Dtxn.tv=2` (a new 4.4 cluster is at transaction.version 2). The two differ:
     * with v1 a zombie's record to a partition not yet in its transaction goes through AddPartitionsToTxn, which the
     * coordinator refuses with PRODUCER_FENCED; with v2 every record goes to the partition leader, which refuses the
     * old epoch with INVALID_PRODUCER_EPOCH. A transaction the coordinator aborted on its timeout fences the producer
     * under v1 (the abort bumped the epoch: EndTxn gets PRODUCER_FENCED) but is an InvalidTxnStateException under v2.
     */
    static final Map<String, Map<String, List<String>>> EXPECTED = expected();

    static Map<String, Map<String, List<String>>> expected() {
        Map<String, List<String>> common = Map.of(
                "visibility", List.of("read_committed:30", "read_uncommitted:42", "end offsets count markers:6"),
                "ctp-classic", List.of("aborted one transaction:ok", "output exactly once:90"),
                "ctp-consumer", List.of("aborted one transaction:ok", "output exactly once:90"),
                "require-stable", List.of(
                        "round 1 admin requireStable all partitions while open:{}",
                        "round 1 admin requireStable listed partitions while open:{}",
                        "round 1 admin plain fetch while open:{}",
                        "round 1 consumer committed() while open (3 s):TimeoutException",
                        "round 1 consumer committed() waiting across the commit:{stable-t-0=3, stable-t-1=2}",
                        "round 2 admin requireStable all partitions while open:{}",
                        "round 2 admin requireStable listed partitions while open:{}",
                        "round 2 admin plain fetch while open:{stable-t-0=3, stable-t-1=2}",
                        "round 2 consumer committed() while open (3 s):TimeoutException",
                        "round 2 consumer committed() waiting across the commit:{stable-t-0=6, stable-t-1=4}"),
                "fencing-same-partition", fenced(false, "InvalidProducerEpochException", "InvalidProducerEpochException"));
        Map<String, List<String>> v1 = new java.util.HashMap<>(common);
        v1.put("fencing-new-partition", fenced(false, "ProducerFencedException", "ProducerFencedException"));
        v1.put("fencing-idle", fenced(true, "ProducerFencedException", "ProducerFencedException"));
        v1.put("timeout", timedOut("ProducerFencedException"));
        Map<String, List<String>> v2 = new java.util.HashMap<>(common);
        v2.put("fencing-new-partition", fenced(false, "InvalidProducerEpochException", "InvalidProducerEpochException"));
        v2.put("fencing-idle", fenced(true, "InvalidProducerEpochException", "InvalidProducerEpochException"));
        v2.put("timeout", timedOut("InvalidTxnStateException"));
        return Map.of("v1", Map.copyOf(v1), "v2", Map.copyOf(v2));
    }

    static List<String> fenced(boolean idle, String send, String commit) {
        List<String> out = new java.util.ArrayList<>();
        if (idle) {
            out.add("zombie commit before fencing:ok");
        }
        out.addAll(List.of("second initTransactions:ok", "zombie send:" + send, "zombie commit:" + commit,
                "zombie abort:ProducerFencedException", "new producer commit:ok"));
        return out;
    }

    static List<String> timedOut(String error) {
        return List.of("stalled producer commit:" + error, "stalled producer abort:" + error,
                "new producer with the same transactional.id commits:ok");
    }

    private Broker broker;
    private String protocol;

    @BeforeAll
    void start() throws Exception {
        String which = System.getProperty("txn.broker", "ringleader");
        if (which.equals("kafka")) {
            broker = ReferenceKafka.start("txn", "group.initial.rebalance.delay.ms=0");
            String tv = System.getProperty("txn.tv");
            if (tv != null) {
                Txn.setTransactionVersion(broker, Short.parseShort(tv));
            }
        } else {
            broker = RingleaderBroker.start("txn", "group.initial.rebalance.delay.ms=0");
            // Ringleader starts at transaction.version 2 as Kafka does; UpdateFeatures moves it.
            String tv = System.getProperty("txn.tv");
            if (tv != null) {
                Txn.setTransactionVersion(broker, Short.parseShort(tv));
            }
        }
        protocol = Txn.transactionVersion(broker) >= 2 ? "v2" : "v1";
        System.out.println("transactions test against " + broker + ", client transaction protocol " + protocol);
    }

    @AfterAll
    void stop() {
        if (broker != null) {
            broker.close();
        }
    }

    private void expect(String scenario, List<String> outcome) {
        System.out.println(broker.kind() + " " + protocol + " " + scenario + ": " + outcome);
        assertEquals(EXPECTED.get(protocol).get(scenario), outcome,
                scenario + ": outcome differs from the reference broker's (" + protocol + ")");
    }

    @Test
    void a_commitAndAbortVisibility() throws Exception {
        expect("visibility", TxnScenarios.commitAndAbortVisibility(broker, "t"));
    }

    @ParameterizedTest(name = "fencing {0}")
    @ValueSource(strings = {"same-partition", "new-partition", "idle"})
    void b_zombieFencing(String how) throws Exception {
        expect("fencing-" + how, TxnScenarios.fencing(broker, "t", how));
    }

    @ParameterizedTest(name = "consume-transform-produce, group.protocol={0}")
    @ValueSource(strings = {"classic", "consumer"})
    void c_consumeTransformProduce(String groupProtocol) throws Exception {
        expect("ctp-" + groupProtocol, TxnScenarios.consumeTransformProduce(broker, "t-" + groupProtocol, groupProtocol));
    }

    @Test
    void d_requireStableWhileTransactionOpen() throws Exception {
        expect("require-stable", TxnScenarios.requireStable(broker, "t"));
    }

    @Test
    void e_transactionTimeout() throws Exception {
        expect("timeout", TxnScenarios.transactionTimeout(broker, "t"));
    }
}
