/* The cost of reading an argument's pointee at entry: calls lookup(sku)
 * (a C string: the entry probe reads it) or plain(long) (nothing to read)
 * N times and prints ns per call, timing its own loop only.
 * Usage: pointee_loop N [0: lookup | 1: plain] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
__attribute__((noipa)) int lookup(const char *sku) { return sku[0]; }
__attribute__((noipa)) int plain(long x) { return (int)x; }
int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int which = argc > 2 ? atoi(argv[2]) : 0;
    char sku[16];
    strcpy(sku, "BRG-101-M");
    struct timespec a, b;
    long s = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++)
        s += which ? plain(i) : lookup(sku);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n;
    printf("%.0f ns per call (%ld)\n", ns, s & 1);
    return 0;
}
