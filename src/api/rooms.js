// Group rooms: the list, the "New room" form and a room's timeline with
// its message box. A closed room keeps its timeline readable; its box is
// replaced by a line saying who closed it and when.

import { call } from "./api.js";
import { composer, outboxView } from "./compose.js";
import { avatar, backLink, clock, errorBox, fill, h, placeholder } from "./dom.js";
import { botName, debounce, ensureBots, loadRooms, roomWatchers, setTitle, store } from "./state.js";
import { Timeline } from "./timeline.js";

/** A member as the page lists it: its name, and why it takes no turns
 * when it does not (`Beta (removed)`). */
const memberLabel = (m) => (typeof m.absent === "string" ? `${m.name || m.id} (${m.absent})` : m.name || m.id);

const main = document.getElementById("main");

/** The API's id rule (memory/src/ids.rs): 1–64 ASCII letters, digits,
 * `-`, `_` or `.`, starting with a letter or digit. */
const ROOM_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/**
 * The room id the form sends for a room `name` when no id is typed: the
 * name itself when it is a valid id (what the API does without an id),
 * else its ASCII letters and digits, lowercased, runs of anything else
 * made one `-` ("Team Standup ✨" → "team-standup"). "" when nothing is
 * left (a name in another script, "产品组周会"): the person then types an id.
 */
export function roomIdFrom(name) {
  const trimmed = name.trim();
  if (ROOM_ID.test(trimmed)) return trimmed;
  return trimmed
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "") // accents of decomposed letters: "é" → "e"
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+/, "")
    .slice(0, 64)
    .replace(/-+$/, "");
}

/** The rooms again once signals of new rooms stop coming for a moment. */
const roomsSoon = debounce(loadRooms, 300);

/** Who closed a room (only its owner may) as the page names them. */
const closer = (room) => (room.owner === store.me ? "You" : room.owner);

/** The #/rooms views. */
export function roomsView(id, seq) {
  setTitle("Rooms");
  const ctx = { closed: false, timeline: null, poll: 0, failed: false };
  const list = h("ul", { class: "list", "aria-label": "Your rooms" });
  const heading = h("h1", { tabindex: "-1" }, "Rooms");
  const aside = h(
    "aside",
    { "aria-label": "Rooms" },
    h("div", { class: "aside-head" }, heading, h("a", { class: "button small", href: "#/rooms/new" }, "New room")),
    list,
  );
  const detail = h("section", { class: "detail", "aria-label": "Room" });
  main.replaceChildren(h("div", { class: `split${id ? " has-detail" : ""}` }, aside, detail));
  const paint = () => paintRoomList(list, id);
  paint();
  roomWatchers.add(paint);
  loadRooms();
  if (id === "new") newRoomForm(ctx, detail);
  else if (id) openRoom(ctx, detail, id, seq);
  else {
    detail.replaceChildren(placeholder(h("p", null, "A room is a shared timeline where 2–6 bots discuss what you post, one at a time. Choose a room or create one.")));
    heading.focus();
  }
  return {
    unmount() {
      ctx.closed = true;
      roomWatchers.delete(paint);
      clearInterval(ctx.poll);
      if (ctx.timeline) ctx.timeline.close();
    },
    onSignal(ev) {
      if (ctx.timeline) ctx.timeline.onSignal(ev);
      // a room of yours created elsewhere (another tab, the CLI, a bot):
      // its creation signals its empty timeline with seq 0; a room listed
      // whose timeline changed may have closed or changed members (QA:
      // the list showed them only for the room open beside it)
      // (the open room follows its own close and members, and a message
      // there asks no list: its timeline's signals are left out)
      const listed = (r) => r.session === ev.session && r.id !== id;
      if (ev.type === "change" && (ev.seq === 0 || store.rooms.some(listed))) roomsSoon();
      // what changed before the stream was live (a room made between the
      // list's load and the stream's start was missed, seen as a flaky
      // test) or while it was down
      if (ev.type === "resync") roomsSoon();
    },
    failed: () => ctx.failed,
  };
}

/** The badge of a room in the list and its header: closed, else shared,
 * else null (no badge). */
