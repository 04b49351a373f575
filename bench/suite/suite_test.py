#!/usr/bin/env python3
"""Tests of the suite's own logic, with no server or benchmark run: the order of rounds
(tables.in_rounds), the choice of each server's median round (report.median_rounds), the
report's tables built from rounds and the names they give the benchmark reports. Run by ctest (bench_suite_test) or directly:

    python3 -m unittest bench/suite/suite_test.py
"""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import failover  # noqa: E402
import hooks  # noqa: E402
import report  # noqa: E402
import run  # noqa: E402
import servers  # noqa: E402
import tables  # noqa: E402


def pingpong_run(server, mb_per_s, round_number, rounds=3, verified=True, sessions=10):
    return {
        "mode": "pingpong", "target": server, "verified": verified,
        "params": {"block_bytes": 16384, "threads": 1, "sessions": sessions},
        "figures": {"mb_per_s": mb_per_s} if mb_per_s is not None else {},
        "server_cpu_pct": 50.0,
        "suite": {"table": "003", "server": server, "group": f"003 16384 B 1 t {sessions} s",
                  "round": round_number, "rounds": rounds, "placement": "not pinned",
                  "other_cpu_pct": 0.0, "command": f"tern-bench pingpong vs {server}",
                  "problem": None if verified else "exit status 1"},
    }


def sessions_run(server, sessions_per_s, round_number, in_flight=100):
    return {
        "mode": "sessions", "target": server, "verified": True,
        "params": {"in_flight": in_flight, "messages": 3, "size": 8},
        "figures": {"sessions_per_s": sessions_per_s, "mean_us": 100.0, "p99_us": 200.0,
                    "failed": 0},
        "server_cpu_pct": 50.0,
        "suite": {"table": "004", "server": server, "group": f"004 {in_flight} in flight",
                  "round": round_number, "rounds": 1, "placement": "not pinned",
                  "other_cpu_pct": 0.0, "command": f"tern-bench sessions vs {server}",
                  "problem": None},
    }


def redis_run(client, rps, round_number, clients=500):
    return {
        "mode": "redis", "target": client, "verified": True,
        "params": {"clients": clients, "requests": 100, "model": client},
        "figures": {"rps": rps, "set_p50_us": 10.0, "set_p99_us": 20.0, "get_p50_us": 11.0,
                    "get_p99_us": 21.0, "machine_busy_pct": 90.0},
        "server_cpu_pct": 60.0, "client_cpu_pct": 70.0,
        "suite": {"table": "hook-redis", "server": None, "group": f"hook redis {clients} clients",
                  "round": round_number, "rounds": 3, "placement": "not pinned",
                  "other_cpu_pct": 0.0, "command": f"redis {client}", "problem": None},
    }


def failover_run(server, fault, round_number, first_retry_ms, lost=0, verified=True):
    return {
        "mode": "failover", "target": server, "verified": verified,
        "params": {"fault": fault, "concurrency": 48, "non_idempotent": 8, "timeout_s": 1,
                   "fault_after_s": 1, "window_s": 1},
        "figures": {"first_retry_ms": first_retry_ms, "idempotent_lost": lost,
                    "non_idempotent_status": 2 if fault == "kill" else 0, "late_calls": 0,
                    "p99_before_ms": 1.5, "p99_window_ms": 4.0, "calls_per_s_before": 30000.0,
                    "calls_per_s_window": 25000.0},
        "suite": {"table": "failover", "server": server, "group": f"failover {fault}",
                  "round": round_number, "rounds": 3, "placement": "not pinned",
                  "other_cpu_pct": 0.0, "command": f"tern-bench failover vs {server}",
                  "problem": None if verified else "exit status 1: 1 idempotent calls lost"},
    }


def machine():
    return {"stamp": "20260101T000000Z", "cpu": "test CPU", "cpus_usable": 2, "cpus_online": 2,
            "kernel": "Linux", "compiler": "c++", "build_type": "Release", "rounds": 3}


class PerServerCpuSecondTest(unittest.TestCase):
    @staticmethod
    def rpc_run(server, calls, tps, window_cpu_pct, cell_cpu_s, cell_s):
        return {"mode": "rpc", "target": server, "verified": True,
                "params": {"concurrency": 5000},
                "figures": {"calls": calls, "tps": tps},
                "server_cpu_pct": window_cpu_pct,
                "suite": {"table": "001", "server": server, "group": "001 5000 clients",
                          "server_cpu_s_cell": cell_cpu_s, "cell_s": cell_s}}

    def test_rpc_tables_measure_every_server_over_the_whole_cell(self):
        # tern-bench measured tern's server over its timed window only (40%); the suite
        # measured both servers over the whole cell, connecting included.
        tern = self.rpc_run("tern", 30000, 30000.0, 40.0, 1.5, 3.0)
        rpcx = self.rpc_run("rpcx", 30000, 15000.0, None, 1.0, 4.0)
        report.add_per_server_cpu_second([tern, rpcx])
        self.assertAlmostEqual(tern["figures"]["per_server_cpu_s"], 20000.0)
        self.assertAlmostEqual(rpcx["figures"]["per_server_cpu_s"], 30000.0)
        self.assertEqual(report.whole_cell_cpu(tern), (1.5, 50.0))

    def test_a_run_the_suite_did_not_measure_gets_no_figure(self):
        run_without = self.rpc_run("tern", 30000, 30000.0, 40.0, None, None)
        report.add_per_server_cpu_second([run_without])
        self.assertNotIn("per_server_cpu_s", run_without["figures"])

    def test_other_tables_divide_the_rate_by_the_servers_cpu_share(self):
        run_003 = pingpong_run("tern", 100.0, 1)  # 50% CPU
        report.add_per_server_cpu_second([run_003])
        self.assertAlmostEqual(run_003["figures"]["per_server_cpu_s"], 200.0)


class InRoundsTest(unittest.TestCase):
    def test_each_round_of_a_group_starts_one_server_later(self):
        cells = [{"table": "switch", "server": None}] + [
            {"table": "003", "group": "g", "server": s} for s in ("tern", "asio", "go")] + [
            {"table": "003", "group": "h", "server": s} for s in ("tern", "asio")]
        ordered = tables.in_rounds(cells, 3)
        self.assertEqual([(c["server"], c["round"]) for c in ordered], [
            (None, 1),
            ("tern", 1), ("asio", 1), ("go", 1),
            ("asio", 2), ("go", 2), ("tern", 2),
            ("go", 3), ("tern", 3), ("asio", 3),
            ("tern", 1), ("asio", 1),
            ("asio", 2), ("tern", 2),
            ("tern", 3), ("asio", 3)])
        self.assertEqual(ordered[0]["rounds"], 1)
        self.assertTrue(all(c["rounds"] == 3 for c in ordered[1:]))

    def test_one_round_keeps_the_order_of_the_cells(self):
        cells = [{"table": "001", "group": "g", "server": s} for s in ("tern", "rpcx", "erpc")]
        self.assertEqual([c["server"] for c in tables.in_rounds(cells, 1)],
                         ["tern", "rpcx", "erpc"])

    def test_every_quick_pass_comparison_has_one_cell_per_server(self):
        for cells in (tables.pingpong_cells(3, False), tables.rpc_cells(100, False),
                      tables.sessions_cells(100, False), tables.traffic_cells(3, False)):
            groups = {}
            for cell in cells:
                if cell.get("group"):
                    groups.setdefault(cell["group"], []).append(cell["server"])
            for servers in groups.values():
                self.assertEqual(len(servers), len(set(servers)))


