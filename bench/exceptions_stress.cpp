/* What repairing return addresses costs when exceptions unwind under
 * return probes (BENCHMARKS.md, "Exceptions through traced functions").
 * Four threads, 2,000 calls of `catcher` each: `leaf` throws for multiples
 * of 5 (a runtime_error, rethrown once from `rethrower`) and of 7 (an int,
 * whose handler throws and catches once more); a destructor calls `note`.
 * Prints one total, the same every run. Build:
 * g++ -O1 -g -pthread -o /tmp/exceptions_stress bench/exceptions_stress.cpp */
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>
#include <string>

struct Guard {
    int *n;
    ~Guard();
};
__attribute__((noinline)) void note(int *n) { (*n)++; }
Guard::~Guard() { note(n); }

__attribute__((noinline)) int leaf(int v) {
    if (v % 5 == 0) throw std::runtime_error("five");
    if (v % 7 == 0) throw 7;
    return v;
}
__attribute__((noinline)) int with_guard(int v, int *n) {
    Guard g{n};
    return leaf(v) + 1;
}
__attribute__((noinline)) int rethrower(int v, int *n) {
    try {
        return with_guard(v, n);
    } catch (const std::runtime_error &) {
        note(n);
        throw;
    }
}
__attribute__((noinline)) int catcher(int v, int *n) {
    try {
        return rethrower(v, n);
    } catch (const std::exception &) {
        return -1;
    } catch (int) {
        try {
            leaf(5);
        } catch (...) {
        }
        return -2;
    }
}
__attribute__((noinline)) long worker(int id) {
    int n = 0;
    long sum = 0;
    for (int i = 1; i <= 2000; i++) sum += catcher(i + id, &n);
    return sum * 1000 + n;
}

int main() {
    std::vector<std::thread> ts;
    std::vector<long> out(4);
    for (int t = 0; t < 4; t++) ts.emplace_back([&out, t] { out[t] = worker(t); });
    for (auto &t : ts) t.join();
    long total = 0;
    for (long v : out) total += v;
    std::printf("total %ld\n", total);
    return 0;
}
