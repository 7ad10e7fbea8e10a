//! Which provider a session talks to, and its key, as the configuration
//! names them (`provider`, `api_key`): the provider's own settings types,
//! which `config` fills and the composition root builds a provider from
//! (`src/runtime/provider.rs`).

use std::fmt;

/// Which provider talks to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    OpenAi,
    Anthropic,
    Script,
}

/// An API key; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: String) -> ApiKey {
        ApiKey(key)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(…)")
    }
}

impl ProviderKind {
    /// Its name in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Script => "script",
        }
    }

    /// The base URL when `base_url` is unset.
    pub fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "https://api.anthropic.com",
            ProviderKind::OpenAi | ProviderKind::Script => "https://api.openai.com/v1",
        }
    }

    /// The variable the provider's key is read from when `api_key` is unset.
    pub fn key_variable(self) -> Option<&'static str> {
        match self {
            ProviderKind::OpenAi => Some("OPENAI_API_KEY"),
            ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            ProviderKind::Script => None,
        }
    }

    /// The model when `model` is unset, for a server at `base_url`.
    pub fn default_model(self, base_url: &str) -> &'static str {
        match self {
            ProviderKind::OpenAi if base_url.starts_with("https://api.openai.com") => {
                "gpt-4.1-mini"
            }
            ProviderKind::OpenAi => "default",
            ProviderKind::Anthropic => "claude-sonnet-4-5",
            ProviderKind::Script => "script",
        }
    }
}
