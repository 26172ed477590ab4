#!/usr/bin/env node
'use strict';
// Optional peer benchmark: npm redis-semaphore (pinned 5.8.0) on ioredis, so
// that redsem can be compared side by side with it. Never run in CI.
//
//   node redis_semaphore_bench.js contended --url redis://127.0.0.1:PORT \
//        [--clients 50] [--limit 5] [--seconds 10]
//   node redis_semaphore_bench.js idle --url redis://127.0.0.1:PORT \
//        [--waiters 100] [--seconds 10]
//
// How redis-semaphore 5.8.0 waits (read from
// node_modules/redis-semaphore/lib/misc.js and lib/semaphore/acquire/index.js):
// the defaults are retryInterval = 10 ms, acquireTimeout = 10000 ms,
// acquireAttemptsLimit = Infinity and lockTimeout = 10000 ms. acquire() is a
// pure client-side polling loop: one EVALSHA of a Lua script (ZREMRANGEBYSCORE
// of expired holders, ZCARD, and ZADD + PEXPIRE when below the limit) per
// attempt, then setTimeout(retryInterval) and try again, until the attempt
// succeeds, acquireTimeout elapses (then acquire() rejects with TimeoutError)
// or acquireAttemptsLimit is reached. Nothing wakes a waiter when a holder
// releases (release is a plain ZREM), so each waiter issues about
// 1000 / (10 ms + round trip) EVALSHAs per second, forever, while it waits.
// Redis 7 counts the script's own redis.call()s in total_commands_processed
// as well, so a failed attempt is 3 server commands (EVALSHA,
// ZREMRANGEBYSCORE, ZCARD); idle mode also prints evalsha_per_second.
// The holder keeps its lease alive with a refresh every 0.8 * lockTimeout.
//
// Output: the "key: value" lines asked for, plus acquire_timeouts (contended:
// acquires that hit the default 10 s acquireTimeout and were retried) and
// evalsha_per_second (idle). Exit 0 on success, 1 on a failure or a safety
// violation, 2 on bad flags.
//
// The --url is required on purpose, so that the benchmark never hammers a
// shared redis on 6379 by accident.

const { setMaxListeners } = require('node:events');
const Redis = require('ioredis');
const { Semaphore, TimeoutError } = require('redis-semaphore');

const PROG = 'redis_semaphore_bench';
const USAGE = 'usage: redis_semaphore_bench.js contended|idle --url redis://HOST:PORT ' +
  '[--clients N --limit N | --waiters N] [--seconds S]';
const LOCK_TIMEOUT_MS = 60000; // lease ttl

// One AbortController stops every pending acquire() at the end of a run (each
// acquire adds one listener to it, hence no listener limit).
function stopSignal() {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  return controller;
}
const WARMUP_MS = 1000; // contended mode
const SETTLE_MS = 2000; // idle mode
const CONNECT_TIMEOUT_MS = 10000;

function usageError(message) {
  process.stderr.write(`${PROG}: ${message} (${USAGE})\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const mode = argv[0];
  if (mode === '-h' || mode === '--help') {
    process.stdout.write(USAGE + '\n');
    process.exit(0);
  }
  if (mode !== 'contended' && mode !== 'idle') {
    usageError(mode === undefined ? 'missing mode' : `unknown mode '${mode}'`);
  }
  const allowed = mode === 'contended'
    ? ['url', 'clients', 'limit', 'seconds']
    : ['url', 'waiters', 'seconds'];
  const opts = { mode, url: null, clients: 50, limit: 5, waiters: 100, seconds: 10 };
  const seen = new Set();
  for (let i = 1; i < argv.length; i += 2) {
    const flag = argv[i];
    const m = /^--([a-z]+)$/.exec(flag);
    if (!m || !allowed.includes(m[1])) usageError(`unknown flag '${flag}' for mode ${mode}`);
    const name = m[1];
    if (seen.has(name)) usageError(`flag --${name} given twice`);
    seen.add(name);
    const value = argv[i + 1];
    if (value === undefined) usageError(`flag --${name} needs a value`);
    if (name === 'url') {
      if (!/^rediss?:\/\//.test(value)) usageError(`--url must be redis://... or rediss://..., got '${value}'`);
      opts.url = value;
    } else if (name === 'seconds') {
      if (!/^[0-9]+(\.[0-9]+)?$/.test(value) || !(Number(value) > 0) || Number(value) > 86400) {
        usageError(`--seconds must be a positive number, got '${value}'`);
      }
      opts.seconds = Number(value);
    } else {
      if (!/^[1-9][0-9]{0,5}$/.test(value)) usageError(`--${name} must be a positive integer, got '${value}'`);
      opts[name] = Number(value);
    }
  }
  if (opts.url === null) usageError('--url is required');
  return opts;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// One ioredis connection per caller; URL parsing is ioredis' own.
