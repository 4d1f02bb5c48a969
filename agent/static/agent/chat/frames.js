/* What the live transport's frames do to the page: a message shown, a draft grown, a turn's state, a
 * chat changed or gone, a file read, a refusal. socket.js announces each frame on the page's bus;
 * main.js hands them here.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

import { messageFor, SESSION_CODES, showBanner, state } from "./page.js";
import { chatGone, putChat, refreshDetail, showHeader } from "./chats.js";
import { dropDraft, messagesArrived, reloadLine, showDraft } from "./messages.js";
import { applyTurn, signedOut } from "./composer.js";

export function handleFrame(frame) {
  switch (frame.type) {
    case "message":
      messagesArrived([frame.message]);
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
        showBanner(frame.message || messageFor("forbidden"));
      }
      break;
    default:
      break;
  }
}

export function caughtUp(frame) {
  // The event stream, reopened by the browser, sent what came after the last message shown.
  if (frame.conversation === state.current) {
    messagesArrived(frame.messages);
    refreshDetail();
  }
}
