//! Write subagents' change sets on the plan panel: the item a write
//! delegation serves (`plan_item`) shows where its change set stands.

use std::collections::BTreeMap;

use super::Store;
use crate::protocol::changes::ChangeSetState;
use crate::ui::plan_view::{Field, PlanView};

/// The label of the field the panel shows.
const LABEL: &str = "changes";

/// The latest change set of each plan item: its id and state.
pub type ChangeSets = BTreeMap<String, (String, ChangeSetState)>;

impl Store {
    /// A `change_set` event: remembered for its plan item, and shown on
    /// the plan as it is now.
    pub(super) fn change_set(&mut self, id: &str, plan_item: Option<&str>, state: ChangeSetState) {
        let Some(item) = plan_item.map(str::trim).filter(|i| !i.is_empty()) else {
            return;
        };
        let id = crate::text::summary(&crate::text::sanitize(id, true), 40);
        self.change_sets.insert(key(item), (id, state));
        decorate(self.plan.as_mut(), &self.change_sets);
    }
}

/// An item id as the model may write it: `#3` and `3` are one item.
fn key(item: &str) -> String {
    item.trim_start_matches('#').to_string()
}

/// Puts each known change set on its plan item (replacing what was there).
pub(super) fn decorate(plan: Option<&mut PlanView>, change_sets: &ChangeSets) {
    let Some(plan) = plan else {
        return;
    };
    for item in &mut plan.items {
        item.fields.retain(|field| field.label != LABEL);
        if let Some((id, state)) = change_sets.get(&key(&item.id)) {
            item.fields.push(Field {
                label: LABEL,
                text: format!("{id}: {}", state.label()),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::EventKind;
    use crate::ui::state::Store;
    use crate::ui::tests::{plan_event, plan_value, three_items};

    #[test]
    fn a_plan_item_shows_its_change_set_as_it_moves() {
        let mut store = Store::new((100, 30));
        let plan = || plan_event(plan_value("r", three_items()));
        store.apply(&plan(), std::time::Instant::now());
        let event = |state| EventKind::ChangeSet {
            id: "subagent-1".into(),
            plan_item: Some("implement".into()),
            state,
        };
        let shown = |store: &Store| -> Vec<String> {
            let plan = store.plan.as_ref().unwrap();
            plan.items
                .iter()
                .flat_map(|item| {
                    item.fields
                        .iter()
                        .filter(|f| f.label == LABEL)
                        .map(move |f| format!("{}: {}", item.id, f.text))
                })
                .collect()
        };
        let now = std::time::Instant::now();
        store.apply(&event(ChangeSetState::Running), now);
        assert_eq!(shown(&store), ["implement: subagent-1: running"]);
        store.apply(&event(ChangeSetState::Pending), now);
        assert_eq!(shown(&store), ["implement: subagent-1: pending review"]);
        // A new plan version keeps it on the item.
        store.apply(&plan(), now);
        store.apply(&event(ChangeSetState::Applied), now);
        assert_eq!(shown(&store), ["implement: subagent-1: applied"]);
    }
}
