/* The chat list (active, archived, search results), opening a chat, and rename, archive, restore, delete.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

import { hideBanner, messageFor, PAGE, PLACEHOLDER, SESSION_CODES, showBanner, state, ui } from "./page.js";
import { api, errorText, urlFor } from "./api.js";
import { request, sendFrame } from "./socket.js";
import { addMessages, catchUp, fillUp, resetMessages } from "./messages.js";
import { applyTurn, chatSwitched, keepWords, restoreWords, settleOutbox, setTurn, updateComposer } from "./composer.js";

function chatTitle(view) {
  return view.title || gettext("New chat");
}

function chatItem(view) {
  const item = document.createElement("li");
  item.dataset.id = view.id;
  const button = document.createElement("button");
  button.type = "button";
  button.className = "chat-link";
  button.textContent = chatTitle(view);
  if (view.status === "archived" && state.listMode === "search") {
    const badge = document.createElement("span");
    badge.className = "badge";
    badge.textContent = gettext("archived");
    button.append(" ", badge);
  }
  if (view.id === state.current) {
    button.setAttribute("aria-current", "page");
  }
  button.addEventListener("click", () => openChat(view.id, { push: true }));
  item.append(button);
  return item;
}

function listItem(id) {
  return ui.list.querySelector('li[data-id="' + CSS.escape(id) + '"]');
}

function belongsInList(view, known) {
  if (state.listMode === "search") {
    return known && view.status !== "deleted"; // a search's results change only by searching
  }
  return view.status === state.listMode;
}

export function putChat(view, where) {
  // `where`: "top", "end" (a listed page's row), or in place when it is listed already.
  state.chats.set(view.id, view);
  const old = listItem(view.id);
  if (!belongsInList(view, Boolean(old) || where === "end")) {
    if (old) {
      old.remove();
    }
    return;
  }
  const item = chatItem(view);
  if (where === "top") {
    ui.list.prepend(item);
    if (old) {
      old.remove();
    }
  } else if (old) {
    old.replaceWith(item);
  } else {
    ui.list.append(item);
  }
}

function markCurrentInList() {
  ui.list.querySelectorAll(".chat-link").forEach((button) => {
    if (button.parentElement.dataset.id === state.current) {
      button.setAttribute("aria-current", "page");
    } else {
      button.removeAttribute("aria-current");
    }
  });
}

export async function loadChats() {
  if (state.listLoading || state.listDone || state.signedOut) {
    return;
  }
  state.listLoading = true;
  ui.listStatus.textContent = gettext("Loading…");
  try {
    const mode = state.listMode;
    const query = state.query;
    const params = new URLSearchParams();
    if (mode === "archived") {
      params.set("archived", "1");
    } else if (mode === "search") {
      params.set("q", query);
    }
    if (state.listCursor) {
      params.set("cursor", state.listCursor);
    }
    const data = await api("GET", urlFor("list") + "?" + params.toString());
    if (mode !== state.listMode || query !== state.query) {
      return; // the list was switched while this page was on its way
    }
    data.conversations.forEach((view) => {
      if (!listItem(view.id)) {
        putChat(view, "end");
      }
    });
    state.listCursor = data.next_cursor;
    state.listDone = !data.next_cursor;
    ui.listStatus.textContent = state.listDone && !ui.list.children.length ? emptyListText() : "";
  } catch (error) {
    ui.listStatus.textContent = errorText(error);
    return;
  } finally {
    state.listLoading = false;
  }
  if (nearEnd(ui.listBox)) {
    loadChats();
  }
}

function emptyListText() {
  if (state.listMode === "archived") {
    return gettext("No archived chats.");
  }
  return state.listMode === "search" ? gettext("No chats match your search.") : gettext("No chats yet.");
}

export function showNewChat(view) {
  // A chat made for a message just sent: shown among the active chats.
  if (state.listMode === "active") {
    putChat(view, "top");
  } else {
    ui.search.value = "";
    showList("active");
  }
  ui.listStatus.textContent = "";
}

export function showList(mode, query) {
  // Switch what the list shows and read it again from its first page.
  state.listMode = mode;
  state.query = query || "";
  state.listCursor = null;
  state.listDone = false;
  state.listLoading = false;
  ui.list.replaceChildren();
  ui.listStatus.textContent = "";
  ui.showArchived.setAttribute("aria-pressed", String(mode === "archived"));
  ui.listBox.setAttribute("aria-label", mode === "archived" ? gettext("Archived chats") :
    mode === "search" ? gettext("Search results") : gettext("Chats"));
  loadChats();
}

let searchTimer = null;

export function searchSoon() {
  window.clearTimeout(searchTimer);
  searchTimer = window.setTimeout(() => {
    const query = ui.search.value.trim();
    if (query) {
      showList("search", query);
    } else if (state.listMode === "search") {
      showList("active");
    }
  }, 250);
}

export function nearEnd(box) {
  return box.scrollHeight - box.scrollTop - box.clientHeight < 80;
}

export function showHeader(view) {
  ui.title.textContent = view ? chatTitle(view) : gettext("New chat");
  if (view && view.status === "archived") {
    const badge = document.createElement("span");
    badge.className = "badge";
    badge.textContent = gettext("archived");
    ui.title.append(" ", badge);
  }
  ui.archive.hidden = Boolean(view && view.status === "archived");
  ui.restore.hidden = !(view && view.status === "archived");
  document.title = (view ? chatTitle(view) + " · " : "") + gettext("Assistant");
}

let openedOnce = false; // the page's first chat takes the words kept for it

/* A chat this page made for files that is left with nothing sent goes (its files with it), so no empty
 * "New chat" is left in the list; the words typed there move to the next new chat's box. */
