'use strict';
// @platformatic/kafka 1.35.0 as a KIP-848 consumer (`groupProtocol: 'consumer'`) against a real
// `ringleader serve`: ConsumerGroupHeartbeat v1 (its own 36-char UUID member id, subscription and
// owned partitions on every heartbeat, leave with epoch -1), OffsetCommit v9 with the member
// epoch, OffsetFetch v9; admin ListGroups v5 (type filter) and OffsetFetch.
// The package is ESM-only, so it is loaded with import(). It declares node >= 20.19.4 and two of
// its dependencies ask for >= 22.19.0 (npm prints EBADENGINE warnings); it runs on Node 20.
// These tests produce nothing, so no message ever arrives (data_path.test.js reads records).

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { withTimeout, sleep, startBroker } = require('./broker');

// Kafka's consumer heartbeat interval is 5 s; 1 s keeps the rebalances here short.
const BROKER_SETS = [
  'group.initial.rebalance.delay.ms=0',
  'group.consumer.heartbeat.interval.ms=1000',
  'group.consumer.min.heartbeat.interval.ms=1000',
];

async function waitFor(pred, ms, what) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = pred();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`${what} not seen within ${ms} ms`);
    await sleep(50);
  }
}

// Starts the broker with extra `--set k=v` arguments; resolves once it logs "listening on 127.0.0.1:PORT".
let pk; // the @platformatic/kafka module
let broker;
let admin;

before(async () => {
  pk = await import('@platformatic/kafka');
  broker = await startBroker(BROKER_SETS, 'ringleader-node-kip848-');
  admin = new pk.Admin({
    clientId: 'ringleader-test-platformatic-admin',
    bootstrapBrokers: [broker.bootstrap],
    timeout: 10000,
    retries: 3,
    retryDelay: 200,
  });
});

after(async () => {
  if (admin) await withTimeout(admin.close(), 10000, 'admin.close').catch(() => {});
  if (broker) await broker.stopCleanly();
});

function newConsumer(groupId, clientId) {
  return new pk.Consumer({
    clientId,
    bootstrapBrokers: [broker.bootstrap],
    groupId,
    groupProtocol: 'consumer',
    timeout: 10000,
    retries: 3,
    retryDelay: 200,
    maxWaitTime: 300, // empty partitions: each Fetch waits this long
  });
}

// Partitions of `topic` the consumer owns now, sorted.
function owned(consumer, topic) {
  const a = (consumer.assignments || []).find((x) => x.topic === topic);
  return a ? [...a.partitions].sort((x, y) => x - y) : [];
}

test('two KIP-848 consumers: 4 partitions to one, then 2 + 2; commits read back with the member epochs',
  { timeout: 90000 }, async (t) => {
    const topic = 'pk-orders';
    const groupId = 'pk-g-consumer';
    await withTimeout(admin.createTopics({ topics: [topic], partitions: 4, replicas: 1 }), 15000, 'createTopics');

    const live = [];
    t.after(async () => {
      for (const { consumer, stream } of live.reverse()) {
        await withTimeout(stream.close(), 10000, 'stream.close (cleanup)').catch(() => {});
        await withTimeout(consumer.close(true), 10000, 'consumer.close (cleanup)').catch(() => {});
      }
    });
    const heartbeatErrors = [];
    const start = async (clientId) => {
      const consumer = newConsumer(groupId, clientId);
      consumer.on('consumer:heartbeat:error', (p) => heartbeatErrors.push(`${clientId}: ${p.error && p.error.message}`));
      const stream = await withTimeout(consumer.consume({ topics: [topic], mode: 'earliest' }), 20000,
        `${clientId}.consume`);
      stream.on('data', () => {});
      live.push({ consumer, stream });
      return { consumer, stream };
    };

    // A alone: all four partitions
    const { consumer: a } = await start('pk-a');
    await waitFor(() => owned(a, topic).length === 4, 20000, 'A owning pk-orders[0..3]');
    assert.deepEqual(owned(a, topic), [0, 1, 2, 3]);
    assert.match(a.memberId, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
      'v1: the client makes its own UUID member id');

    // B joins: the uniform assignor splits 2 + 2; A gives up two, B receives them
    const { consumer: b, stream: sb } = await start('pk-b');
    await waitFor(() => owned(a, topic).length === 2 && owned(b, topic).length === 2, 30000,
      `A and B owning two partitions each (A ${owned(a, topic)}, B ${owned(b, topic)}; heartbeat errors ${heartbeatErrors})`);
    const pa = owned(a, topic);
    const pb = owned(b, topic);
    assert.deepEqual([...pa, ...pb].sort((x, y) => x - y), [0, 1, 2, 3]);
    assert.notEqual(a.memberId, b.memberId);

    // ListGroups v5 with the type filter shows a Stable consumer group
    const listed = await withTimeout(admin.listGroups({ types: ['consumer'] }), 15000, 'listGroups');
    const row = listed.get(groupId);
    assert.ok(row, `group missing from ListGroups: ${JSON.stringify([...listed.keys()])}`);
    assert.equal(row.groupType, 'consumer');
    assert.equal(row.protocolType, 'consumer');
    assert.equal(row.state, 'STABLE');

    // OffsetCommit v9 with each member's epoch, for the partitions it owns
    await withTimeout(a.commit({ offsets: pa.map((p) => ({ topic, partition: p, offset: BigInt(10 + p), leaderEpoch: 0 })) }),
      15000, 'A.commit');
    await withTimeout(b.commit({ offsets: pb.map((p) => ({ topic, partition: p, offset: BigInt(20 + p), leaderEpoch: 0 })) }),
      15000, 'B.commit');
    const want = [0, 1, 2, 3].map((p) => BigInt(pa.includes(p) ? 10 + p : 20 + p));

    // read back through the consumer (OffsetFetch v9 with member id and epoch) and the admin
    const fromA = await withTimeout(a.listCommittedOffsets({ topics: [{ topic, partitions: [0, 1, 2, 3] }] }),
      15000, 'A.listCommittedOffsets');
    assert.deepEqual(fromA.get(topic), want);
    const fromB = await withTimeout(b.listCommittedOffsets({ topics: [{ topic, partitions: [0, 1, 2, 3] }] }),
      15000, 'B.listCommittedOffsets');
    assert.deepEqual(fromB.get(topic), want);
    const fromAdmin = await withTimeout(admin.listConsumerGroupOffsets({ groups: [groupId] }), 15000,
      'admin.listConsumerGroupOffsets');
    assert.equal(fromAdmin.length, 1);
    assert.equal(fromAdmin[0].groupId, groupId);
    const t0 = fromAdmin[0].topics.find((x) => x.name === topic);
    assert.ok(t0, JSON.stringify(fromAdmin, (_, v) => (typeof v === 'bigint' ? v.toString() : v)));
    assert.deepEqual(
      t0.partitions.map((p) => [p.partitionIndex, p.committedOffset]).sort((x, y) => x[0] - y[0]),
      [0, 1, 2, 3].map((p, i) => [p, want[i]]));

    // B leaves (heartbeat with epoch -1): A gets all four back
    await withTimeout(sb.close(), 10000, 'B stream.close');
    await withTimeout(b.close(), 10000, 'B.close');
    live.splice(live.findIndex((x) => x.consumer === b), 1);
    await waitFor(() => owned(a, topic).length === 4, 20000, `A owning all four after B left (A ${owned(a, topic)})`);
    assert.deepEqual(owned(a, topic), [0, 1, 2, 3]);
    assert.deepEqual(heartbeatErrors, [], 'no heartbeat may fail');
  });
