//! The provider a configuration names, built here rather than in `config`,
//! which stays a description of settings that imports no provider.

use std::sync::Arc;

use crate::config::{Config, ProviderKind, is_loopback_url};
use crate::provider::Provider;
use crate::provider::anthropic::AnthropicProvider;
use crate::provider::openai::OpenAiProvider;
use crate::provider::script::ScriptProvider;

/// Builds the configured provider, or says in one sentence why not.
pub fn build_provider(config: &Config) -> Result<Arc<dyn Provider>, String> {
    let key = config.api_key.as_ref().map(|k| k.expose().to_string());
    let limits = &config.agent.limits;
    let provider: Arc<dyn Provider> = match config.provider {
        ProviderKind::OpenAi => {
            if key.is_none() && !is_loopback_url(&config.base_url) {
                return Err(format!(
                    "no API key for {}: set FIDO_API_KEY (or OPENAI_API_KEY), or point FIDO_BASE_URL at a local OpenAI-compatible server such as llama-server (http://127.0.0.1:8080/v1), or use FIDO_PROVIDER=script",
                    config.base_url
                ));
            }
            let provider = OpenAiProvider::new(
                config.base_url.clone(),
                key,
                config.model.clone(),
                config.http,
            )
            .map_err(|e| e.to_string())?;
            Arc::new(provider.with_max_output_tokens(limits.max_output_tokens))
        }
        ProviderKind::Anthropic => {
            if key.is_none() && !is_loopback_url(&config.base_url) {
                return Err(
                    "no API key for Anthropic: set FIDO_API_KEY or ANTHROPIC_API_KEY".into(),
                );
            }
            let max_tokens = config.anthropic_max_tokens.min(limits.max_output_tokens);
            let provider = AnthropicProvider::new(
                config.base_url.clone(),
                key,
                config.model.clone(),
                config.http,
                max_tokens,
            )
            .map_err(|e| e.to_string())?;
            Arc::new(provider)
        }
        ProviderKind::Script => {
            let script = match &config.script {
                Some(path) => ScriptProvider::load(path),
                None => ScriptProvider::demo(),
            };
            Arc::new(script.map_err(|e| e.to_string())?)
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
        assert!(err.contains("no API key"), "{err}");
        let local = config(&[("FIDO_BASE_URL", "http://127.0.0.1:9/v1")], dir.path());
        assert!(build_provider(&local).is_ok());
    }
}
