// bench/bullmq/cron.js: cron-parser (the package BullMQ's job schedulers
// compute their next times with; bench/bullmq installs it with BullMQ), the
// peer of hwtimer.cron in bench/cron.lua, which runs this script and reads
// its lines. For each expression and zone: nanoseconds a next() when each
// call starts where the last one's time was (a schedule's runs, one after
// another), nanoseconds to parse and take the first time (a schedule made
// or changed), and the first COMPARE times, for the Lua side to compare.
//   node bench/bullmq/cron.js START N COMPARE EXPR TZ [EXPR TZ ...]
'use strict';

const path = require('path');
const { performance } = require('perf_hooks');
const parser = require(path.join(__dirname, 'node_modules', 'cron-parser'));

const [start, n, compare] = process.argv.slice(2, 5).map(Number);
const cases = process.argv.slice(5);

function nsPerNext(expr, tz) {
  const it = parser.parseExpression(expr, { currentDate: new Date(start * 1000), tz });
  const t0 = performance.now();
  for (let i = 0; i < n; i++) it.next();
  return (performance.now() - t0) * 1e6 / n;
}

function nsPerFirst(expr, tz) {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    parser.parseExpression(expr, { currentDate: new Date((start + i * 61) * 1000), tz }).next();
  }
  return (performance.now() - t0) * 1e6 / n;
}

for (let i = 0; i < cases.length; i += 2) {
  const expr = cases[i], tz = cases[i + 1];
  nsPerNext(expr, tz); // warm: the JIT's first pass is not the figure
  nsPerFirst(expr, tz);
  const next = Math.min(nsPerNext(expr, tz), nsPerNext(expr, tz));
  const first = Math.min(nsPerFirst(expr, tz), nsPerFirst(expr, tz));
  const it = parser.parseExpression(expr, { currentDate: new Date(start * 1000), tz });
  const times = [];
  for (let j = 0; j < compare; j++) times.push(Math.round(it.next().getTime() / 1000));
  console.log(`case=${i / 2 + 1} next_ns=${next.toFixed(0)} first_ns=${first.toFixed(0)} times=${times.join(',')}`);
}
