// JSON-RPC 2.0 over the dashboard's WebSocket: the daemon's one protocol.
//
// Calls are matched to replies by id. Events arrive as `event` notifications; after a
// reconnect the subscription resumes with `since` (the last seq seen) when the daemon is
// the same process (same epoch), and the app is told to reload when events were lost or
// the daemon restarted.

// The session's page key, which login.js kept (see pokeralphd/web/auth.py); "" if none.
export function pageKey() { return localStorage.getItem("pokeralph.key") || ""; }

export class RpcError extends Error {
  constructor(error) {
    super(error.message);
    this.code = error.code;
    this.data = error.data;
  }
}

export class Rpc {
  // url: the WebSocket's, or a function giving it at each (re)connection.
  constructor(url) {
    this.url = url;
    this.nextId = 1;
    this.pending = new Map();
    this.eventHandlers = new Set();
    this.stateHandlers = new Set();
    this.lastSeq = null;
    this.epoch = null;
    this.state = "connecting";
    this.backoff = 250;
    this.ready = new Promise((resolve) => { this._ready = resolve; });
    this.connect();
  }

  onEvent(fn) { this.eventHandlers.add(fn); return () => this.eventHandlers.delete(fn); }
  onState(fn) { this.stateHandlers.add(fn); fn(this.state); }

  setState(state, detail) {
    this.state = state;
    for (const fn of this.stateHandlers) fn(state, detail);
  }

  connect() {
    const ws = new WebSocket(typeof this.url === "function" ? this.url() : this.url);
    this.ws = ws;
    ws.onopen = () => {
      this.backoff = 250;
      this.subscribe().catch((err) => console.error("subscribe failed", err));
    };
    ws.onmessage = (e) => this.receive(e.data);
    ws.onclose = (e) => {
      for (const { reject } of this.pending.values()) {
        reject(new RpcError({ code: -1, message: "the connection to the daemon was lost" }));
      }
      this.pending.clear();
      // 1008: the handshake was refused (no session): reconnecting will not help.
      if (e.code === 1008 || (e.code === 1006 && this.state === "refused")) {
        this.setState("refused");
        return;
      }
      this.setState("closed");
      setTimeout(() => this.connect(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, 5000);
    };
  }

  receive(text) {
    let message;
    try { message = JSON.parse(text); } catch { return; }
    for (const one of Array.isArray(message) ? message : [message]) {
      if (one.method === "event") {
        const event = one.params;
        this.lastSeq = event.seq;
        for (const fn of this.eventHandlers) {
          try { fn(event); } catch (err) { console.error(err); }
        }
      } else if (one.method === "events.overflow") {
        this.lastSeq = one.params.lastSeq;  // the daemon closes us; we resume from here
      } else if (one.id !== undefined && this.pending.has(one.id)) {
        const { resolve, reject } = this.pending.get(one.id);
        this.pending.delete(one.id);
        if (one.error) reject(new RpcError(one.error)); else resolve(one.result);
      }
    }
  }

  call(method, params = {}) {
    return new Promise((resolve, reject) => {
      if (!this.ws || this.ws.readyState !== WebSocket.OPEN) {
        reject(new RpcError({ code: -1, message: "not connected to the daemon" }));
        return;
      }
      const id = this.nextId++;
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    });
  }

  async subscribe() {
    const status = await this.call("daemon.status");
    const resume = this.lastSeq !== null && this.epoch === status.epoch;
    const result = await this.call("events.subscribe", resume ? { since: this.lastSeq } : {});
    const reload = this.epoch !== null && (!resume || result.lost > 0);
    this.epoch = result.epoch;
    if (!resume) this.lastSeq = result.seq;
    this.setState("open", { reload });
    this._ready();
  }
}
