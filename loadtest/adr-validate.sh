#!/usr/bin/env bash
# Validates ADR 0002 (read levels) and ADR 0003 (fast-view projection) by
# measurement: on a fresh data dir, seeds accounts from real mail, starts the
# server in default mode and in each "off" mode on the same data, runs
# adr-0012 and adr-0013 in compare mode, and writes the tables into the
# Consequences of the two ADRs (between the adr-validate markers).
#
# Usage: loadtest/adr-validate.sh [CORPUS_DIR]
# Environment: ACCOUNTS (1000), MESSAGES (100), USERS_PER_HOUR (36000),
#              DURATION (30s), PASSWORD (password).
# The servers run on core 0 and goose on core 1 (taskset), loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
corpus=${1:-$root/../shared/corpus}
accounts=${ACCOUNTS:-1000}
messages=${MESSAGES:-100}
rate=${USERS_PER_HOUR:-36000}
duration=${DURATION:-30s}
password=${PASSWORD:-password}

cargo build --release -p fastview -p fastview-loadtest
bin=${CARGO_TARGET_DIR:-$root/target}/release
data=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$data"; }
trap cleanup EXIT

"$bin/fastview" --data-dir "$data" seed --accounts "$accounts" --messages-per-account "$messages" \
  --from "$corpus" --password "$password"

serve() { # port, extra flags (each server's metrics listener on port + 1000)
  FASTVIEW_LOG=warn taskset -c 0 "$bin/fastview" --data-dir "$data" serve --listen "127.0.0.1:$1" \
    --metrics-listen "127.0.0.1:$(($1 + 1000))" "${@:2}" &
  pids+=($!)
}
serve 18090
serve 18091 --read-levels off
serve 18092 --fast-view off
for port in 18090 18091 18092; do
  for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$((port + 1000))/metrics" && break; sleep 0.1; done
done

run() { # scenario, host B
  taskset -c 1 "$bin/fastview-loadtest" --host http://127.0.0.1:18090 --compare "$2" \
    --scenario "$1" --users-per-hour "$rate" --duration "$duration" \
    --accounts "$accounts" --password "$password"
}
machine="$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
write_adr() { # adr file, scenario, host B, what B is
  local file=$1 table
  table=$(run "$2" "$3")
  echo "$table"
  local block
  block=$(printf '%s\n\n%s\n\n```\n%s\n```\n' \
    "Measured $(date -u +%Y-%m-%d) on $machine; A = default server, B = \`fastview serve $4\`, same data ($accounts accounts × $messages messages)." \
    "Command: \`loadtest/adr-validate.sh\` (ACCOUNTS=$accounts MESSAGES=$messages USERS_PER_HOUR=$rate DURATION=$duration)" \
    "$table")
  BLOCK="$block" python3 - "$file" <<'PY'
import os, sys
path = sys.argv[1]
text = open(path).read()
begin, end = "<!-- adr-validate:begin -->", "<!-- adr-validate:end -->"
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(path, "w").write(head + begin + "\n" + os.environ["BLOCK"] + "\n" + end + tail)
PY
}
write_adr adr/0002-email-get-read-levels.md adr-0012 http://127.0.0.1:18091 "--read-levels off"
write_adr adr/0003-fast-view-projection.md adr-0013 http://127.0.0.1:18092 "--fast-view off"
