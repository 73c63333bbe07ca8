// SPDX-License-Identifier: MIT
// cxx.cc - benchmark workload: C++ container churn. Rounds of: fill a std::map<std::string,
// std::vector<int>> (heap keys longer than the SSO buffer, map nodes, vector growth), look
// keys up, erase half, rebuild a std::vector<std::string> copy, clear. ~3.7M calls to
// operator new with the defaults. Usage: cxx [ROUNDS] (default 64).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

static std::string make_key(unsigned i, unsigned round) {
    // > 15 characters, so every key lives on the heap.
    return "key-" + std::to_string(i * 2654435761u) + "-round-" + std::to_string(round);
}

__attribute__((noinline)) static unsigned long one_round(unsigned round, unsigned n) {
    std::map<std::string, std::vector<int>> m;
    for (unsigned i = 0; i < n; i++) {
        std::vector<int>& v = m[make_key(i, round)];
        for (unsigned j = 0; j < (i % 7) + 1; j++) // 1..7 push_backs: 1..4 reallocations
            v.push_back((int)(i + j));
    }
    unsigned long sum = 0;
    for (unsigned i = 0; i < n; i += 3) {
        auto it = m.find(make_key(i, round));
        if (it != m.end())
            sum += it->second.size();
    }
    for (auto it = m.begin(); it != m.end();) {
        if (it->second.size() % 2)
            it = m.erase(it);
        else
            ++it;
    }
    std::vector<std::string> keys;
    for (auto& kv : m)
        keys.push_back(kv.first);
    for (auto& k : keys)
        sum += k.size();
    return sum + m.size();
}

int main(int argc, char** argv) {
    unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 64;
    unsigned long sum = 0;
    for (unsigned r = 0; r < rounds; r++)
        sum += one_round(r, 10000);
    std::printf("cxx: %u rounds, checksum %lu\n", rounds, sum);
    return 0;
}
