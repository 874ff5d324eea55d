/*
 * bench_core.h - the posenc benchmark (bench/bench_core.c), shared by the posenc_bench
 * program (meson `benchmark()`) and the `posenc bench` sub-command.
 */
#ifndef POSENC_BENCH_CORE_H
#define POSENC_BENCH_CORE_H

/*
 * Run the benchmark with command-line arguments argv[1 .. argc-1] (argv[0] is the
 * command's name, used in messages). `subcommand` is the word that selects the benchmark
 * in the running executable ("bench" for the posenc tool, NULL for posenc_bench): the
 * cold-start measurements re-run this executable with it. Returns the exit status.
 */
int bench_main(int argc, char **argv, const char *subcommand);

#endif
