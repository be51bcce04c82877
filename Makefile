# af: one binary. `make` builds ./af; `make test` runs every suite;
# `make test SANITIZE=address,undefined` does the same with sanitizers, in its
# own build folder so the two builds never mix.

CC	?= gcc
PKGS	 = libevent libevent_pthreads libcurl yaml-0.1 libcjson sqlite3 \
	   libseccomp libwebsockets
CSTD	 = -std=c17 -D_GNU_SOURCE
WARN	 = -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes \
	   -Wmissing-prototypes -Wno-unused-parameter \
	   -Wno-format-truncation
CFLAGS	?= -O2 -g
PKGCFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKGLIBS	  := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
LIBS	 = $(PKGLIBS) -letpan -lgnutls -lpthread -lm

ifdef SANITIZE
BUILD	 = build/san
SANFLAGS = -fsanitize=$(SANITIZE) -fno-omit-frame-pointer \
	   -fno-sanitize-recover=all
else
BUILD	 = build/plain
SANFLAGS =
endif

ALLCFLAGS = $(CSTD) $(WARN) $(CFLAGS) $(SANFLAGS) $(PKGCFLAGS) -I. -Iengine
LDFLAGS_ALL = $(SANFLAGS) $(LDFLAGS)

LIBSRCS	 = $(filter-out engine/main.c,$(wildcard engine/*.c tools/*.c \
	   triggers/*.c audit/*.c status/*.c))
LIBOBJS	 = $(LIBSRCS:%.c=$(BUILD)/%.o)
UNITSRCS = $(wildcard tests/unit/test_*.c)
UNITBINS = $(UNITSRCS:%.c=$(BUILD)/%)
HELPERSRCS = $(wildcard tests/helpers/*.c)
HELPERBINS = $(HELPERSRCS:%.c=$(BUILD)/%)
BENCHSRCS = $(wildcard bench/*.c)
BENCHBINS = $(BENCHSRCS:%.c=$(BUILD)/%)
DEPS	 = $(LIBOBJS:.o=.d) $(BUILD)/engine/main.d

.PHONY: all test unit integration bench fuzz fuzz-build clean soak deps demo \
	valgrind

all: af

ifdef SANITIZE
af: $(BUILD)/af
else
af: $(BUILD)/af
	cp $(BUILD)/af af.tmp && mv -f af.tmp af
endif

$(BUILD)/af: $(BUILD)/engine/main.o $(BUILD)/libaf.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

$(BUILD)/libaf.a: $(LIBOBJS)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/tests/unit/tt.o: tests/unit/tt.c
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -c -o $@ $<

$(BUILD)/tests/unit/test_%: tests/unit/test_%.c $(BUILD)/tests/unit/tt.o \
    $(BUILD)/libaf.a
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -Itests/unit $(LDFLAGS_ALL) -o $@ $< \
	    $(BUILD)/tests/unit/tt.o $(BUILD)/libaf.a $(LIBS)

$(BUILD)/tests/helpers/%: tests/helpers/%.c $(BUILD)/libaf.a
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) $(LDFLAGS_ALL) -o $@ $< $(BUILD)/libaf.a $(LIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libaf.a
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) $(LDFLAGS_ALL) -o $@ $< $(BUILD)/libaf.a $(LIBS)

# The whole suite: unit binaries, then integration tests against ./af.
test: $(BUILD)/af $(UNITBINS) $(HELPERBINS)
	AF_BUILD=$(BUILD) AF_BIN=$(BUILD)/af tests/run.sh

unit: $(UNITBINS)
	AF_BUILD=$(BUILD) AF_BIN=$(BUILD)/af tests/run.sh unit

integration: $(BUILD)/af $(HELPERBINS)
	AF_BUILD=$(BUILD) AF_BIN=$(BUILD)/af tests/run.sh integration

bench: $(BUILD)/af $(BENCHBINS) $(HELPERBINS)
	AF_BUILD=$(BUILD) AF_BIN=$(BUILD)/af bench/run.sh

SOAK_SECONDS ?= 600
soak: $(BUILD)/af $(HELPERBINS)
	AF_BUILD=$(BUILD) AF_BIN=$(BUILD)/af SOAK_SECONDS=$(SOAK_SECONDS) python3 tests/soak/soak.py

# libFuzzer targets (clang); FUZZ_SECONDS bounds each one.
FUZZ_SECONDS ?= 60
fuzz: fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZDIR=$(FUZZDIR) fuzz/run.sh

deps:
	scripts/deps.sh

demo: af
	scripts/demo.sh

clean:
	rm -rf build af

-include $(DEPS)

# Fuzzers: the library again, built by clang with coverage instrumentation.
FUZZCC	 = clang
FUZZDIR	 = build/fuzz
FUZZFLAGS = $(CSTD) -g -O1 -fsanitize=fuzzer-no-link,address,undefined \
	   $(PKGCFLAGS) -I. -Iengine
FUZZOBJS = $(LIBSRCS:%.c=$(FUZZDIR)/%.o)
FUZZSRCS = $(wildcard fuzz/*-fuzzer.c)
FUZZBINS = $(FUZZSRCS:fuzz/%.c=$(FUZZDIR)/bin/%)

$(FUZZDIR)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZCC) $(FUZZFLAGS) -c -o $@ $<

$(FUZZDIR)/libaf.a: $(FUZZOBJS)
	rm -f $@
	ar rcs $@ $^

$(FUZZDIR)/bin/%: fuzz/%.c $(FUZZDIR)/libaf.a
	@mkdir -p $(dir $@)
	$(FUZZCC) $(FUZZFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZDIR)/libaf.a \
	    $(LIBS)

fuzz-build: $(FUZZBINS)

# Valgrind over the fuzz corpora: each target linked with fuzz/replay.c
# (a plain main) against the library as gcc builds it.
VGBINS	 = $(FUZZSRCS:fuzz/%-fuzzer.c=$(BUILD)/fuzz/%-replay)

$(BUILD)/fuzz/%-replay: fuzz/%-fuzzer.c fuzz/replay.c $(BUILD)/libaf.a
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) $(LDFLAGS_ALL) -o $@ $< fuzz/replay.c \
	    $(BUILD)/libaf.a $(LIBS)

valgrind: $(VGBINS)
	AF_BUILD=$(BUILD) fuzz/valgrind.sh
