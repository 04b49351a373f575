"""Facts about this machine and the CPU it spends, for the benchmark suite (stdlib only)."""

import os
import platform
import re
import subprocess
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def usable_cpus():
    """The CPUs this process may run on, sorted."""
    return sorted(os.sched_getaffinity(0))


def cpu_model():
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def cmake_cache(build_dir, key):
    """A value from BUILD_DIR/CMakeCache.txt, or ''."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as cache:
            for line in cache:
                if line.startswith(key + ":"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return ""


def first_line(command):
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=30)
        text = (out.stdout or out.stderr).strip()
        return text.splitlines()[0] if text else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def io_uring_state():
    """'enabled' or why io_uring is not usable, from /proc/sys/kernel/io_uring_disabled."""
    try:
        with open("/proc/sys/kernel/io_uring_disabled") as flag:
            value = flag.read().strip()
        return {"0": "enabled", "1": "restricted to a group", "2": "disabled"}.get(value, value)
    except OSError:
        return "enabled (no io_uring_disabled sysctl)"


def describe(build_dir):
    """The machine, the compiler and build of tern, as a dict for the results file."""
    compiler = cmake_cache(build_dir, "CMAKE_CXX_COMPILER") or "c++"
    return {
        "cpu": cpu_model(),
        "cpus_online": os.cpu_count(),
        "cpus_usable": len(usable_cpus()),
        "kernel": f"{platform.system()} {platform.release()} {platform.machine()}",
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "compiler": first_line([compiler, "--version"]),
        "build_type": cmake_cache(build_dir, "CMAKE_BUILD_TYPE"),
        "tern_prof": cmake_cache(build_dir, "TERN_PROF") or "ON",
        "io_uring": io_uring_state(),
        "tcp_tw_reuse": read_sysctl("net/ipv4/tcp_tw_reuse"),
        "loadavg_before": read_sysctl("loadavg", root="/proc"),
    }


def read_sysctl(name, root="/proc/sys"):
    try:
        with open(os.path.join(root, name)) as value:
            return value.read().strip()
    except OSError:
        return "unknown"


def busy_and_total_ticks():
    """(busy, total) clock ticks over all CPUs since boot, from /proc/stat."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields[:8])  # guest time is already inside user
    return total - idle, total


def process_ticks(pid):
    """utime + stime of a process (and its reaped children), in clock ticks; None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return sum(int(x) for x in fields[11:15])


def wait_until_quiet(max_seconds, idle_fraction=0.9, sample=0.2):
    """Waits (at most max_seconds) until the machine is >= idle_fraction idle over one sample;
    returns a short note on how idle it was."""
    deadline = time.monotonic() + max_seconds
    while True:
        busy0, total0 = busy_and_total_ticks()
        time.sleep(sample)
        busy1, total1 = busy_and_total_ticks()
        idle = 1.0 - (busy1 - busy0) / max(1, total1 - total0)
        if idle >= idle_fraction:
            return f"idle {idle:.0%}"
        if time.monotonic() >= deadline:
            return f"only {idle:.0%} idle after waiting {max_seconds:.0f} s"


def placement(server_threads, client_threads):
    """Where a server and its client run: (server_cpus, client_cpus, sentence). The cpu lists
    are empty when the machine is too small to give each its own cores."""
    cpus = usable_cpus()
    if len(cpus) >= server_threads + client_threads:
        server = cpus[:server_threads]
        client = cpus[server_threads:server_threads + client_threads]
        text = (f"server on CPU {','.join(map(str, server))}, "
                f"client on CPU {','.join(map(str, client))} (taskset)")
        return server, client, text
    return [], [], f"not pinned: server and client share all {len(cpus)} CPUs"


def taskset(cpus, command):
    """The command, prefixed with taskset when cpus is not empty."""
    if not cpus:
        return command
    return ["taskset", "-c", ",".join(map(str, cpus))] + command


def version_of_package(name):
    out = first_line(["dpkg-query", "-W", "-f=${Version}", name])
    return out if re.match(r"^[0-9]", out) else "not installed"
