//! The model's limits as the turn loop uses them: the context window (learned
//! from the server, capped by the configuration, or from the error that
//! refused a request), the compaction budget derived from it, and the output
//! cap each request may ask for.
//!
//! Invariant: with a known window, compaction starts at 75% of it (or the
//! configured threshold, if lower) and keeps at most a quarter of it, and no
//! request asks for more output than the window leaves after the prompt.

use super::CompactionSettings;
use crate::protocol::ToolSpec;
use crate::provider::ProviderError;
use crate::provider::limits::overflow_in;

/// Limits and habits of the model, from the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelLimits {
    /// `context_window`: the window when the server does not say, and an
    /// upper bound on what it says.
    pub context_window: Option<u32>,
    /// `max_output_tokens`: longest answer asked for in one request.
    pub max_output_tokens: u32,
    /// `loop_repeat_limit`: identical calls in a row before the model is told.
    pub loop_repeat_limit: u32,
    /// `tool_call_fallback`: accept tool calls written into the text.
    pub tool_call_fallback: bool,
    /// Whether `compact_threshold_tokens` was set (then it is kept when lower
    /// than the share of the window).
    pub threshold_configured: bool,
}

impl ModelLimits {
    pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = crate::provider::limits::DEFAULT_MAX_OUTPUT_TOKENS;
    pub const DEFAULT_LOOP_REPEAT_LIMIT: u32 = 3;
}

impl Default for ModelLimits {
    fn default() -> Self {
        ModelLimits {
            context_window: None,
            max_output_tokens: Self::DEFAULT_MAX_OUTPUT_TOKENS,
            loop_repeat_limit: Self::DEFAULT_LOOP_REPEAT_LIMIT,
            tool_call_fallback: false,
            threshold_configured: false,
        }
    }
}

/// Share of the window, in percent, at which compaction starts.
const THRESHOLD_PERCENT: usize = 75;

/// The smallest output cap ever asked for: below it a model cannot even
/// finish a tool call, and the overflow recovery is the better answer.
const MIN_OUTPUT_TOKENS: u32 = 64;

/// The window to work with: what the server said, never more than the
/// configured one; the configured one when the server said nothing.
pub fn resolve_window(served: Option<u32>, configured: Option<u32>) -> Option<u32> {
    match (served, configured) {
        (Some(served), Some(configured)) => Some(served.min(configured)),
        (served, configured) => served.or(configured),
    }
}

/// The compaction settings for a conversation that must fit `window`, next
/// to `tools_tokens` of tool specs (sent with every request, not part of the
/// conversation's own estimate).
pub fn compaction_for(
    settings: CompactionSettings,
    limits: &ModelLimits,
    window: Option<u32>,
    tools_tokens: usize,
) -> CompactionSettings {
    let Some(window) = window else {
        return settings;
    };
    let window = window as usize;
    let share = (window * THRESHOLD_PERCENT / 100).saturating_sub(tools_tokens);
    let threshold_tokens = if limits.threshold_configured {
        settings.threshold_tokens.min(share)
    } else {
        share
    };
    CompactionSettings {
        threshold_tokens,
        keep_recent_tokens: settings.keep_recent_tokens.min(window / 4),
        strategy: settings.strategy,
    }
}

/// The output cap for a request whose prompt is estimated at `prompt_tokens`:
/// `None` when the window is unknown (the provider's own cap applies).
pub fn output_cap(limits: &ModelLimits, window: Option<u32>, prompt_tokens: usize) -> Option<u32> {
    let window = window?;
    let left = (window as usize).saturating_sub(prompt_tokens);
    let left = u32::try_from(left).unwrap_or(u32::MAX);
    Some(left.clamp(
        MIN_OUTPUT_TOKENS,
        limits.max_output_tokens.max(MIN_OUTPUT_TOKENS),
    ))
}

/// Estimated tokens of the tool specs, sent with every request.
pub fn tools_tokens(tools: &[ToolSpec]) -> usize {
    tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
        .sum::<usize>()
        / 4
}

/// Whether `err` refused the request for its size, and the window it named.
/// Also reads the text of an error forwarded by the subagent gateway.
pub fn overflow(err: &ProviderError) -> Option<Option<u32>> {
    match err {
        ProviderError::ContextOverflow { n_ctx, .. } => Some(*n_ctx),
        ProviderError::Api { message } => overflow_in(message).map(|o| o.n_ctx),
        ProviderError::GaveUp { last, .. } => overflow(last),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::CompactionStrategy;

    fn settings() -> CompactionSettings {
        CompactionSettings {
            threshold_tokens: CompactionSettings::DEFAULT_THRESHOLD_TOKENS,
            keep_recent_tokens: CompactionSettings::DEFAULT_KEEP_RECENT_TOKENS,
            strategy: CompactionStrategy::Summarize,
        }
    }

    #[test]
    fn the_threshold_is_three_quarters_of_the_window() {
        let limits = ModelLimits::default();
        let c = compaction_for(settings(), &limits, Some(8192), 0);
        assert_eq!(c.threshold_tokens, 6144);
        assert_eq!(c.keep_recent_tokens, 2048);
        assert_eq!(compaction_for(settings(), &limits, None, 0), settings());
        let configured = ModelLimits {
            threshold_configured: true,
            ..limits
        };
        let low = CompactionSettings {
            threshold_tokens: 1000,
            ..settings()
        };
        assert_eq!(
            compaction_for(low, &configured, Some(8192), 0).threshold_tokens,
            1000
        );
        assert_eq!(
            compaction_for(settings(), &configured, Some(8192), 1000).threshold_tokens,
            5144
        );
    }

    #[test]
    fn the_output_cap_never_exceeds_what_the_window_leaves() {
        let limits = ModelLimits::default();
        assert_eq!(output_cap(&limits, None, 100), None);
        assert_eq!(output_cap(&limits, Some(200_000), 1000), Some(4096));
        assert_eq!(output_cap(&limits, Some(8192), 6000), Some(2192));
        assert_eq!(
            output_cap(&limits, Some(8192), 9000),
            Some(MIN_OUTPUT_TOKENS)
        );
    }

    #[test]
    fn the_served_window_is_capped_by_the_configured_one() {
        assert_eq!(resolve_window(Some(8192), Some(4096)), Some(4096));
        assert_eq!(resolve_window(Some(8192), None), Some(8192));
        assert_eq!(resolve_window(None, Some(4096)), Some(4096));
        assert_eq!(resolve_window(None, None), None);
    }
}
