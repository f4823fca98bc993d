package clientsgo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// simpleMember is a group consumer that polls and processes in the background and reports what it was assigned.
type simpleMember struct {
	cl       *kgo.Client
	stop     chan struct{}
	done     chan struct{}
	assigned chan []int32
	records  chan *kgo.Record
}

func startSimpleMember(ctx context.Context, t *testing.T, b *broker, logw io.Writer, clientID, group, topic string, nextGen bool) *simpleMember {
	t.Helper()
	m := &simpleMember{
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		assigned: make(chan []int32, 16),
		records:  make(chan *kgo.Record, 1024),
	}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.assigned <- slices.Sorted(slices.Values(ps[topic]))
		}),
	}
	if nextGen {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	m.cl = newClient(t, b, logw, clientID, opts...)
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			default:
			}
			pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			fs := m.cl.PollFetches(pctx)
			cancel()
			if fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
			fs.EachRecord(func(r *kgo.Record) { m.records <- r })
		}
	}()
	return m
}

// waitAssigned waits for the member's first assignment and checks it is the whole topic.
func (m *simpleMember) waitAssigned(t *testing.T, want []int32) {
	t.Helper()
	select {
	case got := <-m.assigned:
		if !slices.Equal(got, want) {
			t.Fatalf("first assignment %v, want %v", got, want)
		}
	case <-time.After(rebalanceWait):
		t.Fatalf("no assignment within %v", rebalanceWait)
	}
}

func (m *simpleMember) close(t *testing.T) {
	t.Helper()
	close(m.stop)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("poll loop did not stop within 30 s")
	}
	closed := make(chan struct{})
	go func() { m.cl.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(45 * time.Second):
		t.Fatalf("Close (leave group) did not return within 45 s")
	}
}

// What a broker without an authorizer allows on a group and on a topic.
var (
	groupOps = []kadm.ACLOperation{kadm.OpRead, kadm.OpDelete, kadm.OpDescribe, kadm.OpDescribeConfigs, kadm.OpAlterConfigs}
	topicOps = []kadm.ACLOperation{kadm.OpRead, kadm.OpWrite, kadm.OpCreate, kadm.OpDelete, kadm.OpAlter,
		kadm.OpDescribe, kadm.OpDescribeConfigs, kadm.OpAlterConfigs}
)

func wantErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if !errors.Is(got, want) {
		t.Errorf("%s: got error %v, want %v", what, got, want)
	}
}

