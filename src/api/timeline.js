// A live transcript: the entries of one session as chat bubbles, notices,
// approval and secret cards, and (behind a toggle) the bot's internal
// steps. Used for a bot's DM, a room's timeline and any other session.
//
// Sync rule: the timeline holds entries low+1..held. A change signal for
// its session with a seq above `held`, a `resync`, or a reconnection makes
// it fetch `after=held` until it reaches the session's last_seq. Fetches
// are serialized (one in flight, one more queued), and entries are dropped
// by id when already held, so overlapping answers and replays are harmless.

import { call } from "./api.js";
import { count, h, prettyJson, relative, richText, safeUrl, timeEl, toast } from "./dom.js";
import { loadBotsUntilStarted, refreshApprovals } from "./state.js";

/** Entries shown when a conversation opens, and per "Show earlier". */
const PAGE = 200;
/** Entries per request while catching up. */
const FETCH = 500;
/** Longest event text shown before it folds. */
const FOLD_CHARS = 480;
const STEPS_KEY = "botfleet.steps";

const str = (v) => (typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : "");
let uid = 0;
const nextId = (p) => `${p}-${++uid}`;

/** Human words for an approval's status. */
function approvalStatusText(a, now = Date.now()) {
  switch (a.status) {
    case "pending":
      return now >= a.expires_at ? "Expired: nobody decided in time" : `Waiting for your decision · expires ${relative(a.expires_at, now)}`;
    case "approved":
      return a.consumed_at ? "Approved · the action ran" : "Approved · the bot may run it once";
    case "denied":
      return "Denied";
    case "expired":
      return a.expired_by === "user_message" ? "Expired: a newer message came first" : "Expired: nobody decided in time";
    default:
      return str(a.status);
  }
}

/**
 * Fills `box` with an approval: tool, summary, reason, status and, while
 * pending, Approve/Deny. `a` is an approval record or an `approval` entry
 * (whose id is in `approval`). `onDecided(record)` gets the host's answer.
 */
export function fillApproval(box, a, { onDecided = refreshApprovals, details = false } = {}) {
  const id = a.approval || a.id;
  const pending = a.status === "pending" && Date.now() < a.expires_at;
  box.className = `card approval-card ${a.status}`;
  box.replaceChildren(h("div", { class: "card-body" },
    h("p", { class: "card-title" }, pending ? "Approve this action? " : "Action ", h("code", null, str(a.tool))),
    h("p", { class: "text" }, str(a.summary)),
    a.reason ? h("p", { class: "hint" }, `Why it asks: ${str(a.reason)}`) : null,
    details && a.action !== undefined
      ? h("details", null, h("summary", null, "Exact action"), h("pre", null, JSON.stringify(a.action, null, 2)))
      : null,
    h(
      "p",
      { class: "status", ...(a.status === "pending" ? { dataset: { expires: String(a.expires_at) } } : {}) },
      h("span", { class: "status-pill" }, approvalStatusText(a)),
    ),
  ));
  if (!pending) return;
  const decide = async (decision, button) => {
    for (const b of box.querySelectorAll("button")) b.disabled = true;
    button.textContent = decision === "approve" ? "Approving…" : "Denying…";
    try {
      const { data } = await call("decide", { id }, { body: { decision } });
      fillApproval(box, data.approval, { onDecided, details });
      onDecided(data.approval);
    } catch (e) {
      toast(e.message, { error: true });
      fillApproval(box, a, { onDecided, details });
    }
  };
  const approve = h("button", { type: "button", class: "primary" }, "Approve");
  const deny = h("button", { type: "button", class: "danger" }, "Deny");
  approve.addEventListener("click", () => decide("approve", approve));
  deny.addEventListener("click", () => decide("deny", deny));
  box.append(h("div", { class: "actions" }, approve, deny));
}

