/*
 * two-lock-race — two clients withdraw from one shared account
 * (in the style of the SCTBench/CB test programs).
 *
 * account_withdraw() checks the balance under the account lock, releases the
 * lock, and takes it again to debit the account.  main opens an account with
 * 100, starts two threads that each withdraw 60, and checks afterwards that
 * the account is not overdrawn: one withdrawal must succeed and the other
 * be refused.
 *
 * Exit status: 0 if the balance is 40, 1 (one line on stderr) if it is not.
 *
 * Build: cc -g -O1 -pthread -Wall -Wextra -Werror -o two-lock-race two_lock_race.c
 */
#include <pthread.h>
#include <stdio.h>

struct account {
    pthread_mutex_t lock;
    long balance;
    long refused;
};

/* Withdraw amount; 0 on success, -1 (and the account unchanged) if the
 * balance does not cover it. */
int account_withdraw(struct account *a, long amount)
{
    pthread_mutex_lock(&a->lock);
    int covered = a->balance >= amount;
    if (!covered)
        a->refused++;
    pthread_mutex_unlock(&a->lock);
    if (!covered)
        return -1;

    pthread_mutex_lock(&a->lock);
    a->balance -= amount;
    pthread_mutex_unlock(&a->lock);
    return 0;
}

long account_balance(struct account *a)
{
    pthread_mutex_lock(&a->lock);
    long b = a->balance;
    pthread_mutex_unlock(&a->lock);
    return b;
}

static void *client(void *arg)
{
    account_withdraw(arg, 60);
    return NULL;
}

int main(void)
{
    struct account acct = { PTHREAD_MUTEX_INITIALIZER, 100, 0 };
    pthread_t t1, t2;

    if (pthread_create(&t1, NULL, client, &acct) != 0 ||
        pthread_create(&t2, NULL, client, &acct) != 0) {
        fprintf(stderr, "two-lock-race: cannot start threads\n");
        return 2;
    }
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);

    long balance = account_balance(&acct);
    if (balance != 40) {
        fprintf(stderr, "two-lock-race: balance is %ld after two withdrawals of 60 from 100 (%ld refused)\n",
                balance, acct.refused);
        return 1;
    }
    return 0;
}