function dropUnusedChat(chat) {
  if (state.madeForFiles !== chat) {
    return;
  }
  state.madeForFiles = null;
  if (state.messages.size || state.turn || state.outboxes.has(chat)) {
    return; // it was used after all
  }
  if (ui.text.value.trim()) {
    keepWords(null, ui.text.value);
  }
  ui.text.value = ""; // so nothing is kept for the chat that goes
  const item = listItem(chat);
  if (item) {
    item.remove();
  }
  state.chats.delete(chat);
  api("POST", urlFor("delete", chat)).catch(() => undefined); // already gone: nothing to leave behind
}

export async function openChat(id, options) {
  const opts = options || {};
  const previous = state.current;
  if (previous && previous !== id) {
    sendFrame({ type: "unsubscribe", conversation: previous });
    dropUnusedChat(previous);
  }
  if (previous !== id || !openedOnce) {
    // Each chat keeps its own unsent words; a chat just made for the words typed keeps them.
    if (opts.fresh && !previous) {
      keepWords(null, ""); // the words move with the chat made for them
      keepWords(id);
    } else {
      if (openedOnce) {
        keepWords(previous);
      }
      restoreWords(id);
    }
  }
  openedOnce = true;
  state.current = id;
  resetMessages();
  chatSwitched();
  if (state.files) {
    state.files.setConversation(id, { keep: opts.fresh }).catch(() => undefined);
  }
  hideBanner();
  ui.composerError.textContent = "";
  ui.composerNote.textContent = "";
  markCurrentInList();
  showHeader(id ? state.chats.get(id) : null);
  closeSidebar();
  updateComposer();
  if (opts.push || opts.replace) {
    // The address bar always names a chat that exists: a gone one is replaced, not kept in history.
    history[opts.replace ? "replaceState" : "pushState"]({ chat: id }, "", id ? urlFor("open", id) : urlFor("chat"));
  }
  if (!id) {
    ui.text.focus();
    return;
  }
  if (!opts.fresh) {
    ui.olderStatus.textContent = gettext("Loading…");
  }
  await subscribe(id);
}

export async function subscribe(chat) {
  if (!state.ready) {
    return; // the socket subscribes the open chat as soon as it is ready
  }
  let reply;
  try {
    reply = await request({ type: "subscribe", conversation: chat, after: state.last ? state.last.id : null });
  } catch (error) {
    if (chat === state.current) {
      failOpen(error);
    }
    return;
  }
  if (chat !== state.current) {
    return;
  }
  const resync = Boolean(state.last);
  ui.olderStatus.textContent = "";
  addMessages(reply.messages, { scrollDown: !resync });
  if (!resync) {
    state.olderDone = reply.messages.length < PAGE;
    fillUp();
  } else if (reply.messages.length >= PAGE) {
    await catchUp(chat).catch(() => undefined);
  }
  await refreshDetail();
}

let detailReads = 0; // the chats' reads started
const latestRead = new Map(); // chat -> its read that left last: only that one is shown

export async function refreshDetail() {
  const chat = state.current;
  if (!chat || state.signedOut) {
    return;
  }
  const read = ++detailReads;
  latestRead.set(chat, read);
  const version = state.turnVersion;
  const box = state.outboxes.get(chat);
  const boxTurn = box ? box.turn : null; // only a turn known before the read can be missing from it
  let data;
  try {
    data = await api("GET", urlFor("detail", chat));
  } catch (error) {
    if (chat === state.current) {
      failOpen(error);
    }
    return;
  }
  if (latestRead.get(chat) !== read) {
    return; // a later read of the chat (which knows more) is on its way
  }
  latestRead.delete(chat);
  const known = state.chats.get(chat);
  state.chats.set(chat, data.conversation);
  const item = listItem(chat);
  if (known && known.status !== data.conversation.status) {
    putChat(data.conversation, "top"); // archived and back in use after a new message: listed again
  } else if (item) {
    item.firstElementChild.textContent = chatTitle(data.conversation);
  }
  if (chat !== state.current) {
    return; // another chat opened meanwhile: the list shows this one's title, the rest is the open chat's
  }
  showHeader(data.conversation);
  if (boxTurn && (!data.turn || data.turn.id !== boxTurn)) {
    settleOutbox(box); // its turn ended while this tab was not told (a lost socket)
  }
  if (version !== state.turnVersion) {
    return; // the turn changed while this was read: the newer news stands
  }
  if (data.turn) {
    applyTurn(data.turn.id, data.turn.status);
  } else if (!state.sending && state.turn) {
    setTurn(null);
  }
}

