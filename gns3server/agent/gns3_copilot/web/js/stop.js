// Stopping a run: the server's abort for the session, or, when that cannot be asked
// (no session id yet, or it failed), closing the stream, which cancels the run too.

import { ApiError } from "./api.js";
import { clearNotice } from "./notice.js";
import { $, state } from "./state.js";

/** Ask the server to stop the session's run; true when nothing runs there any more. */
export async function abortRemote(sessionId) {
  if (!sessionId || !state.projectId) return false;
  try {
    await state.api.abort(state.projectId, sessionId);
    clearNotice();
    return true;
  } catch (error) {
    if (error instanceof ApiError && error.status === 409) {
      clearNotice(); // nothing running any more
      return true;
    }
    return false;
  }
}

export async function stopRun() {
  const run = state.run;
  if (!run || run.stopped) return;
  run.stopped = true;
  $("stop-button").disabled = true;
  try {
    // The server's abort keeps the stream open to deliver "abort" and "done";
    // without a session id yet (or if it fails), closing the stream cancels the run.
    const aborted = await abortRemote(run.sessionId);
    if (!aborted) run.controller.abort();
  } finally {
    $("stop-button").disabled = false;
  }
}
