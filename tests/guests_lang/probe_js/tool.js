// probe_js: the same tool as probe_py, for the tests and the bench.

import { ToolError, ask, content, perform, progress, rich, s, tool } from '../../../guest-sdk/js/justonce.js';

// What `count` calls left in this instance: a fresh instance per call sees only its own.
const seen = [];

export const { describe, call } = tool({
  name: 'probe_js',
  description: 'Echoes a message, mails it (once the person confirms: ask), or tries what the sandbox denies.',
  args: s.object({
    op: s.enum(['echo', 'count', 'mail', 'receipt', 'ask', 'env', 'sleep', 'timer', 'throw', 'type_error', 'fetch', 'tool_error']).describe('What to do.'),
    message: s.string().describe("Echoed, or the mail's subject.").default(''),
    email: s.string().optional(),
  }),
  call({ op, message, email }) {
    if (op === 'echo') return { echo: message };
    if (op === 'count') {
      // 12 MiB written: more than a pooled slot keeps resident between calls.
      seen.push([message, new Uint8Array(12 << 20).fill(1)]);
      return { seen: seen.map(([m]) => m) };
    }
    if (op === 'sleep') {
      // A busy wait for an hour: the guest never yields to the host.
      const end = Date.now() + 3_600_000;
      while (Date.now() < end) { /* spin */ }
      return { slept: true };
    }
    if (op === 'timer') {
      // A timer an hour away, left pending when the call returns.
      setTimeout(() => {}, 3_600_000);
      return { slept: false };
    }
    // Failures: what the agent is told of each.
    if (op === 'throw') throw new Error(`boom from JS: ${message}`);
    if (op === 'type_error') return { length: email.length };
    if (op === 'fetch') return { fetched: fetch('https://example.com/') };
    if (op === 'tool_error') throw new ToolError('card_declined', `declined: ${message}`, { retry: false });
    if (op === 'mail') {
      const sent = perform('mail', 'send', { to: email, subject: message, body: message });
      return { message_id: sent.message_id };
    }
    if (op === 'ask') {
      const answer = ask(
        `Send ${JSON.stringify(message)} to ${email}?`,
        { type: 'object', properties: { confirm: { type: 'boolean' } }, required: ['confirm'] },
        'confirm',
      );
      if (!(answer.accepted && answer.get('confirm'))) return { answer: answer.action, message_id: null };
      const sent = perform('mail', 'send', { to: email, subject: message, body: message });
      return { answer: answer.action, message_id: sent.message_id };
    }
    if (op === 'receipt') {
      progress(1, 2, 'mailing');
      const sent = perform('mail', 'send', { to: email, subject: message, body: message });
      const id = sent.message_id;
      return rich(
        [
          content.text(`Sent ${id}`),
          content.image([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 0xff], 'image/png'),
          content.resourceLink(`mail://${id}`, 'receipt', { mimeType: 'message/rfc822' }),
        ],
        { message_id: id },
      );
    }
    const env = globalThis.process?.env ?? {};
    return { opened: Object.keys(env).length > 0, environ: env };
  },
});
