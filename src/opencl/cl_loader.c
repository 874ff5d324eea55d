/* cl_loader.c - see cl_loader.h. */
#define PE_CL_LOADER_NO_MACROS
#include "cl_loader.h"

#include "dynload.h"
#include "internal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

struct pe_cl_funcs pe_cl_fn;

/* Where an OpenCL ICD loader usually is: the dynamic linker's search (Linux: the
 * ocl-icd / Khronos loader, libOpenCL.so.1; the unversioned name of a development
 * package or a vendor's own library), then the vendor partitions of Android, where
 * the GPU vendor's libOpenCL.so is not on the default search path of an app. */
static const char *const cl_names[] = {
    "libOpenCL.so.1",
    "libOpenCL.so",
#if UINTPTR_MAX > 0xffffffffu
    "/vendor/lib64/libOpenCL.so",
    "/system/vendor/lib64/libOpenCL.so",
    "/system/lib64/libOpenCL.so",
#else
    "/vendor/lib/libOpenCL.so",
    "/system/vendor/lib/libOpenCL.so",
    "/system/lib/libOpenCL.so",
#endif
};

static pthread_once_t cl_once = PTHREAD_ONCE_INIT;
static posenc_status cl_status = POSENC_ERR_UNAVAILABLE;
static char cl_why[PE_ERR_MAX];

static void cl_load_once(void)
{
    void *lib = pe_dl_open("the OpenCL ICD loader (libOpenCL)", PE_CL_LIBRARY_ENV, cl_names,
                           PE_ARRAY_SIZE(cl_names), cl_why, sizeof(cl_why));
    if (!lib)
        return;
    /* Filled aside and published whole: a library without one of the functions leaves
     * pe_cl_fn all NULL (nothing calls it then: the backend is unavailable). */
    struct pe_cl_funcs f;
#define PE_CL_RESOLVE(name)                                                                 \
    f.name = (__typeof__(f.name))pe_dl_sym(lib, #name);                                     \
    if (!f.name) {                                                                          \
        snprintf(cl_why, sizeof(cl_why),                                                    \
                 "the OpenCL ICD loader (libOpenCL) that was found lacks " #name            \
                 " (posenc needs the OpenCL 1.2 API); set " PE_CL_LIBRARY_ENV               \
                 " to another one");                                                        \
        return;                                                                             \
    }
    PE_CL_COMMANDS(PE_CL_RESOLVE)
#undef PE_CL_RESOLVE
    pe_cl_fn = f;
    cl_status = POSENC_OK;
}

posenc_status pe_cl_load(char *why, size_t why_size)
{
    pthread_once(&cl_once, cl_load_once);
    if (cl_status != POSENC_OK && why)
        pe_strlcpy(why, cl_why, why_size);
    return cl_status;
}

#if POSENC_HAVE_CLBLAST
struct pe_clblast_funcs pe_clblast_fn;

static const char *const clblast_names[] = {"libclblast.so.1", "libclblast.so"};

static pthread_once_t clblast_once = PTHREAD_ONCE_INIT;
static bool clblast_ok;
static char clblast_why[PE_ERR_MAX];

static void clblast_load_once(void)
{
    /* CLBlast calls OpenCL through its own link to libOpenCL.so.1; posenc asks for it only
     * after its own ICD loader loaded, and the ICD loaders dispatch by object, so the two
     * agree even when POSENC_OPENCL_LIBRARY named another file. */
    if (pe_cl_load(NULL, 0) != POSENC_OK) {
        snprintf(clblast_why, sizeof(clblast_why),
                 "CLBlast not loaded: the OpenCL ICD loader is not loaded");
        return;
    }
    void *lib = pe_dl_open("CLBlast (libclblast)", PE_CLBLAST_LIBRARY_ENV, clblast_names,
                           PE_ARRAY_SIZE(clblast_names), clblast_why, sizeof(clblast_why));
    if (!lib)
        return;
    struct pe_clblast_funcs f;
#define PE_CLBLAST_RESOLVE(name)                                                            \
    f.name = (__typeof__(f.name))pe_dl_sym(lib, #name);                                     \
    if (!f.name) {                                                                          \
        snprintf(clblast_why, sizeof(clblast_why),                                          \
                 "CLBlast (libclblast) was found but lacks " #name                          \
                 " (posenc calls its batched SGEMMs); set " PE_CLBLAST_LIBRARY_ENV        \
                 " to another one");                                                        \
        return;                                                                             \
    }
    PE_CLBLAST_COMMANDS(PE_CLBLAST_RESOLVE)
#undef PE_CLBLAST_RESOLVE
    pe_clblast_fn = f;
    clblast_ok = true;
}
#endif

bool pe_clblast_load(const char **why)
{
#if POSENC_HAVE_CLBLAST
    pthread_once(&clblast_once, clblast_load_once);
    if (!clblast_ok && why)
        *why = clblast_why;
    return clblast_ok;
#else
    if (why)
        *why = "posenc was built without CLBlast support (clblast_c.h was missing at "
               "configure time)";
    return false;
#endif
}
