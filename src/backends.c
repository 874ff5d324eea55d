/* backends.c - the static registry of compiled-in backends. Adding a backend is one
 * folder under src/ plus one line here. */
#include "backend.h"
#include "posenc_config.h"

#include <stdlib.h>
#include <string.h>

static const struct pe_backend_vtable *const pe_backends[] = {
#if POSENC_HAVE_VULKAN
    &pe_vulkan_vtable,
#endif
#if POSENC_HAVE_OPENCL
    &pe_opencl_vtable,
#endif
    &pe_cpu_vtable,
};

const struct pe_backend_vtable *pe_backend_lookup(posenc_backend_kind kind)
{
    for (size_t i = 0; i < PE_ARRAY_SIZE(pe_backends); i++)
        if (pe_backends[i]->kind == kind)
            return pe_backends[i];
    return NULL;
}

bool pe_cpu_shaped(const char *name, bool device_is_cpu)
{
    const char *e = getenv(name);
    if (e && strcmp(e, "cpu") == 0)
        return true;
    if (e && strcmp(e, "gpu") == 0)
        return false;
    return device_is_cpu;
}
