/* posenc_bench - the benchmark program (`meson benchmark`, or run it directly; --help).
 * The same measurements as `posenc bench`: see bench_core.c. */
#include "bench_core.h"

int main(int argc, char **argv)
{
    return bench_main(argc, argv, 0);
}
