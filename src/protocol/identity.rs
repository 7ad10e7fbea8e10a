//! Who runs an agent loop: the main agent or one subagent. Assigned by the
//! runner that starts the loop, never by anything the model wrote; the
//! gateway counts usage by it, events name it, the invocation guard
//! decides by it.

use serde::{Deserialize, Serialize};

/// On the wire (the `identity` of `usage` events) the label: `main`, or the
/// subagent's id. Ordered as the labels are (`main` before `subagent-…`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Identity {
    Main,
    Subagent { agent_id: String },
}

/// The label of [`Identity::Main`].
const MAIN: &str = "main";

impl Identity {
    pub fn subagent(agent_id: impl Into<String>) -> Identity {
        Identity::Subagent {
            agent_id: agent_id.into(),
        }
    }

    /// `main`, or the subagent's id; used in events and usage accounting.
    pub fn label(&self) -> &str {
        match self {
            Identity::Main => MAIN,
            Identity::Subagent { agent_id } => agent_id,
        }
    }

    /// The identity a label names: `main`, else a subagent's id.
    pub fn from_label(label: &str) -> Identity {
        if label == MAIN {
            Identity::Main
        } else {
            Identity::subagent(label)
        }
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

impl From<&str> for Identity {
    fn from(label: &str) -> Identity {
        Identity::from_label(label)
    }
}

impl Serialize for Identity {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.label())
    }
}

impl<'de> Deserialize<'de> for Identity {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(|label| Identity::from_label(&label))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_is_its_label_on_the_wire() {
        for (identity, wire) in [
            (Identity::Main, r#""main""#),
            (
                Identity::subagent("subagent-0badcafe"),
                r#""subagent-0badcafe""#,
            ),
        ] {
            assert_eq!(serde_json::to_string(&identity).unwrap(), wire);
            assert_eq!(serde_json::from_str::<Identity>(wire).unwrap(), identity);
        }
        assert!(Identity::Main < Identity::subagent("subagent-0"));
        assert!(Identity::subagent("subagent-1") < Identity::subagent("subagent-2"));
    }
}
