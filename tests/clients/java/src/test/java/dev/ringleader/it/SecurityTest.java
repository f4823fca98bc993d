package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ringleader.it.support.Broker;
import dev.ringleader.it.support.Clients;
import dev.ringleader.it.support.Security;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Consumer groups over SASL_SSL with SCRAM, the same test body against the reference Kafka broker and Ringleader
 * (same broker settings from scripts/security-config.sh, same client configs): a classic group and a
 * consumer-protocol group (KIP-848) of two members consume everything once, commit, rebalance when the second
 * member joins, and an Admin on the same listener lists and describes the group and its offsets. The user, alice,
 * is not a super user: prefixed ACLs (set over PLAINTEXT by a super user) give her the `sec-` topics and groups, so
 * every request also passes the StandardAuthorizer. A wrong password is a SaslAuthenticationException.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SecurityTest {
    static final int PARTITIONS = 4;
    static final int RECORDS = 40;

    private final Map<String, Broker> brokers = new HashMap<>();

    private synchronized Broker broker(String kind) throws Exception {
        Broker b = brokers.get(kind);
        if (b == null) {
            b = Security.startWithUsers(kind, "security", "group.initial.rebalance.delay.ms=0");
            brokers.put(kind, b);
            try (Admin a = Clients.admin(b)) {
                List<AclBinding> acls = new ArrayList<>();
                for (ResourceType t : List.of(ResourceType.TOPIC, ResourceType.GROUP)) {
                    acls.add(new AclBinding(new ResourcePattern(t, "sec-", PatternType.PREFIXED),
                            new AccessControlEntry("User:alice", "*", AclOperation.ALL, AclPermissionType.ALLOW)));
                }
                a.createAcls(acls).all().get(30, TimeUnit.SECONDS);
            }
        }
        return b;
    }

    @AfterAll
    void stop() {
        brokers.values().forEach(Broker::close);
    }

    @ParameterizedTest
    @ValueSource(strings = {"kafka", "ringleader"})
    void classicGroupOverScramSha512(String kind) throws Exception {
        groupScenario(broker(kind), "classic", "SCRAM-SHA-512");
    }

    @ParameterizedTest
    @ValueSource(strings = {"kafka", "ringleader"})
    void consumerProtocolGroupOverScramSha512(String kind) throws Exception {
        groupScenario(broker(kind), "consumer", "SCRAM-SHA-512");
    }

    @ParameterizedTest
    @ValueSource(strings = {"kafka", "ringleader"})
    void classicGroupOverScramSha256(String kind) throws Exception {
        groupScenario(broker(kind), "classic", "SCRAM-SHA-256");
    }

    @ParameterizedTest
    @ValueSource(strings = {"kafka", "ringleader"})
    void wrongPasswordIsSaslAuthenticationException(String kind) throws Exception {
        Broker b = broker(kind);
        for (String mechanism : List.of("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")) {
            try (Admin a = Security.admin(Security.sasl(b, "SASL_SSL", mechanism, "alice", "wrong"), "wrong-pw")) {
                ExecutionException e = assertThrows(ExecutionException.class,
                        () -> a.describeCluster().clusterId().get(30, TimeUnit.SECONDS), kind + " " + mechanism);
                assertInstanceOf(SaslAuthenticationException.class, e.getCause(), kind + " " + mechanism);
            }
            // an unknown user is refused the same way (no hint which part was wrong)
            try (Admin a = Security.admin(Security.sasl(b, "SASL_SSL", mechanism, "mallory", "x"), "no-user")) {
                ExecutionException e = assertThrows(ExecutionException.class,
                        () -> a.describeCluster().clusterId().get(30, TimeUnit.SECONDS), kind + " " + mechanism);
                assertInstanceOf(SaslAuthenticationException.class, e.getCause(), kind + " " + mechanism);
            }
        }
    }

    /** One member of the group, polling on a thread of its own until stopped. */
    static final class Member implements Runnable {
        final String name;
        final Properties props;
        final Set<String> consumed;
        final AtomicReference<Set<TopicPartition>> assignment = new AtomicReference<>(Set.of());
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        final AtomicBoolean stop = new AtomicBoolean();
        final String topic;
        final Thread thread;

        Member(String name, Properties props, String topic, Set<String> consumed) {
            this.name = name;
            this.props = props;
            this.topic = topic;
            this.consumed = consumed;
            this.thread = new Thread(this, "member-" + name);
            thread.setDaemon(true);
            thread.start();
        }

        @Override
        public void run() {
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(props)) {
                c.subscribe(List.of(topic));
                while (!stop.get()) {
                    var recs = c.poll(Duration.ofMillis(100));
                    for (ConsumerRecord<String, String> r : recs) {
                        consumed.add(r.partition() + "@" + r.offset());
                    }
                    if (!recs.isEmpty()) {
                        c.commitSync(Duration.ofSeconds(30));
                    }
                    assignment.set(Set.copyOf(c.assignment()));
                }
                c.commitSync(Duration.ofSeconds(30));
            } catch (Throwable t) {
                failure.set(t);
            }
        }

        void close() throws InterruptedException {
            stop.set(true);
            thread.join(60_000);
            if (failure.get() != null) {
                throw new AssertionError("member " + name + " failed", failure.get());
            }
        }
    }

    private static void groupScenario(Broker b, String protocol, String mechanism) throws Exception {
        String tag = (protocol + "-" + mechanism).toLowerCase().replace("-sha-", "");
        String topic = "sec-t-" + tag;
        String group = "sec-g-" + tag;
        String where = b.kind() + " " + protocol + " " + mechanism + ": ";
        Properties sec = Security.sasl(b, "SASL_SSL", mechanism, "alice");
        try (Admin admin = Security.admin(sec, "alice-admin")) {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get(30, TimeUnit.SECONDS);
            Properties pp = new Properties();
            pp.putAll(sec);
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            pp.put(ProducerConfig.ACKS_CONFIG, "all");
            pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 60000);
            pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
            try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
                for (int i = 0; i < RECORDS; i++) {
                    p.send(new ProducerRecord<>(topic, i % PARTITIONS, "k" + i, "v" + i));
                }
                p.flush();
            }

            Properties cp = Security.consumer(b, sec, group, protocol);
            cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 3); // so the second member joins while work remains
            Set<String> consumed = ConcurrentHashMap.newKeySet();
            Member a = new Member("A", cp, topic, consumed);
            Member m2 = null;
            try {
                Clients.waitUntil(Duration.ofSeconds(60), where + "A owning every partition",
                        () -> a.assignment.get().size() == PARTITIONS || a.failure.get() != null);
                assertEquals(null, a.failure.get(), where + "A failed");
                Member bm = new Member("B", cp, topic, consumed);
                m2 = bm;
                // the rebalance: both members own a share, disjoint and together everything
                Clients.waitUntil(Duration.ofSeconds(90), where + "A and B sharing the partitions", () -> {
                    Set<TopicPartition> x = a.assignment.get(), y = bm.assignment.get();
                    Set<TopicPartition> all = new HashSet<>(x);
                    all.addAll(y);
                    return (!x.isEmpty() && !y.isEmpty() && all.size() == PARTITIONS && x.size() + y.size() == PARTITIONS)
                            || a.failure.get() != null || bm.failure.get() != null;
                });
                assertEquals(null, a.failure.get(), where + "A failed");
                assertEquals(null, bm.failure.get(), where + "B failed");
                Clients.waitUntil(Duration.ofSeconds(60), where + "every record consumed", () -> consumed.size() == RECORDS);

                // the Admin on the same listener, as alice
                Collection<GroupListing> listed = admin.listGroups().all().get(30, TimeUnit.SECONDS);
                GroupListing l = listed.stream().filter(g -> g.groupId().equals(group)).findFirst()
                        .orElseThrow(() -> new AssertionError(where + group + " not listed: " + listed));
                assertEquals(protocol.equals("consumer") ? GroupType.CONSUMER : GroupType.CLASSIC, l.type().orElseThrow(),
                        where + "listed type");
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all()
                        .get(30, TimeUnit.SECONDS).get(group);
                assertEquals(2, d.members().size(), where + "members " + d);
                assertEquals(GroupState.STABLE, d.groupState(), where + "state " + d);
            } finally {
                a.close();
                if (m2 != null) {
                    m2.close();
                }
            }
            Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            assertEquals(PARTITIONS, offsets.size(), where + "committed " + offsets);
            for (var e : offsets.entrySet()) {
                assertEquals(RECORDS / PARTITIONS, e.getValue().offset(), where + "committed offset of " + e.getKey());
            }
            assertTrue(consumed.size() == RECORDS, where + "consumed " + consumed.size());
            System.out.println(where + "ok: " + RECORDS + " records, 2 members, offsets " + offsets.values().stream()
                    .map(OffsetAndMetadata::offset).toList());
        }
    }
}
