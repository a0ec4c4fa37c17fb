#!/usr/bin/env python3
"""docs/screenshots/dashboard.png: the Grafana dashboard's queries, answered by a real
Prometheus scraping a real exporter during the demo crawl, drawn in the dashboard's layout.

No Grafana runs here: a private redis-server, ``crawler-tasks demo`` (a page budget, a host
cap so that fetches wait for their host), ``crawler-tasks metrics``, and Debian's
``prometheus`` scraping it every second. Each panel's queries (the crawl selector set to
every crawl) are asked of Prometheus' HTTP API, drawn as SVG in an HTML page laid out as
the dashboard's ``gridPos`` says, and photographed by headless Chromium. A query Prometheus
refuses stops the script. Nothing it starts outlives it.

    docs/screenshots/dashboard.py            # from the repository, with .venv installed
"""

from __future__ import annotations

import html
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / os.environ.get("VENV", ".venv")
CT = str(VENV / "bin" / "crawler-tasks")
OUT = ROOT / "docs" / "screenshots" / "dashboard.png"
DASHBOARD = json.loads((ROOT / "docker" / "grafana" / "dashboards" / "crawler.json").read_text())
COLORS = ["#73bf69", "#f2cc0c", "#5794f2", "#ff780a", "#b877d9", "#f2495c", "#8ab8ff", "#fade2a"]
CELL_W, CELL_H = 62, 36  # pixels per grid column and row


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ask(prom: str, path: str, **params: str | float) -> dict:
    url = f"{prom}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        answer = json.loads(resp.read())
    if answer.get("status") != "success":
        raise SystemExit(f"prometheus refused {params.get('query')!r}: {answer}")
    return answer["data"]


def label(fmt: str, metric: dict[str, str]) -> str:
    for key, value in metric.items():
        fmt = fmt.replace("{{" + key + "}}", value)
    return fmt or ", ".join(f"{k}={v}" for k, v in metric.items() if k != "__name__") or "value"


def chart(series: list[tuple[str, list[tuple[float, float]]]], w: int, h: int, unit: str) -> str:
    """Lines of ``series`` (name, points) in an SVG of ``w`` x ``h``, with a legend."""
    points = [p for _, pts in series for p in pts]
    if not points:
        return '<div class="empty">no data</div>'
    t0, t1 = min(p[0] for p in points), max(p[0] for p in points)
    peak = max(p[1] for p in points)
    top = (peak or 1.0) * 1.1
    plot_h = h - 18 * min(len(series), 3) - 12
    lines = []
    for i, (_, pts) in enumerate(series):
        xy = " ".join(f"{40 + (t - t0) / max(t1 - t0, 1) * (w - 50):.1f},{6 + plot_h - v / top * plot_h:.1f}"
                      for t, v in pts)
        lines.append(f'<polyline fill="none" stroke="{COLORS[i % len(COLORS)]}" stroke-width="1.6" points="{xy}"/>')
    axis = (f'<text x="2" y="12" class="tick">{peak:,.4g}{unit}</text>'
            f'<text x="2" y="{6 + plot_h}" class="tick">0</text>'
            f'<line x1="40" y1="{6 + plot_h}" x2="{w - 10}" y2="{6 + plot_h}" class="axis"/>')
    legend = "".join(f'<div><span style="background:{COLORS[i % len(COLORS)]}"></span>{html.escape(name)}</div>'
                     for i, (name, _) in enumerate(series[:6]))
    return f'<svg width="{w}" height="{plot_h + 10}">{axis}{"".join(lines)}</svg><div class="legend">{legend}</div>'


def render_panel(prom: str, panel: dict, start: float, end: float) -> str:
    w, h = panel["gridPos"]["w"] * CELL_W - 12, panel["gridPos"]["h"] * CELL_H - 34
    unit = {"reqps": "/s", "Bps": " B/s", "s": " s"}.get(panel.get("fieldConfig", {}).get("defaults", {}).get("unit", ""), "")
    exprs = [(t["expr"].replace("$crawl", ".*"), t.get("legendFormat", "")) for t in panel["targets"]]
    if panel["type"] in ("stat", "table", "bargauge"):
        rows = []
        for expr, fmt in exprs:
            for r in ask(prom, "/api/v1/query", query=expr, time=end)["result"]:
                rows.append((label(fmt, r["metric"]), float(r["value"][1]), r["metric"]))
        if panel["type"] == "stat":
            value = rows[0][1] if rows else 0
            if panel["title"].startswith("Redis"):
                shown = ("up", "#73bf69") if value == 1 else ("DOWN", "#f2495c")
                return f'<div class="stat" style="color:{shown[1]}">{shown[0]}</div>'
            return f'<div class="stat">{value:,.0f}</div>'
        if panel["type"] == "table":
            cells = "".join(f"<tr><td>{html.escape(m.get('crawl', ''))}</td><td>{html.escape(m.get('state', ''))}</td></tr>"
                            for _, _, m in rows)
            return f"<table><tr><th>crawl</th><th>state</th></tr>{cells}</table>"
        top = max([v for _, v, _ in rows] + [1])
        bars = "".join(f'<div class="bar"><span>{html.escape(n)}</span><i style="width:{v / top * 60:.0f}%"></i>'
                       f"<b>{v:,.0f}</b></div>" for n, v, _ in sorted(rows, key=lambda r: -r[1])[:8])
        return bars or '<div class="empty">no data</div>'
    series = []
    for expr, fmt in exprs:
        data = ask(prom, "/api/v1/query_range", query=expr, start=start, end=end, step=2)
        for r in data["result"]:
            series.append((label(fmt, r["metric"]), [(float(t), float(v)) for t, v in r["values"]]))
    return chart(series, w, h, unit)


