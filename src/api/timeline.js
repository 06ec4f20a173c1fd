// A live transcript: the entries of one session as chat bubbles, notices,
// approval and secret cards, and (behind a toggle) the bot's internal
// steps. Used for a bot's DM, a room's timeline and any other session.
//
// Sync rule: the timeline holds entries low+1..held. While it `follows`
// (it holds the newest entry), a change signal for its session with a seq
// above `held`, a `resync`, or a reconnection makes it fetch `after=held`
// until it reaches the session's last_seq. Fetches are serialized (one in
// flight, one more queued), and entries are dropped by id when already
// held, so overlapping answers and replays are harmless.
//
// A link to an entry (`?seq=`, what a search hit opens) loads one page
// around it and does not follow: "Show newer messages" pages forward
// until the newest entry is held (then it follows), and "Jump to the
// newest" (or sending a message) starts over from the newest page. Either
// takes `seq` out of the address, so that a reload (or a bookmark) opens
// the end where the person now is, not the old entry again.
//
// Entries that arrive while the person reads further up leave the view
// where it is: a "3 new messages below" button says so, until it is
// clicked (to the newest) or the person scrolls to the end.

import { call } from "./api.js";
import { botCard, CardAnswers, escapeHidden, fillApproval, tickExpiries } from "./cards.js";
import { clock, count, firstChars, h, richText, speaker, timeEl, toast } from "./dom.js";
import { noticeItem } from "./notices.js";
import { taskLink } from "./origins.js";
import { stepItem } from "./steps.js";
import { loadBotsUntilStarted } from "./state.js";

/** Takes `seq` out of the page's address (`#/bots/r?seq=16` becomes
 * `#/bots/r`) without a new history entry or a route: the view follows
 * the newest entries now. */
function leaveEntryLink() {
  const [path, query] = location.hash.split("?");
  if (query === undefined) return;
  const q = new URLSearchParams(query);
  if (!q.has("seq")) return;
  q.delete("seq");
  const rest = q.toString();
  history.replaceState(history.state, "", `${location.pathname}${location.search}${path}${rest ? `?${rest}` : ""}`);
}

/** Entries shown when a conversation opens, and per "Show earlier" or
 * "Show newer". */
const PAGE = 200;
/** Entries per request while catching up. */
const FETCH = 500;
/** Longest event text (in characters: code points) shown before it folds. */
const FOLD_CHARS = 480;
/** Characters of a folded event text shown above the fold. */
const FOLD_SHOWN = 160;
const STEPS_KEY = "botfleet.steps";

const str = (v) => (typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : "");
let uid = 0;
const nextId = (p) => `${p}-${++uid}`;

