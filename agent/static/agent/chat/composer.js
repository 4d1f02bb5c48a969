/* The composer: sending (with the outbox that keeps the user's words), Stop, the turn's state.
 *
 * Nothing written is lost: the words are kept per chat across reloads until sent, a counter shows
 * near the length limit, a paste too long for a message goes with it as a text file, and a message
 * written while a turn runs waits, queued, for the turn's end.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

import { announce, ask, config, messageFor, showBanner, state, ui } from "./page.js";
import { api, errorText, urlFor } from "./api.js";
import { bubble, catchUp, dropDraft, setActionsEnabled } from "./messages.js";

export function signedOut(code) {
  if (state.signedOut) {
    return;
  }
  state.signedOut = true;
  showBanner(messageFor(code || "session_gone"), code !== "impersonated");
  ui.connection.hidden = true;
  if (state.socket) {
    state.socket.close();
  }
  updateComposer();
}

const HISTORY_CHARS = config.history_chars;

const COUNT_FROM = 0.8; // the counter shows from this share of the limit on

const count = document.getElementById("composer-count");

const queuedBox = document.getElementById("queued");

const touch = window.matchMedia("(pointer: coarse)");

/* On a touch keyboard Enter starts a new line and Send sends; elsewhere Enter sends. */
export function enterSends(event) {
  return event.key === "Enter" && !event.shiftKey && !event.isComposing && !touch.matches;
}

function showTouchHints() {
  const hint = touch.matches ? ui.text.dataset.touchPlaceholder : ui.text.dataset.keyboardPlaceholder;
  ui.text.dataset.keyboardPlaceholder = ui.text.dataset.keyboardPlaceholder || ui.text.placeholder;
  ui.text.placeholder = hint || ui.text.dataset.keyboardPlaceholder;
}

showTouchHints();
touch.addEventListener("change", showTouchHints);

// -- the words kept per chat (localStorage), until sent --------------------------------------------

const DRAFT_KEY = "agent.composer.";

function draftKey(chat) {
  return DRAFT_KEY + (chat || "new");
}

export function keepWords(chat, text = ui.text.value) {
  try {
    if (text) {
      localStorage.setItem(draftKey(chat), text);
    } else {
      localStorage.removeItem(draftKey(chat));
    }
  } catch (error) {
    // storage full or refused: the words stay in the box, only not across a reload
  }
}

export function restoreWords(chat) {
  let kept;
  try {
    kept = localStorage.getItem(draftKey(chat));
  } catch (error) {
    kept = null;
  }
  ui.text.value = kept || "";
  showCount();
}

function forgetWords(chat) {
  try {
    localStorage.removeItem(draftKey(chat));
  } catch (error) {
    // nothing kept
  }
}

ui.text.addEventListener("input", () => {
  keepWords(state.current);
  showCount();
  updateComposer();
});

export function showCount() {
  const length = ui.text.value.length;
  count.hidden = length < COUNT_FROM * HISTORY_CHARS;
  count.dataset.over = String(length > HISTORY_CHARS);
  count.textContent = length > HISTORY_CHARS
    ? interpolate(gettext("%(count)s of %(max)s characters: %(over)s too many to send."), {
      count: length.toLocaleString(), max: HISTORY_CHARS.toLocaleString(), over: (length - HISTORY_CHARS).toLocaleString(),
    }, true)
    : interpolate(gettext("%(count)s of %(max)s characters."), {
      count: length.toLocaleString(), max: HISTORY_CHARS.toLocaleString(),
    }, true);
}

ui.text.addEventListener("paste", (event) => {
  // A paste that would pass the limit goes with the message as a text file, whole, not cut.
  const pasted = event.clipboardData ? event.clipboardData.getData("text/plain") : "";
  if (!pasted || !state.files) {
    return;
  }
  const kept = ui.text.value.length - (ui.text.selectionEnd - ui.text.selectionStart);
  if (kept + pasted.length <= HISTORY_CHARS) {
    return;
  }
  event.preventDefault();
  const file = new File([pasted], pastedName(), { type: "text/plain" });
  state.files.take([file], { note: readingNote(pasted) });
  ui.composerNote.textContent = interpolate(
    gettext("The pasted text (%(count)s characters) is too long for a message: it goes with it as a file."),
    { count: pasted.length.toLocaleString() }, true);
});

