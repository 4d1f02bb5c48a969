/* The websocket: connect with jittered backoff, request/answer frames by ref, events to the page.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

import { CLOSE_SESSION_ENDED, refusalText, root, SESSION_CODES, setConnection, showBanner, state } from "./page.js";
import { ApiError } from "./api.js";
import { chatGone, putChat, showHeader, subscribe } from "./chats.js";
import { addMessages, dropDraft, reloadLine, showDraft } from "./messages.js";
import { applyTurn, signedOut } from "./composer.js";

export function connect() {
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

export function sendFrame(frame) {
  if (state.socket && state.ready) {
    state.socket.send(JSON.stringify(frame));
    return true;
  }
  return false;
}

export function request(frame) {
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
    case "delta":
      showDraft(frame);
      break;
    case "turn":
      if (frame.conversation === state.current) {
        if (frame.status === "ended") {
          dropDraft(frame.turn);
        }
        applyTurn(frame.turn, frame.status);
      }
      break;
    case "conversation":
      putChat(frame.conversation);
      if (frame.conversation.id === state.current) {
        showHeader(frame.conversation);
      }
      break;
    case "line_changed":
      if (frame.conversation === state.current) {
        reloadLine(frame.conversation).catch(() => {}); // a failed read is mended by the next event or resync
      }
      break;
    case "attachment":
      if (frame.conversation === state.current && state.files) {
        state.files.refresh();
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
