// reconcile_js: the Rust guest reconcile_mail in JavaScript, with its own probe
// (`reconcile`): sends one email through `smtp`; asked about it after its answer was
// lost, looks for a message under the effect's key (`find`, a read).

import { perform, reconciler, s, tool } from '../../../guest-sdk/js/justonce.js';

export const { describe, call } = tool({
  name: 'reconcile_mail_js',
  description: 'Sends one email to TO with SUBJECT.',
  args: s.object({ to: s.string(), subject: s.string() }),
  call({ to, subject }) {
    const sent = perform('smtp', 'send', { to, subject });
    return { message_id: sent.message_id, then: `told the caller about ${sent.message_id}` };
  },
});

export const reconcile = reconciler((effect) => {
  const found = perform('smtp', 'find', { key: effect.key });
  if (found === null) return { notPerformed: true };
  return { performed: { message_id: found.message_id } };
});
