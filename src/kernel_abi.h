/*
 * kernel_abi.h - the layouts that host code and GPU kernels share, checked at compile
 * time. Each struct here is mirrored by a GLSL block; change both together.
 *
 * Vulkan guarantees only 128 bytes of push constants (maxPushConstantsSize), so every
 * push-constant struct asserts that it fits. Fields are 32-bit scalars only, so the C
 * layout and GLSL's std430 push-constant layout are the same by construction; the
 * offsetof asserts pin it down anyway.
 */
#ifndef POSENC_KERNEL_ABI_H
#define POSENC_KERNEL_ABI_H

#include <stddef.h>
#include <stdint.h>

/* ---- sinusoidal (shaders/sinusoidal.comp, block in shaders/sinusoidal_params.glsl) --- */

/* flags: bits 0-1 the layout (posenc_sin_layout), then: */
#define PE_SIN_FLAG_LAYOUT_MASK 0x3u
#define PE_SIN_FLAG_HAS_X       0x4u  /* dst = x*x_scale + PE; else dst = PE */
#define PE_SIN_FLAG_POS_F32     0x8u  /* positions are f32 bits; else int32 */
#define PE_SIN_FLAG_DST_WORDS   0x10u /* f16 dst, interleaved, every (sin, cos) pair is one
                                       * aligned 32-bit word: one plain store per pair */
#define PE_SIN_FLAG_DST_PAIR2   0x20u /* f16 dst, half-split layouts, n_half even, rows start
                                       * on even elements: a unit is pairs 2u and 2u+1, whose
                                       * sin values share a word and cos values share one */

/* Specialization constant 0 of sinusoidal.comp: 0 for the general path, or the vector
 * path (rows contiguous, starting on multiples of 4 elements (f32 views) or 8 (f16
 * views)): with f32 dst and x, d/2 a multiple of 4, a unit is 4 pairs (n_units =
 * n_half / 4), two vec4 accesses per row; in the variants with an f16 dst or x, d/2 a
 * multiple of 8, a unit is 8 pairs (n_units = n_half / 8), two runs of 8 elements per
 * row, each one uvec4 of halves (f16) or two vec4 (f32). A unit covers one (i1, i3) for
 * every i2, idx = u + n_units*(i1 + ne1*i3); the layout is bits 3-4. */
#define PE_SIN_SPEC_VEC          0x1u
#define PE_SIN_SPEC_HAS_X        0x2u
#define PE_SIN_SPEC_POS_SHARED   0x4u  /* pos_st1 == 0: one position for every i2 */
#define PE_SIN_SPEC_LAYOUT_SHIFT 3

/*
 * The shader's grid is flat: unit idx < n_total, grid-stride over gl_NumWorkGroups.x *
 * PE_VK_SIN_WG. idx = u + n_units*(i1 + ne1*(i2 + ne2*i3)); a unit is one (sin, cos) pair
 * i = u (n_units = n_half), or two with PE_SIN_FLAG_DST_PAIR2 (n_units = n_half/2).
 * The three divisions use multiply-high "magic numbers" (pe_vk_magic in ops_vulkan.c):
 * n / d = (hi + ((n - hi) >> min(l, 1))) >> (l - min(l, 1)), hi = mulhi(n, magic),
 * l = ceil(log2 d); the shifts l of the three divisors are packed in `shifts`.
 * Offsets and strides are in elements of each view's own dtype (an f16 element e is
 * half (e & 1) of 32-bit word e >> 1). Buffers are bound whole, so every index must fit
 * in uint32 (checked on the host).
 */
struct pe_vk_sinusoidal_push {
    uint32_t dst_off;
    uint32_t dst_st0, dst_st1, dst_st2, dst_st3;
    uint32_t x_off;
    uint32_t x_st0, x_st1, x_st2, x_st3;
    uint32_t pos_off;
    uint32_t pos_st0, pos_st1, pos_st2; /* for i1, i2, i3 (0 = broadcast) */
    uint32_t n_half;                    /* d/2 */
    uint32_t n_units;                   /* units per row */
    uint32_t ne1, ne2;                  /* dst->ne[1], dst->ne[2] */
    uint32_t units_magic, ne1_magic, ne2_magic;
    uint32_t shifts;                    /* l of n_units | ne1 << 8 | ne2 << 16 */
    uint32_t n_total;                   /* n_units * ne1 * ne2 * ne3 */
    uint32_t flags;                     /* PE_SIN_FLAG_* */
    float x_scale;
};

