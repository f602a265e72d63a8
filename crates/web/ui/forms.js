// Forms generated from JSON Schema (tool input schemas, elicitation requests, prompt
// arguments). Scalars get typed inputs; anything complex gets a JSON text area.
// `SB.schemaForm(schema, initial)` → {node, validate(), value()}.
"use strict";

(function () {
  var el = SB.el;

  function typeOf(prop) {
    var t = prop.type;
    if (Array.isArray(t)) t = t.filter(function (x) { return x !== "null"; })[0];
    if (!t && prop.enum) t = "string";
    if (!t && (prop.oneOf || prop.anyOf)) {
      var first = (prop.oneOf || prop.anyOf).filter(function (o) { return o.const !== undefined; });
      if (first.length) return "const-choice";
    }
    return t || "json";
  }

  function field(name, prop, required, initial) {
    prop = prop || {};
    var kind = typeOf(prop);
    var id = "f-" + Math.random().toString(36).slice(2);
    var label = el("label", { for: id, class: "field-label" }, prop.title || name, required ? el("span", { class: "req", title: "required" }, " *") : null);
    var help = prop.description ? el("div", { class: "field-help" }, prop.description) : null;
    var input, read;
    var def = initial !== undefined ? initial : prop["default"];
    if (kind === "boolean") {
      input = el("input", { type: "checkbox", id: id, name: name });
      input.checked = def === true;
      read = function () { return { ok: true, value: input.checked, empty: false }; };
      return { node: el("div", { class: "field field-check" }, el("label", { class: "check" }, input, " ", prop.title || name, required ? el("span", { class: "req" }, " *") : null), help), read: read, name: name, required: required };
    }
    if (kind === "string" && prop.enum) {
      input = el("select", { id: id, name: name });
      if (!required) input.appendChild(el("option", { value: "" }, "—"));
      prop.enum.forEach(function (v, i) {
        var title = (prop.enumNames && prop.enumNames[i]) || v;
        input.appendChild(el("option", { value: v }, title));
      });
      if (def !== undefined) input.value = def;
      read = function () { return input.value === "" ? { ok: true, empty: true } : { ok: true, value: input.value }; };
    } else if (kind === "const-choice") {
      var opts = (prop.oneOf || prop.anyOf).filter(function (o) { return o.const !== undefined; });
      input = el("select", { id: id, name: name });
      if (!required) input.appendChild(el("option", { value: "" }, "—"));
      opts.forEach(function (o, i) { input.appendChild(el("option", { value: String(i) }, o.title || String(o.const))); });
      read = function () { return input.value === "" ? { ok: true, empty: true } : { ok: true, value: opts[Number(input.value)].const }; };
    } else if (kind === "number" || kind === "integer") {
      input = el("input", { type: "number", id: id, name: name, step: kind === "integer" ? "1" : "any" });
      if (prop.minimum !== undefined) input.min = prop.minimum;
      if (prop.maximum !== undefined) input.max = prop.maximum;
      if (def !== undefined) input.value = def;
      read = function () {
        if (input.value.trim() === "") return { ok: true, empty: true };
        var n = Number(input.value);
        if (!isFinite(n)) return { ok: false, error: "enter a number" };
        if (kind === "integer" && Math.floor(n) !== n) return { ok: false, error: "enter a whole number" };
        return { ok: true, value: n };
      };
    } else if (kind === "string") {
      var long = (prop.maxLength || 0) > 200 || prop.format === "textarea" || /text|body|content|message|prompt/i.test(name);
      input = long ? el("textarea", { id: id, name: name, rows: 3 }) : el("input", { type: prop.format === "email" ? "email" : (prop.format === "uri" ? "url" : "text"), id: id, name: name });
      if (def !== undefined) input.value = def;
      read = function () { return input.value === "" ? { ok: true, empty: true } : { ok: true, value: input.value }; };
    } else {
      input = el("textarea", { id: id, name: name, rows: 3, class: "mono", placeholder: kind === "array" ? "[ … ] (JSON)" : "JSON" });
      if (def !== undefined) input.value = JSON.stringify(def, null, 2);
      read = function () {
        if (input.value.trim() === "") return { ok: true, empty: true };
        try { return { ok: true, value: JSON.parse(input.value) }; } catch (e) { return { ok: false, error: "not valid JSON: " + e.message }; }
      };
    }
    var err = el("div", { class: "field-error" });
    var node = el("div", { class: "field" }, label, input, help, err);
    return { node: node, read: read, name: name, required: required, err: err };
  }

  SB.schemaForm = function (schema, initial) {
    schema = schema || {};
    initial = initial || {};
    var props = schema.properties || {};
    var required = schema.required || [];
    var names = Object.keys(props);
    var fields = names.map(function (n) { return field(n, props[n], required.indexOf(n) >= 0, initial[n]); });
    var node = el("div", { class: "schema-form" });
    if (!names.length) node.appendChild(el("p", { class: "muted" }, "No arguments."));
    fields.forEach(function (f) { node.appendChild(f.node); });
    var extra = null;
    if (schema.additionalProperties && typeof schema.additionalProperties === "object" && !names.length) {
      extra = el("textarea", { class: "mono", rows: 3, placeholder: "{ } (JSON object)" });
      node.appendChild(el("div", { class: "field" }, el("label", { class: "field-label" }, "Arguments (JSON)"), extra));
    }
    function collect() {
      var out = {};
      var errors = [];
      if (extra && extra.value.trim()) {
        try { out = JSON.parse(extra.value); } catch (e) { errors.push("arguments: not valid JSON"); }
      }
      fields.forEach(function (f) {
        var r = f.read();
        if (f.err) f.err.textContent = "";
        if (!r.ok) { errors.push(f.name + ": " + r.error); if (f.err) f.err.textContent = r.error; return; }
        if (r.empty) {
          if (f.required) { errors.push(f.name + ": required"); if (f.err) f.err.textContent = "required"; }
          return;
        }
        out[f.name] = r.value;
      });
      return { value: out, errors: errors };
    }
    return {
      node: node,
      validate: function () { return collect().errors.length === 0; },
      value: function () { return collect().value; },
      errors: function () { return collect().errors; },
    };
  };

  // Renders MCP content blocks (tool results, prompt messages, resource contents).
  SB.renderContent = function (blocks) {
    var wrap = el("div", { class: "content-blocks" });
    (blocks || []).forEach(function (b) {
      if (!b || typeof b !== "object") return;
      if (b.type === "text") wrap.appendChild(el("pre", { class: "code text-block" }, b.text || ""));
      else if (b.type === "image" && b.data) wrap.appendChild(el("img", { class: "image-block", alt: "image from the server", src: "data:" + (b.mimeType || "image/png") + ";base64," + b.data }));
      else if (b.type === "resource_link") wrap.appendChild(el("div", { class: "link-block" }, "🔗 ", b.name || b.uri, " ", el("code", null, b.uri)));
      else if (b.type === "resource" && b.resource) {
        var r = b.resource;
        wrap.appendChild(el("div", { class: "resource-block" }, el("code", null, r.uri), r.text !== undefined ? el("pre", { class: "code" }, r.text) : el("span", { class: "muted" }, " (binary, " + (r.mimeType || "?") + ")")));
      } else if (b.uri && (b.text !== undefined || b.blob !== undefined)) {
        wrap.appendChild(el("div", { class: "resource-block" }, el("code", null, b.uri, b.mimeType ? " · " + b.mimeType : ""),
          b.text !== undefined ? el("pre", { class: "code" }, b.text) :
            (/^image\//.test(b.mimeType || "") ? el("img", { class: "image-block", alt: b.uri, src: "data:" + b.mimeType + ";base64," + b.blob }) : el("span", { class: "muted" }, " (binary)"))));
      } else wrap.appendChild(el("pre", { class: "code" }, SB.json(b)));
    });
    return wrap;
  };

  // A "raw JSON" disclosure.
  SB.rawJson = function (value, label) {
    return el("details", { class: "raw" }, el("summary", null, label || "Raw JSON"), el("pre", { class: "code" }, SB.json(value)));
  };
})();
