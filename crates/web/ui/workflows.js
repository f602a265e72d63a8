// Workflows page: the project's workflow files, the runs `switchboard run` saved
// (newest first), and one run's log. A run's UI steps open their MCP App through
// SB.openApp, exactly as the explorer does: the server reads the UI resource from the
// configured server and binds the app session to it.
// URL: /workflows?run=<id>&step=<node> opens that run and renders that step's app.
"use strict";

(function () {
  var el = SB.el;
  var state = { root: null, apps: [], runId: null };

  function fmtMs(ms) { return ms < 10000 ? ms + " ms" : (ms / 1000).toFixed(1) + " s"; }
  function fmtTime(iso) { return (iso || "").replace("T", " ").replace(/\.\d+Z$/, " UTC"); }
  function statusBadge(status) {
    var cls = status === "ok" ? "status-connected" : (status === "failed" ? "status-disconnected" : "");
    return el("span", { class: "badge " + cls, dataset: { runStatus: status || "" } }, status || "?");
  }

  function closeApps() {
    state.apps.forEach(function (a) { try { a.teardown(); } catch (e) { console.error(e); } });
    state.apps = [];
  }

  function renderSidebar(side) {
    SB.clear(side);
    var files = el("div", { class: "wf-files" }, el("p", { class: "muted" }, "loading…"));
    var runs = el("div", { class: "wf-runs" }, el("p", { class: "muted" }, "loading…"));
    side.appendChild(el("div", { class: "side-title" }, "Workflows"));
    side.appendChild(files);
    side.appendChild(el("div", { class: "side-title" }, "Runs"));
    side.appendChild(runs);
    SB.api("GET", "/workflows").then(function (d) {
      SB.clear(files);
      if (!d.workflows.length) {
        files.appendChild(el("p", { class: "muted" }, "No workflow files in " + d.dirs.join(" or ") + "."));
      }
      d.workflows.forEach(function (w) {
        files.appendChild(el("div", { class: "wf-file", dataset: { workflow: w.path }, title: w.error || w.command },
          el("div", { class: "server-name" }, w.name),
          el("div", { class: "server-target" }, w.path + (w.error ? " — " + w.error : " · " + w.nodes + " nodes")),
          w.command ? el("code", { class: "muted" }, w.command) : null));
      });
    }, function (e) { SB.clear(files).appendChild(el("p", { class: "error" }, e.message)); });
    SB.api("GET", "/workflows/runs").then(function (d) {
      SB.clear(runs);
      if (!d.runs.length) {
        runs.appendChild(el("p", { class: "muted" }, "No saved runs yet: `switchboard run FILE` saves each run in " + d.dir + "."));
      }
      d.runs.forEach(function (r) {
        var link = el("a", {
          class: "server-item wf-run" + (r.id === state.runId ? " active" : ""), href: "/workflows?run=" + encodeURIComponent(r.id),
          dataset: { run: r.id },
          onclick: function (e) {
            if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
            e.preventDefault();
            history.pushState(null, "", "/workflows?run=" + encodeURIComponent(r.id));
            show(r.id, null);
          },
        },
          el("div", { class: "server-name" }, statusBadge(r.status), " ", r.workflowName),
          el("div", { class: "server-target" }, fmtTime(r.started) + " · " + r.steps + " steps · " + fmtMs(r.durationMs) +
            (r.failedNode ? " · failed at " + r.failedNode : "") + (r.appNodes.length ? " · " + r.appNodes.length + " app UI" : "")));
        runs.appendChild(link);
      });
    }, function (e) { SB.clear(runs).appendChild(el("p", { class: "error" }, e.message)); });
  }

  function markActive() {
    if (!state.root) return;
    state.root.side.querySelectorAll("[data-run]").forEach(function (a) {
      a.classList.toggle("active", a.dataset.run === state.runId);
    });
  }

  function appCard(a, into) {
    var server = a.appServer;
    var box = el("div", { class: "wf-app", dataset: { appStep: a.node } });
    into.appendChild(box);
    if (!server) {
      box.appendChild(el("div", { class: "warn-box" }, "No configured server here can render this app (it came from " +
        (a.server ? "server `" + a.server + "`" : (a.serverUrl || "an unknown server")) + "). Add that server in Settings."));
      return;
    }
    var app = SB.openApp({
      server: server, resourceUri: a.resourceUri, tool: a.tool, args: a.arguments || {},
      result: a.result, into: box, context: "workflow",
    });
    state.apps.push(app);
  }

  function uiSection(run, main, wanted) {
    if (!run.apps.length) return;
    var list = el("div", { class: "wf-apps" });
    main.appendChild(el("h3", null, "MCP App UIs"));
    main.appendChild(list);
    run.apps.forEach(function (a) {
      var holder = el("div", { class: "wf-app-holder" });
      var open = el("button", {
        type: "button", class: "primary", dataset: { openStep: a.node },
        onclick: function () {
          open.disabled = true;
          history.replaceState(null, "", "/workflows?run=" + encodeURIComponent(run.id) + "&step=" + encodeURIComponent(a.node));
          appCard(a, holder);
        },
      }, "Open app");
      list.appendChild(el("div", { class: "item", dataset: { uiStep: a.node } },
        el("div", { class: "row" }, el("strong", null, a.node), " ",
          el("code", null, (a.server || a.serverUrl || "?") + "." + a.tool), " ",
          el("span", { class: "muted" }, a.resourceUri), el("span", { class: "spacer" }), open),
        holder));
      if (wanted === a.node) { open.disabled = true; appCard(a, holder); }
    });
  }

  function show(id, wanted) {
    closeApps();
    state.runId = id;
    markActive();
    var main = SB.clear(state.root.main);
    if (!id) {
      main.appendChild(el("p", { class: "muted" }, "Pick a run on the left to see its step log and the app UIs it produced."));
      return;
    }
    main.appendChild(el("p", { class: "muted" }, "loading…"));
    SB.api("GET", "/workflows/runs/" + encodeURIComponent(id)).then(function (run) {
      if (state.runId !== id) return;
      SB.clear(main);
      main.dataset.runLoaded = run.id;
      main.appendChild(el("div", { class: "server-head" },
        el("h2", null, statusBadge(run.status), " ", run.workflowName),
        el("div", { class: "muted" }, run.workflowPath),
        el("div", { class: "muted" }, "Started " + fmtTime(run.started) + " · " + fmtMs(run.durationMs))));
      if (run.failure) {
        main.appendChild(el("div", { class: "error-box", dataset: { failedNode: run.failure.node } },
          "Failed at node `" + run.failure.node + "` (" + run.failure.kind + "): " + run.failure.message));
      }
      uiSection(run, main, wanted);
      main.appendChild(el("h3", null, "Steps"));
      var table = el("table", { class: "wf-steps" },
        el("thead", null, el("tr", null, el("th", null, "Node"), el("th", null, "Type"), el("th", null, "Status"), el("th", null, "Time"), el("th", null, "Result"))));
      var tbody = el("tbody");
      run.steps.forEach(function (s) {
        var mark = s.status === "ok" ? "✓" : (s.status === "failed" ? "✗" : "!");
        tbody.appendChild(el("tr", { dataset: { step: s.node, stepStatus: s.status } },
          el("td", null, el("code", null, s.node)), el("td", null, s.kind), el("td", null, mark + " " + s.status),
          el("td", null, fmtMs(s.durationMs)), el("td", { class: "wf-summary" }, s.summary)));
      });
      table.appendChild(tbody);
      main.appendChild(table);
      main.appendChild(el("h3", null, "Inputs"));
      main.appendChild(SB.pre(SB.json(run.inputs)));
      main.appendChild(el("h3", null, "Final variables"));
      main.appendChild(SB.pre(SB.json(run.variables)));
    }, function (e) {
      if (state.runId !== id) return;
      SB.clear(main).appendChild(el("div", { class: "error-box" }, "Cannot load run `" + id + "`: " + e.message));
    });
  }

  SB.pages.workflows = {
    title: "Workflows",
    enter: function (view) {
      var side = el("aside", { class: "sidebar" });
      var main = el("section", { class: "main" });
      view.appendChild(el("div", { class: "split" }, side, main));
      state.root = { side: side, main: main };
      var params = new URLSearchParams(location.search);
      state.runId = params.get("run");
      renderSidebar(side);
      show(params.get("run"), params.get("step"));
    },
    leave: function () {
      closeApps();
      state.root = null;
    },
  };
})();