/** Refreshes the "expires in" lines under `root`. */
export function tickExpiries(root) {
  const now = Date.now();
  for (const el of root.querySelectorAll("[data-expires]")) {
    const at = Number(el.dataset.expires);
    const pill = el.querySelector(".status-pill");
    if (pill) pill.textContent = approvalStatusText({ status: "pending", expires_at: at }, now);
    if (now >= at) {
      // the buttons are in the card, beside the .card-body holding `el`
      const card = el.closest(".approval-card");
      if (card) for (const b of card.querySelectorAll(".actions button")) b.disabled = true;
      delete el.dataset.expires;
    }
  }
}

export class Timeline {
  /**
   * opts: label (accessible name), session (id named by change signals),
   * load(after, limit) → {entries, last_seq}, me (user id), nameOf(author),
   * send(text) (posts as the user; absent when read-only), working (text
   * of the "working" line), empty (text when there is nothing yet).
   */
  constructor(opts) {
    this.opts = opts;
    this.ids = new Set();
    this.bySeq = new Map();
    this.approvals = new Map();
    this.expected = new Map();
    this.unanswered = new Set();
    // turn id → {inputs, seq} of its turn_end, and input seq → seq of the
    // last turn_end that answered it: what a Retry puts back
    this.turnEnds = new Map();
    this.answeredAt = new Map();
    this.low = 0;
    this.held = 0;
    this.syncing = null;
    this.again = false;
    this.lastError = 0;
    this.earlier = h("button", { type: "button", class: "earlier small", hidden: true, onclick: () => this.loadEarlier() }, "Show earlier messages");
    this.log = h("ol", { class: "log", role: "log", "aria-label": opts.label, "aria-live": "polite" });
    this.outbox = h("ol", { class: "outbox", "aria-label": "Messages being sent" });
    this.empty = h("p", { class: "empty", hidden: true }, opts.empty || "Nothing here yet.");
    this.working = h("p", { class: "working", hidden: true, role: "status" }, h("span", { class: "dots" }, opts.working || "Working"));
    this.el = h("div", { class: "timeline", tabindex: "0", "aria-label": opts.label }, this.earlier, this.empty, this.log, this.outbox, this.working);
    const stepsId = nextId("steps");
    this.stepsBox = h("input", { type: "checkbox", id: stepsId, onchange: () => this.setSteps(this.stepsBox.checked, true) });
    this.stepsToggle = h("label", { class: "switch", for: stepsId }, this.stepsBox, "Show steps");
    this.setSteps(localStorage.getItem(STEPS_KEY) === "1", false);
    this.ticker = setInterval(() => tickExpiries(this.el), 15000);
  }

  /** Stops timers. */
  close() {
    clearInterval(this.ticker);
  }

  /** Shows or hides the bot's internal steps (notes, tool calls, results). */
  setSteps(on, remember) {
    this.stepsBox.checked = on;
    this.el.classList.toggle("steps", on);
    if (remember) localStorage.setItem(STEPS_KEY, on ? "1" : "0");
  }

  /** Loads the newest entries (or those around `focus`) and shows them. */
  async open(lastSeq, focus) {
    const start = focus ? Math.max(0, focus - 40) : Math.max(0, lastSeq - PAGE);
    this.low = start;
    this.held = start;
    this.log.setAttribute("aria-busy", "true");
    try {
      await this.sync();
    } finally {
      this.log.removeAttribute("aria-busy");
    }
    this.earlier.hidden = this.low <= 0;
    const target = focus && this.bySeq.get(focus);
    if (target) {
      if (target.classList.contains("internal")) this.setSteps(true, false);
      target.classList.add("target");
      target.scrollIntoView({ block: "center" });
    } else {
      this.toEnd();
    }
  }

  /** Reacts to a change signal or a resync. */
  onSignal(ev) {
    if (ev.type === "resync" || (ev.type === "change" && ev.session === this.opts.session && ev.seq > this.held)) {
      this.sync().catch(() => {});
    }
  }

  /** Fetches what is missing after `held`; at most one fetch runs at a time. */
  sync() {
    if (this.syncing) {
      this.again = true;
      return this.syncing;
    }
    this.syncing = (async () => {
      try {
        do {
          this.again = false;
          await this.pull();
        } while (this.again);
      } catch (e) {
        if (Date.now() - this.lastError > 10000) toast(e.message, { error: true });
        this.lastError = Date.now();
        throw e;
      } finally {
        this.syncing = null;
      }
    })();
    return this.syncing;
  }

