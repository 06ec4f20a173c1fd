// The pages beside the conversations: any other session (read-only),
// approvals, transcript search and secrets.

import { call } from "./api.js";
import { avatar, backLink, errorBox, h, markSnippet, placeholder, relative, speaker, timeEl } from "./dom.js";
import { botName, botWatchers, debounce, ensureBots, loadBots, refreshApprovals, sessionEntries, setTitle, store } from "./state.js";
import { escapeHidden, fillApproval, tickExpiries } from "./cards.js";
import { Timeline } from "./timeline.js";

const main = document.getElementById("main");

// ---------- any other session (routine, webhook, bot-to-bot, subagent) ----------

export function sessionView(id, seq) {
  setTitle("Session");
  const ctx = { closed: false, timeline: null, failed: false };
  const detail = h("section", { class: "detail", "aria-label": "Session" }, placeholder("Loading…"));
  main.replaceChildren(h("div", { class: "split has-detail" }, h("aside", { hidden: true }), detail));
  (async () => {
    let first;
    try {
      await ensureBots();
      first = await sessionEntries(id, 0, 1, false);
    } catch (e) {
      if (!ctx.closed) detail.replaceChildren(errorBox(e));
      ctx.failed = true;
      return;
    }
    if (ctx.closed) return;
    const at = seq ? `?seq=${seq}` : "";
    const mine = botLink(first.bot, first.kind);
    if (mine) return location.replace(`${mine}${at}`);
    if (first.kind === "room") return location.replace(`#/rooms/${encodeURIComponent(first.bot)}${at}`);
    const label = `${first.kind} session of ${botName(first.bot)}`;
    setTitle(label);
    const timeline = new Timeline({
      label,
      session: id,
      me: store.me,
      nameOf: botName,
      load: (after, limit) => sessionEntries(id, after, limit, false),
      empty: "This session is empty.",
    });
    ctx.timeline = timeline;
    const title = h("h1", { tabindex: "-1" }, label);
    detail.replaceChildren(
      h("header", { class: "conv-head" }, backLink("#/search", "Search"), h("div", { class: "conv-title" }, avatar(botName(first.bot)), h("div", null, title, h("p", null, "Read-only"))), timeline.stepsToggle),
      timeline.el,
    );
    title.focus();
    await timeline.open(first.last_seq, seq).catch(() => {});
  })();
  return {
    unmount() {
      ctx.closed = true;
      if (ctx.timeline) ctx.timeline.close();
    },
    onSignal(ev) {
      if (ctx.timeline) ctx.timeline.onSignal(ev);
    },
    // app.js opens it again when the connection comes back
    failed: () => ctx.failed,
  };
}

// ---------- approvals ----------