function readingNote(text) {
  // How much of a long paste the assistant reads: the server keeps a file's first characters only.
  const length = Array.from(text).length; // characters as the server counts them, not UTF-16 units
  const limit = config.attachment_text_chars;
  if (length <= limit) {
    return "";
  }
  return interpolate(gettext("The assistant reads the first %(limit)s of its %(count)s characters."), {
    limit: limit.toLocaleString(), count: length.toLocaleString(),
  }, true);
}

let pastes = 0;

function pastedName() {
  pastes += 1;
  return pastes === 1 ? "pasted.txt" : `pasted-${pastes}.txt`;
}

// -- a message written while a turn runs waits for its end ------------------------------------------

function showQueued() {
  const queued = state.queued && state.queued.chat === state.current ? state.queued : null;
  if (!queued) {
    queuedBox.replaceChildren();
    queuedBox.hidden = true;
    return;
  }
  const element = bubble("user");
  element.classList.replace("msg-user", "msg-queued");
  element.querySelector(".bubble").textContent = queued.text;
  const status = document.createElement("span");
  status.className = "outbox-status";
  status.textContent = gettext("Queued: sent when the assistant is done.");
  const cancel = document.createElement("button");
  cancel.type = "button";
  cancel.className = "button-small queued-cancel";
  cancel.textContent = gettext("Cancel");
  cancel.title = gettext("Do not send it: the words go back into the message box");
  cancel.addEventListener("click", unqueue);
  element.append(status, cancel);
  queuedBox.replaceChildren(element);
  queuedBox.hidden = false;
  ui.emptyState.hidden = true;
  ui.scroller.scrollTop = ui.scroller.scrollHeight;
}

function queue(text) {
  state.queued = { chat: state.current, text: text };
  ui.text.value = "";
  forgetWords(state.current);
  showCount();
  showQueued();
  updateComposer();
  ui.text.focus();
}

function unqueue() {
  const queued = state.queued;
  state.queued = null;
  showQueued();
  if (queued) {
    putBack(queued.text);
    keepWords(queued.chat);
  }
  ui.text.focus();
}

export function chatSwitched() {
  // A queued message belongs to its chat: switching away gives the words back to that chat's box.
  if (state.queued && state.queued.chat !== state.current) {
    const queued = state.queued;
    state.queued = null;
    try {
      const kept = localStorage.getItem(draftKey(queued.chat)) || "";
      localStorage.setItem(draftKey(queued.chat), kept ? queued.text + "\n\n" + kept : queued.text);
    } catch (error) {
      // not kept across chats
    }
  }
  showQueued();
}

function composerHeld() {
  // The composer's words stay where they are, and the note says why when the user could not see it.
  const blocker = sendBlocker();
  if (blocker === "files") {
    heldBack = true;
    ui.composerNote.textContent = gettext("Not sent yet: a file is still on its way. Send once every file is ready.");
  }
  return blocker !== "";
}

function sendQueued() {
  const queued = state.queued;
  const waiting = state.turn || state.sending || state.outboxes.has(state.current);
  if (!queued || queued.chat !== state.current || waiting || state.signedOut) {
    return; // it goes once the chat is free: no turn, and the last message stored
  }
  state.queued = null;
  showQueued();
  send(queued.text);
}

/* Why the composer's words cannot go now ("" when they can): the one rule Send's button and Enter
 * both follow. A file still uploading or being read holds the message back, so it never goes without it. */
export function sendBlocker() {
  const text = ui.text.value;
  if (state.signedOut) {
    return "signed_out";
  }
  if (!text.trim()) {
    return "empty";
  }
  if (state.files && state.files.busy()) {
    return "files";
  }
  if (text.length > HISTORY_CHARS) {
    return "too_long";
  }
  const waiting = state.turn || state.sending || state.outboxes.has(state.current);
  return waiting && state.queued ? "queue_full" : "";
}

