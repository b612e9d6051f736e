// Where the panel's GNS3 token comes from.
//
// 1. The panel's own login, kept in sessionStorage (this tab only, survives reloads).
// 2. GNS3's web UI, when the panel is opened from it on the same server: the web UI
//    keeps one record per controller in localStorage ("controllerIds" lists
//    "controller-<id>" keys; each is JSON with host, port, authToken, tokenExpired).
//    The panel reads the token only; it never writes the web UI's storage.
//
// A candidate token is used only once the server accepted it (GET /v3/access/users/me).

const TOKEN_KEY = "gns3-copilot.token";
const SIGNED_OUT_KEY = "gns3-copilot.signed-out";

function storage(kind) {
  try {
    return kind === "local" ? window.localStorage : window.sessionStorage;
  } catch {
    return null; // storage disabled (privacy settings, sandboxed frame)
  }
}

export function savedToken() {
  return storage("session")?.getItem(TOKEN_KEY) || null;
}

export function saveToken(token) {
  const s = storage("session");
  if (!s) return;
  s.setItem(TOKEN_KEY, token);
  s.removeItem(SIGNED_OUT_KEY);
}

/** Forget our token; the web UI's token is not reused in this tab until the next sign-in. */
export function signOut() {
  const s = storage("session");
  if (!s) return;
  s.removeItem(TOKEN_KEY);
  s.setItem(SIGNED_OUT_KEY, "1");
}

function sameServer(controller) {
  const host = String(controller.host || "");
  const port = String(controller.port || "");
  const here = window.location;
  const herePort = here.port || (here.protocol === "https:" ? "443" : "80");
  const hosts = new Set([here.hostname, "localhost", "127.0.0.1"]);
  return (host === here.hostname || (hosts.has(host) && hosts.has(here.hostname))) && (!port || port === herePort);
}

/**
 * Tokens of GNS3's web UI for this server, best first: the controller named in
 * the URL (`controller_id`, as the web UI's button passes it), then any
 * controller record that points at this same server.
 */
export function webUiTokens(controllerId) {
  const s = storage("local");
  const session = storage("session");
  if (!s || session?.getItem(SIGNED_OUT_KEY)) return [];
  const keys = (s.getItem("controllerIds") || "").split(",").filter(Boolean);
  const records = [];
  for (const key of keys) {
    let record;
    try {
      record = JSON.parse(s.getItem(key) || "null");
    } catch {
      continue;
    }
    if (!record || typeof record.authToken !== "string" || !record.authToken || record.tokenExpired) continue;
    records.push(record);
  }
  const wanted = controllerId ? records.filter((r) => String(r.id) === String(controllerId)) : [];
  const rest = records.filter((r) => !wanted.includes(r) && sameServer(r));
  return [...new Set([...wanted, ...rest].map((r) => r.authToken))];
}
