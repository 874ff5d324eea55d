/*
 * test_loading.c - the OpenCL ICD loader, CLBlast and the Vulkan loader opened at run time
 * (issue #18, docs/loading.md). tests/meson.build runs it in environments where some of
 * them cannot be loaded, and says which in POSENC_TEST_MISSING (a comma-separated list of
 * opencl, vulkan, clblast): POSENC_*_LIBRARY naming a file that does not exist, or
 * (tests/run_masked.sh) the real files made unloadable in a private mount namespace. It
 * checks:
 *
 *  - a missing library: posenc_backend_device_count and posenc_context_create answer
 *    POSENC_ERR_UNAVAILABLE with a message naming the library (the file the variable names,
 *    or the default name) and the variable that points at another file, the same on a
 *    second call (one attempt per process), and AUTO still gives a context;
 *  - a library that is there (and its backend listed in POSENC_TEST_REQUIRE): the backend
 *    has devices;
 *  - CLBlast: attention on OpenCL against the CPU reference; without CLBlast, the DEBUG
 *    line naming what was looked for and libclblast absent from /proc/self/maps (never
 *    loaded, so never used); with it, libclblast mapped after the same calls (so the
 *    check can fail);
 *  - a host-owned Vulkan context with the application's vkGetInstanceProcAddr (the test
 *    opens libvulkan itself, as such applications do) works where posenc's own loader is
 *    missing too, and without it answers UNAVAILABLE there;
 *  - struct posenc_host_device kept its size and offsets when vk_get_instance_proc_addr
 *    took its share of reserved;
 *  - every function of the loaders' tables has its #define (cl_loader.h, vk_loader.h), so
 *    code calling any of them by name compiles to a call through the table.
 */
#include "check.h"
#include "harness.h"
#include "posenc_config.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if POSENC_HAVE_OPENCL
#include "cl_loader.h"
#endif
#if POSENC_HAVE_VULKAN
#include "vk_loader.h"
#endif

/* ---- struct posenc_host_device: size and offsets unchanged -------------------------- */

/* The struct before vk_get_instance_proc_addr (posenc 0.1.0). */
struct host_device_before {
    posenc_backend_kind backend;
    void *cl_context;
    void *cl_queue;
    void *vk_instance;
    void *vk_physical_device;
    void *vk_device;
    void *vk_queue;
    uint32_t vk_queue_family;
    uint32_t reserved[7];
};
#define SAME_OFFSET(f)                                                                     \
    _Static_assert(offsetof(struct posenc_host_device, f) ==                               \
                       offsetof(struct host_device_before, f),                             \
                   "posenc_host_device." #f " moved")
SAME_OFFSET(backend);
SAME_OFFSET(cl_context);
SAME_OFFSET(cl_queue);
SAME_OFFSET(vk_instance);
SAME_OFFSET(vk_physical_device);
SAME_OFFSET(vk_device);
SAME_OFFSET(vk_queue);
SAME_OFFSET(vk_queue_family);
SAME_OFFSET(reserved);
_Static_assert(sizeof(struct posenc_host_device) == sizeof(struct host_device_before),
               "posenc_host_device changed size");
_Static_assert(offsetof(struct posenc_host_device, vk_get_instance_proc_addr) +
                       sizeof(void (*)(void)) ==
                   sizeof(struct host_device_before),
               "vk_get_instance_proc_addr must take the end of the old reserved words");

/* ---- what the environment hides ------------------------------------------------------ */

static bool listed(const char *env, const char *name)
{
    const char *list = getenv(env);
    if (!list)
        return false;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
            return true;
    return false;
}

static bool missing(const char *name)
{
    return listed("POSENC_TEST_MISSING", name);
}

#if POSENC_HAVE_OPENCL || POSENC_HAVE_VULKAN /* what only the GPU backends' checks use */
/* What a message about library `lib` (default name `default_name`, variable `var`) must
 * contain: the file the variable names when it is set, else the default name; and the
 * variable. */
static void expect_names_library(const char *msg, const char *var, const char *default_name,
                                 const char *what)
{
    const char *env = getenv(var);
    const char *lib = env && *env ? env : default_name;
    if (!strstr(msg, lib) || !strstr(msg, var))
        fail_msg("%s: \"%s\" does not name %s and %s", what, msg, lib, var);
}

#endif

#if POSENC_HAVE_OPENCL
/* /proc/self/maps mentions `needle` (a library of this process). -1: no /proc. */
static int mapped(const char *needle)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}
#endif

