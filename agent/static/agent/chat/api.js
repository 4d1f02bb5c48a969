/* The chat page's JSON API: URLs from the page's config, and a session that ended announced on the bus.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

import { announce, config, PLACEHOLDER, SESSION_CODES } from "./page.js";
import { ApiError, request } from "../http.js";

export { ApiError, csrfToken, errorText, refusal } from "../http.js";

export function urlFor(name, id) {
  const pattern = config.urls[name];
  return id ? pattern.replace(PLACEHOLDER, encodeURIComponent(id)) : pattern;
}

/* `failure`, after announcing on the bus a session that ended (the page offers to sign in again). */
export function noticed(failure) {
  if (failure instanceof ApiError && SESSION_CODES.has(failure.code)) {
    announce("signed-out", failure.code);
  }
  return failure;
}

export async function api(method, url, body) {
  try {
    return await request(method, url, body);
  } catch (failure) {
    throw noticed(failure);
  }
}
