// One change stream for all the tabs of a browser. A browser opens at most
// 6 HTTP/1.1 connections to a host, and GET /v1/events holds one for as
// long as it is read: with a stream in every tab, the other requests of a
// fifth or sixth tab waited for a free connection (the page loaded after a
// minute, or never).
//
// The tabs signed in as one user elect a leader: the leader reads the
// stream (Signals.run) and posts each signal and state on a
// BroadcastChannel; the others hand what they receive to their own
// subscribers. When the leader goes (its tab closed, signed out), another
// tab opens the stream: its `ready` is a `resync` in every tab, so views
// fetch what they missed meanwhile. A tab that joins asks the leader for
// the stream's state and, when it is live, resyncs as after a reconnection.
//
// The election uses the Web Locks API where the browser has it (a secure
// context: https, or http to localhost): the tab holding the lock leads,
// and the browser hands the lock on when that tab goes. Over plain http
// to another address (a host on a LAN) there are no Web Locks, and the
// tabs elect a leader with a lease in localStorage instead (leaseElection):
// the leader renews it every few seconds and gives it up when its tab is
// closed, hidden for good (frozen) or signed out, and the other tabs take
// it when it is given up or has run out. A tab that dies without saying so
// (it crashed, or the browser closed it without running its pagehide)
// gives nothing up: the tab in front asks the leader every few seconds,
// and takes the lease when it does not answer.
//
// The lock, channel and lease are named after a hash of the token, never
// the token itself: tabs signed in as two users never share signals, and a
// tab that signs out or in (Signals.stop, start) leaves one and joins
// another.
//
// The stream stays open while every tab is hidden: a hidden tab still
// counts pending approvals in its title, and there is one stream per
// browser, not per tab.

const PREFIX = "botfleet.events.";

/** How long a lease in localStorage holds without being renewed. Long:
 * a hidden tab's timers may run only once a minute (Chrome throttles
 * them), and a leader whose lease ran out while its tab slept would hand
 * the stream over, reconnecting every tab, once a minute. A leader that
 * goes gives the lease up at once (pagehide, freeze, sign-out). */
const LEASE_MS = 75_000;
/** How often the leader renews its lease, and the others look at it. */
const RENEW_MS = 5_000;
/** How long a tab that wrote its claim waits before reading it back:
 * tabs claiming together each write theirs, and the last write stands. */
const SETTLE_MS = 200;
/** How long the tab in front waits for the leader's answer to a ping
 * before it takes the lease (messages reach hidden tabs without delay;
 * a leader that answers late only hands the stream over). */
const PING_MS = 3_000;

/** Whether this browser can share a stream between its tabs. */
function shareable() {
  return typeof BroadcastChannel === "function" && storageWorks();
}

/** Whether the tabs elect their leader with Web Locks: secure contexts
 * only (https, or http to localhost). */
const locking = () => typeof navigator.locks?.request === "function";

function storageWorks() {
  try {
    const probe = `${PREFIX}probe`;
    localStorage.setItem(probe, "1");
    localStorage.removeItem(probe);
    return true;
  } catch {
    return false;
  }
}

/** The name of the lock and channel of the user holding `token`: SHA-256
 * where SubtleCrypto exists (secure contexts), else a 128-bit string hash
 * (plain http: the token itself is kept in this origin's localStorage,
 * which is all a name seen by this origin's tabs could tell). */
