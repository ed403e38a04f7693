// The market list: every symbol with its last price and 24 h change, from `GET
// /api/v1/ticker/24h` (decimal strings, shown as the server wrote them), fetched every few
// seconds and soon after a trade of the shown symbol. A click selects the symbol.

// How often the list is fetched when nothing trades on the shown symbol.
const REFRESH_MS = 5000;
// After a trade of the shown symbol, the list is fetched this much later (trades in a burst
// cost one request).
const SOON_MS = 300;

function cell(text, className) {
  const td = document.createElement('td');
  if (className) td.className = className;
  td.textContent = text;
  return td;
}

/** "1.250" -> "+1.250%", "-0.400" -> "-0.400%", "0.000" -> "0.000%": the server's decimals, signed. */
export function percentText(changePercent) {
  const text = String(changePercent);
  if (text.startsWith('-') || !/[1-9]/.test(text)) return `${text}%`;
  return `+${text}%`;
}

export class MarketList {
  constructor(body, { api, onPick, fallbackLast }) {
    this.body = body;
    this.api = api;
    this.onPick = onPick;
    // symbol -> last price text from the status channel, for a venue without history.
    this.fallbackLast = fallbackLast;
    this.rows = new Map(); // symbol -> { tr, last, change }
    this.tickers = new Map(); // symbol -> the ticker's answer
    this.selected = null;
    this.timer = null;
    this.historyOff = false;
  }

  setSymbols(symbols) {
    this.body.replaceChildren();
    this.rows.clear();
    for (const info of symbols) {
      const tr = document.createElement('tr');
      tr.dataset.testid = 'market-row';
      tr.dataset.symbol = info.symbol;
      tr.tabIndex = 0;
      const row = { tr, last: cell('—', 'num'), change: cell('', 'num') };
      tr.append(cell(info.symbol), row.last, row.change);
      tr.addEventListener('click', () => this.onPick(info.symbol));
      tr.addEventListener('keydown', (e) => {
        if (e.key === 'Enter') this.onPick(info.symbol);
      });
      this.body.append(tr);
      this.rows.set(info.symbol, row);
    }
    this.select(this.selected);
  }

  select(symbol) {
    this.selected = symbol;
    for (const [name, row] of this.rows) row.tr.classList.toggle('active', name === symbol);
  }

  start() {
    this.schedule(0);
  }

  /** Fetch again soon (a trade of the shown symbol moved its last price). */
  soon() {
    this.schedule(SOON_MS);
  }

  schedule(ms) {
    if (this.timer !== null) {
      if (ms >= REFRESH_MS) return;
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => {
      this.timer = null;
      this.refresh().finally(() => {
        if (this.timer === null) this.schedule(REFRESH_MS);
      });
    }, ms);
  }

  async refresh() {
    try {
      const list = await this.api.get('/api/v1/ticker/24h?units=decimal');
      this.historyOff = false;
      this.tickers.clear();
      for (const t of list || []) this.tickers.set(t.symbol, t);
    } catch (error) {
      // Without the history database there is no 24 h ticker: the last price still shows.
      this.historyOff = error && error.code === 'history_off';
    }
    this.render();
  }

  render() {
    for (const [symbol, row] of this.rows) {
      const t = this.tickers.get(symbol);
      const last = t && t.last !== null ? t.last : this.fallbackLast(symbol);
      row.last.textContent = last || '—';
      row.tr.dataset.last = last || '';
      if (t && t.change_percent !== null && t.change_percent !== undefined) {
        row.change.textContent = percentText(t.change_percent);
        row.change.className = `num ${t.change_percent.startsWith('-') ? 'ask' : /[1-9]/.test(t.change_percent) ? 'bid' : 'dim'}`;
        row.tr.dataset.change = t.change_percent;
      } else {
        row.change.textContent = this.historyOff ? 'n/a' : '—';
        row.change.className = 'num dim';
        row.tr.dataset.change = '';
      }
    }
  }
}
