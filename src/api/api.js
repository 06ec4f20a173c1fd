// The /v1 API as the page uses it: the bearer token, one call() for every
// request, idempotency keys, and the change-signal stream.
//
// Every path the page calls is in API below and nowhere else: the Rust
// test tests/suite/ui.rs reads this table and checks that each route
// exists in the router (docs/openapi.yaml documents them).

import { shareStream } from "./tabs.js";

export const API = Object.freeze({
  bots: ["GET", "/v1/bots"],
  botSession: ["GET", "/v1/bots/{bot}/session"],
  botMessage: ["POST", "/v1/bots/{bot}/messages"],
  botCancel: ["POST", "/v1/bots/{bot}/cancel"],
  botRemove: ["DELETE", "/v1/bots/{bot}"],
  botTurns: ["GET", "/v1/bots/{bot}/turns"],
  entries: ["GET", "/v1/sessions/{session}/entries"],
  retryTurn: ["POST", "/v1/turns/{turn}/retry"],
  approvals: ["GET", "/v1/approvals"],
  approval: ["GET", "/v1/approvals/{id}"],
  decide: ["POST", "/v1/approvals/{id}"],
  groups: ["GET", "/v1/groups"],
  groupCreate: ["POST", "/v1/groups"],
  group: ["GET", "/v1/groups/{group}"],
  groupMessage: ["POST", "/v1/groups/{group}/messages"],
  groupEntries: ["GET", "/v1/groups/{group}/entries"],
  search: ["GET", "/v1/search"],
  events: ["GET", "/v1/events"],
  secrets: ["GET", "/v1/secrets"],
  secretPut: ["PUT", "/v1/secrets/{name}"],
  secretDelete: ["DELETE", "/v1/secrets/{name}"],
});

const TOKEN_KEY = "botfleet.token";
/** Why the last tab to sign out did: "refused" (the host refused its
 * token) or "logout" (the person chose to), for the other tabs to say. */
const SIGNOUT_KEY = "botfleet.signout";

/**
 * The bearer token this tab signed in with. It is read from localStorage
 * once, when the page loads, and changed only by this tab's sign-in and
 * "Log out": a view never sends with a token other than the one it was
 * loaded with, even after another tab signs in as someone else (the app
 * follows that tab through onStoredChange).
 */
let held = localStorage.getItem(TOKEN_KEY) || "";

/** The bearer token, kept in localStorage until "Log out". */
export const auth = {
  get token() {
    return held;
  },
  save(token) {
    held = token;
    localStorage.setItem(TOKEN_KEY, token);
  },
  /**
   * Forgets the token in this tab, and in the browser unless another tab
   * already replaced or removed it there; `refused`: because the host
   * refused it (the other tabs are told which, {@link onStoredChange}).
   */
  clear(refused = false) {
    if (localStorage.getItem(TOKEN_KEY) === held) {
      // written before the token goes: the other tabs read it when they
      // see the token gone
      localStorage.setItem(SIGNOUT_KEY, refused ? "refused" : "logout");
      localStorage.removeItem(TOKEN_KEY);
    }
    held = "";
  },
  /** Set by the app: called when the host refuses the token held. */
  onRefused: () => {},
  /**
   * Set by the app: called with the stored token (or "") when another tab
   * of this browser signed in or out, so that it differs from the one
   * held; signed out, with why ("refused" or "logout").
   */
  onStoredChange: () => {},
};

window.addEventListener("storage", (ev) => {
  if (ev.storageArea !== localStorage || (ev.key !== TOKEN_KEY && ev.key !== null)) return;
  const stored = localStorage.getItem(TOKEN_KEY) || "";
  if (stored !== held) auth.onStoredChange(stored, localStorage.getItem(SIGNOUT_KEY) || "logout");
});

/**
 * The host's words for someone on the page: it writes one text for every
 * client, and the advice meant for a terminal or a script ("list yours
 * with GET /v1/bots or `botfleet bots`", "(POST /v1/bots/{bot}/messages)")
 * read as an instruction the page's user cannot follow (QA, 2026-12-05).
 */
