// Explorer page: every server's tools, resources and prompts with live status; call a
// tool from a form generated from its input schema (its MCP App renders below), read
// resources, get prompts, see raw JSON. Works without a Gemini key.
"use strict";

(function () {
  var el = SB.el;
  var state = { selected: null, tab: "tools", root: null, apps: [] };

  function selectedServer() {
    return SB.servers.filter(function (s) { return s.name === state.selected; })[0] || null;
  }

  function renderSidebar(side) {
    SB.clear(side);
    side.appendChild(el("h2", { class: "side-title" }, "Servers"));
    if (!SB.servers.length) {
      side.appendChild(el("p", { class: "muted" }, "No servers yet. ", el("a", { href: "/settings", "data-nav": "settings" }, "Add one in Settings"), "."));
      return;
    }
    var list = el("ul", { class: "server-list" });
    SB.servers.forEach(function (s) {
      var counts = s.status === "connected" ? s.tools.length + " tools · " + s.resources.length + " res · " + s.prompts.length + " prompts" : (s.status || "");
      list.appendChild(el("li", null, el("button", {
        type: "button", class: "server-item" + (s.name === state.selected ? " active" : ""),
        dataset: { server: s.name, status: s.status },
        onclick: function () { state.selected = s.name; state.tab = "tools"; renderAll(); },
      }, SB.statusDot(s.status), el("span", { class: "server-name" }, s.name), el("span", { class: "server-counts" }, counts))));
    });
    side.appendChild(list);
  }

  function renderHeader(s) {
    var head = el("div", { class: "server-head" },
      el("div", { class: "server-title" }, SB.statusDot(s.status), el("h1", null, s.name),
        el("span", { class: "badge status-" + s.status, dataset: { statusBadge: s.name } }, s.status),
        el("span", { class: "badge" }, s.connectedVia || s.transport),
        s.serverInfo ? el("span", { class: "muted" }, s.serverInfo.name + " " + s.serverInfo.version) : null,
        el("span", { class: "spacer" }),
        s.status !== "blocked" && s.status !== "disabled" ? el("button", { type: "button", onclick: function () {
          SB.api("POST", "/mcp/servers/" + encodeURIComponent(s.name) + "/restart", {}).then(function () { SB.toast("Reconnecting " + s.name + "…"); }, function (e) { SB.toast(e.message, "error"); });
        } }, "Reconnect") : null),
      el("div", { class: "server-target" }, el("code", null, s.target)));
    if (s.error) head.appendChild(el("div", { class: "error-box" }, s.error, s.hint ? el("div", { class: "hint" }, "→ " + s.hint) : null));
    (s.warnings || []).forEach(function (w) { head.appendChild(el("div", { class: "warn-box" }, w)); });
    return head;
  }

  function toolCard(s, t) {
    var form = SB.schemaForm(t.inputSchema, {});
    var out = el("div", { class: "tool-output" });
    var appsBox = el("div", { class: "tool-apps" });
    var callBtn = el("button", { type: "button", class: "primary", dataset: { call: t.name } }, "Call");
    var uiUri = t.ui && t.ui.resourceUri;
    var visibility = t.ui ? t.ui.visibility : null;
    callBtn.addEventListener("click", function () {
      var errors = form.errors();
      if (errors.length) { SB.clear(out).appendChild(el("div", { class: "error-box" }, errors.join("; "))); return; }
      var args = form.value();
      callBtn.disabled = true;
      SB.clear(out).appendChild(el("div", { class: "muted" }, "Calling ", t.name, "…"));
      var app = null;
      if (uiUri) app = openApp(s, t, uiUri, args, appsBox);
      SB.api("POST", "/mcp/tool-call", { server: s.name, tool: t.name, args: args }).then(function (r) {
        SB.clear(out);
        var res = r.result || {};
        out.appendChild(el("div", { class: "result-head " + (res.isError ? "is-error" : "is-ok") }, res.isError ? "Tool error" : "Result"));
        out.appendChild(SB.renderContent(res.content));
        if (res.structuredContent !== undefined) out.appendChild(el("div", { class: "structured" }, el("div", { class: "muted" }, "structuredContent"), SB.pre(SB.json(res.structuredContent))));
        out.appendChild(SB.rawJson(res));
        if (app) app.setResult(res);
        else if (r.ui && r.ui.resourceUri) openApp(s, t, r.ui.resourceUri, args, appsBox, res);
      }, function (e) {
        SB.clear(out).appendChild(el("div", { class: "error-box" }, e.message));
        if (app) app.cancel("failed: " + e.message);
      }).then(function () { callBtn.disabled = false; });
    });
    var ann = t.annotations || {};
    var badges = [];
    if (uiUri) badges.push(el("span", { class: "badge app" }, "MCP App"));
    if (ann.readOnlyHint) badges.push(el("span", { class: "badge" }, "read-only"));
    if (ann.destructiveHint) badges.push(el("span", { class: "badge danger" }, "destructive"));
    if (visibility && visibility.indexOf("model") < 0) badges.push(el("span", { class: "badge" }, "app-only"));
    return el("details", { class: "item tool", dataset: { tool: t.name } },
      el("summary", null, el("span", { class: "item-name" }, t.name), t.title && t.title !== t.name ? el("span", { class: "muted" }, " — " + t.title) : null, badges),
      el("div", { class: "item-body" },
        t.description ? el("p", { class: "desc" }, t.description) : null,
        form.node,
        el("div", { class: "row" }, callBtn),
        out, appsBox,
        SB.rawJson(t, "Tool definition")));
  }

  function openApp(s, t, uri, args, into, result) {
    var app = SB.openApp({ server: s.name, resourceUri: uri, tool: t.name, args: args, into: into, context: "explorer", result: result });
    state.apps.push(app);
    return app;
  }

  function resourceCard(s, r) {
    var out = el("div", { class: "tool-output" });
    var btn = el("button", { type: "button", class: "primary", dataset: { read: r.uri } }, "Read");
    btn.addEventListener("click", function () {
      btn.disabled = true;
      SB.api("POST", "/mcp/resource-read", { server: s.name, uri: r.uri }).then(function (d) {
        SB.clear(out).appendChild(SB.renderContent((d.result || {}).contents));
        out.appendChild(SB.rawJson(d.result));
      }, function (e) { SB.clear(out).appendChild(el("div", { class: "error-box" }, e.message)); })
        .then(function () { btn.disabled = false; });
    });
    return el("details", { class: "item resource", dataset: { resource: r.uri } },
      el("summary", null, el("span", { class: "item-name" }, r.name || r.uri), " ", el("code", { class: "muted" }, r.uri), r.mimeType ? el("span", { class: "badge" }, r.mimeType) : null),
      el("div", { class: "item-body" }, r.description ? el("p", { class: "desc" }, r.description) : null, el("div", { class: "row" }, btn), out));
  }

  function templateCard(s, t) {
    var names = (t.uriTemplate.match(/\{[^}]+\}/g) || []).map(function (x) { return x.slice(1, -1).replace(/^[+#./;?&]/, ""); });
    var props = {};
    names.forEach(function (n) { props[n] = { type: "string" }; });
    var form = SB.schemaForm({ type: "object", properties: props, required: names }, {});
    var out = el("div", { class: "tool-output" });
    var btn = el("button", { type: "button", class: "primary" }, "Read");
    btn.addEventListener("click", function () {
      if (!form.validate()) return;
      var v = form.value();
      var uri = t.uriTemplate.replace(/\{[+#./;?&]?([^}]+)\}/g, function (_, n) { return encodeURIComponent(v[n] || ""); });
      SB.api("POST", "/mcp/resource-read", { server: s.name, uri: uri }).then(function (d) {
        SB.clear(out).appendChild(SB.renderContent((d.result || {}).contents));
        out.appendChild(SB.rawJson(d.result));
      }, function (e) { SB.clear(out).appendChild(el("div", { class: "error-box" }, e.message)); });
    });
    return el("details", { class: "item template" },
      el("summary", null, el("span", { class: "item-name" }, t.name), " ", el("code", { class: "muted" }, t.uriTemplate)),
      el("div", { class: "item-body" }, t.description ? el("p", { class: "desc" }, t.description) : null, form.node, el("div", { class: "row" }, btn), out));
  }

  function promptCard(s, p) {
    var props = {};
    var req = [];
    p.arguments.forEach(function (a) { props[a.name] = { type: "string", description: a.description }; if (a.required) req.push(a.name); });
    var form = SB.schemaForm({ type: "object", properties: props, required: req }, {});
    var out = el("div", { class: "tool-output" });
    var btn = el("button", { type: "button", class: "primary", dataset: { prompt: p.name } }, "Get prompt");
    btn.addEventListener("click", function () {
      if (!form.validate()) { SB.clear(out).appendChild(el("div", { class: "error-box" }, form.errors().join("; "))); return; }
      SB.api("POST", "/mcp/prompt-get", { server: s.name, name: p.name, args: form.value() }).then(function (d) {
        SB.clear(out);
        ((d.result || {}).messages || []).forEach(function (m) {
          out.appendChild(el("div", { class: "prompt-msg" }, el("span", { class: "badge" }, m.role), SB.renderContent(Array.isArray(m.content) ? m.content : [m.content])));
        });
        out.appendChild(SB.rawJson(d.result));
      }, function (e) { SB.clear(out).appendChild(el("div", { class: "error-box" }, e.message)); });
    });
    return el("details", { class: "item prompt", dataset: { promptName: p.name } },
      el("summary", null, el("span", { class: "item-name" }, p.name), p.description ? el("span", { class: "muted" }, " — " + p.description) : null),
      el("div", { class: "item-body" }, form.node, el("div", { class: "row" }, btn), out));
  }

  // A tool the server lists but the host withholds: its definition changed since it
  // was pinned (or it looks like a renamed pinned tool). Accepting it is the same as
  // `switchboard mcp pins accept SERVER TOOL`; `switchboard mcp pins` shows the diff.
  function withheldCard(s, w) {
    var out = el("div", { class: "item-out" });
    var btn = el("button", { type: "button", class: "primary" }, "Accept change");
    btn.addEventListener("click", function () {
      btn.disabled = true;
      SB.api("POST", "/mcp/servers/" + encodeURIComponent(s.name) + "/pins/accept", { tool: w.name }).then(function (d) {
        SB.toast("Accepted " + (d.accepted || []).join(", ") + "; the tool is offered again.");
        SB.refreshServers().catch(function () {});
      }, function (e) {
        btn.disabled = false;
        SB.clear(out).appendChild(el("div", { class: "error-box" }, e.message));
      });
    });
    var diffBox = el("div", { class: "pin-diff" });
    var show = el("button", { type: "button" }, "Show change");
    show.addEventListener("click", function () {
      show.disabled = true;
      SB.api("GET", "/mcp/servers/" + encodeURIComponent(s.name) + "/pins").then(function (d) {
        var c = (d.changes || []).filter(function (x) { return x.name === w.name; })[0];
        SB.clear(diffBox);
        if (!c) { diffBox.appendChild(el("p", { class: "muted" }, "No change is waiting any more.")); return; }
        var pre = el("pre", { class: "diff mono", dataset: { pinDiff: w.name } });
        c.diff.split("\n").forEach(function (line) {
          var kind = line.indexOf("+++") === 0 || line.indexOf("---") === 0 ? "head" : line.charAt(0) === "+" ? "add" : line.charAt(0) === "-" ? "del" : line.indexOf("@@") === 0 ? "hunk" : "same";
          pre.appendChild(el("span", { class: "diff-" + kind }, line + "\n"));
        });
        diffBox.appendChild(pre);
      }, function (e) {
        show.disabled = false;
        SB.clear(diffBox).appendChild(el("div", { class: "error-box" }, e.message));
      });
    });
    return el("div", { class: "item withheld", dataset: { withheldTool: w.name } },
      el("div", { class: "withheld-head" }, el("span", { class: "item-name" }, w.name), el("span", { class: "badge danger" }, "withheld: " + w.why)),
      el("p", { class: "muted" }, "Its definition changed since you first used it, so it is not offered until you accept the change. Read what changed first: a server that rewrites a tool's description can steer the model."),
      diffBox,
      el("div", { class: "row" }, show, btn), out);
  }

  function renderMain(main) {
    var s = selectedServer();
    SB.clear(main);
    if (!s) { main.appendChild(el("p", { class: "muted" }, "Choose a server.")); return; }
    main.appendChild(renderHeader(s));
    var tabs = [["tools", "Tools (" + s.tools.length + ")"], ["resources", "Resources (" + (s.resources.length + s.resourceTemplates.length) + ")"], ["prompts", "Prompts (" + s.prompts.length + ")"], ["raw", "Raw JSON"]];
    var bar = el("div", { class: "subtabs", role: "tablist" });
    tabs.forEach(function (t) {
      bar.appendChild(el("button", { type: "button", role: "tab", class: state.tab === t[0] ? "active" : "", "aria-selected": state.tab === t[0] ? "true" : "false", dataset: { tab: t[0] }, onclick: function () { state.tab = t[0]; renderMain(main); } }, t[1]));
    });
    main.appendChild(bar);
    var panel = el("div", { class: "panel" });
    if (state.tab === "tools") {
      if (!s.tools.length) panel.appendChild(el("p", { class: "muted" }, s.status === "connected" ? "This server offers no tools." : "Tools appear once the server is connected."));
      s.tools.forEach(function (t) { panel.appendChild(toolCard(s, t)); });
      if (s.filteredOutTools.length) panel.appendChild(el("p", { class: "muted" }, "Left out by includeTools/excludeTools: " + s.filteredOutTools.join(", ")));
      (s.withheldTools || []).forEach(function (w) { panel.appendChild(withheldCard(s, w)); });
    } else if (state.tab === "resources") {
      if (!s.resources.length && !s.resourceTemplates.length) panel.appendChild(el("p", { class: "muted" }, "No resources."));
      s.resources.forEach(function (r) { panel.appendChild(resourceCard(s, r)); });
      s.resourceTemplates.forEach(function (t) { panel.appendChild(templateCard(s, t)); });
    } else if (state.tab === "prompts") {
      if (!s.prompts.length) panel.appendChild(el("p", { class: "muted" }, "No prompts."));
      s.prompts.forEach(function (p) { panel.appendChild(promptCard(s, p)); });
    } else {
      panel.appendChild(SB.pre(SB.json(s)));
    }
    main.appendChild(panel);
  }

  var lastShape = "";
  function shape() {
    var s = selectedServer();
    return s ? JSON.stringify([s.name, s.tools, s.resources, s.resourceTemplates, s.prompts]) : "";
  }

  function renderAll() {
    if (!state.root) return;
    if (!selectedServer() && SB.servers.length) state.selected = SB.servers[0].name;
    renderSidebar(state.root.side);
    lastShape = shape();
    state.apps.forEach(function (a) { a.teardown(); });
    state.apps = [];
    renderMain(state.root.main);
  }

  // Live status: refresh the list and the header without losing open forms, unless
  // what the server offers changed.
  SB.on("servers", function () {
    if (!state.root) return;
    renderSidebar(state.root.side);
    if (!selectedServer() && SB.servers.length) { renderAll(); return; }
    if (shape() !== lastShape) { renderAll(); return; }
    var s = selectedServer();
    var old = state.root.main.querySelector(".server-head");
    if (s && old) old.replaceWith(renderHeader(s));
  });

  SB.pages.explorer = {
    title: "Explorer",
    enter: function (view) {
      var side = el("aside", { class: "sidebar" });
      var main = el("section", { class: "main" });
      view.appendChild(el("div", { class: "split" }, side, main));
      state.root = { side: side, main: main };
      var params = new URLSearchParams(location.search);
      if (params.get("server")) state.selected = params.get("server");
      renderAll();
      SB.refreshServers().catch(function () {});
    },
    leave: function () {
      state.apps.forEach(function (a) { a.teardown(); });
      state.apps = [];
      state.root = null;
    },
  };
})();
