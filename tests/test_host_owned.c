/*
 * test_host_owned.c - posenc on a device the application owns (issue #9), on one backend
 * (--backend NAME): posenc_context_create_from_host, posenc_buffer_wrap_opencl / _vulkan.
 *
 * The test plays the application: it creates its own OpenCL context + in-order queue, or
 * its own Vulkan instance (with VK_LAYER_KHRONOS_validation when installed and a debug
 * messenger that counts every warning and error: any fails the test), device and compute
 * queue, and its own cl_mem / VkBuffer + VkDeviceMemory. On that it checks:
 *
 *  - ops on wrapped buffers (RoPE f32 out of place, f32 -> f16 copy + RoPE f16 in place,
 *    sinusoidal) against the CPU reference context, within the rounding bounds of
 *    src/check/check.c; shared RoPE and attention cases (CLBlast on OpenCL) run on
 *    posenc buffers of the host-owned context, against the reference too;
 *  - ordering with the application's own commands on the same queue, without
 *    posenc_context_finish: OpenCL non-blocking writes / reads around posenc ops;
 *    Vulkan vkCmdFillBuffer submitted before a posenc op and vkCmdCopyBuffer after one;
 *  - ownership: OpenCL reference counts of the queue, context and cl_mem are back to the
 *    application's after posenc_buffer_destroy / posenc_context_destroy (a wrapped buffer
 *    left alive at context destroy included), and the host objects still work afterwards
 *    (the queue runs a write + read; Vulkan: a copy on the queue, then the application
 *    destroys everything with zero validation messages);
 *  - the application's vkGetInstanceProcAddr (posenc_host_device.vk_get_instance_proc_addr):
 *    posenc takes its functions from it (a counting wrapper, which also hands out a
 *    counting vkGetDeviceProcAddr and vkQueueSubmit, sees the lookups and posenc's
 *    submissions), while a posenc-owned Vulkan context in the same process keeps its own
 *    table (its submissions do not go through the wrapper); and the plain function;
 *  - bad input: NULL / mismatched handles, a queue of another cl_context, an out-of-order
 *    queue, a cl_mem of another context or with restricted flags, a physical device not
 *    of the instance, a queue family out of range, wrap sizes 0 / not a multiple of 4 /
 *    past the VkBuffer, wrapping on a context posenc created, the CPU backend: the exact
 *    status, a message naming the argument, *out NULL and the host objects untouched.
 *
 * Recording into the application's command buffer is test_vk_record.c; the host set-up,
 * inputs and references both use are host_owned.c.
 */
#include "host_owned.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- every backend ------------------------------------------------------------------ */

