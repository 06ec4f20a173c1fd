// Writing to a bot or a room: the message box, and delivering a message
// with its idempotency key.

import { auth, uuidv7 } from "./api.js";
import { firstChars, h } from "./dom.js";

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

/**
 * Posts `text` with a fresh UUIDv7 Idempotency-Key and shows it as pending
 * until its entry arrives. A network or server failure keeps the key, so
 * "Retry" cannot deliver the message twice; a 409 (the key's fate is
 * unknown) offers to send it again as a new message, with a new key.
 * `onSignedOut(why)`: the host refused the token and this tab signed out.
 */
export async function deliver(timeline, text, post, { onAccepted = () => {}, onSignedOut }) {
  const attempt = async (key) => {
    const shown = timeline.pending(text);
    try {
      const { status, data } = await post(key);
      if (status === 409) {
        shown.failed((data && data.error && data.error.message) || "The host could not accept this message.", () => attempt(uuidv7()));
        return;
      }
      shown.sent(data.entry_id);
      onAccepted(data);
      timeline.sync().catch(() => {});
    } catch (e) {
      if (e.status !== 401) return shown.failed(e.message, () => attempt(key));
      // the host refused the token this tab holds (call() signed it out)
      shown.failed("Not sent: the host refused your token.", () => attempt(key));
      if (!auth.token) {
        const cut = firstChars(text, 200);
        const quoted = cut === null ? text : `${cut}…`;
        onSignedOut(`Your message was not sent: the host refused your token (it may have changed, or you logged out). Sign in, then send it again: “${quoted}”`);
      }
    }
  };
  await attempt(uuidv7());
}
