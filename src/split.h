/*
 * split.h - running ops whose views exceed what one launch may address (src/split.c).
 *
 * The front ends call pe_run_<op> instead of the backend's slot: it calls the slot once
 * when every view fits the backend's binding limit (or there is none), else once per
 * slice along the op's outer dimensions. Ops that cannot be sliced call
 * pe_check_binding first and are refused (POSENC_ERR_UNSUPPORTED naming the limit).
 */
#ifndef POSENC_SPLIT_H
#define POSENC_SPLIT_H

#include "internal.h"

/* The largest span in bytes one binding of ctx's backend may cover (0 = no limit): the
 * backend's own limit, lowered by POSENC_MAX_BINDING. *out_what (optional) names it. */
uint64_t pe_binding_limit(const posenc_context *ctx, const char **out_what);

/* Bytes from a view's first element to the end of its last (0 for no memory or an empty
 * view). Strides are non-negative (checked by the front end). */
uint64_t pe_view_span_bytes(const struct pe_view *v);

posenc_status pe_run_copy(posenc_context *ctx, const struct pe_copy_op *op);
posenc_status pe_run_sinusoidal(posenc_context *ctx, const struct pe_sinusoidal_op *op);
posenc_status pe_run_rope(posenc_context *ctx, const struct pe_rope_op *op);
posenc_status pe_run_learned(posenc_context *ctx, const struct pe_learned_op *op);
posenc_status pe_run_alibi(posenc_context *ctx, const struct pe_alibi_op *op);
posenc_status pe_run_relbias(posenc_context *ctx, const struct pe_relbias_op *op);
posenc_status pe_run_fill(posenc_context *ctx, const struct pe_fill_op *op);
/* dst (i32, any view) gets start + step * i0 in every element (32-bit wrapping), made on
 * the device like posenc_fill: no host write, so no wait on OpenCL's queue and nothing
 * refused while a Vulkan context records (ops_attention.c's implicit positions).
 * test_fill checks it on every backend. */
posenc_status pe_fill_ramp_i32(posenc_context *ctx, const posenc_tensor *dst, int32_t start,
                               int32_t step);
posenc_status pe_run_set_rows(posenc_context *ctx, const struct pe_set_rows_op *op);
posenc_status pe_run_softmax(posenc_context *ctx, const struct pe_softmax_op *op);

/* POSENC_ERR_UNSUPPORTED (message naming op_name, the view and the limit) when one of
 * views[0 .. n_views) spans more than the binding limit. */
posenc_status pe_check_binding(posenc_context *ctx, const char *op_name, int n_views,
                               const struct pe_view *const *views, const char *const *names);

#endif
