#!/usr/bin/env node
// The web console in a real browser (Debian's Chromium, headless), against a fresh
// `rialto serve --demo`: user 1 rests a sell, sees it on the ladder and in its open orders; user 2
// (a second browser context) crosses it; both tapes show the trade; user 1's order, the ladder
// and both users' balances move by exactly what the rules say; user 1 moves and cancels the rest;
// a signed REST call from here checks the server agrees; the admin view shows users, takes a
// snapshot, books a deposit and draws the latency histograms from /metrics. Prints every step,
// saves a screenshot, and exits 0 only if every step passed.
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
let nonce = Date.now();
async function signedRest(key, secret, method, pathAndQuery, bodyObject, retry = true) {
  const body = bodyObject === undefined ? '' : JSON.stringify(bodyObject);
  const ts = Date.now();
  nonce = Math.max(nonce + 1, ts);
  const sig = createHmac('sha256', secret)
    .update(`${key}\n${ts}\n${nonce}\n${method}\n${pathAndQuery}\n${body}`)
    .digest('hex');
  const response = await fetch(BASE + pathAndQuery, {
    method,
    headers: {
      'Rialto-Key': key,
      'Rialto-Timestamp': String(ts),
      'Rialto-Nonce': String(nonce),
      'Rialto-Signature': sig,
      ...(body ? { 'Content-Type': 'application/json' } : {}),
    },
    body: body || undefined,
  });
  const text = await response.text();
  // The browser pages sign with the same keys: a nonce of theirs may have been larger.
  if (response.status === 401 && text.includes('replayed_nonce') && retry) {
    nonce += 1000;
    return signedRest(key, secret, method, pathAndQuery, bodyObject, false);
  }
  if (!response.ok) throw new Error(`${method} ${pathAndQuery}: HTTP ${response.status} ${text}`);
  return JSON.parse(text);
}

async function publicGet(path) {
  const response = await fetch(BASE + path);
  const text = await response.text();
  if (!response.ok) throw new Error(`GET ${path}: HTTP ${response.status} ${text}`);
  return JSON.parse(text);
}

async function openConsole(browser, name) {
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
  await page.goto(`${BASE}/#${SYMBOL}`);
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

async function placeOrder(page, side, price, qty) {
  await page.getByTestId('order-side').selectOption(side);
  await page.getByTestId('order-type').selectOption('limit');
  await page.getByTestId('order-price').fill(price);
  await page.getByTestId('order-qty').fill(qty);
  await page.getByTestId('order-status').evaluate((node) => {
    node.textContent = '';
  });
  await page.getByTestId('place-button').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="order-status"]').textContent.length > 0 &&
    !document.querySelector('[data-testid="order-status"]').textContent.startsWith('sending'));
  const text = await page.getByTestId('order-status').textContent();
  check(text.startsWith('accepted'), `${side} ${qty} @ ${price}: ${text}`);
  return Number(/order (-?\d+)/.exec(text)[1]);
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
  try {
    let page2;
    await step(`Chromium ${browser.version()} opens the console at ${BASE}/ and syncs the ${SYMBOL} book`, async () => {
      page1 = await openConsole(browser, 'user1');
      const selected = await page1.getByTestId('symbol-select').inputValue();
      check(selected === SYMBOL, `symbol selector shows ${selected}`);
      await page1.waitForFunction(() => document.querySelector('[data-testid="conn-status"]').textContent === 'live');
      const options = await page1.$$eval('[data-testid="symbol-select"] option', (o) => o.map((x) => x.value));
      return `symbols ${options.join(', ')}`;
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
      return Object.keys(before1).join(', ');
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

    await step(`user 1 moves the rest to ${MOVE_PRICE}`, async () => {
      const row = page1.locator(`[data-testid="open-order"][data-order="${order1}"]`);
      await row.getByTestId('move-price').fill(MOVE_PRICE);
      await row.getByTestId('move-button').click();
      await page1.waitForSelector(`[data-testid="open-order"][data-order="${order1}"][data-price="${moveTicks}"]`);
      await page1.waitForSelector(`[data-testid="ladder-ask"][data-price="${moveTicks}"][data-qty="${restLots}"]`);
      await page1.waitForFunction((p) => !document.querySelector(`[data-testid="ladder-ask"][data-price="${p}"]`), sellTicks);
      return (await page1.getByTestId('order-status').textContent()).trim();
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

    await step('the candle chart holds the trade\'s 1-minute candle', async () => {
      await page1.waitForFunction(() => Number(document.querySelector('[data-testid="candles"]').dataset.count) >= 1);
      const candles = await publicGet(`/api/v1/candles/${SYMBOL}?limit=1`);
      check(candles.length === 1 && candles[0].volume >= buyLots, `candles: ${JSON.stringify(candles)}`);
      return `volume ${candles[0].volume}`;
    });

    if (opts['admin-secret']) {
      await step('admin logs in: users, the detail of user 1, symbols, a snapshot, a deposit user 1 sees, the latency histograms', async () => {
        const admin = await openConsole(browser, 'admin');
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
        await admin.screenshot({ path: opts.screenshot.replace(/(\.png)?$/, '-admin.png') });
        return `histograms: ${names.join(', ')}`;
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
      await page1.waitForTimeout(300); // the charts redraw at most every 250 ms
      return spread;
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
