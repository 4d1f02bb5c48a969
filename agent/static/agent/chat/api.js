/* The page's JSON API: URLs from the page's data attributes, CSRF, refusals as ApiError with a code.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

import { PLACEHOLDER, refusalText, root, SESSION_CODES } from "./page.js";
import { signedOut } from "./composer.js";

export class ApiError extends Error {
  constructor(code, fields, explained) {
    super(code);
    this.code = code;
    this.fields = fields || null;
    this.explained = explained || ""; // a limit's own words from the server: which, how much, until when
  }
}

export function urlFor(name, id) {
  const pattern = root.dataset["url" + name.charAt(0).toUpperCase() + name.slice(1)];
  return id ? pattern.replace(PLACEHOLDER, encodeURIComponent(id)) : pattern;
}

export function csrfToken() {
  const input = root.querySelector("input[name=csrfmiddlewaretoken]");
  return input ? input.value : "";
}

export async function api(method, url, body) {
  const options = { method: method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (method === "POST") {
    options.headers["Content-Type"] = "application/json";
    options.headers["X-CSRFToken"] = csrfToken();
    options.body = JSON.stringify(body || {});
  }
  let response;
  try {
    response = await fetch(url, options);
  } catch (error) {
    throw new ApiError("network");
  }
  let data = null;
  try {
    data = await response.json();
  } catch (error) {
    data = null;
  }
  if (!response.ok) {
    const failure = new ApiError((data && data.error) || "server", data && data.fields, data && data.message);
    if (SESSION_CODES.has(failure.code)) {
      signedOut(failure.code);
    }
    throw failure;
  }
  return data;
}

export function errorText(error) {
  if (error instanceof ApiError && error.code === "invalid" && error.fields) {
    return Object.values(error.fields).flat().join(" ");
  }
  if (error instanceof ApiError && error.explained) {
    return error.explained;
  }
  return refusalText(error instanceof ApiError ? error.code : "server");
}
