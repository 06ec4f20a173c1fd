// Writing to a bot or a room: the message box, and delivering a message
// with its idempotency key.

import { auth, uuidv7 } from "./api.js";
import { firstChars, h } from "./dom.js";
import { loadBotsUntilStarted, store } from "./state.js";

let composerIds = 0;

/**
 * A message box: Enter sends, Shift+Enter is a new line. `draft(text)`
 * puts text in it (after what is there) for the person to read, change
 * and send: what a bot's card button proposes.
 */
export function composer({ label, placeholder: hint, onSend }) {
  const id = `composer-${++composerIds}`;
  const area = h("textarea", { id, rows: "1", placeholder: hint, enterkeyhint: "send", "aria-describedby": `${id}-help` });
  const form = h(
    "form",
    { class: "composer" },
    h("label", { for: id, class: "sr-only" }, label),
    h("span", { id: `${id}-help`, class: "sr-only" }, "Enter sends; Shift+Enter starts a new line."),
    area,
    h("button", { type: "submit", class: "primary" }, "Send"),
  );
  const grow = () => {
    area.style.height = "auto";
    area.style.height = `${Math.min(area.scrollHeight + 2, 192)}px`;
  };
  area.addEventListener("input", grow);
  area.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const text = area.value.trim();
    if (!text) return;
    area.value = "";
    grow();
    onSend(text);
    area.focus();
  });
  const draft = (text) => {
    const kept = area.value.replace(/\s+$/, "");
    area.value = kept ? `${kept}\n${text}` : text;
    grow();
    area.focus();
    area.setSelectionRange(area.value.length, area.value.length);
  };
  return { el: form, focus: () => area.focus(), draft };
}

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
 * An outgoing message's bubble, shown until its entry arrives.
 * Its states: sending, sent (the host stored it: the bubble goes when the
 * entry is shown), unconfirmed (no answer: the host may hold it; sent
 * again by itself with the same key, so it cannot arrive twice, and never
 * offered to be discarded) and failed (the host refused it: Retry, and
 * Discard unless an earlier try may have reached the host).
 */
class Outgoing {
  constructor(timeline, text) {
    this.timeline = timeline;
    this.text = text.trim();
    this.state = "sending";
    this.claimed = false;
    this.status = h("span", null, "Sending…");
    this.actions = h("div", { class: "outbox-actions" });
    this.li = h("li", { class: "entry mine sending" }, h("div", { class: "bubble" }, h("div", { class: "meta" }, h("span", { class: "who" }, "You"), this.status), h("div", { class: "text" }, text)), this.actions);
    timeline.addOutgoing(this.li);
    // an entry of the page's user with this text and a seq above `after`
    // may be this message (an entry does not carry its Idempotency-Key)
    this.after = Math.max(timeline.last, timeline.held);
  }

  paint(state, cls, label, ...actions) {
    this.state = state;
    this.li.className = `entry mine ${cls}`;
    this.status.textContent = label;
    this.actions.replaceChildren(...actions);
  }

  sending() {
    // an unconfirmed bubble keeps its words while it is asked again
    if (this.state !== "unconfirmed") this.paint("sending", "sending", "Sending…");
  }

  sent(entryId) {
    this.timeline.unconfirmed.delete(this);
    this.paint("sent", "", "Sent");
    this.timeline.confirmed(entryId, this.li);
  }

  unconfirmed(message, now) {
    this.timeline.unconfirmed.add(this);
    // an entry taken for this message shows it: asked again unseen
    if (!this.claimed) this.show();
    this.paint(
      "unconfirmed",
      "sending unconfirmed",
      "Not confirmed yet",
      h("span", { class: "hint" }, `${message} The host may already have this message: the page asks again with the same key until it answers, so it cannot arrive twice.`),
      h("button", { type: "button", class: "small", onclick: now }, "Ask again now"),
    );
  }

