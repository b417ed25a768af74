#!/usr/bin/env python3
"""The process boundary, checked on the tree: which top-level folder may use which.

  common/  -> common/                      (contracts and libraries both processes use)
  worker/  -> common/, worker/             (mobius-worker: the compute engine)
  host/    -> common/, host/               (the node side both mobiusd and the CLI run: topology,
                                            planner, admission decisions, launch, spec -> run)
  server/  -> common/, host/, server/      (mobiusd's own: job service, store, rpc, metrics)
  client/  -> common/, host/, client/      (mobius: the CLI; `mobius run` and `plan` link the
                                            daemon's planning and launch code, never the engine)

Two views of the same rule, so neither an include nor a link can cross unnoticed:
  1. every #include "TOP/..." in a .h/.cc/.cu/.cuh file under those folders;
  2. every mobius::NAME in a mobius_cc_library/binary's DEPS or PUBLIC_DEPS, against the folder of
     the CMakeLists.txt that declares NAME.
Tests, benchmarks and generated protobuf code are outside the rule.

And one default, written once: "microbatch 0 means the whole batch" is the two
EffectiveMicrobatch() definitions (common/jobspec/spec.h, common/run/trainer_options.h); any other
`microbatch == 0 ? ...` / `microbatch > 0 ? ... : ...` in those folders is reported.

Usage: layering_test.py SOURCE_DIR      (exit 0 when clean, 1 listing every violation)
       layering_test.py --self-test     (the checker finds planted violations in a scratch tree)
"""
import os
import re
import sys
import tempfile

ALLOWED = {
    "common": {"common"},
    "worker": {"common", "worker"},
    "host": {"common", "host"},
    "server": {"common", "host", "server"},
    "client": {"common", "host", "client"},
}
TOPS = set(ALLOWED) | {"test", "bench", "proto"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)
DECL = re.compile(r'mobius_cc_(?:library|binary)\(\s*NAME\s+([A-Za-z0-9_-]+)(.*?)\)\s*$',
                  re.S | re.M)
DEP = re.compile(r'mobius::([A-Za-z0-9_]+)')
SOURCE_EXT = (".h", ".cc", ".cu", ".cuh")


def top_of(root, path):
    return os.path.relpath(path, root).split(os.sep)[0]


def source_files(root):
    """(top folder, path relative to root, text) of every source file under the ruled folders."""
    for top in ALLOWED:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if name.endswith(SOURCE_EXT):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8", errors="replace") as f:
                        yield top, os.path.relpath(path, root), f.read()


def include_violations(root):
    out = []
    for top, rel, text in source_files(root):
        for m in INCLUDE.finditer(text):
            target = m.group(1)
            if target in TOPS and target not in ALLOWED[top]:
                line = text.count("\n", 0, m.start()) + 1
                out.append("%s:%d: %s/ includes %s" % (
                    rel, line, top, m.group(0).strip().split(None, 1)[1]))
    return out


def cmake_files(root):
    for top in ALLOWED:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            if "CMakeLists.txt" in files:
                yield os.path.join(dirpath, "CMakeLists.txt")


def link_violations(root):
    decls = []  # (top, file, name, body)
    folder_of = {}
    for path in cmake_files(root):
        with open(path, encoding="utf-8") as f:
            text = re.sub(r"#[^\n]*", "", f.read())
        top = top_of(root, path)
        for m in DECL.finditer(text):
            decls.append((top, path, m.group(1), m.group(2)))
            folder_of[m.group(1)] = top
    out = []
    for top, path, name, body in decls:
        for dep in DEP.findall(body):
            dep_top = folder_of.get(dep)
            if dep_top is not None and dep_top not in ALLOWED[top]:
                out.append("%s: %s (%s/) links mobius::%s (%s/)" % (
                    os.path.relpath(path, root), name, top, dep, dep_top))
    return out


# A microbatch default: a conditional on a microbatch against 0 that picks a value.
MICROBATCH_DEFAULT = re.compile(r"microbatch\s*(?:==|!=|>|<=)\s*0\s*\?")
DEFAULT_HOMES = {os.path.join("common", "jobspec", "spec.h"),
                 os.path.join("common", "run", "trainer_options.h")}


def default_violations(root):
    out = []
    for _, rel, text in source_files(root):
        if rel in DEFAULT_HOMES:
            continue
        for m in MICROBATCH_DEFAULT.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            out.append("%s:%d: the microbatch default written again (use "
                       "EffectiveMicrobatch())" % (rel, line))
    return out


def check(root):
    return include_violations(root) + link_violations(root) + default_violations(root)


def self_test():
    with tempfile.TemporaryDirectory() as root:
        def write(rel, text):
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        write("common/a/a.h", '#include "common/b.h"\n#include "absl/status/status.h"\n')
        write("worker/w.cc", '#include "common/a/a.h"\n#include "host/planner/plan.h"\n')
        write("server/s.h", '#include "worker/runtime/x.h"\n')
        write("client/c.cc", '#include "host/h.h"\n#include "server/s.h"\n')
        write("host/h.h", '#include "common/a/a.h"\n#include "server/s.h"\n')
        write("common/c.cc", '#  include "client/c.h"\n')
        write("server/mb.cc", "int64_t mb = spec.microbatch > 0 ? spec.microbatch : batch;\n")
        write("common/jobspec/spec.h", "return microbatch == 0 ? global_batch : microbatch;\n")
        write("server/CMakeLists.txt",
              "mobius_cc_library(NAME srv SRCS s.cc\n  DEPS mobius::eng mobius::lib)\n")
        write("worker/CMakeLists.txt", "mobius_cc_library(NAME eng SRCS w.cc DEPS mobius::lib)\n")
        write("common/CMakeLists.txt", "# mobius_cc_library(NAME commented DEPS mobius::eng)\n"
              "mobius_cc_library(NAME lib SRCS c.cc)\n")
        found = check(root)
        expected = ["worker/w.cc:2", "server/s.h:1", "client/c.cc:2", "host/h.h:2", "common/c.cc:1",
                    "srv (server/) links mobius::eng (worker/)", "server/mb.cc:1"]
        missing = [e for e in expected if not any(e in v for v in found)]
        if missing or len(found) != len(expected):
            print("self-test: expected %s\nfound %s" % (expected, found))
            return 1
    print("self-test: %d planted violations found, nothing else" % len(expected))
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    violations = check(sys.argv[1])
    for v in violations:
        print(v)
    if violations:
        print("%d layering violation(s); the rules are at the top of %s" % (
            len(violations), os.path.relpath(__file__, sys.argv[1])))
        return 1
    print("layering: common -> common; worker -> common; host -> common; server -> common, "
          "host; client -> common, host: clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
