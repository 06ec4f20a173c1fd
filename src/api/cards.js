// Cards in a transcript: an approval (with Approve/Deny while it waits),
// and the cards bots send with a message (title, text, fields, buttons, or
// a secret_request's password field).
//
// A card's buttons never send anything the person has not seen: a button
// whose reply is its own one-line label sends that label; any other reply
// goes into the message box, for the person to read, change or send. Such
// a reply is also written out in the card under its buttons ("Yes" puts
// in your message box: …), whole and with hidden characters escaped, so
// what a button proposes is seen before the click, however long.
// Links open only http(s) addresses; another `url` (javascript:, data:…)
// is shown as text and does nothing.
//
// A card the person answered reads answered (its buttons disabled, the
// chosen one marked) wherever its conversation is shown: the transcript
// says so, not the tab that clicked ({@link CardAnswers} has the rule).

import { call } from "./api.js";
import { clock, draftText, h, messageText, relative, safeUrl, toast } from "./dom.js";
import { refreshApprovals } from "./state.js";

const str = (v) => (typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : "");
let uid = 0;
const nextId = (p) => `${p}-${++uid}`;
/** Characters that are not shown as written: controls, bidi embeddings,
 * overrides and isolates. */
const UNSEEN = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;
/** What an approval card writes as an escape: controls but newline and
 * tab (C0, DEL, C1) and format characters (Unicode Cf: the bidi
 * embeddings, overrides, isolates and marks U+202A–U+202E, U+2066–U+2069,
 * U+200E/F, U+061C; zero-width and invisible ones). Shown as written, a
 * U+202E in a command makes it read as something else (Trojan Source), and
 * the person approves what they read. */
const HIDDEN = /(?![\n\t])[\p{Cc}\p{Cf}]/gu;
/** {@link HIDDEN} and the line breaks, for text kept on one line. */
const HIDDEN_OR_BREAK = /(?!\t)[\p{Cc}\p{Cf}\u2028\u2029]/gu;

/**
 * `text` as an approval card shows it: each character of {@link HIDDEN}
 * written `\u{202e}`, as the CLI writes it; a CR LF is a line end.
 * `oneLine`: line breaks are escaped too (a summary, a reason: as the CLI
 * lists them).
 */
export function escapeHidden(text, { oneLine = false } = {}) {
  const s = String(text).replace(/\r\n/g, "\n");
  return s.replace(oneLine ? HIDDEN_OR_BREAK : HIDDEN, (c) => `\\u{${c.codePointAt(0).toString(16)}}`);
}

/**
 * An approval's exact action as indented JSON, with what JSON.stringify
 * leaves as it is (DEL, C1 controls, format characters) escaped as JSON
 * escapes (`\u202e`, as `botfleet approvals --json` prints it): the same
 * value, every character visible.
 */
function actionJson(action) {
  // JSON.stringify escapes the C0 controls of strings: a newline left is
  // the indentation's
  return JSON.stringify(action, null, 2).replace(/(?!\n)[\p{Cc}\p{Cf}]/gu, (c) => {
    const units = [];
    for (let i = 0; i < c.length; i++) units.push(`\\u${c.charCodeAt(i).toString(16).padStart(4, "0")}`);
    return units.join("");
  });
}

