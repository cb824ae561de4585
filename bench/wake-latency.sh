#!/usr/bin/env bash
# How late this machine wakes a sleeping thread (#18): the lateness every precise pacer pays,
# and what perfops' timer learns to aim ahead of (crates/perfops-engine/src/timer.rs).
#
#   bench/wake-latency.sh                 # gaps of 100 µs, 200 µs, 500 µs and 1 ms, on CPU 1
#   GAPS_US="50 100" CPU=0 N=5000 bench/wake-latency.sh
#
# A C loop of N absolute clock_nanosleep()s, GAP apart, timer slack 1 µs, pinned to CPU: for each
# gap, how long after its deadline each sleep returned (p10, p50, p90, p99). No network, no server;
# it only sleeps. Built with cc into bench/out/wake-latency.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GAPS_US=${GAPS_US:-"100 200 500 1000"}
CPU=${CPU:-1}
N=${N:-2000}
for v in $GAPS_US $CPU $N; do [[ $v =~ ^[0-9]+$ ]] || { echo "wake-latency: '$v' is not a whole number" >&2; exit 1; }; done
command -v cc >/dev/null || { echo "wake-latency: cc is missing (apt-get install gcc)" >&2; exit 1; }
mkdir -p "$HERE/out"
bin="$HERE/out/wake-latency"
cc -O2 -o "$bin" -x c - <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
static long ns(struct timespec t) { return t.tv_sec * 1000000000L + t.tv_nsec; }
static int cmp(const void *a, const void *b) { long x = *(const long *)a, y = *(const long *)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
  long gap = atol(argv[1]) * 1000L; int n = atoi(argv[2]);
  long *late = malloc(n * sizeof *late);
  prctl(PR_SET_TIMERSLACK, 1000);
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  long base = ns(t);
  for (int i = 0; i < n; i++) {
    long due = base + (long)(i + 1) * gap;
    struct timespec d = { due / 1000000000L, due % 1000000000L };
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &d, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t);
    late[i] = ns(t) - due;
  }
  qsort(late, n, sizeof *late, cmp);
  printf("| %s µs | %.1f | %.1f | %.1f | %.1f |\n", argv[1], late[n / 10] / 1e3, late[n / 2] / 1e3,
         late[n * 9 / 10] / 1e3, late[n * 99 / 100] / 1e3);
  return 0;
}
C
echo "Wake-up lateness after an absolute clock_nanosleep, $N sleeps per gap, CPU $CPU ($(uname -r)):"
echo
echo "| gap | p10 µs | p50 µs | p90 µs | p99 µs |"
echo "|---:|---:|---:|---:|---:|"
for g in $GAPS_US; do taskset -c "$CPU" "$bin" "$g" "$N"; done
