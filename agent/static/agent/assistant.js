/* "My assistant": the user's models, instructions, language, usage and quotas over the JSON API.
 *
 * An ES module on the pages' transport (http.js); no build step and a strict CSP: no inline script,
 * style or handlers. Every text goes in as text; a refusal shows the server's own sentence, and the
 * few fixed phrases go through gettext() from Django's JavaScriptCatalog, loaded before this file.
 */

import { ApiError, errorText, request } from "./http.js";

const config = JSON.parse(document.getElementById("agent-config").textContent);
const $ = (id) => document.getElementById(id);
const ui = {
  status: $("panel-status"),
  error: $("panel-error"),
  models: $("models"),
  form: $("settings-form"),
  picker: $("picker"),
  endpoint: $("pick-endpoint"),
  pictureEndpoint: $("pick-picture-endpoint"),
  speechEndpoint: $("pick-speech-endpoint"),
  telegram: $("telegram"),
  telegramLinks: $("telegram-links"),
  telegramConnect: $("telegram-connect"),
  telegramInvite: $("telegram-invite"),
  telegramOpen: $("telegram-open"),
  telegramExpires: $("telegram-expires"),
  telegramError: $("telegram-error"),
  mcp: $("mcp"),
  mcpUrl: $("mcp-url"),
  mcpTokens: $("mcp-tokens"),
  mcpForm: $("mcp-form"),
  mcpName: $("mcp-name"),
  mcpSecretNote: $("mcp-secret-note"),
  mcpSecret: $("mcp-secret"),
  mcpError: $("mcp-error"),
  mcpApps: $("mcp-apps"), // only where the site signs MCP clients in with OAuth
  mcpAppsNone: $("mcp-apps-none"),
  instructions: $("instructions"),
  count: $("instructions-count"),
  language: $("language"),
  save: $("save"),
  saved: $("saved"),
  usage: $("usage"),
  quotas: $("quotas"),
  tools: $("tools"),
};
const FIELDS = ["endpoint", "picture_endpoint", "speech_endpoint", "instructions", "language", "__all__"];
let maxInstructions = config.max_instructions;

const call = (method, body) => request(method, config.api_url, body);

function sourceClass(choice) {
  return "source-" + choice.source;
}

function renderModels(models) {
  const labels = { chat: gettext("Chats"), pictures: gettext("Pictures"), speech: gettext("Speech") };
  ui.models.replaceChildren();
  for (const kind of ["chat", "pictures", "speech"]) {
    const choice = models[kind];
    const term = document.createElement("dt");
    term.textContent = labels[kind];
    const detail = document.createElement("dd");
    detail.className = sourceClass(choice);
    detail.dataset.source = choice.source;
    detail.dataset.reason = choice.reason || "";
    const name = choice.endpoint ? choice.endpoint.name + " (" + choice.endpoint.model + ")" : gettext("none configured");
    detail.textContent = name + " — " + choice.explanation;
    ui.models.append(term, detail);
  }
}

function fillSelect(select, options, selected, emptyLabel) {
  select.replaceChildren();
  const empty = document.createElement("option");
  empty.value = "";
  empty.textContent = emptyLabel;
  select.append(empty);
  for (const [value, label] of options) {
    const option = document.createElement("option");
    option.value = String(value);
    option.textContent = label;
    select.append(option);
  }
  select.value = selected === null || selected === undefined ? "" : String(selected);
}

function renderPicker(picker) {
  ui.picker.hidden = !picker.offered;
  if (!picker.offered) {
    return;
  }
  const all = picker.endpoints.map((e) => [e.id, e.name + " (" + e.model + ")"]);
  const seeing = picker.endpoints.filter((e) => e.supports_images).map((e) => [e.id, e.name + " (" + e.model + ")"]);
  fillSelect(ui.endpoint, all, picker.endpoint, gettext("The site's model"));
  const hearing = picker.endpoints.filter((e) => e.supports_transcription).map((e) => [e.id, e.name + " (" + e.model + ")"]);
  fillSelect(ui.pictureEndpoint, seeing, picker.picture_endpoint, gettext("The site's model"));
  fillSelect(ui.speechEndpoint, hearing, picker.speech_endpoint, gettext("The site's model"));
  ui.endpoint.disabled = picker.endpoint_locked;
  ui.pictureEndpoint.disabled = picker.picture_endpoint_locked;
  ui.speechEndpoint.disabled = picker.speech_endpoint_locked;
}

