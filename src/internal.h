/*
 * internal.h - what the core and every backend share: the context and buffer structs,
 * error reporting, and the resolved (validated, defaults applied) op descriptions that
 * the front end hands to a backend through its vtable (backend.h).
 */
#ifndef POSENC_INTERNAL_H
#define POSENC_INTERNAL_H

#include "posenc.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define PE_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PE_PRINTF(a, b)
#endif

#define PE_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define PE_ERR_MAX 512
#define PE_MAX_THREADS 1024 /* posenc_context_params.n_threads */

#define PE_RETURN_IF_ERROR(expr)            \
    do {                                    \
        posenc_status pe_st_ = (expr);      \
        if (pe_st_ != POSENC_OK)            \
            return pe_st_;                  \
    } while (0)

struct pe_backend;

/* Scratch (scratch.c): device temporaries of the front end's composite ops, kept by the
 * context between calls. */
#define PE_SCRATCH_SLOTS 8
#define PE_SCRATCH_KEEP ((size_t)256 << 20) /* bytes kept between calls, at most */
struct pe_scratch_slot {
    struct posenc_buffer *buf; /* NULL: empty */
    bool busy;                 /* taken by the call running now */
    uint64_t gen;              /* the call (ctx->scratch_gen) that last gave it back */
    /* What the buffer holds, for pe_scratch_find (NULL: nothing to find again): the
     * caller's description of its content (malloc'd copy) and how many rows of it are
     * valid. Cleared whenever the buffer is taken for anything else. */
    void *key;
    size_t key_len;
    int64_t key_rows;
};

struct posenc_context {
    struct pe_backend *backend;
    posenc_backend_kind kind;
    int32_t device;
    uint32_t flags;
    int32_t n_threads;    /* params->n_threads (CPU backend; 0 = all online cores) */
    uint64_t max_binding_env; /* POSENC_MAX_BINDING (bytes; 0 = not set), src/split.c */
    bool host_owned;      /* on the application's device (posenc_context_create_from_host) */
    posenc_log_fn log_fn;
    posenc_log_level log_level;
    void *log_user_data;
    int64_t live_buffers;
    struct posenc_buffer *buffers; /* live buffers, to release what the user forgot */
    char last_error[PE_ERR_MAX];
    bool quiet_errors;    /* AUTO's probe: pe_error records but does not log (the caller
                           * logs the skipped backend at INFO / WARN) */
    /* One thread at a time (PE_ENTER): the thread inside a call (its pe_thread_tag's
     * address; 0 = none) and how deep (a public call may make others on the same ctx). */
    _Atomic uintptr_t owner;
    int32_t depth;
    struct pe_rope_cache *rope_cache; /* resolved RoPE tables (rope_freq.c); NULL until used */
    struct pe_ff_cache *ff_cache;     /* device freq_factors read back (rope_freq.c) */
    /* posenc_context_set_check_only: ops check everything that needs no data and stop
     * before they read back, allocate temporaries or launch. Tensors may then have no
     * buffer (pe_check_tensor). */
    bool check_only;
    uint64_t next_buffer_id;          /* serial numbers of this context's buffers */
    /* POSENC_DEVICE_PRESET (test only, src/preset.h): the limits the OpenCL and Vulkan
     * backends lower theirs to at device discovery; NULL = the device's own. */
    const struct pe_preset *preset;
    /* posenc_vulkan_record_begin .. _end (record_vulkan.c): scratch.c then keeps nothing */
    bool recording;
    struct pe_scratch_slot scratch[PE_SCRATCH_SLOTS];
    uint64_t scratch_gen;  /* composite calls ended (pe_scratch_give) */
    uint64_t scratch_max;  /* the device's largest buffer (0: not read yet) */
    uint64_t scratch_made; /* buffers scratch.c made to keep (tests: pe_scratch_stats) */
};

