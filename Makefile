# hwtimer: build, test, demo, install.
#   make          build build/hwtimer/core.so against Lua 5.4
#   make test     C core tests + busted specs (installs Debian packages as root)
#   make demo     the live demo (installs Debian packages as root)
#   make install  copy the module into LUA_LIBDIR / LUA_SHAREDIR

LUA_VERSION ?= 5.4
LUA         ?= lua$(LUA_VERSION)
LUA_INCDIR  ?= $(shell pkg-config --variable=includedir lua$(LUA_VERSION) 2>/dev/null || echo /usr/include)/lua$(LUA_VERSION)
PREFIX      ?= /usr/local
LUA_LIBDIR  ?= $(PREFIX)/lib/lua/$(LUA_VERSION)
LUA_SHAREDIR?= $(PREFIX)/share/lua/$(LUA_VERSION)

CC      ?= cc
CFLAGS  ?= -O2 -g
WARN    := -std=c99 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
           -Wall -Wextra -Wshadow -Wmissing-prototypes -pedantic
LDLIBS  := -lpthread -lm -ldl

CORE_SRC := csrc/wheel.c csrc/worker.c csrc/pipe.c csrc/clock.c
SRC      := $(CORE_SRC) csrc/lhwtimer.c
HDR      := $(wildcard csrc/*.h)
BUILD    := build
MODULE   := $(BUILD)/hwtimer/core.so

# The specs and the demo see the source tree first.
RUN_ENV := LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='$(BUILD)/?.so;$(BUILD)/test/?.so;;' HWT_LUA=$(LUA)
TESTUTIL := $(BUILD)/test/hwtimer_testutil.so
ROCKTREE := $(BUILD)/rock
# The installed rock only: no lua/ and no build/hwtimer on the paths.
ROCK_ENV := LUA_PATH='$(ROCKTREE)/share/lua/$(LUA_VERSION)/?.lua;$(ROCKTREE)/share/lua/$(LUA_VERSION)/?/init.lua;;' \
            LUA_CPATH='$(ROCKTREE)/lib/lua/$(LUA_VERSION)/?.so;$(BUILD)/test/?.so;;' HWT_LUA=$(LUA)

DEB_PACKAGES := lua$(LUA_VERSION) liblua$(LUA_VERSION)-dev lua-busted lua-socket luarocks pkg-config gcc make

.PHONY: all test test-c test-spec test-rock demo bench bench-quick bench-deps install clean deps

all: $(MODULE)

$(MODULE): $(SRC) $(HDR)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) -fPIC -shared -I$(LUA_INCDIR) -o $@ $(SRC) $(LDLIBS)

$(TESTUTIL): csrc/test/testutil.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) -fPIC -shared -I$(LUA_INCDIR) -o $@ $<

$(BUILD)/test_wheel: csrc/test/test_wheel.c $(CORE_SRC) $(HDR)
	@mkdir -p $(BUILD)
	$(CC) $(WARN) $(CFLAGS) -o $@ csrc/test/test_wheel.c csrc/wheel.c $(LDLIBS)

# Install missing Debian packages when root; otherwise say what to run.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing Debian packages; run: sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

test: deps
	$(MAKE) test-c test-spec test-rock

test-c: $(BUILD)/test_wheel
	$(BUILD)/test_wheel

test-spec: $(MODULE) $(TESTUTIL)
	$(RUN_ENV) busted --lua=$(LUA) spec

# Install the rock offline into build/rock and run the specs against it alone.
test-rock: $(TESTUTIL)
	rm -rf $(ROCKTREE)
	luarocks --lua-version=$(LUA_VERSION) --tree=$(ROCKTREE) make rockspec/hwtimer-scm-1.rockspec
	rm -rf hwtimer csrc/*.o
	$(ROCK_ENV) $(LUA) -e 'local p = package.searchpath("hwtimer.core", package.cpath); assert(p:find("$(ROCKTREE)", 1, true), p); print("testing the rock at " .. p)'
	$(ROCK_ENV) busted --lua=$(LUA) spec

demo: deps $(MODULE)
	$(RUN_ENV) $(LUA) examples/demo.lua

# Benchmarks: every workload against luv, a Lua heap, Netty and the C core.
BENCH_PACKAGES := lua-luv lua-socket gnuplot-nox default-jdk-headless libnetty-java

$(BUILD)/core_bench: bench/core_bench.c $(CORE_SRC) $(HDR)
	@mkdir -p $(BUILD)
	$(CC) $(WARN) $(CFLAGS) -o $@ bench/core_bench.c $(CORE_SRC) $(LDLIBS)

$(BUILD)/jitter: bench/jitter.c csrc/clock.c csrc/clock.h
	@mkdir -p $(BUILD)
	$(CC) $(WARN) $(CFLAGS) -o $@ bench/jitter.c csrc/clock.c

$(BUILD)/netty/NettyBench.class: bench/netty/NettyBench.java
	@mkdir -p $(BUILD)/netty
	-javac -d $(BUILD)/netty -cp /usr/share/java/netty-common.jar $<

bench-deps:
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(DEB_PACKAGES) $(BENCH_PACKAGES)"

BENCH_BUILD := $(MODULE) $(BUILD)/core_bench $(BUILD)/jitter $(BUILD)/netty/NettyBench.class

bench: bench-deps $(BENCH_BUILD)
	$(RUN_ENV) $(LUA) bench/bench.lua 3 1

bench-quick: bench-deps $(BENCH_BUILD)
	$(RUN_ENV) $(LUA) bench/bench.lua 1 0.1

install: $(MODULE)
	install -d $(DESTDIR)$(LUA_LIBDIR)/hwtimer $(DESTDIR)$(LUA_SHAREDIR)
	install -m 755 $(MODULE) $(DESTDIR)$(LUA_LIBDIR)/hwtimer/core.so
	install -m 644 lua/hwtimer.lua $(DESTDIR)$(LUA_SHAREDIR)/hwtimer.lua

clean:
	rm -rf $(BUILD)
