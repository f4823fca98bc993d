package dev.ringleader.it.support;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/**
 * The seed's example 1 (`Rebalance.java`, reference §10): 60 records in a 6-partition topic; consumer A joins and
 * reads everything; B joins, the group rebalances to 3 + 3; B closes and A takes everything back. Each consumer polls
 * with 100 ms timeouts on a thread of its own and logs its rebalance callbacks. The steps wait for each other (B starts
 * once A owns six partitions, B closes once both own three), so the callback sequence is the same on every run and
 * can be compared between brokers.
 */
public final class RebalanceScenario {
    public static final int PARTITIONS = 6;
    public static final int RECORDS = 60;

    /**
     * What one run shows: the callbacks in order (all of them, and each member's), who consumed what, the committed
     * offsets, the end offsets. Between members only each member's own order is fixed: A's and B's callbacks of one
     * rebalance run on two threads at about the same time.
     */
    public record Result(List<String> callbacks, Map<String, List<String>> callbacksByMember,
                         Map<String, Integer> consumedBy, List<String> duplicates, Map<Integer, Long> committed,
                         Map<Integer, Long> endOffsets, List<String> offThread) {}

    private RebalanceScenario() {}

    /**
     * `protocol` is `classic`, `consumer`, or `classic-cooperative` (the classic protocol with the
     * cooperative-sticky assignor alone, so partitions move incrementally).
     */
    public static Result run(Broker broker, String topic, String group, String protocol) throws Exception {
        try (Admin admin = Clients.admin(broker)) {
            Clients.createTopic(admin, topic, PARTITIONS);
            Clients.produceKeyed(broker, topic, RECORDS);

            List<String> callbacks = Collections.synchronizedList(new ArrayList<>());
            Map<String, String> seen = new ConcurrentHashMap<>();
            List<String> duplicates = Collections.synchronizedList(new ArrayList<>());
            List<String> offThread = Collections.synchronizedList(new ArrayList<>());
            Member a = new Member("A", broker, topic, group, protocol, callbacks, seen, duplicates, offThread);
            a.start();
            Clients.waitUntil(Duration.ofSeconds(60), "A owns all partitions and consumed all records",
                    () -> a.owned().size() == PARTITIONS && seen.size() == RECORDS);
            Member b = new Member("B", broker, topic, group, protocol, callbacks, seen, duplicates, offThread);
            b.start();
            Clients.waitUntil(Duration.ofSeconds(60), "A and B own three partitions each",
                    () -> a.owned().size() == 3 && b.owned().size() == 3);
            b.stopAndJoin();
            Clients.waitUntil(Duration.ofSeconds(60), "A owns all partitions again",
                    () -> a.owned().size() == PARTITIONS);
            a.stopAndJoin();

            Map<Integer, Long> committed = new TreeMap<>();
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                    .forEach((tp, om) -> committed.put(tp.partition(), om.offset()));
            Map<TopicPartition, OffsetSpec> latest = new java.util.HashMap<>();
            for (int p = 0; p < PARTITIONS; p++) {
                latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
            }
            Map<Integer, Long> ends = new TreeMap<>();
            admin.listOffsets(latest).all().get().forEach((tp, info) -> ends.put(tp.partition(), info.offset()));
            Map<String, Integer> consumedBy = new TreeMap<>(Map.of("A", 0, "B", 0));
            seen.values().forEach(who -> consumedBy.merge(who, 1, Integer::sum));
            Map<String, List<String>> byMember = new TreeMap<>();
            for (String c : callbacks) {
                String who = c.substring(0, c.indexOf(' '));
                byMember.computeIfAbsent(who, k -> new ArrayList<>()).add(c.substring(who.length() + 1));
            }
            return new Result(List.copyOf(callbacks), byMember, consumedBy, List.copyOf(duplicates), committed, ends,
                    List.copyOf(offThread));
        }
    }

    private static List<Integer> sorted(Collection<TopicPartition> tps) {
        return tps.stream().map(TopicPartition::partition).sorted().toList();
    }

    /** One consumer on its own thread; the callbacks run on that thread (inside poll), as Kafka documents. */
    private static final class Member implements ConsumerRebalanceListener {
        private final String name;
        private final Broker broker;
        private final String topic;
        private final String group;
        private final String protocol;
        private final List<String> callbacks;
        private final Map<String, String> seen;
        private final List<String> duplicates;
        private final List<String> offThread;
        private final AtomicBoolean running = new AtomicBoolean(true);
        private volatile Set<Integer> owned = Set.of();
        private volatile Throwable failure;
        private Thread thread;
        private KafkaConsumer<String, String> consumer;

        Member(String name, Broker broker, String topic, String group, String protocol, List<String> callbacks,
               Map<String, String> seen, List<String> duplicates, List<String> offThread) {
            this.name = name;
            this.broker = broker;
            this.topic = topic;
            this.group = group;
            this.protocol = protocol;
            this.callbacks = callbacks;
            this.seen = seen;
            this.duplicates = duplicates;
            this.offThread = offThread;
        }

        Set<Integer> owned() {
            if (failure != null) {
                throw new AssertionError(name + " failed", failure);
            }
            return owned;
        }

        void start() {
            thread = new Thread(this::loop, "consumer-" + name);
            thread.start();
        }

        void stopAndJoin() throws InterruptedException {
            running.set(false);
            thread.join(60_000);
            if (thread.isAlive()) {
                throw new AssertionError(name + " did not close within 60 s");
            }
            if (failure != null) {
                throw new AssertionError(name + " failed", failure);
            }
        }

        private void loop() {
            java.util.Properties props = Clients.consumerProps(broker, group,
                    protocol.equals("consumer") ? "consumer" : "classic");
            // The range assignor orders members by member id, which starts with the client id. The
            // client's default ("consumer-<group>-<n>", n counting every consumer this JVM made) sorts
            // "-10" before "-9", so which member gets which half would depend on how many consumers
            // the tests before this one created: named by the member's own name instead.
            props.put(org.apache.kafka.clients.consumer.ConsumerConfig.CLIENT_ID_CONFIG, "rebalance-" + group + "-" + name);
            if (protocol.equals("classic-cooperative")) {
                props.put(org.apache.kafka.clients.consumer.ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                        org.apache.kafka.clients.consumer.CooperativeStickyAssignor.class.getName());
            }
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(props)) {
                consumer = c;
                c.subscribe(List.of(topic), this);
                while (running.get()) {
                    var records = c.poll(Duration.ofMillis(100));
                    for (ConsumerRecord<String, String> r : records) {
                        String id = r.partition() + "@" + r.offset();
                        String before = seen.putIfAbsent(id, name);
                        if (before != null) {
                            duplicates.add(id + " by " + before + " and " + name);
                        }
                    }
                    if (!records.isEmpty()) {
                        c.commitSync(Clients.CALL);
                    }
                    owned = new TreeSet<>(sorted(c.assignment()));
                }
                // close() leaves the group; its revocation callback runs here, on this thread.
            } catch (Throwable t) {
                failure = t;
            }
        }

        private void record(String what, Collection<TopicPartition> tps) {
            if (Thread.currentThread() != thread) {
                offThread.add(name + " " + what + " on " + Thread.currentThread().getName());
            }
            callbacks.add(name + " " + what + " " + sorted(tps));
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            record("revoked", partitions);
            // Commit what was consumed before giving partitions up, as an application would.
            if (!partitions.isEmpty()) {
                consumer.commitSync(Clients.CALL);
            }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            record("assigned", partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            record("lost", partitions);
        }
    }

}