struct posenc_buffer {
    posenc_context *ctx;  /* NULL once the context was destroyed before the buffer */
    size_t size;
    void *mem;            /* the backend's own buffer object */
    struct posenc_buffer *prev, *next;
    /* A serial number (never reused within a context) and a count of the writes posenc
     * made to the buffer (posenc_buffer_write, every op that takes a view of it as an
     * output): together they tell whether a cached read-back is still current. A
     * wrapped buffer may be written by the application behind posenc's back, so nothing
     * read from one is cached. */
    uint64_t id;
    uint64_t generation;
    bool wrapped;
    /* posenc_buffer_wrap_host: the caller's host memory (also `wrapped`); destroyed through
     * the backend's buffer_unwrap_host, which never frees it. */
    bool host_memory;
};

/* A view of `b` is about to be written by posenc: cached read-backs of it are stale. */
static inline void pe_buffer_touch(struct posenc_buffer *b)
{
    if (b)
        b->generation++;
}

/* Record an error on ctx (formatted message) and as this thread's posenc_last_error(), log
 * it, and return `status`. With ctx NULL (calls without a context), only the latter. */
posenc_status pe_error(posenc_context *ctx, posenc_status status, const char *fmt, ...)
    PE_PRINTF(3, 4);
/* Set this thread's posenc_last_error() message (pe_error does it too, with or without a
 * context): for the failures of calls without a context that do not go through pe_error. */
void pe_set_thread_error(const char *fmt, ...) PE_PRINTF(1, 2);
/* Log a message at `level` through the context's callback (if any). */
void pe_log(posenc_context *ctx, posenc_log_level level, const char *fmt, ...) PE_PRINTF(3, 4);
void pe_clear_error(posenc_context *ctx);

/* Scratch (scratch.c, whose head has the policy). pe_scratch_take: a buffer of at least
 * `bytes` for this call, kept by the context or made now (posenc_buffer_create's errors);
 * pe_scratch_give: the call's n buffers back to the context (those made for the call only
 * destroyed), each set to NULL, and the call is over (Vulkan then prefers the other set of
 * buffers); pe_scratch_release: destroy what is kept (posenc_context_destroy);
 * pe_scratch_stats (tests): buffers made to keep so far, kept now and their bytes.
 * pe_scratch_keep: the bytes kept at most (PE_SCRATCH_KEEP; tests lower it). */
posenc_status pe_scratch_take(posenc_context *ctx, size_t bytes, struct posenc_buffer **out);
/* A kept buffer whose content the caller described with pe_scratch_set_key (the same
 * key_len bytes, at least `rows` valid rows), taken for this call like pe_scratch_take's,
 * and its count of valid rows (*out_rows, when not NULL); false (nothing taken) when none
 * is kept, or while recording (scratch keeps nothing then).
 * pe_scratch_set_key: describe the content of `buf`, a buffer this call took from the
 * scratch, for later calls (a copy of the key; nothing when buf is not kept, or when the
 * copy cannot be made). */
bool pe_scratch_find(posenc_context *ctx, const void *key, size_t key_len, int64_t rows,
                     struct posenc_buffer **out, int64_t *out_rows);
void pe_scratch_set_key(posenc_context *ctx, const struct posenc_buffer *buf, const void *key,
                        size_t key_len, int64_t rows);
void pe_scratch_give(posenc_context *ctx, struct posenc_buffer **bufs, int n);
void pe_scratch_release(posenc_context *ctx);
void pe_scratch_stats(const posenc_context *ctx, uint64_t *out_made, int *out_kept,
                      size_t *out_bytes);
extern size_t pe_scratch_keep;

/*
 * One context, one thread at a time, enforced: every public call on a context starts with
 * PE_ENTER(ctx) (after its NULL check). It takes the context for the calling thread -- one
 * atomic compare-and-swap; a call made inside another on the same thread nests -- clears
 * the last error, and gives the context back when the function returns (a cleanup
 * variable, GCC / Clang). While another thread is inside a call on ctx the call returns
 * POSENC_ERR_INVALID_ARGUMENT at once, doing nothing: its message is kept for this thread
 * (posenc_context_last_error on this thread reads it), not in ctx and not logged, since
 * the other thread owns both. Other compilers get no check.
 */
