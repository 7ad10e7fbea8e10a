//! The tools the model can call: one file per tool, one immutable catalog.
//!
//! Invariants:
//! - The catalog is built once per session and never changes: the same names,
//!   descriptions, schemas and order for the main agent and any subagent, so
//!   the provider's cached tool prefix holds. Policy is applied when a tool is
//!   invoked (see [`guard`]), never by changing the list.
//! - Every invocation returns a [`ToolOutput`], also for an unknown tool,
//!   arguments that are not JSON, a refused call or a cancelled one, so each
//!   tool call in the conversation gets exactly one result.
//! - Every path a tool touches is confined to the workspace
//!   ([`crate::workspace`]), and
//!   `.fido-*` state files are out of reach of the file tools.

pub mod approval;
pub mod ask_user;
pub mod bash_exec;
pub mod browse_url;
pub mod capability;
#[cfg(test)]
mod catalog_tests;
pub mod commit;
pub mod delegate;
pub mod editor;
mod file_work;
pub mod guard;
mod html;
pub mod list_files;
pub mod mkdir;
pub mod names;
pub mod page;
pub mod patch;
#[cfg(test)]
mod protected_tests;
pub mod read_file;
pub mod ripgrep;
pub mod rm;
pub mod rmdir;
#[cfg(test)]
pub(crate) mod testing;
pub mod todo;
pub mod update_plan;
pub mod web;

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::plan::{PlanFlavour, PlanSnapshot, PlanStore};
use crate::protocol::mcp::McpToolSpec;
use crate::protocol::schema::{ToolArgs, tool_args};
use crate::protocol::{Message, ToolCall, ToolFacts, ToolSpec};
use crate::store::undo::UndoLog;
use crate::workspace::Workspace;

pub use capability::{Capabilities, Capability};
pub use guard::{Identity, InvocationContext};

/// What a tool returns: the text the model gets and, for state tools, the
/// structured state for the UI and `fido tool call`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub ok: bool,
    /// Exactly the text placed in the tool result message.
    pub content: String,
    /// Structured details for `fido tool call` (a refusal's code, a
    /// delegation's result), else `None`; a plan tool's are in `plan`.
    pub details: Option<Value>,
    /// A plan tool's state after the call, for the `plan_updated` event
    /// (boxed: most results carry none, and results travel in `Err`s).
    pub plan: Option<Box<PlanSnapshot>>,
    /// What the call did, typed, for the front ends, which never read
    /// `content` for it (boxed, as `plan`).
    pub facts: Option<Box<ToolFacts>>,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput {
            ok: true,
            content: content.into(),
            details: None,
            plan: None,
            facts: None,
        }
    }

    /// A failed result. The text starts with `Error:` so a model that ignores
    /// the provider's error flag still reads it as a failure.
    pub fn error(message: impl AsRef<str>) -> Self {
        ToolOutput {
            ok: false,
            content: format!("Error: {}", message.as_ref()),
            details: None,
            plan: None,
            facts: None,
        }
    }

    /// This output with `facts` attached.
    pub fn with_facts(mut self, facts: ToolFacts) -> Self {
        self.facts = Some(Box::new(facts));
        self
    }

    /// What `fido tool call` prints as `details`: the plan object of a
    /// plan tool, else the details.
    pub fn details_json(&self) -> Option<Value> {
        match &self.plan {
            Some(plan) => Some(plan.to_json()),
            None => self.details.clone(),
        }
    }
}

/// Limits of the tools, from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolLimits {
    /// `bash_exec` timeout when the model names none.
    pub bash_default_timeout: Duration,
    /// Longest `bash_exec` timeout the model may ask for.
    pub bash_max_timeout: Duration,
    /// Most bytes of command output kept (head and tail, middle elided).
    pub bash_output_cap: usize,
    /// Most bytes `read_file` returns in one call.
    pub read_max_bytes: usize,
}

impl Default for ToolLimits {
    fn default() -> Self {
        ToolLimits {
            bash_default_timeout: Duration::from_secs(120),
            bash_max_timeout: Duration::from_secs(600),
            bash_output_cap: 30_000,
            read_max_bytes: 64 * 1024,
        }
    }
}