  async pull() {
    for (let round = 0; round < 100; round++) {
      const page = await this.opts.load(this.held, FETCH);
      const stick = this.nearEnd();
      const frag = document.createDocumentFragment();
      let added = 0;
      for (const e of page.entries || []) {
        if (e.seq > this.held) this.held = e.seq;
        if (this.ids.has(e.id)) continue;
        this.ids.add(e.id);
        const li = this.render(e, false);
        if (li) frag.append(li);
        added++;
      }
      this.log.append(frag);
      this.refresh();
      if (added && stick) this.toEnd();
      if (added) this.checkApproved();
      if (!(page.entries || []).length || this.held >= (page.last_seq ?? 0)) return;
    }
  }

  async loadEarlier() {
    if (this.low <= 0) return;
    const from = Math.max(0, this.low - PAGE);
    this.earlier.disabled = true;
    try {
      const page = await this.opts.load(from, this.low - from);
      const before = this.el.scrollHeight;
      const frag = document.createDocumentFragment();
      for (const e of page.entries || []) {
        if (e.seq > this.low || this.ids.has(e.id)) continue;
        this.ids.add(e.id);
        const li = this.render(e, true);
        if (li) frag.append(li);
      }
      this.log.prepend(frag);
      this.low = from;
      this.el.scrollTop += this.el.scrollHeight - before;
      this.refresh();
      this.checkApproved();
    } catch (e) {
      toast(e.message, { error: true });
    } finally {
      this.earlier.disabled = false;
      this.earlier.hidden = this.low <= 0;
    }
  }

  nearEnd() {
    return this.el.scrollHeight - this.el.scrollTop - this.el.clientHeight < 120;
  }

  toEnd() {
    this.el.scrollTop = this.el.scrollHeight;
  }

  refresh() {
    this.empty.hidden = this.log.childElementCount > 0 || this.outbox.childElementCount > 0;
    this.working.hidden = this.unanswered.size === 0;
  }

  /** An outgoing message shown until its entry arrives. */
  pending(text) {
    const meta = h("div", { class: "meta" }, h("span", { class: "who" }, "You"), h("span", null, "Sending…"));
    const actions = h("div", { class: "outbox-actions" });
    const li = h("li", { class: "entry mine sending" }, h("div", { class: "bubble" }, meta, h("div", { class: "text" }, text)), actions);
    this.outbox.append(li);
    this.refresh();
    this.toEnd();
    return {
      sent: (entryId) => {
        if (!entryId || this.ids.has(entryId)) li.remove();
        else {
          meta.lastChild.textContent = "Sent";
          this.expected.set(entryId, li);
        }
        this.refresh();
      },
      failed: (message, retry) => {
        li.className = "entry mine unsent";
        meta.lastChild.textContent = "Not sent";
        actions.replaceChildren(
          h("span", { class: "error-text" }, message),
          h("button", { type: "button", class: "small", onclick: () => { li.remove(); retry(); } }, "Retry"),
          h("button", { type: "button", class: "small link", onclick: () => { li.remove(); this.refresh(); } }, "Discard"),
        );
      },
    };
  }

  /** The element of one entry, or null when it changes another one. */
  render(e, older) {
    const done = this.expected.get(e.id);
    if (done) {
      done.remove();
      this.expected.delete(e.id);
    }
    const li = this.renderKind(e, older);
    if (li) {
      li.dataset.seq = String(e.seq);
      this.bySeq.set(e.seq, li);
    }
    return li;
  }

