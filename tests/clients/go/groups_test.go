package clientsgo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	groupPartitions = 6
	recordsPerPhase = 120 // 20 per partition per phase
	rebalanceWait   = 60 * time.Second
)

// tracker is the application's view of a group: which member owns which partition (from the OnPartitions*
// callbacks) and which member processed which record. It checks ownership on every change and every record.
type tracker struct {
	mu         sync.Mutex
	owned      map[string]map[int32]bool  // member -> partitions it owns now
	expected   map[int32]map[int64]string // partition -> offset -> value, from the produce results
	consumedBy map[string][]string        // record value -> members that processed it, in order
	consumedAt map[string][]string        // record value -> "partition/offset" where it was processed
	perPhase   map[string]map[int]int
	violations []string
	lost       []string
}

func newTracker() *tracker {
	return &tracker{
		owned:      map[string]map[int32]bool{},
		expected:   map[int32]map[int64]string{},
		consumedBy: map[string][]string{},
		consumedAt: map[string][]string{},
		perPhase:   map[string]map[int]int{},
	}
}

func (tr *tracker) violate(format string, args ...any) {
	tr.violations = append(tr.violations, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
}

func (tr *tracker) assigned(member string, ps []int32) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.owned[member] == nil {
		tr.owned[member] = map[int32]bool{}
	}
	for _, p := range ps {
		for other, set := range tr.owned {
			if other != member && set[p] {
				tr.violate("partition %d assigned to %s while %s still owns it", p, member, other)
			}
		}
		if tr.owned[member][p] {
			tr.violate("partition %d assigned to %s, which already owns it", p, member)
		}
		tr.owned[member][p] = true
	}
}

func (tr *tracker) revoked(member string, ps []int32) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, p := range ps {
		if !tr.owned[member][p] {
			tr.violate("partition %d revoked from %s, which does not own it", p, member)
		}
		delete(tr.owned[member], p)
	}
}

func (tr *tracker) lostPartitions(member string, ps []int32) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(ps) > 0 {
		tr.lost = append(tr.lost, fmt.Sprintf("%s lost partitions %v", member, ps))
	}
	for _, p := range ps {
		delete(tr.owned[member], p)
	}
}

func (tr *tracker) produced(r *kgo.Record) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.expected[r.Partition] == nil {
		tr.expected[r.Partition] = map[int64]string{}
	}
	tr.expected[r.Partition][r.Offset] = string(r.Value)
}

// phaseOf reads the phase from a record value ("phase2-rec0042").
func phaseOf(v string) int {
	var phase, i int
	if _, err := fmt.Sscanf(v, "phase%d-rec%d", &phase, &i); err != nil {
		return 0
	}
	return phase
}

func (tr *tracker) consume(member string, r *kgo.Record) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	v := string(r.Value)
	if !tr.owned[member][r.Partition] {
		tr.violate("%s processed %s (partition %d offset %d) without owning the partition (owns %v)",
			member, v, r.Partition, r.Offset, keys(tr.owned[member]))
	}
	tr.consumedBy[v] = append(tr.consumedBy[v], member)
	tr.consumedAt[v] = append(tr.consumedAt[v], fmt.Sprintf("%d/%d", r.Partition, r.Offset))
	if tr.perPhase[member] == nil {
		tr.perPhase[member] = map[int]int{}
	}
	tr.perPhase[member][phaseOf(v)]++
}

func (tr *tracker) ownedBy(member string) []int32 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return keys(tr.owned[member])
}

// distinct is how many different produced records were processed at least once.
func (tr *tracker) distinct() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.consumedBy)
}

func (tr *tracker) phaseCount(member string, phase int) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.perPhase[member][phase]
}

func (tr *tracker) summary() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var parts []string
	for m, set := range tr.owned {
		parts = append(parts, fmt.Sprintf("%s owns %v", m, keys(set)))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%s; %d distinct records processed; per member/phase %v", strings.Join(parts, ", "), len(tr.consumedBy), tr.perPhase)
}

// check reports every ownership violation, lost partition and record not processed exactly once.
func (tr *tracker) check(t *testing.T, total int) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, v := range tr.violations {
		t.Errorf("ownership violation: %s", v)
	}
	for _, l := range tr.lost {
		t.Errorf("unexpected partition loss (a fatal group error on a healthy group): %s", l)
	}
	produced := 0
	for p, offs := range tr.expected {
		for off, v := range offs {
			produced++
			switch by := tr.consumedBy[v]; len(by) {
			case 1:
				if at, want := tr.consumedAt[v][0], fmt.Sprintf("%d/%d", p, off); at != want {
					t.Errorf("record %s was produced at %s but processed at %s", v, want, at)
				}
			case 0:
				t.Errorf("record %s (partition %d offset %d) was never processed", v, p, off)
			default:
				t.Errorf("record %s (partition %d offset %d) was processed %d times, by %v", v, p, off, len(by), by)
			}
		}
	}
	if len(tr.consumedBy) != total {
		t.Errorf("processed %d distinct records, want %d", len(tr.consumedBy), total)
	}
	if produced != total {
		t.Errorf("produced %d records, want %d", produced, total)
	}
}

