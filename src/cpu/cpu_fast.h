/*
 * cpu_fast.h - the fast path of the CPU backend (src/cpu/cpu_fast.c), private to src/cpu.
 *
 * backend_cpu.c owns one struct pe_cpu_fast per context unless the context was created
 * with POSENC_CONTEXT_CPU_REFERENCE; each op slot of the CPU vtable calls the matching
 * function below when there is one, and the reference loops otherwise.
 */
#ifndef POSENC_CPU_FAST_H
#define POSENC_CPU_FAST_H

#include "backend.h"

struct pe_cpu_fast;

/* A pool of n_threads - 1 worker threads (the caller is thread 0); n_threads == 0 means
 * every online core. Reports failures with pe_error(ctx, ...). */
posenc_status pe_cpu_fast_create(posenc_context *ctx, int32_t n_threads,
                                 struct pe_cpu_fast **out);
void pe_cpu_fast_destroy(struct pe_cpu_fast *f);
/* Threads the pool runs (the caller included). */
int pe_cpu_fast_threads(const struct pe_cpu_fast *f);

posenc_status pe_cpu_fast_rope(struct pe_cpu_fast *f, const struct pe_rope_op *op);
posenc_status pe_cpu_fast_sinusoidal(struct pe_cpu_fast *f, const struct pe_sinusoidal_op *op);
posenc_status pe_cpu_fast_alibi(struct pe_cpu_fast *f, const struct pe_alibi_op *op);
posenc_status pe_cpu_fast_learned(struct pe_cpu_fast *f, const struct pe_learned_op *op);
posenc_status pe_cpu_fast_relbias(struct pe_cpu_fast *f, const struct pe_relbias_op *op);
posenc_status pe_cpu_fast_copy(struct pe_cpu_fast *f, const struct pe_copy_op *op);
posenc_status pe_cpu_fast_softmax(struct pe_cpu_fast *f, const struct pe_softmax_op *op);

#endif
