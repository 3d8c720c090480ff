/*
 * pool-table-race — a small parallel indexer.  A pool of worker threads takes
 * jobs from a shared queue and builds a term dictionary (a chained hash table
 * that doubles its bucket array when it gets 3/4 full) over a synthetic
 * corpus of NDOCS documents.
 *
 * Jobs are of two kinds.  An INDEX job tokenizes one document and interns
 * every word in the shared dictionary, counting the document in each term's
 * document frequency.  When it is done it queues a NORM job for the document
 * (at the front of the queue): look every word up again and compute the
 * document's tf-idf vector length, which similarity search needs.  Lookups
 * take no lock; inserts and resizes are serialized by the dictionary's mutex.
 *
 * Exit status: 0 if every job succeeded, 1 (one line on stderr) otherwise.
 *
 * Build: cc -g -O1 -pthread -Wall -Wextra -Werror -o pool-table-race pool_table_race.c -lm
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NWORKERS     4
#define NDOCS        320
#define MAX_WORD     24

/* ---- small helpers ------------------------------------------------------ */

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        perror("malloc");
        exit(2);
    }
    return p;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p) {
        perror("calloc");
        exit(2);
    }
    return p;
}

/* FNV-1a */
uint32_t hash_term(const char *s, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

/* ---- term dictionary ---------------------------------------------------- */

struct term {
    struct term *next;
    uint32_t hash;
    uint32_t id;
    unsigned doc_freq;          /* documents containing the term (atomic) */
    unsigned short len;
    char text[];
};

struct bucket_array {
    size_t mask;                /* number of buckets - 1 */
    struct term *slot[];
};

struct dict {
    struct bucket_array *buckets;   /* published with release stores */
    pthread_mutex_t lock;           /* serializes inserts and resizes */
    size_t count;
    uint32_t next_id;
    /* Old bucket arrays stay allocated until dict_free(): a lock-free
     * reader may still be walking one. */
    struct bucket_array *retired[40];
    int nretired;
};

static struct bucket_array *bucket_array_new(size_t nbuckets)
{
    struct bucket_array *b = xcalloc(1, sizeof *b + nbuckets * sizeof b->slot[0]);
    b->mask = nbuckets - 1;
    return b;
}

void dict_init(struct dict *d, size_t nbuckets)
{
    memset(d, 0, sizeof *d);
    pthread_mutex_init(&d->lock, NULL);
    d->buckets = bucket_array_new(nbuckets);
}

/* Find a term; NULL if it is not in the dictionary.  Takes no lock. */
struct term *dict_lookup(struct dict *d, const char *s, size_t len)
{
    uint32_t h = hash_term(s, len);
    struct bucket_array *b = __atomic_load_n(&d->buckets, __ATOMIC_ACQUIRE);
    struct term *t = __atomic_load_n(&b->slot[h & b->mask], __ATOMIC_ACQUIRE);
    for (; t; t = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE))
        if (t->hash == h && t->len == len && memcmp(t->text, s, len) == 0)
            return t;
    return NULL;
}

/* Double the number of buckets and move every term over.  Caller holds d->lock. */
static void dict_grow(struct dict *d)
{
    struct bucket_array *old = d->buckets;
    size_t n = (old->mask + 1) * 2;
    struct bucket_array *nb = bucket_array_new(n);

    for (size_t i = 0; i <= old->mask; i++) {
        struct term *t = old->slot[i];
        while (t) {
            struct term *next = t->next;
            size_t j = t->hash & nb->mask;
            __atomic_store_n(&t->next, nb->slot[j], __ATOMIC_RELEASE);
            nb->slot[j] = t;
            t = next;
        }
    }
    __atomic_store_n(&d->buckets, nb, __ATOMIC_RELEASE);
    if (d->nretired < (int)(sizeof d->retired / sizeof d->retired[0]))
        d->retired[d->nretired++] = old;
    else
        free(old);      /* cannot happen: 40 doublings */
}

/* Return the term for s, inserting it if it is new. */
struct term *dict_intern(struct dict *d, const char *s, size_t len)
{
    struct term *t = dict_lookup(d, s, len);
    if (t)
        return t;