struct log_capture {
    char text[8192];
};

static void capture_log(posenc_log_level level, const char *msg, void *user)
{
    struct log_capture *c = user;
    size_t n = strlen(c->text);
    snprintf(c->text + n, sizeof(c->text) - n, "[%d] %s\n", (int)level, msg);
}

static posenc_context *g_ref; /* the CPU reference loops */

static void ensure_ref(void)
{
    if (g_ref)
        return;
    struct posenc_context_params rp = {.backend = POSENC_BACKEND_CPU,
                                       .flags = POSENC_CONTEXT_CPU_REFERENCE};
    char err[512];
    if (posenc_context_create(&rp, &g_ref, err, sizeof(err)) != POSENC_OK)
        fail_msg("CPU reference: %s", err);
}

/* The first `per_dtype` small cases of `op` with an f32 and with an f16 output on `ctx`,
 * against the reference (th_run_first_cases: the bounds of src/check/check.c). */
static void run_cases(posenc_context *ctx, enum pc_op op, size_t per_dtype, const char *what)
{
    ensure_ref();
    th_run_first_cases(g_ref, ctx, op, per_dtype, what);
}

/* ---- a backend whose library is missing, or there ----------------------------------- */

#if POSENC_HAVE_OPENCL || POSENC_HAVE_VULKAN
static void check_backend(posenc_backend_kind kind, const char *var, const char *default_name)
{
    const char *name = posenc_backend_name(kind);
    int32_t count = -1;
    char why[512] = "";
    posenc_status st = posenc_backend_device_count(kind, &count, why, sizeof(why));
    if (missing(name)) {
        /* twice: the first attempt's answer is kept, and says the same */
        for (int rep = 0; rep < 2; rep++) {
            if (rep)
                st = posenc_backend_device_count(kind, &count, why, sizeof(why));
            assert_int_equal(st, POSENC_ERR_UNAVAILABLE);
            assert_int_equal(count, 0);
            expect_names_library(why, var, default_name, "posenc_backend_device_count");
        }
        struct posenc_context_params p = {.backend = kind};
        posenc_context *ctx = (posenc_context *)(uintptr_t)1;
        char err[512] = "";
        assert_int_equal(posenc_context_create(&p, &ctx, err, sizeof(err)),
                         POSENC_ERR_UNAVAILABLE);
        assert_null(ctx);
        expect_names_library(err, var, default_name, "posenc_context_create");
        expect_names_library(posenc_last_error(), var, default_name, "posenc_last_error");
        printf("%s unavailable: %s\n", name, err);
    } else if (listed("POSENC_TEST_REQUIRE", name)) {
        if (st != POSENC_OK)
            fail_msg("%s: %s: %s", name, posenc_status_string(st), why);
        assert_true(count >= 1);
        printf("%s: %d device(s)\n", name, (int)count);
    }
}
#endif

static void test_opencl(void **state)
{
    (void)state;
#if POSENC_HAVE_OPENCL
    check_backend(POSENC_BACKEND_OPENCL, "POSENC_OPENCL_LIBRARY", "libOpenCL.so.1");
#else
    skip();
#endif
}

static void test_vulkan(void **state)
{
    (void)state;
#if POSENC_HAVE_VULKAN
    check_backend(POSENC_BACKEND_VULKAN, "POSENC_VULKAN_LIBRARY", "libvulkan.so.1");
#else
    skip();
#endif
}

