#!/usr/bin/env python3
"""Compiles the C++ examples of README.md and docs/*.md with -Wall -Wextra -Werror.

Which fenced blocks are compiled (the rule, also stated in docs/guide.md):
  - a ```cpp block that is a complete program: it has an #include line and defines main();
  - a block whose fence reads ```cpp compile: a whole translation unit without main().
Every other ```cpp block is a fragment for reading (it may use names defined elsewhere or
elide code with "...") and is not compiled.

Each compiled block is checked with -fsyntax-only (templates are instantiated, nothing is
linked) against tern's public headers, so a doc example that stops compiling, or that warns
under the flags a user may build with, fails this test with the file and line of its fence.

  check_doc_examples.py --root SRC --compiler CXX [--flag F]...   check the tree's docs
  check_doc_examples.py --self-test --compiler CXX --root SRC    check that breakage is caught
"""

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^\s*```\s*(\S*)\s*(.*?)\s*$")
WARNING_FLAGS = ["-std=c++23", "-Wall", "-Wextra", "-Werror"]


def blocks(path):
    """Yields (fence line number, info words, code) for every fenced block of a Markdown file."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m and m.group(1):
            start, lang, words = i + 1, m.group(1), m.group(2).split()
            i += 1
            body = []
            while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
                body.append(lines[i])
                i += 1
            yield start, [lang] + words, "\n".join(body) + "\n"
        i += 1


def compiled(info, code):
    """Whether a block is compiled under the rule above."""
    if info[0] not in ("cpp", "c++"):
        return False
    if "compile" in info[1:]:
        return True
    return re.search(r"^\s*#include\s", code, re.M) is not None and re.search(
        r"\bint\s+main\s*\(", code) is not None


def examples(root):
    """The compiled blocks of README.md and docs/*.md as (label, code)."""
    files = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    files += sorted(os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))
    for path in files:
        for line, info, code in blocks(path):
            if compiled(info, code):
                yield f"{os.path.relpath(path, root)}:{line}", code


def check(label, code, compiler, flags, work):
    """Compiles one block; returns None or the failure text."""
    unit = os.path.join(work, re.sub(r"[^A-Za-z0-9]", "_", label) + ".cc")
    with open(unit, "w", encoding="utf-8") as f:
        path, line = label.rsplit(":", 1)
        f.write(f'#line {int(line) + 1} "{path}"\n')  # errors name the doc's own lines
        f.write(code)
    cmd = [compiler, *WARNING_FLAGS, "-fsyntax-only", *flags, unit]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode == 0:
        return None
    return f"{label}: the example does not compile ({' '.join(cmd)}):\n{run.stderr}"


def check_all(items, compiler, flags):
    """Compiles every item two at a time; returns the failures."""
    with tempfile.TemporaryDirectory(prefix="tern-doc-examples-") as work:
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(check, label, code, compiler, flags, work)
                       for label, code in items]
            return [f.result() for f in futures if f.result() is not None]


def self_test(root, compiler, flags):
    """The rule picks the right blocks, and a warning or an error in one fails the check."""
    with tempfile.TemporaryDirectory(prefix="tern-doc-examples-self-") as work:
        doc = os.path.join(work, "doc.md")
        with open(doc, "w", encoding="utf-8") as f:
            f.write("```cpp\nint x = undefined_name;\n```\n"  # a fragment: skipped
                    "```cpp compile\n#include <tern/fiber/runtime.h>\n"
                    "inline int unused() { int y; return 0; }\n```\n"  # -Wunused-variable
                    "```cpp\n#include <tern/fiber/runtime.h>\n"
                    "int main() { tern::Runtime r({.workers = 1}); return r.run([] { return 0; }); }"
                    "\n```\n")
        found = [(f"doc.md:{line}", code) for line, info, code in blocks(doc)
                 if compiled(info, code)]
        if [label for label, _ in found] != ["doc.md:4", "doc.md:8"]:
            return [f"self-test: the rule picked {[label for label, _ in found]}"]
        failures = check_all(found, compiler, flags)
        if len(failures) != 1 or not failures[0].startswith("doc.md:4:"):
            return ["self-test: expected exactly doc.md:4 to fail, got:\n" + "\n".join(failures)]
        return []


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", required=True, help="the source tree (README.md, docs/)")
    parser.add_argument("--compiler", required=True)
    parser.add_argument("--flag", action="append", default=[],
                        help="another compiler flag (include directories, definitions)")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    flags = ["-I" + os.path.join(args.root, "include"), *args.flag]
    if args.self_test:
        failures = self_test(args.root, args.compiler, flags)
    else:
        items = list(examples(args.root))
        if not items:
            print("no compilable example found in README.md or docs/*.md", file=sys.stderr)
            return 1
        failures = check_all(items, args.compiler, flags)
        if not failures:
            print(f"{len(items)} examples compile: " + ", ".join(label for label, _ in items))
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
