"""Markdown tables of a tests/real-model/measure run, from its log folder:
runs.tsv (case, run, test exit status, test wall s, the test's
`real_model::CASE: exit .., N s, usage {...}` line). Run it by hand on the
folder of an interrupted measurement to get the tables of the runs done."""

import json, re, statistics, sys

out, label, runs, model_id, url, started, load_start, load_end = sys.argv[1:]
results = f"{out}/runs.tsv"
LINE = re.compile(r"^real_model::\S+: exit (\S+), ([0-9.]+) s, usage (.*)$")

def parse(row):
    case, run, status, test_wall, line = (row.rstrip("\n").split("\t") + [""])[:5]
    m = LINE.match(line)
    usage = {}
    wall = float(test_wall)
    exit_code = "?"
    if m:
        exit_code, wall = m.group(1), float(m.group(2))
        try:
            usage = json.loads(m.group(3)) or {}
        except ValueError:
            usage = {}
    tools, end = what_happened(f"{out}/{case}-{run}.events")
    return {
        "tools": tools, "end": end,
        "case": case, "run": int(run), "ok": status == "0", "exit": exit_code,
        "wall": wall, "requests": usage.get("requests"),
        "prompt": usage.get("prompt_tokens"), "cached": usage.get("cached_tokens"),
        "completion": usage.get("completion_tokens"),
    }

def what_happened(path):
    """The tools called (name ×count) and how the turn ended, from the
    events FIDO_REAL_MODEL_EVENTS kept; "—" when there are none."""
    try:
        text = open(path, errors="replace").read().split("\n--- stderr\n")[0]
    except OSError:
        return "—", "—"
    counts, end = {}, "no turn_completed"
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        kind = event.get("type")
        if kind == "tool_call":
            counts[event.get("name")] = counts.get(event.get("name"), 0) + 1
        elif kind == "error":
            end = "error: " + str(event.get("message", ""))[:100]
        elif kind == "turn_completed" and event.get("status") == "completed":
            end = "completed"
    tools = ", ".join(f"{name} ×{n}" for name, n in counts.items()) or "none"
    return tools, end.replace("|", "/")


def share(cached, prompt):
    return f"{100 * cached / prompt:.0f} %" if prompt else "—"

def median(values):
    values = [v for v in values if v is not None]
    return f"{statistics.median(values):g}" if values else "—"

def num(v):
    return "—" if v is None else str(v)

with open(results) as f:
    rows = [parse(r) for r in f if r.strip()]
cases = list(dict.fromkeys(r["case"] for r in rows))

print(f"## Fido, {label} ({model_id}), {runs} runs per case\n")
print(f"- server: `{url}`; started {started}")
print(f"- load at start: `{load_start.strip()}`")
print(f"- load at end: `{load_end.strip()}`")
print(f"- logs: `{out}`\n")
summary = []
for case in cases:
    mine = [r for r in rows if r["case"] == case]
    print(f"### {case}\n")
    print("| run | result | fido exit | wall s | requests | prompt tokens | cached | completion tokens | tools called | end |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in mine:
        cached = share(r["cached"] or 0, r["prompt"] or 0)
        print(f"| {r['run']} | {'pass' if r['ok'] else 'FAIL'} | {r['exit']} | {r['wall']:.1f} | "
              f"{num(r['requests'])} | {num(r['prompt'])} | {cached} | {num(r['completion'])} | "
              f"{r['tools']} | {r['end']} |")
    print()
    walls = [r["wall"] for r in mine]
    prompt = sum(r["prompt"] or 0 for r in mine)
    cached = sum(r["cached"] or 0 for r in mine)
    summary.append(
        f"| {case} | {sum(r['ok'] for r in mine)}/{len(mine)} | "
        f"{statistics.median(walls):.1f} ({min(walls):.1f}–{max(walls):.1f}) | "
        f"{median([r['requests'] for r in mine])} | {median([r['prompt'] for r in mine])} | "
        f"{share(cached, prompt)} | {median([r['completion'] for r in mine])} |"
    )
print("### Summary\n")
print("| case | successes | wall s, median (min–max) | requests, median | prompt tokens, median | cached share (all runs) | completion tokens, median |")
print("|---|---|---|---|---|---|---|")
print("\n".join(summary))
