// probe_js: the same tool as probe_py, for the tests and the bench.

import { perform, s, tool } from '../../../guest-sdk/js/justonce.js';

export const { describe, call } = tool({
  name: 'probe_js',
  description: 'Echoes a message, mails it, or tries what the sandbox denies.',
  args: s.object({
    op: s.enum(['echo', 'mail', 'env']).describe('What to do.'),
    message: s.string().describe("Echoed, or the mail's subject.").default(''),
    email: s.string().optional(),
  }),
  call({ op, message, email }) {
    if (op === 'echo') return { echo: message };
    if (op === 'mail') {
      const sent = perform('mail', 'send', { to: email, subject: message, body: message });
      return { message_id: sent.message_id };
    }
    const env = globalThis.process?.env ?? {};
    return { opened: Object.keys(env).length > 0, environ: env };
  },
});
