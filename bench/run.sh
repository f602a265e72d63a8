#!/usr/bin/env bash
# Switchboard benchmarks (measurements, not timed tests). Writes BENCHMARKS.md.
#
#   bench/run.sh                 build release binaries, run everything, write BENCHMARKS.md
#
# Environment knobs:
#   BENCH_SKIP_BUILD=1   reuse target/release binaries (release builds take minutes)
#   BENCH_SKIP_PEERS=1   don't run scripts/install-peers.sh (use tests/peers as it is)
#   BENCH_N=1000         timed calls per client run      BENCH_WARMUP=50  untimed calls first
#   BENCH_REPEATS=3      runs per client and scenario (interleaved; the median run is kept)
#   BENCH_LONG_N=20000   calls per run in the steady-state stdio scenario (BENCH_LONG_REPEATS=3 runs)
#   BENCH_SECTIONS="calls steady discover rss list gateway team"   which sections to run
#   TEAM_USERS=200 TEAM_ROUNDS=10 TEAM_INSTANCES=1,2   team section: signed-in users, timed
#                        rounds per user (each: tools/list + call echo), instance counts
#                        (every count on a fresh database of one PostgreSQL cluster)
#   GW_N=2000 GW_WARMUP=200 GW_CONC=32 GW_CONC_N=4000 GW_REPEATS=$BENCH_REPEATS
#   GW_RSS_SERVERS=20    gateway section: sequential calls, warm-up, calls in flight, their
#                        total, runs per scenario; upstreams for the gateway's RSS (0: skip)
#   GW_SCENARIOS="direct direct-http relay relay-loop gateway-stdio gateway-http supergateway mcp-proxy"
#   GW_RUST_CLIENT=1     gateway section: drive every HTTP scenario with switchboard-bench too
#   GW_ALT_SBS="base=PATH …"  gateway section: other `switchboard` builds (say, of the commit
#                        before) run as gateway-stdio@base / gateway-http@base, interleaved
#                        with the rest, plus their own RSS run with GW_RSS_SERVERS upstreams;
#                        a PATH named switchboard-gateway* (the lean gateway binary) is run
#                        without the `gateway` subcommand
#   BENCH_RUNS=3         runs per discovery scenario (the median is kept)
#   BENCH_OUT=path       where to write the report (default BENCHMARKS.md). The generated
#                        block holds only the sections that ran: to measure one section
#                        alone (e.g. BENCH_SECTIONS=team) without dropping the others from
#                        BENCHMARKS.md, point BENCH_OUT at another file.
#   BENCH_LIST_RUNS=5    hyperfine runs per `mcp list` scenario (BENCH_NO_HYPERFINE=1: date loop)
#   BENCH_QUIET_WAIT=900 before each section, wait up to this many seconds for the machine
#   BENCH_QUIET_PCT=25   to be under this % CPU busy for 3 s (0 s: don't wait)
#   BENCH_COMMIT=text    what to print as the commit (default: git rev-parse of this tree)
#   BENCH_RESULTS=path   also keep the raw results (JSON lines; bench/report.py renders them)
#
# What it does, all on 127.0.0.1: starts server-everything (Streamable HTTP) and the
# demo server (Streamable HTTP); runs Switchboard's client (switchboard-bench calls), the
# official TS SDK client (bench/peers/ts_client.mjs) and the official Python SDK client
# (bench/peers/py_client.py) against the same servers, and over stdio against the same
# server programs (Switchboard twice: on the multi-thread tokio runtime the CLI uses, and
# on a current-thread runtime); then discovery wall time for 1/5/20 stdio demo servers (0 ms and
# 1000 ms start-up delay), `switchboard mcp list` with 20 Python-SDK stdio servers (and,
# as a Gemini-CLI-like baseline, the same 20 servers connected serially with the TS SDK:
# bench/peers/ts_serial_list.mjs), and host peak RSS with 20 servers; the team section
# (issue 11): TEAM_USERS users signed in through the real OpenID provider, each listing the
# demo server's tools and calling `echo` through `switchboard serve --team`, against 1
# instance and 2 on one PostgreSQL (`switchboard-bench team`, which starts the cluster,
# the provider, the demo server and the instances itself). Every server it starts is
# killed on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

