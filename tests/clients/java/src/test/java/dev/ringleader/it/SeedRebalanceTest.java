package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ringleader.it.support.Broker;
import dev.ringleader.it.support.RebalanceScenario;
import dev.ringleader.it.support.RebalanceScenario.Result;
import dev.ringleader.it.support.ReferenceKafka;
import dev.ringleader.it.support.RingleaderBroker;
import java.util.Map;
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
        assertEquals(kafka.callbacksByMember(), ours.callbacksByMember(),
                "callback sequence differs from the reference broker's (" + protocol + ")");
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
