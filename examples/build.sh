#!/bin/sh
# Builds the five flaky examples into OUT (default /tmp/examples-build).
# Warnings are errors here, so a change that introduces one is caught.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/examples-build}
mkdir -p "$out"
for c in index-race/index_race.c commit-after-close/commit_after_close.c \
         cache-expiry/cache_expiry.c counter-atomicity/counter_atomicity.c; do
    cc -g -O1 -pthread -Wall -Wextra -Werror -o "$out/${c%%/*}" "$here/$c"
done
rustc -g -C opt-level=1 --edition 2021 --crate-name rust_config_race -D warnings \
    -o "$out/rust-config-race" "$here/rust-config-race/main.rs"
echo "built index-race commit-after-close cache-expiry counter-atomicity rust-config-race in $out"
