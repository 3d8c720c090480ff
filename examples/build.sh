#!/bin/sh
# Builds the five flaky examples and the ordinary programs into OUT
# (default /tmp/examples-build).
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

# Ordinary programs (examples/README.md, "Ordinary programs").
for c in pool-table-race/pool_table_race.c transient-fetch/transient_fetch.c \
         two-lock-race/two_lock_race.c inventory-sixty/inventory_sixty.c \
         svc-stale-cache/svc_stale_cache.c svc-compaction/svc_compaction.c; do
    cc -g -O1 -pthread -Wall -Wextra -Werror -o "$out/${c%%/*}" "$here/$c" -lm
done
g++ -std=c++17 -g -O1 -pthread -Wall -Wextra -Werror -o "$out/heartbeat-auth" \
    "$here/heartbeat-auth/heartbeat_auth.cpp"
rustc -g -C opt-level=1 --edition 2021 --crate-name rust_spawn_closures -D warnings \
    -o "$out/rust-spawn-closures" "$here/rust-spawn-closures/main.rs"
# Measurement aid for two-lock-race only (LD_PRELOAD scheduling noise), not part of any program.
cc -O1 -shared -fPIC -Wall -Wextra -Werror -o "$out/sched_noise.so" "$here/two-lock-race/sched_noise.c" -ldl
echo "built pool-table-race heartbeat-auth transient-fetch two-lock-race inventory-sixty" \
     "rust-spawn-closures svc-stale-cache svc-compaction (and sched_noise.so) in $out"