function roomBadge(room) {
  if (room.closed_at) return h("span", { class: "state closed", title: `Closed ${clock(room.closed_at)}` }, "closed");
  return room.shared ? h("span", { class: "state" }, "shared") : null;
}

function paintRoomList(list, current) {
  if (!store.roomsLoaded) return list.replaceChildren(h("li", { class: "list-empty" }, "Loading…"));
  if (!store.rooms.length) return list.replaceChildren(h("li", { class: "list-empty" }, "No rooms yet."));
  list.replaceChildren(
    ...store.rooms.map((r) =>
      h(
        "li",
        { class: r.closed_at ? "closed" : null },
        h(
          "a",
          { href: `#/rooms/${encodeURIComponent(r.id)}`, "aria-current": r.id === current ? "page" : null },
          avatar(r.name, true),
          h("span", { class: "head" }, h("span", { class: "name", title: r.name }, r.name), roomBadge(r)),
          h("span", { class: "sub" }, (r.members || []).map(memberLabel).join(", ")),
        ),
      ),
    ),
  );
}

async function newRoomForm(ctx, detail) {
  setTitle("New room");
  await ensureBots();
  if (ctx.closed) return;
  const title = h("h2", { tabindex: "-1" }, "New room");
  const name = h("input", { id: "room-name", required: true, maxlength: "100", placeholder: "standup" });
  const rid = h("input", { id: "room-id", maxlength: "64", placeholder: "made from the name", spellcheck: "false", "aria-describedby": "room-id-hint" });
  const idHint = h("span", { class: "hint", id: "room-id-hint" }, "ASCII letters, digits, - _ . — used in links and @mentions of the room.");
  const others = h("input", { id: "room-others", placeholder: "e.g. helper, reviewer", spellcheck: "false" });
  // the name wraps beside its checkbox, the id after it on one line
  const checks = store.bots.map((b) => h("label", null, h("input", { type: "checkbox", value: b.id }), h("span", null, `${b.name} `, h("span", { class: "hint", title: b.id }, b.id))));
  const error = h("p", { class: "error-text", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary" }, "Create room");
  // the id the name gives, shown where the id is typed
  const suggest = () => {
    const made = roomIdFrom(name.value);
    rid.placeholder = made || (name.value.trim() ? "type one: the name has no ASCII letters or digits to make it from" : "made from the name");
  };
  name.addEventListener("input", suggest);
  const form = h(
    "form",
    { class: "panel" },
    h("label", { class: "field", for: "room-name" }, h("span", null, "Name"), name),
    h("label", { class: "field", for: "room-id" }, h("span", null, "Id (optional)"), rid, idHint),
    h("fieldset", null, h("legend", null, "Members (2–6; they speak in this order)"), checks.length ? h("div", { class: "checks" }, checks) : h("p", { class: "hint" }, "You have no bots to add.")),
    h("label", { class: "field", for: "room-others" }, h("span", null, "Other users' bots (optional)"), others, h("span", { class: "hint" }, "Ids of bots marked shareable in fleet.toml, separated by commas.")),
    error,
    h("div", { class: "actions" }, submit, h("a", { class: "button", href: "#/rooms" }, "Cancel")),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const members = [
      ...checks.map((l) => l.querySelector("input")).filter((i) => i.checked).map((i) => i.value),
      ...others.value.split(",").map((s) => s.trim()).filter(Boolean),
    ];
    const body = { name: name.value.trim(), members };
    const id = rid.value.trim() || roomIdFrom(body.name);
    if (!id) {
      error.textContent = "Give the room an Id: ids use ASCII letters, digits, - _ . and the name has none of them to make one from. Type one, e.g. standup.";
      rid.focus();
      return;
    }
    body.id = id;
    submit.disabled = true;
    error.textContent = "";
    try {
      const { data } = await call("groupCreate", {}, { body });
      await loadRooms();
      location.hash = `#/rooms/${encodeURIComponent(data.id)}`;
    } catch (e) {
      error.textContent = e.message;
      submit.disabled = false;
    }
  });
  detail.replaceChildren(h("div", { class: "page" }, backLink("#/rooms", "Rooms"), title, form));
  title.focus();
}

async function openRoom(ctx, detail, id, seq) {
  detail.replaceChildren(placeholder("Loading…"));
  let room;
  try {
    await ensureBots();
    ({ data: room } = await call("group", { group: id }));
  } catch (e) {
    if (!ctx.closed) detail.replaceChildren(errorBox(e));
    ctx.failed = true;
    return;
  }
  if (ctx.closed) return;
  setTitle(room.name);
  const names = new Map((room.members || []).map((m) => [m.id, m.name || m.id]));
  const nameOf = (author) => names.get(author) || botName(author);
  const chips = h("div", { class: "members", "aria-label": "Members in speaking order" });
  const paintMembers = () => {
    names.clear();
    for (const m of room.members || []) names.set(m.id, m.name || m.id);
    chips.replaceChildren(...(room.members || []).map((m) => h("span", { class: m.absent ? "chip absent" : "chip" }, memberLabel(m))));
  };
  paintMembers();
  // the members changed (a `members_changed` notice of the timeline, seen
  // live or read after): the header, the names mentions go by and the
  // Rooms list follow (QA: they kept the members the page opened with)
  let membersSeen = 0;
  const membersChanged = async (seq) => {
    if (seq <= membersSeen) return;
    membersSeen = seq;
    try {
      const { data } = await call("group", { group: id });
      room.members = data.members;
      room.shared = data.shared;
      paintMembers();
      paintTitle();
      loadRooms();
    } catch {
      // the timeline shows the notice; the header catches up at the next one
    }
  };
  const note = h("p", { class: "composer-note", role: "status" });
  // what replaces the message box once the room is closed
  const closedLine = h("div", { class: "room-closed", role: "status" });
  const unsent = h("div", { class: "unsent-list" });
  const title = h("h1", { tabindex: "-1" });
  const paintTitle = () => fill(title, h("bdi", null, room.name), roomBadge(room));
  /** The room is closed (at `at`, ms): no box, a line instead. */
  const markClosed = (at) => {
    if (room.closed_at) return;
    room.closed_at = typeof at === "number" ? at : Date.now();
    paintClosed();
    paintTitle();
    note.textContent = "";
    keepTyped("the room was closed");
    if (box.el.isConnected) box.el.replaceWith(closedLine);
    loadRooms();
  };
  // the message box goes: what was typed in it and not sent is quoted
  // beside the line that replaces it, to copy (it vanished with the box,
  // left only in the tab's storage: QA, 2026-12-06)
  const keepTyped = (why) => {
    const typed = box.take();
    if (typed) unsent.append(h("p", { class: "hint" }, `Typed and not sent, ${why}: `, h("q", null, typed)));
  };
  const paintClosed = () => {
    closedLine.replaceChildren(
      h("p", null, h("strong", null, `${closer(room)} closed this room`), ` at ${clock(room.closed_at)}. It takes no more messages; its timeline stays readable and searchable. `, h("a", { href: "#/rooms/new" }, "Start a new room")),
      unsent,
    );
  };
  // a message refused because the room closed meanwhile: said beside the
  // closed line, with its text to copy, and no Retry (it would be refused
  // again)
  const refusedAsClosed = (text) => {
    unsent.append(h("p", { class: "hint" }, room.lost ? "Not sent, you are no longer in this room: " : "Not sent, the room was closed: ", h("q", null, text)));
  };
  // another owner's room you were taken out of (your bots left it): the
  // page's poll or a refused message meets a 404. It said nothing and
  // kept the box, whose messages failed with a Retry that could never
  // work (QA): a line says so instead, and the Rooms list follows.
  const lostLine = h("div", { class: "room-closed", role: "status" });
  const markLost = () => {
    if (room.lost) return;
    room.lost = true;
    clearInterval(ctx.poll);
    ctx.poll = 0;
    note.textContent = "";
    keepTyped("you are no longer in this room");
    lostLine.replaceChildren(
      h("p", null, h("strong", null, "You are no longer in this room"), ". Its owner took your bots out of it, so you no longer read or post here. ", h("a", { href: "#/rooms" }, "Your rooms")),
      unsent,
    );
    if (box.el.isConnected) box.el.replaceWith(lostLine);
    else if (closedLine.isConnected) closedLine.replaceWith(lostLine);
    loadRooms();
  };
  // the close is an entry of the timeline: whoever sees it (the owner
  // through the change signals, others by polling) learns it is closed
  const load = (after, limit) =>
    call("groupEntries", { group: id }, { query: { after, limit } }).then(({ data }) => {
      const closing = (data.entries || []).find((e) => e.kind === "notice" && e.code === "room_closed");
      if (closing) markClosed(closing.created_at);
      const changed = (data.entries || []).filter((e) => e.kind === "notice" && e.code === "members_changed").pop();
      // one opened after the change has its members already
      if (changed && membersSeen === 0) membersSeen = room.last_seq || 0;
      if (changed) membersChanged(changed.seq);
      return data;
    });
  const timeline = new Timeline({
    label: `Room ${room.name}`,
    session: room.session,
    me: store.me,
    nameOf,
    load,
    send: (text) => send(text),
    draft: (text) => (room.closed_at ? null : box.draft(text)),
    edit: (text) => !room.closed_at && box.edit(text),
    working: "The members are discussing",
    empty: "No messages yet. Everyone in the room reads what you post; @Name addresses one member.",
  });
  ctx.timeline = timeline;
  // a refusal may be the room's close, not yet seen: read the room again
  const recheck = async () => {
    try {
      const { data } = await call("group", { group: id });
      if (data.closed_at) markClosed(data.closed_at);
    } catch (e) {
      if (e && e.status === 404) markLost();
      // else the refusal's own message is shown
    }
  };
  const send = async (text) => {
    // the mention note is about one post: the next one starts without it
    note.textContent = "";
    if (room.closed_at) return refusedAsClosed(text);
    await outgoing.send(text);
  };
  // a small screen cuts a long placeholder: the short one says enough
  const narrow = window.matchMedia("(max-width: 480px)").matches;
  const box = composer({ label: `Message to room ${room.name}`, placeholder: narrow ? "Message the room" : "Message the room (@Name for one member)", onSend: send, draftKey: `room:${id}` });
  // typing the next message: the note about the last one no longer applies
  box.el.addEventListener("input", () => {
    note.textContent = "";
  });
  paintTitle();
  if (room.closed_at) {
    paintClosed();
    // a draft kept from before the close (typed in another load of the page)
    keepTyped("the room was closed");
  }
  const head = h(
    "header",
    { class: "conv-head" },
    backLink("#/rooms", "Rooms"),
    h(
      "div",
      { class: "conv-title" },
      avatar(room.name, true),
      h("div", null, title, chips),
    ),
    timeline.stepsToggle,
  );
  detail.replaceChildren(head, timeline.el, room.closed_at ? closedLine : box.el, note);
  // change signals of a timeline go to the room's owner; others poll
  if (store.me !== room.owner) {
    ctx.poll = setInterval(
      () =>
        timeline.sync().catch((e) => {
          if (e && e.status === 404) markLost();
        }),
      5000,
    );
  }
  // open() learns the newest seq first: an entry past it may be a message
  // the outbox holds
  const opening = timeline.open(room.last_seq, seq);
  const outgoing = outboxView(timeline, { kind: "room", id }, {
    onAccepted: (data) => {
      const addressed = (data.addressed || []).map(nameOf);
      const unknown = data.unknown_mentions || [];
      note.textContent = addressed.length ? `Addressed to ${addressed.join(", ")}.` : "";
      if (unknown.length) note.textContent += ` Nobody here is called ${unknown.map((m) => `@${m}`).join(", ")}.`;
    },
    // a message refused because the room closed meanwhile: its bubble
    // (with a Retry that could only be refused again) gives way to the
    // closed line, which quotes it
    refused: async (p) => {
      await recheck();
      if (!room.closed_at && !room.lost) return false;
      refusedAsClosed(p.text);
      return true;
    },
  });
  const closeTimeline = timeline.close.bind(timeline);
  timeline.close = () => {
    // the messages being sent go on without the view
    outgoing.close();
    closeTimeline();
  };
  try {
    await opening;
  } catch {
    // reported by the timeline
  }
  if (!ctx.closed && !seq && !room.closed_at) box.focus();
}
