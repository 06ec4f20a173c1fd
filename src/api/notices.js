// A notice in a transcript (a failed or stopped turn, a member's failure
// in a room, …) as the page shows it: its words, and a button for what it
// offers (Retry), done through the API the page uses.
//
// The host writes one text for every client, so a notice that offers a
// retry names the ways to do it outside the page (`botfleet retry T`, an
// API route). On the page the button does it: those words are taken out
// of the sentence, which points to the button instead, and the command
// stays below as a quieter line for someone at a terminal. Control and
// invisible formatting characters in a notice (an upstream error it
// quotes) are shown escaped, `\u{202e}`.

import { call } from "./api.js";
import { escapeHidden } from "./cards.js";
import { h, toast } from "./dom.js";

const str = (v) => (typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : "");
/** `text` as a regular expression matching it literally. */
const literal = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * The words of notice `text` for someone on the page, where a Retry button
 * retries turn `turn` (null: there is no button): {text, command}, where
 * `command` is the CLI command taken out ("" when none was).
 */
export function forPeople(text, turn) {
  let out = text;
  let command = "";
  if (turn) {
    const t = literal(turn);
    const cli = `botfleet retry ${turn}`;
    // "retry it with `botfleet retry T` or `POST …/T/retry`": the button
    const offered = new RegExp(`retry it with \`botfleet retry ${t}\`(?: or \`POST [^\`]*${t}[^\`]*\`)?`);
    // "can retry its turn T (`botfleet retry T`)": the button beside it
    const aside = new RegExp(` \\(\`botfleet retry ${t}\`\\)`);
    if (offered.test(out)) {
      out = out.replace(offered, "use the Retry button");
      command = cli;
    } else if (aside.test(out)) {
      out = out.replace(aside, "");
      command = cli;
    }
  }
  // "…, and in `GET …`": an API route nobody on the page reads; what it
  // holds is in the owner's own conversation, which the notice names
  out = out.replace(/, and in `GET [^`]*`/, "");
  return { text: out, command };
}

/**
 * The list item of notice entry `e`. `retried(turn)`: the host queued
 * turn `turn` again (the view shows the bot working again).
 * `register(turn, gone)`: the view calls `gone(label)` once the host
 * would no longer retry the turn; the button then reads `label`.
 */
export function noticeItem(e, retried, register = () => {}) {
  const quiet = e.code === "unknown_mention" || str(e.code).startsWith("room_run_");
  const bad = e.code === "turn_failed" || e.code === "budget_exhausted";
  const { text, command } = forPeople(str(e.text), e.retry_turn ? str(e.retry_turn) : null);
  // a notice may quote an upstream error: a bidi override in it is shown
  // escaped (as approval cards show one), never reversing the host's words
  const words = h("span", null, escapeHidden(text));
  const line = h("div", { class: `line${quiet ? " quiet" : ""}` }, words);
  // the button no longer retries: the notice no longer says to use it
  // (QA: "use the Retry button" beside "Answered by a later turn")
  const settled = (what) => {
    words.textContent = words.textContent.replace(/use the Retry button[^.]*\./, `${what}.`);
  };
  if (e.retry_turn) {
    const retry = h("button", { type: "button", class: "small" }, "Retry");
    // marked, not disabled, while asked and once done: a disabled button
    // drops the focus to the page's body
    const off = (on) => (on ? retry.setAttribute("aria-disabled", "true") : retry.removeAttribute("aria-disabled"));
    retry.addEventListener("click", async () => {
      if (retry.getAttribute("aria-disabled") === "true") return;
      off(true);
      try {
        const { data } = await call("retryTurn", { turn: e.retry_turn });
        // the count is of the messages queued again, said so (QA: "Queued
        // again (2)" read as a place in a queue)
        const n = data.requeued;
        retry.textContent = n > 1 ? `Queued again (${n} messages)` : n ? "Queued again" : "Nothing left to retry";
        if (data.requeued) retried(e.retry_turn);
      } catch (err) {
        // a shared room shows other people's bots' failures too: their
        // turns are theirs to retry
        const theirs = err.status === 404 && str(e.code).startsWith("room_run_");
        // (one that waits on something running may go through later)
        if (err.status === 409 && !err.transient) {
          // the host will not run it (answered by a later turn, retried
          // already, …): the button said Retry on, and every click failed
          // (QA); it says so, and why, under the notice
          retry.textContent = "Not retried";
          settled("it was not retried (why is below)");
          line.after(h("p", { class: "hint why-not" }, err.message));
          // nor would the terminal's command be
          if (cli) cli.remove();
          return;
        }
        off(false);
        toast(theirs ? "Only the owner of that bot can retry its turn." : err.message, { error: true });
      }
    });
    line.append(retry);
    register(str(e.retry_turn), (label) => {
      // a button this page clicked keeps what its answer said ("Not
      // retried"), except that "Queued again" turns "Retried" as the
      // retried turn ends, as a reload shows it (QA: it stayed "Queued
      // again" for as long as the page was open)
      if (retry.textContent !== "Retry" && !retry.textContent.startsWith("Queued again")) return;
      retry.textContent = label;
      settled(label === "Retried" ? "it was retried" : label === "Answered by a later turn" ? "a later turn answered it" : label.toLowerCase());
      off(true);
      if (cli) cli.remove();
    });
  }
  const cli = command ? h("p", { class: "hint cli" }, "From a terminal: ", h("code", null, command)) : null;
  return h("li", { class: `entry notice${bad ? " bad" : ""}`, role: quiet ? null : "note" }, line, cli);
}