export function approvalsView(query) {
  setTitle("Approvals");
  const ctx = { closed: false };
  const which = query.get("show") === "all" ? "all" : "pending";
  const title = h("h1", { tabindex: "-1" }, "Approvals");
  const filter = h(
    "select",
    { id: "approval-filter", "aria-label": "Show" },
    h("option", { value: "pending", selected: which === "pending" }, "Waiting for you"),
    h("option", { value: "all", selected: which === "all" }, "All recent"),
  );
  filter.addEventListener("change", () => {
    location.hash = filter.value === "all" ? "#/approvals?show=all" : "#/approvals";
  });
  const list = h("div", { class: "stack approvals", "aria-live": "polite" }, h("p", { class: "hint" }, "Loading…"));
  // a page of PAGE, and PAGE more on each "Show more", up to the API's
  // MAX: the page said nothing of the 101st approval waiting (QA: the
  // badge said 105, the page drew 100)
  const PAGE = 100;
  const MAX = 500;
  let limit = PAGE;
  const moreNote = h("span", { class: "hint" });
  const moreButton = h("button", { type: "button", class: "small" }, "Show more");
  const more = h("p", { class: "more-approvals", hidden: true }, moreNote, " ", moreButton);
  // the count drawn before a "Show more": the load after it gives the
  // focus to the first card it added (the button, hidden on the last
  // page, dropped it to the page's body, QA)
  let grown = null;
  moreButton.addEventListener("click", () => {
    if (moreButton.getAttribute("aria-disabled") === "true") return;
    limit = Math.min(MAX, limit + PAGE);
    moreButton.setAttribute("aria-disabled", "true");
    grown = drawn.size;
    load();
  });
  // how many the list shows, and whether more are there to show (`full`:
  // the host had one more than the page draws, or as many as it lists)
  const tell = (shown, full) => {
    more.hidden = !full;
    if (!full) return;
    moreButton.removeAttribute("aria-disabled");
    moreButton.hidden = limit >= MAX;
    const waiting = which === "pending" && store.pending > shown ? ` of ${store.pending} waiting` : "";
    moreNote.textContent =
      limit >= MAX
        ? which === "pending"
          ? `Showing the first ${shown}${waiting}: decide some to see the rest.`
          : `Showing the ${shown} newest.`
        : `Showing ${shown}${waiting}.`;
  };
  main.replaceChildren(
    h(
      "div",
      { class: "page" },
      h("div", { class: "page-head" }, title, filter),
      h("p", { class: "hint" }, "When a bot's review asks before an action, the action waits here and in the conversation until you decide. A decision applies to that exact action, once."),
      list,
      more,
    ),
  );
  title.focus();
  // approval id → {article, shown: what it was drawn from}: a load redraws
  // only the approvals that changed, so a signal of any bot neither folds
  // an opened "Exact action" nor takes the focus from a button
  const drawn = new Map();
  const article = (a) => {
    const box = h("div");
    fillApproval(box, a, { details: true, onDecided: () => refreshApprovals() });
    return h(
      "article",
      { class: "panel", "aria-label": `${botName(a.bot)}: ${a.tool}` },
      h("div", { class: "meta" }, h("span", { class: "who" }, botName(a.bot)), timeEl(a.created_at), h("a", { href: `#/sessions/${encodeURIComponent(a.session)}` }, "Open conversation")),
      box,
    );
  };
  const load = async () => {
    try {
      await ensureBots();
      const asked = Math.min(MAX, limit + 1);
      const { data } = await call("approvals", {}, { query: { status: which === "pending" ? "pending" : undefined, limit: asked } });
      if (ctx.closed) return;
      const all = data.approvals || [];
      const items = all.slice(0, limit);
      tell(items.length, all.length >= asked);
      // the approval whose article holds the focus (its status, once
      // decided), and where it stood: a redraw that replaces or drops that
      // article gives the focus to its new drawing, or to what took its
      // place, not to the page's body
      const order = [...drawn.keys()];
      const held = order.findIndex((id) => drawn.get(id).el.contains(document.activeElement));
      const heldId = held < 0 ? null : order[held];
      if (!items.length) {
        drawn.clear();
        list.replaceChildren(placeholder(which === "pending" ? "Nothing is waiting for you." : "No approvals yet."));
        if (heldId !== null) title.focus();
        return;
      }
      const want = items.map((a) => {
        const shown = JSON.stringify([a, botName(a.bot)]);
        const old = drawn.get(a.id);
        if (old && old.shown === shown) return [a.id, old];
        return [a.id, { el: article(a), shown }];
      });
      const keep = new Set(want.map(([, d]) => d.el));
      for (const el of [...list.children]) if (!keep.has(el)) el.remove();
      drawn.clear();
      // in order, moving only what is out of place
      want.forEach(([id, d], i) => {
        drawn.set(id, d);
        if (list.children[i] !== d.el) list.insertBefore(d.el, list.children[i] || null);
      });
      if (grown !== null) {
        const first = list.children[grown];
        grown = null;
        if (first) (first.querySelector(".status") || first.querySelector("a") || title).focus();
        else if (moreButton.hidden || more.hidden) title.focus();
      }
      if (heldId !== null && !list.contains(document.activeElement)) {
        const again = drawn.get(heldId);
        const next = again ? again.el : list.children[Math.min(held, list.children.length - 1)];
        // the status line, never a button: on the next card's Approve, a
        // second Enter approved an action the person had not read (QA)
        (next.querySelector(".status") || title).focus();
      }
    } catch (e) {
      moreButton.removeAttribute("aria-disabled");
      if (!ctx.closed && e.code !== "signed_out") list.replaceChildren(errorBox(e));
    }
  };
  load();
  const soon = debounce(load, 1200);
  const ticker = setInterval(() => tickExpiries(list), 15000);
  return {
    unmount() {
      ctx.closed = true;
      clearInterval(ticker);
    },
    onSignal: soon,
  };
}

