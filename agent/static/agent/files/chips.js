/* The files' list view: a chip per file of the composer, the chips of a sent message, and the picture
 * viewer a thumbnail opens. It draws the state it is given and keeps none of its own but the page's
 * picture <dialog>.
 *
 * An ES module of the chat page (no build step, strict CSP: text goes in as text).
 */

import { urlFor } from "../chat/api.js";
import { errorText } from "../http.js";
import { _, formatSize } from "./words.js";

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

let pictureViewer = null; // the page's picture <dialog>, set by usePictureDialog

/* Show pictures large in `dialog` (a <dialog> holding an <img>), else in a new tab. */
export function usePictureDialog(dialog) {
  pictureViewer = dialog || pictureViewer;
  if (pictureViewer) {
    pictureViewer.addEventListener("close", () => {
      pictureViewer.querySelector("img").removeAttribute("src");
    });
  }
}

function openPicture(url, name) {
  if (!pictureViewer) {
    window.open(url, "_blank", "noopener");
    return;
  }
  const title = pictureViewer.querySelector("h2");
  if (title) {
    title.textContent = name;
  }
  const image = pictureViewer.querySelector("img");
  image.src = url;
  image.alt = name;
  const download = pictureViewer.querySelector("a[download]");
  if (download) {
    download.href = url;
    download.download = name;
  }
  pictureViewer.showModal(); // Escape closes it, and focus goes back to the thumbnail
}

/* A picture's thumbnail as a button that shows it large. */
function thumbnail(url, name) {
  const button = element("button", "agent-file-open");
  button.type = "button";
  button.title = _("Show the picture");
  const thumb = element("img", "agent-file-thumb");
  thumb.alt = name;
  thumb.loading = "lazy";
  thumb.src = url;
  button.append(thumb);
  button.addEventListener("click", () => openPicture(url, name));
  return button;
}

/* Chips for the files of a sent message (client views from the API): each a link to its download,
 * and a picture's thumbnail, which shows it large. */
export function renderFileChips(container, files) {
  container.replaceChildren();
  for (const file of files || []) {
    const chip = element("span", "agent-file-chip agent-file-sent");
    const url = urlFor("file", file.id);
    if (file.is_picture && file.status === "ready") {
      chip.append(thumbnail(url, file.name));
    }
    const link = element("a", "agent-file-name", file.name);
    link.href = url;
    link.download = file.name;
    chip.append(link);
    container.append(chip);
  }
}

/* A failed file's words: the page's own reason (size, type, count), else the server's sentence for the
 * refusal (http.js's errorText), else the reading's failure, else a general one. */
function failureText(state) {
  const refused = state.failure && state.failure.explained ? errorText(state.failure) : "";
  return state.reason || refused || (state.view && state.view.error_message) || _("The file could not be attached.");
}

function statusLine(state) {
  if (state.status === "uploading") {
    const bar = element("progress", "agent-file-progress");
    bar.max = 100;
    bar.value = state.progress || 0;
    bar.setAttribute("aria-label", _("Uploading"));
    return bar;
  }
  const labels = { waiting: _("Waiting…"), pending: _("Reading…"), ready: _("Ready") };
  const text = state.status === "failed" ? failureText(state) : labels[state.status] || "";
  const status = element("span", "agent-file-status", text);
  status.setAttribute("role", state.status === "failed" ? "alert" : "status");
  return status;
}

function removeButton(name, onRemove) {
  const remove = element("button", "agent-file-remove", "×");
  remove.type = "button";
  remove.title = _("Remove");
  remove.setAttribute("aria-label", `${_("Remove")}: ${name}`);
  remove.addEventListener("click", onRemove);
  return remove;
}

/* Draw a composer file's chip in `list` (again, in place, once it has one; `state.node` keeps it). */
export function drawChip(list, state, onRemove) {
  const chip = state.node || element("li", "agent-file-chip");
  state.node = chip;
  chip.replaceChildren();
  chip.dataset.status = state.status;
  if (state.view && state.view.is_picture && state.status === "ready") {
    chip.append(thumbnail(urlFor("file", state.view.id), state.name));
  }
  chip.append(element("span", "agent-file-name", state.name));
  if (state.size) {
    chip.append(element("span", "agent-file-size", formatSize(state.size)));
  }
  chip.append(statusLine(state), removeButton(state.name, onRemove));
  if (state.note) {
    chip.append(element("span", "agent-file-note", state.note));
  }
  if (!chip.isConnected) {
    list.append(chip);
  }
}