function usageText(item) {
  if (item.message) {
    return item.message;
  }
  const names = {
    cost_per_user: gettext("Cost: $%(used)s of $%(cap)s"),
    turns_per_user: gettext("Turns: %(used)s of %(cap)s"),
    off_purpose: gettext("Requests the assistant is not for: %(used)s of %(cap)s"),
    cost_site: gettext("The site's cost: $%(used)s of $%(cap)s"),
  };
  const unlimited = {
    cost_per_user: gettext("Cost: $%(used)s (no cap)"),
    turns_per_user: gettext("Turns: %(used)s (no cap)"),
    off_purpose: gettext("Requests the assistant is not for: %(used)s"),
    cost_site: gettext("The site's cost: $%(used)s"),
  };
  const used = item.limit.startsWith("cost") ? Number(item.used).toFixed(2) : item.used;
  const cap = item.limit.startsWith("cost") ? Number(item.cap).toFixed(2) : item.cap;
  const template = Number(item.cap) ? names[item.limit] : unlimited[item.limit];
  return interpolate(template || item.limit, { used: used, cap: cap }, true);
}

function renderUsage(items) {
  ui.usage.replaceChildren();
  for (const item of items) {
    const line = document.createElement("li");
    line.dataset.limit = item.limit;
    line.textContent = usageText(item);
    if (item.reached) {
      line.classList.add("reached");
    }
    ui.usage.append(line);
  }
}

function renderQuotas(items) {
  ui.quotas.replaceChildren();
  for (const item of items) {
    const line = document.createElement("li");
    line.dataset.limit = item.limit;
    line.textContent = item.text; // in the user's language from the server, sizes formatted
    if (item.reached) {
      line.classList.add("reached");
    }
    ui.quotas.append(line);
  }
}

function smallButton(label, onClick) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "button-small";
  button.textContent = label;
  button.addEventListener("click", onClick);
  return button;
}

// -- Telegram: connect a chat by a one-time link, see the chats connected, disconnect one ----------

function renderTelegram(telegram) {
  ui.telegram.hidden = !telegram.offered;
  ui.telegramLinks.replaceChildren();
  for (const link of telegram.links) {
    const line = document.createElement("li");
    line.dataset.link = String(link.id);
    const since = new Date(link.created_at).toLocaleDateString();
    line.append(interpolate(gettext("%(name)s, connected on %(date)s"), { name: link.name || "Telegram", date: since }, true), " ");
    line.append(smallButton(gettext("Disconnect"), () => revokeLink(link.id)));
    ui.telegramLinks.append(line);
  }
}

async function connectTelegram() {
  ui.telegramError.textContent = "";
  ui.telegramConnect.disabled = true;
  try {
    const invite = await request("POST", config.telegram_link_url, {});
    ui.telegramOpen.href = invite.url;
    const minutes = Math.round(invite.expires_in / 60);
    ui.telegramExpires.textContent = interpolate(
      gettext("The link works once, for %(minutes)s minutes."), { minutes: minutes }, true,
    );
    ui.telegramInvite.hidden = false;
    ui.telegramOpen.focus();
  } catch (failure) {
    ui.telegramError.textContent = errorText(failure);
  } finally {
    ui.telegramConnect.disabled = false;
  }
}

async function revokeLink(id) {
  ui.telegramError.textContent = "";
  try {
    renderTelegram((await request("POST", config.telegram_revoke_url, { link: id })).telegram);
  } catch (failure) {
    ui.telegramError.textContent = errorText(failure);
  }
}

ui.telegramConnect.addEventListener("click", connectTelegram);
// Back from Telegram after pressing Start: the new link shows (the rest of the form keeps what was typed).
window.addEventListener("focus", async () => {
  if (!ui.telegramInvite.hidden) {
    try {
      renderTelegram((await call("GET")).telegram);
    } catch (failure) {
      ui.telegramError.textContent = errorText(failure);
    }
  }
});

// -- MCP clients: make a token (its secret shown once), see the tokens with their last use, revoke one;
// where OAuth is on, see the apps connected by signing in, disconnect one --

function renderMcp(mcp) {
  ui.mcp.hidden = !mcp.offered;
  ui.mcpUrl.textContent = mcp.url;
  ui.mcpTokens.replaceChildren();
  for (const token of mcp.tokens) {
    const line = document.createElement("li");
    line.dataset.token = String(token.id);
    const used = token.last_used_at
      ? interpolate(gettext("last used %(date)s"), { date: new Date(token.last_used_at).toLocaleString() }, true)
      : gettext("not used yet");
    const until = token.expired
      ? gettext("expired")
      : interpolate(gettext("until %(date)s"), { date: new Date(token.expires_at).toLocaleDateString() }, true);
    line.append(`${token.name}: ${used}, ${until} `);
    line.append(smallButton(gettext("Revoke"), () => revokeToken(token.id)));
    ui.mcpTokens.append(line);
  }
  if (ui.mcpApps && mcp.apps) {
    renderApps(mcp.apps);
  }
}