/** Human words for an approval's status. */
function approvalStatusText(a, now = Date.now()) {
  switch (a.status) {
    case "pending":
      if (now >= a.expires_at) return "Expired: nobody decided in time";
      // no decision is taken (`cannot_run`, shown below, says why)
      if (a.decidable === false) return `Cannot be decided · expires ${relative(a.expires_at, now)}`;
      return `Waiting for your decision · expires ${relative(a.expires_at, now)}`;
    case "approved": {
      if (a.consumed_at) return "Approved · the action ran";
      // its bot left the config or lost the tool (`cannot_run`, shown below)
      if (cannotRun(a)) return "Approved · cannot run as things stand";
      // the gate runs it once, when the bot makes this exact call again in
      // this conversation, until the approval's window to use it ends
      // (docs/security.md, "Approvals"): it does not run by itself
      if (typeof a.expires_at !== "number") return "Approved · runs once if the bot makes this exact call again";
      if (now >= a.expires_at) return "Approved · not used before it expired";
      return `Approved · runs once if the bot makes this exact call again before ${clock(a.expires_at)}`;
    }
    case "denied":
      return "Denied";
    case "expired":
      if (a.expired_by === "user_message") return "Expired: a newer message came first";
      if (a.expired_by === "subagent_stopped") return "Expired: its subagent was stopped, so its action will not run";
      if (a.expired_by === "owner_changed") return "Expired: its subagent's task came from the bot's former owner, so its action will not run";
      // approved, then its window to be used ran out
      if (a.decided_at || a.decided_by) {
        const by = a.decided_by ? ` by ${str(a.decided_by)}` : "";
        const at = typeof a.decided_at === "number" ? ` at ${clock(a.decided_at)}` : "";
        return `Approved${by}${at} · not used before it expired`;
      }
      return "Expired: nobody decided in time";
    default:
      return str(a.status);
  }
}

/** Why approval `a`'s action cannot run as things stand (the host's
 * `cannot_run`: its bot left the fleet's config, or lost the tool, with
 * what to do), or null: said only while it waits or is approved unused. */
function cannotRun(a) {
  if (a.status !== "pending" && !(a.status === "approved" && !a.consumed_at)) return null;
  return typeof a.cannot_run === "string" && a.cannot_run ? a.cannot_run : null;
}

/**
 * Fills `box` with an approval: tool, summary, reason, status and, while
 * pending, Approve/Deny. One whose action cannot run (`cannot_run`) says
 * why and what to do, and its Approve is disabled, described by that
 * reason: approving would run nothing (once the bot or tool is back, the
 * host no longer says it and Approve is offered); Deny stays. `a` is an
 * approval record or an `approval` entry (whose id is in `approval`). `onDecided(record)` gets the host's answer.
 * `details`: the exact action is shown (under "Exact action"), and a
 * pending `a` without it gets no buttons, only a link to the approvals
 * page, which shows it: nobody decides on a summary alone.
 */
