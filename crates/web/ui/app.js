// Switchboard web app: core (API calls, router, live events, dialogs, elicitation).
// Plain JavaScript, no build step. Pages register themselves in SB.pages.
"use strict";

var SB = (window.SB = {
  pages: {},
  config: null,
  servers: [],
  listeners: {},
  current: null,
});

// ---------- DOM helpers ----------
SB.el = function (tag, attrs) {
  var node = document.createElement(tag);
  if (attrs) {
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === undefined || v === null || v === false) return;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.slice(0, 2) === "on" && typeof v === "function") node.addEventListener(k.slice(2), v);
      else if (k === "dataset") Object.keys(v).forEach(function (d) { node.dataset[d] = v[d]; });
      else if (v === true) node.setAttribute(k, "");
      else node.setAttribute(k, String(v));
    });
  }
  for (var i = 2; i < arguments.length; i++) SB.append(node, arguments[i]);
  return node;
};

SB.append = function (node, child) {
  if (child === null || child === undefined || child === false) return node;
  if (Array.isArray(child)) { child.forEach(function (c) { SB.append(node, c); }); return node; }
  node.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
  return node;
};

SB.clear = function (node) { while (node.firstChild) node.removeChild(node.firstChild); return node; };

SB.json = function (v) { try { return JSON.stringify(v, null, 2); } catch (e) { return String(v); } };

SB.pre = function (text, cls) { return SB.el("pre", { class: "code " + (cls || "") }, text); };

