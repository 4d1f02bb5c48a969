/* The chat page's shared parts: its config, the elements it works with, its state, and banners.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

/* Every fact the page needs from the server (its limits, codes, URLs and sentences), in one JSON
 * script element the chat view renders. */
export const config = JSON.parse(document.getElementById("agent-config").textContent);

export const PLACEHOLDER = config.placeholder;

export const PAGE = config.messages_page;

export const SESSION_CODES = new Set(config.session_codes);

export const CLOSE_SESSION_ENDED = config.close_codes.session_ended;

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
  jump: $("jump-latest"),
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
  madeForFiles: null, // the chat this page made when files came with no chat open, until it is used or left
  socket: null,
  ready: false,
  attempts: 0,
  nextRef: 1,
  pending: new Map(), // frame ref -> {resolve, reject}
};

/* A page situation's sentence, in the user's language, as the server words its refusals. */
export function messageFor(code) {
  return config.messages[code] || gettext("Something went wrong. Try again.");
}

/* The page's bus. Transport (api, socket, event stream) and the lower views announce what happened
 * and never import the views above them; main.js wires who listens (`on`) and who answers a question
 * a view asks (`answer`, `ask`), so every module imports only downward. */
const bus = new EventTarget();
const answers = new Map();

export function announce(name, detail) {
  bus.dispatchEvent(new CustomEvent(name, { detail: detail }));
}

export function on(name, listener) {
  bus.addEventListener(name, (event) => listener(event.detail));
}

export function answer(name, responder) {
  answers.set(name, responder);
}

export function ask(name, ...args) {
  return answers.get(name)(...args);
}

export function showBanner(text, withLogin) {
  ui.banner.replaceChildren(document.createTextNode(text));
  if (withLogin) {
    const link = document.createElement("a");
    link.href = config.login_url + "?next=" + encodeURIComponent(location.pathname);
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