export class Timeline {
  /**
   * opts: label (accessible name), session (id named by change signals),
   * load(after, limit) → {entries, last_seq}, me (user id), nameOf(author),
   * send(text) (posts as the user; absent when read-only), draft(text)
   * (puts text in the user's message box; absent when read-only),
   * edit(text) (puts a refused message back in it, as written; false when
   * it has none), working
   * (text of the "working" line), empty (text when there is nothing yet).
   */
  constructor(opts) {
    this.opts = opts;
    this.expected = new Map();
    // outgoing messages whose send got no answer (compose.js): each is
    // asked of every entry shown whether it may be that message
    // (`arrived(e)`), and told when the host answers again (`reachable()`)
    this.unconfirmed = new Set();
    this.closed = false;
    this.forget();
    this.syncing = null;
    this.again = false;
    this.lastError = 0;
    // bumped when the held entries are dropped (Jump to the newest): an
    // answer asked for before is then ignored
    this.gen = 0;
    // the newest seq the host is known to have, and whether the timeline
    // holds it and follows the change signals
    this.last = 0;
    this.follows = true;
    this.pausedUntil = 0;
    this.earlier = h("button", { type: "button", class: "earlier small", hidden: true, onclick: () => this.loadEarlier() }, "Show earlier messages");
    this.later = h("button", { type: "button", class: "small", onclick: () => this.loadLater() }, "Show newer messages");
    this.newest = h("button", { type: "button", class: "small link", onclick: () => this.toNewest() }, "Jump to the newest");
    this.laterRow = h("div", { class: "later actions", hidden: true }, this.later, this.newest);
    this.log = h("ol", { class: "log", role: "log", "aria-label": opts.label, "aria-live": "polite" });
    // a live region: a message refused, held by the rate limit or not
    // confirmed is announced, not only drawn (QA: a screen reader said
    // nothing)
    this.outbox = h("ol", { class: "outbox", "aria-label": "Messages being sent", "aria-live": "polite" });
    this.empty = h("p", { class: "empty", hidden: true }, opts.empty || "Nothing here yet.");
    this.working = h("p", { class: "working", hidden: true, role: "status" });
    // how many entries arrived below the view while it was scrolled up
    this.unseen = 0;
    this.belowButton = h("button", { type: "button", class: "small primary", hidden: true, onclick: () => this.seeNewest() });
    this.below = h("div", { class: "new-below", role: "status" }, this.belowButton);
    this.el = h("div", { class: "timeline", tabindex: "0", "aria-label": opts.label }, this.earlier, this.empty, this.log, this.laterRow, this.outbox, this.working, this.below);
    const stepsId = nextId("steps");
    this.stepsBox = h("input", { type: "checkbox", id: stepsId, onchange: () => this.setSteps(this.stepsBox.checked, true) });
    this.stepsToggle = h("label", { class: "switch", for: stepsId }, this.stepsBox, "Show steps");
    this.setSteps(localStorage.getItem(STEPS_KEY) === "1", false);
    this.cardCtx = { send: opts.send, draft: opts.draft, secretNames: () => this.secretNames() };
    this.ticker = setInterval(() => {
      tickExpiries(this.el);
      this.paintWorking();
    }, 15000);
    // something drawn grows after it was shown (an approval card gets its
    // exact action from the host, a card's buttons their previews): the
    // newest stays in view when the person was at the end (it scrolled
    // out of view under the grown card)
    this.atEnd = true;
    this.el.addEventListener("scroll", () => {
      this.atEnd = this.nearEnd();
      if (this.atEnd && this.unseen) this.paintBelow(0);
    }, { passive: true });
    this.grown = new ResizeObserver(() => {
      if (this.atEnd && this.follows && !this.closed) this.toEnd();
    });
    this.grown.observe(this.log);
    this.grown.observe(this.outbox);
  }

  /** Drops what the held entries taught (not the messages being sent). */
  forget() {
    this.ids = new Set();
    this.bySeq = new Map();
    this.approvals = new Map();
    this.unanswered = new Set();
    // turn id → {inputs, seq, status} of its turn_end, and input seq →
    // seq of the last turn_end that answered it: what a Retry puts back
    this.turnEnds = new Map();
    /** turn → what marks its notice's Retry gone ({@link settleRetry}). */
    this.retryable = new Map();
    this.answeredAt = new Map();
    this.answers = new CardAnswers();
    this.low = 0;
    this.held = 0;
    /** Reactions to messages on pages not loaded yet: target seq →
     * [{chip, line}], each shown as its own line until its message comes
     * ({@link attachHeldReactions}). */
    this.heldReactions = new Map();
  }

  /** Stops timers. */
  close() {
    this.closed = true;
    this.unconfirmed.clear();
    clearInterval(this.ticker);
    this.grown.disconnect();
  }

  /** Shows or hides the bot's internal steps (notes, tool calls, results). */
  setSteps(on, remember) {
    this.stepsBox.checked = on;
    this.el.classList.toggle("steps", on);
    if (remember) localStorage.setItem(STEPS_KEY, on ? "1" : "0");
  }

