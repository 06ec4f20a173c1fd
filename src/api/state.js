// What the views share: the user's bots and rooms, the approvals badge,
// the page title, and reading a session's entries. Views that show a
// list subscribe to botWatchers / roomWatchers.

import { auth, call } from "./api.js";
import { toast } from "./dom.js";

const badge = document.getElementById("approval-count");

/** The signed-in user's data. */
export const store = {
  me: null,
  bots: [],
  botsLoaded: false,
  // why the first load of the bots failed ("" once loaded): the list
  // says so, with a way to try again, rather than "Loading…" for good
  botsError: "",
  // finished subagents the list leaves out (`subagents_left_out`), and
  // whether the person asked for them all (`?subagents=all`)
  subagentsLeftOut: 0,
  allSubagents: false,
  rooms: [],
  roomsLoaded: false,
  pending: 0,
};
/** Called after the bots list changed. */
export const botWatchers = new Set();
/** Called after the rooms list changed. */
export const roomWatchers = new Set();

let botsLoading = null;
/** Asked for while a fetch was out: its answer may predate what changed. */
let botsAgain = false;
/**
 * Fetches the bots (one request at a time) and tells the watchers. Asked
 * for while a fetch is out, it fetches once more after it: the answer out
 * may have been read before the change the caller was told of.
 */
export function loadBots() {
  if (!auth.token) return Promise.resolve();
  if (botsLoading) {
    botsAgain = true;
    return botsLoading;
  }
  botsAgain = false;
  const all = store.allSubagents;
  botsLoading = call("bots", {}, all ? { query: { subagents: "all" } } : {})
    .then(({ data }) => {
      // asked for the other list meanwhile: this answer is not it
      if (store.allSubagents !== all) return;
      store.bots = data.bots || [];
      store.subagentsLeftOut = data.subagents_left_out || 0;
      store.botsLoaded = true;
      store.botsError = "";
      // who signed in, also without bots of their own (the first bot's
      // owner left a user with none as nobody: their own messages read
      // as another person's, QA 2026-12-07)
      store.me = data.user || (store.bots.length ? store.bots[0].owner : store.me);
      for (const fn of botWatchers) fn();
    })
    .catch((e) => {
      if (e.code === "signed_out") return;
      // never loaded: the list shows why (QA: it said "Loading…" for
      // good after a refused first load, the toast gone)
      if (!store.botsLoaded) {
        store.botsError = e.message;
        for (const fn of botWatchers) fn();
      } else toast(e.message, { error: true });
    })
    .finally(() => {
      botsLoading = null;
    })
    .then(() => (botsAgain || store.allSubagents !== all ? loadBots() : undefined));
  return botsLoading;
}

/**
 * Loads the bots, and again shortly while one has inputs queued but no
 * turn running yet, or its actor is starting (`live` false: what it does
 * is not known yet), or `waiting()` says a turn is still to start: a
 * turn's start sends no change signal (after a retry or a first message,
 * the header would say queued, idle or asleep until the turn's first
 * step, which may be a slow model call away).
 */
export async function loadBotsUntilStarted(tries = 10, waiting = () => false) {
  for (let i = 0; i < tries; i++) {
    await loadBots();
    if (!store.bots.some((b) => b.live === false || (b.queued && !b.running_turn)) && !waiting()) return;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** Loads the bots once. */
export async function ensureBots() {
  if (!store.botsLoaded) await loadBots();
}

/** Fetches the rooms and tells the watchers. */
export function loadRooms() {
  if (!auth.token) return Promise.resolve();
  return call("groups")
    .then(({ data }) => {
      store.rooms = data.groups || [];
      store.roomsLoaded = true;
      for (const fn of roomWatchers) fn();
    })
    .catch((e) => {
      if (e.code !== "signed_out") toast(e.message, { error: true });
    });
}

let expiryTimer = 0;

/**
 * Counts the pending approvals for the badge, and counts again when the
 * first of them expires (an expiry sends no change signal).
 */
export async function refreshApprovals() {
  if (!auth.token) {
    clearTimeout(expiryTimer);
    return;
  }
  try {
    const { data } = await call("approvals", {}, { query: { status: "pending", limit: 500 } });
    if (!auth.token) return;
    const pending = data.approvals || [];
    // the badge counts what waits for a decision: not one that cannot be
    // decided (QA: "(1) Approvals" for one asked of a former owner)
    store.pending = pending.filter((a) => a.decidable !== false).length;
    clearTimeout(expiryTimer);
    const next = Math.min(...pending.map((a) => Number(a.expires_at) || Infinity));
    if (Number.isFinite(next)) {
      expiryTimer = setTimeout(refreshApprovals, Math.max(1000, next - Date.now() + 1000));
    }
    badge.hidden = store.pending === 0;
    badge.textContent = String(store.pending);
    badge.setAttribute("aria-label", `${store.pending} waiting`);
    setTitle();
  } catch {
    // the badge is a hint; the approvals view reports errors
  }
}

/**
 * Runs `fn` once calls stop for `ms`, and at least every `maxMs` while
 * they keep coming (a busy fleet signals all the time). `.cancel()`
 * drops a run that is due.
 */
export function debounce(fn, ms, maxMs = ms * 4) {
  let t = 0;
  let first = 0;
  const cancel = () => {
    clearTimeout(t);
    t = 0;
    first = 0;
  };
  const run = () => {
    cancel();
    fn();
  };
  const soon = () => {
    const now = Date.now();
    if (!first) first = now;
    clearTimeout(t);
    t = setTimeout(run, Math.max(0, Math.min(ms, first + maxMs - now)));
  };
  soon.cancel = cancel;
  return soon;
}

/** A bot's display name (its id when unknown); a room's coordinator,
 * the author `room:<id>` of a member's inputs, as "Room <name>". */
export function botName(id) {
  const b = store.bots.find((x) => x.id === id);
  if (b) return b.name;
  const room = typeof id === "string" && id.startsWith("room:") ? id.slice(5) : null;
  if (room !== null) {
    const r = store.rooms.find((x) => x.id === room);
    return `Room ${r ? r.name : room}`;
  }
  return id;
}

/** The tab title: "(pending) section · botfleet". */
export function setTitle(section) {
  if (section) setTitle.section = section;
  const prefix = store.pending ? `(${store.pending}) ` : "";
  document.title = `${prefix}${setTitle.section ? `${setTitle.section} · ` : ""}botfleet`;
}

/** Entries of a session; a DM that has no message yet has no session. */
export async function sessionEntries(session, after, limit, missingIsEmpty) {
  try {
    const { data } = await call("entries", { session }, { query: { after, limit } });
    return data;
  } catch (e) {
    if (missingIsEmpty && e.status === 404) return { entries: [], last_seq: 0 };
    throw e;
  }
}
