// Write justonce tools in JavaScript (or TypeScript, with justonce.d.ts).
//
// A justonce tool is a WebAssembly component that an AI agent calls with JSON
// arguments. It reaches the world only through `perform` (and the `http` helpers on
// top of it), and the host guards every such call with an idempotency key, so an
// agent that retries a call never causes a side effect twice. See README.md.

import { perform as witPerform } from 'justonce:tool/effects@0.1.0';
import { write as witLog } from 'justonce:tool/log@0.1.0';
import { add as witAddContent } from 'justonce:tool/content@0.1.0';
import { report as witProgress } from 'justonce:tool/progress@0.1.0';
import { ask as witAsk } from 'justonce:tool/input@0.1.0';

// ---------------------------------------------------------------------------
// JSON with exact integers

// Number literals and strings in JSON text (strings first, so digits inside them are
// skipped).
const JSON_TOKENS = /"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;

/**
 * `JSON.parse`, except that an integer literal a double cannot hold exactly (beyond
 * `Number.MAX_SAFE_INTEGER`) becomes a `BigInt` of its digits instead of a rounded
 * number. (`JSON.parse`'s source-text access is not in this engine.)
 */
export function parseJson(text) {
  if (!/\d{16}/.test(text)) return JSON.parse(text);
  // Each such literal is swapped for a string marked with a tag the text does not
  // hold, which the reviver turns back into a BigInt.
  const marker = `\u0000bigint-${freshTag(text)}:`;
  const marked = text.replace(JSON_TOKENS, (token) =>
    token[0] === '"' || !/^-?\d+$/.test(token) || Number.isSafeInteger(Number(token))
      ? token
      : JSON.stringify(marker + token),
  );
  return JSON.parse(marked, (_, value) =>
    typeof value === 'string' && value.startsWith(marker)
      ? BigInt(value.slice(marker.length))
      : value,
  );
}

/** `JSON.stringify`, except that a `BigInt` is written as its digits (a JSON number). */
export function stringifyJson(value) {
  if (!containsBigInt(value)) return JSON.stringify(value);
  const plain = JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? '' : v));
  const marker = `\u0000bigint-${freshTag(plain)}:`;
  const text = JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? marker + v : v));
  const quoted = JSON.stringify(marker).slice(0, -1);
  return text.replaceAll(new RegExp(`${escapeRegExp(quoted)}(-?\\d+)"`, 'g'), '$1');
}

/** A tag (`t0`, `t1`, …) that `text` does not contain. */
function freshTag(text) {
  let n = 0;
  while (text.includes(`bigint-t${n}:`)) n += 1;
  return `t${n}`;
}

function containsBigInt(value) {
  if (typeof value === 'bigint') return true;
  if (value === null || typeof value !== 'object') return false;
  return Object.values(value).some(containsBigInt);
}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

// ---------------------------------------------------------------------------
// Errors

/** A failure the tool reports to the agent: throw it from `call`. */
export class ToolError extends Error {
  constructor(code, message, details) {
    super(`${code}: ${message}`);
    this.name = 'ToolError';
    this.code = code;
    this.toolMessage = message;
    this.details = details;
  }
}

/** Why an effect did not produce a usable response. */
export class EffectError extends Error {
  constructor(kind, code, prefix, text) {
    super(`${prefix}: ${text}`);
    this.name = 'EffectError';
    /** `rejected`, `outcome-unknown`, `denied`, `divergence`, `bad-response` or `bad-payload`. */
    this.kind = kind;
    /** The tool error code the agent is told if the tool lets this escape. */
    this.code = code;
    this.text = text;
  }

  /** The tool error the agent is told when the tool lets this escape. */
  toToolError() {
    if (this.kind === 'rejected') {
      return new ToolError(this.code, this.message, this.answer);
    }
    if (this.kind === 'outcome-unknown') {
      return new ToolError(
        this.code,
        `${this.message}. Retrying the same call is safe: it will not repeat the effect.`,
      );
    }
    return new ToolError(this.code, this.message);
  }
}

const EFFECT_ERRORS = {
  rejected: ['effect_rejected', 'effect rejected'],
  'outcome-unknown': ['outcome_unknown', 'effect outcome unknown'],
  denied: ['effect_denied', 'effect denied'],
  divergence: ['divergence', 'effect diverged from the journal'],
  'bad-response': ['bad_effect_response', 'unexpected effect response'],
  'bad-payload': ['bad_effect_payload', 'effect payload is not serializable'],
};

