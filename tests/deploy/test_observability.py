"""The shipped monitoring: Prometheus config and alert rules (promtool), the Grafana dashboard
(every panel queries metrics the code registers), and a real Prometheus server scraping a running
``adamem serve`` and a running projector — ``adamem project --follow`` on the embedded log, and
``adamem worker`` on the real broker — while messages flow.

Prometheus and promtool come from Debian's ``prometheus`` package (``deploy/test.sh`` installs
it). Without them these tests fail in CI (``CI=true``) and are skipped elsewhere.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from adamem.metrics import metric_names
from tests.api.conftest import SAMPLE, free_port
from tests.conftest import REPO

PROMETHEUS_DIR = REPO / "deploy" / "prometheus"
DASHBOARD = REPO / "deploy" / "grafana" / "dashboards" / "adamem.json"
ADAMEM = Path(sys.executable).with_name("adamem")


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        message = f"{name} is not installed (Debian: apt-get install -y prometheus; deploy/test.sh does it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


def _promtool(*args: str) -> str:
    done = subprocess.run([_binary("promtool"), *args], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_promtool_accepts_the_shipped_scrape_config_and_rules() -> None:
    assert "SUCCESS" in _promtool("check", "config", str(PROMETHEUS_DIR / "prometheus.yml"))
    assert "4 rules found" in _promtool("check", "rules", str(PROMETHEUS_DIR / "alerts.yml"))


def test_each_alert_fires_on_a_broken_series_and_not_on_a_healthy_one() -> None:
    assert "SUCCESS" in _promtool("test", "rules", str(PROMETHEUS_DIR / "alerts_test.yml"))
    rules = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())["groups"][0]["rules"]
    tested = yaml.safe_load((PROMETHEUS_DIR / "alerts_test.yml").read_text())["tests"]
    fired = {t["alertname"] for case in tested for t in case["alert_rule_test"] if t["exp_alerts"]}
    assert fired == {r["alert"] for r in rules}  # every alert is shown to fire


# ---- the dashboard against the code's metric names ---------------------------------------------

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset", "bool"}
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def expr_metrics(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (functions, keywords, labels and strings left out)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings (label values)
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range and subquery durations
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)  # label lists
    text = re.sub(r"\$__\w+", "", text)  # Grafana's variables
    names = set()
    for m in _IDENT.finditer(text):
        word = m.group(0)
        if word in _KEYWORDS or text[m.end() :].lstrip().startswith("(") or re.fullmatch(r"\d+[smhdwy]", word):
            continue
        if m.start() > 0 and (text[m.start() - 1].isdigit() or text[m.start() - 1] == "."):
            continue  # 1e3, 0.95
        names.add(word)
    return names


def test_the_expression_parser_finds_metric_names_only() -> None:
    expr = 'histogram_quantile(0.95, sum by (le, stage) (rate(a_seconds_bucket{x="y(z)"}[5m]))) / on (job) b_total'
    assert expr_metrics(expr) == {"a_seconds_bucket", "b_total"}
    assert expr_metrics("time() - max by (partition) (c_timestamp_seconds)") == {"c_timestamp_seconds"}


def dashboard_exprs() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in dash["panels"] if p["type"] != "row" for t in p["targets"]]


def test_every_dashboard_panel_queries_metrics_the_code_registers() -> None:
    known = metric_names()
    exprs = dashboard_exprs()
    used: set[str] = set()
    for title, expr in exprs:
        names = expr_metrics(expr)
        assert names, f"panel {title!r} queries no metric: {expr}"
        assert names <= known, f"panel {title!r} queries unknown metrics {sorted(names - known)}"
        used |= names
    sections = {  # what the dashboard must show (issue 18)
        "ingest": "adamem_events_analysed_total",
        "lag": "adamem_consumer_lag_events",
        "dead letters": "adamem_dead_letters_total",
        "latency percentiles": "adamem_http_request_duration_seconds_bucket",
        "cache": "adamem_cache_lookups_total",
        "memory health": "adamem_memory_fragmentation_ratio",
    }
    assert {s for s, name in sections.items() if name not in used} == set()
    rules = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())["groups"][0]["rules"]
    for rule in rules:
        assert expr_metrics(rule["expr"]) <= known, rule["alert"]


# ---- a real Prometheus server scraping running processes ----------------------------------------


class Prometheus:
    """A Prometheus server on a free port with the shipped alert rules, scraping ``targets`` every second."""

    def __init__(self, root: Path, targets: dict[str, str]) -> None:
        self.port = free_port()
        rules = root / "alerts.yml"
        shutil.copy(PROMETHEUS_DIR / "alerts.yml", rules)
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": [target]}]} for job, target in targets.items()
            ],
        }
        (root / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = root / "prometheus.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [
                    _binary("prometheus"),
                    f"--config.file={root / 'prometheus.yml'}",
                    f"--storage.tsdb.path={root / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.url = f"http://127.0.0.1:{self.port}"
        wait_for(lambda: self._ready(), 60, f"prometheus did not start: {self.log}")

    def _ready(self) -> bool:
        assert self.process.poll() is None, self.log.read_text()
        try:
            return httpx.get(f"{self.url}/-/ready", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector of a PromQL query through the HTTP API."""
        r = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=10)
        body = r.json()
        assert r.status_code == 200 and body["status"] == "success", (promql, body)
        return list(body["data"]["result"])

    def targets_up(self) -> dict[str, bool]:
        active = httpx.get(f"{self.url}/api/v1/targets", timeout=10).json()["data"]["activeTargets"]
        return {t["labels"]["job"]: t["health"] == "up" for t in active}

    def stop(self) -> None:
        stop(self.process)


