package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ringleader.it.support.Broker;
import dev.ringleader.it.support.Clients;
import dev.ringleader.it.support.Security;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

/**
 * The same ACL table on the reference Kafka broker and on Ringleader (both with the StandardAuthorizer,
 * allow.everyone.if.no.acl.found=false, super users ANONYMOUS and admin: scripts/security-config.sh), applied with
 * Admin.createAcls by a super user over PLAINTEXT. Then alice (SCRAM-SHA-256) and bob (PLAIN), both over
 * SASL_PLAINTEXT, run the same matrix of requests with the Java client: JoinGroup (classic consumer),
 * ConsumerGroupHeartbeat (consumer protocol), OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, DeleteGroups,
 * Produce, Fetch, Metadata, CreateTopics, DescribeAcls. Every cell's outcome (OK with what was seen, or the exception
 * class the client raised for the broker's error code) must be the same on both brokers, and the groups that only
 * refused requests were aimed at must look the same to a super user before and after the matrix (a refused
 * OffsetCommit writes a value that differs from the one set up, so a leak shows).
 *
 * The table exercises prefixed and literal patterns, a DENY that overrides a prefixed ALLOW, the wildcard principal,
 * READ implying DESCRIBE (and a DENY READ not denying DESCRIBE), and ListGroups showing only describable groups.
 */
class AclDiffTest {
    static final String ALICE = "User:alice";
    static final String BOB = "User:bob";

    static List<AclBinding> table() {
        return List.of(
                acl(ResourceType.GROUP, "acl-a-", PatternType.PREFIXED, ALICE, AclOperation.READ, AclPermissionType.ALLOW),
                acl(ResourceType.GROUP, "acl-a-del", PatternType.LITERAL, ALICE, AclOperation.DELETE, AclPermissionType.ALLOW),
                acl(ResourceType.TOPIC, "acl-t", PatternType.LITERAL, ALICE, AclOperation.READ, AclPermissionType.ALLOW),
                acl(ResourceType.TOPIC, "acl-t", PatternType.LITERAL, ALICE, AclOperation.WRITE, AclPermissionType.ALLOW),
                acl(ResourceType.TOPIC, "acl-a-new", PatternType.PREFIXED, ALICE, AclOperation.CREATE, AclPermissionType.ALLOW),
                acl(ResourceType.GROUP, "acl-b-", PatternType.PREFIXED, BOB, AclOperation.READ, AclPermissionType.ALLOW),
                acl(ResourceType.GROUP, "acl-b-denied", PatternType.LITERAL, BOB, AclOperation.READ, AclPermissionType.DENY),
                acl(ResourceType.GROUP, "acl-a-g", PatternType.LITERAL, BOB, AclOperation.DESCRIBE, AclPermissionType.ALLOW),
                acl(ResourceType.TOPIC, "acl-t", PatternType.LITERAL, BOB, AclOperation.DESCRIBE, AclPermissionType.ALLOW),
                acl(ResourceType.TOPIC, "acl-t2", PatternType.LITERAL, BOB, AclOperation.READ, AclPermissionType.ALLOW),
                acl(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, BOB, AclOperation.DESCRIBE, AclPermissionType.ALLOW),
                acl(ResourceType.TOPIC, "acl-pub", PatternType.LITERAL, "User:*", AclOperation.DESCRIBE, AclPermissionType.ALLOW));
    }

    static AclBinding acl(ResourceType t, String name, PatternType p, String principal, AclOperation op,
                          AclPermissionType perm) {
        return new AclBinding(new ResourcePattern(t, name, p), new AccessControlEntry(principal, "*", op, perm));
    }

    /** Groups that only refused requests are aimed at (or an allowed commit of the value they already hold). */
    static final List<String> WATCHED = List.of("acl-a-g", "acl-b-g", "acl-b-denied", "acl-b-x", "acl-b-x2", "acl-a-x3");