// ---------- API ----------
SB.api = function (method, path, body) {
  var opts = { method: method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  return fetch("/api" + path, opts).then(function (resp) {
    return resp.text().then(function (text) {
      var data = null;
      try { data = text ? JSON.parse(text) : null; } catch (e) { data = { message: text }; }
      if (!resp.ok) {
        var err = new Error((data && data.message) || ("HTTP " + resp.status));
        err.status = resp.status;
        err.body = data;
        throw err;
      }
      return data;
    });
  });
};

// Reads a text/event-stream response body, calling onEvent(JSON) per `data:` event.
SB.readSse = function (resp, onEvent) {
  var reader = resp.body.getReader();
  var decoder = new TextDecoder();
  var buf = "";
  function pump() {
    return reader.read().then(function (r) {
      if (r.done) return;
      buf += decoder.decode(r.value, { stream: true });
      var idx;
      while ((idx = buf.search(/\r?\n\r?\n/)) >= 0) {
        var raw = buf.slice(0, idx);
        buf = buf.slice(idx).replace(/^\r?\n\r?\n/, "");
        var data = raw.split(/\r?\n/).filter(function (l) { return l.indexOf("data:") === 0; })
          .map(function (l) { return l.slice(5).replace(/^ /, ""); }).join("\n");
        if (data) { try { onEvent(JSON.parse(data)); } catch (e) { console.error(e); } }
      }
      return pump();
    });
  }
  return pump();
};

// ---------- events ----------
SB.on = function (type, fn) { (SB.listeners[type] = SB.listeners[type] || []).push(fn); };
SB.emit = function (type, data) {
  (SB.listeners[type] || []).concat(SB.listeners["*"] || []).forEach(function (fn) {
    try { fn(data); } catch (e) { console.error(e); }
  });
};

SB.refreshServers = function () {
  return SB.api("GET", "/mcp/servers").then(function (d) {
    SB.servers = d.servers || [];
    SB.emit("servers", SB.servers);
    return SB.servers;
  });
};

var refreshTimer = null;
SB.scheduleRefresh = function () {
  if (refreshTimer) return;
  refreshTimer = setTimeout(function () { refreshTimer = null; SB.refreshServers().catch(function () {}); }, 150);
};

function connectEvents() {
  var live = document.getElementById("live");
  var es = new EventSource("/api/events");
  es.onopen = function () { live.textContent = "live"; live.className = "live ok"; };
  es.onerror = function () { live.textContent = "reconnecting…"; live.className = "live bad"; };
  es.onmessage = function (ev) {
    var data;
    try { data = JSON.parse(ev.data); } catch (e) { return; }
    if (data.type === "status" || data.type === "lists" || data.type === "servers-changed" || data.type === "reconnecting") SB.scheduleRefresh();
    if (data.type === "elicitation") showElicitation(data);
    if (data.type === "elicitation-done") closeElicitation(data.id);
    SB.emit(data.type, data);
  };
}

// ---------- toasts and dialogs ----------
SB.toast = function (text, kind) {
  var t = SB.el("div", { class: "toast " + (kind || "") }, text);
  document.getElementById("toasts").appendChild(t);
  setTimeout(function () { t.remove(); }, 5000);
};

// A modal dialog; resolves with the chosen button's value (null on Escape).
SB.dialog = function (opts) {
  return new Promise(function (resolve) {
    var root = document.getElementById("overlay-root");
    var done = false;
    var backdrop = SB.el("div", { class: "modal-backdrop" });
    var box = SB.el("div", { class: "modal", role: "dialog", "aria-modal": "true", "aria-label": opts.title });
    function finish(v) {
      if (done) return;
      done = true;
      document.removeEventListener("keydown", onKey, true);
      backdrop.remove();
      resolve(v);
    }
    function onKey(e) { if (e.key === "Escape") { e.stopPropagation(); finish(null); } }
    box.appendChild(SB.el("h2", null, opts.title));
    if (opts.body) box.appendChild(opts.body);
    var buttons = SB.el("div", { class: "buttons" });
    (opts.buttons || [{ label: "OK", value: true, primary: true }]).forEach(function (b) {
      buttons.appendChild(SB.el("button", {
        class: b.primary ? "primary" : (b.danger ? "danger" : ""), type: "button",
        onclick: function () {
          if (b.validate && !b.validate()) return;
          finish(typeof b.value === "function" ? b.value() : b.value);
        },
      }, b.label));
    });
    box.appendChild(buttons);
    backdrop.appendChild(box);
    root.appendChild(backdrop);
    document.addEventListener("keydown", onKey, true);
    var focus = box.querySelector("input, textarea, select, button.primary");
    if (focus) focus.focus();
    if (opts.onOpen) opts.onOpen(finish);
  });
};

SB.confirm = function (title, text, okLabel) {
  return SB.dialog({
    title: title, body: SB.el("p", { class: "dialog-text" }, text),
    buttons: [{ label: "Cancel", value: false }, { label: okLabel || "OK", value: true, primary: true }],
  });
};

// ---------- links from servers ----------
// A server's URL becomes a link only if it is https:, or http: to this machine
// (localhost, 127.0.0.0/8, [::1]), without a user name or password; the same rule as
// links.rs. Returns the normalised href, or null.
SB.safeLinkHref = function (raw) {
  if (typeof raw !== "string" || raw === "" || raw.length > 4096) return null;
  if (/[\s\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/.test(raw)) return null;
  var u;
  try { u = new URL(raw); } catch (e) { return null; }
  if (u.username || u.password || !u.hostname) return null;
  if (u.protocol === "https:") return u.href;
  if (u.protocol !== "http:") return null;
  var h = u.hostname.toLowerCase().replace(/\.$/, "");
  if (h === "localhost" || h === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h)) return u.href;
  return null;
};

// ---------- elicitation (servers asking the person) ----------
var openElicitations = {};
function showElicitation(ev) {
  if (openElicitations[ev.id]) return;
  var req = ev.request || {};
  var body = SB.el("div", { class: "elicitation", dataset: { elicitation: ev.id } });
  body.appendChild(SB.el("p", { class: "dialog-text" }, SB.el("strong", null, ev.server), " asks: ", req.message || ""));
  var form = null;
  var refused = false;
  if (req.mode === "url") {
    // The server checked the URL (links.rs); the page checks again before linking.
    var link = ev.link || {};
    var href = link.href ? SB.safeLinkHref(link.href) : null;
    if (href) {
      body.appendChild(SB.el("p", null, SB.el("a", { href: href, target: "_blank", rel: "noopener noreferrer" }, href)));
    } else {
      refused = true;
      body.appendChild(SB.el("p", { class: "error" }, link.refused || "Switchboard will not open this link: only https (or http to this machine) is opened."));
      body.appendChild(SB.el("p", null, SB.el("code", { class: "inert-url" }, String(req.url || ""))));
    }
  } else {
    form = SB.schemaForm(req.requestedSchema || { type: "object", properties: {} }, {});
    body.appendChild(form.node);
  }
  var entry = { finish: null, closedByServer: false };
  openElicitations[ev.id] = entry;
  SB.dialog({
    title: "Input requested by " + ev.server,
    body: body,
    onOpen: function (finish) { entry.finish = finish; },
    buttons: [
      { label: "Cancel", value: "cancel" },
      { label: "Decline", value: "decline", primary: refused },
    ].concat(refused ? [] : [
      { label: "Submit", primary: true, value: "accept", validate: function () { return !form || form.validate(); } },
    ]),
  }).then(function (action) {
    delete openElicitations[ev.id];
    if (entry.closedByServer) return;
    var payload = { action: action || "cancel" };
    if (payload.action === "accept" && form) payload.content = form.value();
    SB.api("POST", "/elicitation/" + encodeURIComponent(ev.id), payload).catch(function (e) {
      SB.toast("Could not answer " + ev.server + ": " + e.message, "error");
    });
  });
}
function closeElicitation(id) {
  var entry = openElicitations[id];
  if (!entry) return;
  entry.closedByServer = true;
  if (entry.finish) entry.finish(null);
}

// ---------- status helpers ----------
SB.statusDot = function (status) {
  return SB.el("span", { class: "dot " + (status || "unknown"), title: status || "unknown" });
};

// ---------- router ----------
SB.navigate = function (path, replace) {
  if (replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  render();
};

function pageFor(path) {
  var name = path.replace(/^\/+/, "").split("/")[0] || "explorer";
  return SB.pages[name] ? name : "explorer";
}

function render() {
  var name = pageFor(location.pathname);
  document.querySelectorAll("[data-nav]").forEach(function (a) {
    a.classList.toggle("active", a.dataset.nav === name && a.parentNode.classList.contains("tabs"));
  });
  if (SB.current && SB.current.leave) { try { SB.current.leave(); } catch (e) { console.error(e); } }
  var view = SB.clear(document.getElementById("view"));
  view.dataset.page = name;
  SB.current = SB.pages[name];
  document.title = SB.current.title + " — Switchboard";
  SB.current.enter(view);
}

function boot() {
  // The printed link carries the token once; the cookie holds it now.
  var params = new URLSearchParams(location.search);
  if (params.has("token")) {
    params.delete("token");
    var rest = params.toString();
    history.replaceState(null, "", location.pathname + (rest ? "?" + rest : ""));
  }
  document.addEventListener("click", function (e) {
    var a = e.target.closest && e.target.closest("a[data-nav]");
    if (!a || e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    SB.navigate(a.getAttribute("href"));
  });
  window.addEventListener("popstate", render);
  SB.api("GET", "/config").then(function (cfg) {
    SB.config = cfg;
    connectEvents();
    return SB.refreshServers().catch(function () {});
  }).then(render).catch(function (e) {
    SB.append(SB.clear(document.getElementById("view")), SB.el("p", { class: "error" }, "Cannot reach the server: " + e.message));
  });
}

document.addEventListener("DOMContentLoaded", boot);
