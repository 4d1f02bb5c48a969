/* Cards: a proposed write with its title, labelled fields and state, and Confirm / Cancel.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

import { state, ui } from "./page.js";
import { api, errorText, refusal, urlFor } from "./api.js";

function cardStatusText(status) {
  const texts = {
    waiting: gettext("Waiting for your decision."),
    working: gettext("Working…"),
    done: gettext("Done."),
    cancelled: gettext("Cancelled."),
    expired: gettext("Expired: nothing was changed."),
    stale: gettext("Not done: the data changed since it was proposed."),
    failed: gettext("Failed: nothing was changed."),
  };
  return texts[status] || status;
}

export function cardElement(view) {
  const card = view.confirmation;
  const element = document.createElement("section");
  element.className = "msg card";
  element.dataset.confirmation = card.id;

  const header = document.createElement("div");
  header.className = "card-header";
  const title = document.createElement("h3");
  title.className = "card-title";
  title.id = "card-title-" + card.id;
  title.textContent = view.tool_title || gettext("Confirm this change");
  const edited = document.createElement("span");
  edited.className = "card-edited";
  edited.textContent = gettext("Edited by you");
  edited.hidden = true;
  const badge = document.createElement("span");
  badge.className = "card-state";
  header.append(title, edited, badge);
  element.setAttribute("aria-labelledby", title.id);

  // One form holds the rows and the buttons, so Confirm is its submit (Enter in a field too).
  const form = document.createElement("form");
  form.className = "card-form";
  form.noValidate = true; // the server judges the values and says why, in the user's language
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    decide(card.id, "confirm");
  });
  const preview = document.createElement("dl");
  preview.className = "card-preview";

  const buttons = document.createElement("div");
  buttons.className = "card-actions";
  const confirmButton = document.createElement("button");
  confirmButton.type = "submit";
  confirmButton.className = "button-primary card-confirm";
  confirmButton.textContent = gettext("Confirm");
  const cancelButton = document.createElement("button");
  cancelButton.type = "button";
  cancelButton.className = "card-cancel";
  cancelButton.textContent = gettext("Cancel");
  cancelButton.addEventListener("click", () => decide(card.id, "cancel"));
  buttons.append(confirmButton, cancelButton);
  form.append(preview, buttons);

  const status = document.createElement("p");
  status.className = "card-status";
  status.setAttribute("role", "status");
  const error = document.createElement("p");
  error.className = "card-error";
  error.setAttribute("role", "alert");
  error.id = "card-error-" + card.id;
  element.append(header, form, status, error);

  cardRows.set(element, (card.fields || []).map((field) => ({ ...field })));
  state.cards.set(card.id, element);
  showCardStatus(element, card.status, card.edited);
  return element;
}

/* Each card's rows as the server sent them, by card element; a confirmed edit updates their text. */
const cardRows = new WeakMap();

function showRows(element, editing) {
  // Labelled rows in the user's language, built on the server; empty ones never arrive. While the
  // card waits, a field the user may change is a widget; once decided, every row is text again.
  const fields = cardRows.get(element);
  const list = element.querySelector(".card-preview");
  list.replaceChildren();
  fields.forEach((field, index) => {
    const term = document.createElement("dt");
    term.dataset.key = field.key;
    const detail = document.createElement("dd");
    if (field.old !== undefined) {
      detail.append(oldValue(field.old));
    }
    if (editing && field.editable) {
      const widget = fieldWidget(field, element.dataset.confirmation + "-f" + index);
      const label = document.createElement("label");
      label.htmlFor = widget.id;
      label.textContent = field.label;
      term.append(label);
      const message = document.createElement("span");
      message.className = "card-field-error";
      message.id = widget.id + "-error";
      detail.append(widget, message);
    } else {
      term.textContent = field.label;
      detail.append(newValue(field.value, field.old !== undefined));
    }
    list.append(term, detail);
  });
  list.hidden = !fields.length;
  element.classList.toggle("card-editing", editing && fields.some((field) => field.editable));
}

