//! The model gateway: the one holder of the provider (and so of the keys)
//! in the parent. Every model request of the main agent and of every
//! subagent goes through it.
//!
//! It limits the requests in flight to the provider
//! (`provider_concurrency`), holds back every new request while a 429's
//! back-off runs (one shared back-off: a flood of children cannot get past
//! it), and counts usage per identity in one place, so that session totals
//! include every subagent. [`Gateway::for_identity`] gives the
//! [`Provider`] view an agent loop uses.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::{ChatRequest, Completion, CompletionFuture, NoticeSink, Provider, ProviderNotice};
use super::{ModelsFuture, ProviderError, WindowFuture};
use crate::protocol::{Identity, UsageTotals};

/// The gateway of one session.
pub struct Gateway {
    provider: Arc<dyn Provider>,
    /// Providers for other models of the same endpoint (subagent
    /// profiles that name a model), by model name.
    models: BTreeMap<String, Arc<dyn Provider>>,
    slots: Semaphore,
    /// No new request starts before this instant (after a 429).
    not_before: Mutex<Option<Instant>>,
    usage: Mutex<BTreeMap<Identity, UsageTotals>>,
}

impl Gateway {
    /// A gateway over `provider` with at most `concurrency` requests in
    /// flight (at least one).
    pub fn new(provider: Arc<dyn Provider>, concurrency: usize) -> Arc<Gateway> {
        Gateway::with_models(provider, BTreeMap::new(), concurrency)
    }

    /// A gateway that can also ask the `models` (by name), through the same
    /// slots, back-off and usage accounts.
    pub fn with_models(
        provider: Arc<dyn Provider>,
        models: BTreeMap<String, Arc<dyn Provider>>,
        concurrency: usize,
    ) -> Arc<Gateway> {
        Arc::new(Gateway {
            provider,
            models,
            slots: Semaphore::new(concurrency.max(1)),
            not_before: Mutex::new(None),
            usage: Mutex::new(BTreeMap::new()),
        })
    }

    /// The provider as `identity` uses it.
    pub fn for_identity(self: &Arc<Self>, identity: Identity) -> Arc<dyn Provider> {
        Arc::new(AsIdentity {
            gateway: Arc::clone(self),
            identity,
        })
    }

    pub fn name(&self) -> &str {
        self.provider.name()
    }

    pub fn model(&self) -> &str {
        self.provider.model()
    }

    pub fn context_window(&self) -> WindowFuture<'_> {
        self.provider.context_window()
    }

    pub fn models(&self) -> ModelsFuture<'_> {
        self.provider.models()
    }

    /// One request on behalf of `identity`: waits for a slot and for any
    /// shared back-off, then asks the provider; counts the usage.
    pub async fn complete_as(
        &self,
        identity: &Identity,
        request: ChatRequest<'_>,
        notices: NoticeSink<'_>,
    ) -> Result<Completion, ProviderError> {
        self.complete_with(identity, None, request, notices).await
    }

    /// Like [`Gateway::complete_as`], with `model` (one of the gateway's
    /// models; `None` or the session's own model: the session's provider).
    pub async fn complete_with(
        &self,
        identity: &Identity,
        model: Option<&str>,
        request: ChatRequest<'_>,
        notices: NoticeSink<'_>,
    ) -> Result<Completion, ProviderError> {
        let provider = match model {
            Some(name) if name != self.provider.model() => {
                self.models.get(name).ok_or_else(|| ProviderError::Api {
                    message: format!("the model gateway has no provider for model {name}"),
                })?
            }
            _ => &self.provider,
        };
        let _slot = self.slots.acquire().await.map_err(|_| ProviderError::Api {
            message: "the model gateway is shut down".into(),
        })?;
        self.wait_for_back_off().await;
        let watch = |notice: ProviderNotice| {
            if let ProviderNotice::Retrying { delay, reason, .. } = &notice
                && is_rate_limit(reason)
            {
                self.back_off(*delay);
            }
            notices(notice);
        };
        let completion = provider.complete_for(identity, request, &watch).await?;
        if let Ok(mut usage) = self.usage.lock() {
            usage
                .entry(identity.clone())
                .or_default()
                .record(completion.usage);
        }
        Ok(completion)
    }

    /// Every identity's usage so far, added up.
    pub fn totals(&self) -> UsageTotals {
        let mut totals = UsageTotals::default();
        if let Ok(usage) = self.usage.lock() {
            for one in usage.values() {
                totals.merge(*one);
            }
        }
        totals
    }

    /// Usage per identity, `main` first, then each subagent by id.
    pub fn usage_by_identity(&self) -> Vec<(Identity, UsageTotals)> {
        self.usage
            .lock()
            .map(|usage| usage.iter().map(|(k, v)| (k.clone(), *v)).collect())
            .unwrap_or_default()
    }

    fn back_off(&self, delay: Duration) {
        if let Ok(mut not_before) = self.not_before.lock() {
            let until = Instant::now() + delay;
            if not_before.is_none_or(|at| at < until) {
                *not_before = Some(until);
            }
        }
    }

    async fn wait_for_back_off(&self) {
        let until = self.not_before.lock().ok().and_then(|at| *at);
        if let Some(until) = until
            && until > Instant::now()
        {
            tokio::time::sleep_until(until).await;
        }
    }
}

