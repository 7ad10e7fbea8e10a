//! Deliberate keys only: the approval prompt answers a key only after it
//! has been on screen for [`GRACE`] with no key typed.
//!
//! Keys typed for the next message must never answer a prompt that
//! appeared under them (the `a` of "and" approving a command for the
//! session). So every key, from the moment the prompt appears, starts a
//! new quiet period; a key that arrives before the quiet period is over
//! goes to the input line, as it would without the prompt. A run of
//! typing that began before the prompt appeared (keys less than [`GRACE`]
//! apart) therefore never reaches it, however long it goes on.
//!
//! Terminal key events carry no time, so the UI actor stamps each when it
//! arrives; this machine only compares the instants it is given, which
//! makes it testable without a clock.

use std::time::{Duration, Instant};

/// How long the prompt must have been on screen, with no key typed, before
/// a key answers it.
pub const GRACE: Duration = Duration::from_millis(500);

/// Where a key goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The prompt takes it (it is ready and the key is one of its own).
    Prompt,
    /// The input line takes it, as if no prompt were on screen.
    Composer,
}

/// The prompt's readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    /// When the prompt appeared, or the latest key or paste since.
    quiet_since: Instant,
    /// Whether the prompt shows itself ready (its keys live). Follows
    /// [`Readiness::poll`] and keys, so the screen changes when it does.
    shown_ready: bool,
}

impl Readiness {
    /// A gate for a prompt that appeared at `shown_at`.
    pub fn new(shown_at: Instant) -> Readiness {
        Readiness {
            quiet_since: shown_at,
            shown_ready: false,
        }
    }

    /// Whether a key at `now` would answer.
    pub fn is_ready(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.quiet_since) >= GRACE
    }

    /// A key at `now`; `prompt_key` says whether the prompt has a use for
    /// it. Only a prompt key after the quiet period reaches the prompt;
    /// any other key is typing, and starts the quiet period again.
    pub fn key(&mut self, now: Instant, prompt_key: bool) -> Route {
        if prompt_key && self.is_ready(now) {
            self.shown_ready = true;
            return Route::Prompt;
        }
        self.typed(now);
        Route::Composer
    }

    /// Typing that is not a key press (a paste) at `now`.
    pub fn typed(&mut self, now: Instant) {
        self.quiet_since = self.quiet_since.max(now);
        self.shown_ready = false;
    }

    /// Time passed: whether the prompt now shows itself ready (it must be
    /// redrawn).
    pub fn poll(&mut self, now: Instant) -> bool {
        let became = !self.shown_ready && self.is_ready(now);
        self.shown_ready |= became;
        became
    }

    /// Whether the prompt shows its keys as live.
    pub fn shows_ready(&self) -> bool {
        self.shown_ready
    }

    /// When to [`poll`](Readiness::poll) next, while the prompt is not ready.
    pub fn wake_at(&self) -> Option<Instant> {
        (!self.shown_ready).then_some(self.quiet_since + GRACE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_key_right_after_the_prompt_appears_goes_to_the_input_line() {
        let t0 = Instant::now();
        let mut gate = Readiness::new(t0);
        assert_eq!(gate.key(t0 + ms(100), true), Route::Composer);
        assert!(!gate.shows_ready());
    }

    #[test]
    fn a_prompt_key_after_a_quiet_grace_period_answers() {
        let t0 = Instant::now();
        let mut gate = Readiness::new(t0);
        assert!(!gate.poll(t0 + ms(499)));
        assert_eq!(gate.wake_at(), Some(t0 + GRACE));
        assert!(
            gate.poll(t0 + GRACE),
            "ready exactly at the end of the grace"
        );
        assert!(gate.shows_ready() && gate.wake_at().is_none());
        assert!(!gate.poll(t0 + ms(600)), "already shown ready");
        assert_eq!(gate.key(t0 + ms(700), true), Route::Prompt);
    }

    #[test]
    fn a_run_of_typing_never_answers_however_long_it_goes_on() {
        // "and more" typed 120 ms apart, begun before the prompt appeared.
        let t0 = Instant::now();
        let mut gate = Readiness::new(t0);
        for i in 0..40u64 {
            let at = t0 + ms(30 + 120 * i);
            assert_eq!(gate.key(at, true), Route::Composer, "key {i}");
            assert!(!gate.poll(at + ms(119)));
        }
        // Then a pause of a whole grace period: the next key answers.
        let last = t0 + ms(30 + 120 * 39);
        assert_eq!(gate.wake_at(), Some(last + GRACE));
        assert!(gate.poll(last + GRACE));
        assert_eq!(gate.key(last + GRACE + ms(1), true), Route::Prompt);
    }

    #[test]
    fn typing_after_the_prompt_was_ready_makes_it_wait_again() {
        let t0 = Instant::now();
        let mut gate = Readiness::new(t0);
        assert!(gate.poll(t0 + ms(600)));
        // "hello": h is not a prompt key; the o that follows must not
        // open anything.
        assert_eq!(gate.key(t0 + ms(700), false), Route::Composer);
        assert!(!gate.shows_ready(), "the keys dim again");
        assert_eq!(gate.key(t0 + ms(800), true), Route::Composer);
        assert_eq!(gate.key(t0 + ms(1300), true), Route::Prompt);
    }

    #[test]
    fn a_paste_counts_as_typing() {
        let t0 = Instant::now();
        let mut gate = Readiness::new(t0);
        gate.typed(t0 + ms(400));
        assert_eq!(gate.key(t0 + ms(600), true), Route::Composer);
        // An instant from before the quiet period began changes nothing.
        gate.typed(t0);
        assert_eq!(gate.key(t0 + ms(1200), true), Route::Prompt);
    }
}