/** A downstream's answer as a person reads it, in a message: the text of a string;
 * for an object with a `message`, that message after its `error` or `code`
 * (`invalid_recipient: ...`); else its JSON. The whole answer stays in the details. */
export function readable(answer) {
  if (typeof answer === 'string') return answer;
  if (answer && typeof answer === 'object' && typeof answer.message === 'string') {
    for (const field of ['error', 'code']) {
      const code = answer[field];
      if (typeof code === 'string' || typeof code === 'number') return `${code}: ${answer.message}`;
    }
    return answer.message;
  }
  return JSON.stringify(answer);
}

function effectError(kind, text, answer) {
  const [code, prefix] = EFFECT_ERRORS[kind] ?? ['effect_error', 'effect failed'];
  const error = new EffectError(kind, code, prefix, text);
  if (kind === 'rejected') error.answer = answer;
  return error;
}

// ---------------------------------------------------------------------------
// Uncaught exceptions

// The lines around an uncaught exception's report on stderr, which the host reads as
// the trap's message (host/src/runtime/panic_message.rs).
const UNCAUGHT_START = 'justonce: uncaught exception:';
const UNCAUGHT_END = 'justonce: end of report';
// The stack lines the agent is told (the log gets them all), and the report's size:
// the host reads the last 4 KiB of stderr.
const REPORT_FRAMES = 3;
const REPORT_CHARS = 2000;

/** What was thrown, as the agent is told it: its type and message (`TypeError: x is
 * not a function`), then the first lines of its stack, where it has one. */
export function describeThrown(thrown, frames = REPORT_FRAMES) {
  let head;
  let stack = [];
  if (thrown instanceof Error) {
    head = `${thrown.name || 'Error'}: ${thrown.message}`;
    if (typeof thrown.stack === 'string') {
      stack = thrown.stack
        .split('\n')
        .map((line) => line.trim().replace(/^at /, ''))
        // componentize-js's own glue (`initializer.js`) says nothing to the author;
        // V8 (a tool's unit tests on Node) repeats the head first.
        .filter((line) => line !== '' && !/initializer\.js:\d+/.test(line) && line !== head);
    }
  } else {
    let text;
    try {
      text = typeof thrown === 'string' ? thrown : stringifyJson(thrown);
    } catch {
      text = undefined;
    }
    head = `a ${thrown === null ? 'null' : typeof thrown} was thrown, not an Error: ${text ?? String(thrown)}`;
  }
  const lines = [head, ...stack.slice(0, frames).map((line) => `    at ${line}`)];
  if (stack.length > frames) lines.push(`    … ${stack.length - frames} more in the host's log`);
  return lines.join('\n');
}

/**
 * Ends the call with a `panic` trap that says what was thrown, as a Rust tool's panic
 * says its message: anything but a `ToolError` escaping `call` is a bug in the tool.
 * Its whole stack goes to the host's log at `error`; the report that becomes the
 * trap's message goes to stderr, where the host reads it once the runtime has trapped
 * (componentize-js says only that the error was not a `tool-error`).
 */
function trapWith(thrown) {
  try {
    witLog('error', `the tool threw ${describeThrown(thrown, Infinity)}`);
  } catch {
    // The log is for the author; the report below is what the agent needs.
  }
  let report = describeThrown(thrown);
  if (report.length > REPORT_CHARS) report = `${report.slice(0, REPORT_CHARS)}…`;
  console.error(`\n${UNCAUGHT_START}\n${report}\n${UNCAUGHT_END}`);
  // Rethrown, it is not a `tool-error`: componentize-js traps (`unreachable`), which
  // the host reports as a `panic` with the report above.
  throw thrown;
}

// A tool is built without `fetch` (`-d http -d fetch-event`): HTTP goes through the
// host's `http` provider, which keys and journals every request. A call says so
// instead of failing somewhere inside the runtime. (On Node, where a tool's own unit
// tests run, Node's `fetch` stays.)
export function fetch() {
  throw new Error(
    'fetch is not available in a justonce tool: make HTTP requests through the ' +
      "host's `http` provider, with the SDK's `http` (http.get(url), " +
      'http.post({ service, path }, { json })), which keys and journals each one',
  );
}
if (typeof globalThis.process?.versions?.node !== 'string') globalThis.fetch = fetch;