_Static_assert(sizeof(struct pe_vk_sinusoidal_push) == 100,
               "must match shaders/sinusoidal_params.glsl");
_Static_assert(sizeof(struct pe_vk_sinusoidal_push) <= 128,
               "Vulkan guarantees only 128 bytes of push constants");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, dst_off) == 0, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, dst_st0) == 4, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, dst_st3) == 16, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, x_off) == 20, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, x_st0) == 24, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, x_st3) == 36, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, pos_off) == 40, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, pos_st0) == 44, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, pos_st2) == 52, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, n_half) == 56, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, n_units) == 60, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, ne1) == 64, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, ne2) == 68, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, units_magic) == 72, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, ne1_magic) == 76, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, ne2_magic) == 80, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, shifts) == 84, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, n_total) == 88, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, flags) == 92, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, x_scale) == 96, "abi");

/* Workgroup size of sinusoidal.comp (local_size_x). */
#define PE_VK_SIN_WG 64u

/* ---- rope and copy (shaders/rope.comp, shaders/copy.comp, blocks in ------------------
 * shaders/rope_params.glsl; host side src/vulkan/ops_rope_vk.c) ----------------------- */

/*
 * rope.comp: a flat grid-stride loop over n_total = n_units * ne2 * ne3 units, unit idx =
 * u + n_units * (i2 + ne2 * i3). Units u < n_rot of a row rotate PU pairs (pairs PU*u ..
 * PU*u + PU-1) of every head of x (ne1 heads) and of x2 (ne1b heads) for token i2, batch
 * i3: their sin and cos are computed once per unit and reused across all heads. Units
 * n_rot <= u < n_units copy G dims outside the rotated window in every head.
 *
 * Geometry G (1, 2, 4 or 8; flags): the unit's dims come in runs of G consecutive dims
 * starting on a multiple of G: pairing 0 (adjacent pairs) has PU = max(G/2, 1) pairs in
 * one run of 2*PU dims from a; pairing 1 (a, a + n_pairs) has PU = G pairs in two runs of
 * G dims, from a and from b. The host picks the largest G that n_offs, head_dim and
 * n_pairs allow; G = 8 only when a tensor is f16 and every tensor is at access level 3.
 * A tensor whose rows are contiguous (st0 == 1) and start on multiples of 2, 4 or 8
 * elements gets access level 1, 2 or 3 (at most log2 G): a run is one vec2 / vec4 / two
 * vec4 (f32) or one word / uvec2 / uvec4 (f16) access; level 0 accesses element by
 * element, and f16 elements are then written with atomicAnd/Or on their word.
 *
 * What does not fit in 128 bytes lives in the table (binding 6, uvec4 records, written
 * per call into a host-visible buffer):
 *   tab[0] = (units_magic, ne2_magic, l_units | l_ne2 << 8, 0)    pe_udiv of idx, row
 *   tab[1] = (first copy record, 0, 0, 0)
 *   pair j: tab[2+2j]   = (freq bits, freq_from bits, pos_base, from_base)
 *           tab[3+2j]   = (a, b, freq lo bits, freq_from lo bits)   the pair's two dims, and
                                   the frequencies' second f32 words; the frequencies are
                                   in quarter turns, w*2/pi, as hi + lo (pe_freq_split)
 *   copy unit k: tab[first + k] = (first dim, 0, 0, 0)
 * pos_base = pos.offset + stream[j] * pos.st[1] (from_base likewise for pos_from), so a
 * position is pos[pos_base + i2 * pos_st0 + i3 * pos_st2].
 *
 * The flags that shape the code (structure: layout, geometry, access levels, which
 * tensors) are specialization constant 0 (a pipeline per combination, created when first
 * used): branches on them vanish at pipeline creation. The per-unit ones (positions'
 * dtype, sign) are the push constant `flags`, to keep the number of pipelines down.
 * Offsets and strides are in elements of each view's own dtype.
 */