  renderKind(e, older) {
    const who = (author) => (author === this.opts.me ? "You" : this.opts.nameOf(author));
    switch (e.kind) {
      case "user_message":
        if (!older) this.unanswered.add(e.seq);
        return this.bubble(e, { who: who(e.author), mine: e.author === this.opts.me, text: e.text });
      case "delivery":
        return this.bubble(e, { who: who(e.author), text: richText(e.text), card: e.card });
      case "agent_message":
        return this.bubble(e, { who: `${this.opts.nameOf(e.from)} (bot)`, text: richText(e.text), cls: "agent" });
      case "event":
        return this.event(e);
      case "reaction":
        return this.reaction(e, who(e.author));
      case "notice":
        // paused for the day: the messages wait, nobody is working on them
        if (e.code === "budget_exhausted" && !older) this.unanswered.clear();
        return this.notice(e);
      case "approval":
        return this.approval(e);
      case "assistant":
        return this.assistant(e);
      case "tool_result":
        return h(
          "li",
          { class: "entry internal" },
          h(
            "details",
            { class: `step${e.is_error ? " error" : ""}` },
            h("summary", null, h("span", { class: "step-label" }, e.is_error ? "error" : "result"), h("code", null, str(e.name))),
            h("pre", null, str(e.content)),
          ),
        );
      case "reminder":
        return h("li", { class: "entry internal" }, h("div", { class: "step" }, h("span", { class: "step-label" }, "runtime"), h("span", { class: "text" }, str(e.text))));
      case "summary":
        return h(
          "li",
          { class: "entry internal" },
          h("details", { class: "step" }, h("summary", null, h("span", { class: "step-label" }, "summary"), `of the conversation up to #${e.covers_to_seq}`), h("div", { class: "text" }, str(e.text))),
        );
      case "turn_end": {
        if (e.status !== "interrupted") {
          for (const s of e.inputs || []) {
            this.unanswered.delete(s);
            this.answeredAt.set(s, Math.max(this.answeredAt.get(s) || 0, e.seq));
          }
        }
        if (e.turn) this.turnEnds.set(e.turn, { inputs: e.inputs || [], seq: e.seq });
        const tokens = e.usage ? e.usage.prompt_tokens + e.usage.completion_tokens : 0;
        const parts = [`turn ${str(e.status)}`, `${e.deliveries} ${e.deliveries === 1 ? "reply" : "replies"}`];
        if (tokens) parts.push(`${count(tokens)} tokens`);
        return h("li", { class: "entry internal" }, h("div", { class: "divider" }, parts.join(" · ")));
      }
      default:
        return h("li", { class: "entry internal" }, h("div", { class: "step" }, h("span", { class: "step-label" }, str(e.kind)), h("span", { class: "text" }, str(e.text))));
    }
  }

  bubble(e, { who, mine = false, text, card, cls = "" }) {
    return h(
      "li",
      { class: `entry${mine ? " mine" : ""} ${cls}` },
      h(
        "div",
        { class: "bubble" },
        h("div", { class: "meta" }, h("span", { class: "who" }, who), timeEl(e.created_at)),
        h("div", { class: "text" }, text instanceof Node ? text : str(text)),
        card ? this.card(card, who) : null,
      ),
      h("div", { class: "reactions", hidden: true }),
    );
  }

  event(e) {
    const text = str(e.text);
    const body =
      text.length > FOLD_CHARS
        ? h("details", null, h("summary", null, `${text.slice(0, 160)}…`), h("div", { class: "text" }, text))
        : h("div", { class: "text" }, text);
    return h(
      "li",
      { class: "entry event" },
      h(
        "div",
        { class: "line box" },
        h("div", { class: "meta" }, h("span", { class: "tag" }, str(e.origin) || "event"), e.trusted ? null : h("span", { class: "tag untrusted" }, "untrusted"), timeEl(e.created_at)),
        body,
      ),
    );
  }

  reaction(e, who) {
    const target = this.bySeq.get(e.target_seq);
    const box = target && target.querySelector(".reactions");
    const chip = h("span", { title: `${who} reacted` }, str(e.emoji));
    if (box) {
      box.hidden = false;
      box.append(chip);
      return null;
    }
    return h("li", { class: "entry notice" }, h("div", { class: "line quiet" }, `${who} reacted `, chip, ` to #${e.target_seq}`));
  }

