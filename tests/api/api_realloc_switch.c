// api_realloc_switch DIR: a realloc whose watch callback waits, while the agent switches to a
// new trace (its collector went away, remote_sink.sh): the block being resized is out of the
// live table and its FREE not yet made when the world is stopped for the new trace's snapshot,
// which must still say it. The callback first resizes another block (a realloc inside a
// realloc's callback), makes DIR/in_callback, then waits for DIR/go (30 s at most). At the end,
// in use: the resized block (200 bytes), the other one (64) and one of 50 bytes.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "heaplens.h"

#define WAIT_MS 30000

static char* other;

static int dir_has(const char* dir, const char* name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static void on_resize(void* ptr, int event, const void* where, void* arg) {
    (void)ptr, (void)where;
    const char* dir = arg;
    if (event != HEAPLENS_RESIZED)
        return;
    char* moved = realloc(other, 64);
    if (moved)
        other = moved;
    char path[4096];
    snprintf(path, sizeof path, "%s/in_callback", dir);
    FILE* f = fopen(path, "w");
    if (f)
        fclose(f);
    struct timespec ms = {0, 1000000L};
    for (int waited = 0; waited < WAIT_MS && !dir_has(dir, "go"); waited++)
        nanosleep(&ms, NULL);
}

int main(int argc, char** argv) {
    if (argc < 2)
        return 2;
    char* block = malloc(100);
    memset(block, 1, 100);
    other = malloc(32);
    memset(other, 3, 32);
    if (heaplens_is_traced() && heaplens_watch(block, on_resize, argv[1]) != 0)
        return 3;
    char* resized = realloc(block, 200);
    if (!resized)
        return 4;
    char* kept = malloc(50);
    memset(kept, 2, 50);
    printf("resized %d, other %d\n", resized[99], other[31]);
    fflush(stdout);
    return 0; // resized and kept stay in use
}
