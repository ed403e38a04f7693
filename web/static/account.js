// The logged-in side: login (the secret lives only in the signer, in memory), balances and
// open orders (REST, then kept current from the `user` channel), order entry (limit, market,
// stop, stop-limit, iceberg; GTC, IOC, FOK, GTD, DAY) with its total and % of balance, amend
// and cancel, and the order history and fills of the history database (history.js).

import { formatInt, Unit } from './decimal.js';
import { HistoryList, orderHistoryRow, fillRow } from './history.js';

const $ = (id) => document.getElementById(id);

function cell(text, className) {
  const td = document.createElement('td');
  if (className) td.className = className;
  td.textContent = text;
  return td;
}

const TYPE_NAMES = { limit: 'limit', market: 'market', stop: 'stop', stop_limit: 'stop limit' };
// Orders that never rest take only these; a market or stop order is IOC or FOK.
const RESTING_TIFS = ['gtc', 'gtd', 'day'];

/** ns since the epoch (a Number, maybe inexact past 2^53) as local "YYYY-MM-DD HH:MM:SS". */
function localTime(ns) {
  const d = new Date(Math.floor(ns / 1e6));
  const two = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

function describeError(error) {
  if (error && error.code) return `${error.code}: ${error.message}`;
  return String((error && error.message) || error);
}

export class Account {
  constructor({ api, feed, symbol, units, bestPrice, onOwnOrdersChanged, onAdmin, markOf }) {
    this.api = api;
    this.bestPrice = bestPrice;
    this.feed = feed;
    this.symbol = symbol;
    this.units = units;
    this.onOwnOrdersChanged = onOwnOrdersChanged;
    this.onAdmin = onAdmin;
    this.markOf = markOf || (() => null);
    // Futures (docs/api.md, "Futures"): the server's rows, decimal strings as it writes them.
    this.positions = [];
    this.margins = [];
    this.positionsTimer = null;
    this.mode = null; // null, 'trader' or 'admin'
    this.balances = new Map(); // currency -> { available, held }
    this.currencyUnits = new Map(); // currency -> Unit of its minor unit (exchange-info)
    this.orders = new Map(); // order id -> GET /api/v1/orders's row (docs/api.md)
    this.orderRows = new Map(); // order id -> row elements
    this.balanceRows = new Map();
    this.events = [];
    this.history = new HistoryList({
      api,
      path: '/api/v1/orders/history',
      body: $('order-history'),
      note: $('history-note'),
      more: $('history-more'),
      rowOf: orderHistoryRow,
      emptyText: 'log in to see your order history',
    });
    this.fillList = new HistoryList({
      api,
      path: '/api/v1/fills',
      body: $('fills'),
      note: $('fills-note'),
      more: $('fills-more'),
      rowOf: fillRow,
      emptyText: 'log in to see your fills',
    });
    this.refreshing = false;
    this.refreshAgain = false;
    this.refreshTimer = null;
    this.frameRequested = false;
    this.dirty = { balances: false, orders: false, events: false, positions: false };
    this.bind();
  }

  bind() {
    $('login-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.login($('login-key').value.trim(), $('login-secret').value.trim());
    });
    $('logout-button').addEventListener('click', () => this.logout());
    $('order-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.place();
    });
    for (const id of ['order-side', 'order-type', 'order-tif', 'order-price', 'order-qty', 'order-stop', 'order-display', 'order-expiry']) {
      $(id).addEventListener('input', () => this.updateForm());
      $(id).addEventListener('change', () => this.updateForm());
    }
    $('cancel-all').addEventListener('click', () => this.cancelAll());
    for (const button of document.querySelectorAll('[data-percent]')) {
      button.addEventListener('click', () => this.fillPercent(Number(button.dataset.percent)));
    }
    for (const tab of document.querySelectorAll('.subtab')) {
      tab.addEventListener('click', () => {
        for (const other of document.querySelectorAll('.subtab')) {
          other.classList.toggle('active', other === tab);
          $(other.dataset.pane).hidden = other !== tab;
        }
      });
    }
  }

  setSymbol(symbol) {
    const units = this.units(symbol);
    $('price-unit').textContent = `(tick ${units.price.text})`;
    $('qty-unit').textContent = `(lot ${units.qty.text})`;
    this.updateForm();
    this.markDirty('orders');
  }

  /** A click on the ladder: fill in the price, and the side that would trade against it. */
  pickPrice(price, side) {
    const units = this.units(this.symbol());
    if (!units) return;
    $('order-price').value = units.price.format(price);
    $('order-side').value = side;
    this.updateForm();
  }

  status(id, text, kind) {
    const node = $(id);
    node.textContent = text;
    node.className = `status ${kind || ''}`;
  }

  log(line) {
    const now = new Date();
    const stamp = `${now.toTimeString().slice(0, 8)}.${String(now.getMilliseconds()).padStart(3, '0')}`;
    this.events.unshift(`${stamp}  ${line}`);
    if (this.events.length > 300) this.events.length = 300;
    this.markDirty('events');
  }

  async login(key, secret) {
    if (!key || !secret) {
      this.status('login-status', 'enter an API key and its secret', 'error');
      return;
    }
    if (this.mode) await this.logout();
    this.status('login-status', 'logging in…');
    let name = key === 'admin' ? 'admin' : `user ${key}`;
    try {
      await this.api.syncClock().catch(() => {});
      await this.api.setCredentials(key, secret);
      if (key === 'admin') {
        await this.api.signed('GET', '/api/v1/admin/venue');
        this.mode = 'admin';
      } else {
        await this.loadCurrencies();
        const balances = await this.api.signed('GET', '/api/v1/balances?units=decimal');
        this.mode = 'trader';
        this.setBalances(balances);
        await this.refreshOrders();
        await this.refreshPositions();
        const login = await this.feed.login(() => this.api.wsLogin());
        // An issued key (rk…) names its user only in the login's answer.
        if (login && login.user !== undefined && String(login.user) !== key) {
          name = `user ${login.user} (key ${key})`;
        }
        this.feed.subscribe('user', (msg) => this.onUser(msg), {
          isPrivate: true,
          onSubscribed: (error) => error && this.log(`subscribe user: ${describeError(error)}`),
        });
      }
    } catch (error) {
      this.api.clearCredentials();
      this.feed.logout();
      this.mode = null;
      this.status('login-status', `login failed: ${describeError(error)}`, 'error');
      return;
    }
    $('login-secret').value = '';
    $('login-form').hidden = true;
    $('logged-in').hidden = false;
    $('account-name').textContent = name;
    document.body.dataset.account = key;
    this.status('login-status', `logged in as ${name}`, 'ok');
    const trader = this.mode === 'trader';
    $('order-form').hidden = !trader;
    $('balances-box').hidden = !trader;
    $('cancel-all').hidden = !trader;
    $('orders-empty').textContent = trader ? 'no open orders' : 'log in as a trader to see orders';
    this.log(`logged in as ${key}${this.api.signer.webcrypto ? '' : ' (signing without WebCrypto)'}`);
    if (trader) {
      this.history.start();
      this.fillList.start();
    }
    this.onAdmin(this.mode === 'admin');
    this.markDirty('orders');
  }

  async logout() {
    this.api.clearCredentials();
    this.feed.logout();
    const wasAdmin = this.mode === 'admin';
    this.mode = null;
    this.balances.clear();
    this.orders.clear();
    this.positions = [];
    this.margins = [];
    this.history.stop();
    this.fillList.stop();
    $('login-form').hidden = false;
    $('logged-in').hidden = true;
    $('order-form').hidden = true;
    $('balances-box').hidden = true;
    $('cancel-all').hidden = true;
    $('account-name').textContent = '';
    $('orders-empty').textContent = 'log in to see your orders';
    delete document.body.dataset.account;
    this.status('login-status', 'logged out');
    if (wasAdmin) this.onAdmin(false);
    for (const what of ['balances', 'orders', 'positions']) this.markDirty(what);
    this.onOwnOrdersChanged();
  }

  // The private stream.

  onUser(msg) {
    if (msg.type === 'positions') {
      // Positions and margins, decimal strings shown as the server writes them.
      this.setPositions(msg.positions, msg.margins);
      return;
    }
    this.eventUnits(msg);
    switch (msg.type) {
      case 'balances':
        this.setBalances(msg.balances);
        return;
      case 'liquidated':
        this.log(`LIQUIDATED: futures positions in ${msg.currency} closed; equity ${msg.equity} was below ` +
          `maintenance ${msg.maintenance}; the insurance fund paid ${msg.shortfall} (seq ${msg.seq})`);
        this.refreshPositionsSoon();
        break;
      case 'orders':
        // The open orders, sent with the balances on subscribing.
        this.orders.clear();
        for (const o of msg.orders || []) this.orders.set(o.order, this.orderUnits(o));
        this.markDirty('orders');
        return;
      case 'fill': {
        const open = this.orders.get(msg.order);
        if (open) {
          open.remaining -= msg.qty;
          open.filled = (open.filled || 0) + msg.qty;
          open.shown = Math.min(open.shown, open.remaining); // an iceberg's next slice comes with the refresh
          if (open.remaining <= 0) this.orders.delete(msg.order);
          this.markDirty('orders');
        }
        this.log(`fill order ${msg.order} ${msg.side} ${this.fmtQty(msg.symbol, msg.qty)} @ ${this.fmtPrice(msg.symbol, msg.price)} fee ${msg.fee} ${msg.liquidity}`);
        break;
      }
      case 'cancelled':
        this.log(`cancelled order ${msg.order} ${msg.side} ${this.fmtQty(msg.symbol, msg.qty)} (${msg.reason})`);
        break;
      case 'triggered':
        this.log(`triggered stop order ${msg.order} ${msg.side} at stop ${this.fmtPrice(msg.symbol, msg.stop_price)}`);
        break;
      case 'amended':
        this.log(`amended order ${msg.order}: ${this.fmtQty(msg.symbol, msg.remaining)} left @ ${this.fmtPrice(msg.symbol, msg.price)}` +
          `${msg.stop_price ? ` stop ${this.fmtPrice(msg.symbol, msg.stop_price)}` : ''}, priority ${msg.priority}`);
        break;
      case 'accepted':
        this.log(`accepted ${msg.kind} order ${msg.order} seq ${msg.seq}`);
        break;
      case 'rejected':
        this.log(`rejected order ${msg.order}: ${msg.reason}`);
        break;
      default:
        this.log(`user: ${JSON.stringify(msg)}`);
    }
    this.scheduleRefresh();
  }

  fmtPrice(symbol, price) {
    const units = this.units(symbol);
    return units && price !== undefined ? units.price.format(price) : String(price);
  }

  fmtQty(symbol, qty) {
    const units = this.units(symbol);
    return units && qty !== undefined ? units.qty.format(qty) : String(qty);
  }

  // Decimal strings from the API -> integer ticks, lots and minor units (Unit.units, exact).

  /** An open order (GET /api/v1/orders, the `orders` message) in ticks and lots. */
  orderUnits(o) {
    const units = this.units(o.symbol);
    if (!units) return o;
    for (const field of ['price', 'stop_price']) o[field] = units.price.units(o[field]);
    for (const field of ['remaining', 'shown', 'filled']) o[field] = units.qty.units(o[field]);
    o.expire_ts = Number(o.expire_ts);
    return o;
  }

  /** An order event of the `user` channel (fill, cancelled, triggered, amended) in ticks and lots. */
  eventUnits(msg) {
    const units = msg.symbol && this.units(msg.symbol);
    if (!units) return;
    for (const field of ['price', 'stop_price']) if (field in msg) msg[field] = units.price.units(msg[field]);
    for (const field of ['qty', 'remaining']) if (field in msg) msg[field] = units.qty.units(msg[field]);
  }

  /** Balances in each currency's minor units (its decimals when it has no known unit). */
  setBalances(list) {
    this.balances.clear();
    for (const b of list || []) {
      const unit = this.currencyUnits.get(b.currency);
      this.balances.set(b.currency, unit ? { ...b, available: unit.units(b.available), held: unit.units(b.held) } : b);
    }
    this.markDirty('balances');
  }

  // Futures: positions and margin (GET /api/v1/positions and /margin, then the user channel).

  setPositions(positions, margins) {
    this.positions = positions || [];
    this.margins = margins || [];
    this.markDirty('positions');
    this.renderMargin();
  }

  async refreshPositions() {
    if (this.mode !== 'trader') return;
    try {
      const [positions, margins] = await Promise.all([
        this.api.signed('GET', '/api/v1/positions?units=decimal'),
        this.api.signed('GET', '/api/v1/margin?units=decimal'),
      ]);
      if (this.mode === 'trader') this.setPositions(positions, margins);
    } catch (error) {
      // A server without futures endpoints: the panel stays hidden.
      if (!error || error.status !== 404) this.log(`positions: ${describeError(error)}`);
    }
  }

  /** At most a few fetches a second, however many marks move. */
  refreshPositionsSoon() {
    if (this.positionsTimer !== null || this.mode !== 'trader') return;
    this.positionsTimer = setTimeout(() => {
      this.positionsTimer = null;
      this.refreshPositions();
    }, 200);
  }

  /** A future's mark moved (the status channel): its positions' PnL and the form's margin. */
  onMark(symbol) {
    if (this.positions.some((p) => p.symbol === symbol)) this.refreshPositionsSoon();
    if (symbol === this.symbol()) this.renderMargin();
  }

  renderPositions() {
    const trader = this.mode === 'trader';
    // Shown on a venue with futures (the server then reports a margin per quote currency).
    $('positions-box').hidden = !trader || (this.margins.length === 0 && this.positions.length === 0);
    const rows = this.positions.map((p) => {
      const tr = document.createElement('tr');
      tr.dataset.testid = 'position-row';
      tr.dataset.symbol = p.symbol;
      const pnl = String(p.unrealised_pnl ?? '—');
      tr.append(
        cell(p.symbol),
        cell(`${p.side} ${String(p.size).replace(/^-/, '')}`, p.side === 'long' ? 'bid' : 'ask'),
        cell(String(p.entry_price ?? '—'), 'num'),
        cell(String(p.mark ?? '—'), 'num'),
        cell(`${pnl} ${p.quote}`, `num ${pnl.startsWith('-') ? 'ask' : 'bid'}`),
        cell(p.liquidation_price === null || p.liquidation_price === undefined ? '—' : String(p.liquidation_price), 'num'),
      );
      return tr;
    });
    $('positions').replaceChildren(...rows);
    $('positions-empty').hidden = rows.length > 0;
    $('margins').replaceChildren(...this.margins.map((m) => {
      const tr = document.createElement('tr');
      tr.dataset.testid = 'margin-row';
      tr.append(cell(m.currency), cell(String(m.equity), 'num'), cell(String(m.initial), 'num'),
        cell(String(m.maintenance), 'num'), cell(String(m.available), 'num'));
      return tr;
    }));
  }

  /**
   * On a future: what the order in the form adds to the initial margin at most, `qty ×
   * initial_margin` plus its open loss at the mark (docs/rules.md, "Margin"), beside the margin
   * available in the quote currency. BigInt minor units throughout.
   */
  renderMargin() {
    const node = $('order-margin');
    const units = this.units(this.symbol());
    const info = units && units.info;
    if (!info || info.type !== 'future' || this.mode !== 'trader') {
      node.hidden = true;
      return;
    }
    node.hidden = false;
    const quote = this.currencyUnits.get(info.quote);
    const margin = this.margins.find((m) => m.currency === info.quote);
    const available = margin ? `${margin.available} ${info.quote} available` : '';
    const qtyText = $('order-qty').value.trim();
    const qty = qtyText ? units.qty.parse(qtyText) : null;
    const side = $('order-side').value;
    const price = this.costPrice(units, side);
    const mark = this.markOf(info.symbol);
    if (!quote || !qty || qty.error || !price || mark === null) {
      node.textContent = `Margin: ${available || '—'}`;
      return;
    }
    const lots = BigInt(qty.value);
    const perLot = quote.units(String(info.initial_margin));
    const through = side === 'buy' ? price.ticks - BigInt(mark) : BigInt(mark) - price.ticks;
    const openLoss = through > 0n ? lots * through * BigInt(info.quote_scale) : 0n;
    const needs = lots * BigInt(perLot) + openLoss;
    node.textContent = `Margin: this order ≤ ${this.amount(info.quote, needs)} ${info.quote}` +
      `${openLoss > 0n ? ` (open loss ${this.amount(info.quote, openLoss)})` : ''}${available ? ` · ${available}` : ''}`;
    node.dataset.minor = String(needs);
  }

  /**
   * The open orders, the order history and the fills from REST, at most a few times a second
   * however busy the stream is.
   */
  scheduleRefresh() {
    if (this.refreshTimer !== null) return;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = null;
      this.refreshOrders().catch((error) => this.log(`open orders: ${describeError(error)}`));
      this.history.refresh();
      this.fillList.refresh();
    }, 150);
  }

  async refreshOrders() {
    if (this.mode !== 'trader') return;
    if (this.refreshing) {
      this.refreshAgain = true;
      return;
    }
    this.refreshing = true;
    try {
      do {
        this.refreshAgain = false;
        const list = await this.api.signed('GET', '/api/v1/orders?units=decimal');
        if (this.mode !== 'trader') return;
        this.orders.clear();
        for (const o of list || []) this.orders.set(o.order, this.orderUnits(o));
        this.markDirty('orders');
      } while (this.refreshAgain);
    } finally {
      this.refreshing = false;
    }
  }

  /** "side:price" of the user's orders on the current symbol, for marking the ladder. */
  ownPrices() {
    const set = new Set();
    const symbol = this.symbol();
    for (const o of this.orders.values()) if (o.symbol === symbol && !o.pending) set.add(`${o.side}:${o.price}`);
    return set;
  }

  // Order entry.

  readForm() {
    const symbol = this.symbol();
    const units = this.units(symbol);
    const side = $('order-side').value;
    const type = $('order-type').value;
    const tif = $('order-tif').value;
    const body = { symbol, side, type, tif };
    const qtyText = $('order-qty').value.trim();
    const priceText = $('order-price').value.trim();
    if (!qtyText) return { error: 'enter a quantity' };
    const qty = units.qty.parse(qtyText);
    if (qty.error) return { error: `qty: ${qty.error}` };
    body.qty = qty.value;
    if (type === 'stop' || type === 'stop_limit') {
      const stopText = $('order-stop').value.trim();
      if (!stopText) return { error: 'enter a stop price' };
      const stop = units.price.parse(stopText);
      if (stop.error) return { error: `stop price: ${stop.error}` };
      body.stop_price = stop.value;
    }
    if (priceText) {
      const price = units.price.parse(priceText);
      if (price.error) return { error: `price: ${price.error}` };
      body.price = price.value;
    } else if (type === 'limit' || type === 'stop_limit') {
      return { error: 'enter a price' };
    }
    const displayText = $('order-display').value.trim();
    if (displayText && type === 'limit') {
      const display = units.qty.parse(displayText);
      if (display.error) return { error: `display qty: ${display.error}` };
      body.display_qty = display.value;
    }
    if ($('order-post-only').checked) body.post_only = true;
    if (tif === 'gtd') {
      const text = $('order-expiry').value;
      const ms = text ? new Date(text).getTime() : NaN;
      if (!Number.isFinite(ms)) return { error: 'enter when the order expires' };
      // ns exceed 2^53: the body is written with the expiry as exact integer text.
      const expireNs = BigInt(ms) * 1000000n;
      return { body, expireNs };
    }
    return { body };
  }

  /**
   * The form's order as JSON text: prices and quantities as decimal strings in the symbol's
   * tick and lot (the API's units), a GTD expiry in ns as an integer (it passes 2^53).
   */
  static bodyText(form, units) {
    const body = { ...form.body };
    for (const field of ['price', 'stop_price']) if (field in body) body[field] = units.price.format(body[field]);
    for (const field of ['qty', 'display_qty']) if (field in body) body[field] = units.qty.format(body[field]);
    const json = JSON.stringify(body);
    return form.expireNs === undefined ? json : `${json.slice(0, -1)},"expire_ts":${form.expireNs}}`;
  }

  updateForm() {
    const side = $('order-side').value;
    const button = $('place-button');
    button.className = `place ${side}`;
    button.textContent = `${side === 'buy' ? 'Buy' : 'Sell'} ${this.symbol() || ''}`;
    const type = $('order-type').value;
    const tifSelect = $('order-tif');
    // A market or stop order never rests: GTC, GTD and DAY are not choices for it (the engine
    // says invalid_order).
    const neverRests = type === 'market' || type === 'stop';
    for (const tif of RESTING_TIFS) tifSelect.querySelector(`option[value="${tif}"]`).disabled = neverRests;
    if (neverRests && RESTING_TIFS.includes(tifSelect.value)) tifSelect.value = 'ioc';
    const wasNeverRests = this.lastType === 'market' || this.lastType === 'stop';
    if (!neverRests && wasNeverRests && tifSelect.value === 'ioc') tifSelect.value = 'gtc';
    this.lastType = type;
    const stop = type === 'stop' || type === 'stop_limit';
    $('stop-field').hidden = !stop;
    // An iceberg is a limit order (docs/rules.md, "Iceberg orders").
    $('display-field').hidden = type !== 'limit';
    $('expiry-field').hidden = tifSelect.value !== 'gtd';
    $('order-price').placeholder = {
      market: 'protection price (optional)',
      stop: 'protection price (a buy needs one)',
    }[type] || 'limit price';
    const form = this.units(this.symbol()) ? this.readForm() : { error: '' };
    const b = form.body;
    $('order-preview').textContent = b
      ? [
        `${formatInt(b.qty)} lots`,
        b.price !== undefined ? `@ ${formatInt(b.price)} ticks` : 'at market',
        b.stop_price !== undefined ? `stop ${formatInt(b.stop_price)}` : '',
        b.display_qty !== undefined ? `showing ${formatInt(b.display_qty)}` : '',
        form.expireNs !== undefined ? `until ${form.expireNs} ns` : '',
      ].filter(Boolean).join(' ')
      : '';
    this.renderTotal();
    this.renderMargin();
  }

  /**
   * The price a buy is costed at: the form's price, else (a market or stop order without a
   * protection price) the best price it would take, in ticks; null when there is neither.
   */
  costPrice(units, side) {
    const text = $('order-price').value.trim();
    if (text) {
      const price = units.price.parse(text);
      return price.error ? null : { ticks: BigInt(price.value), estimate: false };
    }
    const best = this.bestPrice(side);
    return best ? { ticks: BigInt(best), estimate: true } : null;
  }

  /** Price x qty in the quote currency's decimals, exactly (quote minor units in BigInt). */
  renderTotal() {
    const node = $('order-total');
    const units = this.units(this.symbol());
    const qtyText = $('order-qty').value.trim();
    const qty = units && qtyText ? units.qty.parse(qtyText) : null;
    const price = units ? this.costPrice(units, $('order-side').value) : null;
    if (!units || !qty || qty.error || !price) {
      node.textContent = '—';
      delete node.dataset.minor;
      return;
    }
    const info = units.info;
    const minor = price.ticks * BigInt(qty.value) * BigInt(info.quote_scale);
    node.dataset.minor = String(minor);
    node.textContent = `${price.estimate ? '≈ ' : ''}${this.amount(info.quote, minor)} ${info.quote}`;
  }

  /**
   * The % of balance buttons: the largest whole number of lots that `percent` of the available
   * balance holds (docs/rules.md, "The hold"): a sell `qty × base_scale` base, a buy
   * `qty × (price × quote_scale + taker_fee)` quote. BigInt throughout: balances pass 2^53.
   */
  fillPercent(percent) {
    const units = this.units(this.symbol());
    if (!units || this.mode !== 'trader') return;
    const info = units.info;
    const side = $('order-side').value;
    const currency = side === 'sell' ? info.base : info.quote;
    const balance = this.balances.get(currency);
    const available = balance ? BigInt(balance.available) : 0n;
    let perLot;
    if (side === 'sell') {
      perLot = BigInt(info.base_scale);
    } else {
      const price = this.costPrice(units, side);
      if (!price) {
        this.status('order-status', `enter a price to buy ${percent}% of the ${currency} available`, 'error');
        return;
      }
      const fee = BigInt(info.taker_fee_units || 0);
      perLot = price.ticks * BigInt(info.quote_scale) + (fee > 0n ? fee : 0n);
    }
    const lots = perLot > 0n ? (available * BigInt(percent)) / 100n / perLot : 0n;
    if (lots <= 0n) {
      this.status('order-status', `${percent}% of the ${currency} available is less than one lot`, 'error');
      return;
    }
    $('order-qty').value = units.qty.format(lots);
    this.status('order-status', '');
    this.updateForm();
  }

  async place() {
    const form = this.readForm();
    if (form.error) {
      this.status('order-status', form.error, 'error');
      return;
    }
    this.status('order-status', 'sending…');
    try {
      const text = Account.bodyText(form, this.units(form.body.symbol));
      const answer = await this.api.signed('POST', '/api/v1/orders?units=decimal', text);
      this.status('order-status', `${answer.status} order ${answer.order} (seq ${answer.seq})`, 'ok');
      this.log(`placed ${form.body.side} ${form.body.type} order ${answer.order}`);
    } catch (error) {
      this.status('order-status', describeError(error), 'error');
    }
    this.scheduleRefresh();
  }

  async cancel(order) {
    try {
      const answer = await this.api.signed('DELETE', `/api/v1/orders/${order}?units=decimal`);
      this.status('order-status', `cancel order ${order}: ${answer.status}`, 'ok');
    } catch (error) {
      this.status('order-status', `cancel order ${order}: ${describeError(error)}`, 'error');
    }
    this.scheduleRefresh();
  }

  /**
   * Amends an order (PATCH, docs/api.md): the fields whose text differs from the order's, a
   * new price, a new total quantity (filled + remaining) and, for a pending stop, a new stop price.
   */
  async amend(order, { priceText, qtyText, stopText }) {
    const o = this.orders.get(order);
    const units = o && this.units(o.symbol);
    if (!units) return;
    const body = {};
    const fields = [
      ['price', priceText, units.price, o.price],
      ['qty', qtyText, units.qty, o.filled + o.remaining],
      ['stop_price', stopText, units.price, o.stop_price],
    ];
    for (const [name, text, unit, now] of fields) {
      if (!text) continue;
      const parsed = unit.parse(text);
      if (parsed.error) {
        this.status('order-status', `amend order ${order}: ${name}: ${parsed.error}`, 'error');
        return;
      }
      if (parsed.value !== now) body[name] = unit.format(parsed.value);
    }
    if (Object.keys(body).length === 0) {
      this.status('order-status', `amend order ${order}: nothing changed`, 'error');
      return;
    }
    try {
      const answer = await this.api.signed('PATCH', `/api/v1/orders/${order}?units=decimal`, body);
      this.status('order-status', `amend order ${order}: ${answer.status}`, 'ok');
    } catch (error) {
      this.status('order-status', `amend order ${order}: ${describeError(error)}`, 'error');
    }
    this.scheduleRefresh();
  }

  async cancelAll() {
    const symbol = this.symbol();
    try {
      const answer = await this.api.signed('DELETE', `/api/v1/orders?symbol=${encodeURIComponent(symbol)}&units=decimal`);
      this.status('order-status', `mass cancel ${symbol}: ${answer.status}`, 'ok');
    } catch (error) {
      this.status('order-status', `mass cancel: ${describeError(error)}`, 'error');
    }
    this.scheduleRefresh();
  }

  // Rendering, once per frame at most.

  markDirty(what) {
    this.dirty[what] = true;
    if (this.frameRequested) return;
    this.frameRequested = true;
    requestAnimationFrame(() => {
      this.frameRequested = false;
      this.render();
    });
  }

  render() {
    if (this.dirty.balances) this.renderBalances();
    if (this.dirty.orders) {
      this.renderOrders();
      this.onOwnOrdersChanged();
    }
    if (this.dirty.events) $('events').textContent = this.events.join('\n');
    if (this.dirty.positions) this.renderPositions();
    this.dirty = { balances: false, orders: false, events: false, positions: false };
  }

  /** Each currency's minor unit, so that balances show in its decimals ("10,000,000.00000"). */
  async loadCurrencies() {
    try {
      const info = await this.api.get('/api/v1/exchange-info?units=decimal');
      for (const c of info.currencies || []) this.currencyUnits.set(c.currency, new Unit(c.minor_unit));
    } catch (error) {
      this.log(`exchange-info: ${describeError(error)}`);
    }
  }

  /** An amount of `currency` in its decimals (minor units when they are not known). */
  amount(currency, minor) {
    const unit = this.currencyUnits.get(currency);
    if (typeof minor === 'string') return minor; // a currency without a known unit: as written
    return unit ? unit.format(minor, { grouped: true }) : formatInt(minor);
  }

  renderBalances() {
    const body = $('balances');
    for (const [currency, row] of this.balanceRows) {
      if (!this.balances.has(currency)) {
        row.tr.remove();
        this.balanceRows.delete(currency);
      }
    }
    for (const b of this.balances.values()) {
      let row = this.balanceRows.get(b.currency);
      if (!row) {
        const tr = document.createElement('tr');
        tr.dataset.testid = 'balance-row';
        tr.dataset.currency = b.currency;
        row = { tr, available: cell('', 'num'), held: cell('', 'num') };
        tr.append(cell(b.currency), row.available, row.held);
        body.append(tr);
        this.balanceRows.set(b.currency, row);
      }
      row.tr.dataset.available = String(b.available);
      row.tr.dataset.held = String(b.held);
      row.available.textContent = this.amount(b.currency, b.available);
      row.held.textContent = this.amount(b.currency, b.held);
    }
  }

  renderOrders() {
    const body = $('open-orders');
    for (const [order, row] of this.orderRows) {
      if (!this.orders.has(order)) {
        row.tr.remove();
        this.orderRows.delete(order);
      }
    }
    const sorted = [...this.orders.values()].sort((a, b) => a.order - b.order);
    for (const o of sorted) {
      let row = this.orderRow(o, body);
      const units = this.units(o.symbol);
      const price = (p) => (units ? units.price.format(p) : String(p));
      const qty = (q) => (units ? units.qty.format(q) : String(q));
      const total = o.filled + o.remaining;
      const iceberg = !o.pending && o.shown < o.remaining;
      const d = row.tr.dataset;
      d.type = o.type;
      d.tif = o.tif;
      d.price = String(o.price);
      d.stopPrice = String(o.stop_price);
      d.pending = String(o.pending);
      d.remaining = String(o.remaining);
      d.shown = String(o.shown);
      d.filled = String(o.filled);
      d.iceberg = String(iceberg);
      row.type.textContent = `${TYPE_NAMES[o.type] || o.type}${iceberg ? ' iceberg' : ''}`;
      row.tif.textContent = o.tif.toUpperCase();
      row.price.textContent = o.price ? price(o.price) : '—';
      row.stop.textContent = o.pending ? `${price(o.stop_price)} pending` : '';
      row.stop.className = o.pending ? 'num pending' : 'num';
      row.qty.textContent = o.pending ? `— / ${qty(o.remaining)}` : `${qty(o.shown)} / ${qty(o.remaining)}`;
      row.filled.textContent = qty(o.filled);
      row.expires.textContent = o.expire_ts ? localTime(o.expire_ts) : '';
      // The amend fields show the order as it is, unless the user is typing in them.
      const shown = `${o.price}:${total}:${o.stop_price}`;
      const typing = [row.priceInput, row.qtyInput, row.stopInput].includes(document.activeElement);
      if (row.shownTerms !== shown && !typing) {
        row.priceInput.value = o.price ? price(o.price) : '';
        row.qtyInput.value = qty(total);
        row.stopInput.value = o.pending ? price(o.stop_price) : '';
        row.shownTerms = shown;
      }
      row.stopInput.hidden = !o.pending;
    }
    $('open-count').textContent = this.orders.size ? `(${this.orders.size})` : '';
    $('orders-empty').hidden = this.orders.size > 0;
  }

  /** The row of an order, made on first sight: its cells, amend fields and buttons. */
  orderRow(o, body) {
    const existing = this.orderRows.get(o.order);
    if (existing) return existing;
    const tr = document.createElement('tr');
    tr.dataset.testid = 'open-order';
    tr.dataset.order = String(o.order);
    tr.dataset.side = o.side;
    tr.dataset.symbol = o.symbol;
    const input = (testid, className, placeholder) => {
      const node = document.createElement('input');
      node.dataset.testid = testid;
      if (className) node.className = className;
      node.placeholder = placeholder;
      node.spellcheck = false;
      return node;
    };
    const priceInput = input('amend-price', '', 'price');
    const qtyInput = input('amend-qty', 'qty', 'total qty');
    const stopInput = input('amend-stop', '', 'stop price');
    const amend = () => this.amend(o.order, {
      priceText: priceInput.value.trim(),
      qtyText: qtyInput.value.trim(),
      stopText: stopInput.hidden ? '' : stopInput.value.trim(),
    });
    const amendButton = document.createElement('button');
    amendButton.className = 'small';
    amendButton.textContent = 'Amend';
    amendButton.dataset.testid = 'amend-button';
    amendButton.addEventListener('click', amend);
    for (const node of [priceInput, qtyInput, stopInput]) {
      node.addEventListener('keydown', (e) => {
        if (e.key === 'Enter') amend();
      });
    }
    const cancelButton = document.createElement('button');
    cancelButton.className = 'small danger';
    cancelButton.textContent = 'Cancel';
    cancelButton.dataset.testid = 'cancel-button';
    cancelButton.addEventListener('click', () => this.cancel(o.order));
    const amendCell = cell('');
    amendCell.append(priceInput, ' ', qtyInput, ' ', stopInput, ' ', amendButton);
    const cancelCell = cell('');
    cancelCell.append(cancelButton);
    const row = {
      tr,
      type: cell(''),
      tif: cell(''),
      price: cell('', 'num'),
      stop: cell('', 'num'),
      qty: cell('', 'num'),
      filled: cell('', 'num'),
      expires: cell('', 'num'),
      priceInput,
      qtyInput,
      stopInput,
      shownTerms: null,
    };
    tr.append(cell(String(o.order)), cell(o.symbol), cell(o.side, o.side), row.type, row.tif, row.price, row.stop,
      row.qty, row.filled, row.expires, amendCell, cancelCell);
    body.append(tr);
    this.orderRows.set(o.order, row);
    return row;
  }
}
