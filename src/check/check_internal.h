/* check_internal.h - helpers shared by the case runners of src/check (not installed). */
#ifndef POSENC_CHECK_INTERNAL_H
#define POSENC_CHECK_INTERNAL_H

#include "check.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PC_GUARD 64     /* guard bytes before and after every output view */
#define PC_POISON 0xA5u /* byte pattern outputs are filled with before an op */

/* A layout of ne in a byte image: offset, strides, total bytes (guards included). */
struct pc_layout {
    size_t offset;
    int64_t nb[4];
    size_t bytes;
};

struct pc_layout make_layout(const int64_t ne[4], size_t es, enum pc_view view);
size_t byte_at(const struct pc_layout *l, int64_t i0, int64_t i1, int64_t i2, int64_t i3);
double get_val(const unsigned char *img, size_t at, posenc_dtype dt);
void set_val(unsigned char *img, size_t at, posenc_dtype dt, double v);
posenc_status upload(posenc_context *ctx, const unsigned char *img, size_t bytes,
                     posenc_buffer **out);
posenc_tensor view_of(posenc_buffer *b, const struct pc_layout *l, posenc_dtype dt,
                      const int64_t ne[4]);
/* One tensor of a case: its host image (NULL: the tensor is not used), layout, type and
 * shape. */
struct pc_img {
    unsigned char *img;
    struct pc_layout l;
    posenc_dtype dt;
    int64_t ne[4];
};

/* t as a tensor of shape ne and type dt laid out as l, its image filled with PC_POISON;
 * false when out of memory (t->img NULL). */
bool pc_img_alloc(struct pc_img *t, const int64_t ne[4], posenc_dtype dt, struct pc_layout l);
/* Every element of t uniform in [-2, 2) (pc_rand_uniform), in index order i0 fastest. */
void pc_img_fill_random(struct pc_img *t, uint64_t *rng);
/* Element (i0, i1, i2, i3) of t as a double, or set to v (rounded to t's type). */
double pc_img_val(const struct pc_img *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);
void pc_img_put(struct pc_img *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, double v);

/* One output element compared with the reference's: its error |dv - rv| (0 where both are
 * NaN, or the same infinity; infinite where only one is) against bound, counted in r
 * (n_checked, n_bad, worst_ratio, max_err and bound_at_max). The first element over its
 * bound is described in r->msg, with what ("dst", "weights", ...) naming the output where
 * a case has several (NULL: none). */
void pc_compare(struct pc_result *r, const char *what, int64_t i0, int64_t i1, int64_t i2,
                int64_t i3, double dv, double rv, double bound);

void add_case(struct pc_case **cases, size_t *n, size_t *cap, const struct pc_case *c);
const char *view_name(enum pc_view v);

void pc_rope_cases(struct pc_case **cases, size_t *n, size_t *cap);
/* check_encodings.c: learned, 2-D, relative bias and ALiBi cases (op == PC_OP_COUNT: all). */
void pc_encoding_cases(enum pc_op op, struct pc_case **cases, size_t *n, size_t *cap);
void pc_run_encoding_case(posenc_context *ref, posenc_context *dut, const struct pc_case *c,
                          struct pc_result *r);
void pc_run_rope_case(posenc_context *ref, posenc_context *dut, const struct pc_case *c,
                      struct pc_result *r);
/* check_copy.c: posenc_copy cases (exact results, bit for bit). */
void pc_copy_cases(struct pc_case **cases, size_t *n, size_t *cap);
void pc_run_copy_case(posenc_context *ref, posenc_context *dut, const struct pc_case *c,
                      struct pc_result *r);
/* check_attention.c: posenc_attention cases. */
void pc_attention_cases(struct pc_case **cases, size_t *n, size_t *cap);
void pc_run_attention_case(posenc_context *ref, posenc_context *dut, const struct pc_case *c,
                           struct pc_result *r);

#endif
