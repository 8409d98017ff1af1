/* Builds Debian's volk (libvulkan-volk-dev ships its source) into the library, so
 * Vulkan is loaded at run time and the binaries never link libvulkan. */
#define VK_NO_PROTOTYPES
#include <volk.c>
