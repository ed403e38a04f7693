// The console: market data for the chosen symbol over one WebSocket, account and admin views
// over signed REST. Messages only change state and mark views dirty; one animation frame then
// draws whatever changed, however many messages arrived since the last frame.
//
// The API speaks decimal strings (docs/api.md, "Units"); each message's prices, quantities and
// amounts are turned into integer ticks, lots and minor units as it arrives (Unit.units, exact),
// and the views count in those and format them back with the symbol's tick and lot.

import { Unit, formatInt, bandLimits } from './decimal.js';
import { Api } from './api.js';
import { Feed } from './feed.js';
import { Book } from './book.js';
import { LadderView } from './ladder.js';
import { TapeView } from './tape.js';
import { DepthChart, CandleChart, CANDLE_INTERVALS_MS, upsertCandle } from './charts.js';
import { Account } from './account.js';
import { AdminView } from './admin.js';
import { MarketList } from './markets.js';

const $ = (id) => document.getElementById(id);

const api = new Api('');
const state = {
  symbols: [],
  unitsBySymbol: new Map(), // symbol -> { price: Unit, qty: Unit, info }
  symbol: null,
  book: new Book(),
  bbo: null,
  lastTrade: null,
  candle: null,
  // The candle chart's interval; 1 m candles come from the `candles` channel (kept in
  // `minute`), the others from GET /api/v1/candles (the history database).
  interval: '1m',
  minute: [],
  // symbol -> { phase, last, reference, band_bps }, from the `status` channel (and the
  // reference from each new trade of the shown symbol), and the seq it is as of.
  status: new Map(),
  statusSeq: null,
};
const dirty = { book: false, bbo: false, header: false, charts: false, held: false, status: false };
const stats = { messages: 0, frameMs: 0, gaps: 0 };

const ladder = new LadderView($('ladder'), {
  rowsPerSide: 20,
  onPick: (price, side) => account.pickPrice(price, side === 'ask' ? 'buy' : 'sell'),
});
const tape = new TapeView($('tape'), { maxRows: 80 });
const depth = new DepthChart($('depth'));
const candles = new CandleChart($('candles'));
depth.minIntervalMs = 150;
candles.minIntervalMs = 250;
// A resized chart redraws on the next frame.
depth.onResize = () => markDirty('header');
candles.onResize = () => markDirty('header');

function setStatus(text) {
  const pill = $('conn-status');
  pill.textContent = text;
  pill.className = `pill ${text === 'live' ? 'live' : text === 'down' ? 'down' : ''}`;
}

