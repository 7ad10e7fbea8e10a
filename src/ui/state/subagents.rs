//! The subagent bar's rows: each subagent's last reported state, its own
//! plan's progress, and which live row has the focus.

use std::time::Instant;

use super::views::{SUBAGENT_DETAIL_CHARS, SubagentView};
use super::{Direction, Store};
use crate::protocol::EventKind;
use crate::protocol::plan::PlanSnapshot;
use crate::text::summary;
use crate::ui::plan_view::{ItemStatus, PlanView};

/// Replaces the view of the same agent in place (keeping what only other
/// events say, its own plan's progress), or appends it.
fn upsert(list: &mut Vec<SubagentView>, mut view: SubagentView) {
    match list.iter_mut().find(|s| s.agent_id == view.agent_id) {
        Some(slot) => {
            view.own_plan = slot.own_plan;
            *slot = view;
        }
        None => list.push(view),
    }
}

impl Store {
    pub(super) fn subagent(&mut self, event: &EventKind, now: Instant) {
        if let EventKind::Subagent {
            agent_id,
            pid,
            phase,
            elapsed_ms,
            detail,
            tokens,
            plan_item,
        } = event
        {
            let view = SubagentView {
                agent_id: summary(agent_id, 64),
                pid: *pid,
                phase: phase.clone(),
                elapsed_ms: *elapsed_ms,
                since_event_ms: 0,
                detail: summary(detail, SUBAGENT_DETAIL_CHARS),
                tokens: *tokens,
                plan_item: plan_item
                    .as_deref()
                    .map(|item| summary(item, 40))
                    .filter(|item| !item.is_empty()),
                own_plan: None,
                frozen: false,
                received_at: now,
            };
            upsert(&mut self.subagents, view);
            self.refocus();
        }
    }

    /// A subagent's own plan changed: its row counts the steps done. Only
    /// a subagent the bar shows has a row to count on.
    pub(super) fn subagent_plan(&mut self, agent_id: &str, plan: &PlanSnapshot) -> bool {
        let agent_id = summary(agent_id, 64);
        let Some(view) = self.subagents.iter_mut().find(|s| s.agent_id == agent_id) else {
            return false;
        };
        let progress = PlanView::from_event(plan)
            .map(|plan| (plan.count(ItemStatus::Done), plan.items.len()))
            .filter(|&(_, total)| total > 0);
        let changed = view.own_plan != progress;
        view.own_plan = progress;
        changed
    }

    /// The bar's rows in order: live subagents first (in start order), then
    /// the finished ones with their outcome.
    pub fn bar_order(&self) -> Vec<&SubagentView> {
        let (live, done): (Vec<_>, Vec<_>) = self.subagents.iter().partition(|s| s.is_live());
        live.into_iter().chain(done).collect()
    }

    /// The focused subagent, when it still runs.
    pub fn focused_subagent(&self) -> Option<&SubagentView> {
        let focus = self.subagent_focus.as_deref()?;
        self.subagents
            .iter()
            .find(|s| s.agent_id == focus && s.is_live())
    }

    /// Alt+Up / Alt+Down: the focus moves to the previous or next live
    /// subagent (it stays at either end).
    pub fn move_subagent_focus(&mut self, direction: Direction) {
        let live: Vec<String> = self
            .bar_order()
            .into_iter()
            .filter(|s| s.is_live())
            .map(|s| s.agent_id.clone())
            .collect();
        let Some(current) = self
            .subagent_focus
            .as_ref()
            .and_then(|focus| live.iter().position(|id| id == focus))
        else {
            self.subagent_focus = live.first().cloned();
            return;
        };
        let next = match direction {
            Direction::Up => current.saturating_sub(1),
            Direction::Down => (current + 1).min(live.len() - 1),
        };
        self.subagent_focus = live.get(next).cloned();
    }

    /// Keeps the focus on a live subagent: when the focused one ended (or
    /// none was focused), the first live row takes it.
    fn refocus(&mut self) {
        if self.focused_subagent().is_some() {
            return;
        }
        self.subagent_focus = self
            .bar_order()
            .into_iter()
            .find(|s| s.is_live())
            .map(|s| s.agent_id.clone());
    }

    /// The live subagent `wanted` names: its whole id, or the part after
    /// `subagent-` (`/cancel 7f3a90c1`).
    pub fn find_live_subagent(&self, wanted: &str) -> Option<&SubagentView> {
        self.subagents
            .iter()
            .filter(|s| s.is_live())
            .find(|s| s.agent_id == wanted || s.agent_id.strip_prefix("subagent-") == Some(wanted))
    }
}
