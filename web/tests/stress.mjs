#!/usr/bin/env node
// How the console holds up under a flood, in headless Chromium (the numbers in docs/console.md).
//
// Injected load: book diffs and trades generated inside the page and handed to its WebSocket
// handler, as fast as the page's timers allow, on a symbol whose book is otherwise quiet:
//
//   node web/tests/stress.mjs --url http://127.0.0.1:8080/ --symbol BTC-USD --inject 20000,3000
//
// Live load: the page watches a symbol that something else is trading (`rialto loadgen` trades
// LOADGEN) and, once the load stops, checks its book against GET /api/v1/book level for level:
//
//   node web/tests/stress.mjs --url http://127.0.0.1:8080/ --symbol LOADGEN --watch 20
//
// Prints messages per second, frames per second, the renderer's CPU (Linux: from /proc), book
// resynchronisations; exits 1 if the book ended out of sync or different from the server's.

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

const { values: opts } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.RIALTO_URL },
    symbol: { type: 'string', default: 'BTC-USD' },
    inject: { type: 'string' }, // "diffs per second,trades per second"
    watch: { type: 'string' }, // seconds
    seconds: { type: 'string', default: '5' },
    chromium: { type: 'string', default: process.env.CHROMIUM || '/usr/bin/chromium' },
  },
});
if (!opts.url || (!opts.inject && !opts.watch)) {
  console.error('usage: stress.mjs --url URL [--symbol S] (--inject DIFFS,TRADES | --watch SECONDS)');
  process.exit(2);
}
const BASE = opts.url.replace(/\/+$/, '');

/** CPU seconds used so far by every Chromium renderer process (0 where /proc is missing). */
function rendererCpuSeconds() {
  let pids = [];
  try {
    pids = execFileSync('pgrep', ['-f', '--', '--type=renderer']).toString().trim().split('\n');
  } catch {
    return 0;
  }
  let ticks = 0;
  for (const pid of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // gone, or not Linux
    }
  }
  return ticks / 100;
}

const FPS = `(async (ms) => {
  let frames = 0;
  const t0 = performance.now();
  let last = t0;
  let worst = 0;
  await new Promise((done) => {
    const f = (t) => {
      worst = Math.max(worst, t - last);
      last = t;
      if (performance.now() - t0 < ms) { frames++; requestAnimationFrame(f); } else done();
    };
    requestAnimationFrame(f);
  });
  return { fps: frames * 1000 / (performance.now() - t0), worstFrameMs: worst };
})`;

