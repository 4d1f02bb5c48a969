/* The composer's files: which are attached, waiting or uploading, and in what order they were picked.
 *
 * A tray keeps a state per file, keyed by its server id (a local key until its upload is stored), uploads
 * one file at a time so they stay in the order picked, and redraws a file's chip (chips.js) at each change.
 * Its JSON calls go through the chat page's transport (chat/api.js over http.js) and its uploads through
 * upload.js, so a session that ended is announced on the page's bus, as every other call's is.
 *
 * An ES module of the chat page (no build step, strict CSP).
 */

import { api, noticed, urlFor } from "../chat/api.js";
import { ApiError } from "../http.js";
import { drawChip } from "./chips.js";
import { ABORTED, uploadFile } from "./upload.js";
import { refusalBefore, tooManyFiles } from "./words.js";

const BUSY = ["waiting", "uploading", "pending"];

export class FileTray {
  /* `onChange` is told after every change; `openConversation`, if given, is awaited when files come with
   * no chat open (it opens one, which calls setConversation). */
  constructor({ list, limits, onChange, openConversation }) {
    this.list = list;
    this.limits = limits || {};
    this.onChange = onChange;
    this.openConversation = openConversation;
    this.conversation = null;
    this.chips = new Map(); // key (server id, or a local key while uploading) -> state
    this.waiting = []; // states of files picked and not yet uploading: one upload at a time keeps their order
    this.localKeys = 0;
    this.opening = null; // the chat being made for files, while it is
  }

  changed() {
    this.onChange();
  }

  draw(state) {
    drawChip(this.list, state, () => this.discard(state));
  }

  /* A file as the server sees it (its client view), drawn in its chip. */
  place(view) {
    const state = this.chips.get(view.id) || { key: view.id };
    Object.assign(state, { view: view, name: view.name, size: view.size, status: view.status });
    this.chips.set(view.id, state);
    this.draw(state);
  }

  forget(state) {
    this.chips.delete(state.key);
    const at = this.waiting.indexOf(state);
    if (at >= 0) {
      this.waiting.splice(at, 1);
    }
    if (state.node) {
      state.node.remove();
    }
    this.changed();
  }

  /* The chip's remove button: an upload is called off; a stored file is removed on the server first
   * (one already gone there counts as removed). */
  async discard(state) {
    if (state.upload) {
      state.upload.abort();
      this.forget(state);
      return;
    }
    if (state.view) {
      state.removing = true; // a Send meanwhile must not name it: the server would refuse the whole message
      try {
        await api("POST", urlFor("unattach", state.view.id));
      } catch (failure) {
        if (!(failure instanceof ApiError && failure.code === "not_found")) {
          state.removing = false;
          return;
        }
      }
    }
    this.forget(state);
  }

  /* A file picked on this page, under a local key until its upload is stored. */
  addPicked(file, fields) {
    this.localKeys += 1;
    const key = `local-${this.localKeys}`;
    const state = { key: key, picked: this.localKeys, name: file.name, size: file.size, ...fields };
    this.chips.set(key, state);
    this.draw(state);
    return state;
  }

  refuse(file, reason) {
    this.addPicked(file, { status: "failed", reason: reason });
  }

  queue(file, extra) {
    const state = this.addPicked(file, { status: "waiting", file: file, ...extra });
    this.waiting.push(state);
    return state;
  }

  uploading() {
    return [...this.chips.values()].some((s) => s.status === "uploading");
  }

  counted() {
    return [...this.chips.values()].filter((s) => s.status !== "failed").length;
  }

  next() {
    if (this.uploading() || !this.waiting.length || !this.conversation) {
      return;
    }
    this.upload(this.waiting.shift());
  }

  async upload(state) {
    const file = state.file;
    state.file = null;
    Object.assign(state, { status: "uploading", progress: 0 });
    this.draw(state);
    this.changed();
    state.upload = uploadFile(urlFor("upload", this.conversation), file, (progress) => {
      state.progress = progress;
      this.draw(state);
    });
    let view = null;
    let failure = null;
    try {
      view = await state.upload.done;
    } catch (error) {
      failure = error;
    }
    state.upload = null;
    if (failure && failure.code === ABORTED) {
      state.status = "aborted";
    } else {
      if (view) {
        this.stored(state, view);
      } else {
        Object.assign(state, { status: "failed", failure: noticed(failure), view: null });
        this.draw(state);
      }
      this.changed();
    }
    this.next();
  }

