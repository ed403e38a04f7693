// Exact decimal display of integer ticks and lots. A unit such as "0.01" is kept as an integer
// mantissa and a scale (1n, 2), so 30 ticks of "0.01" print "0.30", never 0.30000000000000004.

const DECIMAL_RE = /^\s*(-?)(\d*)(?:\.(\d*))?\s*$/;

/** Parses "12.340" into { digits: 12340n, scale: 3 }; null when it is not a plain decimal. */
export function parseDecimal(text) {
  const m = DECIMAL_RE.exec(String(text));
  if (!m || (m[2] === '' && (m[3] === undefined || m[3] === ''))) return null;
  const frac = m[3] || '';
  let digits = BigInt((m[2] || '0') + frac);
  if (m[1] === '-') digits = -digits;
  return { digits, scale: frac.length };
}

const POW10 = [];
function pow10(n) {
  if (POW10[n] === undefined) POW10[n] = 10n ** BigInt(n);
  return POW10[n];
}

function group(intText) {
  return intText.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** Integer units of a decimal step ("0.01" per tick, "0.001" per lot). */
export class Unit {
  constructor(unitText) {
    const parsed = parseDecimal(unitText);
    if (!parsed || parsed.digits <= 0n) throw new Error(`not a positive decimal: ${unitText}`);
    this.text = String(unitText).trim();
    this.mantissa = parsed.digits;
    this.scale = parsed.scale;
    this.cache = new Map();
  }

  /** The decimal text of `units` (a Number or BigInt integer), with exactly `scale` decimals. */
  format(units, { grouped = false } = {}) {
    if (units === null || units === undefined) return '';
    const key = grouped ? `g${units}` : units;
    const hit = this.cache.get(key);
    if (hit !== undefined) return hit;
    let value = BigInt(units) * this.mantissa;
    const negative = value < 0n;
    if (negative) value = -value;
    let text = value.toString();
    if (this.scale > 0) {
      text = text.padStart(this.scale + 1, '0');
      const intPart = text.slice(0, -this.scale);
      text = `${grouped ? group(intPart) : intPart}.${text.slice(-this.scale)}`;
    } else if (grouped) {
      text = group(text);
    }
    if (negative) text = `-${text}`;
    if (this.cache.size > 20000) this.cache.clear();
    this.cache.set(key, text);
    return text;
  }

  /**
   * The integer units of a decimal string the server wrote ("5000.50" with "0.01" gives 500050):
   * a Number while it is exact (below 2^53), else a BigInt. A number is taken as units already,
   * and null or undefined passes through. A text that is not a whole number of units throws:
   * the server writes every value in its unit's decimals (docs/api.md, "Units").
   */
  units(value) {
    if (typeof value !== 'string') return value;
    // The common case, a unit of one in some decimal place ("0.01") and a value written with
    // exactly its decimals: the digits without the point are the units.
    const dot = value.indexOf('.');
    if (this.mantissa === 1n && (dot < 0 ? this.scale === 0 : value.length - dot - 1 === this.scale)) {
      const digits = dot < 0 ? value : value.slice(0, dot) + value.slice(dot + 1);
      if (/^-?\d+$/.test(digits)) {
        const n = Number(digits);
        return Number.isSafeInteger(n) ? n : BigInt(digits);
      }
    }
    const parsed = parseDecimal(value);
    if (!parsed) throw new Error(`not a decimal: ${value}`);
    const num = parsed.digits * pow10(this.scale);
    const den = this.mantissa * pow10(parsed.scale);
    if (num % den !== 0n) throw new Error(`${value} is not a multiple of ${this.text}`);
    const units = num / den;
    const safe = BigInt(Number.MAX_SAFE_INTEGER);
    return units <= safe && units >= -safe ? Number(units) : units;
  }

  /**
   * The whole number of units in a decimal text ("5000.5" with "0.01" gives 500050), or an
   * error when the text is not a positive multiple of the unit or does not fit a JSON integer.
   */
  parse(text) {
    const parsed = parseDecimal(text);
    if (!parsed) return { error: `"${text}" is not a number` };
    // units = (digits / 10^s) / (mantissa / 10^scale) = digits * 10^scale / (mantissa * 10^s)
    const num = parsed.digits * pow10(this.scale);
    const den = this.mantissa * pow10(parsed.scale);
    if (num % den !== 0n) return { error: `${text} is not a multiple of ${this.text}` };
    const units = num / den;
    if (units <= 0n) return { error: `${text} must be greater than 0` };
    if (units > BigInt(Number.MAX_SAFE_INTEGER)) return { error: `${text} is too large` };
    return { value: Number(units) };
  }
}

/** An integer with thousands separators, exact for BigInt or safe Numbers. */
export function formatInt(n) {
  if (n === null || n === undefined) return '';
  return group(BigInt(n).toString()).replace(/^-,/, '-');
}

/**
 * A symbol's price band in ticks, as docs/rules.md computes it: [R - w, R + w] with
 * w = floor(R * band_bps / 10000); null with no band or no reference price.
 */
export function bandLimits(reference, bandBps) {
  if (!bandBps || !reference) return null;
  const r = BigInt(reference);
  const w = (r * BigInt(bandBps)) / 10000n;
  return { lo: r - w, hi: r + w };
}
