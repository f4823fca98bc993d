'use strict';
// kafkajs 2.2.4 on the data path of a real `ringleader serve`: Produce v7 (acks=-1, plain and
// GZIP batches), Fetch v11 through a group consumer (JoinGroup/SyncGroup, OffsetCommit),
// ListOffsets v3 (admin.fetchTopicOffsets), OffsetFetch (admin.fetchOffsets).

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Kafka, CompressionTypes, logLevel } = require('kafkajs');
const { withTimeout, sleep, startBroker, createTopic: createTopicWith } = require('./broker');

let broker;
let kafka;
let admin;

before(async () => {
  broker = await startBroker(['group.initial.rebalance.delay.ms=0'], 'ringleader-node-data-');
  kafka = new Kafka({
    clientId: 'ringleader-test-kafkajs-data',
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

// Sends `messages` in chunks (one Produce request each) with acks=-1; returns [{partition, baseOffset}].
async function produce(topic, messages, { compression = CompressionTypes.None, chunk = 25 } = {}) {
  const producer = kafka.producer({ allowAutoTopicCreation: false, retry: { retries: 3 } });
  await withTimeout(producer.connect(), 15000, 'producer.connect');
  const acks = [];
  try {
    for (let i = 0; i < messages.length; i += chunk) {
      const res = await withTimeout(producer.send({
        topic, acks: -1, timeout: 10000, compression, messages: messages.slice(i, i + chunk),
      }), 20000, 'producer.send');
      for (const r of res) {
        assert.equal(r.errorCode, 0, `produce error ${JSON.stringify(r)}`);
        acks.push({ partition: r.partition, baseOffset: Number(r.baseOffset) });
      }
    }
  } finally {
    await withTimeout(producer.disconnect(), 10000, 'producer.disconnect').catch(() => {});
  }
  return acks;
}

// A group consumer reading `topic` from the beginning until `want` messages arrived (then 1 s more).
async function consumeInGroup(groupId, topic, want, ms = 40000) {
  const consumer = kafka.consumer({
    groupId,
    sessionTimeout: 10000,
    rebalanceTimeout: 15000,
    heartbeatInterval: 1000,
    maxWaitTimeInMs: 200,
    retry: { retries: 3, initialRetryTime: 100, maxRetryTime: 1000 },
  });
  const got = [];
  let connected = false;
  try {
    await withTimeout(consumer.connect(), 15000, 'consumer.connect');
    connected = true;
    await withTimeout(consumer.subscribe({ topics: [topic], fromBeginning: true }), 15000, 'subscribe');
    let resolveAll;
    const all = new Promise((resolve) => { resolveAll = resolve; });
    await withTimeout(consumer.run({
      eachMessage: async ({ partition, message }) => {
        got.push({
          partition,
          offset: Number(message.offset),
          key: message.key ? message.key.toString() : null,
          value: message.value.toString(),
          headers: Object.fromEntries(Object.entries(message.headers || {}).map(([k, v]) => [k, v.toString()])),
        });
        if (got.length >= want) resolveAll();
      },
    }), 15000, 'consumer.run');
    await withTimeout(all, ms, `consuming ${want} messages (got ${got.length})`).catch((e) => {
      throw new Error(`${e.message}: got ${got.length}\n--- ringleader log ---\n${broker.log()}`);
    });
    await sleep(1000); // nothing more may arrive
  } finally {
    // disconnect stops the run loop, commits what was processed and leaves the group
    if (connected) await withTimeout(consumer.disconnect(), 15000, 'consumer.disconnect');
  }
  return got;
}

function checkExactlyOnce(got, sent, acks) {
  assert.equal(got.length, sent.length, `consumed ${got.length}, produced ${sent.length}`);
  const ids = new Set(got.map((m) => `${m.partition}/${m.offset}`));
  assert.equal(ids.size, got.length, 'a message was consumed twice');
  assert.deepEqual(got.map((m) => m.value).sort(), sent.map((m) => m.value).sort());
  // per partition: offsets 0..n-1 in order, and a key always lands in the same partition
  const byPart = new Map();
  const keyPart = new Map();
  for (const m of got) {
    if (!byPart.has(m.partition)) byPart.set(m.partition, []);
    byPart.get(m.partition).push(m.offset);
    if (m.key !== null) {
      if (keyPart.has(m.key)) assert.equal(keyPart.get(m.key), m.partition, `key ${m.key} in two partitions`);
      keyPart.set(m.key, m.partition);
    }
  }
  for (const [p, offsets] of byPart) {
    assert.deepEqual(offsets, offsets.map((_, i) => i), `partition ${p}: offsets ${offsets}`);
  }
  // every acknowledged base offset was consumed
  for (const a of acks) assert.ok(ids.has(`${a.partition}/${a.baseOffset}`), `acked ${JSON.stringify(a)} not consumed`);
  return byPart;
}

async function checkCommitted(groupId, topic, byPart, total) {
  const ends = await withTimeout(admin.fetchTopicOffsets(topic), 15000, 'fetchTopicOffsets');
  for (const e of ends) {
    const n = (byPart.get(e.partition) || []).length;
    assert.equal(Number(e.high), n, `high watermark of partition ${e.partition}`);
    assert.equal(Number(e.low), 0, `low watermark of partition ${e.partition}`);
  }
  const [committed] = await withTimeout(admin.fetchOffsets({ groupId, topics: [topic] }), 15000, 'fetchOffsets');
  const sum = committed.partitions.reduce((s, p) => s + Math.max(0, Number(p.offset)), 0);
  assert.equal(sum, total, `committed offsets ${JSON.stringify(committed.partitions)}`);
  for (const p of committed.partitions) {
    assert.equal(Number(p.offset), (byPart.get(p.partition) || []).length, `committed offset of partition ${p.partition}`);
  }
}

test('produce 100 messages (acks=-1), consume them all once in a group, offsets committed',
  { timeout: 90000 }, async () => {
    const topic = 'kjs-data';
    const groupId = 'kjs-data-g';
    await createTopic(topic, 4);
    const sent = Array.from({ length: 100 }, (_, i) => ({
      key: `key-${i % 10}`, value: `value-${i}`, headers: { seq: String(i) },
    }));
    const acks = await produce(topic, sent);
    const got = await consumeInGroup(groupId, topic, sent.length);
    const byPart = checkExactlyOnce(got, sent, acks);
    for (const m of got) assert.equal(m.headers.seq, m.value.slice('value-'.length), 'header round trip');
    await checkCommitted(groupId, topic, byPart, sent.length);

    // the group resumes from its commits: a second run reads only what is produced afterwards
    const more = Array.from({ length: 10 }, (_, i) => ({ key: `key-${i}`, value: `later-${i}` }));
    await produce(topic, more, { chunk: 10 });
    const again = await consumeInGroup(groupId, topic, more.length);
    assert.deepEqual(again.map((m) => m.value).sort(), more.map((m) => m.value).sort());
  });

test('GZIP-compressed batches round-trip', { timeout: 60000 }, async () => {
  const topic = 'kjs-gzip';
  await createTopic(topic, 2);
  const sent = Array.from({ length: 60 }, (_, i) => ({ key: `g${i % 6}`, value: `gzip-${i}-${'x'.repeat(i * 10)}` }));
  const acks = await produce(topic, sent, { compression: CompressionTypes.GZIP, chunk: 20 });
  const got = await consumeInGroup('kjs-gzip-g', topic, sent.length);
  checkExactlyOnce(got, sent, acks);
});