class BudgetTest(unittest.TestCase):
    """The quick pass fits 8 minutes and the full one 45 (three rounds, 2-CPU machine): every
    table has a budget, the budgets add up to no more than the pass, and each table's estimated
    time fits its budget."""

    def test_the_budgets_add_up_to_no_more_than_the_pass(self):
        for full, kind in ((False, "quick"), (True, "full")):
            total = sum(tables.budget_seconds(name, full) for name in tables.TABLES)
            self.assertLessEqual(total, tables.PASS_BUDGET_S[kind])
        self.assertEqual(tables.PASS_BUDGET_S, {"quick": 8 * 60, "full": 45 * 60})

    def test_every_table_fits_its_budget_in_three_rounds(self):
        for full, seconds in ((False, 2.0), (True, 3.0)):
            cells = tables.in_rounds(tables.all_cells(full, seconds), 3)
            estimates = tables.estimated_seconds(cells)
            for name, estimate in estimates.items():
                self.assertLessEqual(estimate, tables.budget_seconds(name, full), (name, full))
            self.assertLessEqual(sum(estimates.values()),
                                 tables.PASS_BUDGET_S["full" if full else "quick"])

    def test_every_table_keeps_its_headline_cells_in_the_quick_pass(self):
        cells = tables.all_cells(False, 2.0)
        present = {c["table"] for c in cells}
        for name in ("switch", "000", "001", "002-ttcp", "002-log", "003", "004", "hook-micro",
                     "hook-redis", "hook-pingpong", "hook-rpc", "tls-pingpong",
                     "tls-handshakes"):
            self.assertIn(name, present)
        sessions = {c["group"] for c in cells if c["table"] == "004"}
        self.assertEqual(sessions, {f"004 {n} in flight" for n in (100, 1000, 10000)})
        self.assertEqual({c["args"][0] for c in cells if c["table"] == "000"}, {"-A", "-S"})

    def test_only_picks_tables_by_the_start_of_their_name(self):
        cells = tables.all_cells(False, 2.0, ["002", "tls"])
        self.assertEqual({c["suite_table"] for c in cells},
                         {"002-ttcp", "002-log", "tls", "tls-rpc"})

    def test_a_cell_without_a_duration_or_an_estimate_is_refused(self):
        self.assertEqual(tables.estimate_seconds({"args": ["--duration", "2.0"]}),
                         2.0 + tables.CELL_OVERHEAD_S)
        with self.assertRaises(ValueError):
            tables.estimate_seconds({"table": "x", "args": ["--total", "5"]})

    def test_each_table_prints_its_time_beside_its_budget(self):
        self.assertEqual(run.budget_lines({"000": 95.4, "003": 90.0}, {"000": 100, "003": 80,
                                                                     "004": 55}),
                         ["table 000: 95 s of its 100 s budget",
                          "table 003: 90 s of its 80 s budget, 10 s OVER"])


class ReportPathTest(unittest.TestCase):
    def test_the_full_pass_writes_its_own_report(self):
        self.assertEqual(run.default_report(False), os.path.join(run.REPO, "bench", "REPORT.md"))
        self.assertEqual(run.default_report(True),
                         os.path.join(run.REPO, "bench", "full", "REPORT.md"))


class QuietWaitTest(unittest.TestCase):
    class Args:
        quiet_wait = 0.3
        quiet_budget = 0.5

    def test_only_the_first_cell_of_a_round_waits_and_the_pass_budget_bounds_the_waits(self):
        suite = run.Suite.__new__(run.Suite)
        suite.args, suite.quiet_waited = self.Args(), 0.0
        waits, clock = [], [0.0]

        def busy_machine(seconds):  # a machine never idle: every wait runs to its limit
            waits.append(seconds)
            clock[0] += seconds
            return "only 50% idle"
        originals = run.machine.wait_until_quiet, run.time.monotonic
        run.machine.wait_until_quiet, run.time.monotonic = busy_machine, lambda: clock[0]
        try:
            cells = tables.in_rounds([{"group": "g", "server": s} for s in ("a", "b", "c")], 3)
            notes = [suite.wait_for_quiet(cell) for cell in cells]
        finally:
            run.machine.wait_until_quiet, run.time.monotonic = originals
        self.assertEqual([c["round_start"] for c in cells],
                         [True, False, False] * 3)
        self.assertEqual(notes[1], "in a round, right after the cell before")
        self.assertEqual(notes[6], "not checked (the pass spent its --quiet-budget)")
        self.assertEqual(waits, [0.3, 0.2])


class PruneTest(unittest.TestCase):
    def write(self, folder, stamp, kind="quick", only=""):
        with open(os.path.join(folder, f"{stamp}.json"), "w") as f:
            json.dump({"machine": {"stamp": stamp, "pass": kind, "only": only}, "runs": []}, f)
        return os.path.join(folder, f"{stamp}.json")

    def test_only_the_latest_quick_and_full_passes_and_later_parts_stay(self):
        with tempfile.TemporaryDirectory() as folder:
            old_quick = self.write(folder, "20260101T000000Z")
            old_part = self.write(folder, "20260101T010000Z", only="tls")
            full = self.write(folder, "20260101T020000Z", "full")
            quick = self.write(folder, "20260102T000000Z")
            part = self.write(folder, "20260102T010000Z", only="003")
            other = os.path.join(folder, "micro-20260101T000000Z-summary.md")
            open(other, "w").close()
            self.assertEqual(sorted(run.results_to_prune(folder, quick)),
                             sorted([old_quick, old_part]))
            newer_full = self.write(folder, "20260103T000000Z", "full")
            self.assertEqual(sorted(run.results_to_prune(folder, newer_full)),
                             sorted([old_quick, old_part, full]))
            self.assertNotIn(part, run.results_to_prune(folder, newer_full))