const wsUrl = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws`;
const feed = new Feed(wsUrl, {
  onStatus: setStatus,
  onMessageCount: (n) => {
    stats.messages += n;
  },
});

const account = new Account({
  api,
  feed,
  symbol: () => state.symbol,
  units: (symbol) => state.unitsBySymbol.get(symbol),
  // The best price a market order of `side` would take, in ticks (for its estimated total).
  bestPrice: (side) => (side === 'buy' ? state.book.asks.best : state.book.bids.best),
  onOwnOrdersChanged: () => markDirty('book'),
  onAdmin: (isAdmin) => showAdminTab(isAdmin),
  // A future's mark in ticks (the status channel's), null for a spot symbol.
  markOf: (symbol) => {
    const status = state.status.get(symbol);
    return status && status.type === 'future' && status.mark !== null ? status.mark : null;
  },
});
const markets = new MarketList($('markets'), {
  api,
  onPick: (symbol) => selectSymbol(symbol),
  fallbackLast: (symbol) => {
    const status = state.status.get(symbol);
    const units = state.unitsBySymbol.get(symbol);
    return status && status.last && units ? units.price.format(status.last) : '';
  },
});
const admin = new AdminView({
  api,
  symbols: () => state.symbols,
  status: () => state.status,
  units: (symbol) => state.unitsBySymbol.get(symbol),
  log: (line) => account.log(line),
});

let frameRequested = false;
function markDirty(what) {
  dirty[what] = true;
  if (!frameRequested) {
    frameRequested = true;
    requestAnimationFrame(frame);
  }
}

// The ladder and the tape are DOM: under a flood of updates they are drawn at most this often
// (30 a second still reads as live), which leaves most frames free for everything else.
const DOM_MIN_INTERVAL_MS = 33;
let domDrawnAt = -Infinity;

function frame() {
  frameRequested = false;
  const start = performance.now();
  const domDue = start - domDrawnAt >= DOM_MIN_INTERVAL_MS;
  if (domDue && (dirty.book || tape.dirty)) domDrawnAt = start;
  if (dirty.book && domDue) {
    dirty.book = false;
    ladder.render(state.book, account.ownPrices());
    depth.update(state.book);
    $('book-seq').textContent = state.book.seq === null ? '' : `seq ${state.book.seq}`;
  }
  if (dirty.bbo) {
    dirty.bbo = false;
    renderBbo();
  }
  if (dirty.status) {
    dirty.status = false;
    dirty.header = true;
    renderSymbolOptions();
    admin.renderStatus();
    if (markets.historyOff) markets.render();
  }
  if (dirty.header) {
    dirty.header = false;
    renderHeader();
  }
  if (domDue) tape.render();
  depth.render(start);
  candles.render(start);
  stats.frameMs = performance.now() - start;
  // Whatever was held back by its interval draws on a later frame.
  if (dirty.book || tape.dirty) markDirty('held');
  else if ((depth.dirty && depth.price) || (candles.dirty && candles.price)) markDirty('charts');
}

function renderBbo() {
  const units = state.unitsBySymbol.get(state.symbol);
  const bbo = state.bbo;
  if (!units) return;
  const bid = bbo && bbo.bid;
  const ask = bbo && bbo.ask;
  $('bbo-bid').textContent = bid ? units.price.format(bid[0]) : '—';
  $('bbo-bid-qty').textContent = bid ? units.qty.format(bid[1]) : '';
  $('bbo-ask').textContent = ask ? units.price.format(ask[0]) : '—';
  $('bbo-ask-qty').textContent = ask ? units.qty.format(ask[1]) : '';
  $('bbo-spread').textContent = bid && ask ? units.price.format(ask[0] - bid[0]) : '—';
  // A market order's estimated total follows the best price.
  account.renderTotal();
}

function renderHeader() {
  const units = state.unitsBySymbol.get(state.symbol);
  if (!units) return;
  const last = state.lastTrade;
  const lastNode = $('last-price');
  lastNode.textContent = last ? units.price.format(last.price) : '—';
  lastNode.className = `num ${last ? (last.taker_side === 'buy' ? 'bid' : 'ask') : ''}`;
  $('minute-volume').textContent = state.candle ? units.qty.format(state.candle.volume) : '—';
  renderStatus(units);
}

function renderStatus(units) {
  const status = state.status.get(state.symbol);
  const phase = $('phase');
  const band = $('band');
  if (!status) {
    $('mark-stat').hidden = true;
    phase.textContent = '—';
    phase.className = 'phase';
    delete phase.dataset.phase;
    band.textContent = '—';
    return;
  }
  const future = status.type === 'future' && status.mark !== null && status.mark !== undefined;
  $('mark-stat').hidden = !future;
  $('mark-price').textContent = future ? units.price.format(status.mark) : '—';
  phase.textContent = status.phase;
  phase.className = `phase phase-${status.phase}`;
  phase.dataset.phase = status.phase;
  band.dataset.bandBps = String(status.band_bps);
  band.dataset.reference = String(status.reference);
  const limits = bandLimits(status.reference, status.band_bps);
  band.dataset.lo = limits ? String(limits.lo) : '';
  band.dataset.hi = limits ? String(limits.hi) : '';
  if (!status.band_bps) band.textContent = 'none';
  else {
    const pct = `±${(status.band_bps / 100).toFixed(2)}%`;
    band.textContent = limits
      ? `${pct} ${units.price.format(limits.lo)}–${units.price.format(limits.hi)}`
      : `${pct} (no reference yet)`;
  }
}

/** The symbol selector names each symbol's phase when it is not continuous. */
function renderSymbolOptions() {
  for (const option of $('symbol').options) {
    const status = state.status.get(option.value);
    const text = status && status.phase !== 'continuous' ? `${option.value} · ${status.phase}` : option.value;
    if (option.textContent !== text) option.textContent = text;
  }
}

// Market data handlers: state changes only.

/** The units of the symbol a channel (`book.BTC-USD`) or message is about. */
function unitsOf(chOrSymbol) {
  const dot = chOrSymbol.indexOf('.');
  return state.unitsBySymbol.get(dot < 0 ? chOrSymbol : chOrSymbol.slice(dot + 1));
}

/** [[price, qty]…] as decimal strings -> integer ticks and lots, in place. */
function levelUnits(levels, units) {
  if (!levels) return;
  for (const level of levels) {
    level[0] = units.price.units(level[0]);
    level[1] = units.qty.units(level[1]);
  }
}

/** A trade's decimal fields -> ticks and lots, and its ns time as a Number. */
function tradeUnits(trade, units) {
  trade.price = units.price.units(trade.price);
  trade.qty = units.qty.units(trade.qty);
  trade.ts_ns = Number(trade.ts_ns);
  return trade;
}

function candleUnits(candle, units) {
  for (const field of ['open', 'high', 'low', 'close']) candle[field] = units.price.units(candle[field]);
  candle.volume = units.qty.units(candle.volume);
  candle.start_ns = Number(candle.start_ns);
  return candle;
}

function onBook(msg) {
  const units = unitsOf(msg.ch);
  levelUnits(msg.bids, units);
  levelUnits(msg.asks, units);
  if (msg.type === 'snapshot') {
    state.book.applySnapshot(msg);
  } else if (msg.type === 'diff') {
    if (state.book.applyDiff(msg) === 'gap') {
      stats.gaps++;
      account.log(`book.${state.symbol}: gap at ${msg.first}..${msg.last}, resubscribing`);
      feed.resubscribe(msg.ch);
    }
  }
  markDirty('book');
}

function onBbo(msg) {
  const units = unitsOf(msg.ch);
  levelUnits([msg.bid, msg.ask].filter(Boolean), units);
  state.bbo = msg;
  markDirty('bbo');
}

function onTrades(msg) {
  if (msg.type === 'snapshot') tape.clear();
  const units = unitsOf(msg.ch);
  const trades = msg.trades || [];
  for (const trade of trades) tradeUnits(trade, units);
  tape.push(trades);
  if (trades.length) state.lastTrade = trades[trades.length - 1];
  if (msg.type === 'trades' && trades.length) {
    markets.soon();
    if (state.interval !== '1m') candlesSoon();
  }
  // A new trade is the symbol's last and reference price, so it moves the band (a snapshot's
  // trades are older than the status they came with).
  const status = state.status.get(state.symbol);
  if (msg.type === 'trades' && trades.length && status) {
    status.last = status.reference = trades[trades.length - 1].price;
    statusChanged();
  }
  markDirty('header');
}

// The public `status` channel: every symbol's phase and band.
function onStatus(msg) {
  if (msg.type === 'snapshot') {
    state.status.clear();
    for (const s of msg.symbols || []) {
      const units = state.unitsBySymbol.get(s.symbol);
      if (!units) continue;
      const mark = s.mark === null || s.mark === undefined ? null : units.price.units(s.mark);
      state.status.set(s.symbol, { ...s, last: units.price.units(s.last), reference: units.price.units(s.reference), mark });
    }
    state.statusSeq = msg.seq;
  } else {
    // A message at or below the snapshot's seq is already in it (docs/api.md).
    if (state.statusSeq !== null && msg.seq <= state.statusSeq) return;
    const status = state.status.get(msg.symbol);
    if (!status) return;
    const units = state.unitsBySymbol.get(msg.symbol);
    for (const field of ['price', 'reference', 'last', 'mark']) if (field in msg) msg[field] = units.price.units(msg[field]);
    for (const field of ['qty', 'imbalance']) if (field in msg) msg[field] = units.qty.units(msg[field]);
    if (msg.type === 'phase') {
      status.phase = msg.phase;
      account.log(`${msg.symbol}: phase ${msg.phase} (seq ${msg.seq})`);
    } else if (msg.type === 'auction') {
      status.last = status.reference = msg.price;
      account.log(`${msg.symbol}: auction uncrossed ${units.qty.format(msg.qty)} @ ${units.price.format(msg.price)}, ` +
        `imbalance ${units.qty.format(msg.imbalance)} (seq ${msg.seq})`);
    } else if (msg.type === 'band') {
      status.band_bps = msg.band_bps;
      status.reference = msg.reference;
      status.last = msg.last;
      account.log(`${msg.symbol}: band ${msg.band_bps} bps, reference ${units.price.format(msg.reference)} (seq ${msg.seq})`);
    } else if (msg.type === 'mark') {
      status.mark = msg.mark;
      account.log(`${msg.symbol}: mark ${units.price.format(msg.mark)} (seq ${msg.seq})`);
      account.onMark(msg.symbol);
    }
  }
  statusChanged();
}

// Drawn on the next frame, however many trades and status messages came before it.
function statusChanged() {
  markDirty('status');
}

function onCandles(msg) {
  const units = unitsOf(msg.ch);
  for (const candle of msg.candles || []) candleUnits(candle, units);
  if (msg.candle) candleUnits(msg.candle, units);
  if (msg.type === 'snapshot') {
    state.minute = (msg.candles || []).slice();
    state.candle = state.minute.length ? state.minute[state.minute.length - 1] : null;
    if (state.interval === '1m') candles.reset(state.minute, CANDLE_INTERVALS_MS['1m']);
  } else if (msg.candle) {
    upsertCandle(state.minute, msg.candle, candles.maxCandles);
    state.candle = msg.candle;
    if (state.interval === '1m') candles.reset(state.minute, CANDLE_INTERVALS_MS['1m']);
  }
  markDirty('header');
}

// Candles of other intervals: fetched when chosen, every CANDLES_REFRESH_MS while shown, and
// soon after a trade of the symbol. An answer for an interval or symbol no longer shown is
// dropped.
const CANDLES_REFRESH_MS = 10000;
const CANDLES_LIMIT = 500;
let candlesTimer = null;
let candlesRequest = 0;

function candlesSoon() {
  scheduleCandles(1000);
}

function scheduleCandles(ms) {
  if (candlesTimer !== null) clearTimeout(candlesTimer);
  candlesTimer = state.interval === '1m' ? null : setTimeout(loadCandles, ms);
}

async function loadCandles() {
  candlesTimer = null;
  const { symbol, interval } = state;
  if (interval === '1m' || !symbol) return;
  const request = ++candlesRequest;
  try {
    const list = await api.get(`/api/v1/candles/${encodeURIComponent(symbol)}?interval=${interval}&limit=${CANDLES_LIMIT}&units=decimal`);
    if (request !== candlesRequest || state.symbol !== symbol || state.interval !== interval) return;
    const units = state.unitsBySymbol.get(symbol);
    candles.reset((list || []).map((c) => candleUnits(c, units)), CANDLE_INTERVALS_MS[interval]);
    $('candles').dataset.loaded = interval;
    markDirty('header');
  } catch (error) {
    if (request !== candlesRequest) return;
    if (error.code === 'history_off') {
      // Only the feed's 1 m candles exist without the history database: say so, once.
      candles.emptyText = `no ${interval} candles: the history database is off (1m only)`;
      candles.dirty = true;
      markDirty('header');
      return;
    }
    account.log(`candles ${symbol} ${interval}: ${error.code || error.message}`);
  }
  if (request === candlesRequest && candlesTimer === null) scheduleCandles(CANDLES_REFRESH_MS);
}

function setCandleInterval(interval) {
  if (!CANDLE_INTERVALS_MS[interval]) return;
  state.interval = interval;
  for (const button of document.querySelectorAll('#candle-intervals .interval')) {
    button.classList.toggle('active', button.dataset.interval === interval);
  }
  const canvas = $('candles');
  canvas.dataset.interval = interval;
  delete canvas.dataset.loaded;
  candlesRequest++;
  if (interval === '1m') {
    scheduleCandles(0);
    candles.reset(state.minute, CANDLE_INTERVALS_MS['1m']);
    canvas.dataset.loaded = '1m';
  } else {
    candles.reset([], CANDLE_INTERVALS_MS[interval]);
    scheduleCandles(0);
  }
  markDirty('header');
}

const CHANNELS = [
  ['book', onBook],
  ['bbo', onBbo],
  ['trades', onTrades],
  ['candles', onCandles],
];

function selectSymbol(symbol) {
  if (state.symbol === symbol) return;
  if (state.symbol) for (const [name] of CHANNELS) feed.unsubscribe(`${name}.${state.symbol}`);
  state.symbol = symbol;
  state.book.reset();
  state.bbo = null;
  state.lastTrade = null;
  state.candle = null;
  state.minute = [];
  const units = state.unitsBySymbol.get(symbol);
  for (const view of [ladder, tape, depth, candles]) view.setUnits(units.price, units.qty);
  setCandleInterval(state.interval);
  account.setSymbol(symbol);
  markets.select(symbol);
  $('symbol').value = symbol;
  document.body.dataset.symbol = symbol;
  if (location.hash !== `#${symbol}`) history.replaceState(null, '', `#${symbol}`);
  for (const [name, handler] of CHANNELS) {
    const ch = `${name}.${symbol}`;
    feed.subscribe(ch, handler, {
      onSubscribed: (error) => error && account.log(`subscribe ${ch}: ${error.code || error.message}`),
    });
  }
  for (const what of ['book', 'bbo', 'header']) markDirty(what);
}

