/*
 * rows.h - the row-index checks shared by posenc_set_rows (ops_set_rows.c) and
 * posenc_rope_set_rows (ops_rope.c). Core only.
 */
#ifndef POSENC_ROWS_H
#define POSENC_ROWS_H

#include "tensor.h"

/* params NULL or valid (reserved zero, known flags); *out_unchecked = the
 * POSENC_ROWS_UNCHECKED flag. `name` is the argument's name in messages. */
posenc_status pe_rows_params(posenc_context *ctx, const char *name,
                             const struct posenc_set_rows_params *params, bool *out_unchecked);

/* `rows` (already checked with pe_check_tensor, non-empty) is i32 or i64. */
posenc_status pe_rows_dtype(posenc_context *ctx, const posenc_tensor *rows);

/* Read every element of `rows` back to the host (waits for queued work) and check it is in
 * [0, n_rows): POSENC_ERR_OUT_OF_RANGE naming the first bad element (in memory-order
 * of the indices i0, i1, i2) and its value. */
posenc_status pe_rows_read_check(posenc_context *ctx, const posenc_tensor *rows, int64_t n_rows);

#endif
