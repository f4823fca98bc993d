package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.ringleader.it.support.Broker;
import dev.ringleader.it.support.OffsetsLog;
import dev.ringleader.it.support.OffsetsLog.Entry;
import dev.ringleader.it.support.RebalanceScenario;
import dev.ringleader.it.support.ReferenceKafka;
import dev.ringleader.it.support.RingleaderBroker;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The records each broker writes to `__consumer_offsets` for the seed scenario (example 1 of the seed walkthrough,
 * groups `g-classic` → partition 18 and `g-consumer` → partition 32), both read by Kafka's own kafka-dump-log.
 *
 * Compared per key: every record key must appear on both brokers, and each key's sequence of values must be the
 * same (member ids, topic ids, timestamps and the metadata hash normalised). Across keys the order is not compared:
 * two members' heartbeats race, so which member's record lands first is not fixed (the seed notes that its steps 8–11
 * interleave differently from run to run). Offset commits are compared by their last value per partition, because how
 * many commits a consumer makes depends on how its polls batch the records.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class OffsetsLogDiffTest {
    /**
     * Value fields left out of the comparison, each a difference another open issue owns. None now:
     * `assignmentEpochs` (Kafka 4.3+, the epoch at which each partition was assigned) is compared too.
     */
    static final java.util.Set<String> KNOWN = java.util.Set.of();

    private final Map<String, List<Entry>> ours = new LinkedHashMap<>();
    private final Map<String, List<Entry>> theirs = new LinkedHashMap<>();

    @BeforeAll
    void runSeedOnBoth() throws Exception {
        try (RingleaderBroker r = RingleaderBroker.start("seed-log", "group.initial.rebalance.delay.ms=0");
             ReferenceKafka k = ReferenceKafka.start("seed-log", "group.initial.rebalance.delay.ms=0")) {
            for (Broker b : List.of(r, k)) {
                RebalanceScenario.run(b, "orders", "g-classic", "classic");
                RebalanceScenario.run(b, "orders-848", "g-consumer", "consumer");
            }
            for (String p : List.of("18", "32")) {
                ours.put(p, withHashNamed(OffsetsLog.read(r.logDir().resolve("__consumer_offsets-" + p), KNOWN)));
                theirs.put(p, withHashNamed(OffsetsLog.read(k.logDir().resolve("__consumer_offsets-" + p), KNOWN)));
            }
        }
    }

    /**
     * The consumer group's metadata hash depends on the topic id, so it differs between brokers; but each broker must
     * write Kafka's hash of its own topic: that value is renamed `hash(orders-848)`, any other stays a number and
     * fails the comparison.
     */
    static List<Entry> withHashNamed(OffsetsLog.Log log) {
        String raw = log.topicIds().get("T1");
        if (raw == null) {
            return log.entries();
        }
        String expected = "\"metadataHash\":" + OffsetsLog.metadataHash(raw, "orders-848", RebalanceScenario.PARTITIONS);
        List<Entry> out = new ArrayList<>();
        for (Entry e : log.entries()) {
            out.add(e.value() == null ? e : new Entry(e.offset(), e.key(),
                    e.value().replace(expected, "\"metadataHash\":\"hash(orders-848)\"")));
        }
        return out;
    }

    @AfterAll
    void print() {
        theirs.forEach((p, log) -> {
            System.out.println("---- kafka __consumer_offsets-" + p);
            log.forEach(System.out::println);
            System.out.println("---- ringleader __consumer_offsets-" + p);
            ours.get(p).forEach(System.out::println);
        });
    }

    private static final com.fasterxml.jackson.databind.ObjectMapper JSON = new com.fasterxml.jackson.databind.ObjectMapper();

    /**
     * key → its values in order; offset commits keep only their last value.
     *
     * A member's current assignment in state UNRELEASED_PARTITIONS (2) is left out: whether a member is seen waiting
     * for a partition its peer has not released yet depends on which of two heartbeats reaches the coordinator first.
     * Because such a record moves the member's epoch into `previousMemberEpoch` of the next one, that field is not
     * compared across brokers either; instead each log must follow Kafka's rule for it on its own
     * (`ConsumerGroupMember.Builder.updateMemberEpoch`: every new record's previous epoch is the epoch of the record
     * before it, 0 for a member's first). Violations of that rule land in `broken`.
     */
    static Map<String, List<String>> byKey(List<Entry> log, List<String> broken) {
        Map<String, List<String>> out = new TreeMap<>();
        Map<String, Integer> lastEpoch = new java.util.HashMap<>();
        for (Entry e : log) {
            String value = e.value();
            if (e.type().equals("8")) {
                if (value == null) {
                    lastEpoch.remove(e.key());
                } else {
                    try {
                        var v = (com.fasterxml.jackson.databind.node.ObjectNode) JSON.readTree(value);
                        var data = (com.fasterxml.jackson.databind.node.ObjectNode) v.get("data");
                        int epoch = data.get("memberEpoch").asInt();
                        int previous = data.get("previousMemberEpoch").asInt();
                        int expected = lastEpoch.getOrDefault(e.key(), 0);
                        if (previous != expected) {
                            broken.add(e + ": previousMemberEpoch " + previous + ", expected " + expected);
                        }
                        lastEpoch.put(e.key(), epoch);
                        if (data.get("state").asInt() == 2) {
                            continue;
                        }
                        data.remove("previousMemberEpoch");
                        value = v.toString();
                    } catch (java.io.IOException x) {
                        throw new java.io.UncheckedIOException(x);
                    }
                }
            }
            List<String> vs = out.computeIfAbsent(e.key(), k -> new ArrayList<>());
            if (e.type().equals("1")) {
                vs.clear();
            }
            vs.add(value == null ? "<tombstone>" : value);
        }
        return out;
    }

    @ParameterizedTest(name = "__consumer_offsets-{0} ({1})")
    @CsvSource({"18, g-classic", "32, g-consumer"})
    void sameRecordsPerKey(String partition, String group) {
        List<String> kafkaBroken = new ArrayList<>();
        List<String> oursBroken = new ArrayList<>();
        Map<String, List<String>> k = byKey(theirs.get(partition), kafkaBroken);
        Map<String, List<String>> r = byKey(ours.get(partition), oursBroken);
        assertEquals(List.of(), kafkaBroken, "the reference broker's log breaks the previous-epoch rule");
        assertEquals(List.of(), oursBroken, "previous member epochs");
        assertEquals(k.keySet(), r.keySet(), "record keys of " + group);
        for (String key : k.keySet()) {
            assertEquals(String.join("\n", k.get(key)), String.join("\n", r.get(key)), "values of " + key);
        }
    }
}