// ---------------------------------------------------------------------------
// Effects

/**
 * Performs one side effect through `provider` and returns its response, parsed.
 * Throws an `EffectError` when the effect gives no usable response.
 */
export function perform(provider, operation, payload) {
  let text;
  try {
    text = stringifyJson(payload);
  } catch (e) {
    throw effectError('bad-payload', String(e?.message ?? e));
  }
  if (text === undefined) throw effectError('bad-payload', 'the payload is not JSON data');
  const response = performText(provider, operation, text);
  try {
    return JSON.parse(response);
  } catch (e) {
    throw effectError('bad-response', String(e?.message ?? e));
  }
}

/** Performs one side effect with a JSON text payload; returns the JSON text. */
export function performText(provider, operation, payload) {
  try {
    return witPerform(provider, operation, payload);
  } catch (e) {
    throw fromWit(e);
  }
}

/** What the bindings threw as an `EffectError`: the `effect-error` variant, wrapped
 * or bare; anything else as it is. */
function fromWit(e) {
  const variant = e?.payload ?? e;
  if (!variant || typeof variant.tag !== 'string') return e;
  if (variant.tag === 'rejected') {
    let answer;
    try {
      answer = JSON.parse(variant.val);
    } catch {
      // The host sends JSON; keep a non-JSON answer rather than lose it.
      answer = variant.val;
    }
    return effectError('rejected', readable(answer), answer);
  }
  return effectError(variant.tag, variant.val);
}

// ---------------------------------------------------------------------------
// Asking the person behind the agent (MCP elicitation)

/** The person's answer (an MCP `ElicitResult`): `action` is `accept`, `decline` or
 * `cancel`; an accepted one has the `content` its schema describes. */
export class Answer {
  constructor(action, content = undefined) {
    this.action = action;
    this.content = content;
  }

  /** Whether the person accepted (and filled in the form). */
  get accepted() {
    return this.action === 'accept';
  }

  /** A field of an accepted answer's content, or `fallback`. */
  get(field, fallback = undefined) {
    if (!this.accepted || this.content === null || typeof this.content !== 'object') {
      return fallback;
    }
    return Object.hasOwn(this.content, field) ? this.content[field] : fallback;
  }
}

/**
 * Asks the person behind the agent one question and returns their `Answer`.
 * `schema` is the JSON Schema of the answer's content: a flat object (MCP's
 * `requestedSchema`). Guarded like an effect: a retry or a resumed call gets the
 * same answer without asking again. Throws an `EffectError` when there is none.
 */
export function ask(message, schema, name = 'answer') {
  return askAll([{ name, message, schema }])[0];
}

/** Asks several questions at once (`{ name, message, schema }` each, names unique)
 * and returns their `Answer`s in order. */
export function askAll(questions) {
  let asked;
  try {
    asked = questions.map(({ name, message, schema }) => ({
      name,
      message,
      schema: stringifyJson(schema),
    }));
  } catch (e) {
    throw effectError('bad-payload', String(e?.message ?? e));
  }
  let texts;
  try {
    texts = witAsk(asked);
  } catch (e) {
    throw fromWit(e);
  }
  return texts.map((text) => {
    let result;
    try {
      result = JSON.parse(text);
    } catch (e) {
      throw effectError('bad-response', String(e?.message ?? e));
    }
    if (!result || typeof result.action !== 'string') {
      throw effectError('bad-response', `not an ElicitResult: ${text}`);
    }
    return new Answer(result.action, result.content ?? undefined);
  });
}

// ---------------------------------------------------------------------------
// HTTP through the host's `http` provider; webhooks through its `outbox`.

/** The provider payload of a request (the Rust SDK's `http::Request`). */
function httpPayload(method, target, options = {}) {
  const { headers, json, body, record } = options;
  const request = { method };
  if (typeof target === 'string') {
    request.url = target;
  } else if (target && typeof target.service === 'string') {
    request.service = target.service;
    request.path = target.path ?? '/';
  } else {
    throw new TypeError('give a URL or { service, path }');
  }
  if (json !== undefined && body !== undefined) {
    throw new TypeError('give either `json` or `body`, not both');
  }
  if (headers && Object.keys(headers).length > 0) request.headers = { ...headers };
  if (body !== undefined) request.body = body;
  if (json !== undefined) request.json = json;
  if (record) request.record = true;
  return request;
}

