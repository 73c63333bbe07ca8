// alloc_mmap: mmap, munmap and mremap with known counts and lengths.
//   mmap_and_unmap      mmap 3 pages, munmap them
//   mremap_grow         mmap 2 pages, mremap to 4 pages (MAYMOVE), munmap 4 pages
//   leak_via_mmap       mmap 1 page, never unmapped
//   mmap_file           mmap 1 page of /proc/self/exe read-only, munmap it
// calls (mremap recorded as a munmap of the old range and an mmap of the new one):
//   mmap 5 (4 + 1 for mremap), munmap 4 (3 + 1 for mremap). No heap block at all.
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/mman.h>

#include "common.h"

#define PAGE 4096

static int bad;

NOINLINE static void mmap_and_unmap(void) {
    char* p = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        bad = 1;
        return;
    }
    p[0] = 1;
    p[3 * PAGE - 1] = 2;
    if (munmap(p, 3 * PAGE) != 0)
        bad = 1;
}

NOINLINE static void mremap_grow(void) {
    char* p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        bad = 1;
        return;
    }
    p[0] = 42;
    char* q = mremap(p, 2 * PAGE, 4 * PAGE, MREMAP_MAYMOVE);
    if (q == MAP_FAILED || q[0] != 42) {
        bad = 1;
        return;
    }
    q[4 * PAGE - 1] = 1;
    if (munmap(q, 4 * PAGE) != 0)
        bad = 1;
}

NOINLINE static void leak_via_mmap(void) {
    char* p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        bad = 1;
    else
        p[0] = 7;
}

NOINLINE static void mmap_file(void) {
    int fd = open("/proc/self/exe", O_RDONLY);
    if (fd < 0) {
        bad = 1;
        return;
    }
    unsigned char* p = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED || p[0] != 0x7f || p[1] != 'E') {
        bad = 1;
        return;
    }
    munmap(p, PAGE);
}

int main(void) {
    mmap_and_unmap();
    mremap_grow();
    leak_via_mmap();
    mmap_file();
    say(bad ? "alloc_mmap failed\n" : "alloc_mmap done\n");
    return bad;
}
