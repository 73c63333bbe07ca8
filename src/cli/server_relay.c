// SPDX-License-Identifier: MIT
// server_relay.c - the collector's relay between a shell and a target (heaplens shell ADDR PID).
// A target that sends its trace here also opens a control link, greeted "HEAPLENS-CONTROL PID";
// a shell greets "HEAPLENS-SHELL PID" (or "HEAPLENS-SHELL" alone: which targets are here). The
// collector pairs the two and passes the shell's command lines to the target and its answers
// back; it answers one line itself, "HEAPLENS-TRACE": the trace of that target it is writing,
// which the shell reads on this host, where the binaries and their symbols are.
//
// Who may drive a target: over the UNIX listener, a shell of this user (or root); over TCP, only
// when the collector asks for a token (every connection has sent it before getting here), since
// a loopback port is open to every user of the host.
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server.h"

#define CONTROL_GREETING "HEAPLENS-CONTROL "
#define SHELL_GREETING "HEAPLENS-SHELL"
#define TRACE_QUESTION "HEAPLENS-TRACE"

static void say(conn_t* c, const char* text) {
    size_t len = strlen(text);
    // Lines are short and a shell reads each answer: a full buffer means it is not reading.
    if (send(c->fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)len)
        shutdown(c->fd, SHUT_RDWR);
}

static long parse_pid(const char* s) {
    char* end;
    long pid = strtol(s, &end, 10);
    return *s && !*end && pid > 0 && pid <= INT_MAX ? pid : -1;
}

// The trace of pid this collector is writing now: the latest of its streams (a `start` after
// `stop` opens a new one). Its process is read from its INFO record once there.
static conn_t* current_trace(server_t* s, long pid) {
    conn_t* best = NULL;
    for (int i = 0; i < SERVER_MAX_CONNS; i++) {
        conn_t* c = &s->conns[i];
        if (c->fd < 0 || c->kind != CONN_TRACE || c->out < 0)
            continue;
        if (!c->pid) {
            char path[PATH_MAX];
            trace_process_t proc = {0};
            snprintf(path, sizeof path, "%s/%s", s->dir, c->part);
            if (server_read_process(path, &proc) == 0)
                c->pid = (long)proc.pid;
        }
        if (c->pid == pid && (!best || c->serial > best->serial))
            best = c;
    }
    return best;
}

static void answer_trace(server_t* s, conn_t* shell) {
    char out[PATH_MAX + 160], dir[PATH_MAX];
    conn_t* t = shell->mate ? current_trace(s, shell->mate->pid) : NULL;
    if (!t)
        snprintf(out, sizeof out, "error no trace of that process here yet\n");
    else if (!realpath(s->dir, dir))
        snprintf(out, sizeof out, "error %s: %s\n", s->dir, strerror(errno));
    else
        snprintf(out, sizeof out, "ok trace=%s/%s\n", dir, t->part);
    say(shell, out);
}

static int may_drive(const server_t* s, const conn_t* c) {
    if (!s->unix_path[0]) // the listener is TCP's
        return s->token_len > 0;
    struct ucred cred;
    socklen_t len = sizeof cred;
    return getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
           (cred.uid == geteuid() || cred.uid == 0);
}

// "HEAPLENS-SHELL [PID]": the list of targets, or the pairing with PID's control link.
static int greet_shell(server_t* s, conn_t* c, const char* arg) {
    char out[512];
    if (!may_drive(s, c)) {
        say(c, "error a shell reaches targets over TCP only when the collector has a --token\n");
        return -1;
    }
    if (!*arg) {
        size_t at = (size_t)snprintf(out, sizeof out, "ok targets=");
        for (int i = 0; i < SERVER_MAX_CONNS && at < sizeof out - 16; i++)
            if (s->conns[i].fd >= 0 && s->conns[i].kind == CONN_CONTROL)
                at += (size_t)snprintf(out + at, sizeof out - at, "%s%ld",
                                       at > strlen("ok targets=") ? "," : "", s->conns[i].pid);
        snprintf(out + at, sizeof out - at, "\n");
        say(c, out);
        return -1; // a listing ends the connection
    }
    long pid = parse_pid(arg);
    conn_t* target = NULL;
    for (int i = 0; i < SERVER_MAX_CONNS && !target; i++)
        if (s->conns[i].fd >= 0 && s->conns[i].kind == CONN_CONTROL && s->conns[i].pid == pid)
            target = &s->conns[i];
    if (!target) {
        snprintf(out, sizeof out, "error no process %s sends its trace to this collector\n", arg);
        say(c, out);
        return -1;
    }
    if (target->mate) {
        snprintf(out, sizeof out, "error process %ld already has a shell through here\n", pid);
        say(c, out);
        return -1;
    }
    c->kind = CONN_SHELL;
    c->mate = target;
    target->mate = c;
    snprintf(out, sizeof out, "ok pid=%ld\n", pid);
    say(c, out);
    return 0;
}

