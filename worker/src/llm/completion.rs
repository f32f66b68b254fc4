//! One completion request and its reply, independent of the provider.

/// What to ask the model (a [`compactor_shared::prompt::Prompt`] borrowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlmRequest<'a> {
    pub system: &'a str,
    pub user: &'a str,
    pub max_output_tokens: u64,
}

impl<'a> From<&'a compactor_shared::prompt::Prompt> for LlmRequest<'a> {
    fn from(prompt: &'a compactor_shared::prompt::Prompt) -> Self {
        LlmRequest {
            system: &prompt.system,
            user: &prompt.user,
            max_output_tokens: prompt.max_output_tokens,
        }
    }
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmResponse {
    /// The text content (never empty: an empty reply is [`super::LlmError::Empty`]).
    pub text: String,
    /// The model that answered, as the server reports it (the requested one
    /// when it does not say).
    pub model: String,
    pub usage: TokenUsage,
    /// The model stopped on the output-token limit: `text` may end mid-way.
    pub truncated: bool,
}

/// Tokens the server counted; zero when it did not report them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// The requests of one or more completions, for the audit trail: every
/// HTTP request is counted, retries and failures included, with the tokens
/// the server reported for it (a failed request usually reports none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Calls {
    /// Requests sent.
    pub sent: u32,
    /// Of those, the ones that gave no usable answer: HTTP and connection
    /// failures, and (counted by the caller that checks answers) answers
    /// that were rejected.
    pub failed: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The model that last answered, as the server reports it.
    pub model: Option<String>,
}

impl Calls {
    /// One request: whether it failed, what the server reported.
    pub(crate) fn record(&mut self, failed: bool, usage: TokenUsage, model: Option<&str>) {
        self.sent = self.sent.saturating_add(1);
        if failed {
            self.failed = self.failed.saturating_add(1);
        }
        self.input_tokens = self.input_tokens.saturating_add(usage.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(usage.output_tokens);
        if let Some(model) = model {
            self.model = Some(model.to_owned());
        }
    }
}
