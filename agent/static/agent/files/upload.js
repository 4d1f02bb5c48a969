/* One file's upload with its progress. XMLHttpRequest, since fetch reports no upload progress; its answer
 * keeps the pages' HTTP contract (http.js): the stored file's client view, or an ApiError built from the
 * refusal's body as `request` builds it ("upload_failed" when no answer came, ABORTED when called off).
 *
 * An ES module of the chat page (no build step, strict CSP).
 */

import { ApiError, csrfToken, refusal } from "../http.js";

export const ABORTED = "aborted";

/* Start sending `file` to `url`: {done, abort}; `done` resolves with the stored file's view. */
export function uploadFile(url, file, onProgress) {
  const xhr = new XMLHttpRequest();
  const done = new Promise((resolve, reject) => {
    xhr.open("POST", url);
    xhr.setRequestHeader("X-CSRFToken", csrfToken());
    xhr.responseType = "json";
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) {
        onProgress(Math.round((100 * event.loaded) / event.total));
      }
    });
    xhr.addEventListener("load", () => {
      const answer = xhr.response || {};
      if (xhr.status === 201 && answer.attachment) {
        resolve(answer.attachment);
      } else {
        reject(refusal(answer, "upload_failed"));
      }
    });
    xhr.addEventListener("error", () => reject(new ApiError("upload_failed")));
    xhr.addEventListener("abort", () => reject(new ApiError(ABORTED)));
  });
  const body = new FormData();
  body.append("file", file, file.name);
  xhr.send(body);
  return { done: done, abort: () => xhr.abort() };
}
