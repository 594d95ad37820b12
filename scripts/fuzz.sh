#!/usr/bin/env bash
# Runs each fuzz target of tests/fuzz for a bounded time (seconds, default 30), on the
# stable toolchain (no sanitizer: the targets check for panics, which Rust code turns
# every broken invariant into). A crash fails the run and leaves its input under
# tests/fuzz/artifacts/TARGET/; keep it as a regression case under tests/fuzz/corpus
# once fixed.
set -euo pipefail
export PATH="$HOME/.cargo/bin:$PATH"
KARPOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$KARPOR_ROOT"
seconds=${1:-30}
# Pinned: a new cargo-fuzz may change the flags it builds with.
CARGO_FUZZ_VERSION=0.13.2
if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  echo "[fuzz] installing cargo-fuzz $CARGO_FUZZ_VERSION" >&2
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked -q
fi
mkdir -p target
# Outside the clone, as the test services' builds are: the fuzz build's dependencies
# (libFuzzer's flags, release) are compiled once per machine, not once per clone.
fuzz_target_dir=${KARPOR_FUZZ_TARGET_DIR:-$HOME/.cache/karpor-test/fuzz-target}
for fuzz_target in search_parser kubeconfig_import; do
  log="target/fuzz-$fuzz_target.log"
  if cargo fuzz run --fuzz-dir tests/fuzz --target-dir "$fuzz_target_dir" --sanitizer none "$fuzz_target" -- \
    -max_total_time="$seconds" >"$log" 2>&1; then
    echo "[fuzz] $fuzz_target: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log" | tail -n 1), no crash"
  else
    tail -n 40 "$log" >&2
    echo "[fuzz] $fuzz_target: FAILED (input under tests/fuzz/artifacts/$fuzz_target/)" >&2
    exit 1
  fi
done