// The shell's command lines: each to the target, but the collector's own question and quit.
static int take_shell_lines(server_t* s, conn_t* c, const char* buf, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != '\n') {
            if (c->cmd_len + 1 >= sizeof c->cmd) {
                say(c, "error command too long\n");
                return -1;
            }
            c->cmd[c->cmd_len++] = buf[i];
            continue;
        }
        c->cmd[c->cmd_len] = 0;
        c->cmd_len = 0;
        if (!strcmp(c->cmd, TRACE_QUESTION)) {
            answer_trace(s, c);
        } else if (!strcmp(c->cmd, "quit")) {
            return -1;
        } else if (!c->mate) {
            say(c, "error the process has gone\n");
            return -1;
        } else {
            size_t len = strlen(c->cmd);
            c->cmd[len] = '\n';
            if (send(c->mate->fd, c->cmd, len + 1, MSG_NOSIGNAL) != (ssize_t)(len + 1)) {
                say(c, "error the process has gone\n");
                return -1;
            }
        }
    }
    return 0;
}

int relay_take(server_t* s, conn_t* c, const char* buf, size_t n, size_t* used) {
    *used = n;
    if (c->kind == CONN_SHELL)
        return take_shell_lines(s, c, buf, n);
    if (c->kind == CONN_CONTROL) { // the target's answers, to its shell (none: dropped)
        if (c->mate && send(c->mate->fd, buf, n, MSG_NOSIGNAL) != (ssize_t)n)
            shutdown(c->mate->fd, SHUT_RDWR);
        return 0;
    }
    // CONN_NEW: a trace begins "HL", a greeting "HE" (a trace's magic is HL_TRACE_MAGIC).
    size_t i = 0;
    while (i < n) {
        if (c->head_len == 2 && memcmp(c->head, "HE", 2) != 0)
            break;
        if (c->head_len == 1 && c->head[0] != 'H')
            break;
        char ch = buf[i++];
        if (ch == '\n' && c->head_len >= 2) {
            c->head[c->head_len] = 0;
            c->head_len = 0;
            size_t cl = strlen(CONTROL_GREETING), sl = strlen(SHELL_GREETING);
            if (!strncmp(c->head, CONTROL_GREETING, cl)) {
                c->pid = parse_pid(c->head + cl);
                c->kind = CONN_CONTROL;
                if (c->pid < 0)
                    return -1;
                return relay_take(s, c, buf + i, n - i, used);
            }
            if (!strncmp(c->head, SHELL_GREETING, sl) && (!c->head[sl] || c->head[sl] == ' ')) {
                if (greet_shell(s, c, c->head + sl + (c->head[sl] == ' ')) != 0)
                    return -1;
                return take_shell_lines(s, c, buf + i, n - i);
            }
            return -1;
        }
        if (c->head_len + 1 >= sizeof c->head)
            return -1; // no greeting is that long
        c->head[c->head_len++] = ch;
    }
    size_t known = c->head_len < 2 ? c->head_len : 2;
    if (c->head_len && memcmp(c->head, "HE", known) != 0) {
        c->kind = CONN_TRACE; // head's bytes, then buf's from used on, are the trace's
        *used = i;
        return 1;
    }
    return 0;
}

void relay_closing(conn_t* c) {
    conn_t* mate = c->mate;
    c->mate = NULL;
    if (!mate)
        return;
    mate->mate = NULL;
    if (c->kind == CONN_CONTROL)
        shutdown(mate->fd, SHUT_RDWR); // the target is gone: so is its shell's session
}