class IdlePollTest(unittest.TestCase):
    def test_headline_servers_run_at_defaults_and_only_the_variant_polls(self):
        for name in ("tern", "tern-uring", "asio", None):
            self.assertEqual(run.idle_poll_args(name), [])
        self.assertEqual(run.idle_poll_args("tern-idle-poll"), ["--idle-poll", "200us"])

    def test_the_variant_runs_beside_tern_in_one_session_pingpong_and_the_smallest_rpc(self):
        for cells in (tables.pingpong_cells(3, False), tables.rpc_cells(100, False)):
            variant = [c for c in cells if c["server"] in tables.IDLE_POLL_VARIANTS]
            self.assertTrue(variant)
            groups = {c["group"] for c in variant}
            for cell in cells:
                if cell["group"] in groups and cell["server"] == "tern":
                    groups.discard(cell["group"])
            self.assertEqual(groups, set())

    def test_the_variant_is_neither_tern_nor_a_peer(self):
        self.assertEqual(report.tern_and_best_peer(
            {"tern": 100, "tern-idle-poll": 500, "asio": 200}), (100, 200))
        self.assertEqual(report.tern_and_best_peer({"tern-idle-poll": 500}), (None, None))


class PlainEchoTest(unittest.TestCase):
    def test_traffic_runs_tern_in_frame16_and_the_labelled_row_in_plain_echo(self):
        cells = [c for c in tables.traffic_cells(3, False)
                 if c["args"][c["args"].index("-c") + 1] == "1"]
        modes = {(c["group"], c["server"]): c["server_mode"] for c in cells}
        for group in {c["group"] for c in cells}:
            self.assertEqual(modes[(group, "tern")], "frame16")
            self.assertEqual(modes[(group, "tern-plain-echo")], "echo")
        command = servers.Catalog("/nonexistent").command("tern-plain-echo", 1, mode="echo")
        self.assertEqual(command[1:3], ["--io", "epoll"])
        self.assertIn("echo", command)

    def test_the_plain_echo_row_is_no_headline_tern_and_no_peer(self):
        self.assertEqual(report.tern_and_best_peer(
            {"tern": 100, "tern-plain-echo": 500, "tokio": 200}), (100, 200))


class HooksTest(unittest.TestCase):
    def test_redis_benchmark_csv_gives_the_rate_over_both_tests_and_each_tests_latency(self):
        text = ('"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",'
                '"p95_latency_ms","p99_latency_ms","max_latency_ms"\n'
                '"SET","50000.00","0.500","0.100","0.450","0.900","1.200","3.000"\n'
                '"GET","25000.00","0.600","0.100","0.550","1.000","1.500","4.000"\n')
        figures = hooks.parse_redis_benchmark_csv(text, 100_000)
        # 100,000 SETs in 2 s and 100,000 GETs in 4 s: 200,000 requests in 6 s.
        self.assertAlmostEqual(figures["rps"], 200_000 / 6)
        self.assertEqual(figures["set_p50_us"], 450.0)
        self.assertEqual(figures["get_p99_us"], 1500.0)
        self.assertIsNone(hooks.parse_redis_benchmark_csv(text.rsplit("\n", 2)[0], 100_000))

    def test_hook_bench_json_gives_the_extra_cost_of_the_replaced_read(self):
        def bench(name, aggregate, cpu):
            return {"name": f"{name}_{aggregate}", "run_name": name, "aggregate_name": aggregate,
                    "cpu_time": cpu}
        results = {"benchmarks": [
            bench("BM_ReadLibcDirect", "mean", 999), bench("BM_ReadLibcDirect", "median", 300),
            bench("BM_ReadHookedPlainThread", "median", 305),
            bench("BM_ReadLibcDirectInFiber", "median", 290),
            bench("BM_ReadHookedInFiber", "median", 310)]}
        figures = hooks.parse_hook_bench_json(json.dumps(results))
        self.assertEqual(figures["thread_extra_ns"], 5)
        self.assertEqual(figures["fiber_extra_ns"], 20)
        results["benchmarks"][-1]["error_occurred"] = True
        self.assertIsNone(hooks.parse_hook_bench_json(json.dumps(results)))

    def test_the_hooks_table_has_its_parts_and_no_idle_polling(self):
        for full, counts in ((False, (500,)), (True, (50, 500))):
            cells = tables.hook_cells(3, full)
            self.assertEqual({c["table"] for c in cells},
                             {"hook-micro", "hook-redis", "hook-pingpong", "hook-rpc"})
            redis = [(c["clients"], c["client"]) for c in cells if c["table"] == "hook-redis"]
            self.assertEqual(sorted(redis), sorted(
                (n, client) for n in counts
                for client in ("redis-benchmark", "fibers", "threads")))
            for cell in cells:
                self.assertEqual(run.idle_poll_args(cell["server"]), [])

    def test_redis_rows_show_the_fibers_ratios_of_medians_and_of_each_round(self):
        runs = [redis_run("redis-benchmark", 1000, 1), redis_run("fibers", 950, 1),
                redis_run("threads", 500, 1), redis_run("fibers", 1100, 2),
                redis_run("threads", 600, 2), redis_run("redis-benchmark", 1100, 2),
                redis_run("threads", 700, 3), redis_run("redis-benchmark", 900, 3),
                redis_run("fibers", 1000, 3)]
        text = ReportTest.render(self, runs)
        self.assertIn("## Hooks: blocking client libraries in fibers (tern::hook)", text)
        self.assertIn("| 500 | fibers (tern::hook) | 1,000 | 10 | 20 | 11 | 21 | 60 | 70 | 1,429 | "
                      "90 | 1.00× (0.95–1.11) | 1.83× (1.43–1.90) | ≥ 0.9×: met; ≥ 1.5×: met |",
                      text)


class MedianRoundsTest(unittest.TestCase):
    def test_each_server_keeps_its_median_round_with_every_rounds_figure(self):
        runs = [pingpong_run("tern", 900, 1), pingpong_run("asio", 700, 1),
                pingpong_run("asio", 500, 2), pingpong_run("tern", 1200, 2),
                pingpong_run("tern", 1000, 3), pingpong_run("asio", 800, 3)]
        chosen = {r["suite"]["server"]: r for r in report.median_rounds(runs)}
        self.assertEqual(set(chosen), {"tern", "asio"})
        self.assertEqual(chosen["tern"]["figures"]["mb_per_s"], 1000)
        self.assertEqual(chosen["tern"]["suite"]["round"], 3)
        self.assertEqual(chosen["tern"]["suite"]["round_figures"], [900, 1200, 1000])
        self.assertEqual(chosen["asio"]["figures"]["mb_per_s"], 700)

    def test_a_failed_round_is_chosen_over_good_ones(self):
        runs = [pingpong_run("tern", 900, 1), pingpong_run("tern", None, 2, verified=False),
                pingpong_run("tern", 1000, 3)]
        (chosen,) = report.median_rounds(runs)
        self.assertFalse(chosen["verified"])
        self.assertEqual(chosen["suite"]["round"], 2)

    def test_handshake_cpu_per_session_is_the_median_of_every_round(self):
        def handshake_run(rate, cpu_pct, round_number):
            return {"mode": "sessions", "target": "tern", "verified": True,
                    "params": {"tls": True, "tls_resume": False},
                    "figures": {"sessions_per_s": rate, "sessions": 1000, "elapsed_s": 1.0},
                    "server_cpu_pct": cpu_pct, "client_cpu_pct": 99.0 + round_number / 10,
                    "suite": {"table": "tls-handshakes", "server": "tern",
                              "group": "tls full handshakes", "round": round_number, "rounds": 3}}
        # The median-rate round (1,100/s) took 62 % of a CPU; the rounds' CPU per session
        # are 470, 620 and 580 µs, whose median is 580.
        runs = [handshake_run(1000, 47.0, 1), handshake_run(1100, 62.0, 2),
                handshake_run(1200, 58.0, 3)]
        (chosen,) = report.median_rounds(runs)
        self.assertEqual(chosen["figures"]["sessions_per_s"], 1100)
        median, rounds = report.median_cpu_us_per_session(chosen)
        self.assertAlmostEqual(median, 580.0)
        self.assertEqual([round(v) for v in rounds], [470, 620, 580])
        self.assertEqual(chosen["suite"]["round_client_cpu_pct"], [99.1, 99.2, 99.3])
        self.assertIn("full handshakes 99.1 to 99.3 %", report.client_cpu_sentence([chosen]))

    def test_runs_of_one_round_pass_unchanged(self):
        runs = [pingpong_run("tern", 900, 1, rounds=1), pingpong_run("asio", 700, 1, rounds=1)]
        self.assertEqual(report.median_rounds(runs), runs)


