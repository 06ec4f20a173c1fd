// Writing to a bot or a room: the message box, and a conversation's view
// of the page's outbox (outbox.js): a bubble per message being sent.

import { auth } from "./api.js";
import { draftText, fill, h, messageText, quoted, toast } from "./dom.js";
import { convOf, outbox, tokenTag } from "./outbox.js";
import { loadBotsUntilStarted, store } from "./state.js";

let composerIds = 0;

/**
 * Unsent text of each conversation's message box, by its draft key. Kept
 * in this tab's sessionStorage, so a reload of the tab finds it again
 * (QA: a reload lost it), tagged with the token it was typed under
 * (outbox.js's tokenTag): a tab that reloads signed in as someone else
 * (another tab signed in meanwhile) shows them none of it. Dropped at
 * sign-out.
 */
const DRAFTS_KEY = "botfleet.drafts";

function loadDrafts() {
  try {
    const saved = JSON.parse(sessionStorage.getItem(DRAFTS_KEY) || "null");
    if (saved && saved.who === tokenTag(auth.token) && saved.drafts) {
      return new Map(Object.entries(saved.drafts));
    }
  } catch {
    // unreadable or not storable here: drafts stay in memory only
  }
  return new Map();
}

const drafts = loadDrafts();

function saveDrafts() {
  try {
    if (drafts.size === 0) sessionStorage.removeItem(DRAFTS_KEY);
    else sessionStorage.setItem(DRAFTS_KEY, JSON.stringify({ who: tokenTag(auth.token), drafts: Object.fromEntries(drafts) }));
  } catch {
    // storage full or refused: the draft is still kept in this page
  }
}

/** What the message boxes hold unsent, quoted, for the sign-in page when
 * the host refused the token ("" when they hold nothing): the drafts go
 * at sign-out, and text typed for a conversation went without a word
 * (QA). */
export function unsentDrafts() {
  const held = [...drafts.values()].filter((t) => t.trim());
  if (!held.length) return "";
  const what = held.length === 1 ? "Text you typed and did not send" : `${held.length} texts you typed and did not send`;
  return `${what} (copy ${held.length === 1 ? "it" : "them"} before you sign in): ${held.map(quoted).join(" ")}`;
}

/** How many message boxes hold text typed and not sent. */
export function draftsTyped() {
  return [...drafts.values()].filter((t) => t.trim()).length;
}

/** Forgets every unsent text (at sign-out: the next user sees none). */
export function clearDrafts() {
  drafts.clear();
  saveDrafts();
}

/**
 * A message box: Enter sends (not the one confirming an input method's
 * candidate), Shift+Enter is a new line. `draft(text)`
 * puts text in it (after what is there) for the person to read, change
 * and send: what a bot's card button proposes. A draft is shown whole:
 * its runs of blank lines become one and trailing spaces go (30 line
 * breaks pushed an instruction below the box's first line, and Enter sent
 * it unseen), and the box grows to hold all of it (up to most of the
 * window, where it scrolls).
 */
