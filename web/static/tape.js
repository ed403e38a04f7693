// The trade tape, newest first. Trades arriving between two frames are inserted together; the
// tape keeps the last `maxRows` rows and removes the oldest.

const timeFormat = new Intl.DateTimeFormat(undefined, {
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
  hour12: false,
});

// Formatting a time is slow next to everything else a tape row costs: reuse each second's text.
let cachedSecond = null;
let cachedText = '';

export function clockTime(tsNs) {
  const ms = tsNs / 1e6;
  const second = Math.floor(ms / 1000);
  if (second !== cachedSecond) {
    cachedSecond = second;
    cachedText = timeFormat.format(second * 1000);
  }
  return `${cachedText}.${String(Math.floor(ms % 1000)).padStart(3, '0')}`;
}

export class TapeView {
  constructor(container, { maxRows = 200 } = {}) {
    this.container = container;
    this.maxRows = maxRows;
    this.pending = [];
    this.price = null;
    this.qty = null;
    this.lastTradeId = null;
    this.reset = true;
  }

  setUnits(priceUnit, qtyUnit) {
    this.price = priceUnit;
    this.qty = qtyUnit;
    this.clear();
  }

  clear() {
    this.pending = [];
    this.reset = true;
    this.lastTradeId = null;
  }

  /** Trades oldest first, as the channel sends them. */
  push(trades) {
    for (const trade of trades) {
      if (this.lastTradeId !== null && trade.trade <= this.lastTradeId) continue;
      this.lastTradeId = trade.trade;
      this.pending.push(trade);
    }
    if (this.pending.length > this.maxRows) this.pending.splice(0, this.pending.length - this.maxRows);
  }

  get dirty() {
    return this.reset || this.pending.length > 0;
  }

  render() {
    if (!this.price) return;
    if (this.reset) {
      this.container.replaceChildren();
      this.reset = false;
    }
    if (this.pending.length === 0) return;
    const fragment = document.createDocumentFragment();
    for (let i = this.pending.length - 1; i >= 0; i--) fragment.append(this.row(this.pending[i]));
    this.pending = [];
    this.container.prepend(fragment);
    while (this.container.childElementCount > this.maxRows) this.container.lastElementChild.remove();
  }

  row(trade) {
    const node = document.createElement('div');
    node.className = `tape-row ${trade.taker_side === 'buy' ? 'buy' : 'sell'}`;
    node.dataset.testid = 'tape-row';
    node.dataset.trade = String(trade.trade);
    node.dataset.price = String(trade.price);
    node.dataset.qty = String(trade.qty);
    node.dataset.side = trade.taker_side;
    const px = document.createElement('span');
    px.className = 'px';
    px.textContent = this.price.format(trade.price);
    const sz = document.createElement('span');
    sz.className = 'sz';
    sz.textContent = this.qty.format(trade.qty);
    const time = document.createElement('span');
    time.className = 'time';
    time.textContent = clockTime(trade.ts_ns);
    node.append(px, sz, time);
    return node;
  }
}