#define PE_ROPE_FLAG_POS_F32   0x1u   /* push: positions are f32 bits; else int32 */
#define PE_ROPE_FLAG_FROM      0x2u   /* rerotate: angle -= pos_from * freq_from */
#define PE_ROPE_FLAG_FROM_F32  0x4u   /* push: pos_from is f32 */
#define PE_ROPE_FLAG_NEG       0x8u   /* push: backward, the angle is negated */
#define PE_ROPE_FLAG_PAIRING1  0x10u  /* half-split pairs (a, a + n_pairs) */
#define PE_ROPE_FLAG_COPY_X    0x20u  /* copy dims outside the window x -> dst */
#define PE_ROPE_FLAG_COPY_X2   0x40u  /* ... x2 -> dst2 */
#define PE_ROPE_FLAG_HAS_X2    0x80u  /* fused Q/K */
#define PE_ROPE_GEOM_SHIFT     8      /* 2 bits: log2 G */
#define PE_ROPE_X_ACC_SHIFT    10     /* 2 bits each: access levels 0..3 */
#define PE_ROPE_DST_ACC_SHIFT  12
#define PE_ROPE_X2_ACC_SHIFT   14
#define PE_ROPE_DST2_ACC_SHIFT 16
/* posenc_rope_set_rows (no x2 then): the x2 push fields carry the row indices instead --
 * x2_off, x2_st0 (token), x2_st1 (batch, 0 = shared) in 32-bit words of binding 2, x2_st2
 * = R, the rows of dst -- and token (i2, i3) is written at dst token rows[...], or skipped
 * when the index is outside [0, R). */
#define PE_ROPE_FLAG_ROWS      0x40000u
#define PE_ROPE_FLAG_ROWS_I64  0x80000u /* two words per index, low first (high must be 0) */

struct pe_vk_rope_push {
    uint32_t x_off, x_st0, x_st1, x_st2, x_st3;
    uint32_t dst_off, dst_st0, dst_st1, dst_st2, dst_st3;
    uint32_t x2_off, x2_st0, x2_st1, x2_st2, x2_st3;
    uint32_t dst2_off, dst2_st0, dst2_st1, dst2_st2, dst2_st3;
    uint32_t pos_st0, pos_st2;     /* token, batch strides of pos (0 = shared) */
    uint32_t from_st0, from_st2;   /* the same for pos_from */
    uint32_t n_rot, n_units;       /* rotation units, all units of a row */
    uint32_t ne1, ne1b, ne2;       /* heads of x, heads of x2 (0: none), tokens */
    uint32_t n_total;
    float mscale;
    uint32_t flags;                /* PE_ROPE_FLAG_POS_F32 | _FROM_F32 | _NEG */
};
_Static_assert(sizeof(struct pe_vk_rope_push) == 128, "must match shaders/rope_params.glsl");
_Static_assert(sizeof(struct pe_vk_rope_push) <= 128, "Vulkan guarantees 128 bytes");
_Static_assert(offsetof(struct pe_vk_rope_push, dst_off) == 20, "abi");
_Static_assert(offsetof(struct pe_vk_rope_push, x2_off) == 40, "abi");
_Static_assert(offsetof(struct pe_vk_rope_push, dst2_off) == 60, "abi");
_Static_assert(offsetof(struct pe_vk_rope_push, pos_st0) == 80, "abi");
_Static_assert(offsetof(struct pe_vk_rope_push, from_st0) == 88, "abi");
_Static_assert(offsetof(struct pe_vk_rope_push, n_rot) == 96, "abi");
_Static_assert(offsetof(struct pe_vk_rope_push, ne1) == 104, "abi");
_Static_assert(offsetof(struct pe_vk_rope_push, n_total) == 116, "abi");
_Static_assert(offsetof(struct pe_vk_rope_push, mscale) == 120, "abi");
_Static_assert(offsetof(struct pe_vk_rope_push, flags) == 124, "abi");

/*
 * copy.comp: dst = src converted, over n_total = n_units * ne1 * ne2 * ne3 units, unit
 * idx = u + n_units * (i1 + ne1 * (i2 + ne2 * i3)); shifts: n_units | ne1 << 8 | ne2 << 16.
 * A unit is G = 1, 2 or 4 consecutive elements along dim 0 (specialization constant 0 =
 * log2 G); with G > 1 both views have st0 == 1 and every row starts on a multiple of G
 * (so the group is one aligned 2- or 4-element access of each side's dtype).
 * Specialization constant 1 = 1 when the grid is one row (ne1 = ne2 = ne3 = 1: the host
 * merges the dims of packed tensors), which needs no divisions.
 */
