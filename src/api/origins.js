// Where a bot of the list came from (the `origin` of GET /v1/bots:
// `config` for fleet.toml, `agent:<maker>` for a bot made by CreateAgent,
// `subagent:<parent>` for a Task's subagent), the note on the finished
// subagents the list leaves out, and removing a bot made by CreateAgent
// (DELETE /v1/bots/{bot}: fleet.toml's bots are removed there, and a
// subagent goes with its parent), and the link from a subagent's messages
// to its page. All of it is text nodes (dom.js).

import { call } from "./api.js";
import { h, toast } from "./dom.js";
import { botName, loadBots, store } from "./state.js";

/** What a subagent's `subagent_status` reads as. */
const SUBAGENT_STATUS = { running: "running", done: "done", failed: "failed", stopped: "stopped" };

/** `b`'s origin: {kind: "config" | "agent" | "subagent" | "other", by}. */
export function originOf(b) {
  const origin = typeof b.origin === "string" ? b.origin : "";
  if (origin === "config") return { kind: "config", by: null };
  for (const kind of ["agent", "subagent"]) {
    if (origin.startsWith(`${kind}:`)) return { kind, by: origin.slice(kind.length + 1) };
  }
  return { kind: "other", by: null };
}

/** A bot the person may remove from the page: one CreateAgent made that
 * is not removed yet (the list holds only their own bots). */
export function removable(b) {
  return originOf(b).kind === "agent" && !b.removed_at && (!store.me || b.owner === store.me);
}

/** A subagent's status (running, done, failed, stopped), or "" when the
 * host does not say. */
function subagentStatus(b) {
  const s = b.subagent_status;
  return typeof s === "string" && Object.hasOwn(SUBAGENT_STATUS, s) ? SUBAGENT_STATUS[s] : "";
}

/**
 * Where `b` came from, in words, as nodes (the maker's or parent's name
 * isolated in a <bdi>: it is someone's text): "made by Researcher",
 * "subagent of Researcher · done", "fleet.toml"; null for an origin the
 * page does not know.
 */
export function originWords(b) {
  const { kind, by } = originOf(b);
  switch (kind) {
    case "config":
      return [h("span", { class: "nowrap" }, "fleet.toml")];
    case "agent":
      return ["made by ", h("bdi", null, botName(by))];
    case "subagent": {
      const status = subagentStatus(b);
      return ["subagent of ", h("bdi", null, botName(by)), status ? ` · ${status}` : ""];
    }
    case "other":
      return null;
  }
  return null;
}

/** The origin label of a bot in the list: none for a bot of fleet.toml
 * (the usual kind), else a small tag ("made by …", "subagent of … · done"). */
export function originLabel(b) {
  const { kind } = originOf(b);
  if (kind === "config" || kind === "other") return null;
  const status = kind === "subagent" ? subagentStatus(b) : "";
  return h("span", { class: `origin ${kind}${status ? ` ${status}` : ""}` }, originWords(b));
}

/**
 * The "Remove" button of a bot made by CreateAgent: asks first, then
 * removes it (DELETE /v1/bots/{bot}) and loads the list again, where it
 * shows removed. A refusal (409, 403, 404) is shown in the host's words
 * and changes nothing.
 */
export function removeButton(b) {
  const name = b.name || b.id;
  const button = h("button", { type: "button", class: "small danger remove", "aria-label": `Remove ${name}` }, "Remove");
  button.addEventListener("click", async () => {
    const maker = originOf(b).by;
    const question =
      `Remove ${name} (${b.id}), made by ${botName(maker)}? It takes no more messages, its running turn and ` +
      "its subagents' are cancelled, and its conversations stay readable. This cannot be undone.";
    if (!window.confirm(question)) return;
    button.disabled = true;
    try {
      await call("botRemove", { bot: b.id });
      toast(`Removed ${name}.`);
      await loadBots();
    } catch (e) {
      if (e.code !== "signed_out") toast(e.message, { error: true });
      button.disabled = false;
    }
  });
  return button;
}

/**
 * The line under the list about the finished subagents it leaves out
 * (`subagents_left_out`), with a button listing them all
 * (`?subagents=all`), and back; null when none are left out.
 */
export function leftOutNote() {
  const show = (all) => {
    store.allSubagents = all;
    loadBots();
  };
  if (store.allSubagents) {
    return h(
      "p",
      { class: "hint list-note" },
      "Every finished subagent is listed. ",
      h("button", { type: "button", class: "link", onclick: () => show(false) }, "List only the recent ones"),
    );
  }
  const n = Number(store.subagentsLeftOut) || 0;
  if (n <= 0) return null;
  return h(
    "p",
    { class: "hint list-note" },
    n === 1 ? "1 older finished subagent is not listed. " : `${n} older finished subagents are not listed. `,
    h("button", { type: "button", class: "link", onclick: () => show(true) }, n === 1 ? "Show it" : "Show them"),
  );
}

/**
 * A link to the page of subagent `id` (`<parent>.sub-<hex>`), which opens
 * on its task, beside its messages (its progress and report in its
 * parent's conversation); null for any other bot, and for one neither
 * in the person's list nor of a bot there (not theirs to open).
 */
export function taskLink(id) {
  const m = typeof id === "string" ? /^(.+)\.sub-[0-9a-f]+$/.exec(id) : null;
  if (!m || !store.bots.some((b) => b.id === id || b.id === m[1])) return null;
  return h("a", { class: "task-link", href: `#/bots/${encodeURIComponent(id)}` }, "Open its task");
}
