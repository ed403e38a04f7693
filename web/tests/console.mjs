#!/usr/bin/env node
// The web console in a real browser (Debian's Chromium, headless), against a fresh
// `rialto serve --demo`: user 1 rests a sell, sees it on the ladder and in its open orders; user 2
// (a second browser context) crosses it; both tapes show the trade; user 1's order, the ladder
// and both users' balances move by exactly what the rules say; user 1 amends and cancels the
// rest, then places a pending stop-limit GTD order and an iceberg; a signed REST call from here
// checks the server agrees; the admin view shows users, takes a snapshot, books a deposit, draws
// the latency histograms from /metrics, sets a band, a reference price, the order-id window,
// suspends and resumes a user, and runs an opening auction that both traders' pages follow.
// On the way: the order form's % of balance and total, the market list's last price and 24 h
// change, the order history and fills, the candle interval selector (its request) and zoom, a
// symbol picked in the market list, and the layout at 360, 768 and 1440 px (no horizontal
// overflow, every panel and control within the viewport), photographed at each width.
// Prints every step, saves the screenshots, and exits 0 only if every step passed.
//
//   node web/tests/console.mjs --url http://127.0.0.1:8080/ --secret1 S1 --secret2 S2 \
//     [--admin-secret A] --screenshot console.png [--chromium /usr/bin/chromium]
//
// Each option can also come from the environment: RIALTO_URL, RIALTO_SECRET1, RIALTO_SECRET2,
// RIALTO_ADMIN_SECRET, RIALTO_SCREENSHOT, CHROMIUM.

import { createHmac } from 'node:crypto';
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

const { values: opts } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.RIALTO_URL },
    secret1: { type: 'string', default: process.env.RIALTO_SECRET1 },
    secret2: { type: 'string', default: process.env.RIALTO_SECRET2 },
    'admin-secret': { type: 'string', default: process.env.RIALTO_ADMIN_SECRET },
    screenshot: { type: 'string', default: process.env.RIALTO_SCREENSHOT },
    chromium: { type: 'string', default: process.env.CHROMIUM || '/usr/bin/chromium' },
    symbol: { type: 'string', default: 'BTC-USD' },
    timeout: { type: 'string', default: '15000' },
  },
});

for (const required of ['url', 'secret1', 'secret2', 'screenshot']) {
  if (!opts[required]) {
    console.error(`missing --${required} (see the header of web/tests/console.mjs)`);
    process.exit(2);
  }
}
if (!existsSync(opts.chromium)) {
  console.error(`no Chromium at ${opts.chromium}: apt-get install -y chromium (or pass --chromium)`);
  process.exit(2);
}

const BASE = opts.url.replace(/\/+$/, '');
const TIMEOUT_MS = Number(opts.timeout);
const SYMBOL = opts.symbol;
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

// The trade: user 1 rests 3 lots at 5000.00; user 2 bids 5100.00 for 2 and is filled at 5000.00.
const SELL_PRICE = '5000.00';
const SELL_QTY = '0.003';
const BUY_PRICE = '5100.00';
const BUY_QTY = '0.002';
const MOVE_PRICE = '5001.00';
const ONE_LOT = '0.001';
// The amend: a new price and a total of 4 lots (2 filled, so 2 left).
const AMEND_TOTAL = '0.004';
// A stop-limit buy that waits above the last trade, and an iceberg sell far from the book.
const STOP_PRICE = '5200.00';
const STOP_LIMIT = '5210.00';
const ICEBERG_PRICE = '5600.00';
const ICEBERG_QTY = '0.010';
const ICEBERG_SHOWN = '0.002';
// The opening auction: a sell and a buy that cross each other only (the book then holds bids up
// to 4992.00 and asks from 5002.00); the uncross price is the reference, 5000.00, clamped into
// [4995.00, 4998.00] (docs/rules.md, "The uncross").
const AUCTION_SELL = '4995.00';
const AUCTION_BUY = '4998.00';
const REFERENCE = '5000.00';
const BAND_BPS = 1000;
// A future the operator lists (docs/api.md, "Futures"): its price and mark, and the mark it
// moves to; margins per lot in quote minor units.
const FUTURE = 'IDX-PERP';
const FUTURE_PRICE = '5000.00';
const FUTURE_MARK = '5100.00';
const FUTURE_QTY = '0.002';

let stepNumber = 0;
let failed = false;
const pageErrors = [];

async function step(description, body) {
  stepNumber += 1;
  const n = stepNumber;
  const started = Date.now();
  try {
    const detail = await body();
    console.log(`ok step ${n}: ${description}${detail ? ` (${detail})` : ''} [${Date.now() - started} ms]`);
  } catch (error) {
    console.log(`FAIL step ${n}: ${description}: ${error && error.message ? error.message : error}`);
    throw error;
  }
}

function check(condition, message) {
  if (!condition) throw new Error(message);
}

/** Decimal text -> integer units of `unit` ("5000.00" with "0.01" -> 500000), exactly. */
function toUnits(text, unit) {
  const split = (t) => {
    const [i, f = ''] = t.split('.');
    return { digits: BigInt(i + f), scale: f.length };
  };
  const v = split(text);
  const u = split(unit);
  const num = v.digits * 10n ** BigInt(u.scale);
  const den = u.digits * 10n ** BigInt(v.scale);
  if (num % den !== 0n) throw new Error(`${text} is not a multiple of ${unit}`);
  return Number(num / den);
}

/** Integer units of `unit` -> decimal text (1000 with "0.01" -> "10.00"), exactly. */
function fromUnits(units, unit) {
  const [i, f = ''] = unit.split('.');
  const text = (BigInt(units) * BigInt(i + f)).toString().padStart(f.length + 1, '0');
  return f.length ? `${text.slice(0, -f.length)}.${text.slice(-f.length)}` : text;
}

// Signed REST from here, independently of the console's own signing code.
let lastTs = 0;
/** The test checks the engine's integers (docs/api.md "Units": units=int), as the console asks. */
function intUnits(path) {
  return `${path}${path.includes('?') ? '&' : '?'}units=int`;
}

async function signedRest(key, secret, method, target, bodyObject, retry = true) {
  const pathAndQuery = intUnits(target);
  const body = bodyObject === undefined ? '' : JSON.stringify(bodyObject);
  // A later timestamp each time: the same request twice in one millisecond would be a replay.
  const ts = Math.max(Date.now(), lastTs + 1);
  lastTs = ts;
  const sig = createHmac('sha256', secret)
    .update(`${key}\n${ts}\n\n${method}\n${pathAndQuery}\n${body}`)
    .digest('hex');
  const response = await fetch(BASE + pathAndQuery, {
    method,
    headers: {
      'Rialto-Key': key,
      'Rialto-Timestamp': String(ts),
      'Rialto-Signature': sig,
      ...(body ? { 'Content-Type': 'application/json' } : {}),
    },
    body: body || undefined,
  });
  const text = await response.text();
  // The browser pages sign with the same keys: one may have sent this very request this ms.
  if (response.status === 401 && text.includes('replayed_request') && retry) {
    return signedRest(key, secret, method, target, bodyObject, false);
  }
  if (!response.ok) throw new Error(`${method} ${pathAndQuery}: HTTP ${response.status} ${text}`);
  return JSON.parse(text);
}