function showAdminTab(isAdmin) {
  $('view-admin').hidden = !isAdmin;
  showView(isAdmin ? 'admin' : 'trade');
}

function showView(which) {
  $('trade-view').hidden = which !== 'trade';
  $('admin-view').hidden = which !== 'admin';
  $('view-trade').classList.toggle('active', which === 'trade');
  $('view-admin').classList.toggle('active', which === 'admin');
  if (which === 'admin') admin.show();
  else admin.hide();
  markDirty('book');
}

$('view-trade').addEventListener('click', () => showView('trade'));
$('view-admin').addEventListener('click', () => showView('admin'));
$('symbol').addEventListener('change', (e) => selectSymbol(e.target.value));
for (const button of document.querySelectorAll('#candle-intervals .interval')) {
  button.addEventListener('click', () => setCandleInterval(button.dataset.interval));
}
$('zoom-in').addEventListener('click', () => candles.zoom(1));
$('zoom-out').addEventListener('click', () => candles.zoom(-1));

setInterval(() => {
  $('rate').textContent = `${formatInt(stats.messages)} msg/s · ${stats.frameMs.toFixed(1)} ms`;
  stats.messages = 0;
}, 1000);

/** The symbols and currencies, with their ticks, lots and decimals (retried until it answers). */
async function loadExchangeInfo() {
  for (let attempt = 0; ; attempt++) {
    try {
      return await api.get('/api/v1/exchange-info?units=decimal');
    } catch (error) {
      setStatus(`symbols: ${error.code || error.message}`);
      await new Promise((r) => setTimeout(r, Math.min(5000, 250 * 2 ** attempt)));
    }
  }
}

