// cxx_exception: throwing_worker allocates a std::vector<int>(1000) and a unique_ptr<Payload>
// (both released by unwinding) and a raw new char[77] (lost while unwinding), then throws a
// std::runtime_error with a long message. main catches it; 3 rounds.
// Per round: new 3 (vector, Payload, the message's string), new[] 1, delete 3, delete[] 0; the
// exception object itself is malloc'ed and freed by the C++ runtime.
// Lost: 3 blocks of 77 B = 231 B, all in throwing_worker.
#include <memory>
#include <stdexcept>
#include <vector>

#include "common.h"

struct Payload {
    long values[8];
};

NOINLINE static void throwing_worker(int round) {
    std::vector<int> v(1000, round);
    std::unique_ptr<Payload> owned(new Payload());
    owned->values[0] = v[999];
    char* raw = new char[77];
    raw[76] = static_cast<char>(round);
    keep(raw);
    if (owned->values[0] >= 0)
        throw std::runtime_error("throwing_worker: a message long enough to need the heap");
    delete[] raw;
}

NOINLINE static int catch_rounds() {
    int caught = 0;
    for (int round = 0; round < 3; round++) {
        try {
            throwing_worker(round);
        } catch (const std::runtime_error& e) {
            caught += e.what()[0] == 't';
        }
    }
    return caught;
}

int main() {
    int caught = catch_rounds();
    scrub_stack();
    say(caught == 3 ? "cxx_exception done\n" : "cxx_exception: wrong count\n");
    return caught == 3 ? 0 : 1;
}