struct pe_vk_copy_push {
    uint32_t src_off, src_st0, src_st1, src_st2, src_st3;
    uint32_t dst_off, dst_st0, dst_st1, dst_st2, dst_st3;
    uint32_t n_units, ne1, ne2;
    uint32_t units_magic, ne1_magic, ne2_magic, shifts;
    uint32_t n_total;
};
_Static_assert(sizeof(struct pe_vk_copy_push) == 72, "must match shaders/rope_params.glsl");
_Static_assert(offsetof(struct pe_vk_copy_push, dst_off) == 20, "abi");
_Static_assert(offsetof(struct pe_vk_copy_push, n_units) == 40, "abi");
_Static_assert(offsetof(struct pe_vk_copy_push, units_magic) == 52, "abi");
_Static_assert(offsetof(struct pe_vk_copy_push, n_total) == 68, "abi");

/* Workgroup size of rope.comp and copy.comp (local_size_x). */
#define PE_VK_ROPE_WG 64u

/* ---- learned, resize, relbias, alibi (shaders/learned.comp, learned_bwd.comp, ---------
 * resize.comp, relbias.comp, relbias_bwd.comp, alibi.comp; blocks in
 * shaders/encodings_params.glsl; host side src/vulkan/ops_encodings_vk.c) -------------- */

/*
 * Grids are flat: a grid-stride loop over n_total units (gl_NumWorkGroups.x *
 * PE_VK_ENC_WG invocations). Divisions by run-time extents use pe_udiv magic numbers
 * (pe_vk_magic); their shifts l are packed 8 bits each in `shifts`, in the order listed
 * at each struct. Offsets and strides are in elements of each view's own dtype; a
 * stride of a dimension with one element is 0. Every element index fits in uint32.
 */
#define PE_ENC_FLAG_HAS_X     0x1u /* an input (x, logits) is added */
#define PE_ENC_FLAG_PAIRS     0x2u /* f16 dst, rows contiguous, even in length, starting on
                                    * even elements: a unit is elements 2u, 2u+1 (one word) */
#define PE_ENC_FLAG_CAUSAL    0x4u /* alibi */
#define PE_ENC_FLAG_SYMMETRIC 0x8u /* alibi */

/* alibi.comp specialization constant 0: 0 for the general path, or the vector path (rows
 * contiguous and starting on multiples of 4 elements (f32 views) or 8 (f16 views), Q a
 * multiple of 4): f32 dst and logits, K a multiple of 4: a unit is keys 4u .. 4u+3 of
 * PE_ALIBI_VEC_Q queries, n_units = K/4; the variants with an f16 dst or logits, K a
 * multiple of 8: keys 8u .. 8u+7 (one uvec4 of halves or two vec4 per row), n_units =
 * K/8. ne1 = Q/PE_ALIBI_VEC_Q; the op's flags are constants. */
#define PE_ALIBI_SPEC_VEC       0x1u
#define PE_ALIBI_SPEC_HAS_X     0x2u
#define PE_ALIBI_SPEC_CAUSAL    0x4u
#define PE_ALIBI_SPEC_SYMMETRIC 0x8u
#define PE_ALIBI_VEC_Q          4u

/* relbias.comp specialization constant 0: 0 for the general path, or the vector path
 * (rows contiguous and starting on multiples of 4 elements (f32 views) or 8 (f16 views),
 * Q a multiple of 4): f32 dst and logits, K a multiple of 4: a unit is keys 4u .. 4u+3 of
 * PE_RELBIAS_VEC_Q queries of one (head, batch), n_units = K/4; the variants with an f16
 * dst or logits, K a multiple of 8: keys 8u .. 8u+7, n_units = K/8 (as alibi's). ne1 =
 * Q/PE_RELBIAS_VEC_Q; the logits' presence a constant. The table entries are still
 * gathered one by one. */
#define PE_RELBIAS_SPEC_VEC     0x1u
#define PE_RELBIAS_SPEC_HAS_X   0x2u
#define PE_RELBIAS_VEC_Q        4u

