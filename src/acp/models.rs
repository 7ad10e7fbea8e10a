//! The model as a session config option (ACP's `configOptions`, category
//! `model`): a select of the models the provider's server lists, with the
//! session's own model first where the list lacks it. `session/set_config_option`
//! switches it through the engine's `/model` (from the next request on),
//! and a `/model NAME` typed as a prompt moves the select too.

use agent_client_protocol::v1::schema::{
    ConfigOptionUpdate, SessionConfigOption, SessionConfigOptionCategory,
    SessionConfigSelectOption, SessionUpdate,
};

/// The id of the option, as `session/set_config_option` names it.
pub const MODEL_OPTION: &str = "model";

/// The models offered and the one in use.
#[derive(Debug, Clone)]
pub struct ModelChoice {
    current: String,
    choices: Vec<String>,
}

impl ModelChoice {
    /// `current` and what the server lists (in its order), without
    /// duplicates.
    pub fn new(current: String, listed: Vec<String>) -> ModelChoice {
        let mut choices = vec![current.clone()];
        choices.extend(listed.into_iter().filter(|model| *model != current));
        ModelChoice { current, choices }
    }

    /// Whether `model` is one of the choices.
    pub fn offers(&self, model: &str) -> bool {
        self.choices.iter().any(|choice| choice == model)
    }

    /// The model now in use (what the engine reported it switched to).
    pub fn set_current(&mut self, model: String) {
        if !self.offers(&model) {
            self.choices.push(model.clone());
        }
        self.current = model;
    }

    /// The session's config options: the model select.
    pub fn options(&self) -> Vec<SessionConfigOption> {
        let options: Vec<SessionConfigSelectOption> = self
            .choices
            .iter()
            .map(|model| SessionConfigSelectOption::new(model.clone(), model.clone()))
            .collect();
        vec![
            SessionConfigOption::select(MODEL_OPTION, "Model", self.current.clone(), options)
                .category(SessionConfigOptionCategory::Model)
                .description("The model Fido asks, from the next request on".to_string()),
        ]
    }

    /// The update that tells the client the options changed.
    pub fn update(&self) -> SessionUpdate {
        SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(self.options()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_sessions_model_comes_first_once_and_the_select_says_which_is_in_use() {
        let choice = ModelChoice::new("b".into(), vec!["a".into(), "b".into(), "c".into()]);
        let wire = serde_json::to_value(choice.options()).unwrap();
        assert_eq!(wire[0]["id"], "model");
        assert_eq!(wire[0]["category"], "model");
        assert_eq!(wire[0]["type"], "select");
        assert_eq!(wire[0]["currentValue"], "b");
        let values: Vec<_> = wire[0]["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["value"].clone())
            .collect();
        assert_eq!(values, [json!("b"), json!("a"), json!("c")]);
    }

    #[test]
    fn a_model_switched_to_by_name_joins_the_choices() {
        let mut choice = ModelChoice::new("a".into(), Vec::new());
        assert!(!choice.offers("z"));
        choice.set_current("z".into());
        assert!(choice.offers("z") && choice.offers("a"));
        let wire = serde_json::to_value(choice.options()).unwrap();
        assert_eq!(wire[0]["currentValue"], "z");
    }
}
