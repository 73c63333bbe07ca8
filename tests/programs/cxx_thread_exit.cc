// SPDX-License-Identifier: MIT
// cxx_thread_exit: a C++ program that exits while a thread of its own still waits (a pool's
// worker never joined). libstdc++'s exception pool (allocated with malloc at start-up) stays:
// __gnu_cxx::__freeres would leave the pool's free list pointing into the block it frees, for
// the other thread to use (memcheck stops the threads first, and reports the pool freed). main
// throws and catches one exception (the runtime mallocs and frees its object) and loses one
// 56-byte block (lose_block, new[]): malloc 2 (the pool, the exception), free 1; 56 bytes
// definitely lost, the waiting thread's TLS vector (calloc) possibly lost, the pool still
// reachable.
#include <pthread.h>
#include <stdexcept>

#include "common.h"

static void* wait_forever(void*) {
    for (;;)
        pause();
    return nullptr;
}

NOINLINE static void lose_block() {
    char* p = new char[56];
    p[55] = 1;
    keep(p);
}

NOINLINE static int throw_once() {
    try {
        throw std::runtime_error("short");
    } catch (const std::exception& e) {
        return e.what()[0] == 's' ? 0 : 1;
    }
}

int main() {
    pthread_t th;
    if (pthread_create(&th, nullptr, wait_forever, nullptr) != 0)
        return 1;
    lose_block();
    scrub_stack();
    say("thrown and caught\n");
    return throw_once();
}
