// DOM helpers for the botfleet page. Text always goes in as text nodes
// (never innerHTML), so nothing a bot or a user wrote can become markup.

/** Builds an element: h("a", {href, onclick}, "text", child, [more]). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "value") el.value = v;
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  el.append(...nodes(children));
  return el;
}

/**
 * `children` as h() adds them: arrays flattened, null, undefined and
 * false left out (DOM `append` and `replaceChildren` would write the word
 * "null"), anything else not a node as its text.
 */
function nodes(children) {
  return children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false).map((c) => (c instanceof Node ? c : String(c)));
}

/** Replaces the children of `el` with `children`, taken as h() takes them. */
export function fill(el, ...children) {
  el.replaceChildren(...nodes(children));
  return el;
}

/**
 * A search snippet with its matches as <mark>s, all of it text nodes.
 * Given a hit's `snippet_parts` (plain text at even indices, matches at odd
 * ones), a literal « or » of the text stays text; given a marked
 * `snippet` (an older host), each «…» span becomes a <mark> and unbalanced
 * marks stay as they are. `shown` writes each piece of text as the page
 * shows it (escaped, for the kinds the conversation shows escaped).
 */
export function markSnippet(snippet, { shown = (text) => text } = {}) {
  const out = document.createDocumentFragment();
  if (Array.isArray(snippet)) {
    snippet.forEach((part, i) => out.append(i % 2 ? h("mark", null, shown(String(part))) : shown(String(part))));
    return out;
  }
  let rest = String(snippet ?? "");
  for (;;) {
    const open = rest.indexOf("«");
    const close = open < 0 ? -1 : rest.indexOf("»", open + 1);
    if (open < 0 || close < 0) {
      out.append(shown(rest));
      return out;
    }
    out.append(shown(rest.slice(0, open)), h("mark", null, shown(rest.slice(open + 1, close))));
    rest = rest.slice(close + 1);
  }
}

