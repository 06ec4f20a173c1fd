// One change stream for all the tabs of a browser. A browser opens at most
// 6 HTTP/1.1 connections to a host, and GET /v1/events holds one for as
// long as it is read: with a stream in every tab, the other requests of a
// fifth or sixth tab waited for a free connection (the page loaded after a
// minute, or never).
//
// The tabs signed in as one user elect a leader with the Web Locks API:
// the tab holding the lock reads the stream (Signals.run) and posts each
// signal and state on a BroadcastChannel; the others hand what they receive
// to their own subscribers. When the leader goes (its tab closed, signed
// out), the browser gives the lock to another tab, which opens the stream:
// its `ready` is a `resync` in every tab, so views fetch what they missed
// meanwhile. A tab that joins asks the leader for the stream's state and,
// when it is live, resyncs as after a reconnection.
//
// The lock and the channel are named after a hash of the token, never the
// token itself: tabs signed in as two users never share signals, and a tab
// that signs out or in (Signals.stop, start) leaves one and joins another.
//
// The stream stays open while every tab is hidden: a hidden tab still
// counts pending approvals in its title, and there is one stream per
// browser, not per tab.

const PREFIX = "botfleet.events.";

/**
 * Whether this browser can share a stream. Web Locks and SubtleCrypto
 * exist only in secure contexts (https, or http to localhost): over plain
 * http to another address each tab reads its own stream.
 */
function shareable() {
  return (
    typeof BroadcastChannel === "function" &&
    typeof navigator.locks?.request === "function" &&
    typeof crypto.subtle?.digest === "function"
  );
}

/** The name of the lock and channel of the user holding `token`. */
async function nameFor(token) {
  const bytes = new TextEncoder().encode(`botfleet change stream ${token}`);
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return PREFIX + [...digest.slice(0, 16)].map((b) => b.toString(16).padStart(2, "0")).join("");
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
    console.error("cannot share the change stream with other tabs", e);
    signals.relay = null;
    signals.run(stop);
  });
  return true;
}

async function join(signals, token, stop) {
  signals.show("connecting");
  const name = await nameFor(token);
  if (stop.aborted) return;
  const me = crypto.randomUUID();
  const channel = new BroadcastChannel(name);
  let leading = false;
  stop.addEventListener(
    "abort",
    () => {
      signals.relay = null;
      channel.close();
    },
    { once: true },
  );
  channel.onmessage = ({ data }) => {
    if (!data || typeof data !== "object" || stop.aborted) return;
    if (leading) {
      // a tab joined: it learns what the stream is doing
      if (data.kind === "hello") {
        channel.postMessage({ kind: "welcome", to: data.from, state: signals.now[0], message: signals.now[1] });
      }
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
  try {
    await navigator.locks.request(name, { signal: stop }, async () => {
      leading = true;
      signals.relay = (msg) => channel.postMessage(msg);
      await signals.run(stop);
      // the stream ended for good (the host refused the token, and the tab
      // signs out): no other tab of this token would fare better
      await stopped(stop);
    });
  } catch (e) {
    if (stop.aborted) return;
    channel.close();
    throw e;
  }
}