posenc_status pe_enter(posenc_context *ctx, const char *fn);
void pe_leave(posenc_context *ctx);
/* Take ctx for this thread, waiting while another thread is inside a call (the calls that
 * cannot refuse: posenc_buffer_destroy, posenc_context_destroy). */
void pe_enter_wait(posenc_context *ctx);
struct pe_guard {
    posenc_context *ctx;
};
static inline void pe_guard_release(struct pe_guard *g)
{
    if (g->ctx)
        pe_leave(g->ctx);
}
#if defined(__GNUC__)
#define PE_ENTER(c_)                                                                        \
    struct pe_guard pe_guard_ __attribute__((cleanup(pe_guard_release))) = {NULL};          \
    do {                                                                                    \
        posenc_status pe_est_ = pe_enter((c_), __func__);                                   \
        if (pe_est_ != POSENC_OK)                                                           \
            return pe_est_;                                                                 \
        pe_guard_.ctx = (c_);                                                               \
    } while (0)
#else
#define PE_ENTER(c_) pe_clear_error(c_)
#endif

/* snprintf into a fixed buffer that is always NUL-terminated (size > 0). */
void pe_strlcpy(char *dst, const char *src, size_t size);

/* The monotonic clock in nanoseconds (src/status.c), for the backends' bounded waits. */
int64_t pe_mono_ns(void);
/* The host's online CPUs, at least 1, asked once per process (src/status.c). */
int pe_host_cpus(void);

/* Host memory for a buffer of `size` bytes (src/host_mem.c), released with free(): 64-byte
 * aligned, or from PE_HOST_HUGE_PAGE bytes up where the OS has transparent huge pages
 * (Linux) 2 MiB aligned, its size rounded up to a multiple of 2 MiB and asked for huge
 * pages (*huge = true). NULL when out of memory. */
#define PE_HOST_HUGE_PAGE ((size_t)2 << 20)
void *pe_host_alloc(size_t size, bool *huge);

/* Test-only fault injection (src/context.c, tests/test_faults.c): a backend calls it right
 * before a device allocation it makes for itself and fails that allocation as out of
 * device memory when it returns true. Always false in normal use. */
bool pe_fault_device_alloc(void);
/* The same for a program build or pipeline creation (a cache miss): true = fail it with
 * POSENC_ERR_BACKEND. */
bool pe_fault_build(void);

/* f16 <-> f32 / double conversions (round to nearest even). */
uint16_t pe_f16_from_double(double v);
double pe_f16_to_double(uint16_t h);

/*
 * A validated tensor as a backend sees it: the backend's memory object, and offset and
 * strides in ELEMENTS (the front end checked that the byte values are multiples of the
 * element size). Broadcast dimensions have stride 0.
 */
struct pe_view {
    void *mem;
    posenc_dtype dtype;
    int64_t offset;   /* elements */
    int64_t ne[4];
    int64_t st[4];    /* elements */
};

/* posenc_copy, resolved: dst[i0..i3] = src[i0..i3] converted to dst's dtype (f32 -> f16
 * rounds to nearest even). Same shape; dst is disjoint from src (the front end turns an
 * identical view into a no-op). */
struct pe_copy_op {
    struct pe_view src, dst;
};

/* posenc_sinusoidal, resolved. */
struct pe_sinusoidal_op {
    struct pe_view dst;   /* [d, T, B2, B3] */
    struct pe_view x;     /* same shape as dst; x.mem == NULL when there is no input */
    struct pe_view pos;   /* indexed as pos[i1*st0 + i2*st1 + i3*st2] (ne/st [0..2]) */
    int64_t half;         /* d/2 */
    posenc_sin_layout layout;
    float x_scale;
    const double *freq;    /* [half], double (the CPU reference uses these) */
    const float *freq_f32; /* [2*half]: freq * 2/pi split into f32 words for the GPU
                            * kernels: [0, half) hi words, [half, 2*half) lo words
                            * (pe_freq_split) */
};

/*
 * A resolved RoPE table (built by src/rope_freq.c): per rotated pair j < n_pairs its
 * frequency (double for the CPU reference; in quarter turns as two f32 words hi + lo for
 * the GPU kernels, see pe_freq_split) and position stream.
 */