class Response {
  constructor({ status, headers = {}, body = '', truncated = false }) {
    this.status = status;
    this.headers = headers;
    this.body = body;
    this.truncated = truncated;
  }

  get ok() {
    return this.status >= 200 && this.status < 300;
  }

  json() {
    try {
      return JSON.parse(this.body);
    } catch (e) {
      throw effectError(
        'bad-response',
        `the ${this.status} response body is not the JSON expected: ${e.message}`,
      );
    }
  }
}

function request(method, target, options) {
  return new Response(perform('http', 'request', httpPayload(method, target, options)));
}

export const http = {
  request,
  get: (target, options) => request('GET', target, options),
  post: (target, options) => request('POST', target, options),
  put: (target, options) => request('PUT', target, options),
  delete: (target, options) => request('DELETE', target, options),
  enqueue: (method, target, options) =>
    perform('outbox', 'enqueue', httpPayload(method, target, options)),
  payload: httpPayload,
};

// ---------------------------------------------------------------------------
// Log (not an effect: not journaled, and a replayed call logs nothing)

export const log = Object.fromEntries(
  ['trace', 'debug', 'info', 'warn', 'error'].map((level) => [
    level,
    (message) => witLog(level, String(message)),
  ]),
);

/**
 * Reports that `done` of `total` (if known) is done, and what is happening, to a
 * client that asked to hear (MCP's `notifications/progress`). Each report's `done`
 * should be larger than the last; the host drops one that is not. Not an effect: not
 * journaled, and a replayed call reports nothing.
 */
export function progress(done, total = undefined, message = undefined) {
  witProgress(Number(done), total === undefined ? undefined : Number(total), message);
}

// ---------------------------------------------------------------------------
// Results beyond JSON: text, images, sounds and resources for the agent.

/** Content parts of a `rich` result, as MCP's content blocks. Bytes are a
 * `Uint8Array` (sent in base64). */
export const content = {
  /** Text for the agent to read. */
  text: (text) => ({ tag: 'text', val: String(text) }),
  /** An image of `data` in `mimeType` (such as `image/png`). */
  image: (data, mimeType) => ({ tag: 'image', val: { data: bytes(data), mimeType } }),
  /** A sound of `data` in `mimeType` (such as `audio/wav`). */
  audio: (data, mimeType) => ({ tag: 'audio', val: { data: bytes(data), mimeType } }),
  /** A link to the resource at `uri` called `name`. */
  resourceLink: (uri, name, { description, mimeType } = {}) => ({
    tag: 'resource-link',
    val: { uri, name, description, mimeType },
  }),
  /** The resource at `uri` carried in the result: `text` of `mimeType`. */
  resourceText: (uri, mimeType, text) => ({
    tag: 'embedded',
    val: { uri, mimeType, body: { tag: 'text', val: String(text) } },
  }),
  /** The resource at `uri` carried in the result: the bytes `blob` of `mimeType`. */
  resourceBlob: (uri, mimeType, blob) => ({
    tag: 'embedded',
    val: { uri, mimeType, body: { tag: 'blob', val: bytes(blob) } },
  }),
};

function bytes(data) {
  if (data instanceof Uint8Array) return data;
  if (Array.isArray(data)) return Uint8Array.from(data);
  throw new TypeError('content bytes must be a Uint8Array or an array of bytes');
}

const RICH = Symbol('justonce.rich');

/** A result in `parts` (made with `content.*`) and, optionally, a `structured`
 * value besides them (declare its schema with `output` in `tool`). */
export function rich(parts, structured = null) {
  if (!Array.isArray(parts)) throw new TypeError('`parts` must be an array of content parts');
  return { [RICH]: true, parts, structured };
}

// ---------------------------------------------------------------------------
// Argument schemas: JSON Schema built from code, with TypeScript types inferred.

