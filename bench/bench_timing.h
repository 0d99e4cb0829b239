/*
 * bench_timing.h - the best-of-trials timer the kernel micro-benchmarks
 * share: each trial runs fn about TRIAL_SECONDS' worth of calls and the
 * fastest trial counts, so that a slow spell of a shared machine is
 * skipped rather than averaged in.  Include after defining
 * _POSIX_C_SOURCE (clock_gettime).
 */
#ifndef BENCH_TIMING_H
#define BENCH_TIMING_H

#include <time.h>

static const double TRIAL_SECONDS = 0.002;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Best time per call of fn(arg) over `trials` trials of about
 * TRIAL_SECONDS. */
static double best_seconds_of(int trials, void (*fn)(void *), void *arg)
{
    fn(arg);
    double t0 = now();
    int calls = 0;
    while (now() - t0 < TRIAL_SECONDS) {
        fn(arg);
        calls++;
    }
    int per_trial = calls > 0 ? calls : 1;
    double best = 1e30;
    for (int r = 0; r < trials; r++) {
        double a = now();
        for (int i = 0; i < per_trial; i++)
            fn(arg);
        double t = (now() - a) / per_trial;
        best = t < best ? t : best;
    }
    return best;
}

#endif
