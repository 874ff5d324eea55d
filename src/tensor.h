/* tensor.h - shared argument checks for tensor views (core only). */
#ifndef POSENC_TENSOR_H
#define POSENC_TENSOR_H

#include "internal.h"

/*
 * Check a tensor argument named `name` (used in messages: "dst", "x", "pos"): not NULL,
 * a buffer of this context, a known dtype, ne >= 0, nb >= 0 and offset multiples of the
 * element size, no int64 overflow, inside its buffer; for outputs, no two elements at
 * one address. On success fill *out_view (element offset/strides) if not NULL.
 */
posenc_status pe_check_tensor(posenc_context *ctx, const char *name, const posenc_tensor *t,
                              bool is_output, struct pe_view *out_view);
bool pe_tensor_empty(const posenc_tensor *t);
/* Byte range [begin, end) a non-empty tensor touches in its buffer. */
void pe_tensor_byte_range(const posenc_tensor *t, uint64_t *begin, uint64_t *end);
/* Do the byte ranges of two non-empty tensors of one buffer intersect? */
bool pe_tensors_overlap(const posenc_tensor *a, const posenc_tensor *b);
/* Does a byte of some element of a lie in some element of b (both of one buffer)? Exact
 * where the byte ranges intersect but the elements interleave without sharing a byte (q
 * and k heads of one fused QKV buffer); a case too costly to decide (rare: elements
 * interleaved one by one in ways a stride residue does not separate, over a huge view) is
 * answered true. */
bool pe_tensors_share_elements(const posenc_tensor *a, const posenc_tensor *b);
/* The same elements at the same addresses (in-place use). */
bool pe_tensors_identical(const posenc_tensor *a, const posenc_tensor *b);
bool pe_same_shape(const posenc_tensor *a, const posenc_tensor *b);

#endif
