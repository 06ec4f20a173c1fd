// The botfleet web page: sign-in, then views picked by the URL hash —
// #/bots[/ID[/dm]], #/rooms[/new|/ID], #/approvals, #/search?q=, #/secrets,
// #/sessions/ID — each talking to the /v1 API (api.js) and updating live
// from the change signals. No framework and no build step.

import { Signals, auth, call } from "./api.js";
import { clearDrafts, composer, draftsTyped, outboxView, unsentDrafts } from "./compose.js";
import { avatar, backLink, clock, count, errorBox, h, placeholder, toast } from "./dom.js";
import { leftOutNote, originLabel, originOf, originWords, removable, removeButton } from "./origins.js";
import { outbox } from "./outbox.js";
import { approvalsView, searchView, secretsView, sessionView } from "./pages.js";
import { roomsView } from "./rooms.js";
import {
  botName,
  botWatchers,
  debounce,
  ensureBots,
  loadBots,
  loadBotsUntilStarted,
  refreshApprovals,
  sessionEntries,
  setTitle,
  store,
} from "./state.js";
import { Timeline } from "./timeline.js";

const REFUSED = "The host refused your token (it may have changed). Paste it again.";
const REFUSED_ELSEWHERE = "The host refused your token in another tab (it may have changed). Paste it again.";
const main = document.getElementById("main");
const top = document.getElementById("top");
const conn = document.getElementById("conn");
const signals = new Signals();
/** Signals came while the tab was hidden: it fetches the bots when shown. */
let botsStale = false;
// the whole bot list (half a megabyte for a thousand bots), at most every
// 2.8 s while the fleet is busy: only in a tab that shows it, not in every
// hidden tab of the browser
const botsSoon = debounce(() => {
  if (document.hidden) botsStale = true;
  else loadBots();
}, 700);
const approvalsSoon = debounce(refreshApprovals, 1200);
let view = null;
let live = false;
/** The host's message when it last refused the change stream ("" since live). */
let refusedWith = "";

// ---------- start, sign-in, routing ----------

function boot() {
  // the address stays: signed in again, the person is back where they
  // were (a bookmark or a link opened with a token changed since lands
  // there, not on the bot list)
  auth.onRefused = () => logout(REFUSED, { keepPlace: true, unsent: true, refused: true });
  outbox.onSignedOut = signedOut;
  auth.onStoredChange = (stored, why) => {
    // the host refused the token in another tab: what this tab holds
    // unsent or unconfirmed, and its drafts, are named with their text,
    // and the address stays, as when the refusal comes here (QA,
    // 2026-12-06: it read "You logged out in another tab.", dropped the
    // address and them without a word). A person's "Log out" elsewhere
    // leaves nothing on the screen, as it does in its own tab.
    if (!stored && why === "refused") return logout(REFUSED_ELSEWHERE, { keepPlace: true, unsent: true });
    if (!stored) return logout("You logged out in another tab.");
    // another tab signed in, perhaps as someone else: start over as that
    // account rather than show one account's screens with another's token
    history.replaceState(null, "", `${location.pathname}#/bots`);
    location.reload();
  };
  document.getElementById("logout").addEventListener("click", askLogout);
  document.querySelector(".skip").addEventListener("click", (ev) => {
    ev.preventDefault();
    main.focus();
  });
  signals.onState = (s, message) => {
    // refused: the host holds as many streams as it allows; say why once
    // (its message names the cap and what to do), not at every retry
    if (s === "refused" && refusedWith !== message) toast(message, { error: true });
    if (s === "refused") refusedWith = message;
    else if (s === "live") refusedWith = "";
    conn.className = s === "refused" ? "conn offline refused" : `conn ${s}`;
    conn.textContent = s === "live" ? "live" : s === "offline" ? "reconnecting…" : s === "refused" ? "no live updates" : "connecting…";
    conn.title = s === "live" ? "Receiving live updates" : s === "refused" ? message : "Live updates are paused; retrying";
    // back in touch with the host: a view that failed to load (the host
    // did not answer) loads again rather than keep showing the error
    if (s === "live" && !live && view && view.failed && view.failed()) route();
    live = s === "live";
  };
  signals.subscribe((ev) => {
    // the host answers again: the messages waiting for an answer, in
    // whatever conversation, are asked now
    if (ev.type === "resync") outbox.reachable();
    if (view && view.onSignal) view.onSignal(ev);
    botsSoon();
    approvalsSoon();
  });
  document.addEventListener("visibilitychange", () => {
    if (document.hidden || !botsStale || !auth.token) return;
    botsStale = false;
    loadBots();
  });
  window.addEventListener("hashchange", route);
  if (auth.token) start();
  else showLogin();
}