class ReportTest(unittest.TestCase):
    def render(self, runs):
        with tempfile.TemporaryDirectory() as directory:
            output = os.path.join(directory, "REPORT.md")
            return report.Report({"machine": machine(), "peers": {}, "runs": runs}).render(
                output, None)

    def test_pingpong_shows_medians_and_the_ratio_of_every_round(self):
        runs = [pingpong_run("tern", 900, 1), pingpong_run("asio", 600, 1),
                pingpong_run("asio", 500, 2), pingpong_run("tern", 1200, 2),
                pingpong_run("tern", 1000, 3), pingpong_run("asio", 800, 3)]
        text = self.render(runs)
        self.assertIn("ran 3 times", text)
        # The rounds' ratios are 1.50, 2.40 and 1.25: their median, then their range.
        self.assertIn("| 16384 B | 1 | 10 | 1,000 | 600 | 600 | 1.50× (1.25–2.40) | "
                      "1.50× (1.25–2.40) | ≥ 1.0×: met |", text)
        self.assertIn("0.95× of it", text)

    def test_sessions_has_a_column_for_otechod_only_when_it_ran(self):
        quick = self.render([sessions_run("tern", 1100, 1), sessions_run("asio", 1000, 1)])
        self.assertIn("| in flight | tern | asio | tern ÷ best of asio/go/tokio | target |",
                      quick)
        self.assertNotIn("otechod", quick)
        full = self.render([sessions_run("tern", 1100, 1), sessions_run("asio", 1000, 1),
                            sessions_run("otechod", 500, 1)])
        self.assertIn("| tern ÷ otechod | tern ÷ best of asio/go/tokio | target |", full)

    def test_the_header_gives_the_load_the_wall_time_and_each_tables_time_and_budget(self):
        info = dict(machine(), pass_s=450.0, quiet_waited_s=12.0, seconds_per_cell=2.0,
                    loadavg_before="3.00 2.00 1.00", loadavg_after="4.00 3.00 2.00",
                    table_s={"003": 70.4, "004": 60.2}, table_budget_s={"003": 80, "004": 55})
        runs = [pingpong_run("tern", 900, 1), pingpong_run("asio", 700, 1)]
        text = report.Report({"machine": info, "peers": {}, "runs": runs}).render(
            "/tmp/REPORT.md", None, plots=False)
        self.assertIn("| load average after | 4.00 3.00 2.00 |", text)
        self.assertIn("| wall time | 7.5 minutes, 12 s of it waiting for an idle machine; 2.0 s "
                      "per time-bound cell |", text)
        self.assertIn("| 003 | 70 | 80 |\n| 004 | 60 | 55 |\n| all | 131 | 135 |", text)
        self.assertNotIn("Incomplete pass", text)
        del info["loadavg_after"]
        info["cells_planned"] = 9
        text = report.Report({"machine": info, "peers": {}, "runs": runs}).render(
            "/tmp/REPORT.md", None, plots=False)
        self.assertIn("**Incomplete pass**: it stopped after 2 runs of 9 cells", text)

    def test_a_target_is_met_by_the_median_round_with_no_round_below_095_of_it(self):
        self.assertEqual(report.verdict([1.2, 1.1, 1.3], 1.1), "≥ 1.1×: met")
        # One round at 1.05 is above 0.95 × 1.1 = 1.045: still met.
        self.assertEqual(report.verdict([1.05, 1.2, 1.3], 1.1), "≥ 1.1×: met")
        self.assertEqual(report.verdict([1.0, 1.2, 1.3], 1.1),
                         "≥ 1.1×: missed (median 1.20, lowest round 1.00)")
        self.assertEqual(report.verdict([1.0, 1.05, 1.3], 1.1),
                         "≥ 1.1×: missed (median 1.05, lowest round 1.00)")
        self.assertEqual(report.verdict([1.2, None, 1.3], 1.1), "≥ 1.1×: –")
        self.assertEqual(report.verdict([1.2], 1.1), "≥ 1.1×: met")
        self.assertEqual(report.spread([1.2]), "")
        self.assertEqual(report.spread([1.2, 0.9, 1.0]), " (0.90–1.20)")

    def test_every_ratio_of_the_rpc_table_carries_its_spread_and_each_backend_its_target(self):
        def rpc_run(server, tps, round_number):
            return {"mode": "rpc", "target": server, "verified": True,
                    "params": {"concurrency": 100}, "server_cpu_pct": 100.0,
                    "figures": {"tps": tps, "p99_us": 1000.0 / tps, "calls": tps * 10},
                    "suite": {"table": "001", "server": server, "group": "001 100 clients",
                              "round": round_number, "rounds": 3, "placement": "not pinned",
                              "other_cpu_pct": 0.0, "command": "x", "problem": None,
                              "server_cpu_s_cell": 10.0, "cell_s": 10.0}}
        rounds = {1: (100, 90, 50), 2: (110, 99, 45), 3: (95, 70, 50)}
        runs = [rpc_run(s, tps, n) for n, figures in rounds.items()
                for s, tps in zip(("tern", "tern-uring", "rpcx"), figures)]
        text = self.render(runs)
        # tern's rounds: 2.00, 2.44, 1.90; tern-uring's: 1.80, 2.20, 1.40.
        self.assertIn("| 100 | 100 | 90 | 50 | 50 | 2.00× (1.90–2.44) | 1.80× (1.40–2.20) | "
                      "tern: ≥ 2.0×: met, tern-uring: ≥ 2.0×: missed (median 1.80, lowest "
                      "round 1.40) |", text)
        # Calls per server CPU-second (each server at 100%): the better tern backend's ratio.
        self.assertIn("| 100 | 100 | 90 | 50 | 2.00× (1.90–2.44) |", text)

    def test_a_failed_round_is_listed_among_the_problems(self):
        runs = [pingpong_run("tern", 900, 1), pingpong_run("asio", 600, 1),
                pingpong_run("asio", 500, 2), pingpong_run("tern", None, 2, verified=False),
                pingpong_run("tern", 1000, 3), pingpong_run("asio", 800, 3)]
        text = self.render(runs)
        self.assertIn("| 16384 B | 1 | 10 | – ✗ | 600 | 600 | – (1.25–1.50; 1 of 3 rounds failed) | "
                      "– (1.25–1.50; 1 of 3 rounds failed) | ≥ 1.0×: – |", text)
        self.assertIn("tern cells that failed (they fail `make bench`):\n\n- 003 16384 B 1 t 10 s, "
                      "tern, round 2 of 3: tern-bench pingpong vs tern: exit status 1", text)

    def test_a_peer_that_could_not_run_a_cell_is_listed_with_its_reason(self):
        runs = [pingpong_run("tern", 900, 1), pingpong_run("asio", None, 1, verified=False)]
        runs[1]["suite"].update(problem="exit status 1: 22746 of 30000 failed",
                                problem_owner="peer")
        text = self.render(runs)
        self.assertIn("- 003 16384 B 1 t 10 s, asio, round 1 of 3: peer could not run this cell "
                      "(exit status 1: 22746 of 30000 failed): tern-bench pingpong vs asio", text)
        self.assertNotIn("tern cells that failed", text)

    def test_the_idle_poll_column_is_labelled_and_left_out_of_the_ratios(self):
        runs = [pingpong_run("tern", 600, 1, rounds=1, sessions=1),
                pingpong_run("tern-idle-poll", 1800, 1, rounds=1, sessions=1),
                pingpong_run("asio", 400, 1, rounds=1, sessions=1)]
        text = self.render(runs)
        self.assertIn("| Buffer | Threads | Sessions | tern | tern (idle-poll 200us) | asio |",
                      text)
        self.assertIn("| 16384 B | 1 | 1 | 600 | 1,800 | 400 | 400 | 1.50× | 1.50× |", text)
        self.assertIn("tern runs at its defaults in every headline column", text)

    def test_pingpong_shows_mb_per_second_of_server_cpu_and_its_ratio(self):
        runs = [pingpong_run("tern", 900, 1, rounds=1), pingpong_run("asio", 600, 1, rounds=1)]
        runs[0]["server_cpu_pct"] = 90.0
        runs[1]["server_cpu_pct"] = 40.0
        text = self.render(runs)
        self.assertIn("**MB per second of server CPU**", text)
        # tern 900 MB/s on 90% of a CPU: 1,000 per CPU-second; asio 600 on 40%: 1,500.
        self.assertIn("| 16384 B | 1 | 10 | 1,000 | 1,500 | 0.67× |", text)

    def test_the_switch_table_gives_the_fiber_over_context_ratio_of_its_rounds(self):
        def switch_run(target, whole, batch, number):
            figures = {"ns_per_switch": whole}
            if batch is not None:
                figures["batch_p50_ns_per_switch"] = batch
            return {"mode": "switch", "target": target, "verified": True,
                    "params": {"switches": 1000}, "figures": figures,
                    "suite": {"table": "switch", "server": None, "group": "switch",
                              "round": number, "rounds": 3, "command": "tern-bench switch"}}
        # Per round, fiber / context: whole runs 2.0, 1.4, 1.2; batch medians 1.3, 1.2, 1.6.
        runs = []
        for number, (fiber, context, fiber_batch, context_batch) in enumerate(
                [(10.0, 5.0, 6.5, 5.0), (7.0, 5.0, 6.0, 5.0), (6.0, 5.0, 8.0, 5.0)], 1):
            runs += [switch_run("tern-fiber", fiber, fiber_batch, number),
                     switch_run("tern-context", context, context_batch, number),
                     switch_run("boost.context", 4.0 + number, None, number)]
        text = self.render(runs)
        # Each implementation's median round by ns per switch; boost has no batch median.
        self.assertIn("| tern-fiber | 7 | 6 |", text)
        self.assertIn("| boost.context | 6 | – |", text)
        self.assertEqual(text.count("| tern-fiber |"), 1)
        self.assertIn("| whole runs | 1.40× (1.20–2.00) | ≤ 1.5×: missed (median 1.40, "
                      "highest round 2.00) |", text)
        self.assertIn("| batch medians | 1.30× (1.20–1.60) | ≤ 1.5×: missed (median 1.30, "
                      "highest round 1.60) |", text)

    def test_a_ratio_that_must_stay_low_is_met_within_the_round_tolerance(self):
        self.assertEqual(report.verdict_at_most([1.2, 1.4, 1.55], 1.5), "≤ 1.5×: met")
        self.assertEqual(report.verdict_at_most([1.2, 1.6, 1.3], 1.5),
                         "≤ 1.5×: missed (median 1.30, highest round 1.60)")
        self.assertEqual(report.verdict_at_most([1.2, None], 1.5), "≤ 1.5×: –")

    def test_tables_name_the_reports_of_the_methods_page(self):
        switch = {"mode": "switch", "target": "tern-fiber", "verified": True,
                  "params": {"switches": 1000}, "figures": {"ns_per_switch": 20.0},
                  "suite": {"table": "switch", "command": "tern-bench switch"}}
        text = self.render([switch, pingpong_run("tern", 900, 1, rounds=1)])
        self.assertIn("docs/benchmark-methods.md", text)
        self.assertIn("## Context switch (report 004, part B)", text)
        self.assertIn("report 004's libco variant", text)
        self.assertNotIn("seed", text.lower())


    def test_the_failover_table_shows_each_rounds_figures_and_their_median(self):
        runs = []
        for number, (epoll, uring) in enumerate([(3.0, 2.0), (1.0, 5.0), (2.0, 4.0)], 1):
            runs += [failover_run("tern", "kill", number, epoll),
                     failover_run("tern-uring", "kill", number, uring)]
        runs += [failover_run("tern", "term", n, None) for n in (1, 2, 3)]
        runs += [failover_run("tern-uring", "term", 1, 0.5),
                 failover_run("tern-uring", "term", 2, 0.7, lost=1, verified=False),
                 failover_run("tern-uring", "term", 3, 0.6)]
        text = self.render(runs)
        self.assertIn("## Failover: a server killed or stopped under load", text)
        self.assertIn("| SIGKILL | epoll | 2 (3 / 1 / 2) | 0 (0 / 0 / 0) | 2 (2 / 2 / 2) |", text)
        self.assertIn("| SIGKILL | io_uring | 4 (2 / 5 / 4) |", text)
        self.assertIn("| SIGTERM (goaway) | epoll | – (– / – / –) |", text)
        self.assertIn("| SIGTERM (goaway) | io_uring | 0.6 (0.5 / 0.7 / 0.6) ✗ | 0 (0 / 1 / 0) |",
                      text)
        self.assertIn("tern-bench failover vs tern-uring: exit status 1", text)

    def test_the_failover_table_shows_a_quick_pass_of_one_round_without_groups(self):
        runs = [failover_run("tern", "kill", 1, 1.25), failover_run("tern-uring", "term", 1, 0.75)]
        for run in runs:
            run["suite"].update(group=None, rounds=1)
        text = self.render(runs)
        self.assertIn("| SIGKILL | epoll | 1.25 | 0 | 2 | 0 |", text)
        self.assertIn("| SIGTERM (goaway) | io_uring | 0.75 | 0 | 0 | 0 |", text)



