//! The provider a configuration names, built here rather than in `config`,
//! which stays a description of settings that imports no provider.

use std::sync::Arc;

use crate::config::{Config, is_loopback_url};
use crate::provider::ProviderKind;
use crate::provider::anthropic::AnthropicProvider;
use crate::provider::openai::OpenAiProvider;
use crate::provider::script::ScriptProvider;
use crate::provider::{BuildError, Provider};

/// Builds the configured provider, or says in one sentence why not.
pub fn build_provider(config: &Config) -> Result<Arc<dyn Provider>, BuildError> {
    let key = config.api_key.as_ref().map(|k| k.expose().to_string());
    let limits = &config.agent.limits;
    let provider: Arc<dyn Provider> = match config.provider {
        ProviderKind::OpenAi => {
            if key.is_none() && !is_loopback_url(&config.base_url) {
                return Err(BuildError::NoOpenAiKey {
                    base_url: config.base_url.clone(),
                });
            }
            let provider = OpenAiProvider::new(
                config.base_url.clone(),
                key,
                config.model.clone(),
                config.http,
            )?;
            Arc::new(provider.with_max_output_tokens(limits.max_output_tokens))
        }
        ProviderKind::Anthropic => {
            if key.is_none() && !is_loopback_url(&config.base_url) {
                return Err(BuildError::NoAnthropicKey);
            }
            let max_tokens = config.anthropic_max_tokens.min(limits.max_output_tokens);
            let provider = AnthropicProvider::new(
                config.base_url.clone(),
                key,
                config.model.clone(),
                config.http,
                max_tokens,
            )?;
            Arc::new(provider)
        }
        ProviderKind::Script => {
            let script = match &config.script {
                Some(path) => ScriptProvider::load(path),
                None => ScriptProvider::demo(),
            };
            Arc::new(script?)
        }
    };
    Ok(provider)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Overrides;

    fn config(env: &[(&str, &str)], workspace: &std::path::Path) -> Config {
        let home = workspace.join("home");
        let mut env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        env.push(("HOME".into(), home.display().to_string()));
        let overrides = Overrides {
            workspace: Some(workspace.to_path_buf()),
            values: vec![],
        };
        Config::load_from(&overrides, &env).unwrap()
    }

    #[test]
    fn remote_openai_without_key_is_refused_but_loopback_is_fine() {
        let dir = tempfile::tempdir().unwrap();
        let err = build_provider(&config(&[], dir.path())).err().unwrap();
        assert!(matches!(err, BuildError::NoOpenAiKey { .. }), "{err}");
        assert!(err.to_string().starts_with("no API key for "), "{err}");
        let local = config(&[("FIDO_BASE_URL", "http://127.0.0.1:9/v1")], dir.path());
        assert!(build_provider(&local).is_ok());
    }
}
