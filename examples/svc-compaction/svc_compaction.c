/*
 * svc-compaction — a small key-value store service with background
 * compaction.
 *
 * The store keeps 4096 keys in 4 segments.  A segment is a sorted table of
 * records plus an append-only log of recent updates; a GET looks in the log
 * first, then binary-searches the table.  The request loop (main thread)
 * serves one request about every 2 ms, forever: mostly GETs, some PUTs.
 * Requests never wait for background work: if a segment is busy, the
 * request fails with EAGAIN and the client retries later.
 *
 * A background thread compacts one segment every 20-60 ms: it merges the
 * segment's log into its table and writes the new table to the segment's
 * file image, at a limited rate so that compaction I/O does not starve the
 * service (8 MiB/s).
 *
 * Runs until SIGTERM/SIGINT, then prints one line (requests served and
 * failed) to stderr and exits 0.  SVC_REQUESTS=n stops after n requests
 * instead (for measurements).  Nothing else is printed; memory use is
 * constant.
 *
 * Build: cc -g -O1 -pthread -Wall -Wextra -Werror -o svc-compaction svc_compaction.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define NSEGMENTS        4
#define KEYS_PER_SEGMENT 1024
#define NKEYS            (NSEGMENTS * KEYS_PER_SEGMENT)
#define LOG_CAPACITY     512
#define PERIOD_NS        2000000L           /* one request every 2 ms */
#define WRITE_RATE       (8L << 20)         /* compaction output, bytes/s */
#define WRITE_CHUNK      4096

struct record {
    uint32_t key;
    uint32_t version;
    uint64_t value;
    char payload[48];
};

struct segment {
    pthread_mutex_t lock;
    struct record table[KEYS_PER_SEGMENT];  /* sorted by key */
    size_t ntable;
    struct record log[LOG_CAPACITY];        /* updates since the last compaction */
    size_t nlog;
    unsigned compactions;
    unsigned char image[KEYS_PER_SEGMENT * sizeof(struct record)];  /* the file */
};

struct store {
    struct segment seg[NSEGMENTS];
};

/* ---- small helpers ------------------------------------------------------ */

static __thread uint64_t rng_state;

static unsigned rand_below(unsigned n)
{
    if (!rng_state) {
        if (getrandom(&rng_state, sizeof rng_state, 0) != (ssize_t)sizeof rng_state)
            rng_state = (uint64_t)pthread_self() ^ (uint64_t)time(NULL);
        rng_state |= 1;
    }
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)(rng_state % n);
}