struct pe_rope_table {
    int64_t n_pairs;
    int64_t n_dims;           /* 2 * n_pairs */
    int64_t n_offs;
    posenc_rope_mode mode;
    double *freq;             /* [n_pairs] */
    float *freq_f32;          /* [2*n_pairs]: hi words, then lo words (pe_freq_split) */
    uint8_t *stream;          /* [n_pairs] */
    struct posenc_rope_info info;
};

/*
 * The GPU kernels' form of a frequency table: freq[j] (radians per position, double) in
 * quarter turns per position, v = freq[j] * 2/pi (double), as two f32 words hi[j] = f32(v)
 * and lo[j] = f32(v - hi[j]), so that hi + lo is within ~2^-48 relative of v
 * (docs/accuracy.md, "Angles"). A kernel forms pos*v as xh = pos*hi plus its exact rounding
 * error plus pos*lo, takes out the nearest whole number of quarter turns (q = rint(xh),
 * exact) and turns the rest (|f| <= 1/2) into radians -- no device f64 needed. A |v| below
 * FLT_MIN (2^-126) becomes hi = lo = 0 (the angle is then below 2^-102 for any |pos| <
 * 2^24: sin = 0, cos = 1 within rounding, the same on every device, with or without
 * denormals). Returns false when some freq or v is not finite or does not fit in f32 (the
 * callers turn that into INVALID_ARGUMENT before any backend runs); *bad_j is then the
 * first offender.
 */
bool pe_freq_split(const double *freq, int64_t n, float *hi, float *lo, int64_t *bad_j);

/*
 * Check `params` (NULL = defaults) for a head of head_dim dims, resolve every default and
 * build the table. Messages name the field ("params->n_dims = 7 ..."). `seq_len` replaces
 * params->scaling.seq_len when that is 0 (the front end found it from the positions);
 * pass 0 when it is unknown (then DYNAMIC_NTK / LONGROPE without seq_len is an error).
 * ctx may be NULL (no message is recorded then).
 */
posenc_status pe_rope_table_build(posenc_context *ctx, int64_t head_dim,
                                  const struct posenc_rope_params *params, int32_t seq_len,
                                  struct pe_rope_table *out);
void pe_rope_table_free(struct pe_rope_table *t);
/* The same through the context's cache of resolved tables (rope_freq.c): *owned false means
 * *out borrows a cached table (valid until the next call on ctx; do not free it). */
posenc_status pe_rope_table_cached(posenc_context *ctx, int64_t head_dim,
                                   const struct posenc_rope_params *params, int32_t seq_len,
                                   struct pe_rope_table *out, bool *owned);
void pe_rope_cache_free(posenc_context *ctx);

/* posenc_rope / posenc_rope_qk / posenc_rope_rerotate, resolved. For each pair j of the
 * window, each head i1, token i2 and batch i3:
 *   angle = sign * pos[i2, stream[j], i3] * freq[j]
 *           (rerotate: pos[..stream[j]..]*freq[j] - pos_from[..stream_from[j]..]*freq_from[j])
 *   (dst[a], dst[b]) = mscale * (x[a] cos - x[b] sin, x[a] sin + x[b] cos)
 * with a = n_offs + 2j, b = a + 1 (pairing 0) or a = n_offs + j, b = a + n_pairs
 * (pairing 1). Dims outside [n_offs, n_offs + 2*n_pairs) are copied from x to dst. */