def page(prom: str, start: float, end: float) -> tuple[str, int]:
    panels = []
    for p in DASHBOARD["panels"]:
        g = p["gridPos"]
        body = render_panel(prom, p, start, end)
        panels.append(f'<div class="panel" style="left:{g["x"] * CELL_W}px;top:{g["y"] * CELL_H + 40}px;'
                      f'width:{g["w"] * CELL_W - 6}px;height:{g["h"] * CELL_H - 6}px">'
                      f'<h3>{html.escape(p["title"])}</h3>{body}</div>')
    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in DASHBOARD["panels"]) * CELL_H + 46
    style = """body{margin:0;background:#111217;color:#ccccdc;font:12px sans-serif}
.panel{position:absolute;background:#181b1f;border:1px solid #2a2d33;border-radius:3px;padding:4px 6px;overflow:hidden}
h3{margin:0 0 4px;font-size:13px;color:#e0e0ee} .tick{fill:#8e8e9e;font-size:10px} .axis{stroke:#34373d}
.legend div{display:inline-block;margin-right:10px;font-size:11px}.legend span{display:inline-block;width:10px;height:3px;margin-right:4px;vertical-align:middle}
.stat{font-size:40px;font-weight:bold;color:#73bf69;text-align:center;margin-top:14px}
table{width:100%;border-collapse:collapse}td,th{border-bottom:1px solid #2a2d33;text-align:left;padding:2px 4px}
.bar{display:flex;align-items:center;margin:3px 0}.bar span{width:30%;overflow:hidden}.bar i{display:block;height:12px;background:#73bf69;margin:0 6px}
.empty{color:#6e6e7e;margin:30px;text-align:center} .top{padding:10px 12px;font-size:15px}"""
    return (f"<html><head><style>{style}</style></head><body><div class='top'>Crawler "
            f"<span style='color:#8e8e9e'>· crawl: All · last {int(end - start)} s · "
            f"queries of docker/grafana/dashboards/crawler.json answered by Prometheus</span></div>"
            f"{''.join(panels)}<div style='height:{height}px'></div></body></html>"), height


def main() -> int:
    prometheus = shutil.which("prometheus")
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if prometheus is None or not Path(chromium).exists():
        raise SystemExit("needs Debian's prometheus and chromium packages")
    work = Path(tempfile.mkdtemp())
    redis_port, metrics_port, prom_port = free_port(), free_port(), free_port()
    env = {**os.environ, "CRAWLER_BROKER_URL": f"redis://127.0.0.1:{redis_port}/0",
           "CRAWLER_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0", "CRAWLER_STORE": str(work / "pages.db")}
    procs: list[subprocess.Popen] = []
    try:
        procs.append(subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                                       "--dir", str(work)], stdout=subprocess.DEVNULL))
        time.sleep(0.5)
        (work / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"scrape_configs: [{{job_name: crawler, static_configs: [{{targets: ['127.0.0.1:{metrics_port}']}}]}}]\n")
        procs.append(subprocess.Popen([CT, "metrics", "--port", str(metrics_port)], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen([prometheus, f"--config.file={work / 'prometheus.yml'}",
                                       f"--storage.tsdb.path={work / 'tsdb'}",
                                       f"--web.listen-address=127.0.0.1:{prom_port}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        start = time.time()
        crawl = subprocess.Popen([CT, "demo", "--pages", "20000", "--max-pages", "12000", "--delay", "0.01",
                                  "--host-concurrency", "4", "--workers", "2", "--quiet",
                                  "--crawl-id", f"demo-{time.strftime('%H%M%S')}"], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work)
        procs.append(crawl)
        time.sleep(float(os.environ.get("WAIT", "90")))
        prom = f"http://127.0.0.1:{prom_port}"
        text, height = page(prom, start, time.time())
        (work / "dashboard.html").write_text(text)
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={work / 'chromium'}", "--hide-scrollbars", f"--screenshot={OUT}",
                        f"--window-size={24 * CELL_W + 10},{height}", f"file://{work / 'dashboard.html'}"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=120)
        print(f"wrote {OUT.relative_to(ROOT)}: {len(DASHBOARD['panels'])} panels, every query answered")
        return 0
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT if proc is procs[-1] else signal.SIGTERM)
        for proc in reversed(procs):
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