  /* An upload the server stored: its state takes the file's id (a refresh may have drawn it already). */
  stored(state, view) {
    this.chips.delete(state.key);
    state.key = view.id;
    const known = this.chips.get(state.key);
    if (known && known.node) {
      known.node.remove();
    }
    this.chips.set(state.key, state);
    this.place(view);
  }

  /* Files picked, dropped or pasted. Refused at once: a file over the size or of a type the site does not
   * take, and those past the count (the first ones are kept, in the order given). The others wait their turn.
   * `extra` goes on each kept file's state (a `note` its chip shows). */
  async take(files, extra) {
    let room = this.limits.maxFiles ? this.limits.maxFiles - this.counted() : files.length;
    const accepted = [];
    for (const file of files) {
      const reason = refusalBefore(file, this.limits);
      if (reason) {
        this.refuse(file, reason);
      } else if (room <= 0) {
        this.refuse(file, tooManyFiles(this.limits.maxFiles));
      } else {
        room -= 1;
        accepted.push(this.queue(file, extra));
      }
    }
    this.changed();
    if (!accepted.length) {
      return;
    }
    if (!this.conversation && this.openConversation) {
      try {
        await this.opened(); // a file on a new chat starts it, as its first message would
      } catch (error) {
        accepted.forEach((state) => this.forget(state)); // openConversation said why
        return;
      }
    }
    this.next();
  }

  /* The chat made for files that came with none open: files that come while it is being made (a second
   * paste) wait for the same one, not a chat of their own, whose opening would drop the first's. */
  opened() {
    if (!this.opening) {
      this.opening = Promise.resolve(this.openConversation()).finally(() => {
        this.opening = null;
      });
    }
    return this.opening;
  }

  /* The chat's files waiting for a message, as the server has them now. */
  async refresh() {
    if (!this.conversation) {
      return;
    }
    const asked = this.conversation;
    const drawnBefore = new Set([...this.chips.values()].filter((s) => s.view).map((s) => s.key));
    let answer;
    try {
      answer = await api("GET", urlFor("files", asked));
    } catch (failure) {
      return; // a session that ended is announced by the transport
    }
    if (asked !== this.conversation) {
      return;
    }
    const seen = new Set(answer.attachments.map((view) => view.id));
    for (const [key, state] of [...this.chips]) {
      // Removed elsewhere, or sent from another tab. A file stored while this asked is not in an answer
      // the server may have given before it stored that file: it stays, with the place it was picked in.
      if (state.view && drawnBefore.has(key) && !seen.has(key)) {
        this.forget(state);
      }
    }
    answer.attachments.forEach((view) => this.place(view));
    this.changed();
  }

  setConversation(id, options) {
    const previous = this.conversation;
    this.conversation = id || null;
    if (options && options.keep && !previous) {
      return this.refresh(); // the new chat made for these files: they stay and upload into it
    }
    this.waiting.length = 0;
    for (const state of [...this.chips.values()]) {
      if (state.upload) {
        state.upload.abort();
      }
    }
    this.chips.clear();
    this.list.replaceChildren();
    this.changed();
    return this.refresh();
  }

  /* In the order the files were picked in, however their uploads and readings interleaved: files this
   * page picked by when it picked them, after those it found waiting (in the order shown). */
  readyIds() {
    const shown = [...this.list.children];
    const position = (s) => [s.picked || 0, shown.indexOf(s.node)];
    return [...this.chips.values()]
      .filter((s) => s.view && s.status === "ready" && !s.removing)
      .sort((a, b) => {
        const [pickedA, shownA] = position(a);
        const [pickedB, shownB] = position(b);
        return pickedA - pickedB || shownA - shownB;
      })
      .map((s) => s.view.id);
  }

  busy() {
    return [...this.chips.values()].some((s) => BUSY.includes(s.status));
  }

  /* After the send was accepted: the sent files went with the message; the refused ones go too, having
   * said why. */
  sent() {
    for (const state of [...this.chips.values()]) {
      if ((state.view && state.status === "ready") || state.status === "failed") {
        this.forget(state);
      }
    }
  }
}
