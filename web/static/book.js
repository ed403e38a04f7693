// The L2 book of one symbol, kept from the book.<symbol> channel: a snapshot, then diffs that
// carry the new totals of changed levels, applied under the sequence rule of docs/api.md.

/** Price levels of one side, best first: a sorted price array plus a price -> qty map. */
export class Levels {
  constructor(descending) {
    this.descending = descending;
    this.prices = [];
    this.qty = new Map();
  }

  clear() {
    this.prices.length = 0;
    this.qty.clear();
  }

  /** Index of the first price not better than `price`. */
  search(price) {
    const prices = this.prices;
    let lo = 0;
    let hi = prices.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const better = this.descending ? prices[mid] > price : prices[mid] < price;
      if (better) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  set(price, qty) {
    if (qty > 0) {
      if (!this.qty.has(price)) this.prices.splice(this.search(price), 0, price);
      this.qty.set(price, qty);
    } else if (this.qty.delete(price)) {
      this.prices.splice(this.search(price), 1);
    }
  }

  get best() {
    return this.prices.length ? this.prices[0] : null;
  }
}

export class Book {
  constructor() {
    this.bids = new Levels(true);
    this.asks = new Levels(false);
    this.seq = null; // the last L2 update applied
    this.synced = false; // a snapshot is in and no gap since
    this.firstDiffPending = false;
    this.version = 0; // bumped on every change, for renderers
    this.gaps = 0;
  }

  reset() {
    this.bids.clear();
    this.asks.clear();
    this.seq = null;
    this.synced = false;
    this.firstDiffPending = false;
    this.version++;
  }

  applySnapshot(msg) {
    this.bids.clear();
    this.asks.clear();
    for (const [price, qty] of msg.bids) this.bids.set(price, qty);
    for (const [price, qty] of msg.asks) this.asks.set(price, qty);
    this.seq = msg.seq;
    this.synced = true;
    this.firstDiffPending = true;
    this.version++;
  }

  /**
   * Applies one diff. Returns 'applied', 'dropped' (already in the snapshot, or no snapshot
   * yet) or 'gap' (the caller resubscribes; the book is marked out of sync).
   */
  applyDiff(msg) {
    if (!this.synced) return 'dropped';
    if (msg.last <= this.seq) return 'dropped';
    const fits = this.firstDiffPending
      ? msg.first <= this.seq + 1 && this.seq + 1 <= msg.last
      : msg.first === this.seq + 1;
    if (!fits) {
      this.synced = false;
      this.gaps++;
      return 'gap';
    }
    for (const [price, qty] of msg.bids) this.bids.set(price, qty);
    for (const [price, qty] of msg.asks) this.asks.set(price, qty);
    this.seq = msg.last;
    this.firstDiffPending = false;
    this.version++;
    return 'applied';
  }

  /** Rejects a crossed or locked book: it can only come from a bug or a missed update. */
  crossed() {
    const bid = this.bids.best;
    const ask = this.asks.best;
    return bid !== null && ask !== null && bid >= ask;
  }
}
