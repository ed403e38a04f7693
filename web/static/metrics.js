// Prometheus text exposition: histograms (name_bucket{le=…}, name_sum, name_count) grouped by
// their other labels, with quantiles estimated the way Prometheus's histogram_quantile does.

const SAMPLE_RE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$/;
const LABEL_RE = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function parseLabels(text) {
  const labels = {};
  if (!text) return labels;
  for (const m of text.matchAll(LABEL_RE)) labels[m[1]] = m[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
  return labels;
}

function parseValue(text) {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  return Number(text);
}

/** All histograms in a scrape: [{ name, help, labels, key, buckets:[{le, cumulative, count}], sum, count }]. */
export function parseHistograms(text) {
  const types = new Map();
  const help = new Map();
  const series = new Map();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    if (line.startsWith('#')) {
      const parts = line.split(/\s+/);
      if (parts[1] === 'TYPE') types.set(parts[2], parts[3]);
      if (parts[1] === 'HELP') help.set(parts[2], parts.slice(3).join(' '));
      continue;
    }
    const m = SAMPLE_RE.exec(line);
    if (!m) continue;
    const [, sampleName, , labelText, valueText] = m;
    const suffix = ['_bucket', '_sum', '_count'].find((s) => sampleName.endsWith(s));
    if (!suffix) continue;
    const name = sampleName.slice(0, -suffix.length);
    if (types.get(name) !== 'histogram') continue;
    const labels = parseLabels(labelText);
    const le = labels.le;
    delete labels.le;
    const key = `${name}${JSON.stringify(labels)}`;
    let s = series.get(key);
    if (!s) {
      s = { name, help: help.get(name) || '', labels, key, buckets: [], sum: 0, count: 0 };
      series.set(key, s);
    }
    const value = parseValue(valueText);
    if (suffix === '_bucket') s.buckets.push({ le: parseValue(le), cumulative: value, count: 0 });
    else if (suffix === '_sum') s.sum = value;
    else s.count = value;
  }
  for (const s of series.values()) finish(s);
  return [...series.values()];
}

function finish(s) {
  s.buckets.sort((a, b) => a.le - b.le);
  let previous = 0;
  for (const b of s.buckets) {
    b.count = Math.max(0, b.cumulative - previous);
    previous = b.cumulative;
  }
  if (!s.count && s.buckets.length) s.count = s.buckets[s.buckets.length - 1].cumulative;
}

/** What changed between two scrapes of the same series: the recent window's histogram. */
export function delta(now, before) {
  if (!before || before.buckets.length !== now.buckets.length || before.count > now.count) return now;
  const s = {
    ...now,
    sum: now.sum - before.sum,
    count: now.count - before.count,
    buckets: now.buckets.map((b, i) => ({ le: b.le, cumulative: b.cumulative - before.buckets[i].cumulative, count: 0 })),
  };
  finish(s);
  return s;
}

/** The q-quantile (0..1) by linear interpolation inside the bucket that holds it. */
export function quantile(s, q) {
  if (!s.count || s.buckets.length === 0) return NaN;
  const rank = q * s.count;
  let lower = 0;
  let below = 0;
  for (const b of s.buckets) {
    if (b.cumulative >= rank) {
      if (b.le === Infinity) return lower; // beyond the last finite bound: report that bound
      const inBucket = b.cumulative - below;
      return inBucket > 0 ? lower + (b.le - lower) * ((rank - below) / inBucket) : b.le;
    }
    lower = b.le;
    below = b.cumulative;
  }
  return lower;
}

/** Counters and gauges (every sample that is not part of a histogram): [{ name, labels, value }]. */
export function parseScalars(text) {
  const types = new Map();
  const out = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    if (line.startsWith('#')) {
      const parts = line.split(/\s+/);
      if (parts[1] === 'TYPE') types.set(parts[2], parts[3]);
      continue;
    }
    const m = SAMPLE_RE.exec(line);
    if (!m) continue;
    const [, name, , labelText, valueText] = m;
    const base = name.replace(/_(bucket|sum|count)$/, '');
    if (types.get(base) === 'histogram') continue;
    out.push({ name, labels: parseLabels(labelText), value: parseValue(valueText) });
  }
  return out;
}
