// dlopen_plugin: dlopen()s libplugin.so from this executable's directory, calls
// plugin_leak_buffer (777 B lost, in plugin.c) and plugin_roundtrip, then dlclose()s it. The
// leak must still be symbolized after the object is gone.
#include <dlfcn.h>
#include <stdlib.h>

#include "common.h"

NOINLINE static int use_plugin(const char* path) {
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return 1;
    void (*leak)(void) = (void (*)(void))dlsym(h, "plugin_leak_buffer");
    int (*roundtrip)(void) = (int (*)(void))dlsym(h, "plugin_roundtrip");
    if (!leak || !roundtrip)
        return 2;
    leak();
    int sum = roundtrip();
    if (dlclose(h) != 0)
        return 3;
    return sum == 10 ? 0 : 4;
}

int main(void) {
    static char path[4096];
    if (exe_dir(path, sizeof path - 32) != 0)
        return 5;
    strcat(path, "/libplugin.so");
    int rc = use_plugin(path);
    scrub_stack();
    say(rc == 0 ? "dlopen_plugin done\n" : "dlopen_plugin failed\n");
    return rc;
}
