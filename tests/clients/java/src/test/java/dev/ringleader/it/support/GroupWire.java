package dev.ringleader.it.support;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.ConsumerGroupHeartbeatRequestData;
import org.apache.kafka.common.message.ConsumerGroupHeartbeatResponseData;
import org.apache.kafka.common.message.HeartbeatRequestData;
import org.apache.kafka.common.message.HeartbeatResponseData;
import org.apache.kafka.common.message.JoinGroupRequestData;
import org.apache.kafka.common.message.JoinGroupRequestData.JoinGroupRequestProtocol;
import org.apache.kafka.common.message.JoinGroupRequestData.JoinGroupRequestProtocolCollection;
import org.apache.kafka.common.message.JoinGroupResponseData;
import org.apache.kafka.common.message.LeaveGroupRequestData;
import org.apache.kafka.common.message.LeaveGroupRequestData.MemberIdentity;
import org.apache.kafka.common.message.LeaveGroupResponseData;
import org.apache.kafka.common.message.OffsetCommitRequestData;
import org.apache.kafka.common.message.OffsetCommitRequestData.OffsetCommitRequestPartition;
import org.apache.kafka.common.message.OffsetCommitRequestData.OffsetCommitRequestTopic;
import org.apache.kafka.common.message.OffsetCommitResponseData;
import org.apache.kafka.common.message.SyncGroupRequestData;
import org.apache.kafka.common.message.SyncGroupRequestData.SyncGroupRequestAssignment;
import org.apache.kafka.common.message.SyncGroupResponseData;
import org.apache.kafka.common.protocol.Errors;

/**
 * Group requests built from the Java client's message classes, for tests that drive a broker step by step: the same
 * bytes go to Ringleader and to the reference broker. Versions are the newest both serve unless a caller says.
 */
public final class GroupWire {
    private GroupWire() {}

    public static final short JOIN_V = 9;
    public static final short SYNC_V = 5;
    public static final short HEARTBEAT_V = 4;
    public static final short LEAVE_V = 5;
    public static final short COMMIT_V = 9;
    public static final short CGH_V = 1;

    public static String err(short code) {
        return Errors.forCode(code).name();
    }

    public static byte[] subscription(String... topics) {
        return bytes(ConsumerProtocol.serializeSubscription(new Subscription(List.of(topics))));
    }

