// The admin view: venue totals, symbols, users and their balances, deposits and withdrawals,
// snapshots, the trading controls (phase, band, reference price, user suspension, order-id
// window), and the latency histograms the server exposes on /metrics.

import { formatInt, bandLimits } from './decimal.js';
import { HistogramChart, formatSeconds } from './charts.js';
import { parseHistograms, parseScalars, delta, quantile } from './metrics.js';
import { KeysPanel } from './admin-keys.js';

const $ = (id) => document.getElementById(id);

function describeError(error) {
  return error && error.code ? `${error.code}: ${error.message}` : String((error && error.message) || error);
}

function show(value) {
  if (typeof value === 'number' && Number.isInteger(value)) return formatInt(value);
  if (value === null || value === undefined) return '';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

function table(rows, columns, firstHeader) {
  const t = document.createElement('table');
  t.className = 'grid-table';
  const head = document.createElement('tr');
  for (const c of [...(firstHeader ? [firstHeader] : []), ...columns]) {
    const th = document.createElement('th');
    th.textContent = c;
    head.append(th);
  }
  const thead = document.createElement('thead');
  thead.append(head);
  const tbody = document.createElement('tbody');
  for (const [key, row] of rows) {
    const tr = document.createElement('tr');
    const cells = firstHeader ? [key, ...columns.map((c) => row[c])] : columns.map((c) => row[c]);
    for (const v of cells) {
      const td = document.createElement('td');
      td.textContent = show(v);
      tr.append(td);
    }
    tbody.append(tr);
  }
  t.append(thead, tbody);
  return t;
}

// Names that identify a row go first in a table; the server's JSON has its keys sorted.
const KEY_COLUMNS = ['user', 'currency', 'symbol', 'order', 'side', 'price', 'available', 'remaining', 'held'];

function columnsOf(objects) {
  const keys = [...new Set(objects.flatMap((x) => Object.keys(x)))];
  const rank = (k) => (KEY_COLUMNS.includes(k) ? KEY_COLUMNS.indexOf(k) : KEY_COLUMNS.length);
  return keys.sort((a, b) => rank(a) - rank(b));
}

/** Renders JSON of a shape this view does not know exactly: arrays of objects become tables. */
export function renderJson(container, data) {
  container.replaceChildren();
  container.classList.remove('dim');
  if (Array.isArray(data) && data.length === 0) {
    container.textContent = 'none';
    container.classList.add('dim');
  } else if (Array.isArray(data) && data.every((x) => x && typeof x === 'object' && !Array.isArray(x))) {
    container.append(table(data.map((x, i) => [i, x]), columnsOf(data)));
  } else if (data && typeof data === 'object' && !Array.isArray(data)) {
    const values = Object.values(data);
    if (values.length && values.every((v) => v && typeof v === 'object' && !Array.isArray(v))) {
      container.append(table(Object.entries(data), columnsOf(values), ''));
    } else {
      // Plain values first (a user's id), then the nested lists.
      const entries = Object.entries(data).sort(([, a], [, b]) => (typeof a === 'object') - (typeof b === 'object'));
      for (const [key, value] of entries) {
        const h = document.createElement('h3');
        h.textContent = key;
        const box = document.createElement('div');
        if (value && typeof value === 'object') renderJson(box, value);
        else box.textContent = show(value);
        container.append(h, box);
      }
    }
  } else {
    const pre = document.createElement('pre');
    pre.textContent = JSON.stringify(data, null, 2);
    container.append(pre);
  }
}

// Histograms worth showing first; any other histogram follows.
const PREFERRED = [/engine/, /roundtrip|round_trip|gateway/, /journal|fsync/];

export class AdminView {
  constructor({ api, symbols, status, units, log }) {
    this.api = api;
    this.symbols = symbols;
    this.statuses = status; // symbol -> { phase, last, reference, band_bps }, kept live by app.js
    this.units = units;
    this.log = log;
    this.visible = false;
    this.timer = null;
    this.previous = new Map(); // series key -> the previous scrape
    this.cards = new Map(); // series key -> { node, chart, quantiles }
    $('snapshot-button').addEventListener('click', () => this.snapshot());
    $('admin-refresh').addEventListener('click', () => this.refresh());
    $('deposit-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.deposit();
    });
    $('find-user-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const user = Number($('find-user-id').value.trim());
      if (Number.isSafeInteger(user)) this.loadUser(user);
    });
    $('add-user-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.addUser();
    });
    $('metrics-window').addEventListener('change', () => this.scrape());
    this.bindControls();
    // API keys: a panel of its own (admin-keys.js), inside the Users section.
    this.keys = new KeysPanel({ api, container: $('admin-keys'), log });
  }

  // Trading controls: each sends one operator command and shows the venue's answer.

  bindControls() {
    const onSubmit = (id, run) => $(id).addEventListener('submit', (e) => {
      e.preventDefault();
      run();
    });
    const symbol = () => $('control-symbol').value;
    const path = (what) => `/api/v1/admin/symbols/${encodeURIComponent(symbol())}/${what}`;
    onSubmit('phase-form', () => {
      const phase = $('control-phase').value;
      this.control(`set_phase ${symbol()} ${phase}`, path('phase'), { phase });
    });
    onSubmit('band-form', () => {
      const text = $('control-band').value.trim();
      const bps = Number(text);
      if (!text || !Number.isSafeInteger(bps)) {
        this.controlStatus('the band is a whole number of basis points (0: none)', 'error');
        return;
      }
      this.control(`set_band ${symbol()} ${bps} bps`, path('band'), { band_bps: bps });
    });
    onSubmit('ref-form', () => {
      const units = this.units(symbol());
      const text = $('control-ref').value.trim();
      const price = units ? units.price.parse(text) : { error: 'unknown symbol' };
      if (price.error) {
        this.controlStatus(`reference price: ${price.error}`, 'error');
        return;
      }
      this.control(`set_ref_price ${symbol()} ${text}`, path('ref_price'), { price: price.value });
    });
    onSubmit('mark-form', () => {
      const units = this.units(symbol());
      const text = $('control-mark').value.trim();
      const price = units ? units.price.parse(text) : { error: 'unknown symbol' };
      if (price.error) {
        this.controlStatus(`mark price: ${price.error}`, 'error');
        return;
      }
      this.control(`set_mark_price ${symbol()} ${text}`, path('mark_price'), { price: price.value });
    });
    onSubmit('insurance-form', async () => {
      const currency = $('insurance-currency').value;
      const amount = $('insurance-amount').value.trim();
      const tx = $('insurance-tx').value.trim() || String(Date.now());
      if (!/^-?\d+$/.test(amount) || !/^\d+$/.test(tx)) {
        this.controlStatus('fund insurance: the amount (minor units) and tx are whole numbers', 'error');
        return;
      }
      // Integer text: amounts in minor units may exceed 2^53.
      const body = `{"currency":${JSON.stringify(currency)},"amount":${amount},"tx":${tx}}`;
      await this.control(`fund_insurance ${currency} ${amount}`, '/api/v1/admin/insurance', body);
      this.loadVenue();
    });
    const user = () => {
      const text = $('control-user').value.trim();
      const id = Number(text);
      if (!text || !Number.isSafeInteger(id)) {
        this.controlStatus('the user id must be a whole number', 'error');
        return null;
      }
      return id;
    };
    onSubmit('suspend-form', () => {
      const id = user();
      if (id !== null) this.control(`suspend_user ${id}`, `/api/v1/admin/users/${id}/suspend`);
    });
    $('resume-button').addEventListener('click', () => {
      const id = user();
      if (id !== null) this.control(`resume_user ${id}`, `/api/v1/admin/users/${id}/resume`);
    });
    onSubmit('window-form', async () => {
      const text = $('control-window').value.trim();
      if (!/^-?\d+$/.test(text)) {
        this.controlStatus('the window is a whole number of ns', 'error');
        return;
      }
      // Written as integer text: a window in ns may exceed 2^53.
      await this.control(`set_order_id_window ${text} ns`, '/api/v1/admin/settings/order_id_window', `{"window_ns":${text}}`);
      this.loadSettings();
    });
  }

  controlStatus(text, kind) {
    const node = $('control-status');
    node.textContent = text;
    node.className = `status ${kind || ''}`;
  }

  /** One operator command: `accepted (seq N)` or the engine's reason, under the controls. */
  async control(label, path, body) {
    this.controlStatus(`${label}: sending…`);
    try {
      const answer = await this.api.signed('POST', path, body);
      const seq = answer && answer.seq !== undefined ? ` (seq ${answer.seq})` : '';
      this.controlStatus(`${label}: accepted${seq}`, 'ok');
      this.log(`${label}: accepted${seq}`);
    } catch (error) {
      this.controlStatus(`${label}: rejected ${describeError(error)}`, 'error');
    }
  }

  async loadSettings() {
    try {
      const settings = await this.api.signed('GET', '/api/v1/admin/settings');
      const ns = settings.order_id_window_ns;
      $('current-window').textContent = `${formatInt(ns)} ns${ns ? ` (${(ns / 1e9).toLocaleString('en-US')} s)` : ''}`;
    } catch (error) {
      $('current-window').textContent = describeError(error);
    }
  }

  /** Each symbol's phase, last and reference price and band, as the status channel says. */
  renderStatus() {
    if (!this.visible) return;
    const select = $('control-symbol');
    const names = this.symbols().map((s) => s.symbol);
    if ([...select.options].map((o) => o.value).join() !== names.join()) {
      const chosen = select.value;
      select.replaceChildren(
        ...names.map((name) => {
          const option = document.createElement('option');
          option.value = name;
          option.textContent = name;
          return option;
        }),
      );
      if (names.includes(chosen)) select.value = chosen;
    }
    const rows = names.map((name) => {
      const s = this.statuses().get(name);
      const units = this.units(name);
      const price = (p) => (p && units ? units.price.format(p) : p ? String(p) : '—');
      const limits = s && bandLimits(s.reference, s.band_bps);
      let band = 'none';
      if (s && s.band_bps) band = `${formatInt(s.band_bps)} bps${limits ? `: ${price(limits.lo)}–${price(limits.hi)}` : ''}`;
      const mark = s && s.type === 'future' ? price(s.mark) : '';
      return [name, { phase: s ? s.phase : '?', reference: s ? price(s.reference) : '', band, mark }];
    });
    const t = table(rows, ['phase', 'reference', 'band', 'mark'], 'symbol');
    t.querySelectorAll('tbody tr').forEach((tr, i) => {
      tr.dataset.testid = 'admin-phase-row';
      tr.dataset.symbol = rows[i][0];
      tr.dataset.phase = rows[i][1].phase;
    });
    $('admin-phases').replaceChildren(t);
  }

  status(text, kind) {
    const node = $('admin-status');
    node.textContent = text;
    node.className = `status ${kind || ''}`;
  }

  show() {
    this.visible = true;
    this.refresh();
    if (this.timer === null) this.timer = setInterval(() => this.scrape(), 2000);
  }

  hide() {
    this.visible = false;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  async refresh() {
    this.renderSymbols();
    this.renderStatus();
    await Promise.all([this.loadVenue(), this.loadUsers(), this.loadSettings(), this.scrape(), this.keys.refresh()]);
  }

  renderSymbols() {
    const symbols = this.symbols();
    const columns = ['id', 'base', 'quote', 'base_scale', 'quote_scale', 'maker_fee', 'taker_fee', 'price_tick', 'qty_lot'];
    $('admin-symbols').replaceChildren(table(symbols.map((s) => [s.symbol, s]), columns, 'symbol'));
    // A future's base names its underlying, no currency.
    const currencies = [...new Set(symbols.flatMap((s) => (s.type === 'future' ? [s.quote] : [s.base, s.quote])))].sort();
    for (const select of [$('deposit-currency'), $('insurance-currency')]) {
      if (select.options.length !== currencies.length) {
        select.replaceChildren(
          ...currencies.map((c) => {
            const option = document.createElement('option');
            option.value = c;
            option.textContent = c;
            return option;
          }),
        );
      }
    }
  }

  async loadVenue() {
    try {
      const totals = await this.api.signed('GET', '/api/v1/admin/venue');
      renderJson($('admin-venue'), totals);
      // The insurance fund of each currency some future is quoted in (or that has one).
      const quotes = new Set(this.symbols().filter((s) => s.type === 'future').map((s) => s.quote));
      const funds = (totals || []).filter((t) => quotes.has(t.currency) || t.insurance);
      const node = $('admin-insurance');
      if (funds.length) {
        renderJson(node, funds.map((t) => ({ currency: t.currency, insurance: t.insurance, position_cost: t.position_cost })));
      } else {
        node.textContent = 'no futures';
        node.classList.add('dim');
      }
    } catch (error) {
      $('admin-venue').textContent = describeError(error);
    }
  }

  async loadUsers() {
    try {
      const users = await this.api.signed('GET', '/api/v1/admin/users');
      const buttons = (users || []).map((u) => {
        const id = typeof u === 'object' ? u.user : u;
        const button = document.createElement('button');
        button.textContent = String(id);
        button.dataset.testid = 'admin-user';
        button.addEventListener('click', () => this.loadUser(id));
        return button;
      });
      $('admin-users').replaceChildren(...buttons);
    } catch (error) {
      $('admin-users').textContent = `GET /api/v1/admin/users: ${describeError(error)}`;
    }
  }

  async loadUser(user) {
    $('admin-user-title').textContent = `user ${user}`;
    try {
      renderJson($('admin-user-detail'), await this.api.signed('GET', `/api/v1/admin/balances/${user}`));
    } catch (error) {
      $('admin-user-detail').textContent = describeError(error);
    }
  }

  async snapshot() {
    this.status('taking a snapshot…');
    try {
      const answer = await this.api.signed('POST', '/api/v1/admin/snapshot');
      const at = answer && answer.seq !== undefined ? ` at seq ${answer.seq}` : '';
      const hash = answer && answer.state_hash ? `, state hash ${answer.state_hash}` : '';
      this.status(`snapshot taken${at}${hash}`, 'ok');
    } catch (error) {
      this.status(`snapshot: ${describeError(error)}`, 'error');
    }
  }

  async deposit() {
    const kind = $('deposit-kind').value;
    const user = Number($('deposit-user').value.trim());
    const amount = Number($('deposit-amount').value.trim());
    const txText = $('deposit-tx').value.trim();
    const tx = txText ? Number(txText) : Date.now();
    if (!Number.isSafeInteger(user) || !Number.isSafeInteger(amount) || amount <= 0 || !Number.isSafeInteger(tx)) {
      this.status('user, amount (> 0) and tx must be whole numbers', 'error');
      return;
    }
    const body = { user, currency: $('deposit-currency').value, amount, tx };
    try {
      await this.api.signed('POST', `/api/v1/admin/${kind}`, body);
      this.status(`${kind === 'deposits' ? 'deposit' : 'withdrawal'} tx ${tx}: ${formatInt(amount)} ${body.currency} for user ${user} accepted`, 'ok');
      this.loadVenue();
      if ($('admin-user-title').textContent === `user ${user}`) this.loadUser(user);
    } catch (error) {
      this.status(`${kind}: ${describeError(error)}`, 'error');
    }
  }

  async addUser() {
    const user = Number($('add-user-id').value.trim());
    if (!Number.isSafeInteger(user)) {
      this.status('the user id must be a whole number', 'error');
      return;
    }
    try {
      const answer = await this.api.signed('POST', '/api/v1/admin/users', { user });
      this.status(`user ${answer.user} added; secret ${answer.secret}`, 'ok');
      this.loadUsers();
    } catch (error) {
      this.status(`add user: ${describeError(error)}`, 'error');
    }
  }

  async scrape() {
    if (!this.visible) return;
    let text;
    try {
      text = await this.api.getText('/metrics');
    } catch (error) {
      $('histograms').textContent = `/metrics: ${describeError(error)}`;
      return;
    }
    this.renderScalars(parseScalars(text));
    const recent = $('metrics-window').value === 'recent';
    const series = parseHistograms(text);
    const rank = (s) => {
      const i = PREFERRED.findIndex((re) => re.test(s.name));
      return i < 0 ? PREFERRED.length : i;
    };
    series.sort((a, b) => rank(a) - rank(b) || a.key.localeCompare(b.key));
    const container = $('histograms');
    if (series.length === 0) container.textContent = 'no histograms in /metrics';
    else if (!container.querySelector('.histogram')) container.replaceChildren();
    for (const s of series) {
      const shown = recent ? delta(s, this.previous.get(s.key)) : s;
      this.previous.set(s.key, s);
      let card = this.cards.get(s.key);
      if (!card) card = this.card(s, container);
      const q = (x) => formatSeconds(quantile(shown, x));
      const mean = shown.count ? formatSeconds(shown.sum / shown.count) : '—';
      card.quantiles.textContent = shown.count
        ? `n=${formatInt(shown.count)}  p50 ${q(0.5)}  p99 ${q(0.99)}  p99.9 ${q(0.999)}  mean ${mean}`
        : 'no samples in this window';
      card.chart.update(shown);
      card.chart.render();
    }
  }

  /** The counters and gauges that are not zero. */
  renderScalars(samples) {
    const rows = samples
      .filter((x) => x.value !== 0)
      .map((x) => {
        const labels = Object.entries(x.labels).map(([k, v]) => `${k}="${v}"`).join(',');
        return [labels ? `${x.name}{${labels}}` : x.name, { value: x.value }];
      });
    $('counters').replaceChildren(table(rows, ['value'], 'metric'));
  }

  card(s, container) {
    const node = document.createElement('div');
    node.className = 'histogram';
    node.dataset.testid = 'histogram';
    node.dataset.metric = s.name;
    const title = document.createElement('div');
    title.className = 'title';
    const labels = Object.entries(s.labels).map(([k, v]) => `${k}="${v}"`).join(',');
    title.textContent = labels ? `${s.name}{${labels}}` : s.name;
    title.title = s.help;
    const quantiles = document.createElement('div');
    quantiles.className = 'quantiles';
    const canvas = document.createElement('canvas');
    node.append(title, quantiles, canvas);
    container.append(node);
    const chart = new HistogramChart(canvas);
    chart.onResize = () => chart.render();
    const card = { node, chart, quantiles };
    this.cards.set(s.key, card);
    return card;
  }
}