/* learned.comp: unit idx = u + n_units*(t + ne1*b); shifts: n_units | ne1 << 8. */
struct pe_vk_learned_push {
    uint32_t dst_off, dst_st0, dst_st1, dst_st2;
    uint32_t x_off, x_st0, x_st1, x_st2;
    uint32_t tab_off, tab_st0, tab_st1;
    uint32_t pos_off, pos_st0, pos_st1;    /* for t, b (0: shared by the batch) */
    uint32_t n_units, ne1;                 /* units per row (d, d/2, or d/G: vector path), T */
    uint32_t units_magic, ne1_magic, shifts;
    uint32_t n_total, flags;
    uint32_t ne2;                          /* B (the vector path with shared positions) */
};
_Static_assert(sizeof(struct pe_vk_learned_push) == 88, "must match encodings_params.glsl");
_Static_assert(sizeof(struct pe_vk_learned_push) <= 128, "Vulkan guarantees 128 bytes");
_Static_assert(offsetof(struct pe_vk_learned_push, x_off) == 16, "abi");
_Static_assert(offsetof(struct pe_vk_learned_push, tab_off) == 32, "abi");
_Static_assert(offsetof(struct pe_vk_learned_push, pos_off) == 44, "abi");
_Static_assert(offsetof(struct pe_vk_learned_push, n_units) == 56, "abi");
_Static_assert(offsetof(struct pe_vk_learned_push, units_magic) == 64, "abi");
_Static_assert(offsetof(struct pe_vk_learned_push, n_total) == 76, "abi");
_Static_assert(offsetof(struct pe_vk_learned_push, flags) == 80, "abi");
_Static_assert(offsetof(struct pe_vk_learned_push, ne2) == 84, "abi");

/* learned_bwd.comp: unit idx = i0 + n_i0*s (segment s); entry e -> t = e % n_tok,
 * b = e / n_tok; shifts: n_i0 | n_tok << 8. */
struct pe_vk_learned_bwd_push {
    uint32_t dtab_off, dtab_st0, dtab_st1;
    uint32_t dy_off, dy_st0, dy_st1, dy_st2;
    uint32_t n_i0, i0_magic;               /* d */
    uint32_t n_tok, tok_magic;             /* T */
    uint32_t shifts;
    uint32_t n_total;                      /* d * n_segments */
};
_Static_assert(sizeof(struct pe_vk_learned_bwd_push) == 52, "must match encodings_params.glsl");
_Static_assert(offsetof(struct pe_vk_learned_bwd_push, dy_off) == 12, "abi");
_Static_assert(offsetof(struct pe_vk_learned_bwd_push, n_i0) == 28, "abi");
_Static_assert(offsetof(struct pe_vk_learned_bwd_push, n_tok) == 36, "abi");
_Static_assert(offsetof(struct pe_vk_learned_bwd_push, shifts) == 44, "abi");
_Static_assert(offsetof(struct pe_vk_learned_bwd_push, n_total) == 48, "abi");

/* resize.comp: unit idx = u + n_units*j (dst row j); grid cell g = j - cls ->
 * r = g / dst_w; shifts: n_units | dst_w << 8. */
struct pe_vk_resize_push {
    uint32_t dst_off, dst_st0, dst_st1;
    uint32_t src_off, src_st0, src_st1;
    uint32_t n_units, units_magic;         /* d or d/2 */
    uint32_t dst_w, dst_w_magic;
    uint32_t shifts;
    uint32_t src_w, cls;
    uint32_t n_total, flags;
};
_Static_assert(sizeof(struct pe_vk_resize_push) == 60, "must match encodings_params.glsl");
_Static_assert(offsetof(struct pe_vk_resize_push, src_off) == 12, "abi");
_Static_assert(offsetof(struct pe_vk_resize_push, n_units) == 24, "abi");
_Static_assert(offsetof(struct pe_vk_resize_push, dst_w) == 32, "abi");
_Static_assert(offsetof(struct pe_vk_resize_push, shifts) == 40, "abi");
_Static_assert(offsetof(struct pe_vk_resize_push, src_w) == 44, "abi");
_Static_assert(offsetof(struct pe_vk_resize_push, n_total) == 52, "abi");

/* relbias.comp and alibi.comp (logits [K, Q, H, B]): unit idx = u + n_units*(q +
 * ne1*(h + ne2*b)); shifts: n_units | ne1 << 8 | ne2 << 16. base: relbias k_offset -
 * q_offset - rel_min (bucket index k - q + base), alibi q_offset - k_offset (distance
 * q - k + base). The table fields are relbias only. */
struct pe_vk_bias_push {
    uint32_t dst_off, dst_st0, dst_st1, dst_st2, dst_st3;
    uint32_t lg_off, lg_st0, lg_st1, lg_st2, lg_st3;
    uint32_t tab_off, tab_st0, tab_st1;
    uint32_t n_units, ne1, ne2;            /* K or K/2, Q, H */
    uint32_t units_magic, ne1_magic, ne2_magic, shifts;
    uint32_t n_total;
    int32_t base;
    uint32_t flags;
};
_Static_assert(sizeof(struct pe_vk_bias_push) == 92, "must match encodings_params.glsl");
_Static_assert(sizeof(struct pe_vk_bias_push) <= 128, "Vulkan guarantees 128 bytes");
_Static_assert(offsetof(struct pe_vk_bias_push, lg_off) == 20, "abi");
_Static_assert(offsetof(struct pe_vk_bias_push, tab_off) == 40, "abi");
_Static_assert(offsetof(struct pe_vk_bias_push, n_units) == 52, "abi");
_Static_assert(offsetof(struct pe_vk_bias_push, units_magic) == 64, "abi");
_Static_assert(offsetof(struct pe_vk_bias_push, n_total) == 80, "abi");
_Static_assert(offsetof(struct pe_vk_bias_push, base) == 84, "abi");
_Static_assert(offsetof(struct pe_vk_bias_push, flags) == 88, "abi");