struct pe_rope_op {
    struct pe_view x, dst;       /* [head_dim, H, T, B] */
    struct pe_view x2, dst2;     /* posenc_rope_qk's k, k_out; mem == NULL otherwise */
    struct pe_view pos;          /* (t, s, b) at offset + t*st[0] + s*st[1] + b*st[2];
                                  * st[2] == 0 when the positions are shared by the batch */
    struct pe_view pos_from;     /* rerotate only; mem == NULL otherwise */
    int64_t n_offs, n_pairs;
    int pairing;                 /* 0: adjacent pairs (NORMAL), 1: half-split (NEOX...) */
    int sign;                    /* +1 forward, -1 backward */
    double mscale;
    const double *freq;          /* [n_pairs] */
    const float *freq_f32;       /* [2*n_pairs]: hi words, then lo words (pe_freq_split) */
    const uint8_t *stream;
    const double *freq_from;     /* rerotate only */
    const float *freq_from_f32;  /* [2*n_pairs], as freq_f32 */
    const uint8_t *stream_from;
    /* posenc_rope_set_rows only (mem == NULL otherwise): token (t, b) is written to dst
     * token rows[offset + t*st[0] + b*st[1]] (st[1] == 0 when shared by the batch; ne =
     * {T, 1 or B, 1, 1}; i32 or i64) instead of t; dst.ne[2] is then n_rows, not T. An
     * index outside [0, n_rows) skips the token (the front end checked them unless
     * POSENC_ROWS_UNCHECKED). No x2, no pos_from; dst is disjoint from x. */
    struct pe_view rows;
    int64_t n_rows;
};

/* posenc_learned, resolved: dst[i0, t, b] = x[i0, t, b] + table[i0, pos(t, b)] (x.mem ==
 * NULL: no x). pos(t, b) at pos.offset + t*pos.st[0] + b*pos.st[1] (st[1] == 0 when
 * shared by the batch); every position was checked to be in [0, table.ne[1]). */
struct pe_learned_op {
    struct pe_view x, table, pos, dst;   /* x, dst [d, T, B]; table [d, rows] */
};

/* posenc_learned_backward, resolved: for each segment s (one table row), in order
 *   acc = sum over e in entries[seg_start[s] .. seg_start[s+1]) of dy[i0, t(e), b(e)]
 *   dtable[i0, seg_row[s]] += acc
 * with e = t + T*b a flat token index, entries sorted by row and, within a row, by e:
 * the summation order is fixed, so the result is deterministic. */
struct pe_learned_bwd_op {
    struct pe_view dy, dtable;           /* dy [d, T, B]; dtable [d, rows] */
    int64_t n_tokens;                    /* T (to split e into t, b) */
    int64_t n_segments;
    const int32_t *entries;              /* [T*B] */
    const int32_t *seg_start;            /* [n_segments + 1] */
    const int32_t *seg_row;              /* [n_segments] */
};

/* posenc_resize_2d, resolved: for output grid cell (r, c) and channel i0
 *   dst[i0, cls + r*dst_w + c] = sum_{a<4, b<4} wy[4r+a] wx[4c+b] src[i0, cls + iy[4r+a]*src_w + ix[4c+b]]
 * (bilinear uses two taps; the other weights are 0 with a valid index). With cls, row 0
 * of src is copied to row 0 of dst. */
struct pe_resize_op {
    struct pe_view src, dst;             /* [d, rows] */
    int64_t src_w, dst_h, dst_w;
    int cls;
    const int32_t *ix, *iy;              /* [4*dst_w], [4*dst_h] */
    const double *wx, *wy;               /* weights, double (CPU) */
    const float *wx_f32, *wy_f32;        /* the same in f32 (GPU) */
};

/* posenc_relbias, resolved: for (k, q, h, b):
 *   rel = (k + k_offset) - (q + q_offset)
 *   dst[k,q,h,b] = logits[k,q,h,b] + table[bucket[rel - rel_min], h]
 * (logits.mem == NULL: no logits). */
struct pe_relbias_op {
    struct pe_view logits, table, dst;   /* [K, Q, H, B]; table [n_buckets, H] */
    int64_t q_offset, k_offset;
    int64_t rel_min, n_rel;
    const int32_t *bucket;               /* [n_rel] */
    /* The whole op's list (pe_relbias_prepare), which bucket / rel_min / n_rel are a window
     * of after a cut or a query block: bucket_all[rel - rel_min_all]. A backend that
     * uploads the list uploads this one, so that the launches after the first find it
     * uploaded and allocate nothing. NULL: use the window. */
    const int32_t *bucket_all;
    int64_t rel_min_all, n_rel_all;
};

