/* Benchmark target for the cost of held locks (`hold_locks`) per lock
 * call: the worker's one call of `work` takes and lets go of a mutex
 * 20,000 times; the other thread's one call of `idle` returns at once,
 * before `work` begins. With the worker's locks held while `idle` runs,
 * every lock call inside `work` is checked (and its thread counted among
 * the lockers), and none waits. */
#include <pthread.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile long counter;
static volatile int idled;

__attribute__((noipa)) void idle(void) { idled = 1; }

__attribute__((noipa)) void work(void) {
    for (int i = 0; i < 20000; i++) {
        pthread_mutex_lock(&m);
        counter++;
        pthread_mutex_unlock(&m);
    }
}

static void *worker(void *arg) {
    (void)arg;
    while (!idled) {
    }
    work();
    return 0;
}

static void *idler(void *arg) {
    (void)arg;
    idle();
    return 0;
}

int main(void) {
    pthread_t a, b;
    pthread_create(&a, 0, worker, 0);
    pthread_create(&b, 0, idler, 0);
    pthread_join(a, 0);
    pthread_join(b, 0);
    return counter == 20000 ? 0 : 1;
}
