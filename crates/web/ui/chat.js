// Chat page: the model (Gemini, or an OpenAI-compatible server when the settings say
// `provider: "openai"`) with the MCP servers' tools, streamed over SSE. Per-server
// checkboxes are remembered in localStorage; tool calls show as cards (arguments,
// result, errors) and their MCP Apps render inline; untrusted servers' tools ask first.
"use strict";

(function () {
  var el = SB.el;
  var STORE = "switchboard.chat.servers";
  var MODEL_STORE = "switchboard.chat.model";
  var page = { root: null, sessionId: null, busy: false, apps: [], cards: {}, provider: "gemini" };
  // The model name is remembered per provider (a Gemini model means nothing to a local server).
  function modelStore() { return page.provider === "gemini" ? MODEL_STORE : MODEL_STORE + "." + page.provider; }
  function modelName() { return page.provider === "gemini" ? "Gemini" : "Model"; }

  function saved() { try { return JSON.parse(localStorage.getItem(STORE) || "{}") || {}; } catch (e) { return {}; } }
  function save(map) { try { localStorage.setItem(STORE, JSON.stringify(map)); } catch (e) { /* private mode */ } }

  function toolsOff() {
    var model = (page.root.model.value || "").toLowerCase();
    if (page.root.webSearch.checked) return "MCP tools are off in web-search mode.";
    if (model.indexOf("gemma") === 0) return "MCP tools are off: Gemma models have no function calling.";
    return null;
  }

  function renderServers() {
    if (!page.root) return;
    var box = SB.clear(page.root.servers);
    var sel = saved();
    var off = toolsOff();
    box.appendChild(el("div", { class: "menu-title" }, "MCP servers"));
    if (off) box.appendChild(el("div", { class: "hint", dataset: { toolsOff: "" } }, off));
    SB.servers.forEach(function (s) {
      var cb = el("input", { type: "checkbox", dataset: { chatServer: s.name }, disabled: !!off || s.status !== "connected" });
      cb.checked = sel[s.name] !== false;
      cb.addEventListener("change", function () { var m = saved(); m[s.name] = cb.checked; save(m); });
      box.appendChild(el("label", { class: "check server-check" }, cb, " ", SB.statusDot(s.status), " ", s.name,
        el("span", { class: "muted" }, s.status === "connected" ? " (" + s.tools.length + " tools)" : " (" + s.status + ")")));
    });
    if (!SB.servers.length) box.appendChild(el("div", { class: "muted" }, "No servers."));
  }

  function selection() {
    var sel = saved();
    var out = {};
    SB.servers.forEach(function (s) { out[s.name] = sel[s.name] !== false; });
    return out;
  }

  function scrollDown() { var m = page.root.messages; m.scrollTop = m.scrollHeight; }

  function bubble(role, text) {
    var hint = page.root.messages.querySelector(".empty-chat");
    if (hint) hint.remove();
    var b = el("div", { class: "msg " + role }, el("div", { class: "msg-role" }, role === "user" ? "You" : (role === "model" ? modelName() : "")), el("div", { class: "msg-text" }, text || ""));
    page.root.messages.appendChild(b);
    scrollDown();
    return b;
  }

  function toolCard(ev) {
    var status = el("span", { class: "tool-status running" }, "running…");
    var out = el("div", { class: "tool-result" });
    var apps = el("div", { class: "tool-apps" });
    var card = el("div", { class: "tool-card", dataset: { toolCall: ev.tool, server: ev.server, callId: ev.id } },
      el("div", { class: "tool-card-head" }, el("span", { class: "badge" }, "tool"), el("code", null, ev.server + "." + ev.tool), status),
      el("details", { class: "args" }, el("summary", null, "Arguments"), SB.pre(SB.json(ev.args))),
      out, apps);
    page.root.messages.appendChild(card);
    var entry = { card: card, status: status, out: out, apps: apps, args: ev.args, app: null, ev: ev };
    page.cards[ev.id] = entry;
    if (ev.ui && ev.ui.resourceUri) entry.app = openApp(ev, ev.ui.resourceUri, apps, null);
    scrollDown();
    return entry;
  }

  function openApp(ev, uri, into, result) {
    var app = SB.openApp({
      server: ev.server, resourceUri: uri, tool: ev.tool, args: ev.args || {}, into: into, result: result, callId: ev.id,
      context: "chat", chatSessionId: function () { return page.sessionId; },
      onMessage: function (text) { if (text) return send(text); },
    });
    page.apps.push(app);
    return app;
  }

  function handle(ev, state) {
    switch (ev.type) {
      case "session": page.sessionId = ev.id; break;
      case "text":
        if (!state.model) state.model = bubble("model", "");
        state.model.querySelector(".msg-text").textContent += ev.text;
        scrollDown();
        break;
      case "notice": page.root.messages.appendChild(el("div", { class: "notice" }, ev.text)); state.model = null; break;
      case "reply": bubble("system", ev.text); break;
      case "tool-start": state.model = null; toolCard(ev); break;
      case "tool-progress":
        var c = page.cards[ev.id];
        if (c) c.status.textContent = "running… " + ev.progress + (ev.total ? "/" + ev.total : "") + (ev.message ? " " + ev.message : "");
        break;
      case "tool-end":
        var e = page.cards[ev.id] || toolCard(ev);
        e.status.textContent = ev.isError ? "error" : "done";
        e.status.className = "tool-status " + (ev.isError ? "error" : "ok");
        e.card.dataset.done = "true";
        SB.clear(e.out).appendChild(ev.result ? SB.renderContent(ev.result.content) : el("div", { class: "error-box" }, ev.display));
        if (ev.result) e.out.appendChild(SB.rawJson(ev.result, "Raw result"));
        if (e.app) { if (ev.result) e.app.setResult(ev.result); else e.app.cancel(ev.display); }
        else if (ev.ui && ev.ui.resourceUri && ev.result) e.app = openApp(ev, ev.ui.resourceUri, e.apps, ev.result);
        break;
      case "confirm": confirmCard(ev); break;
      case "error": bubble("error", ev.message); break;
      case "done": break;
    }
  }

  function confirmCard(ev) {
    var hint = ev.readOnly ? " (read-only)" : (ev.destructive ? " (DESTRUCTIVE)" : "");
    var card = el("div", { class: "confirm-card", dataset: { confirm: ev.id } },
      el("div", null, "Run ", el("code", null, ev.server + "." + ev.tool), hint, "?"),
      SB.pre(SB.json(ev.args)));
    var buttons = el("div", { class: "buttons" });
    [["once", "Run once", "primary"], ["tool", "Always this tool"], ["server", "Always this server"], ["cancel", "Cancel", "danger"]].forEach(function (b) {
      buttons.appendChild(el("button", { type: "button", class: b[2] || "", dataset: { decision: b[0] }, onclick: function () {
        buttons.querySelectorAll("button").forEach(function (x) { x.disabled = true; });
        SB.api("POST", "/chat/confirm", { sessionId: page.sessionId, id: ev.id, decision: b[0] }).then(function () {
          card.classList.add("answered");
          card.appendChild(el("div", { class: "muted" }, b[0] === "cancel" ? "Declined." : "Approved."));
        }, function (e) { SB.toast(e.message, "error"); });
      } }, b[1]));
    });
    card.appendChild(buttons);
    page.root.messages.appendChild(card);
    scrollDown();
  }

  function send(text) {
    if (page.busy) { SB.toast("Wait for the current answer (or stop it)."); return Promise.resolve(); }
    text = (text || "").trim();
    if (!text) return Promise.resolve();
    page.busy = true;
    page.root.sendBtn.disabled = true;
    page.root.stopBtn.hidden = false;
    bubble("user", text);
    var state = { model: null };
    var model = page.root.model.value.trim();
    try { localStorage.setItem(modelStore(), model); } catch (e) { /* ignore */ }
    var body = { sessionId: page.sessionId, message: text, model: model || undefined, webSearch: page.root.webSearch.checked, servers: selection() };
    return fetch("/api/chat/send", { method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })
      .then(function (resp) {
        if (!resp.ok) return resp.json().then(function (d) { throw new Error(d.message || ("HTTP " + resp.status)); });
        return SB.readSse(resp, function (ev) { handle(ev, state); });
      })
      .catch(function (e) { bubble("error", e.message); })
      .then(function () {
        page.busy = false;
        if (page.root) { page.root.sendBtn.disabled = false; page.root.stopBtn.hidden = true; }
      });
  }

  // Suggestions for `/prompt` and `@server:uri`.
  function suggest() {
    var r = page.root;
    var v = r.input.value;
    var word = v.slice(0, r.input.selectionStart).split(/\s/).pop();
    var items = [];
    if (word.charAt(0) === "@") {
      SB.servers.forEach(function (s) { (s.resources || []).forEach(function (res) { items.push({ label: "@" + s.name + ":" + res.uri, hint: res.name }); }); });
    } else if (word.charAt(0) === "/" && v.indexOf(word) === 0) {
      items.push({ label: "/help", hint: "commands and prompts" });
      SB.servers.forEach(function (s) { (s.prompts || []).forEach(function (p) { items.push({ label: "/" + p.name, hint: s.name + (p.description ? " — " + p.description : "") }); }); });
    }
    items = items.filter(function (i) { return i.label.toLowerCase().indexOf(word.toLowerCase()) === 0; }).slice(0, 8);
    var box = SB.clear(r.suggest);
    box.hidden = !items.length || word.length < 1;
    items.forEach(function (i) {
      box.appendChild(el("button", { type: "button", class: "suggestion", onclick: function () {
        var start = r.input.selectionStart - word.length;
        r.input.value = v.slice(0, start) + i.label + " " + v.slice(r.input.selectionStart);
        box.hidden = true;
        r.input.focus();
      } }, el("code", null, i.label), " ", el("span", { class: "muted" }, i.hint || "")));
    });
  }

  function newChat() {
    if (page.sessionId) SB.api("POST", "/chat/reset", { sessionId: page.sessionId }).catch(function () {});
    page.sessionId = null;
    page.apps.forEach(function (a) { a.teardown(); });
    page.apps = [];
    page.cards = {};
    SB.clear(page.root.messages).appendChild(el("div", { class: "empty-chat muted" }, "Ask anything. Tools from the checked servers are available; type @ to attach a resource, / for prompts."));
  }

  SB.on("servers", renderServers);

  SB.pages.chat = {
    title: "Chat",
    enter: function (view) {
      var wrap = el("div", { class: "chat" });
      view.appendChild(wrap);
      SB.api("GET", "/chat/status").then(function (st) {
        page.provider = st.provider || "gemini";
        var gemini = page.provider === "gemini";
        if (!st.available) {
          wrap.appendChild(el("div", { class: "card no-key", dataset: { noKey: "" } }, el("h1", null, gemini ? "Chat needs a Gemini API key" : "Chat is unavailable"), el("p", null, st.message)));
          return;
        }
        var model = el("input", { type: "text", class: "model", value: localStorage.getItem(modelStore()) || st.model, list: "models", "aria-label": "Model" });
        var models = el("datalist", { id: "models" }, (gemini ? ["gemini-2.5-flash", "gemini-2.5-pro", "gemini-2.5-flash-lite", "gemini-3-pro-preview", "gemma-3-27b-it"] : [st.model]).map(function (m) { return el("option", { value: m }); }));
        var webSearch = el("input", { type: "checkbox", "aria-label": "Web search" });
        var servers = el("div", { class: "server-menu" });
        var messages = el("div", { class: "messages", role: "log" });
        var input = el("textarea", { class: "chat-input", rows: 2, placeholder: "Message " + (gemini ? "Gemini" : "the model") + "…  (Enter sends, Shift+Enter for a new line)", "aria-label": "Message" });
        var sendBtn = el("button", { type: "submit", class: "primary" }, "Send");
        var stopBtn = el("button", { type: "button", hidden: true, onclick: function () { if (page.sessionId) SB.api("POST", "/chat/cancel", { sessionId: page.sessionId }).catch(function () {}); } }, "Stop");
        var suggestBox = el("div", { class: "suggest", hidden: true });
        var form = el("form", { class: "composer" }, suggestBox, input, el("div", { class: "composer-buttons" }, stopBtn, sendBtn));
        form.addEventListener("submit", function (e) { e.preventDefault(); var t = input.value; input.value = ""; suggestBox.hidden = true; send(t); });
        input.addEventListener("keydown", function (e) { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); } });
        input.addEventListener("input", suggest);
        var toolbar = el("div", { class: "chat-toolbar" },
          el("label", null, "Model ", model, models),
          el("label", { class: "check" }, webSearch, " Web search"),
          el("details", { class: "tools-menu" }, el("summary", null, "Tools"), servers),
          el("span", { class: "spacer" }),
          el("button", { type: "button", onclick: newChat }, "New chat"));
        wrap.appendChild(toolbar);
        wrap.appendChild(messages);
        wrap.appendChild(form);
        page.root = { model: model, webSearch: webSearch, servers: servers, messages: messages, input: input, sendBtn: sendBtn, stopBtn: stopBtn, suggest: suggestBox };
        model.addEventListener("input", renderServers);
        webSearch.addEventListener("change", renderServers);
        renderServers();
        newChat();
        input.focus();
      }, function (e) { wrap.appendChild(el("div", { class: "error-box" }, e.message)); });
    },
    leave: function () {
      page.apps.forEach(function (a) { a.teardown(); });
      page.apps = [];
      page.root = null;
    },
  };
})();