    /** One cell: who, what, on which resources. */
    record Cell(String user, String op, String group, String topic, long value) {
        String label() {
            return String.format("%-5s %-22s %-13s %s", user, op, group == null ? "-" : group, topic == null ? "-" : topic);
        }
    }

    static List<Cell> matrix() {
        List<Cell> m = new ArrayList<>();
        // alice
        m.add(new Cell("alice", "JoinGroup(classic)", "acl-a-j1", "acl-t", 0));
        m.add(new Cell("alice", "JoinGroup(classic)", "acl-b-x", "acl-t", 0));
        m.add(new Cell("alice", "JoinGroup(classic)", "acl-a-j2", "acl-secret", 0));
        m.add(new Cell("alice", "ConsumerGroupHeartbeat", "acl-a-c1", "acl-t", 0));
        m.add(new Cell("alice", "ConsumerGroupHeartbeat", "acl-b-x2", "acl-t", 0));
        m.add(new Cell("alice", "OffsetCommit", "acl-a-g", "acl-t", 3));
        m.add(new Cell("alice", "OffsetCommit", "acl-b-g", "acl-t", 9));
        m.add(new Cell("alice", "OffsetCommit", "acl-a-g", "acl-secret", 9));
        m.add(new Cell("alice", "OffsetFetch", "acl-a-g", "acl-t", 0));
        m.add(new Cell("alice", "OffsetFetch", "acl-b-g", "acl-t", 0));
        m.add(new Cell("alice", "DescribeGroups", "acl-a-g", null, 0));
        m.add(new Cell("alice", "DescribeGroups", "acl-b-g", null, 0));
        m.add(new Cell("alice", "ListGroups", null, null, 0));
        m.add(new Cell("alice", "DeleteGroups", "acl-b-g", null, 0));
        m.add(new Cell("alice", "DeleteGroups", "acl-a-g", null, 0));
        m.add(new Cell("alice", "DeleteGroups", "acl-a-del", null, 0));
        m.add(new Cell("alice", "Produce", null, "acl-t", 0));
        m.add(new Cell("alice", "Produce", null, "acl-t2", 0));
        m.add(new Cell("alice", "Fetch", null, "acl-t", 0));
        m.add(new Cell("alice", "Fetch", null, "acl-t2", 0));
        m.add(new Cell("alice", "Metadata", null, "acl-t", 0));
        m.add(new Cell("alice", "Metadata", null, "acl-secret", 0));
        m.add(new Cell("alice", "Metadata", null, "acl-pub", 0));
        m.add(new Cell("alice", "Metadata", null, "acl-nonexistent", 0));
        m.add(new Cell("alice", "CreateTopics", null, "acl-a-new1", 0));
        m.add(new Cell("alice", "CreateTopics", null, "acl-other-new", 0));
        m.add(new Cell("alice", "DescribeAcls", null, null, 0));
        // bob
        m.add(new Cell("bob", "JoinGroup(classic)", "acl-b-j1", "acl-t2", 0));
        m.add(new Cell("bob", "JoinGroup(classic)", "acl-b-denied", "acl-t2", 0));
        m.add(new Cell("bob", "ConsumerGroupHeartbeat", "acl-b-c1", "acl-t2", 0));
        m.add(new Cell("bob", "ConsumerGroupHeartbeat", "acl-a-x3", "acl-t2", 0));
        m.add(new Cell("bob", "ConsumerGroupHeartbeat", "acl-b-denied", "acl-t2", 0));
        m.add(new Cell("bob", "OffsetCommit", "acl-a-g", "acl-t", 9));
        m.add(new Cell("bob", "OffsetCommit", "acl-b-g", "acl-t", 9));
        m.add(new Cell("bob", "OffsetCommit", "acl-b-denied", "acl-t2", 9));
        m.add(new Cell("bob", "OffsetFetch", "acl-b-g", "acl-t", 0));
        m.add(new Cell("bob", "OffsetFetch", "acl-a-g", "acl-t", 0));
        m.add(new Cell("bob", "OffsetFetch", "acl-b-denied", "acl-t", 0));
        m.add(new Cell("bob", "DescribeGroups", "acl-a-g", null, 0));
        m.add(new Cell("bob", "DescribeGroups", "acl-b-denied", null, 0));
        m.add(new Cell("bob", "ListGroups", null, null, 0));
        m.add(new Cell("bob", "DeleteGroups", "acl-b-g", null, 0));
        // the Java producer is idempotent by default: without WRITE on any topic (or IDEMPOTENT_WRITE) its
        // InitProducerId is refused first; the non-idempotent one reaches Produce itself
        m.add(new Cell("bob", "Produce", null, "acl-t", 0));
        m.add(new Cell("bob", "Produce(non-idempotent)", null, "acl-t", 0));
        m.add(new Cell("alice", "Produce(non-idempotent)", null, "acl-t", 0));
        m.add(new Cell("bob", "Fetch", null, "acl-t", 0));
        m.add(new Cell("bob", "Fetch", null, "acl-t2", 0));
        m.add(new Cell("bob", "Metadata", null, "acl-t", 0));
        m.add(new Cell("bob", "Metadata", null, "acl-t2", 0));
        m.add(new Cell("bob", "Metadata", null, "acl-secret", 0));
        m.add(new Cell("bob", "CreateTopics", null, "acl-b-new", 0));
        m.add(new Cell("bob", "DescribeAcls", null, null, 0));
        return m;
    }

