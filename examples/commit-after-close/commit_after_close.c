/*
 * commit-after-close — an order violation between dispose and commit
 * (models confluent-kafka-dotnet issue #279, AID paper Sec. 7.1.2).
 *
 * main creates a consumer C, starts thread 1 "committer" and waits until it
 * is running.  The committer prepares a batch of offsets and commits it on C;
 * meanwhile main polls for 5..7 ms and then disposes C with consumer_close().
 * Usually the batch is ready in under a millisecond; in ~30% of runs
 * prepare_batch() has to wait out a group rebalance (14..18 ms) and
 * consumer_commit() then runs after the close: it returns -1
 * (ObjectDisposedException) and the program exits 1.
 *
 * Build: cc -g -O1 -pthread -Wall -Wextra -o /tmp/examples-build/commit-after-close commit_after_close.c
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

/* ---- the consumer ------------------------------------------------------- */
struct consumer {
    long closed;            /* set by consumer_close() */
    long committed;         /* last committed offset */
};
struct plan {               /* drawn by main before any thread starts */
    unsigned prepare_us;    /* 100..800 us normally, 14..18 ms when rebalancing */
    unsigned poll_us;       /* main's poll loop before dispose: 5..7 ms */
};
static struct plan plan;
static sem_t running;       /* posted by the committer once it has started */

TRACED struct consumer *consumer_create(void)
{
    return calloc(1, sizeof(struct consumer));
}

/* Compute the offset to commit (pure: no state changes).  Always 42. */
TRACED long prepare_batch(struct consumer *c)
{
    sleep_us(plan.prepare_us);  /* SLOW PATH: waits out a group rebalance */
    return c ? 42 : -1;
}

TRACED long consumer_commit(struct consumer *c, long offset)
{
    if (c->closed)
        return -1;              /* ObjectDisposedException */
    c->committed = offset;
    return 0;
}

TRACED long consumer_poll(struct consumer *c)
{
    sleep_us(plan.poll_us);     /* fetch + handle messages */
    return c->closed ? -1 : 7;  /* messages handled */
}

TRACED long consumer_close(struct consumer *c)
{
    /* ORDER: nothing makes main wait for the committer before disposing. */
    c->closed = 1;
    return 0;
}

void *committer(void *arg)      /* thread role 1 */
{
    struct consumer *c = arg;
    sem_post(&running);
    long offset = prepare_batch(c);
    return (void *)consumer_commit(c, offset);
}

int main(void)
{
    seed_rng();
    int rebalance = rand_between(1, 100) <= 30;          /* ~30% of runs */
    plan.prepare_us = rebalance ? rand_between(14000, 18000) : rand_between(100, 800);
    plan.poll_us = rand_between(5000, 7000);
    sem_init(&running, 0, 0);

    struct consumer *c = consumer_create();
    pthread_t t;
    void *rc;
    pthread_create(&t, NULL, committer, c);
    sem_wait(&running);         /* thread start-up latency plays no part */
    consumer_poll(c);
    consumer_close(c);
    pthread_join(t, &rc);
    free(c);                    /* the object stays valid until the join */

    if ((long)rc != 0) {
        fprintf(stderr, "commit-after-close: commit on a disposed consumer\n");
        return 1;
    }
    return 0;
}