/* posenc_relbias_backward, resolved: for each bucket u and head h, in order
 *   acc = sum over rel in rels[seg_start[u] .. seg_start[u+1]) (ascending), over b, over
 *         q ascending (with k = q + q_offset + rel - k_offset in [0, K)) of dlogits[k,q,h,b]
 *   dtable[u, h] += acc */
struct pe_relbias_bwd_op {
    struct pe_view dlogits, dtable;
    int64_t q_offset, k_offset;
    int64_t rel_min, n_buckets;
    const int32_t *rels;                 /* rel - rel_min values, grouped by bucket */
    const int32_t *seg_start;            /* [n_buckets + 1] */
};

/* posenc_alibi, resolved: for (k, q, h, b), with qp = q + q_offset, kp = k + k_offset and
 * the distance dist = qp - kp formed in integers (symmetric: |qp - kp|):
 *   causal and kp > qp:  dst = -inf
 *   else                  dst = logits - slope[h] * (float)dist   (logits.mem == NULL: 0)
 */
struct pe_alibi_op {
    struct pe_view logits, dst;          /* [K, Q, H, B] */
    int64_t q_offset, k_offset;
    int causal, symmetric;
    const double *slopes;                /* [H] */
    const float *slopes_f32;
    /* A head cut (src/split.c) moves slopes / slopes_f32 to its first head, h_off: the
     * whole op's n_head_all slopes start at slopes_f32 - h_off. A backend that uploads the
     * slopes uploads them all once, so that the launches after the first allocate nothing
     * (n_head_all 0: only this launch's dst->ne[2] are known). */
    int64_t h_off, n_head_all;
};

/* posenc_softmax, resolved. For each row (i1, i2, i3) of x / dst, with the global head
 * h = h_off + i2 and batch b = b_off + i3 (src/split.c may cut the op into slices along
 * rows, heads and batches; h_off, b_off are 0 otherwise):
 *   v_k   = scale * x[k, i1, i2, i3] + slope[h] * mask[k, i1, h % mask.ne[2], b % mask.ne[3]]
 *           (mask.mem == NULL: no mask term; slopes_f32 == NULL: slope 1)
 *   m     = max(max_k v_k, sink[h])  (sinks.mem == NULL: no sink), sink[h] at
 *           sinks.offset + h * sinks.st[0]
 *   m == -inf (every v_k is -inf, no finite sink):  every dst_k = NaN (as ggml)
 *   else   dst_k = exp(v_k - m) / (sum_j exp(v_j - m) + exp(sink[h] - m))
 * x and dst are [n, rows, H, B] (dst may be exactly x: in place); the mask view has ne[0] =
 * n, ne[1] = rows (its rows past x's were dropped) and its own ne[2], ne[3] (a slice over
 * one head / batch narrows it to that plane, ne = 1); sinks has ne[0] = n_head. */
struct pe_softmax_op {
    struct pe_view x, dst;
    struct pe_view mask;      /* f32 or f16; mem == NULL: none */
    struct pe_view sinks;     /* f32 [n_head]; mem == NULL: none */
    int64_t h_off, b_off;
    int64_t n_head;           /* the whole op's x->ne[2]: length of slopes and sinks */
    double scale;
    float scale_f32;
    const double *slopes;     /* [n_head]; NULL: every slope is 1 */
    const float *slopes_f32;  /* the same rounded to f32 (GPU backends) */
};

/*
 * posenc_attention, resolved into three backend steps (src/ops_attention.c runs the
 * encodings around them with the ops above). Shapes: D = q.ne[0], Hq = q.ne[1],
 * Tq = q.ne[2], B = q.ne[3], Hk = k.ne[1], Tk = k.ne[2], Dv = v.ne[0]; group = Hq / Hk
 * (query head h reads K/V head h / group). The logits / probabilities tensor is always
 * a posenc temporary: f32, packed (st = {1, Tk, Tk*Tq, Tk*Tq*Hq}) and at offset 0 of its
 * own buffer, so a backend may hand it to a GEMM as is.
 */