class FailoverTest(unittest.TestCase):
    def test_each_fault_runs_on_both_backends_at_tern_defaults(self):
        cells = tables.failover_cells(True)
        self.assertEqual({(c["fault"], c["server"]) for c in cells},
                         {("kill", "tern"), ("kill", "tern-uring"), ("term", "tern"),
                          ("term", "tern-uring")})
        for cell in cells:
            io = cell["args"][cell["args"].index("--io") + 1]
            self.assertEqual(io, "uring" if cell["server"] == "tern-uring" else "epoll")
            self.assertNotIn("--idle-poll", cell["args"])
            self.assertEqual(cell["kind"], "failover")

    def test_both_passes_run_each_fault_in_three_rounds(self):
        for full in (True, False):
            cells = tables.in_rounds(tables.failover_cells(full), 3)
            self.assertEqual(len(cells), 12)
            self.assertEqual({c["rounds"] for c in cells}, {3})
            self.assertEqual({c["group"] for c in cells}, {"failover kill", "failover term"})
        full = tables.in_rounds(tables.failover_cells(True), 3)
        # Three rounds of the table stay within a minute, a second per cell to start and stop
        # the servers included.
        load = sum(float(c["args"][c["args"].index("--duration") + 1]) for c in full)
        self.assertLessEqual(load + len(full), 60)

    def test_only_failover_selects_the_table(self):
        self.assertEqual({c["table"] for c in tables.all_cells(False, 3, ["failover"])},
                         {"failover"})

    def test_the_stopped_server_must_die_of_sigkill_or_exit_cleanly(self):
        self.assertEqual(failover.expected_exit("kill"), -9)
        self.assertEqual(failover.expected_exit("term"), 0)


