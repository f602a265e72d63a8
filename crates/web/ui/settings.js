// Settings › MCP Servers: list, add, edit, delete, enable/disable and Test servers in
// the same settings file as the CLI. Secrets come back as the "keep unchanged" marker.
"use strict";

(function () {
  var el = SB.el;
  var page = { root: null, data: null, editing: null };

  function load() {
    return SB.api("GET", "/settings/mcp-servers").then(function (d) { page.data = d; render(); }, function (e) {
      if (page.root) SB.clear(page.root.list).appendChild(el("div", { class: "error-box" }, e.message));
    });
  }

  function targetOf(s) {
    if (s.transport === "stdio") return [s.command].concat(s.args || []).join(" ");
    return s.url || s.command || "";
  }

  function serverRow(s) {
    var keep = page.data.keepUnchanged;
    var actions = el("div", { class: "actions" });
    var testOut = el("div", { class: "test-out", dataset: { server: s.name } });
    if (!s.builtin) {
      actions.appendChild(el("label", { class: "switch", title: s.disabled ? "Enable" : "Disable" },
        el("input", { type: "checkbox", checked: !s.disabled, disabled: !s.editable && s.disabled, dataset: { enable: s.name }, onchange: function (e) {
          var on = e.target.checked;
          SB.api("POST", "/settings/mcp-servers/" + encodeURIComponent(s.name) + "/enabled", { enabled: on }).then(function () {
            SB.toast((on ? "Enabled “" : "Disabled “") + s.name + "”"); load();
          }, function (err) { e.target.checked = !on; SB.toast(err.message, "error"); });
        } }), el("span", null, s.disabled ? "off" : "on")));
      actions.appendChild(el("button", { type: "button", dataset: { test: s.name }, onclick: function () {
        runTest(formValueFromEntry(s, keep), testOut);
      } }, "Test"));
      if (SB.config.oauthLogin && s.transport !== "stdio" && (s.auth === "needs-login" || s.auth === "expired" || s.auth === "authenticated")) {
        actions.appendChild(el("button", { type: "button", class: s.auth === "authenticated" ? "" : "primary", dataset: { login: s.name }, onclick: function () { login(s.name, testOut); } },
          s.auth === "authenticated" ? "Log in again" : "Log in"));
      }
      if (s.editable) actions.appendChild(el("button", { type: "button", dataset: { edit: s.name }, onclick: function () { openForm(s); } }, "Edit"));
      actions.appendChild(el("button", { type: "button", class: "danger", dataset: { delete: s.name }, onclick: function () {
        SB.confirm("Delete " + s.name + "?", "This removes `" + s.name + "` from " + s.file + ".", "Delete").then(function (ok) {
          if (!ok) return;
          SB.api("DELETE", "/settings/mcp-servers/" + encodeURIComponent(s.name)).then(function () { SB.toast("Deleted server “" + s.name + "”"); load(); }, function (e) { SB.toast(e.message, "error"); });
        });
      } }, "Delete"));
    } else {
      actions.appendChild(el("span", { class: "muted" }, "bundled demo (shown while there is no settings file)"));
    }
    var status = s.status || (s.disabled ? "disabled" : "");
    var info = el("div", { class: "srv-info" },
      el("div", { class: "srv-line" }, SB.statusDot(status), el("strong", { class: "srv-name" }, s.name),
        el("span", { class: "badge" }, s.transport), el("span", { class: "badge status-" + status }, status || "?"),
        s.toolCount !== null && s.toolCount !== undefined && status === "connected" ? el("span", { class: "muted" }, s.toolCount + " tools") : null,
        s.origin ? el("span", { class: "badge subtle", title: s.file || "" }, s.origin) : null,
        s.auth === "needs-login" ? el("span", { class: "badge danger" }, "needs login") : null),
      el("div", { class: "srv-target" }, el("code", null, targetOf(s))),
      s.configError ? el("div", { class: "error-box" }, s.configError) : (s.error && status !== "connected" ? el("div", { class: "error-box subtle" }, s.error) : null),
      s.auth === "needs-login" ? el("div", { class: "hint" }, SB.config.oauthLogin ? "This server needs OAuth: log in." : "This server needs OAuth. Log in with `switchboard mcp login " + s.name + "`.") : null,
      s.auth === "authenticated" ? el("div", { class: "hint" }, "Logged in (OAuth).") : null,
      !s.editable && !s.builtin ? el("div", { class: "hint" }, "Served beyond loopback: stdio servers can only be changed on the machine itself.") : null);
    return el("li", { class: "srv-row", dataset: { serverRow: s.name } }, info, actions, testOut);
  }

  function formValueFromEntry(s) {
    return {
      name: s.name, transport: s.transport, url: s.url || undefined, command: s.transport === "stdio" ? s.command : undefined,
      args: s.args, env: s.env, headers: s.headers,
    };
  }

  function runTest(v, out) {
    SB.clear(out).appendChild(el("div", { class: "muted test-running" }, "Testing…"));
    var body = v.transport === "stdio"
      ? { name: v.name, command: v.command, args: v.args || [], env: v.env || {} }
      : { name: v.name, url: v.url, headers: v.headers || {}, transport: v.transport === "auto" ? undefined : v.transport };
    return SB.api("POST", "/settings/mcp-test", body).then(function (r) { showTest(out, r); }, function (e) { showTest(out, e.body || { success: false, message: e.message }); });
  }

  function showTest(out, r) {
    SB.clear(out);
    var box = el("div", { class: "test-result " + (r.success ? "ok" : (r.needsOAuth ? "oauth" : "fail")), dataset: { testResult: r.success ? "success" : (r.needsOAuth ? "needs-oauth" : "failure") } });
    box.appendChild(el("div", { class: "test-message" }, r.success ? "✓ " : "✗ ", r.message || ""));
    if (r.error && !r.success) box.appendChild(el("div", { class: "muted" }, "(" + r.error + ")"));
    if (r.needsOAuth) {
      var saved = out.dataset.server && page.data && page.data.servers.some(function (s) { return s.name === out.dataset.server; });
      if (SB.config.oauthLogin && saved) {
        box.appendChild(el("div", { class: "buttons" }, el("button", { type: "button", class: "primary", dataset: { login: out.dataset.server }, onclick: function () { login(out.dataset.server, out); } }, "Log in")));
      } else {
        box.appendChild(el("div", { class: "hint" }, SB.config.oauthLogin ? "Save the server, then log in from its row." : "Save the server, then log in with `switchboard mcp login <name>`."));
      }
    }
    if (r.tools && r.tools.length) {
      var ul = el("ul", { class: "tool-names" });
      r.tools.forEach(function (t) { ul.appendChild(el("li", null, el("code", null, t.name), t.description ? el("span", { class: "muted" }, " — " + t.description) : null)); });
      box.appendChild(ul);
    }
    out.appendChild(box);
  }

  // OAuth login. Usually the authorization server comes back to the app itself
  // (`/auth/mcp-oauth-callback`): the login opens in a popup whose callback page posts
  // {type:"mcp-oauth-callback", code, state, ...} back here; this page hands `state`
  // and `code` to the server, which holds the PKCE verifier and client secret,
  // exchanges the code and keeps the tokens. With popups blocked the login runs in
  // this tab and resumes at /settings?mcp-oauth-return=1. A client registered with the
  // loopback redirect ("flow":"loopback") is finished by the server's own listener and
  // reported as an `oauth` event.
  var PENDING_KEY = "mcp-oauth-pending";
  var RESULT_KEY = "mcp-oauth-callback";
  var waiting = {}; // state -> server name, for logins started from this page

  function pendingNote(name, out) {
    var note = document.querySelector('[data-login-pending="' + name + '"]');
    if (note) return note;
    note = el("div", { class: "test-result oauth", dataset: { loginPending: name } });
    if (out) SB.clear(out).appendChild(note);
    else if (page.root) page.root.notes.appendChild(note);
    return note;
  }

  function login(name, out) {
    var note = pendingNote(name, out);
    SB.clear(note).appendChild(document.createTextNode("Starting the login…"));
    SB.api("POST", "/settings/mcp-login", { name: name }).then(function (r) {
      if (r.done) { SB.clear(note).appendChild(el("div", null, "✓ " + r.message)); load(); return; }
      if (r.flow === "callback") {
        waiting[r.state] = name;
        var w = window.open(r.authorizationUrl, "switchboard-oauth", "popup,width=520,height=720");
        if (!w) {
          // Popup blocked: log in in this tab; the callback page brings us back.
          try { sessionStorage.setItem(PENDING_KEY, JSON.stringify({ state: r.state, server: name })); } catch (_) { /* ignore */ }
          SB.clear(note).appendChild(el("div", null, "Popups are blocked: continuing the login in this tab…"));
          location.assign(r.authorizationUrl);
          return;
        }
        SB.clear(note).appendChild(el("div", null, "A login window opened. Finish there; this page updates when it is done."));
        return;
      }
      window.open(r.authorizationUrl, "switchboard-oauth", "popup,width=520,height=720,noopener,noreferrer");
      SB.clear(note).appendChild(el("div", null, "A login window opened. Finish there; this page updates when it is done. ",
        el("a", { href: r.authorizationUrl, target: "_blank", rel: "noopener noreferrer", dataset: { loginLink: name } }, "Open the login page"), " if no window appeared."));
    }, function (e) { SB.clear(note).appendChild(el("div", { class: "error" }, "✗ " + e.message)); });
  }

  // The outcome goes to the notes above the list (rows are redrawn on reload).
  function loginResult(name, ok, message) {
    var old = document.querySelector('[data-login-pending="' + name + '"]');
    if (old) old.remove();
    if (!page.root) { SB.toast((ok ? "✓ " : "✗ ") + message, ok ? "" : "error"); return; }
    var note = el("div", { class: "test-result oauth", dataset: { loginPending: name } });
    SB.clear(page.root.notes).appendChild(note);
    note.appendChild(el("div", { class: ok ? "" : "error", dataset: { loginResult: ok ? "ok" : "failed" } }, (ok ? "✓ " : "✗ ") + message));
  }

  // The callback's result (from the popup, or kept for this tab): finish the login.
  function finishLogin(m, server) {
    var name = server || waiting[m.state] || "";
    delete waiting[m.state];
    if (m.error) {
      var why = "The authorization server refused the login: " + m.error + (m.errorDescription ? " (" + m.errorDescription + ")" : "");
      if (name) loginResult(name, false, why);
      SB.toast("✗ " + why, "error");
      return Promise.resolve();
    }
    return SB.api("POST", "/settings/mcp-oauth-token", { state: m.state || "", code: m.code || "", iss: m.iss || null }).then(function (r) {
      loginResult(r.server || name, true, r.message || "Logged in.");
      load();
    }, function (e) {
      if (name) loginResult(name, false, e.message);
      SB.toast("✗ " + e.message, "error");
    });
  }

  window.addEventListener("message", function (ev) {
    if (ev.origin !== location.origin) return;
    var m = ev.data;
    if (!m || m.type !== "mcp-oauth-callback") return;
    finishLogin(m, null);
  });

  // Back from a same-tab login (popup blocked): /settings?mcp-oauth-return=1.
  function resumeLogin() {
    var params = new URLSearchParams(location.search);
    if (!params.has("mcp-oauth-return")) return;
    history.replaceState(null, "", "/settings");
    var raw = null, pending = null;
    try {
      raw = sessionStorage.getItem(RESULT_KEY);
      pending = JSON.parse(sessionStorage.getItem(PENDING_KEY) || "null");
      sessionStorage.removeItem(RESULT_KEY);
      sessionStorage.removeItem(PENDING_KEY);
    } catch (_) { /* ignore */ }
    var m = null;
    try { m = raw ? JSON.parse(raw) : null; } catch (_) { m = null; }
    if (!m || m.type !== "mcp-oauth-callback") {
      SB.toast("✗ No login to resume in this tab: log in again.", "error");
      return;
    }
    var server = pending && pending.state === m.state ? pending.server : null;
    if (server) SB.clear(pendingNote(server, null)).appendChild(document.createTextNode("Finishing the login…"));
    finishLogin(m, server);
  }

  SB.on("oauth", function (ev) {
    SB.toast((ev.ok ? "✓ " : "✗ ") + ev.message, ev.ok ? "" : "error");
    var pending = document.querySelector('[data-login-pending="' + ev.server + '"]');
    if (pending) SB.clear(pending).appendChild(el("div", { class: ev.ok ? "" : "error", dataset: { loginResult: ev.ok ? "ok" : "failed" } }, (ev.ok ? "✓ " : "✗ ") + ev.message));
    if (page.root) load();
  });

  function lines(text) { return text.split("\n").map(function (l) { return l.trim(); }).filter(Boolean); }

  function openForm(entry) {
    var keep = page.data.keepUnchanged;
    var remote = page.data.remote;
    var isNew = !entry;
    entry = entry || { transport: "http", headers: {}, env: {}, args: [] };
    var f = {};
    f.name = el("input", { type: "text", name: "name", value: entry.name || "", placeholder: "my-server", required: true });
    f.transport = el("select", { name: "transport" },
      el("option", { value: "http" }, "Streamable HTTP (url)"),
      el("option", { value: "sse" }, "Legacy SSE (url)"),
      el("option", { value: "auto" }, "URL, detect the transport"),
      el("option", { value: "stdio", disabled: remote }, "stdio (a local command)" + (remote ? " — not from a remote browser" : "")));
    f.transport.value = entry.transport === "unknown" ? "http" : entry.transport;
    f.url = el("input", { type: "url", name: "url", value: entry.url || "", placeholder: "https://example.com/mcp" });
    f.command = el("input", { type: "text", name: "command", value: entry.transport === "stdio" ? (entry.command || "") : "", placeholder: "npx" });
    f.args = el("textarea", { name: "args", rows: 2, class: "mono", placeholder: "one argument per line" });
    f.args.value = (entry.args || []).join("\n");
    f.env = el("textarea", { name: "env", rows: 2, class: "mono", placeholder: "{\"KEY\": \"value\"}" });
    f.env.value = entry.env && Object.keys(entry.env).length ? JSON.stringify(entry.env, null, 2) : "";
    f.headers = el("textarea", { name: "headers", rows: 3, class: "mono", placeholder: "{\"Authorization\": \"Bearer …\"}" });
    f.headers.value = entry.headers && Object.keys(entry.headers).length ? JSON.stringify(entry.headers, null, 2) : "";
    var oauth = entry.oauth || {};
    f.oauthEnabled = el("input", { type: "checkbox", name: "oauthEnabled", checked: !!entry.oauth });
    f.clientId = el("input", { type: "text", name: "clientId", value: oauth.clientId || "", placeholder: "optional with dynamic registration" });
    f.clientSecret = el("input", { type: "password", name: "clientSecret", value: oauth.clientSecret || "", placeholder: "optional", autocomplete: "off" });
    f.scopes = el("input", { type: "text", name: "scopes", value: (oauth.scopes || []).join(" "), placeholder: "space-separated" });
    f.authorizationUrl = el("input", { type: "url", name: "authorizationUrl", value: oauth.authorizationUrl || "", placeholder: "discovered if empty" });
    f.tokenUrl = el("input", { type: "url", name: "tokenUrl", value: oauth.tokenUrl || "", placeholder: "discovered if empty" });
    f.trust = el("input", { type: "checkbox", name: "trust", checked: !!entry.trust });
    f.timeout = el("input", { type: "number", name: "timeout", min: "1", value: entry.timeout || "", placeholder: "600000" });
    f.description = el("input", { type: "text", name: "description", value: entry.description || "" });

    function row(label, input, help) { return el("div", { class: "field" }, el("label", { class: "field-label" }, label), input, help ? el("div", { class: "field-help" }, help) : null); }
    var urlRows = el("div", { class: "group" }, row("URL", f.url), row("Headers (JSON)", f.headers, "Saved values show as " + keep + "; leave that to keep them (only while the URL stays the same). Values are stored as typed: $VAR is not expanded here; use settings.json for environment references."));
    var stdioRows = el("div", { class: "group" }, row("Command", f.command), row("Arguments", f.args), row("Environment (JSON)", f.env, "Secret-looking values show as " + keep + "."));
    var oauthRows = el("div", { class: "group oauth" }, row("Client ID", f.clientId), row("Client secret", f.clientSecret, entry.oauth && entry.oauth.clientSecret ? "Leave " + keep + " to keep the saved secret." : null), row("Scopes", f.scopes), row("Authorization URL", f.authorizationUrl), row("Token URL", f.tokenUrl));
    function sync() {
      var stdio = f.transport.value === "stdio";
      urlRows.hidden = stdio;
      stdioRows.hidden = !stdio;
      oauthRows.hidden = !f.oauthEnabled.checked || stdio;
    }
    f.transport.addEventListener("change", sync);
    f.oauthEnabled.addEventListener("change", sync);
    var err = el("div", { class: "form-error" });
    var testOut = el("div", { class: "test-out" });

    function value() {
      var v = { name: f.name.value.trim(), transport: f.transport.value };
      if (v.transport === "stdio") {
        v.command = f.command.value.trim();
        v.args = lines(f.args.value);
        v.env = f.env.value.trim() ? JSON.parse(f.env.value) : {};
      } else {
        v.url = f.url.value.trim();
        v.headers = f.headers.value.trim() ? JSON.parse(f.headers.value) : {};
        if (f.oauthEnabled.checked) {
          v.oauth = { enabled: true, clientId: f.clientId.value.trim() || null, clientSecret: f.clientSecret.value || null,
            scopes: f.scopes.value.trim() ? f.scopes.value.trim().split(/\s+/) : null,
            authorizationUrl: f.authorizationUrl.value.trim() || null, tokenUrl: f.tokenUrl.value.trim() || null };
        } else v.oauth = null;
      }
      v.trust = f.trust.checked;
      v.timeout = f.timeout.value ? Number(f.timeout.value) : null;
      v.description = f.description.value.trim() || null;
      return v;
    }
    function safeValue() {
      try { err.textContent = ""; return value(); } catch (e) { err.textContent = "Invalid JSON: " + e.message; return null; }
    }

    var testBtn = el("button", { type: "button", dataset: { formTest: "" }, onclick: function () { var v = safeValue(); if (v) runTest(v, testOut); } }, "Test");
    var saveBtn = el("button", { type: "submit", class: "primary" }, isNew ? "Add server" : "Save");
    var cancelBtn = el("button", { type: "button", onclick: function () { closeForm(); } }, "Cancel");
    var form = el("form", { class: "server-form card", dataset: { serverForm: isNew ? "new" : entry.name } },
      el("h2", null, isNew ? "Add an MCP server" : "Edit " + entry.name),
      row("Name", f.name),
      row("Transport", f.transport),
      urlRows, stdioRows,
      el("div", { class: "field field-check" }, el("label", { class: "check" }, f.oauthEnabled, " OAuth settings")),
      oauthRows,
      el("div", { class: "field field-check" }, el("label", { class: "check" }, f.trust, " Trust this server (tool calls run without asking in chat)")),
      row("Timeout (ms)", f.timeout), row("Description", f.description),
      err,
      el("div", { class: "buttons" }, testBtn, el("span", { class: "spacer" }), cancelBtn, saveBtn),
      testOut);
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var v = safeValue();
      if (!v) return;
      if (!v.name) { err.textContent = "Give the server a name."; return; }
      saveBtn.disabled = true;
      var req = isNew ? SB.api("POST", "/settings/mcp-servers", v) : SB.api("PUT", "/settings/mcp-servers/" + encodeURIComponent(entry.name), v);
      req.then(function (r) {
        SB.toast((isNew ? "Added server “" : "Saved server “") + v.name + "” in " + r.file);
        if (r.configError) SB.toast(r.configError, "error");
        closeForm();
        load();
      }, function (e) { err.textContent = e.message; }).then(function () { saveBtn.disabled = false; });
    });
    sync();
    SB.clear(page.root.form).appendChild(form);
    page.root.form.hidden = false;
    f.name.focus();
  }

  function closeForm() { if (page.root) { SB.clear(page.root.form); page.root.form.hidden = true; } }

  function render() {
    if (!page.root || !page.data) return;
    var d = page.data;
    SB.clear(page.root.meta).appendChild(el("p", { class: "muted" },
      "Saved to ", el("code", null, d.writeFile), " — the same file the CLI uses. URL policy: ", el("code", null, d.urlPolicy), ".",
      d.remote ? " Served beyond loopback: stdio servers cannot be added or edited here." : ""));
    (d.warnings || []).forEach(function (w) { page.root.meta.appendChild(el("div", { class: "warn-box" }, w)); });
    var list = SB.clear(page.root.list);
    if (!d.servers.length) list.appendChild(el("li", { class: "muted" }, "No servers configured."));
    d.servers.forEach(function (s) { list.appendChild(serverRow(s)); });
  }

  SB.on("servers", function () { if (page.root && !page.pending) { page.pending = true; setTimeout(function () { page.pending = false; load(); }, 200); } });

  SB.pages.settings = {
    title: "Settings",
    enter: function (view) {
      var meta = el("div");
      var notes = el("div", { class: "login-notes" });
      var list = el("ul", { class: "srv-list" });
      var formBox = el("div", { class: "form-box", hidden: true });
      var registryBox = el("div");
      view.appendChild(el("div", { class: "settings" },
        el("div", { class: "section-head" }, el("h1", null, "MCP Servers"), el("span", { class: "spacer" }),
          el("button", { type: "button", class: "primary", dataset: { addServer: "" }, onclick: function () { openForm(null); } }, "Add server")),
        meta, notes, formBox, registryBox, list));
      page.root = { meta: meta, notes: notes, list: list, form: formBox };
      SB.registrySearch(registryBox, load);
      load();
      resumeLogin();
    },
    leave: function () { page.root = null; },
  };
})();