export function fillApproval(box, a, { onDecided = refreshApprovals, details = false, focus = false } = {}) {
  const id = a.approval || a.id;
  const pending = a.status === "pending" && Date.now() < a.expires_at;
  const gone = cannotRun(a);
  const goneId = nextId("cannot-run");
  // drawn again (decided here, or its newer state arrived) while the
  // focus is in it: the focus stays in the card
  const was = box.contains(document.activeElement) ? document.activeElement : null;
  const status = h(
    "p",
    { class: "status", tabindex: "-1", ...(a.status === "pending" ? { dataset: { expires: String(a.expires_at) } } : {}) },
    h("span", { class: "status-pill" }, approvalStatusText(a)),
  );
  box.className = `card approval-card ${a.status}`;
  box.replaceChildren(h("div", { class: "card-body" },
    h("p", { class: "card-title" }, pending && a.decidable !== false ? "Approve this action? " : "Action ", h("code", null, escapeHidden(str(a.tool), { oneLine: true }))),
    h("p", { class: "text" }, escapeHidden(str(a.summary), { oneLine: true })),
    a.reason ? h("p", { class: "hint" }, `Why it asks: ${escapeHidden(str(a.reason), { oneLine: true })}`) : null,
    details && a.action !== undefined
      ? h("details", null, h("summary", null, "Exact action"), h("pre", null, actionJson(a.action)))
      : null,
    status,
    gone ? h("p", { class: "cannot-run", id: goneId }, `Cannot run: ${escapeHidden(gone, { oneLine: true })}`) : null,
  ));
  // the button decided with is gone: the focus goes to what the decision
  // did, not to the page's body (where a keyboard or screen reader user
  // would start over from the top)
  if (focus || was) status.focus();
  if (!pending) return;
  // asked of a person who no longer owns the bot: a decision would be
  // refused (409), so none is offered; `cannot_run` above says why
  if (a.decidable === false) return;
  if (details && a.action === undefined) {
    box.append(h("p", { class: "hint see-action" }, h("a", { href: "#/approvals" }, "See the exact action on the approvals page"), " to decide."));
    return;
  }
  const decide = async (decision, button) => {
    // asked before the buttons are disabled, which moves the focus away
    const focused = box.contains(document.activeElement);
    for (const b of box.querySelectorAll("button")) b.disabled = true;
    button.textContent = decision === "approve" ? "Approving…" : "Denying…";
    try {
      const { data } = await call("decide", { id }, { body: { decision } });
      fillApproval(box, data.approval, { onDecided, details, focus: focused });
      onDecided(data.approval);
    } catch (e) {
      toast(e.message, { error: true });
      fillApproval(box, a, { onDecided, details });
      // drawn again with its buttons: back on the one that was pressed
      // (disabled while asked, it lost the focus)
      if (focused) box.querySelector(decision === "approve" ? "button.primary" : "button.danger")?.focus();
    }
  };
  const approve = gone
    ? h("button", { type: "button", class: "primary", disabled: true, "aria-describedby": goneId, title: "It cannot run: see why above" }, "Approve")
    : h("button", { type: "button", class: "primary" }, "Approve");
  const deny = h("button", { type: "button", class: "danger" }, "Deny");
  approve.addEventListener("click", () => decide("approve", approve));
  deny.addEventListener("click", () => decide("deny", deny));
  box.append(h("div", { class: "actions" }, approve, deny));
  // on a button before: on the same button of the new drawing
  if (was && was.matches("button.primary")) approve.focus();
  if (was && was.matches("button.danger")) deny.focus();
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

/**
 * A card a bot sent with a delivery. `ctx`: send(text) posts as the
 * person, draft(text) puts text in their message box (both absent when
 * read-only), secretNames() → Set of the person's secret names.
 */
export function botCard(card, botName, ctx) {
  if (!card || typeof card !== "object" || Array.isArray(card)) return null;
  if (card.type === "secret_request" && typeof card.name === "string") return secretCard(card, botName, ctx);
  const box = h("div", { class: "card" });
  if (str(card.title)) box.append(h("p", { class: "card-title" }, str(card.title)));
  const body = str(card.text ?? card.description ?? card.body);
  if (body) box.append(h("p", { class: "text" }, body));
  const fields = fieldsOf(card.fields);
  if (fields.length) box.append(h("dl", null, fields.map(([k, v]) => [h("dt", null, k), h("dd", null, v)])));
  const buttons = Array.isArray(card.buttons) ? card.buttons : [];
  if (buttons.length) {
    const row = h("div", { class: "actions" });
    const drafts = [];
    for (const b of buttons) row.append(cardButton(b, row, ctx, drafts));
    box.append(row);
    for (const [label, reply] of drafts) {
      box.append(h("div", { class: "draft-preview" }, h("p", { class: "hint" }, h("q", null, label), " puts in your message box:"), h("p", { class: "text" }, escapeHidden(reply))));
    }
  }
  if (!box.childElementCount) box.append(h("pre", null, JSON.stringify(card, null, 2)));
  return box;
}

/** A card's button; a reply that goes into the message box is added to
 * `drafts` as [label, reply], for the card to show. */
function cardButton(b, row, { send, draft }, drafts) {
  const spec = typeof b === "string" ? { label: b } : b && typeof b === "object" ? b : { label: str(b) };
  const label = str(spec.label ?? spec.text ?? spec.title) || "Choose";
  if (spec.url !== undefined && spec.url !== null && spec.url !== "") {
    const url = safeUrl(spec.url);
    if (url) return h("a", { class: "button", href: url, target: "_blank", rel: "noopener noreferrer", title: url }, label);
    // javascript:, data: and the like: shown, never opened, never sent
    const raw = typeof spec.url === "string" ? spec.url : JSON.stringify(spec.url);
    return h("span", { class: "refused-link", title: "Not a web address: this page does not open it" }, `${label}: `, h("code", null, raw));
  }
  const reply = str(spec.value ?? spec.reply ?? spec.message) || label;
  // the person sees all that a click would send: the label is the reply,
  // on one line, without characters that display otherwise
  if (reply === label && !UNSEEN.test(reply)) {
    const button = h("button", { type: "button", disabled: !send, dataset: { reply } }, label);
    button.addEventListener("click", async () => {
      // at once, before the answer is in the transcript: no second click
      markAnswered(row, button);
      await send(reply);
    });
    return button;
  }
  // another reply: into the message box, to read before sending
  drafts.push([label, reply]);
  const button = h("button", { type: "button", class: "draft", disabled: !draft, dataset: { reply }, title: `Puts this in your message box: ${escapeHidden(reply, { oneLine: true })}` }, label);
  button.addEventListener("click", () => draft(reply));
  return button;
}

/**
 * The buttons of bot card `box` by the texts of a person's message that
 * choose them, exactly: the reply a button sends, or the one it puts in
 * the message box, sent as the box shows it ({@link draftText}).
 */
function repliesOf(box) {
  const replies = new Map();
  for (const b of box.querySelectorAll(".actions button[data-reply]")) {
    const reply = b.dataset.reply;
    if (!replies.has(reply)) replies.set(reply, b);
    const drafted = messageText(draftText(reply));
    if (b.classList.contains("draft") && !replies.has(drafted)) replies.set(drafted, b);
  }
  return replies;
}

/**
 * Which bot cards of a conversation the person answered, read from its
 * transcript: a click in another tab, or before a reload, leaves only its
 * message there. The rule: a message of the viewer whose text is exactly
 * the reply of one of a card's buttons ({@link repliesOf}) answers the
 * nearest card before it that offers that reply and that no earlier
 * message answered; that card's buttons are disabled and the chosen one
 * marked, for good. Anything else the person wrote after a card leaves it
 * open (they may have asked what it does first, or answered "Yes, but…"
 * in their own words, which the bot may take otherwise); so does another
 * person's message in a room: the buttons answer as the viewer. Two cards
 * offering "Yes" take one "Yes" each, the newer first.
 */
export class CardAnswers {
  constructor() {
    // {seq, box, replies, chosen} of each card with buttons, and {seq,
    // text} of each of the viewer's messages, as the conversation shows
    // them
    this.cards = [];
    this.said = [];
  }

  /** Card `box` (a delivery's, at `seq`), when it has buttons to answer. */
  card(seq, box) {
    const replies = box ? repliesOf(box) : new Map();
    if (replies.size) this.cards.push({ seq, box, replies, chosen: null });
  }

  /** A message of the viewer's, at `seq`. */
  message(seq, text) {
    this.said.push({ seq, text });
  }

  /** Marks the cards answered by the messages held (whichever order
   * they were shown in: "Show earlier" brings older ones last). */
  settle() {
    if (!this.cards.length) return;
    const cards = [...this.cards].sort((a, b) => b.seq - a.seq);
    const taken = new Set();
    for (const m of [...this.said].sort((a, b) => a.seq - b.seq)) {
      for (const c of cards) {
        if (c.seq > m.seq || taken.has(c)) continue;
        const chosen = c.replies.get(m.text);
        if (!chosen) continue;
        taken.add(c);
        if (c.chosen !== chosen) {
          c.chosen = chosen;
          markAnswered(c.box, chosen);
        }
        break;
      }
    }
  }
}

/** Shows the card holding `root` answered with button `chosen`: every
 * button disabled, the chosen one marked (pressed). */
function markAnswered(root, chosen) {
  for (const b of root.querySelectorAll(".actions button")) {
    b.disabled = true;
    b.classList.toggle("primary", b === chosen);
    if (b === chosen) b.setAttribute("aria-pressed", "true");
    else b.removeAttribute("aria-pressed");
  }
}

/**
 * {"type": "secret_request", "name": "GITHUB_TOKEN", "title"?,
 * "description"?}: a password field that PUTs /v1/secrets/{name}, so the
 * value goes to the host's secret store and never through the bot.
 */
function secretCard(card, botName, { send, secretNames }) {
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
  secretNames().then((names) => {
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
      if (send) {
        note.append(" ", h("button", { type: "button", class: "link", onclick: (ev2) => { ev2.target.remove(); send(`I saved the secret ${name}.`); } }, `Tell ${botName}`));
      }
    } catch (e) {
      save.disabled = false;
      toast(e.message, { error: true });
    }
  });
  return box;
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
