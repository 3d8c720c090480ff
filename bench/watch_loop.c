/* The watchpoint benchmark's workload: one traced call that reads and
 * writes a global N times (a load and a store per iteration), timed inside
 * the process so the agent's start-up is not counted. Watched, every
 * iteration traps twice: once for the read, once for the write (which
 * fires both of the address' breakpoints). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long counter;

__attribute__((noipa)) long spin(long *c, long n)
{
    volatile long *v = c;
    for (long i = 0; i < n; i++)
        *v = *v + 1;
    return *v;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    long total = spin(&counter, n);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("ns_per_iteration=%.1f iterations=%ld total=%ld\n", ns / n, n, total);
    return 0;
}
