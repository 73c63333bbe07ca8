// security_late_exec GO_FILE: a daemon's way out. Prints the session index heaplens gave it
// ("session=...") and its child's pid ("child=..."), and returns at once; the child outlives it,
// and so the heaplens run that started it, waits until GO_FILE exists (the test makes it once
// heaplens has ended; at most 20 s), then execs /bin/true: the new image's agent starts after
// the run is over and must not bring the run's files back.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

// Long enough for any test to end heaplens and say go; short enough that a broken test ends.
#define WAIT_STEPS 2000
#define WAIT_STEP_US 10000

// The session index in HEAPLENS_OPTIONS (its last setting, "...:session=PATH"). Under
// --no-follow the agent has taken the variable out of environ: then it is read from the
// environment the process started with, /proc/self/environ.
static const char* session_index(void) {
    static char env[65536];
    const char* options = getenv("HEAPLENS_OPTIONS");
    if (!options) {
        int fd = open("/proc/self/environ", O_RDONLY);
        ssize_t n = fd >= 0 ? read(fd, env, sizeof env - 1) : -1;
        if (fd >= 0)
            close(fd);
        for (ssize_t i = 0; i < n && !options; i += (ssize_t)strlen(env + i) + 1)
            if (!strncmp(env + i, "HEAPLENS_OPTIONS=", 17))
                options = env + i + 17;
    }
    const char* s = options ? strstr(options, ":session=") : NULL;
    return s ? s + 9 : NULL;
}

int main(int argc, char** argv) {
    if (argc != 2)
        return 2;
    const char* session = session_index();
    say("session=");
    say(session ? session : "");
    say("\n");
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        for (int i = 0; i < WAIT_STEPS && access(argv[1], F_OK) != 0; i++)
            usleep(WAIT_STEP_US);
        execl("/bin/true", "true", (char*)NULL);
        _exit(127);
    }
    say_num("child=", child);
    return 0;
}