/* AUTO gives a context whatever is missing (the CPU backend at worst), and it runs. */
static void test_auto(void **state)
{
    (void)state;
    struct log_capture cap = {""};
    struct posenc_context_params p = {.log_fn = capture_log, .log_level = POSENC_LOG_INFO,
                                      .log_user_data = &cap};
    posenc_context *ctx = NULL;
    char err[512];
    posenc_status st = posenc_context_create(&p, &ctx, err, sizeof(err));
    if (st != POSENC_OK)
        fail_msg("AUTO: %s: %s", posenc_status_string(st), err);
    if (missing("vulkan") && POSENC_HAVE_VULKAN) {
        /* AUTO's probe of Vulkan was skipped with the loader's reason, at INFO */
        if (!strstr(cap.text, "auto: vulkan skipped: ") ||
            !strstr(cap.text, "POSENC_VULKAN_LIBRARY"))
            fail_msg("AUTO's log does not say why Vulkan was skipped: %s", cap.text);
    }
    run_cases(ctx, PC_OP_SINUSOIDAL, 1, "AUTO");
    posenc_context_destroy(&ctx);
}

/* ---- CLBlast, or posenc's own GEMM kernels ------------------------------------------- */

static void test_clblast(void **state)
{
    (void)state;
#if POSENC_HAVE_OPENCL
    if (missing("opencl")) {
        skip();
        return;
    }
    const char *no = getenv("POSENC_CL_NO_CLBLAST");
    bool forced_off = no && no[0] && strcmp(no, "0") != 0;
    struct log_capture cap = {""};
    struct posenc_context_params p = {.backend = POSENC_BACKEND_OPENCL,
                                      .log_fn = capture_log,
                                      .log_level = POSENC_LOG_DEBUG,
                                      .log_user_data = &cap};
    posenc_context *ctx = NULL;
    char err[512];
    posenc_status st = posenc_context_create(&p, &ctx, err, sizeof(err));
    if (st == POSENC_ERR_UNAVAILABLE && !listed("POSENC_TEST_REQUIRE", "opencl")) {
        skip();
        return;
    }
    if (st != POSENC_OK)
        fail_msg("opencl: %s: %s", posenc_status_string(st), err);
    assert_int_equal(mapped("libclblast"), 0); /* nothing has asked for it yet */
    run_cases(ctx, PC_OP_ATTENTION, 3, "attention on OpenCL");
    int m = mapped("libclblast");
    if (missing("clblast")) {
        /* posenc's kernels computed it: CLBlast was never loaded */
        assert_int_equal(m, 0);
        expect_names_library(strstr(cap.text, "CLBlast") ? strstr(cap.text, "CLBlast") : "",
                             "POSENC_CLBLAST_LIBRARY", "libclblast.so.1", "the DEBUG line");
        if (!strstr(cap.text, "attention uses posenc's own GEMM kernels"))
            fail_msg("no DEBUG line about the fallback in: %s", cap.text);
        printf("attention without CLBlast: posenc's kernels; libclblast not loaded\n");
    } else if (POSENC_HAVE_CLBLAST && !forced_off) {
        /* the same calls load and use CLBlast when it is there */
        assert_int_equal(m, 1);
        if (strstr(cap.text, "own GEMM kernels"))
            fail_msg("CLBlast is there but posenc says it is not: %s", cap.text);
        printf("attention through CLBlast (libclblast mapped)\n");
    }
    posenc_context_destroy(&ctx);
#else
    skip();
#endif
}

/* ---- a host-owned Vulkan context through the application's loader ------------------- */

#if POSENC_HAVE_VULKAN
/* The application: a Vulkan 1.1 instance, its first device with a compute queue, through
 * the loader it opened itself. Returns false when it has no Vulkan. */