static void sleep_ns(long ns)
{
    struct timespec ts = { ns / 1000000000L, ns % 1000000000L };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

static void fill_payload(struct record *r)
{
    snprintf(r->payload, sizeof r->payload, "k%u/v%u/%016llx", r->key, r->version,
             (unsigned long long)r->value);
}

/* ---- segments ----------------------------------------------------------- */

static struct segment *segment_of(struct store *st, uint32_t key)
{
    return &st->seg[key % NSEGMENTS];
}

static const struct record *table_find(const struct segment *s, uint32_t key)
{
    size_t lo = 0, hi = s->ntable;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->table[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->ntable && s->table[lo].key == key ? &s->table[lo] : NULL;
}

/* The newest record for key in the segment, or NULL.  Caller holds the lock. */
static const struct record *segment_find(const struct segment *s, uint32_t key)
{
    for (size_t i = s->nlog; i > 0; i--)
        if (s->log[i - 1].key == key)
            return &s->log[i - 1];
    return table_find(s, key);
}

/* Read key into *out: 0, -EAGAIN if the segment is busy, -ENOENT. */
int segment_get(struct segment *s, uint32_t key, struct record *out)
{
    if (pthread_mutex_trylock(&s->lock) != 0)
        return -EAGAIN;
    const struct record *r = segment_find(s, key);
    if (r)
        *out = *r;
    pthread_mutex_unlock(&s->lock);
    return r ? 0 : -ENOENT;
}

/* Append an update of key: 0, -EAGAIN if the segment is busy, -ENOSPC if
 * its log is full. */
int segment_put(struct segment *s, uint32_t key, uint64_t value)
{
    if (pthread_mutex_trylock(&s->lock) != 0)
        return -EAGAIN;
    int rc = -ENOSPC;
    if (s->nlog < LOG_CAPACITY) {
        const struct record *old = segment_find(s, key);
        struct record *r = &s->log[s->nlog++];
        r->key = key;
        r->version = old ? old->version + 1 : 1;
        r->value = value;
        fill_payload(r);
        rc = 0;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* ---- compaction --------------------------------------------------------- */

/* Merge the log into the table (newest update of each key wins). */
static void merge_log(struct segment *s)
{
    for (size_t i = 0; i < s->nlog; i++) {
        const struct record *u = &s->log[i];
        struct record *r = (struct record *)table_find(s, u->key);
        if (r) {
            *r = *u;
        } else if (s->ntable < KEYS_PER_SEGMENT) {
            size_t pos = s->ntable;
            while (pos > 0 && s->table[pos - 1].key > u->key) {
                s->table[pos] = s->table[pos - 1];
                pos--;
            }
            s->table[pos] = *u;
            s->ntable++;
        }
    }
    s->nlog = 0;
}

/* Write the table to the segment's file image, WRITE_CHUNK bytes at a time
 * and no faster than WRITE_RATE. */
static void write_table(struct segment *s)
{
    size_t bytes = s->ntable * sizeof(struct record);
    const unsigned char *src = (const unsigned char *)s->table;
    for (size_t off = 0; off < bytes; off += WRITE_CHUNK) {
        size_t n = bytes - off < WRITE_CHUNK ? bytes - off : WRITE_CHUNK;
        memcpy(s->image + off, src + off, n);
        sleep_ns((long)(1000000000.0 * (double)n / (double)WRITE_RATE));
    }
}

void compact_segment(struct segment *s)
{
    pthread_mutex_lock(&s->lock);
    merge_log(s);
    write_table(s);
    s->compactions++;
    pthread_mutex_unlock(&s->lock);
}

static volatile sig_atomic_t stop;

static void *compactor_main(void *arg)
{
    struct store *st = arg;
    unsigned next = 0;
    while (!stop) {
        sleep_ns(20000000L + (long)rand_below(40001) * 1000L);     /* 20-60 ms */
        compact_segment(&st->seg[next]);
        next = (next + 1) % NSEGMENTS;
    }
    return NULL;
}

/* ---- requests ----------------------------------------------------------- */

enum op { OP_GET, OP_PUT };

struct request {
    enum op op;
    uint32_t key;
    uint64_t value;
};

struct response {
    struct record rec;
};

/* Serve one request: 0, or a negative errno. */
int handle_request(struct store *st, const struct request *req, struct response *resp)
{
    if (req->key >= NKEYS)
        return -EINVAL;
    struct segment *s = segment_of(st, req->key);
    if (req->op == OP_PUT)
        return segment_put(s, req->key, req->value);
    return segment_get(s, req->key, &resp->rec);
}

static void next_request(struct request *req)
{
    req->op = rand_below(10) < 3 ? OP_PUT : OP_GET;
    req->key = rand_below(NKEYS);
    req->value = ((uint64_t)rand_below(1u << 30) << 30) | rand_below(1u << 30);
}

static void store_init(struct store *st)
{
    for (int i = 0; i < NSEGMENTS; i++) {
        struct segment *s = &st->seg[i];
        pthread_mutex_init(&s->lock, NULL);
        for (uint32_t k = 0; k < KEYS_PER_SEGMENT; k++) {
            struct record *r = &s->table[k];
            r->key = k * NSEGMENTS + (uint32_t)i;
            r->version = 1;
            r->value = (uint64_t)r->key * 2654435761u;
            fill_payload(r);
        }
        s->ntable = KEYS_PER_SEGMENT;
        write_table(s);
    }
}

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
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
    static struct store store;
    const char *limit_env = getenv("SVC_REQUESTS");
    unsigned long limit = limit_env ? strtoul(limit_env, NULL, 10) : 0;
    unsigned long served = 0, failed = 0;
    struct sigaction sa = { .sa_handler = on_signal };
    struct timespec tick;
    pthread_t compactor;

    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    store_init(&store);
    if (pthread_create(&compactor, NULL, compactor_main, &store) != 0) {
        fprintf(stderr, "svc-compaction: cannot start the compactor\n");
        return 2;
    }

    clock_gettime(CLOCK_MONOTONIC, &tick);
    while (!stop && (limit == 0 || served < limit)) {
        struct request req;
        struct response resp;

        next_request(&req);
        if (handle_request(&store, &req, &resp) < 0)
            failed++;
        served++;

        next_tick(&tick);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &tick, NULL) == EINTR && !stop)
            ;
    }
    stop = 1;
    pthread_join(compactor, NULL);
    fprintf(stderr, "svc-compaction: %lu requests, %lu failed\n", served, failed);
    return 0;
}
