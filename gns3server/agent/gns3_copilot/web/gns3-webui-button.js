// GNS3 Copilot: a button in GNS3's own web UI (added to its pages by the copilot's
// server middleware; the installed gns3-server files are not changed).
//
// On a project's page (/static/web-ui/controller/<id>/project/<project_id>) a
// "Copilot" button appears at the bottom right; it opens the copilot panel for
// that project docked beside the map (or in its own tab). The panel reuses the
// web UI's login through the controller id it is given. Nothing here reads or
// writes the web UI's own state beyond its URL.
(function () {
  "use strict";
  if (window.__gns3CopilotButton) return;
  window.__gns3CopilotButton = true;

  var PANEL = "/copilot/";
  var ROUTE = /\/controller\/([^/]+)\/project\/([0-9a-fA-F-]{36})(?:\/|$)/;
  var STYLE = [
    "#gns3-copilot-button{position:fixed;right:18px;bottom:18px;z-index:2147483000;display:flex;align-items:center;",
    "gap:6px;padding:9px 16px;border:none;border-radius:22px;background:#1f6feb;color:#fff;font:600 14px/1 ",
    "system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;box-shadow:0 3px 12px rgba(0,0,0,.35);cursor:pointer}",
    "#gns3-copilot-button:hover{filter:brightness(1.1)}",
    "#gns3-copilot-button:focus-visible{outline:3px solid #ff9f1c;outline-offset:2px}",
    "#gns3-copilot-button[aria-expanded=true]{right:438px}",
    "#gns3-copilot-dock{position:fixed;top:0;right:0;bottom:0;width:420px;max-width:100vw;z-index:2147483001;",
    "display:flex;flex-direction:column;background:#fff;box-shadow:-4px 0 16px rgba(0,0,0,.35)}",
    "#gns3-copilot-dock[hidden]{display:none}",
    "#gns3-copilot-dock .gc-head{display:flex;align-items:center;gap:8px;padding:4px 8px;background:#1d2430;color:#fff;",
    "font:600 13px system-ui,sans-serif}",
    "#gns3-copilot-dock .gc-head span{flex:1}",
    "#gns3-copilot-dock .gc-head a,#gns3-copilot-dock .gc-head button{color:#fff;background:none;border:none;",
    "font:13px system-ui,sans-serif;cursor:pointer;padding:4px 6px}",
    "#gns3-copilot-dock .gc-head a:focus-visible,#gns3-copilot-dock .gc-head button:focus-visible{outline:2px solid #ff9f1c}",
    "#gns3-copilot-dock iframe{flex:1;border:0;width:100%}",
    "@media (max-width:600px){#gns3-copilot-button[aria-expanded=true]{display:none}}",
  ].join("");

  var button, dock, frame, newTab, shownFor = null;

  function current() {
    var match = ROUTE.exec(window.location.pathname);
    return match ? { controllerId: match[1], projectId: match[2].toLowerCase() } : null;
  }

  function panelUrl(where) {
    return PANEL + "?project_id=" + encodeURIComponent(where.projectId) +
      "&controller_id=" + encodeURIComponent(where.controllerId);
  }

  function build() {
    var style = document.createElement("style");
    style.textContent = STYLE;
    document.head.appendChild(style);

    button = document.createElement("button");
    button.id = "gns3-copilot-button";
    button.type = "button";
    button.title = "Ask the copilot about this project";
    button.setAttribute("aria-controls", "gns3-copilot-dock");
    button.setAttribute("aria-expanded", "false");
    button.textContent = "\u2726 Copilot";
    button.hidden = true;
    button.addEventListener("click", toggle);

    dock = document.createElement("aside");
    dock.id = "gns3-copilot-dock";
    dock.setAttribute("aria-label", "GNS3 Copilot");
    dock.hidden = true;
    var head = document.createElement("div");
    head.className = "gc-head";
    var title = document.createElement("span");
    title.textContent = "GNS3 Copilot";
    newTab = document.createElement("a");
    newTab.target = "_blank";
    newTab.rel = "noopener";
    newTab.textContent = "Open in a tab \u2197";
    var close = document.createElement("button");
    close.type = "button";
    close.setAttribute("aria-label", "Close the copilot");
    close.textContent = "\u2715";
    close.addEventListener("click", function () { setOpen(false); button.focus(); });
    head.appendChild(title);
    head.appendChild(newTab);
    head.appendChild(close);
    frame = document.createElement("iframe");
    frame.id = "gns3-copilot-frame";
    frame.title = "GNS3 Copilot panel";
    dock.appendChild(head);
    dock.appendChild(frame);

    document.body.appendChild(dock);
    document.body.appendChild(button);
  }

  function setOpen(open) {
    var where = current();
    if (open && where) {
      var url = panelUrl(where);
      if (shownFor !== url) {
        frame.src = url;
        shownFor = url;
      }
      newTab.href = panelUrl(where);
    }
    dock.hidden = !open;
    button.setAttribute("aria-expanded", String(open));
    if (open) frame.focus();
  }

  function toggle() {
    setOpen(dock.hidden);
  }

  // The web UI is a single-page app: follow its URL (no hook into Angular needed).
  function update() {
    var where = current();
    button.hidden = !where;
    if (!where) {
      if (!dock.hidden) setOpen(false);
      return;
    }
    if (!dock.hidden && shownFor !== panelUrl(where)) setOpen(true);
  }

  function start() {
    build();
    update();
    window.addEventListener("popstate", update);
    window.setInterval(update, 500);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