function oldValue(text) {
  // Struck through and named in words: the line alone is not read out by every screen reader.
  const old = document.createElement("span");
  old.className = "card-old";
  const named = document.createElement("span");
  named.className = "visually-hidden";
  named.textContent = gettext("Current value:") + " ";
  const struck = document.createElement("del");
  struck.textContent = text;
  const arrow = document.createElement("span");
  arrow.className = "card-arrow";
  arrow.setAttribute("aria-hidden", "true");
  arrow.textContent = " → ";
  old.append(named, struck, arrow);
  return old;
}

function newValue(text, replacing) {
  const value = document.createElement("span");
  value.className = "card-value";
  if (replacing) {
    const named = document.createElement("span");
    named.className = "visually-hidden";
    named.textContent = gettext("New value:") + " ";
    value.append(named);
  }
  value.append(text);
  return value;
}

const INPUT_TYPES = { integer: "number", number: "number", boolean: "checkbox", date: "date", datetime: "datetime-local" };

function fieldWidget(field, id) {
  // The widget for the field's type, filled with its value as data; what it reads back is the
  // same JSON the server checks.
  const raw = field.raw;
  let widget;
  if (field.type === "textarea") {
    widget = document.createElement("textarea");
    widget.rows = 3;
    widget.value = raw == null ? "" : String(raw);
  } else if (field.type === "choice") {
    widget = document.createElement("select");
    (field.choices || []).forEach(([value, label]) => {
      const option = document.createElement("option");
      option.value = String(value);
      option.textContent = label;
      option.selected = value === raw;
      widget.append(option);
    });
  } else {
    widget = document.createElement("input");
    widget.type = INPUT_TYPES[field.type] || "text";
    if (field.type === "boolean") {
      widget.checked = Boolean(raw);
    } else if (field.type === "datetime") {
      widget.value = typeof raw === "string" ? raw.slice(0, 16) : ""; // the input takes minutes, no zone
    } else {
      widget.value = raw == null ? "" : String(raw);
    }
    if (field.type === "integer") {
      widget.step = "1";
    } else if (field.type === "number") {
      widget.step = "any";
    }
  }
  widget.id = id;
  widget.className = "card-input";
  widget.dataset.key = field.key;
  widget.dataset.initial = JSON.stringify(widgetValue(widget, field));
  return widget;
}

function widgetValue(widget, field) {
  if (field.type === "boolean") {
    return widget.checked;
  }
  if (field.type === "choice") {
    const chosen = (field.choices || [])[widget.selectedIndex];
    return chosen ? chosen[0] : null;
  }
  if (field.type === "integer" || field.type === "number") {
    return widget.value === "" ? null : Number(widget.value); // empty, or not a number: the server says which
  }
  if (field.type === "date" || field.type === "datetime") {
    return widget.value || null;
  }
  return widget.value;
}

function valueText(value, field) {
  // An edited value as the card shows it once decided, as the server writes the model's.
  if (value === null) {
    return "";
  }
  if (field.type === "boolean") {
    return value ? gettext("Yes") : gettext("No");
  }
  if (field.type === "choice") {
    const chosen = (field.choices || []).find((choice) => choice[0] === value);
    return chosen ? chosen[1] : String(value);
  }
  return String(value);
}

function changedFields(element) {
  // Only what the user changed goes to the server: a field left alone is the model's value.
  const edits = {};
  cardRows.get(element).forEach((field) => {
    const widget = field.editable && element.querySelector(`.card-input[data-key="${CSS.escape(field.key)}"]`);
    if (widget) {
      const value = widgetValue(widget, field);
      if (JSON.stringify(value) !== widget.dataset.initial) {
        edits[field.key] = value;
      }
    }
  });
  return edits;
}

function showFieldErrors(element, fields) {
  // Each message beside its field; one for the whole card, or for a field with no widget, under the card.
  const rest = [];
  let first = null;
  Object.entries(fields || {}).forEach(([key, messages]) => {
    const widget = element.querySelector(`.card-input[data-key="${CSS.escape(key)}"]`);
    if (!widget) {
      rest.push(...messages);
      return;
    }
    widget.setAttribute("aria-invalid", "true");
    widget.setAttribute("aria-describedby", widget.id + "-error");
    element.querySelector("#" + CSS.escape(widget.id + "-error")).textContent = messages.join(" ");
    first = first || widget;
  });
  element.querySelector(".card-error").textContent = rest.join(" ");
  if (first) {
    first.focus();
  }
}