    public static byte[] assignment(String topic, int... partitions) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int p : partitions) {
            tps.add(new TopicPartition(topic, p));
        }
        return bytes(ConsumerProtocol.serializeAssignment(new Assignment(tps)));
    }

    private static byte[] bytes(ByteBuffer b) {
        byte[] out = new byte[b.remaining()];
        b.get(out);
        return out;
    }

    /** A JoinGroup for the "consumer" protocol type with the given protocol names, all subscribing to `topic`. */
    public static JoinGroupRequestData join(String group, String memberId, String topic, String... protocols) {
        JoinGroupRequestProtocolCollection ps = new JoinGroupRequestProtocolCollection();
        for (String p : protocols.length == 0 ? new String[] {"range"} : protocols) {
            ps.add(new JoinGroupRequestProtocol().setName(p).setMetadata(subscription(topic)));
        }
        return new JoinGroupRequestData()
                .setGroupId(group)
                .setMemberId(memberId)
                .setSessionTimeoutMs(30000)
                .setRebalanceTimeoutMs(30000)
                .setProtocolType("consumer")
                .setProtocols(ps);
    }

    /** JoinGroup with MEMBER_ID_REQUIRED handled: returns the response of the second join (the real one). */
    public static JoinGroupResponseData joinNew(RawClient c, JoinGroupRequestData req) {
        JoinGroupResponseData first = c.call(req, JOIN_V);
        if (first.errorCode() != Errors.MEMBER_ID_REQUIRED.code()) {
            return first;
        }
        return c.call(req.duplicate().setMemberId(first.memberId()), JOIN_V);
    }

    public static SyncGroupRequestData sync(String group, int generation, String memberId) {
        return new SyncGroupRequestData().setGroupId(group).setGenerationId(generation).setMemberId(memberId)
                .setProtocolType("consumer").setProtocolName("range");
    }

    public static SyncGroupRequestData syncLeader(String group, int generation, String memberId, String topic,
                                                  int... partitions) {
        SyncGroupRequestData s = sync(group, generation, memberId);
        s.assignments().add(new SyncGroupRequestAssignment().setMemberId(memberId)
                .setAssignment(assignment(topic, partitions)));
        return s;
    }

    /** One member that joined and synced: a stable group of one. */
    public record Member(String memberId, int generation) {}

    public static Member joinAndSync(RawClient c, String group, String topic) {
        JoinGroupResponseData j = joinNew(c, join(group, "", topic));
        if (j.errorCode() != 0) {
            throw new AssertionError("setup join of " + group + ": " + err(j.errorCode()));
        }
        SyncGroupResponseData s = c.call(syncLeader(group, j.generationId(), j.memberId(), topic, 0), SYNC_V);
        if (s.errorCode() != 0) {
            throw new AssertionError("setup sync of " + group + ": " + err(s.errorCode()));
        }
        return new Member(j.memberId(), j.generationId());
    }

    public static short heartbeat(RawClient c, String group, int generation, String memberId) {
        HeartbeatResponseData r = c.call(new HeartbeatRequestData().setGroupId(group).setGenerationId(generation)
                .setMemberId(memberId), HEARTBEAT_V);
        return r.errorCode();
    }

    public static LeaveGroupResponseData leave(RawClient c, String group, String memberId) {
        return c.call(new LeaveGroupRequestData().setGroupId(group)
                .setMembers(List.of(new MemberIdentity().setMemberId(memberId))), LEAVE_V);
    }

    public static OffsetCommitRequestData commit(String group, int generation, String memberId, String topic,
                                                 int partition, long offset) {
        return new OffsetCommitRequestData().setGroupId(group).setGenerationIdOrMemberEpoch(generation)
                .setMemberId(memberId)
                .setTopics(List.of(new OffsetCommitRequestTopic().setName(topic).setPartitions(List.of(
                        new OffsetCommitRequestPartition().setPartitionIndex(partition).setCommittedOffset(offset)))));
    }

    /** Top-level error if set, else the first partition's. */
    public static short commitError(OffsetCommitResponseData r) {
        for (var t : r.topics()) {
            for (var p : t.partitions()) {
                return p.errorCode();
            }
        }
        return -2;
    }

    public static ConsumerGroupHeartbeatRequestData cgJoin(String group, String memberId, String topic) {
        return new ConsumerGroupHeartbeatRequestData().setGroupId(group).setMemberId(memberId).setMemberEpoch(0)
                .setRebalanceTimeoutMs(30000).setSubscribedTopicNames(List.of(topic)).setTopicPartitions(List.of());
    }

    public static String newMemberId() {
        return Uuid.randomUuid().toString();
    }

    /** A KIP-848 member that joined: its id and epoch. */
    public record CgMember(String memberId, int epoch) {}

    public static CgMember cgJoinNew(RawClient c, String group, String topic) {
        String id = newMemberId();
        ConsumerGroupHeartbeatResponseData r = c.call(cgJoin(group, id, topic), CGH_V);
        if (r.errorCode() != 0) {
            throw new AssertionError("setup heartbeat of " + group + ": " + err(r.errorCode()) + " " + r.errorMessage());
        }
        return new CgMember(r.memberId(), r.memberEpoch());
    }

    public static ConsumerGroupHeartbeatRequestData cgBeat(String group, String memberId, int epoch) {
        return new ConsumerGroupHeartbeatRequestData().setGroupId(group).setMemberId(memberId).setMemberEpoch(epoch);
    }
}