export function forPage(message) {
  return (
    String(message)
      .replace(/list (?:yours|your bots) with GET \/v1\/bots or `botfleet bots`/g, "your bots are listed under Bots")
      .replace(/list (?:yours|your rooms) with GET \/v1\/groups or `botfleet group list`/g, "your rooms are listed under Rooms")
      .replace(/list yours with `botfleet approvals` or GET \/v1\/approvals/g, "yours are listed under Approvals")
      .replace(/Talk to a single bot directly instead/g, "Talk to a single bot in its own conversation instead")
      .replace(/, or cancel its turn with POST \/v1\/bots\/<subagent>\/cancel/g, ", or Stop turn on its page")
      // a route in brackets, said for a script: the page has its own way
      .replace(/ \((?:GET|POST|PUT|DELETE) \/v1\/[^()]*\)/g, "")
  );
}

/** An answer that was not a success; `message` is the host's own words,
 * as the page says them ({@link forPage}). */
export class ApiError extends Error {
  constructor(status, code, message, body) {
    super(forPage(message));
    this.status = status;
    this.code = code;
    this.body = body;
    // a conflict with something running (the host's `transient`): the
    // same request may pass once it ends
    this.transient = Boolean(body && body.error && body.error.transient);
  }
}

/** What a {placeholder} names, as a refusal says it. */
const NAMED = { bot: "bot", session: "conversation", turn: "turn", id: "approval", group: "room", name: "secret" };

/**
 * The path of API[name] with its {placeholders} filled in. A value "",
 * "." or ".." (from an address like #/bots/..) is refused with a 404:
 * encodeURIComponent leaves dots as they are, and fetch would resolve
 * the segment away and ask another route (%2E is resolved alike).
 */
export function pathOf(name, params = {}) {
  const [, template] = API[name];
  return template.replace(/\{(\w+)\}/g, (_, k) => {
    if (params[k] === undefined || params[k] === null) throw new Error(`${name}: missing ${k}`);
    const v = String(params[k]);
    if (v === "" || v === "." || v === "..") {
      throw new ApiError(404, "not_found", `No such page: no ${NAMED[k] || k} is called “${v}”. Check the address, or go back to your bots.`, null);
    }
    return encodeURIComponent(v);
  });
}

/**
 * Calls API[name]. Options: query (object), body (JSON), key
 * (Idempotency-Key), accept (extra statuses that are answers, e.g. 409),
 * token (try another token without saving it), signal.
 * Resolves to {status, data}; throws ApiError otherwise (code
 * `signed_out`, without asking the host, when there is no token).
 */
export async function call(name, params = {}, opts = {}) {
  const [method] = API[name];
  let path = pathOf(name, params);
  if (opts.query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(opts.query)) if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
    if ([...q].length) path += `?${q}`;
  }
  const token = opts.token ?? auth.token;
  // signed out (a load scheduled before "Log out" fires after it): nothing
  // is sent, and callers stay quiet about it
  if (!token) throw new ApiError(401, "signed_out", "You are signed out.", null);
  const headers = { Authorization: `Bearer ${token}`, Accept: "application/json" };
  let body;
  if (opts.body !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(opts.body);
  }
  if (opts.key) headers["Idempotency-Key"] = opts.key;
  let resp;
  try {
    resp = await fetch(path, { method, headers, body, signal: opts.signal, cache: "no-store" });
  } catch (e) {
    if (e && e.name === "AbortError") throw e;
    throw new ApiError(0, "network", "The host did not answer. Is botfleet still running?", null);
  }
  const text = await resp.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  // refused: the token this tab holds, not one tried or since replaced
  if (resp.status === 401 && opts.token === undefined && token && token === auth.token) auth.onRefused();
  if (!resp.ok && !(opts.accept || []).includes(resp.status)) {
    const err = (data && typeof data === "object" && data.error) || {};
    const refused = new ApiError(resp.status, err.code || `http_${resp.status}`, err.message || `${method} ${path} answered ${resp.status}`, data);
    // how long the host asked to wait before the next try (429, 503)
    refused.retryAfterMs = retryAfterMs(resp);
    throw refused;
  }
  // the host answers: a change stream waiting to try again tries now
  wakeStream();
  return { status: resp.status, data };
}

/**
 * A new idempotency key: a UUIDv7 (48-bit unix ms, version 7, variant 10,
 * random bits from crypto.getRandomValues, which works on plain http too).
 * The host reads the time in it to tell a late retry from a new message.
 */