/* relbias_bwd.comp: unit idx = u + n_buckets*h; shifts: n_buckets. rel_delta = rel_min +
 * q_offset - k_offset (k = q + rels[i] + rel_delta). */
struct pe_vk_relbias_bwd_push {
    uint32_t dtab_off, dtab_st0, dtab_st1;
    uint32_t dl_off, dl_st0, dl_st1, dl_st2, dl_st3;
    uint32_t ne0, ne1, ne3;                /* K, Q, B */
    uint32_t n_buckets, nb_magic, shifts;
    uint32_t n_total;                      /* n_buckets * H */
    int32_t rel_delta;
};
_Static_assert(sizeof(struct pe_vk_relbias_bwd_push) == 64, "must match encodings_params.glsl");
_Static_assert(offsetof(struct pe_vk_relbias_bwd_push, dl_off) == 12, "abi");
_Static_assert(offsetof(struct pe_vk_relbias_bwd_push, ne0) == 32, "abi");
_Static_assert(offsetof(struct pe_vk_relbias_bwd_push, n_buckets) == 44, "abi");
_Static_assert(offsetof(struct pe_vk_relbias_bwd_push, n_total) == 56, "abi");
_Static_assert(offsetof(struct pe_vk_relbias_bwd_push, rel_delta) == 60, "abi");

/* Workgroup size of the six shaders above (local_size_x). */
#define PE_VK_ENC_WG 64u

/* ---- attention (shaders/attn_scores.comp, attn_softmax.comp, attn_output.comp; blocks
 * in shaders/attention_params.glsl; host side src/vulkan/ops_attention_vk.c) ----------- */

/*
 * The two GEMMs (attn_scores.comp: logits = scale * Q.K^T, attn_output.comp: dst = P.V)
 * share one push block: C[x, y] = sum_{r < n_red} A[r, y] B[r, x] per (head h, batch b),
 * B read at K/V head h / group. A workgroup of PE_VK_ATTN_WG invocations computes a tile
 * of PE_VK_ATTN_TILE_X (x) by PE_VK_ATTN_TILE_Y (y) outputs (a 4 x 4 block each), in a
 * grid-stride loop over n_tiles, tiles_x = ceil(n_x / PE_VK_ATTN_TILE_X), tiles_y =
 * ceil(n_y / PE_VK_ATTN_TILE_Y); tile t = tx + tiles_x*(ty + tiles_y*(h + n_h*b)); the
 * reduction is staged in shared memory PE_VK_ATTN_CHUNK at a time. shifts: tiles_x |
 * tiles_y << 8 | n_h << 16 | group << 24 (g_magic divides h by group). Offsets and
 * strides are each view's own (in its own elements, in its own dimension order; a
 * dimension of one element has stride 0):
 *   scores  A = q [D, Hq, Tq, B], B = k [D, Hk, Tk, B], C = logits [Tk, Tq, Hq, B];
 *           n_red = D, n_x = Tk, n_y = Tq; scale = the f32 scale (flags unused)
 *   output  A = p [Tk, Tq, Hq, B], B = v [Dv, Hk, Tk, B], C = dst [Dv, Hq, Tq, B];
 *           n_red = Tk, n_x = Dv, n_y = Tq; flags PE_ATTN_FLAG_PAIRS (scale unused)
 * The softmax (attn_softmax.comp): one workgroup of PE_VK_ATTN_SOFTMAX_WG invocations per
 * row, grid-stride over n_rows = Tq*Hq*B; row = q + n_q*(h + n_h*b); shifts: n_q |
 * n_h << 8. Every element index fits in uint32 (checked on the host).
 */
#define PE_ATTN_FLAG_PAIRS    0x1u /* f16 dst (output) / weights (softmax) with rows
                                    * contiguous, even in length and starting on even
                                    * elements: two elements are written as one word */
