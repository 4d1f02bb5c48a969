/* The page's live transport: the websocket, or the event stream over HTTP where no websocket gets through.
 *
 * The websocket is tried first, with jittered backoff. When it cannot open (two tries failed, or none
 * open within five seconds, as behind a proxy that blocks websockets) the open chat's events come over
 * the event stream instead (eventstream.js), and the websocket is tried again in the background; once
 * it is ready the page goes back to it. Each switch subscribes again from the last message shown, so
 * nothing is lost or shown twice. Writes go over HTTP either way. What the frames say is announced on
 * the page's bus ("frame", "resubscribe", "caught-up", "chat-gone", "signed-out"); frames.js reads them.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

import { announce, CLOSE_SESSION_ENDED, config, setConnection, state } from "./page.js";
import { ApiError } from "./api.js";
import { closeEvents, eventsChat, openEvents } from "./eventstream.js";

const OPEN_WITHIN_MS = 5000; // a websocket not open by then counts as blocked
const FAILED_TRIES = 2; // so do this many tries in a row that closed before they opened
const RETRY_SOCKET_MS = 30000; // while on the event stream, the websocket is tried again this often

const link = { failures: 0, fallback: false, retry: null };

export function connect() {
  if (state.signedOut) {
    return;
  }
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const trial = link.fallback; // tried in the background while the event stream serves the page
  let socket;
  try {
    socket = new WebSocket(scheme + location.host + config.websocket_path);
  } catch (error) {
    // Refused outright (a policy or an extension that forbids websockets): the event stream serves the page.
    if (trial) {
      tryAgainLater();
    } else {
      fallBack();
    }
    return;
  }
  let opened = false;
  let tooMany = ""; // the server's words when this user holds too many sockets and streams already
  if (!trial) {
    state.socket = socket;
  }
  const giveUp = window.setTimeout(() => {
    if (!trial && socket === state.socket && !opened) {
      fallBack();
    }
    socket.close();
  }, OPEN_WITHIN_MS);
  socket.addEventListener("message", (event) => {
    let frame;
    try {
      frame = JSON.parse(event.data);
    } catch (error) {
      return;
    }
    if (frame.type === "error" && frame.error === "too_many_streams") {
      tooMany = frame.message;
    }
    if (frame.type === "ready" && !opened) {
      // Open means the server said ready: a proxy may accept the upgrade and then pass nothing on.
      opened = true;
      window.clearTimeout(giveUp);
      if (!trial) {
        link.failures = 0;
      } else if (link.fallback && !state.signedOut) {
        backToSocket(socket);
      }
    }
    if (socket === state.socket) {
      onFrame(frame);
    }
  });
  socket.addEventListener("close", (event) => {
    window.clearTimeout(giveUp);
    if (socket !== state.socket) {
      if (trial && link.fallback) {
        tryAgainLater();
      }
      return;
    }
    state.socket = null;
    state.ready = false;
    state.pending.forEach((waiter) => waiter.reject(new ApiError("network")));
    state.pending.clear();
    if (event.code === CLOSE_SESSION_ENDED) {
      announce("signed-out", "session_gone");
      return;
    }
    if (state.signedOut) {
      return;
    }
    if (tooMany) {
      // Too many tabs hold the assistant open: say so, and try again later rather than at once.
      setConnection(tooMany);
      tryAgainLater();
      return;
    }
    link.failures = opened ? 0 : link.failures + 1;
    if (link.failures >= FAILED_TRIES) {
      fallBack();
      return;
    }
    setConnection(gettext("Connection lost. Reconnecting…"));
    reconnectLater();
  });
}

function fallBack() {
  // The websocket is blocked: the open chat's events come over HTTP, and the socket is tried again later.
  link.fallback = true;
  state.socket = null;
  state.ready = true;
  state.attempts = 0;
  setConnection("");
  tryAgainLater();
  announce("resubscribe");
}

function backToSocket(socket) {
  // The page reads what it missed from the websocket's subscribe (from the last message shown), so the
  // stream can close first: nothing between the two is lost, and what both bring is shown once.
  link.fallback = false;
  link.failures = 0;
  window.clearTimeout(link.retry);
  closeEvents();
  state.socket = socket;
  state.ready = false;
}

function tryAgainLater() {
  window.clearTimeout(link.retry);
  link.retry = window.setTimeout(connect, RETRY_SOCKET_MS);
}

function reconnectLater() {
  // Jittered exponential backoff, so a restarted server is not hit by every tab at once.
  const ceiling = Math.min(30000, 500 * Math.pow(2, state.attempts));
  state.attempts += 1;
  window.setTimeout(connect, ceiling / 2 + Math.random() * (ceiling / 2));
}

export function sendFrame(frame) {
  if (link.fallback) {
    if (frame.type === "unsubscribe" && eventsChat() === frame.conversation) {
      closeEvents();
    }
    return frame.type === "unsubscribe";
  }
  if (state.socket && state.ready) {
    state.socket.send(JSON.stringify(frame));
    return true;
  }
  return false;
}

export function request(frame) {
  if (link.fallback) {
    if (frame.type === "subscribe") {
      return openEvents(frame.conversation, frame.after, onStreamFrame, onStreamLost);
    }
    return Promise.reject(new ApiError("network"));
  }
  const ref = String(state.nextRef++);
  return new Promise((resolve, reject) => {
    if (!sendFrame(Object.assign({ ref: ref }, frame))) {
      reject(new ApiError("network"));
      return;
    }
    state.pending.set(ref, { resolve: resolve, reject: reject });
  });
}

function onStreamFrame(frame) {
  if (!link.fallback) {
    return;
  }
  if (frame.type === "subscribed") {
    announce("caught-up", frame); // the browser opened the stream again on its own, after the last message it had
    return;
  }
  onFrame(frame);
}

function onStreamLost(chat, error) {
  // The stream closed for good outside a subscribe: a refusal, or a network that came and went.
  if (!link.fallback || chat !== state.current || state.signedOut) {
    return;
  }
  if (error.code === "not_found") {
    announce("chat-gone", chat);
  } else if (error.code === "too_many_streams") {
    setConnection(error.explained);
  } else if (error.code === "network" || error.code === "server") {
    window.setTimeout(() => {
      if (link.fallback && chat === state.current && !eventsChat()) {
        announce("resubscribe");
      }
    }, 2000 + Math.random() * 3000);
  }
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
  if (frame.type === "ready") {
    state.ready = true;
    state.attempts = 0;
    setConnection("");
    announce("resubscribe");
    return;
  }
  announce("frame", frame);
}