    pthread_mutex_lock(&d->lock);
    t = dict_lookup(d, s, len);         /* someone may have added it meanwhile */
    if (!t) {
        if (d->count + 1 > (d->buckets->mask + 1) * 3 / 4)
            dict_grow(d);
        struct bucket_array *b = d->buckets;
        t = xmalloc(sizeof *t + len + 1);
        t->hash = hash_term(s, len);
        t->id = d->next_id++;
        t->doc_freq = 0;
        t->len = (unsigned short)len;
        memcpy(t->text, s, len);
        t->text[len] = '\0';
        size_t i = t->hash & b->mask;
        t->next = b->slot[i];
        __atomic_store_n(&b->slot[i], t, __ATOMIC_RELEASE);
        d->count++;
    }
    pthread_mutex_unlock(&d->lock);
    return t;
}

void dict_free(struct dict *d)
{
    struct bucket_array *b = d->buckets;
    for (size_t i = 0; i <= b->mask; i++) {
        struct term *t = b->slot[i];
        while (t) {
            struct term *next = t->next;
            free(t);
            t = next;
        }
    }
    free(b);
    for (int i = 0; i < d->nretired; i++)
        free(d->retired[i]);
    pthread_mutex_destroy(&d->lock);
}

/* ---- synthetic corpus --------------------------------------------------- */

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The word with vocabulary rank r, spelled from syllables. */
static size_t spell_word(unsigned r, char *out)
{
    static const char *syl[16] = { "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo",
                                   "ba", "de", "fi", "go", "hu", "ja", "ze", "po" };
    size_t n = 0;
    do {
        memcpy(out + n, syl[r & 15], 2);
        n += 2;
        r >>= 4;
    } while (r);
    out[n] = '\0';
    return n;
}

/* Document `id`: 150..600 words; word ranks are Zipf-distributed over a
 * vocabulary of 50000 (log-uniform rank). */
char *make_document(unsigned id, size_t *len_out)
{
    uint64_t s = 0x9E3779B97F4A7C15ull * (id + 1);
    unsigned nwords = 150 + (unsigned)(xorshift(&s) % 451);
    char *text = xmalloc((size_t)nwords * (MAX_WORD + 1) + 1);
    size_t n = 0;
    for (unsigned w = 0; w < nwords; w++) {
        double u = (double)(xorshift(&s) >> 11) / 9007199254740992.0;
        unsigned rank = (unsigned)exp(u * log(50000.0)) - 1;
        n += spell_word(rank, text + n);
        text[n++] = ' ';
    }
    text[n] = '\0';
    *len_out = n;
    return text;
}

/* Next word of text at *pos: its start, length in *len; NULL at the end. */
static const char *next_word(const char *text, size_t *pos, size_t *len)
{
    size_t i = *pos;
    while (text[i] == ' ')
        i++;
    if (!text[i])
        return NULL;
    size_t start = i;
    while (text[i] && text[i] != ' ')
        i++;
    *pos = i;
    *len = i - start;
    return text + start;
}

/* ---- jobs --------------------------------------------------------------- */

enum job_kind { JOB_INDEX, JOB_NORM };

struct job {
    struct job *next;
    enum job_kind kind;
    unsigned doc;
};

struct pool {
    pthread_mutex_t lock;
    pthread_cond_t ready;       /* a job was queued, or the pool is closing */
    struct job *head, *tail;
    int pending;                /* queued or running jobs */
    pthread_cond_t idle;        /* pending dropped to 0 */
    int closing;

    struct dict *dict;
    double *norms;              /* per document, -1 until computed */
    int failures;
    char first_error[160];
};

/* Norm jobs go to the front of the queue: a document becomes searchable
 * once its norm is known. */
void pool_submit(struct pool *p, enum job_kind kind, unsigned doc)
{
    struct job *j = xmalloc(sizeof *j);
    j->next = NULL;
    j->kind = kind;
    j->doc = doc;
    pthread_mutex_lock(&p->lock);
    if (kind == JOB_NORM) {
        j->next = p->head;
        p->head = j;
        if (!p->tail)
            p->tail = j;
    } else {
        if (p->tail)
            p->tail->next = j;
        else
            p->head = j;
        p->tail = j;
    }
    p->pending++;
    pthread_cond_signal(&p->ready);
    pthread_mutex_unlock(&p->lock);
}

