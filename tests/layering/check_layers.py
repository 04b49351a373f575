#!/usr/bin/env python3
"""Checks tern's layering (docs/architecture.md) over the source tree.

Rules:
  1. A public header include/tern/<L>/... and a source src/<L>/... include public headers
     <tern/<M>/...> only of L itself and of the layers L builds on.
  2. A source of src/<L>/ includes private headers only of its own layer: never
     "../<M>/..." or "<M>/..." for another layer M.
  3. tools/, examples/ and bench/ include no private header of src/.
  4. A source of src/ (but src/hook/, which defines them) calls none of the libc functions
     tern::hook replaces by name (::read, ::close, ::epoll_wait, ...): it calls them through
     tern::detail::sys (tern/base/detail/sys_calls.h), so tern's own I/O never goes through the
     hooks when a program links them.

Prints one line per broken rule (file:line, the include, and the arrow it breaks) and exits 1;
exits 0 and prints a summary when the tree keeps every rule.

  check_layers.py [ROOT]     check the tree at ROOT (default: this script's repository)
  check_layers.py --self-test  plant violations in a scratch tree and check they are all found
"""

import re
import sys
import tempfile
from pathlib import Path

# Each layer and the layers it may use (directly or through the ones it lists).
LAYERS = {
    "base": set(),
    "prof": {"base"},
    "log": {"prof", "base"},
    "fiber": {"log", "prof", "base"},
    "io": {"fiber", "log", "prof", "base"},
    "net": {"io", "fiber", "log", "prof", "base"},
    "hook": {"io", "fiber", "log", "prof", "base"},
    "admin": {"tls", "net", "io", "fiber", "log", "prof", "base"},
    "rpc": {"tls", "net", "io", "fiber", "log", "prof", "base"},
    "tls": {"net", "io", "fiber", "log", "prof", "base"},
}

# A call by name of a function tern::hook replaces: `::read(` and the like, not `x.read(`.
HOOKED_CALL = re.compile(
    r"(?<![\w.>])::(socket|connect|accept4?|read|write|readv|writev|recv|recvfrom|recvmsg|send|"
    r"sendto|sendmsg|poll|ppoll|select|close|dup[23]?|fcntl|ioctl|setsockopt|sleep|usleep|"
    r"nanosleep|getaddrinfo|gethostbyname(?:_r)?|epoll_wait|epoll_pwait)\s*\(")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
SOURCE_SUFFIXES = {".h", ".hpp", ".cc", ".cpp", ".c", ".S"}
TOP_LEVEL_TREES = ("tools", "examples", "bench")


