/*
 * check.h - the verification cases shared by the test suites and `posenc verify`.
 *
 * Not part of the public API (built as a static helper library, not installed). A case
 * is data: every parameter is in its name, so a failure can be reproduced from the name
 * alone. pc_run_case() runs one case on a device under test (dut) and on the CPU
 * reference (ref), with the same seeded inputs, poisoned outputs and guard bytes, and
 * compares element by element against a per-element bound that is derived from f32/f16
 * rounding (see pc_bound_* in check.c, where each bound is justified).
 */
#ifndef POSENC_CHECK_H
#define POSENC_CHECK_H

#include "posenc.h"

#include <stdbool.h>
#include <stdint.h>

enum pc_op {
    PC_OP_SINUSOIDAL = 0,
    PC_OP_ROPE = 1,
    /* check_encodings.c */
    PC_OP_LEARNED = 2,
    PC_OP_LEARNED_BACKWARD = 3,
    PC_OP_SINCOS_2D = 4,
    PC_OP_RESIZE_2D = 5,
    PC_OP_RELBIAS = 6,
    PC_OP_RELBIAS_BACKWARD = 7,
    PC_OP_ALIBI = 8,
    /* check_copy.c */
    PC_OP_COPY = 9,
    /* check_attention.c */
    PC_OP_ATTENTION = 10,
    PC_OP_COUNT
};

/* How tensors are laid out in their buffers. */
enum pc_view {
    PC_VIEW_CONTIGUOUS = 0,
    PC_VIEW_PADDED = 1,   /* every row stride padded, odd element offset */
    PC_VIEW_PERMUTED = 2  /* dims 1 and 2 swapped in memory (ggml-style permute) */
};

enum pc_pos_kind {
    PC_POS_SEQUENTIAL = 0, /* i32 0, 1, 2, ... (+ batch index * 3) */
    PC_POS_LARGE = 1,      /* i32 uniform in [0, pos_max) */
    PC_POS_FLOAT = 2       /* f32 uniform in [0, pos_max), fractional (time stamps) */
};

/* The attention-specific part of a case (check_attention.c). */
struct pc_attn_case {
    posenc_attention_encoding encoding;
    int64_t hk, tk, dv;          /* K/V heads, keys, V's head dim */
    posenc_dtype k_dtype, v_dtype;
    int32_t causal, q_offset, k_offset;
    float scale;                 /* params->scale (0: default) */
    int weights;                 /* 0: no weights output; 1: f32; 2: f16 */
    int mask;                    /* 0: none; 1: f32 [Tk, Tq, 1, B]; 2: f16 [Tk, Tq, Hq, 1];
                                    3: f16 [Tk, Tq, 1, 1] causal (ggml's KQ mask) */
    int explicit_pos;            /* q_pos / k_pos tensors (i32, per batch, 4 streams) */
    int pe_on_v;                 /* POSENC_ATTENTION_PE_ON_V */
    int big;                     /* a large case: run by `posenc verify`, not the suites */
};

struct pc_case {
    char name[192];
    enum pc_op op;
    posenc_dtype dtype;    /* dst */
    posenc_dtype x_dtype;  /* input (fused ops) */
    int has_x;             /* 0: table only; 1: fused add with a separate x; 2: in place */
    enum pc_view view;
    enum pc_pos_kind pos_kind;
    int pos_batched;       /* positions per batch row (P2 = B2) instead of broadcast */
    int64_t pos_max;
    int64_t ne[4];
    uint64_t seed;
    struct posenc_sinusoidal_params sin;
    /* rope */
    int rope_call;                      /* enum pc_rope_call */
    struct posenc_rope_params rope;     /* pointers point at static tables in check_rope.c */
    struct posenc_rope_params rope_from;/* rerotate: the table the keys were rotated with */
    int64_t k_heads;                    /* rope_qk: heads of k */
    int n_streams;                      /* positions per token */
    int64_t pos_shift;                  /* rerotate: pos_to = pos_from - pos_shift */
    /* learned, 2-D and attention-bias ops (check_encodings.c). ne is the shape of the
     * tokens (learned: [d, T, B]; backward: dy), the output grid ([d, rows]) or the
     * logits ([K, Q, H, B]); dtype is the output's (dst or dtable), x_dtype the input's
     * (x, dy, logits, dlogits). */
    posenc_dtype table_dtype;           /* learned table, relbias table, resize src */
    int64_t rows;                       /* learned: table rows */
    int64_t grid[4];                    /* sincos_2d: h, w; resize_2d: src h, w, dst h, w */
    struct posenc_2d_params grid2d;
    struct posenc_resize_params resize;
    struct posenc_relbias_params relbias;
    struct posenc_alibi_params alibi;   /* slopes point at a static table */
    /* copy (check_copy.c): x_dtype / view are the source's, dtype / out_view the dst's */
    enum pc_view out_view;
    /* attention (check_attention.c): ne is q's [D, Hq, Tq, B], dtype dst's, x_dtype q's,
     * table_dtype the learned / relbias table's, rows the learned table's; sin, rope,
     * alibi and relbias the encodings' params */
    struct pc_attn_case attn;
};

