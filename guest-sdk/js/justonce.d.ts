// Types for justonce.js: write justonce tools in TypeScript.

/** JSON data: what arguments, payloads, responses and results are made of. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A failure the tool reports to the agent: throw it from `call`. It is saved and
 * replayed to any retry like a success. Any other exception is a bug and ends the call
 * as a `panic` trap whose message is `describeThrown` of it. */
export class ToolError extends Error {
  constructor(code: string, message: string, details?: unknown);
  /** A short machine-readable code in `snake_case`, such as `payment_declined`. */
  readonly code: string;
  /** A sentence for the agent that says what went wrong. */
  readonly toolMessage: string;
  /** Optional structured details, sent to the agent as JSON. */
  readonly details?: unknown;
}

/** Why an effect gave no usable response. Left uncaught, the agent is told
 * `toToolError()`: the same codes as the Rust and Python SDKs. */
export class EffectError extends Error {
  readonly kind:
    | 'rejected'
    | 'outcome-unknown'
    | 'denied'
    | 'divergence'
    | 'bad-response'
    | 'bad-payload';
  /** `effect_rejected`, `outcome_unknown`, `effect_denied`, `divergence`,
   * `bad_effect_response` or `bad_effect_payload`. */
  readonly code: string;
  /** For `rejected`: the downstream's answer. */
  readonly answer?: unknown;
  toToolError(): ToolError;
}

/** What an exception other than `ToolError` leaving `call` tells the agent: its type
 * and message (`TypeError: x is not a function`), then the first `frames` lines of its
 * stack. */
export function describeThrown(thrown: unknown, frames?: number): string;
/** A downstream's answer as a rejected effect's message says it: the text of a string;
 * for an object with a `message`, that message after its `error` or `code`; else its
 * JSON. */
export function readable(answer: unknown): string;

/** Not available in a tool (it is built without `fetch`): throws an error that says to
 * use `http`, which the host keys and journals. */
export function fetch(...args: unknown[]): never;

/** Performs one side effect through `provider`, exactly once per position in the
 * call, and returns its response, parsed. Throws an `EffectError`. */
export function perform<Response = any>(provider: string, operation: string, payload: unknown): Response;

/** `perform` with JSON text in and out. */
export function performText(provider: string, operation: string, payload: string): string;

/** The person's answer to a question (an MCP `ElicitResult`). */
export class Answer<Content = { [key: string]: Json }> {
  constructor(action: 'accept' | 'decline' | 'cancel', content?: Content);
  readonly action: 'accept' | 'decline' | 'cancel';
  /** What an accepted answer filled in (the object its schema describes). */
  readonly content?: Content;
  /** Whether the person accepted. */
  readonly accepted: boolean;
  /** A field of an accepted answer's content, or `fallback`. */
  get<K extends keyof Content>(field: K, fallback?: Content[K]): Content[K] | undefined;
}

/** One question: `name` (lowercase letters, digits, `_`; unique within one
 * `askAll`), the `message` the person reads, and the JSON Schema of the answer's
 * content (a flat object, MCP's `requestedSchema`). */
export interface Question {
  name: string;
  message: string;
  schema: Json;
}

/** Asks the person behind the agent one question (MCP elicitation). Guarded like an
 * effect: a retry or a resumed call gets the same answer without asking again.
 * Throws an `EffectError` when there is no answer. */
export function ask<Content = { [key: string]: Json }>(message: string, schema: Json, name?: string): Answer<Content>;

/** Asks several questions at once; their answers in order. */
export function askAll(questions: Question[]): Answer[];

/** Where a request goes: an absolute URL, or a path under a service the host's
 * config names. */
export type Target = string | { service: string; path: string };

export interface RequestOptions {
  /** Extra headers. The idempotency key header is the host's: setting it is refused. */
  headers?: Record<string, string>;
  /** A JSON body (`Content-Type: application/json`). */
  json?: unknown;
  /** A text body. */
  body?: string;
  /** Journal a read (GET, HEAD, OPTIONS) like an effect: a retry gets the first answer. */
  record?: boolean;
}

/** What the downstream answered. Any status is an answer: check `ok`. */
export interface Response {
  readonly status: number;
  /** Header names in lower case. */
  readonly headers: Record<string, string>;
  /** The body as text, cut at the host's limit. */
  readonly body: string;
  /** Whether the body was cut. */
  readonly truncated: boolean;
  /** Whether the status is 2xx. */
  readonly ok: boolean;
  /** The body parsed as JSON; throws a `bad-response` `EffectError` otherwise. */
  json<T = any>(): T;
}

/** A webhook queued in the outbox. */
export interface Queued {
  message_id: number;
  /** `pending` until it is delivered. */
  state: string;
}

/** HTTP through the host's `http` provider (the Rust SDK's `http::Request` shapes).
 * Requests that change something carry the effect's idempotency key. */
export const http: {
  request(method: string, target: Target, options?: RequestOptions): Response;
  get(target: Target, options?: RequestOptions): Response;
  post(target: Target, options?: RequestOptions): Response;
  put(target: Target, options?: RequestOptions): Response;
  delete(target: Target, options?: RequestOptions): Response;
  /** Queues the request in the `outbox`: sent later, once, under the effect key. */
  enqueue(method: string, target: Target, options?: RequestOptions): Queued;
  /** The provider payload of a request. */
  payload(method: string, target: Target, options?: RequestOptions): Json;
};