class Schema {
  constructor(json, extra = {}) {
    this.json = json;
    this.isOptional = extra.isOptional ?? false;
    this.hasDefault = extra.hasDefault ?? false;
    this.defaultValue = extra.defaultValue;
    this.fields = extra.fields;
    this.item = extra.item;
    this.isBigInt = extra.isBigInt ?? false;
  }

  #with(json, extra) {
    return new Schema(json, {
      isOptional: this.isOptional,
      hasDefault: this.hasDefault,
      defaultValue: this.defaultValue,
      fields: this.fields,
      item: this.item,
      isBigInt: this.isBigInt,
      ...extra,
    });
  }

  /** A description the agent reads. */
  describe(text) {
    return this.#with({ ...this.json, description: text });
  }

  /** May be left out or `null` (the same call); the tool then sees `undefined`.
   * Its property's schema says both: not required, and `anyOf` it or `null`. */
  optional() {
    return this.#with(this.json, { isOptional: true });
  }

  /** May be left out; the tool then sees `value`. */
  default(value) {
    return this.#with({ ...this.json, default: value }, { hasDefault: true, defaultValue: value });
  }

  /** Adds JSON Schema keywords, such as `{ minimum: 1 }`. */
  with(keywords) {
    return this.#with({ ...this.json, ...keywords });
  }

  /** For an `s.integer()`: the tool always sees a `BigInt`, whatever its size. */
  bigint() {
    return this.#with(this.json, { isBigInt: true });
  }
}

export const s = {
  string: (keywords = {}) => new Schema({ type: 'string', ...keywords }),
  integer: (keywords = {}) => new Schema({ type: 'integer', ...keywords }),
  /** A 64-bit id (`format: "uint64"`) that may also come as its decimal digits in a
   * string, as APIs send big ids; the host hands the tool the number either way, and
   * the tool sees a `BigInt`. */
  uint64: (keywords = {}) =>
    new Schema(
      { type: ['integer', 'string'], format: 'uint64', minimum: 0, pattern: '^(0|[1-9][0-9]*)$', ...keywords },
      { isBigInt: true },
    ),
  /** As `uint64`, signed (`format: "int64"`). */
  int64: (keywords = {}) =>
    new Schema(
      { type: ['integer', 'string'], format: 'int64', pattern: '^(0|-?[1-9][0-9]*)$', ...keywords },
      { isBigInt: true },
    ),
  number: (keywords = {}) => new Schema({ type: 'number', ...keywords }),
  boolean: () => new Schema({ type: 'boolean' }),
  enum: (values) => new Schema({ enum: [...values] }),
  array: (item, keywords = {}) =>
    new Schema({ type: 'array', items: item.json, ...keywords }, { item }),
  /** A closed object: properties not declared are refused (`additionalProperties: false`). */
  object: (fields) => {
    const properties = {};
    const required = [];
    for (const [name, field] of Object.entries(fields)) {
      const optional = field.isOptional && !field.hasDefault;
      properties[name] = optional ? orNull(field.json) : field.json;
      if (!field.isOptional && !field.hasDefault) required.push(name);
    }
    const json = { type: 'object', properties };
    if (required.length > 0) json.required = required;
    json.additionalProperties = false;
    return new Schema(json, { fields });
  },
};

/** The schema of an optional property: `json` or `null`, as the Python SDK's
 * `Optional[T]` and the Rust SDK's `Option<T>` say it (the SDK reads `null` as left
 * out, and so does the host). Its description stays where agents read it. A
 * defaulted property is not marked so: there the host takes a `null` for "not
 * given" and fills the default, as the SDK does. */
function orNull(json) {
  const { description, ...inner } = json;
  const schema = { anyOf: [inner, { type: 'null' }] };
  if (description !== undefined) schema.description = description;
  return schema;
}

/** `value` as the schema describes it: defaults filled in, `null` for an optional
 * property the same as leaving it out. */
function fill(schema, value) {
  if (value === null || value === undefined) {
    return schema.hasDefault ? scalar(schema, structuredClone(schema.defaultValue)) : undefined;
  }
  if (schema.fields && typeof value === 'object' && !Array.isArray(value)) {
    const out = {};
    for (const [name, field] of Object.entries(schema.fields)) {
      const v = fill(field, value[name]);
      if (v !== undefined) out[name] = v;
    }
    return out;
  }
  if (schema.item && Array.isArray(value)) return value.map((v) => fill(schema.item, v));
  return scalar(schema, value);
}

