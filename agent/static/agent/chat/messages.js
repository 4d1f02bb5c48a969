/* Messages in the log: bubbles, steps, notices, answers (tables, code with copy), drafts, times, older pages,
 * and each message's actions: Copy, Edit (the user's), Regenerate (answers and failed turns), "< i/n >" versions.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

import { announce, PAGE, state, ui } from "./page.js";
import { api, errorText, urlFor } from "./api.js";
import { cardElement, setCardStatus } from "./cards.js";
import { renderFileChips } from "../attachments.js";

export function resetMessages() {
  state.messages.clear();
  state.cards.clear();
  state.first = null;
  state.last = null;
  state.olderDone = true;
  state.turn = null;
  dropDraft();
  state.endedTurns.clear();
  ui.log.replaceChildren();
  ui.olderStatus.textContent = "";
  ui.emptyState.hidden = false;
  ui.jump.hidden = true;
  announce("messages-reset");
}

function atBottom() {
  return ui.scroller.scrollHeight - ui.scroller.scrollTop - ui.scroller.clientHeight < 60;
}

/* "Jump to the latest" shows while the user reads further up, marked when something new came below. */
export function showJump(arrived) {
  const away = !atBottom();
  ui.jump.hidden = !away;
  if (!away) {
    ui.jump.dataset.fresh = "false";
  } else if (arrived) {
    ui.jump.dataset.fresh = "true";
  }
}

export function jumpToLatest() {
  ui.scroller.scrollTop = ui.scroller.scrollHeight;
  showJump(false);
  ui.scroller.focus();
}

export function addMessages(views, options) {
  const older = Boolean(options && options.older);
  const stick = older ? false : atBottom();
  const count = state.messages.size;
  views.forEach((view) => addMessage(view));
  announce("messages-shown");
  if (stick || (options && options.scrollDown)) {
    ui.scroller.scrollTop = ui.scroller.scrollHeight;
  }
  showJump(!older && state.messages.size > count);
}

function addMessage(view) {
  if (view.conversation && view.conversation !== state.current) {
    return;
  }
  if (view.role === "notice" && view.confirmation) {
    const card = view.confirmation;
    setCardStatus(card.id, card.status, Boolean((view.notice_params || {}).edited), card.fields);
  }
  if (state.messages.has(view.id)) {
    if (view.role === "tool" && view.confirmation) {
      setCardStatus(view.confirmation.id, view.confirmation.status, view.confirmation.edited);
    }
    return;
  }
  state.messages.set(view.id, view);
  if (view.role === "assistant" && view.turn) {
    dropDraft(view.turn);
  }
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
  addActions(element, view);
  element.dataset.seq = String(view.seq);
  element.dataset.id = view.id;
  insertInOrder(element, view.seq);
  ui.emptyState.hidden = true;
  if (view.role === "user") {
    announce("user-message-shown", view);
  }
}

export function showDraft(frame) {
  // The answer so far (never stored), rendered on the server by the stored answers' rules, in the
  // same bubble style, until the stored answer replaces it. Only of the turn the page knows to run,
  // and of a round whose answer it does not show yet.
  const answered = answersOf(frame.turn);
  if (frame.conversation !== state.current || frame.turn !== state.turn || frame.round <= answered) {
    return;
  }
  const stick = atBottom();
  if (!state.draft || state.draft.turn !== frame.turn || state.draft.round !== frame.round) {
    const element = bubble("assistant");
    element.classList.add("msg-draft");
    element.querySelector(".bubble").classList.add("markdown");
    ui.draft.replaceChildren(element);
    state.draft = { turn: frame.turn, round: frame.round };
  }
  const body = ui.draft.querySelector(".bubble");
  if (typeof frame.html === "string") {
    body.innerHTML = frame.html; // sanitised on the server, as a stored answer is
  } else {
    body.textContent = frame.text;
  }
  ui.draft.hidden = false;
  ui.emptyState.hidden = true;
  if (stick) {
    ui.scroller.scrollTop = ui.scroller.scrollHeight;
  }
  showJump(true);
}

function answersOf(turnId) {
  // A round stores one answer, so a turn's rounds with an answer shown are its answers counted.
  let count = 0;
  state.messages.forEach((view) => {
    count += view.role === "assistant" && view.turn === turnId ? 1 : 0;
  });
  return count;
}

