#!/usr/bin/env bash
# Runs the cargo-fuzz targets in fuzz/ (see fuzz/README.md): one TARGET or all of them, each for
# SECONDS (default 300), one after the other. Installs cargo-fuzz if it is missing.
#
#   scripts/fuzz.sh                    # every target, 5 minutes each
#   scripts/fuzz.sh canonical 60       # one target, one minute
#   scripts/fuzz.sh build              # build every target, run none
#
# The committed seeds in fuzz/corpus/TARGET are read, never written: new inputs go to
# fuzz/work/TARGET (kept between runs, not committed), a crash to fuzz/artifacts/TARGET.
# Extra libFuzzer flags can be given in FUZZ_ARGS, e.g. FUZZ_ARGS='-jobs=2 -workers=2'.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here/fuzz"

targets=(lockfile canonical framing connect allowlist client_hello)
which=${1:-all}
seconds=${2:-300}

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
# cargo fuzz builds with `-Z` flags (the sanitizer); a stable rustc accepts them only with
# RUSTC_BOOTSTRAP=1.
if ! rustc --version | grep -q nightly; then
    export RUSTC_BOOTSTRAP=1
fi

case "$which" in
    all) run=("${targets[@]}") ;;
    build)
        cargo fuzz build
        exit 0
        ;;
    *)
        if [[ ! " ${targets[*]} " == *" $which "* ]]; then
            echo "error: unknown fuzz target \`$which\`" >&2
            echo >&2
            echo "hint: use one of: ${targets[*]}, \`all\` or \`build\`" >&2
            exit 2
        fi
        run=("$which")
        ;;
esac

for t in "${run[@]}"; do
    echo "== $t: $seconds s"
    mkdir -p "work/$t" "artifacts/$t"
    # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
    cargo fuzz run "$t" "work/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -timeout=20 -print_final_stats=1 \
        -artifact_prefix="artifacts/$t/" ${FUZZ_ARGS:-}
done