function start() {
  top.hidden = false;
  signals.start();
  loadBots();
  refreshApprovals();
  // what an earlier load of the page left unconfirmed is sent again
  outbox.resume();
  if (!location.hash.startsWith("#/")) history.replaceState(null, "", "#/bots");
  route();
}

/** Signs out; the address goes too unless `keepPlace`. With `unsent`
 * (the host refused the token), the messages not yet confirmed are named
 * on the sign-in page, with their text, before they are dropped;
 * `refused`: the refusal came to this tab (the other tabs say so). */
function logout(message, { keepPlace = false, unsent = false, refused = false } = {}) {
  const lost = unsent ? [outbox.unsent(), unsentDrafts()].filter(Boolean).join(" ") : "";
  // (a question Log out asked is moot)
  document.querySelector(".logout-confirm")?.remove();
  auth.clear(refused);
  signals.stop();
  // nothing more is sent for this account, nor kept in this browser
  outbox.clear();
  // a load the last signals scheduled has no token to send any more
  botsSoon.cancel();
  botsStale = false;
  approvalsSoon.cancel();
  clearDrafts();
  Object.assign(store, { me: null, bots: [], botsLoaded: false, botsError: "", subagentsLeftOut: 0, allSubagents: false, rooms: [], roomsLoaded: false, pending: 0 });
  if (!keepPlace) history.replaceState(null, "", location.pathname);
  showLogin(lost ? `${message} ${lost}` : message);
}

/**
 * Log out, asking first when it would drop what the person wrote: messages
 * the host has not confirmed (or that were not sent) and text typed and not
 * sent, which this browser forgets at sign-out (QA: they went without a
 * word). Nothing to drop: at once.
 */
function askLogout() {
  const waiting = outbox.count();
  const typed = draftsTyped();
  if (!waiting && !typed) return logout();
  const header = document.getElementById("logout").parentElement;
  let asking = header.querySelector(".logout-confirm");
  if (asking) {
    asking.querySelector("button.danger").focus();
    return;
  }
  const what = [
    waiting ? `${waiting} ${waiting === 1 ? "message the host has not confirmed" : "messages the host has not confirmed"}` : "",
    typed ? `text you typed and did not send in ${typed} ${typed === 1 ? "conversation" : "conversations"}` : "",
  ]
    .filter(Boolean)
    .join(" and ");
  const go = h("button", { type: "button", class: "small danger" }, "Log out anyway");
  const stay = h("button", { type: "button", class: "small" }, "Stay");
  asking = h(
    "div",
    { class: "logout-confirm", role: "group", "aria-label": "Log out?" },
    h("span", null, `Log out? This browser forgets ${what}.`),
    go,
    stay,
  );
  const close = () => {
    asking.remove();
    document.getElementById("logout").focus();
  };
  go.addEventListener("click", () => {
    asking.remove();
    logout();
  });
  stay.addEventListener("click", close);
  asking.addEventListener("keydown", (ev) => {
    if (ev.key !== "Escape") return;
    ev.preventDefault();
    close();
  });
  header.append(asking);
  go.focus();
}

function showLogin(message = "") {
  unmount();
  top.hidden = true;
  setTitle("Sign in");
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "current-password", spellcheck: "false", required: true });
  // why the page signed out (and the text it could not send) stays while
  // the person tries tokens: a failed try replaced it, and the quoted text
  // was gone for good (QA, 2026-12-05)
  const told = message ? h("p", { class: "error-text", role: "alert" }, message) : null;
  const error = h("p", { class: "error-text", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary" }, "Sign in");
  const form = h(
    "form",
    { class: "login panel" },
    h("h1", null, h("span", { class: "brand-mark", "aria-hidden": "true" }), "botfleet"),
    h("p", null, "Paste your API token: the token of your [[users]] entry in fleet.toml. This browser keeps it until you log out."),
    h("input", { type: "text", name: "username", autocomplete: "username", value: "botfleet", hidden: true, "aria-hidden": "true", tabindex: "-1" }),
    h("label", { class: "field", for: "token" }, h("span", null, "Token"), input),
    told,
    error,
    submit,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const token = input.value.trim();
    if (!token) {
      // (an empty field gets the browser's own word; spaces passed it
      // and nothing happened: QA)
      error.textContent = "That is only spaces: paste your token.";
      input.focus();
      return;
    }
    // fetch() refuses such a header before it reaches the host
    if (!/^[\x20-\x7e]+$/.test(token)) {
      error.textContent = "That is not a token: a token is ASCII text (letters, digits, punctuation).";
      input.focus();
      return;
    }
    submit.disabled = true;
    error.textContent = "";
    try {
      await call("bots", {}, { token });
      auth.save(token);
      start();
    } catch (e) {
      error.textContent = e.status === 401 ? "This host does not know that token. Check the [[users]] tokens in fleet.toml." : e.message;
      submit.disabled = false;
      input.focus();
    }
  });
  main.replaceChildren(form);
  input.focus();
}