func keys(m map[int32]bool) []int32 {
	out := make([]int32, 0, len(m))
	for p, ok := range m {
		if ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func producePhase(ctx context.Context, t *testing.T, cl *kgo.Client, tr *tracker, topic string, phase, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{
			Topic:     topic,
			Partition: int32(i % groupPartitions),
			Value:     []byte(fmt.Sprintf("phase%d-rec%04d", phase, i)),
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, res := range cl.ProduceSync(pctx, recs...) {
		if res.Err != nil {
			t.Fatalf("produce phase %d: %v", phase, res.Err)
		}
		tr.produced(res.Record)
	}
}

// member is one group consumer as an application would write it: BlockRebalanceOnPoll, process a polled batch,
// CommitRecords it, AllowRebalance; CommitUncommittedOffsets in OnPartitionsRevoked.
type member struct {
	name string
	cl   *kgo.Client
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	errs []string
}

func (m *member) fail(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errs = append(m.errs, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
}

func (m *member) check(t *testing.T) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.errs {
		t.Errorf("%s: %s", m.name, e)
	}
	m.errs = nil
}

func startMember(ctx context.Context, t *testing.T, b *broker, logw io.Writer, name, group, topic string, tr *tracker, nextGen bool) *member {
	t.Helper()
	m := &member{name: name, stop: make(chan struct{}), done: make(chan struct{})}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.HeartbeatInterval(500 * time.Millisecond), // classic only; a KIP-848 broker sets the interval
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			tr.assigned(name, ps[topic])
		}),
		kgo.OnPartitionsRevoked(func(cctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			cctx, cancel := context.WithTimeout(cctx, 20*time.Second)
			defer cancel()
			if err := cl.CommitUncommittedOffsets(cctx); err != nil {
				m.fail("CommitUncommittedOffsets in OnPartitionsRevoked(%v): %v", ps, err)
			}
			tr.revoked(name, ps[topic])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			tr.lostPartitions(name, ps[topic])
		}),
	}
	if nextGen {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	m.cl = newClient(t, b, logw, name, opts...)
	go m.loop(ctx, tr)
	return m
}

func (m *member) loop(ctx context.Context, tr *tracker) {
	defer close(m.done)
	for {
		select {
		case <-m.stop:
			return
		case <-ctx.Done():
			m.fail("test context ended while polling: %v", ctx.Err())
			return
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := m.cl.PollRecords(pctx, 50)
		cancel()
		if fs.IsClientClosed() {
			m.cl.AllowRebalance()
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !isCtxErr(err) {
				m.fail("fetch error on %s/%d: %v", topic, p, err)
			}
		})
		recs := fs.Records()
		for _, r := range recs {
			tr.consume(m.name, r)
		}
		if len(recs) > 0 {
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			if err := m.cl.CommitRecords(cctx, recs...); err != nil {
				m.fail("CommitRecords(%d records): %v", len(recs), err)
			}
			cancel()
		}
		m.cl.AllowRebalance()
	}
}

// leave stops polling, commits what was processed and closes the client (which leaves the group).
func (m *member) leave(t *testing.T) {
	t.Helper()
	close(m.stop)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: poll loop did not stop within 30 s", m.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Errorf("%s: final CommitUncommittedOffsets: %v", m.name, err)
	}
	closed := make(chan struct{})
	go func() { m.cl.CloseAllowingRebalance(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(45 * time.Second):
		t.Fatalf("%s: Close (leave group) did not return within 45 s", m.name)
	}
}

// groupView is the broker's view of a group's members (by client id) and their assignments on the test topic.
type groupView struct {
	state   string
	extra   string // protocol (classic) or assignor (consumer)
	members map[string][]int32
	detail  string
}

func describeView(ctx context.Context, adm *kadm.Client, group, topic string, nextGen bool) (groupView, error) {
	v := groupView{members: map[string][]int32{}}
	if nextGen {
		ds, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return v, err
		}
		d, ok := ds[group]
		if !ok {
			return v, fmt.Errorf("group %s missing from ConsumerGroupDescribe", group)
		}
		if d.Err != nil {
			return v, d.Err
		}
		v.state, v.extra = d.State, d.AssignorName
		v.detail = fmt.Sprintf("state %s epoch %d assignment epoch %d assignor %s", d.State, d.Epoch, d.AssignmentEpoch, d.AssignorName)
		for _, mb := range d.Members {
			ps := sortedParts(mb.Assignment[topic])
			v.members[mb.ClientID] = ps
			v.detail += fmt.Sprintf("; %s epoch %d type %d assigned %v target %v subscribed %v",
				mb.ClientID, mb.MemberEpoch, mb.MemberType, ps, sortedParts(mb.TargetAssignment[topic]), mb.SubscribedTopics)
			if mb.MemberEpoch != d.Epoch || d.AssignmentEpoch != d.Epoch {
				v.detail += " (not reconciled)"
			}
			if !slices.Equal(ps, sortedParts(mb.TargetAssignment[topic])) {
				v.detail += " (assignment != target)"
			}
		}
		return v, nil
	}
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return v, err
	}
	d, ok := ds[group]
	if !ok {
		return v, fmt.Errorf("group %s missing from DescribeGroups", group)
	}
	if d.Err != nil {
		return v, d.Err
	}
	v.state, v.extra = d.State, d.Protocol
	v.detail = fmt.Sprintf("state %s protocol type %q protocol %q", d.State, d.ProtocolType, d.Protocol)
	if d.ProtocolType != "consumer" {
		v.detail += " (protocol type not consumer)"
	}
	for _, mb := range d.Members {
		var ps []int32
		if c, ok := mb.Assigned.AsConsumer(); ok {
			for _, at := range c.Topics {
				if at.Topic == topic {
					ps = append(ps, at.Partitions...)
				}
			}
		}
		slices.Sort(ps)
		v.members[mb.ClientID] = ps
		v.detail += fmt.Sprintf("; %s (%s) assigned %v", mb.ClientID, mb.MemberID, ps)
	}
	return v, nil
}