function renderApps(apps) {
  ui.mcpApps.replaceChildren();
  for (const app of apps) {
    const line = document.createElement("li");
    line.dataset.app = String(app.id);
    const since = new Date(app.connected_at).toLocaleDateString();
    const used = app.last_used_at
      ? interpolate(gettext("last used %(date)s"), { date: new Date(app.last_used_at).toLocaleString() }, true)
      : gettext("not used yet");
    line.append(interpolate(gettext("%(name)s, connected on %(date)s"), { name: app.name, date: since }, true), `, ${used} `);
    line.append(smallButton(gettext("Disconnect"), () => disconnectApp(app.id)));
    ui.mcpApps.append(line);
  }
  ui.mcpAppsNone.hidden = apps.length > 0;
}

ui.mcpForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  ui.mcpError.textContent = "";
  try {
    const made = await request("POST", config.mcp_token_url, { name: ui.mcpName.value });
    ui.mcpSecret.textContent = made.secret;
    ui.mcpSecretNote.hidden = false;
    ui.mcpName.value = "";
    renderMcp(made.mcp);
  } catch (failure) {
    ui.mcpError.textContent = errorText(failure);
  }
});

async function revokeToken(id) {
  ui.mcpError.textContent = "";
  ui.mcpSecretNote.hidden = true;
  ui.mcpSecret.textContent = "";
  try {
    renderMcp((await request("POST", config.mcp_revoke_url, { token: id })).mcp);
  } catch (failure) {
    ui.mcpError.textContent = errorText(failure);
  }
}

async function disconnectApp(id) {
  ui.mcpError.textContent = "";
  try {
    renderMcp((await request("POST", config.mcp_disconnect_url, { app: id })).mcp);
  } catch (failure) {
    ui.mcpError.textContent = errorText(failure);
  }
}

function renderLanguage(languages, selected) {
  fillSelect(ui.language, languages, selected, gettext("As my browser asks"));
}

function showCount() {
  ui.count.textContent = interpolate(gettext("%(count)s of %(max)s characters"), {
    count: ui.instructions.value.length,
    max: maxInstructions,
  }, true);
}

function render(data) {
  maxInstructions = data.max_instructions;
  renderModels(data.models);
  renderPicker(data.picker);
  ui.instructions.value = data.instructions;
  renderLanguage(data.languages, data.language);
  renderUsage(data.usage);
  renderQuotas(data.quotas);
  ui.tools.textContent = data.tools.text; // in the user's language from the server
  renderTelegram(data.telegram);
  renderMcp(data.mcp);
  showCount();
  ui.form.hidden = false;
  ui.status.textContent = "";
}

function clearErrors() {
  for (const field of FIELDS) {
    const element = $("error-" + field);
    if (element) {
      element.textContent = "";
    }
  }
  ui.error.hidden = true;
}

function showFailure(failure) {
  if (failure instanceof ApiError && failure.code === "invalid" && failure.fields) {
    for (const [field, messages] of Object.entries(failure.fields)) {
      const element = $("error-" + field) || $("error-__all__");
      element.textContent = messages.join(" ");
    }
    return;
  }
  ui.error.textContent = errorText(failure);
  ui.error.hidden = false;
}

async function load() {
  try {
    render(await call("GET"));
  } catch (failure) {
    ui.status.textContent = "";
    showFailure(failure);
  }
}

ui.instructions.addEventListener("input", showCount);

ui.form.addEventListener("submit", async (event) => {
  event.preventDefault();
  clearErrors();
  ui.saved.textContent = "";
  const body = { instructions: ui.instructions.value, language: ui.language.value };
  if (!ui.picker.hidden) {
    if (!ui.endpoint.disabled) {
      body.endpoint = ui.endpoint.value;
    }
    if (!ui.pictureEndpoint.disabled) {
      body.picture_endpoint = ui.pictureEndpoint.value;
    }
    if (!ui.speechEndpoint.disabled) {
      body.speech_endpoint = ui.speechEndpoint.value;
    }
  }
  ui.save.disabled = true;
  try {
    render(await call("POST", body));
    ui.saved.textContent = gettext("Saved.");
  } catch (failure) {
    showFailure(failure);
  } finally {
    ui.save.disabled = false;
  }
});

load();