export function dropDraft(turnId) {
  // The stored answer or the turn's end takes the draft's place.
  if (turnId && (!state.draft || state.draft.turn !== turnId)) {
    return;
  }
  state.draft = null;
  ui.draft.replaceChildren();
  ui.draft.hidden = true;
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
      // A step that only calls tools: the tool lines say what happened. When it has versions (an answer
      // after a tool call, answered again), the turn's versions begin here: it shows their "< i/n >" alone.
      return view.versions ? versionsOnly() : null;
    }
    const element = bubble("assistant");
    const body = element.querySelector(".bubble");
    body.classList.add("markdown");
    body.innerHTML = view.html; // sanitised on the server: raw HTML escaped, unsafe links dropped
    dressAnswer(body);
    if (view.partial) {
      // Cut short by a stop or the deadline: kept as far as it had come, and marked so.
      element.classList.add("msg-partial");
      const mark = document.createElement("span");
      mark.className = "msg-partial-mark";
      mark.textContent = gettext("Stopped");
      element.append(mark);
    }
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
  if (view.files && view.files.length) {
    const files = document.createElement("div");
    files.className = "msg-files";
    renderFileChips(files, view.files);
    element.append(files);
  }
  if (view.spoken) {
    // Words from a voice note, as the speech model heard them, sent without being read first.
    const mark = document.createElement("span");
    mark.className = "msg-spoken-mark";
    mark.textContent = gettext("Spoken");
    element.append(mark);
  }
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

export function refreshTimes() {
  ui.log.querySelectorAll("time.msg-time[datetime]").forEach((time) => {
    time.textContent = relativeText(new Date(time.dateTime));
  });
}

function versionsOnly() {
  const element = document.createElement("div");
  element.className = "msg msg-assistant msg-versions-only";
  return element;
}

export function bubble(kind) {
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

export async function loadOlder() {
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

export function fillUp() {
  // A page that does not fill the box cannot be scrolled up: load the next one now.
  if (!state.olderDone && ui.scroller.scrollHeight <= ui.scroller.clientHeight + 80) {
    loadOlder();
  }
}

export async function catchUp(chat) {
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

// -- a message's actions: Copy, Edit, Regenerate, and its versions ---------------------------------

const REGENERATE_AFTER = new Set(["model_failed", "max_rounds", "stopped", "deadline", "interrupted", "empty_answer"]);

function addActions(element, view) {
  const bar = document.createElement("div");
  bar.className = "msg-actions";
  if (view.versions) {
    bar.append(versionSwitch(view));
  }
  const text = copyableText(view);
  if (text) {
    bar.append(actionButton("msg-copy", gettext("Copy"), gettext("Copy the whole message"), (button) => copyText(text, button, element)));
  }
  if (view.role === "user") {
    bar.append(actionButton("msg-edit msg-turn-action", gettext("Edit"), gettext("Edit this message and send it again"), () => openEditor(element, view)));
  }
  if ((view.role === "assistant" && view.content) || (view.role === "notice" && offersRegenerate(view))) {
    bar.append(actionButton("msg-regenerate msg-turn-action", gettext("Regenerate"), gettext("Answer this again"), () => regenerate(view)));
  }
  if (bar.childElementCount) {
    element.append(bar);
  }
}

function offersRegenerate(notice) {
  // A turn that ended early offers Regenerate once: on the words it kept (a stopped answer), else on its notice.
  if (!REGENERATE_AFTER.has(notice.notice_code)) {
    return false;
  }
  for (const view of state.messages.values()) {
    if (view.role === "assistant" && view.content && notice.turn && view.turn === notice.turn) {
      return false;
    }
  }
  return true;
}

function copyableText(view) {
  if (view.role === "notice") {
    return view.notice_text || "";
  }
  return view.role === "user" || view.role === "assistant" ? view.content || "" : "";
}

function actionButton(className, text, description, action) {
  // Its name is the word it shows (what a voice user says to press it); the longer words describe it.
  const button = document.createElement("button");
  button.type = "button";
  button.className = "button-small msg-action " + className;
  button.textContent = text;
  button.title = description;
  button.addEventListener("click", () => action(button));
  return button;
}

function versionSwitch(view) {
  // "< i/n >": the message's versions; the arrows show the one before or after.
  const versions = view.versions;
  const box = document.createElement("span");
  box.className = "msg-versions";
  const label = document.createElement("span");
  label.className = "msg-versions-at";
  label.textContent = interpolate(gettext("%(index)s/%(count)s"), versions, true);
  label.title = interpolate(gettext("Version %(index)s of %(count)s"), versions, true);
  const earlier = versions.siblings[versions.index - 2];
  const later = versions.siblings[versions.index];
  const back = actionButton("msg-version-back msg-turn-action", "<", gettext("Show the previous version"), () => switchTo(earlier));
  const next = actionButton("msg-version-next msg-turn-action", ">", gettext("Show the next version"), () => switchTo(later));
  back.setAttribute("aria-label", back.title); // an arrow alone names nothing
  next.setAttribute("aria-label", next.title);
  back.disabled = !earlier;
  next.disabled = !later;
  back.dataset.keepDisabled = String(!earlier);
  next.dataset.keepDisabled = String(!later);
  box.append(back, label, next);
  return box;
}

async function switchTo(messageId) {
  const chat = state.current;
  if (!chat || !messageId) {
    return;
  }
  try {
    await api("POST", urlFor("switch", chat), { message: messageId });
    await reloadLine(chat); // this tab at once; the others on the event
  } catch (error) {
    ui.composerError.textContent = errorText(error);
  }
}

async function regenerate(view) {
  const chat = state.current;
  try {
    const data = await api("POST", urlFor("regenerate", chat), { message: view.id });
    announce("turn-started", data.turn);
    await reloadLine(chat);
  } catch (error) {
    ui.composerError.textContent = errorText(error);
  }
}

function openEditor(element, view) {
  // Inline: the message's text in a box, Save sends it as a new version (with the message's files).
  if (element.querySelector(".msg-editor")) {
    return;
  }
  const body = element.querySelector(".bubble");
  const form = document.createElement("form");
  form.className = "msg-editor";
  const box = document.createElement("textarea");
  box.className = "msg-editor-text";
  box.value = view.content;
  box.rows = Math.min(12, Math.max(2, view.content.split("\n").length));
  box.setAttribute("aria-label", gettext("Edit your message"));
  const save = document.createElement("button");
  save.type = "submit";
  save.className = "button-small msg-editor-save";
  save.textContent = gettext("Save");
  const cancel = document.createElement("button");
  cancel.type = "button";
  cancel.className = "button-small msg-editor-cancel";
  cancel.textContent = gettext("Cancel");
  const error = document.createElement("p");
  error.className = "msg-editor-error";
  error.setAttribute("role", "alert");
  const buttons = document.createElement("div");
  buttons.className = "msg-editor-buttons";
  buttons.append(cancel, save);
  form.append(box, buttons, error);
  body.hidden = true;
  element.classList.add("msg-editing");
  body.after(form);
  const close = () => {
    form.remove();
    body.hidden = false;
    element.classList.remove("msg-editing");
  };
  cancel.addEventListener("click", close);
  box.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      close();
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!box.value.trim() || save.disabled) {
      return;
    }
    const chat = state.current;
    save.disabled = true;
    try {
      const data = await api("POST", urlFor("edit", chat), { message: view.id, text: box.value });
      announce("turn-started", data.turn);
      close();
      await reloadLine(chat);
    } catch (failure) {
      error.textContent = errorText(failure);
      save.disabled = false;
    }
  });
  box.focus();
  box.setSelectionRange(box.value.length, box.value.length);
}

