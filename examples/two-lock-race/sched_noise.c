/*
 * sched_noise.so — scheduling noise for measuring two-lock-race, NOT part of
 * the program.  Preloaded, it wraps pthread_mutex_unlock(): after each
 * unlock the calling thread sleeps for a random 0..SCHED_NOISE_US
 * microseconds (default 100) with probability 1/2, the way a preemption or
 * a page fault at that point would delay it.
 *
 * Build: cc -O1 -shared -fPIC -Wall -Wextra -Werror -o sched_noise.so sched_noise.c -ldl
 * Use:   LD_PRELOAD=./sched_noise.so ./two-lock-race
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int (*real_unlock)(pthread_mutex_t *);
static __thread uint64_t state;

int pthread_mutex_unlock(pthread_mutex_t *m)
{
    if (!real_unlock)
        real_unlock = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT, "pthread_mutex_unlock");
    int rc = real_unlock(m);

    if (!state) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        state = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)(uintptr_t)&ts ^ (uint64_t)getpid();
        state |= 1;
    }
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const char *s = getenv("SCHED_NOISE_US");
    unsigned max_us = s ? (unsigned)atoi(s) : 100;
    if ((state & 1) && max_us)
        usleep((unsigned)(state >> 8) % (max_us + 1));
    return rc;
}
