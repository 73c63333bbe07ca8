// plugin.c: built into libplugin.so; dlopen_plugin loads it, calls plugin_leak_buffer (777 B,
// lost) and plugin_roundtrip (allocates and frees 5 x 50 B), then dlclose()s it.
#include <stdlib.h>

__attribute__((noinline)) void plugin_leak_buffer(void) {
    char* volatile p = malloc(777);
    p[0] = 1;
    p[776] = 2;
}

__attribute__((noinline)) int plugin_roundtrip(void) {
    int sum = 0;
    for (int i = 0; i < 5; i++) {
        char* volatile p = malloc(50);
        p[0] = (char)i;
        sum += p[0];
        free(p);
    }
    return sum;
}

// The Makefile builds every tests/programs/*.c into an executable too (build/programs/plugin),
// so this file needs a main. As a program it runs the same code linked in: 777 B lost.
int main(void) {
    plugin_leak_buffer();
    return plugin_roundtrip() == 10 ? 0 : 1;
}

// check_heap sites_dlopen: a 48-byte block made here and written 1 byte past its end
// (--guard-sites=plugin_site_overflow puts it on a guard page in this dlopen'd object).
__attribute__((noinline)) int plugin_site_overflow(void) {
    char* volatile p = malloc(48);
    p[0] = 1;
    p[48] = 2;
    int v = p[0];
    free(p);
    return v;
}