/** Lines for the host's log; not effects, not journaled. */
export const log: {
  trace(message: string): void;
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
};

/** A piece of an input schema, carrying the TypeScript type of what it accepts. */
export interface Schema<T> {
  /** The JSON Schema. */
  readonly json: Json;
  /** A description the agent reads. */
  describe(text: string): Schema<T>;
  /** May be left out or `null` (the same call); the tool then sees `undefined`.
   * Its property's schema says both: not required, and `anyOf` it or `null`. */
  optional(): Schema<T | undefined>;
  /** May be left out; the tool then sees `value`. */
  default(value: T): Schema<T>;
  /** Adds JSON Schema keywords, such as `{ minimum: 1 }`. */
  with(keywords: Record<string, Json>): Schema<T>;
  /** For an `s.integer()`: the tool always sees a `BigInt`, whatever its size. */
  bigint(): Schema<bigint>;
}

/** The type a schema accepts. */
export type Infer<S> = S extends Schema<infer T> ? T : never;

type Keywords = Record<string, Json>;

/** Schema builders; `s.object` is closed (`additionalProperties: false`). */
/** The keyword at the root of the input schema that marks a read-only tool. */
export const READ_ONLY_KEYWORD: 'x-justonce-read-only';

export const s: {
  string(keywords?: Keywords): Schema<string>;
  /** A `number`; one beyond `Number.MAX_SAFE_INTEGER` arrives as a `BigInt` of its
   * exact digits rather than rounded (`.bigint()` makes every value a `BigInt`). */
  integer(keywords?: Keywords): Schema<number>;
  /** A 64-bit id (`format: "uint64"`) that may also come as its decimal digits in a
   * string; the host hands the tool the number either way, as a `BigInt`. */
  uint64(keywords?: Keywords): Schema<bigint>;
  /** As `uint64`, signed (`format: "int64"`). */
  int64(keywords?: Keywords): Schema<bigint>;
  number(keywords?: Keywords): Schema<number>;
  boolean(): Schema<boolean>;
  enum<const V extends readonly (string | number)[]>(values: V): Schema<V[number]>;
  array<T>(item: Schema<T>, keywords?: Keywords): Schema<T[]>;
  object<F extends Record<string, Schema<any>>>(fields: F): Schema<{ [K in keyof F]: Infer<F[K]> }>;
};

/** A tool: its name, what it does, its arguments and the code that handles a call. */
export interface ToolDefinition<A extends Schema<any>, R> {
  /** The name agents call the tool by: lowercase letters, digits, `_` or `-`. */
  name: string;
  /** One or two sentences an agent reads to decide when to call the tool. */
  description: string;
  /** The arguments, as an `s.object({...})`; their JSON Schema is the input schema. */
  args: A;
  /** `true` for a tool that only reads (MCP's `readOnlyHint`): the host saves none
   * of its outcomes, runs every call, and stops it with a `read_only_effect` trap if
   * it asks for an effect (`http.get` is a read). */
  readOnly?: boolean;
  /** The schema of the structured result (MCP's `outputSchema`), an `s.object`. */
  output?: Schema<any>;
  /** Handles one call, with the arguments checked and defaults filled in. Return
   * JSON data; throw a `ToolError` for the agent to read. */
  call(args: Infer<A>): R;
}

/** The component's exports: `export const { describe, call } = tool({ ... })`. */
export function tool<A extends Schema<any>, R>(
  definition: ToolDefinition<A, R>,
): {
  describe(): { name: string; description: string; inputSchema: string };
  call(args: string): string;
};

/** One part of a `rich` result (an MCP content block). */
export type ContentPart = { tag: string; val: unknown };

/** Content parts of a `rich` result. Bytes are a `Uint8Array` (sent in base64). */
export const content: {
  text(text: string): ContentPart;
  image(data: Uint8Array | number[], mimeType: string): ContentPart;
  audio(data: Uint8Array | number[], mimeType: string): ContentPart;
  resourceLink(
    uri: string,
    name: string,
    options?: { description?: string; mimeType?: string },
  ): ContentPart;
  resourceText(uri: string, mimeType: string, text: string): ContentPart;
  resourceBlob(uri: string, mimeType: string, blob: Uint8Array | number[]): ContentPart;
};

/** A result of content `parts` and, optionally, a `structured` value besides them. */
export interface Rich<T = null> {
  parts: ContentPart[];
  structured: T;
}

/** A result in `parts` and, optionally, a `structured` value besides them. */
export function rich<T = null>(parts: ContentPart[], structured?: T): Rich<T>;

/** Reports that `done` of `total` (if known) is done, and what is happening, to a
 * client that asked to hear (MCP's `notifications/progress`). */
export function progress(done: number, total?: number, message?: string): void;

/** One of the tool's own effects whose outcome is unknown. */
export interface PendingEffect {
  provider: string;
  operation: string;
  /** The payload the tool passed, parsed. */
  payload: unknown;
  /** The idempotency key the provider got with the effect. */
  key: string;
}

/** What a tool's `reconcile` found out. */
export type Reconciled = { performed: unknown } | { notPerformed: true } | { unknown: string };

/** The component's `reconcile` export (the `reconciling-tool` world):
 * `export const reconcile = reconciler((effect) => ...)`. */
export function reconciler(reconcile: (effect: PendingEffect) => Reconciled): (effect: unknown) => unknown;