  notice(e) {
    const quiet = e.code === "unknown_mention" || str(e.code).startsWith("room_run_");
    const bad = e.code === "turn_failed" || e.code === "budget_exhausted";
    const line = h("div", { class: `line${quiet ? " quiet" : ""}` }, h("span", null, str(e.text)));
    if (e.retry_turn) {
      const retry = h("button", { type: "button", class: "small" }, "Retry");
      retry.addEventListener("click", async () => {
        retry.disabled = true;
        try {
          const { data } = await call("retryTurn", { turn: e.retry_turn });
          retry.textContent = data.requeued ? `Queued again (${data.requeued})` : "Nothing left to retry";
          if (data.requeued) this.retried(e.retry_turn);
        } catch (err) {
          retry.disabled = false;
          // a shared room shows other people's bots' failures too: their
          // turns are theirs to retry
          const theirs = err.status === 404 && str(e.code).startsWith("room_run_");
          toast(theirs ? "Only the owner of that bot can retry its turn." : err.message, { error: true });
        }
      });
      line.append(retry);
    }
    return h("li", { class: `entry notice${bad ? " bad" : ""}`, role: quiet ? null : "note" }, line);
  }

  /**
   * A retry writes no entry, so nothing else tells the page that the bot
   * works again: the retried turn's inputs wait for an answer again (its
   * turn_end had taken them off) and the bots are read again for the
   * header. An input a later turn_end already answered (a quick retried
   * turn may end before the host's answer to the click arrives) stays so.
   */
  retried(turn) {
    const ended = this.turnEnds.get(turn);
    for (const s of ended ? ended.inputs : []) {
      if ((this.answeredAt.get(s) || 0) <= ended.seq) this.unanswered.add(s);
    }
    this.refresh();
    loadBotsUntilStarted();
  }

  /**
   * An approval's card, shown once where it first appears: each later
   * entry of the same approval updates it. The newest entry by seq wins
   * whatever order the entries arrive in ("Show earlier" brings a page
   * whose own entries are in order but older than the ones held).
   */
  approval(e) {
    const known = this.approvals.get(e.approval);
    if (known) {
      if (e.seq > known.seq) {
        known.seq = e.seq;
        known.status = e.status;
        fillApproval(known.box, e);
      }
      return null;
    }
    const box = h("div");
    fillApproval(box, e);
    this.approvals.set(e.approval, { seq: e.seq, status: e.status, box, asking: false });
    return h("li", { class: "entry approval" }, box);
  }

  /**
   * Using an approval appends no entry, so the cards of approved actions
   * ask the host whether the action ran (consumed_at) and say so.
   */
  checkApproved() {
    for (const [id, known] of this.approvals) {
      if (known.status !== "approved" || known.asking) continue;
      known.asking = true;
      const seq = known.seq;
      call("approval", { id })
        .then(({ data }) => {
          const a = data.approval;
          if (known.seq !== seq || !(a.consumed_at || a.status !== "approved")) return;
          known.status = a.consumed_at ? "ran" : a.status;
          fillApproval(known.box, a);
        })
        .catch((e) => {
          if (e.status === 404) known.status = "unknown";
        })
        .finally(() => {
          known.asking = false;
        });
    }
  }

  assistant(e) {
    if (!str(e.text).trim() && !(e.tool_calls || []).length) return null;
    const step = h("div", { class: "step" });
    if (str(e.text).trim()) step.append(h("div", null, h("span", { class: "step-label" }, "note"), h("span", { class: "text" }, e.text)));
    for (const c of e.tool_calls || []) {
      step.append(h("details", null, h("summary", null, h("span", { class: "step-label" }, "call"), h("code", null, str(c.name))), h("pre", null, prettyJson(c.arguments))));
    }
    return h("li", { class: "entry internal" }, step);
  }

