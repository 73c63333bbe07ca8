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