// The address of a [text](https://…) link runs to its ")" (it may hold
// balanced parentheses).
const LINK_PART = /(?:[^\s<>()]|\([^\s<>()]*\))/.source;
// A bare URL may hold balanced parentheses (…/Rust_(programming_language))
// but never ends with an unbalanced ")" (the one closing "(see https://…)")
// or with punctuation ending the sentence. Chinese and Japanese put no
// space around a URL: it ends at punctuation beyond ASCII (CJK_STOP: ，。、
// ；：！？（）「」《》【】, U+3000, curly quotes, …) and at Chinese, Japanese or
// Korean text (CJK) right after a Latin letter or digit
// ("https://x.cn/docs然后回复" links …/docs). A run of CJK text that starts
// a host label or a path segment, query value or the like (after "://",
// ".", "/", "?", "#", "=", "&", "_", "~", "+", "-") is the URL's own: an IDN
// host "https://例子.中国/路径", "…/wiki/中国", up to the space or the
// punctuation after it.
// (the contents of character classes; INLINE has the "u" flag)
const CJK = String.raw`\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Hangul}\p{sc=Bopomofo}\u30fc`;
const CJK_STOP = String.raw`\u00b7\u2014\u2015\u2018-\u201f\u2026\u3000-\u303f\ufe10-\ufe1f\ufe30-\ufe6b\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65\uffe0-\uffee`;
const CJK_RUN = `(?<=[/.?#=&_~+-])[${CJK}]+`;
const PAREN = `\\([^\\s<>()${CJK_STOP}]*\\)`;
const URL_PART = `(?:[^\\s<>()${CJK_STOP}${CJK}]|${CJK_RUN}|${PAREN})`;
const URL_END = `(?:[^\\s<>().,;:!?'"${CJK_STOP}${CJK}]|${CJK_RUN}|${PAREN})`;
// code is a run of backticks closed by a run of the same length (`x`,
// ```x```), so a lone ``` in a sentence stays text
const INLINE = new RegExp(
  [
    /(?<!`)(`+)(?!`)([^\n]*?[^\n`]|[^\n`])\1(?!`)/.source,
    /\*\*([^*\n]+)\*\*/.source,
    `\\[([^\\]\\n]+)\\]\\((https?:\\/\\/${LINK_PART}+)\\)`,
    `(https?:\\/\\/${URL_PART}*${URL_END})`,
  ].join("|"),
  "gu",
);
/** A line opening a fenced block: ``` and at most a language word. */
const FENCE_OPEN = /^ *```([\w+#.-]*) *$/;
/** A line closing it: ``` alone. */
const FENCE_CLOSE = /^ *``` *$/;

/**
 * A bot's Markdown as safe DOM: ``` fences become <pre>, `code`, **bold**,
 * [text](https://…) (see {@link link}) and bare http(s) URLs become elements; everything else
 * (lists, headings, HTML tags) stays literal text, line breaks kept by CSS.
 * Only a line that is ``` (and a language word) opens a block, and only a
 * line that is ``` alone closes it (an unclosed one runs to the end): a
 * ``` inside a sentence is inline code or text, never a lost line.
 */
export function richText(text) {
  const out = document.createDocumentFragment();
  const lines = String(text ?? "").split("\n");
  let prose = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE_OPEN.exec(lines[i]);
    if (!open) {
      prose.push(lines[i]);
      continue;
    }
    // the line break before the block stays, as it was written
    if (prose.length) out.append(inlineText(`${prose.join("\n")}\n`));
    prose = [];
    let end = i + 1;
    while (end < lines.length && !FENCE_CLOSE.test(lines[end])) end++;
    const code = h("code", null, lines.slice(i + 1, end).join("\n"));
    out.append(h("pre", { dataset: open[1] ? { lang: open[1] } : null }, code));
    i = end;
  }
  if (prose.length) out.append(inlineText(prose.join("\n")));
  return out;
}

/** Text with its inline code, bold, links and bare URLs as elements. */
function inlineText(text) {
  const out = document.createDocumentFragment();
  let at = 0;
  // no empty text nodes between elements
  const plain = (t) => t && out.append(t);
  for (const m of text.matchAll(INLINE)) {
    plain(text.slice(at, m.index));
    if (m[1]) out.append(h("code", null, m[2]));
    else if (m[3]) out.append(h("strong", null, m[3]));
    else if (m[4]) out.append(link(m[5], m[4]));
    else out.append(link(m[6], m[6]));
    at = m.index + m[0].length;
  }
  plain(text.slice(at));
  return out;
}

/** What a host-like word looks like: `good.example`, `https://a.b/c`. */
const URLISH = /^\s*(?:[a-z][a-z0-9+.-]*:\/\/)?[^\s/@]+\.[^\s/@]+(?:[/?#]\S*)?\s*$/i;

/**
 * A link to `url` reading `text`. Its title is the address as the browser
 * will open it (an IDN host in punycode: `аррle.com` is
 * `xn--le-6kc8da.com`). Text that reads as another address than the
 * target (`[https://good.example](https://evil.example)`), and blank text
 * (an invisible link), give way to the target itself.
 */
function link(url, text) {
  const href = safeUrl(url);
  let shown = text;
  if (!text.trim()) shown = href || url;
  else if (href && URLISH.test(text)) {
    const said = safeUrl(/^\s*[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text.trim() : `https://${text.trim()}`);
    if (!said || new URL(said).host !== new URL(href).host) shown = href;
  }
  // a bidi or other format character in an address's words draws another
  // address than the one it opens (U+202E: `…/exe.png` for `…/gnp.exe`,
  // QA): its target is shown, where the character is percent-encoded
  if (href && /\p{Cf}/u.test(shown) && (shown === url || URLISH.test(shown))) shown = href;
  return h("a", { href, title: href, target: "_blank", rel: "noopener noreferrer" }, shown);
}

const timeFmt = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
const dayFmt = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric" });
const fullFmt = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
const compact = new Intl.NumberFormat(undefined, { notation: "compact", maximumFractionDigits: 1 });

/** "14:05" for ms since epoch, with the day ("Dec 2 14:05") if not today. */
export function clock(ms) {
  const d = new Date(ms);
  const today = new Date().toDateString() === d.toDateString();
  return today ? timeFmt.format(d) : `${dayFmt.format(d)} ${timeFmt.format(d)}`;
}

/** A <time> for ms since epoch: the hour (and the day if not today). */
export function timeEl(ms) {
  if (typeof ms !== "number") return null;
  const d = new Date(ms);
  return h("time", { datetime: d.toISOString(), title: fullFmt.format(d) }, clock(ms));
}

/** "in 4 min", "2 h ago". */
export function relative(ms, now = Date.now()) {
  const diff = Math.round((ms - now) / 1000);
  const abs = Math.abs(diff);
  if (abs < 45) return diff > 0 ? "in a moment" : "just now";
  const [n, unit] =
    abs < 60 ? [abs, "s"] : abs < 3600 ? [Math.round(abs / 60), "min"] : abs < 86400 ? [Math.round(abs / 3600), "h"] : [Math.round(abs / 86400), "d"];
  return diff >= 0 ? `in ${n} ${unit}` : `${n} ${unit} ago`;
}

/** 12.3K tokens. */
export function count(n) {
  return typeof n === "number" ? compact.format(n) : "0";
}

/**
 * Who wrote an entry, as a bubble (and a search hit) names them: `bot`
 * when a bot wrote it (its name, `@id` when the name is not the id, and a
 * "bot" tag), else a person ("You" for `me`, or their id with a "person"
 * tag). `nameOf(id)` is a bot's display name. → {who, mine, tags}
 */
export function speaker(bot, author, me, nameOf) {
  if (!bot && author === me) return { who: "You", mine: true, tags: [] };
  if (!bot) return { who: String(author ?? ""), mine: false, tags: [h("span", { class: "tag speaker person" }, "person")] };
  const name = String(nameOf(author) ?? "");
  const id = String(author ?? "");
  const same = name.toLowerCase().replace(/\s+/g, "") === id.toLowerCase();
  const tags = [same ? null : h("span", { class: "bot-id" }, `@${id}`), h("span", { class: "tag speaker bot" }, "bot")];
  return { who: name, mine: false, tags };
}

/** A round avatar with the name's initial and a stable colour. */
export function avatar(name, room = false) {
  const s = String(name || "?");
  let hash = 0;
  for (const ch of s) hash = (hash * 31 + ch.codePointAt(0)) >>> 0;
  return h("span", { class: `avatar h${hash % 6}${room ? " room" : ""}`, "aria-hidden": "true" }, [...s][0] || "?");
}

/** Pretty JSON text of a tool call's raw arguments (left as is if not JSON). */
export function prettyJson(raw) {
  if (typeof raw !== "string") return JSON.stringify(raw, null, 2);
  try {
    return JSON.stringify(JSON.parse(raw), null, 2);
  } catch {
    return raw;
  }
}

/** A short message in a corner (errors are alerts, kept until dismissed);
 * success shows in place. */
export function toast(message, { error = false, action = null, ms = 3500 } = {}) {
  const box = document.getElementById("toasts");
  if (!box) return;
  const el = h("div", { class: `toast${error ? " error" : ""}`, role: error ? "alert" : "status" }, h("span", null, message));
  if (action) el.append(h("button", { type: "button", onclick: () => { el.remove(); action.run(); } }, action.label));
  el.append(h("button", { type: "button", "aria-label": "Dismiss", onclick: () => el.remove() }, "×"));
  box.append(el);
  // the oldest go once there are more than a few
  while (box.childElementCount > MAX_TOASTS) box.firstElementChild.remove();
  // an error stays until dismissed: what went wrong and what to do is
  // read at the person's pace (it went after 8 s, mid-sentence for some)
  if (error) return;
  // a note goes after `ms`, but not while the pointer or the focus is on
  // it (its action may be about to be used)
  let timer = setTimeout(() => el.remove(), ms);
  const hold = () => clearTimeout(timer);
  const resume = () => {
    if (el.matches(":hover") || el.contains(document.activeElement)) return;
    clearTimeout(timer);
    timer = setTimeout(() => el.remove(), ms);
  };
  el.addEventListener("mouseenter", hold);
  el.addEventListener("focusin", hold);
  el.addEventListener("mouseleave", resume);
  el.addEventListener("focusout", () => setTimeout(resume, 0));
}

/** Most toasts shown at once. */
const MAX_TOASTS = 5;

/** Whether a URL is safe to link to (http or https only). */
export function safeUrl(url) {
  try {
    const u = new URL(String(url), location.href);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
  } catch {
    return null;
  }
}

/**
 * The first `n` characters of `text`, counted in code points, or `null`
 * when it has no more than `n`. `slice` and `length` count UTF-16 units:
 * a cut there could split an emoji or a rarer CJK character, leaving a
 * lone surrogate (drawn as �), and text of such characters counted double.
 */
export function firstChars(text, n) {
  let units = 0;
  let chars = 0;
  for (const c of text) {
    if (chars === n) return text.slice(0, units);
    units += c.length;
    chars++;
  }
  return null;
}

/** A message as the host keeps it: no blank lines around it, but its
 * first line's indentation kept (a pasted code block starts indented). */
export function messageText(text) {
  return String(text).replace(/\s+$/, "").replace(/^\s*\n/, "");
}

/** A card button's reply as it goes into the message box: no trailing
 * spaces, runs of blank lines made one (compose.js, cards.js). */
export function draftText(text) {
  return String(text).replace(/[ \t]+$/gm, "").replace(/\n{3,}/g, "\n\n").trim();
}

/** `text` in curly quotes, its first 200 characters and "…" when longer:
 * a message or a draft the page names, e.g. on the sign-in page. */
export function quoted(text) {
  const cut = firstChars(text, 200);
  return `“${cut === null ? text : `${cut}…`}”`;
}

/** A centred note in an empty panel. */
export function placeholder(...text) {
  return h("div", { class: "placeholder" }, ...text);
}

/** An error in place of a view's content. */
export function errorBox(e) {
  return placeholder(h("p", { class: "error-text", role: "alert" }, e.message || String(e)));
}

/** The "‹ Back" link of narrow screens. */
export function backLink(href, label) {
  return h("a", { class: "button small back", href, "aria-label": `Back to ${label}` }, "‹ ", label);
}