export function composer({ label, placeholder: hint, onSend, draftKey = "" }) {
  const id = `composer-${++composerIds}`;
  const area = h("textarea", { id, rows: "1", placeholder: hint, enterkeyhint: "send", "aria-describedby": `${id}-help` });
  // what was typed and not sent stays with its conversation while the
  // page moves between views (QA: it was lost on going to Approvals and
  // back) and when the tab reloads; dropped at sign-out
  const keep = () => {
    if (!draftKey) return;
    if (area.value.trim()) drafts.set(draftKey, area.value);
    else drafts.delete(draftKey);
    saveDrafts();
  };
  if (draftKey && drafts.has(draftKey)) {
    area.value = drafts.get(draftKey);
    setTimeout(() => grow(), 0);
  }
  area.addEventListener("input", keep);
  const form = h(
    "form",
    { class: "composer" },
    h("label", { for: id, class: "sr-only" }, label),
    h("span", { id: `${id}-help`, class: "sr-only" }, "Enter sends; Shift+Enter starts a new line."),
    area,
    h("button", { type: "submit", class: "primary" }, "Send"),
  );
  // typed text grows the box up to 192px; a draft up to 60% of the window
  let tallest = 192;
  const grow = () => {
    area.style.height = "auto";
    area.style.maxHeight = `${tallest}px`;
    area.style.height = `${Math.min(area.scrollHeight + 2, tallest)}px`;
  };
  area.addEventListener("input", grow);
  // the Enter that confirms an input method's candidate (pinyin, kana)
  // does not send: Chrome and Firefox mark its keydown isComposing;
  // Safari ends the composition first, so its keydown has isComposing
  // false and keyCode 229 ("being processed by an IME"). A keydown in the
  // task of compositionend (`composing` is cleared on the next one) is
  // taken as that Enter too.
  let composing = false;
  area.addEventListener("compositionstart", () => {
    composing = true;
  });
  area.addEventListener("compositionend", () => {
    setTimeout(() => {
      composing = false;
    }, 0);
  });
  area.addEventListener("keydown", (ev) => {
    const ime = ev.isComposing || ev.keyCode === 229 || composing;
    if (ev.key === "Enter" && !ev.shiftKey && !ime) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const text = messageText(area.value);
    if (!text) {
      // Enter on a box of spaces and line breaks did nothing and said
      // nothing (QA)
      if (area.value) toast("Nothing to send: the message is only spaces and line breaks.");
      return;
    }
    area.value = "";
    keep();
    tallest = 192;
    grow();
    onSend(text);
    area.focus();
  });
  const draft = (text) => {
    const kept = area.value.replace(/\s+$/, "");
    const shown = draftText(text);
    area.value = kept ? `${kept}\n${shown}` : shown;
    keep();
    tallest = Math.max(192, Math.round(window.innerHeight * 0.6));
    grow();
    area.focus();
    area.setSelectionRange(area.value.length, area.value.length);
  };
  // a message the host refused, back in the box as the person wrote it
  // (after what is there) to change and send again
  const edit = (text) => {
    const kept = area.value.replace(/\s+$/, "");
    area.value = kept ? `${kept}\n${text}` : String(text);
    keep();
    tallest = Math.max(192, Math.round(window.innerHeight * 0.6));
    grow();
    area.focus();
    area.setSelectionRange(area.value.length, area.value.length);
    return true;
  };
  // the text typed and not sent, taken out of the box and its kept
  // draft: the box is going (its room closed), the text is shown to copy
  const take = () => {
    const text = area.value.trim() ? area.value : "";
    area.value = "";
    keep();
    return text;
  };
  return { el: form, focus: () => area.focus(), draft, edit, take };
}

/**
 * An outgoing message's bubble, shown until its entry arrives. It paints
 * the states of its outbox message `p`: sending, sent (the host stored
 * it: the bubble goes when the entry is shown), unconfirmed (no answer:
 * the host may hold it; sent again by itself with the same key, so it
 * cannot arrive twice, and never offered to be discarded) and failed (the
 * host refused it: Retry, and Discard and Edit unless an earlier try may
 * have reached the host; Edit puts its text back in the message box, to
 * change what the host refused, a text too long, say, rather than send
 * it again as it is or lose it).
 */
class Outgoing {
  constructor(timeline, p) {
    this.timeline = timeline;
    this.p = p;
    this.text = messageText(p.text);
    this.state = "sending";
    this.claimed = false;
    this.status = h("span", { tabindex: "-1" }, "Sending…");
    this.actions = h("div", { class: "outbox-actions" });
    this.li = h("li", { class: "entry mine sending" }, h("div", { class: "bubble" }, h("div", { class: "meta" }, h("span", { class: "who" }, "You"), this.status), h("div", { class: "text" }, p.text)), this.actions);
    timeline.addOutgoing(this.li);
    // an entry of the page's user with this text and a seq above `after`
    // may be this message (an entry does not carry its Idempotency-Key)
    this.after = Math.max(timeline.last, timeline.held);
  }

  /** Shows the state of its message. */
  follow() {
    const p = this.p;
    switch (p.state) {
      case "sending":
        return this.sending();
      case "sent":
        return this.sent(p.entryId);
      case "unconfirmed":
        return this.unconfirmed(p.message);
      case "failed":
        return this.failed(p.message, !p.reached, p.refusal);
    }
  }

  paint(state, cls, label, ...actions) {
    const focused = this.li.contains(document.activeElement);
    this.state = state;
    this.li.className = `entry mine ${cls}`;
    this.status.textContent = label;
    fill(this.actions, ...actions);
    // the button pressed (Retry, Ask again now) is gone: the focus goes to
    // the message's new state, not to the page's body
    if (focused && !this.li.contains(document.activeElement)) this.status.focus();
  }

  sending() {
    if (this.state !== "unconfirmed") this.paint("sending", "sending", "Sending…");
  }

  sent(entryId) {
    this.timeline.unconfirmed.delete(this);
    this.paint("sent", "", "Sent");
    this.timeline.confirmed(entryId, this.li);
  }

  unconfirmed(message) {
    this.timeline.unconfirmed.add(this);
    // an entry taken for this message shows it: asked again unseen
    if (!this.claimed) this.show();
    this.paint(
      "unconfirmed",
      "sending unconfirmed",
      "Not confirmed yet",
      h(
        "span",
        { class: "hint" },
        // a 429 stored nothing (the host's message says so): "may already
        // have it" contradicted it (QA, 2026-12-07)
        this.p.limited
          ? `${message} The page sends it again by itself when the host allows, with the same key, before anything you write after it.`
          : `${message} The host may already have this message: the page asks again with the same key until it answers, so it cannot arrive twice, also while you are elsewhere on the page.`,
      ),
      h("button", { type: "button", class: "small", onclick: () => this.askNow() }, "Ask again now"),
    );
  }