def wait_for(check: Callable[[], Any], seconds: float, message: str) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, message
        time.sleep(0.5)


def stop(process: subprocess.Popen[bytes]) -> None:
    """TERM the process we started (by its pid), KILL it after a grace period."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(10)


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(ADAMEM), *args], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=log.parent
        )


def answering(url: str, process: subprocess.Popen[bytes], log: Path) -> Callable[[], bool]:
    def check() -> bool:
        assert process.poll() is None, log.read_text()
        try:
            return httpx.get(url, timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    return check


def lines(n: int, start: int) -> bytes:
    """``n`` new messages of owner bob (one conversation), with distinct ids."""
    rows = [
        {
            "user_id": "bob",
            "speaker": "Bob",
            "text": f"I went hiking near the lake, trip number {i}.",
            "occurred_at": 1_709_280_000_000 + i * 60_000,
            "conversation_id": f"c{i // 10}",
            "message_id": f"m{i}",
        }
        for i in range(start, start + n)
    ]
    return "\n".join(json.dumps(r) for r in rows).encode()


def flow_and_check(prom: Prometheus, serve_url: str, projector_job: str, publish: Callable[[int], None] | None) -> None:
    """Publish messages (``publish``) and query while Prometheus scrapes; its PromQL shows ingest and latency."""
    wait_for(lambda: all(prom.targets_up().values()) and len(prom.targets_up()) == 2, 120, "targets not up")
    sent = 20
    answered = 0
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if publish is not None:
            publish(sent)
            sent += 20
        r = httpx.post(f"{serve_url}/v1/users/bob/query", json={"question": "Where did Bob go hiking?"}, timeout=30)
        answered += r.status_code == 200
        rate = prom.query(f'sum(rate(adamem_events_analysed_total{{job="{projector_job}"}}[30s]))')
        folded = prom.query(f'sum(increase(adamem_events_folded_total{{job="{projector_job}"}}[2m]))')
        if answered >= 3 and all(v and float(v[0]["value"][1]) > 0 for v in (rate, folded)):
            break
        time.sleep(1)
    assert answered >= 3, "the service never answered about the projected messages"
    ingest = prom.query(f'sum(rate(adamem_events_analysed_total{{job="{projector_job}"}}[30s]))')
    assert ingest and float(ingest[0]["value"][1]) > 0, ingest
    folded = prom.query(f'sum(increase(adamem_events_folded_total{{job="{projector_job}"}}[2m]))')
    assert folded and float(folded[0]["value"][1]) > 0, folded
    p95 = (
        "histogram_quantile(0.95, sum by (le) "
        '(rate(adamem_http_request_duration_seconds_bucket{endpoint="/v1/users/{user}/query"}[1m])))'
    )
    quantile = wait_for(lambda: [v for v in prom.query(p95) if v["value"][1] not in ("NaN", "+Inf")], 30, "no p95")
    assert 0 < float(quantile[0]["value"][1]) < 60
    stages = prom.query("histogram_quantile(0.5, sum by (stage, le) (rate(adamem_query_duration_seconds_bucket[1m])))")
    assert {s["metric"]["stage"] for s in stages} == {"resolve", "route", "retrieve", "expand", "fuse", "total"}
    for title, expr in dashboard_exprs():  # every panel's query is valid PromQL for this server
        prom.query(expr.replace("$__rate_interval", "1m").replace("$__range", "5m"))
        del title


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


def test_prometheus_scrapes_serve_and_project_follow_while_messages_flow(workdir: Path) -> None:
    """The embedded log has one writer at a time, so the messages are published before the projector starts."""
    _binary("prometheus")
    log_dir, store = workdir / "log", workdir / "store"
    env = {**os.environ, "ADAMEM_FSYNC": "false", "ADAMEM_HEALTH_INTERVAL": "1"}
    env.pop("ADAMEM_LOG", None)
    seed = workdir / "seed.jsonl"
    seed.write_bytes(SAMPLE + b"\n" + lines(20, 0))
    publish = [str(ADAMEM), "publish", str(seed), "--log", str(log_dir)]
    subprocess.run(publish, env=env, check=True, timeout=120, capture_output=True)
    project_once = [str(ADAMEM), "project", "--log", str(log_dir), "--store", str(store)]
    subprocess.run(project_once, env=env, check=True, timeout=300, capture_output=True)
    backlog = workdir / "backlog.jsonl"
    backlog.write_bytes(lines(400, 20))  # analysed by the following projector while Prometheus watches
    subprocess.run([*publish[:2], str(backlog), *publish[3:]], env=env, check=True, timeout=120, capture_output=True)
    serve_port, project_port = free_port(), free_port()
    procs: list[subprocess.Popen[bytes]] = []
    prom: Prometheus | None = None
    try:
        serve = start(["serve", "--store", str(store), "--port", str(serve_port)], env, workdir / "serve.log")
        procs.append(serve)
        serve_url = f"http://127.0.0.1:{serve_port}"
        wait_for(answering(f"{serve_url}/health", serve, workdir / "serve.log"), 120, "serve did not start")
        targets = {"adamem-query": f"127.0.0.1:{serve_port}", "adamem-project": f"127.0.0.1:{project_port}"}
        prom = Prometheus(workdir, targets)  # scraping before the projector starts: it sees the counters at 0
        follow = ["project", "--follow", "--log", str(log_dir), "--store", str(store)]
        project = start([*follow, "--metrics-port", str(project_port)], env, workdir / "project.log")
        procs.append(project)
        flow_and_check(prom, serve_url, "adamem-project", None)
        owners = prom.query('adamem_memory_health_owners{job="adamem-query",tenant="default"}')
        assert owners and float(owners[0]["value"][1]) == 3  # alice, xiaoming, bob
        lag = prom.query('adamem_consumer_lag_events{job="adamem-project",topic="adamem.analyses"}')
        assert lag and all(float(v["value"][1]) >= 0 for v in lag)
    finally:
        if prom is not None:
            prom.stop()
        for p in procs:
            stop(p)


@pytest.mark.kafka
def test_prometheus_scrapes_serve_and_the_worker_while_messages_flow(workdir: Path, kafka_bootstrap: str) -> None:
    _binary("prometheus")
    store = workdir / "store"
    env = {
        **os.environ,
        "ADAMEM_LOG": f"kafka://{kafka_bootstrap}",
        "ADAMEM_TOPIC_PREFIX": f"t{uuid.uuid4().hex[:10]}",
        "ADAMEM_PARTITIONS": "2",
        "ADAMEM_METRICS_INTERVAL": "1",
        "ADAMEM_HEALTH_INTERVAL": "1",
    }
    serve_port, worker_port = free_port(), free_port()
    procs: list[subprocess.Popen[bytes]] = []
    prom: Prometheus | None = None
    try:
        worker = start(
            ["worker", "--store", str(store), "--loglevel", "warning", "--metrics-port", str(worker_port)],
            env,
            workdir / "worker.log",
        )
        procs.append(worker)
        worker_metrics = f"http://127.0.0.1:{worker_port}/metrics"
        wait_for(answering(worker_metrics, worker, workdir / "worker.log"), 120, "no metrics")
        serve = start(["serve", "--store", str(store), "--port", str(serve_port)], env, workdir / "serve.log")
        procs.append(serve)
        serve_url = f"http://127.0.0.1:{serve_port}"
        wait_for(answering(f"{serve_url}/health", serve, workdir / "serve.log"), 120, "serve did not start")
        targets = {"adamem-query": f"127.0.0.1:{serve_port}", "adamem-worker": f"127.0.0.1:{worker_port}"}
        prom = Prometheus(workdir, targets)

        def publish(start_at: int) -> None:
            messages = [json.loads(x) for x in lines(20, start_at).splitlines()]
            r = httpx.post(f"{serve_url}/v1/messages", json={"messages": messages}, timeout=60)
            assert r.status_code == 202, r.text

        flow_and_check(prom, serve_url, "adamem-worker", publish)
        lag = prom.query('adamem_consumer_lag_events{job="adamem-worker"}')
        assert {s["metric"]["topic"] for s in lag} >= {env["ADAMEM_TOPIC_PREFIX"] + ".analyses"}
        assert prom.query('adamem_rebalances_total{job="adamem-worker"} > 0')
    finally:
        if prom is not None:
            prom.stop()
        for p in procs:
            stop(p)