async function publicGet(path) {
  const response = await fetch(BASE + intUnits(path));
  const text = await response.text();
  if (!response.ok) throw new Error(`GET ${path}: HTTP ${response.status} ${text}`);
  return JSON.parse(text);
}

/** A public GET in the API's default units (decimal strings), as the market list asks. */
async function publicGetDecimal(path) {
  const response = await fetch(BASE + path);
  const text = await response.text();
  if (!response.ok) throw new Error(`GET ${path}: HTTP ${response.status} ${text}`);
  return JSON.parse(text);
}

/** The widths the layout is checked and photographed at: a phone, a tablet, a desktop. */
const LAYOUT_WIDTHS = [360, 768, 1440];

/**
 * Lays the page out `width` px wide and lists what overflows: the page wider than the viewport
 * (a horizontal scrollbar), a panel reaching past either edge, or a control (button, field,
 * heading) cut off by its panel's edge outside the boxes that scroll (`.pane`, `.scroll-x`).
 */
async function layoutProblems(page, width) {
  await page.setViewportSize({ width, height: 900 });
  await page.waitForFunction((w) => document.documentElement.clientWidth <= w && window.innerWidth === w, width);
  // Two frames: the resize observers and the charts have drawn at the new size.
  await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
  return page.evaluate(() => {
    const problems = [];
    const doc = document.documentElement;
    const viewport = doc.clientWidth;
    if (doc.scrollWidth > viewport) problems.push(`the page is ${doc.scrollWidth} px wide in a ${viewport} px viewport`);
    const name = (node) => `${node.tagName.toLowerCase()}${node.id ? `#${node.id}` : ''}.${[...node.classList].join('.')}`;
    for (const panel of document.querySelectorAll('header.topbar, main:not([hidden]) > .panel')) {
      const box = panel.getBoundingClientRect();
      if (box.left < -0.5 || box.right > viewport + 0.5) {
        problems.push(`${name(panel)} spans ${box.left.toFixed(0)}..${box.right.toFixed(0)} px`);
      }
      for (const node of panel.querySelectorAll('button, input, select, h2, label, .stat')) {
        if (node.offsetParent === null || node.closest('.pane, .scroll-x')) continue;
        const r = node.getBoundingClientRect();
        if (r.left < box.left - 0.5 || r.right > box.right + 0.5) {
          problems.push(`${name(node)} in ${name(panel)} spans ${r.left.toFixed(0)}..${r.right.toFixed(0)} px, its panel ${box.left.toFixed(0)}..${box.right.toFixed(0)}`);
        }
      }
    }
    return problems;
  });
}

/** The screenshot path for `what` beside --screenshot (web_console.png -> web_console-360.png). */
function shotPath(what) {
  return opts.screenshot.replace(/(\.png)?$/, `-${what}.png`);
}

async function openConsole(browser, name, symbol = SYMBOL) {
  const context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT_MS);
  page.on('pageerror', (error) => pageErrors.push(`${name}: ${error.message}`));
  page.on('console', (message) => {
    // An HTTP error answer is logged by the browser as "Failed to load resource"; the steps
    // check what the page made of it. Anything else logged as an error is a fault.
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) {
      pageErrors.push(`${name} console: ${message.text()}`);
    }
  });
  await page.goto(`${BASE}/#${symbol}`);
  await page.waitForSelector('body[data-ready="true"]');
  await page.waitForSelector('[data-testid="ladder"][data-synced="true"]');
  return page;
}

async function login(page, key, secret) {
  await page.getByTestId('login-key').fill(key);
  await page.getByTestId('login-secret').fill(secret);
  await page.getByTestId('login-button').click();
  const status = page.getByTestId('login-status');
  await page.waitForFunction(
    () => /logged in|failed/.test(document.querySelector('[data-testid="login-status"]').textContent),
  );
  const text = await status.textContent();
  check(text.startsWith('logged in'), `login as ${key}: ${text}`);
  check((await page.getByTestId('login-secret').inputValue()) === '', 'the secret field was not cleared');
}

/** Places an order through the form; `extra` may give type, tif, stop, display and expiry. */
async function placeOrder(page, side, price, qty, extra = {}) {
  await page.getByTestId('order-side').selectOption(side);
  await page.getByTestId('order-type').selectOption(extra.type || 'limit');
  await page.getByTestId('order-tif').selectOption(extra.tif || 'gtc');
  await page.getByTestId('order-price').fill(price);
  await page.getByTestId('order-qty').fill(qty);
  if (extra.stop) await page.getByTestId('order-stop').fill(extra.stop);
  if ((extra.type || 'limit') === 'limit') await page.getByTestId('order-display').fill(extra.display || '');
  if (extra.expiry) await page.getByTestId('order-expiry').fill(extra.expiry);
  await page.getByTestId('order-status').evaluate((node) => {
    node.textContent = '';
  });
  await page.getByTestId('place-button').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="order-status"]').textContent.length > 0 &&
    !document.querySelector('[data-testid="order-status"]').textContent.startsWith('sending'));
  const text = await page.getByTestId('order-status').textContent();
  // The place answer says what became of the order (docs/api.md, "Client order ids").
  check(/^(new|partially_filled|filled) order/.test(text), `${side} ${qty} @ ${price}: ${text}`);
  return Number(/order (-?\d+)/.exec(text)[1]);
}

/** An open order's row (its data-* attributes) once `wanted` (attribute -> text) all hold. */
async function waitForOrderRow(page, order, wanted) {
  try {
    await page.waitForFunction(
      ([o, w]) => {
        const row = document.querySelector(`[data-testid="open-order"][data-order="${o}"]`);
        return row && Object.entries(w).every(([k, v]) => row.dataset[k] === String(v));
      },
      [order, wanted],
    );
  } catch {
    const now = await page.$$eval('[data-testid="open-order"]', (rows) => rows.map((r) => ({ ...r.dataset })));
    throw new Error(`order ${order}: expected ${JSON.stringify(wanted)}, open orders show ${JSON.stringify(now)}`);
  }
  return page.locator(`[data-testid="open-order"][data-order="${order}"]`);
}

/** Submits one admin control and returns the venue's answer shown under the controls. */
async function control(admin, fill, button, expect) {
  for (const [testid, value] of Object.entries(fill)) {
    const node = admin.getByTestId(testid);
    if ((await node.evaluate((n) => n.tagName)) === 'SELECT') await node.selectOption(value);
    else await node.fill(value);
  }
  await admin.getByTestId('control-status').evaluate((node) => {
    node.textContent = '';
  });
  await admin.getByTestId(button).click();
  await admin.waitForFunction(() => {
    const text = document.querySelector('[data-testid="control-status"]').textContent;
    return text !== '' && !text.endsWith('sending…');
  });
  const text = (await admin.getByTestId('control-status').textContent()).trim();
  check(text.includes(expect), `${button}: expected "${expect}", the page says "${text}"`);
  return text;
}

