//! `AgentActor`: owns one agent's conversation and runs its turns.
//!
//! The handler never stays open for a turn: `SubmitPrompt` moves the
//! conversation into a spawned task, which posts it back with
//! `TurnFinished`. So `Interrupt` is handled while a turn runs, and the
//! conversation has exactly one owner at any time.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio_util::sync::CancellationToken;

use super::{AgentDeps, Conversation, TurnOutcome, run_turn};
use crate::protocol::{TurnStatus, UsageTotals};

pub struct AgentActor;

pub struct AgentArguments {
    pub deps: Arc<AgentDeps>,
    pub conversation: Conversation,
}

pub enum AgentMessage {
    /// Start a turn with this prompt; the reply comes when the turn ends.
    /// Refused (status `Failed`) while another turn runs.
    SubmitPrompt {
        prompt: String,
        reply: RpcReplyPort<TurnOutcome>,
    },
    /// Cancel the running turn (Ctrl+C, SIGINT, SIGTERM). The turn ends with
    /// `Interrupted` after every started tool call has its result.
    Interrupt,
    /// Cancel the running subagent only (the TUI's Esc); the turn goes on
    /// with the subagent's cancelled (partial or failed) result.
    CancelSubagent,
    /// Internal: the turn task hands the conversation back.
    TurnFinished {
        conversation: Box<Conversation>,
        outcome: TurnOutcome,
    },
    /// A copy of the conversation as it is between turns (for saving and
    /// tests); `None` while a turn runs.
    Snapshot(RpcReplyPort<Option<Conversation>>),
}

pub struct AgentState {
    deps: Arc<AgentDeps>,
    conversation: Option<Conversation>,
    running: Option<RunningTurn>,
    turns: u32,
}

struct RunningTurn {
    cancel: CancellationToken,
    reply: RpcReplyPort<TurnOutcome>,
}

impl Actor for AgentActor {
    type Msg = AgentMessage;
    type State = AgentState;
    type Arguments = AgentArguments;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: AgentArguments,
    ) -> Result<AgentState, ActorProcessingErr> {
        Ok(AgentState {
            deps: args.deps,
            conversation: Some(args.conversation),
            running: None,
            turns: 0,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: AgentMessage,
        state: &mut AgentState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            AgentMessage::SubmitPrompt { prompt, reply } => {
                let Some(mut conversation) = state.conversation.take() else {
                    // The reply port may be gone already; nothing else to tell.
                    let _ = reply.send(busy());
                    return Ok(());
                };
                state.turns += 1;
                let turn = state.turns;
                let cancel = CancellationToken::new();
                state.running = Some(RunningTurn {
                    cancel: cancel.clone(),
                    reply,
                });
                let deps = state.deps.clone();
                tokio::spawn(async move {
                    let outcome = run_turn(&mut conversation, &deps, prompt, turn, &cancel).await;
                    // Fails only when the actor is gone, and then so is the reply.
                    let _ = myself.cast(AgentMessage::TurnFinished {
                        conversation: Box::new(conversation),
                        outcome,
                    });
                });
            }
            AgentMessage::Interrupt => {
                if let Some(running) = &state.running {
                    running.cancel.cancel();
                }
            }
            AgentMessage::CancelSubagent => {
                if let Some(delegator) = &state.deps.tool_env.delegator {
                    delegator.cancel_running();
                }
            }
            AgentMessage::TurnFinished {
                conversation,
                outcome,
            } => {
                state.conversation = Some(*conversation);
                if let Some(running) = state.running.take() {
                    let _ = running.reply.send(outcome);
                }
            }
            AgentMessage::Snapshot(reply) => {
                let _ = reply.send(state.conversation.clone());
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut AgentState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(running) = state.running.take() {
            running.cancel.cancel();
        }
        Ok(())
    }
}

fn busy() -> TurnOutcome {
    TurnOutcome {
        status: TurnStatus::Failed,
        final_text: None,
        error: Some("a turn is already running; interrupt it first".into()),
        usage: UsageTotals::default(),
    }
}
