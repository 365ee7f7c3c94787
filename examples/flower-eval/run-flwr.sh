#!/usr/bin/env bash
# `flwr run` of this app on Flower's local simulation runtime (needs flwr[simulation]).
#
# Starts its own `flower-superlink --simulation` on 127.0.0.1:$PORT with a private
# FLWR_HOME (your ~/.flwr is untouched), runs the app on NODES simulated SuperNodes and
# stops that SuperLink by its process id when done. Telemetry, the update check and
# runtime dependency installation are off: the app runs with what this Python has.
#   NODES=200 ./run-flwr.sh            (PYTHON=../../.venv/bin/python by default)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BIN="$(dirname "${PYTHON:-$HERE/../../.venv/bin/python}")"
NODES="${NODES:-200}"
PORT="${PORT:-39291}"
export PATH="$BIN:$PATH"  # the SuperLink starts flower-superexec by name
export FLWR_HOME="$(mktemp -d -t dpledger-flwr-home-XXXXXX)"
export FLWR_TELEMETRY_ENABLED=0 FLWR_DISABLE_UPDATE_CHECK=1
export FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1
cat > "$FLWR_HOME/config.toml" <<TOML
[superlink]
default = "dpledger"

[superlink.dpledger]
address = "127.0.0.1:$PORT"
insecure = true
TOML
"$BIN/flower-superlink" --insecure --simulation --host 127.0.0.1 --port "$PORT" \
  --disable-runtime-dependency-installation --database ":flwr-in-memory:" \
  --log-file "$FLWR_HOME/superlink.log" >/dev/null 2>&1 &
SUPERLINK=$!
trap 'kill "$SUPERLINK" 2>/dev/null || true; wait "$SUPERLINK" 2>/dev/null || true; rm -rf "$FLWR_HOME"' EXIT
for _ in $(seq 60); do   # wait for its HTTP API (at most 30 s)
  if "$BIN/python" -c "import httpx,sys; sys.exit(0 if httpx.get('http://127.0.0.1:$PORT/health', timeout=1).is_success else 1)" 2>/dev/null; then break; fi
  sleep 0.5
done
"$BIN/flwr" run "$HERE" dpledger --stream \
  --federation-config "num-supernodes=$NODES" --run-config "num-nodes=$NODES"