// ---------- search ----------

const KIND_LABELS = {
  user_message: "message",
  agent_message: "bot message",
  delivery: "reply",
  assistant: "note",
  tool_result: "tool result",
};

/** A hit's kind as its tag reads; an approval's with the status of its
 * card at that entry (a decided approval is found twice, asked and
 * decided, with the same text). */
const hitKind = (hit) => {
  const kind = (Object.hasOwn(KIND_LABELS, hit.kind) ? KIND_LABELS[hit.kind] : "") || String(hit.kind).replace("_", " ");
  return typeof hit.approval_status === "string" ? `${kind} · ${hit.approval_status}` : kind;
};

/** Entry kinds the conversation shows as written (messages of people
 * and bots); every other kind (a bot's internal steps, events, notices,
 * approvals) it shows with control and format characters escaped, and a
 * search hit of it is shown the same way: raw, a U+202E made a command on
 * the search page read as another. */
const WRITTEN_KINDS = new Set(["user_message", "delivery", "agent_message"]);

/** How the text of a hit of `kind` is shown ({@link WRITTEN_KINDS}). */
const snippetText = (kind) => (WRITTEN_KINDS.has(kind) ? (text) => text : (text) => escapeHidden(text));

/** Entry kinds a bot writes (its replies and messages, its notes and
 * tool results); a person writes a user_message. */
const BOT_KINDS = new Set(["delivery", "agent_message", "assistant", "tool_result"]);

/** A hit's author as the timeline names a speaker: with a "bot" or
 * "person" tag, by the entry's kind (a person may share a bot's id). A
 * room's input to a member reads as the room's ("Room zoo"). */
function hitAuthor(hit) {
  const bot = BOT_KINDS.has(hit.kind);
  const person = hit.kind === "user_message" && !String(hit.author).startsWith("room:");
  if (!bot && !person) return h("span", { class: "who" }, hit.author === store.me ? "You" : botName(hit.author));
  const { who, tags } = speaker(bot, hit.author, store.me, (id) => hit.author_name || botName(id));
  return [h("span", { class: "who" }, who), tags];
}

/**
 * Where the bot view shows session `kind` of bot `id`, or null when it
 * does not (another kind; a bot not in the person's list: an old DM with
 * a bot they gave away opens read-only as a session, its bot's
 * conversation would answer 404): a DM in the bot's conversation (a
 * subagent's at `…/dm`), a subagent's task (`subagent` session) where
 * its page opens.
 */
function botLink(id, kind) {
  const b = store.bots.find((x) => x.id === id);
  if (!b) return null;
  const sub = typeof b.origin === "string" && b.origin.startsWith("subagent:");
  const at = `#/bots/${encodeURIComponent(id)}`;
  if (kind === "dm") return sub ? `${at}/dm` : at;
  return kind === "subagent" && sub ? at : null;
}

function hitLink(hit) {
  const at = `?seq=${hit.seq}`;
  const mine = botLink(hit.bot, hit.session_kind);
  if (mine) return `${mine}${at}`;
  if (hit.session_kind === "room") return `#/rooms/${encodeURIComponent(hit.bot)}${at}`;
  return `#/sessions/${encodeURIComponent(hit.session)}${at}`;
}

