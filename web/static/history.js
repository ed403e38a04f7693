// The user's order history and fills, from the history database (docs/api.md, "Durable
// history"): the newest page at login, newer entries by `from_id` after each of the user's
// events, older ones on "More". These calls ask for decimal strings (`units=decimal`), so
// prices, quantities and fees are shown as the server wrote them, never through a JS number.

import { clockTime } from './tape.js';

// One page; the API's maximum is 1,000.
const PAGE = 50;
// At most this many entries are kept in a panel (the oldest go first).
const MAX_ENTRIES = 2000;

function cell(text, className) {
  const td = document.createElement('td');
  if (className) td.className = className;
  td.textContent = text;
  return td;
}

/** A history event's time as local "HH:MM:SS.mmm" (from `ts`, ms, exact). */
function eventTime(entry) {
  return typeof entry.ts === 'number' ? clockTime(entry.ts * 1e6) : '';
}

function describeError(error) {
  if (error && error.code) return `${error.code}: ${error.message}`;
  return String((error && error.message) || error);
}

/** One paged list: the entries of one history endpoint, newest first on the page. */
export class HistoryList {
  constructor({ api, path, body, note, more, rowOf, emptyText }) {
    this.api = api;
    this.path = path;
    this.body = body;
    this.note = note;
    this.more = more;
    this.rowOf = rowOf;
    this.emptyText = emptyText;
    this.entries = []; // newest first
    this.ids = new Set();
    this.hasOlder = false;
    // Without the history database the order history is the server's memory of the last
    // events, without ids (docs/api.md): the newest page is then fetched whole each time.
    this.withoutIds = false;
    this.active = false;
    this.busy = Promise.resolve();
    more.addEventListener('click', () => this.run(() => this.loadOlder()));
  }

  /** Calls one at a time, so that pages never interleave. */
  run(task) {
    const next = this.busy.then(task, task).catch((error) => this.showError(error));
    this.busy = next;
    return next;
  }

  async fetchPage(query) {
    return this.api.signed('GET', `${this.path}?units=decimal&limit=${PAGE}${query}`);
  }

  start() {
    this.active = true;
    this.clear();
    this.note.textContent = 'loading…';
    return this.run(() => this.loadNewer());
  }

  stop() {
    this.active = false;
    this.clear();
    this.note.textContent = this.emptyText;
    this.more.hidden = true;
  }

  clear() {
    this.entries = [];
    this.ids.clear();
    this.hasOlder = false;
    this.withoutIds = false;
    this.body.replaceChildren();
  }

  /** Entries after the newest shown (or the newest page when none is shown). */
  refresh() {
    if (this.active) this.run(() => this.loadNewer());
  }

  async loadNewer() {
    if (!this.active) return;
    if (this.entries.length === 0 || this.withoutIds) {
      const page = (await this.fetchPage('')) || [];
      if (!this.active) return;
      this.withoutIds = page.some((entry) => entry.id === undefined);
      if (this.withoutIds) {
        this.entries = page.slice().reverse();
        this.render();
        return;
      }
      this.hasOlder = page.length === PAGE;
      this.add(page);
      return;
    }
    // Page forward from one past the newest id until a page is not full.
    for (;;) {
      const page = await this.fetchPage(`&from_id=${this.entries[0].id + 1}`);
      if (!this.active) return;
      this.add(page);
      if (page.length < PAGE) return;
    }
  }

  /**
   * The page before the oldest shown: by time (`end_time` is exclusive, so one ms past the
   * oldest, whose entries are then already shown and skipped).
   */
  async loadOlder() {
    if (!this.active || this.entries.length === 0) return;
    const oldest = this.entries[this.entries.length - 1];
    const page = await this.fetchPage(`&end_time=${oldest.ts + 1}`);
    if (!this.active) return;
    const added = this.add(page);
    this.hasOlder = page.length === PAGE && added > 0;
    this.render();
  }

  /** Adds entries not yet shown; returns how many were new. */
  add(page) {
    let added = 0;
    for (const entry of page || []) {
      if (this.ids.has(entry.id)) continue;
      this.ids.add(entry.id);
      this.entries.push(entry);
      added++;
    }
    this.entries.sort((a, b) => b.id - a.id);
    while (this.entries.length > MAX_ENTRIES) this.ids.delete(this.entries.pop().id);
    this.render();
    return added;
  }

  render() {
    this.body.replaceChildren(...this.entries.map((entry) => this.rowOf(entry)));
    const count = this.entries.length ? `${this.entries.length} shown` : 'none yet';
    this.note.textContent = this.withoutIds ? `${count} (the server's memory since it started: the history database is off)` : count;
    this.more.hidden = !this.hasOlder;
  }

  showError(error) {
    this.note.textContent = error && error.code === 'history_off'
      ? 'the history database is off on this venue (history_off)'
      : describeError(error);
  }
}

/** An order history event as a row (docs/api.md: accepted, rejected, fill, cancelled, …). */
export function orderHistoryRow(e) {
  const tr = document.createElement('tr');
  tr.dataset.testid = 'history-row';
  tr.dataset.id = String(e.id);
  tr.dataset.type = e.type;
  tr.dataset.order = String(e.order);
  if (e.kind) tr.dataset.kind = e.kind;
  const price = e.type === 'triggered' ? e.stop_price : e.price;
  const qty = e.type === 'amended' ? e.remaining : e.qty;
  const detail = {
    accepted: e.kind,
    rejected: e.reason,
    fill: e.liquidity,
    cancelled: e.reason,
    triggered: 'stop triggered',
    amended: `priority ${e.priority}`,
  }[e.type];
  tr.append(
    cell(eventTime(e)),
    cell(e.type),
    cell(String(e.order)),
    cell(e.symbol || ''),
    cell(e.side || '', e.side || ''),
    cell(price === undefined ? '' : price),
    cell(qty === undefined ? '' : qty),
    cell(detail || ''),
  );
  return tr;
}

/** A fill (`GET /api/v1/fills`) as a row. */
export function fillRow(f) {
  const tr = document.createElement('tr');
  tr.dataset.testid = 'fill-row';
  tr.dataset.id = String(f.id);
  tr.dataset.order = String(f.order);
  tr.append(
    cell(eventTime(f)),
    cell(String(f.order)),
    cell(f.symbol || ''),
    cell(f.side, f.side),
    cell(f.price),
    cell(f.qty),
    cell(f.fee),
    cell(f.liquidity),
    cell(String(f.trade_id)),
  );
  return tr;
}