function connect(url) {
  const client = new Redis(url);
  client.on('error', () => {}); // reported through the ready timeout / failed commands
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      client.disconnect();
      reject(new Error(`could not connect to ${url} within ${CONNECT_TIMEOUT_MS} ms`));
    }, CONNECT_TIMEOUT_MS);
    client.once('ready', () => {
      clearTimeout(timer);
      resolve(client);
    });
  });
}

async function connectMany(url, n) {
  const clients = [];
  // A few at a time: keeps connection setup gentle on a 2-core machine.
  for (let i = 0; i < n; i += 25) {
    const batch = [];
    for (let j = i; j < Math.min(n, i + 25); j++) batch.push(connect(url));
    clients.push(...(await Promise.all(batch)));
  }
  return clients;
}

async function quitAll(clients) {
  await Promise.race([
    Promise.allSettled(clients.map((c) => c.quit())),
    sleep(2000),
  ]);
  for (const c of clients) c.disconnect();
}

function parseInfo(text) {
  const out = {};
  for (const line of text.split(/\r?\n/)) {
    const idx = line.indexOf(':');
    if (idx > 0 && !line.startsWith('#')) out[line.slice(0, idx)] = line.slice(idx + 1);
  }
  return out;
}

async function contended(opts) {
  const key = 'bench';
  const observer = await connect(opts.url);
  await observer.del(`semaphore:${key}`);
  const clients = await connectMany(opts.url, opts.clients);
  const abort = stopSignal();

  let stopping = false;
  let measuring = false;
  let cycles = 0;
  let holders = 0;
  let maxHolders = 0;
  let timeouts = 0;

  async function loop(client) {
    // lockTimeout (lease ttl) 60 s; retryInterval, acquireTimeout and
    // acquireAttemptsLimit stay at the library defaults (see the top comment).
    const sem = new Semaphore(client, key, opts.limit, { lockTimeout: LOCK_TIMEOUT_MS });
    while (!stopping) {
      try {
        await sem.acquire(abort.signal);
      } catch (err) {
        if (stopping) break;
        if (err instanceof TimeoutError) { // default acquireTimeout (10 s) ran out: starved
          timeouts++;
          continue;
        }
        throw err;
      }
      // Observer: count holders from acquire's resolution to just before
      // release. JavaScript is single-threaded, so the "hold" yields to the
      // event loop once (setImmediate); otherwise no other client could ever
      // run while this one holds and the count would trivially stay at 1.
      holders++;
      if (holders > maxHolders) maxHolders = holders;
      await new Promise((resolve) => setImmediate(resolve));
      holders--;
      await sem.release();
      if (measuring) cycles++;
    }
  }

  const loops = clients.map((c) => loop(c));
  let failure = null;
  const failed = Promise.race(loops.map((p) => p.catch((err) => { failure = err; })));

  const warmupOrFail = Promise.race([sleep(WARMUP_MS), failed]);
  await warmupOrFail;
  const t0 = process.hrtime.bigint();
  measuring = true;
  await Promise.race([sleep(opts.seconds * 1000), failed]);
  measuring = false;
  const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
  const counted = cycles;

  stopping = true;
  abort.abort();
  await Promise.race([Promise.allSettled(loops), sleep(3000)]);
  if (failure) {
    process.stderr.write(`${PROG}: client failed: ${failure.message}\n`);
    await quitAll([observer, ...clients]);
    process.exit(1);
  }
  await observer.del(`semaphore:${key}`).catch(() => {});
  await quitAll([observer, ...clients]);

  process.stdout.write(
    `cycles: ${counted}\n` +
    `cycles_per_second: ${Math.round(counted / elapsed)}\n` +
    `max_concurrent_holders: ${maxHolders}\n` +
    `acquire_timeouts: ${timeouts}\n`);
  if (maxHolders > opts.limit) {
    process.stderr.write(`${PROG}: SAFETY VIOLATION: ${maxHolders} concurrent holders > limit ${opts.limit}\n`);
    process.exit(1);
  }
  process.exit(0);
}

