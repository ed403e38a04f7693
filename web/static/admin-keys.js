// The admin view's API keys panel (docs/console.md, "API keys"): create a key for a user (its
// secret is shown once, here, and kept nowhere), list every issued key, revoke one. It builds
// its own elements inside #admin-keys and uses only the existing console styles.

function element(tag, { dataset = {}, ...props } = {}, children = []) {
  const node = document.createElement(tag);
  Object.assign(node, props);
  for (const [name, value] of Object.entries(dataset)) node.dataset[name] = value;
  node.append(...children);
  return node;
}

function describeError(error) {
  return error && error.code ? `${error.code}: ${error.message}` : String((error && error.message) || error);
}

export class KeysPanel {
  constructor({ api, container, log }) {
    this.api = api;
    this.log = log || (() => {});
    if (!container) return;
    this.user = element('input', { placeholder: 'user id', inputMode: 'numeric', dataset: { testid: 'key-user' } });
    this.trade = element('input', { type: 'checkbox', checked: true, dataset: { testid: 'key-trade' } });
    this.withdraw = element('input', { type: 'checkbox', dataset: { testid: 'key-withdraw' } });
    this.ips = element('input', { placeholder: 'allowed IPs/CIDRs, comma-separated (blank: any)', spellcheck: false, dataset: { testid: 'key-ips' } });
    this.label = element('input', { placeholder: 'label', maxLength: 64, dataset: { testid: 'key-label' } });
    const form = element('form', { className: 'stack-form', autocomplete: 'off' }, [
      this.user,
      element('label', {}, [this.trade, ' trade (read is implied)']),
      element('label', {}, [this.withdraw, ' withdraw']),
      this.ips,
      this.label,
      element('button', { type: 'submit', textContent: 'Create key', dataset: { testid: 'key-create' } }),
    ]);
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.create();
    });
    this.status = element('div', { className: 'status', dataset: { testid: 'key-status' } });
    this.secret = element('div', { className: 'status ok', dataset: { testid: 'key-secret' } });
    // The table of keys is wider than a phone: it scrolls in a box of its own, not the panel.
    this.list = element('div', { className: 'scroll-x', dataset: { testid: 'key-list' } });
    container.replaceChildren(element('h3', { textContent: 'API keys' }), form, this.status, this.secret, this.list);
  }

  setStatus(text, kind = '') {
    if (!this.status) return;
    this.status.textContent = text;
    this.status.className = `status ${kind}`;
  }

  async create() {
    const text = this.user.value.trim();
    const user = Number(text);
    if (!text || !Number.isSafeInteger(user)) {
      this.setStatus('the user id must be a whole number', 'error');
      return;
    }
    const permissions = ['read'];
    if (this.trade.checked) permissions.push('trade');
    if (this.withdraw.checked) permissions.push('withdraw');
    const allow_ips = this.ips.value.split(',').map((s) => s.trim()).filter(Boolean);
    try {
      const made = await this.api.signed('POST', '/api/v1/admin/keys', { user, permissions, allow_ips, label: this.label.value });
      // Shown this once: the server keeps only its hash. Cleared at the next create or reload.
      this.secret.textContent = `key ${made.key}  secret ${made.secret}  (copy it now: it is not shown again)`;
      this.setStatus(`created ${made.key} for user ${made.user}`, 'ok');
      this.log(`API key ${made.key} created for user ${made.user}`);
      await this.refresh();
    } catch (error) {
      this.setStatus(describeError(error), 'error');
    }
  }

  async revoke(key) {
    try {
      await this.api.signed('DELETE', `/api/v1/admin/keys/${encodeURIComponent(key)}`);
      this.setStatus(`revoked ${key}`, 'ok');
      this.log(`API key ${key} revoked`);
      await this.refresh();
    } catch (error) {
      this.setStatus(describeError(error), 'error');
    }
  }

  async refresh() {
    if (!this.list) return;
    let keys;
    try {
      keys = await this.api.signed('GET', '/api/v1/admin/keys');
    } catch (error) {
      this.setStatus(describeError(error), 'error');
      return;
    }
    if (!keys.length) {
      this.list.replaceChildren(element('div', { className: 'dim', textContent: 'no issued keys' }));
      return;
    }
    const head = element('tr', {}, ['key', 'user', 'permissions', 'allow_ips', 'label', 'created', ''].map((c) => element('th', { textContent: c })));
    const rows = keys.map((k) => {
      const revoke = element('button', { type: 'button', textContent: 'Revoke', dataset: { testid: `key-revoke-${k.key}` } });
      revoke.addEventListener('click', () => this.revoke(k.key));
      const cells = [k.key, String(k.user), k.permissions.join(' '), k.allow_ips.join(' ') || 'any', k.label, new Date(k.created_ms).toISOString().slice(0, 19).replace('T', ' ')];
      return element('tr', { dataset: { key: k.key } }, [...cells.map((c) => element('td', { textContent: c })), element('td', {}, [revoke])]);
    });
    this.list.replaceChildren(element('table', { className: 'grid-table' }, [head, ...rows]));
  }
}
