/* The composer: sending (with the outbox that keeps the user's words), Stop, the turn's state.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

import { refusalText, showBanner, state, ui } from "./page.js";
import { api, errorText, urlFor } from "./api.js";
import { openChat, putChat, refreshDetail, showList } from "./chats.js";
import { bubble, catchUp, dropDraft, setActionsEnabled } from "./messages.js";

export function signedOut(code) {
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

export function updateComposer() {
  const busy = Boolean(state.turn);
  const off = state.signedOut;
  ui.text.disabled = busy || off;
  const reading = Boolean(state.files && state.files.busy());
  ui.send.disabled = busy || off || reading || state.sending || state.outboxes.has(state.current);
  ui.attach.disabled = off;
  ui.stop.hidden = !busy || off;
  ui.working.hidden = !busy || off;
  ui.newChat.disabled = off;
  ui.actions.hidden = !state.current || off;
  showMessageActions();
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
      refreshDetail();
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
  const status = document.createElement("span");
  status.className = "outbox-status";
  status.textContent = gettext("Sending…");
  element.append(status);
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

export async function send() {
  const text = ui.text.value;
  if (!text.trim() || state.turn || state.sending || state.signedOut || state.outboxes.has(state.current)) {
    return;
  }
  const box = { text: text, chat: state.current, turn: null, after: state.last ? state.last.seq : -1 };
  state.sending = true;
  state.outboxes.set(box.chat, box);
  ui.composerError.textContent = "";
  ui.composerNote.textContent = "";
  ui.text.value = "";
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
    const files = !state.files ? [] : state.files.readyIds();
    const data = await api("POST", urlFor("send", box.chat), { text: text, attachment_ids: files });
    box.turn = data.turn.id;
    if (files.length) {
      state.files.sent();
    }
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