export function updateComposer() {
  const busy = Boolean(state.turn);
  const off = state.signedOut;
  ui.text.disabled = off; // typing goes on while a turn runs; Send then queues
  const blocker = sendBlocker();
  ui.send.disabled = Boolean(blocker);
  if (heldBack && blocker !== "files") {
    heldBack = false;
    ui.composerNote.textContent = "";
  }
  ui.attach.disabled = off;
  ui.stop.hidden = !busy || off;
  ui.working.hidden = !busy || off;
  ui.newChat.disabled = off;
  ui.actions.hidden = !state.current || off;
  showMessageActions();
  sendQueued();
}

export function showMessageActions() {
  // A message's Edit, Regenerate and version arrows (messages.js) wait while a turn runs.
  setActionsEnabled(!state.turn && !state.sending && !state.signedOut && !state.outboxes.has(state.current));
}

export function setTurn(turnId) {
  const wasBusy = Boolean(state.turn);
  state.turn = turnId;
  state.turnVersion += 1;
  if (!turnId) {
    dropDraft(); // no turn runs: no answer is being written
  }
  updateComposer();
  if (wasBusy && !turnId && (document.activeElement === document.body || document.activeElement === ui.stop)) {
    ui.text.focus();
  }
}

export function applyTurn(turnId, status) {
  if (status === "ended") {
    state.endedTurns.add(turnId);
    const box = state.outboxes.get(state.current);
    if (box && box.turn === turnId) {
      settleOutbox(box);
    }
    if (!state.turn || state.turn === turnId) {
      setTurn(null);
      announce("detail-stale");
    }
    return;
  }
  if (!state.endedTurns.has(turnId)) {
    setTurn(turnId);
  }
}

export function showOutbox() {
  const box = state.outboxes.get(state.current);
  if (!box) {
    ui.outbox.replaceChildren();
    ui.outbox.hidden = true;
    return;
  }
  const element = bubble("user");
  element.classList.replace("msg-user", "msg-outbox");
  element.querySelector(".bubble").textContent = box.text;
  if (box.turn) {
    // The server took it (its turn is queued): sent, though the worker has yet to store it in the chat.
    element.classList.add("msg-outbox-taken");
  } else {
    const status = document.createElement("span");
    status.className = "outbox-status";
    status.textContent = gettext("Sending…");
    element.append(status);
  }
  ui.outbox.replaceChildren(element);
  ui.outbox.hidden = false;
  ui.emptyState.hidden = true;
  ui.scroller.scrollTop = ui.scroller.scrollHeight;
}

export function claimOutbox(view) {
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

export async function settleOutbox(box) {
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
  keepWords(box.chat);
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
  showCount();
  updateComposer();
}

let heldBack = false; // Enter was pressed while a file was on its way: the note says why nothing went

export async function send(queuedText) {
  // `queuedText`: the words of the message queued while a turn ran, sent now that it has ended;
  // without it, the composer's own words, when the composer's rule lets them go.
  const fromQueue = typeof queuedText === "string";
  const text = fromQueue ? queuedText : ui.text.value;
  if (fromQueue ? !text.trim() || state.signedOut : composerHeld()) {
    return;
  }
  if (state.turn || state.sending || state.outboxes.has(state.current)) {
    if (!fromQueue && !state.queued) {
      queue(text); // sent when the turn ends
    }
    return;
  }
  const box = { text: text, chat: state.current, turn: null, after: state.last ? state.last.seq : -1 };
  state.sending = true;
  state.outboxes.set(box.chat, box);
  ui.composerError.textContent = "";
  ui.composerNote.textContent = "";
  if (!fromQueue) {
    ui.text.value = "";
    forgetWords(box.chat);
    showCount();
  }
  showOutbox();
  updateComposer();
  try {
    if (!box.chat) {
      const created = await api("POST", urlFor("create"), {});
      announce("chat-created", created.conversation);
      state.outboxes.delete(null);
      box.chat = created.conversation.id;
      state.outboxes.set(box.chat, box);
      await ask("open-chat", box.chat, { push: true, fresh: true });
    }
    const files = !state.files ? [] : state.files.readyIds();
    const data = await api("POST", urlFor("send", box.chat), { text: text, attachment_ids: files });
    box.turn = data.turn.id;
    if (state.files) {
      state.files.sent();
    }
    if (box.chat === state.current) {
      showOutbox();
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
    keepWords(state.current);
    ui.composerError.textContent = errorText(error);
  } finally {
    state.sending = false;
    updateComposer();
  }
}

export async function stop() {
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