export function uuidv7(now = Date.now()) {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  const hi = Math.floor(now / 2 ** 32);
  const lo = now >>> 0;
  b[0] = (hi >>> 8) & 0xff;
  b[1] = hi & 0xff;
  b[2] = (lo >>> 24) & 0xff;
  b[3] = (lo >>> 16) & 0xff;
  b[4] = (lo >>> 8) & 0xff;
  b[5] = lo & 0xff;
  b[6] = (b[6] & 0x0f) | 0x70;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = [...b].map((v) => v.toString(16).padStart(2, "0")).join("");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
  });

/** No byte for this long (the host sends a keep-alive every 15 s): reconnect. */
const SILENCE_MS = 45000;

/** Longest wait a host's Retry-After may ask (of the stream, of a
 * message's next send). */
const MAX_RETRY_AFTER_MS = 300000;

/** Fewest ms between two tries of the change stream that a request the
 * host answered brings forward. */
const WAKE_MIN_MS = 1000;

/** Ends the wait of this tab's change stream between two tries, set while
 * it waits after a failure (not after a refusal: the host's Retry-After
 * stands). */
let wake = null;

/** This tab's change signals (app.js makes one): a tab that does not
 * read the stream itself tells the tab that does (`wakeRelay`, tabs.js). */
let tabSignals = null;

/** Another request was answered: the host is back, so the stream, if it
 * waits to try again (backing off up to 30 s after an outage), tries now,
 * in this tab or in the tab that reads it for this one. A reply the host
 * stored was shown up to 30 s late (QA, 2026-12-07). */
function wakeStream() {
  try {
    if (wake) wake();
    else if (tabSignals && tabSignals.wakeRelay) tabSignals.wakeRelay();
  } catch (e) {
    // a hint to the stream: never the answer of the request that gave it
    console.error("could not wake the change stream", e);
  }
}

/** Waits `ms`, or less once woken (`wakeStream`), but at least
 * WAKE_MIN_MS; resolves at once when `signal` aborts. */
function wakeableSleep(ms, signal) {
  const started = Date.now();
  return new Promise((resolve) => {
    let timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      wake = null;
      signal.removeEventListener("abort", done);
      resolve();
    }
    wake = () => {
      clearTimeout(timer);
      timer = setTimeout(done, Math.max(0, WAKE_MIN_MS - (Date.now() - started)));
      wake = null;
    };
    signal.addEventListener("abort", done);
  });
}

/**
 * A refused stream's {message, retryAfterMs}: the host's own words (they
 * say which cap and what to do) and the seconds of its Retry-After.
 */
async function refusal(resp) {
  let message = `The host refused live updates (${resp.status}).`;
  try {
    const err = (await resp.json()).error;
    if (err && typeof err.message === "string" && err.message) message = err.message;
  } catch {
    // not the API's JSON (a proxy's page): the status says enough
  }
  return { message, retryAfterMs: retryAfterMs(resp) };
}

/** The wait (ms) `resp`'s Retry-After asks for, in seconds, at most
 * MAX_RETRY_AFTER_MS; 0 when it asks none. */
function retryAfterMs(resp) {
  const seconds = Number(resp.headers.get("Retry-After"));
  return Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds * 1000, MAX_RETRY_AFTER_MS) : 0;
}

/**
 * GET /v1/events read with fetch() streaming rather than EventSource:
 * EventSource cannot send the Authorization header, and the alternative,
 * a ?token= query parameter, would put the long-lived token in URLs (access
 * logs, proxies, history). With fetch the token stays in a header and the
 * API keeps one way to authenticate. The host does not replay missed
 * signals (no Last-Event-ID), so EventSource's automatic reconnection would
 * not help either: after every (re)connection this emits a `resync`, and
 * views fetch what they lack after the last seq they hold.
 *
 * Subscribers get {type: "change", session, seq, bot} or
 * {type: "resync", reason}; onState gets "connecting" | "live" | "offline",
 * or "refused" with the host's message when it holds as many streams as it
 * allows (429 too_many_streams: this user's other tabs and clients; 503
 * streams_full: all users'). A refused stream is tried again after the
 * host's Retry-After at the soonest, backing off as after a failure.
 *
 * The tabs of a browser share one stream (tabs.js): a browser allows 6
 * HTTP/1.1 connections per host, and a stream held by every tab left the
 * other requests of 5 or 6 tabs waiting for one. One tab, the leader,
 * reads the stream and forwards its signals and states to the others;
 * each tab's subscribers and onState see what they saw with a stream of
 * their own. Without the browser features this needs, each tab reads its
 * own, as before.
 */