  askNow() {
    const wait = outbox.askNow(this.p);
    if (wait > 0) {
      const s = Math.ceil(wait / 1000);
      toast(`The host asked to wait ${s} s more before this message is sent again; the page sends it then by itself.`);
    }
  }

  failed(message, discard, refusal = 0) {
    this.timeline.unconfirmed.delete(this);
    this.show();
    // refused for what it is (400: too long, nothing in it): sent again as
    // it is, it is refused again; Edit and Discard are what help (QA:
    // Retry was offered, and failed the same way every time)
    const again = !(discard && (refusal === 400 || refusal === 413 || refusal === 422));
    this.paint(
      "failed",
      "unsent",
      discard ? "Not sent" : "Not confirmed",
      h("span", { class: "error-text" }, message),
      again ? h("button", { type: "button", class: "small", onclick: () => outbox.retry(this.p) }, "Retry") : null,
      discard && this.timeline.opts.edit ? h("button", { type: "button", class: "small", onclick: () => this.edit() }, "Edit") : null,
      discard ? h("button", { type: "button", class: "small link", onclick: () => outbox.discard(this.p) }, "Discard") : null,
    );
  }

  /** Puts the refused message back in the message box, and drops it
   * (kept when there is no box to put it in: a room closed meanwhile). */
  edit() {
    if (this.timeline.opts.edit(this.p.text)) outbox.discard(this.p);
  }

  /** Takes the bubble away (the message left the outbox unsent). */
  drop() {
    const focused = this.li.contains(document.activeElement);
    this.timeline.unconfirmed.delete(this);
    this.li.remove();
    this.timeline.refresh();
    // Discard took the bubble and its buttons: the conversation keeps the
    // focus
    if (focused) this.timeline.el.focus();
  }

  /** Puts the bubble back (an entry taken for this message was not it). */
  show() {
    this.claimed = false;
    if (!this.li.isConnected) this.timeline.addOutgoing(this.li);
  }

  /**
   * Whether entry `e`, new in the timeline, may be this unconfirmed
   * message: then its bubble goes (the entry shows it) and the host is
   * asked which entry the key stored. Should the host answer otherwise,
   * `sent` or `failed` shows the bubble's state again.
   */
  arrived(e) {
    const mine = e.kind === "user_message" && e.author === this.timeline.opts.me && e.text === this.text && e.seq > this.after;
    if (this.state !== "unconfirmed" || !mine || this.claimed) return false;
    this.claimed = true;
    this.li.remove();
    this.timeline.refresh();
    if (!this.p.busy) outbox.attempt(this.p);
    return true;
  }

  /** The host answers again: ask now rather than at the next interval. */
  reachable() {
    outbox.nudge(this.p);
  }
}

/**
 * Shows in `timeline` the page outbox's messages to `to` ({kind: "bot" |
 * "room", id}): those sent from an earlier visit of the view (or kept
 * from before a reload) and the new ones. Hooks: onAccepted(data), the
 * host stored a message; refused(p) → Promise<boolean>, the host refused
 * one with a 409, or with a 404 (a room the sender was taken out of: its
 * Retry could never work, and Edit put the text into a box no longer on
 * the page, QA): true when the view says so itself (the bubble and the
 * message go). Returns {send(text), close()}: close() stops showing, not
 * sending.
 */
export function outboxView(timeline, to, { onAccepted = () => {}, refused = async () => false } = {}) {
  const bubbles = new Map();
  const changed = async (p, what) => {
    let out = bubbles.get(p);
    if (what === "removed") {
      if (out) out.drop();
      bubbles.delete(p);
      return;
    }
    if (!out) {
      out = new Outgoing(timeline, p);
      bubbles.set(p, out);
    }
    if (p.state === "failed" && ((p.renew && p.answer) || p.refusal === 404) && (await refused(p))) return outbox.discard(p);
    out.follow();
    if (p.state !== "sent") return;
    bubbles.delete(p);
    onAccepted(p.answer);
    // the bots' states follow the turn this message starts
    timeline
      .sync()
      .catch(() => {})
      .then(() => loadBotsUntilStarted(10, () => timeline.awaitsTurn() && !store.bots.some((b) => b.running_turn || b.paused_until > Date.now())));
  };
  const stop = outbox.watch(convOf(to), changed);
  for (const p of outbox.of(convOf(to))) changed(p, "added");
  return {
    send: (text) => outbox.send(to, text),
    close() {
      stop();
      bubbles.clear();
    },
  };
}
