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
#define PE_SIN_FLAG_DST_WORDS   0x10u /* f16 dst, interleaved, every sin/cos pair is one
                                       * aligned 32-bit word: one plain store per pair */

/*
 * One invocation per (pair i < n_half, row): idx = i + n_half*(i1 + ne1*(i2 + ne2*i3)),
 * for idx < n_pairs, grid-stride over gl_NumWorkGroups.x * 64. Offsets and strides are
 * in elements of each view's own dtype (an f16 element e is half (e & 1) of 32-bit word
 * e >> 1). Buffers are bound whole, so every index must fit in uint32 (host-checked).
 */
struct pe_vk_sinusoidal_push {
    uint32_t dst_off;
    uint32_t dst_st0, dst_st1, dst_st2, dst_st3;
    uint32_t x_off;
    uint32_t x_st0, x_st1, x_st2, x_st3;
    uint32_t pos_off;
    uint32_t pos_st0, pos_st1, pos_st2; /* for i1, i2, i3 (0 = broadcast) */
    uint32_t n_half;                    /* d/2 */
    uint32_t ne1, ne2;                  /* dst->ne[1], dst->ne[2] */
    uint32_t n_pairs;                   /* n_half * ne1 * ne2 * ne3 */
    uint32_t flags;                     /* PE_SIN_FLAG_* */
    float x_scale;
};

_Static_assert(sizeof(struct pe_vk_sinusoidal_push) == 80,
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
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, ne1) == 60, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, ne2) == 64, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, n_pairs) == 68, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, flags) == 72, "abi");
_Static_assert(offsetof(struct pe_vk_sinusoidal_push, x_scale) == 76, "abi");

/* Workgroup size of sinusoidal.comp (local_size_x). */
#define PE_VK_SIN_WG 64u

#endif
