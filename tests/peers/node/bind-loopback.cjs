// Switchboard test preload: force Node servers onto the loopback interface.
//
// @modelcontextprotocol/server-everything has no host option and would bind all
// interfaces. Load this with `node --require ./bind-loopback.cjs` (or through
// NODE_OPTIONS) and every `server.listen(...)` that names no host binds 127.0.0.1.
"use strict";

const net = require("node:net");

const LOOPBACK = "127.0.0.1";
const originalListen = net.Server.prototype.listen;

function isPort(value) {
  return (
    typeof value === "number" ||
    (typeof value === "string" && value !== "" && /^\d+$/.test(value))
  );
}

net.Server.prototype.listen = function listenOnLoopback(...args) {
  const first = args[0];
  if (args.length === 0 || first === undefined || first === null || typeof first === "function") {
    // listen() / listen(cb): random port, all interfaces -> loopback.
    return originalListen.call(this, 0, LOOPBACK, ...args.filter((a) => typeof a === "function"));
  }
  if (isPort(first)) {
    // listen(port[, host][, backlog][, cb])
    if (typeof args[1] !== "string") {
      return originalListen.call(this, first, LOOPBACK, ...args.slice(1));
    }
    return originalListen.apply(this, args);
  }
  if (typeof first === "object" && !(first instanceof net.Server) && !("_handle" in first) && !("fd" in first) && !("path" in first)) {
    // listen(options[, cb])
    if (first.host === undefined || first.host === null || first.host === "") {
      args[0] = { ...first, host: LOOPBACK };
    }
    return originalListen.apply(this, args);
  }
  // Unix socket path, handle or fd: not a network bind; leave it alone.
  return originalListen.apply(this, args);
};