N="${BENCH_N:-1000}"
LONG_N="${BENCH_LONG_N:-20000}"
SECTIONS="${BENCH_SECTIONS:-calls steady discover rss list gateway team}"
has_section() { [[ " $SECTIONS " == *" $1 "* ]]; }
WARMUP="${BENCH_WARMUP:-50}"
REPEATS="${BENCH_REPEATS:-3}"
RUNS="${BENCH_RUNS:-3}"
OUT="${BENCH_OUT:-$ROOT/BENCHMARKS.md}"

PEERS="$ROOT/tests/peers"
PY="$PEERS/.venv/bin/python"
EVERYTHING="$PEERS/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
PY_SERVER="$PEERS/python/server.py"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
REL="$TARGET_DIR/release"
SB="$REL/switchboard"
BENCH="$REL/switchboard-bench"
DEMO="$REL/switchboard-demo-server"

say() { echo "bench: $*" >&2; }
die() {
  echo "bench: ERROR: $*" >&2
  exit 1
}

LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/switchboard-bench.XXXXXX")"
RESULTS="$WORK/results.jsonl"
: >"$RESULTS"
SERVER_PIDS=()

cleanup() {
  local pid
  for pid in "${SERVER_PIDS[@]}"; do
    # Each server runs in its own session/process group (setsid): stop the group.
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${SERVER_PIDS[@]}"; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- build and peers
if [ "${BENCH_SKIP_BUILD:-0}" != "1" ]; then
  say "building release binaries (slow on small machines)"
  cargo build --release -p switchboard-cli -p switchboard-bench -p switchboard-demo-server
fi
NEED_BINS=("$SB")
# The demo server's own binary serves HTTP for the calls and team sections and the gateway
# section's HTTP floor; the Rust bench runs in every section (in the gateway section as
# the relay floor and the second HTTP client).
if has_section calls || has_section team || has_section gateway; then NEED_BINS+=("$DEMO"); fi
NEED_BINS+=("$BENCH")
for b in "${NEED_BINS[@]}"; do
  [ -x "$b" ] || die "$b is missing: run without BENCH_SKIP_BUILD=1"
done
if [ "${BENCH_SKIP_PEERS:-0}" != "1" ]; then
  "$ROOT/scripts/install-peers.sh" >&2
fi
[ -f "$EVERYTHING" ] || die "server-everything is not installed ($EVERYTHING)"
[ -x "$PY" ] || die "the Python venv is not installed ($PY)"
command -v node >/dev/null || die "node is not on PATH"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

wait_port() {
  local port="$1" what="$2" log="$3"
  for _ in $(seq 1 150); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  cat "$log" >&2 || true
  die "$what did not listen on 127.0.0.1:$port"
}

# Starts "$@" in its own session (so the whole group can be killed), logging to $WORK.
start_server() {
  local name="$1"
  shift
  setsid "$@" >"$WORK/$name.log" 2>&1 &
  SERVER_PIDS+=("$!")
}

# ---------------------------------------------------------------- servers
if has_section calls; then
  EV_PORT="$(free_port)"
  start_server everything-http env PORT="$EV_PORT" \
    NODE_OPTIONS="--require $PEERS/node/bind-loopback.cjs" node "$EVERYTHING" streamableHttp
  wait_port "$EV_PORT" "server-everything" "$WORK/everything-http.log"
  if ss -ltn 2>/dev/null | grep -E "(0\.0\.0\.0|\*|\[::\]):$EV_PORT\b" >/dev/null; then
    die "server-everything is listening on all interfaces; the loopback preload did not apply"
  fi

  DEMO_PORT="$(free_port)"
  start_server demo-http "$DEMO" http --host 127.0.0.1 --port "$DEMO_PORT"
  wait_port "$DEMO_PORT" "the demo server" "$WORK/demo-http.log"

  EV_URL="http://127.0.0.1:$EV_PORT/mcp"
  DEMO_URL="http://127.0.0.1:$DEMO_PORT/mcp"
  say "server-everything at $EV_URL, demo server at $DEMO_URL"
fi

# CPU busy % of the whole machine over one second (from /proc/stat).
busy_pct() {
  local a b
  a=($(head -1 /proc/stat))
  sleep 1
  b=($(head -1 /proc/stat))
  local idle=$(((b[4] + b[5]) - (a[4] + a[5])))
  local total=0 i
  for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
  [ "$total" -gt 0 ] || total=1
  echo $((100 - 100 * idle / total))
}

# On a shared machine, wait (at most BENCH_QUIET_WAIT seconds) until the CPUs have
# been under BENCH_QUIET_PCT % busy for 3 s in a row, and record how busy it was.
wait_quiet() {
  local section="$1" limit="${BENCH_QUIET_WAIT:-900}" pct="${BENCH_QUIET_PCT:-25}"
  local start=$SECONDS calm=0 b
  b="$(busy_pct)"
  [ "$b" -le "$pct" ] && calm=1
  while [ "$calm" -lt 3 ] && [ $((SECONDS - start)) -lt "$limit" ]; do
    b="$(busy_pct)"
    if [ "$b" -le "$pct" ]; then
      calm=$((calm + 1))
    else
      calm=0
    fi
  done
  local waited=$((SECONDS - start))
  [ "$calm" -ge 3 ] || [ "$limit" -eq 0 ] ||
    say "the machine stayed busy (${b}% CPU) for ${limit}s; measuring $section anyway"
  record quiet "$(printf '{"section":"%s","busy_pct":%s,"waited_s":%s,"quiet":%s}' "$section" "$b" "$waited" "$([ "$calm" -ge 3 ] && echo true || echo false)")"
}

record() {
  # record KIND JSON: one line of results for bench/report.py
  printf '{"kind":"%s","data":%s}\n' "$1" "$2" >>"$RESULTS"
}

# ---------------------------------------------------------------- calls
run_client() {
  # run_client CLIENT TRANSPORT TARGET N KIND
  local client="$1" transport="$2" target="$3" n="$4" kind="$5"
  local where=() run=() out
  if [ "$transport" = http ]; then
    if [ "$target" = everything ]; then where=(--url "$EV_URL"); else where=(--url "$DEMO_URL"); fi
  elif [ "$target" = everything ]; then
    where=(--command node --arg "$EVERYTHING" --arg stdio)
  else
    where=(--command "$SB" --arg demo-server)
  fi
  case "$client" in
    switchboard | switchboard-ct)
      local rt=multi
      [ "$client" = switchboard-ct ] && rt=current
      run=("$BENCH" calls --runtime "$rt" --switchboard "$SB")
      # The Rust bench spawns the stdio server itself (from --target); it only needs --url.
      [ "$transport" = http ] && run+=("${where[@]}")
      ;;
    ts) run=(node "$ROOT/bench/peers/ts_client.mjs" "${where[@]}") ;;
    python) run=("$PY" "$ROOT/bench/peers/py_client.py" "${where[@]}") ;;
  esac
  if ! out="$("${run[@]}" --transport "$transport" --target "$target" --n "$n" --warmup "$WARMUP" 2>>"$WORK/clients.log")" ||
    [ -z "$out" ]; then
    tail -20 "$WORK/clients.log" >&2
    die "$client $transport $target failed"
  fi
  say "  $client $transport $target: $out"
  record "$kind" "$(printf '{"client":"%s","transport":"%s","target":"%s","result":%s}' "$client" "$transport" "$target" "$out")"
}