async function start() {
  const exchange = await loadExchangeInfo();
  const symbols = exchange.symbols || [];
  state.symbols = symbols;
  for (const c of exchange.currencies || []) account.currencyUnits.set(c.currency, new Unit(c.minor_unit));
  const select = $('symbol');
  select.replaceChildren();
  for (const info of symbols) {
    const quote = account.currencyUnits.get(info.quote);
    // The taker fee per lot in quote minor units, for the buy hold of the % of balance buttons.
    info.taker_fee_units = quote ? quote.units(info.taker_fee) : 0;
    state.unitsBySymbol.set(info.symbol, {
      price: new Unit(info.price_tick || '1'),
      qty: new Unit(info.qty_lot || '1'),
      info,
    });
    const option = document.createElement('option');
    option.value = info.symbol;
    option.textContent = info.symbol;
    select.append(option);
  }
  if (symbols.length === 0) {
    setStatus('no symbols');
    return;
  }
  markets.setSymbols(symbols);
  markets.start();
  const wanted = decodeURIComponent(location.hash.slice(1));
  selectSymbol(state.unitsBySymbol.has(wanted) ? wanted : symbols[0].symbol);
  feed.subscribe('status', onStatus, {
    onSubscribed: (error) => error && account.log(`subscribe status: ${error.code || error.message}`),
  });
  document.body.dataset.ready = 'true';
}

window.addEventListener('hashchange', () => {
  const wanted = decodeURIComponent(location.hash.slice(1));
  if (state.unitsBySymbol.has(wanted)) selectSymbol(wanted);
});

// For the browser test and for poking at the console from devtools.
window.rialto = { state, stats, feed, api, account, markets, views: { ladder, tape, depth, candles } };

start();