def stream_run(server, tps, round_number, streams=100, cpu=50.0):
    return {
        "mode": "rpc", "target": server, "verified": True,
        "params": {"concurrency": streams, "calls": 1000, "stream": True},
        "figures": {"tps": tps, "calls": tps * 2}, "server_cpu_pct": cpu,
        "suite": {"table": "stream", "server": server, "group": f"stream {streams} streams",
                  "round": round_number, "rounds": 3, "placement": "not pinned",
                  "other_cpu_pct": 0.0, "command": f"stream vs {server}", "problem": None,
                  "server_cpu_s_cell": 2.0 * cpu / 100.0, "cell_s": 2.0},
    }


class StreamTableTest(unittest.TestCase):
    def test_tern_streams_on_one_connection_against_grpc_stream_client(self):
        cells = [c for c in tables.stream_cells(1.0, True) if c["table"] == "stream"]
        self.assertEqual({c["server"] for c in cells},
                         {"tern", "tern-uring", "grpc-sync", "grpc-callback"})
        self.assertEqual(sorted({c["group"] for c in cells}),
                         ["stream 1 streams", "stream 100 streams"])
        for cell in cells:
            if cell["server"].startswith("tern"):
                self.assertEqual(cell["client"], "tern-bench")
                self.assertIn("--stream", cell["args"])
                self.assertEqual(cell["args"][cell["args"].index("--shared") + 1], "1")
                io = cell["args"][cell["args"].index("--io") + 1]
                self.assertEqual(io, "uring" if cell["server"] == "tern-uring" else "epoll")
            else:
                self.assertEqual(cell["client"], "peer-stream")
            self.assertFalse(run.idle_poll_args(cell["server"]))
        quick = [c for c in tables.stream_cells(0.5, False) if c["table"] == "stream"]
        self.assertEqual({c["server"] for c in quick}, {"tern", "tern-uring", "grpc-callback"})

    def test_the_memory_cells_stall_1_and_100_streams_once_each(self):
        for full in (False, True):
            cells = tables.in_rounds(tables.all_cells(full, 2.0, ["stream"]), 3)
            memory = [c for c in cells if c["table"] == "stream-memory"]
            self.assertEqual([c["args"][c["args"].index("-c") + 1] for c in memory],
                             ["1", "100"])
            for cell in memory:
                self.assertEqual(cell["server"], "tern")
                self.assertEqual(cell["suite_table"], "stream")
                self.assertIsNone(cell.get("group"))
                self.assertEqual(cell["rounds"], 1)
                self.assertEqual(cell["args"][:3], ["--stream", "--stall", "1.0"])
                self.assertEqual(cell["args"][cell["args"].index("--shared") + 1], "1")
            # The memory part adds at most 3 s to the pass.
            self.assertLessEqual(sum(tables.estimate_seconds(c) for c in memory), 3.0)

    def test_each_side_streams_for_about_the_same_time(self):
        for cell in tables.in_rounds(tables.all_cells(False, 2.0, ["stream"]), 3):
            if cell["table"] == "stream-memory":
                continue
            messages = int(cell["args"][cell["args"].index("-n") + 1])
            rate = tables.STREAM_RATES["tern" if cell["server"].startswith("tern") else "grpc"]
            self.assertAlmostEqual(messages / rate, 0.5, delta=0.05)

    def test_only_stream_selects_the_stream_table(self):
        cells = tables.all_cells(False, 3.0, ["stream"])
        self.assertTrue(cells)
        self.assertEqual({c["table"] for c in cells}, {"stream", "stream-memory"})

    def test_the_grpc_stream_client_prints_json_for_its_server(self):
        catalog = run.servers.Catalog("/nonexistent")
        command = catalog.stream_client_command("grpc-callback", 4000, ["-c", "1", "-n", "10"])
        self.assertEqual(command[0], "/nonexistent/bench/grpc_stream_client")
        self.assertEqual(command[1:3], ["--target", "127.0.0.1:4000"])
        self.assertEqual(command[-3:], ["--peer", "grpc-callback", "--json"])
        self.assertIn("grpc-stream", catalog.skipped)

    def test_the_report_shows_rates_per_cpu_second_and_ratios_to_the_best_grpc(self):
        runs = []
        for number, (tern, uring, sync, callback) in enumerate(
                [(400, 380, 100, 150), (500, 450, 120, 200), (420, 400, 110, 190)], 1):
            runs += [stream_run("tern", tern, number, cpu=100.0),
                     stream_run("tern-uring", uring, number, cpu=100.0),
                     stream_run("grpc-sync", sync, number, cpu=100.0),
                     stream_run("grpc-callback", callback, number, cpu=200.0)]
        with tempfile.TemporaryDirectory() as directory:
            text = report.Report({"machine": machine(), "peers": {}, "runs": runs}).render(
                os.path.join(directory, "REPORT.md"), None)
        self.assertIn("## Stream: streaming RPC (tern vs gRPC C++)", text)
        section = text[text.index("## Stream"):]
        self.assertIn("| streams | tern | tern-uring | grpc-sync | grpc-callback | best gRPC |",
                      section)
        # Medians tern 420, tern-uring 400, grpc-sync 110, grpc-callback 190; tern's ratios per
        # round 400/150, 500/200, 420/190: median 2.50, spread 2.21-2.67.
        self.assertIn("| 100 | 420 | 400 | 110 | 190 | 190 | 2.50× (2.21–2.67) |", section)
        self.assertIn("tern: ≥ 2.0×: met", section)
        # Per server CPU-second: grpc-callback 190 on 200 % = 95, below grpc-sync's 110.
        self.assertIn("| 100 | 420 | 400 | 110 | 95 |", section)

    def test_the_memory_part_shows_each_stream_count_against_its_window(self):
        runs = [stream_memory_run(1, peak=262_500, rss=300, hold=4),
                stream_memory_run(100, peak=270_000, rss=52_000, hold=-8)]
        with tempfile.TemporaryDirectory() as directory:
            text = report.Report({"machine": machine(), "peers": {}, "runs": runs}).render(
                os.path.join(directory, "REPORT.md"), None)
        section = text[text.index("## Stream"):]
        # No rate runs: only the memory part.
        self.assertNotIn("Messages per second", section)
        self.assertIn("**Memory with a peer that reads nothing**", section)
        self.assertIn("`tern-bench rpc --stream --stall 1`", section)
        self.assertIn("| streams | window (bytes) | peak buffered per stream (bytes) |", section)
        # 262,500 <= 262,144 + 581: met; 270,000 is past it: missed. 52,000 KiB shows in MiB.
        self.assertIn("| 1 | 262,144 | 262,500 | 451 | 262,000 | 0.05 s | +300 KiB | +4 KiB | "
                      "0 | met |", section)
        self.assertIn("| 100 | 262,144 | 270,000 | 440 to 451 | 262,000 | 0.50 s (not all) | "
                      "+50.8 MiB | -8 KiB | 0 | missed |", section)

    def test_the_memory_part_follows_the_rates(self):
        runs = [stream_run("tern", 400, 1), stream_memory_run(1, 1000, 10, 0)]
        with tempfile.TemporaryDirectory() as directory:
            text = report.Report({"machine": machine(), "peers": {}, "runs": runs}).render(
                os.path.join(directory, "REPORT.md"), None)
        section = text[text.index("## Stream"):]
        self.assertLess(section.index("Messages per second"),
                        section.index("Memory with a peer that reads nothing"))