if has_section calls; then
  for scenario in "stdio demo" "stdio everything" "http demo" "http everything"; do
    read -r transport target <<<"$scenario"
    wait_quiet "calls $transport $target"
    say "calls: $transport / $target ($REPEATS x $N calls per client, interleaved)"
    for _ in $(seq 1 "$REPEATS"); do
      for client in switchboard ts python switchboard-ct; do
        run_client "$client" "$transport" "$target" "$N" calls
      done
    done
  done
fi

# ---------------------------------------------------------------- steady state
# The same stdio loop against the demo server, but long (BENCH_LONG_N calls): the TS
# client's JIT warms up within the first few thousand calls, so short runs flatter us.
if has_section steady; then
  wait_quiet "steady stdio demo"
  say "steady state: stdio / demo (${BENCH_LONG_REPEATS:-3} x $LONG_N calls per client, interleaved)"
  for _ in $(seq 1 "${BENCH_LONG_REPEATS:-3}"); do
    for client in switchboard ts python; do
      run_client "$client" stdio demo "$LONG_N" steady
    done
  done
fi

# ---------------------------------------------------------------- discovery
if has_section discover; then
  for delay in 0 1000; do
    wait_quiet "discover ${delay} ms"
    for servers in 1 5 20; do
      say "discover: $servers servers, ${delay} ms start-up delay"
      out="$("$BENCH" discover --servers "$servers" --delay-ms "$delay" --runs "$RUNS" --switchboard "$SB")" ||
        die "discover ($servers servers, $delay ms) failed"
      say "  $out"
      record discover "$out"
    done
  done