/**
 * The local "YYYY-MM-DDTHH:MM:SS" a datetime-local field takes, about `ms` from now, at 30 s
 * past the minute (the browser writes a time at :00 without its seconds).
 */
function localInput(msFromNow) {
  const d = new Date(Date.now() + msFromNow);
  d.setSeconds(30);
  const two = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}T${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

/** Balances shown on the page: currency -> { available, held } (integers, minor units). */
async function shownBalances(page) {
  return page.$$eval('[data-testid="balance-row"]', (rows) =>
    Object.fromEntries(
      rows.map((r) => [r.dataset.currency, { available: Number(r.dataset.available), held: Number(r.dataset.held) }]),
    ),
  );
}

async function waitForBalance(page, currency, field, expected) {
  try {
    await page.waitForFunction(
      ([c, f, v]) => {
        const row = document.querySelector(`[data-testid="balance-row"][data-currency="${c}"]`);
        return row && row.dataset[f] === String(v);
      },
      [currency, field, expected],
    );
  } catch {
    const now = await shownBalances(page);
    throw new Error(`${currency} ${field}: expected ${expected}, page shows ${JSON.stringify(now[currency])}`);
  }
}

async function ladderRow(page, side, priceTicks) {
  return page.locator(`[data-testid="ladder-${side}"][data-price="${priceTicks}"]`);
}

async function main() {
  const symbols = await publicGet('/api/v1/symbols');
  const info = symbols.find((s) => s.symbol === SYMBOL);
  check(info, `${SYMBOL} is not among the venue's symbols`);
  const sellTicks = toUnits(SELL_PRICE, info.price_tick);
  const sellLots = toUnits(SELL_QTY, info.qty_lot);
  const buyLots = toUnits(BUY_QTY, info.qty_lot);
  const moveTicks = toUnits(MOVE_PRICE, info.price_tick);
  const restLots = sellLots - buyLots;

  const book = await publicGet(`/api/v1/book/${SYMBOL}?depth=1`);
  const bestAsk = book.asks.length ? book.asks[0][0] : null;
  const bestBid = book.bids.length ? book.bids[0][0] : null;
  check(
    (bestAsk === null || bestAsk > toUnits(BUY_PRICE, info.price_tick)) && (bestBid === null || bestBid < sellTicks),
    `the ${SYMBOL} book is not clear around ${SELL_PRICE}..${BUY_PRICE}: run against a fresh demo venue`,
  );

  const browser = await chromium.launch({ executablePath: opts.chromium, args: CHROMIUM_ARGS });
  let page1 = null;
  let admin = null;
  try {
    let page2;
    await step(`Chromium ${browser.version()} opens the console at ${BASE}/ and syncs the ${SYMBOL} book`, async () => {
      page1 = await openConsole(browser, 'user1');
      const selected = await page1.getByTestId('symbol-select').inputValue();
      check(selected === SYMBOL, `symbol selector shows ${selected}`);
      await page1.waitForFunction(() => document.querySelector('[data-testid="conn-status"]').textContent === 'live');
      // The status channel: the symbol is trading continuously; the demo's 10% band waits
      // for its first reference price.
      await page1.waitForSelector('[data-testid="phase"][data-phase="continuous"]');
      await page1.waitForFunction(() => document.querySelector('[data-testid="band"]').textContent === '±10.00% (no reference yet)');
      const options = await page1.$$eval('[data-testid="symbol-select"] option', (o) => o.map((x) => x.value));
      return `symbols ${options.join(', ')}, phase continuous, band ±10% without a reference yet`;
    });

    let before1;
    await step('user 1 logs in and sees balances and no open orders', async () => {
      await login(page1, '1', opts.secret1);
      await page1.waitForSelector('[data-testid="balance-row"]');
      before1 = await shownBalances(page1);
      const rest = await signedRest('1', opts.secret1, 'GET', '/api/v1/balances');
      for (const b of rest) {
        check(before1[b.currency], `the page shows no ${b.currency} balance`);
        check(before1[b.currency].available === b.available, `${b.currency} available differs from REST`);
      }
      check((await page1.getByTestId('open-order').count()) === 0, 'user 1 already has open orders');
      // Shown in each currency's decimals (exchange-info), exactly: the demo's 10^12 USD minor
      // units are 10,000,000.00000 USD.
      const info = await publicGet('/api/v1/exchange-info');
      for (const c of info.currencies) {
        const cell = page1.locator(`[data-testid="balance-row"][data-currency="${c.currency}"] td:nth-child(2)`);
        const text = await cell.textContent();
        const expected = fromUnits(before1[c.currency].available, c.minor_unit);
        check(text.replaceAll(',', '') === expected, `${c.currency} shows ${text}, not ${expected}`);
      }
      return Object.keys(before1).join(', ');
    });

    await step('the order form fills the quantity from a % of the available balance, in whole lots, and shows the total', async () => {
      const currencies = Object.fromEntries((await publicGet('/api/v1/exchange-info')).currencies.map((c) => [c.currency, c]));
      const quoteUnit = currencies[info.quote].minor_unit;
      const totalText = async () => (await page1.getByTestId('order-total').textContent()).replaceAll(',', '');
      // A sell of 100% of the base: every whole lot of it (a lot holds base_scale minor units).
      await page1.getByTestId('order-side').selectOption('sell');
      await page1.getByTestId('order-type').selectOption('limit');
      await page1.getByTestId('order-price').fill(SELL_PRICE);
      await page1.locator('[data-testid="order-percent"] [data-percent="100"]').click();
      const sellLotsAll = BigInt(before1[info.base].available) / BigInt(info.base_scale);
      const sellQtyAll = fromUnits(sellLotsAll, info.qty_lot);
      await page1.waitForFunction((q) => document.querySelector('[data-testid="order-qty"]').value === q, sellQtyAll);
      const sellTotal = fromUnits(BigInt(sellTicks) * sellLotsAll * BigInt(info.quote_scale), quoteUnit);
      check(await totalText() === `${sellTotal} ${info.quote}`, `total reads ${await totalText()}, expected ${sellTotal} ${info.quote}`);
      // A buy of 25% of the quote at 5000.00: the hold of a lot is price x quote_scale + taker fee.
      await page1.getByTestId('order-side').selectOption('buy');
      await page1.locator('[data-testid="order-percent"] [data-percent="25"]').click();
      const perLot = BigInt(sellTicks) * BigInt(info.quote_scale) + BigInt(Math.max(0, info.taker_fee));
      const buyLotsQuarter = (BigInt(before1[info.quote].available) * 25n) / 100n / perLot;
      const buyQtyQuarter = fromUnits(buyLotsQuarter, info.qty_lot);
      await page1.waitForFunction((q) => document.querySelector('[data-testid="order-qty"]').value === q, buyQtyQuarter);
      const buyTotal = fromUnits(BigInt(sellTicks) * buyLotsQuarter * BigInt(info.quote_scale), quoteUnit);
      check(await totalText() === `${buyTotal} ${info.quote}`, `total reads ${await totalText()}, expected ${buyTotal} ${info.quote}`);
      await page1.getByTestId('order-qty').fill('');
      await page1.getByTestId('order-price').fill('');
      return `100% sell ${sellQtyAll}, 25% buy ${buyQtyQuarter} = ${buyTotal} ${info.quote}`;
    });

    let order1;
    await step(`user 1 places a limit sell of ${SELL_QTY} ${info.base} at ${SELL_PRICE}`, async () => {
      order1 = await placeOrder(page1, 'sell', SELL_PRICE, SELL_QTY);
      const row = page1.locator(`[data-testid="open-order"][data-order="${order1}"]`);
      await row.waitFor();
      await page1.waitForFunction(
        ([o, p, q]) => {
          const r = document.querySelector(`[data-testid="open-order"][data-order="${o}"]`);
          return r && r.dataset.price === String(p) && r.dataset.remaining === String(q);
        },
        [order1, sellTicks, sellLots],
      );
      const text = await row.textContent();
      check(text.includes(SELL_PRICE) && text.includes(SELL_QTY), `open order row reads ${text}`);
      return `order ${order1}`;
    });

    await step('the ask appears on the ladder, in the BBO header and in the depth chart', async () => {
      const row = await ladderRow(page1, 'ask', sellTicks);
      await page1.waitForSelector(`[data-testid="ladder-ask"][data-price="${sellTicks}"][data-qty="${sellLots}"]`);
      const text = await row.innerText();
      check(text.includes(SELL_PRICE) && text.includes(SELL_QTY), `ladder row reads ${text}`);
      check(await row.evaluate((n) => n.classList.contains('is-mine')), 'the ladder does not mark the level as ours');
      await page1.waitForFunction((p) => document.querySelector('[data-testid="bbo-ask"]').textContent === p, SELL_PRICE);
      await page1.waitForFunction(() => Number(document.querySelector('[data-testid="depth"]').dataset.askLevels) >= 1);
      return text.replace(/\s+/g, ' ').trim();
    });

    await step('user 1 balances show the hold', async () => {
      const held = sellLots * info.base_scale;
      await waitForBalance(page1, info.base, 'held', before1[info.base].held + held);
      await waitForBalance(page1, info.base, 'available', before1[info.base].available - held);
      return `${info.base} held +${held}`;
    });

    let before2;
    await step(`user 2 (a second browser context) logs in and buys ${BUY_QTY} at ${BUY_PRICE}, crossing`, async () => {
      page2 = await openConsole(browser, 'user2');
      await login(page2, '2', opts.secret2);
      await page2.waitForSelector('[data-testid="balance-row"]');
      before2 = await shownBalances(page2);
      const order2 = await placeOrder(page2, 'buy', BUY_PRICE, BUY_QTY);
      return `order ${order2}`;
    });

    await step('the trade is on both tapes at the resting price, taker side buy', async () => {
      for (const page of [page1, page2]) {
        const selector = `[data-testid="tape-row"][data-price="${sellTicks}"][data-qty="${buyLots}"][data-side="buy"]`;
        await page.waitForSelector(selector);
        const text = await page.locator(selector).first().textContent();
        check(text.includes(SELL_PRICE) && text.includes(BUY_QTY), `tape row reads ${text}`);
      }
      await page1.waitForFunction((p) => document.querySelector('[data-testid="last-price"]').textContent === p, SELL_PRICE);
      return `last ${SELL_PRICE}`;
    });

    await step('the market list shows every symbol, with the trade as the last price and its 24 h change', async () => {
      const rows = await page1.$$eval('[data-testid="market-row"]', (r) => r.map((x) => x.dataset.symbol));
      check(JSON.stringify(rows) === JSON.stringify(symbols.map((s) => s.symbol)), `the market list shows ${rows.join(', ')}`);
      const row = page1.locator(`[data-testid="market-row"][data-symbol="${SYMBOL}"]`);
      await page1.waitForSelector(`[data-testid="market-row"][data-symbol="${SYMBOL}"][data-last="${SELL_PRICE}"]`);
      const ticker = await publicGetDecimal(`/api/v1/ticker/24h?symbol=${SYMBOL}`);
      check(ticker.last === SELL_PRICE, `the ticker says last ${ticker.last}`);
      await page1.waitForSelector(`[data-testid="market-row"][data-symbol="${SYMBOL}"][data-change="${ticker.change_percent}"]`);
      const text = (await row.innerText()).replace(/\s+/g, ' ').trim();
      check(text.includes(SELL_PRICE) && text.includes(`${ticker.change_percent}%`), `the market row reads ${text}`);
      return text;
    });

    await step(`user 1's order and the ladder show the ${restLots}-lot rest; user 2 has no open order`, async () => {
      await page1.waitForSelector(`[data-testid="open-order"][data-order="${order1}"][data-remaining="${restLots}"]`);
      await page1.waitForSelector(`[data-testid="ladder-ask"][data-price="${sellTicks}"][data-qty="${restLots}"]`);
      await page2.waitForSelector(`[data-testid="ladder-ask"][data-price="${sellTicks}"][data-qty="${restLots}"]`);
      await page2.waitForFunction(() => document.querySelectorAll('[data-testid="open-order"]').length === 0);
      await page1.locator('.subtab[data-pane="fills-pane"]').click();
      await page1.waitForSelector('[data-testid="fill-row"]');
      const fill = await page1.getByTestId('fill-row').first().innerText();
      await page1.locator('.subtab[data-pane="open-orders-pane"]').click();
      check(fill.includes(SELL_PRICE) && fill.includes('maker'), `user 1's fill reads ${fill}`);
      return fill.replace(/\s+/g, ' ').trim();
    });

    await step('order history lists user 1\'s order as placed and filled; the fills panel is the history\'s', async () => {
      await page1.getByTestId('history-tab').click();
      const placed = `[data-testid="history-row"][data-type="accepted"][data-kind="place"][data-order="${order1}"]`;
      const filled = `[data-testid="history-row"][data-type="fill"][data-order="${order1}"]`;
      await page1.waitForSelector(placed);
      await page1.waitForSelector(filled);
      const fillText = (await page1.locator(filled).first().innerText()).replace(/\s+/g, ' ').trim();
      check(fillText.includes(SELL_PRICE) && fillText.includes(BUY_QTY) && fillText.includes('maker'), `the history's fill reads ${fillText}`);
      // The same fill, by its lasting trade id, from a signed REST call.
      const fills = await signedRest('1', opts.secret1, 'GET', `/api/v1/fills?symbol=${SYMBOL}`);
      const rest = fills.find((f) => f.order === order1);
      check(rest, `GET /api/v1/fills has no fill of order ${order1}: ${JSON.stringify(fills)}`);
      await page1.getByTestId('fills-tab').click();
      const fillRow = page1.locator('[data-testid="fill-row"]', { hasText: String(rest.trade_id) });
      await fillRow.waitFor();
      await page1.locator('.subtab[data-pane="open-orders-pane"]').click();
      return fillText;
    });

    await step('both users balances moved by exactly the fill, its fees and the holds', async () => {
      const base = buyLots * info.base_scale;
      const value = buyLots * sellTicks * info.quote_scale;
      // Seller: delivers base out of the hold, receives the value less the maker fee.
      await waitForBalance(page1, info.base, 'held', before1[info.base].held + restLots * info.base_scale);
      await waitForBalance(page1, info.quote, 'available', before1[info.quote].available + value - buyLots * info.maker_fee);
      // Buyer: receives base, pays the value plus the taker fee (the unused hold comes back).
      await waitForBalance(page2, info.base, 'available', before2[info.base].available + base);
      await waitForBalance(page2, info.quote, 'available', before2[info.quote].available - value - buyLots * info.taker_fee);
      await waitForBalance(page2, info.quote, 'held', before2[info.quote].held);
      return `${info.quote} +${value - buyLots * info.maker_fee} to user 1, -${value + buyLots * info.taker_fee} from user 2`;
    });

    await step('a signed REST call from node agrees with the page', async () => {
      const orders = await signedRest('1', opts.secret1, 'GET', '/api/v1/orders');
      const mine = orders.filter((o) => o.order === order1);
      check(mine.length === 1, `GET /api/v1/orders: ${JSON.stringify(orders)}`);
      check(mine[0].remaining === restLots && mine[0].price === sellTicks, `REST shows ${JSON.stringify(mine[0])}`);
      const trades = await publicGet(`/api/v1/trades/${SYMBOL}?limit=5`);
      check(trades.some((t) => t.price === sellTicks && t.qty === buyLots && t.taker_side === 'buy'), `trades: ${JSON.stringify(trades)}`);
      return JSON.stringify(mine[0]);
    });

    await step(`user 1 amends the rest to ${MOVE_PRICE} and a total of ${AMEND_TOTAL}`, async () => {
      const row = page1.locator(`[data-testid="open-order"][data-order="${order1}"]`);
      const total = toUnits(AMEND_TOTAL, info.qty_lot);
      const left = total - buyLots;
      // The amend fields start at the order's terms: its price and its total (filled + left).
      check((await row.getByTestId('amend-qty').inputValue()) === SELL_QTY, 'the amend qty field does not show the total');
      await row.getByTestId('amend-price').fill(MOVE_PRICE);
      await row.getByTestId('amend-qty').fill(AMEND_TOTAL);
      await row.getByTestId('amend-button').click();
      await waitForOrderRow(page1, order1, { price: moveTicks, remaining: left, filled: buyLots, shown: left });
      await page1.waitForSelector(`[data-testid="ladder-ask"][data-price="${moveTicks}"][data-qty="${left}"]`);
      await page1.waitForFunction((p) => !document.querySelector(`[data-testid="ladder-ask"][data-price="${p}"]`), sellTicks);
      const text = (await row.innerText()).replace(/\s+/g, ' ');
      check(text.includes(MOVE_PRICE), `the row reads ${text}`);
      const status = (await page1.getByTestId('order-status').textContent()).trim();
      check(status === `amend order ${order1}: accepted`, status);
      return status;
    });

    await step('user 1 cancels it: the order, the level and the hold are gone', async () => {
      const row = page1.locator(`[data-testid="open-order"][data-order="${order1}"]`);
      await row.getByTestId('cancel-button').click();
      await page1.waitForFunction(() => document.querySelectorAll('[data-testid="open-order"]').length === 0);
      await page1.waitForFunction((p) => !document.querySelector(`[data-testid="ladder-ask"][data-price="${p}"]`), moveTicks);
      await page2.waitForFunction((p) => !document.querySelector(`[data-testid="ladder-ask"][data-price="${p}"]`), moveTicks);
      await waitForBalance(page1, info.base, 'held', before1[info.base].held);
      const stale = await page1.$$eval('[data-testid="ladder-ask"][data-price=""], [data-testid="ladder-bid"][data-price=""]',
        (rows) => rows.map((r) => r.innerText.trim()).filter((t) => t !== ''));
      check(stale.length === 0, `empty ladder rows still show ${JSON.stringify(stale)}`);
      return (await page1.getByTestId('order-status').textContent()).trim();
    });

    let stopOrder;
    await step('user 1 places a stop-limit GTD buy and an iceberg sell: open orders show the stop pending and the iceberg\'s slice', async () => {
      const expiry = localInput(2 * 86_400_000);
      stopOrder = await placeOrder(page1, 'buy', STOP_LIMIT, ONE_LOT, {
        type: 'stop_limit', tif: 'gtd', stop: STOP_PRICE, expiry,
      });
      const stopRow = await waitForOrderRow(page1, stopOrder, {
        type: 'stop_limit', tif: 'gtd', pending: true, shown: 0,
        stopPrice: toUnits(STOP_PRICE, info.price_tick), price: toUnits(STOP_LIMIT, info.price_tick),
      });
      const stopText = (await stopRow.innerText()).replace(/\s+/g, ' ');
      check(stopText.includes(`${STOP_PRICE} pending`) && stopText.includes('stop limit') && stopText.includes('GTD'),
        `the stop's row reads ${stopText}`);
      check(stopText.includes(expiry.replace('T', ' ')), `the stop's row does not show its expiry ${expiry}: ${stopText}`);
      // A pending stop is in no book: the ladder has no bid at its limit price.
      check(await page1.locator(`[data-testid="ladder-bid"][data-price="${toUnits(STOP_LIMIT, info.price_tick)}"]`).count() === 0,
        'the pending stop is on the ladder');
      const iceberg = await placeOrder(page1, 'sell', ICEBERG_PRICE, ICEBERG_QTY, { display: ICEBERG_SHOWN });
      const shown = toUnits(ICEBERG_SHOWN, info.qty_lot);
      const total = toUnits(ICEBERG_QTY, info.qty_lot);
      const iceRow = await waitForOrderRow(page1, iceberg, { type: 'limit', iceberg: true, shown, remaining: total, pending: false });
      const iceText = (await iceRow.innerText()).replace(/\s+/g, ' ');
      check(iceText.includes(`${ICEBERG_SHOWN} / ${ICEBERG_QTY}`) && iceText.includes('iceberg'), `the iceberg's row reads ${iceText}`);
      // The server says the same (REST from node).
      const rest = await signedRest('1', opts.secret1, 'GET', '/api/v1/orders');
      const s = rest.find((o) => o.order === stopOrder);
      const i = rest.find((o) => o.order === iceberg);
      check(s && s.pending === true && s.type === 'stop_limit' && s.tif === 'gtd' && s.expire_ts > Date.now() * 1e6, `REST: ${JSON.stringify(s)}`);
      check(i && i.shown === shown && i.remaining === total && i.filled === 0, `REST: ${JSON.stringify(i)}`);
      // The iceberg goes again (the deeper book below counts the levels).
      await iceRow.getByTestId('cancel-button').click();
      await page1.waitForFunction((o) => !document.querySelector(`[data-testid="open-order"][data-order="${o}"]`), iceberg);
      return `stop ${stopOrder}: ${stopText.trim()}; iceberg ${iceberg}: ${iceText.trim()}`;
    });

    await step('the candle chart holds the trade\'s 1-minute candle', async () => {
      await page1.waitForFunction(() => Number(document.querySelector('[data-testid="candles"]').dataset.count) >= 1);
      const candles = await publicGet(`/api/v1/candles/${SYMBOL}?limit=1`);
      check(candles.length === 1 && candles[0].volume >= buyLots, `candles: ${JSON.stringify(candles)}`);
      return `volume ${candles[0].volume}`;
    });

    await step('the interval selector asks for 5 m candles and draws the trade\'s; zoom by buttons and wheel', async () => {
      const canvas = page1.getByTestId('candles');
      const request = page1.waitForRequest((r) => r.url().includes(`/api/v1/candles/${SYMBOL}?interval=5m`));
      await page1.locator('#candle-intervals [data-interval="5m"]').click();
      const url = (await request).url();
      await page1.waitForSelector('[data-testid="candles"][data-loaded="5m"]');
      await page1.waitForFunction(() => Number(document.querySelector('[data-testid="candles"]').dataset.count) >= 1);
      const five = await publicGet(`/api/v1/candles/${SYMBOL}?interval=5m&limit=1`);
      check(five.length === 1 && five[0].volume >= buyLots, `5 m candles: ${JSON.stringify(five)}`);
      const slot = async () => Number(await canvas.getAttribute('data-slot'));
      const before = await slot();
      await page1.getByTestId('zoom-in').click();
      const zoomedIn = await slot();
      check(zoomedIn > before, `zoom in: slot ${before} -> ${zoomedIn}`);
      const box = await canvas.boundingBox();
      await page1.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
      await page1.mouse.wheel(0, 300);
      await page1.waitForFunction((s) => Number(document.querySelector('[data-testid="candles"]').dataset.slot) < s, zoomedIn);
      await page1.locator('#candle-intervals [data-interval="1m"]').click();
      await page1.waitForSelector('[data-testid="candles"][data-loaded="1m"]');
      await page1.waitForFunction(() => Number(document.querySelector('[data-testid="candles"]').dataset.count) >= 1);
      return `${url.slice(BASE.length)}, slot ${before} -> ${zoomedIn} -> ${await slot()} px`;
    });

    if (opts['admin-secret']) {
      await step('admin logs in: users, the detail of user 1, symbols, a snapshot, a deposit user 1 sees, the latency histograms', async () => {
        admin = await openConsole(browser, 'admin');
        await login(admin, 'admin', opts['admin-secret']);
        await admin.waitForSelector('[data-testid="admin-view"]:not([hidden])');
        try {
          await admin.waitForFunction(() => document.querySelectorAll('[data-testid="admin-user"]').length >= 8);
        } catch {
          throw new Error(`the users list shows ${await admin.getByTestId('admin-users').innerText()}`);
        }
        await admin.getByTestId('find-user-id').fill('1');
        await admin.getByTestId('find-user-button').click();
        await admin.waitForFunction((c) => document.querySelector('[data-testid="admin-user-detail"]').innerText.includes(c), info.quote);
        const symbolsText = await admin.getByTestId('admin-symbols').textContent();
        check(symbolsText.includes(SYMBOL), `admin symbols: ${symbolsText}`);
        await admin.getByTestId('snapshot-button').click();
        await admin.waitForFunction(() => /snapshot taken|snapshot:/.test(document.querySelector('[data-testid="admin-status"]').textContent));
        const snap = await admin.getByTestId('admin-status').textContent();
        check(snap.startsWith('snapshot taken'), snap);
        // A deposit to user 1 reaches user 1's page over its `user` channel.
        const quoteBefore = (await shownBalances(page1))[info.quote].available;
        await admin.getByTestId('deposit-user').fill('1');
        await admin.getByTestId('deposit-currency').selectOption(info.quote);
        await admin.getByTestId('deposit-amount').fill('12345');
        await admin.getByTestId('deposit-button').click();
        await admin.waitForFunction(() => /accepted|deposits:/.test(document.querySelector('[data-testid="admin-status"]').textContent));
        const dep = await admin.getByTestId('admin-status').textContent();
        check(dep.includes('accepted'), dep);
        await waitForBalance(page1, info.quote, 'available', quoteBefore + 12345);
        await admin.waitForSelector('[data-testid="histogram"]');
        const names = await admin.$$eval('[data-testid="histogram"]', (h) => [...new Set(h.map((x) => x.dataset.metric))]);
        check(names.length > 0, 'no latency histogram drawn from /metrics');
        return `histograms: ${names.join(', ')}`;
      });

      await step('the operator sets a band and a reference price (both traders\' headers follow), the order-id window, and suspends and resumes a user', async () => {
        await admin.waitForSelector(`[data-testid="admin-phase-row"][data-symbol="${SYMBOL}"][data-phase="continuous"]`);
        await control(admin, { 'control-symbol': SYMBOL, 'control-band': String(BAND_BPS) }, 'set-band-button', 'accepted');
        const answers = [await control(admin, { 'control-ref': REFERENCE }, 'set-ref-button', 'accepted')];
        const ref = toUnits(REFERENCE, info.price_tick);
        const w = Math.floor((ref * BAND_BPS) / 10000);
        const bandText = `±${(BAND_BPS / 100).toFixed(2)}% ${fromUnits(ref - w, info.price_tick)}–${fromUnits(ref + w, info.price_tick)}`;
        for (const page of [page1, page2]) {
          try {
            await page.waitForFunction((t) => document.querySelector('[data-testid="band"]').textContent === t, bandText);
          } catch {
            throw new Error(`the band reads ${await page.getByTestId('band').textContent()}, expected ${bandText}`);
          }
        }
        answers.push(await control(admin, { 'control-band': '-5' }, 'set-band-button', 'rejected invalid_qty'));
        answers.push(await control(admin, { 'control-user': '3' }, 'suspend-button', 'accepted'));
        answers.push(await control(admin, { 'control-user': '3' }, 'resume-button', 'accepted'));
        answers.push(await control(admin, { 'control-user': '99999' }, 'suspend-button', 'rejected'));
        answers.push(await control(admin, { 'control-window': '3600000000000' }, 'set-window-button', 'accepted'));
        await admin.waitForFunction(() => document.querySelector('[data-testid="current-window"]').textContent.startsWith('3,600,000,000,000 ns'));
        answers.push(await control(admin, { 'control-window': '-1' }, 'set-window-button', 'rejected invalid_qty'));
        const settings = await signedRest('admin', opts['admin-secret'], 'GET', '/api/v1/admin/settings');
        check(settings.order_id_window_ns === 3600000000000, `settings: ${JSON.stringify(settings)}`);
        const status = (await publicGet('/api/v1/status')).symbols.find((x) => x.symbol === SYMBOL);
        check(status.band_bps === BAND_BPS && status.reference === ref, `status: ${JSON.stringify(status)}`);
        return `${bandText}; ${answers.join('; ')}`;
      });

      await step('the operator creates a read-only API key for user 3 (its secret shown once, it signs, the console logs in with it), then revokes it', async () => {
        await admin.getByTestId('key-user').fill('3');
        await admin.getByTestId('key-trade').uncheck();
        await admin.getByTestId('key-label').fill('browser test');
        await admin.getByTestId('key-create').click();
        await admin.waitForFunction(() => /^key rk\w{18}\s+secret [0-9a-f]{32}/.test(document.querySelector('[data-testid="key-secret"]').textContent));
        const [, key, secret] = (await admin.getByTestId('key-secret').textContent()).match(/^key (rk\w{18})\s+secret ([0-9a-f]{32})/);
        await admin.waitForSelector(`[data-testid="key-list"] tr[data-key="${key}"]`);
        const row = await admin.locator(`[data-testid="key-list"] tr[data-key="${key}"]`).innerText();
        check(row.includes('read') && !row.includes('trade') && !row.includes(secret), `the key's row: ${row}`);
        const balances = await signedRest(key, secret, 'GET', '/api/v1/balances');
        check(Array.isArray(balances), `the new key reads: ${JSON.stringify(balances)}`);
        const keyPage = await openConsole(browser, 'user 3 by key');
        await login(keyPage, key, secret);
        const title = await keyPage.getByTestId('account-name').textContent();
        check(title === `user 3 (key ${key})`, `the account title with an issued key: ${title}`);
        await keyPage.context().close();
        await admin.getByTestId(`key-revoke-${key}`).click();
        await admin.waitForSelector(`[data-testid="key-list"] tr[data-key="${key}"]`, { state: 'detached' });
        let refused = '';
        try {
          await signedRest(key, secret, 'GET', '/api/v1/balances');
        } catch (error) {
          refused = String(error.message);
        }
        check(refused.includes('unknown_key'), `the revoked key: ${refused || 'accepted'}`);
        return `${key}: read, then revoked (unknown_key)`;
      });
    }

    await step('a deeper book placed over REST shows on the ladder best first, with the spread', async () => {
      // Asks from user 1 at 5002.00, 5003.00, 5004.00 and bids from user 2 at 4992.00, 4991.00,
      // 4990.00, one lot more at each level further out.
      const asks = [0, 1, 2].map((i) => [toUnits(SELL_PRICE, info.price_tick) + (2 + i) * 100, i + 1]);
      const bids = [0, 1, 2].map((i) => [toUnits(SELL_PRICE, info.price_tick) - (8 + i) * 100, i + 1]);
      for (const [price, qty] of asks) {
        await signedRest('1', opts.secret1, 'POST', '/api/v1/orders', { symbol: SYMBOL, side: 'sell', type: 'limit', price, qty });
      }
      for (const [price, qty] of bids) {
        await signedRest('2', opts.secret2, 'POST', '/api/v1/orders', { symbol: SYMBOL, side: 'buy', type: 'limit', price, qty });
      }
      const levels = (side) =>
        page1.$$eval(`[data-testid="ladder-${side}"]`, (rows) =>
          rows.filter((r) => r.dataset.price !== '').map((r) => [Number(r.dataset.price), Number(r.dataset.qty)]),
        );
      await page1.waitForFunction(() => document.querySelectorAll('[data-testid="ladder-bid"][data-price]:not([data-price=""])').length === 3 &&
        document.querySelectorAll('[data-testid="ladder-ask"][data-price]:not([data-price=""])').length === 3);
      // Asks are drawn worst first, down to the best next to the spread.
      const shownAsks = (await levels('ask')).reverse();
      const shownBids = await levels('bid');
      check(JSON.stringify(shownAsks) === JSON.stringify(asks), `asks ${JSON.stringify(shownAsks)}, expected ${JSON.stringify(asks)}`);
      check(JSON.stringify(shownBids) === JSON.stringify(bids), `bids ${JSON.stringify(shownBids)}, expected ${JSON.stringify(bids)}`);
      const spread = await page1.getByTestId('spread').innerText();
      const spreadText = `spread ${fromUnits(asks[0][0] - bids[0][0], info.price_tick)}`;
      check(spread.includes(spreadText), `spread reads ${spread}, expected ${spreadText}`);
      await page1.waitForFunction(() => Number(document.querySelector('[data-testid="depth"]').dataset.askLevels) === 3 &&
        Number(document.querySelector('[data-testid="depth"]').dataset.bidLevels) === 3);
      return spread;
    });

    if (admin) {
      await step('the operator runs an opening auction: orders collect while nothing trades, then continuous uncrosses them', async () => {
        await control(admin, { 'control-symbol': SYMBOL, 'control-phase': 'auction' }, 'set-phase-button', 'accepted');
        for (const page of [page1, page2]) await page.waitForSelector('[data-testid="phase"][data-phase="auction"]');
        const option = await page1.locator(`[data-testid="symbol-select"] option[value="${SYMBOL}"]`).textContent();
        check(option.includes('auction'), `the symbol list reads ${option}`);
        await admin.waitForSelector(`[data-testid="admin-phase-row"][data-symbol="${SYMBOL}"][data-phase="auction"]`);
        const qty = ONE_LOT;
        const lots = toUnits(qty, info.qty_lot);
        const sell = await placeOrder(page1, 'sell', AUCTION_SELL, qty);
        const buy = await placeOrder(page2, 'buy', AUCTION_BUY, qty);
        // They cross, but nothing trades in the call: both rest.
        await waitForOrderRow(page1, sell, { remaining: lots, filled: 0 });
        await waitForOrderRow(page2, buy, { remaining: lots, filled: 0 });
        await control(admin, { 'control-phase': 'continuous' }, 'set-phase-button', 'accepted');
        for (const page of [page1, page2]) await page.waitForSelector('[data-testid="phase"][data-phase="continuous"]');
        const price = toUnits(AUCTION_BUY, info.price_tick);
        for (const page of [page1, page2]) {
          await page.waitForSelector(`[data-testid="tape-row"][data-price="${price}"][data-qty="${lots}"]`);
          await page.waitForFunction((p) => document.querySelector('[data-testid="last-price"]').textContent === p, AUCTION_BUY);
        }
        await page1.waitForFunction((o) => !document.querySelector(`[data-testid="open-order"][data-order="${o}"]`), sell);
        await page2.waitForFunction((o) => !document.querySelector(`[data-testid="open-order"][data-order="${o}"]`), buy);
        // The uncross price is the new reference: the band moves with it.
        await page1.waitForSelector(`[data-testid="band"][data-reference="${price}"]`);
        const events = await page1.getByTestId('events').textContent();
        const result = events.split('\n').find((line) => line.includes('auction uncrossed'));
        check(result && result.includes(`${qty} @ ${AUCTION_BUY}`), `user 1's events: ${events.slice(0, 500)}`);
        // The pending stop above did not trigger.
        await waitForOrderRow(page1, stopOrder, { pending: true });
        await admin.screenshot({ path: opts.screenshot.replace(/(\.png)?$/, '-admin.png') });
        return result.trim().replace(/^\S+\s+/, '');
      });
    }

    if (opts['admin-secret']) {
      await step(`the operator lists ${FUTURE}; after a trade user 1's positions panel shows the short, the order form its margin, a new mark moves the PnL, and the admin view shows the insurance fund`, async () => {
        const tick = info.price_tick;
        await signedRest('admin', opts['admin-secret'], 'POST', '/api/v1/admin/symbols', {
          symbol: FUTURE, base: 'IDX', quote: info.quote, base_scale: info.base_scale, quote_scale: info.quote_scale,
          maker_fee: 0, taker_fee: 0, price_tick: tick, qty_lot: info.qty_lot, type: 'future',
          initial_margin: 50000, maintenance_margin: 25000, mark_price: toUnits(FUTURE_PRICE, tick),
        });
        const trader = await openConsole(browser, 'futures trader', FUTURE);
        await login(trader, '1', opts.secret1);
        await trader.waitForFunction((m) => document.querySelector('[data-testid="mark-price"]').textContent === m, FUTURE_PRICE);
        // The order form on a future: what the order needs of the initial margin (2 lots × 0.5).
        await trader.getByTestId('order-side').selectOption('sell');
        await trader.getByTestId('order-price').fill(FUTURE_PRICE);
        await trader.getByTestId('order-qty').fill(FUTURE_QTY);
        const margin = await trader.getByTestId('order-margin').textContent();
        check(margin.startsWith(`Margin: this order ≤ 1.00000 ${info.quote}`), `the form's margin: ${margin}`);
        await placeOrder(trader, 'sell', FUTURE_PRICE, FUTURE_QTY);
        await signedRest('2', opts.secret2, 'POST', '/api/v1/orders', {
          symbol: FUTURE, side: 'buy', price: toUnits(FUTURE_PRICE, tick), qty: toUnits(FUTURE_QTY, info.qty_lot), tif: 'ioc',
        });
        const row = `[data-testid="position-row"][data-symbol="${FUTURE}"]`;
        await trader.waitForSelector(row);
        const text = async () => (await trader.locator(row).innerText()).replace(/\s+/g, ' ');
        const opened = await text();
        check(opened.includes(`short ${FUTURE_QTY}`) && opened.includes(`5000 ${FUTURE_PRICE}`) && opened.includes(`0.00000 ${info.quote}`),
          `the position: ${opened}`);
        const margins = await trader.locator('[data-testid="margin-row"]').innerText();
        check(margins.replace(/\s+/g, ' ').includes(`${info.quote} `), `margins: ${margins}`);

        const operator = await openConsole(browser, 'futures admin', FUTURE);
        await login(operator, 'admin', opts['admin-secret']);
        await operator.waitForSelector('[data-testid="admin-view"]:not([hidden])');
        await operator.waitForSelector(`[data-testid="admin-phase-row"][data-symbol="${FUTURE}"]`);
        await control(operator, { 'control-symbol': FUTURE, 'control-mark': FUTURE_MARK }, 'set-mark-button', 'accepted');
        await control(operator, { 'control-mark': '0.001' }, 'set-mark-button', 'mark price');
        await trader.waitForFunction((m) => document.querySelector('[data-testid="mark-price"]').textContent === m, FUTURE_MARK);
        // Short 2 lots, 100 ticks of 0.00001 USD against it.
        try {
          await trader.waitForFunction((r) => document.querySelector(r).innerText.includes('-0.20000'), row);
        } catch {
          throw new Error(`after the mark: ${await text()}`);
        }
        await operator.getByTestId('insurance-currency').selectOption(info.quote);
        await operator.getByTestId('insurance-amount').fill('123456');
        await control(operator, {}, 'insurance-button', 'accepted');
        await operator.waitForFunction(() => document.querySelector('[data-testid="admin-insurance"]').innerText.includes('123,456'));
        const fund = (await operator.getByTestId('admin-insurance').innerText()).replace(/\s+/g, ' ');
        const log = await trader.getByTestId('events').textContent();
        check(log.includes(`${FUTURE}: mark ${FUTURE_MARK}`), `the event log: ${log.slice(0, 300)}`);
        await trader.screenshot({ path: opts.screenshot.replace(/(\.png)?$/, '-futures.png') });
        await operator.context().close();
        await trader.context().close();
        return `${opened}; fund: ${fund}`;
      });
    }

    await step('a click in the market list selects that symbol', async () => {
      const other = symbols.find((s) => s.symbol !== SYMBOL);
      check(other, 'the venue has one symbol only');
      await page2.locator(`[data-testid="market-row"][data-symbol="${other.symbol}"]`).click();
      await page2.waitForSelector(`body[data-symbol="${other.symbol}"]`);
      await page2.waitForSelector(`[data-testid="market-row"][data-symbol="${other.symbol}"].active`);
      check(await page2.getByTestId('symbol-select').inputValue() === other.symbol, 'the symbol selector did not follow');
      check(new URL(page2.url()).hash === `#${other.symbol}`, `the page's address is ${page2.url()}`);
      return other.symbol;
    });

    await step(`the layout fits ${LAYOUT_WIDTHS.join(', ')} px wide with nothing cut off; screenshots of each`, async () => {
      const shots = [];
      const pages = [['trade', page1]];
      if (admin) pages.push(['admin', admin]);
      for (const [what, page] of pages) {
        for (const width of LAYOUT_WIDTHS) {
          const problems = await layoutProblems(page, width);
          const path = shotPath(`${what}-${width}`);
          await page.screenshot({ path, fullPage: true });
          shots.push(path.split('/').pop());
          check(problems.length === 0, `${what} view at ${width} px: ${problems.join('; ')}`);
        }
      }
      await page1.setViewportSize({ width: 1600, height: 1000 });
      return shots.join(', ');
    });

    await step('no script errors in any page', async () => {
      check(pageErrors.length === 0, pageErrors.join('\n'));
    });

    await step(`screenshot of user 1's console saved to ${opts.screenshot}`, async () => {
      await page1.screenshot({ path: opts.screenshot });
    });
  } catch (error) {
    failed = true;
    if (pageErrors.length) console.log(`page errors:\n${pageErrors.join('\n')}`);
    if (page1) {
      const events = await page1.getByTestId('events').textContent().catch(() => '');
      if (events) console.log(`user 1's console events:\n${events}`);
      await page1.screenshot({ path: opts.screenshot }).catch(() => {});
      console.log(`screenshot of the failure saved to ${opts.screenshot}`);
    }
    if (admin) {
      const status = await admin.evaluate(() => ['admin-status', 'control-status']
        .map((id) => `${id}: ${document.getElementById(id).textContent}`).join('\n')).catch(() => '');
      console.log(`the admin page says:\n${status}`);
      const path = opts.screenshot.replace(/(\.png)?$/, '-admin.png');
      await admin.screenshot({ path }).catch(() => {});
      console.log(`screenshot of the admin page saved to ${path}`);
    }
  } finally {
    await browser.close();
  }
}

main().then(
  () => {
    console.log(failed ? 'console test FAILED' : `console test passed: ${stepNumber} steps`);
    process.exit(failed ? 1 : 0);
  },
  (error) => {
    console.log(`console test FAILED: ${error && error.stack ? error.stack : error}`);
    process.exit(1);
  },
);
