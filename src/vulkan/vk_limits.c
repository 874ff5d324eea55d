/*
 * vk_limits.c - a shader's needs against the device's limits, read from its SPIR-V before
 * its pipeline is made (issue #18).
 *
 * Every compute shader goes through pe_vk_pipeline_spec, which calls pe_vk_check_shader:
 * the work-group size (LocalSize, LocalSizeId or a WorkgroupSize built-in, with the
 * pipeline's specialization constants), the bytes of Workgroup (shared) variables and of
 * the push-constant block are compared with be->props.limits -- the device's own or the
 * lower ones of POSENC_DEVICE_PRESET. A shader that does not fit is refused with
 * POSENC_ERR_UNSUPPORTED naming the limit, before anything is recorded, instead of
 * reaching the driver (undefined behaviour; the validation layer checks only the real
 * device's limits, never a preset's). New shaders get the check without doing anything.
 *
 * Sizes: scalars, vectors, matrices, arrays and structs at their natural size (a vec3 is
 * 12 bytes); shared-memory layout is the implementation's, so this is the least it can
 * need. Array lengths may be specialization constants, gl_WorkGroupSize components or
 * simple integer arithmetic on them (OpSpecConstantOp CompositeExtract, IAdd, ISub, IMul,
 * UDiv); a length this reader cannot evaluate leaves its variable out, and the DEBUG line
 * says so.
 */
#include "vk_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum {
    OP_EXECUTION_MODE = 16,
    OP_TYPE_BOOL = 20,
    OP_TYPE_INT = 21,
    OP_TYPE_FLOAT = 22,
    OP_TYPE_VECTOR = 23,
    OP_TYPE_MATRIX = 24,
    OP_TYPE_ARRAY = 28,
    OP_TYPE_STRUCT = 30,
    OP_TYPE_POINTER = 32,
    OP_CONSTANT = 43,
    OP_CONSTANT_COMPOSITE = 44,
    OP_SPEC_CONSTANT = 50,
    OP_SPEC_CONSTANT_COMPOSITE = 51,
    OP_SPEC_CONSTANT_OP = 52,
    OP_COMPOSITE_EXTRACT = 81,
    OP_IADD = 128,
    OP_ISUB = 130,
    OP_IMUL = 132,
    OP_UDIV = 134,
    OP_VARIABLE = 59,
    OP_DECORATE = 71,
    OP_MEMBER_DECORATE = 72,
    OP_EXECUTION_MODE_ID = 331,
    MODE_LOCAL_SIZE = 17,
    MODE_LOCAL_SIZE_ID = 38,
    DEC_SPEC_ID = 1,
    DEC_BUILTIN = 11,
    DEC_OFFSET = 35,
    BUILTIN_WORKGROUP_SIZE = 25,
    SC_WORKGROUP = 4,
    SC_PUSH_CONSTANT = 9,
};

/* What one SPIR-V id is, as far as sizes go. */
struct sid {
    uint64_t size;     /* bytes of a type; 0 = unknown */
    uint64_t value;    /* a scalar constant's value (specialized) */
    bool is_const;     /* value is known */
    int64_t spec_id;   /* SpecId decoration, -1 = none */
    bool wg_builtin;   /* decorated BuiltIn WorkgroupSize */
    uint32_t comp[3];  /* a composite constant's first three constituents */
    uint32_t ptr_sc;   /* OpTypePointer: storage class, ptr_type the pointee */
    uint32_t ptr_type;
    uint32_t off_max;  /* a struct: its largest member Offset decoration ... */
    uint32_t off_member; /* ... and that member's index */
    bool has_off;
    uint64_t push_end; /* a struct: off_max + the size of that member */
};

/* The shader's needs: work-group size, shared and push-constant bytes. */
struct shader_needs {
    uint32_t wg[3];
    uint64_t shared;
    uint64_t push;
    bool shared_unknown;
};