export function searchView(query) {
  setTitle("Search");
  const ctx = { closed: false };
  const q = query.get("q") || "";
  const bot = query.get("bot") || "";
  const title = h("h1", { tabindex: "-1" }, "Search");
  const input = h("input", { type: "search", id: "search-q", name: "q", value: q, placeholder: "Words from any conversation", required: true });
  const select = h("select", { id: "search-bot", "aria-label": "Bot" }, h("option", { value: "" }, "All bots"));
  const paintBots = () => {
    select.replaceChildren(h("option", { value: "" }, "All bots"), ...store.bots.map((b) => h("option", { value: b.id, selected: b.id === bot }, b.name)));
    nameChosen();
  };
  // the select is bounded (ui.css): the whole name of the chosen bot
  const nameChosen = () => {
    select.title = select.selectedOptions[0]?.textContent || "";
  };
  select.addEventListener("change", nameChosen);
  paintBots();
  botWatchers.add(paintBots);
  const results = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { class: "searchbar", role: "search" },
    h("label", { for: "search-q", class: "sr-only" }, "Search transcripts"),
    input,
    select,
    h("button", { type: "submit", class: "primary" }, "Search"),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const params = new URLSearchParams({ q: input.value.trim() });
    if (select.value) params.set("bot", select.value);
    const hash = `#/search?${params}`;
    // the same search again changes no hash (no hashchange): run it here
    if (new URL(hash, location.href).hash === location.hash) run();
    else location.hash = hash;
  });
  main.replaceChildren(h("div", { class: "page" }, title, form, results));
  loadBots();
  let asked = 0;
  const hitItem = (hit) =>
    h(
      "li",
      { class: "hit panel" },
      h(
        "a",
        { href: hitLink(hit) },
        h("div", { class: "meta" }, hitAuthor(hit), h("span", null, hit.where || hit.session_kind || ""), h("span", { class: "tag" }, hitKind(hit)), timeEl(hit.time_ms)),
        h("p", { class: "snippet" }, markSnippet(hit.snippet_parts ?? hit.snippet, { shown: snippetText(hit.kind) })),
      ),
    );
  const summary = (total, shown) => (total === 1 ? "1 match" : `${total} matches${total > shown ? `, best ${shown} shown` : ""}`);
  const run = () => {
    const mine = ++asked;
    results.replaceChildren(h("p", { class: "hint" }, "Searching…"));
    // the links need the bot list (hitLink)
    Promise.all([call("search", {}, { query: { q, bot, limit: 50 } }), ensureBots()])
      .then(([{ data }]) => {
        if (ctx.closed || mine !== asked) return;
        let shown = (data.hits || []).length;
        const hint = h("p", { class: "hint" }, summary(data.total, shown));
        const list = h("ol", { class: "hits" }, (data.hits || []).map(hitItem));
        // the next page (offset = next_offset) is appended below: the order
        // is stable, so no hit shows twice
        const more = h("button", { type: "button", class: "more" }, "More results");
        let next = data.next_offset;
        more.hidden = next == null;
        // marked, not disabled, while it loads (a disabled button drops
        // the focus to the page's body, QA); the first hit it adds then
        // takes the focus, where reading goes on
        more.addEventListener("click", () => {
          if (more.getAttribute("aria-disabled") === "true") return;
          more.setAttribute("aria-disabled", "true");
          call("search", {}, { query: { q, bot, limit: 50, offset: next } })
            .then(({ data: page }) => {
              if (ctx.closed || mine !== asked) return;
              const added = (page.hits || []).map(hitItem);
              list.append(...added);
              shown += added.length;
              hint.textContent = summary(page.total, shown);
              next = page.next_offset;
              more.hidden = next == null;
              more.removeAttribute("aria-disabled");
              const link = added.length ? added[0].querySelector("a") : null;
              if (link) link.focus();
            })
            .catch((e) => {
              if (ctx.closed || mine !== asked) return;
              more.removeAttribute("aria-disabled");
              results.append(errorBox(e));
            });
        });
        results.replaceChildren(hint, list, more);
      })
      .catch((e) => {
        if (!ctx.closed && mine === asked) results.replaceChildren(errorBox(e));
      });
  };
  if (!q) {
    results.append(h("p", { class: "hint" }, "Searches every conversation you can read: DMs, rooms, routines, webhooks. Quote a \"phrase\"; name a bot to search only what it may see."));
    input.focus();
  } else {
    run();
    title.focus();
  }
  return {
    unmount() {
      ctx.closed = true;
      botWatchers.delete(paintBots);
    },
  };
}

