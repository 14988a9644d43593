#!/usr/bin/env bash
# All tests: format, lints, unit tests, and the privileged integration tests
# (they run for real as root on a BTF kernel, and skip with a printed reason
# otherwise).  This is the README's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --locked --workspace --all-targets -- -D warnings
# The integration tests run the ccload binary: build it first.
cargo build --locked --workspace
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --locked --workspace --lib --bins --tests -- --test-threads=2 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
# One closing line for the whole run (cargo prints one per test binary).
passed=$(grep -Eo '^test result: .* ([0-9]+) passed' "$log" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
failed=$(grep -Eo '[0-9]+ failed;' "$log" | awk '{s+=$1} END {print s+0}')
skipped=$(grep -c '^SKIPPED' "$log" || true)
echo "tests: ${passed} passed, ${failed} failed, ${skipped} skipped"
exit "$rc"
