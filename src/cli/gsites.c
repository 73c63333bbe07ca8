// SPDX-License-Identifier: MIT
// gsites.c - --guard-sites=REGEX, host side. The agent runs no regex and reads no symbol table
// (it must not allocate, and the hot path must stay short), so the REGEX is matched here,
// before the program starts, against the function symbols (.symtab, else .dynsym; C++ names
// demangled as well as mangled) of: the program, the libraries the loader will map for it (its
// own `--list`, which reads the program's headers and runs none of it), and the shared objects
// in the program's directory, in LD_LIBRARY_PATH and in its RUNPATH, which it may dlopen later. Each module
// whose functions match becomes one entry of guard_sites= (src/common/checkopts.h), keyed by
// build-id, so a file that changes between here and the load matches nothing rather than the
// wrong code; the agent adds the load address when the module appears.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../analyze/demangle.h"
#include "../common/checkopts.h"
#include "cli.h"
#include "gsites.h"

// Shared objects looked at in one directory at most: a directory of thousands of libraries is
// not a program's plugins, and reading them all would delay every run.
#define GSITES_DIR_FILES 256

// The setting travels in HEAPLENS_OPTIONS, one environment string, which the kernel caps at
// 128 KiB (MAX_ARG_STRLEN); the other settings keep the rest.
#define GSITES_ENV_MAX (120u << 10)

int gsites_check_regex(const char* regex) {
    regex_t re;
    int rc = regcomp(&re, regex, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char why[256];
        regerror(rc, &re, why, sizeof why);
        cli_error("--guard-sites: '%s' is not a regular expression: %s", regex, why);
        return -1;
    }
    regfree(&re);
    return 0;
}

typedef struct range_s {
    uint64_t lo, hi;
} range_t;

typedef struct files_s {
    char** paths;
    size_t n, cap;
    dev_t* devs;
    ino_t* inos;
} files_t;

// Adds path once (by device and inode; symbolic links followed).
static void add_file(files_t* f, const char* path) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return;
    for (size_t i = 0; i < f->n; i++)
        if (f->devs[i] == st.st_dev && f->inos[i] == st.st_ino)
            return;
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 32;
        char** p = realloc(f->paths, cap * sizeof *p);
        if (p)
            f->paths = p;
        dev_t* d = realloc(f->devs, cap * sizeof *d);
        if (d)
            f->devs = d;
        ino_t* in = realloc(f->inos, cap * sizeof *in);
        if (in)
            f->inos = in;
        if (!p || !d || !in)
            return;
        f->cap = cap;
    }
    char* real = realpath(path, NULL);
    if (!real)
        return;
    f->paths[f->n] = real;
    f->devs[f->n] = st.st_dev;
    f->inos[f->n] = st.st_ino;
    f->n++;
}

// The program's interpreter (PT_INTERP), or "" for none.
static void interp_of(Elf* e, char* out, size_t cap) {
    out[0] = 0;
    size_t n;
    if (elf_getphdrnum(e, &n) != 0)
        return;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_INTERP)
            continue;
        size_t len;
        char* raw = elf_rawfile(e, &len);
        if (raw && ph.p_offset < len && ph.p_filesz < cap && ph.p_offset + ph.p_filesz <= len)
            snprintf(out, cap, "%.*s", (int)ph.p_filesz, raw + ph.p_offset);
    }
}

// The libraries the loader maps for prog, from `INTERP --list PROG` (what ldd runs): a line
// "\tNAME => PATH (0x...)" or "\tPATH (0x...)" each.
static void add_needed(files_t* f, const char* interp, const char* prog) {
    int out[2];
    if (!interp[0] || pipe2(out, O_CLOEXEC) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0)
            dup2(null, 2);
        execl(interp, interp, "--list", prog, (char*)NULL);
        _exit(127);
    }
    close(out[1]);
    FILE* in = pid > 0 ? fdopen(out[0], "r") : NULL;
    if (!in) {
        close(out[0]);
    } else {
        char line[PATH_MAX + 128];
        while (fgets(line, sizeof line, in)) {
            char* p = strstr(line, "=> ");
            p = p ? p + 3 : line + strspn(line, " \t");
            if (*p != '/')
                continue;
            p[strcspn(p, " \n")] = 0;
            add_file(f, p);
        }
        fclose(in);
    }
    if (pid > 0)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
}

