// A bot's internal steps in a transcript (shown behind "Show steps"): its
// notes, tool calls and their results, runtime reminders and summaries.
//
// What a tool was called with and what it answered is shown as the
// approval card shows an action: control and invisible formatting
// characters (a U+202E that makes `… # (51)trela` read backwards) are
// written as escapes (`\u{202e}`), so the steps read as the host stored
// them (Trojan Source).

import { escapeHidden } from "./cards.js";
import { h, prettyJson } from "./dom.js";

const str = (v) => (typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : "");

/** The list item of an internal entry `e` (`assistant`, `tool_result`,
 * `reminder`, `summary` or a kind this page does not know), or null for
 * an assistant entry with nothing to show. */
export function stepItem(e) {
  switch (e.kind) {
    case "assistant":
      return assistant(e);
    case "tool_result":
      return item(
        h(
          "details",
          { class: `step${e.is_error ? " error" : ""}` },
          h("summary", null, h("span", { class: "step-label" }, e.is_error ? "error" : "result"), h("code", null, escapeHidden(str(e.name), { oneLine: true }))),
          h("pre", null, escapeHidden(str(e.content))),
        ),
      );
    case "summary":
      return item(
        h("details", { class: "step" }, h("summary", null, h("span", { class: "step-label" }, "summary"), `of the conversation up to #${e.covers_to_seq}`), h("div", { class: "text" }, escapeHidden(str(e.text)))),
      );
    case "reminder":
      return line("runtime", e.text);
    default:
      return line(str(e.kind), e.text);
  }
}

const item = (child) => h("li", { class: "entry internal" }, child);

function line(label, text) {
  return item(h("div", { class: "step" }, h("span", { class: "step-label" }, escapeHidden(label, { oneLine: true })), h("span", { class: "text" }, escapeHidden(str(text)))));
}

function assistant(e) {
  if (!str(e.text).trim() && !(e.tool_calls || []).length) return null;
  const step = h("div", { class: "step" });
  if (str(e.text).trim()) step.append(h("div", null, h("span", { class: "step-label" }, "note"), h("span", { class: "text" }, escapeHidden(str(e.text)))));
  for (const c of e.tool_calls || []) {
    const args = escapeHidden(prettyJson(c.arguments));
    step.append(h("details", null, h("summary", null, h("span", { class: "step-label" }, "call"), h("code", null, escapeHidden(str(c.name), { oneLine: true }))), h("pre", null, args)));
  }
  return item(step);
}
