package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ringleader.it.support.Broker;
import dev.ringleader.it.support.Clients;
import dev.ringleader.it.support.ReferenceKafka;
import dev.ringleader.it.support.RingleaderBroker;
import dev.ringleader.it.support.Txn;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Admin.describeProducers and `kafka-transactions.sh describe-producers` against Ringleader and the reference Kafka
 * broker, after the same idempotent batches and an open transaction, then after its commit. Producer ids and
 * timestamps differ between brokers, so each producer is compared as its role (idempotent / transactional) and
 * its timestamp as what it should be: the last batch's CreateTime, then (after the commit) the marker's.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DescribeProducersTest {
    static final String TOPIC = "describe-producers";
    static final TopicPartition TP = new TopicPartition(TOPIC, 0);

    private Broker ringleader;
    private ReferenceKafka kafka;

    @BeforeAll
    void start() throws Exception {
        ringleader = RingleaderBroker.start("describe-producers");
        kafka = ReferenceKafka.start("describe-producers");
        // The client keeps its epoch across transactions below transaction.version 2 (as against Ringleader).
        Txn.setTransactionVersion(kafka, (short) Math.max(1, Txn.transactionVersion(ringleader)));
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

    /** One producer as a role-keyed line: no producer id, timestamps as checks against `expectedTimestamp`. */
    static String describe(ProducerState p, long idempotentId, long expectedTimestampAtLeast) {
        String role = p.producerId() == idempotentId ? "idempotent" : "transactional";
        return role + " epoch=" + p.producerEpoch() + " lastSequence=" + p.lastSequence()
                + " coordinatorEpoch=" + p.coordinatorEpoch() + " txnStart=" + p.currentTransactionStartOffset()
                + " timestampOk=" + (p.lastTimestamp() >= expectedTimestampAtLeast);
    }

    static List<ProducerState> producers(Admin admin) throws Exception {
        List<ProducerState> out = new ArrayList<>(admin.describeProducers(List.of(TP)).partitionResult(TP)
                .get(Clients.CALL.toSeconds(), TimeUnit.SECONDS).activeProducers());
        out.sort(Comparator.comparingLong(ProducerState::producerId));
        return out;
    }

    /** `kafka-transactions.sh describe-producers` against `b`: its table as words per line. */
    static List<List<String>> toolRows(Broker b) {
        ReferenceKafka.ToolResult r = ReferenceKafka.tool("transactions", "--bootstrap-server", b.bootstrap(),
                "describe-producers", "--topic", TOPIC, "--partition", "0");
        assertEquals(0, r.exitCode(), r.stdout() + r.stderr());
        List<List<String>> rows = new ArrayList<>();
        for (String line : r.stdout().strip().split("\n")) {
            rows.add(Arrays.asList(line.strip().split("\\s+")));
        }
        return rows;
    }

    /** What one broker shows: Admin's view (open, then committed) and the tool's, normalised. */
    List<String> run(Broker b) throws Exception {
        List<String> out = new ArrayList<>();
        try (Admin admin = Clients.admin(b)) {
            Clients.createTopic(admin, TOPIC, 1);
            out.add("empty: " + producers(admin));
            long idempotentId;
            long lastIdempotentTs = 0;
            try (KafkaProducer<String, String> p = Clients.producer(b, Map.of(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true))) {
                // Three batches (one record each), sequences 0, 1, 2.
                for (int i = 0; i < 3; i++) {
                    RecordMetadata m = p.send(new ProducerRecord<>(TOPIC, 0, "k" + i, "v" + i)).get(30, TimeUnit.SECONDS);
                    lastIdempotentTs = m.timestamp();
                }
            }
            List<ProducerState> afterIdempotent = producers(admin);
            assertEquals(1, afterIdempotent.size(), b + ": " + afterIdempotent);
            idempotentId = afterIdempotent.get(0).producerId();
            assertEquals(lastIdempotentTs, afterIdempotent.get(0).lastTimestamp(), b + ": the last batch's timestamp");
            try (KafkaProducer<String, String> t = Txn.producer(b, "describe-producers-tx")) {
                t.initTransactions();
                t.beginTransaction();
                for (int i = 0; i < 2; i++) {
                    t.send(new ProducerRecord<>(TOPIC, 0, "t" + i, "x" + i));
                    t.flush();
                }
                List<ProducerState> open = producers(admin);
                for (ProducerState s : open) {
                    out.add("open: " + describe(s, idempotentId, 0));
                }
                List<List<String>> tool = toolRows(b);
                out.add("tool header: " + tool.get(0));
                for (List<String> row : tool.subList(1, tool.size())) {
                    boolean idem = Long.parseLong(row.get(0)) == idempotentId;
                    // ProducerId and LastTimestamp differ between brokers; the rest is compared.
                    out.add("tool open: " + (idem ? "idempotent" : "transactional") + " " + row.get(1) + " "
                            + row.get(2) + " " + row.get(3) + " " + row.get(5));
                }
                // find-hanging over every partition of broker 1 (internal topics too): the open transaction is a
                // candidate (any age past 0 minutes), but its coordinator still lists the partition, so it is not
                // hanging and the table is empty.
                ReferenceKafka.ToolResult hanging = ReferenceKafka.tool("transactions", "--bootstrap-server",
                        b.bootstrap(), "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0");
                out.add("find-hanging: exit " + hanging.exitCode() + " " + hanging.stdout().strip()
                        + (hanging.exitCode() == 0 ? "" : hanging.stderr()));
                long beforeCommit = System.currentTimeMillis();
                t.commitTransaction();
                Clients.waitUntil(Duration.ofSeconds(30), "the commit marker on " + b, () -> {
                    try {
                        return producers(admin).stream().allMatch(s -> s.currentTransactionStartOffset().isEmpty());
                    } catch (Exception e) {
                        throw new RuntimeException(e);
                    }
                });
                for (ProducerState s : producers(admin)) {
                    boolean idem = s.producerId() == idempotentId;
                    // The marker's timestamp is the broker's clock at the commit (allow a second of skew).
                    out.add("committed: " + describe(s, idempotentId, idem ? lastIdempotentTs : beforeCommit - 1000));
                }
                List<List<String>> after = toolRows(b);
                for (List<String> row : after.subList(1, after.size())) {
                    boolean idem = Long.parseLong(row.get(0)) == idempotentId;
                    out.add("tool committed: " + (idem ? "idempotent" : "transactional") + " " + row.get(1) + " "
                            + row.get(2) + " " + row.get(3) + " " + row.get(5));
                }
            }
        }
        return out;
    }

    @Test
    void sameProducerStateAsKafka() throws Exception {
        List<String> ours = run(ringleader);
        List<String> theirs = run(kafka);
        System.out.println("ringleader: " + String.join("\n  ", ours));
        System.out.println("kafka:      " + String.join("\n  ", theirs));
        assertEquals(theirs, ours);
        // And the comparison is about something: the open transaction started after the 3 idempotent records.
        assertTrue(ours.contains("open: transactional epoch=0 lastSequence=1 coordinatorEpoch=OptionalInt.empty "
                + "txnStart=OptionalLong[3] timestampOk=true"), String.join("\n", ours));
        // At transaction.version 2 (both brokers' default) the commit marker carries the bumped epoch 1, which
        // starts the producer's sequence afresh (-1).
        assertTrue(ours.contains("tool committed: transactional 1 0 -1 None"), String.join("\n", ours));
        // find-hanging ran to its (empty) table: only the header line.
        assertTrue(ours.stream().anyMatch(l -> l.startsWith("find-hanging: exit 0 Topic") && l.endsWith("Duration(min)")),
                String.join("\n", ours));
    }
}
