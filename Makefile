# heaplens - one GNU Makefile: make, make demo, make check, make bench, make help.
CC       ?= gcc
BUILD    ?= build
CFLAGS_COMMON := -std=gnu11 -O2 -g -Wall -Wextra -Werror -fno-strict-aliasing
AGENT_CFLAGS  := $(CFLAGS_COMMON) -fPIC -fvisibility=hidden -fexceptions -fno-omit-frame-pointer
# The agent's hot path crosses files (hooks -> record -> live table, guards, the bootstrap arena's
# bounds): link-time optimisation inlines those small calls (tree 4%, churn_unique 4% faster).
AGENT_LTO     ?= -flto=auto
TOOL_CFLAGS   := $(CFLAGS_COMMON)
DEB_PACKAGES  := gcc g++ gfortran make libdw-dev libelf-dev libzstd-dev python3 protobuf-compiler valgrind

AGENT_SRC := $(wildcard src/agent/*.c)
ANALYZE_SRC := $(wildcard src/analyze/*.c)
CLI_SRC := $(wildcard src/cli/*.c)
AGENT_OBJ := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(AGENT_SRC))
ANALYZE_OBJ := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(ANALYZE_SRC))
CLI_OBJ := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(CLI_SRC))
HEADERS := $(wildcard src/*/*.h include/*.h)
TEST_HEADERS := $(wildcard tests/*.h tests/unit/*.h)

UNIT_TESTS := test_varint test_checkopts test_classify test_symbols test_reader test_aggregate test_got test_heap_traced test_json_stacks test_agent_core \
              test_epoch test_gsites test_pagemap test_addr_sort test_sites test_chunk test_ring
PROGRAMS := $(BUILD)/programs/libplugin.so $(BUILD)/programs/libforeign.so $(BUILD)/programs/libforeign_lazy.so \
            $(BUILD)/programs/libforeign_noplt.so \
            $(patsubst tests/programs/%.c,$(BUILD)/programs/%,$(wildcard tests/programs/*.c)) \
            $(patsubst tests/programs/%.cc,$(BUILD)/programs/%,$(wildcard tests/programs/*.cc)) \
            $(patsubst tests/programs/%.f90,$(BUILD)/programs/%,$(wildcard tests/programs/*.f90))

# The agent for 32-bit programs on a 64-bit x86 host, built when gcc -m32 and a 32-bit libzstd
# are here (gcc-multilib, libzstd-dev:i386). heaplens run preloads
# DIR/agents/$PLATFORM/libheaplens.so, which the loader expands for each program it starts
# (x86_64 or i686), so a 64-bit shell's 32-bit children are traced as well.
NATIVE_PLATFORM := $(shell uname -m)
HAS_M32 := $(if $(filter x86_64,$(NATIVE_PLATFORM)),$(shell printf 'int main(void){return 0;}' | \
           $(CC) -m32 -x c - -o /dev/null -lzstd -lgcc_s 2>/dev/null && echo yes))
AGENT32_OBJ := $(patsubst src/%.c,$(BUILD)/obj32/%.o,$(AGENT_SRC))
AGENT_LINKS := $(BUILD)/agents/$(NATIVE_PLATFORM)/libheaplens.so \
               $(if $(HAS_M32),$(BUILD)/agents/i686/libheaplens.so)

.PHONY: api-test all demo check unit integration html-test acceptance bench deps help clean install uninstall \
        fuzz asan-build check-asan deps-san
API_LIBS := $(BUILD)/libheaplens-api.so $(BUILD)/libheaplens-api.a
all: $(BUILD)/libheaplens.so $(AGENT_LINKS) $(BUILD)/heaplens $(BUILD)/heaplens-memcheck $(API_LIBS) ## build the agent, the CLI and the API library

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(BUILD)/obj/agent/%.o: src/agent/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(AGENT_CFLAGS) $(AGENT_LTO) -c $< -o $@

$(BUILD)/obj/api/%.o: src/api/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) -fPIC -c $< -o $@

$(BUILD)/obj/%.o: src/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -c $< -o $@

# The HTML report's page (src/analyze/html/report.html), compiled in as a byte array.
$(BUILD)/gen/report_template.h: src/analyze/html/report.html
	@mkdir -p $(dir $@)
	{ echo '// generated from $< by the Makefile; do not edit'; \
	  echo 'static const unsigned char hl_report_template[] = {'; \
	  od -An -v -tx1 $< | sed 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '0x00};'; } > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/analyze/report_html.o: $(BUILD)/gen/report_template.h
$(BUILD)/obj/analyze/report_html.o: TOOL_CFLAGS += -I$(BUILD)/gen
# The page's parts of their own (src/analyze/html/stats.html: the allocator chart; tags.html:
# allocations by the API's tags), put in before </body> by report_stats.c.
PAGE_PARTS := $(BUILD)/gen/part_stats.h $(BUILD)/gen/part_tags.h
$(BUILD)/gen/part_%.h: src/analyze/html/%.html
	@mkdir -p $(dir $@)
	{ echo '// generated from $< by the Makefile; do not edit'; \
	  echo 'static const unsigned char hl_part_$*[] = {'; \
	  od -An -v -tx1 $< | sed 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '0x00};'; } > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/analyze/report_stats.o: $(PAGE_PARTS)
$(BUILD)/obj/analyze/report_stats.o: TOOL_CFLAGS += -I$(BUILD)/gen

# zstd goes into the agent itself where its static library is installed (libzstd-dev has it),
# and so does libgcc's unwinder (-static-libgcc): every traced process then loads, maps and
# relocates two libraries less (a C program loads neither), and their symbols stay the agent's
# own, whatever zstd or libgcc the program has. A C++ exception through the agent's frames is
# still unwound by the program's libgcc_s, from the agent's .eh_frame.
AGENT_ZSTD_A := $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libzstd.a /usr/lib64/libzstd.a \
	/usr/lib/libzstd.a /usr/local/lib/libzstd.a))
AGENT_ZSTD_STATIC := $(AGENT_ZSTD_A) -Wl,--exclude-libs,libzstd.a
AGENT_ZSTD := $(if $(AGENT_ZSTD_A),$(AGENT_ZSTD_STATIC),-lzstd)

$(BUILD)/libheaplens.so: $(AGENT_OBJ)
	$(CC) $(AGENT_CFLAGS) $(AGENT_LTO) -shared -static-libgcc -o $@ $^ -Wl,-z,nodelete -Wl,--no-undefined $(AGENT_ZSTD) \
	  -Wl,--exclude-libs,libgcc.a:libgcc_eh.a -ldl -lpthread

$(BUILD)/obj32/agent/%.o: src/agent/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) -m32 $(AGENT_CFLAGS) -c $< -o $@
$(BUILD)/libheaplens32.so: $(AGENT32_OBJ)
	$(CC) -m32 -shared -o $@ $^ -Wl,-z,nodelete -Wl,--no-undefined -lgcc_s -lzstd -ldl -lpthread
$(BUILD)/agents/$(NATIVE_PLATFORM)/libheaplens.so: $(BUILD)/libheaplens.so
	@mkdir -p $(dir $@)
	ln -sf ../../libheaplens.so $@
$(BUILD)/agents/i686/libheaplens.so: $(BUILD)/libheaplens32.so
	@mkdir -p $(dir $@)
	ln -sf ../../libheaplens32.so $@

# include/heaplens.h's library: forwards to the agent when it is there, "not traced" otherwise.
$(BUILD)/libheaplens-api.so: $(BUILD)/obj/api/heaplens_api.o
	$(CC) -shared -Wl,-soname,libheaplens-api.so -o $@ $^ -ldl
$(BUILD)/libheaplens-api.a: $(BUILD)/obj/api/heaplens_api.o
	rm -f $@ && ar rcs $@ $^

$(BUILD)/heaplens: $(CLI_OBJ) $(ANALYZE_OBJ)
	$(CC) -o $@ $^ -ldw -lelf -lzstd -ldl -pthread -lm

# Called by this name, heaplens is `heaplens memcheck` (for tools that take one executable).
$(BUILD)/heaplens-memcheck: $(BUILD)/heaplens
	ln -sf heaplens $@

# --- tests ------------------------------------------------------------------------------------
$(BUILD)/tests/test_classify: tests/unit/test_classify.c src/agent/classify.c $(HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Itests -o $@ tests/unit/test_classify.c src/agent/classify.c
# The live table and its epochs, driven directly (no preloading).
EPOCH_TEST_SRC := $(addprefix src/agent/,epoch.c live.c live_header.c live_spill.c live_regions.c os.c log.c)
$(BUILD)/tests/test_epoch: tests/unit/test_epoch.c $(EPOCH_TEST_SRC) $(HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Itests -o $@ tests/unit/test_epoch.c $(EPOCH_TEST_SRC)
# The rule a thread's ring grows by (ring.h, header only).
$(BUILD)/tests/test_ring: tests/unit/test_ring.c $(HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Itests -o $@ tests/unit/test_ring.c
$(BUILD)/tests/test_pagemap: tests/unit/test_pagemap.c src/agent/pagemap.c $(HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Itests -o $@ tests/unit/test_pagemap.c src/agent/pagemap.c
$(BUILD)/tests/test_addr_sort: tests/unit/test_addr_sort.c src/agent/addr_sort.c $(HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Itests -o $@ tests/unit/test_addr_sort.c src/agent/addr_sort.c
# sites.c with the agent pages it takes its tables from.
$(BUILD)/tests/test_sites: tests/unit/test_sites.c src/agent/sites.c src/agent/os.c src/agent/log.c $(HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Itests -o $@ tests/unit/test_sites.c src/agent/sites.c src/agent/os.c src/agent/log.c
# got.c alone, on the three builds of libforeign (-rdynamic: it looks up its own symbols).
$(BUILD)/tests/test_got: tests/unit/test_got.c src/agent/got.c $(HEADERS) $(TEST_HEADERS) $(BUILD)/programs/libforeign.so $(BUILD)/programs/libforeign_lazy.so $(BUILD)/programs/libforeign_noplt.so
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Itests -rdynamic -o $@ tests/unit/test_got.c src/agent/got.c -ldl
# gsites.c with the stack table it reads (and what that needs), driven without preloading.
GSITES_TEST_SRC := src/agent/gsites.c src/agent/stacks.c src/agent/os.c src/agent/log.c
$(BUILD)/tests/test_gsites: tests/unit/test_gsites.c $(GSITES_TEST_SRC) $(HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Itests -o $@ tests/unit/test_gsites.c $(GSITES_TEST_SRC) -lpthread
# chunk.c with what it needs, its chunks read back by zstd's decoder as the analyzer's reader does.
CHUNK_TEST_SRC := src/agent/chunk.c src/agent/os.c src/agent/log.c
$(BUILD)/tests/test_chunk: tests/unit/test_chunk.c $(CHUNK_TEST_SRC) $(HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Itests -o $@ tests/unit/test_chunk.c $(CHUNK_TEST_SRC) $(AGENT_ZSTD) -lpthread
$(BUILD)/tests/test_varint: tests/unit/test_varint.c $(HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Itests -o $@ $<
$(BUILD)/tests/test_checkopts: tests/unit/test_checkopts.c $(HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Itests -o $@ $<
$(BUILD)/tests/test_symbols: tests/unit/test_symbols.c src/analyze/symbols.c src/analyze/symcache.c $(HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Isrc/analyze -Itests -o $@ tests/unit/test_symbols.c src/analyze/symbols.c src/analyze/symcache.c src/analyze/demangle.c -ldw -lelf -ldl -pthread
$(BUILD)/tests/test_reader: tests/unit/test_reader.c $(ANALYZE_OBJ) $(HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Isrc/analyze -Itests -o $@ tests/unit/test_reader.c $(ANALYZE_OBJ) -ldw -lelf -lzstd -ldl -pthread -lm
$(BUILD)/tests/test_heap_traced: tests/unit/test_heap_traced.c $(ANALYZE_OBJ) $(HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Isrc/analyze -Itests -o $@ tests/unit/test_heap_traced.c $(ANALYZE_OBJ) -ldw -lelf -lzstd -ldl -pthread -lm
$(BUILD)/tests/test_json_stacks: tests/unit/test_json_stacks.c $(ANALYZE_OBJ) $(HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Isrc/analyze -Itests -o $@ tests/unit/test_json_stacks.c $(ANALYZE_OBJ) -ldw -lelf -lzstd -ldl -pthread -lm
$(BUILD)/tests/test_aggregate: tests/unit/test_aggregate.c $(ANALYZE_OBJ) $(HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Isrc/analyze -Itests -o $@ tests/unit/test_aggregate.c $(ANALYZE_OBJ) -ldw -lelf -lzstd -ldl -pthread -lm

# The agent loaded with dlopen in a child, its own malloc/free/_exit called; the trace read back.
$(BUILD)/tests/test_agent_core: tests/unit/test_agent_core.c $(BUILD)/libheaplens.so $(ANALYZE_OBJ) $(HEADERS) $(TEST_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -fno-omit-frame-pointer -Isrc/analyze -Itests -o $@ tests/unit/test_agent_core.c $(ANALYZE_OBJ) -ldw -lelf -lzstd -ldl -pthread -lm

$(BUILD)/programs/%: tests/programs/%.c tests/programs/common.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fno-omit-frame-pointer -fno-inline-small-functions -Wno-unused-result -o $@ $< -pthread -ldl
# Built without frame pointers: their stacks are the agent's own unwinder's work (CFI rules).
$(BUILD)/programs/unwind_mix $(BUILD)/programs/unwind_random $(BUILD)/programs/unwind_guard \
  $(BUILD)/programs/unwind_sites: $(BUILD)/programs/unwind_%: tests/programs/unwind_%.c tests/programs/common.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fomit-frame-pointer -fno-inline-small-functions -Wno-unused-result -o $@ $< -pthread
$(BUILD)/programs/%: tests/programs/%.cc tests/programs/common.h
	@mkdir -p $(dir $@)
	g++ -O2 -g -Wno-unused-result -Wno-mismatched-new-delete -o $@ $< -pthread -ldl
$(BUILD)/programs/%: tests/programs/%.f90
	@mkdir -p $(dir $@)
	gfortran -O2 -g -o $@ $<
$(BUILD)/programs/libplugin.so: tests/programs/plugin.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fPIC -shared -o $@ $<
# foreign_*: executables that define malloc themselves (exported) and call libforeign, built
# twice: bound at load under full RELRO, and bound lazily without RELRO. -fno-builtin keeps an
# allocator's calls to itself (gcc would make calloc's malloc and memset a call to calloc).
# foreign_static has no dynamic loader at all.
FOREIGN_EXE_FLAGS := -O2 -g -fno-builtin -fno-omit-frame-pointer -Wno-unused-result -rdynamic -L$(BUILD)/programs -Wl,-rpath,'$$ORIGIN' -ldl
$(BUILD)/programs/libforeign.so: tests/programs/foreign_lib.c tests/programs/common.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fPIC -shared -Wl,-z,relro,-z,now -o $@ $<
$(BUILD)/programs/libforeign_lazy.so: tests/programs/foreign_lib.c tests/programs/common.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fPIC -shared -Wl,-z,lazy,-z,norelro -o $@ $<
$(BUILD)/programs/libforeign_noplt.so: tests/programs/foreign_lib.c tests/programs/common.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fPIC -fno-plt -shared -Wl,-z,relro,-z,now -o $@ $<
$(BUILD)/programs/foreign_own_malloc: tests/programs/foreign_own_malloc.c tests/programs/common.h $(BUILD)/programs/libforeign.so
	$(CC) -o $@ $< $(FOREIGN_EXE_FLAGS) -lforeign
$(BUILD)/programs/foreign_nopie: tests/programs/foreign_nopie.c tests/programs/foreign_own_malloc.c tests/programs/common.h $(BUILD)/programs/libforeign_lazy.so
	$(CC) -fno-pie -no-pie -o $@ $< $(FOREIGN_EXE_FLAGS) -lforeign_lazy
# A non-PIE executable that takes malloc's address: canonical PLT entries, no allocator of its own.
$(BUILD)/programs/foreign_canonical_plt: tests/programs/foreign_canonical_plt.c tests/programs/common.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fno-pie -no-pie -fno-omit-frame-pointer -o $@ $<
$(BUILD)/programs/foreign_static: tests/programs/foreign_static.c tests/programs/common.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -static -o $@ $<
$(BUILD)/programs/foreign_static_pie: tests/programs/foreign_static_pie.c tests/programs/foreign_static.c tests/programs/common.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -static-pie -o $@ $<

# The in-program API's test programs, linked with the API library of this build.
API_TEST_PROGS := $(BUILD)/tests/api/api_c $(BUILD)/tests/api/api_cxx $(BUILD)/tests/api/api_f \
                  $(BUILD)/tests/api/api_threads_scan $(BUILD)/tests/api/api_realloc_switch
API_LINK := -L$(BUILD) -lheaplens-api -Wl,-rpath,$(abspath $(BUILD))
$(BUILD)/tests/api/api_c: tests/api/api_c.c include/heaplens.h $(API_LIBS)
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -Wall -fno-omit-frame-pointer -rdynamic -Iinclude -o $@ $< $(API_LINK) -pthread -ldl
$(BUILD)/tests/api/api_threads_scan $(BUILD)/tests/api/api_realloc_switch: $(BUILD)/tests/api/%: tests/api/%.c include/heaplens.h $(API_LIBS)
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -Wall -Wextra -Iinclude -o $@ $< $(API_LINK) -pthread
$(BUILD)/tests/api/api_cxx: tests/api/api_cxx.cc include/heaplens.h $(API_LIBS)
	@mkdir -p $(dir $@)
	g++ -O1 -g -Wall -Wextra -Iinclude -o $@ $< $(API_LINK)
$(BUILD)/tests/api/api_f: tests/api/api_f.f90 include/heaplens.f90 $(API_LIBS)
	@mkdir -p $(dir $@)/mod
	gfortran -O1 -g -J$(dir $@)/mod -o $@ include/heaplens.f90 $< $(API_LINK)

api-test: all $(API_TEST_PROGS) ## the in-program API from C, C++ and Fortran, with and without heaplens
	@tests/integration/api.sh $(BUILD)

# --- the analyzer under sanitizers: a fuzzer of traces, and the tests under ASan+UBSan ---------
# clang's libFuzzer (libclang-rt-14-dev). The analyzer and the CLI are built again with coverage
# and sanitizers; the CLI's main() becomes heaplens_main() so the target can run its commands.
FUZZ_CC       ?= clang
FUZZ_SECONDS  ?= 60
SAN_FLAGS     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS   := -std=gnu11 -O1 -g -Wall -Wextra -Werror -fno-strict-aliasing $(SAN_FLAGS)
FUZZ_OBJ      := $(patsubst src/%.c,$(BUILD)/fuzz/obj/%.o,$(ANALYZE_SRC) $(CLI_SRC))
FUZZ_BIN      := $(BUILD)/fuzz/fuzz_trace $(BUILD)/fuzz/unpack $(BUILD)/fuzz/pack
ASAN_BUILD    := $(BUILD)/asan
ASAN_TESTS    := test_reader test_aggregate test_heap_traced test_json_stacks test_varint test_symbols
SAN_DEB_PACKAGES := clang libclang-rt-14-dev

$(BUILD)/fuzz/obj/%.o: src/%.c $(HEADERS) $(BUILD)/gen/report_template.h $(PAGE_PARTS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -I$(BUILD)/gen -c $< -o $@
$(BUILD)/fuzz/obj/cli/main.o: FUZZ_CFLAGS += -Dmain=heaplens_main
$(BUILD)/fuzz/fuzz_trace: tests/fuzz/fuzz_trace.c tests/fuzz/frame.h $(FUZZ_OBJ) $(HEADERS)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJ) -ldw -lelf -lzstd -ldl -pthread -lm
# A trace's records out of it, and records made a trace (hostile traces for tests/integration).
$(BUILD)/fuzz/unpack $(BUILD)/fuzz/pack: $(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/frame.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -o $@ $< -lzstd

deps-san: ## install clang and its libFuzzer and sanitizer runtimes (as root, where missing)
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(SAN_DEB_PACKAGES)"

fuzz: all $(PROGRAMS) $(FUZZ_BIN) ## fuzz the analyzer with traces under ASan+UBSan for FUZZ_SECONDS (60)
	@tests/fuzz/run.sh $(BUILD) $(FUZZ_SECONDS)

# The same Makefile into $(ASAN_BUILD) with the same compiler, every compile and link under
# the sanitizers.
asan-build: ## the analyzer, the CLI and their unit tests under ASan+UBSan, in $(ASAN_BUILD)
	@$(MAKE) --no-print-directory BUILD=$(ASAN_BUILD) CC="$(CC) $(SAN_FLAGS)" \
	    $(ASAN_BUILD)/heaplens $(addprefix $(ASAN_BUILD)/tests/,$(ASAN_TESTS))

check-asan: all $(PROGRAMS) asan-build ## analyzer tests and every report format under ASan+UBSan
	@tests/integration/asan.sh $(BUILD) $(ASAN_BUILD) $(ASAN_TESTS)

unit: $(addprefix $(BUILD)/tests/,$(UNIT_TESTS)) ## unit tests
	@for t in $(UNIT_TESTS); do $(BUILD)/tests/$$t || exit 1; done

integration: all $(PROGRAMS) ## integration tests under the agent
	@tests/integration/run.sh $(BUILD)

html-test: all $(PROGRAMS) $(API_TEST_PROGS) ## the HTML report and diff in headless Chromium (SKIP without it)
	@tests/integration/html.sh $(BUILD)

check: deps deps-san all $(addprefix $(BUILD)/tests/,$(UNIT_TESTS)) $(PROGRAMS) $(API_TEST_PROGS) asan-build $(FUZZ_BIN) ## every test; ends "N passed, N failed"
	@tests/check.sh $(BUILD) $(UNIT_TESTS)

demo: ## install what is missing, build, run heaplens on a leaking example
	@examples/demo.sh

# (A package installed for two architectures, libzstd-dev with its i386 copy, is asked for by
# this one's name: dpkg -s calls the bare name ambiguous then.)
deps: ## install the Debian packages the build needs (as root, where missing)
	@command -v dpkg >/dev/null || exit 0; missing=""; \
	arch=$$(dpkg --print-architecture); \
	for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || dpkg -s $$p:$$arch >/dev/null 2>&1 || \
	  missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "missing Debian packages:$$missing (run as root to install)"; exit 1; fi; \
	  echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi

bench: all ## overhead against native and heaptrack, side by side
	@bench/run.sh $(BUILD)

# --- install ------------------------------------------------------------------------------------
# The agent goes where heaplens looks for it beside itself: $(PREFIX)/lib/heaplens/.
PREFIX   ?= /usr/local
DESTDIR  ?=
BINDIR   := $(DESTDIR)$(PREFIX)/bin
AGENTDIR := $(DESTDIR)$(PREFIX)/lib/heaplens
MAN1DIR  := $(DESTDIR)$(PREFIX)/share/man/man1
COMPDIR  := $(DESTDIR)$(PREFIX)/share/bash-completion/completions
PCDIR    := $(DESTDIR)$(PREFIX)/lib/pkgconfig
LIBDIR   := $(DESTDIR)$(PREFIX)/lib
INCDIR   := $(DESTDIR)$(PREFIX)/include
VERSION  := $(shell sed -n 's/^\#define HEAPLENS_VERSION "\(.*\)"/\1/p' src/cli/cli.h)

install: all ## install into $(DESTDIR)$(PREFIX) (default /usr/local): CLI, agent, API, man page, completion, heaplens.pc
	install -d $(BINDIR) $(AGENTDIR) $(MAN1DIR) $(COMPDIR) $(PCDIR) $(LIBDIR) $(INCDIR)
	install -m 0644 include/heaplens.h include/heaplens.f90 $(INCDIR)/
	install -m 0755 $(BUILD)/libheaplens-api.so $(LIBDIR)/libheaplens-api.so
	install -m 0644 $(BUILD)/libheaplens-api.a $(LIBDIR)/libheaplens-api.a
	install -m 0755 $(BUILD)/heaplens $(BINDIR)/heaplens
	ln -sf heaplens $(BINDIR)/heaplens-memcheck
	install -m 0755 $(BUILD)/libheaplens.so $(AGENTDIR)/libheaplens.so
	install -d $(AGENTDIR)/agents/$(NATIVE_PLATFORM)
	ln -sf ../../libheaplens.so $(AGENTDIR)/agents/$(NATIVE_PLATFORM)/libheaplens.so
	$(if $(HAS_M32),install -m 0755 $(BUILD)/libheaplens32.so $(AGENTDIR)/libheaplens32.so)
	$(if $(HAS_M32),install -d $(AGENTDIR)/agents/i686)
	$(if $(HAS_M32),ln -sf ../../libheaplens32.so $(AGENTDIR)/agents/i686/libheaplens.so)
	install -m 0644 docs/heaplens.1 $(MAN1DIR)/heaplens.1
	ln -sf heaplens.1 $(MAN1DIR)/heaplens-memcheck.1
	install -m 0644 docs/heaplens.bash $(COMPDIR)/heaplens
	ln -sf heaplens $(COMPDIR)/heaplens-memcheck
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' docs/heaplens.pc.in >$(BUILD)/heaplens.pc
	install -m 0644 $(BUILD)/heaplens.pc $(PCDIR)/heaplens.pc

uninstall: ## remove what make install put in $(DESTDIR)$(PREFIX)
	rm -f $(BINDIR)/heaplens $(BINDIR)/heaplens-memcheck $(AGENTDIR)/libheaplens.so \
	      $(MAN1DIR)/heaplens.1 $(MAN1DIR)/heaplens-memcheck.1 \
	      $(COMPDIR)/heaplens $(COMPDIR)/heaplens-memcheck $(PCDIR)/heaplens.pc \
	      $(INCDIR)/heaplens.h $(INCDIR)/heaplens.f90 $(LIBDIR)/libheaplens-api.so \
	      $(LIBDIR)/libheaplens-api.a
	rm -f $(AGENTDIR)/libheaplens32.so $(AGENTDIR)/agents/*/libheaplens.so
	-rmdir $(AGENTDIR)/agents/* $(AGENTDIR)/agents $(AGENTDIR) 2>/dev/null

clean:
	rm -rf $(BUILD)