enum pc_rope_call { PC_ROPE = 0, PC_ROPE_QK = 1, PC_ROPE_REROTATE = 2 };

struct pc_result {
    posenc_status status;   /* of the op on the dut (or of a setup step) */
    double max_err;         /* max |dut - ref| */
    double bound_at_max;    /* the bound at the element of max_err */
    double worst_ratio;     /* max err/bound (<= 1 passes) */
    int64_t n_checked;
    int64_t n_bad;          /* elements over their bound, or NaN mismatches */
    int64_t guard_bad;      /* bytes outside the output view that changed */
    bool pass;
    char msg[320];
};

/* Names of the ops as used by --op ("sinusoidal"). */
const char *pc_op_name(enum pc_op op);

/* All cases of `op` (or every op for PC_OP_COUNT). Returns a malloc'd array; free() it. */
struct pc_case *pc_cases(enum pc_op op, size_t *out_count);

/* An attention case with every dtype dt (q, k, v, the output and a table): q [D, Hq, Tq, B],
 * Hk K/V heads of Tk keys, Dv = D, encoding e with its defaults (relative bias: T5;
 * learned: rows 0, to be set), the inputs drawn from seed; unnamed. */
struct pc_case pc_attention_case(posenc_attention_encoding e, posenc_dtype dt, int64_t D,
                                 int64_t Hq, int64_t Hk, int64_t Tq, int64_t Tk, int64_t B,
                                 uint64_t seed);

/* Run one case on `dut` against `ref` (a CPU context). */
void pc_run_case(posenc_context *ref, posenc_context *dut, const struct pc_case *c,
                 struct pc_result *out);

/* Tolerances (also used by the tests' own checks). u = 2^-24 (f32 unit roundoff). */
double pc_ulp32(double v);
double pc_ulp16(double v);
/* The accuracy contract (include/posenc.h, docs/accuracy.md, "Angles"): every backend forms
 * the angle pos*w and its sin/cos within PC_SINCOS_ERR of the exact values for |pos*w| <=
 * 2^24 (PC_ANGLE_MAX), whatever the position in that range. */
#define PC_SINCOS_ERR (4.0 * 0x1p-24)
#define PC_ANGLE_MAX 0x1p24
/* The extra error of an angle of magnitude a: 0 inside the contract's range; past it
 * posenc promises only values in [-1, 1], so 2 (anything). */
double pc_angle_err32(double a);
/* |f32 device result - exact| for sin/cos of the angle pos*w, magnitude |angle| = a,
 * fused with |x*scale| = xs (0 when not fused), stored as f32: the same at every
 * position up to |a| = 2^24. */
double pc_bound_sincos_f32(double a, double xs);
/* |f32 device result - exact| of one rotated element m*(xa cos - xb sin) (or its
 * partner), given `angle_err` on top of the contract's sin/cos error (pc_angle_err32 of
 * the angle: 0 inside the contract), magnitude m, and |xa| + |xb| = xsum. */
double pc_bound_rope_f32(double angle_err, double m, double xsum);
/* The same stored as f16: the f32 bound plus one f16 ulp of the result. */
double pc_bound_to_f16(double bound_f32, double value);

/*
 * Attention helpers for the property tests (check_attention.c). pc_attn_eval runs case c
 * on ctx with its seeded inputs, the tokens permuted (q_perm [Tq] / k_perm [Tk]: token i
 * takes the content of token perm[i]; NULL = as generated; the positions stay with the
 * slots) and every position moved by `shift` (offsets and explicit positions). It returns
 * the weights [Tk, Tq, Hq, B] and the output [Dv, Hq, Tq, B] as packed doubles, each with
 * a bound on its distance from the exact result (derived in check_attention.c, computed
 * from this run's own weights), and the inputs it used. Free with pc_attn_result_free.
 */
struct pc_attn_result {
    int64_t n_w, n_o;
    double *w, *w_bound;
    double *o, *o_bound;
    /* the inputs as stored (packed doubles, after permutation): q [D, Hq, Tq, B],
     * k [D, Hk, Tk, B], v [Dv, Hk, Tk, B], and the learned / relbias table [n0, n1]
     * (NULL without one) */
    double *q, *k, *v, *table;
};
posenc_status pc_attn_eval(posenc_context *ctx, const struct pc_case *c, const int64_t *q_perm,
                           const int64_t *k_perm, int32_t shift, struct pc_attn_result *out,
                           char *msg, size_t msg_size);
void pc_attn_result_free(struct pc_attn_result *r);

/* Seeded random numbers (splitmix64). */
uint64_t pc_rand_u64(uint64_t *state);
double pc_rand_uniform(uint64_t *state); /* [0, 1) */

#endif