    /** What one broker answered: every cell's outcome and the watched groups before and after. */
    record Run(Map<String, String> cells, Map<String, String> before, Map<String, String> after) {}

    @Test
    void sameAnswersAsKafka() throws Exception {
        Run kafka = run("kafka");
        // the reference broker first: this also checks the test itself (a refused request leaves no trace there)
        assertEquals(kafka.before(), kafka.after(), "kafka: a refused request changed a group (super user's view)");
        System.out.println("watched groups on kafka: " + kafka.before());
        Run ours;
        try {
            ours = run("ringleader");
        } catch (Exception | AssertionError e) {
            // still show what Kafka answered, the expected table
            System.out.println("\nACL matrix on kafka (ringleader failed: " + e + ")");
            kafka.cells().forEach((l, v) -> System.out.println("  " + l + " | " + v));
            throw e;
        }

        StringBuilder t = new StringBuilder("\nACL matrix (cell | kafka | ringleader)\n");
        List<String> diffs = new ArrayList<>();
        for (String label : kafka.cells().keySet()) {
            String k = kafka.cells().get(label), r = ours.cells().get(label);
            boolean same = k.equals(r);
            t.append(same ? "  " : "! ").append(label).append(" | ").append(k).append(" | ").append(r).append('\n');
            if (!same) {
                diffs.add(label + ": kafka " + k + ", ringleader " + r);
            }
        }
        System.out.println(t);
        assertEquals(kafka.before(), ours.before(), "the watched groups differ before the matrix");
        assertEquals(ours.before(), ours.after(), "ringleader: a refused request changed a group (super user's view)");
        assertTrue(diffs.isEmpty(), "outcomes differ from the reference broker:\n" + String.join("\n", diffs) + t);
        // the test must not pass vacuously: the table refuses and allows
        assertTrue(kafka.cells().values().stream().anyMatch(v -> v.startsWith("OK")));
        assertTrue(kafka.cells().values().stream().anyMatch(v -> v.contains("AuthorizationException")));
    }

