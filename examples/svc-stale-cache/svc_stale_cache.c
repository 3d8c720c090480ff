/*
 * svc-stale-cache — a read-through cache in front of a flaky backend.
 *
 * The service answers GET requests for 256 keys, one request about every
 * 2 ms, forever.  Each request is served from the backend (a versioned
 * key-value store); the value is cached so that the service can still
 * answer from the cache when the backend does not respond.  Clients that
 * have just written a key (directly to the backend) ask for at least the
 * version their write produced (read-your-writes); a response older than
 * that is rejected.
 *
 * The backend and the clients are simulated in-process: the backend times
 * out on about one request in five, and about one request in three comes
 * from a client that has just updated its key.
 *
 * Runs until SIGTERM/SIGINT, then prints one line (requests served and
 * failed) to stderr and exits 0.  SVC_REQUESTS=n stops after n requests
 * instead (for measurements).  Nothing else is printed; memory use is
 * constant.
 *
 * Build: cc -g -O1 -pthread -Wall -Wextra -Werror -o svc-stale-cache svc_stale_cache.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define NKEYS       256
#define PERIOD_NS   2000000L        /* one request every 2 ms */

/* ---- randomness for the simulation ------------------------------------ */

static uint64_t sim_state;

static void sim_seed(void)
{
    if (getrandom(&sim_state, sizeof sim_state, 0) != (ssize_t)sizeof sim_state)
        sim_state = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull ^ (uint64_t)time(NULL);
    sim_state |= 1;
}

static unsigned sim_below(unsigned n)
{
    sim_state ^= sim_state << 13;
    sim_state ^= sim_state >> 7;
    sim_state ^= sim_state << 17;
    return (unsigned)(sim_state % n);
}

/* ---- the backend (simulated) ------------------------------------------- */

/* A stored value encodes its key and version: key << 32 | version. */
static uint32_t backend_versions[NKEYS];

static long make_value(unsigned key, uint32_t version)
{
    return (long)key << 32 | version;
}

/* A client's write: the new version of key. */
uint32_t backend_write(unsigned key)
{
    return ++backend_versions[key];
}

/* The current value of key, or -ETIMEDOUT when the backend does not answer
 * in time (about one call in five). */
long backend_fetch(unsigned key)
{
    if (sim_below(5) == 0)
        return -ETIMEDOUT;
    return make_value(key, backend_versions[key]);
}

/* ---- the cache ---------------------------------------------------------- */

struct cache_entry {
    long value;         /* 0: never filled */
    struct timespec stored;
};

static struct cache_entry cache[NKEYS];

void cache_put(unsigned key, long value)
{
    cache[key].value = value;
    clock_gettime(CLOCK_MONOTONIC, &cache[key].stored);
}

/* The cached value of key, or -ENOENT. */
long cache_get(unsigned key)
{
    return cache[key].value ? cache[key].value : -ENOENT;
}

/* Read key through the cache: the backend's value, or the cached one if
 * the backend is unavailable. */
long read_through(unsigned key)
{
    long v = backend_fetch(key);
    if (v >= 0) {
        cache_put(key, v);
        return v;
    }
    if (v == -ETIMEDOUT)
        return cache_get(key);
    return v;
}

/* ---- requests ----------------------------------------------------------- */

struct request {
    unsigned key;
    uint32_t min_version;   /* 0, or the version the client's own write made */
};

struct response {
    long value;
};

/* 0 if value is a value of key no older than the request allows. */
int validate_response(const struct request *req, long value)
{
    if ((unsigned long)value >> 32 != req->key)
        return -EPROTO;
    if ((uint32_t)value < req->min_version)
        return -ESTALE;
    return 0;
}

/* Serve one request: 0, or a negative errno. */
int handle_request(const struct request *req, struct response *resp)
{
    if (req->key >= NKEYS)
        return -EINVAL;
    long v = read_through(req->key);
    if (v < 0)
        return (int)v;
    int rc = validate_response(req, v);
    if (rc < 0)
        return rc;
    resp->value = v;
    return 0;
}

/* The next client request (simulated). */
static void next_request(struct request *req)
{
    req->key = sim_below(NKEYS);
    req->min_version = sim_below(3) == 0 ? backend_write(req->key) : 0;
}

/* ---- main loop ---------------------------------------------------------- */

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

/* Fill the cache before taking requests (retrying timeouts). */
static void warm_cache(void)
{
    for (unsigned k = 0; k < NKEYS; k++) {
        long v;
        while ((v = backend_fetch(k)) == -ETIMEDOUT)
            ;
        cache_put(k, v);
    }
}

static void next_tick(struct timespec *t)
{
    t->tv_nsec += PERIOD_NS;
    if (t->tv_nsec >= 1000000000L) {
        t->tv_nsec -= 1000000000L;
        t->tv_sec++;
    }
}

int main(void)
{
    const char *limit_env = getenv("SVC_REQUESTS");
    unsigned long limit = limit_env ? strtoul(limit_env, NULL, 10) : 0;
    unsigned long served = 0, failed = 0;
    struct sigaction sa = { .sa_handler = on_signal };
    struct timespec tick;

    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sim_seed();
    for (unsigned k = 0; k < NKEYS; k++)
        backend_versions[k] = 1 + sim_below(1000);
    warm_cache();

    clock_gettime(CLOCK_MONOTONIC, &tick);
    while (!stop && (limit == 0 || served < limit)) {
        struct request req;
        struct response resp;

        next_request(&req);
        if (handle_request(&req, &resp) < 0)
            failed++;
        served++;

        next_tick(&tick);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &tick, NULL) == EINTR && !stop)
            ;
    }
    fprintf(stderr, "svc-stale-cache: %lu requests, %lu failed\n", served, failed);
    return 0;
}
