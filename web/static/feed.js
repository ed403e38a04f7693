// The WebSocket connection: requests with ids and their answers, channel subscriptions that
// survive a reconnect, and an optional login that is replayed (freshly signed) on reconnect.

export class Feed {
  constructor(url, { onStatus = () => {}, onMessageCount = () => {} } = {}) {
    this.url = url;
    this.onStatus = onStatus;
    this.onMessageCount = onMessageCount;
    this.socket = null;
    this.nextId = 1;
    this.pending = new Map(); // id -> { resolve, reject }
    this.channels = new Map(); // ch -> { handler, onSubscribed, private }
    this.loginRequest = null; // async () => login op object
    this.loggedIn = false;
    this.retryMs = 250;
    this.closedByUs = false;
    this.connect();
  }

  connect() {
    this.onStatus('connecting');
    const socket = new WebSocket(this.url);
    this.socket = socket;
    socket.onopen = () => {
      this.retryMs = 250;
      this.onStatus('live');
      this.resume(socket);
    };
    socket.onmessage = (event) => this.receive(event.data);
    socket.onclose = () => {
      if (this.socket !== socket) return;
      this.loggedIn = false;
      for (const { reject } of this.pending.values()) reject(new Error('connection closed'));
      this.pending.clear();
      this.onStatus('down');
      if (!this.closedByUs) {
        setTimeout(() => this.connect(), this.retryMs);
        this.retryMs = Math.min(this.retryMs * 2, 5000);
      }
    };
  }

  /** After (re)connecting: log in again if we were, then subscribe to every channel. */
  async resume(socket) {
    for (const [ch, sub] of this.channels) if (!sub.private) this.sendSubscribe(ch, sub);
    if (this.loginRequest) {
      try {
        await this.login(this.loginRequest);
      } catch (error) {
        this.onStatus(`login failed: ${error.message}`);
        return;
      }
      if (this.socket !== socket) return;
      for (const [ch, sub] of this.channels) if (sub.private) this.sendSubscribe(ch, sub);
    }
  }

  receive(text) {
    let msg;
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    this.onMessageCount(1);
    if (msg.ch !== undefined) {
      if (msg.ch === 'error') {
        // slow_consumer and the like: the server closes us; show why.
        this.onStatus(`server: ${(msg.error && msg.error.code) || 'error'}`);
        return;
      }
      const sub = this.channels.get(msg.ch);
      if (sub) sub.handler(msg);
      return;
    }
    if (msg.id !== undefined) {
      const waiter = this.pending.get(msg.id);
      if (!waiter) return;
      this.pending.delete(msg.id);
      if (msg.error) {
        const error = new Error(msg.error.message || msg.error.code);
        error.code = msg.error.code;
        waiter.reject(error);
      } else {
        waiter.resolve(msg.result);
      }
    }
  }

  /** Sends a request; resolves with its result or rejects with its error. */
  request(body) {
    const socket = this.socket;
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      return Promise.reject(new Error('not connected'));
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      socket.send(JSON.stringify({ id, ...body }));
    });
  }

  sendSubscribe(ch, sub) {
    this.request({ op: 'subscribe', ch }).then(
      () => sub.onSubscribed && sub.onSubscribed(null),
      (error) => sub.onSubscribed && sub.onSubscribed(error),
    );
  }

  subscribe(ch, handler, { isPrivate = false, onSubscribed = null } = {}) {
    const sub = { handler, private: isPrivate, onSubscribed };
    this.channels.set(ch, sub);
    const open = this.socket && this.socket.readyState === WebSocket.OPEN;
    if (open && (!isPrivate || this.loggedIn)) this.sendSubscribe(ch, sub);
  }

  unsubscribe(ch) {
    if (!this.channels.delete(ch)) return;
    this.request({ op: 'unsubscribe', ch }).catch(() => {});
  }

  /** Unsubscribes and subscribes again: the server then starts with a fresh snapshot. */
  resubscribe(ch) {
    const sub = this.channels.get(ch);
    if (!sub) return;
    this.request({ op: 'unsubscribe', ch })
      .catch(() => {})
      .then(() => {
        if (this.channels.get(ch) === sub) this.sendSubscribe(ch, sub);
      });
  }

  /** Resolves once the socket is open (rejects after `timeoutMs`). */
  async whenOpen(timeoutMs = 10000) {
    const deadline = Date.now() + timeoutMs;
    while (!this.socket || this.socket.readyState !== WebSocket.OPEN) {
      if (Date.now() > deadline) throw new Error('the WebSocket is not connected');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Logs in (and on every reconnect); `makeRequest` signs a fresh login op each time. */
  async login(makeRequest) {
    await this.whenOpen();
    this.loginRequest = makeRequest;
    const result = await this.request(await makeRequest());
    this.loggedIn = true;
    return result;
  }

  /** Forgets the login: the server has no logout, so the connection starts afresh. */
  logout() {
    this.loginRequest = null;
    this.loggedIn = false;
    for (const [ch, sub] of [...this.channels]) if (sub.private) this.channels.delete(ch);
    if (this.socket) {
      const old = this.socket;
      this.socket = null;
      old.onclose = null;
      old.close();
      for (const { reject } of this.pending.values()) reject(new Error('logged out'));
      this.pending.clear();
      this.connect();
    }
  }
}