// TestAdminTopicsAndOffsets: CreateTopics / ListTopics / DeleteTopics, ListStartOffsets / ListEndOffsets, and
// DeleteRecords moving the start offset.
func TestAdminTopicsAndOffsets(t *testing.T) {
	b := startBroker(t)
	logw := clientLog(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := newAdmin(t, b, logw)

	brokers, err := adm.ListBrokers(ctx)
	if err != nil || len(brokers) != 1 {
		t.Fatalf("ListBrokers: %v %v, want exactly one broker", brokers, err)
	}
	node := brokers[0].NodeID

	t1, t2 := uniqueName("go-adm-a"), uniqueName("go-adm-b")
	created, err := adm.CreateTopics(ctx, 3, 1, nil, t1, t2)
	if err != nil {
		t.Fatalf("CreateTopics: %v", err)
	}
	ids := map[string]kadm.TopicID{}
	for _, topic := range []string{t1, t2} {
		r, ok := created[topic]
		switch {
		case !ok:
			t.Fatalf("CreateTopics response misses %s: %v", topic, created)
		case r.Err != nil:
			t.Fatalf("CreateTopics %s: %v (%s)", topic, r.Err, r.ErrMessage)
		case r.NumPartitions != 3 || r.ReplicationFactor != 1:
			t.Errorf("CreateTopics %s: %d partitions, replication factor %d; want 3 and 1", topic, r.NumPartitions, r.ReplicationFactor)
		case r.ID == (kadm.TopicID{}):
			t.Errorf("CreateTopics %s: zero topic id", topic)
		}
		ids[topic] = r.ID
	}
	again, err := adm.CreateTopics(ctx, 3, 1, nil, t1)
	if err != nil {
		t.Fatalf("CreateTopics (again): %v", err)
	}
	wantErr(t, "CreateTopics of an existing topic", again[t1].Err, kerr.TopicAlreadyExists)

	waitFor(t, 30*time.Second, "both topics with leaders", func() (bool, string) {
		td, err := adm.ListTopics(ctx, t1, t2)
		if err != nil {
			return false, err.Error()
		}
		for _, topic := range []string{t1, t2} {
			d := td[topic]
			if d.Err != nil || len(d.Partitions) != 3 {
				return false, fmt.Sprintf("%s: %v, %d partitions", topic, d.Err, len(d.Partitions))
			}
			for _, p := range d.Partitions {
				if p.Leader != node {
					return false, fmt.Sprintf("%s/%d leader %d", topic, p.Partition, p.Leader)
				}
			}
		}
		return true, ""
	})
	td, err := adm.ListTopics(ctx, t1, t2)
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	for _, topic := range []string{t1, t2} {
		d := td[topic]
		if d.ID != ids[topic] {
			t.Errorf("ListTopics %s: id %v, CreateTopics said %v", topic, d.ID, ids[topic])
		}
		if d.IsInternal {
			t.Errorf("ListTopics %s: internal", topic)
		}
		for p := int32(0); p < 3; p++ {
			pd, ok := d.Partitions[p]
			if !ok || pd.Err != nil || !slices.Equal(pd.Replicas, []int32{node}) || !slices.Equal(pd.ISR, []int32{node}) {
				t.Errorf("ListTopics %s/%d: %+v (found %v), want replicas and ISR [%d]", topic, p, pd, ok, node)
			}
		}
	}
	t.Run("AuthorizedOperations", func(t *testing.T) {
		td, err := adm.ListTopics(kadm.WithAuthorizedOps(ctx), t1)
		if err != nil {
			t.Fatalf("ListTopics (with authorized operations): %v", err)
		}
		if got := td[t1].AuthorizedOperations; !slices.Equal(got, topicOps) {
			t.Errorf("Metadata v13 topic authorized operations of %s: %v, want %v", t1, got, topicOps)
		}
	})
	all, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatalf("ListTopics (all): %v", err)
	}
	if !all.Has(t1) || !all.Has(t2) {
		t.Errorf("ListTopics (all) = %v, want it to contain %s and %s", all.Names(), t1, t2)
	}
	if all.Has("__consumer_offsets") {
		t.Errorf("ListTopics (all, internal filtered) lists __consumer_offsets")
	}

	produceSplit(ctx, t, b, logw, t1)
	checkOffsets := func(what string, got kadm.ListedOffsets, err error, want map[int32]int64) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for p, w := range want {
			o, ok := got.Lookup(t1, p)
			if !ok || o.Err != nil || o.Offset != w {
				t.Errorf("%s %s/%d: %+v (found %v), want offset %d", what, t1, p, o, ok, w)
			}
		}
		if n := len(got[t1]); n != len(want) {
			t.Errorf("%s: %d partitions listed, want %d", what, n, len(want))
		}
	}
	starts, err := adm.ListStartOffsets(ctx, t1)
	checkOffsets("ListStartOffsets", starts, err, map[int32]int64{0: 0, 1: 0, 2: 0})
	ends, err := adm.ListEndOffsets(ctx, t1)
	checkOffsets("ListEndOffsets", ends, err, map[int32]int64{0: 10, 1: 5, 2: 0})

	var del kadm.Offsets
	del.AddOffset(t1, 0, 4, -1)
	dr, err := adm.DeleteRecords(ctx, del)
	if err != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}
	if r, ok := dr.Lookup(t1, 0); !ok || r.Err != nil || r.LowWatermark != 4 {
		t.Errorf("DeleteRecords %s/0 before 4: %+v (found %v), want low watermark 4", t1, r, ok)
	}
	starts, err = adm.ListStartOffsets(ctx, t1)
	checkOffsets("ListStartOffsets after DeleteRecords", starts, err, map[int32]int64{0: 4, 1: 0, 2: 0})
	ends, err = adm.ListEndOffsets(ctx, t1)
	checkOffsets("ListEndOffsets after DeleteRecords", ends, err, map[int32]int64{0: 10, 1: 5, 2: 0})

	// DeleteTopics: t2 goes away, t1 stays.
	dt, err := adm.DeleteTopics(ctx, t2)
	if err != nil {
		t.Fatalf("DeleteTopics: %v", err)
	}
	if r, ok := dt[t2]; !ok || r.Err != nil {
		t.Errorf("DeleteTopics %s: %+v (found %v)", t2, r, ok)
	}
	waitFor(t, 30*time.Second, "deleted topic gone from metadata", func() (bool, string) {
		td, err := adm.ListTopics(ctx, t2)
		if err != nil {
			return false, err.Error()
		}
		return errors.Is(td[t2].Err, kerr.UnknownTopicOrPartition), fmt.Sprintf("%+v", td[t2])
	})
	all, err = adm.ListTopics(ctx)
	if err != nil {
		t.Fatalf("ListTopics (all): %v", err)
	}
	if all.Has(t2) || !all.Has(t1) {
		t.Errorf("ListTopics after deleting %s = %v, want %s without %s", t2, all.Names(), t1, t2)
	}
	dt, err = adm.DeleteTopics(ctx, t2)
	if err != nil {
		t.Fatalf("DeleteTopics (again): %v", err)
	}
	wantErr(t, "DeleteTopics of a deleted topic", dt[t2].Err, kerr.UnknownTopicOrPartition)
}

