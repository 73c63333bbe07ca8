// cxx_heuristics: blocks that only interior pointers reach, the way C++ makes them: a pointer
// to the second base of a multiply-inherited object, new[] of a type with a destructor (the
// pointer skips the element count), and a std::string. memcheck's default heuristics keep all
// three still reachable: 40 + 40 + 32 + 101 bytes from make_objects.
#include <string.h>

#include <string>

#include "common.h"

struct A {
    virtual ~A() {}
    long a = 1;
};
struct B {
    virtual ~B() {}
    long b = 2;
};
struct C : A, B {
    long c = 3;
};
struct D {
    ~D() {}
    long d;
};

B* g_second_base;
D* g_array;
std::string* g_string;

NOINLINE static void make_objects() {
    g_second_base = new C();
    g_array = new D[4];
    g_string = new std::string(100, 'x');
}

int main() {
    make_objects();
    scrub_stack();
    return 0;
}
