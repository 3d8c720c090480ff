/* The tracing benchmark's workload: calls one empty function N times and
 * prints how long each call took, timed inside the process so the tracer's
 * start-up is not counted. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noipa)) long traced(long i) { return i; }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    struct timespec a, b;
    long sum = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) sum += traced(i);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("ns_per_call=%.1f calls=%ld sum=%ld\n", ns / n, n, sum);
    return 0;
}
