/*
 * ops_bias.h - the host side of the bias ops (src/ops_bias.c) for the front ends that run
 * them over several blocks (posenc_attention): every check and host table made once, for
 * the caller's whole range, before the first launch.
 */
#ifndef POSENC_OPS_BIAS_H
#define POSENC_OPS_BIAS_H

#include "internal.h"

/* posenc_alibi's checks and slopes for logits [K, Q, H, *] (positions checked over the
 * whole range): fills op except its views. Free with pe_alibi_release. */
posenc_status pe_alibi_prepare(posenc_context *ctx, const struct posenc_alibi_params *params,
                               int64_t K, int64_t Q, int64_t H, struct pe_alibi_op *op);
void pe_alibi_release(struct pe_alibi_op *op);

/* posenc_relbias' checks (params, table [n_buckets, H]) and buckets for logits [K, Q, H, *]:
 * fills op except logits / dst. Free with pe_relbias_release(op, the bucket pointer it
 * set). */
posenc_status pe_relbias_prepare(posenc_context *ctx, const struct posenc_relbias_params *params,
                                 const posenc_tensor *table, int64_t K, int64_t Q, int64_t H,
                                 struct pe_relbias_op *op);
/* Narrow a prepared op to its queries [q0, q0 + nq) (of nk keys): q_offset and the window
 * of relative positions move, the bucket list is the prepared one's. */
void pe_relbias_window(struct pe_relbias_op *op, int64_t q0, int64_t nq, int64_t nk);
void pe_relbias_release(struct pe_relbias_op *op, const int32_t *bucket);

#endif
