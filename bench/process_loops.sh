#!/usr/bin/env bash
# The floor of one process per call: 8 parallel loops of N runs of a command, as
# bench/jobs.sh runs `sbatch` and `atrium sbatch`; prints runs per second.
#
#   N=250 bench/process_loops.sh /bin/true
#   N=125 bench/process_loops.sh target/release/atrium sbatch --hold --wrap true
set -euo pipefail
N=${N:-250}
[[ $# -gt 0 ]] || { echo "usage: bench/process_loops.sh COMMAND [ARGS...]" >&2; exit 2; }
start=$(date +%s%N)
for _ in $(seq 8); do
    ( for _ in $(seq "$N"); do "$@" >/dev/null 2>&1 || true; done ) &
done
wait
end=$(date +%s%N)
echo "$(( 8 * N * 1000000000 / (end - start) ))/s"
