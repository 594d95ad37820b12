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

install_services
trap stop_services EXIT
start_services

echo "== cargo fmt"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== fuzz, 30 s a target"
bash scripts/fuzz.sh 30
# The security, reliability and scale suites run alone afterwards, one after the other:
# they time probes and hand-overs against bounds and load the machine (hostile requests, a
# slowloris swarm, probe storms, several syncers), which would disturb tests beside them.
alone=(security reliability scale)
status=0
echo "== tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast -E 'not binary(reliability) and not binary(security) and not binary(scale)' || status=$?
  for suite in "${alone[@]}"; do
    echo "== $suite suite"
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
exit "$status"
