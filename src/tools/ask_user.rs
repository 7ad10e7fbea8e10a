//! `ask_user`: put a question to the person at the keyboard.
//!
//! In the terminal UI the question is shown and the next line the person
//! enters is the answer ([`UserChannel`]). Headless runs (and subagents, which
//! the invocation guard refuses anyway) have nobody to answer, so the model
//! gets a failed result telling it how to go on.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use super::Capability;
use super::{Call, ToolFuture, ToolOutput, TypedTool};
use crate::protocol::schema::tool_args;

/// What the model gets when nobody can answer.
pub const NO_USER: &str = "No user is present (headless run): nobody can answer. Make a reasonable assumption and state it, or put the question in your final answer.";

pub type AnswerFuture<'a> = Pin<Box<dyn Future<Output = Option<String>> + Send + 'a>>;

/// The person at the keyboard, as the UI offers them.
pub trait UserChannel: Send + Sync {
    /// Shows `question` and waits for the answer; `None` when the person
    /// dismissed it or the UI is gone.
    fn ask<'a>(&'a self, question: &'a str) -> AnswerFuture<'a>;
}

pub struct AskUser;

tool_args! {
    #[derive(Debug)]
    pub struct Args {
        question: String,
    }
}

impl TypedTool for AskUser {
    const NAME: &'static str = "ask_user";
    const CAPABILITY: Capability = Capability {
        needs_person: true,
        ..Capability::NONE
    };
    type Args = Args;

    fn description(&self) -> Cow<'static, str> {
        "Ask the user one short, self-contained question, only when you cannot go on without their decision; otherwise assume sensibly and say so. Fails in headless runs.".into()
    }

    fn run<'a>(&'a self, args: Args, call: Call<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            if args.question.trim().is_empty() {
                return ToolOutput::error("`question` is empty; write the question to ask");
            }
            let Some(user) = &call.env.user else {
                return ToolOutput::error(NO_USER);
            };
            let question = crate::text::sanitize(args.question.trim(), false);
            tokio::select! {
                answer = user.ask(&question) => match answer {
                    Some(answer) if !answer.trim().is_empty() => {
                        ToolOutput::ok(format!("The user answered: {}", answer.trim()))
                    }
                    _ => ToolOutput::error(
                        "the user dismissed the question without answering; decide sensibly and say what you assumed",
                    ),
                },
                _ = call.cancel.cancelled() => ToolOutput::error("cancelled by the user"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testing::{call, env};
    use serde_json::json;

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

    struct Answers(Option<String>);

    impl UserChannel for Answers {
        fn ask<'a>(&'a self, question: &'a str) -> AnswerFuture<'a> {
            assert_eq!(question, "Which one? (a or b)");
            Box::pin(async move { self.0.clone() })
        }
    }

    #[tokio::test]
    async fn a_person_answers_or_dismisses() {
        let dir = tempfile::tempdir().unwrap();
        let mut env = env(dir.path());
        env.user = Some(std::sync::Arc::new(Answers(Some("b, please".into()))));
        let out = call(&AskUser, &env, json!({"question": "Which one? (a or b)"})).await;
        assert!(out.ok);
        assert_eq!(out.content, "The user answered: b, please");
        env.user = Some(std::sync::Arc::new(Answers(None)));
        let out = call(&AskUser, &env, json!({"question": "Which one? (a or b)"})).await;
        assert!(
            !out.ok && out.content.contains("dismissed"),
            "{}",
            out.content
        );
    }
}
