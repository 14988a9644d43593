#!/usr/bin/env bash
# All tests: format, lints, unit tests, and the privileged integration tests
# (they run for real as root on a BTF kernel, and skip with a printed reason
# otherwise).  This is the README's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."

# `took NAME`: the seconds since the last mark, one line at the end (CI must
# stay under 30 minutes: this says where the time went).
times=""
mark=$SECONDS
took() {
    times+="$1 $((SECONDS - mark)) s, "
    mark=$SECONDS
}

bash scripts/setup.sh
took setup
cargo fmt --all -- --check
# The BPF C style (.clang-format); vmlinux.h is generated.
clang-format --dry-run --Werror bpf/*.c bpf/*.h bpf/core/*.c bpf/core/*.h
took lints
# Clippy, the build and the test binaries in one compile: clippy-driver
# compiles the workspace's crates, lints and all (`-D warnings`; the
# dependencies' warnings are capped by cargo), for every cargo command of
# this script, so each dependency is built once.  `cargo clippy` and then
# `cargo build` checked every dependency and built it again: 95 + 89 s of
# a cold run, 113 s this way with the test binaries.  The integration
# tests run the ccload binary this builds.
drv="$(rustc --print sysroot)/bin/clippy-driver"
if [ ! -x "$drv" ]; then
    echo "test.sh: no clippy-driver in the toolchain ($drv): rustup component add clippy" >&2
    exit 2
fi
export RUSTC_WORKSPACE_WRAPPER="$drv"
export RUSTFLAGS="-D warnings"
cargo build --locked --workspace --all-targets
# qemu and the guests' tools for the kernel matrix below, before the unit
# tests: xtask's boot-failure test boots a broken kernel with them.
kernels=${CCLOAD_KERNELS-6.1 6.12}
if [ -n "$kernels" ] && [ "$(id -u)" = 0 ]; then
    cargo xtask kernels --tools
fi
took build
log=$(mktemp)
accdir=$(mktemp -d)
trap 'rm -rf "$log" "$accdir"' EXIT
set +e
# --no-fail-fast: every test binary runs and every failure is reported.
# The property tests ("fuzzing", loader/src/fuzz_tests.rs and
# serve/tests.rs) run a bounded number of cases here; docs/testing.md has
# the long run.
export PROPTEST_CASES=${PROPTEST_CASES:-1000}
cargo test --locked --workspace --no-fail-fast --lib --bins --tests -- --test-threads=2 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
took tests
# The controllers' acceptance cells through the emulated link (goodput,
# retransmissions, RTT inflation, time in Recovery against the kernel's CCs
# in the same run), then those of the scenarios acceptance names in `also`
# (flows that share the link, ccpd under heavy random loss, ccpd on LAN
# paths, over a veth pair and through the delay line; every controller on
# a measured LTE trace and a synthetic variable link); docs/lab.md.
# Skipped with a reason where the privileged tests are skipped.
if [ "$(id -u)" = 0 ] && [ -e /sys/kernel/btf/vmlinux ]; then
    # `step NAME CMD...`: CMD's output into the log, then one line
    # `NAME: PASSED` or `NAME: FAILED (exit N)`.
    step() {
        local name=$1 r
        shift
        "$@" 2>&1 | tee -a "$log"
        r=${PIPESTATUS[0]}
        if [ "$r" -ne 0 ]; then
            echo "$name: FAILED (exit $r)" | tee -a "$log"
            rc=1
        else
            echo "$name: PASSED" | tee -a "$log"
        fi
    }
    step acceptance cargo xtask lab check acceptance --quick --out "$accdir/acceptance"
    took acceptance
    # Half a minute of flows, concurrent and killed commands, daemon reloads
    # and kills; the 30-minute run is in docs/testing.md.
    cargo xtask soak --minutes 0.5 --out "$accdir/soak" 2>&1 | tee -a "$log"
    src=${PIPESTATUS[0]}
    if [ "$src" -ne 0 ]; then
        echo "soak: FAILED (exit $src)" | tee -a "$log"
        rc=1
    fi
    took soak
    # Debian 12's own kernels under qemu (TCG): its default 6.1 LTS and the
    # 6.12 it ships, or those CCLOAD_KERNELS names (empty: none), the
    # behaviour subset in each guest, which shares this host's filesystem
    # (docs/testing.md, "Other kernels").  About 275 s for the two, one
    # after the other.
    if [ -n "$kernels" ]; then
        kargs=()
        for k in $kernels; do kargs+=(--kernel "$k"); done
        step kernels cargo xtask kernels "${kargs[@]}" --out "$accdir/kernels"
        took kernels
    else
        echo "SKIPPED kernels: CCLOAD_KERNELS is empty" | tee -a "$log"
    fi
    # One binary, one layout: a plain `cargo build` (ccload alone, as the
    # README's first command runs it) after the workspace's build rebuilds
    # nothing that changes the layouts and objects.  Then the README's first
    # command, as a new user runs it, its runs shortened.
    ids() { target/debug/ccload algos --json | grep -Eo '"(algo|layout_id|obj_id)":"[^"]*"' | tr '\n' ' '; }
    test_ids=$(ids)
    cargo build --locked -q
    prod_ids=$(ids)
    if [ -n "$test_ids" ] && [ "$test_ids" = "$prod_ids" ]; then
        echo "layouts: PASSED (workspace build and cargo build: $prod_ids)" | tee -a "$log"
    else
        echo "layouts: FAILED (workspace build: ${test_ids:-none}; cargo build: ${prod_ids:-none})" | tee -a "$log"
        rc=1
    fi
    took layouts
    step demo env DEMO_SECS=4 bash scripts/demo.sh
    took demo
    # Nothing of ours may outlive the suite: no pins, and no struct_ops map
    # of our controllers once their last sockets are gone (bounded wait).
    left=""
    for _ in $(seq 60); do
        left=$(bpftool -j struct_ops list 2>/dev/null |
            grep -Eo '"name":"(ccpd|hetcp|ctcp_plus|ub_reno)[^"]*"' || true)
        [ -z "$left" ] && [ ! -e /sys/fs/bpf/ccload ] && break
        sleep 1
    done
    # ...and no network namespace of ours (`ccl-t<pid>-<n>`): every process
    # that made one has ended.
    nsleft=$(ip netns list 2>/dev/null | awk '/^ccl-t[0-9]+-[0-9]+/ {print $1}' | tr '\n' ' ')
    if [ -n "$left" ] || [ -e /sys/fs/bpf/ccload ] || [ -n "$nsleft" ]; then
        echo "leftovers: FAILED (struct_ops: ${left:-none}; pins: $(ls /sys/fs/bpf/ccload 2>/dev/null | tr '\n' ' '); netns: ${nsleft:-none})" | tee -a "$log"
        rc=1
    else
        echo "leftovers: none" | tee -a "$log"
    fi
elif [ "${CCLOAD_REQUIRE_PRIVILEGED:-0}" = 1 ]; then
    echo "acceptance: FAILED (needs root and BTF; CCLOAD_REQUIRE_PRIVILEGED=1)" | tee -a "$log"
    rc=1
else
    echo "SKIPPED acceptance: needs root and /sys/kernel/btf/vmlinux" | tee -a "$log"
fi
set -e
# One closing line for the whole run (cargo prints one per test binary).
passed=$(grep -Eo '^test result: .* ([0-9]+) passed' "$log" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
failed=$(grep -Eo '[0-9]+ failed;' "$log" | awk '{s+=$1} END {print s+0}')
# the acceptance check (coexist's cells included) counts as one test
if grep -q '^acceptance: PASSED' "$log"; then passed=$((passed + 1)); fi
if grep -q '^acceptance: FAILED' "$log"; then failed=$((failed + 1)); fi
# the soak and the leftover check count as one test each
if grep -q '^soak: PASSED' "$log"; then passed=$((passed + 1)); fi
if grep -q '^soak: FAILED' "$log"; then failed=$((failed + 1)); fi
if grep -q '^leftovers: FAILED' "$log"; then failed=$((failed + 1)); fi
# the layout comparison, the kernel matrix and the README's first command,
# one test each
for t in layouts kernels demo; do
    if grep -q "^$t: PASSED" "$log"; then passed=$((passed + 1)); fi
    if grep -q "^$t: FAILED" "$log"; then failed=$((failed + 1)); fi
done
if grep -q '^leftovers: none' "$log"; then passed=$((passed + 1)); fi
skipped=$(grep -c '^SKIPPED' "$log" || true)
# What each failed test printed (its eprintln lines and its panic, without
# the backtrace), here at the end: a CI report that keeps only the output's
# head and tail still says why a test failed.
if grep -q '^---- .* stdout ----$' "$log"; then
    echo "failed tests' output (last 25 lines each):"
    awk '/^---- .* stdout ----$/ {if (n) flush(); sec = 1; n = 0; print; next}
        sec && /^(failures:|test result:)/ {flush(); sec = 0; next}
        sec && !/^ +[0-9]+: |^ +at |^stack backtrace:|^note: / {buf[++n] = $0}
        function flush(  i) {for (i = (n > 25 ? n - 24 : 1); i <= n; i++) print "  " buf[i]; n = 0}
        END {if (sec) flush()}' "$log"
fi
echo "time: ${times}total $SECONDS s"
slow=$(awk '/^ +Running /{name=($2 == "unittests") ? $3 : $2}
    /finished in [0-9.]+s/{match($0, /finished in [0-9.]+s/); print substr($0, RSTART + 12, RLENGTH - 13), name}' "$log" |
    sort -rn | head -8 | awk '{printf "%s %.0f s, ", $2, $1}')
echo "slowest test binaries: ${slow%, }"
echo "tests: ${passed} passed, ${failed} failed, ${skipped} skipped"
exit "$rc"
