'use strict';
// kafkajs 2.2.4 (ApiVersions v2, Metadata v6, CreateTopics) against a real `ringleader serve`.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Kafka, logLevel } = require('kafkajs');
const { withTimeout, startBroker } = require('./broker');

const NODE_ID = 1;

let broker;
let kafka;
let admin;

before(async () => {
  broker = await startBroker([], 'ringleader-node-');
  kafka = new Kafka({
    clientId: 'ringleader-test-kafkajs',
    brokers: [broker.bootstrap],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 5000,
    requestTimeout: 10000,
    retry: { retries: 3, initialRetryTime: 100, maxRetryTime: 1000 },
  });
  admin = kafka.admin();
  await withTimeout(admin.connect(), 15000, 'admin.connect');
});

after(async () => {
  if (admin) await withTimeout(admin.disconnect(), 10000, 'admin.disconnect').catch(() => {});
  if (broker) await broker.stopCleanly();
});

test('createTopics then fetchTopicMetadata shows partitions and leader', { timeout: 60000 }, async () => {
  const created = await withTimeout(admin.createTopics({
    topics: [{ topic: 'kjs-orders', numPartitions: 3, replicationFactor: 1 }],
    waitForLeaders: true,
    timeout: 10000,
  }), 30000, 'createTopics');
  assert.equal(created, true);

  const md = await withTimeout(admin.fetchTopicMetadata({ topics: ['kjs-orders'] }), 20000, 'fetchTopicMetadata');
  assert.equal(md.topics.length, 1);
  const [t] = md.topics;
  assert.equal(t.name, 'kjs-orders');
  const parts = [...t.partitions].sort((a, b) => a.partitionId - b.partitionId);
  assert.deepEqual(parts.map((p) => p.partitionId), [0, 1, 2]);
  for (const p of parts) {
    assert.equal(p.partitionErrorCode, 0);
    assert.equal(p.leader, NODE_ID);
    assert.deepEqual(p.replicas, [NODE_ID]);
    assert.deepEqual(p.isr, [NODE_ID]);
  }
});

test('listTopics includes created topics; creating again returns false', { timeout: 60000 }, async () => {
  assert.equal(await withTimeout(admin.createTopics({
    topics: [{ topic: 'kjs-listed', numPartitions: 1, replicationFactor: 1 }],
  }), 30000, 'createTopics'), true);
  const topics = await withTimeout(admin.listTopics(), 20000, 'listTopics');
  assert.ok(topics.includes('kjs-listed'), `listTopics: ${JSON.stringify(topics)}`);
  assert.ok(topics.includes('kjs-orders'), `listTopics: ${JSON.stringify(topics)}`);
  // kafkajs swallows TOPIC_ALREADY_EXISTS and resolves false
  assert.equal(await withTimeout(admin.createTopics({
    topics: [{ topic: 'kjs-listed', numPartitions: 1, replicationFactor: 1 }],
  }), 30000, 'createTopics again'), false);
});

test('describeCluster reports node 1 at the listen address', { timeout: 30000 }, async () => {
  const c = await withTimeout(admin.describeCluster(), 20000, 'describeCluster');
  assert.ok(c.clusterId, 'cluster id must be non-empty');
  assert.equal(c.controller, NODE_ID);
  assert.deepEqual(c.brokers.map((b) => [b.nodeId, b.host, b.port]), [[NODE_ID, '127.0.0.1', broker.port]]);
});

test('deleteTopics removes the topic', { timeout: 60000 }, async () => {
  assert.equal(await withTimeout(admin.createTopics({
    topics: [{ topic: 'kjs-doomed', numPartitions: 2, replicationFactor: 1 }],
  }), 30000, 'createTopics'), true);
  await withTimeout(admin.deleteTopics({ topics: ['kjs-doomed'], timeout: 10000 }), 30000, 'deleteTopics');
  const topics = await withTimeout(admin.listTopics(), 20000, 'listTopics');
  assert.ok(!topics.includes('kjs-doomed'), `still listed: ${JSON.stringify(topics)}`);
  assert.ok(topics.includes('kjs-orders'));
});
