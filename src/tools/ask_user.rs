//! `ask_user`: put a question to the person at the keyboard.
//!
//! Headless runs have nobody to answer, so the model gets a failed result
//! telling it how to go on. The interactive answer path (the TUI showing the
//! question and returning the reply) is not wired yet; until it is, every
//! run gets the headless result.

use serde::Deserialize;
use serde_json::json;

use super::{Invocation, Tool, ToolFuture, ToolKind, ToolOutput, parse_args};
use crate::protocol::ToolSpec;

/// What the model gets when nobody can answer.
pub const NO_USER: &str = "No user is present (headless run): nobody can answer. Make a reasonable assumption and state it, or put the question in your final answer.";

pub struct AskUser;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    question: String,
}

impl Tool for AskUser {
    fn name(&self) -> &'static str {
        "ask_user"
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Interactive
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ask_user".into(),
            description: "Ask the user one short, specific question and wait for the answer. Use it only when you cannot reasonably proceed without their decision (e.g. two incompatible designs, a destructive step); otherwise make a sensible assumption and say so. In a headless run nobody can answer and the call fails.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "question": {
                        "type": "string",
                        "description": "The question, self-contained; offer the options if there are few."
                    }
                },
                "required": ["question"],
                "additionalProperties": false
            }),
        }
    }

    fn invoke<'a>(&'a self, invocation: Invocation<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: Args = match parse_args("ask_user", invocation.args) {
                Ok(args) => args,
                Err(refusal) => return refusal,
            };
            if args.question.trim().is_empty() {
                return ToolOutput::error("`question` is empty; write the question to ask");
            }
            // `env.user_present` will pick the interactive path once the TUI
            // answers; until then everyone gets the headless result.
            ToolOutput::error(NO_USER)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::path::testing::{call, env};

    #[tokio::test]
    async fn headless_cannot_answer() {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        let out = call(&AskUser, &env, json!({"question": "Which one?"})).await;
        assert!(!out.ok);
        assert_eq!(out.content, format!("Error: {NO_USER}"));
        let out = call(&AskUser, &env, json!({})).await;
        assert!(out.content.contains("invalid arguments"));
    }
}
