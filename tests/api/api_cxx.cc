// SPDX-License-Identifier: MIT
// api_cxx.cc - every function of the heaplens API from C++ (tests/integration/api.sh): the
// header compiles as C++, and a static object's constructor and destructor use it.
#include <heaplens.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

static void say(const char* what, long rc) {
    std::printf("%s %ld\n", what, rc);
}

struct Early {
    int traced;
    heaplens_mark_t mark;
    std::vector<int>* made;
    Early()
        : traced(heaplens_is_traced()), mark(heaplens_mark()), made(new std::vector<int>(100)) {}
    ~Early() {
        struct heaplens_stats s;
        int rc = heaplens_stats(&s);
        char line[64];
        int n = std::snprintf(line, sizeof line, "static dtor stats %d\n", rc);
        if (write(1, line, (size_t)n) < 0)
            return;
        delete made;
    }
};
static Early early;

static int watched;
extern "C" void on_release(void* ptr, int event, const void* where, void* arg) {
    (void)ptr, (void)where, (void)arg;
    watched += event == HEAPLENS_FREED;
}
static int crossed;
extern "C" void on_threshold(int which, size_t bytes, void* arg) {
    (void)arg;
    crossed += which == HEAPLENS_BLOCK && bytes == 1 << 20;
}

int main() {
    say("static ctor is_traced", early.traced);
    say("static ctor mark>0", early.mark > 0 ? 0 : -1);
    say("is_traced", heaplens_is_traced());
    say("pause", heaplens_pause());
    auto hidden = std::make_unique<std::string>(100, 'x');
    say("resume", heaplens_resume());
    heaplens_mark_t m = heaplens_mark();
    auto later = std::make_unique<std::vector<double>>(1000);
    int devnull = open("/dev/null", O_WRONLY);
    say("report_since", heaplens_report_since(m, devnull, HEAPLENS_JSON));
    say("report", heaplens_report(devnull, HEAPLENS_TEXT));
    heaplens_leak_counts lc;
    say("leak_check", heaplens_leak_check(&lc));
    say("leak_check_new", heaplens_leak_check_new(&lc));
    say("ignore", heaplens_ignore(later.get()));
    int* w = new int[64];
    say("watch", heaplens_watch(w, on_release, nullptr));
    delete[] w;
    say("tag", heaplens_tag(5, 6));
    say("untag", heaplens_untag());
    say("set_thresholds", heaplens_set_thresholds(1 << 20, 0, 0, on_threshold, nullptr));
    char* big = new char[1 << 20];
    big[0] = 1;
    delete[] big;
    struct heaplens_stats s;
    say("stats", heaplens_stats(&s));
    std::printf("callbacks watch %d threshold %d\n", watched, crossed);
    std::printf("work %zu\n", hidden->size() + later->size());
    return 0;
}
