package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.ringleader.it.support.Clients;
import dev.ringleader.it.support.RingleaderBroker;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The Java client (4.4, `group.protocol=consumer`) follows the heartbeat interval of every ConsumerGroupHeartbeat
 * response (`AbstractHeartbeatRequestManager.onResponse` → `HeartbeatRequestState.updateHeartbeatIntervalMs`), so
 * Ringleader's short interval for a member that still has partitions to revoke or to receive
 * (`group.consumer.reconciliation.heartbeat.interval.ms`) hands a joining member its partitions without waiting whole
 * heartbeat intervals.
 *
 * <p>The group's heartbeat interval is 30 s and its assignment interval 5 s. A owns all six partitions (the group is
 * Stable); B joins. Every response the Java client acts on by Kafka's rules alone is 30 s apart: A would learn that it
 * must give up three partitions at its next heartbeat, 30 s after its last, and B would get them at its first regular
 * heartbeat, 30 s after its join — so three partitions each at least 30 s after B joined. Here both hold three well
 * before one interval has passed: A is told to come back when the next target can be computed (5 s after its own),
 * and each step after it is 100 ms apart. The bound (20 s) leaves 10 s on either side; nothing is timed closer.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class TimeToStableTest {
    private static final int PARTITIONS = 6;
    private static final Duration INTERVAL = Duration.ofSeconds(30);
    private RingleaderBroker ringleader;

    @BeforeAll
    void start() {
        ringleader = RingleaderBroker.start("stable",
                "group.consumer.heartbeat.interval.ms=" + INTERVAL.toMillis(),
                "group.consumer.max.heartbeat.interval.ms=" + INTERVAL.toMillis(),
                "group.consumer.assignment.interval.ms=5000",
                "group.consumer.reconciliation.heartbeat.interval.ms=100");
    }

    @AfterAll
    void stop() {
        if (ringleader != null) {
            ringleader.close();
        }
    }

    @Test
    void aJoiningMemberGetsItsPartitionsLongBeforeOneHeartbeatInterval() throws Exception {
        String topic = "stable-java";
        String group = "g-stable-java";
        try (Admin admin = Clients.admin(ringleader)) {
            Clients.createTopic(admin, topic, PARTITIONS);
        }
        try (KafkaConsumer<String, String> a = new KafkaConsumer<>(Clients.consumerProps(ringleader, group, "consumer"));
             KafkaConsumer<String, String> b = new KafkaConsumer<>(Clients.consumerProps(ringleader, group, "consumer"))) {
            a.subscribe(List.of(topic));
            pollUntil(Duration.ofSeconds(30), "A owns all six partitions", () -> owned(a).size() == PARTITIONS, a);
            b.subscribe(List.of(topic));
            long joined = System.nanoTime();
            // Both consumers poll (A's revocation runs in its poll) until each holds three partitions.
            pollUntil(INTERVAL.minusSeconds(10), "A and B own three partitions each, well within one 30 s interval",
                    () -> owned(a).size() == 3 && owned(b).size() == 3, a, b);
            long tookMs = (System.nanoTime() - joined) / 1_000_000;
            Set<Integer> all = new TreeSet<>(owned(a));
            all.addAll(owned(b));
            assertEquals(Set.of(0, 1, 2, 3, 4, 5), all, "every partition owned once");
            System.out.println("java: B joined a stable group and A, B own 3 + 3 after " + tookMs
                    + " ms (heartbeat interval " + INTERVAL.toMillis() + " ms)");
        }
    }

    private static Set<Integer> owned(KafkaConsumer<String, String> c) {
        Set<Integer> out = new TreeSet<>();
        for (TopicPartition tp : c.assignment()) {
            out.add(tp.partition());
        }
        return out;
    }

    @SafeVarargs
    private static void pollUntil(Duration timeout, String what, java.util.function.BooleanSupplier done,
                                  KafkaConsumer<String, String>... consumers) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + timeout.toSeconds() + " s waiting for " + what);
            }
            for (KafkaConsumer<String, String> c : consumers) {
                c.poll(Duration.ofMillis(50));
            }
        }
    }
}
