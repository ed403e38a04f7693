// The order book ladder: a fixed set of rows made once; each frame writes only the cells whose
// text changed, so thousands of book updates a second cost one pass over ~40 rows per frame.

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

class Row {
  constructor(side, onPick) {
    this.node = el('div', `ladder-row ${side}`);
    this.node.dataset.testid = side === 'ask' ? 'ladder-ask' : 'ladder-bid';
    this.bar = el('div', 'bar');
    this.mine = el('span', 'mine');
    this.px = el('span', 'px');
    this.sz = el('span', 'sz');
    this.cum = el('span', 'cum');
    this.node.append(this.bar, this.mine, this.px, this.sz, this.cum);
    this.node.dataset.price = ''; // an empty row, until it shows a level
    this.node.dataset.qty = '';
    this.price = null;
    this.qty = null;
    this.cumQty = null;
    this.width = -1;
    this.isMine = false;
    this.flip = false;
    this.node.addEventListener('click', () => {
      if (this.price !== null) onPick(this.price, side);
    });
  }

  show(price, qty, cumQty, width, isMine, view) {
    if (price !== this.price) {
      // A row showing a new level: not a change of size, so no flash.
      this.price = price;
      this.px.textContent = price === null ? '' : view.price.format(price);
      this.node.dataset.price = price === null ? '' : String(price);
      this.node.classList.remove('flash-a', 'flash-b');
    } else if (price !== null && qty !== this.qty && this.qty !== null) {
      this.flip = !this.flip;
      this.node.classList.toggle('flash-a', this.flip);
      this.node.classList.toggle('flash-b', !this.flip);
    }
    if (qty !== this.qty) {
      this.qty = qty;
      this.sz.textContent = qty === null ? '' : view.qty.format(qty);
      this.node.dataset.qty = qty === null ? '' : String(qty);
    }
    if (cumQty !== this.cumQty) {
      this.cumQty = cumQty;
      this.cum.textContent = cumQty === null ? '' : view.qty.format(cumQty);
    }
    if (width !== this.width) {
      this.width = width;
      this.bar.style.transform = `scaleX(${width})`;
    }
    if (isMine !== this.isMine) {
      this.isMine = isMine;
      this.node.classList.toggle('is-mine', isMine);
    }
  }
}

export class LadderView {
  constructor(container, { rowsPerSide = 18, onPick = () => {} } = {}) {
    this.container = container;
    this.rowsPerSide = rowsPerSide;
    this.price = null; // Unit for prices
    this.qty = null; // Unit for quantities
    const head = el('div', 'ladder-head');
    head.append(el('span', '', ''), el('span', 'px', 'Price'), el('span', 'sz', 'Size'), el('span', 'cum', 'Total'));
    this.asksNode = el('div', 'ladder-asks');
    this.bidsNode = el('div', 'ladder-bids');
    this.spreadNode = el('div', 'ladder-spread');
    this.spreadNode.dataset.testid = 'spread';
    this.askRows = [];
    this.bidRows = [];
    for (let i = 0; i < rowsPerSide; i++) {
      const ask = new Row('ask', onPick);
      this.askRows.push(ask);
      this.asksNode.prepend(ask.node); // best ask at the bottom, next to the spread
      const bid = new Row('bid', onPick);
      this.bidRows.push(bid);
      this.bidsNode.append(bid.node);
    }
    container.replaceChildren(head, this.asksNode, this.spreadNode, this.bidsNode);
    this.spreadText = null;
  }

  setUnits(priceUnit, qtyUnit) {
    this.price = priceUnit;
    this.qty = qtyUnit;
    for (const row of [...this.askRows, ...this.bidRows]) row.show(null, null, null, 0, false, this);
    this.spreadText = null;
  }

  /** Draws the top of `book`; `minePrices` is a Set of "side:price" where the user has orders. */
  render(book, minePrices) {
    if (!this.price) return;
    const n = this.rowsPerSide;
    let maxQty = 1;
    for (const side of [book.asks, book.bids]) {
      const end = Math.min(n, side.prices.length);
      for (let i = 0; i < end; i++) maxQty = Math.max(maxQty, side.qty.get(side.prices[i]));
    }
    this.renderSide(book.asks, this.askRows, 'sell', maxQty, minePrices);
    this.renderSide(book.bids, this.bidRows, 'buy', maxQty, minePrices);
    const bid = book.bids.best;
    const ask = book.asks.best;
    let text = book.synced ? 'spread —' : 'syncing…';
    if (book.synced && bid !== null && ask !== null) {
      const bps = ((ask - bid) / ((ask + bid) / 2)) * 10000;
      text = `spread ${this.price.format(ask - bid)}  (${bps.toFixed(bps < 10 ? 2 : 1)} bps)`;
    }
    if (text !== this.spreadText) {
      this.spreadText = text;
      this.spreadNode.textContent = text;
      this.container.dataset.synced = book.synced ? 'true' : 'false';
    }
  }

  renderSide(levels, rows, side, maxQty, minePrices) {
    let cum = 0;
    for (let i = 0; i < rows.length; i++) {
      if (i < levels.prices.length) {
        const price = levels.prices[i];
        const qty = levels.qty.get(price);
        cum += qty;
        const width = Math.round((qty / maxQty) * 1000) / 1000;
        rows[i].show(price, qty, cum, width, minePrices.has(`${side}:${price}`), this);
      } else {
        rows[i].show(null, null, null, 0, false, this);
      }
    }
  }
}