  failed(message, retry, discard) {
    this.timeline.unconfirmed.delete(this);
    this.show();
    this.paint(
      "failed",
      "unsent",
      discard ? "Not sent" : "Not confirmed",
      h("span", { class: "error-text" }, message),
      h("button", { type: "button", class: "small", onclick: retry }, "Retry"),
      discard ? h("button", { type: "button", class: "small link", onclick: () => this.drop() }, "Discard") : null,
    );
  }

  drop() {
    this.li.remove();
    this.timeline.refresh();
  }

  /** Puts the bubble back (an entry taken for this message was not it). */
  show() {
    this.claimed = false;
    if (!this.li.isConnected) this.timeline.addOutgoing(this.li);
  }

  /**
   * Whether entry `e`, new in the timeline, may be this unconfirmed
   * message: then its bubble goes (the entry shows it) and `onArrived`
   * asks the host which entry the key stored. Should the host answer
   * otherwise, `sent` or `failed` shows the bubble's state again.
   */
  arrived(e) {
    const mine = e.kind === "user_message" && e.author === this.timeline.opts.me && e.text === this.text && e.seq > this.after;
    if (this.state !== "unconfirmed" || !mine || this.claimed) return false;
    this.claimed = true;
    this.li.remove();
    this.timeline.refresh();
    this.onArrived();
    return true;
  }
}

/**
 * Posts `text` with a fresh UUIDv7 Idempotency-Key and shows it as pending
 * until its entry arrives. Without an answer (the connection failed, the
 * host failed or timed out) the host may have stored it: it is sent again
 * by itself with the same key (the host answers `duplicate` or accepts
 * it) as the host shows signs of life, and at growing intervals. A
 * refusal keeps the key too, so "Retry" cannot deliver the message twice;
 * a 409 (the key's fate is unknown) offers to send it again as a new
 * message, with a new key. `onSignedOut(why)`: the host refused the token
 * and this tab signed out.
 */
export async function deliver(timeline, text, post, { onAccepted = () => {}, onSignedOut }) {
  const out = new Outgoing(timeline, text);
  let key = uuidv7();
  // a try of this key may have reached the host
  let reached = false;
  let busy = false;
  let timer = 0;
  let wait = RESEND_MIN_MS;
  let last = 0;
  const attempt = async () => {
    clearTimeout(timer);
    if (busy || timeline.closed) return;
    busy = true;
    last = Date.now();
    out.sending();
    try {
      const { status, data } = await post(key);
      if (status === 409) {
        const again = () => {
          key = uuidv7();
          reached = false;
          attempt();
        };
        out.failed((data && data.error && data.error.message) || "The host could not accept this message.", again, !reached);
        return;
      }
      out.sent(data.entry_id);
      onAccepted(data);
      // the bots' states follow the turn this message starts
      timeline
        .sync()
        .catch(() => {})
        .then(() => loadBotsUntilStarted(10, () => timeline.awaitsTurn() && !store.bots.some((b) => b.running_turn || b.paused_until > Date.now())));
    } catch (e) {
      if (e.status === 401) return refused();
      if (!mayHaveReached(e)) return out.failed(e.message, attempt, !reached);
      reached = true;
      out.unconfirmed(e.message, attempt);
      if (!timeline.closed) timer = setTimeout(attempt, wait);
      wait = Math.min(wait * 2, RESEND_MAX_MS);
    } finally {
      busy = false;
    }
  };
  // the host refused the token this tab holds (call() signed it out)
  const refused = () => {
    const what = reached ? "may not have been sent" : "was not sent";
    out.failed(reached ? "Not confirmed: the host refused your token." : "Not sent: the host refused your token.", attempt, !reached);
    if (!auth.token) {
      const cut = firstChars(text, 200);
      const quoted = cut === null ? text : `${cut}…`;
      onSignedOut(`Your message ${what}: the host refused your token (it may have changed, or you logged out). Sign in, then send it again: “${quoted}”`);
    }
  };
  out.onArrived = () => {
    if (!busy) attempt();
  };
  // the host answers again: ask now rather than at the next interval
  out.reachable = () => {
    if (out.state === "unconfirmed" && !busy && Date.now() - last >= NUDGE_MS) attempt();
  };
  await attempt();
}