fi

# ---------------------------------------------------------------- host RSS
if has_section rss; then
  wait_quiet rss
  say "rss: host with 20 demo servers"
  out="$("$BENCH" rss --servers 20 --switchboard "$SB")" || die "rss failed"
  say "  $out"
  record rss "$out"
fi

# ---------------------------------------------------------------- team
if has_section team; then
  wait_quiet team
  say "team: ${TEAM_USERS:-200} signed-in users, instances ${TEAM_INSTANCES:-1,2} (PostgreSQL)"
  out="$("$BENCH" team --users "${TEAM_USERS:-200}" --rounds "${TEAM_ROUNDS:-10}" \
    --instances "${TEAM_INSTANCES:-1,2}" --switchboard "$SB" --demo "$DEMO")" || die "team failed"
  say "  $out"
  record team "$out"
fi

# ---------------------------------------------------------------- mcp list
# Settings with COUNT stdio servers, in a fresh SWITCHBOARD_HOME; run from an empty
# project folder so no project settings apply.
make_home() {
  local home="$1" count="$2" kind="$3" i sep=""
  mkdir -p "$home"
  {
    printf '{"mcpServers": {\n'
    for i in $(seq 1 "$count"); do
      if [ "$kind" = python ]; then
        printf '%s  "py%02d": {"command": "%s", "args": ["%s", "--transport", "stdio"]}' "$sep" "$i" "$PY" "$PY_SERVER"
      else
        printf '%s  "demo%02d": {"command": "%s", "args": ["demo-server"]}' "$sep" "$i" "$SB"
      fi
      sep=$',\n'
    done
    printf '\n}}\n'
  } >"$home/settings.json"
}
mkdir -p "$WORK/project"

# Peak RSS of the command itself, not of its children: polls /proc/PID/status every
# 5 ms while it runs (GNU time's %M would report the largest reaped child, i.e. a
# server). Prints "VmHWM RssAnon RssFile" in kB, the last two from the sample with the
# largest VmRSS.
peak_rss_kb() {
  python3 - "$@" <<'PY'
import subprocess, sys, time
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
hwm, best_rss, anon, file_ = 0, -1, 0, 0
while p.poll() is None:
    try:
        with open(f"/proc/{p.pid}/status") as f:
            d = {k: int(v.split()[0]) for k, _, v in (l.partition(":") for l in f) if v.strip().endswith("kB")}
        hwm = max(hwm, d.get("VmHWM", 0))
        if d.get("VmRSS", 0) > best_rss:
            best_rss, anon, file_ = d["VmRSS"], d.get("RssAnon", 0), d.get("RssFile", 0)
    except (OSError, KeyError, ValueError):
        pass
    time.sleep(0.005)
print(hwm, anon, file_)
PY
}

# time_cmd LABEL COUNT KIND RSS_KB CMD...: wall time of CMD (hyperfine if installed, else
# a `date +%s%N` loop), run from the empty project folder; recorded as a `list` result.
time_cmd() {
  local label="$1" count="$2" kind="$3" rss_kb="$4"
  shift 4
  local cmd
  cmd="$(printf '%q ' "$@")"
  if [ "${BENCH_NO_HYPERFINE:-0}" != 1 ] && command -v hyperfine >/dev/null; then
    (cd "$WORK/project" && hyperfine --style none --warmup 1 --runs "${BENCH_LIST_RUNS:-5}" \
      --export-json "$WORK/list-$label.json" "$cmd" >&2)
    record list "$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print(json.dumps({"label": sys.argv[2], "servers": int(sys.argv[3]), "kind": sys.argv[4], "tool": "hyperfine",
  "mean_s": r["mean"], "stddev_s": r["stddev"], "median_s": r["median"], "min_s": r["min"], "max_s": r["max"],
  "runs": len(r["times"]), "user_s": r["user"], "system_s": r["system"],
  "max_rss_kb": int(sys.argv[5])}))' "$WORK/list-$label.json" "$label" "$count" "$kind" "$rss_kb")"
  else
    local times=() t0 t1
    for _ in $(seq 1 "${BENCH_LIST_RUNS:-5}"); do
      t0="$(date +%s%N)"
      (cd "$WORK/project" && "$@" >/dev/null 2>&1)
      t1="$(date +%s%N)"
      times+=("$(((t1 - t0) / 1000000))")
    done
    record list "$(python3 -c '
