// @compactor/client: the HTTP API of a compactor worker, typed from its
// OpenAPI document, and converters between its messages and those of the
// SDKs chat backends use.
export { Compactor, VERSION } from "./client.js";
export type { AppendOptions, CallOptions, CompactorOptions, FinalizeOptions, WaitOptions } from "./client.js";
export {
  ApiError,
  CompactorError,
  ConversionError,
  NetworkError,
  TimeoutError,
  UnexpectedResponseError,
  isApiError,
} from "./errors.js";
export type { RetryEvent, RetryOptions } from "./retry.js";
export * from "./types.js";
export { PRUNED_PLACEHOLDER, callToolNames } from "./convert/common.js";
export { fromOpenAI, toOpenAI } from "./convert/openai.js";
export type { FromOpenAIOptions, OpenAIMessage, OpenAIMessageInput } from "./convert/openai.js";
export { fromAnthropic, toAnthropic } from "./convert/anthropic.js";
export type {
  AnthropicBlock,
  AnthropicMessage,
  AnthropicMessageInput,
  AnthropicRequest,
  FromAnthropicOptions,
} from "./convert/anthropic.js";
export { fromModelMessages, toModelMessages } from "./convert/ai-sdk.js";
export type { AiModelMessage, AiModelMessageInput } from "./convert/ai-sdk.js";
export type { components, operations, paths } from "./generated/openapi.js";
