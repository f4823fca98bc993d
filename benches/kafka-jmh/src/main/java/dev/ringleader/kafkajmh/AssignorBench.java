package dev.ringleader.kafkajmh;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metadata.PartitionRecord;
import org.apache.kafka.common.metadata.TopicRecord;
import org.apache.kafka.coordinator.common.runtime.CoordinatorMetadataImage;
import org.apache.kafka.coordinator.common.runtime.KRaftCoordinatorMetadataImage;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.PartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.RangeAssignor;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.apache.kafka.coordinator.group.modern.Assignment;
import org.apache.kafka.coordinator.group.modern.GroupSpecImpl;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;
import org.apache.kafka.coordinator.group.modern.SubscribedTopicDescriberImpl;
import org.apache.kafka.coordinator.group.modern.TopicIds;
import org.apache.kafka.image.MetadataDelta;
import org.apache.kafka.image.MetadataImage;
import org.apache.kafka.image.MetadataProvenance;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * Kafka 4.4's server-side assignors ({@code UniformAssignor}, {@code RangeAssignor}) on the shapes of Kafka's own
 * {@code ServerSideAssignorBenchmark} (jmh-benchmarks/.../assignor/ServerSideAssignorBenchmark.java), rack-unaware:
 * {@code memberCount} members, {@code memberCount × partitionsToMemberRatio} partitions spread evenly over
 * {@code topicCount} topics; homogeneous (everyone subscribes to every topic) or heterogeneous (members and topics cut
 * into 5 buckets, each bucket's members subscribing to that bucket's topics). FULL assigns a group with no current
 * assignment; INCREMENTAL assigns {@code memberCount - 1} members first, hands each its target as its current
 * assignment, and measures the assignment after one new member joins (a heterogeneous newcomer takes the
 * subscription of member {@code memberCount - 2}), as Kafka's benchmark does.
 *
 * <p>Only the shapes issue 16 compares are run (JMH would otherwise take the cross product of the parameters), so
 * the shape is one parameter: {@code SUBSCRIPTION-MEMBERSxRATIO-TOPICSt}.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
public class AssignorBench {

    @Param({"homogeneous-10000x10-1000t", "homogeneous-5000x50-1000t", "heterogeneous-1000x50-1000t"})
    public String shape;

    @Param({"uniform", "range"})
    public String assignor;

    @Param({"full", "incremental"})
    public String assignment;

    /** Kafka's benchmark splits a heterogeneous group into this many subscription buckets. */
    private static final int BUCKETS = 5;

    private PartitionAssignor partitionAssignor;
    private TopicIds.CachedTopicResolver topicResolver;
    private SubscribedTopicDescriber describer;
    private GroupSpec groupSpec;