static posenc_status reflect(struct pe_vk_backend *be, const char *name, const uint32_t *code,
                             size_t size, const uint32_t *spec, uint32_t n_spec,
                             struct shader_needs *out)
{
    memset(out, 0, sizeof *out);
    out->wg[0] = out->wg[1] = out->wg[2] = 1;
    const size_t n = size / 4;
    if (n < 5 || code[0] != 0x07230203u)
        return pe_error(be->base.ctx, POSENC_ERR_INTERNAL, "vulkan: %s is not SPIR-V", name);
    const uint32_t bound = code[3];
    struct sid *ids = calloc(bound ? bound : 1, sizeof *ids);
    if (!ids)
        return pe_error(be->base.ctx, POSENC_ERR_OUT_OF_MEMORY, "out of host memory");
    for (uint32_t i = 0; i < bound; i++)
        ids[i].spec_id = -1;
    uint32_t local_id[3] = {0, 0, 0};
    bool have_local_id = false;
    /* Two passes: decorations may come before the constants they name (they do), and
     * member offsets before the sizes of member types (sizes are needed for push_end). */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t w = 5; w < n;) {
            const uint32_t wc = code[w] >> 16, op = code[w] & 0xffffu;
            if (wc == 0 || w + wc > n)
                break;
            const uint32_t *a = &code[w + 1]; /* operands */
#define ID_OK(x) ((x) < bound)
            if (pass == 0) {
                if (op == OP_DECORATE && wc >= 4 && ID_OK(a[0])) {
                    if (a[1] == DEC_SPEC_ID)
                        ids[a[0]].spec_id = a[2];
                    else if (a[1] == DEC_BUILTIN && a[2] == BUILTIN_WORKGROUP_SIZE)
                        ids[a[0]].wg_builtin = true;
                } else if (op == OP_MEMBER_DECORATE && wc >= 5 && ID_OK(a[0]) &&
                           a[2] == DEC_OFFSET) {
                    struct sid *t = &ids[a[0]];
                    if (!t->has_off || a[3] >= t->off_max) {
                        t->off_max = a[3];
                        t->off_member = a[1];
                        t->has_off = true;
                    }
                } else if (op == OP_EXECUTION_MODE && wc >= 6 && a[1] == MODE_LOCAL_SIZE) {
                    out->wg[0] = a[2];
                    out->wg[1] = a[3];
                    out->wg[2] = a[4];
                } else if (op == OP_EXECUTION_MODE_ID && wc >= 6 && a[1] == MODE_LOCAL_SIZE_ID) {
                    memcpy(local_id, &a[2], sizeof local_id);
                    have_local_id = true;
                }
            } else {
                switch (op) {
                case OP_TYPE_BOOL:
                    if (wc >= 2 && ID_OK(a[0]))
                        ids[a[0]].size = 4;
                    break;
                case OP_TYPE_INT:
                case OP_TYPE_FLOAT:
                    if (wc >= 3 && ID_OK(a[0]))
                        ids[a[0]].size = a[1] / 8;
                    break;
                case OP_TYPE_VECTOR:
                case OP_TYPE_MATRIX:
                    if (wc >= 4 && ID_OK(a[0]) && ID_OK(a[1]))
                        ids[a[0]].size = ids[a[1]].size * a[2];
                    break;
                case OP_TYPE_ARRAY:
                    if (wc >= 4 && ID_OK(a[0]) && ID_OK(a[1]) && ID_OK(a[2]) &&
                        ids[a[2]].is_const)
                        ids[a[0]].size = ids[a[1]].size * ids[a[2]].value;
                    break;
                case OP_TYPE_STRUCT: {
                    if (wc < 2 || !ID_OK(a[0]))
                        break;
                    uint64_t s = 0;
                    for (uint32_t k = 1; k < wc - 1; k++) {
                        if (!ID_OK(a[k]) || ids[a[k]].size == 0) {
                            s = 0;
                            break;
                        }
                        s += ids[a[k]].size;
                    }
                    struct sid *t = &ids[a[0]];
                    t->size = s;
                    /* with Offset decorations (push constants, std430): the end of the
                     * last member, padding included */
                    if (t->has_off && t->off_member + 1 < wc - 1 && ID_OK(a[1 + t->off_member]))
                        t->push_end = t->off_max + ids[a[1 + t->off_member]].size;
                    break;
                }
                case OP_TYPE_POINTER:
                    if (wc >= 4 && ID_OK(a[0])) {
                        ids[a[0]].ptr_sc = a[1];
                        ids[a[0]].ptr_type = a[2];
                    }
                    break;
                case OP_CONSTANT:
                case OP_SPEC_CONSTANT:
                    if (wc >= 4 && ID_OK(a[1])) {
                        struct sid *c = &ids[a[1]];
                        c->value = a[2];
                        if (op == OP_SPEC_CONSTANT && c->spec_id >= 0 &&
                            (uint64_t)c->spec_id < n_spec)
                            c->value = spec[c->spec_id];
                        c->is_const = true;
                    }
                    break;
                case OP_SPEC_CONSTANT_OP:
                    /* the usual array lengths: gl_WorkGroupSize.x (a CompositeExtract of
                     * the WorkgroupSize built-in) and simple integer arithmetic on
                     * constants; anything else stays unknown */
                    if (wc >= 5 && ID_OK(a[1])) {
                        struct sid *c = &ids[a[1]];
                        const uint32_t sop = a[2];
                        if (sop == OP_COMPOSITE_EXTRACT && wc >= 6 && ID_OK(a[3]) && a[4] < 3) {
                            const uint32_t e = ids[a[3]].comp[a[4]];
                            if (ID_OK(e) && ids[e].is_const) {
                                c->value = ids[e].value;
                                c->is_const = true;
                            }
                        } else if (wc >= 6 && ID_OK(a[3]) && ID_OK(a[4]) && ids[a[3]].is_const &&
                                   ids[a[4]].is_const) {
                            const uint64_t x = ids[a[3]].value, y = ids[a[4]].value;
                            c->is_const = true;
                            if (sop == OP_IADD)
                                c->value = x + y;
                            else if (sop == OP_ISUB && x >= y)
                                c->value = x - y;
                            else if (sop == OP_IMUL)
                                c->value = x * y;
                            else if (sop == OP_UDIV && y)
                                c->value = x / y;
                            else
                                c->is_const = false;
                        }
                    }
                    break;
                case OP_CONSTANT_COMPOSITE:
                case OP_SPEC_CONSTANT_COMPOSITE:
                    if (wc >= 6 && ID_OK(a[1]))
                        memcpy(ids[a[1]].comp, &a[2], sizeof ids[a[1]].comp);
                    break;
                case OP_VARIABLE:
                    if (wc >= 4 && ID_OK(a[0]) && ID_OK(a[1])) {
                        const struct sid *pt = &ids[a[0]];
                        if (a[2] == SC_WORKGROUP) {
                            uint64_t s = ID_OK(pt->ptr_type) ? ids[pt->ptr_type].size : 0;
                            if (s == 0)
                                out->shared_unknown = true;
                            out->shared += s;
                        } else if (a[2] == SC_PUSH_CONSTANT && ID_OK(pt->ptr_type)) {
                            const struct sid *st = &ids[pt->ptr_type];
                            uint64_t s = st->push_end > st->size ? st->push_end : st->size;
                            if (s > out->push)
                                out->push = s;
                        }
                    }
                    break;
                default:
                    break;
                }
            }
            w += wc;
        }
    }
    /* The work-group size from constants: LocalSizeId, or a WorkgroupSize built-in
     * (which overrides LocalSize). */
    for (uint32_t i = 0; i < bound; i++) {
        if (!ids[i].wg_builtin)
            continue;
        for (int k = 0; k < 3; k++)
            if (ID_OK(ids[i].comp[k]) && ids[ids[i].comp[k]].is_const)
                out->wg[k] = (uint32_t)ids[ids[i].comp[k]].value;
    }
    if (have_local_id)
        for (int k = 0; k < 3; k++)
            if (ID_OK(local_id[k]) && ids[local_id[k]].is_const)
                out->wg[k] = (uint32_t)ids[local_id[k]].value;