def stream_memory_run(streams, peak, rss, hold):
    return {
        "mode": "rpc", "target": "tern", "verified": True,
        "params": {"concurrency": streams, "stream": True, "stall_s": 1.0,
                   "stream_window": 262_144},
        "figures": {"streams": streams, "window_bytes": 262_144, "answer_bytes": 581,
                    "peak_buffered_bytes_max": peak, "answers_before_park_min":
                    451 if streams == 1 else 440, "answers_before_park_max": 451,
                    "unanswered_bytes_max": 262_000, "server_rss_growth_kib": rss,
                    "server_rss_after_full_kib": hold, "messages_sent_after_full": 0,
                    "fill_s": 0.05 if streams == 1 else 0.5, "all_full": streams == 1},
        "suite": {"table": "stream-memory", "server": "tern", "round": 1, "rounds": 1,
                  "placement": "not pinned", "other_cpu_pct": 0.0, "command": "stall",
                  "problem": None},
    }


class MergeTest(unittest.TestCase):
    EXISTING = ("# report (quick pass, A)\n\nhead\n\n## 003: pingpong\n\nold 003\n\n"
                "## TLS: x\n\nold tls\n\n## Plots\n\nplots\n")

    def test_a_run_of_one_table_replaces_its_section_and_keeps_the_others(self):
        fresh = ("# report (quick pass, B)\n\n## 001: RPC\n\nNot measured in this run.\n\n"
                 "## TLS: x\n\nnew tls\n\n## Problems in this run\n\n- p\n")
        text = report.merged(self.EXISTING, fresh, "B")
        self.assertIn("old 003", text)
        self.assertIn("new tls", text)
        self.assertNotIn("old tls", text)
        self.assertNotIn("## 001", text)
        self.assertNotIn("Problems", text)
        self.assertIn("From `bench/results/B.json`", text)
        self.assertTrue(text.startswith("# report (quick pass, A)"))

    def test_a_new_section_goes_before_the_plots(self):
        fresh = "# report\n\n## Hooks: y\n\nhooks\n"
        text = report.merged(self.EXISTING, fresh, "C")
        self.assertLess(text.index("## Hooks: y"), text.index("## Plots"))
        self.assertLess(text.index("## TLS: x"), text.index("## Hooks: y"))

    def test_the_tls_table_runs_tern_at_defaults_against_asio_go_and_tokio(self):
        for full, pingpong in ((False, {"tern", "asio", "go"}),
                               (True, {"tern", "tern-uring", "asio", "go", "tokio"})):
            cells = tables.tls_cells(2.0, full)
            self.assertTrue(all(c["tls"] and "--tls" in c["args"] for c in cells))
            self.assertEqual({c["server"] for c in cells if c["mode"] == "pingpong"}, pingpong)
            self.assertEqual({c["server"] for c in cells if c["mode"] == "sessions"},
                             {"tern", "asio", "go", "tokio"})
            self.assertFalse(any(run.idle_poll_args(c["server"]) for c in cells))
            resumed = [c for c in cells if "--tls-resume" in c["args"]]
            self.assertEqual(len(resumed), len(tables.TLS_HANDSHAKE_SERVERS))

    def test_the_tls_rpc_table_runs_tern_plaintext_and_grpc_in_one_group(self):
        cells = tables.tls_rpc_cells(1000, True)
        self.assertEqual({c["server"] for c in cells}, set(tables.TLS_RPC_SERVERS))
        self.assertEqual({c["group"] for c in cells},
                         {"tls rpc 100 clients", "tls rpc 1000 clients"})
        for c in cells:
            secure = c["server"] != "tern-plaintext"
            self.assertEqual(c["tls"], secure)
            self.assertEqual(c["tls_verify"], secure)
            self.assertEqual("--tls" in c["args"], secure and c["client"] == "tern-bench")
            self.assertFalse(run.idle_poll_args(c["server"]))
        only = {c["table"] for c in tables.all_cells(False, 1.0, ["tls-rpc"])}
        self.assertEqual(only, {"tls-rpc"})
        self.assertIn("tls-rpc", {c["table"] for c in tables.all_cells(False, 1.0, ["tls"])})

    def test_the_grpc_client_gets_the_test_certificate_as_its_ca(self):
        with tempfile.TemporaryDirectory() as build:
            catalog = servers.Catalog(build)
            command = catalog.rpc_client_command("grpc-sync", 5, ["-c", "1"], "/x/ca.crt")
            self.assertEqual(command[-2:], ["--tls-ca", "/x/ca.crt"])
            server = catalog.command("tern-plaintext", 1, "rpc")
            self.assertIn("epoll", server)
            self.assertNotIn("--tls-cert", server)


