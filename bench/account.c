/* Workload for the mining benchmark (BENCHMARKS.md, "explain"): a bank
 * account shared by two tellers, each making 40 transfers under the
 * account lock, plus a monthly fee every 10th transfer that reads the
 * balance, computes the fee (~100 µs) and writes it back *without* taking
 * the lock. When a fee's read-compute-write overlaps the other teller's
 * transfer, that transfer is lost and the audit at the end fails (exit 1).
 * Traces are ~350 access events per run, the size of the paper's
 * BankAccount traces (seed 002, Table: 178).
 *
 *   gcc -g -O1 -pthread -o /tmp/account bench/account.c
 *   aid-agent record -t 'account_*' -t 'libc:pthread_mutex_*' --runs 100 -- /tmp/account
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

struct account {
    pthread_mutex_t lock;
    long balance;
};

static struct account acct = { PTHREAD_MUTEX_INITIALIZER, 1000 };

__attribute__((noipa)) long account_get(struct account *a) { return a->balance; }
__attribute__((noipa)) long account_set(struct account *a, long v) { a->balance = v; return v; }
__attribute__((noipa)) long account_audit(struct account *a) { return a->balance; }

static void spin_us(long us)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

static void sleep_us(long us)
{
    struct timespec ts = { 0, us * 1000 };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

__attribute__((noipa)) long account_transfer(struct account *a, long amount)
{
    pthread_mutex_lock(&a->lock);
    long v = account_set(a, account_get(a) + amount);
    pthread_mutex_unlock(&a->lock);
    return v;
}

/* BUG: the fee is charged without the lock. */
__attribute__((noipa)) long account_fee(struct account *a)
{
    long v = account_get(a);
    spin_us(100);
    return account_set(a, v - 1);
}

static void *teller(void *arg)
{
    long amount = (long)(intptr_t)arg;
    unsigned seed;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed)
        seed = (unsigned)amount;
    for (int i = 1; i <= 40; i++) {
        account_transfer(&acct, amount);
        if (i % 10 == 0)
            account_fee(&acct);
        sleep_us(100 + rand_r(&seed) % 400);
    }
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, teller, (void *)(intptr_t)5);
    pthread_create(&b, NULL, teller, (void *)(intptr_t)-3);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    /* 1000 + 40*5 - 40*3 - 8 fees */
    return account_audit(&acct) == 1072 ? 0 : 1;
}
