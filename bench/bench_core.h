/*
 * bench_core.h - the posenc benchmark (bench/bench_core.c), shared by the posenc_bench
 * program (meson `benchmark()`) and the `posenc bench` sub-command.
 */
#ifndef POSENC_BENCH_CORE_H
#define POSENC_BENCH_CORE_H

#include <stddef.h>

/*
 * Run the benchmark with command-line arguments argv[1 .. argc-1] (argv[0] is the
 * command's name, used in messages). `subcommand` is the word that selects the benchmark
 * in the running executable ("bench" for the posenc tool, NULL for posenc_bench): the
 * cold-start measurements re-run this executable with it. Returns the exit status.
 */
int bench_main(int argc, char **argv, const char *subcommand);

/* Helpers of the other programs in bench/ too. */

/* PoCL's worker threads pinned one to a core (POCL_AFFINITY=1) for this process and its
 * children, unless the environment already says otherwise; call it first in main, before
 * anything loads OpenCL (PoCL reads the variable once, when it sets up its device). The
 * library itself never touches the environment: this is the programs' choice, the one the
 * README recommends for PoCL (docs/performance.md, "PoCL's workers pinned"). Returns the
 * value in force afterwards ("1", or the caller's own), for the programs to print. */
const char *bench_pocl_affinity(void);

/* CLOCK_MONOTONIC in seconds. */
double bench_now(void);

/* The median of t[0 .. n) (n >= 1; t is sorted in place). */
double bench_median(double *t, int n);

/* The bytes of the cache sweep: twice the last-level cache (sysconf), at least 128 MiB,
 * at most 1 GiB. */
size_t bench_sweep_bytes(void);

/* Read bench_sweep_bytes() of host memory a line at a time, so that what an op reads next
 * comes from memory (the buffer is allocated and written at the first call). Returns 0,
 * or -1 where the buffer cannot be allocated. */
int bench_sweep(void);

/* Free the sweep's buffer (bench_sweep allocates it again if called). */
void bench_sweep_free(void);

/* f32 elements of the copy that wakes a backend's worker threads after the sweep, before a
 * timed attention call (1 MiB; bench_core.c, wake_threads). */
#define BENCH_WAKE_ELEMS 262144

#endif
