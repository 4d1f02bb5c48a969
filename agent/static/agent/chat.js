/* The chat page: chats and messages over the JSON API, live updates over the websocket.
 *
 * No build step and a strict CSP: no inline script, style or handlers. Only an
 * assistant answer's `html` (sanitised on the server) is inserted as HTML;
 * everything else goes in as text. Every fixed phrase goes through gettext()
 * from Django's JavaScriptCatalog, loaded before this file.
 */
(function () {
  "use strict";

  const root = document.getElementById("agent-app");
  if (!root) {
    return;
  }

  const PLACEHOLDER = "00000000-0000-0000-0000-000000000000";
  const PAGE = Number(root.dataset.pageSize) || 50;
  const SESSION_CODES = new Set(["session_gone", "mismatch", "inactive", "impersonated"]);
  const CLOSE_SESSION_ENDED = 4401;

  const $ = (id) => document.getElementById(id);
  const ui = {
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
    remove: $("delete-chat"),
    banner: $("banner"),
    connection: $("connection"),
    scroller: $("messages"),
    log: $("message-log"),
    outbox: $("outbox"),
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

  const state = {
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
    sending: false,
    // chat id (null: a chat not created yet) -> the words sent there and not yet seen stored:
    // {text, chat, turn, after}. Until a user message of `turn` arrives they can go back.
    outboxes: new Map(),
    signedOut: false,
    socket: null,
    ready: false,
    attempts: 0,
    nextRef: 1,
    pending: new Map(), // frame ref -> {resolve, reject}
  };

  // -- words ----------------------------------------------------------------

  function refusalText(code) {
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
    };
    if (SESSION_CODES.has(code) && code !== "impersonated") {
      return gettext("You were signed out. Sign in again to go on.");
    }
    return texts[code] || gettext("Something went wrong. Try again.");
  }

  function cardStatusText(status) {
    const texts = {
      waiting: gettext("Waiting for your decision."),
      working: gettext("Working…"),
      done: gettext("Done."),
      cancelled: gettext("Cancelled."),
      expired: gettext("Expired: nothing was changed."),
      stale: gettext("Not done: the data changed since it was proposed."),
      failed: gettext("Failed: nothing was changed."),
    };
    return texts[status] || status;
  }

  // -- HTTP -------------------------------------------------------------------

  class ApiError extends Error {
    constructor(code, fields, explained) {
      super(code);
      this.code = code;
      this.fields = fields || null;
      this.explained = explained || ""; // a limit's own words from the server: which, how much, until when
    }
  }

  function urlFor(name, id) {
    const pattern = root.dataset["url" + name.charAt(0).toUpperCase() + name.slice(1)];
    return id ? pattern.replace(PLACEHOLDER, encodeURIComponent(id)) : pattern;
  }

  function csrfToken() {
    const input = root.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  async function api(method, url, body) {
    const options = { method: method, credentials: "same-origin", headers: { Accept: "application/json" } };
    if (method === "POST") {
      options.headers["Content-Type"] = "application/json";
      options.headers["X-CSRFToken"] = csrfToken();
      options.body = JSON.stringify(body || {});
    }
    let response;
    try {
      response = await fetch(url, options);
    } catch (error) {
      throw new ApiError("network");
    }
    let data = null;
    try {
      data = await response.json();
    } catch (error) {
      data = null;
    }
    if (!response.ok) {
      const failure = new ApiError((data && data.error) || "server", data && data.fields, data && data.message);
      if (SESSION_CODES.has(failure.code)) {
        signedOut(failure.code);
      }
      throw failure;
    }
    return data;
  }

  function errorText(error) {
    if (error instanceof ApiError && error.code === "invalid" && error.fields) {
      return Object.values(error.fields).flat().join(" ");
    }
    if (error instanceof ApiError && error.explained) {
      return error.explained;
    }
    return refusalText(error instanceof ApiError ? error.code : "server");
  }

  // -- banners and the composer's state ------------------------------------------

  function showBanner(text, withLogin) {
    ui.banner.replaceChildren(document.createTextNode(text));
    if (withLogin) {
      const link = document.createElement("a");
      link.href = root.dataset.loginUrl + "?next=" + encodeURIComponent(location.pathname);
      link.textContent = gettext("Sign in");
      ui.banner.append(" ", link);
    }
    ui.banner.hidden = false;
  }

  function hideBanner() {
    ui.banner.hidden = true;
    ui.banner.replaceChildren();
  }

  function signedOut(code) {
    if (state.signedOut) {
      return;
    }
    state.signedOut = true;
    showBanner(refusalText(code || "session_gone"), code !== "impersonated");
    ui.connection.hidden = true;
    if (state.socket) {
      state.socket.close();
    }
    updateComposer();
  }

  function setConnection(text) {
    ui.connection.textContent = text || "";
    ui.connection.hidden = !text;
  }

  function updateComposer() {
    const busy = Boolean(state.turn);
    const off = state.signedOut;
    ui.text.disabled = busy || off;
    ui.send.disabled = busy || off || state.sending || state.outboxes.has(state.current);
    ui.stop.hidden = !busy || off;
    ui.working.hidden = !busy || off;
    ui.newChat.disabled = off;
    ui.actions.hidden = !state.current || off;
    showMessageActions();
  }

  // -- Retry and Edit: a new turn with earlier words; what was stored stays as it is -------------

  const RETRYABLE = new Set(["model_failed", "max_rounds", "stopped", "deadline", "interrupted"]);

  function showMessageActions() {
    ui.log.querySelectorAll(".msg-again").forEach((button) => button.remove());
    const idle = !state.turn && !state.sending && !state.signedOut && !state.outboxes.has(state.current);
    if (!idle) {
      return;
    }
    const last = ui.log.lastElementChild;
    const lastUser = Array.from(ui.log.querySelectorAll(".msg-user")).pop();
    if (!lastUser) {
      return;
    }
    const words = state.messages.get(lastUser.dataset.id).content;
    if (last && last.classList.contains("msg-notice") && RETRYABLE.has(last.dataset.noticeCode)) {
      last.append(againButton("msg-retry", gettext("Retry"), gettext("Send your last message again"), () => {
        send(words);
      }));
    }
    lastUser.append(againButton("msg-edit", gettext("Edit"), gettext("Edit your last message and send it again"), () => {
      ui.text.value = words;
      ui.composerNote.textContent = gettext("Sending makes a new turn; your earlier message stays in the chat.");
      ui.text.focus();
      ui.text.setSelectionRange(words.length, words.length);
    }));
  }

  function againButton(className, text, label, action) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "button-small msg-again " + className;
    button.textContent = text;
    button.title = label;
    button.addEventListener("click", action);
    return button;
  }

  function setTurn(turnId) {
    const wasBusy = Boolean(state.turn);
    state.turn = turnId;
    state.turnVersion += 1;
    updateComposer();
    if (wasBusy && !turnId && (document.activeElement === document.body || document.activeElement === ui.stop)) {
      ui.text.focus();
    }
  }

  function applyTurn(turnId, status) {
    if (status === "ended") {
      state.endedTurns.add(turnId);
      const box = state.outboxes.get(state.current);
      if (box && box.turn === turnId) {
        settleOutbox(box);
      }
      if (!state.turn || state.turn === turnId) {
        setTurn(null);
        refreshDetail();
      }
      return;
    }
    if (!state.endedTurns.has(turnId)) {
      setTurn(turnId);
    }
  }

  // -- the chat list -----------------------------------------------------------------

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

  function putChat(view, where) {
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

  async function loadChats() {
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

  function showList(mode, query) {
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

  function searchSoon() {
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

  function nearEnd(box) {
    return box.scrollHeight - box.scrollTop - box.clientHeight < 80;
  }

  // -- messages ----------------------------------------------------------------------

  function resetMessages() {
    state.messages.clear();
    state.cards.clear();
    state.first = null;
    state.last = null;
    state.olderDone = true;
    state.turn = null;
    state.endedTurns.clear();
    ui.log.replaceChildren();
    ui.olderStatus.textContent = "";
    ui.emptyState.hidden = false;
    showOutbox();
  }

  function atBottom() {
    return ui.scroller.scrollHeight - ui.scroller.scrollTop - ui.scroller.clientHeight < 60;
  }

  function addMessages(views, options) {
    const stick = options && options.older ? false : atBottom();
    views.forEach((view) => addMessage(view));
    showMessageActions();
    if (stick || (options && options.scrollDown)) {
      ui.scroller.scrollTop = ui.scroller.scrollHeight;
    }
  }

  function addMessage(view) {
    if (view.conversation && view.conversation !== state.current) {
      return;
    }
    if (view.role === "notice" && view.confirmation) {
      setCardStatus(view.confirmation.id, view.confirmation.status);
    }
    if (state.messages.has(view.id)) {
      if (view.role === "tool" && view.confirmation) {
        setCardStatus(view.confirmation.id, view.confirmation.status);
      }
      return;
    }
    state.messages.set(view.id, view);
    if (!state.first || view.seq < state.first.seq) {
      state.first = { id: view.id, seq: view.seq };
    }
    if (!state.last || view.seq > state.last.seq) {
      state.last = { id: view.id, seq: view.seq };
    }
    const element = messageElement(view);
    if (!element) {
      return;
    }
    element.dataset.seq = String(view.seq);
    element.dataset.id = view.id;
    insertInOrder(element, view.seq);
    ui.emptyState.hidden = true;
    if (view.role === "user") {
      touchChat();
      claimOutbox(view);
    }
  }

  // -- words on their way: shown at once, given back if their turn ends without storing them --

  function showOutbox() {
    const box = state.outboxes.get(state.current);
    if (!box) {
      ui.outbox.replaceChildren();
      ui.outbox.hidden = true;
      return;
    }
    const element = bubble("user");
    element.classList.replace("msg-user", "msg-outbox");
    element.querySelector(".bubble").textContent = box.text;
    const status = document.createElement("span");
    status.className = "outbox-status";
    status.textContent = gettext("Sending…");
    element.append(status);
    ui.outbox.replaceChildren(element);
    ui.outbox.hidden = false;
    ui.emptyState.hidden = true;
    ui.scroller.scrollTop = ui.scroller.scrollHeight;
  }

  function claimOutbox(view) {
    // Shown stored: the pending copy goes. Its turn's id decides; before the id is known, the text.
    const box = state.outboxes.get(view.conversation);
    if (!box || !isOwnMessage(box, view)) {
      return;
    }
    state.outboxes.delete(box.chat);
    if (box.chat === state.current) {
      showOutbox();
      updateComposer();
    }
  }

  function isOwnMessage(box, view) {
    if (view.role !== "user" || view.conversation !== box.chat) {
      return false;
    }
    if (box.turn && view.turn) {
      return view.turn === box.turn;
    }
    return view.seq > box.after && view.content === box.text;
  }

  async function settleOutbox(box) {
    // The box's turn ended. Read what the chat stored since; if its user message is not there,
    // the words go back into the composer.
    if (state.outboxes.get(box.chat) !== box || box.settling || box.chat !== state.current) {
      return; // settled already, settling, or decided when its chat is open again
    }
    box.settling = true;
    try {
      await catchUp(box.chat);
    } catch (error) {
      // unreadable now: the words go back rather than be lost
    } finally {
      box.settling = false;
    }
    if (state.outboxes.get(box.chat) !== box || box.chat !== state.current) {
      return;
    }
    state.outboxes.delete(box.chat);
    showOutbox();
    putBack(box.text);
    ui.composerNote.textContent = gettext("Your message was not sent. It is back in the message box.");
  }

  function dropOutbox(box) {
    if (state.outboxes.get(box.chat) === box) {
      state.outboxes.delete(box.chat);
    }
    if (box.chat === state.current) {
      showOutbox();
    }
  }

  function putBack(text) {
    // Whatever was typed since stays too, after the words that came back.
    const typed = ui.text.value;
    ui.text.value = typed.trim() && typed !== text ? text + "\n\n" + typed : text;
    updateComposer();
  }

  function insertInOrder(element, seq) {
    let after = ui.log.lastElementChild;
    while (after && Number(after.dataset.seq) > seq) {
      after = after.previousElementSibling;
    }
    if (after) {
      after.after(element);
    } else {
      ui.log.prepend(element);
    }
  }

  function messageElement(view) {
    if (view.role === "assistant") {
      if (!view.content) {
        return null; // a step that only calls tools: the tool lines say what happened
      }
      const element = bubble("assistant");
      const body = element.querySelector(".bubble");
      body.classList.add("markdown");
      body.innerHTML = view.html; // sanitised on the server: raw HTML escaped, unsafe links dropped
      dressAnswer(body);
      element.append(timeElement(view.created_at));
      return element;
    }
    if (view.role === "tool") {
      return view.confirmation && view.confirmation.preview !== undefined ? cardElement(view) : toolElement(view);
    }
    if (view.role === "notice") {
      const element = document.createElement("div");
      element.className = "msg msg-notice";
      element.dataset.noticeCode = view.notice_code || "";
      element.dataset.tone = view.notice_tone || "info";
      const text = document.createElement("span");
      text.className = "notice-text";
      text.textContent = view.notice_text || view.notice_code || "";
      element.append(text, timeElement(view.created_at));
      return element;
    }
    const element = bubble(view.role === "user" ? "user" : "other");
    element.querySelector(".bubble").textContent = view.content;
    element.append(timeElement(view.created_at));
    return element;
  }

  function dressAnswer(body) {
    // Wide tables scroll on their own; each code block gets a copy button.
    body.querySelectorAll("table").forEach((table) => {
      const box = document.createElement("div");
      box.className = "table-box";
      box.tabIndex = 0;
      box.setAttribute("role", "region");
      box.setAttribute("aria-label", gettext("Table"));
      table.replaceWith(box);
      box.append(table);
    });
    body.querySelectorAll("pre.code-block").forEach((pre) => {
      const box = document.createElement("div");
      box.className = "code-box";
      const button = document.createElement("button");
      button.type = "button";
      button.className = "button-small code-copy";
      button.textContent = gettext("Copy");
      button.addEventListener("click", () => copyCode(pre, button));
      pre.replaceWith(box);
      box.append(pre, button);
    });
  }

  async function copyCode(pre, button) {
    const text = pre.textContent;
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = gettext("Copied");
    } catch (error) {
      const range = document.createRange();
      range.selectNodeContents(pre);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      button.textContent = gettext("Selected: press Ctrl+C");
    }
    window.setTimeout(() => {
      button.textContent = gettext("Copy");
    }, 2000);
  }

  // -- times: relative, the full date on hover, in the page's language ---------------------------

  const LANGUAGE = document.documentElement.lang || undefined;
  const relative = new Intl.RelativeTimeFormat(LANGUAGE, { numeric: "auto" });
  const full = new Intl.DateTimeFormat(LANGUAGE, { dateStyle: "full", timeStyle: "short" });
  const UNITS = [["year", 31536000], ["month", 2592000], ["week", 604800], ["day", 86400], ["hour", 3600], ["minute", 60]];

  function relativeText(date) {
    const seconds = (date.getTime() - Date.now()) / 1000;
    for (const [unit, size] of UNITS) {
      if (Math.abs(seconds) >= size) {
        return relative.format(Math.round(seconds / size), unit);
      }
    }
    return relative.format(0, "second");
  }

  function timeElement(iso) {
    const time = document.createElement("time");
    time.className = "msg-time";
    if (!iso) {
      return time;
    }
    const date = new Date(iso);
    time.dateTime = iso;
    time.title = full.format(date);
    time.textContent = relativeText(date);
    return time;
  }

  function refreshTimes() {
    ui.log.querySelectorAll("time.msg-time[datetime]").forEach((time) => {
      time.textContent = relativeText(new Date(time.dateTime));
    });
  }

  function bubble(kind) {
    const element = document.createElement("div");
    element.className = "msg msg-" + kind;
    const label = document.createElement("span");
    label.className = "visually-hidden";
    label.textContent = kind === "user" ? gettext("You:") : gettext("Assistant:");
    const body = document.createElement("div");
    body.className = "bubble";
    element.append(label, body);
    return element;
  }

  function toolElement(view) {
    // One line per step, in words that never contradict the answer: a count only for a step
    // that worked, and a malformed call reads as the assistant's own retry.
    const summary = view.tool_summary || { name: view.tool_name, outcome: view.tool_outcome };
    const element = document.createElement("div");
    element.className = "msg msg-tool";
    element.dataset.outcome = summary.outcome || "";
    const title = view.tool_title || summary.name || "?";
    let text = summary.outcome === "ok" ? title : interpolate(stepText(summary.outcome), { title: title }, true);
    if (summary.outcome === "ok" && summary.count !== null && summary.count !== undefined) {
      text += " · " + interpolate(ngettext("%(count)s item", "%(count)s items", summary.count), { count: summary.count }, true);
    }
    if (summary.outcome === "ok" && summary.truncated) {
      text += " · " + gettext("shortened");
    }
    element.textContent = text;
    return element;
  }

  function stepText(outcome) {
    const texts = {
      error: gettext("%(title)s: failed"),
      denied: gettext("%(title)s: not allowed"),
      invalid_arguments: gettext("%(title)s: the assistant corrects its request"),
      needs_confirmation: gettext("%(title)s: waits for you"),
    };
    return texts[outcome] || "%(title)s";
  }

  function cardElement(view) {
    const card = view.confirmation;
    const element = document.createElement("section");
    element.className = "msg card";
    element.dataset.confirmation = card.id;

    const header = document.createElement("div");
    header.className = "card-header";
    const title = document.createElement("h3");
    title.className = "card-title";
    title.id = "card-title-" + card.id;
    title.textContent = view.tool_title || gettext("Confirm this change");
    const badge = document.createElement("span");
    badge.className = "card-state";
    header.append(title, badge);
    element.setAttribute("aria-labelledby", title.id);
    element.append(header, previewElement(card.fields || []));

    const buttons = document.createElement("div");
    buttons.className = "card-actions";
    const confirmButton = document.createElement("button");
    confirmButton.type = "button";
    confirmButton.className = "button-primary card-confirm";
    confirmButton.textContent = gettext("Confirm");
    confirmButton.addEventListener("click", () => decide(card.id, "confirm"));
    const cancelButton = document.createElement("button");
    cancelButton.type = "button";
    cancelButton.className = "card-cancel";
    cancelButton.textContent = gettext("Cancel");
    cancelButton.addEventListener("click", () => decide(card.id, "cancel"));
    buttons.append(confirmButton, cancelButton);

    const status = document.createElement("p");
    status.className = "card-status";
    status.setAttribute("role", "status");
    const error = document.createElement("p");
    error.className = "card-error";
    error.setAttribute("role", "alert");
    element.append(buttons, status, error);

    state.cards.set(card.id, element);
    showCardStatus(element, card.status);
    return element;
  }

  function previewElement(fields) {
    // Labelled rows in the user's language, built on the server; empty ones never arrive.
    const list = document.createElement("dl");
    list.className = "card-preview";
    fields.forEach((field) => {
      const term = document.createElement("dt");
      term.textContent = field.label;
      term.dataset.key = field.key;
      const detail = document.createElement("dd");
      detail.textContent = field.value;
      list.append(term, detail);
    });
    list.hidden = !fields.length;
    return list;
  }

  function cardStateText(status) {
    const texts = {
      waiting: gettext("Waiting"),
      working: gettext("Working…"),
      done: gettext("Done"),
      cancelled: gettext("Cancelled"),
      expired: gettext("Expired"),
      stale: gettext("The data changed"),
      failed: gettext("Failed"),
    };
    return texts[status] || status;
  }

  function showCardStatus(element, status) {
    element.dataset.status = status;
    element.querySelector(".card-state").textContent = cardStateText(status);
    element.querySelector(".card-status").textContent = cardStatusText(status);
    const waiting = status === "waiting";
    const actions = element.querySelector(".card-actions");
    actions.hidden = !(waiting || status === "working");
    actions.querySelectorAll("button").forEach((button) => {
      button.disabled = !waiting || state.signedOut;
    });
    if (!waiting && status !== "working") {
      element.querySelector(".card-error").textContent = "";
    }
  }

  function setCardStatus(confirmationId, status) {
    const element = state.cards.get(confirmationId);
    if (element) {
      showCardStatus(element, status);
    }
  }

  async function decide(confirmationId, action) {
    const element = state.cards.get(confirmationId);
    if (!element || element.dataset.status !== "waiting") {
      return;
    }
    showCardStatus(element, "working");
    try {
      const data = await api("POST", urlFor(action, confirmationId));
      if (element.dataset.status === "working") {
        showCardStatus(element, data.confirmation.status);
      }
    } catch (error) {
      if (error.code === "expired") {
        showCardStatus(element, "expired");
      } else if (element.dataset.status === "working") {
        showCardStatus(element, error.code === "not_waiting" ? "working" : "waiting");
        element.querySelector(".card-error").textContent = errorText(error);
      }
    }
  }

  async function loadOlder() {
    if (!state.current || state.olderDone || state.olderLoading || !state.first) {
      return;
    }
    const chat = state.current;
    state.olderLoading = true;
    ui.olderStatus.textContent = gettext("Loading earlier messages…");
    ui.log.setAttribute("aria-busy", "true");
    try {
      const data = await api("GET", urlFor("messages", chat) + "?before=" + encodeURIComponent(state.first.id) + "&limit=" + PAGE);
      if (chat !== state.current) {
        return;
      }
      const height = ui.scroller.scrollHeight;
      addMessages(data.messages, { older: true });
      ui.scroller.scrollTop += ui.scroller.scrollHeight - height;
      state.olderDone = data.messages.length < PAGE;
      ui.olderStatus.textContent = "";
    } catch (error) {
      ui.olderStatus.textContent = errorText(error);
      return;
    } finally {
      state.olderLoading = false;
      ui.log.removeAttribute("aria-busy");
    }
    fillUp();
  }

  function fillUp() {
    // A page that does not fill the box cannot be scrolled up: load the next one now.
    if (!state.olderDone && ui.scroller.scrollHeight <= ui.scroller.clientHeight + 80) {
      loadOlder();
    }
  }

  async function catchUp(chat) {
    // After a long disconnect the resync page may be full: read on until the end.
    for (;;) {
      const from = state.last ? "after=" + encodeURIComponent(state.last.id) : "latest=1";
      const data = await api("GET", urlFor("messages", chat) + "?" + from + "&limit=" + PAGE);
      if (chat !== state.current) {
        return;
      }
      addMessages(data.messages);
      if (data.messages.length < PAGE) {
        return;
      }
    }
  }

  // -- opening a chat ------------------------------------------------------------------

  function showHeader(view) {
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

  async function openChat(id, options) {
    const opts = options || {};
    if (state.current && state.current !== id) {
      sendFrame({ type: "unsubscribe", conversation: state.current });
    }
    state.current = id;
    resetMessages();
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

  async function subscribe(chat) {
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

  async function refreshDetail() {
    const chat = state.current;
    if (!chat || state.signedOut) {
      return;
    }
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
    if (chat !== state.current) {
      return;
    }
    state.chats.set(chat, data.conversation);
    showHeader(data.conversation);
    const item = listItem(chat);
    if (item) {
      item.firstElementChild.textContent = chatTitle(data.conversation);
    }
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

  function chatGone(id) {
    const item = listItem(id);
    if (item) {
      item.remove();
    }
    state.chats.delete(id);
    if (state.current === id) {
      openChat(null, { replace: true });
      showBanner(refusalText("not_found"));
    }
  }

  function touchChat() {
    // The open chat has new activity: it moves to the top of the list.
    const view = state.chats.get(state.current);
    const item = listItem(state.current);
    if (view && item && item !== ui.list.firstElementChild) {
      ui.list.prepend(item);
    }
    if (view && !view.title) {
      refreshDetail();
    }
  }

  function idFromLocation() {
    const [prefix, suffix] = urlFor("open").split(PLACEHOLDER);
    const path = location.pathname;
    if (path.startsWith(prefix) && path.endsWith(suffix) && path.length > prefix.length + suffix.length) {
      return decodeURIComponent(path.slice(prefix.length, path.length - suffix.length));
    }
    return null;
  }

  // -- sending and stopping -------------------------------------------------------------

  async function send(again) {
    // `again`: the words of an earlier turn, sent as a new one (Retry); the composer keeps what it holds.
    const retry = typeof again === "string";
    const text = retry ? again : ui.text.value;
    if (!text.trim() || state.turn || state.sending || state.signedOut || state.outboxes.has(state.current)) {
      return;
    }
    const box = { text: text, chat: state.current, turn: null, after: state.last ? state.last.seq : -1 };
    state.sending = true;
    state.outboxes.set(box.chat, box);
    ui.composerError.textContent = "";
    ui.composerNote.textContent = "";
    if (!retry) {
      ui.text.value = "";
    }
    showOutbox();
    updateComposer();
    try {
      if (!box.chat) {
        const created = await api("POST", urlFor("create"), {});
        if (state.listMode === "active") {
          putChat(created.conversation, "top");
        } else {
          ui.search.value = "";
          showList("active"); // a new chat is shown among the active ones
        }
        ui.listStatus.textContent = "";
        state.outboxes.delete(null);
        box.chat = created.conversation.id;
        state.outboxes.set(box.chat, box);
        await openChat(box.chat, { push: true, fresh: true });
      }
      const data = await api("POST", urlFor("send", box.chat), { text: text });
      box.turn = data.turn.id;
      if (box.chat === state.current) {
        applyTurn(data.turn.id, data.turn.status);
        const own = Array.from(state.messages.values()).find((view) => isOwnMessage(box, view));
        if (own) {
          claimOutbox(own); // it arrived before this answer did
        } else if (state.endedTurns.has(box.turn)) {
          settleOutbox(box); // and so did its end
        }
      }
    } catch (error) {
      // Refused at the start (busy, limits, validation, the network): the words go back.
      dropOutbox(box);
      putBack(text);
      ui.composerError.textContent = errorText(error);
    } finally {
      state.sending = false;
      updateComposer();
    }
  }

  async function stop() {
    if (!state.current) {
      return;
    }
    ui.stop.disabled = true;
    try {
      await api("POST", urlFor("stop", state.current));
    } catch (error) {
      ui.composerError.textContent = errorText(error);
    } finally {
      ui.stop.disabled = false;
    }
  }

  // -- rename, archive, delete ---------------------------------------------------------------

  function openRename() {
    const view = state.chats.get(state.current);
    ui.renameTitle.value = view ? view.title : "";
    ui.renameError.textContent = "";
    ui.renameDialog.showModal();
    ui.renameTitle.select();
  }

  async function rename(event) {
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

  async function archive() {
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

  async function restore() {
    const chat = state.current;
    try {
      const data = await api("POST", urlFor("restore", chat));
      if (state.listMode === "active") {
        putChat(data.conversation, "top");
      } else {
        putChat(data.conversation);
      }
      if (chat === state.current) {
        showHeader(data.conversation);
        ui.archive.focus();
      }
    } catch (error) {
      showBanner(errorText(error));
    }
  }

  function openDelete() {
    ui.deleteError.textContent = "";
    ui.deleteDialog.showModal();
  }

  async function remove(event) {
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

  // -- the websocket ---------------------------------------------------------------------------

  function connect() {
    if (state.signedOut) {
      return;
    }
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + location.host + root.dataset.websocketPath);
    state.socket = socket;
    socket.addEventListener("message", (event) => {
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch (error) {
        return;
      }
      if (socket === state.socket) {
        onFrame(frame);
      }
    });
    socket.addEventListener("close", (event) => {
      if (socket !== state.socket) {
        return;
      }
      state.socket = null;
      state.ready = false;
      state.pending.forEach((waiter) => waiter.reject(new ApiError("network")));
      state.pending.clear();
      if (event.code === CLOSE_SESSION_ENDED) {
        signedOut("session_gone");
        return;
      }
      if (!state.signedOut) {
        setConnection(gettext("Connection lost. Reconnecting…"));
        reconnectLater();
      }
    });
  }

  function reconnectLater() {
    // Jittered exponential backoff, so a restarted server is not hit by every tab at once.
    const ceiling = Math.min(30000, 500 * Math.pow(2, state.attempts));
    state.attempts += 1;
    window.setTimeout(connect, ceiling / 2 + Math.random() * (ceiling / 2));
  }

  function sendFrame(frame) {
    if (state.socket && state.ready) {
      state.socket.send(JSON.stringify(frame));
      return true;
    }
    return false;
  }

  function request(frame) {
    const ref = String(state.nextRef++);
    return new Promise((resolve, reject) => {
      if (!sendFrame(Object.assign({ ref: ref }, frame))) {
        reject(new ApiError("network"));
        return;
      }
      state.pending.set(ref, { resolve: resolve, reject: reject });
    });
  }

  function onFrame(frame) {
    const waiter = frame.ref ? state.pending.get(String(frame.ref)) : null;
    if (waiter) {
      state.pending.delete(String(frame.ref));
      if (frame.type === "error") {
        waiter.reject(new ApiError(frame.error, frame.fields, frame.message));
      } else {
        waiter.resolve(frame);
      }
      return;
    }
    switch (frame.type) {
      case "ready":
        state.ready = true;
        state.attempts = 0;
        setConnection("");
        if (state.current) {
          subscribe(state.current);
        }
        break;
      case "message":
        addMessages([frame.message]);
        break;
      case "turn":
        if (frame.conversation === state.current) {
          applyTurn(frame.turn, frame.status);
        }
        break;
      case "conversation":
        putChat(frame.conversation);
        if (frame.conversation.id === state.current) {
          showHeader(frame.conversation);
        }
        break;
      case "conversation_gone":
        chatGone(frame.conversation);
        break;
      case "error":
        if (SESSION_CODES.has(frame.error)) {
          signedOut(frame.error);
        } else if (frame.error === "forbidden") {
          showBanner(refusalText("forbidden"));
        }
        break;
      default:
        break;
    }
  }

  // -- wiring ----------------------------------------------------------------------------------

  function closeSidebar() {
    document.body.classList.remove("sidebar-open");
    ui.toggleSidebar.setAttribute("aria-expanded", "false");
  }

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
  });
  ui.composer.addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  ui.text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
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

  window.setInterval(refreshTimes, 60000);
  updateComposer();
  loadChats();
  connect();
  openChat(root.dataset.openConversation || null);
})();
