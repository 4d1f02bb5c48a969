/* The pages' HTTP transport: JSON over fetch with Django's CSRF token, a refusal as an ApiError that
 * carries its code and the server's own sentence. The chat page (chat/api.js), its files
 * (files/tray.js; files/upload.js builds its refusals with `refusal`) and "My assistant" (assistant.js)
 * all go through it.
 *
 * An ES module (no build step, strict CSP: no inline script or style).
 */

export class ApiError extends Error {
  constructor(code, fields, explained) {
    super(code);
    this.code = code;
    this.fields = fields || null;
    this.explained = explained || ""; // the server's words for it, in the user's language
  }
}

export function csrfToken() {
  const input = document.querySelector("input[name=csrfmiddlewaretoken]");
  return input ? input.value : "";
}

/* The JSON answer of `url`, or an ApiError: "network" when no answer came, else the body's code.
 * A POST sends `body` as JSON, or as it is when it is a FormData (a file). */
export async function request(method, url, body) {
  const options = { method: method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (method === "POST") {
    options.headers["X-CSRFToken"] = csrfToken();
    if (body instanceof FormData) {
      options.body = body;
    } else {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body || {});
    }
  }
  let response;
  try {
    response = await fetch(url, options);
  } catch (error) {
    throw new ApiError("network");
  }
  let data;
  try {
    data = await response.json();
  } catch (error) {
    data = null;
  }
  if (!response.ok) {
    throw refusal(data);
  }
  return data;
}

/* A refused answer's JSON body (null when it had none) as an ApiError: its code (else `fallback`), fields
 * and sentence. */
export function refusal(data, fallback) {
  return new ApiError((data && data.error) || fallback || "server", data && data.fields, data && data.message);
}

/* What to tell the user of a failed call: the fields' messages, else the server's sentence. */
export function errorText(error) {
  if (error instanceof ApiError && error.code === "invalid" && error.fields) {
    return Object.values(error.fields).flat().join(" ");
  }
  if (error instanceof ApiError && error.explained) {
    return error.explained;
  }
  if (error instanceof ApiError && error.code === "network") {
    return gettext("The server could not be reached. Check your connection and try again.");
  }
  return gettext("Something went wrong. Try again.");
}
