// Names for the API's types, taken from the generated document types
// (src/generated/openapi.ts), so they change when the API does.
import type { components, operations } from "./generated/openapi.js";

type Schemas = components["schemas"];

/** One typed piece of a message: text, tool call, tool result, reasoning or file. */
export type Part = Schemas["Part"];
export type TextPart = Extract<Part, { type: "text" }>;
export type ToolCallPart = Extract<Part, { type: "tool_call" }>;
export type ToolResultPart = Extract<Part, { type: "tool_result" }>;
export type ReasoningPart = Extract<Part, { type: "reasoning" }>;
export type FilePart = Extract<Part, { type: "file" }>;
/** Who produced a message. */
export type Role = Schemas["Role"];
/** A message as app code hands it over (the store assigns its id). */
export type IncomingMessage = Schemas["IncomingMessage"];
/** A message of a built context (`source`: the stored message it shows, or null). */
export type ContextMessage = Schemas["ContextMessage"];
/** Anything with a role and parts: an incoming, stored, recalled or context message. */
export interface MessageLike {
  role: Role;
  parts: Part[];
}
export type MessageId = Schemas["MessageId"];
export type Usage = Schemas["Usage"];
export type AppendResponse = Schemas["AppendResponse"];
export type TurnOutcome = Schemas["TurnOutcome"];
export type EnqueueOutcome = Schemas["EnqueueOutcome"];
export type Readiness = Schemas["Readiness"];
export type WaitPhase = Schemas["WaitPhase"];
export type TurnContext = Schemas["TurnContext"];
export type WorkstreamStatus = Schemas["WorkstreamStatus"];
export type RunsPage = Schemas["RunsPage"];
export type Recall = Schemas["Recall"];
export type HeadOutcome = Schemas["HeadOutcome"];
export type WorkstreamsPage = Schemas["WorkstreamsPage"];
export type QueueOverview = Schemas["QueueOverview"];
export type PauseState = Schemas["PauseState"];
export type JobsPage = Schemas["JobsPage"];
export type JobSummary = Schemas["JobSummary"];
export type CancelReply = Schemas["CancelReply"];
export type CancelThen = Schemas["CancelThen"];
export type WorkersList = Schemas["WorkersList"];
export type DeadLettersPage = Schemas["DeadLettersPage"];
export type BulkRequest = Schemas["BulkRequest"];
/**
 * Which dead letters a bulk retry or purge takes: its fields narrow
 * together, and `all: true` is needed when none is given (the server
 * refuses an empty filter with `invalid_body`).
 */
export type DeadLetterFilter = Omit<Extract<BulkRequest, { dry_run: boolean }>, "dry_run" | "after">;
export type RetryReport = Schemas["RetryReport"];
export type PurgeReport = Schemas["PurgeReport"];
export type DeliveriesPage = Schemas["DeliveriesPage"];
export type RetriedMany = Schemas["RetriedMany"];
export type RetriedOne = Schemas["RetriedOne"];
/** Every code an error body can carry. */
export type ErrorCode = Schemas["ErrorCode"];
export type ErrorBody = Schemas["ErrorBody"];

type Query<Op extends keyof operations> = NonNullable<operations[Op]["parameters"]["query"]>;
export type RunsQuery = Query<"runs">;
export type RecallQuery = Omit<Query<"recall">, "q">;
export type WorkstreamsQuery = Query<"listWorkstreams">;
export type JobsQuery = Query<"listJobs">;
export type DeadLettersQuery = Query<"listDeadLetters">;
export type DeliveriesQuery = Query<"listDeliveries">;
export type RetryDeliveriesQuery = Query<"retryDeliveries">;
/** What `/wait` covers: the whole requested compaction, or only a running one. */
export type WaitMode = NonNullable<Query<"wait">["mode"]>;

/**
 * A workstream: one conversation, named by a domain (1-32 of `a-z 0-9 _ -`,
 * starting with a letter) and an entity id (1-128 of `A-Z a-z 0-9 _ - .`).
 */
export interface WorkstreamKey {
  domain: string;
  entity: string;
}
