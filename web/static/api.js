// REST client: public GETs, and private calls signed as docs/api.md says:
// hex(HMAC-SHA256(secret, key + "\n" + timestamp + "\n" + recv_window + "\n" + METHOD + "\n" +
// path_and_query + "\n" + body)); the console sends no Rialto-Recv-Window, so that line is empty
// (the server's default window, 5 s).
// The secret stays in this object (memory only, never storage).

import { hmacSigner } from './sha256.js';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || code);
    this.status = status;
    this.code = code;
  }
}

async function parseAnswer(response) {
  const text = await response.text();
  let body = null;
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
  }
  if (!response.ok) {
    const error = body && body.error ? body.error : {};
    throw new ApiError(
      response.status,
      error.code || `http_${response.status}`,
      error.message || text.slice(0, 200) || response.statusText,
    );
  }
  return body;
}

/**
 * A path that names no `units` asks for the engine's integers (`units=int`, docs/api.md
 * "Units"), as the admin view does; the trading views name `units=decimal` and turn the
 * answers into integers exactly themselves (decimal.js).
 */
export function intUnits(pathAndQuery) {
  if (!pathAndQuery.startsWith('/api/') || /[?&]units=/.test(pathAndQuery)) return pathAndQuery;
  return `${pathAndQuery}${pathAndQuery.includes('?') ? '&' : '?'}units=int`;
}

export class Api {
  constructor(base = '') {
    this.base = base;
    this.key = null;
    this.signer = null;
    this.lastTs = 0;
    // Server clock minus ours, in ms: requests carry the server's idea of now.
    this.clockOffsetMs = 0;
    // Private calls go one at a time, each with a later timestamp than the one before.
    this.queue = Promise.resolve();
  }

  async get(path) {
    return parseAnswer(await fetch(this.base + intUnits(path), { cache: 'no-store' }));
  }

  async getText(path) {
    const response = await fetch(this.base + path, { cache: 'no-store' });
    if (!response.ok) throw new ApiError(response.status, `http_${response.status}`, response.statusText);
    return response.text();
  }

  async syncClock() {
    const before = Date.now();
    const answer = await this.get('/api/v1/time');
    const after = Date.now();
    if (answer && typeof answer.ts_ns === 'number') {
      this.clockOffsetMs = Math.round(answer.ts_ns / 1e6 - (before + after) / 2);
    }
  }

  get loggedIn() {
    return this.signer !== null;
  }

  async setCredentials(key, secret) {
    this.signer = await hmacSigner(secret);
    this.key = key;
  }

  clearCredentials() {
    this.key = null;
    this.signer = null;
  }

  /**
   * A fresh timestamp (ms, on the server's clock), later than the previous one: two identical
   * requests in one millisecond would otherwise be one request, the second refused as a replay.
   */
  stamp() {
    const ts = Math.max(Date.now() + this.clockOffsetMs, this.lastTs + 1);
    this.lastTs = ts;
    return ts;
  }

  /** The WebSocket login request (signed over key, ts, an empty window, "WS\n/ws\n" and an empty body). */
  async wsLogin() {
    const ts = this.stamp();
    const sig = await this.signer.sign(`${this.key}\n${ts}\n\nWS\n/ws\n`);
    return { op: 'login', key: this.key, ts, sig };
  }

  /**
   * A signed request; resolves to the answer's JSON or throws ApiError. The body is an object,
   * or JSON text already made (for integers past 2^53, such as a GTD expiry in ns).
   */
  signed(method, pathAndQuery, bodyObject) {
    const target = intUnits(pathAndQuery);
    const run = () => this.sendSigned(method, target, bodyObject, true);
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => {});
    return result;
  }

  async sendSigned(method, pathAndQuery, bodyObject, retry) {
    if (!this.signer) throw new ApiError(0, 'not_logged_in', 'log in first');
    const body = bodyObject === undefined ? '' : typeof bodyObject === 'string' ? bodyObject : JSON.stringify(bodyObject);
    const ts = this.stamp();
    const sig = await this.signer.sign(`${this.key}\n${ts}\n\n${method}\n${pathAndQuery}\n${body}`);
    const headers = {
      'Rialto-Key': this.key,
      'Rialto-Timestamp': String(ts),
      'Rialto-Signature': sig,
    };
    if (body) headers['Content-Type'] = 'application/json';
    const response = await fetch(this.base + pathAndQuery, {
      method,
      headers,
      body: body || undefined,
      cache: 'no-store',
    });
    try {
      return await parseAnswer(response);
    } catch (error) {
      // Another client with the same key sent the very same request in the same millisecond,
      // or our clock drifted: resynchronise once and try again (a refused request changed
      // nothing).
      if (retry && (error.code === 'replayed_request' || error.code === 'stale_request')) {
        if (error.code === 'stale_request') await this.syncClock().catch(() => {});
        return this.sendSigned(method, pathAndQuery, bodyObject, false);
      }
      throw error;
    }
  }
}