struct app_vk {
    PFN_vkGetInstanceProcAddr gipa;
    PFN_vkDestroyInstance destroy_instance;
    PFN_vkDestroyDevice destroy_device;
    VkInstance inst;
    VkPhysicalDevice phys;
    VkDevice dev;
    VkQueue queue;
    uint32_t family;
};

static bool app_vk_open(struct app_vk *a)
{
    memset(a, 0, sizeof(*a));
    /* never closed, like posenc's own: the loader keeps process-wide state */
    void *lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return false;
    void *sym = dlsym(lib, "vkGetInstanceProcAddr");
    if (!sym)
        return false;
    memcpy(&a->gipa, &sym, sizeof(sym));
    PFN_vkCreateInstance create_instance =
        (PFN_vkCreateInstance)a->gipa(VK_NULL_HANDLE, "vkCreateInstance");
    assert_non_null(create_instance);
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "test_loading",
                             .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pApplicationInfo = &app};
    if (create_instance(&ci, NULL, &a->inst) != VK_SUCCESS)
        return false;
#define APP_FN(type, var, name) type var = (type)a->gipa(a->inst, name)
    APP_FN(PFN_vkEnumeratePhysicalDevices, enum_phys, "vkEnumeratePhysicalDevices");
    APP_FN(PFN_vkGetPhysicalDeviceQueueFamilyProperties, families,
           "vkGetPhysicalDeviceQueueFamilyProperties");
    APP_FN(PFN_vkCreateDevice, create_device, "vkCreateDevice");
    APP_FN(PFN_vkGetDeviceQueue, get_queue, "vkGetDeviceQueue");
#undef APP_FN
    a->destroy_instance = (PFN_vkDestroyInstance)a->gipa(a->inst, "vkDestroyInstance");
    a->destroy_device = (PFN_vkDestroyDevice)a->gipa(a->inst, "vkDestroyDevice");
    assert_true(enum_phys && families && create_device && get_queue && a->destroy_instance &&
                a->destroy_device);
    uint32_t n = 1;
    VkResult r = enum_phys(a->inst, &n, &a->phys);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0) {
        a->destroy_instance(a->inst, NULL);
        return false;
    }
    VkQueueFamilyProperties fam[16];
    uint32_t nf = 16;
    families(a->phys, &nf, fam);
    a->family = UINT32_MAX;
    for (uint32_t i = 0; i < nf && a->family == UINT32_MAX; i++)
        if (fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            a->family = i;
    assert_true(a->family != UINT32_MAX);
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = a->family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci};
    assert_int_equal(create_device(a->phys, &dci, NULL, &a->dev), VK_SUCCESS);
    get_queue(a->dev, a->family, 0, &a->queue);
    return true;
}

static void app_vk_close(struct app_vk *a)
{
    a->destroy_device(a->dev, NULL);
    a->destroy_instance(a->inst, NULL);
}
#endif