def includes(path):
    """Yields (line number, delimiter, included path) for every #include of a file."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise SystemExit(f"check_layers: cannot read {path}: {error}")
    for number, line in enumerate(text.splitlines(), 1):
        match = INCLUDE.match(line)
        if match:
            yield number, match.group(1), match.group(2)


def source_files(tree):
    if not tree.is_dir():
        return
    for path in sorted(tree.rglob("*")):
        if path.is_file() and path.suffix in SOURCE_SUFFIXES:
            yield path


def public_layer(included):
    """The layer of <tern/<layer>/...>, or None for any other include."""
    parts = included.split("/")
    if len(parts) >= 3 and parts[0] == "tern":
        return parts[1]
    return None


def check_layer_file(root, path, layer, problems):
    allowed = LAYERS[layer] | {layer}
    relative = path.relative_to(root)
    for number, delimiter, included in includes(path):
        target = public_layer(included)
        if target is not None:
            if target not in LAYERS:
                problems.append(f"{relative}:{number}: #include {included}: no layer '{target}'")
            elif target not in allowed:
                problems.append(
                    f"{relative}:{number}: #include {included}: layer {layer} may not use "
                    f"layer {target} ({layer} builds on: {', '.join(sorted(LAYERS[layer])) or 'nothing'})")
            continue
        if delimiter != '"':
            continue
        # A private header: resolved next to the file, or from src/ (the tests' include path).
        beside = (path.parent / included).resolve()
        candidates = [beside, (root / "src" / included).resolve()]
        for candidate in candidates:
            try:
                private = candidate.relative_to((root / "src").resolve())
            except ValueError:
                continue
            if not candidate.is_file():
                continue
            owner = private.parts[0]
            if owner in LAYERS and owner != layer:
                problems.append(
                    f"{relative}:{number}: #include \"{included}\": layer {layer} reaches into "
                    f"the private headers of layer {owner} (src/{private})")
            break


def check_direct_calls(root, path, problems):
    relative = path.relative_to(root)
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            code = line.split("//", 1)[0]
            for m in HOOKED_CALL.finditer(code):
                problems.append(
                    f"{relative}:{number}: calls ::{m.group(1)} by name: tern's own code calls "
                    f"tern::detail::sys.{m.group(1)} (tern/base/detail/sys_calls.h), which "
                    "tern::hook cannot replace")


def check_top_level_file(root, path, problems):
    relative = path.relative_to(root)
    src = (root / "src").resolve()
    for number, delimiter, included in includes(path):
        if delimiter != '"' or public_layer(included) is not None:
            continue
        beside = (path.parent / included).resolve()
        if beside.is_file() and not beside.is_relative_to(src):
            continue
        if beside.is_file() or (src / included).is_file() or "src/" in included:
            problems.append(
                f"{relative}:{number}: #include \"{included}\": {relative.parts[0]}/ may use only "
                f"tern's public headers, not the private headers of src/")


def check(root):
    root = Path(root).resolve()
    problems = []
    checked = 0
    for layer in LAYERS:
        for tree in (root / "include" / "tern" / layer, root / "src" / layer):
            for path in source_files(tree):
                check_layer_file(root, path, layer, problems)
                if layer != "hook" and tree.parts[-2] == "src":
                    check_direct_calls(root, path, problems)
                checked += 1
    for layer_dir in (root / "include" / "tern").iterdir():
        if layer_dir.is_dir() and layer_dir.name not in LAYERS:
            problems.append(f"include/tern/{layer_dir.name}: a folder that is no layer of "
                            "check_layers.py's LAYERS")
    for name in TOP_LEVEL_TREES:
        for path in source_files(root / name):
            check_top_level_file(root, path, problems)
            checked += 1
    return checked, problems


def self_test():
    """Plants one violation of each rule in a scratch tree and expects each to be reported."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)

        def write(relative, text):
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

        write("include/tern/fiber/fiber.h", '#include "tern/base/result.h"\n')
        write("include/tern/net/socket.h", "#include <tern/fiber/fiber.h>\n")
        write("src/fiber/scheduler.h", "#pragma once\n")
        write("src/fiber/bad.cc", '#include "tern/net/socket.h"\n')  # rule 1: upward
        write("src/io/bad.cc", '#include "../fiber/scheduler.h"\n')  # rule 2: private of another
        write("include/tern/base/bad.h", "#include <tern/rpc/server.h>\n")  # rule 1: upward
        write("tools/tool/main.cc", '#include "fiber/scheduler.h"\n#include "own.h"\n')  # rule 3
        write("tools/tool/own.h", "#pragma once\n")
        write("src/net/good.cc", '#include "tern/fiber/fiber.h"\n#include "good.h"\n')
        write("src/net/good.h", "#pragma once\n")
        write("src/net/calls.cc", "void f(int fd) {\n  stream.read(fd);\n  ::close(fd);\n}\n")  # 4
        write("src/hook/close.cc", "int close(int fd) { return ::close(fd); }\n")
        _, problems = check(root)
        expected = ["src/fiber/bad.cc:1", "src/io/bad.cc:1", "include/tern/base/bad.h:1",
                    "tools/tool/main.cc:1", "src/net/calls.cc:3"]
        missing = [e for e in expected if not any(p.startswith(e) for p in problems)]
        unexpected = [p for p in problems if not any(p.startswith(e) for e in expected)]
        if missing or unexpected:
            print("check_layers self-test failed")
            for m in missing:
                print(f"  not reported: {m}")
            for u in unexpected:
                print(f"  reported wrongly: {u}")
            return 1
        print(f"check_layers self-test: all {len(expected)} planted violations reported, "
              "nothing else")
        return 0


def main(argv):
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[2]
    checked, problems = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_layers: {len(problems)} include(s) break tern's layering "
              "(docs/architecture.md)")
        return 1
    print(f"check_layers: {checked} files keep tern's layering")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