async function copyText(text, button, element) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = gettext("Copied");
  } catch (error) {
    // No clipboard API (an insecure origin, a refused permission): copy through a hidden box.
    const box = document.createElement("textarea");
    box.className = "copy-source";
    box.value = text;
    box.readOnly = true;
    element.append(box);
    box.select();
    let copied;
    try {
      copied = document.execCommand("copy");
    } catch (ignored) {
      copied = false;
    }
    box.remove();
    button.textContent = copied ? gettext("Copied") : gettext("Select the text and press Ctrl+C");
  }
  window.setTimeout(() => {
    button.textContent = gettext("Copy");
  }, 2000);
}

export function setActionsEnabled(idle) {
  // While a turn runs (or the page cannot act) a new version cannot start: Copy stays.
  ui.log.querySelectorAll(".msg-turn-action").forEach((button) => {
    button.disabled = !idle || button.dataset.keepDisabled === "true";
  });
}

const reloads = { started: 0, pending: 0, arrived: [] };
// The line's reads in flight, and the messages that came on frames meanwhile: a read that left before
// a message was stored must not wipe it from the log when its answer comes in after the message.

export function messagesArrived(views) {
  // Messages the live transport delivered: shown now, and kept for the line's reads in flight.
  if (reloads.pending) {
    reloads.arrived.push(...views);
  }
  addMessages(views);
}

export async function reloadLine(chat) {
  // The chat's line changed (here or in another tab): its latest page replaces what the log shows.
  // Only the read that left last is shown, with what arrived on frames after its page was read.
  const generation = ++reloads.started;
  reloads.pending += 1;
  let data;
  try {
    data = await api("GET", urlFor("messages", chat) + "?latest=1&limit=" + PAGE);
  } finally {
    reloads.pending -= 1;
  }
  const arrived = reloads.arrived;
  if (!reloads.pending) {
    reloads.arrived = [];
  }
  if (chat !== state.current || generation !== reloads.started) {
    return;
  }
  state.messages.clear();
  state.cards.clear();
  state.first = null;
  state.last = null;
  ui.log.replaceChildren();
  state.olderDone = data.messages.length < PAGE;
  ui.emptyState.hidden = data.messages.length > 0;
  const newest = Math.max(-Infinity, ...data.messages.map((view) => view.seq));
  const later = arrived.filter((view) => view.seq > newest); // stored after the page was read
  addMessages(data.messages.concat(later), { scrollDown: true });
}