#define PE_ATTN_FLAG_CAUSAL   0x2u /* softmax: keys k + k_offset > q + q_offset masked */
#define PE_ATTN_FLAG_HAS_MASK 0x4u /* softmax: mask added to the logits */
#define PE_ATTN_FLAG_HAS_W    0x8u /* softmax: weights written */

struct pe_vk_attn_gemm_push {
    uint32_t a_off, a_st0, a_st1, a_st2, a_st3;
    uint32_t b_off, b_st0, b_st1, b_st2, b_st3;
    uint32_t c_off, c_st0, c_st1, c_st2, c_st3;
    uint32_t n_red, n_x, n_y, n_h;
    uint32_t tiles_x, tiles_y;
    uint32_t tx_magic, ty_magic, h_magic, g_magic;
    uint32_t shifts;
    uint32_t n_tiles;
    uint32_t flags;
    float scale;
};
_Static_assert(sizeof(struct pe_vk_attn_gemm_push) == 116, "must match attention_params.glsl");
_Static_assert(sizeof(struct pe_vk_attn_gemm_push) <= 128, "Vulkan guarantees 128 bytes");
_Static_assert(offsetof(struct pe_vk_attn_gemm_push, b_off) == 20, "abi");
_Static_assert(offsetof(struct pe_vk_attn_gemm_push, c_off) == 40, "abi");
_Static_assert(offsetof(struct pe_vk_attn_gemm_push, n_red) == 60, "abi");
_Static_assert(offsetof(struct pe_vk_attn_gemm_push, tiles_x) == 76, "abi");
_Static_assert(offsetof(struct pe_vk_attn_gemm_push, tx_magic) == 84, "abi");
_Static_assert(offsetof(struct pe_vk_attn_gemm_push, shifts) == 100, "abi");
_Static_assert(offsetof(struct pe_vk_attn_gemm_push, n_tiles) == 104, "abi");
_Static_assert(offsetof(struct pe_vk_attn_gemm_push, flags) == 108, "abi");
_Static_assert(offsetof(struct pe_vk_attn_gemm_push, scale) == 112, "abi");

struct pe_vk_attn_softmax_push {
    uint32_t lg_off, lg_st0, lg_st1, lg_st2, lg_st3;  /* logits [Tk, Tq, Hq, B] f32 */
    uint32_t mk_off, mk_st0, mk_st1, mk_st2, mk_st3;  /* mask (0 where broadcast) */
    uint32_t w_off, w_st0, w_st1, w_st2, w_st3;       /* weights */
    uint32_t n_k, n_q, n_h;                           /* Tk, Tq, Hq */
    uint32_t q_magic, h_magic, shifts;
    uint32_t n_rows;                                  /* Tq * Hq * B */
    uint32_t q_offset, k_offset;                      /* positions (< 2^31) */
    uint32_t flags;                                   /* PE_ATTN_FLAG_* */
};
_Static_assert(sizeof(struct pe_vk_attn_softmax_push) == 100, "must match attention_params.glsl");
_Static_assert(sizeof(struct pe_vk_attn_softmax_push) <= 128, "Vulkan guarantees 128 bytes");
_Static_assert(offsetof(struct pe_vk_attn_softmax_push, mk_off) == 20, "abi");
_Static_assert(offsetof(struct pe_vk_attn_softmax_push, w_off) == 40, "abi");
_Static_assert(offsetof(struct pe_vk_attn_softmax_push, n_k) == 60, "abi");
_Static_assert(offsetof(struct pe_vk_attn_softmax_push, q_magic) == 72, "abi");
_Static_assert(offsetof(struct pe_vk_attn_softmax_push, n_rows) == 84, "abi");
_Static_assert(offsetof(struct pe_vk_attn_softmax_push, q_offset) == 88, "abi");
_Static_assert(offsetof(struct pe_vk_attn_softmax_push, flags) == 96, "abi");

/* The GEMMs' workgroup size (local_size_x), tile and reduction chunk, and the softmax's
 * workgroup size (local_size_x). */
#define PE_VK_ATTN_WG 64u
#define PE_VK_ATTN_TILE_X 64u
#define PE_VK_ATTN_TILE_Y 16u
#define PE_VK_ATTN_CHUNK 16u
#define PE_VK_ATTN_SOFTMAX_WG 64u

/* ---- fill and set_rows (shaders/fill.comp, shaders/set_rows.comp; blocks in ----------
 * shaders/rows_params.glsl; host side src/vulkan/ops_rows_vk.c) ------------------------ */

