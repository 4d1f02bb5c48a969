/* The composer's files: attach button, drag and drop, paste; a chip per file.
 *
 * An ES module for the chat page (no build step, strict CSP: no inline script
 * or style; text goes in as text). Each chip shows the upload's progress, then
 * "processing", then "ready" or the failure in the user's language, with a
 * remove button; a ready picture shows its thumbnail, served only to its owner.
 * Phrases go through gettext() from Django's JavaScriptCatalog, loaded first; a refusal or a failed
 * reading shows the server's own sentence (the upload's error body, the file's `error_message`).
 *
 *   import { mountAttachments, renderFileChips } from "./attachments.js";
 *   const files = mountAttachments({ form, textarea, button, dropTarget, overlay, list, limits,
 *                                    pictureDialog });
 *   files.take([file]);             // attach files made on the page (a long paste as "pasted.txt")
 *   files.setConversation(id);      // when a chat opens (lists what waits in its composer)
 *   files.refresh();                // on the websocket's {"type": "attachment"} frame
 *   files.readyIds();               // the ids to send with the message (attachment_ids)
 *   files.busy();                   // true while a file uploads or is being read
 *   files.sent();                   // after the send was accepted: the chips leave the composer
 *
 * The files' URLs and the CSRF token come from the page's transport (api.js). `openConversation`, if given, is awaited
 * when files are picked, dropped or pasted with no chat open; it opens one (setConversation).
 * `limits` (the server's: `maxBytes`, `maxFiles`, `extensions`) refuse a file before its upload
 * starts, naming the limit. Files upload one after another, so they stay in the order picked.
 * `pictureDialog` (a <dialog> holding an <img>) shows a picture large when its thumbnail is clicked.
 */

import { csrfToken, urlFor } from "./chat/api.js";

const _ = (text) => (typeof window.gettext === "function" ? window.gettext(text) : text);

function formatSize(bytes) {
  if (bytes >= 1024 * 1024) {
    const megabytes = bytes / (1024 * 1024);
    return `${Number.isInteger(megabytes) ? megabytes : megabytes.toFixed(1)} MB`;
  }
  return `${Math.max(1, Math.round(bytes / 1024))} KB`;
}

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

let pictureViewer = null; // the page's picture <dialog>, set by mountAttachments

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

/* Why a file is refused before its upload, naming the limit or the accepted types; "" if it may go. */
function refusalBefore(file, limits) {
  if (limits.maxBytes && file.size > limits.maxBytes) {
    return interpolate(_("Larger than %(limit)s, the limit for one file."), { limit: formatSize(limits.maxBytes) });
  }
  const dot = file.name.lastIndexOf(".");
  const ending = dot >= 0 ? file.name.slice(dot).toLowerCase() : "";
  if (limits.extensions && limits.extensions.length && !limits.extensions.includes(ending)) {
    return interpolate(_("This kind of file cannot be attached. Accepted: %(types)s."), {
      types: limits.extensions.join(", "),
    });
  }
  return "";
}

function interpolate(text, values) {
  if (typeof window.interpolate === "function") {
    return window.interpolate(text, values, true);
  }
  return text.replace(/%\((\w+)\)s/g, (whole, key) => String(values[key]));
}

