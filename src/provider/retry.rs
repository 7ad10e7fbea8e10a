//! The bounded retry loop shared by the HTTP providers.
//!
//! Invariants:
//! - Only errors that say [`ProviderError::is_retryable`] are tried again, at
//!   most [`HttpPolicy::max_retries`] times; anything else is returned as it is.
//! - Each wait is announced with [`ProviderNotice::Retrying`] before it starts.
//! - A wait never exceeds [`HttpPolicy::retry_max`]: the backoff is capped, and
//!   a server's `Retry-After` longer than that ends the loop at once with the
//!   rate-limit error instead of sleeping for minutes.
//! - Cancellation is dropping the future, also in the middle of a wait.

use std::future::Future;
use std::time::Duration;

use super::{HttpPolicy, NoticeSink, ProviderError, ProviderNotice};

/// What to do after a retryable failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDelay {
    /// Wait this long, then try again.
    Wait(Duration),
    /// The server asked for a longer pause than the policy allows.
    GiveUp,
}

/// The wait before retry number `retry` (1 for the first retry).
///
/// Without `retry_after` it is full-jitter exponential backoff: a uniformly
/// random share (`jitter` in `[0, 1]`) of `retry_base * 2^(retry - 1)`, the
/// latter capped at `retry_max`. With `retry_after` it is exactly the
/// server's value, or [`RetryDelay::GiveUp`] if that exceeds `retry_max`.
pub fn retry_delay(
    policy: &HttpPolicy,
    retry: u32,
    retry_after: Option<Duration>,
    jitter: f64,
) -> RetryDelay {
    if let Some(after) = retry_after {
        return if after > policy.retry_max {
            RetryDelay::GiveUp
        } else {
            RetryDelay::Wait(after)
        };
    }
    let doublings = retry.saturating_sub(1).min(31);
    let ceiling = policy
        .retry_base
        .saturating_mul(1u32 << doublings)
        .min(policy.retry_max);
    RetryDelay::Wait(ceiling.mul_f64(jitter.clamp(0.0, 1.0)))
}

