// Hand-written canvas charts: the depth chart and candles (1m to 1d, zoomable). Each redraws only when its
// data changed (a dirty flag checked once per animation frame) or its size did.

export const COLORS = {
  bg: '#0b0e13',
  grid: '#1a212b',
  axis: '#6b7785',
  text: '#9aa7b4',
  bid: '#19c37d',
  bidFill: 'rgba(25,195,125,0.18)',
  ask: '#f0475a',
  askFill: 'rgba(240,71,90,0.18)',
  last: '#e0b341',
  volume: 'rgba(120,140,160,0.35)',
};

const FONT = '11px "JetBrains Mono", "DejaVu Sans Mono", Menlo, Consolas, monospace';

/** A step of 1, 2 or 5 times a power of ten, in whole units, giving about `count` divisions. */
export function niceStep(range, count) {
  const raw = Math.max(1, range / Math.max(1, count));
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw) return Math.max(1, Math.round(m * power));
  return Math.max(1, Math.round(10 * power));
}

class CanvasChart {
  constructor(canvas) {
    this.canvas = canvas;
    this.ctx = canvas.getContext('2d');
    this.width = 0;
    this.height = 0;
    this.dirty = true;
    this.price = null;
    this.qty = null;
    this.onResize = null;
    // Charts need not follow every book update: a few redraws a second read as live.
    this.minIntervalMs = 0;
    this.drawnAt = -Infinity;
    new ResizeObserver(() => this.resize()).observe(canvas);
    this.resize();
  }

  setUnits(priceUnit, qtyUnit) {
    this.price = priceUnit;
    this.qty = qtyUnit;
    this.dirty = true;
  }

  resize() {
    const ratio = window.devicePixelRatio || 1;
    const rect = this.canvas.getBoundingClientRect();
    const width = Math.max(1, Math.floor(rect.width));
    const height = Math.max(1, Math.floor(rect.height));
    if (width === this.width && height === this.height) return;
    this.width = width;
    this.height = height;
    this.canvas.width = Math.floor(width * ratio);
    this.canvas.height = Math.floor(height * ratio);
    this.ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    this.dirty = true;
    if (this.onResize) this.onResize();
  }

  /** Draws if dirty and at least `minIntervalMs` after the last drawing; returns whether it drew. */
  render(nowMs = performance.now()) {
    if (!this.dirty || !this.price) return false;
    if (nowMs - this.drawnAt < this.minIntervalMs) return false;
    this.drawnAt = nowMs;
    this.dirty = false;
    const ctx = this.ctx;
    ctx.fillStyle = COLORS.bg;
    ctx.fillRect(0, 0, this.width, this.height);
    ctx.font = FONT;
    this.draw(ctx);
    return true;
  }

  message(ctx, text) {
    ctx.fillStyle = COLORS.axis;
    ctx.textAlign = 'center';
    ctx.textBaseline = 'middle';
    ctx.fillText(text, this.width / 2, this.height / 2);
  }
}

export class DepthChart extends CanvasChart {
  constructor(canvas, { levels = 200 } = {}) {
    super(canvas);
    this.levels = levels;
    this.book = null;
  }

  update(book) {
    this.book = book;
    this.dirty = true;
  }

  cumulative(side) {
    const points = [];
    let total = 0;
    const end = Math.min(this.levels, side.prices.length);
    for (let i = 0; i < end; i++) {
      const price = side.prices[i];
      total += side.qty.get(price);
      points.push([price, total]);
    }
    return points;
  }