function unmount() {
  if (view && view.unmount) view.unmount();
  view = null;
}

function route() {
  if (!auth.token) return showLogin();
  if (!location.hash.startsWith("#/")) return;
  const raw = location.hash.slice(2);
  const cut = raw.indexOf("?");
  let parts;
  try {
    parts = (cut < 0 ? raw : raw.slice(0, cut)).split("/").filter(Boolean).map(decodeURIComponent);
  } catch {
    parts = ["not-found"]; // a malformed %-escape: no page has that address
  }
  const query = new URLSearchParams(cut < 0 ? "" : raw.slice(cut + 1));
  const [section = "bots", id, part] = parts;
  const seq = Number(query.get("seq")) || undefined;
  unmount();
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === section) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const views = {
    bots: () => botsView(id, seq, part),
    rooms: () => roomsView(id, seq),
    approvals: () => approvalsView(query),
    search: () => searchView(query),
    secrets: () => secretsView(),
    sessions: () => sessionView(id, seq),
  };
  // an own property only: "#/constructor", "#/__proto__" and the like
  // name no page, not what every object inherits
  view = (Object.hasOwn(views, section) ? views[section] : notFound)();
}

function notFound() {
  setTitle("Not found");
  const title = h("h1", { tabindex: "-1" }, "No such page");
  main.replaceChildren(h("div", { class: "page" }, title, h("p", null, h("a", { href: "#/bots" }, "Go to your bots"))));
  title.focus();
  return {};
}

/** Says on the sign-in page why a message was not sent (the host refused
 * this tab's token, and the tab signed out). */
function signedOut(why) {
  const shownAlert = main.querySelector(".login [role=alert]");
  if (shownAlert) shownAlert.textContent = why;
  else showLogin(why);
}

function botState(b) {
  // no longer in fleet.toml, or removed by its owner (a bot made by
  // CreateAgent; a subagent goes with its parent): it takes no messages
  if (b.removed_at) return ["asleep", originOf(b).kind === "config" ? "removed from fleet.toml" : "removed"];
  if (b.running_turn) return ["working", "working"];
  // a subagent whose task ended says how, as `botfleet bots` does (it
  // read idle or asleep, a stopped one too, which takes no more work)
  const ended = taskEnded(b.subagent_status);
  if (ended) return [ended, ended];
  // its daily token budget is spent: what waits, waits until then
  if (b.paused_until > Date.now()) return ["paused", `paused until ${clock(b.paused_until)}`];
  if (b.queued) return ["queued", `${b.queued} queued`];
  if (b.active) return ["idle", "idle"];
  return ["asleep", "asleep"];
}

/** A subagent's task status when its task ended (done, failed,
 * stopped), else "". */
function taskEnded(status) {
  return status === "done" || status === "failed" || status === "stopped" ? status : "";
}

/** Tokens of a usage record (usage.today or usage.total of a bot):
 * prompt plus completion, what the daily budget counts. */
function tokens(u) {
  return u ? (u.prompt_tokens || 0) + (u.completion_tokens || 0) : 0;
}

function usageText(b) {
  const u = b.usage || {};
  const today = count(tokens(u.today));
  return u.daily_token_budget ? `${today} / ${count(u.daily_token_budget)} tokens today` : `${today} tokens today`;
}

// ---------- bots and their DMs ----------

