package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ringleader.it.support.Broker;
import dev.ringleader.it.support.RebalanceScenario;
import dev.ringleader.it.support.RebalanceScenario.Result;
import dev.ringleader.it.support.ReferenceKafka;
import dev.ringleader.it.support.RingleaderBroker;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The seed's example 1 with the Java client — classic protocol with the eager range assignor and with cooperative-sticky,
 * and the consumer protocol — run against Ringleader and against the
 * reference Kafka broker: the same callbacks in the same order, every record consumed exactly once, on the
 * application thread, and the committed offsets at the end are the end offsets.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SeedRebalanceTest {
    private RingleaderBroker ringleader;

    @BeforeAll
    void start() {
        ringleader = RingleaderBroker.start("seed", "group.initial.rebalance.delay.ms=0");
    }

    @AfterAll
    void stop() {
        if (ringleader != null) {
            ringleader.close();
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"classic", "classic-cooperative", "consumer"})
    void sameCallbacksAsKafka(String protocol) throws Exception {
        String topic = "orders-java-" + protocol;
        String group = "g-java-" + protocol;
        Result ours = check(ringleader, topic, group, protocol);
        Result kafka = check(ReferenceKafka.shared(), topic, group, protocol);
        assertEquals(comparable(kafka.callbacksByMember(), protocol), comparable(ours.callbacksByMember(), protocol),
                "callback sequence differs from the reference broker's (" + protocol + "): ours "
                        + ours.callbacksByMember() + ", Kafka's " + kafka.callbacksByMember());
    }

    /**
     * The callbacks that depend on the broker alone. With the consumer protocol the Java client names a member's
     * partitions by topic id and resolves the ids through its metadata cache; its first reconciliation runs with
     * what it can resolve, even nothing (`AbstractMembershipManager.maybeReconcile`: the "equal to the current
     * assignment" shortcut is skipped while the current assignment is NONE). So when the first heartbeat response
     * comes back before the client's first Metadata response, the member's first callback is `assigned []`,
     * followed by its partitions once the metadata arrives. That race is the client's and can happen against either
     * broker; CI saw A start with `assigned []` once, on the reference broker's side, in a run where ours did not. So
     * a member's leading `assigned []` followed by another assignment is dropped. What the broker decides is still
     * compared: B's partitions come only after A revoked them, whether or not B's empty first assignment shows.
     */
    private static Map<String, List<String>> comparable(Map<String, List<String>> byMember, String protocol) {
        if (!protocol.equals("consumer")) {
            return byMember;
        }
        Map<String, List<String>> out = new TreeMap<>();
        byMember.forEach((member, callbacks) -> {
            boolean raced = callbacks.size() > 1 && callbacks.get(0).equals("assigned []")
                    && callbacks.get(1).startsWith("assigned ");
            out.put(member, raced ? callbacks.subList(1, callbacks.size()) : callbacks);
        });
        return out;
    }

    private static Result check(Broker b, String topic, String group, String protocol) throws Exception {
        Result r = RebalanceScenario.run(b, topic, group, protocol);
        String where = b.kind() + " " + protocol + ": ";
        assertTrue(r.duplicates().isEmpty(), where + "records consumed twice: " + r.duplicates());
        assertEquals(Map.of("A", RebalanceScenario.RECORDS, "B", 0), r.consumedBy(), where + "who consumed what");
        assertTrue(r.offThread().isEmpty(), where + "callbacks off the application thread: " + r.offThread());
        assertEquals(r.endOffsets(), r.committed(), where + "committed offsets are not the end offsets");
        System.out.println(where + r.callbacks());
        return r;
    }
}
