"""Markdown tables of a tests/real-model/pi run, from its log folder:
runs.tsv (case, run, exit status, wall s) and each run's `pi --mode json`
event log, final src/lib.rs and data2.txt last line."""

import json
import statistics
import sys
from pathlib import Path

EDITED = "pub fn frob() -> u32 {\n    43\n}\n"


def events(path):
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def assistant_messages(evs):
    return [
        e["message"]
        for e in evs
        if e.get("type") == "message_end" and e.get("message", {}).get("role") == "assistant"
    ]


def text_of(message):
    content = message.get("content") or []
    if isinstance(content, str):
        return content
    return "".join(c.get("text", "") for c in content if c.get("type") == "text")


def run_row(out, case, run, status, wall):
    stem = out / f"{case}-{run}"
    evs = events(Path(f"{stem}.jsonl"))
    messages = assistant_messages(evs)
    usage = [m.get("usage") or {} for m in messages]
    prompt = sum(u.get("input", 0) + u.get("cacheRead", 0) + u.get("cacheWrite", 0) for u in usage)
    cached = sum(u.get("cacheRead", 0) for u in usage)
    completion = sum(u.get("output", 0) for u in usage)
    tools = [e.get("toolName", "?") for e in evs if e.get("type") == "tool_execution_start"]
    last = messages[-1] if messages else {}
    # All the assistant's text, as the Fido cases join every assistant_text.
    answer = "\n".join(text_of(m) for m in messages)
    stopped = Path(f"{stem}.jsonl.stopped").exists()
    ended = (
        status == "0"
        and not stopped
        and bool(messages)
        and last.get("stopReason") not in ("error", "aborted")
    )
    note = ""
    if case == "read_and_answer":
        ok = "42" in answer
    elif case == "one_line_edit_is_on_disk":
        ok = Path(f"{stem}.lib.rs").read_text() == EDITED
    else:
        # As the Fido case: both files read whole overflow the window, so a
        # success compacted (a compaction that finished) and still ended
        # with an answer.
        last_line = Path(f"{stem}.last-line")
        compacted = any(e.get("type") == "compaction_end" for e in evs)
        ok = ended and compacted
        right = last_line.exists() and last_line.read_text().strip() in answer
        note = f"compacted: {'yes' if compacted else 'no'}; last line of data2 right: {'yes' if right else 'no'}"
    if stopped:
        note = (note + "; " if note else "") + f"stopped at {len(messages)} requests"
    if last.get("stopReason") in ("error", "aborted"):
        note = (note + "; " if note else "") + "error: " + str(last.get("errorMessage", ""))[:120]
    return {
        "run": run, "ok": ok, "status": status, "wall": float(wall), "requests": len(messages),
        "prompt": prompt, "cached": cached, "completion": completion,
        "tools": tool_summary(tools), "note": note,
    }


def tool_summary(tools):
    counts = {}
    for name in tools:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{name} ×{n}" for name, n in counts.items()) or "none"


def share(cached, prompt):
    return f"{100 * cached / prompt:.0f} %" if prompt else "—"


def main():
    out, model, runs, version, load_start, load_end = sys.argv[1:]
    out = Path(out)
    rows = {}
    for line in (out / "runs.tsv").read_text().splitlines():
        case, run, status, wall = line.split("\t")
        rows.setdefault(case, []).append(run_row(out, case, int(run), status, wall))
    print(f"## pi {version}, {model}, {runs} runs per case\n")
    print(f"- load at start: `{load_start.strip()}`")
    print(f"- load at end: `{load_end.strip()}`")
    print(f"- logs: `{out}`\n")
    summary = []
    for case, mine in rows.items():
        print(f"### {case}\n")
        print("| run | result | pi exit | wall s | requests | prompt tokens | cached | completion tokens | tools called | note |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in mine:
            print(f"| {r['run']} | {'pass' if r['ok'] else 'FAIL'} | {r['status']} | {r['wall']:.1f} | "
                  f"{r['requests']} | {r['prompt']} | {share(r['cached'], r['prompt'])} | "
                  f"{r['completion']} | {r['tools']} | {r['note']} |")
        print()
        walls = [r["wall"] for r in mine]
        summary.append(
            f"| {case} | {sum(r['ok'] for r in mine)}/{len(mine)} | "
            f"{statistics.median(walls):.1f} ({min(walls):.1f}–{max(walls):.1f}) | "
            f"{statistics.median(r['requests'] for r in mine):g} | "
            f"{statistics.median(r['prompt'] for r in mine):g} | "
            f"{share(sum(r['cached'] for r in mine), sum(r['prompt'] for r in mine))} | "
            f"{statistics.median(r['completion'] for r in mine):g} |"
        )
    print("### Summary\n")
    print("| case | successes | wall s, median (min–max) | requests, median | prompt tokens, median | cached share (all runs) | completion tokens, median |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(summary))


main()
