# vdsmd - one non-recursive Makefile.
#
#   make            build build/vdsmd and build/vdsm-client
#   make run        install missing packages, build, run vdsmd in the foreground
#   make check      install missing packages, build with -Werror, run every test,
#                   then the unit tests again under ASan+UBSan, then a short fuzz pass
#   make memcheck   the integration suite against an ASan+LSan vdsmd (CI runs it)
#   make tsan       unit tests + part of the integration suite under ThreadSanitizer (CI)
#   make bench      benchmarks (codec, end-to-end load, events, pool)
#   make fuzz       every libFuzzer target for FUZZ_SECONDS each (default 60)
#   make install    PREFIX=/usr/local DESTDIR= (SYSTEMDUNITDIR= for the unit)
#   make deps       install the Debian packages (apt-get, as root)
#   make deb        Debian 12 packages from this tree into build/deb/, lintian
#   make package-test  install them into a fresh debootstrap root, run, purge
#
# Sources are found by wildcard: a new .c file in a module directory is built
# without touching this file.  Each tests/unit/test_*.c is one Check program,
# each tests/fuzz/fuzz_*.c one libFuzzer target, each bench/*.c one program.

PREFIX ?= /usr/local
DESTDIR ?=
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
BUILD ?= build
PYTHON ?= /usr/bin/python3
FUZZ_SECONDS ?= 60
SANFLAGS ?=
OPT ?= -O2

CC = gcc
FUZZ_CC = clang
PKG_CONFIG ?= pkg-config

WITH_MSGPACK := $(shell $(PKG_CONFIG) --exists msgpack 2>/dev/null && echo 1)
PKGS := yajl openssl libvirt libnl-3.0 libnl-route-3.0 libnbd $(if $(WITH_MSGPACK),msgpack)

WARN := -Wall -Wextra -Wstrict-prototypes -Wmissing-prototypes -Wwrite-strings \
	-Wshadow -Wno-unused-parameter -Werror
VERSION := 0.1.0
DEFS := -D_GNU_SOURCE -DVDSMD_VERSION='"$(VERSION)"' $(if $(WITH_MSGPACK),-DWITH_MSGPACK=1)
PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS))
PKG_LIBS = $(shell $(PKG_CONFIG) --libs $(PKGS)) -lev -lpthread -lm
CHECK_LIBS = $(shell $(PKG_CONFIG) --libs check)
CFLAGS ?= $(OPT) -g
# EXTRA_DEFS: -DVD_TEST_HOOKS=1 in the test-only builds (asan, tsan, hooks):
# the sampler hook, slowed preallocation and VDSMD_VIRT_NO_CACHE exist only
# there, never in build/vdsmd.  One BUILD dir is always built with one set.
EXTRA_DEFS ?=
TEST_HOOKS := -DVD_TEST_HOOKS=1
ALL_CFLAGS = -std=c11 $(CPPFLAGS) $(CFLAGS) $(SANFLAGS) $(WARN) $(DEFS) $(EXTRA_DEFS) -I. $(PKG_CFLAGS) -MMD -MP
LDFLAGS ?=
ALL_LDFLAGS = $(LDFLAGS) $(SANFLAGS)

