// The page's outbox: every message sent from the page until the host
// confirms or refuses it. It belongs to the page, not to a conversation's
// view: leaving the view does not stop the resends of a message whose
// answer was lost (it would read "sending" and might never reach the
// host), and the view shows where each one stands when the person comes
// back. What is not confirmed is kept in localStorage too, so a reload
// sends it again with the same Idempotency-Key (the host answers
// `duplicate` or accepts it: it cannot arrive twice).

import { ApiError, auth, call, uuidv7 } from "./api.js";
import { quoted } from "./dom.js";

const STORE_KEY = "botfleet.outbox";
/** The first automatic resend of a message whose answer was lost waits
 * this long (ms); each next one waits twice as long, up to RESEND_MAX_MS. */
const RESEND_MIN_MS = 2000;
const RESEND_MAX_MS = 30000;
/** Fewest ms between two sends of one message that the host's signs of
 * life (a page of entries, the change stream back) bring forward. */
const NUDGE_MS = 1000;

/**
 * Whether the host may hold a message whose send failed with `e`: the
 * request may have reached it and its answer been lost (no answer at
 * all), or the host failed or timed out while admitting it (5xx, 408),
 * or asked to be asked later (429). Any other refusal stored nothing.
 */
function mayHaveReached(e) {
  return e.status === 0 || e.status === 408 || e.status === 429 || e.status >= 500;
}

/**
 * A short tag of a token (32-bit FNV-1a), stored with each kept message:
 * after a reload only the account that wrote a message sends it again
 * (another tab may have signed in as someone else meanwhile). It tells
 * tokens apart; it does not keep a token secret, nor need to.
 */
export function tokenTag(token) {
  let x = 0x811c9dc5;
  for (let i = 0; i < token.length; i++) {
    x ^= token.charCodeAt(i);
    x = Math.imul(x, 0x01000193) >>> 0;
  }
  return x.toString(16);
}

/** The conversation a message goes to, as a string: "bot:ID" or "room:ID". */
export const convOf = (to) => `${to.kind}:${to.id}`;

/** Posts `text` to `to` ({kind: "bot" | "room", id}) with `key`. */
/** How long a message's request may go unanswered before it counts as
 * not confirmed: a host that froze (its process stopped) left the bubble
 * "Sending…" for good, with nothing to do (QA). */
const POST_TIMEOUT_MS = 15_000;