static void test_generic_bad_input(void **state)
{
    (void)state;
    struct posenc_host_device zero = {0};
    expect_create_fails(NULL, NULL, POSENC_ERR_INVALID_ARGUMENT, "host is NULL", "host NULL");
    expect_create_fails(NULL, &zero, POSENC_ERR_INVALID_ARGUMENT, "host->backend = 0",
                        "zero host struct");
    struct posenc_host_device cpu = {.backend = POSENC_BACKEND_CPU};
    expect_create_fails(NULL, &cpu, POSENC_ERR_UNSUPPORTED, "host->backend = cpu", "CPU host");
    struct posenc_host_device bad = {.backend = (posenc_backend_kind)9};
    expect_create_fails(NULL, &bad, POSENC_ERR_INVALID_ARGUMENT, "host->backend = 9",
                        "unknown backend");
    struct posenc_host_device cl = {.backend = POSENC_BACKEND_OPENCL};
    expect_create_fails(NULL, &cl, POSENC_ERR_INVALID_ARGUMENT, "host->cl_context is NULL",
                        "OpenCL without handles");
    struct posenc_host_device vk = {.backend = POSENC_BACKEND_VULKAN};
    expect_create_fails(NULL, &vk, POSENC_ERR_INVALID_ARGUMENT, "host->vk_instance is NULL",
                        "Vulkan without handles");
    char err[64];
    assert_int_equal(posenc_context_create_from_host(NULL, &cl, NULL, err, sizeof(err)),
                     POSENC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "out_ctx"));
    struct posenc_context_params p = {.reserved = {0, 0, 1}};
    expect_create_fails(&p, &cl, POSENC_ERR_INVALID_ARGUMENT, "params->reserved[2]",
                        "params reserved");

    /* Wrapping on a context posenc created (th.dut), or of the wrong kind. */
    posenc_buffer *b = (posenc_buffer *)(uintptr_t)1;
    int dummy = 0;
    posenc_status st = posenc_buffer_wrap_opencl(th.dut, &dummy, &b);
    assert_null(b);
    expect(st, POSENC_ERR_INVALID_ARGUMENT, th.dut, NULL,
           th.kind == POSENC_BACKEND_OPENCL ? "posenc_context_create_from_host" : "context, not opencl",
           "wrap_opencl on th.dut");
    b = (posenc_buffer *)(uintptr_t)1;
    st = posenc_buffer_wrap_vulkan(th.dut, 0x1234, 256, &b);
    assert_null(b);
    expect(st, POSENC_ERR_INVALID_ARGUMENT, th.dut, NULL,
           th.kind == POSENC_BACKEND_VULKAN ? "posenc_context_create_from_host" : "context, not vulkan",
           "wrap_vulkan on th.dut");
    assert_int_equal(posenc_buffer_wrap_opencl(NULL, &dummy, &b), POSENC_ERR_INVALID_ARGUMENT);
    assert_int_equal(posenc_buffer_wrap_vulkan(NULL, 0x1234, 256, &b), POSENC_ERR_INVALID_ARGUMENT);
    expect(posenc_buffer_wrap_opencl(th.dut, &dummy, NULL), POSENC_ERR_INVALID_ARGUMENT, th.dut,
           NULL, "out_buffer is NULL", "wrap_opencl out NULL");
    th_check_warnings();
}

/* ---- OpenCL ------------------------------------------------------------------------- */

#if TH_HAVE_OPENCL
struct cl_host {
    cl_device_id dev;
    cl_context ctx;
    cl_command_queue q;
};

#define CL_OK(call) assert_int_equal((call), CL_SUCCESS)

/* The application's context and in-order queue on the first OpenCL device (posenc's
 * device 0, the one th.dut runs on). */
static void cl_host_open(struct cl_host *h)
{
    memset(h, 0, sizeof(*h));
    cl_platform_id plats[16];
    cl_uint np = 0;
    CL_OK(clGetPlatformIDs(16, plats, &np));
    for (cl_uint i = 0; i < np && i < 16 && !h->dev; i++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 1, &h->dev, &nd) != CL_SUCCESS)
            h->dev = NULL;
    }
    assert_non_null(h->dev);
    cl_int err = CL_SUCCESS;
    h->ctx = clCreateContext(NULL, 1, &h->dev, NULL, NULL, &err);
    CL_OK(err);
    h->q = clCreateCommandQueue(h->ctx, h->dev, 0, &err);
    CL_OK(err);
}

static void cl_host_close(struct cl_host *h)
{
    CL_OK(clReleaseCommandQueue(h->q));
    CL_OK(clReleaseContext(h->ctx));
}

static cl_mem cl_buf(cl_context ctx, cl_mem_flags flags, size_t size)
{
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(ctx, flags, size, NULL, &err);
    CL_OK(err);
    return m;
}

static cl_uint qref(cl_command_queue q)
{
    cl_uint n = 0;
    CL_OK(clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof(n), &n, NULL));
    return n;
}

static cl_uint cref(cl_context c)
{
    cl_uint n = 0;
    CL_OK(clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, sizeof(n), &n, NULL));
    return n;
}

static cl_uint mref(cl_mem m)
{
    cl_uint n = 0;
    CL_OK(clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof(n), &n, NULL));
    return n;
}

static posenc_buffer *cl_wrap(posenc_context *ctx, cl_mem m)
{
    posenc_buffer *b = NULL;
    posenc_status st = posenc_buffer_wrap_opencl(ctx, m, &b);
    if (st != POSENC_OK)
        fail_msg("posenc_buffer_wrap_opencl: %s: %s", posenc_status_string(st),
                 posenc_context_last_error(ctx));
    return b;
}