/// What tools run against: the workspace, the undo log and the limits.
pub struct ToolEnv {
    pub workspace: Workspace,
    pub undo: UndoLog,
    /// The plan (`update_plan` writes it; the agent reads it for the
    /// settle reminder): the workspace's, or a subagent's own in memory.
    pub plan: PlanStore,
    /// The `todo` flavour's list, kept where `plan` is.
    pub todos: crate::plan::todo::TodoStore,
    pub limits: ToolLimits,
    /// The person who answers `ask_user`; `None` when headless.
    pub user: Option<Arc<dyn ask_user::UserChannel>>,
    /// Runs subagents for `delegate`; `None` inside a subagent and for
    /// single `fido tool call` invocations.
    pub delegator: Option<std::sync::Arc<dyn delegate::Delegator>>,
    /// The sandbox `bash_exec` runs commands in (a mode switch replaces it).
    pub sandbox: crate::sandbox::SandboxSlot,
    /// Which of Fido's variables `bash_exec`'s commands get.
    pub env_policy: crate::process::EnvPolicy,
    /// Asks the person before commands and file changes, as the policy says.
    pub approvals: approval::Approvals,
    /// The user's hooks; none inside a subagent, whose calls its sandbox
    /// confines instead.
    pub hooks: Arc<crate::hooks::Hooks>,
    /// Where `browse_url` fetches (the parent's browser, or the link to
    /// it in a subagent); `None`: browsing is not available.
    pub web: Option<Arc<dyn web::Web>>,
    /// The session's allowlist proxy (`network = "allowlist"`), whose
    /// refusals `bash_exec` adds to a command's output. Dropping the last
    /// reference stops it.
    pub proxy: Option<Arc<crate::net::proxy::Proxy>>,
    /// The editor whose buffers `read_file` reads (an ACP client with
    /// `fs.readTextFile`); `None`: the disk.
    pub editor: Option<Arc<dyn editor::EditorFiles>>,
}

/// One invocation, as handed to a tool: the raw arguments and the call.
pub struct Invocation<'a> {
    pub args: Value,
    pub call: Call<'a>,
}

/// Everything about a call but its arguments.
pub struct Call<'a> {
    /// The id of the model's call.
    pub call_id: &'a str,
    pub env: &'a ToolEnv,
    pub ctx: &'a InvocationContext,
    /// Cancelled when the user interrupts; long tools must stop promptly.
    pub cancel: &'a CancellationToken,
    /// Where a file change becomes certain ([`commit::CommitPoint`]): a
    /// cancel before it changes nothing, one after waits for the change.
    pub commit_point: &'a commit::CommitPoint,
    /// The conversation at the instant of the call (for `delegate`'s fork).
    pub conversation: &'a [Message],
}

pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = ToolOutput> + Send + 'a>>;

/// A tool as the catalog holds it. Built-in tools implement [`TypedTool`]
/// instead; MCP tools, whose schemas come from servers at run time,
/// implement this directly.
pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    /// What a call may do; the guard decides on this (a built-in tool's
    /// is its [`TypedTool::CAPABILITY`]).
    fn capability(&self) -> Capability;
    /// Description and JSON schema, written for a model. Called once, when
    /// the catalog is built.
    fn spec(&self) -> ToolSpec;
    fn invoke<'a>(&'a self, invocation: Invocation<'a>) -> ToolFuture<'a>;
}

/// A built-in tool: its name stated once, and arguments parsed into `Args`,
/// whose type also generates the advertised schema (see
/// [`crate::protocol::schema`]).
pub trait TypedTool: Send + Sync {
    const NAME: &'static str;
    /// What a call may do: what the invocation guard, the agent loop and
    /// ACP decide on.
    const CAPABILITY: Capability;
    type Args: ToolArgs + Send;
    /// The description, written for a model.
    fn description(&self) -> Cow<'static, str>;
    /// The `parameters` schema; a tool whose schema depends on the session
    /// (`delegate`'s profiles) extends its `Args`' one.
    fn parameters(&self) -> Value {
        Self::Args::parameters()
    }
    fn run<'a>(&'a self, args: Self::Args, call: Call<'a>) -> ToolFuture<'a>;
}

impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        T::NAME
    }

    fn capability(&self) -> Capability {
        T::CAPABILITY
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: T::NAME.into(),
            description: self.description().into_owned(),
            parameters: self.parameters(),
        }
    }

    fn invoke<'a>(&'a self, invocation: Invocation<'a>) -> ToolFuture<'a> {
        match parse_args::<T::Args>(T::NAME, invocation.args) {
            Ok(args) => self.run(args, invocation.call),
            Err(refusal) => Box::pin(std::future::ready(refusal)),
        }
    }
}