export class Signals {
  constructor() {
    this.subscribers = new Set();
    this.onState = () => {};
    this.abort = null;
    /** The state last set: [state, message]. */
    this.now = ["connecting", undefined];
    /** Set by the leading tab (tabs.js): forwards {kind: "state", state,
     * message} and {kind: "event", event} to the other tabs. */
    this.relay = null;
    /** Set by a tab that follows another's stream (tabs.js): asks the
     * leading tab to try the stream now ({@link wakeStream}). */
    this.wakeRelay = null;
    tabSignals = this;
  }

  /** Ends the wait of the stream this tab reads between two tries (a
   * following tab's request was answered). */
  wakeNow() {
    if (wake) wake();
  }

  subscribe(fn) {
    this.subscribers.add(fn);
    return () => this.subscribers.delete(fn);
  }

  /** Tells this tab's subscribers. */
  emit(event) {
    for (const fn of [...this.subscribers]) {
      try {
        fn(event);
      } catch (e) {
        console.error("signal subscriber failed", e);
      }
    }
  }

  /** Sets this tab's state. */
  show(state, message) {
    this.now = [state, message];
    this.onState(state, message);
  }

  /** A signal of the stream this tab reads: here, and to the other tabs. */
  signal(event) {
    this.emit(event);
    if (this.relay) this.relay({ kind: "event", event });
  }

  /** A state of the stream this tab reads: here, and to the other tabs. */
  state(state, message) {
    this.show(state, message);
    if (this.relay) this.relay({ kind: "state", state, message });
  }

  /**
   * Starts receiving the signals of the signed-in user: from the stream
   * the tabs share, or from one of this tab's own.
   */
  start() {
    if (this.abort) return;
    this.abort = new AbortController();
    if (!shareStream(this, auth.token, this.abort.signal)) this.run(this.abort.signal);
  }

  stop() {
    if (this.abort) this.abort.abort();
    this.abort = null;
  }

  async run(signal) {
    let backoff = 1000;
    let refused = null;
    while (!signal.aborted) {
      this.state("connecting");
      try {
        const token = auth.token;
        const resp = await fetch(pathOf("events"), {
          headers: { Authorization: `Bearer ${token}`, Accept: "text/event-stream" },
          signal,
          cache: "no-store",
        });
        if (resp.status === 401) {
          if (token && token === auth.token) auth.onRefused();
          return;
        }
        if (resp.status === 429 || resp.status === 503) {
          refused = await refusal(resp);
        } else if (resp.ok && resp.body) {
          await this.read(resp.body, () => {
            backoff = 1000;
            this.state("live");
          });
        }
      } catch (e) {
        if (signal.aborted) return;
      }
      if (signal.aborted) return;
      let wait = backoff;
      if (refused) {
        this.state("refused", refused.message);
        wait = Math.max(wait, refused.retryAfterMs);
        refused = null;
        await sleep(wait + Math.random() * 500, signal);
      } else {
        this.state("offline");
        await wakeableSleep(wait + Math.random() * 500, signal);
      }
      backoff = Math.min(backoff * 2, 30000);
    }
  }

  async read(body, onReady) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    // the last piece ended in \r: a \n first in the next ends the same line
    let cr = false;
    let timer = 0;
    const watch = () => {
      clearTimeout(timer);
      timer = setTimeout(() => reader.cancel().catch(() => {}), SILENCE_MS);
    };
    watch();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        watch();
        let text = decoder.decode(value, { stream: true });
        if (!text) continue;
        // lines end in \r\n, \n or \r: the host sends \n, a proxy may
        // re-encode it (a stream of \r\n had no "\n\n": no event, not even
        // `ready`, reached the page); buf holds them as \n
        if (cr && text.startsWith("\n")) text = text.slice(1);
        cr = text.endsWith("\r");
        buf += text.replace(/\r\n?/g, "\n");
        let end;
        while ((end = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          this.dispatch(block, onReady);
        }
      }
    } finally {
      clearTimeout(timer);
    }
  }

  dispatch(block, onReady) {
    let event = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    let payload = {};
    try {
      payload = JSON.parse(data.join("\n") || "{}");
    } catch {
      return;
    }
    if (event === "ready") {
      onReady();
      this.signal({ type: "resync", reason: "connected" });
    } else if (event === "change") {
      this.signal({ type: "change", session: payload.session, seq: payload.seq, bot: payload.bot });
    } else if (event === "resync") {
      this.signal({ type: "resync", reason: "lagged" });
    }
  }
}