function botsView(id, seq, part) {
  setTitle(id ? botName(id) : "Bots");
  const ctx = { closed: false, timeline: null, failed: false };
  const list = h("ul", { class: "list", "aria-label": "Your bots" });
  // the finished subagents the list leaves out, and how to list them
  const note = h("div", { class: "list-notes" });
  const heading = h("h1", { tabindex: "-1" }, "Bots");
  const aside = h("aside", { "aria-label": "Bots" }, h("div", { class: "aside-head" }, heading), list, note);
  const detail = h("section", { class: "detail", "aria-label": id ? "Conversation" : "Fleet" });
  main.replaceChildren(h("div", { class: `split${id ? " has-detail" : ""}` }, aside, detail));
  const paint = () => {
    paintBotList(list, id);
    note.replaceChildren(...(store.botsLoaded ? [leftOutNote()].filter(Boolean) : []));
    if (!id) paintFleet(detail);
  };
  paint();
  botWatchers.add(paint);
  loadBots();
  if (id) openBot(ctx, detail, id, seq, part === "dm");
  else heading.focus();
  return {
    unmount() {
      ctx.closed = true;
      botWatchers.delete(paint);
      if (ctx.timeline) ctx.timeline.close();
    },
    onSignal(ev) {
      if (ctx.timeline) ctx.timeline.onSignal(ev);
    },
    failed: () => ctx.failed,
  };
}

function paintBotList(list, current) {
  // a first load that failed says why, and is tried again on a click or
  // when the host sends a change
  if (!store.botsLoaded && store.botsError) {
    return list.replaceChildren(
      h(
        "li",
        { class: "list-empty", role: "alert" },
        h("span", { class: "error-text" }, `Your bots could not be loaded: ${store.botsError}`),
        " ",
        h("button", { type: "button", class: "button small", onclick: () => loadBots() }, "Try again"),
      ),
    );
  }
  if (!store.botsLoaded) return list.replaceChildren(h("li", { class: "list-empty" }, "Loading…"));
  if (!store.bots.length) return list.replaceChildren(h("li", { class: "list-empty" }, "You have no bots yet. Bots are defined in fleet.toml ([[bots]] with owner = your user id)."));
  list.replaceChildren(
    ...store.bots.map((b) => {
      const [cls, label] = botState(b);
      // where it came from: a made bot or a subagent says by whom
      const origin = originLabel(b);
      // a bot made by CreateAgent may be removed here; one of fleet.toml
      // is removed there, a subagent with its parent
      const remove = removable(b) ? removeButton(b) : null;
      return h(
        "li",
        { class: remove ? "removable" : null, dataset: { bot: b.id } },
        h(
          "a",
          { href: `#/bots/${encodeURIComponent(b.id)}`, "aria-current": b.id === current ? "page" : null },
          avatar(b.name),
          // the badge moves under the name when both do not fit on a line
          h("span", { class: "head" }, h("span", { class: "name", title: b.name }, b.name), h("span", { class: `state ${cls}` }, label)),
          origin ? h("span", { class: "from" }, origin) : null,
          h("span", { class: "sub" }, `${b.id} · ${usageText(b)}${b.queued && cls === "paused" ? ` · ${b.queued} waiting` : ""}`),
        ),
        remove,
      );
    }),
  );
}

/** The overview beside the list on wide screens. */
function paintFleet(detail) {
  if (!store.botsLoaded || !store.bots.length) {
    detail.replaceChildren(placeholder(h("p", null, "Choose a bot to talk to it. Replies, notices and approval requests appear as they happen.")));
    return;
  }
  const rows = store.bots.map((b) => {
    const [cls, label] = botState(b);
    const turns = b.turns || {};
    const u = b.usage || {};
    return h(
      "tr",
      null,
      h("td", null, h("a", { href: `#/bots/${encodeURIComponent(b.id)}` }, b.name)),
      h("td", null, originWords(b) || String(b.origin ?? "")),
      h("td", { class: "tight" }, h("span", { class: `state ${cls}` }, label)),
      h("td", { class: "tight" }, String(b.queued || 0)),
      h("td", { class: "tight" }, `${turns.completed || 0} done${turns.failed ? ` · ${turns.failed} failed` : ""}`),
      h("td", { class: "tight" }, usageText(b)),
      h("td", { class: "tight" }, `${count(tokens(u.total))} total`),
    );
  });
  detail.replaceChildren(
    h(
      "div",
      { class: "page" },
      h("h2", null, "Fleet"),
      h("p", { class: "hint" }, "Choose a bot to open your conversation with it."),
      h(
        "div",
        { class: "scroll" },
        h(
          "table",
          null,
          h("thead", null, h("tr", null, ["Bot", "From", "State", "Queued", "Turns", "Today", "Usage"].map((t) => h("th", { scope: "col" }, t)))),
          h("tbody", null, rows),
        ),
      ),
    ),
  );
}

