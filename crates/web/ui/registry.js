// Settings › Find in the MCP Registry: search the registry the settings name
// (`registryUrl`), pick a package or remote, fill in what it needs, add it. Registry
// text is shown as text only (never HTML, never a link). Secrets are typed into
// password fields, or stored as a reference to an environment variable (on loopback
// only); the server never sends a value back.
"use strict";

(function () {
  var el = SB.el;

  // A settings name from a registry id: `io.github.example/weather-mcp` → `weather-mcp`.
  function suggestName(id) {
    var last = String(id).split("/").pop() || "server";
    return last.replace(/[^A-Za-z0-9_.-]+/g, "-").slice(0, 60) || "server";
  }

  // An environment variable name for an input (`X-API-Key` → `X_API_KEY`).
  function envName(name) {
    var n = String(name).toUpperCase().replace(/[^A-Z0-9_]+/g, "_");
    return /^[A-Z_]/.test(n) ? n : "_" + n;
  }

  function inputRow(input, remote) {
    var id = "reg-in-" + Math.random().toString(36).slice(2);
    var field = el("div", { class: "field reg-input", dataset: { registryInput: input.name } });
    var label = el("label", { class: "field-label", for: id }, input.name,
      input.required ? el("span", { class: "badge" }, "required") : null,
      input.secret ? el("span", { class: "badge danger" }, "secret") : null);
    field.appendChild(label);
    var control;
    if (input.choices && input.choices.length && !input.secret) {
      control = el("select", { id: id, name: input.name });
      if (!input.required) control.appendChild(el("option", { value: "" }, "(leave out)"));
      input.choices.forEach(function (c) { control.appendChild(el("option", { value: c }, c)); });
      if (input.default) control.value = input.default;
      else if (!input.required) control.value = "";
    } else {
      control = el("input", { id: id, name: input.name, type: input.secret ? "password" : "text", autocomplete: input.secret ? "new-password" : "off",
        placeholder: input.default ? "default: " + input.default : (input.required ? "" : "optional") });
    }
    field.appendChild(control);
    var get = function () { var v = control.value; return v ? { value: v } : null; };
    if (input.secret && !remote) {
      var asRef = el("input", { type: "checkbox", dataset: { registryRef: input.name } });
      var refName = el("input", { type: "text", value: envName(input.name), class: "mono reg-ref", hidden: true, dataset: { registryRefName: input.name } });
      asRef.addEventListener("change", function () { refName.hidden = !asRef.checked; control.hidden = asRef.checked; });
      field.appendChild(el("label", { class: "check reg-ref-check" }, asRef, " store a reference to an environment variable instead: "));
      field.appendChild(refName);
      get = function () {
        if (asRef.checked) return refName.value.trim() ? { reference: refName.value.trim() } : null;
        return control.value ? { value: control.value } : null;
      };
    }
    if (input.description) field.appendChild(el("div", { class: "field-help" }, input.description));
    return { node: field, get: get, input: input };
  }

  function addForm(server, option, remote, onAdded, close) {
    var name = el("input", { type: "text", name: "name", value: suggestName(server.id), dataset: { registryName: "" } });
    var rows = (option.inputs || []).filter(function (i) { return !i.fixed; }).map(function (i) { return inputRow(i, remote); });
    var err = el("div", { class: "form-error", dataset: { registryError: "" } });
    var submit = el("button", { type: "submit", class: "primary", dataset: { registrySubmit: "" } }, "Add server");
    var form = el("form", { class: "card reg-form", dataset: { registryForm: server.id } },
      el("h2", null, "Add ", server.title || server.id),
      el("div", { class: "muted" }, option.kind === "remote" ? "Remote (" + option.type + "): " : option.type + " package: ", el("code", null, option.target)),
      el("div", { class: "field" }, el("label", { class: "field-label" }, "Name in your settings"), name),
      rows.length ? el("div", { class: "field-help" }, option.kind === "remote" ? "Headers sent to the server:" : "Environment variables of the server process:") : null,
      rows.map(function (r) { return r.node; }),
      remote ? el("div", { class: "hint" }, "Served beyond loopback: values are stored as typed (no environment references).") : null,
      err,
      el("div", { class: "buttons" }, el("span", { class: "spacer" }), el("button", { type: "button", onclick: close }, "Cancel"), submit));
    form.addEventListener("input", function () { err.textContent = ""; });
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      err.textContent = "";
      var body = { name: name.value.trim(), id: server.id + "@" + server.version, choice: { kind: option.kind, index: option.index }, values: {}, references: {} };
      if (!server.version) body.id = server.id;
      for (var i = 0; i < rows.length; i++) {
        var v = rows[i].get();
        if (!v) {
          if (rows[i].input.needsValue) { err.textContent = rows[i].input.name + " is required."; return; }
          continue;
        }
        if (v.reference) body.references[rows[i].input.name] = v.reference;
        else body.values[rows[i].input.name] = v.value;
      }
      submit.disabled = true;
      SB.api("POST", "/registry/add", body).then(function (r) {
        SB.toast("Added server “" + body.name + "” in " + r.file + (r.command ? "; it runs: " + r.command : ""));
        if (r.configError) SB.toast(r.configError, "error");
        close();
        onAdded();
      }, function (e) { err.textContent = e.message; }).then(function () { submit.disabled = false; });
    });
    return form;
  }

  function resultItem(server, remote, onAdded) {
    var formBox = el("div", { class: "reg-form-box" });
    var close = function () { SB.clear(formBox); };
    var options = el("div", { class: "reg-options" });
    (server.options || []).forEach(function (o) {
      var key = o.kind + "-" + o.index;
      options.appendChild(el("div", { class: "reg-option" + (o.available ? "" : " unavailable") },
        el("span", { class: "badge" }, o.kind === "remote" ? "remote · " + o.type : o.type),
        el("code", { class: "reg-target" }, o.target),
        o.available
          ? el("button", { type: "button", class: "primary", dataset: { registryAdd: server.id, option: key }, onclick: function () {
            SB.clear(formBox).appendChild(addForm(server, o, remote, onAdded, close));
            var first = formBox.querySelector("input");
            if (first) first.focus();
          } }, "Add")
          : el("span", { class: "muted reg-why" }, o.why || "cannot be added")));
    });
    return el("li", { class: "reg-result", dataset: { registryResult: server.id } },
      el("div", { class: "srv-line" }, el("strong", { class: "srv-name" }, server.title || server.id),
        server.version ? el("span", { class: "badge", dataset: { registryVersion: server.id } }, "v" + server.version) : null,
        (server.runs || []).map(function (r) { return el("span", { class: "badge subtle" }, r); })),
      el("div", { class: "muted" }, el("code", null, server.id)),
      server.description ? el("div", { class: "reg-desc" }, server.description) : null,
      options, formBox);
  }

  // Mounts the search into `box`; `onAdded` reloads the server list.
  SB.registrySearch = function (box, onAdded) {
    var q = el("input", { type: "text", name: "q", placeholder: "Search the MCP Registry by name (e.g. weather, github)", dataset: { registryQuery: "" } });
    var status = el("div", { class: "muted reg-status" });
    var results = el("ul", { class: "reg-results" });
    var go = el("button", { type: "submit", dataset: { registrySearch: "" } }, "Search");
    var form = el("form", { class: "reg-search" }, q, go);
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var text = q.value.trim();
      if (!text) return;
      go.disabled = true;
      status.textContent = "Searching…";
      SB.clear(results);
      SB.api("GET", "/registry/search?q=" + encodeURIComponent(text)).then(function (d) {
        status.textContent = d.servers.length
          ? d.servers.length + " active server" + (d.servers.length === 1 ? "" : "s") + " in " + d.registry + (d.truncated ? " (first pages only: narrow the search)" : "")
          : "No active server matches “" + text + "” in " + d.registry + ".";
        d.servers.forEach(function (s) { results.appendChild(resultItem(s, d.remote, onAdded)); });
      }, function (e) {
        status.textContent = "";
        results.appendChild(el("li", { class: "error-box", dataset: { registryError: "" } }, e.message));
      }).then(function () { go.disabled = false; });
    });
    SB.clear(box).appendChild(el("details", { class: "card reg-box", dataset: { registry: "" } },
      el("summary", null, el("strong", null, "Find in the MCP Registry")),
      form, status, results));
  };
})();