import json, statistics, sys
t = [int(x) / 1000 for x in sys.argv[5:]]
print(json.dumps({"label": sys.argv[1], "servers": int(sys.argv[2]), "kind": sys.argv[3], "tool": "date loop",
  "mean_s": statistics.mean(t), "stddev_s": statistics.pstdev(t), "median_s": statistics.median(t),
  "min_s": min(t), "max_s": max(t), "runs": len(t), "max_rss_kb": int(sys.argv[4])}))' "$label" "$count" "$kind" "$rss_kb" "${times[@]}")"
  fi
  say "  $label: $(tail -1 "$RESULTS")"
}

measure_list() {
  # measure_list LABEL COUNT KIND
  local label="$1" count="$2" kind="$3" home="$WORK/home-$1" connected rss_kb anon_kb file_kb
  make_home "$home" "$count" "$kind"
  wait_quiet "mcp list $label"
  connected="$(cd "$WORK/project" && SWITCHBOARD_HOME="$home" "$SB" mcp list --json 2>/dev/null |
    python3 -c 'import json,sys; print(sum(1 for s in json.load(sys.stdin)["servers"] if s.get("status") == "connected"))')"
  [ "$connected" = "$count" ] || die "mcp list ($label): only $connected of $count servers connected"
  read -r rss_kb anon_kb file_kb < <(cd "$WORK/project" && SWITCHBOARD_HOME="$home" peak_rss_kb "$SB" mcp list)
  record rss_split "$(printf '{"label":"%s","vm_hwm_kb":%s,"rss_anon_kb":%s,"rss_file_kb":%s}' "$label" "$rss_kb" "$anon_kb" "$file_kb")"
  time_cmd "$label" "$count" "$kind" "$rss_kb" env SWITCHBOARD_HOME="$home" "$SB" mcp list
}

if has_section list; then
  say "mcp list: 1 and 20 Python-SDK stdio servers, 20 demo servers"
  measure_list py1 1 python
  measure_list py20 20 python
  # The same 20 servers connected one after another with the TS SDK, as Gemini CLI's
  # `gemini mcp list` does (Gemini CLI itself cannot run here), right after the above.
  say "serial baseline: TS SDK client, 20 Python-SDK stdio servers one after another"
  time_cmd ts-serial-py20 20 python 0 node "$ROOT/bench/peers/ts_serial_list.mjs" --servers 20 \
    --command "$PY" --arg "$PY_SERVER" --arg --transport --arg stdio
  measure_list demo20 20 demo
fi