    private static Run run(String kind) throws Exception {
        try (Broker b = Security.startWithUsers(kind, "acl", "group.initial.rebalance.delay.ms=0");
             Admin su = Clients.admin(b)) {
            for (var e : Map.of("acl-t", 2, "acl-t2", 1, "acl-pub", 1, "acl-secret", 1).entrySet()) {
                Clients.createTopic(su, e.getKey(), e.getValue());
            }
            for (String topic : List.of("acl-t", "acl-t2", "acl-pub", "acl-secret")) {
                try (KafkaProducer<String, String> p = Clients.producer(b, Map.of())) {
                    for (int i = 0; i < 5; i++) {
                        p.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i)).get(30, TimeUnit.SECONDS);
                    }
                }
            }
            for (String g : List.of("acl-a-g", "acl-a-del", "acl-b-g", "acl-b-denied")) {
                su.alterConsumerGroupOffsets(g, Map.of(new TopicPartition("acl-t", 0), new OffsetAndMetadata(3)))
                        .all().get(30, TimeUnit.SECONDS);
            }
            su.createAcls(table()).all().get(30, TimeUnit.SECONDS);
            // Kafka's ACLs reach the broker's authorizer through the metadata log after the controller answered
            Clients.waitUntil(Duration.ofSeconds(30), kind + " ACLs visible", () -> {
                try {
                    return su.describeAcls(AclBindingFilter.ANY).values().get(10, TimeUnit.SECONDS).size()
                            == table().size();
                } catch (Exception e) {
                    return false;
                }
            });
            Map<String, String> before = snapshot(su);
            Map<String, String> cells = new LinkedHashMap<>();
            for (Cell c : matrix()) {
                cells.put(c.label(), outcome(b, c));
            }
            Map<String, String> after = snapshot(su);
            return new Run(cells, before, after);
        }
    }

    /** A super user's view of the watched groups: state, members, committed offsets (or the error). */
    private static Map<String, String> snapshot(Admin su) {
        Map<String, String> out = new TreeMap<>();
        for (String g : WATCHED) {
            String s;
            try {
                ConsumerGroupDescription d = su.describeConsumerGroups(List.of(g)).all().get(30, TimeUnit.SECONDS).get(g);
                s = d.groupState() + " members=" + d.members().size();
            } catch (Exception e) {
                s = name(e);
            }
            try {
                s += " offsets=" + su.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata()
                        .get(30, TimeUnit.SECONDS).entrySet().stream()
                        .map(e -> e.getKey() + ":" + (e.getValue() == null ? "-" : e.getValue().offset())).sorted().toList();
            } catch (Exception e) {
                s += " offsets=" + name(e);
            }
            out.put(g, s);
        }
        return out;
    }

    /** The exception's class as the client raised it for the broker's error (ExecutionException unwrapped). */
    static String name(Throwable e) {
        while ((e instanceof ExecutionException || e.getClass() == KafkaException.class) && e.getCause() != null) {
            e = e.getCause();
        }
        return e.getClass().getSimpleName();
    }

    private static Properties security(Broker b, String user) {
        // alice by SCRAM-SHA-256, bob by PLAIN: both mechanisms reach the authorizer as User:<name>
        return Security.sasl(b, "SASL_PLAINTEXT", user.equals("alice") ? "SCRAM-SHA-256" : "PLAIN", user);
    }

    static String outcome(Broker b, Cell c) {
        Properties sec = security(b, c.user());
        try {
            return switch (c.op()) {
                case "JoinGroup(classic)" -> join(b, sec, c, "classic");
                case "ConsumerGroupHeartbeat" -> join(b, sec, c, "consumer");
                case "OffsetCommit" -> {
                    try (KafkaConsumer<String, String> k = new KafkaConsumer<>(Security.consumer(b, sec, c.group(), "classic"))) {
                        k.commitSync(Map.of(new TopicPartition(c.topic(), 0), new OffsetAndMetadata(c.value())),
                                Duration.ofSeconds(30));
                        yield "OK";
                    }
                }
                case "OffsetFetch" -> {
                    try (KafkaConsumer<String, String> k = new KafkaConsumer<>(Security.consumer(b, sec, c.group(), "classic"))) {
                        TopicPartition tp = new TopicPartition(c.topic(), 0);
                        OffsetAndMetadata o = k.committed(Set.of(tp), Duration.ofSeconds(30)).get(tp);
                        yield "OK:" + (o == null ? "none" : o.offset());
                    }
                }
                case "DescribeGroups" -> {
                    try (Admin a = Security.admin(sec, "acl-" + c.user())) {
                        ConsumerGroupDescription d = a.describeConsumerGroups(List.of(c.group())).all()
                                .get(30, TimeUnit.SECONDS).get(c.group());
                        yield "OK:" + d.groupState();
                    }
                }
                case "ListGroups" -> {
                    try (Admin a = Security.admin(sec, "acl-" + c.user())) {
                        yield "OK:" + a.listGroups().all().get(30, TimeUnit.SECONDS).stream()
                                .map(g -> g.groupId()).sorted().toList();
                    }
                }
                case "DeleteGroups" -> {
                    try (Admin a = Security.admin(sec, "acl-" + c.user())) {
                        a.deleteConsumerGroups(List.of(c.group())).all().get(30, TimeUnit.SECONDS);
                        yield "OK";
                    }
                }
                case "Produce", "Produce(non-idempotent)" -> {
                    Properties p = new Properties();
                    if (c.op().equals("Produce(non-idempotent)")) {
                        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false);
                        p.put(ProducerConfig.ACKS_CONFIG, "1");
                    }
                    p.putAll(sec);
                    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                    p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 20000);
                    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30000);
                    p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
                    try (KafkaProducer<String, String> k = new KafkaProducer<>(p)) {
                        k.send(new ProducerRecord<>(c.topic(), 0, "k", "v")).get(40, TimeUnit.SECONDS);
                        yield "OK";
                    }
                }
                case "Fetch" -> {
                    Properties p = Security.consumer(b, sec, "unused", "classic");
                    p.remove(ConsumerConfig.GROUP_ID_CONFIG);
                    try (KafkaConsumer<String, String> k = new KafkaConsumer<>(p)) {
                        TopicPartition tp = new TopicPartition(c.topic(), 0);
                        k.assign(List.of(tp));
                        k.seek(tp, 0);
                        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
                        int n = 0;
                        while (n == 0 && System.nanoTime() < deadline) {
                            n += k.poll(Duration.ofMillis(200)).count();
                        }
                        yield n > 0 ? "OK:records" : "TIMEOUT";
                    }
                }
                case "Metadata" -> {
                    try (Admin a = Security.admin(sec, "acl-" + c.user())) {
                        TopicDescription d = a.describeTopics(List.of(c.topic())).allTopicNames()
                                .get(30, TimeUnit.SECONDS).get(c.topic());
                        yield "OK:partitions=" + d.partitions().size();
                    }
                }
                case "CreateTopics" -> {
                    try (Admin a = Security.admin(sec, "acl-" + c.user())) {
                        a.createTopics(List.of(new NewTopic(c.topic(), 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
                        yield "OK";
                    }
                }
                case "DescribeAcls" -> {
                    try (Admin a = Security.admin(sec, "acl-" + c.user())) {
                        yield "OK:" + a.describeAcls(AclBindingFilter.ANY).values().get(30, TimeUnit.SECONDS).size()
                                + " acls";
                    }
                }
                default -> throw new IllegalArgumentException(c.op());
            };
        } catch (Exception e) {
            return name(e);
        }
    }

    /** A group member (classic or consumer protocol) subscribing to the cell's topic: OK once it owns a partition. */
    private static String join(Broker b, Properties sec, Cell c, String protocol) {
        try (KafkaConsumer<String, String> k = new KafkaConsumer<>(Security.consumer(b, sec, c.group(), protocol))) {
            k.subscribe(List.of(c.topic()));
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (System.nanoTime() < deadline) {
                k.poll(Duration.ofMillis(200));
                if (!k.assignment().isEmpty()) {
                    return "OK:assigned";
                }
            }
            return "TIMEOUT";
        } catch (Exception e) {
            return name(e);
        }
    }
}