def tls_rpc_run(server, tps, round_number, clients=100, cpu=50.0):
    return {
        "mode": "rpc", "target": server, "verified": True, "server_cpu_pct": cpu,
        "params": {"concurrency": clients, "calls": 1000},
        "figures": {"tps": tps, "p99_us": 1000.0 / tps * 1e3, "calls": tps * 2},
        "suite": {"table": "tls-rpc", "server": server, "group": f"tls rpc {clients} clients",
                  "round": round_number, "rounds": 3, "placement": "not pinned",
                  "other_cpu_pct": 0.0, "command": f"rpc vs {server}", "problem": None,
                  "server_cpu_s_cell": 2.0 * cpu / 100.0, "cell_s": 2.0},
    }


class TlsRpcReportTest(unittest.TestCase):
    def render(self, runs):
        results = {"machine": machine(), "peers": {}, "skipped": {}, "runs": runs}
        with tempfile.TemporaryDirectory() as folder:
            return report.Report(results).render(os.path.join(folder, "REPORT.md"), None,
                                                 plots=False)

    def test_ratios_to_grpc_and_to_plaintext_per_round(self):
        runs = []
        figures = {"tern": [80, 90, 100], "tern-uring": [70, 70, 70],
                   "tern-plaintext": [100, 120, 125], "grpc-sync": [40, 45, 50],
                   "grpc-callback": [30, 30, 30]}
        for number in (1, 2, 3):
            for server, values in figures.items():
                runs.append(tls_rpc_run(server, values[number - 1] * 1000.0, number))
        text = self.render(runs)
        self.assertIn("## TLS: RPC over TLS (tern vs gRPC C++ over TLS)", text)
        # Medians: tern 90k, tern-uring 70k, plaintext 120k, grpc-sync 45k, grpc-callback 30k;
        # tern ÷ best gRPC 2.0 in every round, TLS ÷ plaintext 0.80, 0.75, 0.80.
        self.assertIn("| 100 | 90,000 | 70,000 | 120,000 | 45,000 | 30,000 | 45,000 | "
                      "2.00× (2.00–2.00) | ≥ 2.0×: met | 0.80× (0.75–0.80) | ≥ 0.7×: met |", text)
        # Per server CPU-second at 50 % of a CPU: twice the TPS.
        self.assertIn("| 100 | 180,000 | 140,000 | 240,000 | 90,000 | 60,000 | 2.00× (2.00–2.00) |",
                      text)
        # Nothing of the pingpong and handshakes tables ran: only this section.
        self.assertNotIn("## TLS: pingpong", text)

    def test_a_run_of_tls_rpc_alone_keeps_the_pingpong_section_when_merged(self):
        existing = ("# report (quick pass, A)\n\nhead\n\n## TLS: pingpong and handshakes x\n\n"
                    "old tls\n\n## Plots\n\nplots\n")
        fresh = self.render([tls_rpc_run(s, 1000.0, 1) for s in tables.TLS_RPC_SERVERS])
        text = report.merged(existing, fresh, "B")
        self.assertIn("old tls", text)
        self.assertIn("## TLS: RPC over TLS", text)
        self.assertLess(text.index("old tls"), text.index("## TLS: RPC over TLS"))
        self.assertLess(text.index("## TLS: RPC over TLS"), text.index("## Plots"))


class ExitStatusTest(unittest.TestCase):
    """`make bench` fails when tern fails or the suite breaks, not when a peer cannot run a
    cell: that is recorded with its reason in the report."""

    def test_a_peer_failure_is_recorded_but_does_not_fail_the_pass(self):
        failures = [{"cell": "rpc -c 5000 vs erpc", "owner": "peer", "problem": "bind"}]
        self.assertEqual(run.exit_status(failures, 0), 0)

    def test_a_tern_failure_fails_the_pass(self):
        failures = [{"cell": "x", "owner": "peer", "problem": "a"},
                    {"cell": "y", "owner": "tern", "problem": "b"}]
        self.assertEqual(run.exit_status(failures, 0), 1)

    def test_a_report_that_cannot_be_written_fails_the_pass(self):
        self.assertEqual(run.exit_status([], 1), 1)
        self.assertEqual(run.exit_status([], 0), 0)

    def test_who_owns_a_failed_cell(self):
        cells = tables.all_cells(True, 3.0)
        owners = {}
        for cell in cells:
            owners.setdefault(cell.get("server") or cell.get("client") or cell.get("program")
                              or cell["table"], set()).add(tables.failure_owner(cell))
        for peer in ("asio", "go", "tokio", "mtserver", "otechod", "grpc-callback", "rpcx",
                     "erpc", "switch_peers", "redis-benchmark"):
            self.assertEqual(owners[peer], {"peer"}, peer)
        for ours in ("tern", "tern-uring", "tern-plain-echo", "tern-idle-poll", "tern-hooked",
                     "tern-plaintext", "fibers", "002-log"):
            self.assertEqual(owners[ours], {"tern"}, ours)

    def test_a_quiet_client_that_failed_says_what_failed(self):
        runs = [{"figures": {"calls": 7254}, "errors": 22746,
                 "error_messages": ["dial: bind: address already in use"]}]
        self.assertEqual(run.failed_work(runs), "22746 failed, 7254 calls verified; dial: bind: "
                         "address already in use")
        runs = [{"figures": {"sessions": 14999, "failed": 1}, "errors": 1,
                 "error_messages": ["session 7736: reading reply 0: Connection reset by peer"]}]
        self.assertEqual(run.failed_work(runs), "1 failed, 14999 sessions verified; session "
                         "7736: reading reply 0: Connection reset by peer")

    def test_the_server_log_gives_what_the_server_said_besides_its_start_line(self):
        log = ("mtserver: listening on 127.0.0.1:4000 (thread per connection)\n"
               "mtserver: no thread for a connection (Resource temporarily unavailable)\n"
               "mtserver: stopped\n")
        self.assertEqual(run.server_said(log), "mtserver: no thread for a connection (Resource "
                         "temporarily unavailable)")
        self.assertEqual(run.server_said("tern-echo: listening on 127.0.0.1:4000\n"), "")


if __name__ == "__main__":
    unittest.main()