/// Parses a tool's arguments, turning a mismatch into an error that shows
/// the model the expected shape.
fn parse_args<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, ToolOutput> {
    serde_json::from_value(args).map_err(|err| {
        ToolOutput::error(format!(
            "invalid arguments for {tool}: {err}. Call {tool} with an object matching its JSON schema."
        ))
    })
}

/// A file change by `tool` at `path`: asked of the person as the approval
/// policy says (`describe` is what they read), then made by `change`,
/// which gets the arguments back, on the blocking pool.
fn approved_file_change<'a, A: Send + 'static>(
    tool: &'static str,
    (path, describe): (String, String),
    args: A,
    call: Call<'a>,
    change: fn(&file_work::FileEnv, &A) -> ToolOutput,
) -> ToolFuture<'a> {
    Box::pin(async move {
        let env = call.env;
        if let Err(refusal) = env.approvals.file_change(tool, &path, || describe).await {
            return refusal.into_output();
        }
        let files = file_work::FileEnv::of(&call);
        file_work::off_runtime(tool, move || change(&files, &args))
            .await
            .unwrap_or_else(|failed| failed)
    })
}

tool_args! {
    /// The arguments of a tool whose one argument is a workspace path (that
    /// paths are workspace-relative is said once, in the system prompt).
    #[derive(Debug)]
    pub struct PathArgs {
        pub path: String,
    }
}

/// The session's MCP servers as the catalog and the supervisor use them.
/// `mcp::McpHub` implements it; a trait here keeps `tools` (which the MCP
/// tools are built on) from importing `mcp`.
pub trait McpServers: Send + Sync {
    /// The catalog's MCP tools, in catalog order, calling these servers.
    fn catalog_tools(self: Arc<Self>) -> Vec<Box<dyn Tool>>;
    /// The MCP tools in catalog order, as the fork carries them.
    fn tool_specs(&self) -> Vec<McpToolSpec>;
    /// A subagent's call, proxied by its parent (read-only servers only);
    /// `cap` bounds the text.
    fn call_for_subagent<'a>(
        &'a self,
        tool: &'a str,
        arguments: &'a str,
        cancel: &'a CancellationToken,
        cap: usize,
    ) -> ToolFuture<'a>;
}

/// The immutable list of tools advertised to the model.
pub struct ToolCatalog {
    tools: Vec<Box<dyn Tool>>,
    specs: Vec<ToolSpec>,
    /// The session's MCP servers (the parent's catalog only).
    mcp: Option<Arc<dyn McpServers>>,
}

impl ToolCatalog {
    /// The standard catalog, in its fixed order, advertising the plan tool
    /// of `flavour`.
    pub fn standard(flavour: PlanFlavour) -> Arc<ToolCatalog> {
        Arc::new(ToolCatalog::from_tools(ToolCatalog::builtin(
            flavour,
            Vec::new(),
        )))
    }

    /// The standard catalog followed by the MCP tools of `hub`, in its
    /// fixed order (the parent's catalog of a session).
    pub fn with_mcp(
        flavour: PlanFlavour,
        profiles: Vec<delegate::ProfileOffer>,
        hub: Arc<dyn McpServers>,
    ) -> Arc<ToolCatalog> {
        let mut tools = ToolCatalog::builtin(flavour, profiles);
        tools.extend(hub.clone().catalog_tools());
        let mut catalog = ToolCatalog::from_tools(tools);
        catalog.mcp = Some(hub);
        Arc::new(catalog)
    }

    /// The standard catalog followed by `extra` tools (a subagent's MCP
    /// proxies), so its specs are the parent's byte for byte.
    pub fn with_extra(
        flavour: PlanFlavour,
        profiles: Vec<delegate::ProfileOffer>,
        extra: Vec<Box<dyn Tool>>,
    ) -> Arc<ToolCatalog> {
        let mut tools = ToolCatalog::builtin(flavour, profiles);
        tools.extend(extra);
        Arc::new(ToolCatalog::from_tools(tools))
    }

    /// The built-in tools, in their fixed order.
    fn builtin(flavour: PlanFlavour, profiles: Vec<delegate::ProfileOffer>) -> Vec<Box<dyn Tool>> {
        let plan_tool: Box<dyn Tool> = match flavour {
            PlanFlavour::UpdatePlan => Box::new(update_plan::UpdatePlan),
            PlanFlavour::Todo => Box::new(todo::Todo),
        };
        let tools: Vec<Box<dyn Tool>> = vec![
            Box::new(list_files::ListFiles),
            Box::new(read_file::ReadFile),
            Box::new(ripgrep::Ripgrep),
            Box::new(browse_url::BrowseUrl),
            Box::new(patch::Patch),
            Box::new(mkdir::Mkdir),
            Box::new(rm::Rm),
            Box::new(rmdir::Rmdir),
            Box::new(bash_exec::BashExec),
            Box::new(ask_user::AskUser),
            plan_tool,
            Box::new(delegate::Delegate::new(profiles)),
        ];
        tools
    }

