// cxx_containers: a std::string / std::vector / std::map workload; everything is released.
//   strings_workload: std::string(100, 'x') then += 100 more: 2 allocations (101 B, 201 B)
//   vector_workload:  100 push_backs into std::vector<int>: capacity 1,2,4,...,128: 8 allocations
//   map_workload:     50 inserts into std::map<int, int>: 50 nodes
// calls: new 60, delete 60 (libstdc++'s own start-up allocation uses malloc, not new).
#include <map>
#include <string>
#include <vector>

#include "common.h"

NOINLINE static std::size_t strings_workload() {
    std::string s(100, 'x');
    s += std::string(0, 'y'); // empty: no allocation
    s.append(100, 'y');
    return s.size();
}

NOINLINE static long vector_workload() {
    std::vector<int> v;
    for (int i = 0; i < 100; i++)
        v.push_back(i);
    long sum = 0;
    for (int x : v)
        sum += x;
    return sum;
}

NOINLINE static long map_workload() {
    std::map<int, int> m;
    for (int i = 0; i < 50; i++)
        m[i * 7 % 50] = i;
    long sum = 0;
    for (const auto& kv : m)
        sum += kv.first;
    return sum;
}

int main() {
    bool ok = strings_workload() == 200 && vector_workload() == 4950 && map_workload() == 1225;
    scrub_stack();
    say(ok ? "cxx_containers done\n" : "cxx_containers: wrong result\n");
    return ok ? 0 : 1;
}
