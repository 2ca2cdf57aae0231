// open_ticket, in JavaScript: opens a support ticket in the helpdesk over HTTP and
// emails the customer a confirmation. Two effects, each sent once however often the
// agent retries.

import { ToolError, http, log, perform, s, tool } from '../../guest-sdk/js/justonce.js';

export const { describe, call } = tool({
  name: 'open_ticket_js',
  description:
    'Opens a support ticket in the helpdesk for a customer and emails them its number. ' +
    'Retrying the same call opens no second ticket and sends no second email.',
  args: s.object({
    email: s.string().describe("The customer's email address; the confirmation goes there."),
    subject: s.string({ minLength: 3 }).describe('One line that says what the problem is.'),
    details: s.string().describe('What the customer reported, in their words.').default(''),
    priority: s
      .enum(['low', 'normal', 'urgent'])
      .describe('How soon the support team should look.')
      .default('normal'),
  }),
  call(args) {
    if (!args.email.includes('@')) {
      throw new ToolError('invalid_email', 'The email address has no `@`.', { email: args.email });
    }
    const response = http.post(
      { service: 'helpdesk', path: '/v1/tickets' },
      {
        json: {
          requester: args.email,
          subject: args.subject,
          details: args.details,
          priority: args.priority,
        },
      },
    );
    if (!response.ok) {
      throw new ToolError('helpdesk_refused', `The helpdesk answered ${response.status}.`, {
        status: response.status,
        body: response.body,
      });
    }
    const ticket = String(response.json().id);
    log.info(`opened ticket ${ticket} for ${args.email}`);
    const sent = perform('mail', 'send', {
      to: args.email,
      subject: `[#${ticket}] ${args.subject}`,
      body: `We opened ticket #${ticket} for you and will answer soon.`,
    });
    return { ticket, message_id: sent.message_id };
  },
});
