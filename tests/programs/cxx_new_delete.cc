// cxx_new_delete: every form of operator new and delete, with known counts; one leak per form.
//   plain:    5 x new Obj (40 B) / delete;                    cxx_leak_plain_new:  new Obj, lost (40 B)
//   array:    3 x new int[25] (100 B) / delete[];             cxx_leak_new_array:  new int[26], lost (104 B)
//   nothrow:  new (nothrow) Obj / delete; a huge nothrow new[] returns nullptr (no allocation)
//   sized:    ::operator new(48) / ::operator delete(p, 48)
//   aligned:  new Aligned64 (192 B, alignas(64)) / delete;    cxx_leak_aligned:    new Aligned64, lost (192 B)
// calls: new 10, new[] 4, delete 8, delete[] 3. Lost: 3 blocks, 336 B.
#include <cstdint>
#include <cstdlib>
#include <new>

#include "common.h"

struct Obj {
    long a, b, c, d, e; // 40 bytes
};

struct alignas(64) Aligned64 {
    char bytes[192];
};

static int bad;

NOINLINE static void cxx_plain_pairs() {
    for (int i = 0; i < 5; i++) {
        Obj* o = new Obj();
        o->a = i;
        keep(o);
        delete o;
    }
}
NOINLINE static void cxx_leak_plain_new() {
    Obj* o = new Obj();
    o->e = 9;
    keep(o);
}
NOINLINE static void cxx_array_pairs() {
    for (int i = 0; i < 3; i++) {
        int* a = new int[25];
        a[24] = i;
        keep(a);
        delete[] a;
    }
}
NOINLINE static void cxx_leak_new_array() {
    int* a = new int[26];
    a[25] = 1;
    keep(a);
}
NOINLINE static void cxx_nothrow_pair() {
    Obj* o = new (std::nothrow) Obj();
    if (!o) {
        bad = 1;
        return;
    }
    keep(o);
    delete o;
}
NOINLINE static void cxx_nothrow_huge() {
    volatile std::size_t huge = SIZE_MAX / 4; // too big for any allocator, not a constant
    char* p = new (std::nothrow) char[huge];
    if (p) {
        bad = 1;
        delete[] p;
    }
}
NOINLINE static void cxx_sized_pair() {
    void* p = ::operator new(48);
    keep(p);
    ::operator delete(p, 48);
}
NOINLINE static void cxx_aligned_pair() {
    Aligned64* a = new Aligned64();
    if (reinterpret_cast<std::uintptr_t>(a) % 64 != 0)
        bad = 1;
    keep(a);
    delete a;
}
NOINLINE static void cxx_leak_aligned() {
    Aligned64* a = new Aligned64();
    if (reinterpret_cast<std::uintptr_t>(a) % 64 != 0)
        bad = 1;
    a->bytes[191] = 1;
    keep(a);
}

int main() {
    cxx_plain_pairs();
    cxx_leak_plain_new();
    cxx_array_pairs();
    cxx_leak_new_array();
    cxx_nothrow_pair();
    cxx_nothrow_huge();
    cxx_sized_pair();
    cxx_aligned_pair();
    cxx_leak_aligned();
    scrub_stack();
    say(bad ? "cxx_new_delete: wrong result\n" : "cxx_new_delete done\n");
    return bad;
}