function clearFieldErrors(element) {
  element.querySelectorAll(".card-input").forEach((widget) => {
    widget.removeAttribute("aria-invalid");
    widget.removeAttribute("aria-describedby");
  });
  element.querySelectorAll(".card-field-error").forEach((message) => {
    message.textContent = "";
  });
  element.querySelector(".card-error").textContent = "";
}

function cardStateText(status) {
  const texts = {
    waiting: gettext("Waiting"),
    working: gettext("Working…"),
    done: gettext("Done"),
    cancelled: gettext("Cancelled"),
    expired: gettext("Expired"),
    stale: gettext("The data changed"),
    failed: gettext("Failed"),
  };
  return texts[status] || status;
}

function showCardStatus(element, status, edited) {
  element.dataset.status = status;
  element.querySelector(".card-state").textContent = cardStateText(status);
  element.querySelector(".card-status").textContent = cardStatusText(status);
  if (edited) {
    element.querySelector(".card-edited").hidden = false;
  }
  const waiting = status === "working" || status === "waiting";
  if (element.dataset.editing !== String(waiting)) {
    element.dataset.editing = String(waiting); // rebuilt only on the change: a refused edit keeps what was typed
    showRows(element, waiting);
  }
  const actions = element.querySelector(".card-actions");
  actions.hidden = !waiting;
  actions.querySelectorAll("button").forEach((button) => {
    button.disabled = status !== "waiting" || state.signedOut;
  });
  element.querySelectorAll(".card-input").forEach((widget) => {
    widget.disabled = status !== "waiting";
  });
  if (!waiting) {
    element.querySelector(".card-error").textContent = "";
  }
}

/* A decision seen here or in another tab; `edited` when it was confirmed with the user's edits, and
 * then `fields`, the card's rows as it ran (the user's values in place of the model's), from its outcome. */
export function setCardStatus(confirmationId, status, edited, fields) {
  const element = state.cards.get(confirmationId);
  if (!element) {
    return;
  }
  if (fields) {
    cardRows.set(element, fields.map((field) => ({ ...field })));
    delete element.dataset.editing; // the rows are drawn again from these
  }
  showCardStatus(element, status, edited);
}

async function decide(confirmationId, action) {
  const element = state.cards.get(confirmationId);
  if (!element || element.dataset.status !== "waiting") {
    return;
  }
  const focused = element.contains(document.activeElement); // decided by keyboard (or a click on its button)
  const edits = action === "confirm" ? changedFields(element) : {};
  const body = Object.keys(edits).length ? { edits: edits } : undefined;
  clearFieldErrors(element);
  showCardStatus(element, "working");
  try {
    const data = await api("POST", urlFor(action, confirmationId), body);
    if (data.refused) {
      throw refusal(data.refused); // edits to fix: the card still waits
    }
    if (data.confirmation.edited) {
      keepEdits(element, edits);
    }
    if (element.dataset.status === "working") {
      showCardStatus(element, data.confirmation.status, data.confirmation.edited);
    } else if (data.confirmation.edited) {
      element.querySelector(".card-edited").hidden = false; // another tab's news came first
    }
    returnFocus(focused);
  } catch (error) {
    if (error.code === "expired") {
      showCardStatus(element, "expired");
      returnFocus(focused);
    } else if (element.dataset.status === "working") {
      showCardStatus(element, error.code === "not_waiting" ? "working" : "waiting");
      if (error.fields) {
        showFieldErrors(element, error.fields);
      } else {
        element.querySelector(".card-error").textContent = errorText(error);
      }
    }
  }
}

function keepEdits(element, edits) {
  // The card shows what ran: the user's values in place of the model's.
  cardRows.get(element).forEach((field) => {
    if (field.key in edits) {
      field.value = valueText(edits[field.key], field);
    }
  });
  if (element.dataset.editing === "false") {
    showRows(element, false);
  }
}

function returnFocus(hadIt) {
  // The decided card's buttons are gone: focus goes on to the message box, not to the page's start.
  if (hadIt && (document.activeElement === document.body || !document.activeElement)) {
    ui.text.focus();
  }
}