async function idle(opts) {
  const key = 'bench-idle';
  const observer = await connect(opts.url);
  await observer.del(`semaphore:${key}`);

  const holderClient = await connect(opts.url);
  const holder = new Semaphore(holderClient, key, 1, { lockTimeout: LOCK_TIMEOUT_MS });
  await holder.acquire();

  const waiterClients = await connectMany(opts.url, opts.waiters);
  const abort = stopSignal();
  const waitMs = (SETTLE_MS / 1000 + opts.seconds + 60) * 1000; // longer than the run
  let stopping = false;
  let wrongAcquires = 0;
  let waiterErrors = 0;
  for (const client of waiterClients) {
    const sem = new Semaphore(client, key, 1, {
      lockTimeout: LOCK_TIMEOUT_MS,
      acquireTimeout: waitMs,
      acquireAttemptsLimit: Number.POSITIVE_INFINITY, // the default, spelled out
      // retryInterval: library default (10 ms)
    });
    sem.acquire(abort.signal).then(
      () => { if (!stopping) wrongAcquires++; },
      () => { if (!stopping) waiterErrors++; });
  }

  await sleep(SETTLE_MS);
  // One "INFO all" per sample (stats, cpu and commandstats in one command).
  // total_commands_processed is bumped after a command runs, so the start
  // sample does not count itself but the end sample counts the start one.
  const OBSERVER_COMMANDS_IN_WINDOW = 1;
  const before = parseInfo(await observer.info('all'));
  const t0 = process.hrtime.bigint();
  await sleep(opts.seconds * 1000);
  const after = parseInfo(await observer.info('all'));
  const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;

  stopping = true;
  abort.abort();
  const cpu = (i) => Number(i.used_cpu_sys) + Number(i.used_cpu_user);
  const commands = Number(after.total_commands_processed) -
    Number(before.total_commands_processed) - OBSERVER_COMMANDS_IN_WINDOW;
  const evalshaCalls = (i) => {
    const m = /calls=([0-9]+)/.exec(i.cmdstat_evalsha || '');
    return m ? Number(m[1]) : 0;
  };

  await holder.release().catch(() => {});
  await observer.del(`semaphore:${key}`).catch(() => {});
  await quitAll([observer, holderClient, ...waiterClients]);

  process.stdout.write(
    `waiters: ${opts.waiters}\n` +
    `commands_per_second: ${Math.round(commands / elapsed)}\n` +
    `redis_cpu_percent: ${((cpu(after) - cpu(before)) / elapsed * 100).toFixed(1)}\n` +
    `evalsha_per_second: ${Math.round((evalshaCalls(after) - evalshaCalls(before)) / elapsed)}\n`);
  if (wrongAcquires > 0 || waiterErrors > 0) {
    process.stderr.write(`${PROG}: ${wrongAcquires} waiter(s) acquired a held limit-1 semaphore, ` +
      `${waiterErrors} waiter(s) failed during the run\n`);
    process.exit(1);
  }
  process.exit(0);
}

const opts = parseArgs(process.argv.slice(2));
(opts.mode === 'contended' ? contended : idle)(opts).catch((err) => {
  process.stderr.write(`${PROG}: ${err && err.message ? err.message : err}\n`);
  process.exit(1);
});
