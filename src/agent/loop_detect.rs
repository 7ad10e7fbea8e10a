//! Loop detection within one turn: a weak model repeats the same tool call,
//! a cycle of two or three calls, or the same text, again and again.
//!
//! At `limit` repetitions the detector warns (the turn loop appends a note to
//! that call's result); one more repetition stops the turn with a clear
//! message. A call's signature is its name and its arguments as canonical
//! JSON (object keys sorted, whitespace dropped), so the same call written
//! with other spacing or key order is the same call.

use serde_json::Value;

/// What the turn loop does with an observed call or text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Fine,
    /// The `limit`-th repetition: run it, and tell the model.
    Warn(Repetition),
    /// One repetition more: do not run it; end the turn with
    /// [`Repetition::stop_message`].
    Stop(Repetition),
}

/// What repeats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repetition {
    /// The same call (name, arguments) `times` in a row.
    Call { name: String, times: u32 },
    /// The same cycle of calls, named in order, `times` in a row.
    Cycle { names: Vec<String>, times: u32 },
    /// The same answer text `times` in a row.
    Text { times: u32 },
}

impl Repetition {
    /// The sentence that ends the turn.
    pub fn stop_message(&self) -> String {
        match self {
            Repetition::Call { name, times } => {
                format!("stopped: the model repeated the same call to {name} {times} times")
            }
            Repetition::Cycle { names, times } => format!(
                "stopped: the model repeated the same cycle of {} calls ({}) {times} times",
                names.len(),
                names.join(", ")
            ),
            Repetition::Text { times } => {
                format!("stopped: the model repeated the same answer {times} times")
            }
        }
    }

    /// The note the model gets with the result of the warned call.
    /// `unchanged`: the result equals the previous identical call's.
    /// `text_next`: the call already worked, so the next answer is asked
    /// for in text (tools off for one reply).
    pub fn note(&self, unchanged: bool, text_next: bool) -> String {
        let result = if unchanged {
            "the result has not changed since the last identical call"
        } else {
            "the result differs from the last identical call"
        };
        let next = if text_next {
            "You have what this call gives: your next reply cannot call tools, so answer from the results you have."
        } else {
            "Do not repeat it: use the result you have, try something different, or give your answer."
        };
        match self {
            Repetition::Call { name, times } => format!(
                "[Fido: this is call {times} in a row to {name} with the same arguments; {result}. {next} One more identical call ends the turn.]"
            ),
            Repetition::Cycle { names, times } => format!(
                "[Fido: the calls {} have now been repeated {times} times in the same order; {result}. Stop cycling. {next} One more cycle ends the turn.]",
                names.join(", ")
            ),
            Repetition::Text { times } => format!(
                "[Fido: you have written the same answer {times} times in a row. Do something different or finish. Once more ends the turn.]"
            ),
        }
    }
}

/// Watches one turn's calls and texts.
#[derive(Debug)]
pub struct LoopDetector {
    limit: u32,
    /// Signatures of every call of the turn, in order, with its name.
    calls: Vec<(String, String)>,
    /// Index in `calls` of the last warning, so a cycle warns once.
    warned_at: Option<usize>,
    last_text: Option<String>,
    text_times: u32,
}

impl LoopDetector {
    /// `limit`: repetitions that earn a warning (at least 2).
    pub fn new(limit: u32) -> Self {
        LoopDetector {
            limit: limit.max(2),
            calls: Vec::new(),
            warned_at: None,
            last_text: None,
            text_times: 0,
        }
    }

    /// Records a call the model made, before it runs.
    pub fn observe_call(&mut self, name: &str, arguments: &str) -> Verdict {
        self.calls
            .push((signature(name, arguments), name.to_string()));
        let index = self.calls.len() - 1;
        let same = self.repeats(1);
        if same > 1 {
            let repetition = Repetition::Call {
                name: name.to_string(),
                times: same,
            };
            return self.judge(same, index, 1, repetition);
        }
        for period in [2, 3] {
            let times = self.repeats(period);
            if times > 1 {
                let names = self.calls[index + 1 - period..]
                    .iter()
                    .map(|(_, n)| n.clone())
                    .collect();
                return self.judge(times, index, period, Repetition::Cycle { names, times });
            }
        }
        Verdict::Fine
    }

    /// Records a text the model wrote (blank text is ignored).
    pub fn observe_text(&mut self, text: &str) -> Verdict {
        let text = text.trim();
        if text.is_empty() {
            return Verdict::Fine;
        }
        if self.last_text.as_deref() == Some(text) {
            self.text_times += 1;
        } else {
            self.last_text = Some(text.to_string());
            self.text_times = 1;
        }
        let repetition = Repetition::Text {
            times: self.text_times,
        };
        match self.text_times {
            n if n > self.limit => Verdict::Stop(repetition),
            n if n == self.limit => Verdict::Warn(repetition),
            _ => Verdict::Fine,
        }
    }

    fn judge(
        &mut self,
        times: u32,
        index: usize,
        period: usize,
        repetition: Repetition,
    ) -> Verdict {
        if times > self.limit {
            return Verdict::Stop(repetition);
        }
        let warned_recently = self.warned_at.is_some_and(|at| index - at < period);
        if times == self.limit && !warned_recently {
            self.warned_at = Some(index);
            return Verdict::Warn(repetition);
        }
        Verdict::Fine
    }

