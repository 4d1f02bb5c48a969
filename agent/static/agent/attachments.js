/* The composer's files: attach button, drag and drop, paste; a chip per file.
 *
 * An ES module for the chat page (no build step, strict CSP: no inline script
 * or style; text goes in as text). Each chip shows the upload's progress, then
 * "processing", then "ready" or the failure in the user's language, with a
 * remove button; a ready picture shows its thumbnail, served only to its owner.
 * A refusal or a failed reading shows the server's own sentence (the upload's
 * error body, the file's `error_message`).
 *
 *   import { mountAttachments, renderFileChips } from "./attachments.js";
 *   const files = mountAttachments({ form, textarea, button, dropTarget, overlay, list, limits,
 *                                    pictureDialog });
 *   files.take([file], {note});     // attach files made on the page (a long paste as "pasted.txt"),
 *                                   // with a note its chip shows
 *   files.setConversation(id);      // when a chat opens (lists what waits in its composer)
 *   files.refresh();                // on the websocket's {"type": "attachment"} frame
 *   files.readyIds();               // the ids to send with the message (attachment_ids)
 *   files.busy();                   // true while a file uploads or is being read
 *   files.sent();                   // after the send was accepted: the chips leave the composer
 *
 * This module wires the page's controls to the parts in files/: tray.js (which files, in what order;
 * their calls over the page's transport), chips.js (the list view), upload.js (an upload with its
 * progress) and words.js (what they say). `openConversation`, if given, is awaited when files are
 * picked, dropped or pasted with no chat open; it opens one (setConversation). `limits` (the server's:
 * `maxBytes`, `maxFiles`, `extensions`) refuse a file before its upload starts, naming the limit.
 * `pictureDialog` (a <dialog> holding an <img>) shows a picture large when its thumbnail is clicked.
 */

import { usePictureDialog } from "./files/chips.js";
import { FileTray } from "./files/tray.js";

export { renderFileChips } from "./files/chips.js";

/* The hidden file input the attach button opens, offering the accepted endings. */
function fileInput(parent, extensions) {
  const input = document.createElement("input");
  input.type = "file";
  input.multiple = true;
  input.hidden = true;
  input.accept = extensions.join(",");
  parent.append(input);
  return input;
}

/* Files dragged over `target` show the overlay; dropped, they go to `take`. */
function acceptDrops(target, overlay, take) {
  let dragDepth = 0; // dragenter and dragleave come for every child crossed
  const showDropping = (on) => {
    target.classList.toggle("agent-drop-active", on);
    if (overlay) {
      overlay.hidden = !on;
    }
  };
  const carriesFiles = (event) => event.dataTransfer && [...event.dataTransfer.types].includes("Files");
  target.addEventListener("dragenter", (event) => {
    if (carriesFiles(event)) {
      dragDepth += 1;
      showDropping(true);
    }
  });
  target.addEventListener("dragover", (event) => {
    if (carriesFiles(event)) {
      event.preventDefault();
      showDropping(true);
    }
  });
  target.addEventListener("dragleave", () => {
    dragDepth = Math.max(0, dragDepth - 1);
    if (!dragDepth) {
      showDropping(false);
    }
  });
  target.addEventListener("drop", (event) => {
    dragDepth = 0;
    showDropping(false);
    if (event.dataTransfer && event.dataTransfer.files.length) {
      event.preventDefault();
      take([...event.dataTransfer.files]);
    }
  });
}

/* Files pasted into the message box go to `take` instead of the text. */
function acceptPastes(textarea, take) {
  textarea.addEventListener("paste", (event) => {
    const files = event.clipboardData ? [...event.clipboardData.files] : [];
    if (files.length) {
      event.preventDefault();
      take(files);
    }
  });
}

export function mountAttachments({
  form, textarea, button, dropTarget, overlay, list, onChange, openConversation, limits,
  pictureDialog,
}) {
  usePictureDialog(pictureDialog);
  const tray = new FileTray({
    list, limits, openConversation, onChange: () => onChange && onChange(files),
  });
  const take = (picked, extra) => tray.take(picked, extra);
  const input = fileInput(form || list, tray.limits.extensions);
  button.addEventListener("click", () => input.click());
  input.addEventListener("change", () => {
    take([...input.files]);
    input.value = "";
  });
  acceptDrops(dropTarget || form, overlay, take);
  if (textarea) {
    acceptPastes(textarea, take);
  }
  const files = {
    setConversation: (id, options) => tray.setConversation(id, options),
    take,
    refresh: () => tray.refresh(),
    readyIds: () => tray.readyIds(),
    busy: () => tray.busy(),
    sent: () => tray.sent(),
  };
  return files;
}