/** An integer as a `BigInt` where the schema says `.bigint()`; a `number` as one. */
function scalar(schema, value) {
  if (schema.isBigInt && typeof value === 'number') {
    return BigInt(value);
  }
  // A `number` is a double: one past 2^53 is as close as a double gets.
  if (schema.json.type === 'number' && typeof value === 'bigint') return Number(value);
  return value;
}

// ---------------------------------------------------------------------------
// The tool

const NAME = /^[a-z0-9_-]+$/;
/** The keyword at the root of the input schema that marks a read-only tool (the host
 * reads it and removes it from the schema agents see). */
export const READ_ONLY_KEYWORD = 'x-justonce-read-only';
/** The keyword there that carries the JSON Schema of the tool's result. */
export const OUTPUT_SCHEMA_KEYWORD = 'x-justonce-output-schema';

/**
 * Makes the component's exports from a tool definition:
 * `export const { describe, call } = tool({ name, description, args, call })`.
 */
export function tool(definition) {
  const { name, description, args, call, readOnly = false, output } = definition;
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new TypeError(`tool name ${JSON.stringify(name)}: lowercase letters, digits, _ or -`);
  }
  if (!args || !args.fields) throw new TypeError('`args` must be an s.object({...})');
  if (typeof readOnly !== 'boolean') throw new TypeError('`readOnly` must be true or false');
  if (output !== undefined && output?.json?.type !== 'object') {
    throw new TypeError('`output` must be an s.object({...})');
  }
  const inputSchema = stringifyJson({
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    ...args.json,
    // In the schema's root, so the ABI's `tool-info` stays as it is.
    ...(readOnly ? { [READ_ONLY_KEYWORD]: true } : {}),
    ...(output ? { [OUTPUT_SCHEMA_KEYWORD]: output.json } : {}),
  });
  return {
    describe() {
      return { name, description, inputSchema };
    },
    call(argsJson) {
      try {
        let parsed;
        try {
          parsed = parseJson(argsJson);
        } catch (e) {
          throw new ToolError(
            'invalid_arguments',
            `The arguments do not match the input schema: ${e.message}`,
          );
        }
        const result = call(fill(args, parsed));
        if (result && result[RICH]) {
          const text = stringifyJson(result.structured ?? null);
          for (const part of result.parts) witAddContent(part);
          return text;
        }
        const text = stringifyJson(result ?? null);
        return text;
      } catch (e) {
        let error = e;
        if (error instanceof EffectError) error = error.toToolError();
        if (!(error instanceof ToolError)) trapWith(error);
        throw {
          payload: {
            code: error.code,
            message: error.toolMessage,
            details: error.details === undefined ? undefined : stringifyJson(error.details),
          },
        };
      }
    },
  };
}

/**
 * A tool's own probe of its effects, the component's `reconcile` export:
 * `export const reconcile = reconciler((effect) => ...)` beside `describe` and `call`,
 * built with `componentize-js -n reconciling-tool`. `effect` is `{ provider,
 * operation, payload, key }` (the payload parsed); return `{ performed: response }`,
 * `{ notPerformed: true }` or `{ unknown: why }`. It runs with reads only: an effect
 * or a question to the user stops it with a trap.
 */
export function reconciler(reconcile) {
  if (typeof reconcile !== 'function') throw new TypeError('reconciler takes a function');
  return (effect) => {
    let payload;
    try {
      payload = parseJson(effect.payload);
    } catch (e) {
      return { tag: 'unknown', val: `the payload is not JSON: ${e.message}` };
    }
    let found;
    try {
      found = reconcile({ provider: effect.provider, operation: effect.operation, payload, key: effect.key });
    } catch (e) {
      if (e instanceof EffectError) return { tag: 'unknown', val: e.message };
      trapWith(e);
    }
    if (found && 'performed' in found) return { tag: 'performed', val: stringifyJson(found.performed ?? null) };
    if (found && found.notPerformed === true) return { tag: 'not-performed' };
    if (found && typeof found.unknown === 'string') return { tag: 'unknown', val: found.unknown };
    trapWith(new TypeError('reconcile must return { performed: response }, { notPerformed: true } or { unknown: why }'));
  };
}
