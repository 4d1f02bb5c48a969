/* The composer's microphone: where the browser can record (MediaRecorder) and the user has a speech
 * model, it records, shows the time and a Stop, sends the recording to be transcribed and puts the
 * words in the message box for the user to read before sending. Nothing is ever sent unseen.
 *
 * An ES module of the chat page (no build step, strict CSP: no inline script or style).
 */

import { config, state, ui } from "./page.js";
import { api, errorText, urlFor } from "./api.js";

const MIME_TYPES = [
  ["audio/webm;codecs=opus", "voice.webm"],
  ["audio/ogg;codecs=opus", "voice.ogg"],
  ["audio/mp4", "voice.m4a"],
];

/* Whether this browser can record here: the page offers the microphone only then. */
export function canRecord() {
  return Boolean(
    config.voice && window.MediaRecorder && navigator.mediaDevices && navigator.mediaDevices.getUserMedia,
  );
}

/* Wire the microphone button. `openConversation` makes a chat when none is open yet (a recording
 * is transcribed for a chat). */
export function mountVoice({ button, status, openConversation }) {
  if (!canRecord()) {
    return;
  }
  button.hidden = false;
  const idleLabel = button.textContent;
  let recording = null;

  function show(text) {
    status.textContent = text;
    status.hidden = !text;
  }

  function elapsed(started) {
    const seconds = Math.floor((Date.now() - started) / 1000);
    return Math.floor(seconds / 60) + ":" + String(seconds % 60).padStart(2, "0");
  }

  async function start() {
    ui.composerError.textContent = "";
    let stream;
    try {
      // Speech as it was spoken: echo cancellation and the rest garble what a recognizer hears.
      stream = await navigator.mediaDevices.getUserMedia({
        audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false },
      });
    } catch (error) {
      ui.composerError.textContent = gettext("The microphone could not be used. Allow it for this site and try again.");
      return;
    }
    const [mimeType, name] = MIME_TYPES.find(([type]) => MediaRecorder.isTypeSupported(type)) || ["", "voice.webm"];
    const recorder = new MediaRecorder(stream, mimeType ? { mimeType: mimeType } : {});
    const pieces = [];
    const started = Date.now();
    recorder.addEventListener("dataavailable", (event) => {
      if (event.data && event.data.size) {
        pieces.push(event.data);
      }
    });
    recorder.addEventListener("stop", () => {
      stream.getTracks().forEach((track) => track.stop());
      window.clearInterval(recording.ticker);
      recording = null;
      button.textContent = idleLabel;
      button.setAttribute("aria-pressed", "false");
      transcribe(new Blob(pieces, { type: recorder.mimeType || mimeType }), name); // its length is read from it
    });
    recording = {
      recorder: recorder,
      ticker: window.setInterval(() => {
        show(interpolate(gettext("Recording %(time)s"), { time: elapsed(started) }, true));
        if (Date.now() - started >= config.max_voice_s * 1000) {
          finish();
        }
      }, 250),
    };
    recorder.start();
    button.textContent = gettext("Stop recording");
    button.setAttribute("aria-pressed", "true");
    show(interpolate(gettext("Recording %(time)s"), { time: "0:00" }, true));
  }

  function finish() {
    if (recording && recording.recorder.state !== "inactive") {
      recording.recorder.stop();
    }
  }

  async function transcribe(blob, name) {
    if (!blob.size) {
      show("");
      return;
    }
    button.disabled = true;
    show(gettext("Turning your words into text…"));
    try {
      if (!state.current) {
        await openConversation();
      }
      const form = new FormData();
      form.append("audio", blob, name);
      const answer = await api("POST", urlFor("transcribe", state.current), form);
      if (answer.text) {
        const before = ui.text.value;
        ui.text.value = before + (before && !/\s$/.test(before) ? " " : "") + answer.text;
        ui.text.dispatchEvent(new Event("input"));
        ui.text.focus();
      } else {
        ui.composerError.textContent = gettext("No words were heard in the recording.");
      }
    } catch (error) {
      ui.composerError.textContent = errorText(error);
    } finally {
      button.disabled = false;
      show("");
    }
  }

  button.addEventListener("click", () => (recording ? finish() : start()));
}