// Shared objects (NAME.so, NAME.so.N...) in dir, which the program may dlopen.
static void add_dir_objects(files_t* f, const char* dir) {
    DIR* d = opendir(dir[0] ? dir : ".");
    if (!d)
        return;
    int seen = 0;
    struct dirent* de;
    while ((de = readdir(d)) && seen < GSITES_DIR_FILES) {
        const char* so = strstr(de->d_name, ".so");
        if (!so || (so[3] && so[3] != '.'))
            continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir[0] ? dir : ".", de->d_name) >=
            (int)sizeof path)
            continue;
        seen++;
        add_file(f, path);
    }
    closedir(d);
}

// The program's DT_RUNPATH, else DT_RPATH ("" for neither): where its libraries, and often
// its plugins, are.
static void runpath_of(Elf* e, char* out, size_t cap) {
    Elf_Scn* scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize)
            continue;
        Elf_Data* data = elf_getdata(scn, NULL);
        for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Dyn dyn;
            if (!gelf_getdyn(data, (int)i, &dyn) ||
                (dyn.d_tag != DT_RUNPATH && (dyn.d_tag != DT_RPATH || out[0])))
                continue;
            const char* v = elf_strptr(e, sh.sh_link, dyn.d_un.d_val);
            if (v)
                snprintf(out, cap, "%s", v);
            if (dyn.d_tag == DT_RUNPATH)
                return;
        }
    }
}

// Each directory of a ':'-separated list, $ORIGIN (or ${ORIGIN}) standing for origin.
static void add_dir_list(files_t* f, const char* list, const char* origin) {
    for (const char* p = list ? list : ""; *p;) {
        size_t len = strcspn(p, ":;");
        char dir[PATH_MAX];
        size_t n = 0;
        for (size_t i = 0; i < len && n < sizeof dir - 1;) {
            size_t tok = !strncmp(p + i, "$ORIGIN", 7) ? 7 : !strncmp(p + i, "${ORIGIN}", 9) ? 9 : 0;
            if (tok && i + tok <= len) {
                n += (size_t)snprintf(dir + n, sizeof dir - n, "%s", origin);
                i += tok;
            } else {
                dir[n++] = p[i++];
            }
        }
        dir[n < sizeof dir ? n : sizeof dir - 1] = 0;
        if (len)
            add_dir_objects(f, dir);
        p += len + (p[len] != 0);
    }
}

static int cmp_range(const void* a, const void* b) {
    const range_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int name_matches(const regex_t* re, const char* name) {
    if (regexec(re, name, 0, NULL, 0) == 0)
        return 1;
    char* demangled = hl_demangle(name, NULL);
    int hit = demangled && regexec(re, demangled, 0, NULL, 0) == 0;
    free(demangled);
    return hit;
}

// The module's key for the agent: its build-id in hex, else its path ("" when neither fits).
static void key_of(Elf* e, const char* path, char* out, size_t cap) {
    out[0] = 0;
    Elf_Scn* scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
            continue;
        Elf_Data* data = elf_getdata(scn, NULL);
        GElf_Nhdr nh;
        size_t off = 0, name_off, desc_off;
        while (data && (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
            if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
                memcmp((char*)data->d_buf + name_off, "GNU", 4) || nh.n_descsz * 2 >= cap)
                continue;
            const uint8_t* id = (const uint8_t*)data->d_buf + desc_off;
            for (size_t i = 0; i < nh.n_descsz; i++)
                sprintf(out + 2 * i, "%02x", id[i]);
            return;
        }
    }
    if (strlen(path) < cap && !strpbrk(path, "@;"))
        snprintf(out, cap, "%s", path);
}

// The functions of one ELF file whose names match, as ranges (sorted, merged) into *rs.
static size_t module_ranges(Elf* e, const regex_t* re, range_t** rs) {
    size_t n = 0, cap = 0;
    *rs = NULL;
    // .symtab has every function; .dynsym (all a stripped file keeps) only the exported ones.
    for (int pass = 0; pass < 2; pass++) {
        Elf_Scn* scn = NULL;
        while ((scn = elf_nextscn(e, scn))) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh) ||
                sh.sh_type != (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM) || !sh.sh_entsize)
                continue;
            Elf_Data* data = elf_getdata(scn, NULL);
            size_t count = data ? sh.sh_size / sh.sh_entsize : 0;
            for (size_t i = 0; i < count; i++) {
                GElf_Sym sym;
                if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
                    !sym.st_size || (GELF_ST_TYPE(sym.st_info) != STT_FUNC &&
                                     GELF_ST_TYPE(sym.st_info) != STT_GNU_IFUNC))
                    continue;
                const char* name = elf_strptr(e, sh.sh_link, sym.st_name);
                if (!name || !name_matches(re, name))
                    continue;
                if (n == cap) {
                    cap = cap ? cap * 2 : 16;
                    range_t* p = realloc(*rs, cap * sizeof *p);
                    if (!p)
                        return n;
                    *rs = p;
                }
                (*rs)[n++] = (range_t){sym.st_value, sym.st_value + sym.st_size};
            }
        }
        if (n)
            break;
    }
    if (!n)
        return 0;
    qsort(*rs, n, sizeof **rs, cmp_range);
    size_t m = 0;
    for (size_t i = 1; i < n; i++) {
        if ((*rs)[i].lo <= (*rs)[m].hi) { // aliases and nested symbols: one range
            if ((*rs)[i].hi > (*rs)[m].hi)
                (*rs)[m].hi = (*rs)[i].hi;
        } else {
            (*rs)[++m] = (*rs)[i];
        }
    }
    return m + 1;
}