static void test_cl_wrapped(void **state)
{
    (void)state;
    ensure_reference();
    struct cl_host h;
    cl_host_open(&h);
    cl_mem mx = cl_buf(h.ctx, CL_MEM_READ_WRITE, sizeof(g_x));
    cl_mem my = cl_buf(h.ctx, CL_MEM_READ_WRITE, sizeof(g_x));
    cl_mem m16 = cl_buf(h.ctx, CL_MEM_READ_WRITE, sizeof(g_x) / 2);
    cl_mem ms = cl_buf(h.ctx, CL_MEM_READ_WRITE, sizeof(g_ref_sin));
    const cl_uint q0 = qref(h.q), c0 = cref(h.ctx), mx0 = mref(mx);

    struct posenc_host_device host = {.backend = POSENC_BACKEND_OPENCL, .cl_context = h.ctx,
                                      .cl_queue = h.q};
    posenc_context *ctx = create_host_ctx(&host);
    assert_int_equal(qref(h.q), q0 + 1); /* retained, the application's reference kept */
    posenc_buffer *bx = cl_wrap(ctx, mx), *by = cl_wrap(ctx, my), *b16 = cl_wrap(ctx, m16),
                  *bs = cl_wrap(ctx, ms);
    assert_int_equal(mref(mx), mx0 + 1);
    assert_int_equal(posenc_buffer_size(bx), sizeof(g_x));
    assert_ptr_equal(posenc_buffer_context(bx), ctx);
    posenc_buffer *bp = th_upload(ctx, g_pos, sizeof(g_pos)); /* posenc's own buffer */
    posenc_tensor tx = posenc_tensor_contiguous(bx, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor ty = posenc_tensor_contiguous(by, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor t16 = posenc_tensor_contiguous(b16, 0, POSENC_DTYPE_F16, D, H, T, B);
    posenc_tensor tp = posenc_tensor_contiguous(bp, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    posenc_tensor ts = posenc_tensor_contiguous(bs, 0, POSENC_DTYPE_F32, D, T, 1, 1);

    /* The application's non-blocking write, posenc's op, the application's non-blocking
     * read: only the in-order queue orders them (no posenc_context_finish). */
    float *xin = malloc(sizeof(g_x)), *out = malloc(sizeof(g_x));
    assert_non_null(xin);
    assert_non_null(out);
    memcpy(xin, g_x, sizeof(g_x));
    for (int i = 0; i < N; i++)
        out[i] = NAN;
    CL_OK(clEnqueueWriteBuffer(h.q, mx, CL_FALSE, 0, sizeof(g_x), xin, 0, NULL, NULL));
    assert_int_equal(posenc_rope(ctx, &tx, &tp, &ty, &g_rope), POSENC_OK);
    CL_OK(clEnqueueReadBuffer(h.q, my, CL_FALSE, 0, sizeof(g_x), out, 0, NULL, NULL));
    CL_OK(clFinish(h.q));
    compare_rope_f32(out, "opencl: application write, posenc_rope, application read");

    /* Another op and f16: copy to f16, rotate in place, read back through posenc. */
    assert_int_equal(posenc_copy(ctx, &tx, &t16), POSENC_OK);
    assert_int_equal(posenc_rope(ctx, &t16, &tp, &t16, &g_rope), POSENC_OK);
    uint16_t *h16 = th_download(b16);
    compare_rope_f16(h16, "opencl: posenc_copy to f16 + posenc_rope in place");
    free(h16);
    assert_int_equal(posenc_sinusoidal(ctx, NULL, &tp, &ts, NULL), POSENC_OK);
    float sin_out[D * T];
    CL_OK(clEnqueueReadBuffer(h.q, ms, CL_TRUE, 0, sizeof(sin_out), sin_out, 0, NULL, NULL));
    compare_sin(sin_out, "opencl: posenc_sinusoidal, application blocking read");
    th_check_warnings();

    /* posenc's own buffers, programs and CLBlast on the application's queue. */
    th_run_first_cases(th.ref, ctx, PC_OP_ROPE, 2, "on the host-owned context");
    th_run_first_cases(th.ref, ctx, PC_OP_ATTENTION, 1, "on the host-owned context");

    posenc_buffer_destroy(&bx);
    assert_null(bx);
    assert_int_equal(mref(mx), mx0); /* only posenc's reference went */
    posenc_buffer_destroy(&by);
    posenc_buffer_destroy(&bs);
    posenc_buffer_destroy(&bp);
    /* b16 stays alive: a usage error that context destroy handles (logged, released) */
    posenc_context_destroy(&ctx);
    assert_null(ctx);
    assert_int_equal(mref(m16), 1);
    assert_null(posenc_buffer_context(b16));
    assert_int_equal(posenc_buffer_write(b16, 0, g_x, 4), POSENC_ERR_INVALID_ARGUMENT);
    posenc_buffer_destroy(&b16);
    assert_int_equal(cref(h.ctx), c0);

    /* The application's objects still work. */
    memset(out, 0, sizeof(g_x));
    CL_OK(clEnqueueWriteBuffer(h.q, mx, CL_TRUE, 0, sizeof(g_x), g_x, 0, NULL, NULL));
    CL_OK(clEnqueueReadBuffer(h.q, mx, CL_TRUE, 0, sizeof(g_x), out, 0, NULL, NULL));
    assert_memory_equal(out, g_x, sizeof(g_x));
    free(xin);
    free(out);
    CL_OK(clReleaseMemObject(mx));
    CL_OK(clReleaseMemObject(my));
    CL_OK(clReleaseMemObject(m16));
    CL_OK(clReleaseMemObject(ms));
    /* Only now: PoCL keeps each buffer's last event, and so a reference to the queue,
     * while the buffer lives, and its worker threads drop those references
     * asynchronously (seen under load: one extra reference for a few milliseconds).
     * posenc's own reference is gone for good, so wait up to 2 s for the count to settle. */
    CL_OK(clFinish(h.q));
    for (int i = 0; i < 200 && qref(h.q) != q0; i++)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    assert_int_equal(qref(h.q), q0);
    cl_host_close(&h);
    th_check_warnings();
}

static void test_cl_bad_input(void **state)
{
    (void)state;
    struct cl_host h, h2;
    cl_host_open(&h);
    cl_host_open(&h2);
    const cl_uint q0 = qref(h.q), c0 = cref(h.ctx);
    struct posenc_host_device host = {.backend = POSENC_BACKEND_OPENCL, .cl_context = h.ctx,
                                      .cl_queue = h.q};
    struct posenc_host_device bad = host;
    bad.cl_queue = NULL;
    expect_create_fails(NULL, &bad, POSENC_ERR_INVALID_ARGUMENT, "host->cl_queue is NULL",
                        "NULL queue");
    bad = host;
    bad.cl_queue = h2.q;
    expect_create_fails(NULL, &bad, POSENC_ERR_INVALID_ARGUMENT, "belongs to cl_context",
                        "queue of another context");
    bad = host;
    bad.vk_device = h.q;
    expect_create_fails(NULL, &bad, POSENC_ERR_INVALID_ARGUMENT, "host->vk_device is set",
                        "a Vulkan field on OpenCL");
    bad = host;
    bad.vk_get_instance_proc_addr = (void (*)(void))test_cl_bad_input; /* never called */
    expect_create_fails(NULL, &bad, POSENC_ERR_INVALID_ARGUMENT,
                        "host->vk_get_instance_proc_addr is set", "a Vulkan field on OpenCL");
    bad = host;
    bad.reserved[4] = 3;
    expect_create_fails(NULL, &bad, POSENC_ERR_INVALID_ARGUMENT, "host->reserved[4] = 3",
                        "host reserved");
    struct posenc_context_params p = {.backend = POSENC_BACKEND_VULKAN};
    expect_create_fails(&p, &host, POSENC_ERR_INVALID_ARGUMENT, "params->backend = vulkan",
                        "params->backend mismatch");
    p.backend = POSENC_BACKEND_OPENCL;
    p.device = 2;
    expect_create_fails(&p, &host, POSENC_ERR_INVALID_ARGUMENT, "params->device = 2",
                        "params->device");
    cl_int err = CL_SUCCESS;
    cl_command_queue ooo =
        clCreateCommandQueue(h.ctx, h.dev, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
    if (err == CL_SUCCESS) {
        bad = host;
        bad.cl_queue = ooo;
        expect_create_fails(NULL, &bad, POSENC_ERR_INVALID_ARGUMENT, "out of order",
                            "out-of-order queue");
        CL_OK(clReleaseCommandQueue(ooo));
    } else {
        printf("note: the device refuses out-of-order queues (%d); that row is not run\n",
               (int)err);
    }
    assert_int_equal(qref(h.q), q0); /* failures took no reference */
    assert_int_equal(cref(h.ctx), c0);

    posenc_context *ctx = create_host_ctx(&host);
    cl_mem other = cl_buf(h2.ctx, CL_MEM_READ_WRITE, 256);
    cl_mem ro = cl_buf(h.ctx, CL_MEM_READ_ONLY, 256);
    posenc_buffer *b = (posenc_buffer *)(uintptr_t)1;
    expect(posenc_buffer_wrap_opencl(ctx, other, &b), POSENC_ERR_INVALID_ARGUMENT, ctx, NULL,
           "belongs to cl_context", "cl_mem of another context");
    assert_null(b);
    expect(posenc_buffer_wrap_opencl(ctx, ro, &b), POSENC_ERR_INVALID_ARGUMENT, ctx, NULL,
           "CL_MEM_FLAGS", "read-only cl_mem");
    expect(posenc_buffer_wrap_opencl(ctx, NULL, &b), POSENC_ERR_INVALID_ARGUMENT, ctx, NULL,
           "cl_mem is NULL", "NULL cl_mem");
    expect(posenc_buffer_wrap_vulkan(ctx, 0x40, 256, &b), POSENC_ERR_INVALID_ARGUMENT, ctx,
           NULL, "opencl context, not vulkan", "wrap_vulkan on OpenCL");
    assert_null(b);
    assert_int_equal(mref(other), 1);
    assert_int_equal(mref(ro), 1);
    posenc_context_destroy(&ctx);
    assert_int_equal(qref(h.q), q0);
    CL_OK(clReleaseMemObject(other));
    CL_OK(clReleaseMemObject(ro));
    cl_host_close(&h2);
    cl_host_close(&h);
    th_check_warnings();
}
#endif

/* ---- Vulkan ------------------------------------------------------------------------- */

#if TH_HAVE_VULKAN
static void test_vk_wrapped(void **state)
{
    (void)state;
    ensure_reference();
    struct vk_host h;
    vk_host_open(&h);
    struct vk_buf x, y, x16, s, fill, pos, rb;
    vk_buf_make(&h, sizeof(g_x), true, &x);
    vk_buf_make(&h, sizeof(g_x), false, &y);
    vk_buf_make(&h, sizeof(g_x) / 2, false, &x16);
    vk_buf_make(&h, sizeof(g_ref_sin), false, &s);
    vk_buf_make(&h, sizeof(g_x), false, &fill);
    vk_buf_make(&h, sizeof(g_pos), false, &pos);
    vk_buf_make(&h, sizeof(g_x), true, &rb); /* the application's read-back buffer */

    struct posenc_host_device host = vk_host_device(&h);
    posenc_context *ctx = create_host_ctx(&host);
    posenc_buffer *bx = vk_wrap(ctx, &x, sizeof(g_x)), *by = vk_wrap(ctx, &y, sizeof(g_x)),
                  *b16 = vk_wrap(ctx, &x16, sizeof(g_x) / 2),
                  *bs = vk_wrap(ctx, &s, sizeof(g_ref_sin)),
                  *bf = vk_wrap(ctx, &fill, sizeof(g_x)), *bp = vk_wrap(ctx, &pos, sizeof(g_pos));
    assert_int_equal(posenc_buffer_size(bx), sizeof(g_x));
    posenc_tensor tx = posenc_tensor_contiguous(bx, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor ty = posenc_tensor_contiguous(by, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor tf = posenc_tensor_contiguous(bf, 0, POSENC_DTYPE_F32, D, H, T, B);
    posenc_tensor t16 = posenc_tensor_contiguous(b16, 0, POSENC_DTYPE_F16, D, H, T, B);
    posenc_tensor tp = posenc_tensor_contiguous(bp, 0, POSENC_DTYPE_I32, T, 1, 1, 1);
    posenc_tensor ts = posenc_tensor_contiguous(bs, 0, POSENC_DTYPE_F32, D, T, 1, 1);

    /* x written by the application through its own mapping, positions through posenc's
     * staging path; then posenc's op, and the application's copy of the result submitted
     * right after it on the queue, without posenc_context_finish. */
    memcpy(x.map, g_x, sizeof(g_x));
    assert_int_equal(posenc_buffer_write(bp, 0, g_pos, sizeof(g_pos)), POSENC_OK);
    assert_int_equal(posenc_rope(ctx, &tx, &tp, &ty, &g_rope), POSENC_OK);
    vk_copy_and_wait(&h, y.buf, rb.buf, sizeof(g_x));
    compare_rope_f32(rb.map, "vulkan: posenc_rope, then the application's copy");

    /* Another op and f16, read back through posenc (staging: wrapped buffers are never
     * mapped by posenc). */
    assert_int_equal(posenc_copy(ctx, &tx, &t16), POSENC_OK);
    assert_int_equal(posenc_rope(ctx, &t16, &tp, &t16, &g_rope), POSENC_OK);
    uint16_t *h16 = th_download(b16);
    compare_rope_f16(h16, "vulkan: posenc_copy to f16 + posenc_rope in place");
    free(h16);
    assert_int_equal(posenc_sinusoidal(ctx, NULL, &tp, &ts, NULL), POSENC_OK);
    float *sin_out = th_download(bs);
    compare_sin(sin_out, "vulkan: posenc_sinusoidal");
    free(sin_out);

    /* The application's fill submitted (not waited for) before a posenc op that reads
     * the buffer: posenc's first barrier orders them. */
    vk_begin(&h);
    const float v = 1.5f;
    uint32_t bits;
    memcpy(&bits, &v, 4);
    vkCmdFillBuffer(h.cmd, fill.buf, 0, sizeof(g_x), bits);
    vk_submit(&h, false);
    assert_int_equal(posenc_copy(ctx, &tf, &ty), POSENC_OK);
    float *got = th_download(by);
    for (int i = 0; i < N; i++)
        if (got[i] != v)
            fail_msg("vulkan: element %d after the application's fill + posenc_copy = %g, "
                     "want %g",
                     i, got[i], v);
    free(got);
    vk_wait(&h);
    th_check_warnings();

    /* posenc's own buffers and pipelines on the application's device. */
    th_run_first_cases(th.ref, ctx, PC_OP_ROPE, 2, "on the host-owned context");
    th_run_first_cases(th.ref, ctx, PC_OP_ATTENTION, 1, "on the host-owned context");

    posenc_buffer_destroy(&bx);
    posenc_buffer_destroy(&by);
    posenc_buffer_destroy(&bs);
    posenc_buffer_destroy(&bf);
    posenc_buffer_destroy(&bp);
    /* b16 stays alive: a usage error that context destroy handles */
    posenc_context_destroy(&ctx);
    assert_null(posenc_buffer_context(b16));
    posenc_buffer_destroy(&b16);
    assert_int_equal(g_vk_messages, 0);

    /* The application's device and queue still work, and its buffers are intact. */
    vk_copy_and_wait(&h, x.buf, rb.buf, sizeof(g_x));
    assert_memory_equal(rb.map, g_x, sizeof(g_x));
    vk_buf_free(&h, &x);
    vk_buf_free(&h, &y);
    vk_buf_free(&h, &x16);
    vk_buf_free(&h, &s);
    vk_buf_free(&h, &fill);
    vk_buf_free(&h, &pos);
    vk_buf_free(&h, &rb);
    vk_host_close_checked(&h);
}

/* The application's loader functions, counted: posenc must get every Vulkan function of
 * a context made with vk_get_instance_proc_addr through it, and call them at run time. */
static int g_gipa_calls, g_gdpa_calls, g_submits;
static PFN_vkGetDeviceProcAddr g_real_gdpa;
static PFN_vkQueueSubmit g_real_submit;

static VKAPI_ATTR VkResult VKAPI_CALL counting_submit(VkQueue q, uint32_t n,
                                                      const VkSubmitInfo *si, VkFence f)
{
    g_submits++;
    return g_real_submit(q, n, si, f);
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL counting_gdpa(VkDevice dev, const char *name)
{
    g_gdpa_calls++;
    PFN_vkVoidFunction f = g_real_gdpa(dev, name);
    if (f && strcmp(name, "vkQueueSubmit") == 0) {
        g_real_submit = (PFN_vkQueueSubmit)f;
        return (PFN_vkVoidFunction)counting_submit;
    }
    return f;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL counting_gipa(VkInstance inst, const char *name)
{
    g_gipa_calls++;
    PFN_vkVoidFunction f = vkGetInstanceProcAddr(inst, name);
    if (f && strcmp(name, "vkGetDeviceProcAddr") == 0) {
        g_real_gdpa = (PFN_vkGetDeviceProcAddr)f;
        return (PFN_vkVoidFunction)counting_gdpa;
    }
    return f;
}

static void test_vk_proc_addr(void **state)
{
    (void)state;
    ensure_reference();
    struct vk_host h;
    vk_host_open(&h);
    g_gipa_calls = g_gdpa_calls = g_submits = 0;
    struct posenc_host_device host = vk_host_device(&h);
    host.vk_get_instance_proc_addr = (void (*)(void))counting_gipa;
    posenc_context *ctx = create_host_ctx(&host);
    /* Every instance-level command of Vulkan 1.0 + 1.1 (24) through the wrapper, every
     * device-level one (136) through the vkGetDeviceProcAddr it handed out: at least
     * those many lookups (posenc's table covers all of them, used or not). */
    printf("vk_get_instance_proc_addr: %d instance and %d device lookups through the "
           "application's functions\n", g_gipa_calls, g_gdpa_calls);
    assert_true(g_gipa_calls >= 24);
    assert_true(g_gdpa_calls >= 136);
    assert_non_null(g_real_submit);
    /* posenc's ops on the application's device, against the reference: they submit
     * through the counting vkQueueSubmit. */
    th_run_first_cases(th.ref, ctx, PC_OP_ROPE, 1, "on the host-owned context");
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    int host_submits = g_submits;
    assert_true(host_submits > 0);
    /* posenc's own Vulkan context (th.dut, from posenc's libvulkan) alive in the same
     * process: its ops run and pass, and none of its calls goes through the wrapper */
    th_run_first_cases(th.ref, th.dut, PC_OP_ROPE, 1, "on the host-owned context");
    assert_int_equal(posenc_context_finish(th.dut), POSENC_OK);
    assert_int_equal(g_submits, host_submits);
    /* the host-owned context still works after the other one ran */
    th_run_first_cases(th.ref, ctx, PC_OP_SINUSOIDAL, 1, "on the host-owned context");
    assert_int_equal(posenc_context_finish(ctx), POSENC_OK);
    assert_true(g_submits > host_submits);
    posenc_context_destroy(&ctx);

    /* The application's plain vkGetInstanceProcAddr. */
    host.vk_get_instance_proc_addr = (void (*)(void))vkGetInstanceProcAddr;
    ctx = create_host_ctx(&host);
    th_run_first_cases(th.ref, ctx, PC_OP_ROPE, 1, "on the host-owned context");
    posenc_context_destroy(&ctx);
    vk_host_close_checked(&h);
}

static void test_vk_bad_input(void **state)
{
    (void)state;
    struct vk_host h;
    vk_host_open(&h);
    struct posenc_host_device host = vk_host_device(&h);
    struct posenc_host_device bad = host;
    bad.vk_device = NULL;
    expect_create_fails(NULL, &bad, POSENC_ERR_INVALID_ARGUMENT, "host->vk_device is NULL",
                        "NULL device");
    bad = host;
    bad.vk_queue = NULL;
    expect_create_fails(NULL, &bad, POSENC_ERR_INVALID_ARGUMENT, "host->vk_queue is NULL",
                        "NULL queue");
    bad = host;
    bad.vk_physical_device = h.dev; /* not a physical device of the instance */
    expect_create_fails(NULL, &bad, POSENC_ERR_INVALID_ARGUMENT,
                        "is not one of the 1 physical devices", "foreign physical device");
    bad = host;
    bad.vk_queue_family = 99;
    expect_create_fails(NULL, &bad, POSENC_ERR_INVALID_ARGUMENT, "host->vk_queue_family = 99",
                        "queue family out of range");
    bad = host;
    bad.cl_queue = h.q;
    expect_create_fails(NULL, &bad, POSENC_ERR_INVALID_ARGUMENT, "host->cl_queue is set",
                        "an OpenCL field on Vulkan");
    struct posenc_context_params p = {.backend = POSENC_BACKEND_OPENCL};
    expect_create_fails(&p, &host, POSENC_ERR_INVALID_ARGUMENT, "params->backend = opencl",
                        "params->backend mismatch");

    posenc_context *ctx = create_host_ctx(&host);
    struct vk_buf b;
    vk_buf_make(&h, 256, false, &b);
    const uint64_t hb = vk_handle(b.buf);
    posenc_buffer *pb = (posenc_buffer *)(uintptr_t)1;
    expect(posenc_buffer_wrap_vulkan(ctx, 0, 256, &pb), POSENC_ERR_INVALID_ARGUMENT, ctx, NULL,
           "vk_buffer (VK_NULL_HANDLE) is NULL", "VK_NULL_HANDLE");
    assert_null(pb);
    expect(posenc_buffer_wrap_vulkan(ctx, hb, 0, &pb), POSENC_ERR_INVALID_ARGUMENT, ctx, NULL,
           "size = 0", "size 0");
    expect(posenc_buffer_wrap_vulkan(ctx, hb, 6, &pb), POSENC_ERR_INVALID_ARGUMENT, ctx, NULL,
           "size = 6 is not a multiple of 4", "size 6");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(h.dev, b.buf, &req);
    char needle[64];
    snprintf(needle, sizeof(needle), "size = %llu is larger than",
             (unsigned long long)(req.size + 4));
    expect(posenc_buffer_wrap_vulkan(ctx, hb, req.size + 4, &pb), POSENC_ERR_INVALID_ARGUMENT,
           ctx, NULL, needle, "size past the buffer");
    int dummy = 0;
    expect(posenc_buffer_wrap_opencl(ctx, &dummy, &pb), POSENC_ERR_INVALID_ARGUMENT, ctx, NULL,
           "vulkan context, not opencl", "wrap_opencl on Vulkan");
    expect(posenc_buffer_wrap_vulkan(ctx, hb, 256, NULL), POSENC_ERR_INVALID_ARGUMENT, ctx,
           NULL, "out_buffer is NULL", "out NULL");
    assert_null(pb);
    /* a valid wrap right after the failures: nothing was left half-done */
    pb = vk_wrap(ctx, &b, 256);
    float z[64] = {0}, back[64];
    assert_int_equal(posenc_buffer_write(pb, 0, z, sizeof(z)), POSENC_OK);
    assert_int_equal(posenc_buffer_read(pb, 0, back, sizeof(back)), POSENC_OK);
    assert_memory_equal(z, back, sizeof(z));
    posenc_buffer_destroy(&pb);
    posenc_context_destroy(&ctx);
    vk_buf_free(&h, &b);
    vk_host_close_checked(&h);
}
#endif

int main(int argc, char **argv)
{
    int rc = th_init(argc, argv, "host_owned");
    if (rc >= 0)
        return rc;
#if TH_HAVE_OPENCL || TH_HAVE_VULKAN
    make_inputs();
#endif
    struct CMUnitTest tests[8];
    size_t n = 0;
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_generic_bad_input);
    if (th.kind == POSENC_BACKEND_OPENCL) {
#if TH_HAVE_OPENCL
        tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_cl_bad_input);
        tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_cl_wrapped);
#else
        fprintf(stderr, "host_owned: posenc has OpenCL but this test was built without it\n");
        th_fini();
        return 1;
#endif
    }
    if (th.kind == POSENC_BACKEND_VULKAN) {
#if TH_HAVE_VULKAN
        tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_vk_bad_input);
        tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_vk_wrapped);
        tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_vk_proc_addr);
#else
        fprintf(stderr, "host_owned: posenc has Vulkan but this test was built without it\n");
        th_fini();
        return 1;
#endif
    }
    rc = th_run("host_owned", tests, n);
    th_fini();
    return rc;
}