# ---------------------------------------------------------------- gateway
# `switchboard gateway` against the demo server (`switchboard demo-server`, stdio) as its
# one upstream, driven by the TS SDK client (bench/peers/ts_gateway_client.mjs): GW_N
# sequential `echo` calls, then GW_CONC_N calls with GW_CONC in flight. Scenarios,
# interleaved GW_REPEATS times (bench/report.py keeps the median of each number):
#   direct        the client spawns the demo server itself (stdio)
#   direct-http   the demo server over Streamable HTTP itself (`switchboard-demo-server
#                 http`): the floor for any HTTP path, with no process behind it
#   relay         the client spawns `switchboard-bench relay`, which only copies bytes to
#                 and from the demo server: the floor for any process in the middle
#   relay-loop    the same copy on one tokio task and its reactor (`relay --event-loop`):
#                 the floor for a process that waits on epoll as the gateway does
#   gateway-stdio the client spawns `switchboard gateway`, which spawns the demo server
#   gateway-http  `switchboard gateway --http` (bearer token), demo server over stdio
#   supergateway  npm supergateway (stateful stdio→Streamable HTTP), same upstream
#   mcp-proxy     npm mcp-proxy (Streamable HTTP endpoint), same upstream
# Neither proxy can serve stdio (supergateway: "stdio→stdio not supported"; mcp-proxy
# only listens on HTTP), so they are compared with the gateway's --http. The RSS of each
# proxy process (not of its upstream) is read after the calls. Each HTTP scenario is then
# driven by Switchboard's Rust client too (SCENARIO/rust; GW_RUST_CLIENT=0 skips it), since
# the Node client's HTTP stack caps every HTTP path at a few hundred calls/s. Then the gateway's RSS
# with GW_RSS_SERVERS demo servers (stdio) configured: after every one has served a call.
if has_section gateway; then
  GW_N="${GW_N:-2000}"
  GW_WARMUP="${GW_WARMUP:-200}"
  GW_CONC="${GW_CONC:-32}"
  GW_CONC_N="${GW_CONC_N:-4000}"
  GW_REPEATS="${GW_REPEATS:-$REPEATS}"
  GW_RSS_SERVERS="${GW_RSS_SERVERS:-20}"
  GW_SCENARIOS="${GW_SCENARIOS:-direct direct-http relay relay-loop gateway-stdio gateway-http supergateway mcp-proxy}"
  GW_RUST_CLIENT="${GW_RUST_CLIENT:-1}"
  PROXIES="$PEERS/clients/node_modules"
  SUPERGATEWAY="$PROXIES/supergateway/dist/index.js"
  MCP_PROXY="$PROXIES/mcp-proxy/dist/bin/mcp-proxy.mjs"
  [ -f "$SUPERGATEWAY" ] || die "supergateway is not installed ($SUPERGATEWAY): run scripts/install-peers.sh"
  [ -f "$MCP_PROXY" ] || die "mcp-proxy is not installed ($MCP_PROXY): run scripts/install-peers.sh"
  GW_DRIVER=(node "$ROOT/bench/peers/ts_gateway_client.mjs" --n "$GW_N" --warmup "$GW_WARMUP"
    --concurrency "$GW_CONC" --conc-n "$GW_CONC_N")
  GW_HOME="$WORK/home-gw1"
  mkdir -p "$GW_HOME" "$WORK/project"
  printf '{"mcpServers": {"demo": {"command": "%s", "args": ["demo-server"]}}}\n' "$SB" >"$GW_HOME/settings.json"
  GW_TOKEN="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
  printf '%s\n' "$GW_TOKEN" >"$WORK/gw-token"
  chmod 600 "$WORK/gw-token"

  # stop_server PID: stops one server started with start_server (its whole group).
  stop_server() {
    kill -TERM -- "-$1" 2>/dev/null || true
    for _ in $(seq 1 30); do
      kill -0 "$1" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
  }

  # gw_run SCENARIO DRIVER-ARGS...: one driver run, recorded as a `gateway` result.
  gw_run() {
    local scenario="$1" out
    shift
    if ! out="$(cd "$WORK/project" && "${GW_DRIVER[@]}" --label "$scenario" "$@" 2>>"$WORK/gateway-clients.log")" ||
      [ -z "$out" ]; then
      tail -20 "$WORK/gateway-clients.log" >&2
      die "gateway benchmark: $scenario failed"
    fi
    say "  $scenario: $out"
    record gateway "$out"
  }

  # gw_rust LABEL URL TOOL [--token T]: the same calls from Switchboard's own client
  # (`switchboard-bench calls`, rmcp + reqwest), which is not the bottleneck the Node
  # client is over HTTP. `--session true`: the initialize handshake with a session, as
  # the TS SDK 1.x client does (a proxy may serve the stateless 2026-07-28 revision in
  # a slower way of its own). Recorded in the driver's shape.
  gw_rust() {
    local label="$1" url="$2" tool="$3" out
    shift 3
    if ! out="$("$BENCH" calls --transport http --target demo --url "$url" --session true "$@" \
      --tool "$tool" --n "$GW_N" --warmup "$GW_WARMUP" --concurrency "$GW_CONC" \
      --conc-n "$GW_CONC_N" 2>>"$WORK/gateway-clients.log")" || [ -z "$out" ]; then
      tail -20 "$WORK/gateway-clients.log" >&2
      die "gateway benchmark: $label failed"
    fi
    out="$(printf '%s' "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
keys = ("n", "calls_per_s", "p50_ms", "p99_ms")
print(json.dumps({"label": sys.argv[1], "client": "switchboard", "protocol": d["protocol"],
                  "seq": {k: d[k] for k in keys}, "conc": d["conc"]}))' "$label")"
    say "  $label: $out"
    record gateway "$out"
  }

  # gw_http SCENARIO TOOL SERVER-CMD...: starts an HTTP server on a free port ({PORT} in
  # SERVER-CMD), drives it, reads its RSS, stops it.
  gw_http() {
    local scenario="$1" tool="$2" port pid token_args=()
    shift 2
    port="$(free_port)"
    start_server "$scenario" "${@//\{PORT\}/$port}"
    pid="${SERVER_PIDS[-1]}"
    [[ "$scenario" == gateway-http* ]] && token_args=(--token "$GW_TOKEN")
    gw_run "$scenario" --transport http --url "http://127.0.0.1:$port/mcp" "${token_args[@]}" \
      --tool "$tool" --rss-pid "$pid"
    if [ "$GW_RUST_CLIENT" = 1 ]; then
      gw_rust "$scenario/rust" "http://127.0.0.1:$port/mcp" "$tool" "${token_args[@]}"
    fi
    if ss -ltn 2>/dev/null | grep -E "(0\.0\.0\.0|\*|\[::\]):$port\b" >/dev/null; then
      die "$scenario listened on all interfaces"
    fi
    stop_server "$pid"
  }

  # gw_alt TAG: the `switchboard` binary GW_ALT_SBS names TAG.
  gw_alt() {
    local pair
    for pair in ${GW_ALT_SBS:-}; do
      [ "${pair%%=*}" = "$1" ] && { printf '%s\n' "${pair#*=}"; return; }
    done
    die "gateway scenario @$1: no $1=PATH in GW_ALT_SBS"
  }

  # gw_sub PATH: the driver arguments that start the gateway of PATH (`switchboard
  # gateway`, or the lean `switchboard-gateway` alone).
  gw_sub() {
    case "$(basename "$1")" in
      switchboard-gateway*) ;;
      *) printf '%s\n' gateway ;;
    esac
  }

  gw_scenario() {
    local gw="$SB" tag sub
    case "$1" in
      gateway-stdio@* | gateway-http@*)
        tag="${1#*@}"
        gw="$(gw_alt "$tag")"
        [ -x "$gw" ] || die "GW_ALT_SBS: $gw is not an executable"
        ;;
    esac
    sub="$(gw_sub "$gw")"
    case "$1" in
      gateway-stdio@*)
        gw_run "$1" --transport stdio --command "$gw" ${sub:+--arg "$sub"} \
          --env SWITCHBOARD_HOME="$GW_HOME" --tool demo__echo --rss ;;
      gateway-http@*)
        gw_http "$1" demo__echo env SWITCHBOARD_HOME="$GW_HOME" "$gw" $sub --http \
          --port "{PORT}" --token-file "$WORK/gw-token" ;;
      direct-http)
        gw_http direct-http echo "$DEMO" http --host 127.0.0.1 --port "{PORT}" ;;
      direct)
        gw_run direct --transport stdio --command "$SB" --arg demo-server --tool echo --rss ;;
      relay)
        # The floor: a process that only copies bytes (switchboard-bench relay).
        gw_run relay --transport stdio --command "$BENCH" --arg relay --arg -- --arg "$SB" \
          --arg demo-server --tool echo --rss ;;
      relay-loop)
        gw_run relay-loop --transport stdio --command "$BENCH" --arg relay --arg --event-loop \
          --arg -- --arg "$SB" --arg demo-server --tool echo --rss ;;
      gateway-stdio)
        gw_run gateway-stdio --transport stdio --command "$SB" --arg gateway \
          --env SWITCHBOARD_HOME="$GW_HOME" --tool demo__echo --rss ;;
      gateway-http)
        gw_http gateway-http demo__echo env SWITCHBOARD_HOME="$GW_HOME" "$SB" gateway --http \
          --port "{PORT}" --token-file "$WORK/gw-token" ;;
      supergateway)
        gw_http supergateway echo env NODE_OPTIONS="--require $PEERS/node/bind-loopback.cjs" \
          node "$SUPERGATEWAY" --stdio "$SB demo-server" --outputTransport streamableHttp \
          --stateful --port "{PORT}" --logLevel none ;;
      mcp-proxy)
        gw_http mcp-proxy echo node "$MCP_PROXY" --host 127.0.0.1 --port "{PORT}" \
          --server stream -- "$SB" demo-server ;;
      *) die "unknown gateway scenario $1 (GW_SCENARIOS)" ;;
    esac
  }

  wait_quiet gateway
  record gateway_load "$(printf '{"when":"start","loadavg":"%s"}' "$(cut -d' ' -f1-3 /proc/loadavg)")"
  say "gateway: ${GW_SCENARIOS} ($GW_REPEATS x ($GW_N sequential + $GW_CONC_N at $GW_CONC in flight), interleaved)"
  GW_ALL_SCENARIOS="$GW_SCENARIOS"
  for pair in ${GW_ALT_SBS:-}; do
    GW_ALL_SCENARIOS+=" gateway-stdio@${pair%%=*} gateway-http@${pair%%=*}"
  done
  for _ in $(seq 1 "$GW_REPEATS"); do
    for scenario in $GW_ALL_SCENARIOS; do
      gw_scenario "$scenario"
    done
  done

  if [ "$GW_RSS_SERVERS" -gt 0 ]; then
    say "gateway RSS: $GW_RSS_SERVERS demo servers (stdio) as upstreams"
    make_home "$WORK/home-gw$GW_RSS_SERVERS" "$GW_RSS_SERVERS" demo
    gw_run "gateway-rss-$GW_RSS_SERVERS" --transport stdio --command "$SB" --arg gateway \
      --env SWITCHBOARD_HOME="$WORK/home-gw$GW_RSS_SERVERS" --tool demo01__echo \
      --call-all-suffix __echo --expect-tools "$GW_RSS_SERVERS" --n 500 --conc-n 0 --warmup 0 --rss
    for pair in ${GW_ALT_SBS:-}; do
      sub="$(gw_sub "${pair#*=}")"
      gw_run "gateway-rss-$GW_RSS_SERVERS@${pair%%=*}" --transport stdio --command "${pair#*=}" \
        ${sub:+--arg "$sub"} --env SWITCHBOARD_HOME="$WORK/home-gw$GW_RSS_SERVERS" --tool demo01__echo \
        --call-all-suffix __echo --expect-tools "$GW_RSS_SERVERS" --n 500 --conc-n 0 --warmup 0 --rss
    done
  fi
  record gateway_load "$(printf '{"when":"end","loadavg":"%s"}' "$(cut -d' ' -f1-3 /proc/loadavg)")"
  # The section's numbers (medians, added latency, ratios, targets) as JSON on stdout.
  python3 "$ROOT/bench/report.py" --gateway-json "$RESULTS"
fi

# ---------------------------------------------------------------- report
sb_version="$("$SB" --version 2>/dev/null || echo unknown)"
node_sdk="$(node -p "require('$PEERS/node/node_modules/@modelcontextprotocol/sdk/package.json').version")"
everything_version="$(node -p "require('$PEERS/node/node_modules/@modelcontextprotocol/server-everything/package.json').version")"
py_mcp="$("$PY" -c 'import importlib.metadata as m; print(m.version("mcp"))')"
record machine "$(python3 -c '
import json, sys
keys = ["nproc", "cpu", "kernel", "mem", "date", "rustc", "node", "python", "node_sdk", "everything", "py_mcp",
        "switchboard", "hyperfine", "git", "load_start", "load"]
print(json.dumps(dict(zip(keys, sys.argv[1:]))))' \
  "$(nproc)" \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" \
  "$(uname -sr)" \
  "$(free -g | awk '/^Mem:/ {print $2 " GB"}')" \
  "$(date -u '+%Y-%m-%d %H:%M UTC')" \
  "$(rustc --version 2>/dev/null || echo unknown)" \
  "$(node --version)" \
  "$("$PY" --version 2>&1)" \
  "$node_sdk" "$everything_version" "$py_mcp" "$sb_version" \
  "$(hyperfine --version 2>/dev/null || echo 'not installed (date loop)')" \
  "${BENCH_COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')}" \
  "$LOAD_START" "$(cut -d' ' -f1-3 /proc/loadavg)")"

if [ -n "${BENCH_RESULTS:-}" ]; then
  cp "$RESULTS" "$BENCH_RESULTS"
fi
python3 "$ROOT/bench/report.py" "$RESULTS" "$OUT" "$N" "$WARMUP" "$REPEATS" "$RUNS"
say "wrote $OUT"
