/*
 * index-race — a data race on a connection pool's slot index
 * (models Npgsql issue #2485, AID paper Sec. 1 and 7.1.1, Fig. 9).
 *
 * The pool is full: CAP idle connectors, count == CAP.
 *   thread 1 "returner" hands one more connector back. pool_return() claims a
 *     slot with an unsynchronised count++, finds the pool full, closes the
 *     surplus connector (slow) and only then gives the slot back (count--).
 *   thread 2 "opener" takes the most recently returned connector:
 *     pool_top_index() reads count-1, pool_get() reads slots[idx].
 * If pool_top_index() runs while pool_return() holds the bogus claim, it
 * returns CAP (one past the array) and pool_get() reports an out-of-range
 * access: the program exits 1.  Either serial order is harmless (index 3).
 *
 * Timing: counted from a common origin, the returner calls at 0, 4, 8 or 12
 * ms and the opener at 2, 6, 10 or 14 ms; the close takes 4 ms.  So the read
 * is either in the middle of the claim window or ~2 ms away from it: a run
 * races clearly or not at all, and neither tracing overhead nor scheduling
 * noise below ~2 ms changes its outcome.
 *
 * Build: cc -g -O1 -pthread -Wall -Wextra -o /tmp/examples-build/index-race index_race.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
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

/* ---- the pool ----------------------------------------------------------- */
#define CAP 4
struct pool {
    long slots[CAP];        /* idle connector ids */
    long count;             /* number of idle connectors; next free slot */
};
struct plan {               /* drawn by main before any thread starts */
    unsigned returner_start_us, close_us, opener_start_us;
};
static struct pool pool;
static struct plan plan;

TRACED long connector_close(long conn)
{
    sleep_us(plan.close_us);            /* send Terminate, wait for the socket */
    return conn > 0 ? 0 : -1;
}

/* Return a connector to the pool; 1 if pooled, 0 if closed as surplus. */
TRACED long pool_return(struct pool *p, long conn)
{
    long i = p->count++;                /* RACE: claim a slot, unsynchronised */
    if (i < CAP) {
        p->slots[i] = conn;
        return 1;
    }
    /* Pool was full. Until the count-- below, p->count == CAP + 1 and any
     * concurrent reader of the index sees a slot past the end of slots[]. */
    connector_close(conn);
    p->count--;                         /* give the claimed slot back (last write) */
    return 0;
}

/* Index of the most recently returned idle connector (pure query). */
TRACED long pool_top_index(struct pool *p)
{
    return p->count - 1;                /* RACE: unsynchronised read */
}

/* Bounds-checked read of a slot: the connector id, or -1 (IndexOutOfRange). */
TRACED long pool_get(struct pool *p, long idx)
{
    if (idx < 0 || idx >= CAP)
        return -1;
    return p->slots[idx];
}

void *returner(void *arg)        /* thread role 1 */
{
    sleep_until_us(plan.returner_start_us);
    pool_return(arg, 105);
    return NULL;
}

void *opener(void *arg)          /* thread role 2 */
{
    sleep_until_us(plan.opener_start_us);
    long idx = pool_top_index(arg);
    return (void *)pool_get(arg, idx);
}

int main(void)
{
    seed_rng();
    plan.returner_start_us = 4000 * rand_between(0, 3);         /* 0, 4, 8, 12 ms */
    plan.close_us = rand_between(3800, 4200);                   /* ~4 ms */
    plan.opener_start_us = 4000 * rand_between(0, 3) + 2000;    /* 2, 6, 10, 14 ms */

    for (long i = 0; i < CAP; i++)
        pool.slots[i] = 101 + i;
    pool.count = CAP;

    pthread_t t1, t2;
    void *conn;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_create(&t1, NULL, returner, &pool);
    pthread_create(&t2, NULL, opener, &pool);
    pthread_join(t1, NULL);
    pthread_join(t2, &conn);

    if ((long)conn < 0) {
        fprintf(stderr, "index-race: IndexOutOfRange in pool_get\n");
        return 1;
    }
    return 0;
}
