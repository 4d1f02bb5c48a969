/* The chat page's shared parts: its root element, the elements it works with, its state, and banners.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

export const root = document.getElementById("agent-app");

export const PLACEHOLDER = "00000000-0000-0000-0000-000000000000";

export const PAGE = Number(root.dataset.pageSize) || 50;

export const SESSION_CODES = new Set(["session_gone", "mismatch", "inactive", "impersonated"]);

export const CLOSE_SESSION_ENDED = 4401;

const $ = (id) => document.getElementById(id);

export const ui = {
  sidebar: $("sidebar"),
  toggleSidebar: $("toggle-sidebar"),
  newChat: $("new-chat"),
  listBox: $("chat-list-box"),
  list: $("chat-list"),
  listStatus: $("chat-list-status"),
  title: $("chat-title"),
  actions: $("chat-actions"),
  rename: $("rename-chat"),
  archive: $("archive-chat"),
  restore: $("restore-chat"),
  searchForm: $("chat-search-form"),
  search: $("chat-search"),
  showArchived: $("show-archived"),
  showShortcuts: $("show-shortcuts"),
  attach: $("attach"),
  files: $("composer-files"),
  shortcutsDialog: $("shortcuts-dialog"),
  remove: $("delete-chat"),
  banner: $("banner"),
  connection: $("connection"),
  scroller: $("messages"),
  log: $("message-log"),
  outbox: $("outbox"),
  draft: $("draft"),
  olderStatus: $("older-status"),
  emptyState: $("empty-state"),
  working: $("working"),
  composer: $("composer"),
  text: $("composer-text"),
  send: $("send"),
  stop: $("stop"),
  composerError: $("composer-error"),
  composerNote: $("composer-note"),
  renameDialog: $("rename-dialog"),
  renameForm: $("rename-form"),
  renameTitle: $("rename-title"),
  renameError: $("rename-error"),
  deleteDialog: $("delete-dialog"),
  deleteForm: $("delete-form"),
  deleteError: $("delete-error"),
};

export const state = {
  current: null, // the open chat's id; null for a new chat not created yet
  chats: new Map(), // id -> conversation view, as listed
  listMode: "active", // which chats the list shows: "active", "archived", or "search" (for `query`)
  query: "",
  listCursor: null,
  listDone: false,
  listLoading: false,
  messages: new Map(), // id -> message view, for dedupe
  first: null, // {id, seq} of the oldest message shown
  last: null, // {id, seq} of the newest
  olderDone: true,
  olderLoading: false,
  cards: new Map(), // confirmation id -> card element
  turn: null, // id of the chat's queued or running turn
  turnVersion: 0, // grows with every change of `turn`, so a late answer cannot undo a newer one
  endedTurns: new Set(),
  draft: null, // {turn, round} of the answer shown while the model writes it
  sending: false,
  // chat id (null: a chat not created yet) -> the words sent there and not yet seen stored:
  // {text, chat, turn, after}. Until a user message of `turn` arrives they can go back.
  outboxes: new Map(),
  signedOut: false,
  files: null, // the composer's files (attachments.js), mounted by main.js
  socket: null,
  ready: false,
  attempts: 0,
  nextRef: 1,
  pending: new Map(), // frame ref -> {resolve, reject}
};

export function refusalText(code) {
  const texts = {
    busy: gettext("The assistant is still working in this chat. Wait for it to finish or press Stop."),
    too_many_turns: gettext("You have too many turns running at once. Wait for one to finish."),
    endpoint_not_configured: gettext("No model is configured for the assistant yet. Ask the site's staff."),
    budget_exceeded: gettext("The assistant's spending limit for today was reached. Try again later."),
    off_purpose_blocked: gettext("The assistant is paused for you for a while. Try again later."),
    forbidden: gettext("You may not use the assistant."),
    not_found: gettext("This chat is no longer there."),
    expired: gettext("This request expired before it was decided."),
    not_waiting: gettext("This request was already decided."),
    impersonated: gettext("The assistant is not available while you act as another user."),
    network: gettext("The server could not be reached. Check your connection and try again."),
    csrf_failed: gettext("This page is out of date. Reload it and try again."),
    too_large: gettext("This is too much to send at once."),
    too_many_chats: gettext("You started too many chats in one minute. Try again in a minute."),
    too_many_uploads: gettext("Too many files in one minute. Try again in a minute."),
    storage_full: gettext("Your files take all the room you may use. Remove files you no longer need."),
  };
  if (SESSION_CODES.has(code) && code !== "impersonated") {
    return gettext("You were signed out. Sign in again to go on.");
  }
  return texts[code] || gettext("Something went wrong. Try again.");
}

export function showBanner(text, withLogin) {
  ui.banner.replaceChildren(document.createTextNode(text));
  if (withLogin) {
    const link = document.createElement("a");
    link.href = root.dataset.loginUrl + "?next=" + encodeURIComponent(location.pathname);
    link.textContent = gettext("Sign in");
    ui.banner.append(" ", link);
  }
  ui.banner.hidden = false;
}

export function hideBanner() {
  ui.banner.hidden = true;
  ui.banner.replaceChildren();
}

export function setConnection(text) {
  ui.connection.textContent = text || "";
  ui.connection.hidden = !text;
}
