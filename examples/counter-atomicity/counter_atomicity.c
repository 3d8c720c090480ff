/*
 * counter-atomicity — an atomicity violation: a lost update on a shared counter
 * (the atomicity-violation pattern of AID paper Appendix C; the paper's
 * HealthTelemetry case, Sec. 7.1.4, was a race condition).
 *
 * Two worker threads each record one event with increment(c), a
 * read-modify-write done as load_counter() ... store_counter() with the
 * event's bookkeeping in between and no lock.  Worker 1 ("first_worker")
 * announces it is online and records its event at once (its bookkeeping
 * takes ~4 ms); worker 2 ("second_worker") sets up for 2, 6, 10 or 14 ms
 * (counted from the same origin), waits until worker 1 is online and
 * records its own.  If worker 2's increment begins before worker 1's has
 * stored (set-up 2 ms), both read 0, one update is lost, check_total()
 * returns 1 instead of 2 and the program exits 1.  The set-ups keep worker
 * 2's load ~2 ms away from worker 1's store: a run races clearly or not at
 * all, and neither tracing overhead nor scheduling noise below ~2 ms
 * changes its outcome.
 *
 * Build: cc -g -O1 -pthread -Wall -Wextra -o /tmp/examples-build/counter-atomicity counter_atomicity.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <semaphore.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Every traced step is a real call: no inlining, no IPA clones. */
#if defined(__clang__)
#define TRACED __attribute__((noinline, used))
#else
#define TRACED __attribute__((noipa, used))
#endif

/* ---- timing noise (the only source of nondeterminism) ------------------ */
static uint64_t rng;
static void seed_rng(void)          /* FLAKY_SEED=n replays one schedule */
{
    const char *s = getenv("FLAKY_SEED");
    if (s)
        rng = strtoull(s, NULL, 0);
    else if (getrandom(&rng, sizeof rng, 0) != (ssize_t)sizeof rng)
        rng = (uint64_t)getpid() ^ (uint64_t)time(NULL);
    rng = rng * 0x9E3779B97F4A7C15ull + 1;
}
static unsigned rand_between(unsigned lo, unsigned hi)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return lo + (unsigned)(rng % (hi - lo + 1));
}
static void sleep_us(unsigned us)   /* restarts after signals (ptrace stops) */
{
    struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000 };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}
/* Threads time their steps from a common origin, 5 ms after main read t0,
 * so that thread start-up latency plays no part. */
static struct timespec t0;
static void sleep_until_us(unsigned offset_us)  /* until t0 + 5 ms + offset */
{
    long ns = t0.tv_nsec + (5000L + offset_us) * 1000;
    struct timespec ts = { t0.tv_sec + ns / 1000000000, ns % 1000000000 };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* ---- the counter -------------------------------------------------------- */
struct counter { long value; };
struct plan {               /* drawn by main before any thread starts */
    unsigned setup_us;      /* worker 2's set-up after worker 1 is online */
    unsigned work_us[3];    /* bookkeeping inside increment(): ~4 ms */
};
static struct plan plan;
static sem_t online;        /* posted by worker 1 when it starts */
static struct counter events;

TRACED long load_counter(struct counter *c)
{
    return c->value;
}

TRACED long store_counter(struct counter *c, long v)
{
    c->value = v;
    return v;
}

/* Not atomic: the window between the load and the store is the bug. */
TRACED long increment(struct counter *c, long worker)
{
    long v = load_counter(c);           /* RACE: read ...                 */
    sleep_us(plan.work_us[worker]);     /*   ... format + log the event ... */
    return store_counter(c, v + 1);     /* ... write back (last write)    */
}

/* Final consistency check: the total, which must equal the events recorded. */
TRACED long check_total(struct counter *c)
{
    return c->value;
}

void *first_worker(void *arg)           /* thread role 1 */
{
    sleep_until_us(0);
    sem_post(&online);
    increment(arg, 1);
    return NULL;
}

void *second_worker(void *arg)          /* thread role 2 */
{
    sleep_until_us(plan.setup_us);
    sem_wait(&online);                  /* worker 1 always starts first */
    increment(arg, 2);
    return NULL;
}

int main(void)
{
    seed_rng();
    plan.setup_us = 4000 * rand_between(0, 3) + 2000;   /* 2, 6, 10, 14 ms */
    plan.work_us[1] = rand_between(3800, 4200);
    plan.work_us[2] = rand_between(3800, 4200);

    pthread_t t1, t2;
    sem_init(&online, 0, 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_create(&t1, NULL, first_worker, &events);
    pthread_create(&t2, NULL, second_worker, &events);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);

    if (check_total(&events) != 2) {
        fprintf(stderr, "counter-atomicity: lost update, total %ld != 2\n", events.value);
        return 1;
    }
    return 0;
}
