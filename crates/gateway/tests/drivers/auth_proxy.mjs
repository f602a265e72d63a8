// A pass-through HTTP proxy on 127.0.0.1 that adds `Authorization: Bearer TOKEN` to every
// request (bodies and event streams piped as they come), for clients that cannot send a
// header of their own (the MCP conformance suite's server mode). Every other header,
// `Host` included, goes through unchanged.
//
// Usage: node auth_proxy.mjs PORT TARGET_ORIGIN TOKEN
import http from "node:http";

const [port, target, token] = [Number(process.argv[2]), new URL(process.argv[3]), process.argv[4]];
http
  .createServer((req, res) => {
    const headers = { ...req.headers, authorization: `Bearer ${token}` };
    const options = { host: target.hostname, port: target.port, path: req.url, method: req.method, headers };
    const upstream = http.request(options, (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    });
    upstream.on("error", (e) => {
      res.writeHead(502, { "content-type": "text/plain" });
      res.end(`auth_proxy: ${e}`);
    });
    req.pipe(upstream);
  })
  .listen(port, "127.0.0.1");
