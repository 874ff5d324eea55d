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

#endif
