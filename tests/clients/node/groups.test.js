'use strict';
// kafkajs 2.2.4 as a classic group consumer against a real `ringleader serve`: JoinGroup v5
// (MEMBER_ID_REQUIRED then rejoin), SyncGroup v3, Heartbeat v3, OffsetCommit v5, OffsetFetch v4,
// LeaveGroup v3 on disconnect; admin DescribeGroups v2, ListGroups v2, DeleteGroups v1.
// These tests produce nothing, so eachMessage is never called (data_path.test.js reads records).

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Kafka, logLevel } = require('kafkajs');
const { withTimeout, sleep, startBroker, createTopic: createTopicWith } = require('./broker');

let broker;
let kafka;
let admin;

before(async () => {
  broker = await startBroker(['group.initial.rebalance.delay.ms=0'], 'ringleader-node-groups-');
  kafka = new Kafka({
    clientId: 'ringleader-test-kafkajs-groups',
    brokers: [broker.bootstrap],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 5000,
    requestTimeout: 10000,
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 1000 },
  });
  admin = kafka.admin();
  await withTimeout(admin.connect(), 15000, 'admin.connect');
});

after(async () => {
  if (admin) await withTimeout(admin.disconnect(), 10000, 'admin.disconnect').catch(() => {});
  if (broker) await broker.stopCleanly();
});

const createTopic = (topic, numPartitions) => createTopicWith(admin, topic, numPartitions);

function newConsumer(groupId) {
  return kafka.consumer({
    groupId,
    sessionTimeout: 10000,
    rebalanceTimeout: 15000,
    heartbeatInterval: 1000,
    maxWaitTimeInMs: 300, // empty partitions: each Fetch waits this long
    retry: { retries: 3, initialRetryTime: 100, maxRetryTime: 1000 },
  });
}

// Resolves with the first GROUP_JOIN payload (the consumer joined and synced).
function groupJoined(consumer, ms) {
  let remove;
  const p = new Promise((resolve) => {
    remove = consumer.on(consumer.events.GROUP_JOIN, (e) => resolve(e.payload));
  });
  return withTimeout(p, ms, 'GROUP_JOIN').finally(() => remove());
}

test('consumer joins, commits; fetchOffsets, describeGroups (Stable, then Empty), deleteGroups',
  { timeout: 90000 }, async (t) => {
    const topic = 'kjs-group-orders';
    const groupId = 'kjs-g1';
    await createTopic(topic, 4);

    const consumer = newConsumer(groupId);
    let connected = false;
    t.after(async () => {
      if (connected) await withTimeout(consumer.disconnect(), 15000, 'consumer.disconnect (cleanup)').catch(() => {});
    });
    const joined = groupJoined(consumer, 30000);
    await withTimeout(consumer.connect(), 15000, 'consumer.connect');
    connected = true;
    await withTimeout(consumer.subscribe({ topics: [topic], fromBeginning: true }), 15000, 'subscribe');
    let messages = 0;
    await withTimeout(consumer.run({ eachMessage: async () => { messages += 1; } }), 15000, 'consumer.run');

    const join = await joined;
    assert.equal(join.groupId, groupId);
    assert.equal(join.isLeader, true, 'the only member must be the leader');
    assert.equal(join.leaderId, join.memberId);
    assert.ok(join.memberId.startsWith('ringleader-test-kafkajs-groups-'),
      `member id must be clientId + "-" + uuid, got ${join.memberId}`);
    assert.equal(join.groupProtocol, 'RoundRobinAssigner');
    assert.deepEqual(Object.keys(join.memberAssignment), [topic]);
    assert.deepEqual([...join.memberAssignment[topic]].sort((a, b) => a - b), [0, 1, 2, 3]);

    // the group is Stable with this one member and its assignment
    const described = await withTimeout(admin.describeGroups([groupId]), 15000, 'describeGroups');
    assert.equal(described.groups.length, 1);
    const [g] = described.groups;
    assert.equal(g.errorCode, 0);
    assert.equal(g.groupId, groupId);
    assert.equal(g.state, 'Stable');
    assert.equal(g.protocolType, 'consumer');
    assert.equal(g.protocol, 'RoundRobinAssigner');
    assert.equal(g.members.length, 1);
    assert.equal(g.members[0].memberId, join.memberId);
    assert.equal(g.members[0].clientId, 'ringleader-test-kafkajs-groups');

    const listed = await withTimeout(admin.listGroups(), 15000, 'listGroups');
    assert.deepEqual(listed.groups.filter((x) => x.groupId === groupId),
      [{ groupId, protocolType: 'consumer' }]);

    // explicit commit (OffsetCommit with the member id and generation), then admin OffsetFetch
    await withTimeout(consumer.commitOffsets([
      { topic, partition: 0, offset: '5' },
      { topic, partition: 1, offset: '17' },
      { topic, partition: 3, offset: '1000000000000' },
    ]), 15000, 'commitOffsets');
    const fetched = await withTimeout(admin.fetchOffsets({ groupId, topics: [topic] }), 15000, 'fetchOffsets');
    assert.equal(fetched.length, 1);
    assert.equal(fetched[0].topic, topic);
    const offsets = Object.fromEntries(fetched[0].partitions.map((p) => [p.partition, p.offset]));
    assert.deepEqual(offsets, { 0: '5', 1: '17', 2: '-1', 3: '1000000000000' });

    // deleting a group with a live member fails with NON_EMPTY_GROUP
    await assert.rejects(withTimeout(admin.deleteGroups([groupId]), 20000, 'deleteGroups (non-empty)'),
      (e) => {
        assert.equal(e.name, 'KafkaJSDeleteGroupsError', e.stack);
        assert.deepEqual(e.groups.map((x) => [x.groupId, x.errorCode]), [[groupId, 68]]);
        return true;
      });

    // disconnect sends LeaveGroup: the group becomes Empty at once, offsets stay
    await withTimeout(consumer.disconnect(), 15000, 'consumer.disconnect');
    connected = false;
    assert.equal(messages, 0, 'partitions are empty: no message can arrive');
    const after = await withTimeout(admin.describeGroups([groupId]), 15000, 'describeGroups after leave');
    assert.equal(after.groups[0].state, 'Empty', JSON.stringify(after.groups[0]));
    assert.deepEqual(after.groups[0].members, []);
    const kept = await withTimeout(admin.fetchOffsets({ groupId, topics: [topic] }), 15000, 'fetchOffsets after leave');
    assert.deepEqual(Object.fromEntries(kept[0].partitions.map((p) => [p.partition, p.offset])),
      { 0: '5', 1: '17', 2: '-1', 3: '1000000000000' });

    // deleting the empty group succeeds and removes its offsets
    const deleted = await withTimeout(admin.deleteGroups([groupId]), 20000, 'deleteGroups');
    assert.deepEqual(deleted.map((x) => [x.groupId, x.errorCode]), [[groupId, 0]]);
    const gone = await withTimeout(admin.listGroups(), 15000, 'listGroups after delete');
    assert.ok(!gone.groups.some((x) => x.groupId === groupId), JSON.stringify(gone.groups));
    const noOffsets = await withTimeout(admin.fetchOffsets({ groupId, topics: [topic] }), 15000, 'fetchOffsets after delete');
    assert.deepEqual(Object.fromEntries(noOffsets[0].partitions.map((p) => [p.partition, p.offset])),
      { 0: '-1', 1: '-1', 2: '-1', 3: '-1' });
    // DescribeGroups v2 of a deleted group: state Dead, no error (v<6)
    const dead = await withTimeout(admin.describeGroups([groupId]), 15000, 'describeGroups after delete');
    assert.equal(dead.groups[0].state, 'Dead');
    assert.equal(dead.groups[0].errorCode, 0);
  });

