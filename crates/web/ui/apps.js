// MCP Apps, host side (official protocol 2026-01-26, plus GemiHub's legacy messages).
//
// SB.openApp({server, resourceUri, tool, args, context, chatSessionId, onMessage, into})
// renders an app card: the sandbox proxy (another origin) in an iframe, fed the app's
// HTML by postMessage. Every message is checked for source window and origin. App
// requests go to the server through /api/mcp/tool-call and /api/mcp/resource-read with
// the app session id: the server side decides which MCP server that is.
//
// opts.host (the team page's): {open(), forward(appId, method, params), close(appId),
// context(appId, {content, structuredContent})} replaces those API calls; a proxyOrigin of "null" (the team's sandbox runs in an
// opaque origin) is matched as such and posted to with "*" (the frame is checked by
// identity, ev.source).
"use strict";

(function () {
  var el = SB.el;
  var PROTOCOL = "2026-01-26";
  var maximized = null;

  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape" && maximized) { e.preventDefault(); maximized.setMode("inline"); }
  });

  function theme() {
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }

  SB.openApp = function (opts) {
    var app = {
      id: null, opts: opts, initialized: false, legacy: false, loaded: false,
      result: opts.result || null, cancelled: null, mode: "inline", torn: false, log: [],
    };
    var title = (opts.tool || opts.resourceUri) + " · " + opts.server;
    var status = el("span", { class: "app-status" }, "loading…");
    var body = el("div", { class: "app-body loading" }, el("div", { class: "spinner-wrap" }, el("div", { class: "spinner", role: "progressbar", "aria-label": "Loading the app" })));
    var btnCollapse = el("button", { type: "button", class: "icon", title: "Collapse", "aria-label": "Collapse", onclick: function () { toggleCollapse(); } }, "▾");
    var btnMax = el("button", { type: "button", class: "icon", title: "Maximize (Escape restores)", "aria-label": "Maximize", onclick: function () { app.setMode(app.mode === "fullscreen" ? "inline" : "fullscreen"); } }, "⤢");
    var btnClose = el("button", { type: "button", class: "icon", title: "Close", "aria-label": "Close app", onclick: function () { app.teardown(); } }, "✕");
    var logList = el("ol", { class: "app-log" });
    var card = el("section", { class: "app-card", dataset: { appState: "loading", server: opts.server, resourceUri: opts.resourceUri } },
      el("header", { class: "app-head" }, el("span", { class: "app-badge" }, "App"), el("span", { class: "app-title" }, title), status, btnCollapse, btnMax, btnClose),
      body,
      el("details", { class: "app-log-wrap" }, el("summary", null, "Messages"), logList));
    var backdrop = el("div", { class: "app-backdrop", onclick: function () { app.setMode("inline"); } });
    opts.into.appendChild(card);
    var iframe = null;
    var proxyOrigin = null;

    function note(dir, msg) {
      var text = dir + " " + (msg.method || (msg.error ? "error" : "result")) + (msg.id !== undefined ? " #" + msg.id : "");
      app.log.push(text);
      logList.appendChild(el("li", null, text));
      if (logList.children.length > 200) logList.removeChild(logList.firstChild);
    }
    function setState(s, text) { card.dataset.appState = s; status.textContent = text || s; }
    function toggleCollapse() {
      var c = card.classList.toggle("collapsed");
      btnCollapse.textContent = c ? "▸" : "▾";
      btnCollapse.title = c ? "Expand" : "Collapse";
    }
    function post(msg) {
      if (!iframe || !iframe.contentWindow || app.torn) return;
      note("→", msg);
      iframe.contentWindow.postMessage(msg, proxyOrigin === "null" ? "*" : proxyOrigin);
    }
    function respond(id, result) { post({ jsonrpc: "2.0", id: id, result: result }); }
    function fail(id, code, message) { post({ jsonrpc: "2.0", id: id, error: { code: code, message: message } }); }
    function notify(method, params) { post({ jsonrpc: "2.0", method: method, params: params || {} }); }

    function dims() {
      var w = card.clientWidth || opts.into.clientWidth || 600;
      return app.mode === "fullscreen" ? { width: w, height: card.clientHeight } : { width: w, maxHeight: 900 };
    }
    function hostContext() {
      return {
        toolInfo: app.toolDef ? { id: opts.callId, tool: app.toolDef } : undefined,
        theme: theme(),
        displayMode: app.mode,
        availableDisplayModes: ["inline", "fullscreen"],
        containerDimensions: dims(),
        locale: navigator.language || "en",
        timeZone: (Intl.DateTimeFormat().resolvedOptions() || {}).timeZone,
        userAgent: "switchboard-web/" + (SB.config ? SB.config.version : "?"),
        platform: "web",
        deviceCapabilities: {
          touch: !!(window.matchMedia && window.matchMedia("(pointer: coarse)").matches),
          hover: !!(window.matchMedia && window.matchMedia("(hover: hover)").matches),
        },
        safeAreaInsets: { top: 0, right: 0, bottom: 0, left: 0 },
      };
    }

    app.setMode = function (mode) {
      if (mode !== "inline" && mode !== "fullscreen") return app.mode;
      if (mode === app.mode) return mode;
      app.mode = mode;
      if (mode === "fullscreen") {
        if (maximized && maximized !== app) maximized.setMode("inline");
        maximized = app;
        card.classList.add("maximized");
        document.body.appendChild(backdrop);
        btnMax.textContent = "⤡";
      } else {
        if (maximized === app) maximized = null;
        card.classList.remove("maximized");
        backdrop.remove();
        btnMax.textContent = "⤢";
      }
      if (app.initialized) notify("ui/notifications/host-context-changed", { displayMode: mode, containerDimensions: dims() });
      return mode;
    };

    app.setResult = function (result) {
      app.result = result;
      if (app.initialized) notify("ui/notifications/tool-result", result);
      else if (app.legacy) sendLegacy();
    };
    app.cancel = function (reason) {
      app.cancelled = reason || "cancelled";
      if (app.initialized) notify("ui/notifications/tool-cancelled", { reason: app.cancelled });
      setState(app.initialized ? "cancelled" : "cancelled", "tool call " + app.cancelled);
    };
    function sendLegacy() {
      if (!app.result) return;
      post({ jsonrpc: "2.0", method: "toolResult", params: { content: app.result.content || [], isError: !!app.result.isError, structuredContent: app.result.structuredContent } });
    }

    app.teardown = function () {
      if (app.torn) return Promise.resolve();
      var done = function () {
        app.torn = true;
        window.removeEventListener("message", onMessage);
        if (maximized === app) { maximized = null; backdrop.remove(); }
        card.remove();
        if (app.id) (opts.host ? opts.host.close(app.id) : SB.api("DELETE", "/apps/" + encodeURIComponent(app.id))).catch(function () {});
      };
      if (!app.initialized) { done(); return Promise.resolve(); }
      var id = "teardown-" + Date.now();
      return new Promise(function (resolve) {
        app.pending[id] = function () { done(); resolve(); };
        post({ jsonrpc: "2.0", id: id, method: "ui/resource-teardown", params: {} });
        setTimeout(function () { if (app.pending[id]) { delete app.pending[id]; done(); resolve(); } }, 1000);
      });
    };
    app.pending = {};

    function forward(method, params) {
      if (opts.host) return opts.host.forward(app.id, method, params);
      if (method === "tools/call") {
        return SB.api("POST", "/mcp/tool-call", { appId: app.id, tool: params.name, args: params.arguments || {} }).then(function (r) { return r.result; });
      }
      if (method === "resources/read") {
        return SB.api("POST", "/mcp/resource-read", { appId: app.id, uri: params.uri }).then(function (r) { return r.result; });
      }
      return SB.api("GET", "/apps/" + encodeURIComponent(app.id) + "/lists").then(function (l) {
        if (method === "resources/list") return { resources: l.resources };
        if (method === "resources/templates/list") return { resourceTemplates: l.resourceTemplates };
        return { prompts: l.prompts };
      });
    }

    function handleRequest(msg) {
      var p = msg.params || {};
      switch (msg.method) {
        case "ui/initialize":
          app.sawInitialize = true;
          respond(msg.id, {
            protocolVersion: PROTOCOL,
            hostInfo: { name: "switchboard", version: SB.config ? SB.config.version : "0" },
            hostCapabilities: {
              openLinks: {},
              serverTools: {},
              serverResources: {},
              logging: {},
              updateModelContext: !opts.host || opts.host.context ? { text: {}, structuredContent: {} } : undefined,
              message: { text: {} },
              sandbox: { csp: app.opened.csp || {}, permissions: app.opened.permissions || {} },
            },
            hostContext: hostContext(),
          });
          return;
        case "ping":
          respond(msg.id, {});
          return;
        case "tools/call":
        case "resources/read":
        case "resources/list":
        case "resources/templates/list":
        case "prompts/list":
          forward(msg.method, p).then(function (r) { respond(msg.id, r); }, function (e) {
            fail(msg.id, e.status === 403 ? -32001 : -32603, e.message);
          });
          return;
        case "ui/open-link":
          var url = String(p.url || "");
          if (!/^https?:\/\//i.test(url)) { respond(msg.id, { isError: true }); return; }
          SB.confirm("Open a link?", "The app " + title + " wants to open " + url, "Open link").then(function (ok) {
            if (ok) window.open(url, "_blank", "noopener,noreferrer");
            respond(msg.id, ok ? {} : { isError: true });
          });
          return;
        case "ui/message":
          var text = (p.content || []).filter(function (b) { return b && b.type === "text"; }).map(function (b) { return b.text; }).join("\n");
          if (opts.onMessage) {
            Promise.resolve(opts.onMessage(text, p)).then(function () { respond(msg.id, {}); }, function () { respond(msg.id, { isError: true }); });
          } else {
            SB.toast("Message from the app: " + text);
            respond(msg.id, {});
          }
          return;
        case "ui/update-model-context":
        case "context/update":
          var ctx = msg.method === "context/update" ? { structuredContent: p } : p;
          if (opts.host) {
            if (!opts.host.context) { fail(msg.id, -32601, "Method not found: " + msg.method); return; }
            opts.host.context(app.id, ctx).then(function () {
              app.modelContext = ctx;
              respond(msg.id, msg.method === "context/update" ? { ok: true } : {});
            }, function (e) { fail(msg.id, e.status === 403 ? -32001 : -32603, e.message); });
            return;
          }
          if (opts.chatSessionId && opts.chatSessionId()) {
            SB.api("POST", "/chat/context", { sessionId: opts.chatSessionId(), content: ctx.content, structuredContent: ctx.structuredContent }).catch(function () {});
          }
          app.modelContext = ctx;
          respond(msg.id, msg.method === "context/update" ? { ok: true } : {});
          return;
        case "ui/request-display-mode":
          respond(msg.id, { mode: app.setMode(p.mode) });
          return;
        default:
          fail(msg.id, -32601, "Method not found: " + msg.method);
      }
    }

    function handleNotification(msg) {
      var p = msg.params || {};
      switch (msg.method) {
        case "ui/notifications/sandbox-proxy-ready":
          post({ jsonrpc: "2.0", method: "ui/notifications/sandbox-resource-ready", params: {
            html: app.opened.html, sandbox: app.opened.sandbox, csp: app.opened.csp, permissions: app.opened.permissions, allow: app.opened.allow,
          } });
          return;
        case "ui/notifications/sandbox-app-loaded":
          app.loaded = true;
          setTimeout(function () {
            if (!app.sawInitialize && !app.torn) {
              // An app that predates the official protocol (GemiHub style).
              app.legacy = true;
              card.dataset.appState = "legacy";
              status.textContent = "ready";
              body.classList.remove("loading");
              sendLegacy();
            }
          }, 600);
          return;
        case "ui/notifications/initialized":
          app.initialized = true;
          card.dataset.initialized = "true";
          body.classList.remove("loading");
          setState("initialized", "ready");
          notify("ui/notifications/tool-input", { arguments: opts.args || {} });
          if (app.result) notify("ui/notifications/tool-result", app.result);
          else if (app.cancelled) notify("ui/notifications/tool-cancelled", { reason: app.cancelled });
          return;
        case "ui/notifications/size-changed":
          if (typeof p.height === "number" && app.mode === "inline") {
            iframe.style.height = Math.max(60, Math.min(2000, Math.ceil(p.height))) + "px";
          }
          return;
        case "ui/notifications/request-teardown":
          app.teardown();
          return;
        case "notifications/message":
          console.log("[app " + title + "]", p.level, p.data);
          return;
      }
    }

    function onMessage(ev) {
      if (!iframe || ev.source !== iframe.contentWindow || ev.origin !== proxyOrigin) return;
      var msg = ev.data;
      if (!msg || typeof msg !== "object" || msg.jsonrpc !== "2.0") return;
      note("←", msg);
      if (msg.method && msg.id !== undefined && msg.id !== null) handleRequest(msg);
      else if (msg.method) handleNotification(msg);
      else if (msg.id !== undefined && app.pending[msg.id]) { var f = app.pending[msg.id]; delete app.pending[msg.id]; f(msg); }
    }

    (opts.host ? opts.host.open() : SB.api("POST", "/apps", { server: opts.server, resourceUri: opts.resourceUri, tool: opts.tool })).then(function (opened) {
      if (app.torn) return;
      app.opened = opened;
      app.id = opened.appId;
      app.toolDef = opened.tool;
      proxyOrigin = opened.proxyOrigin;
      card.dataset.appId = opened.appId;
      if (opened.prefersBorder === false) card.classList.add("borderless");
      iframe = el("iframe", {
        class: "app-frame", title: "MCP App: " + title, src: opened.proxyUrl,
        sandbox: "allow-scripts allow-same-origin allow-forms", allow: opened.allow || null,
        referrerpolicy: "no-referrer",
      });
      window.addEventListener("message", onMessage);
      body.classList.add("loading");
      body.appendChild(iframe);
      setState("loading", "starting…");
    }, function (e) {
      setState("error", "failed");
      SB.clear(body).appendChild(el("p", { class: "error" }, "Could not load the app: " + e.message));
    });
    return app;
  };
})();