/// A 429 (or a provider's "rate limit" wording) in a retry notice.
fn is_rate_limit(reason: &str) -> bool {
    let lower = reason.to_ascii_lowercase();
    lower.contains("429") || lower.contains("rate limit") || lower.contains("rate-limit")
}

/// The gateway as one identity's provider.
struct AsIdentity {
    gateway: Arc<Gateway>,
    identity: Identity,
}

impl Provider for AsIdentity {
    fn name(&self) -> &str {
        self.gateway.name()
    }

    fn model(&self) -> &str {
        self.gateway.model()
    }

    fn complete<'a>(
        &'a self,
        request: ChatRequest<'a>,
        notices: NoticeSink<'a>,
    ) -> CompletionFuture<'a> {
        Box::pin(self.gateway.complete_as(&self.identity, request, notices))
    }

    fn context_window(&self) -> WindowFuture<'_> {
        self.gateway.context_window()
    }

    fn models(&self) -> ModelsFuture<'_> {
        self.gateway.models()
    }

    fn usage_totals(&self) -> Option<UsageTotals> {
        Some(self.gateway.totals())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Message;
    use crate::provider::script::ScriptProvider;

    fn script(turns: usize) -> Arc<dyn Provider> {
        let turns: Vec<String> = (0..turns)
            .map(|i| format!(r#"{{"text": "answer {i}"}}"#))
            .collect();
        Arc::new(
            ScriptProvider::from_json("t", "t", &format!(r#"{{"turns": [{}]}}"#, turns.join(",")))
                .unwrap(),
        )
    }

    #[tokio::test]
    async fn usage_is_counted_per_identity_and_summed() {
        let gateway = Gateway::new(script(3), 2);
        let messages = [Message::user("hi")];
        for identity in ["main", "subagent-1", "main"] {
            let provider = gateway.for_identity(Identity::from_label(identity));
            let request = ChatRequest {
                messages: &messages,
                tools: &[],
                max_output_tokens: None,
                tool_choice: Default::default(),
            };
            provider.complete(request, &|_| {}).await.unwrap();
        }
        let by_identity = gateway.usage_by_identity();
        assert_eq!(by_identity.len(), 2);
        assert_eq!(by_identity[0].0, Identity::Main);
        assert_eq!(by_identity[0].1.requests, 2);
        assert_eq!(by_identity[1].1.requests, 1);
        assert_eq!(gateway.totals().requests, 3);
        assert_eq!(
            gateway
                .for_identity(Identity::Main)
                .usage_totals()
                .unwrap()
                .requests,
            3
        );
    }

    #[tokio::test]
    async fn another_model_is_asked_through_the_same_accounts() {
        let other: Arc<dyn Provider> = Arc::new(
            ScriptProvider::from_json("t", "small", r#"{"turns": [{"text": "from small"}]}"#)
                .unwrap(),
        );
        let models = BTreeMap::from([("small".to_string(), other)]);
        let gateway = Gateway::with_models(script(1), models, 1);
        let messages = [Message::user("hi")];
        let request = || ChatRequest {
            messages: &messages,
            tools: &[],
            max_output_tokens: None,
            tool_choice: Default::default(),
        };
        let answer = gateway
            .complete_with(
                &Identity::subagent("sub-1"),
                Some("small"),
                request(),
                &|_| {},
            )
            .await
            .unwrap();
        assert!(
            matches!(&answer.message, Message::Assistant { content: Some(text), .. } if text == "from small"),
            "{:?}",
            answer.message
        );
        let err = gateway
            .complete_with(
                &Identity::subagent("sub-1"),
                Some("nope"),
                request(),
                &|_| {},
            )
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("no provider for model nope"),
            "{err}"
        );
        assert_eq!(gateway.totals().requests, 1);
    }

    /// A provider that counts the requests it has in flight, each held
    /// for a moment before the script answers it.
    struct Counting {
        script: Arc<dyn Provider>,
        in_flight: std::sync::atomic::AtomicUsize,
        most: std::sync::atomic::AtomicUsize,
    }

    impl Provider for Counting {
        fn name(&self) -> &str {
            "counting"
        }

        fn model(&self) -> &str {
            "t"
        }

        fn complete<'a>(
            &'a self,
            request: ChatRequest<'a>,
            notices: NoticeSink<'a>,
        ) -> CompletionFuture<'a> {
            use std::sync::atomic::Ordering::SeqCst;
            Box::pin(async move {
                let now = self.in_flight.fetch_add(1, SeqCst) + 1;
                self.most.fetch_max(now, SeqCst);
                tokio::time::sleep(Duration::from_millis(30)).await;
                self.in_flight.fetch_sub(1, SeqCst);
                self.script.complete(request, notices).await
            })
        }
    }

    /// On paused time, the requests' 30 ms holds cost no wall time.
    #[tokio::test(start_paused = true)]
    async fn no_more_requests_than_provider_concurrency_are_in_flight() {
        let counting = Arc::new(Counting {
            script: script(6),
            in_flight: Default::default(),
            most: Default::default(),
        });
        let gateway = Gateway::new(counting.clone(), 2);
        let messages = [Message::user("hi")];
        let started = Instant::now();
        let requests = (0..6).map(|i| {
            let provider = gateway.for_identity(Identity::subagent(format!("subagent-{i}")));
            let messages = &messages;
            async move {
                let request = ChatRequest {
                    messages,
                    tools: &[],
                    max_output_tokens: None,
                    tool_choice: Default::default(),
                };
                provider.complete(request, &|_| {}).await
            }
        });
        let answers = futures_util::future::join_all(requests).await;
        assert!(answers.iter().all(Result::is_ok), "{answers:?}");
        let most = counting.most.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(most, 2, "the gateway let {most} requests in at once");
        assert_eq!(gateway.totals().requests, 6);
        // Two at a time all along: three rounds of 30 ms.
        assert_eq!(started.elapsed(), Duration::from_millis(90));
    }

    /// On paused time: the request waits exactly the longest back-off.
    #[tokio::test(start_paused = true)]
    async fn a_rate_limit_holds_back_every_new_request() {
        let gateway = Gateway::new(script(1), 4);
        gateway.back_off(Duration::from_millis(200));
        // A shorter back-off never shortens a running one.
        gateway.back_off(Duration::from_millis(10));
        let start = Instant::now();
        let messages = [Message::user("hi")];
        let request = ChatRequest {
            messages: &messages,
            tools: &[],
            max_output_tokens: None,
            tool_choice: Default::default(),
        };
        gateway
            .complete_as(&Identity::subagent("subagent-1"), request, &|_| {})
            .await
            .unwrap();
        assert_eq!(start.elapsed(), Duration::from_millis(200));
        assert!(is_rate_limit("HTTP 429 Too Many Requests"));
        assert!(!is_rate_limit("HTTP 503"));
    }
}
