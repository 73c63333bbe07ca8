// SPDX-License-Identifier: MIT
// api_example.cc - thresholds and a watch from C++ (include/heaplens.h). Built by `make demo`.
#include <heaplens.h>

#include <cstdio>
#include <memory>
#include <vector>

extern "C" void on_threshold(int which, size_t bytes, void*) {
    std::printf("heap: %s of %zu bytes\n",
                which == HEAPLENS_BLOCK ? "one allocation" : "growth", bytes);
}

extern "C" void on_release(void* ptr, int event, const void* where, void*) {
    std::printf("the watched block %p was %s at %p\n", ptr,
                event == HEAPLENS_FREED ? "released" : "resized", where);
}

int main() {
    std::printf("traced %d\n", heaplens_is_traced());
    // Tell me about any single allocation of 1 MiB or more, and 8 MiB of growth within 1 s.
    heaplens_set_thresholds(1 << 20, 8 << 20, 1000000000ull, on_threshold, nullptr);
    std::vector<std::unique_ptr<std::vector<char>>> held;
    for (int i = 0; i < 40; i++)
        held.push_back(std::make_unique<std::vector<char>>(256 * 1024));
    auto big = std::make_unique<std::vector<char>>(2 << 20);
    heaplens_watch(big->data(), on_release, nullptr);
    big->resize(4 << 20); // the vector moves to a new block: the old one is released
    std::printf("result %zu\n", held.size());
    return 0;
}