  /**
   * The bot is paused until `until` (ms; its daily token budget is
   * spent): messages waiting for it are said to wait, not worked on.
   */
  setPaused(until) {
    this.pausedUntil = typeof until === "number" ? until : 0;
    this.paintWorking();
  }

  /** Loads the newest entries (or a page around `focus`) and shows them. */
  async open(lastSeq, focus) {
    this.last = lastSeq || 0;
    // a link past the end (a mistyped or made-up seq): the newest page
    const missing = focus > this.last ? focus : 0;
    if (missing) focus = undefined;
    this.log.setAttribute("aria-busy", "true");
    try {
      if (focus) {
        this.follows = false;
        this.low = Math.max(0, focus - PAGE / 2);
        this.held = this.low;
        await this.loadLater(false);
      } else {
        this.low = Math.max(0, this.last - PAGE);
        this.held = this.low;
        await this.sync();
      }
    } finally {
      this.log.removeAttribute("aria-busy");
    }
    this.earlier.hidden = this.low <= 0;
    const target = focus && this.bySeq.get(focus);
    if (target) {
      if (target.classList.contains("internal")) this.setSteps(true, false);
      target.classList.add("target");
      target.scrollIntoView({ block: "center" });
      // the keyboard goes on from the entry a link named (QA: the focus
      // stayed on the page's body, and Tab started over at its top)
      target.tabIndex = -1;
      target.focus({ preventScroll: true });
    } else {
      this.toEnd();
    }
    if (missing) toast(`There is no message #${missing} here${this.last ? ` (the newest is #${this.last})` : ""}: showing the newest.`);
  }

  /** Reacts to a change signal or a resync. */
  onSignal(ev) {
    if (ev.type === "resync") this.reachable();
    if (ev.type === "change" && ev.session === this.opts.session) this.last = Math.max(this.last, ev.seq || 0);
    if (!this.follows) return this.paintLater();
    if (ev.type === "resync" || (ev.type === "change" && ev.session === this.opts.session && ev.seq > this.held)) {
      this.sync().catch(() => {});
    }
  }

  /**
   * Fetches what is missing after `held`, while the timeline follows; at
   * most one fetch runs at a time.
   */
  sync() {
    if (!this.follows) return Promise.resolve();
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
        if (Date.now() - this.lastError > 10000 && e.code !== "signed_out") toast(e.message, { error: true });
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
      const gen = this.gen;
      const page = await this.opts.load(this.held, FETCH);
      if (gen !== this.gen) return;
      this.append(page);
      if (!(page.entries || []).length || this.held >= (page.last_seq ?? 0)) return;
    }
  }

  /** Shows the entries of `page` (after `held`) at the end of the log. */
  append(page) {
    this.last = Math.max(this.last, page.last_seq ?? 0);
    const stick = this.nearEnd();
    const frag = document.createDocumentFragment();
    let added = 0;
    // entries drawn that the person sees (not a step behind "Show steps")
    let shown = 0;
    for (const e of page.entries || []) {
      if (e.seq > this.held) this.held = e.seq;
      if (this.ids.has(e.id)) continue;
      this.ids.add(e.id);
      const li = this.render(e, false);
      if (li) frag.append(li);
      if (li && !(li.classList.contains("internal") && !this.stepsBox.checked)) shown++;
      added++;
      for (const out of this.unconfirmed) if (out.arrived(e)) break;
    }
    this.log.append(frag);
    this.refresh();
    if (added && stick && this.follows) this.toEnd();
    // read further up: said, not scrolled to
    else if (shown && this.follows) this.paintBelow(this.unseen + shown);
    if (added) this.checkApproved();
    if (added) this.answers.settle();
    this.reachable();
  }

  /** The host answered: messages sent without an answer are asked again. */
  reachable() {
    for (const out of [...this.unconfirmed]) out.reachable();
  }

  /**
   * The next page after `held` (not following): once it reaches the
   * newest entry, the timeline follows again. `report`: toast a failure
   * (open() lets its caller report it).
   */
  async loadLater(report = true) {
    const gen = this.gen;
    this.later.disabled = true;
    try {
      const page = await this.opts.load(this.held, PAGE);
      if (gen !== this.gen) return;
      this.append(page);
      if (!(page.entries || []).length || this.held >= this.last) {
        this.follows = true;
        // paged to the end by the person ("Show newer messages")
        if (report) leaveEntryLink();
      }
    } catch (e) {
      if (report && e.code !== "signed_out") toast(e.message, { error: true });
      if (!report) throw e;
    } finally {
      this.later.disabled = false;
      this.paintLater();
      this.refresh();
    }
    // what came meanwhile
    if (this.follows && gen === this.gen) await this.sync().catch(() => {});
  }

  /** Drops the held entries and shows the newest page, following. */
  async toNewest() {
    leaveEntryLink();
    this.gen++;
    this.forget();
    this.log.replaceChildren();
    this.follows = true;
    this.low = Math.max(0, this.last - PAGE);
    this.held = this.low;
    this.earlier.hidden = this.low <= 0;
    this.paintLater();
    this.paintWorking();
    await this.sync().catch(() => {});
    this.toEnd();
  }

  paintLater() {
    this.laterRow.hidden = this.follows;
  }

  async loadEarlier() {
    if (this.low <= 0) return;
    const gen = this.gen;
    const from = Math.max(0, this.low - PAGE);
    this.earlier.disabled = true;
    try {
      const page = await this.opts.load(from, this.low - from);
      if (gen !== this.gen) return;
      const before = this.el.scrollHeight;
      const frag = document.createDocumentFragment();
      for (const e of page.entries || []) {
        if (e.seq > this.low || this.ids.has(e.id)) continue;
        this.ids.add(e.id);
        const li = this.render(e, true);
        if (li) {
          // laid out only near the view (ui.css, `.paged`)
          li.classList.add("paged");
          frag.append(li);
        }
      }
      this.log.prepend(frag);
      this.low = from;
      this.attachHeldReactions();
      this.el.scrollTop += this.el.scrollHeight - before;
      this.refresh();
      this.checkApproved();
      this.answers.settle();
    } catch (e) {
      if (e.code !== "signed_out") toast(e.message, { error: true });
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
    this.paintBelow(0);
  }

  /** "New messages below" clicked: the newest in view, the keyboard on
   * the conversation (the button goes). */
  seeNewest() {
    this.toEnd();
    this.el.focus({ preventScroll: true });
  }

  /** Says that `n` entries arrived below the view; none hides it. */
  paintBelow(n) {
    this.unseen = n;
    this.belowButton.hidden = n === 0;
    if (n) this.belowButton.textContent = `${n} new ${n === 1 ? "message" : "messages"} below`;
  }

  /** The empty note and the line under the log, after entries came. */
  refresh() {
    this.empty.hidden = this.log.childElementCount > 0 || this.outbox.childElementCount > 0;
    this.paintWorking();
  }

  /** Whether messages of the newest entries wait for an answer. */
  awaitsTurn() {
    return this.follows && this.unanswered.size > 0;
  }

  /**
   * The line under the log: the bot works on the messages it has not
   * answered, or they wait while it is paused. Only said of the newest
   * entries (a page further back may end on a message answered later).
   */
  paintWorking() {
    const waiting = this.awaitsTurn();
    this.working.hidden = !waiting;
    if (!waiting) return;
    const paused = this.pausedUntil > Date.now();
    const text = paused
      ? `Paused until ${clock(this.pausedUntil)}: its daily token budget is spent. Your messages wait until then.`
      : this.opts.working || "Working";
    if (this.working.dataset.text === text) return;
    this.working.dataset.text = text;
    this.working.classList.toggle("paused", paused);
    this.working.replaceChildren(paused ? h("span", null, text) : h("span", { class: "dots" }, text));
  }

  /** Shows an outgoing message's bubble (compose.js) at the end of the
   * conversation, where messages are answered. */
  addOutgoing(li) {
    if (!this.follows) this.toNewest();
    this.outbox.append(li);
    this.refresh();
    this.toEnd();
  }

  /** An outgoing bubble the host stored as entry `entryId`: it goes when
   * that entry is shown (now, when it already is). */
  confirmed(entryId, li) {
    if (!entryId || this.ids.has(entryId)) li.remove();
    else this.expected.set(entryId, li);
    this.refresh();
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

  /**
   * Who says an entry, as its bubble labels it. A person's message reads
   * "You" (and sits on the right, in the page's colour) when it is the
   * viewer's, else the person's id with a "person" tag; a bot's (a reply,
   * a message to another bot) carries a "bot" tag and, when its name is
   * not its id, the id: a bot named "alice" or "You" cannot pass for a
   * person, nor for the viewer (docs/api.md, "The web page"). A bot's
   * name is the one its entry carries (`author_name`) when the bot list
   * has none: a finished subagent the list leaves out was labelled by
   * its id alone.
   */
  speaker(kind, author, authorName) {
    const nameOf = (id) => {
      const known = this.opts.nameOf(id);
      return authorName && known === id ? authorName : known;
    };
    return speaker(kind === "delivery" || kind === "agent_message", author, this.opts.me, nameOf);
  }

  renderKind(e, older) {
    const who = (author) => (author === this.opts.me ? "You" : this.opts.nameOf(author));
    switch (e.kind) {
      case "user_message":
        if (!older) this.unanswered.add(e.seq);
        if (e.author === this.opts.me) this.answers.message(e.seq, str(e.text));
        return this.bubble(e, { ...this.speaker(e.kind, e.author), text: e.text });
      case "delivery":
        return this.bubble(e, { ...this.speaker(e.kind, e.author, e.author_name), text: richText(e.text), card: e.card });
      case "agent_message":
        return this.bubble(e, { ...this.speaker(e.kind, e.from, e.author_name), text: richText(e.text), cls: "agent", link: taskLink(e.from) });
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
      case "tool_result":
      case "reminder":
      case "summary":
        return stepItem(e);
      case "turn_end": {
        if (e.status !== "interrupted") {
          for (const s of e.inputs || []) {
            this.unanswered.delete(s);
            this.answeredAt.set(s, Math.max(this.answeredAt.get(s) || 0, e.seq));
          }
        }
        const end = { inputs: e.inputs || [], seq: e.seq, status: str(e.status) };
        if (e.turn) this.turnEnds.set(e.turn, end);
        // each Retry against this end alone; a Retry of this very turn
        // against every end held (later ones may have come first)
        for (const turn of [...this.retryable.keys()]) this.settleRetry(turn, turn === e.turn ? this.turnEnds.values() : [end]);
        const tokens = e.usage ? e.usage.prompt_tokens + e.usage.completion_tokens : 0;
        const parts = [`turn ${str(e.status)}`, `${e.deliveries} ${e.deliveries === 1 ? "reply" : "replies"}`];
        if (tokens) parts.push(`${count(tokens)} tokens`);
        return h("li", { class: "entry internal" }, h("div", { class: "divider" }, parts.join(" · ")));
      }
      default:
        return stepItem(e);
    }
  }

  bubble(e, { who, mine = false, tags = [], text, card, cls = "", link = null }) {
    const box = card ? botCard(card, who, this.cardCtx) : null;
    // answered or not, as the person's messages after it say
    if (box) this.answers.card(e.seq, box);
    return h(
      "li",
      { class: `entry${mine ? " mine" : ""} ${cls}` },
      h(
        "div",
        { class: "bubble" },
        h("div", { class: "meta" }, h("span", { class: "who" }, who), tags, timeEl(e.created_at), link),
        h("div", { class: "text" }, text instanceof Node ? text : str(text)),
        box,
      ),
      h("div", { class: "reactions", hidden: true }),
    );
  }

  event(e) {
    // an event's text (a webhook's payload, an approval's summary) is
    // shown as the approval's card shows an action, bidi overrides and
    // all escaped: it is not the host's to reorder
    const text = escapeHidden(str(e.text));
    const body =
      firstChars(text, FOLD_CHARS) !== null
        ? h("details", null, h("summary", null, `${firstChars(text, FOLD_SHOWN)}…`), h("div", { class: "text" }, text))
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

  /** The reactions box of message `seq`, shown, when that message is. */
  reactionsOf(seq) {
    const target = this.bySeq.get(seq);
    const box = target && target.querySelector(".reactions");
    if (box) box.hidden = false;
    return box;
  }

  reaction(e, who) {
    const box = this.reactionsOf(e.target_seq);
    const chip = h("span", { title: `${who} reacted` }, str(e.emoji));
    if (box) {
      box.append(chip);
      return null;
    }
    const line = h("li", { class: "entry notice" }, h("div", { class: "line quiet" }, `${who} reacted `, chip, ` to #${e.target_seq}`));
    // its message is on an earlier page: the reaction goes onto it when
    // that page is shown (QA: it stayed a line naming a seq the page
    // shows nowhere, and the message came without it)
    if (typeof e.target_seq === "number" && e.target_seq <= this.low) {
      if (!this.heldReactions.has(e.target_seq)) this.heldReactions.set(e.target_seq, []);
      this.heldReactions.get(e.target_seq).push({ chip, line });
    }
    return line;
  }

  /** Moves the held reactions whose messages are shown now onto them,
   * taking their own lines out. */
  attachHeldReactions() {
    for (const [seq, held] of this.heldReactions) {
      const box = this.reactionsOf(seq);
      if (!box) continue;
      for (const { chip, line } of held) {
        box.append(chip);
        line.remove();
      }
      this.heldReactions.delete(seq);
    }
  }

  notice(e) {
    const item = noticeItem(
      e,
      (turn) => this.retried(turn),
      (turn, gone) => this.retryable.set(turn, gone),
    );
    // its turn's end and the later ones may be held already (a page of
    // earlier entries comes after the newer ones)
    if (e.retry_turn) this.settleRetry(str(e.retry_turn), this.turnEnds.values());
    return item;
  }

  /**
   * The Retry of a notice whose turn the host would no longer run says so
   * as the turn ends that takes its place, and stops being a button: its
   * inputs were taken by a later turn that ended (a retry), or a later
   * turn that had them in its context completed (the host refuses the
   * retry, which would answer them again without what came after). It
   * was offered again after a reload, and every click failed (QA).
   */
  settleRetry(turn, ends) {
    const gone = this.retryable.get(turn);
    const ended = this.turnEnds.get(turn);
    if (!gone || !ended || !ended.inputs.length) return;
    const taken = ended.inputs.every((s) => (this.answeredAt.get(s) || 0) > ended.seq);
    const first = Math.min(...ended.inputs);
    const answers = (t) => t.seq > ended.seq && t.status === "completed" && t.inputs.some((s) => s > first && !ended.inputs.includes(s));
    if (taken || [...ends].some(answers)) {
      this.retryable.delete(turn);
      gone(taken ? "Retried" : "Answered by a later turn");
    }
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
   * whose own entries are in order but older than the ones held). An
   * `approved` entry, whenever it arrives, says that the approval was
   * decided: a later `expired` one then reads "approved, not used".
   */
  approval(e) {
    const known = this.approvals.get(e.approval) || { seq: -1, entry: null, box: h("div"), asking: false, checked: false, decided: null };
    const fresh = !known.entry;
    let paint = false;
    if (e.status === "approved" && !known.decided) {
      known.decided = { decided_at: e.created_at };
      paint = known.entry && known.entry.status === "expired";
    }
    if (e.seq > known.seq) {
      known.seq = e.seq;
      known.entry = e;
      known.status = e.status;
      known.checked = false;
      paint = true;
    }
    if (paint) this.paintApproval(known, this.decidedEntry(known));
    if (!fresh) return null;
    this.approvals.set(e.approval, known);
    return h("li", { class: "entry approval" }, known.box);
  }

  /**
   * Draws an approval's card with its exact action, as the approvals page
   * does. An entry does not carry the action: while the approval waits it
   * is asked of the host (once), and until it is shown the card has no
   * Approve/Deny, only a link to the approvals page.
   */
  paintApproval(known, a) {
    let shown = a.action === undefined && known.action !== undefined ? { ...a, action: known.action } : a;
    // nor whether it can run or be decided: the record asked says
    // (`cannot_run`, `decidable`: QA, the card offered Deny on one the
    // host refuses to decide)
    if (shown.cannot_run === undefined && known.cannotRun !== undefined) shown = { ...shown, cannot_run: known.cannotRun };
    if (shown.decidable === undefined && known.decidable !== undefined) shown = { ...shown, decidable: known.decidable };
    known.shown = shown;
    fillApproval(known.box, shown, { details: true });
    if (shown.action !== undefined || shown.status !== "pending" || known.askedAction) return;
    known.askedAction = true;
    call("approval", { id: shown.approval || shown.id })
      .then(({ data }) => {
        if (data.approval.action === undefined) return;
        known.action = data.approval.action;
        known.cannotRun = data.approval.cannot_run ?? null;
        known.decidable = data.approval.decidable;
        if (known.shown.action === undefined) this.paintApproval(known, known.shown);
      })
      .catch(() => {});
  }

  /** The newest entry of an approval, with who decided it when known
   * (an entry does not say; an approval record does). */
  decidedEntry(known) {
    const e = known.entry;
    return e.status === "expired" && e.expired_by === "ttl" && known.decided ? { ...e, ...known.decided } : e;
  }

  /**
   * Using an approval appends no entry, so the cards of approved actions
   * ask the host whether the action ran (consumed_at) and say so; and an
   * entry does not say who decided, so the card of one that expired by
   * time asks the host (once) whether it had been approved.
   */
  checkApproved() {
    for (const [id, known] of this.approvals) {
      const unsure = known.status === "approved" || (known.status === "expired" && known.entry.expired_by === "ttl" && !known.checked);
      if (!unsure || known.asking) continue;
      known.asking = true;
      const seq = known.seq;
      call("approval", { id })
        .then(({ data }) => {
          const a = data.approval;
          if (known.seq !== seq) return;
          if (a.decided_at) known.decided = { decided_at: a.decided_at, decided_by: a.decided_by };
          known.cannotRun = a.cannot_run ?? null;
          if (a.status === "expired") {
            known.checked = true;
            known.status = "expired";
            if (a.decided_at) this.paintApproval(known, a);
            return;
          }
          if (!(a.consumed_at || a.status !== "approved")) {
            // approved, unused: said once if its action cannot run
            if (known.cannotRun && known.shown.cannot_run !== known.cannotRun) this.paintApproval(known, a);
            return;
          }
          known.status = a.consumed_at ? "ran" : a.status;
          this.paintApproval(known, a);
        })
        .catch((e) => {
          if (e.status === 404) known.status = "unknown";
        })
        .finally(() => {
          known.asking = false;
        });
    }
  }

  /** The person's secret names (asked once), for secret_request cards. */
  secretNames() {
    this.secrets ??= call("secrets")
      .then(({ data }) => new Set((data.secrets || []).map((s) => s.name)))
      .catch(() => new Set());
    return this.secrets;
  }
}