    pub fn from_tools(tools: Vec<Box<dyn Tool>>) -> ToolCatalog {
        let specs = tools.iter().map(|t| t.spec()).collect();
        ToolCatalog {
            tools,
            specs,
            mcp: None,
        }
    }

    /// The MCP servers behind this catalog's MCP tools (parent side).
    pub fn mcp(&self) -> Option<&Arc<dyn McpServers>> {
        self.mcp.as_ref()
    }

    /// The advertised specifications, in order.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    pub fn names(&self) -> Vec<String> {
        self.specs.iter().map(|s| s.name.clone()).collect()
    }

    pub fn capability_of(&self, name: &str) -> Option<Capability> {
        self.tools
            .iter()
            .find(|t| t.name() == name)
            .map(|t| t.capability())
    }

    /// The tool `name` starts a subagent (a subagent's call of it is
    /// refused).
    pub fn starts_subagent(&self, name: &str) -> bool {
        self.capability_of(name)
            .is_some_and(|capability| capability.starts_subagent)
    }

    /// The tool `name` changes the plan (its result carries the plan).
    pub fn changes_plan(&self, name: &str) -> bool {
        self.capability_of(name)
            .is_some_and(|capability| capability.changes_plan)
    }

    /// Every tool's capability by name, for a front end.
    pub fn capabilities(&self) -> Capabilities {
        Capabilities::new(
            self.tools
                .iter()
                .map(|t| (t.name().to_string(), t.capability())),
        )
    }

    /// Runs one tool call: finds the tool, applies the invocation guard,
    /// parses the arguments and invokes it. Never fails: every problem is an
    /// error result for the model.
    pub async fn invoke(
        &self,
        call: &ToolCall,
        env: &ToolEnv,
        ctx: &InvocationContext,
        conversation: &[Message],
        cancel: &CancellationToken,
    ) -> ToolOutput {
        let commit_point = commit::CommitPoint::default();
        self.invoke_committing(call, env, ctx, conversation, (cancel, &commit_point))
            .await
    }

    /// [`ToolCatalog::invoke`] with the call's commit point in `commit_point`,
    /// which the caller's wait reads on a cancel
    /// ([`commit::until_cancelled`]).
    pub async fn invoke_committing(
        &self,
        call: &ToolCall,
        env: &ToolEnv,
        ctx: &InvocationContext,
        conversation: &[Message],
        (cancel, commit_point): (&CancellationToken, &commit::CommitPoint),
    ) -> ToolOutput {
        let Some(tool) = self.tools.iter().find(|t| t.name() == call.name) else {
            return ToolOutput::error(format!(
                "unknown tool `{}`. Available tools: {}.",
                crate::text::short(&call.name, 60),
                self.names().join(", ")
            ));
        };
        if let Err(refusal) = guard::check(
            tool.name(),
            tool.capability(),
            ctx,
            env.sandbox.current().is_subagent_shell(),
        ) {
            return refusal;
        }
        let args = match parse_arguments(&call.arguments) {
            Ok(args) => args,
            Err(bad) => return ToolOutput::error(format!("{}: {bad}", call.name)),
        };
        if cancel.is_cancelled() {
            return ToolOutput::error("cancelled before it started");
        }
        tool.invoke(Invocation {
            args,
            call: Call {
                call_id: &call.id,
                env,
                ctx,
                cancel,
                commit_point,
                conversation,
            },
        })
        .await
    }
}

/// Why a call's arguments were not read; the model reads it after the
/// tool's name.
#[derive(Debug, thiserror::Error)]
enum BadArguments {
    #[error("arguments must be a JSON object")]
    NotAnObject,
    #[error("arguments are not valid JSON ({0}); send one JSON object matching the tool's schema")]
    NotJson(serde_json::Error),
}

/// Tool-call arguments as JSON. An empty string counts as `{}` (some servers
/// send nothing for a call without arguments).
fn parse_arguments(raw: &str) -> Result<Value, BadArguments> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(BadArguments::NotAnObject),
        Err(err) => Err(BadArguments::NotJson(err)),
    }
}
