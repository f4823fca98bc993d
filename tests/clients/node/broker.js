'use strict';
// Shared by the node test files: start a real `ringleader serve` on a free port with a temporary
// data directory, wait for its "listening on" line, stop it with SIGTERM.

const { spawn } = require('node:child_process');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const REPO = path.resolve(__dirname, '..', '..', '..');
const BIN = process.env.RINGLEADER_BIN || path.join(REPO, 'target', 'release', 'ringleader');
const START_TIMEOUT_MS = 20000;

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function withTimeout(promise, ms, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Starts the broker with extra `--set k=v` arguments; resolves once it logs "listening on 127.0.0.1:PORT".
async function startBroker(sets = [], tmpPrefix = 'ringleader-node-') {
  if (!fs.existsSync(BIN)) throw new Error(`ringleader binary not found at ${BIN} (cargo build --release)`);
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), tmpPrefix));
  const addr = `127.0.0.1:${port}`;
  const args = ['serve', '--listen', addr, '--data-dir', dataDir];
  for (const kv of sets) args.push('--set', kv);
  const child = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
  let log = '';
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  await withTimeout(new Promise((resolve, reject) => {
    const onData = (chunk) => {
      log += chunk.toString();
      // eslint-disable-next-line no-control-regex
      const plain = log.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '');
      if (plain.split('\n').some((l) => l.includes('listening on') && l.includes(addr))) resolve();
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('error', reject);
    exited.then(({ code, signal }) => reject(new Error(`ringleader exited early (code ${code}, signal ${signal}):\n${log}`)));
  }), START_TIMEOUT_MS, 'waiting for "listening on"').catch((e) => {
    child.kill('SIGKILL');
    throw new Error(`${e.message}\n--- ringleader log ---\n${log}`);
  });
  // The log keeps being collected after start-up (shown when an assertion fails).
  return {
    port,
    bootstrap: addr,
    dataDir,
    child,
    log: () => log.slice(-6000),
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      child.kill('SIGTERM');
      return withTimeout(exited, 15000, 'waiting for ringleader to exit').catch((e) => {
        child.kill('SIGKILL');
        throw e;
      });
    },
    // SIGTERM, remove the data dir, and require a clean exit (0, not killed by a signal).
    async stopCleanly() {
      const { code, signal } = await this.stop();
      fs.rmSync(dataDir, { recursive: true, force: true });
      assert.equal(signal, null, `ringleader killed by ${signal}\n${log.slice(-6000)}`);
      assert.equal(code, 0, `ringleader exit code ${code} on SIGTERM\n${log.slice(-6000)}`);
    },
  };
}

// CreateTopics through a kafkajs admin, waiting for leaders.
async function createTopic(admin, topic, numPartitions) {
  const created = await withTimeout(admin.createTopics({
    topics: [{ topic, numPartitions, replicationFactor: 1 }],
    waitForLeaders: true,
    timeout: 10000,
  }), 30000, `createTopics ${topic}`);
  assert.equal(created, true, `topic ${topic} not created`);
}

module.exports = { freePort, withTimeout, sleep, startBroker, createTopic };
