/* Cards: a proposed write with its title, labelled fields and state, and Confirm / Cancel.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

import { state, ui } from "./page.js";
import { api, errorText, urlFor } from "./api.js";

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
  const badge = document.createElement("span");
  badge.className = "card-state";
  header.append(title, badge);
  element.setAttribute("aria-labelledby", title.id);
  element.append(header, previewElement(card.fields || []));

  const buttons = document.createElement("div");
  buttons.className = "card-actions";
  const confirmButton = document.createElement("button");
  confirmButton.type = "button";
  confirmButton.className = "button-primary card-confirm";
  confirmButton.textContent = gettext("Confirm");
  confirmButton.addEventListener("click", () => decide(card.id, "confirm"));
  const cancelButton = document.createElement("button");
  cancelButton.type = "button";
  cancelButton.className = "card-cancel";
  cancelButton.textContent = gettext("Cancel");
  cancelButton.addEventListener("click", () => decide(card.id, "cancel"));
  buttons.append(confirmButton, cancelButton);

  const status = document.createElement("p");
  status.className = "card-status";
  status.setAttribute("role", "status");
  const error = document.createElement("p");
  error.className = "card-error";
  error.setAttribute("role", "alert");
  element.append(buttons, status, error);

  state.cards.set(card.id, element);
  showCardStatus(element, card.status);
  return element;
}

function previewElement(fields) {
  // Labelled rows in the user's language, built on the server; empty ones never arrive.
  const list = document.createElement("dl");
  list.className = "card-preview";
  fields.forEach((field) => {
    const term = document.createElement("dt");
    term.textContent = field.label;
    term.dataset.key = field.key;
    const detail = document.createElement("dd");
    detail.textContent = field.value;
    list.append(term, detail);
  });
  list.hidden = !fields.length;
  return list;
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

function showCardStatus(element, status) {
  element.dataset.status = status;
  element.querySelector(".card-state").textContent = cardStateText(status);
  element.querySelector(".card-status").textContent = cardStatusText(status);
  const waiting = status === "waiting";
  const actions = element.querySelector(".card-actions");
  actions.hidden = !(waiting || status === "working");
  actions.querySelectorAll("button").forEach((button) => {
    button.disabled = !waiting || state.signedOut;
  });
  if (!waiting && status !== "working") {
    element.querySelector(".card-error").textContent = "";
  }
}

export function setCardStatus(confirmationId, status) {
  const element = state.cards.get(confirmationId);
  if (element) {
    showCardStatus(element, status);
  }
}

async function decide(confirmationId, action) {
  const element = state.cards.get(confirmationId);
  if (!element || element.dataset.status !== "waiting") {
    return;
  }
  const focused = element.contains(document.activeElement); // decided by keyboard (or a click on its button)
  showCardStatus(element, "working");
  try {
    const data = await api("POST", urlFor(action, confirmationId));
    if (element.dataset.status === "working") {
      showCardStatus(element, data.confirmation.status);
    }
    returnFocus(focused);
  } catch (error) {
    if (error.code === "expired") {
      showCardStatus(element, "expired");
      returnFocus(focused);
    } else if (element.dataset.status === "working") {
      showCardStatus(element, error.code === "not_waiting" ? "working" : "waiting");
      element.querySelector(".card-error").textContent = errorText(error);
    }
  }
}


function returnFocus(hadIt) {
  // The decided card's buttons are gone: focus goes on to the message box, not to the page's start.
  if (hadIt && (document.activeElement === document.body || !document.activeElement)) {
    ui.text.focus();
  }
}
