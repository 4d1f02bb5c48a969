/* The event stream over HTTP: one chat's frames through EventSource, for networks that block websockets.
 *
 * The server's first frame is `subscribed` (the messages after the last one the page has); then come
 * the websocket's frames for the chat. Each message is the event's id, so when the connection drops the
 * browser opens the stream again by itself from the last message it got (Last-Event-ID), and that new
 * first frame carries only what was missed. A refusal closes the stream for good; EventSource does not
 * say why, so one plain request to the same address reads the refusal's code.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

import { announce, SESSION_CODES, state } from "./page.js";
import { ApiError, urlFor } from "./api.js";

const ENDS_STREAM = new Set(["error", "ready", "conversation_gone"]); // the server ends the stream after these

let open = null; // {source, chat, waiter}: the one stream of the page

export function eventsChat() {
  return open ? open.chat : null;
}

export function closeEvents() {
  if (!open) {
    return;
  }
  const stream = open;
  open = null;
  stream.source.close();
  if (stream.waiter) {
    stream.waiter.reject(new ApiError("network")); // the page subscribes again over whatever serves it now
  }
}

/* Open `chat`'s stream after message `after` (null: its latest page). Resolves with the first frame;
 * later frames go to `onFrame`, and a stream closed for good after that goes to `onLost(chat, error)`. */
export function openEvents(chat, after, onFrame, onLost) {
  closeEvents();
  const query = new URLSearchParams({ conversation: chat });
  if (after) {
    query.set("after", after);
  }
  const url = urlFor("events") + "?" + query.toString();
  return new Promise((resolve, reject) => {
    const stream = { source: new EventSource(url), chat: chat, waiter: { resolve: resolve, reject: reject } };
    open = stream;
    stream.source.addEventListener("message", (event) => {
      if (open !== stream) {
        return;
      }
      if (state.signedOut) {
        closeEvents();
        return;
      }
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch (error) {
        return;
      }
      if (ENDS_STREAM.has(frame.type)) {
        stream.source.close(); // not opened again by the browser: the page decides what comes next
        open = null;
      }
      if (frame.type === "subscribed" && stream.waiter) {
        const waiter = stream.waiter;
        stream.waiter = null;
        waiter.resolve(frame);
        return;
      }
      onFrame(frame);
    });
    stream.source.addEventListener("error", async () => {
      if (open !== stream || stream.source.readyState !== EventSource.CLOSED) {
        return; // the browser is opening it again by itself
      }
      open = null;
      const refused = await refusalOf(url);
      const failure = new ApiError(refused.error, null, refused.message);
      if (SESSION_CODES.has(failure.code)) {
        announce("signed-out", failure.code);
      }
      const retry = failure.code === "network" || failure.code === "server";
      if (stream.waiter) {
        stream.waiter.reject(failure); // the subscribe shows a refusal; it does not try again
      }
      if (!stream.waiter || retry) {
        onLost(chat, failure);
      }
    });
  });
}

async function refusalOf(url) {
  // The same request once more, read as the JSON refusal the server answers before any stream:
  // its code and its words.
  const controller = new AbortController();
  try {
    const response = await fetch(url, {
      credentials: "same-origin", headers: { Accept: "application/json" }, signal: controller.signal,
    });
    if (response.ok) {
      controller.abort(); // it would stream now: the refusal, if any, has passed
      return { error: "network" };
    }
    const data = await response.json().catch(() => null);
    return data && data.error ? data : { error: "server" };
  } catch (error) {
    return { error: "network" };
  }
}
