/* What the composer's files say: phrases in the user's language, sizes, and why a file is refused before
 * its upload (the server's limits, from the page's config: `maxBytes`, `maxFiles`, `extensions`).
 *
 * An ES module of the chat page (no build step, strict CSP).
 */

/* gettext() from Django's JavaScriptCatalog, loaded first; the phrase as written if it is missing. */
export const _ = (text) => (typeof window.gettext === "function" ? window.gettext(text) : text);

export function interpolate(text, values) {
  if (typeof window.interpolate === "function") {
    return window.interpolate(text, values, true);
  }
  return text.replace(/%\((\w+)\)s/g, (whole, key) => String(values[key]));
}

export function formatSize(bytes) {
  if (bytes >= 1024 * 1024) {
    const megabytes = bytes / (1024 * 1024);
    return `${Number.isInteger(megabytes) ? megabytes : megabytes.toFixed(1)} MB`;
  }
  return `${Math.max(1, Math.round(bytes / 1024))} KB`;
}

/* Why a file is refused before its upload, naming the limit or the accepted types; "" if it may go. */
export function refusalBefore(file, limits) {
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

/* Why a file past the count is refused: the first ones picked are kept. */
export function tooManyFiles(max) {
  return interpolate(_("Not attached: at most %(max)s files go with one message."), { max: max });
}
