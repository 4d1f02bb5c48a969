/* The chat page's entry point: wires the page's controls, keyboard shortcuts and the help dialog, then starts.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

import { mountAttachments } from "../attachments.js";
import { answer, config, on, state, ui } from "./page.js";
import { api, errorText, urlFor } from "./api.js";
import { connect } from "./socket.js";
import {
  archive, chatGone, idFromLocation, loadChats, nearEnd, openChat, openDelete, openRename, refreshDetail, remove,
  rename, restore, searchSoon, showList, showNewChat, subscribe, touchChat,
} from "./chats.js";
import { jumpToLatest, loadOlder, refreshTimes, showJump } from "./messages.js";
import {
  applyTurn, claimOutbox, enterSends, send, showMessageActions, showOutbox, signedOut, stop, updateComposer,
} from "./composer.js";
import { caughtUp, handleFrame } from "./frames.js";
import { mountVoice } from "./voice.js";

// What the transport and the lower views announce, and who on the page acts on it.
on("signed-out", signedOut);
on("resubscribe", () => {
  if (state.current) {
    subscribe(state.current);
  }
});
on("frame", handleFrame);
on("caught-up", caughtUp);
on("chat-gone", chatGone);
on("chat-created", showNewChat);
on("detail-stale", refreshDetail);
on("messages-reset", showOutbox);
on("messages-shown", showMessageActions);
on("user-message-shown", (view) => {
  touchChat(view);
  claimOutbox(view);
});
on("turn-started", (turn) => applyTurn(turn.id, turn.status));
answer("open-chat", openChat);

ui.toggleSidebar.addEventListener("click", () => {
  const open = document.body.classList.toggle("sidebar-open");
  ui.toggleSidebar.setAttribute("aria-expanded", String(open));
});
ui.newChat.addEventListener("click", () => openChat(null, { push: true }));
ui.listBox.addEventListener("scroll", () => {
  if (nearEnd(ui.listBox)) {
    loadChats();
  }
});
ui.scroller.addEventListener("scroll", () => {
  if (ui.scroller.scrollTop < 80) {
    loadOlder();
  }
  showJump(false);
});
ui.jump.addEventListener("click", jumpToLatest);
document.querySelectorAll(".suggestion").forEach((button) => {
  // A starter fills the message box, to be sent as it is or changed first.
  button.addEventListener("click", () => {
    ui.text.value = button.textContent;
    ui.text.dispatchEvent(new Event("input"));
    ui.text.focus();
  });
});
ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  send();
});
ui.text.addEventListener("keydown", (event) => {
  if (enterSends(event)) {
    event.preventDefault();
    send();
  }
});
ui.stop.addEventListener("click", stop);
ui.rename.addEventListener("click", openRename);
ui.renameForm.addEventListener("submit", rename);
ui.archive.addEventListener("click", archive);
ui.restore.addEventListener("click", restore);
ui.showArchived.addEventListener("click", () => {
  ui.search.value = "";
  showList(state.listMode === "archived" ? "active" : "archived");
});
ui.search.addEventListener("input", searchSoon);
ui.searchForm.addEventListener("submit", (event) => {
  event.preventDefault();
  searchSoon();
});
ui.remove.addEventListener("click", openDelete);
ui.deleteForm.addEventListener("submit", remove);
document.querySelectorAll(".dialog-close").forEach((button) => {
  button.addEventListener("click", () => button.closest("dialog").close());
});
window.addEventListener("popstate", () => openChat(idFromLocation()));

// -- the composer's files (attachments.js): a new chat is made when its first file comes -----------

async function openNewChat() {
  try {
    const created = await api("POST", urlFor("create"), {});
    showNewChat(created.conversation);
    await openChat(created.conversation.id, { push: true, fresh: true });
    state.madeForFiles = created.conversation.id; // it goes if it is left with nothing sent
  } catch (error) {
    ui.composerError.textContent = errorText(error);
    throw error;
  }
}

// Files dropped anywhere on the chat are attached; a new chat is made only once files are picked.
state.files = mountAttachments({
  form: ui.composer, textarea: ui.text, button: ui.attach, dropTarget: document.getElementById("chat"),
  overlay: document.getElementById("drop-overlay"), pictureDialog: document.getElementById("picture-dialog"),
  list: ui.files, onChange: () => updateComposer(), openConversation: openNewChat,
  limits: { maxBytes: config.max_file_bytes, maxFiles: config.max_files, extensions: config.accepted_extensions },
});

// The microphone, where the browser records and the user has a speech model: words into the box.
mountVoice({
  button: document.getElementById("record"), status: document.getElementById("voice-status"), openConversation: openNewChat,
});

// On a phone the top bar's links and settings are in a menu; Escape or a click elsewhere closes it.
ui.toggleMenu = document.getElementById("toggle-menu");
function showMenu(open) {
  document.body.classList.toggle("menu-open", open);
  ui.toggleMenu.setAttribute("aria-expanded", String(open));
}
ui.toggleMenu.addEventListener("click", () => showMenu(!document.body.classList.contains("menu-open")));
document.addEventListener("click", (event) => {
  if (document.body.classList.contains("menu-open") && !event.target.closest(".topbar")) {
    showMenu(false);
  }
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && document.body.classList.contains("menu-open")) {
    showMenu(false);
    ui.toggleMenu.focus();
  }
});

window.setInterval(refreshTimes, 60000);
updateComposer();
loadChats();
connect();
openChat(config.open_conversation || null);

// -- keyboard shortcuts, listed in the help dialog -------------------------------------------------

function typing(target) {
  return target instanceof HTMLElement && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
}

function jumpChat(step) {
  const links = Array.from(ui.list.querySelectorAll(".chat-link"));
  if (!links.length) {
    return;
  }
  const at = links.findIndex((link) => link.parentElement.dataset.id === state.current);
  const next = links[Math.min(links.length - 1, Math.max(0, at < 0 ? 0 : at + step))];
  next.focus();
  next.click();
}

function openShortcuts() {
  if (!ui.shortcutsDialog.open) {
    ui.shortcutsDialog.showModal();
  }
}

ui.showShortcuts.addEventListener("click", openShortcuts);
document.addEventListener("keydown", (event) => {
  if (event.defaultPrevented || event.isComposing || document.querySelector("dialog[open]")) {
    return; // a dialog keeps its own keys (Esc closes it)
  }
  const key = event.key;
  if (event.altKey && !event.ctrlKey && !event.metaKey && (key === "n" || key === "N" || event.code === "KeyN")) {
    event.preventDefault();
    openChat(null, { push: true });
  } else if (event.altKey && (key === "ArrowUp" || key === "ArrowDown")) {
    event.preventDefault();
    jumpChat(key === "ArrowUp" ? -1 : 1);
  } else if (key === "Escape" && state.turn && !ui.stop.hidden) {
    event.preventDefault();
    stop();
  } else if (typing(event.target) || event.altKey || event.ctrlKey || event.metaKey) {
    return;
  } else if (key === "/") {
    event.preventDefault();
    ui.text.focus();
  } else if (key === "?") {
    event.preventDefault();
    openShortcuts();
  }
});
