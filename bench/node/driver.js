'use strict';
/*
 * Node bench driver (node-redlock 4 on ioredis): the protocol of bench/c/common.h.
 *   node driver.js redlock pairs   URIS START_NS SLICE_NS PERIOD_NS COUNT KEY
 *   node driver.js redlock contend URIS START_NS END_NS KEY HOLD_US THINK_US LOG MARKER ID
 *   node driver.js redlock hold    URIS COUNT TTL_MS
 *   node driver.js redlock renew   URIS COUNT TTL_MS
 * One ioredis client per node. Single attempts use retryCount 0; waiting uses
 * redlock's default retryDelay 200 ms / retryJitter 100 ms with retryCount -1
 * (wait without limit: the default 10 attempts would give up under contention).
 */
const fs = require('fs');
const Redis = require('ioredis');
const Redlock = require('redlock');

const now = () => process.hrtime.bigint();           // CLOCK_MONOTONIC
const cell = new Int32Array(new SharedArrayBuffer(4));
const sleepUs = (us) => { if (us > 0) Atomics.wait(cell, 0, 0, us / 1000); };

function pct(v, p) {
  if (!v.length) return -1;
  v.sort((a, b) => a - b);
  return v[Math.round(p * (v.length - 1))] / 1000;
}

async function main() {
  const [, , impl, mode, uris, ...a] = process.argv;
  if (impl !== 'redlock') throw new Error('unknown impl ' + impl);
  const clients = uris.split(',').map((u) => {
    const x = new URL(u);
    return new Redis({ host: x.hostname, port: Number(x.port), lazyConnect: false });
  });
  await Promise.all(clients.map((c) => c.ping()));
  const once = new Redlock(clients, { retryCount: 0 });
  const waiting = new Redlock(clients, { retryCount: -1 });
  once.on('clientError', () => {});
  waiting.on('clientError', () => {});
  const tryLock = async (key, ttl) => { try { return await once.lock(key, ttl); } catch (e) { return null; } };
  const release = async (l) => { try { await l.unlock(); return true; } catch (e) { return false; } };
  const waitUntil = (t) => { const n = now(); if (n > t) return 1; sleepUs(Number((t - n) / 1000n)); return 0; };

  if (mode === 'pairs') {
    // windows k: [START + k*PERIOD, +SLICE), taking turns with the other
    // implementations of the group (see bench/c/common.h)
    const start = BigInt(a[0]), slice = BigInt(a[1]), period = BigInt(a[2]), count = Number(a[3]), key = a[4];
    for (let w = 0; w < 100; w++) await release(await tryLock(key, 30000));
    const lat = [], counts = [];
    let errors = 0, late = 0, cpu = 0;
    for (let k = 0; k < count; k++) {
      const ws = start + BigInt(k) * period, we = ws + slice;
      if (now() >= we) { counts.push(-1); late = 1; continue; }
      waitUntil(ws);
      let pairs = 0, t;
      const c0 = process.cpuUsage();
      while ((t = now()) < we) {
        const l = await tryLock(key, 30000);
        lat.push(Number(now() - t));
        if (!l || !(await release(l))) { errors++; continue; }
        pairs++;
      }
      const c1 = process.cpuUsage(c0);
      cpu += (c1.user + c1.system) * 1000;
      counts.push(pairs);
    }
    console.log(`impl=${clients.length > 1 ? 'redlock-n' : 'redlock'} slice_s=${(Number(slice) / 1e9).toFixed(6)} ` +
      `p50_us=${pct(lat, 0.5).toFixed(1)} p99_us=${pct(lat, 0.99).toFixed(1)} late=${late} errors=${errors} cpu_ns=${cpu} pairs=${counts.join(',')}`);
  } else if (mode === 'contend') {
    const start = BigInt(a[0]), end = BigInt(a[1]), key = a[2];
    const hold = Number(a[3]), think = Number(a[4]), logf = a[5], markf = a[6], id = BigInt(a[7]);
    const fd = fs.openSync(markf, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600);
    const buf = Buffer.alloc(8);
    let overlaps = 0, errors = 0;
    const log = [];
    const late = waitUntil(start);
    while (now() < end) {
      const treq = now();
      const l = await waiting.lock(key, 10000);
      const tacq = now();
      if (fs.readSync(fd, buf, 0, 8, 0) === 8 && buf.readBigInt64LE(0) !== 0n) overlaps++;
      buf.writeBigInt64LE(id, 0); fs.writeSync(fd, buf, 0, 8, 0);
      sleepUs(hold);
      fs.readSync(fd, buf, 0, 8, 0);
      if (buf.readBigInt64LE(0) !== id) overlaps++;
      buf.writeBigInt64LE(0n, 0); fs.writeSync(fd, buf, 0, 8, 0);
      const trel = now();
      if (!(await release(l))) errors++;
      log.push(`${treq} ${tacq} ${trel}\n`);
      sleepUs(think);
    }
    fs.writeFileSync(logf, log.join(''));
    console.log(`impl=redlock cs=${log.length} overlaps=${overlaps} late=${late} errors=${errors}`);
  } else if (mode === 'hold') {
    const count = Number(a[0]), ttl = Number(a[1]);
    let held = 0;
    for (let i = 0; i < count; i++) if (await tryLock(`bench:hold:${i}`, ttl)) held++;
    console.log(`ready held=${held}`);
    process.stdin.once('data', () => process.exit(0));
    process.stdin.once('end', () => process.exit(0));
    return;
  } else if (mode === 'renew') {
    // node-redlock 4 has no watchdog: the caller extends every lock itself each
    // period; all extensions are issued at once, so ioredis pipelines them
    const count = Number(a[0]), ttl = Number(a[1]);
    const locks = [];
    for (let i = 0; i < count; i++) { const l = await tryLock(`bench:renew:${i}`, ttl); if (l) locks.push(l); }
    console.log(`ready held=${locks.length}`);
    let lost = 0, rounds = 0, stop = false;
    const finish = () => { stop = true; console.log(`impl=redlock rounds=${rounds} lost=${lost}`); process.exit(0); };
    process.stdin.once('data', finish);
    process.stdin.once('end', finish);
    const period = ttl / 3;
    let next = Date.now() + period;
    while (!stop) {
      await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
      if (stop) break;
      const res = await Promise.allSettled(locks.map((l) => l.extend(ttl)));
      lost += res.filter((r) => r.status !== 'fulfilled').length;
      rounds++;
      next += period;
    }
    return;
  } else {
    throw new Error('unknown mode ' + mode);
  }
  clients.forEach((c) => c.disconnect());
}

main().catch((e) => { console.error('bench node driver:', e.message); process.exit(1); });