/* fill.comp: element idx = i0 + ne0 * (i1 + ne1 * (i2 + ne2 * i3)) of n_total gets `bits`
 * + step * i0 (f16: the low 16 bits of `bits`, step 0, written by a compare-and-swap loop
 * on its word). */
struct pe_vk_fill_push {
    uint32_t off, st0, st1, st2, st3;
    uint32_t ne0, ne1, ne2, n_total;
    uint32_t bits, step;
};
_Static_assert(sizeof(struct pe_vk_fill_push) == 44, "must match shaders/rows_params.glsl");

/* set_rows.comp: over src's elements idx = i0 + ne0 * (i1 + ne1 * (i2 + ne2 * i3)), the row
 * index at rows word rows_off + i1 * rows_st0 + ((i2 + base2) % e2) * rows_st1 + ((i3 +
 * base3) % e3) * rows_st2 (strides in words: doubled for i64, specialization constant 0 =
 * 1), then dst[i0, row, i2, i3] = src[i0, i1, i2, i3] when row < n_rows, else nothing. */
struct pe_vk_set_rows_push {
    uint32_t src_off, src_st0, src_st1, src_st2, src_st3;
    uint32_t dst_off, dst_st0, dst_st1, dst_st2, dst_st3;
    uint32_t rows_off, rows_st0, rows_st1, rows_st2;
    uint32_t ne0, ne1, ne2, n_total;
    uint32_t e2, e3, base2, base3;
    uint32_t n_rows;
};
_Static_assert(sizeof(struct pe_vk_set_rows_push) == 92, "must match shaders/rows_params.glsl");

/* Workgroup size of fill.comp and set_rows.comp. */
#define PE_VK_ROWS_WG 64u
/* ---- softmax (shaders/softmax.comp, which holds the mirroring push block) -------------- */

#define PE_SM_FLAG_MASK   0x1u /* a mask is added */
#define PE_SM_FLAG_SINKS  0x2u /* sinks are read */
#define PE_SM_FLAG_SLOPES 0x4u /* the mask is multiplied by the per-head slopes (binding 4) */
#define PE_SM_FLAG_PAIRS  0x8u /* f16 dst with unit stride, even offset, strides and n:
                                * written two elements to a word */

/*
 * One workgroup (PE_VK_SM_WG invocations) per row at a time, grid-stride over rows:
 * row = i1 + n_r*(i2 + n_h*i3). The global head is h = h_off + i2 (slope, sink, mask plane
 * h % m_ne2), the global batch b = b_off + i3 (mask plane b % m_ne3). Offsets and strides
 * are in elements of each view's own dtype (f16: half (e & 1) of word e >> 1); a stride
 * of a dimension with one element is 0.
 */
struct pe_vk_softmax_push {
    uint32_t x_off, x_st0, x_st1, x_st2, x_st3;   /* x [n, n_r, n_h, B] */
    uint32_t d_off, d_st0, d_st1, d_st2, d_st3;   /* dst, the same shape */
    uint32_t m_off, m_st0, m_st1, m_st2, m_st3;   /* mask [n, n_r, m_ne2, m_ne3] */
    uint32_t s_off, s_st0;                        /* sinks f32 [n_head] */
    uint32_t n, n_r, n_h, n_rows;                 /* row length, rows, heads, n_r*n_h*B */
    uint32_t m_ne2, m_ne3, h_off, b_off;
    float scale;
    uint32_t flags;                               /* PE_SM_FLAG_* */
};
_Static_assert(sizeof(struct pe_vk_softmax_push) == 108, "must match shaders/softmax.comp");
_Static_assert(sizeof(struct pe_vk_softmax_push) <= 128, "Vulkan guarantees 128 bytes");
_Static_assert(offsetof(struct pe_vk_softmax_push, d_off) == 20, "abi");
_Static_assert(offsetof(struct pe_vk_softmax_push, m_off) == 40, "abi");
_Static_assert(offsetof(struct pe_vk_softmax_push, s_off) == 60, "abi");
_Static_assert(offsetof(struct pe_vk_softmax_push, n) == 68, "abi");
_Static_assert(offsetof(struct pe_vk_softmax_push, m_ne2) == 84, "abi");
_Static_assert(offsetof(struct pe_vk_softmax_push, scale) == 100, "abi");
_Static_assert(offsetof(struct pe_vk_softmax_push, flags) == 104, "abi");

#define PE_VK_SM_WG 64u

#endif