static struct job *pool_take(struct pool *p)
{
    pthread_mutex_lock(&p->lock);
    while (!p->head && !p->closing)
        pthread_cond_wait(&p->ready, &p->lock);
    struct job *j = p->head;
    if (j) {
        p->head = j->next;
        if (!p->head)
            p->tail = NULL;
    }
    pthread_mutex_unlock(&p->lock);
    return j;
}

static void pool_job_done(struct pool *p, const char *error)
{
    pthread_mutex_lock(&p->lock);
    if (error && p->failures++ == 0)
        snprintf(p->first_error, sizeof p->first_error, "%s", error);
    if (--p->pending == 0)
        pthread_cond_broadcast(&p->idle);
    pthread_mutex_unlock(&p->lock);
}

/* Intern every word of the document and count it once per document. */
int index_document(struct dict *d, unsigned doc)
{
    size_t len, pos = 0, wlen;
    char *text = make_document(doc, &len);
    const char *w;
    int nterms = 0;
    struct term **seen = xcalloc(len / 2 + 1, sizeof *seen);

    while ((w = next_word(text, &pos, &wlen))) {
        struct term *t = dict_intern(d, w, wlen);
        int dup = 0;
        for (int i = 0; i < nterms && !dup; i++)
            dup = seen[i] == t;
        if (!dup) {
            seen[nterms++] = t;
            __atomic_add_fetch(&t->doc_freq, 1, __ATOMIC_RELAXED);
        }
    }
    free(seen);
    free(text);
    return nterms;
}

/* The document's tf-idf vector length, used to normalise similarity scores.
 * Every word of an indexed document must be in the dictionary; on a miss,
 * returns -1 with a message in err. */
double document_norm(struct dict *d, unsigned doc, unsigned ndocs, char *err, size_t errlen)
{
    size_t len, pos = 0, wlen;
    char *text = make_document(doc, &len);
    const char *w;
    double sum = 0;

    while ((w = next_word(text, &pos, &wlen))) {
        struct term *t = dict_lookup(d, w, wlen);
        if (!t) {
            snprintf(err, errlen, "document %u: term '%.*s' not in the dictionary",
                     doc, (int)wlen, w);
            sum = -1;
            break;
        }
        unsigned df = __atomic_load_n(&t->doc_freq, __ATOMIC_RELAXED);
        double idf = log((double)ndocs / (df ? df : 1));
        sum += idf * idf;
    }
    free(text);
    return sum < 0 ? -1 : sqrt(sum);
}

static void *worker(void *arg)
{
    struct pool *p = arg;
    struct job *j;
    char err[160];

    while ((j = pool_take(p))) {
        const char *error = NULL;
        if (j->kind == JOB_INDEX) {
            index_document(p->dict, j->doc);
            pool_submit(p, JOB_NORM, j->doc);
        } else {
            double norm = document_norm(p->dict, j->doc, NDOCS, err, sizeof err);
            if (norm < 0)
                error = err;
            p->norms[j->doc] = norm;
        }
        free(j);
        pool_job_done(p, error);
    }
    return NULL;
}

int main(void)
{
    struct dict dict;
    struct pool pool = { .lock = PTHREAD_MUTEX_INITIALIZER,
                         .ready = PTHREAD_COND_INITIALIZER,
                         .idle = PTHREAD_COND_INITIALIZER,
                         .dict = &dict };
    static double norms[NDOCS];
    pool.norms = norms;
    pthread_t tid[NWORKERS];

    dict_init(&dict, 64);
    for (int i = 0; i < NWORKERS; i++)
        if (pthread_create(&tid[i], NULL, worker, &pool) != 0) {
            fprintf(stderr, "pool-table-race: cannot start worker %d\n", i);
            return 2;
        }
    for (unsigned doc = 0; doc < NDOCS; doc++)
        pool_submit(&pool, JOB_INDEX, doc);

    pthread_mutex_lock(&pool.lock);
    while (pool.pending > 0)
        pthread_cond_wait(&pool.idle, &pool.lock);
    pool.closing = 1;
    pthread_cond_broadcast(&pool.ready);
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < NWORKERS; i++)
        pthread_join(tid[i], NULL);

    int failures = pool.failures;
    if (failures)
        fprintf(stderr, "pool-table-race: %d of %d documents failed; first: %s\n",
                failures, NDOCS, pool.first_error);
    dict_free(&dict);
    return failures ? 1 : 0;
}
