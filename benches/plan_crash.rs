//! Crash injection during plan writes: `fido tool call update_plan` killed
//! with SIGKILL at a random instant, round after round, on one workspace.
//! After every round the plan file must parse and hold the plan of the
//! round before (killed before its rename) or of this round (killed after
//! it): never a torn or a missing one. Writers killed mid-write may leave
//! a temp file; the next write removes it, so at most one is left.
//!
//! `cargo bench --bench plan_crash` (`BENCH_CRASH_ROUNDS`, default 1000).
//! The kill instant is uniform between the spawn and 1.2 times the median
//! time of an unkilled write (measured first), so rounds end before the
//! process starts, during its start-up, during the write and after it.
//! Exits non-zero on any torn round or leftover beyond one temp file.

#[path = "support.rs"]
#[allow(dead_code)]
mod support;

use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::Sorted;

const PLAN_FILE: &str = ".fido-plan.json";
const CALIBRATION_RUNS: usize = 5;

fn main() -> ExitCode {
    match bench() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("plan_crash bench: {message}");
            ExitCode::FAILURE
        }
    }
}

/// What the rounds ended with.
#[derive(Default)]
struct Tally {
    old: usize,
    new: usize,
    torn: Vec<String>,
    rounds: Vec<f64>,
}

fn bench() -> Result<bool, String> {
    let rounds = support::env_count("BENCH_CRASH_ROUNDS", 1000)?;
    let fido = support::fido_binary("plan_crash")?;
    let ws = tempfile::tempdir().map_err(|e| e.to_string())?;
    let write = |round: usize| update_plan(&fido, ws.path(), round);
    let mut times = Vec::new();
    for round in 0..CALIBRATION_RUNS {
        let started = Instant::now();
        let status = write(round)
            .status()
            .map_err(|e| format!("cannot run fido: {e}"))?;
        if !status.success() {
            return Err(format!("an unkilled write failed: {status}"));
        }
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let write_ms = Sorted::new(times).median();
    let window = Duration::from_secs_f64(write_ms * 1.2 / 1e3);
    let mut tally = Tally::default();
    let mut previous = CALIBRATION_RUNS - 1;
    for round in CALIBRATION_RUNS..CALIBRATION_RUNS + rounds {
        let started = Instant::now();
        let mut child = write(round)
            .spawn()
            .map_err(|e| format!("cannot run fido: {e}"))?;
        std::thread::sleep(window.mul_f64(fastrand::f64()));
        let _ = child.kill();
        child.wait().map_err(|e| format!("cannot reap fido: {e}"))?;
        tally.rounds.push(started.elapsed().as_secs_f64() * 1e3);
        match saved_round(ws.path()) {
            Some(saved) if saved == round => {
                tally.new += 1;
                previous = round;
            }
            Some(saved) if saved == previous => tally.old += 1,
            other => tally.torn.push(format!(
                "round {round}: the plan holds {other:?}, not round {previous} or {round}"
            )),
        }
    }
    let leftovers = temp_files(ws.path())?;
    report(rounds, write_ms, &tally, &leftovers);
    Ok(tally.torn.is_empty() && leftovers.len() <= 1)
}

fn report(rounds: usize, write_ms: f64, tally: &Tally, leftovers: &[String]) {
    let times = Sorted::new(tally.rounds.clone());
    println!(
        "plan_crash: {rounds} rounds of `fido tool call update_plan` killed at a random instant within 1.2 x {write_ms:.1} ms (the median unkilled write)"
    );
    println!(
        "  ended with the old plan {}, the new plan {}, torn or missing {}",
        tally.old,
        tally.new,
        tally.torn.len()
    );
    println!(
        "  round wall: median {:.1} ms, max {:.1} ms; temp files left at the end: {} {:?}",
        times.median(),
        times.max(),
        leftovers.len(),
        leftovers
    );
    for torn in tally.torn.iter().take(10) {
        println!("  FAIL {torn}");
    }
    let verdict = if tally.torn.is_empty() && leftovers.len() <= 1 {
        "PASS"
    } else {
        "FAIL"
    };
    println!("target: every round old or new, at most one temp file left: {verdict}");
    support::table_row(
        "plan_crash",
        &format!(
            "`fido tool call update_plan` killed with SIGKILL at a random instant, {rounds} rounds"
        ),
        &format!(
            "old plan {}, new plan {}, torn or missing {}; temp files left {}",
            tally.old,
            tally.new,
            tally.torn.len(),
            leftovers.len()
        ),
        "0 torn",
        "—",
    );
}

/// One plan write whose reason names `round`.
fn update_plan(fido: &Path, ws: &Path, round: usize) -> Command {
    let args = json!({
        "reason": format!("round {round}"),
        "items": [
            {"id": "a", "title": "x".repeat(100), "status": "in_progress", "next_action": format!("step {round}")},
            {"id": "b", "title": "Second", "status": "pending", "next_action": "then"},
        ],
    });
    let mut command = Command::new(fido);
    command
        .arg("-C")
        .arg(ws)
        .args(["tool", "call", "update_plan", "--args"])
        .arg(args.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// The round the saved plan holds, when it parses whole and agrees with
/// itself (reason and next action name the same round).
fn saved_round(ws: &Path) -> Option<usize> {
    let text = std::fs::read_to_string(ws.join(PLAN_FILE)).ok()?;
    let plan: Value = serde_json::from_str(&text).ok()?;
    let round: usize = plan["reason"]
        .as_str()?
        .strip_prefix("round ")?
        .parse()
        .ok()?;
    let step = plan["items"][0]["next_action"].as_str()?;
    (step == format!("step {round}")).then_some(round)
}

fn temp_files(ws: &Path) -> Result<Vec<String>, String> {
    Ok(std::fs::read_dir(ws)
        .map_err(|e| e.to_string())?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".tmp-"))
        .collect())
}
