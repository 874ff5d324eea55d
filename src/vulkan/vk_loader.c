/* vk_loader.c - see vk_loader.h. */
#define PE_VK_LOADER_NO_MACROS
#include "vk_loader.h"

#include "dynload.h"
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct pe_vk_global_funcs pe_vk_global;

/* The Khronos loader's soname on Linux, then the unversioned name (Android's system
 * loader, and development symlinks). */
static const char *const vk_names[] = {"libvulkan.so.1", "libvulkan.so"};

static pthread_once_t vk_once = PTHREAD_ONCE_INIT;
static posenc_status vk_status = POSENC_ERR_UNAVAILABLE;
static char vk_why[PE_ERR_MAX];

static void vk_load_once(void)
{
    void *lib = pe_dl_open("the Vulkan loader (libvulkan)", PE_VK_LIBRARY_ENV, vk_names,
                           PE_ARRAY_SIZE(vk_names), vk_why, sizeof(vk_why));
    if (!lib)
        return;
    struct pe_vk_global_funcs g;
    memset(&g, 0, sizeof(g));
    g.vkGetInstanceProcAddr = (PFN_vkGetInstanceProcAddr)pe_dl_sym(lib, "vkGetInstanceProcAddr");
    if (!g.vkGetInstanceProcAddr) {
        snprintf(vk_why, sizeof(vk_why),
                 "the Vulkan loader (libvulkan) that was found has no vkGetInstanceProcAddr; "
                 "set " PE_VK_LIBRARY_ENV " to another one");
        return;
    }
#define PE_VK_RESOLVE(name) g.name = (PFN_##name)g.vkGetInstanceProcAddr(VK_NULL_HANDLE, #name);
    PE_VK_GLOBAL_COMMANDS(PE_VK_RESOLVE)
#undef PE_VK_RESOLVE
    /* vkEnumerateInstanceVersion may be missing (a 1.0 loader): posenc checks for it. */
    const char *missing = NULL;
    if (!g.vkCreateInstance)
        missing = "vkCreateInstance";
    else if (!g.vkEnumerateInstanceExtensionProperties)
        missing = "vkEnumerateInstanceExtensionProperties";
    else if (!g.vkEnumerateInstanceLayerProperties)
        missing = "vkEnumerateInstanceLayerProperties";
    if (missing) {
        snprintf(vk_why, sizeof(vk_why),
                 "the Vulkan loader (libvulkan) that was found returns no %s; set "
                 PE_VK_LIBRARY_ENV " to another one", missing);
        return;
    }
    pe_vk_global = g;
    vk_status = POSENC_OK;
}

posenc_status pe_vk_load(char *why, size_t why_size)
{
    pthread_once(&vk_once, vk_load_once);
    if (vk_status != POSENC_OK && why)
        pe_strlcpy(why, vk_why, why_size);
    return vk_status;
}

const char *pe_vk_load_instance(struct pe_vk_funcs *f, PFN_vkGetInstanceProcAddr gipa,
                                VkInstance instance)
{
    memset(f, 0, sizeof(*f));
    f->get_instance_proc_addr = gipa;
    const char *missing = NULL;
#define PE_VK_RESOLVE(name)                                                                 \
    f->name = (PFN_##name)gipa(instance, #name);                                            \
    if (!f->name && !missing)                                                               \
        missing = #name;
    PE_VK_INSTANCE_COMMANDS(PE_VK_RESOLVE)
#undef PE_VK_RESOLVE
    return missing;
}

const char *pe_vk_load_device(struct pe_vk_funcs *f, VkDevice device)
{
    const char *missing = NULL;
#define PE_VK_RESOLVE(name)                                                                 \
    f->name = (PFN_##name)f->vkGetDeviceProcAddr(device, #name);                            \
    if (!f->name && !missing)                                                               \
        missing = #name;
    PE_VK_DEVICE_COMMANDS(PE_VK_RESOLVE)
#undef PE_VK_RESOLVE
    return missing;
}