/* attn_scores: for k < Tk, q < Tq, h < Hq, b < B
 *   logits[k, q, h, b] = scale * sum_{i < D} q[i, h, q, b] * k[i, h / group, k, b]
 * (scale_f32 is scale rounded to f32, for the GPU backends). */
struct pe_attn_scores_op {
    struct pe_view q;        /* [D, Hq, Tq, B] f32 or f16 */
    struct pe_view k;        /* [D, Hk, Tk, B] f32 or f16 */
    struct pe_view logits;   /* [Tk, Tq, Hq, B] f32, packed (above) */
    int64_t group;
    double scale;
    float scale_f32;
};

/* attn_softmax, in place on the logits, row by row (q, h, b):
 *   x_k = logits[k, q, h, b] + mask[k, q, h, b]        (mask.mem == NULL: no mask)
 *   x_k = -inf                   where causal and k + k_offset > q + q_offset
 *   m   = max_k x_k
 *   m == -inf (every key masked):   p_k = 0 for every k
 *   else                            p_k = exp(x_k - m) / sum_j exp(x_j - m)
 *   logits[k, q, h, b] = p_k, and weights[k, q, h, b] = p_k when weights.mem != NULL.
 * The mask view has the logits' ne; its st[2] / st[3] are 0 where it is broadcast over
 * heads / batches. */
struct pe_attn_softmax_op {
    struct pe_view logits;   /* [Tk, Tq, Hq, B] f32, packed */
    struct pe_view mask;     /* f32 or f16; mem == NULL: none */
    struct pe_view weights;  /* [Tk, Tq, Hq, B] f32 or f16; mem == NULL: none */
    int causal;
    int64_t q_offset, k_offset;
};

/* attn_output: for i < Dv, h < Hq, q < Tq, b < B
 *   dst[i, h, q, b] = sum_{k < Tk} p[k, q, h, b] * v[i, h / group, k, b] */
struct pe_attn_output_op {
    struct pe_view p;        /* [Tk, Tq, Hq, B] f32, packed: the softmax's result */
    struct pe_view v;        /* [Dv, Hk, Tk, B] f32 or f16 */
    struct pe_view dst;      /* [Dv, Hq, Tq, B] f32 or f16 */
    int64_t group;
};

/* attn_fused: posenc_attention without `weights`, in one pass over the keys (no logits in
 * memory). For q < Tq, h < Hq, b < B, with kv = h / group, qp = q + q_offset and
 * kp = k + k_offset:
 *   s_k = scale * sum_{i < D} q[i, h, q, b] * k[i, kv, k, b]
 *   s_k = softcap * tanh(s_k / softcap)   (softcap > 0 only; ggml's logit_softcap)
 *   x_k = s_k
 *         + bias(k, q, h)                 has_alibi:   as pe_alibi_op with logits 0:
 *                                           -slope[h] * (qp - kp) (symmetric: |qp - kp|),
 *                                           -inf where alibi.causal and kp > qp;
 *                                         has_relbias: table[bucket[(kp - qp) - rel_min], h]
 *                                           as pe_relbias_op (table view, bucket list);
 *         + slope_h * mask[k, q, h, b]    (mask.mem == NULL: none; mask.ne is the logits'
 *                                           [Tk, Tq, Hq, B], st[2] / st[3] are 0 where it is
 *                                           broadcast over heads / batches; slope_h =
 *                                           mask_slopes_f32[h], or 1 when it is NULL:
 *                                           ggml's max_bias ALiBi, which scales the mask)
 *   x_k = -inf                            where causal and kp > qp
 *   m   = max(max_k x_k, sink_h)          (sinks.mem == NULL: no sink term; sink_h at
 *                                           sinks.offset + h * sinks.st[0], f32)
 *   m == -inf (every key masked, no finite sink):  dst[:, h, q, b] = 0
 *   else   dst[i, h, q, b] = sum_k exp(x_k - m) * v[i, kv, k, b]
 *                            / (sum_k exp(x_k - m) + exp(sink_h - m))
 * A backend computes it with a running max and sum (online softmax), in f32 or wider,
 * and may split the keys of a row across work-groups / threads and merge the partial
 * (max, sum, acc) triples. It acquires its temporaries and programs before it writes dst.
 * The alibi / relbias members carry only the bias: their logits and dst views are unset
 * (mem == NULL). q and k are already encoded (RoPE / sinusoidal / learned are applied by
 * the front end into temporaries); v too with POSENC_ATTENTION_PE_ON_V. */
