// MCP Apps in the team chat. The app host itself is the personal app's (apps.js,
// SB.openApp); this file gives it the few SB helpers it needs and a team host: every app
// request goes to /api/apps/{id}/... of an app session the store keeps (any instance
// answers), never naming a server. The sandbox page (/apps/{id}/sandbox) runs in an
// opaque origin (CSP `sandbox`), so its messages arrive from "null" and are matched by
// frame identity.
//
// SBTeamApps.show(appId, into, onMessage) renders one app card into `into`;
// SBTeamApps.restore(chatId, log, onMessage) renders a chat's saved app sessions after
// the message each followed (log children with data-seq).
"use strict";

(function () {
  var SB = window.SB = window.SB || {};

  SB.el = function (tag, attrs) {
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
  SB.toast = function (text) {
    var t = SB.el("div", { class: "toast" }, text);
    var box = document.getElementById("toasts");
    if (box) { box.appendChild(t); setTimeout(function () { t.remove(); }, 4000); }
  };
  SB.confirm = function (title, text) { return Promise.resolve(window.confirm(title + "\n\n" + text)); };

  // Team routes are absolute (no /api prefix added); errors carry the status.
  function call(method, path, body) {
    var opts = { method: method, credentials: "same-origin", headers: {} };
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    return fetch(path, opts).then(function (resp) {
      return resp.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { data = { message: text }; }
        if (!resp.ok) {
          var err = new Error((data && data.message) || ("HTTP " + resp.status));
          err.status = resp.status;
          throw err;
        }
        return data;
      });
    });
  }
  function appPath(id) { return "/api/apps/" + encodeURIComponent(id); }

  function teamHost(id, opened) {
    return {
      open: function () { return opened; },
      close: function (appId) { return call("DELETE", appPath(appId)); },
      context: function (appId, ctx) {
        return call("POST", appPath(appId) + "/context", { content: ctx.content, structuredContent: ctx.structuredContent });
      },
      forward: function (appId, method, params) {
        if (method === "tools/call") {
          return call("POST", appPath(appId) + "/tools/call", { name: params.name, arguments: params.arguments || {} }).then(function (r) { return r.result; });
        }
        if (method === "resources/read") {
          return call("POST", appPath(appId) + "/resources/read", { uri: params.uri }).then(function (r) { return r.result; });
        }
        return call("GET", appPath(appId) + "/lists").then(function (l) {
          if (method === "resources/list") return { resources: l.resources };
          if (method === "resources/templates/list") return { resourceTemplates: l.resourceTemplates };
          return { prompts: l.prompts };
        });
      },
    };
  }

  function show(id, into, onMessage) {
    var slot = SB.el("div", { class: "team-app", dataset: { teamApp: id } });
    into.appendChild(slot);
    var opened = call("POST", appPath(id) + "/open").then(function (o) {
      // The shape apps.js reads.
      o.tool = o.toolDef;
      return o;
    });
    opened.then(function (o) {
      SB.openApp({
        server: o.server, resourceUri: o.resourceUri, tool: o.tool && o.tool.name ? o.tool.name : o.tool,
        args: o.arguments || {}, result: o.result, callId: o.callId, into: slot,
        host: teamHost(id, opened),
        onMessage: onMessage ? function (text) { if (text) return onMessage(id, text); } : null,
      });
    }, function (e) {
      slot.appendChild(SB.el("div", { class: "error-box", dataset: { appError: id } }, "Could not load the app: " + e.message));
    });
    return slot;
  }

  function restore(chatId, log, onMessage) {
    return call("GET", "/api/chats/" + encodeURIComponent(chatId) + "/apps").then(function (r) {
      (r.apps || []).forEach(function (a) {
        var holder = SB.el("div", { class: "chat-msg chat-model", dataset: { appAfter: String(a.afterSeq) } });
        var after = null;
        Array.prototype.forEach.call(log.children, function (c) {
          if (c.dataset && c.dataset.seq && Number(c.dataset.seq) <= a.afterSeq) after = c;
        });
        // Past every app already placed after that message.
        while (after && after.nextSibling && after.nextSibling.dataset && after.nextSibling.dataset.appAfter !== undefined) after = after.nextSibling;
        if (after && after.nextSibling) log.insertBefore(holder, after.nextSibling);
        else log.appendChild(holder);
        show(a.id, holder, onMessage);
      });
    });
  }

  window.SBTeamApps = { show: show, restore: restore };
})();
