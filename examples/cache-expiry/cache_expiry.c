/*
 * cache-expiry — a timing bug: a transient fault makes a task outlive a cache TTL
 * (models the Azure Cosmos DB application of the AID paper, Sec. 7.1.3,
 * azure-cosmos-dotnet-v3 PR #713).
 *
 * main populates a cache whose entries expire TTL_MS after insertion, runs
 * three tasks one after the other, then looks up the session token it cached.
 * Each task fetches one document.  Task 2 reads from a remote replica that
 * sometimes answers with a transient fault (fetch_document returns -1); the
 * task then runs its fault handling (reconnect + exponential backoff), which
 * takes longer than the TTL.  The final cache_lookup() returns NULL and the
 * program exits 1.  Without a fault the three tasks finish long before TTL_MS.
 *
 * Build: cc -g -O1 -pthread -Wall -Wextra -o /tmp/examples-build/cache-expiry cache_expiry.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
static long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000L + ts.tv_nsec / 1000;
}

/* ---- the cache ---------------------------------------------------------- */
#define TTL_MS  20          /* no-fault tasks take 3..6 ms in all, fault handling 25..29 ms */
#define NTASKS  3
#define REMOTE  2           /* the task that reads from the flaky replica */

struct entry { char key[16]; long value; long expires_us; };
struct cache { struct entry e[4]; int n; };
struct plan {               /* drawn by main before the tasks run */
    unsigned task_us[NTASKS + 1];
    int fault;              /* does the remote replica fail this time? (~30%) */
    unsigned backoff_us;
};
static struct plan plan;
static long faults_seen;    /* bumped by the fault handler */

TRACED long cache_populate(struct cache *c)
{
    static const char *keys[] = { "session", "partition", "routing", "account" };
    for (int i = 0; i < 4; i++) {
        strcpy(c->e[i].key, keys[i]);
        c->e[i].value = 1000 + i;
        c->e[i].expires_us = now_us() + TTL_MS * 1000L;     /* TTL starts now */
    }
    c->n = 4;
    return c->n;
}

/* Entry for key, or NULL if absent or expired (pure query). */
TRACED struct entry *cache_lookup(struct cache *c, const char *key)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->e[i].key, key) == 0)
            return now_us() < c->e[i].expires_us ? &c->e[i] : NULL;
    return NULL;
}

/* Fetch document `id` from its replica: its size, or -1 on a transient
 * fault.  A pure query: forcing its return value changes no state. */
TRACED long fetch_document(long id)
{
    if (id == REMOTE && plan.fault)
        return -1;                      /* 503 from the remote replica */
    return 100 * id;
}

/* Reconnect and retry with backoff: slow.  Returns the document size. */
TRACED long handle_transient_fault(long id)
{
    faults_seen++;
    sleep_us(plan.backoff_us);          /* TIMING: longer than the whole TTL */
    return 100 * id;
}

/* The service's health as a monitor would read it: DEGRADED (1) after any
 * transient fault, OK (0) otherwise. A pure query, and an effect of the
 * fault, not a cause of the expiry: forcing it to OK changes nothing. */
TRACED long health_status(void)
{
    return faults_seen > 0 ? 1 : 0;
}

TRACED long run_task(struct cache *c, long id)
{
    long size = fetch_document(id);
    if (size < 0)
        size = handle_transient_fault(id);
    sleep_us(plan.task_us[id]);         /* process the document */
    return c->n > 0 ? size : -1;
}

int main(void)
{
    seed_rng();
    for (int i = 1; i <= NTASKS; i++)
        plan.task_us[i] = rand_between(1000, 2000);
    plan.fault = rand_between(1, 100) <= 30;
    plan.backoff_us = rand_between(25000, 29000);

    static struct cache cache;
    cache_populate(&cache);
    for (long id = 1; id <= NTASKS; id++)
        run_task(&cache, id);
    health_status();

    struct entry *session = cache_lookup(&cache, "session");
    if (!session) {
        fprintf(stderr, "cache-expiry: session token expired from the cache\n");
        return 1;
    }
    return session->value == 1000 ? 0 : 2;
}
