#!/usr/bin/env bash
# Builds the libFuzzer targets in tests/fuzz and runs each for a while.
#
#   tests/fuzz/run.sh [SECONDS_PER_TARGET]     (default 30)
#   tests/fuzz/run.sh --build-only
#
# Environment: BUILD (build directory, default /tmp/redsem-build-fuzz), CC/CXX (default clang,
# else clang-14), JOBS (parallel build jobs, and targets fuzzed at once; default 2), TARGETS
# (default: all four), CCACHE=1 (compile through ccache).
# Needs clang with libFuzzer (Debian 12: clang-14 libclang-rt-14-dev), cmake, libfmt-dev,
# nlohmann-json3-dev and libhiredis-dev.
#
# Each target fuzzes a copy of its committed seed corpus (tests/fuzz/corpus/<target>), made in
# $BUILD/corpus/<target>, so the checkout is never written to; crashing inputs land in
# $BUILD/artifacts/<target>/ and the full output in $BUILD/logs/<target>.log. Prints one line
# per target, "fuzz_url: N runs, 0 crashes", and exits 1 if any target crashed.
set -euo pipefail

build_only=0
if [[ ${1:-} == --build-only ]]; then
    build_only=1
    shift
fi
seconds=${1:-30}
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1)); then
    echo "usage: $0 [SECONDS_PER_TARGET]" >&2
    exit 64
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${BUILD:-/tmp/redsem-build-fuzz}
JOBS=${JOBS:-2}
TARGETS=${TARGETS:-fuzz_url fuzz_duration fuzz_name fuzz_reply}

pick() {
    local candidate
    for candidate in "$@"; do
        if command -v "$candidate" >/dev/null 2>&1; then
            echo "$candidate"
            return
        fi
    done
    echo "$1"
}
export CC=${CC:-$(pick clang clang-14)}
export CXX=${CXX:-$(pick clang++ clang++-14)}

echo "== building into $BUILD with $CXX"
mkdir -p "$BUILD"
launcher=()
if [[ ${CCACHE:-0} == 1 ]]; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$here" -B "$BUILD" "${launcher[@]}" >"$BUILD/configure.log" 2>&1 || {
    cat "$BUILD/configure.log" >&2
    exit 2
}
cmake --build "$BUILD" -j "$JOBS" >"$BUILD/build.log" 2>&1 || {
    cat "$BUILD/build.log" >&2
    exit 2
}

if ((build_only)); then
    exit 0
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Fuzzes one target; writes its summary line to $BUILD/logs/<target>.summary and returns 1
# when it crashed.
fuzz() {
    local target=$1
    local corpus="$BUILD/corpus/$target"
    local artifacts="$BUILD/artifacts/$target"
    local log="$BUILD/logs/$target.log"
    rm -rf "$corpus" "$artifacts"
    mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
    if [[ -d $here/corpus/$target ]]; then
        cp -R "$here/corpus/$target/." "$corpus/"
    fi

    echo "== $target: ${seconds}s"
    local status=0
    "$BUILD/$target" -max_total_time="$seconds" -max_len=512 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1 || status=$?

    # libFuzzer ends a clean run with "Done N runs in S second(s)"; after a crash the last
    # status line ("#N ...") tells how far it got.
    local runs=$(sed -n 's/^Done \([0-9][0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
    if [[ -z $runs ]]; then
        runs=$(sed -n 's/^#\([0-9][0-9]*\)[[:space:]].*/\1/p' "$log" | tail -n 1)
    fi
    local crashes=$(find "$artifacts" -type f | wc -l)
    if ((status != 0 && crashes == 0)); then
        crashes=1 # died without writing an input (e.g. a crash while loading the corpus)
    fi
    local line="$target: ${runs:-?} runs, $crashes crash$( ((crashes == 1)) || echo es)"
    echo "$line" >"$BUILD/logs/$target.summary"
    if ((status != 0 || crashes != 0)); then
        echo "$line (exit status $status); log: $log" >&2
        grep -E '^(==[0-9]+==|SUMMARY|.*runtime error|fuzz_[a-z]+: invariant|terminate called|  what\(\)|    #[0-9])' "$log" |
            cut -c 1-240 | head -n 40 >&2 || true
        find "$artifacts" -type f -exec sh -c \
            'for f; do echo "input $f (hex): $(od -An -tx1 -v "$f" | tr -d " \n")"; done' sh {} + >&2
        return 1
    fi
}

# JOBS targets at a time: each libFuzzer run is one process on one core.
failed=0
pids=()
for target in $TARGETS; do
    fuzz "$target" &
    pids+=($!)
    if ((${#pids[@]} >= JOBS)); then
        wait "${pids[0]}" || failed=1
        pids=("${pids[@]:1}")
    fi
done
for pid in "${pids[@]}"; do
    wait "$pid" || failed=1
done
summary=()
for target in $TARGETS; do
    summary+=("$(cat "$BUILD/logs/$target.summary" 2>/dev/null || echo "$target: no result")")
done

echo "== summary (${seconds}s per target)"
printf '%s\n' "${summary[@]}"
exit "$failed"