function failOpen(error) {
  if (error.code === "network") {
    return; // the socket reconnects and subscribes again
  }
  if (error.code === "not_found") {
    chatGone(state.current);
  } else if (!SESSION_CODES.has(error.code)) {
    showBanner(errorText(error));
  }
}

export function chatGone(id) {
  const item = listItem(id);
  if (item) {
    item.remove();
  }
  state.chats.delete(id);
  if (state.current === id) {
    openChat(null, { replace: true });
    showBanner(messageFor("not_found"));
  }
}

export function touchChat(message) {
  // The open chat has new activity: it moves to the top of the list. A message read from its
  // history is not new: opening a chat leaves the list's order alone.
  const view = state.chats.get(state.current);
  const item = listItem(state.current);
  if (view && message.created_at && Date.parse(message.created_at) <= Date.parse(view.last_message_at)) {
    return;
  }
  if (view) {
    view.last_message_at = message.created_at || view.last_message_at;
  }
  if (view && item && item !== ui.list.firstElementChild) {
    ui.list.prepend(item);
  }
  if (view && !view.title) {
    refreshDetail();
  }
}

export function idFromLocation() {
  const [prefix, suffix] = urlFor("open").split(PLACEHOLDER);
  const path = location.pathname;
  if (path.startsWith(prefix) && path.endsWith(suffix) && path.length > prefix.length + suffix.length) {
    return decodeURIComponent(path.slice(prefix.length, path.length - suffix.length));
  }
  return null;
}

export function openRename() {
  const view = state.chats.get(state.current);
  ui.renameTitle.value = view ? view.title : "";
  ui.renameError.textContent = "";
  ui.renameDialog.showModal();
  ui.renameTitle.select();
}

export async function rename(event) {
  event.preventDefault();
  const chat = state.current;
  try {
    const data = await api("POST", urlFor("rename", chat), { title: ui.renameTitle.value });
    putChat(data.conversation);
    if (chat === state.current) {
      showHeader(data.conversation);
    }
    ui.renameDialog.close();
    ui.rename.focus();
  } catch (error) {
    ui.renameError.textContent = errorText(error);
  }
}

export async function archive() {
  const chat = state.current;
  try {
    const data = await api("POST", urlFor("archive", chat));
    putChat(data.conversation);
    if (chat === state.current) {
      showHeader(data.conversation);
      ui.rename.focus();
    }
  } catch (error) {
    showBanner(errorText(error));
  }
}

export async function restore() {
  const chat = state.current;
  try {
    const data = await api("POST", urlFor("restore", chat));
    const archivedView = state.listMode === "archived";
    if (state.listMode === "active") {
      putChat(data.conversation, "top");
    } else {
      putChat(data.conversation);
    }
    if (archivedView) {
      // It left this list: say where it went, and how to get there.
      const note = interpolate(gettext("“%(title)s” is back among your chats."), { title: chatTitle(data.conversation) }, true);
      showListNote(note);
    }
    if (chat === state.current) {
      showHeader(data.conversation);
      ui.archive.focus();
    }
  } catch (error) {
    showBanner(errorText(error));
  }
}

function showListNote(text) {
  const note = document.createElement("span");
  note.textContent = text + " ";
  const back = document.createElement("button");
  back.type = "button";
  back.className = "button-small list-note-action";
  back.textContent = gettext("Show my chats");
  back.addEventListener("click", () => {
    showList("active");
    ui.showArchived.focus();
  });
  ui.listStatus.replaceChildren(note, back);
}

export function openDelete() {
  ui.deleteError.textContent = "";
  ui.deleteDialog.showModal();
  ui.deleteDialog.querySelector(".dialog-close").focus(); // a destructive choice starts on Cancel
}

export async function remove(event) {
  event.preventDefault();
  const chat = state.current;
  try {
    await api("POST", urlFor("delete", chat));
    ui.deleteDialog.close();
    chatGone(chat);
    hideBanner();
    ui.newChat.focus();
  } catch (error) {
    ui.deleteError.textContent = errorText(error);
  }
}

function closeSidebar() {
  document.body.classList.remove("sidebar-open");
  ui.toggleSidebar.setAttribute("aria-expanded", "false");
}
