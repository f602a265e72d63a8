#!/usr/bin/env bash
# Runs every fuzz target (or those named) for SECONDS each (default 600), one after the
# other, and prints one line per target: executions, crashes, corpus size.
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`); on a stable toolchain it sets
# RUSTC_BOOTSTRAP=1 for libFuzzer's sanitizer flags.
set -euo pipefail
cd "$(dirname "$0")"
export RUSTC_BOOTSTRAP=1
seconds="${SECONDS_EACH:-600}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list)
fi
cargo fuzz build -O >/dev/null 2>&1
mkdir -p logs
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  log="logs/$t.log"
  set +e
  cargo fuzz run -O "$t" "corpus/$t" "seeds/$t" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 >"$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -oE 'Done [0-9]+ runs' "$log" | grep -oE '[0-9]+' || true)
  [ -n "$runs" ] || runs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  crashes=$(find "artifacts/$t" -type f | wc -l)
  corpus=$(find "corpus/$t" -type f | wc -l)
  echo "$t: ${runs:-0} executions in ${seconds}s, $crashes crashes (exit $rc), corpus $corpus"
done