struct pe_attn_fused_op {
    struct pe_view q;        /* [D, Hq, Tq, B] f32 or f16 */
    struct pe_view k;        /* [D, Hk, Tk, B] f32 or f16 */
    struct pe_view v;        /* [Dv, Hk, Tk, B] f32 or f16 */
    struct pe_view dst;      /* [Dv, Hq, Tq, B] f32 or f16 */
    struct pe_view mask;     /* f32 or f16; mem == NULL: none */
    int64_t group;
    double scale;
    float scale_f32;
    int causal;
    int64_t q_offset, k_offset;
    int has_alibi, has_relbias;
    struct pe_alibi_op alibi;     /* has_alibi: slopes, symmetric, causal, offsets */
    struct pe_relbias_op relbias; /* has_relbias: table, bucket list, rel_min, offsets */
    /* ggml's flash_attn_ext extras (0 / NULL when unused): */
    float softcap;                /* > 0: tanh soft-capping of the scaled scores */
    const double *mask_slopes;    /* [Hq]: the mask is multiplied by slope_h (NULL: 1) */
    const float *mask_slopes_f32; /* the same rounded to f32 (GPU backends) */
    struct pe_view sinks;         /* f32 [Hq]; mem == NULL: none */
    /* RoPE on k inside the pass (has_krot; only for backends whose attn_krot says yes):
     * before its dot products, the row of key t of every K/V head in batch b is rotated
     * with krot's row (t, b), krot f32 [D, 1, Tk, B] (st[0] == 1; st[3] == 0 when the
     * batch shares positions): for pair j < krot_pairs with dims (a, b) = krot_adjacent ?
     * (off + 2j, off + 2j + 1) : (off + j, off + j + krot_pairs), off = krot_off,
     *     c = krot[a], s = krot[b],  k'_a = k_a c - k_b s,  k'_b = k_a s + k_b c
     * in f32; other dims as stored. (c, s are mscale cos / sin of the pair's angle; see
     * ops_attention.c, krot_table.) q arrives rotated already. */
    int has_krot;
    struct pe_view krot;
    int64_t krot_off, krot_pairs;
    int krot_adjacent;
};

/* posenc_fill, resolved: every element of dst gets `bits` (the value already converted to
 * dst's dtype on the host: f32 bits, f16 bits in the low 16, or the int32), plus step * i0
 * for a 4-byte dst (32-bit wrapping arithmetic; pe_fill_ramp_i32: positions start + t made
 * on the device). step is 0 for posenc_fill and for f16. */
struct pe_fill_op {
    struct pe_view dst;
    uint32_t bits;
    uint32_t step;
};

/* posenc_set_rows, resolved: for i0 < n, i1 < r, i2 < d2, i3 < d3
 *   j2 = (i2 + base2) % e2, j3 = (i3 + base3) % e3   (e2 = rows.ne[1], e3 = rows.ne[2])
 *   row = rows[rows.offset + i1*st[0] + j2*st[1] + j3*st[2]]   (i32 or i64)
 *   0 <= row < n_rows:  dst[i0, row, i2, i3] = src[i0, i1, i2, i3] converted
 *   else: nothing (only with POSENC_ROWS_UNCHECKED; otherwise the front end checked)
 * src [n, r, d2, d3], dst [n, n_rows, d2, d3]: dst.ne[1] == n_rows. base2 / base3 are the
 * coordinates of this launch's first (i2, i3) in the whole op (0 unless src/split.c cut
 * it); the rows view is never cut along dims 1 and 2. */
struct pe_set_rows_op {
    struct pe_view src, rows, dst;
    int64_t n_rows;
    int64_t base2, base3;
};

#endif
