#!/bin/sh
# Builds the bundled examples into OUT (default /tmp/examples-build), each
# as OUT/<example> (so its process is called by the example's name): all of
# them, or the ones named after OUT. The one recipe: the integration tests,
# `cargo xtask demo` and the benchmarks build examples with this script.
#
#   examples/build.sh [OUT [EXAMPLE...]]
#
# An example's program is <name>.c, <name>.cpp or main.rs in its folder
# (other files, such as two-lock-race's noise library, are not part of it),
# compiled -g -O1 as its README says. Warnings are errors here, so a change
# that introduces one is caught.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/examples-build}
[ $# -gt 0 ] && shift
mkdir -p "$out"
if [ $# -eq 0 ]; then
    set --
    for dir in "$here"/*/; do
        set -- "$@" "$(basename "$dir")"
    done
    all=yes
else
    all=no
fi
for name in "$@"; do
    dir=$here/$name
    stem=$(echo "$name" | tr - _)
    if [ -f "$dir/$stem.c" ]; then
        cc -g -O1 -pthread -Wall -Wextra -Werror -o "$out/$name" "$dir/$stem.c" -lm
    elif [ -f "$dir/$stem.cpp" ]; then
        g++ -std=c++17 -g -O1 -pthread -Wall -Wextra -Werror -o "$out/$name" "$dir/$stem.cpp"
    elif [ -f "$dir/main.rs" ]; then
        rustc -g -C opt-level=1 --edition 2021 --crate-name "$stem" -D warnings \
            -o "$out/$name" "$dir/main.rs"
    else
        echo "build.sh: $name is not an example (no $stem.c, $stem.cpp or main.rs in $dir)" >&2
        exit 2
    fi
done
if [ "$all" = yes ]; then
    # Measurement aid for two-lock-race only (LD_PRELOAD scheduling noise),
    # not part of any program.
    cc -O1 -shared -fPIC -Wall -Wextra -Werror -o "$out/sched_noise.so" \
        "$here/two-lock-race/sched_noise.c" -ldl
    echo "built $* (and sched_noise.so) in $out"
fi
