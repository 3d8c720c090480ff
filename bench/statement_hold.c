/* Does a hold at a statement point come before or after the probed
 * instruction? The writer stores the monotonic clock into v without end;
 * reader loads v at its first statement; main prints what it read. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

volatile long v = 0;
volatile int stop = 0;

static long now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

void *writer(void *arg)
{
    while (!stop)
        v = now();
    return arg;
}

long reader(void)
{
    long x = v;
    return x;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, writer, NULL);
    usleep(200);
    for (int i = 0; i < 10; i++) {
        long before = now();
        long x = reader();
        long after = now();
        printf("%d %ld %ld %ld\n", i, before, x, after);
        usleep(50);
    }
    stop = 1;
    pthread_join(t, NULL);
    return 0;
}