    @Setup(Level.Trial)
    public void setup() {
        String[] s = shape.split("-");
        SubscriptionType subscription = SubscriptionType.valueOf(s[0].toUpperCase());
        String[] mr = s[1].split("x");
        int memberCount = Integer.parseInt(mr[0]);
        int ratio = Integer.parseInt(mr[1]);
        int topicCount = Integer.parseInt(s[2].replace("t", ""));
        boolean incremental = switch (assignment) {
            case "full" -> false;
            case "incremental" -> true;
            default -> throw new IllegalArgumentException("assignment: full or incremental, not " + assignment);
        };
        partitionAssignor = switch (assignor) {
            case "uniform" -> new UniformAssignor();
            case "range" -> new RangeAssignor();
            default -> throw new IllegalArgumentException("assignor: uniform or range, not " + assignor);
        };

        // Topics "topic-0".., each with the same partition count, ids 1..N (stable across runs, like
        // Uuid::from_u128(i + 1) in the Rust bench). Every partition has two replicas, as in Kafka's helper.
        int partitionsPerTopic = memberCount * ratio / topicCount;
        List<String> topicNames = new ArrayList<>(topicCount);
        MetadataDelta delta = new MetadataDelta.Builder().setImage(MetadataImage.EMPTY).build();
        for (int t = 0; t < topicCount; t++) {
            String name = "topic-" + t;
            Uuid id = new Uuid(0L, t + 1L);
            topicNames.add(name);
            delta.replay(new TopicRecord().setTopicId(id).setName(name));
            for (int p = 0; p < partitionsPerTopic; p++) {
                delta.replay(new PartitionRecord().setTopicId(id).setPartitionId(p).setReplicas(List.of(p % 4, (p + 1) % 4)));
            }
        }
        CoordinatorMetadataImage image = new KRaftCoordinatorMetadataImage(delta.apply(MetadataProvenance.EMPTY));
        topicResolver = new TopicIds.CachedTopicResolver(image);
        describer = new SubscribedTopicDescriberImpl(image);

        // Members "member0".. with no rack and no current assignment; the newcomer of an incremental run is left out.
        int initialMembers = incremental ? memberCount - 1 : memberCount;
        Map<String, Set<String>> subscriptions = new HashMap<>();
        if (subscription == SubscriptionType.HOMOGENEOUS) {
            Set<String> all = new HashSet<>(topicNames);
            for (int i = 0; i < initialMembers; i++) subscriptions.put("member" + i, all);
        } else {
            int buckets = Math.min(BUCKETS, initialMembers);
            int topicsPerBucket = (topicCount + buckets - 1) / buckets;
            int membersPerBucket = (initialMembers + buckets - 1) / buckets;
            for (int b = 0; b < buckets; b++) {
                Set<String> topics = new HashSet<>(topicNames.subList(b * topicsPerBucket, Math.min((b + 1) * topicsPerBucket, topicCount)));
                for (int i = b * membersPerBucket; i < Math.min((b + 1) * membersPerBucket, initialMembers); i++) {
                    subscriptions.put("member" + i, topics);
                }
            }
        }
        Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
        subscriptions.forEach((id, topics) -> members.put(id, member(topics, Assignment.EMPTY)));
        groupSpec = new GroupSpecImpl(members, subscription, Map.of());
        int expected = topicCount * partitionsPerTopic;

        if (incremental) {
            GroupAssignment first = partitionAssignor.assign(groupSpec, describer);
            check(first, expected, initialMembers);
            Map<String, MemberSubscriptionAndAssignmentImpl> current = new HashMap<>();
            Map<Uuid, Map<Integer, String>> owners = new HashMap<>();
            first.members().forEach((id, a) -> {
                current.put(id, member(subscriptions.get(id), new Assignment(Map.copyOf(a.partitions()))));
                a.partitions().forEach((topic, parts) -> {
                    Map<Integer, String> byPartition = owners.computeIfAbsent(topic, k -> new HashMap<>());
                    for (Integer p : parts) byPartition.put(p, id);
                });
            });
            // Members the first round gave nothing keep an empty assignment.
            subscriptions.forEach((id, topics) -> current.putIfAbsent(id, member(topics, Assignment.EMPTY)));
            Set<String> newcomer = subscription == SubscriptionType.HOMOGENEOUS
                ? new HashSet<>(topicNames)
                : subscriptions.get("member" + (memberCount - 2));
            current.put("newMember", member(newcomer, Assignment.EMPTY));
            groupSpec = new GroupSpecImpl(current, subscription, owners);
        }
        // The measured call must do the real work: every partition assigned once, to the group's members.
        check(partitionAssignor.assign(groupSpec, describer), expected, memberCount);
    }

    private MemberSubscriptionAndAssignmentImpl member(Set<String> topics, Assignment current) {
        return new MemberSubscriptionAndAssignmentImpl(Optional.empty(), Optional.empty(), new TopicIds(topics, topicResolver), current);
    }

    private static void check(GroupAssignment result, int expectedPartitions, int members) {
        Set<Long> seen = new HashSet<>();
        int total = 0;
        for (MemberAssignment a : result.members().values()) {
            for (Map.Entry<Uuid, Set<Integer>> e : a.partitions().entrySet()) {
                for (Integer p : e.getValue()) {
                    total++;
                    if (!seen.add(e.getKey().getLeastSignificantBits() << 32 | p)) {
                        throw new IllegalStateException("partition assigned twice: " + e.getKey() + "-" + p);
                    }
                }
            }
        }
        if (total != expectedPartitions || result.members().size() > members) {
            throw new IllegalStateException("assigned " + total + " of " + expectedPartitions + " partitions to "
                + result.members().size() + " members (group of " + members + ")");
        }
    }

    /** One assignment. The topic resolver's cache is cleared first, as Kafka's ServerSideAssignorBenchmark does. */
    @Benchmark
    public GroupAssignment assign() {
        topicResolver.clear();
        return partitionAssignor.assign(groupSpec, describer);
    }
}