// ---------- secrets ----------

export function secretsView() {
  setTitle("Secrets");
  const ctx = { closed: false };
  const title = h("h1", { tabindex: "-1" }, "Secrets");
  const name = h("input", { id: "secret-name", required: true, placeholder: "GITHUB_TOKEN", spellcheck: "false", autocomplete: "off", pattern: "[A-Z_][A-Z0-9_]{0,63}", title: "Capital letters, digits and _, like an environment variable" });
  const value = h("input", { id: "secret-value", type: "password", required: true, autocomplete: "new-password" });
  const form = h(
    "form",
    { class: "row-form panel" },
    h("label", { class: "field", for: "secret-name" }, h("span", null, "Name"), name),
    h("label", { class: "field", for: "secret-value" }, h("span", null, "Value"), value),
    h("button", { type: "submit", class: "primary" }, "Save"),
  );
  const table = h("div", { "aria-live": "polite" });
  const status = h("p", { class: "hint", role: "status" });
  // errors show next to the form and the list, not in a toast that would
  // cover the Save and Delete buttons
  const problem = h("p", { class: "error-text", role: "alert" });
  const say = (ok, bad = "") => {
    status.textContent = ok;
    problem.textContent = bad;
  };
  main.replaceChildren(
    h(
      "div",
      { class: "page" },
      title,
      h("p", { class: "hint" }, "Your bots' tools use secrets by name. Values are write-only: botfleet never shows them again, and they never pass through a bot."),
      form,
      problem,
      status,
      h("h2", null, "Stored"),
      table,
    ),
  );
  title.focus();
  const load = async () => {
    try {
      const { data } = await call("secrets");
      if (ctx.closed) return;
      const items = data.secrets || [];
      if (!items.length) return table.replaceChildren(h("p", { class: "hint" }, "No secrets stored."));
      table.replaceChildren(
        h(
          "table",
          null,
          h("thead", null, h("tr", null, h("th", { scope: "col" }, "Name"), h("th", { scope: "col" }, "Updated"), h("th", null, h("span", { class: "sr-only" }, "Actions")))),
          h(
            "tbody",
            null,
            items.map((s) => {
              const del = h("button", { type: "button", class: "small danger", "aria-label": `Delete ${s.name}` }, "Delete");
              del.addEventListener("click", async () => {
                if (!confirm(`Delete the secret ${s.name}? Tools that use it will fail until it is set again.`)) return;
                try {
                  await call("secretDelete", { name: s.name });
                  say(`Deleted ${s.name}.`);
                  load();
                } catch (e) {
                  say("", `${s.name} was not deleted: ${e.message}`);
                }
              });
              return h("tr", null, h("td", null, h("code", null, s.name)), h("td", null, typeof s.updated_at === "number" ? relative(s.updated_at) : ""), h("td", null, del));
            }),
          ),
        ),
      );
    } catch (e) {
      if (!ctx.closed) table.replaceChildren(errorBox(e));
    }
  };
  // a server error is about what was sent: once the name or value
  // changes (or the browser's own check blocks the next save) it is stale
  // and would name another secret (QA)
  for (const field of [name, value]) field.addEventListener("input", () => say("", ""));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    // no command could use it: a paste that missed the secret (QA)
    if (value.value && !value.value.trim()) {
      say("", "The value is only spaces: paste the secret itself.");
      return;
    }
    try {
      await call("secretPut", { name: name.value.trim() }, { body: { value: value.value } });
      say(`Saved ${name.value.trim()}.`);
      name.value = "";
      value.value = "";
      load();
    } catch (e) {
      say("", e.message);
      name.focus();
    }
  });
  load();
  return {
    unmount() {
      ctx.closed = true;
    },
  };
}