/// Runs `attempt` (called with the attempt number, 1-based) until it
/// succeeds, fails with a non-retryable error, or the retry budget is spent.
///
/// Returns the success, a non-retryable error unchanged, a rate-limit error
/// whose `Retry-After` exceeds the policy unchanged, or
/// [`ProviderError::GaveUp`] with the last error once retries are exhausted.
/// With `max_retries == 0` nothing is retried and the error comes back as it
/// is (there was no retry to give up on).
pub async fn with_retries<T, F, Fut>(
    policy: &HttpPolicy,
    notices: NoticeSink<'_>,
    mut attempt: F,
) -> Result<T, ProviderError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, ProviderError>>,
{
    let mut number = 1;
    loop {
        let error = match attempt(number).await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        if !error.is_retryable() || policy.max_retries == 0 {
            return Err(error);
        }
        let budget = error
            .retry_cap()
            .map_or(policy.max_retries, |cap| cap.min(policy.max_retries));
        if number > budget {
            return Err(ProviderError::GaveUp {
                attempts: number,
                last: Box::new(error),
            });
        }
        let delay = match retry_delay(policy, number, error.retry_after(), fastrand::f64()) {
            RetryDelay::Wait(delay) => delay,
            RetryDelay::GiveUp => {
                tracing::warn!(
                    attempt = number,
                    retry_after = ?error.retry_after(),
                    "server asks for a longer pause than the retry policy allows"
                );
                return Err(error);
            }
        };
        let reason = error.to_string();
        tracing::warn!(attempt = number, ?delay, %reason, "model request failed; retrying");
        notices(ProviderNotice::Retrying {
            attempt: number,
            delay,
            reason,
        });
        tokio::time::sleep(delay).await;
        number += 1;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use tokio::time::Instant;

    fn policy() -> HttpPolicy {
        HttpPolicy {
            request_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(10),
            max_retries: 3,
            retry_base: Duration::from_millis(500),
            retry_max: Duration::from_secs(4),
        }
    }

    /// Tiny waits so the loop tests run in real time (tokio's paused clock
    /// needs the `test-util` feature, which the crate does not enable).
    fn fast() -> HttpPolicy {
        HttpPolicy {
            retry_base: Duration::from_millis(1),
            retry_max: Duration::from_millis(50),
            ..policy()
        }
    }

    fn wait(d: RetryDelay) -> Duration {
        match d {
            RetryDelay::Wait(d) => d,
            RetryDelay::GiveUp => panic!("unexpected give-up"),
        }
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = policy();
        assert_eq!(
            wait(retry_delay(&p, 1, None, 1.0)),
            Duration::from_millis(500)
        );
        assert_eq!(wait(retry_delay(&p, 2, None, 1.0)), Duration::from_secs(1));
        assert_eq!(wait(retry_delay(&p, 3, None, 1.0)), Duration::from_secs(2));
        assert_eq!(wait(retry_delay(&p, 4, None, 1.0)), Duration::from_secs(4));
        assert_eq!(wait(retry_delay(&p, 5, None, 1.0)), Duration::from_secs(4));
        assert_eq!(
            wait(retry_delay(&p, 1000, None, 1.0)),
            Duration::from_secs(4)
        );
    }

    #[test]
    fn jitter_stays_within_bounds() {
        let p = policy();
        assert_eq!(wait(retry_delay(&p, 3, None, 0.0)), Duration::ZERO);
        assert_eq!(wait(retry_delay(&p, 3, None, 0.5)), Duration::from_secs(1));
        assert_eq!(wait(retry_delay(&p, 3, None, 7.0)), Duration::from_secs(2));
        for _ in 0..1000 {
            let d = wait(retry_delay(&p, 2, None, fastrand::f64()));
            assert!(d <= Duration::from_secs(1));
        }
    }

    #[test]
    fn retry_after_is_used_or_gives_up() {
        let p = policy();
        let three = Some(Duration::from_secs(3));
        assert_eq!(wait(retry_delay(&p, 1, three, 0.0)), Duration::from_secs(3));
        let four = Some(Duration::from_secs(4));
        assert_eq!(wait(retry_delay(&p, 3, four, 0.0)), Duration::from_secs(4));
        let long = Some(Duration::from_secs(120));
        assert_eq!(retry_delay(&p, 1, long, 0.0), RetryDelay::GiveUp);
    }

    fn server_error() -> ProviderError {
        ProviderError::Server {
            status: 503,
            body: "busy".into(),
        }
    }

    struct Recorder(Mutex<Vec<ProviderNotice>>);

    impl Recorder {
        fn new() -> Self {
            Recorder(Mutex::new(Vec::new()))
        }
        fn sink(&self) -> impl Fn(ProviderNotice) + Send + Sync + '_ {
            |n| self.0.lock().unwrap().push(n)
        }
        /// The delays the retries announced (and then slept).
        fn delays(&self) -> Vec<Duration> {
            self.0
                .lock()
                .unwrap()
                .iter()
                .filter_map(|n| match n {
                    ProviderNotice::Retrying { delay, .. } => Some(*delay),
                    _ => None,
                })
                .collect()
        }
        fn retries(&self) -> Vec<u32> {
            self.0
                .lock()
                .unwrap()
                .iter()
                .map(|n| match n {
                    ProviderNotice::Retrying { attempt, delay, .. } => {
                        assert!(*delay <= Duration::from_secs(4));
                        *attempt
                    }
                    other => panic!("unexpected notice {other:?}"),
                })
                .collect()
        }
    }

    #[tokio::test]
    async fn succeeds_after_transient_failures() {
        let rec = Recorder::new();
        let sink = rec.sink();
        let mut calls = Vec::new();
        let result = with_retries(&fast(), &sink, |n| {
            calls.push(n);
            async move { if n < 3 { Err(server_error()) } else { Ok(n) } }
        })
        .await;
        assert_eq!(result.unwrap(), 3);
        assert_eq!(calls, vec![1, 2, 3]);
        assert_eq!(rec.retries(), vec![1, 2]);
    }

    /// On paused time: the clock moves only by the waits, so the whole
    /// call lasts the delays it announced.
    #[tokio::test(start_paused = true)]
    async fn gives_up_after_max_retries() {
        let started = Instant::now();
        let rec = Recorder::new();
        let sink = rec.sink();
        let mut count = 0;
        let result: Result<(), _> = with_retries(&fast(), &sink, |_| {
            count += 1;
            async { Err(ProviderError::StreamTruncated) }
        })
        .await;
        assert_eq!(count, 4);
        match result {
            Err(ProviderError::GaveUp { attempts, last }) => {
                assert_eq!(attempts, 4);
                assert!(matches!(*last, ProviderError::StreamTruncated));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(rec.retries(), vec![1, 2, 3]);
        // Each wait is the one announced: 1, 2, 4 ms at most, with full
        // jitter.
        let caps = [1, 2, 4].map(Duration::from_millis);
        let delays = rec.delays();
        assert!(
            delays.iter().zip(caps).all(|(delay, cap)| *delay <= cap),
            "{delays:?}"
        );
        // Tokio's timers fire on whole milliseconds: each wait is its delay
        // rounded up to one.
        let (waited, announced) = (started.elapsed(), delays.iter().sum::<Duration>());
        let tick = Duration::from_millis(delays.len() as u64);
        assert!(
            waited >= announced && waited <= announced + tick,
            "{waited:?} {delays:?}"
        );
    }

    #[tokio::test]
    async fn non_retryable_error_is_returned_unwrapped() {
        let rec = Recorder::new();
        let sink = rec.sink();
        let mut count = 0;
        let result: Result<(), _> = with_retries(&fast(), &sink, |_| {
            count += 1;
            async {
                Err(ProviderError::Unauthorized {
                    status: 401,
                    body: "no".into(),
                })
            }
        })
        .await;
        assert_eq!(count, 1);
        assert!(matches!(result, Err(ProviderError::Unauthorized { .. })));
        assert!(rec.retries().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn honours_retry_after() {
        let rec = Recorder::new();
        let sink = rec.sink();
        let started = Instant::now();
        let result = with_retries(&fast(), &sink, |n| async move {
            if n == 1 {
                Err(ProviderError::RateLimited {
                    retry_after: Some(Duration::from_millis(30)),
                    body: String::new(),
                })
            } else {
                Ok(())
            }
        })
        .await;
        assert!(result.is_ok());
        assert_eq!(started.elapsed(), Duration::from_millis(30));
        let notices = rec.0.lock().unwrap().clone();
        assert!(matches!(
            notices.as_slice(),
            [ProviderNotice::Retrying { attempt: 1, delay, .. }] if *delay == Duration::from_millis(30)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn long_retry_after_gives_up_at_once() {
        let started = Instant::now();
        let rec = Recorder::new();
        let sink = rec.sink();
        let mut count = 0;
        let result: Result<(), _> = with_retries(&fast(), &sink, |_| {
            count += 1;
            async {
                Err(ProviderError::RateLimited {
                    retry_after: Some(Duration::from_secs(600)),
                    body: String::new(),
                })
            }
        })
        .await;
        assert_eq!(count, 1);
        assert!(matches!(result, Err(ProviderError::RateLimited { .. })));
        // No retry was announced, and none was waited for.
        assert!(rec.retries().is_empty());
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test]
    async fn a_malformed_request_is_retried_once_only() {
        let rec = Recorder::new();
        let sink = rec.sink();
        let mut count = 0;
        let result: Result<(), _> = with_retries(&fast(), &sink, |_| {
            count += 1;
            async {
                Err(ProviderError::MalformedRequest {
                    status: 500,
                    body: "server_error: Failed to parse tool call arguments as JSON".into(),
                    field: Some("messages[].tool_calls[].function.arguments".into()),
                })
            }
        })
        .await;
        assert_eq!(count, 2);
        let message = result.unwrap_err().to_string();
        assert!(
            message.contains("Failed to parse tool call arguments")
                && message.contains("messages[].tool_calls[].function.arguments")
                && message.contains("gave up after 2 attempts"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn zero_retries_returns_the_error() {
        let rec = Recorder::new();
        let sink = rec.sink();
        let p = HttpPolicy {
            max_retries: 0,
            ..fast()
        };
        let result: Result<(), _> =
            with_retries(&p, &sink, |_| async { Err(server_error()) }).await;
        assert!(matches!(result, Err(ProviderError::Server { .. })));
    }
}