func sortedParts(m map[int32]struct{}) []int32 {
	out := make([]int32, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// waitGroupView waits until the broker reports the group Stable with exactly the given members owning exactly
// what the application's callbacks say they own, pairwise disjoint and together covering want partitions.
func waitGroupView(ctx context.Context, t *testing.T, adm *kadm.Client, tr *tracker, group, topic string, nextGen bool, members []string, want int) {
	t.Helper()
	wantExtra := "cooperative-sticky"
	if nextGen {
		wantExtra = "uniform"
	}
	waitFor(t, rebalanceWait, fmt.Sprintf("group %s Stable with members %v sharing %d partitions", group, members, want), func() (bool, string) {
		v, err := describeView(ctx, adm, group, topic, nextGen)
		if err != nil {
			return false, err.Error()
		}
		if v.state != "Stable" || v.extra != wantExtra || len(v.members) != len(members) ||
			strings.Contains(v.detail, "(not") || strings.Contains(v.detail, "!=") {
			return false, v.detail
		}
		seen := map[int32]string{}
		for _, name := range members {
			ps, ok := v.members[name]
			if !ok || len(ps) == 0 {
				return false, v.detail
			}
			if app := tr.ownedBy(name); !slices.Equal(app, ps) {
				return false, fmt.Sprintf("%s: broker says %v, callbacks say %v; %s", name, ps, app, v.detail)
			}
			for _, p := range ps {
				if other, dup := seen[p]; dup {
					return false, fmt.Sprintf("partition %d assigned to both %s and %s; %s", p, other, name, v.detail)
				}
				seen[p] = name
			}
		}
		return len(seen) == want, v.detail
	})
}

func runGroupScenario(t *testing.T, nextGen bool) {
	b := startBroker(t)
	logw := clientLog(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	adm := newAdmin(t, b, logw)

	topic := uniqueName("go-coop")
	group := uniqueName("go-group")
	createTopic(ctx, t, adm, topic, groupPartitions)
	prod := newClient(t, b, logw, "go-producer", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	tr := newTracker()

	// Phase 1: records exist before anyone joins. member-a joins alone and gets every partition; once it has
	// processed some records member-b joins, so member-a must give up half of its partitions (cooperatively:
	// revoke first, then member-b gets them in the next generation / reconciliation step).
	producePhase(ctx, t, prod, tr, topic, 1, recordsPerPhase)
	a := startMember(ctx, t, b, logw, "member-a", group, topic, tr, nextGen)
	waitGroupView(ctx, t, adm, tr, group, topic, nextGen, []string{"member-a"}, groupPartitions)
	waitFor(t, rebalanceWait, "member-a processing phase 1", func() (bool, string) {
		return tr.phaseCount("member-a", 1) > 0, tr.summary()
	})
	bm := startMember(ctx, t, b, logw, "member-b", group, topic, tr, nextGen)
	waitGroupView(ctx, t, adm, tr, group, topic, nextGen, []string{"member-a", "member-b"}, groupPartitions)
	waitFor(t, rebalanceWait, "phase 1 processed", func() (bool, string) {
		return tr.distinct() == recordsPerPhase, tr.summary()
	})
	if nextGen {
		assertListedAs(ctx, t, adm, group, "consumer", "Stable")
	} else {
		assertListedAs(ctx, t, adm, group, "classic", "Stable")
	}

	// Phase 2: both members consume their own share.
	producePhase(ctx, t, prod, tr, topic, 2, recordsPerPhase)
	waitFor(t, rebalanceWait, "phase 2 processed", func() (bool, string) {
		return tr.distinct() == 2*recordsPerPhase, tr.summary()
	})
	for _, name := range []string{"member-a", "member-b"} {
		if n := tr.phaseCount(name, 2); n == 0 {
			t.Errorf("%s processed no phase-2 record while owning %v: %s", name, tr.ownedBy(name), tr.summary())
		}
	}

	// member-b leaves; member-a takes everything over.
	bm.leave(t)
	if got := tr.ownedBy("member-b"); len(got) != 0 {
		t.Errorf("member-b still owns %v after leaving", got)
	}
	waitGroupView(ctx, t, adm, tr, group, topic, nextGen, []string{"member-a"}, groupPartitions)

	// Phase 3: only member-a is left to consume.
	producePhase(ctx, t, prod, tr, topic, 3, recordsPerPhase)
	waitFor(t, rebalanceWait, "phase 3 processed", func() (bool, string) {
		return tr.distinct() == 3*recordsPerPhase, tr.summary()
	})
	if n := tr.phaseCount("member-a", 3); n != recordsPerPhase {
		t.Errorf("member-a processed %d phase-3 records, want all %d: %s", n, recordsPerPhase, tr.summary())
	}
	a.leave(t)
	a.check(t)
	bm.check(t)
	tr.check(t, 3*recordsPerPhase)

	// Committed offsets equal the end offsets, partition by partition.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("ListEndOffsets: %v", err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("FetchOffsets: %v", err)
	}
	for p := int32(0); p < groupPartitions; p++ {
		end, ok := ends.Lookup(topic, p)
		if !ok || end.Err != nil || end.Offset != 3*recordsPerPhase/groupPartitions {
			t.Errorf("end offset of %s/%d: %+v (found %v), want %d", topic, p, end, ok, 3*recordsPerPhase/groupPartitions)
		}
		c, ok := committed.Lookup(topic, p)
		if !ok || c.Err != nil || c.At != end.Offset {
			t.Errorf("committed offset of %s/%d: %+v (found %v), want the end offset %d", topic, p, c, ok, end.Offset)
		}
	}

	// Everyone left: the group is Empty with no members.
	waitFor(t, 30*time.Second, "group Empty after both members left", func() (bool, string) {
		v, err := describeView(ctx, adm, group, topic, nextGen)
		if err != nil {
			return false, err.Error()
		}
		return v.state == "Empty" && len(v.members) == 0, v.detail
	})
}

// assertListedAs checks that ListGroups (v5, with a type filter) shows the group with this type and state, and
// that the other type's filter leaves it out.
func assertListedAs(ctx context.Context, t *testing.T, adm *kadm.Client, group, groupType, state string) {
	t.Helper()
	other := map[string]string{"classic": "consumer", "consumer": "classic"}[groupType]
	listed, err := adm.ListGroupsByType(ctx, []string{groupType})
	if err != nil {
		t.Fatalf("ListGroups(type %s): %v", groupType, err)
	}
	g, ok := listed[group]
	if !ok {
		t.Errorf("ListGroups(type %s) does not list %s: %v", groupType, group, listed.Groups())
	} else if g.GroupType != groupType || g.State != state || g.ProtocolType != "consumer" {
		t.Errorf("ListGroups(type %s) lists %s as %+v, want type %s state %s protocol type consumer", groupType, group, g, groupType, state)
	}
	listed, err = adm.ListGroupsByType(ctx, []string{other})
	if err != nil {
		t.Fatalf("ListGroups(type %s): %v", other, err)
	}
	if g, ok := listed[group]; ok {
		t.Errorf("ListGroups(type %s) lists the %s group %s: %+v", other, groupType, group, g)
	}
}

// TestClassicCooperativeStickyGroup: classic JoinGroup/SyncGroup group with the cooperative-sticky balancer.
func TestClassicCooperativeStickyGroup(t *testing.T) {
	runGroupScenario(t, false)
}

// TestConsumerProtocolGroup: the same scenario as a KIP-848 group (ConsumerGroupHeartbeat v1, server-side
// "uniform" assignor), which franz-go 1.22 drives when kgo.ServerSideBalancer is set with a sticky balancer.
func TestConsumerProtocolGroup(t *testing.T) {
	runGroupScenario(t, true)
}