async function nameFor(token) {
  const text = `botfleet change stream ${token}`;
  if (typeof crypto.subtle?.digest !== "function") return PREFIX + hash128(text);
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return PREFIX + [...digest.slice(0, 16)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** cyrb128: four 32-bit lanes of multiply-xorshift over the UTF-16 units. */
function hash128(text) {
  let h1 = 1779033703;
  let h2 = 3144134277;
  let h3 = 1013904242;
  let h4 = 2773480762;
  for (let i = 0; i < text.length; i++) {
    const k = text.charCodeAt(i);
    h1 = h2 ^ Math.imul(h1 ^ k, 597399067);
    h2 = h3 ^ Math.imul(h2 ^ k, 2869860233);
    h3 = h4 ^ Math.imul(h3 ^ k, 951274213);
    h4 = h1 ^ Math.imul(h4 ^ k, 2716044179);
  }
  h1 = Math.imul(h3 ^ (h1 >>> 18), 597399067);
  h2 = Math.imul(h4 ^ (h2 >>> 22), 2869860233);
  h3 = Math.imul(h1 ^ (h3 >>> 17), 951274213);
  h4 = Math.imul(h2 ^ (h4 >>> 19), 2716044179);
  h1 ^= h2 ^ h3 ^ h4;
  h2 ^= h1;
  h3 ^= h1;
  h4 ^= h1;
  return [h1, h2, h3, h4].map((h) => (h >>> 0).toString(16).padStart(8, "0")).join("");
}

/** A random id for this tab (crypto.getRandomValues works on plain http). */
function tabId() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
}

/** A promise that resolves when `stop` aborts. */
const stopped = (stop) =>
  new Promise((resolve) => {
    if (stop.aborted) resolve();
    else stop.addEventListener("abort", resolve, { once: true });
  });

/**
 * Gives `signals` (a Signals of api.js) the signals of the stream the tabs
 * signed in with `token` share, until `stop` aborts. False, doing nothing,
 * when this browser cannot share one: the caller reads its own.
 */
export function shareStream(signals, token, stop) {
  if (!token || !shareable()) return false;
  join(signals, token, stop).catch((e) => {
    if (stop.aborted) return;
    // the lock was refused (a sandboxed frame, say): a stream of its own
    // (and no leader to wake: the channel is closed, and posting to it
    // threw inside a request the host had answered: review)
    console.error("cannot share the change stream with other tabs", e);
    signals.relay = null;
    signals.wakeRelay = null;
    signals.run(stop);
  });
  return true;
}

async function join(signals, token, stop) {
  signals.show("connecting");
  const name = await nameFor(token);
  if (stop.aborted) return;
  const me = tabId();
  const channel = new BroadcastChannel(name);
  // whether this tab reads the stream for the others now
  const role = {
    leading: false,
    vacant: () => {},
    answered: () => {},
    follow() {
      this.leading = false;
      signals.relay = null;
    },
  };
  // a request this tab got answered while the stream is down: the leader,
  // waiting to try again, tries now (its wait keeps tries WAKE_MIN_MS
  // apart, api.js)
  signals.wakeRelay = () => {
    if (role.leading || stop.aborted || signals.now[0] === "live") return;
    channel.postMessage({ kind: "wake" });
  };
  stop.addEventListener(
    "abort",
    () => {
      signals.relay = null;
      signals.wakeRelay = null;
      channel.close();
    },
    { once: true },
  );
  channel.onmessage = ({ data }) => {
    if (!data || typeof data !== "object" || stop.aborted) return;
    // the leader gave its lease up: take it now, not when it runs out
    if (data.kind === "leaving") return role.vacant();
    if (data.kind === "pong" && data.to === me) return role.answered();
    if (role.leading) {
      // a tab joined: it learns what the stream is doing
      if (data.kind === "hello") {
        channel.postMessage({ kind: "welcome", to: data.from, state: signals.now[0], message: signals.now[1] });
      }
      // a tab asks whether the leader is still there (leaseElection)
      if (data.kind === "ping") channel.postMessage({ kind: "pong", to: data.from });
      // another tab's request was answered: the host is back
      if (data.kind === "wake") signals.wakeNow();
      return;
    }
    if (data.kind === "event") signals.emit(data.event);
    else if (data.kind === "state") signals.show(data.state, data.message);
    else if (data.kind === "welcome" && data.to === me) {
      signals.show(data.state, data.message);
      // what happened before this tab listened: fetched after the last seq
      if (data.state === "live") signals.emit({ type: "resync", reason: "connected" });
    }
  };
  channel.postMessage({ kind: "hello", from: me });
  // leads for as long as `term` holds; the stream ends with it
  const lead = async (term) => {
    role.leading = true;
    signals.relay = (msg) => channel.postMessage(msg);
    await signals.run(term);
    // the stream ended for good (the host refused the token, and the tab
    // signs out): no other tab of this token would fare better
    await stopped(term);
  };
  if (!locking()) return leaseElection(name, me, channel, role, lead, stop);
  try {
    await navigator.locks.request(name, { signal: stop }, () => lead(stop));
  } catch (e) {
    if (stop.aborted) return;
    channel.close();
    throw e;
  }
}

/** The lease of `key` in localStorage: {id, until}, or null. */
function leaseAt(key) {
  try {
    const lease = JSON.parse(localStorage.getItem(key) || "null");
    return lease && typeof lease.id === "string" && typeof lease.until === "number" ? lease : null;
  } catch {
    return null;
  }
}

/**
 * Elects the leader without Web Locks (plain http to another host than
 * localhost): a lease in localStorage, {id, until}. A tab that finds no
 * lease, or one run out, writes its own, waits SETTLE_MS and leads if its
 * write stood. The leader renews its lease every RENEW_MS; when it reads
 * another tab's live lease (two tabs claimed at once, or its own ran out
 * while its tab slept) it stops leading and its stream closes. A leader
 * that goes (pagehide, freeze, sign-out) removes its lease and says
 * "leaving", and the others claim at once. One that went without saying
 * so left its lease behind, and the other tabs kept showing its last
 * state ("live") with no signal reaching them until the lease ran out
 * (75 s): so the tab in front pings the leader when it looks at the lease,
 * and removes a lease whose holder has not answered in PING_MS.
 */
async function leaseElection(name, me, channel, role, lead, stop) {
  const key = `${name}.lease`;
  let term = null;
  let claiming = false;
  // the timer of the ping waiting for the leader's answer
  let probe = null;
  const mine = () => leaseAt(key)?.id === me;
  const renew = () => localStorage.setItem(key, JSON.stringify({ id: me, until: Date.now() + LEASE_MS }));
  const resign = () => {
    if (!term) return;
    term.abort();
    term = null;
    role.follow();
  };
  const giveUp = () => {
    if (!term) return;
    if (mine()) localStorage.removeItem(key);
    resign();
    // (once signed out the channel is closed; the lease's removal tells
    // the tabs still signed in, through their storage event)
    if (!stop.aborted) channel.postMessage({ kind: "leaving" });
  };
  role.answered = () => {
    if (probe === null) return;
    clearTimeout(probe);
    probe = null;
  };
  // asks the leader holding `lease` whether it is there; without an answer
  // its lease is taken away (if it still holds it) and the tabs claim
  const ping = (lease) => {
    if (probe !== null || document.visibilityState !== "visible") return;
    channel.postMessage({ kind: "ping", from: me });
    probe = setTimeout(() => {
      probe = null;
      if (stop.aborted || term || leaseAt(key)?.id !== lease.id) return;
      localStorage.removeItem(key);
      void look();
    }, PING_MS);
  };
  const look = async () => {
    if (stop.aborted || claiming) return;
    const lease = leaseAt(key);
    const held = lease && lease.until > Date.now();
    if (term) {
      if (held && lease.id !== me) resign();
      else renew();
      return;
    }
    if (held) return ping(lease);
    claiming = true;
    renew();
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    claiming = false;
    if (stop.aborted || term || !mine()) return;
    term = new AbortController();
    lead(term.signal).catch((e) => console.error("the change stream failed", e));
  };
  role.vacant = () => void look();
  const onStorage = (ev) => {
    if (ev.storageArea === localStorage && (ev.key === key || ev.key === null)) void look();
  };
  const onShow = () => {
    if (document.visibilityState === "visible") void look();
  };
  const timer = setInterval(() => void look(), RENEW_MS);
  addEventListener("storage", onStorage);
  addEventListener("pagehide", giveUp);
  document.addEventListener("freeze", giveUp);
  document.addEventListener("resume", onShow);
  document.addEventListener("visibilitychange", onShow);
  await look();
  await stopped(stop);
  clearInterval(timer);
  role.answered();
  removeEventListener("storage", onStorage);
  removeEventListener("pagehide", giveUp);
  document.removeEventListener("freeze", giveUp);
  document.removeEventListener("resume", onShow);
  document.removeEventListener("visibilitychange", onShow);
  giveUp();
}