async function post(to, text, key) {
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), POST_TIMEOUT_MS);
  const opts = { body: { text }, key, accept: [409], signal: stop.signal };
  try {
    return await (to.kind === "room" ? call("groupMessage", { group: to.id }, opts) : call("botMessage", { bot: to.id }, opts));
  } catch (e) {
    // the host may have it: asked again with the same key, as after a
    // dropped connection
    if (e && e.name === "AbortError") throw new ApiError(0, "network", `The host did not answer within ${POST_TIMEOUT_MS / 1000} s. Is botfleet still running?`, null);
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

let uid = 0;

/**
 * One message in the outbox. `state`: "sending"; "sent" (the host stored
 * it, as entry `entryId`; it then leaves the outbox); "unconfirmed" (no
 * answer: the host may hold it; sent again by itself with the same key);
 * "failed" (the host refused it: `message` says why; `renew` when a retry
 * takes a new key, after a 409 whose key's fate is unknown). `reached`:
 * a try of this key may have reached the host, so it is never offered to
 * be discarded.
 */
class Pending {
  constructor({ to, text, key = uuidv7(), reached = false, failed = null, renew = false, tried = false }) {
    this.id = ++uid;
    this.to = to;
    this.conv = convOf(to);
    this.text = text;
    this.key = key;
    this.reached = reached;
    this.state = failed === null ? "sending" : "failed";
    this.message = failed || "";
    this.renew = renew;
    this.entryId = null;
    this.answer = null;
    this.busy = false;
    this.timer = 0;
    this.wait = RESEND_MIN_MS;
    this.last = 0;
    /** Whether a request has carried it: one that waited behind an
     * earlier message and was never sent cannot be on the host. */
    this.tried = tried;
    /** Not asked again by itself before this time (ms): a 429's
     * Retry-After. */
    this.notBefore = 0;
  }

  /** What localStorage keeps of it. */
  record() {
    const failed = this.state === "failed" ? this.message : null;
    return { key: this.key, to: this.to, text: this.text, reached: this.reached, failed, renew: this.renew, tried: this.tried, tag: tokenTag(auth.token) };
  }
}

/** The stored records, [] when there are none or they do not parse. */
function stored() {
  try {
    const list = JSON.parse(localStorage.getItem(STORE_KEY) || "[]");
    return Array.isArray(list) ? list : [];
  } catch {
    return [];
  }
}

/**
 * Writes `p`'s record, or takes it out (`keep` false). The list is read
 * again each time: other tabs of this browser keep theirs in it too.
 */
function persist(p, keep) {
  const others = stored().filter((r) => r && r.key !== p.key);
  const list = keep ? [...others, p.record()] : others;
  try {
    if (list.length) localStorage.setItem(STORE_KEY, JSON.stringify(list));
    else localStorage.removeItem(STORE_KEY);
  } catch {
    // storage full or refused: the message is still sent from memory
  }
}

/**
 * The messages in flight, and who watches them. A view watches one
 * conversation (`watch(conv, fn)`): fn(p, what) hears "added",
 * "changed" and "removed".
 */
class Outbox {
  constructor() {
    this.items = new Map();
    this.watchers = new Map();
    /** Set by the app: the host refused the token and the tab signed out;
     * called with what to tell the person (which message, its text). */
    this.onSignedOut = () => {};
    /** Keys of the messages the sign-in page already names (unsent()). */
    this.told = new Set();
  }

  /** The messages to `conv`, oldest first. */
  of(conv) {
    return [...this.items.values()].filter((p) => p.conv === conv);
  }

  /** Tells `fn(p, what)` of the changes to the messages to `conv`; returns
   * a function that stops it. */
  watch(conv, fn) {
    if (!this.watchers.has(conv)) this.watchers.set(conv, new Set());
    this.watchers.get(conv).add(fn);
    return () => this.watchers.get(conv).delete(fn);
  }

  tell(p, what) {
    for (const fn of [...(this.watchers.get(p.conv) || [])]) {
      try {
        fn(p, what);
      } catch (e) {
        console.error("outbox watcher failed", e);
      }
    }
  }

  /**
   * The oldest message to `p`'s conversation before `p` that the host has
   * not answered yet (sending, or not confirmed), if any: `p` waits for
   * it. A message whose answer was lost was sent again on its own timer
   * while one typed after it went at once, and the bot read them in the
   * other order (QA, 2026-12-07). One refused ("failed") holds nothing
   * back: it goes again only when the person retries it.
   */
  ahead(p) {
    for (const q of this.items.values()) {
      if (q.id >= p.id) break;
      if (q.conv === p.conv && (q.state === "sending" || q.state === "unconfirmed")) return q;
    }
    return null;
  }

  /** Sends what waits in `conv` behind a message the host just answered
   * (or that was discarded), in the order it was written. */
  release(conv) {
    for (const q of this.of(conv)) {
      if (q.queued && !q.busy) this.attempt(q);
    }
  }

  /** Sends `text` to `to` with a fresh key; resolves once the first try
   * is answered (or given up on). */
  async send(to, text) {
    const p = new Pending({ to, text });
    this.items.set(p.id, p);
    // kept before the first try: a reload while it is in flight sends it
    // again, with this key
    persist(p, true);
    this.tell(p, "added");
    await this.attempt(p);
    return p;
  }

  /**
   * Takes up what an earlier load of the page (or another tab) kept for
   * the account signed in now, and sends each again with its key; a
   * refused one is shown as refused. Records of another account are left
   * alone (that account's tabs take them up).
   */
  resume() {
    const tag = tokenTag(auth.token);
    const held = new Set([...this.items.values()].map((p) => p.key));
    // in the order they were written: a key is a UUIDv7, which sorts by
    // its time (the list holds each in the order it was last written)
    const records = stored().filter((r) => r && typeof r.key === "string");
    records.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    for (const r of records) {
      if (!r || r.tag !== tag || held.has(r.key) || !r.to || typeof r.text !== "string") continue;
      // in flight or unanswered when it was kept: it may have reached
      // (unless it never left: it waited behind an earlier message; a
      // record without `tried` is from before it was kept)
      const tried = r.tried !== false;
      const p = new Pending({ to: r.to, text: r.text, key: r.key, reached: r.failed ? Boolean(r.reached) : Boolean(r.reached) || tried, failed: r.failed || null, renew: Boolean(r.renew), tried });
      if (p.state !== "failed" && p.reached) p.state = "unconfirmed";
      this.items.set(p.id, p);
      this.tell(p, "added");
      if (p.state !== "failed") this.attempt(p);
    }
  }

  /** Forgets every message, here and in localStorage ("Log out"). */
  clear() {
    for (const p of this.items.values()) {
      clearTimeout(p.timer);
      this.tell(p, "removed");
    }
    this.items.clear();
    try {
      localStorage.removeItem(STORE_KEY);
    } catch {
      // nothing kept
    }
  }

  /** Takes `p` out ("Discard", or a view said what became of it). */
  discard(p) {
    clearTimeout(p.timer);
    if (!this.items.delete(p.id)) return;
    persist(p, false);
    this.tell(p, "removed");
    this.release(p.conv);
  }

  /** Sends `p` again now; after a 409, as a new message with a new key. */
  retry(p) {
    if (p.state === "failed" && p.renew) {
      // the record under the old key goes: kept, a reload brought the
      // message back as refused after its new key was sent (review)
      persist(p, false);
      p.key = uuidv7();
      p.reached = false;
      p.tried = false;
      p.renew = false;
    }
    return this.attempt(p);
  }

  /** The host answers again: what waits for an answer is asked now
   * rather than at its next interval. */
  reachable() {
    for (const p of this.items.values()) this.nudge(p);
  }

  /** Asks `p` again now if it waits for an answer and was not just asked. */
  nudge(p) {
    if (p.state === "unconfirmed" && !p.busy && Date.now() - p.last >= NUDGE_MS && Date.now() >= p.notBefore) this.attempt(p);
  }

  set(p, state, message = "") {
    p.state = state;
    p.message = message;
    if (state === "sent") {
      this.items.delete(p.id);
      persist(p, false);
    } else if (this.items.has(p.id)) {
      persist(p, true);
    }
    this.tell(p, "changed");
    if (state === "sent" || state === "failed") this.release(p.conv);
  }

  /** The person's "Ask again now": not before the host's Retry-After. A
   * message the host refused for its rate limit, asked again at once, is
   * refused again and counts against the limit (QA: the button ignored
   * the wait the page keeps to by itself). The ms left to wait, 0 when it
   * was asked again. */
  askNow(p) {
    const wait = p.limited ? p.notBefore - Date.now() : 0;
    if (wait > 0) return wait;
    this.attempt(p);
    return 0;
  }

  async attempt(p) {
    clearTimeout(p.timer);
    if (p.busy || !this.items.has(p.id)) return;
    // signed out: nothing is sent without a token ("Log out" cleared the
    // outbox; a load of another account resumes only its own)
    if (!auth.token) return;
    // an earlier message to the conversation is not answered yet: this
    // one goes after it (asked now: the person is here and writing)
    const first = this.ahead(p);
    if (first) {
      p.queued = true;
      // a retried refusal reads as waiting to be sent, not as refused;
      // one the host never took waits as never sent (review: kept as
      // tried, a reload took it for possibly stored, and its refusal then
      // offered only a Retry that failed every time)
      if (p.state === "failed") {
        if (!p.reached) p.tried = false;
        this.set(p, "sending");
      }
      if (!first.busy && Date.now() >= first.notBefore) this.attempt(first);
      return;
    }
    p.queued = false;
    p.busy = true;
    p.tried = true;
    p.last = Date.now();
    // an unconfirmed message keeps its words while it is asked again
    if (p.state !== "unconfirmed") this.set(p, "sending");
    // the status of the last refusal (a room's 404: the sender is no
    // longer in it), for the view to say why (compose.js)
    p.refusal = 0;
    try {
      const { status, data } = await post(p.to, p.text, p.key);
      if (!this.items.has(p.id)) return;
      if (status === 409) {
        p.renew = true;
        p.answer = data;
        // a plain refusal (no admission `status`: the bot left the fleet,
        // the room closed) of a key it never stored: the host has answered
        // for this key (a stored one is `duplicate` or `conflict` whatever
        // came since), so the message is known not to be there, and Edit
        // and Discard are offered (QA: a message "not confirmed" before a
        // restart stayed so, with only Retry, when the host then refused it)
        if (!data || !data.status) p.reached = false;
        this.set(p, "failed", (data && data.error && data.error.message) || "The host could not accept this message.");
        return;
      }
      p.entryId = data.entry_id;
      p.answer = data;
      this.set(p, "sent");
    } catch (e) {
      if (e.status === 401) return this.refused(p);
      if (!this.items.has(p.id)) return;
      if (!mayHaveReached(e)) {
        p.refusal = e.status;
        return this.set(p, "failed", e.message);
      }
      // a 429 stored nothing (the host says so); the host may hold what
      // went unanswered
      if (e.status !== 429) p.reached = true;
      p.limited = e.status === 429;
      p.notBefore = Date.now() + (e.retryAfterMs || 0);
      this.set(p, "unconfirmed", e.message);
      // not before the host's Retry-After
      if (this.items.has(p.id)) p.timer = setTimeout(() => this.attempt(p), Math.max(p.wait, e.retryAfterMs || 0));
      p.wait = Math.min(p.wait * 2, RESEND_MAX_MS);
    } finally {
      p.busy = false;
    }
  }

  /** The host refused the token this tab holds (call() signed it out,
   * which cleared the outbox): the person is told, with the text. */
  refused(p) {
    if (this.items.has(p.id)) this.set(p, "failed", p.reached ? "Not confirmed: the host refused your token." : "Not sent: the host refused your token.");
    // named already, with the others, when the sign-out came first
    if (!auth.token && !this.told.has(p.key)) this.onSignedOut(notSent([p]));
  }

  /** How many messages wait for the host's answer or were not sent. */
  count() {
    return this.items.size;
  }

  /** What the sign-in page says of the messages this tab holds unsent or
   * unconfirmed when another request finds the token refused ("" when
   * it holds none): signing out clears them, and they went without a
   * word when the stream or a list was refused before their own retry
   * was (QA, 2026-12-04). */
  unsent() {
    const held = [...this.items.values()];
    this.told = new Set(held.map((p) => p.key));
    return held.length ? notSent(held) : "";
  }
}

/** Tells the person that `held` (one or more messages) may not have been
 * sent because the host refused the token, quoting each. */
function notSent(held) {
  const quote = (p) => quoted(p.text);
  const maybe = held.some((p) => p.reached);
  const why = "the host refused your token (it may have changed, or you logged out). Sign in, then send";
  if (held.length === 1) {
    return `Your message ${maybe ? "may not have been sent" : "was not sent"}: ${why} it again: ${quote(held[0])}`;
  }
  return `${held.length} of your messages ${maybe ? "may not have been sent" : "were not sent"}: ${why} them again: ${held.map(quote).join(" ")}`;
}

/** The page's outbox. */
export const outbox = new Outbox();
