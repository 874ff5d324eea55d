/*
 * enc_checks.h - argument checks shared by the learned, 2-D and attention-bias front ends
 * (ops_learned.c, ops_vision2d.c, ops_bias.c). Core only; every message names the
 * argument and its value, as pe_check_tensor's do.
 */
#ifndef POSENC_ENC_CHECKS_H
#define POSENC_ENC_CHECKS_H

#include "tensor.h"

/* `name`->dtype is f32 or f16. */
posenc_status pe_enc_float(posenc_context *ctx, const char *name, const posenc_tensor *t);

/* t->ne equals want[] where want[k] >= 0 (-1: any). `layout` describes the expected shape
 * in the message ("[d, rows, 1, 1]"). */
posenc_status pe_enc_shape(posenc_context *ctx, const char *name, const posenc_tensor *t,
                           const int64_t want[4], const char *layout);

/* An output may be exactly an input (in place, when may_be_identical) or disjoint. */
posenc_status pe_enc_alias(posenc_context *ctx, const char *out_name, const posenc_tensor *out,
                           const char *in_name, const posenc_tensor *in, bool may_be_identical);

/* params->reserved[0 .. n-1] are zero. */
posenc_status pe_enc_reserved(posenc_context *ctx, const uint32_t *reserved, size_t n);

/* A 0/1 flag field named `name` ("params->causal"). */
posenc_status pe_enc_flag(posenc_context *ctx, const char *name, int32_t value);

/* Read the whole byte range of a non-empty tensor back to the host (waits for queued
 * work). On success *out_img (malloc'd, free it) holds bytes [*out_begin, ...) of the
 * buffer; element (i0..i3) is at out_img + (t->offset - begin) + sum ik*nb[k]. */
posenc_status pe_enc_read_back(posenc_context *ctx, const char *name, const posenc_tensor *t,
                               unsigned char **out_img, uint64_t *out_begin);

#endif
