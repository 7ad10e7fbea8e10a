//! The key table: every setting Fido understands, what it means, and
//! whether an untrusted workspace `fido.toml` may set it. A key's
//! environment name is `FIDO_` and the key in upper case (`max_steps` is
//! `FIDO_MAX_STEPS`); `layer` reads every layer through this table.

/// Whether an untrusted workspace `fido.toml` may set a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// Cannot redirect credentials, weaken safety or name a path: read from
    /// every layer.
    Anywhere,
    /// Read from a workspace file only once the folder is trusted
    /// (`fido trust`); the user file, the environment and flags always.
    Trusted,
    /// Read from the user config file only: a workspace `fido.toml`,
    /// trusted or not, never sets it, and neither do the environment and
    /// the command line, which a repository's scripts or `.env` loaders
    /// may set for you.
    UserFile,
}

/// The keys whose lists are `,`-separated (their entries hold `:`); a
/// file's list of strings is joined so.
pub(super) const COMMA_LISTS: &[&str] = &["network_allow", "network_deny", "env_passthrough"];

/// Every key Fido understands, with a one-line meaning (shown on errors)
/// and whether an untrusted workspace file may set it.
pub(super) const KEYS: &[(&str, &str, Scope)] = &[
    ("provider", "openai | anthropic | script", Scope::Trusted),
    (
        "base_url",
        "provider URL (openai: the URL /chat/completions is appended to)",
        Scope::Trusted,
    ),
    ("api_key", "provider API key", Scope::Trusted),
    ("model", "model name", Scope::Anywhere),
    (
        "script",
        "JSON file of assistant turns for the script provider",
        Scope::Trusted,
    ),
    ("plan_tool", "update_plan | todo", Scope::Anywhere),
    (
        "plan_file",
        "plan state file, inside the workspace",
        Scope::Trusted,
    ),
    (
        "max_steps",
        "model requests allowed in one turn",
        Scope::Anywhere,
    ),
    (
        "request_timeout_ms",
        "longest model request",
        Scope::Anywhere,
    ),
    (
        "idle_timeout_ms",
        "longest silence inside a model stream",
        Scope::Anywhere,
    ),
    (
        "max_retries",
        "retries of a failed model request",
        Scope::Anywhere,
    ),
    ("retry_base_ms", "first retry delay", Scope::Anywhere),
    ("retry_max_ms", "longest retry delay", Scope::Anywhere),
    (
        "bash_timeout_ms",
        "default bash_exec timeout",
        Scope::Anywhere,
    ),
    (
        "bash_max_timeout_ms",
        "longest bash_exec timeout",
        Scope::Anywhere,
    ),
    (
        "compact_threshold_tokens",
        "estimated context size that triggers compaction",
        Scope::Anywhere,
    ),
    (
        "compact_keep_tokens",
        "estimated size of the newest turns kept by compaction",
        Scope::Anywhere,
    ),
    ("compact_strategy", "summarize | elide", Scope::Anywhere),
    (
        "anthropic_max_tokens",
        "max_tokens sent to Anthropic",
        Scope::Anywhere,
    ),
    (
        "sandbox",
        "required | best_effort: what a subagent's sandbox must enforce",
        Scope::Trusted,
    ),
    (
        "sandbox_mode",
        "read-only | workspace-write | danger-full-access: the main agent's commands",
        Scope::Trusted,
    ),
    (
        "approval_policy",
        "untrusted | on-request | never: when to ask before commands and edits",
        Scope::Trusted,
    ),
    (
        "network",
        "true | false | allowlist: whether sandboxed commands may use the network (allowlist: only the hosts of network_allow, through Fido's proxy)",
        Scope::Trusted,
    ),
    (
        "network_allow",
        "hosts browse_url (and commands, with network = allowlist) may reach without asking: HOST or HOST:PORT, `*.` for subdomains (a list, or `,`-separated)",
        Scope::Trusted,
    ),
    (
        "network_deny",
        "hosts browse_url and commands never reach, even if allowed (a list, or `,`-separated)",
        Scope::Trusted,
    ),
    (
        "env_passthrough",
        "environment variables commands, hooks and MCP servers get although they look like secrets (a list of names; user config file only)",
        Scope::UserFile,
    ),
    (
        "command_max_processes",
        "processes and threads one sandboxed command may have at once (at least 299; Linux 6.14 or later)",
        Scope::Trusted,
    ),
    (
        "command_tmpdir_mib",
        "MiB the sandboxed commands' private TMPDIR may hold (a tmpfs, where Fido may mount one)",
        Scope::Trusted,
    ),
    (
        "writable_roots",
        "extra folders sandboxed commands may write (a list, or `:`-separated)",
        Scope::Trusted,
    ),
    (
        "delegate_write",
        "never | ask | allow: whether a delegate call with mode write may run (default: ask in the terminal UI, never for fido exec)",
        Scope::Trusted,
    ),
    (
        "delegate_merge",
        "ask | auto | manual: what happens to a write subagent's change set (default: ask in the terminal UI, manual for fido exec)",
        Scope::Trusted,
    ),
    (
        "delegate_diff_bytes",
        "bytes of a change set's diff a delegate_result carries (the full patch is a file)",
        Scope::Anywhere,
    ),
    (
        "delegate_timeout_ms",
        "default time limit of a subagent",
        Scope::Anywhere,
    ),
    (
        "delegate_max_timeout_ms",
        "longest time limit the model may ask for",
        Scope::Anywhere,
    ),
    (
        "delegate_grace_ms",
        "time a cancelled subagent has to send a partial result",
        Scope::Anywhere,
    ),
    (
        "delegate_max_steps",
        "model requests a subagent may make",
        Scope::Anywhere,
    ),
    (
        "delegate_concurrency",
        "subagents running at once (1 to 16); further calls queue in call order",
        Scope::Anywhere,
    ),
    (
        "delegate_max_per_turn",
        "subagents started in one turn; a call past it fails with delegation_limit",
        Scope::Anywhere,
    ),
    (
        "delegate_budget_tokens",
        "default token budget (prompt + completion) of one subagent; 0 for none",
        Scope::Anywhere,
    ),
    (
        "delegate_session_budget_tokens",
        "token budget of all subagents of a session together; 0 for none",
        Scope::Anywhere,
    ),
    (
        "context_window",
        "the model's context window in tokens, when the server does not report it",
        Scope::Anywhere,
    ),
    (
        "max_output_tokens",
        "longest answer the model may write in one request",
        Scope::Anywhere,
    ),
    (
        "loop_repeat_limit",
        "identical tool calls in a row before the model is warned (one more stops the turn)",
        Scope::Anywhere,
    ),
    (
        "provider_concurrency",
        "model requests in flight at once, the main agent's and its subagents' together",
        Scope::Anywhere,
    ),
    (
        "session_retention_days",
        "days a session journal is kept after its last write (pruned at start)",
        Scope::Anywhere,
    ),
    // Calls written as text still pass the guard, the sandbox and the
    // approval policy like any other.
    (
        "tool_call_fallback",
        "true | false: accept tool calls written as text (fenced json or <tool_call>)",
        Scope::Anywhere,
    ),
];
