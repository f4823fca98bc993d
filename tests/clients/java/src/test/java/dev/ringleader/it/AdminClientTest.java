package dev.ringleader.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ringleader.it.support.Broker;
import dev.ringleader.it.support.Clients;
import dev.ringleader.it.support.ReferenceKafka;
import dev.ringleader.it.support.RingleaderBroker;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.config.ConfigResource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The Java AdminClient against Ringleader, one scenario run on Ringleader and on the reference Kafka broker: each step
 * writes what it saw as a line ("createTopics adm-a: ok"), ids and hosts left out, and the two transcripts must be
 * equal line for line. The scenario also checks its own expectations (a topic listed after it is created, offsets
 * changed after they are altered), so it fails on a broker that answers wrongly in the same way twice.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class AdminClientTest {
    private RingleaderBroker ringleader;

    @BeforeAll
    void start() {
        ringleader = RingleaderBroker.start("admin", "group.initial.rebalance.delay.ms=0");
    }

    @AfterAll
    void stop() {
        if (ringleader != null) {
            ringleader.close();
        }
    }

    @Test
    void sameTranscriptAsKafka() throws Exception {
        List<String> kafka = new Scenario(ReferenceKafka.shared()).run();
        List<String> ours = new Scenario(ringleader).run();
        System.out.println("---- kafka\n" + String.join("\n", kafka) + "\n---- ringleader\n" + String.join("\n", ours));
        for (int i = 0; i < Math.min(kafka.size(), ours.size()); i++) {
            assertEquals(kafka.get(i), ours.get(i), "transcript line " + (i + 1));
        }
        assertEquals(kafka.size(), ours.size(), "transcript length");
    }

    /** One run of the scenario against one broker. Names carry a prefix so runs on the shared broker stay apart. */
    static final class Scenario {
        final Broker b;
        final List<String> out = new ArrayList<>();
        final String a = "adm-a";
        final String t2 = "adm-b";

        Scenario(Broker b) {
            this.b = b;
        }

        void line(String s) {
            out.add(s);
        }

        /** The outcome of a call: "ok" or the exception's simple class name (what a caller branches on). */
        static String outcome(ThrowingRunnable r) {
            try {
                r.run();
                return "ok";
            } catch (ExecutionException e) {
                return e.getCause().getClass().getSimpleName();
            } catch (Exception e) {
                return e.getClass().getSimpleName();
            }
        }

        /** "ok", or the exception's class and message: where Kafka's message is part of the contract. */
        static String failure(ThrowingRunnable r) {
            try {
                r.run();
                return "ok";
            } catch (ExecutionException e) {
                return e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage();
            } catch (Exception e) {
                return e.getClass().getSimpleName() + ": " + e.getMessage();
            }
        }

        interface ThrowingRunnable {
            void run() throws Exception;
        }

        static <T> T get(org.apache.kafka.common.KafkaFuture<T> f) throws Exception {
            return f.get(30, TimeUnit.SECONDS);
        }

        List<String> run() throws Exception {
            try (Admin admin = Clients.admin(b)) {
                topics(admin);
                offsets(admin);
                groups(admin);
            }
            return out;
        }

        void topics(Admin admin) throws Exception {
            Map<String, String> configs = new TreeMap<>(Map.of(
                    "retention.ms", "3600000", "cleanup.policy", "delete", "max.message.bytes", "2000000"));
            line("createTopics " + a + ": " + outcome(() -> get(admin.createTopics(List.of(
                    new NewTopic(a, 3, (short) 1).configs(configs))).all())));
            line("createTopics " + t2 + ": " + outcome(() -> get(admin.createTopics(List.of(
                    new NewTopic(t2, 2, (short) 1))).all())));
            line("createTopics again: " + outcome(() -> get(admin.createTopics(List.of(
                    new NewTopic(a, 3, (short) 1))).all())));
            line("createTopics bad config: " + outcome(() -> get(admin.createTopics(List.of(
                    new NewTopic("adm-bad", 1, (short) 1).configs(Map.of("retention.ms", "soon")))).all())));
            line("createTopics 0 partitions: " + outcome(() -> get(admin.createTopics(List.of(
                    new NewTopic("adm-zero", 0, (short) 1))).all())));
            line("createTopics rf 3: " + outcome(() -> get(admin.createTopics(List.of(
                    new NewTopic("adm-rf3", 1, (short) 3))).all())));
            // A created topic reaches Kafka's metadata cache a moment after CreateTopics answers.
            Clients.waitUntil(Duration.ofSeconds(30), "both topics listed", () -> uncheck(() -> {
                Set<String> names = get(admin.listTopics().names());
                return names.contains(a) && names.contains(t2);
            }));
            line("listTopics has both: true");

            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, a);
            Config cfg = get(admin.describeConfigs(List.of(res)).all()).get(res);
            for (String k : List.of("retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes",
                    "retention.bytes", "message.timestamp.type", "compression.type")) {
                ConfigEntry e = cfg.get(k);
                line("describeConfigs " + k + ": " + (e == null ? "absent"
                        : e.value() + " " + e.source() + " default=" + e.isDefault() + " readOnly=" + e.isReadOnly()));
            }
            line("describeConfigs unknown topic: " + outcome(() -> get(admin.describeConfigs(List.of(
                    new ConfigResource(ConfigResource.Type.TOPIC, "adm-missing"))).all())));

            Map<String, TopicDescription> d = get(admin.describeTopics(TopicCollection.ofTopicNames(List.of(a, t2)))
                    .allTopicNames());
            for (String n : List.of(a, t2)) {
                TopicDescription td = d.get(n);
                line("describeTopics " + n + ": partitions=" + td.partitions().size() + " internal=" + td.isInternal()
                        + " idSet=" + !td.topicId().equals(org.apache.kafka.common.Uuid.ZERO_UUID)
                        + " leaders=" + td.partitions().stream().map(p -> p.leader() == null ? "none" : "node").toList()
                        + " replicas=" + td.partitions().stream().map(p -> p.replicas().size() + "/" + p.isr().size()).toList());
            }
            line("describeTopics unknown: " + outcome(() -> get(admin.describeTopics(
                    TopicCollection.ofTopicNames(List.of("adm-missing"))).allTopicNames())));

            // CreatePartitions: the change, validate-only, and Kafka's refusals with their messages.
            line("createPartitions " + t2 + " to 4: " + failure(() -> get(admin.createPartitions(
                    Map.of(t2, NewPartitions.increaseTo(4))).all())));
            line("createPartitions validateOnly: " + failure(() -> get(admin.createPartitions(
                    Map.of(a, NewPartitions.increaseTo(5)), new CreatePartitionsOptions().validateOnly(true)).all())));
            line("createPartitions decrease: " + failure(() -> get(admin.createPartitions(
                    Map.of(t2, NewPartitions.increaseTo(2))).all())));
            line("createPartitions same count: " + failure(() -> get(admin.createPartitions(
                    Map.of(t2, NewPartitions.increaseTo(4))).all())));
            line("createPartitions unknown topic: " + failure(() -> get(admin.createPartitions(
                    Map.of("adm-missing", NewPartitions.increaseTo(4))).all())));
            Clients.waitUntil(Duration.ofSeconds(30), t2 + " described with 4 partitions", () -> uncheck(() ->
                    get(admin.describeTopics(TopicCollection.ofTopicNames(List.of(t2))).allTopicNames())
                            .get(t2).partitions().size() == 4));
            line("describeTopics " + t2 + " after createPartitions: 4 partitions");
            line("describeTopics " + a + " after validateOnly: partitions=" + get(admin.describeTopics(
                    TopicCollection.ofTopicNames(List.of(a))).allTopicNames()).get(a).partitions().size());

            // IncrementalAlterConfigs: set, append to a list, the refusals, delete.
            ConfigResource resB = new ConfigResource(ConfigResource.Type.TOPIC, t2);
            line("incrementalAlterConfigs set+append: " + failure(() -> get(admin.incrementalAlterConfigs(Map.of(resB,
                    List.of(new AlterConfigOp(new ConfigEntry("retention.ms", "1000"), AlterConfigOp.OpType.SET),
                            new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND))))
                    .all())));
            line("incrementalAlterConfigs append to a non-list: " + failure(() -> get(admin.incrementalAlterConfigs(
                    Map.of(resB, List.of(new AlterConfigOp(new ConfigEntry("retention.ms", "5"),
                            AlterConfigOp.OpType.APPEND)))).all())));
            line("incrementalAlterConfigs unknown key: " + failure(() -> get(admin.incrementalAlterConfigs(
                    Map.of(resB, List.of(new AlterConfigOp(new ConfigEntry("no.such.config", "1"),
                            AlterConfigOp.OpType.SET)))).all())));
            line("incrementalAlterConfigs unknown topic: " + failure(() -> get(admin.incrementalAlterConfigs(
                    Map.of(new ConfigResource(ConfigResource.Type.TOPIC, "adm-missing"), List.of(new AlterConfigOp(
                            new ConfigEntry("retention.ms", "5"), AlterConfigOp.OpType.SET)))).all())));
            // Kafka applies a config change to its brokers' caches a moment after answering.
            Clients.waitUntil(Duration.ofSeconds(30), "altered configs described", () -> uncheck(() -> {
                Config c2 = get(admin.describeConfigs(List.of(resB)).all()).get(resB);
                return "1000".equals(c2.get("retention.ms").value());
            }));
            Config altered = get(admin.describeConfigs(List.of(resB)).all()).get(resB);
            for (String k : List.of("retention.ms", "cleanup.policy")) {
                ConfigEntry e = altered.get(k);
                line("describeConfigs after alter " + k + ": " + e.value() + " " + e.source() + " default=" + e.isDefault());
            }
            line("incrementalAlterConfigs delete+subtract: " + failure(() -> get(admin.incrementalAlterConfigs(
                    Map.of(resB, List.of(
                            new AlterConfigOp(new ConfigEntry("retention.ms", null), AlterConfigOp.OpType.DELETE),
                            new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"),
                                    AlterConfigOp.OpType.SUBTRACT)))).all())));
            Clients.waitUntil(Duration.ofSeconds(30), "deleted config back to its default", () -> uncheck(() ->
                    get(admin.describeConfigs(List.of(resB)).all()).get(resB).get("retention.ms").isDefault()));
            Config back = get(admin.describeConfigs(List.of(resB)).all()).get(resB);
            for (String k : List.of("retention.ms", "cleanup.policy")) {
                ConfigEntry e = back.get(k);
                line("describeConfigs after delete+subtract " + k + ": " + e.value() + " " + e.source()
                        + " default=" + e.isDefault());
            }

            DescribeClusterResult c = admin.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(true));
            line("describeCluster: nodes=" + get(c.nodes()).size() + " controller=" + (get(c.controller()) != null)
                    + " clusterId=" + (get(c.clusterId()) != null));
            line("describeCluster authorizedOperations: " + new TreeSet<>(get(c.authorizedOperations())));
            line("describeCluster without ops: " + admin.describeCluster().authorizedOperations().get());

            line("deleteTopics " + t2 + "-tmp: " + outcome(() -> get(admin.deleteTopics(List.of("adm-missing")).all())));
            get(admin.createTopics(List.of(new NewTopic("adm-tmp", 1, (short) 1))).all());
            line("deleteTopics adm-tmp: " + outcome(() -> get(admin.deleteTopics(List.of("adm-tmp")).all())));
            Clients.waitUntil(Duration.ofSeconds(30), "adm-tmp gone from listTopics",
                    () -> uncheck(() -> !get(admin.listTopics().names()).contains("adm-tmp")));
            line("listTopics after delete: adm-tmp gone");
        }

        void offsets(Admin admin) throws Exception {
            TopicPartition tp = new TopicPartition(t2, 0);
            try (KafkaProducer<String, String> p = Clients.producer(b, Map.of())) {
                for (int i = 0; i < 10; i++) {
                    p.send(new ProducerRecord<>(t2, 0, 1000L * (i + 1), "k" + i, "v" + i)).get(30, TimeUnit.SECONDS);
                }
            }
            Map<String, OffsetSpec> specs = new java.util.LinkedHashMap<>();
            specs.put("earliest", OffsetSpec.earliest());
            specs.put("latest", OffsetSpec.latest());
            specs.put("maxTimestamp", OffsetSpec.maxTimestamp());
            specs.put("forTimestamp(4500)", OffsetSpec.forTimestamp(4500));
            specs.put("forTimestamp(99999)", OffsetSpec.forTimestamp(99999));
            Supplier<String> list = () -> {
                StringBuilder sb = new StringBuilder();
                specs.forEach((name, spec) -> {
                    var info = uncheck(() -> get(admin.listOffsets(Map.of(tp, spec)).all()).get(tp));
                    sb.append(name).append('=').append(info.offset()).append('@').append(info.timestamp()).append(' ');
                });
                return sb.toString().strip();
            };
            line("listOffsets " + tp + ": " + list.get());
            var lw = get(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp));
            line("deleteRecords before 4: lowWatermark=" + lw.lowWatermark());
            line("listOffsets after deleteRecords: " + list.get());
            line("deleteRecords past the end: " + outcome(() -> get(admin.deleteRecords(
                    Map.of(tp, RecordsToDelete.beforeOffset(50))).all())));
            line("listOffsets unknown partition: " + outcome(() -> get(admin.listOffsets(
                    Map.of(new TopicPartition(t2, 7), OffsetSpec.latest())).all())));
            line("describeLogDirs " + t2 + ": " + logDirs(admin));
        }

        /**
         * DescribeLogDirs of the broker: how many directories, and for t2's partitions its offset lag and whether it
         * is a future log, and whether the volume's sizes are known. Paths and sizes differ between brokers: Kafka's
         * time retention removes partition 0's records (their timestamps are from 1970) at a moment of its own,
         * rolling the active segment, which Ringleader's retention never removes.
         */
        String logDirs(Admin admin) throws Exception {
            int node = get(admin.describeCluster().nodes()).iterator().next().id();
            var dirs = get(admin.describeLogDirs(List.of(node)).allDescriptions()).get(node);
            StringBuilder sb = new StringBuilder(dirs.size() + " dir(s)");
            for (var d : dirs.values()) {
                sb.append(" error=").append(d.error() == null ? "none" : d.error().getClass().getSimpleName());
                sb.append(" volume sizes known=").append(d.totalBytes().isPresent() && d.usableBytes().isPresent());
                TreeMap<Integer, String> parts = new TreeMap<>();
                d.replicaInfos().forEach((tp, info) -> {
                    if (tp.topic().equals(t2)) {
                        parts.put(tp.partition(), "lag=" + info.offsetLag() + (info.isFuture() ? " future" : "")
                                + (info.size() >= 0 ? "" : " size unknown"));
                    }
                });
                sb.append(' ').append(parts);
            }
            return sb.toString();
        }

        void groups(Admin admin) throws Exception {
            String classic = "adm-classic";
            String modern = "adm-848";
            String staticGroup = "adm-static";
            try (KafkaConsumer<String, String> c1 = consumer(classic, "classic", null);
                 KafkaConsumer<String, String> c2 = consumer(modern, "consumer", null);
                 KafkaConsumer<String, String> c3 = consumer(staticGroup, "classic", "instance-1")) {
                for (var c : List.of(c1, c2, c3)) {
                    c.subscribe(List.of(a));
                }
                Clients.waitUntil(Duration.ofSeconds(60), "three consumers assigned", () -> {
                    for (var c : List.of(c1, c2, c3)) {
                        c.poll(Duration.ofMillis(50));
                    }
                    return c1.assignment().size() == 3 && c2.assignment().size() == 3 && c3.assignment().size() == 3;
                });
                for (var c : List.of(c1, c2)) {
                    Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
                    for (int p = 0; p < 3; p++) {
                        commit.put(new TopicPartition(a, p), new OffsetAndMetadata(p + 1, "m" + p));
                    }
                    c.commitSync(commit);
                }
                Set<String> ours = Set.of(classic, modern, staticGroup);
                line("listGroups: " + listed(admin, new ListGroupsOptions(), ours));
                line("listGroups consumer type: " + listed(admin, new ListGroupsOptions().withTypes(Set.of(GroupType.CONSUMER)), ours));
                line("listGroups classic type: " + listed(admin, new ListGroupsOptions().withTypes(Set.of(GroupType.CLASSIC)), ours));
                line("listGroups stable: " + listed(admin, new ListGroupsOptions().inGroupStates(Set.of(GroupState.STABLE)), ours));
                line("listGroups empty: " + listed(admin, new ListGroupsOptions().inGroupStates(Set.of(GroupState.EMPTY)), ours));
                line("listGroups consumer groups: " + listed(admin, ListGroupsOptions.forConsumerGroups(), ours));
                describe(admin, List.of(classic, modern, staticGroup));
                line("listConsumerGroupOffsets " + classic + ": " + offsetsOf(admin, classic));
                line("listConsumerGroupOffsets " + modern + ": " + offsetsOf(admin, modern));
                line("alterConsumerGroupOffsets while active: " + outcome(() -> get(admin.alterConsumerGroupOffsets(
                        classic, Map.of(new TopicPartition(a, 0), new OffsetAndMetadata(0))).all())));
                line("deleteConsumerGroupOffsets while subscribed: " + outcome(() -> get(admin.deleteConsumerGroupOffsets(
                        classic, Set.of(new TopicPartition(a, 0))).all())));
                line("deleteConsumerGroups while active: " + outcome(() -> get(admin.deleteConsumerGroups(List.of(modern)).all())));
                line("removeMembers static instance-1: " + outcome(() -> get(admin.removeMembersFromConsumerGroup(staticGroup,
                        new RemoveMembersFromConsumerGroupOptions(List.of(new MemberToRemove("instance-1")))).all())));
                line("removeMembers unknown instance: " + outcome(() -> get(admin.removeMembersFromConsumerGroup(staticGroup,
                        new RemoveMembersFromConsumerGroupOptions(List.of(new MemberToRemove("instance-9")))).all())));
                line("removeMembers all of " + modern + ": " + outcome(() -> get(admin.removeMembersFromConsumerGroup(modern,
                        new RemoveMembersFromConsumerGroupOptions()).all())));
                line("describe " + modern + " after removal: " + uncheck(() -> get(admin.describeConsumerGroups(List.of(modern))
                        .all()).get(modern).members().size()) + " members");
            }
            // All consumers closed: the groups are empty and take admin offset changes.
            Clients.waitUntil(Duration.ofSeconds(30), "groups empty", () -> uncheck(() -> get(admin.describeConsumerGroups(
                    List.of(classic, modern)).all()).values().stream().allMatch(g -> g.members().isEmpty())));
            line("alterConsumerGroupOffsets " + classic + ": " + outcome(() -> get(admin.alterConsumerGroupOffsets(classic,
                    Map.of(new TopicPartition(a, 0), new OffsetAndMetadata(7, "seven"))).all())));
            line("alterConsumerGroupOffsets new group: " + outcome(() -> get(admin.alterConsumerGroupOffsets("adm-fresh",
                    Map.of(new TopicPartition(a, 1), new OffsetAndMetadata(3))).all())));
            line("alterConsumerGroupOffsets unknown partition: " + outcome(() -> get(admin.alterConsumerGroupOffsets(classic,
                    Map.of(new TopicPartition(a, 9), new OffsetAndMetadata(3))).all())));
            line("listConsumerGroupOffsets after alter: " + offsetsOf(admin, classic));
            line("listConsumerGroupOffsets adm-fresh: " + offsetsOf(admin, "adm-fresh"));
            line("deleteConsumerGroupOffsets " + classic + " p1: " + outcome(() -> get(admin.deleteConsumerGroupOffsets(classic,
                    Set.of(new TopicPartition(a, 1))).all())));
            line("listConsumerGroupOffsets after delete: " + offsetsOf(admin, classic));
            line("deleteConsumerGroupOffsets unknown group: " + outcome(() -> get(admin.deleteConsumerGroupOffsets("adm-none",
                    Set.of(new TopicPartition(a, 1))).all())));
            line("listGroups empty: " + listed(admin, new ListGroupsOptions().inGroupStates(Set.of(GroupState.EMPTY)),
                    Set.of(classic, modern, staticGroup, "adm-fresh")));
            line("deleteConsumerGroups: " + outcome(() -> get(admin.deleteConsumerGroups(List.of(classic, modern, "adm-fresh")).all())));
            line("deleteConsumerGroups unknown: " + outcome(() -> get(admin.deleteConsumerGroups(List.of("adm-none")).all())));
            line("listConsumerGroupOffsets deleted group: " + offsetsOf(admin, classic));
            line("describe deleted: " + stateOrError(admin, classic) + " " + stateOrError(admin, modern));
        }

        KafkaConsumer<String, String> consumer(String group, String protocol, String instance) {
            Properties p = Clients.consumerProps(b, group, protocol);
            if (instance != null) {
                p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance);
            }
            return new KafkaConsumer<>(p);
        }

        static String listed(Admin admin, ListGroupsOptions o, Set<String> ours) throws Exception {
            Collection<GroupListing> all = get(admin.listGroups(o).all());
            TreeSet<String> s = new TreeSet<>();
            for (GroupListing g : all) {
                if (ours.contains(g.groupId())) {
                    s.add(g.groupId() + ":" + g.type().map(Object::toString).orElse("?") + ":"
                            + g.groupState().map(Object::toString).orElse("?") + ":" + g.protocol());
                }
            }
            return s.toString();
        }

        void describe(Admin admin, List<String> groups) throws Exception {
            Map<String, ConsumerGroupDescription> d = get(admin.describeConsumerGroups(groups,
                    new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true)).all());
            for (String g : groups) {
                ConsumerGroupDescription x = d.get(g);
                line("describeConsumerGroups " + g + ": type=" + x.type() + " state=" + x.groupState()
                        + " assignor=" + x.partitionAssignor() + " simple=" + x.isSimpleConsumerGroup()
                        + " coordinator=" + (x.coordinator() != null) + " groupEpoch=" + x.groupEpoch()
                        + " targetAssignmentEpoch=" + x.targetAssignmentEpoch()
                        + " ops=" + new TreeSet<AclOperation>(x.authorizedOperations() == null ? Set.of() : x.authorizedOperations()));
                for (MemberDescription m : x.members()) {
                    line("  member: instance=" + m.groupInstanceId().orElse("-") + " host=" + m.host()
                            + " clientId=" + m.clientId().replaceAll("-\\d+$", "-N")
                            + " assignment=" + new TreeSet<>(m.assignment().topicPartitions().stream().map(TopicPartition::toString).toList())
                            + " target=" + m.targetAssignment().map(t -> new TreeSet<>(t.topicPartitions().stream()
                                    .map(TopicPartition::toString).toList()).toString()).orElse("-")
                            + " epoch=" + m.memberEpoch() + " upgraded=" + m.upgraded());
                }
            }
            line("describeConsumerGroups unknown: " + stateOrError(admin, "adm-none"));
        }

        /** A group's state as describeConsumerGroups reports it, or the exception it fails with. */
        static String stateOrError(Admin admin, String group) {
            try {
                return get(admin.describeConsumerGroups(List.of(group)).all()).get(group).groupState().toString();
            } catch (ExecutionException e) {
                return e.getCause().getClass().getSimpleName();
            } catch (Exception e) {
                return e.getClass().getSimpleName();
            }
        }

        static String offsetsOf(Admin admin, String group) throws Exception {
            Map<TopicPartition, OffsetAndMetadata> m = get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
            TreeMap<String, String> s = new TreeMap<>();
            m.forEach((tp, om) -> s.put(tp.toString(), om == null ? "null" : om.offset() + "/" + om.metadata()
                    + "/" + om.leaderEpoch().map(Object::toString).orElse("-")));
            return s.toString();
        }

        interface ThrowingSupplier<T> {
            T get() throws Exception;
        }

        static <T> T uncheck(ThrowingSupplier<T> s) {
            try {
                return s.get();
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }
    }

    @Test
    void authorizedOperationsAreEverythingWithoutAnAuthorizer() throws Exception {
        try (Admin admin = Clients.admin(ringleader)) {
            Set<AclOperation> ops = admin.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(true))
                    .authorizedOperations().get(30, TimeUnit.SECONDS);
            assertTrue(ops.contains(AclOperation.ALTER) && ops.contains(AclOperation.IDEMPOTENT_WRITE), ops.toString());
        }
    }
}