char* gsites_resolve(const char* regex, const char* prog) {
    regex_t re;
    if (regcomp(&re, regex, REG_EXTENDED | REG_NOSUB) != 0) {
        cli_error("--guard-sites: '%s' is not a regular expression", regex);
        return NULL;
    }
    elf_version(EV_CURRENT);
    // A #! script: what runs, and what the agent is loaded into, is its interpreter.
    char script_interp[PATH_MAX];
    FILE* sf = fopen(prog, "re");
    if (sf) {
        if (fgets(script_interp, sizeof script_interp, sf) && !strncmp(script_interp, "#!", 2)) {
            char* p = script_interp + 2 + strspn(script_interp + 2, " \t");
            p[strcspn(p, " \t\n")] = 0;
            if (*p == '/')
                prog = memmove(script_interp, p, strlen(p) + 1);
        }
        fclose(sf);
    }
    files_t files = {0};
    add_file(&files, prog);
    char interp[PATH_MAX] = "";
    char runpath[PATH_MAX] = "";
    int fd = open(prog, O_RDONLY | O_CLOEXEC);
    Elf* e = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
    if (e) {
        interp_of(e, interp, sizeof interp);
        runpath_of(e, runpath, sizeof runpath);
        elf_end(e);
    }
    if (fd >= 0)
        close(fd);
    add_needed(&files, interp, prog);
    char origin[PATH_MAX];
    snprintf(origin, sizeof origin, "%s", files.n ? files.paths[0] : prog);
    char* slash = strrchr(origin, '/');
    *(slash ? slash : origin) = 0;
    add_dir_objects(&files, origin);
    add_dir_list(&files, getenv("LD_LIBRARY_PATH"), origin);
    add_dir_list(&files, runpath, origin);

    char* out = NULL;
    size_t out_len = 0, total = 0;
    FILE* f = open_memstream(&out, &out_len);
    int entries = 0;
    for (size_t k = 0; f && k < files.n; k++) {
        fd = open(files.paths[k], O_RDONLY | O_CLOEXEC);
        e = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
        range_t* rs = NULL;
        size_t n = e && elf_kind(e) == ELF_K_ELF ? module_ranges(e, &re, &rs) : 0;
        char key[PATH_MAX];
        if (n)
            key_of(e, files.paths[k], key, sizeof key);
        if (n && key[0]) {
            fprintf(f, "%s%s@", entries++ ? ";" : "", key);
            for (size_t i = 0; i < n; i++)
                fprintf(f, "%s%llx+%llx", i ? "," : "", (unsigned long long)rs[i].lo,
                        (unsigned long long)(rs[i].hi - rs[i].lo));
            total += n;
        }
        free(rs);
        if (e)
            elf_end(e);
        if (fd >= 0)
            close(fd);
    }
    regfree(&re);
    for (size_t k = 0; k < files.n; k++)
        free(files.paths[k]);
    free(files.paths);
    free(files.devs);
    free(files.inos);
    if (!f || fclose(f) != 0) {
        cli_error("out of memory");
        free(out);
        return NULL;
    }
    if (total > HL_GSITES_MAX || out_len > GSITES_ENV_MAX) {
        cli_error("--guard-sites: '%s' matches %zu functions, more than the %d the agent holds "
                  "(or %u KiB of ranges): name fewer", regex, total, HL_GSITES_MAX,
                  GSITES_ENV_MAX >> 10);
        free(out);
        return NULL;
    }
    if (!entries) {
        fprintf(stderr, "heaplens: warning: --guard-sites: no function of %s or its libraries "
                "matches '%s' (a stripped program keeps only its exported names): no "
                "allocation goes on a guard page\n", prog, regex);
        free(out);
        out = strdup("-");
    }
    return out;
}