# --- sources ---------------------------------------------------------------
MSGPACK_SRCS := $(wildcard codecs/msgpack*.c)
CORE_SRCS := $(wildcard common/*.c) $(wildcard io/*.c) \
	$(filter-out $(MSGPACK_SRCS),$(wildcard codecs/*.c)) \
	$(if $(WITH_MSGPACK),$(MSGPACK_SRCS)) \
	$(wildcard stomp/*.c) $(wildcard rpc/*.c)
DAEMON_SRCS := $(filter-out vdsmd/main.c,$(wildcard vdsmd/*.c vdsmd/*/*.c))
CLIENT_SRCS := $(wildcard client/*.c)
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_HELPER_SRCS := $(filter-out $(UNIT_SRCS),$(wildcard tests/unit/*.c))
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
BENCH_SRCS := $(wildcard bench/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

# The API schema (api/*.yaml, api/README.md) is turned by api/gen.py into the
# C declaration tables (compiled into libvdcore) and a JSON form the
# integration tests validate every response against.
API_YAML := $(sort $(wildcard api/*.yaml api/vdsm/*.yaml))
GEN_DIR := $(BUILD)/gen
GEN_C := $(GEN_DIR)/api_schema.c
GEN_JSON := $(GEN_DIR)/api.json
GEN_OBJ := $(BUILD)/obj/gen/api_schema.o

CORE_LIB := $(BUILD)/libvdcore.a
DAEMON_LIB := $(BUILD)/libvdsmd.a
VDSMD := $(BUILD)/vdsmd
CLIENT := $(BUILD)/vdsm-client
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRCS))
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRCS))

.PHONY: all run check unit integration asan-unit tsan bench fuzz fuzz-build memcheck \
	install clean deps ensure-deps ensure-run-deps tests bench-build deb package-test
.DEFAULT_GOAL := all
# keep intermediate objects (chained pattern rules) and drop half-written targets
.SECONDARY:
.DELETE_ON_ERROR:

all: $(VDSMD) $(CLIENT) $(GEN_JSON)

# vdsm-client's bash completion, generated from the compiled-in verb schema
# (installed by `make install` when present).
all: $(BUILD)/vdsm-client.bash
$(BUILD)/vdsm-client.bash: $(CLIENT)
	$(CLIENT) --bash-completion > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(GEN_C) $(GEN_JSON) &: $(API_YAML) api/gen.py
	@mkdir -p $(GEN_DIR)
	$(PYTHON) api/gen.py --c $(GEN_C) --json $(GEN_JSON)

# docs/api.md and the VERBS section of man/vdsm-client.1 (between its
# marker comments) are generated too, but committed (reviewed with the
# schema); test_api_schema.py fails when either is stale.
.PHONY: api-docs
api-docs docs/api.md: $(API_YAML) api/gen.py
	$(PYTHON) api/gen.py --md docs/api.md --man man/vdsm-client.1

$(GEN_OBJ): $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(CORE_LIB): $(call obj,$(CORE_SRCS)) $(GEN_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(DAEMON_LIB): $(call obj,$(DAEMON_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(VDSMD): $(call obj,vdsmd/main.c) $(DAEMON_LIB) $(CORE_LIB)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(CLIENT): $(call obj,$(CLIENT_SRCS)) $(CORE_LIB)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/tests/%: $(call obj,tests/unit/%.c) $(call obj,$(UNIT_HELPER_SRCS)) $(DAEMON_LIB) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) $(CHECK_LIBS)

$(BUILD)/bench/%: $(call obj,bench/%.c) $(DAEMON_LIB) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

tests: all $(UNIT_BINS)
bench-build: all $(BENCH_BINS)

# --- running ---------------------------------------------------------------
ensure-deps:
	@scripts/deps.sh ensure all

# only what building and running needs (scripts/deps.sh's "run" set)
ensure-run-deps:
	@scripts/deps.sh ensure run

deps:
	scripts/deps.sh install

# The embedded development setup: plaintext on 127.0.0.1:54321, the libvirt
# test-driver fleet of examples/, storage and network state under build/run.
run: ensure-run-deps
	@$(MAKE) --no-print-directory all
	@mkdir -p $(BUILD)/run/storage $(BUILD)/run/netconf
	./$(VDSMD) --config examples/vdsmd-dev.conf \
		--libvirt-uri test://$(CURDIR)/examples/fleet.xml \
		--storage-root $(CURDIR)/$(BUILD)/run/storage \
		--net-state-dir $(CURDIR)/$(BUILD)/run/netconf

unit: tests
	@BUILD=$(BUILD) tests/run-unit.sh $(UNIT_BINS)

integration: tests
	@BUILD=$(BUILD) PYTHON=$(PYTHON) tests/run-integration.sh

# Unit tests once more with AddressSanitizer + UBSan (leaks and UB fail),
# in a test build (EXTRA_DEFS=$(TEST_HOOKS)): the hook-driven tests run here.
ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
asan-unit:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/asan OPT=-O1 \
		SANFLAGS="$(ASAN_FLAGS)" EXTRA_DEFS="$(TEST_HOOKS)" unit

# ThreadSanitizer (tests/tsan.sh): the unit tests and a representative
# part of the integration suite against a TSan vdsmd, in a test build
# (EXTRA_DEFS=$(TEST_HOOKS)); any report fails.  Suppressions, for libvirt
# and GLib only, with reasons: tests/tsan-suppressions.txt.  .ci/run runs it.
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer
tsan: ensure-deps
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/tsan OPT=-O1 \
		SANFLAGS="$(TSAN_FLAGS)" EXTRA_DEFS="$(TEST_HOOKS)" tests
	@BUILD=$(BUILD)/tsan PYTHON=$(PYTHON) tests/tsan.sh $(patsubst $(BUILD)/%,$(BUILD)/tsan/%,$(UNIT_BINS))

check: ensure-deps
	@rm -rf $(BUILD)/results $(BUILD)/asan/results
	@$(MAKE) --no-print-directory tests
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory integration
	@$(MAKE) --no-print-directory asan-unit
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(or $(CHECK_FUZZ_SECONDS),5)
	@tests/summary.sh $(BUILD)

# The integration suite once more against an ASan+LSan+UBSan vdsmd (the
# objects of asan-unit): a sanitizer report in the daemon's stderr, or a
# non-zero exit after SIGTERM (LeakSanitizer's leak report), fails it.
# .ci/run runs it after `make check`.
memcheck: ensure-deps
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/asan OPT=-O1 \
		SANFLAGS="$(ASAN_FLAGS)" EXTRA_DEFS="$(TEST_HOOKS)" all
	@BUILD=$(BUILD)/asan PYTHON=$(PYTHON) tests/memcheck.sh

bench: ensure-deps
	@$(MAKE) --no-print-directory bench-build
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/hooks EXTRA_DEFS="$(TEST_HOOKS)" all
	@BUILD=$(BUILD) PYTHON=$(PYTHON) bench/run.sh

# Fleet benchmark (issue 9): a private RabbitMQ, N vdsmd in broker mode,
# the engine-side driver bench/fleet.c, broker vs direct (bench/fleet.py).
# FLEET_ARGS e.g. "--sizes 1,10 --duration 5".
.PHONY: bench-fleet
bench-fleet: ensure-deps
	@$(MAKE) --no-print-directory bench-build
	@mkdir -p $(BUILD)/results
	@BUILD=$(BUILD) $(PYTHON) bench/fleet.py --json $(BUILD)/results/bench-fleet.jsonl $(FLEET_ARGS)

# --- fuzzing (clang libFuzzer, ASan + UBSan) -----------------------------
FUZZ_CFLAGS = -std=c11 -g -O1 -fsanitize=fuzzer-no-link,address,undefined \
	-fno-sanitize-recover=all $(DEFS) -DVD_FUZZING=1 -I. $(PKG_CFLAGS) -MMD -MP \
	-Wall -Wno-unused-parameter
FUZZ_CORE_OBJS = $(patsubst %.c,$(BUILD)/fuzz-obj/%.o,$(CORE_SRCS) $(DAEMON_SRCS)) \
	$(BUILD)/fuzz-obj/gen/api_schema.o

$(BUILD)/fuzz-obj/gen/api_schema.o: $(GEN_C)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(BUILD)/fuzz-obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(BUILD)/fuzz/%: $(BUILD)/fuzz-obj/tests/fuzz/%.o $(FUZZ_CORE_OBJS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ $(PKG_LIBS)

fuzz-build: $(FUZZ_BINS)

fuzz: fuzz-build
	@BUILD=$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) tests/run-fuzz.sh $(FUZZ_BINS)

# --- install ---------------------------------------------------------------
install: all
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/bin \
		$(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0755 $(VDSMD) $(DESTDIR)$(PREFIX)/sbin/vdsmd
	install -m 0755 $(CLIENT) $(DESTDIR)$(PREFIX)/bin/vdsm-client
	for m in man/*.1; do [ -f "$$m" ] && install -m 0644 $$m $(DESTDIR)$(PREFIX)/share/man/man1/; done; true
	for m in man/*.8; do [ -f "$$m" ] && install -m 0644 $$m $(DESTDIR)$(PREFIX)/share/man/man8/; done; true
	if [ -f $(BUILD)/vdsm-client.bash ]; then install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions && \
		install -m 0644 $(BUILD)/vdsm-client.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/vdsm-client; fi
	install -m 0755 tools/vdsm-tool $(DESTDIR)$(PREFIX)/bin/vdsm-tool
	# the unit, its paths pointed at PREFIX (examples/ has /usr/local)
	install -d $(DESTDIR)$(SYSTEMDUNITDIR)
	sed -e 's|/usr/local/|$(PREFIX)/|g' -e '/^# Install as\|^#   systemctl daemon-reload/d' \
		examples/vdsmd.service > $(DESTDIR)$(SYSTEMDUNITDIR)/vdsmd.service
	chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/vdsmd.service

# --- Debian packages (debian/, debhelper) ------------------------------------
# `make deb` copies the tree's files (git's tracked and untracked-but-not-
# ignored ones; build/ never) to $(DEB_DIR)/vdsmd-$(VERSION) and runs
# dpkg-buildpackage there: the .debs land in $(DEB_DIR), lintian must report
# no error.  Needs no network once the "deb" package set is installed.
DEB_DIR := $(BUILD)/deb
DEB_SRC := $(DEB_DIR)/vdsmd-$(VERSION)
DEB_BUILD_OPTIONS ?= parallel=2
# the package build runs without a network where it can (root: a private,
# empty network namespace), so a download in it fails instead of passing
DEB_NONET := $(shell unshare -n true 2>/dev/null && echo unshare -n)
deb:
	@scripts/deps.sh ensure deb
	rm -rf $(DEB_DIR) && mkdir -p $(DEB_SRC)
	if git rev-parse --git-dir >/dev/null 2>&1; then \
		git ls-files -z --cached --others --exclude-standard | \
			xargs -0 sh -c 'for f; do [ -e "$$f" ] && printf "%s\0" "$$f"; done; true' sh | \
			tar --null -T - -cf - | tar -xf - -C $(DEB_SRC); \
	else \
		tar --exclude=./$(BUILD) --exclude=./.git -cf - . | tar -xf - -C $(DEB_SRC); \
	fi
	cd $(DEB_SRC) && DEB_BUILD_OPTIONS="$(DEB_BUILD_OPTIONS)" $(DEB_NONET) dpkg-buildpackage -b -us -uc
	lintian --fail-on error $(DEB_DIR)/*.changes
	@ls -l $(DEB_DIR)/*.deb

# The built packages in a fresh Debian 12 root (debootstrap, cached in
# $(BUILD)/debootstrap): install, run the unit's ExecStart (chroot) until the
# packaged vdsm-client answers Host.ping2, purge, check nothing is left; then
# the same under systemd (the root booted in systemd-nspawn): the unit's
# enable, start limit, start, reload, restart, stop, and purge.  Needs root.
# .ci/run runs it after `make check`.
package-test: deb
	BUILD=$(BUILD) tests/package/test-deb.sh $(DEB_DIR)
	BUILD=$(BUILD) tests/package/test-deb-systemd.sh $(DEB_DIR)

clean:
	rm -rf $(BUILD)

# (not below $(DEB_DIR) or the package test's cached Debian root: the package
# build has its own, and etc/logrotate.d, /etc/*.d files are no makefiles)
-include $(shell find $(BUILD) \( -path $(BUILD)/deb -o -path $(BUILD)/debootstrap \) -prune \
	-o -name '*.d' -type f -print 2>/dev/null)

# --- static analysis (cppcheck + clang-tidy; config in .clang-tidy and
# tests/cppcheck-suppressions.txt; tests/lint-deps.py: no call or include
# loops among the files of any production directory (each directory on its
# own; vdsmd/ is its top level), nor through several of them (--tree), from
# nm of the built objects) ----
LINT_DIRS = vdsmd vdsmd/storage vdsmd/virt vdsmd/host vdsmd/net vdsmd/image \
	client common rpc codecs stomp io
.PHONY: lint
lint: ensure-deps all
	@BUILD=$(BUILD) tests/lint-deps.py $(LINT_DIRS)
	@BUILD=$(BUILD) tests/lint-deps.py --tree $(LINT_DIRS)
	@BUILD=$(BUILD) tests/lint.sh
