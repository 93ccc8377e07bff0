// bench/bullmq/delayed.js: BullMQ's delayed jobs on a redis-server this
// script starts (loopback, no persistence) and stops by its pid; the peer of
// hwtimer.durable's Redis mode in `make bench`. One line per figure, worded
// like bench/durable.lua's so that the rows sit side by side.
//   node bench/bullmq/delayed.js [scale]
//   node bench/bullmq/delayed.js --concurrent CONC SECS   (that figure alone)
// scale 1 (default): 20,000 adds one at a time, 64 callers adding at once
// for 5 s (each awaits its add, as a request would), 100,000 in addBulk calls of
// 1,000 (these 10^5 jobs also give Redis memory per delayed job), lateness
// of 1,000 jobs due in 1-2 s (a load one worker keeps up with) and of 20,000
// (bench/durable.lua's load), each with one worker process and with four
// (concurrency 1 each, jobs removed on completion); the light load once more
// with Redis's hz at 100 instead of its default 10.
'use strict';

const { spawn, fork } = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
const { performance } = require('perf_hooks');

const HERE = __dirname;
const { Queue, Worker } = require(path.join(HERE, 'node_modules', 'bullmq'));
const IORedis = require(path.join(HERE, 'node_modules', 'ioredis'));

const QUEUE = 'bench';

// ---- a worker process: reports each job's lateness to the parent ----------

async function workerMain(port) {
  const connection = new IORedis({ host: '127.0.0.1', port, maxRetriesPerRequest: null });
  let batch = [];
  const flush = () => {
    if (batch.length) process.send({ late: batch });
    batch = [];
  };
  const worker = new Worker(QUEUE, async (job) => {
    // due = when it was added + its delay (whole ms of this machine's clock)
    batch.push(performance.timeOrigin + performance.now() - (job.timestamp + job.opts.delay));
    if (batch.length >= 200) flush();
  }, { connection, concurrency: 1 });
  setInterval(flush, 50);
  process.on('message', async (m) => {
    if (m === 'stop') {
      flush();
      await worker.close();
      await connection.quit();
      process.exit(0);
    }
  });
  await worker.waitUntilReady();
  process.send({ ready: true });
}

// ---- the redis-server this run owns ------------------------------------------

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Until the port accepts a connection (5 s at most).
async function listening(port, child) {
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error('redis-server exited with ' + child.exitCode);
    const ok = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => { c.destroy(); resolve(true); });
      c.once('error', () => resolve(false));
    });
    if (ok) return;
    await sleep(50);
  }
  throw new Error('redis-server did not listen on 127.0.0.1:' + port);
}

async function startRedis() {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hwtimer-bullmq-'));
  const child = spawn('redis-server', ['--bind', '127.0.0.1', '--port', String(port), '--save', '',
    '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' });
  const client = new IORedis({ host: '127.0.0.1', port, maxRetriesPerRequest: null, lazyConnect: true });
  const stop = async () => {
    client.disconnect();
    if (child.exitCode === null) {
      const gone = new Promise((resolve) => child.once('exit', resolve));
      process.kill(child.pid, 'SIGTERM');
      await Promise.race([gone, sleep(5000)]);
      if (child.exitCode === null) process.kill(child.pid, 'SIGKILL');
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    await listening(port, child);
    await client.connect();
  } catch (e) {
    await stop();
    throw e;
  }
  return { port, client, child, stop };
}

// ---- helpers ----------------------------------------------------------------

function sleep(ms) { return new Promise((resolve) => setTimeout(resolve, ms)); }
function now() { return Number(process.hrtime.bigint()) / 1e9; }

function pct(sorted, p) {
  return sorted[Math.max(0, Math.ceil(sorted.length * p) - 1)];
}

async function usedMemory(client) {
  const info = await client.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)[1]);
}

// n jobs added with addBulk in calls of `chunk`, delay from delayOf(i).
async function addBulk(queue, n, chunk, delayOf) {
  for (let i = 0; i < n; i += chunk) {
    const jobs = [];
    for (let j = i; j < Math.min(n, i + chunk); j++) {
      jobs.push({ name: 'far', data: {}, opts: { delay: delayOf(j), removeOnComplete: true } });
    }
    await queue.addBulk(jobs);
  }
}

// Lateness of n jobs due in 1-2 s, run by `workers` worker processes.
async function lateness(redis, n, workers, note = '') {
  await redis.client.flushall();
  const children = [];
  const late = [];
  for (let i = 0; i < workers; i++) {
    const child = fork(__filename, ['--worker', String(redis.port)], { stdio: 'inherit' });
    const ready = new Promise((resolve, reject) => {
      child.on('message', (m) => {
        if (m.ready) resolve();
        if (m.late) late.push(...m.late);
      });
      child.once('exit', (code) => reject(new Error('worker exited with ' + code)));
    });
    children.push({ child, ready });
  }
  await Promise.all(children.map((c) => c.ready));
  const queue = new Queue(QUEUE, { connection: { host: '127.0.0.1', port: redis.port } });
  await addBulk(queue, n, 1000, () => 1000 + Math.floor(Math.random() * 1000));
  const limit = now() + 120;
  while (late.length < n && now() < limit) await sleep(50);
  for (const { child } of children) {
    child.removeAllListeners('exit');
    const gone = new Promise((resolve) => child.once('exit', resolve));
    child.send('stop');
    await Promise.race([gone, sleep(5000)]);
    if (child.exitCode === null) child.kill('SIGKILL');
  }
  await queue.close();
  if (late.length < n) throw new Error(`only ${late.length} of ${n} jobs ran within 120 s`);
  late.sort((a, b) => a - b);
  const early = late.filter((x) => x < 0).length;
  console.log(`bullmq lateness of ${n} jobs due in 1-2 s, ${workers} worker${workers > 1 ? 's' : ''}${note}: ` +
    `p50 ${pct(late, 0.5).toFixed(2)} ms, p99 ${pct(late, 0.99).toFixed(2)} ms, ` +
    `max ${late[late.length - 1].toFixed(2)} ms, early ${early}`);
}

