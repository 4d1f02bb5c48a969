/* The composer's files: attach button, drag and drop, paste; a chip per file.
 *
 * An ES module for the chat page (no build step, strict CSP: no inline script
 * or style; text goes in as text). Each chip shows the upload's progress, then
 * "processing", then "ready" or the failure in the user's language, with a
 * remove button; a ready picture shows its thumbnail, served only to its owner.
 * Phrases go through gettext() from Django's JavaScriptCatalog, loaded first.
 *
 *   import { mountAttachments, renderFileChips } from "./attachments.js";
 *   const files = mountAttachments({ form, textarea, button, dropTarget, list, urls, csrfToken });
 *   files.setConversation(id);      // when a chat opens (lists what waits in its composer)
 *   files.refresh();                // on the websocket's {"type": "attachment"} frame
 *   files.readyIds();               // the ids to send with the message (attachment_ids)
 *   files.busy();                   // true while a file uploads or is being read
 *   files.sent();                   // after the send was accepted: the chips leave the composer
 *
 * `urls` holds the page's URL patterns with PLACEHOLDER where an id goes:
 * `attachments` (GET list), `attachmentUpload` (POST), `attachmentRemove` (POST),
 * `attachmentFile` (GET, the owner's file). `openConversation`, if given, is awaited
 * when files are dropped or pasted with no chat open; it opens one (setConversation).
 */

export const PLACEHOLDER = "00000000-0000-0000-0000-000000000000";

const _ = (text) => (typeof window.gettext === "function" ? window.gettext(text) : text);

/* Each code of SPEC §9, in the user's language. */
export function describeError(code) {
  const texts = {
    file_too_large: _("The file is too large."),
    unsupported_type: _("This kind of file cannot be attached."),
    too_many_files: _("Too many files for one message."),
    pdf_encrypted: _("The PDF is protected by a password."),
    pdf_no_text: _("The PDF has no text to read (a scan?)."),
    unreadable: _("The file could not be read."),
    too_many_pixels: _("The picture is too large."),
    extraction_timeout: _("Reading the file took too long."),
    not_found: _("The file is gone."),
    storage_full: _("Your files take all the room you may use. Remove files you no longer need."),
    too_many_uploads: _("Too many files in one minute. Try again in a minute."),
  };
  return texts[code] || _("The file could not be attached.");
}

function withId(pattern, id) {
  return pattern.replace(PLACEHOLDER, encodeURIComponent(id));
}

function formatSize(bytes) {
  if (bytes >= 1024 * 1024) {
    return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
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

function csrfFromCookie() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

/* Chips for the files of a sent message (client views from the API): names, and thumbnails of pictures. */
export function renderFileChips(container, files, urls) {
  container.replaceChildren();
  for (const file of files || []) {
    const chip = element("span", "agent-file-chip agent-file-sent");
    if (file.is_picture && file.status === "ready") {
      const thumb = element("img", "agent-file-thumb");
      thumb.alt = file.name;
      thumb.loading = "lazy";
      thumb.src = withId(urls.attachmentFile, file.id);
      chip.append(thumb);
    }
    chip.append(element("span", "agent-file-name", file.name));
    container.append(chip);
  }
}

export function mountAttachments({
  form, textarea, button, dropTarget, list, urls, csrfToken, onChange, openConversation,
}) {
  let conversation = null;
  const chips = new Map(); // key (server id, or a local key while uploading) -> state
  let localKeys = 0;
  const input = element("input");
  input.type = "file";
  input.multiple = true;
  input.hidden = true;
  input.accept = ".txt,.md,.markdown,.csv,.json,.pdf,.png,.jpg,.jpeg,.webp,.gif,.xlsx";
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
      const thumb = element("img", "agent-file-thumb");
      thumb.alt = state.name;
      thumb.src = withId(urls.attachmentFile, state.view.id);
      chip.append(thumb);
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
      const labels = { pending: _("Reading…"), ready: _("Ready") };
      const failure = state.explained || describeError(state.error); // a quota's own words from the server
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
      const response = await fetch(withId(urls.attachmentRemove, state.view.id), {
        method: "POST", credentials: "same-origin", headers: { "X-CSRFToken": csrfToken || csrfFromCookie() },
      });
      if (!response.ok && response.status !== 404) {
        return;
      }
    }
    forget(state);
  }

  function upload(file) {
    if (!conversation) {
      return;
    }
    const key = `local-${(localKeys += 1)}`;
    const state = { key, name: file.name, size: file.size, status: "uploading", progress: 0 };
    chips.set(key, state);
    draw(state);
    changed();
    const body = new FormData();
    body.append("file", file, file.name);
    const xhr = new XMLHttpRequest();
    state.xhr = xhr;
    xhr.open("POST", withId(urls.attachmentUpload, conversation));
    xhr.setRequestHeader("X-CSRFToken", csrfToken || csrfFromCookie());
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
    });
    xhr.addEventListener("error", () => {
      state.xhr = null;
      Object.assign(state, { status: "failed", error: "upload_failed", view: null });
      draw(state);
      changed();
    });
    xhr.send(body);
  }

  async function take(files) {
    if (!conversation && openConversation) {
      try {
        await openConversation(); // a file dropped on a new chat starts it, as its first message would
      } catch (error) {
        return; // openConversation said why
      }
    }
    for (const file of files) {
      upload(file);
    }
  }

  async function refresh() {
    if (!conversation) {
      return;
    }
    const asked = conversation;
    const response = await fetch(withId(urls.attachments, asked), { credentials: "same-origin" });
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
  target.addEventListener("dragover", (event) => {
    if (event.dataTransfer && [...event.dataTransfer.types].includes("Files")) {
      event.preventDefault();
      target.classList.add("agent-drop-active");
    }
  });
  target.addEventListener("dragleave", () => target.classList.remove("agent-drop-active"));
  target.addEventListener("drop", (event) => {
    target.classList.remove("agent-drop-active");
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
    setConversation(id) {
      conversation = id || null;
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
    refresh,
    readyIds() {
      return [...chips.values()].filter((s) => s.view && s.status === "ready").map((s) => s.view.id);
    },
    busy() {
      return [...chips.values()].some((s) => s.status === "uploading" || s.status === "pending");
    },
    sent() {
      for (const state of [...chips.values()]) {
        if (state.view && state.status === "ready") {
          forget(state);
        }
      }
    },
  };
  return api;
}