    /// How many times the last `period` calls repeat back to back at the end
    /// of the sequence; 0 when that block is itself a shorter repetition (a
    /// run of one call is period 1, not 2).
    fn repeats(&self, period: usize) -> u32 {
        let calls = &self.calls;
        if calls.len() < period {
            return 0;
        }
        let block = &calls[calls.len() - period..];
        if period > 1 && block.iter().all(|(sig, _)| *sig == block[0].0) {
            return 0;
        }
        let mut times = 1;
        let mut end = calls.len() - period;
        while end >= period
            && calls[end - period..end]
                .iter()
                .zip(block)
                .all(|(a, b)| a.0 == b.0)
        {
            times += 1;
            end -= period;
        }
        times
    }
}

/// Name plus canonical arguments; arguments that are not JSON count as their
/// trimmed text.
pub fn signature(name: &str, arguments: &str) -> String {
    let args = match serde_json::from_str::<Value>(arguments) {
        Ok(value) => canonical(&value),
        Err(_) => arguments.trim().to_string(),
    };
    format!("{name}\u{0}{args}")
}

fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let inner: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{}:{}", Value::from(k.as_str()), canonical(v)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", inner.join(","))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(detector: &mut LoopDetector, calls: &[(&str, &str)]) -> Vec<Verdict> {
        calls
            .iter()
            .map(|(name, args)| detector.observe_call(name, args))
            .collect()
    }

    #[test]
    fn the_same_call_warns_at_the_limit_and_stops_one_later() {
        let mut d = LoopDetector::new(3);
        let read = ("read_file", r#"{"path": "src/lib.rs"}"#);
        // Other spacing and key order are the same call.
        let respaced = ("read_file", "{\n  \"path\":\"src/lib.rs\"\n}");
        let verdicts = run(&mut d, &[read, respaced, read, read]);
        assert_eq!(verdicts[0], Verdict::Fine);
        assert_eq!(verdicts[1], Verdict::Fine);
        assert!(
            matches!(&verdicts[2], Verdict::Warn(Repetition::Call { name, times: 3 }) if name == "read_file")
        );
        let Verdict::Stop(stop) = &verdicts[3] else {
            panic!("{verdicts:?}");
        };
        assert_eq!(
            stop.stop_message(),
            "stopped: the model repeated the same call to read_file 4 times"
        );
    }

    #[test]
    fn different_arguments_reset_the_count() {
        let mut d = LoopDetector::new(3);
        let a = ("read_file", r#"{"path": "a"}"#);
        let b = ("read_file", r#"{"path": "b"}"#);
        let verdicts = run(&mut d, &[a, a, b, b, a, a]);
        assert!(verdicts.iter().all(|v| *v == Verdict::Fine), "{verdicts:?}");
    }

    #[test]
    fn cycles_of_two_and_three_calls_are_caught() {
        let mut d = LoopDetector::new(3);
        let a = ("read_file", r#"{"path": "a"}"#);
        let b = ("list_files", r#"{"path": "."}"#);
        let verdicts = run(&mut d, &[a, b, a, b, a, b, a, b]);
        let warns = verdicts
            .iter()
            .filter(|v| matches!(v, Verdict::Warn(_)))
            .count();
        assert_eq!(warns, 1, "{verdicts:?}");
        assert!(matches!(
            verdicts[5],
            Verdict::Warn(Repetition::Cycle { times: 3, .. })
        ));
        let Verdict::Stop(stop) = &verdicts[7] else {
            panic!("{verdicts:?}");
        };
        assert_eq!(
            stop.stop_message(),
            "stopped: the model repeated the same cycle of 2 calls (read_file, list_files) 4 times"
        );

        let mut d = LoopDetector::new(2);
        let c = ("ripgrep", r#"{"pattern": "x"}"#);
        let verdicts = run(&mut d, &[a, b, c, a, b, c, a, b, c]);
        assert!(matches!(
            verdicts[5],
            Verdict::Warn(Repetition::Cycle { times: 2, .. })
        ));
        assert!(matches!(
            verdicts[8],
            Verdict::Stop(Repetition::Cycle { times: 3, .. })
        ));
        assert!(verdicts[..5].iter().all(|v| *v == Verdict::Fine));
    }

    #[test]
    fn repeated_text_is_treated_the_same_way() {
        let mut d = LoopDetector::new(3);
        assert_eq!(d.observe_text("I will read the file."), Verdict::Fine);
        assert_eq!(d.observe_text("  I will read the file.\n"), Verdict::Fine);
        assert!(matches!(
            d.observe_text("I will read the file."),
            Verdict::Warn(_)
        ));
        let Verdict::Stop(stop) = d.observe_text("I will read the file.") else {
            panic!("no stop");
        };
        assert_eq!(
            stop.stop_message(),
            "stopped: the model repeated the same answer 4 times"
        );
        assert_eq!(d.observe_text("something else"), Verdict::Fine);
        assert_eq!(d.observe_text(""), Verdict::Fine);
    }

    #[test]
    fn signatures_ignore_layout_but_not_values() {
        assert_eq!(
            signature("f", r#"{"b": 1, "a": [1, {"y": 2, "x": 1}]}"#),
            signature("f", r#"{"a":[1,{"x":1,"y":2}],"b":1}"#)
        );
        assert_ne!(signature("f", r#"{"a": 1}"#), signature("f", r#"{"a": 2}"#));
        assert_ne!(signature("f", "{}"), signature("g", "{}"));
        assert_eq!(signature("f", " {oops "), signature("f", "{oops"));
    }
}