  draw(ctx) {
    const book = this.book;
    const bids = book ? this.cumulative(book.bids) : [];
    const asks = book ? this.cumulative(book.asks) : [];
    this.canvas.dataset.bidLevels = String(bids.length);
    this.canvas.dataset.askLevels = String(asks.length);
    if (bids.length === 0 && asks.length === 0) {
      this.message(ctx, 'no orders in the book');
      return;
    }
    const pad = { left: 8, right: 64, top: 10, bottom: 20 };
    const w = this.width - pad.left - pad.right;
    const h = this.height - pad.top - pad.bottom;
    const bestBid = bids.length ? bids[0][0] : asks[0][0];
    const bestAsk = asks.length ? asks[0][0] : bids[0][0];
    const mid = (bestBid + bestAsk) / 2;
    const lowest = bids.length ? bids[bids.length - 1][0] : mid;
    const highest = asks.length ? asks[asks.length - 1][0] : mid;
    const half = Math.max(mid - lowest, highest - mid, 1) * 1.05;
    const x0 = mid - half;
    const x1 = mid + half;
    const maxTotal = Math.max(bids.length ? bids[bids.length - 1][1] : 0, asks.length ? asks[asks.length - 1][1] : 0, 1);
    const px = (price) => pad.left + ((price - x0) / (x1 - x0)) * w;
    const py = (total) => pad.top + h - (total / maxTotal) * h * 0.95;

    // Grid and price axis, at whole multiples of a nice tick step.
    ctx.strokeStyle = COLORS.grid;
    ctx.fillStyle = COLORS.axis;
    ctx.lineWidth = 1;
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    const step = niceStep(x1 - x0, Math.max(2, Math.floor(w / 110)));
    for (let p = Math.ceil(x0 / step) * step; p <= x1; p += step) {
      const x = Math.round(px(p)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, pad.top);
      ctx.lineTo(x, pad.top + h);
      ctx.stroke();
      if (p > 0 && x > pad.left + 30 && x < pad.left + w - 30) ctx.fillText(this.price.format(p), x, pad.top + h + 4);
    }
    ctx.textAlign = 'left';
    ctx.textBaseline = 'middle';
    const qstep = niceStep(maxTotal, 4);
    for (let q = qstep; q <= maxTotal; q += qstep) {
      const y = Math.round(py(q)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(pad.left, y);
      ctx.lineTo(pad.left + w, y);
      ctx.stroke();
      ctx.fillText(this.qty.format(q), pad.left + w + 6, y);
    }

    this.area(ctx, bids, px, py, pad.left, COLORS.bid, COLORS.bidFill, pad.top + h);
    this.area(ctx, asks, px, py, pad.left + w, COLORS.ask, COLORS.askFill, pad.top + h);
    ctx.strokeStyle = COLORS.axis;
    ctx.setLineDash([3, 3]);
    const xm = Math.round(px(mid)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(xm, pad.top);
    ctx.lineTo(xm, pad.top + h);
    ctx.stroke();
    ctx.setLineDash([]);
  }

  /** A stepped cumulative curve from the best price outwards to the edge `xEdge`. */
  area(ctx, points, px, py, xEdge, stroke, fill, yBase) {
    if (points.length === 0) return;
    ctx.beginPath();
    ctx.moveTo(px(points[0][0]), yBase);
    let prevY = yBase;
    for (const [price, total] of points) {
      const x = px(price);
      ctx.lineTo(x, prevY);
      prevY = py(total);
      ctx.lineTo(x, prevY);
    }
    ctx.lineTo(xEdge, prevY);
    ctx.strokeStyle = stroke;
    ctx.lineWidth = 1.5;
    ctx.stroke();
    ctx.lineTo(xEdge, yBase);
    ctx.closePath();
    ctx.fillStyle = fill;
    ctx.fill();
  }
}

const minuteFormat = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', hour12: false });
const dayFormat = new Intl.DateTimeFormat(undefined, { month: '2-digit', day: '2-digit' });

/** The candle intervals of docs/api.md's `/candles`, in ms. */
export const CANDLE_INTERVALS_MS = { '1m': 60e3, '5m': 300e3, '15m': 900e3, '1h': 3600e3, '4h': 14400e3, '1d': 86400e3 };

/**
 * Puts a candle into a list oldest first (at most `max`): replaces the candle with the same
 * start (the current candle as it changes), or appends a newer one.
 */
export function upsertCandle(candles, candle, max) {
  const last = candles[candles.length - 1];
  if (last && last.start_ns === candle.start_ns) {
    candles[candles.length - 1] = candle;
  } else if (!last || candle.start_ns > last.start_ns) {
    candles.push(candle);
    if (candles.length > max) candles.shift();
  } else {
    const i = candles.findIndex((c) => c.start_ns === candle.start_ns);
    if (i >= 0) candles[i] = candle;
  }
}

// Zoom: the width of one candle's slot in CSS pixels, between these bounds.
const SLOT_MIN_PX = 3;
const SLOT_MAX_PX = 40;

export class CandleChart extends CanvasChart {
  constructor(canvas, { maxCandles = 1440 } = {}) {
    super(canvas);
    this.maxCandles = maxCandles;
    this.candles = [];
    this.slot = 9;
    this.intervalMs = CANDLE_INTERVALS_MS['1m'];
    canvas.dataset.slot = String(this.slot);
    // The wheel zooms (up: in, fewer and wider candles), as on the big venues' charts.
    canvas.addEventListener('wheel', (e) => {
      e.preventDefault();
      this.zoom(e.deltaY < 0 ? 1 : -1);
    }, { passive: false });
  }

  reset(candles, intervalMs = this.intervalMs) {
    this.candles = candles.slice(-this.maxCandles);
    this.intervalMs = intervalMs;
    this.emptyText = null;
    this.dirty = true;
  }

  upsert(candle) {
    upsertCandle(this.candles, candle, this.maxCandles);
    this.dirty = true;
  }

  /** One step in (`direction` > 0: wider candles, fewer shown) or out. */
  zoom(direction) {
    const next = direction > 0 ? Math.ceil(this.slot * 1.25) : Math.floor(this.slot / 1.25);
    const slot = Math.min(SLOT_MAX_PX, Math.max(SLOT_MIN_PX, next));
    if (slot === this.slot) return;
    this.slot = slot;
    this.canvas.dataset.slot = String(slot);
    this.dirty = true;
    if (this.onResize) this.onResize();
  }

  draw(ctx) {
    this.canvas.dataset.count = String(this.candles.length);
    if (this.candles.length === 0) {
      this.message(ctx, this.emptyText || 'no trades yet: candles appear with the first trade');
      return;
    }
    const pad = { left: 6, right: 72, top: 10, bottom: 20 };
    const w = this.width - pad.left - pad.right;
    const h = this.height - pad.top - pad.bottom;
    const slot = this.slot;
    const count = Math.max(1, Math.min(this.candles.length, Math.floor(w / slot)));
    const shown = this.candles.slice(-count);
    this.canvas.dataset.shown = String(count);
    const bodyW = Math.max(1, slot - 2);
    let lo = Infinity;
    let hi = -Infinity;
    let maxVolume = 1;
    for (const c of shown) {
      lo = Math.min(lo, c.low);
      hi = Math.max(hi, c.high);
      maxVolume = Math.max(maxVolume, c.volume);
    }
    if (hi === lo) {
      hi += 1;
      lo = Math.max(0, lo - 1);
    }
    const span = hi - lo;
    hi += span * 0.05;
    lo -= span * 0.05;
    const priceH = h * 0.8;
    const py = (p) => pad.top + priceH - ((p - lo) / (hi - lo)) * priceH;
    const volTop = pad.top + priceH + 4;
    const volH = h - priceH - 4;

    ctx.strokeStyle = COLORS.grid;
    ctx.fillStyle = COLORS.axis;
    ctx.lineWidth = 1;
    ctx.textAlign = 'left';
    ctx.textBaseline = 'middle';
    const step = niceStep(hi - lo, Math.max(2, Math.floor(priceH / 40)));
    for (let p = Math.ceil(lo / step) * step; p <= hi; p += step) {
      const y = Math.round(py(p)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(pad.left, y);
      ctx.lineTo(pad.left + w, y);
      ctx.stroke();
      if (p > 0) ctx.fillText(this.price.format(p), pad.left + w + 6, y);
    }

    const x0 = pad.left + w - count * slot;
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    const labelEvery = Math.max(1, Math.ceil(80 / slot));
    shown.forEach((c, i) => {
      const xc = Math.round(x0 + i * slot + slot / 2) + 0.5;
      const up = c.close >= c.open;
      const color = up ? COLORS.bid : COLORS.ask;
      ctx.strokeStyle = color;
      ctx.fillStyle = color;
      ctx.beginPath();
      ctx.moveTo(xc, Math.round(py(c.high)));
      ctx.lineTo(xc, Math.round(py(c.low)));
      ctx.stroke();
      const yOpen = py(c.open);
      const yClose = py(c.close);
      const top = Math.round(Math.min(yOpen, yClose));
      const bodyH = Math.max(1, Math.round(Math.abs(yOpen - yClose)));
      ctx.fillRect(xc - bodyW / 2, top, bodyW, bodyH);
      ctx.fillStyle = COLORS.volume;
      const vh = Math.max(1, (c.volume / maxVolume) * volH);
      ctx.fillRect(xc - bodyW / 2, volTop + volH - vh, bodyW, vh);
      const startMs = c.start_ns / 1e6;
      if (Math.round(startMs / this.intervalMs) % labelEvery === 0) {
        ctx.fillStyle = COLORS.axis;
        const format = this.intervalMs >= CANDLE_INTERVALS_MS['1d'] ? dayFormat : minuteFormat;
        ctx.fillText(format.format(startMs), xc, pad.top + h + 4);
      }
    });

    const last = shown[shown.length - 1];
    const y = Math.round(py(last.close)) + 0.5;
    ctx.strokeStyle = COLORS.last;
    ctx.setLineDash([2, 3]);
    ctx.beginPath();
    ctx.moveTo(pad.left, y);
    ctx.lineTo(pad.left + w, y);
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = COLORS.last;
    ctx.fillRect(pad.left + w + 2, y - 8, pad.right - 4, 16);
    ctx.fillStyle = COLORS.bg;
    ctx.textAlign = 'left';
    ctx.textBaseline = 'middle';
    ctx.fillText(this.price.format(last.close), pad.left + w + 6, y);
  }
}

/** Bars of a latency histogram: one bar per bucket, labelled by the bucket's upper bound. */
export class HistogramChart extends CanvasChart {
  constructor(canvas) {
    super(canvas);
    this.price = true; // no units needed; render() checks this
    this.histogram = null;
  }

  update(histogram) {
    this.histogram = histogram;
    this.dirty = true;
  }

  draw(ctx) {
    const hist = this.histogram;
    if (!hist || hist.count === 0) {
      this.message(ctx, hist ? 'no samples yet' : 'not exposed by /metrics');
      return;
    }
    const pad = { left: 8, right: 8, top: 8, bottom: 30 };
    const w = this.width - pad.left - pad.right;
    const h = this.height - pad.top - pad.bottom;
    // The buckets that hold samples, with one empty neighbour each side for context.
    const used = hist.buckets.map((b, i) => (b.count > 0 ? i : -1)).filter((i) => i >= 0);
    const from = Math.max(0, used[0] - 1);
    const to = Math.min(hist.buckets.length - 1, used[used.length - 1] + 1);
    const bars = hist.buckets.slice(from, to + 1);
    const maxCount = Math.max(1, ...bars.map((b) => b.count));
    const slot = w / Math.max(1, bars.length);
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    bars.forEach((b, i) => {
      const bh = (b.count / maxCount) * h;
      ctx.fillStyle = COLORS.bid;
      ctx.fillRect(pad.left + i * slot + 1, pad.top + h - bh, Math.max(1, slot - 2), bh);
      if (bars.length <= 16 || i % Math.ceil(bars.length / 16) === 0) {
        ctx.fillStyle = COLORS.axis;
        ctx.save();
        ctx.translate(pad.left + i * slot + slot / 2, pad.top + h + 3);
        ctx.fillText(formatSeconds(b.le), 0, 0);
        ctx.restore();
      }
    });
  }
}

/** A duration in seconds as "850ns", "12.5µs", "3.2ms", "1.5s" or "+Inf". */
export function formatSeconds(seconds) {
  if (seconds === Infinity) return '+Inf';
  if (seconds < 1e-6) return `${+(seconds * 1e9).toPrecision(3)}ns`;
  if (seconds < 1e-3) return `${+(seconds * 1e6).toPrecision(3)}µs`;
  if (seconds < 1) return `${+(seconds * 1e3).toPrecision(3)}ms`;
  return `${+seconds.toPrecision(3)}s`;
}
