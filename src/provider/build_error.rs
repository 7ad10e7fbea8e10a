//! Why a provider could not be built for a configuration (at start-up, for
//! a subagent profile's model) or for `/model NAME`. The engine's model
//! switcher names these types, so they live below the agent, with the
//! providers they describe.

use super::ProviderError;

/// Why the provider a configuration names cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// An OpenAI-compatible endpoint that is not on this machine, with no key.
    #[error(
        "no API key for {base_url}: set FIDO_API_KEY (or OPENAI_API_KEY), or point FIDO_BASE_URL at a local OpenAI-compatible server such as llama-server (http://127.0.0.1:8080/v1), or use FIDO_PROVIDER=script"
    )]
    NoOpenAiKey { base_url: String },
    /// Anthropic's endpoint with no key.
    #[error("no API key for Anthropic: set FIDO_API_KEY or ANTHROPIC_API_KEY")]
    NoAnthropicKey,
    /// The client or the script cannot be set up.
    #[error(transparent)]
    Provider(#[from] ProviderError),
}

/// Why `/model NAME` did not switch the model.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    /// This front end holds no configuration to build another provider from.
    #[error("/model is not available here")]
    Unavailable,
    /// The name is empty or holds control characters.
    #[error("/model needs a model name, e.g. /model gpt-4.1")]
    NoModelName,
    /// The provider for that model cannot be built.
    #[error("cannot switch to {model}: {source}")]
    Build {
        model: String,
        #[source]
        source: BuildError,
    },
}