// TestAdminGroups: ListGroups (type and state filters), DescribeGroups for a classic group,
// DescribeConsumerGroups for a KIP-848 group, FetchOffsets, CommitOffsets, DeleteOffsets, DeleteGroups, with
// the errors Kafka gives for each on a group that still has members.
func TestAdminGroups(t *testing.T) {
	b := startBroker(t)
	logw := clientLog(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	adm := newAdmin(t, b, logw)

	topic := uniqueName("go-adm-groups")
	createTopic(ctx, t, adm, topic, 3)
	produceSplit(ctx, t, b, logw, topic)

	classic, next := uniqueName("go-adm-classic"), uniqueName("go-adm-consumer")
	gc := startSimpleMember(ctx, t, b, logw, "go-classic-member", classic, topic, false)
	gc.waitAssigned(t, []int32{0, 1, 2})
	for i := 0; i < 15; i++ {
		select {
		case <-gc.records:
		case <-time.After(30 * time.Second):
			t.Fatalf("classic member consumed only %d of 15 records", i)
		}
	}
	if err := gc.cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("classic member CommitUncommittedOffsets: %v", err)
	}
	gn := startSimpleMember(ctx, t, b, logw, "go-consumer-member", next, topic, true)
	gn.waitAssigned(t, []int32{0, 1, 2})

	// DescribeGroups: the classic group, Stable, one member with the whole topic.
	waitFor(t, rebalanceWait, "classic group Stable", func() (bool, string) {
		ds, err := adm.DescribeGroups(ctx, classic)
		if err != nil {
			return false, err.Error()
		}
		d := ds[classic]
		return d.Err == nil && d.State == "Stable", fmt.Sprintf("%+v", d)
	})
	ds, err := adm.DescribeGroups(ctx, classic)
	if err != nil {
		t.Fatalf("DescribeGroups: %v", err)
	}
	d := ds[classic]
	if d.ProtocolType != "consumer" || d.Protocol != "cooperative-sticky" || len(d.Members) != 1 {
		t.Errorf("DescribeGroups %s: protocol type %q protocol %q %d members; want consumer, cooperative-sticky, 1",
			classic, d.ProtocolType, d.Protocol, len(d.Members))
	} else {
		m := d.Members[0]
		if m.ClientID != "go-classic-member" || m.MemberID == "" || m.ClientHost == "" {
			t.Errorf("DescribeGroups member: client id %q member id %q host %q", m.ClientID, m.MemberID, m.ClientHost)
		}
		if got := d.AssignedPartitions(); !slices.Equal(sortedParts(got[topic]), []int32{0, 1, 2}) || len(got) != 1 {
			t.Errorf("DescribeGroups assigned %v, want %s [0 1 2]", got, topic)
		}
		if got := d.JoinTopics(); !slices.Equal(got, []string{topic}) {
			t.Errorf("DescribeGroups join topics %v, want [%s]", got, topic)
		}
	}

	// DescribeConsumerGroups: the KIP-848 group.
	waitFor(t, rebalanceWait, "consumer group Stable and reconciled", func() (bool, string) {
		cs, err := adm.DescribeConsumerGroups(ctx, next)
		if err != nil {
			return false, err.Error()
		}
		c := cs[next]
		return c.Err == nil && c.State == "Stable" && len(c.Members) == 1 && c.Members[0].MemberEpoch == c.Epoch &&
			len(c.Members[0].Assignment[topic]) == 3, fmt.Sprintf("%+v", c)
	})
	cs, err := adm.DescribeConsumerGroups(ctx, next)
	if err != nil {
		t.Fatalf("DescribeConsumerGroups: %v", err)
	}
	c := cs[next]
	if c.AssignorName != "uniform" || c.Epoch <= 0 || c.AssignmentEpoch != c.Epoch {
		t.Errorf("DescribeConsumerGroups %s: assignor %q epoch %d assignment epoch %d; want uniform, >0, equal",
			next, c.AssignorName, c.Epoch, c.AssignmentEpoch)
	}
	m := c.Members[0]
	if m.ClientID != "go-consumer-member" || m.MemberID == "" || m.ClientHost == "" || m.MemberType != 1 ||
		!slices.Equal(m.SubscribedTopics, []string{topic}) ||
		!slices.Equal(sortedParts(m.TargetAssignment[topic]), []int32{0, 1, 2}) {
		t.Errorf("DescribeConsumerGroups member: %+v; want client go-consumer-member, member type 1, subscribed [%s], target [0 1 2]", m, topic)
	}
	// kadm asks for the authorized operations (IncludeAuthorizedOperations); with no authorizer every group
	// operation is allowed: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (bitfield 3400).
	t.Run("AuthorizedOperations", func(t *testing.T) {
		if !slices.Equal(d.AuthorizedOperations, groupOps) {
			t.Errorf("DescribeGroups %s authorized operations %v, want %v", classic, d.AuthorizedOperations, groupOps)
		}
		if !slices.Equal(c.AuthorizedOperations, groupOps) {
			t.Errorf("DescribeConsumerGroups %s authorized operations %v, want %v", next, c.AuthorizedOperations, groupOps)
		}
	})

	// Each describe API answers for its own kind of group only.
	if cs, err := adm.DescribeConsumerGroups(ctx, classic); err != nil {
		t.Errorf("DescribeConsumerGroups(classic group): %v", err)
	} else {
		wantErr(t, "DescribeConsumerGroups of a classic group", cs[classic].Err, kerr.GroupIDNotFound)
	}
	if ds, err := adm.DescribeGroups(ctx, next); err != nil {
		t.Errorf("DescribeGroups(consumer group): %v", err)
	} else {
		wantErr(t, "DescribeGroups of a consumer group", ds[next].Err, kerr.GroupIDNotFound)
	}

	// ListGroups: everything, by state, by type.
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	if g := listed[classic]; g.GroupType != "classic" || g.State != "Stable" || g.ProtocolType != "consumer" {
		t.Errorf("ListGroups %s: %+v, want type classic state Stable protocol type consumer", classic, g)
	}
	if g := listed[next]; g.GroupType != "consumer" || g.State != "Stable" || g.ProtocolType != "consumer" {
		t.Errorf("ListGroups %s: %+v, want type consumer state Stable protocol type consumer", next, g)
	}
	checkListed := func(what string, l kadm.ListedGroups, err error, in, out []string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, g := range in {
			if _, ok := l[g]; !ok {
				t.Errorf("%s does not list %s: %v", what, g, l.Groups())
			}
		}
		for _, g := range out {
			if _, ok := l[g]; ok {
				t.Errorf("%s lists %s: %+v", what, g, l[g])
			}
		}
	}
	l, err := adm.ListGroups(ctx, "Stable")
	checkListed("ListGroups(state Stable)", l, err, []string{classic, next}, nil)
	l, err = adm.ListGroups(ctx, "Empty")
	checkListed("ListGroups(state Empty)", l, err, nil, []string{classic, next})
	l, err = adm.ListGroupsByType(ctx, []string{"classic"})
	checkListed("ListGroups(type classic)", l, err, []string{classic}, []string{next})
	l, err = adm.ListGroupsByType(ctx, []string{"consumer"})
	checkListed("ListGroups(type consumer)", l, err, []string{next}, []string{classic})
	l, err = adm.ListGroupsByType(ctx, []string{"consumer"}, "Empty")
	checkListed("ListGroups(type consumer, state Empty)", l, err, nil, []string{classic, next})

	// FetchOffsets: what the classic member committed.
	fo, err := adm.FetchOffsets(ctx, classic)
	if err != nil {
		t.Fatalf("FetchOffsets: %v", err)
	}
	for p, want := range map[int32]int64{0: 10, 1: 5} {
		if o, ok := fo.Lookup(topic, p); !ok || o.Err != nil || o.At != want {
			t.Errorf("FetchOffsets %s %s/%d: %+v (found %v), want %d", classic, topic, p, o, ok, want)
		}
	}

	// With members in the groups, admin commits, offset deletes and group deletes are refused.
	var commit kadm.Offsets
	commit.Add(kadm.Offset{Topic: topic, Partition: 0, At: 2, LeaderEpoch: -1, Metadata: "admin-0"})
	commit.Add(kadm.Offset{Topic: topic, Partition: 1, At: 3, LeaderEpoch: -1, Metadata: "admin-1"})
	commit.Add(kadm.Offset{Topic: topic, Partition: 2, At: 0, LeaderEpoch: -1})
	if cr, err := adm.CommitOffsets(ctx, classic, commit); err != nil {
		t.Errorf("CommitOffsets (active classic group): %v", err)
	} else {
		o, _ := cr.Lookup(topic, 0)
		wantErr(t, "CommitOffsets to a classic group with a member", o.Err, kerr.UnknownMemberID)
	}
	if cr, err := adm.CommitOffsets(ctx, next, commit); err != nil {
		t.Errorf("CommitOffsets (active consumer group): %v", err)
	} else {
		o, _ := cr.Lookup(topic, 0)
		wantErr(t, "CommitOffsets to a consumer group with a member", o.Err, kerr.UnknownMemberID)
	}
	if dr, err := adm.DeleteOffsets(ctx, classic, kadm.TopicsSet{topic: {0: {}}}); err != nil {
		wantErr(t, "DeleteOffsets on a classic group subscribed to the topic", err, kerr.GroupSubscribedToTopic)
	} else {
		e, _ := dr.Lookup(topic, 0)
		wantErr(t, "DeleteOffsets on a classic group subscribed to the topic", e, kerr.GroupSubscribedToTopic)
	}
	dg, err := adm.DeleteGroups(ctx, classic, next)
	if err != nil {
		t.Fatalf("DeleteGroups (active): %v", err)
	}
	wantErr(t, "DeleteGroups of a classic group with a member", dg[classic].Err, kerr.NonEmptyGroup)
	wantErr(t, "DeleteGroups of a consumer group with a member", dg[next].Err, kerr.NonEmptyGroup)

	// The members leave; both groups are Empty.
	gc.close(t)
	gn.close(t)
	waitFor(t, 30*time.Second, "both groups Empty", func() (bool, string) {
		l, err := adm.ListGroups(ctx, "Empty")
		if err != nil {
			return false, err.Error()
		}
		_, ok1 := l[classic]
		_, ok2 := l[next]
		return ok1 && ok2, fmt.Sprintf("%+v", l)
	})
	if ds, err := adm.DescribeGroups(ctx, classic); err != nil || ds[classic].State != "Empty" || len(ds[classic].Members) != 0 {
		t.Errorf("DescribeGroups %s after leave: %+v %v, want Empty without members", classic, ds[classic], err)
	}
	if cs, err := adm.DescribeConsumerGroups(ctx, next); err != nil || cs[next].State != "Empty" || len(cs[next].Members) != 0 {
		t.Errorf("DescribeConsumerGroups %s after leave: %+v %v, want Empty without members", next, cs[next], err)
	}

	// CommitOffsets (alter) on the empty groups, read back with metadata.
	for _, g := range []string{classic, next} {
		cr, err := adm.CommitOffsets(ctx, g, commit)
		if err != nil {
			t.Fatalf("CommitOffsets %s: %v", g, err)
		}
		if err := cr.Error(); err != nil {
			t.Errorf("CommitOffsets %s (empty group): %v", g, err)
		}
		fo, err := adm.FetchOffsets(ctx, g)
		if err != nil {
			t.Fatalf("FetchOffsets %s: %v", g, err)
		}
		for p, want := range map[int32]struct {
			at   int64
			meta string
		}{0: {2, "admin-0"}, 1: {3, "admin-1"}, 2: {0, ""}} {
			if o, ok := fo.Lookup(topic, p); !ok || o.Err != nil || o.At != want.at || o.Metadata != want.meta {
				t.Errorf("FetchOffsets %s %s/%d after CommitOffsets: %+v (found %v), want %d %q", g, topic, p, o, ok, want.at, want.meta)
			}
		}
	}

	// DeleteOffsets on an empty group removes just that partition's offset.
	dr, err := adm.DeleteOffsets(ctx, classic, kadm.TopicsSet{topic: {1: {}}})
	if err != nil {
		t.Fatalf("DeleteOffsets: %v", err)
	}
	if e, ok := dr.Lookup(topic, 1); !ok || e != nil {
		t.Errorf("DeleteOffsets %s/1: %v (found %v), want success", topic, e, ok)
	}
	fo, err = adm.FetchOffsets(ctx, classic)
	if err != nil {
		t.Fatalf("FetchOffsets after DeleteOffsets: %v", err)
	}
	if o, ok := fo.Lookup(topic, 1); ok && o.At >= 0 {
		t.Errorf("FetchOffsets %s/1 after DeleteOffsets: %+v, want no committed offset", topic, o)
	}
	for p, want := range map[int32]int64{0: 2, 2: 0} {
		if o, ok := fo.Lookup(topic, p); !ok || o.Err != nil || o.At != want {
			t.Errorf("FetchOffsets %s/%d after deleting partition 1: %+v (found %v), want %d", topic, p, o, ok, want)
		}
	}
	// Partitions that do not exist are answered UNKNOWN_TOPIC_OR_PARTITION (Kafka checks its metadata before
	// the coordinator sees the request), whether the topic is unknown or only the partition is.
	noTopic := uniqueName("go-adm-nosuch-topic")
	dr, err = adm.DeleteOffsets(ctx, classic, kadm.TopicsSet{topic: {0: {}, 9: {}}, noTopic: {0: {}}})
	if err != nil {
		t.Fatalf("DeleteOffsets (unknown partitions): %v", err)
	}
	if e, ok := dr.Lookup(topic, 0); !ok || e != nil {
		t.Errorf("DeleteOffsets %s/0: %v (found %v), want success", topic, e, ok)
	}
	e, _ := dr.Lookup(topic, 9)
	wantErr(t, "DeleteOffsets of partition 9 of a 3-partition topic", e, kerr.UnknownTopicOrPartition)
	e, _ = dr.Lookup(noTopic, 0)
	wantErr(t, "DeleteOffsets of a partition of an unknown topic", e, kerr.UnknownTopicOrPartition)
	fo, err = adm.FetchOffsets(ctx, classic)
	if err != nil {
		t.Fatalf("FetchOffsets after the second DeleteOffsets: %v", err)
	}
	if got := fo.Partitions(); len(got) != 1 || !slices.Equal(sortedParts(got[topic]), []int32{2}) {
		t.Errorf("FetchOffsets after deleting partitions 0 and 1: %v, want only %s/2", got, topic)
	}

	// DeleteGroups: both go, an unknown group is GROUP_ID_NOT_FOUND.
	unknown := uniqueName("go-adm-nosuch")
	dg, err = adm.DeleteGroups(ctx, classic, next, unknown)
	if err != nil {
		t.Fatalf("DeleteGroups: %v", err)
	}
	for _, g := range []string{classic, next} {
		if r, ok := dg[g]; !ok || r.Err != nil {
			t.Errorf("DeleteGroups %s: %+v (found %v), want success", g, r, ok)
		}
	}
	wantErr(t, "DeleteGroups of an unknown group", dg[unknown].Err, kerr.GroupIDNotFound)
	l, err = adm.ListGroups(ctx)
	checkListed("ListGroups after DeleteGroups", l, err, nil, []string{classic, next})
	for _, g := range []string{classic, next} {
		fo, err := adm.FetchOffsets(ctx, g)
		if err != nil {
			t.Errorf("FetchOffsets %s after DeleteGroups: %v", g, err)
		} else if n := len(fo[topic]); n != 0 {
			t.Errorf("FetchOffsets %s after DeleteGroups: %d partitions still committed: %+v", g, n, fo)
		}
	}
	if ds, err := adm.DescribeGroups(ctx, classic); err != nil {
		t.Errorf("DescribeGroups after DeleteGroups: %v", err)
	} else {
		wantErr(t, "DescribeGroups (v6) of a deleted group", ds[classic].Err, kerr.GroupIDNotFound)
	}
	if cs, err := adm.DescribeConsumerGroups(ctx, next); err != nil {
		t.Errorf("DescribeConsumerGroups after DeleteGroups: %v", err)
	} else {
		wantErr(t, "DescribeConsumerGroups of a deleted group", cs[next].Err, kerr.GroupIDNotFound)
	}
}

// produceSplit writes 10 records to partition 0 and 5 to partition 1 of topic (none to partition 2).
func produceSplit(ctx context.Context, t *testing.T, b *broker, logw io.Writer, topic string) {
	t.Helper()
	prod := newClient(t, b, logw, "go-producer", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := 0; i < 15; i++ {
		p := int32(0)
		if i >= 10 {
			p = 1
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}