export function mountAttachments({
  form, textarea, button, dropTarget, overlay, list, onChange, openConversation, limits,
  pictureDialog,
}) {
  let conversation = null;
  const chips = new Map(); // key (server id, or a local key while uploading) -> state
  const waiting = []; // states of files picked and not yet uploading: one upload at a time keeps their order
  let localKeys = 0;
  const bounds = limits || {};
  pictureViewer = pictureDialog || pictureViewer;
  if (pictureViewer) {
    pictureViewer.addEventListener("close", () => {
      pictureViewer.querySelector("img").removeAttribute("src");
    });
  }
  const input = element("input");
  input.type = "file";
  input.multiple = true;
  input.hidden = true;
  input.accept = bounds.extensions.join(",");
  (form || list).append(input);

  const changed = () => {
    if (onChange) {
      onChange(api);
    }
  };

  function draw(state) {
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
    if (state.status === "uploading") {
      const bar = element("progress", "agent-file-progress");
      bar.max = 100;
      bar.value = state.progress || 0;
      bar.setAttribute("aria-label", _("Uploading"));
      chip.append(bar);
    } else {
      const labels = { waiting: _("Waiting…"), pending: _("Reading…"), ready: _("Ready") };
      // the page's own reason (size, type, count), else a quota's words from the server, else the code's
      const failure = state.reason || state.explained || (state.view && state.view.error_message)
        || _("The file could not be attached.");
      const text = state.status === "failed" ? failure : labels[state.status] || "";
      const status = element("span", "agent-file-status", text);
      status.setAttribute("role", state.status === "failed" ? "alert" : "status");
      chip.append(status);
    }
    const remove = element("button", "agent-file-remove", "×");
    remove.type = "button";
    remove.title = _("Remove");
    remove.setAttribute("aria-label", `${_("Remove")}: ${state.name}`);
    remove.addEventListener("click", () => discard(state));
    chip.append(remove);
    if (!chip.isConnected) {
      list.append(chip);
    }
  }

  function place(view) {
    const known = chips.get(view.id);
    const state = known || { key: view.id };
    Object.assign(state, {
      view, name: view.name, size: view.size, status: view.status, error: view.error_code,
    });
    chips.set(view.id, state);
    draw(state);
  }

  function forget(state) {
    chips.delete(state.key);
    const at = waiting.indexOf(state);
    if (at >= 0) {
      waiting.splice(at, 1);
    }
    if (state.node) {
      state.node.remove();
    }
    changed();
  }

  async function discard(state) {
    if (state.xhr) {
      state.xhr.abort();
      forget(state);
      return;
    }
    if (state.view) {
      state.removing = true; // a Send meanwhile must not name it: the server would refuse the whole message
      const response = await fetch(urlFor("unattach", state.view.id), {
        method: "POST", credentials: "same-origin", headers: { "X-CSRFToken": csrfToken() },
      }).catch(() => null);
      if (!response || (!response.ok && response.status !== 404)) {
        state.removing = false;
        return;
      }
    }
    forget(state);
  }

  function refused(file, reason, error) {
    const key = `local-${(localKeys += 1)}`;
    const state = { key, picked: localKeys, name: file.name, size: file.size, status: "failed", reason, error };
    chips.set(key, state);
    draw(state);
  }

  function queue(file) {
    const key = `local-${(localKeys += 1)}`;
    const state = { key, picked: localKeys, name: file.name, size: file.size, status: "waiting", file };
    chips.set(key, state);
    waiting.push(state);
    draw(state);
    return state;
  }

  function uploading() {
    return [...chips.values()].some((s) => s.status === "uploading");
  }

  function next() {
    if (uploading() || !waiting.length || !conversation) {
      return;
    }
    upload(waiting.shift());
  }

  function counted() {
    return [...chips.values()].filter((s) => s.status !== "failed").length;
  }

  function upload(state) {
    const key = state.key;
    const file = state.file;
    state.file = null;
    Object.assign(state, { status: "uploading", progress: 0 });
    draw(state);
    changed();
    const body = new FormData();
    body.append("file", file, file.name);
    const xhr = new XMLHttpRequest();
    state.xhr = xhr;
    xhr.open("POST", urlFor("upload", conversation));
    xhr.setRequestHeader("X-CSRFToken", csrfToken());
    xhr.responseType = "json";
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) {
        state.progress = Math.round((100 * event.loaded) / event.total);
        draw(state);
      }
    });
    xhr.addEventListener("load", () => {
      state.xhr = null;
      const answer = xhr.response || {};
      if (xhr.status === 201 && answer.attachment) {
        chips.delete(key);
        state.key = answer.attachment.id;
        const known = chips.get(state.key);
        if (known && known.node) {
          known.node.remove();
        }
        chips.set(state.key, state);
        place(answer.attachment);
      } else {
        const explained = answer.message || "";
        Object.assign(state, { status: "failed", error: answer.error || "upload_failed", explained, view: null });
        draw(state);
      }
      changed();
      next();
    });
    xhr.addEventListener("error", () => {
      state.xhr = null;
      Object.assign(state, { status: "failed", error: "upload_failed", view: null });
      draw(state);
      changed();
      next();
    });
    xhr.addEventListener("abort", () => {
      state.xhr = null;
      state.status = "aborted";
      next();
    });
    xhr.send(body);
  }

  async function take(files) {
    // Refused at once: a file over the size or of a type the site does not take, and those past
    // the count (the first ones are kept, in the order given). The others wait for their turn.
    let room = bounds.maxFiles ? bounds.maxFiles - counted() : files.length;
    const accepted = [];
    for (const file of files) {
      const reason = refusalBefore(file, bounds);
      if (reason) {
        refused(file, reason, "");
      } else if (room <= 0) {
        refused(file, interpolate(_("Not attached: at most %(max)s files go with one message."), {
          max: bounds.maxFiles,
        }), "too_many_files");
      } else {
        room -= 1;
        accepted.push(queue(file));
      }
    }
    changed();
    if (!accepted.length) {
      return;
    }
    if (!conversation && openConversation) {
      try {
        await openConversation(); // a file on a new chat starts it, as its first message would
      } catch (error) {
        accepted.forEach(forget); // openConversation said why
        return;
      }
    }
    next();
  }

  async function refresh() {
    if (!conversation) {
      return;
    }
    const asked = conversation;
    const response = await fetch(urlFor("files", asked), { credentials: "same-origin" });
    if (!response.ok || asked !== conversation) {
      return;
    }
    const { attachments } = await response.json();
    const seen = new Set(attachments.map((view) => view.id));
    for (const [key, state] of [...chips]) {
      if (state.view && !seen.has(key)) {
        forget(state); // removed elsewhere, or sent from another tab
      }
    }
    attachments.forEach(place);
    changed();
  }

  button.addEventListener("click", () => input.click());
  input.addEventListener("change", () => {
    take([...input.files]);
    input.value = "";
  });
  const target = dropTarget || form;
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
  if (textarea) {
    textarea.addEventListener("paste", (event) => {
      const files = event.clipboardData ? [...event.clipboardData.files] : [];
      if (files.length) {
        event.preventDefault();
        take(files);
      }
    });
  }

  const api = {
    setConversation(id, options) {
      const previous = conversation;
      conversation = id || null;
      if (options && options.keep && !previous) {
        return refresh(); // the new chat made for these files: they stay and upload into it
      }
      waiting.length = 0;
      for (const state of [...chips.values()]) {
        if (state.xhr) {
          state.xhr.abort();
        }
      }
      chips.clear();
      list.replaceChildren();
      changed();
      return refresh();
    },
    take,
    refresh,
    readyIds() {
      // In the order the files were picked in, however their uploads and readings interleaved: files
      // this page picked by when it picked them, after those it found waiting (in the order shown).
      const shown = [...list.children];
      const position = (s) => [s.picked || 0, shown.indexOf(s.node)];
      return [...chips.values()]
        .filter((s) => s.view && s.status === "ready" && !s.removing)
        .sort((a, b) => {
          const [pickedA, shownA] = position(a);
          const [pickedB, shownB] = position(b);
          return pickedA - pickedB || shownA - shownB;
        })
        .map((s) => s.view.id);
    },
    busy() {
      return [...chips.values()].some((s) => ["waiting", "uploading", "pending"].includes(s.status));
    },
    sent() {
      // The sent files went with the message; the refused ones go too, having said why.
      for (const state of [...chips.values()]) {
        if ((state.view && state.status === "ready") || state.status === "failed") {
          forget(state);
        }
      }
    },
  };
  return api;
}
