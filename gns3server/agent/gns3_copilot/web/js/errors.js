// A failed request told in words the user can act on: the error codes of the API
// (docs/errors.md) become notices, some with the one action that helps.

import { ApiError } from "./api.js";
import { focusConfirmCard } from "./conversation.js";
import { notify, settingsAction } from "./notice.js";
import { state } from "./state.js";
import { abortRemote } from "./stop.js";

/** Tell the user what went wrong with a request; `context` says what was being done. */
export function reportError(error, context) {
  if (!(error instanceof ApiError)) {
    notify("error", `${context}: the GNS3 server could not be reached.`);
    return;
  }
  if (error.status === 401) return; // back to the sign-in form already
  if (error.code === "llm_not_configured") {
    notify("warn", "No LLM is configured yet. Add one in the LLM settings to start chatting.", settingsAction);
  } else if (error.code === "confirmation_pending") {
    notify("warn", `${error.message || "This conversation waits for your approval."} ` +
      "Approve or reject the configuration in the conversation first.", { label: "Show it", code: error.code,
      run: () => focusConfirmCard() });
  } else if (error.code === "no_pending_confirmation" || error.code === "approval_not_pending") {
    notify("warn", error.message || "Nothing waits for an approval in this conversation any more.");
  } else if (error.code === "approval_expired") {
    notify("warn", error.message || "This approval has expired: reject it, then ask again.");
  } else if (error.code === "session_busy" || error.status === 409) {
    notify("warn", "This conversation is still answering another request (perhaps in another window). " +
      "Wait for it to finish, or stop it.", {
      label: "Stop it", code: "session_busy", run: () => abortRemote(state.sessionId),
    });
  } else if (error.code === "api_key_unreadable") {
    notify("error", `${error.message} Enter the API key again in the LLM settings.`, settingsAction);
  } else {
    notify("error", `${context}: ${error.message}`);
  }
}