test('two kafkajs consumers split the partitions; the survivor gets them all back after the other leaves',
  { timeout: 90000 }, async (t) => {
    const topic = 'kjs-group-split';
    const groupId = 'kjs-g2';
    await createTopic(topic, 6);

    const a = newConsumer(groupId);
    const b = newConsumer(groupId);
    const live = new Set();
    t.after(async () => {
      for (const c of live) await withTimeout(c.disconnect(), 15000, 'disconnect (cleanup)').catch(() => {});
    });
    const joinsA = [];
    a.on(a.events.GROUP_JOIN, (e) => joinsA.push(e.payload));
    const waitFor = async (pred, ms, what) => {
      const deadline = Date.now() + ms;
      while (!pred()) {
        if (Date.now() > deadline) throw new Error(`${what} not seen within ${ms} ms; A joins: ${JSON.stringify(joinsA)}`);
        await sleep(50);
      }
    };
    const parts = (p) => [...(p.memberAssignment[topic] || [])].sort((x, y) => x - y);

    await withTimeout(a.connect(), 15000, 'A.connect');
    live.add(a);
    await withTimeout(a.subscribe({ topics: [topic] }), 15000, 'A.subscribe');
    await withTimeout(a.run({ eachMessage: async () => {} }), 15000, 'A.run');
    await waitFor(() => joinsA.length >= 1, 30000, 'A GROUP_JOIN');
    assert.deepEqual(parts(joinsA[0]), [0, 1, 2, 3, 4, 5]);

    const joinedB = groupJoined(b, 30000);
    await withTimeout(b.connect(), 15000, 'B.connect');
    live.add(b);
    await withTimeout(b.subscribe({ topics: [topic] }), 15000, 'B.subscribe');
    await withTimeout(b.run({ eachMessage: async () => {} }), 15000, 'B.run');
    const jb = await joinedB;
    await waitFor(() => joinsA.length >= 2, 30000, 'A rejoin after B joined');
    const ja = joinsA[1];
    // kafkajs' RoundRobinAssigner sorts members by id: whichever sorts first gets the even partitions
    const pa = parts(ja);
    const pb = parts(jb);
    assert.equal(pa.length, 3, JSON.stringify({ ja, jb }));
    assert.equal(pb.length, 3, JSON.stringify({ ja, jb }));
    assert.deepEqual([...pa, ...pb].sort((x, y) => x - y), [0, 1, 2, 3, 4, 5]);
    assert.equal(ja.leaderId, jb.leaderId, 'both members must agree on the leader');
    assert.equal(ja.isLeader, true, 'the first member stays the leader');

    const desc = await withTimeout(admin.describeGroups([groupId]), 15000, 'describeGroups');
    assert.equal(desc.groups[0].state, 'Stable');
    assert.deepEqual(desc.groups[0].members.map((m) => m.memberId).sort(), [ja.memberId, jb.memberId].sort());

    await withTimeout(b.disconnect(), 15000, 'B.disconnect');
    live.delete(b);
    await waitFor(() => joinsA.length >= 3, 30000, 'A rejoin after B left');
    assert.deepEqual(parts(joinsA[2]), [0, 1, 2, 3, 4, 5]);
    const desc2 = await withTimeout(admin.describeGroups([groupId]), 15000, 'describeGroups after B left');
    assert.equal(desc2.groups[0].state, 'Stable');
    assert.deepEqual(desc2.groups[0].members.map((m) => m.memberId), [ja.memberId]);
  });