static void test_vk_host_proc_addr(void **state)
{
    (void)state;
#if POSENC_HAVE_VULKAN
    struct app_vk a;
    if (!app_vk_open(&a)) {
        printf("note: the application side has no Vulkan here (libvulkan.so.1 or a device)\n");
        skip();
        return;
    }
    struct posenc_host_device host = {.backend = POSENC_BACKEND_VULKAN,
                                      .vk_instance = a.inst,
                                      .vk_physical_device = a.phys,
                                      .vk_device = a.dev,
                                      .vk_queue = a.queue,
                                      .vk_queue_family = a.family,
                                      .vk_get_instance_proc_addr = (void (*)(void))a.gipa};
    posenc_context *ctx = NULL;
    char err[512];
    posenc_status st = posenc_context_create_from_host(NULL, &host, &ctx, err, sizeof(err));
    if (st != POSENC_OK)
        fail_msg("host-owned with the application's vkGetInstanceProcAddr: %s: %s",
                 posenc_status_string(st), err);
    run_cases(ctx, PC_OP_SINUSOIDAL, 1, "host-owned Vulkan (application's loader)");
    run_cases(ctx, PC_OP_ROPE, 1, "host-owned Vulkan (application's loader)");
    posenc_context_destroy(&ctx);

    /* Without it posenc opens its own loader: missing here means UNAVAILABLE. */
    host.vk_get_instance_proc_addr = NULL;
    st = posenc_context_create_from_host(NULL, &host, &ctx, err, sizeof(err));
    if (missing("vulkan")) {
        assert_int_equal(st, POSENC_ERR_UNAVAILABLE);
        assert_null(ctx);
        expect_names_library(err, "POSENC_VULKAN_LIBRARY", "libvulkan.so.1",
                             "host-owned without vk_get_instance_proc_addr");
    } else {
        if (st != POSENC_OK)
            fail_msg("host-owned through posenc's loader: %s: %s", posenc_status_string(st),
                     err);
        run_cases(ctx, PC_OP_SINUSOIDAL, 1, "host-owned Vulkan (posenc's loader)");
        posenc_context_destroy(&ctx);
    }
    app_vk_close(&a);
#else
    skip();
#endif
}

/* ---- every table entry has its #define ---------------------------------------------- */

#define STR_(x) #x
#define STR(x) STR_(x)

static int n_checked;

#if POSENC_HAVE_OPENCL || POSENC_HAVE_VULKAN
static void check_macro(const char *name, const char *expansion, const char *table)
{
    char want[192];
    snprintf(want, sizeof(want), "(%s.%s)", table, name);
    if (strcmp(expansion, want) != 0)
        fail_msg("%s expands to \"%s\", not \"%s\": add its #define", name, expansion, want);
    n_checked++;
}
#endif

static void test_table_macros(void **state)
{
    (void)state;
#if POSENC_HAVE_OPENCL
#define CHECK_CL(name) check_macro(#name, STR(name), "pe_cl_fn");
    PE_CL_COMMANDS(CHECK_CL)
#undef CHECK_CL
#if POSENC_HAVE_CLBLAST
#define CHECK_CLBLAST(name) check_macro(#name, STR(name), "pe_clblast_fn");
    PE_CLBLAST_COMMANDS(CHECK_CLBLAST)
#undef CHECK_CLBLAST
#endif
#endif
#if POSENC_HAVE_VULKAN
    int before = n_checked;
    check_macro("vkGetInstanceProcAddr", STR(vkGetInstanceProcAddr), "pe_vk_global");
#define CHECK_VK_GLOBAL(name) check_macro(#name, STR(name), "pe_vk_global");
#define CHECK_VK(name) check_macro(#name, STR(name), "be->vk");
    PE_VK_GLOBAL_COMMANDS(CHECK_VK_GLOBAL)
    PE_VK_INSTANCE_COMMANDS(CHECK_VK)
    PE_VK_DEVICE_COMMANDS(CHECK_VK)
#undef CHECK_VK
#undef CHECK_VK_GLOBAL
    /* Vulkan 1.0 has 137 commands and 1.1 adds 28 (the specification's command lists,
     * extensions not included): all of them are in the tables. */
    assert_int_equal(n_checked - before, 137 + 28);
#endif
    printf("%d table entries, each with its #define\n", n_checked);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_macros),
        cmocka_unit_test(test_opencl),
        cmocka_unit_test(test_vulkan),
        cmocka_unit_test(test_auto),
        cmocka_unit_test(test_clblast),
        cmocka_unit_test(test_vk_host_proc_addr),
    };
    const char *m = getenv("POSENC_TEST_MISSING");
    printf("loading: missing here: %s\n", m && *m ? m : "(nothing)");
    int rc = cmocka_run_group_tests_name("loading", tests, NULL, NULL);
    posenc_context_destroy(&g_ref);
    return rc;
}