// Delayed jobs added by `conc` callers at once, each awaiting its add
// before the next (as `conc` requests of a server would), for `secs`
// seconds; returns adds per second.
async function concurrentAdds(queue, conc, secs) {
  let n = 0;
  const end = now() + secs;
  const caller = async () => {
    while (now() < end) {
      await queue.add('far', {}, { delay: 3600e3 });
      n++;
    }
  };
  const t0 = now();
  await Promise.all(Array.from({ length: conc }, caller));
  return n / (now() - t0);
}

function concurrentLine(conc, rate) {
  return `bullmq delayed adds, ${conc} at once (${conc} concurrent queue.add calls, one connection): ` +
    `${rate.toFixed(0)} /s`;
}

// `node delayed.js --concurrent CONC SECS`: that figure alone, on a
// redis-server of its own (bench/durable_ngx.lua runs it between its own
// runs); its last line is the rate alone.
async function concurrentMain(conc, secs) {
  const redis = await startRedis();
  try {
    const queue = new Queue(QUEUE, { connection: { host: '127.0.0.1', port: redis.port } });
    await queue.waitUntilReady();
    await queue.add('far', {}, { delay: 3600e3 }); // the scripts loaded before the clock starts
    const rate = await concurrentAdds(queue, conc, secs);
    console.log(concurrentLine(conc, rate));
    console.log(rate.toFixed(0));
    await queue.close();
  } finally {
    await redis.stop();
  }
}

// ---- the figures ------------------------------------------------------------

async function main() {
  const scale = Number(process.argv[2] || '1');
  const nOne = Math.floor(20000 * scale);
  const nBulk = Math.floor(100000 * scale);
  const nLate = Math.floor(20000 * scale);
  const nLight = Math.floor(1000 * scale);
  const redis = await startRedis();
  const cleanup = () => { try { process.kill(redis.child.pid, 'SIGTERM'); } catch (e) { /* gone */ } };
  process.on('SIGINT', () => { cleanup(); process.exit(130); });
  process.on('SIGTERM', () => { cleanup(); process.exit(143); });
  try {
    const version = JSON.parse(fs.readFileSync(path.join(HERE, 'node_modules', 'bullmq', 'package.json'))).version;
    const info = await redis.client.info('server');
    console.log(`== BullMQ ${version} on Node ${process.version}, Redis ${/redis_version:(\S+)/.exec(info)[1]} ` +
      `(127.0.0.1:${redis.port}, started by this bench)`);
    const queue = new Queue(QUEUE, { connection: { host: '127.0.0.1', port: redis.port } });
    await queue.waitUntilReady();
    await queue.add('far', {}, { delay: 3600e3 }); // the scripts loaded before the clock starts
    await redis.client.flushall();

    let t0 = now();
    for (let i = 0; i < nOne; i++) await queue.add('far', {}, { delay: 3600e3 });
    console.log(`bullmq delayed adds one at a time (queue.add, await each): ${(nOne / (now() - t0)).toFixed(0)} /s  (${nOne} jobs)`);

    await redis.client.flushall();
    console.log(concurrentLine(64, await concurrentAdds(queue, 64, Math.max(1, 5 * scale))));

    await redis.client.flushall();
    await sleep(200);
    const before = await usedMemory(redis.client);
    t0 = now();
    await addBulk(queue, nBulk, 1000, () => 3600e3);
    const bulk = nBulk / (now() - t0);
    const after = await usedMemory(redis.client);
    console.log(`bullmq delayed adds in bulk (addBulk of 1000): ${bulk.toFixed(0)} /s  (${nBulk} jobs)`);
    console.log(`bullmq Redis memory per delayed job: ${((after - before) / nBulk).toFixed(0)} B  ` +
      `(used_memory +${((after - before) / 1048576).toFixed(1)} MB for ${nBulk} jobs, name 'far', data {})`);
    await queue.close();

    await lateness(redis, nLight, 1);
    await lateness(redis, nLight, 4);
    await lateness(redis, nLate, 1);
    await lateness(redis, nLate, 4);
    // A worker waits for the next delayed job in a blocking command whose
    // timeout Redis serves on its server cron, hz times a second (10 by
    // default): the same light load with hz 100.
    await redis.client.config('SET', 'hz', '100');
    await lateness(redis, nLight, 1, ', Redis hz 100');
    await redis.client.config('SET', 'hz', '10');
  } finally {
    await redis.stop();
  }
}

if (process.argv[2] === '--worker') {
  workerMain(Number(process.argv[3])).catch((e) => { console.error(e); process.exit(1); });
} else if (process.argv[2] === '--concurrent') {
  concurrentMain(Number(process.argv[3] || '64'), Number(process.argv[4] || '5'))
    .catch((e) => { console.error('bench/bullmq: ' + (e.stack || e)); process.exit(1); });
} else {
  main().catch((e) => { console.error('bench/bullmq: ' + (e.stack || e)); process.exit(1); });
}
