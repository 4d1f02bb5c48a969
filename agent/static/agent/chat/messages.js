/* Messages in the log: bubbles, steps, notices, answers (tables, code with copy), drafts, times, older pages.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

import { PAGE, state, ui } from "./page.js";
import { api, errorText, urlFor } from "./api.js";
import { touchChat } from "./chats.js";
import { cardElement, setCardStatus } from "./cards.js";
import { claimOutbox, showMessageActions, showOutbox } from "./composer.js";
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
  showOutbox();
}

function atBottom() {
  return ui.scroller.scrollHeight - ui.scroller.scrollTop - ui.scroller.clientHeight < 60;
}

export function addMessages(views, options) {
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
  element.dataset.seq = String(view.seq);
  element.dataset.id = view.id;
  insertInOrder(element, view.seq);
  ui.emptyState.hidden = true;
  if (view.role === "user") {
    touchChat(view);
    claimOutbox(view);
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
      return null; // a step that only calls tools: the tool lines say what happened
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
    renderFileChips(files, view.files, { attachmentFile: urlFor("file") });
    element.append(files);
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