#undef ID_OK
    free(ids);
    return POSENC_OK;
}

posenc_status pe_vk_check_shader(struct pe_vk_backend *be, const char *name,
                                 const uint32_t *code, size_t size, const uint32_t *spec,
                                 uint32_t n_spec)
{
    posenc_context *ctx = be->base.ctx;
    struct shader_needs nd;
    PE_RETURN_IF_ERROR(reflect(be, name, code, size, spec, n_spec, &nd));
    const VkPhysicalDeviceLimits *l = &be->props.limits;
    const char *why = ctx->preset ? " (lowered by POSENC_DEVICE_PRESET)" : "";
    const uint64_t inv = (uint64_t)nd.wg[0] * nd.wg[1] * nd.wg[2];
    pe_log(ctx, POSENC_LOG_DEBUG,
           "vulkan: shader %s: work-group %" PRIu32 " x %" PRIu32 " x %" PRIu32
           ", %" PRIu64 " bytes shared%s, %" PRIu64 " bytes of push constants",
           name, nd.wg[0], nd.wg[1], nd.wg[2], nd.shared,
           nd.shared_unknown ? " (and some of unknown size)" : "", nd.push);
    for (int k = 0; k < 3; k++)
        if (nd.wg[k] > l->maxComputeWorkGroupSize[k])
            return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                            "vulkan: shader %s has a work-group of %" PRIu32 " in dimension %d; "
                            "this device allows %" PRIu32 " (maxComputeWorkGroupSize[%d])%s",
                            name, nd.wg[k], k, l->maxComputeWorkGroupSize[k], k, why);
    if (inv > l->maxComputeWorkGroupInvocations)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                        "vulkan: shader %s has %" PRIu64 " invocations per work-group; this "
                        "device allows %" PRIu32 " (maxComputeWorkGroupInvocations)%s",
                        name, inv, l->maxComputeWorkGroupInvocations, why);
    if (nd.shared > l->maxComputeSharedMemorySize)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                        "vulkan: shader %s uses %" PRIu64 " bytes of shared memory; this "
                        "device allows %" PRIu32 " (maxComputeSharedMemorySize)%s",
                        name, nd.shared, l->maxComputeSharedMemorySize, why);
    if (nd.push > l->maxPushConstantsSize)
        return pe_error(ctx, POSENC_ERR_UNSUPPORTED,
                        "vulkan: shader %s has %" PRIu64 " bytes of push constants; this "
                        "device allows %" PRIu32 " (maxPushConstantsSize)%s",
                        name, nd.push, l->maxPushConstantsSize, why);
    return POSENC_OK;
}
