#!/usr/bin/env bash
# The whole test suite, as CI runs it: install what is missing, start every test service
# on loopback (stopped again on exit, success or failure), check formatting and lints,
# then run every test of the workspace against the real services.
set -euo pipefail
export PATH="$HOME/.cargo/bin:$PATH"
KARPOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$KARPOR_ROOT"
# shellcheck source=scripts/services.sh
source scripts/services.sh

# Each stage says when it starts, seconds into the run: where CI's time goes.
stage() { echo "== $1 (at ${SECONDS}s)"; }
# A clean build gains nothing from incremental data and pays for writing it.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi

install_services
# The services start while the code compiles: they need seconds of CPU, the compiler
# minutes, and nothing uses them before the tests.
services_log="$KARPOR_ROOT/target/services-start.log"
mkdir -p "$KARPOR_ROOT/target"
start_services >"$services_log" 2>&1 &
services=$!
trap 'kill "$services" 2>/dev/null || true; wait "$services" 2>/dev/null || true; stop_services' EXIT

stage "cargo fmt"
cargo fmt --all -- --check
stage "fuzz, 30 s a target"
bash scripts/fuzz.sh 30
# Clippy lints the workspace's crates while they are compiled for the tests: clippy-driver
# is rustc with clippy's lints, so the lint pass and the test build are one compilation
# (`cargo clippy` would compile every crate a second time, in check mode). Every cargo
# command below keeps these two variables, or the workspace's crates build again.
RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
export RUSTC_WORKSPACE_WRAPPER
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
stage "build and clippy (every target, warnings denied)"
cargo test --workspace --all-targets --no-run
stage "test services"
if ! wait "$services"; then
  cat "$services_log" >&2
  echo "the test services did not start" >&2
  exit 1
fi
cat "$services_log" >&2
# shellcheck disable=SC1091
source "$RUN_DIR/env.sh"
# The security, reliability and scale suites run alone afterwards, one after the other:
# they time probes and hand-overs against bounds and load the machine (hostile requests, a
# slowloris swarm, probe storms, several syncers), which would disturb tests beside them.
alone=(security reliability scale)
status=0
stage "tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast -E 'not binary(reliability) and not binary(security) and not binary(scale)' || status=$?
  for suite in "${alone[@]}"; do
    stage "$suite suite"
    # `--workspace` and a filter, not `--test`: the same build as above (one package alone
    # unifies features differently and would rebuild the binary for minutes).
    cargo nextest run --workspace --no-capture -E "binary($suite)" || status=$?
  done
else
  # Without nextest, binaries cannot be left out: their timed tests are skipped by name.
  cargo test --workspace --no-fail-fast -- --skip faults_leave_the_probes_truthful_and_lose_nothing \
    --skip bounded:: --skip connections:: --skip syncers_share_the_clusters || status=$?
  for suite in "${alone[@]}"; do
    echo "== $suite suite"
    cargo test --test "$suite" -- --nocapture || status=$?
  done
fi
stage "done"
exit "$status"