/**
 * Opens bot `id`: the person's DM with it, or, for a subagent (unless
 * `dm`), its task conversation with its parent, read-only (the task, the
 * parent's later messages, its progress and its report: its work, which
 * its DM with the person, empty unless they wrote to it, did not show).
 */
async function openBot(ctx, detail, id, seq, dm) {
  detail.replaceChildren(placeholder("Loading…"));
  let session;
  try {
    await ensureBots();
    ({ data: session } = await call("botSession", { bot: id }));
  } catch (e) {
    if (!ctx.closed) detail.replaceChildren(errorBox(e));
    ctx.failed = true;
    return;
  }
  if (ctx.closed) return;
  const name = botName(id);
  // a subagent: its task, unless its DM is asked for (#/bots/ID/dm)
  const task = session.task && typeof session.task.session === "string" ? session.task : null;
  const onTask = task && !dm;
  setTitle(onTask ? `${name} · task` : name);
  const title = h("h1", { tabindex: "-1" });
  const role = h("p");
  const stop = h("button", { type: "button", class: "small danger", hidden: true }, "Stop turn");
  const paintHead = () => {
    const b = store.bots.find((x) => x.id === id);
    // a finished subagent the list leaves out: its task's status
    const ended = task ? taskEnded(task.status) : "";
    const [cls, label] = b ? botState(b) : ended ? [ended, ended] : ["asleep", ""];
    // names and roles are isolated: their bidi controls stay inside them
    title.replaceChildren(h("bdi", null, name), h("span", { class: `state ${cls}` }, label));
    // a made bot or a subagent says where it came from
    const from = b ? originLabel(b) : task ? originLabel({ origin: `subagent:${task.parent}`, subagent_status: task.status }) : null;
    role.replaceChildren(b ? `${b.id} · ${usageText(b)}` : id, ...(from ? [" · ", from] : []), ...(b && b.role ? [" · ", h("bdi", { class: "role" }, b.role)] : []));
    role.title = b ? b.role : "";
    const focused = document.activeElement === stop || asking.contains(document.activeElement);
    if (!onTask) showRemoved(b);
    stop.hidden = !(b && b.running_turn);
    // the turn ended meanwhile: nothing is left to stop (and the focus on
    // Stop turn or its question goes to the title, not the page's body)
    if (stop.hidden) {
      asking.hidden = true;
      stop.disabled = false;
      if (focused) title.focus();
    }
    timeline.setPaused(b && b.paused_until);
  };
  // stopping is for good (the turn does not answer; its running tools
  // are killed): one more click, saying so, before it happens
  const stopIt = h("button", { type: "button", class: "small danger" }, "Stop it");
  const keep = h("button", { type: "button", class: "small" }, "Keep working");
  const asking = h(
    "div",
    { class: "stop-confirm", role: "group", "aria-label": "Stop the turn?", hidden: true },
    h(
      "span",
      null,
      task
        ? `Stop ${name}'s turn now? Its running tools are killed and it stops without answering; a task stopped so fails (its parent is told), and Retry on its notice, in the task, starts it again.`
        : `Stop ${name}'s turn now? Its running tools are killed and it stops where it is. If it had not replied yet, Retry on its notice starts it again; if it had, what it sent stays and there is no Retry.`,
    ),
    stopIt,
    keep,
  );
  const ask = (on) => {
    asking.hidden = !on;
    stop.disabled = on;
    (on ? stopIt : stop).focus();
  };
  stop.addEventListener("click", () => ask(true));
  keep.addEventListener("click", () => ask(false));
  // Escape is "Keep working", as for any question the page asks
  asking.addEventListener("keydown", (ev) => {
    if (ev.key !== "Escape" || stopIt.disabled) return;
    ev.preventDefault();
    ask(false);
  });
  stopIt.addEventListener("click", async () => {
    stopIt.disabled = true;
    try {
      const { data } = await call("botCancel", { bot: id });
      toast(data.cancelled ? `Stopped ${name}'s turn.` : `${name} was not working on anything.`);
      loadBots();
    } catch (e) {
      toast(e.message, { error: true });
    } finally {
      stopIt.disabled = false;
      asking.hidden = true;
      stop.disabled = false;
      // the question is gone: the focus goes back to Stop turn, or to the
      // title once there is no turn to stop, not to the page's body
      if (ctx.closed) return;
      (stop.hidden ? title : stop).focus();
    }
  });
  const parent = task ? botName(task.parent) : "";
  const timeline = onTask
    ? new Timeline({
        label: `${name}'s task from ${parent}`,
        session: task.session,
        me: store.me,
        nameOf: botName,
        // no entry yet: its task is still being handed over
        load: (after, limit) => sessionEntries(task.session, after, limit, true),
        empty: `${name} has not started on its task yet.`,
      })
    : new Timeline({
        label: `Conversation with ${name}`,
        session: session.session,
        me: store.me,
        nameOf: botName,
        load: (after, limit) => sessionEntries(session.session, after, limit, true),
        send: (text) => outgoing.send(text),
        draft: (text) => box.draft(text),
        edit: (text) => box.edit(text),
        working: `${name} is working on it`,
        // a removed bot is not offered a hello it would refuse
        empty: store.bots.some((x) => x.id === id && x.removed_at) ? `No messages with ${name}.` : `No messages yet. Say hello to ${name}.`,
      });
  ctx.timeline = timeline;
  const base = `#/bots/${encodeURIComponent(id)}`;
  // a subagent's two conversations: its task, and the person's DM with it
  const tabs = task
    ? h(
        "nav",
        { class: "conv-tabs", "aria-label": `${name}'s conversations` },
        h("a", { href: base, "aria-current": onTask ? "page" : null }, "Task"),
        h("a", { href: `${base}/dm`, "aria-current": onTask ? null : "page" }, "Direct messages"),
      )
    : null;
  const box = onTask ? null : composer({ label: `Message to ${name}`, placeholder: `Message ${name}`, onSend: (text) => outgoing.send(text), draftKey: `dm:${id}` });
  // a removed bot takes no messages (the host refuses them, 409): a line
  // says so where the box was, as a closed room's does, and comes back
  // with the box if a config lists the bot again
  const removedLine = h("div", { class: "room-closed", role: "status" });
  function showRemoved(b) {
    if (!box) return;
    const gone = Boolean(b && b.removed_at);
    if (gone) removedLine.replaceChildren(h("p", null, h("strong", null, removedWords(b, name)), " This conversation stays readable and searchable."));
    const [shown, other] = gone ? [removedLine, box.el] : [box.el, removedLine];
    if (other.isConnected) other.replaceWith(shown);
  }
  // the task view takes no message: the parent steers its subagent
  const readOnly = onTask
    ? h(
        "p",
        { class: "read-only", role: "note" },
        h("strong", null, "Read-only. "),
        "What ",
        h("bdi", null, parent),
        " asked of ",
        h("bdi", null, name),
        ", its progress and its report. ",
        h("bdi", null, parent),
        " steers it; to write to it yourself, open ",
        h("a", { href: `${base}/dm` }, "Direct messages"),
        ". ",
      )
    : null;
  const head = h(
    "header",
    { class: "conv-head" },
    backLink("#/bots", "Bots"),
    h("div", { class: "conv-title" }, avatar(name), h("div", null, title, role)),
    tabs,
    stop,
    timeline.stepsToggle,
    asking,
  );
  paintHead();
  botWatchers.add(paintHead);
  const closeTimeline = timeline.close.bind(timeline);
  let outgoing = null;
  timeline.close = () => {
    botWatchers.delete(paintHead);
    // the messages being sent go on without the view
    if (outgoing) outgoing.close();
    closeTimeline();
  };
  detail.replaceChildren(head, timeline.el, onTask ? readOnly : box.el);
  showRemoved(store.bots.find((x) => x.id === id));
  // open() learns the newest seq first: an entry past it may be a message
  // the outbox holds
  const opening = timeline.open(onTask ? task.last_seq : session.last_seq, seq);
  if (!onTask) {
    outgoing = outboxView(timeline, { kind: "bot", id }, {
      // the answer says whether the bot is paused (no signal says so)
      onAccepted: (data) => {
        const b = store.bots.find((x) => x.id === id);
        if (b) b.paused_until = data.paused_until ?? null;
        paintHead();
      },
    });
  }
  try {
    await opening;
  } catch {
    // reported by the timeline
  }
  if (!ctx.closed && !seq) (box && box.el.isConnected ? box : title).focus();
}

/** Why bot `b` (removed: `removed_at`), called `name`, takes no messages. */
function removedWords(b, name) {
  const { kind, by } = originOf(b);
  if (kind === "agent") return `${name} was removed by its owner and takes no more messages.`;
  if (kind === "subagent") return `${name} takes no more messages: its parent ${botName(by)} was removed.`;
  return `${name} is no longer in the fleet's config (fleet.toml) and takes no messages until it is listed there again and the host restarts.`;
}

boot();