const browser = await chromium.launch({
  executablePath: opts.chromium,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
});
let exitCode = 0;
try {
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  page.on('pageerror', (e) => {
    console.log(`page error: ${e.message}`);
    exitCode = 1;
  });
  await page.goto(`${BASE}/#${opts.symbol}`);
  await page.waitForSelector('[data-testid="ladder"][data-synced="true"]');

  if (opts.inject) {
    const [diffs, trades] = opts.inject.split(',').map(Number);
    await page.evaluate(([diffsPerSec, tradesPerSec]) => {
      const r = window.rialto;
      const ch = r.state.symbol;
      let seq = r.state.book.seq;
      let tradeId = 1e12;
      const mid = r.state.book.asks.best ?? r.state.book.bids.best ?? 500000;
      window.stressInjected = 0;
      let last = performance.now();
      const tick = () => {
        const now = performance.now();
        const dt = (now - last) / 1000;
        last = now;
        for (let i = 0; i < Math.round(diffsPerSec * dt); i++) {
          const bids = [];
          const asks = [];
          for (let k = 0; k < 3; k++) {
            const off = 1 + Math.floor(Math.random() * 300);
            const qty = Math.random() < 0.2 ? 0 : 1 + Math.floor(Math.random() * 50);
            if (Math.random() < 0.5) bids.push([mid - off, qty]);
            else asks.push([mid + off, qty]);
          }
          r.feed.receive(JSON.stringify({ ch: `book.${ch}`, type: 'diff', first: seq + 1, last: seq + 3, bids, asks }));
          seq += 3;
          window.stressInjected++;
        }
        const n = Math.round(tradesPerSec * dt);
        if (n > 0) {
          const list = [];
          for (let i = 0; i < n; i++) {
            list.push({ trade: tradeId++, ts_ns: Date.now() * 1e6, price: mid + Math.floor(Math.random() * 20) - 10,
              qty: 1 + Math.floor(Math.random() * 9), taker_side: Math.random() < 0.5 ? 'buy' : 'sell' });
          }
          r.feed.receive(JSON.stringify({ ch: `trades.${ch}`, type: 'trades', trades: list }));
          window.stressInjected++;
        }
        setTimeout(tick, 10);
      };
      tick();
    }, [diffs, trades]);
    await page.waitForTimeout(1000);
    const seconds = Number(opts.seconds);
    const cpu0 = rendererCpuSeconds();
    const n0 = await page.evaluate(() => window.stressInjected);
    const t0 = Date.now();
    const frames = await page.evaluate(`${FPS}(${seconds * 1000})`);
    const elapsed = (Date.now() - t0) / 1000;
    const n1 = await page.evaluate(() => window.stressInjected);
    const cpu = (rendererCpuSeconds() - cpu0) / elapsed;
    const book = await page.evaluate(() => ({ synced: window.rialto.state.book.synced, gaps: window.rialto.stats.gaps }));
    console.log(`injected ${((n1 - n0) / elapsed).toFixed(0)} messages/s (asked ${diffs} diffs/s, ${trades} trades/s): ` +
      `${frames.fps.toFixed(1)} frames/s, worst frame ${frames.worstFrameMs.toFixed(0)} ms, ` +
      `renderer CPU ${cpu.toFixed(2)} cores, book synced ${book.synced}, resyncs ${book.gaps}`);
    if (!book.synced || book.gaps !== 0) exitCode = 1;
  } else {
    const seconds = Number(opts.watch);
    const cpu0 = rendererCpuSeconds();
    await page.evaluate(() => {
      window.stressMessages = 0;
      const receive = window.rialto.feed.receive.bind(window.rialto.feed);
      window.rialto.feed.receive = (text) => {
        window.stressMessages++;
        receive(text);
      };
    });
    const t0 = Date.now();
    const frames = await page.evaluate(`${FPS}(${seconds * 1000})`);
    const elapsed = (Date.now() - t0) / 1000;
    const cpu = (rendererCpuSeconds() - cpu0) / elapsed;
    const messages = await page.evaluate(() => window.stressMessages);
    console.log(`watched ${opts.symbol} for ${elapsed.toFixed(0)} s: ${(messages / elapsed).toFixed(0)} messages/s, ` +
      `${frames.fps.toFixed(1)} frames/s, worst frame ${frames.worstFrameMs.toFixed(0)} ms, renderer CPU ${cpu.toFixed(2)} cores`);
    // Once the server's book stops moving, the page's must be the same, level for level.
    let verdict = null;
    for (let attempt = 0; attempt < 60 && !verdict?.same; attempt++) {
      verdict = await page.evaluate(async (symbol) => {
        // The page counts in ticks and lots: the server's book in the same units.
        const rest = await fetch(`/api/v1/book/${symbol}?depth=1000&units=int`).then((r) => r.json());
        const book = window.rialto.state.book;
        const same = (levels, list) => levels.prices.length === list.length &&
          list.every(([p, q], i) => levels.prices[i] === p && levels.qty.get(p) === q);
        return { same: rest.seq === book.seq && same(book.bids, rest.bids) && same(book.asks, rest.asks),
          restSeq: rest.seq, pageSeq: book.seq, synced: book.synced, resyncs: window.rialto.stats.gaps,
          levels: [rest.bids.length, rest.asks.length] };
      }, opts.symbol);
      if (!verdict.same) await page.waitForTimeout(500);
    }
    console.log(`book: ${JSON.stringify(verdict)}`);
    if (!verdict.same || !verdict.synced) exitCode = 1;
  }
} finally {
  await browser.close();
}
process.exit(exitCode);
