// Switchboard team app: the signed-in user's servers (list, add, edit, remove, Test),
// the MCP clients connected to the team gateway (`/mcp`) with the user's approval (listed,
// revoked),
// each server's tools (list, call with JSON arguments), and chats (kept in the store;
// turns streamed as Server-Sent Events, confirmations answered with buttons). Plain JavaScript, no build
// step. Everything a server or the store sends is put on the page with textContent
// (or as a validated data: image), never as HTML.
"use strict";

(function () {
  var view = document.getElementById("view");

  // ---------- DOM helpers ----------
  function el(tag, attrs) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === undefined || v === null || v === false) return;
        if (k === "class") node.className = v;
        else if (k.slice(0, 2) === "on" && typeof v === "function") node.addEventListener(k.slice(2), v);
        else if (k === "dataset") Object.keys(v).forEach(function (d) { node.dataset[d] = v[d]; });
        else if (v === true) node.setAttribute(k, "");
        else node.setAttribute(k, String(v));
      });
    }
    for (var i = 2; i < arguments.length; i++) append(node, arguments[i]);
    return node;
  }

  function append(node, child) {
    if (child === null || child === undefined || child === false) return node;
    if (Array.isArray(child)) { child.forEach(function (c) { append(node, c); }); return node; }
    node.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
    return node;
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

  function pretty(v) { try { return JSON.stringify(v, null, 2); } catch (e) { return String(v); } }

  function pre(text) { return el("pre", { class: "code" }, text); }

  function toast(text, isError) {
    var t = el("div", { class: "toast" + (isError ? " error" : "") }, text);
    document.getElementById("toasts").appendChild(t);
    setTimeout(function () { t.remove(); }, isError ? 8000 : 4000);
  }

  // ---------- API ----------
  // Resolves to {status, ok, body} whatever the status (the Test answers 4xx/5xx with a
  // result to show); a 401 means the session ended: back to the sign-in page.
  function request(method, path, body) {
    var opts = { method: method, credentials: "same-origin", headers: {} };
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    return fetch(path, opts).then(function (resp) {
      return resp.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { data = { message: text }; }
        if (resp.status === 401) {
          window.location.assign("/");
          throw new Error("signed out");
        }
        return { status: resp.status, ok: resp.ok, body: data };
      });
    });
  }

  // Resolves to the body of a 2xx answer, else rejects with the answer's message.
  function api(method, path, body) {
    return request(method, path, body).then(function (r) {
      if (!r.ok) {
        var err = new Error((r.body && r.body.message) || ("HTTP " + r.status));
        err.status = r.status;
        err.code = r.body && r.body.error;
        throw err;
      }
      return r.body;
    });
  }

  // A catalog server is named "catalog:NAME" on this page (no server of the user's has a
  // ":" in its name), and lives under /api/catalog/NAME.
  var CATALOG = "catalog:";
  function isCatalog(name) { return name.slice(0, CATALOG.length) === CATALOG; }
  function serverPath(name) {
    if (isCatalog(name)) return "/api/catalog/" + encodeURIComponent(name.slice(CATALOG.length));
    return "/api/servers/" + encodeURIComponent(name);
  }

  // ---------- header: who, sign out ----------
  function signOut(everywhere) {
    request("POST", "/auth/logout" + (everywhere ? "?everywhere=1" : "")).then(function (r) {
      if (!r.ok) toast((r.body && r.body.message) || "signing out failed", true);
      else window.location.assign("/");
    }).catch(function (e) { toast(e.message, true); });
  }
  document.getElementById("sign-out").addEventListener("click", function () { signOut(false); });
  document.getElementById("sign-out-everywhere").addEventListener("click", function () { signOut(true); });

  api("GET", "/api/me").then(function (me) {
    var who = document.getElementById("who");
    who.textContent = me.email;
    who.title = (me.name || me.email) + (me.admin ? " (admin)" : "");
    if (me.admin) who.appendChild(el("span", { class: "badge" }, "admin"));
  }).catch(function (e) { toast("Who am I? " + e.message, true); });

  // ---------- OAuth sign-in to a server (popup, or a full-page redirect) ----------
  var oauthDone = {};

  // Opens the popup at once (inside the click, so it is not blocked), asks the app for
  // the authorization URL, and sends the popup there; without a popup the whole page
  // goes, and the callback brings it back to /?mcpOAuth=….
  function serverSignIn(name, onDone) {
    var popup = window.open("", "switchboard-mcp-oauth", "popup,width=520,height=700");
    oauthDone[name] = onDone;
    api("POST", serverPath(name) + "/oauth/start", {}).then(function (r) {
      if (popup && !popup.closed) popup.location.href = r.authorizeUrl;
      else window.location.assign(r.authorizeUrl);
    }).catch(function (e) {
      if (popup && !popup.closed) popup.close();
      delete oauthDone[name];
      toast("Cannot sign in to " + name + ": " + e.message, true);
    });
  }

  window.addEventListener("message", function (e) {
    if (e.origin !== window.location.origin || !e.data || e.data.type !== "mcp-oauth-result") return;
    var name = String(e.data.server || "");
    if (e.data.ok) toast("Signed in to " + name);
    else toast("Signing in to " + name + " failed" + (e.data.error ? ": " + e.data.error : ""), true);
    var done = oauthDone[name];
    delete oauthDone[name];
    if (done) done(!!e.data.ok);
  });

  // Back from a full-page sign-in: say how it went, and clean the address.
  (function () {
    var q = new URLSearchParams(window.location.search);
    var outcome = q.get("mcpOAuth");
    if (!outcome) return;
    var name = q.get("server") || "the server";
    if (outcome === "ok") toast("Signed in to " + name);
    else toast("Signing in to " + name + " failed", true);
    window.history.replaceState(null, "", "/" + window.location.hash);
  })();

  // ---------- Test results ----------
  // `saved`: the saved server the result is for (then a needs-OAuth result offers the sign-in).
  function testResult(r, saved) {
    var kind = r.success ? "success" : (r.needsOAuth ? "needs-oauth" : "failure");
    var box = el("div", { class: "test-result " + (r.success ? "ok" : (r.needsOAuth ? "oauth" : "fail")), dataset: { testResult: kind } });
    box.appendChild(el("div", { class: "test-message" }, (r.success ? "✓ " : "✗ ") + (r.message || "")));
    if (r.error && !r.success) box.appendChild(el("div", { class: "muted" }, "(" + r.error + ")"));
    if (r.needsOAuth) {
      var hint = el("div", { class: "hint", dataset: { oauthHint: "" } },
        "This server wants you to sign in to it (OAuth) before it lists its tools.");
      box.appendChild(hint);
      var d = r.oauthDiscovery && r.oauthDiscovery.config;
      if (d && d.authorizationUrl) {
        var host = d.authorizationUrl;
        try { host = new URL(d.authorizationUrl).origin; } catch (e) { /* shown as sent */ }
        box.appendChild(el("div", { class: "hint" }, "Its authorization server: ", el("code", null, host)));
      }
      if (r.oauthDiscoveryError) box.appendChild(el("div", { class: "hint" }, "Discovery: " + r.oauthDiscoveryError));
      if (saved) {
        box.appendChild(el("div", { class: "buttons" }, el("button", {
          type: "button", class: "primary", dataset: { serverSignIn: saved.name },
          onclick: function () { serverSignIn(saved.name, saved.after); },
        }, "Sign in to this server")));
      } else {
        box.appendChild(el("div", { class: "hint" }, "Save the server, then sign in to it from the Test button in its row."));
      }
    }
    if (r.success && Array.isArray(r.tools) && r.tools.length) {
      var ul = el("ul", { class: "tool-names" });
      r.tools.forEach(function (t) {
        ul.appendChild(el("li", null, el("code", null, t.name), t.description ? el("span", { class: "muted" }, " — " + t.description) : null));
      });
      box.appendChild(ul);
    }
    return box;
  }

  function runTest(out, body, button, saved) {
    clear(out).appendChild(el("div", { class: "muted" }, "Testing…"));
    if (button) button.disabled = true;
    var target = body.name && isCatalog(body.name) ? request("POST", serverPath(body.name) + "/test", {}) : request("POST", "/api/mcp-test", body);
    return target.then(function (r) {
      clear(out).appendChild(testResult(r.body || { success: false, message: "HTTP " + r.status }, saved));
    }).catch(function (e) {
      clear(out).appendChild(testResult({ success: false, message: e.message }));
    }).then(function () { if (button) button.disabled = false; });
  }

  // ---------- Servers view ----------
  var MASK = "<unchanged>";

  function headerLines(headers) {
    var names = Object.keys(headers || {});
    if (!names.length) return null;
    return el("div", { class: "srv-headers" }, names.map(function (n) {
      return el("span", { class: "header-chip", title: "Saved; the value is never sent back to this page" }, el("code", null, n + ": ••••••"));
    }));
  }

  function serverRow(s, reload) {
    var out = el("div", { class: "test-out", dataset: { testOut: s.name } });
    // After signing in to the server: the list again (its "signed in" badge) and its Test.
    function testSaved(button) {
      runTest(out, { name: s.name }, button, { name: s.name, after: function (ok) {
        if (!ok) return;
        reload().then(function () {
          var b = document.querySelector('[data-server-row="' + CSS.escape(s.name) + '"] [data-test]');
          if (b) b.click();
        });
      } });
    }
    var row = el("li", { class: "srv-row", dataset: { serverRow: s.name } },
      el("div", null,
        el("div", { class: "srv-line" },
          el("strong", { class: "srv-name" }, s.name),
          el("span", { class: "badge" }, s.transport === "sse" ? "SSE" : "HTTP"),
          s.enabled ? null : el("span", { class: "badge" }, "disabled"),
          s.oauth && s.oauth.signedIn ? el("span", { class: "badge status-connected" }, "signed in") : null),
        el("div", { class: "srv-target mono" }, s.url),
        headerLines(s.headers)),
      el("div", { class: "actions" },
        el("a", { class: "button", href: "#/servers/" + encodeURIComponent(s.name) + "/tools", dataset: { tools: s.name } }, "Tools"),
        el("button", { type: "button", dataset: { test: s.name }, onclick: function (e) { testSaved(e.currentTarget); } }, "Test"),
        s.oauth && s.oauth.signedIn ? el("button", { type: "button", dataset: { serverSignOut: s.name }, title: "Forget your OAuth tokens for this server", onclick: function () {
          api("POST", serverPath(s.name) + "/oauth/logout", {}).then(function () { toast("Signed out of " + s.name); reload(); })
            .catch(function (e) { toast(e.message, true); });
        } }, "Sign out of server") : null,
        el("button", { type: "button", dataset: { edit: s.name }, onclick: function () { showForm(s, reload); } }, "Edit"),
        el("button", { type: "button", class: "danger", dataset: { remove: s.name }, onclick: function () {
          if (!window.confirm("Remove server “" + s.name + "” and your sign-in to it?")) return;
          api("DELETE", serverPath(s.name)).then(function () { toast("Removed " + s.name); reload(); })
            .catch(function (e) { toast(e.message, true); });
        } }, "Remove")),
      out);
    return row;
  }

  // A team catalog server (published by an admin): enable it, then use it like your own,
  // signing in to it with your own account.
  function catalogRow(c, reload) {
    var key = CATALOG + c.name;
    var out = el("div", { class: "test-out", dataset: { testOut: key } });
    function testIt(button) {
      runTest(out, { name: key }, button, { name: key, after: function (ok) {
        if (!ok) return;
        reload().then(function () {
          var b = document.querySelector('[data-catalog-row="' + CSS.escape(c.name) + '"] [data-test]');
          if (b) b.click();
        });
      } });
    }
    function toggle(what) {
      api("POST", serverPath(key) + "/" + what, {}).then(function () { reload(); })
        .catch(function (e) { toast(e.message, true); });
    }
    var usable = c.enabled && c.available;
    return el("li", { class: "srv-row", dataset: { catalogRow: c.name } },
      el("div", null,
        el("div", { class: "srv-line" },
          el("strong", { class: "srv-name" }, c.name),
          el("span", { class: "badge" }, c.runsOnServer ? "runs on the server" : (c.transport === "sse" ? "SSE" : "HTTP")),
          c.enabled ? el("span", { class: "badge status-connected" }, "enabled") : null,
          c.available ? null : el("span", { class: "badge" }, "not on this instance"),
          c.oauth && c.oauth.signedIn ? el("span", { class: "badge status-connected" }, "signed in") : null),
        c.description ? el("div", { class: "muted" }, c.description) : null,
        c.url ? el("div", { class: "srv-target mono" }, c.url) : null),
      el("div", { class: "actions" },
        c.enabled
          ? el("button", { type: "button", dataset: { catalogDisable: c.name }, title: "Stop using it (forgets your sign-in to it)", onclick: function () { toggle("disable"); } }, "Disable")
          : el("button", { type: "button", class: "primary", dataset: { catalogEnable: c.name }, onclick: function () { toggle("enable"); } }, "Enable"),
        usable ? el("a", { class: "button", href: "#/servers/" + encodeURIComponent(key) + "/tools", dataset: { tools: key } }, "Tools") : null,
        usable ? el("button", { type: "button", dataset: { test: key }, onclick: function (e) { testIt(e.currentTarget); } }, "Test") : null,
        c.oauth && c.oauth.signedIn ? el("button", { type: "button", dataset: { serverSignOut: key }, onclick: function () {
          api("POST", serverPath(key) + "/oauth/logout", {}).then(function () { toast("Signed out of " + c.name); reload(); })
            .catch(function (e) { toast(e.message, true); });
        } }, "Sign out of server") : null),
      out);
  }

  function catalogSection() {
    var list = el("ul", { class: "srv-list", dataset: { catalog: "" } });
    var section = el("div", { class: "catalog" },
      el("div", { class: "section-head" }, el("h2", null, "Team catalog")),
      el("p", { class: "muted" }, "Servers your team's admins published. Enable one to use it; you sign in to it with your own account."),
      list);
    function reload() {
      return api("GET", "/api/catalog").then(function (r) {
        clear(list);
        section.hidden = !r.servers.length;
        r.servers.forEach(function (c) { list.appendChild(catalogRow(c, reload)); });
        list.dataset.loaded = "true";
      }).catch(function (e) { clear(list).appendChild(el("div", { class: "error-box" }, e.message)); });
    }
    section.hidden = true;
    reload();
    return section;
  }

  // ---------- Connected clients (team gateway grants) ----------
  function when(secs) {
    return secs ? new Date(secs * 1000).toLocaleString() : "never";
  }

  function clientRow(g, reload) {
    var hosts = (g.redirect_hosts || []).join(", ") || "no redirect host";
    return el("li", { class: "srv-row", dataset: { grant: g.id } },
      el("div", null,
        el("div", { class: "srv-line" },
          el("strong", { class: "srv-name" }, g.client_name),
          el("span", { class: "badge" }, "MCP client")),
        el("div", { class: "srv-target mono" }, "Sends you back to " + hosts),
        el("div", { class: "muted", dataset: { grantTimes: "" } }, "Approved " + when(g.created_at) + " · last used " + when(g.last_used_at))),
      el("div", { class: "actions" },
        el("button", { type: "button", class: "danger", dataset: { revokeGrant: g.id }, title: "End this client's access: its tokens stop working", onclick: function (e) {
          var button = e.currentTarget;
          if (!window.confirm("Revoke " + g.client_name + "? It loses access to your servers until you approve it again.")) return;
          button.disabled = true;
          api("DELETE", "/api/gateway/grants/" + encodeURIComponent(g.id)).then(function () {
            toast("Revoked " + g.client_name);
            reload();
          }).catch(function (err) { button.disabled = false; toast(err.message, true); });
        } }, "Revoke")));
  }

  function clientsSection() {
    var list = el("ul", { class: "srv-list", dataset: { grants: "" } });
    var status = el("div", { class: "muted" }, "Loading…");
    var section = el("div", { class: "clients" },
      el("div", { class: "section-head" }, el("h2", null, "Connected clients")),
      el("p", { class: "muted" }, "MCP clients you approved to use your servers through the team gateway at " + window.location.origin + "/mcp. Revoke one to end its access."),
      status, list);
    function reload() {
      return api("GET", "/api/gateway/grants").then(function (r) {
        clear(list);
        status.textContent = r.grants.length ? "" : "No client connected.";
        r.grants.forEach(function (g) { list.appendChild(clientRow(g, reload)); });
        list.dataset.loaded = "true";
      }).catch(function (e) { status.textContent = ""; status.appendChild(el("div", { class: "error-box" }, e.message)); });
    }
    reload();
    return section;
  }

  var formSlot = null;

  function field(label, input, help) {
    return el("label", { class: "field" }, el("span", { class: "field-label" }, label), input, help ? el("div", { class: "field-help" }, help) : null);
  }

  // The add form (server null) or the edit form of server `s`.
  function showForm(s, reload) {
    var editing = !!s;
    var name = el("input", { type: "text", name: "name", required: true, autocomplete: "off", placeholder: "e.g. github", readonly: editing });
    var transport = el("select", { name: "transport" },
      el("option", { value: "http" }, "Streamable HTTP"), el("option", { value: "sse" }, "SSE"));
    var url = el("input", { type: "url", name: "url", required: true, placeholder: "https://example.com/mcp" });
    var headers = el("textarea", { name: "headers", rows: "3", placeholder: '{"Authorization": "Bearer …"}' });
    if (editing) {
      name.value = s.name;
      transport.value = s.transport === "sse" ? "sse" : "http";
      url.value = s.url;
      headers.value = Object.keys(s.headers || {}).length ? pretty(s.headers) : "";
    }
    var error = el("div", { class: "form-error" });
    var out = el("div", { class: "test-out" });

    function values() {
      var h = {};
      var text = headers.value.trim();
      if (text) {
        try { h = JSON.parse(text); } catch (e) { throw new Error("Headers: not JSON (" + e.message + ")"); }
        if (!h || typeof h !== "object" || Array.isArray(h)) throw new Error("Headers: a JSON object of name → value");
        Object.keys(h).forEach(function (k) { if (typeof h[k] !== "string") throw new Error("Headers: the value of " + k + " must be a string"); });
      }
      return { name: name.value.trim(), url: url.value.trim(), transport: transport.value, headers: h };
    }

    var testButton = el("button", { type: "button", dataset: { formTest: "" } }, "Test");
    testButton.addEventListener("click", function () {
      error.textContent = "";
      var v;
      try { v = values(); } catch (e) { error.textContent = e.message; return; }
      var body = { url: v.url, transport: v.transport, headers: v.headers };
      if (editing) body.name = s.name;
      runTest(out, body, testButton);
    });

    var form = el("form", { class: "card server-form", dataset: { serverForm: editing ? s.name : "new" } },
      el("h2", null, editing ? "Edit " + s.name : "Add a server"),
      field("Name", name, editing ? "A server cannot be renamed: add it again under the new name." : "Letters, digits, - and _; unique among your servers."),
      field("Transport", transport),
      field("URL", url, "http:// or https:// only: team mode runs no commands."),
      field("Headers (JSON, optional)", headers, editing ? "Saved values show as " + MASK + " and are kept as they are; type a new value to replace one." : "Sent with every request to this server, e.g. an API key. Never shown again."),
      error,
      el("div", { class: "buttons" },
        el("button", { type: "submit", class: "primary" }, editing ? "Save" : "Add"),
        testButton,
        el("button", { type: "button", onclick: function () { clear(formSlot); } }, "Cancel")),
      out);

    form.addEventListener("submit", function (e) {
      e.preventDefault();
      error.textContent = "";
      var v;
      try { v = values(); } catch (err) { error.textContent = err.message; return; }
      var done = editing
        ? api("PUT", serverPath(s.name), { url: v.url, transport: v.transport, headers: v.headers })
        : api("POST", "/api/servers", v);
      done.then(function () {
        toast(editing ? "Saved " + s.name : "Added " + v.name);
        clear(formSlot);
        reload();
      }).catch(function (err) { error.textContent = err.message; });
    });
    clear(formSlot).appendChild(form);
    (editing ? url : name).focus();
  }

  function serversView() {
    var list = el("ul", { class: "srv-list", dataset: { servers: "" } });
    formSlot = el("div");
    var status = el("div", { class: "muted" }, "Loading…");
    function reload() {
      return api("GET", "/api/servers").then(function (r) {
        clear(list);
        status.textContent = r.servers.length ? "" : "No servers yet: add the URL of an MCP server (Streamable HTTP or SSE).";
        r.servers.forEach(function (s) { list.appendChild(serverRow(s, reload)); });
        list.dataset.loaded = "true";
      }).catch(function (e) { status.textContent = ""; status.appendChild(el("div", { class: "error-box" }, e.message)); });
    }
    clear(view).appendChild(el("div", { class: "settings" },
      el("div", { class: "section-head" },
        el("h1", null, "Your servers"),
        el("span", { class: "spacer" }),
        el("button", { type: "button", class: "primary", dataset: { addServer: "" }, onclick: function () { showForm(null, reload); } }, "Add server")),
      el("p", { class: "muted" }, "Only you see these servers and their tools. Header values you save are kept encrypted and never shown again."),
      formSlot, status, list, catalogSection(), clientsSection()));
    reload();
  }

  // ---------- Tools view ----------
  // A starting value for each argument of the tool's input schema.
  function skeleton(schema) {
    var out = {};
    var props = (schema && schema.properties) || {};
    Object.keys(props).forEach(function (k) {
      var p = props[k] || {};
      if (p.default !== undefined) out[k] = p.default;
      else if (p.type === "string") out[k] = "";
      else if (p.type === "number" || p.type === "integer") out[k] = 0;
      else if (p.type === "boolean") out[k] = false;
      else if (p.type === "array") out[k] = [];
      else if (p.type === "object") out[k] = {};
      else out[k] = null;
    });
    return out;
  }

  var BASE64 = /^[A-Za-z0-9+/=\s]*$/;
  var IMAGE_MIME = /^image\/(png|jpeg|gif|webp)$/;

  function contentBlock(c) {
    if (c && c.type === "text" && typeof c.text === "string") return pre(c.text);
    if (c && c.type === "image" && IMAGE_MIME.test(c.mimeType || "") && typeof c.data === "string" && BASE64.test(c.data)) {
      return el("img", { class: "image-block", alt: "image from the tool", src: "data:" + c.mimeType + ";base64," + c.data });
    }
    return el("div", null, el("div", { class: "muted" }, (c && c.type) || "content"), pre(pretty(c)));
  }

  function callResult(res) {
    var isError = !!res.isError;
    var box = el("div", { class: "call-result", dataset: { callResult: isError ? "error" : "ok" } },
      el("div", { class: "result-head " + (isError ? "is-error" : "is-ok") }, isError ? "The tool reported an error" : "Result"));
    (Array.isArray(res.content) ? res.content : []).forEach(function (c) { box.appendChild(contentBlock(c)); });
    if (res.structuredContent !== undefined) {
      box.appendChild(el("div", { class: "result-head" }, "Structured content"));
      box.appendChild(el("div", { dataset: { structured: "" } }, pre(pretty(res.structuredContent))));
    }
    box.appendChild(el("details", { class: "raw" }, el("summary", null, "Raw result"), pre(pretty(res))));
    return box;
  }

  function toolItem(server, t) {
    var args = el("textarea", { class: "mono", rows: "4", dataset: { args: t.name }, spellcheck: "false" }, pretty(skeleton(t.inputSchema)));
    var out = el("div", { dataset: { result: t.name } });
    var call = el("button", { type: "button", class: "primary", dataset: { call: t.name } }, "Call");
    call.addEventListener("click", function () {
      var a;
      var text = args.value.trim();
      try { a = text ? JSON.parse(text) : {}; } catch (e) {
        clear(out).appendChild(el("div", { class: "error-box" }, "Arguments: not JSON (" + e.message + ")"));
        return;
      }
      if (!a || typeof a !== "object" || Array.isArray(a)) {
        clear(out).appendChild(el("div", { class: "error-box" }, "Arguments: a JSON object of name → value"));
        return;
      }
      call.disabled = true;
      clear(out).appendChild(el("div", { class: "muted" }, "Calling…"));
      api("POST", serverPath(server) + "/call", { tool: t.name, args: a }).then(function (r) {
        clear(out).appendChild(callResult(r.result || {}));
      }).catch(function (e) {
        clear(out).appendChild(el("div", { class: "error-box", dataset: { callError: e.code || "error" } }, e.message));
      }).then(function () { call.disabled = false; });
    });
    return el("details", { class: "item", dataset: { tool: t.name } },
      el("summary", null, el("span", { class: "item-name" }, t.name),
        t.title ? el("span", { class: "muted" }, t.title) : null,
        t.description ? el("span", { class: "muted tool-desc" }, t.description) : null),
      el("div", { class: "item-body" },
        t.description ? el("p", { class: "desc" }, t.description) : null,
        el("label", { class: "field" }, el("span", { class: "field-label" }, "Arguments (JSON)"), args),
        el("div", { class: "buttons" }, call),
        out));
  }

  function toolsView(server) {
    var list = el("div", { dataset: { toolsOf: server } }, el("div", { class: "muted" }, "Connecting…"));
    clear(view).appendChild(el("div", { class: "settings" },
      el("a", { href: "#/servers", class: "back" }, "← Your servers"),
      el("div", { class: "section-head" }, el("h1", null, "Tools of ", el("code", null, server))),
      list));
    api("GET", serverPath(server) + "/tools").then(function (r) {
      clear(list);
      if (!r.tools.length) list.appendChild(el("div", { class: "muted" }, "This server has no tools."));
      r.tools.forEach(function (t) { list.appendChild(toolItem(server, t)); });
      list.dataset.loaded = "true";
    }).catch(function (e) {
      clear(list).appendChild(el("div", { class: "error-box", dataset: { toolsError: e.code || "error" } }, e.message));
      if (e.code === "needs_oauth") list.appendChild(el("div", { class: "hint" }, "Go back to your servers and press Test on this one to see how to sign in to it."));
    });
  }


  // ---------- chat ----------
  // Conversations live in the store: the list, the saved messages, and confirmations
  // waiting for an answer come from the API; a send streams Server-Sent Events.
  function chatPath(id) { return "/api/chats/" + encodeURIComponent(id); }

  function partsView(content, role) {
    var box = el("div", { class: "chat-msg chat-" + role, dataset: { chatRole: role } });
    (content.parts || []).forEach(function (p) {
      if (typeof p.text === "string" && !p.thought) box.appendChild(el("div", { class: "chat-text" }, p.text));
      if (p.functionCall) box.appendChild(el("div", { class: "muted", dataset: { toolCall: p.functionCall.name } }, "Tool call: " + p.functionCall.name + " " + pretty(p.functionCall.args || {})));
      if (p.functionResponse) {
        var r = p.functionResponse.response || {};
        box.appendChild(el("details", { class: "chat-tool", open: true }, el("summary", null, "Result of " + p.functionResponse.name), pre(pretty(r))));
      }
    });
    return box;
  }

  function keyPanel() {
    var panel = el("div", { class: "card chat-key", dataset: { modelKey: "loading" } });
    api("GET", "/api/model-key").then(function (k) {
      panel.dataset.modelKey = k.available ? "available" : "missing";
      var input = el("input", { type: "password", name: "model-key", autocomplete: "off", placeholder: "Your " + (k.provider || "model") + " API key" });
      var form = el("form", { class: "buttons", dataset: { modelKeyForm: "" } }, input, el("button", { type: "submit" }, "Save my key"));
      form.addEventListener("submit", function (e) {
        e.preventDefault();
        api("PUT", "/api/model-key", { key: input.value }).then(function () { toast("Key saved"); chatView(currentChat); })
          .catch(function (err) { toast(err.message, true); });
      });
      append(clear(panel), [
        el("div", { class: "muted" }, "Model: " + (k.model || "none") + ". " + (k.own.set ? "Your own key is set." : k.team.set ? "The team key is used." : "No key yet: save yours, or ask an admin for a team key.")),
        form]);
    }).catch(function (e) { panel.textContent = e.message; });
    return panel;
  }

  var currentChat = null;

  function chatView(id) {
    currentChat = id;
    var list = el("div", { class: "chat-list", dataset: { chats: "" } });
    var pane = el("div", { class: "chat-pane" });
    clear(view).appendChild(el("div", { class: "settings chat-page" },
      el("div", { class: "section-head" }, el("h1", null, "Chat"),
        el("button", { type: "button", class: "primary", dataset: { newChat: "" }, onclick: function () {
          api("POST", "/api/chats", {}).then(function (r) { window.location.hash = "#/chat/" + encodeURIComponent(r.chat.id); })
            .catch(function (e) { toast(e.message, true); });
        } }, "New chat")),
      keyPanel(),
      el("div", { class: "chat-layout" }, list, pane)));
    api("GET", "/api/chats").then(function (r) {
      r.chats.forEach(function (c) {
        list.appendChild(el("a", { href: "#/chat/" + encodeURIComponent(c.id), class: "chat-item" + (c.id === id ? " active" : ""), dataset: { chatItem: c.id } }, c.title));
      });
      list.dataset.loaded = "true";
    }).catch(function (e) { toast(e.message, true); });
    if (id) openChat(id, pane);
    else pane.appendChild(el("div", { class: "muted" }, "Pick a chat or start a new one."));
  }

  function openChat(id, pane) {
    var log = el("div", { class: "chat-log", dataset: { chatLog: id } });
    var input = el("textarea", { name: "message", rows: "3", placeholder: "Message" });
    var send = el("button", { type: "submit", class: "primary", dataset: { send: "" } }, "Send");
    var form = el("form", { class: "chat-form" }, input, el("div", { class: "buttons" }, send));
    append(clear(pane), [log, form]);
    function load() {
      return api("GET", chatPath(id)).then(function (r) {
        clear(log);
        r.messages.forEach(function (m) { log.appendChild(partsView(m.content, m.role)).dataset.seq = String(m.seq); });
        pendingElicitations(id, log, r.elicitations);
        log.dataset.loaded = "true";
        window.SBTeamApps.restore(id, log, appMessage).catch(function (e) { toast(e.message, true); });
      }).catch(function (e) { clear(log).appendChild(el("div", { class: "error-box" }, e.message)); });
    }
    // An app's ui/message: the person's next message in this chat, through its app
    // session. Answered at once (the turn's outcome shows in the chat, which is then read
    // back from the store, app cards included).
    function appMessage(appId, text) {
      log.appendChild(el("div", { class: "chat-msg chat-user" }, el("div", { class: "chat-text" }, text)));
      var live = el("div", { class: "chat-msg chat-model chat-live" });
      log.appendChild(live);
      streamTurn(id, text, live, "/api/apps/" + encodeURIComponent(appId) + "/message", appMessage).then(load).catch(function (err) {
        live.appendChild(el("div", { class: "error-box", dataset: { chatError: "" } }, err.message));
      });
      return Promise.resolve();
    }
    load();
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var text = input.value.trim();
      if (!text) return;
      input.value = "";
      send.disabled = true;
      log.appendChild(el("div", { class: "chat-msg chat-user" }, el("div", { class: "chat-text" }, text)));
      var live = el("div", { class: "chat-msg chat-model chat-live" });
      log.appendChild(live);
      streamTurn(id, text, live, null, appMessage).then(load).catch(function (err) {
        live.appendChild(el("div", { class: "error-box", dataset: { chatError: "" } }, err.message));
      }).then(function () { send.disabled = false; });
    });
  }

  function confirmBox(id, ev) {
    var box = el("div", { class: "card chat-confirm", dataset: { confirm: ev.id } },
      el("div", null, "Run ", el("code", null, ev.tool), " on ", el("code", null, ev.server), "?"),
      pre(pretty(ev.args || {})));
    var buttons = el("div", { class: "buttons" });
    [["once", "Allow once"], ["server", "Always for this server"], ["cancel", "Decline"]].forEach(function (d) {
      buttons.appendChild(el("button", { type: "button", dataset: { decision: d[0] }, onclick: function () {
        api("POST", chatPath(id) + "/confirm", { id: ev.id, decision: d[0] }).then(function () { box.remove(); })
          .catch(function (e) { toast(e.message, true); });
      } }, d[1]));
    });
    box.appendChild(buttons);
    return box;
  }

  // Sends one message and shows the turn's events in `live` until the stream ends.
  // `url`: where the message goes (the chat's send, or an app session's message route);
  // `appMessage`: what an app shown by this turn does with its ui/message.
  function streamTurn(id, text, live, url, appMessage) {
    var textNode = el("div", { class: "chat-text" });
    live.appendChild(textNode);
    return fetch(url || chatPath(id) + "/send", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify({ message: text }),
    }).then(function (resp) {
      if (!resp.ok) return resp.json().then(function (b) { throw new Error((b && b.message) || ("HTTP " + resp.status)); });
      var reader = resp.body.getReader();
      var decoder = new TextDecoder();
      var buf = "";
      function handle(ev) {
        if (ev.type === "text") textNode.textContent += ev.text;
        else if (ev.type === "notice") live.appendChild(el("div", { class: "muted" }, ev.text));
        else if (ev.type === "confirm") live.appendChild(confirmBox(id, ev));
        else if (ev.type === "elicitation" || ev.type === "elicitation-done" || ev.type === "tool-progress") chatExtraEvent(id, ev, live);
        else if (ev.type === "tool-start") live.appendChild(el("div", { class: "muted" }, "Calling " + ev.server + " / " + ev.tool + "…"));
        else if (ev.type === "tool-end") live.appendChild(el("div", { class: ev.isError ? "error-box" : "chat-tool", dataset: { toolResult: ev.tool } }, pre(ev.display || "")));
        if (ev.type === "tool-end" && ev.app && ev.app.id) window.SBTeamApps.show(ev.app.id, live, appMessage);
        else if (ev.type === "error") live.appendChild(el("div", { class: "error-box", dataset: { chatError: "" } }, ev.message));
        else if (ev.type === "done") live.dataset.done = "true";
      }
      function pump() {
        return reader.read().then(function (r) {
          if (r.done) return;
          buf += decoder.decode(r.value, { stream: true });
          var at;
          while ((at = buf.indexOf("\n\n")) >= 0) {
            var block = buf.slice(0, at);
            buf = buf.slice(at + 2);
            var data = block.split("\n").filter(function (l) { return l.indexOf("data:") === 0; })
              .map(function (l) { return l.slice(5).replace(/^ /, ""); }).join("");
            if (data) { try { handle(JSON.parse(data)); } catch (e) { /* a malformed event is skipped */ } }
          }
          return pump();
        });
      }
      return pump();
    });
  }

  // ---------- Workflows ----------
  // The user's saved workflows (kept in the team store, usable from any instance): edit
  // the YAML, save, validate (problems with their lines), run (the live log is polled;
  // the run goes on if this page goes away), and past runs with their saved logs.
  var NEW_WORKFLOW = "name: my-workflow\nnodes:\n  - id: call\n    type: mcp\n    server: SERVER\n    tool: echo\n    args: '{\"message\": \"hello\"}'\n    saveTo: out\n";
  var runPoll = null;

  function workflowPath(name) { return "/api/workflows/" + encodeURIComponent(name); }
  function runPath(id) { return "/api/workflow-runs/" + encodeURIComponent(id); }
  function when(secs) { return secs ? new Date(secs * 1000).toLocaleString() : ""; }

  function problemList(problems) {
    if (!problems || !problems.length) return el("div", { class: "ok-box", dataset: { wfProblems: "0" } }, "No problems found.");
    return el("ul", { class: "error-box wf-problems", dataset: { wfProblems: String(problems.length) } },
      problems.map(function (p) {
        return el("li", null, (p.line ? "line " + p.line + ": " : "") + (p.node ? "node " + p.node + ": " : "") + p.message);
      }));
  }

  function eventLine(ev) {
    if (ev.type === "node-start") return el("div", { class: "muted" }, "▶ " + ev.node + " (" + ev.kind + ") " + (ev.detail || ""));
    if (ev.type === "node-end") {
      return el("div", { class: ev.status === "failed" ? "error-box" : "wf-step", dataset: { wfStep: ev.node, wfStatus: ev.status } },
        (ev.status === "failed" ? "✗ " : "✓ ") + ev.node + " — " + (ev.summary || "") + " (" + ev.ms + " ms)");
    }
    if (ev.type === "done") {
      return el("div", { class: ev.state === "ok" ? "ok-box" : "error-box", dataset: { wfDone: ev.state } },
        "Run " + ev.state + (ev.failure ? ": " + ev.failure.node + ": " + ev.failure.message : ""));
    }
    return el("div", { class: ev.type === "error" ? "error-box" : "muted" }, ev.message || ev.type);
  }

  function logView(log) {
    if (!log) return el("div", { class: "muted" }, "No saved log yet.");
    var box = el("div", { class: "wf-log", dataset: { wfLog: log.status || "" } });
    box.appendChild(el("div", { class: log.status === "ok" ? "ok-box" : "error-box" },
      "Status: " + (log.status || "?") + (log.failure ? " — " + log.failure.node + ": " + log.failure.message : "") +
      (log.durationMs !== undefined ? " (" + log.durationMs + " ms)" : "")));
    (log.steps || []).forEach(function (st) {
      box.appendChild(el("div", { class: st.status === "failed" ? "error-box" : "wf-step" },
        (st.status === "failed" ? "✗ " : "✓ ") + st.node + " (" + st.kind + ") — " + st.summary));
    });
    box.appendChild(el("div", { class: "muted" }, "Variables at the end:"));
    box.appendChild(pre(pretty(log.variables || {})));
    return box;
  }

  function watchRun(id, out, onEnd) {
    if (runPoll) { clearTimeout(runPoll); runPoll = null; }
    var after = 0;
    clear(out);
    var live = el("div", { class: "wf-live", dataset: { wfRun: id } });
    var cancel = el("button", { type: "button", class: "danger", dataset: { wfCancel: id }, onclick: function () {
      api("POST", runPath(id) + "/cancel", {}).then(function () { toast("Cancel asked"); })
        .catch(function (e) { toast(e.message, true); });
    } }, "Cancel run");
    append(out, [el("div", { class: "section-head" }, el("h2", null, "Run"), el("span", { class: "spacer" }), cancel), live]);
    function tick() {
      api("GET", runPath(id) + "/events?after=" + after).then(function (r) {
        r.events.forEach(function (ev) { live.appendChild(eventLine(ev)); });
        after = r.next;
        if (r.run.state === "running" || r.live) {
          if (!r.live && !r.events.length && !live.dataset.elsewhere) {
            live.dataset.elsewhere = "true";
            live.appendChild(el("div", { class: "muted" }, "Running on another instance: its log appears here when it ends."));
          }
          runPoll = setTimeout(tick, 500);
          return;
        }
        runPoll = null;
        cancel.remove();
        live.dataset.ended = r.run.state;
        out.appendChild(logView(r.log));
        if (onEnd) onEnd();
      }).catch(function (e) { live.appendChild(el("div", { class: "error-box" }, e.message)); });
    }
    tick();
  }

  function workflowsView(selected) {
    if (runPoll) { clearTimeout(runPoll); runPoll = null; }
    var list = el("div", { class: "chat-list", dataset: { workflows: "" } });
    var pane = el("div", { class: "chat-pane" });
    function reloadList() {
      return api("GET", "/api/workflows").then(function (r) {
        clear(list);
        list.appendChild(el("a", { class: "chat-item", href: "#/workflows", dataset: { newWorkflow: "" } }, "+ New workflow"));
        r.workflows.forEach(function (w) {
          list.appendChild(el("a", { class: "chat-item" + (w.name === selected ? " active" : ""), href: "#/workflows/" + encodeURIComponent(w.name), dataset: { workflow: w.name } }, w.name));
        });
        list.dataset.loaded = "true";
      }).catch(function (e) { list.appendChild(el("div", { class: "error-box" }, e.message)); });
    }
    clear(view).appendChild(el("div", { class: "settings" },
      el("div", { class: "section-head" }, el("h1", null, "Your workflows")),
      el("p", { class: "muted" }, "Workflows call your servers' tools (name a catalog server as catalog:NAME). Only you see them; their text and run logs are kept encrypted."),
      el("div", { class: "chat-layout" }, list, pane)));
    reloadList();
    editor(pane, selected, reloadList);
  }

  function editor(pane, name, reloadList) {
    var nameInput = el("input", { type: "text", value: name || "", placeholder: "name (letters, digits, - _ .)", dataset: { wfName: "" }, disabled: !!name });
    var source = el("textarea", { class: "wf-source", spellcheck: "false", dataset: { wfSource: "" } });
    var problems = el("div");
    var runOut = el("div", { class: "wf-run-out" });
    var runs = el("div", { class: "wf-runs" });
    function currentName() { return (name || nameInput.value).trim(); }
    function showRuns() {
      if (!name) return;
      api("GET", "/api/workflow-runs?workflow=" + encodeURIComponent(name)).then(function (r) {
        clear(runs);
        runs.appendChild(el("h2", null, "Past runs"));
        if (!r.runs.length) runs.appendChild(el("div", { class: "muted" }, "No runs yet."));
        r.runs.forEach(function (run) {
          runs.appendChild(el("div", { class: "wf-past" },
            el("button", { type: "button", class: "subtle-button", dataset: { wfPast: run.id }, onclick: function () {
              api("GET", runPath(run.id)).then(function (x) {
                clear(runOut).appendChild(el("h2", null, "Run of " + when(x.run.startedAt) + ": " + x.run.state));
                if (x.run.state === "running") watchRun(run.id, runOut, showRuns);
                else runOut.appendChild(logView(x.log));
              }).catch(function (e) { toast(e.message, true); });
            } }, when(run.startedAt) + " — " + run.state)));
        });
      }).catch(function (e) { runs.appendChild(el("div", { class: "error-box" }, e.message)); });
    }
    function save() {
      var n = currentName();
      if (!n) { toast("Name the workflow first", true); return Promise.reject(new Error("no name")); }
      return api("PUT", workflowPath(n), { source: source.value }).then(function (r) {
        clear(problems).appendChild(problemList(r.problems));
        toast("Saved " + n);
        if (!name) { window.location.hash = "#/workflows/" + encodeURIComponent(n); }
        else reloadList();
        return r;
      });
    }
    var buttons = el("div", { class: "actions" },
      el("button", { type: "button", class: "primary", dataset: { wfSave: "" }, onclick: function () { save().catch(function (e) { if (e.message !== "no name") toast(e.message, true); }); } }, "Save"),
      el("button", { type: "button", dataset: { wfValidate: "" }, onclick: function () {
        api("POST", "/api/validate-workflow", { source: source.value }).then(function (r) {
          clear(problems).appendChild(problemList(r.problems));
        }).catch(function (e) { toast(e.message, true); });
      } }, "Validate"),
      name ? el("button", { type: "button", dataset: { wfRun: "" }, onclick: function () {
        save().then(function (saved) {
          if (saved.problems && saved.problems.length) { toast("Fix the problems first", true); return; }
          return request("POST", workflowPath(name) + "/run", {}).then(function (r) {
            if (r.status === 422) { clear(problems).appendChild(problemList(r.body.problems)); return; }
            if (!r.ok) throw new Error((r.body && r.body.message) || ("HTTP " + r.status));
            watchRun(r.body.run.id, runOut, showRuns);
          });
        }).catch(function (e) { toast(e.message, true); });
      } }, "Run") : null,
      name ? el("button", { type: "button", class: "danger", dataset: { wfDelete: "" }, onclick: function () {
        if (!window.confirm("Delete the workflow " + name + " and its runs?")) return;
        api("DELETE", workflowPath(name)).then(function () { toast("Deleted " + name); window.location.hash = "#/workflows"; })
          .catch(function (e) { toast(e.message, true); });
      } }, "Delete") : null);
    append(clear(pane), [field("Name", nameInput), field("Workflow (YAML)", source), buttons, problems, runOut, runs]);
    if (name) {
      api("GET", workflowPath(name)).then(function (w) { source.value = w.source; source.dataset.loaded = "true"; showRuns(); })
        .catch(function (e) { clear(pane).appendChild(el("div", { class: "error-box" }, e.message)); });
    } else {
      source.value = NEW_WORKFLOW;
      source.dataset.loaded = "true";
    }
  }

  // ---------- chat: elicitation forms, tool progress ----------
  // A server's request for input during a tool call (kept in the store; any instance
  // takes the answer) becomes a form typed from its restricted schema; every text from
  // the server goes in as textContent. Progress lines follow a running call.
  function chatExtraEvent(chatId, ev, live) {
    if (ev.type === "elicitation") live.appendChild(elicitBox(chatId, ev));
    else if (ev.type === "elicitation-done") {
      var box = live.querySelector("[data-elicitation=\"" + CSS.escape(ev.id) + "\"]");
      if (box) box.remove();
    } else if (ev.type === "tool-progress") {
      var line = live.querySelector("[data-tool-progress=\"" + CSS.escape(ev.id) + "\"]");
      if (!line) { line = el("div", { class: "muted", dataset: { toolProgress: ev.id } }); live.appendChild(line); }
      var pct = typeof ev.total === "number" && ev.total > 0 ? " (" + Math.round(100 * ev.progress / ev.total) + "%)" : "";
      line.textContent = ev.server + " / " + ev.tool + ": " + (ev.message || ("step " + ev.progress + (typeof ev.total === "number" ? " of " + ev.total : ""))) + pct;
    }
  }

  // Elicitations still waiting when a chat is opened (its turn may run on another
  // instance, or began before this page loaded): answered from here all the same.
  function pendingElicitations(chatId, log, list) {
    (Array.isArray(list) ? list : []).forEach(function (p) {
      if (log.querySelector("[data-elicitation=\"" + CSS.escape(p.id) + "\"]")) return;
      var ev = Object.assign({}, p.request || {}, { id: p.id });
      log.appendChild(elicitBox(chatId, ev));
    });
  }

  function elicitChoices(p) {
    if (Array.isArray(p.enum)) return p.enum.map(function (v, i) { return [String(v), Array.isArray(p.enumNames) && p.enumNames[i] ? String(p.enumNames[i]) : String(v)]; });
    var list = p.oneOf || p.anyOf;
    if (Array.isArray(list)) return list.filter(function (o) { return o && typeof o.const === "string"; }).map(function (o) { return [o.const, o.title ? String(o.title) : o.const]; });
    return null;
  }

  // One input per property: [node, read()] where read() gives the value or undefined.
  function elicitInput(name, p) {
    var type = p.type, choices;
    if (type === "boolean") {
      var box = el("input", { type: "checkbox", name: name });
      box.checked = p.default === true;
      return [box, function () { return box.checked; }];
    }
    if (type === "array") {
      choices = elicitChoices(p.items || {}) || [];
      var picked = Array.isArray(p.default) ? p.default : [];
      var boxes = choices.map(function (c) {
        var b = el("input", { type: "checkbox", name: name, value: c[0] });
        b.checked = picked.indexOf(c[0]) >= 0;
        return [b, el("label", { class: "elicit-choice" }, b, " ", c[1])];
      });
      return [el("div", { dataset: { elicitField: name } }, boxes.map(function (b) { return b[1]; })),
        function () { return boxes.filter(function (b) { return b[0].checked; }).map(function (b) { return b[0].value; }); }];
    }
    if (type === "string" && (choices = elicitChoices(p))) {
      var sel = el("select", { name: name }, el("option", { value: "" }, "—"));
      choices.forEach(function (c) { sel.appendChild(el("option", { value: c[0] }, c[1])); });
      if (typeof p.default === "string") sel.value = p.default;
      return [sel, function () { return sel.value === "" ? undefined : sel.value; }];
    }
    var kinds = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" };
    var attrs = { name: name, type: "text" };
    if (type === "number" || type === "integer") {
      attrs.type = "number"; attrs.step = type === "integer" ? "1" : "any";
      if (typeof p.minimum === "number") attrs.min = String(p.minimum);
      if (typeof p.maximum === "number") attrs.max = String(p.maximum);
    } else if (kinds[p.format]) attrs.type = kinds[p.format];
    if (typeof p.maxLength === "number") attrs.maxlength = String(p.maxLength);
    var input = el("input", attrs);
    if (p.default !== undefined && p.default !== null) input.value = String(p.default);
    return [input, function () {
      var v = input.value;
      if (v === "") return undefined;
      if (type === "integer") return parseInt(v, 10);
      if (type === "number") return Number(v);
      return v;
    }];
  }

  function elicitBox(chatId, ev) {
    var box = el("div", { class: "card chat-elicit", dataset: { elicitation: ev.id } },
      el("div", { class: "muted" }, "The server ", el("code", null, ev.server), " asks:"),
      el("div", { class: "elicit-message" }, ev.message || ""));
    var error = el("div", { class: "error-box", hidden: true });
    function answer(action, content) {
      var body = { id: ev.id, action: action };
      if (content) body.content = content;
      api("POST", chatPath(chatId) + "/elicitation", body).then(function () { box.remove(); })
        .catch(function (e) { error.hidden = false; error.textContent = e.message; });
    }
    var buttons = el("div", { class: "buttons" });
    if (ev.mode === "url") {
      var link = ev.link || {};
      box.appendChild(link.href
        ? el("a", { href: link.href, target: "_blank", rel: "noopener noreferrer", dataset: { elicitLink: "" } }, link.href)
        : el("div", null, el("code", null, ev.url || ""), el("div", { class: "muted" }, link.refused || "")));
      buttons.appendChild(el("button", { type: "button", class: "primary", dataset: { elicitAction: "accept" }, onclick: function () { answer("accept"); } }, "Done"));
    } else {
      var schema = ev.requestedSchema || {};
      var props = schema.properties || {};
      var required = Array.isArray(schema.required) ? schema.required : [];
      var readers = {};
      var form = el("form", { class: "elicit-form" });
      Object.keys(props).forEach(function (name) {
        var p = props[name] || {};
        var made = elicitInput(name, p);
        readers[name] = made[1];
        var label = (p.title ? String(p.title) : name) + (required.indexOf(name) >= 0 ? " *" : "");
        form.appendChild(el("label", { class: "field", dataset: { elicitField: name } },
          el("span", { class: "field-label" }, label), made[0],
          p.description ? el("span", { class: "muted" }, String(p.description)) : null));
      });
      box.appendChild(form);
      buttons.appendChild(el("button", { type: "button", class: "primary", dataset: { elicitAction: "accept" }, onclick: function () {
        var content = {};
        Object.keys(readers).forEach(function (n) { var v = readers[n](); if (v !== undefined) content[n] = v; });
        answer("accept", content);
      } }, "Submit"));
    }
    buttons.appendChild(el("button", { type: "button", dataset: { elicitAction: "decline" }, onclick: function () { answer("decline"); } }, "Decline"));
    buttons.appendChild(el("button", { type: "button", dataset: { elicitAction: "cancel" }, onclick: function () { answer("cancel"); } }, "Cancel"));
    box.appendChild(error);
    box.appendChild(buttons);
    return box;
  }

  // ---------- router ----------
  function route() {
    var h = window.location.hash || "#/servers";
    var m = /^#\/servers\/([^/]+)\/tools$/.exec(h);
    var c = /^#\/chat(?:\/([^/]+))?$/.exec(h);
    var w = /^#\/workflows(?:\/([^/]+))?$/.exec(h);
    document.querySelectorAll("[data-nav]").forEach(function (n) {
      n.classList.toggle("active", n.dataset.nav === (c ? "chat" : w ? "workflows" : "servers"));
    });
    if (w) {
      var wname = null;
      try { wname = w[1] ? decodeURIComponent(w[1]) : null; } catch (e) { wname = w[1]; }
      workflowsView(wname);
    } else if (c) {
      var id = null;
      try { id = c[1] ? decodeURIComponent(c[1]) : null; } catch (e) { id = c[1]; }
      chatView(id);
    } else if (m) {
      var name;
      try { name = decodeURIComponent(m[1]); } catch (e) { name = m[1]; }
      toolsView(name);
    } else {
      serversView();
    }
  }
  window.addEventListener("hashchange", route);
  route();
})();