  /** A card a bot sent with a delivery. */
  card(card, botName) {
    if (!card || typeof card !== "object" || Array.isArray(card)) return null;
    if (card.type === "secret_request" && typeof card.name === "string") return this.secretCard(card, botName);
    const box = h("div", { class: "card" });
    if (str(card.title)) box.append(h("p", { class: "card-title" }, str(card.title)));
    const body = str(card.text ?? card.description ?? card.body);
    if (body) box.append(h("p", { class: "text" }, body));
    const fields = fieldsOf(card.fields);
    if (fields.length) box.append(h("dl", null, fields.map(([k, v]) => [h("dt", null, k), h("dd", null, v)])));
    const buttons = Array.isArray(card.buttons) ? card.buttons : [];
    if (buttons.length) {
      const row = h("div", { class: "actions" });
      for (const b of buttons) row.append(this.cardButton(b, row));
      box.append(row);
    }
    if (!box.childElementCount) box.append(h("pre", null, JSON.stringify(card, null, 2)));
    return box;
  }

  cardButton(b, row) {
    const spec = typeof b === "string" ? { label: b } : b && typeof b === "object" ? b : { label: str(b) };
    const label = str(spec.label ?? spec.text ?? spec.title) || "Choose";
    const url = spec.url && safeUrl(spec.url);
    if (url) return h("a", { class: "button", href: url, target: "_blank", rel: "noopener noreferrer" }, label);
    const reply = str(spec.value ?? spec.reply ?? spec.message) || label;
    const button = h("button", { type: "button", disabled: !this.opts.send }, label);
    button.addEventListener("click", async () => {
      for (const x of row.querySelectorAll("button")) x.disabled = true;
      button.classList.add("primary");
      await this.opts.send(reply);
    });
    return button;
  }

  /**
   * {"type": "secret_request", "name": "GITHUB_TOKEN", "title"?,
   * "description"?}: a password field that PUTs /v1/secrets/{name}, so the
   * value goes to the host's secret store and never through the bot.
   */
  secretCard(card, botName) {
    const name = card.name;
    const inputId = nextId("secret");
    const input = h("input", { type: "password", id: inputId, autocomplete: "new-password", spellcheck: "false", required: true });
    const note = h("p", { class: "hint", role: "status" }, "Stored in botfleet for your bots' tools; the value is never shown to the bot or sent in the chat.");
    const save = h("button", { type: "submit", class: "primary" }, "Save secret");
    const form = h("form", null, input, save);
    const box = h(
      "div",
      { class: "card secret" },
      h("p", { class: "card-title" }, str(card.title) || `${botName} asks for a secret`),
      str(card.description ?? card.text) ? h("p", { class: "text" }, str(card.description ?? card.text)) : null,
      h("label", { for: inputId }, "Value of ", h("code", null, name)),
      form,
      note,
    );
    this.secretNames().then((names) => {
      if (names.has(name)) note.textContent = `${name} is already set; saving replaces it. The value is never shown to the bot.`;
    });
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      save.disabled = true;
      try {
        await call("secretPut", { name }, { body: { value: input.value } });
        input.value = "";
        form.remove();
        note.textContent = `Saved ${name}.`;
        if (this.opts.send) {
          note.append(" ", h("button", { type: "button", class: "link", onclick: (ev2) => { ev2.target.remove(); this.opts.send(`I saved the secret ${name}.`); } }, `Tell ${botName}`));
        }
      } catch (e) {
        save.disabled = false;
        toast(e.message, { error: true });
      }
    });
    return box;
  }

  secretNames() {
    this.secrets ??= call("secrets")
      .then(({ data }) => new Set((data.secrets || []).map((s) => s.name)))
      .catch(() => new Set());
    return this.secrets;
  }
}

/** [label, value] pairs of a card's fields (a list or an object). */
function fieldsOf(fields) {
  const text = (v) => (typeof v === "object" && v !== null ? JSON.stringify(v) : str(v));
  if (Array.isArray(fields)) {
    return fields
      .map((f) => (Array.isArray(f) ? [text(f[0]), text(f[1])] : f && typeof f === "object" ? [str(f.name ?? f.label ?? f.title ?? f.key), text(f.value)] : null))
      .filter((p) => p && (p[0] || p[1]));
  }
  if (fields && typeof fields === "object") return Object.entries(fields).map(([k, v]) => [k, text(v)]);
  return [];
}
